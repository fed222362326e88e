//! Checkpoints, failures and the final checks of the simulator (`super`): the atomic group checkpoint (without
//! `Config::markers`), a failure's effect on channels and processes (restarts from the group's durable checkpoint,
//! or with markers from its newest complete generation, `markers.rs`), and what must hold at the end.

use std::collections::{BTreeMap, BTreeSet, VecDeque};

use nemesis_ft::{CoordinatorId, Date, Endpoint, GroupId, LogConfig, Process, ProcessState, Rank, SenderLog};

use super::{GroupCheckpoint, Packet, Proc, Saved, Sim, SimResult, Trace, err, markers};

impl Sim {
    // --------------------------------------------------------------------------------------------------------------
    // Checkpoints and failures.

    pub(super) fn capture_checkpoint(&mut self, g: GroupId) -> SimResult<()> {
        let members: Vec<Rank> = self.topo.members(g).map_err(err("members"))?.to_vec();
        if self.pending.contains_key(&g)
            || members
                .iter()
                .any(|&r| self.procs[r as usize].engine.in_recovery() || !self.procs[r as usize].queued.is_empty())
        {
            // The protocol refuses checkpoints during recovery; the group will checkpoint another time.
            return Ok(());
        }
        let mut saved = BTreeMap::new();
        for &r in &members {
            let proc_ = &mut self.procs[r as usize];
            let state: ProcessState = proc_.engine.checkpoint().map_err(|e| format!("rank {r} checkpoint: {e}"))?;
            let json = serde_json::to_string(&state).map_err(err("serialise"))?;
            let log = proc_.log.snapshot().map_err(err("log snapshot"))?;
            saved.insert(r, Saved { state_json: json, log, app: proc_.app.clone() });
        }
        let mut in_flight = Vec::new();
        for &a in &members {
            for &b in &members {
                if let Some(q) = self.channels.get(&(Endpoint::Process(a), Endpoint::Process(b))) {
                    in_flight.extend(q.iter().filter(|p| matches!(p, Packet::App { .. })).map(|p| (a, b, p.clone())));
                }
            }
        }
        self.pending.insert(g, GroupCheckpoint { members: saved, in_flight });
        let delay = self.rng.below(12) as u64;
        self.durability.push((self.step + delay, g));
        self.stats.checkpoints += 1;
        self.trace.push(Trace::Checkpoint { group: g, durable: false });
        Ok(())
    }

    pub(super) fn durable_checkpoint(&mut self, g: GroupId) -> SimResult<()> {
        let Some(ckpt) = self.pending.remove(&g) else {
            // The group failed before its checkpoint became durable.
            return Ok(());
        };
        for &r in ckpt.members.keys() {
            let proc_ = &mut self.procs[r as usize];
            proc_.engine.checkpoint_durable(&proc_.log).map_err(|e| format!("rank {r} durable: {e}"))?;
            self.drain(r)?;
        }
        self.durable.insert(g, ckpt);
        self.trace.push(Trace::Checkpoint { group: g, durable: true });
        Ok(())
    }

    pub(super) fn fail(&mut self, failed: &[GroupId]) -> SimResult<()> {
        self.round += 1;
        let round = self.round;
        self.stats.rounds += 1;
        // A failure during recovery restarts the unfinished round's groups again.
        let mut groups: BTreeSet<GroupId> = failed.iter().copied().collect();
        for c in &self.coordinators {
            if let Some(gs) = c.recovering_groups() {
                groups.extend(gs.iter().copied());
            }
        }
        let groups: Vec<GroupId> = groups.into_iter().collect();
        self.trace.push(Trace::Round { round, groups: groups.clone() });
        let restarting: BTreeSet<Rank> =
            (0..self.procs.len() as Rank).filter(|&r| groups.contains(&self.group(r))).collect();
        for &g in &groups {
            self.pending.remove(&g);
        }
        self.durability.retain(|(_, g)| !groups.contains(g));
        // Channels: what was addressed to a dead process is lost; of what a dead process had sent, a random prefix
        // gets through (FIFO: the rest is lost with it), ahead of anything its new incarnation sends.
        let keys: Vec<(Endpoint, Endpoint)> = self.channels.keys().copied().collect();
        for key in keys {
            let to_dead = matches!(key.1, Endpoint::Process(r) if restarting.contains(&r));
            let from_dead = matches!(key.0, Endpoint::Process(r) if restarting.contains(&r));
            if to_dead {
                self.channels.remove(&key);
            } else if from_dead && let Some(q) = self.channels.get_mut(&key) {
                let keep = self.rng.below(q.len() + 1);
                q.truncate(keep);
            }
        }
        let log_config =
            LogConfig { memory_limit: self.cfg.log_memory, spill_dir: Some(std::env::temp_dir()), spill_limit: None };
        for &g in &groups {
            // With markers the channels were flushed into the members' states: no channel state.
            let (generation, ckpt) = if self.cfg.markers {
                let (generation, members) = self.restart_generation(g)?;
                (generation, GroupCheckpoint { members, in_flight: Vec::new() })
            } else {
                (0, self.durable.get(&g).cloned().ok_or("no durable checkpoint")?)
            };
            for (&r, saved) in &ckpt.members {
                let state: ProcessState = serde_json::from_str(&saved.state_json).map_err(err("deserialise"))?;
                let engine = Process::restart(self.topo.clone(), state, round, &groups)
                    .map_err(|e| format!("rank {r} restart: {e}"))?;
                let ranks = self.procs.len();
                let log = if self.cfg.stamps {
                    SenderLog::restore_stamped(ranks, log_config.clone(), &saved.log, |to| engine.sent_to(to))
                } else {
                    SenderLog::restore(ranks, log_config.clone(), &saved.log)
                }
                .map_err(err("log restore"))?;
                let ckpt = markers::Member { generation, born: self.step, ..Default::default() };
                self.procs[r as usize] =
                    Proc { engine, log, app: saved.app.clone(), hold: false, queued: VecDeque::new(), ckpt };
                *self.stats.rollbacks.entry(r).or_default() += 1;
                self.trace.push(Trace::Rollback { rank: r, round });
            }
            for (a, b, p) in ckpt.in_flight {
                self.push(Endpoint::Process(a), Endpoint::Process(b), p);
            }
        }
        for &r in &restarting {
            self.drain(r)?;
        }
        for c in 0..self.coordinators.len() {
            self.coordinators[c].on_failure(round, &groups).map_err(|e| format!("coordinator {c} failure: {e}"))?;
            self.drain_coordinator(c as CoordinatorId);
        }
        Ok(())
    }

    // --------------------------------------------------------------------------------------------------------------
    // Final checks.

    pub(super) fn final_checks(&self) -> SimResult<()> {
        for (p, proc_) in self.procs.iter().enumerate() {
            let script = &self.program.scripts[p];
            if proc_.app.pc < script.len() {
                return Err(format!(
                    "deadlock: rank {p} stuck at op {} {:?} (hold {}, in recovery {}, round {}); {} events left",
                    proc_.app.pc,
                    script[proc_.app.pc],
                    proc_.hold,
                    proc_.engine.in_recovery(),
                    proc_.engine.round(),
                    self.schedule.len()
                ));
            }
            if proc_.engine.in_recovery() || proc_.hold || !proc_.queued.is_empty() {
                return Err(format!("rank {p} ends in recovery or holding a send"));
            }
            if let Some((n, stage)) = proc_.ckpt.attempt {
                return Err(format!("deadlock: rank {p} stuck in its checkpoint of generation {n} at {stage:?}"));
            }
            if proc_.app.sends != self.reference.sends[p] {
                return Err(format!("rank {p}'s sends differ from the failure-free run"));
            }
            if proc_.app.acc != self.reference.acc[p] {
                return Err(format!("rank {p}'s final state differs from the failure-free run"));
            }
            if proc_.app.delivered != self.reference.incoming[p] {
                let missing: Vec<_> = self.reference.incoming[p].difference(&proc_.app.delivered).collect();
                return Err(format!("rank {p} did not receive {missing:?}"));
            }
        }
        if let Some(((f, t), _)) = self.channels.iter().find(|(_, q)| !q.is_empty()) {
            return Err(format!("channel {f} -> {t} not empty at the end"));
        }
        if let Some(c) = self.coordinators.iter().position(|c| c.recovering_groups().is_some()) {
            return Err(format!("coordinator {c} ends with an unfinished round"));
        }
        if self.cfg.markers { self.check_log_gc_markers() } else { self.check_log_gc() }
    }

    /// Entries held by the destination's durable checkpoint are gone once it has received something newer.
    fn check_log_gc(&self) -> SimResult<()> {
        for k in 0..self.procs.len() as Rank {
            let ckpt = &self.durable[&self.group(k)].members[&k];
            let state: ProcessState = serde_json::from_str(&ckpt.state_json).map_err(err("deserialise"))?;
            for i in 0..self.procs.len() as Rank {
                if self.group(i) == self.group(k) {
                    continue;
                }
                let held: Date = state.received.iter().find(|(j, _)| *j == i).map_or(0, |(_, r)| r.max_date);
                let now = self.procs[k as usize].engine.last_received(i);
                if now > held
                    && let Some((d, _)) = self.procs[i as usize].log.entries(k).into_iter().find(|(d, _)| *d <= held)
                {
                    return Err(format!(
                        "rank {i} still logs date {d} for rank {k}, whose durable checkpoint holds up to {held} and which received {now} since"
                    ));
                }
            }
        }
        Ok(())
    }
}
