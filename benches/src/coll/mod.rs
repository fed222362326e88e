//! `nemesis-bench coll`, and the collectives of `compare`: `shared/bench/mpi_coll.c` (a copy is in
//! `benches/c/`) built with each MPI implementation's compiler and run by its own launcher on 2
//! and 4 ranks (by default), the implementations and rank counts interleaved round by round (the
//! order rotating). The program prints `coll NAME BYTES USEC` for the barrier and for bcast,
//! reduce, allreduce, alltoall, allgather, gather and scatter at 8, 64, 512, ... bytes per rank up
//! to its argument: the mean time of one call after a warm-up, the slowest rank's.
//!
//! Ranks that outnumber the CPUs this process may use cannot busy-poll (a spinning rank holds the
//! CPU its peer needs): every implementation then yields, each in its own way ([`Mpi::command`]),
//! and the report says which.
//!
//! Reported per collective × size × rank count: the median over the rounds with its spread
//! [min..max], and each system's ratio to Open MPI as the median of per-round ratios (figures of
//! the same round compared: the machine is shared and noisy).

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::error::{Error, Result};
use crate::progress::{progress, say};
use crate::report::{field, num, spread, table};
use crate::sizes::human;
use crate::stats::{Summary, interleave};
use crate::system::{Context, IdleWait, MPI_COLL, Mpi, Skipped};

pub mod outcome;

use crate::report::REFERENCE;
pub use outcome::{COLLECTIVES, Member, Outcome};

/// The largest size per rank `mpi_coll` runs by default (its own default, 64 KiB: 8 B to 32 KiB).
pub const DEFAULT_MAX: usize = 64 << 10;

/// The largest size per rank with `--quick` (8 B to 4 KiB).
pub const QUICK_MAX: usize = 4 << 10;

/// Largest size per rank accepted (every rank allocates two buffers of ranks × this).
const MAX_BYTES: usize = 16 << 20;

/// Largest rank count accepted.
const MAX_RANKS: u32 = 64;

/// The options of the collectives shared by `coll` and `compare`.
#[derive(Clone, Debug, clap::Args)]
pub struct CollArgs {
    /// Rank counts the collectives run on, comma-separated [default: 2,4].
    #[arg(long, value_delimiter = ',')]
    pub ranks: Vec<u32>,
    /// How nemesis ranks wait when they outnumber the CPUs (Open MPI then yields by
    /// mpi_yield_when_idle, MPICH by MPIR_CVAR_POLLS_BEFORE_YIELD).
    #[arg(long, value_enum, default_value_t = IdleWait::Yield)]
    pub idle_wait: IdleWait,
}

/// `coll`'s command line.
#[derive(Clone, Debug, clap::Args)]
pub struct Opts {
    /// The MPI systems to run, comma-separated [default: nemesis-c-abi, openmpi, mpich].
    #[arg(long, value_delimiter = ',')]
    pub systems: Vec<String>,
    #[command(flatten)]
    pub coll: CollArgs,
    /// Measured rounds; in each, every system runs once on every rank count [default: 5, 3 with
    /// --quick].
    #[arg(long)]
    pub rounds: Option<usize>,
    /// Largest size per rank: mpi_coll runs 8, 64, 512, ... bytes up to it [default: 64K, 4K with
    /// --quick].
    #[arg(long, value_parser = crate::sizes::parse_size)]
    pub max_size: Option<usize>,
    /// Three rounds, sizes up to 4K.
    #[arg(long)]
    pub quick: bool,
    /// Write CSV files and SVG plots into this folder (created if needed).
    #[arg(long)]
    pub out: Option<PathBuf>,
    /// Longest time one run of one system may take, in seconds.
    #[arg(long, default_value_t = 600)]
    pub timeout: u64,
}

/// What to run.
#[derive(Clone, Debug)]
pub struct Plan {
    pub ranks: Vec<u32>,
    pub rounds: usize,
    /// `mpi_coll`'s argument: the largest size per rank.
    pub max: usize,
    pub timeout: Duration,
    pub idle: IdleWait,
}

impl Plan {
    /// The plan of these options; a bad one is a usage error.
    pub fn new(a: &CollArgs, rounds: usize, max: usize, timeout: Duration) -> Result<Plan> {
        let mut ranks = if a.ranks.is_empty() { vec![2, 4] } else { a.ranks.clone() };
        if ranks.iter().any(|&r| !(2..=MAX_RANKS).contains(&r)) {
            return Err(Error::Usage(format!("--ranks: each count from 2 to {MAX_RANKS}")));
        }
        ranks.sort_unstable();
        ranks.dedup();
        if rounds == 0 {
            return Err(Error::Usage("--rounds must be at least 1".into()));
        }
        if max > MAX_BYTES {
            return Err(Error::Usage(format!("collectives go up to {} bytes per rank (16M), not {max}", MAX_BYTES)));
        }
        if timeout.is_zero() {
            return Err(Error::Usage("--timeout must be at least 1 second".into()));
        }
        Ok(Plan { ranks, rounds, max, timeout, idle: a.idle_wait })
    }

    /// The (collective, bytes) rows `mpi_coll` prints up to [`Plan::max`], in its order.
    pub fn rows(&self) -> Vec<(&'static str, usize)> {
        rows(self.max)
    }
}

/// The (collective, bytes) `mpi_coll MAX` prints: the barrier at 0, then every other collective at
/// 8, 64, 512, ... bytes up to `max`.
pub fn rows(max: usize) -> Vec<(&'static str, usize)> {
    let mut out = vec![("barrier", 0)];
    for c in &COLLECTIVES[1..] {
        let mut bytes = 8usize;
        while bytes <= max {
            out.push((c, bytes));
            bytes *= 8;
        }
    }
    out
}

/// The figures of a run's `coll NAME BYTES USEC` lines, by (collective, bytes); other lines (a
/// launcher's notices) are ignored. A `coll` line that is not well formed (a field missing or
/// extra, an unknown collective, a size that is not a byte count, a time that is not a finite
/// number of microseconds ≥ 0) or one repeated is an error naming it.
pub fn parse(text: &str) -> Result<BTreeMap<(&'static str, usize), f64>> {
    let mut found = BTreeMap::new();
    for line in text.lines() {
        let w: Vec<&str> = line.split_whitespace().collect();
        if w.first() != Some(&"coll") {
            continue;
        }
        let bad = |why: &str| Error::Run(format!("mpi_coll printed a bad line `{}`: {why}", line.trim()));
        let [_, name, bytes, us] = w[..] else {
            return Err(bad("expected `coll NAME BYTES USEC`"));
        };
        let name = COLLECTIVES.iter().find(|c| **c == name).ok_or_else(|| bad("unknown collective"))?;
        let bytes: usize = bytes.parse().map_err(|_| bad("the size is not a byte count"))?;
        let us: f64 = us.parse().map_err(|_| bad("the time is not a number"))?;
        if !us.is_finite() || us < 0.0 {
            return Err(bad("the time is not a finite number of microseconds"));
        }
        if found.insert((*name, bytes), us).is_some() {
            return Err(bad("printed twice"));
        }
    }
    Ok(found)
}

/// A run is given up after this many failures.
const GIVE_UP: usize = 2;

/// Runs `systems` on `plan`.
pub fn run(ctx: &Context, systems: Vec<Mpi>, skipped: Vec<Skipped>, plan: &Plan) -> Result<Outcome> {
    let cpus = crate::pin::allowed();
    let rows = plan.rows();
    let units: Vec<(usize, usize)> =
        (0..systems.len()).flat_map(|m| (0..plan.ranks.len()).map(move |k| (m, k))).collect();
    let mut values = vec![vec![vec![vec![f64::NAN; plan.rounds]; rows.len()]; plan.ranks.len()]; systems.len()];
    let mut waits = vec![vec![String::new(); plan.ranks.len()]; systems.len()];
    let mut failures = Vec::new();
    let mut failed = vec![0usize; units.len()];
    let bar = progress((plan.rounds * units.len()) as u64);
    for (round, u) in interleave(units.len(), plan.rounds) {
        let (m, k) = units[u];
        let (sys, ranks) = (&systems[m], plan.ranks[k]);
        bar.set_message(format!("round {}/{}: {} on {ranks} ranks", round + 1, plan.rounds, sys.name));
        let oversubscribed = ranks as usize > cpus.len();
        let cmd = match sys.command(ctx, ranks, oversubscribed, plan.idle, &[plan.max.to_string()]) {
            Ok((cmd, wait)) => {
                waits[m][k] = format!("wait {wait}");
                Some(cmd)
            }
            Err(why) => {
                waits[m][k] = format!("not run: {why}");
                None
            }
        };
        if let Some(cmd) = cmd
            && failed[u] < GIVE_UP
        {
            let problem = match crate::proc::run_all(vec![cmd], plan.timeout) {
                Ok(done) => {
                    let d = &done[0];
                    let parsed = parse(&d.stdout);
                    if let Ok(figures) = &parsed {
                        for (j, row) in rows.iter().enumerate() {
                            if let Some(&us) = figures.get(row) {
                                values[m][k][j][round] = us;
                            }
                        }
                    }
                    match parsed {
                        Err(e) => Some(e.to_string()),
                        Ok(_) if !d.status.success() => {
                            Some(format!("failed ({}):\n    {}", d.status, d.stderr_tail()))
                        }
                        Ok(f) if f.is_empty() => {
                            Some(format!("no `coll` lines in its output:\n    {}", d.stderr_tail()))
                        }
                        Ok(_) => None,
                    }
                }
                Err(e) => Some(e.to_string()),
            };
            if let Some(p) = problem {
                failed[u] += 1;
                let line = format!("round {}: {} on {ranks} ranks: {p}", round + 1, sys.name);
                say(&bar, format!("nemesis-bench: {line}"));
                failures.push(line);
            }
        }
        bar.inc(1);
    }
    bar.finish_and_clear();
    let members = systems
        .into_iter()
        .zip(waits)
        .map(|(s, waits)| Member { name: s.name, family: s.family, detail: s.detail, waits })
        .collect();
    Ok(Outcome { members, skipped, ranks: plan.ranks.clone(), rows, values, failures, rounds: plan.rounds, cpus })
}

/// The terminal report.
pub fn text(o: &Outcome, command: &str) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "nemesis-bench {command}: collectives of mpi_coll.c on MPI_COMM_WORLD (time of one call, the slowest \
         rank's mean after a warm-up); CPUs {}; {} rounds, systems and rank counts interleaved; medians [min..max]",
        crate::pin::describe(&o.cpus),
        o.rounds
    );
    let width = o.members.iter().map(|s| s.name.len()).chain(o.skipped.iter().map(|s| s.name.len())).max();
    let width = width.unwrap_or(0);
    for m in &o.members {
        let _ = writeln!(out, "  {:<width$}  {}", m.name, m.detail);
        for (k, r) in o.ranks.iter().enumerate() {
            let over = if *r as usize > o.cpus.len() { format!(" (on {} CPUs)", o.cpus.len()) } else { String::new() };
            let _ = writeln!(out, "  {:<width$}    {r} ranks{over}: {}", "", m.waits[k]);
        }
    }
    for s in &o.skipped {
        let _ = writeln!(out, "  {:<width$}  skipped: {}", s.name, s.reason);
    }
    let reference = o.reference();
    for (k, r) in o.ranks.iter().enumerate() {
        let _ = writeln!(out, "\ncollectives on {r} ranks, us per call (lower is better)");
        let all: Vec<usize> = (0..o.members.len()).collect();
        out += &rank_table(o, &all, |m, j| spread(&o.figure(m, k, j)));
        let Some(rf) = reference else { continue };
        let others: Vec<usize> = all.into_iter().filter(|&m| m != rf).collect();
        if others.is_empty() {
            continue;
        }
        let _ = writeln!(
            out,
            "ratio to {REFERENCE} on {r} ranks (median of per-round ratios [min..max]; below 1 is faster than {REFERENCE})"
        );
        out += &rank_table(o, &others, |m, j| spread(&o.to_reference(m, k, j)));
    }
    if reference.is_none() {
        let _ = writeln!(out, "\n(no ratios: {REFERENCE} was not measured)");
    }
    if !o.failures.is_empty() {
        let _ = writeln!(out, "\nfailed runs (their figures are missing):");
        for f in &o.failures {
            let _ = writeln!(out, "  {f}");
        }
    }
    out
}

/// A table with a row per (collective, size) and a column per member of `members`, the cell of
/// member `m` at row `j` being `cell(m, j)`.
fn rank_table(o: &Outcome, members: &[usize], cell: impl Fn(usize, usize) -> String) -> String {
    let mut head = vec!["collective".to_owned(), "bytes".to_owned()];
    head.extend(members.iter().map(|&m| o.members[m].name.clone()));
    let body: Vec<Vec<String>> = o
        .rows
        .iter()
        .enumerate()
        .map(|(j, (c, b))| {
            let mut row = vec![c.to_string(), human(*b)];
            row.extend(members.iter().map(|&m| cell(m, j)));
            row
        })
        .collect();
    table(&head, &body)
}

/// The columns of the collectives' CSV file.
pub const COLUMNS: &str = "system,family,ranks,wait,collective,bytes,unit,rounds,median,min,max,\
ratio_to_openmpi,ratio_to_openmpi_min,ratio_to_openmpi_max";

/// Writes `PREFIX.csv` (a row per system, rank count, collective and size) and
/// `PREFIX-systems.csv` into `dir`; returns the files written.
pub fn write_csv(o: &Outcome, dir: &Path, prefix: &str) -> Result<Vec<PathBuf>> {
    std::fs::create_dir_all(dir).map_err(|e| Error::file("create", dir, e))?;
    let opt = |v: Option<f64>| v.map(|x| x.to_string()).unwrap_or_default();
    let mut t = format!("{COLUMNS}\n");
    for (m, mem) in o.members.iter().enumerate() {
        for (k, r) in o.ranks.iter().enumerate() {
            for (j, (c, b)) in o.rows.iter().enumerate() {
                let (f, x) = (o.figure(m, k, j), o.to_reference(m, k, j));
                let n = o.values[m][k][j].iter().filter(|v| v.is_finite()).count();
                let _ = writeln!(
                    t,
                    "{},{},{r},{},{c},{b},us,{n},{},{},{},{},{},{}",
                    field(&mem.name),
                    mem.family.name(),
                    field(&mem.waits[k]),
                    opt(f.map(|s| s.median)),
                    opt(f.map(|s| s.min)),
                    opt(f.map(|s| s.max)),
                    opt(x.map(|s| s.median)),
                    opt(x.map(|s| s.min)),
                    opt(x.map(|s| s.max)),
                );
            }
        }
    }
    let measured = o.members.iter().map(|m| (m.name.as_str(), m.family, m.detail.as_str()));
    let systems = crate::report::systems_csv(measured, &o.skipped);
    let mut written = Vec::new();
    for (name, text) in [(format!("{prefix}.csv"), t), (format!("{prefix}-systems.csv"), systems)] {
        let p = dir.join(name);
        std::fs::write(&p, text).map_err(|e| Error::file("write", &p, e))?;
        written.push(p);
    }
    Ok(written)
}

/// A one-line summary of the ratios to Open MPI at small sizes (8–512 B and the barrier), per
/// rank count and system: the range of the medians, for the end of the report.
pub fn small_summary(o: &Outcome) -> String {
    let Some(rf) = o.reference() else { return String::new() };
    let mut out = String::new();
    for (k, r) in o.ranks.iter().enumerate() {
        for m in (0..o.members.len()).filter(|&m| m != rf) {
            let meds: Vec<f64> = o
                .rows
                .iter()
                .enumerate()
                .filter(|(_, (_, b))| *b <= 512)
                .filter_map(|(j, _)| o.to_reference(m, k, j).map(|s| s.median))
                .collect();
            if let Some(s) = Summary::of(&meds) {
                let _ = writeln!(
                    out,
                    "{} / {REFERENCE} on {r} ranks, barrier and 8-512 B: {}..{} (median of the {} medians {})",
                    o.members[m].name,
                    num(s.min),
                    num(s.max),
                    meds.len(),
                    num(s.median)
                );
            }
        }
    }
    out
}

/// `coll`.
pub fn command(o: &Opts) -> Result<()> {
    let ctx = Context::new()?;
    let rounds = o.rounds.unwrap_or(if o.quick { 3 } else { 5 });
    let max = o.max_size.unwrap_or(if o.quick { QUICK_MAX } else { DEFAULT_MAX });
    let plan = Plan::new(&o.coll, rounds, max, Duration::from_secs(o.timeout))?;
    let (found, skipped) = crate::system::discover_mpi(&ctx, &o.systems, MPI_COLL)?;
    finish(&ctx, found, skipped, &plan, o.out.as_deref(), "coll", "coll")
}

/// Runs and reports (and writes `PREFIX.csv`... with `out`).
pub fn finish(
    ctx: &Context,
    found: Vec<Mpi>,
    skipped: Vec<Skipped>,
    plan: &Plan,
    out: Option<&Path>,
    command: &str,
    prefix: &str,
) -> Result<()> {
    let outcome = run(ctx, found, skipped, plan)?;
    print!("{}", text(&outcome, command));
    let summary = small_summary(&outcome);
    if !summary.is_empty() {
        print!("\n{summary}");
    }
    if let Some(dir) = out {
        let mut files = write_csv(&outcome, dir, prefix)?;
        files.extend(crate::plot::coll(&outcome, dir, prefix, &format!("nemesis-bench {command}"))?);
        println!("\nwrote {}", files.iter().map(|f| f.display().to_string()).collect::<Vec<_>>().join(", "));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::system::Family;

    #[test]
    fn rows_as_mpi_coll_runs_them() {
        assert_eq!(rows(7), vec![("barrier", 0)]);
        let r = rows(64 << 10);
        assert_eq!(r.len(), 1 + 7 * 5);
        assert_eq!(r[1..6].iter().map(|x| x.1).collect::<Vec<_>>(), [8, 64, 512, 4096, 32768]);
        assert_eq!(r[1].0, "bcast");
        assert_eq!(r.last(), Some(&("scatter", 32768)));
        assert_eq!(rows(512).len(), 1 + 7 * 3);
    }

    #[test]
    fn coll_lines_parse() {
        let text = "Warning: something\ncoll barrier 0 1.250\ncoll bcast 8 0.731\n\ncoll scatter 4096 12.000\n";
        let f = parse(text).unwrap();
        assert_eq!(f.len(), 3);
        assert_eq!(f.get(&("barrier", 0)), Some(&1.25));
        assert_eq!(f.get(&("scatter", 4096)), Some(&12.0));
        assert!(parse("nothing here\n").unwrap().is_empty());
    }

    #[test]
    fn bad_coll_lines_are_refused_with_the_line() {
        for (line, says) in [
            ("coll barrier 0", "expected `coll NAME BYTES USEC`"),
            ("coll bcast 8 1.0 extra", "expected `coll NAME BYTES USEC`"),
            ("coll scan 8 1.0", "unknown collective"),
            ("coll bcast -8 1.0", "not a byte count"),
            ("coll bcast 8B 1.0", "not a byte count"),
            ("coll bcast 8 fast", "not a number"),
            ("coll bcast 8 nan", "finite"),
            ("coll bcast 8 -1.0", "finite"),
            ("coll bcast 8 inf", "finite"),
        ] {
            match parse(&format!("coll barrier 0 1.0\n{line}\n")) {
                Err(Error::Run(e)) => assert!(e.contains(says) && e.contains(line), "{line}: {e}"),
                other => panic!("{line} accepted: {other:?}"),
            }
        }
        let twice = parse("coll bcast 8 1.0\ncoll bcast 8 2.0\n").unwrap_err().to_string();
        assert!(twice.contains("twice"), "{twice}");
    }

    #[test]
    fn plans_refuse_bad_options() {
        let a = |ranks: Vec<u32>| CollArgs { ranks, idle_wait: IdleWait::Yield };
        let t = Duration::from_secs(1);
        let p = Plan::new(&a(vec![4, 2, 4]), 3, 8, t).unwrap();
        assert_eq!(p.ranks, [2, 4]);
        assert_eq!(Plan::new(&a(Vec::new()), 3, 8, t).unwrap().ranks, [2, 4]);
        for (args, rounds, max, timeout) in [
            (a(vec![1]), 3, 8, t),
            (a(vec![2, 65]), 3, 8, t),
            (a(vec![2]), 0, 8, t),
            (a(vec![2]), 1, 32 << 20, t),
            (a(vec![2]), 1, 8, Duration::ZERO),
        ] {
            assert!(matches!(Plan::new(&args, rounds, max, timeout), Err(Error::Usage(_))));
        }
    }

    fn outcome() -> Outcome {
        let member =
            |name: &str, family| Member { name: name.into(), family, detail: "d".into(), waits: vec!["poll".into()] };
        Outcome {
            members: vec![member("nemesis-c-abi", Family::Nemesis), member("openmpi", Family::Peer)],
            skipped: vec![Skipped { name: "mpich".into(), reason: "not here".into() }],
            ranks: vec![2],
            rows: vec![("barrier", 0), ("bcast", 8)],
            // [member][ranks][row][round]: round 2 slow for both.
            values: vec![vec![vec![vec![1.0, 4.0], vec![2.0, f64::NAN]]], vec![vec![vec![2.0, 8.0], vec![4.0, 4.0]]]],
            failures: Vec::new(),
            rounds: 2,
            cpus: vec![0, 1],
        }
    }

    #[test]
    fn ratios_are_per_round_and_reported() {
        let o = outcome();
        let r = o.to_reference(0, 0, 0).unwrap();
        assert_eq!((r.median, r.min, r.max), (0.5, 0.5, 0.5));
        assert_eq!(o.to_reference(0, 0, 1).map(|s| s.median), Some(0.5));
        assert_eq!(o.to_reference(1, 0, 0), None);
        let t = text(&o, "coll");
        assert!(t.contains("collectives on 2 ranks, us per call") && t.contains("ratio to openmpi on 2 ranks"), "{t}");
        assert!(t.contains("mpich") && t.contains("skipped: not here"), "{t}");
        assert!(small_summary(&o).contains("nemesis-c-abi / openmpi on 2 ranks, barrier and 8-512 B: 0.500..0.500"));
        let dir = std::env::temp_dir().join(format!("nemesis-bench-coll-{}", std::process::id()));
        let files = write_csv(&o, &dir, "c").unwrap();
        assert_eq!(files.len(), 2);
        let csv = std::fs::read_to_string(dir.join("c.csv")).unwrap();
        assert_eq!(csv.lines().next(), Some(COLUMNS));
        assert_eq!(csv.lines().count(), 1 + 2 * 2);
        assert!(csv.contains("nemesis-c-abi,nemesis,2,poll,bcast,8,us,1,2,2,2,0.5,0.5,0.5"), "{csv}");
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
