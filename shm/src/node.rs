//! A node: everything the local ranks share. [`Node`] is implemented by the mapped segment
//! (`segment.rs`) and by [`HeapNode`], so the port and every algorithm under it run unchanged in
//! loom models and unit tests.

use core::ops::RangeInclusive;

use crate::arena::{Arena, HeapArena};
use crate::cell::{CellHandle, LINK_BYTES};
use crate::error::{Error, Result};
use crate::fastbox::{FastboxRef, HeapFastbox, STAMP_BYTES};
use crate::layout::{Params, QueueKind};
use crate::queue::{Liveness, Queue, QueueShared};
use crate::sync::{AtomicU32, AtomicU64, Ordering::*};

/// `RankState::state` before the rank attached.
pub const STATE_EMPTY: u32 = 0;
/// `RankState::state` while the rank runs.
pub const STATE_ALIVE: u32 = 1;
/// `RankState::state` once the rank exited or died: it executes nothing more.
pub const STATE_GONE: u32 = 2;

/// `RankState::drain` once the gone rank's receive queue was drained.
pub const DRAIN_DONE: u32 = u32::MAX;

/// Exit status recorded for a rank that finalized normally.
pub const STATUS_CLEAN: u32 = 0;

/// Exit status recorded by a rank that abandoned the segment without finalizing (its endpoint was
/// dropped while the thread panicked). Not a wait status: those fit in 16 bits.
pub const STATUS_ABANDONED: u32 = u32::MAX;

/// One rank's liveness record: one cache line, written rarely.
#[repr(C, align(64))]
#[derive(Debug)]
pub struct RankState {
    /// [`STATE_EMPTY`], [`STATE_ALIVE`] or [`STATE_GONE`]. Set ALIVE by the rank when it attaches;
    /// set GONE by whoever learns it ended (its launcher after `waitpid`, a peer through its pidfd,
    /// or the rank itself at finalize). Set back to EMPTY only by a launcher restarting the rank
    /// as a new incarnation ([`crate::incarnation::reset_rank`]); never otherwise.
    pub(crate) state: AtomicU32,
    /// How it ended, valid once GONE: [`STATUS_CLEAN`], [`STATUS_ABANDONED`] or the raw wait status.
    pub(crate) status: AtomicU32,
    /// Its process id in its own pid namespace, published (Release) after `start_time` and
    /// `pidns` once it registered; 0 before.
    pub(crate) pid: AtomicU32,
    /// Drain of its receive queue after it is gone: 0 not started, `claimant + 1` while a rank
    /// drains it, [`DRAIN_DONE`] when done.
    pub(crate) drain: AtomicU32,
    /// Start time of its process (clock ticks since boot, `/proc/<pid>/stat` field 22), so a peer
    /// opening a pidfd can tell a reused pid; 0 if unknown.
    pub(crate) start_time: AtomicU64,
    /// The rank's doorbell (futex word) for the blocking wait mode: [`DOORBELL_ARMED`] while it
    /// sleeps or is about to, set back to 0 by a sender that rings it or by the rank on waking.
    /// Shared between processes: never used with `FUTEX_PRIVATE_FLAG`.
    pub doorbell: AtomicU32,
    /// Incarnation of the rank number: 0 for the process started with the job, bumped (Release,
    /// before `state` goes back to EMPTY) each time a launcher restarts the rank
    /// ([`crate::incarnation`]).
    pub(crate) incarnation: AtomicU32,
    /// Identity of its pid namespace (the inode of `/proc/self/ns/pid`; 0 if unknown): `pid`
    /// means that process only to a watcher in the same namespace.
    pub(crate) pidns: AtomicU64,
    /// Mail flag of the launcher's fault-tolerance channel: set (Release) by a launcher that wrote
    /// to the rank's control socket, cleared (Acquire swap) by the rank before it reads the socket.
    pub mail: AtomicU32,
    _pad1: u32,
    _pad: [u64; 2],
}

/// [`RankState::doorbell`] while its rank sleeps, or is about to.
pub const DOORBELL_ARMED: u32 = 1;

#[cfg(not(loom))]
const _: () = assert!(core::mem::size_of::<RankState>() == 64);

impl RankState {
    /// The process id the rank published when it registered (0 before), in its pid namespace
    /// ([`pid_namespace`](Self::pid_namespace)).
    pub fn pid(&self) -> u32 {
        // ORDERING: Acquire; pairs with the Release publication in `Segment::register`.
        self.pid.load(Acquire)
    }

    /// The identity of the pid namespace [`pid`](Self::pid) belongs to (0 if unknown); valid
    /// once `pid` is not 0.
    pub fn pid_namespace(&self) -> u64 {
        // ORDERING: Relaxed; read after `pid` (Acquire), which was published after it.
        self.pidns.load(Relaxed)
    }

    /// The pid the rank registered, if it names that process here: it registered (a pid was
    /// published) from this process's pid namespace, and a process with that pid runs with the
    /// start time registered with it (when one was). A pid from another namespace names another
    /// process here, or none; a pid whose process ended names none, or a later process. What a
    /// single-copy transfer (`process_vm_readv`/`writev`) may name for this rank, whatever the
    /// pid its messages carry (`nemesis_lmt` checks it further before the first copy).
    #[cfg(not(loom))]
    pub fn pid_here(&self) -> Option<u32> {
        let pid = self.pid();
        if pid == 0 || self.pid_namespace() != crate::os::pid_namespace() {
            return None;
        }
        match self.start_time() {
            0 => Some(pid),
            start => (crate::os::process_start_time(pid) == Some(start)).then_some(pid),
        }
    }

    /// The start time of the process that registered (clock ticks since boot, `/proc/<pid>/stat`
    /// field 22; 0 if unknown), valid once [`pid`](Self::pid) is not 0.
    pub fn start_time(&self) -> u64 {
        // ORDERING: Relaxed; read after `pid` (Acquire), which was published after it.
        self.start_time.load(Relaxed)
    }

    /// The rank number's incarnation (0 until a launcher restarts it).
    pub fn incarnation(&self) -> u32 {
        // ORDERING: Acquire; pairs with the Release increment in `reset_rank`, which follows the
        // reset of the rank's queues and boxes.
        self.incarnation.load(Acquire)
    }

    /// True once the rank ended.
    pub fn is_gone(&self) -> bool {
        // ORDERING: Acquire, as in `Node::is_gone`.
        self.state.load(Acquire) == STATE_GONE
    }

    /// Claims the record for the process registering as this rank: EMPTY → ALIVE, at the start of
    /// a job or after a launcher reset it for a new incarnation ([`crate::incarnation::reset_rank`]).
    /// Fails (nothing changed) if the rank is registered already or gone.
    pub(crate) fn claim(&self) -> Result<()> {
        // ORDERING: AcqRel; Acquire takes in a reset's Release store of EMPTY (the rank's queues,
        // pool and boxes as the launcher left them); the claim orders nothing else by itself (a
        // segment publishes the pid on its own), and a failed claim reads the state it reports.
        match self.state.compare_exchange(STATE_EMPTY, STATE_ALIVE, AcqRel, Acquire) {
            Ok(_) => Ok(()),
            Err(s) => Err(Error::corrupt("rank already registered, state", s)),
        }
    }

    /// A record for a heap node, in state `state`.
    pub fn new(state: u32) -> Self {
        RankState {
            state: AtomicU32::new(state),
            status: AtomicU32::new(0),
            pid: AtomicU32::new(0),
            drain: AtomicU32::new(0),
            start_time: AtomicU64::new(0),
            doorbell: AtomicU32::new(0),
            incarnation: AtomicU32::new(0),
            pidns: AtomicU64::new(0),
            mail: AtomicU32::new(0),
            _pad1: 0,
            _pad: [0; 2],
        }
    }
}

/// Queue id of rank `r`'s receive queue (ids are recorded in cells' custody; 0 means none).
#[inline(always)]
pub const fn recv_queue_id(r: u16) -> u16 {
    1 + 2 * r
}

/// Queue id of rank `r`'s free queue.
#[inline(always)]
pub const fn free_queue_id(r: u16) -> u16 {
    2 + 2 * r
}

/// Queue id of rank `r`'s netmod free queue: cells of its pool set aside for network arrivals
/// (see [`crate::port::Port::netmod_reserve`]).
#[inline(always)]
pub const fn netmod_queue_id(r: u16) -> u16 {
    1 + 2 * crate::layout::MAX_LOCAL_RANKS + r
}

/// Shared state of the local ranks of one node.
///
/// # Safety
/// Implementors guarantee the accessors return memory laid out as described (queues and rank
/// records for every rank below `ranks()`, `fastboxes_per_rank` boxes per receiver, an arena of
/// `ranks() * cells_per_rank` cells) that lives as long as `self`.
pub unsafe trait Node: Sync {
    /// Where the cells live.
    type Arena: Arena;

    /// Number of local ranks.
    fn ranks(&self) -> u16;
    /// Layout parameters.
    fn params(&self) -> &Params;
    /// The cells.
    fn arena(&self) -> &Self::Arena;
    /// Queue `kind` of rank `r`.
    ///
    /// # Safety
    /// `r < ranks()`.
    unsafe fn queue_shared(&self, r: u16, kind: QueueKind) -> &QueueShared;
    /// Rank `r`'s record.
    ///
    /// # Safety
    /// `r < ranks()`.
    unsafe fn rank_state(&self, r: u16) -> &RankState;
    /// Counter bumped whenever a rank becomes GONE.
    fn death_epoch_word(&self) -> &AtomicU64;
    /// Box `b` hosted by `receiver`.
    ///
    /// # Safety
    /// `receiver < ranks()` and `b < params().fastboxes_per_rank`.
    unsafe fn fastbox(&self, receiver: u16, b: u32) -> FastboxRef<'_>;
    /// The fastbox map entry of `(receiver, sender)`: box index + 1, or 0.
    ///
    /// # Safety
    /// `receiver < ranks()` and `sender < ranks()`.
    unsafe fn fastbox_map(&self, receiver: u16, sender: u16) -> &AtomicU32;
    /// Learns of deaths the node cannot see by itself (pidfds of peers); called on slow paths.
    fn refresh_liveness(&self) {}

    /// Start of copy ring `index` hosted by local rank `host` (`Params::lmt_ring_bytes` bytes,
    /// page-aligned), or `None` if out of range or if this node has no rings (heap nodes).
    fn lmt_ring_base(&self, _host: u16, _index: u32) -> Option<*mut u8> {
        None
    }

    /// Checks a local rank number.
    #[inline(always)]
    fn check_rank(&self, r: u16) -> Result<()> {
        if r < self.ranks() { Ok(()) } else { Err(Error::BadRank { rank: u32::from(r), ranks: self.ranks() }) }
    }

    /// Rank `r`'s record, checked (public for the layers above: pid, doorbell).
    fn state_of(&self, r: u16) -> Result<&RankState> {
        self.check_rank(r)?;
        // SAFETY: checked just above.
        Ok(unsafe { self.rank_state(r) })
    }

    /// Rank `r`'s receive queue (`r` must be valid: checked in debug builds, callers check).
    #[inline(always)]
    fn recv_queue(&self, r: u16) -> Queue<'_, Self::Arena> {
        debug_assert!(r < self.ranks());
        // SAFETY: callers pass a checked rank.
        Queue::new(unsafe { self.queue_shared(r, QueueKind::Recv) }, self.arena(), recv_queue_id(r))
    }

    /// Rank `r`'s free queue (`r` must be valid).
    #[inline(always)]
    fn free_queue(&self, r: u16) -> Queue<'_, Self::Arena> {
        debug_assert!(r < self.ranks());
        // SAFETY: callers pass a checked rank.
        Queue::new(unsafe { self.queue_shared(r, QueueKind::Free) }, self.arena(), free_queue_id(r))
    }

    /// Rank `r`'s netmod free queue (`r` must be valid): the cells its network modules fill with
    /// arrivals; only rank `r` produces and consumes it.
    #[inline(always)]
    fn netmod_free_queue(&self, r: u16) -> Queue<'_, Self::Arena> {
        debug_assert!(r < self.ranks());
        // SAFETY: callers pass a checked rank.
        let shared = unsafe { self.queue_shared(r, QueueKind::Netmod) };
        Queue::new(shared, self.arena(), netmod_queue_id(r))
    }

    /// Handles of rank `r`'s cells.
    fn pool(&self, r: u16) -> RangeInclusive<CellHandle> {
        let c = self.params().cells_per_rank;
        (u32::from(r) * c + 1)..=(u32::from(r) + 1) * c
    }

    /// The rank whose pool holds cell `h` (a valid handle): where it returns after delivery.
    #[inline(always)]
    fn owner_of(&self, h: CellHandle) -> u16 {
        ((h - 1) >> self.params().cells_per_rank.trailing_zeros()) as u16
    }

    /// True once rank `r` is known to have ended.
    #[inline]
    fn is_gone(&self, r: u16) -> bool {
        // ORDERING: Acquire; pairs with the Release swap in `mark_gone`, so everything the gone
        // rank did before it ended (as observed by whoever marked it) is visible.
        // SAFETY: `r < ranks()` is checked first.
        r < self.ranks() && unsafe { self.rank_state(r) }.state.load(Acquire) == STATE_GONE
    }

    /// Records that rank `r` ended with `status`, and bumps the death epoch if it was not known.
    /// Returns true if this call made it GONE. Called by the launcher after `waitpid`, by a peer
    /// that saw its pidfd become readable, or by the rank itself at finalize.
    fn mark_gone(&self, r: u16, status: u32) -> Result<bool> {
        let st = self.state_of(r)?;
        // ORDERING: Relaxed; published by the Release swap below.
        st.status.store(status, Relaxed);
        // ORDERING: AcqRel; Release publishes the status (and, for a launcher, what waitpid made
        // visible); Acquire so two markers agree on who did it.
        if st.state.swap(STATE_GONE, AcqRel) == STATE_GONE {
            return Ok(false);
        }
        // ORDERING: Release; readers Acquire the epoch, then the states.
        self.death_epoch_word().fetch_add(1, Release);
        Ok(true)
    }
}

impl<N: Node + ?Sized> Liveness for N {
    fn death_epoch(&self) -> u64 {
        self.refresh_liveness();
        // ORDERING: Acquire; pairs with the Release increment in `mark_gone`.
        self.death_epoch_word().load(Acquire)
    }

    fn is_dead(&self, rank: u16) -> bool {
        self.is_gone(rank)
    }
}

/// A node on the heap: loom models, unit tests, and threads-as-ranks experiments.
pub struct HeapNode {
    ranks: u16,
    params: Params,
    arena: HeapArena,
    queues: Box<[QueueShared]>,
    states: Box<[RankState]>,
    epoch: AtomicU64,
    boxes: Box<[HeapFastbox]>,
    map: Box<[AtomicU32]>,
}

impl HeapNode {
    /// A node of `ranks` ranks, all ALIVE, laid out by `params` (validated as for a segment).
    pub fn new(ranks: u16, params: Params) -> Result<Self> {
        params.validate(ranks)?;
        let r = ranks as usize;
        let cells = ranks as u32 * params.cells_per_rank;
        let node = HeapNode {
            ranks,
            params,
            arena: HeapArena::new(cells, params.cell_size as usize - LINK_BYTES),
            queues: (0..3 * r).map(|_| QueueShared::new()).collect(),
            states: (0..r).map(|_| RankState::new(STATE_ALIVE)).collect(),
            epoch: AtomicU64::new(0),
            boxes: (0..r * params.fastboxes_per_rank as usize)
                .map(|_| HeapFastbox::new(params.fastbox_slots, params.fastbox_slot_size as usize - STAMP_BYTES))
                .collect(),
            map: (0..r * r).map(|_| AtomicU32::new(0)).collect(),
        };
        node.fill_free_queues()?;
        Ok(node)
    }

    /// Registers rank `r` as a process attaching to a segment does (`Segment::register`): its
    /// record goes from EMPTY to ALIVE. Every rank of a new heap node is ALIVE already; this is for
    /// a rank reset by [`crate::incarnation::reset_rank`], to run it as its new incarnation.
    pub fn register(&self, r: u16) -> Result<()> {
        self.state_of(r)?.claim()
    }

    /// Puts every cell into its owner's free queue, as segment creation does.
    fn fill_free_queues(&self) -> Result<()> {
        for r in 0..self.ranks {
            let fq = self.free_queue(r);
            for h in self.pool(r) {
                fq.enqueue(self.arena.cell(h, "pool cell")?, r, r)?;
            }
        }
        Ok(())
    }
}

// SAFETY: every accessor indexes boxed slices sized from `ranks` and `params` at construction.
unsafe impl Node for HeapNode {
    type Arena = HeapArena;

    fn ranks(&self) -> u16 {
        self.ranks
    }
    fn params(&self) -> &Params {
        &self.params
    }
    fn arena(&self) -> &HeapArena {
        &self.arena
    }
    unsafe fn queue_shared(&self, r: u16, kind: QueueKind) -> &QueueShared {
        // SAFETY: the caller guarantees `r < ranks`, so the index is below `3 * ranks`, the
        // slice's length.
        unsafe { self.queues.get_unchecked(3 * r as usize + kind as usize) }
    }
    unsafe fn rank_state(&self, r: u16) -> &RankState {
        // SAFETY: the caller guarantees `r < ranks`, the slice's length.
        unsafe { self.states.get_unchecked(r as usize) }
    }
    fn death_epoch_word(&self) -> &AtomicU64 {
        &self.epoch
    }
    unsafe fn fastbox(&self, receiver: u16, b: u32) -> FastboxRef<'_> {
        let i = receiver as usize * self.params.fastboxes_per_rank as usize + b as usize;
        // SAFETY: the caller guarantees both indices are in range.
        unsafe { self.boxes.get_unchecked(i) }.get()
    }
    unsafe fn fastbox_map(&self, receiver: u16, sender: u16) -> &AtomicU32 {
        // SAFETY: the caller guarantees both ranks are below `ranks`.
        unsafe { self.map.get_unchecked(receiver as usize * self.ranks as usize + sender as usize) }
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    /// A record as a rank registering `pid`, started at `start`, from our pid namespace.
    fn registered(pid: u32, start: u64) -> RankState {
        let st = RankState::new(STATE_ALIVE);
        st.pidns.store(crate::os::pid_namespace(), Relaxed);
        st.start_time.store(start, Relaxed);
        st.pid.store(pid, Release);
        st
    }

    #[test]
    fn a_pid_names_a_rank_only_while_its_registered_process_runs() {
        let me = std::process::id();
        let start = crate::os::process_start_time(me).unwrap();
        assert_eq!(registered(me, start).pid_here(), Some(me));
        assert_eq!(registered(me, 0).pid_here(), Some(me), "start time unknown: the pid alone");
        // Another process now has the pid (its start time differs): a reused pid.
        assert_eq!(registered(me, start + 1).pid_here(), None);
        // The process ended.
        let mut dead = std::process::Command::new("true").spawn().unwrap();
        let pid = dead.id();
        let dead_start = crate::os::process_start_time(pid).unwrap_or(1);
        dead.wait().unwrap();
        assert_eq!(registered(pid, dead_start).pid_here(), None);
        assert_eq!(registered(0, 0).pid_here(), None);
    }
}
