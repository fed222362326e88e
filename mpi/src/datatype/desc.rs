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
use crate::abi::{self, Aint, Count, Datatype};

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

/// How a type was built (`MPI_Type_get_envelope`/`MPI_Type_get_contents`): the constructor's
/// arguments by C type. A `_c` constructor's counts and displacements are `MPI_Count`s
/// (`counts`, MPI-4.1 §5.1.13); the other forms leave `counts` empty.
#[derive(Clone, Debug, Default)]
pub struct Contents {
    pub combiner: c_int,
    pub ints: Vec<c_int>,
    pub aints: Vec<Aint>,
    pub counts: Vec<Count>,
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
    /// A process rank outside its group (darray).
    Rank,
    /// Other bad arguments (subarray dimensions, order...).
    Arg(&'static str),
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
