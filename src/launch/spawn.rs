//! Starting one rank: its command, its environment (the [`contract`](crate::contract)), its PMI
//! socket, and what runs in the child between `fork` and `exec`.
//!
//! The child, before `exec` (`CommandExt::pre_exec`), only makes async-signal-safe system calls
//! on values computed before the fork (no allocation, no lock):
//! 1. `prctl(PR_SET_PDEATHSIG, SIGKILL)`, so that a launcher killed with SIGKILL takes its ranks
//!    with it; then `getppid()`: if the launcher already died, the rank must not start;
//! 2. `fcntl` to clear close-on-exec on the descriptors the rank inherits (its end of the PMI
//!    socket pair, the node's segment, and with `--ft` its end of the fault-tolerance channel) —
//!    in the child only, so that no other rank, and no process a multi-threaded host starts
//!    meanwhile, inherits them;
//! 3. `sched_setaffinity` to the CPUs of the rank's slot in the plan (`--bind`).
//!
//! `PR_SET_PDEATHSIG` fires when the *thread* that forked the child ends: [`super::Job::run`]
//! forks from its calling thread and does not return before every rank was reaped.
//!
//! Through `nix` (its wrappers allocate nothing, and its errors turn into `io::Error` without
//! allocating either), but for `pidfd_open`, which nix 0.31 lacks: a raw `libc::syscall`.

use std::ffi::OsString;
use std::io;
use std::os::fd::{AsRawFd, BorrowedFd, FromRawFd, OwnedFd, RawFd};
use std::os::unix::net::UnixStream;
use std::os::unix::process::CommandExt;
use std::path::PathBuf;
use std::process::{Child, ChildStderr, ChildStdout, Command, Stdio};

use super::Job;
use crate::contract::{
    ENV_FT_FD, ENV_LAUNCHER, ENV_LOCAL_RANK, ENV_LOCAL_SIZE, ENV_LOCALITY, ENV_NODE, ENV_PMI_FD, ENV_PMI_RANK,
    ENV_PMI_SIZE, ENV_WAIT, LAUNCHER_NAME,
};
use crate::error::{Error, Result};
use nix::fcntl::{FcntlArg, FdFlag, fcntl};
use nix::sched::{CpuSet, sched_setaffinity};
use nix::sys::signal::Signal;
use nix::unistd::{Pid, getppid};

/// Where one rank sits in the job.
#[derive(Debug, Clone)]
pub(crate) struct Placement {
    pub rank: u32,
    pub size: u32,
    pub node: String,
    pub local_rank: u16,
    pub local_size: u16,
    /// The CPUs to bind to (empty: not bound).
    pub cpus: Vec<u32>,
    /// `NEMESIS_LOCALITY` for the rank (every local rank's locality), when there is a plan.
    pub locality: Option<String>,
}

/// What differs for a rank started under fault-tolerance recovery (`nemesis-run --ft`).
#[derive(Debug, Clone, Default)]
pub(crate) struct Extra {
    /// Give the rank a fault-tolerance channel (`NEMESIS_FT_FD`).
    pub ft_channel: bool,
    /// More variables (a restarted rank's `NEMESIS_FT_RESTART`).
    pub env: Vec<(String, String)>,
    /// Let the rank write to the launcher's standard output and error even with
    /// `--tag-output` (a restarted rank: the forwarder started with the job).
    pub inherit_output: bool,
    /// Another program and arguments than the job's (a spawned process).
    pub command: Option<(OsString, Vec<OsString>)>,
    /// Its working directory (`MPI_Comm_spawn`'s `wdir` info key).
    pub cwd: Option<PathBuf>,
}

/// A started rank.
#[derive(Debug)]
pub(crate) struct Started {
    pub child: Child,
    pub pid: u32,
    /// Readable once the process has exited (Linux 5.3+).
    pub pidfd: OwnedFd,
    /// The launcher's end of the PMI socket pair.
    pub pmi: UnixStream,
    /// The launcher's end of the fault-tolerance channel, if asked for.
    pub ft: Option<UnixStream>,
    pub stdout: Option<ChildStdout>,
    pub stderr: Option<ChildStderr>,
}

/// Clears close-on-exec on `fd` (async-signal-safe: two `fcntl` calls).
fn clear_cloexec(fd: BorrowedFd<'_>) -> io::Result<()> {
    let flags = FdFlag::from_bits_retain(fcntl(fd, FcntlArg::F_GETFD)?);
    fcntl(fd, FcntlArg::F_SETFD(flags - FdFlag::FD_CLOEXEC))?;
    Ok(())
}

/// Opens a pidfd on our child `pid` (not yet reaped, so the pid cannot have been reused).
fn pidfd_open(pid: u32) -> Result<OwnedFd> {
    // SAFETY: plain system call with integer arguments.
    let fd = unsafe { libc::syscall(libc::SYS_pidfd_open, pid as libc::pid_t, 0) };
    if fd < 0 {
        return Err(Error::io("pidfd_open (needs Linux 5.3 or later)", io::Error::last_os_error()));
    }
    // SAFETY: a fresh descriptor that nothing else owns.
    Ok(unsafe { OwnedFd::from_raw_fd(fd as RawFd) })
}

/// Starts one rank of `job` at `place`, passing it the segment descriptor `seg_fd`.
pub(crate) fn start(job: &Job, place: &Placement, seg_fd: RawFd, extra: &Extra) -> Result<Started> {
    let (ours, theirs) = UnixStream::pair().map_err(|e| Error::io("socketpair", e))?;
    ours.set_nonblocking(true).map_err(|e| Error::io("PMI socket O_NONBLOCK", e))?;
    let pmi_fd = theirs.as_raw_fd();
    let ft = if extra.ft_channel { Some(UnixStream::pair().map_err(|e| Error::io("socketpair", e))?) } else { None };
    // -1: none (checked in the child before use).
    let ft_fd = ft.as_ref().map_or(-1, |(_, t)| t.as_raw_fd());

    let (program, args) = match &extra.command {
        Some((p, a)) => (p, a.as_slice()),
        None => (&job.program, job.args.as_slice()),
    };
    let mut cmd = Command::new(program);
    cmd.args(args);
    if let Some(d) = &extra.cwd {
        cmd.current_dir(d);
    }
    // Stale process manager variables (a launcher started under Slurm, Hydra or Open MPI) must
    // not mislead the rank's bootstrap: it must speak to us, not to a PMIx server of the
    // launcher's own job.
    for v in ["PMI_PORT", "PMI_ID", "PMI_SPAWNED", "PMI_SUBVERSION", "PMI_JOBID", "SLURM_MPI_TYPE"] {
        cmd.env_remove(v);
    }
    for (k, _) in std::env::vars_os() {
        let k8 = k.to_string_lossy();
        if k8.starts_with("PMIX_") || k8.starts_with("OMPI_COMM_WORLD_") {
            cmd.env_remove(&k);
        }
    }
    for (k, v) in &job.env {
        cmd.env(k, v);
    }
    cmd.env(ENV_PMI_FD, pmi_fd.to_string())
        .env(ENV_PMI_RANK, place.rank.to_string())
        .env(ENV_PMI_SIZE, place.size.to_string())
        .env(ENV_LOCAL_RANK, place.local_rank.to_string())
        .env(ENV_LOCAL_SIZE, place.local_size.to_string())
        .env(ENV_NODE, &place.node)
        .env(ENV_LAUNCHER, LAUNCHER_NAME);
    if let Some(w) = job.wait {
        cmd.env(ENV_WAIT, w.name());
    }
    if let Some(l) = &place.locality {
        cmd.env(ENV_LOCALITY, l);
    }
    if ft_fd >= 0 {
        cmd.env(ENV_FT_FD, ft_fd.to_string());
    }
    for (k, v) in &extra.env {
        cmd.env(k, v);
    }
    // As mpiexec: the terminal's input goes to rank 0 only.
    if place.rank != 0 {
        cmd.stdin(Stdio::null());
    }
    if job.tag_output && !extra.inherit_output {
        cmd.stdout(Stdio::piped()).stderr(Stdio::piped());
    }

    let cpuset = if place.cpus.is_empty() {
        None
    } else {
        let mut set = CpuSet::new();
        for &cpu in &place.cpus {
            set.set(cpu as usize).map_err(|_| Error::Config(format!("CPU {cpu} is beyond CPU_SETSIZE")))?;
        }
        Some(set)
    };
    let launcher = Pid::this();
    let in_child = move || -> io::Result<()> {
        nix::sys::prctl::set_pdeathsig(Signal::SIGKILL)?;
        // The launcher may have died before the death signal was armed: then it never fires.
        if getppid() != launcher {
            return Err(io::Error::from_raw_os_error(libc::ESRCH));
        }
        // SAFETY: both descriptors are open in the child (inherited across fork; only exec
        // would close them) until exec.
        let (pmi, seg) = unsafe { (BorrowedFd::borrow_raw(pmi_fd), BorrowedFd::borrow_raw(seg_fd)) };
        clear_cloexec(pmi)?;
        clear_cloexec(seg)?;
        if ft_fd >= 0 {
            // SAFETY: open in the child until exec, as above.
            clear_cloexec(unsafe { BorrowedFd::borrow_raw(ft_fd) })?;
        }
        if let Some(set) = &cpuset {
            sched_setaffinity(Pid::from_raw(0), set)?;
        }
        Ok(())
    };
    // SAFETY: `in_child` runs in the forked child before exec and only makes async-signal-safe
    // system calls (prctl, getppid, fcntl, sched_setaffinity) on values captured by copy before
    // the fork; it allocates nothing (errors are raw OS errors) and takes no lock.
    unsafe { cmd.pre_exec(in_child) };
    let mut child = cmd.spawn().map_err(|source| Error::Spawn {
        program: program.to_string_lossy().into_owned(),
        rank: place.rank,
        source,
    })?;
    // The rank has its copy now; ours must go so that its end of the pair closes with it.
    drop(theirs);
    let ft = ft.map(|(ours, theirs)| {
        drop(theirs);
        ours
    });
    let pid = child.id();
    let pidfd = match pidfd_open(pid) {
        Ok(fd) => fd,
        Err(e) => {
            let _ = child.kill();
            let _ = child.wait();
            return Err(e);
        }
    };
    let stdout = child.stdout.take();
    let stderr = child.stderr.take();
    Ok(Started { child, pid, pidfd, pmi: ours, ft, stdout, stderr })
}
