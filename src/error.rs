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
    /// A request handle that is not (or no longer) valid.
    #[error("invalid or completed request")]
    InvalidRequest,
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

/// Result with this crate's [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;
