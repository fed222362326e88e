//! `nemesis-run -n N [--bind core|hwthread|l2|l3|numa|package|none] [--map-by
//! core|l3|numa|package[:spread|compact]] [--report-bindings] [--dry-run] [--wait
//! poll|yield|block] [--tag-output] [--keep-going] [--] program [args...]`: starts N ranks of a
//! nemesis program on this machine, serves their PMI-1 or PMI-2 conversation and supervises them
//! (the library behind it is `nemesis::launch`; the policies are `nemesis::topology::plan`'s).
//!
//! Exit status: 0 if every rank exited 0; else the first failing rank's code, or 128 + the signal
//! that killed it; the code a rank passed to PMI `abort`; 130 or 143 after SIGINT or SIGTERM;
//! 127 if the program is not found, 126 if it cannot be executed; 2 for a bad command line; 1 for
//! any other launcher error. Set `NEMESIS_LOG` (e.g. `NEMESIS_LOG=debug`) for the launcher's own
//! events; by default only warnings are shown.

use std::ffi::OsString;
use std::io::{ErrorKind, IsTerminal};
use std::process::ExitCode;

use clap::{Parser, ValueEnum};
use nemesis::Error;
use nemesis::launch::{Bind, Job, MapBy, Wait};

#[derive(Debug, Parser)]
#[command(name = "nemesis-run", version, about = "Start the ranks of a nemesis job on this machine")]
struct Cli {
    /// Number of ranks.
    #[arg(short = 'n', long = "np", value_name = "N", value_parser = clap::value_parser!(u32).range(1..))]
    ranks: u32,
    /// Bind each rank to the object of this level holding its PU (core: its core; without the
    /// hwloc feature, rank i on the (i mod n)-th allowed CPU), or leave placement to the kernel
    /// (none). Levels other than core and none need the hwloc feature.
    #[arg(long, value_name = "LEVEL", default_value = "none", value_parser = parse_bind)]
    bind: Bind,
    /// Distribute ranks over cores (compact by default), L3 caches, NUMA nodes or packages
    /// (spread, round robin, by default); physical cores before SMT siblings. Needs the hwloc
    /// feature unless it is `core`.
    #[arg(long, value_name = "LEVEL[:spread|compact]", value_parser = parse_map)]
    map_by: Option<MapBy>,
    /// Print one line per rank (its CPU set and the topology objects it covers) before starting.
    #[arg(long)]
    report_bindings: bool,
    /// Print the topology and the placement of every rank, and start nothing (HWLOC_SYNTHETIC or
    /// HWLOC_XMLFILE plan for another machine).
    #[arg(long)]
    dry_run: bool,
    /// How ranks wait for messages (sets NEMESIS_WAIT in every rank).
    #[arg(long, value_enum)]
    wait: Option<WaitArg>,
    /// Prefix every line of the ranks' output with "[rank] ".
    #[arg(long)]
    tag_output: bool,
    /// Let the other ranks run on when one fails (by default the job is ended).
    #[arg(long)]
    keep_going: bool,
    /// Split the ranks into K nodes (blocks of consecutive ranks, each with its own segment):
    /// traffic between them goes through TCP, as between machines.
    #[arg(long, value_name = "K", default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..))]
    nodes: u32,
    /// The program to run, and its arguments.
    #[arg(required = true, trailing_var_arg = true, value_name = "PROGRAM [ARGS]")]
    command: Vec<OsString>,
}

fn parse_bind(s: &str) -> Result<Bind, String> {
    Bind::parse(s).map_err(|e| e.to_string())
}

fn parse_map(s: &str) -> Result<MapBy, String> {
    MapBy::parse(s).map_err(|e| e.to_string())
}

#[derive(Debug, Clone, Copy, ValueEnum)]
enum WaitArg {
    Poll,
    Yield,
    Block,
}

fn main() -> ExitCode {
    let filter = tracing_subscriber::EnvFilter::try_from_env("NEMESIS_LOG")
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn"));
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_ansi(std::io::stderr().is_terminal())
        .try_init();

    let cli = Cli::parse();
    let (program, args) = cli.command.split_first().expect("clap requires the program");
    let mut job = Job::new(program, args)
        .ranks(cli.ranks)
        .bind(cli.bind)
        .report_bindings(cli.report_bindings)
        .tag_output(cli.tag_output)
        .keep_going(cli.keep_going)
        .nodes(cli.nodes)
        .handle_signals(true);
    if let Some(m) = cli.map_by {
        job = job.map_by(m);
    }
    if cli.dry_run {
        return match job.dry_run() {
            Ok(lines) => {
                lines.iter().for_each(|l| println!("{l}"));
                ExitCode::SUCCESS
            }
            Err(e) => {
                eprintln!("nemesis-run: {e}");
                ExitCode::from(1)
            }
        };
    }
    if let Some(w) = cli.wait {
        job = job.wait(match w {
            WaitArg::Poll => Wait::Poll,
            WaitArg::Yield => Wait::Yield,
            WaitArg::Block => Wait::Block,
        });
    }
    match job.run() {
        Ok(outcome) => ExitCode::from(outcome.exit_code().clamp(0, 255) as u8),
        Err(e) => {
            eprintln!("nemesis-run: {e}");
            ExitCode::from(match &e {
                Error::Spawn { source, .. } if source.kind() == ErrorKind::NotFound => 127,
                Error::Spawn { .. } => 126,
                _ => 1,
            })
        }
    }
}
