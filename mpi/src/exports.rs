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
//! Every body runs inside [`call`]: with the state's access (the big lock under
//! `MPI_THREAD_MULTIPLE`), a panic becomes `MPI_ERR_INTERN` (never an unwind across the C
//! boundary), and failures go to the communicator's error handler.

#![allow(clippy::missing_safety_doc)]

use std::ffi::{c_char, c_int, c_void};

use crate::abi::{Comm, Datatype, Errhandler, Op, Request, Status};
use crate::p2p::{bsend, complete, start};
use crate::request::Mode;
use crate::state::call;
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
    fn MPI_Init / PMPI_Init(_argc: *mut c_int, _argv: *mut *mut *mut c_char) => |acc| env::init(acc, crate::abi::THREAD_SINGLE);
    fn MPI_Init_thread / PMPI_Init_thread(_argc: *mut c_int, _argv: *mut *mut *mut c_char, required: c_int, provided: *mut c_int) => |acc| {
        env::init(acc, required)?;
        p2p::write_out(provided, acc.st().provided)
    };
    fn MPI_Initialized / PMPI_Initialized(flag: *mut c_int) => |acc| env::initialized(acc.st(), flag);
    fn MPI_Finalize / PMPI_Finalize() => |acc| env::finalize(acc);
    fn MPI_Finalized / PMPI_Finalized(flag: *mut c_int) => |acc| env::finalized(acc.st(), flag);
    fn MPI_Abort / PMPI_Abort(comm: Comm, errorcode: c_int) => |acc| env::abort(acc, comm, errorcode);
    fn MPI_Get_version / PMPI_Get_version(version: *mut c_int, subversion: *mut c_int) => |_acc| env::get_version(version, subversion);
    fn MPI_Get_library_version / PMPI_Get_library_version(version: *mut c_char, resultlen: *mut c_int) => |_acc| env::get_library_version(version, resultlen);
    fn MPI_Query_thread / PMPI_Query_thread(provided: *mut c_int) => |acc| env::query_thread(acc.st(), provided);
    fn MPI_Is_thread_main / PMPI_Is_thread_main(flag: *mut c_int) => |acc| env::is_thread_main(acc.st(), flag);
    fn MPI_Get_processor_name / PMPI_Get_processor_name(name: *mut c_char, resultlen: *mut c_int) => |_acc| env::get_processor_name(name, resultlen);
    fn MPI_Error_string / PMPI_Error_string(errorcode: c_int, string: *mut c_char, resultlen: *mut c_int) => |_acc| env::error_string(errorcode, string, resultlen);
    fn MPI_Error_class / PMPI_Error_class(errorcode: c_int, errorclass: *mut c_int) => |_acc| env::error_class(errorcode, errorclass);
    fn MPI_Comm_set_errhandler / PMPI_Comm_set_errhandler(comm: Comm, errhandler: Errhandler) => |acc| comm::set_errhandler(acc, comm, errhandler);
    fn MPI_Comm_get_errhandler / PMPI_Comm_get_errhandler(comm: Comm, errhandler: *mut Errhandler) => |acc| comm::get_errhandler(acc, comm, errhandler);
    fn MPI_Errhandler_free / PMPI_Errhandler_free(errhandler: *mut Errhandler) => |_acc| env::errhandler_free(errhandler);
    fn MPI_Comm_rank / PMPI_Comm_rank(comm: Comm, rank: *mut c_int) => |acc| comm::rank_or_size(acc, comm, rank, false);
    fn MPI_Comm_size / PMPI_Comm_size(comm: Comm, size: *mut c_int) => |acc| comm::rank_or_size(acc, comm, size, true);
    fn MPI_Comm_dup / PMPI_Comm_dup(comm: Comm, newcomm: *mut Comm) => |acc| comm::dup(acc, comm, newcomm);
    fn MPI_Comm_split / PMPI_Comm_split(comm: Comm, color: c_int, key: c_int, newcomm: *mut Comm) => |acc| comm::split(acc, comm, color, key, newcomm);
    fn MPI_Comm_free / PMPI_Comm_free(comm: *mut Comm) => |acc| comm::free(acc, comm);
    fn MPI_Type_size / PMPI_Type_size(datatype: Datatype, size: *mut c_int) => |_acc| env::type_size(datatype, size);
    fn MPI_Get_count / PMPI_Get_count(status: *const Status, datatype: Datatype, count: *mut c_int) => |_acc| p2p::get_count(status, datatype, count);

    fn MPI_Send / PMPI_Send(buf: *const c_void, count: c_int, datatype: Datatype, dest: c_int, tag: c_int, comm: Comm) => |acc| p2p::send(acc, buf, count, datatype, dest, tag, comm, false);
    fn MPI_Ssend / PMPI_Ssend(buf: *const c_void, count: c_int, datatype: Datatype, dest: c_int, tag: c_int, comm: Comm) => |acc| p2p::send(acc, buf, count, datatype, dest, tag, comm, true);
    fn MPI_Rsend / PMPI_Rsend(buf: *const c_void, count: c_int, datatype: Datatype, dest: c_int, tag: c_int, comm: Comm) => |acc| p2p::send(acc, buf, count, datatype, dest, tag, comm, false);
    fn MPI_Bsend / PMPI_Bsend(buf: *const c_void, count: c_int, datatype: Datatype, dest: c_int, tag: c_int, comm: Comm) => |acc| p2p::send_checked(acc, buf, count, datatype, dest, tag, comm, Mode::Buffered);
    fn MPI_Recv / PMPI_Recv(buf: *mut c_void, count: c_int, datatype: Datatype, source: c_int, tag: c_int, comm: Comm, status: *mut Status) => |acc| p2p::recv(acc, buf, count, datatype, source, tag, comm, status);
    fn MPI_Isend / PMPI_Isend(buf: *const c_void, count: c_int, datatype: Datatype, dest: c_int, tag: c_int, comm: Comm, request: *mut Request) => |acc| start::isend(acc, Mode::Standard, buf, count, datatype, dest, tag, comm, request);
    fn MPI_Issend / PMPI_Issend(buf: *const c_void, count: c_int, datatype: Datatype, dest: c_int, tag: c_int, comm: Comm, request: *mut Request) => |acc| start::isend(acc, Mode::Synchronous, buf, count, datatype, dest, tag, comm, request);
    fn MPI_Ibsend / PMPI_Ibsend(buf: *const c_void, count: c_int, datatype: Datatype, dest: c_int, tag: c_int, comm: Comm, request: *mut Request) => |acc| start::isend(acc, Mode::Buffered, buf, count, datatype, dest, tag, comm, request);
    fn MPI_Irsend / PMPI_Irsend(buf: *const c_void, count: c_int, datatype: Datatype, dest: c_int, tag: c_int, comm: Comm, request: *mut Request) => |acc| start::isend(acc, Mode::Ready, buf, count, datatype, dest, tag, comm, request);
    fn MPI_Irecv / PMPI_Irecv(buf: *mut c_void, count: c_int, datatype: Datatype, source: c_int, tag: c_int, comm: Comm, request: *mut Request) => |acc| start::irecv(acc, buf, count, datatype, source, tag, comm, request);
    fn MPI_Send_init / PMPI_Send_init(buf: *const c_void, count: c_int, datatype: Datatype, dest: c_int, tag: c_int, comm: Comm, request: *mut Request) => |acc| start::init(acc, Some(Mode::Standard), buf.cast_mut(), count, datatype, dest, tag, comm, request);
    fn MPI_Ssend_init / PMPI_Ssend_init(buf: *const c_void, count: c_int, datatype: Datatype, dest: c_int, tag: c_int, comm: Comm, request: *mut Request) => |acc| start::init(acc, Some(Mode::Synchronous), buf.cast_mut(), count, datatype, dest, tag, comm, request);
    fn MPI_Bsend_init / PMPI_Bsend_init(buf: *const c_void, count: c_int, datatype: Datatype, dest: c_int, tag: c_int, comm: Comm, request: *mut Request) => |acc| start::init(acc, Some(Mode::Buffered), buf.cast_mut(), count, datatype, dest, tag, comm, request);
    fn MPI_Rsend_init / PMPI_Rsend_init(buf: *const c_void, count: c_int, datatype: Datatype, dest: c_int, tag: c_int, comm: Comm, request: *mut Request) => |acc| start::init(acc, Some(Mode::Ready), buf.cast_mut(), count, datatype, dest, tag, comm, request);
    fn MPI_Recv_init / PMPI_Recv_init(buf: *mut c_void, count: c_int, datatype: Datatype, source: c_int, tag: c_int, comm: Comm, request: *mut Request) => |acc| start::init(acc, None, buf, count, datatype, source, tag, comm, request);
    fn MPI_Start / PMPI_Start(request: *mut Request) => |acc| start::start(acc, request);
    fn MPI_Startall / PMPI_Startall(count: c_int, array_of_requests: *mut Request) => |acc| start::startall(acc, count, array_of_requests);
    fn MPI_Sendrecv / PMPI_Sendrecv(sendbuf: *const c_void, sendcount: c_int, sendtype: Datatype, dest: c_int, sendtag: c_int, recvbuf: *mut c_void, recvcount: c_int, recvtype: Datatype, source: c_int, recvtag: c_int, comm: Comm, status: *mut Status) => |acc| p2p::sendrecv(acc, sendbuf, sendcount, sendtype, dest, sendtag, recvbuf, recvcount, recvtype, source, recvtag, comm, status);
    fn MPI_Sendrecv_replace / PMPI_Sendrecv_replace(buf: *mut c_void, count: c_int, datatype: Datatype, dest: c_int, sendtag: c_int, source: c_int, recvtag: c_int, comm: Comm, status: *mut Status) => |acc| p2p::sendrecv_replace(acc, buf, count, datatype, dest, sendtag, source, recvtag, comm, status);
    fn MPI_Buffer_attach / PMPI_Buffer_attach(buffer: *mut c_void, size: c_int) => |acc| bsend::attach(acc, buffer, size);
    fn MPI_Buffer_detach / PMPI_Buffer_detach(buffer_addr: *mut c_void, size: *mut c_int) => |acc| bsend::detach(acc, buffer_addr, size);
    fn MPI_Wait / PMPI_Wait(request: *mut Request, status: *mut Status) => |acc| complete::wait(acc, request, status);
    fn MPI_Waitall / PMPI_Waitall(count: c_int, array_of_requests: *mut Request, array_of_statuses: *mut Status) => |acc| complete::waitall(acc, count, array_of_requests, array_of_statuses);
    fn MPI_Waitany / PMPI_Waitany(count: c_int, array_of_requests: *mut Request, index: *mut c_int, status: *mut Status) => |acc| complete::any(acc, count, array_of_requests, index, std::ptr::null_mut(), status, true);
    fn MPI_Waitsome / PMPI_Waitsome(incount: c_int, array_of_requests: *mut Request, outcount: *mut c_int, array_of_indices: *mut c_int, array_of_statuses: *mut Status) => |acc| complete::some(acc, incount, array_of_requests, outcount, array_of_indices, array_of_statuses, true);
    fn MPI_Test / PMPI_Test(request: *mut Request, flag: *mut c_int, status: *mut Status) => |acc| complete::test(acc, request, flag, status);
    fn MPI_Testall / PMPI_Testall(count: c_int, array_of_requests: *mut Request, flag: *mut c_int, array_of_statuses: *mut Status) => |acc| complete::testall(acc, count, array_of_requests, flag, array_of_statuses);
    fn MPI_Testany / PMPI_Testany(count: c_int, array_of_requests: *mut Request, index: *mut c_int, flag: *mut c_int, status: *mut Status) => |acc| complete::any(acc, count, array_of_requests, index, flag, status, false);
    fn MPI_Testsome / PMPI_Testsome(incount: c_int, array_of_requests: *mut Request, outcount: *mut c_int, array_of_indices: *mut c_int, array_of_statuses: *mut Status) => |acc| complete::some(acc, incount, array_of_requests, outcount, array_of_indices, array_of_statuses, false);
    fn MPI_Request_get_status / PMPI_Request_get_status(request: Request, flag: *mut c_int, status: *mut Status) => |acc| complete::get_status(acc, request, flag, status);
    fn MPI_Request_free / PMPI_Request_free(request: *mut Request) => |acc| complete::free(acc, request);
    fn MPI_Test_cancelled / PMPI_Test_cancelled(status: *const Status, flag: *mut c_int) => |_acc| p2p::test_cancelled(status, flag);
    fn MPI_Probe / PMPI_Probe(source: c_int, tag: c_int, comm: Comm, status: *mut Status) => |acc| p2p::probe(acc, source, tag, comm, std::ptr::null_mut(), status, true);
    fn MPI_Iprobe / PMPI_Iprobe(source: c_int, tag: c_int, comm: Comm, flag: *mut c_int, status: *mut Status) => |acc| p2p::probe(acc, source, tag, comm, flag, status, false);

    fn MPI_Barrier / PMPI_Barrier(comm: Comm) => |acc| coll::barrier(acc, comm);
    fn MPI_Bcast / PMPI_Bcast(buffer: *mut c_void, count: c_int, datatype: Datatype, root: c_int, comm: Comm) => |acc| coll::bcast(acc, buffer, count, datatype, root, comm);
    fn MPI_Reduce / PMPI_Reduce(sendbuf: *const c_void, recvbuf: *mut c_void, count: c_int, datatype: Datatype, op: Op, root: c_int, comm: Comm) => |acc| coll::reduce(acc, sendbuf, recvbuf, count, datatype, op, root, comm);
    fn MPI_Allreduce / PMPI_Allreduce(sendbuf: *const c_void, recvbuf: *mut c_void, count: c_int, datatype: Datatype, op: Op, comm: Comm) => |acc| coll::allreduce(acc, sendbuf, recvbuf, count, datatype, op, comm);
    fn MPI_Gather / PMPI_Gather(sendbuf: *const c_void, sendcount: c_int, sendtype: Datatype, recvbuf: *mut c_void, recvcount: c_int, recvtype: Datatype, root: c_int, comm: Comm) => |acc| coll::gather(acc, sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, root, comm);
    fn MPI_Allgather / PMPI_Allgather(sendbuf: *const c_void, sendcount: c_int, sendtype: Datatype, recvbuf: *mut c_void, recvcount: c_int, recvtype: Datatype, comm: Comm) => |acc| coll::allgather(acc, sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, comm);
    fn MPI_Scatter / PMPI_Scatter(sendbuf: *const c_void, sendcount: c_int, sendtype: Datatype, recvbuf: *mut c_void, recvcount: c_int, recvtype: Datatype, root: c_int, comm: Comm) => |acc| coll::scatter(acc, sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, root, comm);
    fn MPI_Alltoall / PMPI_Alltoall(sendbuf: *const c_void, sendcount: c_int, sendtype: Datatype, recvbuf: *mut c_void, recvcount: c_int, recvtype: Datatype, comm: Comm) => |acc| coll::alltoall(acc, sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, comm);
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
