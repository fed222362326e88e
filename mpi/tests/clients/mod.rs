//! Helpers of the client tests (`tests/mpi4py.rs`, `tests/rsmpi.rs`, `tests/ft_app.rs`): software nobody here wrote,
//! fetched from PyPI and crates.io, built against `bin/mpicc` and run under `nemesis-run`.
//!
//! Everything they download and build is cached under `target/clients/` (the target directory of
//! the test binary), so a re-run is quick. A build made against nemesis carries a stamp: a hash of
//! `libmpi.so`, `mpi.h` and the wrapper that built it, and is redone when that changes (mpi4py's
//! configure step probes which functions the library exports).
//!
//! The tests need python3 (with venv), pip's network access to PyPI, cargo's to crates.io and
//! libclang: without one of them a test skips with a message, and fails when `CI=true`.

#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::{Duration, Instant};

use crate::common::{ci, run_with_limit, setup, show};

/// `target/clients/<name>`, created.
pub fn dir(name: &str) -> PathBuf {
    let d = setup().profile_dir.parent().unwrap().join("clients").join(name);
    std::fs::create_dir_all(&d).unwrap();
    d
}

/// False (after a message) when `ok` is false and `CI` is not `true`; panics under `CI=true`.
pub fn have(ok: bool, test: &str, what: &str) -> bool {
    if !ok {
        assert!(!ci(), "{test}: {what}, and CI=true");
        eprintln!("SKIPPED {test}: {what}");
    }
    ok
}

/// libclang, which bindgen (rsmpi's `mpi-sys`) loads, is installed.
pub fn have_libclang() -> bool {
    let ld = Command::new("ldconfig").arg("-p").output().map(|o| o.stdout).unwrap_or_default();
    String::from_utf8_lossy(&ld).contains("libclang")
        || std::fs::read_dir("/usr/lib").is_ok_and(|d| {
            d.flatten().any(|e| {
                e.file_name().to_string_lossy().starts_with("llvm-") && e.path().join("lib/libclang.so").exists()
            })
        })
}

/// True if `cmd args` runs and succeeds.
pub fn runs(cmd: &str, args: &[&str]) -> bool {
    Command::new(cmd).args(args).output().is_ok_and(|o| o.status.success())
}

/// Runs `cmd` (at most `limit`), panicking with its output unless it succeeds.
pub fn check(cmd: Command, what: &str, limit: Duration) -> Output {
    let t = Instant::now();
    let o = run_with_limit(cmd, limit);
    assert!(o.status.success(), "{what} failed: {}", show(&o));
    eprintln!("{what}: {:.0?}", t.elapsed());
    o
}

/// FNV-1a of the files' contents, in hex: a stamp stable across runs and toolchains.
pub fn fingerprint(files: &[&Path]) -> String {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for f in files {
        let bytes = std::fs::read(f).unwrap_or_else(|e| panic!("{}: {e}", f.display()));
        for b in bytes.iter().chain(f.as_os_str().as_encoded_bytes()) {
            h = (h ^ u64::from(*b)).wrapping_mul(0x0100_0000_01b3);
        }
    }
    format!("{h:016x}")
}

/// The stamp `key` of a cached build in `dir` (`dir/.stamp`) is current.
pub fn stamped(dir: &Path, key: &str) -> bool {
    std::fs::read_to_string(dir.join(".stamp")).is_ok_and(|s| s == key)
}

pub fn stamp(dir: &Path, key: &str) {
    std::fs::write(dir.join(".stamp"), key).unwrap();
}

/// The key of a build against this checkout's nemesis: the library, the header, the wrappers.
pub fn nemesis_key(extra: &str) -> String {
    let s = setup();
    let lib = std::fs::canonicalize(s.profile_dir.join("libmpi.so")).unwrap();
    let files = [lib.as_path(), &s.mpi.join("include/mpi.h"), &s.mpi.join("bin/mpicc")];
    format!("{extra} nemesis {}", fingerprint(&files))
}

/// The key of a build against Debian's MPICH: its wrapper's version line.
pub fn mpich_key(extra: &str) -> String {
    let o = Command::new("mpicc.mpich").arg("-v").output().map(|o| o.stdout).unwrap_or_default();
    let version = String::from_utf8_lossy(&o).lines().next().unwrap_or_default().to_string();
    format!("{extra} {version}")
}

/// A command with nothing from the environment that would choose the MPI library for it:
/// cargo puts `target/<profile>` (nemesis's `libmpich.so.12`) in the tests' `LD_LIBRARY_PATH`,
/// and mpi4py reads `MPI4PY_LIBMPI`/`MPI4PY_MPIABI`. What the program loads is then what its
/// launcher gives it.
pub fn clean(mut c: Command) -> Command {
    for v in ["LD_LIBRARY_PATH", "LD_PRELOAD", "MPI4PY_LIBMPI", "MPI4PY_MPIABI", "NEMESIS_MPI_LIBDIR", "PYTHONPATH"] {
        c.env_remove(v);
    }
    c
}

/// `nemesis-run -n N [args] -- program...`, cleaned.
pub fn nemesis_run(n: u32, launcher_args: &[&str], program: &[&std::ffi::OsStr]) -> Command {
    let mut c = clean(Command::new(&setup().launcher));
    c.arg("-n").arg(n.to_string()).args(launcher_args).arg("--").args(program);
    c
}

/// `mpiexec.mpich -n N program...`, cleaned: MPICH's own library.
pub fn mpich_run(n: u32, program: &[&std::ffi::OsStr]) -> Command {
    let mut c = clean(Command::new("mpiexec.mpich"));
    c.arg("-n").arg(n.to_string()).args(program);
    c
}

/// How a job run by [`run_logged`] ended.
pub struct Ended {
    /// Its exit status; `None` when it was stopped at the time limit.
    pub status: Option<std::process::ExitStatus>,
    pub elapsed: Duration,
}

/// Runs `cmd` in a process group of its own with stdout and stderr appended to `log`; at `limit`
/// sends SIGTERM to the whole group (the launcher and its ranks), then SIGKILL 5 s later.
pub fn run_logged(mut cmd: Command, log: &Path, limit: Duration) -> Ended {
    use std::os::unix::process::CommandExt;
    let file = std::fs::OpenOptions::new().create(true).append(true).open(log).unwrap();
    cmd.stdin(std::process::Stdio::null()).stdout(file.try_clone().unwrap()).stderr(file).process_group(0);
    let start = Instant::now();
    let mut child = cmd.spawn().unwrap_or_else(|e| panic!("{cmd:?}: {e}"));
    let group = child.id() as libc::pid_t;
    let mut signal = None;
    loop {
        if let Some(st) = child.try_wait().unwrap() {
            let status = if signal.is_some() { None } else { Some(st) };
            // Ranks a failed launcher left behind go with it.
            // SAFETY: kill(2) on our own process group; no memory is passed.
            unsafe { libc::kill(-group, libc::SIGKILL) };
            return Ended { status, elapsed: start.elapsed() };
        }
        let over = start.elapsed().saturating_sub(limit);
        let next = match signal {
            None if over > Duration::ZERO => Some(libc::SIGTERM),
            Some(libc::SIGTERM) if over > Duration::from_secs(5) => Some(libc::SIGKILL),
            _ => None,
        };
        if let Some(sig) = next {
            // SAFETY: as above.
            unsafe { libc::kill(-group, sig) };
            signal = Some(sig);
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}
