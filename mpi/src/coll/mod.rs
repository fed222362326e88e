//! Collective operations: argument checks, the two-level (node, then between nodes) structure,
//! and the choice of an algorithm per level by the pLogP models of [`model`] (parameters and
//! overrides in [`Tuning`]); broadcast, reduce, allreduce and barrier here, the one-block-per-member
//! operations in `blocks.rs`, the algorithms in [`algo`], the v- and w-forms in [`vector`],
//! intercommunicators in [`inter`], non-blocking forms in [`nbc`], shared areas in [`area`]; the
//! C arguments decoded once (`int` and `_c` counts, blocking, non-blocking and persistent forms)
//! in [`entry`].
//!
//! **Contexts.** Collectives run in the communicator's second context (`Comm::coll_ctx`), with
//! a tag per operation ([`tag`]), so they never match point-to-point messages on the same
//! communicator. Every member calls the collectives of a communicator in the same order (MPI
//! requires it) and messages between two ranks in one context are not overtaken, so consecutive
//! collectives cannot take each other's messages.
//!
//! **Levels.** When a communicator spans several nodes, broadcast, reduce, allreduce and barrier
//! work in two levels, as LaPIe does (`shared/reference/p2pmpi-lapie.md`, "Hierarchy"): inside each
//! node with the `shm` parameters, and among one leader per node with the `net` ones (the root's
//! node is led by the root). Gather, scatter, allgather and alltoall run over the whole
//! communicator with the parameters of its slowest level. `NEMESIS_COLL_NODES=K` pretends the
//! job's ranks form `K` nodes of consecutive ranks over one segment (testing).
//!
//! **Memory.** Collectives allocate scratch buffers (partial results, rotations); the
//! point-to-point fast path does not.

pub mod algo;
pub mod area;
mod blocks;
pub mod entry;
pub mod inter;
pub mod model;
pub mod nbc;
mod tuning;
pub mod typed;
pub mod vector;

pub use self::blocks::{allgather, allgather_team, alltoall, gather, scatter};
use self::blocks::{allgather_whole, alltoall_whole, gather_whole, run_gather, run_scatter, scatter_whole};
pub use self::tuning::{Force, Tuning};

use std::ffi::{c_int, c_void};

use std::sync::Arc;

use self::algo::{Ops, Reduction, Team};
use self::model::{Allreduce, Barrier, Bcast, Model, Params, Reduce};
use crate::abi::{self, Datatype, IN_PLACE};
use crate::comm::Comm;
use crate::datatype;
use crate::datatype::Kind;
use crate::error::{Fail, Res, Why};
use crate::op::{self, Loc, OpKind, UserCall};
use crate::p2p::{byte_len, in_bytes, intra_at, out_bytes};
use crate::state::{Access, not_running};

/// Tags of the collectives in the collective context.
pub mod tag {
    /// The set-up of a communicator's shared area ([`super::area`]).
    pub const AREA: i32 = 0;
    pub const BARRIER: i32 = 1;
    pub const BCAST: i32 = 2;
    pub const REDUCE: i32 = 3;
    pub const ALLREDUCE: i32 = 4;
    pub const GATHER: i32 = 5;
    pub const SCATTER: i32 = 6;
    pub const ALLGATHER: i32 = 7;
    pub const ALLTOALL: i32 = 8;
    /// Communicator creation (dup, split) and start-up exchanges.
    pub const COMM: i32 = 9;
    pub const GATHERV: i32 = 10;
    pub const SCATTERV: i32 = 11;
    pub const ALLGATHERV: i32 = 12;
    /// `MPI_Alltoallv` and `MPI_Alltoallw`.
    pub const ALLTOALLV: i32 = 13;
    /// `MPI_Reduce_scatter` and `MPI_Reduce_scatter_block`.
    pub const REDUCE_SCATTER: i32 = 14;
    /// `MPI_Scan` and `MPI_Exscan`.
    pub const SCAN: i32 = 15;
    /// `MPI_Comm_create_group` with the user's tag `t`: `COMM_GROUP + t` (`t` below 2^30).
    pub const COMM_GROUP: i32 = 16;
}

/// What every collective needs: the communicator (shared, so it outlives a pause of the lock),
/// its index, and the tuning in force. An intercommunicator is `MPI_ERR_COMM`: the collectives
/// made for them ([`inter`], and `nbc`'s intercommunicator schedules) are dispatched before this.
fn begin(acc: &mut Access, comm: abi::Comm) -> Res<(Arc<Comm>, usize, Tuning)> {
    let st = acc.st();
    if st.ep.is_none() {
        return Err(not_running(st.phase));
    }
    let (ci, c) = intra_at(&st.comms, comm)?;
    Ok((c.clone(), ci, st.tuning))
}

/// As [`begin`] for the collectives that take intercommunicators as they are (their partners
/// are `c.world`, the remote group on an intercommunicator).
fn begin_any(acc: &mut Access, comm: abi::Comm) -> Res<(Arc<Comm>, usize, Tuning)> {
    let st = acc.st();
    if st.ep.is_none() {
        return Err(not_running(st.phase));
    }
    let (ci, c) = crate::p2p::comm_at(&st.comms, comm)?;
    Ok((c.clone(), ci, st.tuning))
}

/// A rooted collective's start: [`begin`], the root checked, and `MPI_IN_PLACE` (`in_place`:
/// this rank's in-place argument) refused off the root.
fn begin_rooted(
    acc: &mut Access,
    comm: abi::Comm,
    root: c_int,
    in_place: bool,
) -> Res<(Arc<Comm>, usize, Tuning, usize)> {
    let (c, ci, tu) = begin(acc, comm)?;
    let root = check_root(root, &c, ci)?;
    if in_place && c.rank as usize != root {
        return Err(in_place_misused(ci));
    }
    Ok((c, ci, tu, root))
}

/// Gives a failure inside an algorithm its communicator.
fn on(ci: usize) -> impl Fn(Fail) -> Fail {
    move |mut f| {
        f.comm.get_or_insert(ci);
        f
    }
}

fn check_root(root: c_int, c: &Comm, ci: usize) -> Res<usize> {
    if root < 0 || root as u32 >= c.size {
        return Err(Fail::new(abi::ERR_ROOT, Some(ci), Why::Root { root, size: c.size }));
    }
    Ok(root as usize)
}

fn elem_size(dt: Datatype, ci: usize) -> Res<usize> {
    datatype::size_of_handle(dt).ok_or_else(|| Fail::new(abi::ERR_TYPE, Some(ci), Why::Type(dt)))
}

/// [`reduction_kept`] for a basic type (no layout to keep).
fn reduction(st: &crate::state::State, op: abi::Op, dt: Datatype, ci: usize) -> Res<Reduction> {
    reduction_kept(st, op, dt, ci).map(|r| r.0)
}

/// The reduction `op` names on elements of `dt`: a predefined operation the standard defines on
/// the type, `MPI_MINLOC`/`MPI_MAXLOC` on a pair type, or a user's (`MPI_Op_create`). A derived
/// type reduces as the one predefined type it is made of (its leaf), on packed data; a user's
/// operation gets the caller's layout: a non-contiguous type's data is unpacked for each call,
/// and the returned descriptor must be held as long as the reduction is used (its `UserCall`
/// points to it).
fn reduction_kept(
    st: &crate::state::State,
    op: abi::Op,
    dt: Datatype,
    ci: usize,
) -> Res<(Reduction, Option<Arc<crate::datatype::TypeDesc>>)> {
    let bad_type = || Fail::new(abi::ERR_TYPE, Some(ci), Why::Type(dt));
    let (leaf, desc) = match datatype::size_of_handle(dt) {
        Some(_) => (dt, None),
        None => {
            let d = datatype::resolve(&st.types, dt, ci)?;
            (d.leaf.ok_or_else(bad_type)?, Some(d))
        }
    };
    if let Some(u) = st.ops.get(op) {
        let (elem, layout) = match &desc {
            None => (datatype::size_of_handle(dt).unwrap_or(0), None),
            Some(d) if d.is_dense() => (d.size, None),
            Some(d) => (d.size, Some(Arc::as_ptr(d))),
        };
        if elem == 0 {
            return Err(bad_type());
        }
        let user = UserCall { f: u.f, commute: u.commute, dt, elem, layout };
        let keep = if layout.is_some() { desc } else { None };
        return Ok((Reduction { user: Some(user), ..Reduction::builtin(OpKind::Sum, Kind::Byte, elem) }, keep));
    }
    if let Some(loc) = Loc::lookup(op) {
        let Some((value, index)) = Loc::pair_kinds(leaf) else {
            return Err(Fail::new(abi::ERR_OP, Some(ci), Why::Op { op, dt }));
        };
        let elem = op::kind_size(value) + op::kind_size(index);
        return Ok((Reduction { loc: Some((loc, index)), ..Reduction::builtin(OpKind::Sum, value, elem) }, None));
    }
    let Some(t) = datatype::lookup(leaf) else {
        // A pair type (its descriptor is in the table): MINLOC and MAXLOC only.
        let pair =
            desc.is_some_and(|d| d.named.is_some_and(|h| Loc::pair_kinds(h).is_some() || h == abi::LONG_DOUBLE_INT));
        return Err(if pair { Fail::new(abi::ERR_OP, Some(ci), Why::Op { op, dt }) } else { bad_type() });
    };
    match OpKind::lookup(op) {
        Some(o) if o.applies_to(t) => Ok((Reduction::builtin(o, t.kind, t.size()), None)),
        _ => Err(Fail::new(abi::ERR_OP, Some(ci), Why::Op { op, dt })),
    }
}

fn is_in_place(p: *const c_void) -> bool {
    p as usize == IN_PLACE
}

#[cold]
fn in_place_misused(ci: usize) -> Fail {
    Fail::new(abi::ERR_BUFFER, Some(ci), Why::Arg("MPI_IN_PLACE is not allowed for this buffer on this rank"))
}

/// Refuses overlapping send and receive buffers (erroneous in MPI, and it would alias here).
fn disjoint(a: *const c_void, alen: usize, b: *const c_void, blen: usize, ci: usize) -> Res<()> {
    let (a, b) = (a as usize, b as usize);
    if alen > 0 && blen > 0 && a < b.saturating_add(blen) && b < a.saturating_add(alen) {
        return Err(Fail::new(abi::ERR_BUFFER, Some(ci), Why::Arg("the send and receive buffers overlap")));
    }
    Ok(())
}

/// `block × n` bytes, refusing sizes past the address space.
fn times(block: usize, n: usize, ci: usize) -> Res<usize> {
    block.checked_mul(n).ok_or_else(|| Fail::new(abi::ERR_COUNT, Some(ci), Why::Arg("buffer larger than memory")))
}

fn mismatch(ci: usize, expected: usize, got: usize) -> Fail {
    Fail::new(abi::ERR_TRUNCATE, Some(ci), Why::Mismatch { expected, got })
}

// ---------------------------------------------------------------------------------------------
// The levels.

/// The communicator's structure for two-level collectives.
struct Levels {
    /// Node of each communicator rank; `members[k]` the communicator ranks of node `k`.
    node: usize,
    /// Job ranks of this rank's node, and this rank's index among them.
    local: Vec<u32>,
    local_me: usize,
}

impl Levels {
    fn of(c: &Comm) -> Levels {
        let node = c.nodes.node_of[c.rank as usize] as usize;
        let mem = &c.nodes.members[node];
        let local = mem.iter().map(|&r| c.world[r as usize]).collect();
        let local_me = mem.iter().position(|&r| r == c.rank).unwrap_or(0);
        Levels { node, local, local_me }
    }

    fn local_team(&self) -> Team<'_> {
        Team { ranks: &self.local, me: self.local_me }
    }

    /// Job ranks of the leaders (the root leads its node, the first member the others).
    fn leaders(c: &Comm, root: Option<usize>) -> Vec<u32> {
        let root_node = root.map(|r| c.nodes.node_of[r] as usize);
        c.nodes
            .members
            .iter()
            .enumerate()
            .map(|(k, mem)| match root {
                Some(r) if Some(k) == root_node => c.world[r],
                _ => c.world[mem[0] as usize],
            })
            .collect()
    }
}

fn whole(c: &Comm) -> Team<'_> {
    Team { ranks: &c.world, me: c.rank as usize }
}

fn model(p: Params, ops: &Ops) -> Model {
    Model { p, chunk: ops.chunk() }
}

/// The model of the whole communicator (its slowest level).
fn flat_model(c: &Comm, tu: &Tuning, ops: &Ops) -> Model {
    model(if c.nodes.count() > 1 { tu.net } else { tu.shm }, ops)
}

// ---------------------------------------------------------------------------------------------
// Broadcast.

fn bcast_team(ops: &mut Ops, t: Team, root: usize, buf: &mut [u8], elem: usize, p: Params, tu: &Tuning) -> Res<()> {
    let n = t.size();
    if n <= 1 {
        return Ok(());
    }
    let m = model(p, ops);
    let best_chain = |m: &Model| {
        tu.segment.unwrap_or_else(|| {
            model::segment_sizes(buf.len(), elem, m.chunk)
                .map(|s| (m.bcast(Bcast::Chain(s), n, buf.len()), s))
                .fold((f64::INFINITY, m.chunk), |a, b| if b.0 < a.0 { b } else { a })
                .1
        })
    };
    let alg = match tu.force.bcast {
        Some(Bcast::Chain(_)) => Bcast::Chain(best_chain(&m)),
        Some(a) => a,
        None => match m.best_bcast(n, buf.len(), elem).1 {
            Bcast::Chain(s) => Bcast::Chain(tu.segment.unwrap_or(s)),
            a => a,
        },
    };
    match alg {
        Bcast::Flat => algo::bcast_flat(ops, t, root, buf),
        Bcast::Binomial => algo::bcast_binomial(ops, t, root, buf),
        Bcast::Chain(s) => algo::bcast_chain(ops, t, root, buf, s),
    }
}

/// The broadcast over intracommunicator `c`. This and the other `*_comm` and `*_whole` entries
/// make their point-to-point operations (`Ops`, in `c`'s collective context with `tag`) only once
/// the shared area declined: a collective through the area does not pay for them.
fn bcast_comm(
    access: &mut Access,
    tag: i32,
    c: &Comm,
    root: usize,
    buf: &mut [u8],
    elem: usize,
    tu: &Tuning,
) -> Res<()> {
    if area::bcast(access, c, root, buf, tu)? {
        return Ok(());
    }
    let ops = &mut Ops::new(access, c.coll_ctx(), tag)?;
    if c.nodes.count() <= 1 {
        return bcast_team(ops, whole(c), root, buf, elem, tu.shm, tu);
    }
    let lv = Levels::of(c);
    let leaders = Levels::leaders(c, Some(root));
    let me_world = c.world[c.rank as usize];
    if leaders[lv.node] == me_world {
        let root_node = c.nodes.node_of[root] as usize;
        bcast_team(ops, Team { ranks: &leaders, me: lv.node }, root_node, buf, elem, tu.net, tu)?;
    }
    let local_root = lv.local.iter().position(|&w| w == leaders[lv.node]).unwrap_or(0);
    bcast_team(ops, lv.local_team(), local_root, buf, elem, tu.shm, tu)
}

/// `MPI_Bcast`.
///
/// # Safety
/// MPI's contract: `buf` holds (root) or has room for `count` elements of `dt`.
pub unsafe fn bcast(
    acc: &mut Access,
    buf: *mut c_void,
    count: c_int,
    dt: Datatype,
    root: c_int,
    comm: abi::Comm,
) -> Res<()> {
    if inter::is_inter(acc, comm) {
        // SAFETY: the caller's contract.
        return unsafe { inter::bcast(acc, buf, count, dt, root, comm) };
    }
    if !typed::basic(dt) {
        // SAFETY: the caller's contract.
        return unsafe { typed::bcast(acc, buf, count, dt, root, comm) };
    }
    let (c, ci, tu) = begin(acc, comm)?;
    let (c, tu) = (&*c, &tu);
    let len = byte_len(count, dt, ci, buf.is_null())?;
    let root = check_root(root, c, ci)?;
    let elem = elem_size(dt, ci)?;
    if len == 0 {
        // Every member has nothing to move (the standard requires matching sizes).
        return Ok(());
    }
    // SAFETY: MPI's contract: `len` bytes at `buf`, read at the root and written elsewhere.
    let data = unsafe { out_bytes(buf, len) };
    bcast_comm(acc, tag::BCAST, c, root, data, elem, tu).map_err(on(ci))
}

// ---------------------------------------------------------------------------------------------
// Reduce and allreduce.

fn reduce_team(ops: &mut Ops, t: Team, root: usize, acc: &mut [u8], red: Reduction, p: Params, tu: &Tuning) -> Res<()> {
    let n = t.size();
    if n <= 1 {
        return Ok(());
    }
    let mut alg = tu.force.reduce.unwrap_or_else(|| model(p, ops).best_reduce(n, acc.len()).1);
    if alg == Reduce::Rabenseifner && !red.commutative() {
        // Recursive halving combines non-adjacent ranks: only for commutative operations.
        alg = Reduce::Binomial;
    }
    match alg {
        Reduce::Flat => algo::reduce_flat(ops, t, root, acc, red),
        Reduce::Binomial => algo::reduce_binomial(ops, t, root, acc, red),
        Reduce::Rabenseifner => algo::reduce_rabenseifner(ops, t, root, acc, red),
    }
}

fn reduce_comm(
    access: &mut Access,
    tag: i32,
    c: &Comm,
    root: usize,
    acc: &mut [u8],
    red: Reduction,
    tu: &Tuning,
) -> Res<()> {
    if area::reduce(access, c, root, acc, red, tu)? {
        return Ok(());
    }
    let ops = &mut Ops::new(access, c.coll_ctx(), tag)?;
    if !red.commutative() {
        // A non-commutative operation combines in rank order: over the whole communicator, to
        // rank 0 (the trees run on ranks relative to the root), then to the root.
        reduce_team(ops, whole(c), 0, acc, red, tu.shm, tu)?;
        return match c.rank as usize {
            0 if root != 0 => ops.send(c.world[root], acc),
            r if r == root && root != 0 => ops.recv(c.world[0], acc),
            _ => Ok(()),
        };
    }
    if c.nodes.count() <= 1 {
        return reduce_team(ops, whole(c), root, acc, red, tu.shm, tu);
    }
    let lv = Levels::of(c);
    let leaders = Levels::leaders(c, Some(root));
    let local_root = lv.local.iter().position(|&w| w == leaders[lv.node]).unwrap_or(0);
    reduce_team(ops, lv.local_team(), local_root, acc, red, tu.shm, tu)?;
    if leaders[lv.node] == c.world[c.rank as usize] {
        let root_node = c.nodes.node_of[root] as usize;
        reduce_team(ops, Team { ranks: &leaders, me: lv.node }, root_node, acc, red, tu.net, tu)?;
    }
    Ok(())
}

fn allreduce_team(ops: &mut Ops, t: Team, acc: &mut [u8], red: Reduction, p: Params, tu: &Tuning) -> Res<()> {
    let n = t.size();
    if n <= 1 {
        return Ok(());
    }
    let mut alg = tu.force.allreduce.unwrap_or_else(|| model(p, ops).best_allreduce(n, acc.len()).1);
    if alg == Allreduce::Rabenseifner && !red.commutative() {
        alg = Allreduce::RecursiveDoubling;
    }
    match alg {
        Allreduce::RecursiveDoubling => algo::allreduce_recursive_doubling(ops, t, acc, red),
        Allreduce::Rabenseifner => algo::allreduce_rabenseifner(ops, t, acc, red),
        Allreduce::ReduceBcast => {
            reduce_team(ops, t, 0, acc, red, p, tu)?;
            bcast_team(ops, t, 0, acc, red.elem, p, tu)
        }
    }
}

fn allreduce_comm(access: &mut Access, tag: i32, c: &Comm, acc: &mut [u8], red: Reduction, tu: &Tuning) -> Res<()> {
    if area::allreduce(access, c, acc, red, tu)? {
        return Ok(());
    }
    let ops = &mut Ops::new(access, c.coll_ctx(), tag)?;
    if c.nodes.count() <= 1 || !red.commutative() {
        return allreduce_team(ops, whole(c), acc, red, tu.shm, tu);
    }
    let lv = Levels::of(c);
    let leaders = Levels::leaders(c, None);
    reduce_team(ops, lv.local_team(), 0, acc, red, tu.shm, tu)?;
    if lv.local_me == 0 {
        allreduce_team(ops, Team { ranks: &leaders, me: lv.node }, acc, red, tu.net, tu)?;
    }
    bcast_team(ops, lv.local_team(), 0, acc, red.elem, tu.shm, tu)
}

/// `MPI_Reduce`.
///
/// # Safety
/// MPI's contract on the buffers (`sendbuf` may be `MPI_IN_PLACE` at the root).
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
    if inter::is_inter(acc, comm) {
        // SAFETY: the caller's contract.
        return unsafe { inter::reduce(acc, sendbuf, recvbuf, count, dt, op, root, comm) };
    }
    if datatype::size_of_handle(dt).is_none() {
        // SAFETY: the caller's contract.
        return unsafe { vector::reduce_any(acc, sendbuf, recvbuf, count, dt, op, Some(root), comm) };
    }
    let (c, ci, tu) = begin(acc, comm)?;
    let (c, tu) = (&*c, &tu);
    let root = check_root(root, c, ci)?;
    let is_root = c.rank as usize == root;
    let in_place = is_in_place(sendbuf);
    if in_place && !is_root {
        return Err(in_place_misused(ci));
    }
    let len = byte_len(count, dt, ci, !in_place && sendbuf.is_null())?;
    let red = reduction(acc.st(), op, dt, ci)?;
    if len == 0 {
        return Ok(());
    }
    if is_root {
        byte_len(count, dt, ci, recvbuf.is_null())?;
        if !in_place {
            disjoint(sendbuf, len, recvbuf, len, ci)?;
            // SAFETY: MPI's contract: `len` bytes readable at `sendbuf`, writable at `recvbuf`;
            // they do not overlap (checked).
            unsafe { std::ptr::copy_nonoverlapping(sendbuf as *const u8, recvbuf as *mut u8, len) };
        }
        // SAFETY: MPI's contract: `len` writable bytes at `recvbuf`.
        let data = unsafe { out_bytes(recvbuf, len) };
        reduce_comm(acc, tag::REDUCE, c, root, data, red, tu).map_err(on(ci))
    } else {
        // SAFETY: MPI's contract: `len` readable bytes at `sendbuf`.
        let mut data = unsafe { in_bytes(sendbuf, len) }.to_vec();
        reduce_comm(acc, tag::REDUCE, c, root, &mut data, red, tu).map_err(on(ci))
    }
}

/// `MPI_Allreduce`.
///
/// # Safety
/// MPI's contract on the buffers (`sendbuf` may be `MPI_IN_PLACE`).
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
    if inter::is_inter(acc, comm) {
        // SAFETY: the caller's contract.
        return unsafe { inter::allreduce(acc, sendbuf, recvbuf, count, dt, op, comm) };
    }
    if datatype::size_of_handle(dt).is_none() {
        // SAFETY: the caller's contract.
        return unsafe { vector::reduce_any(acc, sendbuf, recvbuf, count, dt, op, None, comm) };
    }
    let (c, ci, tu) = begin(acc, comm)?;
    let (c, tu) = (&*c, &tu);
    let in_place = is_in_place(sendbuf);
    let len = byte_len(count, dt, ci, recvbuf.is_null() || (!in_place && sendbuf.is_null()))?;
    let red = reduction(acc.st(), op, dt, ci)?;
    if len == 0 {
        return Ok(());
    }
    if !in_place {
        disjoint(sendbuf, len, recvbuf, len, ci)?;
        // SAFETY: MPI's contract; disjoint (checked).
        unsafe { std::ptr::copy_nonoverlapping(sendbuf as *const u8, recvbuf as *mut u8, len) };
    }
    // SAFETY: MPI's contract: `len` writable bytes at `recvbuf`.
    let data = unsafe { out_bytes(recvbuf, len) };
    allreduce_comm(acc, tag::ALLREDUCE, c, data, red, tu).map_err(on(ci))
}

/// `MPI_Reduce_local`: `inoutbuf = inbuf ⊕ inoutbuf`, element by element.
///
/// # Safety
/// MPI's contract on the buffers.
pub unsafe fn reduce_local(
    acc: &mut Access,
    inbuf: *const c_void,
    inoutbuf: *mut c_void,
    count: c_int,
    dt: Datatype,
    op: abi::Op,
) -> Res<()> {
    if datatype::size_of_handle(dt).is_none() {
        // SAFETY: the caller's contract.
        return unsafe { vector::reduce_local_any(acc, inbuf, inoutbuf, count, dt, op) };
    }
    let len = byte_len(count, dt, 0, inbuf.is_null() || inoutbuf.is_null())?;
    let red = reduction(acc.st(), op, dt, 0)?;
    if len == 0 {
        return Ok(());
    }
    disjoint(inbuf, len, inoutbuf, len, 0)?;
    // SAFETY: MPI's contract: `len` bytes readable at `inbuf`, writable at `inoutbuf`; disjoint
    // (checked).
    let (src, dst) = unsafe { (in_bytes(inbuf, len), out_bytes(inoutbuf, len)) };
    let mut tmp = src.to_vec();
    red.combine_lower(dst, &mut tmp);
    Ok(())
}

// ---------------------------------------------------------------------------------------------
// Barrier.

fn barrier_team(ops: &mut Ops, t: Team, p: Params, tu: &Tuning) -> Res<()> {
    if t.size() <= 1 {
        return Ok(());
    }
    match tu.force.barrier.unwrap_or_else(|| model(p, ops).best_barrier(t.size()).1) {
        Barrier::Dissemination => algo::barrier_dissemination(ops, t),
        Barrier::FanInOut => algo::barrier_fan(ops, t),
    }
}

/// `MPI_Barrier`: with several nodes, a node barrier, a leaders' barrier, a node barrier again
/// (nobody leaves the last before every rank entered the first).
pub fn barrier(acc: &mut Access, comm: abi::Comm) -> Res<()> {
    if inter::is_inter(acc, comm) {
        return inter::barrier(acc, comm);
    }
    let (c, ci, tu) = begin(acc, comm)?;
    barrier_comm(acc, &c, &tu).map_err(on(ci))
}

/// The barrier over intracommunicator `c`.
fn barrier_comm(acc: &mut Access, c: &Comm, tu: &Tuning) -> Res<()> {
    if area::barrier(acc, c, tu)? {
        return Ok(());
    }
    let mut ops = Ops::new(acc, c.coll_ctx(), tag::BARRIER)?;
    if c.nodes.count() <= 1 {
        return barrier_team(&mut ops, whole(c), tu.shm, tu);
    }
    let lv = Levels::of(c);
    let leaders = Levels::leaders(c, None);
    barrier_team(&mut ops, lv.local_team(), tu.shm, tu)?;
    if lv.local_me == 0 {
        barrier_team(&mut ops, Team { ranks: &leaders, me: lv.node }, tu.net, tu)?;
    }
    barrier_team(&mut ops, lv.local_team(), tu.shm, tu)
}

/// Allgathers `mine` (the same length on every member) over communicator `c` in its collective
/// context: for communicator creation and start-up.
pub fn allgather_bytes(acc: &mut Access, c: &Comm, tu: &Tuning, mine: &[u8]) -> Res<Vec<u8>> {
    let (n, block) = (c.size as usize, mine.len());
    let mut all = vec![0u8; n * block];
    all[c.rank as usize * block..(c.rank as usize + 1) * block].copy_from_slice(mine);
    allgather_whole(acc, tag::COMM, c, &mut all, block, tu)?;
    Ok(all)
}

/// Broadcasts `data` (any length, known at `root` only) from `root` over communicator `c` in its
/// collective context: communicator creation.
pub fn bcast_bytes(acc: &mut Access, c: &Comm, tu: &Tuning, root: usize, data: &mut Vec<u8>) -> Res<()> {
    let mut len = (data.len() as u64).to_ne_bytes();
    bcast_comm(acc, tag::COMM, c, root, &mut len, 8, tu)?;
    data.resize(u64::from_ne_bytes(len) as usize, 0);
    if !data.is_empty() {
        bcast_comm(acc, tag::COMM, c, root, data, 1, tu)?;
    }
    Ok(())
}

/// Allreduces `data` over communicator `c` in its collective context with tag `tag`
/// (communicator creation).
pub fn allreduce_bytes(acc: &mut Access, c: &Comm, tu: &Tuning, data: &mut [u8], red: Reduction, tag: i32) -> Res<()> {
    allreduce_comm(acc, tag, c, data, red, tu)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn overrides_parse() {
        let vars = |k: &str| match k {
            "NEMESIS_COLL_SHM" => Some("L=1000".to_string()),
            "NEMESIS_COLL_ALG" => Some("bcast=chain, allreduce=rabenseifner,barrier=fan".to_string()),
            "NEMESIS_COLL_SEGMENT" => Some("8k".to_string()),
            "NEMESIS_COLL_NODES" => Some("2".to_string()),
            "NEMESIS_COLL_AREA" => Some("0".to_string()),
            _ => None,
        };
        let t = Tuning::from_vars(vars).unwrap();
        assert_eq!(t.shm.l, 1000.0);
        assert_eq!(t.net, Params::NET);
        assert_eq!(t.force.bcast, Some(Bcast::Chain(0)));
        assert_eq!(t.force.allreduce, Some(Allreduce::Rabenseifner));
        assert_eq!(t.force.barrier, Some(Barrier::FanInOut));
        assert_eq!(t.force.reduce, None);
        assert_eq!((t.segment, t.fake_nodes), (Some(8192), Some(2)));
        assert!(!t.area);
        assert!(Tuning::from_vars(|k| (k == "NEMESIS_COLL_AREA").then(|| "maybe".into())).is_err());
        assert!(Tuning::from_vars(|k| (k == "NEMESIS_COLL_ALG").then(|| "bcast=tree".into())).is_err());
        assert!(Tuning::from_vars(|k| (k == "NEMESIS_COLL_ALG").then(|| "scan=ring".into())).is_err());
        assert!(Tuning::from_vars(|k| (k == "NEMESIS_COLL_NODES").then(|| "0".into())).is_err());
        assert_eq!(Tuning::from_vars(|_| None).unwrap(), Tuning::DEFAULT);
        assert!(Tuning::from_vars(|_| None).unwrap().area, "the collective areas are on by default");
    }

    #[test]
    fn leaders_and_local_teams() {
        // 5 job ranks on nodes [0,0,1,1,1]; a communicator of all of them.
        let c = Comm::new(vec![0, 1, 2, 3, 4], 3, 5, 0, abi::ERRORS_ARE_FATAL, &[0, 0, 1, 1, 1]);
        assert_eq!(Levels::leaders(&c, None), vec![0, 2]);
        assert_eq!(Levels::leaders(&c, Some(4)), vec![0, 4], "the root leads its node");
        let lv = Levels::of(&c);
        assert_eq!((lv.node, lv.local.as_slice(), lv.local_me), (1, &[2u32, 3, 4][..], 1));
    }
}
