//! The MPI type constructors (MPI-4.1 §5.1.2–§5.1.7) as functions from their arguments to a
//! [`TypeDesc`]: contiguous, vector/hvector, indexed/hindexed, (h)indexed_block, struct,
//! subarray, darray, resized, dup.
//!
//! Counts and displacements arrive as `i64` whichever C form was called; [`Form`] says which,
//! so that `MPI_Type_get_contents` returns them as the caller gave them: `int`s (and `MPI_Aint`
//! byte displacements) from the `int` forms, `MPI_Count`s from the `_c` forms (MPI-4.1 §5.1.13).
//! Subarray and darray share one builder ([`grid`]): the elements a process owns in each
//! dimension, as ranges of indices, laid out in the array's order with the whole array's extent.

use std::ffi::c_int;
use std::sync::Arc;

use super::desc::{Builder, Contents, Invalid, Run, TypeDesc, from_parts};
use crate::abi::{self, Aint, Count};

/// Which C form of a constructor was called.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Form {
    /// `int` counts (`MPI_Aint` byte displacements).
    Int,
    /// The `_c` form: `MPI_Count`s.
    Large,
}

/// `MPI_DISTRIBUTE_BLOCK` and friends (MPICH's values).
pub const DISTRIBUTE_BLOCK: c_int = 121;
pub const DISTRIBUTE_CYCLIC: c_int = 122;
pub const DISTRIBUTE_NONE: c_int = 123;
pub const DISTRIBUTE_DFLT_DARG: c_int = -49767;

fn checked_len(count: i64) -> Result<usize, Invalid> {
    usize::try_from(count).map_err(|_| Invalid::Count)
}

/// `int` arguments of the int form (they came from `int`s: the casts are exact).
fn ints(v: &[i64]) -> impl Iterator<Item = c_int> + '_ {
    v.iter().map(|&x| x as c_int)
}

/// The contents: fixed `int`s first, then `sized` (counts and element displacements), then byte
/// displacements `bytes`: in the int form `sized` go to the integers and `bytes` to the
/// addresses, in the `_c` form both go to the large counts.
fn record(
    form: Form,
    combiner: c_int,
    fixed: &[c_int],
    sized: &[i64],
    bytes: &[i64],
    old: Vec<Arc<TypeDesc>>,
) -> Contents {
    let mut c = Contents { combiner, ints: fixed.to_vec(), types: old, ..Contents::default() };
    match form {
        Form::Int => {
            c.ints.extend(ints(sized));
            c.aints = bytes.iter().map(|&b| b as Aint).collect();
        }
        Form::Large => {
            c.counts = sized.iter().chain(bytes).map(|&x| x as Count).collect();
        }
    }
    c
}

/// `MPI_Type_contiguous(_c)`.
pub fn contiguous(form: Form, count: i64, old: &Arc<TypeDesc>) -> Result<TypeDesc, Invalid> {
    let n = checked_len(count)?;
    from_parts(&[(0, n, old)], record(form, abi::COMBINER_CONTIGUOUS, &[], &[count], &[], vec![old.clone()]), false)
}

/// The byte displacement of `d` elements (or bytes, with `bytes`) of `old`.
fn displacement(d: i64, bytes: bool, old: &TypeDesc) -> Result<isize, Invalid> {
    let d = isize::try_from(d).map_err(|_| Invalid::Overflow)?;
    if bytes { Ok(d) } else { d.checked_mul(old.extent()).ok_or(Invalid::Overflow) }
}

/// `MPI_Type_vector(_c)` (stride in elements) and `MPI_Type_create_hvector(_c)` (in bytes:
/// `bytes`).
pub fn vector(
    form: Form,
    count: i64,
    blocklen: i64,
    stride: i64,
    bytes: bool,
    old: &Arc<TypeDesc>,
) -> Result<TypeDesc, Invalid> {
    let (n, bl) = (checked_len(count)?, checked_len(blocklen)?);
    let step = displacement(stride, bytes, old)?;
    let c = if bytes {
        record(form, abi::COMBINER_HVECTOR, &[], &[count, blocklen], &[stride], vec![old.clone()])
    } else {
        record(form, abi::COMBINER_VECTOR, &[], &[count, blocklen, stride], &[], vec![old.clone()])
    };
    if n > 1 && bl > 0 && old.size > 0 && old.is_dense() {
        return dense_blocks(n, bl, step, old, c);
    }
    let parts: Vec<(isize, usize, &TypeDesc)> = (0..n).map(|i| (i as isize * step, bl, &**old)).collect();
    from_parts(&parts, c, false)
}

/// A vector of `n` blocks of `bl` elements of a dense `old`, `step` bytes apart, without a part
/// per block (counts may pass 2^31): the bounds are the first and last block's, the data one run.
fn dense_blocks(n: usize, bl: usize, step: isize, old: &Arc<TypeDesc>, c: Contents) -> Result<TypeDesc, Invalid> {
    let last = (n as isize - 1).checked_mul(step).ok_or(Invalid::Overflow)?;
    let mut d = from_parts(&[(0, bl, old), (last, bl, old)], c, false)?;
    let len = old.size.checked_mul(bl).ok_or(Invalid::Overflow)?;
    d.size = len.checked_mul(n).ok_or(Invalid::Overflow)?;
    d.elems = old.elems.saturating_mul((bl * n) as u64);
    let r = old.runs[0];
    let mut b = Builder::new();
    b.push(Run { off: r.off, len, count: n, stride: step, elem: r.elem });
    d.runs = b.finish();
    Ok(d)
}

/// `MPI_Type_indexed(_c)` (displacements in elements) and `MPI_Type_create_hindexed(_c)` (in
/// bytes).
pub fn indexed(
    form: Form,
    blocklens: &[i64],
    displs: &[i64],
    bytes: bool,
    old: &Arc<TypeDesc>,
) -> Result<TypeDesc, Invalid> {
    let mut parts = Vec::with_capacity(blocklens.len());
    for (&bl, &d) in blocklens.iter().zip(displs) {
        parts.push((displacement(d, bytes, old)?, checked_len(bl)?, &**old));
    }
    let mut sized = vec![blocklens.len() as i64];
    sized.extend_from_slice(blocklens);
    let c = if bytes {
        record(form, abi::COMBINER_HINDEXED, &[], &sized, displs, vec![old.clone()])
    } else {
        sized.extend_from_slice(displs);
        record(form, abi::COMBINER_INDEXED, &[], &sized, &[], vec![old.clone()])
    };
    from_parts(&parts, c, false)
}

/// `MPI_Type_create_indexed_block(_c)` (displacements in elements) and
/// `MPI_Type_create_hindexed_block(_c)` (in bytes).
pub fn indexed_block(
    form: Form,
    blocklen: i64,
    displs: &[i64],
    bytes: bool,
    old: &Arc<TypeDesc>,
) -> Result<TypeDesc, Invalid> {
    let bl = checked_len(blocklen)?;
    let mut parts = Vec::with_capacity(displs.len());
    for &d in displs {
        parts.push((displacement(d, bytes, old)?, bl, &**old));
    }
    let mut sized = vec![displs.len() as i64, blocklen];
    let c = if bytes {
        record(form, abi::COMBINER_HINDEXED_BLOCK, &[], &sized, displs, vec![old.clone()])
    } else {
        sized.extend_from_slice(displs);
        record(form, abi::COMBINER_INDEXED_BLOCK, &[], &sized, &[], vec![old.clone()])
    };
    from_parts(&parts, c, false)
}

/// `MPI_Type_create_struct(_c)`.
pub fn create_struct(
    form: Form,
    blocklens: &[i64],
    displs: &[i64],
    types: &[Arc<TypeDesc>],
) -> Result<TypeDesc, Invalid> {
    let mut parts = Vec::with_capacity(types.len());
    for ((&bl, &d), t) in blocklens.iter().zip(displs).zip(types) {
        parts.push((displacement(d, true, t)?, checked_len(bl)?, &**t));
    }
    let mut sized = vec![types.len() as i64];
    sized.extend_from_slice(blocklens);
    from_parts(&parts, record(form, abi::COMBINER_STRUCT, &[], &sized, displs, types.to_vec()), true)
}

/// `MPI_Type_create_resized(_c)`.
pub fn resized(form: Form, lb: i64, extent: i64, old: &Arc<TypeDesc>) -> TypeDesc {
    TypeDesc {
        lb: lb as isize,
        ub: (lb as isize).wrapping_add(extent as isize),
        explicit_lb: true,
        explicit_ub: true,
        named: None,
        contents: Some(record(form, abi::COMBINER_RESIZED, &[], &[], &[lb, extent], vec![old.clone()])),
        ..(**old).clone()
    }
}

/// `MPI_Type_dup`: the same layout, a new history.
pub fn dup(old: &Arc<TypeDesc>) -> TypeDesc {
    TypeDesc {
        named: None,
        contents: Some(Contents { combiner: abi::COMBINER_DUP, types: vec![old.clone()], ..Contents::default() }),
        ..(**old).clone()
    }
}

/// The elements of an `order` array of `sizes` whose index in dimension `d` lies in one of
/// `owned[d]`'s ranges `(start, length)` (ascending), in the array's order (C: the last index
/// varies fastest; Fortran: the first), with lb 0 and the whole array's extent (explicit).
fn grid(sizes: &[i64], owned: &[Vec<(i64, i64)>], order: c_int, old: &Arc<TypeDesc>) -> Result<TypeDesc, Invalid> {
    let nd = sizes.len();
    // Dimensions from the fastest-varying one.
    let dims: Vec<usize> = if order == abi::ORDER_C { (0..nd).rev().collect() } else { (0..nd).collect() };
    let mut stride = vec![0isize; nd];
    let mut s = old.extent();
    for &d in &dims {
        stride[d] = s;
        s = s.checked_mul(isize::try_from(sizes[d]).map_err(|_| Invalid::Overflow)?).ok_or(Invalid::Overflow)?;
    }
    let whole = s;
    let at = |i: i64, d: usize| (i as isize).checked_mul(stride[d]).ok_or(Invalid::Overflow);
    // The fastest dimension's ranges are blocks of consecutive elements; every other dimension
    // repeats what is inside it at each index it owns.
    let inner = dims[0];
    let mut parts = Vec::new();
    for &(start, len) in &owned[inner] {
        parts.push((at(start, inner)?, checked_len(len)?, &**old));
    }
    let mut inside = from_parts(&parts, Contents::default(), false)?;
    for &d in &dims[1..] {
        let mut parts = Vec::new();
        for &(start, len) in &owned[d] {
            for i in start..start + len {
                parts.push((at(i, d)?, 1, &inside));
            }
        }
        inside = from_parts(&parts, Contents::default(), false)?;
    }
    let runs: Vec<Run> = inside.runs.to_vec();
    Ok(TypeDesc { lb: 0, ub: whole, explicit_lb: true, explicit_ub: true, runs: runs.into_boxed_slice(), ..inside })
}

fn check_order(order: c_int) -> Result<(), Invalid> {
    if order != abi::ORDER_C && order != abi::ORDER_FORTRAN {
        return Err(Invalid::Arg("order must be MPI_ORDER_C or MPI_ORDER_FORTRAN"));
    }
    Ok(())
}

/// `MPI_Type_create_subarray(_c)`: the `subsizes` block at `starts` of an array of `sizes` (C or
/// Fortran order); lb 0 and the extent of the whole array.
pub fn subarray(
    form: Form,
    sizes: &[i64],
    subsizes: &[i64],
    starts: &[i64],
    order: c_int,
    old: &Arc<TypeDesc>,
) -> Result<TypeDesc, Invalid> {
    let nd = sizes.len();
    if nd == 0 || subsizes.len() != nd || starts.len() != nd {
        return Err(Invalid::Arg("subarray: ndims must be positive"));
    }
    check_order(order)?;
    for d in 0..nd {
        if sizes[d] <= 0
            || subsizes[d] <= 0
            || starts[d] < 0
            || subsizes[d] > sizes[d]
            || starts[d] > sizes[d] - subsizes[d]
        {
            return Err(Invalid::Arg("subarray: need 0 < subsize <= size and 0 <= start <= size - subsize"));
        }
    }
    let owned: Vec<Vec<(i64, i64)>> = (0..nd).map(|d| vec![(starts[d], subsizes[d])]).collect();
    let mut sized = sizes.to_vec();
    sized.extend_from_slice(subsizes);
    sized.extend_from_slice(starts);
    let c = match form {
        Form::Int => {
            let mut c = record(form, abi::COMBINER_SUBARRAY, &[nd as c_int], &sized, &[], vec![old.clone()]);
            c.ints.push(order);
            c
        }
        Form::Large => record(form, abi::COMBINER_SUBARRAY, &[nd as c_int, order], &sized, &[], vec![old.clone()]),
    };
    Ok(TypeDesc { named: None, contents: Some(c), ..grid(sizes, &owned, order, old)? })
}

/// The arguments of `MPI_Type_create_darray(_c)` past `oldtype`'s.
#[derive(Clone, Copy, Debug)]
pub struct Darray<'a> {
    pub size: c_int,
    pub rank: c_int,
    pub gsizes: &'a [i64],
    pub distribs: &'a [c_int],
    pub dargs: &'a [c_int],
    pub psizes: &'a [c_int],
    pub order: c_int,
}

/// The ranges of indices `0..gsize` that process coordinate `p` of `np` owns in one dimension.
fn distribute(gsize: i64, distrib: c_int, darg: c_int, np: i64, p: i64) -> Result<Vec<(i64, i64)>, Invalid> {
    match distrib {
        DISTRIBUTE_NONE => {
            if np != 1 {
                return Err(Invalid::Arg("darray: an MPI_DISTRIBUTE_NONE dimension needs a process size of 1"));
            }
            Ok(vec![(0, gsize)])
        }
        DISTRIBUTE_BLOCK => {
            let b = if darg == DISTRIBUTE_DFLT_DARG { (gsize + np - 1) / np } else { i64::from(darg) };
            if b <= 0 || b.saturating_mul(np) < gsize {
                return Err(Invalid::Arg("darray: a block distribution's block times the processes must cover gsize"));
            }
            let start = (p * b).min(gsize);
            Ok(vec![(start, (gsize - start).min(b))].into_iter().filter(|r| r.1 > 0).collect())
        }
        DISTRIBUTE_CYCLIC => {
            let b = if darg == DISTRIBUTE_DFLT_DARG { 1 } else { i64::from(darg) };
            if b <= 0 {
                return Err(Invalid::Arg("darray: a cyclic distribution's block must be positive"));
            }
            let mut v = Vec::new();
            let mut start = p * b;
            while start < gsize {
                v.push((start, (gsize - start).min(b)));
                start += b * np;
            }
            Ok(v)
        }
        _ => Err(Invalid::Arg("darray: distribution must be MPI_DISTRIBUTE_BLOCK, _CYCLIC or _NONE")),
    }
}

/// `MPI_Type_create_darray(_c)`: process `rank`'s part of an HPF-distributed array on a process
/// grid of `psizes` (ranks in row-major order), as a subarray-like type of the whole array.
pub fn darray(form: Form, a: &Darray, old: &Arc<TypeDesc>) -> Result<TypeDesc, Invalid> {
    let nd = a.gsizes.len();
    if nd == 0 || a.distribs.len() != nd || a.dargs.len() != nd || a.psizes.len() != nd {
        return Err(Invalid::Arg("darray: ndims must be positive"));
    }
    check_order(a.order)?;
    if a.size <= 0 {
        return Err(Invalid::Arg("darray: size must be positive"));
    }
    if a.rank < 0 || a.rank >= a.size {
        return Err(Invalid::Rank);
    }
    let mut procs: i64 = 1;
    for d in 0..nd {
        if a.gsizes[d] <= 0 || a.psizes[d] <= 0 {
            return Err(Invalid::Arg("darray: gsizes and psizes must be positive"));
        }
        procs = procs.saturating_mul(i64::from(a.psizes[d]));
    }
    if procs != i64::from(a.size) {
        return Err(Invalid::Arg("darray: the product of psizes must be size"));
    }
    // This rank's coordinates in the row-major process grid.
    let mut coords = vec![0i64; nd];
    let mut r = i64::from(a.rank);
    for d in (0..nd).rev() {
        let np = i64::from(a.psizes[d]);
        coords[d] = r % np;
        r /= np;
    }
    let owned = (0..nd)
        .map(|d| distribute(a.gsizes[d], a.distribs[d], a.dargs[d], i64::from(a.psizes[d]), coords[d]))
        .collect::<Result<Vec<_>, _>>()?;
    let mut fixed = vec![a.size, a.rank, nd as c_int];
    let rest: Vec<c_int> = a.distribs.iter().chain(a.dargs).chain(a.psizes).copied().chain([a.order]).collect();
    let c = match form {
        Form::Int => {
            fixed.extend(ints(a.gsizes));
            fixed.extend(rest);
            record(form, abi::COMBINER_DARRAY, &fixed, &[], &[], vec![old.clone()])
        }
        Form::Large => {
            fixed.extend(rest);
            record(form, abi::COMBINER_DARRAY, &fixed, a.gsizes, &[], vec![old.clone()])
        }
    };
    Ok(TypeDesc { named: None, contents: Some(c), ..grid(a.gsizes, &owned, a.order, old)? })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::abi::Datatype;
    use crate::datatype::builtin::lookup;
    use Form::Int as F;

    fn basic(h: Datatype) -> Arc<TypeDesc> {
        Arc::new(TypeDesc::basic(lookup(h).unwrap()))
    }

    /// Every block's (offset, length) of `count` elements, in order.
    fn blocks(t: &TypeDesc, count: usize) -> Vec<(isize, usize)> {
        let mut v = Vec::new();
        for k in 0..count {
            for r in t.runs.iter() {
                for j in 0..r.count {
                    v.push((k as isize * t.extent() + r.off + j as isize * r.stride, r.len));
                }
            }
        }
        v
    }

    #[test]
    fn vectors_are_one_run_and_contiguous_types_are_dense() {
        let d = basic(abi::DOUBLE);
        let v = vector(F, 1000, 2, 5, false, &d).unwrap();
        assert_eq!(v.runs.len(), 1);
        assert_eq!((v.size, v.lb, v.ub, v.extent()), (16000, 0, (999 * 5 + 2) * 8, (999 * 5 + 2) * 8));
        assert_eq!(v.runs[0], Run { off: 0, len: 16, count: 1000, stride: 40, elem: 8 });
        assert_eq!(v.elems, 2000);
        assert!(!v.is_dense());
        let c = contiguous(F, 10, &d).unwrap();
        assert!(c.is_dense());
        assert_eq!(c.runs.len(), 1);
        let cv = contiguous(F, 3, &Arc::new(vector(F, 4, 1, 1, false, &d).unwrap())).unwrap();
        assert!(cv.is_dense(), "a vector of stride 1 is contiguous");
        assert_eq!(cv.size, 96);
        // A contiguous of vectors whose blocks keep their stride across elements: one run.
        let h = Arc::new(vector(F, 3, 1, 2, false, &d).unwrap());
        let hv = Arc::new(resized(F, 0, 48, &h));
        let c2 = contiguous(F, 4, &hv).unwrap();
        assert_eq!(c2.runs.len(), 1);
        assert_eq!(c2.runs[0].count, 12);
    }

    #[test]
    fn vectors_past_two_to_the_31_are_one_run() {
        let c = basic(abi::CHAR);
        let v = vector(Form::Large, 1 << 31, 1, 2, false, &c).unwrap();
        assert_eq!((v.size, v.extent(), v.runs.len()), (1 << 31, (1 << 32) - 1, 1));
        // The same as the part-by-part construction on a small count, negative strides too.
        for (n, bl, stride) in [(5, 2, 3), (4, 1, -2), (3, 2, 2), (2, 3, -5)] {
            let fast = vector(F, n, bl, stride, false, &basic(abi::INT)).unwrap();
            let i = basic(abi::INT);
            let step = stride as isize * 4;
            let parts: Vec<(isize, usize, &TypeDesc)> =
                (0..n as usize).map(|k| (k as isize * step, bl as usize, &*i)).collect();
            let slow = from_parts(&parts, Contents::default(), false).unwrap();
            assert_eq!(
                (fast.size, fast.lb, fast.ub, fast.true_lb, fast.true_ub),
                (slow.size, slow.lb, slow.ub, slow.true_lb, slow.true_ub)
            );
            assert_eq!(blocks(&fast, 2), blocks(&slow, 2), "{n} {bl} {stride}");
            assert_eq!(fast.elems, slow.elems);
        }
    }

    #[test]
    fn negative_strides_and_bounds() {
        let i = basic(abi::INT);
        let v = vector(F, 3, 1, -2, false, &i).unwrap();
        assert_eq!((v.lb, v.ub), (-16, 4));
        assert_eq!(blocks(&v, 1), vec![(0, 4), (-8, 4), (-16, 4)]);
        let hv = vector(F, 2, 2, -100, true, &i).unwrap();
        assert_eq!((hv.lb, hv.ub, hv.true_lb, hv.true_ub), (-100, 8, -100, 8));
    }

    #[test]
    fn indexed_blocks_merge_when_they_touch_and_keep_typemap_order() {
        let i = basic(abi::INT);
        let t = indexed(F, &[2, 1, 3], &[0, 2, 10], false, &i).unwrap();
        assert_eq!(blocks(&t, 1), vec![(0, 12), (40, 12)]);
        assert_eq!((t.size, t.ub), (24, 52));
        let out_of_order = indexed(F, &[1, 1], &[5, 0], false, &i).unwrap();
        assert_eq!(blocks(&out_of_order, 1), vec![(20, 4), (0, 4)], "typemap order, not address order");
        let ib = indexed_block(F, 2, &[0, 4, 8, 12], false, &i).unwrap();
        assert_eq!(ib.runs.len(), 1, "blocks at a constant stride are one run");
        assert_eq!(ib.runs[0], Run { off: 0, len: 8, count: 4, stride: 16, elem: 4 });
        assert!(matches!(indexed(F, &[-1], &[0], false, &i), Err(Invalid::Count)));
    }

    #[test]
    fn structs_are_padded_like_c() {
        // struct { char c; double d; int i; } : offsets 0, 8, 16; sizeof 24.
        let (c, d, i) = (basic(abi::CHAR), basic(abi::DOUBLE), basic(abi::INT));
        let s = create_struct(F, &[1, 1, 1], &[0, 8, 16], &[c, d, i]).unwrap();
        assert_eq!((s.size, s.lb, s.ub, s.true_ub), (13, 0, 24, 20));
        assert_eq!(s.elems, 3);
        assert_eq!(s.leaf, None, "mixed types have no common leaf");
        assert_eq!(blocks(&s, 2), vec![(0, 1), (8, 8), (16, 4), (24, 1), (32, 8), (40, 4)]);
        let pair = TypeDesc::pair(&basic(abi::DOUBLE), &basic(abi::INT), abi::DOUBLE_INT);
        assert_eq!((pair.size, pair.extent(), pair.true_ub), (12, 16, 12));
        let fi = TypeDesc::pair(&basic(abi::FLOAT), &basic(abi::INT), abi::FLOAT_INT);
        assert_eq!((fi.size, fi.extent()), (8, 8));
        assert!(fi.is_dense());
        let si = TypeDesc::pair(&basic(abi::SHORT), &basic(abi::INT), abi::SHORT_INT);
        assert_eq!((si.size, si.extent(), blocks(&si, 1)), (6, 8, vec![(0, 2), (4, 4)]));
    }

    #[test]
    fn resized_and_dup_keep_the_data() {
        let i = basic(abi::INT);
        let r = resized(F, -4, 16, &i);
        assert_eq!((r.lb, r.ub, r.size, r.true_lb, r.true_ub), (-4, 12, 4, 0, 4));
        let rr = Arc::new(r);
        let c = contiguous(F, 3, &rr).unwrap();
        assert_eq!(blocks(&c, 1), vec![(0, 4), (16, 4), (32, 4)]);
        let d = dup(&rr);
        assert_eq!(d.contents.as_ref().unwrap().combiner, abi::COMBINER_DUP);
        assert_eq!((d.lb, d.ub), (-4, 12));
    }

    #[test]
    fn subarrays_in_both_orders() {
        let i = basic(abi::INT);
        // A 4x5 array of ints, the 2x3 block at (1, 2), C order: rows of 3 at 4*(1*5+2).
        let c = subarray(F, &[4, 5], &[2, 3], &[1, 2], abi::ORDER_C, &i).unwrap();
        assert_eq!(blocks(&c, 1), vec![(28, 12), (48, 12)]);
        assert_eq!((c.lb, c.ub, c.size), (0, 80, 24));
        // Fortran order: the first index varies fastest.
        let f = subarray(F, &[4, 5], &[2, 3], &[1, 2], abi::ORDER_FORTRAN, &i).unwrap();
        assert_eq!(blocks(&f, 1), vec![(36, 8), (52, 8), (68, 8)]);
        // 3-D: one run per row of each plane.
        let t = subarray(F, &[3, 4, 5], &[2, 2, 2], &[1, 1, 1], abi::ORDER_C, &i).unwrap();
        assert_eq!(t.size, 32);
        assert_eq!(blocks(&t, 1).len(), 4);
        assert!(subarray(F, &[4], &[5], &[0], abi::ORDER_C, &i).is_err());
        assert!(subarray(F, &[4], &[2], &[3], abi::ORDER_C, &i).is_err());
        assert!(subarray(F, &[4], &[2], &[0], 99, &i).is_err());
    }

    #[test]
    fn empty_types() {
        let i = basic(abi::INT);
        let e = contiguous(F, 0, &i).unwrap();
        assert_eq!((e.size, e.lb, e.ub, e.runs.len()), (0, 0, 0, 0));
        assert!(e.is_dense());
        let s = create_struct(F, &[], &[], &[]).unwrap();
        assert_eq!((s.size, s.extent()), (0, 0));
        // Members with no data and no bounds of their own move no bound (MPICH agrees).
        let e = Arc::new(e);
        let z = Arc::new(create_struct(F, &[0, 0], &[0, 8], &[i.clone(), basic(abi::DOUBLE)]).unwrap());
        let s = create_struct(F, &[1, 3], &[0, 8], &[e.clone(), z.clone()]).unwrap();
        assert_eq!((s.size, s.lb, s.extent(), s.true_lb, s.true_ub), (0, 0, 0, 0, 0));
        let s = create_struct(F, &[1, 1], &[100, 0], &[e.clone(), i.clone()]).unwrap();
        assert_eq!((s.size, s.lb, s.extent(), s.true_lb, s.true_ub), (4, 0, 4, 0, 4));
        let s = create_struct(F, &[0, 1], &[0, 8], &[i.clone(), basic(abi::DOUBLE)]).unwrap();
        assert_eq!((s.size, s.lb, s.extent()), (8, 8, 8));
        // A type resized around no data keeps its markers, and has no true extent.
        let r = Arc::new(resized(F, 0, 16, &e));
        let c = contiguous(F, 3, &r).unwrap();
        assert_eq!((c.size, c.lb, c.extent(), c.true_lb, c.true_ub), (0, 0, 48, 0, 0));
        // Explicit bounds override the data's.
        let s = create_struct(F, &[1, 1], &[0, 16], &[r.clone(), i.clone()]).unwrap();
        assert_eq!((s.size, s.lb, s.extent(), s.true_lb, s.true_ub), (4, 0, 16, 16, 20));
        // MPI_LB and MPI_UB (MPI-1, kept by MPICH): { (LB, 10) } has extent -10.
        let (lbt, ubt) = (basic(abi::LB), basic(abi::UB));
        let s = create_struct(F, &[1], &[10], std::slice::from_ref(&lbt)).unwrap();
        assert_eq!((s.size, s.lb, s.ub, s.explicit_lb, s.explicit_ub), (0, 10, 0, true, false));
        let s = create_struct(F, &[1, 2, 1], &[-4, 0, 20], &[lbt, i.clone(), ubt]).unwrap();
        assert_eq!((s.size, s.lb, s.ub, s.true_lb, s.true_ub), (8, -4, 20, 0, 8));
        let c = contiguous(F, 2, &Arc::new(s)).unwrap();
        assert_eq!((c.lb, c.ub, c.explicit_lb, c.explicit_ub), (-4, 44, true, true));
    }

    #[test]
    fn darrays_block_cyclic_and_none() {
        let i = basic(abi::INT);
        let da = |rank, gsizes: &[i64], distribs: &[c_int], dargs: &[c_int], psizes: &[c_int], order| {
            let a = Darray { size: psizes.iter().product(), rank, gsizes, distribs, dargs, psizes, order };
            darray(F, &a, &i)
        };
        let d = DISTRIBUTE_DFLT_DARG;
        // 10 ints in blocks over 3 processes: 4, 4, 2.
        let b: Vec<_> = (0..3).map(|r| da(r, &[10], &[DISTRIBUTE_BLOCK], &[d], &[3], abi::ORDER_C).unwrap()).collect();
        assert_eq!(blocks(&b[0], 1), vec![(0, 16)]);
        assert_eq!(blocks(&b[2], 1), vec![(32, 8)]);
        assert_eq!((b[1].lb, b[1].extent(), b[1].size), (0, 40, 16));
        // Cyclic(2) over 2: indices 0,1,4,5,8,9 and 2,3,6,7.
        let c = da(1, &[10], &[DISTRIBUTE_CYCLIC], &[2], &[2], abi::ORDER_C).unwrap();
        assert_eq!(blocks(&c, 1), vec![(8, 8), (24, 8)]);
        // A 4x6 array, rows in blocks over 2, columns cyclic over 3; rank 4 is (1, 1): rows
        // 2-3, columns 1 and 4; C order: row by row.
        let g = da(4, &[4, 6], &[DISTRIBUTE_BLOCK, DISTRIBUTE_CYCLIC], &[d, d], &[2, 3], abi::ORDER_C).unwrap();
        let want: Vec<(isize, usize)> = [13, 16, 19, 22].iter().map(|&k| (k * 4, 4)).collect();
        assert_eq!(blocks(&g, 1), want);
        assert_eq!(g.extent(), 96);
        // Fortran order: the first index varies fastest; (1, 1) owns rows 2-3 of columns 1, 4.
        let f = da(4, &[4, 6], &[DISTRIBUTE_BLOCK, DISTRIBUTE_CYCLIC], &[d, d], &[2, 3], abi::ORDER_FORTRAN).unwrap();
        assert_eq!(blocks(&f, 1), vec![(24, 8), (72, 8)]);
        // NONE keeps the whole dimension; a block too small for the array is refused.
        let n = da(1, &[3, 4], &[DISTRIBUTE_NONE, DISTRIBUTE_BLOCK], &[d, 2], &[1, 2], abi::ORDER_C).unwrap();
        assert_eq!(blocks(&n, 1), vec![(8, 8), (24, 8), (40, 8)]);
        assert!(da(0, &[10], &[DISTRIBUTE_BLOCK], &[2], &[3], abi::ORDER_C).is_err());
        assert!(da(0, &[10], &[DISTRIBUTE_NONE], &[d], &[2], abi::ORDER_C).is_err());
        assert!(da(0, &[10], &[7], &[d], &[1], abi::ORDER_C).is_err());
        let bad = Darray {
            size: 2,
            rank: 2,
            gsizes: &[4],
            distribs: &[DISTRIBUTE_BLOCK],
            dargs: &[d],
            psizes: &[2],
            order: abi::ORDER_C,
        };
        assert!(darray(F, &bad, &i).is_err());
        // The contents: ints, or the gsizes as large counts.
        let a = Darray {
            size: 3,
            rank: 0,
            gsizes: &[10],
            distribs: &[DISTRIBUTE_BLOCK],
            dargs: &[d],
            psizes: &[3],
            order: abi::ORDER_C,
        };
        let c = darray(Form::Large, &a, &i).unwrap().contents.unwrap();
        assert_eq!((c.combiner, c.ints.len(), c.counts, c.aints.len()), (abi::COMBINER_DARRAY, 7, vec![10], 0));
        let c = darray(F, &a, &i).unwrap().contents.unwrap();
        assert_eq!(c.ints, vec![3, 0, 1, 10, DISTRIBUTE_BLOCK, d, 3, abi::ORDER_C]);
    }
}
