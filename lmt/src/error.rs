//! The crate's error enum.

/// Errors of the large-message transfer.
#[derive(Debug, thiserror::Error, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Error {
    /// A rendezvous message from a peer does not decode.
    #[error("malformed rendezvous message: {what} = {value:#x}")]
    Wire {
        /// What was wrong.
        what: &'static str,
        /// The value found.
        value: u64,
    },
    /// Shared state of a transfer (ring lengths, ring index, epoch, transfer id) is inconsistent:
    /// a faulty or hostile peer. Nothing was read or written out of bounds.
    #[error("corrupt transfer state: {what} = {value:#x}")]
    Corrupt {
        /// What was wrong.
        what: &'static str,
        /// The value found.
        value: u64,
    },
    /// A peer's rendezvous message names a process or memory that is not that peer's own: a pid
    /// other than the one it registered in the node's rank table, or a range outside what it
    /// announced. Refused: nothing was read or written.
    #[error("refused rendezvous message: {what} = {value:#x} (not what the peer registered or announced)")]
    Forged {
        /// What was wrong.
        what: &'static str,
        /// The value found.
        value: u64,
    },
    /// The process local rank `slot` registered in the node's rank table may not be named by a
    /// single copy (`process_vm_readv`/`writev`): it is this process, shares its memory, is gone,
    /// or is not the process that registered. Refused before any copy: the transfers with that
    /// peer go through rings, a HELP naming it is answered HELPED of nothing.
    #[error("local rank {slot}'s registered pid {pid} refused for single copies: {why}")]
    PeerProcess {
        /// The local rank whose slot names the pid.
        slot: u16,
        /// The pid the slot names.
        pid: u32,
        /// Why it is refused.
        why: Refusal,
    },
    /// An RTS announces a message longer than this process accepts ([`crate::Config::max_len`],
    /// at most [`crate::wire::LEN_MAX`]). Refused before anything moves.
    #[error("RTS of {len} bytes refused: longer than the {max}-byte limit")]
    TooLong {
        /// The length the RTS announced.
        len: u64,
        /// The limit.
        max: u64,
    },
    /// The peer of the transfer died.
    #[error("the peer of the transfer died")]
    PeerDied,
    /// A single-copy read failed for a reason other than permission.
    #[error("process_vm_readv: {0}")]
    Cma(String),
}

/// Why a peer's registered pid is refused for single copies ([`Error::PeerProcess`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Refusal {
    /// It is this process: a copy would read or write our own memory where the peer says.
    Own,
    /// It shares this process's address space (a thread of ours, or a `CLONE_VM` child).
    SameMemory,
    /// No live process has it (or it is not a process id).
    Dead,
    /// It is a thread, not a process (`pidfd_open` refuses it).
    NotProcess,
    /// A process lives there, but not the one that registered (its start time differs): the
    /// pid was reused.
    Reused,
    /// A process this one started (a copy would reach memory the peer cannot reach itself).
    Descendant,
}

impl std::fmt::Display for Refusal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Refusal::Own => "it is this process",
            Refusal::SameMemory => "it shares this process's memory",
            Refusal::Dead => "no live process has it",
            Refusal::NotProcess => "it names a thread, not a process",
            Refusal::Reused => "the process there is not the one that registered (pid reused)",
            Refusal::Descendant => "it is a process this one started",
        })
    }
}

/// Result with this crate's [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;
