//! The dependency graph, as `cargo tree` resolves it.
//! - `cargo run -p nemesis-bench` (the README's main command) must not rebuild what `cargo build
//!   --workspace --all-targets` or `cargo test --workspace` built: every package nemesis-bench
//!   depends on has the same features in both (cargo unifies features over the packages and
//!   targets selected, dev-dependencies included when tests are built, so a dependency another
//!   member or a test turns a feature on for would otherwise be built twice, as iceoryx2 was
//!   through serde's `std` and nix through proptest's tempfile turning on bitflags' `std`).
//! - The libraries pull no command-line parser and no subscriber crate.

use std::collections::BTreeSet;
use std::process::Command;

/// `package version [features]` of every package built for `selection`, as `cargo tree` resolves
/// them (one line per instance: a package used both by a build script and by the code may be
/// built twice, with different features, in either selection).
fn features(selection: &[&str]) -> BTreeSet<String> {
    features_along("normal,build", selection)
}

/// The same along the dependency kinds `edges` (`cargo tree -e`): with `dev`, features are
/// resolved as for a build of the tests; without `build`, only what is built for the target is
/// listed (a package both a build script and the code use shows its code's features alone).
fn features_along(edges: &str, selection: &[&str]) -> BTreeSet<String> {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let out = Command::new(cargo)
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .args(["tree", "--offline", "-e", edges, "--prefix", "none", "-f", "{p}|{f}"])
        .args(selection)
        .output()
        .expect("run cargo tree");
    assert!(out.status.success(), "cargo tree {selection:?}: {}", String::from_utf8_lossy(&out.stderr));
    let mut set = BTreeSet::new();
    for line in String::from_utf8_lossy(&out.stdout).lines() {
        let Some((pkg, feats)) = line.split_once('|') else { continue };
        // `name vX.Y.Z (path) (*)` -> `name vX.Y.Z`; the `(*)` marks a repeat.
        let pkg: String = pkg.split_whitespace().take(2).collect::<Vec<_>>().join(" ");
        set.insert(format!("{pkg} [{}]", feats.trim_end_matches(" (*)").trim()));
    }
    set
}

#[test]
fn one_package_builds_with_the_workspace_features() {
    let workspace = features(&["--workspace"]);
    let bench = features(&["-p", "nemesis-bench"]);
    assert!(bench.len() > 10, "cargo tree listed too little: {bench:?}");
    let differ: Vec<&String> = bench.difference(&workspace).collect();
    assert!(differ.is_empty(), "built for nemesis-bench alone, not so in the workspace: {differ:#?}");
}

/// The same against a build of the workspace's tests (`--all-targets`, `cargo test`), whose
/// dev-dependencies take part in the unification, for the code built for the target.
#[test]
fn one_package_builds_with_the_features_of_the_workspaces_tests() {
    let workspace = features_along("normal,dev", &["--workspace"]);
    let bench = features_along("normal", &["-p", "nemesis-bench"]);
    assert!(bench.len() > 10, "cargo tree listed too little: {bench:?}");
    let differ: Vec<&String> = bench.difference(&workspace).collect();
    assert!(differ.is_empty(), "built for nemesis-bench alone, not so with the workspace's tests: {differ:#?}");
}

/// The libraries, `libmpi.so` first, leave a process's command line and logging to its program:
/// no command-line parser, no `tracing` subscriber crate (`nemesis::log` is ours, on `tracing`
/// alone).
#[test]
fn the_libraries_pull_no_command_line_parser_nor_subscriber() {
    let libs = ["nemesis", "nemesis-mpi", "nemesis-shm", "nemesis-lmt", "nemesis-netmod-tcp"];
    let selection: Vec<&str> = libs.iter().flat_map(|p| ["-p", p]).collect();
    let deps = features(&selection);
    assert!(deps.iter().any(|d| d.starts_with("tracing ")), "cargo tree listed too little: {deps:?}");
    let unwanted: Vec<&String> =
        deps.iter().filter(|d| d.starts_with("clap ") || d.starts_with("tracing-subscriber ")).collect();
    assert!(unwanted.is_empty(), "{unwanted:?} in the libraries' dependencies");
}
