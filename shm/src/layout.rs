//! Segment layout: named parameters (one place of definition) and the offsets computed from
//! `(local ranks, parameters)`, deterministically, so every process computes the same layout.
//!
//! ```text
//! 0            segment header (one page)
//! ranks        RankState × R                      (64 B each)
//! queues       QueueShared × 3R  (recv, free, netmod free)  (128 B each)
//! fastbox map  u32 × R × R       (receiver-major: box index + 1 of each sender, 0 none)
//! fastboxes    R × K boxes of [owner line | ack line | slots × slot size]
//! copy rings   R × L rings of [epoch line | a line per slot (page-rounded) | slots × slot size]
//! cells        R × C cells of cell_size bytes, page-aligned
//! coll areas   AREAS × [head line | a line per rank (page-rounded) | R × 2 banks] (`collarea.rs`)
//! ```

use crate::cell::{HEADER_BYTES, LINK_BYTES};
use crate::collarea;
use crate::error::{Error, Result};
use crate::fastbox::STAMP_BYTES;

/// Version of the layout below; bumped whenever any shared structure changes.
pub const LAYOUT_VERSION: u32 = 7;

/// Most local ranks a segment supports (queue ids and the fastbox map are sized for it).
pub const MAX_LOCAL_RANKS: u16 = 1024;

/// Most cells in a segment: handles must stay below the tail's sealed bit.
pub const MAX_CELLS: u64 = 1 << 30;

/// Bytes of the segment header area.
pub const HEADER_AREA: u64 = 4096;
/// Bytes of one rank's liveness record.
pub const RANK_STATE_BYTES: u64 = 64;
/// Bytes of one queue.
pub const QUEUE_BYTES: u64 = 128;
/// Bytes of one rank's queue page: its receive queue, free queue and netmod free queue
/// ([`QueueKind`]), alone in a page so that the page can be placed on the rank's NUMA node.
pub const QUEUE_PAGE_BYTES: u64 = 4096;

/// Which of a rank's three queues (its place in the rank's queue page).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(usize)]
pub enum QueueKind {
    /// Where other ranks enqueue the cells they send it.
    Recv = 0,
    /// Where its cells come back once received.
    Free = 1,
    /// The cells its network modules fill with arrivals.
    Netmod = 2,
}
/// Bytes before a fastbox's slots: the owner line and the ack line.
pub const FASTBOX_HEAD_BYTES: u64 = 128;

/// The parameters that shape a segment. Every process of a node must use the same ones: they
/// are stored in the segment header and checked on attach.
///
/// Defaults were chosen by measurement on the project's 2-core machine; the crate documentation
/// gives the runs. Each is overridable through an environment variable read by
/// [`Params::from_env`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Params {
    /// Bytes per cell, link words and header included. A power of two. `NEMESIS_CELL_SIZE`.
    pub cell_size: u32,
    /// Cells in each rank's pool, a power of two (a cell's owner is its index shifted).
    /// `NEMESIS_CELLS_PER_RANK`.
    pub cells_per_rank: u32,
    /// Slots per fastbox: 1 is NEMESIS's single buffer, more a ring. A power of two. The default,
    /// 64, holds a window of 64 non-blocking sends (OSU's, `mpi_pingpong.c bw`) whole.
    /// `NEMESIS_FASTBOX_SLOTS`.
    pub fastbox_slots: u32,
    /// Bytes per fastbox slot, stamp and header included. A multiple of 64.
    /// `NEMESIS_FASTBOX_SLOT_SIZE`.
    pub fastbox_slot_size: u32,
    /// Fastboxes each receiver hosts (senders claim them on demand); 0 disables fastboxes.
    /// `NEMESIS_FASTBOXES_PER_RANK`.
    pub fastboxes_per_rank: u32,
    /// Copy rings each rank hosts for large messages sent to it (rendezvous, `nemesis-lmt`).
    /// `NEMESIS_LMT_RINGS_PER_RANK`.
    pub lmt_rings_per_rank: u32,
    /// Slots per copy ring. `NEMESIS_LMT_SLOTS`.
    pub lmt_slots: u32,
    /// Bytes per copy-ring slot (the chunk size), a multiple of 4096. `NEMESIS_LMT_SLOT_SIZE`.
    pub lmt_slot_size: u32,
}

impl Default for Params {
    fn default() -> Self {
        Params::DEFAULT
    }
}

impl Params {
    /// The measured defaults (`docs/design/shm.md`, "Parameters").
    pub const DEFAULT: Params = Params {
        cell_size: 16 * 1024,
        cells_per_rank: 64,
        fastbox_slots: 64,
        fastbox_slot_size: 256,
        fastboxes_per_rank: 16,
        lmt_rings_per_rank: 2,
        lmt_slots: 8,
        lmt_slot_size: 32 * 1024,
    };

    /// The defaults, with any `NEMESIS_*` override from the environment.
    pub fn from_env() -> Result<Params> {
        let mut p = Params::DEFAULT;
        for (var, field) in [
            ("NEMESIS_CELL_SIZE", &mut p.cell_size),
            ("NEMESIS_CELLS_PER_RANK", &mut p.cells_per_rank),
            ("NEMESIS_FASTBOX_SLOTS", &mut p.fastbox_slots),
            ("NEMESIS_FASTBOX_SLOT_SIZE", &mut p.fastbox_slot_size),
            ("NEMESIS_FASTBOXES_PER_RANK", &mut p.fastboxes_per_rank),
            ("NEMESIS_LMT_RINGS_PER_RANK", &mut p.lmt_rings_per_rank),
            ("NEMESIS_LMT_SLOTS", &mut p.lmt_slots),
            ("NEMESIS_LMT_SLOT_SIZE", &mut p.lmt_slot_size),
        ] {
            if let Ok(v) = std::env::var(var) {
                *field = parse_size(&v).ok_or_else(|| Error::InvalidParams(format!("{var}={v} is not a number")))?;
            }
        }
        Ok(p)
    }

    /// Payload bytes a cell carries (without a fault-tolerance piggyback).
    pub fn cell_payload(&self) -> usize {
        self.cell_size as usize - LINK_BYTES - HEADER_BYTES
    }

    /// Payload bytes a fastbox slot carries (without a fault-tolerance piggyback).
    pub fn fastbox_payload(&self) -> usize {
        self.fastbox_slot_size as usize - STAMP_BYTES - HEADER_BYTES
    }

    /// Checks the ranges every layout computation relies on.
    pub fn validate(&self, ranks: u16) -> Result<()> {
        let bad = |m: String| Err(Error::InvalidParams(m));
        if ranks == 0 || ranks > MAX_LOCAL_RANKS {
            return bad(format!("{ranks} local ranks (1..={MAX_LOCAL_RANKS})"));
        }
        if !self.cell_size.is_power_of_two() || !(256..=1 << 20).contains(&self.cell_size) {
            return bad(format!("cell size {} (a power of two, 256 B..=1 MiB)", self.cell_size));
        }
        if !self.cells_per_rank.is_power_of_two() || !(2..=1 << 16).contains(&self.cells_per_rank) {
            return bad(format!("{} cells per rank (a power of two, 2..=65536)", self.cells_per_rank));
        }
        if u64::from(ranks) * u64::from(self.cells_per_rank) >= MAX_CELLS {
            return bad(format!("{} cells in all (< {MAX_CELLS})", u64::from(ranks) * u64::from(self.cells_per_rank)));
        }
        if !self.fastbox_slots.is_power_of_two() || self.fastbox_slots > 256 {
            return bad(format!("{} fastbox slots (a power of two, 1..=256)", self.fastbox_slots));
        }
        // A message with a fault-tolerance piggyback takes cells when its room does not fit a slot.
        let min_slot = STAMP_BYTES + HEADER_BYTES;
        if !self.fastbox_slot_size.is_multiple_of(64)
            || (self.fastbox_slot_size as usize) < min_slot.next_multiple_of(64)
        {
            return bad(format!("fastbox slot size {} (a multiple of 64, at least 64)", self.fastbox_slot_size));
        }
        if self.fastbox_slot_size > 1 << 16 {
            return bad(format!("fastbox slot size {} (at most 64 KiB)", self.fastbox_slot_size));
        }
        if self.fastboxes_per_rank > u32::from(MAX_LOCAL_RANKS) {
            return bad(format!("{} fastboxes per rank (at most {MAX_LOCAL_RANKS})", self.fastboxes_per_rank));
        }
        if !(1..=64).contains(&self.lmt_rings_per_rank) {
            return bad(format!("{} copy rings per rank (1..=64)", self.lmt_rings_per_rank));
        }
        if !(1..=64).contains(&self.lmt_slots) {
            return bad(format!("{} copy-ring slots (1..=64)", self.lmt_slots));
        }
        if !self.lmt_slot_size.is_multiple_of(4096) || !(4096..=4 << 20).contains(&self.lmt_slot_size) {
            return bad(format!("copy-ring slot size {} (a multiple of 4096, at most 4 MiB)", self.lmt_slot_size));
        }
        Ok(())
    }

    /// The parameters as words, in a fixed order: header storage and hashing.
    pub(crate) fn to_words(self) -> [u32; 8] {
        [
            self.cell_size,
            self.cells_per_rank,
            self.fastbox_slots,
            self.fastbox_slot_size,
            self.fastboxes_per_rank,
            self.lmt_rings_per_rank,
            self.lmt_slots,
            self.lmt_slot_size,
        ]
    }

    #[cfg_attr(loom, allow(dead_code))]
    pub(crate) fn from_words(w: [u32; 8]) -> Params {
        Params {
            cell_size: w[0],
            cells_per_rank: w[1],
            fastbox_slots: w[2],
            fastbox_slot_size: w[3],
            fastboxes_per_rank: w[4],
            lmt_rings_per_rank: w[5],
            lmt_slots: w[6],
            lmt_slot_size: w[7],
        }
    }

    /// Bytes of one copy ring: its control lines (epoch, then one per slot) rounded to a page,
    /// then its slots.
    pub fn lmt_ring_bytes(&self) -> u64 {
        (64 * (1 + u64::from(self.lmt_slots))).next_multiple_of(4096)
            + u64::from(self.lmt_slots) * u64::from(self.lmt_slot_size)
    }
}

/// Parses `123`, `16k`/`16K`/`16KiB`, `1m`/`1M`/`1MiB`.
pub(crate) fn parse_size(s: &str) -> Option<u32> {
    let s = s.trim();
    let (num, mult) = match s.trim_end_matches("iB").trim_end_matches('B') {
        t if t.ends_with(['k', 'K']) => (&t[..t.len() - 1], 1024),
        t if t.ends_with(['m', 'M']) => (&t[..t.len() - 1], 1024 * 1024),
        t => (t, 1),
    };
    num.trim().parse::<u32>().ok()?.checked_mul(mult)
}

/// Byte offsets of every part of a segment for `ranks` local ranks and `params`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Layout {
    /// Local ranks.
    pub ranks: u16,
    /// Parameters.
    pub params: Params,
    /// Start of the rank records.
    pub ranks_off: u64,
    /// Start of the queue pages (page-aligned): rank r's queues in page r ([`QueueKind`]).
    pub queues_off: u64,
    /// Start of the fastbox map.
    pub fbox_map_off: u64,
    /// Start of the fastboxes.
    pub fbox_off: u64,
    /// Bytes of one fastbox.
    pub fbox_bytes: u64,
    /// Start of the copy rings (page-aligned; each ring's size is a multiple of a page).
    pub lmt_off: u64,
    /// Start of the cells.
    pub cells_off: u64,
    /// Start of the collectives' areas (page-aligned; [`crate::collarea`]).
    pub coll_off: u64,
    /// Total bytes.
    pub total: u64,
}

impl Layout {
    /// Computes the layout; fails on out-of-range parameters.
    pub fn new(ranks: u16, params: Params) -> Result<Layout> {
        params.validate(ranks)?;
        let r = u64::from(ranks);
        let ranks_off = HEADER_AREA;
        let queues_off = (ranks_off + r * RANK_STATE_BYTES).next_multiple_of(4096);
        let fbox_map_off = queues_off + r * QUEUE_PAGE_BYTES;
        let fbox_off = (fbox_map_off + 4 * r * r).next_multiple_of(64);
        let fbox_bytes = FASTBOX_HEAD_BYTES + u64::from(params.fastbox_slots) * u64::from(params.fastbox_slot_size);
        let lmt_off = (fbox_off + r * u64::from(params.fastboxes_per_rank) * fbox_bytes).next_multiple_of(4096);
        let cells_off = lmt_off + r * u64::from(params.lmt_rings_per_rank) * params.lmt_ring_bytes();
        let coll_off =
            (cells_off + r * u64::from(params.cells_per_rank) * u64::from(params.cell_size)).next_multiple_of(4096);
        let total = coll_off + u64::from(collarea::AREAS) * collarea::area_bytes(u32::from(ranks));
        Ok(Layout {
            ranks,
            params,
            ranks_off,
            queues_off,
            fbox_map_off,
            fbox_off,
            fbox_bytes,
            lmt_off,
            cells_off,
            coll_off,
            total,
        })
    }

    /// FNV-1a over the layout version, the rank count and the parameters.
    pub fn hash(&self) -> u64 {
        let mut h: u64 = 0xcbf2_9ce4_8422_2325;
        let words = [LAYOUT_VERSION, u32::from(self.ranks)].into_iter().chain(self.params.to_words());
        for w in words {
            for b in w.to_le_bytes() {
                h ^= u64::from(b);
                h = h.wrapping_mul(0x0100_0000_01b3);
            }
        }
        h
    }

    /// Offset of queue `kind` of local rank `rank`.
    #[inline(always)]
    pub fn queue_off(&self, rank: u16, kind: QueueKind) -> u64 {
        self.queues_off + u64::from(rank) * QUEUE_PAGE_BYTES + kind as u64 * QUEUE_BYTES
    }

    /// The byte ranges `[start, end)` of the memory local rank `rank` owns: the fastboxes it hosts
    /// (their slots are written by senders and polled by it), the copy rings it hosts (as
    /// receiver), its pool of cells (taken and filled by it as sender: NEMESIS keeps free queues
    /// on the sender's side so that a sender fills local memory, Mercier's habilitation
    /// L690–713), and its queue page (its receive queue's head is written by it alone, and its
    /// free and netmod queues are consumed by it). Its rank record is a line in an array shared
    /// by all ranks (read by every peer's liveness checks).
    pub fn owned_ranges(&self, rank: u16) -> [(u64, u64); 4] {
        let r = u64::from(rank);
        let p = &self.params;
        let boxes = u64::from(p.fastboxes_per_rank) * self.fbox_bytes;
        let rings = u64::from(p.lmt_rings_per_rank) * p.lmt_ring_bytes();
        let cells = u64::from(p.cells_per_rank) * u64::from(p.cell_size);
        let queues = self.queues_off + r * QUEUE_PAGE_BYTES;
        [
            (self.fbox_off + r * boxes, self.fbox_off + (r + 1) * boxes),
            (self.lmt_off + r * rings, self.lmt_off + (r + 1) * rings),
            (self.cells_off + r * cells, self.cells_off + (r + 1) * cells),
            (queues, queues + QUEUE_PAGE_BYTES),
        ]
    }

    /// Segment bytes per local rank (the memory budget figure).
    pub fn bytes_per_rank(&self) -> u64 {
        self.total / u64::from(self.ranks)
    }

    /// Bytes of fastbox memory (boxes and map) per local rank.
    pub fn fastbox_bytes_per_rank(&self) -> u64 {
        (self.lmt_off - self.fbox_map_off) / u64::from(self.ranks)
    }

    /// Offset of the collectives' area `index` (below [`collarea::AREAS`]).
    pub fn coll_area_off(&self, index: u32) -> Option<u64> {
        (index < collarea::AREAS)
            .then(|| self.coll_off + u64::from(index) * collarea::area_bytes(u32::from(self.ranks)))
    }

    /// Bytes of copy rings per local rank.
    pub fn lmt_bytes_per_rank(&self) -> u64 {
        (self.cells_off - self.lmt_off) / u64::from(self.ranks)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn layout_is_deterministic_and_aligned() {
        let a = Layout::new(8, Params::DEFAULT).unwrap();
        let b = Layout::new(8, Params::DEFAULT).unwrap();
        assert_eq!(a, b);
        assert_eq!(a.hash(), b.hash());
        assert_eq!(a.queues_off % 4096, 0);
        assert_eq!(a.fbox_off % 64, 0);
        assert_eq!(a.cells_off % 4096, 0);
        assert!(a.coll_off >= a.cells_off + 8 * 64 * 16384);
        assert_eq!(a.coll_off % 4096, 0);
        let last = a.coll_area_off(collarea::AREAS - 1).unwrap();
        assert_eq!(last % 4096, 0);
        assert_eq!(last + collarea::area_bytes(8), a.total, "the last area ends the segment");
        assert_eq!(a.coll_area_off(collarea::AREAS), None);
    }

    #[test]
    fn hash_changes_with_every_parameter() {
        let base = Layout::new(8, Params::DEFAULT).unwrap().hash();
        assert_ne!(base, Layout::new(9, Params::DEFAULT).unwrap().hash());
        let variants = [
            Params { cell_size: 8192, ..Params::DEFAULT },
            Params { cells_per_rank: 32, ..Params::DEFAULT },
            Params { fastbox_slots: 1, ..Params::DEFAULT },
            Params { fastbox_slot_size: 512, ..Params::DEFAULT },
            Params { fastboxes_per_rank: 4, ..Params::DEFAULT },
            Params { lmt_rings_per_rank: 3, ..Params::DEFAULT },
            Params { lmt_slots: 4, ..Params::DEFAULT },
            Params { lmt_slot_size: 8192, ..Params::DEFAULT },
        ];
        for p in variants {
            assert_ne!(base, Layout::new(8, p).unwrap().hash(), "{p:?}");
        }
    }

    #[test]
    fn bad_parameters_are_typed_errors() {
        for (ranks, p) in [
            (0, Params::DEFAULT),
            (MAX_LOCAL_RANKS + 1, Params::DEFAULT),
            (8, Params { cell_size: 3000, ..Params::DEFAULT }),
            (8, Params { cells_per_rank: 1, ..Params::DEFAULT }),
            (8, Params { cells_per_rank: 48, ..Params::DEFAULT }),
            (8, Params { fastbox_slots: 3, ..Params::DEFAULT }),
            (8, Params { fastbox_slot_size: 100, ..Params::DEFAULT }),
            (8, Params { fastbox_slot_size: 0, ..Params::DEFAULT }),
            (8, Params { lmt_rings_per_rank: 0, ..Params::DEFAULT }),
            (8, Params { lmt_slot_size: 5000, ..Params::DEFAULT }),
        ] {
            assert!(matches!(Layout::new(ranks, p), Err(Error::InvalidParams(_))), "{ranks} {p:?}");
        }
    }

    #[test]
    fn sizes_parse() {
        assert_eq!(parse_size("16k"), Some(16384));
        assert_eq!(parse_size("16KiB"), Some(16384));
        assert_eq!(parse_size("1M"), Some(1 << 20));
        assert_eq!(parse_size(" 64 "), Some(64));
        assert_eq!(parse_size("x"), None);
        assert_eq!(parse_size("9999999M"), None);
    }
}
