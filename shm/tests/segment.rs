//! Segment creation on both paths: the named segment's life cycle, and a full `/dev/shm` or a
//! memory limit reported as [`Error::NoSpace`] at creation (never a SIGBUS later).
//!
//! The `/dev/shm` case mounts a 1 MiB tmpfs over `/dev/shm` in a private mount namespace of a
//! child process; it needs the right to do so (root). Without it the test is skipped with a
//! message, unless `CI=true`, where it fails.
//!
//! The test binary is also the program of the child processes (`--nemesis-test-rank`, our harness:
//! `tests/common/harness.rs` of the workspace).

#[cfg(not(loom))]
#[path = "../../tests/common/harness.rs"]
mod harness;

#[cfg(not(loom))]
#[path = "segment/cases.rs"]
mod cases;

fn main() {
    #[cfg(not(loom))]
    cases::main();
}
