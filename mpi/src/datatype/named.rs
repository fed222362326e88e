//! Calls that name predefined types: the Fortran 90 parameterised types
//! (`MPI_Type_create_f90_real/complex/integer`, MPI-4.1 §19.1.9), `MPI_Type_match_size`,
//! `MPI_Type_get_value_index` (MPI-4.1 §6.9.4), and the MPI-1 bound queries MPICH still exports
//! (`MPI_Type_extent`, `MPI_Type_lb`, `MPI_Type_ub`).
//!
//! A parameterised type is a handle in the table of derived types whose layout is the matching
//! basic type's and whose envelope is `MPI_COMBINER_F90_*` with the `(p, r)` or `r` asked for;
//! it is committed and, being predefined (MPI-4.1 §19.1.9), cannot be freed.

use std::ffi::c_int;
use std::sync::Arc;

use super::Entry;
use super::calls::{query, running};
use super::desc::{Contents, TypeDesc};
use crate::abi::{self, Aint, Datatype};
use crate::error::{Fail, Res, Why};
use crate::p2p::write_out;
use crate::state::Access;

/// MPICH's `MPI_COMBINER_F90_*` and `MPI_TYPECLASS_*`.
pub const COMBINER_F90_REAL: c_int = 15;
pub const COMBINER_F90_COMPLEX: c_int = 16;
pub const COMBINER_F90_INTEGER: c_int = 17;
pub const TYPECLASS_REAL: c_int = 1;
pub const TYPECLASS_INTEGER: c_int = 2;
pub const TYPECLASS_COMPLEX: c_int = 3;

/// The real kind of precision `p` and exponent range `r` (`MPI_UNDEFINED`: any), as gfortran's
/// `selected_real_kind`: REAL*4, *8, *16.
fn real_kind(p: c_int, r: c_int) -> Option<usize> {
    let want = |v: c_int| if v == abi::UNDEFINED { 0 } else { v };
    let (p, r) = (want(p), want(r));
    if p < 0 || r < 0 {
        return None;
    }
    [(6, 37, 0), (15, 307, 1), (33, 4931, 2)].iter().find(|&&(mp, mr, _)| p <= mp && r <= mr).map(|k| k.2)
}

fn bad_arg(s: &'static str) -> Fail {
    Fail::new(abi::ERR_ARG, None, Why::Arg(s))
}

/// Stores a committed derived type laid out as `basic`, with the F90 combiner and `ints`.
///
/// # Safety
/// `newtype` null or writable.
unsafe fn store_named(
    acc: &mut Access,
    basic: Datatype,
    combiner: c_int,
    ints: Vec<c_int>,
    newtype: *mut Datatype,
) -> Res<()> {
    let st = running(acc)?;
    let b = super::predefined_desc(basic).ok_or_else(|| super::bad_type(basic, None))?;
    let contents = Contents { combiner, ints, ..Contents::default() };
    let d = TypeDesc { named: None, contents: Some(contents), ..(*b).clone() };
    if newtype.is_null() {
        return Err(crate::p2p::null_arg(None, "null newtype pointer"));
    }
    let h = st
        .types
        .insert(Entry { predefined: true, ..Entry::new(Arc::new(d), true) })
        .ok_or_else(|| Fail::new(abi::ERR_INTERN, None, Why::Arg("too many datatypes")))?;
    // SAFETY: checked non-null; MPI's contract.
    unsafe { *newtype = h };
    Ok(())
}

/// `MPI_Type_create_f90_real` (`complex`: `MPI_Type_create_f90_complex`).
///
/// # Safety
/// `newtype` writable.
pub unsafe fn f90_real(acc: &mut Access, p: c_int, r: c_int, complex: bool, newtype: *mut Datatype) -> Res<()> {
    let k = real_kind(p, r).ok_or_else(|| bad_arg("no Fortran real kind has this precision and range"))?;
    let (basic, combiner) = if complex {
        ([abi::COMPLEX8, abi::COMPLEX16, abi::COMPLEX32][k], COMBINER_F90_COMPLEX)
    } else {
        ([abi::REAL4, abi::REAL8, abi::REAL16][k], COMBINER_F90_REAL)
    };
    // SAFETY: the caller's contract.
    unsafe { store_named(acc, basic, combiner, vec![p, r], newtype) }
}

/// `MPI_Type_create_f90_integer`: the smallest INTEGER*n holding `r` decimal digits.
///
/// # Safety
/// `newtype` writable.
pub unsafe fn f90_integer(acc: &mut Access, r: c_int, newtype: *mut Datatype) -> Res<()> {
    let want = if r == abi::UNDEFINED { 0 } else { r };
    let basic = [(2, abi::INTEGER1), (4, abi::INTEGER2), (9, abi::INTEGER4), (18, abi::INTEGER8)]
        .iter()
        .find(|&&(digits, _)| (0..=digits).contains(&want))
        .map(|k| k.1)
        .ok_or_else(|| bad_arg("no Fortran integer kind has this range"))?;
    // SAFETY: the caller's contract.
    unsafe { store_named(acc, basic, COMBINER_F90_INTEGER, vec![r], newtype) }
}

/// `MPI_Type_match_size`: the Fortran type of `typeclass` and `size` bytes.
///
/// # Safety
/// `datatype` writable.
pub unsafe fn match_size(typeclass: c_int, size: c_int, datatype: *mut Datatype) -> Res<()> {
    let t = match (typeclass, size) {
        (TYPECLASS_REAL, 4) => abi::REAL4,
        (TYPECLASS_REAL, 8) => abi::REAL8,
        (TYPECLASS_REAL, 16) => abi::REAL16,
        (TYPECLASS_INTEGER, 1) => abi::INTEGER1,
        (TYPECLASS_INTEGER, 2) => abi::INTEGER2,
        (TYPECLASS_INTEGER, 4) => abi::INTEGER4,
        (TYPECLASS_INTEGER, 8) => abi::INTEGER8,
        (TYPECLASS_COMPLEX, 8) => abi::COMPLEX8,
        (TYPECLASS_COMPLEX, 16) => abi::COMPLEX16,
        (TYPECLASS_COMPLEX, 32) => abi::COMPLEX32,
        (TYPECLASS_REAL | TYPECLASS_INTEGER | TYPECLASS_COMPLEX, _) => {
            return Err(bad_arg("no predefined type of this class has this size"));
        }
        _ => return Err(bad_arg("typeclass must be MPI_TYPECLASS_REAL, _INTEGER or _COMPLEX")),
    };
    // SAFETY: the caller's contract.
    unsafe { write_out(datatype, t) }
}

/// `MPI_Type_get_value_index`: the predefined MINLOC/MAXLOC pair of `value_type` and
/// `index_type`, or `MPI_DATATYPE_NULL` when there is none.
///
/// # Safety
/// `pair_type` writable.
pub unsafe fn get_value_index(
    acc: &mut Access,
    value_type: Datatype,
    index_type: Datatype,
    pair_type: *mut Datatype,
) -> Res<()> {
    query(acc, value_type)?;
    query(acc, index_type)?;
    let pair = match (value_type, index_type) {
        (abi::FLOAT, abi::INT) => abi::FLOAT_INT,
        (abi::DOUBLE, abi::INT) => abi::DOUBLE_INT,
        (abi::LONG, abi::INT) => abi::LONG_INT,
        (abi::SHORT, abi::INT) => abi::SHORT_INT,
        (abi::INT, abi::INT) => abi::TWO_INT,
        (abi::LONG_DOUBLE, abi::INT) => abi::LONG_DOUBLE_INT,
        (abi::REAL, abi::REAL) => abi::TWO_REAL,
        (abi::DOUBLE_PRECISION, abi::DOUBLE_PRECISION) => abi::TWO_DOUBLE_PRECISION,
        (abi::INTEGER, abi::INTEGER) => abi::TWO_INTEGER,
        _ => abi::DATATYPE_NULL,
    };
    // SAFETY: the caller's contract.
    unsafe { write_out(pair_type, pair) }
}

/// Which bound the MPI-1 queries return.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Bound {
    /// `MPI_Type_extent`.
    Extent,
    /// `MPI_Type_lb`.
    Lower,
    /// `MPI_Type_ub`.
    Upper,
}

/// `MPI_Type_extent`, `MPI_Type_lb`, `MPI_Type_ub` (removed in MPI-3.0; MPICH keeps them).
///
/// # Safety
/// `out` writable.
pub unsafe fn legacy_bound(acc: &mut Access, dt: Datatype, which: Bound, out: *mut Aint) -> Res<()> {
    let d = query(acc, dt)?;
    let v = match which {
        Bound::Extent => d.extent(),
        Bound::Lower => d.lb,
        Bound::Upper => d.ub,
    };
    // SAFETY: the caller's contract.
    unsafe { write_out(out, v as Aint) }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fortran_kinds_like_gfortran() {
        assert_eq!(real_kind(6, 37), Some(0));
        assert_eq!(real_kind(7, abi::UNDEFINED), Some(1));
        assert_eq!(real_kind(abi::UNDEFINED, 308), Some(2));
        assert_eq!(real_kind(34, 0), None);
        assert_eq!(real_kind(-1, 0), None);
    }
}
