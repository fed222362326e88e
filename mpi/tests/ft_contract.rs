//! The restart contract and fault-tolerance errors through the error handler (`mpi/src/ft/mod.rs`,
//! `mpi/src/error.rs`), under `nemesis-run --ft-groups 2` on 4 ranks.
//!
//! | Test | What | Ranks |
//! |---|---|---|
//! | `a_restarted_rank_communicates_nothing_before_its_restore` | `tests/c/ft_contract.c`: rank 3 kills itself after its first checkpoint; before their restore, the restarted ranks 2 and 3 try every kind of communication: each returns `MPIX_ERR_NOT_RESTORED` at once; sums equal the failure-free run's | 4 in 2 groups, one node |
//! | `…_over_two_nodes` | the same with `--nodes 2` | 4 in 2 groups, 2 nodes |
//! | `without_fault_tolerance_multiple_is_granted` | `ft_contract.c` without `--ft-groups`: `MPI_THREAD_MULTIPLE` granted (with it, every test above checks `MPI_THREAD_SERIALIZED`) | 1, 4; 4 over 2 nodes |
//! | `a_collective_before_the_restore_ends_the_job_under_errors_are_fatal` | the restarted rank's `MPI_Allreduce` before its restore, under `MPI_ERRORS_ARE_FATAL`: the job ends with a message naming the call and the class | 4 in 2 groups |
//! | `a_full_sender_log_is_mpix_err_log_exhausted` | `tests/c/ft_errors.c` (`FT_ERRORS=log`), a 4 KiB sender log: rank 0's send to another group returns `MPIX_ERR_LOG_EXHAUSTED` under `MPI_ERRORS_RETURN`, `MPI_Error_string` names the bounds, the messages before it arrive | 4 in 2 groups; one node and 2 nodes |
//! | `a_program_that_is_not_send_deterministic_ends_the_job` | `ft_errors.c` (`FT_ERRORS=determinism`): a restarted rank re-sends with other contents; under `MPI_ERRORS_ARE_FATAL` the job ends with `MPIX_ERR_SEND_DETERMINISM` naming the message | 4 in 2 groups |
//!
//! The library and the launcher are built first (`common::setup`).

mod common;

use std::process::Output;

use common::*;

/// `prog` on 4 ranks in 2 groups (extra launcher arguments `extra`), with a checkpoint directory
/// of its own (`name`) and environment `env`.
fn ft_job(prog: &std::path::Path, name: &str, extra: &[&str], env: &[(&str, &str)]) -> Output {
    let args: Vec<&str> = ["--ft-groups", "2"].into_iter().chain(extra.iter().copied()).collect();
    ft_run(prog, name, 4, &args, None, env)
}

fn contract(extra: &[&str], name: &str) {
    let prog = compile_from("tests/c", "ft_contract", Cc::Ours);
    let reference = ft_job(&prog, &format!("{name}-ref"), extra, &[]);
    assert_all_ok(&reference, "ft_contract", 4);
    let o = ft_job(&prog, name, extra, &[("FT_CONTRACT_KILL", "3")]);
    assert_all_ok(&o, "ft_contract", 4);
    assert_eq!(ft_sums(&o), ft_sums(&reference), "{}", show(&o));
    assert_eq!(ft_sums(&o).len(), 4, "{}", show(&o));
    let err = String::from_utf8_lossy(&o.stderr);
    let line = "nemesis-run: rank 3 died (signal 9); group 1 (ranks 2,3) restarted from ";
    assert!(err.lines().any(|l| l.starts_with(line)), "{line}: {}", show(&o));
    for r in [2, 3] {
        let resumed = format!("ft_contract: rank {r} resumes at iteration 4");
        assert!(err.lines().any(|l| l == resumed), "{resumed}: {}", show(&o));
    }
}

#[test]
fn a_restarted_rank_communicates_nothing_before_its_restore() {
    contract(&[], "one-node");
}

#[test]
fn a_restarted_rank_communicates_nothing_before_its_restore_over_two_nodes() {
    contract(&["--nodes", "2"], "two-nodes");
}

#[test]
fn without_fault_tolerance_multiple_is_granted() {
    let prog = compile_from("tests/c", "ft_contract", Cc::Ours);
    for (n, extra) in [(1, &[][..]), (4, &[][..]), (4, &["--nodes", "2"][..])] {
        let o = job(n, &prog, extra, &[]);
        assert_all_ok(&o, "ft_contract", n);
    }
}

#[test]
fn a_collective_before_the_restore_ends_the_job_under_errors_are_fatal() {
    let prog = compile_from("tests/c", "ft_contract", Cc::Ours);
    let o = ft_job(&prog, "fatal", &[], &[("FT_CONTRACT_KILL", "3"), ("FT_CONTRACT_FATAL", "1")]);
    assert!(!o.status.success(), "{}", show(&o));
    let err = String::from_utf8_lossy(&o.stderr);
    let named = err.lines().any(|l| {
        l.contains(
            "MPI_Allreduce failed: MPIX_ERR_NOT_RESTORED: called on a restarted rank before MPIX_Checkpoint_restore",
        )
    });
    assert!(named, "{}", show(&o));
    assert!(!err.contains("did not end the job"), "{}", show(&o));
}

/// `tests/c/ft_errors.c` with `FT_ERRORS=log` and a 4 KiB sender log (memory and spill file):
/// rank 0's sends to another group fail with `MPIX_ERR_LOG_EXHAUSTED` under `MPI_ERRORS_RETURN`,
/// and the messages sent before arrive.
#[test]
fn a_full_sender_log_is_mpix_err_log_exhausted() {
    let prog = compile_from("tests/c", "ft_errors", Cc::Ours);
    for (name, extra) in [("log-one-node", &[][..]), ("log-two-nodes", &["--nodes", "2"][..])] {
        let env = [("FT_ERRORS", "log"), ("NEMESIS_FT_LOG_MAX", "4096"), ("NEMESIS_FT_SPILL_MAX", "4096")];
        let o = ft_job(&prog, name, extra, &env);
        assert_all_ok(&o, "ft_errors", 4);
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(
            err.contains("sends, then MPIX_ERR_LOG_EXHAUSTED: the fault-tolerance sender log is full"),
            "{}",
            show(&o)
        );
    }
}

/// `tests/c/ft_errors.c` with `FT_ERRORS=determinism`: a restarted rank re-sends messages its
/// receiver already has, with other contents; under `MPI_ERRORS_ARE_FATAL` the job ends with
/// `MPIX_ERR_SEND_DETERMINISM` naming rank 3's message to rank 0.
#[test]
fn a_program_that_is_not_send_deterministic_ends_the_job() {
    let prog = compile_from("tests/c", "ft_errors", Cc::Ours);
    let o = ft_job(&prog, "determinism", &[], &[("FT_ERRORS", "determinism")]);
    assert!(!o.status.success(), "{}", show(&o));
    let err = String::from_utf8_lossy(&o.stderr);
    let named = err.lines().any(|l| {
        l.contains("MPI_Sendrecv failed: MPIX_ERR_SEND_DETERMINISM: ")
            && l.contains("send determinism violated: rank 3's message")
            && l.contains("to rank 0")
    });
    assert!(named, "{}", show(&o));
    assert!(!err.contains("were not detected"), "{}", show(&o));
}
