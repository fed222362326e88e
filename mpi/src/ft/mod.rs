//! Application checkpoints through the C ABI: the `MPIX_Checkpoint` extension (declared in its own
//! block of `mpi.h`), over [`nemesis::Endpoint::checkpoint`] and
//! [`nemesis::Endpoint::restored_state`].
//!
//! - `int MPIX_Checkpoint(const void *buf, size_t len)`: a checkpoint of the `len` bytes at `buf`,
//!   coordinated with the other members of the caller's fault-tolerance group (every member calls
//!   it at the same point of its program, with no request outstanding — a generalized request
//!   counts until `MPI_Grequest_complete` and its wait, a buffered send until its message has
//!   left (`MPI_Buffer_flush` waits for that), a window until every epoch but a completed
//!   fence's is closed: `MPI_ERR_PENDING` otherwise, before anything is
//!   sent). Returns once the group's new checkpoint is durable; `MPI_ERR_IO` if it could not be
//!   written (the previous one stays in force). Without fault tolerance it checks for
//!   outstanding requests and writes nothing.
//! - `int MPIX_Checkpoint_restore(void **buf, size_t *len, int *restored)`: after a restart, the
//!   state of the checkpoint the process restarted from, in memory from `malloc` (the caller
//!   `free`s it), with `*restored = 1`; otherwise `*buf = NULL`, `*len = 0`, `*restored = 0`.
//!
//! Both have their `PMPIX_` twins (the profiling interface). Errors go through the error handler
//! of `MPI_COMM_WORLD`.
//!
//! With fault tolerance on, the checkpoint also saves the library's objects (communicators,
//! groups, datatypes, operations, error handlers, sessions, error codes, attached buffers,
//! persistent and partitioned requests, windows with their memory: [`image`]) and the first
//! `MPIX_Checkpoint_restore` after a restart puts them back, with the same handles, before it
//! returns: `MPI_ERR_OTHER` if they cannot be saved (a function in no module) or restored (the
//! program made objects first, a module gone or rebuilt). Call it right after `MPI_Init`.
//!
//! **The restart contract.** A process restarted from a checkpoint calls
//! `MPIX_Checkpoint_restore` right after `MPI_Init` and communicates nothing before it: its peers
//! are far past their start, and would answer no start-up exchange. `MPI_Init` itself exchanges
//! nothing on a restart (every rank's node comes from the process manager, `env::bring_up`), and
//! until the restore the Endpoint is parked ([`park`]: `State::ep` is `None`, the Endpoint in
//! `State::parked`), so that every call that would communicate (point-to-point, collectives,
//! blocking or not, communicator creation, probes, `MPIX_Checkpoint`, `MPI_Finalize`) fails with
//! `MPIX_ERR_NOT_RESTORED` through the error handler, naming the call, instead of waiting for
//! peers that never come. So do the calls that make objects (which the restore would refuse
//! anyway) and every other call that needs MPI running, except `MPI_Comm_rank`, `MPI_Comm_size`,
//! `MPI_Comm_set_errhandler` and `MPI_Comm_get_errhandler` (`State::started`) and those allowed
//! before `MPI_Init` (`MPI_Error_string`, `MPI_Wtime`...). `MPI_Abort` and a fatal error end the
//! job through the parked Endpoint.
//! The fast paths see no fast entry while parked (`State::refresh_fast` needs the Endpoint) and
//! the fused ones are off under fault tolerance: they gain no instruction.

#![allow(clippy::missing_safety_doc)]

use std::ffi::{c_int, c_void};
use std::sync::atomic::{AtomicBool, Ordering};

pub mod code;
#[cfg(feature = "failpoints")]
pub mod failpoint;
pub mod image;
pub mod types;
pub mod wire;

use crate::abi;
use crate::error::{Fail, Why, code_of};
use crate::state::{State, call};

/// Whether `MPIX_Checkpoint_restore` put the library's objects back (once per process).
// ORDERING: Relaxed: read and written inside MPI calls, which the thread levels order (the big
// lock under MPI_THREAD_MULTIPLE).
static RESTORED: AtomicBool = AtomicBool::new(false);

/// Whether this process is a restarted one that has not called `MPIX_Checkpoint_restore` yet.
// ORDERING: Relaxed: read and written inside MPI calls, as `RESTORED`.
static AWAITING: AtomicBool = AtomicBool::new(false);

/// True between `MPI_Init` and `MPIX_Checkpoint_restore` on a restarted process (`not_running`
/// reports then [`unrestored`]).
pub fn awaiting_restore() -> bool {
    AWAITING.load(Ordering::Relaxed)
}

/// The failure of a call that would communicate before `MPIX_Checkpoint_restore` on a restarted
/// process (the call's name comes with it wherever it is reported).
#[cold]
pub fn unrestored() -> Fail {
    let why = "called on a restarted rank before MPIX_Checkpoint_restore, which comes right after MPI_Init: \
               nothing may communicate (nor make objects) before it";
    Fail::new(abi::ERRX_NOT_RESTORED, None, Why::Arg(why))
}

/// At the end of `MPI_Init` on a process restarted from a checkpoint: parks the Endpoint until
/// `MPIX_Checkpoint_restore` (the module documentation), with no fast entry left.
pub fn park(st: &mut State) {
    if st.ep.as_ref().and_then(nemesis::Endpoint::restored_mpi).is_none() {
        return;
    }
    st.parked = st.ep.take();
    AWAITING.store(true, Ordering::Relaxed);
    st.refresh_all_fast();
}

/// Puts the parked Endpoint back (`MPIX_Checkpoint_restore`).
fn unpark(st: &mut State) {
    if let Some(ep) = st.parked.take() {
        st.ep = Some(ep);
        AWAITING.store(false, Ordering::Relaxed);
        st.refresh_all_fast();
    }
}

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
        if st.ep.is_some()
            && let Some(why) = image::outstanding(st)
        {
            return Err(Fail::new(abi::ERR_PENDING, None, Why::Other(why)));
        }
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
        unpark(st);
        if let Some(mpi) = st.ep.as_ref().and_then(|e| e.restored_mpi()).map(<[u8]>::to_vec)
            && !RESTORED.swap(true, Ordering::Relaxed)
            && !mpi.is_empty()
        {
            if let Err(e) = image::restore(st, &mpi) {
                RESTORED.store(false, Ordering::Relaxed);
                let why = format!("the MPI state of the checkpoint cannot be restored: {e}");
                return Err(Fail::new(abi::ERR_OTHER, None, Why::Other(why)));
            }
            image::windows::start_progress(acc);
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
