//! `nemesis-run` end to end: the real binary starts real processes.
//!
//! Ranks are either `sh -c` snippets or this test binary itself, re-executed with a *plan* in
//! `NT_PLAN` (or `NT_PLAN_<rank>` for one rank): a comma-separated list of steps that `child`
//! below carries out (connect to PMI, put/barrier/get, abort, exit, kill itself, read the
//! segment's liveness marks...). Every launcher run also checks that `/dev/shm` holds nothing new
//! afterwards. Time bounds are generous (a rank that should have been killed sleeps a minute; the
//! bound is ten seconds): the tests never measure speed.
//!
//! The Hydra test runs `mpiexec.hydra` (Debian package `mpich`) over the same PMI client; without
//! it the test is skipped with a message, unless `CI=true`, where it fails.

use std::collections::BTreeSet;
use std::io::Read;
use std::os::fd::{FromRawFd, OwnedFd, RawFd};
use std::os::unix::fs::PermissionsExt;
use std::os::unix::process::ExitStatusExt;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitStatus, Stdio};
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

#[path = "common/harness.rs"]
mod harness;

use nemesis::launch::contract::{self, segment_key};
use nemesis::launch::{Ending, Job};
use nemesis::pmi::PmiClient;
use nemesis_shm::{Node, Segment};

const LAUNCHER: &str = env!("CARGO_BIN_EXE_nemesis-run");

/// Longest any launcher run may take here; ranks meant to be killed sleep far longer.
const BOUND: Duration = Duration::from_secs(10);
/// How long a "sleep" step sleeps: a rank still there after `BOUND` was not torn down.
const SLEEP: Duration = Duration::from_secs(60);

fn ci() -> bool {
    std::env::var("CI").is_ok_and(|v| v == "true" || v == "1")
}

// ---------------------------------------------------------------------------------------------
// The rank side: plans.

fn main() {
    harness::main(
        child,
        tests![
            pmi_conversation_among_eight_ranks,
            abort_ends_the_job_with_its_code,
            any_program_runs_hostname,
            exit_status_is_zero_or_the_first_failure,
            a_killed_rank_takes_the_job_down,
            keep_going_lets_the_others_finish,
            the_segment_marks_a_killed_rank_gone,
            a_barrier_does_not_wait_for_a_rank_that_left,
            junk_on_the_pmi_socket_gets_errors_and_stalls_nobody,
            sigint_and_sigterm_end_the_job,
            sigkill_to_the_launcher_kills_the_ranks,
            tag_output_prefixes_whole_lines,
            bind_core_pins_rank_i_to_cpu_i_mod_n,
            bad_command_lines_are_clear_errors,
            the_library_reports_each_rank,
            hydra_starts_ranks_that_speak_our_pmi_client,
        ],
    );
}

/// The rank program: carries out its plan.
fn child() {
    let plan = plan().expect("a rank without a plan (NT_PLAN)");
    let mut rank = RankCtx::default();
    for step in plan.split(',').map(str::trim).filter(|s| !s.is_empty()) {
        if let Err(e) = rank.step(step) {
            println!("CHILD-ERROR rank {:?} step {step}: {e}", std::env::var("PMI_RANK"));
            std::process::exit(1);
        }
    }
    std::process::exit(0);
}

fn plan() -> Option<String> {
    let rank = std::env::var("PMI_RANK").ok();
    if let Some(p) = rank.and_then(|r| std::env::var(format!("NT_PLAN_{r}")).ok()) {
        return Some(p);
    }
    std::env::var("NT_PLAN").ok()
}

fn env_num<T: std::str::FromStr>(k: &str) -> Result<T, String> {
    std::env::var(k).map_err(|_| format!("{k} is not set"))?.parse().map_err(|_| format!("{k} is not a number"))
}

#[derive(Default)]
struct RankCtx {
    pmi: Option<PmiClient>,
    seg: Option<Segment>,
}

impl RankCtx {
    fn pmi(&mut self) -> Result<&mut PmiClient, String> {
        self.pmi.as_mut().ok_or_else(|| "no PMI connection (plan lacks `pmi`)".into())
    }

    fn seg(&self) -> Result<&Segment, String> {
        self.seg.as_ref().ok_or_else(|| "no segment (plan lacks `attach`)".into())
    }

    fn step(&mut self, step: &str) -> Result<(), String> {
        let (op, arg) = step.split_once(':').unwrap_or((step, ""));
        match op {
            "pmi" => {
                self.pmi = Some(PmiClient::from_env().map_err(|e| e.to_string())?.ok_or("no PMI_FD")?);
            }
            "check-env" => self.check_env()?,
            "exchange" => self.exchange()?,
            "barrier" => self.pmi()?.barrier().map_err(|e| e.to_string())?,
            "finalize" => self.pmi.take().ok_or("no PMI connection")?.finalize().map_err(|e| e.to_string())?,
            "abort" => {
                self.pmi()?.abort(arg.parse().map_err(|_| "abort:<code>")?, "it broke").map_err(|e| e.to_string())?;
                std::thread::sleep(SLEEP);
            }
            "attach" => {
                let node = std::env::var(contract::ENV_NODE).map_err(|_| "NEMESIS_NODE is not set")?;
                let handle =
                    self.pmi()?.get(&segment_key(&node)).map_err(|e| e.to_string())?.ok_or("no segment key")?;
                let fd: RawFd =
                    handle.strip_prefix("fd:").and_then(|n| n.parse().ok()).ok_or("handle is not fd:<n>")?;
                // SAFETY: the launcher passed this descriptor to this process; nothing else here
                // uses it.
                let owned = unsafe { OwnedFd::from_raw_fd(fd) };
                self.seg = Some(Segment::attach_fd(owned).map_err(|e| e.to_string())?);
            }
            "alive" => {
                let r: u16 = arg.parse().map_err(|_| "alive:<rank>")?;
                if self.seg()?.is_gone(r) {
                    return Err(format!("rank {r} is marked gone while alive"));
                }
            }
            "wait-gone" => {
                let r: u16 = arg.parse().map_err(|_| "wait-gone:<rank>")?;
                let t = Instant::now();
                while !self.seg()?.is_gone(r) {
                    if t.elapsed() > BOUND {
                        return Err(format!("rank {r} never marked gone"));
                    }
                    std::thread::sleep(Duration::from_millis(5));
                }
            }
            "junk" => junk()?,
            "print" => println!("{arg}"),
            "pidfile" => {
                let dir = std::env::var("NT_DIR").map_err(|_| "NT_DIR is not set")?;
                let pid = std::process::id();
                let start = nemesis_shm::os::process_start_time(pid).ok_or("no start time")?;
                let rank: u32 = env_num("PMI_RANK")?;
                let tmp = format!("{dir}/pid-{rank}.tmp");
                std::fs::write(&tmp, format!("{pid} {start}")).map_err(|e| e.to_string())?;
                std::fs::rename(&tmp, format!("{dir}/pid-{rank}")).map_err(|e| e.to_string())?;
            }
            "ignore-term" => {
                // SAFETY: setting a signal's disposition to SIG_IGN.
                unsafe { libc::signal(libc::SIGTERM, libc::SIG_IGN) };
            }
            "sleep" => std::thread::sleep(SLEEP),
            "exit" => std::process::exit(arg.parse().map_err(|_| "exit:<code>")?),
            "kill" => {
                // SAFETY: raising a signal in this process.
                unsafe { libc::raise(libc::SIGKILL) };
            }
            other => return Err(format!("unknown step {other}")),
        }
        Ok(())
    }

    /// What `nemesis-run` promises every rank (environment and pre-put keys).
    fn check_env(&mut self) -> Result<(), String> {
        let rank: u32 = env_num("PMI_RANK")?;
        let size: u32 = env_num("PMI_SIZE")?;
        let var = |k: &str| std::env::var(k).map_err(|_| format!("{k} is not set"));
        if var(contract::ENV_LAUNCHER)? != "nemesis-run" {
            return Err("NEMESIS_LAUNCHER is not nemesis-run".into());
        }
        let node = var(contract::ENV_NODE)?;
        if node.is_empty() || contract::sanitize_node_id(&node) != node {
            return Err(format!("NEMESIS_NODE={node:?} is not a clean token"));
        }
        if env_num::<u32>("MPI_LOCALRANKID")? != rank || env_num::<u32>("MPI_LOCALNRANKS")? != size {
            return Err("MPI_LOCALRANKID / MPI_LOCALNRANKS do not match one node".into());
        }
        if let Ok(want) = std::env::var("NT_EXPECT_WAIT")
            && var(contract::ENV_WAIT)? != want
        {
            return Err(format!("NEMESIS_WAIT is not {want}"));
        }
        let pmi = self.pmi()?;
        if (pmi.session().rank(), pmi.session().size()) != (rank, size) {
            return Err("the PMI client disagrees with the environment".into());
        }
        if pmi.maxes() != (64, 1024) {
            return Err(format!("maxes {:?}", pmi.maxes()));
        }
        let handle = pmi.get(&segment_key(&node)).map_err(|e| e.to_string())?.ok_or("no segment key in the KVS")?;
        let fd: u32 = handle.strip_prefix("fd:").and_then(|n| n.parse().ok()).ok_or(format!("handle {handle}"))?;
        let target = std::fs::read_link(format!("/proc/self/fd/{fd}")).map_err(|e| format!("fd {fd}: {e}"))?;
        if !target.to_string_lossy().starts_with("/memfd:nemesis-segment") {
            return Err(format!("fd {fd} is {target:?}, not the segment's memfd"));
        }
        let mapping = pmi.get("PMI_process_mapping").map_err(|e| e.to_string())?;
        if mapping.as_deref() != Some(format!("(vector,(0,1,{size}))").as_str()) {
            return Err(format!("PMI_process_mapping {mapping:?}"));
        }
        Ok(())
    }

    /// Every rank puts a key, barrier, reads every other rank's; a missing key is `None`.
    fn exchange(&mut self) -> Result<(), String> {
        let pmi = self.pmi()?;
        let (rank, size) = (pmi.session().rank(), pmi.session().size());
        pmi.put(&format!("nt-key-{rank}"), &format!("value-of-{rank}")).map_err(|e| e.to_string())?;
        pmi.barrier().map_err(|e| e.to_string())?;
        for r in 0..size {
            let v = pmi.get(&format!("nt-key-{r}")).map_err(|e| e.to_string())?;
            if v.as_deref() != Some(format!("value-of-{r}").as_str()) {
                return Err(format!("rank {r}'s key read as {v:?}"));
            }
        }
        if let Some(v) = pmi.get("nt-no-such-key").map_err(|e| e.to_string())? {
            return Err(format!("a missing key read as {v:?}"));
        }
        // Nobody finalizes before everyone has read.
        pmi.barrier().map_err(|e| e.to_string())?;
        println!("exchange-ok {rank}");
        Ok(())
    }
}

/// Talks to the PMI server by hand: unknown commands and an overlong line get error replies,
/// the server stays usable after the first, and hangs up after the second.
fn junk() -> Result<(), String> {
    use std::io::{BufRead, BufReader, Write};
    let fd: RawFd = env_num("PMI_FD")?;
    // SAFETY: the launcher passed this descriptor to this process; nothing else here uses it.
    let sock = std::fs::File::from(unsafe { OwnedFd::from_raw_fd(fd) });
    let mut w = sock.try_clone().map_err(|e| e.to_string())?;
    let mut r = BufReader::new(sock);
    let mut ask = |line: &[u8]| -> Result<String, String> {
        w.write_all(line).map_err(|e| e.to_string())?;
        let mut reply = String::new();
        r.read_line(&mut reply).map_err(|e| e.to_string())?;
        Ok(reply)
    };
    let expect =
        |got: String, want: &str| if got == want { Ok(()) } else { Err(format!("got {got:?}, want {want:?}")) };
    expect(ask(b"cmd=bogus x=1\n")?, "cmd=error rc=-1 msg=unknown_command_bogus\n")?;
    expect(ask(b"no command here\n")?, "cmd=error rc=-1 msg=expected_cmd\n")?;
    expect(
        ask(b"cmd=init pmi_version=1 pmi_subversion=1\n")?,
        "cmd=response_to_init pmi_version=1 pmi_subversion=1 rc=0\n",
    )?;
    expect(ask(&[b'a'; 5000])?, "cmd=error rc=-1 msg=line_too_long\n")?;
    let mut rest = String::new();
    r.read_line(&mut rest).map_err(|e| e.to_string())?;
    expect(rest, "")?; // end of file: the server hung up
    println!("junk-ok");
    Ok(())
}

// ---------------------------------------------------------------------------------------------
// The launcher side.

/// A scratch directory, removed on drop.
struct TempDir(PathBuf);

impl TempDir {
    fn new() -> TempDir {
        static N: AtomicU32 = AtomicU32::new(0);
        let p = std::env::temp_dir().join(format!(
            "nemesis-launcher-{}-{}",
            std::process::id(),
            N.fetch_add(1, Ordering::Relaxed)
        ));
        std::fs::create_dir_all(&p).unwrap();
        TempDir(p)
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// Nemesis's entries of `/dev/shm` (its named segments: `nemesis-…`); other programs of the
/// machine may come and go meanwhile.
fn shm_entries() -> BTreeSet<String> {
    std::fs::read_dir("/dev/shm")
        .map(|d| {
            d.filter_map(|e| e.ok())
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .filter(|n| n.starts_with("nemesis"))
                .collect()
        })
        .unwrap_or_default()
}

/// Fails if `/dev/shm` holds an entry that was not in `before` (and stays).
fn assert_shm_clean(before: &BTreeSet<String>) {
    let new: BTreeSet<String> = shm_entries().difference(before).cloned().collect();
    if new.is_empty() {
        return;
    }
    std::thread::sleep(Duration::from_millis(300));
    let left: Vec<&String> = new.iter().filter(|n| Path::new("/dev/shm").join(n).exists()).collect();
    assert!(left.is_empty(), "left in /dev/shm: {left:?}");
}

/// A launcher command whose ranks are this test binary carrying out `plan`.
fn plan_cmd(launcher_args: &[&str], plan: &[(&str, &str)], dir: &TempDir) -> Command {
    let mut c = Command::new(LAUNCHER);
    c.args(launcher_args).arg("--").args(harness::me_as_rank());
    for (k, v) in plan {
        c.env(if k.is_empty() { "NT_PLAN".to_owned() } else { format!("NT_PLAN_{k}") }, v);
    }
    c.env("NT_DIR", &dir.0);
    c
}

/// A launcher command whose ranks run `sh -c script`.
fn sh_cmd(launcher_args: &[&str], script: &str) -> Command {
    let mut c = Command::new(LAUNCHER);
    c.args(launcher_args).args(["--", "sh", "-c", script]);
    c
}

struct Ran {
    status: ExitStatus,
    stdout: String,
    stderr: String,
}

impl Ran {
    fn code(&self) -> Option<i32> {
        self.status.code()
    }
    fn lines(&self) -> Vec<&str> {
        self.stdout.lines().collect()
    }
}

/// A running launcher, its output collected by two threads.
struct Running {
    child: std::process::Child,
    out: std::sync::mpsc::Receiver<String>,
    err: std::sync::mpsc::Receiver<String>,
    shm_before: BTreeSet<String>,
}

fn start(mut cmd: Command) -> Running {
    let shm_before = shm_entries();
    let mut child = cmd.stdin(Stdio::null()).stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().unwrap();
    let collect = |mut r: Box<dyn Read + Send>| {
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let mut s = String::new();
            let _ = r.read_to_string(&mut s);
            let _ = tx.send(s);
        });
        rx
    };
    let out = collect(Box::new(child.stdout.take().unwrap()));
    let err = collect(Box::new(child.stderr.take().unwrap()));
    Running { child, out, err, shm_before }
}

impl Running {
    fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Waits for the launcher to exit (at most `BOUND`, else kills it and fails).
    fn wait(&mut self) -> ExitStatus {
        let t = Instant::now();
        loop {
            if let Some(s) = self.child.try_wait().unwrap() {
                return s;
            }
            if t.elapsed() > BOUND {
                let _ = self.child.kill();
                let _ = self.child.wait();
                let err = self.err.recv_timeout(Duration::from_secs(1)).unwrap_or_default();
                panic!("the launcher did not end within {BOUND:?}; stderr:\n{err}");
            }
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    /// Waits for the launcher, collects its output (a rank still holding it open after `BOUND`
    /// fails the test) and checks `/dev/shm`.
    fn finish(mut self) -> Ran {
        let status = self.wait();
        let t = Instant::now();
        let take = |rx: &std::sync::mpsc::Receiver<String>, what: &str| {
            rx.recv_timeout(BOUND.saturating_sub(t.elapsed()))
                .unwrap_or_else(|_| panic!("the launcher's {what} is still open {BOUND:?} after it exited"))
        };
        let stdout = take(&self.out, "stdout");
        let stderr = take(&self.err, "stderr");
        assert_shm_clean(&self.shm_before);
        Ran { status, stdout, stderr }
    }
}

fn run(cmd: Command) -> Ran {
    start(cmd).finish()
}

/// A rank's pid and start time, from its pid file (waits for it).
fn pidfile(dir: &TempDir, rank: u32) -> (u32, u64) {
    let path = dir.0.join(format!("pid-{rank}"));
    let t = Instant::now();
    loop {
        if let Ok(s) = std::fs::read_to_string(&path) {
            let mut it = s.split_whitespace().map(|w| w.parse::<u64>().unwrap());
            return (it.next().unwrap() as u32, it.next().unwrap());
        }
        assert!(t.elapsed() < BOUND, "rank {rank} never wrote its pid file");
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// True if process `pid` started at `start` no longer runs (gone, a zombie, or the pid reused).
fn is_dead(pid: u32, start: u64) -> bool {
    let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
        return true;
    };
    let rest = &stat[stat.rfind(')').unwrap() + 1..];
    let fields: Vec<&str> = rest.split_whitespace().collect();
    fields[0] == "Z" || fields[19].parse::<u64>().ok() != Some(start)
}

fn assert_dead_soon(procs: &[(u32, u64)]) {
    let t = Instant::now();
    while !procs.iter().all(|&(p, s)| is_dead(p, s)) {
        assert!(t.elapsed() < BOUND, "ranks still running: {procs:?}");
        std::thread::sleep(Duration::from_millis(10));
    }
}

// ---------------------------------------------------------------------------------------------
// Tests.

fn pmi_conversation_among_eight_ranks() {
    let dir = TempDir::new();
    let r = run({
        let mut c = plan_cmd(&["-n", "8", "--wait", "block"], &[("", "pmi,check-env,exchange,finalize")], &dir);
        c.env("NT_EXPECT_WAIT", "block");
        c
    });
    assert_eq!(r.code(), Some(0), "stdout:\n{}\nstderr:\n{}", r.stdout, r.stderr);
    let ok: BTreeSet<&str> = r.lines().into_iter().filter(|l| l.starts_with("exchange-ok")).collect();
    assert_eq!(ok.len(), 8, "stdout:\n{}", r.stdout);
}

fn abort_ends_the_job_with_its_code() {
    let dir = TempDir::new();
    let r = run(plan_cmd(&["-n", "3"], &[("", "pmi,barrier,sleep"), ("1", "pmi,abort:7")], &dir));
    assert_eq!(r.code(), Some(7), "stderr:\n{}", r.stderr);
    assert!(
        r.stderr.contains("rank 1 (pid") && r.stderr.contains("abort") && r.stderr.contains("it_broke"),
        "{}",
        r.stderr
    );
}

fn any_program_runs_hostname() {
    let host = contract::hostname().unwrap();
    let r = run({
        let mut c = Command::new(LAUNCHER);
        c.args(["-n", "2", "--", "hostname"]);
        c
    });
    assert_eq!(r.code(), Some(0), "{}", r.stderr);
    assert_eq!(r.lines(), [host.as_str(), host.as_str()]);
}

fn exit_status_is_zero_or_the_first_failure() {
    assert_eq!(run(sh_cmd(&["-n", "3"], "exit 0")).code(), Some(0));
    let r = run(sh_cmd(&["-n", "3"], "exit $(( PMI_RANK == 2 ? 5 : 0 ))"));
    assert_eq!(r.code(), Some(5));
    assert!(
        r.stderr.contains("nemesis-run: rank 2 (pid ") && r.stderr.contains(") exited with code 5"),
        "{}",
        r.stderr
    );
    let r = run(sh_cmd(&["-n", "2"], "[ $PMI_RANK = 1 ] && kill -9 $$; exit 0"));
    assert_eq!(r.code(), Some(137));
    assert!(r.stderr.contains("rank 1 (pid ") && r.stderr.contains(") killed by signal 9"), "{}", r.stderr);
    assert_eq!(run(sh_cmd(&["-n", "1"], "kill -TERM $$")).code(), Some(143));

    // Two failures in a known order (rank 2 waits for rank 1's mark): the first one counts.
    let dir = TempDir::new();
    let plan = [("0", "exit:0"), ("1", "pmi,barrier,exit:4"), ("2", "pmi,attach,barrier,wait-gone:1,exit:6")];
    let r = run(plan_cmd(&["-n", "3", "--keep-going"], &plan, &dir));
    assert_eq!(r.code(), Some(4), "{}", r.stderr);
    assert!(r.stderr.contains("exited with code 4") && r.stderr.contains("exited with code 6"), "{}", r.stderr);
    let r = run(plan_cmd(&["-n", "3"], &plan, &dir));
    assert_eq!(r.code(), Some(4), "{}", r.stderr);
    assert!(!r.stderr.contains("code 6"), "rank 2 was torn down, not a failure: {}", r.stderr);
}

fn a_killed_rank_takes_the_job_down() {
    let dir = TempDir::new();
    // Rank 3 ignores SIGTERM: it needs the SIGKILL that follows the grace period.
    let plan = [
        ("", "pidfile,pmi,barrier,sleep"),
        ("2", "pidfile,pmi,barrier,kill"),
        ("3", "ignore-term,pidfile,pmi,barrier,sleep"),
    ];
    let running = start(plan_cmd(&["-n", "4"], &plan, &dir));
    let procs: Vec<(u32, u64)> = (0..4).map(|r| pidfile(&dir, r)).collect();
    let r = running.finish();
    assert_eq!(r.code(), Some(137), "{}", r.stderr);
    let line = format!("nemesis-run: rank 2 (pid {}) killed by signal 9", procs[2].0);
    assert_eq!(r.stderr.lines().filter(|l| l.starts_with("nemesis-run:")).collect::<Vec<_>>(), [line.as_str()]);
    assert_dead_soon(&procs);
}

fn keep_going_lets_the_others_finish() {
    let dir = TempDir::new();
    let plan = [("0", "pmi,attach,barrier,wait-gone:1,print:rank-0-saw-rank-1-gone"), ("1", "pmi,barrier,exit:3")];
    let r = run(plan_cmd(&["-n", "2", "--keep-going"], &plan, &dir));
    assert_eq!(r.code(), Some(3), "{}", r.stderr);
    assert!(r.lines().contains(&"rank-0-saw-rank-1-gone"), "stdout:\n{}\nstderr:\n{}", r.stdout, r.stderr);
    assert!(r.stderr.contains("rank 1 (pid ") && r.stderr.contains("exited with code 3"), "{}", r.stderr);
}

fn the_segment_marks_a_killed_rank_gone() {
    let dir = TempDir::new();
    // Rank 1 attaches the inherited segment, sees rank 0 alive (it cannot die before the barrier),
    // then waits for the launcher's mark after rank 0 kills itself.
    let plan =
        [("0", "pmi,barrier,kill"), ("1", "pmi,attach,alive:0,barrier,wait-gone:0,print:rank-1-saw-rank-0-gone")];
    let r = run(plan_cmd(&["-n", "2", "--keep-going"], &plan, &dir));
    assert_eq!(r.code(), Some(137), "{}", r.stderr);
    assert!(r.lines().contains(&"rank-1-saw-rank-0-gone"), "stdout:\n{}\nstderr:\n{}", r.stdout, r.stderr);
}

fn a_barrier_does_not_wait_for_a_rank_that_left() {
    let dir = TempDir::new();
    // Rank 1 never speaks PMI and exits 0: not a failure, and the barrier goes on without it.
    let plan = [("0", "pmi,barrier,print:barrier-passed,finalize"), ("1", "exit:0")];
    let r = run(plan_cmd(&["-n", "2"], &plan, &dir));
    assert_eq!(r.code(), Some(0), "{}", r.stderr);
    assert!(r.lines().contains(&"barrier-passed"), "{}", r.stdout);
}

fn junk_on_the_pmi_socket_gets_errors_and_stalls_nobody() {
    let dir = TempDir::new();
    // Rank 1's connection is closed after its overlong line: rank 0's barrier goes on without it.
    let plan = [("0", "pmi,barrier,print:rank-0-passed,finalize"), ("1", "junk")];
    let r = run(plan_cmd(&["-n", "2"], &plan, &dir));
    assert_eq!(r.code(), Some(0), "stdout:\n{}\nstderr:\n{}", r.stdout, r.stderr);
    assert!(r.lines().contains(&"junk-ok") && r.lines().contains(&"rank-0-passed"), "{}", r.stdout);
}

fn sigint_and_sigterm_end_the_job() {
    for (sig, name) in [(libc::SIGINT, "SIGINT"), (libc::SIGTERM, "SIGTERM")] {
        let dir = TempDir::new();
        let running = start(plan_cmd(&["-n", "2"], &[("", "pidfile,sleep")], &dir));
        let procs: Vec<(u32, u64)> = (0..2).map(|r| pidfile(&dir, r)).collect();
        // SAFETY: signalling the launcher we started.
        unsafe { libc::kill(running.pid() as libc::pid_t, sig) };
        let r = running.finish();
        assert_eq!(r.code(), Some(128 + sig), "{}", r.stderr);
        assert!(r.stderr.contains(&format!("{name} received")), "{}", r.stderr);
        assert_dead_soon(&procs);
    }
}

fn sigkill_to_the_launcher_kills_the_ranks() {
    // Orphaned ranks come to this process (not to an init that may never reap them), which
    // reaps them below.
    // SAFETY: prctl with integer arguments.
    unsafe { libc::prctl(libc::PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) };
    let dir = TempDir::new();
    let running = start(plan_cmd(&["-n", "3"], &[("", "pidfile,sleep")], &dir));
    let procs: Vec<(u32, u64)> = (0..3).map(|r| pidfile(&dir, r)).collect();
    // SAFETY: signalling the launcher we started.
    unsafe { libc::kill(running.pid() as libc::pid_t, libc::SIGKILL) };
    let mut running = running;
    assert_eq!(running.wait().signal(), Some(libc::SIGKILL));
    // Before collecting the output: the ranks hold the launcher's stdout until they die.
    assert_dead_soon(&procs);
    for &(pid, _) in &procs {
        // SAFETY: reaping a dead child if it is ours (ECHILD otherwise, ignored).
        unsafe { libc::waitpid(pid as libc::pid_t, std::ptr::null_mut(), libc::WNOHANG) };
    }
    running.finish();
}

fn tag_output_prefixes_whole_lines() {
    let long = "x".repeat(3000);
    let script = format!(
        "i=0; while [ $i -lt 200 ]; do echo \"$PMI_RANK-$i-{long}\"; echo \"e$PMI_RANK-$i\" >&2; i=$((i+1)); done; printf 'tail-%s' $PMI_RANK"
    );
    let r = run(sh_cmd(&["-n", "3", "--tag-output"], &script));
    assert_eq!(r.code(), Some(0), "{}", r.stderr);
    let mut count = [0usize; 3];
    for line in r.lines() {
        let (prefix, body) = line.split_once("] ").unwrap_or_else(|| panic!("untagged line {line:?}"));
        let rank: usize = prefix.strip_prefix('[').unwrap().parse().unwrap();
        if body == format!("tail-{rank}") {
            count[rank] += 1;
            continue;
        }
        let mut f = body.splitn(3, '-');
        assert_eq!(f.next(), Some(rank.to_string().as_str()), "line of another rank: {line:.60}");
        f.next().unwrap().parse::<u32>().unwrap();
        assert_eq!(f.next(), Some(long.as_str()), "cut or mixed line: {line:.60}");
        count[rank] += 1;
    }
    assert_eq!(count, [201; 3]);
    for rank in 0..3 {
        assert_eq!(r.stderr.lines().filter(|l| l.starts_with(&format!("[{rank}] e{rank}-"))).count(), 200);
    }
}

/// The CPUs this process may use, as `/proc/self/status` lists them.
fn own_cpus() -> (String, Vec<u32>) {
    let status = std::fs::read_to_string("/proc/self/status").unwrap();
    let list = status.lines().find_map(|l| l.strip_prefix("Cpus_allowed_list:")).unwrap().trim().to_owned();
    let mut cpus = Vec::new();
    for part in list.split(',') {
        match part.split_once('-') {
            Some((a, b)) => cpus.extend(a.parse::<u32>().unwrap()..=b.parse().unwrap()),
            None => cpus.push(part.parse().unwrap()),
        }
    }
    (list, cpus)
}

fn bind_core_pins_rank_i_to_cpu_i_mod_n() {
    let (list, cpus) = own_cpus();
    let script = "grep Cpus_allowed_list /proc/self/status";
    let r = run(sh_cmd(&["-n", "3", "--bind", "core", "--tag-output"], script));
    assert_eq!(r.code(), Some(0), "{}", r.stderr);
    let mut lines = r.lines();
    lines.sort();
    let want: Vec<String> =
        (0..3).map(|i| format!("[{i}] Cpus_allowed_list:\t{}", cpus[i % cpus.len()])).collect::<Vec<_>>();
    assert_eq!(lines, want);
    let r = run(sh_cmd(&["-n", "2", "--bind", "none"], script));
    assert_eq!(r.lines(), [format!("Cpus_allowed_list:\t{list}"), format!("Cpus_allowed_list:\t{list}")]);
}

fn bad_command_lines_are_clear_errors() {
    let launch = |args: &[&str]| {
        let mut c = Command::new(LAUNCHER);
        c.args(args);
        run(c)
    };
    let r = launch(&["-n", "0", "--", "true"]);
    assert_eq!(r.code(), Some(2));
    assert!(r.stderr.contains("'0'"), "{}", r.stderr);
    let r = launch(&["-n", "2"]);
    assert_eq!(r.code(), Some(2));
    assert!(r.stderr.contains("PROGRAM"), "{}", r.stderr);
    let r = launch(&["--frobnicate", "-n", "2", "--", "true"]);
    assert_eq!(r.code(), Some(2));
    assert!(r.stderr.contains("--frobnicate"), "{}", r.stderr);
    let r = launch(&["-n", "2", "--", "nemesis-no-such-program"]);
    assert_eq!(r.code(), Some(127));
    assert!(r.stderr.contains("nemesis-no-such-program") && r.stderr.contains("No such file"), "{}", r.stderr);
    let dir = TempDir::new();
    let not_exec = dir.0.join("not-executable");
    std::fs::write(&not_exec, "echo hi\n").unwrap();
    std::fs::set_permissions(&not_exec, std::fs::Permissions::from_mode(0o644)).unwrap();
    let r = launch(&["-n", "1", "--", not_exec.to_str().unwrap()]);
    assert_eq!(r.code(), Some(126), "{}", r.stderr);
    // The program's own options are its own, with or without `--`.
    let r = launch(&["-n", "1", "sh", "-c", "echo $0", "--frobnicate"]);
    assert_eq!((r.code(), r.stdout.trim()), (Some(0), "--frobnicate"));
}

fn the_library_reports_each_rank() {
    let shm_before = shm_entries();
    let outcome = Job::new("sh", ["-c", "[ \"$NT_X\" = y ] || exit 9; [ $PMI_RANK = 1 ] && exit 3; exec sleep 60"])
        .ranks(3)
        .env("NT_X", "y")
        .kill_grace(Duration::from_millis(100))
        .run()
        .unwrap();
    assert_eq!(*outcome.ending(), Ending::RankFailed { rank: 1 });
    assert_eq!(outcome.exit_code(), 3);
    let codes: Vec<(i32, bool)> = outcome.ranks().iter().map(|r| (r.code(), r.stopped_by_launcher)).collect();
    assert_eq!(codes, [(128 + libc::SIGTERM, true), (3, false), (128 + libc::SIGTERM, true)]);
    assert_shm_clean(&shm_before);
    let e = Job::new("true", [""; 0]).ranks(0).run().unwrap_err();
    assert!(matches!(e, nemesis::Error::Config(_)), "{e}");
}

fn hydra_starts_ranks_that_speak_our_pmi_client() {
    let Some(hydra) = ["mpiexec.hydra", "/usr/bin/mpiexec.hydra"]
        .into_iter()
        .find(|p| Command::new(p).arg("--version").stdout(Stdio::null()).stderr(Stdio::null()).status().is_ok())
    else {
        assert!(!ci(), "mpiexec.hydra is missing (apt-get install mpich) and CI=true");
        eprintln!("SKIPPED: mpiexec.hydra not found (apt-get install mpich)");
        return;
    };
    let mut c = Command::new(hydra);
    c.args(["-n", "4"]).args(harness::me_as_rank());
    c.env("NT_PLAN", "pmi,exchange,finalize");
    let r = run(c);
    assert_eq!(r.code(), Some(0), "stdout:\n{}\nstderr:\n{}", r.stdout, r.stderr);
    let ok: BTreeSet<&str> = r.lines().into_iter().filter(|l| l.starts_with("exchange-ok")).collect();
    assert_eq!(ok.len(), 4, "stdout:\n{}", r.stdout);
}
