//! Non-blocking collectives as **schedules** (the machinery; the calls are in `nbc/calls.rs`, those
//! on intercommunicators in `nbc/inter.rs`): a
//! collective is compiled at its call into rounds of non-blocking sends and receives and local
//! steps (copies, reductions) over buffers the schedule owns, as libNBC's and MPICH's are.
//!
//! Invariants:
//! - a round starts when the previous one's transfers are all complete; the request completes
//!   when the last round has;
//! - every schedule in flight advances whenever any request is tested or waited for
//!   (`p2p::complete`), so a program that waits for something else still moves its collectives
//!   — except under fault tolerance, where schedules move at deterministic points only
//!   ([`ordered`]: the start call posts the first round, a completion call completes them all);
//! - every transfer moves the schedule's own bytes, whose heap memory does not move while the
//!   request lives (it stays in the request table until complete, even if freed by the user); the
//!   caller's input is packed at the call, results unpacked at completion;
//! - each instance takes its own tag in the collective context (the communicator numbers its
//!   non-blocking collectives, which every member starts in the same order), so several may be in
//!   flight at once and complete in any order, beside blocking ones.
//!
//! The algorithms of each operation: `docs/design/mpi.md`, "Non-blocking collectives".

use std::collections::VecDeque;
use std::ffi::c_int;
use std::ops::Range;
use std::sync::atomic::{AtomicU32, Ordering};

use super::algo::Reduction;
use super::mismatch;
use super::vector::Sink;
use crate::abi;
use crate::comm::Comm;
use crate::comm::context::{self, Contexts, Key};
use crate::error::{Fail, Res, Why};
use crate::p2p::null_arg;
use crate::request::{Completion, Req, State as ReqState};
use crate::state::{Access, State};
mod calls;
mod inter;
mod ordered;
pub use calls::{Shape, ibarrier, ibcast, iblocks, idup, ireduce, ireduce_scatter, iscan, neighbor};
pub use ordered::{complete_in_order, is_ordered};

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
/// `parent`, settle; repeated until the members' offers share a free context
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
    /// A `Step::Reduce` with a user's operation, reached by the current round: the round stops
    /// there until [`Sched::run_user_op`] has run it, with no borrow of the state live (the
    /// operation may call MPI); `resume` holds the round's steps after it.
    user_step: Option<(At, At, bool)>,
    resume: Vec<Step>,
    /// A placeholder standing in the request table while the schedule is out of it (running a
    /// user's operation): it never advances nor completes.
    busy: bool,
    /// The communicator's number this schedule took, until submitted.
    number: Number,
    /// Under fault tolerance: it advances only when [`ordered::complete_in_order`] drives it.
    ordered: bool,
    /// Its place in the order the process started its schedules (set when submitted).
    started: u64,
}

/// A number taken from a communicator's count of non-blocking collectives (`Comm::nbc`), given
/// back if dropped before [`Number::keep`]: a call refused after its schedule was begun (a bad
/// argument found while compiling it) leaves the count as it was, so the processes that made
/// the call and those that did not (a role with nothing to check) still agree on the next
/// collective's number.
#[derive(Debug, Default)]
struct Number(Option<(Arc<AtomicU32>, u32)>);

impl Number {
    /// Takes the next number of `count`.
    fn take(count: &Arc<AtomicU32>) -> (Number, u32) {
        // ORDERING: the count is only read and written under the library lock; the atomic is
        // for sharing it between a communicator's copies, not for ordering.
        let n = count.fetch_add(1, Ordering::Relaxed);
        (Number(Some((count.clone(), n))), n)
    }

    /// The number is used: it stays taken.
    fn keep(&mut self) {
        self.0 = None;
    }
}

impl Drop for Number {
    fn drop(&mut self) {
        if let Some((count, n)) = self.0.take() {
            // ORDERING: as in `take`. Given back only if no later number was taken meanwhile
            // (schedules are compiled under the lock, one at a time: none was).
            let _ = count.compare_exchange(n.wrapping_add(1), n, Ordering::Relaxed, Ordering::Relaxed);
        }
    }
}

impl Sched {
    fn new(c: &Comm, red: Option<Reduction>) -> Sched {
        let (number, n) = Number::take(&c.nbc);
        let seq = n % NBC_SPAN;
        Sched { ctx: c.coll_ctx(), tag: NBC + seq as i32 * NBC_STRIDE, red, number, ..Sched::blank() }
    }

    /// A schedule with no rounds, buffers nor reduction, in context 0.
    fn blank() -> Sched {
        Sched {
            ctx: 0,
            across: None,
            tag: 0,
            bufs: Vec::new(),
            rounds: VecDeque::new(),
            red: None,
            inflight: Vec::new(),
            outputs: Vec::new(),
            failed: None,
            keep: None,
            agree: None,
            idup: None,
            retry: false,
            user_step: None,
            resume: Vec::new(),
            busy: false,
            number: Number::default(),
            ordered: false,
            started: 0,
        }
    }

    /// The placeholder of a schedule taken out of the request table (see `busy`).
    pub fn busy() -> Sched {
        Sched { busy: true, ..Sched::blank() }
    }

    /// True for the placeholder of a schedule taken out of the table.
    pub fn is_busy(&self) -> bool {
        self.busy
    }

    /// True if the round waits for a user's operation ([`Sched::run_user_op`]).
    pub fn wants_user_op(&self) -> bool {
        self.user_step.is_some()
    }

    /// Runs the user's operation the round stopped at (`user_step`). The caller holds no
    /// reference into the state (the schedule is out of the request table): the operation may
    /// call MPI. The schedule's own buffers are the operands, and its `keep` holds the layout.
    pub fn run_user_op(&mut self) {
        if let Some((dst, src, lower)) = self.user_step.take() {
            self.reduce_step(dst, src, lower);
        }
    }

    /// `dst = src ⊕ dst` (`lower`) or `dst = dst ⊕ src` in the schedule's buffers.
    fn reduce_step(&mut self, dst: At, src: At, lower: bool) {
        let Some(red) = self.red else { return };
        let mut other = self.bufs[src.buf][src.range].to_vec();
        let acc = &mut self.bufs[dst.buf][dst.range];
        if lower {
            red.combine_lower(acc, &mut other);
        } else {
            red.combine_higher(acc, &other);
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
    /// A `Step::Reduce` with a user's operation stops the round (`user_step`).
    fn start_round(&mut self, ep: &mut nemesis::Endpoint, ctxs: &mut Contexts, steps: Vec<Step>) {
        let mut steps = steps.into_iter();
        while let Some(s) = steps.next() {
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
                        // No context offered free by every member: the rounds again (another window).
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
                    if self.red.is_some_and(|r| r.user.is_some()) {
                        self.user_step = Some((dst, src, lower));
                        self.resume = steps.collect();
                        return;
                    }
                    self.reduce_step(dst, src, lower);
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
    /// A round stopped at a user's operation waits for it ([`Sched::wants_user_op`]).
    pub fn advance(&mut self, ep: &mut nemesis::Endpoint, ctxs: &mut Contexts) -> Option<Completion> {
        if self.ordered && !ordered::driving() {
            return None;
        }
        loop {
            if self.busy || self.user_step.is_some() {
                return None;
            }
            if !self.resume.is_empty() {
                let rest = std::mem::take(&mut self.resume);
                self.start_round(ep, ctxs, rest);
                continue;
            }
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
        let _ = crate::comm::info::idup_hints(st, idup.out);
        return done;
    }
    match crate::comm::made_by_idup(st, idup.ci, &a.got, remote, idup.attrs, idup.out) {
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
    s.number.keep();
    let st = acc.st();
    s.started = ordered::next_start();
    if ordered::is_ordered(st) {
        // Only the first round, at this call: what follows depends on when it completes.
        s.ordered = true;
        if let (Some(ep), Some(steps)) = (st.ep.as_mut(), s.rounds.pop_front()) {
            s.start_round(ep, &mut st.contexts, steps);
        }
    }
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
