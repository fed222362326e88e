//! The HydEE recovery coordinator ("processus de redémarrage"): centralised (Fig 6.6, T:2064–2087) and
//! distributed (Fig 6.7, T:2099–2175) in one state machine, of `guermouche-2011-thesis-send-determinism-hydee.txt`.
//!
//! With one coordinator this is Fig 6.6: collect every process's report first (\[R\]: the figure has no initial
//! trigger; T:2058 starts once all have reported), count expected orphans per phase (\[R\]: counts), and release —
//! `NotifySendLogged(φ)` to the holders of logged messages of phase φ, `NotifySendMsg` to the processes whose phase
//! is φ — every phase φ such that no phase below φ has pending orphans (one strict `<` rule for every kind of
//! message, T:2009), each phase once (\[R\]: a released set).
//!
//! With several, each owns the processes [`Topology::coordinator_of`] gives it (Fig 6.7). Once its own processes
//! have all reported, a coordinator sends every coordinator (itself included) the phases in which its processes
//! expect orphans (`OrphanPhases`, Fig 6.7 line 17); when its processes have received every orphan of a phase it
//! sends `OrphansReceived(φ)` (line 30). A phase's orphans are pending while fewer `OrphansReceived(φ)` have come in
//! than coordinators listed φ — counted only once every list is in (\[R\]: the figure's counts depend on arrival
//! order), while `OrphansReceived` that arrive before are kept. \[R+\]: an `OrphanNotification` goes to the
//! coordinator of the orphan's *receiver*, the one that counted it (in the figure the restarting process notifies
//! its own coordinator, which never counted that orphan).
//!
//! The release test is expressed as a *horizon*: the lowest phase with pending orphans anywhere ([`Horizon::UpTo`])
//! or none ([`Horizon::Unbounded`], the round is over). `NotifySendMsg` carries it, so that a process whose phase
//! later rises knows whether it may still send; if not, it registers again with `MyPhase` and waits in the same way.
//!
//! A failure during recovery starts a new round; the driver passes the groups that restart in it, which must
//! include those of an unfinished round ([`Coordinator::recovering_groups`]): their processes restart again, and
//! every process recomputes its part from scratch.

use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::sync::Arc;

use crate::control::{Control, Endpoint, Horizon};
use crate::topology::Topology;
use crate::{CoordinatorId, Error, GroupId, Phase, Rank, Result, Round};

/// A control message the coordinator wants sent.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Outgoing {
    pub to: Endpoint,
    pub msg: Control,
}

/// What a member has reported in the current round.
#[derive(Clone, Copy, Debug, Default)]
struct Reported {
    my_phase: bool,
    logged_phases: bool,
    orphan_counts: bool,
}

impl Reported {
    fn complete(self) -> bool {
        self.my_phase && self.logged_phases && self.orphan_counts
    }
}

/// One recovery round, from the failure notice until no orphan is pending.
#[derive(Clone, Debug)]
struct RoundState {
    round: Round,
    /// Groups restarting in this round, ascending.
    restarting: Vec<GroupId>,
    /// What each member has sent; members absent from the map have sent nothing.
    reported: BTreeMap<Rank, Reported>,
    /// Members whose three reports are all in.
    complete_reports: usize,
    /// Whether this coordinator's `OrphanPhases` went out.
    list_sent: bool,
    /// Orphans this coordinator's processes still expect, per phase (`NbOrphPhase`); entries reaching 0 are removed.
    pending_local: BTreeMap<Phase, u64>,
    /// Coordinators whose `OrphanPhases` has not arrived.
    lists_missing: BTreeSet<CoordinatorId>,
    /// Per phase, how many coordinators listed it (`NbOrphelinRedem` before any decrement).
    listed: BTreeMap<Phase, u32>,
    /// Per phase, how many `OrphansReceived` arrived.
    cleared: BTreeMap<Phase, u32>,
    /// Logged phases not yet released, with the members holding messages of each (`MsgEPhase`).
    logged: BTreeMap<Phase, BTreeSet<Rank>>,
    /// Registered phases not yet admitted, with the members waiting on each (`Processus_phase`).
    waiting: BTreeMap<Phase, BTreeSet<Rank>>,
    /// `None` until every list is in; then the lowest phase with pending orphans, or `Unbounded`.
    horizon: Option<Horizon>,
}

/// One recovery coordinator.
///
/// ```
/// use std::sync::Arc;
/// use nemesis_ft::{Control, Coordinator, Endpoint, Topology};
/// let topo = Arc::new(Topology::new(vec![0, 1])?);
/// let mut c = Coordinator::new(topo, 0)?;
/// c.on_failure(1, &[1])?;
/// // Rank 0 survives and is told.
/// let out = c.poll_outgoing().unwrap();
/// assert_eq!(out.to, Endpoint::Process(0));
/// assert!(matches!(out.msg, Control::FailureNotice { round: 1, .. }));
/// # Ok::<(), nemesis_ft::Error>(())
/// ```
#[derive(Debug)]
pub struct Coordinator {
    /// This coordinator's id; it owns `topology.owned_by(id)`, never empty.
    id: CoordinatorId,
    /// The job's groups and coordinator map (shared, fixed).
    topology: Arc<Topology>,
    /// Latest round started (0: none).
    round: Round,
    /// `Some` while the latest round is unfinished.
    state: Option<Box<RoundState>>,
    /// Messages of rounds not started here yet, in arrival order.
    early: Vec<(Endpoint, Control)>,
    /// Messages to send, in the order they must be sent (per destination, FIFO matters).
    outgoing: VecDeque<Outgoing>,
}

impl Coordinator {
    /// Coordinator `id` of `topology`.
    pub fn new(topology: Arc<Topology>, id: CoordinatorId) -> Result<Coordinator> {
        topology.owned_by(id)?;
        Ok(Coordinator { id, topology, round: 0, state: None, early: Vec::new(), outgoing: VecDeque::new() })
    }

    /// The next message to send, if any.
    pub fn poll_outgoing(&mut self) -> Option<Outgoing> {
        self.outgoing.pop_front()
    }

    /// Latest round started (0: none).
    pub fn round(&self) -> Round {
        self.round
    }

    /// The groups of the unfinished round, if any: a failure now must restart them again with the new ones.
    pub fn recovering_groups(&self) -> Option<&[GroupId]> {
        self.state.as_deref().map(|s| s.restarting.as_slice())
    }

    /// The current horizon, once every coordinator's list is in.
    pub fn horizon(&self) -> Option<Horizon> {
        self.state.as_deref().and_then(|s| s.horizon)
    }

    fn send(&mut self, to: Endpoint, msg: Control) {
        self.outgoing.push_back(Outgoing { to, msg });
    }

    /// Recovery round `round` starts: the groups `restarting` restart from their checkpoints. The surviving members
    /// of this coordinator are told; the restarting ones report on their own when restarted.
    pub fn on_failure(&mut self, round: Round, restarting: &[GroupId]) -> Result<()> {
        if round <= self.round {
            return Err(Error::UnexpectedMessage {
                message: "failure",
                from: "the failure detector".into(),
                reason: "rounds must increase",
            });
        }
        let groups = self.topology.restart_set(restarting)?;
        let restarting: Vec<GroupId> = groups.into_iter().collect();
        tracing::info!(coordinator = self.id, round, ?restarting, "HydEE: recovery round starts");
        self.round = round;
        self.state = Some(Box::new(RoundState {
            round,
            restarting: restarting.clone(),
            reported: BTreeMap::new(),
            complete_reports: 0,
            list_sent: false,
            pending_local: BTreeMap::new(),
            lists_missing: (0..self.topology.coordinators() as CoordinatorId).collect(),
            listed: BTreeMap::new(),
            cleared: BTreeMap::new(),
            logged: BTreeMap::new(),
            waiting: BTreeMap::new(),
            horizon: None,
        }));
        let owned = self.topology.owned_by(self.id)?.to_vec();
        for p in owned {
            if !restarting.contains(&self.topology.group_of(p)?) {
                self.send(Endpoint::Process(p), Control::FailureNotice { round, restarting: restarting.clone() });
            }
        }
        let early = std::mem::take(&mut self.early);
        for (from, msg) in early {
            match msg.round() {
                Some(r) if r == round => self.on_control(from, msg)?,
                Some(r) if r > round => self.early.push((from, msg)),
                _ => {}
            }
        }
        Ok(())
    }

    /// A control message from a process or another coordinator.
    pub fn on_control(&mut self, from: Endpoint, msg: Control) -> Result<()> {
        let Some(round) = msg.round() else {
            return Err(unexpected(from, &msg, "exchanged between application processes only"));
        };
        if round > self.round {
            self.early.push((from, msg));
            return Ok(());
        }
        if round < self.round || self.state.is_none() {
            // A message of a superseded or finished round.
            return Ok(());
        }
        match msg {
            Control::MyPhase { phase, .. } => {
                // The first one is a report; later ones re-register a higher phase.
                let (p, _) = self.report(from, &msg, |r| &mut r.my_phase)?;
                self.register(p, phase)?;
                self.list_if_ready()
            }
            Control::LoggedPhases { ref phases, .. } => {
                let (p, first) = self.report(from, &msg, |r| &mut r.logged_phases)?;
                if !first {
                    return Err(unexpected(from, &msg, "received twice in one round"));
                }
                let state = self.state_mut()?;
                for &phase in phases {
                    state.logged.entry(phase).or_default().insert(p);
                }
                self.list_if_ready()
            }
            Control::OrphanCounts { ref counts, .. } => {
                let (_, first) = self.report(from, &msg, |r| &mut r.orphan_counts)?;
                if !first {
                    return Err(unexpected(from, &msg, "received twice in one round"));
                }
                let state = self.state_mut()?;
                for &(phase, count) in counts {
                    // Saturating: a peer's absurd count must not overflow (it then never clears, which stalls
                    // only the round it lied about).
                    let pending = state.pending_local.entry(phase).or_default();
                    *pending = pending.saturating_add(count);
                }
                self.list_if_ready()
            }
            Control::OrphanNotification { phase, .. } => {
                let Endpoint::Process(p) = from else {
                    return Err(unexpected(from, &msg, "sent by restarting processes only"));
                };
                let group = self.topology.group_of(p)?;
                let state = self.state_mut()?;
                if !state.restarting.contains(&group) {
                    return Err(unexpected(from, &msg, "the sender's group is not restarting"));
                }
                let Some(pending) = state.pending_local.get_mut(&phase) else {
                    return Err(unexpected(
                        from,
                        &msg,
                        "no orphan of that phase is expected by this coordinator's processes",
                    ));
                };
                *pending -= 1;
                if *pending == 0 {
                    state.pending_local.remove(&phase);
                    tracing::debug!(coordinator = self.id, round, phase, "HydEE: every orphan of the phase received");
                    self.broadcast(Control::OrphansReceived { round, phase })?;
                }
                Ok(())
            }
            Control::OrphanPhases { ref phases, .. } => {
                let c = self.coordinator(from, &msg)?;
                let state = self.state_mut()?;
                if !state.lists_missing.remove(&c) {
                    return Err(unexpected(from, &msg, "received twice in one round"));
                }
                for &phase in phases {
                    *state.listed.entry(phase).or_default() += 1;
                }
                self.release()
            }
            Control::OrphansReceived { phase, .. } => {
                self.coordinator(from, &msg)?;
                let state = self.state_mut()?;
                let cleared = state.cleared.entry(phase).or_default();
                *cleared = cleared.saturating_add(1);
                self.release()
            }
            other => Err(unexpected(from, &other, "not handled by recovery coordinators")),
        }
    }

    fn state_mut(&mut self) -> Result<&mut RoundState> {
        self.state.as_deref_mut().ok_or(Error::UnexpectedMessage {
            message: "round message",
            from: String::new(),
            reason: "no round in progress",
        })
    }

    /// Notes one of the three reports of member `from` (which one: `flag`); says whether it is the first of its
    /// kind this round.
    fn report(&mut self, from: Endpoint, msg: &Control, flag: fn(&mut Reported) -> &mut bool) -> Result<(Rank, bool)> {
        let p = self.member(from, msg)?;
        let state = self.state_mut()?;
        let reported = state.reported.entry(p).or_default();
        let first = !std::mem::replace(flag(reported), true);
        if first && reported.complete() {
            state.complete_reports += 1;
        }
        Ok((p, first))
    }

    fn member(&self, from: Endpoint, msg: &Control) -> Result<Rank> {
        match from {
            Endpoint::Process(p) if self.topology.coordinator_of(p)? == self.id => Ok(p),
            _ => Err(unexpected(from, msg, "sent by this coordinator's own processes only")),
        }
    }

    fn coordinator(&self, from: Endpoint, msg: &Control) -> Result<CoordinatorId> {
        match from {
            Endpoint::Coordinator(c) if (c as usize) < self.topology.coordinators() => Ok(c),
            _ => Err(unexpected(from, msg, "sent by recovery coordinators only")),
        }
    }

    /// Sends `msg` to every coordinator; this one's copy is handled at once.
    fn broadcast(&mut self, msg: Control) -> Result<()> {
        for c in 0..self.topology.coordinators() as CoordinatorId {
            if c != self.id {
                self.send(Endpoint::Coordinator(c), msg.clone());
            }
        }
        self.on_control(Endpoint::Coordinator(self.id), msg)
    }

    /// A process waits for `phase` to be admitted (Fig 6.6 line 11, and re-registrations).
    fn register(&mut self, p: Rank, phase: Phase) -> Result<()> {
        let state = self.state_mut()?;
        let round = state.round;
        match state.horizon {
            Some(h) if h.admits(phase) => {
                self.send(Endpoint::Process(p), Control::NotifySendMsg { round, horizon: h });
            }
            _ => {
                state.waiting.entry(phase).or_default().insert(p);
            }
        }
        Ok(())
    }

    /// Once every member has reported, tell every coordinator which phases have orphans here (Fig 6.7 line 17).
    fn list_if_ready(&mut self) -> Result<()> {
        let members = self.topology.owned_by(self.id)?.len();
        let state = self.state_mut()?;
        if state.list_sent || state.complete_reports < members {
            return Ok(());
        }
        state.list_sent = true;
        let round = state.round;
        let phases: Vec<Phase> = state.pending_local.keys().copied().collect();
        tracing::debug!(coordinator = self.id, round, ?phases, "HydEE: every report in");
        self.broadcast(Control::OrphanPhases { round, phases })
    }

    /// NotifyPhases (Fig 6.6 lines 16–24, Fig 6.7 lines 35–43): release everything the horizon admits.
    fn release(&mut self) -> Result<()> {
        let id = self.id;
        let state = self.state_mut()?;
        if !state.lists_missing.is_empty() {
            return Ok(());
        }
        let mut horizon = Horizon::Unbounded;
        for (&phase, &listed) in &state.listed {
            let cleared = state.cleared.get(&phase).copied().unwrap_or(0);
            if cleared > listed {
                return Err(Error::UnexpectedMessage {
                    message: "OrphansReceived",
                    from: format!("coordinators of round {}", state.round),
                    reason: "more than the coordinators that listed the phase",
                });
            }
            if cleared < listed {
                horizon = Horizon::UpTo(phase);
                break;
            }
        }
        if state.cleared.keys().any(|p| !state.listed.contains_key(p)) {
            return Err(Error::UnexpectedMessage {
                message: "OrphansReceived",
                from: format!("coordinators of round {}", state.round),
                reason: "for a phase no coordinator listed",
            });
        }
        if state.horizon == Some(horizon) {
            return Ok(());
        }
        state.horizon = Some(horizon);
        let round = state.round;
        tracing::debug!(coordinator = id, round, ?horizon, "HydEE: horizon");
        // Logged messages first, so that a process's replays precede its new messages on every channel.
        let mut replay_upto: BTreeMap<Rank, Phase> = BTreeMap::new();
        let released: Vec<Phase> = state.logged.keys().copied().filter(|&p| horizon.admits(p)).collect();
        for phase in released {
            for holder in state.logged.remove(&phase).unwrap_or_default() {
                replay_upto.insert(holder, phase);
            }
        }
        let mut admitted = BTreeSet::new();
        let ready: Vec<Phase> = state.waiting.keys().copied().filter(|&p| horizon.admits(p)).collect();
        for phase in ready {
            admitted.extend(state.waiting.remove(&phase).unwrap_or_default());
        }
        let done = horizon == Horizon::Unbounded;
        if done {
            self.state = None;
            tracing::info!(coordinator = id, round, "HydEE: recovery round complete");
        }
        for (holder, phase) in replay_upto {
            self.send(Endpoint::Process(holder), Control::NotifySendLogged { round, phase });
        }
        if done {
            admitted.extend(self.topology.owned_by(id)?.iter().copied());
        }
        for p in admitted {
            self.send(Endpoint::Process(p), Control::NotifySendMsg { round, horizon });
        }
        Ok(())
    }
}

#[cold]
fn unexpected(from: Endpoint, msg: &Control, reason: &'static str) -> Error {
    Error::UnexpectedMessage { message: msg.name(), from: from.to_string(), reason }
}
