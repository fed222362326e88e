//! The harness of the test binaries that are also rank programs (`harness = false` in
//! `Cargo.toml`): started with [`RANK_ARG`] first the binary runs its rank program on its main
//! thread, the only one (as a real program's `Endpoint::init` sees it) and exits with 0, or 1 if it
//! panicked; started otherwise it runs its tests, with libtest's command line and report, so the
//! count of `cargo test` holds only real tests.
//!
//! Understood: filters (a test runs if its name contains any; all of it with `--exact`),
//! `--skip`, `--list` (`--format terse` too, as cargo-nextest asks), `--test-threads` (or
//! `RUST_TEST_THREADS`), `--ignored` (none is), `--include-ignored`, and, as no-ops, `--nocapture`,
//! `--show-output`, `-q`/`--quiet`, `--color`. Output is not captured: what a test prints shows as
//! it comes. `shm/tests` includes this file by path.
#![allow(dead_code)]

use std::io::Write;
use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Instant;

/// First argument of a test binary started as a rank program.
pub const RANK_ARG: &str = "--nemesis-test-rank";

/// One test: its name (`module::name` for tests made in a loop) and its body.
pub struct Test {
    pub name: String,
    pub run: Box<dyn Fn() + Send + Sync>,
}

impl Test {
    pub fn new(name: impl Into<String>, run: impl Fn() + Send + Sync + 'static) -> Test {
        Test { name: name.into(), run: Box::new(run) }
    }
}

impl From<(&'static str, fn())> for Test {
    fn from((name, f): (&'static str, fn())) -> Test {
        Test::new(name, f)
    }
}

/// `tests![a, b, #[cfg(feature = "x")] c]`: the functions as `(name, fn)` pairs for [`main`].
#[macro_export]
macro_rules! tests {
    ($($(#[$m:meta])* $f:ident),* $(,)?) => {{
        // Pushes, not `vec![]`: an element may carry a `#[cfg]`.
        #[allow(clippy::vec_init_then_push)]
        fn list() -> Vec<(&'static str, fn())> {
            let mut v: Vec<(&'static str, fn())> = Vec::new();
            $( $(#[$m])* v.push((stringify!($f), $f as fn())); )*
            v
        }
        list()
    }};
}

/// The program of `exe` as a rank: `[exe, RANK_ARG]`.
pub fn rank_args(exe: &std::path::Path) -> Vec<std::ffi::OsString> {
    vec![exe.as_os_str().to_owned(), RANK_ARG.into()]
}

/// This test binary as a rank program (its path and [`RANK_ARG`]).
pub fn me_as_rank() -> Vec<std::ffi::OsString> {
    rank_args(&std::env::current_exe().unwrap())
}

/// True if this process was started as a rank program.
pub fn is_rank() -> bool {
    std::env::args_os().nth(1).is_some_and(|a| a == RANK_ARG)
}

/// The entry point: `rank` if this process is a rank program (then exits 0, or 1 on a panic),
/// else the tests.
pub fn main<T: Into<Test>>(rank: impl FnOnce(), tests: impl IntoIterator<Item = T>) -> ! {
    if is_rank() {
        let ok = std::panic::catch_unwind(std::panic::AssertUnwindSafe(rank)).is_ok();
        let _ = std::io::stdout().flush();
        std::process::exit(if ok { 0 } else { 1 });
    }
    let tests: Vec<Test> = tests.into_iter().map(Into::into).collect();
    match Options::parse(std::env::args().skip(1)) {
        Ok(o) => std::process::exit(run(o, tests)),
        Err(e) => {
            eprintln!("error: {e}");
            std::process::exit(101);
        }
    }
}

/// The command line.
#[derive(Default)]
struct Options {
    filters: Vec<String>,
    skip: Vec<String>,
    exact: bool,
    list: bool,
    terse: bool,
    ignored: bool,
    threads: Option<usize>,
}

impl Options {
    fn parse(mut args: impl Iterator<Item = String>) -> Result<Options, String> {
        let mut o = Options::default();
        while let Some(a) = args.next() {
            let (flag, inline) = match a.split_once('=') {
                Some((f, v)) if f.starts_with("--") => (f.to_owned(), Some(v.to_owned())),
                _ => (a.clone(), None),
            };
            let mut value = |name: &str| inline.clone().or_else(|| args.next()).ok_or(format!("{name} needs a value"));
            match flag.as_str() {
                "--exact" => o.exact = true,
                "--list" => o.list = true,
                "--ignored" => o.ignored = true,
                "--include-ignored" | "--nocapture" | "--show-output" | "-q" | "--quiet" => {}
                "--format" => o.terse = value("--format")? == "terse",
                "--color" => {
                    value("--color")?;
                }
                "--skip" => o.skip.push(value("--skip")?),
                "--test-threads" => {
                    let v = value("--test-threads")?;
                    o.threads = Some(v.parse().ok().filter(|&n| n > 0).ok_or(format!("--test-threads {v}"))?);
                }
                f if f.starts_with('-') => return Err(format!("unknown option {f} (this test binary's harness)")),
                _ => o.filters.push(a),
            }
        }
        Ok(o)
    }

    fn selects(&self, name: &str) -> bool {
        let hit = |f: &String| if self.exact { name == f } else { name.contains(f.as_str()) };
        (self.filters.is_empty() || self.filters.iter().any(hit)) && !self.skip.iter().any(hit)
    }
}

/// Lists or runs the selected tests; the process's exit code.
fn run(o: Options, tests: Vec<Test>) -> i32 {
    let total = tests.len();
    // No test is ignored: `--ignored` selects none.
    let chosen: Vec<Test> = tests.into_iter().filter(|t| !o.ignored && o.selects(&t.name)).collect();
    if o.list {
        for t in &chosen {
            println!("{}: test", t.name);
        }
        if !o.terse {
            println!("\n{} tests, 0 benchmarks", chosen.len());
        }
        return 0;
    }
    let filtered = total - chosen.len();
    let threads = o
        .threads
        .or_else(|| std::env::var("RUST_TEST_THREADS").ok()?.parse().ok())
        .unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get()))
        .max(1);
    let start = Instant::now();
    println!("\nrunning {} test{}", chosen.len(), if chosen.len() == 1 { "" } else { "s" });
    let next = AtomicUsize::new(0);
    let failed: Mutex<Vec<(String, String)>> = Mutex::new(Vec::new());
    let (chosen, next, failed_ref) = (&chosen, &next, &failed);
    std::thread::scope(|s| {
        for _ in 0..threads.min(chosen.len()) {
            s.spawn(move || {
                while let Some(t) = chosen.get(next.fetch_add(1, Ordering::Relaxed)) {
                    // A thread named after the test, as libtest does: its panic message names it.
                    let r = std::thread::Builder::new()
                        .name(t.name.clone())
                        .spawn_scoped(s, || (t.run)())
                        .expect("a test thread")
                        .join();
                    match r {
                        Ok(()) => println!("test {} ... ok", t.name),
                        Err(p) => {
                            let msg = p
                                .downcast_ref::<String>()
                                .cloned()
                                .or_else(|| p.downcast_ref::<&str>().map(|s| (*s).to_owned()))
                                .unwrap_or_default();
                            println!("test {} ... FAILED", t.name);
                            failed_ref.lock().unwrap().push((t.name.clone(), msg));
                        }
                    }
                }
            });
        }
    });
    let mut failed = failed.into_inner().unwrap();
    failed.sort();
    if !failed.is_empty() {
        println!("\nfailures:\n");
        for (name, msg) in &failed {
            println!("---- {name} ----\n{msg}\n");
        }
        println!("failures:");
        for (name, _) in &failed {
            println!("    {name}");
        }
    }
    let passed = chosen.len() - failed.len();
    println!(
        "\ntest result: {}. {passed} passed; {} failed; 0 ignored; 0 measured; {filtered} filtered out; finished in {:.2}s\n",
        if failed.is_empty() { "ok" } else { "FAILED" },
        failed.len(),
        start.elapsed().as_secs_f64()
    );
    if failed.is_empty() { 0 } else { 101 }
}
