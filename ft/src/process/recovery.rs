//! Recovery roles of an application process: restarting from a checkpoint (Fig 6.4, T:2011) and surviving a
//! failure elsewhere (Fig 6.5, T:2020–2044) of `shared/papers/guermouche-2011-thesis-send-determinism-hydee.txt`,
//! with the resolutions of `shared/reference/hydee.md` (\[R\]) and our own (\[R+\], reasoned in
//! `docs/design/hydee.md`).
//!
//! A round starts with [`Process::restart`] (this process's group failed) or a `FailureNotice` (another group did).
//! The process then exchanges `Restarted` / `LastDate` with the processes of other groups, reports its logged phases
//! and orphan counts to its coordinator once, replays logged messages as `NotifySendLogged` releases them, and holds
//! its sends until `NotifySendMsg` gives a horizon that admits its taint.
//!
//! Invariants:
//! - At most one round involves the process (`Process::recovery`); a later round supersedes it and recomputes
//!   everything. Messages of a round not started here wait in `Process::early`.
//! - A logged message is replayed at most once per round; the report goes once.
//! - A process sends only while the coordinator's horizon admits its taint (or the send's own bound, when held).

use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::sync::Arc;

use super::Process;
use super::checkpoint::{AckState, ProcessState};
use super::events::Action;
use crate::control::{Control, Endpoint, Horizon};
use crate::log::LogIndex;
use crate::piggyback::{Piggyback, Stamp, round_tag};
use crate::topology::Topology;
use crate::{Date, Error, GroupId, Phase, Rank, Result, Round};

/// This process's part in one recovery round.
#[derive(Clone, Debug)]
pub(super) struct Recovery {
    pub(super) round: Round,
    /// `round_tag(round)`, stamped on what this process sends while released.
    pub(super) tag: u8,
    /// Whether this process's group restarted in this round.
    pub(super) restarting: bool,
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
    pub(super) awaiting_last_date: BTreeSet<Rank>,
    /// Restarting only: per destination, `(date, recorded phase, recorded stamp)` of the orphans still to
    /// regenerate, oldest first (the stamp is [`Stamp::NONE`] when the receiver did not stamp).
    pub(super) owed: BTreeMap<Rank, VecDeque<(Date, Phase, Stamp)>>,
    /// Restarting only: the `OrphanStamps` of ranks whose `LastDate` has not arrived yet.
    orphan_stamps: BTreeMap<Rank, Vec<Stamp>>,
    /// The smallest date in `owed` (`Date::MAX` if none): a send past it skipped an orphan.
    pub(super) next_owed: Date,
    /// Phase this process must wait for before sending: its phase at the notice (or its checkpoint's), raised by
    /// deliveries not released by this round.
    pub(super) taint: Phase,
    /// Best horizon heard from the coordinator; `None` before the first `NotifySendMsg`.
    pub(super) horizon: Option<Horizon>,
    /// The phase last announced with `MyPhase`.
    registered: Phase,
    /// Whether a send was refused since the last `ResumeSends`.
    pub(super) holding: bool,
    /// While `holding`: the phase the refused send waits for the horizon to admit — the taint of the process when
    /// the application made it (its call's phase, or less). \[R+\] Not the taint of now: a non-blocking send held
    /// back while the application goes on receiving would otherwise wait for phases its own message does not depend
    /// on, which can only clear once that message (a regenerated orphan, say) has gone: the round never ends
    /// (`tests/ft_recovery.rs`, `five_failures_in_one_run`, hung that way: the horizon at the restarted group's
    /// lowest orphan phase, its held sends waiting for a taint raised by the receives that followed them).
    pub(super) hold_bound: Phase,
    /// `NotifySendMsg(Unbounded)` arrived; only the stale-message filter may remain.
    pub(super) complete: bool,
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
            orphan_stamps: BTreeMap::new(),
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
    pub(super) fn may_send_at(&self, bound: Phase) -> bool {
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

    pub(super) fn update_next_owed(&mut self) {
        self.next_owed = self.owed.values().filter_map(|q| q.front().map(|o| o.0)).min().unwrap_or(Date::MAX);
    }
}

impl Process {
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

    pub(super) fn on_round_message(&mut self, from: Endpoint, msg: Control, log: &impl LogIndex) -> Result<()> {
        match msg {
            Control::Restarted { date, last_received, .. } => self.on_restarted(from, date, last_received, log),
            Control::LastDate { last_date, orphans, .. } => self.on_last_date(from, last_date, orphans, log),
            Control::OrphanStamps { stamps, .. } => self.on_orphan_stamps(from, stamps),
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

    /// A surviving process hears of a failure (Fig 6.5 line 6). A round already in progress is superseded: its
    /// restarting groups restart again and everything is recomputed.
    pub(super) fn start_round(&mut self, round: Round, restarting: &[GroupId], log: &impl LogIndex) -> Result<()> {
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
        let stamps = Process::orphan_stamps(&self.peers[k as usize].stamps, &orphans);
        if !stamps.is_empty() {
            let msg = Control::OrphanStamps { round: rec.round, stamps };
            self.actions.push_back(Action::Control { to: Endpoint::Process(k), msg });
        }
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
    pub(super) fn register_taint(&mut self) {
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
            let stamps = rec.orphan_stamps.remove(&j).unwrap_or_default();
            if !stamps.is_empty() && stamps.len() != orphans.len() {
                return Err(bad("the orphans and the stamps sent before them do not pair up"));
            }
            let stamps = stamps.into_iter().chain(std::iter::repeat(Stamp::NONE));
            rec.owed.insert(j, orphans.into_iter().zip(stamps).map(|((d, p), s)| (d, p, s)).collect());
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

    /// `OrphanStamps` from `j` at a restarting process: kept for the `LastDate` that follows it.
    fn on_orphan_stamps(&mut self, from: Endpoint, stamps: Vec<Stamp>) -> Result<()> {
        let j = self.outside_peer(from, "OrphanStamps")?;
        let Some(rec) = self.recovery.as_deref_mut() else {
            return Ok(());
        };
        if !rec.restarting || !rec.awaiting_last_date.contains(&j) || rec.orphan_stamps.contains_key(&j) {
            return Err(Error::UnexpectedMessage {
                message: "OrphanStamps",
                from: from.to_string(),
                reason: "not awaited: this process is not restarting, its LastDate came already, or it came twice",
            });
        }
        rec.orphan_stamps.insert(j, stamps);
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
}
