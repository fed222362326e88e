//! The Endpoint: MPI-style point-to-point messaging over the node segment
//! (`shared/ARCHITECTURE.md`, "One message, end to end").
//!
//! - **Matching** on `(source | ANY_SOURCE, tag | ANY_TAG, context)` in posting order against
//!   messages in arrival order; per-pair order across the fastbox and queue paths comes from the
//!   port's sequence numbers, so messages from one source in one context match receives in the
//!   order sent (non-overtaking).
//! - **Eager protocol**: a message up to the eager limit goes through the pair's fastbox or in
//!   cells (several for a long one); when cells run out the send waits in a pending list that
//!   progress resumes.
//! - **Rendezvous** (`nemesis-lmt`): a longer message sends only an RTS, matched like an eager
//!   message; once a receive takes it, the data moves through a copy ring of the receiver's (both
//!   sides copying, pipelined) or by a single CMA read of the sender's buffer, driven by progress.
//!   A send by rendezvous completes when the receiver has the data (so it is also synchronous).
//! - **Receive**: a receive first searches the unexpected list; if nothing matches and no
//!   earlier posted receive could take the same message, progress runs with this receive as the
//!   match target ("bypass" of the posted list, NEMESIS L811–815 of
//!   `shared/papers/mercier-2019-hdr-nemesis-topology.txt`); only if still unmatched is it posted.
//!   An unexpected message is copied out of its cell at once (cells are scarce), up to
//!   `NEMESIS_UNEXPECTED_MAX` bytes in all; beyond, a local sender's unexpected messages stay in
//!   its cells until received (back-pressure: the sender runs out of cells and waits).
//! - **Truncation**: a message longer than the buffer fills the buffer and completes the receive
//!   with [`Error::Truncated`] carrying its real length; nothing is written past the buffer.
//! - **Dead peers**: once nothing more can arrive from a dead peer, receives that name it
//!   complete with [`Error::PeerDied`]; sends to it fail the same way.
//! - **Waiting** follows [`WaitMode`](crate::WaitMode) (`NEMESIS_WAIT`).
//! - **Errors not a call's own** (another peer's malformed message, a failure of the node, met
//!   while a call waits): the call returns such an error only once none of its requests can
//!   touch the caller's memory — withdrawn, or their transfer finished (`settle.rs`). An RTS
//!   announcing more than any buffer holds is refused where it arrives ([`Error::RtsTooLong`]).
//! - **Per-pair thresholds**: each local peer's distance (`crate::topology::distance`, from the
//!   localities `nemesis-run` gives) chooses its eager limits and its rendezvous thresholds from
//!   the table of [`Config::pairs`]. The inline send paths compare with the smallest eager limit of
//!   the node's pairs, as with one limit; only a message above it looks at its pair's (`eager.rs`).
//!
//! - **Cancellation** (`cancel.rs`): a posted receive not yet matched is withdrawn; a send is
//!   withdrawn by its receiver if no receive has taken its message yet (a request to the
//!   receiver, answered in order after the message itself).
//! - **Matched probes**: a probe can reserve the message it found ([`Message`]), which no other
//!   receive then matches and a later receive of that message takes.
//!
//! One file per concept: `matching.rs` (receive selections, posted and unexpected lists),
//! `eager.rs` (send paths, acks, sends waiting for cells), `rendezvous.rs` (large messages), `progress.rs`
//! (polling, routing arrivals, dead peers), `waiting.rs` (waits and the bypass receive),
//! `request.rs` (the request table), `cancel.rs` (cancelling receives and sends), `pieces.rs`
//! (buffers in pieces: non-contiguous data moved without a packed copy), `settle.rs` (what a call
//! that meets an error not its own does with its requests before it returns: no transfer touches
//! the caller's memory afterwards); this file holds the public API, `Inner` and init/finalize.

mod cancel;
mod checkpoint;
mod collective;
mod eager;
mod ft;
mod fused;
mod matching;
mod pieces;
mod progress;
mod recovery;
mod rendezvous;
mod request;
mod settle;
mod unexpected;
mod waiting;

use std::collections::VecDeque;
use std::marker::PhantomData;
use std::sync::atomic::AtomicU32;

use nemesis_lmt::{Lmt, NetLmt};
use nemesis_shm::netmod::Netmod;
use nemesis_shm::{Node, Port, PortConfig, Segment, Sent};

pub use collective::{CollArea, CollLane};
use eager::{Mode, Pending};
pub use fused::Link;
use matching::{Found, Posted};
use progress::Active;
use rendezvous::SegRings;
pub use request::Request;
use request::{Op, RecvBuf, Requests};
use unexpected::UnexpectedList;

use crate::bootstrap::{self, Boot};
use crate::config::Config;
use crate::error::{Error, Result};
use crate::net::Net;
use crate::pmi::ProcessManager;
use crate::topology::{Distance, Locality, PairThresholds};
use crate::wait::Waiter;

/// Receive from any source.
pub const ANY_SOURCE: i32 = -1;
/// Receive any tag.
pub const ANY_TAG: i32 = -1;
/// The context of the world communicator.
pub const WORLD: u32 = 0;

/// Message kind of eager data in the message header.
const KIND_EAGER: u8 = 0;
/// Eager data of a synchronous send: the receiver acknowledges the match (`aux`: the sender's
/// token).
const KIND_EAGER_SYNC: u8 = 1;
/// The acknowledgement of a synchronous send's match (`aux`: the token, no payload).
const KIND_SYNC_ACK: u8 = 2;
/// Request to send a large message (payload: an encoded [`Rts`](nemesis_lmt::Rts)); matched like eager data.
const KIND_RTS: u8 = 3;
/// Other rendezvous messages (payload: one or more encoded CTS, DONE, COOKIE, HELP, HELPED back to
/// back, all for one peer); tag and context unused.
const KIND_LMT: u8 = 4;
/// Asks the receiver to drop a message it has not matched (`aux`: the message's token; no
/// payload): the cancellation of a send.
const KIND_CANCEL: u8 = 5;
/// The receiver's answer to a [`KIND_CANCEL`] (`aux`: the token; `tag`: 1 if the message was
/// dropped, 0 if a receive had matched it).
const KIND_CANCEL_ACK: u8 = 6;
/// A fault-tolerance control message of the engine (payload: an encoded
/// [`nemesis_ft::Control`]); tag and context unused. No piggyback, no date.
const KIND_FT_CONTROL: u8 = 7;
/// A checkpoint marker between the members of a group (`aux`: the generation; `tag`: 0 when the
/// sender entered the checkpoint, else one of `MARK_*`).
const KIND_FT_MARK: u8 = 8;
/// Checkpoint marker stage 1: the sender's file is durable.
const MARK_DURABLE: i32 = 1;
/// Checkpoint marker stage 1: the sender could not write its file (the group abandons).
const MARK_FAILED: i32 = 2;
/// Checkpoint marker stage 1: the sender re-executes in a recovery round (the group skips).
const MARK_SKIPPED: i32 = 3;
/// Fragments taken per progress pass: bounds the time a pass can take.
const POLL_BUDGET: usize = 32;

/// Marks a rank that has no local rank (on another node).
const NOT_LOCAL: u16 = u16::MAX;

/// What a completed receive (or probe) found.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Status {
    /// The sender's rank.
    pub source: u32,
    /// The message's tag.
    pub tag: i32,
    /// The message's length in bytes (the real one, also when truncated).
    pub len: usize,
}

/// The message a non-blocking send sent, for [`Endpoint::cancel_send`] (from
/// [`Endpoint::send_id`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SendId {
    dest: u32,
    token: u32,
    req: Request,
}

/// A message a matched probe reserved ([`Endpoint::improbe`], [`Endpoint::mprobe`]): no receive
/// matches it but [`Endpoint::imrecv_raw`] or [`Endpoint::mrecv`] naming it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Message {
    id: u64,
    source: u32,
}

/// A local peer's distance and eager limits (`crate::topology::distance`).
#[derive(Clone, Copy, Debug)]
struct Pair {
    distance: Distance,
    eager: usize,
    eager_blocking: usize,
}

/// What the Endpoint knows of a peer's end.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
enum Peer {
    #[default]
    Alive,
    /// It ended; messages it sent may still be arriving.
    Gone,
    /// It ended and nothing more from it can arrive.
    Silent,
}

/// Application messages and bytes sent to one rank.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Traffic {
    /// Messages (a rendezvous message counts once).
    pub messages: u64,
    /// Payload bytes.
    pub bytes: u64,
}

/// The shared state behind an [`Endpoint`].
struct Inner {
    // Field order is drop order: `net` (its cells) and `port` borrow `segment`, so they go first.
    /// The network module, when the job spans nodes.
    net: Option<Net<'static>>,
    port: Port<'static, Segment>,
    /// The segment, at a stable address (shared: the collectives' areas hold it too,
    /// `collective.rs`) for the `'static` borrows of `port`, `net` and the doorbells.
    segment: std::sync::Arc<Segment>,
    /// This rank's doorbell in the segment.
    bell: &'static AtomicU32,
    /// Every local rank's doorbell, by local rank.
    bells: Box<[&'static AtomicU32]>,
    /// This rank's mail flag in the segment, with the launcher's fault-tolerance channel
    /// (`recovery.rs`); `None` otherwise.
    ft_mail: Option<&'static AtomicU32>,
    pmi: Option<ProcessManager>,
    rank: u32,
    size: u32,
    local_rank: u16,
    /// Global rank → local rank ([`NOT_LOCAL`] if on another node).
    route: Box<[u16]>,
    /// Local rank → global rank.
    global: Box<[u32]>,
    cfg: Config,
    /// Empty polls a `yield` or `block` wait spins first ([`Config::spin_polls`], resolved).
    spin: u32,
    /// Messages to a local peer up to this length go eagerly: the smallest of the pairs' eager
    /// limits (within what the cells carry); a longer one looks at its pair's ([`Self::pairs`]).
    eager: usize,
    /// Blocking sends to a local peer up to this length go eagerly: the smallest of the pairs'
    /// (at least `eager`); a longer one looks at its pair's.
    eager_blocking: usize,
    /// Non-blocking sends to a local peer shorter than this take the inline path: `eager + 1`, or
    /// 0 with fault tolerance on (every send then takes the slow path, which starts with the
    /// engine's hook): one comparison serves both, FT off pays nothing for it.
    inline_below: usize,
    /// The same for blocking sends: `eager_blocking + 1`, or 0 with fault tolerance.
    inline_blocking_below: usize,
    /// Fault tolerance (HydEE), when on.
    ft: Option<Box<crate::ft::Ft>>,
    /// Per global rank: the Endpoint's own messages handed to the port (acknowledgements,
    /// rendezvous and fault-tolerance control): the port counts every message it carries, these
    /// are taken off to leave the application's (the communication matrix, [`Endpoint::traffic`]).
    own: Box<[Traffic]>,
    /// Per global rank: application messages that do not go through the port as they are (to
    /// remote ranks, and rendezvous messages, whose RTS is one of the Endpoint's own).
    other: Box<[Traffic]>,
    /// Messages to a remote peer up to this length go eagerly (through the netmod).
    eager_net: usize,
    /// Per local rank: its distance from us and the eager limits chosen for it.
    pairs: Box<[Pair]>,
    reqs: Requests,
    posted: VecDeque<Posted>,
    /// Unexpected messages by source, with their ids (which give their arrival order).
    unexpected: UnexpectedList,
    next_unexpected: u64,
    /// Bytes of unexpected messages copied out of the segment (their `data`).
    unexpected_bytes: usize,
    /// Past `NEMESIS_UNEXPECTED_MAX`: fastbox acknowledgements are withheld and unexpected cell
    /// messages of local senders held (`matching.rs`, `hold_unexpected`).
    throttled: bool,
    /// Per global rank: where the fragments of the message being received from it go.
    active: Box<[Active]>,
    pending: VecDeque<Pending>,
    /// Local sources of posted receives that name one: their fastboxes are polled first.
    expected: Vec<u16>,
    /// Per local rank: posted receives naming it (`expected` lists those above 0). Kept
    /// incrementally: a window of posted receives costs O(1) each, not a rebuild per post.
    expected_count: Box<[u32]>,
    /// Posted receives from `ANY_SOURCE` (kept with `expected_count`).
    any_posted: u32,
    /// Per global rank.
    peers: Box<[Peer]>,
    /// Buffers of consumed unexpected messages, for reuse.
    spare: Vec<Vec<u8>>,
    /// Synchronous sends waiting for their acknowledgement: `(token, request, dest, status)`.
    sync_waiting: Vec<(u32, Request, u32, Status)>,
    /// The last token given to a message (sync acknowledgements, cancellation); 0 is never one.
    next_token: u32,
    /// Cancellations of sends waiting for the receiver's answer.
    cancels: Vec<cancel::Cancelling>,
    /// Large messages in flight with local peers, and with remote ones.
    lmt: Lmt,
    netlmt: NetLmt,
    rings: SegRings,
    /// Rendezvous from other groups under recovery whose data may not all come (`recovery.rs`).
    ft_rdv: recovery::Rendezvous,
    /// RTSs refused for their length ([`Error::RtsTooLong`]): on arrival, or by a checkpoint.
    refused_rts: u64,
    pid: u32,
    node: String,
    finalized: bool,
}

/// A rank's endpoint: send and receive with MPI matching semantics.
///
/// ```no_run
/// use nemesis::{ANY_SOURCE, ANY_TAG, Endpoint, WORLD};
///
/// let mut ep = Endpoint::init().unwrap();
/// let (rank, size) = (ep.rank(), ep.size());
/// if rank == 0 {
///     let mut buf = [0u8; 8];
///     for _ in 1..size {
///         let st = ep.recv(&mut buf, ANY_SOURCE, ANY_TAG, WORLD).unwrap();
///         println!("{} sent {:?}", st.source, &buf[..st.len]);
///     }
/// } else {
///     ep.send(&rank.to_le_bytes(), 0, 7, WORLD).unwrap();
/// }
/// ep.finalize().unwrap();
/// ```
pub struct Endpoint {
    inner: Box<Inner>,
}

// SAFETY: the Endpoint is driven by one thread at a time (`&mut self` everywhere). The raw
// pointers it holds are the caller's buffers of pending non-blocking operations (valid by the
// contracts of `isend_raw`/`irecv_raw` and of scopes, whichever thread completes them) and views
// of the shared segment, which is not tied to a thread.
unsafe impl Send for Endpoint {}

impl Endpoint {
    /// Starts this process's endpoint: bootstrap through PMI-1 (or as a singleton), attach the
    /// node segment, read the `NEMESIS_*` configuration. It installs no `tracing` subscriber:
    /// that is the program's choice ([`crate::log::init`] is ours).
    pub fn init() -> Result<Endpoint> {
        Self::init_with(Config::from_env()?)
    }

    /// As [`init`](Self::init), with the configuration given rather than read from `NEMESIS_*`
    /// (for a runtime that takes its settings elsewhere). Every rank of a job should pass the
    /// same one.
    pub fn init_with(cfg: Config) -> Result<Endpoint> {
        let ft = crate::ft::FtConfig::from_env()?;
        let boot = bootstrap::bootstrap()?;
        Self::from_boot(boot, cfg, ft)
    }

    fn from_boot(boot: Boot, cfg: Config, ft_cfg: Option<crate::ft::FtConfig>) -> Result<Endpoint> {
        let Boot { rank, size, local_ranks, local_rank, segment, pmi, node, net, localities: published } = boot;
        let nlocal = local_ranks.len();
        let mut route = vec![NOT_LOCAL; size as usize];
        for (l, &g) in local_ranks.iter().enumerate() {
            route[g as usize] = l as u16;
        }
        let segment = std::sync::Arc::new(segment);
        // SAFETY: `segment` is in an `Arc` (its address never changes) held by `Inner`, which drops
        // `net` and `port` before it; they, the rings, the doorbells and the mail flag borrowed from `seg` never
        // leave `Inner`, so the `'static` borrows never outlive the segment.
        let seg: &'static Segment = unsafe { &*(&*segment as *const Segment) };
        let mut port = Port::new(seg, local_rank, PortConfig::default())?;
        if net.is_some() {
            // Half of our cells take network arrivals, half our sends to local peers.
            port.netmod_reserve(seg.params().cells_per_rank as usize / 2)?;
        }
        let bell = &seg.state_of(local_rank)?.doorbell;
        let bells =
            (0..local_ranks.len() as u16).map(|l| seg.state_of(l).map(|st| &st.doorbell)).collect::<Result<_, _>>()?;
        let p = *seg.params();
        let pids = (0..local_ranks.len() as u16)
            .map(|l| seg.state_of(l).ok().and_then(|st| Some((st.pid_here()?, st.start_time()))))
            .collect();
        let rings = SegRings {
            seg,
            per: p.lmt_rings_per_rank as u16,
            slots: p.lmt_slots,
            slot_size: p.lmt_slot_size as usize,
            pids,
        };
        let lmt_cfg = nemesis_lmt::Config {
            policy: cfg.lmt,
            cma_min: cfg.cma_min as u64,
            cma_max: cfg.cma_max as u64,
            split_min: cfg.split_min as u64,
            ..nemesis_lmt::Config::default()
        };
        let mut lmt = Lmt::new(local_rank, rings.per, lmt_cfg);
        if cfg.lmt != nemesis_lmt::Policy::Ring {
            // Peers read large messages straight from our buffers where the kernel allows it.
            nemesis_lmt::cma::allow_readers();
            let probe = nemesis_lmt::cma::probe_startup();
            if let Err(why) = &probe
                && local_rank == 0
            {
                tracing::warn!(
                    "single-copy reads (CMA) are not allowed here ({why}): large messages go through shared-copy rings"
                );
            }
            lmt.set_cma(probe.is_ok());
        }
        let default_eager =
            if lmt.cma_allowed() { crate::config::DEFAULT_EAGER_MAX } else { crate::config::DEFAULT_EAGER_MAX_RING };
        let max = port.max_message();
        let eager_net = cfg.eager_max.unwrap_or(default_eager).min(max);
        // Each local peer's distance, from the localities the launcher gave (or, without, those
        // the ranks published at start-up), and its thresholds.
        let localities = Locality::from_env(nlocal).or(published);
        let mut pairs = Vec::with_capacity(nlocal);
        for l in 0..nlocal {
            let distance =
                localities.as_ref().map_or(Distance::Unknown, |v| v[usize::from(local_rank)].distance(&v[l]));
            let row: &PairThresholds = cfg.pairs.row(distance);
            let eager = row.eager_max.or(cfg.eager_max).unwrap_or(default_eager).min(max);
            let blocking =
                row.eager_blocking_max.or(cfg.eager_blocking_max).unwrap_or(crate::config::DEFAULT_EAGER_BLOCKING_MAX);
            pairs.push(Pair { distance, eager, eager_blocking: blocking.min(max).max(eager) });
            lmt.set_peer(
                l as u16,
                nemesis_lmt::PeerConfig {
                    cma_min: row.cma_min.unwrap_or(cfg.cma_min) as u64,
                    cma_max: row.cma_max.unwrap_or(cfg.cma_max) as u64,
                    split_min: row.split_min.unwrap_or(cfg.split_min) as u64,
                    ring_chunk: row.ring_chunk.unwrap_or(0) as u64,
                },
            );
        }
        // The inline paths compare with the smallest limit of the node's pairs: one comparison,
        // as with a single limit; only a message above it looks at its pair's.
        let others = || pairs.iter().enumerate().filter(|&(l, _)| l != usize::from(local_rank)).map(|(_, p)| p);
        let eager = others().map(|p| p.eager).min().unwrap_or(eager_net);
        let eager_blocking = others().map(|p| p.eager_blocking).min().unwrap_or(eager_net).max(eager);
        let job_id = match pmi.as_ref() {
            Some(p) => p.job_id().to_owned(),
            None => format!("singleton-{}", std::process::id()),
        };
        let (ft, saved) = match ft_cfg {
            Some(c) => {
                let (ft, saved) = crate::ft::Ft::new(c, rank, size, &job_id)?;
                (Some(Box::new(ft)), saved)
            }
            None => (None, Vec::new()),
        };
        let ft_off = ft.is_none();
        let ft_mail = match ft.as_deref() {
            Some(f) if f.channel.is_some() => Some(&seg.state_of(local_rank)?.mail),
            _ => None,
        };
        let mut inner = Inner {
            net,
            port,
            segment,
            bell,
            bells,
            ft_mail,
            pmi,
            rank,
            size,
            local_rank,
            route: route.into(),
            global: local_ranks.into(),
            cfg,
            spin: cfg.spin_polls.unwrap_or_else(|| crate::wait::default_spin(nlocal)),
            eager,
            eager_blocking,
            eager_net,
            pairs: pairs.into(),
            inline_below: if ft_off { eager + 1 } else { 0 },
            inline_blocking_below: if ft_off { eager_blocking + 1 } else { 0 },
            ft,
            own: vec![Traffic::default(); size as usize].into(),
            other: vec![Traffic::default(); size as usize].into(),
            reqs: Requests::default(),
            posted: VecDeque::new(),
            unexpected: UnexpectedList::new(size),
            next_unexpected: 0,
            unexpected_bytes: 0,
            throttled: false,
            active: vec![Active::None; size as usize].into(),
            pending: VecDeque::new(),
            expected: Vec::new(),
            expected_count: vec![0; nlocal].into(),
            any_posted: 0,
            peers: vec![Peer::Alive; size as usize].into(),
            spare: Vec::new(),
            sync_waiting: Vec::new(),
            next_token: 0,
            cancels: Vec::new(),
            lmt,
            netlmt: NetLmt::new(),
            rings,
            ft_rdv: recovery::Rendezvous::default(),
            refused_rts: 0,
            pid: std::process::id(),
            node,
            finalized: false,
        };
        inner.restore_unexpected(saved);
        if let Some(ft) = inner.ft.as_deref_mut()
            && ft.process.in_recovery()
        {
            // Restarted: tell the launcher, and send the engine's first messages (`Restarted` to
            // the other groups, `MyPhase` to the coordinator).
            let generation = ft.generation;
            if let Some(ch) = ft.channel.as_mut() {
                ch.send(&crate::ft::channel::Frame::Running { generation });
            }
            inner.ft_drain()?;
        }
        tracing::debug!(rank, size, wait = cfg.wait.name(), eager_max = eager, ft = !ft_off, "endpoint ready");
        Ok(Endpoint { inner: Box::new(inner) })
    }

    /// This process's rank.
    #[inline(always)]
    pub fn rank(&self) -> u32 {
        self.inner.rank
    }

    /// Number of ranks in the job.
    #[inline(always)]
    pub fn size(&self) -> u32 {
        self.inner.size
    }

    /// The configuration in force.
    pub fn config(&self) -> Config {
        self.inner.cfg
    }

    /// The node segment (for tools and tests).
    pub fn segment(&self) -> &Segment {
        &self.inner.segment
    }

    /// Application messages and bytes this rank has sent to each rank, indexed by rank (the
    /// communication matrix's row; every send counts, a rendezvous message once). The counting
    /// costs the send path one addition (the port's byte counter; its message numbers count).
    pub fn traffic(&self) -> Vec<Traffic> {
        self.inner.traffic()
    }

    /// Bytes of unexpected messages (arrived before their receive) copied out of the segment
    /// and not received yet: at most `NEMESIS_UNEXPECTED_MAX`, plus the fastbox slots of each
    /// local sender (README, "Failures").
    pub fn unexpected_bytes(&self) -> usize {
        self.inner.unexpected_bytes
    }

    /// RTSs refused for the length they announced ([`Error::RtsTooLong`]): longer than any buffer
    /// (on arrival), or than this node's memory (by a checkpoint that would have pulled them in).
    pub fn refused_rts(&self) -> u64 {
        self.inner.refused_rts
    }

    /// How the large messages received so far moved (shared-copy ring or single copy).
    pub fn lmt_stats(&self) -> nemesis_lmt::Stats {
        self.inner.lmt.stats()
    }

    /// Stops (or resumes) sending through fastboxes (every message then goes in cells); for
    /// benchmarks and diagnosis.
    pub fn set_fastboxes(&mut self, on: bool) {
        self.inner.port.set_fastboxes(on);
    }

    /// The largest message sent without rendezvous by every kind of send to any rank of this
    /// node (the smallest of the pairs' limits; see [`eager_limit_to`](Self::eager_limit_to)).
    pub fn eager_limit(&self) -> usize {
        self.inner.eager
    }

    /// The largest message sent without rendezvous by every kind of send to `rank`: its pair's
    /// limit for a rank of this node (chosen by [`distance`](Self::distance)), the netmod's
    /// for another; `None` for a rank outside the job.
    pub fn eager_limit_to(&self, rank: u32) -> Option<usize> {
        let inner = &*self.inner;
        match *inner.route.get(rank as usize)? {
            NOT_LOCAL => Some(inner.eager_net),
            l => inner.pairs.get(usize::from(l)).map(|p| p.eager),
        }
    }

    /// The distance between this rank and `rank` of this node (`crate::topology::Distance`):
    /// [`Distance::Unknown`] when ranks are not bound or no locality was given; `None` for a rank
    /// of another node or outside the job.
    pub fn distance(&self, rank: u32) -> Option<Distance> {
        let l = *self.inner.route.get(rank as usize)?;
        self.inner.pairs.get(usize::from(l)).map(|p| p.distance)
    }

    /// The largest message a blocking [`send`](Self::send) to a rank of this node sends without
    /// rendezvous (at least [`eager_limit`](Self::eager_limit)).
    pub fn eager_blocking_limit(&self) -> usize {
        self.inner.eager_blocking
    }

    /// Sends `buf` to `dest` with `tag` in `context`; returns once `buf` may be reused: a message
    /// up to the eager limit is in a fastbox or in cells; a longer one was received (rendezvous).
    /// To a rank of this node the blocking limit applies ([`eager_blocking_limit`](
    /// Self::eager_blocking_limit)): the caller waits anyway, and cells copied in by one core
    /// while the other copies out beat one single copy of a message alone (README, "Large
    /// messages").
    #[inline]
    pub fn send(&mut self, buf: &[u8], dest: u32, tag: i32, context: u32) -> Result<()> {
        let inner = &mut *self.inner;
        let local = inner.check_send(dest, tag)?;
        if buf.len() >= inner.inline_blocking_below || local == NOT_LOCAL {
            return inner.send_blocking_slow(buf, local, dest, tag, context);
        }
        let hdr = inner.header(dest, tag, context);
        match inner.port.send(local, &hdr, None, buf) {
            Ok(Sent::Done) => {
                inner.ring(local);
                Ok(())
            }
            Ok(Sent::Pending(ps)) => {
                let req = inner.reqs.insert(Op::Send { ps, buf: buf.as_ptr(), len: buf.len(), dest, pieces: None });
                inner.pending.push_back(Pending { req, internal: false, sync: None, own: None });
                inner.wait(req).map(drop)
            }
            Err(e) => Err(inner.send_error(e, dest)),
        }
    }

    /// Sends `buf` synchronously: returns once a matching receive has taken the message (MPI's
    /// synchronous mode), and `buf` may be reused.
    pub fn ssend(&mut self, buf: &[u8], dest: u32, tag: i32, context: u32) -> Result<()> {
        // SAFETY: `buf` outlives the request, which we wait for before returning.
        let req = unsafe { self.issend_raw(buf.as_ptr(), buf.len(), dest, tag, context) }?;
        self.inner.wait(req).map(drop)
    }

    /// Starts a synchronous send: the request completes once a matching receive has taken the
    /// message.
    ///
    /// # Safety
    /// As for [`isend_raw`](Self::isend_raw).
    pub unsafe fn issend_raw(
        &mut self,
        ptr: *const u8,
        len: usize,
        dest: u32,
        tag: i32,
        context: u32,
    ) -> Result<Request> {
        let inner = &mut *self.inner;
        Inner::check_len(len)?;
        let local = inner.check_send(dest, tag)?;
        let token = inner.token();
        if len >= inner.inline_below || local == NOT_LOCAL {
            // SAFETY: the caller's contract.
            return unsafe { inner.send_slow(ptr, len, local, dest, tag, context, Mode::Sync, token) };
        }
        // SAFETY: the caller's contract.
        unsafe { inner.send_eager::<true>(ptr, len, local, dest, tag, context, token) }
    }

    /// Asks the process manager to end the whole job with `code` (MPI_Abort), printing `msg`;
    /// exits this process with `code` if the process manager has not killed it within a moment
    /// (or at once for a singleton).
    pub fn abort(&mut self, code: i32, msg: &str) -> ! {
        eprintln!("nemesis: rank {} aborts the job (code {code}): {msg}", self.inner.rank);
        if let Some(pmi) = self.inner.pmi.as_mut()
            && pmi.abort(code, msg).is_ok()
        {
            std::thread::sleep(std::time::Duration::from_secs(2));
        }
        std::process::exit(code & 0xff)
    }

    /// The ranks on this node (sharing its segment), in rank order.
    pub fn local_ranks(&self) -> &[u32] {
        &self.inner.global
    }

    /// The lowest rank of this node: the same number on every rank of the node and a different
    /// one on every other node. It names the node for `MPI_Comm_split_type(MPI_COMM_TYPE_SHARED)`
    /// (its colour) and for the collectives' two levels (intra-node, then between the nodes'
    /// leaders), so that both group ranks exactly as the segment does.
    pub fn node_leader(&self) -> u32 {
        self.inner.global.first().copied().unwrap_or(self.inner.rank)
    }

    /// True if `rank` shares this node's segment.
    pub fn is_local(&self, rank: u32) -> bool {
        self.inner.route.get(rank as usize).is_some_and(|&l| l != NOT_LOCAL)
    }

    /// This node's id.
    pub fn node(&self) -> &str {
        &self.inner.node
    }

    /// Receives into `buf` a message matching `(source, tag, context)`; `source` may be
    /// [`ANY_SOURCE`] and `tag` [`ANY_TAG`].
    #[inline]
    pub fn recv(&mut self, buf: &mut [u8], source: i32, tag: i32, context: u32) -> Result<Status> {
        let inner = &mut *self.inner;
        let want = inner.check_recv(source, tag, context)?;
        let rb = RecvBuf::bytes(buf.as_mut_ptr(), buf.len());
        if !inner.unexpected.is_empty() {
            match inner.take_unexpected(want, rb) {
                Found::Done(r, d) => {
                    inner.ft_deliver(d);
                    return r;
                }
                Found::Claimed(req) => return inner.wait(req),
                Found::Nothing => {}
            }
        }
        if !inner.posted.is_empty() {
            // An earlier receive might match the same message: queue behind it.
            let req = inner.post(want, rb)?;
            return inner.wait(req);
        }
        inner.recv_bypass(want, rb)
    }

    /// Starts sending `len` bytes at `ptr`.
    ///
    /// # Safety
    /// The `len` bytes at `ptr` must stay valid and unchanged until the request completes
    /// (`wait`/`test` returned it, or `wait_all`/`wait_any` did).
    pub unsafe fn isend_raw(
        &mut self,
        ptr: *const u8,
        len: usize,
        dest: u32,
        tag: i32,
        context: u32,
    ) -> Result<Request> {
        // SAFETY: the caller's contract.
        match unsafe { self.isend_now(ptr, len, dest, tag, context) }? {
            // Out at once: recorded as a complete request, for `wait` and `cancel_send`.
            Ok(id) => {
                let inner = &mut *self.inner;
                Ok(inner.eager_sent(false, id.token, dest, Status { source: inner.rank, tag, len }))
            }
            Err(req) => Ok(req),
        }
    }

    /// [`isend_raw`](Self::isend_raw) for a caller that keeps its own record of a send complete
    /// at once: `Ok(Ok(id))` when the message went out whole to a rank of this node (into its
    /// fastbox or cells; the buffer may be reused and no request was made), `id` naming the
    /// message for [`cancel_send`](Self::cancel_send); `Ok(Err(req))` otherwise, the request
    /// [`isend_raw`](Self::isend_raw) would have returned. The C ABI's `MPI_Isend` uses it: a
    /// stream of small sends then makes and completes no Endpoint request.
    ///
    /// # Safety
    /// As for [`isend_raw`](Self::isend_raw).
    pub unsafe fn isend_now(
        &mut self,
        ptr: *const u8,
        len: usize,
        dest: u32,
        tag: i32,
        context: u32,
    ) -> Result<core::result::Result<SendId, Request>> {
        let inner = &mut *self.inner;
        Inner::check_len(len)?;
        let local = inner.check_send(dest, tag)?;
        let token = inner.token();
        if len >= inner.inline_below || local == NOT_LOCAL {
            // SAFETY: the caller's contract.
            return unsafe { inner.send_slow(ptr, len, local, dest, tag, context, Mode::Standard, token) }.map(Err);
        }
        // SAFETY: the caller's contract.
        unsafe { inner.send_eager_now(ptr, len, local, dest, tag, context, token) }
    }

    /// Starts receiving into the `cap` bytes at `ptr`.
    ///
    /// # Safety
    /// The `cap` bytes at `ptr` must stay valid for writes, and not be accessed otherwise, until
    /// the request completes.
    pub unsafe fn irecv_raw(
        &mut self,
        ptr: *mut u8,
        cap: usize,
        source: i32,
        tag: i32,
        context: u32,
    ) -> Result<Request> {
        let inner = &mut *self.inner;
        let want = inner.check_recv(source, tag, context)?;
        inner.irecv(want, RecvBuf::bytes(ptr, cap))
    }

    /// Runs `f` with a [`Scope`] in which non-blocking operations may borrow buffers; every
    /// operation started in the scope is over when `scope` returns (it waits for those `f` left
    /// outstanding, even if `f` panics), and none touches its buffer any more. `f`'s result, or
    /// the first error of a request it left outstanding: its own (a truncation...), or one its
    /// wait met that was not its own (another peer's malformed message), after which the request
    /// was settled (`settle.rs`: withdrawn, or its transfer finished).
    pub fn scope<'env, R>(&mut self, f: impl for<'s> FnOnce(&mut Scope<'s, 'env>) -> R) -> Result<R> {
        let mut s = Scope { ep: self, outstanding: Vec::new(), _env: PhantomData };
        let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| f(&mut s)));
        let mut failed = None;
        for req in std::mem::take(&mut s.outstanding) {
            if s.ep.inner.reqs.is_valid(req)
                && let Err(e) = s.ep.inner.wait(req)
            {
                failed.get_or_insert(e);
            }
        }
        match (r, failed) {
            (Ok(v), None) => Ok(v),
            (Ok(_), Some(e)) => Err(e),
            (Err(p), _) => std::panic::resume_unwind(p),
        }
    }

    /// Waits for `req` to complete and returns its status (or its error). Whatever it returns,
    /// `req` is over and its buffer free: an error that is not the request's own (met while
    /// progressing: another peer's malformed message, a failure of the node) is returned once
    /// the request was settled (`settle.rs`: withdrawn if no peer can touch its buffer, else its
    /// transfer finished).
    pub fn wait(&mut self, req: Request) -> Result<Status> {
        self.inner.wait(req)
    }

    /// Completes `req` if it can: `Ok(None)` if still in flight. An error that is not the
    /// request's own (met while progressing) settles it first (as [`wait`](Self::wait)): after
    /// any `Err`, `req` is stale and its buffer free.
    pub fn test(&mut self, req: Request) -> Result<Option<Status>> {
        let inner = &mut *self.inner;
        if !inner.reqs.is_done(req)?
            && let Err(e) = inner.progress(None)
        {
            inner.settle(&[req]);
            return Err(e);
        }
        let taken = inner.reqs.take(req)?;
        if taken.is_some() {
            inner.ft_taken(req);
        }
        taken.transpose()
    }

    /// Waits for every request; the results are in the order of `reqs`.
    pub fn wait_all(&mut self, reqs: &[Request]) -> Vec<Result<Status>> {
        reqs.iter().map(|&r| self.inner.wait(r)).collect()
    }

    /// Waits for one of `reqs` to complete: its index and result. Invalid (stale) handles are
    /// skipped; if none is valid, [`Error::InvalidRequest`]. An error that is not theirs (met
    /// while progressing) settles every one of them (as [`wait`](Self::wait)) before it is
    /// returned: after an outer `Err`, none is in flight.
    pub fn wait_any(&mut self, reqs: &[Request]) -> Result<(usize, Result<Status>)> {
        let inner = &mut *self.inner;
        if !reqs.iter().any(|&r| inner.reqs.is_valid(r)) {
            return Err(Error::InvalidRequest);
        }
        let mut waiter = Waiter::new(inner.cfg.wait, inner.spin);
        loop {
            for (i, &r) in reqs.iter().enumerate() {
                if inner.reqs.is_valid(r) && inner.reqs.is_done(r)? {
                    let Some(res) = inner.reqs.take(r)? else { return Err(Error::InvalidRequest) };
                    inner.ft_taken(r);
                    return Ok((i, res));
                }
            }
            if let Err(e) = inner.idle_step(&mut waiter, None) {
                inner.settle(reqs);
                return Err(e);
            }
        }
    }

    /// Whether a message matching `(source, tag, context)` has arrived, without receiving it.
    pub fn iprobe(&mut self, source: i32, tag: i32, context: u32) -> Result<Option<Status>> {
        let inner = &mut *self.inner;
        let want = inner.check_recv(source, tag, context)?;
        inner.progress(None)?;
        Ok(inner.find_unexpected(want))
    }

    /// Waits until a message matching `(source, tag, context)` has arrived, without receiving it.
    pub fn probe(&mut self, source: i32, tag: i32, context: u32) -> Result<Status> {
        let inner = &mut *self.inner;
        let want = inner.check_recv(source, tag, context)?;
        let mut waiter = Waiter::new(inner.cfg.wait, inner.spin);
        loop {
            if let Some(st) = inner.find_unexpected(want) {
                return Ok(st);
            }
            if want.source >= 0 && inner.peer(want.source as u32) == Peer::Silent {
                return Err(Error::PeerDied { rank: want.source as u32 });
            }
            inner.idle_step(&mut waiter, None)?;
        }
    }

    /// Reserves a message matching `(source, tag, context)` if one has arrived (MPI's
    /// `MPI_Improbe`): no other receive will match it; receive it with [`imrecv_raw`](
    /// Self::imrecv_raw) or [`mrecv`](Self::mrecv).
    pub fn improbe(&mut self, source: i32, tag: i32, context: u32) -> Result<Option<(Message, Status)>> {
        let inner = &mut *self.inner;
        let want = inner.check_recv(source, tag, context)?;
        inner.progress(None)?;
        Ok(inner.reserve_unexpected(want).map(|(id, st)| (Message { id, source: st.source }, st)))
    }

    /// Waits until a message matching `(source, tag, context)` has arrived and reserves it
    /// (MPI's `MPI_Mprobe`).
    pub fn mprobe(&mut self, source: i32, tag: i32, context: u32) -> Result<(Message, Status)> {
        let inner = &mut *self.inner;
        let want = inner.check_recv(source, tag, context)?;
        let mut waiter = Waiter::new(inner.cfg.wait, inner.spin);
        loop {
            if let Some((id, st)) = inner.reserve_unexpected(want) {
                return Ok((Message { id, source: st.source }, st));
            }
            if want.source >= 0 && inner.peer(want.source as u32) == Peer::Silent {
                return Err(Error::PeerDied { rank: want.source as u32 });
            }
            inner.idle_step(&mut waiter, None)?;
        }
    }

    /// Starts receiving reserved message `msg` into the `cap` bytes at `ptr` (MPI's `MPI_Imrecv`).
    ///
    /// # Safety
    /// As for [`irecv_raw`](Self::irecv_raw).
    pub unsafe fn imrecv_raw(&mut self, msg: Message, ptr: *mut u8, cap: usize) -> Result<Request> {
        self.inner.imrecv(msg, RecvBuf::bytes(ptr, cap))
    }

    /// Receives reserved message `msg` into `buf` (MPI's `MPI_Mrecv`).
    pub fn mrecv(&mut self, msg: Message, buf: &mut [u8]) -> Result<Status> {
        // SAFETY: `buf` outlives the request, which we wait for before returning.
        let req = unsafe { self.imrecv_raw(msg, buf.as_mut_ptr(), buf.len()) }?;
        self.inner.wait(req)
    }

    /// The message non-blocking send `req` ([`isend_raw`](Self::isend_raw),
    /// [`issend_raw`](Self::issend_raw)) sent, for [`cancel_send`](Self::cancel_send); `None` once
    /// the request was taken.
    pub fn send_id(&self, req: Request) -> Option<SendId> {
        self.inner.reqs.sent(req).map(|(dest, token)| SendId { dest, token, req })
    }

    /// Withdraws receive `req` if it has not matched a message yet (MPI's `MPI_Cancel` of a
    /// receive): true if it did, and the request then completes with [`Error::Cancelled`].
    pub fn cancel_recv(&mut self, req: Request) -> Result<bool> {
        self.inner.cancel_recv(req)
    }

    /// Asks the receiver of message `id` to drop it if no receive has matched it yet (MPI's
    /// `MPI_Cancel` of a send). Returns a request that completes with [`Error::Cancelled`] if it
    /// was dropped (the send's request, if still in flight, then completes the same way), or
    /// with `Ok` if a receive had matched it (the send goes on). The answer needs the receiver's
    /// progress.
    pub fn cancel_send(&mut self, id: SendId) -> Result<Request> {
        self.inner.cancel_send(id)
    }

    /// One pass of progress (polls the node, resumes pending sends). Non-blocking operations
    /// advance whenever the Endpoint is called; call this to advance them while computing.
    pub fn progress(&mut self) -> Result<()> {
        self.inner.progress(None).map(drop)
    }

    /// Waits until `ready()`, a condition another rank of this node makes true in the segment
    /// (the collectives' areas of the C ABI): progress continues meanwhile, the wait mode applies
    /// as for a blocking receive, and the wait fails with [`Error::PeerDied`] once one of `peers`
    /// (the ranks that may make it true) is known to have ended with `ready()` still false.
    pub fn wait_until(&mut self, peers: &[u32], ready: &mut dyn FnMut() -> bool) -> Result<()> {
        self.inner.wait_until(peers, ready)
    }

    /// One step of [`wait_until`](Self::wait_until) that never sleeps, for callers that let
    /// other threads in between steps: true once `ready()`.
    pub fn poll_until(&mut self, peers: &[u32], ready: &mut dyn FnMut() -> bool) -> Result<bool> {
        self.inner.poll_until(peers, ready)
    }

    /// Wakes `rank`, a rank of this node, if it sleeps on its doorbell (block mode): after making
    /// true a condition it may wait for in [`wait_until`](Self::wait_until).
    pub fn wake(&self, rank: u32) {
        if let Some(&l) = self.inner.route.get(rank as usize)
            && l != NOT_LOCAL
        {
            self.inner.ring(l);
        }
    }

    /// True once `rank` is known to have ended.
    pub fn peer_gone(&self, rank: u32) -> bool {
        rank < self.inner.size && self.inner.peer(rank) != Peer::Alive
    }

    /// Completes outstanding sends, synchronises with the other ranks, and leaves the segment.
    pub fn finalize(mut self) -> Result<()> {
        self.inner.finalize()
    }
}

impl Drop for Endpoint {
    fn drop(&mut self) {
        if self.inner.finalized {
            return;
        }
        if std::thread::panicking() {
            // No barrier with ranks that may be waiting on us: leave the segment as a failed rank
            // (peers complete what waits on us with `PeerDied`).
            self.inner.finalized = true;
            let _ = self.inner.segment.mark_gone(self.inner.local_rank, nemesis_shm::node::STATUS_ABANDONED);
            return;
        }
        if let Err(e) = self.inner.finalize() {
            tracing::warn!(error = %e, "finalize on drop failed");
        }
    }
}

/// Non-blocking operations on borrowed buffers (see [`Endpoint::scope`]).
pub struct Scope<'s, 'env> {
    ep: &'s mut Endpoint,
    outstanding: Vec<Request>,
    _env: PhantomData<&'env mut &'env ()>,
}

impl<'env> Scope<'_, 'env> {
    /// Starts sending `buf`; it is borrowed until the scope ends.
    pub fn isend(&mut self, buf: &'env [u8], dest: u32, tag: i32, context: u32) -> Result<Request> {
        // SAFETY: `buf` is borrowed for `'env`, which outlives the scope, and the scope waits for
        // the request before it returns.
        let r = unsafe { self.ep.isend_raw(buf.as_ptr(), buf.len(), dest, tag, context) }?;
        self.outstanding.push(r);
        Ok(r)
    }

    /// Starts receiving into `buf`; it is borrowed until the scope ends.
    pub fn irecv(&mut self, buf: &'env mut [u8], source: i32, tag: i32, context: u32) -> Result<Request> {
        // SAFETY: `buf` is mutably borrowed for `'env` (nothing else touches it) and the scope
        // waits for the request before it returns.
        let r = unsafe { self.ep.irecv_raw(buf.as_mut_ptr(), buf.len(), source, tag, context) }?;
        self.outstanding.push(r);
        Ok(r)
    }

    /// See [`Endpoint::wait`].
    pub fn wait(&mut self, req: Request) -> Result<Status> {
        self.ep.wait(req)
    }

    /// See [`Endpoint::test`].
    pub fn test(&mut self, req: Request) -> Result<Option<Status>> {
        self.ep.test(req)
    }

    /// See [`Endpoint::wait_all`].
    pub fn wait_all(&mut self, reqs: &[Request]) -> Vec<Result<Status>> {
        self.ep.wait_all(reqs)
    }

    /// See [`Endpoint::wait_any`].
    pub fn wait_any(&mut self, reqs: &[Request]) -> Result<(usize, Result<Status>)> {
        self.ep.wait_any(reqs)
    }

    /// Blocking operations inside the scope: see [`Endpoint::send`].
    pub fn send(&mut self, buf: &[u8], dest: u32, tag: i32, context: u32) -> Result<()> {
        self.ep.send(buf, dest, tag, context)
    }

    /// See [`Endpoint::recv`].
    pub fn recv(&mut self, buf: &mut [u8], source: i32, tag: i32, context: u32) -> Result<Status> {
        self.ep.recv(buf, source, tag, context)
    }

    /// This rank and the job's size.
    pub fn rank_size(&self) -> (u32, u32) {
        (self.ep.rank(), self.ep.size())
    }
}

/// `len` bytes at `ptr` as a slice (empty for a zero length, whatever `ptr`).
///
/// # Safety
/// Unless `len` is 0, `ptr` must be valid for `len` bytes of reads for `'a`.
#[inline(always)]
unsafe fn raw_slice<'a>(ptr: *const u8, len: usize) -> &'a [u8] {
    if len == 0 {
        &[]
    } else {
        // SAFETY: the caller's contract.
        unsafe { std::slice::from_raw_parts(ptr, len) }
    }
}

impl Inner {
    #[inline(always)]
    fn peer(&self, rank: u32) -> Peer {
        self.peers.get(rank as usize).copied().unwrap_or(Peer::Alive)
    }

    /// A send or transfer with `rank` failed because it died, before the port's event reached
    /// us: the error and [`Endpoint::peer_gone`] agree from now on (the event, handled later,
    /// changes nothing).
    fn saw_death(&mut self, rank: u32) {
        if let Some(p @ Peer::Alive) = self.peers.get_mut(rank as usize) {
            *p = Peer::Gone;
        }
    }

    fn finalize(&mut self) -> Result<()> {
        if self.finalized {
            return Ok(());
        }
        self.finalized = true;
        // Complete outstanding sends (a send to a dead peer completes with an error).
        let mut waiter = Waiter::new(self.cfg.wait, self.spin);
        let mut warned = false;
        while !self.pending.is_empty()
            || self.ft.as_deref().is_some_and(|ft| !ft.held.is_empty() || !ft.replays.is_empty())
            || self.lmt.busy()
            || self.lmt.has_output()
            || self.netlmt.busy()
            || self.netlmt.has_output()
            || self.net.as_ref().is_some_and(|n| n.busy())
        {
            self.idle_step(&mut waiter, None)?;
            if waiter.is_long() && self.lmt.busy() && !warned {
                tracing::warn!("finalize waits for large messages still in flight (sends not yet received?)");
                warned = true;
            }
        }
        // Unexpected messages never received give their cells back to their senders, which may
        // wait for them to finish.
        for (_, mut u) in self.unexpected.take_all() {
            let _ = self.release_held(&mut u, None);
        }
        let matrix = std::env::var_os(crate::matrix::ENV_COMM_MATRIX).filter(|v| !v.is_empty());
        if let Some(file) = &matrix {
            crate::matrix::write_row(std::path::Path::new(file), self.rank, &self.traffic())?;
        }
        // Under recovery, a rank that finished may still hold what a restarted group needs.
        self.ft_finish_wait()?;
        // A process manager other than ours waits in its barrier for every rank, dead ones too:
        // with a peer known dead, the survivors leave without it.
        let dead = (0..self.size).filter(|&r| self.peer(r) != Peer::Alive).count();
        if let Some(pmi) = self.pmi.as_mut() {
            if dead == 0 || pmi.barrier_survives_departures() {
                pmi.barrier()?;
            } else {
                tracing::warn!(dead, pm = %pmi.name(), "finalize without the process manager's barrier: ranks died");
            }
        }
        // Every rank is past its last checkpoint: the files are not needed any more.
        if let Some(ft) = self.ft.as_deref() {
            ft.finish(self.rank);
        }
        if let Some(file) = &matrix
            && self.rank == 0
        {
            crate::matrix::assemble(std::path::Path::new(file), self.size)?;
        }
        if let Some(net) = self.net.as_mut() {
            net.finalize()?;
        }
        self.segment.mark_gone(self.local_rank, nemesis_shm::node::STATUS_CLEAN)?;
        if let Some(pmi) = self.pmi.take() {
            pmi.finalize()?;
        }
        Ok(())
    }
}
