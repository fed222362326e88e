//! Fault tolerance in the transport: the HydEE engine of `nemesis-ft` (`shared/reference/hydee.md`)
//! driven by the Endpoint for the failure-free path.
//!
//! - **Topology**: FT is on when [`ENV_FT_GROUPS`] names a groups file (`<rank> <group>` lines, what
//!   `nemesis-ft groups` prints; `nemesis-run --ft FILE` or `--ft-groups K` set it, and under
//!   another process manager the variable is set by hand). A wrong file is an error at start.
//! - **Piggyback**: every application message carries the engine's 12-byte `(date, phase)` and
//!   its 16-byte stamp (per-destination sequence number, digest of envelope and payload: [`wire`])
//!   in the header's FT room, on every path (the Endpoint's `eager.rs`, `rendezvous.rs`); the
//!   Endpoint's own traffic (acknowledgements of synchronous sends, rendezvous control, these
//!   control messages) carries none and consumes no date.
//! - **Hooks**: the stamped ones (`nemesis_ft`'s `process/stamps.rs`: a re-execution that sends
//!   other messages than the first run is `SendDeterminismViolated`, not a silent duplicate):
//!   `on_send` before a send; `on_receive` on arrival, in channel order, where stale
//!   and duplicate messages are dropped (`progress.rs`); `on_deliver` when the application receives
//!   the message: a blocking receive at once, a non-blocking one when the application takes the
//!   request's result (`Ft::deferred`, the Endpoint's `ft_taken` in wait, test and wait_any).
//! - **Sender log**: inter-group messages are appended before their send can complete, with an
//!   envelope (tag, context) that a replay needs; memory bound [`ENV_FT_LOG_MAX`], then a spill file
//!   in the FT directory up to [`ENV_FT_SPILL_MAX`].
//! - **Control plane**: the engine's control messages travel as a message kind of their own on the
//!   same per-pair FIFO as application messages; its actions are drained after every event that
//!   can produce them (the Endpoint's `ft.rs`).
//! - **Checkpoints** ([`checkpoint`]): group-coordinated, one file per rank and generation,
//!   authenticated by a key derived from the job's secret.
//! - **Files** ([`files`]): the FT directory is this user's alone (a directory the ranks make:
//!   mode 0700, checked if it exists; one the user names: refused if other users can write it),
//!   files in it are created `O_EXCL | O_NOFOLLOW`, mode 0600, the spill file without a name.
//!
//! - **Recovery** ([`channel`], the Endpoint's `recovery.rs`): under `nemesis-run --ft` the
//!   launcher runs the recovery coordinators and restarts failed groups (`crate::launch`); a
//!   process restarted with [`ENV_FT_RESTART`] restores its group's last durable checkpoint (or
//!   starts over if the group had none) and enters the engine's restarting role.

pub mod checkpoint;
pub mod files;

use std::collections::VecDeque;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use nemesis_ft::{
    Control, CoordinatorId, DateRule, GroupId, LogConfig, Process, ProcessConfig, ProcessState, Rank, Round, SenderLog,
    Topology,
};

use nemesis_ft::{PIGGYBACK_LEN, Piggyback, STAMP_LEN, Stamp};
use nemesis_shm::PiggybackBytes;
use nemesis_shm::auth::{ENV_JOB_SECRET, JobSecret};
use nemesis_shm::cell::FT_PIGGYBACK_BYTES;

use crate::contract::parse_bytes;
use crate::endpoint::handle::Request;
use crate::error::{Error, Result};

/// The FT channel's frames, at their former path.
pub use crate::contract::channel;
pub use crate::contract::{ENV_FT_DIR, ENV_FT_GROUPS, ENV_FT_JOB, ENV_FT_LOG_MAX, ENV_FT_RESTART, ENV_FT_SPILL_MAX};

/// Default memory bound of the sender log (`NEMESIS_FT_LOG_MAX`): 256 MiB, the window Open MPI's
/// sender-based logger maps by default (`nemesis-ft`'s placeholder); the logged share of a grouped
/// application is 13–20 % of its traffic (Table 6.1, T:2269–2277), and acknowledgements free it at
/// every checkpoint of the receiving group.
pub const DEFAULT_LOG_MAX: usize = 256 << 20;

/// A restart in a recovery round.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Restart {
    pub round: Round,
    pub groups: Vec<GroupId>,
}

/// Fault-tolerance settings of a rank.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FtConfig {
    /// The groups file.
    pub groups: PathBuf,
    /// Checkpoint directory; `None`: `$TMPDIR/nemesis-ft-<job>`, created and removed by the ranks.
    pub dir: Option<PathBuf>,
    /// Memory bound of the sender log.
    pub log_max: usize,
    /// Bound of the spill file (`None`: what the file system takes).
    pub spill_max: Option<u64>,
    /// Job id for file names (`None`: the process manager's).
    pub job: Option<String>,
    /// Set when this process is restarted by recovery.
    pub restart: Option<Restart>,
    /// The launcher's fault-tolerance channel (`nemesis-run --ft`): recovery of failed groups.
    /// Without it (another process manager) fault tolerance runs failure-free only.
    pub channel_fd: Option<i32>,
    /// One recovery coordinator per group (`distributed`, Fig 6.7) rather than one for the job.
    pub distributed: bool,
    /// The job's secret (`NEMESIS_JOB_SECRET`), which keys the checkpoints' MACs. `None` (another
    /// process manager, nothing given): each rank keys its files with a random key of its own,
    /// and a restart from them is refused.
    pub secret: Option<JobSecret>,
}

impl FtConfig {
    /// The settings in the environment; `None` when [`ENV_FT_GROUPS`] is not set (FT off).
    pub fn from_env() -> Result<Option<FtConfig>> {
        let Some(groups) = std::env::var_os(ENV_FT_GROUPS).filter(|v| !v.is_empty()) else {
            return Ok(None);
        };
        let size = |name: &str| -> Result<Option<usize>> {
            match std::env::var(name) {
                Ok(v) => parse_bytes(&v).map(Some).ok_or_else(|| Error::Config(format!("{name}={v} is not a size"))),
                Err(_) => Ok(None),
            }
        };
        let restart = match std::env::var(ENV_FT_RESTART) {
            Ok(v) => Some(parse_restart(&v)?),
            Err(_) => None,
        };
        let channel_fd =
            match std::env::var(channel::ENV_FT_FD) {
                Ok(v) => {
                    Some(v.trim().parse::<i32>().ok().filter(|&fd| fd > 2).ok_or_else(|| {
                        Error::Config(format!("{}={v} is not a descriptor number", channel::ENV_FT_FD))
                    })?)
                }
                Err(_) => None,
            };
        let distributed = match std::env::var(channel::ENV_FT_RECOVERY).as_deref() {
            Ok("distributed") => true,
            Ok("centralised" | "centralized" | "") | Err(_) => false,
            Ok(v) => {
                return Err(Error::Config(format!(
                    "{}={v}: expected centralised or distributed",
                    channel::ENV_FT_RECOVERY
                )));
            }
        };
        // Read before the bootstrap removes it from the environment.
        let secret = JobSecret::from_env()?;
        Ok(Some(FtConfig {
            secret,
            channel_fd,
            distributed,
            groups: PathBuf::from(groups),
            dir: std::env::var_os(ENV_FT_DIR).filter(|v| !v.is_empty()).map(PathBuf::from),
            log_max: size(ENV_FT_LOG_MAX)?.unwrap_or(DEFAULT_LOG_MAX),
            spill_max: size(ENV_FT_SPILL_MAX)?.map(|n| n as u64),
            job: std::env::var(ENV_FT_JOB).ok().filter(|v| !v.is_empty()),
            restart,
        }))
    }
}

/// Parses [`ENV_FT_RESTART`].
fn parse_restart(v: &str) -> Result<Restart> {
    let bad = || Error::Config(format!("{ENV_FT_RESTART}={v}: expected <round>:<group>[,<group>...]"));
    let (round, groups) = v.split_once(':').ok_or_else(bad)?;
    let round: Round = round.trim().parse().map_err(|_| bad())?;
    let groups = groups.split(',').map(|g| g.trim().parse::<GroupId>().map_err(|_| bad())).collect::<Result<_>>()?;
    Ok(Restart { round, groups })
}

/// Reads the groups file `path` for a job of `ranks` ranks: an error names the file and the line.
pub fn read_groups(path: &Path, ranks: usize) -> Result<Vec<GroupId>> {
    let text =
        std::fs::read_to_string(path).map_err(|e| Error::Config(format!("groups file {}: {e}", path.display())))?;
    nemesis_ft::topology::parse_groups(&text, ranks).map_err(|e| Error::Config(format!("{}: {e}", path.display())))
}

/// What fault tolerance did so far (for tests, tools and benchmarks).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct FtStats {
    /// Messages appended to the sender log (inter-group sends), and their payload bytes.
    pub logged: u64,
    pub logged_bytes: u64,
    /// Arrivals dropped as stale or duplicate.
    pub dropped: u64,
    /// Control messages sent and received.
    pub control_sent: u64,
    pub control_received: u64,
    /// Checkpoints made durable, the last one's generation, file size and time (from the call to
    /// its return, the coordination included).
    pub checkpoints: u64,
    pub generation: u64,
    pub checkpoint_bytes: u64,
    pub checkpoint_time: Duration,
    /// Of `checkpoint_time`, the writing of the file (temporary file, fsync, rename).
    pub checkpoint_write_time: Duration,
    /// Logged messages replayed to restarted ranks, and their payload bytes.
    pub replayed: u64,
    pub replayed_bytes: u64,
    /// A restarted process: the time it took to find, read, check and restore its group's last
    /// durable checkpoint (or to find there is none).
    pub restore_time: Duration,
}

/// Bytes of the envelope logged in front of each message: tag and context (a replay needs them).
pub(crate) const ENVELOPE: usize = 8;

/// The envelope of a logged message.
#[inline(always)]
pub(crate) fn envelope(tag: i32, context: u32) -> [u8; ENVELOPE] {
    let mut e = [0u8; ENVELOPE];
    e[..4].copy_from_slice(&tag.to_le_bytes());
    e[4..].copy_from_slice(&context.to_le_bytes());
    e
}

/// Tag and context of a logged message's envelope.
pub(crate) fn parse_envelope(b: &[u8]) -> Option<(i32, u32)> {
    let t = b.get(..4)?;
    let c = b.get(4..8)?;
    Some((i32::from_le_bytes([t[0], t[1], t[2], t[3]]), u32::from_le_bytes([c[0], c[1], c[2], c[3]])))
}

/// Test-only switch (`1`): every message's digest is sent as 0, as if stamps carried the sequence
/// number alone, to show what the digest catches (`tests/ft_determinism.rs`). Never for production.
pub const ENV_FT_TEST_UNDIGESTED: &str = "NEMESIS_FT_TEST_UNDIGESTED";

/// Test-only switch (`1`): every digest a sender computes is sent with its lowest bit flipped, as
/// a damaged log or payload would arrive: receivers must refuse the messages
/// (`tests/ft_determinism.rs`). Never for production.
pub const ENV_FT_TEST_MISDIGESTED: &str = "NEMESIS_FT_TEST_MISDIGESTED";

/// The piggyback and stamp of a message as they go to the port or netmod. The stamp travels only
/// with [`stamp_flag`] in the header (the destination is in another group, [`Ft::stamps`]): without
/// it the port sends the short room, and the receiver reads a zero stamp.
#[inline(always)]
pub(crate) fn wire(pb: Piggyback, stamp: Stamp) -> PiggybackBytes {
    let mut out = [0u8; FT_PIGGYBACK_BYTES];
    out[..PIGGYBACK_LEN].copy_from_slice(&pb.encode());
    out[PIGGYBACK_LEN..].copy_from_slice(&stamp.encode());
    out
}

/// The header flag of a message whose stamp travels in full (`stamped`: its destination is in
/// another group, [`Ft::stamps`]): `FT_STAMP` or nothing, without a branch. The Endpoint sets it
/// from what it knows; the port does not look at the stamp's bytes. For the short form see
/// [`Ft::stamp_flags`].
#[inline(always)]
pub(crate) const fn stamp_flag(stamped: bool) -> u8 {
    (stamped as u8) * nemesis_shm::cell::flags::FT_STAMP
}

/// The largest eager message that may carry a short stamp: it arrives whole in one cell of the
/// smallest size a node takes (256 bytes, `nemesis_shm::Params`), so that its receiver hashes it
/// on arrival and can check the digest's low half (`arrival_digest`).
pub(crate) const SHORT_STAMP_MAX: usize =
    256 - nemesis_shm::cell::LINK_BYTES - nemesis_shm::cell::HEADER_BYTES - nemesis_shm::cell::FT_ROOM_SHORT;

/// The header's `aux` of a message with a short stamp: the low 32 bits of its digest.
#[inline(always)]
pub(crate) const fn short_aux(stamp: Stamp) -> u32 {
    stamp.digest as u32
}

/// The full stamp of a message that arrived with a short one (`FT_STAMP_SHORT`): `low` the low 32
/// bits of its sequence number (the room's), `aux` those of its digest, `digest` the digest of what
/// arrived, `next` the sequence number expected next from its sender
/// ([`Process::last_seq_from`]` + 1`).
///
/// The sequence number is the one with those low bits nearest to `next` (a window of 2^31 either
/// way: a sender's numbers to one destination only grow, and its messages arrive in order, so a
/// message in sequence rebuilds exactly; anything else is out of sequence however it rebuilds, and
/// a rebuilt 0, which would read as unstamped, becomes 2^32). The digest is `digest` if its low 32
/// bits are `aux`, else a value that differs from it: the engine then refuses the message. Only 32
/// bits are compared: a message whose content diverged passes with probability 2^-32.
#[inline(always)]
pub(crate) fn widen_stamp(low: u32, aux: u32, digest: u64, next: u64) -> Stamp {
    let delta = low.wrapping_sub(next as u32) as i32;
    let seq = next.wrapping_add(delta as i64 as u64);
    let seq = if seq == 0 { 1 << 32 } else { seq };
    Stamp { seq, digest: digest & !u64::from(u32::MAX) | u64::from(aux) }
}

/// The piggyback and stamp a message carried ([`wire`]). A message without `FT_STAMP` carried no
/// stamp: its bytes are zeros ([`nemesis_shm::cell::ft_read`]), read as [`Stamp::NONE`], never
/// taken from the payload.
#[inline(always)]
pub(crate) fn unwire(bytes: &PiggybackBytes) -> Result<(Piggyback, Stamp)> {
    let mut stamp = [0u8; STAMP_LEN];
    stamp.copy_from_slice(&bytes[PIGGYBACK_LEN..]);
    Ok((Piggyback::decode_slice(&bytes[..PIGGYBACK_LEN])?, Stamp::decode(&stamp)?))
}

const _: () = assert!(PIGGYBACK_LEN + STAMP_LEN == FT_PIGGYBACK_BYTES);

/// The fault-tolerance state of an Endpoint.
pub(crate) struct Ft {
    pub(crate) process: Process,
    pub(crate) log: SenderLog,
    pub(crate) group: GroupId,
    /// The other members of this rank's group, ascending.
    pub(crate) partners: Vec<Rank>,
    pub(crate) dir: PathBuf,
    /// The directory was made by this job's ranks (no launcher made it): rank 0 removes it at the end.
    pub(crate) own_dir: bool,
    pub(crate) job: u64,
    /// Authenticates the job's checkpoint files.
    pub(crate) key: checkpoint::CheckpointKey,
    /// Last generation made durable by the group (0: none).
    pub(crate) generation: u64,
    /// Per rank: the highest generation of each checkpoint marker received from it (stage 0: it
    /// entered the checkpoint, everything it sent before is here; stage 1: its file is durable).
    pub(crate) marks: Vec<[u64; 2]>,
    /// Per rank: the highest generation whose stage-1 marker said that its file could not be written.
    pub(crate) failed: Vec<u64>,
    /// Per rank: the highest generation whose stage-1 marker said that it skipped the checkpoint
    /// (it re-executes in a recovery round).
    pub(crate) skipped: Vec<u64>,
    /// The number of the last checkpoint attempt (durable, abandoned or skipped): the next one
    /// takes a higher number, so that its markers are its own.
    pub(crate) attempt: u64,
    /// The recovery round this process was restarted in, if it was.
    pub(crate) restart_round: Option<Round>,
    /// Sends the engine refused for now (`Outbound::Hold`), in program order, with the phase of
    /// the application's call; later sends queue behind them.
    pub(crate) held: VecDeque<(Request, nemesis_ft::Phase)>,
    /// Deliveries of non-blocking receives, applied when the application takes the request's
    /// result (the Endpoint's `ft_taken`).
    pub(crate) deferred: Vec<(Request, nemesis_ft::Delivery)>,
    /// Control messages being reassembled, per sender.
    pub(crate) partial_control: Vec<(u32, Vec<u8>)>,
    /// Buffers of replays that go by rendezvous, until their request completes.
    pub(crate) replays: Vec<(Request, Vec<u8>)>,
    /// Contiguous copies of the application's sends in pieces, until their request completes.
    pub(crate) staged: Vec<(Request, Box<[u8]>)>,
    /// Messages for recovery coordinators when no launcher channel carries them (fault
    /// tolerance under another process manager: failure-free only), kept in order.
    pub(crate) to_coordinator: Vec<(CoordinatorId, Control)>,
    /// The launcher's channel (`nemesis-run --ft`): recovery coordinators, restarts.
    pub(crate) channel: Option<channel::Channel>,
    /// Dead ranks the launcher asked this rank to retire, not done yet.
    pub(crate) retiring: Vec<u32>,
    /// Remote ranks whose netmod notice of death came through the receive queue (everything
    /// their dead incarnation delivered was delivered), not restarted since.
    pub(crate) net_silent: Vec<u32>,
    /// The launcher said every rank finished ([`channel::Frame::Finish`]).
    pub(crate) finish: bool,
    /// Replays reported to the launcher so far (messages, bytes).
    pub(crate) replays_reported: (u64, u64),
    /// The application state of the checkpoint this process restarted from.
    pub(crate) restored: Option<Vec<u8>>,
    /// The MPI library's state of that checkpoint (`FtImage::mpi`).
    pub(crate) restored_mpi: Option<Vec<u8>>,
    /// The engine's `Ack`s and `Checkpointed`s (what frees the other groups' logs and RPP) held
    /// back until the group's next checkpoint is durable, the newest per peer and kind: they
    /// stand for the group's newest durable generation, and the older retained one must stay
    /// covered (`checkpoint`'s module documentation).
    pub(crate) gc_deferred: Vec<(Rank, Control)>,
    pub(crate) stats: FtStats,
    /// Per rank: messages to it are digested (another group's, unless
    /// [`ENV_FT_TEST_UNDIGESTED`]): only a receiver of another group checks a digest, and only a
    /// message to another group can be a regenerated orphan.
    pub(crate) digested: Box<[bool]>,
    /// Per rank: it is in another group (the engine checks the stamps of its messages; those of
    /// this group's are not looked at, and their arrivals take the unstamped hooks).
    pub(crate) inter: Box<[bool]>,
    /// 0, or 1 under [`ENV_FT_TEST_MISDIGESTED`]: XORed into every digest sent.
    pub(crate) misdigest: u64,
    /// Rendezvous messages from other groups whose data is checked against its digest once in
    /// (the Endpoint's `ft_rdv.rs`).
    pub(crate) rdv_checks: Vec<(crate::endpoint::ft_rdv::RdvAt, crate::endpoint::ft_rdv::RdvCheck)>,
    /// Eager messages from other groups arriving in several fragments, hashed as they come (at
    /// most one per sender).
    pub(crate) eager_checks: Vec<crate::endpoint::ft_rdv::EagerCheck>,
}

impl Ft {
    /// Messages to `rank` carry their stamp: it is in another group (the engine of this group's
    /// ranks never looks at the stamps of this group's messages).
    #[inline(always)]
    pub(crate) fn stamps(&self, rank: u32) -> bool {
        self.inter.get(rank as usize).copied().unwrap_or(false)
    }

    /// The stamp flag of a message of `len` bytes to `dest`, synchronous or not: none to this
    /// group's ranks; `FT_STAMP_SHORT` (the short stamp, the digest's low half in `aux`:
    /// [`short_aux`]) for a non-synchronous eager message of at most [`SHORT_STAMP_MAX`] bytes that
    /// its receiver hashes ([`digested`](Self::digested)); `FT_STAMP` for the rest (a synchronous
    /// send's `aux` is its token; a replay or a rendezvous keeps the long form).
    #[inline(always)]
    pub(crate) fn stamp_flags(&self, dest: u32, len: usize, sync: bool) -> u8 {
        use nemesis_shm::cell::flags::{FT_STAMP, FT_STAMP_SHORT};
        if !self.stamps(dest) {
            0
        } else if !sync && len <= SHORT_STAMP_MAX && self.digested.get(dest as usize).copied().unwrap_or(false) {
            FT_STAMP_SHORT
        } else {
            FT_STAMP
        }
    }

    /// The digest that stamps a message to `dest` (0 if [`digested`](Self::digested) says not).
    #[inline(always)]
    pub(crate) fn digest(&self, dest: u32, tag: i32, context: u32, data: &[u8]) -> u64 {
        if self.digested.get(dest as usize).copied().unwrap_or(false) {
            nemesis_ft::digest::digest(&envelope(tag, context), data) ^ self.misdigest
        } else {
            0
        }
    }

    /// Applies the delivery that `req`'s receive was waiting for, if any (the application took
    /// its result).
    #[inline(never)]
    pub(crate) fn take_deferred(&mut self, req: Request) {
        if let Some(i) = self.deferred.iter().position(|&(r, _)| r == req) {
            let (_, d) = self.deferred.swap_remove(i);
            self.process.on_deliver(d);
        }
    }

    /// The FT state of rank `rank` of `size` with settings `cfg`; `job_id` names the job when the
    /// settings do not. A restarting process also returns the messages its checkpoint holds.
    pub(crate) fn new(
        cfg: FtConfig,
        rank: u32,
        size: u32,
        job_id: &str,
    ) -> Result<(Ft, Vec<checkpoint::SavedMessage>)> {
        let group_of = read_groups(&cfg.groups, size as usize)?;
        let topology = if cfg.distributed {
            Topology::with_coordinators(group_of.clone(), group_of)
        } else {
            Topology::new(group_of)
        };
        let topology = Arc::new(topology.map_err(|e| Error::Config(format!("groups: {e}")))?);
        let channel = match cfg.channel_fd {
            Some(fd) => {
                use std::os::fd::FromRawFd;
                // SAFETY: `nemesis-run` passed this descriptor, its end of the rank's channel, to
                // this process only; it is taken over once, here (the variable is read once).
                let sock = unsafe { std::os::unix::net::UnixStream::from_raw_fd(fd) };
                nemesis_shm::os::set_cloexec(fd)?;
                Some(channel::Channel::new(sock)?)
            }
            None => None,
        };
        let group = topology.group_of(rank)?;
        let partners: Vec<Rank> = topology.members(group)?.iter().copied().filter(|&r| r != rank).collect();
        let job_id = cfg.job.clone().unwrap_or_else(|| job_id.to_owned());
        let key = match &cfg.secret {
            Some(s) => checkpoint::CheckpointKey::new(s, &job_id),
            // Nothing reads these files but a restart, refused here: under another process
            // manager a restart by hand needs the secret the job ran with.
            None if cfg.restart.is_some() => {
                return Err(Error::Config(format!(
                    "{ENV_FT_RESTART} is set but {ENV_JOB_SECRET} is not: a restarted process checks its \
                     group's checkpoints with the job's secret (set it, the same, for the job and its restart)"
                )));
            }
            None => checkpoint::CheckpointKey::new(&JobSecret::generate()?, &job_id),
        };
        let job = key.job();
        let (dir, own_dir) = match cfg.dir.clone() {
            Some(d) => {
                files::given_dir(&d)?;
                (d, false)
            }
            None => {
                let d = std::env::temp_dir().join(format!("nemesis-ft-{job:016x}"));
                files::private_dir(&d)?;
                (d, true)
            }
        };
        let log_cfg = LogConfig { memory_limit: cfg.log_max, spill_dir: Some(dir.clone()), spill_limit: cfg.spill_max };
        let mut ft = Ft {
            process: Process::new(topology.clone(), rank, ProcessConfig::default())?,
            log: SenderLog::new(size as usize, log_cfg.clone()),
            group,
            partners,
            dir,
            own_dir,
            job,
            key,
            generation: 0,
            marks: vec![[0; 2]; size as usize],
            failed: vec![0; size as usize],
            skipped: vec![0; size as usize],
            attempt: 0,
            restart_round: cfg.restart.as_ref().map(|r| r.round),
            held: VecDeque::new(),
            deferred: Vec::new(),
            partial_control: Vec::new(),
            replays: Vec::new(),
            staged: Vec::new(),
            to_coordinator: Vec::new(),
            channel,
            retiring: Vec::new(),
            net_silent: Vec::new(),
            finish: false,
            replays_reported: (0, 0),
            restored: None,
            restored_mpi: None,
            gc_deferred: Vec::new(),
            stats: FtStats::default(),
            rdv_checks: Vec::new(),
            eager_checks: Vec::new(),
            misdigest: u64::from(std::env::var(ENV_FT_TEST_MISDIGESTED).is_ok_and(|v| v == "1")),
            inter: (0..size).map(|r| topology.group_of(r).is_ok_and(|g| g != group)).collect(),
            digested: {
                let undigested = std::env::var(ENV_FT_TEST_UNDIGESTED).is_ok_and(|v| v == "1");
                (0..size).map(|r| !undigested && topology.group_of(r).is_ok_and(|g| g != group)).collect()
            },
        };
        let mut saved = Vec::new();
        let restoring = cfg.restart.is_some().then(std::time::Instant::now);
        if let Some(r) = cfg.restart {
            let members = topology.members(group)?;
            let found = checkpoint::restart_point(&ft.dir, &ft.key, rank, members)?;
            let chosen = match &found.point {
                checkpoint::RestartPoint::Checkpoint(c) => Some(format!("generation {}", c.generation)),
                checkpoint::RestartPoint::Start => Some("the beginning".to_owned()),
                // The job ends, and says which files it found damaged.
                checkpoint::RestartPoint::Lost => None,
            };
            // The owner of a refused file reports it (once: the restart removes it).
            for (_, g, path, why) in found.refused.iter().filter(|f| f.0 == rank) {
                let Some(chosen) = &chosen else { break };
                let text = format!(
                    "checkpoint file {} (generation {g}) refused: {why}; group {group} restarts from {chosen}",
                    path.display()
                );
                tracing::warn!("{text}");
                if let Some(ch) = ft.channel.as_mut() {
                    ch.send(&channel::Frame::Warning { text });
                }
            }
            match found.point {
                checkpoint::RestartPoint::Checkpoint(c) => {
                    tracing::info!(rank, generation = c.generation, round = r.round, "restarting from checkpoint");
                    checkpoint::remove_all_but(&ft.dir, job, rank, Some(c.generation))?;
                    ft.process = Process::restart(topology, c.image.process, r.round, &r.groups)?;
                    let p = &ft.process;
                    ft.log = SenderLog::restore_stamped(size as usize, log_cfg, &c.image.log, |to| p.sent_to(to))?;
                    ft.generation = c.generation;
                    ft.stats.generation = c.generation;
                    ft.restored = Some(c.app);
                    ft.restored_mpi = Some(c.image.mpi);
                    saved = c.image.unexpected;
                }
                checkpoint::RestartPoint::Lost => {
                    // Starting over would contradict what the other groups may have been told
                    // (their logs acknowledged up to a lost checkpoint).
                    let damaged: Vec<String> = found.refused.iter().map(|f| f.2.display().to_string()).collect();
                    let text = format!(
                        "no checkpoint of group {group} in {} can be loaded (damaged: {}), and the other groups' \
                         logs may no longer reach back to the beginning: cannot recover",
                        ft.dir.display(),
                        damaged.join(", ")
                    );
                    if let Some(ch) = ft.channel.as_mut() {
                        ch.send(&channel::Frame::Unrecoverable { text: text.clone() });
                    }
                    return Err(Error::Checkpoint(format!("rank {rank} restarts but {text}")));
                }
                checkpoint::RestartPoint::Start => {
                    // No generation of the group was ever durable: from the start of the program,
                    // the engine's state at date 0 (Fig 6.3 line 1).
                    tracing::info!(rank, round = r.round, "restarting from the start (no checkpoint)");
                    checkpoint::remove_all_but(&ft.dir, job, rank, None)?;
                    let start = ProcessState {
                        rank,
                        date: 0,
                        phase: 1,
                        received: Vec::new(),
                        last_checkpoint_date: 0,
                        date_rule: DateRule::default(),
                    };
                    ft.process = Process::restart(topology, start, r.round, &r.groups)?;
                }
            }
        }
        if let Some(t) = restoring {
            ft.report_restore(t.elapsed());
        }
        Ok((ft, saved))
    }
}

impl Ft {
    /// Holds `msg` (an `Ack` or `Checkpointed`) for process `to` until the group's next durable
    /// checkpoint; one of each kind per peer is enough (their dates only grow).
    pub(crate) fn defer_gc(&mut self, to: Rank, msg: Control) {
        let kind = std::mem::discriminant(&msg);
        match self.gc_deferred.iter_mut().find(|(j, m)| *j == to && std::mem::discriminant(m) == kind) {
            Some((_, held)) => {
                if let (
                    Control::Ack { date: a } | Control::Checkpointed { date: a },
                    Control::Ack { date: b } | Control::Checkpointed { date: b },
                ) = (&mut *held, &msg)
                {
                    *a = (*a).max(*b);
                }
            }
            None => self.gc_deferred.push((to, msg)),
        }
    }

    /// A restarted process tells the launcher (before its [`channel::Frame::Running`]) how long
    /// the restore took and when its checkpoint file was written: the recovery's report.
    fn report_restore(&mut self, took: Duration) {
        self.stats.restore_time = took;
        let written = (self.generation > 0)
            .then(|| {
                std::fs::metadata(self.dir.join(checkpoint::file_name(self.job, self.process.rank(), self.generation)))
            })
            .and_then(|m| m.ok()?.modified().ok())
            .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
            .map_or(0, |d| d.as_micros() as u64);
        if let Some(ch) = self.channel.as_mut() {
            ch.send(&channel::Frame::Restored { read_us: took.as_micros() as u64, written_unix_us: written });
        }
    }

    /// At the end of a job (every rank past the closing barrier): removes this rank's checkpoint
    /// files, and rank 0 the directory if the ranks made it (best effort: a warning otherwise).
    pub(crate) fn finish(&self, rank: Rank) {
        if let Err(e) = checkpoint::remove_older(&self.dir, self.job, rank, u64::MAX) {
            tracing::warn!(error = %e, "removing checkpoint files at the end of the job");
        }
        if self.own_dir && rank == 0 {
            let _ = std::fs::remove_dir(&self.dir);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The short stamp's sequence number rebuilt around the expected one, across the 2^32
    /// boundary of its low half both ways; a digest checked on its low 32 bits; never 0.
    #[test]
    fn short_stamps_widen_across_the_low_half_wrapping() {
        let d = 0x1234_5678_9abc_def0u64;
        for next in [1u64, 2, (1 << 32) - 2, (1 << 32) - 1, 1 << 32, (1 << 32) + 1, 5 << 32, u64::MAX / 2] {
            for seq in [next.saturating_sub(3), next.saturating_sub(1), next, next + 1, next + 1000] {
                if seq == 0 {
                    continue;
                }
                let s = widen_stamp(seq as u32, d as u32, d, next);
                assert_eq!(s.seq, seq, "sequence {seq:#x} expected {next:#x}");
                assert_eq!(s.digest, d, "a right digest stays whole");
            }
        }
        // Near 2^32: the low half wrapped to 0..2 while 2^32 - 1 was expected, and the other way.
        assert_eq!(widen_stamp(1, 0, d, (1 << 32) - 1).seq, (1 << 32) + 1);
        assert_eq!(widen_stamp(u32::MAX, 0, d, (1 << 32) + 2).seq, (1 << 32) - 1);
        // A digest whose low half differs is not the arrival's: the engine refuses it.
        let bad = widen_stamp(5, d as u32 ^ 1, d, 5);
        assert_ne!(bad.digest, d);
        assert_eq!(bad.digest >> 32, d >> 32);
        // Rebuilt to 0 (read as unstamped, never checked): 2^32 instead, out of sequence.
        assert_eq!(widen_stamp(0, 0, d, 1).seq, 1 << 32);
        assert!(widen_stamp(0, 0, d, 1).is_some());
    }
    #[test]
    fn restart_settings_parse() {
        assert_eq!(parse_restart("3:1,4").unwrap(), Restart { round: 3, groups: vec![1, 4] });
        assert!(parse_restart("3").is_err());
        assert!(parse_restart("x:1").is_err());
        assert!(parse_restart("1:a").is_err());
        assert_eq!(parse_envelope(&envelope(-5, 9)), Some((-5, 9)));
        assert_eq!(parse_envelope(&[1, 2]), None);
    }

    /// Settings of a one-rank job `job` with checkpoints in `dir` (`None`: the default one).
    fn one_rank(job: &str, dir: Option<PathBuf>) -> FtConfig {
        let groups = std::env::temp_dir().join(format!("nemesis-ft-groups-{}-{job}", std::process::id()));
        std::fs::write(&groups, "0 0\n").unwrap();
        FtConfig {
            groups,
            dir,
            log_max: 1 << 20,
            spill_max: None,
            job: Some(job.into()),
            restart: None,
            channel_fd: None,
            distributed: false,
            secret: Some(JobSecret::generate().unwrap()),
        }
    }

    fn refused(r: Result<(Ft, Vec<checkpoint::SavedMessage>)>) -> files::UnsafeDir {
        match r {
            Err(Error::FtDir(u)) => *u,
            Err(e) => panic!("another error: {e}"),
            Ok(_) => panic!("accepted"),
        }
    }

    #[test]
    fn a_squatted_default_directory_is_refused() {
        use std::os::unix::fs::PermissionsExt;
        let pid = std::process::id();
        let default = |job: &str| std::env::temp_dir().join(format!("nemesis-ft-{:016x}", checkpoint::job_key(job)));
        // Made by the job's ranks: 0700, taken by the next rank.
        let job = format!("fresh-{pid}");
        let d = default(&job);
        let (ft, _) = Ft::new(one_rank(&job, None), 0, 1, "x").unwrap();
        assert!(ft.own_dir && ft.dir == d);
        assert!(Ft::new(one_rank(&job, None), 0, 1, "x").is_ok());
        ft.finish(0);
        assert!(!d.exists());
        // Writable by everyone.
        let job = format!("squat-{pid}-0");
        let d = default(&job);
        std::fs::create_dir(&d).unwrap();
        std::fs::set_permissions(&d, std::fs::Permissions::from_mode(0o777)).unwrap();
        let u = refused(Ft::new(one_rank(&job, None), 0, 1, "x"));
        assert_eq!((u.fault, u.mode, &u.path), (files::DirFault::NotPrivate, 0o777, &d));
        std::fs::remove_dir(&d).unwrap();
        // A link to a directory elsewhere.
        let job = format!("squat-{pid}-1");
        let d = default(&job);
        let target = std::env::temp_dir().join(format!("nemesis-ft-squat-target-{pid}"));
        std::fs::create_dir(&target).unwrap();
        std::fs::set_permissions(&target, std::fs::Permissions::from_mode(0o700)).unwrap();
        std::os::unix::fs::symlink(&target, &d).unwrap();
        assert_eq!(refused(Ft::new(one_rank(&job, None), 0, 1, "x")).fault, files::DirFault::Symlink);
        std::fs::remove_file(&d).unwrap();
        std::fs::remove_dir(&target).unwrap();
        // Another user's, private to them (as root in CI: made, then given to `nobody`).
        let job = format!("squat-{pid}-2");
        let d = default(&job);
        std::fs::create_dir(&d).unwrap();
        std::fs::set_permissions(&d, std::fs::Permissions::from_mode(0o700)).unwrap();
        if std::os::unix::fs::chown(&d, Some(65534), Some(65534)).is_ok() {
            let r = Ft::new(one_rank(&job, None), 0, 1, "x");
            let text = match &r {
                Err(e) => e.to_string(),
                Ok(_) => String::new(),
            };
            let u = refused(r);
            assert_eq!((u.fault, u.owner, u.mode), (files::DirFault::Owner, 65534, 0o700));
            assert!(text.contains(&d.display().to_string()) && text.contains("uid 65534"), "{text}");
        } else {
            eprintln!("not root: the other-owner case is not tried");
        }
        std::fs::remove_dir(&d).unwrap();
        for k in ["fresh-", "squat-"] {
            for n in ["", "-0", "-1", "-2"] {
                let _ = std::fs::remove_file(std::env::temp_dir().join(format!("nemesis-ft-groups-{pid}-{k}{pid}{n}")));
            }
        }
    }

    #[test]
    fn a_restart_without_the_jobs_secret_is_refused() {
        let dir = std::env::temp_dir().join(format!("nemesis-ft-nosecret-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let mut cfg = one_rank(&format!("nosecret-{}", std::process::id()), Some(dir.clone()));
        cfg.secret = None;
        cfg.restart = Some(Restart { round: 1, groups: vec![0] });
        let e = Ft::new(cfg.clone(), 0, 1, "x").err().unwrap();
        assert!(matches!(&e, Error::Config(t) if t.contains(ENV_JOB_SECRET)), "{e}");
        // Without a restart: a key of the rank's own.
        cfg.restart = None;
        assert!(Ft::new(cfg.clone(), 0, 1, "x").is_ok());
        std::fs::remove_file(&cfg.groups).unwrap();
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
