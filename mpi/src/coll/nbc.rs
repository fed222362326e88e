//! Non-blocking collectives (`MPI_Ibarrier`, `MPI_Ibcast`, `MPI_Ireduce`, `MPI_Iallreduce`,
//! `MPI_Igather(v)`, `MPI_Iscatter(v)`, `MPI_Iallgather(v)`, `MPI_Ialltoall(v/w)`,
//! `MPI_Ireduce_scatter(_block)`, `MPI_Iscan`, `MPI_Iexscan`) as **schedules**: a collective is
//! compiled at its call into rounds of non-blocking sends and receives and local steps (copies,
//! reductions) over buffers the schedule owns; a round starts when the previous one's transfers
//! are all complete. Every schedule in flight advances whenever any request is tested or waited
//! for (`MPI_Test`, `MPI_Wait`, `MPI_Waitall`...: `p2p::complete`), as libNBC's and MPICH's do,
//! so a program that waits for something else still moves its collectives; the request
//! completes when the last round has.
//!
//! **Buffers.** The caller's input is packed into the schedule's buffers at the call (MPI lets the
//! library read the send buffer any time before completion) and the results are unpacked into
//! the caller's receive buffer when the schedule completes (its contents are undefined until
//! then). Every transfer moves the schedule's own bytes, whose heap memory does not move while
//! the request lives (it stays in the request table until complete, even if freed by the user).
//!
//! **Tags.** Each communicator numbers its non-blocking collectives (MPI requires every member
//! to start them in the same order), and each instance takes its own tag in the collectives'
//! context, so several may be in flight at once and complete in any order, beside blocking ones.
//!
//! **Algorithms.** Barrier by dissemination; broadcast by a binomial tree; reduce by a binomial
//! tree in rank order from rank 0 (then to the root), so non-commutative operations combine in
//! rank order; allreduce as reduce then broadcast; gather, scatter, allgather and all-to-all as
//! one round of direct transfers; reduce-scatter as allreduce; scan and exscan by recursive
//! doubling.

use std::collections::VecDeque;
use std::ffi::{c_int, c_void};
use std::ops::Range;
use std::sync::atomic::Ordering;

use super::algo::Reduction;
use super::vector::{Displs, Side, Sink, layout_at, layouts, reduction_input, source};
use super::{begin, check_root, in_place_misused, is_in_place, mismatch, reduction_kept};
use crate::abi::{self, Datatype};
use crate::comm::Comm;
use crate::comm::context::{self, Contexts, Key};
use crate::datatype::Layout;
use crate::error::{Fail, Res, Why};
use crate::p2p::null_arg;
use crate::request::{Completion, Req, State as ReqState};
use crate::state::{Access, State};
use std::sync::Arc;

/// The tags of non-blocking collectives: `NBC + (instance mod NBC_SPAN) × NBC_STRIDE + offset`,
/// above every fixed collective tag and `COMM_GROUP + t` (`t` below 2^30); the offsets (below
/// `NBC_STRIDE`) tell apart the directions of a Cartesian neighbourhood collective.
const NBC: i32 = 0x4000_0100;
const NBC_SPAN: u32 = 1 << 22;
const NBC_STRIDE: i32 = 64;

/// A place in the schedule's buffers.
#[derive(Clone, Debug)]
struct At {
    buf: usize,
    range: Range<usize>,
}

fn at(buf: usize, range: Range<usize>) -> At {
    At { buf, range }
}

/// One step of a round.
#[derive(Debug)]
enum Step {
    /// `off`: the tag offset (below `NBC_STRIDE`).
    Send {
        to: u32,
        from: At,
        off: i32,
    },
    Recv {
        from: u32,
        into: At,
        off: i32,
    },
    /// `dst = src ⊕ dst` (`lower`: `src` holds lower ranks' data) or `dst = dst ⊕ src`.
    Reduce {
        dst: At,
        src: At,
        lower: bool,
    },
    Copy {
        dst: At,
        src: At,
    },
    /// A send to the other group of an intercommunicator (in `Sched::across`'s contexts).
    SendAcross {
        to: u32,
        from: At,
    },
    /// A receive from the other group of an intercommunicator.
    RecvAcross {
        from: u32,
        into: At,
    },
    /// A context agreement's contribution: this process's flag and free mask into its buffer.
    Contribute,
    /// The end of an agreement's round: the agreed context, or the rounds again.
    Settle,
}

/// A context agreement run as rounds (`MPI_Comm_idup`): contribute, allreduce (bitwise AND) over
/// `parent`, settle; repeated until every member lent its mask to this creation
/// (`crate::comm::context`).
#[derive(Debug)]
struct Agreement {
    key: Key,
    /// The communicator whose members agree (an intercommunicator's local group).
    parent: Arc<Comm>,
    /// The round's words.
    buf: usize,
    /// The contexts to agree on (2 for an intercommunicator: its receive context and its local
    /// group's), and those agreed.
    want: usize,
    got: Vec<u32>,
    /// An intercommunicator's: the job rank of the remote group's rank 0, and the buffers of the
    /// receive contexts the two groups' rank 0s swap then broadcast in their groups.
    remote: Option<(u32, usize, usize)>,
}

impl Agreement {
    /// The other group's receive context, once swapped.
    fn remote_ctx(&self, bufs: &[Vec<u8>]) -> Option<u32> {
        let (_, _, theirs) = self.remote?;
        bufs.get(theirs)?.get(..4).and_then(|b| b.try_into().ok()).map(u32::from_ne_bytes)
    }
}

/// What `MPI_Comm_idup` does when its agreement completes: the new communicator, a copy of
/// `parent` (index `ci`) with the attributes its copy callbacks gave at the call, written to
/// `out`.
#[derive(Debug)]
struct Idup {
    ci: usize,
    attrs: Vec<(c_int, usize)>,
    out: *mut abi::Comm,
}

/// A compiled non-blocking collective.
#[derive(Debug)]
pub struct Sched {
    ctx: u32,
    /// Between the groups of an intercommunicator: the receive and send contexts.
    across: Option<(u32, u32)>,
    tag: i32,
    bufs: Vec<Vec<u8>>,
    rounds: VecDeque<Vec<Step>>,
    red: Option<Reduction>,
    /// Transfers of the current round: Endpoint request and, for a receive, the bytes expected.
    inflight: Vec<(nemesis::Request, Option<usize>)>,
    /// Where results go when the schedule completes: the caller's memory and the bytes.
    outputs: Vec<(Sink, At)>,
    failed: Option<Fail>,
    /// The layout a user's operation on a non-contiguous type points to (`red`'s `UserCall`),
    /// kept while the schedule lives.
    keep: Option<std::sync::Arc<crate::datatype::TypeDesc>>,
    /// A context agreement among the rounds (`MPI_Comm_idup`).
    agree: Option<Box<Agreement>>,
    /// The communicator `MPI_Comm_idup` makes once complete.
    idup: Option<Idup>,
    /// An agreement's round failed: the next waits for the next advance (the creation that holds
    /// a member's mask must move first, possibly in this process).
    retry: bool,
}

impl Sched {
    fn new(c: &Comm, red: Option<Reduction>) -> Sched {
        let seq = c.nbc.fetch_add(1, Ordering::Relaxed) % NBC_SPAN;
        Sched {
            ctx: c.coll_ctx(),
            across: None,
            tag: NBC + seq as i32 * NBC_STRIDE,
            bufs: Vec::new(),
            rounds: VecDeque::new(),
            red,
            inflight: Vec::new(),
            outputs: Vec::new(),
            failed: None,
            keep: None,
            agree: None,
            idup: None,
            retry: false,
        }
    }

    /// A buffer of `data`; its index.
    fn buf(&mut self, data: Vec<u8>) -> usize {
        self.bufs.push(data);
        self.bufs.len() - 1
    }

    fn round(&mut self, steps: Vec<Step>) {
        if !steps.is_empty() {
            self.rounds.push_back(steps);
        }
    }

    /// Runs the local steps of the next round and posts its transfers; an error fails the
    /// schedule (transfers already posted still complete first).
    fn start_round(&mut self, ep: &mut nemesis::Endpoint, ctxs: &mut Contexts, steps: Vec<Step>) {
        for s in steps {
            if self.failed.is_some() {
                return;
            }
            match s {
                Step::Contribute => {
                    let Some(a) = &self.agree else { continue };
                    let (own, mask) = ctxs.contribute(a.key);
                    self.bufs[a.buf] = context::words_of(own, &mask);
                }
                Step::Settle => {
                    let Some(a) = self.agree.as_mut() else { continue };
                    let (owned, all) = context::of_words(&self.bufs[a.buf]);
                    match ctxs.settle(a.key, owned, &all) {
                        Some(Ok(ctx)) => {
                            a.got.push(ctx);
                            let parent = a.parent.clone();
                            if a.got.len() < a.want {
                                self.agreement_rounds(&parent);
                            } else if let Some((leader, mine, theirs)) = a.remote {
                                // The rank 0s swap the groups' receive contexts; each
                                // broadcasts the other's in its group.
                                // (The first context agreed is the new intercommunicator's.)
                                self.bufs[mine] = a.got[0].to_ne_bytes().to_vec();
                                if parent.rank == 0 {
                                    self.rounds.push_back(vec![
                                        Step::SendAcross { to: leader, from: at(mine, 0..4) },
                                        Step::RecvAcross { from: leader, into: at(theirs, 0..4) },
                                    ]);
                                }
                                self.bcast(&parent, 0, theirs);
                            }
                        }
                        Some(Err(())) => self.failed = Some(context::exhausted(0)),
                        // Another creation held a member's mask: the rounds again.
                        None => {
                            let parent = a.parent.clone();
                            self.agreement_rounds(&parent);
                            self.retry = true;
                        }
                    }
                }
                Step::Copy { dst, src } => {
                    let data = self.bufs[src.buf][src.range].to_vec();
                    self.bufs[dst.buf][dst.range].copy_from_slice(&data);
                }
                Step::Reduce { dst, src, lower } => {
                    let Some(red) = self.red else { continue };
                    let mut other = self.bufs[src.buf][src.range].to_vec();
                    let acc = &mut self.bufs[dst.buf][dst.range];
                    if lower {
                        red.combine_lower(acc, &mut other);
                    } else {
                        red.combine_higher(acc, &other);
                    }
                }
                Step::Send { to, from, off } => self.post_send(ep, to, from, self.tag + off, self.ctx),
                Step::Recv { from, into, off } => self.post_recv(ep, from, into, self.tag + off, self.ctx),
                Step::SendAcross { to, from } => {
                    let ctx = self.across.map_or(self.ctx, |a| a.1);
                    self.post_send(ep, to, from, self.tag, ctx)
                }
                Step::RecvAcross { from, into } => {
                    let ctx = self.across.map_or(self.ctx, |a| a.0);
                    self.post_recv(ep, from, into, self.tag, ctx)
                }
            }
        }
    }

    /// Posts the send of `from` to job rank `to`.
    fn post_send(&mut self, ep: &mut nemesis::Endpoint, to: u32, from: At, tag: i32, ctx: u32) {
        let b = &self.bufs[from.buf][from.range];
        // SAFETY: the schedule's buffer, whose heap memory stays put and untouched until the
        // request completes (the schedule outlives its transfers).
        match unsafe { ep.isend_raw(b.as_ptr(), b.len(), to, tag, ctx) } {
            Ok(r) => self.inflight.push((r, None)),
            Err(e) => self.failed = Some(Fail::endpoint(0, e)),
        }
    }

    /// Posts the receive into `into` from job rank `from`.
    fn post_recv(&mut self, ep: &mut nemesis::Endpoint, from: u32, into: At, tag: i32, ctx: u32) {
        let len = into.range.len();
        let b = &mut self.bufs[into.buf][into.range];
        // SAFETY: as for a send; nothing else reads or writes this range until the receive
        // completes (steps of a round touch disjoint ranges).
        match unsafe { ep.irecv_raw(b.as_mut_ptr(), len, from as i32, tag, ctx) } {
            Ok(r) => self.inflight.push((r, Some(len))),
            Err(e) => self.failed = Some(Fail::endpoint(0, e)),
        }
    }

    /// Records the result of in-flight transfer `k`.
    fn settle(&mut self, k: usize, res: nemesis::Result<nemesis::Status>) {
        let (_, want) = self.inflight.swap_remove(k);
        let f = match res {
            Ok(st) => match want {
                Some(w) if st.len != w => Some(mismatch(0, w, st.len)),
                _ => None,
            },
            Err(e) => Some(Fail::endpoint(0, e)),
        };
        if self.failed.is_none() {
            self.failed = f;
        }
        if self.failed.is_some() {
            self.rounds.clear();
        }
    }

    /// Advances as far as it can without waiting: `Some` once complete (successfully or not).
    /// `ctxs`: this process's contexts, for an agreement's rounds.
    pub fn advance(&mut self, ep: &mut nemesis::Endpoint, ctxs: &mut Contexts) -> Option<Completion> {
        loop {
            let mut k = 0;
            while k < self.inflight.len() {
                match ep.test(self.inflight[k].0) {
                    Ok(None) => k += 1,
                    Ok(Some(st)) => self.settle(k, Ok(st)),
                    Err(e) => self.settle(k, Err(e)),
                }
            }
            if !self.inflight.is_empty() {
                if self.failed.is_some() {
                    // Receives a failed peer will never match: withdraw them.
                    for &(r, want) in &self.inflight {
                        if want.is_some() {
                            let _ = ep.cancel_recv(r);
                        }
                    }
                }
                return None;
            }
            if let Some(f) = self.failed.take() {
                if let Some(a) = &self.agree {
                    ctxs.abandon(a.key);
                }
                return Some(Completion { code: f.code, why: Some(f.why), ..Completion::empty() });
            }
            match self.rounds.pop_front() {
                Some(steps) => {
                    self.start_round(ep, ctxs, steps);
                    if std::mem::take(&mut self.retry) && self.inflight.is_empty() {
                        return None;
                    }
                }
                None => return Some(self.deliver()),
            }
        }
    }

    /// The Endpoint requests of the current round (to wait for any of them).
    pub fn pending(&self) -> Vec<nemesis::Request> {
        self.inflight.iter().map(|p| p.0).collect()
    }

    /// Takes the result of in-flight request `r` (waited for elsewhere).
    pub fn took(&mut self, r: nemesis::Request, res: nemesis::Result<nemesis::Status>) {
        if let Some(k) = self.inflight.iter().position(|p| p.0 == r) {
            self.settle(k, res);
        }
    }

    /// Unpacks the results into the caller's buffers.
    fn deliver(&mut self) -> Completion {
        for (sink, a) in &mut self.outputs {
            // SAFETY: MPI's contract: the receive buffer stays valid and untouched by the caller
            // until the request completes, which is now.
            if let Err(f) = unsafe { sink.put(&self.bufs[a.buf][a.range.clone()], 0) } {
                return Completion { code: f.code, why: Some(f.why), ..Completion::empty() };
            }
        }
        self.outputs.clear();
        Completion::empty()
    }

    // -----------------------------------------------------------------------------------------
    // Algorithms, as rounds over the schedule's buffers.

    /// One round of a context agreement over `c`: contribute, allreduce (to rank 0, then back),
    /// settle.
    fn agreement_rounds(&mut self, c: &Comm) {
        let Some(b) = self.agree.as_ref().map(|a| a.buf) else { return };
        self.bufs[b] = vec![0u8; context::ROUND_BYTES];
        self.rounds.push_back(vec![Step::Contribute]);
        self.reduce(c, 0, b);
        self.bcast(c, 0, b);
        self.rounds.push_back(vec![Step::Settle]);
    }

    /// Dissemination barrier.
    fn barrier(&mut self, c: &Comm) {
        let (n, me) = (c.size as usize, c.rank as usize);
        let b = self.buf(Vec::new());
        let mut d = 1;
        while d < n {
            let (to, from) = (c.world[(me + d) % n], c.world[(me + n - d) % n]);
            self.round(vec![
                Step::Send { to, from: at(b, 0..0), off: 0 },
                Step::Recv { from, into: at(b, 0..0), off: 0 },
            ]);
            d *= 2;
        }
    }

    /// Binomial broadcast of `buf` from `root`.
    fn bcast(&mut self, c: &Comm, root: usize, b: usize) {
        let (n, me) = (c.size as usize, c.rank as usize);
        let len = self.bufs[b].len();
        let rel = (me + n - root) % n;
        let abs = |r: usize| c.world[(r + root) % n];
        let mut mask = 1;
        while mask < n {
            if rel & mask != 0 {
                self.round(vec![Step::Recv { from: abs(rel - mask), into: at(b, 0..len), off: 0 }]);
                break;
            }
            mask <<= 1;
        }
        let mut sends = Vec::new();
        mask >>= 1;
        while mask > 0 {
            if rel + mask < n {
                sends.push(Step::Send { to: abs(rel + mask), from: at(b, 0..len), off: 0 });
            }
            mask >>= 1;
        }
        self.round(sends);
    }

    /// Binomial reduction of `buf` into rank 0 in rank order, then to `root`. The result is in
    /// `buf` at the root.
    fn reduce(&mut self, c: &Comm, root: usize, b: usize) {
        let (n, me) = (c.size as usize, c.rank as usize);
        let len = self.bufs[b].len();
        let tmp = self.buf(vec![0u8; len]);
        let mut mask = 1;
        let mut pending_reduce = false;
        while mask < n {
            let mut steps = Vec::new();
            if pending_reduce {
                steps.push(Step::Reduce { dst: at(b, 0..len), src: at(tmp, 0..len), lower: false });
                pending_reduce = false;
            }
            if me & mask != 0 {
                steps.push(Step::Send { to: c.world[me - mask], from: at(b, 0..len), off: 0 });
                self.round(steps);
                break;
            }
            if me + mask < n {
                steps.push(Step::Recv { from: c.world[me + mask], into: at(tmp, 0..len), off: 0 });
                pending_reduce = true;
            }
            self.round(steps);
            mask <<= 1;
        }
        if pending_reduce {
            self.round(vec![Step::Reduce { dst: at(b, 0..len), src: at(tmp, 0..len), lower: false }]);
        }
        if root != 0 {
            if me == 0 {
                self.round(vec![Step::Send { to: c.world[root], from: at(b, 0..len), off: 0 }]);
            } else if me == root {
                self.round(vec![Step::Recv { from: c.world[0], into: at(b, 0..len), off: 0 }]);
            }
        }
    }
}

/// What a schedule does once complete with `done` beyond its outputs: the communicator of an
/// `MPI_Comm_idup` made and handed out. The request's completion.
pub fn finished(st: &mut State, s: &mut Sched, done: Completion) -> Completion {
    let (Some(idup), Some(a)) = (s.idup.take(), s.agree.as_ref()) else { return done };
    let remote = a.remote_ctx(&s.bufs);
    let complete = a.got.len() == a.want && (a.remote.is_none() || remote.is_some());
    if done.code != abi::SUCCESS || !complete {
        for &ctx in &a.got {
            st.contexts.release(ctx);
        }
        return done;
    }
    match crate::comm::made_by_idup(st, idup.ci, &a.got, remote, idup.attrs) {
        Ok(h) => {
            // SAFETY: MPI's contract: `newcomm` stays writable until the request completes
            // (MPI-3.1 §6.4.2: the handle is valid once it has).
            unsafe { *idup.out = h };
            done
        }
        Err(f) => Completion { code: f.code, why: Some(f.why), ..Completion::empty() },
    }
}

/// Stores a schedule as a request and advances it once.
fn submit(acc: &mut Access, ci: usize, mut s: Sched, request: *mut abi::Request) -> Res<()> {
    if request.is_null() {
        return Err(null_arg(Some(ci), "request"));
    }
    let st = acc.st();
    let state = match st.ep.as_mut().and_then(|ep| s.advance(ep, &mut st.contexts)) {
        Some(done) => ReqState::Done(finished(st, &mut s, done)),
        None => ReqState::Coll(Box::new(s)),
    };
    let active = matches!(state, ReqState::Coll(_));
    let h = st.reqs.insert(Req { coll: true, ..Req::new(ci, state, false) });
    let h = h.ok_or_else(|| Fail::new(abi::ERR_INTERN, Some(ci), Why::Arg("too many requests")))?;
    if active
        && let Some(i) = st.reqs.index(h)
        && !st.colls.contains(&i)
    {
        st.colls.push(i);
    }
    // SAFETY: MPI's contract: `request` is writable (checked non-null).
    unsafe { *request = h };
    Ok(())
}

// ---------------------------------------------------------------------------------------------
// The calls.

/// `MPI_Ibarrier`.
///
/// # Safety
/// MPI's contract on `request`.
pub unsafe fn ibarrier(acc: &mut Access, comm: abi::Comm, request: *mut abi::Request) -> Res<()> {
    let (c, ci, _) = begin(acc, comm)?;
    let mut s = Sched::new(&c, None);
    s.barrier(&c);
    submit(acc, ci, s, request)
}

/// `MPI_Ibcast`.
///
/// # Safety
/// MPI's contract on the buffer and `request`.
pub unsafe fn ibcast(
    acc: &mut Access,
    buf: *mut c_void,
    count: c_int,
    dt: Datatype,
    root: c_int,
    comm: abi::Comm,
    request: *mut abi::Request,
) -> Res<()> {
    let (c, ci, _) = begin(acc, comm)?;
    let root = check_root(root, &c, ci)?;
    let l = layout_at(acc, buf.cast_const().cast(), count, dt, ci)?;
    let mut s = Sched::new(&c, None);
    let is_root = c.rank as usize == root;
    // SAFETY: MPI's contract: the root's buffer holds the data.
    let data = if is_root { unsafe { source(&l) }.into_owned() } else { vec![0u8; l.len()] };
    let len = data.len();
    let b = s.buf(data);
    if len > 0 {
        s.bcast(&c, root, b);
        if !is_root {
            s.outputs.push((Sink::new(l), at(b, 0..len)));
        }
    }
    submit(acc, ci, s, request)
}

/// `MPI_Ireduce` (`root` given) and `MPI_Iallreduce`.
///
/// # Safety
/// MPI's contract on the buffers and `request`.
#[allow(clippy::too_many_arguments)]
pub unsafe fn ireduce(
    acc: &mut Access,
    sendbuf: *const c_void,
    recvbuf: *mut c_void,
    count: c_int,
    dt: Datatype,
    op: abi::Op,
    root: Option<c_int>,
    comm: abi::Comm,
    request: *mut abi::Request,
) -> Res<()> {
    let (c, ci, _) = begin(acc, comm)?;
    let root_at = root.map(|r| check_root(r, &c, ci)).transpose()?;
    let receives = root_at.is_none_or(|r| r == c.rank as usize);
    if is_in_place(sendbuf) && !receives {
        return Err(in_place_misused(ci));
    }
    let (red, keep) = reduction_kept(acc.st(), op, dt, ci)?;
    // SAFETY: MPI's contract on the input.
    let data = unsafe { reduction_input(acc, sendbuf, recvbuf, count, dt, ci)? };
    let len = data.len();
    let mut s = Sched::new(&c, Some(red));
    s.keep = keep;
    let b = s.buf(data);
    if len > 0 {
        s.reduce(&c, root_at.unwrap_or(0), b);
        if root_at.is_none() {
            s.bcast(&c, 0, b);
        }
        if receives {
            let l = layout_at(acc, recvbuf.cast_const().cast(), count, dt, ci)?;
            s.outputs.push((Sink::new(l), at(b, 0..len)));
        }
    }
    submit(acc, ci, s, request)
}

/// `MPI_Ireduce_scatter` (`counts`) and `MPI_Ireduce_scatter_block` (`block`).
///
/// # Safety
/// MPI's contract on the buffers, the array and `request`.
#[allow(clippy::too_many_arguments)]
pub unsafe fn ireduce_scatter(
    acc: &mut Access,
    sendbuf: *const c_void,
    recvbuf: *mut c_void,
    counts: *const c_int,
    block: Option<c_int>,
    dt: Datatype,
    op: abi::Op,
    comm: abi::Comm,
    request: *mut abi::Request,
) -> Res<()> {
    let (c, ci, _) = begin(acc, comm)?;
    let (n, me) = (c.size as usize, c.rank as usize);
    let counts: Vec<usize> = match block {
        Some(b) if b < 0 => return Err(Fail::new(abi::ERR_COUNT, Some(ci), Why::Count(b))),
        Some(b) => vec![b as usize; n],
        None => {
            if counts.is_null() {
                return Err(null_arg(Some(ci), "recvcounts"));
            }
            // SAFETY: MPI's contract: `size` ints.
            let v = unsafe { std::slice::from_raw_parts(counts, n) };
            v.iter()
                .map(|&k| if k < 0 { Err(Fail::new(abi::ERR_COUNT, Some(ci), Why::Count(k))) } else { Ok(k as usize) })
                .collect::<Res<_>>()?
        }
    };
    let (red, keep) = reduction_kept(acc.st(), op, dt, ci)?;
    let total = counts.iter().sum::<usize>();
    let total_c = c_int::try_from(total)
        .map_err(|_| Fail::new(abi::ERR_COUNT, Some(ci), Why::Arg("the counts add up past INT_MAX")))?;
    // SAFETY: MPI's contract on the input.
    let data = unsafe { reduction_input(acc, sendbuf, recvbuf, total_c, dt, ci)? };
    let mut s = Sched::new(&c, Some(red));
    s.keep = keep;
    let len = data.len();
    let b = s.buf(data);
    if len > 0 {
        let per = len / total;
        s.reduce(&c, 0, b);
        s.bcast(&c, 0, b);
        let start = counts[..me].iter().sum::<usize>() * per;
        let l = layout_at(acc, recvbuf.cast_const().cast(), counts[me] as c_int, dt, ci)?;
        s.outputs.push((Sink::new(l), at(b, start..start + counts[me] * per)));
    }
    submit(acc, ci, s, request)
}

/// `MPI_Iscan` and `MPI_Iexscan`: recursive doubling, a round per step.
///
/// # Safety
/// MPI's contract on the buffers and `request`.
#[allow(clippy::too_many_arguments)]
pub unsafe fn iscan(
    acc: &mut Access,
    sendbuf: *const c_void,
    recvbuf: *mut c_void,
    count: c_int,
    dt: Datatype,
    op: abi::Op,
    comm: abi::Comm,
    exclusive: bool,
    request: *mut abi::Request,
) -> Res<()> {
    let (c, ci, _) = begin(acc, comm)?;
    if count < 0 {
        return Err(Fail::new(abi::ERR_COUNT, Some(ci), Why::Count(count)));
    }
    let (red, keep) = reduction_kept(acc.st(), op, dt, ci)?;
    // SAFETY: MPI's contract on the input.
    let data = unsafe { reduction_input(acc, sendbuf, recvbuf, count, dt, ci)? };
    let len = data.len();
    let mut s = Sched::new(&c, Some(red));
    s.keep = keep;
    let (n, me) = (c.size as usize, c.rank as usize);
    let result = s.buf(data.clone());
    let partial = s.buf(data);
    let tmp = s.buf(vec![0u8; len]);
    if len > 0 {
        let mut have = !exclusive;
        let mut mask = 1;
        let mut after: Vec<Step> = Vec::new();
        while mask < n {
            let peer = me ^ mask;
            if peer < n {
                let mut steps = std::mem::take(&mut after);
                steps.push(Step::Send { to: c.world[peer], from: at(partial, 0..len), off: 0 });
                steps.push(Step::Recv { from: c.world[peer], into: at(tmp, 0..len), off: 0 });
                s.round(steps);
                if peer < me {
                    after.push(if have {
                        Step::Reduce { dst: at(result, 0..len), src: at(tmp, 0..len), lower: true }
                    } else {
                        Step::Copy { dst: at(result, 0..len), src: at(tmp, 0..len) }
                    });
                    have = true;
                    after.push(Step::Reduce { dst: at(partial, 0..len), src: at(tmp, 0..len), lower: true });
                } else {
                    after.push(Step::Reduce { dst: at(partial, 0..len), src: at(tmp, 0..len), lower: false });
                }
            }
            mask <<= 1;
        }
        s.round(after);
        if have {
            let l = layout_at(acc, recvbuf.cast_const().cast(), count, dt, ci)?;
            s.outputs.push((Sink::new(l), at(result, 0..len)));
        }
    }
    submit(acc, ci, s, request)
}

/// One round exchanging blocks directly: `send[i]` to rank `i` (skipped when `None` or empty),
/// `recv[i]` from rank `i` into the caller's memory at completion; this rank's own block copied.
///
/// # Safety
/// MPI's contract on the buffers the layouts describe.
unsafe fn direct(s: &mut Sched, c: &Comm, send: Vec<Option<Vec<u8>>>, recv: Vec<Option<Layout>>, ci: usize) -> Res<()> {
    let me = c.rank as usize;
    let mut steps = Vec::new();
    let mut own_send = None;
    for (i, data) in send.into_iter().enumerate() {
        let Some(data) = data else { continue };
        if i == me {
            own_send = Some(data);
            continue;
        }
        if data.is_empty() {
            continue;
        }
        let len = data.len();
        let b = s.buf(data);
        steps.push(Step::Send { to: c.world[i], from: at(b, 0..len), off: 0 });
    }
    for (i, l) in recv.into_iter().enumerate() {
        let Some(l) = l else { continue };
        let len = l.len();
        if i == me {
            if let Some(data) = own_send.take() {
                if data.len() != len {
                    return Err(mismatch(ci, len, data.len()));
                }
                let b = s.buf(data);
                s.outputs.push((Sink::new(l), at(b, 0..len)));
            }
            continue;
        }
        if len == 0 {
            continue;
        }
        let b = s.buf(vec![0u8; len]);
        steps.push(Step::Recv { from: c.world[i], into: at(b, 0..len), off: 0 });
        s.outputs.push((Sink::new(l), at(b, 0..len)));
    }
    s.round(steps);
    Ok(())
}

/// Packed copies of blocks.
///
/// # Safety
/// MPI's contract: the blocks are readable.
unsafe fn packed(b: &[Layout]) -> Vec<Option<Vec<u8>>> {
    // SAFETY: the caller's contract.
    b.iter().map(|l| Some(unsafe { source(l) }.into_owned())).collect()
}

/// What a gather-like or scatter-like call gives: per rank, this rank's send and receive sides.
pub enum Shape {
    Gather,
    Scatter,
    Allgather,
    Alltoall,
}

/// `MPI_Igather(v)`, `MPI_Iscatter(v)`, `MPI_Iallgather(v)`, `MPI_Ialltoall(v/w)`: each side
/// given as `(buffer, count, counts, displacements, datatype, datatypes)`; the regular forms use
/// the count (`regular`), the v-forms the arrays, the `w` form the datatypes too.
///
/// # Safety
/// MPI's contract on the buffers, arrays and `request`.
#[allow(clippy::too_many_arguments)]
pub unsafe fn iblocks(
    acc: &mut Access,
    shape: Shape,
    send: (*const c_void, c_int, *const c_int, *const c_int, Datatype, Option<*const Datatype>),
    recv: (*mut c_void, c_int, *const c_int, *const c_int, Datatype, Option<*const Datatype>),
    regular: bool,
    root: Option<c_int>,
    comm: abi::Comm,
    request: *mut abi::Request,
) -> Res<()> {
    let (c, ci, _) = begin(acc, comm)?;
    let (n, me) = (c.size as usize, c.rank as usize);
    let root = root.map(|r| check_root(r, &c, ci)).transpose()?;
    let is_root = root == Some(me);
    let (sbuf, scount, scounts, sdispls, stype, stypes) = send;
    let (rbuf, rcount, rcounts, rdispls, rtype, rtypes) = recv;
    #[allow(clippy::too_many_arguments)]
    let side = |acc: &mut Access,
                base: *const c_void,
                count: c_int,
                counts: *const c_int,
                displs: *const c_int,
                dt: Datatype,
                types: Option<*const Datatype>,
                many: bool| {
        let side = match (many, regular, types) {
            (false, _, _) => Side::One(count),
            (true, true, _) => Side::Regular(count),
            (true, false, None) => Side::V(counts, displs),
            (true, false, Some(types)) => Side::W(counts, Displs::Int(displs), types),
        };
        // SAFETY: MPI's contract on the arrays.
        unsafe { layouts(acc, base.cast(), side, dt, n, ci) }
    };
    let mut s = Sched::new(&c, None);
    let in_place_send = is_in_place(sbuf);
    let in_place_recv = is_in_place(rbuf.cast_const());
    match shape {
        Shape::Gather => {
            if in_place_send && !is_root {
                return Err(in_place_misused(ci));
            }
            let root = root.unwrap_or(0);
            if is_root {
                let recv = side(acc, rbuf.cast_const(), rcount, rcounts, rdispls, rtype, rtypes, true)?;
                let mut sends: Vec<Option<Vec<u8>>> = (0..n).map(|_| None).collect();
                if !in_place_send {
                    let mine = side(acc, sbuf, scount, std::ptr::null(), std::ptr::null(), stype, None, false)?;
                    // SAFETY: MPI's contract.
                    sends[me] = unsafe { packed(&mine) }.pop().flatten();
                }
                let mut recvs: Vec<Option<Layout>> = recv.into_iter().map(Some).collect();
                if in_place_send {
                    recvs[me] = None;
                }
                // SAFETY: MPI's contract on the buffers.
                unsafe { direct(&mut s, &c, sends, recvs, ci)? };
            } else {
                let mine = side(acc, sbuf, scount, std::ptr::null(), std::ptr::null(), stype, None, false)?;
                let mut sends: Vec<Option<Vec<u8>>> = (0..n).map(|_| None).collect();
                // SAFETY: MPI's contract.
                sends[root] = unsafe { packed(&mine) }.pop().flatten();
                // SAFETY: MPI's contract on the buffers.
                unsafe { direct(&mut s, &c, sends, (0..n).map(|_| None).collect(), ci)? };
            }
        }
        Shape::Scatter => {
            if in_place_recv && !is_root {
                return Err(in_place_misused(ci));
            }
            let root = root.unwrap_or(0);
            let mut recvs: Vec<Option<Layout>> = (0..n).map(|_| None).collect();
            if !(is_root && in_place_recv) {
                let mine =
                    side(acc, rbuf.cast_const(), rcount, std::ptr::null(), std::ptr::null(), rtype, None, false)?;
                recvs[root] = mine.into_iter().next();
            }
            let sends = if is_root {
                let all = side(acc, sbuf, scount, scounts, sdispls, stype, stypes, true)?;
                // SAFETY: MPI's contract.
                let mut v = unsafe { packed(&all) };
                if in_place_recv {
                    v[me] = None;
                }
                v
            } else {
                (0..n).map(|_| None).collect()
            };
            // SAFETY: MPI's contract on the buffers.
            unsafe { direct(&mut s, &c, sends, recvs, ci)? };
        }
        Shape::Allgather | Shape::Alltoall => {
            let recv = side(acc, rbuf.cast_const(), rcount, rcounts, rdispls, rtype, rtypes, true)?;
            let sends: Vec<Option<Vec<u8>>> = if in_place_send {
                // SAFETY: MPI's contract: the data is in the receive buffer (packed now, before
                // any of it is overwritten).
                let mut v = unsafe { packed(&recv) };
                if matches!(shape, Shape::Allgather) {
                    let mine = v[me].take();
                    v = (0..n).map(|_| mine.clone()).collect();
                }
                v
            } else if matches!(shape, Shape::Allgather) {
                let mine = side(acc, sbuf, scount, std::ptr::null(), std::ptr::null(), stype, None, false)?;
                // SAFETY: MPI's contract.
                let one = unsafe { packed(&mine) }.pop().flatten();
                (0..n).map(|_| one.clone()).collect()
            } else {
                let all = side(acc, sbuf, scount, scounts, sdispls, stype, stypes, true)?;
                // SAFETY: MPI's contract.
                unsafe { packed(&all) }
            };
            let recvs = recv.into_iter().map(Some).collect();
            // SAFETY: MPI's contract on the buffers.
            unsafe { direct(&mut s, &c, sends, recvs, ci)? };
        }
    }
    submit(acc, ci, s, request)
}

// ---------------------------------------------------------------------------------------------
// Neighbourhood collectives.

/// `MPI_(I)neighbor_allgather(v)` (`alltoall` false) and `MPI_(I)neighbor_alltoall(v/w)`: one
/// round, a message to every out-neighbour and from every in-neighbour (`MPI_PROC_NULL`
/// neighbours of a Cartesian grid are skipped, their blocks untouched). The blocking forms
/// (`request` `None`) wait for it.
///
/// # Safety
/// MPI's contract on the buffers, arrays and `request`.
#[allow(clippy::too_many_arguments)]
pub unsafe fn neighbor(
    acc: &mut Access,
    alltoall: bool,
    send: (*const c_void, Side, Datatype),
    recv: (*mut c_void, Side, Datatype),
    comm: abi::Comm,
    request: Option<*mut abi::Request>,
) -> Res<()> {
    let (c, ci, _) = begin(acc, comm)?;
    let (ins, outs) = crate::topo::neighbour_lists(&c, ci)?;
    // SAFETY: MPI's contract on the arrays.
    let sends = unsafe { layouts(acc, send.0.cast(), send.1, send.2, outs.len(), ci)? };
    // SAFETY: MPI's contract on the arrays.
    let recvs = unsafe { layouts(acc, recv.0.cast_const().cast(), recv.1, recv.2, ins.len(), ci)? };
    let mut s = Sched::new(&c, None);
    let mut steps = Vec::new();
    let shared = if alltoall {
        None
    } else {
        // SAFETY: MPI's contract: the send buffer holds the block.
        let data = unsafe { source(&sends[0]) }.into_owned();
        let len = data.len();
        Some((s.buf(data), len))
    };
    for (k, &(r, off)) in outs.iter().enumerate() {
        if r == abi::PROC_NULL {
            continue;
        }
        let (b, len) = match shared {
            Some(x) => x,
            None => {
                // SAFETY: MPI's contract: the send buffer holds every block.
                let data = unsafe { source(&sends[k]) }.into_owned();
                let len = data.len();
                (s.buf(data), len)
            }
        };
        if len > 0 {
            steps.push(Step::Send { to: c.world[r as usize], from: at(b, 0..len), off });
        }
    }
    for (l, &(r, off)) in recvs.into_iter().zip(&ins) {
        let len = l.len();
        if r == abi::PROC_NULL || len == 0 {
            continue;
        }
        let b = s.buf(vec![0u8; len]);
        steps.push(Step::Recv { from: c.world[r as usize], into: at(b, 0..len), off });
        s.outputs.push((Sink::new(l), at(b, 0..len)));
    }
    s.round(steps);
    if let Some(request) = request {
        return submit(acc, ci, s, request);
    }
    let mut h = abi::REQUEST_NULL;
    submit(acc, ci, s, &mut h)?;
    // SAFETY: `h` is the request just made; the status is ignored.
    unsafe { crate::p2p::complete::wait(acc, &mut h, abi::STATUS_IGNORE as *mut abi::Status) }
}

/// `MPI_Comm_idup`: the context agreement of `MPI_Comm_dup` as a schedule (its rounds repeat
/// until the agreement succeeds) with this communicator's next non-blocking collective tag; the
/// attributes are copied now (their copy callbacks run at the call, as `MPI_Comm_dup`'s), the
/// new communicator made and its handle written to `newcomm` when the request completes.
/// Several may be in flight on one communicator, beside other collectives: each is its own
/// creation (`Key`: the parent's context and the instance's number), ordered as the members
/// started them. On an intercommunicator the local group agrees on two contexts (the new
/// intercommunicator's and its local group's) in its local communicator, the groups' rank 0s
/// swap their receive contexts, and each broadcasts the other's in its group.
///
/// # Safety
/// `newcomm` writable until the request completes; `request` writable.
pub unsafe fn idup(acc: &mut Access, comm: abi::Comm, newcomm: *mut abi::Comm, request: *mut abi::Request) -> Res<()> {
    let (c, ci, _) = super::begin_any(acc, comm)?;
    if newcomm.is_null() {
        return Err(null_arg(Some(ci), "newcomm"));
    }
    if request.is_null() {
        return Err(null_arg(Some(ci), "request"));
    }
    let attrs = crate::attr::copies(acc.st(), ci)?;
    let mut s = Sched::new(&c, Some(context::round_reduction()));
    let seq = ((s.tag - NBC) / NBC_STRIDE) as u32;
    let buf = s.buf(Vec::new());
    // The instance's tag is the intercommunicator's (both groups number its collectives alike);
    // its local rounds run in the local group's collective context, unused by anything else
    // with this tag.
    let (parent, want, remote) = match &c.local {
        Some(l) => {
            s.ctx = l.coll_ctx();
            s.across = Some((c.coll_ctx(), c.coll_send_ctx()));
            let (mine, theirs) = (s.buf(vec![0u8; 4]), s.buf(vec![0u8; 4]));
            (l.clone(), 2, Some((c.world[0], mine, theirs)))
        }
        None => (c.clone(), 1, None),
    };
    let key = (parent.ctx, seq);
    s.agree = Some(Box::new(Agreement { key, parent: parent.clone(), buf, want, got: Vec::new(), remote }));
    s.agreement_rounds(&parent);
    s.idup = Some(Idup { ci, attrs, out: newcomm });
    submit(acc, ci, s, request)
}
