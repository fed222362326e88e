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
    /// The peer of the transfer died.
    #[error("the peer of the transfer died")]
    PeerDied,
    /// A single-copy read failed for a reason other than permission.
    #[error("process_vm_readv: {0}")]
    Cma(String),
}

/// Result with this crate's [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;
