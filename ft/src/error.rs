//! The crate's one error type.
//!
//! Every variant is something a caller or a peer can cause (a malformed message, an unknown rank, an event that
//! arrives in a state where the protocol does not allow it, an I/O failure of the spill file, a bad matrix): the
//! library returns it instead of panicking, and the variant says what the caller can act on.

use crate::{CoordinatorId, Date, GroupId, Phase, Rank, Round};

/// Errors of `nemesis-ft`.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// A rank outside `0..ranks` was named (by the caller or in a message).
    #[error("unknown rank {rank} (the job has {ranks} ranks)")]
    UnknownRank { rank: Rank, ranks: usize },

    /// A group id outside `0..groups` was named.
    #[error("unknown group {group} (the job has {groups} groups)")]
    UnknownGroup { group: GroupId, groups: usize },

    /// A recovery-coordinator id outside `0..coordinators` was named.
    #[error("unknown recovery coordinator {coordinator} (the job has {coordinators})")]
    UnknownCoordinator { coordinator: CoordinatorId, coordinators: usize },

    /// The rank-to-group or rank-to-coordinator map is not usable.
    #[error("invalid topology: {0}")]
    InvalidTopology(&'static str),

    /// The date no longer fits the 48 bits the piggyback gives it.
    #[error("date overflow: {date} does not fit in 48 bits")]
    DateOverflow { date: Date },

    /// The phase no longer fits the 40 bits the piggyback gives it.
    #[error("phase overflow: {phase} does not fit in 40 bits")]
    PhaseOverflow { phase: Phase },

    /// Bytes that should hold a piggyback or a control message are too short.
    #[error("truncated {what}: needed {needed} bytes, got {available}")]
    Truncated { what: &'static str, needed: usize, available: usize },

    /// A control message carries a wire version this build does not speak.
    #[error("unsupported control-message version {0}")]
    UnsupportedVersion(u8),

    /// A control message carries an unknown kind byte.
    #[error("unknown control-message kind {0}")]
    UnknownMessageKind(u8),

    /// A control message is followed by bytes that belong to no field.
    #[error("{0} trailing bytes after a control message")]
    TrailingBytes(usize),

    /// A decoded field holds a value the protocol never produces.
    #[error("invalid {field}: {value}")]
    InvalidField { field: &'static str, value: u64 },

    /// A saved process state does not hold together (a checkpoint read back from storage).
    #[error("invalid checkpoint: {0}")]
    InvalidCheckpoint(&'static str),

    /// A control message arrived where the protocol does not allow it (wrong sender, wrong state, duplicate).
    #[error("unexpected {message} from {from}: {reason}")]
    UnexpectedMessage { message: &'static str, from: String, reason: &'static str },

    /// A re-executed send does not match the first execution's, as its receiver recorded it: the application is
    /// not send-deterministic. `rank` sent (or replayed) message `seq` (its per-destination sequence number; 0 if
    /// unstamped) to `dest` at date `date`; `what` says which comparison failed. Raised by the restarted sender
    /// against the orphans its receiver reported, or by a receiver against the sequence and digest of what
    /// arrives; never turned into a duplicate or a drop.
    #[error("send determinism violated: rank {rank}'s message {seq} to rank {dest} (date {date}) {what}")]
    SendDeterminismViolated { rank: Rank, dest: Rank, seq: u64, date: Date, what: &'static str },

    /// A failure notice names this process's own group: the driver must restart it from its checkpoint.
    #[error("failure notice for round {round} names this process's group: restart it from its checkpoint")]
    RestartRequired { round: Round },

    /// Checkpoints are refused while a recovery round involves this process.
    #[error("checkpoint refused: recovery round {round} is in progress")]
    CheckpointDuringRecovery { round: Round },

    /// A checkpoint was started while the previous one is not yet durable or abandoned.
    #[error("checkpoint refused: the previous checkpoint is not yet durable")]
    CheckpointPending,

    /// Durability was reported for a checkpoint that was never started.
    #[error("no checkpoint is pending")]
    NoPendingCheckpoint,

    /// A log entry was appended with a date not above the last one logged for that destination.
    #[error("log entry for rank {to} out of order: date {date} after {last}")]
    LogOutOfOrder { to: Rank, date: Date, last: Date },

    /// The sender log has no entry for this destination and date.
    #[error("no logged message for rank {to} at date {date}")]
    LogEntryMissing { to: Rank, date: Date },

    /// The sender log holds as much as its bounds allow: its memory bound and its spill file's.
    #[error(
        "sender log exhausted: {memory_limit} bytes in memory and {spill_limit} bytes in the spill file are in use (raise the bounds, or checkpoint more often so that acknowledgements free the log)"
    )]
    LogExhausted { memory_limit: usize, spill_limit: u64 },

    /// The spill file failed.
    #[error("sender-log spill file: {0}")]
    Io(#[from] std::io::Error),

    /// The communication matrix has no rows.
    #[error("communication matrix is empty")]
    MatrixEmpty,

    /// A row of the communication matrix does not have as many columns as the first row.
    #[error("communication matrix row {row} has {len} columns, row 0 has {expected}")]
    MatrixRagged { row: usize, len: usize, expected: usize },

    /// The communication matrix is not square.
    #[error("communication matrix has {rows} rows and {cols} columns; it must be square (P x P)")]
    MatrixNotSquare { rows: usize, cols: usize },

    /// A cell of the communication matrix is not a non-negative finite number.
    #[error("communication matrix row {row} column {col}: {text:?} is not a non-negative number of bytes")]
    MatrixValue { row: usize, col: usize, text: String },

    /// A line of a groups file is not `<rank> <group>`.
    #[error("groups file line {line}: {text:?} is not `<rank> <group>` ({reason})")]
    GroupsLine { line: usize, text: String, reason: &'static str },

    /// A groups file names a rank the job does not have.
    #[error("groups file line {line}: rank {rank} is not in the job (it has {ranks} ranks, 0 to {last})", last = ranks.saturating_sub(1))]
    GroupsUnknownRank { line: usize, rank: u64, ranks: usize },

    /// A groups file gives a rank twice.
    #[error("groups file line {line}: rank {rank} was already given a group on line {first}")]
    GroupsDuplicateRank { line: usize, rank: Rank, first: usize },

    /// A groups file leaves a rank out.
    #[error("groups file gives no group to rank {rank} (every rank of the job needs one line)")]
    GroupsMissingRank { rank: Rank },

    /// The graph partitioner failed.
    #[error("graph partitioner failed: {0}")]
    Partitioner(String),
}

/// Shorthand for results of this crate.
pub type Result<T, E = Error> = std::result::Result<T, E>;
