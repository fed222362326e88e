//! The collectives' shared areas: small collectives of a communicator whose members all share
//! this node's segment go through flags and buffers in the segment instead of point-to-point
//! messages, as MPICH's shared-memory collectives (CH4's "release/gather" trees over a shared
//! buffer per rank, with sequence-numbered flags) and Open MPI's `coll/sm` (per-rank control
//! flags and data segments in a mapped file, used in turns) do.
//!
//! The segment holds a pool of [`AREAS`] areas (`layout.rs`). A communicator's member 0 claims a
//! free one at the communicator's first small collective (a compare-and-swap on its `state`) and
//! tells the others which by a message; communicators that find none use point-to-point
//! messages. Every member releases it when it frees the communicator (or finalizes); the last
//! one frees it ([`AreaRef::release`]).
//!
//! An area has [`LANES`] **lanes**: a small one (many small banks, for collectives of a few
//! hundred bytes per member and the barrier) and a large one (fewer, larger banks). A lane has,
//! per member `i` (its rank in the communicator), a **sequence word** (the member's words share
//! its own cache line) and `K` **banks**. Members number the collectives that use a lane `1, 2,
//! ...` (the same on every member: MPI has them call collectives in the same order, and the lane
//! is chosen by the data's size, which they agree on). Collective `s` of a lane uses its bank
//! `s mod K`:
//! - member `i` **enters** collective `s` by storing `s` in its sequence word (Release), after
//!   writing its data, if any, into its bank `s mod K`;
//! - a member **reads** member `j`'s bank for `s` once `j`'s sequence word is at least `s`
//!   (Acquire);
//! - a member **writes** its bank for `s` only once every member's word is at least
//!   `s − (K − 1)`: a member that entered that collective has finished `s − K`, the last one that
//!   used this bank, so nobody still reads it. A member thus runs up to `K − 1` collectives ahead
//!   of the slowest (why: `docs/design/shm.md`, "Collective areas").
//!
//! The lanes are independent: a member that entered collective `s` of one lane has finished
//! every collective before it, of either lane.
//!
//! Sequence words only grow while the area is claimed (no flag is ever reset between two
//! collectives, so no reset can race with a reader); the claimer zeroes them when it claims the
//! area, before the message that names the area reaches the other members.
//!
//! The protocol is model-checked by `loom-tests/tests/collarea.rs` on this code (over
//! [`HeapArea`]).

use core::marker::PhantomData;

use crate::error::{Error, Result};
use crate::sync::{AtomicU64, Ordering::*};

/// Areas in a segment: communicators that share the node beyond this many use point-to-point
/// collectives.
pub const AREAS: u32 = 8;

/// A lane's shape: banks per member (`K`, at least 2) and bytes per bank.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Shape {
    pub depth: u32,
    pub bank_bytes: usize,
}

/// The lanes of the segment's areas: 32 banks of 256 bytes (a broadcast's root, or a reduction's
/// contributors, run up to 31 collectives ahead of the slowest member), and 4 of 2 KiB. 16 KiB per
/// member and area. Measured (`nemesis-bench coll --ranks 4 --max-size 64`, 4 ranks on 2 CPUs,
/// yield): 8-byte broadcasts took 4.1 µs a call with 8 banks, 0.5–1.9 µs with 32.
pub const LANES: [Shape; 2] = [Shape { depth: 32, bank_bytes: 256 }, Shape { depth: 4, bank_bytes: 2048 }];

/// The largest contribution of a member to one collective through an area (a broadcast's or a
/// reduction's data; a scatter's or an all-to-all's whole send buffer): larger collectives use
/// point-to-point messages.
pub const BANK_BYTES: usize = LANES[1].bank_bytes;

/// The lane of a collective whose members contribute `len` bytes each (at most [`BANK_BYTES`]).
pub const fn lane_of(len: usize) -> usize {
    if len <= LANES[0].bank_bytes { 0 } else { 1 }
}

/// Bytes of an area's control part for `members` members: its head line (state and references),
/// one line per member (its sequence words), rounded to a page so that the banks start
/// page-aligned.
pub const fn control_bytes(members: u32) -> u64 {
    (64 * (1 + members as u64)).next_multiple_of(4096)
}

/// Bytes of one lane's banks for `members` members.
const fn lane_bytes(l: Shape, members: u32) -> u64 {
    members as u64 * l.depth as u64 * l.bank_bytes as u64
}

/// Bytes of one area for `members` members.
pub const fn area_bytes(members: u32) -> u64 {
    control_bytes(members) + lane_bytes(LANES[0], members) + lane_bytes(LANES[1], members)
}

/// A view of one lane of an area: its sequence words and banks.
#[derive(Clone, Copy)]
pub struct Lane<'a> {
    /// Member 0's sequence word; member `i`'s is `seq_stride × i` bytes further. Member `i`'s
    /// word is written by member `i` alone while the area is claimed: the last collective of the
    /// lane it entered.
    seqs: *const u8,
    seq_stride: usize,
    /// Member 0's bank 0; member `i`'s bank `b` is `(depth × i + b) × bank_bytes` bytes further.
    /// Written by its member alone, read by the others, as the module documentation says.
    banks: *mut u8,
    shape: Shape,
    members: u32,
    _memory: PhantomData<&'a AtomicU64>,
    /// One tracked cell per bank (loom checks every bank write against the reads before it).
    #[cfg(loom)]
    tracks: Option<&'a [loom::cell::UnsafeCell<()>]>,
}

impl core::fmt::Debug for Lane<'_> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("Lane")
            .field("banks", &self.banks)
            .field("shape", &self.shape)
            .field("members", &self.members)
            .finish()
    }
}

// SAFETY: a view of shared memory used only through this protocol; nothing is tied to a thread.
unsafe impl Send for Lane<'_> {}
// SAFETY: as above.
unsafe impl Sync for Lane<'_> {}

/// A view of one area: its claim words and its lanes.
#[derive(Clone, Copy)]
pub struct AreaRef<'a> {
    /// Even: free; odd: claimed. Each claim and each final release adds one, so the value a
    /// claim leaves (its *stamp*) names that claim.
    state: &'a AtomicU64,
    /// Members that have not released the current claim.
    refs: &'a AtomicU64,
    lanes: [Lane<'a>; 2],
}

fn bad_member(i: u32, members: u32) -> Error {
    Error::BadRank { rank: i, ranks: members.min(u32::from(u16::MAX)) as u16 }
}

impl<'a> Lane<'a> {
    /// A lane whose words and banks are at the given addresses.
    ///
    /// # Safety
    /// For every `i < members`, `seqs + i × seq_stride` must be a valid, aligned `AtomicU64`, and
    /// `banks` must start `shape.depth × members × shape.bank_bytes` bytes shared only through
    /// this protocol, all living for `'a`; `shape.depth` at least 2.
    pub unsafe fn from_raw(seqs: *const u8, seq_stride: usize, banks: *mut u8, shape: Shape, members: u32) -> Self {
        Lane {
            seqs,
            seq_stride,
            banks,
            shape,
            members,
            _memory: PhantomData,
            #[cfg(loom)]
            tracks: None,
        }
    }

    /// Most members a team on this lane may have.
    #[inline]
    pub fn members(&self) -> u32 {
        self.members
    }

    /// The lane's shape.
    #[inline]
    pub fn shape(&self) -> Shape {
        self.shape
    }

    #[inline(always)]
    fn seq(&self, i: u32) -> &'a AtomicU64 {
        debug_assert!(i < self.members);
        // SAFETY: `i < members` (every caller checks it); `from_raw`'s contract.
        unsafe { &*(self.seqs.add(i as usize * self.seq_stride) as *const AtomicU64) }
    }

    /// Index of member `i`'s bank for collective `s` among all banks of the lane.
    #[inline(always)]
    fn bank_index(&self, i: u32, s: u64) -> usize {
        i as usize * self.shape.depth as usize + (s % u64::from(self.shape.depth)) as usize
    }

    /// Bank `s mod K` of member `i` (checked below `members`).
    #[inline(always)]
    fn bank_ptr(&self, i: u32, s: u64) -> Result<*mut u8> {
        if i >= self.members {
            return Err(bad_member(i, self.members));
        }
        // SAFETY: `i < members`, so the bank lies inside the lane (`from_raw`'s contract).
        Ok(unsafe { self.banks.add(self.bank_index(i, s) * self.shape.bank_bytes) })
    }

    #[inline(always)]
    fn note(&self, _i: u32, _s: u64, _write: bool) {
        #[cfg(loom)]
        if let Some(t) = self.tracks {
            let k = self.bank_index(_i, _s);
            if _write { t[k].with_mut(|_| ()) } else { t[k].with(|_| ()) }
        }
    }

    /// Zeroes every member's sequence word (a new claim; see [`AreaRef::claim`]).
    fn reset(&self) {
        for i in 0..self.members {
            // ORDERING: Relaxed; published to the new team by the claim's message (no member of
            // it reads them before the message naming the area).
            self.seq(i).store(0, Relaxed);
        }
    }

    /// True once member `j` has entered collective `s` (its data for `s` is in its bank).
    #[inline(always)]
    pub fn reached(&self, j: u32, s: u64) -> bool {
        // ORDERING: Acquire; pairs with `enter`'s Release: member j's bank writes (and its reads
        // of the collectives before) happen-before what we do next.
        j < self.members && self.seq(j).load(Acquire) >= s
    }

    /// Waits until member `j` has entered collective `s`: at once if it has, else through
    /// `wait(j, ready)`, which returns once `ready()` holds or fails (a dead member, say).
    #[inline(always)]
    pub fn await_member<E: From<Error>>(
        &self,
        j: u32,
        s: u64,
        wait: &mut impl FnMut(u32, &mut dyn FnMut() -> bool) -> Result<(), E>,
    ) -> Result<(), E> {
        if j >= self.members {
            return Err(bad_member(j, self.members).into());
        }
        if self.reached(j, s) {
            return Ok(());
        }
        wait(j, &mut || self.reached(j, s))
    }

    /// Waits until members `0..n` have all entered collective `s`.
    pub fn await_all<E: From<Error>>(
        &self,
        n: u32,
        s: u64,
        wait: &mut impl FnMut(u32, &mut dyn FnMut() -> bool) -> Result<(), E>,
    ) -> Result<(), E> {
        for j in 0..n {
            self.await_member(j, s, wait)?;
        }
        Ok(())
    }

    /// Member `me` enters collective `s` with no data of its own (its bank untouched).
    #[inline(always)]
    pub fn enter(&self, me: u32, s: u64) -> Result<()> {
        if me >= self.members {
            return Err(bad_member(me, self.members));
        }
        // ORDERING: Release; our reads of the collectives before `s` happen-before any write of
        // a member that waits for us to enter `s` before reusing its bank.
        self.seq(me).store(s, Release);
        Ok(())
    }

    /// Waits until members `0..n` have all entered collective `s`; returns the lowest
    /// collective they were seen to have entered (at least `s`).
    fn await_lowest<E: From<Error>>(
        &self,
        n: u32,
        s: u64,
        wait: &mut impl FnMut(u32, &mut dyn FnMut() -> bool) -> Result<(), E>,
    ) -> Result<u64, E> {
        let mut lowest = u64::MAX;
        for j in 0..n {
            self.await_member(j, s, wait)?;
            // ORDERING: Acquire, as in `reached`: what member j did before entering the value
            // seen happens-before our later writes that rely on it (`enter_with`'s `floor`).
            lowest = lowest.min(self.seq(j).load(Acquire));
        }
        Ok(lowest)
    }

    /// Member `me` enters collective `s` of a team of `n`, with `len` bytes of data that `fill`
    /// writes into its bank for `s` once the bank is free (every member has entered
    /// `s − (K − 1)`). `floor` is the caller's memory of the lowest collective every member was
    /// seen to have entered (0 at first; kept per team and lane): the members' words are read
    /// again only when it is too low, so that a member running ahead does not miss on every
    /// other member's line at every collective.
    #[allow(clippy::too_many_arguments)]
    pub fn enter_with<E: From<Error>>(
        &self,
        me: u32,
        n: u32,
        s: u64,
        len: usize,
        fill: impl FnOnce(&mut [u8]),
        floor: &mut u64,
        wait: &mut impl FnMut(u32, &mut dyn FnMut() -> bool) -> Result<(), E>,
    ) -> Result<(), E> {
        if len > self.shape.bank_bytes {
            return Err(Error::TooLarge { len, max: self.shape.bank_bytes }.into());
        }
        let bank = self.bank_ptr(me, s)?;
        // Bank `s mod K` was last used by `s − K` (none before collective K + 1).
        let behind = u64::from(self.shape.depth - 1);
        if s > u64::from(self.shape.depth) && *floor < s - behind {
            // Sequence words only grow: a member seen at `floor` is there still.
            *floor = self.await_lowest(n, s - behind, wait)?;
        }
        self.note(me, s, true);
        // SAFETY: `len <= bank_bytes` bytes of our own bank for `s`: every member entered
        // `s − (K − 1)`, so none reads this bank any more (the last collective that used it was
        // `s − K`), and none reads it for `s` before we enter `s` below.
        fill(unsafe { core::slice::from_raw_parts_mut(bank, len) });
        self.enter(me, s)?;
        Ok(())
    }

    /// Waits until member `j` has entered collective `s`, then lets `f` read the first `len`
    /// bytes of its bank for `s`.
    pub fn read<T, E: From<Error>>(
        &self,
        j: u32,
        s: u64,
        len: usize,
        f: impl FnOnce(&[u8]) -> T,
        wait: &mut impl FnMut(u32, &mut dyn FnMut() -> bool) -> Result<(), E>,
    ) -> Result<T, E> {
        if len > self.shape.bank_bytes {
            return Err(Error::TooLarge { len, max: self.shape.bank_bytes }.into());
        }
        let bank = self.bank_ptr(j, s)?;
        self.await_member(j, s, wait)?;
        self.note(j, s, false);
        // SAFETY: member j entered `s` after writing its bank for `s` (Acquire in `reached`),
        // and writes it again (for `s + K`) only once we have entered `s + 1`, after this read;
        // `len <= bank_bytes`.
        Ok(f(unsafe { core::slice::from_raw_parts(bank, len) }))
    }
}

impl<'a> AreaRef<'a> {
    /// An area with claim words `state` and `refs` and lanes `lanes` (of the same members).
    pub fn new(state: &'a AtomicU64, refs: &'a AtomicU64, lanes: [Lane<'a>; 2]) -> Self {
        AreaRef { state, refs, lanes }
    }

    /// The area laid out in the node segment at `base` ([`area_bytes`]`(members)` bytes): the
    /// head line (state, references), one line per member holding its lanes' sequence words,
    /// rounded to a page, then each lane's banks.
    ///
    /// # Safety
    /// `base` must be page-aligned and start that many bytes of the mapped segment, shared only
    /// through this protocol, for `'a`.
    pub unsafe fn in_segment(base: *mut u8, members: u32) -> Self {
        let control = control_bytes(members) as usize;
        let small = lane_bytes(LANES[0], members) as usize;
        // SAFETY: the caller's contract: the head line at `base` (state, then references, both
        // 8-byte aligned), member i's line 64 bytes per member after it (lane k's word at 8 k),
        // then lane 0's banks after the page-rounded control part, then lane 1's.
        unsafe {
            let lane = |k: usize, banks: *mut u8| Lane::from_raw(base.add(64 + 8 * k), 64, banks, LANES[k], members);
            AreaRef::new(
                &*(base as *const AtomicU64),
                &*(base.add(8) as *const AtomicU64),
                [lane(0, base.add(control)), lane(1, base.add(control + small))],
            )
        }
    }

    /// Lane `k` (0: small, 1: large; [`lane_of`]).
    #[inline(always)]
    pub fn lane(&self, k: usize) -> &Lane<'a> {
        &self.lanes[k.min(1)]
    }

    /// The current claim's stamp (odd while claimed): the other members check the area they
    /// were told of still bears the stamp its claimer saw.
    pub fn stamp(&self) -> u64 {
        // ORDERING: Acquire; pairs with the claimer's CAS (itself after the previous claim's last
        // release), read after the claimer's message, which orders its resets before us anyway.
        self.state.load(Acquire)
    }

    /// Claims the area for a team of `n` members (`1..=members`): its sequence words are zeroed
    /// and `n` releases will free it. Returns the claim's stamp, or `None` if the area is taken
    /// (or `n` does not fit). The other members must learn of the claim through a message (whose
    /// delivery orders these stores before their first use).
    pub fn claim(&self, n: u32) -> Option<u64> {
        if n == 0 || n > self.lanes[0].members {
            return None;
        }
        // ORDERING: Relaxed; only a hint: the CAS below decides.
        let s = self.state.load(Relaxed);
        if !s.is_multiple_of(2) {
            return None;
        }
        // ORDERING: Acquire on success; pairs with the Release of the previous claim's last
        // release: every use of the area by its previous team happens-before our resets.
        if self.state.compare_exchange(s, s + 1, Acquire, Relaxed).is_err() {
            return None;
        }
        // ORDERING: Relaxed; published to the team by the claim's message, and to the releasers
        // by their AcqRel decrements' order after it.
        self.refs.store(u64::from(n), Relaxed);
        for l in &self.lanes {
            l.reset();
        }
        Some(s + 1)
    }

    /// Releases this member's hold on the claim stamped `stamp`; true if it was the last, which
    /// frees the area. Every collective of this member on the area must be over.
    pub fn release(&self, stamp: u64) -> Result<bool> {
        loop {
            // ORDERING: Acquire; see the CAS.
            let r = self.refs.load(Acquire);
            if r == 0 {
                return Err(Error::corrupt("collective area references", 0u64));
            }
            // ORDERING: AcqRel; the decrements form one release sequence, so the last releaser
            // acquires every earlier releaser's use of the area before it frees it.
            if self.refs.compare_exchange(r, r - 1, AcqRel, Acquire).is_ok() {
                if r > 1 {
                    return Ok(false);
                }
                // ORDERING: Release; pairs with the next claimer's Acquire CAS. A state other
                // than our stamp is corruption: the area then stays taken (lost, not misused).
                return match self.state.compare_exchange(stamp, stamp + 1, Release, Relaxed) {
                    Ok(_) => Ok(true),
                    Err(v) => Err(Error::corrupt("collective area state", v)),
                };
            }
        }
    }
}

/// An area on the heap: loom models and unit tests.
pub struct HeapArea {
    state: AtomicU64,
    refs: AtomicU64,
    /// Per lane.
    seqs: [Box<[AtomicU64]>; 2],
    banks: [Box<[core::cell::UnsafeCell<u8>]>; 2],
    shapes: [Shape; 2],
    #[cfg(loom)]
    tracks: [Box<[loom::cell::UnsafeCell<()>]>; 2],
}

// SAFETY: shared mutation is through atomics, or through raw pointers ordered by the protocol.
unsafe impl Sync for HeapArea {}
// SAFETY: as above.
unsafe impl Send for HeapArea {}

impl HeapArea {
    /// A free area for up to `members` members whose two lanes have `depth` banks (at least 2)
    /// of `bank_bytes` each.
    pub fn new(members: u32, depth: u32, bank_bytes: usize) -> Self {
        let shape = Shape { depth: depth.max(2), bank_bytes };
        let banks = members as usize * shape.depth as usize;
        let seqs = || (0..members).map(|_| AtomicU64::new(0)).collect();
        let bytes = || (0..banks * bank_bytes).map(|_| core::cell::UnsafeCell::new(0)).collect();
        HeapArea {
            state: AtomicU64::new(0),
            refs: AtomicU64::new(0),
            seqs: [seqs(), seqs()],
            banks: [bytes(), bytes()],
            shapes: [shape; 2],
            #[cfg(loom)]
            tracks: [
                (0..banks).map(|_| loom::cell::UnsafeCell::new(())).collect(),
                (0..banks).map(|_| loom::cell::UnsafeCell::new(())).collect(),
            ],
        }
    }

    /// A view of the area.
    pub fn get(&self) -> AreaRef<'_> {
        let lane = |k: usize| {
            // SAFETY: `seqs[k]` holds `members` atomics at the stride of one AtomicU64;
            // `banks[k]` holds `depth × members` banks of `bank_bytes` (`depth >= 2`); all live
            // as long as `self`.
            #[allow(unused_mut)]
            let mut l = unsafe {
                Lane::from_raw(
                    self.seqs[k].as_ptr() as *const u8,
                    core::mem::size_of::<AtomicU64>(),
                    self.banks[k].as_ptr() as *mut u8,
                    self.shapes[k],
                    self.seqs[k].len() as u32,
                )
            };
            #[cfg(loom)]
            {
                l.tracks = Some(&self.tracks[k]);
            }
            l
        };
        AreaRef::new(&self.state, &self.refs, [lane(0), lane(1)])
    }
}

#[cfg(all(test, not(loom)))]
mod tests;
