//! The rooted collectives' entries: broadcast, reduce, gatherv and scatterv (gather and scatter
//! are with the other one-block-per-member operations in `whole.rs`), each in its
//! blocking, non-blocking and persistent forms, with `int` or `MPI_Count` counts (see the
//! module above).

use std::ffi::{c_int, c_void};

use super::{
    Args, Counts, Disps, How, Reduction, Side, check_count, check_reduction, check_root, check_side, check_type,
    comm_index, comm_of, fit, idle, member_side, no_in_place, persist, ptr,
};
use crate::abi::{self, Count, Datatype};
use crate::coll::nbc::Shape;
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
                no_in_place(c, Some(root), &[buffer.cast_const()], &[buffer.cast_const()], ci)?;
                if idle(c, root) {
                    return Ok(());
                }
                check_count(count, ci)?;
                check_type(acc, datatype, ci)
            };
            let args = Args::Bcast { buffer: buffer as usize, count, datatype, root, comm };
            // SAFETY: the caller's contract on `request`; MPI's on the buffer, at each start.
            unsafe { persist(acc, request, check, args) }
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
                no_in_place(c, Some(root), &[recvbuf.cast_const()], &[sendbuf], ci)?;
                if idle(c, root) {
                    return Ok(());
                }
                check_reduction(acc, count, datatype, op, ci)
            };
            let (sendbuf, recvbuf) = (sendbuf as usize, recvbuf as usize);
            let kind = Reduction::Root(root);
            let args = Args::Reduction { kind, sendbuf, recvbuf, count, datatype, op, comm };
            // SAFETY: the caller's contract on `request`; MPI's on the buffers, at each start.
            unsafe { persist(acc, request, check, args) }
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

/// `MPI_Gatherv` (`shape` [`Shape::Gather`]: `one` is the send side, `many` the receive side)
/// and `MPI_Scatterv` ([`Shape::Scatter`]: the reverse), their non-blocking and persistent forms
/// and their `_c` forms.
///
/// # Safety
/// MPI's contract on the buffers, the arrays (read at the root only) and the request.
#[allow(clippy::too_many_arguments)]
pub unsafe fn vblocks(
    acc: &mut Access,
    shape: Shape,
    sendbuf: *const c_void,
    recvbuf: *mut c_void,
    one: (Count, Datatype),
    many: (Counts, Disps, Datatype),
    root: c_int,
    comm: abi::Comm,
    how: How,
) -> Res<()> {
    let ci = comm_index(acc, comm);
    let n = group_len(acc, comm)?;
    let (counts, disps) = if at_root(acc, comm, root) {
        // SAFETY: MPI's contract: the root's arrays hold a value per member.
        unsafe { (super::counts(many.0, n, ci)?, super::disps(many.1, n, ci)?) }
    } else {
        (None, None)
    };
    let gather = shape == Shape::Gather;
    match how {
        How::Persistent(request) => {
            // The members' side: `one`'s buffer (the root's own block, ignored when in place).
            let (own, other) = if gather { (sendbuf, recvbuf.cast_const()) } else { (recvbuf.cast_const(), sendbuf) };
            let check = |acc: &mut Access, c: &coll::Comm, ci| {
                check_root(root, c, ci)?;
                no_in_place(c, Some(root), &[other], &[own], ci)?;
                if !member_side(c, root) {
                    return Ok(());
                }
                check_side(acc, own, one.0, one.1, ci)
            };
            let (single, arrays) = (
                Side { buf: 0, count: one.0, counts: None, displs: None, datatype: one.1 },
                Side { buf: 0, count: 0, counts, displs: disps, datatype: many.2 },
            );
            let (mut send, mut recv) = if gather { (single, arrays) } else { (arrays, single) };
            (send.buf, recv.buf) = (sendbuf as usize, recvbuf as usize);
            let args = Args::Vector { shape, neighbour: false, send, recv, root: Some(root), comm };
            // SAFETY: the caller's contract on `request`; MPI's on the buffers, at each start.
            unsafe { persist(acc, request, check, args) }
        }
        How::Blocking => fit(acc, ci, &[one], |acc, a| {
            let ((c, t), (cs, ds, mt)) = (a[0], (ptr(&counts), ptr(&disps), many.2));
            // SAFETY: the caller's contract.
            unsafe {
                if gather {
                    vector::gatherv(acc, sendbuf, c, t, recvbuf, cs, ds, mt, root, comm)
                } else {
                    vector::scatterv(acc, sendbuf, cs, ds, mt, recvbuf, c, t, root, comm)
                }
            }
        }),
        How::Nonblocking(r) => fit(acc, ci, &[one], |acc, a| {
            let null = std::ptr::null();
            let single = (a[0].0, null, null, a[0].1, None);
            let multiple = (0, ptr(&counts), ptr(&disps), many.2, None);
            let (s, v) = if gather { (single, multiple) } else { (multiple, single) };
            let send = (sendbuf, s.0, s.1, s.2, s.3, s.4);
            let recv = (recvbuf, v.0, v.1, v.2, v.3, v.4);
            // SAFETY: the caller's contract.
            unsafe { nbc::iblocks(acc, shape, send, recv, false, Some(root), comm, r) }
        }),
    }
}
