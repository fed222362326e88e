//! A datatype's layout ([`TypeDesc`]): its bounds, its size, and its data as a list of
//! [`Run`]s, built by the MPI constructors from their arguments.
//!
//! **Runs.** One element of a type is a sequence of runs; a run is `count` blocks of `len`
//! contiguous bytes, `stride` bytes apart, starting `off` bytes from the buffer's address, all of
//! one basic element size (`elem`). A vector of a basic type is one run however long it is; a 2-D
//! subarray is one run per row; an indexed type one run per block (merged where blocks touch or
//! repeat at a constant stride). This is MPICH's "leaf" view of a dataloop kept one level deep:
//! moving data is a walk over runs and blocks (`super::pack`), memory is proportional to the
//! irregular parts of a type, not to its element count. The runs are in typemap order (the order
//! of the packed bytes), offsets may be negative.
//!
//! **Bounds** follow MPI-4.1 §5.1: `lb`/`ub` are the least and greatest `displacement + bound` of
//! the parts (a struct's `ub` padded to the alignment of its most aligned basic type, as a C
//! struct is), `true_lb`/`true_ub` those of the data itself; `create_resized` sets `lb` and the
//! extent. A bound set by a marker (`MPI_LB`/`MPI_UB` in a struct, which MPICH still accepts,
//! `create_resized`, `subarray`, `darray`) is *explicit*: in the types built from it, explicit
//! bounds override the data's (MPI-1's markers, §4.1.6 of MPI-2.2). Parts with neither data nor
//! explicit bounds (a zero count, `MPI_Type_contiguous(0, ...)`) move no bound.

use std::ffi::c_int;
use std::sync::Arc;

use super::builtin::{Builtin, Kind};
use crate::abi::{self, Aint, Datatype};

/// `count` blocks of `len` bytes, `stride` apart, from `off`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Run {
    pub off: isize,
    pub len: usize,
    pub count: usize,
    /// Distance between two blocks' starts (meaningless when `count` is 1).
    pub stride: isize,
    /// Size of the basic elements the blocks hold (`MPI_Get_elements`).
    pub elem: usize,
}

impl Run {
    /// Data bytes in the run.
    pub fn bytes(&self) -> usize {
        self.len * self.count
    }
}

/// How a type was built (`MPI_Type_get_envelope`/`MPI_Type_get_contents`).
#[derive(Clone, Debug)]
pub struct Contents {
    pub combiner: c_int,
    pub ints: Vec<c_int>,
    pub aints: Vec<Aint>,
    pub types: Vec<Arc<TypeDesc>>,
}

/// A datatype's layout and history. Immutable once built, shared (`Arc`) by the handles that
/// name it, the types built from it and the operations in flight that use it.
#[derive(Clone, Debug)]
pub struct TypeDesc {
    /// Bytes of data in one element.
    pub size: usize,
    pub lb: isize,
    pub ub: isize,
    pub true_lb: isize,
    pub true_ub: isize,
    /// Alignment of its most aligned basic type (pads a struct's extent).
    pub align: usize,
    /// `lb` comes from a marker (see the module doc), not from the data.
    pub explicit_lb: bool,
    /// `ub` comes from a marker; a struct's `ub` is then not padded.
    pub explicit_ub: bool,
    /// One element's data, in typemap order.
    pub runs: Box<[Run]>,
    /// Basic elements in one element.
    pub elems: u64,
    /// The one predefined type (basic or a MINLOC/MAXLOC pair) all the data is made of, if any:
    /// what a reduction works on.
    pub leaf: Option<Datatype>,
    /// The handle of a predefined type (`MPI_COMBINER_NAMED`).
    pub named: Option<Datatype>,
    /// How it was built (`None` for a predefined type).
    pub contents: Option<Contents>,
}

impl TypeDesc {
    /// `ub - lb`.
    pub fn extent(&self) -> isize {
        self.ub - self.lb
    }

    /// True if `count` elements are `count × size` contiguous bytes starting at the buffer's
    /// address plus [`first_byte`](Self::first_byte): one dense run whose extent is its size.
    pub fn is_dense(&self) -> bool {
        match &*self.runs {
            [] => true,
            [r] => (r.count == 1 || r.stride == r.len as isize) && self.extent() == self.size as isize,
            _ => false,
        }
    }

    /// Offset of the first data byte (of a dense type).
    pub fn first_byte(&self) -> isize {
        self.runs.first().map_or(0, |r| r.off)
    }

    /// The descriptor of a predefined basic type.
    pub fn basic(b: &Builtin) -> TypeDesc {
        let size = b.size();
        let runs: Box<[Run]> = if size == 0 {
            Box::new([])
        } else {
            Box::new([Run { off: 0, len: size, count: 1, stride: size as isize, elem: elem_size(b) }])
        };
        TypeDesc {
            size,
            lb: 0,
            ub: size as isize,
            true_lb: 0,
            true_ub: size as isize,
            align: natural_align(b),
            explicit_lb: b.handle == abi::LB,
            explicit_ub: b.handle == abi::UB,
            elems: u64::from(size > 0),
            runs,
            leaf: Some(b.handle),
            named: Some(b.handle),
            contents: None,
        }
    }

    /// The MINLOC/MAXLOC pair `struct { value; int; }` with the C layout, named `handle`.
    pub fn pair(value: &TypeDesc, int: &TypeDesc, handle: Datatype) -> TypeDesc {
        let int_off = value.size.next_multiple_of(int.align);
        let align = value.align.max(int.align);
        let ub = (int_off + int.size).next_multiple_of(align) as isize;
        let mut b = Builder::new();
        b.append(value, 0, 1);
        b.append(int, int_off as isize, 1);
        TypeDesc {
            size: value.size + int.size,
            lb: 0,
            ub,
            true_lb: 0,
            true_ub: (int_off + int.size) as isize,
            align,
            explicit_lb: false,
            explicit_ub: false,
            elems: 2,
            runs: b.finish(),
            leaf: Some(handle),
            named: Some(handle),
            contents: None,
        }
    }
}

/// Size of a basic type's elements for `MPI_Get_elements` (a complex number or a pair is one
/// element of its full size; markers have none).
fn elem_size(b: &Builtin) -> usize {
    b.size().max(1)
}

/// The alignment C gives a basic type on this platform (at most 16).
fn natural_align(b: &Builtin) -> usize {
    match b.kind {
        Kind::C32 => 4,
        Kind::C64 => 8,
        Kind::C80 | Kind::F80 | Kind::F128 | Kind::C128 => 16,
        Kind::Pair => 4.max(b.size() / 2).min(8),
        _ => b.size().clamp(1, 8),
    }
}

/// Accumulates runs, merging a block into the previous run when it continues it (touching
/// bytes of the same element size) or repeats it (same length, constant stride).
#[derive(Debug, Default)]
pub struct Builder {
    runs: Vec<Run>,
}

impl Builder {
    pub fn new() -> Builder {
        Builder::default()
    }

    /// Adds a run, merging it into the last where it continues or repeats it.
    pub fn push(&mut self, r: Run) {
        if r.len == 0 || r.count == 0 {
            return;
        }
        // A dense run is one block.
        let r = if r.count > 1 && r.stride == r.len as isize {
            Run { len: r.len * r.count, count: 1, stride: (r.len * r.count) as isize, ..r }
        } else {
            r
        };
        if let Some(last) = self.runs.last_mut()
            && last.elem == r.elem
        {
            if last.count == 1 && r.count == 1 {
                // Touching blocks: one longer block.
                if last.off + last.len as isize == r.off {
                    last.len += r.len;
                    last.stride = last.len as isize;
                    return;
                }
                // Two blocks of one length: a run of two.
                if last.len == r.len {
                    last.stride = r.off - last.off;
                    last.count = 2;
                    return;
                }
            } else if r.count == 1 && last.len == r.len && last.off + last.stride * last.count as isize == r.off {
                last.count += 1;
                return;
            }
        }
        self.runs.push(r);
    }

    /// Appends `n` consecutive elements of `t` (one extent apart) starting at `disp`.
    pub fn append(&mut self, t: &TypeDesc, disp: isize, n: usize) {
        if n == 0 || t.size == 0 {
            return;
        }
        if t.is_dense() {
            let r = t.runs[0];
            self.push(Run {
                off: disp + r.off,
                len: t.size * n,
                count: 1,
                stride: (t.size * n) as isize,
                elem: r.elem,
            });
            return;
        }
        // A type of one run repeated at its extent: one run per element, or one run in all when
        // the elements' blocks keep the run's stride.
        if let [r] = &*t.runs
            && r.count > 1
            && r.stride * r.count as isize == t.extent()
        {
            self.push(Run { off: disp + r.off, count: r.count * n, ..*r });
            return;
        }
        let ext = t.extent();
        for k in 0..n {
            for r in t.runs.iter() {
                self.push(Run { off: disp + k as isize * ext + r.off, ..*r });
            }
        }
    }

    /// The runs.
    pub fn finish(self) -> Box<[Run]> {
        self.runs.into_boxed_slice()
    }
}

/// The bounds of a type made of parts `(displacement, count, type)`, each `count` elements of
/// `type` one extent apart (see the module doc).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
struct Bounds {
    lb: isize,
    ub: isize,
    true_lb: isize,
    true_ub: isize,
    explicit_lb: bool,
    explicit_ub: bool,
}

fn bounds(parts: &[(isize, usize, &TypeDesc)]) -> Bounds {
    // Least and greatest bounds from markers, from the data, and of the data itself.
    let (mut lbm, mut lbd, mut tlb): (Option<isize>, Option<isize>, Option<isize>) = (None, None, None);
    let (mut ubm, mut ubd, mut tub): (Option<isize>, Option<isize>, Option<isize>) = (None, None, None);
    let min = |a: Option<isize>, b: isize| Some(a.map_or(b, |a| a.min(b)));
    let max = |a: Option<isize>, b: isize| Some(a.map_or(b, |a| a.max(b)));
    for &(disp, n, t) in parts {
        if n == 0 {
            continue;
        }
        let last = disp + (n as isize - 1) * t.extent();
        let (lo, hi) = (disp.min(last), disp.max(last));
        if t.explicit_lb {
            lbm = min(lbm, lo + t.lb);
        } else if t.size > 0 {
            lbd = min(lbd, lo + t.lb);
        }
        if t.explicit_ub {
            ubm = max(ubm, hi + t.ub);
        } else if t.size > 0 {
            ubd = max(ubd, hi + t.ub);
        }
        if t.size > 0 {
            tlb = min(tlb, lo + t.true_lb);
            tub = max(tub, hi + t.true_ub);
        }
    }
    Bounds {
        lb: lbm.or(lbd).unwrap_or(0),
        ub: ubm.or(ubd).unwrap_or(0),
        true_lb: tlb.unwrap_or(0),
        true_ub: tub.unwrap_or(0),
        explicit_lb: lbm.is_some(),
        explicit_ub: ubm.is_some(),
    }
}

/// The one leaf type shared by every part with data, if any.
fn common_leaf(parts: &[(isize, usize, &TypeDesc)]) -> Option<Datatype> {
    let mut leaf = None;
    for &(_, n, t) in parts {
        if n == 0 || t.size == 0 {
            continue;
        }
        match (leaf, t.leaf) {
            (_, None) => return None,
            (None, l) => leaf = l,
            (Some(a), Some(b)) if a != b => return None,
            _ => {}
        }
    }
    leaf
}

/// Why a constructor's arguments were refused.
#[derive(Debug, PartialEq, Eq)]
pub enum Invalid {
    /// A negative count or block length.
    Count,
    /// Sizes overflow the address space.
    Overflow,
    /// Other bad arguments (subarray dimensions, order...).
    Arg(&'static str),
}

fn checked_len(count: c_int) -> Result<usize, Invalid> {
    usize::try_from(count).map_err(|_| Invalid::Count)
}

/// A type of `parts` (displacement, count, type), in typemap order, with `contents`. `pad_struct`
/// rounds `ub` up to the alignment (create_struct).
pub fn from_parts(
    parts: &[(isize, usize, &TypeDesc)],
    contents: Contents,
    pad_struct: bool,
) -> Result<TypeDesc, Invalid> {
    let mut size = 0usize;
    let mut elems = 0u64;
    let mut align = 1;
    let mut b = Builder::new();
    for &(disp, n, t) in parts {
        size = t.size.checked_mul(n).and_then(|s| size.checked_add(s)).ok_or(Invalid::Overflow)?;
        elems = elems.saturating_add(t.elems.saturating_mul(n as u64));
        if t.size > 0 || t.explicit_lb || t.explicit_ub {
            align = align.max(t.align);
        }
        b.append(t, disp, n);
    }
    let Bounds { lb, mut ub, true_lb, true_ub, explicit_lb, explicit_ub } = bounds(parts);
    if pad_struct && !explicit_ub && ub > lb {
        let ext = (ub - lb) as usize;
        ub = lb + ext.next_multiple_of(align) as isize;
    }
    Ok(TypeDesc {
        size,
        lb,
        ub,
        true_lb,
        true_ub,
        align,
        explicit_lb,
        explicit_ub,
        runs: b.finish(),
        elems,
        leaf: common_leaf(parts),
        named: None,
        contents: Some(contents),
    })
}

fn contents(combiner: c_int, ints: Vec<c_int>, aints: Vec<Aint>, types: Vec<Arc<TypeDesc>>) -> Contents {
    Contents { combiner, ints, aints, types }
}

/// `MPI_Type_contiguous`.
pub fn contiguous(count: c_int, old: &Arc<TypeDesc>) -> Result<TypeDesc, Invalid> {
    let n = checked_len(count)?;
    from_parts(&[(0, n, old)], contents(abi::COMBINER_CONTIGUOUS, vec![count], vec![], vec![old.clone()]), false)
}

/// `MPI_Type_vector` (stride in elements) and `MPI_Type_create_hvector` (stride in bytes:
/// `bytes`).
pub fn vector(
    count: c_int,
    blocklen: c_int,
    stride: Aint,
    bytes: bool,
    old: &Arc<TypeDesc>,
) -> Result<TypeDesc, Invalid> {
    let (n, bl) = (checked_len(count)?, checked_len(blocklen)?);
    let step =
        if bytes { stride as isize } else { (stride as isize).checked_mul(old.extent()).ok_or(Invalid::Overflow)? };
    let parts: Vec<(isize, usize, &TypeDesc)> = (0..n).map(|i| (i as isize * step, bl, &**old)).collect();
    let c = if bytes {
        contents(abi::COMBINER_HVECTOR, vec![count, blocklen], vec![stride], vec![old.clone()])
    } else {
        contents(abi::COMBINER_VECTOR, vec![count, blocklen, stride as c_int], vec![], vec![old.clone()])
    };
    from_parts(&parts, c, false)
}

/// `MPI_Type_indexed` (displacements in elements) and `MPI_Type_create_hindexed` (in bytes).
pub fn indexed(blocklens: &[c_int], displs: &[Aint], bytes: bool, old: &Arc<TypeDesc>) -> Result<TypeDesc, Invalid> {
    let mut parts = Vec::with_capacity(blocklens.len());
    for (&bl, &d) in blocklens.iter().zip(displs) {
        let disp = if bytes { d as isize } else { (d as isize).checked_mul(old.extent()).ok_or(Invalid::Overflow)? };
        parts.push((disp, checked_len(bl)?, &**old));
    }
    let count = blocklens.len() as c_int;
    let c = if bytes {
        let mut ints = vec![count];
        ints.extend_from_slice(blocklens);
        contents(abi::COMBINER_HINDEXED, ints, displs.to_vec(), vec![old.clone()])
    } else {
        let mut ints = vec![count];
        ints.extend_from_slice(blocklens);
        ints.extend(displs.iter().map(|&d| d as c_int));
        contents(abi::COMBINER_INDEXED, ints, vec![], vec![old.clone()])
    };
    from_parts(&parts, c, false)
}

/// `MPI_Type_create_indexed_block` (displacements in elements) and
/// `MPI_Type_create_hindexed_block` (in bytes).
pub fn indexed_block(blocklen: c_int, displs: &[Aint], bytes: bool, old: &Arc<TypeDesc>) -> Result<TypeDesc, Invalid> {
    let bl = checked_len(blocklen)?;
    let mut parts = Vec::with_capacity(displs.len());
    for &d in displs {
        let disp = if bytes { d as isize } else { (d as isize).checked_mul(old.extent()).ok_or(Invalid::Overflow)? };
        parts.push((disp, bl, &**old));
    }
    let count = displs.len() as c_int;
    let c = if bytes {
        contents(abi::COMBINER_HINDEXED_BLOCK, vec![count, blocklen], displs.to_vec(), vec![old.clone()])
    } else {
        let mut ints = vec![count, blocklen];
        ints.extend(displs.iter().map(|&d| d as c_int));
        contents(abi::COMBINER_INDEXED_BLOCK, ints, vec![], vec![old.clone()])
    };
    from_parts(&parts, c, false)
}

/// `MPI_Type_create_struct`.
pub fn create_struct(blocklens: &[c_int], displs: &[Aint], types: &[Arc<TypeDesc>]) -> Result<TypeDesc, Invalid> {
    let mut parts = Vec::with_capacity(types.len());
    for ((&bl, &d), t) in blocklens.iter().zip(displs).zip(types) {
        parts.push((d as isize, checked_len(bl)?, &**t));
    }
    let count = types.len() as c_int;
    let mut ints = vec![count];
    ints.extend_from_slice(blocklens);
    from_parts(&parts, contents(abi::COMBINER_STRUCT, ints, displs.to_vec(), types.to_vec()), true)
}

/// `MPI_Type_create_resized`.
pub fn resized(lb: Aint, extent: Aint, old: &Arc<TypeDesc>) -> TypeDesc {
    TypeDesc {
        lb: lb as isize,
        ub: (lb as isize).wrapping_add(extent as isize),
        explicit_lb: true,
        explicit_ub: true,
        named: None,
        contents: Some(contents(abi::COMBINER_RESIZED, vec![], vec![lb, extent], vec![old.clone()])),
        ..(**old).clone()
    }
}

/// `MPI_Type_dup`: the same layout, a new history.
pub fn dup(old: &Arc<TypeDesc>) -> TypeDesc {
    TypeDesc {
        named: None,
        contents: Some(contents(abi::COMBINER_DUP, vec![], vec![], vec![old.clone()])),
        ..(**old).clone()
    }
}

/// `MPI_Type_create_subarray`: the `subsizes` block at `starts` of an array of `sizes` (C or
/// Fortran order); lb 0 and the extent of the whole array.
pub fn subarray(
    sizes: &[c_int],
    subsizes: &[c_int],
    starts: &[c_int],
    order: c_int,
    old: &Arc<TypeDesc>,
) -> Result<TypeDesc, Invalid> {
    let nd = sizes.len();
    if nd == 0 || subsizes.len() != nd || starts.len() != nd {
        return Err(Invalid::Arg("subarray: ndims must be positive"));
    }
    if order != abi::ORDER_C && order != abi::ORDER_FORTRAN {
        return Err(Invalid::Arg("subarray: order must be MPI_ORDER_C or MPI_ORDER_FORTRAN"));
    }
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
    // Dimensions from the fastest-varying one (the last in C order, the first in Fortran's).
    let dims: Vec<usize> = if order == abi::ORDER_C { (0..nd).rev().collect() } else { (0..nd).collect() };
    let ext = old.extent();
    // Strides of each dimension in bytes, and the offset of the block's first element.
    let mut stride = vec![0isize; nd];
    let mut s = ext;
    let mut first = 0isize;
    for &d in &dims {
        stride[d] = s;
        first = first
            .checked_add((starts[d] as isize).checked_mul(s).ok_or(Invalid::Overflow)?)
            .ok_or(Invalid::Overflow)?;
        s = s.checked_mul(sizes[d] as isize).ok_or(Invalid::Overflow)?;
    }
    let whole = s;
    // The innermost dimension's rows are `subsize` consecutive elements; every other dimension
    // repeats what is inside it.
    let inner = dims[0];
    let mut inside = from_parts(&[(0, subsizes[inner] as usize, old)], contents(0, vec![], vec![], vec![]), false)?;
    for &d in &dims[1..] {
        let parts: Vec<(isize, usize, &TypeDesc)> =
            (0..subsizes[d] as isize).map(|i| (i * stride[d], 1, &inside)).collect();
        inside = from_parts(&parts, contents(0, vec![], vec![], vec![]), false)?;
    }
    let mut ints = vec![nd as c_int];
    ints.extend_from_slice(sizes);
    ints.extend_from_slice(subsizes);
    ints.extend_from_slice(starts);
    ints.push(order);
    let runs: Vec<Run> = inside.runs.iter().map(|r| Run { off: r.off + first, ..*r }).collect();
    Ok(TypeDesc {
        lb: 0,
        ub: whole,
        explicit_lb: true,
        explicit_ub: true,
        true_lb: inside.true_lb + first,
        true_ub: inside.true_ub + first,
        runs: runs.into_boxed_slice(),
        named: None,
        contents: Some(contents(abi::COMBINER_SUBARRAY, ints, vec![], vec![old.clone()])),
        ..inside
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::datatype::builtin::lookup;

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
        let v = vector(1000, 2, 5, false, &d).unwrap();
        assert_eq!(v.runs.len(), 1);
        assert_eq!((v.size, v.lb, v.ub, v.extent()), (16000, 0, (999 * 5 + 2) * 8, (999 * 5 + 2) * 8));
        assert_eq!(v.runs[0], Run { off: 0, len: 16, count: 1000, stride: 40, elem: 8 });
        assert_eq!(v.elems, 2000);
        assert!(!v.is_dense());
        let c = contiguous(10, &d).unwrap();
        assert!(c.is_dense());
        assert_eq!(c.runs.len(), 1);
        let cv = contiguous(3, &Arc::new(vector(4, 1, 1, false, &d).unwrap())).unwrap();
        assert!(cv.is_dense(), "a vector of stride 1 is contiguous");
        assert_eq!(cv.size, 96);
        // A contiguous of vectors whose blocks keep their stride across elements: one run.
        let h = Arc::new(vector(3, 1, 2, false, &d).unwrap());
        let hv = Arc::new(resized(0, 48, &h));
        let c2 = contiguous(4, &hv).unwrap();
        assert_eq!(c2.runs.len(), 1);
        assert_eq!(c2.runs[0].count, 12);
    }

    #[test]
    fn negative_strides_and_bounds() {
        let i = basic(abi::INT);
        let v = vector(3, 1, -2, false, &i).unwrap();
        assert_eq!((v.lb, v.ub), (-16, 4));
        assert_eq!(blocks(&v, 1), vec![(0, 4), (-8, 4), (-16, 4)]);
        let hv = vector(2, 2, -100, true, &i).unwrap();
        assert_eq!((hv.lb, hv.ub, hv.true_lb, hv.true_ub), (-100, 8, -100, 8));
    }

    #[test]
    fn indexed_blocks_merge_when_they_touch_and_keep_typemap_order() {
        let i = basic(abi::INT);
        let t = indexed(&[2, 1, 3], &[0, 2, 10], false, &i).unwrap();
        assert_eq!(blocks(&t, 1), vec![(0, 12), (40, 12)]);
        assert_eq!((t.size, t.ub), (24, 52));
        let out_of_order = indexed(&[1, 1], &[5, 0], false, &i).unwrap();
        assert_eq!(blocks(&out_of_order, 1), vec![(20, 4), (0, 4)], "typemap order, not address order");
        let ib = indexed_block(2, &[0, 4, 8, 12], false, &i).unwrap();
        assert_eq!(ib.runs.len(), 1, "blocks at a constant stride are one run");
        assert_eq!(ib.runs[0], Run { off: 0, len: 8, count: 4, stride: 16, elem: 4 });
        assert!(matches!(indexed(&[-1], &[0], false, &i), Err(Invalid::Count)));
    }

    #[test]
    fn structs_are_padded_like_c() {
        // struct { char c; double d; int i; } : offsets 0, 8, 16; sizeof 24.
        let (c, d, i) = (basic(abi::CHAR), basic(abi::DOUBLE), basic(abi::INT));
        let s = create_struct(&[1, 1, 1], &[0, 8, 16], &[c, d, i]).unwrap();
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
        let r = resized(-4, 16, &i);
        assert_eq!((r.lb, r.ub, r.size, r.true_lb, r.true_ub), (-4, 12, 4, 0, 4));
        let rr = Arc::new(r);
        let c = contiguous(3, &rr).unwrap();
        assert_eq!(blocks(&c, 1), vec![(0, 4), (16, 4), (32, 4)]);
        let d = dup(&rr);
        assert_eq!(d.contents.as_ref().unwrap().combiner, abi::COMBINER_DUP);
        assert_eq!((d.lb, d.ub), (-4, 12));
    }

    #[test]
    fn subarrays_in_both_orders() {
        let i = basic(abi::INT);
        // A 4x5 array of ints, the 2x3 block at (1, 2), C order: rows of 3 at 4*(1*5+2).
        let c = subarray(&[4, 5], &[2, 3], &[1, 2], abi::ORDER_C, &i).unwrap();
        assert_eq!(blocks(&c, 1), vec![(28, 12), (48, 12)]);
        assert_eq!((c.lb, c.ub, c.size), (0, 80, 24));
        // Fortran order: the first index varies fastest.
        let f = subarray(&[4, 5], &[2, 3], &[1, 2], abi::ORDER_FORTRAN, &i).unwrap();
        assert_eq!(blocks(&f, 1), vec![(36, 8), (52, 8), (68, 8)]);
        // 3-D: one run per row of each plane.
        let t = subarray(&[3, 4, 5], &[2, 2, 2], &[1, 1, 1], abi::ORDER_C, &i).unwrap();
        assert_eq!(t.size, 32);
        assert_eq!(blocks(&t, 1).len(), 4);
        assert!(subarray(&[4], &[5], &[0], abi::ORDER_C, &i).is_err());
        assert!(subarray(&[4], &[2], &[3], abi::ORDER_C, &i).is_err());
        assert!(subarray(&[4], &[2], &[0], 99, &i).is_err());
    }

    #[test]
    fn empty_types() {
        let i = basic(abi::INT);
        let e = contiguous(0, &i).unwrap();
        assert_eq!((e.size, e.lb, e.ub, e.runs.len()), (0, 0, 0, 0));
        assert!(e.is_dense());
        let s = create_struct(&[], &[], &[]).unwrap();
        assert_eq!((s.size, s.extent()), (0, 0));
        // Members with no data and no bounds of their own move no bound (MPICH agrees).
        let e = Arc::new(e);
        let z = Arc::new(create_struct(&[0, 0], &[0, 8], &[i.clone(), basic(abi::DOUBLE)]).unwrap());
        let s = create_struct(&[1, 3], &[0, 8], &[e.clone(), z.clone()]).unwrap();
        assert_eq!((s.size, s.lb, s.extent(), s.true_lb, s.true_ub), (0, 0, 0, 0, 0));
        let s = create_struct(&[1, 1], &[100, 0], &[e.clone(), i.clone()]).unwrap();
        assert_eq!((s.size, s.lb, s.extent(), s.true_lb, s.true_ub), (4, 0, 4, 0, 4));
        let s = create_struct(&[0, 1], &[0, 8], &[i.clone(), basic(abi::DOUBLE)]).unwrap();
        assert_eq!((s.size, s.lb, s.extent()), (8, 8, 8));
        // A type resized around no data keeps its markers, and has no true extent.
        let r = Arc::new(resized(0, 16, &e));
        let c = contiguous(3, &r).unwrap();
        assert_eq!((c.size, c.lb, c.extent(), c.true_lb, c.true_ub), (0, 0, 48, 0, 0));
        // Explicit bounds override the data's.
        let s = create_struct(&[1, 1], &[0, 16], &[r.clone(), i.clone()]).unwrap();
        assert_eq!((s.size, s.lb, s.extent(), s.true_lb, s.true_ub), (4, 0, 16, 16, 20));
        // MPI_LB and MPI_UB (MPI-1, kept by MPICH): { (LB, 10) } has extent -10.
        let (lbt, ubt) = (basic(abi::LB), basic(abi::UB));
        let s = create_struct(&[1], &[10], &[lbt.clone()]).unwrap();
        assert_eq!((s.size, s.lb, s.ub, s.explicit_lb, s.explicit_ub), (0, 10, 0, true, false));
        let s = create_struct(&[1, 2, 1], &[-4, 0, 20], &[lbt, i.clone(), ubt]).unwrap();
        assert_eq!((s.size, s.lb, s.ub, s.true_lb, s.true_ub), (8, -4, 20, 0, 8));
        let c = contiguous(2, &Arc::new(s)).unwrap();
        assert_eq!((c.lb, c.ub, c.explicit_lb, c.explicit_ub), (-4, 44, true, true));
    }
}
