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
//! Every body runs inside [`guard`] (a panic becomes `MPI_ERR_INTERN`, never an unwind across
//! the C boundary) and hands failures to the communicator's error handler.

#![allow(clippy::missing_safety_doc)]

use std::ffi::{c_char, c_int, c_void};

use crate::abi::{Comm, Datatype, Errhandler, Op, Request, SUCCESS, Status};
use crate::error::Res;
use crate::state::{State, guard, state};
use crate::{coll, comm, env, p2p};

/// Runs `f` on the state and maps its failure through the error handler of `name`.
#[inline(always)]
fn call(name: &'static str, f: impl FnOnce(&mut State) -> Res<()>) -> c_int {
    guard(name, || {
        // SAFETY: the one reference to the state in this call: taken here, passed down, dropped
        // before returning (the state module's contract).
        let st = unsafe { state() };
        match f(&mut *st) {
            Ok(()) => SUCCESS,
            Err(e) => st.fail(name, e),
        }
    })
}

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
        #[allow(unused_unsafe)]
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
        #[allow(unused_unsafe)]
        pub unsafe extern "C" fn $pname($($a: $t),*) -> c_int {
            // SAFETY: as for the `MPI_` twin.
            call(stringify!($name), |$st| unsafe { $body })
        }
    )*};
}

mpi! {
    fn MPI_Init / PMPI_Init(_argc: *mut c_int, _argv: *mut *mut *mut c_char) => |st| env::init(st, crate::abi::THREAD_SINGLE);
    fn MPI_Init_thread / PMPI_Init_thread(_argc: *mut c_int, _argv: *mut *mut *mut c_char, required: c_int, provided: *mut c_int) => |st| {
        env::init(st, required)?;
        p2p::write_out(provided, st.provided)
    };
    fn MPI_Initialized / PMPI_Initialized(flag: *mut c_int) => |st| env::initialized(st, flag);
    fn MPI_Finalize / PMPI_Finalize() => |st| env::finalize(st);
    fn MPI_Finalized / PMPI_Finalized(flag: *mut c_int) => |st| env::finalized(st, flag);
    fn MPI_Abort / PMPI_Abort(comm: Comm, errorcode: c_int) => |st| env::abort(st, comm, errorcode);
    fn MPI_Get_version / PMPI_Get_version(version: *mut c_int, subversion: *mut c_int) => |_st| env::get_version(version, subversion);
    fn MPI_Get_library_version / PMPI_Get_library_version(version: *mut c_char, resultlen: *mut c_int) => |_st| env::get_library_version(version, resultlen);
    fn MPI_Query_thread / PMPI_Query_thread(provided: *mut c_int) => |st| env::query_thread(st, provided);
    fn MPI_Is_thread_main / PMPI_Is_thread_main(flag: *mut c_int) => |st| env::is_thread_main(st, flag);
    fn MPI_Get_processor_name / PMPI_Get_processor_name(name: *mut c_char, resultlen: *mut c_int) => |_st| env::get_processor_name(name, resultlen);
    fn MPI_Error_string / PMPI_Error_string(errorcode: c_int, string: *mut c_char, resultlen: *mut c_int) => |_st| env::error_string(errorcode, string, resultlen);
    fn MPI_Error_class / PMPI_Error_class(errorcode: c_int, errorclass: *mut c_int) => |_st| env::error_class(errorcode, errorclass);
    fn MPI_Comm_set_errhandler / PMPI_Comm_set_errhandler(comm: Comm, errhandler: Errhandler) => |st| comm::set_errhandler(st, comm, errhandler);
    fn MPI_Comm_get_errhandler / PMPI_Comm_get_errhandler(comm: Comm, errhandler: *mut Errhandler) => |st| comm::get_errhandler(st, comm, errhandler);
    fn MPI_Errhandler_free / PMPI_Errhandler_free(errhandler: *mut Errhandler) => |_st| env::errhandler_free(errhandler);
    fn MPI_Comm_rank / PMPI_Comm_rank(comm: Comm, rank: *mut c_int) => |st| comm::rank_or_size(st, comm, rank, false);
    fn MPI_Comm_size / PMPI_Comm_size(comm: Comm, size: *mut c_int) => |st| comm::rank_or_size(st, comm, size, true);
    fn MPI_Comm_dup / PMPI_Comm_dup(comm: Comm, newcomm: *mut Comm) => |st| comm::dup(st, comm, newcomm);
    fn MPI_Comm_split / PMPI_Comm_split(comm: Comm, color: c_int, key: c_int, newcomm: *mut Comm) => |st| comm::split(st, comm, color, key, newcomm);
    fn MPI_Comm_free / PMPI_Comm_free(comm: *mut Comm) => |st| comm::free(st, comm);
    fn MPI_Type_size / PMPI_Type_size(datatype: Datatype, size: *mut c_int) => |_st| env::type_size(datatype, size);
    fn MPI_Get_count / PMPI_Get_count(status: *const Status, datatype: Datatype, count: *mut c_int) => |_st| p2p::get_count(status, datatype, count);

    fn MPI_Send / PMPI_Send(buf: *const c_void, count: c_int, datatype: Datatype, dest: c_int, tag: c_int, comm: Comm) => |st| p2p::send(st, buf, count, datatype, dest, tag, comm, false);
    fn MPI_Ssend / PMPI_Ssend(buf: *const c_void, count: c_int, datatype: Datatype, dest: c_int, tag: c_int, comm: Comm) => |st| p2p::send(st, buf, count, datatype, dest, tag, comm, true);
    fn MPI_Recv / PMPI_Recv(buf: *mut c_void, count: c_int, datatype: Datatype, source: c_int, tag: c_int, comm: Comm, status: *mut Status) => |st| p2p::recv(st, buf, count, datatype, source, tag, comm, status);
    fn MPI_Isend / PMPI_Isend(buf: *const c_void, count: c_int, datatype: Datatype, dest: c_int, tag: c_int, comm: Comm, request: *mut Request) => |st| p2p::isend(st, buf, count, datatype, dest, tag, comm, request);
    fn MPI_Irecv / PMPI_Irecv(buf: *mut c_void, count: c_int, datatype: Datatype, source: c_int, tag: c_int, comm: Comm, request: *mut Request) => |st| p2p::irecv(st, buf, count, datatype, source, tag, comm, request);
    fn MPI_Sendrecv / PMPI_Sendrecv(sendbuf: *const c_void, sendcount: c_int, sendtype: Datatype, dest: c_int, sendtag: c_int, recvbuf: *mut c_void, recvcount: c_int, recvtype: Datatype, source: c_int, recvtag: c_int, comm: Comm, status: *mut Status) => |st| p2p::sendrecv(st, sendbuf, sendcount, sendtype, dest, sendtag, recvbuf, recvcount, recvtype, source, recvtag, comm, status);
    fn MPI_Wait / PMPI_Wait(request: *mut Request, status: *mut Status) => |st| p2p::wait(st, request, status);
    fn MPI_Waitall / PMPI_Waitall(count: c_int, array_of_requests: *mut Request, array_of_statuses: *mut Status) => |st| p2p::waitall(st, count, array_of_requests, array_of_statuses);
    fn MPI_Waitany / PMPI_Waitany(count: c_int, array_of_requests: *mut Request, index: *mut c_int, status: *mut Status) => |st| p2p::waitany(st, count, array_of_requests, index, status);
    fn MPI_Test / PMPI_Test(request: *mut Request, flag: *mut c_int, status: *mut Status) => |st| p2p::test(st, request, flag, status);
    fn MPI_Testall / PMPI_Testall(count: c_int, array_of_requests: *mut Request, flag: *mut c_int, array_of_statuses: *mut Status) => |st| p2p::testall(st, count, array_of_requests, flag, array_of_statuses);
    fn MPI_Probe / PMPI_Probe(source: c_int, tag: c_int, comm: Comm, status: *mut Status) => |st| p2p::probe(st, source, tag, comm, std::ptr::null_mut(), status, true);
    fn MPI_Iprobe / PMPI_Iprobe(source: c_int, tag: c_int, comm: Comm, flag: *mut c_int, status: *mut Status) => |st| p2p::probe(st, source, tag, comm, flag, status, false);

    fn MPI_Barrier / PMPI_Barrier(comm: Comm) => |st| coll::barrier(st, comm);
    fn MPI_Bcast / PMPI_Bcast(buffer: *mut c_void, count: c_int, datatype: Datatype, root: c_int, comm: Comm) => |st| coll::bcast(st, buffer, count, datatype, root, comm);
    fn MPI_Reduce / PMPI_Reduce(sendbuf: *const c_void, recvbuf: *mut c_void, count: c_int, datatype: Datatype, op: Op, root: c_int, comm: Comm) => |st| coll::reduce(st, sendbuf, recvbuf, count, datatype, op, root, comm);
    fn MPI_Allreduce / PMPI_Allreduce(sendbuf: *const c_void, recvbuf: *mut c_void, count: c_int, datatype: Datatype, op: Op, comm: Comm) => |st| coll::allreduce(st, sendbuf, recvbuf, count, datatype, op, comm);
    fn MPI_Gather / PMPI_Gather(sendbuf: *const c_void, sendcount: c_int, sendtype: Datatype, recvbuf: *mut c_void, recvcount: c_int, recvtype: Datatype, root: c_int, comm: Comm) => |st| coll::gather(st, sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, root, comm);
    fn MPI_Allgather / PMPI_Allgather(sendbuf: *const c_void, sendcount: c_int, sendtype: Datatype, recvbuf: *mut c_void, recvcount: c_int, recvtype: Datatype, comm: Comm) => |st| coll::allgather(st, sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, comm);
    fn MPI_Scatter / PMPI_Scatter(sendbuf: *const c_void, sendcount: c_int, sendtype: Datatype, recvbuf: *mut c_void, recvcount: c_int, recvtype: Datatype, root: c_int, comm: Comm) => |st| coll::scatter(st, sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, root, comm);
    fn MPI_Alltoall / PMPI_Alltoall(sendbuf: *const c_void, sendcount: c_int, sendtype: Datatype, recvbuf: *mut c_void, recvcount: c_int, recvtype: Datatype, comm: Comm) => |st| coll::alltoall(st, sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, comm);
}

/// `MPI_Wtime` (MPI-3.1): seconds on a monotonic clock.
#[unsafe(no_mangle)]
pub extern "C" fn MPI_Wtime() -> f64 {
    env::wtime()
}

/// `PMPI_Wtime`: the profiling-interface twin of `MPI_Wtime`.
#[unsafe(no_mangle)]
pub extern "C" fn PMPI_Wtime() -> f64 {
    env::wtime()
}

/// `MPI_Wtick` (MPI-3.1): the resolution of `MPI_Wtime`.
#[unsafe(no_mangle)]
pub extern "C" fn MPI_Wtick() -> f64 {
    env::wtick()
}

/// `PMPI_Wtick`: the profiling-interface twin of `MPI_Wtick`.
#[unsafe(no_mangle)]
pub extern "C" fn PMPI_Wtick() -> f64 {
    env::wtick()
}
