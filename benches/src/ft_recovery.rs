//! `nemesis-bench ft-recovery`: what recovering a failed group costs (HydEE).
//!
//! `examples/ft_stencil.rs` (this program's `__stencil`, the example's `run` compiled in) runs
//! under the launcher with recovery (`nemesis::launch::Job` with `FtGroups::Blocks`, what
//! `nemesis-run --ft-groups K` runs; groups of two consecutive ranks, `--wait yield` and no
//! binding as the ranks outnumber the cores), on each rank count, in rounds interleaved (the
//! order rotating); in each round and rank count:
//!
//! - a **failure-free** run;
//! - a run where one rank (`--victim`, the last by default: rank 0 survives) is SIGKILLed from
//!   here once its group's `--kill-after`-th checkpoint is durable (every member's file of that
//!   generation is in the checkpoint directory), plus a delay: half the time between that
//!   generation and the previous one (or the start), unless `--kill-delay` sets it, so that the
//!   group loses work.
//!
//! Read from the failed run (the launcher's line, and its `recovered` event of
//! `nemesis::launch::recovery`):
//!
//! - **T**, the launcher's time from the death to the restarted group running again (the line's
//!   `in T ms`), the checkpoint it restored and the **messages** the survivors replayed;
//! - the replayed payload **bytes**; the checkpoint's **read** time (measured in the restarted
//!   ranks: finding, reading, checking and restoring it; the slowest member); the group's **lost
//!   work** (from the writing of the checkpoint it restored to the death);
//!
//! and from both runs rank 0's time through the iterations (a survivor's total run time), whose
//! difference is the survivors' **growth**. The two goals of the issue, per round and on the
//! medians: T ≤ 100 ms + read, and growth ≤ lost work. Both runs must print the same checksum.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use crate::error::{Error, Result};
use crate::progress::{progress, say};
use crate::report::{spread, table};
use crate::stats::{Summary, finite, interleave};
use crate::system::Context;

/// The allowance of the first goal on top of the checkpoint's read time.
pub const GOAL_MS: f64 = 100.0;

/// Largest rank count accepted.
const MAX_RANKS: u32 = 64;

/// `ft-recovery`'s command line.
#[derive(Clone, Debug, clap::Args)]
pub struct Opts {
    /// Rank counts, comma-separated, each even (groups of two ranks) [default: 4,8].
    #[arg(long, value_delimiter = ',')]
    pub ranks: Vec<u32>,
    /// Rounds; in each, every rank count runs failure-free and with a failure.
    #[arg(long, default_value_t = 5)]
    pub rounds: usize,
    /// Cells per rank of ft_stencil.
    #[arg(long, default_value_t = 4096)]
    pub cells: usize,
    /// Iterations of ft_stencil.
    #[arg(long, default_value_t = 1000)]
    pub iterations: u64,
    /// Iterations between checkpoints.
    #[arg(long, default_value_t = 100)]
    pub interval: u64,
    /// The rank killed [default: the last; rank 0, whose time is the survivors', must survive].
    #[arg(long)]
    pub victim: Option<u32>,
    /// The victim is killed once its group's checkpoint of this generation is durable.
    #[arg(long, default_value_t = 2)]
    pub kill_after: u64,
    /// Milliseconds between that checkpoint and the kill [default: half the time between that
    /// checkpoint and the previous one (or the job's start)].
    #[arg(long)]
    pub kill_delay: Option<u64>,
    /// Write `ft-recovery.csv` (a row per rank count) and `ft-recovery-rounds.csv` (a row per
    /// round) into this folder (created if needed).
    #[arg(long)]
    pub out: Option<PathBuf>,
    /// Longest time one run may take, in seconds.
    #[arg(long, default_value_t = 600)]
    pub timeout: u64,
}

/// One round's figures on one rank count (NaN where a run failed).
#[derive(Clone, Copy, Debug)]
pub struct Round {
    /// The launcher's T (ms).
    pub recovery_ms: f64,
    pub read_ms: f64,
    pub messages: f64,
    pub bytes: f64,
    /// Generation of the checkpoint restored.
    pub generation: f64,
    pub lost_ms: f64,
    /// Rank 0's time through the iterations, failure-free and with the failure (s).
    pub free_s: f64,
    pub failed_s: f64,
    /// Bytes of a rank's checkpoint file.
    pub checkpoint_bytes: f64,
}

impl Round {
    const EMPTY: Round = Round {
        recovery_ms: f64::NAN,
        read_ms: f64::NAN,
        messages: f64::NAN,
        bytes: f64::NAN,
        generation: f64::NAN,
        lost_ms: f64::NAN,
        free_s: f64::NAN,
        failed_s: f64::NAN,
        checkpoint_bytes: f64::NAN,
    };

    /// The survivors' growth (ms).
    pub fn growth_ms(&self) -> f64 {
        1e3 * (self.failed_s - self.free_s)
    }

    /// Whether the group resumed within [`GOAL_MS`] plus its checkpoint's read time.
    pub fn resume_goal(&self) -> Option<bool> {
        let (t, r) = (self.recovery_ms, self.read_ms);
        (t.is_finite() && r.is_finite()).then_some(t <= GOAL_MS + r)
    }

    /// Whether the survivors' run time grew by no more than the group's lost work.
    pub fn growth_goal(&self) -> Option<bool> {
        let (g, l) = (self.growth_ms(), self.lost_ms);
        (g.is_finite() && l.is_finite()).then_some(g <= l)
    }
}

/// The figures reported, in the table's order: name, unit (of a time; counts have none), and
/// how to read it from a round.
type Figure = (&'static str, &'static str, fn(&Round) -> f64);

const FIGURES: [Figure; 11] = [
    ("recovery", "ms", |r| r.recovery_ms),
    ("checkpoint_read", "ms", |r| r.read_ms),
    ("replayed_messages", "", |r| r.messages),
    ("replayed_bytes", "", |r| r.bytes),
    ("restored_generation", "", |r| r.generation),
    ("checkpoint_file_bytes", "", |r| r.checkpoint_bytes),
    ("lost_work", "ms", |r| r.lost_ms),
    ("survivors_failure_free", "s", |r| r.free_s),
    ("survivors_with_failure", "s", |r| r.failed_s),
    ("survivors_growth", "ms", Round::growth_ms),
    ("recovery_minus_read", "ms", |r| r.recovery_ms - r.read_ms),
];

/// What the benchmark measured.
#[derive(Clone, Debug)]
pub struct Outcome {
    pub ranks: Vec<u32>,
    /// `rounds[k][r]`: rank count `k`, round `r`.
    pub rounds: Vec<Vec<Round>>,
    /// The victim per rank count.
    pub victims: Vec<u32>,
    pub failures: Vec<String>,
}

/// A goal's verdict over the rounds: on the medians, and the rounds that met it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Verdict {
    pub met_on_medians: Option<bool>,
    pub rounds_met: usize,
    pub rounds_judged: usize,
}

impl Outcome {
    fn summary(&self, k: usize, f: fn(&Round) -> f64) -> Option<Summary> {
        finite(&self.rounds[k].iter().map(f).collect::<Vec<_>>())
    }

    fn median(&self, k: usize, f: fn(&Round) -> f64) -> Option<f64> {
        self.summary(k, f).map(|s| s.median)
    }

    /// The first goal on rank count `k`: T ≤ 100 ms + read.
    pub fn resume_verdict(&self, k: usize) -> Verdict {
        let med = self.median(k, |r| r.recovery_ms).zip(self.median(k, |r| r.read_ms));
        self.verdict(k, med.map(|(t, r)| t <= GOAL_MS + r), Round::resume_goal)
    }

    /// The second goal on rank count `k`: growth ≤ lost work.
    pub fn growth_verdict(&self, k: usize) -> Verdict {
        let med = self.median(k, Round::growth_ms).zip(self.median(k, |r| r.lost_ms));
        self.verdict(k, med.map(|(g, l)| g <= l), Round::growth_goal)
    }

    fn verdict(&self, k: usize, met_on_medians: Option<bool>, per_round: fn(&Round) -> Option<bool>) -> Verdict {
        let judged: Vec<bool> = self.rounds[k].iter().filter_map(per_round).collect();
        Verdict { met_on_medians, rounds_met: judged.iter().filter(|&&m| m).count(), rounds_judged: judged.len() }
    }
}

fn yes_no(v: Option<bool>) -> &'static str {
    match v {
        Some(true) => "yes",
        Some(false) => "no",
        None => "",
    }
}

impl Verdict {
    fn describe(&self) -> String {
        match self.met_on_medians {
            None => "-".into(),
            Some(m) => {
                format!("{} ({}/{} rounds)", if m { "met" } else { "NOT met" }, self.rounds_met, self.rounds_judged)
            }
        }
    }
}

/// Checks the options; the rank counts in order.
fn plan(o: &Opts) -> Result<Vec<u32>> {
    let mut ranks = if o.ranks.is_empty() { vec![4, 8] } else { o.ranks.clone() };
    if ranks.iter().any(|&r| !(4..=MAX_RANKS).contains(&r) || r % 2 != 0) {
        return Err(Error::Usage(format!(
            "--ranks: even counts from 4 to {MAX_RANKS} (groups of two; rank 0's group survives)"
        )));
    }
    ranks.sort_unstable();
    ranks.dedup();
    if o.rounds == 0 {
        return Err(Error::Usage("--rounds must be at least 1".into()));
    }
    if o.interval == 0 || o.kill_after == 0 || o.iterations <= o.interval * (o.kill_after + 1) {
        return Err(Error::Usage(format!(
            "--iterations {} leaves no checkpoint {} to kill after and one more interval (--interval {}, at least 1)",
            o.iterations,
            o.kill_after.max(1),
            o.interval
        )));
    }
    if o.cells == 0 || o.timeout == 0 {
        return Err(Error::Usage("--cells and --timeout must be at least 1".into()));
    }
    if let Some(v) = o.victim
        && ranks.iter().any(|&n| v < 2 || v >= n)
    {
        return Err(Error::Usage(format!(
            "--victim {v}: a rank outside group 0 (2 or more) of every rank count ({ranks:?})"
        )));
    }
    Ok(ranks)
}

/// What rank 0's `stencil` line says (`stencil <s> <checkpoints> <s in them> <bytes> <checksum>`).
#[derive(Clone, Debug, PartialEq)]
pub struct StencilLine {
    pub seconds: f64,
    pub checkpoint_bytes: f64,
    pub checksum: String,
}

/// Rank 0's line in `stdout`.
pub fn parse_stencil(stdout: &str) -> Result<StencilLine> {
    let line = stdout
        .lines()
        .find_map(|l| l.strip_prefix("stencil "))
        .ok_or_else(|| Error::Run(format!("ft_stencil printed no figures:\n    {}", stdout.trim())))?;
    let f: Vec<&str> = line.split_whitespace().collect();
    let bad = || Error::Run(format!("ft_stencil printed a bad line `stencil {line}`"));
    let [seconds, _, _, bytes, checksum] = f[..] else { return Err(bad()) };
    let seconds: f64 = seconds.parse().map_err(|_| bad())?;
    let bytes: f64 = bytes.parse().map_err(|_| bad())?;
    if !seconds.is_finite() || seconds <= 0.0 {
        return Err(bad());
    }
    Ok(StencilLine { seconds, checkpoint_bytes: bytes, checksum: checksum.to_owned() })
}

/// A recovery as the launcher reported it: its line and its `recovered` event.
#[derive(Clone, Debug, PartialEq)]
pub struct Recovered {
    pub rank: u32,
    pub recovery_ms: f64,
    pub generation: f64,
    pub messages: f64,
    pub bytes: f64,
    pub read_ms: f64,
    pub lost_ms: f64,
}

/// The one recovery of the launcher's standard error `stderr` (an error if there is not exactly
/// one line and one event, for the same rank, giving the same messages).
pub fn parse_recovery(stderr: &str) -> Result<Recovered> {
    let lines: Vec<&str> = stderr.lines().filter_map(|l| l.strip_prefix("nemesis-run: rank ")).collect();
    let lines: Vec<&str> = lines.into_iter().filter(|l| l.contains(" restarted from checkpoint ")).collect();
    let events: Vec<&str> =
        stderr.lines().filter_map(|l| l.split_once(" nemesis::launch::recovery: recovered ").map(|x| x.1)).collect();
    let ([line], [event]) = (&lines[..], &events[..]) else {
        return Err(Error::Run(format!(
            "expected one recovery line and one `recovered` event, found {} and {}:\n    {}",
            lines.len(),
            events.len(),
            stderr.lines().filter(|l| l.contains("nemesis-run")).collect::<Vec<_>>().join("\n    ")
        )));
    };
    let bad = |why: &str| Error::Run(format!("the launcher's recovery report `{line}` / `{event}`: {why}"));
    // `R died (signal S); group G (ranks …) restarted from checkpoint N in T ms; M messages replayed`
    let word_after = |what: &str| -> Option<&str> { line.split(what).nth(1)?.split_whitespace().next() };
    let rank: u32 = line.split_whitespace().next().and_then(|r| r.parse().ok()).ok_or_else(|| bad("no rank"))?;
    let generation: f64 =
        word_after("restarted from checkpoint ").and_then(|g| g.parse().ok()).ok_or_else(|| bad("no checkpoint"))?;
    let recovery_ms: f64 = word_after(" in ").and_then(|t| t.parse().ok()).ok_or_else(|| bad("no time"))?;
    let messages: f64 = line
        .rsplit("; ")
        .next()
        .and_then(|m| m.strip_suffix(" messages replayed"))
        .and_then(|m| m.parse().ok())
        .ok_or_else(|| bad("no messages replayed"))?;
    let field = |name: &str| -> Result<f64> {
        event
            .split_whitespace()
            .find_map(|kv| kv.strip_prefix(name)?.strip_prefix('='))
            .and_then(|v| v.parse::<f64>().ok())
            .ok_or_else(|| bad(&format!("no {name} in the event")))
    };
    if field("rank")? != f64::from(rank) || field("messages")? != messages || field("generation")? != generation {
        return Err(bad("the event and the line disagree"));
    }
    Ok(Recovered {
        rank,
        recovery_ms,
        generation,
        messages,
        bytes: field("bytes")?,
        read_ms: field("read_us")? / 1e3,
        lost_ms: field("lost_work_us")? / 1e3,
    })
}

/// Generations of checkpoint files per rank in `dir` (`nemesis-ckpt-<job>-<rank>-<gen>.nft`).
fn newest_generation(dir: &Path, rank: u32) -> u64 {
    let Ok(d) = std::fs::read_dir(dir) else { return 0 };
    d.flatten()
        .filter_map(|e| {
            let n = e.file_name().to_string_lossy().into_owned();
            let rest = n.strip_prefix("nemesis-ckpt-")?.strip_suffix(".nft")?;
            let mut parts = rest.rsplit('-');
            let g: u64 = parts.next()?.parse().ok()?;
            let r: u32 = parts.next()?.parse().ok()?;
            (r == rank).then_some(g)
        })
        .max()
        .unwrap_or(0)
}

/// The pid of the live rank `rank` whose environment holds `marker` (`NEMESIS_FT_DIR=<the run's
/// own directory>`), found in `/proc`.
fn rank_pid(marker: &str, rank: u32) -> Option<i32> {
    let want = format!("PMI_RANK={rank}");
    for e in std::fs::read_dir("/proc").ok()?.flatten() {
        let Some(pid) = e.file_name().to_str().and_then(|p| p.parse::<i32>().ok()) else { continue };
        let Ok(env) = std::fs::read(e.path().join("environ")) else { continue };
        let mut vars = env.split(|&b| b == 0);
        let (mut mine, mut ranked) = (false, false);
        for v in &mut vars {
            mine |= v == marker.as_bytes();
            ranked |= v == want.as_bytes();
        }
        let state = std::fs::read_to_string(e.path().join("stat")).unwrap_or_default();
        let alive = state.rsplit(')').next().is_some_and(|t| !t.trim_start().starts_with(['Z', 'X']));
        if mine && ranked && alive {
            return Some(pid);
        }
    }
    None
}

/// How the victim is killed.
#[derive(Clone, Copy, Debug)]
struct Kill {
    victim: u32,
    group: [u32; 2],
    after: u64,
    delay: Option<Duration>,
}

/// Watches `dir` until the victim's group has made checkpoint `k.after` durable, waits the delay
/// and kills the victim; `Ok(())` once killed, an error if the run ended first (`done`).
fn watch_and_kill(dir: &Path, marker: &str, k: Kill, start: Instant, done: &AtomicBool) -> Result<()> {
    let durable = |g: u64| k.group.iter().all(|&r| newest_generation(dir, r) >= g);
    let mut previous = start;
    let at = loop {
        if done.load(Ordering::Acquire) {
            return Err(Error::Run(format!(
                "the run ended before checkpoint {} of rank {}'s group",
                k.after, k.victim
            )));
        }
        if k.after > 1 && durable(k.after - 1) && previous == start {
            previous = Instant::now();
        }
        if durable(k.after) {
            break Instant::now();
        }
        std::thread::sleep(Duration::from_millis(2));
    };
    let delay = k.delay.unwrap_or_else(|| at.saturating_duration_since(previous) / 2);
    std::thread::sleep(delay);
    let pid = rank_pid(marker, k.victim)
        .ok_or_else(|| Error::Run(format!("rank {} is not running any more: nothing to kill", k.victim)))?;
    nix::sys::signal::kill(nix::unistd::Pid::from_raw(pid), nix::sys::signal::Signal::SIGKILL)
        .map_err(|e| Error::io(format!("kill rank {} (pid {pid})", k.victim), e.into()))
}

/// One run of ft_stencil on `ranks` ranks; with `kill`, the victim dies on the way. Returns rank
/// 0's line and the launcher's standard error.
fn run_once(ctx: &Context, o: &Opts, dir: &Path, ranks: u32, kill: Option<Kill>) -> Result<(StencilLine, String)> {
    let _ = std::fs::remove_dir_all(dir);
    std::fs::create_dir_all(dir).map_err(|e| Error::file("create", dir, e))?;
    let marker = format!("NEMESIS_FT_DIR={}", dir.display());
    let mut c = Command::new(&ctx.exe);
    c.args(["__launch", "--ranks", &ranks.to_string(), "--wait", "yield", "--bind", "none"]);
    c.args(["--ft-groups", &(ranks / 2).to_string(), "--env", &marker, "--"]);
    c.arg(&ctx.exe).arg("__stencil");
    c.args([o.cells.to_string(), o.iterations.to_string(), o.interval.to_string()]);
    if let Some(k) = kill {
        // The victim cannot finish before the watcher kills it, however late that is.
        c.env(crate::ft::ENV_HOLD_LAST, k.victim.to_string());
    }
    // The launcher's `recovered` event (the ranks log nothing under this target).
    c.env("NEMESIS_LOG", "warn,nemesis::launch::recovery=info");
    let done = Arc::new(AtomicBool::new(false));
    let start = Instant::now();
    let watcher = kill.map(|k| {
        let (dir, marker, done) = (dir.to_path_buf(), marker.clone(), done.clone());
        std::thread::spawn(move || watch_and_kill(&dir, &marker, k, start, &done))
    });
    let result = crate::proc::run_all(vec![c], Duration::from_secs(o.timeout));
    done.store(true, Ordering::Release);
    let killed = watcher.map(|w| w.join().unwrap_or_else(|_| Err(Error::Run("the watcher panicked".into()))));
    let _ = std::fs::remove_dir_all(dir);
    let d = result?.swap_remove(0);
    if let Some(Err(e)) = killed {
        return Err(e);
    }
    if !d.status.success() {
        return Err(Error::Run(format!("ft_stencil failed ({}):\n    {}", d.status, d.stderr_tail())));
    }
    Ok((parse_stencil(&d.stdout)?, d.stderr))
}

/// Runs the rounds.
fn measure(ctx: &Context, o: &Opts, ranks: &[u32], dir: &Path) -> Outcome {
    let victims: Vec<u32> = ranks.iter().map(|&n| o.victim.unwrap_or(n - 1)).collect();
    let mut rounds = vec![vec![Round::EMPTY; o.rounds]; ranks.len()];
    let mut checksums = vec![vec![(None, None); o.rounds]; ranks.len()];
    let mut failures = Vec::new();
    // Units: (rank count, failure-free or failed).
    let units: Vec<(usize, bool)> = (0..ranks.len()).flat_map(|k| [(k, false), (k, true)]).collect();
    let bar = progress((o.rounds * units.len()) as u64);
    for (r, u) in interleave(units.len(), o.rounds) {
        let (k, failed) = units[u];
        let n = ranks[k];
        let what = if failed { format!("rank {} killed", victims[k]) } else { "failure-free".into() };
        bar.set_message(format!("round {}/{}: {n} ranks, {what}", r + 1, o.rounds));
        let kill = failed.then(|| {
            let g = victims[k] / 2;
            Kill {
                victim: victims[k],
                group: [2 * g, 2 * g + 1],
                after: o.kill_after,
                delay: o.kill_delay.map(Duration::from_millis),
            }
        });
        let res = run_once(ctx, o, &dir.join(format!("{n}-{u}")), n, kill).and_then(|(line, stderr)| {
            let fig = &mut rounds[k][r];
            fig.checkpoint_bytes = line.checkpoint_bytes;
            if !failed {
                fig.free_s = line.seconds;
                checksums[k][r].0 = Some(line.checksum);
                return Ok(());
            }
            let rec = parse_recovery(&stderr)?;
            if rec.rank != victims[k] {
                return Err(Error::Run(format!("rank {} died, not the victim {}", rec.rank, victims[k])));
            }
            fig.failed_s = line.seconds;
            fig.recovery_ms = rec.recovery_ms;
            fig.read_ms = rec.read_ms;
            fig.messages = rec.messages;
            fig.bytes = rec.bytes;
            fig.generation = rec.generation;
            fig.lost_ms = rec.lost_ms;
            checksums[k][r].1 = Some(line.checksum);
            Ok(())
        });
        if let Err(e) = res {
            let line = format!("round {}: {n} ranks, {what}: {e}", r + 1);
            say(&bar, format!("nemesis-bench: {line}"));
            failures.push(line);
        }
        bar.inc(1);
    }
    bar.finish_and_clear();
    // A recovery that changed the result is a failure of the round, not a figure.
    for (k, per_round) in checksums.iter().enumerate() {
        for (r, c) in per_round.iter().enumerate() {
            if let (Some(a), Some(b)) = c
                && a != b
            {
                failures.push(format!(
                    "round {}: {} ranks: checksum {b} after the recovery, {a} without failure",
                    r + 1,
                    ranks[k]
                ));
                rounds[k][r] = Round::EMPTY;
            }
        }
    }
    Outcome { ranks: ranks.to_vec(), rounds, victims, failures }
}

/// The terminal report.
pub fn text(o: &Outcome, opts: &Opts) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "nemesis-bench ft-recovery: ft_stencil {} cells x {} iterations, a checkpoint every {}, groups of 2 ranks, \
         NEMESIS_WAIT=yield, no binding, on {} CPUs; {} rounds, failure-free and failed runs interleaved; the victim \
         SIGKILLed after its group's checkpoint {} + {}; medians [min..max]",
        opts.cells,
        opts.iterations,
        opts.interval,
        crate::pin::allowed().len(),
        rounds_of(o),
        opts.kill_after,
        opts.kill_delay.map_or("half the checkpoint interval".to_owned(), |d| format!("{d} ms")),
    );
    let mut head = vec!["figure".to_owned(), "unit".to_owned()];
    head.extend(o.ranks.iter().zip(&o.victims).map(|(n, v)| format!("{n} ranks (rank {v} killed)")));
    let mut body: Vec<Vec<String>> = FIGURES
        .iter()
        .map(|(name, unit, f)| {
            let mut row = vec![name.replace('_', " "), unit.to_string()];
            row.extend((0..o.ranks.len()).map(|k| spread(&o.summary(k, *f))));
            row
        })
        .collect();
    let mut goal = |name: String, v: &dyn Fn(usize) -> Verdict| {
        let mut row = vec![name, String::new()];
        row.extend((0..o.ranks.len()).map(|k| v(k).describe()));
        body.push(row);
    };
    goal(format!("goal: recovery <= {GOAL_MS} ms + read"), &|k| o.resume_verdict(k));
    goal("goal: growth <= lost work".into(), &|k| o.growth_verdict(k));
    out += &table(&head, &body);
    // The growth is the difference of two runs' times: on a loaded machine their noise can
    // exceed the work lost, and the verdict then says little. Say so.
    for (k, n) in o.ranks.iter().enumerate() {
        if let (Some(g), Some(l)) = (o.summary(k, Round::growth_ms), o.median(k, |r| r.lost_ms))
            && g.max - g.min > l
        {
            let _ = writeln!(
                out,
                "note: on {n} ranks the survivors' growth spreads over {:.0} ms across rounds, more than the {:.0} ms \
                 of work lost: run-to-run noise decides the growth goal",
                g.max - g.min,
                l
            );
        }
    }
    if !o.failures.is_empty() {
        let _ = writeln!(out, "\nfailed runs (their figures are missing):");
        for f in &o.failures {
            let _ = writeln!(out, "  {f}");
        }
    }
    out
}

fn rounds_of(o: &Outcome) -> usize {
    o.rounds.first().map_or(0, Vec::len)
}

/// A figure's CSV column: its name, and a time's unit as a suffix (`recovery_ms`).
fn column((name, unit, _): &Figure) -> String {
    if unit.is_empty() { name.to_string() } else { format!("{name}_{unit}") }
}

/// The columns of `ft-recovery.csv`: per figure its median, min and max, then the goals.
pub fn columns() -> String {
    let mut c = String::from("ranks,victim,rounds");
    for f in &FIGURES {
        for s in ["", "_min", "_max"] {
            let _ = write!(c, ",{}{s}", column(f));
        }
    }
    c + ",resume_goal_met,resume_goal_rounds_met,growth_goal_met,growth_goal_rounds_met"
}

/// Writes `ft-recovery.csv` and `ft-recovery-rounds.csv` into `dir`; returns the files written.
pub fn write_csv(o: &Outcome, dir: &Path) -> Result<Vec<PathBuf>> {
    std::fs::create_dir_all(dir).map_err(|e| Error::file("create", dir, e))?;
    let opt = |v: Option<f64>| v.map(|x| x.to_string()).unwrap_or_default();
    let mut t = format!("{}\n", columns());
    let names: Vec<String> = FIGURES.iter().map(column).collect();
    let mut per_round = format!("ranks,round,{},resume_goal,growth_goal\n", names.join(","));
    for (k, n) in o.ranks.iter().enumerate() {
        let judged = o.rounds[k].iter().filter(|r| r.recovery_ms.is_finite() && r.free_s.is_finite()).count();
        let _ = write!(t, "{n},{},{judged}", o.victims[k]);
        for (_, _, f) in FIGURES {
            let s = o.summary(k, f);
            let _ = write!(t, ",{},{},{}", opt(s.map(|s| s.median)), opt(s.map(|s| s.min)), opt(s.map(|s| s.max)));
        }
        for v in [o.resume_verdict(k), o.growth_verdict(k)] {
            let _ = write!(t, ",{},{}", yes_no(v.met_on_medians), v.rounds_met);
        }
        t.push('\n');
        for (r, fig) in o.rounds[k].iter().enumerate() {
            let vals: Vec<String> =
                FIGURES.iter().map(|(_, _, f)| f(fig)).map(|v| opt(v.is_finite().then_some(v))).collect();
            let _ = writeln!(
                per_round,
                "{n},{},{},{},{}",
                r + 1,
                vals.join(","),
                yes_no(fig.resume_goal()),
                yes_no(fig.growth_goal())
            );
        }
    }
    let mut written = Vec::new();
    for (name, text) in [("ft-recovery.csv", t), ("ft-recovery-rounds.csv", per_round)] {
        let p = dir.join(name);
        std::fs::write(&p, text).map_err(|e| Error::file("write", &p, e))?;
        written.push(p);
    }
    Ok(written)
}

/// `ft-recovery`.
pub fn command(o: &Opts) -> Result<()> {
    let ranks = plan(o)?;
    let ctx = Context::new()?;
    let dir = std::env::temp_dir().join(format!("nemesis-bench-ftr-{}", std::process::id()));
    let outcome = measure(&ctx, o, &ranks, &dir);
    let _ = std::fs::remove_dir_all(&dir);
    print!("{}", text(&outcome, o));
    if let Some(d) = &o.out {
        let files = write_csv(&outcome, d)?;
        println!("\nwrote {}", files.iter().map(|f| f.display().to_string()).collect::<Vec<_>>().join(", "));
    }
    if outcome.rounds.iter().flatten().all(|r| !r.recovery_ms.is_finite()) {
        return Err(Error::Run("no recovery was measured".into()));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    const STDERR: &str = "\
ft_stencil: something\n\
12:00:00.000001  INFO nemesis::launch::recovery: recovery round starts rank=3 round=1 groups=[1]\n\
nemesis-run: rank 3 died (signal 9); group 1 (ranks 2,3) restarted from checkpoint 2 in 41 ms; 57 messages replayed\n\
12:00:00.500000  INFO nemesis::launch::recovery: recovered rank=3 group=1 generation=2 recovery_us=41234 messages=57 bytes=456 read_us=1500 lost_work_us=120000\n";

    #[test]
    fn the_launchers_report_parses() {
        let r = parse_recovery(STDERR).unwrap();
        assert_eq!(
            r,
            Recovered {
                rank: 3,
                recovery_ms: 41.0,
                generation: 2.0,
                messages: 57.0,
                bytes: 456.0,
                read_ms: 1.5,
                lost_ms: 120.0
            }
        );
        // No recovery, two, or an event that disagrees with the line: errors.
        assert!(parse_recovery("nothing\n").is_err());
        let two = format!("{STDERR}{STDERR}");
        assert!(parse_recovery(&two).is_err());
        assert!(parse_recovery(&STDERR.replace("messages=57", "messages=58")).is_err());
        assert!(parse_recovery(&STDERR.replace(" bytes=456", "")).is_err());
    }

    #[test]
    fn stencil_lines_parse() {
        let l = parse_stencil("x\nstencil 2.5 29 0.1 32848 00ff00ff00ff00ff\n").unwrap();
        assert_eq!((l.seconds, l.checkpoint_bytes, l.checksum.as_str()), (2.5, 32848.0, "00ff00ff00ff00ff"));
        for bad in ["", "stencil 2.5 29 0.1 32848", "stencil x 29 0.1 1 ab", "stencil -1 29 0.1 1 ab"] {
            assert!(parse_stencil(bad).is_err(), "{bad}");
        }
    }

    /// The defaults of the command line, on `ranks`.
    fn opts(ranks: Vec<u32>) -> Opts {
        Opts {
            ranks,
            rounds: 5,
            cells: 64,
            iterations: 1000,
            interval: 100,
            victim: None,
            kill_after: 2,
            kill_delay: None,
            out: None,
            timeout: 60,
        }
    }

    fn round(recovery_ms: f64, read_ms: f64, lost_ms: f64, free_s: f64, failed_s: f64) -> Round {
        Round { recovery_ms, read_ms, lost_ms, free_s, failed_s, ..Round::EMPTY }
    }

    #[test]
    fn goals_per_round_and_on_medians() {
        let o = Outcome {
            ranks: vec![4],
            // Growths 100, 50, 300 ms against lost work 80, 80, 80; T 90, 120, 99 against 100 + 1.
            rounds: vec![vec![
                round(90.0, 1.0, 80.0, 1.0, 1.1),
                round(120.0, 1.0, 80.0, 1.0, 1.05),
                round(99.0, 1.0, 80.0, 2.0, 2.3),
                Round::EMPTY,
            ]],
            victims: vec![3],
            failures: Vec::new(),
        };
        assert_eq!(o.resume_verdict(0), Verdict { met_on_medians: Some(true), rounds_met: 2, rounds_judged: 3 });
        assert_eq!(o.growth_verdict(0), Verdict { met_on_medians: Some(false), rounds_met: 1, rounds_judged: 3 });
        let t = text(&o, &opts(vec![4]));
        assert!(t.contains("met (2/3 rounds)") && t.contains("NOT met (1/3 rounds)"), "{t}");
        // Growths over 250 ms against 80 ms lost: the note.
        assert!(t.contains("note: on 4 ranks the survivors' growth spreads over 250 ms"), "{t}");
        let dir = std::env::temp_dir().join(format!("nemesis-bench-ftr-test-{}", std::process::id()));
        write_csv(&o, &dir).unwrap();
        let csv = std::fs::read_to_string(dir.join("ft-recovery.csv")).unwrap();
        let mut lines = csv.lines();
        assert_eq!(lines.next(), Some(columns().as_str()));
        assert!(lines.next().unwrap().ends_with(",yes,2,no,1"), "{csv}");
        let rounds = std::fs::read_to_string(dir.join("ft-recovery-rounds.csv")).unwrap();
        assert_eq!(rounds.lines().count(), 1 + 4);
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn bad_options_are_usage_errors() {
        let base = opts(Vec::new());
        assert_eq!(plan(&base).unwrap(), [4, 8]);
        for bad in [
            Opts { ranks: vec![3], ..base.clone() },
            Opts { ranks: vec![2], ..base.clone() },
            Opts { rounds: 0, ..base.clone() },
            Opts { iterations: 300, ..base.clone() },
            Opts { interval: 0, ..base.clone() },
            Opts { victim: Some(1), ..base.clone() },
            Opts { victim: Some(4), ranks: vec![4, 8], ..base.clone() },
        ] {
            assert!(matches!(plan(&bad), Err(Error::Usage(_))), "{bad:?}");
        }
    }
}
