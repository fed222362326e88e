//! `nemesis-ft`: fault tolerance for nemesis with the HydEE protocol (Guermouche's thesis, chapter 6:
//! `shared/papers/guermouche-2011-thesis-send-determinism-hydee.txt`, digest in `shared/reference/hydee.md`).
//!
//! HydEE splits the processes of a send-deterministic application into groups: coordinated checkpoints inside a
//! group, sender-based logging of the messages that cross groups, and phase-ordered replay so that after a failure
//! only the failed group rolls back (T:1912–1930). Why the engine departs from the thesis's figures where it does:
//! `docs/design/hydee.md`.
//!
//! The crate holds:
//! - the protocol as sans-I/O state machines: [`Process`] (an application process: failure-free, restarting and
//!   non-restarting roles, Figs 6.3–6.5) and [`Coordinator`] (the recovery process, centralised Fig 6.6 and
//!   distributed Fig 6.7);
//! - the message [`Piggyback`] (12 bytes) and its [`Stamp`] (16 bytes: per-destination sequence number and
//!   [`digest`] of the message, for checking re-executions), and the [`Control`] messages with their versioned
//!   wire encoding;
//! - the [`SenderLog`] store (memory, then a spill file), beside the engine rather than inside it;
//! - the grouping partitioner of chapter 4 ([`partition`]) behind the `nemesis-ft groups` command.
//!
//! # Driving the engine
//! The transport calls [`Process::on_send`] before each application send (it returns the piggyback, and whether
//! to copy the payload into the [`SenderLog`]), [`Process::on_receive`] on each arrival (in channel order) and
//! [`Process::on_deliver`] when the application receives the message, [`Process::checkpoint`] /
//! [`Process::checkpoint_durable`] around a group checkpoint, [`Process::on_control`] for each control message,
//! and applies the [`Action`]s it drains with [`Process::poll_action`]. A driver that stamps its messages (so that
//! a re-execution that is not send-deterministic is reported, not trusted) uses the `_stamped` variants of the
//! message hooks and of the log's append, read and restore (`process/stamps.rs`). The launcher feeds failures to the
//! [`Coordinator`]s and restarts the failed groups with [`Process::restart`]. The test suite's simulator
//! (`tests/hydee/sim.rs`) is a complete driver.

pub mod control;
pub mod coordinator;
pub mod digest;
mod error;
pub mod log;
pub mod matrix;
pub mod partition;
pub mod piggyback;
pub mod process;
pub mod rpp;
pub mod topology;

mod bisection;
#[cfg(feature = "metis")]
mod metis_bisection;

/// An application process's rank, from 0.
pub type Rank = u32;
/// A group id, from 0, dense.
pub type GroupId = u32;
/// A recovery coordinator's id, from 0, dense.
pub type CoordinatorId = u32;
/// A process's date: its number of sends so far (see [`process`]).
pub type Date = u64;
/// A HydEE phase, from 1.
pub type Phase = u64;
/// A recovery round, from 1; each failure (or set of simultaneous failures) starts one.
pub type Round = u64;

pub use control::{Control, Endpoint, Horizon};
pub use coordinator::{Coordinator, Outgoing};
pub use error::{Error, Result};
pub use log::{LogConfig, LogIndex, LogSnapshot, LoggedMessage, SenderLog};
pub use piggyback::{MAX_DATE, MAX_PHASE, PIGGYBACK_LEN, Piggyback, STAMP_LEN, Stamp};
pub use process::{Action, DateRule, Delivery, Outbound, Process, ProcessConfig, ProcessState, Reception};
pub use rpp::{ReceivedFrom, Run};
pub use topology::Topology;
