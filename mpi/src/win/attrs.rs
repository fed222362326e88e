//! What a window carries besides its memory (MPI-4.1 §12.2.6–§12.2.8, §7.7.3): attributes (the
//! predefined `MPI_WIN_BASE`, `MPI_WIN_SIZE`, `MPI_WIN_DISP_UNIT`, `MPI_WIN_CREATE_FLAVOR`,
//! `MPI_WIN_MODEL`, and the program's keyvals with their delete callbacks), the name, the info
//! hints, the group, `MPI_Win_shared_query`, and a dynamic window's attached regions
//! (`MPI_Win_attach`/`MPI_Win_detach`), published in this member's control block so that node
//! peers bounds-check their accesses ([`attached`]).
//!
//! Callbacks run through `state::outside` (the state module's rule): their function and
//! `extra_state` are copied out first, the window looked up again afterwards.

use std::ffi::{c_char, c_int, c_void};
use std::sync::atomic::{Ordering::*, fence};

use super::segment::MAX_REGIONS;
use super::{Path, Window, null_out, win, win_mut};
use crate::abi::{self, Aint};
use crate::attr::{CopyFn, DeleteFn, Keyval};
use crate::error::{Fail, Res, Why};
use crate::state::Access;

#[cold]
fn bad_keyval(k: c_int) -> Fail {
    Fail::new(abi::ERR_KEYVAL, None, Why::Other(format!("{k:#x} is not a valid window keyval")))
}

#[cold]
fn flavor(what: &'static str) -> Fail {
    Fail::new(abi::ERR_RMA_FLAVOR, None, Why::Arg(what))
}

#[cold]
fn attach_err(what: &'static str) -> Fail {
    Fail::new(abi::ERR_RMA_ATTACH, None, Why::Arg(what))
}

/// `MPI_Win_create_keyval`.
///
/// # Safety
/// `out` null or writable.
pub unsafe fn create_keyval(
    acc: &mut Access,
    copy: Option<CopyFn>,
    delete: Option<DeleteFn>,
    out: *mut c_int,
    extra: *mut c_void,
) -> Res<()> {
    let st = acc.st();
    if st.ep.is_none() {
        return Err(crate::state::not_running(st.phase));
    }
    if out.is_null() {
        return Err(null_out());
    }
    let kv = Keyval { copy, delete, extra: extra as usize, freed: false, types: false };
    let k = st.wins.keyvals.insert(kv).ok_or_else(|| Fail::new(abi::ERR_INTERN, None, Why::Arg("too many keyvals")))?;
    // SAFETY: checked non-null; MPI's contract.
    unsafe { *out = k };
    Ok(())
}

/// `MPI_Win_free_keyval`: the keyval goes once no window has an attribute of it.
///
/// # Safety
/// `k` null or valid for reads and writes.
pub unsafe fn free_keyval(acc: &mut Access, k: *mut c_int) -> Res<()> {
    if k.is_null() {
        return Err(null_out());
    }
    // SAFETY: checked non-null; the caller's contract.
    let key = unsafe { *k };
    let st = acc.st();
    match st.wins.keyvals.get_mut(key) {
        Some(kv) if !kv.freed => kv.freed = true,
        _ => return Err(bad_keyval(key)),
    }
    forget_keyval(acc, key);
    // SAFETY: as above.
    unsafe { *k = abi::KEYVAL_INVALID };
    Ok(())
}

/// Removes freed keyval `k` once no window uses it.
fn forget_keyval(acc: &mut Access, k: c_int) {
    let st = acc.st();
    let freed = st.wins.keyvals.get(k).is_some_and(|kv| kv.freed);
    if freed && !st.wins.table.iter().any(|(_, w)| w.attrs.iter().any(|a| a.0 == k)) {
        st.wins.keyvals.remove(k);
    }
}

/// Runs the delete callback of attribute `(k, v)` of window `h`, if its keyval has one.
fn delete_callback(acc: &mut Access, h: abi::Win, k: c_int, v: usize) -> Res<()> {
    let Some(kv) = acc.st().wins.keyvals.get(k).copied() else { return Ok(()) };
    let Some(f) = kv.delete else { return Ok(()) };
    // SAFETY: this frame holds the `Access` and no borrow from it; the callback gets the
    // arguments MPI-4.1 §7.7.3 gives it.
    let rc = unsafe { crate::state::outside(|| f(h, k, v as *mut c_void, kv.extra as *mut c_void)) };
    if rc != abi::SUCCESS {
        return Err(Fail::new(rc, None, Why::Arg("a window attribute's delete callback failed")));
    }
    Ok(())
}

/// `MPI_Win_set_attr` (a value already set is deleted first, its callback run).
pub fn set_attr(acc: &mut Access, h: abi::Win, k: c_int, v: *mut c_void) -> Res<()> {
    super::with(acc, h, |acc| {
        let st = acc.st();
        if st.wins.keyvals.get(k).is_none_or(|kv| kv.freed) {
            return Err(bad_keyval(k));
        }
        if let Some(&(_, old)) = win(st, h)?.attrs.iter().find(|a| a.0 == k) {
            delete_callback(acc, h, k, old)?;
        }
        let w = win_mut(acc.st(), h)?;
        w.attrs.retain(|a| a.0 != k);
        w.attrs.push((k, v as usize));
        Ok(())
    })
}

/// `MPI_Win_get_attr`: the predefined keys give the base itself (`MPI_WIN_BASE`) or the address
/// of a value the window keeps.
///
/// # Safety
/// `v` and `flag` null or writable (`v` a `void **`).
pub unsafe fn get_attr(acc: &mut Access, h: abi::Win, k: c_int, v: *mut c_void, flag: *mut c_int) -> Res<()> {
    super::with(acc, h, |acc| {
        if v.is_null() || flag.is_null() {
            return Err(null_out());
        }
        let st = acc.st();
        let w = win(st, h)?;
        let a = &*w.attr_values;
        let found = match k {
            super::WIN_BASE => Some(w.base),
            super::WIN_SIZE => Some(&raw const a.size as usize),
            super::WIN_DISP_UNIT => Some(&raw const a.disp_unit as usize),
            super::WIN_CREATE_FLAVOR => Some(&raw const a.flavor as usize),
            super::WIN_MODEL => Some(&raw const a.model as usize),
            _ if st.wins.keyvals.get(k).is_none() => return Err(bad_keyval(k)),
            _ => w.attrs.iter().find(|x| x.0 == k).map(|x| x.1),
        };
        // SAFETY: checked non-null; MPI's contract: `v` is a `void **` in disguise.
        unsafe {
            *flag = c_int::from(found.is_some());
            if let Some(x) = found {
                *v.cast::<*mut c_void>() = x as *mut c_void;
            }
        }
        Ok(())
    })
}

/// `MPI_Win_delete_attr`.
pub fn delete_attr(acc: &mut Access, h: abi::Win, k: c_int) -> Res<()> {
    super::with(acc, h, |acc| {
        let st = acc.st();
        if st.wins.keyvals.get(k).is_none() {
            return Err(bad_keyval(k));
        }
        let Some(&(_, old)) = win(st, h)?.attrs.iter().find(|a| a.0 == k) else { return Err(bad_keyval(k)) };
        delete_callback(acc, h, k, old)?;
        win_mut(acc.st(), h)?.attrs.retain(|&(a, x)| !(a == k && x == old));
        forget_keyval(acc, k);
        Ok(())
    })
}

/// Deletes every attribute of window `h` (`MPI_Win_free`), the last set first, each staying
/// until its callback returned.
pub fn delete_all(acc: &mut Access, h: abi::Win) -> Res<()> {
    loop {
        let Some((k, v)) = win(acc.st(), h)?.attrs.last().copied() else { return Ok(()) };
        delete_callback(acc, h, k, v)?;
        if let Ok(w) = win_mut(acc.st(), h) {
            w.attrs.retain(|&(a, x)| !(a == k && x == v));
        }
        forget_keyval(acc, k);
    }
}

/// `MPI_Win_set_name`.
///
/// # Safety
/// `name` null or a NUL-terminated string.
pub unsafe fn set_name(acc: &mut Access, h: abi::Win, name: *const c_char) -> Res<()> {
    super::with(acc, h, |acc| {
        if name.is_null() {
            return Err(Fail::new(abi::ERR_ARG, None, Why::Arg("null name")));
        }
        // SAFETY: the caller's contract.
        let mut s = unsafe { std::ffi::CStr::from_ptr(name) }.to_string_lossy().into_owned();
        while s.len() >= abi::MAX_OBJECT_NAME {
            s.pop();
        }
        win_mut(acc.st(), h)?.name = s;
        Ok(())
    })
}

/// `MPI_Win_get_name` (of `MPI_WIN_NULL` too: its own name, MPI-4.1 §12.2.8... as MPICH).
///
/// # Safety
/// `name` writable for `MPI_MAX_OBJECT_NAME` bytes, `len` null or writable.
pub unsafe fn get_name(acc: &mut Access, h: abi::Win, name: *mut c_char, len: *mut c_int) -> Res<()> {
    if h == abi::WIN_NULL {
        // SAFETY: the caller's contract.
        return unsafe { crate::env::put_str("MPI_WIN_NULL", name, abi::MAX_OBJECT_NAME, len) };
    }
    super::with(acc, h, |acc| {
        let n = win(acc.st(), h)?.name.clone();
        // SAFETY: the caller's contract.
        unsafe { crate::env::put_str(&n, name, abi::MAX_OBJECT_NAME, len) }
    })
}

/// `MPI_Win_set_info`: the hints this library reads are updated, others ignored.
pub fn set_info(acc: &mut Access, h: abi::Win, info: abi::Info) -> Res<()> {
    super::with(acc, h, |acc| {
        let kv = if info == abi::INFO_NULL { Vec::new() } else { crate::info::contents(acc.st(), info)? };
        let w = win_mut(acc.st(), h)?;
        for (k, v) in kv {
            super::create::apply_hint(&mut w.hints, &k, v);
        }
        Ok(())
    })
}

/// `MPI_Win_get_info`: the hints in force.
///
/// # Safety
/// `out` null or writable.
pub unsafe fn get_info(acc: &mut Access, h: abi::Win, out: *mut abi::Info) -> Res<()> {
    super::with(acc, h, |acc| {
        let st = acc.st();
        let w = win(st, h)?;
        let b = |x: bool| if x { "true" } else { "false" }.to_string();
        let hs = &w.hints;
        let mut v = vec![
            ("no_locks".to_string(), b(hs.no_locks)),
            ("accumulate_ordering".into(), hs.accumulate_ordering.clone()),
            ("accumulate_ops".into(), hs.accumulate_ops.clone()),
            ("same_size".into(), b(hs.same_size)),
            ("same_disp_unit".into(), b(hs.same_disp_unit)),
        ];
        if w.flavor == abi::WIN_FLAVOR_SHARED {
            v.push(("alloc_shared_noncontig".into(), b(hs.alloc_shared_noncontig)));
        }
        v.push(("nemesis_nic_atomics".into(), b(super::ofi::nic_atomics(w))));
        // SAFETY: the caller's contract.
        unsafe { crate::info::hand_out_info(st, v, out) }
    })
}

/// `MPI_Win_get_group`: a new group of the window's members.
///
/// # Safety
/// `out` null or writable.
pub unsafe fn get_group(acc: &mut Access, h: abi::Win, out: *mut abi::Group) -> Res<()> {
    super::with(acc, h, |acc| {
        let st = acc.st();
        let ranks = win(st, h)?.comm.world.to_vec();
        // SAFETY: the caller's contract.
        unsafe { crate::group::hand_out(st, ranks, out) }
    })
}

/// The memory of target `t` if it is shared memory this process maps (`MPI_Win_allocate*` on
/// this node).
fn shared_part(w: &Window, t: usize) -> Option<(usize, usize, usize)> {
    let tg = w.targets[t];
    match tg.path {
        Path::Mapped { base } if w.flavor == abi::WIN_FLAVOR_SHARED || w.flavor == abi::WIN_FLAVOR_ALLOCATE => {
            Some((tg.size, tg.disp_unit, base))
        }
        _ => None,
    }
}

/// `MPI_Win_shared_query` and its `_c` form: the size, displacement unit and address of a
/// member's memory in this process (`MPI_PROC_NULL`: the first member's with memory); size 0
/// and NULL for memory that is not shared with this process (MPI-4.1: a `MPI_Win_create`
/// window, a member on another node).
///
/// # Safety
/// The outputs null or writable; `base` a `void **`.
pub unsafe fn shared_query(
    acc: &mut Access,
    h: abi::Win,
    rank: c_int,
    size: *mut Aint,
    disp_unit: (*mut c_int, *mut Aint),
    base: *mut c_void,
) -> Res<()> {
    super::with(acc, h, |acc| {
        if size.is_null() || (disp_unit.0.is_null() && disp_unit.1.is_null()) || base.is_null() {
            return Err(null_out());
        }
        let w = win(acc.st(), h)?;
        // MPI-4.1 §12.2.3: any flavour but dynamic; memory this process does not map is
        // reported as size 0 at NULL.
        if w.flavor == abi::WIN_FLAVOR_DYNAMIC {
            return Err(flavor("MPI_Win_shared_query on a dynamic window"));
        }
        let n = w.size() as c_int;
        let part = if rank == abi::PROC_NULL {
            (0..n as usize).filter_map(|t| shared_part(w, t)).find(|p| p.0 > 0)
        } else if rank < 0 || rank >= n {
            return Err(Fail::new(abi::ERR_RANK, None, Why::Rank { rank, size: w.size() }));
        } else {
            shared_part(w, rank as usize)
        };
        let du0 = w.targets.get(rank.max(0) as usize).map_or(0, |t| t.disp_unit);
        let (s, du, b) = part.unwrap_or((0, du0, 0));
        // SAFETY: checked non-null; MPI's contract (`base` a `void **`).
        unsafe {
            *size = s as Aint;
            if !disp_unit.0.is_null() {
                *disp_unit.0 = du as c_int;
            }
            if !disp_unit.1.is_null() {
                *disp_unit.1 = du as Aint;
            }
            *base.cast::<*mut c_void>() = b as *mut c_void;
        }
        Ok(())
    })
}

/// `MPI_Win_attach`: region `[base, base + size)` of this process joins the dynamic window.
pub fn attach(acc: &mut Access, h: abi::Win, base: *mut c_void, size: Aint) -> Res<()> {
    super::with(acc, h, |acc| {
        let w = win_mut(acc.st(), h)?;
        if w.flavor != abi::WIN_FLAVOR_DYNAMIC {
            return Err(flavor("MPI_Win_attach on a window not made by MPI_Win_create_dynamic"));
        }
        if size < 0 {
            return Err(Fail::new(abi::ERR_SIZE, None, Why::Arg("negative size")));
        }
        let (b, n) = (base as usize, size as usize);
        if n > 0 && base.is_null() {
            return Err(attach_err("a null region"));
        }
        if w.regions.iter().any(|&(rb, rn)| b < rb + rn.max(1) && rb < b + n.max(1)) {
            return Err(attach_err("the region overlaps one attached already"));
        }
        if w.regions.len() >= MAX_REGIONS {
            return Err(attach_err("too many regions attached to this window at once"));
        }
        w.regions.push((b, n));
        publish(w);
        Ok(())
    })
}

/// `MPI_Win_detach`: the region attached at `base` leaves the window.
pub fn detach(acc: &mut Access, h: abi::Win, base: *const c_void) -> Res<()> {
    super::with(acc, h, |acc| {
        let w = win_mut(acc.st(), h)?;
        if w.flavor != abi::WIN_FLAVOR_DYNAMIC {
            return Err(flavor("MPI_Win_detach on a window not made by MPI_Win_create_dynamic"));
        }
        let Some(i) = w.regions.iter().position(|r| r.0 == base as usize) else {
            return Err(attach_err("no region is attached at this address"));
        };
        w.regions.remove(i);
        publish(w);
        Ok(())
    })
}

/// Writes this member's regions into its control block (a seqlock write).
pub fn publish(w: &Window) {
    let c = w.control(w.local);
    // ORDERING: the odd count (Relaxed) is ordered before the entries' stores by the Release
    // fence; readers that see an entry changed see the odd count or a later one.
    c.regions_seq.fetch_add(1, Relaxed);
    fence(Release);
    for (i, r) in c.regions.iter().enumerate() {
        let (b, n) = w.regions.get(i).copied().unwrap_or((0, 0));
        r.base.store(b as u64, Relaxed);
        r.len.store(n as u64, Relaxed);
    }
    // ORDERING: Release: the entries happen before the even count a reader acquires.
    c.regions_seq.fetch_add(1, Release);
}

/// True if bytes `[lo, hi)` (addresses) of dynamic-window member `t` are inside one region it
/// attached: its own list for this process, its control block for a node peer; a remote
/// target's are checked there (the remote path).
pub fn attached(w: &Window, t: u32, lo: i128, hi: i128) -> bool {
    let inside = |b: u64, n: u64| lo >= i128::from(b) && hi <= i128::from(b) + i128::from(n) && n > 0;
    if t == w.rank() {
        return w.regions.iter().any(|&(b, n)| inside(b as u64, n as u64));
    }
    let tg = w.targets[t as usize];
    let Some(local) = tg.local else { return matches!(tg.path, Path::Remote) };
    let c = w.control(local);
    let mut spins = 0u32;
    loop {
        // ORDERING: Acquire: the entries of the even count's write are visible.
        let s1 = c.regions_seq.load(Acquire);
        if s1.is_multiple_of(2) {
            let found = c.regions.iter().any(|r| inside(r.base.load(Relaxed), r.len.load(Relaxed)));
            // ORDERING: the entries' loads happen before the second look at the count.
            fence(Acquire);
            if c.regions_seq.load(Relaxed) == s1 {
                return found;
            }
        }
        spins += 1;
        if spins > 64 {
            std::thread::yield_now();
        }
    }
}
