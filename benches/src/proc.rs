//! Running the measured programs: finding tools in `PATH`, and running one or more child
//! processes together with their output captured and a deadline (a hung peer must not hang the
//! suite: past the deadline, or a little after one process failed, the others' process groups
//! are killed). Each child leads its own process group (its launcher's ranks and daemons join
//! it), so that a whole job can be ended at once; since the terminal's Ctrl-C then reaches only
//! this process, SIGINT and SIGTERM here kill the running groups before this process ends.
//!
//! Signals through `nix` (`signal` stays `unsafe`: the handler must be async-signal-safe).

use std::io::Read;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::Once;
use std::sync::atomic::{AtomicI32, Ordering};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use nix::sys::signal::{SigHandler, Signal, killpg, raise, signal};
use nix::unistd::Pid;

use crate::error::{Error, Result};

/// How long the others may run on once one process of a run has failed.
const GRACE: Duration = Duration::from_secs(2);

/// `name` as found in `PATH` (or `name` itself if it holds a `/` and exists).
pub fn which(name: &str) -> Option<PathBuf> {
    if name.contains('/') {
        let p = PathBuf::from(name);
        return is_executable(&p).then_some(p);
    }
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path).map(|d| d.join(name)).find(|p| is_executable(p))
}

fn is_executable(p: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    p.metadata().map(|m| m.is_file() && m.permissions().mode() & 0o111 != 0).unwrap_or(false)
}

/// What a finished process left.
#[derive(Debug)]
pub struct Captured {
    pub status: ExitStatus,
    pub stdout: String,
    pub stderr: String,
}

impl Captured {
    /// The last lines of its stderr, for an error message.
    pub fn stderr_tail(&self) -> String {
        let lines: Vec<&str> = self.stderr.lines().filter(|l| !l.trim().is_empty()).collect();
        lines[lines.len().saturating_sub(6)..].join("\n    ")
    }
}

/// Process groups running now (0: a free slot), for the signal handler.
static GROUPS: [AtomicI32; 8] = [const { AtomicI32::new(0) }; 8];

extern "C" fn on_signal(sig: libc::c_int) {
    for g in &GROUPS {
        // ORDERING: SeqCst pairs with the registration before the group could run long.
        let pgid = g.load(Ordering::SeqCst);
        if pgid > 0 {
            // kill(2) is async-signal-safe; a group id registered while its leader is not yet
            // reaped.
            let _ = killpg(Pid::from_raw(pgid), Signal::SIGKILL);
        }
    }
    // End as the signal would have: signal(2) and raise(3) are async-signal-safe.
    if let Ok(sig) = Signal::try_from(sig) {
        // SAFETY: restores the default disposition.
        let _ = unsafe { signal(sig, SigHandler::SigDfl) };
        let _ = raise(sig);
    }
}

fn install_handlers() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        for sig in [Signal::SIGINT, Signal::SIGTERM, Signal::SIGHUP] {
            // SAFETY: `on_signal` only calls async-signal-safe functions and reads atomics.
            let _ = unsafe { signal(sig, SigHandler::Handler(on_signal)) };
        }
    });
}

/// Registers `pgid` for the signal handler; the slot to clear, if one was free.
fn register(pgid: i32) -> Option<usize> {
    GROUPS.iter().position(|g| g.compare_exchange(0, pgid, Ordering::SeqCst, Ordering::SeqCst).is_ok())
}

fn unregister(slot: Option<usize>) {
    if let Some(i) = slot {
        GROUPS[i].store(0, Ordering::SeqCst);
    }
}

struct Running {
    child: Child,
    out: JoinHandle<String>,
    err: JoinHandle<String>,
    slot: Option<usize>,
}

fn drain(mut r: impl Read + Send + 'static) -> JoinHandle<String> {
    std::thread::spawn(move || {
        let mut v = Vec::new();
        let _ = r.read_to_end(&mut v);
        String::from_utf8_lossy(&v).into_owned()
    })
}

/// Starts every command in its own process group with stdout and stderr captured, and waits for
/// all of them, for at most `timeout`. A process that fails (non-zero exit or a signal) gives the
/// others [`GRACE`] to end before they are killed. Returns every process's status and output, or
/// an error naming the command that could not start or the deadline that passed.
pub fn run_all(cmds: Vec<Command>, timeout: Duration) -> Result<Vec<Captured>> {
    install_handlers();
    let mut running: Vec<Running> = Vec::with_capacity(cmds.len());
    for mut cmd in cmds {
        cmd.stdin(Stdio::null()).stdout(Stdio::piped()).stderr(Stdio::piped()).process_group(0);
        let program = cmd.get_program().to_string_lossy().into_owned();
        let mut child = match cmd.spawn() {
            Ok(c) => c,
            Err(e) => {
                kill_all(&mut running);
                return Err(Error::io(format!("start {program}"), e));
            }
        };
        let (Some(out), Some(err)) = (child.stdout.take(), child.stderr.take()) else {
            kill_all(&mut running);
            return Err(Error::Run(format!("{program}: no output pipes")));
        };
        let slot = register(child.id() as i32);
        running.push(Running { child, out: drain(out), err: drain(err), slot });
    }
    // A deadline past what the clock can hold is no deadline.
    let mut deadline =
        Instant::now().checked_add(timeout).unwrap_or_else(|| Instant::now() + Duration::from_secs(1 << 30));
    let mut statuses: Vec<Option<ExitStatus>> = vec![None; running.len()];
    let mut timed_out = false;
    while statuses.iter().any(Option::is_none) {
        for (r, s) in running.iter_mut().zip(statuses.iter_mut()) {
            if s.is_none()
                && let Some(st) = r.child.try_wait().map_err(|e| Error::io("wait for a process", e))?
            {
                *s = Some(st);
                if !st.success() {
                    deadline = deadline.min(Instant::now() + GRACE);
                }
            }
        }
        if statuses.iter().all(Option::is_some) {
            break;
        }
        if Instant::now() >= deadline {
            timed_out = !statuses.iter().flatten().any(|s| !s.success());
            for (r, s) in running.iter_mut().zip(statuses.iter_mut()) {
                if s.is_none() {
                    kill_group(&r.child);
                    *s = r.child.wait().ok();
                }
            }
            break;
        }
        std::thread::sleep(Duration::from_millis(5));
    }
    let mut done = Vec::with_capacity(running.len());
    for (r, s) in running.into_iter().zip(statuses) {
        unregister(r.slot);
        let stdout = r.out.join().unwrap_or_default();
        let stderr = r.err.join().unwrap_or_default();
        let status = s.ok_or_else(|| Error::Run("a process could not be waited for".into()))?;
        done.push(Captured { status, stdout, stderr });
    }
    if timed_out {
        return Err(Error::Run(format!("timed out after {} s (raise --timeout)", timeout.as_secs())));
    }
    Ok(done)
}

/// Kills the process group `child` leads (`process_group(0)`); the child is not reaped yet, so
/// its pid (= the group id) is not reused.
fn kill_group(child: &Child) {
    let _ = killpg(Pid::from_raw(child.id() as i32), Signal::SIGKILL);
}

fn kill_all(running: &mut [Running]) {
    for r in running {
        kill_group(&r.child);
        let _ = r.child.wait();
        unregister(r.slot);
    }
}

/// Runs `cmd` to completion (a compiler): its stderr if it fails.
pub fn run_tool(cmd: &mut Command) -> std::result::Result<(), String> {
    let program = cmd.get_program().to_string_lossy().into_owned();
    match cmd.stdin(Stdio::null()).output() {
        Ok(o) if o.status.success() => Ok(()),
        Ok(o) => {
            let err = String::from_utf8_lossy(&o.stderr);
            let first: Vec<&str> = err.lines().take(3).collect();
            Err(format!("{program} failed ({}): {}", o.status, first.join(" / ")))
        }
        Err(e) => Err(format!("{program}: {e}")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_tools_in_path() {
        assert!(which("sh").is_some());
        assert!(which("no-such-tool-nemesis").is_none());
        assert!(which("/no/such/path").is_none());
    }

    #[test]
    fn captures_output_and_statuses() {
        let mut a = Command::new("sh");
        a.args(["-c", "echo out; echo err >&2"]);
        let mut b = Command::new("sh");
        b.args(["-c", "exit 3"]);
        let r = run_all(vec![a, b], Duration::from_secs(20)).unwrap();
        assert_eq!(r[0].stdout, "out\n");
        assert_eq!(r[0].stderr_tail(), "err");
        assert_eq!(r[1].status.code(), Some(3));
    }

    #[test]
    fn a_failure_ends_the_others_and_deadlines_kill() {
        let mut hang = Command::new("sleep");
        hang.arg("30");
        let mut fail = Command::new("false");
        fail.arg("x");
        let r = run_all(vec![hang, fail], Duration::from_secs(60)).unwrap();
        // The sleeper was killed once `false` had failed, long before its 30 s or the deadline.
        assert_eq!(std::os::unix::process::ExitStatusExt::signal(&r[0].status), Some(libc::SIGKILL));
        assert_eq!(r[1].status.code(), Some(1));
        let mut hang = Command::new("sleep");
        hang.arg("30");
        assert!(matches!(run_all(vec![hang], Duration::from_millis(200)), Err(Error::Run(_))));
        assert!(run_all(vec![Command::new("/no/such/program")], Duration::from_secs(1)).is_err());
    }
}
