//! Starting operations: the non-blocking sends in every mode (`MPI_Isend`, `MPI_Issend`,
//! `MPI_Ibsend`, `MPI_Irsend`) and `MPI_Irecv`, the persistent requests (`MPI_Send_init` ...
//! `MPI_Recv_init`) and `MPI_Start`/`MPI_Startall`, which run the same code with the arguments
//! a persistent request kept.

use std::ffi::{c_int, c_void};

use super::{bsend, byte_len, comm_at, dest_of, in_bytes, null_arg, source_of};
use crate::abi::{self, Datatype};
use crate::error::{Fail, Res, Why};
use crate::request::{Completion, Mode, Persistent, Req, State};
use crate::state::{Access, not_running};

#[cold]
fn too_many(ci: usize) -> Fail {
    Fail::new(abi::ERR_INTERN, Some(ci), Why::Arg("too many active requests"))
}

/// Starts a send of `count` elements of `dt` at `buf` to communicator rank `dest` in `mode`:
/// the communicator's index and the request's state.
///
/// # Safety
/// MPI's contract: `buf` holds `count` elements of `dt`, valid and unchanged until the request
/// completes.
#[allow(clippy::too_many_arguments)]
pub unsafe fn start_send(
    acc: &mut Access,
    mode: Mode,
    buf: *const c_void,
    count: c_int,
    dt: Datatype,
    dest: c_int,
    tag: c_int,
    comm: abi::Comm,
) -> Res<(usize, State)> {
    let st = acc.st();
    if st.ep.is_none() {
        return Err(not_running(st.phase));
    }
    let (ci, c) = comm_at(&st.comms, comm)?;
    let len = byte_len(count, dt, ci, buf.is_null())?;
    let Some(to) = dest_of(c, ci, dest)? else { return Ok((ci, State::Done(Completion::proc_null()))) };
    let ctx = c.ctx;
    if mode == Mode::Buffered {
        // SAFETY: MPI's contract: `len` readable bytes at `buf`.
        let data = unsafe { in_bytes(buf, len) };
        bsend::send(st, data, to, tag, ctx, ci)?;
        return Ok((ci, State::Done(Completion::ok(dest, tag, len as i64))));
    }
    let ep = acc.ep()?;
    let r = if mode == Mode::Synchronous {
        // SAFETY: MPI's contract: `len` readable bytes at `buf`, unchanged until completion.
        unsafe { ep.issend_raw(buf as *const u8, len, to, tag, ctx) }
    } else {
        // SAFETY: as above.
        unsafe { ep.isend_raw(buf as *const u8, len, to, tag, ctx) }
    };
    Ok((ci, State::Pending(r.map_err(|e| Fail::endpoint(ci, e))?)))
}

/// Starts a receive of up to `count` elements of `dt` into `buf` from communicator rank
/// `source`: the communicator's index and the request's state.
///
/// # Safety
/// MPI's contract: `buf` has room for `count` elements of `dt`, untouched until completion.
#[allow(clippy::too_many_arguments)]
pub unsafe fn start_recv(
    acc: &mut Access,
    buf: *mut c_void,
    count: c_int,
    dt: Datatype,
    source: c_int,
    tag: c_int,
    comm: abi::Comm,
) -> Res<(usize, State)> {
    let st = acc.st();
    if st.ep.is_none() {
        return Err(not_running(st.phase));
    }
    let (ci, c) = comm_at(&st.comms, comm)?;
    let len = byte_len(count, dt, ci, buf.is_null())?;
    let Some(from) = source_of(c, ci, source)? else { return Ok((ci, State::Done(Completion::proc_null()))) };
    let ctx = c.ctx;
    // SAFETY: MPI's contract: the buffer is writable and untouched until completion.
    let r = unsafe { acc.ep()?.irecv_raw(buf as *mut u8, len, from, tag, ctx) };
    Ok((ci, State::Pending(r.map_err(|e| Fail::endpoint(ci, e))?)))
}

/// Stores `req` and writes its handle.
///
/// # Safety
/// `request` null or writable.
unsafe fn hand_out(acc: &mut Access, req: Req, request: *mut abi::Request) -> Res<()> {
    let ci = req.comm as usize;
    let h = acc.st().reqs.insert(req).ok_or_else(|| too_many(ci))?;
    // SAFETY: the caller's contract (checked non-null by the callers).
    unsafe { *request = h };
    Ok(())
}

/// `MPI_Isend`, `MPI_Issend`, `MPI_Ibsend`, `MPI_Irsend` by `mode`.
///
/// # Safety
/// MPI's contract: `buf` holds `count` elements of `dt` and stays valid and unchanged until the
/// request completes; `request` is writable.
#[allow(clippy::too_many_arguments)]
pub unsafe fn isend(
    acc: &mut Access,
    mode: Mode,
    buf: *const c_void,
    count: c_int,
    dt: Datatype,
    dest: c_int,
    tag: c_int,
    comm: abi::Comm,
    request: *mut abi::Request,
) -> Res<()> {
    if request.is_null() {
        return Err(null_arg(None, "null request pointer"));
    }
    super::complete::reap(acc.st());
    // SAFETY: the caller's contract.
    let (ci, state) = unsafe { start_send(acc, mode, buf, count, dt, dest, tag, comm) }?;
    // SAFETY: checked non-null.
    unsafe { hand_out(acc, Req::new(ci, state, false), request) }
}

/// `MPI_Irecv`.
///
/// # Safety
/// MPI's contract: `buf` has room for `count` elements of `dt`, untouched until the request
/// completes; `request` is writable.
#[allow(clippy::too_many_arguments)]
pub unsafe fn irecv(
    acc: &mut Access,
    buf: *mut c_void,
    count: c_int,
    dt: Datatype,
    source: c_int,
    tag: c_int,
    comm: abi::Comm,
    request: *mut abi::Request,
) -> Res<()> {
    if request.is_null() {
        return Err(null_arg(None, "null request pointer"));
    }
    super::complete::reap(acc.st());
    // SAFETY: the caller's contract.
    let (ci, state) = unsafe { start_recv(acc, buf, count, dt, source, tag, comm) }?;
    // SAFETY: checked non-null.
    unsafe { hand_out(acc, Req::new(ci, state, true), request) }
}

/// `MPI_Send_init`, `MPI_Ssend_init`, `MPI_Bsend_init`, `MPI_Rsend_init` (`send: Some(mode)`)
/// and `MPI_Recv_init` (`None`): an inactive persistent request holding the arguments, checked
/// now as the starting call would check them.
///
/// # Safety
/// `request` writable; the buffer's contract applies at each `MPI_Start`.
#[allow(clippy::too_many_arguments)]
pub unsafe fn init(
    acc: &mut Access,
    send: Option<Mode>,
    buf: *mut c_void,
    count: c_int,
    dt: Datatype,
    peer: c_int,
    tag: c_int,
    comm: abi::Comm,
    request: *mut abi::Request,
) -> Res<()> {
    let st = acc.st();
    if st.ep.is_none() {
        return Err(not_running(st.phase));
    }
    if request.is_null() {
        return Err(null_arg(None, "null request pointer"));
    }
    let (ci, c) = comm_at(&st.comms, comm)?;
    byte_len(count, dt, ci, buf.is_null())?;
    match send {
        Some(_) => {
            dest_of(c, ci, peer)?;
            if tag < 0 {
                return Err(Fail::new(abi::ERR_TAG, Some(ci), Why::Tag(tag)));
            }
        }
        None => {
            source_of(c, ci, peer)?;
            if tag < 0 && tag != abi::ANY_TAG {
                return Err(Fail::new(abi::ERR_TAG, Some(ci), Why::Tag(tag)));
            }
        }
    }
    let p = Persistent { send, buf, count, datatype: dt, peer, tag, comm };
    let req = Req { persistent: Some(Box::new(p)), ..Req::new(ci, State::Inactive, send.is_none()) };
    // SAFETY: checked non-null.
    unsafe { hand_out(acc, req, request) }
}

/// `MPI_Start`: starts an inactive persistent request.
///
/// # Safety
/// `request` readable; MPI's contract on the buffer the request names.
pub unsafe fn start(acc: &mut Access, request: *const abi::Request) -> Res<()> {
    if request.is_null() {
        return Err(null_arg(None, "null request pointer"));
    }
    // SAFETY: checked non-null; MPI's contract.
    let h = unsafe { *request };
    let st = acc.st();
    let p = match st.reqs.get(h) {
        Some(Req { persistent: Some(p), state: State::Inactive, .. }) => **p,
        Some(Req { persistent: Some(_), .. }) => {
            return Err(Fail::new(abi::ERR_REQUEST, None, Why::Arg("MPI_Start on an active request")));
        }
        _ => return Err(Fail::new(abi::ERR_REQUEST, None, Why::Request(h))),
    };
    // SAFETY: the arguments were given to the persistent call under MPI's contract, which holds
    // for each start.
    let (_, state) = unsafe {
        match p.send {
            Some(mode) => start_send(acc, mode, p.buf, p.count, p.datatype, p.peer, p.tag, p.comm),
            None => start_recv(acc, p.buf, p.count, p.datatype, p.peer, p.tag, p.comm),
        }
    }?;
    if let Some(r) = acc.st().reqs.get_mut(h) {
        r.state = state;
    }
    Ok(())
}

/// `MPI_Startall`.
///
/// # Safety
/// `requests` readable for `count` handles; as for [`start`].
pub unsafe fn startall(acc: &mut Access, count: c_int, requests: *const abi::Request) -> Res<()> {
    if count < 0 {
        return Err(Fail::new(abi::ERR_COUNT, None, Why::Count(count)));
    }
    if count > 0 && requests.is_null() {
        return Err(null_arg(None, "null request array"));
    }
    for k in 0..count as usize {
        // SAFETY: `count` handles (the caller's contract).
        unsafe { start(acc, requests.add(k)) }?;
    }
    Ok(())
}
