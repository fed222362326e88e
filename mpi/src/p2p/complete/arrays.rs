//! Completion of arrays of requests: `MPI_Waitall`, `MPI_Testall`, `MPI_Waitany`, `MPI_Testany`,
//! `MPI_Waitsome`, `MPI_Testsome`.

use std::ffi::c_int;

use super::{bad_request, check_running, finish, is_active, poll, report_one, slot, take, wait_slot};
use crate::abi::{self, REQUEST_NULL, Status};
use crate::error::{Fail, Res, Why};
use crate::p2p::{null_arg, put_completion, wants};
use crate::request::{Completion, Req, State as ReqState};
use crate::state::{Access, State};

/// The requests of a multiple-completion call.
///
/// # Safety
/// `reqs` valid for `count` elements, or null with `count` 0.
unsafe fn request_array<'a>(reqs: *mut abi::Request, count: c_int) -> Res<&'a mut [abi::Request]> {
    if count < 0 {
        return Err(Fail::new(abi::ERR_COUNT, None, Why::Count(count)));
    }
    if count == 0 {
        return Ok(&mut []);
    }
    if reqs.is_null() {
        return Err(null_arg(None, "null request array"));
    }
    // SAFETY: the caller's contract.
    Ok(unsafe { std::slice::from_raw_parts_mut(reqs, count as usize) })
}

/// Writes status `k` of a multiple-completion call (with `MPI_ERROR`).
///
/// # Safety
/// `statuses` is null, `MPI_STATUSES_IGNORE`, or valid for more than `k` elements.
unsafe fn put_status_at(statuses: *mut Status, k: usize, s: Status) {
    if wants(statuses) {
        // SAFETY: the caller's contract.
        unsafe { *statuses.add(k) = s };
    }
}

/// Reports complete slot `i` as element `k` of a multiple-completion call; its failure, if any.
///
/// # Safety
/// `hs[k]` is the handle of slot `i`; `statuses` as for [`put_status_at`].
unsafe fn report_at(
    st: &mut State,
    hs: &mut [abi::Request],
    k: usize,
    i: usize,
    statuses: *mut Status,
    out: usize,
) -> Option<(usize, u32, c_int)> {
    let (comm, done, persistent) = take(st, i)?;
    if !persistent {
        hs[k] = REQUEST_NULL;
    }
    // SAFETY: the caller's contract.
    unsafe { put_status_at(statuses, out, done.status()) };
    (done.code != abi::SUCCESS).then_some((k, comm, done.code))
}

fn in_status(first: Option<(usize, u32, c_int)>) -> Res<()> {
    match first {
        None => Ok(()),
        Some((k, comm, code)) => {
            Err(Fail::new(abi::ERR_IN_STATUS, Some(comm as usize), Why::InStatus { index: k, code }))
        }
    }
}

/// `MPI_Waitall`: completes every request, in order (the Endpoint progresses all of them
/// meanwhile, so they may complete in any order); `MPI_ERR_IN_STATUS` if any failed.
///
/// # Safety
/// MPI's contract on the arrays.
pub unsafe fn waitall(acc: &mut Access, count: c_int, reqs: *mut abi::Request, statuses: *mut Status) -> Res<()> {
    check_running(acc)?;
    // SAFETY: MPI's contract.
    let hs = unsafe { request_array(reqs, count) }?;
    for &h in hs.iter() {
        if h != REQUEST_NULL {
            slot(acc.st(), h)?;
        }
    }
    let mut first = None;
    for k in 0..hs.len() {
        if hs[k] == REQUEST_NULL {
            // SAFETY: MPI's contract: `count` statuses or the ignore sentinel.
            unsafe { put_status_at(statuses, k, Completion::empty().status()) };
            continue;
        }
        let i = slot(acc.st(), hs[k])?;
        wait_slot(acc, i)?;
        // SAFETY: `hs[k]` names slot `i`; MPI's contract on `statuses`.
        let failed = unsafe { report_at(acc.st(), hs, k, i, statuses, k) };
        first = first.or(failed);
    }
    in_status(first).and(crate::grequest::run_frees(acc))
}

/// `MPI_Waitall`: the fast path, run on the state itself when calls are not locked
/// (`state::call_fast`), when every request is a plain point-to-point one as the fast starts
/// ([`crate::p2p::start::istart_fast`]) make them (pending, not persistent, typed, cancelled or freed)
/// and nothing else needs the call (no non-blocking collective to advance, no freed request to
/// reap): each is waited for in the Endpoint, reported and freed without the general path's
/// steps. A failed one is reported as [`waitall`] does. `None` (nothing done) for anything else.
///
/// # Safety
/// MPI's contract on the arrays.
#[inline(always)]
pub unsafe fn waitall_fast(
    st: &mut State,
    count: c_int,
    reqs: *mut abi::Request,
    statuses: *mut Status,
) -> Option<Res<()>> {
    if count <= 0 || reqs.is_null() || !st.freed.is_empty() || !st.colls.is_empty() || st.ep.is_none() {
        return None;
    }
    // SAFETY: MPI's contract: `count` handles at `reqs` (non-null).
    let hs = unsafe { std::slice::from_raw_parts_mut(reqs, count as usize) };
    for &h in hs.iter() {
        let r = st.reqs.get(h)?;
        let plain = matches!(r.state, ReqState::Pending(_) | ReqState::Deferred(_) | ReqState::Done(_))
            && !r.freed
            && r.persistent.is_none()
            && r.typed.is_none()
            && r.cancel.is_none();
        if !plain {
            return None;
        }
    }
    let mut first = None;
    for k in 0..hs.len() {
        // A handle given twice is stale the second time, as on the general path.
        let Some(i) = st.reqs.index(hs[k]) else { return Some(Err(bad_request(hs[k]))) };
        if let Some(Req { state: ReqState::Deferred(d), .. }) = st.reqs.at(i)
            && st.deferred.front() == Some(&i)
        {
            // The oldest deferred receive: its message straight from the fastbox once it waits
            // there (within a wait's spin) and if nothing could match before it.
            let d = *d;
            // SAFETY: checked `Some` above; nothing since ended the Endpoint.
            let ep = unsafe { st.ep.as_mut().unwrap_unchecked() };
            // SAFETY: MPI's contract on the buffer of the `MPI_Irecv` that deferred it.
            if let Some((n, t)) = unsafe { ep.try_recv_link_spin(d.buf, d.len, d.from, d.tag, d.ctx) } {
                st.undefer_oldest();
                // SAFETY: MPI's contract on `statuses`.
                unsafe { put_status_at(statuses, k, Status::new(d.source, t, abi::SUCCESS, i64::from(n))) };
                st.reqs.remove_at(i);
                hs[k] = REQUEST_NULL;
                continue;
            }
        }
        // Complete already: a send that went out whole at once (`Endpoint::isend_now`). Else
        // this one may wait: every deferred receive is posted first (see `State::deferred`); one
        // the Endpoint refused is complete then.
        // SAFETY: `hs[k]` names slot `i`; MPI's contract on `statuses`.
        if unsafe { report_done(st, hs, k, i, statuses, &mut first) } {
            continue;
        }
        st.post_deferred();
        // SAFETY: as above.
        if unsafe { report_done(st, hs, k, i, statuses, &mut first) } {
            continue;
        }
        let Some(Req { state: ReqState::Pending(r), comm, .. }) = st.reqs.at(i) else {
            return Some(Err(bad_request(hs[k])));
        };
        let (r, ci) = (*r, *comm as usize);
        // SAFETY: checked `Some` above; nothing since ended the Endpoint.
        let ep = unsafe { st.ep.as_mut().unwrap_unchecked() };
        match ep.wait(r) {
            Ok(s) => {
                let source = st.comms.get(ci).map_or(-1, |c| c.rank_of_world(s.source));
                // SAFETY: MPI's contract on `statuses`.
                unsafe { put_status_at(statuses, k, Status::new(source, s.tag, abi::SUCCESS, s.len as i64)) };
                st.reqs.remove_at(i);
                hs[k] = REQUEST_NULL;
            }
            Err(e) => {
                finish(st, i, Err(e));
                // SAFETY: `hs[k]` names slot `i`; MPI's contract on `statuses`.
                let failed = unsafe { report_at(st, hs, k, i, statuses, k) };
                first = first.or(failed);
            }
        }
    }
    Some(in_status(first))
}

/// `MPI_Waitall`'s fast path on request slot `i` (handle `hs[k]`, not persistent): if it is
/// complete, reports it in `statuses[k]` and frees it (a failure goes to `first`), and returns
/// true.
///
/// # Safety
/// As for [`report_at`].
#[inline(always)]
unsafe fn report_done(
    st: &mut State,
    hs: &mut [abi::Request],
    k: usize,
    i: usize,
    statuses: *mut Status,
    first: &mut Option<(usize, u32, c_int)>,
) -> bool {
    let Some(Req { state: ReqState::Done(d), .. }) = st.reqs.at(i) else { return false };
    if d.code == abi::SUCCESS {
        // SAFETY: the caller's contract.
        unsafe { put_status_at(statuses, k, d.status()) };
        st.reqs.remove_at(i);
        hs[k] = REQUEST_NULL;
    } else {
        // SAFETY: the caller's contract.
        let failed = unsafe { report_at(st, hs, k, i, statuses, k) };
        *first = first.or(failed);
    }
    true
}

/// `MPI_Testall`: completes all the requests if all are complete, else none (their results,
/// if some completed, are kept for the call that completes them).
///
/// # Safety
/// MPI's contract on the arrays and `flag`.
pub unsafe fn testall(
    acc: &mut Access,
    count: c_int,
    reqs: *mut abi::Request,
    flag: *mut c_int,
    statuses: *mut Status,
) -> Res<()> {
    check_running(acc)?;
    if flag.is_null() {
        return Err(null_arg(None, "null flag pointer"));
    }
    // SAFETY: MPI's contract.
    let hs = unsafe { request_array(reqs, count) }?;
    crate::grequest::settle_all(acc, hs)?;
    let st = acc.st();
    let mut all = true;
    for &h in hs.iter() {
        if h != REQUEST_NULL {
            let i = slot(st, h)?;
            all &= poll(st, i)?;
        }
    }
    // SAFETY: checked non-null.
    unsafe { *flag = c_int::from(all) };
    if !all {
        return Ok(());
    }
    // SAFETY: MPI's contract on `statuses`; every request is complete, so nothing waits.
    unsafe { waitall(acc, count, reqs, statuses) }
}

/// The complete requests among `hs` (polling each): their indices in `hs` and slots, and
/// whether any is active at all.
fn complete_ones(st: &mut State, hs: &[abi::Request], first_only: bool) -> Res<(Vec<(usize, usize)>, bool)> {
    let mut done = Vec::new();
    let mut any_active = false;
    for (k, &h) in hs.iter().enumerate() {
        if !is_active(st, h)? {
            continue;
        }
        any_active = true;
        let i = slot(st, h)?;
        if poll(st, i)? {
            done.push((k, i));
            if first_only {
                break;
            }
        }
    }
    Ok((done, any_active))
}

/// Blocks until at least one of the active requests among `hs` is complete.
fn wait_one_of(acc: &mut Access, hs: &[abi::Request]) -> Res<()> {
    let st = acc.st();
    let cancelling = hs.iter().any(|&h| {
        st.reqs.get(h).is_some_and(|r| r.cancel.is_some() || matches!(r.state, ReqState::Coll(_) | ReqState::Compound))
    });
    if cancelling || !acc.may_block() {
        // Answers of the receivers (or a collective's rounds) are among what completes them:
        // poll the whole progress (the pause advances the collectives in flight).
        let mut spins = 0;
        loop {
            crate::grequest::settle_all(acc, hs)?;
            if !complete_ones(acc.st(), hs, true)?.0.is_empty() {
                return Ok(());
            }
            if !acc.threaded() {
                acc.ep()?.progress().map_err(|e| Fail::endpoint(0, e))?;
            }
            acc.pause(&mut spins);
        }
    }
    let st = acc.st();
    let mut pending: Vec<(usize, nemesis::Request)> = Vec::new();
    for &h in hs {
        if is_active(st, h)? {
            let i = slot(st, h)?;
            match st.reqs.at(i).map(|r| &r.state) {
                Some(ReqState::Pending(r)) => pending.push((i, *r)),
                _ => return Ok(()),
            }
        }
    }
    if pending.is_empty() {
        return Ok(());
    }
    let eps: Vec<nemesis::Request> = pending.iter().map(|p| p.1).collect();
    let (j, res) = acc.ep()?.wait_any(&eps).map_err(|e| Fail::endpoint(0, e))?;
    finish(acc.st(), pending[j].0, res);
    Ok(())
}

/// `MPI_Waitany` (`block`) and `MPI_Testany`.
///
/// # Safety
/// MPI's contract on the array, `index`, `flag` (null for `MPI_Waitany`) and `status`.
pub unsafe fn any(
    acc: &mut Access,
    count: c_int,
    reqs: *mut abi::Request,
    index: *mut c_int,
    flag: *mut c_int,
    status: *mut Status,
    block: bool,
) -> Res<()> {
    check_running(acc)?;
    if index.is_null() || (!block && flag.is_null()) {
        return Err(null_arg(None, "null index or flag pointer"));
    }
    // SAFETY: MPI's contract.
    let hs = unsafe { request_array(reqs, count) }?;
    crate::grequest::settle_all(acc, hs)?;
    let (mut done, active) = complete_ones(acc.st(), hs, true)?;
    if !active {
        // SAFETY: MPI's contract.
        unsafe {
            *index = abi::UNDEFINED;
            if !block {
                *flag = 1;
            }
            put_completion(status, &Completion::empty());
        }
        return Ok(());
    }
    if done.is_empty() && block {
        wait_one_of(acc, hs)?;
        done = complete_ones(acc.st(), hs, true)?.0;
    }
    let Some(&(k, i)) = done.first() else {
        // SAFETY: MPI's contract (`flag` non-null: not blocking).
        unsafe {
            *flag = 0;
            *index = abi::UNDEFINED;
        }
        return Ok(());
    };
    // SAFETY: MPI's contract.
    let r = unsafe {
        *index = k as c_int;
        if !block {
            *flag = 1;
        }
        report_one(acc.st(), i, &mut hs[k], status)
    };
    r.and(crate::grequest::run_frees(acc))
}

/// `MPI_Waitsome` (`block`) and `MPI_Testsome`: reports every complete request.
///
/// # Safety
/// MPI's contract on the arrays and `outcount`.
pub unsafe fn some(
    acc: &mut Access,
    count: c_int,
    reqs: *mut abi::Request,
    outcount: *mut c_int,
    indices: *mut c_int,
    statuses: *mut Status,
    block: bool,
) -> Res<()> {
    check_running(acc)?;
    if outcount.is_null() || (count > 0 && indices.is_null()) {
        return Err(null_arg(None, "null outcount or indices pointer"));
    }
    // SAFETY: MPI's contract.
    let hs = unsafe { request_array(reqs, count) }?;
    crate::grequest::settle_all(acc, hs)?;
    let (mut done, active) = complete_ones(acc.st(), hs, false)?;
    if !active {
        // SAFETY: checked non-null.
        unsafe { *outcount = abi::UNDEFINED };
        return Ok(());
    }
    if done.is_empty() && block {
        wait_one_of(acc, hs)?;
        done = complete_ones(acc.st(), hs, false)?.0;
    }
    let st = acc.st();
    let mut first = None;
    for (n, &(k, i)) in done.iter().enumerate() {
        // SAFETY: `indices` and `statuses` hold `count >= done.len()` entries (MPI's contract).
        unsafe {
            *indices.add(n) = k as c_int;
            let failed = report_at(st, hs, k, i, statuses, n);
            first = first.or(failed);
        }
    }
    // SAFETY: checked non-null.
    unsafe { *outcount = done.len() as c_int };
    in_status(first).and(crate::grequest::run_frees(acc))
}
