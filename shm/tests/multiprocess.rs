//! Real processes on one real segment: one consumer and up to seven producers (oversubscribed on
//! two cores), random sizes through fastboxes and cells, checksums, per-producer order, nothing
//! lost; producers killed with SIGKILL mid-stream; a consumer killed mid-stream; corruption by a
//! hostile process.
//!
//! The test binary re-executes itself for each rank (`--nemesis-test-rank`, our harness:
//! `tests/common/harness.rs` of the workspace; `child` in `multiprocess/cases.rs`); the parent plays the
//! launcher: it creates the segment, passes its descriptor, and marks each rank GONE after
//! `waitpid`. `NEMESIS_STRESS=1` raises the message count to one million.

#[cfg(not(loom))]
#[path = "../../tests/common/harness.rs"]
mod harness;

#[cfg(not(loom))]
#[path = "multiprocess/cases.rs"]
mod cases;

fn main() {
    #[cfg(not(loom))]
    cases::main();
}
