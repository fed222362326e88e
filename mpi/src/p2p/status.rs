//! Status accessors: `MPI_Get_count_c` (the large count of `MPI_Get_count`) and MPI-4.1's
//! `MPI_Status_get/set_source`, `_tag`, `_error`, which read and write the public fields of
//! `MPI_Status` (the same fields C reaches directly; the calls exist for other languages' sake).

use std::ffi::c_int;

use super::{null_arg, wants, write_out};
use crate::abi::{self, Count, Datatype, Status};
use crate::error::Res;
use crate::state::Access;

/// `MPI_Get_count_c`: whole elements of `dt` in the status's byte count, as an `MPI_Count`
/// (`MPI_UNDEFINED` if it is not a whole number of them).
///
/// # Safety
/// `status` readable, `count` writable.
pub unsafe fn get_count_c(acc: &mut Access, status: *const Status, dt: Datatype, count: *mut Count) -> Res<()> {
    if !wants(status) {
        return Err(null_arg(None, "null status pointer"));
    }
    let d = crate::datatype::any(&acc.st().types, dt)?;
    // SAFETY: checked; MPI's contract.
    let bytes = unsafe { (*status).count() };
    let n = match (bytes, d.size) {
        (b, _) if b < 0 => None,
        (0, 0) => Some(0),
        (_, 0) => None,
        (b, s) if (b as u64).is_multiple_of(s as u64) => Some(b / s as i64),
        _ => None,
    };
    // SAFETY: the caller's contract.
    unsafe { write_out(count, n.unwrap_or(Count::from(abi::UNDEFINED))) }
}

/// A field of `MPI_Status` that MPI-4.1's accessors read and write.
#[derive(Clone, Copy, Debug)]
pub enum Field {
    Source,
    Tag,
    Error,
}

fn field(s: &mut Status, f: Field) -> &mut c_int {
    match f {
        Field::Source => &mut s.source,
        Field::Tag => &mut s.tag,
        Field::Error => &mut s.error,
    }
}

/// `MPI_Status_get_source`, `_tag`, `_error`.
///
/// # Safety
/// `status` readable, `out` writable.
pub unsafe fn get(status: *const Status, f: Field, out: *mut c_int) -> Res<()> {
    if !wants(status) {
        return Err(null_arg(None, "null status pointer"));
    }
    // SAFETY: checked; MPI's contract (read through a copy).
    let mut s = unsafe { *status };
    // SAFETY: the caller's contract.
    unsafe { write_out(out, *field(&mut s, f)) }
}

/// `MPI_Status_set_source`, `_tag`, `_error`.
///
/// # Safety
/// `status` writable.
pub unsafe fn set(status: *mut Status, f: Field, v: c_int) -> Res<()> {
    if !wants(status) {
        return Err(null_arg(None, "null status pointer"));
    }
    // SAFETY: checked; MPI's contract.
    *field(unsafe { &mut *status }, f) = v;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn accessors_reach_the_public_fields() {
        let mut s = Status::new(1, 2, 3, 1 << 33);
        for (f, v) in [(Field::Source, 1), (Field::Tag, 2), (Field::Error, 3)] {
            let mut out = 0;
            // SAFETY: local values.
            unsafe { get(&s, f, &mut out) }.unwrap();
            assert_eq!(out, v);
            // SAFETY: as above.
            unsafe { set(&mut s, f, v + 10) }.unwrap();
        }
        assert_eq!((s.source, s.tag, s.error, s.count()), (11, 12, 13, 1 << 33));
        // SAFETY: null is refused before any access.
        assert!(unsafe { get(std::ptr::null(), Field::Tag, &mut 0) }.is_err());
    }
}
