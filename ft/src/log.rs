//! The sender log: HydEE's sender-based message log (Fig 6.3 lines 8–9 and 27–29 of
//! `guermouche-2011-thesis-send-determinism-hydee.txt`), held in memory and spilled to a file beyond a bound.
//!
//! Every message that crosses groups is logged in its sender's memory with its date and phase (T:1928); an
//! `Ack(d)` from the receiver drops the entries for it dated below `d` (T:2097, strictly: the acknowledged one
//! stays). Entries to one destination are appended and dropped in date order, so each destination is a FIFO:
//! its spilled entries always form a prefix, its in-memory payloads one contiguous byte run. An append is one
//! index push and one copy of the payload into a growable buffer whose capacity survives garbage collection.
//!
//! This store does I/O (the spill file) and therefore sits beside the sans-I/O engine, not inside it: the engine
//! reads the in-memory index through [`LogIndex`] and asks for replays and drops with
//! [`Action`](crate::Action)s that the driver applies here.
//!
//! The spill file is created on first use in [`LogConfig::spill_dir`] and unlinked at once, so a crash leaves
//! nothing behind. Space freed by drops is reclaimed when every spilled entry is gone (the file is truncated) or
//! when dead bytes outnumber live ones past [`COMPACT_MIN`] (live entries are rewritten to a fresh file).

use std::collections::VecDeque;
use std::fs::File;
use std::os::unix::fs::FileExt;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};

use serde::{Deserialize, Serialize};

use crate::piggyback::Piggyback;
use crate::{Date, Error, Phase, Rank, Result};

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
}

impl Default for LogConfig {
    /// 256 MiB in memory, then the system's temporary directory. The bound is a placeholder until the transport's
    /// measurements choose one; Open MPI's sender-based logger maps a 256 MiB window by default.
    fn default() -> Self {
        LogConfig { memory_limit: 256 << 20, spill_dir: Some(std::env::temp_dir()) }
    }
}

/// Spilled bytes below which a file with dead space is left as is.
pub const COMPACT_MIN: u64 = 1 << 20;

/// One logged message's index entry.
#[derive(Clone, Copy, Debug)]
struct Entry {
    date: Date,
    phase: Phase,
    /// Position just past the payload in the channel's byte stream (every payload byte ever logged for this
    /// destination, in order); the payload starts where the previous entry ended.
    end: u64,
}

/// The log of the messages sent to one destination.
#[derive(Debug, Default)]
struct Channel {
    /// Live entries are `entries[head..]`, dates strictly ascending; the dead prefix is compacted away lazily.
    entries: Vec<Entry>,
    head: usize,
    /// Stream position where `entries[head]`'s payload starts.
    start: u64,
    /// Stream position past the last payload appended.
    end: u64,
    /// `entries[head..head + spilled]` have their payloads in the spill file, at the offsets in `file_at`.
    spilled: usize,
    file_at: VecDeque<u64>,
    /// Payloads of the in-memory entries are `bytes[byte_head..]`, from stream position `mem_start` on.
    bytes: Vec<u8>,
    byte_head: usize,
    mem_start: u64,
    /// The highest date ever appended (kept after the entry is dropped).
    last_date: Date,
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
        self.bytes.len() - self.byte_head
    }

    /// Drops the dead prefixes once they outweigh the live parts (amortised O(1) per entry).
    fn compact(&mut self) {
        if self.head > 64 && self.head * 2 > self.entries.len() {
            self.entries.drain(..self.head);
            self.head = 0;
        }
        if self.byte_head > 4096 && self.byte_head * 2 > self.bytes.len() {
            self.bytes.drain(..self.byte_head);
            self.byte_head = 0;
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

impl Spill {
    fn create(dir: &std::path::Path) -> Result<Spill> {
        // Relaxed: the counter only makes names unique within this process.
        let n = SPILL_COUNTER.fetch_add(1, Ordering::Relaxed);
        let path = dir.join(format!("nemesis-ft-log-{}-{n}.spill", std::process::id()));
        let file = std::fs::OpenOptions::new().read(true).write(true).create_new(true).open(&path)?;
        // Unlinked at once: the descriptor keeps it alive, a crash cannot leave it behind.
        std::fs::remove_file(&path)?;
        Ok(Spill { file, end: 0, live: 0 })
    }
}

/// The sender log of one process.
///
/// ```
/// use nemesis_ft::{LogConfig, Piggyback, SenderLog};
/// let mut log = SenderLog::new(4, LogConfig { memory_limit: 1 << 20, spill_dir: None });
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
        SenderLog { config, channels: (0..ranks).map(|_| Channel::default()).collect(), memory: 0, spill: None }
    }

    fn channel(&self, to: Rank) -> Result<&Channel> {
        self.channels.get(to as usize).ok_or(Error::UnknownRank { rank: to, ranks: self.channels.len() })
    }

    /// Logs `payload` sent to `to` with piggyback `pb` (the caller's one copy on an inter-group send).
    #[inline]
    pub fn append(&mut self, to: Rank, pb: Piggyback, payload: &[u8]) -> Result<()> {
        let ranks = self.channels.len();
        let Some(ch) = self.channels.get_mut(to as usize) else {
            return Err(Error::UnknownRank { rank: to, ranks });
        };
        let date = pb.date();
        if date <= ch.last_date {
            return Err(Error::LogOutOfOrder { to, date, last: ch.last_date });
        }
        ch.end += payload.len() as u64;
        ch.entries.push(Entry { date, phase: pb.phase(), end: ch.end });
        ch.bytes.extend_from_slice(payload);
        ch.last_date = date;
        self.memory += payload.len();
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
            let run = &ch.bytes[ch.byte_head..ch.byte_head + moved as usize];
            spill.file.write_all_at(run, spill.end)?;
            for i in first..last {
                let (a, _) = ch.range(i);
                ch.file_at.push_back(spill.end + (a - ch.mem_start));
            }
            spill.end += moved;
            spill.live += moved;
            ch.spilled += last - first;
            ch.byte_head += moved as usize;
            ch.mem_start += moved;
            self.memory -= moved as usize;
            ch.compact();
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
                ch.byte_head += len as usize;
                ch.mem_start += len;
                self.memory -= len as usize;
            }
            ch.start = b;
            ch.head += 1;
        }
        ch.compact();
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
            let at = ch.byte_head + (a - ch.mem_start) as usize;
            out.extend_from_slice(&ch.bytes[at..at + (b - a) as usize]);
        }
        Ok(Piggyback::from_parts(date, ch.entries[i].phase, 0))
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
                entries.push(LoggedMessage { date: e.date, phase: e.phase, payload: buf.clone() });
            }
            channels.push((to, ch.last_date, entries));
        }
        Ok(LogSnapshot { channels })
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
            out.extend(live[first..].iter().map(|e| (e.date, e.phase)));
        }
    }

    fn last_logged(&self, to: Rank) -> Date {
        self.channel(to).map_or(0, |c| c.last_date)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn pb(date: Date, phase: Phase) -> Piggyback {
        Piggyback::new(date, phase, None).unwrap()
    }

    fn payload(date: Date) -> Vec<u8> {
        (0..(date % 37 + 1)).map(|i| (date as u8).wrapping_mul(31).wrapping_add(i as u8)).collect()
    }

    #[test]
    fn ack_drops_strictly_older_entries() {
        let mut log = SenderLog::new(3, LogConfig { memory_limit: 1 << 20, spill_dir: None });
        for d in [2, 4, 6, 8] {
            log.append(1, pb(d, 1), &payload(d)).unwrap();
        }
        log.discard_before(1, 6);
        assert_eq!(log.entries(1), vec![(6, 1), (8, 1)]);
        let mut out = Vec::new();
        log.read(1, 6, &mut out).unwrap();
        assert_eq!(out, payload(6));
        assert!(matches!(log.read(1, 4, &mut out), Err(Error::LogEntryMissing { .. })));
        assert_eq!(log.last_logged(1), 8);
        log.discard_before(1, 100);
        assert!(log.is_empty());
        assert_eq!(log.last_logged(1), 8, "the highest date survives garbage collection");
        assert_eq!(log.memory_bytes(), 0);
    }

    #[test]
    fn out_of_order_and_unknown_ranks_are_errors() {
        let mut log = SenderLog::new(2, LogConfig { memory_limit: 1 << 20, spill_dir: None });
        log.append(0, pb(5, 1), b"x").unwrap();
        assert!(matches!(log.append(0, pb(5, 1), b"y"), Err(Error::LogOutOfOrder { .. })));
        assert!(matches!(log.append(2, pb(9, 1), b"y"), Err(Error::UnknownRank { .. })));
        assert!(matches!(log.read(7, 1, &mut Vec::new()), Err(Error::UnknownRank { .. })));
    }

    #[test]
    fn spills_beyond_the_bound_and_reads_back() {
        let dir = std::env::temp_dir();
        let mut log = SenderLog::new(4, LogConfig { memory_limit: 200, spill_dir: Some(dir) });
        for d in 1..=60 {
            log.append((d % 3) as Rank, pb(d, d / 10 + 1), &payload(d)).unwrap();
            assert!(log.memory_bytes() <= 200);
        }
        assert!(log.spilled_bytes() > 0);
        let mut out = Vec::new();
        for d in 1..=60 {
            let got = log.read((d % 3) as Rank, d, &mut out).unwrap();
            assert_eq!(got.phase(), d / 10 + 1);
            assert_eq!(out, payload(d), "date {d}");
        }
        for to in 0..3 {
            log.discard_before(to, 1000);
        }
        assert_eq!(log.spilled_bytes(), 0);
        assert_eq!(log.spill_file_bytes(), 0, "an empty spill is truncated");
    }

    #[test]
    fn snapshot_round_trips_through_serde() {
        let mut log = SenderLog::new(3, LogConfig { memory_limit: 50, spill_dir: Some(std::env::temp_dir()) });
        for d in 1..=20 {
            log.append((d % 2) as Rank, pb(d, 1 + d / 7), &payload(d)).unwrap();
        }
        log.discard_before(0, 9);
        let snap = log.snapshot().unwrap();
        let json = serde_json::to_string(&snap).unwrap();
        let back: LogSnapshot = serde_json::from_str(&json).unwrap();
        let restored = SenderLog::restore(3, LogConfig { memory_limit: 1 << 20, spill_dir: None }, &back).unwrap();
        for to in 0..3 {
            assert_eq!(restored.entries(to), log.entries(to));
            assert_eq!(restored.last_logged(to), log.last_logged(to));
        }
        let (mut a, mut b) = (Vec::new(), Vec::new());
        for (d, _) in log.entries(1) {
            log.read(1, d, &mut a).unwrap();
            restored.read(1, d, &mut b).unwrap();
            assert_eq!(a, b);
        }
    }

    proptest! {
        /// The store agrees with a plain model under random appends, drops and spill bounds.
        #[test]
        fn matches_a_model(ops in proptest::collection::vec((0u32..3, any::<bool>(), 0u64..6), 1..120), limit in 0usize..300) {
            let mut log = SenderLog::new(3, LogConfig { memory_limit: limit, spill_dir: Some(std::env::temp_dir()) });
            let mut model: Vec<Vec<(Date, Vec<u8>)>> = vec![Vec::new(); 3];
            let mut date = 0;
            for (to, append, back) in ops {
                if append {
                    date += 1;
                    log.append(to, pb(date, 1), &payload(date)).unwrap();
                    model[to as usize].push((date, payload(date)));
                } else {
                    let before = date.saturating_sub(back);
                    log.discard_before(to, before);
                    model[to as usize].retain(|(d, _)| *d >= before);
                }
                prop_assert!(log.memory_bytes() <= limit);
            }
            let mut out = Vec::new();
            for to in 0..3u32 {
                let dates: Vec<Date> = log.entries(to).into_iter().map(|e| e.0).collect();
                let want: Vec<Date> = model[to as usize].iter().map(|e| e.0).collect();
                prop_assert_eq!(dates, want);
                for (d, p) in &model[to as usize] {
                    log.read(to, *d, &mut out).unwrap();
                    prop_assert_eq!(&out, p);
                }
            }
        }
    }
}
