//! The generated C interface is current, complete and agrees with MPICH.
//!
//! | test | what |
//! |---|---|
//! | `generated_files_are_current` | `src/gen/exports.rs`, `mpi.h`'s prototypes, `README.md`'s list and `api/status.txt` (the count, the stubs by family), from `api/mpi.api` and `api/bind/*.txt` (`NEMESIS_BLESS=1` rewrites them) |
//! | `the_api_is_what_extract_py_writes` | `api/mpi.api` is `api/extract.py`'s output (when `pympistandard` imports) |
//! | `every_function_is_exported_with_its_pmpi_twin` | `nm -D` of `libmpi.so`: every `mpi.api` function as `MPI_` and `PMPI_`, nothing else but `MPIX_` and data |
//! | `prototypes_agree_with_mpichs` | each generated prototype compiles next to MPICH's `mpi.h` (same signature) |
//! | `every_callback_typedef_is_declared` | `mpi.h` declares every callback typedef of `mpi.api` |
//! | `a_binding_outside_the_api_or_of_the_wrong_form_is_refused` | the generator refuses unknown names, a non-int function bound without `plain` (and the reverse), bodies of no known form, an unfinished entry, a function bound twice |
//! | `callback_typedefs_compile_as_c99_c11_and_cpp` | `c/callbacks_compile.c`: every callback typedef and predefined callback passed to its functions, `-Wall -Wextra -Werror -pedantic` as C99, C11, C++ |
//! | `conversions_deprecated_calls_and_stubs` | `c/convert.c`: handle and status conversions (functions and macros), errors on the ignore sentinels; `MPI_Attr_*`, `MPI_Keyval_*`, `MPI_Errhandler_create/get/set`; a stub before init, and through `MPI_ERRORS_RETURN` and a user handler | 1, 2, 3, 8; 2, 5 over 2 nodes |

mod common;
mod generator;

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::Command;

use generator::*;

fn mpi_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn inputs() -> Inputs {
    read_inputs(&mpi_dir()).unwrap_or_else(|e| panic!("{e}"))
}

/// Compares `path` with `want`, or writes it under `NEMESIS_BLESS=1`.
fn check(path: &Path, want: &str, stale: &mut Vec<String>) {
    let have = std::fs::read_to_string(path).unwrap_or_default();
    if have == want {
        return;
    }
    if std::env::var("NEMESIS_BLESS").as_deref() == Ok("1") {
        std::fs::write(path, want).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    } else {
        stale.push(path.display().to_string());
    }
}

#[test]
fn generated_files_are_current() {
    let inp = inputs();
    let mpi = mpi_dir();
    let mut stale = Vec::new();
    check(&mpi.join("src/gen/exports.rs"), &exports_rs(&inp).unwrap_or_else(|e| panic!("{e}")), &mut stale);
    let h = mpi.join("include/mpi.h");
    let text = std::fs::read_to_string(&h).unwrap();
    check(&h, &splice(&text, H_BEGIN, H_END, &header_block(&inp)).unwrap(), &mut stale);
    check(&mpi.join("api/status.txt"), &status_txt(&inp), &mut stale);
    let r = mpi.join("README.md");
    let text = std::fs::read_to_string(&r).unwrap();
    check(&r, &splice(&text, R_BEGIN, R_END, &readme_block(&inp)).unwrap(), &mut stale);
    assert!(
        stale.is_empty(),
        "stale generated files: {stale:?}; refresh them with NEMESIS_BLESS=1 cargo test -p nemesis-mpi --test generated"
    );
}

#[test]
fn the_api_is_what_extract_py_writes() {
    let ok = Command::new("python3").args(["-c", "import pympistandard"]).output().is_ok_and(|o| o.status.success());
    if !ok {
        eprintln!("SKIPPED: pympistandard is not installed (pip install pympistandard==0.2.0)");
        return;
    }
    let out = std::env::temp_dir().join(format!("mpi.api.{}", std::process::id()));
    let st = Command::new("python3").arg(mpi_dir().join("api/extract.py")).arg(&out).status().unwrap();
    assert!(st.success(), "extract.py failed");
    let fresh = std::fs::read_to_string(&out).unwrap();
    let _ = std::fs::remove_file(&out);
    let have = std::fs::read_to_string(mpi_dir().join("api/mpi.api")).unwrap();
    assert!(fresh == have, "mpi/api/mpi.api is not extract.py's output: run python3 mpi/api/extract.py");
}

#[test]
fn the_api_has_mpi_4_1() {
    let inp = inputs();
    let fns: Vec<&Decl> = functions(&inp).collect();
    // 662 functions of MPI-4.1 with their `_c` forms, MPI_Abi_get_version/_info, 10 removed ones.
    assert_eq!(fns.iter().filter(|d| d.tag == Tag::Fn).count(), 664);
    assert_eq!(fns.iter().filter(|d| d.tag == Tag::Removed).count(), 10);
    assert!(fns.iter().all(|d| !d.name.ends_with("_toint") && !d.name.ends_with("_fromint")));
    for d in &fns {
        for p in &d.params {
            rust_type(p).unwrap_or_else(|e| panic!("{}: {e}", d.name));
        }
    }
}

fn exported() -> BTreeSet<String> {
    let lib = common::setup().profile_dir.join("libmpi.so");
    let o = Command::new("nm").args(["-D", "--defined-only"]).arg(&lib).output().expect("nm (binutils)");
    String::from_utf8_lossy(&o.stdout).lines().filter_map(|l| l.split_whitespace().nth(2)).map(String::from).collect()
}

#[test]
fn every_function_is_exported_with_its_pmpi_twin() {
    let inp = inputs();
    let exported = exported();
    let mut want = BTreeSet::new();
    for d in functions(&inp) {
        want.insert(d.name.clone());
        want.insert(format!("P{}", d.name));
    }
    let missing: Vec<_> = want.difference(&exported).collect();
    assert!(missing.is_empty(), "in mpi.api but not exported: {missing:?}");
    let data = ["MPI_F_STATUS", "MPI_F08_STATUS", "MPI_UNWEIGHTED", "MPI_WEIGHTS_EMPTY", "MPI_T_PVAR_ALL_HANDLES"];
    let extra: Vec<_> = exported
        .iter()
        .filter(|n| n.starts_with("MPI_") || n.starts_with("PMPI_"))
        .filter(|n| !want.contains(*n) && !data.iter().any(|p| n.starts_with(p)))
        .collect();
    assert!(extra.is_empty(), "exported but not in mpi.api: {extra:?}");
}

#[test]
fn every_callback_typedef_is_declared() {
    let inp = inputs();
    let h = std::fs::read_to_string(mpi_dir().join("include/mpi.h")).unwrap();
    for d in inp.decls.iter().filter(|d| d.tag == Tag::Callback) {
        assert!(h.contains(&format!("({})(", d.name)), "mpi.h lacks the callback typedef {}", d.name);
    }
}

#[test]
fn prototypes_agree_with_mpichs() {
    let dir = "/usr/include/x86_64-linux-gnu/mpich";
    if !Path::new(dir).join("mpi.h").exists() {
        assert!(std::env::var("CI").as_deref() != Ok("true"), "{dir}/mpi.h is missing: install libmpich-dev");
        eprintln!("SKIPPED: {dir}/mpi.h is missing (install libmpich-dev)");
        return;
    }
    let inp = inputs();
    // MPICH's header with our prototypes after it: a signature that differs is a conflicting
    // declaration. The handle conversions are macros in MPICH's header: undefined first.
    // MPICH 4.0's MPI_Pready_list lacks the standard's `const` (same ABI): left out.
    let inp = Inputs { decls: inp.decls.into_iter().filter(|d| d.name != "MPI_Pready_list").collect(), ..inp };
    let mut c = String::from("#include <mpi.h>\n");
    for d in functions(&inp).filter(|d| d.name.ends_with("_c2f") || d.name.ends_with("_f2c")) {
        c.push_str(&format!("#undef {0}\n#undef P{0}\n", d.name));
    }
    c.push_str(&header_block(&inp));
    c.push('\n');
    let src = std::env::temp_dir().join(format!("nemesis-protos-{}.c", std::process::id()));
    std::fs::write(&src, c).unwrap();
    let o = Command::new("cc").args(["-fsyntax-only", "-Werror", "-I", dir]).arg(&src).output().expect("cc");
    let _ = std::fs::remove_file(&src);
    assert!(o.status.success(), "our prototypes against MPICH's:\n{}", String::from_utf8_lossy(&o.stderr));
}

#[test]
fn callback_typedefs_compile_as_c99_c11_and_cpp() {
    let src = mpi_dir().join("tests/c/callbacks_compile.c");
    let obj = std::env::temp_dir().join(format!("nemesis-callbacks-{}.o", std::process::id()));
    for cmd in [&["cc", "-std=c99"][..], &["cc", "-std=c11"], &["c++", "-x", "c++"]] {
        let o = Command::new(cmd[0])
            .args(&cmd[1..])
            .args(["-Wall", "-Wextra", "-Werror", "-pedantic", "-c", "-I"])
            .arg(mpi_dir().join("include"))
            .arg("-o")
            .arg(&obj)
            .arg(&src)
            .output()
            .unwrap_or_else(|e| panic!("{}: {e}", cmd[0]));
        assert!(o.status.success(), "{cmd:?}: {}", String::from_utf8_lossy(&o.stderr));
    }
    let _ = std::fs::remove_file(&obj);
}

#[test]
fn conversions_deprecated_calls_and_stubs() {
    common::run_ok("convert", &[1, 2, 3, 8], &[], &[]);
    common::run_ok("convert", &[2, 5], &["--nodes", "2"], &[]);
}

#[test]
fn a_binding_outside_the_api_or_of_the_wrong_form_is_refused() {
    let dir = std::env::temp_dir().join(format!("nemesis-bind-{}", std::process::id()));
    std::fs::create_dir_all(dir.join("api/bind")).unwrap();
    std::fs::copy(mpi_dir().join("api/mpi.api"), dir.join("api/mpi.api")).unwrap();
    let refused = |text: &str, why: &str| {
        std::fs::write(dir.join("api/bind/x.txt"), text).unwrap();
        match read_inputs(&dir) {
            Ok(_) => panic!("accepted: {text}"),
            Err(e) => assert!(e.contains(why), "{text}: {e}"),
        }
    };
    refused("MPI_Sendd => |acc| Ok(());\n", "not a function of mpi/api/mpi.api");
    refused("MPI_Wtime => |acc| Ok(());\n", "bind it with `plain`");
    refused("MPI_Barrier => plain 0;\n", "bind it with `|acc|`");
    refused("MPI_Barrier => Ok(());\n", "starts with none of");
    refused("MPI_Barrier => |acc| f(\n", "without its final `;`");
    refused("MPI_Barrier => |acc| Ok(());\nMPI_Barrier => |acc| Ok(());\n", "bound twice");
    let _ = std::fs::remove_dir_all(&dir);
}
