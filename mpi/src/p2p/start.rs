//! Starting operations: the non-blocking sends in every mode (`MPI_Isend`, `MPI_Issend`,
//! `MPI_Ibsend`, `MPI_Irsend`) and `MPI_Irecv`, the persistent requests (`MPI_Send_init` ...
//! `MPI_Recv_init`) and `MPI_Start`/`MPI_Startall`, which run the same code with the arguments
//! a persistent request resolved when it was made.
//!
//! Contiguous data goes to the Endpoint as the user's buffer; typed (non-contiguous) data as
//! pieces ([`TypedBuf`]) the request keeps until it completes: the Endpoint gathers a send from
//! them and scatters a receive into them, with no packed copy.

use std::ffi::{c_int, c_void};
use std::ptr::NonNull;

use nemesis::Pieces;

use super::{bsend, comm_at, dest_of, null_arg, source_of};
use crate::abi::{self, Count, Datatype};
use crate::datatype::pack::TypedBuf;
use crate::datatype::{self, Layout};
use crate::error::{Fail, Res, Why};
use crate::request::{Completion, Deferred, Mode, Persistent, Req, State};
use crate::state::{Access, State as St, not_running};

#[cold]
pub(crate) fn too_many(ci: usize) -> Fail {
    Fail::new(abi::ERR_INTERN, Some(ci), Why::Arg("too many active requests"))
}

/// A send's arguments resolved: the communicator's index, the data, the job rank to send to
/// (`None`: `MPI_PROC_NULL`) and the context (a send's: `Comm::send_ctx`).
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
    count: Count,
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
    let data = super::layout_of(&st.types, buf.cast(), count, dt, ci)?;
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
    Ok(Target { ci, data, peer, ctx: if send { c.send_ctx } else { c.ctx } })
}

/// Typed data as pieces, boxed (at a stable address for the Endpoint), and the Endpoint's
/// pointer to them.
pub fn pieces_of(
    base: *mut u8,
    count: usize,
    desc: &std::sync::Arc<datatype::TypeDesc>,
) -> (Box<TypedBuf>, NonNull<dyn Pieces>) {
    let typed = Box::new(TypedBuf::new(base, count, desc.clone()));
    let p = NonNull::from(&*typed as &dyn Pieces);
    (typed, p)
}

/// Starts sending `data` to job rank `to` in `mode`: the request's state and typed data.
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
) -> Res<(State, Option<Box<TypedBuf>>)> {
    let Some(to) = to else { return Ok((State::Done(Completion::proc_null()), None)) };
    let to = to as u32;
    if mode == Mode::Buffered {
        let len = data.len();
        // SAFETY: MPI's contract on the data.
        bsend::send(st, len, |dst| unsafe { fill(data, dst) }, to, tag, ctx, ci)?;
        return Ok((State::Done(Completion::empty()), None));
    }
    let Some(ep) = st.ep.as_mut() else { return Err(not_running(st.phase)) };
    let sync = mode == Mode::Synchronous;
    let (r, typed) = match data {
        // SAFETY: `len` readable bytes at `ptr` until completion (MPI's contract).
        Layout::Contig { ptr, len } if sync => (unsafe { ep.issend_raw(*ptr, *len, to, tag, ctx) }, None),
        // SAFETY: as above.
        Layout::Contig { ptr, len } => (unsafe { ep.isend_raw(*ptr, *len, to, tag, ctx) }, None),
        Layout::Typed { base, count, desc } => {
            let (typed, p) = pieces_of(*base, *count, desc);
            // SAFETY: the pieces live in the request until it completes (boxed: they do not move
            // with it); their memory is the user's data, readable and unchanged until then (MPI's
            // contract).
            (unsafe { ep.isend_pieces(p, to, tag, ctx, sync) }, Some(typed))
        }
    };
    Ok((State::Pending(r.map_err(|e| Fail::endpoint(ci, e))?), typed))
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
/// typed data.
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
) -> Res<(State, Option<Box<TypedBuf>>)> {
    let Some(from) = from else { return Ok((State::Done(Completion::proc_null()), None)) };
    let Some(ep) = st.ep.as_mut() else { return Err(not_running(st.phase)) };
    let (r, typed) = match data {
        // SAFETY: the caller's contract.
        Layout::Contig { ptr, len } => (unsafe { ep.irecv_raw(*ptr, *len, from, tag, ctx) }, None),
        Layout::Typed { base, count, desc } => {
            let (typed, p) = pieces_of(*base, *count, desc);
            // SAFETY: the pieces live in the request until it completes (boxed: they do not move
            // with it); their memory is the user's buffer (the caller's contract).
            (unsafe { ep.irecv_pieces(p, from, tag, ctx) }, Some(typed))
        }
    };
    Ok((State::Pending(r.map_err(|e| Fail::endpoint(ci, e))?), typed))
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

/// `MPI_Isend` and `MPI_Irecv` (`recv`): the fast path, run on the state itself when calls are
/// not locked (`state::call_fast`), on the terms of [`super::send_fast`] and
/// [`super::recv_fast`] (a fast communicator, a predefined type, a member or `MPI_ANY_SOURCE`): the
/// user's buffer goes straight to the Endpoint — or, for a small receive from a member on this
/// node, into a deferred request that nothing posts yet (`State::deferred`) — and the request is
/// the plain kind [`super::complete::waitall_fast`] completes. `None` (the validating path) for everything else,
/// and while freed requests wait to be reaped.
///
/// # Safety
/// MPI's contract: `buf` holds (`recv`: has room for) `count` elements of `dt` and stays valid
/// and unchanged (untouched) until the request completes; `request` is null or writable.
#[inline(always)]
#[allow(clippy::too_many_arguments)]
pub unsafe fn istart_fast(
    st: &mut St,
    recv: bool,
    buf: *const c_void,
    count: c_int,
    dt: Datatype,
    peer: c_int,
    tag: c_int,
    comm: abi::Comm,
    request: *mut abi::Request,
) -> Option<Res<()>> {
    if request.is_null() || !st.freed.is_empty() {
        return None;
    }
    let (ci, f, len) = super::admit(st, count, dt, comm)?;
    let ptr = super::buffer(buf, len)?;
    // A receive of a message that fits a fastbox, from a named member on this node (fault
    // tolerance off: `Link::is_local`), with a valid tag: deferred (`State::deferred`).
    if recv
        && len < st.defer_below
        && let Some(from) = f.member(peer)
        && from.is_local()
        && (tag >= 0 || tag == nemesis::ANY_TAG)
    {
        let d = Deferred { buf: ptr.as_ptr(), len, source: peer, from, tag, ctx: f.ctx };
        let Some((i, h)) = st.reqs.insert_slot(Req::new(ci, State::Deferred(d), true)) else {
            return Some(Err(too_many(ci)));
        };
        st.defer(i);
        // SAFETY: checked non-null.
        unsafe { *request = h };
        return Some(Ok(()));
    }
    if !recv && let Some(to) = f.member(peer) {
        // SAFETY: a fast entry with a non-zero size exists only while the Endpoint does.
        let ep = unsafe { st.ep.as_mut().unwrap_unchecked() };
        // SAFETY: MPI's contract: `len` readable bytes at the buffer (not null, or no data).
        let data = unsafe { std::slice::from_raw_parts(ptr.as_ptr(), len) };
        // SAFETY: the links of the fast table are this Endpoint's (`comm::links`).
        if let Some(id) = unsafe { ep.try_isend_link(data, to, tag, f.send_ctx) } {
            return Some(sent_at_once(st, ci, id, tag, len, request));
        }
    }
    let peer = if recv { super::fast_source(&f, peer)? } else { f.job(peer)? as c_int };
    if recv {
        // A receive posted now must not overtake the deferred ones (MPI's matching order).
        st.post_deferred();
    }
    // SAFETY: a fast entry with a non-zero size exists only while the Endpoint does (the table's
    // invariant, `State::fast`), and a peer was found in this one.
    let ep = unsafe { st.ep.as_mut().unwrap_unchecked() };
    let (r, sent) = if recv {
        // SAFETY: MPI's contract on the buffer (the caller's).
        (unsafe { ep.irecv_raw(buf as *mut u8, len, peer, tag, f.ctx) }, None)
    } else {
        // SAFETY: MPI's contract on the data (the caller's).
        match unsafe { ep.isend_now(buf.cast(), len, peer as u32, tag, f.send_ctx) } {
            // Out whole at once: the request is complete from the start, and names the message
            // for `MPI_Cancel`.
            Ok(Ok(id)) => return Some(sent_at_once(st, ci, id, tag, len, request)),
            Ok(Err(r)) => (Ok(r), ep.send_id(r)),
            Err(e) => (Err(e), None),
        }
    };
    let r = match r {
        Ok(r) => r,
        Err(e) => return Some(Err(Fail::endpoint(ci, e))),
    };
    // SAFETY: checked non-null.
    Some(unsafe { hand_out(st, Req { sent, ..Req::new(ci, State::Pending(r), recv) }, request) })
}

/// The request of a send of communicator `ci` that went out whole at once (message `id`, `len`
/// bytes with tag `tag`): complete from the start, naming the message for `MPI_Cancel`; its handle
/// goes to `request` (not null).
fn sent_at_once(
    st: &mut St,
    ci: usize,
    id: nemesis::SendId,
    tag: c_int,
    len: usize,
    request: *mut abi::Request,
) -> Res<()> {
    // Not `None`: the caller found a fast entry, which exists only while the Endpoint does.
    let me = st.ep.as_ref().map_or(0, |ep| ep.rank());
    let done = State::Done(super::completion_in(st, ci, Ok(nemesis::Status { source: me, tag, len })));
    // SAFETY: the caller's contract: `request` is not null (and MPI's: writable).
    unsafe { hand_out(st, Req { sent: Some(id), ..Req::new(ci, done, false) }, request) }
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
    count: impl Into<Count>,
    dt: Datatype,
    dest: c_int,
    tag: c_int,
    comm: abi::Comm,
    request: *mut abi::Request,
) -> Res<()> {
    // SAFETY: the caller's contract (the buffer is only read for a send).
    unsafe { begin(acc, Some(mode), buf.cast_mut(), count.into(), dt, dest, tag, comm, request) }
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
    count: impl Into<Count>,
    dt: Datatype,
    source: c_int,
    tag: c_int,
    comm: abi::Comm,
    request: *mut abi::Request,
) -> Res<()> {
    // SAFETY: the caller's contract.
    unsafe { begin(acc, None, buf, count.into(), dt, source, tag, comm, request) }
}

/// A non-blocking send in `mode` (`send: Some(mode)`) or receive (`None`) started, its request
/// written to `request`.
///
/// # Safety
/// As for [`isend`] and [`irecv`].
#[allow(clippy::too_many_arguments)]
unsafe fn begin(
    acc: &mut Access,
    send: Option<Mode>,
    buf: *mut c_void,
    count: Count,
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
    super::complete::reap(st);
    let t = target(st, buf, count, dt, peer, tag, comm, send.is_some())?;
    // SAFETY: the caller's contract.
    let (state, typed, sent) = unsafe { start_any(st, send, &t.data, t.peer, tag, t.ctx, t.ci) }?;
    // SAFETY: checked non-null.
    unsafe { hand_out(st, Req { typed, sent, ..Req::new(t.ci, state, send.is_none()) }, request) }
}

/// Starts a send in `mode` (`send: Some(mode)`) or a receive (`None`): the request's state,
/// typed data and sent message.
///
/// # Safety
/// As for [`start_send`] and [`start_recv`].
#[allow(clippy::type_complexity)]
unsafe fn start_any(
    st: &mut St,
    send: Option<Mode>,
    data: &Layout,
    peer: Option<i32>,
    tag: c_int,
    ctx: u32,
    ci: usize,
) -> Res<(State, Option<Box<TypedBuf>>, Option<nemesis::SendId>)> {
    // SAFETY: the caller's contract.
    let (state, typed) = unsafe {
        match send {
            Some(mode) => start_send(st, mode, data, peer, tag, ctx, ci),
            None => start_recv(st, data, peer, tag, ctx, ci),
        }
    }?;
    let sent = if send.is_some() { sent_of(st, &state) } else { None };
    Ok((state, typed, sent))
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
    count: impl Into<Count>,
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
    let t = target(st, buf, count.into(), dt, peer, tag, comm, send.is_some())?;
    let p = Persistent { send, data: t.data, peer: t.peer, tag, ctx: t.ctx, coll: None };
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
        Some(Req { ext: Some(e), state: State::Inactive, freed: false, .. })
            if matches!(**e, crate::request::Ext::Part(_)) =>
        {
            let i = st.reqs.index(h).ok_or_else(|| Fail::new(abi::ERR_REQUEST, None, Why::Request(h)))?;
            return super::partitioned::start(st, i);
        }
        Some(r) if r.is_persistent() => {
            return Err(Fail::new(abi::ERR_REQUEST, None, Why::Arg("MPI_Start on an active request")));
        }
        _ => return Err(Fail::new(abi::ERR_REQUEST, None, Why::Request(h))),
    };
    if let Some(recipe) = &p.coll {
        return crate::coll::entry::start(acc, h, recipe);
    }
    // SAFETY: the arguments were given to the persistent call under MPI's contract, which holds
    // for each start.
    let (state, typed, sent) = unsafe { start_any(st, p.send, &p.data, p.peer, p.tag, p.ctx, ci) }?;
    if let Some(r) = st.reqs.get_mut(h) {
        r.state = state;
        r.typed = typed;
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
