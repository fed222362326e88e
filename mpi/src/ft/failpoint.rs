//! The test hook of a `libmpi.so` built with the `failpoints` feature: a C program arms one of the library's named
//! crash points (`nemesis_shm::failpoint`; the checkpoint's are in the root crate's `src/endpoint/checkpoint.rs`
//! and `src/ft/checkpoint.rs`) in its own process, so that a test can make a rank die at a precise point of
//! `MPIX_Checkpoint`, the path real programs take.
//!
//! - `int nemesis_failpoint_arm(const char *point, unsigned long long nth, int stop, const char *record)`: the `nth`
//!   hit (from 1) of `point` appends `hit <point> <pid>` to the file `record`, then SIGKILLs the process (`stop`
//!   0) or SIGSTOPs it (`stop` 1). `MPI_ERR_ARG` for a null or non-UTF-8 string or another `stop`.
//!
//! Only this build exports the symbol (a normal `libmpi.so` has no crash point to arm): programs declare it weak
//! and find it null there, and `tests/ft_app_faults.rs` refuses a library without it. It needs no `MPI_Init` and
//! takes no lock of the library.

use std::ffi::{CStr, c_char, c_int};

use nemesis_shm::failpoint::{Action, arm};

use crate::abi;

/// `nemesis_failpoint_arm` (see the module documentation).
///
/// # Safety
/// `point` and `record` must be null or point to NUL-terminated strings.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn nemesis_failpoint_arm(
    point: *const c_char,
    nth: u64,
    stop: c_int,
    record: *const c_char,
) -> c_int {
    if point.is_null() || record.is_null() {
        return abi::ERR_ARG;
    }
    // SAFETY: non-null NUL-terminated strings, the caller's contract.
    let (point, record) = unsafe { (CStr::from_ptr(point), CStr::from_ptr(record)) };
    let (Ok(point), Ok(record)) = (point.to_str(), record.to_str()) else { return abi::ERR_ARG };
    let action = match stop {
        0 => Action::Kill,
        1 => Action::Stop,
        _ => return abi::ERR_ARG,
    };
    // Nothing in `arm` panics short of an allocation failure, which aborts rather than unwinds.
    arm(point, nth, action, std::path::Path::new(record));
    abi::SUCCESS
}
