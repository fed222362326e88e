//! The Endpoint: MPI-style point-to-point messaging over the node segment, and over a netmod to
//! other nodes (`shared/ARCHITECTURE.md`, "One message, end to end"; the reasoning is in
//! `docs/design/endpoint.md`).
//!
//! A message goes eagerly (the pair's fastbox, or cells) up to the eager limit, by rendezvous
//! (`nemesis-lmt`: an RTS, then a copy ring or a single CMA copy) beyond it. A receive first
//! searches the unexpected list, then progresses with itself as the match target ("bypass", NEMESIS
//! L811–815 of `shared/papers/mercier-2019-hdr-nemesis-topology.txt`), and only then is posted.
//!
//! What holds:
//! - **Non-overtaking**: messages from one source in one context match receives in the order sent
//!   (the port's per-pair sequence numbers order the fastbox and queue paths).
//! - **Truncation** fills the buffer and completes with [`Error::Truncated`]; nothing is written
//!   past a buffer.
//! - **Unexpected messages** copied out of the segment stay within `NEMESIS_UNEXPECTED_MAX`; beyond
//!   it a local sender's messages stay in its cells (back-pressure, nothing lost).
//! - **Dead peers**: once nothing more can arrive from one, receives naming it and sends to it fail
//!   with [`Error::PeerDied`].
//! - **No call returns while a transfer can touch its caller's memory**, even with an error that is
//!   not its own (`settle.rs`).
//!
//! One file per concept, declared here: `lifecycle.rs` (init, finalize), `matching.rs` (posted and
//! unexpected lists), `eager.rs` (send paths, acks, sends waiting for cells), `rendezvous.rs`,
//! `progress.rs` (polling, routing arrivals, dead peers), `waiting.rs` (waits, the bypass receive),
//! `probe.rs`, `scope.rs`, `request.rs` (the request table), `cancel.rs`, `pieces.rs` (non-contiguous
//! buffers), `settle.rs`, `fused.rs` (links), `unexpected.rs`; with fault tolerance `ft.rs` (the
//! HydEE hooks), `checkpoint.rs` and `recovery.rs`. This file holds the public types and `Inner`.

mod cancel;
mod checkpoint;
mod collective;
mod eager;
mod ft;
pub(crate) mod ft_rdv;
mod fused;
pub(crate) mod handle;
mod lifecycle;
mod matching;
mod pieces;
mod probe;
mod progress;
mod recovery;
mod rendezvous;
mod request;
mod rma;
mod scope;
mod settle;
mod unexpected;
mod waiting;

use std::collections::VecDeque;
use std::sync::atomic::AtomicU32;

use nemesis_lmt::{Lmt, NetLmt};
use nemesis_shm::{Port, Segment, Sent};

pub use collective::{CollArea, CollLane};
use eager::{Mode, Pending};
pub use fused::Link;
use matching::{Found, Posted};
use progress::Active;
use rendezvous::SegRings;
pub use request::Request;
use request::{Op, RecvBuf, Requests};
pub use scope::Scope;
use unexpected::UnexpectedList;

use crate::config::Config;
use crate::error::{Error, Result};
use crate::net::Net;
use crate::pmi::ProcessManager;
use crate::topology::Distance;
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

/// Application messages and bytes sent to one rank (defined with the matrix it fills).
pub use crate::matrix::Traffic;

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
    /// Every rank's node by its lowest rank, if the bootstrap learnt it ([`Endpoint::node_leaders`]).
    leaders: Option<Box<[u32]>>,
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
    /// local sender (`docs/testing.md`, "Failure guarantees").
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
    /// while the other copies out beat one single copy of a message alone (`docs/large-messages.md`).
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
        crate::say!("nemesis: rank {} aborts the job (code {code}): {msg}", self.inner.rank);
        if self.inner.pmi.is_some() {
            // The process manager may stop reading this process's stderr at the abort request.
            crate::log::drain_stderr(std::time::Duration::from_secs(1));
        }
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

    /// The process manager this rank started with (`None`: a singleton): the MPI library's
    /// dynamic processes ask it to spawn and to publish names.
    pub fn process_manager(&mut self) -> Option<&mut ProcessManager> {
        self.inner.pmi.as_mut()
    }

    /// Learns how to reach `rank`, a rank of another node started after this process (by
    /// `MPI_Comm_spawn`, `nemesis-run --universe-size`): its netmod business card from the
    /// process manager. Nothing to do for a rank of this node, or without a netmod.
    pub fn learn_peer(&mut self, rank: u32) -> Result<()> {
        use nemesis_shm::netmod::Netmod;
        let local = self.inner.route.get(rank as usize).is_some_and(|&l| l != NOT_LOCAL);
        let (Some(net), Some(pmi)) = (self.inner.net.as_mut(), self.inner.pmi.as_mut()) else { return Ok(()) };
        if local || rank >= self.inner.size || rank == self.inner.rank {
            return Ok(());
        }
        let card = pmi.get_required(rank, &crate::contract::card_key(rank), "netmod business card")?;
        net.connect(rank, &card)?;
        Ok(())
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
}
