//! The communication calls (MPI-4.1 §12.3): `MPI_Put`, `MPI_Get`, `MPI_Accumulate`,
//! `MPI_Get_accumulate`, `MPI_Fetch_and_op`, `MPI_Compare_and_swap`, the request-based forms and
//! the `_c` forms. Each call is checked in full ([`prepare`]: the window, the epoch, the
//! target rank, the counts and datatypes, the target range) before any byte moves, then
//! described as a [`Transfer`] and carried out by the target's [`Path`]: load/store into mapped
//! memory, CMA for a node peer's private memory, or the remote path.
//!
//! **Data movement.** Both sides' layouts are walked block by block (`datatype::pack`'s
//! blocks) and copied piece by piece between them, with no intermediate buffer on the direct
//! paths; a dense pair is one `memcpy`. Accumulates are in [`super::atomic`].

use std::ffi::{c_int, c_void};
use std::sync::Arc;

use super::{Path, Window, remote};
use crate::abi::{self, Aint, Count, Datatype};
use crate::datatype::TypeDesc;
use crate::datatype::pack::for_each_block;
use crate::error::{Fail, Res, Why};
use crate::state::Access;

/// What a transfer does at the target.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    Put,
    Get,
    /// `MPI_Accumulate` with this operation (`MPI_REPLACE`, `MPI_NO_OP` or a predefined one).
    Acc(abi::Op),
    /// `MPI_Get_accumulate`/`MPI_Fetch_and_op`: the old target data goes to the result buffer.
    GetAcc(abi::Op),
    /// `MPI_Compare_and_swap` (the compare value at `Transfer::compare`).
    Cas,
}

/// One side's data: `count` elements of `desc` at `addr`.
#[derive(Clone, Debug)]
pub struct Side {
    pub addr: *mut u8,
    pub count: usize,
    pub desc: Arc<TypeDesc>,
    /// The datatype handle (for the remote path's wire format and the reduction's kind).
    pub dt: Datatype,
}

impl Side {
    /// Bytes of data.
    pub fn bytes(&self) -> usize {
        self.count * self.desc.size
    }
}

/// One checked operation, ready for its path.
#[derive(Clone, Debug)]
pub struct Transfer {
    pub kind: Kind,
    /// The target's window rank.
    pub target: u32,
    /// The origin buffer (Put, accumulates: the data; Get: where it goes).
    pub origin: Side,
    /// The result buffer (`GetAcc`, `Cas`).
    pub result: Option<Side>,
    /// `MPI_Compare_and_swap`'s compare value (one element of the origin's type).
    pub compare: *const u8,
    /// Displacement in bytes from the target's base (dynamic windows: an address).
    pub disp: isize,
    /// The target's layout (`origin` elements' signature).
    pub tside: Side,
    /// A request-based call's (`MPI_Rput`...): the remote path makes its request
    /// (`remote::take_request`).
    pub request: bool,
    /// An accumulate's element rule and packed element size, as its entry check found them
    /// (`None`: not found yet; `atomic::accumulate` then finds them).
    pub how: Option<(super::atomic::How, usize)>,
}

#[cold]
fn sync_err(what: &'static str) -> Fail {
    Fail::new(abi::ERR_RMA_SYNC, None, Why::Arg(what))
}

#[cold]
fn range_err() -> Fail {
    Fail::new(abi::ERR_RMA_RANGE, None, Why::Arg("the target range lies outside the target's window"))
}

/// The byte span `[lo, hi)` that `count` elements of `t` cover from their buffer's address.
pub fn span(t: &TypeDesc, count: usize) -> Option<(i128, i128)> {
    if count == 0 || t.size == 0 {
        return Some((0, 0));
    }
    let reach = (count as i128 - 1) * t.extent() as i128;
    Some((t.true_lb as i128 + reach.min(0), t.true_ub as i128 + reach.max(0)))
}

/// True if `[disp + lo, disp + hi)` lies within `[0, size)`.
pub fn in_range(disp: i128, span: (i128, i128), size: usize) -> bool {
    span.0 == span.1 || (disp + span.0 >= 0 && disp + span.1 <= size as i128)
}

/// A count argument.
fn count_of(c: Count) -> Res<usize> {
    usize::try_from(c).map_err(|_| Fail::new(abi::ERR_COUNT, None, Why::Arg("negative count")))
}

/// A datatype a window operation may use.
fn type_of(acc: &mut Access, dt: Datatype) -> Res<Arc<TypeDesc>> {
    crate::datatype::resolve(&acc.st().types, dt, 0).map_err(|mut f| {
        f.comm = None;
        f
    })
}

/// One side of an operation, checked.
pub fn side(acc: &mut Access, addr: *const c_void, count: Count, dt: Datatype) -> Res<Side> {
    let desc = type_of(acc, dt)?;
    let count = count_of(count)?;
    if count.checked_mul(desc.size).is_none_or(|b| b > isize::MAX as usize) {
        return Err(Fail::new(abi::ERR_COUNT, None, Why::Arg("count × datatype size exceeds the address space")));
    }
    Ok(Side { addr: addr as *mut u8, count, desc, dt })
}

/// What [`prepare`] settled: the transfer, or nothing to do (`MPI_PROC_NULL`, no data).
pub enum Prepared {
    Nothing,
    Go(Box<Transfer>),
}

/// Checks an operation on window `h` to `target` at displacement `disp` (in the target's
/// displacement units) and describes it.
#[allow(clippy::too_many_arguments)]
pub fn prepare(
    acc: &mut Access,
    h: abi::Win,
    kind: Kind,
    origin: Side,
    result: Option<Side>,
    target: c_int,
    disp: Aint,
    tside: Side,
) -> Res<Prepared> {
    let w = super::win(acc.st(), h)?;
    if target == abi::PROC_NULL {
        return Ok(Prepared::Nothing);
    }
    if target < 0 || target as u32 >= w.size() {
        return Err(Fail::new(abi::ERR_RANK, None, Why::Rank { rank: target, size: w.size() }));
    }
    let t = target as u32;
    if !w.epoch.may_access(t) {
        return Err(sync_err("an RMA operation outside an access epoch to its target"));
    }
    let moves = match kind {
        Kind::Get | Kind::Put | Kind::Acc(_) => origin.bytes(),
        _ => tside.bytes(),
    };
    let tbytes = tside.bytes();
    if matches!(kind, Kind::Put | Kind::Get | Kind::Acc(_)) && moves != tbytes {
        let why =
            Why::Other(format!("the origin holds {moves} bytes and the target {tbytes} (type signatures differ)"));
        return Err(Fail::new(abi::ERR_TYPE, None, why));
    }
    if tbytes == 0 && moves == 0 {
        return Ok(Prepared::Nothing);
    }
    let tg = w.targets[t as usize];
    let dynamic = w.flavor == abi::WIN_FLAVOR_DYNAMIC;
    if disp < 0 && !dynamic {
        return Err(Fail::new(abi::ERR_DISP, None, Why::Other(format!("negative target displacement {disp}"))));
    }
    let bytes = i128::from(disp) * if dynamic { 1 } else { tg.disp_unit as i128 };
    let sp = span(&tside.desc, tside.count).ok_or_else(range_err)?;
    if !dynamic && !in_range(bytes, sp, tg.size) {
        return Err(range_err());
    }
    if dynamic && !super::attrs::attached(w, t, bytes + sp.0, bytes + sp.1) {
        return Err(Fail::new(abi::ERR_RMA_RANGE, None, Why::Arg("the target range is not in memory attached there")));
    }
    let Ok(disp) = isize::try_from(bytes) else { return Err(range_err()) };
    Ok(Prepared::Go(Box::new(Transfer {
        kind,
        target: t,
        origin,
        result,
        compare: std::ptr::null(),
        disp,
        tside,
        request: false,
        how: None,
    })))
}

/// The blocks of a side: (offset from its address, length).
pub fn blocks(s: &Side) -> Vec<(isize, usize)> {
    let mut v = Vec::new();
    for_each_block(&s.desc, s.count, |o, l| v.push((o, l)));
    v
}

/// Calls `f(dst offset, src offset, len)` for every piece of the pairing of two block lists of
/// equal total length, in order.
pub fn pair_blocks(dst: &[(isize, usize)], src: &[(isize, usize)], mut f: impl FnMut(isize, isize, usize)) {
    let (mut i, mut j, mut di, mut sj) = (0, 0, 0usize, 0usize);
    while i < dst.len() && j < src.len() {
        let n = (dst[i].1 - di).min(src[j].1 - sj);
        if n > 0 {
            f(dst[i].0 + di as isize, src[j].0 + sj as isize, n);
        }
        di += n;
        sj += n;
        if di == dst[i].1 {
            i += 1;
            di = 0;
        }
        if sj == src[j].1 {
            j += 1;
            sj = 0;
        }
    }
}

/// Copies the data of `src` (at `sbase`) into the layout of `dst` (at `dbase`), piece by piece.
///
/// # Safety
/// Both layouts' blocks are valid at their bases (reads, writes); equal data lengths.
pub unsafe fn copy_layouts(dbase: *mut u8, dst: &Side, sbase: *const u8, src: &Side) {
    if dst.desc.is_dense() && src.desc.is_dense() {
        let n = dst.bytes().min(src.bytes());
        // SAFETY: the caller's contract; `copy` tolerates overlap (a window put into itself).
        unsafe {
            std::ptr::copy(sbase.offset(src.desc.first_byte()), dbase.offset(dst.desc.first_byte()), n);
        }
        return;
    }
    pair_blocks(&blocks(dst), &blocks(src), |d, s, n| {
        // SAFETY: as above, each piece inside a block of both layouts.
        unsafe { std::ptr::copy(sbase.offset(s), dbase.offset(d), n) }
    });
}

/// Carries out a Put or Get on its path.
fn put_get(acc: &mut Access, h: abi::Win, x: &Transfer) -> Res<()> {
    let w = super::win(acc.st(), h)?;
    let path = w.path_of(x.target);
    match path {
        Path::Mapped { base } => {
            let tptr = (base as *mut u8).wrapping_offset(x.disp);
            // SAFETY: `prepare` checked the target range against the target's window (mapped at
            // `base`, alive while `w` is); the origin buffer is the program's (MPI's contract).
            unsafe {
                if x.kind == Kind::Put {
                    copy_layouts(tptr, &x.tside, x.origin.addr, &x.origin);
                } else {
                    copy_layouts(x.origin.addr, &x.origin, tptr, &x.tside);
                }
            }
            Ok(())
        }
        Path::Cma { pid, base } => super::cma::put_get(pid, base, x),
        Path::Remote => remote::issue(acc, h, x),
    }
}

/// Carries out a checked transfer.
pub fn execute(acc: &mut Access, h: abi::Win, x: &Transfer) -> Res<()> {
    match x.kind {
        Kind::Put | Kind::Get => put_get(acc, h, x)?,
        _ => super::atomic::accumulate(acc, h, x)?,
    }
    super::win_mut(acc.st(), h)?.epoch.used();
    Ok(())
}

/// `MPI_Put` and `MPI_Get` (`get`), the `_c` forms, and with `req` the request-based forms.
///
/// # Safety
/// MPI's contract for the buffers; `req` null or writable.
#[allow(clippy::too_many_arguments)]
pub unsafe fn put_or_get(
    acc: &mut Access,
    get: bool,
    origin: (*const c_void, Count, Datatype),
    target: c_int,
    disp: Aint,
    tgt: (Count, Datatype),
    h: abi::Win,
    req: Option<*mut abi::Request>,
) -> Res<()> {
    super::with(acc, h, |acc| {
        request_out(acc, h, target, req)?;
        let o = side(acc, origin.0, origin.1, origin.2)?;
        let t = side(acc, std::ptr::null(), tgt.0, tgt.1)?;
        let kind = if get { Kind::Get } else { Kind::Put };
        if let Prepared::Go(mut x) = prepare(acc, h, kind, o, None, target, disp, t)? {
            x.request = req.is_some();
            execute(acc, h, &x)?;
        }
        // SAFETY: checked by `request_out`.
        unsafe { hand_request(acc, h, req) }
    })
}

/// The request of a request-based call, or nothing: checked non-null, and the call inside a
/// passive-target epoch to `target` (MPI-4.1 §12.3.5: the R-forms are valid there only).
fn request_out(acc: &mut Access, h: abi::Win, target: c_int, req: Option<*mut abi::Request>) -> Res<()> {
    let Some(r) = req else { return Ok(()) };
    if r.is_null() {
        return Err(super::null_out());
    }
    let w = super::win(acc.st(), h)?;
    if target != abi::PROC_NULL && (0..w.size() as c_int).contains(&target) && !w.epoch.passive(target as u32) {
        return Err(sync_err("a request-based RMA operation outside a passive-target epoch"));
    }
    Ok(())
}

/// Writes a completed request for a request-based call.
///
/// # Safety
/// `req` checked by [`request_out`].
unsafe fn hand_request(acc: &mut Access, h: abi::Win, req: Option<*mut abi::Request>) -> Res<()> {
    if let Some(r) = req {
        let q = match remote::take_request(acc, h)? {
            Some(q) => q,
            None => done_request(acc, h)?,
        };
        // SAFETY: checked non-null by `request_out`.
        unsafe { *r = q };
    }
    Ok(())
}

/// `MPI_Accumulate` (with `req`: `MPI_Raccumulate`) and the `_c` forms.
///
/// # Safety
/// MPI's contract for the buffers; `req` null or writable.
#[allow(clippy::too_many_arguments)]
pub unsafe fn accumulate(
    acc: &mut Access,
    origin: (*const c_void, Count, Datatype),
    target: c_int,
    disp: Aint,
    tgt: (Count, Datatype),
    op: abi::Op,
    h: abi::Win,
    req: Option<*mut abi::Request>,
) -> Res<()> {
    super::with(acc, h, |acc| {
        request_out(acc, h, target, req)?;
        let o = side(acc, origin.0, origin.1, origin.2)?;
        let t = side(acc, std::ptr::null(), tgt.0, tgt.1)?;
        let how = check_accumulate(acc, target, op, &t, &[&o])?;
        if let Prepared::Go(mut x) = prepare(acc, h, Kind::Acc(op), o, None, target, disp, t)? {
            x.request = req.is_some();
            x.how = how;
            execute(acc, h, &x)?;
        }
        // SAFETY: checked by `request_out`.
        unsafe { hand_request(acc, h, req) }
    })
}

/// `MPI_Get_accumulate` (with `req`: `MPI_Rget_accumulate`) and the `_c` forms.
///
/// # Safety
/// MPI's contract for the buffers; `req` null or writable.
#[allow(clippy::too_many_arguments)]
pub unsafe fn get_accumulate(
    acc: &mut Access,
    origin: (*const c_void, Count, Datatype),
    result: (*mut c_void, Count, Datatype),
    target: c_int,
    disp: Aint,
    tgt: (Count, Datatype),
    op: abi::Op,
    h: abi::Win,
    req: Option<*mut abi::Request>,
) -> Res<()> {
    super::with(acc, h, |acc| {
        request_out(acc, h, target, req)?;
        let t = side(acc, std::ptr::null(), tgt.0, tgt.1)?;
        let r = side(acc, result.0, result.1, result.2)?;
        let (o, how) = if op == abi::NO_OP {
            let how = check_accumulate(acc, target, op, &t, &[&r])?;
            (Side { addr: std::ptr::null_mut(), count: 0, desc: t.desc.clone(), dt: t.dt }, how)
        } else {
            let o = side(acc, origin.0, origin.1, origin.2)?;
            let how = check_accumulate(acc, target, op, &t, &[&r, &o])?;
            (o, how)
        };
        if let Prepared::Go(mut x) = prepare(acc, h, Kind::GetAcc(op), o, Some(r), target, disp, t)? {
            x.request = req.is_some();
            x.how = how;
            execute(acc, h, &x)?;
        }
        // SAFETY: checked by `request_out`.
        unsafe { hand_request(acc, h, req) }
    })
}

/// True if an accumulate to `target` with target side `t` moves data: an empty target
/// (count 0, or a type without data) or `MPI_PROC_NULL` has no element the operation and the
/// types' agreement could apply to, so neither is checked (MPICH accepts such calls whatever
/// the operation and types; mpi4py probes `MPI_Get_accumulate` with `MPI_SUM` on `MPI_BYTE` at
/// count 0). The window, the epoch and the rank are checked all the same.
fn moves_data(target: c_int, t: &Side) -> bool {
    target != abi::PROC_NULL && t.bytes() != 0
}

/// The checks of an accumulate that moves data ([`moves_data`]): `op` applies to the target
/// side `t`, and each of `sides` (origin, result) holds as many elements of its basic type.
fn check_accumulate(acc: &mut Access, target: c_int, op: abi::Op, t: &Side, sides: &[&Side]) -> Res<Found> {
    if !moves_data(target, t) {
        return Ok(None);
    }
    let how = super::atomic::how_of(acc, op, t)?;
    sides.iter().try_for_each(|s| super::atomic::same_elements(s, t.desc.leaf, t.bytes()))?;
    Ok(Some(how))
}

/// What [`check_accumulate`] found: the element rule, carried in the [`Transfer`].
type Found = Option<(super::atomic::How, usize)>;

/// `MPI_Fetch_and_op`: one element of a predefined type.
///
/// # Safety
/// MPI's contract for the buffers.
#[allow(clippy::too_many_arguments)]
pub unsafe fn fetch_and_op(
    acc: &mut Access,
    origin: *const c_void,
    result: *mut c_void,
    dt: Datatype,
    target: c_int,
    disp: Aint,
    op: abi::Op,
    h: abi::Win,
) -> Res<()> {
    // SAFETY: the caller's contract.
    unsafe { get_accumulate(acc, (origin, 1, dt), (result, 1, dt), target, disp, (1, dt), op, h, None) }
}

/// `MPI_Compare_and_swap`: one element of an integer, logical or byte type.
///
/// # Safety
/// MPI's contract for the buffers.
#[allow(clippy::too_many_arguments)]
pub unsafe fn compare_and_swap(
    acc: &mut Access,
    origin: *const c_void,
    compare: *const c_void,
    result: *mut c_void,
    dt: Datatype,
    target: c_int,
    disp: Aint,
    h: abi::Win,
) -> Res<()> {
    super::with(acc, h, |acc| {
        if !super::atomic::cas_type(dt) {
            return Err(Fail::new(abi::ERR_TYPE, None, Why::Type(dt)));
        }
        let o = side(acc, origin, 1, dt)?;
        let r = side(acc, result, 1, dt)?;
        let t = side(acc, std::ptr::null(), 1, dt)?;
        if compare.is_null() || origin.is_null() || result.is_null() {
            return Err(Fail::new(abi::ERR_BUFFER, None, Why::Buffer));
        }
        if let Prepared::Go(mut x) = prepare(acc, h, Kind::Cas, o, Some(r), target, disp, t)? {
            x.compare = compare.cast();
            execute(acc, h, &x)?;
        }
        Ok(())
    })
}

/// A request already complete (the direct paths complete at once; the remote path makes its
/// own).
pub fn done_request(acc: &mut Access, h: abi::Win) -> Res<abi::Request> {
    let _ = h;
    let r = crate::request::Req::new(0, crate::request::State::Done(crate::request::Completion::empty()), false);
    acc.st().reqs.insert(r).ok_or_else(|| Fail::new(abi::ERR_INTERN, None, Why::Arg("too many requests")))
}

/// The window of `h` (used by the path modules).
pub fn window(acc: &mut Access, h: abi::Win) -> Res<&Window> {
    super::win(acc.st(), h)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spans_and_ranges() {
        let int = crate::datatype::predefined_desc(abi::INT).unwrap();
        assert_eq!(span(&int, 3), Some((0, 12)));
        assert!(in_range(0, (0, 12), 12));
        assert!(!in_range(4, (0, 12), 12), "one int past the end");
        assert!(!in_range(-4, (0, 12), 100), "before the start");
        assert!(in_range(1000, (0, 0), 0), "nothing to touch is always in range");
    }

    #[test]
    fn pairing_splits_blocks_at_both_sides_boundaries() {
        let dst = [(0isize, 3usize), (10, 5)];
        let src = [(100isize, 4usize), (200, 4)];
        let mut pieces = Vec::new();
        pair_blocks(&dst, &src, |d, s, n| pieces.push((d, s, n)));
        assert_eq!(pieces, vec![(0, 100, 3), (10, 103, 1), (11, 200, 4)]);
    }
}
