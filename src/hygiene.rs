//! What a rank leaves to the programs it starts (`system()`, `std::process::Command`): no live
//! process-manager channel, no segment descriptor, no `PMI_*` variables.
//!
//! - The PMI descriptor is made close-on-exec as soon as the client holds it (the segment's
//!   descriptor is, by `Segment::attach_fd`): a child never inherits them.
//! - The `PMI_*` variables (and `MPI_LOCALNRANKS`, `MPI_LOCALRANKID`) are removed from the environment, so that a nemesis program started by a
//!   rank runs as a singleton instead of speaking PMI on a descriptor it does not have. Changing the
//!   environment is sound only while no other thread reads it (`std::env::remove_var`); it is done
//!   only when this process runs a single thread, which it checks (at `Endpoint::init`, before the
//!   network module starts its thread, as in a program that initialises nemesis first). In a
//!   process that already runs threads the variables stay; the bootstrap of such a child then
//!   finds `PMI_FD` naming no socket and fails with a clear error ([`check_pmi_fd`]).

use std::os::fd::RawFd;

use crate::contract::{ENV_FT_FD, ENV_FT_RESTART, ENV_PMI_FD};
use crate::error::{Error, Result};

/// Prefixes of the variables of the process manager's channel, the launcher's description of
/// this rank's node (`MPI_LOCALNRANKS` above 1 would make a nested program refuse to run alone),
/// the job's secret (read before, by the bootstrap), and the launcher's fault-tolerance channel and
/// restart order (read before, by `FtConfig::from_env` and the bootstrap).
const PREFIXES: &[&str] =
    &["PMI_", "MPI_LOCALNRANKS", "MPI_LOCALRANKID", nemesis_shm::auth::ENV_JOB_SECRET, ENV_FT_FD, ENV_FT_RESTART];

/// After the PMI client connected: the channel's descriptor becomes close-on-exec, and the `PMI_*`
/// variables leave the environment if that is sound here.
pub(crate) fn seal_pmi_channel() -> Result<()> {
    if let Some(fd) = pmi_fd() {
        nemesis_shm::os::set_cloexec(fd)?;
    }
    if !scrub_env(PREFIXES) {
        tracing::debug!("PMI_* variables left in the environment: other threads run");
    }
    Ok(())
}

/// Before the PMI client connects: a `PMI_FD` that names no socket was inherited from a rank
/// that started this process (its descriptor closed on exec), not set by a process manager.
pub(crate) fn check_pmi_fd() -> Result<()> {
    let Some(fd) = pmi_fd() else { return Ok(()) };
    // SAFETY: fstat into a zeroed struct we own; any descriptor number is safe to ask about.
    let is_socket = unsafe {
        let mut st: libc::stat = std::mem::zeroed();
        libc::fstat(fd, &mut st) == 0 && st.st_mode & libc::S_IFMT == libc::S_IFSOCK
    };
    if is_socket {
        return Ok(());
    }
    Err(Error::Pmi {
        op: "environment",
        msg: format!(
            "{ENV_PMI_FD}={fd} names no socket: the variable was inherited (from a rank that started this \
             program?), not set by a process manager; unset PMI_FD to run as a singleton"
        ),
    })
}

fn pmi_fd() -> Option<RawFd> {
    std::env::var(ENV_PMI_FD).ok()?.trim().parse().ok()
}

/// Threads of this process (`/proc/self/stat`, field 20), `None` if unknown.
fn thread_count() -> Option<u64> {
    let stat = std::fs::read_to_string("/proc/self/stat").ok()?;
    // Fields resume after the command name's last ')'; field 20 is the 18th after it.
    stat[stat.rfind(')')? + 1..].split_ascii_whitespace().nth(17)?.parse().ok()
}

/// Removes every variable whose name starts with one of `prefixes`, if this process runs a single
/// thread. Returns true if it did.
fn scrub_env(prefixes: &[&str]) -> bool {
    if thread_count() != Some(1) {
        return false;
    }
    let names: Vec<_> = std::env::vars_os()
        .map(|(k, _)| k)
        .filter(|k| k.to_str().is_some_and(|k| prefixes.iter().any(|p| k.starts_with(p))))
        .collect();
    for name in names {
        // SAFETY: this process runs one thread (checked above: only this thread could have started
        // another since), so nothing reads or writes the environment concurrently.
        unsafe { std::env::remove_var(name) };
    }
    true
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn thread_count_sees_this_test_and_its_harness() {
        // The test runs in a thread of the harness: at least two.
        assert!(thread_count().is_some_and(|n| n >= 2), "{:?}", thread_count());
        assert!(!scrub_env(&["NEMESIS_HYGIENE_TEST_"]), "never with other threads running");
    }
}
