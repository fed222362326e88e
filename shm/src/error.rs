//! The crate's one error enum: each variant is something a caller can act on.

use std::io;

/// Errors of the shared-memory core.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// A system call failed.
    #[error("{op}: {source}")]
    Io {
        /// What was being done.
        op: &'static str,
        #[source]
        source: io::Error,
    },
    /// The backing store of the segment could not be reserved: `/dev/shm` is full, or a memory
    /// limit forbids it. Reported at creation, never as a SIGBUS later.
    #[error(
        "cannot reserve {bytes} bytes of shared memory for the segment ({source}); \
         free space in /dev/shm or lower NEMESIS cell/fastbox parameters"
    )]
    NoSpace {
        /// Size of the segment that did not fit.
        bytes: u64,
        #[source]
        source: io::Error,
    },
    /// Layout parameters out of range.
    #[error("invalid segment parameters: {0}")]
    InvalidParams(String),
    /// The mapped object is not a nemesis segment.
    #[error("not a nemesis segment (magic {found:#018x})")]
    BadMagic {
        /// The first eight bytes found.
        found: u64,
    },
    /// The segment was made by a build with another layout version.
    #[error("segment layout version {found}, this build uses {expected}")]
    VersionMismatch {
        /// Version in the segment.
        found: u32,
        /// Version of this build.
        expected: u32,
    },
    /// The header's parameters do not hash to the header's layout hash, or the caller expected
    /// other parameters.
    #[error("segment layout mismatch: header hash {found:#018x}, expected {expected:#018x}")]
    LayoutMismatch {
        /// Hash in (or computed from) the segment header.
        found: u64,
        /// Hash expected.
        expected: u64,
    },
    /// The object's size disagrees with the size its header's layout implies.
    #[error("segment is {found} bytes, its layout needs {expected}")]
    SizeMismatch {
        /// Size of the object.
        found: u64,
        /// Size required by the layout.
        expected: u64,
    },
    /// A rank number outside the segment's local ranks.
    #[error("local rank {rank} out of range (segment has {ranks} local ranks)")]
    BadRank {
        /// Rank given.
        rank: u32,
        /// Local ranks of the segment.
        ranks: u16,
    },
    /// A value read from shared memory is out of bounds or inconsistent: another local process
    /// is faulty or hostile. Nothing was read or written out of bounds.
    #[error("corrupt shared state: {what} = {value:#x}")]
    Corrupt {
        /// Which word.
        what: &'static str,
        /// Its value.
        value: u64,
    },
    /// The peer is dead (or has exited): its queue is sealed and nothing more can be sent to it.
    #[error("local rank {rank} is dead")]
    PeerDead {
        /// The dead peer's local rank.
        rank: u16,
    },
    /// A network module failed: a bad business card, a connection that cannot be made, a
    /// malformed frame from a peer, a socket error other than the peer's end.
    #[error("netmod: {0}")]
    Net(String),
    /// A remote peer (global rank) is dead or has left: nothing can be sent to it.
    #[error("rank {rank} is dead or has left")]
    NetPeerDead {
        /// Its global rank.
        rank: u32,
    },
    /// A message larger than the path it was given to can carry.
    #[error("message of {len} bytes exceeds the limit of {max} bytes")]
    TooLarge {
        /// Length of the message.
        len: usize,
        /// Largest length accepted.
        max: usize,
    },
    /// A segment descriptor whose size is not sealed: another process could shrink it under
    /// every rank (SIGBUS).
    #[error("the segment's memory file is not sealed against resizing")]
    NotSealed,
    /// A fragment was released on a port other than the one that polled it (it stays unreleased).
    #[error("a fragment was released on a port that did not poll it")]
    ForeignFragment,
    /// A dead rank cannot be restarted yet ([`crate::incarnation::reset_rank`]): try again once
    /// the live ranks have done their part.
    #[error("local rank {rank}: {what}")]
    NotReady {
        /// What is missing.
        what: &'static str,
        /// The rank concerned.
        rank: u16,
    },
    /// This process already has a port for that local rank: a rank has one consumer.
    #[error("local rank {rank} already has a port in this process")]
    PortOpen {
        /// The local rank.
        rank: u16,
    },
}

impl Error {
    #[cfg_attr(loom, allow(dead_code))]
    pub(crate) fn io(op: &'static str, source: io::Error) -> Self {
        Error::Io { op, source }
    }

    pub(crate) fn corrupt(what: &'static str, value: impl Into<u64>) -> Self {
        Error::Corrupt { what, value: value.into() }
    }
}

/// Result with this crate's [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;
