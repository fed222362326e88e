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
//!   An unexpected message is copied out of its cell at once (cells are scarce).
//! - **Truncation**: a message longer than the buffer fills the buffer and completes the receive
//!   with [`Error::Truncated`] carrying its real length; nothing is written past the buffer.
//! - **Dead peers**: once nothing more can arrive from a dead peer, receives that name it
//!   complete with [`Error::PeerDied`]; sends to it fail the same way.
//! - **Waiting** follows [`WaitMode`] (`NEMESIS_WAIT`).

mod request;

use std::collections::VecDeque;
use std::marker::PhantomData;
use std::sync::atomic::AtomicU32;

use crate::net::Net;
use nemesis_lmt::{Control, Lmt, NetLmt, Outcome, RingRef, Rings, Rts};
use nemesis_shm::netmod::{KIND_PEER_GONE, Netmod};
use nemesis_shm::{Incoming, MsgHeader, Node, PeerEvent, Port, PortConfig, REMOTE, Segment, Sent};

pub use request::Request;
use request::{Op, RecvBuf, Requests};

use crate::bootstrap::{self, Boot};
use crate::config::Config;
use crate::error::{Error, Result};
use crate::pmi::PmiClient;
use crate::wait::{self, Waiter};

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
/// Request to send a large message (payload: an encoded [`Rts`]); matched like eager data.
const KIND_RTS: u8 = 3;
/// Other rendezvous messages (payload: one or more encoded CTS, DONE, COOKIE, HELP, HELPED back to
/// back, all for one peer); tag and context unused.
const KIND_LMT: u8 = 4;
/// Fragments taken per progress pass: bounds the time a pass can take.
const POLL_BUDGET: usize = 32;
/// Largest payload of a KIND_LMT message: control messages to one peer are sent back to back in
/// one message, up to what a fastbox slot carries (and at most this).
const LMT_BATCH_MAX: usize = 256;
/// Marks a rank that has no local rank (on another node).
const NOT_LOCAL: u16 = u16::MAX;
/// A bypass wait whose source is not one local rank (`ANY_SOURCE`, or continuing a message).
const NOT_LOCAL_SOURCE: u16 = u16::MAX - 1;

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

/// A receive's selection.
#[derive(Clone, Copy, Debug)]
struct Want {
    source: i32,
    tag: i32,
    context: u32,
}

impl Want {
    #[inline(always)]
    fn matches(&self, source: u32, tag: i32, context: u32) -> bool {
        context == self.context
            && (self.source == ANY_SOURCE || self.source as u32 == source)
            && (self.tag == ANY_TAG || self.tag == tag)
    }
}

/// A posted receive.
#[derive(Clone, Copy, Debug)]
struct Posted {
    req: Request,
    want: Want,
}

/// A message that arrived before its receive.
#[derive(Debug)]
struct Unexpected {
    source: u32,
    tag: i32,
    context: u32,
    data: Vec<u8>,
    /// Bytes received so far.
    got: usize,
    /// A synchronous send's token: acknowledged when a receive takes the message.
    sync: Option<u32>,
    /// A receive was matched to it while it was still arriving: it completes on the last fragment.
    claimed: Option<Request>,
    /// A large message's request to send (`data` is empty): a receive that takes it starts the
    /// transfer.
    rts: Option<Rts>,
}

impl Unexpected {
    /// The message's length.
    fn len(&self) -> usize {
        self.rts.map_or(self.data.len(), |r| r.len as usize)
    }
}

/// Where the fragments of the message being received from a source go.
#[derive(Clone, Copy, Debug, Default)]
enum Active {
    #[default]
    None,
    /// The blocking receive in progress (its buffer is on the caller's side).
    Bypass,
    /// A message whose receive ended early (an error): its remaining fragments are dropped.
    Discard,
    Req(Request),
    Unexpected(u64),
}

/// A blocking receive's own state while it bypasses the posted list.
#[derive(Debug)]
struct Bypass {
    want: Want,
    buf: RecvBuf,
    status: Option<Status>,
    done: Option<Result<Status>>,
    /// It matched a large message: the rendezvous request to wait for.
    lmt: Option<Request>,
}

impl Bypass {
    fn new(want: Want, buf: RecvBuf) -> Bypass {
        Bypass { want, buf, status: None, done: None, lmt: None }
    }

    /// True while no message is matched to it.
    #[inline(always)]
    fn open(&self) -> bool {
        self.status.is_none() && self.done.is_none() && self.lmt.is_none()
    }
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

/// A send waiting for cells.
#[derive(Debug)]
struct Pending {
    req: Request,
    /// Sent by the Endpoint itself (an acknowledgement, a rendezvous message): nobody waits for it.
    internal: bool,
    /// A synchronous send: once handed over, it waits for the acknowledgement of this token.
    sync: Option<u32>,
    /// The payload of an internal message, owned here (`Op::Send`'s buffer is then unused).
    own: Option<Box<[u8]>>,
}

/// The node's copy rings, as `nemesis-lmt` sees them.
struct SegRings {
    seg: &'static Segment,
    per: u16,
    slots: u32,
    slot_size: usize,
}

impl Rings for SegRings {
    fn ring(&self, host: u16, index: u16) -> Option<RingRef<'_>> {
        let base = self.seg.lmt_ring_base(host, u32::from(index))?;
        // SAFETY: `lmt_ring_base` bounds-checked `host` and `index` and returned the page-aligned
        // start of that ring's `lmt_ring_bytes` inside the mapped segment, which lives as long as
        // `self.seg`; ring memory is used only through the ring protocol.
        Some(unsafe { RingRef::in_segment(base, self.slots, self.slot_size) })
    }

    fn rings_per_rank(&self) -> u16 {
        self.per
    }
}

/// What the unexpected list had for a receive.
enum Found {
    /// A complete message: the receive's result.
    Done(Result<Status>),
    /// A message still arriving, now claimed by this request.
    Claimed(Request),
    Nothing,
}

/// The shared state behind an [`Endpoint`].
struct Inner {
    // Field order is drop order: `net` (its cells) and `port` borrow `segment`, so they go first.
    /// The network module, when the job spans nodes.
    net: Option<Net<'static>>,
    port: Port<'static, Segment>,
    /// The segment, at a stable address (boxed) for the `'static` borrows of `port`, `net` and the doorbells.
    segment: Box<Segment>,
    /// This rank's doorbell in the segment.
    bell: &'static AtomicU32,
    /// Every local rank's doorbell, by local rank.
    bells: Box<[&'static AtomicU32]>,
    pmi: Option<PmiClient>,
    rank: u32,
    size: u32,
    local_rank: u16,
    /// Global rank → local rank ([`NOT_LOCAL`] if on another node).
    route: Box<[u16]>,
    /// Local rank → global rank.
    global: Box<[u32]>,
    cfg: Config,
    /// Messages up to this length go eagerly (`eager_max`, within what the cells carry).
    eager: usize,
    /// Blocking sends to a local peer up to this length go eagerly (`eager_blocking_max`; at
    /// least `eager`).
    eager_blocking: usize,
    reqs: Requests,
    posted: VecDeque<Posted>,
    /// Unexpected messages by id, and their arrival order.
    unexpected: Vec<(u64, Unexpected)>,
    next_unexpected: u64,
    /// Per global rank: where the fragments of the message being received from it go.
    active: Box<[Active]>,
    pending: VecDeque<Pending>,
    /// Local sources of posted receives that name one: their fastboxes are polled first.
    expected: Vec<u16>,
    /// Per local rank: posted receives naming it (`expected` lists those above 0). Kept
    /// incrementally: a window of posted receives costs O(1) each, not a rebuild per post.
    expected_count: Box<[u32]>,
    /// Per global rank.
    peers: Box<[Peer]>,
    /// Buffers of consumed unexpected messages, for reuse.
    spare: Vec<Vec<u8>>,
    /// Synchronous sends waiting for their acknowledgement: `(token, request, dest, status)`.
    sync_waiting: Vec<(u32, Request, u32, Status)>,
    next_token: u32,
    /// Large messages in flight with local peers, and with remote ones.
    lmt: Lmt,
    netlmt: NetLmt,
    rings: SegRings,
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
    /// node segment, read the `NEMESIS_*` configuration.
    pub fn init() -> Result<Endpoint> {
        Self::init_with(Config::from_env()?)
    }

    /// As [`init`](Self::init), with the configuration given rather than read from `NEMESIS_*`
    /// (for a runtime that takes its settings elsewhere). Every rank of a job should pass the
    /// same one.
    pub fn init_with(cfg: Config) -> Result<Endpoint> {
        crate::config::init_logging();
        let boot = bootstrap::bootstrap()?;
        Self::from_boot(boot, cfg)
    }

    fn from_boot(boot: Boot, cfg: Config) -> Result<Endpoint> {
        let Boot { rank, size, local_ranks, local_rank, segment, pmi, node, net } = boot;
        let nlocal = local_ranks.len();
        let mut route = vec![NOT_LOCAL; size as usize];
        for (l, &g) in local_ranks.iter().enumerate() {
            route[g as usize] = l as u16;
        }
        let segment = Box::new(segment);
        // SAFETY: `segment` is boxed (its address never changes) and owned by `Inner`, which drops
        // `net` and `port` before it; they, the rings and the doorbells borrowed from `seg` never
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
        let rings =
            SegRings { seg, per: p.lmt_rings_per_rank as u16, slots: p.lmt_slots, slot_size: p.lmt_slot_size as usize };
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
        let eager_max = cfg.eager_max.unwrap_or(if lmt.cma_allowed() {
            crate::config::DEFAULT_EAGER_MAX
        } else {
            crate::config::DEFAULT_EAGER_MAX_RING
        });
        let eager = eager_max.min(port.max_message());
        let eager_blocking = cfg.eager_blocking_max.unwrap_or(crate::config::DEFAULT_EAGER_BLOCKING_MAX);
        let eager_blocking = eager_blocking.min(port.max_message()).max(eager);
        let inner = Inner {
            net,
            port,
            segment,
            bell,
            bells,
            pmi,
            rank,
            size,
            local_rank,
            route: route.into(),
            global: local_ranks.into(),
            cfg,
            eager,
            eager_blocking,
            reqs: Requests::default(),
            posted: VecDeque::new(),
            unexpected: Vec::new(),
            next_unexpected: 0,
            active: vec![Active::None; size as usize].into(),
            pending: VecDeque::new(),
            expected: Vec::new(),
            expected_count: vec![0; nlocal].into(),
            peers: vec![Peer::Alive; size as usize].into(),
            spare: Vec::new(),
            sync_waiting: Vec::new(),
            next_token: 0,
            lmt,
            netlmt: NetLmt::new(),
            rings,
            pid: std::process::id(),
            node,
            finalized: false,
        };
        tracing::debug!(rank, size, wait = cfg.wait.name(), eager_max = eager, "endpoint ready");
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

    /// How the large messages received so far moved (shared-copy ring or single copy).
    pub fn lmt_stats(&self) -> nemesis_lmt::Stats {
        self.inner.lmt.stats()
    }

    /// Stops (or resumes) sending through fastboxes (every message then goes in cells); for
    /// benchmarks and diagnosis.
    pub fn set_fastboxes(&mut self, on: bool) {
        self.inner.port.set_fastboxes(on);
    }

    /// The largest message sent without rendezvous by every kind of send.
    pub fn eager_limit(&self) -> usize {
        self.inner.eager
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
        if buf.len() > inner.eager_blocking || local == NOT_LOCAL {
            // SAFETY: `buf` outlives the request, which we wait for before returning.
            let req = unsafe { inner.send_slow(buf.as_ptr(), buf.len(), local, dest, tag, context, false) }?;
            return inner.wait(req).map(drop);
        }
        let hdr = inner.header(dest, tag, context);
        match inner.port.send(local, &hdr, buf) {
            Ok(Sent::Done) => {
                inner.ring(local);
                Ok(())
            }
            Ok(Sent::Pending(ps)) => {
                let req = inner.reqs.insert(Op::Send { ps, buf: buf.as_ptr(), len: buf.len(), dest });
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
        if len > inner.eager || local == NOT_LOCAL {
            // SAFETY: the caller's contract.
            return unsafe { inner.send_slow(ptr, len, local, dest, tag, context, true) };
        }
        let token = inner.next_token;
        inner.next_token = inner.next_token.wrapping_add(1);
        let hdr = MsgHeader { kind: KIND_EAGER_SYNC, aux: token, ..inner.header(dest, tag, context) };
        // SAFETY: the caller guarantees `len` readable bytes at `ptr`.
        let data = unsafe { raw_slice(ptr, len) };
        match inner.port.send(local, &hdr, data) {
            Ok(Sent::Done) => {
                inner.ring(local);
                let req = inner.reqs.insert(Op::Sync);
                inner.sync_waiting.push((token, req, dest, Status { source: inner.rank, tag, len }));
                Ok(req)
            }
            Ok(Sent::Pending(ps)) => {
                let req = inner.reqs.insert(Op::Send { ps, buf: ptr, len, dest });
                inner.pending.push_back(Pending { req, internal: false, sync: Some(token), own: None });
                Ok(req)
            }
            Err(e) => Err(inner.send_error(e, dest)),
        }
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
        let rb = RecvBuf { ptr: buf.as_mut_ptr(), cap: buf.len() };
        if !inner.unexpected.is_empty() {
            match inner.take_unexpected(want, rb) {
                Found::Done(r) => return r,
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
        let inner = &mut *self.inner;
        Inner::check_len(len)?;
        let local = inner.check_send(dest, tag)?;
        if len > inner.eager || local == NOT_LOCAL {
            // SAFETY: the caller's contract.
            return unsafe { inner.send_slow(ptr, len, local, dest, tag, context, false) };
        }
        let hdr = inner.header(dest, tag, context);
        // SAFETY: the caller guarantees `len` readable bytes at `ptr`.
        let data = unsafe { raw_slice(ptr, len) };
        let status = Status { source: inner.rank, tag, len };
        match inner.port.send(local, &hdr, data) {
            Ok(Sent::Done) => {
                inner.ring(local);
                Ok(inner.reqs.insert_done(Ok(status)))
            }
            Ok(Sent::Pending(ps)) => {
                let req = inner.reqs.insert(Op::Send { ps, buf: ptr, len, dest });
                inner.pending.push_back(Pending { req, internal: false, sync: None, own: None });
                Ok(req)
            }
            Err(e) => Err(inner.send_error(e, dest)),
        }
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
        let rb = RecvBuf { ptr, cap };
        if !inner.unexpected.is_empty() {
            match inner.take_unexpected(want, rb) {
                Found::Done(r) => return Ok(inner.reqs.insert_done(r)),
                Found::Claimed(req) => return Ok(req),
                Found::Nothing => {}
            }
        }
        // Messages already in the node are taken by the next progress (any wait or test).
        inner.post(want, rb)
    }

    /// Runs `f` with a [`Scope`] in which non-blocking operations may borrow buffers; every
    /// operation started in the scope is complete when `scope` returns (it waits for those `f`
    /// left outstanding, even if `f` panics).
    pub fn scope<'env, R>(&mut self, f: impl for<'s> FnOnce(&mut Scope<'s, 'env>) -> R) -> R {
        let mut s = Scope { ep: self, outstanding: Vec::new(), _env: PhantomData };
        let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| f(&mut s)));
        for req in std::mem::take(&mut s.outstanding) {
            if s.ep.inner.reqs.is_valid(req) {
                let _ = s.ep.inner.wait(req);
            }
        }
        match r {
            Ok(v) => v,
            Err(p) => std::panic::resume_unwind(p),
        }
    }

    /// Waits for `req` to complete and returns its status (or its error).
    pub fn wait(&mut self, req: Request) -> Result<Status> {
        self.inner.wait(req)
    }

    /// Completes `req` if it can: `Ok(None)` if still in flight.
    pub fn test(&mut self, req: Request) -> Result<Option<Status>> {
        let inner = &mut *self.inner;
        if !inner.reqs.is_done(req)? {
            inner.progress(None)?;
        }
        inner.reqs.take(req)?.transpose()
    }

    /// Waits for every request; the results are in the order of `reqs`.
    pub fn wait_all(&mut self, reqs: &[Request]) -> Vec<Result<Status>> {
        reqs.iter().map(|&r| self.inner.wait(r)).collect()
    }

    /// Waits for one of `reqs` to complete: its index and result. Invalid (stale) handles are
    /// skipped; if none is valid, [`Error::InvalidRequest`].
    pub fn wait_any(&mut self, reqs: &[Request]) -> Result<(usize, Result<Status>)> {
        let inner = &mut *self.inner;
        if !reqs.iter().any(|&r| inner.reqs.is_valid(r)) {
            return Err(Error::InvalidRequest);
        }
        let mut waiter = Waiter::new(inner.cfg.wait);
        loop {
            for (i, &r) in reqs.iter().enumerate() {
                if inner.reqs.is_valid(r) && inner.reqs.is_done(r)? {
                    let res = inner.reqs.take(r)?.ok_or(Error::InvalidRequest)?;
                    return Ok((i, res));
                }
            }
            inner.idle_step(&mut waiter, None)?;
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
        let mut waiter = Waiter::new(inner.cfg.wait);
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

    /// One pass of progress (polls the node, resumes pending sends). Non-blocking operations
    /// advance whenever the Endpoint is called; call this to advance them while computing.
    pub fn progress(&mut self) -> Result<()> {
        self.inner.progress(None).map(drop)
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

/// Copies a fragment at `offset` into a receive buffer, truncating at its capacity.
#[inline(always)]
fn copy_into(buf: RecvBuf, inc: &Incoming) {
    let off = inc.offset();
    if off < buf.cap {
        let n = inc.frag_len().min(buf.cap - off);
        // SAFETY: `buf.ptr` is valid for `buf.cap` bytes (the receive's contract) and
        // `off + n <= cap`.
        let dst = unsafe { std::slice::from_raw_parts_mut(buf.ptr.add(off), n) };
        inc.copy_to(dst);
    }
}

/// The result of a receive whose message of `len` bytes went into a buffer of `cap`.
#[inline(always)]
fn finish(status: Status, cap: usize) -> Result<Status> {
    if status.len > cap {
        Err(Error::Truncated { len: status.len, capacity: cap, sender: status.source, tag: status.tag })
    } else {
        Ok(status)
    }
}

impl Inner {
    #[inline(always)]
    fn check_send(&self, dest: u32, tag: i32) -> Result<u16> {
        // `route` has an entry per rank: one test checks the rank and finds its local rank
        // (NOT_LOCAL for a remote one, which the slow path takes).
        let Some(&local) = self.route.get(dest as usize) else {
            return Err(Error::InvalidRank { rank: i64::from(dest), size: self.size });
        };
        if tag < 0 {
            return Err(Error::InvalidTag(tag));
        }
        Ok(local)
    }

    /// A length given with a raw pointer: no buffer is longer than `isize::MAX` bytes.
    #[inline(always)]
    fn check_len(len: usize) -> Result<()> {
        if len > isize::MAX as usize {
            return Err(Error::TooLarge { len, limit: isize::MAX as usize });
        }
        Ok(())
    }

    #[inline(always)]
    fn check_recv(&self, source: i32, tag: i32, context: u32) -> Result<Want> {
        if source != ANY_SOURCE && (source < 0 || source as u32 >= self.size) {
            return Err(Error::InvalidRank { rank: i64::from(source), size: self.size });
        }
        if tag != ANY_TAG && tag < 0 {
            return Err(Error::InvalidTag(tag));
        }
        Ok(Want { source, tag, context })
    }

    #[inline(always)]
    fn header(&self, dest: u32, tag: i32, context: u32) -> MsgHeader {
        MsgHeader { src: self.rank, dst: dest, tag, context, kind: KIND_EAGER, ..MsgHeader::default() }
    }

    /// Wakes `local` if it sleeps on its doorbell.
    #[inline(always)]
    fn ring(&self, local: u16) {
        if let Some(bell) = self.bells.get(usize::from(local)) {
            wait::ring(bell);
        }
    }

    fn send_error(&mut self, e: nemesis_shm::Error, dest: u32) -> Error {
        match e {
            nemesis_shm::Error::PeerDead { .. } => Error::PeerDied { rank: dest },
            other => Error::Shm(other),
        }
    }

    #[inline(always)]
    fn peer(&self, rank: u32) -> Peer {
        self.peers.get(rank as usize).copied().unwrap_or(Peer::Alive)
    }

    /// The sender's global rank of a fragment.
    #[inline(always)]
    fn source_of(&self, inc: &Incoming) -> u32 {
        if inc.src == REMOTE { inc.header().src } else { self.global[usize::from(inc.src)] }
    }

    /// Sends that leave the inline path: rendezvous (above the eager limit), and every send to a
    /// remote peer (through the netmod; `sync`: acknowledged when matched).
    ///
    /// # Safety
    /// The `len` bytes at `ptr` must stay valid and unchanged until the request completes.
    #[inline(never)]
    #[allow(clippy::too_many_arguments)]
    unsafe fn send_slow(
        &mut self,
        ptr: *const u8,
        len: usize,
        local: u16,
        dest: u32,
        tag: i32,
        context: u32,
        sync: bool,
    ) -> Result<Request> {
        if len > self.eager {
            // A rendezvous send completes once the receiver has the data: synchronous already.
            // SAFETY: the caller's contract.
            return unsafe { self.lmt_send(ptr, len, local, dest, tag, context) };
        }
        let status = Status { source: self.rank, tag, len };
        let token = self.next_token;
        let mut hdr = self.header(dest, tag, context);
        if sync {
            self.next_token = self.next_token.wrapping_add(1);
            hdr.kind = KIND_EAGER_SYNC;
            hdr.aux = token;
        }
        // SAFETY: the caller guarantees `len` readable bytes at `ptr`.
        let data = unsafe { raw_slice(ptr, len) };
        self.net_send(dest, &hdr, data)?;
        if sync {
            let req = self.reqs.insert(Op::Sync);
            self.sync_waiting.push((token, req, dest, status));
            Ok(req)
        } else {
            Ok(self.reqs.insert_done(Ok(status)))
        }
    }

    /// Sends through the netmod (the message is written or copied on return).
    fn net_send(&mut self, dest: u32, hdr: &MsgHeader, data: &[u8]) -> Result<()> {
        let Some(net) = self.net.as_mut() else {
            return Err(Error::Bootstrap(format!("rank {dest} is on another node and no network module runs")));
        };
        match net.send(dest, hdr, data) {
            Ok(()) => Ok(()),
            Err(nemesis_shm::Error::NetPeerDead { rank }) => Err(Error::PeerDied { rank }),
            Err(e) => Err(e.into()),
        }
    }

    /// A blocking receive that bypasses the posted list: polls with itself as the match target.
    /// The common case inline: the awaited source's next message waits in its fastbox and matches.
    #[inline(always)]
    fn recv_bypass(&mut self, want: Want, buf: RecvBuf) -> Result<Status> {
        let src_local = if want.source >= 0 {
            self.route.get(want.source as usize).copied().unwrap_or(NOT_LOCAL)
        } else {
            NOT_LOCAL
        };
        if src_local != NOT_LOCAL
            && let Some(inc) = self.port.poll_fastbox(src_local)?
        {
            // A fastbox message is whole; its sender is `want.source`.
            if inc.kind() == KIND_EAGER
                && inc.context() == want.context
                && (want.tag == ANY_TAG || want.tag == inc.tag())
            {
                let status = Status { source: want.source as u32, tag: inc.tag(), len: inc.len() };
                copy_into(buf, &inc);
                self.port.release(inc)?;
                return finish(status, buf.cap);
            }
            return self.recv_routed(inc, want, buf, src_local);
        }
        self.recv_wait(want, buf, src_local)
    }

    /// A blocking receive whose awaited source's next message is not a plain match: routed the
    /// general way, then waited for.
    #[inline(never)]
    fn recv_routed(&mut self, inc: Incoming, want: Want, buf: RecvBuf, src_local: u16) -> Result<Status> {
        let mut by = Bypass::new(want, buf);
        self.deliver(inc, Some(&mut by))?;
        match by.done {
            Some(r) => r,
            // Not taken: if it began a message (or a rendezvous) for this receive, the general
            // loop continues it.
            None if !by.open() => self.recv_finish(by, NOT_LOCAL_SOURCE),
            None => self.recv_finish(Bypass::new(want, buf), src_local),
        }
    }

    /// A blocking receive with nothing to take yet.
    #[inline(never)]
    fn recv_wait(&mut self, want: Want, buf: RecvBuf, src_local: u16) -> Result<Status> {
        self.recv_finish(Bypass::new(want, buf), src_local)
    }

    /// Waits for the blocking receive `by` to complete.
    fn recv_finish(&mut self, by: Bypass, src_local: u16) -> Result<Status> {
        let source = by.want.source;
        if by.open() && source >= 0 && self.peer(source as u32) == Peer::Silent {
            return Err(Error::PeerDied { rank: source as u32 });
        }
        let r = self.bypass_steps(by, src_local);
        // A message still arriving for this receive (it ended with an error) is dropped whole.
        for a in self.active.iter_mut() {
            if matches!(a, Active::Bypass) {
                *a = Active::Discard;
            }
        }
        r
    }

    /// Fastbox checks of the awaited source between two full polls while waiting.
    const TIGHT_SPINS: u32 = 64;

    /// `pause`s between two checks of the awaited fastbox: a `pause` takes about 23 ns on the
    /// project's machine, so 4 bound the detection delay to about 90 ns, well under a cache-line
    /// transfer. 8-byte one-way latency through the C ABI (`mpi/bench/compare-latency.sh`
    /// method, SCHED_FIFO, interleaved with Open MPI), median of per-round ratios to Open MPI in
    /// three runs: 16 pauses 0.55, 0.47, 0.52; 4 pauses 0.43, 0.36, 0.43; 1 pause 0.49.
    const TIGHT_PAUSES: u32 = 4;

    fn bypass_steps(&mut self, mut by: Bypass, src_local: u16) -> Result<Status> {
        let expected = [src_local];
        let exp: &[u16] = if src_local == NOT_LOCAL || src_local == NOT_LOCAL_SOURCE { &[] } else { &expected };
        let mut waiter = Waiter::new(self.cfg.wait);
        loop {
            if let Some(r) = by.done.take() {
                return r;
            }
            if let Some(req) = by.lmt.take() {
                return self.wait(req);
            }
            let mut got = false;
            // Tight: only the awaited source's fastbox (the whole poll is much longer).
            if !exp.is_empty() && by.status.is_none() {
                for _ in 0..Self::TIGHT_SPINS {
                    if let Some(inc) = self.port.poll_fastbox(src_local)? {
                        got = true;
                        let source = self.global[usize::from(inc.src)];
                        if inc.offset() == 0
                            && inc.is_last()
                            && inc.kind() == KIND_EAGER
                            && by.want.matches(source, inc.tag(), inc.context())
                        {
                            let status = Status { source, tag: inc.tag(), len: inc.len() };
                            copy_into(by.buf, &inc);
                            self.port.release(inc)?;
                            return finish(status, by.buf.cap);
                        }
                        self.deliver(inc, Some(&mut by))?;
                        break;
                    }
                    if self.port.has_queued() {
                        break;
                    }
                    for _ in 0..Self::TIGHT_PAUSES {
                        core::hint::spin_loop();
                    }
                }
                if let Some(r) = by.done.take() {
                    return r;
                }
            }
            for _ in 0..POLL_BUDGET {
                match self.port.poll(exp)? {
                    Some(inc) => {
                        got = true;
                        self.deliver(inc, Some(&mut by))?;
                        if by.done.is_some() || by.lmt.is_some() {
                            break;
                        }
                    }
                    None => break,
                }
            }
            got |= self.resume_pending()?;
            got |= self.lmt_step()?;
            if let Some(net) = self.net.as_mut() {
                got |= net.poll(&mut self.port)?;
            }
            if self.port.has_events() {
                self.handle_events(Some(&mut by))?;
            }
            if by.done.is_some() || by.lmt.is_some() {
                continue;
            }
            if got {
                waiter.progressed();
            } else {
                self.idle(&mut waiter, Some(&mut by))?;
            }
        }
    }

    /// Posts a receive (after the unexpected list was searched).
    fn post(&mut self, want: Want, buf: RecvBuf) -> Result<Request> {
        if want.source >= 0 && self.peer(want.source as u32) == Peer::Silent {
            return Ok(self.reqs.insert_done(Err(Error::PeerDied { rank: want.source as u32 })));
        }
        let req = self.reqs.insert(Op::Recv { buf, status: None });
        self.posted.push_back(Posted { req, want });
        self.expect(want.source, true);
        Ok(req)
    }

    /// A posted receive naming `source` was added (`add`) or removed: keeps `expected`.
    fn expect(&mut self, source: i32, add: bool) {
        if source < 0 {
            return;
        }
        let l = self.route.get(source as usize).copied().unwrap_or(NOT_LOCAL);
        let Some(c) = self.expected_count.get_mut(usize::from(l)) else { return };
        if add {
            *c += 1;
            if *c == 1 {
                self.expected.push(l);
            }
        } else if *c > 0 {
            *c -= 1;
            if *c == 0
                && let Some(k) = self.expected.iter().position(|&e| e == l)
            {
                self.expected.swap_remove(k);
            }
        }
    }

    /// Recomputes `expected` from the posted receives (after several left at once).
    fn rebuild_expected(&mut self) {
        self.expected.clear();
        self.expected_count.fill(0);
        for k in 0..self.posted.len() {
            let source = self.posted[k].want.source;
            self.expect(source, true);
        }
    }

    /// Matches a receive against the unexpected list: the first matching message completes it,
    /// or, if that message is still arriving, the receive claims it and completes with its last
    /// fragment.
    fn take_unexpected(&mut self, want: Want, buf: RecvBuf) -> Found {
        let Some(i) =
            self.unexpected.iter().position(|(_, u)| u.claimed.is_none() && want.matches(u.source, u.tag, u.context))
        else {
            return Found::Nothing;
        };
        if let Some(rts) = self.unexpected[i].1.rts {
            let (_, u) = self.unexpected.remove(i);
            let status = Status { source: u.source, tag: u.tag, len: rts.len as usize };
            let req = self.reqs.insert(Op::Lmt { status, cap: buf.cap, peer: u.source, recv: true });
            self.start_lmt_recv(u.source, req, &rts, buf);
            self.recycle(u.data);
            return Found::Claimed(req);
        }
        let u = &mut self.unexpected[i].1;
        let (source, sync) = (u.source, u.sync.take());
        if let Some(token) = sync
            && let Err(e) = self.send_ack(source, token)
        {
            return Found::Done(Err(e));
        }
        let u = &self.unexpected[i].1;
        if u.got < u.data.len() {
            let req = self.reqs.insert(Op::Recv { buf, status: None });
            self.unexpected[i].1.claimed = Some(req);
            return Found::Claimed(req);
        }
        let (_, u) = self.unexpected.remove(i);
        Found::Done(self.consume_unexpected(u, buf))
    }

    fn consume_unexpected(&mut self, u: Unexpected, buf: RecvBuf) -> Result<Status> {
        let n = u.data.len().min(buf.cap);
        if n > 0 {
            // SAFETY: `buf` is valid for `cap >= n` bytes (the receive's contract); the source is
            // our own buffer.
            unsafe { std::ptr::copy_nonoverlapping(u.data.as_ptr(), buf.ptr, n) };
        }
        let status = Status { source: u.source, tag: u.tag, len: u.data.len() };
        self.recycle(u.data);
        finish(status, buf.cap)
    }

    fn recycle(&mut self, mut data: Vec<u8>) {
        if self.spare.len() < 64 && data.capacity() <= 1 << 20 {
            data.clear();
            self.spare.push(data);
        }
    }

    fn find_unexpected(&self, want: Want) -> Option<Status> {
        self.unexpected
            .iter()
            .find(|(_, u)| u.claimed.is_none() && want.matches(u.source, u.tag, u.context))
            .map(|(_, u)| Status { source: u.source, tag: u.tag, len: u.len() })
    }

    /// Routes one fragment: to the bypass receive, a posted receive, or the unexpected list.
    fn deliver(&mut self, inc: Incoming, mut by: Option<&mut Bypass>) -> Result<()> {
        let source = self.source_of(&inc);
        if source >= self.size {
            self.port.release(inc)?;
            return Err(Error::Shm(nemesis_shm::Error::Corrupt { what: "sender rank", value: u64::from(source) }));
        }
        let src = source as usize;
        if inc.offset() == 0 {
            let (tag, context) = (inc.tag(), inc.context());
            let status = Status { source, tag, len: inc.len() };
            let kind = inc.kind();
            if kind == KIND_SYNC_ACK {
                let token = inc.aux();
                self.port.release(inc)?;
                if let Some(i) = self.sync_waiting.iter().position(|w| w.0 == token && w.2 == source) {
                    let (_, req, _, st) = self.sync_waiting.swap_remove(i);
                    self.reqs.complete(req, Ok(st));
                }
                return Ok(());
            }
            if kind == KIND_RTS || kind == KIND_LMT {
                return self.deliver_lmt(inc, source, by);
            }
            if kind == KIND_PEER_GONE && inc.src == REMOTE {
                self.port.release(inc)?;
                return self.peer_silent(source, by);
            }
            let sync = (kind == KIND_EAGER_SYNC).then(|| inc.aux());
            if let Some(b) = by.as_deref_mut()
                && b.open()
                && b.want.matches(source, tag, context)
            {
                if let Some(token) = sync {
                    self.send_ack(source, token)?;
                }
                copy_into(b.buf, &inc);
                if inc.is_last() {
                    b.done = Some(finish(status, b.buf.cap));
                } else {
                    b.status = Some(status);
                    self.active[src] = Active::Bypass;
                }
            } else if let Some(i) = self.posted.iter().position(|p| p.want.matches(source, tag, context)) {
                let p = self.posted.remove(i).ok_or(Error::InvalidRequest)?;
                self.expect(p.want.source, false);
                if let Some(token) = sync {
                    self.send_ack(source, token)?;
                }
                if let Some(Op::Recv { buf, status: st }) = self.reqs.op_mut(p.req) {
                    let buf = *buf;
                    copy_into(buf, &inc);
                    if inc.is_last() {
                        self.reqs.complete(p.req, finish(status, buf.cap));
                    } else {
                        *st = Some(status);
                        self.active[src] = Active::Req(p.req);
                    }
                }
            } else {
                let mut data = self.spare.pop().unwrap_or_default();
                data.resize(inc.len(), 0);
                inc.copy_to(&mut data);
                let id = self.next_unexpected;
                self.next_unexpected += 1;
                let got = inc.frag_len();
                let u = Unexpected { source, tag, context, data, got, sync, claimed: None, rts: None };
                self.unexpected.push((id, u));
                if !inc.is_last() {
                    self.active[src] = Active::Unexpected(id);
                }
            }
        } else {
            match self.active[src] {
                Active::Bypass => match &mut by {
                    Some(b) => {
                        copy_into(b.buf, &inc);
                        if inc.is_last() {
                            let st = b.status.take().ok_or(Error::InvalidRequest)?;
                            b.done = Some(finish(st, b.buf.cap));
                            self.active[src] = Active::None;
                        }
                    }
                    // Not possible: `bypass_loop` turns its state into `Discard` when it leaves.
                    None => self.active[src] = if inc.is_last() { Active::None } else { Active::Discard },
                },
                Active::Discard => {
                    if inc.is_last() {
                        self.active[src] = Active::None;
                    }
                }
                Active::Req(r) => {
                    if let Some(Op::Recv { buf, status }) = self.reqs.op_mut(r) {
                        let buf = *buf;
                        copy_into(buf, &inc);
                        if inc.is_last() {
                            let st = status.take().ok_or(Error::InvalidRequest)?;
                            self.reqs.complete(r, finish(st, buf.cap));
                            self.active[src] = Active::None;
                        }
                    }
                }
                Active::Unexpected(id) => {
                    if let Some(i) = self.unexpected.iter().position(|(k, _)| *k == id) {
                        let u = &mut self.unexpected[i].1;
                        let off = inc.offset().min(u.data.len());
                        let n = inc.copy_to(&mut u.data[off..]);
                        u.got += n;
                        if inc.is_last() {
                            self.active[src] = Active::None;
                            if let Some(r) = u.claimed {
                                let (_, u) = self.unexpected.remove(i);
                                self.complete_claimed(r, u);
                            }
                        }
                    }
                }
                Active::None => {
                    self.port.release(inc)?;
                    return Err(Error::Shm(nemesis_shm::Error::Corrupt { what: "fragment without a first", value: 0 }));
                }
            }
        }
        self.port.release(inc)?;
        Ok(())
    }

    fn complete_claimed(&mut self, r: Request, u: Unexpected) {
        if let Some(Op::Recv { buf, .. }) = self.reqs.op_mut(r) {
            let buf = *buf;
            let res = self.consume_unexpected(u, buf);
            self.reqs.complete(r, res);
        }
    }

    /// Acknowledges a synchronous send's match to rank `dest`.
    fn send_ack(&mut self, dest: u32, token: u32) -> Result<()> {
        let hdr = MsgHeader { kind: KIND_SYNC_ACK, aux: token, ..self.header(dest, 0, 0) };
        let local = self.route[dest as usize];
        let sent =
            if local == NOT_LOCAL { self.net_send(dest, &hdr, &[]) } else { self.send_internal(local, &hdr, &[]) };
        match sent {
            // The sender died: nobody waits for the acknowledgement.
            Err(Error::PeerDied { .. }) => Ok(()),
            r => r,
        }
    }

    /// Sends a message of the Endpoint's own (nobody waits for it): if cells are short it waits
    /// in the pending list with a copy of its payload.
    fn send_internal(&mut self, local: u16, hdr: &MsgHeader, payload: &[u8]) -> Result<()> {
        match self.port.send(local, hdr, payload) {
            Ok(Sent::Done) => {
                self.ring(local);
                Ok(())
            }
            Ok(Sent::Pending(ps)) => {
                let dest = hdr.dst;
                let req = self.reqs.insert(Op::Send { ps, buf: std::ptr::null(), len: payload.len(), dest });
                let own = Some(payload.into());
                self.pending.push_back(Pending { req, internal: true, sync: None, own });
                Ok(())
            }
            Err(e) => Err(self.send_error(e, hdr.dst)),
        }
    }

    /// Starts a rendezvous send to local rank `local`: its RTS goes like an eager message (ordered
    /// with the eager messages to `dest`); the data moves once a receive matched it.
    ///
    /// # Safety
    /// The `len` bytes at `ptr` must stay valid and unchanged until the request completes.
    #[inline(never)]
    unsafe fn lmt_send(
        &mut self,
        ptr: *const u8,
        len: usize,
        local: u16,
        dest: u32,
        tag: i32,
        context: u32,
    ) -> Result<Request> {
        let status = Status { source: self.rank, tag, len };
        let req = self.reqs.insert(Op::Lmt { status, cap: len, peer: dest, recv: false });
        let hdr = MsgHeader { kind: KIND_RTS, ..self.header(dest, tag, context) };
        let mut bytes = [0u8; nemesis_lmt::wire::MAX_ENCODED];
        let sent = if local == NOT_LOCAL {
            match self.net.as_mut() {
                Some(net) => {
                    // SAFETY: the caller's contract: the buffer stays valid until the request
                    // completes, which is when `nemesis-lmt` reports the transfer's outcome.
                    let rts = unsafe { self.netlmt.pre_send(dest, req.token(), ptr, len as u64, net) };
                    let n = Control::Rts(rts).encode(&mut bytes);
                    self.net_send(dest, &hdr, &bytes[..n])
                }
                // The error of a job without a network module.
                None => self.net_send(dest, &hdr, &[]),
            }
        } else {
            // SAFETY: as above.
            let rts = unsafe { self.lmt.pre_send(local, req.token(), ptr, len as u64, self.pid) };
            let n = Control::Rts(rts).encode(&mut bytes);
            self.send_internal(local, &hdr, &bytes[..n])
        };
        if let Err(e) = sent {
            self.lmt.abandon(req.token());
            if let Some(net) = self.net.as_mut() {
                self.netlmt.abandon(req.token(), net);
            }
            self.reqs.complete(req, Ok(status));
            let _ = self.reqs.take(req);
            return Err(e);
        }
        Ok(req)
    }

    /// Receiver: a receive (`req`, into `buf`) took the RTS of rank `source`.
    fn start_lmt_recv(&mut self, source: u32, req: Request, rts: &Rts, buf: RecvBuf) {
        if self.peer(source) != Peer::Alive {
            // The sender ended: its buffer is gone (its send cannot have completed unmatched).
            self.reqs.complete(req, Err(Error::PeerDied { rank: source }));
            return;
        }
        let local = self.route[source as usize];
        if local != NOT_LOCAL {
            // SAFETY: `buf` is valid for `cap` bytes of writes, untouched otherwise, until the
            // request completes (the receive's contract); it completes when the transfer's outcome
            // is taken.
            unsafe { self.lmt.pre_recv(local, req.token(), rts, buf.ptr, buf.cap, &self.rings) };
        } else if let Some(net) = self.net.as_mut() {
            // SAFETY: as above.
            unsafe { self.netlmt.pre_recv(source, req.token(), rts, buf.ptr, buf.cap, net) };
        }
    }

    /// An RTS (matched here like an eager message's first fragment) or another rendezvous message
    /// (handed to `nemesis-lmt`).
    #[inline(never)]
    fn deliver_lmt(&mut self, inc: Incoming, source: u32, by: Option<&mut Bypass>) -> Result<()> {
        let mut bytes = [0u8; LMT_BATCH_MAX];
        let (kind, tag, context, len) = (inc.kind(), inc.tag(), inc.context(), inc.len());
        let src = self.route[source as usize];
        let whole = inc.is_last() && len <= bytes.len();
        let n = if whole { inc.copy_to(&mut bytes) } else { 0 };
        self.port.release(inc)?;
        if !whole {
            let what = "rendezvous message length";
            return Err(Error::Lmt(nemesis_lmt::Error::Wire { what, value: len as u64 }));
        }
        if kind == KIND_LMT {
            // One or more control messages back to back.
            let (lmt, netlmt, rings, mut net) = (&mut self.lmt, &mut self.netlmt, &self.rings, self.net.as_mut());
            let decoded = Control::decode_all(&bytes[..n], |msg| {
                let handled = match (src, net.as_deref_mut()) {
                    (NOT_LOCAL, Some(net)) => netlmt.handle(source, msg, net),
                    (NOT_LOCAL, None) => Ok(()),
                    _ => lmt.handle(src, msg, rings),
                };
                if let Err(e) = handled {
                    // The transfer it named failed with `e` (its request reports it).
                    tracing::warn!(error = %e, peer = source, "bad rendezvous message");
                }
            });
            return decoded.map_err(Error::Lmt);
        }
        let msg = Control::decode(&bytes[..n])?;
        let Control::Rts(rts) = msg else {
            return Err(Error::Lmt(nemesis_lmt::Error::Wire { what: "RTS message type", value: u64::from(kind) }));
        };
        let status = Status { source, tag, len: rts.len as usize };
        if let Some(b) = by
            && b.open()
            && b.want.matches(source, tag, context)
        {
            let req = self.reqs.insert(Op::Lmt { status, cap: b.buf.cap, peer: source, recv: true });
            b.lmt = Some(req);
            self.start_lmt_recv(source, req, &rts, b.buf);
        } else if let Some(i) = self.posted.iter().position(|p| p.want.matches(source, tag, context)) {
            let p = self.posted.remove(i).ok_or(Error::InvalidRequest)?;
            self.expect(p.want.source, false);
            if let Some(op) = self.reqs.op_mut(p.req)
                && let Op::Recv { buf, .. } = *op
            {
                *op = Op::Lmt { status, cap: buf.cap, peer: source, recv: true };
                self.start_lmt_recv(source, p.req, &rts, buf);
            }
        } else {
            let id = self.next_unexpected;
            self.next_unexpected += 1;
            let data = Vec::new();
            let u = Unexpected { source, tag, context, data, got: 0, sync: None, claimed: None, rts: Some(rts) };
            self.unexpected.push((id, u));
        }
        Ok(())
    }

    /// Drives the large messages in flight, if any. True if anything happened.
    #[inline(always)]
    fn lmt_step(&mut self) -> Result<bool> {
        if !self.lmt.busy() && !self.lmt.has_output() && !self.netlmt.busy() && !self.netlmt.has_output() {
            return Ok(false);
        }
        self.lmt_step_slow()
    }

    /// Sends encoded control messages to local rank `peer` as one KIND_LMT message.
    fn send_lmt_batch(&mut self, peer: u16, bytes: &[u8]) -> Result<()> {
        let hdr = MsgHeader { kind: KIND_LMT, ..self.header(self.global[usize::from(peer)], 0, 0) };
        match self.send_internal(peer, &hdr, bytes) {
            // Its transfers fail when its death is handled.
            Ok(()) | Err(Error::PeerDied { .. }) => Ok(()),
            Err(e) => Err(e),
        }
    }

    #[inline(never)]
    fn lmt_step_slow(&mut self) -> Result<bool> {
        let moved = self.lmt.progress(&self.rings);
        let any = moved || self.lmt.has_output();
        let out: Vec<(u16, Control)> = self.lmt.take_out().collect();
        // Consecutive messages to one peer travel together (a window of transfers finishing in one
        // pass costs one message, not one each): a DONE, HELP or HELPED is 16 to 36 bytes.
        let limit = self.port.fastbox_payload().clamp(nemesis_lmt::wire::MAX_ENCODED, LMT_BATCH_MAX);
        let mut batch = [0u8; LMT_BATCH_MAX];
        let mut used = 0;
        for (k, &(peer, msg)) in out.iter().enumerate() {
            let mut bytes = [0u8; nemesis_lmt::wire::MAX_ENCODED];
            let n = msg.encode(&mut bytes);
            batch[used..used + n].copy_from_slice(&bytes[..n]);
            used += n;
            let next_fits = out.get(k + 1).is_some_and(|&(p, m)| p == peer && used + m.encoded_len() <= limit);
            if !next_fits {
                self.send_lmt_batch(peer, &batch[..used])?;
                used = 0;
            }
        }
        let mut any = any;
        if let Some(net) = self.net.as_mut() {
            any |= self.netlmt.progress(net) || self.netlmt.has_output();
        }
        let out: Vec<(u32, Control)> = self.netlmt.take_out().collect();
        for (peer, msg) in out {
            let mut bytes = [0u8; nemesis_lmt::wire::MAX_ENCODED];
            let n = msg.encode(&mut bytes);
            let hdr = MsgHeader { kind: KIND_LMT, ..self.header(peer, 0, 0) };
            match self.net_send(peer, &hdr, &bytes[..n]) {
                Ok(()) | Err(Error::PeerDied { .. }) => {}
                Err(e) => return Err(e),
            }
        }
        let mut done: Vec<(u64, Outcome)> = self.lmt.take_done().collect();
        done.extend(self.netlmt.take_done());
        for (token, outcome) in done {
            let req = Request::from_token(token);
            let Some(&mut Op::Lmt { status, cap, peer, recv }) = self.reqs.op_mut(req) else { continue };
            let result = match outcome {
                Outcome::Moved { .. } if recv => finish(status, cap),
                Outcome::Moved { .. } => Ok(status),
                Outcome::Failed(nemesis_lmt::Error::PeerDied) => Err(Error::PeerDied { rank: peer }),
                Outcome::Failed(e) => Err(Error::Lmt(e)),
            };
            self.reqs.complete(req, result);
        }
        Ok(any)
    }

    /// Resumes pending sends in order. True if one completed.
    fn resume_pending(&mut self) -> Result<bool> {
        if self.pending.is_empty() {
            return Ok(false);
        }
        let mut done = false;
        let mut i = 0;
        while i < self.pending.len() {
            let Pending { req, internal, sync, ref own } = self.pending[i];
            let Some(Op::Send { ps, buf, len, dest }) = self.reqs.op_mut(req) else {
                self.pending.remove(i);
                continue;
            };
            let (buf, len, dest) = (*buf, *len, *dest);
            let data = match own {
                Some(own) => &own[..],
                // SAFETY: the send's buffer stays valid until its request completes (callers'
                // contract); `len` bytes were given.
                None => unsafe { raw_slice(buf, len) },
            };
            let tag = ps.header().tag;
            let local = ps.dst();
            match self.port.resume(ps, data) {
                Ok(true) => {
                    self.ring(local);
                    let status = Status { source: self.rank, tag, len };
                    match sync {
                        Some(token) => {
                            if let Some(op) = self.reqs.op_mut(req) {
                                *op = Op::Sync;
                            }
                            self.sync_waiting.push((token, req, dest, status));
                        }
                        None => self.reqs.complete(req, Ok(status)),
                    }
                    if internal {
                        let _ = self.reqs.take(req);
                    }
                    self.pending.remove(i);
                    done = true;
                }
                Ok(false) => i += 1,
                Err(e) => {
                    let e = self.send_error(e, dest);
                    self.reqs.complete(req, Err(e));
                    if internal {
                        let _ = self.reqs.take(req);
                    }
                    self.pending.remove(i);
                    done = true;
                }
            }
        }
        Ok(done)
    }

    /// One progress pass for waits other than the bypass: pending sends, the node, peer events.
    /// True if anything happened.
    fn progress(&mut self, by: Option<&mut Bypass>) -> Result<bool> {
        let mut got = self.resume_pending()?;
        got |= self.lmt_step()?;
        if let Some(net) = self.net.as_mut() {
            got |= net.poll(&mut self.port)?;
        }
        let mut by = by;
        for _ in 0..POLL_BUDGET {
            let Some(inc) = self.port.poll(&self.expected)? else { break };
            got = true;
            self.deliver(inc, by.as_deref_mut())?;
        }
        if self.port.has_events() {
            self.handle_events(by)?;
            got = true;
        }
        Ok(got)
    }

    /// Waits for `req` and takes its result.
    fn wait(&mut self, req: Request) -> Result<Status> {
        let mut waiter = Waiter::new(self.cfg.wait);
        loop {
            if let Some(r) = self.reqs.take(req)? {
                return r;
            }
            self.idle_step(&mut waiter, None)?;
        }
    }

    /// A progress pass, then waiting according to the mode if nothing happened.
    fn idle_step(&mut self, waiter: &mut Waiter, by: Option<&mut Bypass>) -> Result<()> {
        let mut by = by;
        if self.progress(by.as_deref_mut())? {
            waiter.progressed();
            Ok(())
        } else {
            self.idle(waiter, by)
        }
    }

    /// Nothing happened: liveness checks once the wait is long, then spin, yield or block.
    fn idle(&mut self, waiter: &mut Waiter, by: Option<&mut Bypass>) -> Result<()> {
        if waiter.is_long() || bootstrap::take_failure_notice() {
            self.port.check_peers()?;
            if self.port.has_events() {
                self.handle_events(by)?;
                waiter.progressed();
                return Ok(());
            }
        }
        let bell = self.bell;
        let mut recheck_error = None;
        waiter.idle(bell, || match self.port.poll(&[]) {
            Ok(Some(inc)) => {
                if let Err(e) = self.deliver(inc, by) {
                    recheck_error = Some(e);
                }
                true
            }
            Ok(None) => false,
            Err(e) => {
                recheck_error = Some(e.into());
                true
            }
        });
        recheck_error.map_or(Ok(()), Err)
    }

    /// Reacts to what the port learnt about local peers.
    fn handle_events(&mut self, mut by: Option<&mut Bypass>) -> Result<()> {
        for ev in self.port.take_events() {
            match ev {
                PeerEvent::Gone { rank } => {
                    let g = self.global[usize::from(rank)];
                    if self.peers[g as usize] == Peer::Alive {
                        self.peers[g as usize] = Peer::Gone;
                    }
                    tracing::warn!(rank = g, "peer ended");
                }
                PeerEvent::PartialDropped { rank, .. } => {
                    let dead = self.global[usize::from(rank)];
                    self.drop_partial(dead, by.as_deref_mut());
                }
                PeerEvent::Silent { rank } => {
                    // Large messages with it fail (their requests complete at the next step).
                    self.lmt.peer_gone(rank, &self.rings);
                    let dead = self.global[usize::from(rank)];
                    self.peer_silent(dead, by.as_deref_mut())?;
                }
            }
        }
        Ok(())
    }

    /// The message being received from dead rank `dead` will never complete: its receive fails.
    fn drop_partial(&mut self, dead: u32, by: Option<&mut Bypass>) {
        match std::mem::take(&mut self.active[dead as usize]) {
            Active::Bypass => {
                if let Some(b) = by {
                    b.done = Some(Err(Error::PeerDied { rank: dead }));
                }
            }
            Active::Req(r) => self.reqs.complete(r, Err(Error::PeerDied { rank: dead })),
            Active::Unexpected(id) => {
                if let Some(i) = self.unexpected.iter().position(|(k, _)| *k == id) {
                    let (_, u) = self.unexpected.remove(i);
                    if let Some(r) = u.claimed {
                        self.reqs.complete(r, Err(Error::PeerDied { rank: dead }));
                    }
                }
            }
            Active::None | Active::Discard => {}
        }
    }

    /// Nothing more can arrive from rank `dead` (a local peer whose queue traffic was drained, or
    /// a remote one whose netmod notice came through the queue after its last arrival): what
    /// waits on it fails with `PeerDied`.
    fn peer_silent(&mut self, dead: u32, mut by: Option<&mut Bypass>) -> Result<()> {
        if self.peers[dead as usize] == Peer::Silent {
            return Ok(());
        }
        self.peers[dead as usize] = Peer::Silent;
        self.drop_partial(dead, by.as_deref_mut());
        if self.route[dead as usize] == NOT_LOCAL {
            self.netlmt.peer_gone(dead);
            tracing::warn!(rank = dead, "remote peer is gone");
        }
        let mut i = 0;
        while i < self.posted.len() {
            if self.posted[i].want.source == dead as i32 {
                let p = self.posted.remove(i).ok_or(Error::InvalidRequest)?;
                self.reqs.complete(p.req, Err(Error::PeerDied { rank: dead }));
            } else {
                i += 1;
            }
        }
        self.rebuild_expected();
        // Synchronous sends to it will never be acknowledged.
        let mut i = 0;
        while i < self.sync_waiting.len() {
            if self.sync_waiting[i].2 == dead {
                let (_, req, _, _) = self.sync_waiting.swap_remove(i);
                self.reqs.complete(req, Err(Error::PeerDied { rank: dead }));
            } else {
                i += 1;
            }
        }
        if let Some(b) = by
            && b.want.source == dead as i32
            && b.done.is_none()
            && b.lmt.is_none()
        {
            b.done = Some(Err(Error::PeerDied { rank: dead }));
        }
        Ok(())
    }

    fn finalize(&mut self) -> Result<()> {
        if self.finalized {
            return Ok(());
        }
        self.finalized = true;
        // Complete outstanding sends (a send to a dead peer completes with an error).
        let mut waiter = Waiter::new(self.cfg.wait);
        let mut warned = false;
        while !self.pending.is_empty()
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
        if let Some(pmi) = self.pmi.as_mut() {
            pmi.barrier()?;
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
