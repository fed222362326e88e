//! What a rank leaves to the programs it starts with `system()`: neither the PMI channel nor the
//! segment's descriptor is open in them, no `PMI_*` variable is set, and a nemesis program started
//! that way runs as a singleton. When the rank runs other threads at `Endpoint::init` the
//! variables stay, and such a program's start-up fails with a clear error instead of speaking PMI
//! on a descriptor it does not have.
//!
//! The rank program runs a single thread at `Endpoint::init` (`--nemesis-test-rank`, our harness:
//! `common/harness.rs`), as a real program does.

use std::ffi::CString;
use std::process::Command;

#[path = "common/harness.rs"]
mod harness;

fn main() {
    harness::main(
        || match std::env::var("NEMESIS_HYGIENE_ROLE").as_deref() {
            Ok("rank") => rank(false),
            Ok("rank-threaded") => rank(true),
            Ok("nested") => nested(),
            other => panic!("unknown role {other:?}"),
        },
        tests![
            a_program_started_by_a_rank_gets_neither_descriptor_nor_pmi_variables,
            with_other_threads_the_variables_stay
        ],
    );
}

fn a_program_started_by_a_rank_gets_neither_descriptor_nor_pmi_variables() {
    check_job("rank", |out| {
        assert!(out.contains("RESULT 0 open: none"), "{out}");
        assert!(out.contains("RESULT 0 PMI variables: 0"), "{out}");
        assert!(out.contains("NESTED singleton of size 1"), "{out}");
    });
}

fn with_other_threads_the_variables_stay() {
    check_job("rank-threaded", |out| {
        assert!(out.contains("RESULT 0 open: none"), "{out}");
        assert!(out.contains("NESTED error") && out.contains("names no socket"), "{out}");
    });
}

/// Runs a two-rank job of this program in `role` under `nemesis-run` and checks its output.
fn check_job(role: &str, check: impl Fn(&str)) {
    let out = Command::new(env!("CARGO_BIN_EXE_nemesis-run"))
        .args(["-n", "2", "--"])
        .args(harness::me_as_rank())
        .env("NEMESIS_HYGIENE_ROLE", role)
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{role}: {}\n{text}", out.status);
    check(&text);
}

/// The descriptor of this process that `target` (as `/proc/self/fd` shows it) starts with.
fn fd_to(target: &str) -> Option<String> {
    std::fs::read_dir("/proc/self/fd").ok()?.flatten().find_map(|e| {
        let t = std::fs::read_link(e.path()).ok()?;
        t.to_string_lossy().starts_with(target).then(|| e.file_name().to_string_lossy().into_owned())
    })
}

fn system(cmd: &str) -> i32 {
    let c = CString::new(cmd).unwrap();
    // SAFETY: a valid C string; `system` forks and waits for `sh -c cmd`.
    unsafe { libc::system(c.as_ptr()) }
}

fn rank(threaded: bool) {
    let pmi_fd = std::env::var("PMI_FD").expect("started by nemesis-run");
    let _other = threaded.then(|| std::thread::spawn(|| std::thread::sleep(std::time::Duration::from_secs(30))));
    let ep = nemesis::Endpoint::init().expect("init");
    let seg_fd = fd_to("/memfd:nemesis-segment").expect("the segment's descriptor");
    if ep.rank() == 0 {
        // The shell `system` starts lists which of the two descriptors it has.
        let r = system(&format!(
            "open=''; for f in {pmi_fd} {seg_fd}; do [ -e /proc/$$/fd/$f ] && open=\"$open $f\"; done; \
             echo \"RESULT 0 open: ${{open:-none}}\"; echo \"RESULT 0 PMI variables: $(env | grep -c '^PMI_')\""
        ));
        assert_eq!(r, 0);
        let me = std::env::current_exe().unwrap();
        let r = system(&format!("NEMESIS_HYGIENE_ROLE=nested {} {}", me.display(), harness::RANK_ARG));
        assert!(r != -1);
    }
    ep.finalize().expect("finalize");
    if threaded {
        std::process::exit(0); // without waiting for the sleeping thread
    }
}

/// A nemesis program started by a rank.
fn nested() {
    match nemesis::Endpoint::init() {
        Ok(ep) => {
            println!("NESTED singleton of size {}", ep.size());
            ep.finalize().unwrap();
        }
        Err(e) => println!("NESTED error: {e}"),
    }
}
