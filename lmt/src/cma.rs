//! Single copy between processes with Cross-Memory Attach: `process_vm_readv` reads another
//! process's memory directly, `process_vm_writev` writes it (`shared/reference/nemesis.md`,
//! "KNEM ... Today's equivalents: CMA"). Every such system call of the crate is made here: the
//! plain calls, the batch of one pass (`batch`: the ranges of several transfers with one process
//! in one call), the checks of the process a peer registered ([`PeerProcess`]), and [`Kernel`],
//! the [`Copier`] through which the rendezvous state machine asks for all of them.
//!
//! It needs ptrace permission over the target: the same user, and under Yama `ptrace_scope = 1`
//! the target must name the reader (`prctl(PR_SET_PTRACER, ...)`; [`allow_readers`] names the
//! launcher, whose descendants are the job's ranks). Containers often forbid it altogether
//! (EPERM): the rendezvous then falls back to the shared-copy ring and says so once.
//!
//! Invariant: a pid a peer's slot names is copied to or from only once [`PeerProcess::open`]
//! accepted it (this process is named only by a rank's transfers with itself, and by ranks of
//! one process under `Lmt::allow_own_process`).

use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};

use crate::error::{Error, Refusal, Result};

mod batch;
mod copier;
pub use batch::Batch;
pub(crate) use batch::Local;
pub use copier::{Copier, Kernel};

/// Reads `dst.len()` bytes at `addr` in process `pid`; returns how many were read (fewer only if
/// the kernel stopped early). Safe whatever `pid` names, this process included: only `dst` is
/// written, and the kernel checks `addr` (an unmapped range is EFAULT). Which memory a peer may
/// have us read is [`PeerProcess`]'s business.
pub fn read(pid: u32, addr: u64, dst: &mut [u8]) -> io::Result<usize> {
    if dst.is_empty() {
        return Ok(0);
    }
    let local = libc::iovec { iov_base: dst.as_mut_ptr().cast(), iov_len: dst.len() };
    let remote = libc::iovec { iov_base: addr as usize as *mut libc::c_void, iov_len: dst.len() };
    // SAFETY: `local` describes our own writable buffer; the kernel checks `remote` against the
    // target's address space and our permission, and writes at most `dst.len()` bytes.
    let n = unsafe { libc::process_vm_readv(pid as libc::pid_t, &local, 1, &remote, 1, 0) };
    if n < 0 { Err(io::Error::last_os_error()) } else { Ok(n as usize) }
}

/// Most iovecs one `process_vm_readv` takes (`IOV_MAX`).
pub const IOV_MAX: usize = 1024;

/// Reads the `remote` ranges of process `pid` into the `local` ones, in order, in one system
/// call; returns the bytes read (fewer if the kernel stopped at a fault, at an iovec boundary).
/// At most [`IOV_MAX`] iovecs on each side.
///
/// # Safety
/// Every `local` iovec must describe memory of this process valid for writes of its length and
/// not otherwise accessed during the call.
pub unsafe fn read_vectored(pid: u32, local: &[libc::iovec], remote: &[libc::iovec]) -> io::Result<usize> {
    // SAFETY: the kernel writes into the `local` iovecs, which describe writable memory of ours
    // not otherwise accessed (the caller's contract), at most their lengths.
    unsafe { vectored(libc::process_vm_readv, pid, local, remote) }
}

/// Writes the `local` ranges of this process to the `remote` ones of process `pid`, in order,
/// in one system call (`process_vm_writev`); returns the bytes written (fewer if the kernel
/// stopped at a fault, at an iovec boundary). At most [`IOV_MAX`] iovecs on each side. The
/// target must have asked for it: a receiver names the range of its own receive buffer a sender
/// is to fill (HELP). Our `local` ranges are only read, by the kernel, which checks them.
///
/// # Safety
/// If `pid` names this process, or a process sharing its memory (a thread of ours, a `CLONE_VM`
/// child), the kernel writes our own memory where `remote` says: every `remote` iovec must then
/// describe memory of ours valid for writes of its length and not otherwise accessed during the
/// call. Otherwise there is nothing to uphold: a pid a peer supplied must first pass
/// [`PeerProcess::open`], which refuses ours.
pub unsafe fn write_vectored(pid: u32, local: &[libc::iovec], remote: &[libc::iovec]) -> io::Result<usize> {
    // SAFETY: the kernel only reads the `local` ranges (it checks them: an unmapped one is EFAULT,
    // not undefined behaviour); what it writes through `remote` is the caller's contract.
    unsafe { vectored(libc::process_vm_writev, pid, local, remote) }
}

type VmCall = unsafe extern "C" fn(
    libc::pid_t,
    *const libc::iovec,
    libc::c_ulong,
    *const libc::iovec,
    libc::c_ulong,
    libc::c_ulong,
) -> libc::ssize_t;

/// One `process_vm_readv` or `process_vm_writev` over the iovecs (at most [`IOV_MAX`] a side).
///
/// # Safety
/// What `call` does to the `local` iovecs must be sound: for a read, they describe memory of ours
/// valid for writes and not otherwise accessed during the call.
unsafe fn vectored(call: VmCall, pid: u32, local: &[libc::iovec], remote: &[libc::iovec]) -> io::Result<usize> {
    if local.is_empty() {
        return Ok(0);
    }
    if local.len() > IOV_MAX || remote.len() > IOV_MAX {
        return Err(io::Error::from_raw_os_error(libc::EINVAL));
    }
    // SAFETY: the iovec arrays are valid for their lengths; what the kernel does with the local
    // ranges is the caller's contract, and it checks the remote ones against the target's address
    // space and our permission.
    let n = unsafe {
        call(
            pid as libc::pid_t,
            local.as_ptr(),
            local.len() as libc::c_ulong,
            remote.as_ptr(),
            remote.len() as libc::c_ulong,
            0,
        )
    };
    if n < 0 { Err(io::Error::last_os_error()) } else { Ok(n as usize) }
}

/// A local peer's process, checked fit for single copies: not this process nor one sharing its
/// memory, alive, the process that registered (same start time), and not one this process
/// started. Holds a pidfd where the kernel has them (Linux 5.3), so that [`alive`](Self::alive)
/// can tell whether the pid still names it: a pid is reused only after its process exited.
#[derive(Debug)]
pub struct PeerProcess {
    pid: u32,
    pidfd: Option<OwnedFd>,
    /// When [`alive_lately`](Self::alive_lately) last found it running.
    seen: std::cell::Cell<Option<std::time::Instant>>,
}

/// How long [`PeerProcess::alive_lately`] trusts a finding: far less than the kernel takes to
/// give an ended process's pid to another (it must be reaped, then the pid allocator must cycle
/// through every free pid below `pid_max` before it hands that one out again).
pub const ALIVE_RECHECK: std::time::Duration = std::time::Duration::from_millis(1);

/// How far [`PeerProcess::open`] walks up the named process's ancestors looking for us.
const ANCESTRY_MAX: usize = 64;

impl PeerProcess {
    /// Checks the process local rank `slot` registered, `pid`, started at `start` (clock ticks
    /// since boot, as `/proc/<pid>/stat` says; `None` or 0: not known). Refused with
    /// [`Error::PeerProcess`] naming the slot, the pid and why.
    pub fn open(slot: u16, pid: u32, start: Option<u64>) -> Result<PeerProcess> {
        let refuse = |why| Err(Error::PeerProcess { slot, pid, why });
        let me = std::process::id();
        if pid == me {
            return refuse(Refusal::Own);
        }
        if pid == 0 || pid > i32::MAX as u32 {
            return refuse(Refusal::Dead);
        }
        // `libc`: nix 0.31 has no pidfd_open.
        // SAFETY: plain syscall with integer arguments.
        let fd = unsafe { libc::syscall(libc::SYS_pidfd_open, pid as libc::pid_t, 0) };
        let pidfd = if fd >= 0 {
            // SAFETY: a fresh descriptor, ours alone.
            Some(unsafe { OwnedFd::from_raw_fd(fd as i32) })
        } else {
            match io::Error::last_os_error().raw_os_error() {
                Some(libc::ESRCH) => return refuse(Refusal::Dead),
                // Not a thread-group leader: a thread id, maybe one of ours.
                Some(libc::EINVAL) => return refuse(Refusal::NotProcess),
                // No pidfds here (an old kernel, a seccomp filter): the pid and /proc.
                _ => None,
            }
        };
        let peer = PeerProcess { pid, pidfd, seen: std::cell::Cell::new(None) };
        if !peer.alive() {
            return refuse(Refusal::Dead);
        }
        if peer.pidfd.is_none() && tgid(pid) != Some(pid) {
            return refuse(if tgid(pid).is_none() { Refusal::Dead } else { Refusal::NotProcess });
        }
        // KCMP_VM: 0 if both share one address space. Where kcmp is missing or refused, the
        // checks above (not our pid, not a thread) stand alone.
        // SAFETY: plain syscall with integer arguments.
        let same = unsafe { libc::syscall(libc::SYS_kcmp, me as libc::pid_t, pid as libc::pid_t, KCMP_VM, 0, 0) };
        if same == 0 {
            return refuse(Refusal::SameMemory);
        }
        if let Some(want) = start.filter(|&s| s != 0)
            && nemesis_shm::os::process_start_time(pid) != Some(want)
        {
            return refuse(Refusal::Reused);
        }
        let mut p = pid;
        for _ in 0..ANCESTRY_MAX {
            match parent(p) {
                Some(q) if q == me => return refuse(Refusal::Descendant),
                Some(q) if q > 1 => p = q,
                _ => break,
            }
        }
        // What /proc said was about the process the pidfd holds only if it still runs.
        if !peer.alive() {
            return refuse(Refusal::Dead);
        }
        Ok(peer)
    }

    /// The process id.
    pub fn pid(&self) -> u32 {
        self.pid
    }

    /// As [`alive`](Self::alive), trusting a `true` for [`ALIVE_RECHECK`]: for the reads, which
    /// take a system call each and whose worst case, a pid reused within that time, is another
    /// process's bytes in a receive buffer (writes ask [`alive`](Self::alive) every time).
    pub fn alive_lately(&self) -> bool {
        let now = std::time::Instant::now();
        if self.seen.get().is_some_and(|t| now.duration_since(t) < ALIVE_RECHECK) {
            return true;
        }
        let alive = self.alive();
        self.seen.set(alive.then_some(now));
        alive
    }

    /// Whether the process still runs (its pidfd is not readable; without a pidfd, whether the
    /// pid names a process). A copy after `true` names it unless it exits and its pid is reused
    /// meanwhile; `true` after a copy means the copy reached it.
    pub fn alive(&self) -> bool {
        match &self.pidfd {
            Some(fd) => {
                let mut p = libc::pollfd { fd: fd.as_raw_fd(), events: libc::POLLIN, revents: 0 };
                // SAFETY: one valid pollfd, no wait.
                let n = unsafe { libc::poll(&mut p, 1, 0) };
                n == 0
            }
            None => {
                // SAFETY: signal 0 only checks the pid.
                let r = unsafe { libc::kill(self.pid as libc::pid_t, 0) };
                r == 0 || io::Error::last_os_error().raw_os_error() == Some(libc::EPERM)
            }
        }
    }
}

/// `kcmp` type comparing address spaces (`linux/kcmp.h`).
const KCMP_VM: libc::c_long = 1;

/// The `Tgid:` of `/proc/<pid>/status` (the process a thread id belongs to).
fn tgid(pid: u32) -> Option<u32> {
    let s = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    s.lines().find_map(|l| l.strip_prefix("Tgid:")).and_then(|v| v.trim().parse().ok())
}

/// The parent of process `pid` (`/proc/<pid>/stat`, field 4).
fn parent(pid: u32) -> Option<u32> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The command name (field 2) may hold spaces and parentheses: fields resume after the last ')'.
    let rest = &stat[stat.rfind(')')? + 1..];
    rest.split_ascii_whitespace().nth(1)?.parse().ok()
}

/// Under Yama's restricted ptrace (`/proc/sys/kernel/yama/ptrace_scope` = 1), lets the job's
/// other ranks on this node read and write this process's memory, as single copies need, and no
/// other process: `PR_SET_PTRACER` names this process's parent (the launcher: `nemesis-run`, a
/// Hydra proxy, `slurmstepd`, which start the ranks of a node as their children), and Yama then
/// allows that process and its descendants, the ranks of the job. Never `PR_SET_PTRACER_ANY`
/// (every process of the user). Does nothing otherwise, nor when the parent is `init` (pid 1, an
/// orphan or a singleton: allowing its descendants would allow every process). Ranks started
/// otherwise (not siblings) are refused by the kernel at the first copy (EPERM), and their
/// transfers fall back to the rings.
pub fn allow_readers() {
    let restricted = std::fs::read_to_string("/proc/sys/kernel/yama/ptrace_scope").is_ok_and(|s| s.trim() == "1");
    if restricted && let Some(ptracer) = job_ptracer() {
        // SAFETY: prctl with integer arguments on this process.
        unsafe { libc::prctl(libc::PR_SET_PTRACER, libc::c_ulong::from(ptracer), 0, 0, 0) };
    }
}

/// The process `allow_readers` names as the ptracer: this process's parent, unless it is `init`.
pub fn job_ptracer() -> Option<u32> {
    // SAFETY: getppid has no preconditions.
    let parent = unsafe { libc::getppid() };
    u32::try_from(parent).ok().filter(|&p| p > 1)
}

/// Whether this process may read process `pid`'s word at `addr`: `Ok` if the read worked, the
/// error otherwise (EPERM when forbidden).
pub fn probe(pid: u32, addr: u64) -> io::Result<()> {
    let mut word = [0u8; 8];
    read(pid, addr, &mut word).map(drop)
}

/// The start-up probe: whether single-copy reads can work from this process at all. It reads a
/// word of our own memory (a seccomp filter, as containers install, or a kernel without CMA
/// refuses even that: EPERM, ENOSYS) and checks Yama's ptrace scope (2: only with
/// CAP_SYS_PTRACE, taken here as root; 3: never). Scope 1 is handled by [`allow_readers`] on
/// every rank. A refusal the probe cannot see (another user, a security module) is found at the
/// first read, which then falls back to the rings.
pub fn probe_startup() -> Result<(), String> {
    let word = 0x6e656d6573697321u64;
    probe(std::process::id(), &word as *const u64 as u64).map_err(|e| format!("process_vm_readv refused: {e}"))?;
    let scope = std::fs::read_to_string("/proc/sys/kernel/yama/ptrace_scope").ok();
    // SAFETY: geteuid has no preconditions.
    let root = unsafe { libc::geteuid() } == 0;
    match scope.as_deref().map(str::trim) {
        Some("3") => Err("Yama ptrace_scope is 3 (no process may read another)".into()),
        Some("2") if !root => Err("Yama ptrace_scope is 2 (only CAP_SYS_PTRACE may read another process)".into()),
        _ => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_another_process() {
        // A child that keeps a known buffer alive; we read it through CMA.
        let data: Vec<u8> = (0..100_000u32).map(|i| (i * 7) as u8).collect();
        let addr = data.as_ptr() as u64;
        // SAFETY: fork in a test; the child only sleeps then exits.
        let pid = unsafe { libc::fork() };
        if pid == 0 {
            std::thread::sleep(std::time::Duration::from_secs(5));
            // SAFETY: ending the child without unwinding.
            unsafe { libc::_exit(0) };
        }
        allow_readers();
        let mut out = vec![0u8; data.len()];
        let r = read(pid as u32, addr, &mut out);
        // SAFETY: our child.
        unsafe {
            libc::kill(pid, libc::SIGKILL);
            libc::waitpid(pid, std::ptr::null_mut(), 0);
        }
        match r {
            Ok(n) => {
                assert_eq!(n, data.len());
                assert_eq!(out, data);
            }
            // Forbidden here (a container): the fallback is what runs. Not in CI, which runs as root.
            Err(e) if e.raw_os_error() == Some(libc::EPERM) && std::env::var("CI").is_err() => {
                eprintln!("skipped: CMA forbidden here ({e})");
            }
            Err(e) => panic!("process_vm_readv: {e}"),
        }
        assert!(read(u32::MAX >> 1, addr, &mut out).is_err(), "no such process");
    }

    #[test]
    fn the_ptracer_is_the_launcher_never_any() {
        // The test runner's parent is cargo (or a shell): our parent, named, not every process.
        // SAFETY: getppid has no preconditions.
        let parent = unsafe { libc::getppid() } as u32;
        assert_eq!(job_ptracer(), (parent > 1).then_some(parent));
        // No source of the workspace asks for PR_SET_PTRACER_ANY (spelled in pieces here).
        let any = ["libc::PR_SET_PTRACER", "_ANY"].concat();
        let mut dirs = vec![std::path::PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/.."))];
        let mut seen = 0;
        while let Some(d) = dirs.pop() {
            for f in std::fs::read_dir(&d).unwrap() {
                let path = f.unwrap().path();
                let name = path.file_name().unwrap().to_string_lossy().into_owned();
                if path.is_dir() && name != "target" && !name.starts_with('.') {
                    dirs.push(path);
                } else if name.ends_with(".rs") || name.ends_with(".c") {
                    seen += 1;
                    let text = std::fs::read_to_string(&path).unwrap();
                    assert!(!text.contains(&any), "{} asks for {any}", path.display());
                }
            }
        }
        assert!(seen > 50, "the workspace's sources were not found ({seen} files)");
    }

    #[test]
    fn startup_probe_reads_ourselves() {
        match probe_startup() {
            Ok(()) => {}
            Err(e) if std::env::var("CI").is_err() => eprintln!("skipped: CMA refused here ({e})"),
            Err(e) => panic!("CI runs where CMA works: {e}"),
        }
    }
}
