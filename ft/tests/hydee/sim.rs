//! A deterministic simulator driving the HydEE engine: scripted send-deterministic programs, FIFO channels,
//! coordinated group checkpoints, failures injected at any step, recovery coordinators — run to completion and
//! checked against a failure-free reference.
//!
//! Model (hydee.md "Model and definitions"): reliable FIFO channels per ordered pair of endpoints, no order across
//! channels; every delivery is a random choice among the channels that hold something and the processes that can
//! take a step, so arrivals interleave differently in every run. The arrival hook (`on_receive`) runs when a
//! message reaches the process, as in a transport's progress engine; the delivery hook (`on_deliver`) when the
//! script receives it, in program order — or at arrival too with `Config::deliver_on_arrival`, which models an
//! application whose deliveries before a send depend on timing. Failures drop what was addressed to the dead
//! processes and a random prefix of what they had sent; restarted processes take their group's last durable
//! checkpoint, intra-group channel state included.
//!
//! The group checkpoint is the marker protocol by default (`sim/markers.rs`, [`Config::markers`]): each member's
//! markers, capture, durable file, stage-1 markers and durability are steps of their own, interleaved with
//! everything else and hit by failures ([`Event::FailAt`]); a restarted group takes its newest generation every
//! member has a file of, and the acknowledgements wait one generation, as the endpoint's do.
//!
//! Layout: this file drives the run and takes the application's steps; `sim/reference.rs` is the failure-free run,
//! `sim/channels.rs` the deliveries and the engine's actions, `sim/markers.rs` the marker protocol,
//! `sim/rollback.rs` the atomic checkpoint, failures and restarts, and the final checks.
//!
//! Checks made during the run: no message delivered twice to the current state of a process; at the arrival of a
//! message sent under the current round's rules, every message in its causal past has arrived at its destination's
//! current state (Theorem 6.1, T:2229); the engine's `Duplicate` and `LogOnly` verdicts agree with the ground truth;
//! phases never decrease along a causal chain; reported orphans have a lower phase than their receiver. Checks at
//! the end: every script finished, nothing held, every channel empty, each process's send sequence and final state
//! equal the reference run's, every message delivered exactly once, and log entries held by a durable checkpoint
//! of their destination dropped once the destination has received anything newer from their sender.

use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::sync::Arc;

mod channels;
mod markers;
mod reference;
mod rollback;
pub use markers::Stage;
pub use reference::{Reference, reference};
use reference::{fold, value_of};

use nemesis_ft::{
    Control, Coordinator, CoordinatorId, Date, DateRule, Delivery, Endpoint, GroupId, LogConfig, LogSnapshot, Outbound,
    Phase, Process, ProcessConfig, Rank, STAMP_LEN, SenderLog, Stamp, Topology, digest::digest,
};

/// One step of a process's script.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Op {
    /// Send the next message to this rank.
    Send(Rank),
    /// Receive one message from each listed rank, in whatever order they arrive (a `Waitall` on `Irecv`s).
    Recv(Vec<Rank>),
    /// Wait until the schedule has opened this many gates (lets a scenario hold work back until after a failure).
    Gate(u32),
}

/// A send-deterministic program: one script per rank.
#[derive(Clone, Debug)]
pub struct Program {
    pub scripts: Vec<Vec<Op>>,
}

/// A message's identity: its sender and the index of the send in the sender's script order. Send-determinism makes
/// it the same message in every execution.
pub type MsgId = (Rank, u64);

/// When a scheduled event fires.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum When {
    /// Once this many steps have run.
    Step(u64),
    /// When nothing else can happen.
    Quiescent,
    /// This many steps after the previous event fired.
    After(u64),
}

/// An injected event.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Event {
    /// The group captures a coordinated checkpoint (durable a few steps later).
    Checkpoint(GroupId),
    /// These groups fail together.
    Fail(Vec<GroupId>),
    /// With [`Config::markers`]: `fail` fail together when a member of `group` next reaches `stage` of a checkpoint.
    FailAt { stage: Stage, group: GroupId, fail: Vec<GroupId> },
    /// Scripts waiting at `Gate(k)` for this gate may go on.
    OpenGate,
}

/// Simulation parameters.
#[derive(Clone, Debug)]
pub struct Config {
    pub groups: Vec<GroupId>,
    /// Recovery coordinator of each rank.
    pub coordinators: Vec<CoordinatorId>,
    pub schedule: Vec<(When, Event)>,
    pub seed: u64,
    /// Sender-log memory bound (small values exercise the spill file).
    pub log_memory: usize,
    pub date_rule: DateRule,
    /// Call the delivery hook when a message arrives instead of when the application receives it: deliveries
    /// then follow timing, as in an application that tests for completions.
    pub deliver_on_arrival: bool,
    /// Sends the engine holds back do not block the script (a transport's non-blocking send: the application goes
    /// on, and may receive, while the send waits); they go out in order once the engine resumes them.
    pub nonblocking_sends: bool,
    /// Drive the stamped hooks (per-destination sequence numbers and payload digests, checked on re-execution);
    /// off, the unstamped ones, which trust the re-execution to be send-deterministic.
    pub stamps: bool,
    /// A program that is not send-deterministic: see [`Divergence`].
    pub diverge: Option<Divergence>,
    /// The group checkpoint as the marker protocol (`sim/markers.rs`): steps interleaved with everything else,
    /// per-member files, the group's durability, the held-back generation. Off: one atomic capture, durable a few
    /// steps later.
    pub markers: bool,
    /// With `markers`: a restarted group finds its newest generation damaged now and then and restarts from the
    /// one before.
    pub damage: bool,
    /// With `markers`: acknowledgements and RPP prunings wait for the next durability (the endpoint's rule). Off
    /// only to show why: a fallback to the older generation then finds the logs pruned.
    pub hold_back: bool,
    pub max_steps: u64,
}

/// Once `rank` has rolled back, its sends number `a` and `b` (counting from 0 in script order) trade places:
/// send `a` goes where send `b` went in the first execution, with `b`'s content, and the other way round. To one
/// destination, the two messages swap dates.
#[derive(Clone, Copy, Debug)]
pub struct Divergence {
    pub rank: Rank,
    pub a: u64,
    pub b: u64,
}

impl Config {
    pub fn new(groups: Vec<GroupId>) -> Config {
        let n = groups.len();
        Config {
            groups,
            coordinators: vec![0; n],
            schedule: Vec::new(),
            seed: 1,
            log_memory: 1 << 20,
            date_rule: DateRule::Sends,
            deliver_on_arrival: false,
            nonblocking_sends: false,
            stamps: true,
            diverge: None,
            markers: true,
            damage: false,
            hold_back: true,
            max_steps: 200_000,
        }
    }
}

/// What happened, for scenario assertions.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Trace {
    /// The application sent a message (`outcome` "transmit", "log-only", or "hold" with no id).
    Send { rank: Rank, to: Rank, id: Option<MsgId>, outcome: &'static str, phase: Phase },
    /// A logged message was retransmitted.
    Replay { rank: Rank, to: Rank, id: MsgId },
    /// The receive hook ran (`verdict` "deliver", "stale" or "duplicate").
    Arrive { rank: Rank, id: MsgId, verdict: &'static str, replay: bool },
    /// The application consumed a message.
    Consume { rank: Rank, id: MsgId },
    /// A control message was sent.
    ControlSent { from: Endpoint, to: Endpoint, msg: Control },
    /// A control message was handed to its destination.
    Control { from: Endpoint, to: Endpoint, msg: Control },
    /// A process restarted from its checkpoint.
    Rollback { rank: Rank, round: u64 },
    /// A recovery round started.
    Round { round: u64, groups: Vec<GroupId> },
    /// A group checkpoint was captured or made durable.
    Checkpoint { group: GroupId, durable: bool },
    /// Log entries were dropped; `remaining` are the dates still logged for `to`.
    Discard { rank: Rank, to: Rank, before: Date, remaining: Vec<Date> },
}

/// Counters of a run.
#[derive(Clone, Debug, Default)]
pub struct Stats {
    pub steps: u64,
    pub rollbacks: BTreeMap<Rank, u32>,
    pub replays: u64,
    pub orphans: u64,
    pub stale: u64,
    pub duplicates: u64,
    pub holds: u64,
    pub checkpoints: u64,
    pub rounds: u64,
    pub max_spilled: u64,
    /// Failures made by `Event::FailAt`, per stage.
    pub failed_at: BTreeMap<Stage, u32>,
    /// Restarts from the older retained generation (`Config::damage`).
    pub fallbacks: u64,
}

/// The outcome of a run.
#[derive(Debug)]
pub struct Report {
    pub trace: Vec<Trace>,
    pub stats: Stats,
}

impl Report {
    /// Index of the first trace event matching `f`.
    pub fn first(&self, f: impl Fn(&Trace) -> bool) -> Option<usize> {
        self.trace.iter().position(f)
    }
    /// Number of trace events matching `f`.
    pub fn count(&self, f: impl Fn(&Trace) -> bool) -> usize {
        self.trace.iter().filter(|t| f(t)).count()
    }
}

// ------------------------------------------------------------------------------------------------------------------
// Simulation state.

/// A set of global message indices.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
struct Bits(Vec<u64>);

impl Bits {
    fn set(&mut self, i: usize) {
        if self.0.len() <= i / 64 {
            self.0.resize(i / 64 + 1, 0);
        }
        self.0[i / 64] |= 1 << (i % 64);
    }
    fn union(&mut self, other: &Bits) {
        if self.0.len() < other.0.len() {
            self.0.resize(other.0.len(), 0);
        }
        for (a, b) in self.0.iter_mut().zip(&other.0) {
            *a |= b;
        }
    }
    fn iter(&self) -> impl Iterator<Item = usize> + '_ {
        self.0
            .iter()
            .enumerate()
            .flat_map(|(w, &bits)| (0..64).filter(move |b| bits & (1 << b) != 0).map(move |b| w * 64 + b))
    }
}

/// An application message as carried in a payload.
#[derive(Clone, Debug)]
struct AppMsg {
    id: MsgId,
    value: u64,
    /// Messages consumed in the causal past of the send.
    past: Bits,
    /// Set at arrival; `None` once handed to the delivery hook.
    delivery: Option<Delivery>,
    /// The phase the delivery brings.
    phase: Phase,
}

impl AppMsg {
    fn encode(&self) -> Vec<u8> {
        let mut out = Vec::new();
        out.extend_from_slice(&self.id.0.to_le_bytes());
        out.extend_from_slice(&self.id.1.to_le_bytes());
        out.extend_from_slice(&self.value.to_le_bytes());
        out.extend_from_slice(&(self.past.0.len() as u32).to_le_bytes());
        for w in &self.past.0 {
            out.extend_from_slice(&w.to_le_bytes());
        }
        // Payloads of varying sizes exercise the log.
        out.extend(std::iter::repeat_n(0xAB, (self.value % 23) as usize));
        out
    }
    fn decode(b: &[u8]) -> Result<AppMsg, String> {
        let u64_at = |i: usize| -> Result<u64, String> {
            Ok(u64::from_le_bytes(b.get(i..i + 8).ok_or("short payload")?.try_into().map_err(|_| "payload")?))
        };
        let sender = u32::from_le_bytes(b.get(0..4).ok_or("short payload")?.try_into().map_err(|_| "payload")?);
        let n = u64_at(4)?;
        let value = u64_at(12)?;
        let words = u32::from_le_bytes(b.get(20..24).ok_or("short payload")?.try_into().map_err(|_| "payload")?);
        let mut past = Vec::new();
        for w in 0..words as usize {
            past.push(u64_at(24 + 8 * w)?);
        }
        Ok(AppMsg { id: (sender, n), value, past: Bits(past), delivery: None, phase: 0 })
    }
}

#[derive(Clone, Debug)]
enum Packet {
    App {
        pb: [u8; 12],
        stamp: [u8; STAMP_LEN],
        payload: Vec<u8>,
        replay: bool,
        round: u64,
    },
    Ctl(Vec<u8>),
    /// A checkpoint marker of the group (`sim/markers.rs`).
    Mark {
        generation: u64,
        stage: usize,
    },
}

/// The application side of a process (restored with its checkpoint).
#[derive(Clone, Debug, Default)]
struct App {
    pc: usize,
    acc: u64,
    sent: u64,
    batch: Option<Vec<Rank>>,
    /// Arrived, not yet consumed, in arrival order.
    unexpected: VecDeque<AppMsg>,
    past: Bits,
    /// No send may carry a phase below this (max over consumed messages of phase, plus one if inter-group).
    phase_floor: Phase,
    /// Messages delivered to this state.
    delivered: BTreeSet<MsgId>,
    sends: Vec<(Rank, u64)>,
}

struct Proc {
    engine: Process,
    log: SenderLog,
    app: App,
    /// A send was answered `Hold` and no `ResumeSends` came since.
    hold: bool,
    /// With `nonblocking_sends`: sends the application made that wait for the engine, in order.
    queued: VecDeque<Issued>,
    /// With `Config::markers`: its side of the group checkpoint.
    ckpt: markers::Member,
}

/// A send as the application made it: its message, and the phase of the process and the phase floor then.
#[derive(Clone, Debug)]
struct Issued {
    to: Rank,
    id: MsgId,
    value: u64,
    past: Bits,
    phase: Phase,
    floor: Phase,
}

#[derive(Clone)]
struct Saved {
    state_json: String,
    log: LogSnapshot,
    app: App,
}

#[derive(Clone)]
struct GroupCheckpoint {
    members: BTreeMap<Rank, Saved>,
    /// Intra-group application messages in flight at the capture: the channel state of the coordinated checkpoint.
    in_flight: Vec<(Rank, Rank, Packet)>,
}

struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n.max(1) as u64) as usize
    }
}

pub struct Sim {
    cfg: Config,
    program: Program,
    reference: Reference,
    topo: Arc<Topology>,
    procs: Vec<Proc>,
    coordinators: Vec<Coordinator>,
    channels: BTreeMap<(Endpoint, Endpoint), VecDeque<Packet>>,
    durable: BTreeMap<GroupId, GroupCheckpoint>,
    pending: BTreeMap<GroupId, GroupCheckpoint>,
    /// With `Config::markers`: the members' files per group and generation (0: the initial state).
    files: BTreeMap<GroupId, BTreeMap<u64, BTreeMap<Rank, Saved>>>,
    /// The generation of each group's latest checkpoint attempt.
    next_generation: BTreeMap<GroupId, u64>,
    /// Armed `Event::FailAt`s: (stage, group, groups to fail).
    fail_at: Vec<(Stage, GroupId, Vec<GroupId>)>,
    /// (due step, group) of pending durability events.
    durability: Vec<(u64, GroupId)>,
    schedule: VecDeque<(When, Event)>,
    gates: u32,
    round: u64,
    step: u64,
    /// Step at which the last scheduled event fired.
    last_fired: Option<u64>,
    rng: Rng,
    trace: Vec<Trace>,
    stats: Stats,
}

type SimResult<T> = Result<T, String>;

fn err<E: std::fmt::Display>(ctx: &str) -> impl FnOnce(E) -> String + '_ {
    move |e| format!("{ctx}: {e}")
}

impl Sim {
    pub fn new(program: Program, cfg: Config) -> SimResult<Sim> {
        let reference = reference(&program)?;
        let n = program.scripts.len();
        if cfg.groups.len() != n || cfg.coordinators.len() != n {
            return Err("config does not match the program's ranks".into());
        }
        let topo = Arc::new(
            Topology::with_coordinators(cfg.groups.clone(), cfg.coordinators.clone()).map_err(err("topology"))?,
        );
        let log_config =
            LogConfig { memory_limit: cfg.log_memory, spill_dir: Some(std::env::temp_dir()), spill_limit: None };
        let mut procs = Vec::with_capacity(n);
        for r in 0..n as Rank {
            let engine =
                Process::new(topo.clone(), r, ProcessConfig { date_rule: cfg.date_rule }).map_err(err("process"))?;
            procs.push(Proc {
                engine,
                log: SenderLog::new(n, log_config.clone()),
                app: App::default(),
                hold: false,
                queued: VecDeque::new(),
                ckpt: markers::Member::default(),
            });
        }
        let coordinators = (0..topo.coordinators() as CoordinatorId)
            .map(|c| Coordinator::new(topo.clone(), c))
            .collect::<Result<Vec<_>, _>>()
            .map_err(err("coordinator"))?;
        // Every group starts from a durable checkpoint of the initial state.
        let mut durable = BTreeMap::new();
        let mut files = BTreeMap::new();
        for g in 0..topo.groups() as GroupId {
            let mut members = BTreeMap::new();
            for &r in topo.members(g).map_err(err("members"))? {
                let state = procs[r as usize].engine.state();
                members.insert(
                    r,
                    Saved {
                        state_json: serde_json::to_string(&state).map_err(err("serialise"))?,
                        log: LogSnapshot::default(),
                        app: App::default(),
                    },
                );
            }
            files.insert(g, BTreeMap::from([(0, members.clone())]));
            durable.insert(g, GroupCheckpoint { members, in_flight: Vec::new() });
        }
        let rng = Rng(cfg.seed.wrapping_mul(0x2545_F491_4F6C_DD1D) | 1);
        let schedule = cfg.schedule.iter().cloned().collect();
        Ok(Sim {
            cfg,
            program,
            reference,
            topo,
            procs,
            coordinators,
            channels: BTreeMap::new(),
            durable,
            pending: BTreeMap::new(),
            files,
            next_generation: BTreeMap::new(),
            fail_at: Vec::new(),
            durability: Vec::new(),
            schedule,
            gates: 0,
            round: 0,
            step: 0,
            last_fired: None,
            rng,
            trace: Vec::new(),
            stats: Stats::default(),
        })
    }

    fn group(&self, r: Rank) -> GroupId {
        self.cfg.groups[r as usize]
    }

    fn push(&mut self, from: Endpoint, to: Endpoint, p: Packet) {
        self.channels.entry((from, to)).or_default().push_back(p);
    }

    // --------------------------------------------------------------------------------------------------------------
    // Driving.

    /// Runs to completion and checks the outcome. With `NEMESIS_SIM_TRACE=1` a failure's message carries the
    /// whole trace.
    pub fn run(mut self) -> SimResult<Report> {
        match self.run_inner() {
            Ok(()) => Ok(Report { trace: self.trace, stats: self.stats }),
            Err(e) if std::env::var("NEMESIS_SIM_TRACE").is_ok_and(|v| v == "1") => {
                let lines: Vec<String> = self.trace.iter().enumerate().map(|(i, t)| format!("{i:5} {t:?}")).collect();
                Err(format!("{e}\n--- trace ---\n{}", lines.join("\n")))
            }
            Err(e) => Err(e),
        }
    }

    fn run_inner(&mut self) -> SimResult<()> {
        loop {
            self.fire_due()?;
            let choices = self.enabled();
            if choices.is_empty() {
                if !self.durability.is_empty() {
                    let (_, g) = self.durability.remove(0);
                    self.durable_checkpoint(g)?;
                    continue;
                }
                if let Some((_, e)) = self.schedule.pop_front() {
                    self.fire(e)?;
                    continue;
                }
                break;
            }
            let c = choices[self.rng.below(choices.len())];
            match c {
                Choice::App(p) => self.app_step(p)?,
                Choice::Deliver(from, to) => self.deliver(from, to)?,
                Choice::Ckpt(p) => self.ckpt_step(p)?,
            }
            self.step += 1;
            if self.step > self.cfg.max_steps {
                return Err(format!("no termination after {} steps", self.step));
            }
        }
        self.stats.steps = self.step;
        self.final_checks()
    }

    fn fire_due(&mut self) -> SimResult<()> {
        let step = self.step;
        while let Some(i) = self.durability.iter().position(|&(due, _)| due <= step) {
            let (_, g) = self.durability.remove(i);
            self.durable_checkpoint(g)?;
        }
        loop {
            let due = match self.schedule.front() {
                Some((When::Step(s), _)) => *s <= step,
                Some((When::After(n), _)) => self.last_fired.is_some_and(|at| at + n <= step),
                _ => false,
            };
            if !due {
                break;
            }
            let (_, e) = self.schedule.pop_front().ok_or("schedule")?;
            self.fire(e)?;
        }
        Ok(())
    }

    fn fire(&mut self, e: Event) -> SimResult<()> {
        self.last_fired = Some(self.step);
        match e {
            Event::Checkpoint(g) if self.cfg.markers => self.begin_group_checkpoint(g),
            Event::Checkpoint(g) => self.capture_checkpoint(g),
            Event::Fail(groups) => self.fail(&groups),
            Event::FailAt { stage, group, fail } => {
                self.fail_at.push((stage, group, fail));
                Ok(())
            }
            Event::OpenGate => {
                self.gates += 1;
                Ok(())
            }
        }
    }

    fn enabled(&self) -> Vec<Choice> {
        let mut out = Vec::new();
        for (p, proc_) in self.procs.iter().enumerate() {
            if self.ckpt_enabled(p as Rank) {
                out.push(Choice::Ckpt(p as Rank));
            }
            if proc_.ckpt.blocks_app() {
                continue;
            }
            if !proc_.queued.is_empty() && !proc_.hold {
                out.push(Choice::App(p as Rank));
                continue;
            }
            let Some(op) = self.program.scripts[p].get(proc_.app.pc) else {
                continue;
            };
            let ok = match op {
                Op::Send(_) => !proc_.hold || self.cfg.nonblocking_sends,
                Op::Gate(k) => self.gates >= *k,
                Op::Recv(from) => {
                    let batch = proc_.app.batch.as_ref().unwrap_or(from);
                    proc_.app.unexpected.iter().any(|m| batch.contains(&m.id.0))
                }
            };
            if ok {
                out.push(Choice::App(p as Rank));
            }
        }
        for ((from, to), q) in &self.channels {
            if !q.is_empty() {
                out.push(Choice::Deliver(*from, *to));
            }
        }
        out
    }

    // --------------------------------------------------------------------------------------------------------------
    // Application steps.

    fn app_step(&mut self, p: Rank) -> SimResult<()> {
        let pi = p as usize;
        if !self.procs[pi].queued.is_empty() && !self.procs[pi].hold {
            return self.flush_queued(p);
        }
        let op = self.program.scripts[pi][self.procs[pi].app.pc].clone();
        match op {
            Op::Gate(_) => self.procs[pi].app.pc += 1,
            Op::Recv(from) => {
                let app = &mut self.procs[pi].app;
                let batch = app.batch.get_or_insert(from);
                let i = app.unexpected.iter().position(|m| batch.contains(&m.id.0)).ok_or("recv not enabled")?;
                let m = app.unexpected.remove(i).ok_or("unexpected")?;
                let j = batch.iter().position(|&s| s == m.id.0).ok_or("batch")?;
                batch.remove(j);
                if batch.is_empty() {
                    app.batch = None;
                    app.pc += 1;
                }
                app.acc = fold(app.acc, m.value);
                app.past.union(&m.past);
                app.past.set(self.reference.gid(m.id));
                app.phase_floor = app.phase_floor.max(m.phase);
                if let Some(d) = m.delivery {
                    self.procs[pi].engine.on_deliver(d);
                    self.drain(p)?;
                }
                self.trace.push(Trace::Consume { rank: p, id: m.id });
            }
            Op::Send(to) => self.send(p, to)?,
        }
        Ok(())
    }

    /// The application's send of its next message to `to`.
    fn send(&mut self, p: Rank, to: Rank) -> SimResult<()> {
        let pi = p as usize;
        let proc_ = &self.procs[pi];
        let app = &proc_.app;
        let mut n = app.sent;
        let mut to = to;
        if let Some(d) = self.cfg.diverge
            && d.rank == p
            && self.stats.rollbacks.contains_key(&p)
            && (n == d.a || n == d.b)
        {
            n = if n == d.a { d.b } else { d.a };
            to = self.reference.dest((p, n));
        }
        let issued = Issued {
            to,
            id: (p, n),
            value: value_of(p, n, app.acc),
            past: app.past.clone(),
            phase: proc_.engine.phase(),
            floor: app.phase_floor,
        };
        if !self.cfg.nonblocking_sends {
            // A blocking send: the script stays at it while the engine holds it.
            if self.try_send(p, &issued, None)? {
                self.issue(p, &issued);
            }
            return self.drain(p);
        }
        self.issue(p, &issued);
        self.procs[pi].queued.push_back(issued);
        if self.procs[pi].hold { Ok(()) } else { self.flush_queued(p) }
    }

    /// The script moves past a send.
    fn issue(&mut self, p: Rank, issued: &Issued) {
        let app = &mut self.procs[p as usize].app;
        app.sent += 1;
        app.pc += 1;
        app.sends.push((issued.to, issued.value));
    }

    /// Non-blocking sends: tries the queued ones in order until the engine holds one back.
    fn flush_queued(&mut self, p: Rank) -> SimResult<()> {
        let pi = p as usize;
        while !self.procs[pi].hold
            && let Some(issued) = self.procs[pi].queued.front().cloned()
        {
            if !self.try_send(p, &issued, Some(issued.phase))? {
                break;
            }
            self.procs[pi].queued.pop_front();
        }
        self.drain(p)
    }

    /// The engine's send hook for `issued` (with the phase of the application's send if `as_of`), and what it
    /// allows. False if held.
    fn try_send(&mut self, p: Rank, issued: &Issued, as_of: Option<Phase>) -> SimResult<bool> {
        let pi = p as usize;
        let to = issued.to;
        let id = issued.id;
        let msg = AppMsg { id, value: issued.value, past: issued.past.clone(), delivery: None, phase: 0 };
        let payload = msg.encode();
        let engine = &mut self.procs[pi].engine;
        let (outcome, stamp) = match (as_of, self.cfg.stamps) {
            (None, false) => engine.on_send(to).map(|o| (o, Stamp::NONE)),
            (Some(phase), false) => engine.on_send_as_of(to, phase).map(|o| (o, Stamp::NONE)),
            (None, true) => engine.on_send_stamped(to, digest(&[], &payload)),
            (Some(phase), true) => engine.on_send_as_of_stamped(to, phase, digest(&[], &payload)),
        }
        .map_err(|e| format!("rank {p} on_send({to}): {e}"))?;
        let inter = self.group(p) != self.group(to);
        let (pb, transmit) = match outcome {
            Outbound::Hold => {
                self.procs[pi].hold = true;
                self.stats.holds += 1;
                let phase = self.procs[pi].engine.phase();
                self.trace.push(Trace::Send { rank: p, to, id: None, outcome: "hold", phase });
                return Ok(false);
            }
            Outbound::Transmit { piggyback, log } => {
                if log != inter {
                    return Err(format!("rank {p} -> {to}: log flag {log} but inter-group is {inter}"));
                }
                (Some(piggyback), true)
            }
            Outbound::LogOnly { piggyback } => {
                if !inter {
                    return Err(format!("rank {p} -> {to}: an intra-group message suppressed as an orphan"));
                }
                (Some(piggyback), false)
            }
            Outbound::Drop => {
                if !inter {
                    return Err(format!("rank {p} -> {to}: an intra-group message dropped as an orphan"));
                }
                (None, false)
            }
        };
        if let Some(pb) = pb
            && pb.phase() < issued.floor
        {
            return Err(format!(
                "phase decreased along a causal chain: {id:?} sent in phase {} after consuming phase {}",
                pb.phase(),
                issued.floor
            ));
        }
        if inter && let Some(pb) = pb {
            self.procs[pi]
                .log
                .append_stamped(to, pb, stamp, &[], &payload)
                .map_err(|e| format!("rank {p} log append: {e}"))?;
            self.stats.max_spilled = self.stats.max_spilled.max(self.procs[pi].log.spilled_bytes());
        }
        let outcome = match (transmit, pb) {
            (true, _) => "transmit",
            (false, Some(_)) => "log-only",
            (false, None) => "drop",
        };
        let phase = pb.map_or(0, |pb| pb.phase());
        self.trace.push(Trace::Send { rank: p, to, id: Some(id), outcome, phase });
        if let (true, Some(pb)) = (transmit, pb) {
            let round = self.procs[pi].engine.round();
            self.push(
                Endpoint::Process(p),
                Endpoint::Process(to),
                Packet::App { pb: pb.encode(), stamp: stamp.encode(), payload, replay: false, round },
            );
        } else {
            self.stats.orphans += 1;
            if !self.procs[to as usize].app.delivered.contains(&id) {
                return Err(format!("rank {p} suppressed {id:?} as an orphan but rank {to} does not have it: lost"));
            }
        }
        Ok(true)
    }
}

#[derive(Clone, Copy, Debug)]
enum Choice {
    App(Rank),
    Deliver(Endpoint, Endpoint),
    /// The next step of a process's checkpoint (`sim/markers.rs`).
    Ckpt(Rank),
}

/// Builds a program from a global sequence of messages `(from, to)`: each sender's script sends its messages in
/// that order, each receiver's receives them in that order, runs of receptions merged into any-order batches where
/// `batch` says so (so the program cannot deadlock without failures: the lowest pending operation is always
/// enabled).
pub fn program_from_messages(ranks: usize, messages: &[(Rank, Rank)], batch: &[bool]) -> Program {
    let mut scripts: Vec<Vec<Op>> = vec![Vec::new(); ranks];
    for (k, &(from, to)) in messages.iter().enumerate() {
        scripts[from as usize].push(Op::Send(to));
        let merge = batch.get(k).copied().unwrap_or(false);
        match scripts[to as usize].last_mut() {
            Some(Op::Recv(list)) if merge => list.push(from),
            _ => scripts[to as usize].push(Op::Recv(vec![from])),
        }
    }
    Program { scripts }
}
