//! The data symbols and predefined callbacks that a program compiled against MPICH's `mpi.h`
//! (or ours) references by name: sentinel addresses (`MPI_F_STATUS_IGNORE`, `MPI_UNWEIGHTED`...)
//! and `MPIR_Dup_fn`, which `MPI_COMM_DUP_FN`, `MPI_TYPE_DUP_FN` and `MPI_WIN_DUP_FN` expand to.
//!
//! The sentinels are the addresses of objects of this library, distinct from every buffer a
//! program can own; the library compares pointers against them and never reads or writes through
//! them. A program linked without `-fPIE` gets its own copy of a pointer variable (a copy
//! relocation, made after the library's own relocations, so with the same value).

#![allow(non_upper_case_globals)]

use std::ffi::{c_int, c_void};

use crate::abi::{F08Status, Fint, SUCCESS};

/// A pointer in a read-only static: an address to compare against, never dereferenced.
#[repr(transparent)]
pub struct Sentinel<T>(pub *const T);

// SAFETY: the pointer is only compared, never read or written through, so sharing it between
// threads shares nothing but its value.
unsafe impl<T> Sync for Sentinel<T> {}

impl<T> Sentinel<T> {
    /// The address.
    pub fn addr(&self) -> usize {
        self.0 as usize
    }
}

/// The object behind `MPI_UNWEIGHTED` (MPICH's name).
#[unsafe(no_mangle)]
pub static MPIR_C_MPI_UNWEIGHTED: c_int = 0;
/// The object behind `MPI_WEIGHTS_EMPTY` (MPICH's name).
#[unsafe(no_mangle)]
pub static MPIR_C_MPI_WEIGHTS_EMPTY: c_int = 0;
/// `MPI_UNWEIGHTED` (`int *const`).
#[unsafe(no_mangle)]
pub static MPI_UNWEIGHTED: Sentinel<c_int> = Sentinel(&raw const MPIR_C_MPI_UNWEIGHTED);
/// `MPI_WEIGHTS_EMPTY` (`int *const`).
#[unsafe(no_mangle)]
pub static MPI_WEIGHTS_EMPTY: Sentinel<c_int> = Sentinel(&raw const MPIR_C_MPI_WEIGHTS_EMPTY);

/// The object behind `MPI_F_STATUS_IGNORE`: a Fortran status.
static F_STATUS_IGNORE_OBJ: [Fint; 5] = [0; 5];
/// The object behind `MPI_F_STATUSES_IGNORE`.
static F_STATUSES_IGNORE_OBJ: [Fint; 5] = [0; 5];
/// `MPI_F_STATUS_IGNORE` (`MPI_Fint *`).
#[unsafe(no_mangle)]
pub static MPI_F_STATUS_IGNORE: Sentinel<Fint> = Sentinel(&raw const F_STATUS_IGNORE_OBJ as *const Fint);
/// `MPI_F_STATUSES_IGNORE` (`MPI_Fint *`).
#[unsafe(no_mangle)]
pub static MPI_F_STATUSES_IGNORE: Sentinel<Fint> = Sentinel(&raw const F_STATUSES_IGNORE_OBJ as *const Fint);

/// The Fortran 2008 sentinels' objects and pointers (MPICH's names).
#[unsafe(no_mangle)]
pub static MPIR_F08_MPI_STATUS_IGNORE_OBJ: F08Status =
    F08Status { count_lo: 0, count_hi_and_cancelled: 0, source: 0, tag: 0, error: 0 };
#[unsafe(no_mangle)]
pub static MPIR_F08_MPI_STATUSES_IGNORE_OBJ: [F08Status; 1] =
    [F08Status { count_lo: 0, count_hi_and_cancelled: 0, source: 0, tag: 0, error: 0 }];
#[unsafe(no_mangle)]
pub static MPIR_F08_MPI_IN_PLACE: c_int = 0;
#[unsafe(no_mangle)]
pub static MPIR_F08_MPI_BOTTOM: c_int = 0;
/// `MPI_F08_STATUS_IGNORE`.
#[unsafe(no_mangle)]
pub static MPI_F08_STATUS_IGNORE: Sentinel<F08Status> = Sentinel(&raw const MPIR_F08_MPI_STATUS_IGNORE_OBJ);
/// `MPI_F08_STATUSES_IGNORE`.
#[unsafe(no_mangle)]
pub static MPI_F08_STATUSES_IGNORE: Sentinel<F08Status> =
    Sentinel(&raw const MPIR_F08_MPI_STATUSES_IGNORE_OBJ as *const F08Status);

/// The object behind `MPI_T_PVAR_ALL_HANDLES`.
static PVAR_ALL_HANDLES_OBJ: u8 = 0;
/// `MPI_T_PVAR_ALL_HANDLES` (MPICH's tool interface; referenced by programs that name it).
#[unsafe(no_mangle)]
pub static MPI_T_PVAR_ALL_HANDLES: Sentinel<u8> = Sentinel(&raw const PVAR_ALL_HANDLES_OBJ);

/// `MPIR_Dup_fn`: the predefined attribute copy callback (`MPI_COMM_DUP_FN`, `MPI_TYPE_DUP_FN`,
/// `MPI_WIN_DUP_FN`, `MPI_DUP_FN`): the new object gets the same attribute value.
///
/// # Safety
/// `attribute_val_out` points at a `void *`, `flag` at an `int` (MPI's contract for copy
/// callbacks); either may be null, which is refused.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn MPIR_Dup_fn(
    _oldobj: c_int,
    _keyval: c_int,
    _extra_state: *mut c_void,
    attribute_val_in: *mut c_void,
    attribute_val_out: *mut c_void,
    flag: *mut c_int,
) -> c_int {
    if attribute_val_out.is_null() || flag.is_null() {
        return crate::abi::ERR_ARG;
    }
    // SAFETY: MPI's contract: `attribute_val_out` is the address of a `void *` to set and `flag`
    // of an int (both checked non-null).
    unsafe {
        *(attribute_val_out as *mut *mut c_void) = attribute_val_in;
        *flag = 1;
    }
    SUCCESS
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sentinels_are_distinct_and_not_null() {
        let mut all = [
            MPI_UNWEIGHTED.addr(),
            MPI_WEIGHTS_EMPTY.addr(),
            MPI_F_STATUS_IGNORE.addr(),
            MPI_F_STATUSES_IGNORE.addr(),
            MPI_F08_STATUS_IGNORE.addr(),
            MPI_F08_STATUSES_IGNORE.addr(),
            MPI_T_PVAR_ALL_HANDLES.addr(),
        ];
        assert!(all.iter().all(|&a| a > crate::abi::STATUS_IGNORE));
        all.sort_unstable();
        assert!(all.windows(2).all(|w| w[0] != w[1]));
    }

    #[test]
    fn dup_fn_copies_the_value_and_sets_the_flag() {
        let mut out: *mut c_void = std::ptr::null_mut();
        let mut flag = 0;
        let v = 42usize as *mut c_void;
        // SAFETY: valid pointers to a `void *` and an int.
        let rc = unsafe { MPIR_Dup_fn(0, 0, std::ptr::null_mut(), v, (&raw mut out).cast(), &mut flag) };
        assert_eq!((rc, out, flag), (SUCCESS, v, 1));
        // SAFETY: null pointers are checked.
        let rc = unsafe { MPIR_Dup_fn(0, 0, std::ptr::null_mut(), v, std::ptr::null_mut(), &mut flag) };
        assert_eq!(rc, crate::abi::ERR_ARG);
    }
}
