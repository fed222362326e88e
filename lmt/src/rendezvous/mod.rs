//! The rendezvous of large messages between the ranks of one node: a state machine the progress
//! engine drives, after the NEMESIS LMT interface (`shared/reference/nemesis.md`, "Large Message
//! Transfer"), whose steps name its functions: [`Lmt::pre_send`] (the RTS carries the send
//! cookie), [`Lmt::pre_recv`] (the receiver chooses the backend: a ring needs a CTS, a CMA read
//! does not), `start_recv` / `start_send`, `post_recv` / `post_send`, and `handle_cookie` (after a
//! refused single-copy read, the rest moves through a ring from an offset).
//!
//! It sends nothing itself: control messages come out of [`Lmt::take_out`], finished transfers
//! out of [`Lmt::take_done`]. [`Lmt::progress`] moves the data: ring chunks through the caller's
//! [`Rings`], single copies through its [`Copier`] ([`Kernel`] unless [`Lmt::with_copier`] gave
//! another), which makes every system call: the state machine makes none.
//!
//! One file per concept: `config` (backend policy, thresholds), `send` and `receive` (each side's
//! transfers), `split` (a single copy shared by both cores: HELP, HELPED).
//!
//! Invariants:
//! - Rings belong to the receiver: it assigns each ring of its pool to one transfer at a time,
//!   bumping the ring's epoch; the sender writes only into a ring whose epoch is the CTS's.
//!   Transfers beyond the pool wait for a ring.
//! - Each side moves at most `chunks_per_pass` chunks (or `cma_chunk` bytes) per transfer and
//!   pass, so other traffic keeps flowing during a large transfer.
//! - A single copy names only the peer's registered process, checked once
//!   ([`Copier::check`]); an RTS or HELP naming another pid, or a range that wraps, is refused
//!   with nothing read or written.
//! - A receive buffer is the caller's again only when nobody writes into it: a receive whose
//!   sender may still write its part (HELP) ends on HELPED or the sender's death, never before.

mod config;
mod receive;
mod send;
mod split;
#[cfg(all(test, not(loom)))]
mod tests;

use crate::cma::{Batch, Copier, Kernel};
use crate::error::{Error, Result};
use crate::ring::RingRef;
use crate::wire::{Backend, Control};

pub use config::{CMA_MIN_PIECE, Config, PeerConfig, Policy};
use receive::{RecvState, RecvX};
use send::SendX;

/// The caller's handle on a transfer (the Endpoint passes its request).
pub type Token = u64;

/// The node as the transfers see it: ring `index` hosted by local rank `host`, and the process
/// of each local rank.
pub trait Rings {
    /// The ring, or `None` if `host` or `index` is out of range.
    fn ring(&self, host: u16, index: u16) -> Option<RingRef<'_>>;
    /// Rings each rank hosts.
    fn rings_per_rank(&self) -> u16;
    /// The process id local rank `rank` registered in the node's rank table, if single copies
    /// may name it from here (it registered, from our pid namespace); `None` otherwise (its
    /// transfers then go through rings). Every `process_vm_readv`/`writev` names this pid, never
    /// one a message carries: an RTS or HELP whose pid differs is refused ([`Error::Forged`]).
    /// What the slot says is the peer's word: [`Lmt`] checks the process
    /// ([`Copier::check`]) before its first copy, and refuses this process's own pid.
    fn pid(&self, rank: u16) -> Option<u32>;
    /// The start time local rank `rank` registered with its pid (clock ticks since boot), so
    /// that a reused pid is refused; `None` (the default) if not known.
    fn start_time(&self, rank: u16) -> Option<u64> {
        let _ = rank;
        None
    }
}

/// Counts of finished transfers on the receiving side, by how their data moved.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Stats {
    /// Received through a ring only.
    pub ring: u64,
    /// Received by single-copy reads only.
    pub cma: u64,
    /// Started with single-copy reads, finished through a ring (a read was refused).
    pub fallback: u64,
    /// Failed.
    pub failed: u64,
    /// Single-copy transfers split with the sender (HELP sent), counted when they start.
    pub split: u64,
}

/// How a transfer ended, for this side.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Outcome {
    /// `bytes` moved: the whole message, or the receive buffer's length if shorter (truncation).
    Moved {
        /// Bytes moved.
        bytes: u64,
    },
    /// The transfer failed.
    Failed(Error),
}

/// Whether single-copy reads work here.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Cma {
    Unknown,
    Usable,
    Refused,
}

/// The transfers of one process; `C` makes their single copies.
#[derive(Debug)]
pub struct Lmt<C = Kernel> {
    /// Our local rank.
    me: u16,
    cfg: Config,
    /// Per local peer (those beyond use the node-wide values of `cfg`).
    peers: Vec<PeerConfig>,
    /// What the start-up probe or the last single-copy read found.
    cma: Cma,
    /// Our sends in flight, in no order (finished ones leave by `swap_remove`).
    sends: Vec<SendX>,
    /// Our receives in flight, in no order (finished ones leave by `swap_remove`).
    recvs: Vec<RecvX>,
    /// Our pool: which of our rings a transfer holds.
    ring_busy: Vec<bool>,
    /// Transfer id of our next send (wrapping).
    next_id: u32,
    /// Control messages to send, until [`Lmt::take_out`].
    out: Vec<(u16, Control)>,
    /// Finished transfers, until [`Lmt::take_done`].
    done: Vec<(Token, Outcome)>,
    stats: Stats,
    /// Scratch of `progress_cma` (kept to avoid allocating every pass).
    scratch_order: Vec<(u32, usize)>,
    scratch_ends: Vec<(usize, Option<Error>)>,
    /// The iovecs of a pass's single copies (kept to avoid allocating every pass).
    batch: Batch,
    /// Checks peers' processes (once per pid) and makes the single copies.
    io: C,
    /// Peers whose slot names this process are ranks of this process ([`Lmt::allow_own_process`]).
    own_process: bool,
}

// SAFETY: the raw pointers are the caller's buffers of transfers in flight, valid until their
// outcome is taken (the caller's contract); nothing is tied to a thread.
unsafe impl<C: Send> Send for Lmt<C> {}

impl Lmt {
    /// The transfers of local rank `me`, which hosts `rings` rings, copying through the kernel.
    pub fn new(me: u16, rings: u16, cfg: Config) -> Lmt {
        Lmt::with_copier(me, rings, cfg, Kernel::default())
    }
}

impl<C: Copier> Lmt<C> {
    /// As [`Lmt::new`], the single copies made by `io`.
    pub fn with_copier(me: u16, rings: u16, cfg: Config, io: C) -> Lmt<C> {
        Lmt {
            me,
            cfg,
            peers: Vec::new(),
            cma: Cma::Unknown,
            sends: Vec::new(),
            recvs: Vec::new(),
            ring_busy: vec![false; usize::from(rings)],
            next_id: 0,
            out: Vec::new(),
            done: Vec::new(),
            stats: Stats::default(),
            scratch_order: Vec::new(),
            scratch_ends: Vec::new(),
            batch: Batch::default(),
            io,
            own_process: false,
        }
    }

    /// Lets single copies name this process for the peers whose slot names it: ranks run as
    /// threads of one process (and this crate's tests). Without it such a slot is refused
    /// ([`Error::PeerProcess`]) and those transfers go through rings.
    ///
    /// # Safety
    /// Every local peer whose slot names this process must be a rank of this process, and every
    /// HELP such a peer sends must name a range of its receive buffer under the contract of
    /// [`pre_recv`](Self::pre_recv): the sender writes it with `process_vm_writev` on ourselves.
    pub unsafe fn allow_own_process(&mut self) {
        self.own_process = true;
    }

    /// Why single copies with local rank `peer` were refused, if they were
    /// ([`Error::PeerProcess`]): its transfers go through rings.
    pub fn peer_refusal(&self, peer: u16) -> Option<&Error> {
        self.io.refusal(peer)
    }

    /// The process single copies with local rank `peer` name: its registered pid once checked
    /// ([`Copier::check`], once per pid), our own for ourselves; `Ok(None)` if it registered
    /// none usable from here.
    fn copy_pid<R: Rings + ?Sized>(&mut self, peer: u16, rings: &R) -> Result<Option<u32>> {
        if peer == self.me {
            return Ok(Some(self.io.own_pid()));
        }
        let Some(pid) = rings.pid(peer) else { return Ok(None) };
        if pid == self.io.own_pid() && self.own_process {
            return Ok(Some(pid));
        }
        self.io.check(peer, pid, rings.start_time(peer)).map(|()| Some(pid))
    }

    /// Whether process `pid` of local rank `peer`, checked by [`copy_pid`](Self::copy_pid), still
    /// runs (ours always does): asked of the [`Copier`] now for a `write`, lately for a read.
    fn copy_alive(&self, peer: u16, pid: u32, write: bool) -> bool {
        pid == self.io.own_pid() || self.io.alive(peer, pid, write)
    }

    /// Records what a start-up probe found: whether single-copy reads from local peers work.
    pub fn set_cma(&mut self, usable: bool) {
        self.cma = if usable { Cma::Usable } else { Cma::Refused };
    }

    /// True if the policy lets some transfers use single-copy reads and they are not known to be
    /// refused.
    pub fn cma_allowed(&self) -> bool {
        self.cfg.policy != Policy::Ring && self.cma != Cma::Refused
    }

    /// True if single-copy reads are known to work.
    pub fn cma_usable(&self) -> bool {
        self.cma == Cma::Usable
    }

    /// How the transfers received so far moved.
    pub fn stats(&self) -> Stats {
        self.stats
    }

    /// True while transfers are in flight.
    pub fn busy(&self) -> bool {
        !self.sends.is_empty() || !self.recvs.is_empty()
    }

    /// Control messages to send: `(local rank, message)`.
    pub fn take_out(&mut self) -> std::vec::Drain<'_, (u16, Control)> {
        self.out.drain(..)
    }

    /// Transfers finished on this side since the last call.
    pub fn take_done(&mut self) -> std::vec::Drain<'_, (Token, Outcome)> {
        self.done.drain(..)
    }

    /// True if there is something to take.
    pub fn has_output(&self) -> bool {
        !self.out.is_empty() || !self.done.is_empty()
    }

    /// Sets the thresholds of transfers with local rank `peer`.
    pub fn set_peer(&mut self, peer: u16, cfg: PeerConfig) {
        let i = usize::from(peer);
        if self.peers.len() <= i {
            self.peers.resize(i + 1, PeerConfig::of(&self.cfg));
        }
        self.peers[i] = cfg;
    }

    /// The thresholds of transfers with local rank `peer`.
    pub fn peer(&self, peer: u16) -> PeerConfig {
        self.peers.get(usize::from(peer)).copied().unwrap_or_else(|| PeerConfig::of(&self.cfg))
    }

    fn backend_for(&self, peer: u16, len: u64) -> Backend {
        let cma_ok = self.cma != Cma::Refused;
        let p = self.peer(peer);
        match self.cfg.policy {
            Policy::Cma if cma_ok => Backend::Cma,
            Policy::Auto if cma_ok && len >= p.cma_min && len < p.cma_max => Backend::Cma,
            _ => Backend::Ring,
        }
    }

    /// A rendezvous message (other than RTS, which the Endpoint matches) from local rank `peer`.
    /// Messages about transfers no longer in flight (their peer was declared dead) are ignored;
    /// malformed ones are errors.
    pub fn handle<R: Rings + ?Sized>(&mut self, peer: u16, msg: Control, rings: &R) -> Result<()> {
        if let Control::Helped { id, bytes } = msg {
            return match self.recvs.iter().position(|r| r.id == id && r.peer == peer) {
                Some(i) => self.helped(i, bytes, rings),
                None => Ok(()),
            };
        }
        let Some(i) = self.sends.iter().position(|s| s.id == msg.id() && s.peer == peer) else {
            return match msg {
                Control::Rts(_) => Err(Error::Wire { what: "RTS outside matching", value: 0 }),
                _ => Ok(()),
            };
        };
        match msg {
            Control::Cts { ring, epoch, bytes, .. } => self.start_send(i, ring, epoch, 0, bytes, rings),
            Control::Cookie { offset, ring, epoch, bytes, .. } => {
                self.handle_cookie(i, offset, ring, epoch, bytes, rings)
            }
            Control::Done { bytes, .. } => self.post_send(i, bytes),
            Control::Help { offset, bytes, dst, pid, .. } => {
                // We never ask ourselves for help: a HELP from this rank is forged.
                let registered = match peer == self.me {
                    true => Err(Error::Forged { what: "HELP from this rank", value: dst }),
                    false => self.copy_pid(peer, rings),
                };
                self.start_help(i, offset, bytes, dst, pid, registered)
            }
            Control::Rts(_) | Control::Helped { .. } => Err(Error::Wire { what: "RTS outside matching", value: 0 }),
        }
    }

    /// Moves data of every transfer in flight (a bounded amount each). True if anything moved.
    pub fn progress<R: Rings + ?Sized>(&mut self, rings: &R) -> bool {
        let mut moved = false;
        let mut i = 0;
        while i < self.sends.len() {
            match self.progress_send(i, rings) {
                Step::Same(m) => {
                    moved |= m;
                    i += 1;
                }
                Step::Removed => moved = true,
            }
        }
        moved |= self.progress_helps();
        moved |= self.progress_cma(rings);
        let mut i = 0;
        while i < self.recvs.len() {
            match self.progress_recv(i, rings) {
                Step::Same(m) => {
                    moved |= m;
                    i += 1;
                }
                Step::Removed => moved = true,
            }
        }
        moved
    }

    /// Local rank `peer` died: every transfer with it fails with [`Error::PeerDied`]; rings it
    /// was writing into are emptied and freed.
    pub fn peer_gone<R: Rings + ?Sized>(&mut self, peer: u16, rings: &R) {
        // A restarted peer is checked again.
        self.io.forget(peer);
        let mut i = 0;
        while i < self.sends.len() {
            if self.sends[i].peer == peer {
                let _ = self.fail_send(i, Error::PeerDied);
            } else {
                i += 1;
            }
        }
        let mut i = 0;
        while i < self.recvs.len() {
            if self.recvs[i].peer != peer {
                i += 1;
                continue;
            }
            // A sender's part ends once its last chunk is in the ring: it may have exited before
            // we drained the ring. Take what it left; fail only if something is missing.
            loop {
                match self.recvs[i].state {
                    RecvState::Ring { ring, offset, chunk } => match self.drain(i, ring, offset, chunk, rings) {
                        Step::Same(true) => continue,
                        Step::Same(false) => {
                            let _ = self.fail_recv(i, Error::PeerDied, rings);
                        }
                        Step::Removed => {}
                    },
                    _ => {
                        let _ = self.fail_recv(i, Error::PeerDied, rings);
                    }
                }
                break;
            }
        }
    }
}

/// What one progress step did to the transfer list.
enum Step {
    /// The transfer stays; whether anything moved.
    Same(bool),
    /// The transfer finished (the list shrank at this index).
    Removed,
}
