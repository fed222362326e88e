//! Logging: the library installs no `tracing` subscriber, so an application's own, set after
//! `Endpoint::init`, takes effect; the log of `nemesis-run` and of its ranks, written to a file,
//! is plain text (no colour codes).
//!
//! The rank programs are this test binary, re-executed with `--nemesis-test-rank` and a role in
//! `NT_LOG_ROLE`.

mod common;

use std::process::{Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use nemesis::Endpoint;
use tracing::span::{Attributes, Id, Record};
use tracing::{Event, Metadata, Subscriber};

use common::harness;

const ROLE: &str = "NT_LOG_ROLE";

fn main() {
    harness::main(
        rank_main,
        tests![
            an_application_installs_its_own_subscriber_after_endpoint_init,
            launcher_log_in_a_file_has_no_escape_codes
        ],
    );
}

/// The rank program, by `NT_LOG_ROLE`.
fn rank_main() {
    match std::env::var(ROLE).unwrap_or_default().as_str() {
        // Our programs' logger, as nemesis-run's ranks would run it.
        "log" => {
            assert!(nemesis::log::init(), "a subscriber was already set");
            let ep = Endpoint::init().expect("endpoint");
            ep.finalize().expect("finalize");
        }
        // An application that brings its own subscriber once the Endpoint is up.
        "app" => {
            let ep = Endpoint::init().expect("endpoint");
            let seen = Arc::new(AtomicUsize::new(0));
            let mine = Counting(seen.clone());
            if let Err(e) = tracing::subscriber::set_global_default(mine) {
                println!("APP-SUBSCRIBER-REFUSED {e}");
                std::process::exit(1);
            }
            // Ours steps aside; the application's gets the events.
            assert!(!nemesis::log::init(), "nemesis::log::init replaced the application's subscriber");
            tracing::warn!(target: "app", "hello from the application");
            ep.finalize().expect("finalize");
            println!("APP-SUBSCRIBER-OK events={}", seen.load(Ordering::Relaxed));
        }
        other => panic!("unknown role {other:?}"),
    }
}

/// A subscriber of the application's: counts the events it is given.
struct Counting(Arc<AtomicUsize>);

impl Subscriber for Counting {
    fn enabled(&self, _: &Metadata<'_>) -> bool {
        true
    }
    fn new_span(&self, _: &Attributes<'_>) -> Id {
        Id::from_u64(1)
    }
    fn record(&self, _: &Id, _: &Record<'_>) {}
    fn record_follows_from(&self, _: &Id, _: &Id) {}
    fn event(&self, e: &Event<'_>) {
        if e.metadata().target() == "app" {
            self.0.fetch_add(1, Ordering::Relaxed);
        }
    }
    fn enter(&self, _: &Id) {}
    fn exit(&self, _: &Id) {}
}

/// This test binary as a rank program in `role`.
fn me(role: &str) -> Command {
    let mut c = Command::new(std::env::current_exe().unwrap());
    c.arg(harness::RANK_ARG).env(ROLE, role);
    c
}

fn an_application_installs_its_own_subscriber_after_endpoint_init() {
    // A singleton: no launcher, no PMI variables.
    let mut c = me("app");
    for k in ["PMI_FD", "PMI_PORT", "PMI_RANK", "PMI_SIZE", "NEMESIS_LOG"] {
        c.env_remove(k);
    }
    let o = c.output().unwrap();
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(
        o.status.success() && out.contains("APP-SUBSCRIBER-OK events=1"),
        "{}\nstdout:\n{out}\nstderr:\n{}",
        o.status,
        String::from_utf8_lossy(&o.stderr)
    );
}

fn launcher_log_in_a_file_has_no_escape_codes() {
    let path = std::env::temp_dir().join(format!("nemesis-log-test-{}.log", std::process::id()));
    let file = std::fs::File::create(&path).unwrap();
    let rank = me("log");
    let o = Command::new(env!("CARGO_BIN_EXE_nemesis-run"))
        .args(["-n", "2", "--"])
        .arg(rank.get_program())
        .args(rank.get_args())
        .env(ROLE, "log")
        .env("NEMESIS_LOG", "debug")
        .stdout(Stdio::null())
        .stderr(file)
        .status()
        .unwrap();
    let log = std::fs::read_to_string(&path).unwrap();
    std::fs::remove_file(&path).unwrap();
    assert!(o.success(), "{o}\n{log}");
    // The launcher's events and both ranks' are there...
    assert!(log.contains("DEBUG nemesis::launch"), "no launcher event:\n{log}");
    assert_eq!(log.matches("endpoint ready").count(), 2, "both ranks' events expected:\n{log}");
    // ...as plain text.
    assert!(!log.contains('\x1b'), "escape codes in the log file:\n{log:?}");
}
