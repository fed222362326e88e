//! Point-to-point: blocking send and receive (the fast and validating paths), probes and counts
//! here; the fused paths in `fused.rs`, starting non-blocking and persistent operations in
//! [`start`], completing and cancelling them in [`complete`], the buffered mode's attached buffer
//! in [`bsend`], matched probes in [`mprobe`].
//!
//! `MPI_Send` and `MPI_Recv` try the fused path ([`send_fused`], [`recv_fused`]), then the fast
//! path ([`send_fast`], [`recv_fast`]), then the validating one ([`send_checked`],
//! [`recv_checked`]). Every fast path admits the same common call ([`admit`]): a communicator of the
//! fast-path table (`State::fast`), a predefined datatype, a count ≥ 0, a member and a buffer;
//! everything rarely taken (`MPI_PROC_NULL`, errors, communicators past the table, MPI not
//! running, `MPI_THREAD_MULTIPLE`) goes to the validating path. No allocation, hashing or locking
//! on the fast paths; under `MPI_THREAD_MULTIPLE` every call holds the big lock and waits release
//! it (`state::Access`). Why and what it costs: `docs/design/mpi.md`, "Point-to-point fast paths".
//!
//! Ranks in statuses are communicator ranks; `MPI_ERROR` is set only by the calls that return
//! several statuses (`MPI_Waitall`, `MPI_Testall`, `MPI_Waitsome`, `MPI_Testsome`), as MPI-3.1
//! §3.2.5 says.

pub mod bsend;
pub mod complete;
pub mod compound;
mod fused;
pub mod mprobe;
pub mod partitioned;
pub mod start;
pub mod status;
pub use fused::{recv_fused, send_fused};

use std::ffi::{c_int, c_void};
use std::ptr::NonNull;
use std::sync::Arc;

use crate::abi::{self, ANY_SOURCE, Count, Datatype, PROC_NULL, STATUS_IGNORE, Status};
use crate::comm::{Comm, index_of};
use crate::datatype::{self, Layout};
use crate::error::{Fail, Res, Why, code_of};
use crate::request::{Completion, Mode};
use crate::state::{Access, State, not_running};

/// The live communicator named by `h`, and its index.
#[inline(always)]
pub fn comm_at(comms: &[Arc<Comm>], h: abi::Comm) -> Res<(usize, &Arc<Comm>)> {
    let i = index_of(h);
    match comms.get(i) {
        Some(c) if c.live => Ok((i, c)),
        _ => Err(bad_comm(h)),
    }
}

/// As [`comm_at`] for calls defined on intracommunicators only (collectives not made for
/// intercommunicators, topologies, `MPI_Comm_create_group`): an intercommunicator is
/// `MPI_ERR_COMM`.
pub fn intra_at(comms: &[Arc<Comm>], h: abi::Comm) -> Res<(usize, &Arc<Comm>)> {
    let (i, c) = comm_at(comms, h)?;
    if c.local.is_some() {
        return Err(not_intra(i));
    }
    Ok((i, c))
}

/// The failure of a call on an intercommunicator that takes intracommunicators only.
#[cold]
pub fn not_intra(ci: usize) -> Fail {
    Fail::new(abi::ERR_COMM, Some(ci), Why::Arg("an intercommunicator where an intracommunicator is required"))
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

/// A buffer argument with an `MPI_Count` count, resolved for communicator index `ci`: what
/// [`datatype::layout`] checks, for every count (the `_c` forms pass theirs, the `int` forms
/// theirs widened). A count beyond `INT_MAX` describes `count × size` bytes as such: the
/// Endpoint's lengths are `usize` throughout.
pub fn layout_of(types: &datatype::Types, buf: *const u8, count: Count, dt: Datatype, ci: usize) -> Res<Layout> {
    if let Ok(n) = c_int::try_from(count) {
        return datatype::layout(types, buf, n, dt, ci);
    }
    if count < 0 {
        return Err(Fail::new(abi::ERR_COUNT, Some(ci), Why::Arg("negative count")));
    }
    let n = count as usize;
    let desc = datatype::resolve(types, dt, ci)?;
    let Some(len) = desc.size.checked_mul(n).filter(|&l| l <= isize::MAX as usize) else {
        return Err(Fail::new(abi::ERR_COUNT, Some(ci), Why::Arg("count × datatype size exceeds the address space")));
    };
    if buf.is_null() && len > 0 && datatype::size_of_handle(dt).is_some() {
        return Err(Fail::new(abi::ERR_BUFFER, Some(ci), Why::Buffer));
    }
    if desc.is_dense() || len == 0 {
        return Ok(Layout::Contig { ptr: buf.wrapping_offset(desc.first_byte()).cast_mut(), len });
    }
    Ok(Layout::Typed { base: buf.cast_mut(), count: n, desc })
}

#[cold]
fn bad_rank(ci: usize, rank: c_int, size: u32) -> Fail {
    Fail::new(abi::ERR_RANK, Some(ci), Why::Rank { rank, size })
}

#[cold]
pub(crate) fn null_arg(ci: Option<usize>, what: &'static str) -> Fail {
    Fail::new(abi::ERR_ARG, ci, Why::Arg(what))
}

/// The job rank to send to for communicator rank `dest`; `None` for `MPI_PROC_NULL`.
#[inline]
pub fn dest_of(c: &Comm, ci: usize, dest: c_int) -> Res<Option<u32>> {
    if (dest as u32) < c.size {
        Ok(Some(c.world_of(dest as u32)))
    } else if dest == PROC_NULL {
        Ok(None)
    } else {
        Err(bad_rank(ci, dest, c.size))
    }
}

/// The Endpoint's source for communicator rank `source` (`nemesis::ANY_SOURCE` for
/// `MPI_ANY_SOURCE`); `None` for `MPI_PROC_NULL`.
#[inline]
pub fn source_of(c: &Comm, ci: usize, source: c_int) -> Res<Option<i32>> {
    if (source as u32) < c.size {
        Ok(Some(c.world_of(source as u32) as i32))
    } else if source == ANY_SOURCE {
        Ok(Some(nemesis::ANY_SOURCE))
    } else if source == PROC_NULL {
        Ok(None)
    } else {
        Err(bad_rank(ci, source, c.size))
    }
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
pub unsafe fn write_out<T>(out: *mut T, v: T) -> Res<()> {
    if out.is_null() {
        return Err(null_arg(None, "null output pointer"));
    }
    // SAFETY: checked non-null; the caller's contract.
    unsafe { out.write(v) };
    Ok(())
}

/// True if `status` points at a status to fill (not null, not `MPI_STATUS_IGNORE`).
#[inline(always)]
pub fn wants(status: *const Status) -> bool {
    status as usize > STATUS_IGNORE
}

/// Fills a single-completion status (every field but `MPI_ERROR`), not cancelled.
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

/// Fills a single-completion status from a completion (every field but `MPI_ERROR`).
///
/// # Safety
/// As for [`put_status`].
pub unsafe fn put_completion(status: *mut Status, done: &Completion) {
    if wants(status) {
        let s = done.status();
        // SAFETY: the caller's contract; not null nor the ignore sentinel.
        unsafe {
            (*status).count_lo = s.count_lo;
            (*status).count_hi_and_cancelled = s.count_hi_and_cancelled;
            (*status).source = s.source;
            (*status).tag = s.tag;
        }
    }
}

/// A completion from the Endpoint's result, ranks in communicator `c`.
pub fn completion(c: Option<&Comm>, r: nemesis::Result<nemesis::Status>) -> Completion {
    let rank = |w: u32| c.map_or(-1, |c| c.rank_of_world(w));
    match r {
        Ok(s) => Completion::ok(rank(s.source), s.tag, s.len as i64),
        Err(nemesis::Error::Cancelled) => Completion::cancelled(),
        Err(e) => {
            let (source, tag, count) = match e {
                nemesis::Error::Truncated { capacity, sender, tag, .. } => (rank(sender), tag, capacity as i64),
                nemesis::Error::PeerDied { rank: r } => (rank(r), abi::ANY_TAG, 0),
                _ => (ANY_SOURCE, abi::ANY_TAG, 0),
            };
            Completion { source, tag, count, code: code_of(&e), why: Some(Why::Endpoint(e)), cancelled: false }
        }
    }
}

/// A completion from the Endpoint's result, ranks in the communicator of index `ci`.
pub fn completion_in(st: &State, ci: usize, r: nemesis::Result<nemesis::Status>) -> Completion {
    completion(st.comms.get(ci).map(|c| &**c), r)
}

// ---------------------------------------------------------------------------------------------
// Blocking send and receive.

/// `MPI_Send` in any mode with every argument checked: the path of everything the fast path
/// ([`send`]) does not take. Typed (non-contiguous) data is packed first.
///
/// # Safety
/// MPI's contract: `buf` holds `count` elements of `dt`.
#[inline(never)]
#[allow(clippy::too_many_arguments)]
pub unsafe fn send_checked(
    acc: &mut Access,
    buf: *const c_void,
    count: impl Into<Count>,
    dt: Datatype,
    dest: c_int,
    tag: c_int,
    comm: abi::Comm,
    mode: Mode,
) -> Res<()> {
    let st = acc.st();
    let t = start::target(st, buf, count.into(), dt, dest, tag, comm, true)?;
    let Some(to) = t.peer else { return Ok(()) };
    if mode == Mode::Buffered {
        // SAFETY: MPI's contract on the data; the send is finished (or waits for its space to be
        // reclaimed) without the user's buffer.
        let (state, _) = unsafe { start::start_send(st, mode, &t.data, Some(to), tag, t.ctx, t.ci) }?;
        debug_assert!(matches!(state, crate::request::State::Done(_)));
        return Ok(());
    }
    let sync = mode == Mode::Synchronous;
    let sent = match &t.data {
        Layout::Contig { ptr, len } => {
            // SAFETY: MPI's contract: `len` readable bytes.
            let data = unsafe { in_bytes(ptr.cast(), *len) };
            acc.ep_send(data, to as u32, tag, t.ctx, sync)?
        }
        Layout::Typed { base, count, desc } => {
            let (typed, p) = start::pieces_of(*base, *count, desc);
            // SAFETY: the pieces live until the send completes (waited for here); their memory
            // is the user's data (MPI's contract).
            let r = unsafe { acc.ep()?.isend_pieces(p, to as u32, tag, t.ctx, sync) };
            let res = match r {
                Ok(r) => acc.ep_wait(r)?.map(drop),
                Err(e) => Err(e),
            };
            drop(typed);
            res
        }
    };
    sent.map_err(|e| Fail::endpoint(t.ci, e))
}

/// `MPI_Recv` with every argument checked: the path of everything the fast path ([`recv`]) does
/// not take. Typed (non-contiguous) data is scattered into the user's buffer as it arrives.
///
/// # Safety
/// MPI's contract: `buf` has room for `count` elements of `dt`; `status` is null,
/// `MPI_STATUS_IGNORE` or writable.
#[inline(never)]
#[allow(clippy::too_many_arguments)]
pub unsafe fn recv_checked(
    acc: &mut Access,
    buf: *mut c_void,
    count: impl Into<Count>,
    dt: Datatype,
    source: c_int,
    tag: c_int,
    comm: abi::Comm,
    status: *mut Status,
) -> Res<()> {
    let st = acc.st();
    let t = start::target(st, buf, count.into(), dt, source, tag, comm, false)?;
    let Some(from) = t.peer else {
        // SAFETY: MPI's contract on `status`.
        unsafe { put_status(status, PROC_NULL, abi::ANY_TAG, 0) };
        return Ok(());
    };
    let r = match &t.data {
        Layout::Contig { ptr, len } => {
            // SAFETY: MPI's contract: `len` writable bytes at `ptr`.
            let data = unsafe { out_bytes(ptr.cast(), *len) };
            acc.ep_recv(data, from, tag, t.ctx)?
        }
        Layout::Typed { base, count, desc } => {
            let (typed, p) = start::pieces_of(*base, *count, desc);
            // SAFETY: the pieces live until the receive completes (waited for here); their
            // memory is the user's buffer (MPI's contract).
            let r = match unsafe { acc.ep()?.irecv_pieces(p, from, tag, t.ctx) } {
                Ok(r) => acc.ep_wait(r)?,
                Err(e) => Err(e),
            };
            drop(typed);
            r
        }
    };
    let st = acc.st();
    let done = completion_in(st, t.ci, r);
    // SAFETY: MPI's contract on `status`.
    unsafe { put_status(status, done.source, done.tag, done.count) };
    if done.code != abi::SUCCESS {
        return Err(Fail { code: done.code, comm: Some(t.ci), why: done.why.unwrap_or(Why::Arg("receive failed")) });
    }
    Ok(())
}

/// What every point-to-point fast path admits of its arguments (the fused paths, [`send_fast`],
/// [`recv_fast`], `start::istart_fast`): a communicator of the fast table and a count ≥ 0 of a
/// predefined datatype. Returns the communicator's index, its entry and the data's length in
/// bytes; `None` (the validating path) for anything else. The buffer ([`buffer`]) and the peer
/// ([`Fast::job`](crate::state::Fast::job), [`fast_source`]; the fused paths
/// [`Fast::member`](crate::state::Fast::member)) are the caller's to test, in the order that
/// costs it least.
#[inline(always)]
pub(crate) fn admit(
    st: &State,
    count: c_int,
    dt: Datatype,
    comm: abi::Comm,
) -> Option<(usize, crate::state::Fast, usize)> {
    let ci = index_of(comm);
    let f = *st.fast.get(ci)?;
    let size = datatype::size_of_handle(dt)?;
    if count < 0 {
        return None;
    }
    Some((ci, f, count as usize * size))
}

/// The fast paths' test of the buffer of `len` bytes at `buf`: not null unless there is no data.
/// Returns it as a pointer that is never null (dangling for no data); `None` for a null buffer
/// that should hold data (the validating path reports it).
#[inline(always)]
pub(crate) fn buffer(buf: *const c_void, len: usize) -> Option<NonNull<u8>> {
    match NonNull::new(buf as *mut u8) {
        Some(p) => Some(p),
        None if len == 0 => Some(NonNull::dangling()),
        None => None,
    }
}

/// The fast paths' test of a source: the Endpoint's source for communicator rank `source` of
/// fast entry `f` (a member, or `MPI_ANY_SOURCE` on a live communicator); `None` for anything else
/// (`MPI_PROC_NULL`, errors).
#[inline(always)]
pub(crate) fn fast_source(f: &crate::state::Fast, source: c_int) -> Option<c_int> {
    if let Some(j) = f.job(source) {
        Some(j as c_int)
    } else if source == ANY_SOURCE && f.size != 0 {
        Some(nemesis::ANY_SOURCE)
    } else {
        None
    }
}

/// `MPI_Send` (`sync`: `MPI_Ssend`): the fast path, run on the state itself when calls are not
/// locked (`state::call_fast`). The common call ([`admit`], and a destination in the
/// communicator) goes straight to `Endpoint::send`; anything else (`MPI_PROC_NULL`, errors, MPI
/// not running) returns `None` for [`send_checked`].
///
/// # Safety
/// MPI's contract: `buf` holds `count` elements of `dt`.
#[inline(always)]
#[allow(clippy::too_many_arguments)]
pub unsafe fn send_fast(
    st: &mut State,
    buf: *const c_void,
    count: c_int,
    dt: Datatype,
    dest: c_int,
    tag: c_int,
    comm: abi::Comm,
    sync: bool,
) -> Option<Res<()>> {
    let (i, f, len) = admit(st, count, dt, comm)?;
    // The member's bound, the buffer, then its rank (the cheapest order: one register fewer).
    // A blocking send while non-blocking collectives are in flight goes the general way, which
    // advances them while it waits (`Access::may_block`); while receives are deferred too, which
    // posts them first (a peer's `MPI_Ssend` may wait for one of them to match).
    if dest as u32 >= f.size || !st.colls.is_empty() || !st.deferred.is_empty() {
        return None;
    }
    let buf = buffer(buf, len)?;
    let to = f.job(dest)?;
    // SAFETY: MPI's contract: `len` readable bytes at `buf` (not null).
    let data = unsafe { std::slice::from_raw_parts(buf.as_ptr(), len) };
    // SAFETY: a fast entry with a non-zero size exists only while the Endpoint does (the table's
    // invariant, `State::fast`).
    let ep = unsafe { st.ep.as_mut().unwrap_unchecked() };
    let r = if sync { ep.ssend(data, to, tag, f.send_ctx) } else { ep.send(data, to, tag, f.send_ctx) };
    Some(r.map_err(|e| Fail::endpoint(i, e)))
}

/// `MPI_Recv`: the fast path, as for [`send_fast`]; a specific source or `MPI_ANY_SOURCE`. A
/// failed receive (truncation...) fills the status on the validating path's terms.
///
/// # Safety
/// MPI's contract: `buf` has room for `count` elements of `dt`; `status` is null,
/// `MPI_STATUS_IGNORE` or writable.
#[inline(always)]
#[allow(clippy::too_many_arguments)]
pub unsafe fn recv_fast(
    st: &mut State,
    buf: *mut c_void,
    count: c_int,
    dt: Datatype,
    source: c_int,
    tag: c_int,
    comm: abi::Comm,
    status: *mut Status,
) -> Option<Res<()>> {
    let (i, f, len) = admit(st, count, dt, comm)?;
    let from = fast_source(&f, source)?;
    // As for `send_fast`.
    if !st.colls.is_empty() || !st.deferred.is_empty() {
        return None;
    }
    let buf = buffer(buf, len)?;
    // SAFETY: MPI's contract: `len` writable bytes at `buf` (not null); they may be
    // uninitialized in C's sense, the Endpoint only writes them.
    let data = unsafe { std::slice::from_raw_parts_mut(buf.as_ptr(), len) };
    // SAFETY: a fast entry with a non-zero size exists only while the Endpoint does.
    let ep = unsafe { st.ep.as_mut().unwrap_unchecked() };
    Some(match ep.recv(data, from, tag, f.ctx) {
        Ok(s) => {
            // SAFETY: `from_world` has an entry per job rank; `s.source` is one.
            let src = unsafe { *f.from_world.add(s.source as usize) };
            // SAFETY: MPI's contract on `status`.
            unsafe { put_status(status, src, s.tag, s.len as i64) };
            Ok(())
        }
        Err(e) => Err(recv_failed(&st.comms, i, e, status)),
    })
}

/// `MPI_Recv` in any thread mode: [`recv_fast`] where it applies, else [`recv_checked`].
///
/// # Safety
/// As for [`recv_fast`].
#[allow(clippy::too_many_arguments)]
pub unsafe fn recv(
    acc: &mut Access,
    buf: *mut c_void,
    count: Count,
    dt: Datatype,
    source: c_int,
    tag: c_int,
    comm: abi::Comm,
    status: *mut Status,
) -> Res<()> {
    if !acc.threaded()
        && let Ok(count) = c_int::try_from(count)
        // SAFETY: as for this function.
        && let Some(r) = unsafe { recv_fast(acc.st(), buf, count, dt, source, tag, comm, status) }
    {
        return r;
    }
    // SAFETY: as for this function.
    unsafe { recv_checked(acc, buf, count, dt, source, tag, comm, status) }
}

/// A receive that failed in the Endpoint: fills the status (a truncated receive still reports
/// its message) and returns the failure.
#[cold]
#[inline(never)]
fn recv_failed(comms: &[Arc<Comm>], ci: usize, e: nemesis::Error, status: *mut Status) -> Fail {
    let done = completion(comms.get(ci).map(|c| &**c), Err(e));
    // SAFETY: MPI's contract on `status` (the caller's).
    unsafe { put_status(status, done.source, done.tag, done.count) };
    Fail { code: done.code, comm: Some(ci), why: done.why.unwrap_or(Why::Arg("receive failed")) }
}

/// `MPI_Sendrecv`: the send is started, the receive done, then the send completed, so two ranks
/// exchanging with each other never wait on one another.
///
/// # Safety
/// MPI's contract on the buffers and `status`.
#[allow(clippy::too_many_arguments)]
pub unsafe fn sendrecv(
    acc: &mut Access,
    sendbuf: *const c_void,
    sendcount: impl Into<Count>,
    sendtype: Datatype,
    dest: c_int,
    sendtag: c_int,
    recvbuf: *mut c_void,
    recvcount: impl Into<Count>,
    recvtype: Datatype,
    source: c_int,
    recvtag: c_int,
    comm: abi::Comm,
    status: *mut Status,
) -> Res<()> {
    let mut req = abi::REQUEST_NULL;
    // SAFETY: MPI's contract; the send buffer outlives the request, completed below.
    unsafe { start::isend(acc, Mode::Standard, sendbuf, sendcount, sendtype, dest, sendtag, comm, &mut req) }?;
    // SAFETY: MPI's contract.
    let r = unsafe { recv(acc, recvbuf, recvcount.into(), recvtype, source, recvtag, comm, status) };
    // SAFETY: `req` is ours.
    let w = unsafe { complete::wait(acc, &mut req, std::ptr::null_mut()) };
    r.and(w)
}

/// `MPI_Sendrecv_replace`: the outgoing data is packed aside and sent from the copy while the
/// incoming message lands in the buffer.
///
/// # Safety
/// MPI's contract on the buffer and `status`.
#[allow(clippy::too_many_arguments)]
pub unsafe fn sendrecv_replace(
    acc: &mut Access,
    buf: *mut c_void,
    count: impl Into<Count>,
    dt: Datatype,
    dest: c_int,
    sendtag: c_int,
    source: c_int,
    recvtag: c_int,
    comm: abi::Comm,
    status: *mut Status,
) -> Res<()> {
    let count = count.into();
    let st = acc.st();
    let t = start::target(st, buf, count, dt, dest, sendtag, comm, true)?;
    // SAFETY: MPI's contract: the buffer holds the data.
    let copy = unsafe { t.data.packed() };
    let len = copy.len() as Count;
    // SAFETY: `copy` lives until the send completes below.
    unsafe {
        sendrecv(
            acc,
            copy.as_ptr().cast(),
            len,
            abi::BYTE,
            dest,
            sendtag,
            buf,
            count,
            dt,
            source,
            recvtag,
            comm,
            status,
        )
    }
}

// ---------------------------------------------------------------------------------------------
// Probes, counts, cancellation flags.

/// `MPI_Probe` (`flag` null) and `MPI_Iprobe`.
///
/// # Safety
/// `flag` null or writable; `status` as for [`put_status`].
pub unsafe fn probe(
    acc: &mut Access,
    source: c_int,
    tag: c_int,
    comm: abi::Comm,
    flag: *mut c_int,
    status: *mut Status,
    blocking: bool,
) -> Res<()> {
    let st = acc.st();
    if st.ep.is_none() {
        return Err(not_running(st.phase));
    }
    let (ci, c) = comm_at(&st.comms, comm)?;
    if !blocking && flag.is_null() {
        return Err(null_arg(Some(ci), "null flag pointer"));
    }
    let Some(from) = source_of(c, ci, source)? else {
        // SAFETY: MPI's contract.
        unsafe {
            if !blocking {
                *flag = 1;
            }
            put_status(status, PROC_NULL, abi::ANY_TAG, 0);
        }
        return Ok(());
    };
    let ctx = c.ctx;
    let found = if blocking {
        Some(acc.ep_probe(from, tag, ctx)?.map_err(|e| Fail::endpoint(ci, e))?)
    } else {
        acc.ep()?.iprobe(from, tag, ctx).map_err(|e| Fail::endpoint(ci, e))?
    };
    let st = acc.st();
    // SAFETY: MPI's contract.
    unsafe {
        if !blocking {
            *flag = c_int::from(found.is_some());
        }
        if let Some(s) = found {
            let src = st.comms.get(ci).map_or(-1, |c| c.rank_of_world(s.source));
            put_status(status, src, s.tag, s.len as i64);
        }
    }
    Ok(())
}

/// `MPI_Test_cancelled`.
///
/// # Safety
/// `status` readable, `flag` writable.
pub unsafe fn test_cancelled(status: *const Status, flag: *mut c_int) -> Res<()> {
    if !wants(status) {
        return Err(null_arg(None, "null status pointer"));
    }
    // SAFETY: checked; MPI's contract.
    let on = unsafe { (*status).cancelled() };
    // SAFETY: the caller's contract.
    unsafe { write_out(flag, c_int::from(on)) }
}
