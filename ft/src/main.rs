//! `nemesis-ft`: fault-tolerance tooling. `nemesis-ft groups --matrix comm.csv` reads a P × P CSV of bytes sent
//! (row u, column v = bytes rank u sent to rank v; no header) and prints one line `<rank> <group>` per rank on
//! standard output, nothing else; a summary and any error go to standard error.

use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;

use nemesis_ft::matrix::CommMatrix;
use nemesis_ft::partition::{self, Bisector, CostModel};

const USAGE: &str = "\
nemesis-ft: HydEE fault-tolerance tools for nemesis

usage: nemesis-ft groups --matrix FILE [--messages FILE] [--bisector native|metis] [--alpha A] [--beta B]

  groups      split the ranks into HydEE groups (recursive bisection of the thesis's chapter 4,
              HydEE cost function) and print `<rank> <group>` lines
  --matrix    P x P CSV of bytes sent: row u, column v = bytes rank u sent to rank v; no header
  --messages  the same for message counts (`nemesis-run --comm-matrix FILE` writes FILE.messages):
              the summary also gives the share of messages the groups log
  --bisector  graph partitioner of each bisection: native (pure Rust, default) or metis (needs a
              build with the `metis` feature)
  --alpha     weight of the logged share in the cost (thesis: 0.23)
  --beta      weight of the restarted share in the cost (thesis: 0.124)";

/// The command line, parsed by hand: the library crate stays free of a command-line parser
/// (it is linked into every nemesis program).
enum Command {
    Groups { matrix: PathBuf, messages: Option<PathBuf>, bisector: Bisector, alpha: f64, beta: f64 },
    Help,
    Version,
}

fn parse(args: &[String]) -> Result<Command, String> {
    let mut it = args.iter();
    match it.next().map(String::as_str) {
        Some("groups") => {}
        Some("-h" | "--help" | "help") => return Ok(Command::Help),
        Some("-V" | "--version") => return Ok(Command::Version),
        Some(other) => return Err(format!("unknown command `{other}`\n\n{USAGE}")),
        None => return Err(format!("a command is required\n\n{USAGE}")),
    }
    let (mut matrix, mut messages, mut bisector, mut alpha, mut beta) =
        (None, None, Bisector::Native, partition::ALPHA, partition::BETA);
    while let Some(arg) = it.next() {
        if arg == "-h" || arg == "--help" {
            return Ok(Command::Help);
        }
        let (name, inline) = match arg.split_once('=') {
            Some((n, v)) if n.starts_with("--") => (n, Some(v.to_string())),
            _ => (arg.as_str(), None),
        };
        let mut value = || inline.clone().or_else(|| it.next().cloned()).ok_or(format!("{name} needs a value"));
        let number = |v: String| v.parse::<f64>().map_err(|_| format!("{name}: `{v}` is not a number"));
        match name {
            "--matrix" => matrix = Some(PathBuf::from(value()?)),
            "--messages" => messages = Some(PathBuf::from(value()?)),
            "--bisector" => {
                bisector = match value()?.as_str() {
                    "native" => Bisector::Native,
                    "metis" => Bisector::Metis,
                    v => return Err(format!("--bisector: `{v}` is neither `native` nor `metis`")),
                }
            }
            "--alpha" => alpha = number(value()?)?,
            "--beta" => beta = number(value()?)?,
            _ => return Err(format!("unexpected argument `{arg}`\n\n{USAGE}")),
        }
    }
    let matrix = matrix.ok_or(format!("--matrix FILE is required\n\n{USAGE}"))?;
    Ok(Command::Groups { matrix, messages, bisector, alpha, beta })
}

fn run(command: Command) -> Result<(), String> {
    match command {
        Command::Help => {
            println!("{USAGE}");
            Ok(())
        }
        Command::Version => {
            println!("nemesis-ft {}", env!("CARGO_PKG_VERSION"));
            Ok(())
        }
        Command::Groups { matrix, messages, bisector, alpha, beta } => {
            if !(alpha.is_finite() && beta.is_finite() && alpha >= 0.0 && beta >= 0.0) {
                return Err("--alpha and --beta must be non-negative numbers".into());
            }
            let read = |path: &PathBuf| {
                let text = std::fs::read_to_string(path).map_err(|e| format!("{}: {e}", path.display()))?;
                CommMatrix::from_csv(&text).map_err(|e| format!("{}: {e}", path.display()))
            };
            let m = read(&matrix)?;
            let counts = messages.as_ref().map(read).transpose()?;
            if let Some(c) = &counts
                && c.ranks() != m.ranks()
            {
                return Err(format!("--messages: {} ranks, --matrix {}", c.ranks(), m.ranks()));
            }
            let g = partition::group(&m, CostModel { alpha, beta }, bisector).map_err(|e| e.to_string())?;
            let mut out = String::with_capacity(g.group_of.len() * 8);
            for (rank, group) in g.group_of.iter().enumerate() {
                out.push_str(&format!("{rank} {group}\n"));
            }
            std::io::stdout().lock().write_all(out.as_bytes()).map_err(|e| format!("stdout: {e}"))?;
            let of_messages = counts.map_or(String::new(), |c| {
                let e = partition::evaluate(&c, &g.group_of, CostModel { alpha, beta });
                format!(", logged messages {:.2} %", 100.0 * e.logged_share)
            });
            eprintln!(
                "nemesis-ft: {} ranks in {} groups; restart share {:.2} %, logged share {:.2} %, cost {:.4}{of_messages}",
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
    let args: Vec<String> = std::env::args().skip(1).collect();
    match parse(&args).and_then(run) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("nemesis-ft: error: {e}");
            ExitCode::FAILURE
        }
    }
}
