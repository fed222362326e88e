//! Handle and status conversions between C and Fortran (`MPI_Comm_c2f`, `MPI_Comm_f2c`, ...,
//! `MPI_Status_c2f`, `MPI_Status_f082c`, ...), and the body of every function the library declares
//! but does not implement yet ([`unsupported`]).
//!
//! Handles are C `int`s in MPICH's encoding, which is also the Fortran `INTEGER` handle: the
//! conversion of every integer kind is the identity, as MPICH's macros are (MPI-4.1 §19.3.4).
//! `MPI_File` is a pointer; no file can be opened yet, so only `MPI_FILE_NULL` (null, Fortran 0)
//! converts.

use std::ffi::c_int;

use crate::abi::{self, Fint};
use crate::error::{Fail, Res, Why};
use crate::state::{Phase, call};

/// `MPI_X_c2f` of an integer handle kind: the handle as a Fortran integer.
#[inline(always)]
pub fn c2f(handle: c_int) -> Fint {
    handle
}

/// `MPI_X_f2c` of an integer handle kind: the Fortran integer as a C handle.
#[inline(always)]
pub fn f2c(handle: Fint) -> c_int {
    handle
}

/// `MPI_File_c2f`: `MPI_FILE_NULL` is 0 (no file can be open).
pub fn file_c2f(file: abi::File) -> Fint {
    if file.is_null() { 0 } else { -1 }
}

/// `MPI_File_f2c`: 0 is `MPI_FILE_NULL`, and so is anything else (no file can be open).
pub fn file_f2c(_file: Fint) -> abi::File {
    std::ptr::null_mut()
}

/// The body of a function that is declared but not implemented: `MPI_ERR_UNSUPPORTED_OPERATION`
/// through `MPI_COMM_WORLD`'s error handler while MPI runs, returned before `MPI_Init` and after
/// `MPI_Finalize` (there is no handler to call then).
#[cold]
#[inline(never)]
pub fn unsupported(name: &'static str) -> c_int {
    let code = abi::ERR_UNSUPPORTED_OPERATION;
    let mut running = false;
    let rc = call(name, |acc| {
        running = acc.st().phase == Phase::Running;
        if running { Err(Fail::new(code, None, Why::Arg("not implemented by this library"))) } else { Ok(()) }
    });
    if running { rc } else { code }
}

/// Which of the three status layouts a pointer is: they are the same five ints (`MPI_Status` is
/// MPICH's `count_lo, count_hi_and_cancelled, MPI_SOURCE, MPI_TAG, MPI_ERROR`, which
/// `MPI_F_STATUS_SIZE` and `MPI_F08_status` follow), but each has its own "ignore" sentinels.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum StatusKind {
    /// `MPI_Status *` (`MPI_STATUS(ES)_IGNORE`).
    C,
    /// `MPI_Fint *` of `MPI_F_STATUS_SIZE` (`MPI_F_STATUS(ES)_IGNORE`).
    F,
    /// `MPI_F08_status *` (`MPI_F08_STATUS(ES)_IGNORE`).
    F08,
}

impl StatusKind {
    /// True if `p` is one of this kind's "ignore" sentinels, which name no status.
    fn ignores(self, p: usize) -> bool {
        use crate::symbols as s;
        match self {
            StatusKind::C => p == abi::STATUS_IGNORE,
            StatusKind::F => p == s::MPI_F_STATUS_IGNORE.addr() || p == s::MPI_F_STATUSES_IGNORE.addr(),
            StatusKind::F08 => p == s::MPI_F08_STATUS_IGNORE.addr() || p == s::MPI_F08_STATUSES_IGNORE.addr(),
        }
    }
}

/// `MPI_Status_c2f`, `_f2c`, `_c2f08`, `_f082c`, `_f2f08`, `_f082f`: copies the status at `from`
/// (of kind `fk`) to `to` (of kind `tk`). A null pointer is `MPI_ERR_ARG`; an "ignore" sentinel
/// on either side is `MPI_ERR_OTHER`, as in MPICH (there is no status to read or to write).
///
/// # Safety
/// `from` and `to`, unless null or sentinels, point at statuses of their kinds (five ints).
pub unsafe fn status(from: *const c_int, fk: StatusKind, to: *mut c_int, tk: StatusKind) -> Res<()> {
    for (p, k) in [(from as usize, fk), (to as usize, tk)] {
        if p == 0 {
            return Err(Fail::new(abi::ERR_ARG, None, Why::Arg("a null status pointer")));
        }
        if k.ignores(p) {
            let why = match k {
                StatusKind::C => "MPI_STATUS_IGNORE is not a status to convert",
                StatusKind::F => "MPI_F_STATUS_IGNORE is not a status to convert",
                StatusKind::F08 => "MPI_F08_STATUS_IGNORE is not a status to convert",
            };
            return Err(Fail::new(abi::ERR_OTHER, None, Why::Arg(why)));
        }
    }
    // SAFETY: both point at five ints (the caller's contract; checked non-null and not sentinels);
    // `copy` allows the two to be the same status.
    unsafe { std::ptr::copy(from, to, STATUS_INTS) };
    Ok(())
}

/// The ints of a status of any of the three kinds (`MPI_F_STATUS_SIZE`).
pub const STATUS_INTS: usize = 5;
const _: () = assert!(std::mem::size_of::<abi::Status>() == STATUS_INTS * std::mem::size_of::<c_int>());
