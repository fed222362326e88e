//! Completing requests: `MPI_Wait`, `MPI_Test` (their `all`/`any`/`some` forms in
//! `complete/arrays.rs`), `MPI_Request_get_status`, `MPI_Request_free`, `MPI_Cancel`.
//!
//! A request completes in two steps: its Endpoint request's result is taken into the slot
//! (`State::Done`: [`poll`], or [`wait_slot`] which blocks), then the result is reported and the
//! slot freed, or, for a persistent request, made inactive ([`take`]). Waiting blocks in the
//! Endpoint when calls are not locked, and otherwise tests in a loop that releases the big lock
//! between two looks (`Access::ep_wait`).

mod arrays;
mod peek;
pub use arrays::{any, some, testall, waitall, waitall_fast};
pub use peek::{get_status, get_status_all, get_status_any, get_status_some};

use std::ffi::c_int;

use super::{completion_in, null_arg, put_completion};
use crate::abi::{self, REQUEST_NULL, Status};
use crate::error::{Fail, Res, Why};
use crate::request::{Completion, Req, State as ReqState};
use crate::state::{Access, State, not_running};

#[cold]
fn bad_request(h: abi::Request) -> Fail {
    Fail::new(abi::ERR_REQUEST, None, Why::Request(h))
}

/// Turns a failed completion into the call's failure.
fn failure(comm: u32, done: Completion) -> Fail {
    Fail { code: done.code, comm: Some(comm as usize), why: done.why.unwrap_or(Why::Arg("request failed")) }
}

/// Records the Endpoint's result `res` for request slot `i` (the Endpoint no longer uses its
/// typed data's pieces).
fn finish(st: &mut State, i: usize, res: nemesis::Result<nemesis::Status>) {
    let ci = st.reqs.at(i).map_or(0, |r| r.comm as usize);
    let done = completion_in(st, ci, res);
    if let Some(req) = st.reqs.at_mut(i) {
        req.typed = None;
        req.state = ReqState::Done(done);
    }
}

/// Posts every deferred receive (`State::deferred`) to the Endpoint, in the order they were
/// started; one the Endpoint refuses (a peer known dead...) completes with its error.
#[cold]
#[inline(never)]
pub(crate) fn post_deferred(st: &mut State) {
    while let Some(i) = st.deferred.pop_front() {
        let Some(Req { state: ReqState::Deferred(d), .. }) = st.reqs.at(i) else { continue };
        let d = *d;
        let Some(ep) = st.ep.as_mut() else {
            finish(st, i, Err(nemesis::Error::InvalidRequest));
            continue;
        };
        // SAFETY: MPI's contract on the buffer of the `MPI_Irecv` that deferred it: `len`
        // writable bytes, untouched until the request completes.
        match unsafe { ep.irecv_raw(d.buf, d.len, d.from.rank() as c_int, d.tag, d.ctx) } {
            Ok(r) => {
                if let Some(req) = st.reqs.at_mut(i) {
                    req.state = ReqState::Pending(r);
                }
            }
            Err(e) => finish(st, i, Err(e)),
        }
    }
}

/// The receiver dropped the message of send slot `i` (`MPI_Cancel`): the request completes as
/// cancelled; its Endpoint request, completed the same way (or already done), is freed.
fn cancelled(st: &mut State, i: usize) {
    let State { ep, reqs, .. } = st;
    let Some(req) = reqs.at_mut(i) else { return };
    if let (ReqState::Pending(r), Some(ep)) = (&req.state, ep.as_mut()) {
        let _ = ep.test(*r);
    }
    req.typed = None;
    req.cancel = None;
    req.state = ReqState::Done(Completion::cancelled());
}

/// Settles a pending cancellation of send slot `i` with the receiver's answer `res`: true if the
/// send was cancelled.
fn settle(st: &mut State, i: usize, res: nemesis::Result<nemesis::Status>) -> bool {
    if matches!(res, Err(nemesis::Error::Cancelled)) {
        cancelled(st, i);
        return true;
    }
    // A receive had matched it (or the receiver is gone): the send takes its normal course.
    if let Some(req) = st.reqs.at_mut(i) {
        req.cancel = None;
    }
    false
}

/// Takes the result of request slot `i`'s Endpoint request if it completed, without waiting:
/// true if the request is complete (`Done`) or inactive.
pub fn poll(st: &mut State, i: usize) -> Res<bool> {
    let Some(req) = st.reqs.at(i) else { return Err(bad_request(-1)) };
    if let Some(a) = req.cancel {
        let Some(ep) = st.ep.as_mut() else { return Err(not_running(st.phase)) };
        match ep.test(a) {
            Ok(None) => return Ok(false),
            Ok(Some(s)) => {
                if settle(st, i, Ok(s)) {
                    return Ok(true);
                }
            }
            Err(e) => {
                if settle(st, i, Err(e)) {
                    return Ok(true);
                }
            }
        }
    }
    let r = match st.reqs.at(i).map(|q| &q.state) {
        Some(ReqState::Pending(r)) => *r,
        Some(ReqState::Coll(_)) => return Ok(advance_coll(st, i)?.is_none()),
        Some(ReqState::Compound) => return super::compound::poll(st, i),
        // Not reached: calls that test post the deferred receives first (`Access::enter`).
        Some(ReqState::Deferred(_)) => return Ok(false),
        _ => return Ok(true),
    };
    let Some(ep) = st.ep.as_mut() else { return Err(not_running(st.phase)) };
    let res = match ep.test(r) {
        Ok(None) => return Ok(false),
        Ok(Some(s)) => Ok(s),
        Err(e) => Err(e),
    };
    finish(st, i, res);
    Ok(true)
}

/// Advances the schedule of collective request slot `i`: `None` once complete (its state then
/// `Done`), else the Endpoint requests it waits for.
fn advance_coll(st: &mut State, i: usize) -> Res<Option<Vec<nemesis::Request>>> {
    let phase = st.phase;
    let State { ep, reqs, contexts, .. } = st;
    let Some(ep) = ep.as_mut() else { return Err(not_running(phase)) };
    let Some(req) = reqs.at_mut(i) else { return Err(bad_request(-1)) };
    let ReqState::Coll(s) = &mut req.state else { return Ok(None) };
    match s.advance(ep, contexts) {
        Some(done) => {
            let ReqState::Coll(mut s) = std::mem::replace(&mut req.state, ReqState::Inactive) else {
                return Ok(None);
            };
            let done = crate::coll::nbc::finished(st, &mut s, done);
            if let Some(req) = st.reqs.at_mut(i) {
                req.state = ReqState::Done(done);
            }
            Ok(None)
        }
        None => Ok(Some(s.pending())),
    }
}

/// [`advance_coll`], also running the user's reduction operations the schedule's rounds reach.
/// Reentrancy: an operation may call MPI, so it runs with the schedule taken out of the request
/// table (a placeholder that never advances stands in: a nested call, or another thread under
/// `MPI_THREAD_MULTIPLE`, sees the request still in progress) and no borrow of the state live;
/// the schedule goes back into slot `i`, which stays its own (only its completion frees it).
pub(crate) fn advance_coll_user(acc: &mut Access, i: usize) -> Res<Option<Vec<nemesis::Request>>> {
    loop {
        let pending = advance_coll(acc.st(), i)?;
        let Some(Req { state: ReqState::Coll(s), .. }) = acc.st().reqs.at_mut(i) else { return Ok(pending) };
        if pending.is_none() || !s.wants_user_op() {
            return Ok(pending);
        }
        let mut taken = std::mem::replace(s, Box::new(crate::coll::nbc::Sched::busy()));
        taken.run_user_op();
        match acc.st().reqs.at_mut(i) {
            Some(Req { state: ReqState::Coll(s), .. }) if s.is_busy() => *s = taken,
            // Not reached (the placeholder never completes, so the slot stays). Its transfers may
            // still write into its buffers: never freed.
            _ => {
                Box::leak(taken);
                return Ok(None);
            }
        }
    }
}

/// Waits until collective request slot `i` is complete, advancing every schedule in flight
/// meanwhile and waiting for any of their transfers: one schedule may need another to move first
/// (an `MPI_Comm_idup` whose agreement waits for an earlier one), and a peer waiting for another
/// schedule of this process must see it move.
fn wait_coll(acc: &mut Access, i: usize) -> Res<()> {
    if crate::coll::nbc::is_ordered(acc.st()) {
        crate::coll::nbc::complete_in_order(acc);
    }
    let mut spins = 0;
    loop {
        advance_colls(acc);
        if advance_coll_user(acc, i)?.is_none() {
            return Ok(());
        }
        let st = acc.st();
        let mut pending = Vec::new();
        // A schedule with nothing in flight waits to be advanced again (an agreement's round
        // that must retry): blocking on the others' transfers would not advance it, and a peer
        // may wait for the round it posts next.
        let mut ready = false;
        for &k in &st.colls {
            if let Some(Req { state: ReqState::Coll(s), .. }) = st.reqs.at(k) {
                let p = s.pending();
                ready |= p.is_empty();
                pending.extend(p.into_iter().map(|r| (r, k)));
            }
        }
        if acc.threaded() || ready || pending.is_empty() {
            acc.pause(&mut spins);
            if !acc.threaded() {
                acc.ep()?.progress().map_err(|e| Fail::endpoint(0, e))?;
            }
            continue;
        }
        let reqs: Vec<nemesis::Request> = pending.iter().map(|p| p.0).collect();
        let (j, res) = acc.ep()?.wait_any(&reqs).map_err(|e| Fail::endpoint(0, e))?;
        if let Some(Req { state: ReqState::Coll(s), .. }) = acc.st().reqs.at_mut(pending[j].1) {
            s.took(pending[j].0, res);
        }
    }
}

/// Waits until request slot `i` is complete or inactive.
pub fn wait_slot(acc: &mut Access, i: usize) -> Res<()> {
    match acc.st().reqs.at(i).map(|q| &q.state) {
        Some(ReqState::Coll(_)) => return wait_coll(acc, i),
        Some(ReqState::Compound) => return super::compound::wait(acc, i),
        _ => {}
    }
    let st = acc.st();
    let Some(req) = st.reqs.at(i) else { return Err(bad_request(-1)) };
    if let Some(a) = req.cancel {
        let res = acc.ep_wait(a)?;
        if settle(acc.st(), i, res) {
            return Ok(());
        }
    }
    let st = acc.st();
    let Some(ReqState::Pending(r)) = st.reqs.at(i).map(|q| &q.state) else { return Ok(()) };
    let r = *r;
    let res = acc.ep_wait(r)?;
    finish(acc.st(), i, res);
    Ok(())
}

/// Reports complete request slot `i`: its communicator and result. A persistent request becomes
/// inactive (its handle stays valid), any other is freed. `None` if it is still pending.
pub fn take(st: &mut State, i: usize) -> Option<(u32, Completion, bool)> {
    let req = st.reqs.at_mut(i)?;
    let persistent = req.is_persistent();
    let done = match std::mem::replace(&mut req.state, ReqState::Inactive) {
        ReqState::Done(d) => d,
        ReqState::Inactive => Completion::empty(),
        ReqState::Compound if let Some(d) = super::compound::take_result(req) => d,
        p @ (ReqState::Pending(_) | ReqState::Coll(_) | ReqState::Deferred(_) | ReqState::Compound) => {
            req.state = p;
            return None;
        }
    };
    let comm = req.comm;
    if !persistent {
        crate::grequest::discard(st, i);
    }
    Some((comm, done, persistent))
}

/// Frees the requests the user freed while active (`MPI_Request_free`) that have completed since.
pub fn reap(st: &mut State) {
    if st.freed.is_empty() {
        return;
    }
    let mut k = 0;
    while k < st.freed.len() {
        let i = st.freed[k];
        if poll(st, i).unwrap_or(true) {
            crate::grequest::discard(st, i);
            st.freed.swap_remove(k);
        } else {
            k += 1;
        }
    }
}

/// The slot of handle `h`, a live request.
fn slot(st: &State, h: abi::Request) -> Res<usize> {
    match st.reqs.index(h) {
        Some(i) if !st.reqs.at(i).is_some_and(|r| r.freed) => Ok(i),
        _ => Err(bad_request(h)),
    }
}

/// True if handle `h` names a request that can complete: not null, not an inactive persistent one.
fn is_active(st: &State, h: abi::Request) -> Res<bool> {
    if h == REQUEST_NULL {
        return Ok(false);
    }
    let i = slot(st, h)?;
    Ok(!matches!(st.reqs.at(i), Some(Req { state: ReqState::Inactive, .. })))
}

fn check_running(acc: &mut Access) -> Res<()> {
    let st = acc.st();
    if st.ep.is_none() {
        return Err(not_running(st.phase));
    }
    reap(st);
    if crate::coll::nbc::is_ordered(acc.st()) {
        crate::coll::nbc::complete_in_order(acc);
    }
    advance_colls(acc);
    // The `free_fn` of generalized requests reaped just now.
    crate::grequest::run_frees(acc)
}

/// Advances every non-blocking collective in flight, so that testing or waiting for any request
/// moves them all (their rounds overlap whatever the program waits for).
///
/// Takes the [`Access`], not the state: the user's operations run meanwhile may call MPI (see
/// `advance_coll_user`), even start or complete collectives, so the list is read afresh at
/// each step and a finished schedule's slot removed by value.
pub fn advance_colls(acc: &mut Access) {
    // Under fault tolerance only at the program's completion calls (`coll/nbc/ordered.rs`), not
    // in the pauses of waits, which come at timing-dependent points.
    if crate::coll::nbc::is_ordered(acc.st()) {
        return;
    }
    let mut k = 0;
    while let Some(&i) = acc.st().colls.get(k) {
        match advance_coll_user(acc, i) {
            Ok(Some(_)) => k += 1,
            _ => {
                let colls = &mut acc.st().colls;
                if let Some(p) = colls.iter().position(|&x| x == i) {
                    colls.swap_remove(p);
                }
            }
        }
    }
}

/// Reports the result of slot `i` (complete) through `request` and `status`.
///
/// # Safety
/// `request` writable; `status` as for [`put_completion`].
unsafe fn report_one(st: &mut State, i: usize, request: *mut abi::Request, status: *mut Status) -> Res<()> {
    let Some((comm, done, persistent)) = take(st, i) else { return Err(bad_request(-1)) };
    // SAFETY: the caller's contract.
    unsafe {
        if !persistent {
            *request = REQUEST_NULL;
        }
        put_completion(status, &done);
    }
    if done.code != abi::SUCCESS {
        return Err(failure(comm, done));
    }
    Ok(())
}

/// `MPI_Wait`.
///
/// # Safety
/// `request` valid for reads and writes; `status` as for [`put_completion`].
pub unsafe fn wait(acc: &mut Access, request: *mut abi::Request, status: *mut Status) -> Res<()> {
    check_running(acc)?;
    if request.is_null() {
        return Err(null_arg(None, "null request pointer"));
    }
    // SAFETY: checked non-null; MPI's contract.
    let h = unsafe { *request };
    if h == REQUEST_NULL {
        // SAFETY: MPI's contract on `status`.
        unsafe { put_completion(status, &Completion::empty()) };
        return Ok(());
    }
    let i = slot(acc.st(), h)?;
    wait_slot(acc, i)?;
    // SAFETY: MPI's contract.
    let r = unsafe { report_one(acc.st(), i, request, status) };
    r.and(crate::grequest::run_frees(acc))
}

/// `MPI_Test`.
///
/// # Safety
/// `request`, `flag` valid; `status` as for [`put_completion`].
pub unsafe fn test(acc: &mut Access, request: *mut abi::Request, flag: *mut c_int, status: *mut Status) -> Res<()> {
    check_running(acc)?;
    if request.is_null() || flag.is_null() {
        return Err(null_arg(None, "null request or flag pointer"));
    }
    // SAFETY: checked non-null; MPI's contract.
    let h = unsafe { *request };
    if h == REQUEST_NULL {
        // SAFETY: MPI's contract.
        unsafe {
            *flag = 1;
            put_completion(status, &Completion::empty());
        }
        return Ok(());
    }
    let i = slot(acc.st(), h)?;
    crate::grequest::settle(acc, i)?;
    let st = acc.st();
    let complete = poll(st, i)?;
    // SAFETY: checked non-null.
    unsafe { *flag = c_int::from(complete) };
    if !complete {
        return Ok(());
    }
    // SAFETY: MPI's contract.
    let r = unsafe { report_one(st, i, request, status) };
    r.and(crate::grequest::run_frees(acc))
}

/// `MPI_Cancel`: a receive not yet matched is withdrawn at once; a send asks its receiver to drop
/// the message if no receive has matched it (the answer comes with the receiver's progress, and
/// the request's completion waits for it). Either way the request still completes through
/// `MPI_Wait`/`MPI_Test`, and `MPI_Test_cancelled` tells which happened.
///
/// # Safety
/// `request` readable.
pub unsafe fn cancel(acc: &mut Access, request: *const abi::Request) -> Res<()> {
    check_running(acc)?;
    if request.is_null() {
        return Err(null_arg(None, "null request pointer"));
    }
    // SAFETY: checked non-null; MPI's contract.
    let h = unsafe { *request };
    let i = slot(acc.st(), h)?;
    if let Some(Req { ext: Some(_), .. }) = acc.st().reqs.at(i) {
        // A generalized request's `cancel_fn`; the parts of a compound one run their course.
        return crate::grequest::cancel(acc, i);
    }
    let st = acc.st();
    let State { ep, reqs, .. } = st;
    let (Some(ep), Some(req)) = (ep.as_mut(), reqs.at_mut(i)) else { return Err(bad_request(h)) };
    if req.coll {
        return Err(Fail::new(
            abi::ERR_REQUEST,
            Some(req.comm as usize),
            Why::Arg("MPI_Cancel on a non-blocking collective's request (erroneous in MPI-3.1)"),
        ));
    }
    match (&req.state, req.recv) {
        (ReqState::Coll(_), _) => Err(Fail::new(
            abi::ERR_REQUEST,
            Some(req.comm as usize),
            Why::Arg("MPI_Cancel on a non-blocking collective's request (erroneous in MPI-3.1)"),
        )),
        (ReqState::Inactive, _) => {
            Err(Fail::new(abi::ERR_REQUEST, Some(req.comm as usize), Why::Arg("MPI_Cancel on an inactive request")))
        }
        (ReqState::Pending(r), true) => {
            ep.cancel_recv(*r).map_err(|e| Fail::endpoint(req.comm as usize, e))?;
            Ok(())
        }
        (_, false) => {
            if let (Some(id), None) = (req.sent, req.cancel) {
                req.cancel = Some(ep.cancel_send(id).map_err(|e| Fail::endpoint(req.comm as usize, e))?);
            }
            Ok(())
        }
        // A receive already complete: nothing to cancel.
        (ReqState::Done(_) | ReqState::Compound, true) => Ok(()),
        // Every call but the fast ones posts the deferred receives first (`Access::enter`).
        (ReqState::Deferred(_), true) => Err(Fail::new(
            abi::ERR_INTERN,
            Some(req.comm as usize),
            Why::Arg("MPI_Cancel found a deferred receive not posted"),
        )),
    }
}

/// `MPI_Request_free`: an inactive or complete request goes at once; an active one when it
/// completes, unreported.
///
/// # Safety
/// `request` valid for reads and writes.
pub unsafe fn free(acc: &mut Access, request: *mut abi::Request) -> Res<()> {
    check_running(acc)?;
    if request.is_null() {
        return Err(null_arg(None, "null request pointer"));
    }
    // SAFETY: checked non-null; MPI's contract.
    let h = unsafe { *request };
    let i = slot(acc.st(), h)?;
    crate::grequest::settle(acc, i)?;
    let st = acc.st();
    if poll(st, i)? {
        crate::grequest::discard(st, i);
    } else if let Some(r) = st.reqs.at_mut(i) {
        r.freed = true;
        st.freed.push(i);
    }
    // SAFETY: as above.
    unsafe { *request = REQUEST_NULL };
    crate::grequest::run_frees(acc)
}
