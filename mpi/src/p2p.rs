//! Point-to-point: send, receive, their non-blocking forms, completion and probes.
//!
//! The blocking send and receive are the paths the Table 2.1 measurement counts
//! (`shared/bench/mpi_instructions.c`): one combined test on the fast-path table
//! (`State::fast`: size, context and rank maps of the first communicators at a fixed offset), the
//! datatype's size (one load from a static table) and the count admits the common call, which
//! goes straight to `Endpoint::send` / `Endpoint::recv`; ranks are translated with one load, no
//! branch. Everything rarely taken (`MPI_PROC_NULL`, errors, communicators past the table, MPI
//! not running) goes to a validating path ([`send_checked`], [`recv_checked`]). No allocation,
//! hashing or locking.
//!
//! Ranks in statuses are communicator ranks; `MPI_ERROR` is set only by the calls that return
//! several statuses (`MPI_Waitall`, `MPI_Testall`), as MPI-3.1 §3.2.5 says.

use std::ffi::{c_int, c_void};

use crate::abi::{self, ANY_SOURCE, Datatype, PROC_NULL, REQUEST_NULL, STATUS_IGNORE, Status};
use crate::comm::{Comm, index_of};
use crate::datatype;
use crate::error::{Fail, Res, Why, code_of};
use crate::request::{Completion, Slot};
use crate::state::{State, not_running};

/// The live communicator named by `h`, and its index.
#[inline(always)]
pub fn comm_at(comms: &[Comm], h: abi::Comm) -> Res<(usize, &Comm)> {
    let i = index_of(h);
    match comms.get(i) {
        Some(c) if c.live => Ok((i, c)),
        _ => Err(bad_comm(h)),
    }
}

#[cold]
fn bad_comm(h: abi::Comm) -> Fail {
    Fail::new(abi::ERR_COMM, None, Why::Comm(h))
}

/// Bytes in `count` elements of `dt`, checking the type, the count and the buffer.
#[inline(always)]
pub fn byte_len(count: c_int, dt: Datatype, ci: usize, null_buf: bool) -> Res<usize> {
    let Some(size) = datatype::size_of_handle(dt) else {
        return Err(Fail::new(abi::ERR_TYPE, Some(ci), Why::Type(dt)));
    };
    if count < 0 {
        return Err(Fail::new(abi::ERR_COUNT, Some(ci), Why::Count(count)));
    }
    let len = count as usize * size;
    if null_buf && len > 0 {
        return Err(Fail::new(abi::ERR_BUFFER, Some(ci), Why::Buffer));
    }
    Ok(len)
}

#[cold]
fn bad_rank(ci: usize, rank: c_int, size: u32) -> Fail {
    Fail::new(abi::ERR_RANK, Some(ci), Why::Rank { rank, size })
}

#[cold]
fn null_arg(ci: Option<usize>, what: &'static str) -> Fail {
    Fail::new(abi::ERR_ARG, ci, Why::Arg(what))
}

/// `len` bytes at `buf` (empty for 0, whatever `buf`).
///
/// # Safety
/// Unless `len` is 0, `buf` must be readable for `len` bytes while the slice lives.
#[inline(always)]
pub unsafe fn in_bytes<'a>(buf: *const c_void, len: usize) -> &'a [u8] {
    if len == 0 {
        &[]
    } else {
        // SAFETY: the caller's contract.
        unsafe { std::slice::from_raw_parts(buf as *const u8, len) }
    }
}

/// `len` writable bytes at `buf` (empty for 0, whatever `buf`).
///
/// # Safety
/// Unless `len` is 0, `buf` must be writable for `len` bytes, and not otherwise accessed, while
/// the slice lives. The bytes may be uninitialized memory in C's sense: the Endpoint only writes
/// them.
#[inline(always)]
pub unsafe fn out_bytes<'a>(buf: *mut c_void, len: usize) -> &'a mut [u8] {
    if len == 0 {
        &mut []
    } else {
        // SAFETY: the caller's contract.
        unsafe { std::slice::from_raw_parts_mut(buf as *mut u8, len) }
    }
}

/// Writes `v` through `out`, an output argument the standard requires.
///
/// # Safety
/// `out` null or writable.
pub unsafe fn write_out(out: *mut c_int, v: c_int) -> Res<()> {
    if out.is_null() {
        return Err(null_arg(None, "null output pointer"));
    }
    // SAFETY: checked non-null; the caller's contract.
    unsafe { *out = v };
    Ok(())
}

/// True if `status` points at a status to fill (not null, not `MPI_STATUS_IGNORE`).
#[inline(always)]
fn wants(status: *const Status) -> bool {
    status as usize > STATUS_IGNORE
}

/// Fills a single-completion status (every field but `MPI_ERROR`).
///
/// # Safety
/// `status` is null, `MPI_STATUS_IGNORE`, or valid for writes.
#[inline(always)]
pub unsafe fn put_status(status: *mut Status, source: c_int, tag: c_int, count: i64) {
    if wants(status) {
        // SAFETY: the caller's contract; not null nor the ignore sentinel.
        unsafe {
            (*status).count_lo = count as c_int;
            (*status).count_hi_and_cancelled = ((count as u64 >> 32) << 1) as c_int;
            (*status).source = source;
            (*status).tag = tag;
        }
    }
}

/// The empty status (MPI-3.1 §3.7.3): what completing a null request reports.
///
/// # Safety
/// As for [`put_status`].
unsafe fn put_empty(status: *mut Status) {
    // SAFETY: the caller's contract.
    unsafe { put_status(status, ANY_SOURCE, abi::ANY_TAG, 0) };
}

/// A completion from the Endpoint's result, ranks in communicator `c`.
pub fn completion(c: Option<&Comm>, r: nemesis::Result<nemesis::Status>) -> Completion {
    let rank = |w: u32| c.map_or(-1, |c| c.rank_of_world(w));
    match r {
        Ok(s) => Completion { source: rank(s.source), tag: s.tag, count: s.len as i64, code: abi::SUCCESS, why: None },
        Err(e) => {
            let (source, tag, count) = match e {
                nemesis::Error::Truncated { capacity, sender, tag, .. } => (rank(sender), tag, capacity as i64),
                nemesis::Error::PeerDied { rank: r } => (rank(r), abi::ANY_TAG, 0),
                _ => (ANY_SOURCE, abi::ANY_TAG, 0),
            };
            Completion { source, tag, count, code: code_of(&e), why: Some(Why::Endpoint(e)) }
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Blocking send and receive.

/// `MPI_Send` (`sync`: `MPI_Ssend`) with every argument checked: the path of everything the
/// fast path ([`send`]) does not take.
///
/// # Safety
/// MPI's contract: `buf` holds `count` elements of `dt`.
#[inline(never)]
#[allow(clippy::too_many_arguments)]
pub unsafe fn send_checked(
    st: &mut State,
    buf: *const c_void,
    count: c_int,
    dt: Datatype,
    dest: c_int,
    tag: c_int,
    comm: abi::Comm,
    sync: bool,
) -> Res<()> {
    let State { phase, ep, comms, .. } = st;
    let Some(ep) = ep.as_mut() else { return Err(not_running(*phase)) };
    let (ci, c) = comm_at(comms, comm)?;
    let len = byte_len(count, dt, ci, buf.is_null())?;
    if dest as u32 >= c.size {
        return if dest == PROC_NULL { Ok(()) } else { Err(bad_rank(ci, dest, c.size)) };
    }
    let to = c.world_of(dest as u32);
    // SAFETY: MPI's contract: `len` readable bytes at `buf`.
    let data = unsafe { in_bytes(buf, len) };
    let r = if sync { ep.ssend(data, to, tag, c.ctx) } else { ep.send(data, to, tag, c.ctx) };
    r.map_err(|e| Fail::endpoint(ci, e))
}

/// `MPI_Recv` with every argument checked: the path of everything the fast path ([`recv`]) does
/// not take.
///
/// # Safety
/// MPI's contract: `buf` has room for `count` elements of `dt`; `status` is null,
/// `MPI_STATUS_IGNORE` or writable.
#[inline(never)]
#[allow(clippy::too_many_arguments)]
pub unsafe fn recv_checked(
    st: &mut State,
    buf: *mut c_void,
    count: c_int,
    dt: Datatype,
    source: c_int,
    tag: c_int,
    comm: abi::Comm,
    status: *mut Status,
) -> Res<()> {
    let State { phase, ep, comms, .. } = st;
    let Some(ep) = ep.as_mut() else { return Err(not_running(*phase)) };
    let (ci, c) = comm_at(comms, comm)?;
    let len = byte_len(count, dt, ci, buf.is_null())?;
    let from = if source as u32 >= c.size {
        match source {
            ANY_SOURCE => nemesis::ANY_SOURCE,
            PROC_NULL => {
                // SAFETY: MPI's contract on `status`.
                unsafe { put_status(status, PROC_NULL, abi::ANY_TAG, 0) };
                return Ok(());
            }
            _ => return Err(bad_rank(ci, source, c.size)),
        }
    } else {
        c.world_of(source as u32) as c_int
    };
    // SAFETY: MPI's contract: `len` writable bytes at `buf`.
    let data = unsafe { out_bytes(buf, len) };
    match ep.recv(data, from, tag, c.ctx) {
        Ok(s) => {
            // SAFETY: MPI's contract on `status`.
            unsafe { put_status(status, c.rank_of_world(s.source), s.tag, s.len as i64) };
            Ok(())
        }
        Err(e) => Err(recv_failed(comms, ci, e, status)),
    }
}

/// `MPI_Send` (`sync`: `MPI_Ssend`): the fast path. One combined test admits the common call — a
/// communicator among the first [`FAST_COMMS`](crate::state::FAST_COMMS), a predefined datatype,
/// a count ≥ 0, a destination in the communicator, a buffer — and goes straight to
/// `Endpoint::send`; anything else (`MPI_PROC_NULL`, errors, MPI not running) takes
/// [`send_checked`].
///
/// # Safety
/// MPI's contract: `buf` holds `count` elements of `dt`.
#[inline(always)]
#[allow(clippy::too_many_arguments)]
pub unsafe fn send(
    st: &mut State,
    buf: *const c_void,
    count: c_int,
    dt: Datatype,
    dest: c_int,
    tag: c_int,
    comm: abi::Comm,
    sync: bool,
) -> Res<()> {
    let i = index_of(comm);
    if let Some(&f) = st.fast.get(i)
        && let Some(size) = datatype::size_of_handle(dt)
        && count >= 0
        && (dest as u32) < f.size
    {
        let len = count as usize * size;
        let data: &[u8] = if buf.is_null() {
            if len != 0 {
                // SAFETY: as for this function.
                return unsafe { send_checked(st, buf, count, dt, dest, tag, comm, sync) };
            }
            &[]
        } else {
            // SAFETY: MPI's contract: `len` readable bytes at `buf` (non-null).
            unsafe { std::slice::from_raw_parts(buf as *const u8, len) }
        };
        // SAFETY: `world` has `size` entries (the fast table's invariant) and `dest < size`.
        let to = unsafe { *f.world.add(dest as usize) };
        // SAFETY: a fast entry with a non-zero size exists only while the Endpoint does (the
        // table's invariant, `State::fast`).
        let ep = unsafe { st.ep.as_mut().unwrap_unchecked() };
        let r = if sync { ep.ssend(data, to, tag, f.ctx) } else { ep.send(data, to, tag, f.ctx) };
        return r.map_err(|e| Fail::endpoint(i, e));
    }
    // SAFETY: as for this function.
    unsafe { send_checked(st, buf, count, dt, dest, tag, comm, sync) }
}

/// `MPI_Recv`: the fast path, as for [`send`]; a specific source or `MPI_ANY_SOURCE`. A failed
/// receive (truncation...) fills the status on the validating path's terms.
///
/// # Safety
/// MPI's contract: `buf` has room for `count` elements of `dt`; `status` is null,
/// `MPI_STATUS_IGNORE` or writable.
#[inline(always)]
#[allow(clippy::too_many_arguments)]
pub unsafe fn recv(
    st: &mut State,
    buf: *mut c_void,
    count: c_int,
    dt: Datatype,
    source: c_int,
    tag: c_int,
    comm: abi::Comm,
    status: *mut Status,
) -> Res<()> {
    let i = index_of(comm);
    if let Some(&f) = st.fast.get(i)
        && let Some(size) = datatype::size_of_handle(dt)
        && count >= 0
        && let Some(from) = if (source as u32) < f.size {
            // SAFETY: `world` has `size` entries and `source < size`.
            Some(unsafe { *f.world.add(source as usize) as c_int })
        } else if source == ANY_SOURCE && f.size != 0 {
            Some(nemesis::ANY_SOURCE)
        } else {
            None
        }
        && !(buf.is_null() && count != 0)
    {
        let len = count as usize * size;
        let data: &mut [u8] = if buf.is_null() {
            &mut []
        } else {
            // SAFETY: MPI's contract: `len` writable bytes at `buf` (non-null); they may be
            // uninitialized in C's sense, the Endpoint only writes them.
            unsafe { std::slice::from_raw_parts_mut(buf as *mut u8, len) }
        };
        // SAFETY: a fast entry with a non-zero size exists only while the Endpoint does.
        let ep = unsafe { st.ep.as_mut().unwrap_unchecked() };
        return match ep.recv(data, from, tag, f.ctx) {
            Ok(s) => {
                // SAFETY: `from_world` has an entry per job rank; `s.source` is one.
                let src = unsafe { *f.from_world.add(s.source as usize) };
                // SAFETY: MPI's contract on `status`.
                unsafe { put_status(status, src, s.tag, s.len as i64) };
                Ok(())
            }
            Err(e) => Err(recv_failed(&st.comms, i, e, status)),
        };
    }
    // SAFETY: as for this function.
    unsafe { recv_checked(st, buf, count, dt, source, tag, comm, status) }
}

/// A receive that failed in the Endpoint: fills the status (a truncated receive still reports
/// its message) and returns the failure.
#[cold]
#[inline(never)]
fn recv_failed(comms: &[Comm], ci: usize, e: nemesis::Error, status: *mut Status) -> Fail {
    let done = completion(comms.get(ci), Err(e));
    // SAFETY: MPI's contract on `status` (the caller's).
    unsafe { put_status(status, done.source, done.tag, done.count) };
    Fail { code: done.code, comm: Some(ci), why: done.why.unwrap_or(Why::Arg("receive failed")) }
}

// ---------------------------------------------------------------------------------------------
// Non-blocking send and receive.

/// `MPI_Isend` (`sync`: `MPI_Issend`-like, used by nothing exported yet but kept symmetric).
///
/// # Safety
/// MPI's contract: `buf` holds `count` elements of `dt` and stays valid and unchanged until the
/// request completes; `request` is writable.
#[allow(clippy::too_many_arguments)]
#[inline(always)]
pub unsafe fn isend(
    st: &mut State,
    buf: *const c_void,
    count: c_int,
    dt: Datatype,
    dest: c_int,
    tag: c_int,
    comm: abi::Comm,
    request: *mut abi::Request,
) -> Res<()> {
    let State { phase, ep, comms, reqs, .. } = st;
    let Some(ep) = ep.as_mut() else { return Err(not_running(*phase)) };
    let (ci, c) = comm_at(comms, comm)?;
    if request.is_null() {
        return Err(null_arg(Some(ci), "null request pointer"));
    }
    let len = byte_len(count, dt, ci, buf.is_null())?;
    let slot = if dest as u32 >= c.size {
        if dest != PROC_NULL {
            return Err(bad_rank(ci, dest, c.size));
        }
        Slot::Done { comm: ci as u32, done: Completion::proc_null() }
    } else {
        let to = c.world_of(dest as u32);
        // SAFETY: MPI's contract: the buffer stays valid and unchanged until the request completes.
        let r = unsafe { ep.isend_raw(buf as *const u8, len, to, tag, c.ctx) }.map_err(|e| Fail::endpoint(ci, e))?;
        Slot::Pending { ep: r, comm: ci as u32 }
    };
    let h = reqs.insert(slot).ok_or_else(|| too_many(ci))?;
    // SAFETY: checked non-null; MPI's contract.
    unsafe { *request = h };
    Ok(())
}

#[cold]
fn too_many(ci: usize) -> Fail {
    Fail::new(abi::ERR_INTERN, Some(ci), Why::Arg("too many active requests"))
}

/// `MPI_Irecv`.
///
/// # Safety
/// MPI's contract: `buf` has room for `count` elements of `dt`, untouched until the request
/// completes; `request` is writable.
#[allow(clippy::too_many_arguments)]
#[inline(always)]
pub unsafe fn irecv(
    st: &mut State,
    buf: *mut c_void,
    count: c_int,
    dt: Datatype,
    source: c_int,
    tag: c_int,
    comm: abi::Comm,
    request: *mut abi::Request,
) -> Res<()> {
    let State { phase, ep, comms, reqs, .. } = st;
    let Some(ep) = ep.as_mut() else { return Err(not_running(*phase)) };
    let (ci, c) = comm_at(comms, comm)?;
    if request.is_null() {
        return Err(null_arg(Some(ci), "null request pointer"));
    }
    let len = byte_len(count, dt, ci, buf.is_null())?;
    let from = if source as u32 >= c.size {
        match source {
            ANY_SOURCE => Some(nemesis::ANY_SOURCE),
            PROC_NULL => None,
            _ => return Err(bad_rank(ci, source, c.size)),
        }
    } else {
        Some(c.world_of(source as u32) as c_int)
    };
    let slot = match from {
        None => Slot::Done { comm: ci as u32, done: Completion::proc_null() },
        Some(from) => {
            // SAFETY: MPI's contract: the buffer is writable and untouched until completion.
            let r =
                unsafe { ep.irecv_raw(buf as *mut u8, len, from, tag, c.ctx) }.map_err(|e| Fail::endpoint(ci, e))?;
            Slot::Pending { ep: r, comm: ci as u32 }
        }
    };
    let h = reqs.insert(slot).ok_or_else(|| too_many(ci))?;
    // SAFETY: checked non-null; MPI's contract.
    unsafe { *request = h };
    Ok(())
}

/// `MPI_Sendrecv`: the send is started, the receive done, then the send completed, so two ranks
/// exchanging with each other never wait on one another.
///
/// # Safety
/// MPI's contract on the buffers and `status`.
#[allow(clippy::too_many_arguments)]
pub unsafe fn sendrecv(
    st: &mut State,
    sendbuf: *const c_void,
    sendcount: c_int,
    sendtype: Datatype,
    dest: c_int,
    sendtag: c_int,
    recvbuf: *mut c_void,
    recvcount: c_int,
    recvtype: Datatype,
    source: c_int,
    recvtag: c_int,
    comm: abi::Comm,
    status: *mut Status,
) -> Res<()> {
    let mut req = REQUEST_NULL;
    // SAFETY: MPI's contract; the send buffer outlives the request, completed below.
    unsafe { isend(st, sendbuf, sendcount, sendtype, dest, sendtag, comm, &mut req) }?;
    // SAFETY: MPI's contract.
    let r = unsafe { recv(st, recvbuf, recvcount, recvtype, source, recvtag, comm, status) };
    // SAFETY: `req` is ours.
    let w = unsafe { wait(st, &mut req, std::ptr::null_mut()) };
    r.and(w)
}

// ---------------------------------------------------------------------------------------------
// Completion.

/// Brings the request in slot `i` to completion if it can (waiting if `block`): a pending slot
/// that completes becomes `Done` in place. True if the slot is `Done`.
fn progress_slot(st: &mut State, i: usize, block: bool) -> Res<bool> {
    let State { phase, ep, comms, reqs, .. } = st;
    let slot = reqs.at_mut(i).ok_or_else(|| bad_request(-1))?;
    let Slot::Pending { ep: r, comm } = *slot else { return Ok(true) };
    let Some(ep) = ep.as_mut() else { return Err(not_running(*phase)) };
    let res = if block {
        ep.wait(r)
    } else {
        match ep.test(r) {
            Ok(None) => return Ok(false),
            Ok(Some(s)) => Ok(s),
            Err(e) => Err(e),
        }
    };
    *slot = Slot::Done { comm, done: completion(comms.get(comm as usize), res) };
    Ok(true)
}

/// Completes the request in slot `i` (waiting if `block`) and frees it: its communicator index
/// and result, or `None` if it is still in flight.
fn finish(st: &mut State, i: usize, block: bool) -> Res<Option<(u32, Completion)>> {
    if !progress_slot(st, i, block)? {
        return Ok(None);
    }
    match st.reqs.remove_at(i) {
        Some(Slot::Done { comm, done }) => Ok(Some((comm, done))),
        _ => Err(bad_request(-1)),
    }
}

/// Turns a failed completion into the call's failure.
fn failure(comm: u32, done: Completion) -> Fail {
    Fail { code: done.code, comm: Some(comm as usize), why: done.why.unwrap_or(Why::Arg("request failed")) }
}

#[cold]
fn bad_request(h: abi::Request) -> Fail {
    Fail::new(abi::ERR_REQUEST, None, Why::Request(h))
}

/// `MPI_Wait`.
///
/// # Safety
/// `request` valid for reads and writes; `status` as for [`put_status`].
#[inline(always)]
pub unsafe fn wait(st: &mut State, request: *mut abi::Request, status: *mut Status) -> Res<()> {
    if st.ep.is_none() {
        return Err(not_running(st.phase));
    }
    if request.is_null() {
        return Err(null_arg(None, "null request pointer"));
    }
    // SAFETY: checked non-null; MPI's contract.
    let h = unsafe { *request };
    if h == REQUEST_NULL {
        // SAFETY: MPI's contract on `status`.
        unsafe { put_empty(status) };
        return Ok(());
    }
    let i = st.reqs.index(h).ok_or_else(|| bad_request(h))?;
    let Some((comm, done)) = finish(st, i, true)? else { return Err(bad_request(h)) };
    // SAFETY: MPI's contract.
    unsafe {
        *request = REQUEST_NULL;
        put_status(status, done.source, done.tag, done.count);
    }
    if done.code != abi::SUCCESS {
        return Err(failure(comm, done));
    }
    Ok(())
}

/// `MPI_Test`.
///
/// # Safety
/// `request`, `flag` valid; `status` as for [`put_status`].
pub unsafe fn test(st: &mut State, request: *mut abi::Request, flag: *mut c_int, status: *mut Status) -> Res<()> {
    if st.ep.is_none() {
        return Err(not_running(st.phase));
    }
    if request.is_null() || flag.is_null() {
        return Err(null_arg(None, "null request or flag pointer"));
    }
    // SAFETY: checked non-null; MPI's contract.
    let h = unsafe { *request };
    if h == REQUEST_NULL {
        // SAFETY: MPI's contract.
        unsafe {
            *flag = 1;
            put_empty(status);
        }
        return Ok(());
    }
    let i = st.reqs.index(h).ok_or_else(|| bad_request(h))?;
    match finish(st, i, false)? {
        None => {
            // SAFETY: MPI's contract.
            unsafe { *flag = 0 };
            Ok(())
        }
        Some((comm, done)) => {
            // SAFETY: MPI's contract.
            unsafe {
                *flag = 1;
                *request = REQUEST_NULL;
                put_status(status, done.source, done.tag, done.count);
            }
            if done.code != abi::SUCCESS { Err(failure(comm, done)) } else { Ok(()) }
        }
    }
}

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

/// `MPI_Waitall`: completes every request, in order (the Endpoint progresses all of them
/// meanwhile, so they may complete in any order); `MPI_ERR_IN_STATUS` if any failed.
///
/// # Safety
/// MPI's contract on the arrays.
pub unsafe fn waitall(st: &mut State, count: c_int, reqs: *mut abi::Request, statuses: *mut Status) -> Res<()> {
    if st.ep.is_none() {
        return Err(not_running(st.phase));
    }
    // SAFETY: MPI's contract.
    let hs = unsafe { request_array(reqs, count) }?;
    let mut first: Option<(usize, u32, Completion)> = None;
    for (k, h) in hs.iter_mut().enumerate() {
        let done = if *h == REQUEST_NULL {
            (0, Completion { source: ANY_SOURCE, tag: abi::ANY_TAG, count: 0, code: abi::SUCCESS, why: None })
        } else {
            let i = st.reqs.index(*h).ok_or_else(|| bad_request(*h))?;
            let Some(d) = finish(st, i, true)? else { return Err(bad_request(*h)) };
            *h = REQUEST_NULL;
            d
        };
        // SAFETY: MPI's contract: `count` statuses or the ignore sentinel.
        unsafe { put_status_at(statuses, k, done.1.status()) };
        if done.1.code != abi::SUCCESS && first.is_none() {
            first = Some((k, done.0, done.1));
        }
    }
    match first {
        None => Ok(()),
        Some((k, comm, done)) => {
            Err(Fail::new(abi::ERR_IN_STATUS, Some(comm as usize), Why::InStatus { index: k, code: done.code }))
        }
    }
}

/// `MPI_Testall`: completes all the requests if all are complete, else none (their results,
/// if some completed, are kept for the call that completes them).
///
/// # Safety
/// MPI's contract on the arrays and `flag`.
pub unsafe fn testall(
    st: &mut State,
    count: c_int,
    reqs: *mut abi::Request,
    flag: *mut c_int,
    statuses: *mut Status,
) -> Res<()> {
    if st.ep.is_none() {
        return Err(not_running(st.phase));
    }
    if flag.is_null() {
        return Err(null_arg(None, "null flag pointer"));
    }
    // SAFETY: MPI's contract.
    let hs = unsafe { request_array(reqs, count) }?;
    let mut all = true;
    for &h in hs.iter() {
        if h == REQUEST_NULL {
            continue;
        }
        let i = st.reqs.index(h).ok_or_else(|| bad_request(h))?;
        all &= progress_slot(st, i, false)?;
    }
    if !all {
        // SAFETY: checked non-null.
        unsafe { *flag = 0 };
        return Ok(());
    }
    // SAFETY: checked non-null.
    unsafe { *flag = 1 };
    // SAFETY: MPI's contract on `statuses`.
    unsafe { waitall(st, count, reqs, statuses) }
}

/// `MPI_Waitany`.
///
/// # Safety
/// MPI's contract on the array, `index` and `status`.
pub unsafe fn waitany(
    st: &mut State,
    count: c_int,
    reqs: *mut abi::Request,
    index: *mut c_int,
    status: *mut Status,
) -> Res<()> {
    if st.ep.is_none() {
        return Err(not_running(st.phase));
    }
    if index.is_null() {
        return Err(null_arg(None, "null index pointer"));
    }
    // SAFETY: MPI's contract.
    let hs = unsafe { request_array(reqs, count) }?;
    // A request already complete (a PROC_NULL operation, a result Testall kept) goes first.
    let mut pending: Vec<(usize, usize, nemesis::Request)> = Vec::new();
    let mut ready = None;
    for (k, &h) in hs.iter().enumerate() {
        if h == REQUEST_NULL {
            continue;
        }
        let i = st.reqs.index(h).ok_or_else(|| bad_request(h))?;
        match st.reqs.at_mut(i) {
            Some(Slot::Pending { ep, .. }) => pending.push((k, i, *ep)),
            _ => {
                ready = Some((k, i));
                break;
            }
        }
    }
    let (k, i) = match ready {
        Some(r) => r,
        None if pending.is_empty() => {
            // SAFETY: MPI's contract.
            unsafe {
                *index = abi::UNDEFINED;
                put_empty(status);
            }
            return Ok(());
        }
        None => {
            let eps: Vec<nemesis::Request> = pending.iter().map(|p| p.2).collect();
            let ep = st.ep.as_mut().ok_or_else(|| not_running(st.phase))?;
            let (j, res) = ep.wait_any(&eps).map_err(|e| Fail::endpoint(0, e))?;
            let (k, i, _) = pending[j];
            if let Some(slot) = st.reqs.at_mut(i)
                && let Slot::Pending { comm, .. } = *slot
            {
                *slot = Slot::Done { comm, done: completion(st.comms.get(comm as usize), res) };
            }
            (k, i)
        }
    };
    let Some(Slot::Done { comm, done }) = st.reqs.remove_at(i) else { return Err(bad_request(hs[k])) };
    hs[k] = REQUEST_NULL;
    // SAFETY: MPI's contract.
    unsafe {
        *index = k as c_int;
        put_status(status, done.source, done.tag, done.count);
    }
    if done.code != abi::SUCCESS { Err(failure(comm, done)) } else { Ok(()) }
}

// ---------------------------------------------------------------------------------------------
// Probes and counts.

/// `MPI_Probe` (`flag` null) and `MPI_Iprobe`.
///
/// # Safety
/// `flag` null or writable; `status` as for [`put_status`].
pub unsafe fn probe(
    st: &mut State,
    source: c_int,
    tag: c_int,
    comm: abi::Comm,
    flag: *mut c_int,
    status: *mut Status,
    blocking: bool,
) -> Res<()> {
    let State { phase, ep, comms, .. } = st;
    let Some(ep) = ep.as_mut() else { return Err(not_running(*phase)) };
    let (ci, c) = comm_at(comms, comm)?;
    if !blocking && flag.is_null() {
        return Err(null_arg(Some(ci), "null flag pointer"));
    }
    let from = if source as u32 >= c.size {
        match source {
            ANY_SOURCE => nemesis::ANY_SOURCE,
            PROC_NULL => {
                // SAFETY: MPI's contract.
                unsafe {
                    if !blocking {
                        *flag = 1;
                    }
                    put_status(status, PROC_NULL, abi::ANY_TAG, 0);
                }
                return Ok(());
            }
            _ => return Err(bad_rank(ci, source, c.size)),
        }
    } else {
        c.world_of(source as u32) as c_int
    };
    let found = if blocking {
        Some(ep.probe(from, tag, c.ctx).map_err(|e| Fail::endpoint(ci, e))?)
    } else {
        ep.iprobe(from, tag, c.ctx).map_err(|e| Fail::endpoint(ci, e))?
    };
    // SAFETY: MPI's contract.
    unsafe {
        if !blocking {
            *flag = c_int::from(found.is_some());
        }
        if let Some(s) = found {
            put_status(status, c.rank_of_world(s.source), s.tag, s.len as i64);
        }
    }
    Ok(())
}

/// `MPI_Get_count`: whole elements of `dt` in the message, or `MPI_UNDEFINED`.
///
/// # Safety
/// `status` readable, `count` writable.
pub unsafe fn get_count(status: *const Status, dt: Datatype, count: *mut c_int) -> Res<()> {
    if !wants(status) || count.is_null() {
        return Err(null_arg(None, "null status or count pointer"));
    }
    let size = datatype::size_of_handle(dt).ok_or_else(|| Fail::new(abi::ERR_TYPE, None, Why::Type(dt)))?;
    // SAFETY: checked; MPI's contract.
    let bytes = unsafe { (*status).count() };
    let n = if bytes >= 0 && (bytes as usize).is_multiple_of(size) {
        c_int::try_from(bytes as usize / size).ok()
    } else {
        None
    };
    // SAFETY: checked non-null.
    unsafe { *count = n.unwrap_or(abi::UNDEFINED) };
    Ok(())
}
