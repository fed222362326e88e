//! What ships beside the library, as MPICH ships it: the name `libmpi.so.12` (upstream MPICH's,
//! Intel MPI's and Spack's SONAME, which mpi4py's PyPI wheel needs), found by `nemesis-run`'s
//! ranks with no variable set; `mpicc`'s `-show`, `-compile_info`, `-link_info`,
//! `-show-compile-info` and `-show-link-info` printed as MPICH's `mpicc` prints them; and the
//! pkg-config package `mpich`.
//!
//! | test | what |
//! |---|---|
//! | `a_program_needing_libmpi_so_12_runs_with_no_variable` | `abi.c` compiled with MPICH's header and linked to a library whose SONAME is `libmpi.so.12` (as upstream MPICH links), run by `nemesis-run` with no flag and no `LD_LIBRARY_PATH`: it loads nemesis's; with `NEMESIS_MPI_LIBDIR=` (the launcher adds nothing) it cannot start | 2, 3 |
//! | `mpich_binaries_need_no_flag` | `abi.c` built with `mpicc.mpich` runs under `nemesis-run` with neither `--mpich-abi` nor a variable | 2 |
//! | `mpicc_prints_what_mpichs_mpicc_prints` | for a set of command lines, `bin/mpicc`'s and `mpicc.mpich`'s printed commands are the same once the compiler, directories and library names are abstracted: arguments kept in order, `-I` after them, link flags last and only when linking | — |
//! | `mpicc_takes_mpichs_options` | `-cc=`, `MPICH_CC`, `-v`, no arguments, `-show` among the arguments | — |
//! | `pkg_config_answers_to_mpich` | `pkg-config mpich` in this checkout and in an installed copy (`bin/mpi-install`, which also installs `libmpi.so.12`): nemesis's flags, the directories as variables | — |

mod common;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;
use std::time::Duration;

use common::*;

/// `abi.c` built against MPICH's `mpi.h` and linked to a stand-in library whose SONAME is
/// `libmpi.so.12`, as a program built by upstream MPICH is: it needs `libmpi.so.12` and nothing
/// else of MPI. The stand-in defines empty functions and zeroed data of the same names and sizes
/// as nemesis's library (`nm -D`); it is only linked against, never loaded.
fn upstream_mpich_program() -> PathBuf {
    static PROGRAM: OnceLock<PathBuf> = OnceLock::new();
    PROGRAM.get_or_init(build_upstream_mpich_program).clone()
}

fn build_upstream_mpich_program() -> PathBuf {
    let s = setup();
    let stub = s.out.join("upstream-mpich");
    std::fs::create_dir_all(&stub).unwrap();
    let nm =
        Command::new("nm").args(["-D", "--defined-only", "-S"]).arg(s.profile_dir.join("libmpi.so")).output().unwrap();
    assert!(nm.status.success(), "nm -D libmpi.so: {}", show(&nm));
    let mut c_text = String::new();
    for line in String::from_utf8_lossy(&nm.stdout).lines() {
        if let [_, size, kind, name] = line.split_whitespace().collect::<Vec<_>>()[..] {
            let size = usize::from_str_radix(size, 16).unwrap_or(8).max(1);
            c_text += &match kind {
                "T" => format!("void {name}(void) {{}}\n"),
                _ => format!("char {name}[{size}];\n"),
            };
        }
    }
    let stub_c = stub.join("stand_in.c");
    std::fs::write(&stub_c, c_text).unwrap();
    let o = Command::new("cc")
        .args(["-shared", "-fPIC", "-Wl,-soname,libmpi.so.12", "-o"])
        .arg(stub.join("libmpi.so"))
        .arg(&stub_c)
        .output()
        .unwrap();
    assert!(o.status.success(), "stand-in library: {}", show(&o));
    let include = Command::new("mpicc.mpich").arg("-show-compile-info").output().unwrap();
    let include = String::from_utf8_lossy(&include.stdout).trim().to_string();
    let prog = stub.join("abi");
    let o = Command::new("cc")
        .args(["-O1", "-Wno-stringop-overflow", "-o"])
        .arg(&prog)
        .arg(s.mpi.join("tests/c/abi.c"))
        .args(include.split_whitespace())
        .arg(format!("-L{}", stub.display()))
        .arg("-lmpi")
        .output()
        .unwrap();
    assert!(o.status.success(), "abi.c against MPICH's header: {}", show(&o));
    let needed = Command::new("readelf").arg("-d").arg(&prog).output().unwrap();
    let needed = String::from_utf8_lossy(&needed.stdout).to_string();
    assert!(needed.contains("[libmpi.so.12]") && !needed.contains("libmpich"), "{needed}");
    prog
}

#[test]
fn a_program_needing_libmpi_so_12_runs_with_no_variable() {
    if !have_mpich_cc("a_program_needing_libmpi_so_12_runs_with_no_variable") {
        return;
    }
    let dir = &setup().profile_dir;
    let target = std::fs::canonicalize(dir.join("libmpi.so.12")).expect("libmpi.so.12 beside libmpi.so");
    assert_eq!(target, std::fs::canonicalize(dir.join("libmpi.so")).unwrap());
    let prog = upstream_mpich_program();
    for n in [2, 3] {
        // `job` clears LD_LIBRARY_PATH and passes no flag.
        assert_all_ok(&job(n, &prog, &[], &[]), "abi", n);
    }
    // Without the launcher's path nothing provides libmpi.so.12 (Debian's MPICH is libmpich.so.12):
    // the runs above found nemesis's through nemesis-run.
    let o = job(2, &prog, &[], &[("NEMESIS_MPI_LIBDIR", "")]);
    assert!(!o.status.success(), "libmpi.so.12 found without nemesis-run's path: {}", show(&o));
    assert!(String::from_utf8_lossy(&o.stderr).contains("libmpi.so.12"), "{}", show(&o));
}

#[test]
fn mpich_binaries_need_no_flag() {
    if !have_mpich_cc("mpich_binaries_need_no_flag") {
        return;
    }
    let prog = compile_with("abi", Cc::Mpich);
    assert_all_ok(&job(2, &prog, &[], &[]), "abi", 2);
}

/// One printed command with the installation abstracted: the compiler becomes `CC`, include
/// directories `-I`, library directories `-L`, the MPI library `-lMPI`; run-path and hardening
/// flags (which MPICH adds or not as configured) are dropped.
fn shape(line: &str, compiler: &str) -> Vec<String> {
    line.split_whitespace()
        .enumerate()
        .filter_map(|(i, w)| match w {
            _ if i == 0 && w == compiler => Some("CC".to_string()),
            _ if w.starts_with("-I") => Some("-I".into()),
            _ if w.starts_with("-L") => Some("-L".into()),
            "-lmpi" | "-lmpich" => Some("-lMPI".into()),
            _ if w.starts_with("-Wl,-rpath") || w == "-Wl,-z,relro" || w == "-Wl,--enable-new-dtags" => None,
            _ => Some(w.to_string()),
        })
        .collect()
}

fn printed(cmd: &str, args: &[&str]) -> String {
    let mut c = if cmd == "ours" { mpicc() } else { Command::new(cmd) };
    let o = c.env("NEMESIS_MPICC_CC", "gcc").args(args).output().unwrap();
    assert!(o.status.success(), "{cmd} {args:?}: {}", show(&o));
    String::from_utf8_lossy(&o.stdout).trim().to_string()
}

#[test]
fn mpicc_prints_what_mpichs_mpicc_prints() {
    if !have_mpich_cc("mpicc_prints_what_mpichs_mpicc_prints") {
        return;
    }
    let lines: [&[&str]; 10] = [
        &["-show"],
        &["-compile_info"],
        &["-link_info"],
        &["-compile-info", "-O2", "-c", "x.c"],
        &["-show", "-O2", "-o", "x", "x.c", "-lm"],
        &["-O2", "-o", "x", "x.c", "-show"],
        &["-show", "-c", "x.c"],
        &["-show", "-E", "x.c"],
        &["-show-compile-info"],
        &["-show-link-info"],
    ];
    for args in lines {
        let ours = printed("ours", args);
        let theirs = printed("mpicc.mpich", args);
        assert_eq!(shape(&ours, "gcc"), shape(&theirs, "gcc"), "{args:?}:\n ours:   {ours}\n MPICH's: {theirs}");
    }
    // The real directories: our header and the library this build made.
    let s = setup();
    assert_eq!(printed("ours", &["-show-compile-info"]), format!("-I{}", s.mpi.join("include").display()));
    let libdir = s.profile_dir.display();
    assert_eq!(printed("ours", &["-show-link-info"]), format!("-L{libdir} -Wl,-rpath,{libdir} -lmpi"));
}

#[test]
fn mpicc_takes_mpichs_options() {
    let s = setup();
    let run = |args: &[&str], env: &[(&str, &str)]| {
        let mut c = mpicc();
        c.env_remove("NEMESIS_MPICC_CC").env_remove("MPICH_CC").args(args);
        for (k, v) in env {
            c.env(k, v);
        }
        c.output().unwrap()
    };
    let out = |o: &std::process::Output| String::from_utf8_lossy(&o.stdout).trim().to_string();
    assert!(out(&run(&["-show", "x.c"], &[])).starts_with("cc x.c -I"));
    assert!(out(&run(&["-show", "-cc=clang", "x.c"], &[])).starts_with("clang x.c -I"));
    assert!(out(&run(&["-show", "x.c"], &[("MPICH_CC", "gcc")])).starts_with("gcc x.c -I"));
    // -cc= over the variables, NEMESIS_MPICC_CC over MPICH_CC.
    assert!(out(&run(&["-cc=clang", "-show"], &[("NEMESIS_MPICC_CC", "gcc")])).starts_with("clang -I"));
    assert!(out(&run(&["-show"], &[("NEMESIS_MPICC_CC", "gcc"), ("MPICH_CC", "tcc")])).starts_with("gcc -I"));
    let o = run(&["-v"], &[]);
    assert!(o.status.success() && out(&o).starts_with("mpicc for nemesis"), "{}", show(&o));
    let o = run(&[], &[]);
    assert!(!o.status.success() && String::from_utf8_lossy(&o.stderr).contains("Command line argument is needed"));
    // A real compile and link through -cc=.
    let prog = s.out.join("abi-cc");
    let o = run(&["-cc=cc", "-O1", "-o", prog.to_str().unwrap(), s.mpi.join("tests/c/abi.c").to_str().unwrap()], &[]);
    assert!(o.status.success(), "{}", show(&o));
    assert_all_ok(&job(2, &prog, &[], &[]), "abi", 2);
}

fn pkg_config(path: &Path, args: &[&str]) -> Option<String> {
    let o = Command::new("pkg-config").env("PKG_CONFIG_PATH", path).args(args).output().ok()?;
    assert!(o.status.success(), "pkg-config {args:?}: {}", show(&o));
    Some(String::from_utf8_lossy(&o.stdout).trim().to_string())
}

#[test]
fn pkg_config_answers_to_mpich() {
    let s = setup();
    let here = s.mpi.join("pkgconfig");
    let Some(flags) = pkg_config(&here, &["--cflags", "--libs", "mpich"]) else {
        assert!(!ci(), "pkg-config is missing and CI=true");
        eprintln!("SKIPPED pkg_config_answers_to_mpich: pkg-config not found");
        return;
    };
    assert_eq!(Some(flags), pkg_config(&here, &["--cflags", "--libs", "nemesis-mpi"]));
    assert_eq!(pkg_config(&here, &["--modversion", "mpich"]).unwrap(), "4.0.2");
    // An installed copy: its own directories, and libmpi.so.12.
    let prefix = s.out.join("install-shipping");
    let _ = std::fs::remove_dir_all(&prefix);
    let mut c = Command::new(s.mpi.join("bin/mpi-install"));
    c.env("NEMESIS_MPI_LIBDIR", &s.profile_dir).arg(&prefix);
    let o = run_with_limit(c, Duration::from_secs(60));
    assert!(o.status.success(), "mpi-install: {}", show(&o));
    let lib = prefix.join("lib");
    assert_eq!(
        std::fs::canonicalize(lib.join("libmpi.so.12")).unwrap(),
        std::fs::canonicalize(lib.join("libmpi.so.0")).unwrap()
    );
    let pc = lib.join("pkgconfig");
    let flags = pkg_config(&pc, &["--cflags", "--libs", "mpich"]).unwrap();
    assert!(
        flags.contains(&format!("-I{}", prefix.join("include").display()))
            && flags.contains(&format!("-L{}", lib.display())),
        "{flags}"
    );
    assert_eq!(pkg_config(&pc, &["--variable=libdir", "mpich"]).unwrap(), lib.display().to_string());
    // The installed launcher gives its ranks ../lib: a program needing libmpi.so.12 runs.
    if have_mpich_cc("pkg_config_answers_to_mpich") {
        let mut c = Command::new(prefix.join("bin/nemesis-run"));
        c.args(["-n", "2", "--"])
            .arg(upstream_mpich_program())
            .env_remove("NEMESIS_MPI_LIBDIR")
            .env_remove("LD_LIBRARY_PATH");
        assert_all_ok(&run_with_limit(c, Duration::from_secs(60)), "abi", 2);
    }
}
