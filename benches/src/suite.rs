//! The measuring engine of `compare`, `latency`, `bw` and `bibw`: runs every system on every
//! workload once per round, interleaved (the order rotates each round: A B C, B C A, ...), and
//! measures the baseline at the start of each round (the cache-line latency between the two
//! CPUs for latency; one core's memcpy of the same size for bandwidths), so that per-round
//! ratios compare figures taken under the same load. A progress bar on stderr follows the runs.

use crate::error::{Error, Result};
use crate::plan::Plan;
use crate::progress::{progress, say};
use crate::system::{Context, Family, Skipped, System};
use crate::workload::Workload;

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
