//! The HydEE application-process state machine: failure-free operation (Fig 6.3), restarting processes (Fig 6.4),
//! processes that do not restart (Fig 6.5), from `guermouche-2011-thesis-send-determinism-hydee.txt`
//! (lines 1948–1984, 2011 and 2020–2044), with the resolutions of `shared/reference/hydee.md` (\[R\]) and a few of
//! our own (\[R+\], each kept under a test in `tests/hydee`).
//!
//! Sans-I/O: events come in as method calls ([`Process::on_send`], [`Process::on_receive`],
//! [`Process::on_deliver`], [`Process::on_control`], [`Process::checkpoint`], [`Process::checkpoint_durable`],
//! [`Process::restart`]); what
//! the driver must do comes out as return values on the per-message path and as [`Action`]s, drained with
//! [`Process::poll_action`], everywhere else. Nothing here touches a file, a socket or a clock.
//!
//! # Failure-free hooks
//! [`Process::on_send`] returns the piggyback and whether the caller must copy the payload into the sender log.
//! A reception has two hooks, because HydEE needs two orders:
//! - [`Process::on_receive`] when the message *arrives*, in channel order: RPP, acknowledgements, duplicates and
//!   stale messages are about what the channel carried, and rely on its FIFO order;
//! - [`Process::on_deliver`] when the *application* receives it, in the application's order: the phase (Fig 6.3
//!   lines 13 and 20). \[R+\] Updating the phase on arrival makes it depend on timing: a re-executed process then
//!   computes other phases than the first time, and when a process that re-executed in one recovery round later
//!   survives another, its records contradict the phases its earlier messages left at others — the simulator
//!   found causal order broken that way (`tests/hydee`, `phases_follow_deliveries_not_arrivals`). HydEE's model
//!   has the phase change when the message is delivered to the application (Fig 6.3 line 22, T:1975: "Délivrer msg à
//!   l'application").
//!
//! The hooks allocate nothing in steady state and carry no tracing. Each has one fast path behind one "anything
//! unusual?" comparison, and every condition that needs more fails it: on send, the date against a limit that
//! recovery lowers to 0 (and that catches the date overflow); on arrival, the sender's RPP key ([`crate::rpp`]),
//! which matches only the next message of a steady run from a sender of another group with no acknowledgement due
//! and no recovery — anything else (a same-group sender, a run that starts or changes phase, a duplicate, an
//! overflow) goes on to the checked code; on delivery, the phase against a guard that recovery and the thesis
//! date rule lower to 0. The RPP records an arrival by extending an arithmetic run (one store) or, when the run
//! breaks, by pushing the finished run onto a vector whose capacity is kept across pruning.
//!
//! # Dates count sends only \[R+\]
//! Fig 6.3 increments the date on receptions too (T:1928; hydee.md's \[R\] says every reception counts). We count
//! sends only. Every use HydEE makes of a date compares it with another date *of the same sender's sends* (the
//! log, RPP, `Restarted`, `LastDate`, `Ack`); counting receptions only shifts those values by how many receptions
//! came before each send — which send-determinism does not fix (T:530 fixes the sends, not the receptions around
//! them: an application that tests for completions, `MPI_Test`/`MPI_Waitany`, receives more or fewer messages
//! before a given send depending on timing). A restarted process then regenerates the same messages with other
//! dates, and the comparisons misclassify orphans and duplicates: a message is lost or delivered twice. With sends
//! only, the n-th send of a process carries date n in every execution. [`DateRule::SendsAndReceptions`] keeps the
//! figure's rule so that the test showing the loss (`tests/hydee`,
//! `thesis_dates_break_when_deliveries_before_a_send_vary`) can run it.
//!
//! # Other resolutions of our own \[R+\]
//! - **Replay selection.** Fig 6.5 line 10 replays logged messages dated after `Date_redem`, the *restarting*
//!   process's date: a mix of two clocks. A restarting process instead tells each peer the date of the last message
//!   it had received from that peer when it checkpointed (`Restarted.last_received`), and the peer replays what is
//!   logged after it.
//! - **Orphan phases.** A regenerated orphan's phase need not equal the phase its receiver recorded (the
//!   deliveries before a send may differ between executions), but the coordinator counts orphans per *recorded*
//!   phase. `LastDate`
//!   therefore lists the `(date, recorded phase)` of each orphan; the restarting process notifies that phase, and a
//!   regenerated message that does not fall on the next listed date is a [`Error::SendDeterminismViolated`].
//! - **Released messages.** A process released in phase `h` may receive, afterwards, a message sent *before* the
//!   failure notice reached its sender — in a higher phase, possibly depending on an orphan — and it must not then
//!   send on its strength. Processes therefore track a *taint*: the phase of their state at the notice (or of their
//!   checkpoint), raised by every delivery not released by the current round (the piggyback's round tag says which
//!   are). They send only while the taint is within the coordinator's horizon, and announce a higher taint with a
//!   new `MyPhase`. Deliveries released by the round do not raise it: they depend on no pending orphan.
//! - **Stale messages at a restarting process.** Until a peer's `LastDate` arrives, its inter-group messages were
//!   sent before its failure notice (channels are FIFO; `LastDate` is the first thing it sends afterwards), are in
//!   its log, and will be replayed in phase order: they are dropped ([`Reception::Stale`]).
//! - **Acknowledgement window.** \[R\] says acks wait for the checkpoint to be durable; a message received between
//!   the state capture and durability is not in the checkpoint, so the ack carries the date of the *first* message
//!   received after the capture, not of the next one after durability.
//! - **RPP pruning.** \[R\] prunes RPP entries covered by the sender's group checkpoint; the sender says so with
//!   [`Control::Checkpointed`] once durable, to each outside peer it logged a message for since its previous one.
//! - **Messages lost in flight.** What a restarting process had sent a peer before its checkpoint and the peer
//!   never received (the failure took it) is in its restored log: `LastDate` says how far the peer got, and the
//!   rest is replayed in phase order like any logged message.
//! - **Logs after a restart.** A restored log may hold entries an `Ack` had dropped before the failure: each
//!   process answers a `Restarted` with an `Ack` for what its own durable checkpoint holds; and a regenerated
//!   orphan that checkpoint holds is not logged again ([`Outbound::Drop`]).
//! - **Arrivals undone.** HydEE's messages are atomic (T:502–525: reliable FIFO channels, fail-stop processes); a
//!   rendezvous is not: its announcement arrives (and is recorded, in channel order) long before its data. If the
//!   sender dies in between, the receiver has recorded a message it never got, and would drop the restarted
//!   sender's copy as an orphan. [`Process::on_receive_undone`] takes such an arrival back (a hole in the RPP if a
//!   later one from that sender arrived meanwhile); `Restarted` and `LastDate` then report dates below a hole
//!   where the message must be replayed rather than regenerated.
//! - **Failures during recovery.** A new round supersedes an unfinished one; its groups restart again (see
//!   [`crate::coordinator`]) and every process recomputes its part.
//!
//! # Channels the driver must provide
//! FIFO per ordered pair of processes, control messages between two processes on the same FIFO as their
//! application messages; messages of a dead incarnation of a process either delivered before its `Restarted` or
//! not at all; messages to a process that fails are lost with it (its restart replays them).

use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::sync::Arc;

use serde::{Deserialize, Serialize};

use crate::control::{Control, Endpoint, Horizon};
use crate::log::LogIndex;
use crate::piggyback::{MAX_DATE, MAX_PHASE, Piggyback, pack_phase, round_tag};
use crate::rpp::{ReceivedFrom, Rpp};
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

/// What the driver does with an application message the process is about to send.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Outbound {
    /// Put `piggyback` in the header and transmit; if `log`, first copy the payload into the sender log under
    /// `(destination, piggyback)` (inter-group message, Fig 6.3 lines 8–9).
    Transmit { piggyback: Piggyback, log: bool },
    /// A regenerated orphan (Fig 6.4 lines 16–17): the destination already has it. Do not transmit; copy it into
    /// the sender log under `(destination, piggyback)` (\[R\]: a later rollback of the destination's group needs it).
    LogOnly { piggyback: Piggyback },
    /// A regenerated orphan that the destination's durable checkpoint already holds (it acknowledged it): neither
    /// transmit nor log.
    Drop,
    /// Not now: keep the send pending and call [`Process::on_send`] again after [`Action::ResumeSends`]. Nothing
    /// changed in the process.
    Hold,
}

/// What the driver does with an application message that arrived.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Reception {
    /// Keep it for the application; when the application receives it, pass the [`Delivery`] to
    /// [`Process::on_deliver`].
    Deliver(Delivery),
    /// Drop it: sent before its sender heard of the failure, it will be replayed from the sender's log.
    Stale,
    /// Drop it: a message from that sender with this date or a later one was already delivered.
    Duplicate,
}

/// What delivering an accepted message to the application does to the receiving process: the phase it brings
/// (the sender's phase, plus one if the sender is in another group: Fig 6.3 lines 13 and 20) and the recovery
/// round that released it. The transport keeps it with the message between [`Process::on_receive`] and
/// [`Process::on_deliver`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Delivery {
    /// The phase (at most `MAX_PHASE`) in bits 0..40, the piggyback's release tag in bits 56..64: one word, so that
    /// a same-group delivery is the piggyback's word as it is, and [`Process::on_deliver`] compares it whole (a
    /// tag makes it large and sends it to the checked branch).
    phase_tag: u64,
}

impl Delivery {
    #[inline]
    pub(crate) const fn new(phase: Phase, tag: u8) -> Delivery {
        Delivery { phase_tag: pack_phase(phase, tag) }
    }

    /// From a phase and tag already packed as [`pack_phase`] does.
    #[inline]
    pub(crate) const fn packed(phase_tag: u64) -> Delivery {
        Delivery { phase_tag }
    }

    /// The phase the process moves to, at least, when the application receives the message.
    #[inline]
    pub const fn phase(&self) -> Phase {
        self.phase_tag & MAX_PHASE
    }

    fn released_in(&self, round: Round) -> bool {
        let tag = (self.phase_tag >> 56) as u8;
        tag != 0 && tag == round_tag(round)
    }
}

/// Work for the driver, produced by events other than the per-message hooks.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Action {
    /// Send a control message.
    Control { to: Endpoint, msg: Control },
    /// Transmit again the message logged for `to` at `piggyback.date()`, with this piggyback (its original date and
    /// phase, marked as released by the current round).
    Replay { to: Rank, piggyback: Piggyback },
    /// Drop the sender-log entries for `to` dated below `before`.
    DiscardLog { to: Rank, before: Date },
    /// Sends answered with [`Outbound::Hold`] may be tried again.
    ResumeSends,
}

/// The fault-tolerance part of a process checkpoint (Fig 6.3 line 25, less the application image and the log).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ProcessState {
    pub rank: Rank,
    pub date: Date,
    pub phase: Phase,
    /// RPP, for the senders with something recorded, ascending by rank.
    pub received: Vec<(Rank, ReceivedFrom)>,
    /// Date of this process's previous durable checkpoint.
    pub last_checkpoint_date: Date,
    pub date_rule: DateRule,
}

/// Acknowledgement duty toward one sender of another group (`RM[j]` of Fig 6.3, with the window of \[R+\]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum AckState {
    /// Nothing to acknowledge.
    Idle,
    /// A checkpoint was captured and nothing received since; `was_due` keeps the previous durable checkpoint's duty
    /// in case this one is abandoned.
    Armed { was_due: bool },
    /// A checkpoint was captured and `date` is the first message received since: acknowledged once durable.
    Noted { date: Date, was_due: bool },
    /// The last checkpoint is durable: acknowledge the next reception.
    Due,
}

/// Everything this process keeps about one other rank. The hooks read `inter` and the head of `received` only:
/// `#[repr(C)]` puts them in the first 56 bytes and the alignment starts every peer on a cache line, so the fast
/// paths touch one line per peer (the whole is 192 bytes; the rest is for checkpoints and recovery).
#[repr(C, align(64))]
#[derive(Clone, Debug)]
struct Peer {
    /// The rank's group (fixed).
    group: GroupId,
    /// 1 if `group` is not this process's group, else 0 (fixed). A word rather than a `bool`: LLVM branches on
    /// `cmpl $0` directly, where a loaded `bool` made it materialise the send hook's flag first (three instructions
    /// more per send, measured with the hooks bench); and it saves comparing `group` with this process's.
    inter: u32,
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
}

/// Whether a checkpoint's state has been captured and awaits durability.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum CheckpointStage {
    Idle,
    Captured { date: Date },
}

/// This process's part in one recovery round.
#[derive(Clone, Debug)]
struct Recovery {
    round: Round,
    /// `round_tag(round)`, stamped on what this process sends while released.
    tag: u8,
    /// Whether this process's group restarted in this round.
    restarting: bool,
    /// Groups restarting in this round.
    restarting_groups: BTreeSet<GroupId>,
    /// Members of restarting groups other than mine whose `Restarted` has not arrived (Fig 6.5 line 7).
    awaiting_restarted: BTreeSet<Rank>,
    /// Logged messages to replay, per destination, oldest first; phases ascend with dates (a process's phase
    /// never decreases). Entries leave when replayed (\[R\]: never twice).
    to_replay: BTreeMap<Rank, VecDeque<(Date, Phase)>>,
    /// Expected orphans per phase (hydee.md \[R\]: counts, not a set).
    orphan_counts: BTreeMap<Phase, u64>,
    /// Whether the report of Fig 6.5 lines 15–17 went out (it goes once, \[R\]).
    reported: bool,
    /// Restarting only: ranks outside my group whose `LastDate` has not arrived.
    awaiting_last_date: BTreeSet<Rank>,
    /// Restarting only: per destination, `(date, recorded phase)` of the orphans still to regenerate, oldest first.
    owed: BTreeMap<Rank, VecDeque<(Date, Phase)>>,
    /// The smallest date in `owed` (`Date::MAX` if none): a send past it skipped an orphan.
    next_owed: Date,
    /// Phase this process must wait for before sending: its phase at the notice (or its checkpoint's), raised by
    /// deliveries not released by this round.
    taint: Phase,
    /// Best horizon heard from the coordinator; `None` before the first `NotifySendMsg`.
    horizon: Option<Horizon>,
    /// The phase last announced with `MyPhase`.
    registered: Phase,
    /// Whether a send was refused since the last `ResumeSends`.
    holding: bool,
    /// While `holding`: the phase the refused send waits for the horizon to admit — the taint of the process when
    /// the application made it (its call's phase, or less). \[R+\] Not the taint of now: a non-blocking send held
    /// back while the application goes on receiving would otherwise wait for phases its own message does not depend
    /// on, which can only clear once that message (a regenerated orphan, say) has gone: the round never ends
    /// (`tests/ft_recovery.rs`, `five_failures_in_one_run`, hung that way: the horizon at the restarted group's
    /// lowest orphan phase, its held sends waiting for a taint raised by the receives that followed them).
    hold_bound: Phase,
    /// `NotifySendMsg(Unbounded)` arrived; only the stale-message filter may remain.
    complete: bool,
}

impl Recovery {
    fn new(round: Round, restarting: bool, taint: Phase) -> Recovery {
        Recovery {
            round,
            tag: round_tag(round),
            restarting,
            restarting_groups: BTreeSet::new(),
            awaiting_restarted: BTreeSet::new(),
            to_replay: BTreeMap::new(),
            orphan_counts: BTreeMap::new(),
            reported: false,
            awaiting_last_date: BTreeSet::new(),
            owed: BTreeMap::new(),
            next_owed: Date::MAX,
            taint,
            horizon: None,
            registered: 0,
            holding: false,
            hold_bound: 0,
            complete: false,
        }
    }

    /// Whether a send whose taint bound is `bound` may go.
    fn may_send_at(&self, bound: Phase) -> bool {
        if self.complete {
            return true;
        }
        if self.restarting && !self.awaiting_last_date.is_empty() {
            return false;
        }
        self.horizon.is_some_and(|h| h.admits(bound))
    }

    /// Whether the process is waiting for the coordinator to admit its taint (as opposed to waiting for its first
    /// release or for `LastDate`s).
    fn waiting_for_phase(&self) -> bool {
        !self.complete && self.horizon.is_some() && (!self.restarting || self.awaiting_last_date.is_empty())
    }

    fn update_next_owed(&mut self) {
        self.next_owed = self.owed.values().filter_map(|q| q.front().map(|o| o.0)).min().unwrap_or(Date::MAX);
    }
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
                received: Rpp::default(),
                ack: if g == group { AckState::Idle } else { ack },
                captured_max: 0,
                checkpointed_max: 0,
                ack_floor: 0,
            })
            .collect();
        let ranks = peers.len();
        for (j, r) in state.received {
            let peer = peers.get_mut(j as usize).ok_or(Error::UnknownRank { rank: j, ranks })?;
            if peer.group == group {
                return Err(Error::InvalidTopology("checkpointed RPP names a rank of the process's own group"));
            }
            peer.checkpointed_max = r.max_date;
            peer.received = Rpp::restore(&r)?;
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
    // Failure-free hooks (Fig 6.3 lines 6–22).

    /// Send hook: call before transmitting an application message to `to` (Fig 6.3 lines 6–10, Fig 6.4 lines 13–22).
    #[inline]
    pub fn on_send(&mut self, to: Rank) -> Result<Outbound> {
        let Some(peer) = self.peers.get(to as usize) else {
            return Err(self.unknown(to));
        };
        if self.date >= self.fast_send_limit {
            return self.send_checked(to, self.phase);
        }
        self.date += 1;
        Ok(Outbound::Transmit { piggyback: Piggyback::from_parts(self.date, self.phase, 0), log: peer.inter != 0 })
    }

    /// [`Process::on_send`] for a send the application made when this process was in phase `phase`, tried
    /// only now: a send [`Outbound::Hold`] held back (or one queued behind it), which a non-blocking send leaves
    /// to the transport while the application goes on — and may receive meanwhile. \[R+\] The message carries
    /// the phase of the application's send, not the current one: what the application received after it cannot
    /// be in the message, and a phase raised by such deliveries depends on when the hold was lifted, so a
    /// re-execution would log the same message under another phase than its receiver recorded — and a later
    /// round, releasing replays and orphans by phase, waits forever (`tests/ft_recovery.rs`,
    /// `early_sequential_failures`, hung that way). The date is the current one: held sends go in order.
    pub fn on_send_as_of(&mut self, to: Rank, phase: Phase) -> Result<Outbound> {
        if self.peers.get(to as usize).is_none() {
            return Err(self.unknown(to));
        }
        self.send_checked(to, phase.min(self.phase))
    }

    /// [`Process::on_send`]'s common case alone, for a transport's inline path: `Some((piggyback, log))` exactly
    /// when `on_send` would return `Outbound::Transmit { piggyback, log }` without going off its fast path (and
    /// with the same effect); `None`, with nothing changed, otherwise (call `on_send` then). No `Result` to carry:
    /// the caller keeps the piggyback in registers.
    #[inline(always)]
    pub fn send_fast(&mut self, to: Rank) -> Option<(Piggyback, bool)> {
        let peer = self.peers.get(to as usize)?;
        if self.date >= self.fast_send_limit {
            return None;
        }
        self.date += 1;
        Some((Piggyback::from_parts(self.date, self.phase, 0), peer.inter != 0))
    }

    /// [`Process::on_receive`] then [`Process::on_deliver`] for a message the application takes at once, in their
    /// common case alone (a transport's inline receive): `true` exactly when `on_receive` would return
    /// `Reception::Deliver` by one of its fast paths and leave no action, with the effect of both calls; `false`,
    /// with nothing changed, otherwise (call `on_receive` then).
    #[inline(always)]
    pub fn receive_deliver_fast(&mut self, from: Rank, pb: Piggyback) -> bool {
        let Some(peer) = self.peers.get_mut(from as usize) else {
            return false;
        };
        let delivery = if let Some(d) = peer.received.try_extend(pb) {
            d
        } else if peer.inter == 0 {
            Delivery::packed(pb.phase_tag())
        } else if let Some(d) = peer.received.try_extend_rising(pb) {
            d
        } else {
            return false;
        };
        // The fast paths queue no action: `actions` is as it was (empty on the caller's fast path).
        self.on_deliver(delivery);
        true
    }

    /// Arrival hook: call when an application message from `from` reaches this process, in the order of the
    /// channel (Fig 6.3 lines 11–18: RPP, acknowledgements). Its effect on the phase waits for
    /// [`Process::on_deliver`].
    #[inline]
    pub fn on_receive(&mut self, from: Rank, pb: Piggyback) -> Result<Reception> {
        let Some(peer) = self.peers.get_mut(from as usize) else {
            return Err(self.unknown(from));
        };
        // Other group, the next message of a steady run (lines 13–15): the RPP's fast path, which also stands for
        // "nothing unusual" (it is off for same-group peers, acknowledgements due and recovery).
        if let Some(delivery) = peer.received.try_extend(pb) {
            return Ok(Reception::Deliver(delivery));
        }
        if peer.inter == 0 {
            // Same group: nothing to record (line 20).
            return Ok(Reception::Deliver(Delivery::packed(pb.phase_tag())));
        }
        // Other group, a run whose phase rises (an exchange across groups): the second fast path.
        if let Some(delivery) = peer.received.try_extend_rising(pb) {
            return Ok(Reception::Deliver(delivery));
        }
        self.receive_checked(from, pb)
    }

    /// Delivery hook: call when the application receives a message accepted by [`Process::on_receive`], in the
    /// application's order (Fig 6.3 lines 13 and 20: the phase). Phases follow what the application has received,
    /// not what happens to have arrived, so a re-execution that receives in the same order computes the same
    /// phases whatever the timing of arrivals.
    #[inline]
    pub fn on_deliver(&mut self, delivery: Delivery) {
        // One comparison for the common case: the phase does not rise, no tag, nothing to check.
        if delivery.phase_tag > self.deliver_guard {
            if self.slow_deliver {
                return self.deliver_checked(delivery);
            }
            // A tag outside recovery (a released message arriving after the round ended) is only a phase here.
            let phase = delivery.phase();
            if phase > self.phase {
                self.phase = phase;
                self.deliver_guard = phase;
            }
        }
    }

    /// Undoes an arrival that [`Process::on_receive`] accepted from `from` at `date` when the transport cannot give
    /// the message to the application whole: a rendezvous whose sender died before its data had all moved (the
    /// message is the *arrival of its data*, not of its announcement). The sender restarts and regenerates it,
    /// and the arrival of that copy is accepted as new, where it would otherwise be dropped as an orphan. Its
    /// record leaves the RPP (`LastDate` does not list it as an orphan, so no `OrphanNotification` is waited
    /// for), and `RPP[j].Maxdate` goes back to the previous arrival, or, if a later message from `from` arrived
    /// meanwhile, the date stays a hole that the next arrival at that date fills. A phase the message brought
    /// with [`Process::on_deliver`] stays: a phase only orders replays, and a higher one only delays them.
    ///
    /// Call it once nothing more can arrive from the dead incarnation (the transport's channel from it is
    /// drained), before answering its restart's `Restarted`. Returns whether anything was recorded at `date`
    /// (nothing is for a sender of this process's group).
    pub fn on_receive_undone(&mut self, from: Rank, date: Date) -> Result<bool> {
        let slow_inter = self.slow_inter;
        let Some(peer) = self.peers.get_mut(from as usize) else {
            return Err(self.unknown(from));
        };
        if peer.inter == 0 {
            return Ok(false);
        }
        let undone = peer.received.unrecord(date);
        let permit = Process::fast_arrivals(slow_inter, peer);
        peer.received.set_permit(permit);
        Ok(undone)
    }

    #[cold]
    #[inline(never)]
    fn send_checked(&mut self, to: Rank, phase: Phase) -> Result<Outbound> {
        if self.date >= MAX_DATE {
            return Err(Error::DateOverflow { date: self.date + 1 });
        }
        let inter = self.peers[to as usize].group != self.group;
        let Some(rec) = self.recovery.as_deref_mut() else {
            self.date += 1;
            return Ok(Outbound::Transmit { piggyback: Piggyback::from_parts(self.date, phase, 0), log: inter });
        };
        let bound = phase.min(rec.taint);
        if !rec.may_send_at(bound) {
            if !rec.holding {
                tracing::debug!(rank = self.rank, to, bound, taint = rec.taint, horizon = ?rec.horizon, "HydEE: sends held");
            }
            rec.holding = true;
            rec.hold_bound = bound;
            self.register_taint();
            return Ok(Outbound::Hold);
        }
        let date = self.date + 1;
        let owed_here = rec.owed.get(&to).and_then(|q| q.front()).is_some_and(|o| o.0 == date);
        if date >= rec.next_owed && !owed_here {
            // The send that should regenerate the orphan dated `next_owed` went elsewhere, or was skipped.
            return Err(Error::SendDeterminismViolated { to, date, expected: rec.next_owed });
        }
        self.date = date;
        let tag = if rec.complete { 0 } else { rec.tag };
        let piggyback = Piggyback::from_parts(date, phase, tag);
        if !inter {
            return Ok(Outbound::Transmit { piggyback, log: false });
        }
        if owed_here
            && let Some(q) = rec.owed.get_mut(&to)
            && let Some(&(_, recorded_phase)) = q.front()
        {
            q.pop_front();
            tracing::debug!(rank = self.rank, to, date, recorded_phase, phase, "HydEE: orphan regenerated");
            if q.is_empty() {
                rec.owed.remove(&to);
            }
            rec.update_next_owed();
            let coordinator = self.topology.coordinator_of(to)?;
            let msg = Control::OrphanNotification { round: rec.round, phase: recorded_phase };
            self.actions.push_back(Action::Control { to: Endpoint::Coordinator(coordinator), msg });
            if date < self.peers[to as usize].ack_floor {
                return Ok(Outbound::Drop);
            }
            return Ok(Outbound::LogOnly { piggyback });
        }
        Ok(Outbound::Transmit { piggyback, log: true })
    }

    /// Inter-group arrivals off the fast path: the first messages of a run, phases that change, acknowledgements,
    /// recovery. Not `#[cold]`: a sender whose phase rises with every message (an exchange across groups) comes
    /// here every time.
    #[inline(never)]
    fn receive_checked(&mut self, from: Rank, pb: Piggyback) -> Result<Reception> {
        if let Some(rec) = self.recovery.as_deref()
            && rec.restarting
            && rec.awaiting_last_date.contains(&from)
        {
            return Ok(Reception::Stale);
        }
        let slow_inter = self.slow_inter;
        let peer = &mut self.peers[from as usize];
        let reception = peer.received.accept(pb)?;
        if reception == Reception::Duplicate {
            return Ok(reception);
        }
        match peer.ack {
            AckState::Idle | AckState::Noted { .. } => {}
            AckState::Armed { was_due } => peer.ack = AckState::Noted { date: pb.date(), was_due },
            AckState::Due => {
                peer.ack = AckState::Idle;
                let msg = Control::Ack { date: pb.date() };
                self.actions.push_back(Action::Control { to: Endpoint::Process(from), msg });
            }
        }
        let permit = Process::fast_arrivals(slow_inter, peer);
        peer.received.set_permit(permit);
        Ok(reception)
    }

    #[cold]
    #[inline(never)]
    fn deliver_checked(&mut self, delivery: Delivery) {
        let phase = delivery.phase();
        if phase > self.phase {
            self.phase = phase;
        }
        if let Some(rec) = self.recovery.as_deref_mut()
            && !rec.complete
            && !delivery.released_in(rec.round)
            && phase > rec.taint
        {
            rec.taint = phase;
            self.register_taint();
        }
        if self.date_rule == DateRule::SendsAndReceptions {
            // Saturates: the next send reports the overflow.
            self.date = (self.date + 1).min(MAX_DATE);
        }
    }

    // ------------------------------------------------------------------------------------------------------------
    // Checkpoints (Fig 6.3 lines 23–26) and acknowledgements (lines 27–29).

    /// Captures the FT state for a group checkpoint (save it with the application image and
    /// [`SenderLog::snapshot`](crate::SenderLog::snapshot)). Refused during recovery. Acknowledgements wait for
    /// [`Process::checkpoint_durable`] (\[R\]).
    pub fn checkpoint(&mut self) -> Result<ProcessState> {
        if let Some(rec) = &self.recovery {
            return Err(Error::CheckpointDuringRecovery { round: rec.round });
        }
        if self.checkpoint != CheckpointStage::Idle {
            return Err(Error::CheckpointPending);
        }
        self.checkpoint = CheckpointStage::Captured { date: self.date };
        for peer in self.peers.iter_mut().filter(|p| p.group != self.group) {
            peer.ack = AckState::Armed { was_due: peer.ack == AckState::Due };
            peer.captured_max = peer.received.max_date();
        }
        self.refresh_permits();
        Ok(self.state())
    }

    /// The last captured checkpoint is on stable storage: send the acknowledgements it allows and tell the peers
    /// this process logged messages for that their RPP entries up to its date can go.
    pub fn checkpoint_durable(&mut self, log: &impl LogIndex) -> Result<()> {
        let CheckpointStage::Captured { date } = self.checkpoint else {
            return Err(Error::NoPendingCheckpoint);
        };
        self.checkpoint = CheckpointStage::Idle;
        for (j, peer) in self.peers.iter_mut().enumerate() {
            if peer.group == self.group {
                continue;
            }
            let j = j as Rank;
            match peer.ack {
                AckState::Noted { date: first, .. } => {
                    peer.ack = AckState::Idle;
                    let msg = Control::Ack { date: first };
                    self.actions.push_back(Action::Control { to: Endpoint::Process(j), msg });
                }
                AckState::Armed { .. } => peer.ack = AckState::Due,
                AckState::Idle | AckState::Due => {}
            }
            peer.checkpointed_max = peer.captured_max;
            if log.last_logged(j) > self.last_checkpoint_date {
                let msg = Control::Checkpointed { date };
                self.actions.push_back(Action::Control { to: Endpoint::Process(j), msg });
            }
        }
        self.last_checkpoint_date = date;
        self.refresh_permits();
        Ok(())
    }

    /// The last captured checkpoint will never be durable: the previous durable one stays in force.
    pub fn checkpoint_abandoned(&mut self) -> Result<()> {
        if self.checkpoint == CheckpointStage::Idle {
            return Err(Error::NoPendingCheckpoint);
        }
        self.checkpoint = CheckpointStage::Idle;
        for (j, peer) in self.peers.iter_mut().enumerate() {
            peer.ack = match peer.ack {
                // The previous checkpoint was owed an ack on the first reception after it, which is this one.
                AckState::Noted { date, was_due: true } => {
                    let msg = Control::Ack { date };
                    self.actions.push_back(Action::Control { to: Endpoint::Process(j as Rank), msg });
                    AckState::Idle
                }
                AckState::Armed { was_due: true } => AckState::Due,
                AckState::Armed { was_due: false } | AckState::Noted { was_due: false, .. } => AckState::Idle,
                other => other,
            };
        }
        self.refresh_permits();
        Ok(())
    }

    /// The FT state as it would be checkpointed now.
    pub fn state(&self) -> ProcessState {
        let received = self
            .peers
            .iter()
            .enumerate()
            .filter(|(_, p)| !p.received.is_blank())
            .map(|(j, p)| (j as Rank, p.received.to_checkpoint()))
            .collect();
        ProcessState {
            rank: self.rank,
            date: self.date,
            phase: self.phase,
            received,
            last_checkpoint_date: self.last_checkpoint_date,
            date_rule: self.date_rule,
        }
    }

    // ------------------------------------------------------------------------------------------------------------
    // Recovery (Figs 6.4 and 6.5).

    /// A process of a failed group, restarted from its group's last durable checkpoint `state` (Fig 6.4 lines 4–10),
    /// in recovery round `round` where the groups `restarting` (this one among them) restart. Restore the sender
    /// log from the same checkpoint beside it.
    pub fn restart(
        topology: Arc<Topology>,
        state: ProcessState,
        round: Round,
        restarting: &[GroupId],
    ) -> Result<Process> {
        // The checkpoint is durable: its acknowledgements are owed on the next reception from each peer.
        let mut p = Process::from_state(topology, state, AckState::Due)?;
        if round == 0 {
            return Err(Error::InvalidField { field: "round", value: 0 });
        }
        let restarting = p.topology.restart_set(restarting)?;
        if !restarting.contains(&p.group) {
            return Err(Error::InvalidTopology("a restarted process's group must be among the restarting groups"));
        }
        tracing::info!(rank = p.rank, round, date = p.date, phase = p.phase, "HydEE: restarting from checkpoint");
        p.round = round;
        // The restored checkpoint is the durable one now.
        p.last_checkpoint_date = p.date;
        let mut rec = Recovery::new(round, true, p.phase);
        rec.restarting_groups = restarting.clone();
        for j in 0..p.peers.len() as Rank {
            let peer = &p.peers[j as usize];
            if peer.group == p.group {
                continue;
            }
            rec.awaiting_last_date.insert(j);
            if restarting.contains(&peer.group) {
                rec.awaiting_restarted.insert(j);
            }
            // Below a hole (an arrival undone, `on_receive_undone`): that message must come again.
            let msg = Control::Restarted { round, date: p.date, last_received: peer.received.complete_through() };
            p.actions.push_back(Action::Control { to: Endpoint::Process(j), msg });
        }
        rec.registered = p.phase;
        let msg = Control::MyPhase { round, phase: p.phase };
        p.actions.push_back(Action::Control { to: Endpoint::Coordinator(p.coordinator), msg });
        p.recovery = Some(Box::new(rec));
        p.set_fast_paths();
        p.report_if_ready();
        Ok(p)
    }

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
                self.peers[j as usize].received.prune_through(date);
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

    fn on_round_message(&mut self, from: Endpoint, msg: Control, log: &impl LogIndex) -> Result<()> {
        match msg {
            Control::Restarted { date, last_received, .. } => self.on_restarted(from, date, last_received, log),
            Control::LastDate { last_date, orphans, .. } => self.on_last_date(from, last_date, orphans, log),
            Control::NotifySendLogged { phase, .. } => {
                self.check_my_coordinator(from, "NotifySendLogged")?;
                self.on_notify_send_logged(phase);
                Ok(())
            }
            Control::NotifySendMsg { horizon, .. } => {
                self.check_my_coordinator(from, "NotifySendMsg")?;
                self.on_notify_send_msg(horizon)
            }
            other => Err(self.unexpected(from, &other, "meant for a recovery coordinator")),
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

    /// A surviving process hears of a failure (Fig 6.5 line 6). A round already in progress is superseded: its
    /// restarting groups restart again and everything is recomputed.
    fn start_round(&mut self, round: Round, restarting: &[GroupId], log: &impl LogIndex) -> Result<()> {
        if round <= self.round {
            return Ok(());
        }
        let restarting = self.topology.restart_set(restarting)?;
        if restarting.contains(&self.group) {
            return Err(Error::RestartRequired { round });
        }
        tracing::info!(rank = self.rank, round, phase = self.phase, ?restarting, "HydEE: failure notice");
        self.round = round;
        let mut rec = Recovery::new(round, false, self.phase);
        rec.restarting_groups = restarting.clone();
        // Sends refused in a superseded round are still waiting for a ResumeSends.
        rec.holding = self.recovery.as_deref().is_some_and(|r| r.holding);
        for &g in &restarting {
            rec.awaiting_restarted.extend(self.topology.members(g)?.iter().copied());
        }
        self.recovery = Some(Box::new(rec));
        self.set_fast_paths();
        self.replay_early(log)
    }

    /// Handles the stashed messages of the current round, drops those of older ones.
    fn replay_early(&mut self, log: &impl LogIndex) -> Result<()> {
        let early = std::mem::take(&mut self.early);
        for (from, msg) in early {
            match msg.round() {
                Some(r) if r == self.round => self.on_control(from, msg, log)?,
                Some(r) if r > self.round => self.early.push((from, msg)),
                _ => {}
            }
        }
        Ok(())
    }

    /// `Restarted` from a member `k` of a restarting group (Fig 6.5 lines 8–14, also played by restarting
    /// processes toward other failed groups: the \[R\] for two groups failing at once).
    fn on_restarted(&mut self, from: Endpoint, date: Date, last_received: Date, log: &impl LogIndex) -> Result<()> {
        let k = self.outside_peer(from, "Restarted")?;
        let Some(rec) = self.recovery.as_deref_mut() else {
            return Ok(());
        };
        if !rec.awaiting_restarted.remove(&k) {
            return Err(Error::UnexpectedMessage {
                message: "Restarted",
                from: from.to_string(),
                reason: "not awaited: the sender's group is not restarting in this round, or it was received twice",
            });
        }
        // LastDate to k, with the orphans k will regenerate ([R]: rpp[k], not rpp[j]).
        let rpp = &self.peers[k as usize].received;
        let mut orphans = Vec::new();
        rpp.expand_after(date, &mut orphans);
        for &(_, phase) in &orphans {
            *rec.orphan_counts.entry(phase).or_default() += 1;
        }
        // Below a hole that k's checkpoint holds in its log (`on_receive_undone`), so that k replays it.
        let msg = Control::LastDate { round: rec.round, last_date: rpp.last_date_for(date), orphans };
        self.actions.push_back(Action::Control { to: Endpoint::Process(k), msg });
        // k's restored log may hold entries an earlier Ack had dropped: acknowledge again what this process's
        // durable checkpoint holds, or they would wait for its next checkpoint.
        let held = self.peers[k as usize].checkpointed_max;
        if held > 0 {
            let msg = Control::Ack { date: held + 1 };
            self.actions.push_back(Action::Control { to: Endpoint::Process(k), msg });
        }
        // Replays: what k's checkpoint did not hold ([R+]: by k's own record of what it had received).
        self.scratch.clear();
        log.logged_after(k, last_received, &mut self.scratch);
        if !self.scratch.is_empty() {
            rec.to_replay.insert(k, self.scratch.drain(..).collect());
        }
        if last_received > 0 {
            self.actions.push_back(Action::DiscardLog { to: k, before: last_received + 1 });
        }
        self.report_if_ready();
        Ok(())
    }

    /// Once every `Restarted` is in, the one report of Fig 6.5 lines 15–17 (\[R\]: after the loop, once).
    fn report_if_ready(&mut self) {
        let Some(rec) = self.recovery.as_deref_mut() else {
            return;
        };
        // A restarting process also waits for every LastDate: they may add messages to replay.
        if rec.reported || !rec.awaiting_restarted.is_empty() || (rec.restarting && !rec.awaiting_last_date.is_empty())
        {
            return;
        }
        rec.reported = true;
        let round = rec.round;
        let phases: BTreeSet<Phase> = rec.to_replay.values().flatten().map(|e| e.1).collect();
        tracing::debug!(
            rank = self.rank,
            round,
            to_replay = ?rec.to_replay.iter().map(|(k, q)| (k, q.len(), q.front(), q.back())).collect::<Vec<_>>(),
            orphans = ?rec.orphan_counts,
            taint = rec.taint,
            phase = self.phase,
            date = self.date,
            "HydEE: report"
        );
        let counts: Vec<(Phase, u64)> = rec.orphan_counts.iter().map(|(&p, &c)| (p, c)).collect();
        let to = Endpoint::Coordinator(self.coordinator);
        self.actions.push_back(Action::Control {
            to,
            msg: Control::LoggedPhases { round, phases: phases.into_iter().collect() },
        });
        self.actions.push_back(Action::Control { to, msg: Control::OrphanCounts { round, counts } });
        if !rec.restarting {
            rec.registered = rec.taint;
            self.actions.push_back(Action::Control { to, msg: Control::MyPhase { round, phase: rec.taint } });
        }
    }

    /// Announces the phase a held send waits for (`hold_bound`), if the coordinator has not heard it last.
    fn register_taint(&mut self) {
        let Some(rec) = self.recovery.as_deref_mut() else {
            return;
        };
        if rec.holding
            && rec.waiting_for_phase()
            && !rec.may_send_at(rec.hold_bound)
            && rec.hold_bound != rec.registered
        {
            rec.registered = rec.hold_bound;
            let msg = Control::MyPhase { round: rec.round, phase: rec.hold_bound };
            self.actions.push_back(Action::Control { to: Endpoint::Coordinator(self.coordinator), msg });
        }
    }

    /// `LastDate` from `j` at a restarting process (Fig 6.4 lines 11–12).
    fn on_last_date(
        &mut self,
        from: Endpoint,
        last_date: Date,
        orphans: Vec<(Date, Phase)>,
        log: &impl LogIndex,
    ) -> Result<()> {
        let j = self.outside_peer(from, "LastDate")?;
        let my_date = self.date;
        let Some(rec) = self.recovery.as_deref_mut() else {
            return Ok(());
        };
        let bad = |reason| Error::UnexpectedMessage { message: "LastDate", from: from.to_string(), reason };
        if !rec.restarting || !rec.awaiting_last_date.remove(&j) {
            return Err(bad("not awaited: this process is not restarting, or it was received twice"));
        }
        if last_date > my_date && orphans.last().map(|o| o.0) != Some(last_date) {
            return Err(bad(
                "the last message received from this process postdates its checkpoint but is not an orphan",
            ));
        }
        if let Some(&(d, _)) = orphans.first() {
            if d <= my_date {
                return Err(bad("an orphan predates this process's checkpoint"));
            }
            if rec.complete {
                return Err(bad("orphans reported after the round completed"));
            }
            rec.owed.insert(j, orphans.into_iter().collect());
            rec.update_next_owed();
        }
        // [R+] What this process sent j before its checkpoint and j never received was lost in flight with the
        // failure: it is in the restored log, and is replayed like any logged message. (For a restarting j the
        // survivor role already scheduled it from j's `Restarted`.)
        let j_restarts = rec.restarting_groups.contains(&self.peers[j as usize].group);
        if !j_restarts {
            self.scratch.clear();
            log.logged_after(j, last_date, &mut self.scratch);
            if !self.scratch.is_empty() {
                rec.to_replay.insert(j, self.scratch.drain(..).collect());
            }
        }
        self.report_if_ready();
        self.maybe_resume();
        Ok(())
    }

    /// `NotifySendLogged(φ)` (Fig 6.5 lines 20–22): replay what is logged in phase at most φ, once (\[R\]).
    fn on_notify_send_logged(&mut self, phase: Phase) {
        let Some(rec) = self.recovery.as_deref_mut() else {
            return;
        };
        let round = rec.round;
        for (&to, queue) in rec.to_replay.iter_mut() {
            while let Some(&(date, p)) = queue.front() {
                if p > phase {
                    break;
                }
                queue.pop_front();
                let piggyback = Piggyback::from_parts(date, p, 0).with_round(round);
                self.actions.push_back(Action::Replay { to, piggyback });
            }
        }
        rec.to_replay.retain(|_, q| !q.is_empty());
    }

    /// `NotifySendMsg(horizon)` (Fig 6.4 line 10, Fig 6.5 line 18).
    fn on_notify_send_msg(&mut self, horizon: Horizon) -> Result<()> {
        let Some(rec) = self.recovery.as_deref_mut() else {
            return Ok(());
        };
        rec.horizon = Some(rec.horizon.map_or(horizon, |h| h.max(horizon)));
        if horizon == Horizon::Unbounded {
            if !rec.to_replay.is_empty() || !rec.owed.is_empty() {
                return Err(Error::UnexpectedMessage {
                    message: "NotifySendMsg",
                    from: format!("coordinator {}", self.coordinator),
                    reason: "the round completed while this process still had messages to replay or orphans to regenerate",
                });
            }
            rec.complete = true;
            tracing::info!(rank = self.rank, round = rec.round, "HydEE: recovery round complete");
        }
        self.maybe_resume();
        Ok(())
    }

    /// Emits `ResumeSends` when held sends may go, and leaves recovery when nothing of it is left.
    fn maybe_resume(&mut self) {
        let Some(rec) = self.recovery.as_deref_mut() else {
            return;
        };
        if rec.holding && rec.may_send_at(rec.hold_bound) {
            rec.holding = false;
            self.actions.push_back(Action::ResumeSends);
        }
        self.register_taint();
        let Some(rec) = self.recovery.as_deref_mut() else {
            return;
        };
        if rec.complete && rec.awaiting_last_date.is_empty() {
            self.recovery = None;
            self.set_fast_paths();
        }
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
