//! The fused paths of `MPI_Send` and `MPI_Recv`: an admitted call of a fast-path communicator
//! goes straight into or out of the peer's fastbox through its link (`nemesis::Link`).

use std::ffi::{c_int, c_void};
use std::ptr::NonNull;

use super::{admit, out_bytes, put_status, recv_failed};
use crate::abi::{self, Datatype, Status};
use crate::comm::index_of;
use crate::error::{Fail, Res};
use crate::state::{State, not_running};

/// The longest message (receive buffer) the fused paths handle inline, in the exported function:
/// its bytes are copied by two loads and two stores at most (the shm crate's `cell::copy_bytes`), so
/// that code calls nothing and keeps nothing in the callee-saved registers — no frame. A longer
/// one takes the same path in a function of its own, which calls `memcpy`
/// ([`send_admitted`], [`recv_admitted`]).
const INLINE_MAX: usize = 16;

/// `MPI_Send`'s fused path (`exports::mpi_fused!`): a standard send of `count` elements of a
/// predefined datatype to a member of a communicator of the fast table ([`admit`]), written
/// straight into the destination's fastbox ([`nemesis::Endpoint::try_send_link`]) when it can go
/// there at once. `Some(MPI_SUCCESS)` once sent; `None` when nothing was done and the call goes
/// on to [`send_fast`] and the validating path (a communicator past the table, a derived
/// datatype, an argument to check, `MPI_PROC_NULL`). An admitted message longer than
/// [`INLINE_MAX`], or that cannot go into the fastbox at once (a remote rank, too long for a slot,
/// behind earlier ones waiting for cells, a full fastbox), is sent by [`send_admitted`].
///
/// It runs before the call's panic guard: nothing in it can panic (lookups through `get`, no
/// indexing, no allocation).
///
/// # Safety
/// Called only if [`crate::state::fused_on`]. MPI's contract: `buf` holds `count` elements of
/// `dt`.
#[inline(always)]
pub unsafe fn send_fused(
    buf: *const c_void,
    count: c_int,
    dt: Datatype,
    dest: c_int,
    tag: c_int,
    comm: abi::Comm,
) -> Option<c_int> {
    // SAFETY: the caller's contract (`fused_on`); the call's only reference to the state.
    let st = unsafe { crate::state::unlocked() };
    // A null buffer (of no data, or erroneous) goes the general way: one test, first.
    let buf = NonNull::new(buf as *mut u8)?;
    let (_, f, len) = admit(st, count, dt, comm)?;
    let to = f.member(dest)?;
    // SAFETY: MPI's contract: `len` readable bytes at `buf`.
    let data = unsafe { std::slice::from_raw_parts(buf.as_ptr(), len) };
    if len <= INLINE_MAX {
        // SAFETY: a non-empty fast entry exists only while the Endpoint does (`State::fast`).
        let ep = unsafe { st.ep.as_mut().unwrap_unchecked() };
        // SAFETY: the links of the fast table are this Endpoint's (`comm::links`).
        if unsafe { ep.try_send_link(data, to, tag, f.send_ctx) } {
            return Some(abi::SUCCESS);
        }
    }
    // Never `None` from here: the exported function would then keep every argument alive across
    // the inline send for `rest`, and save registers for it on every call (7 instructions).
    Some(send_admitted(data, dest, tag, comm))
}

/// `MPI_Send` admitted by its fused path (to member `dest` of `comm`) but not sent inline: into
/// the fastbox if it can go there at once, else by the Endpoint's general blocking send. Out of
/// line: the fused path's code keeps little alive.
#[inline(never)]
fn send_admitted(data: &[u8], dest: c_int, tag: c_int, comm: abi::Comm) -> c_int {
    // SAFETY: called by the fused path (`fused_on`), which no longer uses its reference.
    let st = unsafe { crate::state::unlocked() };
    // A send that may block goes with an `Access` while non-blocking collectives are in flight
    // (it advances them while it waits: `Access::may_block`). One sent inline does not wait.
    // (No receive is deferred: the fused paths do not run while one is, `State::fused`.)
    if !st.colls.is_empty() {
        return crate::state::call("MPI_Send", |acc| {
            let ci = index_of(comm);
            let (f, to) = fused_member(acc.st(), ci, dest)?;
            acc.ep_send(data, to.rank(), tag, f.send_ctx, false)?.map_err(|e| Fail::endpoint(ci, e))
        });
    }
    crate::state::after_fused("MPI_Send", |st| {
        let ci = index_of(comm);
        let f = st.fast.get(ci).copied();
        let (Some(f), Some(to), Some(ep)) = (f, f.and_then(|f| f.member(dest)), st.ep.as_mut()) else {
            return Err(not_running(st.phase));
        };
        // SAFETY: the links of the fast table are this Endpoint's (`comm::links`).
        if unsafe { ep.try_send_link(data, to, tag, f.send_ctx) } {
            return Ok(());
        }
        ep.send(data, to.rank(), tag, f.send_ctx).map_err(|e| Fail::endpoint(ci, e))
    })
}

/// `MPI_Recv`'s fused path (`exports::mpi_fused!`): a receive of `count` elements of a
/// predefined datatype from a named member of a communicator of the fast table ([`admit`]) whose
/// message already waits in its fastbox and nothing could match before it
/// ([`nemesis::Endpoint::try_recv_link`]): copied out, the status filled. `None` when nothing
/// was consumed and the call goes on to [`recv_fast`] and the validating path (`MPI_ANY_SOURCE`,
/// `MPI_PROC_NULL`, errors...); an admitted receive into more than [`INLINE_MAX`] bytes, or whose
/// message is not there yet (or is not the fused path's to take: behind an unexpected message of
/// the same source or a posted receive that could match it, truncated...) goes to
/// [`recv_admitted`]. Runs before the panic guard, as [`send_fused`].
///
/// # Safety
/// Called only if [`crate::state::fused_on`]. MPI's contract: `buf` has room for `count`
/// elements of `dt`; `status` is null, `MPI_STATUS_IGNORE` or writable.
#[inline(always)]
#[allow(clippy::too_many_arguments)]
pub unsafe fn recv_fused(
    buf: *mut c_void,
    count: c_int,
    dt: Datatype,
    source: c_int,
    tag: c_int,
    comm: abi::Comm,
    status: *mut Status,
) -> Option<c_int> {
    // SAFETY: the caller's contract (`fused_on`); the call's only reference to the state.
    let st = unsafe { crate::state::unlocked() };
    // As for `send_fused`.
    let buf = NonNull::new(buf as *mut u8)?.as_ptr();
    let (_, f, len) = admit(st, count, dt, comm)?;
    let from = f.member(source)?;
    // No receive is deferred (which one might match the message first): the fused paths do not
    // run while one is (`State::fused`).
    debug_assert!(st.deferred.is_empty());
    if len <= INLINE_MAX {
        // SAFETY: a non-empty fast entry exists only while the Endpoint does.
        let ep = unsafe { st.ep.as_mut().unwrap_unchecked() };
        // SAFETY: MPI's contract: `len` writable bytes at the buffer.
        if let Some((n, t)) = unsafe { ep.try_recv_link(buf, len, from, tag, f.ctx) } {
            // SAFETY: MPI's contract on `status`; the sender is `source`, named.
            unsafe { put_status(status, source, t, i64::from(n)) };
            return Some(abi::SUCCESS);
        }
    }
    // As for `send_fused`: never `None` from here (nothing was consumed).
    // SAFETY: as above.
    Some(unsafe { recv_admitted(buf, len, source, tag, comm, status) })
}

/// The fast entry of communicator `ci` and its member `rank`'s link, for a call its fused path
/// admitted (so both exist unless MPI ended meanwhile).
fn fused_member(st: &State, ci: usize, rank: c_int) -> Res<(crate::state::Fast, nemesis::Link)> {
    let f = st.fast.get(ci).copied();
    match (f, f.and_then(|f| f.member(rank))) {
        (Some(f), Some(l)) => Ok((f, l)),
        _ => Err(not_running(st.phase)),
    }
}

/// `MPI_Recv` admitted by its fused path (from member `source` of `comm`) but not received
/// inline: from the fastbox if the message waits there and nothing could come before it, else by
/// the Endpoint's general blocking receive (out of line, as [`send_admitted`]).
///
/// # Safety
/// `len` writable bytes at `buf` (any pointer if 0); MPI's contract on `status`.
#[inline(never)]
unsafe fn recv_admitted(
    buf: *mut u8,
    len: usize,
    source: c_int,
    tag: c_int,
    comm: abi::Comm,
    status: *mut Status,
) -> c_int {
    // SAFETY: as in `send_admitted`.
    let st = unsafe { crate::state::unlocked() };
    // As in `send_admitted`.
    if !st.colls.is_empty() {
        return crate::state::call("MPI_Recv", |acc| {
            let ci = index_of(comm);
            let (f, from) = fused_member(acc.st(), ci, source)?;
            // SAFETY: the caller's contract.
            let data = unsafe { out_bytes(buf.cast(), len) };
            match acc.ep_recv(data, from.rank() as c_int, tag, f.ctx)? {
                Ok(s) => {
                    // SAFETY: MPI's contract on `status`; the sender is `source`, named.
                    unsafe { put_status(status, source, s.tag, s.len as i64) };
                    Ok(())
                }
                Err(e) => Err(recv_failed(&acc.st().comms, ci, e, status)),
            }
        });
    }
    crate::state::after_fused("MPI_Recv", |st| {
        let ci = index_of(comm);
        let f = st.fast.get(ci).copied();
        let (Some(f), Some(from), Some(ep)) = (f, f.and_then(|f| f.member(source)), st.ep.as_mut()) else {
            return Err(not_running(st.phase));
        };
        // SAFETY: the caller's contract.
        let got = unsafe { ep.try_recv_link(buf, len, from, tag, f.ctx) };
        let r = match got {
            Some((n, t)) => Ok(nemesis::Status { source: from.rank(), tag: t, len: n as usize }),
            // SAFETY: the caller's contract.
            None => ep.recv(unsafe { out_bytes(buf.cast(), len) }, from.rank() as c_int, tag, f.ctx),
        };
        match r {
            Ok(s) => {
                // SAFETY: MPI's contract on `status`; the sender is `source`, named.
                unsafe { put_status(status, source, s.tag, s.len as i64) };
                Ok(())
            }
            Err(e) => Err(recv_failed(&st.comms, ci, e, status)),
        }
    })
}
