//! An application shaped like real codes recovers (issue 33): `tests/c/ft_app.c` (a Jacobi
//! relaxation on a 2-D Cartesian grid with `Isend`/`Irecv` halos and a column datatype, a row
//! `Comm_split` and `Allreduce`, a residual `Allreduce`, `Bcast`s, a user operation, a
//! send-deterministic manager/worker phase with `MPI_ANY_SOURCE`), checkpointed with
//! `MPIX_Checkpoint` every 4 of its 48 iterations, on 8 ranks in 4 groups of 2 under
//! `nemesis-run --ft-groups 4 --wait yield`. After every failure scenario rank 0's checksum is the
//! failure-free run's, exactly the failed groups were started again (their start files and the
//! launcher's log), and each restarted rank resumed at the iteration where the test killed it.
//!
//! Every kill lands where the test chose, never against a clock: the victim's incarnation holds
//! at the start of an iteration (`FT_TEST_HOLD=<rank>@<incarnation>:<iteration>`, right after
//! that iteration's checkpoint), its pid in a marker file, serving its endpoint until it is
//! SIGKILLed; the pid killed is the marker's, and the restarted ranks say they resume there.
//!
//! | Test (in `c` and `rust`) | Kills | Groups restarted |
//! |---|---|---|
//! | `the_same_answer_with_and_without_fault_tolerance` | none; FT on and off (equal but for the residual's last bits: `rounded`) | none |
//! | `failure_free_over_two_nodes` | none; `--nodes 2` (the same, `rounded`) | none |
//! | `one_rank_killed` | rank 5 at iteration 8 | 2 |
//! | `a_whole_group_killed` | ranks 2 and 3 at iteration 8 | 1 |
//! | `ranks_of_two_groups_killed_at_once` | ranks 1 and 6 at iteration 8 | 0, 3 |
//! | `ranks_of_every_group_killed_at_once` | ranks 0, 3, 4 and 7 at iteration 8 | 0, 1, 2, 3 |
//! | `a_rank_killed_during_another_groups_recovery` | rank 2 at 8, then rank 7 (held at 8) once group 1 restarted | 1 (twice if a second round), 3 |
//! | `five_failures_in_one_run` | 5, 0, 3, 6 at 8, 16, 24, 32, then 5 again at 40, each after the previous recovery | 2 twice, 0, 1, 3 |
//!
//! Each also `..._over_two_nodes` (`--nodes 2`: ranks 0–3 and 4–7 on two node identities over
//! the TCP netmod; `MPI_Init` on a restart exchanges nothing: every rank's node comes from the
//! launcher).
//!
//! Every scenario runs the C program (module `c`) and the same program in Rust through rsmpi
//! (module `rust`: `tests/clients/ft_app_rsmpi.rs`, crates.io `mpi` 0.8.2 without its libffi
//! feature, built with `bin/mpicc` in `target/clients/ft_app_rsmpi/`, rebuilt when `libmpi.so`,
//! `mpi.h` or `bin/mpicc` change; skipped with a message without libclang or the crate, failing
//! under `CI=true`). Both print the same checksum, bit for bit (`rust::the_same_answer_as_c`).

mod clients;
mod common;
#[path = "common/ft_job.rs"]
mod ft_job;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use clients::{dir, have, have_libclang, nemesis_key, stamp, stamped};
use common::*;
use ft_job::*;

fn one_rank(prog: &Path, extra: &[&str]) {
    let want = reference(prog, extra);
    let job = Job::start(prog, "one", true, extra, &[(5, 0, 8)]);
    job.kill_held(&[(5, 0, 8)]);
    let d = job.finish();
    d.check(&want, &restarts(&[(2, 1)]));
    resumed_at(&d, &[4, 5], 8);
    let lines = recovery_lines(&d.stderr);
    assert_eq!(lines.len(), 1, "{}", d.show());
    assert!(lines[0].starts_with("nemesis-run: rank 5 died (signal 9); group 2 (ranks 4,5) restarted from "));
}

fn a_whole_group(prog: &Path, extra: &[&str]) {
    let want = reference(prog, extra);
    let holds = [(2, 0, 8), (3, 0, 8)];
    let job = Job::start(prog, "group", true, extra, &holds);
    job.kill_held(&holds);
    let d = job.finish();
    d.check(&want, &restarts(&[(1, 1)]));
    resumed_at(&d, &[2, 3], 8);
    assert!(!recovery_lines(&d.stderr).is_empty(), "{}", d.show());
}

fn two_groups_at_once(prog: &Path, extra: &[&str]) {
    let want = reference(prog, extra);
    let holds = [(1, 0, 8), (6, 0, 8)];
    let job = Job::start(prog, "two", true, extra, &holds);
    job.kill_held(&holds);
    let d = job.finish();
    d.check(&want, &restarts(&[(0, 1), (3, 1)]));
    resumed_at(&d, &[0, 1, 6, 7], 8);
    assert_eq!(recovery_lines(&d.stderr).len(), 2, "{}", d.show());
}

/// One rank of every group (all of them held at iteration 8) killed together: every group
/// restarts, no survivor is left to replay anything, each group from its own checkpoint.
fn every_group_at_once(prog: &Path, extra: &[&str]) {
    let want = reference(prog, extra);
    let holds = [(0, 0, 8), (3, 0, 8), (4, 0, 8), (7, 0, 8)];
    let job = Job::start(prog, "every", true, extra, &holds);
    job.kill_held(&holds);
    let d = job.finish();
    d.check(&want, &restarts(&[(0, 1), (1, 1), (2, 1), (3, 1)]));
    resumed_at(&d, &[0, 1, 2, 3, 4, 5, 6, 7], 8);
}

fn during_another_groups_recovery(prog: &Path, extra: &[&str]) {
    let want = reference(prog, extra);
    // Both hold at iteration 8 (the Allreduce of every iteration keeps everyone within it).
    let job = Job::start(prog, "during", true, extra, &[(2, 0, 8), (7, 0, 8)]);
    job.kill_held(&[(2, 0, 8)]);
    // Group 1 is recovering (its new incarnations have started): rank 7 dies now.
    job.wait_until("group 1's restart", |j| j.started().get(&3).copied() == Some(2));
    job.kill_held(&[(7, 0, 8)]);
    let d = job.finish();
    // A second death before the first round completed restarts group 1 once more with group 3.
    let again = usize::from(d.stderr.contains("round=2 groups=[1, 3]"));
    d.check(&want, &restarts(&[(1, 1 + again), (3, 1)]));
    resumed_at(&d, &[2, 3, 6, 7], 8);
    assert_eq!(recovery_lines(&d.stderr).len(), 2, "{}", d.show());
    eprintln!("second round over both groups: {}", again == 1);
}

fn five_failures(prog: &Path, extra: &[&str]) {
    let want = reference(prog, extra);
    let holds = [(5, 0, 8), (0, 0, 16), (3, 0, 24), (6, 0, 32), (5, 1, 40)];
    let job = Job::start(prog, "five", true, extra, &holds);
    for (k, &h) in holds.iter().enumerate() {
        job.wait_until("the previous recovery", |j| j.recoveries() == k);
        job.kill_held(&[h]);
    }
    let d = job.finish();
    d.check(&want, &restarts(&[(2, 2), (0, 1), (1, 1), (3, 1)]));
    for &(r, _, it) in &holds {
        resumed_at(&d, &[r, r ^ 1], it);
    }
    assert_eq!(recovery_lines(&d.stderr).len(), 5, "{}", d.show());
}

/// The program of the tests in module `c` or `rust`.
enum Lang {
    C,
    Rust,
}

fn program(lang: Lang) -> Option<PathBuf> {
    match lang {
        Lang::C => Some(compile_from("tests/c", "ft_app", Cc::Ours)),
        Lang::Rust => rsmpi_app(),
    }
}

/// `tests/clients/ft_app_rsmpi.rs` built against rsmpi and `bin/mpicc` (once per test binary);
/// `None` (after a message) when it cannot be built here.
fn rsmpi_app() -> Option<PathBuf> {
    static BUILT: std::sync::OnceLock<Option<PathBuf>> = std::sync::OnceLock::new();
    BUILT
        .get_or_init(|| {
            let test = "ft_app (Rust)";
            if !have(have_libclang(), test, "libclang is missing (apt-get install libclang-dev), which bindgen needs") {
                return None;
            }
            let dir = dir("ft_app_rsmpi");
            let s = setup();
            let src = s.mpi.join("tests/clients/ft_app_rsmpi.rs");
            std::fs::write(
                dir.join("Cargo.toml"),
                format!(
                    "[package]\nname = \"ft_app_rsmpi\"\nversion = \"0.0.0\"\nedition = \"2021\"\n\n\
                     [dependencies]\nmpi = {{ version = \"=0.8.2\", default-features = false }}\n\n\
                     [[bin]]\nname = \"ft_app_rsmpi\"\npath = \"{}\"\n\n[workspace]\n",
                    src.display()
                ),
            )
            .unwrap();
            let cargo = || {
                let mut c = Command::new(std::env::var("CARGO").unwrap_or_else(|_| "cargo".into()));
                c.current_dir(&dir).env_remove("CARGO_TARGET_DIR").env("RUSTFLAGS", "--cap-lints=warn");
                c
            };
            let key = nemesis_key("ft_app_rsmpi");
            if !stamped(&dir, &key) {
                // bindgen's output follows mpi.h, which cargo does not watch.
                let _ = cargo().args(["clean", "-q", "-p", "mpi-sys", "--target-dir", "target"]).output();
            }
            let mut c = cargo();
            c.args(["build", "-q", "--target-dir", "target"])
                .env("MPICC", s.mpi.join("bin/mpicc"))
                .env("NEMESIS_MPI_LIBDIR", &s.profile_dir);
            let o = run_with_limit(c, Duration::from_secs(1800));
            if !have(o.status.success(), test, &format!("cargo cannot build it with rsmpi 0.8.2: {}", show(&o))) {
                return None;
            }
            stamp(&dir, &key);
            Some(dir.join("target/debug/ft_app_rsmpi"))
        })
        .clone()
}

/// The scenarios for one program (`lang`).
macro_rules! matrix {
    ($lang:expr) => {
        use super::*;

        fn prog() -> Option<PathBuf> {
            program($lang)
        }

        #[test]
        fn the_same_answer_with_and_without_fault_tolerance() {
            let Some(p) = prog() else { return };
            let on = reference(&p, &[]);
            let off = Job::start(&p, "off", false, &[], &[]).finish();
            let off_sum = off.checksum();
            off.check(&off_sum, &BTreeMap::new());
            assert_eq!(rounded(&off_sum), rounded(&on), "{}", off.show());
        }

        #[test]
        fn failure_free_over_two_nodes() {
            let Some(p) = prog() else { return };
            let on = reference(&p, TWO);
            assert_eq!(rounded(&on), rounded(&reference(&p, &[])), "the answer depends on the nodes");
        }

        #[test]
        fn one_rank_killed() {
            let Some(p) = prog() else { return };
            one_rank(&p, &[]);
        }

        #[test]
        fn a_whole_group_killed() {
            let Some(p) = prog() else { return };
            a_whole_group(&p, &[]);
        }

        #[test]
        fn ranks_of_two_groups_killed_at_once() {
            let Some(p) = prog() else { return };
            two_groups_at_once(&p, &[]);
        }

        #[test]
        fn ranks_of_every_group_killed_at_once() {
            let Some(p) = prog() else { return };
            every_group_at_once(&p, &[]);
        }

        #[test]
        fn ranks_of_every_group_killed_at_once_over_two_nodes() {
            let Some(p) = prog() else { return };
            every_group_at_once(&p, TWO);
        }

        #[test]
        fn a_rank_killed_during_another_groups_recovery() {
            let Some(p) = prog() else { return };
            during_another_groups_recovery(&p, &[]);
        }

        #[test]
        fn five_failures_in_one_run() {
            let Some(p) = prog() else { return };
            five_failures(&p, &[]);
        }

        #[test]
        fn one_rank_killed_over_two_nodes() {
            let Some(p) = prog() else { return };
            one_rank(&p, TWO);
        }

        #[test]
        fn a_whole_group_killed_over_two_nodes() {
            let Some(p) = prog() else { return };
            a_whole_group(&p, TWO);
        }

        #[test]
        fn ranks_of_two_groups_killed_at_once_over_two_nodes() {
            let Some(p) = prog() else { return };
            two_groups_at_once(&p, TWO);
        }

        #[test]
        fn a_rank_killed_during_another_groups_recovery_over_two_nodes() {
            let Some(p) = prog() else { return };
            during_another_groups_recovery(&p, TWO);
        }

        #[test]
        fn five_failures_in_one_run_over_two_nodes() {
            let Some(p) = prog() else { return };
            five_failures(&p, TWO);
        }
    };
}

mod c {
    matrix!(Lang::C);
}

mod rust {
    matrix!(Lang::Rust);

    /// rsmpi's program computes what the C one does, bit for bit.
    #[test]
    fn the_same_answer_as_c() {
        let Some(p) = prog() else { return };
        let c = program(Lang::C).unwrap();
        assert_eq!(reference(&p, &[]), reference(&c, &[]));
    }
}
