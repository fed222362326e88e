//! The MPI systems that run a program on any number of ranks (`coll`, and the collectives of
//! `compare`): nemesis's C ABI under `nemesis-run`, Open MPI under `mpiexec.openmpi`, MPICH under
//! `mpiexec.hydra`, each with the program built by its own compiler ([`discover_mpi`]), and how
//! each waits when its ranks outnumber the CPUs ([`Mpi::command`]).

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::Command;

use super::{CAbi, CProgram, Context, Family, Skipped, args, build, find_c_abi, tools, version};
use crate::error::{Error, Result};
use crate::proc;

/// The systems that run MPI programs on any number of ranks (`coll`), in table order.
pub const MPI_NAMES: [&str; 3] = ["nemesis-c-abi", "openmpi", "mpich"];

/// How an MPI implementation starts its ranks.
#[derive(Clone, Debug)]
enum Starter {
    /// The C ABI under `nemesis-run` (or this program's `__launch`).
    Nemesis(CAbi),
    /// `mpiexec.openmpi`.
    OpenMpi(PathBuf),
    /// MPICH's `mpiexec.hydra`, and MPICH's device (`mpichversion`'s `MPICH Device:`).
    Hydra(PathBuf, Option<String>),
}

/// An MPI implementation with a program built by its compiler, run on any number of ranks.
#[derive(Clone, Debug)]
pub struct Mpi {
    pub name: String,
    pub family: Family,
    /// What runs, for the systems table (the program, compiler and launcher).
    pub detail: String,
    program: PathBuf,
    starter: Starter,
}

/// How the ranks of an oversubscribed nemesis job wait (`--wait` of `nemesis-run`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum IdleWait {
    Yield,
    Block,
}

impl Mpi {
    /// The command running the program with `program_args` on `ranks` ranks, and how its ranks
    /// wait. With at most one rank per CPU they busy-poll (each implementation's default); with
    /// more (`oversubscribed`) they yield the CPU: nemesis by `idle` (`--wait yield` or `block`),
    /// Open MPI by `mpi_yield_when_idle`, MPICH's ch3 device by `MPIR_CVAR_POLLS_BEFORE_YIELD`.
    /// MPICH's ch4 device has no yielding wait (see [`MPICH_CH4_NO_YIELD`]): it is not run
    /// oversubscribed, and the error says why.
    pub fn command(
        &self,
        ctx: &Context,
        ranks: u32,
        oversubscribed: bool,
        idle: IdleWait,
        program_args: &[String],
    ) -> std::result::Result<(Command, String), String> {
        let n = ranks.to_string();
        let (launcher, env, wait): (Vec<OsString>, Vec<(&str, &str)>, String) = match &self.starter {
            Starter::Nemesis(abi) => {
                let wait = match (oversubscribed, idle) {
                    (false, _) => "poll",
                    (true, IdleWait::Yield) => "yield",
                    (true, IdleWait::Block) => "block",
                };
                let (launcher, how) = abi.launcher(ctx, ranks, wait);
                (launcher, Vec::new(), format!("{wait} ({how} --bind core --wait {wait})"))
            }
            Starter::OpenMpi(run) => {
                let mut a = args(run, &["--allow-run-as-root", "-n", &n]);
                if oversubscribed {
                    for x in
                        ["--oversubscribe", "--bind-to", "core:overload-allowed", "--mca", "mpi_yield_when_idle", "1"]
                    {
                        a.push(x.into());
                    }
                    let how = "yield (--oversubscribe --bind-to core:overload-allowed --mca mpi_yield_when_idle 1)";
                    (a, Vec::new(), how.into())
                } else {
                    a.extend(["--bind-to".into(), "core".into()]);
                    (a, Vec::new(), "poll (--bind-to core)".into())
                }
            }
            Starter::Hydra(run, device) => {
                let a = args(run, &["-n", &n, "--bind-to", "core"]);
                match device.as_deref() {
                    _ if !oversubscribed => (a, Vec::new(), "poll (--bind-to core)".into()),
                    Some(d) if d.starts_with("ch3") => (
                        a,
                        vec![("MPIR_CVAR_POLLS_BEFORE_YIELD", "1")],
                        "yield (MPIR_CVAR_POLLS_BEFORE_YIELD=1 --bind-to core)".into(),
                    ),
                    d => {
                        return Err(format!(
                            "device {}: {MPICH_CH4_NO_YIELD}",
                            d.unwrap_or("unknown (no mpichversion)")
                        ));
                    }
                }
            }
        };
        let mut c = Command::new(&launcher[0]);
        c.args(&launcher[1..]).arg(&self.program).args(program_args);
        c.envs(env);
        Ok((c, wait))
    }
}

impl Mpi {
    /// The command running the program with `program_args` on 2 ranks that talk over TCP, busy-
    /// polling, and how: nemesis's ranks on two node identities (`--nodes 2`: the TCP netmod over
    /// loopback), Open MPI's with `--mca btl tcp,self --mca osc pt2pt` (one-sided as messages
    /// over btl/tcp: in 4.1.4, osc/rdma refuses btl/tcp with MPI_ERR_WIN at window creation, and
    /// osc/sm would take the node's shared memory whatever the btl). MPICH is not compared over
    /// TCP (the error says so).
    pub fn tcp_command(
        &self,
        ctx: &Context,
        program_args: &[String],
    ) -> std::result::Result<(Command, String), String> {
        let (launcher, how) = match &self.starter {
            Starter::Nemesis(abi) => {
                let (launcher, how) = abi.launcher_on(ctx, 2, 2, "poll");
                (launcher, format!("{how} --nodes 2 --bind core --wait poll (TCP netmod over loopback)"))
            }
            Starter::OpenMpi(run) => {
                let rest = ["--allow-run-as-root", "-n", "2", "--bind-to", "core"];
                let mut a = args(run, &rest);
                a.extend(["--mca", "btl", "tcp,self", "--mca", "osc", "pt2pt"].map(OsString::from));
                (a, "--bind-to core --mca btl tcp,self --mca osc pt2pt".to_owned())
            }
            Starter::Hydra(..) => return Err("not compared over TCP (the targets name nemesis and Open MPI)".into()),
        };
        let mut c = Command::new(&launcher[0]);
        c.args(&launcher[1..]).arg(&self.program).args(program_args);
        Ok((c, how))
    }
}

/// Why MPICH's ch4 device is not run with more ranks than CPUs. Its progress wait
/// (`MPID_Progress_wait`, `src/mpid/ch4/src/ch4_progress.h`) loops on the progress test without
/// yielding a single-threaded process; `MPIR_CVAR_POLLS_BEFORE_YIELD` belongs to ch3's nemesis
/// channel (`mpid_nem_inline.h`), and the progress throttle MPICH's own CI sets for
/// oversubscribed tests (`MPIR_CVAR_CH4_PROGRESS_THROTTLE`) came after 4.0. Measured with
/// Debian's MPICH 4.0.2 (ch4:ucx; libmpich imports no `sched_yield`): with
/// `MPIR_CVAR_POLLS_BEFORE_YIELD=1`, `strace -f -c` counted no `sched_yield` and a barrier of 4
/// ranks on 2 CPUs took 14 ms a call (nemesis yielding: about 1 ms; Open MPI: 13 µs).
pub const MPICH_CH4_NO_YIELD: &str = "ch4 busy-polls and never yields, so it is not run with more ranks than CPUs \
(MPIR_CVAR_POLLS_BEFORE_YIELD is ch3's; a 4-rank barrier on 2 CPUs measured 14 ms a call)";

/// MPICH's device as `mpichversion` (next to `mpiexec.hydra`, or in `PATH`) names it: `ch4:ucx`.
fn mpich_device(run: &Path) -> Option<String> {
    let tool =
        run.parent().map(|d| d.join("mpichversion")).filter(|p| p.exists()).or_else(|| proc::which("mpichversion"))?;
    let o = Command::new(tool).stdin(std::process::Stdio::null()).output().ok()?;
    let text = String::from_utf8_lossy(&o.stdout).into_owned();
    text.lines().find_map(|l| Some(l.trim().strip_prefix("MPICH Device:")?.trim().to_owned()))
}

/// Finds the MPI implementations named in `names` (each once; all of [`MPI_NAMES`] if empty) and
/// builds `program` with each: those that can run, and those skipped with their reason. A name
/// that is not an MPI system is a usage error.
pub fn discover_mpi(ctx: &Context, names: &[String], program: CProgram) -> Result<(Vec<Mpi>, Vec<Skipped>)> {
    let mut wanted: Vec<&str> = Vec::new();
    let all: Vec<String> = MPI_NAMES.iter().map(|s| s.to_string()).collect();
    for n in if names.is_empty() { &all } else { names } {
        let n = MPI_NAMES.iter().find(|k| **k == n.as_str()).ok_or_else(|| {
            Error::Usage(format!(
                "`{n}` runs no MPI program on several ranks: the MPI systems are {}",
                MPI_NAMES.join(", ")
            ))
        })?;
        if !wanted.contains(n) {
            wanted.push(n);
        }
    }
    let c = format!("{}.c", program.stem);
    let mut found = Vec::new();
    let mut skipped = Vec::new();
    for name in wanted {
        let got = match name {
            "nemesis-c-abi" => find_c_abi(ctx).and_then(|abi| {
                let built = abi.build(ctx, program)?;
                let detail = format!("{c}, mpi/bin/mpicc, libmpi.so in {}", abi.libdir.display());
                Ok((built, Family::Nemesis, detail, Starter::Nemesis(abi)))
            }),
            "openmpi" => tools(&["mpicc.openmpi", "mpiexec.openmpi"], "apt-get install openmpi-bin libopenmpi-dev")
                .and_then(|(mpicc, run)| {
                    let built = build(ctx, program, "openmpi", &mpicc, &[])?;
                    let detail = format!("{c}, mpicc.openmpi, mpiexec.openmpi{}", version(&run));
                    Ok((built, Family::Peer, detail, Starter::OpenMpi(run)))
                }),
            _ => tools(&["mpicc.mpich", "mpiexec.hydra"], "apt-get install mpich libmpich-dev").and_then(
                |(mpicc, run)| {
                    let built = build(ctx, program, "mpich", &mpicc, &[])?;
                    let device = mpich_device(&run);
                    let dev = device.as_deref().map(|d| format!(", device {d}")).unwrap_or_default();
                    let detail = format!("{c}, mpicc.mpich, mpiexec.hydra{}{dev}", version(&run));
                    Ok((built, Family::Peer, detail, Starter::Hydra(run, device)))
                },
            ),
        };
        match got {
            Ok((program, family, detail, starter)) => {
                found.push(Mpi { name: name.to_owned(), family, detail, program, starter })
            }
            Err(reason) => skipped.push(Skipped { name: name.to_owned(), reason }),
        }
    }
    Ok((found, skipped))
}
