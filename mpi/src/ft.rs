//! Application checkpoints through the C ABI: the `MPIX_Checkpoint` extension (declared in its own
//! block of `mpi.h`), over [`nemesis::Endpoint::checkpoint`] and
//! [`nemesis::Endpoint::restored_state`].
//!
//! - `int MPIX_Checkpoint(const void *buf, size_t len)`: a checkpoint of the `len` bytes at `buf`,
//!   coordinated with the other members of the caller's fault-tolerance group (every member calls
//!   it at the same point of its program, with no request outstanding: `MPI_ERR_PENDING`
//!   otherwise). Returns once the group's new checkpoint is durable; `MPI_ERR_IO` if it could not
//!   be written (the previous one stays in force). Without fault tolerance it checks for
//!   outstanding requests and writes nothing.
//! - `int MPIX_Checkpoint_restore(void **buf, size_t *len, int *restored)`: after a restart, the
//!   state of the checkpoint the process restarted from, in memory from `malloc` (the caller
//!   `free`s it), with `*restored = 1`; otherwise `*buf = NULL`, `*len = 0`, `*restored = 0`.
//!
//! Both have their `PMPIX_` twins (the profiling interface). Errors go through the error handler
//! of `MPI_COMM_WORLD`.

#![allow(clippy::missing_safety_doc)]

use std::ffi::{c_int, c_void};

use crate::abi;
use crate::error::{Fail, Why, code_of};
use crate::state::call;

/// The error class of a checkpoint failure.
fn code(e: &nemesis::Error) -> c_int {
    match e {
        nemesis::Error::CheckpointOutstanding { .. } => abi::ERR_PENDING,
        nemesis::Error::Checkpoint(_) | nemesis::Error::CheckpointCorrupt { .. } => abi::ERR_IO,
        other => code_of(other),
    }
}

fn checkpoint(name: &'static str, buf: *const c_void, len: usize) -> c_int {
    call(name, |acc| {
        if buf.is_null() && len > 0 {
            return Err(Fail::new(abi::ERR_BUFFER, None, Why::Buffer));
        }
        let bytes = if len == 0 {
            &[][..]
        } else {
            // SAFETY: the caller's contract: `len` readable bytes at `buf`.
            unsafe { std::slice::from_raw_parts(buf as *const u8, len) }
        };
        // Under MPI_THREAD_MULTIPLE the call holds the big lock throughout: no request may be
        // outstanding anyway, and every member of the group is in the same call.
        acc.ep()?.checkpoint(bytes).map_err(|e| Fail::new(code(&e), None, Why::Endpoint(e)))
    })
}

fn restore(name: &'static str, buf: *mut *mut c_void, len: *mut usize, restored: *mut c_int) -> c_int {
    call(name, |acc| {
        if buf.is_null() || len.is_null() || restored.is_null() {
            return Err(Fail::new(
                abi::ERR_ARG,
                None,
                Why::Arg("MPIX_Checkpoint_restore needs three non-null pointers"),
            ));
        }
        let (p, n, r) = match acc.ep()?.restored_state() {
            Some(state) => {
                // SAFETY: a fresh allocation of at least one byte; `free` is the caller's.
                let p = unsafe { libc::malloc(state.len().max(1)) } as *mut u8;
                if p.is_null() {
                    return Err(Fail::new(abi::ERR_NO_MEM, None, Why::Arg("no memory for the restored state")));
                }
                // SAFETY: `p` holds at least `state.len()` bytes and does not overlap `state`.
                unsafe { std::ptr::copy_nonoverlapping(state.as_ptr(), p, state.len()) };
                (p as *mut c_void, state.len(), 1)
            }
            None => (std::ptr::null_mut(), 0, 0),
        };
        // SAFETY: the three pointers are non-null (checked) and point to writable objects (the
        // caller's contract).
        unsafe {
            *buf = p;
            *len = n;
            *restored = r;
        }
        Ok(())
    })
}

/// `MPIX_Checkpoint` (nemesis extension; see the module documentation).
///
/// # Safety
/// `buf` must point to `len` readable bytes (or `len` be 0).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn MPIX_Checkpoint(buf: *const c_void, len: usize) -> c_int {
    checkpoint("MPIX_Checkpoint", buf, len)
}

/// `PMPIX_Checkpoint`: the profiling-interface twin of `MPIX_Checkpoint`.
///
/// # Safety
/// As for `MPIX_Checkpoint`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn PMPIX_Checkpoint(buf: *const c_void, len: usize) -> c_int {
    checkpoint("MPIX_Checkpoint", buf, len)
}

/// `MPIX_Checkpoint_restore` (nemesis extension; see the module documentation).
///
/// # Safety
/// The three pointers must point to writable objects of their types.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn MPIX_Checkpoint_restore(
    buf: *mut *mut c_void,
    len: *mut usize,
    restored: *mut c_int,
) -> c_int {
    restore("MPIX_Checkpoint_restore", buf, len, restored)
}

/// `PMPIX_Checkpoint_restore`: the profiling-interface twin of `MPIX_Checkpoint_restore`.
///
/// # Safety
/// As for `MPIX_Checkpoint_restore`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn PMPIX_Checkpoint_restore(
    buf: *mut *mut c_void,
    len: *mut usize,
    restored: *mut c_int,
) -> c_int {
    restore("MPIX_Checkpoint_restore", buf, len, restored)
}
