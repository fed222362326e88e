//! The measuring engine of `compare`, `latency`, `bw` and `bibw`: runs every system on every
//! workload once per round, interleaved (the order rotates each round: A B C, B C A, ...), and
//! measures the baseline at the start of each round (the cache-line latency between the two
//! CPUs for latency; one core's memcpy of the same size for bandwidths), so that per-round
//! ratios compare figures taken under the same load. A progress bar on stderr follows the runs.

use std::path::PathBuf;
use std::time::Duration;

use indicatif::{ProgressBar, ProgressStyle};

use crate::error::{Error, Result};
use crate::system::{Context, Family, Skipped, System};
use crate::workload::Workload;

/// Command-line options shared by the suite's commands.
#[derive(Clone, Debug, clap::Args)]
pub struct SuiteOpts {
    /// Measured rounds; in each, every system runs once, interleaved [default: 5, 3 with --quick].
    #[arg(long)]
    pub rounds: Option<usize>,
    /// Largest message: sizes double from 0 (latency) or 1 (bandwidth) up to it, as
    /// mpi_pingpong.c runs them [default: 4M, 1M with --quick].
    #[arg(long, value_parser = crate::sizes::parse_size)]
    pub max_size: Option<usize>,
    /// Exactly these sizes instead (systems running mpi_pingpong.c only report its powers of two).
    #[arg(long, value_delimiter = ',', value_parser = crate::sizes::parse_size)]
    pub sizes: Vec<usize>,
    /// Three rounds, nine sizes up to 1M (0 or 1, 8, 64, 512, 4K, 32K, 64K, 128K, 1M), a tenth
    /// of the iterations in this crate's rank programs (the MPI programs run all theirs): a
    /// minute or two.
    #[arg(long)]
    pub quick: bool,
    /// Write CSV files and SVG plots into this folder (created if needed).
    #[arg(long)]
    pub out: Option<PathBuf>,
    /// Longest time one run of one system may take, in seconds.
    #[arg(long, default_value_t = 600)]
    pub timeout: u64,
    /// For tests: run this fraction of the iterations in the rank programs of this crate (the
    /// MPI programs always run theirs) [default: 1, 0.1 with --quick].
    #[arg(long, hide = true)]
    pub iters_scale: Option<f64>,
}

/// The sizes of `--quick` above 1 byte: every factor of 8, and both sides of the eager limit.
pub const QUICK: [usize; 8] = [8, 64, 512, 4 << 10, 32 << 10, 64 << 10, 128 << 10, 1 << 20];

/// The fraction of `mpi_pingpong`'s iterations this crate's rank programs run with `--quick`.
pub const QUICK_SCALE: f64 = 0.1;

/// Largest message size accepted (buffers of this size are allocated by every rank).
const MAX_SIZE: usize = 1 << 30;

/// What to run, resolved from [`SuiteOpts`].
#[derive(Clone, Debug)]
pub struct Plan {
    pub workloads: Vec<Workload>,
    pub rounds: usize,
    pub sizes: Option<Vec<usize>>,
    pub max: usize,
    pub quick: bool,
    pub timeout: Duration,
    /// Fraction of the iterations the rank programs of this crate run (1 but in tests).
    pub scale: f64,
}

impl Plan {
    /// The plan of `o` for `workloads`; a bad option is a usage error.
    pub fn new(o: &SuiteOpts, workloads: Vec<Workload>) -> Result<Plan> {
        let rounds = o.rounds.unwrap_or(if o.quick { 3 } else { 5 });
        if rounds == 0 {
            return Err(Error::Usage("--rounds must be at least 1".into()));
        }
        let scale = o.iters_scale.unwrap_or(if o.quick { QUICK_SCALE } else { 1.0 });
        if !(scale > 0.0 && scale <= 1.0) {
            return Err(Error::Usage("--iters-scale must be in (0, 1]".into()));
        }
        if o.timeout == 0 {
            return Err(Error::Usage("--timeout must be at least 1 second".into()));
        }
        let max = o.max_size.unwrap_or(if o.quick { 1 << 20 } else { 4 << 20 });
        let sizes = (!o.sizes.is_empty()).then(|| {
            let mut s = o.sizes.clone();
            s.sort_unstable();
            s.dedup();
            s
        });
        let largest = sizes.as_ref().and_then(|s| s.last().copied()).unwrap_or(max);
        if largest > MAX_SIZE {
            return Err(Error::Usage(format!("messages go up to {} bytes (1G), not {largest}", MAX_SIZE)));
        }
        let timeout = Duration::from_secs(o.timeout);
        let plan = Plan { workloads, rounds, sizes, max, quick: o.quick, timeout, scale };
        plan.check_sizes(&plan.workloads)?;
        Ok(plan)
    }

    /// An error if `workloads` would run no size (e.g. `--max-size 0` for a bandwidth).
    pub fn check_sizes(&self, workloads: &[Workload]) -> Result<()> {
        match workloads.iter().find(|&&w| self.sizes_of(w).is_empty()) {
            Some(w) => Err(Error::Usage(format!("no message size to run for {} (see --max-size, --sizes)", w.key()))),
            None => Ok(()),
        }
    }

    /// The sizes of `w`: those asked for, else `mpi_pingpong`'s doubling up to the largest
    /// (with `--quick`, the eight of [`QUICK`] among them).
    pub fn sizes_of(&self, w: Workload) -> Vec<usize> {
        match &self.sizes {
            Some(s) if w == Workload::Latency => s.clone(),
            Some(s) => s.iter().copied().filter(|&x| x > 0).collect(),
            None if self.quick => {
                let all = w.sizes(self.max);
                let first = all.first().copied();
                all.into_iter().filter(|&s| Some(s) == first || QUICK.contains(&s)).collect()
            }
            None => w.sizes(self.max),
        }
    }
}

/// The figures of one workload: `values[m][j][r]` for member `m` (an index into
/// [`Outcome::systems`]), size `j`, round `r` (NaN where a run failed or the size is missing).
#[derive(Clone, Debug)]
pub struct Series {
    pub workload: Workload,
    pub sizes: Vec<usize>,
    pub members: Vec<usize>,
    pub values: Vec<Vec<Vec<f64>>>,
    /// `baseline[j][r]`, in the workload's unit.
    pub baseline: Vec<Vec<f64>>,
}

impl Series {
    /// What the baseline is.
    pub fn baseline_name(&self) -> &'static str {
        match self.workload {
            Workload::Latency => "cache-line",
            _ => "memcpy",
        }
    }
}

/// Everything a suite run measured.
#[derive(Clone, Debug)]
pub struct Outcome {
    pub systems: Vec<System>,
    pub skipped: Vec<Skipped>,
    pub series: Vec<Series>,
    /// Runs that failed, with their error.
    pub failures: Vec<String>,
    pub rounds: usize,
    pub cpus: (usize, usize),
    /// [`Plan::scale`].
    pub scale: f64,
}

impl Outcome {
    pub fn family(&self, system: usize) -> Family {
        self.systems[system].family
    }
}

/// A progress bar of `total` steps on stderr (drawn only on a terminal).
pub fn progress(total: u64) -> ProgressBar {
    let bar = ProgressBar::new(total);
    bar.set_style(
        ProgressStyle::with_template("{elapsed_precise} [{bar:32}] {pos}/{len} {msg}")
            .unwrap_or_else(|_| ProgressStyle::default_bar()),
    );
    bar
}

/// Prints `line` on stderr above the progress bar (or plainly, when the bar is not drawn).
pub fn say(bar: &ProgressBar, line: String) {
    if bar.is_hidden() { eprintln!("{line}") } else { bar.println(line) }
}

/// A run is given up after this many failures.
const GIVE_UP: usize = 2;

/// Runs `systems` on `plan`.
pub fn run(ctx: &Context, systems: Vec<System>, skipped: Vec<Skipped>, plan: &Plan) -> Result<Outcome> {
    let mut series: Vec<Series> = plan
        .workloads
        .iter()
        .map(|&w| {
            let sizes = plan.sizes_of(w);
            let members: Vec<usize> = (0..systems.len()).filter(|&k| systems[k].supports(w)).collect();
            let values = vec![vec![vec![f64::NAN; plan.rounds]; sizes.len()]; members.len()];
            let baseline = vec![vec![f64::NAN; plan.rounds]; sizes.len()];
            Series { workload: w, sizes, members, values, baseline }
        })
        .collect();
    // One unit per (series, member).
    let units: Vec<(usize, usize)> =
        series.iter().enumerate().flat_map(|(i, s)| (0..s.members.len()).map(move |m| (i, m))).collect();
    let bar = progress((plan.rounds * (units.len() + 1)) as u64);
    let mut failures = Vec::new();
    let mut failed = vec![0usize; units.len()];
    let mut current_round = usize::MAX;
    for (round, u) in crate::stats::interleave(units.len(), plan.rounds) {
        if round != current_round {
            current_round = round;
            bar.set_message(format!("round {}/{}: baseline", round + 1, plan.rounds));
            baseline(ctx, &mut series, round, plan.quick)?;
            bar.inc(1);
        }
        let (i, m) = units[u];
        let s = &mut series[i];
        let sys = &systems[s.members[m]];
        bar.set_message(format!("round {}/{}: {} {}", round + 1, plan.rounds, sys.name, s.workload.key()));
        if failed[u] < GIVE_UP {
            match sys.run(ctx, s.workload, &s.sizes, plan) {
                Ok(run) => {
                    run.values.into_iter().enumerate().for_each(|(j, x)| s.values[m][j][round] = x);
                    if let Some(p) = run.problem {
                        let line = format!(
                            "round {}: {} {} (figures before the failure kept): {p}",
                            round + 1,
                            sys.name,
                            s.workload.key()
                        );
                        say(&bar, format!("nemesis-bench: {line}"));
                        failures.push(line);
                    }
                }
                Err(e) => {
                    failed[u] += 1;
                    let line = format!("round {}: {} {}: {e}", round + 1, sys.name, s.workload.key());
                    say(&bar, format!("nemesis-bench: {line}"));
                    failures.push(line);
                }
            }
        }
        bar.inc(1);
    }
    bar.finish_and_clear();
    Ok(Outcome { systems, skipped, series, failures, rounds: plan.rounds, cpus: ctx.cpus, scale: plan.scale })
}

/// Measures each series' baseline for `round`.
fn baseline(ctx: &Context, series: &mut [Series], round: usize, quick: bool) -> Result<()> {
    let (a, b) = ctx.cpus;
    let bytes = if quick { 5e7 } else { 2e8 };
    for s in series {
        match s.workload {
            Workload::Latency => {
                // A single CPU has no line to bounce between two: the ratio is then missing.
                let us = crate::baseline::cacheline_ns(a, b, if quick { 50_000 } else { 200_000 }).map(|ns| ns / 1e3);
                let us = us.unwrap_or(f64::NAN);
                s.baseline.iter_mut().for_each(|v| v[round] = us);
            }
            Workload::Bandwidth | Workload::BiBandwidth => {
                let sizes = s.sizes.clone();
                let got = crate::pin::on_cpu(a, || {
                    sizes.iter().map(|&n| crate::baseline::memcpy_mbps(n, bytes, 3)).collect::<Vec<_>>()
                })
                .map_err(|e| Error::io(format!("pin to CPU {a}"), e))?;
                got.into_iter().enumerate().for_each(|(j, v)| s.baseline[j][round] = v);
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn opts() -> SuiteOpts {
        SuiteOpts {
            rounds: None,
            max_size: None,
            sizes: Vec::new(),
            quick: false,
            out: None,
            timeout: 600,
            iters_scale: None,
        }
    }

    #[test]
    fn sizes_and_rounds_from_options() {
        let p = Plan::new(&opts(), vec![Workload::Latency]).unwrap();
        assert_eq!((p.rounds, p.sizes_of(Workload::Latency).len(), p.sizes_of(Workload::Bandwidth).len()), (5, 24, 23));
        let q = Plan::new(&SuiteOpts { quick: true, ..opts() }, Vec::new()).unwrap();
        assert_eq!((q.rounds, q.scale), (3, QUICK_SCALE));
        assert_eq!(q.sizes_of(Workload::Latency), [&[0][..], &QUICK[..]].concat());
        assert_eq!(q.sizes_of(Workload::Bandwidth), [&[1][..], &QUICK[..]].concat());
        let q =
            Plan::new(&SuiteOpts { quick: true, max_size: Some(64), rounds: Some(1), ..opts() }, Vec::new()).unwrap();
        assert_eq!((q.rounds, q.sizes_of(Workload::Bandwidth)), (1, vec![1, 8, 64]));
        let l = Plan::new(&SuiteOpts { sizes: vec![9, 0, 9], ..opts() }, Vec::new()).unwrap();
        assert_eq!((l.sizes_of(Workload::Latency), l.sizes_of(Workload::Bandwidth)), (vec![0, 9], vec![9]));
        assert!(matches!(
            Plan::new(&SuiteOpts { max_size: Some(0), ..opts() }, vec![Workload::Bandwidth]),
            Err(Error::Usage(_))
        ));
        for bad in [
            SuiteOpts { rounds: Some(0), ..opts() },
            SuiteOpts { timeout: 0, ..opts() },
            SuiteOpts { max_size: Some(2 << 30), ..opts() },
            SuiteOpts { iters_scale: Some(0.0), ..opts() },
        ] {
            assert!(matches!(Plan::new(&bad, Vec::new()), Err(Error::Usage(_))));
        }
    }
}
