//! Handle conversions between C and Fortran (`MPI_Comm_c2f`, `MPI_Comm_f2c`, ...), and the body of
//! every function the library declares but does not implement yet ([`unsupported`]).
//!
//! Handles are C `int`s in MPICH's encoding, which is also the Fortran `INTEGER` handle: the
//! conversion of every integer kind is the identity, as MPICH's macros are (MPI-4.1 §19.3.4).
//! `MPI_File` is a pointer; no file can be opened yet, so only `MPI_FILE_NULL` (null, Fortran 0)
//! converts.

use std::ffi::c_int;

use crate::abi::{self, Fint};
use crate::error::{Fail, Why};
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
