//! The group checkpoint under faults (issue 33): `examples/ft_stencil.rs` on 8 ranks in 4
//! groups of 2 under `nemesis-run` (2 cores, `--wait yield`), a member dying at a named point
//! inside its group's checkpoint (the cargo feature `failpoints`; the points are in
//! `src/endpoint/checkpoint.rs` and `src/ft/checkpoint.rs`):
//! - `ckpt-marker-sent`: during the marker flush (its stage-0 marker sent, the others' not
//!   awaited); nothing of the new generation is written;
//! - `ckpt-tmp-written`: its file written and synced under its temporary name, not renamed;
//! - `ckpt-file-durable`: its file durable, before it tells the group (stage 1), with the
//!   partner's file not yet in place, or in place;
//! - `ckpt-durable-marker-sent`: it told the group its file is durable, and died before hearing
//!   back;
//! - `ckpt-group-durable`: right after the group's new generation became durable for it;
//! - a member of another group dying while this group is stopped in the middle of its marker
//!   flush (the checkpoint serves the recovery round);
//! - every rank at once (all stopped at the same point of their checkpoints, or each group at
//!   another point, then SIGKILLed together).
//!
//! In every case the group (or every group) restarts from its newest generation of which every
//! member's file is in place and valid (`src/ft/checkpoint.rs`, `restart_point`): the incomplete
//! one is never used, the final checksum equals the failure-free job's, and neither the
//! checkpoint directory (no file, no temporary file) nor `/dev/shm` keeps anything. The death
//! landed at the point: the record holds `hit <point> <pid>` of the victim's first incarnation.
//! Deaths that need processes in given places use `Action::Stop`: each stops at its point, the
//! test waits until they are all stopped and the record names their points, then SIGKILLs the
//! victim (the launcher kills the rest of its group) or every rank.
//!
//! `FT_FP` is the spec: `<rank>:<point>:<action>` items (`k` kill, `s` stop) separated by
//! commas, each armed at the start of iteration [`ARM_AT`] of the rank's first incarnation and
//! firing at the point's first hit from there, in the checkpoint that makes generation
//! [`STRUCK`].

mod common;

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::process::{Command, Output};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use nemesis::Endpoint;
use nemesis_shm::failpoint::Action;

#[path = "../examples/ft_stencil.rs"]
#[allow(dead_code)]
mod ft_stencil;

const RANKS: u32 = 8;
const GROUPS: u32 = 4;
const CELLS: usize = 64;
const ITERATIONS: u64 = 120;
/// A checkpoint every `INTERVAL` iterations: generations 1 to 5.
const INTERVAL: u64 = 20;
/// Points are armed after the second checkpoint ...
const ARM_AT: u64 = 2 * INTERVAL + 1;
/// ... and strike in the third.
const STRUCK: u64 = 3;

fn main() {
    common::harness::main(
        rank,
        tests![
            a_member_dies_during_the_marker_flush,
            a_member_dies_with_its_file_not_yet_renamed,
            a_member_dies_with_its_file_durable_and_the_partners_not,
            a_member_dies_with_every_file_durable_before_the_group_knows,
            a_member_dies_after_telling_the_group_its_file_is_durable,
            a_member_dies_right_after_the_group_durability,
            a_rank_dies_while_another_group_is_in_its_marker_flush,
            every_rank_dies_at_once_after_the_group_durability,
            every_rank_dies_at_once_during_the_marker_flush,
            every_rank_dies_at_once_each_group_at_another_stage,
        ],
    );
}

/// The rank program: the stencil, its points armed as `FT_FP` says, rank 0 prints the checksum.
fn rank() {
    let dir = PathBuf::from(std::env::var("FT_DIR").unwrap());
    let first = std::env::var_os("NEMESIS_FT_RESTART").is_none();
    let mut ep = match Endpoint::init() {
        Ok(ep) => ep,
        Err(e) => {
            nemesis::say!("rank cannot start: {e}");
            std::process::exit(1);
        }
    };
    let me = ep.rank();
    std::fs::write(dir.join(format!("started-{me}-{}", std::process::id())), "").unwrap();
    let mine: Vec<(String, Action)> = std::env::var("FT_FP")
        .unwrap_or_default()
        .split(',')
        .filter(|s| !s.is_empty() && first)
        .filter_map(|s| {
            let v: Vec<&str> = s.split(':').collect();
            let action = if v[2] == "s" { Action::Stop } else { Action::Kill };
            (v[0].parse::<u32>().unwrap() == me).then(|| (v[1].to_owned(), action))
        })
        .collect();
    let record = dir.join("failpoints");
    let mut at = |_: &mut Endpoint, it: u64| {
        if it == ARM_AT {
            for (point, action) in &mine {
                nemesis_shm::failpoint::arm(point, 1, *action, &record);
            }
        }
    };
    match ft_stencil::run_observed(&mut ep, CELLS, ITERATIONS, INTERVAL, 8, false, &mut at) {
        Ok(r) if me == 0 => println!("RESULT checksum {:016x}", r.checksum),
        Ok(_) => {}
        Err(e) => {
            println!("RESULT error rank {me}: {e}");
            std::process::exit(1);
        }
    }
    ep.finalize().unwrap();
}

/// A job under way: its directory (start files, the failpoints' record, the checkpoint directory
/// `ckpt`) and the thread waiting for the launcher.
struct Job {
    dir: PathBuf,
    shm_before: Vec<String>,
    launcher: std::thread::JoinHandle<Output>,
    _serial: std::sync::MutexGuard<'static, ()>,
}

/// One job at a time (8 ranks on 2 cores).
static ONE_AT_A_TIME: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn nemesis_shm_names() -> Vec<String> {
    let names = std::fs::read_dir("/dev/shm").into_iter().flatten().flatten();
    names.map(|e| e.file_name().to_string_lossy().into_owned()).filter(|n| n.starts_with("nemesis")).collect()
}

impl Job {
    /// Starts the job `name` with the points of `spec` (`FT_FP`; empty: no failure, and no
    /// fault tolerance if `ft` is false).
    fn start(name: &str, spec: &str, ft: bool) -> Job {
        let serial = ONE_AT_A_TIME.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        let dir = std::env::temp_dir().join(format!("nemesis-ftcf-{}-{name}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(dir.join("ckpt")).unwrap();
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_nemesis-run"));
        cmd.args(["-n", &RANKS.to_string(), "--wait", "yield"]);
        if ft {
            cmd.args(["--ft-groups", &GROUPS.to_string()]);
        }
        cmd.arg("--").args(common::harness::me_as_rank());
        cmd.env("FT_DIR", &dir)
            .env("FT_FP", spec)
            .env("NEMESIS_FT_DIR", dir.join("ckpt"))
            .env("NEMESIS_LOG", "nemesis::launch=info");
        let shm_before = nemesis_shm_names();
        let launcher = std::thread::spawn(move || common::run_with_timeout(cmd, Duration::from_secs(300)));
        Job { dir, shm_before, launcher, _serial: serial }
    }

    /// The failpoints' record: `(point, pid)` of each hit so far.
    fn hits(&self) -> Vec<(String, u32)> {
        std::fs::read_to_string(self.dir.join("failpoints"))
            .unwrap_or_default()
            .lines()
            .filter_map(|l| {
                let mut w = l.strip_prefix("hit ")?.split(' ');
                Some((w.next()?.to_owned(), w.next()?.parse().ok()?))
            })
            .collect()
    }

    /// Incarnations started so far per rank (their pids, in no order).
    fn started(&self) -> BTreeMap<u32, Vec<u32>> {
        let mut m: BTreeMap<u32, Vec<u32>> = BTreeMap::new();
        for e in std::fs::read_dir(&self.dir).unwrap().flatten() {
            let name = e.file_name().to_string_lossy().into_owned();
            if let Some((r, p)) = name.strip_prefix("started-").and_then(|t| t.split_once('-')) {
                m.entry(r.parse().unwrap()).or_default().push(p.parse().unwrap());
            }
        }
        m
    }

    /// Each incarnation's state (`/proc/<pid>/stat`) and where it waits (`wchan`).
    fn states(&self) -> String {
        let of = |pid: u32| format!("{pid} {}", proc_state(pid));
        let ranks = self
            .started()
            .into_iter()
            .map(|(r, p)| format!("rank {r}: {:?}", p.into_iter().map(of).collect::<Vec<_>>()));
        ranks.collect::<Vec<_>>().join("; ")
    }

    /// Whether `pid` is `rank`'s first incarnation.
    fn first_of(&self, rank: u32, pid: u32) -> bool {
        self.started().get(&rank).is_some_and(|p| p.contains(&pid))
    }

    /// Waits (at most 120 s) until `f` holds.
    fn wait_until(&self, what: &str, mut f: impl FnMut(&Job) -> bool) {
        let t = Instant::now();
        while !f(self) {
            assert!(
                t.elapsed() < Duration::from_secs(120),
                "timed out waiting for {what}: hits {:?}; {}",
                self.hits(),
                self.states()
            );
            std::thread::sleep(Duration::from_millis(5));
        }
    }

    /// Waits for `n` hits; their pids by point order of the record.
    /// Waits until the first incarnations of `ranks` are stopped (at their points), then checks the record
    /// names `points`, each as often as listed; the ranks' pids. Points hit together may interleave the pieces of
    /// their record lines (each written in several writes): the points are counted, not parsed.
    fn stopped(&self, ranks: &[u32], points: &[&str]) -> Vec<u32> {
        let pid = |j: &Job, r: u32| j.started().get(&r).and_then(|p| p.iter().min().copied());
        self.wait_until(&format!("ranks {ranks:?} stopped"), |j| {
            ranks.iter().all(|&r| pid(j, r).is_some_and(|p| proc_state(p).starts_with('T')))
        });
        let record = std::fs::read_to_string(self.dir.join("failpoints")).unwrap_or_default();
        for p in points {
            let want = points.iter().filter(|q| q == &p).count();
            assert_eq!(record.matches(p).count(), want, "{p} in the record: {record:?}");
        }
        ranks.iter().map(|&r| pid(self, r).unwrap()).collect()
    }

    fn finish(self) -> Done {
        let out = self.launcher.join().unwrap();
        let checkpoint_files: Vec<String> = std::fs::read_dir(self.dir.join("ckpt"))
            .map(|d| d.flatten().map(|e| e.file_name().to_string_lossy().into_owned()).collect())
            .unwrap_or_default();
        let _ = std::fs::remove_dir_all(&self.dir);
        Done {
            ok: out.status.success(),
            stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
            stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
            checkpoint_files,
            shm_before: self.shm_before,
        }
    }
}

/// A process's state letter (`/proc/<pid>/stat`; `T`: stopped) and where it waits (`wchan`).
fn proc_state(pid: u32) -> String {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    let state = stat.rsplit(')').next().and_then(|t| t.split_whitespace().next()).unwrap_or("gone").to_owned();
    let wchan = std::fs::read_to_string(format!("/proc/{pid}/wchan")).unwrap_or_default();
    format!("{state} {wchan}")
}

fn signal(pid: u32, sig: i32) {
    // SAFETY: a signal to a rank of this test's job (its pid from the failpoints' record).
    unsafe { libc::kill(pid as libc::pid_t, sig) };
}

/// What a finished job left.
struct Done {
    ok: bool,
    stdout: String,
    stderr: String,
    checkpoint_files: Vec<String>,
    shm_before: Vec<String>,
}

impl Done {
    fn show(&self) -> String {
        format!("stdout:\n{}\nstderr:\n{}", self.stdout, self.stderr)
    }

    fn checksum(&self) -> Option<String> {
        self.stdout.lines().find_map(|l| Some(l.strip_prefix("RESULT checksum ")?.trim().to_owned()))
    }

    /// Group → the generation it restarted from, for each recovery line of the launcher.
    fn restarts(&self) -> Vec<(u32, u64)> {
        self.stderr
            .lines()
            .filter(|l| l.starts_with("nemesis-run: rank ") && l.contains(" restarted from checkpoint "))
            .map(|l| {
                let g = l.split("; group ").nth(1).and_then(|t| t.split(' ').next()?.parse().ok());
                let c = l.split(" restarted from checkpoint ").nth(1).and_then(|t| t.split(' ').next()?.parse().ok());
                (g.unwrap(), c.unwrap())
            })
            .collect()
    }

    /// The job ended well with the failure-free checksum, the groups restarted as `want` says
    /// (`(group, generation)`, in any order), and nothing was left behind.
    fn check(&self, want: &[(u32, u64)]) {
        assert!(self.ok, "{}", self.show());
        assert_eq!(self.checksum().as_deref(), Some(failure_free()), "{}", self.show());
        let mut got = self.restarts();
        got.sort_unstable();
        // A line per death: a group both of whose members died has two.
        got.dedup();
        let mut want = want.to_vec();
        want.sort_unstable();
        assert_eq!(got, want, "(group, generation) of the restarts: {}", self.show());
        // The launcher's groups file aside.
        assert!(
            self.checkpoint_files.iter().all(|f| f == "groups"),
            "left in the checkpoint directory: {:?}",
            self.checkpoint_files
        );
        let new =
            || -> Vec<String> { nemesis_shm_names().into_iter().filter(|n| !self.shm_before.contains(n)).collect() };
        if !new().is_empty() {
            // Another job of this machine may come and go.
            std::thread::sleep(Duration::from_secs(1));
        }
        assert!(new().is_empty(), "left in /dev/shm: {:?}", new());
    }
}

/// The failure-free job's checksum (with fault tolerance off), run once.
fn failure_free() -> &'static str {
    static SUM: OnceLock<String> = OnceLock::new();
    SUM.get_or_init(|| {
        let d = Job::start("reference", "", false).finish();
        assert!(d.ok, "{}", d.show());
        d.checksum().unwrap_or_else(|| panic!("no checksum: {}", d.show()))
    })
}

/// Rank `victim` killed at `point` (its first hit from [`ARM_AT`]); the job's end.
fn killed_at(name: &str, victim: u32, point: &str) -> Done {
    let job = Job::start(name, &format!("{victim}:{point}:k"), true);
    job.launcher_done_with(|job| {
        job.wait_until("the victim's death", |j| !j.hits().is_empty());
        let hits = job.hits();
        assert_eq!(hits[0].0, point);
        assert!(job.first_of(victim, hits[0].1), "hit by rank {victim}: {hits:?}");
    })
}

impl Job {
    /// Runs `during` while the job runs, then waits for its end.
    fn launcher_done_with(self, during: impl FnOnce(&Job)) -> Done {
        during(&self);
        self.finish()
    }

    /// `a` and `b` stopped at their points (in that order of `spec`), then `a` SIGKILLed: the
    /// pids of both.
    fn stop_both_kill_first(&self, (a, pa): (u32, &str), (b, pb): (u32, &str)) -> (u32, u32) {
        let pids = self.stopped(&[a, b], &[pa, pb]);
        signal(pids[0], libc::SIGKILL);
        (pids[0], pids[1])
    }
}

/// Generation [`STRUCK`] lacks the victim's file: the group restarts from the one before.
fn a_member_dies_during_the_marker_flush() {
    killed_at("marker", 3, "ckpt-marker-sent").check(&[(1, STRUCK - 1)]);
}

/// Its temporary file is left: it goes at the restart, and the group restarts from the
/// generation before.
fn a_member_dies_with_its_file_not_yet_renamed() {
    killed_at("tmp", 3, "ckpt-tmp-written").check(&[(1, STRUCK - 1)]);
}

fn a_member_dies_with_its_file_durable_and_the_partners_not() {
    let job = Job::start("durable-one", "3:ckpt-file-durable:s,2:ckpt-tmp-written:s", true);
    let d = job.launcher_done_with(|job| {
        job.stop_both_kill_first((3, "ckpt-file-durable"), (2, "ckpt-tmp-written"));
    });
    d.check(&[(1, STRUCK - 1)]);
}

/// Every member's file of the new generation is in place, no member has heard the others: that
/// generation is complete on disk, and the group restarts from it.
fn a_member_dies_with_every_file_durable_before_the_group_knows() {
    let job = Job::start("durable-all", "3:ckpt-file-durable:s,2:ckpt-file-durable:s", true);
    let d = job.launcher_done_with(|job| {
        job.stop_both_kill_first((3, "ckpt-file-durable"), (2, "ckpt-file-durable"));
    });
    d.check(&[(1, STRUCK)]);
}

/// Its partner's file is in place too (stopped right after writing it): the generation is complete on disk. (Had
/// the partner not written it yet, the group would restart from the one before, as above.)
fn a_member_dies_after_telling_the_group_its_file_is_durable() {
    let job = Job::start("told", "3:ckpt-durable-marker-sent:s,2:ckpt-file-durable:s", true);
    let d = job.launcher_done_with(|job| {
        job.stop_both_kill_first((3, "ckpt-durable-marker-sent"), (2, "ckpt-file-durable"));
    });
    d.check(&[(1, STRUCK)]);
}

fn a_member_dies_right_after_the_group_durability() {
    killed_at("group-durable", 3, "ckpt-group-durable").check(&[(1, STRUCK)]);
}

/// Rank 2 stops in the middle of group 1's marker flush (its marker sent, its partner's not
/// awaited), and rank 4 of group 2 dies right after its own group's checkpoint: the recovery
/// round waits for rank 2 to retire the dead (the test gives it 2 s to start group 2 anyway,
/// and says which came), then rank 2 goes on and serves the round from inside its checkpoint
/// (`ft_await_recovery` before the capture) and group 1 completes the generation. Only group 2
/// restarts.
fn a_rank_dies_while_another_group_is_in_its_marker_flush() {
    let job = Job::start("other-group", "4:ckpt-group-durable:s,2:ckpt-marker-sent:s", true);
    let d = job.launcher_done_with(|job| {
        let (_, stopped) = job.stop_both_kill_first((4, "ckpt-group-durable"), (2, "ckpt-marker-sent"));
        // Group 2 restarts while rank 2 is stopped (at most 2 s: the round waits for it, as seen so far).
        let t = Instant::now();
        while job.started().get(&4).map_or(0, Vec::len) < 2 && t.elapsed() < Duration::from_secs(2) {
            std::thread::sleep(Duration::from_millis(5));
        }
        let early = job.started().get(&4).map_or(0, Vec::len) >= 2;
        eprintln!("group 2 restarted while rank 2 was stopped in its checkpoint: {early}");
        signal(stopped, libc::SIGCONT);
    });
    d.check(&[(2, STRUCK)]);
}

/// Every rank stopped in generation [`STRUCK`], group `g`'s members at `points[g]`, then all
/// SIGKILLed together: group `g` restarts from `generations[g]`.
fn every_rank_dies_at_once(name: &str, points: [&str; GROUPS as usize], generations: [u64; GROUPS as usize]) {
    let of = |r: u32| points[(r / 2) as usize];
    let spec: Vec<String> = (0..RANKS).map(|r| format!("{r}:{}:s", of(r))).collect();
    let job = Job::start(name, &spec.join(","), true);
    let d = job.launcher_done_with(|job| {
        let ranks: Vec<u32> = (0..RANKS).collect();
        let all: Vec<&str> = ranks.iter().map(|&r| of(r)).collect();
        for pid in job.stopped(&ranks, &all) {
            signal(pid, libc::SIGKILL);
        }
    });
    let want: Vec<(u32, u64)> = (0..GROUPS).map(|g| (g, generations[g as usize])).collect();
    d.check(&want);
}

fn every_rank_dies_at_once_after_the_group_durability() {
    every_rank_dies_at_once("all-durable", ["ckpt-group-durable"; 4], [STRUCK; 4]);
}

fn every_rank_dies_at_once_during_the_marker_flush() {
    every_rank_dies_at_once("all-marker", ["ckpt-marker-sent"; 4], [STRUCK - 1; 4]);
}

/// Each group at another stage: in its marker flush, both files written under their temporary
/// names (left behind, removed at the restart), both files durable with nobody told, and right
/// after the group's durability. Each group restarts from its own last complete generation.
fn every_rank_dies_at_once_each_group_at_another_stage() {
    let points = ["ckpt-marker-sent", "ckpt-tmp-written", "ckpt-file-durable", "ckpt-group-durable"];
    every_rank_dies_at_once("all-mixed", points, [STRUCK - 1, STRUCK - 1, STRUCK, STRUCK]);
}
