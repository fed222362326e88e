//! The MPI state across a restart (`mpi/src/ft/image.rs`): `tests/c/ft_state.c` keeps the handles
//! of a split row communicator (named, `MPI_ERRORS_RETURN`, an attribute with a delete callback),
//! a Cartesian grid, a vector datatype, a user operation, a keyval, an info object, a group and a
//! persistent send/receive pair with the other group's rank and persistent collectives on the
//! row (barrier, allreduce with the user operation, bcast of the vector type, reduce, gather,
//! alltoall, scan, reduce_scatter(_block), allgatherv, alltoallv, alltoallw, gatherv;
//! neighbourhood allgather, alltoallv and alltoallw on the grid; all inactive at the checkpoint, their buffers at a fixed address),
//! an error class and code with strings, the row's hints, attached buffers of buffered sends (the
//! process's, the row's, a session's), a session with a group of its process set and a
//! communicator from it, partitioned send/receive pairs and a persistent allreduce whose
//! datatype and operation were freed, in the bytes it checkpoints, and uses them after (a new
//! error code, a communicator from the session's group and a partitioned send made after the
//! restart agree with the survivors'); before each checkpoint one is refused (`MPI_ERR_PENDING`)
//! with a buffered send in flight and with a generalized request outstanding; a rank is SIGKILLed after a checkpoint, its
//! group restarts from it under `nemesis-run --ft-groups`, and every rank's sum is the
//! failure-free run's.
//!
//! | Test | What | Ranks |
//! |---|---|---|
//! | `handles_survive_a_restart` | rank 3 killed after its first checkpoint: its group (ranks 2, 3) restarts, reads its handles back and uses them (`MPI_Start` on the persistent requests matches the survivors' messages; the persistent collectives' handles are valid and their starts give the failure-free results); sums equal the failure-free run's | 4 in 2 groups, one node |
//! | `handles_survive_a_restart_over_two_nodes` | the same with `--nodes 2` (the restarted ranks learn every rank's node from the launcher: `MPI_Init` exchanges nothing) | 4 in 2 groups, 2 nodes |
//! | `a_restore_after_new_objects_is_refused` | the restarted incarnation makes a datatype before `MPIX_Checkpoint_restore`: refused (`MPIX_ERR_NOT_RESTORED`, the restart contract), the job ends | 4 in 2 groups |
//! | `without_fault_tolerance_nothing_is_saved` | the program runs through without `--ft` (checkpoints write nothing) | 4 |
//! | `windows_survive_a_restart` | `ft_win.c`: each group's windows of every flavour (allocate_shared, allocate, create, dynamic with a region; name, attribute, user error handler), RMA each iteration (put under fence, fetch_and_op and get under locks); a checkpoint inside a lock epoch refused; rank 3 killed after its first checkpoint: its group restores the same handles, `MPI_WIN_BASE` and allocated contents, RMA goes on; sums equal the failure-free run's | 4 in 2 groups, one node |
//! | `windows_survive_a_restart_over_two_nodes` | the same, each group on a node of its own | 4 in 2 groups, 2 nodes |
//! | `windows_across_nodes_survive_a_restart` | the same, each group's ranks on two nodes (window 0 by `MPI_Win_allocate`): every window by the remote path | 4 in 2 groups, 4 nodes |
//! | `windows_without_fault_tolerance` | `ft_win.c` without `--ft`: checkpoints with windows alive are allowed (and refused inside epochs) and write nothing | 4 |
//!
//! The library and the launcher are built first (`common::setup`).

mod common;

use std::path::Path;
use std::process::Output;

use common::*;

/// `ft_state` on 4 ranks in 2 groups (extra launcher arguments `extra`), rank `kill` (if any)
/// held after its first checkpoint and SIGKILLed there.
fn run(prog: &Path, name: &str, extra: &[&str], kill: Option<u32>) -> Output {
    run_env(prog, name, extra, kill, &[])
}

/// [`run`] with more environment.
fn run_env(prog: &Path, name: &str, extra: &[&str], kill: Option<u32>, env: &[(&str, &str)]) -> Output {
    let args: Vec<&str> = ["--ft-groups", "2"].into_iter().chain(extra.iter().copied()).collect();
    ft_run(prog, name, 4, &args, kill, env)
}

/// `prog` (from `tests/c`) on 4 ranks in 2 groups, and again with rank 3 killed after its first
/// checkpoint: both end well with the same sums, the launcher restarted group 1, and each of its
/// ranks printed `resumed(rank)` (the restarted ranks checked their state themselves).
fn survives(prog: &str, extra: &[&str], name: &str, resumed: impl Fn(u32) -> String) {
    let exe = compile_from("tests/c", prog, Cc::Ours);
    let reference = run(&exe, &format!("{name}-ref"), extra, None);
    assert_all_ok(&reference, prog, 4);
    let o = run(&exe, name, extra, Some(3));
    assert_all_ok(&o, prog, 4);
    assert_eq!(ft_sums(&o), ft_sums(&reference), "{}", show(&o));
    assert_eq!(ft_sums(&o).len(), 4, "{}", show(&o));
    let err = String::from_utf8_lossy(&o.stderr);
    let line = "nemesis-run: rank 3 died (signal 9); group 1 (ranks 2,3) restarted from ";
    assert!(err.lines().any(|l| l.starts_with(line)), "{line}: {}", show(&o));
    for r in [2, 3] {
        let resumed = resumed(r);
        assert!(err.lines().any(|l| l.starts_with(&resumed)), "{resumed}: {}", show(&o));
    }
}

fn handles_survive(extra: &[&str], name: &str) {
    survives("ft_state", extra, name, |r| format!("ft_state: rank {r} resumes at iteration 4 "));
}

#[test]
fn handles_survive_a_restart() {
    handles_survive(&[], "one-node");
}

#[test]
fn handles_survive_a_restart_over_two_nodes() {
    handles_survive(&["--nodes", "2"], "two-nodes");
}

#[test]
fn a_restore_after_new_objects_is_refused() {
    let prog = compile_from("tests/c", "ft_state", Cc::Ours);
    let o = run_env(&prog, "early", &[], Some(3), &[("FT_STATE_EARLY", "1")]);
    assert!(!o.status.success(), "{}", show(&o));
    let err = String::from_utf8_lossy(&o.stderr);
    let refused = err.lines().any(|l| {
        l.contains("MPI_Type_contiguous failed: MPIX_ERR_NOT_RESTORED")
            && l.contains("before MPIX_Checkpoint_restore, which comes right after MPI_Init")
    });
    assert!(refused, "{}", show(&o));
    assert!(!err.contains("was not refused"), "{}", show(&o));
}

#[test]
fn without_fault_tolerance_nothing_is_saved() {
    let prog = compile_from("tests/c", "ft_state", Cc::Ours);
    let o = job(4, &prog, &[], &[]);
    assert_all_ok(&o, "ft_state", 4);
}

/// `ft_win` (windows of every flavour in the image, `mpi/src/ft/image/windows.rs`) on 4 ranks in
/// 2 groups; rank 3 killed after its first checkpoint: the sums equal the failure-free run's,
/// the restarted ranks checked their windows (`tests/c/ft_win.c`); `spans`: each group's two
/// ranks are on two nodes (every window by the remote path).
fn windows_survive(extra: &[&str], name: &str, spans: bool) {
    let spans = u8::from(spans);
    survives("ft_win", extra, name, |r| format!("ft_win: rank {r} resumes at iteration 4, spans {spans} "));
}

#[test]
fn windows_survive_a_restart() {
    windows_survive(&[], "win-one-node", false);
}

#[test]
fn windows_survive_a_restart_over_two_nodes() {
    windows_survive(&["--nodes", "2"], "win-two-nodes", false);
}

#[test]
fn windows_across_nodes_survive_a_restart() {
    windows_survive(&["--nodes", "4"], "win-four-nodes", true);
}

#[test]
fn windows_without_fault_tolerance() {
    let prog = compile_from("tests/c", "ft_win", Cc::Ours);
    let o = job(4, &prog, &[], &[]);
    assert_all_ok(&o, "ft_win", 4);
}
