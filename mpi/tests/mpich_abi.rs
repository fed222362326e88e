//! MPICH's binary interface and the tools: programs built with Debian's `mpicc.mpich` (MPICH's
//! `mpi.h`, linked to `libmpich.so.12`) run unchanged on nemesis's library under
//! `nemesis-run --mpich-abi`, under `mpiexec.hydra` with `LD_LIBRARY_PATH`, and under
//! `bin/mpiexec`; `bin/mpicxx`, `bin/mpi-install` and the pkg-config file work.
//!
//! | test | what |
//! |---|---|
//! | `abi_with_our_header` | `abi.c` built with `bin/mpicc`: MPICH's values in our header | 2, 3 |
//! | `mpich_binaries_run_unchanged` | `abi.c`, `pingpong.c`, `datatypes.c`, `p2p_modes.c`, `cancel_mprobe.c`, `collectives.c`, `groups.c`, `user_ops.c`, `attrs.c`, `errhandlers.c`, `topo.c`, `intercomm.c`, `idup.c` built with `mpicc.mpich`, run with `--mpich-abi` | 2–5 |
//! | `mpich_binary_under_hydra` | `abi.c` built with `mpicc.mpich` under `mpiexec.hydra` and `LD_LIBRARY_PATH` | 3 |
//! | `every_declared_function_is_exported_with_its_pmpi_twin`, `the_readme_describes_only_implemented_functions` | `mpi.h` and `nm -D` agree; the README's prose names no stub | — |
//! | `the_library_has_its_sonames` | `libmpi.so`'s SONAME, the `libmpi.so.0`, `libmpich.so.12` and `libmpi.so.12` names | — |
//! | `mpiexec_takes_hydra_options` | `bin/mpiexec -np -genv -bind-to -l -hosts -wdir`, refusals | 2 |
//! | `mpicxx_compiles_cpp` | a C++ program through `bin/mpicxx` | 2 |
//! | `installed_copy_works` | `bin/mpi-install PREFIX`, then its mpicc, pkg-config, mpiexec and `--mpich-abi` | 2 |
//!
//! Without `mpicc.mpich` or `mpiexec.hydra` (Debian's `libmpich-dev`, `mpich`) the tests needing
//! them skip with a message, and fail when `CI=true`.

mod common;

use std::path::Path;
use std::process::Command;
use std::time::Duration;

use common::*;

#[test]
fn abi_with_our_header() {
    run_ok("abi", &[2, 3], &[], &[]);
}

#[test]
fn mpich_binaries_run_unchanged() {
    if !have_mpich_cc("mpich_binaries_run_unchanged") {
        return;
    }
    for (name, ranks) in [
        ("abi", &[2, 3][..]),
        ("pingpong", &[2]),
        ("datatypes", &[2]),
        ("p2p_modes", &[2]),
        ("cancel_mprobe", &[2]),
        ("collectives", &[3, 4]),
        ("groups", &[3]),
        ("user_ops", &[3]),
        ("attrs", &[2]),
        ("errhandlers", &[2]),
        ("topo", &[4]),
        ("intercomm", &[3, 5]),
        ("idup", &[3]),
    ] {
        let prog = compile_with(name, Cc::Mpich);
        for &n in ranks {
            let o = job(n, &prog, &["--mpich-abi"], &[]);
            assert_all_ok(&o, name, n);
        }
    }
    // With NEMESIS_MPI_LIBDIR empty nemesis-run adds nothing to LD_LIBRARY_PATH (which `job`
    // clears): the same binary loads MPICH's own library, which the abi program refuses; so the
    // runs above were on nemesis's.
    let o = job(2, &compile_with("abi", Cc::Mpich), &[], &[("NEMESIS_MPI_LIBDIR", "")]);
    assert!(!o.status.success(), "abi.c must refuse MPICH's own library: {}", show(&o));
}

#[test]
fn mpich_binary_under_hydra() {
    let found = Command::new("mpiexec.hydra").arg("--version").output().is_ok_and(|o| o.status.success());
    if !found {
        assert!(!ci(), "mpiexec.hydra is missing (apt-get install mpich) and CI=true");
        eprintln!("SKIPPED: mpiexec.hydra not found (apt-get install mpich)");
        return;
    }
    if !have_mpich_cc("mpich_binary_under_hydra") {
        return;
    }
    let prog = compile_with("abi", Cc::Mpich);
    let mut c = Command::new("mpiexec.hydra");
    c.args(["-n", "3"]).arg(&prog).env("LD_LIBRARY_PATH", &setup().profile_dir);
    let o = run_with_limit(c, Duration::from_secs(60));
    assert_all_ok(&o, "abi", 3);
}

fn readelf_soname(lib: &Path) -> String {
    let o = Command::new("readelf").arg("-d").arg(lib).output().expect("readelf (binutils)");
    String::from_utf8_lossy(&o.stdout).lines().find(|l| l.contains("SONAME")).unwrap_or_default().to_string()
}

#[test]
fn the_library_has_its_sonames() {
    let dir = &setup().profile_dir;
    assert!(readelf_soname(&dir.join("libmpi.so")).contains("[libmpi.so.0]"));
    for name in ["libmpi.so.0", "libmpich.so.12", "libmpi.so.12"] {
        let target = std::fs::canonicalize(dir.join(name)).unwrap_or_else(|e| panic!("{name}: {e}"));
        assert_eq!(target, std::fs::canonicalize(dir.join("libmpi.so")).unwrap(), "{name}");
    }
    // A program built by bin/mpicc needs libmpi.so.0, found through its run path.
    let prog = compile("abi", false);
    let o = Command::new("readelf").arg("-d").arg(&prog).output().unwrap();
    assert!(String::from_utf8_lossy(&o.stdout).contains("Shared library: [libmpi.so.0]"));
}

/// `bin/mpiexec` of this checkout, using this build's launcher.
fn mpiexec() -> Command {
    let s = setup();
    let mut c = Command::new(s.mpi.join("bin/mpiexec"));
    c.env("NEMESIS_RUN", &s.launcher);
    c
}

#[test]
fn mpiexec_takes_hydra_options() {
    let prog = compile("abi", false);
    let host = String::from_utf8(Command::new("hostname").output().unwrap().stdout).unwrap();
    let wdir = std::env::temp_dir();
    let mut c = mpiexec();
    c.args(["-np", "2", "-genv", "NEMESIS_TEST_VAR", "1", "-bind-to", "core", "-l", "-hosts"])
        .arg(format!("localhost,{}", host.trim()))
        .args(["-ppn", "2", "-wdir"])
        .arg(&wdir)
        .arg(&prog);
    let o = run_with_limit(c, Duration::from_secs(60));
    assert!(o.status.success(), "{}", show(&o));
    let text = String::from_utf8_lossy(&o.stdout);
    for r in 0..2 {
        assert!(text.lines().any(|l| l.trim() == format!("[{r}] OK abi {r}")), "{}", show(&o));
    }
    // Another machine, MPMD and unknown options are refused with a message.
    for args in [&["-n", "2", "-hosts", "elsewhere.invalid"][..], &["-n", "1", "true", ":", "true"], &["--bogus"]] {
        let mut c = mpiexec();
        c.args(args).arg(&prog);
        let o = run_with_limit(c, Duration::from_secs(30));
        assert!(
            !o.status.success() && String::from_utf8_lossy(&o.stderr).contains("mpiexec:"),
            "{args:?}: {}",
            show(&o)
        );
    }
}

const CXX_PROGRAM: &str = r#"
#include <mpi.h>
#include <cstdio>
#include <vector>
int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    int rank = 0, size = 0;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    std::vector<int> all(size);
    MPI_Allgather(&rank, 1, MPI_INT, all.data(), 1, MPI_INT, MPI_COMM_WORLD);
    for (int r = 0; r < size; r++)
        if (all[r] != r) return 1;
    std::printf("OK cxx %d\n", rank);
    MPI_Finalize();
    return 0;
}
"#;

#[test]
fn mpicxx_compiles_cpp() {
    let s = setup();
    let src = s.out.join("cxx.cc");
    std::fs::write(&src, CXX_PROGRAM).unwrap();
    let prog = s.out.join("cxx");
    let o = Command::new(s.mpi.join("bin/mpicxx"))
        .env("NEMESIS_MPI_LIBDIR", &s.profile_dir)
        .args(["-Wall", "-Wextra", "-Werror", "-o"])
        .arg(&prog)
        .arg(&src)
        .output()
        .unwrap();
    assert!(o.status.success(), "mpicxx: {}", show(&o));
    assert_all_ok(&job(2, &prog, &[], &[]), "cxx", 2);
}

#[test]
fn installed_copy_works() {
    let s = setup();
    let prefix = s.out.join("install");
    let _ = std::fs::remove_dir_all(&prefix);
    let o = Command::new(s.mpi.join("bin/mpi-install"))
        .env("NEMESIS_MPI_LIBDIR", &s.profile_dir)
        .arg(&prefix)
        .output()
        .unwrap();
    assert!(o.status.success(), "mpi-install: {}", show(&o));
    assert!(readelf_soname(&prefix.join("lib/libmpich.so.12")).contains("[libmpi.so.0]"));
    // Its own mpicc: the installed header and library, no variable needed.
    let prog = s.out.join("abi-installed");
    let o = Command::new(prefix.join("bin/mpicc"))
        .env_remove("NEMESIS_MPI_LIBDIR")
        .args(["-O1", "-o"])
        .arg(&prog)
        .arg(s.mpi.join("tests/c/abi.c"))
        .output()
        .unwrap();
    assert!(o.status.success(), "installed mpicc: {}", show(&o));
    let o = Command::new(prefix.join("bin/mpiexec"))
        .args(["-n", "2"])
        .arg(&prog)
        .env_remove("NEMESIS_RUN")
        .env_remove("LD_LIBRARY_PATH")
        .output()
        .unwrap();
    assert_all_ok(&o, "abi", 2);
    // pkg-config names the installed directories.
    let o = Command::new("pkg-config")
        .env("PKG_CONFIG_PATH", prefix.join("lib/pkgconfig"))
        .args(["--cflags", "--libs", "nemesis-mpi"])
        .output();
    match o {
        Ok(o) if o.status.success() => {
            let flags = String::from_utf8_lossy(&o.stdout).to_string();
            assert!(flags.contains(&format!("-I{}", prefix.join("include").display())), "{flags}");
            assert!(
                flags.contains(&format!("-L{}", prefix.join("lib").display())) && flags.contains("-lmpi"),
                "{flags}"
            );
        }
        _ => assert!(!ci(), "pkg-config is missing and CI=true"),
    }
    // An MPICH binary on the installed copy: the installed launcher finds ../lib/libmpich.so.12.
    if have_mpich_cc("installed_copy_works") {
        let mut c = Command::new(prefix.join("bin/nemesis-run"));
        c.args(["-n", "2", "--mpich-abi", "--"])
            .arg(compile_with("abi", Cc::Mpich))
            .env_remove("NEMESIS_MPI_LIBDIR")
            .env_remove("LD_LIBRARY_PATH");
        assert_all_ok(&run_with_limit(c, Duration::from_secs(60)), "abi", 2);
    }
}

/// The functions `mpi.h` declares, by name: lines `<type> [*]<name>(` of an `MPI_`, `PMPI_` or
/// `MPIR_` function.
fn declared_functions() -> Vec<String> {
    let text = std::fs::read_to_string(setup().mpi.join("include/mpi.h")).unwrap();
    text.lines()
        .filter(|l| !l.starts_with("typedef") && !l.starts_with('#') && !l.starts_with(' '))
        .filter_map(|l| l.split_once('(').map(|(head, _)| head))
        .filter_map(|head| head.split_whitespace().last())
        .map(|n| n.trim_start_matches('*'))
        .filter(|n| n.starts_with("MPI_") || n.starts_with("PMPI_") || n.starts_with("MPIR_"))
        .map(str::to_string)
        .collect()
}

#[test]
fn every_declared_function_is_exported_with_its_pmpi_twin() {
    let lib = setup().profile_dir.join("libmpi.so");
    let o = Command::new("nm").args(["-D", "--defined-only"]).arg(&lib).output().expect("nm (binutils)");
    let text = String::from_utf8_lossy(&o.stdout);
    let exported: std::collections::HashSet<&str> = text.lines().filter_map(|l| l.split_whitespace().nth(2)).collect();
    let declared = declared_functions();
    assert!(declared.len() > 100, "parsed only {} declarations", declared.len());
    for name in &declared {
        assert!(exported.contains(name.as_str()), "{name} is declared in mpi.h but not exported");
        if let Some(base) = name.strip_prefix("MPI_") {
            assert!(declared.contains(&format!("PMPI_{base}")), "{name} has no PMPI_ declaration");
        }
    }
    // And nothing is exported that the header does not declare.
    for name in exported.iter().filter(|n| n.starts_with("MPI_") || n.starts_with("PMPI_")) {
        let is_data = ["MPI_F_STATUS", "MPI_F08_STATUS", "MPI_UNWEIGHTED", "MPI_WEIGHTS_EMPTY", "MPI_T_PVAR"]
            .iter()
            .any(|p| name.starts_with(p));
        assert!(is_data || declared.iter().any(|d| d == name), "{name} is exported but not declared");
    }
}

/// The functions `README.md` names in a part of its "What is implemented" section (`start`
/// to `end`): `MPI_Xxx` in backquotes (a capital then a small letter: constants are all
/// capitals), `MPI_X(_x)` standing for both `MPI_X` and `MPI_X_x`.
fn readme_functions(start: &str, end: &str) -> std::collections::BTreeSet<String> {
    let text = std::fs::read_to_string(setup().mpi.join("README.md")).unwrap();
    let from = text.find(start).expect("README section start");
    let to = from + text[from..].find(end).expect("README section end");
    let mut names = std::collections::BTreeSet::new();
    for quoted in text[from..to].split('`').skip(1).step_by(2) {
        let Some(rest) = quoted.strip_prefix("MPI_") else { continue };
        let mut chars = rest.chars();
        if !(chars.next().is_some_and(|c| c.is_ascii_uppercase())
            && chars.next().is_some_and(|c| c.is_ascii_lowercase()))
        {
            continue;
        }
        match quoted.strip_suffix("(_x)") {
            Some(base) => {
                names.insert(base.to_string());
                names.insert(format!("{base}_x"));
            }
            None => {
                names.insert(quoted.to_string());
            }
        }
    }
    names
}

#[test]
fn the_readme_describes_only_implemented_functions() {
    let lib = setup().profile_dir.join("libmpi.so");
    let o = Command::new("nm").args(["-D", "--defined-only"]).arg(&lib).output().expect("nm (binutils)");
    let text = String::from_utf8_lossy(&o.stdout);
    let exported: std::collections::BTreeSet<String> = text
        .lines()
        .filter_map(|l| l.split_whitespace().nth(2))
        .filter(|n| n.starts_with("MPI_") && n.as_bytes().get(5).is_some_and(u8::is_ascii_lowercase))
        .map(str::to_string)
        .collect();
    // The prose names functions that exist and are not stubs; the generated list (checked by the
    // test `generated`) names every exported one.
    let described = readme_functions("## What is implemented", "\nNot implemented yet");
    assert!(described.len() > 100, "parsed only {} functions", described.len());
    let absent: Vec<_> = described.difference(&exported).collect();
    assert!(absent.is_empty(), "described in mpi/README.md but not exported: {absent:?}");
    let stubs = readme_functions("\nStubs, by family", "<!-- END GENERATED");
    let both: Vec<_> = described.intersection(&stubs).collect();
    assert!(both.is_empty(), "described as implemented in mpi/README.md but stubs: {both:?}");
    let listed = readme_functions("## Function list", "<!-- END GENERATED");
    let missing: Vec<_> = exported.difference(&listed).collect();
    assert!(missing.is_empty(), "exported but not in mpi/README.md's function list: {missing:?}");
}
