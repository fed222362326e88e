//! Recovery of failed groups by `nemesis-run --ft` (HydEE, issue 13), with real processes killed
//! from outside (SIGKILL): `examples/ft_stencil.rs` on 8 ranks in 4 groups (2 cores, `--wait
//! yield`), and after each kill the final checksum equals the failure-free one (computed here, on
//! one thread, with the same arithmetic), only the failed group's ranks were started again (every
//! incarnation of a rank leaves a `started-<rank>-<pid>` file; the launcher's line names the
//! group's ranks), and neither the checkpoint directory nor `/dev/shm` keeps a file (two
//! checkpoint generations are retained during the job).
//!
//! Scenarios: one rank killed mid-run (after its group's second checkpoint); one killed before
//! its group's first checkpoint; two ranks of different groups killed together; a rank killed
//! while another group recovers (a second round over both groups); five failures in one run; a
//! damaged checkpoint file (the group falls back to the previous generation, and the launcher says
//! so); every retained generation damaged (the job ends with a message); a group that
//! fails more than `--ft-max-restarts` times ends the job with its message; distributed recovery
//! (a coordinator per group). With the cargo feature `failpoints`: a rank killed while it sends a
//! rendezvous message to another group, and while it receives one (64 KiB halos, deaths forced at
//! named points of the transfer in the victim's first incarnation); killed in the middle of an
//! eager message of several cells (16 KiB halos in 4 KiB cells); over two nodes, killed with half
//! a rendezvous message's data or half an eager message frame on the TCP connection.
//! Over `--nodes 2` (the TCP netmod between the two halves): a rank
//! killed mid-run whose neighbour is on the other node, a group spanning both nodes, a rank
//! killed during another group's recovery; the netmods' lines show links to the new
//! incarnations coming up.
//!
//! Every kill lands where the test chose, never against a clock the job may beat: the victim
//! holds at the start of an iteration of one of its incarnations (`FT_TEST_HOLD`; e.g. right
//! after its second checkpoint), serving its endpoint but computing nothing, until the test
//! SIGKILLs it; the failpoints kill at the `n`-th hit of a named point.
//!
//! The test binary is itself the rank program (`rank_main`, role in `NEMESIS_TEST_ROLE`).
//! `FT_TEST_LOG` sets the job's `NEMESIS_LOG` (the launcher's and the ranks'; default
//! `nemesis::launch=info`), `FT_TEST_LIMIT` the seconds a job may take (300).

mod common;

use std::collections::BTreeMap;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use nemesis::Endpoint;

#[path = "../examples/ft_stencil.rs"]
#[allow(dead_code)]
mod ft_stencil;

/// Ranks, groups, cells per rank, iterations, checkpoint interval. The kills wait for no clock:
/// a job need only be long enough to hold its victims (at most ten checkpoints in).
const RANKS: u32 = 8;
const GROUPS: u32 = 4;
const CELLS: usize = 64;
const ITERATIONS: u64 = 600;
const INTERVAL: u64 = 40;

fn main() {
    common::harness::main(
        rank_main,
        tests![
            the_reference_checksum_is_the_examples,
            one_rank_killed_mid_run,
            one_rank_killed_before_its_first_checkpoint,
            one_rank_killed_before_its_first_checkpoint_over_two_nodes,
            two_ranks_of_different_groups_killed_together,
            two_ranks_of_different_groups_killed_together_over_two_nodes,
            a_rank_killed_during_another_groups_recovery,
            five_failures_in_one_run,
            five_failures_in_one_run_over_two_nodes,
            early_sequential_failures,
            early_sequential_failures_with_nonblocking_receives,
            kills_land_where_the_test_chose_however_late_it_is,
            failures_faster_than_recoveries,
            distributed_recovery,
            too_many_restarts_end_the_job,
            a_damaged_checkpoint_falls_back_to_the_previous_generation,
            damaged_generations_everywhere_end_the_job,
            #[cfg(feature = "failpoints")]
            a_rank_killed_while_sending_a_rendezvous_message,
            #[cfg(feature = "failpoints")]
            a_rank_killed_while_receiving_a_rendezvous_message,
            #[cfg(feature = "failpoints")]
            a_rank_killed_in_the_middle_of_a_multi_cell_message,
            #[cfg(feature = "failpoints")]
            a_rank_killed_while_sending_a_rendezvous_message_over_two_nodes,
            #[cfg(feature = "failpoints")]
            a_rank_killed_in_the_middle_of_a_message_frame_over_two_nodes,
            one_rank_killed_mid_run_over_two_nodes,
            a_group_spanning_the_nodes_restarts,
            a_rank_killed_during_another_groups_recovery_over_two_nodes,
        ],
    );
}

/// The rank program, by `NEMESIS_TEST_ROLE`.
fn rank_main() {
    match std::env::var("NEMESIS_TEST_ROLE").unwrap_or_default().as_str() {
        "stencil" => stencil(),
        other => panic!("unknown role {other:?}"),
    }
}

/// A rank: marks its start in the test's directory, runs the stencil, rank 0 prints the checksum.
fn stencil() {
    let dir = PathBuf::from(std::env::var("FT_TEST_DIR").unwrap());
    let args: Vec<u64> =
        std::env::var("FT_TEST_ARGS").unwrap().split_whitespace().map(|a| a.parse().unwrap()).collect();
    // `NEMESIS_LOG`: e.g. the netmod's lines showing which links to restarted incarnations came up.
    nemesis::log::init();
    // Read before `Endpoint::init`, which takes it out of the environment of a rank running one
    // thread (as this one does: `common/harness.rs`).
    #[cfg(feature = "failpoints")]
    let first_incarnation = std::env::var_os("NEMESIS_FT_RESTART").is_none();
    // A restart that cannot recover reports why to the launcher before `init` returns: end with
    // one whole line, not a panic message written piece by piece into the launcher's lines.
    let mut ep = match Endpoint::init() {
        Ok(ep) => ep,
        Err(e) => {
            nemesis::say!("rank cannot start: {e}");
            std::process::exit(1);
        }
    };
    #[cfg(feature = "failpoints")]
    let mut failpoint = failpoint_of(&ep, first_incarnation);
    let halo: usize = std::env::var("FT_TEST_HALO").ok().and_then(|h| h.parse().ok()).unwrap_or(8);
    let restored = ep.restored_state().is_some();
    let me = ep.rank();
    // Incarnations of this rank before this one: their start files.
    let incarnation = std::fs::read_dir(&dir)
        .unwrap()
        .flatten()
        .filter(|e| e.file_name().to_string_lossy().starts_with(&format!("started-{me}-")))
        .count() as u32;
    std::fs::write(dir.join(format!("started-{me}-{}", std::process::id())), if restored { "restored" } else { "" })
        .unwrap();
    let holds: Vec<u64> = std::env::var("FT_TEST_HOLD")
        .unwrap_or_default()
        .split(',')
        .filter(|s| !s.is_empty())
        .filter_map(|h| {
            let (who, it) = h.split_once(':').unwrap();
            (who == format!("{me}@{incarnation}")).then(|| it.parse().unwrap())
        })
        .collect();
    // At a hold: says so (`held-<rank>-<incarnation>-<iteration>`, holding the pid) and waits to
    // be killed, serving its endpoint (recovery rounds, replays) but computing nothing.
    let mut at = |ep: &mut Endpoint, it: u64| {
        #[cfg(feature = "failpoints")]
        if failpoint.as_ref().is_some_and(|f| f.2 <= it) {
            let (point, nth, _) = failpoint.take().unwrap();
            nemesis_shm::failpoint::arm(&point, nth, nemesis_shm::failpoint::Action::Kill, &dir.join("failpoints"));
        }
        if !holds.contains(&it) {
            return;
        }
        let marker = dir.join(format!("held-{me}-{incarnation}-{it}"));
        std::fs::write(marker.with_extension("tmp"), std::process::id().to_string()).unwrap();
        std::fs::rename(marker.with_extension("tmp"), &marker).unwrap();
        loop {
            let _ = ep.progress();
            std::thread::sleep(Duration::from_millis(1));
        }
    };
    let nonblocking = args.get(3) == Some(&1);
    let r = match ft_stencil::run_observed(&mut ep, args[0] as usize, args[1], args[2], halo, nonblocking, &mut at) {
        Ok(r) => r,
        Err(e) => {
            println!("RESULT error rank {}: {e}", ep.rank());
            std::process::exit(1);
        }
    };
    if ep.rank() == 0 {
        println!("RESULT checksum {:016x}", r.checksum);
    }
    ep.finalize().unwrap();
}

/// This rank's `FT_TEST_FP` (`<rank>:<point>:<nth>:<iteration>`) in its first incarnation:
/// `(point, nth, iteration)`. The point is armed at the start of that iteration; its `nth` hit
/// from there records `hit <point> <pid>` in the test's directory and SIGKILLs the rank.
#[cfg(feature = "failpoints")]
fn failpoint_of(ep: &Endpoint, first_incarnation: bool) -> Option<(String, u64, u64)> {
    let spec = std::env::var("FT_TEST_FP").ok()?;
    let v: Vec<&str> = spec.split(':').collect();
    (v[0].parse::<u32>().unwrap() == ep.rank() && first_incarnation)
        .then(|| (v[1].to_owned(), v[2].parse().unwrap(), v[3].parse().unwrap()))
}

/// FNV-1a, as the example computes it.
fn fnv(mut h: u64, bytes: &[u8]) -> u64 {
    for &b in bytes {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x0100_0000_01b3);
    }
    h
}

/// The failure-free checksum of the example, on one thread: the same periodic field, the same
/// operations in the same order per cell, the same hash.
fn reference(ranks: u32, cells: usize, iterations: u64) -> u64 {
    let n = ranks as usize * cells;
    let mut u: Vec<f64> = (0..n).map(|g| ((g / cells * cells + g % cells) % 97) as f64).collect();
    let mut v = u.clone();
    for _ in 0..iterations {
        for i in 0..n {
            let (l, r) = (u[(i + n - 1) % n], u[(i + 1) % n]);
            v[i] = (l + 2.0 * u[i] + r) * 0.25;
        }
        std::mem::swap(&mut u, &mut v);
    }
    let basis = 0xcbf2_9ce4_8422_2325;
    let mut sum = 0;
    for r in 0..ranks as usize {
        let bytes: Vec<u8> = u[r * cells..(r + 1) * cells].iter().flat_map(|x| x.to_le_bytes()).collect();
        let mine = fnv(basis, &bytes);
        sum = if r == 0 { fnv(basis, &mine.to_le_bytes()) } else { fnv(sum, &mine.to_le_bytes()) };
    }
    sum
}

/// A job under way: the launcher, its output, the test's directory.
struct Job {
    child: Child,
    out: std::thread::JoinHandle<Vec<u8>>,
    /// The launcher's standard error so far (the ranks' too), read as it comes.
    err: std::sync::Arc<std::sync::Mutex<Vec<u8>>>,
    err_thread: std::thread::JoinHandle<()>,
    dir: PathBuf,
    ft_dir: PathBuf,
    start: Instant,
    /// `/dev/shm` before the job.
    shm_before: Vec<String>,
    ranks: u32,
    _serial: std::sync::MutexGuard<'static, ()>,
}

/// What a finished job left.
struct Done {
    ok: bool,
    stdout: String,
    stderr: String,
    /// Pids of each rank's incarnations, in no order.
    pids: BTreeMap<u32, Vec<u32>>,
    ft_dir: PathBuf,
    shm_before: Vec<String>,
    ranks: u32,
    /// The failpoints' record (`hit <point> <pid>` lines).
    #[cfg_attr(not(feature = "failpoints"), allow(dead_code))]
    hits: String,
}

/// Nemesis's entries of `/dev/shm` (its named segments: `nemesis-…`); other programs of the
/// machine may come and go meanwhile.
fn shm_names() -> Vec<String> {
    std::fs::read_dir("/dev/shm")
        .map(|d| {
            d.flatten()
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .filter(|n| n.starts_with("nemesis"))
                .collect()
        })
        .unwrap_or_default()
}

fn scratch(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("nemesis-ftr-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(d.join("ckpt")).unwrap();
    d
}

/// One job at a time (8 ranks each on 2 cores; the kills' timing depends on it), whatever the
/// harness's test threads.
static ONE_AT_A_TIME: std::sync::Mutex<()> = std::sync::Mutex::new(());

impl Job {
    /// A job whose ranks hold at `holds` (`(rank, incarnation, iteration)`: that incarnation of
    /// the rank, 0 the first, stops at the start of that iteration and waits to be killed).
    fn start(name: &str, extra: &[&str], iterations: u64, holds: &[(u32, u32, u64)]) -> Job {
        let holds = hold_spec(holds);
        Job::start_with(name, RANKS, GROUPS, extra, (iterations, INTERVAL), false, &[("FT_TEST_HOLD", &holds)])
    }

    /// A job of `ranks` ranks in `groups` groups, `iterations` with a checkpoint every
    /// `interval`; `nonblocking`: the stencil's halos by `irecv`/`isend`/`wait`
    /// (`ft_stencil::run_with`); `env`: more environment variables for the launcher and the ranks.
    fn start_with(
        name: &str,
        ranks: u32,
        groups: u32,
        extra: &[&str],
        (iterations, interval): (u64, u64),
        nonblocking: bool,
        env: &[(&str, &str)],
    ) -> Job {
        let serial = ONE_AT_A_TIME.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        let dir = scratch(name);
        let ft_dir = dir.join("ckpt");
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_nemesis-run"));
        cmd.args(["-n", &ranks.to_string(), "--wait", "yield"]);
        // A groups file of the test's, or `groups` groups of consecutive ranks.
        if !extra.contains(&"--ft") {
            cmd.args(["--ft-groups", &groups.to_string()]);
        }
        cmd.args(extra).arg("--");
        cmd.args(common::harness::me_as_rank());
        cmd.env("NEMESIS_TEST_ROLE", "stencil")
            .env("FT_TEST_DIR", &dir)
            .env("FT_TEST_ARGS", format!("{CELLS} {iterations} {interval} {}", u8::from(nonblocking)))
            .env("NEMESIS_FT_DIR", &ft_dir)
            .env(
                "NEMESIS_LOG",
                std::env::var("FT_TEST_LOG").unwrap_or_else(|_| "nemesis::launch=info,nemesis_netmod_tcp=info".into()),
            );
        cmd.envs(env.iter().copied());
        cmd.stdout(Stdio::piped()).stderr(Stdio::piped());
        let shm_before = shm_names();
        let mut child = cmd.spawn().unwrap();
        let mut o = child.stdout.take().unwrap();
        let mut e = child.stderr.take().unwrap();
        let out = std::thread::spawn(move || {
            let mut v = Vec::new();
            let _ = o.read_to_end(&mut v);
            v
        });
        let err = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
        let sink = err.clone();
        let err_thread = std::thread::spawn(move || {
            let mut buf = [0u8; 4096];
            while let Ok(n) = e.read(&mut buf) {
                if n == 0 {
                    break;
                }
                sink.lock().unwrap().extend_from_slice(&buf[..n]);
            }
        });
        Job { child, out, err, err_thread, dir, ft_dir, start: Instant::now(), shm_before, ranks, _serial: serial }
    }

    /// Incarnations started so far, per rank: `(pid, restored from a checkpoint)`.
    fn started(&self) -> BTreeMap<u32, Vec<(u32, bool)>> {
        let mut m: BTreeMap<u32, Vec<(u32, bool)>> = BTreeMap::new();
        for e in std::fs::read_dir(&self.dir).unwrap().flatten() {
            let name = e.file_name().to_string_lossy().into_owned();
            let Some(rest) = name.strip_prefix("started-") else { continue };
            let (r, p) = rest.split_once('-').unwrap();
            let restored = std::fs::read_to_string(e.path()).unwrap_or_default() == "restored";
            m.entry(r.parse().unwrap()).or_default().push((p.parse().unwrap(), restored));
        }
        m
    }

    /// The running process of `rank` (its newest incarnation that is alive).
    fn pid_of(&self, rank: u32) -> Option<u32> {
        self.started()
            .get(&rank)?
            .iter()
            .map(|p| p.0)
            .find(|&p| Path::new(&format!("/proc/{p}")).exists() && !zombie(p))
    }

    /// Checkpoint generations of `rank`'s files in the checkpoint directory.
    fn generations(&self, rank: u32) -> Vec<u64> {
        let mut g: Vec<u64> = std::fs::read_dir(&self.ft_dir)
            .unwrap()
            .flatten()
            .filter_map(|e| {
                let n = e.file_name().to_string_lossy().into_owned();
                let rest = n.strip_prefix("nemesis-ckpt-")?.strip_suffix(".nft")?;
                let mut parts = rest.rsplit('-');
                let gen_: u64 = parts.next()?.parse().ok()?;
                let r: u32 = parts.next()?.parse().ok()?;
                (r == rank).then_some(gen_)
            })
            .collect();
        g.sort_unstable();
        g
    }

    /// Recovery lines the launcher printed so far.
    fn recoveries(&self) -> usize {
        let e = self.err.lock().unwrap();
        String::from_utf8_lossy(&e)
            .lines()
            .filter(|l| l.starts_with("nemesis-run: rank ") && l.contains(" restarted from "))
            .count()
    }

    fn wait_until(&self, what: &str, mut f: impl FnMut(&Job) -> bool) {
        let limit = Duration::from_secs(240);
        let t = Instant::now();
        while !f(self) {
            if t.elapsed() > limit {
                let e = String::from_utf8_lossy(&self.err.lock().unwrap()).into_owned();
                panic!("timed out waiting for {what}; standard error so far:\n{e}");
            }
            std::thread::sleep(Duration::from_millis(5));
        }
    }

    /// The pid of `rank`'s incarnation `inc` if it holds at iteration `it` (its marker).
    fn held(&self, rank: u32, inc: u32, it: u64) -> Option<u32> {
        std::fs::read_to_string(self.dir.join(format!("held-{rank}-{inc}-{it}"))).ok()?.trim().parse().ok()
    }

    /// Waits for `rank`'s incarnation `inc` to hold at iteration `it`, then SIGKILLs it (from
    /// outside); its pid. It cannot have gone further: the kill lands where the test chose.
    fn kill_held(&self, (rank, inc, it): (u32, u32, u64)) -> u32 {
        self.wait_until(&format!("rank {rank} (incarnation {inc}) to hold at iteration {it}"), |j| {
            j.held(rank, inc, it).is_some()
        });
        let pid = self.held(rank, inc, it).unwrap();
        // SAFETY: a signal to a process of this job (a rank's pid from its own marker).
        unsafe { libc::kill(pid as libc::pid_t, libc::SIGKILL) };
        eprintln!("test: killed rank {rank} (pid {pid}) held at iteration {it} at {:?}", self.start.elapsed());
        pid
    }

    fn finish(mut self) -> Done {
        let limit = Duration::from_secs(std::env::var("FT_TEST_LIMIT").map_or(300, |s| s.parse().unwrap()));
        let status = loop {
            if let Some(st) = self.child.try_wait().unwrap() {
                break st;
            }
            if self.start.elapsed() > limit {
                // SAFETY: our own child.
                unsafe { libc::kill(self.child.id() as libc::pid_t, libc::SIGTERM) };
                break self.child.wait().unwrap();
            }
            std::thread::sleep(Duration::from_millis(20));
        };
        let pids = self.started().into_iter().map(|(r, v)| (r, v.into_iter().map(|p| p.0).collect())).collect();
        let stdout = String::from_utf8_lossy(&self.out.join().unwrap()).into_owned();
        let _ = self.err_thread.join();
        let stderr = String::from_utf8_lossy(&self.err.lock().unwrap()).into_owned();
        let shm_before = std::mem::take(&mut self.shm_before);
        let hits = std::fs::read_to_string(self.dir.join("failpoints")).unwrap_or_default();
        let done = Done {
            ok: status.success(),
            stdout,
            stderr,
            pids,
            ft_dir: self.ft_dir.clone(),
            shm_before,
            ranks: self.ranks,
            hits,
        };
        let _ = std::fs::remove_dir_all(&self.dir);
        done
    }
}

/// `FT_TEST_HOLD` for `holds`: `<rank>@<incarnation>:<iteration>,...`.
fn hold_spec(holds: &[(u32, u32, u64)]) -> String {
    holds.iter().map(|(r, i, it)| format!("{r}@{i}:{it}")).collect::<Vec<_>>().join(",")
}

fn zombie(pid: u32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .map(|s| s.rsplit(')').next().is_some_and(|t| t.trim_start().starts_with('Z')))
        .unwrap_or(true)
}

impl Done {
    fn show(&self) -> String {
        format!("stdout:\n{}\nstderr:\n{}\npids: {:?}", self.stdout, self.stderr, self.pids)
    }

    fn checksum(&self) -> Option<u64> {
        self.stdout.lines().find_map(|l| u64::from_str_radix(l.split("RESULT checksum ").nth(1)?.trim(), 16).ok())
    }

    /// The TCP netmod's lines saying a link between incarnations other than the first came up:
    /// `(the rank at the other end, its incarnation, the logging rank's own)`.
    fn restarted_links(&self) -> Vec<(u32, u32, u32)> {
        let field = |l: &str, k: &str| -> Option<u32> {
            l.split_whitespace().find_map(|w| w.strip_prefix(k)?.trim_end_matches(',').parse().ok())
        };
        self.stderr
            .lines()
            .filter(|l| l.contains("link up with a restarted incarnation"))
            .filter_map(|l| Some((field(l, "rank=")?, field(l, "incarnation=")?, field(l, "own=")?)))
            .collect()
    }

    /// Restarts per rank, from the launcher's log (`rank restarted rank=R pid=P`): an incarnation
    /// killed before it wrote its start file (a new round while it initialised) counts too.
    fn restarts_logged(&self) -> BTreeMap<u32, usize> {
        let mut m = BTreeMap::new();
        for l in self.stderr.lines().filter(|l| l.contains(" rank restarted rank=")) {
            let r = l.split(" rank restarted rank=").nth(1).and_then(|t| t.split(' ').next()?.parse().ok());
            *m.entry(r.unwrap()).or_default() += 1;
        }
        m
    }

    /// The launcher's recovery lines.
    fn lines(&self) -> Vec<&str> {
        self.stderr.lines().filter(|l| l.starts_with("nemesis-run: rank ") && l.contains(" restarted from ")).collect()
    }

    /// Checks the job ended well with the failure-free checksum, that exactly the ranks of
    /// `groups` were started again (`restarts` times each), and that nothing was left behind.
    fn check(&self, iterations: u64, restarted: &BTreeMap<u32, usize>) {
        assert!(self.ok, "{}", self.show());
        assert_eq!(self.checksum(), Some(reference(self.ranks, CELLS, iterations)), "{}", self.show());
        for r in 0..self.ranks {
            let n = self.pids.get(&r).map_or(0, Vec::len);
            assert_eq!(n, 1 + restarted.get(&r).copied().unwrap_or(0), "incarnations of rank {r}: {}", self.show());
        }
        self.nothing_left();
    }

    fn nothing_left(&self) {
        let left: Vec<String> = std::fs::read_dir(&self.ft_dir)
            .map(|d| d.flatten().map(|e| e.file_name().to_string_lossy().into_owned()).collect())
            .unwrap_or_default();
        assert!(left.iter().all(|n| n == "groups"), "left in the checkpoint directory: {left:?}");
        self.shm_clean();
    }

    /// Nothing of the job's in `/dev/shm`.
    fn shm_clean(&self) {
        // New names that stay (another job on this machine may come and go meanwhile).
        let new = |names: Vec<String>| -> Vec<String> {
            names.into_iter().filter(|n| n.starts_with("nemesis") && !self.shm_before.contains(n)).collect()
        };
        let left = new(shm_names());
        if !left.is_empty() {
            std::thread::sleep(Duration::from_secs(1));
            let still: Vec<String> = new(shm_names()).into_iter().filter(|n| left.contains(n)).collect();
            assert!(still.is_empty(), "left in /dev/shm: {still:?}");
        }
    }
}

/// Ranks of group `g` (4 groups of 2 consecutive ranks).
fn members(g: u32) -> [u32; 2] {
    [2 * g, 2 * g + 1]
}

fn restarted(groups: &[(u32, usize)]) -> BTreeMap<u32, usize> {
    let mut m = BTreeMap::new();
    for &(g, n) in groups {
        for r in members(g) {
            *m.entry(r).or_default() += n;
        }
    }
    m
}

fn the_reference_checksum_is_the_examples() {
    // One rank per block as the example lays it out; a run of the example without failures.
    let mut job = Job::start("reference", &[], 50, &[]);
    job.start = Instant::now();
    let d = job.finish();
    d.check(50, &BTreeMap::new());
}

fn one_rank_killed_mid_run() {
    // Rank 5 right after its second checkpoint.
    let hold = (5, 0, 2 * INTERVAL);
    let job = Job::start("mid", &[], ITERATIONS, &[hold]);
    job.kill_held(hold);
    let d = job.finish();
    d.check(ITERATIONS, &restarted(&[(2, 1)]));
    let lines = d.lines();
    assert_eq!(lines.len(), 1, "{}", d.show());
    assert!(
        lines[0].starts_with("nemesis-run: rank 5 died (signal 9); group 2 (ranks 4,5) restarted from checkpoint ")
    );
    let gen_: u64 = lines[0].split("checkpoint ").nth(1).unwrap().split(' ').next().unwrap().parse().unwrap();
    // Rank 5 had written generation 2; the group's newest durable one may still be 1.
    assert!(gen_ >= 1, "{}", lines[0]);
}

fn one_rank_killed_before_its_first_checkpoint() {
    killed_before_its_first_checkpoint("first", &[]);
}

/// The same over two nodes (rank 3 of group 1 on the first node, its neighbour rank 4 on the
/// second): the group restarts from the start of the program.
fn one_rank_killed_before_its_first_checkpoint_over_two_nodes() {
    killed_before_its_first_checkpoint("first2", &["--nodes", TWO_NODES]);
}

fn killed_before_its_first_checkpoint(name: &str, extra: &[&str]) {
    // Halfway to its first checkpoint; every rank has started (its neighbours' halos came).
    let hold = (3, 0, INTERVAL / 2);
    let job = Job::start(name, extra, ITERATIONS, &[hold]);
    job.kill_held(hold);
    assert_eq!(job.started().len(), RANKS as usize);
    assert!(job.generations(3).is_empty(), "a checkpoint of rank 3's before iteration {}", INTERVAL / 2);
    let d = job.finish();
    d.check(ITERATIONS, &restarted(&[(1, 1)]));
    let lines = d.lines();
    assert_eq!(lines.len(), 1, "{}", d.show());
    assert!(lines[0].contains("group 1 (ranks 2,3) restarted from checkpoint 0 "), "{}", lines[0]);
}

fn two_ranks_of_different_groups_killed_together() {
    killed_together("two", &[]);
}

/// The same over two nodes: rank 1 (group 0) on the first node, rank 6 (group 3) on the second.
fn two_ranks_of_different_groups_killed_together_over_two_nodes() {
    killed_together("two2", &["--nodes", TWO_NODES]);
}

fn killed_together(name: &str, extra: &[&str]) {
    // Both right after their first checkpoint (each can reach it while the other holds).
    let holds = [(1, 0, INTERVAL), (6, 0, INTERVAL)];
    let job = Job::start(name, extra, ITERATIONS, &holds);
    job.wait_until("ranks 1 and 6 to hold", |j| holds.iter().all(|&(r, i, it)| j.held(r, i, it).is_some()));
    let (a, b) = (job.held(1, 0, INTERVAL).unwrap(), job.held(6, 0, INTERVAL).unwrap());
    // SAFETY: signals to processes of this job.
    unsafe {
        libc::kill(a as libc::pid_t, libc::SIGKILL);
        libc::kill(b as libc::pid_t, libc::SIGKILL);
    }
    let d = job.finish();
    d.check(ITERATIONS, &restarted(&[(0, 1), (3, 1)]));
    assert_eq!(d.lines().len(), 2, "{}", d.show());
}

/// Rank 2 killed, then rank 7 while group 1 recovers (`extra`: more launcher arguments); the
/// finished job, and whether the second death started a round over both groups.
fn kill_during_recovery(name: &str, extra: &[&str]) -> (Done, bool) {
    // Rank 2 after its first checkpoint; rank 7 holds one iteration later (it can get there
    // while rank 2 holds: three ranks away), so that it is there to die whenever group 1 restarts.
    let holds = [(2, 0, INTERVAL), (7, 0, INTERVAL + 1)];
    let job = Job::start(name, extra, ITERATIONS, &holds);
    job.kill_held(holds[0]);
    // Group 1 is recovering (its ranks are being killed, retired or restarted): rank 7 dies now.
    job.wait_until("group 1's restart", |j| j.started().get(&3).map_or(0, Vec::len) == 2);
    job.kill_held(holds[1]);
    let d = job.finish();
    // Whether the second death came before the first round completed decides whether group 1 was
    // restarted once more (a new round over both groups): both outcomes recover, and the log tells.
    let both = d.stderr.contains("round=2 groups=[1, 3]");
    (d, both)
}

/// What [`kill_during_recovery`] must end with: the failure-free checksum, exactly groups 1 and 3
/// started again (group 1 twice if the second death started a round over both), by the
/// launcher's log and the start files (an incarnation of group 1 killed by the second round
/// before it wrote its start file has none), two recovery lines, nothing left.
fn check_during(d: &Done, second_round_over_both: bool) {
    let once_more = usize::from(second_round_over_both);
    let want = restarted(&[(1, 1 + once_more), (3, 1)]);
    assert_eq!(d.restarts_logged(), want, "{}", d.show());
    for r in 0..RANKS {
        let files = d.pids.get(&r).map_or(0, Vec::len);
        let want = 1 + want.get(&r).copied().unwrap_or(0);
        assert!(files == want || (once_more == 1 && files + 1 == want), "incarnations of rank {r}: {}", d.show());
    }
    assert!(d.ok, "{}", d.show());
    assert_eq!(d.checksum(), Some(reference(RANKS, CELLS, ITERATIONS)), "{}", d.show());
    d.nothing_left();
    assert_eq!(d.lines().len(), 2, "{}", d.show());
}

fn a_rank_killed_during_another_groups_recovery() {
    let (d, second_round_over_both) = kill_during_recovery("during", &[]);
    check_during(&d, second_round_over_both);
    eprintln!("second round over both groups: {second_round_over_both}");
}

fn five_failures_in_one_run() {
    five_failures("five", &[]);
}

/// The same over two nodes: ranks 0 and 3 on the first node, 5 and 6 on the second.
fn five_failures_in_one_run_over_two_nodes() {
    five_failures("five2", &["--nodes", TWO_NODES]);
}

fn five_failures(name: &str, extra: &[&str]) {
    // Each failure two checkpoints after the previous one (no rank gets there before the previous
    // victim's group is back), once the previous one is recovered (its line printed): see
    // `early_sequential_failures` for kills closer together. Rank 5 dies twice.
    let holds = [(5, 0, 2), (0, 0, 4), (3, 0, 6), (6, 0, 8), (5, 1, 10)].map(|(r, i, k)| (r, i, k * INTERVAL));
    let job = Job::start(name, extra, ITERATIONS, &holds);
    for (k, &hold) in holds.iter().enumerate() {
        job.wait_until("the previous recovery", |j| j.recoveries() == k);
        job.kill_held(hold);
    }
    let d = job.finish();
    d.check(ITERATIONS, &restarted(&[(2, 2), (0, 1), (1, 1), (3, 1)]));
    assert_eq!(d.lines().len(), 5, "{}", d.show());
}

/// Failures in sequence, each as soon as the previous recovery completed: ranks 5, 0 and 3 all
/// hold halfway between the first and the second checkpoint (each can get there while
/// the others hold), and each is killed once the previous death's recovery line is printed, while
/// the groups restarted from their first checkpoints still catch up. This hung now and then (2 runs in 17): a restarted rank's send that regenerates an orphan queued the
/// notification for the coordinator without sending it, and the rank then waited for a replay
/// the coordinator releases only once every orphan of the phase is notified; only an arrival
/// from its group partner, if it came after that send, flushed it. Sends now flush what the
/// engine queued, and a wait does before it idles.
fn early_sequential_failures() {
    sequential_failures("early", false);
}

/// The same with the halos received by non-blocking receives posted before the sends: a message
/// that arrives before the rank's sends must not raise their phase (the engine's delivery hook
/// runs when the application takes the receive's result, not when the message arrives).
fn early_sequential_failures_with_nonblocking_receives() {
    sequential_failures("early-irecv", true);
}

fn sequential_failures(name: &str, nonblocking: bool) -> Done {
    sequential_failures_late(name, nonblocking, Duration::ZERO)
}

/// [`sequential_failures`] with the test pausing `late` between seeing each victim hold and
/// killing it.
fn sequential_failures_late(name: &str, nonblocking: bool, late: Duration) -> Done {
    let holds = [5, 0, 3].map(|r| (r, 0, INTERVAL + INTERVAL / 2));
    let env = [("FT_TEST_HOLD", hold_spec(&holds))];
    let env: Vec<(&str, &str)> = env.iter().map(|(k, v)| (*k, v.as_str())).collect();
    let job = Job::start_with(name, RANKS, GROUPS, &[], (ITERATIONS, INTERVAL), nonblocking, &env);
    for (k, &hold) in holds.iter().enumerate() {
        job.wait_until("the previous recovery", |j| j.recoveries() == k);
        job.wait_until("the victim's hold", |j| j.held(hold.0, hold.1, hold.2).is_some());
        std::thread::sleep(late);
        job.kill_held(hold);
    }
    let d = job.finish();
    d.check(ITERATIONS, &restarted(&[(2, 1), (0, 1), (1, 1)]));
    d
}

/// The kills wait for no clock: the test pauses a second before each of the early sequential
/// failures (as a test thread descheduled on a loaded machine may), and each victim is still
/// where it held, halfway between its first and second checkpoints: its group restarts from
/// checkpoint 1 at the latest. With kills at a time after the previous recovery, this job would
/// be over before the first pause ended on a quiet machine (600 iterations take well under a
/// second), and later kills would find the victims past their second checkpoint.
fn kills_land_where_the_test_chose_however_late_it_is() {
    let d = sequential_failures_late("late", false, Duration::from_secs(1));
    let lines = d.lines();
    assert_eq!(lines.len(), 3, "{}", d.show());
    for l in lines {
        let g: u64 =
            l.split("restarted from checkpoint ").nth(1).and_then(|t| t.split(' ').next()?.parse().ok()).unwrap();
        assert!(g <= 1, "a victim went past its hold: {l}\n{}", d.show());
    }
}

/// Failures that come faster than recoveries: each new death starts a round over the groups of
/// the unfinished one too. The victims all hold after their first checkpoint; each is killed as
/// soon as the launcher has seen the previous death, while its round runs (a fixed pause of
/// 400 ms made the deaths overlap only on a loaded machine: on a quiet one each recovery took
/// 10–20 ms, and the job was over before the fourth kill).
fn failures_faster_than_recoveries() {
    let holds = [5, 0, 3, 6].map(|r| (r, 0, INTERVAL));
    let job = Job::start("rapid", &[], ITERATIONS, &holds);
    for hold in holds {
        let r = hold.0;
        job.kill_held(hold);
        let seen = format!("rank died: recovery rank={r} ");
        job.wait_until("the launcher to see the death", |j| {
            String::from_utf8_lossy(&j.err.lock().unwrap()).contains(&seen)
        });
    }
    let d = job.finish();
    assert!(d.ok, "{}", d.show());
    assert_eq!(d.checksum(), Some(reference(RANKS, CELLS, ITERATIONS)), "{}", d.show());
    assert_eq!(d.lines().len(), 4, "{}", d.show());
    d.nothing_left();
}

fn distributed_recovery() {
    let hold = (4, 0, INTERVAL);
    let job = Job::start("distributed", &["--ft-recovery", "distributed"], ITERATIONS, &[hold]);
    job.kill_held(hold);
    let d = job.finish();
    d.check(ITERATIONS, &restarted(&[(2, 1)]));
    assert_eq!(d.lines().len(), 1, "{}", d.show());
}

fn too_many_restarts_end_the_job() {
    // Rank 6 twice before its first checkpoint: its second incarnation starts from the beginning.
    let holds = [(6, 0, INTERVAL / 2), (6, 1, INTERVAL / 2)];
    let job = Job::start("max", &["--ft-max-restarts", "1"], ITERATIONS, &holds);
    for hold in holds {
        job.kill_held(hold);
    }
    let d = job.finish();
    assert!(!d.ok, "{}", d.show());
    assert!(
        d.stderr.contains(
            "nemesis-run: rank 6 died (signal 9); group 3 failed 2 times, more than --ft-max-restarts 1: ending the job"
        ),
        "{}",
        d.show()
    );
}

/// Stops `rank` (SIGSTOP; it holds after its checkpoint `newest`: [`newest_hold`]) once its
/// group holds two complete generations on disk, the newest at least `newest`: rank `rank`'s files
/// are generations `[.., older, newest]` and every other member has `newest` too. While it is
/// stopped its files stay as they are, and its group can complete no newer generation. Returns
/// the pid and rank `rank`'s generations.
fn stop_with_two_generations(job: &Job, rank: u32, newest: u64) -> (u32, Vec<u64>) {
    let (_, inc, it) = newest_hold(rank, newest);
    job.wait_until(&format!("rank {rank} to hold after checkpoint {newest}"), |j| j.held(rank, inc, it).is_some());
    let group = rank / 2;
    let complete = |j: &Job| {
        let mine = j.generations(rank);
        let ok = mine.len() >= 2
            && mine.last().is_some_and(|&g| g >= newest)
            && members(group).iter().all(|&m| mine.last().is_some_and(|g| j.generations(m).contains(g)));
        ok.then_some(mine)
    };
    loop {
        job.wait_until("two generations of the group", |j| complete(j).is_some());
        let pid = job.pid_of(rank).unwrap();
        // SAFETY: a signal to a process of this job (a rank's pid read from its own start file).
        unsafe { libc::kill(pid as libc::pid_t, libc::SIGSTOP) };
        // Its files may have changed between the look and the stop: look again.
        if let Some(g) = complete(job) {
            return (pid, g);
        }
        eprintln!("test: rank {rank}'s files changed before the stop: again");
        // SAFETY: as above.
        unsafe { libc::kill(pid as libc::pid_t, libc::SIGCONT) };
    }
}

impl Job {
    /// Flips a byte in the middle of rank `rank`'s file of generation `g`; its path.
    fn damage(&self, rank: u32, g: u64) -> PathBuf {
        let path = std::fs::read_dir(&self.ft_dir)
            .unwrap()
            .flatten()
            .map(|e| e.path())
            .find(|p| p.to_string_lossy().ends_with(&format!("-{rank}-{g}.nft")))
            .unwrap();
        let mut bytes = std::fs::read(&path).unwrap();
        let k = bytes.len() / 2;
        bytes[k] ^= 0xff;
        std::fs::write(&path, bytes).unwrap();
        path
    }
}

/// Where [`stop_with_two_generations`] needs `rank` to hold: after its checkpoint `newest`.
fn newest_hold(rank: u32, newest: u64) -> (u32, u32, u64) {
    (rank, 0, newest * INTERVAL)
}

/// SIGKILL to a process of the job (stopped or not).
fn kill_pid(pid: u32) {
    // SAFETY: a signal to a process of this job.
    unsafe { libc::kill(pid as libc::pid_t, libc::SIGKILL) };
}

fn a_damaged_checkpoint_falls_back_to_the_previous_generation() {
    let job = Job::start("fallback", &[], ITERATIONS, &[newest_hold(5, 4)]);
    // Mid-run: the acknowledgements of earlier generations have gone out.
    let (pid, gens) = stop_with_two_generations(&job, 5, 4);
    let (older, newest) = (gens[gens.len() - 2], gens[gens.len() - 1]);
    // Generation `newest` is complete on disk: only the damage makes the group fall back.
    let path = job.damage(5, newest);
    kill_pid(pid);
    eprintln!("test: damaged {} and killed rank 5 (pid {pid})", path.display());
    let d = job.finish();
    d.check(ITERATIONS, &restarted(&[(2, 1)]));
    let lines = d.lines();
    assert_eq!(lines.len(), 1, "{}", d.show());
    let want =
        format!("nemesis-run: rank 5 died (signal 9); group 2 (ranks 4,5) restarted from checkpoint {older} in ");
    assert!(lines[0].starts_with(&want), "want {want}: {}", d.show());
    // One warning, by the file's owner, naming it and the generation taken instead.
    let warnings: Vec<&str> =
        d.stderr.lines().filter(|l| l.starts_with("nemesis-run: ") && l.contains(" refused: ")).collect();
    assert_eq!(warnings.len(), 1, "{}", d.show());
    let want = format!("nemesis-run: rank 5: checkpoint file {} (generation {newest}) refused: ", path.display());
    assert!(warnings[0].starts_with(&want), "want {want}: {}", d.show());
    assert!(warnings[0].ends_with(&format!("; group 2 restarts from generation {older}")), "{}", d.show());
    eprintln!("{}\n{}", warnings[0], lines[0]);
}

fn damaged_generations_everywhere_end_the_job() {
    let job = Job::start("damaged", &[], ITERATIONS, &[newest_hold(3, 2)]);
    let (pid, gens) = stop_with_two_generations(&job, 3, 2);
    // Every file of rank 3's (the two retained generations, and a third not yet removed if the
    // newest is not durable yet): no generation of group 1 is complete any more.
    let paths: Vec<PathBuf> = gens.iter().map(|&g| job.damage(3, g)).collect();
    kill_pid(pid);
    let d = job.finish();
    assert!(!d.ok, "{}", d.show());
    let end: Vec<&str> = d.stderr.lines().filter(|l| l.contains(" cannot restart: ")).collect();
    assert_eq!(end.len(), 1, "{}", d.show());
    assert!(end[0].starts_with("nemesis-run: rank "), "{}", d.show());
    assert!(
        end[0].contains("no checkpoint of group 1 in ") && end[0].ends_with("cannot recover: ending the job"),
        "{}",
        d.show()
    );
    for p in &paths {
        assert!(end[0].contains(&p.display().to_string()), "{} not named: {}", p.display(), d.show());
    }
    // No restart line, no fallback warning, and no checksum.
    assert!(d.lines().is_empty() && !d.stderr.contains(" refused: ") && d.checksum().is_none(), "{}", d.show());
    d.shm_clean();
}

/// Halo messages of 64 KiB, every message by rendezvous (eager limits of 4 KiB), through copy
/// rings of 4 KiB slots (`shm`: a transfer takes several passes of both sides) or by single copy
/// (`cma`: split with the sender above 32 KiB); rank `victim` dies at the `nth` hit of `point`
/// in its first incarnation (`failpoints`).
#[cfg(feature = "failpoints")]
fn rendezvous_job(name: &str, lmt: &str, victim: u32, point: &str, nth: u64) -> Done {
    let env = [
        ("NEMESIS_LMT", lmt),
        ("NEMESIS_EAGER_MAX", "4K"),
        ("NEMESIS_EAGER_BLOCKING_MAX", "4K"),
        ("NEMESIS_LMT_SLOT_SIZE", "4096"),
        ("FT_TEST_HALO", "65536"),
    ];
    failpoint_job(name, &[], &env, false, (victim, point, nth, 0))
}

/// A job of [`RDV_ITERATIONS`] with more launcher arguments `extra` and environment `env`
/// (halos by `irecv`/`wait` if `nonblocking`), whose rank `victim` dies at the `nth` hit of
/// `point` from iteration `from` on, in its first incarnation; the recovery module's debug lines
/// are in its standard error.
#[cfg(feature = "failpoints")]
fn failpoint_job(
    name: &str,
    extra: &[&str],
    env: &[(&str, &str)],
    nonblocking: bool,
    (victim, point, nth, from): (u32, &str, u64, u64),
) -> Done {
    let fp = format!("{victim}:{point}:{nth}:{from}");
    let mut env = env.to_vec();
    env.push(("FT_TEST_FP", &fp));
    env.push(("NEMESIS_LOG", "nemesis::launch=info,nemesis::endpoint::recovery=debug,nemesis_netmod_tcp=info"));
    Job::start_with(name, RANKS, GROUPS, extra, (RDV_ITERATIONS, RDV_INTERVAL), nonblocking, &env).finish()
}

#[cfg(feature = "failpoints")]
const RDV_ITERATIONS: u64 = 400;
/// The checkpoint interval of the failpoint jobs (the `nth` hits below count from it).
#[cfg(feature = "failpoints")]
const RDV_INTERVAL: u64 = 200;

/// The death landed at `point` in `victim`'s first incarnation, the job ended with the
/// failure-free checksum, and only `victim`'s group was started again, once.
#[cfg(feature = "failpoints")]
fn check_failpoint_death(d: &Done, victim: u32, point: &str) {
    let hits: Vec<&str> = d.hits.lines().collect();
    assert_eq!(hits.len(), 1, "the failpoint once: {hits:?}\n{}", d.show());
    let pid: u32 = hits[0].strip_prefix(&format!("hit {point} ")).and_then(|p| p.parse().ok()).unwrap_or(0);
    assert!(d.pids.get(&victim).is_some_and(|p| p.contains(&pid)), "hit by rank {victim}: {hits:?}\n{}", d.show());
    assert!(!d.stdout.contains("arrived damaged"), "{}", d.show());
    d.check(RDV_ITERATIONS, &restarted(&[(victim / 2, 1)]));
    assert_eq!(d.lines().len(), 1, "{}", d.show());
}

/// A rank dies while it sends a rendezvous message to a rank of another group (rank 5 of group 2
/// to rank 6 of group 3), its RTS received and recorded: through the rings with part of the data
/// copied into the receive buffer, by single copy with the receiver reading its half, and with
/// no data moved at all. The receiver takes the arrival back and receives the message again from
/// the restarted sender (its log shows it: the arrival taken back), from byte 0.
#[cfg(feature = "failpoints")]
fn a_rank_killed_while_sending_a_rendezvous_message() {
    for (lmt, point, nth) in
        [("shm", "rendezvous-send-mid-6", 250), ("cma", "rendezvous-help-6", 250), ("auto", "ft-rendezvous-sent", 250)]
    {
        let d = rendezvous_job(&format!("rdv-send-{lmt}"), lmt, 5, point, nth);
        check_failpoint_death(&d, 5, point);
        assert!(d.stderr.contains("HydEE: arrivals of rendezvous taken back"), "{}", d.show());
        eprintln!("{lmt}: {}", d.lines()[0]);
    }
}

/// A rank dies while it receives a rendezvous message from a rank of another group (rank 6 of
/// group 3 from rank 5 of group 2): through the rings with part of the data copied out, and by
/// single copy with its half read while the sender writes the other. The sender's transfer ends
/// with the death, its send completes, and the message is replayed from its log to the new
/// incarnation.
#[cfg(feature = "failpoints")]
fn a_rank_killed_while_receiving_a_rendezvous_message() {
    for (lmt, point, nth) in [("shm", "rendezvous-recv-mid-5", 250), ("cma", "rendezvous-recv-half-5", 250)] {
        let d = rendezvous_job(&format!("rdv-recv-{lmt}"), lmt, 6, point, nth);
        check_failpoint_death(&d, 6, point);
        eprintln!("{lmt}: {}", d.lines()[0]);
    }
}

/// Eager halos of 16 KiB in cells of 4 KiB (five cells a message; eager up to 64 KiB).
#[cfg(feature = "failpoints")]
const MULTI_CELL: [(&str, &str); 4] = [
    ("NEMESIS_CELL_SIZE", "4096"),
    ("NEMESIS_EAGER_MAX", "64K"),
    ("NEMESIS_EAGER_BLOCKING_MAX", "64K"),
    ("FT_TEST_HALO", "16384"),
];

/// The receiver's log: an eager message in several cells taken back after its sender's death.
#[cfg(feature = "failpoints")]
const EAGER_TAKEN_BACK: &str = "HydEE: partial eager message lost with its sender; arrival taken back";

/// A rank dies in the middle of an eager message in several cells to a rank of another group
/// (rank 5 of group 2 to rank 6 of group 3, one node), two of its five cells enqueued: the
/// segment drops the message whole, the receiver takes its arrival back and its receive (a
/// blocking receive waiting in the bypass, or a posted `irecv`) waits for the restarted
/// sender's copy, which completes it. Without recovery it fails with `PeerDied`
/// (`tests/failpoints.rs`, `sender_dies_in_the_middle_of_a_multi_cell_message`).
#[cfg(feature = "failpoints")]
fn a_rank_killed_in_the_middle_of_a_multi_cell_message() {
    for nonblocking in [false, true] {
        let point = "send-mid-message-to-6";
        // Four hits per message (between its five cells): the tenth message after the first
        // checkpoint (iteration 200), after its second cell.
        let nth = 4 * 210 + 2;
        let name = format!("cells-{}", u8::from(nonblocking));
        let d = failpoint_job(&name, &[], &MULTI_CELL, nonblocking, (5, point, nth, 0));
        check_failpoint_death(&d, 5, point);
        assert!(d.stderr.contains(EAGER_TAKEN_BACK), "{}", d.show());
        eprintln!("nonblocking {nonblocking}: {}", d.lines()[0]);
    }
}

/// Over two nodes (`--nodes 2`, the TCP netmod between them): rank 4 (group 2, second node)
/// dies while it sends a rendezvous message to rank 3 (group 1, first node), half of the 64 KiB
/// of data written to the connection (rank 3 has matched the RTS, recorded it and answered CTS).
/// Rank 3's transfer fails with the connection, the netmod's death notice says the sender is
/// silent, the arrival is taken back, and the restarted rank 4's copy is received from byte 0.
#[cfg(feature = "failpoints")]
fn a_rank_killed_while_sending_a_rendezvous_message_over_two_nodes() {
    let env = [("NEMESIS_EAGER_MAX", "4K"), ("NEMESIS_EAGER_BLOCKING_MAX", "4K"), ("FT_TEST_HALO", "65536")];
    let point = "tcp-data-mid-3";
    let d = failpoint_job("rdv-send-tcp", &["--nodes", TWO_NODES], &env, false, (4, point, 250, 0));
    check_failpoint_death(&d, 4, point);
    assert!(d.stderr.contains("HydEE: arrivals of rendezvous taken back"), "{}", d.show());
    assert!(!d.restarted_links().is_empty(), "no link to the new incarnation: {}", d.show());
    eprintln!("{}", d.lines()[0]);
}

/// Over two nodes: rank 4 dies in the middle of an eager message frame to rank 3 (16 KiB, half
/// of it written): rank 3's netmod has put the first cells into its receive queue, then the
/// death notice; the arrival is taken back and the receive waits for the restarted sender's
/// copy. The point is armed after the first checkpoint (iteration 210) and fires at its first
/// hit: it is reached only by a frame written at once (none queued before it), which not every
/// frame is on a loaded machine, so a count of hits from the start (210) was sometimes never
/// reached in the job.
#[cfg(feature = "failpoints")]
fn a_rank_killed_in_the_middle_of_a_message_frame_over_two_nodes() {
    let point = "tcp-send-mid-3";
    let d = failpoint_job("frame-tcp", &["--nodes", TWO_NODES], &MULTI_CELL, false, (4, point, 1, 210));
    check_failpoint_death(&d, 4, point);
    assert!(d.stderr.contains(EAGER_TAKEN_BACK), "{}", d.show());
    eprintln!("{}", d.lines()[0]);
}

/// `--nodes 2`: ranks 0–3 on one pretend node, 4–7 on the other, the TCP netmod between them.
const TWO_NODES: &str = "2";

/// Over two nodes (`extra`: more launcher arguments): kills `victim` after its group's second
/// checkpoint; the job ends with the failure-free checksum, exactly the ranks of `again` were
/// started again (by their start files and the launcher's log), one recovery line contains
/// `line`, and the netmods' lines show a link between incarnations among `links` (`(rank at the
/// other end, its incarnation, the logging rank's own)`).
fn one_death_over_two_nodes(
    name: &str,
    extra: &[&str],
    victim: u32,
    again: &BTreeMap<u32, usize>,
    line: &str,
    links: &[(u32, u32, u32)],
) {
    let mut args = vec!["--nodes", TWO_NODES];
    args.extend_from_slice(extra);
    let hold = (victim, 0, 2 * INTERVAL);
    let job = Job::start(name, &args, ITERATIONS, &[hold]);
    job.kill_held(hold);
    let d = job.finish();
    d.check(ITERATIONS, again);
    assert_eq!(&d.restarts_logged(), again, "{}", d.show());
    let lines = d.lines();
    assert_eq!(lines.len(), 1, "{}", d.show());
    assert!(lines[0].contains(line), "{}", d.show());
    let got = d.restarted_links();
    assert!(got.iter().any(|l| links.contains(l)), "links: {got:?}\n{}", d.show());
}

/// Over two nodes (groups 0 and 1 on the first, 2 and 3 on the second): rank 4 is killed; it
/// exchanges with rank 3 of group 1 on the other node, so after the restart the TCP link
/// between rank 3 and rank 4's new incarnation carries the stencil's halos (the netmods' lines
/// show it came up, from either end), and the checksum is the failure-free one.
fn one_rank_killed_mid_run_over_two_nodes() {
    let line = "nemesis-run: rank 4 died (signal 9); group 2 (ranks 4,5) restarted from checkpoint ";
    one_death_over_two_nodes("mid2", &[], 4, &restarted(&[(2, 1)]), line, &[(4, 1, 0), (3, 0, 1)]);
}

/// A group spanning both nodes ({3, 4}: rank 3 on the first, rank 4 on the second): rank 3 is
/// killed, rank 4 with it, and both restart at once on their nodes; each learns the other's new
/// card through the launcher (its own bootstrap may come first), and the TCP link between the
/// two new incarnations comes up.
fn a_group_spanning_the_nodes_restarts() {
    let groups = scratch("span-groups").join("groups");
    std::fs::write(&groups, "0 0\n1 0\n2 1\n5 1\n3 2\n4 2\n6 3\n7 3\n").unwrap();
    let g = groups.to_string_lossy().into_owned();
    let line = "rank 3 died (signal 9); group 2 (ranks 3,4) restarted from checkpoint ";
    one_death_over_two_nodes("span", &["--ft", &g], 3, &[(3, 1), (4, 1)].into(), line, &[(3, 1, 1), (4, 1, 1)]);
    let _ = std::fs::remove_dir_all(groups.parent().unwrap());
}

/// Over two nodes: rank 2 (group 1, first node) is killed, and rank 7 (group 3, second node)
/// while group 1 recovers.
fn a_rank_killed_during_another_groups_recovery_over_two_nodes() {
    let (d, second_round_over_both) = kill_during_recovery("during2", &["--nodes", TWO_NODES]);
    check_during(&d, second_round_over_both);
    let links = d.restarted_links();
    assert!(
        links.iter().any(|&(r, inc, own)| (r == 0 && own >= 1) || (r == 7 && inc >= 1)),
        "rank 7's new incarnation and rank 0: {links:?}\n{}",
        d.show()
    );
}
