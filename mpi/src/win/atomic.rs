//! Accumulates (MPI-4.1 §12.3.4, §12.7.1): `MPI_Accumulate`, `MPI_Get_accumulate`,
//! `MPI_Fetch_and_op`, `MPI_Compare_and_swap` and their request-based forms on node-local
//! targets, atomic per basic element.
//!
//! **Two kernels.** In memory every node-local origin maps (`MPI_Win_allocate`,
//! `MPI_Win_allocate_shared`), an element of 1, 2, 4 or 8 bytes at a naturally aligned address
//! is changed by one native atomic: `swap` (`MPI_REPLACE`), `load` (`MPI_NO_OP`), `fetch_add`
//! (`MPI_SUM` on integers), `compare_exchange` (`MPI_Compare_and_swap`), or a
//! compare-exchange loop around the reduction kernel of `crate::op` for the other operations.
//! Anything else (16-byte and pair elements, unaligned ones, and every element of a
//! `MPI_Win_create` or dynamic window, which node peers reach by CMA and cannot change
//! atomically) is read, combined and written back under the target's accumulate mutex (a word in
//! its control block). Both kernels' choice depends only on the window's flavour, the element's
//! type and its address, so all origins of a given element use the same one: accumulates to
//! one location with one basic type are atomic with one another, as MPI requires (not with
//! `MPI_Put`/`MPI_Get`, which MPI does not ask).
//!
//! The remote path applies an accumulate at its target with [`apply_local`], so the kernels
//! are the same wherever the origin is.

use std::borrow::Cow;
use std::sync::atomic::{AtomicU8, AtomicU16, AtomicU32, AtomicU64, Ordering::*};

use super::rma::{Kind, Side, Transfer, blocks, pair_blocks};
use super::{Path, Window};
use crate::abi::{self, Datatype};
use crate::datatype::pack::{pack, unpack};
use crate::datatype::{self, Class, Kind as TKind};
use crate::error::{Fail, Res, Why};
use crate::op::{Loc, OpKind, kind_size, reduce, reduce_loc};
use crate::state::Access;

/// What an accumulate does to each element.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum How {
    Replace,
    NoOp,
    Op(OpKind, TKind),
    /// `MPI_MINLOC`/`MPI_MAXLOC`: value kind, index kind (on packed pairs).
    Loc(Loc, TKind, TKind),
    /// `MPI_Compare_and_swap`.
    Cas,
}

/// Combines packed `src` into packed `acc` (elements of `elem` bytes); `cmp` is the compare
/// value of `How::Cas`.
pub fn combine(how: How, elem: usize, acc: &mut [u8], src: &[u8], cmp: &[u8]) {
    match how {
        How::Replace => acc.copy_from_slice(&src[..acc.len()]),
        How::NoOp => {}
        How::Op(op, kind) => reduce(op, kind, acc, src),
        How::Loc(loc, v, i) => reduce_loc(loc, v, i, acc, src),
        How::Cas => {
            for (a, s) in acc.chunks_exact_mut(elem).zip(src.chunks_exact(elem)) {
                if a == cmp {
                    a.copy_from_slice(s);
                }
            }
        }
    }
}

#[cold]
fn bad_op(op: abi::Op, dt: Datatype) -> Fail {
    Fail::new(abi::ERR_OP, None, Why::Op { op, dt })
}

#[cold]
fn bad_type(what: &'static str) -> Fail {
    Fail::new(abi::ERR_TYPE, None, Why::Arg(what))
}

/// The element rule of `op` on target side `t` (made of one predefined type): how, and the
/// packed element's size.
pub fn how_of(acc: &mut Access, op: abi::Op, t: &Side) -> Res<(How, usize)> {
    if acc.st().ops.get(op).is_some() {
        return Err(Fail::new(abi::ERR_OP, None, Why::Arg("accumulates take predefined operations only")));
    }
    how_for(op, t)
}

/// [`how_of`] for a predefined `op` (a remote target's: its origin refused the program's).
pub fn how_for(op: abi::Op, t: &Side) -> Res<(How, usize)> {
    let leaf =
        t.desc.leaf.ok_or_else(|| bad_type("an accumulate's target type must be made of one predefined type"))?;
    let builtin = datatype::lookup(leaf);
    let elem = match builtin {
        Some(b) => b.size(),
        None => Loc::pair_kinds(leaf).map_or(0, |(v, i)| kind_size(v) + kind_size(i)),
    };
    if elem == 0 {
        return Err(bad_type("an accumulate's type has no elements an operation applies to"));
    }
    let how = match op {
        abi::REPLACE => How::Replace,
        abi::NO_OP => How::NoOp,
        _ => match (Loc::lookup(op), OpKind::lookup(op), builtin) {
            (Some(loc), _, _) => match Loc::pair_kinds(leaf) {
                Some((v, i)) => How::Loc(loc, v, i),
                None => return Err(bad_op(op, t.dt)),
            },
            (None, Some(o), Some(b)) if o.applies_to(b) => How::Op(o, b.kind),
            _ => return Err(bad_op(op, t.dt)),
        },
    };
    Ok((how, elem))
}

/// Checks that side `s` is made of the same predefined type as the target's (`leaf`) with as
/// much data.
pub fn same_elements(s: &Side, leaf: Option<Datatype>, bytes: usize) -> Res<()> {
    if s.desc.leaf != leaf {
        return Err(bad_type("the origin (or result) and target types are not made of the same predefined type"));
    }
    if s.bytes() != bytes {
        let why = Why::Other(format!("the origin (or result) holds {} bytes and the target {bytes}", s.bytes()));
        return Err(Fail::new(abi::ERR_TYPE, None, why));
    }
    Ok(())
}

/// True for the types `MPI_Compare_and_swap` takes (integer, logical, byte: MPI-4.1 §12.3.4).
pub fn cas_type(dt: Datatype) -> bool {
    datatype::lookup(dt).is_some_and(|b| {
        matches!(b.class, Class::CInt | Class::FortranInt | Class::Logical | Class::Byte | Class::MultiLanguage)
    })
}

/// Carries out a checked accumulate on its path.
pub fn accumulate(acc: &mut Access, h: abi::Win, x: &Transfer) -> Res<()> {
    let op = match x.kind {
        Kind::Acc(op) | Kind::GetAcc(op) => op,
        _ => abi::REPLACE,
    };
    let (how, elem) = match (x.kind, x.how) {
        (Kind::Cas, _) => (How::Cas, x.tside.desc.size),
        // Found by the entry check (`rma::check_accumulate`).
        (_, Some(how)) => how,
        _ => how_of(acc, op, &x.tside)?,
    };
    if super::ofi::atomic::accumulate(acc, h, x, how)? {
        return Ok(());
    }
    let w = super::win(acc.st(), h)?;
    match w.targets[x.target as usize].path {
        Path::Remote => super::remote::issue(acc, h, x),
        _ => apply_local(w, x, how, elem),
    }
}

/// Applies accumulate `x` (checked; `how` on elements of `elem` packed bytes) to its target,
/// node-local or this process: the kernel of the module doc.
pub fn apply_local(w: &Window, x: &Transfer, how: How, elem: usize) -> Res<()> {
    let tg = w.targets[x.target as usize];
    let n = x.tside.bytes();
    // The origin's data, packed (absent for MPI_NO_OP).
    let src: Cow<[u8]> = if how == How::NoOp || x.origin.bytes() == 0 {
        Cow::Owned(vec![0u8; n])
    } else {
        // SAFETY: the origin buffer is the program's (MPI's contract), checked to hold `n` bytes.
        unsafe { packed(&x.origin) }
    };
    let cmp: &[u8] = if x.compare.is_null() {
        &[]
    } else {
        // SAFETY: MPI's contract: one element of the type at `compare`.
        unsafe { std::slice::from_raw_parts(x.compare, elem) }
    };
    let mut old = x.result.as_ref().map(|_| vec![0u8; n]);
    let mapped = matches!(w.flavor, abi::WIN_FLAVOR_ALLOCATE | abi::WIN_FLAVOR_SHARED);
    let pair = matches!(how, How::Loc(..));
    match tg.path {
        Path::Mapped { base } if mapped && !pair && matches!(elem, 1 | 2 | 4 | 8) => {
            let tbase = base.wrapping_add_signed(x.disp);
            let tb = blocks(&x.tside);
            if tb.iter().all(|&(o, l)| tbase.wrapping_add_signed(o).is_multiple_of(elem) && l.is_multiple_of(elem)) {
                let mut k = 0;
                for (o, l) in tb {
                    for e in (0..l).step_by(elem) {
                        let p = tbase.wrapping_add_signed(o) + e;
                        let out = old.as_mut().map(|v| &mut v[k..k + elem]);
                        // SAFETY: `prepare` checked the range inside the target's mapped window; the
                        // address is aligned to `elem` (checked above).
                        unsafe { native(p as *mut u8, elem, how, &src[k..k + elem], cmp, out) };
                        k += elem;
                    }
                }
                return finish(x, old);
            }
            locked(w, x, how, elem, &src, cmp, &mut old)?;
        }
        Path::Mapped { .. } | Path::Cma { .. } => locked(w, x, how, elem, &src, cmp, &mut old)?,
        Path::Remote => return Err(Fail::new(abi::ERR_INTERN, None, Why::Arg("apply_local on a remote target"))),
    }
    finish(x, old)
}

/// The packed bytes of a side (borrowed when dense).
///
/// # Safety
/// The side's buffer holds its data.
pub(super) unsafe fn packed(s: &Side) -> Cow<'_, [u8]> {
    if s.desc.is_dense() {
        // SAFETY: the caller's contract.
        return Cow::Borrowed(unsafe { std::slice::from_raw_parts(s.addr.offset(s.desc.first_byte()), s.bytes()) });
    }
    let mut v = vec![0u8; s.bytes()];
    // SAFETY: the caller's contract.
    unsafe { pack(&s.desc, s.addr, s.count, &mut v) };
    Cow::Owned(v)
}

/// Writes the old target data into the result buffer, if any.
fn finish(x: &Transfer, old: Option<Vec<u8>>) -> Res<()> {
    if let (Some(r), Some(old)) = (&x.result, old) {
        // SAFETY: MPI's contract: the result buffer holds its count of its type (checked to
        // match the target's bytes).
        unsafe { unpack(&r.desc, r.addr, r.count, &old) };
    }
    Ok(())
}

/// The read-combine-write of `x` under the target's accumulate mutex.
#[allow(clippy::too_many_arguments)]
fn locked(
    w: &Window,
    x: &Transfer,
    how: How,
    elem: usize,
    src: &[u8],
    cmp: &[u8],
    old: &mut Option<Vec<u8>>,
) -> Res<()> {
    let tg = w.targets[x.target as usize];
    let Some(local) = tg.local else {
        return Err(Fail::new(abi::ERR_INTERN, None, Why::Arg("a node-local target without a control block")));
    };
    let path = w.path_of(x.target);
    let mutex = &w.control(local).acc_mutex;
    lock_mutex(mutex)?;
    let r = (|| -> Res<()> {
        let mut cur = vec![0u8; x.tside.bytes()];
        match path {
            Path::Mapped { base } => {
                let t = (base as *mut u8).wrapping_offset(x.disp);
                // SAFETY: `prepare` checked the range inside the target's window, mapped at `base`.
                unsafe { pack(&x.tside.desc, t, x.tside.count, &mut cur) };
            }
            Path::Cma { pid, base } => cma_blocks(pid, base, x, &mut cur, false)?,
            Path::Remote => return Err(Fail::new(abi::ERR_INTERN, None, Why::Arg("remote target"))),
        }
        if let Some(o) = old {
            o.copy_from_slice(&cur);
        }
        if how == How::NoOp {
            return Ok(());
        }
        combine(how, elem, &mut cur, src, cmp);
        match path {
            Path::Mapped { base } => {
                let t = (base as *mut u8).wrapping_offset(x.disp);
                // SAFETY: as above.
                unsafe { unpack(&x.tside.desc, t, x.tside.count, &cur) };
                Ok(())
            }
            Path::Cma { pid, base } => cma_blocks(pid, base, x, &mut cur, true),
            Path::Remote => Ok(()),
        }
    })();
    unlock_mutex(mutex);
    r
}

/// Moves the target's blocks of `x` to (`write`) or from packed `buf` by CMA.
fn cma_blocks(pid: u32, base: usize, x: &Transfer, buf: &mut [u8], write: bool) -> Res<()> {
    let tbase = base.wrapping_add_signed(x.disp);
    let packed = [(0isize, buf.len())];
    let mut res = Ok(());
    pair_blocks(&blocks(&x.tside), &packed, |t, p, n| {
        if res.is_err() {
            return;
        }
        let piece = &mut buf[p as usize..p as usize + n];
        let at = tbase.wrapping_add_signed(t);
        res = if write { super::cma::write(pid, at, piece) } else { super::cma::read(pid, at, piece) };
    });
    res
}

/// Takes an accumulate mutex (its value: the holder's pid, 0 free): spins a little, then
/// yields the core; fails if the holder died (`lockword`'s "Dead holders").
pub fn lock_mutex(m: &AtomicU32) -> Res<()> {
    let me = super::lockword::my_pid();
    let (mut spins, mut watch) = (0u32, super::lockword::Watch::default());
    loop {
        // ORDERING: Acquire: the previous holder's writes (released below) happen before ours.
        let holder = match m.compare_exchange_weak(0, me, Acquire, Relaxed) {
            Ok(_) => return Ok(()),
            Err(h) => h,
        };
        spins += 1;
        if spins < 64 {
            std::hint::spin_loop();
            continue;
        }
        if watch.due() && super::lockword::dead(holder) {
            return Err(super::lockword::holder_died("an accumulate waited for the target's accumulate mutex", holder));
        }
        std::thread::yield_now();
    }
}

/// Releases an accumulate mutex.
pub fn unlock_mutex(m: &AtomicU32) {
    // ORDERING: Release: our read-modify-write happens before the next holder's.
    m.store(0, Release);
}

/// One element's native atomic update.
macro_rules! native_width {
    ($atomic:ty, $int:ty, $p:expr, $how:expr, $src:expr, $cmp:expr, $out:expr) => {{
        // SAFETY: the caller's contract: `$p` is aligned, inside shared memory every accessor
        // changes only atomically.
        let a = unsafe { &*($p as *const $atomic) };
        let s = <$int>::from_ne_bytes($src.try_into().unwrap_or_default());
        // ORDERING: AcqRel on every read-modify-write, Acquire on loads: accumulates to one
        // element are ordered with one another, and with the epochs' fences around them.
        let prev: $int = match $how {
            How::Replace => a.swap(s, AcqRel),
            How::NoOp => a.load(Acquire),
            How::Cas => {
                let c = <$int>::from_ne_bytes($cmp.try_into().unwrap_or_default());
                match a.compare_exchange(c, s, AcqRel, Acquire) {
                    Ok(v) | Err(v) => v,
                }
            }
            How::Op(
                OpKind::Sum,
                TKind::I8 | TKind::U8 | TKind::I16 | TKind::U16 | TKind::I32 | TKind::U32 | TKind::I64 | TKind::U64,
            ) => a.fetch_add(s, AcqRel),
            how => {
                let mut cur = a.load(Acquire);
                loop {
                    let mut new = cur.to_ne_bytes();
                    combine(how, std::mem::size_of::<$int>(), &mut new, $src, $cmp);
                    match a.compare_exchange_weak(cur, <$int>::from_ne_bytes(new), AcqRel, Acquire) {
                        Ok(v) => break v,
                        Err(v) => cur = v,
                    }
                }
            }
        };
        if let Some(o) = $out {
            o.copy_from_slice(&prev.to_ne_bytes());
        }
    }};
}

/// Applies `how` to the element of `elem` bytes (1, 2, 4 or 8) at `p` with one native atomic
/// (or a compare-exchange loop); its old value goes to `out`.
///
/// # Safety
/// `p` is aligned to `elem` and valid for atomic reads and writes of `elem` bytes.
pub unsafe fn native(p: *mut u8, elem: usize, how: How, src: &[u8], cmp: &[u8], out: Option<&mut [u8]>) {
    match elem {
        1 => native_width!(AtomicU8, u8, p, how, src, cmp, out),
        2 => native_width!(AtomicU16, u16, p, how, src, cmp, out),
        4 => native_width!(AtomicU32, u32, p, how, src, cmp, out),
        _ => native_width!(AtomicU64, u64, p, how, src, cmp, out),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::datatype::BUILTIN;

    /// Every predefined operation on every basic type it applies to: the native kernel and the
    /// packed one (the mutex path) agree.
    #[test]
    fn native_kernel_matches_the_reduction_on_every_type_and_op() {
        let ops = crate::op::OPS;
        let mut tried = 0;
        for b in BUILTIN.iter().filter(|b| matches!(b.size(), 1 | 2 | 4 | 8)) {
            let n = b.size();
            for how in
                ops.iter().filter(|o| o.applies_to(b)).map(|&o| How::Op(o, b.kind)).chain([How::Replace, How::NoOp])
            {
                let start: Vec<u8> = (0..n as u8).map(|i| i.wrapping_mul(37).wrapping_add(3) & 0x3f).collect();
                let src: Vec<u8> = (0..n as u8).map(|i| i.wrapping_mul(11).wrapping_add(1) & 0x3f).collect();
                let mut expect = start.clone();
                combine(how, n, &mut expect, &src, &[]);
                let mut cell = [0u64; 1];
                let p = cell.as_mut_ptr().cast::<u8>();
                // SAFETY: an aligned 8-byte cell of ours.
                unsafe { std::ptr::copy_nonoverlapping(start.as_ptr(), p, n) };
                let mut old = vec![0u8; n];
                // SAFETY: as above.
                unsafe { native(p, n, how, &src, &[], Some(&mut old)) };
                // SAFETY: as above.
                let got = unsafe { std::slice::from_raw_parts(p, n) };
                assert_eq!(got, &expect[..], "{} {how:?}", b.name);
                assert_eq!(old, start, "{} {how:?}: the old value", b.name);
                tried += 1;
            }
        }
        assert!(tried > 100, "{tried}");
    }

    #[test]
    fn compare_and_swap_swaps_only_on_equality() {
        let mut cell = 5u64;
        let p = (&raw mut cell).cast::<u8>();
        let mut old = [0u8; 8];
        // SAFETY: an aligned cell of ours.
        unsafe { native(p, 8, How::Cas, &9u64.to_ne_bytes(), &4u64.to_ne_bytes(), Some(&mut old)) };
        assert_eq!((cell, u64::from_ne_bytes(old)), (5, 5));
        // SAFETY: as above.
        unsafe { native(p, 8, How::Cas, &9u64.to_ne_bytes(), &5u64.to_ne_bytes(), Some(&mut old)) };
        assert_eq!((cell, u64::from_ne_bytes(old)), (9, 5));
        let mut packed = 5u32.to_ne_bytes().to_vec();
        combine(How::Cas, 4, &mut packed, &7u32.to_ne_bytes(), &5u32.to_ne_bytes());
        assert_eq!(packed, 7u32.to_ne_bytes());
    }

    #[test]
    fn concurrent_fetch_and_add_is_exact() {
        let cell = std::sync::Arc::new(AtomicU64::new(0));
        let hs: Vec<_> = (0..4)
            .map(|_| {
                let c = cell.clone();
                std::thread::spawn(move || {
                    for _ in 0..10_000 {
                        for op in [OpKind::Sum, OpKind::Prod] {
                            let (p, one) = (c.as_ptr().cast(), 1i64.to_ne_bytes());
                            // SAFETY: an aligned atomic cell shared by the threads.
                            unsafe { native(p, 8, How::Op(op, TKind::I64), &one, &[], None) };
                        }
                    }
                })
            })
            .collect();
        hs.into_iter().for_each(|h| h.join().unwrap());
        assert_eq!(cell.load(SeqCst), 40_000);
    }
}
