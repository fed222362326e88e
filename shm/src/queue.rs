//! NEMESIS lock-free MPSC queue (Buntinas, Mercier, Gropp), with shadow head, over cell handles.
//!
//! Source: `shared/papers/mercier-2019-hdr-nemesis-topology.txt` L705–748 (Fig 2.9) and L799–809
//! (shadow head), digested in `shared/reference/nemesis.md`. Used for every rank's receive queue
//! (many senders, one receiver) and every rank's free queue (many receivers returning cells, one
//! owner taking them).
//!
//! # Algorithm
//!
//! `head` and `tail` share one cache line; the consumer works on a `shadow` head on its own line,
//! so in steady state producers and consumer do not false-share, and there is one miss per
//! empty → non-empty transition. Enqueue publishes a cell by replacing the tail and then linking
//! it behind the previous tail (or storing it in `head` if the queue was empty). Dequeue follows
//! `next` links from the shadow; when the last cell is taken it tries to swing the tail to empty,
//! and if a producer got in between it waits for that producer's link.
//!
//! Two departures from Fig 2.9, both for failures (what they cost, and why not less:
//! `docs/design/shm.md`, "The queue's enqueue"):
//! - The tail carries a **generation** (`gen << 32 | handle`), bumped by every successful update,
//!   and the enqueue is a compare-and-swap loop instead of a swap. Before each attempt the producer
//!   writes, in the cell, the tail value it expects to replace (`enq_prev`) and the queue it is
//!   entering (`custody`). The swap in Fig 2.9 returns the previous tail only in a register: if the
//!   producer dies right after it, nobody can tell whether its cell is in the queue.
//! - A recycled cell's `next` is cleared before it is enqueued (the printed algorithm omits it).
//!
//! # Memory ordering
//!
//! Each atomic access carries an `ORDERING:` comment. The chains that matter:
//! - payload → consumer: the producer's `Release` store of `head`/`prev.next` after it wrote the
//!   cell; the consumer's `Acquire` load of `head`/`next`.
//! - consumer's `head = NULL` → next producer's `head = cell`: the consumer's emptying CAS is
//!   `Release` and the producer's CAS `Acquire`s it, so the producer's store of `head` is later in
//!   `head`'s modification order (the weak-memory bug MPICH fixed on ARM in 2021 lives here).
//! - a recycled cell's `next = NULL` → the next producer's `prev.next = cell`: both CASes on the
//!   tail are `AcqRel`, and every update of the tail is a read-modify-write, so every later tail
//!   value carries a release sequence back to every earlier producer.
//!
//! # Failures
//!
//! Any process may die at any instruction (`shared/ARCHITECTURE.md`, "Liveness and failures").
//! Death is known from [`Liveness`] (launcher marks, or pidfds), after which the dead process
//! executes nothing more; the repairs act only on dead ranks' unfinished work (the reasoning in
//! full: `docs/design/shm.md`, "The queue under failures"):
//! - **A tail value was the tail** iff it is the tail now or some cell in custody of this queue
//!   records it as `enq_prev`; generations make tail values unique, so stale records cannot match.
//! - **A producer died between its CAS and its link**: the consumer finds its cell, checks that
//!   its enqueuer is dead and links it itself ([`Queue::pop`], [`Queue::repair_unlinked_head`]);
//!   a live producer is waited for.
//! - **A consumer died**: its queue is sealed (producers get [`Error::PeerDead`]) and one live
//!   rank drains it ([`Queue::drain_next`]), returning each cell to its owner; the drain's
//!   position is in the queue's shared state, so a drainer that dies is succeeded by another.

use crate::arena::{Arena, CellRef};
use crate::cell::{
    CellHandle, CellLink, NULL, SEALED_BIT, custody, custody_queue, custody_rank, tail_gen, tail_handle, tail_value,
};
use crate::error::{Error, Result};
use crate::sync::{AtomicU32, AtomicU64, Backoff, Ordering::*};

/// What a queue needs to know about other ranks to repair itself after a failure.
pub trait Liveness {
    /// A counter that grows whenever some rank is newly known to be dead. Implementations may do
    /// work here (poll pidfds); it is called only on slow paths.
    fn death_epoch(&self) -> u64;
    /// True once `rank` is known to be dead: it will never execute another instruction.
    fn is_dead(&self, rank: u16) -> bool;
    /// True if `rank` is certainly not inside an enqueue now (the caller itself, between its own
    /// calls): a cell it swapped in whose link is still missing was written by someone else, and
    /// waiting for the link would be forever.
    fn idle(&self, rank: u16) -> bool {
        let _ = rank;
        false
    }
}

/// How long a consumer or drainer waits for a live producer to store the link it owes (it
/// swapped its cell in; storing the link is its next step), in milliseconds: far longer than any
/// preemption, so that only a producer stopped within those few instructions, or a segment
/// someone wrote over, makes a wait end in an error rather than a hang.
#[cfg(not(loom))]
static LINK_PATIENCE_MS: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(10_000);

/// Sets how long this process's consumers and drainers wait for a live producer's missing link
/// before [`Error::Corrupt`] (10 s by default). For harnesses that drive every rank from one
/// thread, where a link still missing will never come.
#[cfg(not(loom))]
pub fn set_link_patience(patience: std::time::Duration) {
    let ms = u64::try_from(patience.as_millis()).unwrap_or(u64::MAX);
    // ORDERING: Relaxed; a setting, read on a slow path.
    LINK_PATIENCE_MS.store(ms, std::sync::atomic::Ordering::Relaxed);
}

/// The shared part of a queue: two cache lines.
#[repr(C, align(64))]
#[derive(Debug)]
pub struct QueueShared {
    /// First cell published to an empty queue and not yet taken into the shadow; [`NULL`] when
    /// none. Written by a producer only when its CAS replaced an empty tail; cleared by the
    /// consumer when it moves the cell into `shadow`.
    head: AtomicU32,
    _pad0: u32,
    /// `gen << 32 | handle` of the last cell, or of [`NULL`] when empty; [`SEALED_BIT`] set in the
    /// handle once the consumer died. Only ever changed by read-modify-writes (or by the single
    /// drainer of a sealed queue).
    tail: AtomicU64,
    _pad1: [u64; 6],
    /// The consumer's first cell ([`NULL`]: look at `head`). Consumer-private in normal running;
    /// kept in shared memory so that a drainer can take over after the consumer dies.
    shadow: AtomicU32,
    /// Generation of the empty tail value the consumer last installed: while `shadow` and `head`
    /// are [`NULL`], the next cell to arrive has `enq_prev == (null_gen, NULL)`.
    null_gen: AtomicU32,
    _pad2: [u64; 7],
}

#[cfg(not(loom))]
const _: () = assert!(core::mem::size_of::<QueueShared>() == 128);

impl QueueShared {
    /// An empty queue. In the segment the same state is all-zero memory.
    pub fn new() -> Self {
        QueueShared {
            head: AtomicU32::new(NULL),
            _pad0: 0,
            tail: AtomicU64::new(0),
            _pad1: [0; 6],
            shadow: AtomicU32::new(NULL),
            null_gen: AtomicU32::new(0),
            _pad2: [0; 7],
        }
    }
}

impl QueueShared {
    /// Empties the queue for a new incarnation of its consumer (or, for a free queue, of its
    /// owner): unsealed, no cell, one generation past the last tail value so that no value seen
    /// before the reset is seen again (a drainer's or a marker's comparison stays meaningful).
    ///
    /// Only with no producer and no consumer left: the launcher calls it for a dead rank once
    /// every live rank has retired it and its queue was drained ([`crate::incarnation`]).
    pub(crate) fn reset(&self) {
        // ORDERING: Relaxed throughout; the reset is published by the Release store of the rank's
        // state (EMPTY) that follows, which every later producer or consumer Acquires first.
        let g = tail_gen(self.tail.load(Relaxed)).wrapping_add(1);
        self.head.store(NULL, Relaxed);
        self.shadow.store(NULL, Relaxed);
        self.null_gen.store(g, Relaxed);
        self.tail.store(tail_value(g, NULL), Relaxed);
    }
}

impl Default for QueueShared {
    fn default() -> Self {
        Self::new()
    }
}

/// A queue: its shared words, the arena its cells live in, and its id (recorded in cells'
/// custody). Cheap to copy.
pub struct Queue<'a, A: Arena + ?Sized> {
    shared: &'a QueueShared,
    arena: &'a A,
    id: u16,
}

impl<A: Arena + ?Sized> Clone for Queue<'_, A> {
    fn clone(&self) -> Self {
        *self
    }
}
impl<A: Arena + ?Sized> Copy for Queue<'_, A> {}

/// A cell swapped into the tail but not yet linked behind its predecessor: the second half of an
/// enqueue. Split out so that models can stop a producer between the halves.
#[must_use = "a swapped-in cell is invisible to the consumer until linked"]
pub struct Swapped<'a, A: Arena + ?Sized> {
    queue: Queue<'a, A>,
    prev: CellHandle,
    cell: CellHandle,
}

/// The tail value a cell had while it was last: one generation after the value it replaced.
#[inline(always)]
fn own_value(link: &CellLink, cell: CellHandle) -> u64 {
    // ORDERING: Relaxed; the caller reached `cell` through an Acquire load of the link or head
    // that its producer stored (Release) after writing `enq_prev` for its successful attempt.
    tail_value(tail_gen(link.enq_prev.load(Relaxed)).wrapping_add(1), cell)
}

#[inline(always)]
fn unsealed(v: u64) -> u64 {
    v & !(SEALED_BIT as u64)
}

impl<'a, A: Arena + ?Sized> Queue<'a, A> {
    /// A queue over `shared`, whose cells live in `arena`, identified by `id` (non-zero, unique in
    /// the node).
    pub fn new(shared: &'a QueueShared, arena: &'a A, id: u16) -> Self {
        debug_assert!(id != 0, "queue id 0 means 'not in a queue'");
        Queue { shared, arena, id }
    }

    /// This queue's id.
    pub fn id(&self) -> u16 {
        self.id
    }

    /// Appends `cell` (which the caller owns and has filled) on behalf of rank `me`.
    ///
    /// Fails with [`Error::PeerDead`] if the queue is sealed (its consumer died): the cell then
    /// stays the caller's.
    #[inline(always)]
    pub fn enqueue(&self, cell: CellRef<'a>, me: u16, consumer: u16) -> Result<()> {
        self.swap_in(cell, me, consumer)?.link()
    }

    /// First half of [`enqueue`](Self::enqueue): makes `cell` the tail. `consumer` is only used
    /// for the error if the queue is sealed.
    #[inline(always)]
    pub fn swap_in(&self, cell: CellRef<'a>, me: u16, consumer: u16) -> Result<Swapped<'a, A>> {
        let link = cell.link();
        // ORDERING: Relaxed; published by the Release half of the successful CAS below, which every
        // later writer of this cell's `next` acquires (see the module doc).
        link.next.store(NULL, Relaxed);
        // ORDERING: Relaxed; a hint, the CAS validates it.
        let mut t = self.shared.tail.load(Relaxed);
        // ORDERING: Relaxed for both records; ordered before the CAS by its Release half. Every
        // attempt writes `enq_prev` before its CAS; `custody` once, after the first `enq_prev`, so
        // a reader that sees this queue in `custody` sees an `enq_prev` read from this queue.
        link.enq_prev.store(t, Relaxed);
        link.custody.store(custody(self.id, me), Relaxed);
        crate::failpoint!("enqueue-before-swap");
        loop {
            if tail_handle(t) & SEALED_BIT != 0 {
                // ORDERING: Relaxed; only this rank reads its own cell's custody while it holds it.
                link.custody.store(custody(0, me), Relaxed);
                return Err(Error::PeerDead { rank: consumer });
            }
            let new = tail_value(tail_gen(t).wrapping_add(1), cell.handle());
            // ORDERING: AcqRel on success: Release publishes the cell's link words; Acquire takes in
            // the consumer's `head = NULL` (if `t` is empty) and the previous tail's `next = NULL`.
            // Relaxed on failure: we only retry with the value read.
            match self.shared.tail.compare_exchange_weak(t, new, AcqRel, Relaxed) {
                Ok(_) => return Ok(Swapped { queue: *self, prev: tail_handle(t), cell: cell.handle() }),
                Err(now) => {
                    t = now;
                    // ORDERING: Relaxed, as above.
                    link.enq_prev.store(t, Relaxed);
                }
            }
        }
    }

    /// Does what [`swap_in`](Self::swap_in) does before its CAS, and stops: a producer that dies
    /// just before its swap. For fault-injection models only.
    #[doc(hidden)]
    pub fn prepare_only(&self, cell: CellRef<'a>, me: u16) {
        let link = cell.link();
        // ORDERING: Relaxed throughout, as in `swap_in`.
        link.next.store(NULL, Relaxed);
        link.enq_prev.store(self.shared.tail.load(Relaxed), Relaxed);
        link.custody.store(custody(self.id, me), Relaxed);
    }

    /// Takes the first cell of the queue into the shadow and returns it, without removing it; the
    /// caller processes it, then calls [`pop`](Self::pop) with it. Consumer only.
    #[inline(always)]
    pub fn peek(&self) -> Result<Option<CellRef<'a>>> {
        // ORDERING: Relaxed; only the consumer writes `shadow`.
        let s = self.shared.shadow.load(Relaxed);
        if s != NULL {
            return self.arena.cell(s, "queue shadow").map(Some);
        }
        // ORDERING: Acquire; pairs with the producer's Release store of `head`: the cell's header
        // and payload are visible.
        let h = self.shared.head.load(Acquire);
        if h == NULL {
            return Ok(None);
        }
        let cell = self.arena.cell(h, "queue head")?;
        // ORDERING: Relaxed for both; `shadow` is consumer-private, and `head = NULL` is ordered
        // before the next producer's `head = cell` by our Release CAS in `pop_last`. Shadow is set
        // first: a drainer seeing `head == shadow` knows we died in between.
        self.shared.shadow.store(h, Relaxed);
        crate::failpoint!("dequeue-mid-peek");
        self.shared.head.store(NULL, Relaxed);
        Ok(Some(cell))
    }

    /// Removes `first`, the cell [`peek`](Self::peek) returned, from the queue. Consumer only.
    /// May wait for a producer that has swapped in a successor but not linked it yet; if that
    /// producer is dead, links its cell itself.
    #[inline(always)]
    pub fn pop<L: Liveness + ?Sized>(&self, first: CellRef<'a>, live: &L) -> Result<()> {
        // ORDERING: Acquire; pairs with the producer's Release store of `next`: the successor's
        // contents are visible.
        let next = first.link().next.load(Acquire);
        if next != NULL {
            // Not checked here: it is only stored, and `peek` checks the shadow before any use.
            // ORDERING: Relaxed; consumer-private.
            self.shared.shadow.store(next, Relaxed);
            return Ok(());
        }
        self.pop_last(first.handle(), first.link(), live)
    }

    /// [`peek`](Self::peek) then [`pop`](Self::pop): the first cell, removed from the queue.
    #[inline(always)]
    pub fn dequeue<L: Liveness + ?Sized>(&self, live: &L) -> Result<Option<CellRef<'a>>> {
        match self.peek()? {
            Some(c) => {
                self.pop(c, live)?;
                Ok(Some(c))
            }
            None => Ok(None),
        }
    }

    /// `first` has no successor yet: swing the tail to empty, or wait for the successor's link.
    fn pop_last<L: Liveness + ?Sized>(&self, first: CellHandle, link: &CellLink, live: &L) -> Result<()> {
        let v = own_value(link, first);
        let empty = tail_value(tail_gen(v).wrapping_add(1), NULL);
        // ORDERING: Release on success, so that our `head = NULL` (in `peek`) happens-before the
        // `head = cell` of the producer whose CAS reads `empty`. Relaxed on failure: we then wait
        // for `next` with Acquire loads.
        match self.shared.tail.compare_exchange(v, empty, Release, Relaxed) {
            Ok(_) => {
                // ORDERING: Relaxed; consumer-private. `null_gen` before `shadow`: a drainer that
                // finds `shadow` still set re-derives `null_gen` from the cell.
                self.shared.null_gen.store(tail_gen(empty), Relaxed);
                self.shared.shadow.store(NULL, Relaxed);
                Ok(())
            }
            Err(now) => {
                if tail_handle(now) & SEALED_BIT == 0 && tail_handle(now) == first {
                    // `first` is the tail, but not with the generation its own record implies.
                    return Err(Error::corrupt("cell enq_prev", link.enq_prev.load(Relaxed)));
                }
                let next = self.wait_link(v, &link.next, live)?;
                // ORDERING: Relaxed; consumer-private.
                self.shared.shadow.store(next, Relaxed);
                Ok(())
            }
        }
    }

    /// Waits until `slot` (a cell's `next`, or `head`) holds the cell that replaced tail value
    /// `v`. If that cell's enqueuer is dead, stores the link on its behalf.
    #[cold]
    fn wait_link<L: Liveness + ?Sized>(&self, v: u64, slot: &AtomicU32, live: &L) -> Result<CellHandle> {
        let mut backoff = Backoff::new();
        let mut checked_epoch = None;
        #[cfg(not(loom))]
        let since = std::time::Instant::now();
        loop {
            // ORDERING: Acquire; pairs with the producer's Release store of the link.
            let n = slot.load(Acquire);
            if n != NULL {
                self.arena.check(n, "cell next")?;
                return Ok(n);
            }
            if backoff.is_completed() {
                // Read the epoch before looking, so a death after the look triggers another.
                let epoch = live.death_epoch();
                if checked_epoch != Some(epoch) {
                    checked_epoch = Some(epoch);
                    match self.find_winner(v)? {
                        Some((_, enqueuer)) if live.idle(enqueuer) => {
                            return Err(Error::corrupt("queue link of an idle rank's cell", v));
                        }
                        Some((w, enqueuer)) if live.is_dead(enqueuer) => {
                            // ORDERING: Release, as the producer would have stored it (and for a
                            // drainer that succeeds us).
                            slot.store(w, Release);
                            return Ok(w);
                        }
                        Some(_) => {}
                        // The tail moved on from `v`, yet no cell records replacing it: every
                        // producer writes its record before its swap, and `find_winner` sees every
                        // swap so far. The tail or `v` (from a cell's record) was written by
                        // someone else: waiting would be forever (found by fuzzing, `shm_port`).
                        None => return Err(Error::corrupt("queue tail (no cell replaced it)", v)),
                    }
                }
                // A live producer that owes the link for longer than any preemption lasts
                // stopped inside its enqueue, or never swapped that cell in: the poll says so
                // and leaves the queue as it is (the next poll waits again).
                #[cfg(not(loom))]
                if since.elapsed().as_millis() > u128::from(LINK_PATIENCE_MS.load(std::sync::atomic::Ordering::Relaxed))
                {
                    return Err(Error::corrupt("queue link a live producer never stored", v));
                }
            }
            backoff.snooze();
        }
    }

    /// True if tail value `v` was ever this queue's tail: it is the tail now (`tail_now`), or a
    /// cell in custody of this queue records it as the value it tried to replace.
    fn was_tail(&self, v: u64, tail_now: u64) -> bool {
        if unsealed(tail_now) == v {
            return true;
        }
        (1..=self.arena.cell_count()).any(|h| {
            // SAFETY: `h` ranges over `1..=cell_count()`.
            let l = unsafe { self.arena.link_unchecked(h) };
            // ORDERING: Relaxed; see `find_winner`.
            custody_queue(l.custody.load(Relaxed)) == self.id && l.enq_prev.load(Relaxed) == v
        })
    }

    /// The cell whose CAS replaced tail value `v`, with the rank that enqueued it, if that CAS has
    /// happened. Scans every cell: slow path only.
    fn find_winner(&self, v: u64) -> Result<Option<(CellHandle, u16)>> {
        // ORDERING: Acquire, and tail updates are all RMWs: we synchronise with every successful
        // CAS so far, so every winner's `enq_prev`/`custody` (written before its CAS) is visible.
        // Dead producers' writes are visible because their death was observed with Acquire
        // after it happened.
        let tail_now = self.shared.tail.load(Acquire);
        for h in 1..=self.arena.cell_count() {
            // SAFETY: `h` ranges over `1..=cell_count()`.
            let l = unsafe { self.arena.link_unchecked(h) };
            // ORDERING: Relaxed; see above.
            let c = l.custody.load(Relaxed);
            if custody_queue(c) != self.id || l.enq_prev.load(Relaxed) != v {
                continue;
            }
            // `h` tried to replace `v`; it won iff its own value was ever the tail.
            if self.was_tail(tail_value(tail_gen(v).wrapping_add(1), h), tail_now) {
                return Ok(Some((h, custody_rank(c))));
            }
        }
        Ok(None)
    }

    /// Consumer only, slow path: if the queue looks empty but a producer died after swapping its
    /// cell into the empty tail and before storing `head`, stores `head` on its behalf (the next
    /// [`peek`](Self::peek) takes the cell). Returns true if it did. Call it when the death epoch
    /// changes.
    pub fn repair_unlinked_head<L: Liveness + ?Sized>(&self, live: &L) -> Result<bool> {
        // ORDERING: Relaxed for the consumer-private words; Acquire for `head` as in `peek`.
        if self.shared.shadow.load(Relaxed) != NULL || self.shared.head.load(Acquire) != NULL {
            return Ok(false);
        }
        let empty = tail_value(self.shared.null_gen.load(Relaxed), NULL);
        // ORDERING: Relaxed; `find_winner` reloads it with Acquire.
        if unsealed(self.shared.tail.load(Relaxed)) == empty {
            return Ok(false);
        }
        match self.find_winner(empty)? {
            Some((w, enqueuer)) if live.is_dead(enqueuer) => {
                // Only the winner stores `head` (no other producer replaced an empty tail), and it
                // is dead: `head` is NULL, or `w` if the winner stored it after our look above and
                // then died. Store it on its behalf, as `wait_link` does for a `next`, and let
                // `peek` take it into the shadow, clearing `head`: taking `w` into the shadow here
                // would leave a stored `head` behind, and `w` would be handed out twice.
                // ORDERING: Release, as the producer would have stored it.
                self.shared.head.store(w, Release);
                Ok(true)
            }
            _ => Ok(false),
        }
    }

    /// True if `cell`, whose custody names this queue and whose enqueuer is dead, was swapped in:
    /// it is in the queue (or will be, once [`pop`](Self::pop) repairs the link). False: its
    /// enqueuer died before its CAS and the cell is in nobody's queue.
    pub fn holds_dead_enqueue(&self, cell: CellHandle) -> Result<bool> {
        let link = self.arena.link(cell, "cell")?;
        // ORDERING: Acquire, as in `find_winner`.
        let tail_now = self.shared.tail.load(Acquire);
        Ok(self.was_tail(own_value(link, cell), tail_now))
    }

    /// Seals the queue after its consumer died: from now on every enqueue fails with
    /// [`Error::PeerDead`]. Idempotent.
    pub fn seal(&self) {
        // ORDERING: AcqRel: the drainer that follows sees every producer's completed CAS (and its
        // `enq_prev`), and producers that read the sealed value see nothing they need.
        self.shared.tail.fetch_or(SEALED_BIT as u64, AcqRel);
    }

    /// True once [`seal`](Self::seal) was called.
    pub fn is_sealed(&self) -> bool {
        // ORDERING: Relaxed; a hint, `swap_in` re-checks on every attempt.
        tail_handle(self.shared.tail.load(Relaxed)) & SEALED_BIT != 0
    }

    /// Removes and returns the next cell of a sealed queue whose consumer is dead, or `None` once
    /// the queue is empty. Only one rank at a time may drain (the caller holds the drain claim);
    /// the position is kept in the queue's shared words, so another rank can resume a drain after
    /// the drainer dies. Waits for live producers that swapped in before the seal to link.
    pub fn drain_next<L: Liveness + ?Sized>(&self, live: &L) -> Result<Option<CellRef<'a>>> {
        let sh = self.shared;
        // ORDERING: Acquire, as in `find_winner`; after the seal nobody but the drainer changes it.
        let last = unsealed(sh.tail.load(Acquire));
        if tail_handle(sh.tail.load(Relaxed)) & SEALED_BIT == 0 {
            return Err(Error::corrupt("drained queue tail (not sealed)", last));
        }
        // Normalise the consumer state: the dead consumer (or drainer) may have stopped anywhere.
        let first = loop {
            // ORDERING: Relaxed/Acquire as in `peek`; previous consumers are dead or were the
            // previous holder of the drain claim, which the caller acquired.
            let s = sh.shadow.load(Relaxed);
            let h = sh.head.load(Acquire);
            if s != NULL {
                if h == s {
                    // Died between the two stores of `peek`: `head` is stale.
                    sh.head.store(NULL, Relaxed);
                }
                let l = self.arena.link(s, "queue shadow")?;
                let v = own_value(l, s);
                // ORDERING: Acquire, as in `pop`.
                if l.next.load(Acquire) != NULL || v == last || self.find_winner(v)?.is_some() {
                    break s;
                }
                // Not in the queue any more: the consumer's emptying CAS succeeded and it died
                // before clearing `shadow`. Finish its work.
                sh.null_gen.store(tail_gen(v).wrapping_add(1), Relaxed);
                sh.shadow.store(NULL, Relaxed);
                continue;
            }
            if h != NULL {
                self.arena.check(h, "queue head")?;
                sh.shadow.store(h, Relaxed);
                sh.head.store(NULL, Relaxed);
                break h;
            }
            let empty = tail_value(sh.null_gen.load(Relaxed), NULL);
            if empty == last {
                return Ok(None);
            }
            // The first cell was swapped in but `head` is not stored yet (live producer) or never
            // will be (dead producer).
            let w = self.wait_link(empty, &sh.head, live)?;
            sh.shadow.store(w, Relaxed);
            sh.head.store(NULL, Relaxed);
            break w;
        };
        let link = self.arena.link(first, "drained cell")?;
        let v = own_value(link, first);
        if v == last {
            // The last cell: do what the emptying CAS would, with plain stores (producers fail on
            // the sealed bit, so the drainer is the only writer). Tail first, so a successor
            // drainer finds `first` out of the queue.
            // ORDERING: Release, for the successor drainer's Acquire load.
            let empty_gen = tail_gen(v).wrapping_add(1);
            sh.tail.store(tail_value(empty_gen, NULL) | SEALED_BIT as u64, Release);
            sh.null_gen.store(empty_gen, Relaxed);
            sh.shadow.store(NULL, Relaxed);
        } else {
            let next = self.wait_link(v, &link.next, live)?;
            sh.shadow.store(next, Relaxed);
        }
        Ok(Some(self.arena.cell(first, "drained cell")?))
    }

    /// Consumer only: true if a cell is visible to `peek` (cheap: the shadow, then `head`).
    #[inline(always)]
    pub fn has_visible(&self) -> bool {
        // ORDERING: Relaxed for the consumer-private shadow; Relaxed for `head` too: a hint, `peek`
        // reloads it with Acquire before use.
        self.shared.shadow.load(Relaxed) != NULL || self.shared.head.load(Relaxed) != NULL
    }

    /// The tail value now, without the sealed bit: every cell swapped in so far has a tail value
    /// of at most this generation.
    pub fn tail_now(&self) -> u64 {
        // ORDERING: Acquire, as in `find_winner`.
        unsealed(self.shared.tail.load(Acquire))
    }

    /// Consumer only: `(true, null_gen)` if the queue is empty and was last emptied at generation
    /// `null_gen` (everything swapped in before has been taken).
    pub fn empty_gen(&self) -> (bool, u32) {
        // ORDERING: consumer-private words Relaxed, `head` Acquire as in `peek`, tail Acquire.
        let g = self.shared.null_gen.load(Relaxed);
        let empty = self.shared.shadow.load(Relaxed) == NULL
            && self.shared.head.load(Acquire) == NULL
            && self.tail_now() == tail_value(g, NULL);
        (empty, g)
    }

    /// Walks the queue from the consumer's side and counts its linked cells. Consumer only, with
    /// no concurrent dequeue; producers may append meanwhile (they are counted or not). For
    /// tests and accounting.
    pub fn count_linked(&self) -> Result<usize> {
        // ORDERING: as in `peek`.
        let mut c = match self.shared.shadow.load(Relaxed) {
            NULL => self.shared.head.load(Acquire),
            s => s,
        };
        let mut n = 0usize;
        while c != NULL {
            n += 1;
            if n > self.arena.cell_count() as usize {
                return Err(Error::corrupt("queue cycle at cell", c));
            }
            // ORDERING: Acquire, as in `pop`.
            c = self.arena.link(c, "cell next")?.next.load(Acquire);
        }
        Ok(n)
    }
}

impl<'a, A: Arena + ?Sized> Swapped<'a, A> {
    /// Second half of an enqueue: links the cell behind its predecessor (or publishes it as the
    /// head of an empty queue), making it visible to the consumer.
    #[inline(always)]
    pub fn link(self) -> Result<()> {
        let q = self.queue;
        if self.prev == NULL {
            // ORDERING: Release; publishes the cell's contents to the consumer's Acquire of `head`.
            q.shared.head.store(self.cell, Release);
        } else {
            let prev = q.arena.link(self.prev, "queue tail")?;
            // ORDERING: Release; publishes the cell's contents to the consumer's Acquire of `next`.
            prev.next.store(self.cell, Release);
        }
        Ok(())
    }

    /// The cell swapped in.
    pub fn cell(&self) -> CellHandle {
        self.cell
    }

    /// Abandons the link, as a producer that dies here would. For fault-injection models only.
    #[doc(hidden)]
    pub fn abandon(self) {}
}

#[cfg(all(test, not(loom)))]
mod tests;
