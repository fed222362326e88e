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
//! An area has, per member `i` (its rank in the communicator), a **sequence word** on its own
//! cache line and `K` **banks** of [`BANK_BYTES`] ([`BANKS`] in the segment). Members number the
//! collectives that use the area `1, 2, ...` (the same on every member: MPI has them call
//! collectives in the same order). Collective `s` uses bank `s mod K`:
//! - member `i` **enters** collective `s` by storing `s` in its sequence word (Release), after
//!   writing its data, if any, into its bank `s mod K`;
//! - a member **reads** member `j`'s bank for `s` once `j`'s sequence word is at least `s`
//!   (Acquire);
//! - a member **writes** its bank for `s` only once every member's word is at least
//!   `s − (K − 1)`: a member that entered that collective has finished `s − K`, the last one that
//!   used this bank, so nobody still reads it. A member may thus run up to `K − 1` collectives
//!   ahead of the slowest: a broadcast's root, or a reduction's contributors, go on while the
//!   others catch up (Open MPI's `coll/sm` keeps 8 segments in flight the same way), and a rank
//!   that loses its core costs the others one wait per `K − 1` collectives, not one each.
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

/// Bytes of one member's bank: the largest contribution of a member to one collective through
/// the area (a broadcast's or a reduction's data; a scatter's or an all-to-all's whole send
/// buffer). Larger collectives use point-to-point messages.
pub const BANK_BYTES: usize = 2048;

/// Banks per member in the segment's areas: collectives use them in turns, so a member may run
/// `BANKS − 1` collectives ahead of the slowest.
pub const BANKS: u32 = 8;

/// Bytes of an area's control part for `members` members: its head line (state and references),
/// one sequence line per member, rounded to a page so that the banks start page-aligned.
pub const fn control_bytes(members: u32) -> u64 {
    (64 * (1 + members as u64)).next_multiple_of(4096)
}

/// Bytes of one area for `members` members.
pub const fn area_bytes(members: u32) -> u64 {
    control_bytes(members) + members as u64 * BANKS as u64 * BANK_BYTES as u64
}

/// A view of one area.
#[derive(Clone, Copy)]
pub struct AreaRef<'a> {
    /// Even: free; odd: claimed. Each claim and each final release adds one, so the value a
    /// claim leaves (its *stamp*) names that claim.
    state: &'a AtomicU64,
    /// Members that have not released the current claim.
    refs: &'a AtomicU64,
    /// Member 0's sequence word; member `i`'s is `seq_stride × i` bytes further. Member `i`'s
    /// word is written by member `i` alone while the area is claimed: the last collective it
    /// entered.
    seqs: *const u8,
    seq_stride: usize,
    /// Member 0's bank 0; member `i`'s bank `b` is `(depth × i + b) × BANK_BYTES` bytes further.
    /// Written by its member alone, read by the others, as the module documentation says.
    banks: *mut u8,
    /// Banks per member (`K`).
    depth: u32,
    members: u32,
    _memory: PhantomData<&'a AtomicU64>,
    /// One tracked cell per bank (loom checks every bank write against the reads before it).
    #[cfg(loom)]
    tracks: Option<&'a [loom::cell::UnsafeCell<()>]>,
}

// SAFETY: a view of shared memory used only through this protocol; nothing is tied to a thread.
unsafe impl Send for AreaRef<'_> {}
// SAFETY: as above.
unsafe impl Sync for AreaRef<'_> {}

impl<'a> AreaRef<'a> {
    /// An area whose words and banks are at the given addresses.
    ///
    /// # Safety
    /// `state` and `refs` must be valid for `'a`; for every `i < members`, `seqs + i ×
    /// seq_stride` must be a valid, aligned `AtomicU64`, and `banks` must start `depth × members
    /// ×` [`BANK_BYTES`] bytes shared only through this protocol, all living for `'a`; `depth`
    /// at least 2.
    pub unsafe fn from_raw(
        state: &'a AtomicU64,
        refs: &'a AtomicU64,
        seqs: *const u8,
        seq_stride: usize,
        banks: *mut u8,
        depth: u32,
        members: u32,
    ) -> Self {
        AreaRef {
            state,
            refs,
            seqs,
            seq_stride,
            banks,
            depth,
            members,
            _memory: PhantomData,
            #[cfg(loom)]
            tracks: None,
        }
    }

    /// The area laid out in the node segment at `base` ([`area_bytes`]`(members)` bytes): the
    /// head line (state, references), one line per member's sequence word, rounded to a page,
    /// then the banks.
    ///
    /// # Safety
    /// `base` must be page-aligned and start that many bytes of the mapped segment, shared only
    /// through this protocol, for `'a`.
    pub unsafe fn in_segment(base: *mut u8, members: u32) -> Self {
        let control = control_bytes(members) as usize;
        // SAFETY: the caller's contract: the head line at `base` (state, then references, both
        // 8-byte aligned), the sequence words one line apart after it, the banks after the
        // page-rounded control part.
        unsafe {
            Self::from_raw(
                &*(base as *const AtomicU64),
                &*(base.add(8) as *const AtomicU64),
                base.add(64),
                64,
                base.add(control),
                BANKS,
                members,
            )
        }
    }

    /// Most members a team on this area may have.
    #[inline]
    pub fn members(&self) -> u32 {
        self.members
    }

    #[inline(always)]
    fn seq(&self, i: u32) -> &'a AtomicU64 {
        debug_assert!(i < self.members);
        // SAFETY: `i < members` (every caller checks it); `from_raw`'s contract.
        unsafe { &*(self.seqs.add(i as usize * self.seq_stride) as *const AtomicU64) }
    }

    /// Index of member `i`'s bank for collective `s` among all banks.
    #[inline(always)]
    fn bank_index(&self, i: u32, s: u64) -> usize {
        i as usize * self.depth as usize + (s % u64::from(self.depth)) as usize
    }

    /// Bank `s mod K` of member `i` (checked below `members`).
    #[inline(always)]
    fn bank_ptr(&self, i: u32, s: u64) -> Result<*mut u8> {
        if i >= self.members {
            return Err(Error::BadRank { rank: i, ranks: self.members.min(u32::from(u16::MAX)) as u16 });
        }
        let k = self.bank_index(i, s);
        // SAFETY: `i < members`, so bank `k` lies inside the banks (`from_raw`'s contract).
        Ok(unsafe { self.banks.add(k * BANK_BYTES) })
    }

    #[inline(always)]
    fn note(&self, _i: u32, _s: u64, _write: bool) {
        #[cfg(loom)]
        if let Some(t) = self.tracks {
            let k = self.bank_index(_i, _s);
            if _write { t[k].with_mut(|_| ()) } else { t[k].with(|_| ()) }
        }
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
        if n == 0 || n > self.members {
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
        for i in 0..self.members {
            // ORDERING: Relaxed; as above (no member of the new team reads them before the
            // message naming the area).
            self.seq(i).store(0, Relaxed);
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
            return Err(Error::BadRank { rank: j, ranks: self.members.min(u32::from(u16::MAX)) as u16 }.into());
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
            return Err(Error::BadRank { rank: me, ranks: self.members.min(u32::from(u16::MAX)) as u16 });
        }
        // ORDERING: Release; our reads of the collectives before `s` happen-before any write of
        // a member that waits for us to enter `s` before reusing its bank.
        self.seq(me).store(s, Release);
        Ok(())
    }

    /// Member `me` enters collective `s` of a team of `n`, with `len` bytes of data that `fill`
    /// writes into its bank for `s` once the bank is free (every member has entered
    /// `s − (K − 1)`).
    pub fn enter_with<E: From<Error>>(
        &self,
        me: u32,
        n: u32,
        s: u64,
        len: usize,
        fill: impl FnOnce(&mut [u8]),
        wait: &mut impl FnMut(u32, &mut dyn FnMut() -> bool) -> Result<(), E>,
    ) -> Result<(), E> {
        if len > BANK_BYTES {
            return Err(Error::TooLarge { len, max: BANK_BYTES }.into());
        }
        let bank = self.bank_ptr(me, s)?;
        let behind = u64::from(self.depth - 1);
        if s > behind {
            self.await_all(n, s - behind, wait)?;
        }
        self.note(me, s, true);
        // SAFETY: `len <= BANK_BYTES` bytes of our own bank for `s`: every member entered
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
        if len > BANK_BYTES {
            return Err(Error::TooLarge { len, max: BANK_BYTES }.into());
        }
        let bank = self.bank_ptr(j, s)?;
        self.await_member(j, s, wait)?;
        self.note(j, s, false);
        // SAFETY: member j entered `s` after writing its bank for `s` (Acquire in `reached`),
        // and writes it again (for `s + K`) only once we have entered `s + 1`, after this read;
        // `len <=
        // BANK_BYTES`.
        Ok(f(unsafe { core::slice::from_raw_parts(bank, len) }))
    }
}

/// An area on the heap: loom models and unit tests.
pub struct HeapArea {
    depth: u32,
    state: AtomicU64,
    refs: AtomicU64,
    seqs: Box<[AtomicU64]>,
    banks: Box<[core::cell::UnsafeCell<u8>]>,
    #[cfg(loom)]
    tracks: Box<[loom::cell::UnsafeCell<()>]>,
}

// SAFETY: shared mutation is through atomics, or through raw pointers ordered by the protocol.
unsafe impl Sync for HeapArea {}
// SAFETY: as above.
unsafe impl Send for HeapArea {}

impl HeapArea {
    /// A free area for up to `members` members with `depth` banks each (at least 2).
    pub fn new(members: u32, depth: u32) -> Self {
        let depth = depth.max(2);
        let banks = members as usize * depth as usize;
        HeapArea {
            depth,
            state: AtomicU64::new(0),
            refs: AtomicU64::new(0),
            seqs: (0..members).map(|_| AtomicU64::new(0)).collect(),
            banks: (0..banks * BANK_BYTES).map(|_| core::cell::UnsafeCell::new(0)).collect(),
            #[cfg(loom)]
            tracks: (0..banks).map(|_| loom::cell::UnsafeCell::new(())).collect(),
        }
    }

    /// A view of the area.
    pub fn get(&self) -> AreaRef<'_> {
        // SAFETY: `seqs` holds `members` atomics at the stride of one AtomicU64; `banks` holds
        // `depth × members` banks (`depth >= 2`); all live as long as `self`.
        #[allow(unused_mut)]
        let mut a = unsafe {
            AreaRef::from_raw(
                &self.state,
                &self.refs,
                self.seqs.as_ptr() as *const u8,
                core::mem::size_of::<AtomicU64>(),
                self.banks.as_ptr() as *mut u8,
                self.depth,
                self.seqs.len() as u32,
            )
        };
        #[cfg(loom)]
        {
            a.tracks = Some(&self.tracks);
        }
        a
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    fn spin(_: u32, ready: &mut dyn FnMut() -> bool) -> Result<()> {
        while !ready() {
            std::thread::yield_now();
        }
        Ok(())
    }

    #[test]
    fn claims_are_exclusive_and_the_last_release_frees() {
        let h = HeapArea::new(4, 2);
        let a = h.get();
        assert_eq!(a.claim(5), None, "more members than the area holds");
        let stamp = a.claim(3).expect("free");
        assert!(!stamp.is_multiple_of(2));
        assert_eq!(a.stamp(), stamp);
        assert_eq!(a.claim(2), None, "taken");
        assert!(!a.release(stamp).unwrap());
        assert!(!a.release(stamp).unwrap());
        assert!(a.release(stamp).unwrap(), "the third of three frees it");
        assert!(a.release(stamp).is_err(), "one release too many is corruption, not a wrap");
        let again = a.claim(2).expect("free again");
        assert_ne!(again, stamp, "a new claim has a new stamp");
    }

    #[test]
    fn a_claim_zeroes_the_sequence_words() {
        let h = HeapArea::new(2, 2);
        let a = h.get();
        let s = a.claim(2).unwrap();
        a.enter(0, 7).unwrap();
        a.enter(1, 7).unwrap();
        a.release(s).unwrap();
        a.release(s).unwrap();
        a.claim(2).unwrap();
        assert!(!a.reached(0, 1) && !a.reached(1, 1));
    }

    #[test]
    fn bounds_are_typed_errors() {
        let h = HeapArea::new(2, 2);
        let a = h.get();
        let mut w = spin;
        assert!(matches!(a.enter(2, 1), Err(Error::BadRank { rank: 2, .. })));
        assert!(matches!(a.enter_with(0, 2, 1, BANK_BYTES + 1, |_| (), &mut w), Err(Error::TooLarge { .. })));
        assert!(matches!(a.read(5, 1, 8, |_| (), &mut w), Err(Error::BadRank { .. })));
        assert!(!a.reached(9, 0));
    }

    #[test]
    fn a_member_runs_at_most_depth_minus_one_ahead() {
        let h = HeapArea::new(2, 4);
        let a = h.get();
        a.claim(2).unwrap();
        let mut refuse = |_: u32, _: &mut dyn FnMut() -> bool| Err(Error::corrupt("would wait", 0u64));
        for s in 1..=3 {
            a.enter_with(0, 2, s, 1, |b| b[0] = s as u8, &mut refuse).unwrap();
        }
        assert!(a.enter_with(0, 2, 4, 1, |_| (), &mut refuse).is_ok(), "bank 0 was never used");
        let early = a.enter_with(0, 2, 5, 1, |_| (), &mut refuse);
        assert!(early.is_err(), "bank 1 is collective 1's: member 1 must enter 2 first");
        a.enter(1, 2).unwrap();
        assert!(a.enter_with(0, 2, 5, 1, |_| (), &mut refuse).is_ok());
    }

    #[test]
    fn three_threads_alternate_banks() {
        let h = std::sync::Arc::new(HeapArea::new(3, 3));
        h.get().claim(3).unwrap();
        let ts: Vec<_> = (0..3u32)
            .map(|me| {
                let h = h.clone();
                std::thread::spawn(move || {
                    let a = h.get();
                    let mut w = spin;
                    for s in 1..=200u64 {
                        // An allreduce of one u64: sum of (member + s).
                        let v = u64::from(me) + s;
                        a.enter_with(me, 3, s, 8, |b| b.copy_from_slice(&v.to_le_bytes()), &mut w).unwrap();
                        let mut sum = 0;
                        for j in 0..3 {
                            sum += a.read(j, s, 8, |b| u64::from_le_bytes(b.try_into().unwrap()), &mut w).unwrap();
                        }
                        assert_eq!(sum, 3 + 3 * s);
                    }
                })
            })
            .collect();
        for t in ts {
            t.join().unwrap();
        }
    }
}
