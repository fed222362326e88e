//! Looking at requests without completing them: `MPI_Request_get_status` and its MPI-4.1 array
//! forms `MPI_Request_get_status_all`, `_any`, `_some`. A complete request stays allocated (and a
//! persistent one active) until `MPI_Wait`/`MPI_Test` or `MPI_Request_free`; a generalized one's
//! `query_fn` fills its status.

use std::ffi::c_int;

use super::{check_running, is_active, poll, slot};
use crate::abi::{self, REQUEST_NULL, Status};
use crate::error::{Fail, Res, Why};
use crate::p2p::{null_arg, put_completion, wants};
use crate::request::{Completion, State as ReqState};
use crate::state::Access;

/// The completion of request `h` if it is complete (the empty one for a null or inactive
/// request), without taking it.
fn peek(acc: &mut Access, h: abi::Request) -> Res<Option<Completion>> {
    if h == REQUEST_NULL {
        return Ok(Some(Completion::empty()));
    }
    let i = slot(acc.st(), h)?;
    crate::grequest::settle(acc, i)?;
    let st = acc.st();
    if !poll(st, i)? {
        return Ok(None);
    }
    let req = st.reqs.at(i);
    let done = match req.map(|r| &r.state) {
        Some(ReqState::Done(d)) => Some(d),
        Some(ReqState::Compound) => req.and_then(crate::p2p::compound::result),
        _ => None,
    };
    Ok(Some(match done {
        Some(d) => {
            Completion { source: d.source, tag: d.tag, count: d.count, code: d.code, why: None, cancelled: d.cancelled }
        }
        _ => Completion::empty(),
    }))
}

/// The complete active requests among `hs` (the first only, with `first_only`): their indices and
/// completions; and whether any request is active at all.
fn complete_active(acc: &mut Access, hs: &[abi::Request], first_only: bool) -> Res<(Vec<(usize, Completion)>, bool)> {
    let mut done = Vec::new();
    let mut any_active = false;
    for (k, &h) in hs.iter().enumerate() {
        if !is_active(acc.st(), h)? {
            continue;
        }
        any_active = true;
        if let Some(d) = peek(acc, h)? {
            done.push((k, d));
            if first_only {
                break;
            }
        }
    }
    Ok((done, any_active))
}

/// Writes `d` to `status` (null, ignored, or writable), with `MPI_ERROR`.
///
/// # Safety
/// As for [`put_completion`].
unsafe fn put_with_error(status: *mut Status, d: &Completion) {
    // SAFETY: the caller's contract.
    unsafe {
        put_completion(status, d);
        if wants(status) {
            (*status).error = d.code;
        }
    }
}

/// The handles of an array form, checked.
///
/// # Safety
/// `reqs` readable for `count` handles.
unsafe fn handles<'a>(count: c_int, reqs: *const abi::Request) -> Res<&'a [abi::Request]> {
    if count < 0 {
        return Err(Fail::new(abi::ERR_COUNT, None, Why::Count(count)));
    }
    if count == 0 {
        return Ok(&[]);
    }
    if reqs.is_null() {
        return Err(null_arg(None, "null request array"));
    }
    // SAFETY: the caller's contract.
    Ok(unsafe { std::slice::from_raw_parts(reqs, count as usize) })
}

/// `MPI_Request_get_status`: whether the request is complete, and its status, without freeing it.
///
/// # Safety
/// `flag` writable; `status` as for [`put_completion`].
pub unsafe fn get_status(acc: &mut Access, h: abi::Request, flag: *mut c_int, status: *mut Status) -> Res<()> {
    check_running(acc)?;
    if flag.is_null() {
        return Err(null_arg(None, "null flag pointer"));
    }
    let done = peek(acc, h)?;
    // SAFETY: checked non-null; MPI's contract on `status`.
    unsafe {
        *flag = c_int::from(done.is_some());
        if let Some(d) = done {
            put_with_error(status, &d);
        }
    }
    Ok(())
}

/// `MPI_Request_get_status_all`: true if every request is complete, then every status.
///
/// # Safety
/// `reqs` readable for `count` handles; `flag` writable; `statuses` null, ignored or writable
/// for `count`.
pub unsafe fn get_status_all(
    acc: &mut Access,
    count: c_int,
    reqs: *const abi::Request,
    flag: *mut c_int,
    statuses: *mut Status,
) -> Res<()> {
    check_running(acc)?;
    // SAFETY: the caller's contract.
    let hs = unsafe { handles(count, reqs) }?;
    if flag.is_null() {
        return Err(null_arg(None, "null flag pointer"));
    }
    let mut all = Vec::with_capacity(hs.len());
    for &h in hs {
        match peek(acc, h)? {
            Some(d) => all.push(d),
            None => break,
        }
    }
    let complete = all.len() == hs.len();
    // SAFETY: checked non-null; the caller's contract on `statuses`.
    unsafe {
        *flag = c_int::from(complete);
        if complete && wants(statuses) {
            for (k, d) in all.iter().enumerate() {
                put_with_error(statuses.add(k), d);
            }
        }
    }
    Ok(())
}

/// `MPI_Request_get_status_any`: the first complete active request's index and status;
/// `MPI_UNDEFINED` (flag true) if none is active.
///
/// # Safety
/// `reqs` readable for `count` handles; `index`, `flag` writable; `status` as for
/// [`put_completion`].
pub unsafe fn get_status_any(
    acc: &mut Access,
    count: c_int,
    reqs: *const abi::Request,
    index: *mut c_int,
    flag: *mut c_int,
    status: *mut Status,
) -> Res<()> {
    check_running(acc)?;
    // SAFETY: the caller's contract.
    let hs = unsafe { handles(count, reqs) }?;
    if index.is_null() || flag.is_null() {
        return Err(null_arg(None, "null index or flag pointer"));
    }
    let (done, any_active) = complete_active(acc, hs, true)?;
    // SAFETY: checked non-null; the caller's contract.
    unsafe {
        match done.first() {
            Some((k, d)) => {
                *index = *k as c_int;
                *flag = 1;
                put_with_error(status, d);
            }
            None => {
                *index = abi::UNDEFINED;
                *flag = c_int::from(!any_active);
                if !any_active {
                    put_with_error(status, &Completion::empty());
                }
            }
        }
    }
    Ok(())
}

/// `MPI_Request_get_status_some`: every complete active request's index and status;
/// `MPI_UNDEFINED` if none is active.
///
/// # Safety
/// `reqs` readable for `count` handles; `outcount` writable; `indices` and `statuses` (null,
/// ignored or) writable for `count`.
pub unsafe fn get_status_some(
    acc: &mut Access,
    count: c_int,
    reqs: *const abi::Request,
    outcount: *mut c_int,
    indices: *mut c_int,
    statuses: *mut Status,
) -> Res<()> {
    check_running(acc)?;
    // SAFETY: the caller's contract.
    let hs = unsafe { handles(count, reqs) }?;
    if outcount.is_null() || (count > 0 && indices.is_null()) {
        return Err(null_arg(None, "null outcount or indices pointer"));
    }
    let (done, any_active) = complete_active(acc, hs, false)?;
    for (n, (k, d)) in done.iter().enumerate() {
        // SAFETY: `indices` and `statuses` hold `count > n` entries (the caller's contract).
        unsafe {
            *indices.add(n) = *k as c_int;
            if wants(statuses) {
                put_with_error(statuses.add(n), d);
            }
        }
    }
    // SAFETY: checked non-null.
    unsafe { *outcount = if any_active { done.len() as c_int } else { abi::UNDEFINED } };
    Ok(())
}
