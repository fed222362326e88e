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

use crate::abi::{Aint, Comm, Count, Datatype, Errhandler, Group, Info, Message, Op, Request, Status};
use crate::attr;
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
            // contract of the implementation function.
            slow_call(stringify!($name), |$acc| unsafe { $slow })
        }
        call_fast(
            stringify!($name),
            // SAFETY: as above.
            move |$st| unsafe { $fast },
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

mpi_fused! {
    fn MPI_Send / PMPI_Send(buf: *const c_void, count: c_int, datatype: Datatype, dest: c_int, tag: c_int, comm: Comm) => fused p2p::send_fused(buf, count, datatype, dest, tag, comm), fast |st| p2p::send_fast(st, buf, count, datatype, dest, tag, comm, false), slow |acc| p2p::send_checked(acc, buf, count, datatype, dest, tag, comm, Mode::Standard);
    fn MPI_Recv / PMPI_Recv(buf: *mut c_void, count: c_int, datatype: Datatype, source: c_int, tag: c_int, comm: Comm, status: *mut Status) => fused p2p::recv_fused(buf, count, datatype, source, tag, comm, status), fast |st| p2p::recv_fast(st, buf, count, datatype, source, tag, comm, status), slow |acc| p2p::recv_checked(acc, buf, count, datatype, source, tag, comm, status);
}

mpi_fast! {
    fn MPI_Ssend / PMPI_Ssend(buf: *const c_void, count: c_int, datatype: Datatype, dest: c_int, tag: c_int, comm: Comm) => fast |st| p2p::send_fast(st, buf, count, datatype, dest, tag, comm, true), slow |acc| p2p::send_checked(acc, buf, count, datatype, dest, tag, comm, Mode::Synchronous);
    fn MPI_Rsend / PMPI_Rsend(buf: *const c_void, count: c_int, datatype: Datatype, dest: c_int, tag: c_int, comm: Comm) => fast |st| p2p::send_fast(st, buf, count, datatype, dest, tag, comm, false), slow |acc| p2p::send_checked(acc, buf, count, datatype, dest, tag, comm, Mode::Ready);
    fn MPI_Isend / PMPI_Isend(buf: *const c_void, count: c_int, datatype: Datatype, dest: c_int, tag: c_int, comm: Comm, request: *mut Request) => fast |st| start::istart_fast(st, false, buf, count, datatype, dest, tag, comm, request), slow |acc| start::isend(acc, Mode::Standard, buf, count, datatype, dest, tag, comm, request);
    fn MPI_Irecv / PMPI_Irecv(buf: *mut c_void, count: c_int, datatype: Datatype, source: c_int, tag: c_int, comm: Comm, request: *mut Request) => fast |st| start::istart_fast(st, true, buf.cast_const(), count, datatype, source, tag, comm, request), slow |acc| start::irecv(acc, buf, count, datatype, source, tag, comm, request);
    fn MPI_Waitall / PMPI_Waitall(count: c_int, array_of_requests: *mut Request, array_of_statuses: *mut Status) => fast |st| complete::waitall_fast(st, count, array_of_requests, array_of_statuses), slow |acc| complete::waitall(acc, count, array_of_requests, array_of_statuses);
}

mpi! {
    fn MPI_Init / PMPI_Init(_argc: *mut c_int, _argv: *mut *mut *mut c_char) => |acc| env::init(acc, crate::abi::THREAD_SINGLE);
    fn MPI_Init_thread / PMPI_Init_thread(_argc: *mut c_int, _argv: *mut *mut *mut c_char, required: c_int, provided: *mut c_int) => |acc| {
        env::init(acc, required)?;
        p2p::write_out(provided, acc.st().provided)
    };
    fn MPI_Initialized / PMPI_Initialized(flag: *mut c_int) => |acc| env::initialized(acc.st(), flag);
    fn MPI_Finalize / PMPI_Finalize() => |acc| env::finalize_world(acc);
    fn MPI_Finalized / PMPI_Finalized(flag: *mut c_int) => |acc| env::finalized(acc.st(), flag);
    fn MPI_Abort / PMPI_Abort(comm: Comm, errorcode: c_int) => |acc| env::abort(acc, comm, errorcode);
    fn MPI_Get_version / PMPI_Get_version(version: *mut c_int, subversion: *mut c_int) => |_acc| env::get_version(version, subversion);
    fn MPI_Get_library_version / PMPI_Get_library_version(version: *mut c_char, resultlen: *mut c_int) => |_acc| env::get_library_version(version, resultlen);
    fn MPI_Query_thread / PMPI_Query_thread(provided: *mut c_int) => |acc| env::query_thread(acc.st(), provided);
    fn MPI_Is_thread_main / PMPI_Is_thread_main(flag: *mut c_int) => |acc| env::is_thread_main(acc.st(), flag);
    fn MPI_Get_processor_name / PMPI_Get_processor_name(name: *mut c_char, resultlen: *mut c_int) => |_acc| env::get_processor_name(name, resultlen);
    fn MPI_Error_string / PMPI_Error_string(errorcode: c_int, string: *mut c_char, resultlen: *mut c_int) => |acc| env::error_string(acc.st(), errorcode, string, resultlen);
    fn MPI_Error_class / PMPI_Error_class(errorcode: c_int, errorclass: *mut c_int) => |acc| env::error_class(acc.st(), errorcode, errorclass);
    fn MPI_Comm_set_errhandler / PMPI_Comm_set_errhandler(comm: Comm, errhandler: Errhandler) => |acc| comm::set_errhandler(acc, comm, errhandler);
    fn MPI_Comm_get_errhandler / PMPI_Comm_get_errhandler(comm: Comm, errhandler: *mut Errhandler) => |acc| comm::get_errhandler(acc, comm, errhandler);
    fn MPI_Errhandler_free / PMPI_Errhandler_free(errhandler: *mut Errhandler) => |acc| crate::errh::free(acc, errhandler);
    fn MPI_Comm_create_errhandler / PMPI_Comm_create_errhandler(comm_errhandler_fn: Option<crate::errh::ErrFn>, errhandler: *mut Errhandler) => |acc| crate::errh::create(acc, comm_errhandler_fn, errhandler);
    fn MPI_Comm_call_errhandler / PMPI_Comm_call_errhandler(comm: Comm, errorcode: c_int) => |acc| crate::errh::call(acc, comm, errorcode);
    fn MPI_Add_error_class / PMPI_Add_error_class(errorclass: *mut c_int) => |acc| crate::errh::add_class(acc, errorclass);
    fn MPI_Add_error_code / PMPI_Add_error_code(errorclass: c_int, errorcode: *mut c_int) => |acc| crate::errh::add_code(acc, errorclass, errorcode);
    fn MPI_Add_error_string / PMPI_Add_error_string(errorcode: c_int, string: *const c_char) => |acc| crate::errh::add_string(acc, errorcode, string);
    fn MPI_Comm_rank / PMPI_Comm_rank(comm: Comm, rank: *mut c_int) => |acc| comm::rank_or_size(acc, comm, rank, false);
    fn MPI_Comm_size / PMPI_Comm_size(comm: Comm, size: *mut c_int) => |acc| comm::rank_or_size(acc, comm, size, true);
    fn MPI_Comm_dup / PMPI_Comm_dup(comm: Comm, newcomm: *mut Comm) => |acc| comm::dup(acc, comm, newcomm);
    fn MPI_Comm_split / PMPI_Comm_split(comm: Comm, color: c_int, key: c_int, newcomm: *mut Comm) => |acc| comm::split(acc, comm, color, key, newcomm);
    fn MPI_Comm_free / PMPI_Comm_free(comm: *mut Comm) => |acc| comm::free(acc, comm);
    fn MPI_Comm_create_keyval / PMPI_Comm_create_keyval(comm_copy_attr_fn: Option<attr::CopyFn>, comm_delete_attr_fn: Option<attr::DeleteFn>, comm_keyval: *mut c_int, extra_state: *mut c_void) => |acc| attr::create_keyval(acc, comm_copy_attr_fn, comm_delete_attr_fn, comm_keyval, extra_state, false);
    fn MPI_Comm_free_keyval / PMPI_Comm_free_keyval(comm_keyval: *mut c_int) => |acc| attr::free_keyval(acc, comm_keyval, false);
    fn MPI_Type_create_keyval / PMPI_Type_create_keyval(type_copy_attr_fn: Option<attr::CopyFn>, type_delete_attr_fn: Option<attr::DeleteFn>, type_keyval: *mut c_int, extra_state: *mut c_void) => |acc| attr::create_keyval(acc, type_copy_attr_fn, type_delete_attr_fn, type_keyval, extra_state, true);
    fn MPI_Type_free_keyval / PMPI_Type_free_keyval(type_keyval: *mut c_int) => |acc| attr::free_keyval(acc, type_keyval, true);
    fn MPI_Type_set_attr / PMPI_Type_set_attr(datatype: Datatype, type_keyval: c_int, attribute_val: *mut c_void) => |acc| attr::type_set_attr(acc, datatype, type_keyval, attribute_val);
    fn MPI_Type_get_attr / PMPI_Type_get_attr(datatype: Datatype, type_keyval: c_int, attribute_val: *mut c_void, flag: *mut c_int) => |acc| attr::type_get_attr(acc, datatype, type_keyval, attribute_val, flag);
    fn MPI_Type_delete_attr / PMPI_Type_delete_attr(datatype: Datatype, type_keyval: c_int) => |acc| attr::type_delete_attr(acc, datatype, type_keyval);
    fn MPI_Comm_set_attr / PMPI_Comm_set_attr(comm: Comm, comm_keyval: c_int, attribute_val: *mut c_void) => |acc| attr::set_attr(acc, comm, comm_keyval, attribute_val);
    fn MPI_Comm_get_attr / PMPI_Comm_get_attr(comm: Comm, comm_keyval: c_int, attribute_val: *mut c_void, flag: *mut c_int) => |acc| attr::get_attr(acc, comm, comm_keyval, attribute_val, flag);
    fn MPI_Comm_delete_attr / PMPI_Comm_delete_attr(comm: Comm, comm_keyval: c_int) => |acc| attr::delete_attr(acc, comm, comm_keyval);
    fn MPI_Info_create / PMPI_Info_create(info: *mut Info) => |acc| attr::info_create(acc, info);
    fn MPI_Info_dup / PMPI_Info_dup(info: Info, newinfo: *mut Info) => |acc| attr::info_dup(acc, info, newinfo);
    fn MPI_Info_free / PMPI_Info_free(info: *mut Info) => |acc| attr::info_free(acc, info);
    fn MPI_Info_set / PMPI_Info_set(info: Info, key: *const c_char, value: *const c_char) => |acc| attr::info_set(acc, info, key, value);
    fn MPI_Info_delete / PMPI_Info_delete(info: Info, key: *const c_char) => |acc| attr::info_delete(acc, info, key);
    fn MPI_Info_get / PMPI_Info_get(info: Info, key: *const c_char, valuelen: c_int, value: *mut c_char, flag: *mut c_int) => |acc| attr::info_get(acc, info, key, std::ptr::null_mut(), valuelen, value, flag);
    fn MPI_Info_get_valuelen / PMPI_Info_get_valuelen(info: Info, key: *const c_char, valuelen: *mut c_int, flag: *mut c_int) => |acc| attr::info_get(acc, info, key, valuelen, 0, std::ptr::null_mut(), flag);
    fn MPI_Info_get_nkeys / PMPI_Info_get_nkeys(info: Info, nkeys: *mut c_int) => |acc| attr::info_keys(acc, info, nkeys, 0, std::ptr::null_mut());
    fn MPI_Info_get_nthkey / PMPI_Info_get_nthkey(info: Info, n: c_int, key: *mut c_char) => |acc| attr::info_keys(acc, info, std::ptr::null_mut(), n, key);
    fn MPI_Alloc_mem / PMPI_Alloc_mem(size: Aint, info: Info, baseptr: *mut c_void) => |_acc| attr::alloc_mem(size, info, baseptr);
    fn MPI_Free_mem / PMPI_Free_mem(base: *mut c_void) => |_acc| attr::free_mem(base);
    fn MPI_Pcontrol / PMPI_Pcontrol(_level: c_int) => |_acc| Ok(());
    fn MPI_Dims_create / PMPI_Dims_create(nnodes: c_int, ndims: c_int, dims: *mut c_int) => |_acc| crate::topo::dims_create_c(nnodes, ndims, dims);
    fn MPI_Cart_create / PMPI_Cart_create(comm_old: Comm, ndims: c_int, dims: *const c_int, periods: *const c_int, reorder: c_int, comm_cart: *mut Comm) => |acc| crate::topo::cart_create(acc, comm_old, ndims, dims, periods, reorder, comm_cart);
    fn MPI_Cart_get / PMPI_Cart_get(comm: Comm, maxdims: c_int, dims: *mut c_int, periods: *mut c_int, coords: *mut c_int) => |acc| crate::topo::cart_get(acc, comm, maxdims, dims, periods, coords);
    fn MPI_Cartdim_get / PMPI_Cartdim_get(comm: Comm, ndims: *mut c_int) => |acc| crate::topo::cartdim_get(acc, comm, ndims);
    fn MPI_Cart_rank / PMPI_Cart_rank(comm: Comm, coords: *const c_int, rank: *mut c_int) => |acc| crate::topo::cart_rank(acc, comm, coords, rank);
    fn MPI_Cart_coords / PMPI_Cart_coords(comm: Comm, rank: c_int, maxdims: c_int, coords: *mut c_int) => |acc| crate::topo::cart_coords(acc, comm, rank, maxdims, coords);
    fn MPI_Cart_shift / PMPI_Cart_shift(comm: Comm, direction: c_int, disp: c_int, rank_source: *mut c_int, rank_dest: *mut c_int) => |acc| crate::topo::cart_shift(acc, comm, direction, disp, rank_source, rank_dest);
    fn MPI_Cart_sub / PMPI_Cart_sub(comm: Comm, remain_dims: *const c_int, newcomm: *mut Comm) => |acc| crate::topo::cart_sub(acc, comm, remain_dims, newcomm);
    fn MPI_Graph_create / PMPI_Graph_create(comm_old: Comm, nnodes: c_int, indx: *const c_int, edges: *const c_int, reorder: c_int, comm_graph: *mut Comm) => |acc| crate::topo::graph_create(acc, comm_old, nnodes, indx, edges, reorder, comm_graph);
    fn MPI_Graphdims_get / PMPI_Graphdims_get(comm: Comm, nnodes: *mut c_int, nedges: *mut c_int) => |acc| crate::topo::graphdims_get(acc, comm, nnodes, nedges);
    fn MPI_Graph_get / PMPI_Graph_get(comm: Comm, maxindex: c_int, maxedges: c_int, indx: *mut c_int, edges: *mut c_int) => |acc| crate::topo::graph_get(acc, comm, maxindex, maxedges, indx, edges);
    fn MPI_Graph_neighbors_count / PMPI_Graph_neighbors_count(comm: Comm, rank: c_int, nneighbors: *mut c_int) => |acc| crate::topo::graph_neighbors_count(acc, comm, rank, nneighbors);
    fn MPI_Graph_neighbors / PMPI_Graph_neighbors(comm: Comm, rank: c_int, maxneighbors: c_int, neighbors: *mut c_int) => |acc| crate::topo::graph_neighbors(acc, comm, rank, maxneighbors, neighbors);
    fn MPI_Topo_test / PMPI_Topo_test(comm: Comm, status: *mut c_int) => |acc| crate::topo::topo_test(acc, comm, status);
    fn MPI_Op_create / PMPI_Op_create(user_fn: Option<crate::op::UserFn>, commute: c_int, op: *mut Op) => |acc| crate::op::create(acc, user_fn, commute, op);
    fn MPI_Op_free / PMPI_Op_free(op: *mut Op) => |acc| crate::op::free(acc, op);
    fn MPI_Op_commutative / PMPI_Op_commutative(op: Op, commute: *mut c_int) => |acc| crate::op::commutative(acc, op, commute);
    fn MPI_Reduce_local / PMPI_Reduce_local(inbuf: *const c_void, inoutbuf: *mut c_void, count: c_int, datatype: Datatype, op: Op) => |acc| coll::reduce_local(acc, inbuf, inoutbuf, count, datatype, op);
    fn MPI_Comm_split_type / PMPI_Comm_split_type(comm: Comm, split_type: c_int, key: c_int, info: Info, newcomm: *mut Comm) => |acc| comm::split_type(acc, comm, split_type, key, info, newcomm);
    fn MPI_Comm_create / PMPI_Comm_create(comm: Comm, group: Group, newcomm: *mut Comm) => |acc| comm::create(acc, comm, group, newcomm);
    fn MPI_Comm_create_group / PMPI_Comm_create_group(comm: Comm, group: Group, tag: c_int, newcomm: *mut Comm) => |acc| comm::create_group(acc, comm, group, tag, newcomm);
    fn MPI_Comm_compare / PMPI_Comm_compare(comm1: Comm, comm2: Comm, result: *mut c_int) => |acc| comm::compare(acc, comm1, comm2, result);
    fn MPI_Comm_idup / PMPI_Comm_idup(comm: Comm, newcomm: *mut Comm, request: *mut Request) => |acc| coll::nbc::idup(acc, comm, newcomm, request);
    fn MPI_Intercomm_create / PMPI_Intercomm_create(local_comm: Comm, local_leader: c_int, peer_comm: Comm, remote_leader: c_int, tag: c_int, newintercomm: *mut Comm) => |acc| comm::inter::create_from(acc, local_comm, local_leader, peer_comm, remote_leader, tag, newintercomm);
    fn MPI_Intercomm_merge / PMPI_Intercomm_merge(intercomm: Comm, high: c_int, newintracomm: *mut Comm) => |acc| comm::inter::merge(acc, intercomm, high, newintracomm);
    fn MPI_Comm_remote_size / PMPI_Comm_remote_size(comm: Comm, size: *mut c_int) => |acc| comm::inter::remote_size(acc, comm, size);
    fn MPI_Comm_remote_group / PMPI_Comm_remote_group(comm: Comm, group: *mut Group) => |acc| comm::inter::remote_group(acc, comm, group);
    fn MPI_Comm_test_inter / PMPI_Comm_test_inter(comm: Comm, flag: *mut c_int) => |acc| comm::inter::test_inter(acc, comm, flag);
    fn MPI_Comm_set_name / PMPI_Comm_set_name(comm: Comm, comm_name: *const c_char) => |acc| comm::set_name(acc, comm, comm_name);
    fn MPI_Comm_get_name / PMPI_Comm_get_name(comm: Comm, comm_name: *mut c_char, resultlen: *mut c_int) => |acc| comm::get_name(acc, comm, comm_name, resultlen);
    fn MPI_Comm_group / PMPI_Comm_group(comm: Comm, group: *mut Group) => |acc| group::comm_group(acc, comm, group);
    fn MPI_Group_size / PMPI_Group_size(group: Group, size: *mut c_int) => |acc| group::size_or_rank(acc, group, size, false);
    fn MPI_Group_rank / PMPI_Group_rank(group: Group, rank: *mut c_int) => |acc| group::size_or_rank(acc, group, rank, true);
    fn MPI_Group_translate_ranks / PMPI_Group_translate_ranks(group1: Group, n: c_int, ranks1: *const c_int, group2: Group, ranks2: *mut c_int) => |acc| group::translate_ranks(acc, group1, n, ranks1, group2, ranks2);
    fn MPI_Group_compare / PMPI_Group_compare(group1: Group, group2: Group, result: *mut c_int) => |acc| group::compare(acc, group1, group2, result);
    fn MPI_Group_union / PMPI_Group_union(group1: Group, group2: Group, newgroup: *mut Group) => |acc| group::set_op(acc, group1, group2, SetOp::Union, newgroup);
    fn MPI_Group_intersection / PMPI_Group_intersection(group1: Group, group2: Group, newgroup: *mut Group) => |acc| group::set_op(acc, group1, group2, SetOp::Intersection, newgroup);
    fn MPI_Group_difference / PMPI_Group_difference(group1: Group, group2: Group, newgroup: *mut Group) => |acc| group::set_op(acc, group1, group2, SetOp::Difference, newgroup);
    fn MPI_Group_incl / PMPI_Group_incl(group: Group, n: c_int, ranks: *const c_int, newgroup: *mut Group) => |acc| group::incl(acc, group, n, ranks, false, newgroup);
    fn MPI_Group_excl / PMPI_Group_excl(group: Group, n: c_int, ranks: *const c_int, newgroup: *mut Group) => |acc| group::incl(acc, group, n, ranks, true, newgroup);
    fn MPI_Group_range_incl / PMPI_Group_range_incl(group: Group, n: c_int, ranges: *const [c_int; 3], newgroup: *mut Group) => |acc| group::range_incl(acc, group, n, ranges, false, newgroup);
    fn MPI_Group_range_excl / PMPI_Group_range_excl(group: Group, n: c_int, ranges: *const [c_int; 3], newgroup: *mut Group) => |acc| group::range_incl(acc, group, n, ranges, true, newgroup);
    fn MPI_Group_free / PMPI_Group_free(group: *mut Group) => |acc| group::free(acc, group);

    fn MPI_Type_contiguous / PMPI_Type_contiguous(count: c_int, oldtype: Datatype, newtype: *mut Datatype) => |acc| dt::contiguous(acc, count, oldtype, newtype);
    fn MPI_Type_vector / PMPI_Type_vector(count: c_int, blocklength: c_int, stride: c_int, oldtype: Datatype, newtype: *mut Datatype) => |acc| dt::vector(acc, count, blocklength, stride as Aint, false, oldtype, newtype);
    fn MPI_Type_create_hvector / PMPI_Type_create_hvector(count: c_int, blocklength: c_int, stride: Aint, oldtype: Datatype, newtype: *mut Datatype) => |acc| dt::vector(acc, count, blocklength, stride, true, oldtype, newtype);
    fn MPI_Type_indexed / PMPI_Type_indexed(count: c_int, array_of_blocklengths: *const c_int, array_of_displacements: *const c_int, oldtype: Datatype, newtype: *mut Datatype) => |acc| dt::indexed(acc, count, array_of_blocklengths, Displs::Elements(array_of_displacements), oldtype, newtype);
    fn MPI_Type_create_hindexed / PMPI_Type_create_hindexed(count: c_int, array_of_blocklengths: *const c_int, array_of_displacements: *const Aint, oldtype: Datatype, newtype: *mut Datatype) => |acc| dt::indexed(acc, count, array_of_blocklengths, Displs::Bytes(array_of_displacements), oldtype, newtype);
    fn MPI_Type_create_indexed_block / PMPI_Type_create_indexed_block(count: c_int, blocklength: c_int, array_of_displacements: *const c_int, oldtype: Datatype, newtype: *mut Datatype) => |acc| dt::indexed_block(acc, count, blocklength, Displs::Elements(array_of_displacements), oldtype, newtype);
    fn MPI_Type_create_hindexed_block / PMPI_Type_create_hindexed_block(count: c_int, blocklength: c_int, array_of_displacements: *const Aint, oldtype: Datatype, newtype: *mut Datatype) => |acc| dt::indexed_block(acc, count, blocklength, Displs::Bytes(array_of_displacements), oldtype, newtype);
    fn MPI_Type_create_struct / PMPI_Type_create_struct(count: c_int, array_of_blocklengths: *const c_int, array_of_displacements: *const Aint, array_of_types: *const Datatype, newtype: *mut Datatype) => |acc| dt::create_struct(acc, count, array_of_blocklengths, array_of_displacements, array_of_types, newtype);
    fn MPI_Type_create_subarray / PMPI_Type_create_subarray(ndims: c_int, array_of_sizes: *const c_int, array_of_subsizes: *const c_int, array_of_starts: *const c_int, order: c_int, oldtype: Datatype, newtype: *mut Datatype) => |acc| dt::subarray(acc, ndims, array_of_sizes, array_of_subsizes, array_of_starts, order, oldtype, newtype);
    fn MPI_Type_create_resized / PMPI_Type_create_resized(oldtype: Datatype, lb: Aint, extent: Aint, newtype: *mut Datatype) => |acc| dt::resized(acc, oldtype, lb, extent, newtype);
    fn MPI_Type_dup / PMPI_Type_dup(oldtype: Datatype, newtype: *mut Datatype) => |acc| dt::dup(acc, oldtype, newtype);
    fn MPI_Type_commit / PMPI_Type_commit(datatype: *mut Datatype) => |acc| dt::commit(acc, datatype);
    fn MPI_Type_free / PMPI_Type_free(datatype: *mut Datatype) => |acc| dt::free(acc, datatype);
    fn MPI_Type_size / PMPI_Type_size(datatype: Datatype, size: *mut c_int) => |acc| dt::size(acc, datatype, size.cast(), false);
    fn MPI_Type_size_x / PMPI_Type_size_x(datatype: Datatype, size: *mut Count) => |acc| dt::size(acc, datatype, size.cast(), true);
    fn MPI_Type_get_extent / PMPI_Type_get_extent(datatype: Datatype, lb: *mut Aint, extent: *mut Aint) => |acc| dt::extent(acc, datatype, lb, extent, false);
    fn MPI_Type_get_extent_x / PMPI_Type_get_extent_x(datatype: Datatype, lb: *mut Count, extent: *mut Count) => |acc| dt::extent(acc, datatype, lb.cast(), extent.cast(), false);
    fn MPI_Type_get_true_extent / PMPI_Type_get_true_extent(datatype: Datatype, true_lb: *mut Aint, true_extent: *mut Aint) => |acc| dt::extent(acc, datatype, true_lb, true_extent, true);
    fn MPI_Type_get_true_extent_x / PMPI_Type_get_true_extent_x(datatype: Datatype, true_lb: *mut Count, true_extent: *mut Count) => |acc| dt::extent(acc, datatype, true_lb.cast(), true_extent.cast(), true);
    fn MPI_Type_get_name / PMPI_Type_get_name(datatype: Datatype, type_name: *mut c_char, resultlen: *mut c_int) => |acc| dt::get_name(acc, datatype, type_name, resultlen);
    fn MPI_Type_set_name / PMPI_Type_set_name(datatype: Datatype, type_name: *const c_char) => |acc| dt::set_name(acc, datatype, type_name);
    fn MPI_Type_get_envelope / PMPI_Type_get_envelope(datatype: Datatype, num_integers: *mut c_int, num_addresses: *mut c_int, num_datatypes: *mut c_int, combiner: *mut c_int) => |acc| dt::get_envelope(acc, datatype, num_integers, num_addresses, num_datatypes, combiner);
    fn MPI_Type_get_contents / PMPI_Type_get_contents(datatype: Datatype, max_integers: c_int, max_addresses: c_int, max_datatypes: c_int, array_of_integers: *mut c_int, array_of_addresses: *mut Aint, array_of_datatypes: *mut Datatype) => |acc| dt::get_contents(acc, datatype, max_integers, max_addresses, max_datatypes, array_of_integers, array_of_addresses, array_of_datatypes);
    fn MPI_Get_count / PMPI_Get_count(status: *const Status, datatype: Datatype, count: *mut c_int) => |acc| dt::get_count(acc, status, datatype, count);
    fn MPI_Get_elements / PMPI_Get_elements(status: *const Status, datatype: Datatype, count: *mut c_int) => |acc| dt::get_elements(acc, status, datatype, count.cast(), false);
    fn MPI_Get_elements_x / PMPI_Get_elements_x(status: *const Status, datatype: Datatype, count: *mut Count) => |acc| dt::get_elements(acc, status, datatype, count.cast(), true);
    fn MPI_Status_set_elements / PMPI_Status_set_elements(status: *mut Status, datatype: Datatype, count: c_int) => |acc| dt::set_elements(acc, status, datatype, count as Count);
    fn MPI_Status_set_elements_x / PMPI_Status_set_elements_x(status: *mut Status, datatype: Datatype, count: Count) => |acc| dt::set_elements(acc, status, datatype, count);
    fn MPI_Status_set_cancelled / PMPI_Status_set_cancelled(status: *mut Status, flag: c_int) => |_acc| dt::set_cancelled(status, flag);
    fn MPI_Pack / PMPI_Pack(inbuf: *const c_void, incount: c_int, datatype: Datatype, outbuf: *mut c_void, outsize: c_int, position: *mut c_int, comm: Comm) => |acc| dt::pack_call(acc, inbuf, incount, datatype, outbuf, outsize, position, comm);
    fn MPI_Unpack / PMPI_Unpack(inbuf: *const c_void, insize: c_int, position: *mut c_int, outbuf: *mut c_void, outcount: c_int, datatype: Datatype, comm: Comm) => |acc| dt::unpack_call(acc, inbuf, insize, position, outbuf, outcount, datatype, comm);
    fn MPI_Pack_size / PMPI_Pack_size(incount: c_int, datatype: Datatype, comm: Comm, size: *mut c_int) => |acc| dt::pack_size(acc, incount, datatype, comm, size);
    fn MPI_Get_address / PMPI_Get_address(location: *const c_void, address: *mut Aint) => |_acc| dt::get_address(location, address);

    fn MPI_Bsend / PMPI_Bsend(buf: *const c_void, count: c_int, datatype: Datatype, dest: c_int, tag: c_int, comm: Comm) => |acc| p2p::send_checked(acc, buf, count, datatype, dest, tag, comm, Mode::Buffered);
    fn MPI_Issend / PMPI_Issend(buf: *const c_void, count: c_int, datatype: Datatype, dest: c_int, tag: c_int, comm: Comm, request: *mut Request) => |acc| start::isend(acc, Mode::Synchronous, buf, count, datatype, dest, tag, comm, request);
    fn MPI_Ibsend / PMPI_Ibsend(buf: *const c_void, count: c_int, datatype: Datatype, dest: c_int, tag: c_int, comm: Comm, request: *mut Request) => |acc| start::isend(acc, Mode::Buffered, buf, count, datatype, dest, tag, comm, request);
    fn MPI_Irsend / PMPI_Irsend(buf: *const c_void, count: c_int, datatype: Datatype, dest: c_int, tag: c_int, comm: Comm, request: *mut Request) => |acc| start::isend(acc, Mode::Ready, buf, count, datatype, dest, tag, comm, request);
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
    fn MPI_Waitany / PMPI_Waitany(count: c_int, array_of_requests: *mut Request, index: *mut c_int, status: *mut Status) => |acc| complete::any(acc, count, array_of_requests, index, std::ptr::null_mut(), status, true);
    fn MPI_Waitsome / PMPI_Waitsome(incount: c_int, array_of_requests: *mut Request, outcount: *mut c_int, array_of_indices: *mut c_int, array_of_statuses: *mut Status) => |acc| complete::some(acc, incount, array_of_requests, outcount, array_of_indices, array_of_statuses, true);
    fn MPI_Test / PMPI_Test(request: *mut Request, flag: *mut c_int, status: *mut Status) => |acc| complete::test(acc, request, flag, status);
    fn MPI_Testall / PMPI_Testall(count: c_int, array_of_requests: *mut Request, flag: *mut c_int, array_of_statuses: *mut Status) => |acc| complete::testall(acc, count, array_of_requests, flag, array_of_statuses);
    fn MPI_Testany / PMPI_Testany(count: c_int, array_of_requests: *mut Request, index: *mut c_int, flag: *mut c_int, status: *mut Status) => |acc| complete::any(acc, count, array_of_requests, index, flag, status, false);
    fn MPI_Testsome / PMPI_Testsome(incount: c_int, array_of_requests: *mut Request, outcount: *mut c_int, array_of_indices: *mut c_int, array_of_statuses: *mut Status) => |acc| complete::some(acc, incount, array_of_requests, outcount, array_of_indices, array_of_statuses, false);
    fn MPI_Request_get_status / PMPI_Request_get_status(request: Request, flag: *mut c_int, status: *mut Status) => |acc| complete::get_status(acc, request, flag, status);
    fn MPI_Request_free / PMPI_Request_free(request: *mut Request) => |acc| complete::free(acc, request);
    fn MPI_Cancel / PMPI_Cancel(request: *mut Request) => |acc| complete::cancel(acc, request);
    fn MPI_Mprobe / PMPI_Mprobe(source: c_int, tag: c_int, comm: Comm, message: *mut Message, status: *mut Status) => |acc| mprobe::mprobe(acc, source, tag, comm, std::ptr::null_mut(), message, status);
    fn MPI_Improbe / PMPI_Improbe(source: c_int, tag: c_int, comm: Comm, flag: *mut c_int, message: *mut Message, status: *mut Status) => |acc| mprobe::improbe(acc, source, tag, comm, flag, message, status);
    fn MPI_Mrecv / PMPI_Mrecv(buf: *mut c_void, count: c_int, datatype: Datatype, message: *mut Message, status: *mut Status) => |acc| mprobe::mrecv(acc, buf, count, datatype, message, status, std::ptr::null_mut());
    fn MPI_Imrecv / PMPI_Imrecv(buf: *mut c_void, count: c_int, datatype: Datatype, message: *mut Message, request: *mut Request) => |acc| mprobe::mrecv(acc, buf, count, datatype, message, std::ptr::null_mut(), request);
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
    fn MPI_Gatherv / PMPI_Gatherv(sendbuf: *const c_void, sendcount: c_int, sendtype: Datatype, recvbuf: *mut c_void, recvcounts: *const c_int, displs: *const c_int, recvtype: Datatype, root: c_int, comm: Comm) => |acc| coll::vector::gatherv(acc, sendbuf, sendcount, sendtype, recvbuf, recvcounts, displs, recvtype, root, comm);
    fn MPI_Scatterv / PMPI_Scatterv(sendbuf: *const c_void, sendcounts: *const c_int, displs: *const c_int, sendtype: Datatype, recvbuf: *mut c_void, recvcount: c_int, recvtype: Datatype, root: c_int, comm: Comm) => |acc| coll::vector::scatterv(acc, sendbuf, sendcounts, displs, sendtype, recvbuf, recvcount, recvtype, root, comm);
    fn MPI_Allgatherv / PMPI_Allgatherv(sendbuf: *const c_void, sendcount: c_int, sendtype: Datatype, recvbuf: *mut c_void, recvcounts: *const c_int, displs: *const c_int, recvtype: Datatype, comm: Comm) => |acc| coll::vector::allgatherv(acc, sendbuf, sendcount, sendtype, recvbuf, recvcounts, displs, recvtype, comm);
    fn MPI_Alltoallv / PMPI_Alltoallv(sendbuf: *const c_void, sendcounts: *const c_int, sdispls: *const c_int, sendtype: Datatype, recvbuf: *mut c_void, recvcounts: *const c_int, rdispls: *const c_int, recvtype: Datatype, comm: Comm) => |acc| coll::vector::alltoallv(acc, sendbuf, sendcounts, sdispls, sendtype, recvbuf, recvcounts, rdispls, recvtype, comm);
    fn MPI_Alltoallw / PMPI_Alltoallw(sendbuf: *const c_void, sendcounts: *const c_int, sdispls: *const c_int, sendtypes: *const Datatype, recvbuf: *mut c_void, recvcounts: *const c_int, rdispls: *const c_int, recvtypes: *const Datatype, comm: Comm) => |acc| coll::vector::alltoallw(acc, sendbuf, sendcounts, sdispls, sendtypes, recvbuf, recvcounts, rdispls, recvtypes, comm);
    fn MPI_Reduce_scatter / PMPI_Reduce_scatter(sendbuf: *const c_void, recvbuf: *mut c_void, recvcounts: *const c_int, datatype: Datatype, op: Op, comm: Comm) => |acc| coll::vector::reduce_scatter(acc, sendbuf, recvbuf, recvcounts, None, datatype, op, comm);
    fn MPI_Reduce_scatter_block / PMPI_Reduce_scatter_block(sendbuf: *const c_void, recvbuf: *mut c_void, recvcount: c_int, datatype: Datatype, op: Op, comm: Comm) => |acc| coll::vector::reduce_scatter(acc, sendbuf, recvbuf, std::ptr::null(), Some(recvcount), datatype, op, comm);
    fn MPI_Scan / PMPI_Scan(sendbuf: *const c_void, recvbuf: *mut c_void, count: c_int, datatype: Datatype, op: Op, comm: Comm) => |acc| coll::vector::scan(acc, sendbuf, recvbuf, count, datatype, op, comm, false);
    fn MPI_Exscan / PMPI_Exscan(sendbuf: *const c_void, recvbuf: *mut c_void, count: c_int, datatype: Datatype, op: Op, comm: Comm) => |acc| coll::vector::scan(acc, sendbuf, recvbuf, count, datatype, op, comm, true);
    fn MPI_Ibarrier / PMPI_Ibarrier(comm: Comm, request: *mut Request) => |acc| coll::nbc::ibarrier(acc, comm, request);
    fn MPI_Ibcast / PMPI_Ibcast(buffer: *mut c_void, count: c_int, datatype: Datatype, root: c_int, comm: Comm, request: *mut Request) => |acc| coll::nbc::ibcast(acc, buffer, count, datatype, root, comm, request);
    fn MPI_Ireduce / PMPI_Ireduce(sendbuf: *const c_void, recvbuf: *mut c_void, count: c_int, datatype: Datatype, op: Op, root: c_int, comm: Comm, request: *mut Request) => |acc| coll::nbc::ireduce(acc, sendbuf, recvbuf, count, datatype, op, Some(root), comm, request);
    fn MPI_Iallreduce / PMPI_Iallreduce(sendbuf: *const c_void, recvbuf: *mut c_void, count: c_int, datatype: Datatype, op: Op, comm: Comm, request: *mut Request) => |acc| coll::nbc::ireduce(acc, sendbuf, recvbuf, count, datatype, op, None, comm, request);
    fn MPI_Ireduce_scatter / PMPI_Ireduce_scatter(sendbuf: *const c_void, recvbuf: *mut c_void, recvcounts: *const c_int, datatype: Datatype, op: Op, comm: Comm, request: *mut Request) => |acc| coll::nbc::ireduce_scatter(acc, sendbuf, recvbuf, recvcounts, None, datatype, op, comm, request);
    fn MPI_Ireduce_scatter_block / PMPI_Ireduce_scatter_block(sendbuf: *const c_void, recvbuf: *mut c_void, recvcount: c_int, datatype: Datatype, op: Op, comm: Comm, request: *mut Request) => |acc| coll::nbc::ireduce_scatter(acc, sendbuf, recvbuf, std::ptr::null(), Some(recvcount), datatype, op, comm, request);
    fn MPI_Iscan / PMPI_Iscan(sendbuf: *const c_void, recvbuf: *mut c_void, count: c_int, datatype: Datatype, op: Op, comm: Comm, request: *mut Request) => |acc| coll::nbc::iscan(acc, sendbuf, recvbuf, count, datatype, op, comm, false, request);
    fn MPI_Iexscan / PMPI_Iexscan(sendbuf: *const c_void, recvbuf: *mut c_void, count: c_int, datatype: Datatype, op: Op, comm: Comm, request: *mut Request) => |acc| coll::nbc::iscan(acc, sendbuf, recvbuf, count, datatype, op, comm, true, request);
    fn MPI_Igather / PMPI_Igather(sendbuf: *const c_void, sendcount: c_int, sendtype: Datatype, recvbuf: *mut c_void, recvcount: c_int, recvtype: Datatype, root: c_int, comm: Comm, request: *mut Request) => |acc| coll::nbc::iblocks(acc, coll::nbc::Shape::Gather, (sendbuf, sendcount, std::ptr::null(), std::ptr::null(), sendtype, None), (recvbuf, recvcount, std::ptr::null(), std::ptr::null(), recvtype, None), true, Some(root), comm, request);
    fn MPI_Igatherv / PMPI_Igatherv(sendbuf: *const c_void, sendcount: c_int, sendtype: Datatype, recvbuf: *mut c_void, recvcounts: *const c_int, displs: *const c_int, recvtype: Datatype, root: c_int, comm: Comm, request: *mut Request) => |acc| coll::nbc::iblocks(acc, coll::nbc::Shape::Gather, (sendbuf, sendcount, std::ptr::null(), std::ptr::null(), sendtype, None), (recvbuf, 0, recvcounts, displs, recvtype, None), false, Some(root), comm, request);
    fn MPI_Iscatter / PMPI_Iscatter(sendbuf: *const c_void, sendcount: c_int, sendtype: Datatype, recvbuf: *mut c_void, recvcount: c_int, recvtype: Datatype, root: c_int, comm: Comm, request: *mut Request) => |acc| coll::nbc::iblocks(acc, coll::nbc::Shape::Scatter, (sendbuf, sendcount, std::ptr::null(), std::ptr::null(), sendtype, None), (recvbuf, recvcount, std::ptr::null(), std::ptr::null(), recvtype, None), true, Some(root), comm, request);
    fn MPI_Iscatterv / PMPI_Iscatterv(sendbuf: *const c_void, sendcounts: *const c_int, displs: *const c_int, sendtype: Datatype, recvbuf: *mut c_void, recvcount: c_int, recvtype: Datatype, root: c_int, comm: Comm, request: *mut Request) => |acc| coll::nbc::iblocks(acc, coll::nbc::Shape::Scatter, (sendbuf, 0, sendcounts, displs, sendtype, None), (recvbuf, recvcount, std::ptr::null(), std::ptr::null(), recvtype, None), false, Some(root), comm, request);
    fn MPI_Iallgather / PMPI_Iallgather(sendbuf: *const c_void, sendcount: c_int, sendtype: Datatype, recvbuf: *mut c_void, recvcount: c_int, recvtype: Datatype, comm: Comm, request: *mut Request) => |acc| coll::nbc::iblocks(acc, coll::nbc::Shape::Allgather, (sendbuf, sendcount, std::ptr::null(), std::ptr::null(), sendtype, None), (recvbuf, recvcount, std::ptr::null(), std::ptr::null(), recvtype, None), true, None, comm, request);
    fn MPI_Iallgatherv / PMPI_Iallgatherv(sendbuf: *const c_void, sendcount: c_int, sendtype: Datatype, recvbuf: *mut c_void, recvcounts: *const c_int, displs: *const c_int, recvtype: Datatype, comm: Comm, request: *mut Request) => |acc| coll::nbc::iblocks(acc, coll::nbc::Shape::Allgather, (sendbuf, sendcount, std::ptr::null(), std::ptr::null(), sendtype, None), (recvbuf, 0, recvcounts, displs, recvtype, None), false, None, comm, request);
    fn MPI_Ialltoall / PMPI_Ialltoall(sendbuf: *const c_void, sendcount: c_int, sendtype: Datatype, recvbuf: *mut c_void, recvcount: c_int, recvtype: Datatype, comm: Comm, request: *mut Request) => |acc| coll::nbc::iblocks(acc, coll::nbc::Shape::Alltoall, (sendbuf, sendcount, std::ptr::null(), std::ptr::null(), sendtype, None), (recvbuf, recvcount, std::ptr::null(), std::ptr::null(), recvtype, None), true, None, comm, request);
    fn MPI_Ialltoallv / PMPI_Ialltoallv(sendbuf: *const c_void, sendcounts: *const c_int, sdispls: *const c_int, sendtype: Datatype, recvbuf: *mut c_void, recvcounts: *const c_int, rdispls: *const c_int, recvtype: Datatype, comm: Comm, request: *mut Request) => |acc| coll::nbc::iblocks(acc, coll::nbc::Shape::Alltoall, (sendbuf, 0, sendcounts, sdispls, sendtype, None), (recvbuf, 0, recvcounts, rdispls, recvtype, None), false, None, comm, request);
    fn MPI_Ialltoallw / PMPI_Ialltoallw(sendbuf: *const c_void, sendcounts: *const c_int, sdispls: *const c_int, sendtypes: *const Datatype, recvbuf: *mut c_void, recvcounts: *const c_int, rdispls: *const c_int, recvtypes: *const Datatype, comm: Comm, request: *mut Request) => |acc| coll::nbc::iblocks(acc, coll::nbc::Shape::Alltoall, (sendbuf, 0, sendcounts, sdispls, 0, Some(sendtypes)), (recvbuf, 0, recvcounts, rdispls, 0, Some(recvtypes)), false, None, comm, request);
    fn MPI_Dist_graph_create_adjacent / PMPI_Dist_graph_create_adjacent(comm_old: Comm, indegree: c_int, sources: *const c_int, sourceweights: *const c_int, outdegree: c_int, destinations: *const c_int, destweights: *const c_int, _info: Info, reorder: c_int, comm_dist_graph: *mut Comm) => |acc| crate::topo::dist_graph_create_adjacent(acc, comm_old, indegree, sources, sourceweights, outdegree, destinations, destweights, reorder, comm_dist_graph);
    fn MPI_Dist_graph_create / PMPI_Dist_graph_create(comm_old: Comm, n: c_int, sources: *const c_int, degrees: *const c_int, destinations: *const c_int, weights: *const c_int, _info: Info, reorder: c_int, comm_dist_graph: *mut Comm) => |acc| crate::topo::dist_graph_create(acc, comm_old, n, sources, degrees, destinations, weights, reorder, comm_dist_graph);
    fn MPI_Dist_graph_neighbors_count / PMPI_Dist_graph_neighbors_count(comm: Comm, indegree: *mut c_int, outdegree: *mut c_int, weighted: *mut c_int) => |acc| crate::topo::dist_graph_neighbors_count(acc, comm, indegree, outdegree, weighted);
    fn MPI_Dist_graph_neighbors / PMPI_Dist_graph_neighbors(comm: Comm, maxindegree: c_int, sources: *mut c_int, sourceweights: *mut c_int, maxoutdegree: c_int, destinations: *mut c_int, destweights: *mut c_int) => |acc| crate::topo::dist_graph_neighbors(acc, comm, maxindegree, sources, sourceweights, maxoutdegree, destinations, destweights);
    fn MPI_Neighbor_allgather / PMPI_Neighbor_allgather(sendbuf: *const c_void, sendcount: c_int, sendtype: Datatype, recvbuf: *mut c_void, recvcount: c_int, recvtype: Datatype, comm: Comm) => |acc| coll::nbc::neighbor(acc, false, (sendbuf, coll::vector::Side::One(sendcount), sendtype), (recvbuf, coll::vector::Side::Regular(recvcount), recvtype), comm, None);
    fn MPI_Neighbor_allgatherv / PMPI_Neighbor_allgatherv(sendbuf: *const c_void, sendcount: c_int, sendtype: Datatype, recvbuf: *mut c_void, recvcounts: *const c_int, displs: *const c_int, recvtype: Datatype, comm: Comm) => |acc| coll::nbc::neighbor(acc, false, (sendbuf, coll::vector::Side::One(sendcount), sendtype), (recvbuf, coll::vector::Side::V(recvcounts, displs), recvtype), comm, None);
    fn MPI_Neighbor_alltoall / PMPI_Neighbor_alltoall(sendbuf: *const c_void, sendcount: c_int, sendtype: Datatype, recvbuf: *mut c_void, recvcount: c_int, recvtype: Datatype, comm: Comm) => |acc| coll::nbc::neighbor(acc, true, (sendbuf, coll::vector::Side::Regular(sendcount), sendtype), (recvbuf, coll::vector::Side::Regular(recvcount), recvtype), comm, None);
    fn MPI_Neighbor_alltoallv / PMPI_Neighbor_alltoallv(sendbuf: *const c_void, sendcounts: *const c_int, sdispls: *const c_int, sendtype: Datatype, recvbuf: *mut c_void, recvcounts: *const c_int, rdispls: *const c_int, recvtype: Datatype, comm: Comm) => |acc| coll::nbc::neighbor(acc, true, (sendbuf, coll::vector::Side::V(sendcounts, sdispls), sendtype), (recvbuf, coll::vector::Side::V(recvcounts, rdispls), recvtype), comm, None);
    fn MPI_Neighbor_alltoallw / PMPI_Neighbor_alltoallw(sendbuf: *const c_void, sendcounts: *const c_int, sdispls: *const Aint, sendtypes: *const Datatype, recvbuf: *mut c_void, recvcounts: *const c_int, rdispls: *const Aint, recvtypes: *const Datatype, comm: Comm) => |acc| coll::nbc::neighbor(acc, true, (sendbuf, coll::vector::Side::W(sendcounts, coll::vector::Displs::Aint(sdispls), sendtypes), 0), (recvbuf, coll::vector::Side::W(recvcounts, coll::vector::Displs::Aint(rdispls), recvtypes), 0), comm, None);
    fn MPI_Ineighbor_allgather / PMPI_Ineighbor_allgather(sendbuf: *const c_void, sendcount: c_int, sendtype: Datatype, recvbuf: *mut c_void, recvcount: c_int, recvtype: Datatype, comm: Comm, request: *mut Request) => |acc| coll::nbc::neighbor(acc, false, (sendbuf, coll::vector::Side::One(sendcount), sendtype), (recvbuf, coll::vector::Side::Regular(recvcount), recvtype), comm, Some(request));
    fn MPI_Ineighbor_allgatherv / PMPI_Ineighbor_allgatherv(sendbuf: *const c_void, sendcount: c_int, sendtype: Datatype, recvbuf: *mut c_void, recvcounts: *const c_int, displs: *const c_int, recvtype: Datatype, comm: Comm, request: *mut Request) => |acc| coll::nbc::neighbor(acc, false, (sendbuf, coll::vector::Side::One(sendcount), sendtype), (recvbuf, coll::vector::Side::V(recvcounts, displs), recvtype), comm, Some(request));
    fn MPI_Ineighbor_alltoall / PMPI_Ineighbor_alltoall(sendbuf: *const c_void, sendcount: c_int, sendtype: Datatype, recvbuf: *mut c_void, recvcount: c_int, recvtype: Datatype, comm: Comm, request: *mut Request) => |acc| coll::nbc::neighbor(acc, true, (sendbuf, coll::vector::Side::Regular(sendcount), sendtype), (recvbuf, coll::vector::Side::Regular(recvcount), recvtype), comm, Some(request));
    fn MPI_Ineighbor_alltoallv / PMPI_Ineighbor_alltoallv(sendbuf: *const c_void, sendcounts: *const c_int, sdispls: *const c_int, sendtype: Datatype, recvbuf: *mut c_void, recvcounts: *const c_int, rdispls: *const c_int, recvtype: Datatype, comm: Comm, request: *mut Request) => |acc| coll::nbc::neighbor(acc, true, (sendbuf, coll::vector::Side::V(sendcounts, sdispls), sendtype), (recvbuf, coll::vector::Side::V(recvcounts, rdispls), recvtype), comm, Some(request));
    fn MPI_Ineighbor_alltoallw / PMPI_Ineighbor_alltoallw(sendbuf: *const c_void, sendcounts: *const c_int, sdispls: *const Aint, sendtypes: *const Datatype, recvbuf: *mut c_void, recvcounts: *const c_int, rdispls: *const Aint, recvtypes: *const Datatype, comm: Comm, request: *mut Request) => |acc| coll::nbc::neighbor(acc, true, (sendbuf, coll::vector::Side::W(sendcounts, coll::vector::Displs::Aint(sdispls), sendtypes), 0), (recvbuf, coll::vector::Side::W(recvcounts, coll::vector::Displs::Aint(rdispls), recvtypes), 0), comm, Some(request));
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

/// `MPI_Aint_add` (MPI-3.1): `base + disp` as an address.
#[unsafe(no_mangle)]
pub extern "C" fn MPI_Aint_add(base: Aint, disp: Aint) -> Aint {
    base.wrapping_add(disp)
}

/// `PMPI_Aint_add`: the profiling-interface twin of `MPI_Aint_add`.
#[unsafe(no_mangle)]
pub extern "C" fn PMPI_Aint_add(base: Aint, disp: Aint) -> Aint {
    base.wrapping_add(disp)
}

/// `MPI_Aint_diff` (MPI-3.1): the distance between two addresses.
#[unsafe(no_mangle)]
pub extern "C" fn MPI_Aint_diff(addr1: Aint, addr2: Aint) -> Aint {
    addr1.wrapping_sub(addr2)
}

/// `PMPI_Aint_diff`: the profiling-interface twin of `MPI_Aint_diff`.
#[unsafe(no_mangle)]
pub extern "C" fn PMPI_Aint_diff(addr1: Aint, addr2: Aint) -> Aint {
    addr1.wrapping_sub(addr2)
}

// Temporary (until the generated table): sessions, communicators from groups, communicator info.
mpi! {
    fn MPI_Session_init / PMPI_Session_init(info: Info, errhandler: Errhandler, session: *mut c_int) => |acc| crate::session::init(acc, info, errhandler, session);
    fn MPI_Session_finalize / PMPI_Session_finalize(session: *mut c_int) => |acc| crate::session::finalize(acc, session);
    fn MPI_Session_get_num_psets / PMPI_Session_get_num_psets(session: c_int, info: Info, npset_names: *mut c_int) => |acc| crate::session::on_session(acc, session, |acc| crate::session::get_num_psets(acc, session, info, npset_names));
    fn MPI_Session_get_nth_pset / PMPI_Session_get_nth_pset(session: c_int, info: Info, n: c_int, pset_len: *mut c_int, pset_name: *mut c_char) => |acc| crate::session::on_session(acc, session, |acc| crate::session::get_nth_pset(acc, session, info, n, pset_len, pset_name));
    fn MPI_Session_get_pset_info / PMPI_Session_get_pset_info(session: c_int, pset_name: *const c_char, info: *mut Info) => |acc| crate::session::on_session(acc, session, |acc| crate::session::get_pset_info(acc, session, pset_name, info));
    fn MPI_Session_get_info / PMPI_Session_get_info(session: c_int, info_used: *mut Info) => |acc| crate::session::on_session(acc, session, |acc| crate::session::get_info(acc, session, info_used));
    fn MPI_Group_from_session_pset / PMPI_Group_from_session_pset(session: c_int, pset_name: *const c_char, newgroup: *mut Group) => |acc| crate::session::on_session(acc, session, |acc| crate::session::group_from_pset(acc, session, pset_name, newgroup));
    fn MPI_Session_set_errhandler / PMPI_Session_set_errhandler(session: c_int, errhandler: Errhandler) => |acc| crate::session::on_session(acc, session, |acc| crate::session::set_errhandler(acc, session, errhandler));
    fn MPI_Session_get_errhandler / PMPI_Session_get_errhandler(session: c_int, errhandler: *mut Errhandler) => |acc| crate::session::on_session(acc, session, |acc| crate::session::get_errhandler(acc, session, errhandler));
    fn MPI_Session_call_errhandler / PMPI_Session_call_errhandler(session: c_int, errorcode: c_int) => |acc| crate::session::call_errhandler(acc, session, errorcode);
    fn MPI_Session_create_errhandler / PMPI_Session_create_errhandler(session_errhandler_fn: Option<crate::errh::ErrFn>, errhandler: *mut Errhandler) => |acc| crate::errh::create(acc, session_errhandler_fn, errhandler);
    fn MPI_Comm_create_from_group / PMPI_Comm_create_from_group(group: Group, stringtag: *const c_char, info: Info, errhandler: Errhandler, newcomm: *mut Comm) => |acc| comm::from_group::create_from_group(acc, group, stringtag, info, errhandler, newcomm);
    fn MPI_Intercomm_create_from_groups / PMPI_Intercomm_create_from_groups(local_group: Group, local_leader: c_int, remote_group: Group, remote_leader: c_int, stringtag: *const c_char, info: Info, errhandler: Errhandler, newintercomm: *mut Comm) => |acc| comm::from_group::intercomm_create_from_groups(acc, local_group, local_leader, remote_group, remote_leader, stringtag, info, errhandler, newintercomm);
    fn MPI_Comm_set_info / PMPI_Comm_set_info(comm: Comm, info: Info) => |acc| comm::info::set_info(acc, comm, info);
    fn MPI_Comm_get_info / PMPI_Comm_get_info(comm: Comm, info_used: *mut Info) => |acc| comm::info::get_info(acc, comm, info_used);
    fn MPI_Comm_dup_with_info / PMPI_Comm_dup_with_info(comm: Comm, info: Info, newcomm: *mut Comm) => |acc| comm::info::dup_with_info(acc, comm, info, newcomm);
    fn MPI_Comm_idup_with_info / PMPI_Comm_idup_with_info(comm: Comm, info: Info, newcomm: *mut Comm, request: *mut Request) => |acc| comm::info::idup_with_info(acc, comm, info, newcomm, request);
}

// Temporary (until the generated table): info, errors, ABI, hardware, topology mapping, MPI_T.
mpi! {
    fn MPI_Info_create_env / PMPI_Info_create_env(_argc: c_int, _argv: *mut *mut c_char, info: *mut Info) => |acc| crate::info::info_create_env(acc, info);
    fn MPI_Info_get_string / PMPI_Info_get_string(info: Info, key: *const c_char, buflen: *mut c_int, value: *mut c_char, flag: *mut c_int) => |acc| crate::info::info_get_string(acc, info, key, buflen, value, flag);
    fn MPI_Remove_error_class / PMPI_Remove_error_class(errorclass: c_int) => |acc| crate::error::remove_error_class(acc, errorclass);
    fn MPI_Remove_error_code / PMPI_Remove_error_code(errorcode: c_int) => |acc| crate::error::remove_error_code(acc, errorcode);
    fn MPI_Remove_error_string / PMPI_Remove_error_string(errorcode: c_int) => |acc| crate::error::remove_error_string(acc, errorcode);
    fn MPI_Abi_get_version / PMPI_Abi_get_version(abi_major: *mut c_int, abi_minor: *mut c_int) => |_acc| env::abi_get_version(abi_major, abi_minor);
    fn MPI_Abi_get_info / PMPI_Abi_get_info(info: *mut Info) => |acc| env::abi_get_info(acc, info);
    fn MPI_Get_hw_resource_info / PMPI_Get_hw_resource_info(hw_info: *mut Info) => |acc| env::get_hw_resource_info(acc, hw_info);
    fn MPI_Cart_map / PMPI_Cart_map(comm: Comm, ndims: c_int, dims: *const c_int, periods: *const c_int, newrank: *mut c_int) => |acc| crate::topo::cart_map(acc, comm, ndims, dims, periods, newrank);
    fn MPI_Graph_map / PMPI_Graph_map(comm: Comm, nnodes: c_int, index: *const c_int, edges: *const c_int, newrank: *mut c_int) => |acc| crate::topo::graph_map(acc, comm, nnodes, index, edges, newrank);
    fn MPI_T_init_thread / PMPI_T_init_thread(required: c_int, provided: *mut c_int) => |_acc| crate::tools::init_thread(required, provided);
    fn MPI_T_finalize / PMPI_T_finalize() => |_acc| crate::tools::finalize();
    fn MPI_T_cvar_get_num / PMPI_T_cvar_get_num(num_cvar: *mut c_int) => |_acc| crate::tools::get_num(num_cvar);
    fn MPI_T_pvar_get_num / PMPI_T_pvar_get_num(num_pvar: *mut c_int) => |_acc| crate::tools::get_num(num_pvar);
    fn MPI_T_category_get_num / PMPI_T_category_get_num(num_cat: *mut c_int) => |_acc| crate::tools::get_num(num_cat);
    fn MPI_T_category_changed / PMPI_T_category_changed(update_number: *mut c_int) => |_acc| crate::tools::get_num(update_number);
    fn MPI_T_event_get_num / PMPI_T_event_get_num(num_events: *mut c_int) => |_acc| crate::tools::get_num(num_events);
    fn MPI_T_source_get_num / PMPI_T_source_get_num(num_sources: *mut c_int) => |_acc| crate::tools::get_num(num_sources);
    fn MPI_T_cvar_get_info / PMPI_T_cvar_get_info(cvar_index: c_int, _name: *mut c_char, _name_len: *mut c_int, _verbosity: *mut c_int, _datatype: *mut Datatype, _enumtype: *mut *mut c_void, _desc: *mut c_char, _desc_len: *mut c_int, _bind: *mut c_int, _scope: *mut c_int) => |_acc| crate::tools::by_index(cvar_index);
    fn MPI_T_pvar_get_info / PMPI_T_pvar_get_info(pvar_index: c_int, _name: *mut c_char, _name_len: *mut c_int, _verbosity: *mut c_int, _var_class: *mut c_int, _datatype: *mut Datatype, _enumtype: *mut *mut c_void, _desc: *mut c_char, _desc_len: *mut c_int, _bind: *mut c_int, _readonly: *mut c_int, _continuous: *mut c_int, _atomic: *mut c_int) => |_acc| crate::tools::by_index(pvar_index);
    fn MPI_T_category_get_info / PMPI_T_category_get_info(cat_index: c_int, _name: *mut c_char, _name_len: *mut c_int, _desc: *mut c_char, _desc_len: *mut c_int, _num_cvars: *mut c_int, _num_pvars: *mut c_int, _num_categories: *mut c_int) => |_acc| crate::tools::by_index(cat_index);
    fn MPI_T_category_get_cvars / PMPI_T_category_get_cvars(cat_index: c_int, _len: c_int, _indices: *mut c_int) => |_acc| crate::tools::by_index(cat_index);
    fn MPI_T_category_get_pvars / PMPI_T_category_get_pvars(cat_index: c_int, _len: c_int, _indices: *mut c_int) => |_acc| crate::tools::by_index(cat_index);
    fn MPI_T_category_get_categories / PMPI_T_category_get_categories(cat_index: c_int, _len: c_int, _indices: *mut c_int) => |_acc| crate::tools::by_index(cat_index);
    fn MPI_T_category_get_events / PMPI_T_category_get_events(cat_index: c_int, _len: c_int, _indices: *mut c_int) => |_acc| crate::tools::by_index(cat_index);
    fn MPI_T_category_get_num_events / PMPI_T_category_get_num_events(cat_index: c_int, _num_events: *mut c_int) => |_acc| crate::tools::by_index(cat_index);
    fn MPI_T_cvar_get_index / PMPI_T_cvar_get_index(name: *const c_char, _cvar_index: *mut c_int) => |_acc| crate::tools::by_name(name);
    fn MPI_T_pvar_get_index / PMPI_T_pvar_get_index(name: *const c_char, _var_class: c_int, _pvar_index: *mut c_int) => |_acc| crate::tools::by_name(name);
    fn MPI_T_category_get_index / PMPI_T_category_get_index(name: *const c_char, _cat_index: *mut c_int) => |_acc| crate::tools::by_name(name);
    fn MPI_T_event_get_index / PMPI_T_event_get_index(name: *const c_char, _event_index: *mut c_int) => |_acc| crate::tools::by_name(name);
    fn MPI_T_cvar_handle_alloc / PMPI_T_cvar_handle_alloc(cvar_index: c_int, _obj_handle: *mut c_void, _handle: *mut *mut c_void, _count: *mut c_int) => |_acc| crate::tools::by_index(cvar_index);
    fn MPI_T_cvar_handle_free / PMPI_T_cvar_handle_free(handle: *mut *mut c_void) => |_acc| crate::tools::by_handle(handle.cast());
    fn MPI_T_cvar_read / PMPI_T_cvar_read(handle: *mut c_void, _buf: *mut c_void) => |_acc| crate::tools::by_handle(handle);
    fn MPI_T_cvar_write / PMPI_T_cvar_write(handle: *mut c_void, _buf: *const c_void) => |_acc| crate::tools::by_handle(handle);
    fn MPI_T_enum_get_info / PMPI_T_enum_get_info(enumtype: *mut c_void, _num: *mut c_int, _name: *mut c_char, _name_len: *mut c_int) => |_acc| crate::tools::by_handle(enumtype);
    fn MPI_T_enum_get_item / PMPI_T_enum_get_item(enumtype: *mut c_void, _indx: c_int, _value: *mut c_int, _name: *mut c_char, _name_len: *mut c_int) => |_acc| crate::tools::by_handle(enumtype);
    fn MPI_T_pvar_session_create / PMPI_T_pvar_session_create(session: *mut *mut c_void) => |_acc| crate::tools::pvar_session_create(session);
    fn MPI_T_pvar_session_free / PMPI_T_pvar_session_free(session: *mut *mut c_void) => |_acc| crate::tools::pvar_session_free(session);
    fn MPI_T_pvar_handle_alloc / PMPI_T_pvar_handle_alloc(session: *mut c_void, pvar_index: c_int, _obj_handle: *mut c_void, _handle: *mut *mut c_void, _count: *mut c_int) => |_acc| crate::tools::pvar_handle_alloc(session, pvar_index);
    fn MPI_T_pvar_handle_free / PMPI_T_pvar_handle_free(session: *mut c_void, handle: *mut *mut c_void) => |_acc| crate::tools::pvar_handle_free(session, handle);
    fn MPI_T_pvar_start / PMPI_T_pvar_start(session: *mut c_void, handle: *mut c_void) => |_acc| crate::tools::pvar(session, handle, true);
    fn MPI_T_pvar_stop / PMPI_T_pvar_stop(session: *mut c_void, handle: *mut c_void) => |_acc| crate::tools::pvar(session, handle, true);
    fn MPI_T_pvar_reset / PMPI_T_pvar_reset(session: *mut c_void, handle: *mut c_void) => |_acc| crate::tools::pvar(session, handle, true);
    fn MPI_T_pvar_read / PMPI_T_pvar_read(session: *mut c_void, handle: *mut c_void, _buf: *mut c_void) => |_acc| crate::tools::pvar(session, handle, false);
    fn MPI_T_pvar_readreset / PMPI_T_pvar_readreset(session: *mut c_void, handle: *mut c_void, _buf: *mut c_void) => |_acc| crate::tools::pvar(session, handle, false);
    fn MPI_T_pvar_write / PMPI_T_pvar_write(session: *mut c_void, handle: *mut c_void, _buf: *const c_void) => |_acc| crate::tools::pvar(session, handle, false);
    fn MPI_T_event_get_info / PMPI_T_event_get_info(event_index: c_int, _name: *mut c_char, _name_len: *mut c_int, _verbosity: *mut c_int, _array_of_datatypes: *mut Datatype, _array_of_displacements: *mut Aint, _num_elements: *mut c_int, _enumtype: *mut *mut c_void, _info: *mut Info, _desc: *mut c_char, _desc_len: *mut c_int, _bind: *mut c_int) => |_acc| crate::tools::by_index(event_index);
    fn MPI_T_event_handle_alloc / PMPI_T_event_handle_alloc(event_index: c_int, _obj_handle: *mut c_void, _info: Info, _event_registration: *mut *mut c_void) => |_acc| crate::tools::by_index(event_index);
    fn MPI_T_event_handle_free / PMPI_T_event_handle_free(event_registration: *mut c_void, _user_data: *mut c_void, _free_cb_function: *mut c_void) => |_acc| crate::tools::by_handle(event_registration);
    fn MPI_T_event_handle_get_info / PMPI_T_event_handle_get_info(event_registration: *mut c_void, _info_used: *mut Info) => |_acc| crate::tools::by_handle(event_registration);
    fn MPI_T_event_handle_set_info / PMPI_T_event_handle_set_info(event_registration: *mut c_void, _info: Info) => |_acc| crate::tools::by_handle(event_registration);
    fn MPI_T_event_register_callback / PMPI_T_event_register_callback(event_registration: *mut c_void, _cb_safety: c_int, _info: Info, _user_data: *mut c_void, _event_cb_function: *mut c_void) => |_acc| crate::tools::by_handle(event_registration);
    fn MPI_T_event_callback_get_info / PMPI_T_event_callback_get_info(event_registration: *mut c_void, _cb_safety: c_int, _info_used: *mut Info) => |_acc| crate::tools::by_handle(event_registration);
    fn MPI_T_event_callback_set_info / PMPI_T_event_callback_set_info(event_registration: *mut c_void, _cb_safety: c_int, _info: Info) => |_acc| crate::tools::by_handle(event_registration);
    fn MPI_T_event_set_dropped_handler / PMPI_T_event_set_dropped_handler(event_registration: *mut c_void, _dropped_cb_function: *mut c_void) => |_acc| crate::tools::by_handle(event_registration);
    fn MPI_T_event_read / PMPI_T_event_read(event_instance: *mut c_void, _element_index: c_int, _buffer: *mut c_void) => |_acc| crate::tools::by_handle(event_instance);
    fn MPI_T_event_copy / PMPI_T_event_copy(event_instance: *mut c_void, _buffer: *mut c_void) => |_acc| crate::tools::by_handle(event_instance);
    fn MPI_T_event_get_timestamp / PMPI_T_event_get_timestamp(event_instance: *mut c_void, _event_timestamp: *mut Count) => |_acc| crate::tools::by_handle(event_instance);
    fn MPI_T_event_get_source / PMPI_T_event_get_source(event_instance: *mut c_void, _source_index: *mut c_int) => |_acc| crate::tools::by_handle(event_instance);
    fn MPI_T_source_get_info / PMPI_T_source_get_info(source_index: c_int, _name: *mut c_char, _name_len: *mut c_int, _desc: *mut c_char, _desc_len: *mut c_int, _ordering: *mut c_int, _ticks_per_second: *mut Count, _max_ticks: *mut Count, _info: *mut Info) => |_acc| crate::tools::by_index(source_index);
    fn MPI_T_source_get_timestamp / PMPI_T_source_get_timestamp(source_index: c_int, _timestamp: *mut Count) => |_acc| crate::tools::by_index(source_index);
}
