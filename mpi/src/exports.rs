//! The exported C symbols: every MPI function as `MPI_X` and as its profiling twin `PMPI_X`.
//!
//! **Profiling interface (MPI-3.1 §14.2).** Both names are real, exported, strong symbols with
//! the same body (the implementation is inlined into each, so neither adds a call to the other:
//! the fast path stays one function deep, and callgrind's inclusive cost of `MPI_Send` is the
//! whole send). A tool defines its own `MPI_Send` in the program or in a preloaded library; the
//! dynamic linker binds the program's calls to the tool's definition (the executable and
//! preloaded objects come first in symbol lookup), and the tool reaches the library through
//! `PMPI_Send`. The library never calls its own exported `MPI_` symbols (collectives use the
//! Endpoint directly), so a tool sees exactly the calls the program made.
//!
//! The functions themselves are generated (`gen/exports.rs`, from `mpi/api/mpi.api` and the
//! bindings in `mpi/api/bind/*.txt`, by the test `generated`); this module holds the macros they
//! expand to and the names their bodies use.
//!
//! Every body runs inside [`call`]: with the state's access (the big lock under
//! `MPI_THREAD_MULTIPLE`), a panic becomes `MPI_ERR_INTERN` (never an unwind across the C
//! boundary), and failures go to the communicator's error handler.

#![allow(clippy::missing_safety_doc)]

use std::ffi::{c_char, c_int, c_void};

use crate::abi::{
    Aint, Comm, Count, Datatype, Errhandler, F08Status, File, Fint, Group, Info, Message, Offset, Op, Request, Session,
    Status, TCvarHandle, TEnum, TEventInstance, TEventRegistration, TPvarHandle, TPvarSession, Win,
};
use crate::attr;
use crate::convert::{self, StatusKind};
use crate::datatype::calls::{self as dt, Displs};
use crate::group::{self, SetOp};
use crate::p2p::{bsend, complete, mprobe, start};
use crate::request::Mode;
use crate::state::{call, call_fast, slow_call};
use crate::{coll, comm, env, p2p};

/// Defines `MPI_X` and `PMPI_X` with the same parameters and body.
macro_rules! mpi {
    ($( fn $name:ident / $pname:ident ( $($a:ident : $t:ty),* $(,)? ) => |$st:ident| $body:expr ; )*) => {$(
        #[doc = concat!("`", stringify!($name), "` (MPI-3.1).")]
        ///
        /// # Safety
        /// The caller keeps MPI's contract for the arguments: pointers valid for what the
        /// standard says the function reads or writes (buffers for their count and datatype).
        #[unsafe(no_mangle)]
        #[allow(clippy::too_many_arguments)]
        #[allow(unused_unsafe, unused_variables)]
        pub unsafe extern "C" fn $name($($a: $t),*) -> c_int {
            // SAFETY: the arguments come from the C caller under MPI's contract, which is the
            // contract of the implementation function the body calls.
            call(stringify!($name), |$st| unsafe { $body })
        }

        #[doc = concat!("`", stringify!($pname), "`: the profiling-interface twin of `", stringify!($name), "`.")]
        ///
        /// # Safety
        #[doc = concat!("As for `", stringify!($name), "`.")]
        #[unsafe(no_mangle)]
        #[allow(clippy::too_many_arguments)]
        #[allow(unused_unsafe, unused_variables)]
        pub unsafe extern "C" fn $pname($($a: $t),*) -> c_int {
            // SAFETY: as for the `MPI_` twin.
            call(stringify!($name), |$st| unsafe { $body })
        }
    )*};
}

/// The body of a function with a fast path (`state::call_fast`): `fast` on the state, unlocked,
/// for the common call; `slow` with an `Access` for the rest, in a function of its own that takes
/// the arguments by value (so the fast path's code stores nothing for it). Expanded in the
/// exported functions of [`mpi_fast!`] and in the general path of [`mpi_fused!`]'s.
macro_rules! fast_body {
    ($name:ident ( $($a:ident : $t:ty),* ) => fast |$st:ident| $fast:expr, slow |$acc:ident| $slow:expr) => {{
        #[inline(never)]
        #[allow(clippy::too_many_arguments)]
        unsafe fn slow($($a: $t),*) -> c_int {
            // SAFETY: the arguments come from the C caller under MPI's contract, which is the
            // contract of the implementation function (some are safe functions).
            #[allow(unused_unsafe)]
            let code = slow_call(stringify!($name), |$acc| unsafe { $slow });
            code
        }
        // SAFETY: as above.
        #[allow(unused_unsafe)]
        let fast = move |$st: &mut crate::state::State| unsafe { $fast };
        call_fast(
            stringify!($name),
            fast,
            // SAFETY: as above.
            move || unsafe { slow($($a),*) },
        )
    }};
}

/// Defines `MPI_X` and `PMPI_X` for a function with a fast path: both run [`fast_body!`] (the
/// same body in each, not a call to the other: a tool's `MPI_` wrapper reaches the library
/// through `PMPI_`).
macro_rules! mpi_fast {
    ($( fn $name:ident / $pname:ident ( $($a:ident : $t:ty),* $(,)? ) => fast |$st:ident| $fast:expr, slow |$acc:ident| $slow:expr ; )*) => {$(
        mpi_fast!(@one $name, $name ( $($a : $t),* ) => fast |$st| $fast, slow |$acc| $slow);
        mpi_fast!(@one $pname, $name ( $($a : $t),* ) => fast |$st| $fast, slow |$acc| $slow);
    )*};
    (@one $sym:ident, $name:ident ( $($a:ident : $t:ty),* ) => fast |$st:ident| $fast:expr, slow |$acc:ident| $slow:expr) => {
        #[doc = concat!("`", stringify!($sym), "` (MPI-3.1; `PMPI_` is the profiling-interface twin).")]
        ///
        /// # Safety
        /// The caller keeps MPI's contract for the arguments: pointers valid for what the
        /// standard says the function reads or writes (buffers for their count and datatype).
        #[unsafe(no_mangle)]
        #[allow(clippy::too_many_arguments)]
        pub unsafe extern "C" fn $sym($($a: $t),*) -> c_int {
            fast_body!($name ( $($a : $t),* ) => fast |$st| $fast, slow |$acc| $slow)
        }
    };
}

/// Defines `MPI_X` and `PMPI_X` for a function with a fused path before its fast path
/// (`MPI_Send`, `MPI_Recv`): when `state::fused_on`, `fused` (an `Option<c_int>`: `Some` settles
/// the call) runs first, outside the panic guard (it cannot panic); anything it does not settle
/// goes to a function of its own holding the [`fast_body!`], called with the arguments as they
/// came (so the fused path's code keeps nothing else alive).
macro_rules! mpi_fused {
    ($( fn $name:ident / $pname:ident ( $($a:ident : $t:ty),* $(,)? ) => fused $fused:expr, fast |$st:ident| $fast:expr, slow |$acc:ident| $slow:expr ; )*) => {$(
        mpi_fused!(@one $name, $name ( $($a : $t),* ) => fused $fused, fast |$st| $fast, slow |$acc| $slow);
        // The same body as the `MPI_` twin's, not a call to it: a tool's `MPI_` wrapper reaches
        // the library through this one.
        mpi_fused!(@one $pname, $name ( $($a : $t),* ) => fused $fused, fast |$st| $fast, slow |$acc| $slow);
    )*};
    (@one $sym:ident, $name:ident ( $($a:ident : $t:ty),* ) => fused $fused:expr, fast |$st:ident| $fast:expr, slow |$acc:ident| $slow:expr) => {
        #[doc = concat!("`", stringify!($sym), "` (MPI-3.1; `PMPI_` is the profiling-interface twin).")]
        ///
        /// # Safety
        /// The caller keeps MPI's contract for the arguments: pointers valid for what the
        /// standard says the function reads or writes (buffers for their count and datatype).
        #[unsafe(no_mangle)]
        #[allow(clippy::too_many_arguments)]
        pub unsafe extern "C" fn $sym($($a: $t),*) -> c_int {
            #[inline(never)]
            #[allow(clippy::too_many_arguments)]
            unsafe extern "C" fn rest($($a: $t),*) -> c_int {
                fast_body!($name ( $($a : $t),* ) => fast |$st| $fast, slow |$acc| $slow)
            }
            #[inline(never)]
            #[allow(clippy::too_many_arguments)]
            unsafe extern "C" fn fused($($a: $t),*) -> c_int {
                // SAFETY: the arguments come from the C caller under MPI's contract, which is
                // the contract of the implementation function; `fused_on` was true.
                if let Some(code) = unsafe { $fused } {
                    return code;
                }
                // SAFETY: as above.
                unsafe { rest($($a),*) }
            }
            // One test before anything else, both ways a tail call (`rest` and `fused` have this
            // function's C calling convention): a call the fused path would decline (fault
            // tolerance, `MPI_THREAD_MULTIPLE`) pays nothing more.
            if crate::state::fused_on() {
                // SAFETY: as above.
                unsafe { fused($($a),*) }
            } else {
                // SAFETY: as above.
                unsafe { rest($($a),*) }
            }
        }
    };
}

/// Defines `MPI_X` and `PMPI_X` for a function that does not return an error code (`MPI_Wtime`,
/// `MPI_Aint_add`, the handle conversions): the body is the value, computed without the state's
/// access (it touches no state), in each twin.
macro_rules! mpi_plain {
    ($( fn $name:ident / $pname:ident ( $($a:ident : $t:ty),* $(,)? ) -> $r:ty => $body:expr ; )*) => {$(
        #[doc = concat!("`", stringify!($name), "`.")]
        #[unsafe(no_mangle)]
        pub extern "C" fn $name($($a: $t),*) -> $r {
            $body
        }

        #[doc = concat!("`", stringify!($pname), "`: the profiling-interface twin of `", stringify!($name), "`.")]
        #[unsafe(no_mangle)]
        pub extern "C" fn $pname($($a: $t),*) -> $r {
            $body
        }
    )*};
}

/// Defines `MPI_X` and `PMPI_X` for a function of the interface that is not implemented yet:
/// both report `MPI_ERR_UNSUPPORTED_OPERATION` ([`convert::unsupported`]).
macro_rules! mpi_stub {
    ($( fn $name:ident / $pname:ident ( $($a:ident : $t:ty),* $(,)? ) ; )*) => {$(
        #[doc = concat!("`", stringify!($name), "`: not implemented (`MPI_ERR_UNSUPPORTED_OPERATION`).")]
        ///
        /// # Safety
        /// None needed: the arguments are not read.
        #[unsafe(no_mangle)]
        #[allow(clippy::too_many_arguments, unused_variables)]
        pub unsafe extern "C" fn $name($($a: $t),*) -> c_int {
            convert::unsupported(stringify!($name))
        }

        #[doc = concat!("`", stringify!($pname), "`: the profiling-interface twin of `", stringify!($name), "`.")]
        ///
        /// # Safety
        /// None needed: the arguments are not read.
        #[unsafe(no_mangle)]
        #[allow(clippy::too_many_arguments, unused_variables)]
        pub unsafe extern "C" fn $pname($($a: $t),*) -> c_int {
            convert::unsupported(stringify!($name))
        }
    )*};
}

// Every function of the interface (`mpi/api/mpi.api`): the bound ones (`mpi/api/bind/*.txt`)
// through the macros above, the rest as stubs. Generated, checked by the test `generated`.
include!("gen/exports.rs");
