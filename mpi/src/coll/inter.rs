//! Collectives on intercommunicators (MPI-3.1 §5.2.2): `MPI_Barrier`, `MPI_Bcast`, `MPI_Reduce`,
//! `MPI_Allreduce`, `MPI_Gather`, `MPI_Scatter`, `MPI_Allgather`, `MPI_Alltoall`,
//! `MPI_Reduce_scatter(_block)` here; the v-forms (`MPI_Gatherv`, `MPI_Scatterv`,
//! `MPI_Allgatherv`, `MPI_Alltoallv`, `MPI_Alltoallw`) in `super::vector`, by direct transfers
//! with the remote members.
//!
//! In a rooted one the root's group passes `MPI_ROOT` at the root and `MPI_PROC_NULL` elsewhere,
//! the other group the root's rank in the root's group; data moves between the groups only. Each
//! is a local step in one group (on its local communicator, `Comm::local`, with the
//! intracommunicator algorithms), one transfer between the groups' rank 0s (or the root) in the
//! intercommunicator's collective context, and a local step in the other group: a broadcast goes
//! root → remote rank 0 → broadcast there; a reduction reduces in the sending group (in rank
//! order) to its rank 0, which sends to the root; a gather gathers to rank 0, which sends the
//! whole to the root; a scatter the reverse; allreduce and allgather do both directions at once,
//! the rank 0s swapping their groups' results; all-to-all is direct transfers to and from every
//! remote rank. Any datatype: non-contiguous data is packed around the same steps.
//! `MPI_IN_PLACE` is not allowed on an intercommunicator (`MPI_ERR_BUFFER`). Arguments a role does
//! not use are not significant (MPI-4.1 §6.2.3) and not checked: none at `MPI_PROC_NULL` (a
//! reduction's operation and datatype neither), the send side at `MPI_ROOT` of a gather or
//! reduction, the receive side at the members. A reduction of no data still sends its (empty)
//! message to the root, which waits for it. The non-blocking
//! forms (and the persistent ones, which start them) are the same algorithms as schedules, in
//! `super::nbc::inter`. `MPI_Scan` and `MPI_Exscan` (and their non-blocking and persistent forms),
//! which MPI defines on intracommunicators only, refuse an intercommunicator with `MPI_ERR_COMM`
//! (`super::begin`).

use std::ffi::{c_int, c_void};
use std::sync::Arc;

use super::algo::{Ops, Reduction};
use super::model::Gather;
use super::vector::{Sink, block_counts, layout_at, source};
use super::{Tuning, barrier_comm, bcast_comm, in_place_misused, is_in_place, mismatch, on, reduce_comm};
use super::{reduction_kept, run_gather, run_scatter, tag, times, whole};
use crate::abi::{self, Datatype};
use crate::comm::inter::swap;
use crate::comm::{Comm, index_of};
use crate::error::{Fail, Res, Why};
use crate::state::{Access, not_running};

/// True if `comm` names a live intercommunicator (the dispatch of the collectives made for them).
pub fn is_inter(acc: &mut Access, comm: abi::Comm) -> bool {
    acc.st().comms.get(index_of(comm)).is_some_and(|c| c.live && c.local.is_some())
}

/// The intercommunicator, its local group, its index and the tuning.
pub(super) fn begin(acc: &mut Access, comm: abi::Comm) -> Res<(Arc<Comm>, Arc<Comm>, usize, Tuning)> {
    let st = acc.st();
    if st.ep.is_none() {
        return Err(not_running(st.phase));
    }
    let (ci, c) = crate::p2p::comm_at(&st.comms, comm)?;
    let local =
        c.local.clone().ok_or_else(|| Fail::new(abi::ERR_COMM, Some(ci), Why::Arg("not an intercommunicator")))?;
    Ok((c.clone(), local, ci, st.tuning))
}

/// This process's part in a rooted collective.
pub(super) enum Role {
    /// The root (`MPI_ROOT`).
    Root,
    /// Another member of the root's group (`MPI_PROC_NULL`).
    Idle,
    /// A member of the other group; the root's job rank.
    Member(u32),
}

pub(super) fn role(root: c_int, c: &Comm, ci: usize) -> Res<Role> {
    match root {
        abi::ROOT => Ok(Role::Root),
        abi::PROC_NULL => Ok(Role::Idle),
        r if r >= 0 && (r as u32) < c.size => Ok(Role::Member(c.world[r as usize])),
        _ => Err(Fail::new(abi::ERR_ROOT, Some(ci), Why::Root { root, size: c.size })),
    }
}

/// Transfers between the groups.
pub(super) fn across<'e>(acc: &'e mut Access, c: &Comm, tag: i32) -> Res<Ops<'e>> {
    Ops::between(acc, c.coll_ctx(), c.coll_send_ctx(), tag)
}

/// Transfers inside the local group.
fn inside<'e>(acc: &'e mut Access, local: &Comm, tag: i32) -> Res<Ops<'e>> {
    Ops::new(acc, local.coll_ctx(), tag)
}

/// `count` elements of `dt` at `buf` packed (a copy for contiguous data too).
///
/// # Safety
/// MPI's contract: `buf` holds the data.
pub(super) unsafe fn packed(
    acc: &mut Access,
    buf: *const c_void,
    count: c_int,
    dt: Datatype,
    ci: usize,
) -> Res<Vec<u8>> {
    if is_in_place(buf) {
        return Err(in_place_misused(ci));
    }
    let l = layout_at(acc, buf.cast(), count, dt, ci)?;
    // SAFETY: the caller's contract.
    Ok(unsafe { source(&l) }.into_owned())
}

/// Where `count` elements of `dt` at `buf` are received.
pub(super) fn sink(acc: &mut Access, buf: *mut c_void, count: c_int, dt: Datatype, ci: usize) -> Res<Sink> {
    if is_in_place(buf) {
        return Err(in_place_misused(ci));
    }
    Ok(Sink::new(layout_at(acc, buf.cast_const().cast(), count, dt, ci)?))
}

/// `count × n` as an MPI count.
pub(super) fn counts(count: c_int, n: u32, ci: usize) -> Res<c_int> {
    count.checked_mul(n as c_int).ok_or_else(|| Fail::new(abi::ERR_COUNT, Some(ci), Why::Count(count)))
}

/// Puts the received `data` into `sink`.
fn deliver(mut s: Sink, data: &[u8], ci: usize) -> Res<()> {
    // SAFETY: MPI's contract: the receive buffer is writable and untouched meanwhile.
    unsafe { s.put(data, ci) }
}

/// Swaps `mine` with the other group's rank 0 (this being rank 0), expecting `want` bytes back.
fn swap_exact(acc: &mut Access, c: &Comm, tag: i32, mine: &[u8], want: usize, ci: usize) -> Res<Vec<u8>> {
    let got = swap(acc, c.world[0], tag, c.coll_send_ctx(), c.coll_ctx(), mine).map_err(on(ci))?;
    if got.len() != want {
        return Err(mismatch(ci, want, got.len()));
    }
    Ok(got)
}

/// `MPI_Barrier`: a barrier in each group, the rank 0s swap empty messages, a barrier in each
/// group again (nobody leaves before every member of both groups entered).
pub fn barrier(acc: &mut Access, comm: abi::Comm) -> Res<()> {
    let (c, local, ci, tu) = begin(acc, comm)?;
    barrier_comm(acc, &local, &tu).map_err(on(ci))?;
    if local.rank == 0 {
        swap_exact(acc, &c, tag::BARRIER, &[], 0, ci)?;
    }
    barrier_comm(acc, &local, &tu).map_err(on(ci))
}

/// `MPI_Bcast`.
///
/// # Safety
/// MPI's contract on the buffer.
pub unsafe fn bcast(
    acc: &mut Access,
    buf: *mut c_void,
    count: c_int,
    dt: Datatype,
    root: c_int,
    comm: abi::Comm,
) -> Res<()> {
    let (c, local, ci, tu) = begin(acc, comm)?;
    match role(root, &c, ci)? {
        Role::Idle => Ok(()),
        Role::Root => {
            // SAFETY: MPI's contract.
            let data = unsafe { packed(acc, buf, count, dt, ci) }?;
            across(acc, &c, tag::BCAST)?.send(c.world[0], &data).map_err(on(ci))
        }
        Role::Member(from) => {
            let s = sink(acc, buf, count, dt, ci)?;
            let mut data = vec![0u8; s.len()];
            if local.rank == 0 {
                across(acc, &c, tag::BCAST)?.recv(from, &mut data).map_err(on(ci))?;
            }
            if !data.is_empty() {
                bcast_comm(acc, tag::BCAST, &local, 0, &mut data, 1, &tu).map_err(on(ci))?;
            }
            deliver(s, &data, ci)
        }
    }
}

/// The reduction of `op` on `dt` and the layout it keeps.
fn red_of(
    acc: &mut Access,
    op: abi::Op,
    dt: Datatype,
    ci: usize,
) -> Res<(Reduction, Option<Arc<crate::datatype::TypeDesc>>)> {
    reduction_kept(acc.st(), op, dt, ci)
}

/// `MPI_Reduce`: the root gets the reduction of the other group's data.
///
/// # Safety
/// MPI's contract on the buffers.
#[allow(clippy::too_many_arguments)]
pub unsafe fn reduce(
    acc: &mut Access,
    sendbuf: *const c_void,
    recvbuf: *mut c_void,
    count: c_int,
    dt: Datatype,
    op: abi::Op,
    root: c_int,
    comm: abi::Comm,
) -> Res<()> {
    let (c, local, ci, tu) = begin(acc, comm)?;
    let role = role(root, &c, ci)?;
    if let Role::Idle = role {
        return Ok(());
    }
    let (red, _keep) = red_of(acc, op, dt, ci)?;
    match role {
        Role::Idle => Ok(()),
        Role::Root => {
            let s = sink(acc, recvbuf, count, dt, ci)?;
            let mut data = vec![0u8; s.len()];
            across(acc, &c, tag::REDUCE)?.recv(c.world[0], &mut data).map_err(on(ci))?;
            deliver(s, &data, ci)
        }
        Role::Member(to) => {
            // SAFETY: MPI's contract.
            let mut data = unsafe { packed(acc, sendbuf, count, dt, ci) }?;
            if !data.is_empty() {
                reduce_comm(acc, tag::REDUCE, &local, 0, &mut data, red, &tu).map_err(on(ci))?;
            }
            // Sent when empty too: the root waits for it (as the non-blocking form).
            if local.rank == 0 {
                across(acc, &c, tag::REDUCE)?.send(to, &data).map_err(on(ci))?;
            }
            Ok(())
        }
    }
}

/// `MPI_Allreduce`: each group gets the reduction of the other's data.
///
/// # Safety
/// MPI's contract on the buffers.
#[allow(clippy::too_many_arguments)]
pub unsafe fn allreduce(
    acc: &mut Access,
    sendbuf: *const c_void,
    recvbuf: *mut c_void,
    count: c_int,
    dt: Datatype,
    op: abi::Op,
    comm: abi::Comm,
) -> Res<()> {
    let (c, local, ci, tu) = begin(acc, comm)?;
    let (red, _keep) = red_of(acc, op, dt, ci)?;
    // SAFETY: MPI's contract.
    let mut data = unsafe { packed(acc, sendbuf, count, dt, ci) }?;
    let s = sink(acc, recvbuf, count, dt, ci)?;
    if data.is_empty() {
        return Ok(());
    }
    let len = data.len();
    reduce_comm(acc, tag::ALLREDUCE, &local, 0, &mut data, red, &tu).map_err(on(ci))?;
    let mut theirs =
        if local.rank == 0 { swap_exact(acc, &c, tag::ALLREDUCE, &data, len, ci)? } else { vec![0u8; len] };
    bcast_comm(acc, tag::ALLREDUCE, &local, 0, &mut theirs, red.elem, &tu).map_err(on(ci))?;
    deliver(s, &theirs, ci)
}

/// Gathers `mine` (one block per member) at local rank 0, in rank order.
fn gather_local(acc: &mut Access, local: &Comm, mine: &[u8], ci: usize) -> Res<Vec<u8>> {
    let block = mine.len();
    let mut all = if local.rank == 0 { vec![0u8; times(block, local.size as usize, ci)?] } else { Vec::new() };
    if local.rank == 0 {
        all[..block].copy_from_slice(mine);
    }
    let t = whole(local);
    run_gather(&mut inside(acc, local, tag::GATHER)?, Gather::Flat, t, 0, mine, &mut all, block).map_err(on(ci))?;
    Ok(all)
}

/// `MPI_Gather`: the root gets every remote member's block, in rank order.
///
/// # Safety
/// MPI's contract on the buffers.
#[allow(clippy::too_many_arguments)]
pub unsafe fn gather(
    acc: &mut Access,
    sendbuf: *const c_void,
    sendcount: c_int,
    sendtype: Datatype,
    recvbuf: *mut c_void,
    recvcount: c_int,
    recvtype: Datatype,
    root: c_int,
    comm: abi::Comm,
) -> Res<()> {
    let (c, local, ci, _) = begin(acc, comm)?;
    match role(root, &c, ci)? {
        Role::Idle => Ok(()),
        Role::Root => {
            let s = sink(acc, recvbuf, counts(recvcount, c.size, ci)?, recvtype, ci)?;
            let mut data = vec![0u8; s.len()];
            across(acc, &c, tag::GATHER)?.recv(c.world[0], &mut data).map_err(on(ci))?;
            deliver(s, &data, ci)
        }
        Role::Member(to) => {
            // SAFETY: MPI's contract.
            let mine = unsafe { packed(acc, sendbuf, sendcount, sendtype, ci) }?;
            let all = gather_local(acc, &local, &mine, ci)?;
            if local.rank == 0 {
                across(acc, &c, tag::GATHER)?.send(to, &all).map_err(on(ci))?;
            }
            Ok(())
        }
    }
}

/// `MPI_Scatter`: the root's blocks go to the remote members, in rank order.
///
/// # Safety
/// MPI's contract on the buffers.
#[allow(clippy::too_many_arguments)]
pub unsafe fn scatter(
    acc: &mut Access,
    sendbuf: *const c_void,
    sendcount: c_int,
    sendtype: Datatype,
    recvbuf: *mut c_void,
    recvcount: c_int,
    recvtype: Datatype,
    root: c_int,
    comm: abi::Comm,
) -> Res<()> {
    let (c, local, ci, _) = begin(acc, comm)?;
    match role(root, &c, ci)? {
        Role::Idle => Ok(()),
        Role::Root => {
            // SAFETY: MPI's contract.
            let data = unsafe { packed(acc, sendbuf, counts(sendcount, c.size, ci)?, sendtype, ci) }?;
            across(acc, &c, tag::SCATTER)?.send(c.world[0], &data).map_err(on(ci))
        }
        Role::Member(from) => {
            let s = sink(acc, recvbuf, recvcount, recvtype, ci)?;
            let block = s.len();
            let mut all = Vec::new();
            if local.rank == 0 {
                all = vec![0u8; times(block, local.size as usize, ci)?];
                across(acc, &c, tag::SCATTER)?.recv(from, &mut all).map_err(on(ci))?;
            }
            let mut mine = vec![0u8; block];
            let t = whole(&local);
            run_scatter(&mut inside(acc, &local, tag::SCATTER)?, Gather::Flat, t, 0, &all, &mut mine, block)
                .map_err(on(ci))?;
            deliver(s, &mine, ci)
        }
    }
}

/// `MPI_Allgather`: each member gets every remote member's block, in rank order.
///
/// # Safety
/// MPI's contract on the buffers.
#[allow(clippy::too_many_arguments)]
pub unsafe fn allgather(
    acc: &mut Access,
    sendbuf: *const c_void,
    sendcount: c_int,
    sendtype: Datatype,
    recvbuf: *mut c_void,
    recvcount: c_int,
    recvtype: Datatype,
    comm: abi::Comm,
) -> Res<()> {
    let (c, local, ci, tu) = begin(acc, comm)?;
    // SAFETY: MPI's contract.
    let mine = unsafe { packed(acc, sendbuf, sendcount, sendtype, ci) }?;
    let s = sink(acc, recvbuf, counts(recvcount, c.size, ci)?, recvtype, ci)?;
    let all = gather_local(acc, &local, &mine, ci)?;
    let mut theirs =
        if local.rank == 0 { swap_exact(acc, &c, tag::ALLGATHER, &all, s.len(), ci)? } else { vec![0u8; s.len()] };
    if !theirs.is_empty() {
        bcast_comm(acc, tag::ALLGATHER, &local, 0, &mut theirs, 1, &tu).map_err(on(ci))?;
    }
    deliver(s, &theirs, ci)
}

/// `MPI_Alltoall`: block `j` of each member goes to remote member `j`, whose block for this
/// member lands in block `j`.
///
/// # Safety
/// MPI's contract on the buffers.
#[allow(clippy::too_many_arguments)]
pub unsafe fn alltoall(
    acc: &mut Access,
    sendbuf: *const c_void,
    sendcount: c_int,
    sendtype: Datatype,
    recvbuf: *mut c_void,
    recvcount: c_int,
    recvtype: Datatype,
    comm: abi::Comm,
) -> Res<()> {
    let (c, _, ci, _) = begin(acc, comm)?;
    let n = c.size as usize;
    // SAFETY: MPI's contract.
    let send = unsafe { packed(acc, sendbuf, counts(sendcount, c.size, ci)?, sendtype, ci) }?;
    let s = sink(acc, recvbuf, counts(recvcount, c.size, ci)?, recvtype, ci)?;
    let (sblock, rblock) = (send.len() / n.max(1), s.len() / n.max(1));
    let mut recv = vec![0u8; s.len()];
    let base = recv.as_mut_ptr();
    let mut ops = across(acc, &c, tag::ALLTOALL)?;
    ops.settled(|ops| {
        let mut posted = Vec::new();
        for (j, &w) in c.world.iter().enumerate() {
            // SAFETY: block `j` of `recv`, which outlives `settled` (it waits for every piece).
            posted.extend(unsafe { ops.post(w, base.add(j * rblock), rblock) }?);
        }
        // Every member posts all its receives before its first send: no send waits forever.
        for (j, &w) in c.world.iter().enumerate() {
            ops.send(w, &send[j * sblock..(j + 1) * sblock])?;
        }
        ops.wait(&posted)
    })
    .map_err(on(ci))?;
    drop(ops);
    deliver(s, &recv, ci)
}

/// `MPI_Reduce_scatter` (`counts`, one per local member) and `MPI_Reduce_scatter_block`
/// (`block` each): the reduction of the other group's vectors (each as long as the sum of its own
/// group's counts: MPI-3.1 §5.10) is scattered among this group by the counts. Each group reduces
/// to its rank 0, the rank 0s swap, each scatters what it got.
///
/// # Safety
/// MPI's contract on the buffers and `counts`.
#[allow(clippy::too_many_arguments)]
pub unsafe fn reduce_scatter(
    acc: &mut Access,
    sendbuf: *const c_void,
    recvbuf: *mut c_void,
    counts: *const c_int,
    block: Option<c_int>,
    dt: Datatype,
    op: abi::Op,
    comm: abi::Comm,
) -> Res<()> {
    let (c, local, ci, tu) = begin(acc, comm)?;
    let (n, me) = (local.size as usize, local.rank as usize);
    // SAFETY: MPI's contract: the local group's size of counts.
    let counts = unsafe { block_counts(counts, block, n, ci) }?;
    let (red, _keep) = red_of(acc, op, dt, ci)?;
    let total: usize = counts.iter().sum();
    let total_c = c_int::try_from(total)
        .map_err(|_| Fail::new(abi::ERR_COUNT, Some(ci), Why::Arg("the counts add up past INT_MAX")))?;
    // SAFETY: MPI's contract.
    let mut data = unsafe { packed(acc, sendbuf, total_c, dt, ci) }?;
    let s = sink(acc, recvbuf, counts[me] as c_int, dt, ci)?;
    if data.is_empty() {
        return Ok(());
    }
    let per = data.len() / total;
    let len = data.len();
    reduce_comm(acc, tag::REDUCE_SCATTER, &local, 0, &mut data, red, &tu).map_err(on(ci))?;
    let mine = if me == 0 {
        let theirs = swap_exact(acc, &c, tag::REDUCE_SCATTER, &data, len, ci)?;
        let mut ops = inside(acc, &local, tag::REDUCE_SCATTER)?;
        let mut start = 0;
        for (i, &k) in counts.iter().enumerate() {
            let part = &theirs[start..start + k * per];
            if i != 0 && !part.is_empty() {
                ops.send(local.world[i], part).map_err(on(ci))?;
            }
            start += k * per;
        }
        theirs[..counts[0] * per].to_vec()
    } else {
        let mut mine = vec![0u8; counts[me] * per];
        if !mine.is_empty() {
            inside(acc, &local, tag::REDUCE_SCATTER)?.recv(local.world[0], &mut mine).map_err(on(ci))?;
        }
        mine
    };
    deliver(s, &mine, ci)
}
