//! The root crate's one error enum.

use std::io;

/// Errors of the nemesis Endpoint, bootstrap and launcher.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// A rank outside `0..size` (or a negative one other than the wildcards).
    #[error("rank {rank} is out of range (the job has {size} ranks)")]
    InvalidRank {
        /// The rank given.
        rank: i64,
        /// Number of ranks.
        size: u32,
    },
    /// A tag that is negative (other than `ANY_TAG` on a receive).
    #[error("invalid tag {0}: tags are >= 0 (ANY_TAG only on receives)")]
    InvalidTag(i32),
    /// The message was longer than the receive buffer: the buffer holds its first `capacity`
    /// bytes, nothing was written past it. Sender and tag say which message it was (a wildcard
    /// receive has no other way to learn them; MPI fills the status of a truncated receive).
    #[error("message of {len} bytes from rank {sender} (tag {tag}) truncated to the {capacity}-byte receive buffer")]
    Truncated {
        /// The message's real length.
        len: usize,
        /// The buffer's length.
        capacity: usize,
        /// The sender's rank.
        sender: u32,
        /// The message's tag.
        tag: i32,
    },
    /// The peer died (or exited): nothing more will come from it, and nothing can be sent to it.
    #[error("rank {rank} died")]
    PeerDied {
        /// Its rank.
        rank: u32,
    },
    /// A message longer than any buffer can be (`isize::MAX` bytes): a length passed to a raw
    /// send that cannot be right.
    #[error("message of {len} bytes exceeds the largest possible message ({limit} bytes)")]
    TooLarge {
        /// Its length.
        len: usize,
        /// The eager limit.
        limit: usize,
    },
    /// A peer announced a rendezvous message (RTS) longer than the Endpoint can hold: more than
    /// any buffer can be (what user space maps, `nemesis_lmt::wire::LEN_MAX`: no send makes a
    /// longer one), refused where it arrived; or more than this node's memory, refused where a
    /// checkpoint would pull it in.
    /// Nothing was allocated for it; [`Endpoint::refused_rts`](crate::Endpoint::refused_rts)
    /// counts these.
    #[error("rank {sender} announced a rendezvous message of {len} bytes, over the {limit}-byte limit: refused")]
    RtsTooLong {
        /// The sender's rank.
        sender: u32,
        /// The length it claimed.
        len: u64,
        /// The limit it passed.
        limit: u64,
    },
    /// A request handle that is not (or no longer) valid.
    #[error("invalid or completed request")]
    InvalidRequest,
    /// The operation was cancelled ([`Endpoint::cancel_recv`](crate::Endpoint::cancel_recv),
    /// [`Endpoint::cancel_send`](crate::Endpoint::cancel_send)): its request completes with this.
    #[error("the operation was cancelled")]
    Cancelled,
    /// The conversation with the process manager failed (PMI-1, PMI-2 or PMIx).
    #[error("{msg}")]
    Pmi {
        /// The operation.
        op: &'static str,
        /// What went wrong, naming the interface, the process manager and the operation.
        msg: String,
    },
    /// Start-up failed for a reason other than PMI or the segment.
    #[error("bootstrap: {0}")]
    Bootstrap(String),
    /// A `NEMESIS_*` variable or launcher option has a bad value.
    #[error("configuration: {0}")]
    Config(String),
    /// The shared-memory core failed.
    #[error(transparent)]
    Shm(#[from] nemesis_shm::Error),
    /// A large-message transfer failed (a malformed rendezvous message, a corrupt ring, a refused
    /// single-copy read that could not fall back).
    #[error(transparent)]
    Lmt(#[from] nemesis_lmt::Error),
    /// The fault-tolerance engine (HydEE) refused an event or failed: a malformed piggyback or
    /// control message, a date or phase overflow, an exhausted sender log, a checkpoint during
    /// recovery.
    #[error("fault tolerance: {0}")]
    Ft(Box<nemesis_ft::Error>),
    /// A checkpoint could not be taken or written (the previous durable one stays in force).
    #[error("checkpoint: {0}")]
    Checkpoint(String),
    /// A checkpoint was asked for while operations of the application are outstanding: every
    /// request must be complete and waited for (or tested) first.
    #[error("checkpoint refused: {requests} operations are outstanding (complete them first: a checkpoint needs none)")]
    CheckpointOutstanding {
        /// Requests not yet completed and waited for, posted receives included.
        requests: usize,
    },
    /// A checkpoint file is torn or corrupt: it is never loaded.
    #[error("checkpoint file {} refused: {}", .0.0.display(), .0.1)]
    CheckpointCorrupt(Box<(std::path::PathBuf, String)>),
    /// A checkpoint file that is not this job's: its MAC (keyed by the job's secret) does not
    /// verify, or an authentic file lies under another rank's or generation's name. Never loaded.
    #[error("checkpoint file {} refused: {}", .0.0.display(), .0.1)]
    CheckpointForged(Box<(std::path::PathBuf, String)>),
    /// The fault-tolerance directory is not safe to use (another user's, writable by others, a
    /// link, not private): its path, owner, mode and what is wrong.
    #[error(transparent)]
    FtDir(Box<crate::ft::files::unsafe_dir::UnsafeDir>),
    /// The launcher could not start a rank's program (not found: a shell's exit code 127;
    /// found but not executable: 126).
    #[error("cannot start {program} (rank {rank}): {source}")]
    Spawn {
        /// The program.
        program: String,
        /// The rank being started.
        rank: u32,
        #[source]
        source: io::Error,
    },
    /// A system call failed.
    #[error("{op}: {source}")]
    Io {
        /// What was being done.
        op: &'static str,
        #[source]
        source: io::Error,
    },
}

impl Error {
    pub(crate) fn io(op: &'static str, source: io::Error) -> Self {
        Error::Io { op, source }
    }

    /// A failure of `op` in the conversation with `pm` (the interface and the process manager
    /// serving it, e.g. `PMI-2 (Slurm)`), which the message names first: `PMI-2 (Slurm):
    /// kvs-fence: the process manager closed the connection`. (One string rather than a field of
    /// its own: the error enum stays as small as the send path needs it.)
    pub(crate) fn pmi(pm: &str, op: &'static str, msg: String) -> Self {
        Error::Pmi { op, msg: format!("{pm}: {op}: {msg}") }
    }
}

impl From<nemesis_ft::Error> for Error {
    fn from(e: nemesis_ft::Error) -> Self {
        Error::Ft(Box::new(e))
    }
}

// The rare errors are boxed: a `Result` of the Endpoint's calls stays as small as before fault
// tolerance, and its `Ok` as cheap to return (one store) on the message paths.
const _: () = assert!(std::mem::size_of::<Error>() <= 48);

/// Result with this crate's [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;
