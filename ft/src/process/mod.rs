//! The HydEE application-process engine, [`Process`]: failure-free operation (Fig 6.3), restarting processes
//! (Fig 6.4) and processes that do not restart (Fig 6.5) of
//! `shared/papers/guermouche-2011-thesis-send-determinism-hydee.txt` (T:1948–1984, T:2011, T:2020–2044), with the
//! resolutions of `shared/reference/hydee.md` (\[R\]) and a few of our own (\[R+\], each kept under a test in
//! `tests/hydee`; the reasoning behind them is in `docs/design/hydee.md`).
//!
//! Sans-I/O: events come in as method calls; what the driver must do comes out as return values on the
//! per-message path ([`Outbound`], [`Reception`], [`Delivery`]) and as [`Action`]s, drained with
//! [`Process::poll_action`], everywhere else. Nothing here touches a file, a socket or a clock.
//!
//! - `events.rs`: those values;
//! - `failure_free.rs`: the per-message hooks ([`Process::on_send`], [`Process::on_receive`],
//!   [`Process::on_deliver`]) and their checked paths;
//! - `checkpoint.rs`: [`Process::checkpoint`], its durability and the acknowledgements it allows;
//! - `recovery.rs`: [`Process::restart`] and the survivor's part in a round;
//! - `stamps.rs`: the stamped hooks ([`Process::on_send_stamped`], [`Process::on_receive_stamped`]...): sequence
//!   numbers and digests that check a re-execution against the first one instead of trusting it.
//!
//! Invariants:
//! - Dates count sends only (\[R+\]): the n-th send of a process carries date n in every execution.
//!   [`DateRule::SendsAndReceptions`] keeps the figure's rule, for the test that shows it losing messages.
//! - The phase follows what the application received, not what arrived: it changes in [`Process::on_deliver`].
//! - Each hook has one fast path behind one guard; `set_fast_paths` is the only place that sets the guards.
//!
//! # Channels the driver must provide
//! FIFO per ordered pair of processes, control messages between two processes on the same FIFO as their
//! application messages; messages of a dead incarnation of a process either delivered before its `Restarted` or
//! not at all; messages to a process that fails are lost with it (its restart replays them).

mod checkpoint;
pub(crate) mod events;
mod failure_free;
mod recovery;
mod stamps;

use std::collections::VecDeque;
use std::sync::Arc;

use serde::{Deserialize, Serialize};

pub use checkpoint::ProcessState;
use checkpoint::{AckState, CheckpointStage};
pub use events::{Action, Delivery, Outbound, Reception};
use recovery::Recovery;

use crate::control::{Control, Endpoint};
use crate::log::LogIndex;
use crate::piggyback::{MAX_DATE, MAX_PHASE, Stamp};
use crate::rpp::Rpp;
use crate::topology::Topology;
use crate::{CoordinatorId, Date, Error, GroupId, Phase, Rank, Result, Round};

/// Which events advance a process's date.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub enum DateRule {
    /// Sends only: the n-th send of a process is dated n in every execution (\[R+\], the default).
    #[default]
    Sends,
    /// Sends and deliveries, as Fig 6.3 line 21 and T:1928 have it. Unsafe when the number of deliveries before a
    /// send varies between executions; kept to demonstrate it. Deliveries then take the checked path.
    SendsAndReceptions,
}

/// Everything this process keeps about one other rank. The hooks read `inter`, `sent` and the head of `received`
/// only: `#[repr(C)]` puts them in the first 64 bytes and the alignment starts every peer on a cache line, so the
/// fast paths touch one line per peer (the whole is 256 bytes; the rest is for checkpoints, recovery and the
/// checked stamps of `stamps.rs`).
#[repr(C, align(64))]
#[derive(Clone, Debug)]
struct Peer {
    /// The rank's group (fixed).
    group: GroupId,
    /// 1 if `group` is not this process's group, else 0 (fixed). A word rather than a `bool`: LLVM branches on
    /// `cmpl $0` directly, where a loaded `bool` made it materialise the send hook's flag first (three instructions
    /// more per send, measured with the hooks bench); and it saves comparing `group` with this process's.
    inter: u32,
    /// Messages sent to that rank: the per-destination sequence number of the last one (`stamps.rs`).
    sent: u64,
    /// `RPP[j]`; blank for ranks of this process's group. Its fast path is permitted exactly when `inter`, `ack`
    /// is `Idle` and the process is not in recovery (see [`Process::refresh_permits`]).
    received: Rpp,
    /// Only ever non-`Idle` for ranks of other groups.
    ack: AckState,
    /// `received.max_date` when the checkpoint being made durable was captured.
    captured_max: Date,
    /// `received.max_date` in this process's last durable checkpoint: that rank's log entries up to it are held
    /// by the checkpoint.
    checkpointed_max: Date,
    /// Highest `Ack` date received from that rank: its durable checkpoint holds what this process sent it below.
    ack_floor: Date,
    /// Sequence number of the last stamped message accepted from that rank (0: none).
    rx_seq: u64,
    /// `(date, stamp)` of the stamped messages `received` records, ascending by date.
    ///
    /// Invariant: it holds the stamp of every message accepted from that rank that the rank may still send again,
    /// those dated after the last [`Control::Checkpointed`] it sent (its group's durable checkpoint, which it
    /// never rolls back behind): a recovery of its group asks for the stamps of its orphans (every accepted
    /// message after the checkpoint it restarts from, [`Process::orphan_stamps`]), and a hole filled again is
    /// checked against its neighbours. So it is pruned there and only there, with `received`: neither an `Ack`
    /// (about what this process sent) nor this process's own checkpoint says what that rank can roll back to. A
    /// run in which that rank's group never checkpoints keeps one record per message (24 bytes): every one of
    /// them is an orphan if that group fails (it restarts from the beginning). Bounding it would take a
    /// digest of the run in place of the records (a protocol change: `OrphanStamps` carries one stamp per
    /// orphan).
    stamps: VecDeque<(Date, Stamp)>,
}

/// One application process's HydEE engine.
///
/// ```
/// use std::sync::Arc;
/// use nemesis_ft::{Outbound, Process, ProcessConfig, Reception, Topology};
/// let topo = Arc::new(Topology::new(vec![0, 0, 1])?);
/// let mut a = Process::new(topo.clone(), 0, ProcessConfig::default())?;
/// let mut c = Process::new(topo, 2, ProcessConfig::default())?;
/// // Rank 2 is in another group: the message must be logged.
/// let Outbound::Transmit { piggyback, log: true } = a.on_send(2)? else { unreachable!() };
/// let Reception::Deliver(delivery) = c.on_receive(0, piggyback)? else { unreachable!() };
/// c.on_deliver(delivery); // when the application receives it
/// assert_eq!(c.phase(), 2); // an inter-group reception moves to the sender's phase plus one
/// # Ok::<(), nemesis_ft::Error>(())
/// ```
#[derive(Debug)]
pub struct Process {
    // Read on every message.
    /// Number of sends so far (plus receptions under [`DateRule::SendsAndReceptions`]); at most `MAX_DATE`.
    date: Date,
    /// Sends take the fast path iff `date < fast_send_limit`: `MAX_DATE` outside recovery, 0 during a round.
    fast_send_limit: Date,
    /// At least 1; at least every phase delivered from the group, above every phase delivered from other groups.
    phase: Phase,
    /// Deliveries of a phase above it leave the fast path: `phase`, or 0 while `slow_deliver` (one comparison then
    /// covers both "the phase rises" and "every delivery must be checked").
    deliver_guard: Phase,
    /// Whether inter-group arrivals must take the checked path whatever the peer's state (recovery).
    slow_inter: bool,
    /// Whether deliveries must take the checked path (recovery: taint; thesis dates: deliveries count).
    slow_deliver: bool,
    /// Indexed by rank, this one included.
    peers: Vec<Peer>,
    group: GroupId,

    rank: Rank,
    coordinator: CoordinatorId,
    topology: Arc<Topology>,
    date_rule: DateRule,
    checkpoint: CheckpointStage,
    /// Date at this process's last durable checkpoint (0 before the first).
    last_checkpoint_date: Date,
    /// Latest recovery round heard of (0: none).
    round: Round,
    /// `Some` while a round involves this process.
    recovery: Option<Box<Recovery>>,
    /// Messages of rounds not started here yet, in arrival order.
    early: Vec<(Endpoint, Control)>,
    actions: VecDeque<Action>,
    /// Reused by recovery handlers.
    scratch: Vec<(Date, Phase)>,
}

/// Options of a [`Process`].
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ProcessConfig {
    pub date_rule: DateRule,
}

impl Process {
    /// A process at the start of the job: date 0, phase 1 (Fig 6.3 line 1).
    pub fn new(topology: Arc<Topology>, rank: Rank, config: ProcessConfig) -> Result<Process> {
        let state = ProcessState {
            rank,
            date: 0,
            phase: 1,
            received: Vec::new(),
            last_checkpoint_date: 0,
            date_rule: config.date_rule,
        };
        Process::from_state(topology, state, AckState::Idle)
    }

    fn from_state(topology: Arc<Topology>, state: ProcessState, ack: AckState) -> Result<Process> {
        let group = topology.group_of(state.rank)?;
        let coordinator = topology.coordinator_of(state.rank)?;
        if state.phase == 0 || state.phase > MAX_PHASE {
            return Err(Error::PhaseOverflow { phase: state.phase });
        }
        if state.date > MAX_DATE {
            return Err(Error::DateOverflow { date: state.date });
        }
        let mut peers: Vec<Peer> = topology
            .group_map()
            .iter()
            .map(|&g| Peer {
                group: g,
                inter: (g != group) as u32,
                sent: 0,
                received: Rpp::default(),
                ack: if g == group { AckState::Idle } else { ack },
                captured_max: 0,
                checkpointed_max: 0,
                ack_floor: 0,
                rx_seq: 0,
                stamps: VecDeque::new(),
            })
            .collect();
        let ranks = peers.len();
        for (j, r) in state.received {
            let peer = peers.get_mut(j as usize).ok_or(Error::UnknownRank { rank: j, ranks })?;
            if r.sent > state.date {
                return Err(Error::InvalidCheckpoint("more messages sent to a rank than sends in all"));
            }
            peer.sent = r.sent;
            if peer.group == group {
                if r.max_date != 0 || !r.runs.is_empty() || !r.stamps.is_empty() || r.last_seq != 0 {
                    return Err(Error::InvalidTopology("checkpointed RPP names a rank of the process's own group"));
                }
                continue;
            }
            peer.checkpointed_max = r.max_date;
            peer.received = Rpp::restore(&r)?;
            peer.rx_seq = r.last_seq;
            peer.stamps = stamps::restore(&r)?;
        }
        let mut p = Process {
            date: state.date,
            fast_send_limit: MAX_DATE,
            phase: state.phase,
            deliver_guard: state.phase,
            slow_inter: false,
            slow_deliver: false,
            peers,
            group,
            rank: state.rank,
            coordinator,
            topology,
            date_rule: state.date_rule,
            checkpoint: CheckpointStage::Idle,
            last_checkpoint_date: state.last_checkpoint_date,
            round: 0,
            recovery: None,
            early: Vec::new(),
            actions: VecDeque::new(),
            scratch: Vec::new(),
        };
        p.set_fast_paths();
        Ok(p)
    }

    /// Recomputes the fast-path guards from the state (the only place that sets them).
    fn set_fast_paths(&mut self) {
        let recovering = self.recovery.is_some();
        let thesis_dates = self.date_rule == DateRule::SendsAndReceptions;
        self.fast_send_limit = if recovering { 0 } else { MAX_DATE };
        self.slow_inter = recovering;
        self.slow_deliver = recovering || thesis_dates;
        self.deliver_guard = if self.slow_deliver { 0 } else { self.phase };
        self.refresh_permits();
    }

    /// Whether arrivals from a peer may take the RPP fast path: inter-group, no acknowledgement to handle, no
    /// recovery.
    fn fast_arrivals(slow_inter: bool, peer: &Peer) -> bool {
        peer.inter != 0 && !slow_inter && peer.ack == AckState::Idle
    }

    /// Recomputes every peer's fast-path permit.
    fn refresh_permits(&mut self) {
        let slow_inter = self.slow_inter;
        for peer in &mut self.peers {
            let permit = Process::fast_arrivals(slow_inter, peer);
            peer.received.set_permit(permit);
        }
    }

    #[cold]
    fn unknown(&self, rank: Rank) -> Error {
        Error::UnknownRank { rank, ranks: self.peers.len() }
    }

    // ------------------------------------------------------------------------------------------------------------
    // Control messages: acknowledgements and RPP pruning here, recovery rounds in `recovery.rs`.

    /// A control message from another process or a coordinator.
    pub fn on_control(&mut self, from: Endpoint, msg: Control, log: &impl LogIndex) -> Result<()> {
        match msg {
            Control::Ack { date } => {
                let j = self.outside_peer(from, "Ack")?;
                let peer = &mut self.peers[j as usize];
                peer.ack_floor = peer.ack_floor.max(date);
                self.actions.push_back(Action::DiscardLog { to: j, before: date });
                Ok(())
            }
            Control::Checkpointed { date } => {
                let j = self.outside_peer(from, "Checkpointed")?;
                let peer = &mut self.peers[j as usize];
                peer.received.prune_through(date);
                let gone = peer.stamps.partition_point(|s| s.0 <= date);
                peer.stamps.drain(..gone);
                Ok(())
            }
            Control::FailureNotice { round, restarting } => {
                self.check_my_coordinator(from, "FailureNotice")?;
                self.start_round(round, &restarting, log)
            }
            other => {
                let Some(round) = other.round() else {
                    return Err(self.unexpected(from, &other, "not handled by application processes"));
                };
                if round > self.round {
                    self.early.push((from, other));
                    return Ok(());
                }
                let current = self.recovery.as_deref().is_some_and(|r| r.round == round);
                if round < self.round || !current {
                    // A message of a finished or superseded round: its effects were recomputed since.
                    return Ok(());
                }
                self.on_round_message(from, other, log)
            }
        }
    }

    #[cold]
    fn unexpected(&self, from: Endpoint, msg: &Control, reason: &'static str) -> Error {
        Error::UnexpectedMessage { message: msg.name(), from: from.to_string(), reason }
    }

    fn outside_peer(&self, from: Endpoint, message: &'static str) -> Result<Rank> {
        let bad = |reason| Error::UnexpectedMessage { message, from: from.to_string(), reason };
        let Endpoint::Process(j) = from else {
            return Err(bad("only application processes send it"));
        };
        let peer = self.peers.get(j as usize).ok_or_else(|| self.unknown(j))?;
        if peer.group == self.group {
            return Err(bad("only processes of other groups send it"));
        }
        Ok(j)
    }

    fn check_my_coordinator(&self, from: Endpoint, message: &'static str) -> Result<()> {
        if from != Endpoint::Coordinator(self.coordinator) {
            return Err(Error::UnexpectedMessage {
                message,
                from: from.to_string(),
                reason: "only this process's recovery coordinator sends it",
            });
        }
        Ok(())
    }

    // ------------------------------------------------------------------------------------------------------------
    // Accessors.

    /// The next action for the driver, if any.
    pub fn poll_action(&mut self) -> Option<Action> {
        self.actions.pop_front()
    }

    /// Whether actions are waiting (cheap enough for a progress loop).
    pub fn has_actions(&self) -> bool {
        !self.actions.is_empty()
    }

    pub fn rank(&self) -> Rank {
        self.rank
    }

    pub fn group(&self) -> GroupId {
        self.group
    }

    /// Date of the last send.
    pub fn date(&self) -> Date {
        self.date
    }

    pub fn phase(&self) -> Phase {
        self.phase
    }

    /// Latest recovery round heard of (0: none).
    pub fn round(&self) -> Round {
        self.round
    }

    /// Whether a recovery round still involves this process.
    pub fn in_recovery(&self) -> bool {
        self.recovery.is_some()
    }

    /// Messages sent to `to` so far: the sequence number of the last (0 for unknown ranks).
    pub fn sent_to(&self, to: Rank) -> u64 {
        self.peers.get(to as usize).map_or(0, |p| p.sent)
    }

    /// Sequence number of the last stamped message accepted from `from` (0 if none).
    #[inline]
    pub fn last_seq_from(&self, from: Rank) -> u64 {
        self.peers.get(from as usize).map_or(0, |p| p.rx_seq)
    }

    /// Date of the last message delivered from `from` (0 if none, for unknown ranks and for the process's group).
    pub fn last_received(&self, from: Rank) -> Date {
        self.peers.get(from as usize).map_or(0, |p| p.received.max_date())
    }

    /// RPP entries recorded for sender `from`, `(date, phase)` ascending (empty for unknown ranks and for the
    /// process's own group). Expanded from the runs the process keeps: for inspection, not for a message path.
    pub fn received_from(&self, from: Rank) -> Vec<(Date, Phase)> {
        self.peers.get(from as usize).map_or_else(Vec::new, |p| p.received.entries())
    }
}
