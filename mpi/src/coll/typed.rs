//! The regular collectives (`MPI_Bcast`, `MPI_Gather`, `MPI_Scatter`, `MPI_Allgather`,
//! `MPI_Alltoall`) on derived datatypes. A rank whose significant types are all basic takes the
//! byte paths of `super`; one with a derived type comes here, where its data is packed into (or
//! received into) contiguous bytes around **the same algorithms on the same bytes**: the model
//! chooses by the byte length and the leaf element size, which ranks with matching type
//! signatures share, so a root that receives a strided type and senders that send plain ints run
//! one algorithm together and exchange the same pieces.

use std::ffi::{c_int, c_void};

use super::vector::{Sink, layout_at, source};
use super::{
    allgather_whole, alltoall_whole, bcast_comm, begin, begin_rooted, check_root, gather_whole, is_in_place, mismatch,
    on, scatter_whole, tag,
};
use crate::abi::{self, Datatype};
use crate::datatype;
use crate::error::{Fail, Res, Why};
use crate::state::Access;

/// True if `dt` is a predefined basic type (the byte paths take it).
pub fn basic(dt: Datatype) -> bool {
    datatype::size_of_handle(dt).is_some()
}

/// `count × n` as an MPI count.
fn count_times(count: c_int, n: usize, ci: usize) -> Res<c_int> {
    if count < 0 {
        return Err(Fail::new(abi::ERR_COUNT, Some(ci), Why::Count(count)));
    }
    c_int::try_from(n)
        .ok()
        .and_then(|n| count.checked_mul(n))
        .ok_or_else(|| Fail::new(abi::ERR_COUNT, Some(ci), Why::Arg("count × communicator size exceeds INT_MAX")))
}

/// Block `i` of `count` elements of `dt` from `buf` (`buf + i × count × extent`).
fn block_at(acc: &mut Access, buf: *const c_void, i: usize, count: c_int, dt: Datatype, ci: usize) -> Res<*const u8> {
    let extent = super::vector::extent_of(acc, dt, ci)?;
    Ok((buf as *const u8).wrapping_offset(i as isize * count as isize * extent))
}

/// The element size the broadcast's model segments by: the leaf's (1 for a type of several).
fn leaf_size(acc: &mut Access, dt: Datatype, ci: usize) -> Res<usize> {
    if let Some(s) = datatype::size_of_handle(dt) {
        return Ok(s.max(1));
    }
    let d = datatype::resolve(&acc.st().types, dt, ci)?;
    Ok(d.leaf.and_then(|l| datatype::any(&acc.st().types, l).ok()).map_or(1, |l| l.size.max(1)))
}

/// `MPI_Bcast` of a derived type: packed at the root, unpacked elsewhere.
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
    let (c, ci, tu) = begin(acc, comm)?;
    let c = &*c;
    let root = check_root(root, c, ci)?;
    let elem = leaf_size(acc, dt, ci)?;
    let mut sink = Sink::new(layout_at(acc, buf.cast_const().cast(), count, dt, ci)?);
    if sink.len() == 0 {
        return Ok(());
    }
    if c.rank as usize == root {
        // SAFETY: MPI's contract: the root's buffer holds the data.
        let mut data = unsafe { source(&sink.layout) }.into_owned();
        return bcast_comm(acc, tag::BCAST, c, root, &mut data, elem, &tu).map_err(on(ci));
    }
    // SAFETY: MPI's contract: the buffer is writable; nothing else uses it meanwhile.
    bcast_comm(acc, tag::BCAST, c, root, unsafe { sink.bytes() }, elem, &tu).map_err(on(ci))?;
    // SAFETY: as above; the data is in.
    unsafe { sink.finish() };
    Ok(())
}

/// `MPI_Gather` with a derived type on this rank's significant side.
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
    let in_place = is_in_place(sendbuf);
    let (c, ci, tu, root) = begin_rooted(acc, comm, root, in_place)?;
    let c = &*c;
    let n = c.size as usize;
    let is_root = c.rank as usize == root;
    if !is_root {
        let l = layout_at(acc, sendbuf.cast(), sendcount, sendtype, ci)?;
        if l.is_empty() {
            return Ok(());
        }
        // SAFETY: MPI's contract: the send buffer holds the block.
        let mine = unsafe { source(&l) };
        return gather_whole(acc, tag::GATHER, c, &tu, root, &mine, &mut [], mine.len()).map_err(on(ci));
    }
    let all_count = count_times(recvcount, n, ci)?;
    let mut sink = Sink::new(layout_at(acc, recvbuf.cast_const().cast(), all_count, recvtype, ci)?);
    let block = sink.len() / n;
    if block == 0 {
        return Ok(());
    }
    let own = if in_place { block_at(acc, recvbuf, root, recvcount, recvtype, ci)? } else { sendbuf.cast() };
    let (own_count, own_type) = if in_place { (recvcount, recvtype) } else { (sendcount, sendtype) };
    let l = layout_at(acc, own, own_count, own_type, ci)?;
    // SAFETY: MPI's contract: the block is readable (in place: in the receive buffer).
    let mine = unsafe { source(&l) }.into_owned();
    if mine.len() != block {
        return Err(mismatch(ci, block, mine.len()));
    }
    // SAFETY: MPI's contract: the receive buffer is writable (or our scratch); nothing else
    // uses it meanwhile.
    let all = unsafe { sink.bytes() };
    all[root * block..(root + 1) * block].copy_from_slice(&mine);
    gather_whole(acc, tag::GATHER, c, &tu, root, &mine, all, block).map_err(on(ci))?;
    // SAFETY: as above; every block is in.
    unsafe { sink.finish() };
    Ok(())
}

/// `MPI_Scatter` with a derived type on this rank's significant side.
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
    let in_place = is_in_place(recvbuf);
    let (c, ci, tu, root) = begin_rooted(acc, comm, root, in_place)?;
    let c = &*c;
    let n = c.size as usize;
    let is_root = c.rank as usize == root;
    if !is_root {
        let mut sink = Sink::new(layout_at(acc, recvbuf.cast_const().cast(), recvcount, recvtype, ci)?);
        let len = sink.len();
        if len == 0 {
            return Ok(());
        }
        // SAFETY: MPI's contract: the receive buffer is writable (or our scratch).
        scatter_whole(acc, tag::SCATTER, c, &tu, root, &[], unsafe { sink.bytes() }, len).map_err(on(ci))?;
        // SAFETY: as above; the data is in.
        unsafe { sink.finish() };
        return Ok(());
    }
    let all_count = count_times(sendcount, n, ci)?;
    let l = layout_at(acc, sendbuf.cast(), all_count, sendtype, ci)?;
    let block = l.len() / n;
    if block == 0 {
        return Ok(());
    }
    // SAFETY: MPI's contract: the root's send buffer holds every block.
    let all = unsafe { source(&l) };
    let mut mine = if in_place {
        None
    } else {
        let s = Sink::new(layout_at(acc, recvbuf.cast_const().cast(), recvcount, recvtype, ci)?);
        if s.len() != block {
            return Err(mismatch(ci, block, s.len()));
        }
        Some(s)
    };
    let mut scratch = Vec::new();
    let out = match mine.as_mut() {
        // SAFETY: MPI's contract: the receive buffer is writable (or our scratch).
        Some(s) => unsafe { s.bytes() },
        None => {
            scratch.resize(block, 0);
            &mut scratch[..]
        }
    };
    scatter_whole(acc, tag::SCATTER, c, &tu, root, &all, out, block).map_err(on(ci))?;
    if let Some(s) = mine {
        // SAFETY: as above; the data is in.
        unsafe { s.finish() };
    }
    Ok(())
}

/// `MPI_Allgather` with a derived type on either side.
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
    let (c, ci, tu) = begin(acc, comm)?;
    let c = &*c;
    let (n, me) = (c.size as usize, c.rank as usize);
    let all_count = count_times(recvcount, n, ci)?;
    let mut sink = Sink::new(layout_at(acc, recvbuf.cast_const().cast(), all_count, recvtype, ci)?);
    let block = sink.len() / n;
    if block == 0 {
        return Ok(());
    }
    let (own, own_count, own_type) = if is_in_place(sendbuf) {
        (block_at(acc, recvbuf, me, recvcount, recvtype, ci)?, recvcount, recvtype)
    } else {
        (sendbuf.cast(), sendcount, sendtype)
    };
    let l = layout_at(acc, own, own_count, own_type, ci)?;
    // SAFETY: MPI's contract: the block is readable.
    let mine = unsafe { source(&l) }.into_owned();
    if mine.len() != block {
        return Err(mismatch(ci, block, mine.len()));
    }
    // SAFETY: MPI's contract: the receive buffer is writable (or our scratch).
    let all = unsafe { sink.bytes() };
    all[me * block..(me + 1) * block].copy_from_slice(&mine);
    allgather_whole(acc, tag::ALLGATHER, c, all, block, &tu).map_err(on(ci))?;
    // SAFETY: as above; every block is in.
    unsafe { sink.finish() };
    Ok(())
}

/// `MPI_Alltoall` with a derived type on either side.
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
    let (c, ci, tu) = begin(acc, comm)?;
    let c = &*c;
    let n = c.size as usize;
    let mut sink =
        Sink::new(layout_at(acc, recvbuf.cast_const().cast(), count_times(recvcount, n, ci)?, recvtype, ci)?);
    let block = sink.len() / n;
    if block == 0 {
        return Ok(());
    }
    let send = if is_in_place(sendbuf) {
        // SAFETY: MPI's contract: the data is in the receive buffer, which the exchange
        // overwrites: a packed copy.
        unsafe { source(&sink.layout) }.into_owned()
    } else {
        let l = layout_at(acc, sendbuf.cast(), count_times(sendcount, n, ci)?, sendtype, ci)?;
        // SAFETY: MPI's contract: the send buffer holds every block.
        unsafe { source(&l) }.into_owned()
    };
    if send.len() != sink.len() {
        return Err(mismatch(ci, sink.len(), send.len()));
    }
    // SAFETY: MPI's contract: the receive buffer is writable (or our scratch).
    alltoall_whole(acc, tag::ALLTOALL, c, &tu, &send, unsafe { sink.bytes() }, block).map_err(on(ci))?;
    // SAFETY: as above; every block is in.
    unsafe { sink.finish() };
    Ok(())
}
