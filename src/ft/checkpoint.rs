//! Checkpoint files: one per rank and generation, written atomically (temporary file, `fsync`,
//! `rename`, `fsync` of the directory) and checked on reading. Why two generations, and how the
//! logs are kept able to replay the older one, is in `docs/design/endpoint.md` ("Checkpoint files").
//!
//! A file `nemesis-ckpt-<job>-<rank>-<generation>.nft` holds, little-endian: a 64-byte header (magic
//! `NEMFTCK\0`, [`VERSION`], the job key, rank, group, generation, ranks in the job, the lengths
//! `a` and `f`), the application state (`a` bytes), the [`FtImage`] (`f` bytes, postcard; since
//! version 3 it carries the MPI library's state, [`FtImage::mpi`]), a MAC
//! (HMAC-SHA256 of every byte before it under the job's [`CheckpointKey`]) and an XXH64 of every
//! byte before it.
//!
//! What holds:
//! - A torn, corrupt ([`Error::CheckpointCorrupt`]), forged or foreign ([`Error::CheckpointForged`])
//!   file is refused, never loaded; the MAC covers the header, so a file under another rank's or
//!   generation's name is refused too.
//! - Temporary files are created `O_EXCL | O_NOFOLLOW`, mode 0600; files are read `O_NOFOLLOW`.
//! - A rank keeps its two newest durable generations; a group restores the newest generation every
//!   member holds valid ([`restart_point`]), else the previous one; with none and a damaged file
//!   the job cannot recover ([`RestartPoint::Lost`]).
//! - What frees other groups' logs (HydEE's `Ack`, `Checkpointed`) lags one generation behind, so
//!   the older retained generation can always be replayed.

use std::fs::File;
use std::io::{Read, Write};
use std::path::{Path, PathBuf};

use nemesis_ft::{Delivery, GroupId, LogSnapshot, ProcessState, Rank};
use nemesis_shm::auth::{JobSecret, MAC_BYTES};
use serde::{Deserialize, Serialize};

use super::files;
use crate::error::{Error, Result};

/// The file's magic bytes.
pub const MAGIC: [u8; 8] = *b"NEMFTCK\0";
/// Version of the layout above (1: no MAC; 2: no MPI state in the image; 3: the engine's
/// `ReceivedFrom` without the stamps of the messages received, and a sender log without them).
pub const VERSION: u32 = 4;
/// Bytes before the application state.
pub const HEADER: usize = 64;
/// Bytes of the trailer: the MAC and the checksum.
pub const TRAILER: usize = MAC_BYTES + 8;

/// Label of the derivation of a job's checkpoint key from its secret.
const KEY_LABEL: &[u8] = b"nemesis checkpoint v1";
/// Label of a file's MAC.
const FILE_LABEL: &[u8] = b"nemesis checkpoint file v2";

/// The key that authenticates a job's checkpoint files: HMAC-SHA256 of the job's id under the
/// job's secret (with its own label), so the transport holds only what checkpoints need, and
/// two jobs given the same secret still have different keys. Its `Debug` does not show it.
#[derive(Clone, Debug)]
pub struct CheckpointKey {
    /// The job key of file names and headers ([`job_key`]).
    job: u64,
    key: JobSecret,
}

impl CheckpointKey {
    /// The key of job `job_id` whose secret is `secret`.
    pub fn new(secret: &JobSecret, job_id: &str) -> CheckpointKey {
        let derived = secret.mac(KEY_LABEL, &[job_id.as_bytes()]);
        let hex: String = derived.iter().map(|b| format!("{b:02x}")).collect();
        // `JobSecret` is the workspace's HMAC key type; 32 bytes in hex always parse.
        let key = JobSecret::from_hex(&hex).unwrap_or_else(|_| unreachable!("64 hexadecimal digits"));
        CheckpointKey { job: job_key(job_id), key }
    }

    /// The job key of file names and headers.
    pub fn job(&self) -> u64 {
        self.job
    }

    fn mac(&self, head: &[u8], app: &[u8], ft: &[u8]) -> [u8; MAC_BYTES] {
        self.key.mac(FILE_LABEL, &[head, app, ft])
    }

    fn verify(&self, head: &[u8], app: &[u8], ft: &[u8], tag: &[u8]) -> bool {
        tag.len() == MAC_BYTES && self.key.verify(FILE_LABEL, &[head, app, ft], tag)
    }
}

/// Why a checkpoint file is refused.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Refusal {
    /// Shorter than a header and a trailer.
    Short { len: usize },
    /// Not a nemesis checkpoint.
    Magic,
    /// A layout this build does not read.
    Version(u32),
    /// Its length is not what its header announces.
    Torn { len: usize, app: u64, ft: u64 },
    /// The checksum does not match: damaged.
    Checksum,
    /// The MAC does not verify under this job's key: forged, or another job's.
    Mac,
    /// Authentic, but another job's, rank's or generation's than its name says: copied or
    /// replayed under this name.
    Misnamed { job: u64, rank: Rank, generation: u64 },
    /// The fault-tolerance image does not decode (authentic: a bug, not an attack).
    Image(String),
    /// The file could not be read.
    Unreadable(String),
}

impl Refusal {
    /// Whether the file was made by someone without this job's key, or moved under a name not
    /// its own ([`Error::CheckpointForged`]), rather than damaged ([`Error::CheckpointCorrupt`]).
    pub fn is_forgery(&self) -> bool {
        matches!(self, Refusal::Mac | Refusal::Misnamed { .. })
    }
}

impl std::fmt::Display for Refusal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Refusal::Short { len } => write!(f, "{len} bytes, shorter than a header"),
            Refusal::Magic => f.write_str("not a nemesis checkpoint (magic)"),
            Refusal::Version(v) if *v < VERSION => write!(
                f,
                "format version {v}, written by an older nemesis (without the message stamps that check send \
                 determinism, or the MPI state a restart needs); this build reads {VERSION} only"
            ),
            Refusal::Version(v) => write!(f, "format version {v}, this build reads {VERSION}"),
            Refusal::Torn { len, app, ft } => {
                write!(f, "{len} bytes where the header announces {app} + {ft} of content (torn?)")
            }
            Refusal::Checksum => f.write_str("checksum mismatch (corrupt)"),
            Refusal::Mac => f.write_str(
                "MAC mismatch: not made with this job's checkpoint key (forged, or another job's: another secret \
                 or job id)",
            ),
            Refusal::Misnamed { job, rank, generation } => write!(
                f,
                "it holds job {job:016x} rank {rank} generation {generation} (authentic, but not the file this name \
                 stands for: copied or replayed)"
            ),
            Refusal::Image(e) => write!(f, "fault-tolerance state unreadable: {e}"),
            Refusal::Unreadable(e) => write!(f, "cannot read it: {e}"),
        }
    }
}

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
    /// The MPI library's state (its objects and their handles), opaque here: `nemesis-mpi`'s
    /// `ft::image` writes and reads it (empty for a program on the Endpoint alone). Covered by
    /// the MAC and the checksum as the rest of the image.
    pub mpi: Vec<u8>,
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

/// The header, the postcard image and the trailer of a file (the application state goes between
/// the header and the image).
#[allow(clippy::too_many_arguments)]
fn frame(
    key: &CheckpointKey,
    rank: Rank,
    group: GroupId,
    generation: u64,
    ranks: u32,
    app: &[u8],
    image: &FtImage,
) -> Result<([u8; HEADER], Vec<u8>, [u8; TRAILER])> {
    let ft = postcard::to_allocvec(image)
        .map_err(|e| Error::Checkpoint(format!("encoding the fault-tolerance state: {e}")))?;
    let mut head = [0u8; HEADER];
    head[..8].copy_from_slice(&MAGIC);
    head[8..12].copy_from_slice(&VERSION.to_le_bytes());
    head[16..24].copy_from_slice(&key.job.to_le_bytes());
    head[24..28].copy_from_slice(&rank.to_le_bytes());
    head[28..32].copy_from_slice(&group.to_le_bytes());
    head[32..40].copy_from_slice(&generation.to_le_bytes());
    head[40..44].copy_from_slice(&ranks.to_le_bytes());
    head[48..56].copy_from_slice(&(app.len() as u64).to_le_bytes());
    head[56..64].copy_from_slice(&(ft.len() as u64).to_le_bytes());
    let trailer = seal(key, &head, app, &ft);
    Ok((head, ft, trailer))
}

/// The trailer of a file whose header, application state and image are these: their MAC, then
/// the XXH64 of the three and the MAC.
fn seal(key: &CheckpointKey, head: &[u8], app: &[u8], ft: &[u8]) -> [u8; TRAILER] {
    let mut trailer = [0u8; TRAILER];
    trailer[..MAC_BYTES].copy_from_slice(&key.mac(head, app, ft));
    let mut h = Xxh64::new(0);
    h.update(head);
    h.update(app);
    h.update(ft);
    h.update(&trailer[..MAC_BYTES]);
    trailer[MAC_BYTES..].copy_from_slice(&h.finish().to_le_bytes());
    trailer
}

/// The bytes of rank `rank`'s file of generation `generation` ([`write`] puts them in place).
#[allow(clippy::too_many_arguments)]
pub fn encode(
    key: &CheckpointKey,
    rank: Rank,
    group: GroupId,
    generation: u64,
    ranks: u32,
    app: &[u8],
    image: &FtImage,
) -> Result<Vec<u8>> {
    let (head, ft, trailer) = frame(key, rank, group, generation, ranks, app, image)?;
    Ok([&head[..], app, &ft, &trailer].concat())
}

/// `body` (a header and what it announces, as a file holds them before its trailer) followed by
/// a valid trailer under `key`: what a writer holding the key would make of these bytes (for the
/// fuzz target, which must reach the image's decoder past the MAC). `None` if `body` is shorter
/// than a header or its lengths do not add up to its size.
pub fn seal_body(key: &CheckpointKey, body: &[u8]) -> Option<Vec<u8>> {
    let head = body.get(..HEADER)?;
    let len = |i: usize| head.get(i..i + 8).and_then(|b| b.try_into().ok()).map(u64::from_le_bytes);
    let (a, f) = (len(48)?, len(56)?);
    if (HEADER as u64).checked_add(a)?.checked_add(f)? != body.len() as u64 {
        return None;
    }
    let a = HEADER + a as usize;
    let trailer = seal(key, head, &body[HEADER..a], &body[a..]);
    Some([body, &trailer[..]].concat())
}

/// The temporary name of a file being written.
fn tmp_name(job: u64, rank: Rank, generation: u64) -> String {
    format!(".{}.tmp", file_name(job, rank, generation))
}

/// Writes rank `rank`'s checkpoint of generation `generation` into `dir`, atomically: the bytes go
/// to a new temporary file (mode 0600, `O_EXCL | O_NOFOLLOW`: a stale one, or a link planted at
/// its name, is removed first and never written through) which is synced, then renamed into
/// place, then the directory is synced. Returns the file's path and size.
#[allow(clippy::too_many_arguments)]
pub fn write(
    dir: &Path,
    key: &CheckpointKey,
    rank: Rank,
    group: GroupId,
    generation: u64,
    ranks: u32,
    app: &[u8],
    image: &FtImage,
) -> Result<(PathBuf, u64)> {
    let (head, ft, trailer) = frame(key, rank, group, generation, ranks, app, image)?;
    let path = dir.join(file_name(key.job, rank, generation));
    let tmp = dir.join(tmp_name(key.job, rank, generation));
    let mut f =
        files::create_replacing(&tmp).map_err(|e| Error::Checkpoint(format!("creating {}: {e}", tmp.display())))?;
    let written = (|| {
        f.write_all(&head)?;
        f.write_all(app)?;
        f.write_all(&ft)?;
        f.write_all(&trailer)?;
        f.sync_all()
    })();
    if let Err(e) = written {
        let _ = std::fs::remove_file(&tmp);
        return Err(Error::Checkpoint(format!("writing {}: {e}", tmp.display())));
    }
    drop(f);
    nemesis_shm::failpoint!("ckpt-tmp-written");
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

/// Reads and checks a checkpoint file under `key`: a file that is not one, torn (shorter or
/// longer than its header says) or corrupt (checksum) is [`Error::CheckpointCorrupt`]; one whose
/// MAC does not verify (forged, another job's) is [`Error::CheckpointForged`].
pub fn load(path: &Path, key: &CheckpointKey) -> Result<Checkpoint> {
    let mut bytes = Vec::new();
    files::open_read(path)
        .and_then(|mut f| f.read_to_end(&mut bytes))
        .map_err(|e| Error::Checkpoint(format!("reading {}: {e}", path.display())))?;
    decode(&bytes, key).map_err(|why| refused(path, why))
}

/// The error of a file refused.
fn refused(path: &Path, why: Refusal) -> Error {
    let b = Box::new((path.to_owned(), why.to_string()));
    if why.is_forgery() { Error::CheckpointForged(b) } else { Error::CheckpointCorrupt(b) }
}

/// Checks and decodes the bytes of a checkpoint file under `key`: length, magic, version, the
/// checksum, then the MAC and the job in the header, and only then the image.
pub fn decode(b: &[u8], key: &CheckpointKey) -> std::result::Result<Checkpoint, Refusal> {
    if b.len() < HEADER + TRAILER {
        return Err(Refusal::Short { len: b.len() });
    }
    if b[..8] != MAGIC {
        return Err(Refusal::Magic);
    }
    let u32_at = |i: usize| u32::from_le_bytes([b[i], b[i + 1], b[i + 2], b[i + 3]]);
    let u64_at = |i: usize| u64::from(u32_at(i)) | u64::from(u32_at(i + 4)) << 32;
    let version = u32_at(8);
    if version != VERSION {
        return Err(Refusal::Version(version));
    }
    let (app_len, ft_len) = (u64_at(48), u64_at(56));
    let want = (HEADER as u64)
        .checked_add(app_len)
        .and_then(|n| n.checked_add(ft_len))
        .and_then(|n| n.checked_add(TRAILER as u64));
    if want != Some(b.len() as u64) {
        return Err(Refusal::Torn { len: b.len(), app: app_len, ft: ft_len });
    }
    // In bounds: the lengths add up to the file's (checked above).
    let body = b.len() - TRAILER;
    let sum_at = body + MAC_BYTES;
    let mut h = Xxh64::new(0);
    h.update(&b[..sum_at]);
    if h.finish() != u64_at(sum_at) {
        return Err(Refusal::Checksum);
    }
    let app_end = HEADER + app_len as usize;
    let (head, app, ft) = (&b[..HEADER], &b[HEADER..app_end], &b[app_end..body]);
    if !key.verify(head, app, ft, &b[body..sum_at]) {
        return Err(Refusal::Mac);
    }
    if u64_at(16) != key.job {
        return Err(Refusal::Misnamed { job: u64_at(16), rank: u32_at(24), generation: u64_at(32) });
    }
    let image: FtImage = postcard::from_bytes(ft).map_err(|e| Refusal::Image(e.to_string()))?;
    Ok(Checkpoint {
        job: u64_at(16),
        rank: u32_at(24),
        group: u32_at(28),
        generation: u64_at(32),
        ranks: u32_at(40),
        app: app.to_vec(),
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

/// Removes rank `rank`'s files of generations below `keep` (once the group made the generation
/// after `keep` durable, `keep` is the older of the two it retains).
pub fn remove_older(dir: &Path, job: u64, rank: Rank, keep: u64) -> Result<()> {
    remove_where(dir, job, rank, |g| g < keep)
}

fn remove_where(dir: &Path, job: u64, rank: Rank, gone: impl Fn(u64) -> bool) -> Result<()> {
    for g in generations(dir, job, rank)?.into_iter().filter(|&g| gone(g)) {
        let p = dir.join(file_name(job, rank, g));
        if let Err(e) = std::fs::remove_file(&p)
            && e.kind() != std::io::ErrorKind::NotFound
        {
            return Err(Error::Checkpoint(format!("removing {}: {e}", p.display())));
        }
    }
    sync_dir(dir)
}

/// Where a restarted group resumes ([`restart_point`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum RestartPoint {
    /// From this checkpoint (the caller's file of the chosen generation).
    Checkpoint(Checkpoint),
    /// From the beginning of the program: no generation of the group was ever durable.
    Start,
    /// Nowhere: no complete valid generation, and a damaged file.
    Lost,
}

/// What [`restart_point`] found.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Restore {
    pub point: RestartPoint,
    /// Files of the group refused on the way (newer than the chosen generation, or all of them
    /// if none was chosen): `(owner, generation, path, why)`.
    pub refused: Vec<(Rank, u64, PathBuf, Refusal)>,
}

/// Rank `rank`'s file of generation `g`, checked against its name (`Err`: why it is refused).
fn check(dir: &Path, key: &CheckpointKey, rank: Rank, g: u64) -> std::result::Result<Checkpoint, Refusal> {
    let path = dir.join(file_name(key.job, rank, g));
    let mut bytes = Vec::new();
    files::open_read(&path)
        .and_then(|mut f| f.read_to_end(&mut bytes))
        .map_err(|e| Refusal::Unreadable(e.to_string()))?;
    match decode(&bytes, key)? {
        c if c.job == key.job && c.rank == rank && c.generation == g => Ok(c),
        c => Err(Refusal::Misnamed { job: c.job, rank: c.rank, generation: c.generation }),
    }
}

/// Where the group `members` (every rank of the group, `rank` among them) restarts, as rank
/// `rank` finds it in `dir`: the newest generation for which every member has a valid file
/// (module documentation); [`RestartPoint::Start`] if there is none and no file of the group is
/// damaged, [`RestartPoint::Lost`] if one is. Every member finds the same point (the files
/// change only by removals of generations the point is not).
pub fn restart_point(dir: &Path, key: &CheckpointKey, rank: Rank, members: &[Rank]) -> Result<Restore> {
    let job = key.job;
    let mut present: Vec<(u64, Rank)> = Vec::new();
    for &m in members {
        present.extend(generations(dir, job, m)?.into_iter().map(|g| (g, m)));
    }
    let mut all: Vec<u64> = present.iter().map(|p| p.0).collect();
    all.sort_unstable();
    all.dedup();
    let mut refused = Vec::new();
    for &g in all.iter().rev() {
        let mut mine = None;
        let mut complete = true;
        for &m in members {
            if !present.contains(&(g, m)) {
                // Never written (a failure inside that checkpoint), or removed.
                complete = false;
                continue;
            }
            match check(dir, key, m, g) {
                Ok(c) if m == rank => mine = Some(c),
                Ok(_) => {}
                Err(why) => {
                    complete = false;
                    refused.push((m, g, dir.join(file_name(job, m, g)), why));
                }
            }
        }
        if let (true, Some(c)) = (complete, mine) {
            return Ok(Restore { point: RestartPoint::Checkpoint(c), refused });
        }
    }
    let point = if refused.is_empty() { RestartPoint::Start } else { RestartPoint::Lost };
    Ok(Restore { point, refused })
}

/// The group's last durable checkpoint, as rank `rank` of the group `members` finds it in `dir`
/// ([`restart_point`]'s choice; `None` to start from the beginning or if it cannot restart).
pub fn latest_durable(dir: &Path, key: &CheckpointKey, rank: Rank, members: &[Rank]) -> Result<Option<Checkpoint>> {
    Ok(match restart_point(dir, key, rank, members)?.point {
        RestartPoint::Checkpoint(c) => Some(c),
        RestartPoint::Start | RestartPoint::Lost => None,
    })
}

/// Removes rank `rank`'s files of every generation but `keep` (a restart: every other
/// generation is stale or no longer covered by the other groups' logs, module documentation).
/// Temporary files a killed writer left go too.
pub fn remove_all_but(dir: &Path, job: u64, rank: Rank, keep: Option<u64>) -> Result<()> {
    let tmp = format!(".nemesis-ckpt-{job:016x}-{rank}-");
    if let Ok(entries) = std::fs::read_dir(dir) {
        for e in entries.flatten() {
            if e.file_name().to_str().is_some_and(|n| n.starts_with(&tmp) && n.ends_with(".nft.tmp")) {
                let _ = std::fs::remove_file(e.path());
            }
        }
    }
    remove_where(dir, job, rank, |g| Some(g) != keep)
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
mod tests;
