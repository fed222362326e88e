//! The shared-copy ring: a receiver's ring of copy slots in the node segment, through which a
//! sender copies a large message in while the receiver copies it out (pipelined "double
//! buffering", NEMESIS L817–826 of `shared/papers/mercier-2019-hdr-nemesis-topology.txt`;
//! MPICH's ring of 8 × 32 KiB with each control word on its own cache line).
//!
//! Chunk `k` of a transfer goes into slot `k mod slots`. Each slot has a length word on its own
//! cache line: 0 means empty. The sender waits for 0, copies the chunk, and publishes its length
//! (Release); the receiver waits for a non-zero length (Acquire), checks it is the chunk's
//! expected length, copies out, and stores 0 (Release). Both sides keep their chunk index
//! privately. The ring's `epoch` is bumped by the receiver each time it assigns the ring to a
//! transfer; the CTS carries it, and the sender refuses to write into a ring whose epoch differs.

use core::marker::PhantomData;

use nemesis_shm::cell::copy_bytes;
use nemesis_shm::sync::{AtomicU32, Ordering::*};

use crate::error::{Error, Result};

/// Bytes of a ring's control area before its slots: the epoch line, then one line per slot.
pub const fn control_bytes(slots: u32) -> usize {
    64 * (1 + slots as usize)
}

/// A view of one ring.
#[derive(Clone, Copy)]
pub struct RingRef<'a> {
    epoch: &'a AtomicU32,
    /// Length word of slot 0; slot `i`'s is `len_stride * i` bytes further.
    lens: *const u8,
    len_stride: usize,
    /// Slot 0's bytes; slot `i`'s are `slot_size * i` bytes further.
    bodies: *mut u8,
    slot_size: usize,
    slots: u32,
    _memory: PhantomData<&'a AtomicU32>,
    #[cfg(loom)]
    tracks: Option<&'a [loom::cell::UnsafeCell<()>]>,
}

// SAFETY: a view of shared memory used only through this protocol; nothing is tied to a thread.
unsafe impl Send for RingRef<'_> {}
// SAFETY: as above.
unsafe impl Sync for RingRef<'_> {}

impl<'a> RingRef<'a> {
    /// A ring whose words and slots are at the given addresses.
    ///
    /// # Safety
    /// `epoch` and, for every `i < slots`, `lens + i * len_stride` must be valid `AtomicU32`s, and
    /// `bodies + i * slot_size` must point to `slot_size` bytes shared only through this
    /// protocol, all living for `'a`.
    pub unsafe fn from_raw(
        epoch: &'a AtomicU32,
        lens: *const u8,
        len_stride: usize,
        bodies: *mut u8,
        slot_size: usize,
        slots: u32,
    ) -> Self {
        RingRef {
            epoch,
            lens,
            len_stride,
            bodies,
            slot_size,
            slots,
            _memory: PhantomData,
            #[cfg(loom)]
            tracks: None,
        }
    }

    /// A ring laid out in the node segment at `base` (`nemesis_shm::Params::lmt_ring_bytes`
    /// bytes): the epoch line, one line per slot's length, rounded to a page, then the slots.
    ///
    /// # Safety
    /// `base` must be page-aligned and start that many bytes of the mapped segment, shared only
    /// through this protocol, for `'a`.
    pub unsafe fn in_segment(base: *mut u8, slots: u32, slot_size: usize) -> Self {
        let control = control_bytes(slots).next_multiple_of(4096);
        // SAFETY: the caller's contract: the epoch at `base`, the lengths one line apart after it,
        // the slots after the page-rounded control area.
        unsafe { Self::from_raw(&*(base as *const AtomicU32), base.add(64), 64, base.add(control), slot_size, slots) }
    }

    /// Bytes per slot (the chunk size).
    #[inline]
    pub fn slot_size(&self) -> usize {
        self.slot_size
    }

    /// Number of slots.
    #[inline]
    pub fn slots(&self) -> u32 {
        self.slots
    }

    /// The ring's epoch (receiver side: assignments; sender side: validation).
    pub fn epoch(&self) -> u32 {
        // ORDERING: Acquire; pairs with the receiver's Release bump in `assign`, before its CTS.
        self.epoch.load(Acquire)
    }

    /// Receiver: gives the ring to a new transfer; returns its new epoch. Every slot must be empty
    /// (a ring is assigned only when its previous transfer drained it, or after `reset`).
    pub fn assign(&self) -> u32 {
        // ORDERING: Release; the sender that reads this epoch (after our CTS) sees the empty slots.
        self.epoch.fetch_add(1, Release).wrapping_add(1)
    }

    /// Receiver: empties every slot, after a transfer was abandoned (its sender died).
    pub fn reset(&self) {
        for i in 0..self.slots {
            // ORDERING: Relaxed; `assign`'s Release publishes it to the next sender.
            self.len(i).store(0, Relaxed);
        }
    }

    #[inline(always)]
    fn len(&self, i: u32) -> &'a AtomicU32 {
        // SAFETY: `i < slots` (callers reduce modulo `slots`); `from_raw`'s contract.
        unsafe { &*(self.lens.add(i as usize * self.len_stride) as *const AtomicU32) }
    }

    #[inline(always)]
    fn body(&self, i: u32) -> *mut u8 {
        // SAFETY: `i < slots`: the slot lies inside the ring (`from_raw`'s contract).
        unsafe { self.bodies.add(i as usize * self.slot_size) }
    }

    #[inline(always)]
    fn slot_of(&self, chunk: u64) -> u32 {
        (chunk % u64::from(self.slots)) as u32
    }

    #[inline(always)]
    fn note(&self, _i: u32, _write: bool) {
        #[cfg(loom)]
        if let Some(t) = self.tracks {
            if _write { t[_i as usize].with_mut(|_| ()) } else { t[_i as usize].with(|_| ()) }
        }
    }

    /// Sender: copies `data` (at most one slot) as chunk `chunk` if its slot is empty. False if
    /// the receiver has not drained the slot yet.
    #[inline]
    pub fn try_put(&self, chunk: u64, data: &[u8]) -> bool {
        // SAFETY: `fill` writes `data.len()` bytes into the slot, which holds at least that many.
        unsafe { self.try_put_with(chunk, data.len(), |dst| copy_bytes(data.as_ptr(), dst, data.len())) }
    }

    /// Sender: as [`try_put`](Self::try_put) for a chunk of `n` bytes (at most one slot) that
    /// `fill` writes into the slot (gathered from pieces, say).
    ///
    /// # Safety
    /// `fill` writes exactly the `n` bytes at the address it is given, nothing else.
    #[inline]
    pub unsafe fn try_put_with(&self, chunk: u64, n: usize, fill: impl FnOnce(*mut u8)) -> bool {
        debug_assert!(n > 0 && n <= self.slot_size);
        let i = self.slot_of(chunk);
        let len = self.len(i);
        // ORDERING: Acquire; pairs with the receiver's Release clear: its copy-out of the previous
        // chunk in this slot is finished before we overwrite it.
        if len.load(Acquire) != 0 {
            return false;
        }
        self.note(i, true);
        // The slot is empty, so the receiver does not read it until we publish; it has
        // `slot_size >= n` bytes, which `fill` writes (the caller's contract).
        fill(self.body(i));
        // ORDERING: Release; publishes the chunk to the receiver's Acquire load.
        len.store(n as u32, Release);
        true
    }

    /// Receiver: copies chunk `chunk` into `dst` (exactly its expected length) if the sender
    /// published it; `Ok(false)` if not yet. A published length other than `dst.len()` is
    /// corruption: nothing is copied.
    #[inline]
    pub fn try_take(&self, chunk: u64, dst: &mut [u8]) -> Result<bool> {
        let n = dst.len();
        // SAFETY: `drain` reads the `n` bytes of the chunk into `dst`, which holds `n`.
        unsafe { self.try_take_with(chunk, n, |src| copy_bytes(src, dst.as_mut_ptr(), n)) }
    }

    /// Receiver: as [`try_take`](Self::try_take) for a chunk of `n` bytes that `drain` copies
    /// out of the slot (scattered into pieces, say).
    ///
    /// # Safety
    /// `drain` reads at most the `n` bytes at the address it is given, and writes nothing there.
    #[inline]
    pub unsafe fn try_take_with(&self, chunk: u64, n: usize, drain: impl FnOnce(*const u8)) -> Result<bool> {
        let i = self.slot_of(chunk);
        let len = self.len(i);
        // ORDERING: Acquire; pairs with the sender's Release publication.
        let got = len.load(Acquire);
        if got == 0 {
            return Ok(false);
        }
        if got as usize != n {
            return Err(Error::Corrupt { what: "ring chunk length", value: u64::from(got) });
        }
        self.note(i, false);
        // The chunk is published and the sender does not touch the slot until we clear its
        // length; `n == got <= slot_size` (the sender wrote at most a slot).
        drain(self.body(i));
        // ORDERING: Release; our copy-out happens-before the sender's next write to the slot.
        len.store(0, Release);
        Ok(true)
    }
}

/// A ring on the heap: loom models and unit tests.
pub struct HeapRing {
    epoch: AtomicU32,
    lens: Box<[AtomicU32]>,
    bodies: Box<[core::cell::UnsafeCell<u8>]>,
    slot_size: usize,
    #[cfg(loom)]
    tracks: Box<[loom::cell::UnsafeCell<()>]>,
}

// SAFETY: shared mutation is through atomics, or through raw pointers ordered by the lengths.
unsafe impl Sync for HeapRing {}
// SAFETY: as above.
unsafe impl Send for HeapRing {}

impl HeapRing {
    /// A ring of `slots` slots of `slot_size` bytes.
    pub fn new(slots: u32, slot_size: usize) -> Self {
        HeapRing {
            epoch: AtomicU32::new(0),
            lens: (0..slots).map(|_| AtomicU32::new(0)).collect(),
            bodies: (0..slots as usize * slot_size).map(|_| core::cell::UnsafeCell::new(0)).collect(),
            slot_size,
            #[cfg(loom)]
            tracks: (0..slots).map(|_| loom::cell::UnsafeCell::new(())).collect(),
        }
    }

    /// A view of the ring.
    pub fn get(&self) -> RingRef<'_> {
        // SAFETY: `lens` holds `slots` atomics at the stride of one AtomicU32; `bodies` holds
        // `slots` disjoint runs of `slot_size` bytes; all live as long as `self`.
        #[allow(unused_mut)]
        let mut r = unsafe {
            RingRef::from_raw(
                &self.epoch,
                self.lens.as_ptr() as *const u8,
                core::mem::size_of::<AtomicU32>(),
                self.bodies.as_ptr() as *mut u8,
                self.slot_size,
                self.lens.len() as u32,
            )
        };
        #[cfg(loom)]
        {
            r.tracks = Some(&self.tracks);
        }
        r
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    #[test]
    fn chunks_go_round_and_wait_for_the_receiver() {
        let h = HeapRing::new(2, 8);
        let r = h.get();
        assert!(r.try_put(0, &[1; 8]));
        assert!(r.try_put(1, &[2; 3]));
        assert!(!r.try_put(2, &[3; 8]), "slot 0 still full");
        let mut a = [0u8; 8];
        assert!(r.try_take(0, &mut a).unwrap());
        assert_eq!(a, [1; 8]);
        assert!(r.try_put(2, &[3; 8]), "slot 0 drained");
        let mut b = [0u8; 3];
        assert!(r.try_take(1, &mut b).unwrap());
        assert_eq!(b, [2; 3]);
        assert!(!r.try_take(3, &mut a).unwrap(), "chunk 3 not published");
        assert!(r.try_take(2, &mut a).unwrap());
        assert_eq!(a, [3; 8]);
    }

    #[test]
    fn wrong_lengths_are_corruption_and_reset_empties() {
        let h = HeapRing::new(2, 8);
        let r = h.get();
        assert!(r.try_put(0, &[1; 5]));
        let mut a = [0u8; 8];
        assert!(matches!(r.try_take(0, &mut a), Err(Error::Corrupt { .. })));
        assert_eq!(a, [0; 8], "nothing copied");
        r.reset();
        assert!(!r.try_take(0, &mut a[..5]).unwrap());
        let e = r.assign();
        assert_eq!((e, r.epoch()), (1, 1));
    }
}
