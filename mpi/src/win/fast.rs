//! The fast paths of the common one-sided calls (below `MPI_THREAD_MULTIPLE`, through
//! `state::call_fast`): `MPI_Put`/`MPI_Get` of a predefined type on both sides,
//! `MPI_Fetch_and_op`/`MPI_Compare_and_swap` on one element of 1, 2, 4 or 8 bytes, and
//! `MPI_Win_flush`, all to a target this process maps (its node's `MPI_Win_allocate` or
//! `MPI_Win_allocate_shared` memory, a node peer's `MPI_Alloc_mem` memory under `MPI_Win_create`,
//! or its own memory), and Put/Get/flush to a node peer reached by CMA. They settle a call with a
//! load or store, a `memcpy`, one native atomic or one `process_vm_writev`/`readv`, and no
//! allocation, reference count or second lookup.
//!
//! Invariant: a fast path settles a call only when the general path would do exactly the same
//! (the same checks, passed, and the same effect); anything else, errors included, returns
//! `None` and the general path ([`super::rma`], [`super::sync`]) runs from the start, so the
//! error reports and the rare cases live in one place.

use std::ffi::{c_int, c_void};
use std::sync::atomic::{Ordering, fence};

use super::atomic::{How, cas_type, combine, lock_mutex, native, unlock_mutex};
use super::{Path, Window};
use crate::abi::{self, Aint, Datatype};
use crate::datatype::{self, size_of_handle};
use crate::error::Res;
use crate::op::OpKind;
use crate::state::State;

/// The window `h`, where target `t`'s bytes at displacement `disp` are and how they are
/// reached (`Path::Mapped` or `Path::Cma` with a known pid), if a fast path may serve an access
/// of `bytes` there: MPI running, a live window that is not dynamic, a member target in an
/// access epoch, the bytes inside its window. The address is in this process (mapped) or in
/// the CMA peer's.
#[inline(always)]
fn reach(st: &mut State, h: abi::Win, t: c_int, disp: Aint, bytes: usize) -> Option<(&mut Window, usize, Option<u32>)> {
    st.ep.as_ref()?;
    let w = st.wins.table.get_mut(h)?;
    let tg = w.targets.get(usize::try_from(t).ok()?)?;
    let (base, pid) = match tg.path {
        Path::Mapped { base } => (base, None),
        Path::Cma { pid, base } if pid != 0 => (base, Some(pid)),
        _ => return None,
    };
    if w.flavor == abi::WIN_FLAVOR_DYNAMIC || disp < 0 || !w.epoch.may_access(t as u32) {
        return None;
    }
    let off = (disp as u64).checked_mul(tg.disp_unit as u64)?;
    if off.checked_add(bytes as u64)? > tg.size as u64 {
        return None;
    }
    let at = base + off as usize;
    w.epoch.used();
    Some((w, at, pid))
}

/// [`reach`] for a target mapped here: the window and the address.
#[inline(always)]
fn mapped(st: &mut State, h: abi::Win, t: c_int, disp: Aint, bytes: usize) -> Option<(&mut Window, usize)> {
    match reach(st, h, t, disp, bytes)? {
        (w, at, None) => Some((w, at)),
        _ => None,
    }
}

/// `MPI_Put` and `MPI_Get` (`get`) of `count` elements of predefined `dt` into `tcount` of
/// predefined `tdt`, the same number of bytes.
///
/// # Safety
/// MPI's contract for the origin buffer.
#[inline(always)]
#[allow(clippy::too_many_arguments)]
pub unsafe fn put_get(
    st: &mut State,
    get: bool,
    buf: *const c_void,
    count: c_int,
    dt: Datatype,
    target: c_int,
    disp: Aint,
    tcount: c_int,
    tdt: Datatype,
    h: abi::Win,
) -> Option<Res<()>> {
    let (size, tsize) = (size_of_handle(dt)?, size_of_handle(tdt)?);
    let bytes = (count.max(0) as usize).checked_mul(size)?;
    if count <= 0 || tcount <= 0 || buf.is_null() || bytes != tcount as usize * tsize {
        return None;
    }
    let (_, at, pid) = reach(st, h, target, disp, bytes)?;
    if let Some(pid) = pid {
        // One system call; a failure is the general path's to report (it fails alike).
        return super::cma::dense(pid, !get, buf as *mut u8, at, bytes).ok().map(Ok);
    }
    // SAFETY: `reach` checked the range inside the target's window, mapped here while the window
    // lives; the origin buffer holds `bytes` bytes (MPI's contract). `copy` tolerates the overlap
    // of a window read or written from itself.
    unsafe {
        if get {
            std::ptr::copy(at as *const u8, buf as *mut u8, bytes);
        } else {
            std::ptr::copy(buf as *const u8, at as *mut u8, bytes);
        }
    }
    Some(Ok(()))
}

/// The native rule of predefined `op` on predefined `dt`, if the native kernel serves it.
#[inline(always)]
fn native_how(op: abi::Op, dt: Datatype) -> Option<(How, usize)> {
    let b = datatype::lookup(dt)?;
    let size = b.size();
    if !matches!(size, 1 | 2 | 4 | 8) {
        return None;
    }
    let how = match op {
        abi::REPLACE => How::Replace,
        abi::NO_OP => How::NoOp,
        _ => {
            let o = OpKind::lookup(op)?;
            if !o.applies_to(b) {
                return None;
            }
            How::Op(o, b.kind)
        }
    };
    Some((how, size))
}

/// An element at `at` of `size` bytes the native kernel may change: aligned, in memory every
/// origin maps (the window's flavour).
#[inline(always)]
fn native_ok(w: &Window, at: usize, size: usize) -> bool {
    // A window whose accumulates may go by the provider's atomics takes the general path.
    matches!(w.flavor, abi::WIN_FLAVOR_ALLOCATE | abi::WIN_FLAVOR_SHARED)
        && at.is_multiple_of(size)
        && (w.remote.is_none() || !super::ofi::nic_atomics(w))
}

/// The read-combine-write of one element at `at` (in process `pid` by CMA, or mapped here) under
/// target `t`'s accumulate mutex, as the general path's `atomic::locked` does it for elements
/// the native kernel may not change (`MPI_Win_create` windows, unaligned elements); the old
/// value into `old`. `None` (the mutex released, nothing written) sends the call to the general
/// path: no control block, a dead mutex holder, or a single copy that failed (it fails there
/// alike).
#[allow(clippy::too_many_arguments)]
fn locked_one(
    w: &Window,
    t: c_int,
    at: usize,
    pid: Option<u32>,
    how: How,
    src: &[u8],
    cmp: &[u8],
    old: &mut [u8],
) -> Option<()> {
    // A window whose accumulates may go by the provider's atomics (one member per node, its own
    // ones by loopback) takes the general path: a CPU read-modify-write here would not be atomic
    // with a NIC's. (With this machine's software providers the target applies remote atomics
    // under the library lock, as this call runs, so `win_nic.c` cannot catch its absence.)
    if w.remote.is_some() && super::ofi::nic_atomics(w) {
        return None;
    }
    let local = w.targets.get(usize::try_from(t).ok()?)?.local?;
    let mutex = &w.control(local).acc_mutex;
    let mut cur = [0u8; 8];
    let cur = &mut cur[..old.len()];
    // A dead holder: the general path waits for it and reports `MPIX_ERR_PROC_FAILED`.
    lock_mutex(mutex).ok()?;
    let done = (|| {
        match pid {
            Some(pid) => super::cma::read(pid, at, cur).ok()?,
            // SAFETY: `reach` checked the element inside the target's window, mapped here.
            None => unsafe { std::ptr::copy_nonoverlapping(at as *const u8, cur.as_mut_ptr(), cur.len()) },
        }
        old.copy_from_slice(cur);
        if how == How::NoOp {
            return Some(());
        }
        combine(how, cur.len(), cur, src, cmp);
        match pid {
            Some(pid) => super::cma::write(pid, at, cur).ok(),
            None => {
                // SAFETY: as above.
                unsafe { std::ptr::copy_nonoverlapping(cur.as_ptr(), at as *mut u8, cur.len()) };
                Some(())
            }
        }
    })();
    unlock_mutex(mutex);
    done
}

/// `MPI_Fetch_and_op` on one element.
///
/// # Safety
/// MPI's contract for the buffers.
#[inline(always)]
#[allow(clippy::too_many_arguments)]
pub unsafe fn fetch_and_op(
    st: &mut State,
    origin: *const c_void,
    result: *mut c_void,
    dt: Datatype,
    target: c_int,
    disp: Aint,
    op: abi::Op,
    h: abi::Win,
) -> Option<Res<()>> {
    let (how, size) = native_how(op, dt)?;
    if result.is_null() || (origin.is_null() && how != How::NoOp) {
        return None;
    }
    let (w, at, pid) = reach(st, h, target, disp, size)?;
    let mut src = [0u8; 8];
    if how != How::NoOp {
        // SAFETY: MPI's contract: one element at `origin`.
        unsafe { std::ptr::copy_nonoverlapping(origin as *const u8, src.as_mut_ptr(), size) };
    }
    let mut old = [0u8; 8];
    if pid.is_none() && native_ok(w, at, size) {
        // SAFETY: `at` is inside the target's mapped window, aligned to `size` (checked), and every
        // origin changes it atomically (the flavour's rule, `super::atomic`).
        unsafe { native(at as *mut u8, size, how, &src[..size], &[], Some(&mut old[..size])) };
    } else {
        locked_one(w, target, at, pid, how, &src[..size], &[], &mut old[..size])?;
    }
    // SAFETY: MPI's contract: one element at `result`.
    unsafe { std::ptr::copy_nonoverlapping(old.as_ptr(), result as *mut u8, size) };
    Some(Ok(()))
}

/// `MPI_Accumulate` of `count` elements of predefined `dt` onto as many at the target, each
/// changed by one native atomic.
///
/// # Safety
/// MPI's contract for the origin buffer.
#[inline(always)]
#[allow(clippy::too_many_arguments)]
pub unsafe fn accumulate(
    st: &mut State,
    origin: *const c_void,
    count: c_int,
    dt: Datatype,
    target: c_int,
    disp: Aint,
    tcount: c_int,
    tdt: Datatype,
    op: abi::Op,
    h: abi::Win,
) -> Option<Res<()>> {
    let (how, size) = native_how(op, dt)?;
    if dt != tdt || count != tcount || count <= 0 || origin.is_null() {
        return None;
    }
    let bytes = (count as usize).checked_mul(size)?;
    let (w, at) = mapped(st, h, target, disp, bytes)?;
    if !native_ok(w, at, size) {
        return None;
    }
    // SAFETY: MPI's contract: `count` elements at `origin`.
    let src = unsafe { std::slice::from_raw_parts(origin as *const u8, bytes) };
    for (k, e) in src.chunks_exact(size).enumerate() {
        // SAFETY: as in `fetch_and_op`, element by element inside the checked range.
        unsafe { native((at + k * size) as *mut u8, size, how, e, &[], None) };
    }
    Some(Ok(()))
}

/// `MPI_Compare_and_swap`.
///
/// # Safety
/// MPI's contract for the buffers.
#[inline(always)]
#[allow(clippy::too_many_arguments)]
pub unsafe fn compare_and_swap(
    st: &mut State,
    origin: *const c_void,
    compare: *const c_void,
    result: *mut c_void,
    dt: Datatype,
    target: c_int,
    disp: Aint,
    h: abi::Win,
) -> Option<Res<()>> {
    let size = size_of_handle(dt)?;
    if !cas_type(dt) || !matches!(size, 1 | 2 | 4 | 8) || origin.is_null() || compare.is_null() || result.is_null() {
        return None;
    }
    let (w, at, pid) = reach(st, h, target, disp, size)?;
    let (mut src, mut cmp, mut old) = ([0u8; 8], [0u8; 8], [0u8; 8]);
    // SAFETY: MPI's contract: one element at `origin` and at `compare`.
    unsafe {
        std::ptr::copy_nonoverlapping(origin as *const u8, src.as_mut_ptr(), size);
        std::ptr::copy_nonoverlapping(compare as *const u8, cmp.as_mut_ptr(), size);
    }
    if pid.is_none() && native_ok(w, at, size) {
        // SAFETY: as in `fetch_and_op`.
        unsafe { native(at as *mut u8, size, How::Cas, &src[..size], &cmp[..size], Some(&mut old[..size])) };
    } else {
        locked_one(w, target, at, pid, How::Cas, &src[..size], &cmp[..size], &mut old[..size])?;
    }
    // SAFETY: MPI's contract: one element at `result`.
    unsafe { std::ptr::copy_nonoverlapping(old.as_ptr(), result as *mut u8, size) };
    Some(Ok(()))
}

/// `MPI_Win_flush` and `MPI_Win_flush_local` to a target this process maps or reaches by CMA,
/// inside a passive-target epoch: the operations are complete already; a fence orders them
/// before what follows.
#[inline(always)]
pub fn flush(st: &mut State, rank: c_int, h: abi::Win) -> Option<Res<()>> {
    st.ep.as_ref()?;
    let w = st.wins.table.get(h)?;
    let t = w.targets.get(usize::try_from(rank).ok()?)?;
    if !matches!(t.path, Path::Mapped { .. } | Path::Cma { .. }) || !w.epoch.passive(rank as u32) {
        return None;
    }
    fence(Ordering::SeqCst);
    Some(Ok(()))
}
