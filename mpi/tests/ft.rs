//! Fault tolerance through the C ABI: `MPIX_Checkpoint` and `MPIX_Checkpoint_restore`
//! (`tests/c/checkpoint.c`, with and without fault tolerance), and the C example
//! `examples/ft_stencil.c`, whose checksum is the same with fault tolerance on and off and the same
//! as the Rust example's (`examples/ft_stencil.rs` of the root package).
//!
//! The library, the launcher and the Rust example are built first (cargo builds no `cdylib` for
//! integration tests).

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::OnceLock;

/// `target/<profile>`, with this build's `libmpi.so`, `nemesis-run` and `examples/ft_stencil`.
fn profile_dir() -> &'static Path {
    static DIR: OnceLock<PathBuf> = OnceLock::new();
    DIR.get_or_init(|| {
        let exe = std::env::current_exe().unwrap();
        let dir = exe.parent().unwrap().parent().unwrap().to_path_buf();
        let mut build = Command::new(std::env::var("CARGO").unwrap_or_else(|_| "cargo".into()));
        build.current_dir(env!("CARGO_MANIFEST_DIR")).args(["build", "-q", "-p", "nemesis-mpi", "-p", "nemesis"]);
        build.args(["--lib", "--bin", "nemesis-run", "--example", "ft_stencil", "--target-dir"]);
        build.arg(dir.parent().unwrap());
        if dir.file_name().is_some_and(|n| n == "release") {
            build.arg("--release");
        }
        assert!(build.status().unwrap().success(), "cargo build of libmpi.so, nemesis-run and ft_stencil failed");
        dir
    })
}

/// Compiles a C file with `bin/mpicc` against this build's library.
fn compile(src: &Path, name: &str) -> PathBuf {
    let dir = profile_dir();
    let out_dir = dir.join("mpi-tests");
    std::fs::create_dir_all(&out_dir).unwrap();
    let out = out_dir.join(name);
    let o = Command::new(Path::new(env!("CARGO_MANIFEST_DIR")).join("bin/mpicc"))
        .env("NEMESIS_MPI_LIBDIR", dir)
        .args(["-Wall", "-Wextra", "-Werror", "-O2", "-o"])
        .arg(&out)
        .arg(src)
        .output()
        .unwrap();
    assert!(o.status.success(), "mpicc {}: {}", src.display(), String::from_utf8_lossy(&o.stderr));
    out
}

fn run(n: u32, launcher_args: &[&str], prog: &Path, args: &[&str]) -> Output {
    let o = Command::new(profile_dir().join("nemesis-run"))
        .arg("-n")
        .arg(n.to_string())
        .args(launcher_args)
        .arg("--")
        .arg(prog)
        .args(args)
        .output()
        .unwrap();
    assert!(
        o.status.success(),
        "{} {launcher_args:?}: {}\n{}",
        prog.display(),
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    );
    o
}

#[test]
fn checkpoint_calls_with_and_without_fault_tolerance() {
    let prog = compile(&Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/c/checkpoint.c"), "checkpoint");
    for args in [&[][..], &["--ft-groups", "2"][..]] {
        let o = run(4, args, &prog, &[]);
        let out = String::from_utf8_lossy(&o.stdout);
        for r in 0..4 {
            assert_eq!(out.lines().filter(|l| l.trim() == format!("OK checkpoint {r}")).count(), 1, "{out}");
        }
    }
}

/// `checksum <hex>` of a run of an ft_stencil, and the number of checkpoints it reports.
fn stencil(prog: &Path, launcher_args: &[&str], args: &[&str]) -> (String, String) {
    let o = run(4, launcher_args, prog, args);
    let out = String::from_utf8_lossy(&o.stdout);
    let sum = out.lines().find_map(|l| l.strip_prefix("checksum ")).unwrap_or_else(|| panic!("no checksum: {out}"));
    let err = String::from_utf8_lossy(&o.stderr);
    let ckpts = err.split("; ").nth(1).unwrap_or_default().split(' ').next().unwrap_or_default().to_owned();
    (sum.to_owned(), ckpts)
}

#[test]
fn stencil_examples_agree_with_and_without_fault_tolerance() {
    let c = compile(&Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/ft_stencil.c"), "ft_stencil_c");
    let rust = profile_dir().join("examples/ft_stencil");
    let args = ["3000", "400", "50"];
    let (reference, _) = stencil(&rust, &[], &args);
    for prog in [&c, &rust] {
        for launcher in [&[][..], &["--ft-groups", "2"][..], &["--ft-groups", "4", "--nodes", "2"][..]] {
            let (sum, ckpts) = stencil(prog, launcher, &args);
            assert_eq!(sum, reference, "{} {launcher:?}", prog.display());
            assert_eq!(ckpts, "7", "{} {launcher:?}: checkpoints at 50, 100, ..., 350", prog.display());
        }
    }
}
