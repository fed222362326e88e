//! Non-blocking collectives under fault tolerance (`mpi/src/coll/nbc/ordered.rs`):
//! `tests/c/ft_nbc.c` runs `MPI_Iallreduce`, `MPI_Ibcast`, `MPI_Iscan` and `MPI_Ibarrier` with
//! point-to-point traffic among them, `MPI_Test` loops and crossed wait orders, checkpointing as
//! it goes. Under `nemesis-run --ft-groups` every message carries its stamp (sequence number and
//! digest); a restarted group re-executes its collectives and the other group checks that their
//! sends are the first run's, message for message.
//!
//! | Test | What | Ranks |
//! |---|---|---|
//! | `nbc_under_ft_without_failures` | the program with and without `--ft-groups 2`: every rank's checks pass and the sums agree | 2, 4, 8 one node; 4 over `--nodes 2` |
//! | `nbc_reexecuted_after_a_restart` | rank 3 killed after its first checkpoint: its group restarts and re-executes collectives whose sends the other group had received; no `SendDeterminismViolated`, and the sums equal the failure-free run's | 4 in 2 groups, one node |
//!
//! The library and the launcher are built first (`common::setup`).

mod common;

use std::path::Path;
use std::process::Output;

use common::*;

/// `ft_nbc` on `n` ranks (launcher arguments `extra`), rank `kill` (if any) held after its first
/// checkpoint and SIGKILLed there.
fn run(prog: &Path, name: &str, n: u32, extra: &[&str], kill: Option<u32>) -> Output {
    ft_run(prog, name, n, extra, kill, &[])
}

#[test]
fn nbc_under_ft_without_failures() {
    let prog = compile_from("tests/c", "ft_nbc", Cc::Ours);
    for (n, extra) in [(2, &[][..]), (4, &[]), (8, &[]), (4, &["--nodes", "2"])] {
        let plain = run(&prog, &format!("plain-{n}"), n, extra, None);
        assert_all_ok(&plain, "ft_nbc", n);
        let groups = if n == 8 { "4" } else { "2" };
        let mut args = vec!["--ft-groups", groups];
        args.extend_from_slice(extra);
        let ft = run(&prog, &format!("ft-{n}-{}", extra.len()), n, &args, None);
        assert_all_ok(&ft, "ft_nbc", n);
        assert_eq!(ft_sums(&ft), ft_sums(&plain), "{n} ranks {extra:?}: {}", show(&ft));
        assert_eq!(ft_sums(&ft).len(), n as usize, "{}", show(&ft));
    }
}

#[test]
fn nbc_reexecuted_after_a_restart() {
    let prog = compile_from("tests/c", "ft_nbc", Cc::Ours);
    let reference = run(&prog, "ref", 4, &["--ft-groups", "2"], None);
    assert_all_ok(&reference, "ft_nbc", 4);
    let o = run(&prog, "kill", 4, &["--ft-groups", "2"], Some(3));
    assert_all_ok(&o, "ft_nbc", 4);
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(!err.contains("send determinism"), "{}", show(&o));
    assert_eq!(ft_sums(&o), ft_sums(&reference), "{}", show(&o));
    let line = "nemesis-run: rank 3 died (signal 9); group 1 (ranks 2,3) restarted from ";
    assert!(err.lines().any(|l| l.starts_with(line)), "{line}: {}", show(&o));
    for r in [2, 3] {
        let resumed = format!("ft_nbc: rank {r} resumes at iteration 6");
        assert!(err.lines().any(|l| l.starts_with(&resumed)), "{resumed}: {}", show(&o));
    }
}
