//! rsmpi, the Rust MPI bindings (crates.io `mpi`), on nemesis: the crate's own package, pinned
//! ([`VERSION`]), built with `MPICC=bin/mpicc` (its `build-probe-mpi` reads `mpicc -show`; its
//! `mpi-sys` runs bindgen over our `mpi.h`, hence libclang), and every one of its examples (none
//! needs Fortran) run under `nemesis-run` at 1, 2, 3 and 4 ranks. Each example checks its own
//! results with assertions, so success is its exit status 0 on every rank.
//!
//! | test | what |
//! |---|---|
//! | `examples_run_at_one_to_four_ranks` | `cargo build --examples --features complex,derive` of `mpi` 0.8, then each example at 1–4 ranks (but [`NEEDS_TWO`] at 1; [`SPAWNS`] at 1 only) | 1, 2, 3, 4 |
//!
//! The package and its build are cached in `target/clients/rsmpi/`; `mpi-sys` (bindgen) and
//! `mpi` are rebuilt when `libmpi.so`, `mpi.h` or `bin/mpicc` changed. The examples carry
//! `#![deny(warnings)]`, written for older compilers: lints are capped at warnings.

mod clients;
mod common;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use clients::*;
use common::*;

/// The rsmpi release.
const VERSION: &str = "0.8.2";
/// Examples that need a job of at least two ranks, as they would under any MPI:
/// `all_gather_bool` asserts it; `immediate_multiple_requests` tells its sends from its receives
/// by the value carried, which at one rank is the same (512 "sends" counted, 256 expected).
const NEEDS_TWO: [&str; 2] = ["all_gather_bool", "immediate_multiple_requests"];
/// Examples that start ranks with `MPI_Comm_spawn(_multiple)`: run at one rank (more would spawn
/// once per parent rank, which the examples do not expect), with room for the children
/// (`nemesis-run --universe-size`; without it the spawn is refused with `MPI_ERR_SPAWN`).
const SPAWNS: [&str; 2] = ["spawn", "spawn_multiple"];

fn cargo() -> Command {
    let mut c = Command::new(std::env::var("CARGO").unwrap_or_else(|_| "cargo".into()));
    // The examples' `#![deny(warnings)]` meets lints newer than them.
    c.env("RUSTFLAGS", "--cap-lints=warn").env_remove("CARGO_TARGET_DIR");
    c
}

/// The crate's package (`Cargo.toml`, `src/`, `examples/`) copied from cargo's registry into
/// `dir`, made a workspace of its own: fetched through a scratch crate that depends on it.
fn package(test: &str, dir: &Path) -> Option<PathBuf> {
    let pkg = dir.join(format!("mpi-{VERSION}"));
    if pkg.join("Cargo.toml").exists() {
        return Some(pkg);
    }
    let fetch = dir.join("fetch");
    std::fs::create_dir_all(fetch.join("src")).unwrap();
    std::fs::write(
        fetch.join("Cargo.toml"),
        format!("[package]\nname = \"fetch\"\nversion = \"0.0.0\"\nedition = \"2021\"\n\n[dependencies]\nmpi = \"={VERSION}\"\n\n[workspace]\n"),
    )
    .unwrap();
    std::fs::write(fetch.join("src/main.rs"), "fn main() {}\n").unwrap();
    let mut c = cargo();
    c.current_dir(&fetch).args(["metadata", "--format-version", "1"]);
    let o = run_with_limit(c, Duration::from_secs(600));
    if !have(o.status.success(), test, &format!("cargo cannot fetch mpi {VERSION} (no network?): {}", show(&o))) {
        return None;
    }
    // The package's manifest path in cargo's metadata: "manifest_path":".../mpi-0.8.2/Cargo.toml".
    let json = String::from_utf8_lossy(&o.stdout).to_string();
    let tail = format!("/mpi-{VERSION}/Cargo.toml\"");
    let end = json.find(&tail).expect("mpi's manifest in cargo metadata") + tail.len() - "/Cargo.toml\"".len();
    let start = json[..end].rfind('"').unwrap() + 1;
    let from = PathBuf::from(&json[start..end]);
    let tmp = dir.join("copy.tmp");
    let _ = std::fs::remove_dir_all(&tmp);
    let mut c = Command::new("cp");
    c.arg("-r").arg(&from).arg(&tmp);
    check(c, "copying the mpi package", Duration::from_secs(60));
    let manifest = tmp.join("Cargo.toml");
    let text = std::fs::read_to_string(&manifest).unwrap();
    std::fs::write(&manifest, format!("{text}\n[workspace]\n")).unwrap();
    std::fs::rename(&tmp, &pkg).unwrap();
    Some(pkg)
}

#[test]
fn examples_run_at_one_to_four_ranks() {
    let test = "examples_run_at_one_to_four_ranks";
    if !have(have_libclang(), test, "libclang is missing (apt-get install libclang-dev), which bindgen needs") {
        return;
    }
    let dir = dir("rsmpi");
    let Some(pkg) = package(test, &dir) else { return };
    let target = dir.join("target");
    let key = nemesis_key(VERSION);
    if !stamped(&dir, &key) {
        let mut c = cargo();
        c.current_dir(&pkg).args(["clean", "-q", "-p", "mpi-sys", "-p", "mpi", "--target-dir"]).arg(&target);
        let _ = c.output();
    }
    let s = setup();
    let mut c = cargo();
    c.current_dir(&pkg)
        .args(["build", "-q", "--examples", "--features", "complex,derive", "--target-dir"])
        .arg(&target)
        .env("MPICC", s.mpi.join("bin/mpicc"))
        .env("NEMESIS_MPI_LIBDIR", &s.profile_dir);
    check(c, &format!("cargo build --examples of mpi {VERSION} with bin/mpicc"), Duration::from_secs(1800));
    stamp(&dir, &key);

    let mut names: Vec<String> = std::fs::read_dir(pkg.join("examples"))
        .unwrap()
        .flatten()
        .filter_map(|e| e.file_name().to_string_lossy().strip_suffix(".rs").map(str::to_string))
        .collect();
    names.sort();
    let logs = dir.join("logs");
    std::fs::create_dir_all(&logs).unwrap();
    let mut failed = Vec::new();
    let mut passed = 0;
    for name in &names {
        let prog = target.join("debug/examples").join(name);
        let ranks: &[u32] = if SPAWNS.contains(&name.as_str()) {
            &[1]
        } else if NEEDS_TWO.contains(&name.as_str()) {
            &[2, 3, 4]
        } else {
            &[1, 2, 3, 4]
        };
        for &n in ranks {
            let log = logs.join(format!("{name}-{n}.log"));
            let _ = std::fs::remove_file(&log);
            let spawns = SPAWNS.contains(&name.as_str());
            let args: &[&str] =
                if spawns { &["--wait", "yield", "--universe-size", "8"] } else { &["--wait", "yield"] };
            let ended = run_logged(nemesis_run(n, args, &[prog.as_os_str()]), &log, Duration::from_secs(60));
            match ended.status {
                Some(st) if st.success() => passed += 1,
                Some(st) => failed.push(format!("{name} at {n}: {st}: {}", tail(&log))),
                None => failed.push(format!("{name} at {n}: no end after 60 s: {}", tail(&log))),
            }
        }
    }
    eprintln!("rsmpi {VERSION}: {passed} example runs passed, {} failed", failed.len());
    for f in &failed {
        eprintln!("  {f}");
    }
    assert!(failed.is_empty(), "rsmpi examples failing on nemesis:\n{}", failed.join("\n"));
}

/// The last lines of a job's log, where the reason is.
fn tail(log: &Path) -> String {
    let text = std::fs::read_to_string(log).unwrap_or_default();
    let lines: Vec<&str> = text.lines().filter(|l| !l.trim().is_empty()).collect();
    lines[lines.len().saturating_sub(3)..].join(" / ")
}
