//! `nemesis-bench __launch`: starts ranks with `nemesis::launch::Job` (what `nemesis-run` is a
//! command line over) in a child process of the suite, so that the suite captures their output
//! and can end them at a deadline like any other measured program.

use nemesis::launch::{Bind, FtGroups, Job, Wait};

use crate::error::{Error, Result};

/// `__launch`'s command line.
#[derive(Clone, Debug, clap::Args)]
pub struct Opts {
    #[arg(long, default_value_t = 2)]
    pub ranks: u32,
    /// Node identities the ranks are split into (2: every message crosses the TCP netmod).
    #[arg(long, default_value_t = 1)]
    pub nodes: u32,
    /// poll, yield or block.
    #[arg(long, default_value = "poll")]
    pub wait: String,
    /// CPU binding: core (one rank per CPU, wrapping around) or none.
    #[arg(long, default_value = "core")]
    pub bind: String,
    /// Fault tolerance in K groups of consecutive ranks, with recovery of failed groups (what
    /// `nemesis-run --ft-groups K` runs).
    #[arg(long)]
    pub ft_groups: Option<u32>,
    /// `VAR=value` for every rank (repeatable).
    #[arg(long)]
    pub env: Vec<String>,
    /// The program and its arguments.
    #[arg(last = true, required = true)]
    pub command: Vec<String>,
}

/// Runs the job (pinned one rank per CPU unless `--bind none`); returns its exit code.
pub fn run(o: &Opts) -> Result<i32> {
    let wait = Wait::parse(&o.wait)?;
    let (program, args) = o.command.split_first().ok_or_else(|| Error::Usage("no program to launch".into()))?;
    let bind = Bind::parse(&o.bind)?;
    let mut job = Job::new(program, args).ranks(o.ranks).nodes(o.nodes).bind(bind).wait(wait).handle_signals(true);
    if let Some(k) = o.ft_groups {
        job = job.ft(FtGroups::Blocks(k));
    }
    for kv in &o.env {
        let (k, v) = kv.split_once('=').ok_or_else(|| Error::Usage(format!("--env {kv}: expected VAR=value")))?;
        job = job.env(k, v);
    }
    let outcome = job.run()?;
    if !outcome.success() {
        eprintln!("nemesis-bench: the ranks failed: {:?}", outcome.ending());
        for r in outcome.ranks().iter().filter(|r| r.code() != 0) {
            eprintln!("nemesis-bench: rank {} (pid {}) {}", r.rank, r.pid, r.describe());
        }
    }
    Ok(outcome.exit_code())
}

/// Runs `ranks` ranks of this program with `args` under `__launch` (pinned, waiting by `wait`),
/// and returns what they printed on stdout; fails if a rank fails or `timeout` passes.
pub fn capture(
    ctx: &crate::system::Context,
    ranks: u32,
    wait: Wait,
    args: &[String],
    timeout: std::time::Duration,
) -> Result<String> {
    let mut c = std::process::Command::new(&ctx.exe);
    c.args(["__launch", "--ranks", &ranks.to_string(), "--wait", wait.name(), "--"]).arg(&ctx.exe).args(args);
    let done = crate::proc::run_all(vec![c], timeout)?;
    let d = &done[0];
    if !d.status.success() {
        return Err(Error::Run(format!("the ranks failed ({}):\n    {}", d.status, d.stderr_tail())));
    }
    Ok(d.stdout.clone())
}
