//! The sender log: HydEE's sender-based message log (Fig 6.3 lines 8–9 and 27–29 of
//! `shared/papers/guermouche-2011-thesis-send-determinism-hydee.txt`), held in memory and spilled to a file beyond a
//! bound.
//!
//! Every message that crosses groups is logged in its sender's memory with its date and phase (T:1928), and its
//! [`Stamp`] when the driver stamps ([`SenderLog::append_stamped`], given back with a replay); an `Ack(d)`
//! from the receiver drops the entries for it dated below `d` (T:2097, strictly: the acknowledged one stays). This
//! store does I/O (the spill file) and therefore sits beside the sans-I/O engine, not inside it: the engine reads the
//! in-memory index through [`LogIndex`] and asks for replays and drops with [`Action`](crate::Action)s that the
//! driver applies here.
//!
//! Invariants:
//! - Entries to one destination are appended and dropped in date order: each destination is a FIFO, its spilled
//!   entries always a prefix, its in-memory payloads one contiguous byte run.
//! - An append is one index push and one copy of the payload into the tail chunk of the destination's arena
//!   (`log/arena.rs`: chunks zeroed once, never moved nor copied, the full-size ones faulted in at creation and handed
//!   back to a pool shared by all destinations when acknowledged; small payloads are copied with two overlapping
//!   moves rather than a call to `memcpy`). Everything unusual (an unknown rank, a date out of order, the memory
//!   bound, a payload that spans chunks) fails the one condition of the fast path.
//! - The spill file is created on first use in [`LogConfig::spill_dir`] without a name (`O_TMPFILE`, mode 0600): no
//!   other process can open it, and a crash leaves nothing behind. Where the file system refuses unnamed files, it
//!   is created under a new name (`O_EXCL | O_NOFOLLOW`, mode 0600) and unlinked at once.
//! - Space freed by drops is reclaimed when every spilled entry is gone (the file is truncated) or when dead bytes
//!   outnumber live ones past [`COMPACT_MIN`] (live entries are rewritten to a fresh file).

use std::collections::VecDeque;
use std::fs::File;
use std::os::unix::fs::FileExt;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};

use serde::{Deserialize, Serialize};

use crate::piggyback::{MAX_PHASE, Piggyback, Stamp};
use crate::{Date, Error, Phase, Rank, Result};
use arena::{Arena, Pool};

/// Read access to the log's index, which is all the protocol engine needs from the log.
pub trait LogIndex {
    /// Appends to `out` the date and phase of each message logged for `to` dated after `after`, oldest first.
    fn logged_after(&self, to: Rank, after: Date, out: &mut Vec<(Date, Phase)>);
    /// The highest date ever logged for `to` (0 if none), even if that entry has since been dropped.
    fn last_logged(&self, to: Rank) -> Date;
}

/// Where and when the log spills.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LogConfig {
    /// Payload bytes kept in memory before the oldest entries move to the spill file.
    pub memory_limit: usize,
    /// Directory of the spill file; `None` keeps everything in memory whatever its size.
    pub spill_dir: Option<PathBuf>,
    /// Payload bytes the spill file may hold; `None`: as many as the file system takes. An append
    /// that needs more is [`Error::LogExhausted`].
    pub spill_limit: Option<u64>,
}

impl Default for LogConfig {
    /// 256 MiB in memory, then the system's temporary directory. The bound is a placeholder until the transport's
    /// measurements choose one; Open MPI's sender-based logger maps a 256 MiB window by default.
    fn default() -> Self {
        LogConfig { memory_limit: 256 << 20, spill_dir: Some(std::env::temp_dir()), spill_limit: None }
    }
}

/// Spilled bytes below which a file with dead space is left as is.
pub const COMPACT_MIN: u64 = 1 << 20;

/// One logged message's index entry.
#[derive(Clone, Copy, Debug)]
struct Entry {
    date: Date,
    /// The piggyback's phase word as the send returned it (the release tag in bits 56..64, masked off on reading:
    /// storing the word as it is saves the append a mask).
    phase_tag: u64,
    /// Position just past the payload in the channel's byte stream (every payload byte ever logged for this
    /// destination, in order); the payload starts where the previous entry ended.
    end: u64,
    /// The message's [`Stamp`] as sent ([`Stamp::NONE`] if the driver does not stamp).
    stamp: Stamp,
}

/// The log of the messages sent to one destination.
#[derive(Debug, Default)]
struct Channel {
    /// Live entries are `entries[head..]`, dates strictly ascending; the dead prefix is compacted away lazily.
    entries: Vec<Entry>,
    head: usize,
    /// Stream position where `entries[head]`'s payload starts.
    start: u64,
    /// `entries[head..head + spilled]` have their payloads in the spill file, at the offsets in `file_at`.
    spilled: usize,
    file_at: VecDeque<u64>,
    /// The payloads of the in-memory entries, stream positions `arena.head..arena.end()`, in chunks; the next one
    /// goes at `arena.fill` in the tail chunk `arena.bytes`. Full chunks go back to the log's pool when acknowledged;
    /// an empty channel writes its tail from 0 again.
    arena: Arena,
    /// The highest date ever appended (kept after the entry is dropped).
    last_date: Date,
}

impl Entry {
    fn phase(&self) -> Phase {
        self.phase_tag & MAX_PHASE
    }
}

impl Channel {
    /// Stream range of live entry `i` (an index into `entries`).
    fn range(&self, i: usize) -> (u64, u64) {
        let start = if i == self.head { self.start } else { self.entries[i - 1].end };
        (start, self.entries[i].end)
    }

    fn live(&self) -> &[Entry] {
        &self.entries[self.head..]
    }

    fn memory(&self) -> usize {
        self.arena.memory()
    }

    /// Drops the index's dead prefix once it outweighs the live part (amortised O(1) per entry), and gives the
    /// chunks that hold only dropped payloads back to `pool` (an arena with nothing live rewinds).
    fn compact(&mut self, pool: &mut Pool) {
        if self.head > 64 && self.head * 2 > self.entries.len() {
            self.entries.drain(..self.head);
            self.head = 0;
        }
        let to =
            if self.spilled < self.live().len() { self.range(self.head + self.spilled).0 } else { self.arena.end() };
        self.arena.release(to, pool);
    }

    /// [`Channel::try_push`] off its fast path: the payload does not fit in the tail chunk.
    #[cold]
    fn push_spanning(&mut self, pb: Piggyback, stamp: Stamp, head: &[u8], payload: &[u8], pool: &mut Pool) {
        self.arena.write_spanning([head, payload], pool);
        self.entries.push(Entry { date: pb.date(), phase_tag: pb.phase_tag(), end: self.arena.end(), stamp });
        self.last_date = pb.date();
    }

    /// Copies `head` then `payload` to the tail chunk at `fill` if they fit and indexes them as one entry; false
    /// (and nothing changed) if they do not.
    #[inline(always)]
    fn try_push(&mut self, pb: Piggyback, stamp: Stamp, head: &[u8], payload: &[u8]) -> bool {
        let a = &mut self.arena;
        let mid = a.fill + head.len();
        let fill = mid + payload.len();
        let Some(dst) = a.bytes.get_mut(a.fill..fill) else {
            return false;
        };
        // The bookkeeping first, from registers, the copy last: once inlined, LLVM cannot tell the payload's byte
        // stores from the channel's fields and would load them again after the copy.
        a.fill = fill;
        self.entries.push(Entry { date: pb.date(), phase_tag: pb.phase_tag(), end: a.base + fill as u64, stamp });
        self.last_date = pb.date();
        let (h, p) = dst.split_at_mut(head.len());
        // An empty head (every call of `append`) is known at compile time: no code.
        if !head.is_empty() {
            copy_payload(h, head);
        }
        copy_payload(p, payload);
        true
    }
}

/// `dst.copy_from_slice(src)` for slices of equal length, without a call to `memcpy` up to 16 bytes: at these sizes
/// the call and glibc's size dispatch cost several times the copy. Two overlapping moves of the widest size that
/// fits cover every length from 4 to 16, three byte moves 1 to 3 (the idea of `nemesis_shm::cell::copy_bytes`,
/// written here on slices: no `unsafe`, and `ft` stays free of shared-memory code).
#[inline(always)]
fn copy_payload(dst: &mut [u8], src: &[u8]) {
    let n = src.len();
    if n.wrapping_sub(8) <= 8 {
        // 8..=16 bytes: the first 8 and the last 8.
        if let (Some(a), Some(b), Some(d)) = (src.first_chunk::<8>(), src.last_chunk::<8>(), dst.first_chunk_mut::<8>())
        {
            *d = *a;
            if let Some(d) = dst.last_chunk_mut::<8>() {
                *d = *b;
            }
        }
    } else if n > 16 {
        dst.copy_from_slice(src);
    } else if n >= 4 {
        if let (Some(a), Some(b), Some(d)) = (src.first_chunk::<4>(), src.last_chunk::<4>(), dst.first_chunk_mut::<4>())
        {
            *d = *a;
            if let Some(d) = dst.last_chunk_mut::<4>() {
                *d = *b;
            }
        }
    } else if let (Some(&a), Some(&b), Some(d)) = (src.first(), src.last(), dst.first_mut()) {
        // 1..=3 bytes: first, middle and last.
        *d = a;
        if let (Some(&m), Some(d)) = (src.get(n / 2), dst.get_mut(n / 2)) {
            *d = m;
        }
        if let Some(d) = dst.last_mut() {
            *d = b;
        }
    }
}

/// The spill file.
#[derive(Debug)]
struct Spill {
    file: File,
    /// Bytes written so far; the next payload goes here.
    end: u64,
    /// Bytes of payloads still referenced by an entry; `live <= end`.
    live: u64,
}

static SPILL_COUNTER: AtomicU64 = AtomicU64::new(0);

/// Tries of [`Spill::create_named`] before it gives up on finding a free name.
const NAME_TRIES: u64 = 16;

impl Spill {
    /// A file in `dir` that no other process can open: an unnamed one (`O_TMPFILE`, mode 0600),
    /// or where the file system refuses those, [`Spill::create_named`].
    fn create(dir: &std::path::Path) -> Result<Spill> {
        use std::os::unix::fs::OpenOptionsExt;
        let unnamed = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .mode(0o600)
            .custom_flags(libc::O_TMPFILE | libc::O_CLOEXEC)
            .open(dir);
        match unnamed {
            Ok(file) => Ok(Spill { file, end: 0, live: 0 }),
            // Not supported by the kernel (EISDIR: it took O_DIRECTORY alone) or by the file
            // system (EOPNOTSUPP).
            Err(e) if matches!(e.raw_os_error(), Some(libc::EOPNOTSUPP | libc::EISDIR | libc::EINVAL)) => {
                Self::create_named(dir)
            }
            Err(e) => Err(e.into()),
        }
    }

    /// The fallback: a new name (`O_CREAT | O_EXCL | O_NOFOLLOW`: never an existing file nor a
    /// link planted there), mode 0600 from its creation, unlinked at once. A crash cannot leave
    /// it behind, and while it has a name only its owner may open it.
    fn create_named(dir: &std::path::Path) -> Result<Spill> {
        use std::os::unix::fs::OpenOptionsExt;
        let mut last = None;
        for _ in 0..NAME_TRIES {
            // Relaxed: the counter only makes names unique within this process.
            let n = SPILL_COUNTER.fetch_add(1, Ordering::Relaxed);
            let path = dir.join(format!("nemesis-ft-log-{}-{n}.spill", std::process::id()));
            let created = std::fs::OpenOptions::new()
                .read(true)
                .write(true)
                .create_new(true)
                .mode(0o600)
                .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC)
                .open(&path);
            match created {
                Ok(file) => {
                    std::fs::remove_file(&path)?;
                    return Ok(Spill { file, end: 0, live: 0 });
                }
                // Someone else's file or link under that name: another one.
                Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => last = Some(e),
                Err(e) => return Err(e.into()),
            }
        }
        Err(last.unwrap_or_else(|| std::io::Error::other("no free spill file name")).into())
    }
}

/// The sender log of one process.
///
/// ```
/// use nemesis_ft::{LogConfig, Piggyback, SenderLog};
/// let mut log = SenderLog::new(4, LogConfig { memory_limit: 1 << 20, spill_dir: None, spill_limit: None });
/// log.append(2, Piggyback::new(5, 1, None)?, b"halo")?;
/// let mut payload = Vec::new();
/// assert_eq!(log.read(2, 5, &mut payload)?.phase(), 1);
/// assert_eq!(payload, b"halo");
/// log.discard_before(2, 6);
/// assert_eq!(log.len(2), 0);
/// # Ok::<(), nemesis_ft::Error>(())
/// ```
#[derive(Debug)]
pub struct SenderLog {
    /// Fixed at creation.
    config: LogConfig,
    /// Indexed by destination rank.
    channels: Vec<Channel>,
    /// Payload bytes held in memory: the sum of the channels' `memory()`.
    memory: usize,
    /// Created on the first spill.
    spill: Option<Spill>,
    /// Full-size payload chunks freed by the garbage collection, for the next appends of any destination.
    pool: Pool,
}

/// A logged message as saved in a checkpoint.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct LoggedMessage {
    pub date: Date,
    pub phase: Phase,
    pub payload: Vec<u8>,
}

/// The log's content, for the group checkpoint (Fig 6.3 line 25 saves the log with the process image).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct LogSnapshot {
    /// `(destination, highest date ever logged for it, its entries oldest first)`, for destinations with either.
    pub channels: Vec<(Rank, Date, Vec<LoggedMessage>)>,
}

impl SenderLog {
    /// An empty log for a job of `ranks` ranks.
    pub fn new(ranks: usize, config: LogConfig) -> SenderLog {
        SenderLog {
            config,
            channels: (0..ranks).map(|_| Channel::default()).collect(),
            memory: 0,
            spill: None,
            pool: Pool::default(),
        }
    }

    fn channel(&self, to: Rank) -> Result<&Channel> {
        self.channels.get(to as usize).ok_or(Error::UnknownRank { rank: to, ranks: self.channels.len() })
    }

    /// Logs `payload` sent to `to` with piggyback `pb` (the caller's one copy on an inter-group send).
    ///
    /// The fast path is the copy into the destination's arena and an index push; its one condition covers
    /// everything unusual (an unknown rank, a date out of order, the memory bound reached, an arena to grow).
    /// Always inlined: called once per inter-group send, the call alone would cost about as much as the fast path
    /// (measured: 25 instructions of saves, restores and result passing).
    #[inline(always)]
    pub fn append(&mut self, to: Rank, pb: Piggyback, payload: &[u8]) -> Result<()> {
        self.append_parts(to, pb, &[], payload)
    }

    /// [`SenderLog::append`] of the bytes of `head` followed by those of `payload`, as one entry (a transport
    /// puts the envelope a replay needs in front of the message: [`SenderLog::read`] gives both back).
    #[inline(always)]
    pub fn append_parts(&mut self, to: Rank, pb: Piggyback, head: &[u8], payload: &[u8]) -> Result<()> {
        self.append_stamped(to, pb, Stamp::NONE, head, payload)
    }

    /// [`SenderLog::append_parts`] of a stamped message: the [`Stamp`] is kept with the entry, for
    /// [`SenderLog::read_stamped`] to give back with a replay.
    #[inline(always)]
    pub fn append_stamped(&mut self, to: Rank, pb: Piggyback, stamp: Stamp, head: &[u8], payload: &[u8]) -> Result<()> {
        // No overflow: the terms count bytes of live allocations.
        let memory = self.memory + head.len() + payload.len();
        if memory <= self.config.memory_limit
            && let Some(ch) = self.channels.get_mut(to as usize)
            && pb.date() > ch.last_date
            && ch.try_push(pb, stamp, head, payload)
        {
            self.memory = memory;
            return Ok(());
        }
        self.append_checked(to, pb, stamp, head, payload)
    }

    /// [`SenderLog::append_parts`] off its fast path: the errors, a full arena, the spill.
    #[cold]
    #[inline(never)]
    fn append_checked(&mut self, to: Rank, pb: Piggyback, stamp: Stamp, head: &[u8], payload: &[u8]) -> Result<()> {
        let ranks = self.channels.len();
        let Some(ch) = self.channels.get_mut(to as usize) else {
            return Err(Error::UnknownRank { rank: to, ranks });
        };
        let date = pb.date();
        if date <= ch.last_date {
            return Err(Error::LogOutOfOrder { to, date, last: ch.last_date });
        }
        let len = head.len() + payload.len();
        if !ch.try_push(pb, stamp, head, payload) {
            ch.push_spanning(pb, stamp, head, payload, &mut self.pool);
        }
        self.memory += len;
        if self.memory > self.config.memory_limit {
            return self.spill_oldest();
        }
        Ok(())
    }

    /// Moves the oldest in-memory entries of the fullest channels to the spill file until memory is back to three
    /// quarters of the bound (the slack keeps every append past the bound from paying for a spill).
    #[cold]
    #[inline(never)]
    fn spill_oldest(&mut self) -> Result<()> {
        let Some(dir) = self.config.spill_dir.as_deref() else {
            return Ok(());
        };
        let spill = match &mut self.spill {
            Some(s) => s,
            slot @ None => slot.insert(Spill::create(dir)?),
        };
        let target = self.config.memory_limit - self.config.memory_limit / 4;
        while self.memory > target {
            let Some((_, to)) = self.channels.iter().enumerate().map(|(i, c)| (c.memory(), i)).max() else {
                break;
            };
            let ch = &mut self.channels[to];
            // A run of this channel's oldest in-memory entries, written with one call.
            let first = ch.head + ch.spilled;
            let mut last = first;
            let mut moved = 0u64;
            while last < ch.entries.len() && self.memory - moved as usize > target {
                let (a, b) = ch.range(last);
                moved += b - a;
                last += 1;
            }
            if last == first {
                break;
            }
            if let Some(max) = self.config.spill_limit
                && spill.live + moved > max
            {
                return Err(Error::LogExhausted { memory_limit: self.config.memory_limit, spill_limit: max });
            }
            let from = ch.arena.head;
            let mut at = spill.end;
            let mut written = Ok(());
            ch.arena.segments(from, from + moved, |run| {
                if written.is_ok() {
                    written = spill.file.write_all_at(run, at);
                    at += run.len() as u64;
                }
            });
            written?;
            for i in first..last {
                let (a, _) = ch.range(i);
                ch.file_at.push_back(spill.end + (a - from));
            }
            spill.end += moved;
            spill.live += moved;
            ch.spilled += last - first;
            self.memory -= moved as usize;
            ch.compact(&mut self.pool);
        }
        Ok(())
    }

    /// Drops the entries for `to` dated below `before` (an `Ack(before)`, or a restart that proved them held by
    /// the destination's checkpoint).
    pub fn discard_before(&mut self, to: Rank, before: Date) {
        let Some(ch) = self.channels.get_mut(to as usize) else {
            return;
        };
        while ch.head < ch.entries.len() && ch.entries[ch.head].date < before {
            let (a, b) = ch.range(ch.head);
            let len = b - a;
            if ch.spilled > 0 {
                ch.spilled -= 1;
                ch.file_at.pop_front();
                if let Some(s) = self.spill.as_mut() {
                    s.live -= len;
                }
            } else {
                self.memory -= len as usize;
            }
            ch.start = b;
            ch.head += 1;
        }
        ch.compact(&mut self.pool);
        if let Some(s) = self.spill.as_mut()
            && s.live == 0
            && s.end > 0
            && s.file.set_len(0).is_ok()
        {
            s.end = 0;
        } else if self.spill.as_ref().is_some_and(|s| s.end > COMPACT_MIN && s.end > 2 * s.live) {
            // A failed compaction leaves the old file in use: only space is lost.
            let _ = self.compact_spill();
        }
    }

    /// Rewrites the live spilled payloads into a fresh file.
    #[cold]
    fn compact_spill(&mut self) -> Result<()> {
        let (Some(dir), Some(old)) = (self.config.spill_dir.as_deref(), self.spill.as_ref()) else {
            return Ok(());
        };
        let mut fresh = Spill::create(dir)?;
        let mut buf = Vec::new();
        let mut moved: Vec<Vec<u64>> = Vec::with_capacity(self.channels.len());
        for ch in &self.channels {
            let mut offsets = Vec::with_capacity(ch.spilled);
            for k in 0..ch.spilled {
                let (a, b) = ch.range(ch.head + k);
                buf.resize((b - a) as usize, 0);
                old.file.read_exact_at(&mut buf, ch.file_at[k])?;
                fresh.file.write_all_at(&buf, fresh.end)?;
                offsets.push(fresh.end);
                fresh.end += b - a;
            }
            moved.push(offsets);
        }
        fresh.live = fresh.end;
        for (ch, offsets) in self.channels.iter_mut().zip(moved) {
            ch.file_at = offsets.into();
        }
        self.spill = Some(fresh);
        Ok(())
    }

    /// Copies the payload logged for `to` at `date` into `out` (replacing its content) and returns the entry's
    /// piggyback as sent.
    pub fn read(&self, to: Rank, date: Date, out: &mut Vec<u8>) -> Result<Piggyback> {
        self.read_stamped(to, date, out).map(|(pb, _)| pb)
    }

    /// [`SenderLog::read`], with the entry's [`Stamp`] ([`Stamp::NONE`] if it was appended unstamped). A replay
    /// carries it, and the restarted receiver checks the payload against its digest and its place in sequence.
    pub fn read_stamped(&self, to: Rank, date: Date, out: &mut Vec<u8>) -> Result<(Piggyback, Stamp)> {
        let ch = self.channel(to)?;
        let k = ch.live().binary_search_by_key(&date, |e| e.date).map_err(|_| Error::LogEntryMissing { to, date })?;
        let i = ch.head + k;
        let (a, b) = ch.range(i);
        out.clear();
        if k < ch.spilled {
            let spill = self.spill.as_ref().ok_or(Error::LogEntryMissing { to, date })?;
            out.resize((b - a) as usize, 0);
            spill.file.read_exact_at(out, ch.file_at[k])?;
        } else {
            out.reserve((b - a) as usize);
            ch.arena.segments(a, b, |run| out.extend_from_slice(run));
        }
        Ok((Piggyback::from_parts(date, ch.entries[i].phase(), 0), ch.entries[i].stamp))
    }

    /// Number of entries logged for `to` (0 for an unknown rank).
    pub fn len(&self, to: Rank) -> usize {
        self.channel(to).map_or(0, |c| c.live().len())
    }

    /// Whether no entry is logged for any destination.
    pub fn is_empty(&self) -> bool {
        self.channels.iter().all(|c| c.live().is_empty())
    }

    /// Dates and phases of the entries for `to`, oldest first.
    pub fn entries(&self, to: Rank) -> Vec<(Date, Phase)> {
        let mut out = Vec::new();
        self.logged_after(to, 0, &mut out);
        out
    }

    /// Payload bytes held in memory.
    pub fn memory_bytes(&self) -> usize {
        self.memory
    }

    /// Payload bytes held in the spill file.
    pub fn spilled_bytes(&self) -> u64 {
        self.spill.as_ref().map_or(0, |s| s.live)
    }

    /// Size of the spill file, dead space included.
    pub fn spill_file_bytes(&self) -> u64 {
        self.spill.as_ref().map_or(0, |s| s.end)
    }

    /// The log's content for a checkpoint (spilled payloads are read back).
    pub fn snapshot(&self) -> Result<LogSnapshot> {
        let mut channels = Vec::new();
        let mut buf = Vec::new();
        for (to, ch) in self.channels.iter().enumerate() {
            if ch.last_date == 0 && ch.live().is_empty() {
                continue;
            }
            let to = to as Rank;
            let mut entries = Vec::with_capacity(ch.live().len());
            for e in ch.live() {
                self.read(to, e.date, &mut buf)?;
                entries.push(LoggedMessage { date: e.date, phase: e.phase(), payload: buf.clone() });
            }
            channels.push((to, ch.last_date, entries));
        }
        Ok(LogSnapshot { channels })
    }

    /// [`SenderLog::restore`] for a driver that stamps: each entry's digest is computed again from its bytes (the
    /// envelope and payload as appended: [`digest`](crate::digest::digest) does not depend on where they were
    /// split), and the entries for each destination `to` are numbered back from `sent(to)`, the number of messages
    /// the restored process had sent it ([`Process::sent_to`](crate::Process::sent_to)): the live entries for a
    /// destination of another group are always its latest messages, in order (a regenerated message is logged
    /// unless an acknowledgement already covered it, and then so were all those before it).
    pub fn restore_stamped(
        ranks: usize,
        config: LogConfig,
        snapshot: &LogSnapshot,
        sent: impl Fn(Rank) -> u64,
    ) -> Result<SenderLog> {
        let mut log = SenderLog::restore(ranks, config, snapshot)?;
        for (to, _, entries) in &snapshot.channels {
            let last = sent(*to);
            let n = entries.len() as u64;
            if n > last {
                return Err(Error::InvalidCheckpoint("more messages logged for a rank than were sent to it"));
            }
            let stamps: Vec<Stamp> = entries
                .iter()
                .zip(last - n + 1..)
                .map(|(m, seq)| Stamp { seq, digest: crate::digest::digest(&m.payload, &[]) })
                .collect();
            let ch = log.channels.get_mut(*to as usize).ok_or(Error::UnknownRank { rank: *to, ranks })?;
            for (e, s) in ch.entries[ch.head..].iter_mut().zip(stamps) {
                e.stamp = s;
            }
        }
        Ok(log)
    }

    /// A log holding `snapshot`'s content (spilling as `config` says).
    pub fn restore(ranks: usize, config: LogConfig, snapshot: &LogSnapshot) -> Result<SenderLog> {
        let mut log = SenderLog::new(ranks, config);
        for (to, last, entries) in &snapshot.channels {
            for m in entries {
                let pb = Piggyback::new(m.date, m.phase, None)?;
                log.append(*to, pb, &m.payload)?;
            }
            let ch = log.channels.get_mut(*to as usize).ok_or(Error::UnknownRank { rank: *to, ranks })?;
            if *last < ch.last_date {
                return Err(Error::LogOutOfOrder { to: *to, date: *last, last: ch.last_date });
            }
            ch.last_date = *last;
        }
        Ok(log)
    }
}

impl LogIndex for SenderLog {
    fn logged_after(&self, to: Rank, after: Date, out: &mut Vec<(Date, Phase)>) {
        if let Ok(ch) = self.channel(to) {
            let live = ch.live();
            let first = live.partition_point(|e| e.date <= after);
            out.extend(live[first..].iter().map(|e| (e.date, e.phase())));
        }
    }

    fn last_logged(&self, to: Rank) -> Date {
        self.channel(to).map_or(0, |c| c.last_date)
    }
}

mod arena;
#[cfg(test)]
mod tests;
