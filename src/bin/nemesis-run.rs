//! `nemesis-run -n N [--nodes K] [--netmod tcp|ofi] [--bind core|hwthread|l2|l3|numa|package|none]
//! [--map-by core|l3|numa|package[:spread|compact]] [--report-bindings] [--dry-run] [--wait
//! poll|yield|block] [--tag-output] [--keep-going] [--mpich-abi] [--ft FILE | --ft-groups K
//! [--ft-matrix FILE] | --ft-matrix FILE] [--comm-matrix FILE] [--universe-size N] [--] program [args...]`: starts N
//! ranks of a nemesis program on this machine, serves their PMI-1 or PMI-2 conversation and
//! supervises them (the library behind it is `nemesis::launch`; the policies are
//! `nemesis::topology::plan`'s).
//!
//! `--universe-size N` leaves room for `MPI_Comm_spawn`: the job may grow to `N` ranks
//! (`MPI_UNIVERSE_SIZE`), each spawn on a node identity of its own.
//!
//! The ranks find nemesis's C ABI with no variable set by the user: the directory holding its
//! `libmpi.so.12` (`NEMESIS_MPI_LIBDIR`, else this launcher's own directory, where cargo builds
//! both, else `../lib` beside it, an installed copy) goes first in the ranks' `LD_LIBRARY_PATH`.
//! So programs and Python wheels built against MPICH (`libmpich.so.12` from Debian's
//! `mpicc.mpich`; `libmpi.so.12` from upstream MPICH, Intel MPI, Spack, mpi4py's PyPI wheel) load
//! nemesis's library unchanged; a run path cannot do this for binaries built elsewhere.
//! `--mpich-abi` makes a missing library an error; `NEMESIS_MPI_LIBDIR=` (empty) leaves
//! `LD_LIBRARY_PATH` alone.
//!
//! Exit status: 0 if every rank exited 0; else the first failing rank's code, or 128 + the signal
//! that killed it; the code a rank passed to PMI `abort`; 130 or 143 after SIGINT or SIGTERM;
//! 127 if the program is not found, 126 if it cannot be executed; 2 for a bad command line; 1 for
//! any other launcher error. Set `NEMESIS_LOG` (e.g. `NEMESIS_LOG=debug`) for the launcher's own
//! events; by default only warnings are shown.

use std::ffi::OsString;
use std::io::ErrorKind;
use std::path::PathBuf;
use std::process::ExitCode;

use nemesis::Error;
use nemesis::launch::{Bind, DEFAULT_MAX_RESTARTS, FtGroups, Job, MapBy, RecoveryMode, Wait};
use nemesis::net::NetKind;

const USAGE: &str = "Usage: nemesis-run -n N [--nodes K] [--netmod tcp|ofi] [--bind core|hwthread|l2|l3|numa|package|none] \
                     [--map-by core|l3|numa|package[:spread|compact]] [--report-bindings] [--dry-run] \
                     [--wait poll|yield|block] [--tag-output] [--keep-going] [--mpich-abi] \
                     [--ft FILE | --ft-groups K [--ft-matrix FILE] | --ft-matrix FILE] \
                     [--ft-recovery centralised|distributed] [--ft-max-restarts N] [--comm-matrix FILE] \
                     [--universe-size N] [--] PROGRAM [ARGS]...";

const ABOUT: &str = "Start the ranks of a nemesis job on this machine";

const OPTIONS: &str = "Options:
  -n, --np <N>          Number of ranks
      --nodes <K>       Split the ranks into K nodes (blocks of consecutive ranks, each with its own
                        segment): traffic between them goes through the netmod, as between machines
                        [default: 1]
      --netmod <NETMOD> The netmod between nodes: tcp, or ofi (libfabric, the rdma feature; the provider
                        is NEMESIS_OFI_PROVIDER's). Sets NEMESIS_NETMOD in every rank
      --bind <BIND>     Bind each rank to the object of this level holding its PU: core, hwthread, l2,
                        l3, numa, package; or leave placement to the kernel (none) [default: none].
                        Without the hwloc feature, core pins rank i to the (i mod n)-th allowed CPU
                        and the other levels are errors
      --map-by <MAP>    Distribute ranks over cores (compact by default), l3, numa or package (spread,
                        round robin, by default), `:spread` or `:compact`; physical cores before SMT
                        siblings. Needs the hwloc feature unless it is core [default: core]
      --report-bindings Print one line per rank (its CPU set and the topology objects it covers)
      --dry-run         Print the topology and every rank's placement; start nothing
                        (HWLOC_SYNTHETIC or HWLOC_XMLFILE plan for another machine)
      --wait <WAIT>     How ranks wait for messages: poll, yield or block (sets NEMESIS_WAIT in every rank)
      --tag-output      Prefix every line of the ranks' output with \"[rank] \"
      --keep-going      Let the other ranks run on when one fails (by default the job is ended)
      --mpich-abi       Fail unless the ranks get nemesis's libmpi.so.12 and libmpich.so.12 first in
                        LD_LIBRARY_PATH (done by default when found), for programs built against MPICH
      --ft <FILE>       Fault tolerance (HydEE) with the groups of FILE: one line `<rank> <group>` per
                        rank, as `nemesis-ft groups` prints them
      --ft-groups <K>   Fault tolerance in K groups: by bisection of the communication matrix of
                        --ft-matrix, or K blocks of consecutive ranks without one
      --ft-matrix <FILE>
                        Fault tolerance in groups computed from this communication matrix (P x P CSV
                        of bytes sent, as --comm-matrix writes it) by HydEE's bisection; into
                        --ft-groups K groups if given, else as many as the cost function chooses
      --ft-recovery <MODE>
                        How failed groups are recovered: one recovery coordinator (centralised) or
                        one per group (distributed) [default: centralised]. With --ft (over --nodes K
                        too, with the TCP netmod), a rank that dies is restarted with its group from
                        the group's last checkpoint while the other groups go on
      --ft-max-restarts <N>
                        End the job when a group fails more than N times [default: 10]
      --comm-matrix <FILE>
                        Write the job's communication matrix (messages and bytes each rank sent to
                        each rank) to FILE at the end, in the CSV that `nemesis-ft groups --matrix` reads
                        (bytes; the message counts in FILE.messages)
      --universe-size <N>
                        Ranks the job may grow to with MPI_Comm_spawn (MPI_UNIVERSE_SIZE): spawned
                        processes take the slots beyond -n, on node identities of their own
                        [default: -n, or SLURM_NTASKS under Slurm]
  -h, --help            Print help
  -V, --version         Print version

Set NEMESIS_LOG (e.g. NEMESIS_LOG=debug) for the launcher's own events.";

/// What the command line asks for.
#[derive(Debug, PartialEq)]
struct Cli {
    ranks: u32,
    bind: Bind,
    map: Option<MapBy>,
    report_bindings: bool,
    dry_run: bool,
    wait: Option<Wait>,
    tag_output: bool,
    keep_going: bool,
    nodes: u32,
    netmod: Option<NetKind>,
    mpich_abi: bool,
    /// Fault tolerance and where its groups come from (`--ft`, `--ft-groups`, `--ft-matrix`).
    ft: Option<FtGroups>,
    /// `--ft-recovery`, `--ft-max-restarts`.
    ft_recovery: RecoveryMode,
    ft_max_restarts: u32,
    /// `--comm-matrix FILE`.
    comm_matrix: Option<PathBuf>,
    /// `--universe-size N`.
    universe: Option<u32>,
    /// The program and its arguments (never empty).
    command: Vec<OsString>,
}

/// What parsing ends in besides a job to run.
#[derive(Debug, PartialEq)]
enum Parsed {
    Run(Cli),
    Help,
    Version,
}

/// Parses the arguments after the program name. Options come first; the first argument that is
/// not one (or everything after `--`) is the program and its arguments.
fn parse(args: impl IntoIterator<Item = OsString>) -> Result<Parsed, String> {
    let mut args = args.into_iter();
    let (mut ranks, mut bind, mut wait, mut nodes, mut netmod) = (None, Bind::None, None, 1, None);
    let (mut tag_output, mut keep_going, mut mpich_abi) = (false, false, false);
    let (mut map, mut report_bindings, mut dry_run) = (None, false, false);
    let (mut ft_file, mut ft_groups, mut ft_matrix, mut comm_matrix) = (None, None, None, None);
    let (mut ft_recovery, mut ft_max_restarts) = (RecoveryMode::Centralised, DEFAULT_MAX_RESTARTS);
    let mut universe = None;
    let mut command = Vec::new();
    while let Some(arg) = args.next() {
        let Some(a) = arg.to_str() else {
            command.push(arg);
            break;
        };
        if a == "--" {
            break;
        }
        if !a.starts_with('-') || a == "-" {
            command.push(arg);
            break;
        }
        // `--opt=value`, `-nVALUE`, or the value in the next argument.
        let (name, inline) = match a.split_once('=') {
            Some((n, v)) if a.starts_with("--") => (n, Some(v.to_owned())),
            _ if a.starts_with("-n") && a.len() > 2 && !a.starts_with("--") => {
                ("-n", Some(a[2..].trim_start_matches('=').to_owned()))
            }
            _ => (a, None),
        };
        let mut value = |what: &str| -> Result<String, String> {
            match inline.clone() {
                Some(v) => Ok(v),
                None => args
                    .next()
                    .map(|v| v.to_string_lossy().into_owned())
                    .ok_or_else(|| format!("a value is required for '{what}' but none was supplied")),
            }
        };
        match name {
            "-h" | "--help" => return Ok(Parsed::Help),
            "-V" | "--version" => return Ok(Parsed::Version),
            "-n" | "--np" => ranks = Some(count(&value("--np <N>")?, "--np <N>")?),
            "--nodes" => nodes = count(&value("--nodes <K>")?, "--nodes <K>")?,
            "--netmod" => {
                let v = value("--netmod <NETMOD>")?;
                let n = NetKind::parse(&v);
                netmod =
                    Some(n.map_err(|_| format!("invalid value '{v}' for '--netmod <NETMOD>': expected tcp or ofi"))?);
            }
            "--bind" => {
                let v = value("--bind <BIND>")?;
                bind = Bind::parse(&v).map_err(|e| format!("invalid value '{v}' for '--bind <BIND>': {e}"))?;
            }
            "--map-by" => {
                let v = value("--map-by <MAP>")?;
                map = Some(MapBy::parse(&v).map_err(|e| format!("invalid value '{v}' for '--map-by <MAP>': {e}"))?);
            }
            "--wait" => {
                let v = value("--wait <WAIT>")?;
                let w = Wait::parse(&v);
                wait =
                    Some(w.map_err(|_| {
                        format!("invalid value '{v}' for '--wait <WAIT>': expected poll, yield or block")
                    })?);
            }
            "--ft" => ft_file = Some(PathBuf::from(value("--ft <FILE>")?)),
            "--ft-groups" => ft_groups = Some(count(&value("--ft-groups <K>")?, "--ft-groups <K>")?),
            "--ft-matrix" => ft_matrix = Some(PathBuf::from(value("--ft-matrix <FILE>")?)),
            "--ft-recovery" => {
                let v = value("--ft-recovery <MODE>")?;
                ft_recovery = match v.as_str() {
                    "centralised" | "centralized" => RecoveryMode::Centralised,
                    "distributed" => RecoveryMode::Distributed,
                    _ => {
                        return Err(format!(
                            "invalid value '{v}' for '--ft-recovery <MODE>': expected centralised or distributed"
                        ));
                    }
                };
            }
            "--ft-max-restarts" => {
                let v = value("--ft-max-restarts <N>")?;
                ft_max_restarts = v
                    .parse()
                    .map_err(|_| format!("invalid value '{v}' for '--ft-max-restarts <N>': expected a whole number"))?;
            }
            "--comm-matrix" => comm_matrix = Some(PathBuf::from(value("--comm-matrix <FILE>")?)),
            "--universe-size" => universe = Some(count(&value("--universe-size <N>")?, "--universe-size <N>")?),
            "--tag-output" | "--keep-going" | "--report-bindings" | "--dry-run" | "--mpich-abi" if inline.is_some() => {
                return Err(format!("'{name}' takes no value"));
            }
            "--tag-output" => tag_output = true,
            "--keep-going" => keep_going = true,
            "--report-bindings" => report_bindings = true,
            "--dry-run" => dry_run = true,
            "--mpich-abi" => mpich_abi = true,
            _ => return Err(format!("unexpected argument '{a}'")),
        }
    }
    command.extend(args);
    let ranks = ranks.ok_or("the number of ranks is required: -n N")?;
    if command.is_empty() {
        return Err("the program to run is required: [--] PROGRAM [ARGS]...".into());
    }
    let ft = match (ft_file, ft_groups, ft_matrix) {
        (Some(_), Some(_), _) | (Some(_), _, Some(_)) => {
            return Err("'--ft <FILE>' cannot be used with '--ft-groups' or '--ft-matrix'".into());
        }
        (Some(file), None, None) => Some(FtGroups::File(file)),
        (None, groups, Some(file)) => Some(FtGroups::Matrix { file, groups }),
        (None, Some(k), None) => Some(FtGroups::Blocks(k)),
        (None, None, None) => None,
    };
    Ok(Parsed::Run(Cli {
        ranks,
        bind,
        map,
        report_bindings,
        dry_run,
        wait,
        tag_output,
        keep_going,
        nodes,
        netmod,
        mpich_abi,
        ft,
        ft_recovery,
        ft_max_restarts,
        comm_matrix,
        universe,
        command,
    }))
}

/// A count of at least 1.
fn count(v: &str, what: &str) -> Result<u32, String> {
    match v.parse::<u32>() {
        Ok(n) if n >= 1 => Ok(n),
        _ => Err(format!("invalid value '{v}' for '{what}': expected a whole number of at least 1")),
    }
}

fn main() -> ExitCode {
    nemesis::log::init();
    let cli = match parse(std::env::args_os().skip(1)) {
        Ok(Parsed::Run(cli)) => cli,
        Ok(Parsed::Help) => {
            println!("{ABOUT}\n\n{USAGE}\n\n{OPTIONS}");
            return ExitCode::SUCCESS;
        }
        Ok(Parsed::Version) => {
            println!("nemesis-run {}", env!("CARGO_PKG_VERSION"));
            return ExitCode::SUCCESS;
        }
        Err(e) => {
            nemesis::say!("nemesis-run: error: {e}\n\n{USAGE}\n\nFor more information, try '--help'.");
            return ExitCode::from(2);
        }
    };
    let (program, args) = cli.command.split_first().expect("parse requires the program");
    let mut job = Job::new(program, args)
        .ranks(cli.ranks)
        .bind(cli.bind)
        .report_bindings(cli.report_bindings)
        .tag_output(cli.tag_output)
        .keep_going(cli.keep_going)
        .nodes(cli.nodes)
        .handle_signals(true);
    if let Some(m) = cli.map {
        job = job.map_by(m);
    }
    if let Some(g) = cli.ft {
        job = job.ft(g).ft_recovery(cli.ft_recovery).ft_max_restarts(cli.ft_max_restarts);
    }
    if let Some(n) = cli.universe {
        job = job.universe_size(n);
    }
    if let Some(file) = cli.comm_matrix {
        job = job.comm_matrix(file);
    }
    match mpi_library_path() {
        Ok(path) => job = job.env("LD_LIBRARY_PATH", path),
        Err(e) if cli.mpich_abi => {
            nemesis::say!("nemesis-run: --mpich-abi: {e}");
            return ExitCode::from(1);
        }
        Err(_) => {}
    }
    if let Some(w) = cli.wait {
        job = job.wait(w);
    }
    if let Some(n) = cli.netmod {
        job = job.env(nemesis::contract::ENV_NETMOD, n.name());
    }
    if cli.dry_run {
        return match job.dry_run() {
            Ok(lines) => {
                lines.iter().for_each(|l| println!("{l}"));
                ExitCode::SUCCESS
            }
            Err(e) => {
                nemesis::say!("nemesis-run: {e}");
                ExitCode::from(1)
            }
        };
    }
    match job.run() {
        Ok(outcome) => ExitCode::from(outcome.exit_code().clamp(0, 255) as u8),
        Err(e) => {
            nemesis::say!("nemesis-run: {e}");
            ExitCode::from(match &e {
                Error::Spawn { source, .. } if source.kind() == ErrorKind::NotFound => 127,
                Error::Spawn { .. } => 126,
                _ => 1,
            })
        }
    }
}

/// The ranks' `LD_LIBRARY_PATH`: the directory of nemesis's `libmpi.so.12` first, so that
/// binaries built against MPICH (which carry no run path to nemesis) load it. The directory is
/// `NEMESIS_MPI_LIBDIR` (empty: none), else this launcher's directory (cargo's
/// `target/<profile>`), else `../lib` beside it (an installed copy, `mpi/bin/mpi-install`).
fn mpi_library_path() -> Result<OsString, String> {
    let candidates: Vec<std::path::PathBuf> = match std::env::var_os(nemesis::contract::ENV_MPI_LIBDIR) {
        Some(d) if d.is_empty() => return Err(format!("{} is empty", nemesis::contract::ENV_MPI_LIBDIR)),
        Some(d) => vec![d.into()],
        None => {
            let exe = std::env::current_exe().map_err(|e| format!("cannot find this launcher's directory: {e}"))?;
            let dir = exe.parent().ok_or("cannot find this launcher's directory")?;
            vec![dir.to_path_buf(), dir.join("../lib")]
        }
    };
    let Some(dir) = candidates.iter().find(|d| d.join("libmpi.so.12").exists()) else {
        return Err(format!(
            "libmpi.so.12 not found in {}: build nemesis's C ABI (cargo build --release -p nemesis-mpi) or set \
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

#[cfg(test)]
mod tests {
    use super::*;

    fn args(a: &[&str]) -> Result<Parsed, String> {
        parse(a.iter().map(OsString::from))
    }

    fn run(a: &[&str]) -> Cli {
        match args(a) {
            Ok(Parsed::Run(c)) => c,
            other => panic!("{a:?}: {other:?}"),
        }
    }

    #[test]
    fn options_then_the_program() {
        let c = run(&["-n", "4", "--bind", "core", "--wait=block", "--tag-output", "--", "prog", "-n", "x"]);
        assert_eq!(
            c,
            Cli {
                ranks: 4,
                bind: Bind::Core,
                map: None,
                report_bindings: false,
                dry_run: false,
                wait: Some(Wait::Block),
                tag_output: true,
                keep_going: false,
                nodes: 1,
                netmod: None,
                mpich_abi: false,
                ft: None,
                ft_recovery: RecoveryMode::Centralised,
                ft_max_restarts: DEFAULT_MAX_RESTARTS,
                comm_matrix: None,
                universe: None,
                command: ["prog", "-n", "x"].map(OsString::from).to_vec(),
            }
        );
        // The first argument that is not an option starts the command, `--` or not.
        assert!(run(&["-n", "2", "--mpich-abi", "prog"]).mpich_abi);
        let c = run(&["-n3", "--nodes", "2", "--keep-going", "hostname", "--tag-output"]);
        assert_eq!((c.ranks, c.nodes, c.keep_going, c.tag_output), (3, 2, true, false));
        assert_eq!(c.command, ["hostname", "--tag-output"].map(OsString::from));
        assert_eq!(run(&["--np=2", "true"]).ranks, 2);
        assert_eq!(run(&["-n", "2", "--netmod", "ofi", "p"]).netmod, Some(NetKind::Ofi));
        assert_eq!(run(&["-n", "2", "--netmod=tcp", "p"]).netmod, Some(NetKind::Tcp));
        assert_eq!(run(&["-n=5", "true"]).ranks, 5);
        let c = run(&["-n", "2", "--bind=numa", "--map-by", "package:compact", "--report-bindings", "--dry-run", "p"]);
        assert_eq!(
            (c.bind, c.map, c.report_bindings, c.dry_run),
            (Bind::Numa, Some(MapBy::parse("package:compact").unwrap()), true, true)
        );
        let c = run(&["-n", "4", "--ft", "g.txt", "--comm-matrix=m.csv", "p"]);
        assert_eq!((c.ft, c.comm_matrix), (Some(FtGroups::File("g.txt".into())), Some("m.csv".into())));
        assert_eq!(run(&["-n", "4", "--ft-groups", "2", "p"]).ft, Some(FtGroups::Blocks(2)));
        assert_eq!(
            run(&["-n", "4", "--ft-matrix", "m.csv", "--ft-groups=2", "p"]).ft,
            Some(FtGroups::Matrix { file: "m.csv".into(), groups: Some(2) })
        );
        assert_eq!(
            run(&["-n", "4", "--ft-matrix", "m.csv", "p"]).ft,
            Some(FtGroups::Matrix { file: "m.csv".into(), groups: None })
        );
        assert_eq!(run(&["-n", "2", "--universe-size", "6", "p"]).universe, Some(6));
        assert_eq!(args(&["--help"]), Ok(Parsed::Help));
        assert_eq!(args(&["-n", "2", "-V"]), Ok(Parsed::Version));
    }

    #[test]
    fn bad_command_lines_say_what_is_wrong() {
        for (a, says) in [
            (&["-n", "0", "--", "true"][..], "'0'"),
            (&["-n", "two", "true"], "'two'"),
            (&["-n", "2"], "PROGRAM"),
            (&["-n", "2", "--"], "PROGRAM"),
            (&["true"], "-n N"),
            (&["--frobnicate", "-n", "2", "--", "true"], "'--frobnicate'"),
            (&["-n"], "--np <N>"),
            (&["-n", "2", "--bind", "socket", "true"], "'socket'"),
            (&["-n", "2", "--wait", "spin", "true"], "'spin'"),
            (&["-n", "2", "--map-by", "socket", "true"], "'socket'"),
            (&["-n", "2", "--map-by", "numa:wide", "true"], "'numa:wide'"),
            (&["-n", "2", "--dry-run=1", "true"], "no value"),
            (&["-n", "2", "--nodes", "0", "true"], "--nodes"),
            (&["-n", "2", "--netmod", "verbs", "true"], "'verbs'"),
            (&["-n", "2", "--netmod"], "--netmod <NETMOD>"),
            (&["-n", "2", "--tag-output=yes", "true"], "no value"),
            (&["-n", "2", "--ft", "g", "--ft-groups", "2", "true"], "cannot be used with"),
            (&["-n", "2", "--ft", "g", "--ft-matrix", "m", "true"], "cannot be used with"),
            (&["-n", "2", "--ft-groups", "0", "true"], "--ft-groups"),
            (&["-n", "2", "--ft"], "--ft <FILE>"),
            (&["-n", "2", "--universe-size", "0", "p"], "--universe-size"),
        ] {
            let e = args(a).expect_err(&format!("{a:?} is not an error"));
            assert!(e.contains(says), "{a:?}: `{e}` should say {says}");
        }
    }
}
