//! Starting operations: the non-blocking sends in every mode (`MPI_Isend`, `MPI_Issend`,
//! `MPI_Ibsend`, `MPI_Irsend`) and `MPI_Irecv`, the persistent requests (`MPI_Send_init` ...
//! `MPI_Recv_init`) and `MPI_Start`/`MPI_Startall`, which run the same code with the arguments
//! a persistent request resolved when it was made.
//!
//! Contiguous data goes to the Endpoint from the user's buffer; typed (non-contiguous) data is
//! packed into a staging buffer the request keeps until it completes, and a receive of typed data
//! lands in one that is unpacked on completion (`request::Staged`).

use std::ffi::{c_int, c_void};

use super::{bsend, comm_at, dest_of, null_arg, source_of};
use crate::abi::{self, Datatype};
use crate::datatype::{self, Layout};
use crate::error::{Fail, Res, Why};
use crate::request::{Completion, Mode, Persistent, Req, Staged, State};
use crate::state::{Access, State as St, not_running};

#[cold]
fn too_many(ci: usize) -> Fail {
    Fail::new(abi::ERR_INTERN, Some(ci), Why::Arg("too many active requests"))
}

/// A send's arguments resolved: the communicator's index, the data, the job rank to send to
/// (`None`: `MPI_PROC_NULL`) and the context.
pub struct Target {
    pub ci: usize,
    pub data: Layout,
    pub peer: Option<i32>,
    pub ctx: u32,
}

/// Resolves the arguments of a send (`send`) or a receive.
#[allow(clippy::too_many_arguments)]
pub fn target(
    st: &St,
    buf: *const c_void,
    count: c_int,
    dt: Datatype,
    peer: c_int,
    tag: c_int,
    comm: abi::Comm,
    send: bool,
) -> Res<Target> {
    if st.ep.is_none() {
        return Err(not_running(st.phase));
    }
    let (ci, c) = comm_at(&st.comms, comm)?;
    let data = datatype::layout(&st.types, buf.cast(), count, dt, ci)?;
    let peer = if send {
        if tag < 0 {
            return Err(Fail::new(abi::ERR_TAG, Some(ci), Why::Tag(tag)));
        }
        dest_of(c, ci, peer)?.map(|w| w as i32)
    } else {
        if tag < 0 && tag != abi::ANY_TAG {
            return Err(Fail::new(abi::ERR_TAG, Some(ci), Why::Tag(tag)));
        }
        source_of(c, ci, peer)?
    };
    Ok(Target { ci, data, peer, ctx: c.ctx })
}

/// Starts sending `data` to job rank `to` in `mode`: the request's state and staging.
///
/// # Safety
/// MPI's contract: the data stays valid and unchanged until the request completes.
pub unsafe fn start_send(
    st: &mut St,
    mode: Mode,
    data: &Layout,
    to: Option<i32>,
    tag: c_int,
    ctx: u32,
    ci: usize,
) -> Res<(State, Option<Box<Staged>>)> {
    let Some(to) = to else { return Ok((State::Done(Completion::proc_null()), None)) };
    let to = to as u32;
    if mode == Mode::Buffered {
        let len = data.len();
        // SAFETY: MPI's contract on the data.
        bsend::send(st, len, |dst| unsafe { fill(data, dst) }, to, tag, ctx, ci)?;
        return Ok((State::Done(Completion::empty()), None));
    }
    let (ptr, len, staged) = match data {
        Layout::Contig { ptr, len } => (ptr.cast_const(), *len, None),
        Layout::Typed { .. } => {
            // SAFETY: MPI's contract on the data.
            let v = unsafe { data.packed() };
            (v.as_ptr(), v.len(), Some(Box::new(Staged::Send(v))))
        }
    };
    let Some(ep) = st.ep.as_mut() else { return Err(not_running(st.phase)) };
    let r = if mode == Mode::Synchronous {
        // SAFETY: `len` readable bytes at `ptr` (the user's, by MPI's contract, or the staging
        // buffer the request keeps) until completion.
        unsafe { ep.issend_raw(ptr, len, to, tag, ctx) }
    } else {
        // SAFETY: as above.
        unsafe { ep.isend_raw(ptr, len, to, tag, ctx) }
    };
    Ok((State::Pending(r.map_err(|e| Fail::endpoint(ci, e))?), staged))
}

/// The message a started send sent (for `MPI_Cancel`), read while its request is still fresh.
pub fn sent_of(st: &St, state: &State) -> Option<nemesis::SendId> {
    match (state, st.ep.as_ref()) {
        (State::Pending(r), Some(ep)) => ep.send_id(*r),
        _ => None,
    }
}

/// Packs `data` into `dst` (of its length).
///
/// # Safety
/// MPI's contract on the data.
unsafe fn fill(data: &Layout, dst: &mut [u8]) {
    match data {
        // SAFETY: the caller's contract.
        Layout::Contig { ptr, len } => dst.copy_from_slice(unsafe { super::in_bytes(ptr.cast(), *len) }),
        // SAFETY: as above.
        Layout::Typed { base, count, desc } => unsafe { datatype::pack::pack(desc, *base, *count, dst) },
    }
}

/// Starts receiving into `data` from the Endpoint's source `from`: the request's state and
/// staging.
///
/// # Safety
/// MPI's contract: the buffer stays valid for writes and untouched until the request completes.
pub unsafe fn start_recv(
    st: &mut St,
    data: &Layout,
    from: Option<i32>,
    tag: c_int,
    ctx: u32,
    ci: usize,
) -> Res<(State, Option<Box<Staged>>)> {
    let Some(from) = from else { return Ok((State::Done(Completion::proc_null()), None)) };
    let Some(ep) = st.ep.as_mut() else { return Err(not_running(st.phase)) };
    let (r, staged) = match data {
        // SAFETY: the caller's contract.
        Layout::Contig { ptr, len } => (unsafe { ep.irecv_raw(*ptr, *len, from, tag, ctx) }, None),
        Layout::Typed { base, count, desc } => {
            let mut tmp = vec![0u8; count * desc.size];
            // SAFETY: the staging buffer lives in the request until it completes (its heap
            // allocation does not move with the `Vec`).
            let r = unsafe { ep.irecv_raw(tmp.as_mut_ptr(), tmp.len(), from, tag, ctx) };
            (r, Some(Box::new(Staged::Recv { tmp, base: *base, count: *count, desc: desc.clone() })))
        }
    };
    Ok((State::Pending(r.map_err(|e| Fail::endpoint(ci, e))?), staged))
}

/// Stores `req` and writes its handle.
///
/// # Safety
/// `request` writable.
unsafe fn hand_out(st: &mut St, req: Req, request: *mut abi::Request) -> Res<()> {
    let ci = req.comm as usize;
    let h = st.reqs.insert(req).ok_or_else(|| too_many(ci))?;
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
    let st = acc.st();
    super::complete::reap(st);
    let t = target(st, buf, count, dt, dest, tag, comm, true)?;
    // SAFETY: the caller's contract.
    let (state, staged) = unsafe { start_send(st, mode, &t.data, t.peer, tag, t.ctx, t.ci) }?;
    let sent = sent_of(st, &state);
    // SAFETY: checked non-null.
    unsafe { hand_out(st, Req { staged, sent, ..Req::new(t.ci, state, false) }, request) }
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
    let st = acc.st();
    super::complete::reap(st);
    let t = target(st, buf, count, dt, source, tag, comm, false)?;
    // SAFETY: the caller's contract.
    let (state, staged) = unsafe { start_recv(st, &t.data, t.peer, tag, t.ctx, t.ci) }?;
    // SAFETY: checked non-null.
    unsafe { hand_out(st, Req { staged, ..Req::new(t.ci, state, true) }, request) }
}

/// `MPI_Send_init`, `MPI_Ssend_init`, `MPI_Bsend_init`, `MPI_Rsend_init` (`send: Some(mode)`)
/// and `MPI_Recv_init` (`None`): an inactive persistent request holding the arguments, resolved
/// and checked now as the starting call would check them.
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
    if request.is_null() {
        return Err(null_arg(None, "null request pointer"));
    }
    let st = acc.st();
    let t = target(st, buf, count, dt, peer, tag, comm, send.is_some())?;
    let p = Persistent { send, data: t.data, peer: t.peer, tag, ctx: t.ctx };
    let req = Req { persistent: Some(Box::new(p)), ..Req::new(t.ci, State::Inactive, send.is_none()) };
    // SAFETY: checked non-null.
    unsafe { hand_out(st, req, request) }
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
    if st.ep.is_none() {
        return Err(not_running(st.phase));
    }
    let (p, ci) = match st.reqs.get(h) {
        Some(Req { persistent: Some(p), state: State::Inactive, freed: false, comm, .. }) => {
            ((**p).clone(), *comm as usize)
        }
        Some(Req { persistent: Some(_), .. }) => {
            return Err(Fail::new(abi::ERR_REQUEST, None, Why::Arg("MPI_Start on an active request")));
        }
        _ => return Err(Fail::new(abi::ERR_REQUEST, None, Why::Request(h))),
    };
    // SAFETY: the arguments were given to the persistent call under MPI's contract, which holds
    // for each start.
    let (state, staged) = unsafe {
        match p.send {
            Some(mode) => start_send(st, mode, &p.data, p.peer, p.tag, p.ctx, ci),
            None => start_recv(st, &p.data, p.peer, p.tag, p.ctx, ci),
        }
    }?;
    let sent = sent_of(st, &state);
    if let Some(r) = st.reqs.get_mut(h) {
        r.state = state;
        r.staged = staged;
        r.sent = sent;
        r.cancel = None;
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
