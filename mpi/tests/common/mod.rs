//! Helpers of the integration tests that build C programs against the library and run them:
//! building the library and the launcher, compiling with `bin/mpicc` (or MPICH's `mpicc.mpich`),
//! running jobs with a time limit, and checking every rank's `OK` line.

#![allow(dead_code)]

use std::collections::HashMap;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::sync::{Mutex, OnceLock};
use std::time::{Duration, Instant};

/// Where things are.
pub struct Setup {
    /// `target/<profile>`: `libmpi.so` and `nemesis-run`.
    pub profile_dir: PathBuf,
    /// Compiled test programs.
    pub out: PathBuf,
    pub launcher: PathBuf,
    /// `mpi/`.
    pub mpi: PathBuf,
}

pub fn setup() -> &'static Setup {
    static SETUP: OnceLock<Setup> = OnceLock::new();
    SETUP.get_or_init(|| {
        let exe = std::env::current_exe().unwrap();
        // target/<profile>/deps/<test binary>
        let profile_dir = exe.parent().unwrap().parent().unwrap().to_path_buf();
        let target_dir = profile_dir.parent().unwrap().to_path_buf();
        let mpi = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
        let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
        let mut build = Command::new(cargo);
        build.current_dir(&mpi).args([
            "build",
            "-q",
            "-p",
            "nemesis-mpi",
            "-p",
            "nemesis",
            "--lib",
            "--bin",
            "nemesis-run",
            "--example",
            "ft_stencil",
        ]);
        build.arg("--target-dir").arg(&target_dir);
        if cfg!(feature = "rdma") {
            build.args(["--features", "nemesis/rdma"]);
        }
        if cfg!(feature = "pmix") {
            build.args(["--features", "nemesis-mpi/pmix"]);
        }
        // The failpoint build (`tests/ft_app_faults.rs`) in its own target directory: see that test.
        if cfg!(feature = "failpoints") {
            build.args(["--features", "nemesis-mpi/failpoints"]);
        }
        if profile_dir.file_name().is_some_and(|n| n == "release") {
            build.arg("--release");
        }
        let st = build.status().expect("cargo build of libmpi.so, nemesis-run and the ft_stencil example");
        assert!(st.success(), "cargo build of libmpi.so, nemesis-run and the ft_stencil example failed");
        let out = profile_dir.join("mpi-tests");
        std::fs::create_dir_all(&out).unwrap();
        Setup { launcher: profile_dir.join("nemesis-run"), profile_dir, out, mpi }
    })
}

/// `mpi/bin/mpicc` using this build's library.
pub fn mpicc() -> Command {
    let s = setup();
    let mut c = Command::new(s.mpi.join("bin/mpicc"));
    c.env("NEMESIS_MPI_LIBDIR", &s.profile_dir);
    c
}

/// Who compiles a test program.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Cc {
    /// `bin/mpicc` against this build's `libmpi.so`.
    Ours,
    /// `bin/mpicc` into a shared library `lib<name>.so`.
    OursShared,
    /// Debian's `mpicc.mpich` against MPICH's `mpi.h` and `libmpich.so.12`.
    Mpich,
}

/// True if MPICH's compiler wrapper is installed (`libmpich-dev`). Without it a test that needs
/// it skips with a message, and fails when `CI=true`.
pub fn have_mpich_cc(test: &str) -> bool {
    let found = Command::new("mpicc.mpich").arg("-show").output().is_ok_and(|o| o.status.success());
    if !found {
        assert!(!ci(), "{test}: mpicc.mpich is missing (apt-get install libmpich-dev) and CI=true");
        eprintln!("SKIPPED {test}: mpicc.mpich not found (apt-get install libmpich-dev)");
    }
    found
}

/// Compiles `tests/c/<name>.c` (once per test binary) into an executable, or with `shared` into
/// `lib<name>.so`.
pub fn compile(name: &str, shared: bool) -> PathBuf {
    compile_with(name, if shared { Cc::OursShared } else { Cc::Ours })
}

/// Compiles `tests/c/<name>.c` (once per test binary and compiler).
pub fn compile_with(name: &str, cc: Cc) -> PathBuf {
    compile_from("tests/c", name, cc)
}

/// Compiles `<dir>/<name>.c` of `mpi/` (once per test binary and compiler), as [`compile_with`].
pub fn compile_from(dir: &str, name: &str, cc: Cc) -> PathBuf {
    static DONE: OnceLock<Mutex<HashMap<(String, &'static str), PathBuf>>> = OnceLock::new();
    let tag = match cc {
        Cc::Ours => "ours",
        Cc::OursShared => "shared",
        Cc::Mpich => "mpich",
    };
    let done = DONE.get_or_init(Default::default);
    let mut done = done.lock().unwrap_or_else(|e| e.into_inner());
    let key = (format!("{dir}/{name}"), tag);
    if let Some(p) = done.get(&key) {
        return p.clone();
    }
    let s = setup();
    let src = s.mpi.join(dir).join(format!("{name}.c"));
    let out = match cc {
        Cc::Ours => s.out.join(name),
        Cc::OursShared => s.out.join(format!("lib{name}.so")),
        Cc::Mpich => s.out.join(format!("{name}-mpich")),
    };
    let mut c = if cc == Cc::Mpich { Command::new("mpicc.mpich") } else { mpicc() };
    c.args(["-Wall", "-Wextra", "-Werror", "-O1", "-g", "-pthread", "-o"]).arg(&out).arg(&src);
    match cc {
        Cc::OursShared => {
            c.args(["-shared", "-fPIC"]);
        }
        // MPICH's header declares status arrays as arrays, so GCC warns about MPI_STATUSES_IGNORE.
        Cc::Mpich => {
            c.arg("-Wno-stringop-overflow");
        }
        Cc::Ours => {}
    }
    let o = c.output().unwrap();
    assert!(o.status.success(), "{c:?} failed:\n{}", String::from_utf8_lossy(&o.stderr));
    done.insert(key, out.clone());
    out
}

/// Runs `cmd`, killing it after `limit`; returns its output.
pub fn run_with_limit(mut cmd: Command, limit: Duration) -> Output {
    cmd.stdout(Stdio::piped()).stderr(Stdio::piped());
    let mut child = cmd.spawn().unwrap();
    let mut out = child.stdout.take().unwrap();
    let mut err = child.stderr.take().unwrap();
    let t_out = std::thread::spawn(move || {
        let mut v = Vec::new();
        let _ = out.read_to_end(&mut v);
        v
    });
    let t_err = std::thread::spawn(move || {
        let mut v = Vec::new();
        let _ = err.read_to_end(&mut v);
        v
    });
    let deadline = Instant::now() + limit;
    let mut timed_out = false;
    let status = loop {
        if let Some(st) = child.try_wait().unwrap() {
            break st;
        }
        if Instant::now() > deadline {
            timed_out = true;
            let _ = child.kill();
        }
        std::thread::sleep(Duration::from_millis(10));
    };
    let o = Output { status, stdout: t_out.join().unwrap(), stderr: t_err.join().unwrap() };
    assert!(!timed_out, "timed out after {limit:?}: {cmd:?}\n{}", show(&o));
    o
}

/// Runs `prog` on `n` ranks under `nemesis-run` with extra launcher arguments and environment
/// (without `LD_LIBRARY_PATH`).
pub fn job(n: u32, prog: &Path, launcher_args: &[&str], env: &[(&str, &str)]) -> Output {
    let mut c = Command::new(&setup().launcher);
    c.arg("-n").arg(n.to_string()).args(launcher_args).arg("--").arg(prog);
    // Cargo puts target/<profile> (where libmpich.so.12 is) in the tests' LD_LIBRARY_PATH: the
    // programs find their library by their run path, or through `--mpich-abi`, not by accident.
    c.env_remove("LD_LIBRARY_PATH");
    for (k, v) in env {
        c.env(k, v);
    }
    run_with_limit(c, Duration::from_secs(120))
}

pub fn show(o: &Output) -> String {
    format!(
        "status {}\nstdout:\n{}\nstderr:\n{}",
        o.status,
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

/// Asserts the job succeeded and every rank `0..n` printed `OK <name> <rank>` once.
pub fn assert_all_ok(o: &Output, name: &str, n: u32) {
    assert!(o.status.success(), "{name} on {n} ranks failed: {}", show(o));
    let text = String::from_utf8_lossy(&o.stdout);
    for r in 0..n {
        let line = format!("OK {name} {r}");
        let k = text.lines().filter(|l| l.trim() == line).count();
        assert_eq!(k, 1, "{name} on {n} ranks: `{line}` printed {k} times: {}", show(o));
    }
}

pub fn run_ok(name: &str, ranks: &[u32], launcher_args: &[&str], env: &[(&str, &str)]) {
    let prog = compile(name, false);
    for &n in ranks {
        let o = job(n, &prog, launcher_args, env);
        assert_all_ok(&o, name, n);
    }
}

pub fn ci() -> bool {
    std::env::var("CI").is_ok_and(|v| v == "true" || v == "1")
}

/// The `sum <rank> <value>` lines of a fault-tolerance test program's output, sorted.
pub fn ft_sums(o: &Output) -> Vec<String> {
    let mut v: Vec<String> =
        String::from_utf8_lossy(&o.stdout).lines().filter(|l| l.starts_with("sum ")).map(str::to_owned).collect();
    v.sort();
    v
}

/// A fault-tolerance test program (one of `tests/c/ft_*.c`, which hold through `ft_hold.h`) on
/// `n` ranks under `nemesis-run` with `args` (its `--ft-groups` among them) and more environment
/// `env`; rank `kill` (if any) held after its first checkpoint and SIGKILLed there. Checkpoints go
/// to a directory of the test's own (`name`), removed after; a job still running after 180 s is
/// killed (the test fails on its output, not the suite's time limit).
pub fn ft_run(prog: &Path, name: &str, n: u32, args: &[&str], kill: Option<u32>, env: &[(&str, &str)]) -> Output {
    let test = prog.file_stem().map_or("ft".into(), |s| s.to_string_lossy().into_owned());
    let dir = std::env::temp_dir().join(format!("nemesis-{test}-{}-{name}", std::process::id()));
    let held = dir.with_extension("held");
    for d in [&dir, &held] {
        let _ = std::fs::remove_dir_all(d);
        std::fs::create_dir_all(d).unwrap();
    }
    let mut cmd = Command::new(&setup().launcher);
    cmd.args(["-n", &n.to_string(), "--wait", "yield"]).args(args).arg("--").arg(prog);
    cmd.env_remove("LD_LIBRARY_PATH").env("NEMESIS_FT_DIR", &dir).env("FT_TEST_DIR", &held);
    if let Some(r) = kill {
        cmd.env("FT_TEST_HOLD", format!("{r}:1"));
    }
    cmd.envs(env.iter().copied());
    cmd.stdout(Stdio::piped()).stderr(Stdio::piped());
    let mut child = cmd.spawn().unwrap();
    if let Some(rank) = kill {
        let t = Instant::now();
        let marker = held.join(format!("held-{rank}"));
        let pid: u32 = loop {
            if let Some(p) = std::fs::read_to_string(&marker).ok().and_then(|s| s.trim().parse().ok()) {
                break p;
            }
            assert!(t.elapsed() < Duration::from_secs(120), "rank {rank} never held after its checkpoint");
            std::thread::sleep(Duration::from_millis(5));
        };
        // SAFETY: a signal to a rank of the job this test started (its pid from its marker).
        unsafe { libc::kill(pid as libc::pid_t, libc::SIGKILL) };
    }
    let t = Instant::now();
    while child.try_wait().unwrap().is_none() {
        if t.elapsed() > Duration::from_secs(180) {
            let _ = child.kill();
            break;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let o = child.wait_with_output().unwrap();
    let _ = std::fs::remove_dir_all(&dir);
    let _ = std::fs::remove_dir_all(&held);
    o
}
