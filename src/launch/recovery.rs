//! `nemesis-run --ft`: the launcher's side of HydEE recovery (`shared/reference/hydee.md`), a
//! sans-I/O state machine that the event loop (`supervise.rs`) drives with rank exits and the
//! frames of the ranks' channels ([`crate::contract::channel`]), and whose [`Step`]s it carries out.
//! The steps of a round and what is printed are in `docs/design/launcher.md` ("Recovery in the
//! launcher").
//!
//! It runs the engine's recovery coordinators (`nemesis_ft::Coordinator`): one for the job (Fig 6.6,
//! the default) or one per group (`--ft-recovery distributed`, Fig 6.7), and routes their messages.
//!
//! What holds:
//! - A round restarts whole groups: every live member of a failed group is killed, and the dead are
//!   restarted (same rank numbers, [`Step::Restart`]) only once every member has exited and every
//!   live rank has retired them.
//! - A death at any point starts a new round over the union of groups; a group that fails more than
//!   `--ft-max-restarts` times ends the job.
//! - The job ends once every rank reached the end of its program ([`Frame::Finishing`]) with no
//!   recovery under way ([`Frame::Finish`] to all).

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::{Instant, SystemTime};

use nemesis_ft::{Coordinator, CoordinatorId, Endpoint, GroupId, Rank, Round, Topology};

use crate::contract::channel::Frame;
use crate::error::{Error, Result};

/// Default of `--ft-max-restarts`: failures a group may have before the job ends.
pub const DEFAULT_MAX_RESTARTS: u32 = 10;

/// How many recovery coordinators the launcher runs (`--ft-recovery`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum RecoveryMode {
    /// One for the job (Fig 6.6).
    #[default]
    Centralised,
    /// One per group (Fig 6.7).
    Distributed,
}

impl RecoveryMode {
    /// The value of `NEMESIS_FT_RECOVERY` for the ranks.
    pub fn name(self) -> &'static str {
        match self {
            RecoveryMode::Centralised => "centralised",
            RecoveryMode::Distributed => "distributed",
        }
    }
}

/// What the event loop must do.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Step {
    /// Write `frame` to `rank`'s channel (and raise its mail flag).
    Send { rank: Rank, frame: Frame },
    /// SIGKILL `rank` (a live member of a group that restarts).
    Kill { rank: Rank },
    /// Reset these dead ranks in their segments and start them again in `round`, in which
    /// `groups` restart.
    Restart { ranks: Vec<Rank>, round: Round, groups: Vec<GroupId> },
    /// Print this line on the launcher's standard error.
    Print(String),
    /// End the job with this message.
    Fail { rank: Rank, message: String },
}

/// A death waiting for its line.
#[derive(Debug, Clone)]
struct Death {
    rank: Rank,
    how: String,
    group: GroupId,
    at: Instant,
    /// `at` on the wall clock (to compare with the time a checkpoint file was written).
    wall: SystemTime,
}

/// The figures of one recovery, as the `recovered` event gives them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Figures {
    pub(crate) rank: Rank,
    pub(crate) group: GroupId,
    pub(crate) generation: u64,
    pub(crate) recovery_us: u64,
    pub(crate) messages: u64,
    pub(crate) bytes: u64,
    pub(crate) read_us: u64,
    pub(crate) lost_work_us: u64,
}

/// What a restarted group said of its checkpoint ([`Frame::Restored`]), slowest member first.
#[derive(Debug, Clone, Copy, Default)]
struct Restored {
    read_us: u64,
    written_unix_us: u64,
}

/// The launcher's recovery state.
pub(crate) struct Recovery {
    topology: Arc<Topology>,
    coordinators: Vec<Coordinator>,
    max_restarts: u32,
    /// Failures per group.
    failures: Vec<u32>,
    round: Round,
    /// Groups of the latest round.
    groups: Vec<GroupId>,
    /// Whether each rank's process runs (started and not exited).
    alive: Vec<bool>,
    /// Members of restarting groups killed by us, not exited yet.
    killing: BTreeSet<Rank>,
    /// Dead ranks to restart.
    dead: BTreeSet<Rank>,
    /// Live ranks asked to retire the dead, and which of those they have not retired yet.
    retiring: BTreeMap<Rank, BTreeSet<Rank>>,
    retire_asked: bool,
    /// Restarted ranks that have not said they run.
    starting: BTreeSet<Rank>,
    /// When the last restarted rank of the round ran again.
    resumed_at: Option<Instant>,
    /// Checkpoint generation each restarted group restored.
    generation: BTreeMap<GroupId, u64>,
    /// Messages replayed in the round, and their payload bytes.
    replayed: u64,
    replayed_bytes: u64,
    /// Per restarted group, what its members said of its checkpoint.
    restored: BTreeMap<GroupId, Restored>,
    /// When the job started (the lost work of a group restarted from the start runs from it).
    started: SystemTime,
    /// The figures of every recovery completed so far.
    reported: Vec<Figures>,
    deaths: Vec<Death>,
    finishing: BTreeSet<Rank>,
    finished: bool,
}

impl Recovery {
    /// Recovery for a job whose rank `r` is in group `group_of[r]`.
    pub(crate) fn new(group_of: Vec<GroupId>, mode: RecoveryMode, max_restarts: u32) -> Result<Recovery> {
        let groups = group_of.iter().copied().max().map_or(0, |g| g as usize + 1);
        let n = group_of.len();
        let topology = match mode {
            RecoveryMode::Centralised => Topology::new(group_of),
            RecoveryMode::Distributed => Topology::with_coordinators(group_of.clone(), group_of),
        }
        .map_err(|e| Error::Config(format!("fault-tolerance groups: {e}")))?;
        let topology = Arc::new(topology);
        let coordinators = (0..topology.coordinators() as CoordinatorId)
            .map(|c| Coordinator::new(topology.clone(), c))
            .collect::<std::result::Result<Vec<_>, _>>()?;
        Ok(Recovery {
            topology,
            coordinators,
            max_restarts,
            failures: vec![0; groups],
            round: 0,
            groups: Vec::new(),
            alive: vec![true; n],
            killing: BTreeSet::new(),
            dead: BTreeSet::new(),
            retiring: BTreeMap::new(),
            retire_asked: false,
            starting: BTreeSet::new(),
            resumed_at: None,
            generation: BTreeMap::new(),
            replayed: 0,
            replayed_bytes: 0,
            restored: BTreeMap::new(),
            started: SystemTime::now(),
            reported: Vec::new(),
            deaths: Vec::new(),
            finishing: BTreeSet::new(),
            finished: false,
        })
    }

    /// Whether a recovery is under way (a round unfinished, or ranks dead or restarting).
    pub(crate) fn busy(&self) -> bool {
        !self.dead.is_empty()
            || !self.killing.is_empty()
            || !self.starting.is_empty()
            || self.coordinators.iter().any(|c| c.recovering_groups().is_some())
    }

    /// Rank `rank` ended with a clean exit (after [`Frame::Finish`]): nothing to recover.
    pub(crate) fn on_clean_exit(&mut self, rank: Rank) {
        if let Some(a) = self.alive.get_mut(rank as usize) {
            *a = false;
        }
    }

    /// Rank `rank` ended otherwise (`how`: "signal 9", "exit code 3").
    pub(crate) fn on_death(&mut self, rank: Rank, how: String) -> Result<Vec<Step>> {
        let mut steps = Vec::new();
        let Some(a) = self.alive.get_mut(rank as usize) else { return Ok(steps) };
        *a = false;
        self.finishing.remove(&rank);
        self.starting.remove(&rank);
        self.dead.insert(rank);
        // A rank that dies retires nothing more.
        self.retiring.remove(&rank);
        if self.killing.remove(&rank) {
            self.advance(&mut steps);
            return Ok(steps);
        }
        let g = self.topology.group_of(rank)?;
        self.failures[g as usize] += 1;
        if self.failures[g as usize] > self.max_restarts {
            steps.push(Step::Fail {
                rank,
                message: format!(
                    "rank {rank} died ({how}); group {g} failed {} times, more than --ft-max-restarts {}: ending the job",
                    self.failures[g as usize], self.max_restarts
                ),
            });
            return Ok(steps);
        }
        self.deaths.push(Death { rank, how, group: g, at: Instant::now(), wall: SystemTime::now() });
        // The round's groups: this one, an unfinished round's, and those of ranks still dead.
        let mut groups: BTreeSet<GroupId> = [g].into();
        for c in &self.coordinators {
            groups.extend(c.recovering_groups().unwrap_or(&[]).iter().copied());
        }
        for &d in &self.dead {
            groups.insert(self.topology.group_of(d)?);
        }
        self.round += 1;
        self.groups = groups.iter().copied().collect();
        // Those groups restart (again): what they restore is reported anew.
        for g in &self.groups {
            self.restored.remove(g);
        }
        tracing::info!(rank, round = self.round, groups = ?self.groups, "recovery round starts");
        for c in 0..self.coordinators.len() {
            self.coordinators[c].on_failure(self.round, &self.groups)?;
        }
        self.route(&mut steps)?;
        for &grp in &self.groups {
            for &m in self.topology.members(grp)? {
                if self.alive[m as usize] && self.killing.insert(m) {
                    steps.push(Step::Kill { rank: m });
                }
            }
        }
        // Retirements asked before are asked again once the new dead are known.
        self.retire_asked = false;
        self.retiring.clear();
        self.resumed_at = None;
        self.advance(&mut steps);
        Ok(steps)
    }

    /// The dead ranks were started again (after a [`Step::Restart`]).
    pub(crate) fn restarted(&mut self, ranks: &[Rank]) {
        for &r in ranks {
            self.dead.remove(&r);
            self.alive[r as usize] = true;
            self.starting.insert(r);
        }
        self.retire_asked = false;
    }

    /// A frame from rank `rank`'s channel.
    pub(crate) fn on_frame(&mut self, rank: Rank, frame: Frame) -> Result<Vec<Step>> {
        let mut steps = Vec::new();
        match frame {
            Frame::Engine { coordinator, msg } => {
                let c = self
                    .coordinators
                    .get_mut(coordinator as usize)
                    .ok_or_else(|| Error::Config(format!("rank {rank} wrote to unknown coordinator {coordinator}")))?;
                c.on_control(Endpoint::Process(rank), msg)?;
                self.route(&mut steps)?;
            }
            Frame::Retired { ranks } => {
                if let Some(left) = self.retiring.get_mut(&rank) {
                    for r in ranks {
                        left.remove(&r);
                    }
                    if left.is_empty() {
                        self.retiring.remove(&rank);
                    }
                }
                self.advance(&mut steps);
            }
            Frame::Replayed { messages, bytes, .. } => {
                self.replayed += messages;
                self.replayed_bytes += bytes;
            }
            Frame::Restored { read_us, written_unix_us } => {
                if self.starting.contains(&rank) {
                    let r = self.restored.entry(self.topology.group_of(rank)?).or_default();
                    r.read_us = r.read_us.max(read_us);
                    r.written_unix_us = r.written_unix_us.max(written_unix_us);
                }
            }
            Frame::Running { generation } => {
                if self.starting.remove(&rank) {
                    self.generation.insert(self.topology.group_of(rank)?, generation);
                    if self.starting.is_empty() && self.dead.is_empty() {
                        self.resumed_at = Some(Instant::now());
                    }
                }
            }
            Frame::Finishing => {
                self.finishing.insert(rank);
            }
            Frame::Warning { text } => steps.push(Step::Print(format!("nemesis-run: rank {rank}: {text}"))),
            Frame::Unrecoverable { text } => {
                steps.push(Step::Fail { rank, message: format!("rank {rank} cannot restart: {text}: ending the job") });
                return Ok(steps);
            }
            other => return Err(Error::Config(format!("rank {rank} sent the launcher {other:?}"))),
        }
        self.complete(&mut steps);
        Ok(steps)
    }

    /// Delivers the coordinators' messages: to live processes through their channels, to
    /// coordinators at once.
    fn route(&mut self, steps: &mut Vec<Step>) -> Result<()> {
        loop {
            let mut moved = false;
            for c in 0..self.coordinators.len() {
                while let Some(out) = self.coordinators[c].poll_outgoing() {
                    moved = true;
                    match out.to {
                        Endpoint::Process(p) => {
                            // A dead process learns everything again when it restarts.
                            if self.alive.get(p as usize).copied().unwrap_or(false) && !self.killing.contains(&p) {
                                let frame = Frame::Engine { coordinator: c as CoordinatorId, msg: out.msg };
                                steps.push(Step::Send { rank: p, frame });
                            }
                        }
                        Endpoint::Coordinator(d) => {
                            let Some(dc) = self.coordinators.get_mut(d as usize) else { continue };
                            dc.on_control(Endpoint::Coordinator(c as CoordinatorId), out.msg)?;
                        }
                    }
                }
            }
            if !moved {
                return Ok(());
            }
        }
    }

    /// Moves the restart on: retirement once every member of the round's groups is dead, the
    /// restart once every live rank has retired them.
    fn advance(&mut self, steps: &mut Vec<Step>) {
        if self.dead.is_empty() || !self.killing.is_empty() {
            return;
        }
        if !self.retire_asked {
            self.retire_asked = true;
            let dead: Vec<Rank> = self.dead.iter().copied().collect();
            for r in 0..self.alive.len() as Rank {
                if self.alive[r as usize] {
                    self.retiring.insert(r, self.dead.clone());
                    steps.push(Step::Send { rank: r, frame: Frame::Retire { ranks: dead.clone() } });
                }
            }
        }
        if self.retiring.is_empty() {
            let ranks: Vec<Rank> = self.dead.iter().copied().collect();
            steps.push(Step::Restart { ranks, round: self.round, groups: self.groups.clone() });
        }
    }

    /// Lines for a completed round; the end of the job once every rank is finishing.
    fn complete(&mut self, steps: &mut Vec<Step>) {
        if self.busy() {
            return;
        }
        for d in std::mem::take(&mut self.deaths) {
            let members = self.topology.members(d.group).unwrap_or(&[]);
            let list = members.iter().map(u32::to_string).collect::<Vec<_>>().join(",");
            let ms = self.resumed_at.map_or(0, |t| t.saturating_duration_since(d.at).as_millis());
            let generation = self.generation.get(&d.group).copied().unwrap_or(0);
            steps.push(Step::Print(format!(
                "nemesis-run: rank {} died ({}); group {} (ranks {list}) restarted from checkpoint {generation} in {ms} ms; {} messages replayed",
                d.rank, d.how, d.group, self.replayed
            )));
            let r = self.restored.get(&d.group).copied().unwrap_or_default();
            let us = |t: SystemTime| t.duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_micros() as u64);
            let from = if r.written_unix_us > 0 { r.written_unix_us } else { us(self.started) };
            let f = Figures {
                rank: d.rank,
                group: d.group,
                generation,
                recovery_us: self.resumed_at.map_or(0, |t| t.saturating_duration_since(d.at).as_micros() as u64),
                messages: self.replayed,
                bytes: self.replayed_bytes,
                read_us: r.read_us,
                lost_work_us: us(d.wall).saturating_sub(from),
            };
            tracing::info!(
                rank = f.rank,
                group = f.group,
                generation = f.generation,
                recovery_us = f.recovery_us,
                messages = f.messages,
                bytes = f.bytes,
                read_us = f.read_us,
                lost_work_us = f.lost_work_us,
                "recovered"
            );
            self.reported.push(f);
        }
        self.replayed = 0;
        self.replayed_bytes = 0;
        self.restored.clear();
        if !self.finished && self.finishing.len() == self.alive.len() {
            self.finished = true;
            for r in 0..self.alive.len() as Rank {
                steps.push(Step::Send { rank: r, frame: Frame::Finish });
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use nemesis_ft::Control;

    fn sends(steps: &[Step]) -> Vec<(Rank, &Frame)> {
        steps
            .iter()
            .filter_map(|s| if let Step::Send { rank, frame } = s { Some((*rank, frame)) } else { None })
            .collect()
    }

    /// Two groups of two: rank 2 dies; 3 is killed; 0 and 1 get the notice, then retire 2 and 3;
    /// the restart follows; the round completes and the job finishes.
    #[test]
    fn a_death_kills_the_group_retires_and_restarts_it() {
        let mut r = Recovery::new(vec![0, 0, 1, 1], RecoveryMode::Centralised, 10).unwrap();
        let steps = r.on_death(2, "signal 9".into()).unwrap();
        assert!(steps.contains(&Step::Kill { rank: 3 }));
        let notices: Vec<Rank> = sends(&steps)
            .iter()
            .filter(|(_, f)| matches!(f, Frame::Engine { msg: Control::FailureNotice { .. }, .. }))
            .map(|s| s.0)
            .collect();
        assert_eq!(notices, [0, 1]);
        assert!(!steps.iter().any(|s| matches!(s, Step::Restart { .. })));
        let steps = r.on_death(3, "signal 9".into()).unwrap();
        let retire: Vec<Rank> = sends(&steps).iter().map(|s| s.0).collect();
        assert_eq!(retire, [0, 1]);
        assert!(r.on_frame(0, Frame::Retired { ranks: vec![2, 3] }).unwrap().is_empty());
        let steps = r.on_frame(1, Frame::Retired { ranks: vec![3, 2] }).unwrap();
        assert_eq!(steps, [Step::Restart { ranks: vec![2, 3], round: 1, groups: vec![1] }]);
        r.restarted(&[2, 3]);
        assert!(r.busy());
        // The checkpoint was written 1.5 s before the death; the slower member's read counts.
        let death = r.deaths[0].wall.duration_since(std::time::UNIX_EPOCH).unwrap().as_micros() as u64;
        r.on_frame(2, Frame::Restored { read_us: 700, written_unix_us: death - 1_500_000 }).unwrap();
        r.on_frame(3, Frame::Restored { read_us: 900, written_unix_us: death - 1_500_000 }).unwrap();
        // Not restarting: ignored.
        r.on_frame(0, Frame::Restored { read_us: 99_000, written_unix_us: 1 }).unwrap();
        r.on_frame(2, Frame::Running { generation: 3 }).unwrap();
        r.on_frame(3, Frame::Running { generation: 3 }).unwrap();
        for f in [0, 1, 2, 3] {
            r.on_frame(f, Frame::Finishing).unwrap();
        }
        // The round is not over: nothing finishes, no line.
        assert!(r.busy());
        let restarted = Control::MyPhase { round: 1, phase: 1 };
        let mut all = Vec::new();
        for p in [2, 3] {
            all.extend(r.on_frame(p, Frame::Engine { coordinator: 0, msg: restarted.clone() }).unwrap());
            for msg in
                [Control::LoggedPhases { round: 1, phases: vec![] }, Control::OrphanCounts { round: 1, counts: vec![] }]
            {
                all.extend(r.on_frame(p, Frame::Engine { coordinator: 0, msg }).unwrap());
            }
        }
        for p in [0, 1] {
            for msg in [
                Control::LoggedPhases { round: 1, phases: vec![1] },
                Control::OrphanCounts { round: 1, counts: vec![] },
                Control::MyPhase { round: 1, phase: 1 },
            ] {
                all.extend(r.on_frame(p, Frame::Replayed { round: 1, messages: 2, bytes: 16 }).unwrap());
                all.extend(r.on_frame(p, Frame::Engine { coordinator: 0, msg }).unwrap());
            }
        }
        assert!(!r.busy());
        let lines: Vec<&String> =
            all.iter().filter_map(|s| if let Step::Print(l) = s { Some(l) } else { None }).collect();
        assert_eq!(lines.len(), 1, "{all:?}");
        assert!(
            lines[0].starts_with(
                "nemesis-run: rank 2 died (signal 9); group 1 (ranks 2,3) restarted from checkpoint 3 in "
            ),
            "{}",
            lines[0]
        );
        assert!(lines[0].ends_with("ms; 12 messages replayed"), "{}", lines[0]);
        let [f] = r.reported[..] else { panic!("{:?}", r.reported) };
        assert_eq!((f.rank, f.group, f.generation, f.messages, f.bytes), (2, 1, 3, 12, 96));
        assert_eq!((f.read_us, f.lost_work_us), (900, 1_500_000));
        let ms: u64 = lines[0].split(" in ").nth(1).unwrap().split(' ').next().unwrap().parse().unwrap();
        assert_eq!(f.recovery_us / 1000, ms, "the event's time is the line's");
        assert_eq!(sends(&all).iter().filter(|s| *s.1 == Frame::Finish).count(), 4);
    }

    #[test]
    fn too_many_failures_end_the_job() {
        let mut r = Recovery::new(vec![0, 1], RecoveryMode::Distributed, 1).unwrap();
        r.on_death(1, "signal 9".into()).unwrap();
        r.on_frame(0, Frame::Retired { ranks: vec![1] }).unwrap();
        r.restarted(&[1]);
        let steps = r.on_death(1, "signal 9".into()).unwrap();
        let Some(Step::Fail { rank: 1, message }) = steps.last() else { panic!("{steps:?}") };
        assert!(message.contains("more than --ft-max-restarts 1"), "{message}");
    }

    #[test]
    fn a_restarted_rank_warns_through_the_launcher_or_ends_the_job() {
        let mut r = Recovery::new(vec![0, 1], RecoveryMode::Centralised, 10).unwrap();
        r.on_death(1, "signal 9".into()).unwrap();
        r.on_frame(0, Frame::Retired { ranks: vec![1] }).unwrap();
        r.restarted(&[1]);
        let steps = r.on_frame(1, Frame::Warning { text: "checkpoint file f refused".into() }).unwrap();
        assert_eq!(steps, [Step::Print("nemesis-run: rank 1: checkpoint file f refused".into())]);
        let steps = r.on_frame(1, Frame::Unrecoverable { text: "no checkpoint".into() }).unwrap();
        assert_eq!(
            steps,
            [Step::Fail { rank: 1, message: "rank 1 cannot restart: no checkpoint: ending the job".into() }]
        );
    }
}
