//! The non-blocking collectives' entry points (`MPI_Ibarrier` ... `MPI_Comm_idup`, and the
//! neighbourhood collectives): each checks its arguments, compiles its schedule and submits it.

use std::ffi::{c_int, c_void};

use super::inter;
use super::{Agreement, Idup, NBC, NBC_STRIDE, Sched, Step, at, submit};
use crate::abi::{self, Datatype};
use crate::coll::inter::is_inter;
use crate::coll::vector::{Displs, Side, Sink, layout_at, layouts, reduction_input, source};
use crate::coll::{begin, check_root, in_place_misused, is_in_place, mismatch, reduction_kept};
use crate::comm::{Comm, context};
use crate::datatype::Layout;
use crate::error::{Fail, Res, Why};
use crate::p2p::null_arg;
use crate::state::Access;

// ---------------------------------------------------------------------------------------------
// The calls.

/// `MPI_Ibarrier`.
///
/// # Safety
/// MPI's contract on `request`.
pub unsafe fn ibarrier(acc: &mut Access, comm: abi::Comm, request: *mut abi::Request) -> Res<()> {
    if is_inter(acc, comm) {
        return inter::ibarrier(acc, comm, request);
    }
    let (c, ci, _) = begin(acc, comm)?;
    let mut s = Sched::new(&c, None);
    s.barrier(&c);
    submit(acc, ci, s, request)
}

/// `MPI_Ibcast`.
///
/// # Safety
/// MPI's contract on the buffer and `request`.
pub unsafe fn ibcast(
    acc: &mut Access,
    buf: *mut c_void,
    count: c_int,
    dt: Datatype,
    root: c_int,
    comm: abi::Comm,
    request: *mut abi::Request,
) -> Res<()> {
    if is_inter(acc, comm) {
        // SAFETY: the caller's contract.
        return unsafe { inter::ibcast(acc, buf, count, dt, root, comm, request) };
    }
    let (c, ci, _) = begin(acc, comm)?;
    let root = check_root(root, &c, ci)?;
    let l = layout_at(acc, buf.cast_const().cast(), count, dt, ci)?;
    let mut s = Sched::new(&c, None);
    let is_root = c.rank as usize == root;
    // SAFETY: MPI's contract: the root's buffer holds the data.
    let data = if is_root { unsafe { source(&l) }.into_owned() } else { vec![0u8; l.len()] };
    let len = data.len();
    let b = s.buf(data);
    if len > 0 {
        s.bcast(&c, root, b);
        if !is_root {
            s.outputs.push((Sink::new(l), at(b, 0..len)));
        }
    }
    submit(acc, ci, s, request)
}

/// `MPI_Ireduce` (`root` given) and `MPI_Iallreduce`.
///
/// # Safety
/// MPI's contract on the buffers and `request`.
#[allow(clippy::too_many_arguments)]
pub unsafe fn ireduce(
    acc: &mut Access,
    sendbuf: *const c_void,
    recvbuf: *mut c_void,
    count: c_int,
    dt: Datatype,
    op: abi::Op,
    root: Option<c_int>,
    comm: abi::Comm,
    request: *mut abi::Request,
) -> Res<()> {
    if is_inter(acc, comm) {
        // SAFETY: the caller's contract.
        return unsafe { inter::ireduce(acc, sendbuf, recvbuf, count, dt, op, root, comm, request) };
    }
    let (c, ci, _) = begin(acc, comm)?;
    let root_at = root.map(|r| check_root(r, &c, ci)).transpose()?;
    let receives = root_at.is_none_or(|r| r == c.rank as usize);
    if is_in_place(sendbuf) && !receives {
        return Err(in_place_misused(ci));
    }
    let (red, keep) = reduction_kept(acc.st(), op, dt, ci)?;
    // SAFETY: MPI's contract on the input.
    let data = unsafe { reduction_input(acc, sendbuf, recvbuf, count, dt, ci)? };
    let len = data.len();
    let mut s = Sched::new(&c, Some(red));
    s.keep = keep;
    let b = s.buf(data);
    if len > 0 {
        s.reduce(&c, root_at.unwrap_or(0), b);
        if root_at.is_none() {
            s.bcast(&c, 0, b);
        }
        if receives {
            let l = layout_at(acc, recvbuf.cast_const().cast(), count, dt, ci)?;
            s.outputs.push((Sink::new(l), at(b, 0..len)));
        }
    }
    submit(acc, ci, s, request)
}

/// `MPI_Ireduce_scatter` (`counts`) and `MPI_Ireduce_scatter_block` (`block`).
///
/// # Safety
/// MPI's contract on the buffers, the array and `request`.
#[allow(clippy::too_many_arguments)]
pub unsafe fn ireduce_scatter(
    acc: &mut Access,
    sendbuf: *const c_void,
    recvbuf: *mut c_void,
    counts: *const c_int,
    block: Option<c_int>,
    dt: Datatype,
    op: abi::Op,
    comm: abi::Comm,
    request: *mut abi::Request,
) -> Res<()> {
    if is_inter(acc, comm) {
        // SAFETY: the caller's contract.
        return unsafe { inter::ireduce_scatter(acc, sendbuf, recvbuf, counts, block, dt, op, comm, request) };
    }
    let (c, ci, _) = begin(acc, comm)?;
    let (n, me) = (c.size as usize, c.rank as usize);
    let counts: Vec<usize> = match block {
        Some(b) if b < 0 => return Err(Fail::new(abi::ERR_COUNT, Some(ci), Why::Count(b))),
        Some(b) => vec![b as usize; n],
        None => {
            if counts.is_null() {
                return Err(null_arg(Some(ci), "recvcounts"));
            }
            // SAFETY: MPI's contract: `size` ints.
            let v = unsafe { std::slice::from_raw_parts(counts, n) };
            v.iter()
                .map(|&k| if k < 0 { Err(Fail::new(abi::ERR_COUNT, Some(ci), Why::Count(k))) } else { Ok(k as usize) })
                .collect::<Res<_>>()?
        }
    };
    let (red, keep) = reduction_kept(acc.st(), op, dt, ci)?;
    let total = counts.iter().sum::<usize>();
    let total_c = c_int::try_from(total)
        .map_err(|_| Fail::new(abi::ERR_COUNT, Some(ci), Why::Arg("the counts add up past INT_MAX")))?;
    // SAFETY: MPI's contract on the input.
    let data = unsafe { reduction_input(acc, sendbuf, recvbuf, total_c, dt, ci)? };
    let mut s = Sched::new(&c, Some(red));
    s.keep = keep;
    let len = data.len();
    let b = s.buf(data);
    if len > 0 {
        let per = len / total;
        s.reduce(&c, 0, b);
        s.bcast(&c, 0, b);
        let start = counts[..me].iter().sum::<usize>() * per;
        let l = layout_at(acc, recvbuf.cast_const().cast(), counts[me] as c_int, dt, ci)?;
        s.outputs.push((Sink::new(l), at(b, start..start + counts[me] * per)));
    }
    submit(acc, ci, s, request)
}

/// `MPI_Iscan` and `MPI_Iexscan`: recursive doubling, a round per step.
///
/// # Safety
/// MPI's contract on the buffers and `request`.
#[allow(clippy::too_many_arguments)]
pub unsafe fn iscan(
    acc: &mut Access,
    sendbuf: *const c_void,
    recvbuf: *mut c_void,
    count: c_int,
    dt: Datatype,
    op: abi::Op,
    comm: abi::Comm,
    exclusive: bool,
    request: *mut abi::Request,
) -> Res<()> {
    let (c, ci, _) = begin(acc, comm)?;
    if count < 0 {
        return Err(Fail::new(abi::ERR_COUNT, Some(ci), Why::Count(count)));
    }
    let (red, keep) = reduction_kept(acc.st(), op, dt, ci)?;
    // SAFETY: MPI's contract on the input.
    let data = unsafe { reduction_input(acc, sendbuf, recvbuf, count, dt, ci)? };
    let len = data.len();
    let mut s = Sched::new(&c, Some(red));
    s.keep = keep;
    let (n, me) = (c.size as usize, c.rank as usize);
    let result = s.buf(data.clone());
    let partial = s.buf(data);
    let tmp = s.buf(vec![0u8; len]);
    if len > 0 {
        let mut have = !exclusive;
        let mut mask = 1;
        let mut after: Vec<Step> = Vec::new();
        while mask < n {
            let peer = me ^ mask;
            if peer < n {
                let mut steps = std::mem::take(&mut after);
                steps.push(Step::Send { to: c.world[peer], from: at(partial, 0..len), off: 0 });
                steps.push(Step::Recv { from: c.world[peer], into: at(tmp, 0..len), off: 0 });
                s.round(steps);
                if peer < me {
                    after.push(if have {
                        Step::Reduce { dst: at(result, 0..len), src: at(tmp, 0..len), lower: true }
                    } else {
                        Step::Copy { dst: at(result, 0..len), src: at(tmp, 0..len) }
                    });
                    have = true;
                    after.push(Step::Reduce { dst: at(partial, 0..len), src: at(tmp, 0..len), lower: true });
                } else {
                    after.push(Step::Reduce { dst: at(partial, 0..len), src: at(tmp, 0..len), lower: false });
                }
            }
            mask <<= 1;
        }
        s.round(after);
        if have {
            let l = layout_at(acc, recvbuf.cast_const().cast(), count, dt, ci)?;
            s.outputs.push((Sink::new(l), at(result, 0..len)));
        }
    }
    submit(acc, ci, s, request)
}

/// One round exchanging blocks directly: `send[i]` to rank `i` (skipped when `None` or empty),
/// `recv[i]` from rank `i` into the caller's memory at completion; this rank's own block copied.
///
/// # Safety
/// MPI's contract on the buffers the layouts describe.
unsafe fn direct(s: &mut Sched, c: &Comm, send: Vec<Option<Vec<u8>>>, recv: Vec<Option<Layout>>, ci: usize) -> Res<()> {
    let me = c.rank as usize;
    let mut steps = Vec::new();
    let mut own_send = None;
    for (i, data) in send.into_iter().enumerate() {
        let Some(data) = data else { continue };
        if i == me {
            own_send = Some(data);
            continue;
        }
        if data.is_empty() {
            continue;
        }
        let len = data.len();
        let b = s.buf(data);
        steps.push(Step::Send { to: c.world[i], from: at(b, 0..len), off: 0 });
    }
    for (i, l) in recv.into_iter().enumerate() {
        let Some(l) = l else { continue };
        let len = l.len();
        if i == me {
            if let Some(data) = own_send.take() {
                if data.len() != len {
                    return Err(mismatch(ci, len, data.len()));
                }
                let b = s.buf(data);
                s.outputs.push((Sink::new(l), at(b, 0..len)));
            }
            continue;
        }
        if len == 0 {
            continue;
        }
        let b = s.buf(vec![0u8; len]);
        steps.push(Step::Recv { from: c.world[i], into: at(b, 0..len), off: 0 });
        s.outputs.push((Sink::new(l), at(b, 0..len)));
    }
    s.round(steps);
    Ok(())
}

/// Packed copies of blocks.
///
/// # Safety
/// MPI's contract: the blocks are readable.
unsafe fn packed(b: &[Layout]) -> Vec<Option<Vec<u8>>> {
    // SAFETY: the caller's contract.
    b.iter().map(|l| Some(unsafe { source(l) }.into_owned())).collect()
}

/// What a gather-like or scatter-like call gives: per rank, this rank's send and receive sides.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Shape {
    Gather,
    Scatter,
    Allgather,
    Alltoall,
}

/// Where a side's blocks are: one block of `count` (`many` false), a block of `count` per member
/// (`regular`), the v-form's arrays, or the w-form's (`types` given).
pub(super) fn side_of(
    many: bool,
    regular: bool,
    count: c_int,
    counts: *const c_int,
    displs: *const c_int,
    types: Option<*const Datatype>,
) -> Side {
    match (many, regular, types) {
        (false, _, _) => Side::One(count),
        (true, true, _) => Side::Regular(count),
        (true, false, None) => Side::V(counts, displs),
        (true, false, Some(types)) => Side::W(counts, Displs::Int(displs), types),
    }
}

/// `MPI_Igather(v)`, `MPI_Iscatter(v)`, `MPI_Iallgather(v)`, `MPI_Ialltoall(v/w)`: each side
/// given as `(buffer, count, counts, displacements, datatype, datatypes)`; the regular forms use
/// the count (`regular`), the v-forms the arrays, the `w` form the datatypes too.
///
/// # Safety
/// MPI's contract on the buffers, arrays and `request`.
#[allow(clippy::too_many_arguments)]
pub unsafe fn iblocks(
    acc: &mut Access,
    shape: Shape,
    send: (*const c_void, c_int, *const c_int, *const c_int, Datatype, Option<*const Datatype>),
    recv: (*mut c_void, c_int, *const c_int, *const c_int, Datatype, Option<*const Datatype>),
    regular: bool,
    root: Option<c_int>,
    comm: abi::Comm,
    request: *mut abi::Request,
) -> Res<()> {
    if is_inter(acc, comm) {
        // SAFETY: the caller's contract.
        return unsafe { inter::iblocks(acc, shape, send, recv, regular, root, comm, request) };
    }
    let (c, ci, _) = begin(acc, comm)?;
    let (n, me) = (c.size as usize, c.rank as usize);
    let root = root.map(|r| check_root(r, &c, ci)).transpose()?;
    let is_root = root == Some(me);
    let (sbuf, scount, scounts, sdispls, stype, stypes) = send;
    let (rbuf, rcount, rcounts, rdispls, rtype, rtypes) = recv;
    #[allow(clippy::too_many_arguments)]
    let side = |acc: &mut Access,
                base: *const c_void,
                count: c_int,
                counts: *const c_int,
                displs: *const c_int,
                dt: Datatype,
                types: Option<*const Datatype>,
                many: bool| {
        let side = side_of(many, regular, count, counts, displs, types);
        // SAFETY: MPI's contract on the arrays.
        unsafe { layouts(acc, base.cast(), side, dt, n, ci) }
    };
    let mut s = Sched::new(&c, None);
    let in_place_send = is_in_place(sbuf);
    let in_place_recv = is_in_place(rbuf.cast_const());
    match shape {
        Shape::Gather => {
            if in_place_send && !is_root {
                return Err(in_place_misused(ci));
            }
            let root = root.unwrap_or(0);
            if is_root {
                let recv = side(acc, rbuf.cast_const(), rcount, rcounts, rdispls, rtype, rtypes, true)?;
                let mut sends: Vec<Option<Vec<u8>>> = (0..n).map(|_| None).collect();
                if !in_place_send {
                    let mine = side(acc, sbuf, scount, std::ptr::null(), std::ptr::null(), stype, None, false)?;
                    // SAFETY: MPI's contract.
                    sends[me] = unsafe { packed(&mine) }.pop().flatten();
                }
                let mut recvs: Vec<Option<Layout>> = recv.into_iter().map(Some).collect();
                if in_place_send {
                    recvs[me] = None;
                }
                // SAFETY: MPI's contract on the buffers.
                unsafe { direct(&mut s, &c, sends, recvs, ci)? };
            } else {
                let mine = side(acc, sbuf, scount, std::ptr::null(), std::ptr::null(), stype, None, false)?;
                let mut sends: Vec<Option<Vec<u8>>> = (0..n).map(|_| None).collect();
                // SAFETY: MPI's contract.
                sends[root] = unsafe { packed(&mine) }.pop().flatten();
                // SAFETY: MPI's contract on the buffers.
                unsafe { direct(&mut s, &c, sends, (0..n).map(|_| None).collect(), ci)? };
            }
        }
        Shape::Scatter => {
            if in_place_recv && !is_root {
                return Err(in_place_misused(ci));
            }
            let root = root.unwrap_or(0);
            let mut recvs: Vec<Option<Layout>> = (0..n).map(|_| None).collect();
            if !(is_root && in_place_recv) {
                let mine =
                    side(acc, rbuf.cast_const(), rcount, std::ptr::null(), std::ptr::null(), rtype, None, false)?;
                recvs[root] = mine.into_iter().next();
            }
            let sends = if is_root {
                let all = side(acc, sbuf, scount, scounts, sdispls, stype, stypes, true)?;
                // SAFETY: MPI's contract.
                let mut v = unsafe { packed(&all) };
                if in_place_recv {
                    v[me] = None;
                }
                v
            } else {
                (0..n).map(|_| None).collect()
            };
            // SAFETY: MPI's contract on the buffers.
            unsafe { direct(&mut s, &c, sends, recvs, ci)? };
        }
        Shape::Allgather | Shape::Alltoall => {
            let recv = side(acc, rbuf.cast_const(), rcount, rcounts, rdispls, rtype, rtypes, true)?;
            let sends: Vec<Option<Vec<u8>>> = if in_place_send {
                // SAFETY: MPI's contract: the data is in the receive buffer (packed now, before
                // any of it is overwritten).
                let mut v = unsafe { packed(&recv) };
                if matches!(shape, Shape::Allgather) {
                    let mine = v[me].take();
                    v = (0..n).map(|_| mine.clone()).collect();
                }
                v
            } else if matches!(shape, Shape::Allgather) {
                let mine = side(acc, sbuf, scount, std::ptr::null(), std::ptr::null(), stype, None, false)?;
                // SAFETY: MPI's contract.
                let one = unsafe { packed(&mine) }.pop().flatten();
                (0..n).map(|_| one.clone()).collect()
            } else {
                let all = side(acc, sbuf, scount, scounts, sdispls, stype, stypes, true)?;
                // SAFETY: MPI's contract.
                unsafe { packed(&all) }
            };
            let recvs = recv.into_iter().map(Some).collect();
            // SAFETY: MPI's contract on the buffers.
            unsafe { direct(&mut s, &c, sends, recvs, ci)? };
        }
    }
    submit(acc, ci, s, request)
}

// ---------------------------------------------------------------------------------------------
// Neighbourhood collectives.

/// `MPI_(I)neighbor_allgather(v)` (`alltoall` false) and `MPI_(I)neighbor_alltoall(v/w)`: one
/// round, a message to every out-neighbour and from every in-neighbour (`MPI_PROC_NULL`
/// neighbours of a Cartesian grid are skipped, their blocks untouched). The blocking forms
/// (`request` `None`) wait for it.
///
/// # Safety
/// MPI's contract on the buffers, arrays and `request`.
#[allow(clippy::too_many_arguments)]
pub unsafe fn neighbor(
    acc: &mut Access,
    alltoall: bool,
    send: (*const c_void, Side, Datatype),
    recv: (*mut c_void, Side, Datatype),
    comm: abi::Comm,
    request: Option<*mut abi::Request>,
) -> Res<()> {
    let (c, ci, _) = begin(acc, comm)?;
    let (ins, outs) = crate::topo::neighbour_lists(&c, ci)?;
    // SAFETY: MPI's contract on the arrays.
    let sends = unsafe { layouts(acc, send.0.cast(), send.1, send.2, outs.len(), ci)? };
    // SAFETY: MPI's contract on the arrays.
    let recvs = unsafe { layouts(acc, recv.0.cast_const().cast(), recv.1, recv.2, ins.len(), ci)? };
    let mut s = Sched::new(&c, None);
    let mut steps = Vec::new();
    let shared = if alltoall {
        None
    } else {
        // SAFETY: MPI's contract: the send buffer holds the block.
        let data = unsafe { source(&sends[0]) }.into_owned();
        let len = data.len();
        Some((s.buf(data), len))
    };
    for (k, &(r, off)) in outs.iter().enumerate() {
        if r == abi::PROC_NULL {
            continue;
        }
        let (b, len) = match shared {
            Some(x) => x,
            None => {
                // SAFETY: MPI's contract: the send buffer holds every block.
                let data = unsafe { source(&sends[k]) }.into_owned();
                let len = data.len();
                (s.buf(data), len)
            }
        };
        if len > 0 {
            steps.push(Step::Send { to: c.world[r as usize], from: at(b, 0..len), off });
        }
    }
    for (l, &(r, off)) in recvs.into_iter().zip(&ins) {
        let len = l.len();
        if r == abi::PROC_NULL || len == 0 {
            continue;
        }
        let b = s.buf(vec![0u8; len]);
        steps.push(Step::Recv { from: c.world[r as usize], into: at(b, 0..len), off });
        s.outputs.push((Sink::new(l), at(b, 0..len)));
    }
    s.round(steps);
    if let Some(request) = request {
        return submit(acc, ci, s, request);
    }
    let mut h = abi::REQUEST_NULL;
    submit(acc, ci, s, &mut h)?;
    // SAFETY: `h` is the request just made; the status is ignored.
    unsafe { crate::p2p::complete::wait(acc, &mut h, abi::STATUS_IGNORE as *mut abi::Status) }
}

/// `MPI_Comm_idup`: the context agreement of `MPI_Comm_dup` as a schedule (its rounds repeat
/// until the agreement succeeds) with this communicator's next non-blocking collective tag; the
/// attributes are copied now (their copy callbacks run at the call, as `MPI_Comm_dup`'s), the
/// new communicator made and its handle written to `newcomm` when the request completes.
/// Several may be in flight on one communicator, beside other collectives: each is its own
/// creation (`Key`: the parent's context and the instance's number), ordered as the members
/// started them. On an intercommunicator the local group agrees on two contexts (the new
/// intercommunicator's and its local group's) in its local communicator, the groups' rank 0s
/// swap their receive contexts, and each broadcasts the other's in its group.
///
/// # Safety
/// `newcomm` writable until the request completes; `request` writable.
pub unsafe fn idup(acc: &mut Access, comm: abi::Comm, newcomm: *mut abi::Comm, request: *mut abi::Request) -> Res<()> {
    let (c, ci, _) = crate::coll::begin_any(acc, comm)?;
    if newcomm.is_null() {
        return Err(null_arg(Some(ci), "newcomm"));
    }
    if request.is_null() {
        return Err(null_arg(Some(ci), "request"));
    }
    let attrs = crate::attr::copies(acc, ci)?;
    // The instance's tag is the intercommunicator's (both groups number its collectives alike);
    // its local rounds run in the local group's collective context, unused by anything else
    // with this tag.
    let red = Some(context::round_reduction());
    let mut s = match &c.local {
        Some(l) => Sched::inter(&c, l, red),
        None => Sched::new(&c, red),
    };
    let seq = ((s.tag - NBC) / NBC_STRIDE) as u32;
    let buf = s.buf(Vec::new());
    let (parent, want, remote) = match &c.local {
        Some(l) => {
            let (mine, theirs) = (s.buf(vec![0u8; 4]), s.buf(vec![0u8; 4]));
            (l.clone(), 2, Some((c.world[0], mine, theirs)))
        }
        None => (c.clone(), 1, None),
    };
    let key = (parent.ctx, seq);
    s.agree = Some(Box::new(Agreement { key, parent: parent.clone(), buf, want, got: Vec::new(), remote }));
    s.agreement_rounds(&parent);
    s.idup = Some(Idup { ci, attrs, out: newcomm });
    submit(acc, ci, s, request)
}
