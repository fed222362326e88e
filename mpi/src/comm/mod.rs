//! Communicators: the table behind `MPI_Comm` handles, each communicator's rank maps, contexts
//! and error handler, and its node structure for the collectives.
//!
//! **Contexts.** Communicator `c` owns two Endpoint contexts: `ctx` for point-to-point and
//! `ctx + 1` for collectives, so a collective's messages never match a user's receive, even
//! `MPI_ANY_SOURCE`/`MPI_ANY_TAG` ones. `MPI_COMM_WORLD` has contexts 0 and 1 (0 is the Endpoint's
//! `WORLD`), `MPI_COMM_SELF` 2 and 3. A new communicator (dup, split) takes the lowest pair free in
//! every member of its parent, agreed by an allreduce of the members' free masks ([`context`]:
//! safe when several threads create communicators at once); a freed communicator's pair is free
//! again once no request of this process refers to it.
//!
//! **Ranks.** `world[r]` is the job rank of communicator rank `r`; `from_world` the inverse (-1
//! for job ranks outside the communicator). Both exist for every communicator, `MPI_COMM_WORLD`
//! included, so the point-to-point fast path translates with one load and no branch.
//!
//! **Nodes.** `nodes` groups the members by node (ranks that share a shared-memory segment), for
//! the two-level collectives (`crate::coll`).

use std::ffi::{c_char, c_int};
use std::sync::Arc;

pub mod context;
pub mod dynproc;
pub mod from_group;
pub mod info;
pub mod inter;
pub mod links;

use crate::abi::{self, COMM_BASE, Errhandler};
use crate::coll::{self, Tuning};
use crate::error::{Fail, Res, Why};
use crate::p2p::comm_at;
use crate::state::{Access, State, not_running};

/// The members of a communicator grouped by node.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Nodes {
    /// Node index (into `members`) of each communicator rank.
    pub node_of: Box<[u32]>,
    /// Communicator ranks of each node, ascending; nodes ordered by their lowest rank. The first
    /// member of a node is its leader.
    pub members: Vec<Vec<u32>>,
}

impl Nodes {
    /// Groups communicator ranks `0..n` by `node_id(r)` (any value; equal means same node).
    pub fn group(n: usize, node_id: impl Fn(usize) -> u32) -> Nodes {
        let mut ids: Vec<u32> = Vec::new();
        let mut members: Vec<Vec<u32>> = Vec::new();
        let mut node_of = vec![0u32; n];
        for (r, slot) in node_of.iter_mut().enumerate() {
            let id = node_id(r);
            let k = match ids.iter().position(|&x| x == id) {
                Some(k) => k,
                None => {
                    ids.push(id);
                    members.push(Vec::new());
                    ids.len() - 1
                }
            };
            members[k].push(r as u32);
            *slot = k as u32;
        }
        Nodes { node_of: node_of.into(), members }
    }

    /// Number of nodes.
    pub fn count(&self) -> usize {
        self.members.len()
    }
}

/// One communicator. The table holds it in an `Arc`: a collective keeps its own reference while it
/// waits (the big lock released under `MPI_THREAD_MULTIPLE`), and a change (error handler, free)
/// copies it if one is out (`Arc::make_mut`), then refreshes the fast-path entry.
#[derive(Clone, Debug)]
pub struct Comm {
    /// False once freed (the slot may be reused by a later communicator).
    pub live: bool,
    /// Communicator rank = job rank (only `MPI_COMM_WORLD`).
    pub identity: bool,
    /// This process's rank in the communicator.
    pub rank: u32,
    /// Number of members.
    pub size: u32,
    /// Point-to-point context this process receives in; collectives use `ctx + 1`.
    pub ctx: u32,
    /// The context messages to the other members carry: `ctx` on an intracommunicator, the
    /// remote group's receive context on an intercommunicator (each group agrees on its own:
    /// a context need only be free where it is received).
    pub send_ctx: u32,
    /// Job rank of each communicator rank (`size` entries). On an intercommunicator `size`,
    /// `world`, `from_world` and `nodes` describe the **remote** group, the one point-to-point
    /// ranks name, so the point-to-point paths serve both kinds unchanged.
    pub world: Box<[u32]>,
    /// Communicator rank of each job rank, -1 for non-members (`job_size` entries).
    pub from_world: Box<[i32]>,
    /// `MPI_ERRORS_ARE_FATAL` or `MPI_ERRORS_RETURN`.
    pub errh: Errhandler,
    pub nodes: Nodes,
    /// `MPI_Comm_set_name`'s (empty: none).
    pub name: String,
    /// Attributes: keyval and value (an address), in the order they were set.
    pub attrs: Vec<(c_int, usize)>,
    /// A Cartesian or graph topology (`crate::topo`).
    pub topo: Option<Arc<crate::topo::Topo>>,
    /// Non-blocking collectives started on this communicator (their tags); shared by the copies
    /// a change makes (`Arc::make_mut`), fresh for every new communicator.
    pub nbc: Arc<std::sync::atomic::AtomicU32>,
    /// An intercommunicator's local group as an intracommunicator of its own (its own context
    /// pair, for the local steps of the intercommunicator's collectives and creations); `rank` is
    /// this process's rank in it. `None`: an intracommunicator.
    pub local: Option<Arc<Comm>>,
    /// Its shared area for small collectives (`crate::coll::area`), shared by its copies.
    pub area: Arc<coll::area::AreaUse>,
    /// The session it was created from (`MPI_Comm_create_from_group` on a group of the
    /// session's): its buffered sends may take the session's buffer (`crate::p2p::bsend`).
    pub session: Option<c_int>,
}

/// What a communicator takes from the one it is derived from (dup, idup, split, create,
/// intercommunicator creation and merge): its error handler, and the session it belongs to
/// (MPI-4.1 §11.3.2: derived from a session's communicator, it belongs to the session too: its
/// buffered sends may take the session's buffer).
#[derive(Clone, Copy, Debug)]
pub struct Lineage {
    pub errh: Errhandler,
    pub session: Option<c_int>,
}

impl From<Errhandler> for Lineage {
    /// A communicator of no session with handler `errh`.
    fn from(errh: Errhandler) -> Lineage {
        Lineage { errh, session: None }
    }
}

impl Comm {
    /// What a communicator derived from this one takes from it.
    pub fn lineage(&self) -> Lineage {
        Lineage { errh: self.errh, session: self.session }
    }

    /// A communicator over job ranks `world` (in communicator rank order) in which this process
    /// (job rank `me`, one of them) takes context `ctx`; `job_size` ranks in the job, and
    /// `node_of_job` gives the node id of each job rank.
    pub fn new(world: Vec<u32>, me: u32, job_size: u32, ctx: u32, errh: Errhandler, node_of_job: &[u32]) -> Comm {
        let identity = world.len() == job_size as usize && world.iter().enumerate().all(|(i, &w)| w as usize == i);
        let mut from_world = vec![-1i32; job_size as usize];
        for (i, &w) in world.iter().enumerate() {
            if let Some(f) = from_world.get_mut(w as usize) {
                *f = i as i32;
            }
        }
        let rank = world.iter().position(|&w| w == me).unwrap_or(0) as u32;
        let nodes = Nodes::group(world.len(), |r| node_of_job.get(world[r] as usize).copied().unwrap_or(0));
        let size = world.len() as u32;
        let (world, from_world, name) = (world.into(), from_world.into(), String::new());
        let attrs = Vec::new();
        let nbc = Arc::default();
        let (send_ctx, local, topo) = (ctx, None, None);
        Comm {
            live: true,
            identity,
            rank,
            size,
            ctx,
            send_ctx,
            world,
            from_world,
            errh,
            nodes,
            name,
            attrs,
            topo,
            nbc,
            local,
            area: coll::area::AreaUse::new(),
            session: None,
        }
    }

    /// An intercommunicator: this process's group `local` (an intracommunicator with its own
    /// context), the remote group's job ranks `remote` (disjoint from `local`'s), received in
    /// context `ctx` and sent in `send_ctx`.
    pub fn inter(local: Comm, remote: Vec<u32>, ctx: u32, send_ctx: u32, job_size: u32, node_of_job: &[u32]) -> Comm {
        let me = local.world_of(local.rank);
        let mut c = Comm::new(remote, me, job_size, ctx, local.errh, node_of_job);
        c.session = local.session;
        c.identity = false;
        c.rank = local.rank;
        c.send_ctx = send_ctx;
        c.local = Some(Arc::new(local));
        c
    }

    /// The local group's size (`MPI_Comm_size`).
    pub fn local_size(&self) -> u32 {
        self.local.as_ref().map_or(self.size, |l| l.size)
    }

    /// The local group's job ranks (`MPI_Comm_group`).
    pub fn local_world(&self) -> &[u32] {
        self.local.as_ref().map_or(&self.world, |l| &l.world)
    }

    /// What stays of a freed communicator once nothing names it: no maps, no memory.
    fn tombstone() -> Comm {
        let mut c = Comm::new(Vec::new(), 0, 0, 0, abi::ERRORS_ARE_FATAL, &[]);
        (c.live, c.identity) = (false, false);
        c
    }

    /// The communicator rank of job rank `w` (`MPI_PROC_NULL`-free: -1 if not a member).
    #[inline(always)]
    pub fn rank_of_world(&self, w: u32) -> c_int {
        if self.identity { w as c_int } else { self.from_world.get(w as usize).copied().unwrap_or(-1) }
    }

    /// The job rank of communicator rank `r` (which the caller checked is in range).
    #[inline(always)]
    pub fn world_of(&self, r: u32) -> u32 {
        if self.identity { r } else { self.world.get(r as usize).copied().unwrap_or(u32::MAX) }
    }

    /// The collectives' context (received in).
    pub fn coll_ctx(&self) -> u32 {
        self.ctx + 1
    }

    /// The collectives' context as sent to the other members.
    pub fn coll_send_ctx(&self) -> u32 {
        self.send_ctx + 1
    }
}

/// The index in the table named by handle `h` (maybe out of range).
#[inline(always)]
pub fn index_of(h: abi::Comm) -> usize {
    h.wrapping_sub(COMM_BASE) as u32 as usize
}

/// The handle of table index `i`.
pub fn handle_of(i: usize) -> abi::Comm {
    COMM_BASE + i as c_int
}

// ---------------------------------------------------------------------------------------------
// The MPI functions on communicators.

#[cold]
fn null_out(ci: Option<usize>) -> Fail {
    Fail::new(abi::ERR_ARG, ci, Why::Arg("null output pointer"))
}

/// `MPI_Comm_rank` (`size`: `MPI_Comm_size`).
///
/// # Safety
/// `out` null or writable.
pub unsafe fn rank_or_size(acc: &mut Access, comm: abi::Comm, out: *mut c_int, size: bool) -> Res<()> {
    let st = acc.st();
    // A restarted rank may call it before its restore (`crate::ft::park`).
    if !st.started() {
        return Err(not_running(st.phase));
    }
    let (ci, c) = comm_at(&st.comms, comm)?;
    if out.is_null() {
        return Err(null_out(Some(ci)));
    }
    // SAFETY: checked non-null; MPI's contract.
    unsafe { *out = if size { c.local_size() } else { c.rank } as c_int };
    Ok(())
}

/// The live communicator of handle `comm` (shared: it outlives a pause of the lock), its index
/// and the tuning in force; MPI must be running.
fn shared(acc: &mut Access, comm: abi::Comm) -> Res<(usize, Arc<Comm>, Tuning)> {
    let st = acc.st();
    if st.ep.is_none() {
        return Err(not_running(st.phase));
    }
    let (ci, c) = comm_at(&st.comms, comm)?;
    Ok((ci, c.clone(), st.tuning))
}

/// Stores a new communicator over job ranks `world` in the lowest free slot of the table (a
/// reclaimed one, or a new one at the end) and returns its handle.
fn push(st: &mut State, world: Vec<u32>, ctx: u32, from: Lineage) -> abi::Comm {
    let c = intra(st, world, ctx, from);
    store(st, c)
}

/// A new intracommunicator over job ranks `world` (this process among them), of lineage `from`.
fn intra(st: &State, world: Vec<u32>, ctx: u32, from: Lineage) -> Comm {
    let (me, size) = st.ep.as_ref().map_or((0, 1), |e| (e.rank(), e.size()));
    let mut c = Comm::new(world, me, size, ctx, from.errh, &st.node_of_job);
    c.session = from.session;
    c
}

/// Stores communicator `c` in the lowest free slot of the table (a reclaimed one, or a new one
/// at the end) and returns its handle.
fn store(st: &mut State, c: Comm) -> abi::Comm {
    let c = Arc::new(c);
    reclaim(st);
    let i = match st.comm_slots.iter().enumerate().min_by_key(|&(_, &i)| i) {
        Some((k, _)) => {
            let i = st.comm_slots.swap_remove(k);
            st.comms[i] = c;
            i
        }
        None => {
            st.comms.push(c);
            st.comms.len() - 1
        }
    };
    st.refresh_fast(i);
    handle_of(i)
}

/// Finishes freeing the communicators freed while an operation of ours still named them, once
/// none does: their contexts are free again, their memory returned and their slots reusable.
pub fn reclaim(st: &mut State) {
    let mut k = 0;
    while k < st.comms_retired.len() {
        let ci = st.comms_retired[k];
        let in_use = st.reqs.iter().any(|(_, r)| r.comm as usize == ci) || st.messages.iter().any(|(_, m)| m.ci == ci);
        if in_use {
            k += 1;
            continue;
        }
        st.comms_retired.swap_remove(k);
        if st.ep.is_some() {
            coll::area::release(&st.comms[ci]);
        }
        let ctx = st.comms[ci].ctx;
        st.contexts.release(ctx);
        if let Some(l) = &st.comms[ci].local {
            let lctx = l.ctx;
            st.contexts.release(lctx);
        }
        st.comms[ci] = Arc::new(Comm::tombstone());
        st.refresh_fast(ci);
        st.comm_slots.push(ci);
    }
}

/// Gives a failure of a communicator-creating collective its communicator.
fn on(ci: usize) -> impl Fn(Fail) -> Fail {
    move |mut f| {
        f.comm.get_or_insert(ci);
        f
    }
}

/// `MPI_Comm_dup`.
///
/// # Safety
/// `newcomm` null or writable.
pub unsafe fn dup(acc: &mut Access, comm: abi::Comm, newcomm: *mut abi::Comm) -> Res<()> {
    let (ci, c, tu) = shared(acc, comm)?;
    if newcomm.is_null() {
        return Err(null_out(Some(ci)));
    }
    let h = if c.local.is_some() {
        inter::dup(acc, ci, &c, &tu)?
    } else {
        let ctx = context::agree(acc, ci, &c, &tu).map_err(on(ci))?;
        push(acc.st(), c.world.to_vec(), ctx, c.lineage())
    };
    let st = acc.st();
    // A duplicate keeps the topology (MPI-3.1 §7.4) and the hints (MPI-4.1 §7.4.2).
    Arc::make_mut(&mut st.comms[index_of(h)]).topo = c.topo.clone();
    info::inherit(st, h, None, &c);
    // The attributes go through their copy callbacks (MPI-3.1 §6.7.2), which may call MPI:
    // nothing borrowed from the state is held across them (`c` is a counted copy).
    if let Err(e) = crate::attr::copy_all(acc, ci, index_of(h)) {
        let mut gone = h;
        // SAFETY: a local handle.
        let _ = unsafe { free_index(acc, &mut gone) };
        return Err(e);
    }
    // SAFETY: checked non-null; MPI's contract.
    unsafe { *newcomm = h };
    Ok(())
}

/// The communicator an `MPI_Comm_idup` of communicator `ci` makes once its contexts are
/// agreed (`ctxs`: its own, and an intercommunicator's local group's; `remote`: the other
/// group's receive context): a copy with attributes `attrs` (copied at the call), and the hints
/// of the call whose output is `out`; its handle.
pub fn made_by_idup(
    st: &mut State,
    ci: usize,
    ctxs: &[u32],
    remote: Option<u32>,
    attrs: Vec<(c_int, usize)>,
    out: *mut abi::Comm,
) -> Res<abi::Comm> {
    let parent = st.comms.get(ci).cloned();
    let h = match (parent.clone(), ctxs, remote) {
        (Some(c), &[ctx], None) if c.local.is_none() => {
            let h = push(st, c.world.to_vec(), ctx, c.lineage());
            Arc::make_mut(&mut st.comms[index_of(h)]).topo = c.topo.clone();
            h
        }
        (Some(c), &[ctx, lctx], Some(rctx)) if c.local.is_some() => {
            inter::make(st, c.local_world().to_vec(), c.world.to_vec(), (ctx, lctx, rctx), c.lineage())
        }
        _ => {
            for &x in ctxs {
                st.contexts.release(x);
            }
            let _ = info::idup_hints(st, out);
            return Err(Fail::new(abi::ERR_COMM, Some(ci), Why::Arg("the duplicated communicator is gone")));
        }
    };
    Arc::make_mut(&mut st.comms[index_of(h)]).attrs = attrs;
    st.refresh_fast(index_of(h));
    if let Some(p) = parent {
        info::on_idup(st, h, out, &p);
    }
    Ok(h)
}

/// `MPI_Comm_split`: every member agrees on one context for all the new communicators (their
/// groups are disjoint), then one allgather of `(color, key)` gives every member its group
/// (ordered by key, then parent rank).
///
/// # Safety
/// `newcomm` null or writable.
pub unsafe fn split(acc: &mut Access, comm: abi::Comm, color: c_int, key: c_int, newcomm: *mut abi::Comm) -> Res<()> {
    let (ci, c, tu) = shared(acc, comm)?;
    if newcomm.is_null() {
        return Err(null_out(Some(ci)));
    }
    if color < 0 && color != abi::UNDEFINED {
        return Err(Fail::new(abi::ERR_ARG, Some(ci), Why::Arg("color must be non-negative or MPI_UNDEFINED")));
    }
    if c.local.is_some() {
        let h = inter::split(acc, ci, &c, &tu, color, key)?;
        // SAFETY: checked non-null; MPI's contract.
        unsafe { *newcomm = h };
        return Ok(());
    }
    let ctx = context::agree(acc, ci, &c, &tu).map_err(on(ci))?;
    let mut mine = [0u8; 8];
    mine[..4].copy_from_slice(&color.to_ne_bytes());
    mine[4..].copy_from_slice(&key.to_ne_bytes());
    let all = coll::allgather_bytes(acc, &c, &tu, &mine).map_err(on(ci))?;
    let field = |r: usize, k: usize| {
        let b = &all[r * 8 + k * 4..r * 8 + k * 4 + 4];
        c_int::from_ne_bytes([b[0], b[1], b[2], b[3]])
    };
    let n = c.size as usize;
    let st = acc.st();
    let h = if color == abi::UNDEFINED {
        st.contexts.release(ctx);
        abi::COMM_NULL
    } else {
        let mut members: Vec<(c_int, usize)> =
            (0..n).filter(|&r| field(r, 0) == color).map(|r| (field(r, 1), r)).collect();
        members.sort_unstable();
        let world = members.iter().map(|&(_, r)| c.world[r]).collect();
        push(st, world, ctx, c.lineage())
    };
    // SAFETY: checked non-null; MPI's contract.
    unsafe { *newcomm = h };
    Ok(())
}

/// `MPI_Comm_split_type` (MPI-4.1 §7.4.2): by node (the ranks sharing this rank's segment:
/// the Endpoint's node leader is the colour) for `MPI_COMM_TYPE_SHARED`, and for
/// `MPI_COMM_TYPE_HW_GUIDED` and `MPI_COMM_TYPE_RESOURCE_GUIDED` when the info's
/// `mpi_hw_resource_type` is `mpi_shared_memory` (the one resource type nemesis knows;
/// `MPI_COMM_NULL` for any other, or none); `MPI_COMM_TYPE_HW_UNGUIDED` splits by node too when
/// `comm` spans several (the info's `mpi_hw_resource_type` then says `mpi_shared_memory`),
/// else gives `MPI_COMM_NULL` (no strict subset to make). `MPI_UNDEFINED` gives
/// `MPI_COMM_NULL`. The new communicator takes the info's hints (as MPICH).
///
/// # Safety
/// `newcomm` null or writable.
pub unsafe fn split_type(
    acc: &mut Access,
    comm: abi::Comm,
    split_type: c_int,
    key: c_int,
    info: abi::Info,
    newcomm: *mut abi::Comm,
) -> Res<()> {
    const RESOURCE: &str = "mpi_hw_resource_type";
    const SHARED_MEMORY: &str = "mpi_shared_memory";
    let (ci, c, _) = shared(acc, comm)?;
    let st = acc.st();
    let given = if info == abi::INFO_NULL { Vec::new() } else { crate::info::contents(st, info).map_err(on(ci))? };
    let node = acc.ep()?.node_leader() as c_int;
    let asks_shared = given.iter().any(|(k, v)| k == RESOURCE && v == SHARED_MEMORY);
    let color = match split_type {
        abi::UNDEFINED => abi::UNDEFINED,
        abi::COMM_TYPE_SHARED => node,
        abi::COMM_TYPE_HW_GUIDED | abi::COMM_TYPE_RESOURCE_GUIDED if asks_shared => node,
        abi::COMM_TYPE_HW_GUIDED | abi::COMM_TYPE_RESOURCE_GUIDED => abi::UNDEFINED,
        abi::COMM_TYPE_HW_UNGUIDED if c.local.is_none() && c.nodes.count() > 1 => {
            if info != abi::INFO_NULL {
                crate::info::put(acc.st(), info, RESOURCE, SHARED_MEMORY).map_err(on(ci))?;
            }
            node
        }
        abi::COMM_TYPE_HW_UNGUIDED => abi::UNDEFINED,
        _ => return Err(Fail::new(abi::ERR_ARG, Some(ci), Why::Other(format!("unknown split type {split_type}")))),
    };
    // SAFETY: the caller's contract.
    unsafe { split(acc, comm, color, key, newcomm)? };
    // SAFETY: `split` wrote it.
    let h = unsafe { *newcomm };
    info::given_to(acc.st(), h, given);
    Ok(())
}

/// `MPI_Comm_create`: collective over `comm`; the members of `group` (a subset of `comm`'s, or
/// disjoint subsets on different members) get a communicator over it, the others
/// `MPI_COMM_NULL`.
///
/// # Safety
/// `newcomm` null or writable.
pub unsafe fn create(acc: &mut Access, comm: abi::Comm, group: abi::Group, newcomm: *mut abi::Comm) -> Res<()> {
    let (ci, c, tu) = shared(acc, comm)?;
    if newcomm.is_null() {
        return Err(null_out(Some(ci)));
    }
    if c.local.is_some() {
        let h = inter::create(acc, ci, &c, &tu, group)?;
        // SAFETY: checked non-null; MPI's contract.
        unsafe { *newcomm = h };
        return Ok(());
    }
    let members = in_comm(acc.st(), &c, group).map_err(on(ci))?;
    let ctx = context::agree(acc, ci, &c, &tu).map_err(on(ci))?;
    let st = acc.st();
    let me = st.ep.as_ref().map_or(0, |e| e.rank());
    let h = if members.contains(&me) {
        push(st, members.to_vec(), ctx, c.lineage())
    } else {
        st.contexts.release(ctx);
        abi::COMM_NULL
    };
    // SAFETY: checked non-null; MPI's contract.
    unsafe { *newcomm = h };
    Ok(())
}

/// The members of `group`, which must all be members of `c`.
fn in_comm(st: &State, c: &Comm, group: abi::Group) -> Res<Arc<[u32]>> {
    let members = crate::group::members(st, group)?;
    if members.iter().any(|&w| c.rank_of_world(w) < 0) {
        return Err(Fail::new(abi::ERR_GROUP, None, Why::Arg("the group is not a subset of the communicator's")));
    }
    Ok(members)
}

/// `MPI_Comm_create_group`: collective over the members of `group` only (a subset of `comm`'s):
/// they agree on a context among themselves, in the collective context of `comm` with a tag of
/// their own (`tag`), so members of `comm` outside the group, or other creations with other
/// tags, are not disturbed. A caller outside the group gets `MPI_COMM_NULL`.
///
/// # Safety
/// `newcomm` null or writable.
pub unsafe fn create_group(
    acc: &mut Access,
    comm: abi::Comm,
    group: abi::Group,
    tag: c_int,
    newcomm: *mut abi::Comm,
) -> Res<()> {
    let (ci, c, tu) = shared(acc, comm)?;
    if newcomm.is_null() {
        return Err(null_out(Some(ci)));
    }
    if c.local.is_some() {
        return Err(crate::p2p::not_intra(ci));
    }
    if !(0..1 << 30).contains(&tag) {
        return Err(Fail::new(abi::ERR_TAG, Some(ci), Why::Tag(tag)));
    }
    let st = acc.st();
    let members = in_comm(st, &c, group).map_err(on(ci))?;
    let me = st.ep.as_ref().map_or(0, |e| e.rank());
    if !members.contains(&me) {
        // SAFETY: checked non-null; MPI's contract.
        unsafe { *newcomm = abi::COMM_NULL };
        return Ok(());
    }
    let size = st.ep.as_ref().map_or(1, |e| e.size());
    // The group as a communicator whose collective context is `comm`'s.
    let mut over = Comm::new(members.to_vec(), me, size, c.ctx, c.errh, &st.node_of_job);
    // A temporary, never freed: it must not hold an area.
    over.area = coll::area::AreaUse::off();
    let ctx = context::agree_among(acc, ci, &over, &tu, coll::tag::COMM_GROUP + tag).map_err(on(ci))?;
    let h = push(acc.st(), members.to_vec(), ctx, c.lineage());
    // SAFETY: checked non-null; MPI's contract.
    unsafe { *newcomm = h };
    Ok(())
}

/// `MPI_Comm_compare`.
///
/// # Safety
/// `result` null or writable.
pub unsafe fn compare(acc: &mut Access, c1: abi::Comm, c2: abi::Comm, result: *mut c_int) -> Res<()> {
    let st = acc.st();
    if st.ep.is_none() {
        return Err(not_running(st.phase));
    }
    let (i1, a) = comm_at(&st.comms, c1)?;
    let (i2, b) = comm_at(&st.comms, c2)?;
    if result.is_null() {
        return Err(null_out(Some(i1)));
    }
    // Intercommunicators compare both groups (MPI-3.1 §6.4.1); an intercommunicator and an
    // intracommunicator are unequal.
    let v = if i1 == i2 {
        abi::IDENT
    } else if a.local.is_some() != b.local.is_some() {
        abi::UNEQUAL
    } else {
        let mut v = crate::group::compare_members(a.local_world(), b.local_world());
        if a.local.is_some() {
            // IDENT < CONGRUENT < SIMILAR < UNEQUAL: the worse of the two.
            v = v.max(crate::group::compare_members(&a.world, &b.world));
        }
        match v {
            abi::IDENT => abi::CONGRUENT,
            other => other,
        }
    };
    // SAFETY: checked non-null; MPI's contract.
    unsafe { *result = v };
    Ok(())
}

/// `MPI_Comm_set_name` (at most `MPI_MAX_OBJECT_NAME - 1` bytes are kept).
///
/// # Safety
/// `name` a NUL-terminated string.
pub unsafe fn set_name(acc: &mut Access, comm: abi::Comm, name: *const c_char) -> Res<()> {
    let st = acc.st();
    if st.ep.is_none() {
        return Err(not_running(st.phase));
    }
    let (ci, _) = comm_at(&st.comms, comm)?;
    if name.is_null() {
        return Err(Fail::new(abi::ERR_ARG, Some(ci), Why::Arg("null name")));
    }
    // SAFETY: MPI's contract: a C string.
    let mut s = unsafe { std::ffi::CStr::from_ptr(name) }.to_string_lossy().into_owned();
    while s.len() >= abi::MAX_OBJECT_NAME {
        s.pop();
    }
    Arc::make_mut(&mut st.comms[ci]).name = s;
    st.refresh_fast(ci);
    Ok(())
}

/// `MPI_Comm_get_name`.
///
/// # Safety
/// `name` writable for `MPI_MAX_OBJECT_NAME` bytes, `len` writable.
pub unsafe fn get_name(acc: &mut Access, comm: abi::Comm, name: *mut c_char, len: *mut c_int) -> Res<()> {
    let st = acc.st();
    if st.ep.is_none() {
        return Err(not_running(st.phase));
    }
    // MPI-4.1 §7.8: the null handle's name is its own (mpi4py relies on it once MPI_VERSION is 4.1).
    if comm == abi::COMM_NULL {
        // SAFETY: the caller's contract.
        return unsafe { crate::env::put_str("MPI_COMM_NULL", name, abi::MAX_OBJECT_NAME, len) };
    }
    let (_, c) = comm_at(&st.comms, comm)?;
    // SAFETY: the caller's contract.
    unsafe { crate::env::put_str(&c.name, name, abi::MAX_OBJECT_NAME, len) }
}

/// `MPI_Comm_free`: the handle becomes `MPI_COMM_NULL`; the communicator is freed (its context
/// free again, its maps dropped, its slot reusable) as soon as no operation of ours names it:
/// now, or at the next communicator creation or free after those completed (MPI-3.1 §6.4.3:
/// pending operations complete normally).
///
/// # Safety
/// `comm` null or valid for reads and writes.
pub unsafe fn free(acc: &mut Access, comm: *mut abi::Comm) -> Res<()> {
    let st = acc.st();
    if st.ep.is_none() {
        return Err(not_running(st.phase));
    }
    if comm.is_null() {
        return Err(null_out(None));
    }
    // SAFETY: the caller's contract.
    unsafe { free_index(acc, comm) }
}

/// `MPI_Comm_free` of the handle at `comm`, which is not null.
///
/// # Safety
/// `comm` valid for reads and writes.
unsafe fn free_index(acc: &mut Access, comm: *mut abi::Comm) -> Res<()> {
    // SAFETY: the caller's contract.
    let h = unsafe { *comm };
    let (ci, _) = comm_at(&acc.st().comms, h)?;
    if ci < 2 {
        return Err(Fail::new(abi::ERR_COMM, Some(ci), Why::Arg("MPI_COMM_WORLD and MPI_COMM_SELF cannot be freed")));
    }
    // The attributes' delete callbacks run first (MPI-3.1 §6.7.2); they may call MPI (even free
    // this communicator: then it is gone, as for a second free).
    crate::attr::delete_all(acc, ci)?;
    let st = acc.st();
    let (ci, _) = comm_at(&st.comms, h)?;
    dynproc::forget(h);
    Arc::make_mut(&mut st.comms[ci]).live = false;
    st.refresh_fast(ci);
    let errh = st.comms[ci].errh;
    crate::errh::forget_if_unused(st, errh);
    st.comms_retired.push(ci);
    reclaim(st);
    // SAFETY: as above.
    unsafe { *comm = abi::COMM_NULL };
    Ok(())
}

/// `MPI_Comm_set_errhandler`.
pub fn set_errhandler(acc: &mut Access, comm: abi::Comm, errh: Errhandler) -> Res<()> {
    let st = acc.st();
    // A restarted rank may call it before its restore (`crate::ft::park`).
    if !st.started() {
        return Err(not_running(st.phase));
    }
    let (ci, _) = comm_at(&st.comms, comm)?;
    crate::errh::check(st, errh, crate::errh::Kind::Comm).map_err(|e| e.on(ci))?;
    let old = std::mem::replace(&mut Arc::make_mut(&mut st.comms[ci]).errh, errh);
    st.refresh_fast(ci);
    crate::errh::forget_if_unused(st, old);
    Ok(())
}

/// `MPI_Comm_get_errhandler`: a new handle to the handler, which the program frees
/// (`MPI_Errhandler_free`; the communicator keeps using it).
///
/// # Safety
/// `out` null or writable.
pub unsafe fn get_errhandler(acc: &mut Access, comm: abi::Comm, out: *mut Errhandler) -> Res<()> {
    let st = acc.st();
    // A restarted rank may call it before its restore (`crate::ft::park`).
    if !st.started() {
        return Err(not_running(st.phase));
    }
    let (ci, c) = comm_at(&st.comms, comm)?;
    if out.is_null() {
        return Err(null_out(Some(ci)));
    }
    let h = c.errh;
    let h = crate::errh::hand_out(st, h);
    // SAFETY: checked non-null; MPI's contract.
    unsafe { *out = h };
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn maps_between_communicator_and_job_ranks() {
        let w = Comm::new(vec![0, 1, 2, 3], 2, 4, 0, abi::ERRORS_ARE_FATAL, &[0, 0, 1, 1]);
        assert!(w.identity);
        assert_eq!((w.rank, w.size), (2, 4));
        assert_eq!(w.rank_of_world(3), 3);
        assert_eq!(w.nodes.members, vec![vec![0, 1], vec![2, 3]]);
        let c = Comm::new(vec![3, 1], 1, 4, 6, abi::ERRORS_RETURN, &[0, 0, 1, 1]);
        assert!(!c.identity);
        assert_eq!((c.rank, c.size, c.coll_ctx()), (1, 2, 7));
        assert_eq!(c.world_of(0), 3);
        assert_eq!(c.rank_of_world(3), 0);
        assert_eq!(c.rank_of_world(2), -1);
        assert_eq!(c.nodes.members, vec![vec![0], vec![1]], "job rank 3 is on node 1, job rank 1 on node 0");
        let s = Comm::new(vec![5], 5, 6, 2, abi::ERRORS_ARE_FATAL, &[]);
        assert!(!s.identity, "a one-rank communicator of a larger job is not the identity");
        assert_eq!((s.rank, s.size), (0, 1));
    }

    #[test]
    fn handles_and_indices() {
        assert_eq!(index_of(abi::COMM_WORLD), 0);
        assert_eq!(index_of(abi::COMM_SELF), 1);
        assert_eq!(handle_of(5), abi::COMM_BASE + 5);
        assert!(index_of(abi::COMM_NULL) > 1 << 30);
        assert!(index_of(0) > 1 << 30);
    }
}
