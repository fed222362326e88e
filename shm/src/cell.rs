//! Cells: the fixed-size buffers messages travel in, their link words and their message header.
//!
//! A cell is `[CellLink (16 B)][MsgHeader (32 B)][FT piggyback room (32 B, only if flagged)][payload]`.
//! Cells live in per-rank pools; a cell always belongs to the pool of the rank that sends with it
//! and goes back to that rank's free queue after delivery (NEMESIS, `shared/reference/nemesis.md`).
//!
//! References between cells are [`CellHandle`]s: offsets in units of cells from the start of the
//! cell area, plus one so that 0 is null (as MPICH's handles are offset + 1).

use crate::sync::{AtomicU32, AtomicU64};

/// A reference to a cell: its index in the cell area plus one; [`NULL`] (0) refers to nothing.
pub type CellHandle = u32;

/// The null cell handle.
pub const NULL: CellHandle = 0;

/// Set in the handle half of a queue's tail once the queue is sealed: its consumer died and no
/// enqueue may succeed any more. Handles stay below it because cell counts are bounded
/// (`layout::MAX_CELLS`).
pub const SEALED_BIT: u32 = 1 << 31;

/// Bytes of a cell taken by its link words.
pub const LINK_BYTES: usize = 16;
/// Bytes of a cell or fastbox slot taken by the message header.
pub const HEADER_BYTES: usize = 32;
/// The larger room behind the header, when [`flags::FT_PIGGYBACK`] and [`flags::FT_STAMP`] are set:
/// the 28 bytes of the fault-tolerance piggyback with its stamp, padded to keep the payload 16-byte
/// aligned. Capacities (the largest payload a slot or cell takes) are computed with it.
pub const FT_ROOM: usize = 32;
/// The room behind the header when [`flags::FT_PIGGYBACK`] is set without [`flags::FT_STAMP`]: the
/// first [`FT_SHORT_BYTES`] of the piggyback, padded to 16.
pub const FT_ROOM_SHORT: usize = 16;
/// Bytes of the fault-tolerance piggyback proper.
pub const FT_PIGGYBACK_BYTES: usize = 28;
/// Bytes of the piggyback before its stamp: what travels without [`flags::FT_STAMP`].
pub const FT_SHORT_BYTES: usize = 12;
/// Bytes of the piggyback that travel with [`flags::FT_STAMP_SHORT`]: the first
/// [`FT_SHORT_BYTES`] and the low 4 bytes of the stamp's sequence number (little-endian), in the
/// [`FT_ROOM_SHORT`] room; the low 32 bits of its digest travel in the header's `aux`.
pub const FT_STAMP_SHORT_BYTES: usize = FT_SHORT_BYTES + 4;

/// Bytes of fault-tolerance room between the header and the payload of a message whose header has
/// `flags`: 0 without [`flags::FT_PIGGYBACK`], [`FT_ROOM_SHORT`] with it alone (or with
/// [`flags::FT_STAMP_SHORT`]), [`FT_ROOM`] with [`flags::FT_STAMP`] too. Every reader and writer of
/// the room goes by it.
#[inline(always)]
pub const fn ft_room(flags: u8) -> usize {
    (flags & flags::FT_PIGGYBACK) as usize * (FT_ROOM_SHORT << ((flags >> 2) & 1))
}

/// The piggyback flags that travel with a message whose header has `flags`: with a piggyback
/// (`ft`), [`flags::FT_PIGGYBACK`] and the [`flags::FT_STAMP`] and [`flags::FT_STAMP_SHORT`] of
/// `flags` (the layer above sets them for the destinations that look at the stamp: another
/// group's); none without. A reader of a message without them sees a zero stamp ([`ft_read`]).
#[inline(always)]
pub const fn ft_flags(flags: u8, ft: bool) -> u8 {
    if ft { flags::FT_PIGGYBACK | flags & (flags::FT_STAMP | flags::FT_STAMP_SHORT) } else { 0 }
}

/// The piggyback bytes that travel in the room of a message with `flags`: all of `pb` with
/// [`flags::FT_STAMP`], [`FT_STAMP_SHORT_BYTES`] with [`flags::FT_STAMP_SHORT`] alone, its first
/// [`FT_SHORT_BYTES`] with neither; none without [`flags::FT_PIGGYBACK`]. Never more than
/// [`ft_room`].
#[inline(always)]
pub const fn ft_carried(flags: u8) -> usize {
    match flags & ROOM_FLAGS {
        LONG | LONG_AND_SHORT => FT_PIGGYBACK_BYTES,
        SHORT_STAMP => FT_STAMP_SHORT_BYTES,
        flags::FT_PIGGYBACK => FT_SHORT_BYTES,
        _ => 0,
    }
}

/// The piggyback of a message with `flags` from the `room` behind its header (at least
/// [`ft_carried`]`(flags)` bytes): the bytes it does not carry are zero.
#[inline(always)]
pub fn ft_read(flags: u8, room: &[u8]) -> PiggybackBytes {
    let mut pb = [0u8; FT_PIGGYBACK_BYTES];
    // Two fixed-size copies, not one of a variable length (a call to `memcpy`), chosen by the
    // flags themselves (cheaper than going through `ft_carried`'s arithmetic).
    match flags & ROOM_FLAGS {
        LONG | LONG_AND_SHORT => pb.copy_from_slice(&room[..FT_PIGGYBACK_BYTES]),
        SHORT_STAMP => pb[..FT_STAMP_SHORT_BYTES].copy_from_slice(&room[..FT_STAMP_SHORT_BYTES]),
        flags::FT_PIGGYBACK => pb[..FT_SHORT_BYTES].copy_from_slice(&room[..FT_SHORT_BYTES]),
        _ => {}
    }
    pb
}

/// The flags that say what the room carries, and their values: the long stamp ([`flags::FT_STAMP`]
/// wins over [`flags::FT_STAMP_SHORT`]: the room is [`ft_room`]'s), the short one.
const ROOM_FLAGS: u8 = flags::FT_PIGGYBACK | flags::FT_STAMP | flags::FT_STAMP_SHORT;
const LONG: u8 = flags::FT_PIGGYBACK | flags::FT_STAMP;
const LONG_AND_SHORT: u8 = ROOM_FLAGS;
const SHORT_STAMP: u8 = flags::FT_PIGGYBACK | flags::FT_STAMP_SHORT;

/// Writes the bytes of piggyback `pb` that a message with `flags` carries ([`ft_carried`]) at
/// `room`, in fixed-size copies.
///
/// # Safety
/// `room` is valid for [`ft_carried`]`(flags)` bytes of writes.
#[inline(always)]
pub unsafe fn ft_write(flags: u8, pb: &PiggybackBytes, room: *mut u8) {
    // SAFETY: the caller's contract; each arm writes `ft_carried(flags)` bytes.
    unsafe {
        match flags & ROOM_FLAGS {
            LONG | LONG_AND_SHORT => core::ptr::write_unaligned(room as *mut PiggybackBytes, *pb),
            SHORT_STAMP => core::ptr::copy_nonoverlapping(pb.as_ptr(), room, FT_STAMP_SHORT_BYTES),
            flags::FT_PIGGYBACK => core::ptr::copy_nonoverlapping(pb.as_ptr(), room, FT_SHORT_BYTES),
            _ => {}
        }
    }
}

/// The fault-tolerance piggyback as it travels: 28 opaque bytes (the layer above encodes and
/// decodes them; `nemesis-ft`'s `(date, phase)` and release tag in 12, then the message's stamp,
/// its per-destination sequence number and digest, in 16). A message carries one exactly when its header has
/// [`flags::FT_PIGGYBACK`]; it sits in the [`FT_ROOM`] after the header, the rest of the room zero.
pub type PiggybackBytes = [u8; FT_PIGGYBACK_BYTES];

/// Message header flags.
pub mod flags {
    /// A fault-tolerance piggyback (`(date, phase)`, and the stamp with [`FT_STAMP`]) follows the
    /// header; the payload starts [`super::ft_room`] bytes later. Bit 0: readers multiply by it.
    pub const FT_PIGGYBACK: u8 = 1 << 0;
    /// With [`FT_PIGGYBACK`]: the piggyback's 16-byte stamp follows its first 12 bytes, and the room
    /// is [`super::FT_ROOM`] (32) bytes, not [`super::FT_ROOM_SHORT`] (16). Bit 2: [`super::ft_room`]
    /// shifts by it. Meaningless without [`FT_PIGGYBACK`].
    pub const FT_STAMP: u8 = 1 << 2;
    /// With [`FT_PIGGYBACK`] and without [`FT_STAMP`]: the stamp travels short, for an 8-byte
    /// message to fit one cache line (`[fastbox stamp 8][header 32][room 16][payload 8]`): the low
    /// 32 bits of its sequence number after the piggyback's first 12 bytes in the
    /// [`super::FT_ROOM_SHORT`] room ([`super::FT_STAMP_SHORT_BYTES`]), the low 32 bits of its
    /// digest in the header's `aux`. The layer above rebuilds the rest. Bit 3.
    pub const FT_STAMP_SHORT: u8 = 1 << 3;
    /// A network arrival, put in a cell of the receiver's own pool by its netmod: `src` is the
    /// global rank of a remote sender, and the fragments of one remote sender come in the order
    /// enqueued (its connection's order), outside the per-pair sequence numbers of local peers.
    /// Honoured only in the receiver's own cells.
    pub const NETMOD: u8 = 1 << 1;
}

/// The link words of a cell, first in the cell. Written by whoever enqueues the cell, read by the
/// queue's consumer and, after a failure, by whoever repairs or reclaims.
#[repr(C, align(16))]
#[derive(Debug)]
pub struct CellLink {
    /// The cell after this one in the queue it is in; [`NULL`] while it is the last one, or not
    /// linked yet. Cleared by the enqueuer before the cell is swapped in (Fig 2.9 omits this).
    pub(crate) next: AtomicU32,
    /// Custody of the cell: `queue id << 16 | rank`. Set by a rank that begins enqueuing the cell
    /// on a queue (the queue's id and the enqueuer), or to `0 << 16 | owner` when the owner takes it
    /// out of its own free queue. Tells a reclaimer where a cell can be after a failure.
    pub(crate) custody: AtomicU32,
    /// The tail value (`gen << 32 | handle`) that this cell's latest enqueue attempt expected to
    /// replace. Written before the attempt's compare-and-swap, so after a producer dies one can
    /// tell whether its cell was swapped in (see `queue.rs`, "Failures").
    pub(crate) enq_prev: AtomicU64,
}

impl CellLink {
    /// A link block for a heap arena (loom models and unit tests).
    pub fn new() -> Self {
        CellLink { next: AtomicU32::new(NULL), custody: AtomicU32::new(0), enq_prev: AtomicU64::new(0) }
    }
}

impl Default for CellLink {
    fn default() -> Self {
        Self::new()
    }
}

/// The message header, at most 32 bytes as NEMESIS's (`shared/reference/nemesis.md`, "Cells").
/// The same header frames cells, fastbox slots and, later, netmod packets.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct MsgHeader {
    /// Global rank of the sender.
    pub src: u32,
    /// Global rank of the receiver.
    pub dst: u32,
    /// MPI tag.
    pub tag: i32,
    /// Context id (communicator).
    pub context: u32,
    /// Length of the whole message in bytes (a message may span several cells).
    pub len: u32,
    /// Per-ordered-pair message sequence number, set by the port; all fragments of a message share
    /// it. Keeps fastbox and queue traffic from one sender in order.
    pub seq: u32,
    /// Index of this fragment within the message (0 for the first cell and for fastboxes).
    pub frag: u16,
    /// Message kind, defined by the layer above (eager data, rendezvous control, ...).
    pub kind: u8,
    /// [`flags`].
    pub flags: u8,
    /// Kind-specific word for the layer above (e.g. a request id); not interpreted here.
    pub aux: u32,
}

const _: () = assert!(core::mem::size_of::<MsgHeader>() == HEADER_BYTES);
// `Incoming::kind_flags` reads `kind` and `flags` as one word.
const _: () = assert!(core::mem::offset_of!(MsgHeader, flags) == core::mem::offset_of!(MsgHeader, kind) + 1);
// `FastboxRef::take_plain` reads `frag`, `kind` and `flags` as one 4-byte word.
const _: () = assert!(core::mem::offset_of!(MsgHeader, kind) == core::mem::offset_of!(MsgHeader, frag) + 2);
#[cfg(not(loom))]
const _: () = assert!(core::mem::size_of::<CellLink>() == LINK_BYTES);

impl MsgHeader {
    /// The header's bytes, as a netmod puts them on the wire (native byte order: both ends run
    /// this build).
    pub fn to_bytes(&self) -> [u8; HEADER_BYTES] {
        let mut b = [0u8; HEADER_BYTES];
        // SAFETY: `MsgHeader` is a `repr(C)` struct of integers, `HEADER_BYTES` long, without
        // padding.
        unsafe { core::ptr::write_unaligned(b.as_mut_ptr() as *mut MsgHeader, *self) };
        b
    }

    /// A header from its first `HEADER_BYTES` bytes (any bit pattern is a header: the caller
    /// checks its fields), or `None` if `b` is shorter.
    pub fn from_bytes(b: &[u8]) -> Option<MsgHeader> {
        if b.len() < HEADER_BYTES {
            return None;
        }
        // SAFETY: `b` holds at least `HEADER_BYTES` bytes; every bit pattern is a valid
        // `MsgHeader`.
        Some(unsafe { core::ptr::read_unaligned(b.as_ptr() as *const MsgHeader) })
    }

    /// Bytes between the start of the header and the payload.
    #[inline]
    pub fn payload_offset(&self) -> usize {
        HEADER_BYTES + ft_room(self.flags)
    }
}

/// Custody word for "being enqueued on queue `queue` by `rank`" (queue id 0: held by `rank`).
#[inline]
pub(crate) const fn custody(queue: u16, rank: u16) -> u32 {
    (queue as u32) << 16 | rank as u32
}

/// The queue id half of a custody word.
#[inline]
pub(crate) const fn custody_queue(word: u32) -> u16 {
    (word >> 16) as u16
}

/// The rank half of a custody word.
#[inline]
pub(crate) const fn custody_rank(word: u32) -> u16 {
    word as u16
}

/// A tail value: the queue's generation (bumped by every successful tail update) and a handle.
#[inline]
pub(crate) const fn tail_value(gen_: u32, handle: CellHandle) -> u64 {
    (gen_ as u64) << 32 | handle as u64
}

/// The generation half of a tail value.
#[inline]
pub(crate) const fn tail_gen(v: u64) -> u32 {
    (v >> 32) as u32
}

/// The handle half of a tail value (including [`SEALED_BIT`]).
#[inline]
pub(crate) const fn tail_handle(v: u64) -> u32 {
    v as u32
}

/// Copies `n` bytes from `src` to `dst` (not overlapping). Lengths up to 16 bytes, the common
/// case of small messages, are done with at most two overlapping loads and stores instead of a
/// call to `memcpy`; long copies whose destination starts a little past the source modulo 4 KiB
/// go through [`copy_short_distance`].
///
/// # Safety
/// `src` must be valid for `n` bytes of reads and `dst` for `n` bytes of writes, not overlapping.
#[inline(always)]
pub unsafe fn copy_bytes(src: *const u8, dst: *mut u8, n: usize) {
    use core::ptr::{read_unaligned, write_unaligned};
    // SAFETY: every access below stays within `[0, n)` of both buffers (the caller's contract).
    unsafe {
        if n > 16 {
            copy_long(src, dst, n);
        } else if n >= 8 {
            let (a, b) = (read_unaligned(src as *const u64), read_unaligned(src.add(n - 8) as *const u64));
            write_unaligned(dst as *mut u64, a);
            write_unaligned(dst.add(n - 8) as *mut u64, b);
        } else if n >= 4 {
            let (a, b) = (read_unaligned(src as *const u32), read_unaligned(src.add(n - 4) as *const u32));
            write_unaligned(dst as *mut u32, a);
            write_unaligned(dst.add(n - 4) as *mut u32, b);
        } else if n > 0 {
            *dst = *src;
            *dst.add(n / 2) = *src.add(n / 2);
            *dst.add(n - 1) = *src.add(n - 1);
        }
    }
}

/// [`copy_bytes`] of more than 16 bytes, out of line so that the short copies inlined on the
/// fast path stay as they were.
///
/// # Safety
/// As for [`copy_bytes`].
#[inline(never)]
unsafe fn copy_long(src: *const u8, dst: *mut u8, n: usize) {
    // SAFETY: the caller's contract.
    unsafe {
        if n >= SHORT_DISTANCE_MIN && short_distance(src, dst) {
            copy_short_distance(src, dst, n);
        } else {
            core::ptr::copy_nonoverlapping(src, dst, n);
        }
    }
}

/// Copies from this length may use `rep movsb` in glibc's `memcpy` (its
/// `x86_rep_movsb_threshold` is 2 KiB and up), the instruction [`copy_short_distance`] avoids.
pub const SHORT_DISTANCE_MIN: usize = 1024;

/// True if `dst` starts 1 to 31 bytes past `src` modulo 4 KiB.
#[inline(always)]
pub fn short_distance(src: *const u8, dst: *mut u8) -> bool {
    let d = (dst as usize).wrapping_sub(src as usize) & 4095;
    d.wrapping_sub(1) < 31
}

/// Copies `n` bytes without `rep movsb`: 64 bytes per step with unaligned 16-byte loads and
/// stores, the tail by `memcpy` (under 64 bytes, never `rep movsb`).
///
/// Why: glibc's `memcpy` copies long buffers with `rep movsb`, which on this project's machine
/// (AMD Zen 3, FSRM) runs about fifteen times slower when the destination starts 1 to 31 bytes
/// past the source modulo 4 KiB: 32 KiB copied within L1/L2, 2.8–3.0 GB/s at every distance from
/// 1 to 31, 44–52 GB/s at 0 and from 32 (this loop: 36–50 GB/s at every distance).
/// `nemesis-bench baseline` documents it for its own buffers; glibc avoids the case only on
/// Intel (`Avoid_Short_Distance_REP_MOVSB`). Message buffers meet it
/// all the time: `malloc` returns large blocks 16 bytes past a page boundary, while cells,
/// fastbox slots and copy-ring slots start at fixed offsets of their own. Measured with 64
/// rendezvous messages of 256 KiB in flight through the copy rings, receive buffer 16 bytes past
/// a page: 2.5 GB/s through `memcpy` (page-aligned buffer: 10–24 GB/s).
///
/// # Safety
/// As for [`copy_bytes`].
#[inline(never)]
pub unsafe fn copy_short_distance(src: *const u8, dst: *mut u8, n: usize) {
    let mut done = 0;
    #[cfg(target_arch = "x86_64")]
    {
        if std::arch::is_x86_feature_detected!("avx2") {
            // SAFETY: the caller's contract; the CPU has AVX2 (checked just above).
            return unsafe { copy_short_distance_avx2(src, dst, n) };
        }
        use core::arch::x86_64::{__m128i, _mm_loadu_si128, _mm_storeu_si128};
        while n - done >= 64 {
            // SAFETY: `done + 64 <= n`: the 64 bytes read and written are inside both buffers
            // (the caller's contract); SSE2 is part of x86-64, and the unaligned forms take any
            // address.
            unsafe {
                let (s, d) = (src.add(done) as *const __m128i, dst.add(done) as *mut __m128i);
                let (a, b, c, e) = (
                    _mm_loadu_si128(s),
                    _mm_loadu_si128(s.add(1)),
                    _mm_loadu_si128(s.add(2)),
                    _mm_loadu_si128(s.add(3)),
                );
                _mm_storeu_si128(d, a);
                _mm_storeu_si128(d.add(1), b);
                _mm_storeu_si128(d.add(2), c);
                _mm_storeu_si128(d.add(3), e);
            }
            done += 64;
        }
    }
    #[cfg(not(target_arch = "x86_64"))]
    while n - done >= SHORT_DISTANCE_MIN {
        // SAFETY: as below, for the first `SHORT_DISTANCE_MIN` bytes left; pieces shorter than
        // the `rep movsb` threshold are copied by vector loops.
        unsafe { core::ptr::copy_nonoverlapping(src.add(done), dst.add(done), SHORT_DISTANCE_MIN - 1) };
        done += SHORT_DISTANCE_MIN - 1;
    }
    // SAFETY: the remaining `n - done` bytes are inside both buffers.
    unsafe { core::ptr::copy_nonoverlapping(src.add(done), dst.add(done), n - done) };
}

/// [`copy_short_distance`] 128 bytes per step with 32-byte loads and stores: data just written
/// by the other core comes over at 30–37 GB/s this way, 27–30 with 16-byte steps (`memcpy` at a
/// good distance: 35).
///
/// # Safety
/// As for [`copy_bytes`], and the CPU must have AVX2.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
unsafe fn copy_short_distance_avx2(src: *const u8, dst: *mut u8, n: usize) {
    use core::arch::x86_64::{__m256i, _mm256_loadu_si256, _mm256_storeu_si256};
    let mut done = 0;
    while n - done >= 128 {
        // SAFETY: `done + 128 <= n`: inside both buffers (the caller's contract); unaligned
        // forms, AVX2 enabled for this function (the caller's contract).
        unsafe {
            let (s, d) = (src.add(done) as *const __m256i, dst.add(done) as *mut __m256i);
            let (a, b) = (_mm256_loadu_si256(s), _mm256_loadu_si256(s.add(1)));
            let (c, e) = (_mm256_loadu_si256(s.add(2)), _mm256_loadu_si256(s.add(3)));
            _mm256_storeu_si256(d, a);
            _mm256_storeu_si256(d.add(1), b);
            _mm256_storeu_si256(d.add(2), c);
            _mm256_storeu_si256(d.add(3), e);
        }
        done += 128;
    }
    // SAFETY: the remaining `n - done` (< 128) bytes are inside both buffers.
    unsafe { core::ptr::copy_nonoverlapping(src.add(done), dst.add(done), n - done) };
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    #[test]
    fn the_room_follows_the_flags() {
        assert_eq!(ft_room(0), 0);
        assert_eq!(ft_room(flags::FT_STAMP), 0, "the stamp flag alone means nothing");
        assert_eq!(ft_room(flags::FT_PIGGYBACK), FT_ROOM_SHORT);
        assert_eq!(ft_room(flags::FT_PIGGYBACK | flags::FT_STAMP | flags::NETMOD), FT_ROOM);
        assert_eq!(ft_carried(flags::FT_PIGGYBACK), FT_SHORT_BYTES);
        assert_eq!(ft_carried(flags::FT_PIGGYBACK | flags::FT_STAMP), FT_PIGGYBACK_BYTES);
        assert_eq!(ft_flags(flags::FT_STAMP | flags::NETMOD, true), flags::FT_PIGGYBACK | flags::FT_STAMP);
        assert_eq!(ft_flags(flags::NETMOD, true), flags::FT_PIGGYBACK);
        assert_eq!(ft_flags(flags::FT_STAMP | flags::FT_PIGGYBACK, false), 0, "no piggyback, no flag");
        // A short room's reader never takes the stamp from the bytes after it (the payload).
        let room = [9u8; FT_ROOM];
        let short = ft_read(flags::FT_PIGGYBACK, &room[..FT_ROOM_SHORT]);
        assert_eq!(short[..FT_SHORT_BYTES], [9; FT_SHORT_BYTES]);
        assert_eq!(short[FT_SHORT_BYTES..], [0; FT_PIGGYBACK_BYTES - FT_SHORT_BYTES]);
        assert_eq!(ft_read(flags::FT_PIGGYBACK | flags::FT_STAMP, &room), [9; FT_PIGGYBACK_BYTES]);
    }

    /// The short stamp: the short room, 16 bytes carried (the piggyback and the sequence number's
    /// low 4), written and read back; the long stamp wins if both flags are set; the flag travels.
    #[test]
    fn the_short_stamp_travels_in_the_short_room() {
        let short = flags::FT_PIGGYBACK | flags::FT_STAMP_SHORT;
        assert_eq!(ft_room(short), FT_ROOM_SHORT);
        assert_eq!(ft_carried(short), FT_STAMP_SHORT_BYTES);
        assert!(ft_carried(short) <= ft_room(short));
        assert_eq!(ft_room(short | flags::FT_STAMP), FT_ROOM);
        assert_eq!(ft_carried(short | flags::FT_STAMP), FT_PIGGYBACK_BYTES);
        assert_eq!(ft_carried(flags::FT_STAMP_SHORT), 0, "nothing without the piggyback flag");
        assert_eq!(ft_flags(flags::FT_STAMP_SHORT | flags::NETMOD, true), short);
        // Every flag combination carries at most its room.
        for f in 0..=u8::MAX {
            assert!(ft_carried(f) <= ft_room(f), "flags {f:#x}");
        }
        let pb: PiggybackBytes = core::array::from_fn(|i| i as u8 + 1);
        let mut room = [0xEEu8; FT_ROOM];
        // SAFETY: `room` has FT_ROOM >= ft_carried(short) bytes.
        unsafe { ft_write(short, &pb, room.as_mut_ptr()) };
        assert_eq!(room[..FT_STAMP_SHORT_BYTES], pb[..FT_STAMP_SHORT_BYTES]);
        assert_eq!(room[FT_STAMP_SHORT_BYTES], 0xEE, "nothing written past the carried bytes");
        let back = ft_read(short, &room[..FT_ROOM_SHORT]);
        assert_eq!(back[..FT_STAMP_SHORT_BYTES], pb[..FT_STAMP_SHORT_BYTES]);
        assert_eq!(back[FT_STAMP_SHORT_BYTES..], [0; FT_PIGGYBACK_BYTES - FT_STAMP_SHORT_BYTES]);
    }

    #[test]
    fn short_distance_copies_are_exact() {
        let src: Vec<u8> = (0..3 * 4096 + 200).map(|i| (i * 7 + 3) as u8).collect();
        for off in [0usize, 1, 15, 16, 31, 63, 64, 100] {
            for n in [1024usize, 1087, 4096, 5000, 8191] {
                // Off 1, 15, 16 and 31 take the short-distance loop through `copy_bytes`.
                let mut dst = vec![0xAAu8; n + 200];
                let d = dst.as_mut_ptr().wrapping_add(off);
                // SAFETY: `dst` holds `off + n` bytes (off <= 100 < 200), `src` more than `n`.
                unsafe { copy_bytes(src.as_ptr(), d, n) };
                assert_eq!(&dst[off..off + n], &src[..n], "off {off} n {n}");
                assert!(dst[..off].iter().chain(&dst[off + n..]).all(|&b| b == 0xAA), "off {off} n {n}: out of bounds");
                // SAFETY: as above.
                unsafe { copy_short_distance(src.as_ptr().add(3), d, n) };
                assert_eq!(&dst[off..off + n], &src[3..n + 3], "direct, off {off} n {n}");
            }
        }
        assert!(short_distance(4096 as *const u8, (4096 + 16) as *mut u8));
        assert!(short_distance(4096 as *const u8, (4096 + 1) as *mut u8));
        assert!(short_distance(4096 as *const u8, (4096 + 31) as *mut u8));
        assert!(!short_distance(4096 as *const u8, (4096 + 32) as *mut u8));
        assert!(!short_distance(4096 as *const u8, 8192 as *mut u8));
        assert!(!short_distance(4112 as *const u8, 4096 as *mut u8));
    }

    #[test]
    fn copy_bytes_every_small_length_and_some_large() {
        let src: Vec<u8> = (0..100u8).collect();
        for n in (0..=40).chain([63, 64, 99]) {
            let mut dst = vec![0xAAu8; 100];
            // SAFETY: both buffers hold 100 bytes, n <= 99.
            unsafe { copy_bytes(src.as_ptr(), dst.as_mut_ptr(), n) };
            assert_eq!(&dst[..n], &src[..n], "n = {n}");
            assert!(dst[n..].iter().all(|&b| b == 0xAA), "n = {n}: wrote past the end");
        }
    }
}
