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
//!
//! With fault tolerance on, the checkpoint also saves the library's objects (communicators,
//! groups, datatypes, operations, error handlers: [`image`]) and the first
//! `MPIX_Checkpoint_restore` after a restart puts them back, with the same handles, before it
//! returns: `MPI_ERR_OTHER` if they cannot be saved (a function in no module) or restored (the
//! program made objects first, a module gone or rebuilt). Call it right after `MPI_Init`.

#![allow(clippy::missing_safety_doc)]

use std::ffi::{c_int, c_void};
use std::sync::atomic::{AtomicBool, Ordering};

pub mod code;
pub mod image;
pub mod types;
pub mod wire;

use crate::abi;
use crate::error::{Fail, Why, code_of};
use crate::state::call;

/// Whether `MPIX_Checkpoint_restore` put the library's objects back (once per process).
// ORDERING: Relaxed: read and written inside MPI calls, which the thread levels order (the big
// lock under MPI_THREAD_MULTIPLE).
static RESTORED: AtomicBool = AtomicBool::new(false);

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
        let st = acc.st();
        let mpi = if st.ep.as_ref().is_some_and(nemesis::Endpoint::ft_enabled) {
            image::save(st).map_err(|e| Fail::new(abi::ERR_OTHER, None, Why::Other(format!("MPI state: {e}"))))?
        } else {
            Vec::new()
        };
        acc.ep()?.checkpoint_with(bytes, &mpi).map_err(|e| Fail::new(code(&e), None, Why::Endpoint(e)))
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
        // The library's objects first, once (a later call returns the bytes again, nothing more).
        let st = acc.st();
        if let Some(mpi) = st.ep.as_ref().and_then(|e| e.restored_mpi()).map(<[u8]>::to_vec)
            && !RESTORED.swap(true, Ordering::Relaxed)
            && !mpi.is_empty()
            && let Err(e) = image::restore(st, &mpi)
        {
            RESTORED.store(false, Ordering::Relaxed);
            let why = format!("the MPI state of the checkpoint cannot be restored: {e}");
            return Err(Fail::new(abi::ERR_OTHER, None, Why::Other(why)));
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
