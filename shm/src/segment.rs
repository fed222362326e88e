//! The node segment: one shared mapping per node, created by one process and attached by every
//! local rank.
//!
//! Two ways to create it (`shared/ARCHITECTURE.md`, "The shared segment"):
//! - [`Backing::Memfd`]: an anonymous memory file, inherited by the ranks a launcher starts
//!   (nothing has a name, nothing can leak);
//! - [`Backing::Named`]: `shm_open(O_CREAT|O_EXCL, 0600)` with an unpredictable name, for process
//!   managers that are not ours; the last local rank to attach unlinks the name.
//!
//! On both paths the backing store is reserved before mapping, so a full `/dev/shm` or a memory
//! limit is [`Error::NoSpace`] at creation, never a SIGBUS later. The header (magic, layout
//! version, layout hash, ranks, parameters, size) is checked on attach; any mismatch is a typed
//! error. The magic is written last, so a half-built segment never validates.

use std::io;
use std::os::fd::{AsRawFd, OwnedFd, RawFd};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use memmap2::MmapRaw;

use crate::arena::Arena;
use crate::cell::{CellHandle, LINK_BYTES};
use crate::error::{Error, Result};
use crate::fastbox::{FastboxRef, STAMP_BYTES};
use crate::layout::{FASTBOX_HEAD_BYTES, HEADER_AREA, LAYOUT_VERSION, Layout, MAX_LOCAL_RANKS, Params, QueueKind};
use crate::node::{Node, RankState, STATE_ALIVE};
use crate::os::{self, PidFd};
use crate::queue::QueueShared;
use crate::sync::{AtomicU32, AtomicU64, Ordering::*};

/// "NEMESIS\0" read as a little-endian u64.
pub const MAGIC: u64 = u64::from_le_bytes(*b"NEMESIS\0");

/// Bytes reserved in the header for a named segment's name.
const NAME_BYTES: usize = 64;

/// The segment header, at offset 0.
#[repr(C, align(64))]
struct Header {
    /// [`MAGIC`], stored last at creation (Release).
    magic: AtomicU64,
    /// [`LAYOUT_VERSION`] of the creator.
    version: u32,
    /// Local ranks.
    ranks: u32,
    /// [`Layout::hash`] of `(version, ranks, params)`.
    layout_hash: u64,
    /// Total bytes.
    total: u64,
    /// [`Params`] as words.
    params: [u32; 8],
    /// Bumped whenever a rank becomes GONE (own cache line: read on slow paths by everyone).
    death_epoch: AtomicU64,
    _pad1: [u64; 7],
    /// Ranks that attached so far.
    attached: AtomicU32,
    /// Length of `name` (named segments), 0 otherwise.
    name_len: u32,
    /// The shared-memory object's name, so the last attacher can unlink it.
    name: [u8; NAME_BYTES],
}

const _: () = assert!(core::mem::size_of::<Header>() as u64 <= HEADER_AREA);

/// How a segment is backed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Backing {
    /// `memfd_create`: passed to children by descriptor.
    Memfd,
    /// `shm_open` with a random name: found by name.
    Named,
}

/// The cells of a segment.
pub struct SegmentArena {
    /// Address of cell 1 minus one cell: cell `h` is at `base + (h << shift)`.
    base: *mut u8,
    count: u32,
    shift: u32,
}

// SAFETY: handles `1..=count` map to disjoint `1 << shift`-byte cells inside the mapping, which
// outlives the arena (both are owned by the `Segment`).
unsafe impl Arena for SegmentArena {
    #[inline(always)]
    fn cell_count(&self) -> u32 {
        self.count
    }
    #[inline(always)]
    fn body_size(&self) -> usize {
        (1usize << self.shift) - LINK_BYTES
    }
    #[inline(always)]
    unsafe fn link_unchecked(&self, h: CellHandle) -> &crate::cell::CellLink {
        // SAFETY: the caller guarantees `1 <= h <= count`; cells are 16-byte aligned (page-aligned
        // area, power-of-two size >= 256).
        unsafe { &*(self.base.wrapping_add((h as usize) << self.shift) as *const crate::cell::CellLink) }
    }
    #[inline(always)]
    unsafe fn body(&self, h: CellHandle) -> *mut u8 {
        // In bounds for a valid `h` (the caller's contract): the body follows the link words.
        self.base.wrapping_add(((h as usize) << self.shift) + LINK_BYTES)
    }
}

// SAFETY: the arena only hands out pointers into the shared mapping, used under the protocols.
unsafe impl Send for SegmentArena {}
// SAFETY: as above.
unsafe impl Sync for SegmentArena {}

/// A mapped node segment.
pub struct Segment {
    map: MmapRaw,
    fd: OwnedFd,
    layout: Layout,
    arena: SegmentArena,
    name: Option<String>,
    /// Pidfds of peers (opened lazily), and when they were last polled.
    watch: Mutex<Watch>,
}

#[derive(Default)]
struct Watch {
    enabled: bool,
    /// Per rank: the pid watched and its pidfd (a restarted rank has another pid: its old pidfd
    /// must not mark the new incarnation gone).
    pidfds: Vec<Option<(u32, PidFd)>>,
    last: Option<Instant>,
    /// This process's pid namespace, read at the first sweep.
    pidns: Option<u64>,
}

/// Shortest interval between two pidfd sweeps.
const WATCH_INTERVAL: Duration = Duration::from_millis(10);

impl Segment {
    /// Creates a segment for `ranks` local ranks, reserves its memory, lays it out and puts every
    /// cell in its owner's free queue.
    pub fn create(ranks: u16, params: Params, backing: Backing) -> Result<Segment> {
        let layout = Layout::new(ranks, params)?;
        let (fd, name) = match backing {
            Backing::Memfd => (os::memfd("nemesis-segment")?, None),
            Backing::Named => {
                let (fd, name) = os::shm_create_exclusive("nemesis")?;
                (fd, Some(name))
            }
        };
        let built = Self::build(fd, layout, name.clone(), &[]).map(|(seg, _)| seg);
        if built.is_err()
            && let Some(n) = &name
        {
            let _ = os::shm_unlink(n);
        }
        built
    }

    /// As [`create`](Self::create) (a memfd), with the memory each local rank owns
    /// ([`Layout::owned_ranges`]) placed on a NUMA node: `nodes[r]` for rank `r` (`None`: where
    /// the kernel puts it). The policy is set on the segment's pages before they are reserved, so
    /// it holds whoever touches them first. A page shared by two ranks' ranges goes with the one
    /// owning its first byte. Placement is an optimisation: if the kernel refuses it (`mbind` is
    /// forbidden in some containers) the segment is made all the same and the first refusal is
    /// returned beside it.
    pub fn create_placed(ranks: u16, params: Params, nodes: &[Option<u32>]) -> Result<(Segment, Option<io::Error>)> {
        let layout = Layout::new(ranks, params)?;
        Self::build(os::memfd("nemesis-segment")?, layout, None, nodes)
    }

    /// The NUMA node the memory of local rank `rank` is placed on ([`create_placed`](
    /// Self::create_placed)), read back from the kernel's policy of its first cell; `None` if
    /// it was not placed.
    pub fn placed_node(&self, rank: u16) -> Result<Option<u32>> {
        if rank >= self.layout.ranks {
            return Err(Error::BadRank { rank: u32::from(rank), ranks: self.layout.ranks });
        }
        let (start, _) = self.layout.owned_ranges(rank)[2];
        let addr = self.map.as_ptr().wrapping_add(start as usize);
        // SAFETY: `addr` is the first byte of the rank's cells, inside our mapping.
        unsafe { os::preferred_node(addr) }.map_err(|e| Error::io("get_mempolicy", e))
    }

    fn build(
        fd: OwnedFd,
        layout: Layout,
        name: Option<String>,
        nodes: &[Option<u32>],
    ) -> Result<(Segment, Option<io::Error>)> {
        let seg = Self::map(fd, layout, name)?;
        let refused = seg.place(nodes);
        os::reserve(&seg.fd, layout.total)?;
        if seg.name.is_none() {
            // A memfd: its size is fixed for good (a named object cannot be sealed).
            os::seal_size(&seg.fd)?;
        }
        // SAFETY: the mapping is fresh, zero-filled and private to us until the magic is set; the
        // header fields other than atomics are written once, here.
        unsafe {
            let hp = seg.map.as_mut_ptr() as *mut Header;
            (*hp).version = LAYOUT_VERSION;
            (*hp).ranks = u32::from(layout.ranks);
            (*hp).layout_hash = layout.hash();
            (*hp).total = layout.total;
            (*hp).params = layout.params.to_words();
            if let Some(n) = &seg.name {
                let b = n.as_bytes();
                if b.len() > NAME_BYTES {
                    return Err(Error::InvalidParams(format!("segment name {n} too long")));
                }
                (*hp).name_len = b.len() as u32;
                (&mut (*hp).name)[..b.len()].copy_from_slice(b);
            }
        }
        for r in 0..layout.ranks {
            let fq = seg.free_queue(r);
            for c in seg.pool(r) {
                fq.enqueue(seg.arena.cell(c, "pool cell")?, r, r)?;
            }
        }
        // ORDERING: Release; an attacher that Acquires the magic sees the whole layout.
        seg.header().magic.store(MAGIC, Release);
        Ok((seg, refused))
    }

    /// Sets the NUMA policy of each rank's owned pages (see [`create_placed`](Self::create_placed)).
    fn place(&self, nodes: &[Option<u32>]) -> Option<io::Error> {
        const PAGE: u64 = 4096;
        let mut refused = None;
        for (rank, node) in nodes.iter().enumerate().take(usize::from(self.layout.ranks)) {
            let Some(node) = *node else { continue };
            for (start, end) in self.layout.owned_ranges(rank as u16) {
                // The pages whose first byte lies in [start, end).
                let (first, last) = (start.next_multiple_of(PAGE), end.next_multiple_of(PAGE).min(self.layout.total));
                if first >= last {
                    continue;
                }
                let addr = self.map.as_mut_ptr().wrapping_add(first as usize);
                // SAFETY: `first..last` lies inside our mapping of the segment (`last <= total`).
                if let Err(e) = unsafe { os::prefer_node(addr, (last - first) as usize, node) } {
                    refused.get_or_insert(e);
                }
            }
        }
        refused
    }

    fn map(fd: OwnedFd, layout: Layout, name: Option<String>) -> Result<Segment> {
        let len = usize::try_from(layout.total).map_err(|_| Error::InvalidParams("segment too large".into()))?;
        let map = memmap2::MmapOptions::new().len(len).map_raw(&fd).map_err(|e| Error::io("mmap", e))?;
        let cell_shift = layout.params.cell_size.trailing_zeros();
        let arena = SegmentArena {
            // One cell before the cell area: only ever offset by at least one cell before use.
            base: map
                .as_mut_ptr()
                .wrapping_add(layout.cells_off as usize)
                .wrapping_sub(layout.params.cell_size as usize),
            count: u32::from(layout.ranks) * layout.params.cells_per_rank,
            shift: cell_shift,
        };
        Ok(Segment { map, fd, layout, arena, name, watch: Mutex::new(Watch { enabled: true, ..Watch::default() }) })
    }

    /// Attaches to the segment behind `fd` (a descriptor inherited from the launcher), checking
    /// its header and that its size is sealed ([`Error::NotSealed`] otherwise). The descriptor
    /// becomes close-on-exec: programs this process starts do not inherit it.
    pub fn attach_fd(fd: OwnedFd) -> Result<Segment> {
        os::set_cloexec(fd.as_raw_fd())?;
        if !os::size_sealed(&fd)? {
            return Err(Error::NotSealed);
        }
        Self::attach(fd, None)
    }

    /// Attaches to the named segment `name` (published through PMI by its creator).
    pub fn attach_named(name: &str) -> Result<Segment> {
        Self::attach(os::shm_open_existing(name)?, Some(name.to_owned()))
    }

    fn attach(fd: OwnedFd, name: Option<String>) -> Result<Segment> {
        let size = os::file_size(&fd)?;
        if size < HEADER_AREA {
            return Err(Error::SizeMismatch { found: size, expected: HEADER_AREA });
        }
        let head = memmap2::MmapOptions::new()
            .len(HEADER_AREA as usize)
            .map_raw_read_only(&fd)
            .map_err(|e| Error::io("mmap", e))?;
        // SAFETY: the mapping is HEADER_AREA bytes, page-aligned, larger than `Header`.
        let h = unsafe { &*(head.as_ptr() as *const Header) };
        // ORDERING: Acquire; pairs with the creator's Release store, after the header was written.
        let magic = h.magic.load(Acquire);
        if magic != MAGIC {
            return Err(Error::BadMagic { found: magic });
        }
        if h.version != LAYOUT_VERSION {
            return Err(Error::VersionMismatch { found: h.version, expected: LAYOUT_VERSION });
        }
        let ranks = u16::try_from(h.ranks)
            .ok()
            .filter(|r| (1..=MAX_LOCAL_RANKS).contains(r))
            .ok_or(Error::corrupt("segment ranks", h.ranks))?;
        let layout = Layout::new(ranks, Params::from_words(h.params))?;
        if layout.hash() != h.layout_hash {
            return Err(Error::LayoutMismatch { found: h.layout_hash, expected: layout.hash() });
        }
        if h.total != layout.total || size != layout.total {
            return Err(Error::SizeMismatch { found: size, expected: layout.total });
        }
        drop(head);
        Self::map(fd, layout, name)
    }

    /// Checks that the segment was made for `ranks` ranks and `params` (what this process was
    /// told by the launcher or PMI).
    pub fn expect(&self, ranks: u16, params: &Params) -> Result<()> {
        let want = Layout::new(ranks, *params)?.hash();
        if want != self.layout.hash() {
            return Err(Error::LayoutMismatch { found: self.layout.hash(), expected: want });
        }
        Ok(())
    }

    /// Registers this process as local rank `rank`: marks it ALIVE and publishes its pid (for
    /// pidfd watchers), with its pid namespace and start time. For a named segment, the last rank
    /// to register unlinks the name.
    ///
    /// The rank is claimed first: a second process registering the same rank fails before it
    /// could overwrite the first one's pid (watchers would then watch the wrong process).
    pub fn register(&self, rank: u16) -> Result<()> {
        let st = self.state_of(rank)?;
        st.claim()?;
        let pid = std::process::id();
        // ORDERING: Relaxed; published by the Release store of the pid below.
        st.pidns.store(os::pid_namespace(), Relaxed);
        st.start_time.store(os::process_start_time(pid).unwrap_or(0), Relaxed);
        // ORDERING: Release; a watcher that Acquires a non-zero pid sees the namespace and start
        // time. A rank that dies before this store is never watched through a pidfd (its pid
        // stays 0); its launcher's mark still tells.
        st.pid.store(pid, Release);
        // ORDERING: AcqRel; the last registrant sees every other's registration.
        let attached = self.header().attached.fetch_add(1, AcqRel) + 1;
        if attached == u32::from(self.layout.ranks) {
            self.unlink()?;
        }
        Ok(())
    }

    /// Removes the segment's name now (named segments); the mapping stays valid. Called by the last
    /// rank to register, and by a launcher cleaning up after a failed start.
    pub fn unlink(&self) -> Result<()> {
        match &self.name {
            Some(n) => os::shm_unlink(n),
            None => Ok(()),
        }
    }

    /// The name of a named segment (as stored in its header).
    pub fn name(&self) -> Option<&str> {
        self.name.as_deref()
    }

    /// The descriptor, for passing to children (see [`Segment::inheritable_fd`]).
    pub fn fd(&self) -> RawFd {
        self.fd.as_raw_fd()
    }

    /// Makes the descriptor survive `exec` and returns it, for a launcher starting ranks.
    pub fn inheritable_fd(&self) -> Result<RawFd> {
        os::inheritable(&self.fd)?;
        Ok(self.fd.as_raw_fd())
    }

    /// The layout.
    pub fn layout(&self) -> &Layout {
        &self.layout
    }

    /// Total mapped bytes.
    pub fn len(&self) -> usize {
        self.map.len()
    }

    /// Never true: a segment has at least a header.
    pub fn is_empty(&self) -> bool {
        false
    }

    /// Turns pidfd watching of peers on or off (on by default). With our launcher the marks
    /// suffice; under other process managers the pidfds are how deaths are learnt.
    pub fn watch_pids(&self, on: bool) {
        if let Ok(mut w) = self.watch.lock() {
            w.enabled = on;
        }
    }

    /// The collectives' area `index` (`None` past [`crate::collarea::AREAS`]), for teams of up to
    /// the segment's local ranks.
    pub fn coll_area(&self, index: u32) -> Option<crate::collarea::AreaRef<'_>> {
        let base = self.coll_area_base(index)?;
        // SAFETY: `coll_area_base`'s guarantee, for as long as `self` lives.
        Some(unsafe { crate::collarea::AreaRef::in_segment(base, u32::from(self.layout.ranks)) })
    }

    /// The start of the collectives' area `index` (`None` past [`crate::collarea::AREAS`]): page
    /// aligned, `area_bytes(local ranks)` bytes inside the mapping, which lives as long as `self`
    /// (for callers that hold the area across calls that borrow the segment's owner mutably).
    pub fn coll_area_base(&self, index: u32) -> Option<*mut u8> {
        let off = self.layout.coll_area_off(index)?;
        // In bounds: the layout ends the mapping with the `AREAS` areas (checked index).
        Some(self.map.as_mut_ptr().wrapping_add(off as usize))
    }

    /// Base address of the mapping (for tests that corrupt shared state on purpose).
    #[doc(hidden)]
    pub fn base_ptr(&self) -> *mut u8 {
        self.map.as_mut_ptr()
    }

    fn header(&self) -> &Header {
        // SAFETY: the mapping starts with a page-aligned header area.
        unsafe { &*(self.map.as_ptr() as *const Header) }
    }

    /// Polls the pidfds of peers marked ALIVE and marks the exited ones GONE.
    fn sweep_pids(&self) {
        let Ok(mut w) = self.watch.try_lock() else {
            return;
        };
        if !w.enabled || w.last.is_some_and(|t| t.elapsed() < WATCH_INTERVAL) {
            return;
        }
        w.last = Some(Instant::now());
        let n = usize::from(self.layout.ranks);
        w.pidfds.resize_with(n, || None);
        let me = std::process::id();
        let my_ns = *w.pidns.get_or_insert_with(os::pid_namespace);
        for r in 0..self.layout.ranks {
            // SAFETY: `r < ranks`.
            let st = unsafe { self.rank_state(r) };
            // ORDERING: Acquire, as in `is_gone`.
            if st.state.load(Acquire) != STATE_ALIVE {
                continue;
            }
            // ORDERING: Acquire; pairs with `register`'s Release, so start time and namespace are
            // set.
            let pid = st.pid.load(Acquire);
            if pid == me || pid == 0 {
                continue;
            }
            // A pid from another pid namespace names another process here (or none): that rank
            // cannot be watched from this one (its launcher's marks still tell).
            // ORDERING: Relaxed; published before the pid.
            if st.pidns.load(Relaxed) != my_ns {
                continue;
            }
            let slot = &mut w.pidfds[usize::from(r)];
            if slot.as_ref().is_some_and(|(watched, _)| *watched != pid) {
                *slot = None;
            }
            if slot.is_none() {
                match PidFd::open(pid) {
                    Ok(Some(fd)) => {
                        // The pid may have been reused between the rank's exit and our open.
                        let want = st.start_time.load(Relaxed);
                        if want != 0 && os::process_start_time(pid) != Some(want) {
                            let _ = self.mark_gone(r, u32::MAX);
                            continue;
                        }
                        *slot = Some((pid, fd));
                    }
                    Ok(None) => {
                        let _ = self.mark_gone(r, u32::MAX);
                        continue;
                    }
                    Err(_) => continue,
                }
            }
            if slot.as_ref().is_some_and(|(_, fd)| fd.exited()) {
                let _ = self.mark_gone(r, u32::MAX);
            }
        }
    }
}

// SAFETY: every accessor computes an offset from the layout, inside the mapping, for indices the
// caller guarantees in range; the mapping lives as long as the segment.
unsafe impl Node for Segment {
    type Arena = SegmentArena;

    #[inline(always)]
    fn ranks(&self) -> u16 {
        self.layout.ranks
    }
    #[inline(always)]
    fn params(&self) -> &Params {
        &self.layout.params
    }
    #[inline(always)]
    fn arena(&self) -> &SegmentArena {
        &self.arena
    }
    #[inline(always)]
    unsafe fn queue_shared(&self, r: u16, kind: QueueKind) -> &QueueShared {
        let off = self.layout.queue_off(r, kind) as usize;
        // SAFETY: `r < ranks`, so the queue lies inside rank r's queue page, 64-byte aligned.
        unsafe { &*(self.map.as_ptr().add(off) as *const QueueShared) }
    }
    #[inline(always)]
    unsafe fn rank_state(&self, r: u16) -> &RankState {
        let off = self.layout.ranks_off as usize + usize::from(r) * crate::layout::RANK_STATE_BYTES as usize;
        // SAFETY: `r < ranks`, so the record lies inside the rank area, 64-byte aligned.
        unsafe { &*(self.map.as_ptr().add(off) as *const RankState) }
    }
    #[inline(always)]
    fn death_epoch_word(&self) -> &AtomicU64 {
        &self.header().death_epoch
    }
    #[inline(always)]
    unsafe fn fastbox(&self, receiver: u16, b: u32) -> FastboxRef<'_> {
        let p = &self.layout.params;
        let index = usize::from(receiver) * p.fastboxes_per_rank as usize + b as usize;
        let off = self.layout.fbox_off as usize + index * self.layout.fbox_bytes as usize;
        // SAFETY: the box lies inside the fastbox area (indices in range); its owner word starts
        // it, 64-byte aligned, the ack word starts the next line; slots follow, each
        // `[stamp][body]`, `fastbox_slots` of them.
        unsafe {
            let base = self.map.as_mut_ptr().add(off);
            let slots = base.add(FASTBOX_HEAD_BYTES as usize);
            FastboxRef::from_raw(
                &*(base as *const AtomicU32),
                &*(base.add(64) as *const AtomicU32),
                slots,
                p.fastbox_slot_size as usize,
                slots.add(STAMP_BYTES),
                p.fastbox_slot_size as usize,
                p.fastbox_slot_size as usize - STAMP_BYTES,
                p.fastbox_slots,
            )
        }
    }
    #[inline(always)]
    unsafe fn fastbox_map(&self, receiver: u16, sender: u16) -> &AtomicU32 {
        let i = usize::from(receiver) * usize::from(self.layout.ranks) + usize::from(sender);
        // SAFETY: both ranks are below `ranks`, so the entry lies inside the map area.
        unsafe { &*(self.map.as_ptr().add(self.layout.fbox_map_off as usize + 4 * i) as *const AtomicU32) }
    }
    fn refresh_liveness(&self) {
        self.sweep_pids();
    }
    #[inline]
    fn lmt_ring_base(&self, host: u16, index: u32) -> Option<*mut u8> {
        let p = &self.layout.params;
        if host >= self.layout.ranks || index >= p.lmt_rings_per_rank {
            return None;
        }
        let i = u64::from(host) * u64::from(p.lmt_rings_per_rank) + u64::from(index);
        let off = self.layout.lmt_off + i * p.lmt_ring_bytes();
        // In bounds: the ring area holds `ranks * lmt_rings_per_rank` rings (checked above).
        Some(self.map.as_mut_ptr().wrapping_add(off as usize))
    }
}

impl Drop for Segment {
    /// A named segment's name goes with any holder (it is idempotent): a rank whose start-up
    /// fails, or that ends before the last rank registered, leaves nothing in `/dev/shm`.
    fn drop(&mut self) {
        let _ = self.unlink();
    }
}

impl std::fmt::Debug for Segment {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Segment").field("layout", &self.layout).field("name", &self.name).finish()
    }
}
