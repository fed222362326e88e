//! Small collectives through the node's shared areas ([`CollArea`], the Endpoint's handle): flags
//! and a buffer per member in the segment instead of point-to-point messages, for communicators
//! whose members all share this node's segment (as MPICH's and Open MPI's shared-memory
//! collectives do).
//!
//! **When.** `NEMESIS_COLL_AREA` on (the default), fault tolerance off, every member on this node,
//! no algorithm forced for the operation (`NEMESIS_COLL_ALG`), the data within a bank
//! ([`CollArea::BANK_BYTES`] per member) and an area free; otherwise the point-to-point algorithms
//! run. Every member decides alike from what MPI has them agree on (the communicator, the byte
//! counts), so all take the same path.
//!
//! **Set-up.** Member 0 claims a free area at the communicator's first collective that may use
//! one and broadcasts which (or none) in the collective context (tag `AREA`); each member attaches
//! once and keeps the handle ([`AreaUse`]), and releases it when the communicator is freed or at
//! `MPI_Finalize` ([`release`]).
//!
//! **Invariants.** A flag is waited for through the Endpoint ([`nemesis::Endpoint::wait_until`],
//! or polls and pauses when [`Access::may_block`] says no): progress continues, and a dead member
//! fails the wait (`MPI_ERR_PROC_FAILED`) instead of hanging it. Reductions combine in rank order,
//! so every member of an allreduce computes the same bits. The reasoning and measurements:
//! `docs/design/mpi.md`, "Shared collective areas".

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::Relaxed};
use std::sync::{Arc, OnceLock};

use nemesis::endpoint::{CollArea, CollLane};

use super::algo::{self, Ops, Reduction, Team};
use super::{Tuning, tag};
use crate::comm::Comm;
use crate::error::{Fail, Res, Why};
use crate::state::Access;

/// [`AreaUse::state`]: no collective has tried the area yet.
const UNTRIED: u64 = 0;
/// [`AreaUse::state`]: point-to-point for good (no area, or the communicator cannot use one).
const NONE: u64 = 1;

/// A communicator's hold on an area (shared by the copies of its `Comm`).
#[derive(Debug, Default)]
pub struct AreaUse {
    /// [`UNTRIED`], [`NONE`], or the area's index + 2.
    state: AtomicU64,
    /// Per lane, the collectives this process has run through it (the last one's sequence
    /// number).
    seq: [AtomicU64; 2],
    /// Per lane, the lowest collective every member was seen to have entered (`Lane::enter_with`).
    floor: [AtomicU64; 2],
    /// The job waits in block mode: setting a flag rings the members' doorbells.
    block: AtomicBool,
    /// The claimed area, attached once at set-up (a collective then starts without finding the
    /// area in the segment again).
    lanes: OnceLock<CollArea>,
}

impl AreaUse {
    /// A communicator that may use an area.
    pub fn new() -> Arc<AreaUse> {
        Arc::default()
    }

    /// A communicator that never uses one (a temporary that is never freed).
    pub fn off() -> Arc<AreaUse> {
        Arc::new(AreaUse { state: AtomicU64::new(NONE), ..AreaUse::default() })
    }

    /// The area's index, if the communicator holds one.
    pub fn index(&self) -> Option<u32> {
        // ORDERING: Relaxed: this process's own state (one thread per communicator at a time).
        let s = self.state.load(Relaxed);
        (s >= 2).then(|| (s - 2) as u32)
    }
}

/// Releases `c`'s area (and its local group's, for an intercommunicator), if it holds one: when
/// it is freed, or at `MPI_Finalize`. Every collective of this process on it is over.
pub fn release(c: &Comm) {
    for u in std::iter::once(&c.area).chain(c.local.as_ref().map(|l| &l.area)) {
        // ORDERING: Relaxed: as in `index`.
        let st = u.state.swap(NONE, Relaxed);
        if st >= 2
            && let Some(a) = u.lanes.get()
        {
            // A corrupt area stays taken: lost to the node, never misused.
            let _ = a.release();
        }
    }
}

/// A failure inside an area's protocol: a wait's (the crate's), or the area's own.
struct Failed(Fail);

impl From<nemesis::Error> for Failed {
    fn from(e: nemesis::Error) -> Failed {
        Failed(ep_fail(e))
    }
}

fn unfail(f: Failed) -> Fail {
    f.0
}

/// One collective on an area: the area's lane it uses, this collective's sequence number in it,
/// this member and the team's size, and the members' job ranks (whose deaths end a wait).
struct Area<'c> {
    area: &'c CollLane,
    lane: usize,
    use_: &'c AreaUse,
    s: u64,
    me: u32,
    n: u32,
    world: &'c [u32],
}

/// The area collective `c` runs through (its sequence number taken), or `None`: point-to-point.
/// `len`: the bytes each member puts in its bank (`None`: too many); `forced`: `NEMESIS_COLL_ALG`
/// names an algorithm for the operation. Both are the same on every member.
fn begin<'c>(acc: &mut Access, c: &'c Comm, tu: &Tuning, len: Option<usize>, forced: bool) -> Res<Option<Area<'c>>> {
    let Some(len) = len.filter(|&l| l <= CollArea::BANK_BYTES) else { return Ok(None) };
    begin_within(acc, c, tu, len, forced)
}

/// [`begin`] for a rooted operation (broadcast, reduce, gather, scatter): through the small lane
/// only, whose 31 collectives in flight let the root (or the contributors) run ahead as eager
/// messages do (measured against the large lane: `docs/design/mpi.md`, "Shared collective areas").
fn begin_rooted<'c>(
    acc: &mut Access,
    c: &'c Comm,
    tu: &Tuning,
    len: Option<usize>,
    forced: bool,
) -> Res<Option<Area<'c>>> {
    let Some(len) = len.filter(|&l| l <= CollArea::SMALL_BANK_BYTES) else { return Ok(None) };
    begin_within(acc, c, tu, len, forced)
}

/// [`begin`] for `len` bytes that fit a bank.
#[inline]
fn begin_within<'c>(acc: &mut Access, c: &'c Comm, tu: &Tuning, len: usize, forced: bool) -> Res<Option<Area<'c>>> {
    if !tu.area || forced {
        return Ok(None);
    }
    // ORDERING: Relaxed: as in `AreaUse::index`.
    if c.area.state.load(Relaxed) == UNTRIED {
        setup(acc, c)?;
    }
    let lane = CollArea::lane_of(len);
    let Some(area) = c.area.lanes.get().and_then(|a| a.lane(lane)) else { return Ok(None) };
    // ORDERING: Relaxed: this process's own counter.
    let s = c.area.seq[lane].fetch_add(1, Relaxed) + 1;
    Ok(Some(Area { area, lane, use_: &c.area, s, me: c.rank, n: c.size, world: &c.world }))
}

/// The first collective that may use an area: member 0 claims one and broadcasts its index and
/// stamp (0: none); the others check the area bears that stamp. A communicator that cannot use
/// one (fault tolerance, a member off this node, more members than the segment's ranks) skips
/// the exchange: every member sees the same.
#[cold]
fn setup(acc: &mut Access, c: &Comm) -> Res<()> {
    let ep = acc.ep()?;
    let usable = c.size >= 2
        && c.local.is_none()
        && c.nodes.count() == 1
        && !ep.ft_enabled()
        && ep.coll_area_fits(c.size)
        && c.world.iter().all(|&w| ep.is_local(w));
    if !usable {
        // ORDERING: Relaxed: as in `AreaUse::index`.
        c.area.state.store(NONE, Relaxed);
        return Ok(());
    }
    let block = ep.config().wait == nemesis::WaitMode::Block;
    let mut msg = [0u8; 16];
    if c.rank == 0 {
        match ep.claim_coll_area(c.size) {
            Some((i, stamp)) => {
                tracing::debug!(area = i, members = c.size, context = c.ctx, "collective area claimed");
                msg[..8].copy_from_slice(&(u64::from(i) + 2).to_ne_bytes());
                msg[8..].copy_from_slice(&stamp.to_ne_bytes());
            }
            None => tracing::debug!(members = c.size, context = c.ctx, "no collective area free: messages"),
        }
    }
    let team = Team { ranks: &c.world, me: c.rank as usize };
    algo::bcast_binomial(&mut Ops::new(acc, c.coll_ctx(), tag::AREA)?, team, 0, &mut msg)?;
    let word = |k: usize| u64::from_ne_bytes(msg[k * 8..k * 8 + 8].try_into().unwrap_or_default());
    let (state, stamp) = (word(0), word(1));
    if state >= 2 {
        let area = acc.ep()?.attach_coll_area(state - 2, stamp).map_err(ep_fail)?;
        // A communicator sets up once (its state was UNTRIED): the cell is empty.
        let _ = c.area.lanes.set(area);
    }
    // ORDERING: Relaxed: as in `AreaUse::index`.
    for k in 0..2 {
        c.area.seq[k].store(0, Relaxed);
        c.area.floor[k].store(0, Relaxed);
    }
    c.area.block.store(block, Relaxed);
    c.area.state.store(if state >= 2 { state } else { NONE }, Relaxed);
    Ok(())
}

impl Area<'_> {
    /// Waits for a flag through the Endpoint (see the module documentation).
    fn wait<'a>(
        acc: &'a mut Access,
        world: &'a [u32],
    ) -> impl FnMut(u32, &mut dyn FnMut() -> bool) -> Result<(), Failed> + 'a {
        move |_, ready| {
            let step = |acc: &mut Access, ready: &mut dyn FnMut() -> bool| -> Res<bool> {
                if acc.may_block() {
                    return acc.ep()?.wait_until(world, ready).map(|()| true).map_err(ep_fail);
                }
                acc.ep()?.poll_until(world, ready).map_err(ep_fail)
            };
            let mut spins = 0;
            while !step(acc, ready).map_err(Failed)? {
                acc.pause(&mut spins);
            }
            Ok(())
        }
    }

    /// Wakes the members that may sleep on their doorbells (block mode) after a flag was set:
    /// `only` one of them, or all.
    fn wake(&self, acc: &mut Access, only: Option<u32>) -> Res<()> {
        // ORDERING: Relaxed: as in `AreaUse::index`.
        if !self.use_.block.load(Relaxed) {
            return Ok(());
        }
        let ep = acc.ep()?;
        for (j, &w) in self.world.iter().enumerate() {
            if j as u32 != self.me && only.is_none_or(|o| o == j as u32) {
                ep.wake(w);
            }
        }
        Ok(())
    }

    /// Enters with `data` in this member's bank, then wakes `only` (or all).
    fn enter_with(&self, acc: &mut Access, data: &[u8], only: Option<u32>) -> Res<()> {
        {
            let mut w = Self::wait(acc, self.world);
            let fill = |b: &mut [u8]| b.copy_from_slice(data);
            // ORDERING: Relaxed: this process's own memory (one thread per communicator).
            let mut floor = self.use_.floor[self.lane].load(Relaxed);
            let r = self.area.enter_with(self.me, self.n, self.s, data.len(), fill, &mut floor, &mut w);
            self.use_.floor[self.lane].store(floor, Relaxed);
            r.map_err(unfail)?;
        }
        self.wake(acc, only)
    }

    /// Enters without data.
    fn enter(&self, acc: &mut Access) -> Res<()> {
        self.area.enter(self.me, self.s).map_err(ep_fail)?;
        self.wake(acc, None)
    }

    /// Reads member `j`'s first `len` bytes for this collective with `f`.
    fn read<T>(&self, acc: &mut Access, j: u32, len: usize, f: impl FnOnce(&[u8]) -> T) -> Res<T> {
        let mut w = Self::wait(acc, self.world);
        self.area.read(j, self.s, len, f, &mut w).map_err(unfail)
    }
}

fn ep_fail(e: nemesis::Error) -> Fail {
    Fail { code: crate::error::code_of(&e), comm: None, why: Why::Endpoint(e) }
}

// ---------------------------------------------------------------------------------------------
// The collectives. Each returns false when the communicator does not use an area for it (the
// caller then runs the point-to-point algorithm).

/// `MPI_Barrier`: every member enters, then waits until all have.
pub fn barrier(acc: &mut Access, c: &Comm, tu: &Tuning) -> Res<bool> {
    let Some(a) = begin(acc, c, tu, Some(0), tu.force.barrier.is_some())? else { return Ok(false) };
    a.enter(acc)?;
    let mut w = Area::wait(acc, a.world);
    a.area.await_all(a.n, a.s, &mut w).map_err(unfail)?;
    Ok(true)
}

/// Broadcast of `buf` from `root`: the root's bank, read by every other member.
pub fn bcast(acc: &mut Access, c: &Comm, root: usize, buf: &mut [u8], tu: &Tuning) -> Res<bool> {
    let Some(a) = begin_rooted(acc, c, tu, Some(buf.len()), tu.force.bcast.is_some())? else { return Ok(false) };
    if root as u32 == a.me {
        a.enter_with(acc, buf, None)?;
    } else {
        a.enter(acc)?;
        a.read(acc, root as u32, buf.len(), |b| buf.copy_from_slice(b))?;
    }
    Ok(true)
}

/// Combines every member's contribution in rank order into `data`, which holds this member's.
fn combine_all(a: &Area, acc: &mut Access, data: &mut [u8], red: Reduction) -> Res<()> {
    let len = data.len();
    if a.me == 0 {
        // The lowest rank's data on the left: the result builds in place.
        for j in 1..a.n {
            a.read(acc, j, len, |b| red.combine_higher(data, b))?;
        }
        return Ok(());
    }
    let mut out = vec![0u8; len];
    a.read(acc, 0, len, |b| out.copy_from_slice(b))?;
    for j in 1..a.n {
        if j == a.me {
            red.combine_higher(&mut out, data);
        } else {
            a.read(acc, j, len, |b| red.combine_higher(&mut out, b))?;
        }
    }
    data.copy_from_slice(&out);
    Ok(())
}

/// Reduce of `data` (every member's contribution; the result at `root`) in rank order: the root
/// reads every other member's bank.
pub fn reduce(acc: &mut Access, c: &Comm, root: usize, data: &mut [u8], red: Reduction, tu: &Tuning) -> Res<bool> {
    let Some(a) = begin_rooted(acc, c, tu, Some(data.len()), tu.force.reduce.is_some())? else { return Ok(false) };
    if root as u32 != a.me {
        a.enter_with(acc, data, Some(root as u32))?;
        return Ok(true);
    }
    a.enter(acc)?;
    combine_all(&a, acc, data, red)?;
    Ok(true)
}

/// Allreduce of `data`: every member writes its contribution, then combines all of them in rank
/// order (the same bits everywhere).
pub fn allreduce(acc: &mut Access, c: &Comm, data: &mut [u8], red: Reduction, tu: &Tuning) -> Res<bool> {
    let Some(a) = begin(acc, c, tu, Some(data.len()), tu.force.allreduce.is_some())? else { return Ok(false) };
    a.enter_with(acc, data, None)?;
    combine_all(&a, acc, data, red)?;
    Ok(true)
}

/// Gather of `block` bytes per member to `root`'s `all` (its own block already in place; `all`
/// is empty elsewhere): the root reads every other member's bank.
pub fn gather(acc: &mut Access, c: &Comm, root: usize, mine: &[u8], all: &mut [u8], tu: &Tuning) -> Res<bool> {
    let block = mine.len();
    let len = Some(block).filter(|&b| b > 0);
    let Some(a) = begin_rooted(acc, c, tu, len, tu.force.gather.is_some())? else { return Ok(false) };
    if root as u32 != a.me {
        a.enter_with(acc, mine, Some(root as u32))?;
        return Ok(true);
    }
    a.enter(acc)?;
    for (j, out) in all.chunks_exact_mut(block).enumerate() {
        if j != root {
            a.read(acc, j as u32, block, |b| out.copy_from_slice(b))?;
        }
    }
    Ok(true)
}

/// Scatter of `root`'s `all` (`block` bytes per member; empty elsewhere) into `mine`: the root
/// writes the whole buffer into its bank, every member reads its block.
pub fn scatter(acc: &mut Access, c: &Comm, root: usize, all: &[u8], mine: &mut [u8], tu: &Tuning) -> Res<bool> {
    let block = mine.len();
    let len = block.checked_mul(c.size as usize).filter(|_| block > 0);
    let Some(a) = begin_rooted(acc, c, tu, len, tu.force.scatter.is_some())? else { return Ok(false) };
    let at = a.me as usize * block;
    if root as u32 == a.me {
        a.enter_with(acc, all, None)?;
        mine.copy_from_slice(&all[at..at + block]);
    } else {
        a.enter(acc)?;
        a.read(acc, root as u32, at + block, |b| mine.copy_from_slice(&b[at..]))?;
    }
    Ok(true)
}

/// Allgather of `block` bytes per member into `all` (this member's block already in place).
pub fn allgather(acc: &mut Access, c: &Comm, all: &mut [u8], block: usize, tu: &Tuning) -> Res<bool> {
    let len = Some(block).filter(|&b| b > 0);
    let Some(a) = begin(acc, c, tu, len, tu.force.allgather.is_some())? else { return Ok(false) };
    let me = a.me as usize;
    a.enter_with(acc, &all[me * block..(me + 1) * block], None)?;
    for (j, out) in all.chunks_exact_mut(block).enumerate() {
        if j != me {
            a.read(acc, j as u32, block, |b| out.copy_from_slice(b))?;
        }
    }
    Ok(true)
}

/// All-to-all of `block` bytes per pair: every member writes its whole send buffer into its
/// bank and reads its block from every other member's.
pub fn alltoall(acc: &mut Access, c: &Comm, send: &[u8], recv: &mut [u8], block: usize, tu: &Tuning) -> Res<bool> {
    let len = Some(send.len()).filter(|_| block > 0);
    let Some(a) = begin(acc, c, tu, len, false)? else { return Ok(false) };
    let at = a.me as usize * block;
    a.enter_with(acc, send, None)?;
    for (j, out) in recv.chunks_exact_mut(block).enumerate() {
        if j == a.me as usize {
            out.copy_from_slice(&send[at..at + block]);
        } else {
            a.read(acc, j as u32, at + block, |b| out.copy_from_slice(&b[at..]))?;
        }
    }
    Ok(true)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::abi;

    #[test]
    fn area_use_states() {
        let u = AreaUse::new();
        assert_eq!(u.index(), None);
        u.state.store(5, Relaxed);
        assert_eq!(u.index(), Some(3));
        assert_eq!(AreaUse::off().index(), None);
        assert_eq!(AreaUse::off().state.load(Relaxed), NONE);
    }

    #[test]
    fn area_errors_are_endpoint_errors() {
        let f = unfail(Failed::from(nemesis::Error::Config("x".into())));
        assert_eq!(f.code, abi::ERR_OTHER);
        assert!(matches!(f.why, Why::Endpoint(nemesis::Error::Config(_))));
    }
}
