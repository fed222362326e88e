//! The entries of the collectives over the whole communicator: barrier, allreduce, gather,
//! scatter, allgather(v), alltoall(v/w), reduce_scatter(_block), scan and exscan, each in its blocking,
//! non-blocking and persistent forms, with `int` or `MPI_Count` counts (see the module above).

use std::ffi::{c_int, c_void};

use super::{
    Args, Counts, Disps, How, Ints, Reduction, Side, WSide, check_reduction, check_side, check_type, comm_index,
    comm_of, fit, in_place, member_side, no_in_place, opt_ptr, persist, ptr,
};
use crate::abi::{self, Aint, Count, Datatype};
use crate::coll::nbc::Shape;
use crate::coll::{self, nbc, vector};
use crate::error::Res;
use crate::state::Access;

/// The length of the count and displacement arrays: the (remote) group's size.
fn group_len(acc: &mut Access, comm: abi::Comm) -> Res<usize> {
    comm_of(acc, comm).map(|(_, c)| c.size as usize)
}

/// Copies `n` datatypes of an array (null stays empty).
///
/// # Safety
/// A non-null array holds `n` handles.
unsafe fn types(p: *const Datatype, n: usize) -> Option<Vec<Datatype>> {
    // SAFETY: the caller's contract.
    (!p.is_null()).then(|| unsafe { std::slice::from_raw_parts(p, n) }.to_vec())
}

/// `MPI_Barrier`, `MPI_Ibarrier` and `MPI_Barrier_init`.
///
/// # Safety
/// MPI's contract on the request.
pub unsafe fn barrier(acc: &mut Access, comm: abi::Comm, how: How) -> Res<()> {
    match how {
        How::Blocking => coll::barrier(acc, comm),
        // SAFETY: the caller's contract.
        How::Nonblocking(r) => unsafe { nbc::ibarrier(acc, comm, r) },
        How::Persistent(request) => {
            // SAFETY: the caller's contract on `request`.
            unsafe { persist(acc, request, |_, _, _| Ok(()), Args::Barrier { comm }) }
        }
    }
}

/// `MPI_Allreduce`, `MPI_Iallreduce`, `MPI_Allreduce_init` and their `_c` forms.
///
/// # Safety
/// MPI's contract on the buffers and the request.
#[allow(clippy::too_many_arguments)]
pub unsafe fn allreduce(
    acc: &mut Access,
    sendbuf: *const c_void,
    recvbuf: *mut c_void,
    count: Count,
    datatype: Datatype,
    op: abi::Op,
    comm: abi::Comm,
    how: How,
) -> Res<()> {
    let ci = comm_index(acc, comm);
    let one = [(count, datatype)];
    match how {
        How::Persistent(request) => {
            let check = |acc: &mut Access, c: &coll::Comm, ci| {
                no_in_place(c, None, &[], &[sendbuf, recvbuf.cast_const()], ci)?;
                check_reduction(acc, count, datatype, op, ci)
            };
            let (sendbuf, recvbuf) = (sendbuf as usize, recvbuf as usize);
            let args = Args::Reduction { kind: Reduction::All, sendbuf, recvbuf, count, datatype, op, comm };
            // SAFETY: the caller's contract on `request`; MPI's on the buffers, at each start.
            unsafe { persist(acc, request, check, args) }
        }
        How::Blocking => fit(acc, ci, &one, |acc, a| {
            // SAFETY: the caller's contract.
            unsafe { coll::allreduce(acc, sendbuf, recvbuf, a[0].0, a[0].1, op, comm) }
        }),
        How::Nonblocking(r) => fit(acc, ci, &one, |acc, a| {
            // SAFETY: the caller's contract.
            unsafe { nbc::ireduce(acc, sendbuf, recvbuf, a[0].0, a[0].1, op, None, comm, r) }
        }),
    }
}

/// The one-block-per-member operations by `shape`: `MPI_Gather` and `MPI_Scatter` (`root`
/// given), `MPI_Allgather` and `MPI_Alltoall`; their non-blocking and persistent forms and their
/// `_c` forms.
///
/// # Safety
/// MPI's contract on the buffers and the request.
#[allow(clippy::too_many_arguments)]
pub unsafe fn blocks(
    acc: &mut Access,
    shape: Shape,
    sendbuf: *const c_void,
    sendcount: Count,
    sendtype: Datatype,
    recvbuf: *mut c_void,
    recvcount: Count,
    recvtype: Datatype,
    root: Option<c_int>,
    comm: abi::Comm,
    how: How,
) -> Res<()> {
    let ci = comm_index(acc, comm);
    let sides = [(sendcount, sendtype), (recvcount, recvtype)];
    match how {
        How::Persistent(request) => {
            // The side every member uses (at the root of an intracommunicator, its own block,
            // ignored when in place), and the root's other side.
            let (send, recv) = (sendbuf, recvbuf.cast_const());
            let (mine, many, (count, dt)) =
                if shape == Shape::Gather { (send, recv, sides[0]) } else { (recv, send, sides[1]) };
            let check = |acc: &mut Access, c: &coll::Comm, ci| {
                if let Some(root) = root {
                    super::check_root(root, c, ci)?;
                    no_in_place(c, Some(root), &[many], &[mine], ci)?;
                    if !member_side(c, root) {
                        return Ok(());
                    }
                } else {
                    no_in_place(c, None, &[], &[send, recv], ci)?;
                }
                check_side(acc, mine, count, dt, ci)
            };
            let (send, recv) = ((sendbuf as usize, sendcount, sendtype), (recvbuf as usize, recvcount, recvtype));
            let args = Args::blocks(shape, false, send, recv, root, comm);
            // SAFETY: the caller's contract on `request`; MPI's on the buffers, at each start.
            unsafe { persist(acc, request, check, args) }
        }
        How::Blocking => fit(acc, ci, &sides, |acc, a| {
            let ((sc, st), (rc, rt)) = (a[0], a[1]);
            // SAFETY: the caller's contract.
            unsafe {
                match (shape, root) {
                    (Shape::Gather, Some(root)) => coll::gather(acc, sendbuf, sc, st, recvbuf, rc, rt, root, comm),
                    (Shape::Scatter, Some(root)) => coll::scatter(acc, sendbuf, sc, st, recvbuf, rc, rt, root, comm),
                    (Shape::Alltoall, _) => coll::alltoall(acc, sendbuf, sc, st, recvbuf, rc, rt, comm),
                    _ => coll::allgather(acc, sendbuf, sc, st, recvbuf, rc, rt, comm),
                }
            }
        }),
        How::Nonblocking(r) => fit(acc, ci, &sides, |acc, a| {
            let null = std::ptr::null();
            let send = (sendbuf, a[0].0, null, null, a[0].1, None);
            let recv = (recvbuf, a[1].0, null, null, a[1].1, None);
            // SAFETY: the caller's contract.
            unsafe { nbc::iblocks(acc, shape, send, recv, true, root, comm, r) }
        }),
    }
}

/// `MPI_Allgatherv`, `MPI_Iallgatherv`, `MPI_Allgatherv_init` and their `_c` forms.
///
/// # Safety
/// MPI's contract on the buffers, the arrays and the request.
#[allow(clippy::too_many_arguments)]
pub unsafe fn allgatherv(
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
    let n = group_len(acc, comm)?;
    // SAFETY: MPI's contract: a value per member.
    let (counts, disps) = unsafe { (super::counts(recvcounts, n, ci)?, super::disps(displs, n, ci)?) };
    let one = [(sendcount, sendtype)];
    match how {
        How::Persistent(request) => {
            let check = |acc: &mut Access, c: &coll::Comm, ci| {
                no_in_place(c, None, &[], &[sendbuf, recvbuf.cast_const()], ci)?;
                check_type(acc, recvtype, ci)
            };
            let send = Side { buf: sendbuf as usize, count: sendcount, counts: None, displs: None, datatype: sendtype };
            let recv = Side { buf: recvbuf as usize, count: 0, counts, displs: disps, datatype: recvtype };
            let args = Args::Vector { shape: nbc::Shape::Allgather, neighbour: false, send, recv, root: None, comm };
            // SAFETY: the caller's contract on `request`; MPI's on the buffers, at each start.
            unsafe { persist(acc, request, check, args) }
        }
        How::Blocking => fit(acc, ci, &one, |acc, a| {
            let (rc, rd) = (ptr(&counts), ptr(&disps));
            // SAFETY: the caller's contract.
            unsafe { vector::allgatherv(acc, sendbuf, a[0].0, a[0].1, recvbuf, rc, rd, recvtype, comm) }
        }),
        How::Nonblocking(r) => fit(acc, ci, &one, |acc, a| {
            let null = std::ptr::null();
            let send = (sendbuf, a[0].0, null, null, a[0].1, None);
            let recv = (recvbuf, 0, ptr(&counts), ptr(&disps), recvtype, None);
            // SAFETY: the caller's contract.
            unsafe { nbc::iblocks(acc, nbc::Shape::Allgather, send, recv, false, None, comm, r) }
        }),
    }
}

/// The four arrays of an all-to-all v- or w-form, decoded.
struct Vw {
    sc: Ints,
    sd: Ints,
    rc: Ints,
    rd: Ints,
}

impl Vw {
    /// # Safety
    /// MPI's contract: non-null arrays hold `n` values.
    unsafe fn of(s: (Counts, Disps), r: (Counts, Disps), n: usize, ci: Option<usize>) -> Res<Vw> {
        // SAFETY: the caller's contract.
        unsafe {
            Ok(Vw {
                sc: super::counts(s.0, n, ci)?,
                sd: super::disps(s.1, n, ci)?,
                rc: super::counts(r.0, n, ci)?,
                rd: super::disps(r.1, n, ci)?,
            })
        }
    }
}

/// `MPI_Alltoallv`, `MPI_Ialltoallv`, `MPI_Alltoallv_init` and their `_c` forms.
///
/// # Safety
/// MPI's contract on the buffers, the arrays and the request.
#[allow(clippy::too_many_arguments)]
pub unsafe fn alltoallv(
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
    let n = group_len(acc, comm)?;
    // SAFETY: MPI's contract: a value per member.
    let a = unsafe { Vw::of((sendcounts, sdispls), (recvcounts, rdispls), n, ci)? };
    match how {
        How::Persistent(request) => {
            let check = |acc: &mut Access, c: &coll::Comm, ci| {
                no_in_place(c, None, &[], &[sendbuf, recvbuf.cast_const()], ci)?;
                // In place, the send side is ignored.
                if !in_place(sendbuf) {
                    check_type(acc, sendtype, ci)?;
                }
                check_type(acc, recvtype, ci)
            };
            let send = Side { buf: sendbuf as usize, count: 0, counts: a.sc, displs: a.sd, datatype: sendtype };
            let recv = Side { buf: recvbuf as usize, count: 0, counts: a.rc, displs: a.rd, datatype: recvtype };
            let args = Args::Vector { shape: nbc::Shape::Alltoall, neighbour: false, send, recv, root: None, comm };
            // SAFETY: the caller's contract on `request`; MPI's on the buffers, at each start.
            unsafe { persist(acc, request, check, args) }
        }
        How::Blocking => {
            let (sc, sd, rc, rd) = (ptr(&a.sc), ptr(&a.sd), ptr(&a.rc), ptr(&a.rd));
            // SAFETY: the caller's contract.
            unsafe { vector::alltoallv(acc, sendbuf, sc, sd, sendtype, recvbuf, rc, rd, recvtype, comm) }
        }
        How::Nonblocking(r) => {
            let send = (sendbuf, 0, ptr(&a.sc), ptr(&a.sd), sendtype, None);
            let recv = (recvbuf, 0, ptr(&a.rc), ptr(&a.rd), recvtype, None);
            // SAFETY: the caller's contract.
            unsafe { nbc::iblocks(acc, nbc::Shape::Alltoall, send, recv, false, None, comm, r) }
        }
    }
}

/// `MPI_Alltoallw`, `MPI_Ialltoallw`, `MPI_Alltoallw_init` and their `_c` forms.
///
/// # Safety
/// MPI's contract on the buffers, the arrays and the request.
#[allow(clippy::too_many_arguments)]
pub unsafe fn alltoallw(
    acc: &mut Access,
    sendbuf: *const c_void,
    sendcounts: Counts,
    sdispls: Disps,
    sendtypes: *const Datatype,
    recvbuf: *mut c_void,
    recvcounts: Counts,
    rdispls: Disps,
    recvtypes: *const Datatype,
    comm: abi::Comm,
    how: How,
) -> Res<()> {
    let ci = comm_index(acc, comm);
    let n = group_len(acc, comm)?;
    // SAFETY: MPI's contract: a value per member.
    let a = unsafe { Vw::of((sendcounts, sdispls), (recvcounts, rdispls), n, ci)? };
    // SAFETY: MPI's contract: a datatype per member.
    let (st, rt) = unsafe { (types(sendtypes, n), types(recvtypes, n)) };
    match how {
        How::Persistent(request) => {
            let check =
                |_: &mut Access, c: &coll::Comm, ci| no_in_place(c, None, &[], &[sendbuf, recvbuf.cast_const()], ci);
            let wide = |d: Ints| d.map(|d| d.into_iter().map(Aint::from).collect());
            let send = WSide { buf: sendbuf as usize, counts: a.sc, displs: wide(a.sd), types: st };
            let recv = WSide { buf: recvbuf as usize, counts: a.rc, displs: wide(a.rd), types: rt };
            let args = Args::W { neighbour: false, send, recv, comm };
            // SAFETY: the caller's contract on `request`; MPI's on the buffers, at each start.
            unsafe { persist(acc, request, check, args) }
        }
        How::Blocking => {
            let (sc, sd, rc, rd) = (ptr(&a.sc), ptr(&a.sd), ptr(&a.rc), ptr(&a.rd));
            let (s, t) = (opt_ptr(&st), opt_ptr(&rt));
            // SAFETY: the caller's contract.
            unsafe { vector::alltoallw(acc, sendbuf, sc, sd, s, recvbuf, rc, rd, t, comm) }
        }
        How::Nonblocking(r) => {
            let send = (sendbuf, 0, ptr(&a.sc), ptr(&a.sd), 0, Some(opt_ptr(&st)));
            let recv = (recvbuf, 0, ptr(&a.rc), ptr(&a.rd), 0, Some(opt_ptr(&rt)));
            // SAFETY: the caller's contract.
            unsafe { nbc::iblocks(acc, nbc::Shape::Alltoall, send, recv, false, None, comm, r) }
        }
    }
}

/// `MPI_Reduce_scatter` (`recvcounts`) and `MPI_Reduce_scatter_block` (`block`: the count per
/// member), their non-blocking and persistent forms and their `_c` forms.
///
/// # Safety
/// MPI's contract on the buffers, the array and the request.
#[allow(clippy::too_many_arguments)]
pub unsafe fn reduce_scatter(
    acc: &mut Access,
    sendbuf: *const c_void,
    recvbuf: *mut c_void,
    recvcounts: Counts,
    block: Option<Count>,
    datatype: Datatype,
    op: abi::Op,
    comm: abi::Comm,
    how: How,
) -> Res<()> {
    let ci = comm_index(acc, comm);
    // On an intercommunicator the counts are the local group's.
    let n = comm_of(acc, comm).map(|(_, c)| c.local_size() as usize)?;
    // SAFETY: MPI's contract: a value per member.
    let counts = if block.is_none() { unsafe { super::counts(recvcounts, n, ci)? } } else { None };
    let one = [(block.unwrap_or(0), datatype)];
    match how {
        How::Persistent(request) => {
            let check = |acc: &mut Access, c: &coll::Comm, ci| {
                no_in_place(c, None, &[], &[sendbuf, recvbuf.cast_const()], ci)?;
                check_reduction(acc, block.unwrap_or(0), datatype, op, ci)
            };
            let (sendbuf, recvbuf) = (sendbuf as usize, recvbuf as usize);
            let (kind, count) = match block {
                Some(count) => (Reduction::ScatterBlock, count),
                None => (Reduction::Scatter(counts), 0),
            };
            let args = Args::Reduction { kind, sendbuf, recvbuf, count, datatype, op, comm };
            // SAFETY: the caller's contract on `request`; MPI's on the buffers, at each start.
            unsafe { persist(acc, request, check, args) }
        }
        How::Blocking => fit(acc, ci, &one, |acc, a| {
            let (rc, b, dt) =
                if block.is_some() { (std::ptr::null(), Some(a[0].0), a[0].1) } else { (ptr(&counts), None, datatype) };
            // SAFETY: the caller's contract.
            unsafe { vector::reduce_scatter(acc, sendbuf, recvbuf, rc, b, dt, op, comm) }
        }),
        How::Nonblocking(r) => fit(acc, ci, &one, |acc, a| {
            let (rc, b, dt) =
                if block.is_some() { (std::ptr::null(), Some(a[0].0), a[0].1) } else { (ptr(&counts), None, datatype) };
            // SAFETY: the caller's contract.
            unsafe { nbc::ireduce_scatter(acc, sendbuf, recvbuf, rc, b, dt, op, comm, r) }
        }),
    }
}

/// `MPI_Scan` and `MPI_Exscan` (`exclusive`), their non-blocking and persistent forms and their
/// `_c` forms.
///
/// # Safety
/// MPI's contract on the buffers and the request.
#[allow(clippy::too_many_arguments)]
pub unsafe fn scan(
    acc: &mut Access,
    sendbuf: *const c_void,
    recvbuf: *mut c_void,
    count: Count,
    datatype: Datatype,
    op: abi::Op,
    comm: abi::Comm,
    exclusive: bool,
    how: How,
) -> Res<()> {
    let ci = comm_index(acc, comm);
    let one = [(count, datatype)];
    match how {
        How::Persistent(request) => {
            // MPI defines scans on intracommunicators only.
            let check = |acc: &mut Access, c: &coll::Comm, ci| {
                if c.local.is_some() {
                    return Err(crate::p2p::not_intra(ci));
                }
                check_reduction(acc, count, datatype, op, ci)
            };
            let (sendbuf, recvbuf) = (sendbuf as usize, recvbuf as usize);
            let kind = Reduction::Scan(exclusive);
            let args = Args::Reduction { kind, sendbuf, recvbuf, count, datatype, op, comm };
            // SAFETY: the caller's contract on `request`; MPI's on the buffers, at each start.
            unsafe { persist(acc, request, check, args) }
        }
        How::Blocking => fit(acc, ci, &one, |acc, a| {
            // SAFETY: the caller's contract.
            unsafe { vector::scan(acc, sendbuf, recvbuf, a[0].0, a[0].1, op, comm, exclusive) }
        }),
        How::Nonblocking(r) => fit(acc, ci, &one, |acc, a| {
            // SAFETY: the caller's contract.
            unsafe { nbc::iscan(acc, sendbuf, recvbuf, a[0].0, a[0].1, op, comm, exclusive, r) }
        }),
    }
}
