//! The reductions over blocks: `MPI_Reduce_scatter(_block)`, `MPI_Scan`, `MPI_Exscan`, and the
//! packed input they share with the non-blocking forms.

use std::ffi::{c_int, c_void};

use super::{Sink, ints, layout_at, source};
use crate::abi::{self, Datatype};
use crate::coll::algo::Ops;
use crate::coll::{allreduce_comm, begin, in_place_misused, inter, is_in_place, on, reduction_kept, tag, whole};
use crate::error::{Fail, Res, Why};
use crate::state::Access;

// ---------------------------------------------------------------------------------------------
// Reduce_scatter, Scan, Exscan.

/// The packed input of a reduction: `count` elements of `dt` at `sendbuf`, or at `recvbuf` under
/// `MPI_IN_PLACE`.
///
/// # Safety
/// MPI's contract: the elements are readable there.
pub(in crate::coll) unsafe fn reduction_input(
    acc: &mut Access,
    sendbuf: *const c_void,
    recvbuf: *mut c_void,
    count: c_int,
    dt: Datatype,
    ci: usize,
) -> Res<Vec<u8>> {
    let src = if is_in_place(sendbuf) { recvbuf.cast_const() } else { sendbuf };
    let l = layout_at(acc, src.cast(), count, dt, ci)?;
    // SAFETY: the caller's contract.
    Ok(unsafe { source(&l) }.into_owned())
}

/// `MPI_Reduce` (`root` given) and `MPI_Allreduce` on a derived or pair datatype: the input is
/// packed, reduced as its leaf type, and unpacked at the root (everywhere for allreduce).
///
/// # Safety
/// MPI's contract on the buffers (`sendbuf` may be `MPI_IN_PLACE`, at the root for reduce).
#[allow(clippy::too_many_arguments)]
pub unsafe fn reduce_any(
    acc: &mut Access,
    sendbuf: *const c_void,
    recvbuf: *mut c_void,
    count: c_int,
    dt: Datatype,
    op: abi::Op,
    root: Option<c_int>,
    comm: abi::Comm,
) -> Res<()> {
    let (c, ci, tu) = begin(acc, comm)?;
    let c = &*c;
    let root = root.map(|r| crate::coll::check_root(r, c, ci)).transpose()?;
    let receives = root.is_none_or(|r| r == c.rank as usize);
    if is_in_place(sendbuf) && !receives {
        return Err(in_place_misused(ci));
    }
    // `_keep` holds the layout a user's operation points to until the reduction is done.
    let (red, _keep) = reduction_kept(acc.st(), op, dt, ci)?;
    // SAFETY: MPI's contract on the input.
    let mut data = unsafe { reduction_input(acc, sendbuf, recvbuf, count, dt, ci)? };
    if data.is_empty() {
        return Ok(());
    }
    let mut sink =
        if receives { Some(Sink::new(layout_at(acc, recvbuf.cast_const().cast(), count, dt, ci)?)) } else { None };
    match root {
        Some(r) => crate::coll::reduce_comm(acc, tag::REDUCE, c, r, &mut data, red, &tu),
        None => allreduce_comm(acc, tag::ALLREDUCE, c, &mut data, red, &tu),
    }
    .map_err(on(ci))?;
    if let Some(s) = sink.as_mut() {
        // SAFETY: MPI's contract: the receive buffer is writable; `data` is ours.
        unsafe { s.put(&data, ci)? };
    }
    Ok(())
}

/// `MPI_Reduce_local` on a derived or pair datatype.
///
/// # Safety
/// MPI's contract on the buffers.
pub unsafe fn reduce_local_any(
    acc: &mut Access,
    inbuf: *const c_void,
    inoutbuf: *mut c_void,
    count: c_int,
    dt: Datatype,
    op: abi::Op,
) -> Res<()> {
    // `_keep` holds the layout a user's operation points to until the reduction is done.
    let (red, _keep) = reduction_kept(acc.st(), op, dt, 0)?;
    // SAFETY: MPI's contract: both buffers hold `count` elements.
    let (mut lower, mut data) = unsafe {
        (
            reduction_input(acc, inbuf, std::ptr::null_mut(), count, dt, 0)?,
            reduction_input(acc, inoutbuf.cast_const(), std::ptr::null_mut(), count, dt, 0)?,
        )
    };
    red.combine_lower(&mut data, &mut lower);
    let mut sink = Sink::new(layout_at(acc, inoutbuf.cast_const().cast(), count, dt, 0)?);
    // SAFETY: MPI's contract: `inoutbuf` is writable.
    unsafe { sink.put(&data, 0) }
}

/// `MPI_Reduce_scatter` (`counts` per rank) and `MPI_Reduce_scatter_block` (`block` per rank):
/// the whole vector is allreduced, then each rank keeps its part.
///
/// # Safety
/// MPI's contract on the buffers (`sendbuf` may be `MPI_IN_PLACE`: the whole vector is then in
/// `recvbuf`).
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
    if inter::is_inter(acc, comm) {
        // SAFETY: the caller's contract.
        return unsafe { inter::reduce_scatter(acc, sendbuf, recvbuf, counts, block, dt, op, comm) };
    }
    let (c, ci, tu) = begin(acc, comm)?;
    let c = &*c;
    let (n, me) = (c.size as usize, c.rank as usize);
    // SAFETY: MPI's contract: `size` ints unless `block`.
    let counts = unsafe { block_counts(counts, block, n, ci) }?;
    // `_keep` holds the layout a user's operation points to until the reduction is done.
    let (red, _keep) = reduction_kept(acc.st(), op, dt, ci)?;
    let total: usize = counts.iter().sum();
    let Ok(total_c) = c_int::try_from(total) else {
        return Err(Fail::new(abi::ERR_COUNT, Some(ci), Why::Arg("the counts add up past INT_MAX")));
    };
    // SAFETY: MPI's contract: `total` elements at the input.
    let mut data = unsafe { reduction_input(acc, sendbuf, recvbuf, total_c, dt, ci)? };
    if data.is_empty() {
        return Ok(());
    }
    let per = data.len() / total;
    let mut sink = Sink::new(layout_at(acc, recvbuf.cast_const().cast(), counts[me] as c_int, dt, ci)?);
    allreduce_comm(acc, tag::REDUCE_SCATTER, c, &mut data, red, &tu).map_err(on(ci))?;
    let start = counts[..me].iter().sum::<usize>() * per;
    // SAFETY: MPI's contract: `counts[me]` elements writable at `recvbuf` (the start of the
    // vector in place: the result is taken from our copy before it is written).
    unsafe { sink.put(&data[start..start + counts[me] * per], ci) }
}

/// The counts of `MPI_Reduce_scatter` (`n` at `counts`) or `MPI_Reduce_scatter_block` (`block`
/// each), checked.
///
/// # Safety
/// MPI's contract: `n` ints at `counts` unless `block` is given.
pub(in crate::coll) unsafe fn block_counts(
    counts: *const c_int,
    block: Option<c_int>,
    n: usize,
    ci: usize,
) -> Res<Vec<usize>> {
    let bad = |k: c_int| Fail::new(abi::ERR_COUNT, Some(ci), Why::Count(k));
    match block {
        Some(b) if b < 0 => Err(bad(b)),
        Some(b) => Ok(vec![b as usize; n]),
        // SAFETY: the caller's contract.
        None => unsafe { ints(counts, n, ci, "recvcounts")? }
            .iter()
            .map(|&k| if k < 0 { Err(bad(k)) } else { Ok(k as usize) })
            .collect(),
    }
}

/// `MPI_Scan` (`exclusive` false) and `MPI_Exscan` (true), by recursive doubling: at step
/// `2^k`, ranks `r` and `r ^ 2^k` exchange the reduction of their `2^k`-block so far; the higher
/// one folds the lower's into its result. Lower ranks always combine on the left.
///
/// # Safety
/// MPI's contract on the buffers (`sendbuf` may be `MPI_IN_PLACE`).
#[allow(clippy::too_many_arguments)]
pub unsafe fn scan(
    acc: &mut Access,
    sendbuf: *const c_void,
    recvbuf: *mut c_void,
    count: c_int,
    dt: Datatype,
    op: abi::Op,
    comm: abi::Comm,
    exclusive: bool,
) -> Res<()> {
    let (c, ci, _) = begin(acc, comm)?;
    let c = &*c;
    if count < 0 {
        return Err(Fail::new(abi::ERR_COUNT, Some(ci), Why::Count(count)));
    }
    // `_keep` holds the layout a user's operation points to until the reduction is done.
    let (red, _keep) = reduction_kept(acc.st(), op, dt, ci)?;
    // SAFETY: MPI's contract: `count` elements at the input.
    let mine = unsafe { reduction_input(acc, sendbuf, recvbuf, count, dt, ci)? };
    let len = mine.len();
    if len == 0 {
        return Ok(());
    }
    let mut sink = Sink::new(layout_at(acc, recvbuf.cast_const().cast(), count, dt, ci)?);
    let (n, me) = (c.size as usize, c.rank as usize);
    let mut partial = mine.clone();
    // The result so far: the inclusive scan starts from this rank's data, the exclusive one
    // from nothing.
    let mut result: Option<Vec<u8>> = (!exclusive).then_some(mine);
    let mut tmp = vec![0u8; len];
    let mut ops = Ops::new(acc, c.coll_ctx(), tag::SCAN)?;
    let t = whole(c);
    let mut mask = 1;
    while mask < n {
        let peer = me ^ mask;
        if peer < n {
            ops.exchange(t.ranks[peer], &partial, t.ranks[peer], &mut tmp).map_err(on(ci))?;
            if peer < me {
                result = Some(match result.take() {
                    Some(mut r) => {
                        let mut lower = tmp.clone();
                        red.combine_lower(&mut r, &mut lower);
                        r
                    }
                    None => tmp.clone(),
                });
                red.combine_lower(&mut partial, &mut tmp);
            } else {
                red.combine_higher(&mut partial, &tmp);
            }
        }
        mask <<= 1;
    }
    match result {
        // SAFETY: MPI's contract: `count` elements writable at `recvbuf` (rank 0's exclusive
        // scan leaves it untouched: undefined by the standard).
        Some(r) => unsafe { sink.put(&r, ci) },
        None => Ok(()),
    }
}
