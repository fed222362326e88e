//! `nemesis-run -n N [--bind core|none] [--wait poll|yield|block] [--tag-output] [--keep-going]
//! [--nodes K] [--mpich-abi] [--] program [args...]`: starts N ranks of a nemesis program on this
//! machine, serves their PMI-1 conversation and supervises them (the library behind it is
//! `nemesis::launch`).
//!
//! `--mpich-abi` runs a program built against MPICH (Debian's `mpicc.mpich`, which links
//! `libmpich.so.12`) on nemesis's C ABI: it puts the directory holding nemesis's `libmpich.so.12`
//! (`NEMESIS_MPI_LIBDIR`, or this launcher's own directory, where cargo builds both) first in the
//! ranks' `LD_LIBRARY_PATH`.
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
use nemesis::launch::{Bind, Job, Wait};

#[derive(Debug, Parser)]
#[command(name = "nemesis-run", version, about = "Start the ranks of a nemesis job on this machine")]
struct Cli {
    /// Number of ranks.
    #[arg(short = 'n', long = "np", value_name = "N", value_parser = clap::value_parser!(u32).range(1..))]
    ranks: u32,
    /// Pin rank i to the (i mod n)-th allowed CPU (core), or leave placement to the kernel (none).
    #[arg(long, value_enum, default_value_t = BindArg::None)]
    bind: BindArg,
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
    /// Run a program built against MPICH's libmpich.so.12 on nemesis's C ABI (puts nemesis's
    /// libmpich.so.12 first in LD_LIBRARY_PATH).
    #[arg(long)]
    mpich_abi: bool,
    /// The program to run, and its arguments.
    #[arg(required = true, trailing_var_arg = true, value_name = "PROGRAM [ARGS]")]
    command: Vec<OsString>,
}

#[derive(Debug, Clone, Copy, ValueEnum)]
enum BindArg {
    None,
    Core,
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
        .bind(match cli.bind {
            BindArg::None => Bind::None,
            BindArg::Core => Bind::Core,
        })
        .tag_output(cli.tag_output)
        .keep_going(cli.keep_going)
        .nodes(cli.nodes)
        .handle_signals(true);
    if cli.mpich_abi {
        match mpich_library_path() {
            Ok(path) => job = job.env("LD_LIBRARY_PATH", path),
            Err(e) => {
                eprintln!("nemesis-run: --mpich-abi: {e}");
                return ExitCode::from(1);
            }
        }
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

/// `LD_LIBRARY_PATH` for `--mpich-abi`: the directory of nemesis's `libmpich.so.12` first:
/// `NEMESIS_MPI_LIBDIR`, else this launcher's directory (cargo's `target/<profile>`), else `../lib`
/// beside it (an installed copy, `mpi/bin/mpi-install`).
fn mpich_library_path() -> Result<OsString, String> {
    let candidates: Vec<std::path::PathBuf> = match std::env::var_os("NEMESIS_MPI_LIBDIR") {
        Some(d) => vec![d.into()],
        None => {
            let exe = std::env::current_exe().map_err(|e| format!("cannot find this launcher's directory: {e}"))?;
            let dir = exe.parent().ok_or("cannot find this launcher's directory")?;
            vec![dir.to_path_buf(), dir.join("../lib")]
        }
    };
    let Some(dir) = candidates.iter().find(|d| d.join("libmpich.so.12").exists()) else {
        return Err(format!(
            "libmpich.so.12 not found in {}: build nemesis's C ABI (cargo build --release -p nemesis-mpi) or set \
             NEMESIS_MPI_LIBDIR to the directory holding it",
            candidates.iter().map(|d| d.display().to_string()).collect::<Vec<_>>().join(" or ")
        ));
    };
    let mut path = dir.clone().into_os_string();
    if let Some(old) = std::env::var_os("LD_LIBRARY_PATH").filter(|o| !o.is_empty()) {
        path.push(":");
        path.push(old);
    }
    Ok(path)
}
