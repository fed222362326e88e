//! Non-blocking collectives on intercommunicators (MPI-3.1 §5.12: every one with a blocking
//! intercommunicator form; their persistent forms start these): `MPI_Ibarrier`, `MPI_Ibcast`,
//! `MPI_Ireduce`, `MPI_Iallreduce`, `MPI_Ireduce_scatter(_block)`, `MPI_Igather(v)`,
//! `MPI_Iscatter(v)`, `MPI_Iallgather(v)`, `MPI_Ialltoall(v/w)`. The calls of `calls.rs` hand
//! an intercommunicator here.
//!
//! Each is the blocking algorithm of `coll::inter` (and of the intercommunicator branches of
//! `coll::vector`) as rounds, so results are the same: a local step in one group, one transfer
//! between the groups' rank 0s (or the root), a local step in the other; all-to-all forms and
//! the v-forms move blocks directly to and from every remote member.
//!
//! Invariants:
//! - the schedule takes its tag from the intercommunicator's numbering (both groups start its
//!   collectives in the same order), runs its local steps in the local group's collective
//!   context (nothing else there uses that tag) and its transfers between the groups in the
//!   intercommunicator's (`Step::SendAcross`/`RecvAcross`);
//! - roles as the blocking forms: `MPI_ROOT` at the root, `MPI_PROC_NULL` at the other members of
//!   its group (nothing to do), the root's rank in the other group;
//! - `MPI_IN_PLACE` is refused (`MPI_ERR_BUFFER`) in any buffer the role uses.

use std::ffi::{c_int, c_void};

use super::calls::{Shape, side_of};
use super::{At, Sched, Step, at, submit};
use crate::abi::{self, Datatype};
use crate::coll::algo::Reduction;
use crate::coll::inter::{self, Role};
use crate::coll::vector::{Sink, block_counts, layouts, source};
use crate::coll::{in_place_misused, is_in_place, reduction_kept, times};
use crate::comm::Comm;
use crate::datatype::Layout;
use crate::error::{Fail, Res, Why};
use crate::state::Access;

/// A buffer argument of the block collectives: `(buffer, count, counts, displacements,
/// datatype, datatypes)` (see `calls::iblocks`).
pub type Arg<P> = (P, c_int, *const c_int, *const c_int, Datatype, Option<*const Datatype>);

impl Sched {
    /// A schedule on intercommunicator `c` whose local group is `local`.
    pub(super) fn inter(c: &Comm, local: &Comm, red: Option<Reduction>) -> Sched {
        let mut s = Sched::new(c, red);
        s.ctx = local.coll_ctx();
        s.across = Some((c.coll_ctx(), c.coll_send_ctx()));
        s
    }

    /// The groups' rank 0s swap `mine` for `theirs` (this being rank 0 of `c`'s local group).
    fn swap(&mut self, c: &Comm, mine: At, theirs: At) {
        let leader = c.world[0];
        self.round(vec![Step::SendAcross { to: leader, from: mine }, Step::RecvAcross { from: leader, into: theirs }]);
    }

    /// Gathers `mine` (one block per member) at `local` rank 0 in rank order, the flat way the
    /// blocking form does: the buffer of the whole at rank 0 (of `mine` elsewhere).
    fn gather_local(&mut self, local: &Comm, mine: Vec<u8>, ci: usize) -> Res<usize> {
        let (block, n) = (mine.len(), local.size as usize);
        if local.rank != 0 {
            let b = self.buf(mine);
            if block > 0 {
                self.round(vec![Step::Send { to: local.world[0], from: at(b, 0..block), off: 0 }]);
            }
            return Ok(b);
        }
        let mut all = vec![0u8; times(block, n, ci)?];
        all[..block].copy_from_slice(&mine);
        let b = self.buf(all);
        if block > 0 {
            let from = |i: usize| Step::Recv { from: local.world[i], into: at(b, i * block..(i + 1) * block), off: 0 };
            self.round((1..n).map(from).collect());
        }
        Ok(b)
    }

    /// Scatters the blocks of `all` (at `local` rank 0) among `local`, block `i` into member
    /// `i`'s `mine` (`block` bytes each).
    fn scatter_local(&mut self, local: &Comm, all: usize, mine: usize, block: usize) {
        if block == 0 {
            return;
        }
        if local.rank != 0 {
            self.round(vec![Step::Recv { from: local.world[0], into: at(mine, 0..block), off: 0 }]);
            return;
        }
        let mut steps = vec![Step::Copy { dst: at(mine, 0..block), src: at(all, 0..block) }];
        let n = local.size as usize;
        steps.extend((1..n).map(|i| Step::Send {
            to: local.world[i],
            from: at(all, i * block..(i + 1) * block),
            off: 0,
        }));
        self.round(steps);
    }

    /// One round of direct transfers with the remote members: `send[j]` to remote member `j`,
    /// `recv[j]` from it into the caller's memory at completion (empty blocks skipped, as the
    /// blocking forms skip them).
    fn direct_across(&mut self, c: &Comm, send: Vec<Vec<u8>>, recv: Vec<Layout>) {
        let mut steps = Vec::new();
        for (data, &w) in send.into_iter().zip(c.world.iter()) {
            let len = data.len();
            if len > 0 {
                let b = self.buf(data);
                steps.push(Step::SendAcross { to: w, from: at(b, 0..len) });
            }
        }
        for (l, &w) in recv.into_iter().zip(c.world.iter()) {
            let len = l.len();
            if len > 0 {
                let b = self.buf(vec![0u8; len]);
                steps.push(Step::RecvAcross { from: w, into: at(b, 0..len) });
                self.outputs.push((Sink::new(l), at(b, 0..len)));
            }
        }
        self.round(steps);
    }

    /// A buffer of `len` zero bytes whose content goes to `sink` at completion.
    fn output(&mut self, sink: Sink) -> (usize, usize) {
        let len = sink.len();
        let b = self.buf(vec![0u8; len]);
        self.outputs.push((sink, at(b, 0..len)));
        (b, len)
    }
}

/// The packed bytes of `count` elements of `dt` at `buf` (`MPI_IN_PLACE` refused).
///
/// # Safety
/// MPI's contract: `buf` holds the data.
unsafe fn packed(acc: &mut Access, buf: *const c_void, count: c_int, dt: Datatype, ci: usize) -> Res<Vec<u8>> {
    // SAFETY: the caller's contract.
    unsafe { inter::packed(acc, buf, count, dt, ci) }
}

/// The per-member layouts of a block argument over `n` members (`MPI_IN_PLACE` refused).
///
/// # Safety
/// MPI's contract on the arrays.
unsafe fn blocks_of(acc: &mut Access, a: Arg<*const c_void>, regular: bool, n: usize, ci: usize) -> Res<Vec<Layout>> {
    if is_in_place(a.0) {
        return Err(in_place_misused(ci));
    }
    let side = side_of(true, regular, a.1, a.2, a.3, a.5);
    // SAFETY: the caller's contract.
    unsafe { layouts(acc, a.0.cast(), side, a.4, n, ci) }
}

/// Packed copies of blocks.
///
/// # Safety
/// MPI's contract: the blocks are readable.
unsafe fn packed_blocks(b: &[Layout]) -> Vec<Vec<u8>> {
    // SAFETY: the caller's contract.
    b.iter().map(|l| unsafe { source(l) }.into_owned()).collect()
}

/// `MPI_Ibarrier`: a barrier in each group, the rank 0s swap empty messages, a barrier in each
/// group again.
pub fn ibarrier(acc: &mut Access, comm: abi::Comm, request: *mut abi::Request) -> Res<()> {
    let (c, local, ci, _) = inter::begin(acc, comm)?;
    let mut s = Sched::inter(&c, &local, None);
    s.barrier(&local);
    if local.rank == 0 {
        let b = s.buf(Vec::new());
        s.swap(&c, at(b, 0..0), at(b, 0..0));
    }
    s.barrier(&local);
    submit(acc, ci, s, request)
}

/// `MPI_Ibcast`: root → remote rank 0 → broadcast in the remote group.
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
    let (c, local, ci, _) = inter::begin(acc, comm)?;
    let mut s = Sched::inter(&c, &local, None);
    match inter::role(root, &c, ci)? {
        Role::Idle => {}
        Role::Root => {
            // SAFETY: MPI's contract.
            let data = unsafe { packed(acc, buf, count, dt, ci) }?;
            let len = data.len();
            let b = s.buf(data);
            s.round(vec![Step::SendAcross { to: c.world[0], from: at(b, 0..len) }]);
        }
        Role::Member(from) => {
            let (b, len) = s.output(inter::sink(acc, buf, count, dt, ci)?);
            if local.rank == 0 {
                s.round(vec![Step::RecvAcross { from, into: at(b, 0..len) }]);
            }
            if len > 0 {
                s.bcast(&local, 0, b);
            }
        }
    }
    submit(acc, ci, s, request)
}

/// `MPI_Ireduce` (`root` given: the root gets the reduction of the other group's data, reduced
/// in rank order to its rank 0) and `MPI_Iallreduce` (each group reduces to its rank 0, the rank
/// 0s swap, each broadcasts what it got).
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
    let (c, local, ci, _) = inter::begin(acc, comm)?;
    let role = root.map(|r| inter::role(r, &c, ci)).transpose()?;
    if let Some(Role::Idle) = role {
        // Nothing to do, and no argument significant.
        return submit(acc, ci, Sched::inter(&c, &local, None), request);
    }
    let (red, keep) = reduction_kept(acc.st(), op, dt, ci)?;
    let mut s = Sched::inter(&c, &local, Some(red));
    s.keep = keep;
    match role {
        Some(Role::Idle) => {}
        Some(Role::Root) => {
            let (b, len) = s.output(inter::sink(acc, recvbuf, count, dt, ci)?);
            s.round(vec![Step::RecvAcross { from: c.world[0], into: at(b, 0..len) }]);
        }
        Some(Role::Member(to)) => {
            // SAFETY: MPI's contract.
            let data = unsafe { packed(acc, sendbuf, count, dt, ci) }?;
            let len = data.len();
            let b = s.buf(data);
            if len > 0 {
                s.reduce(&local, 0, b);
            }
            if local.rank == 0 {
                s.round(vec![Step::SendAcross { to, from: at(b, 0..len) }]);
            }
        }
        None => {
            // SAFETY: MPI's contract.
            let data = unsafe { packed(acc, sendbuf, count, dt, ci) }?;
            let sink = inter::sink(acc, recvbuf, count, dt, ci)?;
            let len = data.len();
            if len > 0 {
                let b = s.buf(data);
                let theirs = s.buf(vec![0u8; len]);
                s.reduce(&local, 0, b);
                if local.rank == 0 {
                    s.swap(&c, at(b, 0..len), at(theirs, 0..len));
                }
                s.bcast(&local, 0, theirs);
                s.outputs.push((sink, at(theirs, 0..len)));
            }
        }
    }
    submit(acc, ci, s, request)
}

/// `MPI_Ireduce_scatter` (`counts`, one per local member) and `MPI_Ireduce_scatter_block`
/// (`block` each): the reduction of the other group's vectors (each as long as the sum of its
/// own group's counts, as the blocking form) scattered among this group by the counts.
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
    let (c, local, ci, _) = inter::begin(acc, comm)?;
    let (n, me) = (local.size as usize, local.rank as usize);
    // SAFETY: MPI's contract: the local group's size of counts.
    let counts = unsafe { block_counts(counts, block, n, ci) }?;
    let (red, keep) = reduction_kept(acc.st(), op, dt, ci)?;
    let total: usize = counts.iter().sum();
    let total_c = c_int::try_from(total)
        .map_err(|_| Fail::new(abi::ERR_COUNT, Some(ci), Why::Arg("the counts add up past INT_MAX")))?;
    // SAFETY: MPI's contract.
    let data = unsafe { packed(acc, sendbuf, total_c, dt, ci) }?;
    let sink = inter::sink(acc, recvbuf, counts[me] as c_int, dt, ci)?;
    let mut s = Sched::inter(&c, &local, Some(red));
    s.keep = keep;
    let len = data.len();
    if len > 0 {
        let per = len / total;
        let b = s.buf(data);
        let theirs = s.buf(vec![0u8; len]);
        s.reduce(&local, 0, b);
        if me == 0 {
            s.swap(&c, at(b, 0..len), at(theirs, 0..len));
        }
        s.bcast(&local, 0, theirs);
        let start = counts[..me].iter().sum::<usize>() * per;
        s.outputs.push((sink, at(theirs, start..start + counts[me] * per)));
    }
    submit(acc, ci, s, request)
}

/// `MPI_Igather(v)`, `MPI_Iscatter(v)`, `MPI_Iallgather(v)`, `MPI_Ialltoall(v/w)` on an
/// intercommunicator (arguments as `calls::iblocks`).
///
/// # Safety
/// MPI's contract on the buffers, arrays and `request`.
#[allow(clippy::too_many_arguments)]
pub unsafe fn iblocks(
    acc: &mut Access,
    shape: Shape,
    send: Arg<*const c_void>,
    recv: Arg<*mut c_void>,
    regular: bool,
    root: Option<c_int>,
    comm: abi::Comm,
    request: *mut abi::Request,
) -> Res<()> {
    let (c, local, ci, _) = inter::begin(acc, comm)?;
    let s = Sched::inter(&c, &local, None);
    let c = (&*c, &*local);
    let role = match root {
        Some(r) => Some(inter::role(r, c.0, ci)?),
        None => None,
    };
    let recv = (recv.0.cast_const(), recv.1, recv.2, recv.3, recv.4, recv.5);
    // SAFETY: the caller's contract.
    let s = unsafe {
        match (shape, role) {
            (_, Some(Role::Idle)) => s,
            (Shape::Gather, Some(role)) => igather(acc, s, c, role, send, recv, regular, ci)?,
            (Shape::Scatter, Some(role)) => iscatter(acc, s, c, role, send, recv, regular, ci)?,
            (Shape::Allgather, _) if regular => iallgather(acc, s, c, send, recv, ci)?,
            _ => ialltoall(acc, s, c.0, shape, send, recv, regular, ci)?,
        }
    };
    submit(acc, ci, s, request)
}

/// Gather: the root receives the whole from the remote rank 0, which gathered it (the regular
/// form), or every block from its member (the v-form).
///
/// # Safety
/// As [`iblocks`].
#[allow(clippy::too_many_arguments)]
unsafe fn igather(
    acc: &mut Access,
    mut s: Sched,
    (c, local): (&Comm, &Comm),
    role: Role,
    send: Arg<*const c_void>,
    recv: Arg<*const c_void>,
    regular: bool,
    ci: usize,
) -> Res<Sched> {
    let n = c.size as usize;
    match role {
        Role::Root if regular => {
            let sink = inter::sink(acc, recv.0.cast_mut(), inter::counts(recv.1, c.size, ci)?, recv.4, ci)?;
            let (b, len) = s.output(sink);
            s.round(vec![Step::RecvAcross { from: c.world[0], into: at(b, 0..len) }]);
        }
        Role::Root => {
            // SAFETY: the caller's contract.
            let blocks = unsafe { blocks_of(acc, recv, false, n, ci) }?;
            s.direct_across(c, Vec::new(), blocks);
        }
        Role::Member(to) => {
            // SAFETY: MPI's contract.
            let mine = unsafe { packed(acc, send.0, send.1, send.4, ci) }?;
            if regular {
                let all = s.gather_local(local, mine, ci)?;
                if local.rank == 0 {
                    let len = s.bufs[all].len();
                    s.round(vec![Step::SendAcross { to, from: at(all, 0..len) }]);
                }
            } else if !mine.is_empty() {
                let len = mine.len();
                let b = s.buf(mine);
                s.round(vec![Step::SendAcross { to, from: at(b, 0..len) }]);
            }
        }
        Role::Idle => {}
    }
    Ok(s)
}

/// Scatter: the root sends the whole to the remote rank 0, which scatters it (the regular
/// form), or every block to its member (the v-form).
///
/// # Safety
/// As [`iblocks`].
#[allow(clippy::too_many_arguments)]
unsafe fn iscatter(
    acc: &mut Access,
    mut s: Sched,
    (c, local): (&Comm, &Comm),
    role: Role,
    send: Arg<*const c_void>,
    recv: Arg<*const c_void>,
    regular: bool,
    ci: usize,
) -> Res<Sched> {
    let n = c.size as usize;
    match role {
        Role::Root if regular => {
            // SAFETY: MPI's contract.
            let data = unsafe { packed(acc, send.0, inter::counts(send.1, c.size, ci)?, send.4, ci) }?;
            let len = data.len();
            let b = s.buf(data);
            s.round(vec![Step::SendAcross { to: c.world[0], from: at(b, 0..len) }]);
        }
        Role::Root => {
            // SAFETY: the caller's contract.
            let blocks = unsafe { blocks_of(acc, send, false, n, ci) }?;
            // SAFETY: MPI's contract: the send buffer holds every block.
            s.direct_across(c, unsafe { packed_blocks(&blocks) }, Vec::new());
        }
        Role::Member(from) => {
            let sink = inter::sink(acc, recv.0.cast_mut(), recv.1, recv.4, ci)?;
            let (mine, block) = s.output(sink);
            if regular {
                let all = if local.rank == 0 {
                    let all = s.buf(vec![0u8; times(block, local.size as usize, ci)?]);
                    let len = s.bufs[all].len();
                    s.round(vec![Step::RecvAcross { from, into: at(all, 0..len) }]);
                    all
                } else {
                    mine
                };
                s.scatter_local(local, all, mine, block);
            } else if block > 0 {
                s.round(vec![Step::RecvAcross { from, into: at(mine, 0..block) }]);
            }
        }
        Role::Idle => {}
    }
    Ok(s)
}

/// Allgather (regular): each group gathers to its rank 0, the rank 0s swap, each broadcasts
/// what it got.
///
/// # Safety
/// As [`iblocks`].
unsafe fn iallgather(
    acc: &mut Access,
    mut s: Sched,
    (c, local): (&Comm, &Comm),
    send: Arg<*const c_void>,
    recv: Arg<*const c_void>,
    ci: usize,
) -> Res<Sched> {
    // SAFETY: MPI's contract.
    let mine = unsafe { packed(acc, send.0, send.1, send.4, ci) }?;
    let sink = inter::sink(acc, recv.0.cast_mut(), inter::counts(recv.1, c.size, ci)?, recv.4, ci)?;
    let all = s.gather_local(local, mine, ci)?;
    let (theirs, len) = s.output(sink);
    if local.rank == 0 {
        let mine = s.bufs[all].len();
        s.swap(c, at(all, 0..mine), at(theirs, 0..len));
    }
    if len > 0 {
        s.bcast(local, 0, theirs);
    }
    Ok(s)
}

/// Allgatherv and the all-to-all forms: every block directly to and from its remote member.
///
/// # Safety
/// As [`iblocks`].
#[allow(clippy::too_many_arguments)]
unsafe fn ialltoall(
    acc: &mut Access,
    mut s: Sched,
    c: &Comm,
    shape: Shape,
    send: Arg<*const c_void>,
    recv: Arg<*const c_void>,
    regular: bool,
    ci: usize,
) -> Res<Sched> {
    let n = c.size as usize;
    let sends = if shape == Shape::Allgather {
        // SAFETY: MPI's contract.
        let mine = unsafe { packed(acc, send.0, send.1, send.4, ci) }?;
        vec![mine; n]
    } else {
        // SAFETY: the caller's contract; the send buffer holds every block.
        unsafe { packed_blocks(&blocks_of(acc, send, regular, n, ci)?) }
    };
    // SAFETY: the caller's contract.
    let recvs = unsafe { blocks_of(acc, recv, regular, n, ci) }?;
    s.direct_across(c, sends, recvs);
    Ok(s)
}
