//! Datatypes: the predefined basic types ([`builtin`]), the layout of every type ([`desc`]), moving
//! typed data ([`pack`]), the table of derived types and the MPI calls on them ([`calls`]).
//!
//! **Handles.** A basic type's handle is MPICH's constant (its size in bits 8–15); the MINLOC/MAXLOC
//! pairs are MPICH's `0x8c000000`–`0x8c000004`; a derived type is `0x8c000005 + index` in the
//! state's table. All three resolve to a shared [`TypeDesc`] ([`resolve`]): the basic ones and the
//! pairs from static tables (valid before `MPI_Init`), the derived ones from the table, which
//! holds one per handle with its name and whether it was committed.
//!
//! **Freeing a type in use (MPI-4.1 §5.1.11).** `MPI_Type_free` marks a type for deallocation:
//! operations pending on it complete, types built from it stay valid. Whatever resolved the handle
//! holds the layout itself (an `Arc<TypeDesc>`: requests, schedules, derived types), so the table's
//! entry may go. A holder that keeps the *handle* (to resolve it again later, as a persistent
//! collective's recipe does at each `MPI_Start`) calls [`hold`] and later [`release`]: while held,
//! a freed entry stays in the table (its slot not given to a new type) until the last release.
//!
//! **Buffers.** A buffer argument `(buf, count, datatype)` is either contiguous bytes (a basic
//! type, or a derived one whose elements tile without gaps) or typed data that the point-to-point
//! layer packs into contiguous bytes to send and unpacks from them on receipt ([`Layout`]).

pub mod builtin;
pub mod calls;
pub mod construct;
pub mod desc;
pub mod external;
pub mod named;
pub mod pack;
pub mod packing;

use std::ffi::c_int;
use std::sync::{Arc, OnceLock};

pub use builtin::{BUILTIN, Builtin, Class, Kind, lookup, size_of_handle};
pub use desc::TypeDesc;

use crate::abi::{self, Datatype};
use crate::error::{Fail, Res, Why};
use crate::handle::Table;

/// A derived type in the table.
#[derive(Debug)]
pub struct Entry {
    pub desc: Arc<TypeDesc>,
    /// `MPI_Type_commit` was called: it may be used in communication.
    pub committed: bool,
    /// `MPI_Type_set_name`'s name.
    pub name: String,
    /// A predefined type made on demand (`MPI_Type_create_f90_*`): `MPI_Type_free` refuses it.
    pub predefined: bool,
    /// Holders of the handle ([`hold`]): the entry stays while any is left.
    pub holds: u32,
    /// `MPI_Type_free` was called while it was held: removed at the last [`release`].
    pub freed: bool,
}

impl Entry {
    /// A new derived type, nameless and unheld.
    pub fn new(desc: Arc<TypeDesc>, committed: bool) -> Entry {
        Entry { desc, committed, name: String::new(), predefined: false, holds: 0, freed: false }
    }
}

/// Keeps derived type `dt`'s handle (and its slot) valid until [`release`], whether or not the
/// program frees it meanwhile; predefined and unknown handles are left alone.
pub fn hold(types: &mut Types, dt: Datatype) {
    if let Some(e) = types.get_mut(dt) {
        e.holds += 1;
    }
}

/// `MPI_Type_free`'s removal of derived type `dt` from the table (after its attributes'
/// delete callbacks ran): now, or at the last [`release`] if it is held.
pub(crate) fn unlist(types: &mut Types, dt: Datatype) -> Res<()> {
    match types.get_mut(dt) {
        None => return Err(bad_type(dt, None)),
        Some(e) if e.holds > 0 => e.freed = true,
        Some(_) => drop(types.remove(dt)),
    }
    Ok(())
}

/// Ends one [`hold`] of `dt`: a type freed meanwhile goes with its last holder.
pub fn release(types: &mut Types, dt: Datatype) {
    if let Some(e) = types.get_mut(dt) {
        e.holds = e.holds.saturating_sub(1);
        if e.freed && e.holds == 0 {
            types.remove(dt);
        }
    }
}

/// The table of derived types: handles `DATATYPE_DIRECT + PAIR_TYPES + index`.
pub type Types = Table<Entry>;

/// An empty table of derived types.
pub const fn table() -> Types {
    Table::new(abi::DATATYPE_DIRECT + abi::PAIR_TYPES as u32)
}

/// The descriptors of the basic types (in `BUILTIN`'s order) and of the five pairs.
struct Predefined {
    basic: Vec<Arc<TypeDesc>>,
    pairs: [Arc<TypeDesc>; abi::PAIR_TYPES],
}

fn predefined() -> &'static Predefined {
    static P: OnceLock<Predefined> = OnceLock::new();
    P.get_or_init(|| {
        let basic: Vec<Arc<TypeDesc>> = BUILTIN.iter().map(|b| Arc::new(TypeDesc::basic(b))).collect();
        let by = |h: Datatype| BUILTIN.iter().position(|b| b.handle == h).map(|i| basic[i].clone());
        let pair = |v: Datatype, h: Datatype| match (by(v), by(abi::INT)) {
            (Some(v), Some(i)) => Arc::new(TypeDesc::pair(&v, &i, h)),
            _ => unreachable!("the pairs' value types are basic types"),
        };
        let pairs = [
            pair(abi::FLOAT, abi::FLOAT_INT),
            pair(abi::DOUBLE, abi::DOUBLE_INT),
            pair(abi::LONG, abi::LONG_INT),
            pair(abi::SHORT, abi::SHORT_INT),
            pair(abi::LONG_DOUBLE, abi::LONG_DOUBLE_INT),
        ];
        Predefined { basic, pairs }
    })
}

/// The names of the pairs, in handle order.
const PAIR_NAMES: [&str; abi::PAIR_TYPES] =
    ["MPI_FLOAT_INT", "MPI_DOUBLE_INT", "MPI_LONG_INT", "MPI_SHORT_INT", "MPI_LONG_DOUBLE_INT"];

/// The index of a pair's handle, if it is one.
fn pair_index(dt: Datatype) -> Option<usize> {
    let i = (dt as u32).wrapping_sub(abi::DATATYPE_DIRECT) as usize;
    (i < abi::PAIR_TYPES).then_some(i)
}

/// The descriptor of a predefined type (basic or pair).
pub fn predefined_desc(dt: Datatype) -> Option<Arc<TypeDesc>> {
    let p = predefined();
    if let Some(i) = pair_index(dt) {
        return Some(p.pairs[i].clone());
    }
    builtin::index_of(dt).map(|i| p.basic[i].clone())
}

/// The predefined name of `dt`, if it is a predefined type.
pub fn predefined_name(dt: Datatype) -> Option<&'static str> {
    pair_index(dt).map(|i| PAIR_NAMES[i]).or_else(|| lookup(dt).map(|b| b.name))
}

#[cold]
pub fn bad_type(dt: Datatype, ci: Option<usize>) -> Fail {
    Fail::new(abi::ERR_TYPE, ci, Why::Type(dt))
}

/// The descriptor of any valid type handle, committed or not (for the query calls).
pub fn any(types: &Types, dt: Datatype) -> Res<Arc<TypeDesc>> {
    if let Some(d) = predefined_desc(dt) {
        return Ok(d);
    }
    types.get(dt).map(|e| e.desc.clone()).ok_or_else(|| bad_type(dt, None))
}

/// The descriptor of a type a communication may use: predefined, or derived and committed.
pub fn resolve(types: &Types, dt: Datatype, ci: usize) -> Res<Arc<TypeDesc>> {
    if let Some(d) = predefined_desc(dt) {
        return Ok(d);
    }
    match types.get(dt) {
        Some(e) if e.committed => Ok(e.desc.clone()),
        Some(_) => Err(Fail::new(abi::ERR_TYPE, Some(ci), Why::Arg("the datatype is not committed (MPI_Type_commit)"))),
        None => Err(bad_type(dt, Some(ci))),
    }
}

/// A buffer argument `(buf, count, datatype)`, resolved.
#[derive(Clone, Debug)]
pub enum Layout {
    /// `len` contiguous bytes at `ptr`.
    Contig { ptr: *mut u8, len: usize },
    /// `count` elements of `desc` at `base` (not contiguous): packed to send, unpacked on receipt.
    Typed { base: *mut u8, count: usize, desc: Arc<TypeDesc> },
}

impl Layout {
    /// Bytes of data.
    pub fn len(&self) -> usize {
        match self {
            Layout::Contig { len, .. } => *len,
            Layout::Typed { count, desc, .. } => count * desc.size,
        }
    }

    /// True if there is no data.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The packed bytes (a copy for typed data).
    ///
    /// # Safety
    /// The buffer holds the data the layout describes.
    pub unsafe fn packed(&self) -> Vec<u8> {
        match self {
            // SAFETY: the caller's contract.
            Layout::Contig { ptr, len } => unsafe { crate::p2p::in_bytes(ptr.cast(), *len) }.to_vec(),
            Layout::Typed { base, count, desc } => {
                let mut v = vec![0u8; count * desc.size];
                // SAFETY: the caller's contract.
                unsafe { pack::pack(desc, *base, *count, &mut v) };
                v
            }
        }
    }
}

/// Resolves a buffer argument for communicator index `ci`: checks the type (committed), the
/// count, the size and, for a basic type, that a positive count has a buffer (a derived type may
/// use `MPI_BOTTOM`, address 0, with absolute displacements).
pub fn layout(types: &Types, buf: *const u8, count: c_int, dt: Datatype, ci: usize) -> Res<Layout> {
    if count < 0 {
        return Err(Fail::new(abi::ERR_COUNT, Some(ci), Why::Count(count)));
    }
    layout_large(types, buf, i64::from(count), dt, ci)
}

/// [`layout`] with an `MPI_Count` count (the `_c` calls).
pub fn layout_large(types: &Types, buf: *const u8, count: i64, dt: Datatype, ci: usize) -> Res<Layout> {
    let Ok(n) = usize::try_from(count) else {
        return Err(Fail::new(abi::ERR_COUNT, Some(ci), Why::Arg("negative count")));
    };
    if let Some(size) = size_of_handle(dt) {
        let Some(len) = n.checked_mul(size).filter(|&l| l <= isize::MAX as usize) else {
            return Err(Fail::new(
                abi::ERR_COUNT,
                Some(ci),
                Why::Arg("count × datatype size exceeds the address space"),
            ));
        };
        if buf.is_null() && len > 0 {
            return Err(Fail::new(abi::ERR_BUFFER, Some(ci), Why::Buffer));
        }
        return Ok(Layout::Contig { ptr: buf.cast_mut(), len });
    }
    let desc = resolve(types, dt, ci)?;
    let len = desc.size.checked_mul(n).filter(|&l| l <= isize::MAX as usize);
    let Some(len) = len else {
        return Err(Fail::new(abi::ERR_COUNT, Some(ci), Why::Arg("count × datatype size exceeds the address space")));
    };
    if desc.is_dense() || n == 0 || len == 0 {
        let ptr = buf.wrapping_offset(desc.first_byte()).cast_mut();
        return Ok(Layout::Contig { ptr, len });
    }
    Ok(Layout::Typed { base: buf.cast_mut(), count: n, desc })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn predefined_types_resolve_without_the_table() {
        let t = table();
        assert_eq!(any(&t, abi::INT).unwrap().size, 4);
        let di = any(&t, abi::DOUBLE_INT).unwrap();
        assert_eq!((di.size, di.extent(), di.named), (12, 16, Some(abi::DOUBLE_INT)));
        assert_eq!(predefined_name(abi::LONG_DOUBLE_INT), Some("MPI_LONG_DOUBLE_INT"));
        assert_eq!(predefined_name(abi::TWO_INT), Some("MPI_2INT"));
        assert!(any(&t, abi::DATATYPE_NULL).is_err());
        assert!(any(&t, (abi::DATATYPE_DIRECT + 5) as c_int).is_err(), "no derived type yet");
    }

    #[test]
    fn a_held_type_stays_until_its_last_release() {
        let mut t = table();
        let i = predefined_desc(abi::INT).unwrap();
        let h = t.insert(Entry::new(i.clone(), true)).unwrap();
        hold(&mut t, h);
        hold(&mut t, h);
        unlist(&mut t, h).unwrap();
        assert!(t.get(h).is_some_and(|e| e.freed), "freed while held: still listed");
        let other = t.insert(Entry::new(i.clone(), true)).unwrap();
        assert_ne!(other, h, "a held slot is not given out again");
        release(&mut t, h);
        assert!(any(&t, h).is_ok());
        release(&mut t, h);
        assert!(any(&t, h).is_err(), "gone with the last holder");
        // Unheld: removed at once; releasing an unknown handle does nothing.
        unlist(&mut t, other).unwrap();
        assert!(t.get(other).is_none());
        release(&mut t, other);
        assert!(unlist(&mut t, other).is_err());
        // Held but never freed: still there after the release.
        let k = t.insert(Entry::new(i, true)).unwrap();
        hold(&mut t, k);
        release(&mut t, k);
        assert!(t.get(k).is_some_and(|e| !e.freed));
    }

    #[test]
    fn layouts_of_dense_and_sparse_types() {
        let mut t = table();
        let i = predefined_desc(abi::INT).unwrap();
        let v = Arc::new(construct::vector(construct::Form::Int, 2, 1, 2, false, &i).unwrap());
        let h = t.insert(Entry::new(v, false)).unwrap();
        let buf = [0u8; 64];
        assert!(layout(&t, buf.as_ptr(), 1, h, 0).is_err(), "not committed");
        t.get_mut(h).unwrap().committed = true;
        assert!(matches!(layout(&t, buf.as_ptr(), 3, h, 0).unwrap(), Layout::Typed { count: 3, .. }));
        assert!(matches!(layout(&t, buf.as_ptr(), 3, abi::INT, 0).unwrap(), Layout::Contig { len: 12, .. }));
        assert!(layout(&t, std::ptr::null(), 3, abi::INT, 0).is_err(), "a basic type needs a buffer");
        let fi = layout(&t, buf.as_ptr(), 2, abi::FLOAT_INT, 0).unwrap();
        assert!(matches!(fi, Layout::Contig { len: 16, .. }), "FLOAT_INT is dense");
        assert!(matches!(layout(&t, buf.as_ptr(), 2, abi::DOUBLE_INT, 0).unwrap(), Layout::Typed { .. }));
        assert!(layout(&t, buf.as_ptr(), -1, abi::INT, 0).is_err());
    }
}
