//! The systems `compare` (and `latency`, `bw`, `bibw` with `--with`) measure, found at run time:
//!
//! | name | how it runs |
//! |---|---|
//! | `nemesis-shm` | this program's rank side through the Endpoint, under `nemesis::launch` (`--bind core`, `poll`) |
//! | `nemesis-c-abi` | `mpi_pingpong.c` built with the repository's `mpi/bin/mpicc`, under `nemesis-run --bind core --wait poll` |
//! | `nemesis-tcp` | as `nemesis-shm`, the two ranks on two node identities (`--nodes 2`): TCP over loopback |
//! | `nemesis-ofi` | as `nemesis-tcp`, through the libfabric netmod over the provider of `--ofi-provider` (cargo feature `rdma`) |
//! | `fi-pingpong` | libfabric's own `fi_pingpong -p PROV -e rdm` (busy-polling), both sides pinned: the provider's limit (latency only) |
//! | `openmpi-ofi` | `mpi_pingpong.c` under `mpiexec.openmpi --mca pml cm --mca mtl ofi --mca mtl_ofi_provider_include PROV` |
//! | `unix-socket` | two processes of this program over a Unix stream socket pair, blocking I/O |
//! | `pipe` | two processes of this program over two pipes, blocking I/O |
//! | `iceoryx2` | two processes of this program, iceoryx2 request-response (cargo feature `iceoryx2`) |
//! | `openmpi` | `mpi_pingpong.c` built with `mpicc.openmpi`, under `mpiexec.openmpi --bind-to core` |
//! | `mpich` | `mpi_pingpong.c` built with `mpicc.mpich`, under `mpiexec.hydra --bind-to core` |
//!
//! The MPI systems run `bibw` with `benches/c/mpi_bibw.c` (ours: OSU's osu_bibw with
//! `mpi_pingpong.c`'s window, sizes and iterations), built with the same compiler.
//!
//! A system that cannot run here is [`Skipped`] with the reason, never dropped. The C programs
//! are built at run time into `nemesis-bench-programs/` next to this executable. The three ofi
//! systems use the provider of [`Context::ofi_provider`] on the loopback interface
//! (`FI_TCP_IFACE=lo`, `FI_UDP_IFACE=lo`).

use std::ffi::OsString;
use std::os::fd::{AsRawFd, OwnedFd, RawFd};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicU64, Ordering};

use crate::error::{Error, Result};
use crate::plan::Plan;
use crate::proc::{self, Captured};
use crate::workload::{Workload, parse_figures};

mod mpi;

pub use mpi::{IdleWait, MPI_NAMES, Mpi, discover_mpi};

/// Every system's name, in the order tables list them.
pub const NAMES: [&str; 11] = [
    "nemesis-shm",
    "nemesis-c-abi",
    "nemesis-tcp",
    "nemesis-ofi",
    "unix-socket",
    "pipe",
    "iceoryx2",
    "openmpi",
    "mpich",
    "fi-pingpong",
    "openmpi-ofi",
];

/// The systems `compare` runs without `--systems`: all but the provider anchors `fi-pingpong`
/// (latency only) and `openmpi-ofi`, which are asked for by name with the provider
/// (`--systems nemesis-ofi,fi-pingpong,openmpi-ofi --ofi-provider PROV`).
pub const DEFAULT: [&str; 9] = [
    "nemesis-shm",
    "nemesis-c-abi",
    "nemesis-tcp",
    "nemesis-ofi",
    "unix-socket",
    "pipe",
    "iceoryx2",
    "openmpi",
    "mpich",
];

/// Environment of every ofi system: IP providers on the loopback interface.
const OFI_ENV: [(&str, &str); 2] = [("FI_TCP_IFACE", "lo"), ("FI_UDP_IFACE", "lo")];

/// A C benchmark program built with each MPI's compiler: those of `shared/bench/` are kept
/// identical to the shared ones (a unit test compares them when the shared folder is there).
#[derive(Clone, Copy, Debug)]
pub struct CProgram {
    /// The file name without `.c`, also the built program's name before its tag.
    pub stem: &'static str,
    pub text: &'static str,
}

/// `shared/bench/mpi_pingpong.c`, the program the MPI systems run for `lat` and `bw`.
pub const MPI_PINGPONG: CProgram = CProgram { stem: "mpi_pingpong", text: include_str!("../c/mpi_pingpong.c") };

/// Ours, `mpi_pingpong.c`'s companion for `bibw` (OSU's osu_bibw: the same window, sizes and
/// iterations as its `bw`), so the MPI systems are measured bidirectionally like the others.
pub const MPI_BIBW: CProgram = CProgram { stem: "mpi_bibw", text: include_str!("../c/mpi_bibw.c") };

/// `shared/bench/mpi_coll.c`, the program of `coll` (the collectives on any number of ranks).
pub const MPI_COLL: CProgram = CProgram { stem: "mpi_coll", text: include_str!("../c/mpi_coll.c") };

/// The one-sided benchmark (`rma`): `mpi/bench/osu_rma.c`, OSU's structure, standard MPI only.
pub const OSU_RMA: CProgram = CProgram { stem: "osu_rma", text: include_str!("../../mpi/bench/osu_rma.c") };

/// Ours, or one of the alternatives ("peers") users compare us with.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Family {
    Nemesis,
    Peer,
}

impl Family {
    pub fn name(self) -> &'static str {
        match self {
            Family::Nemesis => "nemesis",
            Family::Peer => "peer",
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Stream {
    Pipe,
    UnixSocket,
    #[cfg(feature = "iceoryx2")]
    Iceoryx2,
}

#[derive(Clone, Debug)]
enum How {
    /// This program's Endpoint rank side under `__launch`, with extra environment.
    Endpoint { env: Vec<(String, String)>, nodes: u32 },
    /// Two processes of this program's rank side.
    Pair(Stream),
    /// `mpi_pingpong` (and `mpi_bibw` for `bibw`) under its launcher (the launcher's arguments,
    /// ready for the program), with extra environment.
    Mpi { launcher: Vec<OsString>, programs: MpiPrograms, env: Vec<(String, String)> },
    /// libfabric's `fi_pingpong` with this provider (`fi_pingpong` itself).
    FiPingpong { program: PathBuf, prov: String },
}

/// The two programs an MPI system runs, built with its `mpicc`.
#[derive(Clone, Debug)]
struct MpiPrograms {
    pingpong: PathBuf,
    bibw: PathBuf,
}

impl MpiPrograms {
    /// Builds both with `build` (one MPI's compiler and environment).
    fn build(
        mut build: impl FnMut(CProgram) -> std::result::Result<PathBuf, String>,
    ) -> std::result::Result<MpiPrograms, String> {
        Ok(MpiPrograms { pingpong: build(MPI_PINGPONG)?, bibw: build(MPI_BIBW)? })
    }
}

/// A system that can run here.
#[derive(Clone, Debug)]
pub struct System {
    pub name: String,
    pub family: Family,
    /// How it runs, for the systems table.
    pub detail: String,
    how: How,
}

/// What one run of a system gave.
#[derive(Clone, Debug)]
pub struct Run {
    /// A figure per size asked for, NaN where none was reported.
    pub values: Vec<f64>,
    /// Why the run ended badly after reporting some figures.
    pub problem: Option<String>,
}

/// A system that cannot run here, and why.
#[derive(Clone, Debug)]
pub struct Skipped {
    pub name: String,
    pub reason: String,
}

/// Where things are: this program, where to build C programs, the repository, the two CPUs.
#[derive(Clone, Debug)]
pub struct Context {
    pub exe: PathBuf,
    pub programs: PathBuf,
    pub repo: PathBuf,
    pub cpus: (usize, usize),
    /// The libfabric provider of the ofi systems (`--ofi-provider`, else `NEMESIS_OFI_PROVIDER`,
    /// else `tcp;ofi_rxm`).
    pub ofi_provider: String,
}

impl Context {
    /// The context of this process. The repository is `NEMESIS_BENCH_REPO` if set, else the one
    /// this program was built from.
    pub fn new() -> Result<Context> {
        let exe = std::env::current_exe().map_err(|e| Error::io("find this program", e))?;
        let dir = exe.parent().map(Path::to_path_buf).unwrap_or_default();
        let repo = match std::env::var_os("NEMESIS_BENCH_REPO") {
            Some(r) => PathBuf::from(r),
            None => Path::new(env!("CARGO_MANIFEST_DIR")).parent().map(Path::to_path_buf).unwrap_or_default(),
        };
        let ofi_provider = std::env::var("NEMESIS_OFI_PROVIDER")
            .ok()
            .filter(|p| !p.trim().is_empty())
            .unwrap_or_else(|| "tcp;ofi_rxm".into());
        Ok(Context { programs: dir.join("nemesis-bench-programs"), exe, repo, cpus: crate::pin::pair(), ofi_provider })
    }

    fn exe_dir(&self) -> PathBuf {
        self.exe.parent().map(Path::to_path_buf).unwrap_or_default()
    }
}

impl System {
    /// The nemesis Endpoint with `env` added to the ranks' environment (a configuration variant).
    pub fn endpoint(name: &str, env: Vec<(String, String)>) -> System {
        let mut detail = "Endpoint, nemesis::launch --bind core, NEMESIS_WAIT=poll".to_owned();
        for (k, v) in &env {
            detail += &format!(", {k}={v}");
        }
        System { name: name.to_owned(), family: Family::Nemesis, detail, how: How::Endpoint { env, nodes: 1 } }
    }

    /// The nemesis Endpoint with its two ranks on two node identities: every message goes
    /// through the TCP netmod over loopback.
    pub fn endpoint_tcp(name: &str) -> System {
        let detail = "Endpoint, nemesis::launch --nodes 2 --bind core, NEMESIS_WAIT=poll, TCP netmod over loopback";
        System {
            name: name.to_owned(),
            family: Family::Nemesis,
            detail: detail.into(),
            how: How::Endpoint { env: Vec::new(), nodes: 2 },
        }
    }

    /// The nemesis Endpoint with its two ranks on two node identities, through the libfabric
    /// netmod over provider `prov`.
    #[cfg(feature = "rdma")]
    pub fn endpoint_ofi(name: &str, prov: &str) -> System {
        let detail = format!(
            "Endpoint, nemesis::launch --nodes 2 --bind core, NEMESIS_WAIT=poll, ofi netmod, provider {prov} on lo"
        );
        let mut env: Vec<(String, String)> = OFI_ENV.iter().map(|&(k, v)| (k.into(), v.into())).collect();
        env.extend([
            ("NEMESIS_NETMOD".into(), "ofi".into()),
            ("NEMESIS_OFI_PROVIDER".into(), prov.into()),
            ("NEMESIS_OFI_HEARTBEAT_ADDR".into(), "127.0.0.1".into()),
        ]);
        System { name: name.to_owned(), family: Family::Nemesis, detail, how: How::Endpoint { env, nodes: 2 } }
    }

    /// Whether it can run `w` (the stream systems have no `bibw`; `fi_pingpong` measures
    /// latency only).
    pub fn supports(&self, w: Workload) -> bool {
        match self.how {
            How::Endpoint { .. } | How::Mpi { .. } => true,
            How::FiPingpong { .. } => w == Workload::Latency,
            _ => w != Workload::BiBandwidth,
        }
    }

    /// Runs `w` for `sizes` once: the figure for each size (NaN for a size the system did not
    /// report, e.g. a size `mpi_pingpong` does not run). An error if it reported nothing.
    pub fn run(&self, ctx: &Context, w: Workload, sizes: &[usize], plan: &Plan) -> Result<Run> {
        let list = sizes.iter().map(usize::to_string).collect::<Vec<_>>().join(",");
        let scale = plan.scale.to_string();
        let link_args = |name: &str| -> Vec<OsString> {
            ["__link", name, w.key(), "--sizes", &list, "--scale", &scale].iter().map(OsString::from).collect()
        };
        let (a, b) = ctx.cpus;
        let _fds: Vec<OwnedFd>;
        let cmds = match &self.how {
            How::Endpoint { env, nodes } => {
                let mut c = Command::new(&ctx.exe);
                c.args(["__launch", "--ranks", "2", "--nodes", &nodes.to_string(), "--wait", "poll"]);
                for (k, v) in env {
                    c.arg("--env").arg(format!("{k}={v}"));
                }
                c.arg("--").arg(&ctx.exe).args(link_args("nemesis-shm"));
                _fds = Vec::new();
                vec![c]
            }
            How::Pair(stream) => {
                let (fds0, fds1, owned, name, service) = pair_fds(*stream)?;
                _fds = owned;
                let mut cmds = Vec::new();
                for (rank, cpu, fds) in [(0u32, a, fds0), (1, b, fds1)] {
                    let mut c = Command::new(&ctx.exe);
                    c.args(link_args(name)).args(["--rank", &rank.to_string(), "--cpu", &cpu.to_string()]);
                    if !fds.is_empty() {
                        c.arg("--fds").arg(fds.iter().map(|f| f.to_string()).collect::<Vec<_>>().join(","));
                        inherit(&mut c, fds);
                    }
                    if let Some(s) = &service {
                        c.args(["--service", s]);
                    }
                    cmds.push(c);
                }
                cmds
            }
            How::Mpi { launcher, programs, env } => {
                let max = sizes.iter().copied().max().unwrap_or(0);
                if max > i32::MAX as usize {
                    return Err(Error::Usage(format!("{}: mpi_pingpong takes sizes up to {}", self.name, i32::MAX)));
                }
                let mut c = Command::new(&launcher[0]);
                let program = if w == Workload::BiBandwidth { &programs.bibw } else { &programs.pingpong };
                c.args(&launcher[1..]).arg(program).args([w.key(), &max.to_string()]);
                c.envs(env.iter().map(|(k, v)| (k, v)));
                _fds = Vec::new();
                vec![c]
            }
            How::FiPingpong { program, prov } => return fi_pingpong(program, prov, sizes, plan, ctx.cpus),
        };
        let done = proc::run_all(cmds, plan.timeout).map_err(|e| Error::Run(format!("{}: {e}", self.name)))?;
        // The figures printed before a failure are kept (e.g. a transport without large
        // messages fails at the first size it cannot send).
        let figures = parse_figures(&done[0].stdout, w.key());
        let values: Vec<f64> = sizes.iter().map(|s| figures.get(s).copied().unwrap_or(f64::NAN)).collect();
        let problem = match done.iter().find(|c| !c.status.success()) {
            Some(bad) => Some(format!("{} failed ({}):\n    {}", self.name, bad.status, bad.stderr_tail())),
            None if figures.is_empty() => {
                Some(format!("{}: no `{}` lines in its output:\n    {}", self.name, w.key(), tail(&done[0])))
            }
            None => None,
        };
        match problem {
            Some(p) if figures.is_empty() => Err(Error::Run(p)),
            problem => Ok(Run { values, problem }),
        }
    }
}

/// `fi_pingpong -e rdm` over `prov`, one run per size (server pinned to the first CPU, client to
/// the second, iterations as `mpi_pingpong`'s latency loop): its `usec/xfer` is the one-way time
/// (fabtests divides a round trip by its two transfers). A size it cannot run (0 bytes) is NaN.
fn fi_pingpong(program: &Path, prov: &str, sizes: &[usize], plan: &Plan, cpus: (usize, usize)) -> Result<Run> {
    static NEXT: AtomicU64 = AtomicU64::new(0);
    let mut values = Vec::with_capacity(sizes.len());
    let mut problem = None;
    for &size in sizes {
        if size == 0 {
            values.push(f64::NAN);
            continue;
        }
        let (iters, warm) = crate::workload::scaled(crate::workload::latency_iters(size), plan.scale);
        let port = 20_000 + ((std::process::id() as u64 * 7 + NEXT.fetch_add(1, Ordering::Relaxed)) % 20_000);
        let common = |c: &mut Command, cpu: usize| {
            c.args(["-p", prov, "-e", "rdm", "-S", &size.to_string(), "-I", &(iters + warm).to_string()]);
            c.envs(OFI_ENV);
            pin_child(c, cpu);
        };
        let mut server = Command::new(program);
        common(&mut server, cpus.0);
        server.args(["-B", &port.to_string()]);
        // The client retries until the server listens (it refuses the first connection otherwise).
        let mut client = Command::new("sh");
        let line = "for i in 1 2 3 4 5 6 7 8 9 10; do sleep 0.2; \"$0\" \"$@\" && exit 0; done; exit 1";
        client.args(["-c", line]).arg(program);
        common(&mut client, cpus.1);
        client.args(["-P", &port.to_string(), "127.0.0.1"]);
        let done =
            proc::run_all(vec![server, client], plan.timeout).map_err(|e| Error::Run(format!("fi-pingpong: {e}")))?;
        match parse_fi_pingpong(&done[1].stdout) {
            Some(us) => values.push(us),
            None => {
                values.push(f64::NAN);
                problem.get_or_insert_with(|| format!("fi-pingpong {size} B: {}", tail(&done[1])));
            }
        }
    }
    if values.iter().all(|v| v.is_nan()) {
        return Err(Error::Run(problem.unwrap_or_else(|| "fi-pingpong: no figures".into())));
    }
    Ok(Run { values, problem })
}

/// The `usec/xfer` column of `fi_pingpong`'s result line.
fn parse_fi_pingpong(out: &str) -> Option<f64> {
    let mut lines = out.lines().skip_while(|l| !l.contains("usec/xfer"));
    let header: Vec<&str> = lines.next()?.split_whitespace().collect();
    let col = header.iter().position(|h| *h == "usec/xfer")?;
    lines.find_map(|l| l.split_whitespace().nth(col)?.parse().ok())
}

/// Pins the child to `cpu` before it runs.
fn pin_child(cmd: &mut Command, cpu: usize) {
    // SAFETY: the closure runs in the child between fork and exec; sched_setaffinity is
    // async-signal-safe, and `pin` allocates nothing on its success path.
    unsafe {
        cmd.pre_exec(move || crate::pin::pin(cpu));
    }
}

fn tail(c: &Captured) -> String {
    let out: Vec<&str> = c.stdout.lines().take(4).collect();
    format!("{}\n    {}", out.join("\n    "), c.stderr_tail())
}

/// The descriptors of each side of a stream system (kept open by the parent until the run
/// ends), its rank-side name, and its iceoryx2 service name.
type PairFds = (Vec<RawFd>, Vec<RawFd>, Vec<OwnedFd>, &'static str, Option<String>);

fn pair_fds(stream: Stream) -> Result<PairFds> {
    match stream {
        Stream::Pipe => {
            let (r01, w01) = std::io::pipe().map_err(|e| Error::io("create a pipe", e))?;
            let (r10, w10) = std::io::pipe().map_err(|e| Error::io("create a pipe", e))?;
            let owned: Vec<OwnedFd> = vec![r10.into(), w01.into(), r01.into(), w10.into()];
            let fd = |i: usize| owned[i].as_raw_fd();
            // Rank 0 reads what 1 writes and writes what 1 reads.
            Ok((vec![fd(0), fd(1)], vec![fd(2), fd(3)], owned, "pipe", None))
        }
        Stream::UnixSocket => {
            let (s0, s1) = std::os::unix::net::UnixStream::pair().map_err(|e| Error::io("create a socket pair", e))?;
            let owned: Vec<OwnedFd> = vec![s0.into(), s1.into()];
            Ok((vec![owned[0].as_raw_fd()], vec![owned[1].as_raw_fd()], owned, "unix-socket", None))
        }
        #[cfg(feature = "iceoryx2")]
        Stream::Iceoryx2 => {
            static NEXT: AtomicU64 = AtomicU64::new(0);
            let n = NEXT.fetch_add(1, Ordering::Relaxed);
            let service = format!("nemesis-bench/{}/{n}", std::process::id());
            Ok((Vec::new(), Vec::new(), Vec::new(), "iceoryx2", Some(service)))
        }
    }
}

/// Lets the child inherit `fds` (created close-on-exec, so that the other child does not).
fn inherit(cmd: &mut Command, fds: Vec<RawFd>) {
    // SAFETY: the closure runs in the child between fork and exec and only calls fcntl, which is
    // async-signal-safe; it reads `fds`, allocated before the fork, and allocates nothing.
    unsafe {
        cmd.pre_exec(move || {
            for &fd in &fds {
                if libc::fcntl(fd, libc::F_SETFD, 0) == -1 {
                    return Err(std::io::Error::last_os_error());
                }
            }
            Ok(())
        });
    }
}

/// Finds the systems named in `names` (each once): those that can run and those skipped with
/// their reason. Unknown names are an error listing the known ones. Builds the MPI programs.
pub fn discover(ctx: &Context, names: &[String]) -> Result<(Vec<System>, Vec<Skipped>)> {
    let mut wanted: Vec<&str> = Vec::new();
    for n in names {
        let n = NAMES
            .iter()
            .find(|k| **k == n.as_str())
            .ok_or_else(|| Error::Usage(format!("unknown system `{n}`: known systems are {}", NAMES.join(", "))))?;
        if !wanted.contains(n) {
            wanted.push(n);
        }
    }
    let mut found = Vec::new();
    let mut skipped = Vec::new();
    for name in wanted {
        match find(ctx, name) {
            Ok(s) => found.push(s),
            Err(reason) => skipped.push(Skipped { name: name.to_owned(), reason }),
        }
    }
    Ok((found, skipped))
}

fn peer(name: &str, detail: &str, how: How) -> System {
    System { name: name.to_owned(), family: Family::Peer, detail: detail.to_owned(), how }
}

/// One system, or why it cannot run here.
fn find(ctx: &Context, name: &str) -> std::result::Result<System, String> {
    let (a, b) = ctx.cpus;
    match name {
        "nemesis-shm" => Ok(System::endpoint(name, Vec::new())),
        "nemesis-tcp" => Ok(System::endpoint_tcp(name)),
        #[cfg(feature = "rdma")]
        "nemesis-ofi" => Ok(System::endpoint_ofi(name, &ctx.ofi_provider)),
        #[cfg(not(feature = "rdma"))]
        "nemesis-ofi" => Err("built without the `rdma` cargo feature (needs libfabric-dev, libclang-dev)".into()),
        "fi-pingpong" => {
            let program = proc::which("fi_pingpong").ok_or("fi_pingpong not found (apt-get install libfabric-bin)")?;
            let prov = ctx.ofi_provider.clone();
            let detail =
                format!("fi_pingpong -p {prov} -e rdm (libfabric's own, busy-polling), on lo, CPUs {a} and {b}");
            Ok(peer(name, &detail, How::FiPingpong { program, prov }))
        }
        "openmpi-ofi" => {
            let (mpicc, run) =
                tools(&["mpicc.openmpi", "mpiexec.openmpi"], "apt-get install openmpi-bin libopenmpi-dev")?;
            let programs = MpiPrograms::build(|p| build(ctx, p, "openmpi", &mpicc, &[]))?;
            let prov = ctx.ofi_provider.as_str();
            let mut launcher = args(&run, &["--allow-run-as-root", "-n", "2", "--bind-to", "core"]);
            for a in ["--mca", "pml", "cm", "--mca", "mtl", "ofi", "--mca", "mtl_ofi_provider_include", prov] {
                launcher.push(a.into());
            }
            for (k, _) in OFI_ENV {
                launcher.extend(["-x".into(), k.into()]);
            }
            let env = OFI_ENV.iter().map(|&(k, v)| (k.into(), v.into())).collect();
            let detail = format!(
                "mpi_pingpong.c, mpicc.openmpi, mpiexec.openmpi --bind-to core --mca pml cm --mca mtl ofi \
                 --mca mtl_ofi_provider_include {prov}{}",
                version(&run)
            );
            Ok(System { name: name.into(), family: Family::Peer, detail, how: How::Mpi { launcher, programs, env } })
        }
        "unix-socket" => Ok(peer(
            name,
            &format!("socketpair(AF_UNIX, SOCK_STREAM), blocking, CPUs {a} and {b}"),
            How::Pair(Stream::UnixSocket),
        )),
        "pipe" => Ok(peer(name, &format!("two pipes, blocking, CPUs {a} and {b}"), How::Pair(Stream::Pipe))),
        #[cfg(feature = "iceoryx2")]
        "iceoryx2" => Ok(peer(
            name,
            &format!(
                "iceoryx2 0.8 request-response, [u8] slices copied in and out, spinning receive, CPUs {a} and {b}"
            ),
            How::Pair(Stream::Iceoryx2),
        )),
        #[cfg(not(feature = "iceoryx2"))]
        "iceoryx2" => Err("built without the `iceoryx2` cargo feature".into()),
        "openmpi" => {
            let (mpicc, run) =
                tools(&["mpicc.openmpi", "mpiexec.openmpi"], "apt-get install openmpi-bin libopenmpi-dev")?;
            let programs = MpiPrograms::build(|p| build(ctx, p, "openmpi", &mpicc, &[]))?;
            let launcher = args(&run, &["--allow-run-as-root", "-n", "2", "--bind-to", "core"]);
            let detail = format!("mpi_pingpong.c, mpicc.openmpi, mpiexec.openmpi --bind-to core{}", version(&run));
            Ok(System {
                name: name.into(),
                family: Family::Peer,
                detail,
                how: How::Mpi { launcher, programs, env: Vec::new() },
            })
        }
        "mpich" => {
            let (mpicc, run) = tools(&["mpicc.mpich", "mpiexec.hydra"], "apt-get install mpich")?;
            let programs = MpiPrograms::build(|p| build(ctx, p, "mpich", &mpicc, &[]))?;
            let launcher = args(&run, &["-n", "2", "--bind-to", "core"]);
            let detail = format!("mpi_pingpong.c, mpicc.mpich, mpiexec.hydra --bind-to core{}", version(&run));
            let how = How::Mpi { launcher, programs, env: Vec::new() };
            Ok(System { name: name.into(), family: Family::Peer, detail, how })
        }
        "nemesis-c-abi" => c_abi(ctx),
        other => Err(format!("no such system {other}")),
    }
}

fn tools(names: &[&str; 2], install: &str) -> std::result::Result<(PathBuf, PathBuf), String> {
    let find = |n: &str| proc::which(n).ok_or_else(|| format!("{n} not found ({install})"));
    Ok((find(names[0])?, find(names[1])?))
}

fn args(program: &Path, rest: &[&str]) -> Vec<OsString> {
    std::iter::once(program.as_os_str().to_owned()).chain(rest.iter().map(OsString::from)).collect()
}

/// `, version X` from the launcher's `--version`, if it says.
fn version(launcher: &Path) -> String {
    let Ok(o) = Command::new(launcher).arg("--version").stdin(std::process::Stdio::null()).output() else {
        return String::new();
    };
    let text = String::from_utf8_lossy(&o.stdout).into_owned() + &String::from_utf8_lossy(&o.stderr);
    let v = text.lines().find_map(|l| {
        let l = l.trim();
        let rest = l.strip_prefix("Version:").or_else(|| l.strip_prefix("mpiexec (OpenRTE)"))?;
        Some(rest.trim().to_owned())
    });
    v.map(|v| format!(" (version {v})")).unwrap_or_default()
}

/// The C ABI of the repository: its `mpi/bin/mpicc`, the folder of a built `libmpi.so`, and
/// `nemesis-run` if built.
#[derive(Clone, Debug)]
struct CAbi {
    mpicc: PathBuf,
    libdir: PathBuf,
    run: Option<PathBuf>,
}

fn find_c_abi(ctx: &Context) -> std::result::Result<CAbi, String> {
    let mpicc = ctx.repo.join("mpi/bin/mpicc");
    if !mpicc.exists() {
        return Err(format!("no C ABI in this repository ({} does not exist)", mpicc.display()));
    }
    let release = ctx.repo.join("target/release");
    let libdir = [ctx.exe_dir(), release.clone()]
        .into_iter()
        .find(|d| d.join("libmpi.so").exists())
        .ok_or_else(|| "libmpi.so not built (cargo build --release -p nemesis-mpi)".to_owned())?;
    let run = [ctx.exe_dir(), release].into_iter().map(|d| d.join("nemesis-run")).find(|p| p.exists());
    Ok(CAbi { mpicc, libdir, run })
}

impl CAbi {
    /// Builds `program` against this `libmpi.so`.
    fn build(&self, ctx: &Context, program: CProgram) -> std::result::Result<PathBuf, String> {
        build(ctx, program, "nemesis-c-abi", &self.mpicc, &[("NEMESIS_MPI_LIBDIR", self.libdir.as_os_str())])
    }

    /// The launcher's arguments for `ranks` ranks waiting by `wait`, ready for the program, and
    /// its name.
    fn launcher(&self, ctx: &Context, ranks: u32, wait: &str) -> (Vec<OsString>, &'static str) {
        self.launcher_on(ctx, ranks, 1, wait)
    }

    /// As [`CAbi::launcher`], the ranks split into `nodes` node identities (2: every message
    /// between them crosses the TCP netmod over loopback).
    fn launcher_on(&self, ctx: &Context, ranks: u32, nodes: u32, wait: &str) -> (Vec<OsString>, &'static str) {
        let (n, k) = (ranks.to_string(), nodes.to_string());
        match &self.run {
            Some(r) => (args(r, &["-n", &n, "--nodes", &k, "--bind", "core", "--wait", wait, "--"]), "nemesis-run"),
            None => {
                (args(&ctx.exe, &["__launch", "--ranks", &n, "--nodes", &k, "--wait", wait, "--"]), "nemesis::launch")
            }
        }
    }
}

/// The C ABI system of `compare`.
fn c_abi(ctx: &Context) -> std::result::Result<System, String> {
    let abi = find_c_abi(ctx)?;
    let programs = MpiPrograms::build(|p| abi.build(ctx, p))?;
    let (launcher, how) = abi.launcher(ctx, 2, "poll");
    let detail =
        format!("mpi_pingpong.c, mpi/bin/mpicc, libmpi.so in {}, {how} --bind core --wait poll", abi.libdir.display());
    let how = How::Mpi { launcher, programs, env: Vec::new() };
    Ok(System { name: "nemesis-c-abi".into(), family: Family::Nemesis, detail, how })
}

/// Builds `program` with `mpicc -O2` into the programs folder as `STEM-TAG` (through a temporary
/// name: runs in parallel do not see a half-written program).
fn build(
    ctx: &Context,
    program: CProgram,
    tag: &str,
    mpicc: &Path,
    env: &[(&str, &std::ffi::OsStr)],
) -> std::result::Result<PathBuf, String> {
    static NEXT: AtomicU64 = AtomicU64::new(0);
    let n = NEXT.fetch_add(1, Ordering::Relaxed);
    let dir = &ctx.programs;
    let stem = program.stem;
    std::fs::create_dir_all(dir).map_err(|e| format!("create {}: {e}", dir.display()))?;
    let unique = format!("{}-{n}", std::process::id());
    let src = dir.join(format!("{stem}-{unique}.c"));
    std::fs::write(&src, program.text).map_err(|e| format!("write {}: {e}", src.display()))?;
    let tmp = dir.join(format!("{stem}-{tag}.{unique}"));
    let mut cmd = Command::new(mpicc);
    cmd.arg("-O2").arg("-o").arg(&tmp).arg(&src);
    for (k, v) in env {
        cmd.env(k, v);
    }
    let built = proc::run_tool(&mut cmd);
    let _ = std::fs::remove_file(&src);
    built?;
    let out = dir.join(format!("{stem}-{tag}"));
    std::fs::rename(&tmp, &out).map_err(|e| format!("rename {}: {e}", tmp.display()))?;
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `shared/bench/NAME` in the nearest folder above this package that has it (the repository's
    /// parent, or a worktree's further up).
    fn shared(name: &str) -> Option<PathBuf> {
        Path::new(env!("CARGO_MANIFEST_DIR"))
            .ancestors()
            .map(|d| d.join("shared/bench").join(name))
            .find(|p| p.exists())
    }

    #[test]
    fn embedded_c_programs_match_the_shared_ones() {
        for program in [MPI_PINGPONG, MPI_COLL] {
            let file = format!("{}.c", program.stem);
            match shared(&file).map(|p| (std::fs::read_to_string(&p), p)) {
                Some((Ok(text), p)) => assert_eq!(text, program.text, "benches/c/{file} differs from {}", p.display()),
                _ => eprintln!("no shared/bench/{file} here: nothing to compare"),
            }
        }
    }

    #[test]
    fn unknown_systems_are_refused_and_names_are_taken_once() {
        let ctx = Context::new().unwrap();
        assert!(matches!(discover(&ctx, &["nemesis-udp".into()]), Err(Error::Usage(_))));
        let (found, skipped) = discover(&ctx, &["nemesis-tcp".into(), "pipe".into(), "pipe".into()]).unwrap();
        assert!(skipped.is_empty(), "{skipped:?}");
        let names: Vec<&str> = found.iter().map(|s| s.name.as_str()).collect();
        assert_eq!(names, ["nemesis-tcp", "pipe"]);
        assert!(found[0].supports(Workload::BiBandwidth));
        assert!(!found[1].supports(Workload::BiBandwidth) && found[1].supports(Workload::Latency));
    }

    #[test]
    fn fi_pingpong_output_parses() {
        let out = "bytes   #sent   #ack     total       time     MB/sec    usec/xfer   Mxfers/sec\n\
                   8       2k      =2k      31k         0.02s      1.23      6.14       0.16\n";
        assert_eq!(parse_fi_pingpong(out), Some(6.14));
        assert_eq!(parse_fi_pingpong("fi_getinfo(): -61"), None);
    }

    #[test]
    fn missing_c_abi_is_skipped_with_the_reason() {
        let mut ctx = Context::new().unwrap();
        ctx.repo = PathBuf::from("/nonexistent");
        let (_, skipped) = discover(&ctx, &["nemesis-c-abi".into()]).unwrap();
        assert!(skipped[0].reason.contains("mpi/bin/mpicc"), "{}", skipped[0].reason);
    }
}
