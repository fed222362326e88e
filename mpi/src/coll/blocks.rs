//! The collectives that move one block per member: `MPI_Gather`, `MPI_Scatter`, `MPI_Allgather`,
//! `MPI_Alltoall` (argument checks, the choice of algorithm, the shared area when it applies).

use std::ffi::{c_int, c_void};

use super::Tuning;
use super::algo::{Ops, Team};
use super::model::{Allgather, Gather, Params};
use super::{
    algo, area, bcast_team, begin, check_root, disjoint, flat_model, in_place_misused, inter, is_in_place, mismatch,
    model, on, tag, times, typed, whole,
};
use crate::abi::{self, Datatype};
use crate::comm::Comm;
use crate::error::Res;
use crate::p2p::{byte_len, in_bytes, out_bytes};
use crate::state::Access;

// ---------------------------------------------------------------------------------------------
// Gather and scatter.

/// `MPI_Gather`.
///
/// # Safety
/// MPI's contract on the buffers (`sendbuf` may be `MPI_IN_PLACE` at the root).
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
    if inter::is_inter(acc, comm) {
        // SAFETY: the caller's contract.
        return unsafe { inter::gather(acc, sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, root, comm) };
    }
    let (c, ci, tu) = begin(acc, comm)?;
    let (c, tu) = (&*c, &tu);
    let root = check_root(root, c, ci)?;
    let n = c.size as usize;
    let is_root = c.rank as usize == root;
    let in_place = is_in_place(sendbuf);
    if in_place && !is_root {
        return Err(in_place_misused(ci));
    }
    if !typed::basic(if is_root { recvtype } else { sendtype }) || (is_root && !in_place && !typed::basic(sendtype)) {
        // SAFETY: the caller's contract.
        return unsafe {
            typed::gather(acc, sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, root as c_int, comm)
        };
    }
    if !is_root {
        let len = byte_len(sendcount, sendtype, ci, sendbuf.is_null())?;
        if len == 0 {
            return Ok(());
        }
        // SAFETY: MPI's contract: `len` readable bytes at `sendbuf`.
        let mine = unsafe { in_bytes(sendbuf, len) };
        return gather_whole(acc, tag::GATHER, c, tu, root, mine, &mut [], len).map_err(on(ci));
    }
    let block = byte_len(recvcount, recvtype, ci, recvbuf.is_null())?;
    let total = times(block, n, ci)?;
    if block == 0 {
        return Ok(());
    }
    let copy: Vec<u8>;
    let mine: &[u8] = if in_place {
        // SAFETY: MPI's contract: the root's block is in place in `recvbuf`, which the gather
        // writes: a copy.
        copy = unsafe { in_bytes(recvbuf.cast_const().byte_add(root * block), block) }.to_vec();
        &copy
    } else {
        let len = byte_len(sendcount, sendtype, ci, sendbuf.is_null())?;
        if len != block {
            return Err(mismatch(ci, block, len));
        }
        disjoint(sendbuf, len, recvbuf, total, ci)?;
        // SAFETY: MPI's contract: `len` readable bytes at `sendbuf`, disjoint from `recvbuf`
        // (checked).
        unsafe { in_bytes(sendbuf, len) }
    };
    // SAFETY: MPI's contract: `size × block` writable bytes at `recvbuf`.
    let all = unsafe { out_bytes(recvbuf, total) };
    all[root * block..(root + 1) * block].copy_from_slice(mine);
    gather_whole(acc, tag::GATHER, c, tu, root, mine, all, block).map_err(on(ci))
}

/// The gather (and scatter) algorithm for `block` bytes per member over the whole of `c`:
/// `forced`, else the model's choice. Asked only once the shared area declined: the model's
/// evaluation cost more than the area's whole collective (about 300 instructions a call).
fn gather_alg(ops: &Ops, c: &Comm, tu: &Tuning, forced: Option<Gather>, block: usize) -> Gather {
    forced.unwrap_or_else(|| flat_model(c, tu, ops).best_gather(c.size as usize, block).1)
}

/// A gather over the whole communicator: through its shared area when it has one
/// ([`area::gather`]), else the algorithm [`gather_alg`] picks.
#[allow(clippy::too_many_arguments)]
pub(super) fn gather_whole(
    access: &mut Access,
    tag: i32,
    c: &Comm,
    tu: &Tuning,
    root: usize,
    mine: &[u8],
    all: &mut [u8],
    block: usize,
) -> Res<()> {
    if area::gather(access, c, root, mine, all, tu)? {
        return Ok(());
    }
    let ops = &mut Ops::new(access, c.coll_ctx(), tag)?;
    let alg = gather_alg(ops, c, tu, tu.force.gather, block);
    run_gather(ops, alg, whole(c), root, mine, all, block)
}

/// A scatter over the whole communicator: through its shared area when it has one
/// ([`area::scatter`]), else the algorithm [`gather_alg`] picks.
#[allow(clippy::too_many_arguments)]
pub(super) fn scatter_whole(
    access: &mut Access,
    tag: i32,
    c: &Comm,
    tu: &Tuning,
    root: usize,
    all: &[u8],
    mine: &mut [u8],
    block: usize,
) -> Res<()> {
    if area::scatter(access, c, root, all, mine, tu)? {
        return Ok(());
    }
    let ops = &mut Ops::new(access, c.coll_ctx(), tag)?;
    let alg = gather_alg(ops, c, tu, tu.force.scatter, block);
    run_scatter(ops, alg, whole(c), root, all, mine, block)
}

/// An allgather over the whole communicator: through its shared area when it has one
/// ([`area::allgather`]), else [`allgather_team`].
pub(super) fn allgather_whole(
    access: &mut Access,
    tag: i32,
    c: &Comm,
    all: &mut [u8],
    block: usize,
    tu: &Tuning,
) -> Res<()> {
    if area::allgather(access, c, all, block, tu)? {
        return Ok(());
    }
    let ops = &mut Ops::new(access, c.coll_ctx(), tag)?;
    let p = flat_model(c, tu, ops).p;
    allgather_team(ops, whole(c), all, block, p, tu)
}

/// An all-to-all over the whole communicator: through its shared area when it has one
/// ([`area::alltoall`]), else the direct exchange.
pub(super) fn alltoall_whole(
    access: &mut Access,
    tag: i32,
    c: &Comm,
    tu: &Tuning,
    send: &[u8],
    recv: &mut [u8],
    block: usize,
) -> Res<()> {
    if area::alltoall(access, c, send, recv, block, tu)? {
        return Ok(());
    }
    let ops = &mut Ops::new(access, c.coll_ctx(), tag)?;
    algo::alltoall_direct(ops, whole(c), send, recv, block)
}

pub(super) fn run_gather(
    ops: &mut Ops,
    alg: Gather,
    t: Team,
    root: usize,
    mine: &[u8],
    all: &mut [u8],
    block: usize,
) -> Res<()> {
    if t.size() <= 1 {
        return Ok(());
    }
    match alg {
        Gather::Flat => algo::gather_flat(ops, t, root, mine, all, block),
        Gather::Binomial => algo::gather_binomial(ops, t, root, mine, all, block),
    }
}

/// `MPI_Scatter`.
///
/// # Safety
/// MPI's contract on the buffers (`recvbuf` may be `MPI_IN_PLACE` at the root).
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
    if inter::is_inter(acc, comm) {
        // SAFETY: the caller's contract.
        return unsafe { inter::scatter(acc, sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, root, comm) };
    }
    let (c, ci, tu) = begin(acc, comm)?;
    let (c, tu) = (&*c, &tu);
    let root = check_root(root, c, ci)?;
    let n = c.size as usize;
    let is_root = c.rank as usize == root;
    let in_place = is_in_place(recvbuf);
    if in_place && !is_root {
        return Err(in_place_misused(ci));
    }
    if !typed::basic(if is_root { sendtype } else { recvtype }) || (is_root && !in_place && !typed::basic(recvtype)) {
        // SAFETY: the caller's contract.
        return unsafe {
            typed::scatter(acc, sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, root as c_int, comm)
        };
    }
    if !is_root {
        let len = byte_len(recvcount, recvtype, ci, recvbuf.is_null())?;
        if len == 0 {
            return Ok(());
        }
        // SAFETY: MPI's contract: `len` writable bytes at `recvbuf`.
        let mine = unsafe { out_bytes(recvbuf, len) };
        return scatter_whole(acc, tag::SCATTER, c, tu, root, &[], mine, len).map_err(on(ci));
    }
    let block = byte_len(sendcount, sendtype, ci, sendbuf.is_null())?;
    let total = times(block, n, ci)?;
    if block == 0 {
        return Ok(());
    }
    // SAFETY: MPI's contract: `size × block` readable bytes at `sendbuf`.
    let all = unsafe { in_bytes(sendbuf, total) };
    if in_place {
        let mut scratch = vec![0u8; block];
        scatter_whole(acc, tag::SCATTER, c, tu, root, all, &mut scratch, block).map_err(on(ci))
    } else {
        let len = byte_len(recvcount, recvtype, ci, recvbuf.is_null())?;
        if len != block {
            return Err(mismatch(ci, block, len));
        }
        disjoint(sendbuf, total, recvbuf, len, ci)?;
        // SAFETY: MPI's contract: `len` writable bytes at `recvbuf`, disjoint from `sendbuf`.
        let mine = unsafe { out_bytes(recvbuf, len) };
        scatter_whole(acc, tag::SCATTER, c, tu, root, all, mine, block).map_err(on(ci))
    }
}

pub(super) fn run_scatter(
    ops: &mut Ops,
    alg: Gather,
    t: Team,
    root: usize,
    all: &[u8],
    mine: &mut [u8],
    block: usize,
) -> Res<()> {
    if t.size() <= 1 {
        mine.copy_from_slice(&all[..block]);
        return Ok(());
    }
    match alg {
        Gather::Flat => algo::scatter_flat(ops, t, root, all, mine, block),
        Gather::Binomial => algo::scatter_binomial(ops, t, root, all, mine, block),
    }
}

// ---------------------------------------------------------------------------------------------
// Allgather and alltoall.

/// `MPI_Allgather`.
///
/// # Safety
/// MPI's contract on the buffers (`sendbuf` may be `MPI_IN_PLACE`).
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
    if inter::is_inter(acc, comm) {
        // SAFETY: the caller's contract.
        return unsafe { inter::allgather(acc, sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, comm) };
    }
    if !typed::basic(recvtype) || (!is_in_place(sendbuf) && !typed::basic(sendtype)) {
        // SAFETY: the caller's contract.
        return unsafe { typed::allgather(acc, sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, comm) };
    }
    let (c, ci, tu) = begin(acc, comm)?;
    let (c, tu) = (&*c, &tu);
    let n = c.size as usize;
    let me = c.rank as usize;
    let block = byte_len(recvcount, recvtype, ci, recvbuf.is_null())?;
    let total = times(block, n, ci)?;
    if block == 0 {
        return Ok(());
    }
    if !is_in_place(sendbuf) {
        let len = byte_len(sendcount, sendtype, ci, sendbuf.is_null())?;
        if len != block {
            return Err(mismatch(ci, block, len));
        }
        disjoint(sendbuf, len, recvbuf, total, ci)?;
        // SAFETY: MPI's contract; disjoint (checked); block `me` is within the receive buffer.
        unsafe { std::ptr::copy_nonoverlapping(sendbuf as *const u8, (recvbuf as *mut u8).add(me * block), len) };
    }
    // SAFETY: MPI's contract: `size × block` writable bytes at `recvbuf`.
    let all = unsafe { out_bytes(recvbuf, total) };
    allgather_whole(acc, tag::ALLGATHER, c, all, block, tu).map_err(on(ci))
}

/// Allgather of `block` bytes per member into `all` (this member's block already in place).
pub fn allgather_team(ops: &mut Ops, t: Team, all: &mut [u8], block: usize, p: Params, tu: &Tuning) -> Res<()> {
    let n = t.size();
    if n <= 1 {
        return Ok(());
    }
    let alg = tu.force.allgather.unwrap_or_else(|| model(p, ops).best_allgather(n, block).1);
    match alg {
        Allgather::Ring => algo::allgather_ring(ops, t, all, block),
        Allgather::Bruck => algo::allgather_bruck(ops, t, all, block),
        Allgather::GatherBcast => {
            let mine = all[t.me * block..(t.me + 1) * block].to_vec();
            let g = tu.force.gather.unwrap_or_else(|| model(p, ops).best_gather(n, block).1);
            if t.me == 0 {
                run_gather(ops, g, t, 0, &mine, all, block)?;
            } else {
                run_gather(ops, g, t, 0, &mine, &mut [], block)?;
            }
            bcast_team(ops, t, 0, all, 1, p, tu)
        }
    }
}

/// `MPI_Alltoall`.
///
/// # Safety
/// MPI's contract on the buffers (`sendbuf` may be `MPI_IN_PLACE`).
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
    if inter::is_inter(acc, comm) {
        // SAFETY: the caller's contract.
        return unsafe { inter::alltoall(acc, sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, comm) };
    }
    if !typed::basic(recvtype) || (!is_in_place(sendbuf) && !typed::basic(sendtype)) {
        // SAFETY: the caller's contract.
        return unsafe { typed::alltoall(acc, sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, comm) };
    }
    let (c, ci, tu) = begin(acc, comm)?;
    let c = &*c;
    let n = c.size as usize;
    let block = byte_len(recvcount, recvtype, ci, recvbuf.is_null())?;
    let total = times(block, n, ci)?;
    if block == 0 {
        return Ok(());
    }
    let copy: Vec<u8>;
    let send: &[u8] = if is_in_place(sendbuf) {
        // SAFETY: MPI's contract: the data to send is in `recvbuf`, which the exchange
        // overwrites: send from a copy.
        copy = unsafe { in_bytes(recvbuf.cast_const(), total) }.to_vec();
        &copy
    } else {
        let len = byte_len(sendcount, sendtype, ci, sendbuf.is_null())?;
        if len != block {
            return Err(mismatch(ci, block, len));
        }
        disjoint(sendbuf, total, recvbuf, total, ci)?;
        // SAFETY: MPI's contract: `size × block` readable bytes at `sendbuf`, disjoint from
        // `recvbuf` (checked).
        unsafe { in_bytes(sendbuf, total) }
    };
    // SAFETY: MPI's contract: `size × block` writable bytes at `recvbuf`.
    let recv = unsafe { out_bytes(recvbuf, total) };
    alltoall_whole(acc, tag::ALLTOALL, c, &tu, send, recv, block).map_err(on(ci))
}
