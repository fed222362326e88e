//! What a measuring command runs: the options shared by `compare`, `latency`, `bw`, `bibw`, `mr`
//! and `ft-overhead` ([`SuiteOpts`]), resolved into a [`Plan`] (workloads, rounds, sizes,
//! timeout, the fraction of the iterations). A plan always holds at least one round and, for
//! every workload, at least one size.

use std::path::PathBuf;
use std::time::Duration;

use crate::error::{Error, Result};
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
