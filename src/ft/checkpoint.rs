//! Checkpoint files: one per rank and generation, written atomically (temporary file, `fsync`,
//! `rename`, `fsync` of the directory) and checked on reading (a torn or corrupt file is refused,
//! never loaded).
//!
//! A file `nemesis-ckpt-<job>-<rank>-<generation>.nft` holds, little-endian:
//!
//! | offset | bytes | field |
//! |---|---|---|
//! | 0 | 8 | magic `NEMFTCK\0` |
//! | 8 | 4 | format version ([`VERSION`]) |
//! | 12 | 4 | 0 |
//! | 16 | 8 | job key (the FNV-1a hash of the job's id) |
//! | 24 | 4 | rank |
//! | 28 | 4 | group |
//! | 32 | 8 | generation (from 1) |
//! | 40 | 4 | ranks in the job |
//! | 44 | 4 | 0 |
//! | 48 | 8 | `a`: bytes of the application state |
//! | 56 | 8 | `f`: bytes of the fault-tolerance image |
//! | 64 | `a` | the application state, as the application gave it |
//! | 64 + `a` | `f` | the [`FtImage`] (postcard): the engine's `checkpoint()`, the log's `snapshot()`, the messages that had arrived and were not yet received |
//! | 64 + `a` + `f` | 8 | XXH64 of every byte before it |
//!
//! The group's generations: a rank removes its previous generation only once every member of its
//! group has made the new one durable (the Endpoint's checkpoint protocol), so after a failure the
//! newest generation that every member holds, valid, is the group's last durable checkpoint
//! ([`latest_durable`]).

use std::fs::{File, OpenOptions};
use std::io::Write;
use std::path::{Path, PathBuf};

use nemesis_ft::{Delivery, GroupId, LogSnapshot, ProcessState, Rank};
use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};

/// The file's magic bytes.
pub const MAGIC: [u8; 8] = *b"NEMFTCK\0";
/// Version of the layout above.
pub const VERSION: u32 = 1;
/// Bytes before the application state.
pub const HEADER: usize = 64;
/// Bytes of the trailing checksum.
pub const TRAILER: usize = 8;

/// A message that had arrived and that the application had not received when the checkpoint was
/// taken: part of the rank's state (its arrival is recorded in the engine's state).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct SavedMessage {
    pub source: u32,
    pub tag: i32,
    pub context: u32,
    pub data: Vec<u8>,
    /// A synchronous send's token, acknowledged when a receive takes the message.
    pub sync: Option<u32>,
    /// What delivering it does to the receiving process (`None` only without fault tolerance).
    pub delivery: Option<Delivery>,
}

/// What the transport adds to the application state.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct FtImage {
    pub process: ProcessState,
    pub log: LogSnapshot,
    pub unexpected: Vec<SavedMessage>,
}

/// A checkpoint as read back.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Checkpoint {
    pub job: u64,
    pub rank: Rank,
    pub group: GroupId,
    pub generation: u64,
    pub ranks: u32,
    pub app: Vec<u8>,
    pub image: FtImage,
}

/// The name of rank `rank`'s file of generation `generation` in job `job`.
pub fn file_name(job: u64, rank: Rank, generation: u64) -> String {
    format!("nemesis-ckpt-{job:016x}-{rank}-{generation}.nft")
}

/// `(rank, generation)` of a checkpoint file name of job `job`.
fn parse_name(job: u64, name: &str) -> Option<(Rank, u64)> {
    let rest = name.strip_prefix(&format!("nemesis-ckpt-{job:016x}-"))?.strip_suffix(".nft")?;
    let (r, g) = rest.split_once('-')?;
    Some((r.parse().ok()?, g.parse().ok()?))
}

/// The job key of a job id (FNV-1a, 64 bits), as it appears in file names and headers.
pub fn job_key(id: &str) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in id.bytes() {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x0100_0000_01b3);
    }
    h
}

fn io(op: &'static str, e: std::io::Error) -> Error {
    Error::io(op, e)
}

/// Writes rank `rank`'s checkpoint of generation `generation` into `dir`, atomically: the bytes go
/// to a temporary file which is synced, then renamed into place, then the directory is synced.
/// Returns the file's path and size.
#[allow(clippy::too_many_arguments)]
pub fn write(
    dir: &Path,
    job: u64,
    rank: Rank,
    group: GroupId,
    generation: u64,
    ranks: u32,
    app: &[u8],
    image: &FtImage,
) -> Result<(PathBuf, u64)> {
    let ft = postcard::to_allocvec(image)
        .map_err(|e| Error::Checkpoint(format!("encoding the fault-tolerance state: {e}")))?;
    let mut head = [0u8; HEADER];
    head[..8].copy_from_slice(&MAGIC);
    head[8..12].copy_from_slice(&VERSION.to_le_bytes());
    head[16..24].copy_from_slice(&job.to_le_bytes());
    head[24..28].copy_from_slice(&rank.to_le_bytes());
    head[28..32].copy_from_slice(&group.to_le_bytes());
    head[32..40].copy_from_slice(&generation.to_le_bytes());
    head[40..44].copy_from_slice(&ranks.to_le_bytes());
    head[48..56].copy_from_slice(&(app.len() as u64).to_le_bytes());
    head[56..64].copy_from_slice(&(ft.len() as u64).to_le_bytes());
    let mut h = Xxh64::new(0);
    h.update(&head);
    h.update(app);
    h.update(&ft);
    let sum = h.finish();

    let path = dir.join(file_name(job, rank, generation));
    let tmp = dir.join(format!(".{}.tmp", file_name(job, rank, generation)));
    let mut f = OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .open(&tmp)
        .map_err(|e| Error::Checkpoint(format!("creating {}: {e}", tmp.display())))?;
    let written = (|| {
        f.write_all(&head)?;
        f.write_all(app)?;
        f.write_all(&ft)?;
        f.write_all(&sum.to_le_bytes())?;
        f.sync_all()
    })();
    if let Err(e) = written {
        let _ = std::fs::remove_file(&tmp);
        return Err(Error::Checkpoint(format!("writing {}: {e}", tmp.display())));
    }
    drop(f);
    std::fs::rename(&tmp, &path).map_err(|e| {
        let _ = std::fs::remove_file(&tmp);
        Error::Checkpoint(format!("renaming {} into place: {e}", tmp.display()))
    })?;
    sync_dir(dir)?;
    Ok((path, (HEADER + app.len() + ft.len() + TRAILER) as u64))
}

/// Makes a rename or removal in `dir` durable.
pub fn sync_dir(dir: &Path) -> Result<()> {
    File::open(dir).and_then(|d| d.sync_all()).map_err(|e| io("fsync of the checkpoint directory", e))
}

/// Reads and checks a checkpoint file: a file that is not one, torn (shorter or longer than its
/// header says) or corrupt (checksum) is [`Error::CheckpointCorrupt`].
pub fn load(path: &Path) -> Result<Checkpoint> {
    let bytes = std::fs::read(path).map_err(|e| Error::Checkpoint(format!("reading {}: {e}", path.display())))?;
    decode(&bytes).map_err(|why| Error::CheckpointCorrupt(Box::new((path.to_owned(), why))))
}

fn decode(b: &[u8]) -> std::result::Result<Checkpoint, String> {
    if b.len() < HEADER + TRAILER {
        return Err(format!("{} bytes, shorter than a header", b.len()));
    }
    if b[..8] != MAGIC {
        return Err("not a nemesis checkpoint (magic)".into());
    }
    let u32_at = |i: usize| u32::from_le_bytes([b[i], b[i + 1], b[i + 2], b[i + 3]]);
    let u64_at = |i: usize| u64::from(u32_at(i)) | u64::from(u32_at(i + 4)) << 32;
    let version = u32_at(8);
    if version != VERSION {
        return Err(format!("format version {version}, this build reads {VERSION}"));
    }
    let (app_len, ft_len) = (u64_at(48), u64_at(56));
    let want = (HEADER as u64).checked_add(app_len).and_then(|n| n.checked_add(ft_len)).and_then(|n| n.checked_add(8));
    if want != Some(b.len() as u64) {
        return Err(format!("{} bytes where the header announces {app_len} + {ft_len} of content (torn?)", b.len()));
    }
    let body = b.len() - TRAILER;
    let mut h = Xxh64::new(0);
    h.update(&b[..body]);
    if h.finish() != u64_at(body) {
        return Err("checksum mismatch (corrupt)".into());
    }
    let app_end = HEADER + app_len as usize;
    let image: FtImage =
        postcard::from_bytes(&b[app_end..body]).map_err(|e| format!("fault-tolerance state unreadable: {e}"))?;
    Ok(Checkpoint {
        job: u64_at(16),
        rank: u32_at(24),
        group: u32_at(28),
        generation: u64_at(32),
        ranks: u32_at(40),
        app: b[HEADER..app_end].to_vec(),
        image,
    })
}

/// Generations of rank `rank` of job `job` present in `dir` (valid or not), ascending.
pub fn generations(dir: &Path, job: u64, rank: Rank) -> Result<Vec<u64>> {
    let mut out = Vec::new();
    let entries = match std::fs::read_dir(dir) {
        Ok(e) => e,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(out),
        Err(e) => return Err(Error::Checkpoint(format!("listing {}: {e}", dir.display()))),
    };
    for e in entries.flatten() {
        if let Some((r, g)) = e.file_name().to_str().and_then(|n| parse_name(job, n))
            && r == rank
        {
            out.push(g);
        }
    }
    out.sort_unstable();
    Ok(out)
}

/// Removes rank `rank`'s files of generations below `keep` (the group made `keep` durable).
pub fn remove_older(dir: &Path, job: u64, rank: Rank, keep: u64) -> Result<()> {
    for g in generations(dir, job, rank)?.into_iter().filter(|&g| g < keep) {
        let p = dir.join(file_name(job, rank, g));
        if let Err(e) = std::fs::remove_file(&p)
            && e.kind() != std::io::ErrorKind::NotFound
        {
            return Err(Error::Checkpoint(format!("removing {}: {e}", p.display())));
        }
    }
    sync_dir(dir)
}

/// The group's last durable checkpoint, as rank `rank` of the group `members` (every rank of the
/// group, `rank` among them) finds it in `dir`: the newest generation for which every member has
/// a valid file (checked whole); rank `rank`'s file of it. Files that fail their check are never
/// loaded (a warning names them). `None` if no generation is complete.
pub fn latest_durable(dir: &Path, job: u64, rank: Rank, members: &[Rank]) -> Result<Option<Checkpoint>> {
    for g in generations(dir, job, rank)?.into_iter().rev() {
        let mine = match load(&dir.join(file_name(job, rank, g))) {
            Ok(c) if c.job == job && c.rank == rank && c.generation == g => c,
            Ok(_) => {
                tracing::warn!(generation = g, "checkpoint file names another job, rank or generation: skipped");
                continue;
            }
            Err(e) => {
                tracing::warn!(error = %e, "checkpoint refused");
                continue;
            }
        };
        let complete = members.iter().filter(|&&m| m != rank).all(|&m| match load(&dir.join(file_name(job, m, g))) {
            Ok(c) => c.job == job && c.rank == m && c.generation == g,
            Err(e) => {
                tracing::debug!(error = %e, member = m, generation = g, "generation incomplete for the group");
                false
            }
        });
        if complete {
            return Ok(Some(mine));
        }
    }
    Ok(None)
}

/// XXH64 (Collet), streaming: the checksum of checkpoint files.
pub struct Xxh64 {
    acc: [u64; 4],
    buf: [u8; 32],
    buffered: usize,
    total: u64,
    seed: u64,
}

const P1: u64 = 0x9E37_79B1_85EB_CA87;
const P2: u64 = 0xC2B2_AE3D_27D4_EB4F;
const P3: u64 = 0x1656_67B1_9E37_79F9;
const P4: u64 = 0x85EB_CA77_C2B2_AE63;
const P5: u64 = 0x27D4_EB2F_1656_67C5;

#[inline(always)]
fn round(acc: u64, input: u64) -> u64 {
    acc.wrapping_add(input.wrapping_mul(P2)).rotate_left(31).wrapping_mul(P1)
}

#[inline(always)]
fn merge(acc: u64, v: u64) -> u64 {
    (acc ^ round(0, v)).wrapping_mul(P1).wrapping_add(P4)
}

#[inline(always)]
fn word(b: &[u8], i: usize) -> u64 {
    let mut w = [0u8; 8];
    w.copy_from_slice(&b[i..i + 8]);
    u64::from_le_bytes(w)
}

impl Xxh64 {
    pub fn new(seed: u64) -> Xxh64 {
        Xxh64 {
            acc: [seed.wrapping_add(P1).wrapping_add(P2), seed.wrapping_add(P2), seed, seed.wrapping_sub(P1)],
            buf: [0; 32],
            buffered: 0,
            total: 0,
            seed,
        }
    }

    fn stripe(acc: &mut [u64; 4], s: &[u8]) {
        for (k, a) in acc.iter_mut().enumerate() {
            *a = round(*a, word(s, 8 * k));
        }
    }

    pub fn update(&mut self, mut data: &[u8]) {
        self.total += data.len() as u64;
        if self.buffered > 0 {
            let n = (32 - self.buffered).min(data.len());
            self.buf[self.buffered..self.buffered + n].copy_from_slice(&data[..n]);
            self.buffered += n;
            data = &data[n..];
            if self.buffered < 32 {
                return;
            }
            let buf = self.buf;
            Self::stripe(&mut self.acc, &buf);
            self.buffered = 0;
        }
        let mut chunks = data.chunks_exact(32);
        for c in &mut chunks {
            Self::stripe(&mut self.acc, c);
        }
        let rest = chunks.remainder();
        self.buf[..rest.len()].copy_from_slice(rest);
        self.buffered = rest.len();
    }

    pub fn finish(&self) -> u64 {
        let [a, b, c, d] = self.acc;
        let mut h = if self.total >= 32 {
            let h = a
                .rotate_left(1)
                .wrapping_add(b.rotate_left(7))
                .wrapping_add(c.rotate_left(12))
                .wrapping_add(d.rotate_left(18));
            merge(merge(merge(merge(h, a), b), c), d)
        } else {
            self.seed.wrapping_add(P5)
        };
        h = h.wrapping_add(self.total);
        let tail = &self.buf[..self.buffered];
        let mut i = 0;
        while i + 8 <= tail.len() {
            h = (h ^ round(0, word(tail, i))).rotate_left(27).wrapping_mul(P1).wrapping_add(P4);
            i += 8;
        }
        if i + 4 <= tail.len() {
            let w = u32::from_le_bytes([tail[i], tail[i + 1], tail[i + 2], tail[i + 3]]);
            h = (h ^ u64::from(w).wrapping_mul(P1)).rotate_left(23).wrapping_mul(P2).wrapping_add(P3);
            i += 4;
        }
        for &byte in &tail[i..] {
            h = (h ^ u64::from(byte).wrapping_mul(P5)).rotate_left(11).wrapping_mul(P1);
        }
        h ^= h >> 33;
        h = h.wrapping_mul(P2);
        h ^= h >> 29;
        h = h.wrapping_mul(P3);
        h ^ (h >> 32)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use nemesis_ft::{DateRule, LoggedMessage};

    fn xxh(data: &[u8]) -> u64 {
        let mut h = Xxh64::new(0);
        h.update(data);
        h.finish()
    }

    #[test]
    fn xxh64_matches_the_reference_and_streams() {
        // Reference values of XXH64 with seed 0.
        assert_eq!(xxh(b""), 0xEF46_DB37_51D8_E999);
        assert_eq!(xxh(b"a"), 0xD24E_C4F1_A98C_6E5B);
        assert_eq!(xxh(b"abc"), 0x44BC_2CF5_AD77_0999);
        assert_eq!(xxh(b"Nobody inspects the spammish repetition"), 0xFBCE_A83C_8A37_8BF1);
        let data: Vec<u8> = (0..1000u32).map(|i| (i * 31 % 251) as u8).collect();
        let whole = xxh(&data);
        for split in [0, 1, 7, 31, 32, 33, 500, 999] {
            let mut h = Xxh64::new(0);
            h.update(&data[..split]);
            h.update(&data[split..]);
            assert_eq!(h.finish(), whole, "split at {split}");
        }
    }

    fn image() -> FtImage {
        FtImage {
            process: ProcessState {
                rank: 1,
                date: 42,
                phase: 3,
                received: Vec::new(),
                last_checkpoint_date: 7,
                date_rule: DateRule::Sends,
            },
            log: LogSnapshot {
                channels: vec![(2, 40, vec![LoggedMessage { date: 40, phase: 2, payload: vec![9; 20] }])],
            },
            unexpected: vec![SavedMessage {
                source: 0,
                tag: 5,
                context: 0,
                data: b"halo".to_vec(),
                sync: Some(3),
                delivery: None,
            }],
        }
    }

    fn scratch(name: &str) -> PathBuf {
        let d = std::env::temp_dir().join(format!("nemesis-ckpt-test-{}-{name}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).unwrap();
        d
    }

    #[test]
    fn written_files_read_back_and_damage_is_refused() {
        let dir = scratch("damage");
        let app: Vec<u8> = (0..5000u32).map(|i| i as u8).collect();
        let (path, size) = write(&dir, 77, 1, 0, 3, 4, &app, &image()).unwrap();
        assert_eq!(std::fs::metadata(&path).unwrap().len(), size);
        let names: Vec<String> =
            std::fs::read_dir(&dir).unwrap().map(|e| e.unwrap().file_name().into_string().unwrap()).collect();
        assert_eq!(names, [file_name(77, 1, 3)], "no temporary file is left");
        let c = load(&path).unwrap();
        assert_eq!((c.job, c.rank, c.group, c.generation, c.ranks), (77, 1, 0, 3, 4));
        assert_eq!(c.app, app);
        assert_eq!(c.image, image());
        let good = std::fs::read(&path).unwrap();
        // Every single-byte change, a truncation and an extension are refused.
        for at in [0, 9, 20, 50, 64, 2000, good.len() - 30, good.len() - 1] {
            let mut bad = good.clone();
            bad[at] ^= 0x40;
            std::fs::write(&path, &bad).unwrap();
            assert!(matches!(load(&path), Err(Error::CheckpointCorrupt { .. })), "flipped byte {at}");
        }
        for len in [0, 10, HEADER + 8, good.len() - 1] {
            std::fs::write(&path, &good[..len]).unwrap();
            assert!(matches!(load(&path), Err(Error::CheckpointCorrupt { .. })), "torn at {len}");
        }
        let mut long = good.clone();
        long.push(0);
        std::fs::write(&path, &long).unwrap();
        assert!(matches!(load(&path), Err(Error::CheckpointCorrupt { .. })));
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn the_latest_generation_every_member_holds_is_chosen() {
        let dir = scratch("latest");
        let members = [0, 1, 2];
        let w = |rank, g| write(&dir, 5, rank, 0, g, 3, &[rank as u8, g as u8], &image()).unwrap();
        assert_eq!(latest_durable(&dir, 5, 0, &members).unwrap(), None);
        for r in members {
            w(r, 1);
        }
        // Generation 2 reached ranks 0 and 1 only (a failure in the middle of the checkpoint).
        w(0, 2);
        w(1, 2);
        let c = latest_durable(&dir, 5, 1, &members).unwrap().unwrap();
        assert_eq!((c.generation, c.app.clone()), (1, vec![1, 1]));
        w(2, 2);
        assert_eq!(latest_durable(&dir, 5, 1, &members).unwrap().unwrap().generation, 2);
        // A corrupt member file makes its generation incomplete: the previous one is taken.
        let p = dir.join(file_name(5, 2, 2));
        let mut b = std::fs::read(&p).unwrap();
        b[HEADER] ^= 1;
        std::fs::write(&p, b).unwrap();
        assert_eq!(latest_durable(&dir, 5, 0, &members).unwrap().unwrap().generation, 1);
        // Other jobs' files are not looked at.
        assert_eq!(latest_durable(&dir, 6, 0, &members).unwrap(), None);
        remove_older(&dir, 5, 0, 2).unwrap();
        assert_eq!(generations(&dir, 5, 0).unwrap(), [2]);
        assert_eq!(generations(&dir, 5, 1).unwrap(), [1, 2]);
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
