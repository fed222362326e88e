//! Accumulates received from remote origins, applied with the node-local kernels
//! (`super::super::atomic::apply_local`): the request's spans become the target side of a
//! [`Transfer`] to this process's own window (its `Path::Mapped` entry), its data the origin side,
//! so an element changes by the same native atomic, or under the same accumulate mutex, whether
//! its origin is this node's or another's.

use std::ffi::c_int;
use std::sync::Arc;

use super::wire::{Kind, Span};
use crate::abi;
use crate::datatype::desc::{Run, TypeDesc};
use crate::win::Window;
use crate::win::atomic::{How, apply_local, how_for};
use crate::win::rma::{Kind as XKind, Side, Transfer};

/// The target layout of `spans` (offsets from this process's base) as a datatype of elements
/// `dt`, one element of which covers them all.
fn desc_of(spans: &[Span], dt: abi::Datatype, elem: usize, total: usize) -> TypeDesc {
    let runs: Box<[Run]> = spans
        .iter()
        .filter(|s| s.len > 0 && s.count > 0)
        .map(|s| Run {
            off: s.off as isize,
            len: s.len as usize,
            count: s.count as usize,
            stride: s.stride as isize,
            elem,
        })
        .collect();
    let (lo, hi) =
        spans.iter().filter_map(Span::extent).fold((i128::MAX, i128::MIN), |(a, b), (l, h)| (a.min(l), b.max(h)));
    let (lo, hi) = if lo > hi { (0, 0) } else { (lo as isize, hi as isize) };
    TypeDesc {
        size: total,
        lb: lo,
        ub: hi,
        true_lb: lo,
        true_ub: hi,
        align: elem,
        explicit_lb: false,
        explicit_ub: false,
        runs,
        elems: (total / elem.max(1)) as u64,
        leaf: Some(dt),
        named: None,
        contents: None,
    }
}

/// Elements `dt` of `elem` packed bytes, back to back (a MINLOC/MAXLOC pair's own extent
/// has padding: the wire carries the pairs packed).
fn packed_desc(dt: abi::Datatype, elem: usize) -> Arc<TypeDesc> {
    let runs: Box<[Run]> = Box::new([Run { off: 0, len: elem, count: 1, stride: elem as isize, elem }]);
    Arc::new(TypeDesc {
        size: elem,
        lb: 0,
        ub: elem as isize,
        true_lb: 0,
        true_ub: elem as isize,
        align: 1,
        explicit_lb: false,
        explicit_ub: false,
        runs,
        elems: 1,
        leaf: Some(dt),
        named: None,
        contents: None,
    })
}

/// A packed side of `n` bytes at `p`: elements of `elem` bytes (`packed` their descriptor).
fn side(p: *mut u8, n: usize, elem: usize, packed: &Arc<TypeDesc>, dt: abi::Datatype) -> Side {
    Side { addr: p, count: n / elem.max(1), desc: packed.clone(), dt }
}

/// Applies accumulate request `kind` (`Acc`, `GetAcc` or `Cas`; `op` on elements `dt`) to the
/// spans of this process's window `w` (checked inside it: `total` bytes), with origin `data`:
/// the old data for the fetching kinds, or an MPI error class.
#[allow(clippy::too_many_arguments)]
pub fn accumulate(
    w: &Window,
    kind: Kind,
    dt: abi::Datatype,
    op: abi::Op,
    spans: &[Span],
    total: usize,
    data: &[u8],
) -> Result<Vec<u8>, c_int> {
    let Some(basic) = crate::datatype::predefined_desc(dt) else { return Err(abi::ERR_TYPE) };
    let probe =
        Side { addr: std::ptr::null_mut(), count: 1, desc: Arc::new(desc_of(spans, dt, basic.size, total)), dt };
    let (how, elem) = match kind {
        Kind::Cas => (How::Cas, basic.size),
        _ => how_for(op, &probe).map_err(|f| f.code)?,
    };
    if elem == 0 || spans.iter().any(|s| !(s.len as usize).is_multiple_of(elem)) {
        return Err(abi::ERR_TYPE);
    }
    // The data carried: the origin's elements (none for MPI_NO_OP); for Cas compare, then new.
    let (src, cmp): (&[u8], &[u8]) = match kind {
        Kind::Cas if data.len() == 2 * elem && total == elem => (&data[elem..], &data[..elem]),
        Kind::Cas => return Err(abi::ERR_TYPE),
        _ if how == How::NoOp => (&[], &[]),
        _ if data.len() == total => (data, &[]),
        _ => return Err(abi::ERR_SIZE),
    };
    let tside = Side { addr: std::ptr::null_mut(), count: 1, desc: Arc::new(desc_of(spans, dt, elem, total)), dt };
    let basic = packed_desc(dt, elem);
    let fetch = kind != Kind::Acc;
    // A fetch of `MPI_NO_OP` carries no data: its size is the peer's to choose (see
    // `target::get`), allocated only if the memory is there.
    let n = if fetch { total } else { 0 };
    let mut old = Vec::new();
    old.try_reserve_exact(n).map_err(|_| abi::ERR_NO_MEM)?;
    old.resize(n, 0);
    let xkind = match kind {
        Kind::Acc => XKind::Acc(op),
        Kind::GetAcc => XKind::GetAcc(op),
        _ => XKind::Cas,
    };
    let x = Transfer {
        kind: xkind,
        target: w.rank(),
        origin: side(src.as_ptr().cast_mut(), src.len(), elem, &basic, dt),
        result: fetch.then(|| side(old.as_mut_ptr(), total, elem, &basic, dt)),
        compare: if cmp.is_empty() { std::ptr::null() } else { cmp.as_ptr() },
        disp: 0,
        tside,
        request: false,
        how: Some((how, elem)),
    };
    apply_local(w, &x, how, elem).map_err(|f| f.code)?;
    Ok(old)
}
