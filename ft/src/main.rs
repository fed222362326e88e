//! `nemesis-ft`: fault-tolerance tooling. `nemesis-ft groups --matrix comm.csv` reads a P × P CSV of bytes sent
//! (row u, column v = bytes rank u sent to rank v; no header) and prints one line `<rank> <group>` per rank on
//! standard output, nothing else; a summary and any error go to standard error.

use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand, ValueEnum};
use nemesis_ft::matrix::CommMatrix;
use nemesis_ft::partition::{self, Bisector, CostModel};

#[derive(Parser)]
#[command(name = "nemesis-ft", version, about = "HydEE fault-tolerance tools for nemesis")]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Split the ranks into HydEE groups (recursive bisection of the thesis's chapter 4, HydEE cost function).
    Groups {
        /// P x P CSV of bytes sent: row u, column v = bytes rank u sent to rank v; no header.
        #[arg(long)]
        matrix: PathBuf,
        /// Graph partitioner used for each bisection.
        #[arg(long, value_enum, default_value_t = BisectorArg::Native)]
        bisector: BisectorArg,
        /// Weight of the logged share in the cost (thesis: 0.23).
        #[arg(long, default_value_t = partition::ALPHA)]
        alpha: f64,
        /// Weight of the restarted share in the cost (thesis: 0.124).
        #[arg(long, default_value_t = partition::BETA)]
        beta: f64,
    },
}

#[derive(Clone, Copy, ValueEnum)]
enum BisectorArg {
    /// Pure-Rust multilevel bisection.
    Native,
    /// METIS (needs a build with the `metis` feature).
    Metis,
}

fn run(cli: Cli) -> Result<(), String> {
    match cli.command {
        Command::Groups { matrix, bisector, alpha, beta } => {
            if !(alpha.is_finite() && beta.is_finite() && alpha >= 0.0 && beta >= 0.0) {
                return Err("--alpha and --beta must be non-negative numbers".into());
            }
            let text = std::fs::read_to_string(&matrix).map_err(|e| format!("{}: {e}", matrix.display()))?;
            let m = CommMatrix::from_csv(&text).map_err(|e| format!("{}: {e}", matrix.display()))?;
            let bisector = match bisector {
                BisectorArg::Native => Bisector::Native,
                BisectorArg::Metis => Bisector::Metis,
            };
            let g = partition::group(&m, CostModel { alpha, beta }, bisector).map_err(|e| e.to_string())?;
            let mut out = String::with_capacity(g.group_of.len() * 8);
            for (rank, group) in g.group_of.iter().enumerate() {
                out.push_str(&format!("{rank} {group}\n"));
            }
            std::io::stdout().lock().write_all(out.as_bytes()).map_err(|e| format!("stdout: {e}"))?;
            eprintln!(
                "nemesis-ft: {} ranks in {} groups; restart share {:.2} %, logged share {:.2} %, cost {:.4}",
                m.ranks(),
                g.groups,
                100.0 * g.evaluation.restart_share,
                100.0 * g.evaluation.logged_share,
                g.evaluation.cost
            );
            Ok(())
        }
    }
}

fn main() -> ExitCode {
    match run(Cli::parse()) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("nemesis-ft: error: {e}");
            ExitCode::FAILURE
        }
    }
}
