//! The application dies inside a checkpoint (issue 33): `tests/c/ft_app.c` (the Jacobi application of
//! `tests/ft_app.rs`, 8 ranks in 4 groups of 2 under `nemesis-run --ft-groups 4 --wait yield`, `MPIX_Checkpoint`
//! every 4 of its 48 iterations) with a rank killed at each named point of the group checkpoint, reached through
//! `MPIX_Checkpoint`, the path real programs take (the points are in `src/endpoint/checkpoint.rs` and
//! `src/ft/checkpoint.rs`; `tests/ft_checkpoint_faults.rs` puts the same deaths in the Rust stencil).
//!
//! `libmpi.so` must be the `failpoints` build: its hook `nemesis_failpoint_arm` (`src/ft/failpoint.rs`) arms a
//! point in the calling process. `FT_TEST_FP=<rank>@<iteration>:<point>:<k|s>` makes the rank's first incarnation
//! arm it at the start of iteration [`ARM_AT`] (`ft_hold.h`), right after the checkpoint of generation
//! [`STRUCK`]` - 1`, so that it fires in the checkpoint of generation [`STRUCK`] (`k`: the process SIGKILLs itself,
//! `s`: it SIGSTOPs itself, and the test SIGKILLs it once every stopped rank is where it should be). The death
//! landed there: the record `FT_TEST_DIR/failpoints` holds `hit <point> <pid>` of the victim's first incarnation,
//! and no other hit. After each death rank 0's checksum is the failure-free run's, only the victim's group was
//! started again, once, from the generation the point leaves complete on disk (the launcher's line), its ranks
//! resumed at that generation's iteration, and the checkpoint directory keeps nothing but the launcher's groups
//! file.
//!
//! | Test | Victim (partner) | Points | Generation restarted from |
//! |---|---|---|---|
//! | `marker_sent` | 3 | `ckpt-marker-sent` (k) | 2 |
//! | `tmp_written` | 3 | `ckpt-tmp-written` (k) | 2 |
//! | `file_durable_partners_not` | 3 (2) | `ckpt-file-durable` (s), partner `ckpt-tmp-written` (s) | 2 |
//! | `file_durable_both` | 3 (2) | `ckpt-file-durable` (s), partner `ckpt-file-durable` (s) | 3 |
//! | `durable_marker_sent` | 3 (2) | `ckpt-durable-marker-sent` (s), partner `ckpt-file-durable` (s) | 3 |
//! | `group_durable` | 3 | `ckpt-group-durable` (k) | 3 |
//! | `marker_sent_over_two_nodes` | 5 | `ckpt-marker-sent` (k), `--nodes 2` | 2 |
//! | `group_durable_over_two_nodes` | 5 | `ckpt-group-durable` (k), `--nodes 2` | 3 |
//!
//! Run it in a target directory of its own, so that the failpoint build of `libmpi.so` (and of everything under
//! it) never stands where the other tests look for the normal one:
//! `cargo test -p nemesis-mpi --features failpoints --target-dir target/failpoints --test ft_app_faults`.
//! Against a library without the hook every test fails, saying so.

mod common;
#[path = "common/ft_job.rs"]
mod ft_job;

use std::collections::BTreeMap;
use std::path::PathBuf;

use common::*;
use ft_job::*;

/// The iteration at whose start the point is armed: right after the checkpoint of generation 2.
const ARM_AT: u32 = 8;
/// The generation whose checkpoint the point strikes.
const STRUCK: u64 = 3;
/// `ft_app.c`'s checkpoint interval: generation `g` resumes at iteration `g * EVERY`.
const EVERY: u32 = 4;

/// `ft_app` against the failpoint build of `libmpi.so` (checked once).
fn prog() -> PathBuf {
    static CHECKED: std::sync::OnceLock<()> = std::sync::OnceLock::new();
    CHECKED.get_or_init(|| {
        let run = "cargo test -p nemesis-mpi --features failpoints --target-dir target/failpoints --test ft_app_faults";
        // Before `setup` builds anything: this build's libmpi.so must not take the place of the normal tests' one
        // (the workspace's `target`). The test binary is `<target>/<profile>/deps/<name>`.
        let exe = std::env::current_exe().unwrap();
        let target = exe.ancestors().nth(3).unwrap();
        let normal = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../target");
        let canonical = |p: &std::path::Path| p.canonicalize().unwrap_or_else(|_| p.to_owned());
        assert_ne!(
            canonical(target),
            canonical(&normal),
            "the failpoint build needs a target directory of its own: {run}"
        );
        let s = setup();
        let lib = s.profile_dir.join("libmpi.so");
        assert!(
            exports(&lib, "nemesis_failpoint_arm"),
            "{} does not export nemesis_failpoint_arm: it is not the failpoint build. Run `{run}`",
            lib.display()
        );
    });
    compile_from("tests/c", "ft_app", Cc::Ours)
}

/// Whether the shared library `lib` exports `symbol`.
fn exports(lib: &std::path::Path, symbol: &str) -> bool {
    let path = std::ffi::CString::new(lib.as_os_str().as_encoded_bytes()).unwrap();
    let name = std::ffi::CString::new(symbol).unwrap();
    // SAFETY: `libmpi.so` runs no code when loaded (no constructor); the handle is closed after one lookup.
    unsafe {
        let h = libc::dlopen(path.as_ptr(), libc::RTLD_LAZY | libc::RTLD_LOCAL);
        assert!(!h.is_null(), "cannot load {}", lib.display());
        let found = !libc::dlsym(h, name.as_ptr()).is_null();
        libc::dlclose(h);
        found
    }
}

/// The pid of `rank`'s only incarnation so far.
fn first_pid(job: &Job, rank: u32) -> Option<u32> {
    started_pids(&job.dir).get(&rank).filter(|p| p.len() == 1).map(|p| p[0])
}

/// Whether `pid` is stopped (`/proc/<pid>/stat`: `T`).
fn stopped(pid: u32) -> bool {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    stat.rsplit(')').next().and_then(|t| t.split_whitespace().next()) == Some("T")
}

/// `victim` (and `partner`, if any) dying or stopping at their points (`(rank, point, action)`) in the checkpoint
/// of generation [`STRUCK`]; stopped ones are SIGKILLed, the victim first. Checks the death landed where it was
/// meant to, then the job's end: group `victim / 2` alone restarted, once, from `generation`.
fn dies_at(name: &str, extra: &[&str], points: &[(u32, &str, char)], generation: u64) {
    let p = prog();
    let want = reference(&p, extra);
    let spec: Vec<String> = points.iter().map(|(r, pt, a)| format!("{r}@{ARM_AT}:{pt}:{a}")).collect();
    let job = Job::start_with(&p, name, true, extra, &[], &[("FT_TEST_FP", &spec.join(","))]);
    let victim = points[0].0;
    let expected: Vec<(String, u32)> = if points.iter().all(|&(_, _, a)| a == 's') {
        job.wait_until(&format!("{points:?} to stop"), |j| {
            points.iter().all(|&(r, _, _)| first_pid(j, r).is_some_and(stopped))
        });
        let pids: BTreeMap<u32, u32> = points.iter().map(|&(r, _, _)| (r, first_pid(&job, r).unwrap())).collect();
        // SAFETY: a signal to a rank of this job (its pid from its start file).
        unsafe { libc::kill(pids[&victim] as libc::pid_t, libc::SIGKILL) };
        points.iter().map(|&(r, pt, _)| (pt.to_owned(), pids[&r])).collect()
    } else {
        job.wait_until("the victim's death", |j| !hits_in(&j.dir).is_empty());
        // Only a first incarnation arms a point (a restarted one never does): the victim's pid among its own.
        let pid = hits_in(&job.dir)[0].1;
        assert!(started_pids(&job.dir)[&victim].contains(&pid), "hit by pid {pid}, not rank {victim}");
        vec![(points[0].1.to_owned(), pid)]
    };
    let d = job.finish();
    let mut got = d.hits.clone();
    got.sort();
    let mut expected = expected;
    expected.sort();
    assert_eq!(got, expected, "the record names the points, each hit by its rank's first incarnation");
    let group = victim / 2;
    d.check(&want, &restarts(&[(group, 1)]));
    let lines = recovery_lines(&d.stderr);
    let head = format!("nemesis-run: rank {victim} died (signal 9); group {group} ");
    assert!(lines.len() == 1 && lines[0].starts_with(&head), "one recovery, of group {group}: {}", d.show());
    let from = format!(" restarted from checkpoint {generation} ");
    assert!(lines[0].contains(&from), "group {group} restarted from generation {generation}: {}", d.show());
    resumed_at(&d, &[2 * group, 2 * group + 1], generation as u32 * EVERY);
    assert!(
        d.checkpoint_files.iter().all(|f| f == "groups"),
        "left in the checkpoint directory: {:?}",
        d.checkpoint_files
    );
}

/// Nothing of generation [`STRUCK`] is written: the group restarts from the one before.
#[test]
fn marker_sent() {
    dies_at("marker", &[], &[(3, "ckpt-marker-sent", 'k')], STRUCK - 1);
}

/// Its file is left under its temporary name (removed at the restart): the generation before.
#[test]
fn tmp_written() {
    dies_at("tmp", &[], &[(3, "ckpt-tmp-written", 'k')], STRUCK - 1);
}

/// Its file durable, its partner's not yet renamed: the generation before.
#[test]
fn file_durable_partners_not() {
    let points = [(3, "ckpt-file-durable", 's'), (2, "ckpt-tmp-written", 's')];
    dies_at("durable-one", &[], &points, STRUCK - 1);
}

/// Both files durable, nobody told: generation [`STRUCK`] is complete on disk, and the group restarts from it.
#[test]
fn file_durable_both() {
    let points = [(3, "ckpt-file-durable", 's'), (2, "ckpt-file-durable", 's')];
    dies_at("durable-both", &[], &points, STRUCK);
}

/// It told the group its file is durable, and its partner's file is in place: generation [`STRUCK`] is complete
/// on disk.
#[test]
fn durable_marker_sent() {
    let points = [(3, "ckpt-durable-marker-sent", 's'), (2, "ckpt-file-durable", 's')];
    dies_at("told", &[], &points, STRUCK);
}

/// Right after the group's new generation became durable for it.
#[test]
fn group_durable() {
    dies_at("group-durable", &[], &[(3, "ckpt-group-durable", 'k')], STRUCK);
}

#[test]
fn marker_sent_over_two_nodes() {
    dies_at("marker-2", TWO, &[(5, "ckpt-marker-sent", 'k')], STRUCK - 1);
}

#[test]
fn group_durable_over_two_nodes() {
    dies_at("group-durable-2", TWO, &[(5, "ckpt-group-durable", 'k')], STRUCK);
}
