//! Collective operations: argument checks, the two-level (node, then between nodes) structure,
//! and the choice of an algorithm per level by the pLogP models of [`model`]; the algorithms are
//! in [`algo`].
//!
//! **Contexts.** Collectives run in the communicator's second context (`Comm::coll_ctx`), with
//! a tag per operation, so they never match point-to-point messages on the same communicator.
//! Every member calls the collectives of a communicator in the same order (MPI requires it) and
//! messages between two ranks in one context are not overtaken, so consecutive collectives
//! cannot take each other's messages.
//!
//! **Shared memory, then the network.** When a communicator spans several nodes (ranks that do
//! not share a segment), broadcast, reduce, allreduce and barrier work in two levels, as LaPIe
//! does (`shared/reference/p2pmpi-lapie.md`, "Hierarchy"): inside each node with the `shm`
//! parameters, and among one leader per node with the `net` ones (the root's node is led by the
//! root). Gather, scatter, allgather and alltoall run over the whole communicator with the
//! parameters of its slowest level. A job on one node runs everything at the `shm` level. The
//! nodes are the Endpoint's (separate machines, or `nemesis-run --nodes K` on one machine, TCP
//! between them); `NEMESIS_COLL_NODES=K` instead pretends the job's ranks form `K` nodes of
//! consecutive ranks over one segment, so the two-level code can also run without a network.
//!
//! **Memory.** Collectives allocate scratch buffers (partial results, rotations); the
//! point-to-point fast path does not.

pub mod algo;
pub mod area;
pub mod inter;
pub mod model;
pub mod nbc;
pub mod typed;
pub mod vector;

use std::ffi::{c_int, c_void};

use std::sync::Arc;

use self::algo::{Ops, Reduction, Team};
use self::model::{Allgather, Allreduce, Barrier, Bcast, Gather, Model, Params, Reduce};
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

/// Algorithms forced by `NEMESIS_COLL_ALG` (`None`: the model chooses).
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Force {
    /// `Chain(0)`: a chain whose segment the model (or `NEMESIS_COLL_SEGMENT`) chooses.
    pub bcast: Option<Bcast>,
    pub reduce: Option<Reduce>,
    pub allreduce: Option<Allreduce>,
    pub gather: Option<Gather>,
    pub scatter: Option<Gather>,
    pub allgather: Option<Allgather>,
    pub barrier: Option<Barrier>,
}

/// The collectives' configuration: model parameters per level and overrides.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Tuning {
    /// Between ranks of a node (`NEMESIS_COLL_SHM`).
    pub shm: Params,
    /// Between node leaders (`NEMESIS_COLL_NET`).
    pub net: Params,
    /// `NEMESIS_COLL_ALG`.
    pub force: Force,
    /// `NEMESIS_COLL_SEGMENT`: the chain broadcast's segment in bytes.
    pub segment: Option<usize>,
    /// `NEMESIS_COLL_NODES`: pretend the job spans this many nodes (testing).
    pub fake_nodes: Option<u32>,
    /// `NEMESIS_COLL_AREA`: small collectives of a communicator on one node go through a shared
    /// area of the segment ([`area`]).
    pub area: bool,
}

impl Tuning {
    pub const DEFAULT: Tuning = Tuning {
        shm: Params::SHM,
        net: Params::NET,
        force: Force {
            bcast: None,
            reduce: None,
            allreduce: None,
            gather: None,
            scatter: None,
            allgather: None,
            barrier: None,
        },
        segment: None,
        fake_nodes: None,
        area: true,
    };

    /// The defaults with the `NEMESIS_COLL_*` overrides from `var`.
    pub fn from_vars(var: impl Fn(&str) -> Option<String>) -> Result<Tuning, String> {
        let mut t = Tuning::DEFAULT;
        if let Some(v) = var("NEMESIS_COLL_SHM") {
            t.shm = t.shm.parse_over(&v).map_err(|e| format!("NEMESIS_COLL_SHM: {e}"))?;
        }
        if let Some(v) = var("NEMESIS_COLL_NET") {
            t.net = t.net.parse_over(&v).map_err(|e| format!("NEMESIS_COLL_NET: {e}"))?;
        }
        if let Some(v) = var("NEMESIS_COLL_SEGMENT") {
            let s = nemesis::config::parse_bytes(&v).filter(|&s| s > 0);
            t.segment = Some(s.ok_or_else(|| format!("NEMESIS_COLL_SEGMENT={v}: not a positive size"))?);
        }
        if let Some(v) = var("NEMESIS_COLL_NODES") {
            let k = v.trim().parse::<u32>().ok().filter(|&k| k > 0);
            t.fake_nodes = Some(k.ok_or_else(|| format!("NEMESIS_COLL_NODES={v}: not a positive number"))?);
        }
        if let Some(v) = var("NEMESIS_COLL_AREA") {
            t.area = match v.trim() {
                "1" | "on" => true,
                "0" | "off" => false,
                _ => return Err(format!("NEMESIS_COLL_AREA={v}: expected 1 or 0 (on or off)")),
            };
        }
        if let Some(v) = var("NEMESIS_COLL_ALG") {
            t.force = parse_force(&v).map_err(|e| format!("NEMESIS_COLL_ALG: {e}"))?;
        }
        Ok(t)
    }
}

/// Parses `bcast=chain,reduce=binomial,...`.
fn parse_force(s: &str) -> Result<Force, String> {
    let mut f = Force::default();
    for item in s.split(',').map(str::trim).filter(|i| !i.is_empty()) {
        let (op, alg) = item.split_once('=').ok_or_else(|| format!("`{item}`: expected operation=algorithm"))?;
        let bad = || format!("`{item}`: unknown algorithm");
        match op.trim() {
            "bcast" => {
                f.bcast = Some(match alg {
                    "flat" => Bcast::Flat,
                    "binomial" => Bcast::Binomial,
                    "chain" => Bcast::Chain(0),
                    _ => return Err(bad()),
                })
            }
            "reduce" => {
                f.reduce = Some(match alg {
                    "flat" => Reduce::Flat,
                    "binomial" => Reduce::Binomial,
                    "rabenseifner" => Reduce::Rabenseifner,
                    _ => return Err(bad()),
                })
            }
            "allreduce" => {
                f.allreduce = Some(match alg {
                    "recursive-doubling" => Allreduce::RecursiveDoubling,
                    "rabenseifner" => Allreduce::Rabenseifner,
                    "reduce-bcast" => Allreduce::ReduceBcast,
                    _ => return Err(bad()),
                })
            }
            "gather" | "scatter" => {
                let g = match alg {
                    "flat" => Gather::Flat,
                    "binomial" => Gather::Binomial,
                    _ => return Err(bad()),
                };
                if op.trim() == "gather" {
                    f.gather = Some(g);
                } else {
                    f.scatter = Some(g);
                }
            }
            "allgather" => {
                f.allgather = Some(match alg {
                    "ring" => Allgather::Ring,
                    "bruck" => Allgather::Bruck,
                    "gather-bcast" => Allgather::GatherBcast,
                    _ => return Err(bad()),
                })
            }
            "barrier" => {
                f.barrier = Some(match alg {
                    "dissemination" => Barrier::Dissemination,
                    "fan" => Barrier::FanInOut,
                    _ => return Err(bad()),
                })
            }
            other => return Err(format!("unknown operation `{other}`")),
        }
    }
    Ok(f)
}

/// What every collective needs: the communicator (shared, so it outlives a pause of the lock),
/// its index, and the tuning in force. An intercommunicator is `MPI_ERR_COMM`: the collectives
/// made for them ([`inter`]) are dispatched before this.
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
fn gather_whole(
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
fn scatter_whole(
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
fn allgather_whole(access: &mut Access, tag: i32, c: &Comm, all: &mut [u8], block: usize, tu: &Tuning) -> Res<()> {
    if area::allgather(access, c, all, block, tu)? {
        return Ok(());
    }
    let ops = &mut Ops::new(access, c.coll_ctx(), tag)?;
    let p = flat_model(c, tu, ops).p;
    allgather_team(ops, whole(c), all, block, p, tu)
}

/// An all-to-all over the whole communicator: through its shared area when it has one
/// ([`area::alltoall`]), else the direct exchange.
fn alltoall_whole(
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

fn run_gather(ops: &mut Ops, alg: Gather, t: Team, root: usize, mine: &[u8], all: &mut [u8], block: usize) -> Res<()> {
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

fn run_scatter(ops: &mut Ops, alg: Gather, t: Team, root: usize, all: &[u8], mine: &mut [u8], block: usize) -> Res<()> {
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
