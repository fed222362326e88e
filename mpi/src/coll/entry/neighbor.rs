//! The neighbourhood collectives' entries: `MPI_Neighbor_allgather(v)` and
//! `MPI_Neighbor_alltoall(v/w)`, each in its blocking, non-blocking and persistent forms, with
//! `int` or `MPI_Count` counts (see the module above). The arrays have a value per in-neighbour
//! (receive side) or out-neighbour (send side).

use std::ffi::c_void;

use super::{
    Args, Counts, Disps, How, Ints, Side as Single, WSide, check_count, check_type, comm_index, comm_of, fit, opt_ptr,
    persist, ptr,
};
use crate::abi::{self, Aint, Count, Datatype};
use crate::coll::vector::{Displs, Side};
use crate::coll::{self, nbc};
use crate::error::Res;
use crate::state::Access;

/// The numbers of in- and out-neighbours of this rank in `comm`'s topology.
fn degrees(acc: &mut Access, comm: abi::Comm) -> Res<(usize, usize)> {
    let (ci, c) = comm_of(acc, comm)?;
    let (ins, outs) = crate::topo::neighbour_lists(&c, ci)?;
    Ok((ins.len(), outs.len()))
}

/// Runs the neighbourhood collective (blocking or not) on the decoded sides.
///
/// # Safety
/// MPI's contract on the buffers and the request.
unsafe fn run(
    acc: &mut Access,
    alltoall: bool,
    send: (*const c_void, Side, Datatype),
    recv: (*mut c_void, Side, Datatype),
    comm: abi::Comm,
    how: How,
) -> Res<()> {
    let request = match how {
        How::Nonblocking(r) => Some(r),
        _ => None,
    };
    // SAFETY: the caller's contract.
    unsafe { nbc::neighbor(acc, alltoall, send, recv, comm, request) }
}

/// `MPI_Neighbor_allgather`, `MPI_Neighbor_alltoall` (`alltoall`) and their forms.
///
/// # Safety
/// MPI's contract on the buffers and the request.
#[allow(clippy::too_many_arguments)]
pub unsafe fn neighbor_blocks(
    acc: &mut Access,
    alltoall: bool,
    sendbuf: *const c_void,
    sendcount: Count,
    sendtype: Datatype,
    recvbuf: *mut c_void,
    recvcount: Count,
    recvtype: Datatype,
    comm: abi::Comm,
    how: How,
) -> Res<()> {
    let ci = comm_index(acc, comm);
    if let How::Persistent(request) = how {
        let check = |acc: &mut Access, c: &coll::Comm, ci| {
            crate::topo::neighbour_lists(c, ci)?;
            check_count(sendcount, ci)?;
            check_count(recvcount, ci)?;
            check_type(acc, sendtype, ci)?;
            check_type(acc, recvtype, ci)
        };
        let shape = if alltoall { nbc::Shape::Alltoall } else { nbc::Shape::Allgather };
        let (send, recv) = ((sendbuf as usize, sendcount, sendtype), (recvbuf as usize, recvcount, recvtype));
        let args = Args::blocks(shape, true, send, recv, None, comm);
        // SAFETY: the caller's contract on `request`; MPI's on the buffers, at each start.
        return unsafe { persist(acc, request, check, args) };
    }
    fit(acc, ci, &[(sendcount, sendtype), (recvcount, recvtype)], |acc, a| {
        let s = if alltoall { Side::Regular(a[0].0) } else { Side::One(a[0].0) };
        // SAFETY: the caller's contract.
        unsafe { run(acc, alltoall, (sendbuf, s, a[0].1), (recvbuf, Side::Regular(a[1].0), a[1].1), comm, how) }
    })
}

/// `MPI_Neighbor_allgatherv` and its forms.
///
/// # Safety
/// MPI's contract on the buffers, the arrays and the request.
#[allow(clippy::too_many_arguments)]
pub unsafe fn neighbor_allgatherv(
    acc: &mut Access,
    sendbuf: *const c_void,
    sendcount: Count,
    sendtype: Datatype,
    recvbuf: *mut c_void,
    recvcounts: Counts,
    displs: Disps,
    recvtype: Datatype,
    comm: abi::Comm,
    how: How,
) -> Res<()> {
    let ci = comm_index(acc, comm);
    let (ins, _) = degrees(acc, comm)?;
    // SAFETY: MPI's contract: a value per in-neighbour.
    let (rc, rd) = unsafe { (super::counts(recvcounts, ins, ci)?, super::disps(displs, ins, ci)?) };
    if let How::Persistent(request) = how {
        let check = |acc: &mut Access, _: &coll::Comm, ci| {
            check_count(sendcount, ci)?;
            check_type(acc, sendtype, ci)?;
            check_type(acc, recvtype, ci)
        };
        let send = Single { buf: sendbuf as usize, count: sendcount, counts: None, displs: None, datatype: sendtype };
        let recv = Single { buf: recvbuf as usize, count: 0, counts: rc, displs: rd, datatype: recvtype };
        let args = Args::Vector { shape: nbc::Shape::Allgather, neighbour: true, send, recv, root: None, comm };
        // SAFETY: the caller's contract on `request`; MPI's on the buffers, at each start.
        return unsafe { persist(acc, request, check, args) };
    }
    fit(acc, ci, &[(sendcount, sendtype)], |acc, a| {
        let recv = (recvbuf, Side::V(ptr(&rc), ptr(&rd)), recvtype);
        // SAFETY: the caller's contract.
        unsafe { run(acc, false, (sendbuf, Side::One(a[0].0), a[0].1), recv, comm, how) }
    })
}

/// `MPI_Neighbor_alltoallv` and its forms.
///
/// # Safety
/// MPI's contract on the buffers, the arrays and the request.
#[allow(clippy::too_many_arguments)]
pub unsafe fn neighbor_alltoallv(
    acc: &mut Access,
    sendbuf: *const c_void,
    sendcounts: Counts,
    sdispls: Disps,
    sendtype: Datatype,
    recvbuf: *mut c_void,
    recvcounts: Counts,
    rdispls: Disps,
    recvtype: Datatype,
    comm: abi::Comm,
    how: How,
) -> Res<()> {
    let ci = comm_index(acc, comm);
    let (ins, outs) = degrees(acc, comm)?;
    // SAFETY: MPI's contract: a value per out- and in-neighbour.
    let (sc, sd, rc, rd): (Ints, Ints, Ints, Ints) = unsafe {
        (
            super::counts(sendcounts, outs, ci)?,
            super::disps(sdispls, outs, ci)?,
            super::counts(recvcounts, ins, ci)?,
            super::disps(rdispls, ins, ci)?,
        )
    };
    if let How::Persistent(request) = how {
        let check = |acc: &mut Access, _: &coll::Comm, ci| {
            check_type(acc, sendtype, ci)?;
            check_type(acc, recvtype, ci)
        };
        let send = Single { buf: sendbuf as usize, count: 0, counts: sc, displs: sd, datatype: sendtype };
        let recv = Single { buf: recvbuf as usize, count: 0, counts: rc, displs: rd, datatype: recvtype };
        let args = Args::Vector { shape: nbc::Shape::Alltoall, neighbour: true, send, recv, root: None, comm };
        // SAFETY: the caller's contract on `request`; MPI's on the buffers, at each start.
        return unsafe { persist(acc, request, check, args) };
    }
    let send = (sendbuf, Side::V(ptr(&sc), ptr(&sd)), sendtype);
    let recv = (recvbuf, Side::V(ptr(&rc), ptr(&rd)), recvtype);
    // SAFETY: the caller's contract.
    unsafe { run(acc, true, send, recv, comm, how) }
}

/// Reads `n` byte displacements (`MPI_Aint`; null stays empty).
///
/// # Safety
/// A non-null array holds `n` values.
unsafe fn aints(p: *const Aint, n: usize) -> Option<Vec<Aint>> {
    // SAFETY: the caller's contract.
    (!p.is_null()).then(|| unsafe { std::slice::from_raw_parts(p, n) }.to_vec())
}

/// `MPI_Neighbor_alltoallw` and its forms (byte displacements are `MPI_Aint` in both widths).
///
/// # Safety
/// MPI's contract on the buffers, the arrays and the request.
#[allow(clippy::too_many_arguments)]
pub unsafe fn neighbor_alltoallw(
    acc: &mut Access,
    sendbuf: *const c_void,
    sendcounts: Counts,
    sdispls: *const Aint,
    sendtypes: *const Datatype,
    recvbuf: *mut c_void,
    recvcounts: Counts,
    rdispls: *const Aint,
    recvtypes: *const Datatype,
    comm: abi::Comm,
    how: How,
) -> Res<()> {
    let ci = comm_index(acc, comm);
    let (ins, outs) = degrees(acc, comm)?;
    // SAFETY: MPI's contract: a value per out- and in-neighbour.
    let (sc, sd, st, rc, rd, rt) = unsafe {
        let t = |p: *const Datatype, n: usize| (!p.is_null()).then(|| std::slice::from_raw_parts(p, n).to_vec());
        (
            super::counts(sendcounts, outs, ci)?,
            aints(sdispls, outs),
            t(sendtypes, outs),
            super::counts(recvcounts, ins, ci)?,
            aints(rdispls, ins),
            t(recvtypes, ins),
        )
    };
    if let How::Persistent(request) = how {
        let send = WSide { buf: sendbuf as usize, counts: sc, displs: sd, types: st };
        let recv = WSide { buf: recvbuf as usize, counts: rc, displs: rd, types: rt };
        let args = Args::W { neighbour: true, send, recv, comm };
        // SAFETY: the caller's contract on `request`; MPI's on the buffers, at each start.
        return unsafe { persist(acc, request, |_, _, _| Ok(()), args) };
    }
    let send = (sendbuf, Side::W(ptr(&sc), Displs::Aint(opt_ptr(&sd)), opt_ptr(&st)), 0);
    let recv = (recvbuf, Side::W(ptr(&rc), Displs::Aint(opt_ptr(&rd)), opt_ptr(&rt)), 0);
    // SAFETY: the caller's contract.
    unsafe { run(acc, true, send, recv, comm, how) }
}
