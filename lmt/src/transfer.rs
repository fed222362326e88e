//! The rendezvous for large messages, as a state machine the progress engine drives (sans I/O:
//! it never sends anything itself; control messages to send come out of [`Lmt::take_out`], and
//! finished transfers out of [`Lmt::take_done`]). It implements the NEMESIS LMT interface
//! (`shared/reference/nemesis.md`, "Large Message Transfer"), named after it:
//!
//! - [`Lmt::pre_send`]: the sender's side before RTS; returns the RTS, whose fields are the send
//!   cookie (transfer id, length, and the buffer's address and pid for a single-copy read);
//! - [`Lmt::pre_recv`]: the receiver, once a receive matched the RTS, chooses how the data moves
//!   and whether a CTS is needed (a ring needs one; a CMA read does not: the receiver pulls);
//! - `start_recv` / `start_send` (inside): the receiver starts reading or assigns a ring and sends
//!   CTS; the sender starts copying into the ring on CTS;
//! - `post_recv` / `post_send` (inside): the receiver frees its ring, or sends DONE after a
//!   single-copy read; the sender's buffer is free once its last chunk is in the ring, or on DONE;
//! - `handle_cookie` (inside [`Lmt::handle`]): a mid-transfer COOKIE moves the rest of a transfer
//!   to a ring from an offset, after a single-copy read was refused.
//!
//! Rings belong to the receiver: each rank hosts a small pool in the segment and assigns a ring
//! to one transfer at a time, from its private bookkeeping, bumping the ring's epoch; transfers
//! into a rank beyond its pool wait for a ring. Both sides move at most `chunks_per_pass` chunks
//! per progress pass, so other traffic keeps flowing during a large transfer.

use std::io;
use std::ptr::NonNull;

use nemesis_shm::Pieces;

use crate::cma::{self, PeerProcess};
use crate::error::{Error, Result};
use crate::ring::RingRef;
use crate::wire::{Backend, Control, Rts};

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
    /// ([`PeerProcess::open`]) before its first copy, and refuses this process's own pid.
    fn pid(&self, rank: u16) -> Option<u32>;
    /// The start time local rank `rank` registered with its pid (clock ticks since boot), so
    /// that a reused pid is refused; `None` (the default) if not known.
    fn start_time(&self, rank: u16) -> Option<u64> {
        let _ = rank;
        None
    }
}

/// Which backend moves the data (`NEMESIS_LMT`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum Policy {
    /// By size: CMA from [`Config::cma_min`] up to [`Config::cma_max`] bytes when it is allowed,
    /// rings outside.
    #[default]
    Auto,
    /// Always the shared-copy ring.
    Ring,
    /// Always a single CMA copy (falling back to rings where it is forbidden).
    Cma,
}

/// Tunables (the Endpoint reads them from the environment).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Config {
    /// Backend choice.
    pub policy: Policy,
    /// Under [`Policy::Auto`], messages from this length use CMA.
    pub cma_min: u64,
    /// Under [`Policy::Auto`], messages from this length use the rings again.
    pub cma_max: u64,
    /// Ring chunks each side moves per progress pass.
    pub chunks_per_pass: u32,
    /// Bytes a CMA read moves per progress pass.
    pub cma_chunk: usize,
    /// Single-copy transfers from this length are split: the receiver reads the first half while
    /// the sender, asked by HELP, writes the second (`u64::MAX`: never).
    pub split_min: u64,
    /// Longest message an RTS may announce (at most [`crate::wire::LEN_MAX`], which decoding
    /// enforces); longer ones are refused with [`Error::TooLong`].
    pub max_len: u64,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            policy: Policy::Auto,
            cma_min: 0,
            cma_max: u64::MAX,
            chunks_per_pass: 8,
            cma_chunk: 1 << 20,
            split_min: 32 << 10,
            max_len: crate::wire::LEN_MAX,
        }
    }
}

/// Thresholds of one peer, chosen by its distance (`nemesis::topology`); both sides of a pair
/// choose the same ones (the distance is symmetric and the table is the job's).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PeerConfig {
    /// See [`Config::cma_min`].
    pub cma_min: u64,
    /// See [`Config::cma_max`].
    pub cma_max: u64,
    /// See [`Config::split_min`].
    pub split_min: u64,
    /// Bytes per ring chunk, at most the ring's slot size (0: the slot size). The sender fills
    /// and the receiver expects chunks of this length.
    pub ring_chunk: u64,
}

impl PeerConfig {
    /// The node-wide values of `cfg`.
    pub fn of(cfg: &Config) -> PeerConfig {
        PeerConfig { cma_min: cfg.cma_min, cma_max: cfg.cma_max, split_min: cfg.split_min, ring_chunk: 0 }
    }

    fn chunk(&self, slot: u64) -> u64 {
        if self.ring_chunk == 0 { slot } else { self.ring_chunk.min(slot) }
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

#[derive(Clone, Copy, Debug)]
enum SendState {
    /// RTS sent; waiting for CTS, COOKIE or DONE.
    AwaitReply,
    /// Copying into the receiver's ring.
    Ring { ring: u16, epoch: u32, offset: u64, chunk: u64, bytes: u64 },
    /// Writing `offset..end` of our buffer to `dst` (the start of that range) in process `pid`
    /// (HELP); `at` is the next byte; then HELPED, and DONE is awaited.
    Help { pid: u32, dst: u64, offset: u64, at: u64, end: u64 },
}

#[derive(Debug)]
struct SendX {
    id: u32,
    peer: u16,
    token: Token,
    addr: *const u8,
    /// The message is in pieces (`addr` unused): it goes through a ring, gathered as copied.
    pieces: Option<NonNull<dyn Pieces>>,
    len: u64,
    state: SendState,
}

impl SendX {
    /// Whether `rts` is this send's, to rank `me` (ourselves), of contiguous bytes.
    fn own_rts(&self, me: u16, rts: &Rts) -> bool {
        self.peer == me
            && self.id == rts.id
            && self.addr as u64 == rts.addr
            && self.len == rts.len
            && self.pieces.is_none()
    }
}

#[derive(Clone, Copy, Debug)]
enum RecvState {
    /// Reading `offset..end` of the sender's buffer directly (`end` is `bytes`, or where the
    /// sender's part starts after a HELP).
    Cma { pid: u32, addr: u64, offset: u64, end: u64 },
    /// Waiting for a free ring of our pool, to move the rest from `offset`.
    WaitRing { offset: u64 },
    /// Copying out of our ring.
    Ring { ring: u16, offset: u64, chunk: u64 },
}

#[derive(Debug)]
struct RecvX {
    /// The sender's transfer id.
    id: u32,
    peer: u16,
    token: Token,
    dst: *mut u8,
    /// The receive buffer is in pieces (`dst` unused): data is scattered as it is copied.
    pieces: Option<NonNull<dyn Pieces>>,
    /// Bytes to move: the message's length, or the buffer's if shorter.
    bytes: u64,
    state: RecvState,
    /// It began with single-copy reads.
    began_cma: bool,
    /// The sender's part of a split single-copy transfer.
    help: Help,
    /// Our reads were refused while the sender was writing its part: once it is done (HELPED),
    /// the rest goes through a ring from this offset.
    resume: Option<u64>,
    /// The transfer failed while the sender was writing its part: it ends with this error once
    /// the sender is done (HELPED) or dead, never while the sender may still write into the
    /// buffer.
    error: Option<Error>,
}

/// The part of a split single-copy transfer the sender writes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Help {
    /// None (not split, or the sender's part is written).
    No,
    /// Bytes `from..to` asked of the sender by HELP, HELPED not yet received.
    Waiting { from: u64, to: u64 },
    /// The sender wrote less than asked: we read `from..to` after our own part.
    Tail { from: u64, to: u64 },
}

/// Whether single-copy reads work here.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Cma {
    Unknown,
    Usable,
    Refused,
}

/// The transfers of one process.
#[derive(Debug)]
pub struct Lmt {
    me: u16,
    /// Our process id (HELP names it).
    pid: u32,
    cfg: Config,
    /// Per local peer (those beyond use the node-wide values of `cfg`).
    peers: Vec<PeerConfig>,
    cma: Cma,
    sends: Vec<SendX>,
    recvs: Vec<RecvX>,
    /// Our pool: which of our rings a transfer holds.
    ring_busy: Vec<bool>,
    next_id: u32,
    out: Vec<(u16, Control)>,
    done: Vec<(Token, Outcome)>,
    stats: Stats,
    /// Scratch of `progress_cma` (kept to avoid allocating every pass).
    scratch_order: Vec<(u32, usize)>,
    scratch_ends: Vec<(usize, Option<Error>)>,
    iov_local: Vec<libc::iovec>,
    iov_remote: Vec<libc::iovec>,
    /// Bytes of each range in the iovecs (`gather`).
    iov_took: Vec<u64>,
    /// Per local peer: the pid its slot named when last checked, and the check's result.
    procs: Vec<Option<(u32, Result<PeerProcess>)>>,
    /// Peers whose slot names this process are ranks of this process ([`Lmt::allow_own_process`]).
    own_process: bool,
}

// SAFETY: the raw pointers are the caller's buffers of transfers in flight, valid until their
// outcome is taken (the caller's contract); nothing is tied to a thread.
unsafe impl Send for Lmt {}

impl Lmt {
    /// The transfers of local rank `me`, which hosts `rings` rings.
    pub fn new(me: u16, rings: u16, cfg: Config) -> Lmt {
        Lmt {
            me,
            pid: std::process::id(),
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
            iov_local: Vec::new(),
            iov_remote: Vec::new(),
            iov_took: Vec::new(),
            procs: Vec::new(),
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
        match self.procs.get(usize::from(peer)) {
            Some(Some((_, Err(e)))) => Some(e),
            _ => None,
        }
    }

    /// The process single copies with local rank `peer` name: its registered pid once checked
    /// ([`PeerProcess::open`], once per pid), our own for ourselves; `Ok(None)` if it registered
    /// none usable from here.
    fn copy_pid<R: Rings + ?Sized>(&mut self, peer: u16, rings: &R) -> Result<Option<u32>> {
        if peer == self.me {
            return Ok(Some(self.pid));
        }
        let Some(pid) = rings.pid(peer) else { return Ok(None) };
        if pid == self.pid && self.own_process {
            return Ok(Some(pid));
        }
        let i = usize::from(peer);
        if self.procs.len() <= i {
            self.procs.resize_with(i + 1, || None);
        }
        if !matches!(&self.procs[i], Some((p, _)) if *p == pid) {
            let checked = PeerProcess::open(peer, pid, rings.start_time(peer));
            if let Err(e) = &checked {
                tracing::warn!(error = %e, "single copies with this peer refused: its large messages go through rings");
            }
            self.procs[i] = Some((pid, checked));
        }
        match &self.procs[i] {
            Some((_, Ok(p))) => Ok(Some(p.pid())),
            Some((_, Err(e))) => Err(e.clone()),
            None => Ok(None),
        }
    }

    /// Whether process `pid` of local rank `peer`, checked by [`copy_pid`](Self::copy_pid), still
    /// runs (ours always does): asked of the kernel now for a `write`, lately for a read
    /// ([`PeerProcess::alive_lately`]).
    fn copy_alive(&self, peer: u16, pid: u32, write: bool) -> bool {
        if pid == self.pid {
            return true;
        }
        match self.procs.get(usize::from(peer)) {
            Some(Some((_, Ok(p)))) if p.pid() == pid => {
                if write {
                    p.alive()
                } else {
                    p.alive_lately()
                }
            }
            _ => false,
        }
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

    /// Sender: a message of `len` bytes at `addr` for local rank `peer`. Returns the RTS to send
    /// (through the eager path, matched like a message).
    ///
    /// # Safety
    /// The `len` bytes at `addr` must stay valid and unchanged until this transfer's outcome is
    /// taken.
    pub unsafe fn pre_send(&mut self, peer: u16, token: Token, addr: *const u8, len: u64, pid: u32) -> Rts {
        let backend = self.backend_for(peer, len);
        self.add_send(peer, token, addr, None, len, pid, backend)
    }

    /// Sender: as [`pre_send`](Self::pre_send) for a message in `pieces`. It goes through the
    /// receiver's ring (a single copy would need the pieces' addresses on the receiver's side),
    /// each chunk gathered straight from the pieces.
    ///
    /// # Safety
    /// `pieces` must stay valid, its memory readable and unchanged, until this transfer's outcome
    /// is taken.
    pub unsafe fn pre_send_pieces(&mut self, peer: u16, token: Token, pieces: NonNull<dyn Pieces>, pid: u32) -> Rts {
        // SAFETY: the caller's contract.
        let len = unsafe { pieces.as_ref() }.len() as u64;
        self.add_send(peer, token, std::ptr::null(), Some(pieces), len, pid, Backend::Ring)
    }

    #[allow(clippy::too_many_arguments)]
    fn add_send(
        &mut self,
        peer: u16,
        token: Token,
        addr: *const u8,
        pieces: Option<NonNull<dyn Pieces>>,
        len: u64,
        pid: u32,
        backend: Backend,
    ) -> Rts {
        let id = self.next_id;
        self.next_id = self.next_id.wrapping_add(1);
        self.sends.push(SendX { id, peer, token, addr, pieces, len, state: SendState::AwaitReply });
        Rts { id, len, addr: addr as u64, pid, key: 0, backend }
    }

    /// Sender: forgets a transfer whose RTS could not be sent (no outcome is reported).
    pub fn abandon(&mut self, token: Token) {
        self.sends.retain(|s| s.token != token);
    }

    /// Receiver: a receive of `cap` bytes at `dst` matched `rts` from local rank `peer`. Chooses
    /// the backend and starts; the outcome comes out of [`take_done`](Self::take_done).
    ///
    /// # Safety
    /// The `cap` bytes at `dst` must stay valid for writes, and not be accessed otherwise, until
    /// this transfer's outcome is taken.
    pub unsafe fn pre_recv<R: Rings + ?Sized>(
        &mut self,
        peer: u16,
        token: Token,
        rts: &Rts,
        dst: *mut u8,
        cap: usize,
        rings: &R,
    ) {
        self.add_recv(peer, token, rts, dst, None, cap, rings);
    }

    /// Receiver: as [`pre_recv`](Self::pre_recv) into `pieces` (their length is the capacity).
    /// A single copy reads into the pieces (one iovec each) when they are long enough on
    /// average ([`CMA_MIN_PIECE`]) and is never split with the sender; otherwise the data comes
    /// through a ring, scattered as it is copied out.
    ///
    /// # Safety
    /// `pieces` must stay valid, its memory writable and not accessed otherwise, until this
    /// transfer's outcome is taken.
    pub unsafe fn pre_recv_pieces<R: Rings + ?Sized>(
        &mut self,
        peer: u16,
        token: Token,
        rts: &Rts,
        pieces: NonNull<dyn Pieces>,
        rings: &R,
    ) {
        // SAFETY: the caller's contract.
        let cap = unsafe { pieces.as_ref() }.len();
        self.add_recv(peer, token, rts, std::ptr::null_mut(), Some(pieces), cap, rings);
    }

    #[allow(clippy::too_many_arguments)]
    fn add_recv<R: Rings + ?Sized>(
        &mut self,
        peer: u16,
        token: Token,
        rts: &Rts,
        dst: *mut u8,
        pieces: Option<NonNull<dyn Pieces>>,
        cap: usize,
        rings: &R,
    ) {
        let refuse = |lmt: &mut Lmt, e: Error| {
            // Refused: nothing is read; the sender is released (DONE of nothing), the receive
            // fails with the reason.
            lmt.out.push((peer, Control::Done { id: rts.id, bytes: 0 }));
            lmt.stats.failed += 1;
            lmt.done.push((token, Outcome::Failed(e)));
        };
        let max = self.cfg.max_len.min(crate::wire::LEN_MAX);
        if rts.len > max {
            return refuse(self, Error::TooLong { len: rts.len, max });
        }
        let bytes = rts.len.min(cap as u64);
        if bytes == 0 {
            self.out.push((peer, Control::Done { id: rts.id, bytes: 0 }));
            self.done.push((token, Outcome::Moved { bytes: 0 }));
            return;
        }
        let mut pull = rts.backend == Backend::Cma && self.cma != Cma::Refused && self.cfg.policy != Policy::Ring;
        // Single copies name the sender's registered process, checked (a slot naming us, a dead
        // or reused pid: rings instead), and stay inside the buffer it announced (the kernel
        // checks that range against that process's own memory).
        let registered = if pull { self.copy_pid(peer, rings).ok().flatten() } else { None };
        if pull {
            let own = peer == self.me;
            let forged = match registered {
                Some(p) if p != rts.pid => Some(Error::Forged { what: "RTS pid", value: u64::from(rts.pid) }),
                _ if rts.addr.checked_add(rts.len).is_none_or(|end| end > crate::wire::LEN_MAX) => {
                    Some(Error::Forged { what: "RTS address", value: rts.addr })
                }
                // From ourselves, only what we are sending ourselves.
                _ if own && !self.sends.iter().any(|s| s.own_rts(self.me, rts)) => {
                    Some(Error::Forged { what: "RTS of this rank", value: rts.addr })
                }
                _ => None,
            };
            if let Some(e) = forged {
                return refuse(self, e);
            }
            pull = registered.is_some();
        }
        // Pieces are read into by a single copy only when they are long enough on average.
        let long_pieces = pieces.is_none_or(|p| {
            // SAFETY: `pieces` is valid until the outcome is taken (the caller's contract).
            unsafe { p.as_ref() }.count() as u64 * CMA_MIN_PIECE <= bytes
        });
        pull &= long_pieces;
        let mut help = Help::No;
        let state = if pull {
            let mut end = bytes;
            // The sender writes its part into one contiguous range: not into pieces, nor from this
            // rank (one thread does both sides: nothing to share).
            if bytes >= self.peer(peer).split_min && pieces.is_none() && peer != self.me {
                // Both cores copy: we read the first half, the sender writes the second (from a
                // page boundary of the message).
                let from = (bytes * receiver_share(bytes) / 16) & !4095;
                if from > 0 {
                    end = from;
                    help = Help::Waiting { from, to: bytes };
                    let dst = (dst as u64).wrapping_add(from);
                    let msg = Control::Help { id: rts.id, offset: from, bytes: bytes - from, dst, pid: self.pid };
                    self.out.push((peer, msg));
                    self.stats.split += 1;
                }
            }
            RecvState::Cma { pid: registered.unwrap_or(rts.pid), addr: rts.addr, offset: 0, end }
        } else {
            RecvState::WaitRing { offset: 0 }
        };
        self.recvs.push(RecvX {
            id: rts.id,
            peer,
            token,
            dst,
            pieces,
            bytes,
            state,
            began_cma: pull,
            help,
            resume: None,
            error: None,
        });
        let i = self.recvs.len() - 1;
        self.start_recv(i, rings);
    }

    /// Receiver: starts (or resumes) moving transfer `i`: assigns a ring and sends CTS or COOKIE.
    fn start_recv<R: Rings + ?Sized>(&mut self, i: usize, rings: &R) {
        let RecvState::WaitRing { offset } = self.recvs[i].state else { return };
        let Some(ring) = self.ring_busy.iter().position(|b| !b) else { return };
        let Some(r) = rings.ring(self.me, ring as u16) else { return };
        self.ring_busy[ring] = true;
        let epoch = r.assign();
        let x = &mut self.recvs[i];
        let ring = ring as u16;
        let msg = if offset == 0 {
            Control::Cts { id: x.id, ring, epoch, bytes: x.bytes }
        } else {
            Control::Cookie { id: x.id, offset, ring, epoch, bytes: x.bytes }
        };
        x.state = RecvState::Ring { ring, offset, chunk: 0 };
        self.out.push((x.peer, msg));
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

    /// Sender, on HELP: checks the range and starts writing it into the receiver's buffer, in
    /// the receiver's registered process (`registered`, checked by `copy_pid`) only. A HELP
    /// naming another process, a destination range that wraps, or a receiver whose process is
    /// refused is refused: nothing is written, HELPED of nothing tells the receiver to read the
    /// whole range itself, and the error is returned (the transfer goes on and completes).
    fn start_help(
        &mut self,
        i: usize,
        offset: u64,
        bytes: u64,
        dst: u64,
        pid: u32,
        registered: Result<Option<u32>>,
    ) -> Result<()> {
        let x = &self.sends[i];
        let end = offset.checked_add(bytes).filter(|&e| e <= x.len);
        let Some(end) = end.filter(|_| matches!(x.state, SendState::AwaitReply) && x.pieces.is_none()) else {
            return self.fail_send(i, Error::Corrupt { what: "HELP range", value: offset });
        };
        let (registered, refused) = match registered {
            Ok(r) => (r, None),
            Err(e) => (None, Some(e)),
        };
        let refused = refused.or(match registered {
            Some(p) if p != pid => Some(Error::Forged { what: "HELP pid", value: u64::from(pid) }),
            _ if dst.checked_add(bytes).is_none() => Some(Error::Forged { what: "HELP destination", value: dst }),
            _ => None,
        });
        match (registered, refused) {
            (Some(pid), None) => {
                // The receiver reads its part from our buffer; we are to write the rest into its.
                nemesis_shm::failpoint!("rendezvous-help-{}", x.peer);
                self.sends[i].state = SendState::Help { pid, dst, offset, at: offset, end };
                Ok(())
            }
            (_, refused) => {
                self.out.push((x.peer, Control::Helped { id: x.id, bytes: 0 }));
                refused.map_or(Ok(()), Err)
            }
        }
    }

    /// Receiver, on HELPED: the sender wrote `bytes` of its part; we read what it did not.
    fn helped<R: Rings + ?Sized>(&mut self, i: usize, bytes: u64, rings: &R) -> Result<()> {
        let x = &mut self.recvs[i];
        let Help::Waiting { from, to } = x.help else {
            self.fail_recv(i, Error::Corrupt { what: "HELPED without HELP", value: bytes }, rings);
            return Err(Error::Corrupt { what: "HELPED without HELP", value: bytes });
        };
        if bytes > to - from {
            // The sender says it is done: nothing writes into the buffer any more.
            x.help = Help::No;
            self.fail_recv(i, Error::Corrupt { what: "HELPED byte count", value: bytes }, rings);
            return Err(Error::Corrupt { what: "HELPED byte count", value: bytes });
        }
        x.help = if bytes == to - from { Help::No } else { Help::Tail { from: from + bytes, to } };
        if let RecvState::Cma { offset, end, .. } = x.state
            && offset == end
        {
            self.own_part_read(i, rings);
        }
        Ok(())
    }

    /// Receiver: our part of a single-copy transfer is read: the transfer is over, or goes on
    /// with what the sender left (a tail), or waits for HELPED.
    fn own_part_read<R: Rings + ?Sized>(&mut self, i: usize, rings: &R) -> Step {
        let x = &mut self.recvs[i];
        if matches!(x.help, Help::Waiting { .. }) {
            // Our part is in the buffer; the sender writes the rest.
            nemesis_shm::failpoint!("rendezvous-recv-half-{}", x.peer);
            return Step::Same(false);
        }
        if let Some(e) = x.error.take() {
            return self.fail_recv(i, e, rings);
        }
        if let Some(offset) = x.resume
            && !matches!(x.help, Help::Waiting { .. })
        {
            // Whatever the sender wrote is moved again through the ring (same bytes): simpler
            // than a second hole, and only after a refusal.
            (x.resume, x.help, x.state) = (None, Help::No, RecvState::WaitRing { offset });
            self.start_recv(i, rings);
            return Step::Same(true);
        }
        match (x.help, &mut x.state) {
            (Help::No, _) => self.post_recv(i, rings),
            (Help::Tail { from, to }, RecvState::Cma { offset, end, .. }) => {
                (*offset, *end) = (from, to);
                x.help = Help::No;
                Step::Same(true)
            }
            _ => Step::Same(false),
        }
    }

    /// Sender, on CTS: checks the ring and starts copying into it.
    fn start_send<R: Rings + ?Sized>(
        &mut self,
        i: usize,
        ring: u16,
        epoch: u32,
        offset: u64,
        bytes: u64,
        rings: &R,
    ) -> Result<()> {
        let x = &self.sends[i];
        if !matches!(x.state, SendState::AwaitReply) || bytes > x.len || offset > bytes {
            return self.fail_send(i, Error::Corrupt { what: "CTS byte count", value: bytes });
        }
        match rings.ring(x.peer, ring) {
            Some(r) if r.epoch() == epoch => {}
            _ => return self.fail_send(i, Error::Corrupt { what: "CTS ring", value: u64::from(ring) }),
        }
        if offset == bytes {
            return self.post_send(i, bytes);
        }
        self.sends[i].state = SendState::Ring { ring, epoch, offset, chunk: 0, bytes };
        Ok(())
    }

    /// Sender, on COOKIE: the receiver moves the rest from `offset` through a ring.
    fn handle_cookie<R: Rings + ?Sized>(
        &mut self,
        i: usize,
        offset: u64,
        ring: u16,
        epoch: u32,
        bytes: u64,
        rings: &R,
    ) -> Result<()> {
        self.start_send(i, ring, epoch, offset, bytes, rings)
    }

    /// Sender: the transfer is over (`bytes` moved); the buffer is free.
    fn post_send(&mut self, i: usize, bytes: u64) -> Result<()> {
        let x = self.sends.swap_remove(i);
        if bytes > x.len {
            self.done.push((x.token, Outcome::Failed(Error::Corrupt { what: "DONE byte count", value: bytes })));
        } else {
            self.done.push((x.token, Outcome::Moved { bytes }));
        }
        Ok(())
    }

    fn fail_send(&mut self, i: usize, e: Error) -> Result<()> {
        let x = self.sends.swap_remove(i);
        self.done.push((x.token, Outcome::Failed(e.clone())));
        Err(e)
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

    fn progress_send<R: Rings + ?Sized>(&mut self, i: usize, rings: &R) -> Step {
        let x = &mut self.sends[i];
        let SendState::Ring { ring, epoch, mut offset, mut chunk, bytes } = x.state else { return Step::Same(false) };
        let Some(r) = rings.ring(x.peer, ring) else {
            let _ = self.fail_send(i, Error::Corrupt { what: "ring index", value: u64::from(ring) });
            return Step::Removed;
        };
        let _ = epoch;
        let slot = self.peers.get(usize::from(x.peer)).map_or(r.slot_size() as u64, |p| p.chunk(r.slot_size() as u64));
        let mut moved = false;
        for _ in 0..self.cfg.chunks_per_pass {
            if offset == bytes {
                break;
            }
            let n = slot.min(bytes - offset) as usize;
            let put = match x.pieces {
                // SAFETY: the pieces are valid and readable until the outcome is taken
                // (`pre_send_pieces`'s contract); `gather` writes the `n` bytes `fill` must.
                Some(p) => unsafe { r.try_put_with(chunk, n, |dst| p.as_ref().gather(offset as usize, dst, n)) },
                None => {
                    // SAFETY: the sender's buffer holds `len >= bytes` bytes (pre_send's contract)
                    // and `offset + n <= bytes`.
                    let data = unsafe { std::slice::from_raw_parts(x.addr.add(offset as usize), n) };
                    r.try_put(chunk, data)
                }
            };
            if !put {
                break;
            }
            offset += n as u64;
            chunk += 1;
            moved = true;
        }
        x.state = SendState::Ring { ring, epoch, offset, chunk, bytes };
        if offset == bytes {
            let _ = self.post_send(i, bytes);
            return Step::Removed;
        }
        if moved {
            // Part of the message is in the receiver's ring, not all.
            nemesis_shm::failpoint!("rendezvous-send-mid-{}", x.peer);
        }
        Step::Same(moved)
    }

    /// Sender: writes the next bytes of the HELP ranges into the receivers' buffers: one
    /// `process_vm_writev` per receiving process and pass, an iovec per transfer (at most
    /// `cma_chunk` bytes and [`cma::IOV_MAX`] transfers per call); sends HELPED for each range
    /// written, or at the first refusal or fault (the receiver reads the rest itself).
    fn progress_helps(&mut self) -> bool {
        let mut order = std::mem::take(&mut self.scratch_order);
        order.clear();
        for (i, x) in self.sends.iter().enumerate() {
            if let SendState::Help { pid, .. } = x.state {
                order.push((pid, i));
            }
        }
        order.sort_unstable();
        let mut moved = false;
        let mut dead = Vec::new();
        for group in order.chunk_by(|a, b| a.0 == b.0) {
            moved = true;
            if self.push_group(group) {
                dead.extend(group.iter().map(|&(_, i)| i));
            }
        }
        self.scratch_order = order;
        // Highest index first: `swap_remove` only moves entries from above.
        dead.sort_unstable_by(|a, b| b.cmp(a));
        for i in dead {
            if matches!(self.sends[i].state, SendState::Help { .. }) {
                let _ = self.fail_send(i, Error::PeerDied);
            }
        }
        moved
    }

    /// One `process_vm_writev` for the HELP ranges of `group` (all in one process). True if that
    /// process is gone.
    fn push_group(&mut self, group: &[(u32, usize)]) -> bool {
        let pid = group[0].0;
        // Each range is `at..end` of the sender's buffer (`end <= len`, checked by `start_help`).
        let ranges = group.iter().map(|&(_, i)| match self.sends[i].state {
            SendState::Help { dst, offset, at, end, .. } => {
                (Local::Addr(self.sends[i].addr as usize + at as usize), dst.wrapping_add(at - offset), end - at)
            }
            _ => (Local::Addr(0), 0, 0),
        });
        let (budget, took) = (self.cfg.cma_chunk as u64, &mut self.iov_took);
        // SAFETY: every range is of a contiguous buffer (a send in pieces gets no HELP).
        unsafe { gather(&mut self.iov_local, &mut self.iov_remote, took, budget, ranges) };
        let members = &group[..self.iov_took.len()];
        // A pid is reused only after its process exited: alive now, it names the receiver.
        if !self.copy_alive(self.sends[members[0].1].peer, pid, true) {
            return true;
        }
        // SAFETY: `pid` passed `copy_pid`: another process than this one and not sharing its
        // memory, or this one under `allow_own_process`, whose contract makes every HELP range a
        // receive buffer of one of our ranks, valid for writes and not otherwise accessed.
        let wrote = unsafe { cma::write_vectored(pid, &self.iov_local, &self.iov_remote) };
        let mut got = match wrote {
            Ok(n) => n,
            Err(e) if e.raw_os_error() == Some(libc::ESRCH) => return true,
            // Refused or faulted: the first range stops here, the others go on next pass (a
            // refusal stops them all in turn).
            Err(_) => 0,
        };
        for (k, &(_, i)) in members.iter().enumerate() {
            let want = self.iov_took[k] as usize;
            let took = got.min(want);
            got -= took;
            let x = &mut self.sends[i];
            let SendState::Help { offset, at, end, .. } = &mut x.state else { continue };
            *at += took as u64;
            let stopped = took < want;
            if *at == *end || stopped {
                let bytes = *at - *offset;
                x.state = SendState::AwaitReply;
                self.out.push((x.peer, Control::Helped { id: x.id, bytes }));
            }
            if stopped {
                break;
            }
        }
        false
    }

    fn progress_recv<R: Rings + ?Sized>(&mut self, i: usize, rings: &R) -> Step {
        match self.recvs[i].state {
            RecvState::WaitRing { .. } => {
                self.start_recv(i, rings);
                Step::Same(matches!(self.recvs[i].state, RecvState::Ring { .. }))
            }
            // Served by `progress_cma`, several transfers per system call.
            RecvState::Cma { .. } => Step::Same(false),
            RecvState::Ring { ring, offset, chunk } => self.drain(i, ring, offset, chunk, rings),
        }
    }

    /// The single-copy reads of one pass: the transfers reading from one process are served by one
    /// `process_vm_readv` with an iovec per transfer (at most `cma_chunk` bytes and
    /// [`cma::IOV_MAX`] transfers per call), so a window of messages costs one system call, not
    /// one each. On refusal every transfer of the call falls back to a ring (COOKIE).
    fn progress_cma<R: Rings + ?Sized>(&mut self, rings: &R) -> bool {
        let mut order = std::mem::take(&mut self.scratch_order);
        order.clear();
        for (i, x) in self.recvs.iter().enumerate() {
            if let RecvState::Cma { pid, offset, end, .. } = x.state
                && offset < end
            {
                order.push((pid, i));
            }
        }
        if order.is_empty() {
            self.scratch_order = order;
            return false;
        }
        order.sort_unstable();
        let mut ends = std::mem::take(&mut self.scratch_ends);
        ends.clear();
        let mut moved = false;
        for group in order.chunk_by(|a, b| a.0 == b.0) {
            moved |= self.pull_group(group, &mut ends, rings);
        }
        // Finished and failed transfers leave the list, highest index first (`swap_remove` only
        // moves entries from above).
        ends.sort_unstable_by_key(|e| std::cmp::Reverse(e.0));
        for (i, err) in ends.drain(..) {
            match err {
                None => drop(self.own_part_read(i, rings)),
                Some(e) => drop(self.fail_recv(i, e, rings)),
            }
        }
        self.scratch_order = order;
        self.scratch_ends = ends;
        moved
    }

    /// One `process_vm_readv` for the transfers of `group` (all reading from one process).
    /// Transfers that end are added to `ends` (with their error, if any).
    fn pull_group<R: Rings + ?Sized>(
        &mut self,
        group: &[(u32, usize)],
        ends: &mut Vec<(usize, Option<Error>)>,
        rings: &R,
    ) -> bool {
        let pid = group[0].0;
        // Each range is `offset..end` of the receive buffer (`end <= bytes <= cap`).
        let ranges = group.iter().map(|&(_, i)| match self.recvs[i].state {
            RecvState::Cma { addr, offset, end, .. } => {
                let x = &self.recvs[i];
                let l = match x.pieces {
                    Some(p) => Local::Pieces(p, offset),
                    None => Local::Addr(x.dst as usize + offset as usize),
                };
                (l, addr.wrapping_add(offset), end - offset)
            }
            _ => (Local::Addr(0), 0, 0),
        });
        let (budget, took) = (self.cfg.cma_chunk as u64, &mut self.iov_took);
        // SAFETY: the pieces of a receive are valid until its outcome is taken (its contract).
        unsafe { gather(&mut self.iov_local, &mut self.iov_remote, took, budget, ranges) };
        let members = &group[..self.iov_took.len()];
        // SAFETY: each local iovec is a range of a receive buffer not yet written (`offset..offset
        // + n` of `bytes <= cap`), valid for writes and untouched otherwise until the transfer's
        // outcome is taken (pre_recv's contract).
        let read = unsafe { cma::read_vectored(pid, &self.iov_local, &self.iov_remote) };
        // Still running after the read (or found so within `ALIVE_RECHECK`): the pid named the
        // sender throughout (a pid is reused only after its process exited and was reaped, and
        // the pid allocator came round). Gone: what was read may be another process's.
        let read = match read {
            Ok(_) if !self.copy_alive(self.recvs[members[0].1].peer, pid, false) => {
                Err(io::Error::from_raw_os_error(libc::ESRCH))
            }
            r => r,
        };
        match read {
            Ok(0) => {
                ends.push((members[0].1, Some(Error::Cma("read nothing".into()))));
                false
            }
            Ok(mut got) => {
                self.cma = Cma::Usable;
                for (k, &(_, i)) in members.iter().enumerate() {
                    let want = self.iov_took[k] as usize;
                    let took = got.min(want);
                    got -= took;
                    let x = &mut self.recvs[i];
                    if let RecvState::Cma { offset, end, .. } = &mut x.state {
                        *offset += took as u64;
                        if *offset == *end {
                            ends.push((i, None));
                        }
                    }
                    if took < want {
                        // The kernel stopped here (a fault): the next pass starts with it.
                        break;
                    }
                }
                true
            }
            Err(e) if matches!(e.raw_os_error(), Some(libc::EPERM | libc::ENOSYS | libc::EACCES)) => {
                if self.cma != Cma::Refused {
                    tracing::warn!(error = %e, "single-copy reads (CMA) are not allowed here: large messages go through shared-copy rings");
                }
                self.cma = Cma::Refused;
                for &(_, i) in members {
                    let x = &mut self.recvs[i];
                    if let RecvState::Cma { pid, addr, offset, .. } = x.state {
                        if matches!(x.help, Help::Waiting { .. }) {
                            // The sender may be writing into the buffer: wait for HELPED.
                            x.resume = Some(offset);
                            x.state = RecvState::Cma { pid, addr, offset, end: offset };
                        } else {
                            x.state = RecvState::WaitRing { offset };
                            self.start_recv(i, rings);
                        }
                    }
                }
                true
            }
            Err(e) if e.raw_os_error() == Some(libc::ESRCH) => {
                ends.extend(members.iter().map(|&(_, i)| (i, Some(Error::PeerDied))));
                true
            }
            // A bad address (EFAULT) or another error: the first transfer of the call is the one
            // the kernel could not read (a partial read would have returned a count).
            Err(e) => {
                ends.push((members[0].1, Some(Error::Cma(cma_error(&e)))));
                true
            }
        }
    }

    /// Copies the next chunks out of our ring.
    fn drain<R: Rings + ?Sized>(&mut self, i: usize, ring: u16, mut offset: u64, mut chunk: u64, rings: &R) -> Step {
        let Some(r) = rings.ring(self.me, ring) else {
            return self.fail_recv(i, Error::Corrupt { what: "ring index", value: u64::from(ring) }, rings);
        };
        let slot = self.peer(self.recvs[i].peer).chunk(r.slot_size() as u64);
        let mut moved = false;
        for _ in 0..self.cfg.chunks_per_pass {
            let x = &self.recvs[i];
            if offset == x.bytes {
                break;
            }
            let n = slot.min(x.bytes - offset) as usize;
            let took = match x.pieces {
                // SAFETY: the pieces are valid and writable until the outcome is taken
                // (`pre_recv_pieces`'s contract); `scatter` reads the `n` bytes of the chunk.
                Some(p) => unsafe { r.try_take_with(chunk, n, |src| p.as_ref().scatter(offset as usize, src, n)) },
                None => {
                    // SAFETY: the receive buffer holds `cap >= bytes` bytes and `offset + n <= bytes`.
                    let dst = unsafe { std::slice::from_raw_parts_mut(x.dst.add(offset as usize), n) };
                    r.try_take(chunk, dst)
                }
            };
            match took {
                Ok(true) => {
                    offset += n as u64;
                    chunk += 1;
                    moved = true;
                }
                Ok(false) => break,
                Err(e) => return self.fail_recv(i, e, rings),
            }
        }
        self.recvs[i].state = RecvState::Ring { ring, offset, chunk };
        if offset == self.recvs[i].bytes {
            return self.post_recv(i, rings);
        }
        if moved {
            // Part of the message is in the buffer, not all.
            nemesis_shm::failpoint!("rendezvous-recv-mid-{}", self.recvs[i].peer);
        }
        Step::Same(moved)
    }

    /// Receiver: the transfer is over: frees the ring, or sends DONE after a single-copy read.
    fn post_recv<R: Rings + ?Sized>(&mut self, i: usize, rings: &R) -> Step {
        let x = self.recvs.swap_remove(i);
        match x.state {
            RecvState::Ring { ring, .. } => {
                self.free_ring(ring, rings, false);
                if x.began_cma { self.stats.fallback += 1 } else { self.stats.ring += 1 }
            }
            _ => {
                self.out.push((x.peer, Control::Done { id: x.id, bytes: x.bytes }));
                self.stats.cma += 1;
            }
        }
        self.done.push((x.token, Outcome::Moved { bytes: x.bytes }));
        self.serve_waiting(rings);
        Step::Removed
    }

    fn fail_recv<R: Rings + ?Sized>(&mut self, i: usize, e: Error, rings: &R) -> Step {
        let x = &mut self.recvs[i];
        if matches!(x.help, Help::Waiting { .. }) && e != Error::PeerDied {
            // The sender may be writing its part into the buffer: end only after its HELPED (or
            // its death), so that the buffer is the caller's again only when nobody writes.
            if let RecvState::Cma { pid, addr, offset, .. } = x.state {
                x.state = RecvState::Cma { pid, addr, offset, end: offset };
            }
            x.error = Some(e);
            return Step::Same(true);
        }
        let x = self.recvs.swap_remove(i);
        if let RecvState::Ring { ring, .. } = x.state {
            self.free_ring(ring, rings, true);
        }
        self.stats.failed += 1;
        self.done.push((x.token, Outcome::Failed(e)));
        self.serve_waiting(rings);
        Step::Removed
    }

    fn free_ring<R: Rings + ?Sized>(&mut self, ring: u16, rings: &R, reset: bool) {
        if reset && let Some(r) = rings.ring(self.me, ring) {
            r.reset();
        }
        if let Some(b) = self.ring_busy.get_mut(usize::from(ring)) {
            *b = false;
        }
    }

    /// Gives freed rings to transfers waiting for one.
    fn serve_waiting<R: Rings + ?Sized>(&mut self, rings: &R) {
        for i in 0..self.recvs.len() {
            if matches!(self.recvs[i].state, RecvState::WaitRing { .. }) {
                self.start_recv(i, rings);
            }
        }
    }

    /// Local rank `peer` died: every transfer with it fails with [`Error::PeerDied`]; rings it
    /// was writing into are emptied and freed.
    pub fn peer_gone<R: Rings + ?Sized>(&mut self, peer: u16, rings: &R) {
        // A restarted peer is checked again.
        if let Some(p) = self.procs.get_mut(usize::from(peer)) {
            *p = None;
        }
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

/// Our side of a single-copy range: an address, or a packed offset of pieces.
#[derive(Clone, Copy)]
enum Local {
    Addr(usize),
    Pieces(NonNull<dyn Pieces>, u64),
}

/// Fills `local` and `remote` with the iovecs of one CMA call for `(our side, remote address,
/// bytes left)` ranges in order: at most `budget` bytes and [`cma::IOV_MAX`] iovecs on either
/// side, and `took` with the bytes of each range included (the i-th entry for the i-th range;
/// fewer entries than ranges when a limit is reached, and a range in pieces may be cut short at
/// the iovec limit). A range is one remote iovec and one local iovec per piece.
///
/// # Safety
/// Every `Local::Pieces` is valid (its transfer's contract).
unsafe fn gather(
    local: &mut Vec<libc::iovec>,
    remote: &mut Vec<libc::iovec>,
    took: &mut Vec<u64>,
    mut budget: u64,
    ranges: impl Iterator<Item = (Local, u64, u64)>,
) {
    local.clear();
    remote.clear();
    took.clear();
    for (l, r, left) in ranges {
        if budget == 0 || local.len() == cma::IOV_MAX {
            break;
        }
        let want = left.min(budget);
        let n = match l {
            Local::Addr(a) => {
                local.push(libc::iovec { iov_base: a as *mut libc::c_void, iov_len: want as usize });
                want
            }
            Local::Pieces(p, offset) => {
                let mut n = 0;
                // SAFETY: valid (the caller's contract).
                unsafe { p.as_ref() }.visit(offset as usize, want as usize, &mut |a, k| {
                    if local.len() == cma::IOV_MAX {
                        return false;
                    }
                    local.push(libc::iovec { iov_base: a.cast(), iov_len: k });
                    n += k as u64;
                    true
                });
                n
            }
        };
        if n == 0 {
            break;
        }
        budget -= n;
        remote.push(libc::iovec { iov_base: r as usize as *mut libc::c_void, iov_len: n as usize });
        took.push(n);
    }
}

/// The sixteenths of a split single copy the receiver reads itself (the sender writes the rest).
/// Measured (`nemesis-bench bw`, 5 rounds, 8 against 9 against 10 sixteenths): 40 KiB 21.1 /
/// 21.2 / 19.8 GB/s, 64 KiB 20.9 / 22.1 / 23.5, 96 KiB 24.7 / – / 27.0, 128 KiB 26.9 / – / 30.0,
/// 256 KiB 35.9 / 35.0 / 32.0, 1 MiB 42.2 / 37.8 / 33.3: halves, except between 64 and 128 KiB.
fn receiver_share(bytes: u64) -> u64 {
    if (64 << 10..=128 << 10).contains(&bytes) { 10 } else { 8 }
}

/// Smallest average piece, in bytes, of a receive in pieces that a single copy reads into (one
/// iovec per piece, at most [`cma::IOV_MAX`] per call); shorter pieces come through a ring.
pub const CMA_MIN_PIECE: u64 = 256;

/// What one progress step did to the transfer list.
enum Step {
    /// The transfer stays; whether anything moved.
    Same(bool),
    /// The transfer finished (the list shrank at this index).
    Removed,
}

fn cma_error(e: &io::Error) -> String {
    e.to_string()
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;
    use crate::error::Refusal;
    use crate::ring::HeapRing;

    /// Two ranks' rings on the heap.
    struct TwoRanks {
        rings: Vec<HeapRing>,
        per: u16,
        /// What both ranks registered (both are this process).
        pid: Option<u32>,
    }

    impl Rings for TwoRanks {
        fn ring(&self, host: u16, index: u16) -> Option<RingRef<'_>> {
            if host >= 2 || index >= self.per {
                return None;
            }
            Some(self.rings[usize::from(host * self.per + index)].get())
        }
        fn rings_per_rank(&self) -> u16 {
            self.per
        }
        fn pid(&self, rank: u16) -> Option<u32> {
            self.pid.filter(|_| rank < 2)
        }
    }

    /// The transfers of rank `me` of a test, whose ranks are all this process.
    fn own_lmt(me: u16, rings: u16, cfg: Config) -> Lmt {
        let mut l = Lmt::new(me, rings, cfg);
        // SAFETY: both ranks of every test are this process, and their HELPs name their receive
        // buffers, or are refused, or (`a_sender_that_cannot_write...`) name address 64, below
        // `vm.mmap_min_addr`: never mapped, the kernel faults without writing.
        unsafe { l.allow_own_process() };
        l
    }

    fn node(per: u16) -> TwoRanks {
        TwoRanks { rings: (0..2 * per).map(|_| HeapRing::new(4, 1000)).collect(), per, pid: Some(std::process::id()) }
    }

    /// Runs a transfer of `msg` from a sender (rank 0) to a receiver (rank 1) of capacity `cap`,
    /// passing the control messages by hand.
    fn transfer(msg: &[u8], cap: usize, policy: Policy, per: u16) -> (Outcome, Outcome, Vec<u8>) {
        let cfg = Config { policy, chunks_per_pass: 2, cma_chunk: 700, split_min: u64::MAX, ..Config::default() };
        transfer_with(msg, cap, cfg, per, |m| m)
    }

    /// As [`transfer`], with `cfg`, and `tamper` applied to every message to the sender.
    fn transfer_with(
        msg: &[u8],
        cap: usize,
        cfg: Config,
        per: u16,
        tamper: impl Fn(Control) -> Control,
    ) -> (Outcome, Outcome, Vec<u8>) {
        transfer_pair(msg, cap, cfg, per, None, tamper)
    }

    /// As [`transfer_with`], both sides setting `pair` as the thresholds of the other.
    fn transfer_pair(
        msg: &[u8],
        cap: usize,
        cfg: Config,
        per: u16,
        pair: Option<PeerConfig>,
        tamper: impl Fn(Control) -> Control,
    ) -> (Outcome, Outcome, Vec<u8>) {
        let (so, ro, dst, errors) = transfer_errors(msg, cap, cfg, &node(per), pair, tamper);
        assert_eq!(errors, []);
        (so, ro, dst)
    }

    /// As [`transfer_pair`] on node `n`, with the errors the sender's `handle` returned.
    fn transfer_errors(
        msg: &[u8],
        cap: usize,
        cfg: Config,
        n: &TwoRanks,
        pair: Option<PeerConfig>,
        tamper: impl Fn(Control) -> Control,
    ) -> (Outcome, Outcome, Vec<u8>, Vec<Error>) {
        let per = n.per;
        let (mut s, mut r) = (own_lmt(0, per, cfg), own_lmt(1, per, cfg));
        if let Some(p) = pair {
            s.set_peer(1, p);
            r.set_peer(0, p);
        }
        let mut dst = vec![0u8; cap];
        // SAFETY: `msg` and `dst` outlive the transfer (driven to the end below).
        let rts = unsafe { s.pre_send(1, 10, msg.as_ptr(), msg.len() as u64, std::process::id()) };
        // SAFETY: as above.
        unsafe { r.pre_recv(0, 20, &rts, dst.as_mut_ptr(), cap, n) };
        let (so, ro, errors) = drive(&mut s, &mut r, n, tamper);
        (so, ro, dst, errors)
    }

    /// Passes the control messages between sender `s` (rank 0) and receiver `r` (rank 1) and
    /// drives both until each reported its outcome; the errors the sender's `handle` returned.
    fn drive(
        s: &mut Lmt,
        r: &mut Lmt,
        n: &TwoRanks,
        tamper: impl Fn(Control) -> Control,
    ) -> (Outcome, Outcome, Vec<Error>) {
        let mut errors = Vec::new();
        let (mut so, mut ro) = (None, None);
        for _ in 0..10_000 {
            for (to, m) in r.take_out().collect::<Vec<_>>() {
                assert_eq!(to, 0);
                if let Err(e) = s.handle(1, tamper(m), n) {
                    errors.push(e);
                }
            }
            for (to, m) in s.take_out().collect::<Vec<_>>() {
                assert_eq!(to, 1);
                r.handle(0, m, n).unwrap();
            }
            s.progress(n);
            r.progress(n);
            so = so.or(s.take_done().next().map(|d| d.1));
            ro = ro.or(r.take_done().next().map(|d| d.1));
            if so.is_some() && ro.is_some() && !s.busy() && !r.busy() {
                break;
            }
        }
        (so.expect("sender finished"), ro.expect("receiver finished"), errors)
    }

    /// Every `stride` bytes of `buf`, `len` of them (`len <= stride`), as pieces.
    fn strided(buf: &mut [u8], len: usize, stride: usize) -> NonNull<dyn Pieces> {
        let base = buf.as_mut_ptr();
        let list = (0..buf.len() / stride).map(|k| (base.wrapping_add(k * stride), len)).collect();
        // SAFETY: disjoint ranges of `buf`, which the tests keep alive while the list is used.
        let list: Box<dyn Pieces> = Box::new(unsafe { nemesis_shm::PieceList::new(list) });
        NonNull::from(Box::leak(list))
    }

    #[test]
    fn messages_in_pieces_move_through_rings_and_single_copies() {
        let cfg = |policy| Config {
            policy,
            cma_min: 0,
            cma_max: u64::MAX,
            chunks_per_pass: 2,
            cma_chunk: 700,
            split_min: 1000,
            ..Config::default()
        };
        let can_cma = cma::probe_startup().is_ok();
        // (piece length, stride): short pieces (a ring), long ones (a single copy if allowed).
        for (plen, stride) in [(3usize, 5usize), (300, 301)] {
            let pieces = 40;
            let total = plen * pieces;
            let src_mem: Vec<u8> = (0..stride * pieces).map(|i| (i * 7 + 1) as u8).collect();
            let want: Vec<u8> = (0..total).map(|i| src_mem[i / plen * stride + i % plen]).collect();
            for policy in [Policy::Ring, Policy::Cma] {
                let n = node(2);
                // A sender in pieces, a contiguous receiver.
                let (mut s, mut r) = (own_lmt(0, 2, cfg(policy)), own_lmt(1, 2, cfg(policy)));
                let mut src = src_mem.clone();
                let sp = strided(&mut src, plen, stride);
                let mut dst = vec![0u8; total];
                // SAFETY: `src`, `dst` and the leaked list outlive the transfer.
                let rts = unsafe { s.pre_send_pieces(1, 10, sp, 1) };
                assert_eq!((rts.len, rts.backend), (total as u64, Backend::Ring));
                // SAFETY: as above.
                unsafe { r.pre_recv(0, 20, &rts, dst.as_mut_ptr(), total, &n) };
                let (so, ro, _) = drive(&mut s, &mut r, &n, |m| m);
                assert_eq!((so, ro), (Outcome::Moved { bytes: total as u64 }, Outcome::Moved { bytes: total as u64 }));
                assert_eq!(dst, want, "gathered, {plen}-byte pieces, {policy:?}");
                assert_eq!(r.stats().ring, 1);

                // A contiguous sender, a receiver in pieces (one byte short: truncation).
                let (mut s, mut r) = (own_lmt(0, 2, cfg(policy)), own_lmt(1, 2, cfg(policy)));
                let msg: Vec<u8> = want.iter().map(|b| b ^ 0x5a).chain([9]).collect();
                let mut out = vec![0xeeu8; stride * pieces];
                let rp = strided(&mut out, plen, stride);
                r.set_cma(can_cma);
                // SAFETY: `msg`, `out` and the leaked list outlive the transfer.
                let rts = unsafe { s.pre_send(1, 10, msg.as_ptr(), msg.len() as u64, std::process::id()) };
                // SAFETY: as above.
                unsafe { r.pre_recv_pieces(0, 20, &rts, rp, &n) };
                let (so, ro, _) = drive(&mut s, &mut r, &n, |m| m);
                assert_eq!((so, ro), (Outcome::Moved { bytes: total as u64 }, Outcome::Moved { bytes: total as u64 }));
                for (i, &b) in out.iter().enumerate() {
                    let w = if i % stride < plen { msg[i / stride * plen + i % stride] } else { 0xee };
                    assert_eq!(b, w, "byte {i}, {plen}-byte pieces, {policy:?}");
                }
                let single = policy == Policy::Cma && can_cma && plen >= CMA_MIN_PIECE as usize;
                assert_eq!((r.stats().cma, r.stats().split), (u64::from(single), 0), "{plen}-byte pieces, {policy:?}");
            }
        }
    }

    fn data(len: usize) -> Vec<u8> {
        (0..len).map(|i| (i * 31 + 7) as u8).collect()
    }

    #[test]
    fn a_pair_chooses_its_backend_split_and_ring_chunk() {
        let cfg = Config { policy: Policy::Auto, split_min: u64::MAX, ..Config::default() };
        // Rings for this pair up to 5000 bytes, in chunks of 300 of the 1000-byte slots.
        let pair = PeerConfig { cma_min: 5000, cma_max: u64::MAX, split_min: u64::MAX, ring_chunk: 300 };
        let mut lmt = own_lmt(0, 1, cfg);
        lmt.set_cma(true);
        lmt.set_peer(1, pair);
        assert_eq!(lmt.backend_for(1, 4999), Backend::Ring);
        assert_eq!(lmt.backend_for(1, 5000), Backend::Cma);
        assert_eq!(lmt.backend_for(2, 10), Backend::Cma, "other peers keep the node-wide range");
        for len in [1, 299, 300, 301, 4321] {
            let msg = data(len);
            let (so, ro, dst) = transfer_pair(&msg, len, cfg, 1, Some(pair), |m| m);
            assert_eq!((&so, &ro), (&Outcome::Moved { bytes: len as u64 }, &Outcome::Moved { bytes: len as u64 }));
            assert_eq!(dst, msg, "{len}");
        }
        // Chunks of different lengths on the two sides are a protocol error, never a wrong copy.
        let msg = data(2000);
        let n = node(1);
        let (mut s, mut r) = (own_lmt(0, 1, cfg), own_lmt(1, 1, cfg));
        s.set_peer(1, pair);
        let mut dst = vec![0u8; 2000];
        // SAFETY: `msg` and `dst` outlive the transfer, driven below until it fails.
        let rts = unsafe { s.pre_send(1, 1, msg.as_ptr(), 2000, std::process::id()) };
        // SAFETY: as above.
        unsafe { r.pre_recv(0, 2, &rts, dst.as_mut_ptr(), 2000, &n) };
        for (_, m) in r.take_out().collect::<Vec<_>>() {
            s.handle(1, m, &n).unwrap();
        }
        s.progress(&n);
        r.progress(&n);
        assert!(matches!(r.take_done().next(), Some((2, Outcome::Failed(Error::Corrupt { .. })))));
    }

    #[test]
    fn ring_transfers_of_odd_sizes() {
        for len in [1, 999, 1000, 1001, 3999, 4000, 4001, 12_345] {
            let msg = data(len);
            let (so, ro, dst) = transfer(&msg, len, Policy::Ring, 1);
            assert_eq!(so, Outcome::Moved { bytes: len as u64 }, "len {len}");
            assert_eq!(ro, Outcome::Moved { bytes: len as u64 });
            assert!(dst == msg, "len {len}");
        }
    }

    #[test]
    fn truncation_moves_the_buffer_length_on_both_sides() {
        let msg = data(5000);
        let (so, ro, dst) = transfer(&msg, 1234, Policy::Ring, 1);
        assert_eq!((so, ro), (Outcome::Moved { bytes: 1234 }, Outcome::Moved { bytes: 1234 }));
        assert_eq!(dst, msg[..1234]);
        let (so, ro, _) = transfer(&msg, 0, Policy::Ring, 1);
        assert_eq!((so, ro), (Outcome::Moved { bytes: 0 }, Outcome::Moved { bytes: 0 }));
    }

    #[test]
    fn cma_reads_our_own_buffer_or_falls_back_to_a_ring() {
        // Same process on both sides: process_vm_readv on ourselves.
        let msg = data(10_000);
        let (so, ro, dst) = transfer(&msg, msg.len(), Policy::Cma, 1);
        assert_eq!((so, ro), (Outcome::Moved { bytes: 10_000 }, Outcome::Moved { bytes: 10_000 }));
        assert!(dst == msg);
    }

    fn split(cma_chunk: usize) -> Config {
        Config { policy: Policy::Cma, chunks_per_pass: 2, cma_chunk, split_min: 0, ..Config::default() }
    }

    #[test]
    fn split_single_copies_move_every_byte_once_on_each_side() {
        for (len, cap) in [(8191, 8191), (8192, 8192), (12_289, 12_289), (100_000, 100_000), (100_000, 54_321)] {
            for chunk in [700, 1 << 20] {
                let msg = data(len);
                let (so, ro, dst) = transfer_with(&msg, cap, split(chunk), 1, |m| m);
                let bytes = len.min(cap) as u64;
                assert_eq!((so, ro), (Outcome::Moved { bytes }, Outcome::Moved { bytes }), "len {len} cap {cap}");
                assert!(dst[..] == msg[..cap], "len {len} cap {cap} chunk {chunk}");
            }
        }
    }

    #[test]
    fn a_sender_that_cannot_write_leaves_its_part_to_the_receiver() {
        // The HELP names an unmapped address: the sender's write faults at once, it answers
        // HELPED with 0 bytes, and the receiver reads the second half itself.
        let msg = data(64 * 1024 + 3);
        let bad = |m| match m {
            Control::Help { id, offset, bytes, pid, .. } => Control::Help { id, offset, bytes, dst: 64, pid },
            m => m,
        };
        let (so, ro, dst) = transfer_with(&msg, msg.len(), split(1 << 20), 1, bad);
        let bytes = msg.len() as u64;
        assert_eq!((so, ro), (Outcome::Moved { bytes }, Outcome::Moved { bytes }));
        assert!(dst == msg);
    }

    #[test]
    fn bad_help_messages_fail_the_transfer() {
        let n = node(1);
        let (mut s, mut r) = (own_lmt(0, 1, split(1 << 20)), own_lmt(1, 1, split(1 << 20)));
        let msg = data(100);
        let pid = std::process::id();
        // SAFETY: `msg` outlives the transfers.
        let rts = unsafe { s.pre_send(1, 1, msg.as_ptr(), 100, pid) };
        // A range past the message.
        assert!(s.handle(1, Control::Help { id: rts.id, offset: 50, bytes: 51, dst: 0, pid }, &n).is_err());
        // SAFETY: as above.
        let rts = unsafe { s.pre_send(1, 2, msg.as_ptr(), 100, pid) };
        let wrap = Control::Help { id: rts.id, offset: u64::MAX, bytes: 2, dst: 0, pid };
        assert!(s.handle(1, wrap, &n).is_err());
        assert_eq!(s.take_done().filter(|d| matches!(d.1, Outcome::Failed(_))).count(), 2);
        // The receiver: HELPED for a transfer that asked nothing, or for more than asked.
        let big = data(20_000);
        let mut d1 = vec![0u8; 20_000];
        // SAFETY: `big` and `d1` outlive the transfer.
        let rts = unsafe { s.pre_send(1, 3, big.as_ptr(), 20_000, pid) };
        // SAFETY: as above.
        unsafe { r.pre_recv(0, 30, &rts, d1.as_mut_ptr(), 20_000, &n) };
        let help: Vec<_> = r.take_out().collect();
        assert!(matches!(help[..], [(0, Control::Help { offset: 8192, bytes: 11_808, .. })]), "{help:?}");
        assert!(r.handle(0, Control::Helped { id: rts.id, bytes: 11_809 }, &n).is_err());
        assert!(matches!(r.take_done().next(), Some((30, Outcome::Failed(Error::Corrupt { .. })))));
        // Unknown transfers are ignored.
        assert!(r.handle(0, Control::Helped { id: 999, bytes: 1 }, &n).is_ok());
    }

    /// Another process of ours (a pid that is not the peer's).
    fn other_process() -> std::process::Child {
        std::process::Command::new("sleep").arg("30").spawn().unwrap()
    }

    #[test]
    fn a_forged_rts_is_refused_and_nothing_is_read() {
        let n = node(1);
        let mut other = other_process();
        let msg = data(20_000);
        for (pid, addr, what) in [
            // Another process than the one the sender registered.
            (other.id(), msg.as_ptr() as u64, "RTS pid"),
            // A range that wraps around the address space.
            (std::process::id(), u64::MAX - 100, "RTS address"),
        ] {
            let (mut s, mut r) = (own_lmt(0, 1, split(1 << 20)), own_lmt(1, 1, split(1 << 20)));
            // SAFETY: `msg` outlives the transfer.
            let mut rts = unsafe { s.pre_send(1, 1, msg.as_ptr(), 20_000, std::process::id()) };
            (rts.pid, rts.addr) = (pid, addr);
            let mut d = vec![0u8; 20_000];
            // SAFETY: `d` outlives the transfer.
            unsafe { r.pre_recv(0, 2, &rts, d.as_mut_ptr(), 20_000, &n) };
            assert!(
                matches!(r.take_done().next(), Some((2, Outcome::Failed(Error::Forged { what: w, .. }))) if w == what)
            );
            for (to, m) in r.take_out().collect::<Vec<_>>() {
                assert_eq!((to, m), (0, Control::Done { id: rts.id, bytes: 0 }), "no HELP: nothing to write either");
                s.handle(1, m, &n).unwrap();
            }
            assert_eq!(s.take_done().next(), Some((1, Outcome::Moved { bytes: 0 })), "the sender is released");
            r.progress(&n);
            assert!(!r.busy() && !s.busy());
            assert!(d.iter().all(|&b| b == 0), "nothing was read");
        }
        let _ = other.kill();
        let _ = other.wait();
        // Transfers after go on (CMA, split), and with a peer whose pid does not name it from
        // here (another pid namespace) through a ring.
        let (so, ro, dst) = transfer_with(&msg, msg.len(), split(1 << 20), 1, |m| m);
        assert_eq!((so, ro), (Outcome::Moved { bytes: 20_000 }, Outcome::Moved { bytes: 20_000 }));
        assert!(dst == msg);
        let unknown = TwoRanks { pid: None, ..node(1) };
        let (so, ro, dst, errors) = transfer_errors(&msg, msg.len(), split(1 << 20), &unknown, None, |m| m);
        assert_eq!((so, ro, errors), (Outcome::Moved { bytes: 20_000 }, Outcome::Moved { bytes: 20_000 }, vec![]));
        assert!(dst == msg);
    }

    #[test]
    fn a_forged_help_is_refused_and_the_receiver_reads_it_all() {
        let mut other = other_process();
        let other_pid = other.id();
        let msg = data(64 * 1024 + 3);
        let bytes = msg.len() as u64;
        for (what, tamper) in [
            (
                "HELP pid",
                Box::new(move |m| match m {
                    Control::Help { id, offset, bytes, dst, .. } => {
                        Control::Help { id, offset, bytes, dst, pid: other_pid }
                    }
                    m => m,
                }) as Box<dyn Fn(Control) -> Control>,
            ),
            (
                "HELP destination",
                Box::new(|m| match m {
                    Control::Help { id, offset, bytes, pid, .. } => {
                        Control::Help { id, offset, bytes, dst: u64::MAX - 8, pid }
                    }
                    m => m,
                }),
            ),
        ] {
            let (so, ro, dst, errors) = transfer_errors(&msg, msg.len(), split(1 << 20), &node(1), None, tamper);
            assert!(matches!(errors[..], [Error::Forged { what: w, .. }] if w == what), "{errors:?}");
            assert_eq!((so, ro), (Outcome::Moved { bytes }, Outcome::Moved { bytes }), "{what}: nothing lost");
            assert!(dst == msg, "{what}");
        }
        let _ = other.kill();
        let _ = other.wait();
    }

    #[test]
    fn a_dead_helper_fails_the_receive() {
        let n = node(1);
        let mut r = own_lmt(1, 1, split(1 << 20));
        let big = data(20_000);
        let mut d = vec![0u8; 20_000];
        let rts = Rts {
            id: 4,
            len: 20_000,
            addr: big.as_ptr() as u64,
            pid: std::process::id(),
            key: 0,
            backend: Backend::Cma,
        };
        // SAFETY: `big` and `d` outlive the transfer.
        unsafe { r.pre_recv(0, 40, &rts, d.as_mut_ptr(), 20_000, &n) };
        while r.progress(&n) {}
        assert!(r.take_done().next().is_none(), "our half is read; the sender's is awaited");
        r.peer_gone(0, &n);
        assert_eq!(r.take_done().next(), Some((40, Outcome::Failed(Error::PeerDied))));
        assert!(d[..8192] == big[..8192]);
    }

    #[test]
    fn a_failed_read_ends_only_once_the_sender_stopped_writing() {
        let n = node(1);
        let mut r = own_lmt(1, 1, split(1 << 20));
        let mut d = vec![0u8; 20_000];
        // The sender's buffer address is unmapped: our half faults at once.
        let rts = Rts { id: 5, len: 20_000, addr: 64, pid: std::process::id(), key: 0, backend: Backend::Cma };
        // SAFETY: `d` outlives the transfer.
        unsafe { r.pre_recv(0, 50, &rts, d.as_mut_ptr(), 20_000, &n) };
        for _ in 0..10 {
            r.progress(&n);
        }
        assert!(r.take_done().next().is_none(), "the sender may still be writing its half");
        assert!(r.handle(0, Control::Helped { id: 5, bytes: 11_808 }, &n).is_ok());
        assert!(matches!(r.take_done().next(), Some((50, Outcome::Failed(Error::Cma(_))))));
        assert!(!r.busy());
    }

    #[test]
    fn transfers_wait_for_a_ring_and_peers_death_fails_them() {
        let n = node(1);
        let cfg = Config { policy: Policy::Ring, ..Config::default() };
        let (mut s, mut r) = (own_lmt(0, 1, cfg), own_lmt(1, 1, cfg));
        let a = data(3000);
        let mut d1 = vec![0u8; 3000];
        let mut d2 = vec![0u8; 3000];
        // SAFETY: the buffers outlive the transfers.
        let (r1, r2) = unsafe { (s.pre_send(1, 1, a.as_ptr(), 3000, 1), s.pre_send(1, 2, a.as_ptr(), 3000, 1)) };
        // SAFETY: as above.
        unsafe {
            r.pre_recv(0, 11, &r1, d1.as_mut_ptr(), 3000, &n);
            r.pre_recv(0, 12, &r2, d2.as_mut_ptr(), 3000, &n);
        }
        let out: Vec<_> = r.take_out().collect();
        assert_eq!(out.len(), 1, "one ring: the second transfer waits");
        // The sender dies before moving anything: both receives fail, the ring is free again.
        r.peer_gone(0, &n);
        let done: Vec<_> = r.take_done().collect();
        assert_eq!(done.len(), 2);
        assert!(done.iter().all(|d| d.1 == Outcome::Failed(Error::PeerDied)));
        assert!(!r.busy());
        // The sender's side: its peer (the receiver) dies while it waits for CTS.
        s.peer_gone(1, &n);
        assert_eq!(s.take_done().count(), 2);
    }

    #[test]
    fn bad_control_messages_are_errors_not_panics() {
        let n = node(1);
        let mut s = own_lmt(0, 1, Config::default());
        let msg = data(100);
        // SAFETY: `msg` outlives the transfer.
        let rts = unsafe { s.pre_send(1, 1, msg.as_ptr(), 100, 1) };
        // A CTS naming a ring that does not exist, or a wrong epoch, or too many bytes.
        assert!(s.handle(1, Control::Cts { id: rts.id, ring: 7, epoch: 0, bytes: 100 }, &n).is_err());
        // SAFETY: as above.
        let rts = unsafe { s.pre_send(1, 2, msg.as_ptr(), 100, 1) };
        assert!(s.handle(1, Control::Cts { id: rts.id, ring: 0, epoch: 5, bytes: 100 }, &n).is_err());
        // SAFETY: as above.
        let rts = unsafe { s.pre_send(1, 3, msg.as_ptr(), 100, 1) };
        assert!(s.handle(1, Control::Cts { id: rts.id, ring: 0, epoch: 0, bytes: 101 }, &n).is_err());
        // Unknown transfers are ignored (a late message after a failure).
        assert!(s.handle(1, Control::Done { id: 999, bytes: 1 }, &n).is_ok());
        assert!(s.handle(1, Control::Rts(rts), &n).is_err());
        assert_eq!(s.take_done().filter(|d| matches!(d.1, Outcome::Failed(_))).count(), 3);
    }

    /// Two ranks whose slots name `pids` (and `starts`), rings on the heap.
    struct Slots {
        rings: Vec<HeapRing>,
        pids: [Option<u32>; 2],
        starts: [Option<u64>; 2],
    }

    impl Rings for Slots {
        fn ring(&self, host: u16, index: u16) -> Option<RingRef<'_>> {
            (host < 2 && index < 1).then(|| self.rings[usize::from(host)].get())
        }
        fn rings_per_rank(&self) -> u16 {
            1
        }
        fn pid(&self, rank: u16) -> Option<u32> {
            self.pids.get(usize::from(rank)).copied().flatten()
        }
        fn start_time(&self, rank: u16) -> Option<u64> {
            self.starts.get(usize::from(rank)).copied().flatten()
        }
    }

    fn slots(pids: [Option<u32>; 2], starts: [Option<u64>; 2]) -> Slots {
        Slots { rings: vec![HeapRing::new(4, 1000), HeapRing::new(4, 1000)], pids, starts }
    }

    fn cma_cfg(split_min: u64) -> Config {
        Config { policy: Policy::Cma, split_min, ..Config::default() }
    }

    /// What [`receive_from`] saw: the receiver, what it sent, its outcome if any, its buffer.
    type Received = (Lmt, Vec<(u16, Control)>, Option<Outcome>, Vec<u8>);

    /// Receiver rank 1 takes an RTS from rank 0 naming `addr` in rank 0's registered process,
    /// and makes a few passes.
    fn receive_from(n: &Slots, addr: u64, len: usize) -> Received {
        let mut r = Lmt::new(1, 1, cma_cfg(u64::MAX));
        r.set_cma(true);
        let mut d = vec![0u8; len];
        let pid = n.pid(0).unwrap_or(0);
        let rts = Rts { id: 1, len: len as u64, addr, pid, key: 0, backend: Backend::Cma };
        // SAFETY: `d` outlives the transfer (it is ended by `peer_gone` below or by its outcome).
        unsafe { r.pre_recv(0, 9, &rts, d.as_mut_ptr(), len, n) };
        for _ in 0..4 {
            r.progress(n);
        }
        let out = r.take_out().collect();
        let done = r.take_done().next().map(|d| d.1);
        r.peer_gone(0, n);
        (r, out, done, d)
    }

    #[test]
    fn a_slot_naming_this_process_is_refused_before_any_copy() {
        let me = std::process::id();
        let n = slots([Some(me), Some(me)], [None; 2]);
        let secret = vec![0x5au8; 4096];
        // Reads: an RTS naming our own memory goes through a ring (CTS), nothing is read.
        let (r, out, done, d) = receive_from(&n, secret.as_ptr() as u64, 4096);
        assert!(matches!(out[..], [(0, Control::Cts { .. })]), "{out:?}");
        assert_eq!(done, None, "the transfer waits for the ring");
        assert!(d.iter().all(|&b| b == 0), "nothing of ours was read");
        assert_eq!(r.stats().cma, 0);
        assert_eq!(r.peer_refusal(0), None, "forgotten once the peer is gone");
        let mut r = Lmt::new(1, 1, cma_cfg(u64::MAX));
        assert!(r.copy_pid(0, &n).is_err());
        assert_eq!(r.peer_refusal(0), Some(&Error::PeerProcess { slot: 0, pid: me, why: Refusal::Own }));
        // Writes: a HELP naming our own memory is answered HELPED of nothing, nothing is written.
        let mut s = Lmt::new(0, 1, cma_cfg(0));
        let msg = vec![0xa5u8; 8192];
        let victim = vec![0u8; 4096];
        // SAFETY: `msg` outlives the transfer.
        let rts = unsafe { s.pre_send(1, 1, msg.as_ptr(), 8192, me) };
        let help = Control::Help { id: rts.id, offset: 4096, bytes: 4096, dst: victim.as_ptr() as u64, pid: me };
        let e = s.handle(1, help, &n).unwrap_err();
        assert_eq!(e, Error::PeerProcess { slot: 1, pid: me, why: Refusal::Own });
        assert!(e.to_string().contains("local rank 1's registered pid") && e.to_string().contains("this process"));
        for _ in 0..4 {
            s.progress(&n);
        }
        assert_eq!(s.take_out().collect::<Vec<_>>(), [(1, Control::Helped { id: rts.id, bytes: 0 })]);
        assert!(victim.iter().all(|&b| b == 0), "nothing of ours was written");
        // A thread of ours is not a process.
        let (tx, rx) = std::sync::mpsc::channel();
        let (stop_tx, stop_rx) = std::sync::mpsc::channel::<()>();
        let t = std::thread::spawn(move || {
            // SAFETY: gettid has no preconditions.
            tx.send(unsafe { libc::gettid() } as u32).unwrap();
            let _ = stop_rx.recv();
        });
        let tid = rx.recv().unwrap();
        let refused = PeerProcess::open(0, tid, None).unwrap_err();
        assert!(
            matches!(refused, Error::PeerProcess { slot: 0, pid, why: Refusal::NotProcess | Refusal::SameMemory } if pid == tid),
            "{refused:?}"
        );
        drop(stop_tx);
        t.join().unwrap();
    }

    #[test]
    fn a_dead_reused_or_child_pid_is_refused_before_any_copy() {
        let secret = vec![0x5au8; 4096];
        // A dead process (reaped: its pid names nothing, or someone else later).
        let mut dead = std::process::Command::new("true").spawn().unwrap();
        let dead_pid = dead.id();
        dead.wait().unwrap();
        // A live process whose start time is not the registered one (a reused pid), and the
        // same process registered as it is: a child of ours.
        let mut child = std::process::Command::new("sleep").arg("30").spawn().unwrap();
        let start = nemesis_shm::os::process_start_time(child.id()).unwrap();
        for (pid, registered, why) in [
            (dead_pid, None, Refusal::Dead),
            (child.id(), Some(start + 1), Refusal::Reused),
            (child.id(), Some(start), Refusal::Descendant),
            (0, None, Refusal::Dead),
        ] {
            let n = slots([Some(pid), None], [registered, None]);
            let (r, out, done, d) = receive_from(&n, secret.as_ptr() as u64, 4096);
            assert!(matches!(out[..], [(0, Control::Cts { .. })]), "{why:?}: through a ring: {out:?}");
            assert_eq!((done, r.stats().cma), (None, 0), "{why:?}");
            assert!(d.iter().all(|&b| b == 0), "{why:?}");
            let e = PeerProcess::open(0, pid, registered).unwrap_err();
            assert_eq!(e, Error::PeerProcess { slot: 0, pid, why });
        }
        let _ = child.kill();
        let _ = child.wait();
    }

    #[test]
    fn single_copies_read_another_process_that_passes_the_check() {
        if cma::probe_startup().is_err() {
            return eprintln!("skipped: CMA refused here");
        }
        // A grandchild of ours, orphaned (so not our descendant any more), holds a copy of our
        // memory: the message is at the same address there.
        let msg: Vec<u8> = (0..50_000u32).map(|i| (i * 13 + 1) as u8).collect();
        let mut fds = [0i32; 2];
        // SAFETY: a pipe for the grandchild's pid.
        assert_eq!(unsafe { libc::pipe(fds.as_mut_ptr()) }, 0);
        // SAFETY: fork in a test; the children only fork, write, sleep and exit.
        let child = unsafe { libc::fork() };
        if child == 0 {
            // SAFETY: as above.
            let grandchild = unsafe { libc::fork() };
            if grandchild == 0 {
                std::thread::sleep(std::time::Duration::from_secs(30));
            } else {
                let pid = (grandchild as u32).to_le_bytes();
                // SAFETY: writing 4 bytes to the pipe.
                unsafe { libc::write(fds[1], pid.as_ptr().cast(), 4) };
            }
            // SAFETY: ending a child without unwinding.
            unsafe { libc::_exit(0) };
        }
        let mut pid = [0u8; 4];
        // SAFETY: reading 4 bytes from the pipe; reaping our child.
        unsafe {
            assert_eq!(libc::read(fds[0], pid.as_mut_ptr().cast(), 4), 4);
            libc::waitpid(child, std::ptr::null_mut(), 0);
            libc::close(fds[0]);
            libc::close(fds[1]);
        }
        let pid = u32::from_le_bytes(pid);
        let start = nemesis_shm::os::process_start_time(pid);
        let n = slots([Some(pid), None], [start, None]);
        let mut r = Lmt::new(1, 1, cma_cfg(u64::MAX));
        r.set_cma(true);
        let mut d = vec![0u8; msg.len()];
        let rts = Rts { id: 1, len: msg.len() as u64, addr: msg.as_ptr() as u64, pid, key: 0, backend: Backend::Cma };
        // SAFETY: `d` outlives the transfer, driven to its end here.
        unsafe { r.pre_recv(0, 9, &rts, d.as_mut_ptr(), d.len(), &n) };
        while r.progress(&n) {}
        let done = r.take_done().next();
        assert_eq!(r.peer_refusal(0), None);
        assert_eq!(done, Some((9, Outcome::Moved { bytes: msg.len() as u64 })));
        assert!(d == msg && r.stats().cma == 1);
        // Once it is gone, a read fails (nothing of a later process with its pid is taken).
        // SAFETY: killing the grandchild we started.
        unsafe { libc::kill(pid as i32, libc::SIGKILL) };
        let t = std::time::Instant::now();
        while PeerProcess::open(0, pid, start).is_ok() {
            assert!(t.elapsed().as_secs() < 10, "SIGKILL did not end {pid}");
            std::thread::sleep(std::time::Duration::from_millis(5));
        }
        // SAFETY: as above.
        unsafe { r.pre_recv(0, 10, &Rts { id: 2, ..rts }, d.as_mut_ptr(), d.len(), &n) };
        while r.progress(&n) {}
        assert_eq!(r.take_done().next(), Some((10, Outcome::Failed(Error::PeerDied))));
    }

    #[test]
    fn this_ranks_own_transfers_are_single_copies_and_nothing_else_from_it_is() {
        let me = std::process::id();
        let n = slots([Some(me), Some(me)], [None; 2]);
        let mut l = Lmt::new(0, 1, cma_cfg(0));
        l.set_cma(true);
        let msg: Vec<u8> = (0..70_000u32).map(|i| (i * 3) as u8).collect();
        let mut d = vec![0u8; msg.len()];
        // SAFETY: `msg` and `d` outlive the transfer, driven to its end here.
        let rts = unsafe { l.pre_send(0, 1, msg.as_ptr(), msg.len() as u64, me) };
        // SAFETY: as above.
        unsafe { l.pre_recv(0, 2, &rts, d.as_mut_ptr(), d.len(), &n) };
        while l.progress(&n) {}
        for (_, m) in l.take_out().collect::<Vec<_>>() {
            l.handle(0, m, &n).unwrap();
        }
        let mut done: Vec<_> = l.take_done().collect();
        done.sort_by_key(|d| d.0);
        let moved = Outcome::Moved { bytes: msg.len() as u64 };
        assert_eq!(done, [(1, moved.clone()), (2, moved)]);
        assert!(d == msg);
        assert_eq!((l.stats().cma, l.stats().split), (1, 0), "a single copy, not split with ourselves");
        // An RTS "from ourselves" that is none of our sends, and a HELP from ourselves: forged.
        let secret = vec![0x5au8; 4096];
        let mut d = vec![0u8; 4096];
        let forged = Rts { id: 7, len: 4096, addr: secret.as_ptr() as u64, pid: me, key: 0, backend: Backend::Cma };
        // SAFETY: `d` outlives the transfer, which fails at once.
        unsafe { l.pre_recv(0, 3, &forged, d.as_mut_ptr(), 4096, &n) };
        assert!(matches!(
            l.take_done().next(),
            Some((3, Outcome::Failed(Error::Forged { what: "RTS of this rank", .. })))
        ));
        assert!(d.iter().all(|&b| b == 0));
        l.take_out().for_each(drop);
        // SAFETY: `msg` outlives the transfer.
        let rts = unsafe { l.pre_send(0, 4, msg.as_ptr(), msg.len() as u64, me) };
        let help = Control::Help { id: rts.id, offset: 0, bytes: 4096, dst: secret.as_ptr() as u64, pid: me };
        assert!(matches!(l.handle(0, help, &n), Err(Error::Forged { what: "HELP from this rank", .. })));
        l.progress(&n);
        assert!(secret.iter().all(|&b| b == 0x5a), "nothing written");
    }

    #[test]
    fn an_oversize_rts_is_refused_and_nothing_moves() {
        // Decoding: longer than any address space, or a single-copy buffer past its end.
        let enc = |rts: Rts| {
            let mut b = [0u8; crate::wire::MAX_ENCODED];
            let n = Control::Rts(rts).encode(&mut b);
            Control::decode(&b[..n])
        };
        let rts = Rts { id: 1, len: u64::MAX, addr: 0, pid: 1, key: 0, backend: Backend::Ring };
        let max = crate::wire::LEN_MAX;
        assert_eq!(enc(rts), Err(Error::TooLong { len: u64::MAX, max }));
        assert_eq!(enc(Rts { len: max + 1, ..rts }), Err(Error::TooLong { len: max + 1, max }));
        assert!(enc(Rts { len: max, ..rts }).is_ok());
        let far = Rts { len: 4096, addr: max - 100, backend: Backend::Cma, ..rts };
        assert!(matches!(enc(far), Err(Error::Wire { what: "RTS buffer address", .. })));
        // Validation: above the configured maximum; the sender is released, nothing is read.
        let me = std::process::id();
        let n = slots([Some(me), Some(me)], [None; 2]);
        let mut r = own_lmt(1, 1, Config { max_len: 1 << 20, ..cma_cfg(u64::MAX) });
        let msg = vec![7u8; 4096];
        let mut d = vec![0u8; 4096];
        let big = Rts { id: 3, len: (1 << 20) + 1, addr: msg.as_ptr() as u64, pid: me, key: 0, backend: Backend::Cma };
        // SAFETY: `d` outlives the transfer, which fails at once.
        unsafe { r.pre_recv(0, 5, &big, d.as_mut_ptr(), 4096, &n) };
        assert_eq!(
            r.take_done().next(),
            Some((5, Outcome::Failed(Error::TooLong { len: (1 << 20) + 1, max: 1 << 20 })))
        );
        assert_eq!(r.take_out().collect::<Vec<_>>(), [(0, Control::Done { id: 3, bytes: 0 })]);
        assert!(d.iter().all(|&b| b == 0) && !r.busy());
        // The network rendezvous alike: CTS of nothing.
        let mut net = crate::NetLmt::new();
        net.set_max_len(1 << 20);
        struct Refuse;
        impl crate::LmtBackend for Refuse {
            unsafe fn start_send(&mut self, _: u32, _: u32, _: *const u8, _: u64) -> Result<()> {
                unreachable!("nothing is sent")
            }
            unsafe fn start_recv(
                &mut self,
                _: u32,
                _: u32,
                _: *mut u8,
                _: u64,
                _: Option<crate::RemoteBuf>,
            ) -> Result<crate::RecvPlan> {
                unreachable!("nothing is received")
            }
            fn take_lmt_done(&mut self) -> Vec<crate::NetDone> {
                Vec::new()
            }
        }
        let big = Rts { backend: Backend::Net, ..big };
        // SAFETY: `d` outlives the transfer, which fails at once.
        unsafe { net.pre_recv(4, 6, &big, d.as_mut_ptr(), 4096, &mut Refuse) };
        assert_eq!(
            net.take_done().next(),
            Some((6, Outcome::Failed(Error::TooLong { len: (1 << 20) + 1, max: 1 << 20 })))
        );
        assert_eq!(net.take_out().collect::<Vec<_>>(), [(4, Control::Cts { id: 3, ring: 0, epoch: 0, bytes: 0 })]);
    }
}
