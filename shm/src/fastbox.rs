//! Fastboxes: per ordered pair of local ranks, a small ring of slots the sender writes directly,
//! so a small message bypasses the cell queues (NEMESIS L791–797 of
//! `shared/papers/mercier-2019-hdr-nemesis-topology.txt`; `shared/reference/nemesis.md`).
//!
//! A box is `[owner line][ack line][slots]`, a slot `[stamp (4 B) | pad (4 B)][MsgHeader (32 B)]
//! [payload]`; with one slot this is NEMESIS's single-buffer fastbox, with several a ring as in
//! Open MPI's btl/sm. Message `i` of the box goes into slot `i mod slots` and is published by
//! storing the stamp `i + 1` (Release). The receiver never writes a slot: it reads slot
//! `next mod slots` until its stamp is `next + 1`, and publishes how many messages it consumed on
//! the separate ack line, every `slots / 2` messages. The sender reads the ack line only when it
//! has used every slot it knows to be free. Why the receiver never clears a slot, and why a ring
//! rather than NEMESIS's single slot: `docs/design/shm.md`, "Fastboxes".
//!
//! Memory stays bounded: each receiver hosts a fixed number of boxes
//! ([`Params::fastboxes_per_rank`](crate::layout::Params)), claimed on demand by senders that have
//! sent enough messages to it (`port/send.rs`).
//!
//! Ordering with the cell queue: every message carries its per-pair sequence number; a receiver
//! takes a fastbox message only when its number is the next expected from that sender, so fastbox
//! and queue traffic from one sender arrive in the order sent (`port/receive.rs`).

use core::marker::PhantomData;
use core::ptr;

use crate::cell::{FT_ROOM, FT_ROOM_SHORT, HEADER_BYTES, MsgHeader, PiggybackBytes, flags, ft_room, ft_write};
use crate::error::{Error, Result};
use crate::pieces::Payload;
use crate::sync::{AtomicU32, Ordering::*};

/// Bytes of a slot before its header: the stamp and padding.
pub const STAMP_BYTES: usize = 8;

/// A message published in a fastbox slot, as [`FastboxRef::peek`] found it.
#[derive(Clone, Copy, Debug)]
pub struct Published {
    /// Its header, in the slot.
    pub hdr: *const MsgHeader,
    /// Its payload, in the slot.
    pub payload: *const u8,
    /// Its per-pair sequence number.
    pub seq: u32,
    /// Its payload length, checked against the slot.
    pub len: u32,
}

/// A view of one fastbox: its owner word and its slots.
#[derive(Clone, Copy)]
pub struct FastboxRef<'a> {
    /// 0 while free, else the local rank of the sender that claimed the box, plus one. Claimed by
    /// a sender's CAS; freed only by the receiver, once the owner is dead and the box is empty.
    owner: &'a AtomicU32,
    /// Messages the receiver has consumed (a multiple of `ack_every`, or all at a flush); the
    /// sender may write message `i` once `i < acked + slots`. Written only by the receiver.
    ack: &'a AtomicU32,
    /// Address of slot 0's stamp; slot `i`'s is `stamp_stride * i` bytes further.
    stamps: *const u8,
    stamp_stride: usize,
    /// Address of slot 0's header; slot `i`'s is `body_stride * i` bytes further.
    pub(crate) bodies: *mut u8,
    pub(crate) body_stride: usize,
    /// Bytes of a slot from its header on.
    body_size: usize,
    /// Slot count minus one (the count is a power of two).
    mask: u32,
    /// The receiver publishes its count when it is a multiple of `ack_mask + 1`: every half ring
    /// (at least every message); `u32::MAX` while acknowledgements are withheld.
    ack_mask: u32,
    _memory: PhantomData<&'a AtomicU32>,
    /// Under loom, one loom cell per slot: loom checks that body accesses are ordered.
    #[cfg(loom)]
    tracks: Option<&'a [loom::cell::UnsafeCell<()>]>,
}

// SAFETY: a view of memory shared between processes and used only through this module's
// protocol (atomics and stamp-ordered accesses); nothing in it is tied to a thread.
unsafe impl Send for FastboxRef<'_> {}
// SAFETY: as above.
unsafe impl Sync for FastboxRef<'_> {}

impl<'a> FastboxRef<'a> {
    /// A box whose stamps and bodies are laid out at the given addresses and strides.
    ///
    /// # Safety
    /// For every `i < slots` (a power of two), `stamps + i * stamp_stride` must hold a valid
    /// `AtomicU32` and `bodies + i * body_stride` must point to `body_size` bytes (at least
    /// [`HEADER_BYTES`]) of memory shared only through this protocol, all living for `'a`.
    #[allow(clippy::too_many_arguments)]
    pub unsafe fn from_raw(
        owner: &'a AtomicU32,
        ack: &'a AtomicU32,
        stamps: *const u8,
        stamp_stride: usize,
        bodies: *mut u8,
        body_stride: usize,
        body_size: usize,
        slots: u32,
    ) -> Self {
        debug_assert!(slots.is_power_of_two() && body_size >= HEADER_BYTES);
        FastboxRef {
            owner,
            ack,
            stamps,
            stamp_stride,
            bodies,
            body_stride,
            body_size,
            mask: slots - 1,
            ack_mask: (slots / 2).max(1) - 1,
            _memory: PhantomData,
            #[cfg(loom)]
            tracks: None,
        }
    }

    /// The owner word.
    #[inline]
    pub fn owner(&self) -> &'a AtomicU32 {
        self.owner
    }

    /// Number of slots.
    #[inline]
    pub fn slots(&self) -> u32 {
        self.mask + 1
    }

    /// Largest payload a slot carries (without a fault-tolerance piggyback).
    #[inline]
    pub fn capacity(&self) -> usize {
        self.body_size - HEADER_BYTES
    }

    #[inline(always)]
    fn stamp(&self, i: u32) -> &'a AtomicU32 {
        // SAFETY: `i & mask < slots`; `from_raw`'s contract makes this a valid AtomicU32 for 'a.
        unsafe { &*(self.stamps.add((i & self.mask) as usize * self.stamp_stride) as *const AtomicU32) }
    }

    /// Model-checking hook for a write (`write`) or read of slot `i`'s body; a no-op unless loom.
    #[inline(always)]
    fn note(&self, _i: u32, _write: bool) {
        #[cfg(loom)]
        if let Some(t) = self.tracks {
            let c = &t[(_i & self.mask) as usize];
            if _write { c.with_mut(|_| ()) } else { c.with(|_| ()) }
        }
    }

    #[inline(always)]
    fn body(&self, i: u32) -> *mut u8 {
        // SAFETY: `i & mask < slots`, so the offset stays inside the box (`from_raw`'s contract).
        unsafe { self.bodies.add((i & self.mask) as usize * self.body_stride) }
    }

    /// Sender: true if message `next`'s slot is free: the receiver has consumed the message
    /// before it in that slot, by `acked` (the cached ack count), or else by the ack line, read
    /// into `acked`.
    #[inline(always)]
    fn slot_free(&self, next: u32, acked: &mut u32) -> bool {
        if next.wrapping_sub(*acked) > self.mask {
            // ORDERING: Acquire; pairs with the receiver's Release store after it finished reading
            // the messages it acknowledges, so we never overwrite a slot it still reads.
            *acked = self.ack.load(Acquire);
            if next.wrapping_sub(*acked) > self.mask {
                return false;
            }
        }
        true
    }

    /// Sender: writes `hdr` (with sequence number `seq`, length `payload.len()` and fragment 0),
    /// the piggyback `ft` if any (the header then gets [`flags::FT_PIGGYBACK`]; its stamp travels if
    /// `hdr` has [`flags::FT_STAMP`], short with [`flags::FT_STAMP_SHORT`]; the room is [`ft_room`]
    /// of them) and `payload` as
    /// message `*next` of the box if its slot is free, then advances `*next`. `acked` caches the
    /// receiver's ack count (starts at 0 with `*next`). Returns false (and writes nothing) if the
    /// receiver has not consumed that slot's previous message yet. The caller checked that
    /// `hdr.flags` has the piggyback flag only if `ft` is given, and that the room (if any) and
    /// the payload fit: `payload.len() + room <= capacity()`.
    #[inline(always)]
    #[allow(clippy::too_many_arguments)]
    pub fn try_send(
        &self,
        next: &mut u32,
        acked: &mut u32,
        hdr: &MsgHeader,
        ft: Option<&PiggybackBytes>,
        seq: u32,
        payload: &[u8],
    ) -> bool {
        self.try_send_from(next, acked, hdr, ft, seq, payload)
    }

    /// As [`try_send`](Self::try_send) for any [`Payload`] (a message in pieces).
    #[inline(always)]
    #[allow(clippy::too_many_arguments)]
    pub fn try_send_from<P: Payload + ?Sized>(
        &self,
        next: &mut u32,
        acked: &mut u32,
        hdr: &MsgHeader,
        ft: Option<&PiggybackBytes>,
        seq: u32,
        payload: &P,
    ) -> bool {
        // Without a piggyback the room is 0 as a constant (not `ft_room(hdr.flags)`): the FT-off
        // send then writes its payload at a fixed offset, as before the room had two sizes.
        let (fl, room) = match ft {
            // The room from the stamp flag alone (the piggyback flag is known here).
            Some(_) => (
                hdr.flags | flags::FT_PIGGYBACK,
                if hdr.flags & flags::FT_STAMP != 0 { FT_ROOM } else { FT_ROOM_SHORT },
            ),
            None => (hdr.flags, 0),
        };
        let offset = HEADER_BYTES + room;
        debug_assert!(offset + payload.len() <= self.body_size);
        debug_assert!(ft.is_some() || hdr.flags & flags::FT_PIGGYBACK == 0);
        if !self.slot_free(*next, acked) {
            return false;
        }
        let body = self.body(*next);
        self.note(*next, true);
        // SAFETY: the receiver consumed this slot's previous message (ack above) and reads it again
        // only after our stamp; the body has room for the header, the piggyback room if any, and
        // the payload (caller's check).
        unsafe {
            let h = body as *mut MsgHeader;
            ptr::write_unaligned(h, *hdr);
            ptr::write_unaligned(ptr::addr_of_mut!((*h).len), payload.len() as u32);
            ptr::write_unaligned(ptr::addr_of_mut!((*h).seq), seq);
            ptr::write_unaligned(ptr::addr_of_mut!((*h).frag), 0);
            if let Some(pb) = ft {
                ptr::write_unaligned(ptr::addr_of_mut!((*h).flags), fl);
                ft_write(fl, pb, body.add(HEADER_BYTES));
            }
            payload.copy_out(0, body.add(offset), payload.len());
        }
        // ORDERING: Release; publishes the header and payload to the receiver's Acquire load.
        self.stamp(*next).store(next.wrapping_add(1), Release);
        *next = next.wrapping_add(1);
        true
    }

    /// Sender, the fused path of a plain message (`Port::try_send_plain`): as
    /// [`try_send`](Self::try_send) for the header `src`, `dst`, `tag`, `context`, kind `kind`, no
    /// flag, `aux` 0, fragment 0, and contiguous bytes, each header field stored once (no header
    /// built aside and copied). The caller checked `payload.len() <= capacity()`.
    #[inline(always)]
    #[allow(clippy::too_many_arguments)]
    pub fn try_send_plain(
        &self,
        next: &mut u32,
        acked: &mut u32,
        src: u32,
        dst: u32,
        tag: i32,
        context: u32,
        kind: u8,
        aux: u32,
        seq: u32,
        payload: &[u8],
    ) -> bool {
        debug_assert!(HEADER_BYTES + payload.len() <= self.body_size);
        if !self.slot_free(*next, acked) {
            return false;
        }
        let body = self.body(*next);
        self.note(*next, true);
        // SAFETY: as in `try_send_from`: the slot is free (ack above), and it holds a header and
        // `payload.len()` bytes after it (caller's check).
        unsafe {
            let h = body as *mut MsgHeader;
            ptr::write_unaligned(ptr::addr_of_mut!((*h).src), src);
            ptr::write_unaligned(ptr::addr_of_mut!((*h).dst), dst);
            ptr::write_unaligned(ptr::addr_of_mut!((*h).tag), tag);
            ptr::write_unaligned(ptr::addr_of_mut!((*h).context), context);
            ptr::write_unaligned(ptr::addr_of_mut!((*h).len), payload.len() as u32);
            ptr::write_unaligned(ptr::addr_of_mut!((*h).seq), seq);
            ptr::write_unaligned(ptr::addr_of_mut!((*h).frag), 0);
            ptr::write_unaligned(ptr::addr_of_mut!((*h).kind), kind);
            ptr::write_unaligned(ptr::addr_of_mut!((*h).flags), 0);
            ptr::write_unaligned(ptr::addr_of_mut!((*h).aux), aux);
            crate::cell::copy_bytes(payload.as_ptr(), body.add(HEADER_BYTES), payload.len());
        }
        // ORDERING: Release; publishes the header and payload to the receiver's Acquire load.
        self.stamp(*next).store(next.wrapping_add(1), Release);
        *next = next.wrapping_add(1);
        true
    }

    /// Receiver, the fused path (`Port::take_plain`): message `*next` of the box if the sender
    /// published it and it is plain — number `seq`, fragment 0, kind `kind`, no flag — with
    /// context `context`, tag `tag` (any tag with `any_tag`) and a payload of at most `cap` bytes:
    /// the payload is copied to `dst`, the slot released ([`release`](Self::release)), and its
    /// length and tag returned. Anything else returns `None` and consumes nothing (the general
    /// path then takes the message, or reports its truncation).
    ///
    /// # Safety
    /// `dst` is valid for `cap` bytes of writes (any pointer if `cap` is 0).
    #[inline(always)]
    #[allow(clippy::too_many_arguments)]
    pub unsafe fn take_plain(
        &self,
        next: &mut u32,
        seq: u32,
        kind: u8,
        tag: i32,
        any_tag: bool,
        context: u32,
        dst: *mut u8,
        cap: usize,
    ) -> Option<(u32, i32)> {
        // ORDERING: Acquire; pairs with the sender's Release publication.
        if self.stamp(*next).load(Acquire) != next.wrapping_add(1) {
            return None;
        }
        let body = self.body(*next);
        self.note(*next, false);
        let h = body as *const MsgHeader;
        // Each field is read when it is tested (fewer values live at once).
        // SAFETY: (this read and the next ones) the message is published and the sender does not
        // touch the slot until we ack it; the body holds at least a header.
        let s = unsafe { ptr::read_unaligned(ptr::addr_of!((*h).seq)) };
        if s != seq {
            return None;
        }
        // Fragment 0, kind `kind`, no flag: the word after `seq` (`frag`, `kind`, `flags`).
        let plain = u32::from_ne_bytes({
            let mut w = [0u8; 4];
            w[2] = kind;
            w
        });
        // SAFETY: as above; `frag`, `kind` and `flags` are the header's bytes 24..28 (checked
        // below the header's definition).
        if unsafe { ptr::read_unaligned(ptr::addr_of!((*h).frag) as *const u32) } != plain {
            return None;
        }
        // SAFETY: as above.
        if unsafe { ptr::read_unaligned(ptr::addr_of!((*h).context)) } != context {
            return None;
        }
        // SAFETY: as above.
        let t = unsafe { ptr::read_unaligned(ptr::addr_of!((*h).tag)) };
        if t != tag && !any_tag {
            return None;
        }
        // SAFETY: as above.
        let len = unsafe { ptr::read_unaligned(ptr::addr_of!((*h).len)) };
        // Bounds: the length fits the receiver's buffer and (a faulty sender's length must not
        // make us read past it) the slot; no flag, so no piggyback room before the payload.
        if len as usize > cap || len as usize > self.body_size - HEADER_BYTES {
            return None;
        }
        // SAFETY: `HEADER_BYTES + len <= body_size` and `len <= cap` were just checked; `dst` has
        // `cap` writable bytes (the caller's contract).
        unsafe { crate::cell::copy_bytes(body.add(HEADER_BYTES), dst, len as usize) };
        self.release(next);
        Some((len, t))
    }

    /// Receiver: true if message `next` of the box is published (its slot filled): a hint for a
    /// receiver deciding whether to wait on; the message is read through [`peek`](Self::peek).
    #[inline(always)]
    pub fn published(&self, next: u32) -> bool {
        // ORDERING: Relaxed: nothing is read on the strength of it (`peek` loads the stamp again
        // with Acquire before reading the slot).
        self.stamp(next).load(Relaxed) == next.wrapping_add(1)
    }

    /// Receiver: message `next` of the box, if the sender published it. Its length is validated
    /// against the slot.
    #[inline(always)]
    pub fn peek(&self, next: u32) -> Result<Option<Published>> {
        // ORDERING: Acquire; pairs with the sender's Release publication.
        if self.stamp(next).load(Acquire) != next.wrapping_add(1) {
            return Ok(None);
        }
        let body = self.body(next);
        self.note(next, false);
        let hdr = body as *const MsgHeader;
        // SAFETY: the message is published and the sender does not touch the slot until we ack it;
        // the body holds at least a header.
        let (len, seq, fl) = unsafe {
            (
                ptr::read_unaligned(ptr::addr_of!((*hdr).len)),
                ptr::read_unaligned(ptr::addr_of!((*hdr).seq)),
                ptr::read_unaligned(ptr::addr_of!((*hdr).flags)),
            )
        };
        // The flag tested first: a message without a piggyback (fault tolerance off) pays a test
        // and no room arithmetic (`ft_room` on every message made this path 6 instructions longer,
        // a branch-free select).
        if fl & flags::FT_PIGGYBACK != 0 {
            return self.peek_room(hdr, body, fl, seq, len);
        }
        // Bounds: a faulty sender's length must not make us read past the slot.
        if len as usize > self.body_size - HEADER_BYTES {
            return Err(Error::corrupt("fastbox message length", len));
        }
        // SAFETY: `HEADER_BYTES + len <= body_size` was just checked.
        Ok(Some(Published { hdr, payload: unsafe { body.add(HEADER_BYTES) as *const u8 }, seq, len }))
    }

    /// [`peek`](Self::peek) of a message with a piggyback: its payload after the room.
    #[inline(always)]
    fn peek_room(&self, hdr: *const MsgHeader, body: *mut u8, fl: u8, seq: u32, len: u32) -> Result<Option<Published>> {
        let extra = ft_room(fl);
        // Bounds: a faulty sender's length must not make us read past the slot.
        if len as usize + extra > self.body_size - HEADER_BYTES {
            return Err(Error::corrupt("fastbox message length", len));
        }
        // SAFETY: `HEADER_BYTES + extra + len <= body_size` was just checked.
        Ok(Some(Published { hdr, payload: unsafe { body.add(HEADER_BYTES + extra) as *const u8 }, seq, len }))
    }

    /// Receiver: done with message `*next` (copied out); advances `*next` and, every half ring,
    /// tells the sender (unless acknowledgements are withheld).
    #[inline(always)]
    pub fn release(&self, next: &mut u32) {
        *next = next.wrapping_add(1);
        if *next & self.ack_mask == 0 {
            // ORDERING: Release; our reads of the acknowledged slots happen-before the sender's
            // next writes to them.
            self.ack.store(*next, Release);
        }
    }

    /// Receiver: stops (`true`) or resumes acknowledging this view's messages. Withheld, the
    /// sender may write only the slots it already knew free, then sends in cells: flow control.
    /// Resuming acknowledges every message released so far (`next`).
    pub fn withhold_acks(&mut self, on: bool, next: u32) {
        if on {
            self.ack_mask = u32::MAX;
        } else {
            self.ack_mask = (self.slots() / 2).max(1) - 1;
            // ORDERING: Release, as in `release`.
            self.ack.store(next, Release);
        }
    }

    /// Clears every slot of a box whose owner is dead, before the receiver frees it: a message
    /// published out of order (never expected) must not be seen by the next owner.
    pub fn clear(&self) {
        for i in 0..self.slots() {
            // ORDERING: Relaxed; the receiver frees the box with a Release store of `owner` after
            // this, which the next owner's claim acquires.
            self.stamp(i).store(0, Relaxed);
        }
        // ORDERING: Relaxed, as above.
        self.ack.store(0, Relaxed);
    }
}

/// Heap memory for fastboxes, for loom models and unit tests: one box of `slots` slots.
pub struct HeapFastbox {
    owner: AtomicU32,
    ack: AtomicU32,
    stamps: Box<[AtomicU32]>,
    bodies: Box<[core::cell::UnsafeCell<u8>]>,
    body_size: usize,
    #[cfg(loom)]
    tracks: Box<[loom::cell::UnsafeCell<()>]>,
}

// SAFETY: shared mutation is through atomics, or through raw pointers ordered by the stamps.
unsafe impl Sync for HeapFastbox {}
// SAFETY: as above.
unsafe impl Send for HeapFastbox {}

impl HeapFastbox {
    /// A free box with `slots` (a power of two) slots of `body_size` bytes from the header on.
    pub fn new(slots: u32, body_size: usize) -> Self {
        HeapFastbox {
            owner: AtomicU32::new(0),
            ack: AtomicU32::new(0),
            stamps: (0..slots).map(|_| AtomicU32::new(0)).collect(),
            bodies: (0..slots as usize * body_size).map(|_| core::cell::UnsafeCell::new(0)).collect(),
            body_size,
            #[cfg(loom)]
            tracks: (0..slots).map(|_| loom::cell::UnsafeCell::new(())).collect(),
        }
    }

    /// A view of the box.
    pub fn get(&self) -> FastboxRef<'_> {
        // SAFETY: `stamps` holds `slots` atomics at the stride of one AtomicU32; `bodies` holds
        // `slots` disjoint runs of `body_size` bytes; all live as long as `self`.
        #[allow(unused_mut)]
        let mut r = unsafe {
            FastboxRef::from_raw(
                &self.owner,
                &self.ack,
                self.stamps.as_ptr() as *const u8,
                core::mem::size_of::<AtomicU32>(),
                self.bodies.as_ptr() as *mut u8,
                self.body_size,
                self.body_size,
                self.stamps.len() as u32,
            )
        };
        #[cfg(loom)]
        {
            r.tracks = Some(&self.tracks);
        }
        r
    }
}
