//! The group checkpoint as the endpoint runs it (`src/endpoint/checkpoint.rs`), in steps the scheduler interleaves
//! with deliveries, other processes' steps and failures ([`Config::markers`]; without it the simulator's
//! checkpoint is one atomic step).
//!
//! A member's attempt at generation `n` goes through [`Stage`]s, one step each:
//! 1. `Entering`: the group was asked to checkpoint; the member's application still runs until the member enters
//!    (`checkpoint()` is called at a point of the member's own program). Entering sends a marker (stage 0) to every
//!    partner behind everything it sent before, on the same FIFO.
//! 2. `Flushing`: the application is blocked; once every partner's stage-0 marker has arrived (every intra-group
//!    message sent before the partners' checkpoints has arrived and sits in the state) and no recovery round is
//!    under way, the member captures its state (engine, log, application) and its file of `n` is durable.
//! 3. `Written`: it tells the partners (stage-1 marker).
//! 4. `Told`: once every partner's stage-1 marker has arrived the group's generation `n` is durable for it: its
//!    files older than its previous generation go, the acknowledgements and RPP prunings held back since that
//!    previous generation are sent, and the engine is told (`checkpoint_durable`); what that emits (and any
//!    acknowledgement until the next durability) is held back in turn: the held-back generation, so that the
//!    older of the two retained generations can always be replayed.
//!
//! A restarted group takes the newest generation of which every member's file is present
//! (`src/ft/checkpoint.rs`, `restart_point`); with [`Config::damage`] the newest is refused now and then (a damaged
//! file) and the group falls back to the one before. Every other generation's files go. No channel state is saved:
//! the markers flushed it into the members' states.

use std::collections::BTreeMap;

use nemesis_ft::{Control, Endpoint, GroupId, Rank};

use super::{Packet, Saved, Sim, SimResult, Trace, err};

/// Where a member's checkpoint attempt is (module documentation); `Durable` is reached when the attempt is over.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Stage {
    Entering,
    Flushing,
    Written,
    Told,
    Durable,
}

/// A process's side of the group checkpoint.
#[derive(Clone, Debug, Default)]
pub(super) struct Member {
    /// The attempt under way: its generation and stage.
    pub(super) attempt: Option<(u64, Stage)>,
    /// Per partner: the newest generation of its stage-0 and stage-1 markers that arrived.
    pub(super) marks: BTreeMap<Rank, [u64; 2]>,
    /// The generation durable for this member (or restored).
    pub(super) generation: u64,
    /// Acknowledgements and RPP prunings held back until the next durability (one per destination and kind, the
    /// newest date).
    pub(super) deferred: Vec<(Rank, Control)>,
    /// The generation whose held-back messages the last durability released, with the new one, and the step.
    pub(super) released: Option<(u64, u64, u64)>,
    /// The step this incarnation started at (0: the first).
    pub(super) born: u64,
}

impl Member {
    /// Whether the application is inside `checkpoint()` (no step of its own).
    pub(super) fn blocks_app(&self) -> bool {
        matches!(self.attempt, Some((_, s)) if s != Stage::Entering)
    }

    /// Holds `msg` to `to` back, merged with one of its kind held for `to` (the later date wins).
    pub(super) fn defer(&mut self, to: Rank, msg: Control) {
        let kind = std::mem::discriminant(&msg);
        match self.deferred.iter_mut().find(|(j, m)| *j == to && std::mem::discriminant(m) == kind) {
            Some((_, Control::Ack { date: a } | Control::Checkpointed { date: a })) => {
                if let Control::Ack { date: b } | Control::Checkpointed { date: b } = msg {
                    *a = (*a).max(b);
                }
            }
            _ => self.deferred.push((to, msg)),
        }
    }
}

impl Sim {
    fn partners(&self, p: Rank) -> Vec<Rank> {
        let g = self.group(p);
        (0..self.procs.len() as Rank).filter(|&q| q != p && self.group(q) == g).collect()
    }

    /// `Event::Checkpoint(g)` with markers: every member's attempt at the group's next generation begins, unless a
    /// member is in a recovery round or still in the previous attempt (the group checkpoints another time).
    pub(super) fn begin_group_checkpoint(&mut self, g: GroupId) -> SimResult<()> {
        let members: Vec<Rank> = self.topo.members(g).map_err(err("members"))?.to_vec();
        if members
            .iter()
            .any(|&r| self.procs[r as usize].engine.in_recovery() || self.procs[r as usize].ckpt.attempt.is_some())
        {
            return Ok(());
        }
        let n = self.next_generation.entry(g).or_insert(0);
        *n += 1;
        let n = *n;
        for &r in &members {
            self.procs[r as usize].ckpt.attempt = Some((n, Stage::Entering));
        }
        self.stats.checkpoints += 1;
        self.fail_at_stage(g, Stage::Entering)
    }

    /// Whether `p` can take its next checkpoint step.
    pub(super) fn ckpt_enabled(&self, p: Rank) -> bool {
        let proc_ = &self.procs[p as usize];
        let Some((n, stage)) = proc_.ckpt.attempt else { return false };
        let marked = |k: usize| self.partners(p).iter().all(|q| proc_.ckpt.marks.get(q).is_some_and(|m| m[k] >= n));
        match stage {
            // No operation outstanding.
            Stage::Entering => proc_.queued.is_empty(),
            Stage::Flushing => marked(0) && !proc_.engine.in_recovery(),
            Stage::Written => true,
            Stage::Told => marked(1),
            Stage::Durable => false,
        }
    }

    /// `p`'s next checkpoint step, then the failures armed for the stage it reached.
    pub(super) fn ckpt_step(&mut self, p: Rank) -> SimResult<()> {
        let pi = p as usize;
        let (n, stage) = self.procs[pi].ckpt.attempt.ok_or("no checkpoint attempt")?;
        let g = self.group(p);
        let next = match stage {
            Stage::Entering => {
                for q in self.partners(p) {
                    self.push(Endpoint::Process(p), Endpoint::Process(q), Packet::Mark { generation: n, stage: 0 });
                }
                Stage::Flushing
            }
            Stage::Flushing => {
                let proc_ = &mut self.procs[pi];
                let state = proc_.engine.checkpoint().map_err(|e| format!("rank {p} checkpoint: {e}"))?;
                let json = serde_json::to_string(&state).map_err(err("serialise"))?;
                let log = proc_.log.snapshot().map_err(err("log snapshot"))?;
                let saved = Saved { state_json: json, log, app: proc_.app.clone() };
                self.files.entry(g).or_default().entry(n).or_default().insert(p, saved);
                self.trace.push(Trace::Checkpoint { group: g, durable: false });
                Stage::Written
            }
            Stage::Written => {
                for q in self.partners(p) {
                    self.push(Endpoint::Process(p), Endpoint::Process(q), Packet::Mark { generation: n, stage: 1 });
                }
                Stage::Told
            }
            Stage::Told => {
                let previous = self.procs[pi].ckpt.generation;
                if let Some(gens) = self.files.get_mut(&g) {
                    for files in gens.range_mut(..previous).map(|(_, f)| f) {
                        files.remove(&p);
                    }
                    gens.retain(|_, f| !f.is_empty());
                }
                for (j, msg) in std::mem::take(&mut self.procs[pi].ckpt.deferred) {
                    self.push(Endpoint::Process(p), Endpoint::Process(j), Packet::Ctl(msg.encode()));
                    self.trace.push(Trace::ControlSent { from: Endpoint::Process(p), to: Endpoint::Process(j), msg });
                }
                let proc_ = &mut self.procs[pi];
                proc_.engine.checkpoint_durable(&proc_.log).map_err(|e| format!("rank {p} durable: {e}"))?;
                proc_.ckpt.generation = n;
                proc_.ckpt.released = Some((previous, n, self.step));
                self.drain(p)?;
                self.trace.push(Trace::Checkpoint { group: g, durable: true });
                Stage::Durable
            }
            Stage::Durable => return Err("checkpoint step after durability".into()),
        };
        self.procs[pi].ckpt.attempt = (next != Stage::Durable).then_some((n, next));
        self.fail_at_stage(g, next)
    }

    /// A marker arrived at `p` from `q`.
    pub(super) fn mark(&mut self, q: Rank, p: Rank, generation: u64, stage: usize) {
        let m = self.procs[p as usize].ckpt.marks.entry(q).or_default();
        m[stage] = m[stage].max(generation);
    }

    /// The failures armed for a member of `g` reaching `stage` (`Event::FailAt`) happen now.
    fn fail_at_stage(&mut self, g: GroupId, stage: Stage) -> SimResult<()> {
        let Some(i) = self.fail_at.iter().position(|(s, of, _)| *s == stage && *of == g) else { return Ok(()) };
        let (_, _, groups) = self.fail_at.remove(i);
        *self.stats.failed_at.entry(stage).or_default() += 1;
        self.fail(&groups)
    }

    /// The generation group `g` restarts from: the newest every member has a file of (with [`Config::damage`],
    /// now and then the one before, its newest refused), every other generation's files removed.
    pub(super) fn restart_generation(&mut self, g: GroupId) -> SimResult<(u64, BTreeMap<Rank, Saved>)> {
        let members = self.topo.members(g).map_err(err("members"))?.len();
        let gens = self.files.entry(g).or_default();
        let mut complete: Vec<u64> = gens.iter().filter(|(_, f)| f.len() == members).map(|(&n, _)| n).collect();
        let mut chosen = complete.pop().ok_or_else(|| format!("group {g} has no complete generation"))?;
        if self.cfg.damage
            && let Some(&older) = complete.last()
            && self.rng.below(2) == 0
        {
            self.stats.fallbacks += 1;
            chosen = older;
        }
        gens.retain(|&n, _| n == chosen);
        Ok((chosen, gens[&chosen].clone()))
    }

    /// Markers mode: entries held by the older of the two generations a destination retains are gone from the
    /// senders' logs once its newer one is durable, if it received anything newer from the sender in between —
    /// unless the sender restarted since: its log is its checkpoint's again, and what it holds of the older
    /// window goes with the destination's next acknowledgement.
    pub(super) fn check_log_gc_markers(&self) -> SimResult<()> {
        let held = |k: Rank, n: u64, i: Rank| -> SimResult<Option<u64>> {
            let Some(saved) = self.files.get(&self.group(k)).and_then(|f| f.get(&n)).and_then(|f| f.get(&k)) else {
                return Ok(None);
            };
            let state: nemesis_ft::ProcessState =
                serde_json::from_str(&saved.state_json).map_err(err("deserialise"))?;
            Ok(Some(state.received.iter().find(|(j, _)| *j == i).map_or(0, |(_, r)| r.max_date)))
        };
        for k in 0..self.procs.len() as Rank {
            let Some((older, newer, at)) = self.procs[k as usize].ckpt.released else { continue };
            let senders = (0..self.procs.len() as Rank).filter(|&i| self.group(i) != self.group(k));
            for i in senders.filter(|&i| self.procs[i as usize].ckpt.born < at) {
                let (Some(old), Some(new)) = (held(k, older, i)?, held(k, newer, i)?) else { continue };
                if new > old
                    && let Some((d, _)) = self.procs[i as usize].log.entries(k).into_iter().find(|(d, _)| *d <= old)
                {
                    return Err(format!(
                        "rank {i} still logs date {d} for rank {k}, whose generation {older} holds up to {old}, \
                         and generation {newer} (durable) up to {new}"
                    ));
                }
            }
        }
        Ok(())
    }
}
