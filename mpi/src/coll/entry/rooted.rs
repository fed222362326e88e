//! The rooted collectives' entries: broadcast, reduce, gatherv, scatterv (gather and scatter
//! are with the other one-block-per-member operations in `whole.rs`), each in its
//! blocking, non-blocking and persistent forms, with `int` or `MPI_Count` counts (see the
//! module above).

use std::ffi::{c_int, c_void};

use super::{
    Counts, Disps, How, check_count, check_reduction, check_root, check_type, comm_index, comm_of, fit, persist, ptr,
};
use crate::abi::{self, Count, Datatype};
use crate::coll::{self, nbc, vector};
use crate::error::Res;
use crate::state::Access;

/// True if this rank reads the root-only arguments (the root of an intracommunicator,
/// `MPI_ROOT` on an intercommunicator).
fn at_root(acc: &mut Access, comm: abi::Comm, root: c_int) -> bool {
    comm_of(acc, comm).is_ok_and(|(_, c)| if c.local.is_some() { root == abi::ROOT } else { c.rank as c_int == root })
}

/// The length of a root's count and displacement arrays: the (remote) group's size.
fn group_len(acc: &mut Access, comm: abi::Comm) -> Res<usize> {
    comm_of(acc, comm).map(|(_, c)| c.size as usize)
}

/// `MPI_Bcast`, `MPI_Ibcast`, `MPI_Bcast_init` and their `_c` forms.
///
/// # Safety
/// MPI's contract on the buffer and the request.
pub unsafe fn bcast(
    acc: &mut Access,
    buffer: *mut c_void,
    count: Count,
    datatype: Datatype,
    root: c_int,
    comm: abi::Comm,
    how: How,
) -> Res<()> {
    let ci = comm_index(acc, comm);
    let one = [(count, datatype)];
    match how {
        How::Persistent(request) => {
            let check = |acc: &mut Access, c: &coll::Comm, ci| {
                check_root(root, c, ci)?;
                check_count(count, ci)?;
                check_type(acc, datatype, ci)
            };
            // SAFETY: MPI's contract, at each start.
            let start = move |acc: &mut Access, r| unsafe {
                bcast(acc, buffer, count, datatype, root, comm, How::Nonblocking(r))
            };
            // SAFETY: the caller's contract on `request`.
            unsafe { persist(acc, comm, request, check, start) }
        }
        // SAFETY: the caller's contract.
        How::Blocking => fit(acc, ci, &one, |acc, a| unsafe { coll::bcast(acc, buffer, a[0].0, a[0].1, root, comm) }),
        How::Nonblocking(r) => {
            // SAFETY: the caller's contract.
            fit(acc, ci, &one, |acc, a| unsafe { nbc::ibcast(acc, buffer, a[0].0, a[0].1, root, comm, r) })
        }
    }
}

/// `MPI_Reduce`, `MPI_Ireduce`, `MPI_Reduce_init` and their `_c` forms.
///
/// # Safety
/// MPI's contract on the buffers and the request.
#[allow(clippy::too_many_arguments)]
pub unsafe fn reduce(
    acc: &mut Access,
    sendbuf: *const c_void,
    recvbuf: *mut c_void,
    count: Count,
    datatype: Datatype,
    op: abi::Op,
    root: c_int,
    comm: abi::Comm,
    how: How,
) -> Res<()> {
    let ci = comm_index(acc, comm);
    let one = [(count, datatype)];
    match how {
        How::Persistent(request) => {
            let check = |acc: &mut Access, c: &coll::Comm, ci| {
                check_root(root, c, ci)?;
                check_reduction(acc, count, datatype, op, ci)
            };
            // SAFETY: MPI's contract, at each start.
            let start = move |acc: &mut Access, r| unsafe {
                reduce(acc, sendbuf, recvbuf, count, datatype, op, root, comm, How::Nonblocking(r))
            };
            // SAFETY: the caller's contract on `request`.
            unsafe { persist(acc, comm, request, check, start) }
        }
        How::Blocking => fit(acc, ci, &one, |acc, a| {
            // SAFETY: the caller's contract.
            unsafe { coll::reduce(acc, sendbuf, recvbuf, a[0].0, a[0].1, op, root, comm) }
        }),
        How::Nonblocking(r) => fit(acc, ci, &one, |acc, a| {
            // SAFETY: the caller's contract.
            unsafe { nbc::ireduce(acc, sendbuf, recvbuf, a[0].0, a[0].1, op, Some(root), comm, r) }
        }),
    }
}

/// `MPI_Gatherv`, `MPI_Igatherv`, `MPI_Gatherv_init` and their `_c` forms.
///
/// # Safety
/// MPI's contract on the buffers, the arrays (read at the root only) and the request.
#[allow(clippy::too_many_arguments)]
pub unsafe fn gatherv(
    acc: &mut Access,
    sendbuf: *const c_void,
    sendcount: Count,
    sendtype: Datatype,
    recvbuf: *mut c_void,
    recvcounts: Counts,
    displs: Disps,
    recvtype: Datatype,
    root: c_int,
    comm: abi::Comm,
    how: How,
) -> Res<()> {
    let ci = comm_index(acc, comm);
    let n = group_len(acc, comm)?;
    let (counts, disps) = if at_root(acc, comm, root) {
        // SAFETY: MPI's contract: the root's arrays hold a value per member.
        unsafe { (super::counts(recvcounts, n, ci)?, super::disps(displs, n, ci)?) }
    } else {
        (None, None)
    };
    let one = [(sendcount, sendtype)];
    match how {
        How::Persistent(request) => {
            let check = |acc: &mut Access, c: &coll::Comm, ci| {
                check_root(root, c, ci)?;
                check_count(sendcount, ci)?;
                check_type(acc, sendtype, ci)
            };
            let start = move |acc: &mut Access, r| {
                let (rc, rd) = (Counts::Int(ptr(&counts)), Disps::Int(ptr(&disps)));
                // SAFETY: MPI's contract, at each start; the arrays are the copies made at init.
                unsafe {
                    gatherv(
                        acc,
                        sendbuf,
                        sendcount,
                        sendtype,
                        recvbuf,
                        rc,
                        rd,
                        recvtype,
                        root,
                        comm,
                        How::Nonblocking(r),
                    )
                }
            };
            // SAFETY: the caller's contract on `request`.
            unsafe { persist(acc, comm, request, check, start) }
        }
        How::Blocking => fit(acc, ci, &one, |acc, a| {
            let (rc, rd) = (ptr(&counts), ptr(&disps));
            // SAFETY: the caller's contract.
            unsafe { vector::gatherv(acc, sendbuf, a[0].0, a[0].1, recvbuf, rc, rd, recvtype, root, comm) }
        }),
        How::Nonblocking(r) => fit(acc, ci, &one, |acc, a| {
            let null = std::ptr::null();
            let send = (sendbuf, a[0].0, null, null, a[0].1, None);
            let recv = (recvbuf, 0, ptr(&counts), ptr(&disps), recvtype, None);
            // SAFETY: the caller's contract.
            unsafe { nbc::iblocks(acc, nbc::Shape::Gather, send, recv, false, Some(root), comm, r) }
        }),
    }
}

/// `MPI_Scatterv`, `MPI_Iscatterv`, `MPI_Scatterv_init` and their `_c` forms.
///
/// # Safety
/// MPI's contract on the buffers, the arrays (read at the root only) and the request.
#[allow(clippy::too_many_arguments)]
pub unsafe fn scatterv(
    acc: &mut Access,
    sendbuf: *const c_void,
    sendcounts: Counts,
    displs: Disps,
    sendtype: Datatype,
    recvbuf: *mut c_void,
    recvcount: Count,
    recvtype: Datatype,
    root: c_int,
    comm: abi::Comm,
    how: How,
) -> Res<()> {
    let ci = comm_index(acc, comm);
    let n = group_len(acc, comm)?;
    let (counts, disps) = if at_root(acc, comm, root) {
        // SAFETY: MPI's contract: the root's arrays hold a value per member.
        unsafe { (super::counts(sendcounts, n, ci)?, super::disps(displs, n, ci)?) }
    } else {
        (None, None)
    };
    let one = [(recvcount, recvtype)];
    match how {
        How::Persistent(request) => {
            let check = |acc: &mut Access, c: &coll::Comm, ci| {
                check_root(root, c, ci)?;
                check_count(recvcount, ci)?;
                check_type(acc, recvtype, ci)
            };
            let start = move |acc: &mut Access, r| {
                let (sc, sd) = (Counts::Int(ptr(&counts)), Disps::Int(ptr(&disps)));
                // SAFETY: MPI's contract, at each start; the arrays are the copies made at init.
                unsafe {
                    scatterv(
                        acc,
                        sendbuf,
                        sc,
                        sd,
                        sendtype,
                        recvbuf,
                        recvcount,
                        recvtype,
                        root,
                        comm,
                        How::Nonblocking(r),
                    )
                }
            };
            // SAFETY: the caller's contract on `request`.
            unsafe { persist(acc, comm, request, check, start) }
        }
        How::Blocking => fit(acc, ci, &one, |acc, a| {
            let (sc, sd) = (ptr(&counts), ptr(&disps));
            // SAFETY: the caller's contract.
            unsafe { vector::scatterv(acc, sendbuf, sc, sd, sendtype, recvbuf, a[0].0, a[0].1, root, comm) }
        }),
        How::Nonblocking(r) => fit(acc, ci, &one, |acc, a| {
            let null = std::ptr::null();
            let send = (sendbuf, 0, ptr(&counts), ptr(&disps), sendtype, None);
            let recv = (recvbuf, a[0].0, null, null, a[0].1, None);
            // SAFETY: the caller's contract.
            unsafe { nbc::iblocks(acc, nbc::Shape::Scatter, send, recv, false, Some(root), comm, r) }
        }),
    }
}
