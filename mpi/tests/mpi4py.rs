//! mpi4py, the Python MPI package, on nemesis: its PyPI binary wheel, a build from its source
//! distribution with `bin/mpicc`, and its own test suite against the same build on Debian's MPICH.
//!
//! | test | what |
//! |---|---|
//! | `binary_wheel_loads_nemesis` | the PyPI wheel (built for MPICH's ABI: `libmpi.so.12`) under `nemesis-run` with no variable set: it loaded nemesis (`MPI.Get_library_version()`), not Open MPI's `libmpi.so.40`, which it falls back to silently as singletons; every rank sees the job's size; an allreduce | 1, 3 |
//! | `test_suite_fails_only_where_mpich_fails` | mpi4py built from the sdist with `bin/mpicc`, and again with `mpicc.mpich`; the sdist's `test/` run by each (`nemesis-run`, `mpiexec.mpich`); every test's outcome compared: no hang, no failure MPICH does not also show | 1, 2, 3, 4 |
//! | `pool_executor_with_three_workers` | `mpi4py.futures.MPIPoolExecutor(max_workers=3)` (`MPI_Comm_spawn`) from the wheel under `nemesis-run --universe-size 4`: 40 tasks, results in order, three workers | 1 |
//!
//! mpi4py is pinned ([`VERSION`]); the wheel, the sdist and the virtual environments are cached
//! under `target/clients/` (see `clients/mod.rs`), the build against nemesis redone whenever
//! `libmpi.so` or `mpi.h` changed, with `--no-cache-dir` so that pip never reuses a wheel built
//! against the other library. Each test's outcome is recorded as it ends by
//! `clients/mpi4py_runner.py`; a test running longer than [`PER_TEST`] ends the job (its stack
//! is in the log), is counted as a hang, and the suite goes on without it (as after a crash).
//! Logs and the report are in `target/clients/mpi4py-runs/`; `report.md` there lists every
//! difference, and `docs/mpi.md` keeps the list with its causes.
//!
//! `NEMESIS_MPI4PY_RANKS=1,2` runs the suite at fewer rank counts (local runs only).

mod clients;
mod common;

use std::collections::{BTreeMap, BTreeSet};
use std::ffi::OsStr;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use clients::*;
use common::*;

/// The mpi4py release: wheel, sdist and test suite.
const VERSION: &str = "4.1.2";
/// What building the sdist without build isolation needs (mpi4py's `conf/requirements-build-*`),
/// and numpy, with which the suite tests every type it has (complex, long double, half...), not
/// only the `array` module's.
const BUILD_TOOLS: [&str; 4] = ["setuptools==80.9.0", "cython==3.1.6", "wheel==0.45.1", "numpy==2.2.6"];
/// The longest one test of the suite may run on a rank before it counts as a hang, with a core
/// per rank ([`per_test`] scales it by the oversubscription).
const PER_TEST: Duration = Duration::from_secs(30);

/// [`PER_TEST`] at `n` ranks: times the ranks per core (rounded up), as a test computing on every
/// rank (`test_util_dtlib`'s struct types at 4 ranks on 2 cores) gets that share of a core.
fn per_test(n: u32) -> Duration {
    let cores = std::thread::available_parallelism().map_or(1, |c| c.get() as u32);
    PER_TEST * n.div_ceil(cores).max(1)
}
/// The longest one run of the whole suite may take (a backstop for hangs outside tests).
const PER_RUN: Duration = Duration::from_secs(900);
/// Runs of the suite after a hang or a crash, each without the tests before and the culprit.
const ATTEMPTS: usize = 8;

/// Serializes the setup steps of the tests of this binary (downloads, virtual environments).
static SETUP: Mutex<()> = Mutex::new(());

/// python3 with `venv` and `ensurepip`, and PyPI reachable, or a skip (a failure under CI).
fn python(test: &str) -> bool {
    have(
        runs("python3", &["-c", "import venv, ensurepip"]),
        test,
        "python3 with venv is missing (apt-get install python3-venv python3-dev)",
    )
}

/// A virtual environment `target/clients/<name>` (created if missing): its directory.
fn venv(name: &str) -> PathBuf {
    let d = dir(name);
    if !d.join("bin/python").exists() {
        let mut c = Command::new("python3");
        c.args(["-m", "venv", "--clear"]).arg(&d);
        check(c, &format!("python3 -m venv {name}"), Duration::from_secs(300));
    }
    d
}

fn pip(venv: &Path) -> Command {
    let mut c = clean(Command::new(venv.join("bin/python")));
    c.args(["-m", "pip", "--disable-pip-version-check", "--no-input", "-q"]);
    c
}

/// The cached download of mpi4py's wheel (`binary`) or sdist, or a skip when PyPI is out of reach.
fn download(test: &str, binary: bool) -> Option<PathBuf> {
    let dl = dir("downloads");
    let find = || {
        std::fs::read_dir(&dl).unwrap().flatten().map(|e| e.path()).find(|p| {
            let name = p.file_name().unwrap().to_string_lossy().to_string();
            let prefix = format!("mpi4py-{VERSION}");
            if binary {
                name.starts_with(&format!("{prefix}-")) && name.ends_with(".whl")
            } else {
                name == format!("{prefix}.tar.gz")
            }
        })
    };
    if let Some(p) = find() {
        return Some(p);
    }
    let tools = venv("venv-tools");
    let mut c = pip(&tools);
    c.args(["download", "--no-deps", "-d"]).arg(&dl);
    // The sdist as `--no-binary :all:` would fetch it; naming only mpi4py keeps pip from building
    // its build dependencies from source to read its metadata.
    c.args(if binary { ["--only-binary", ":all:"] } else { ["--no-binary", "mpi4py"] });
    c.arg(format!("mpi4py=={VERSION}"));
    let o = run_with_limit(c, Duration::from_secs(600));
    let what = if binary { "wheel" } else { "sdist" };
    if !have(
        o.status.success(),
        test,
        &format!("pip download of mpi4py {VERSION}'s {what} failed (no network?): {}", show(&o)),
    ) {
        return None;
    }
    Some(find().expect("pip download left no file"))
}

/// The virtual environment holding the PyPI wheel.
fn wheel_venv(test: &str) -> Option<PathBuf> {
    let _g = SETUP.lock().unwrap_or_else(|e| e.into_inner());
    let wheel = download(test, true)?;
    let v = venv("venv-wheel");
    let key = wheel.file_name().unwrap().to_string_lossy().to_string();
    if !stamped(&v, &key) {
        let mut c = pip(&v);
        c.args(["install", "--no-deps", "--force-reinstall"]).arg(&wheel);
        check(c, "pip install of the mpi4py wheel", Duration::from_secs(300));
        stamp(&v, &key);
    }
    Some(v)
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Mpi {
    Nemesis,
    Mpich,
}

impl Mpi {
    fn name(self) -> &'static str {
        match self {
            Mpi::Nemesis => "nemesis",
            Mpi::Mpich => "mpich",
        }
    }
}

/// The virtual environment holding mpi4py built from the sdist against `mpi`, built again when
/// the library changed; and the suite's `test/` directory, unpacked from the same sdist.
fn source_venv(test: &str, mpi: Mpi) -> Option<(PathBuf, PathBuf)> {
    let _g = SETUP.lock().unwrap_or_else(|e| e.into_inner());
    let sdist = download(test, false)?;
    let src = dir("src");
    let testdir = src.join(format!("mpi4py-{VERSION}/test"));
    if !testdir.join("main.py").exists() {
        let mut c = Command::new("tar");
        c.arg("xzf").arg(&sdist).arg("-C").arg(&src).arg(format!("mpi4py-{VERSION}/test"));
        check(c, "unpacking the sdist's test/", Duration::from_secs(120));
    }
    // A venv per profile for nemesis: the build links the profile's `libmpi.so`.
    let release = setup().profile_dir.file_name().is_some_and(|n| n == "release");
    let v = venv(&format!("venv-{}{}", mpi.name(), if release && mpi == Mpi::Nemesis { "-release" } else { "" }));
    let tools = format!("{VERSION} {}", BUILD_TOOLS.join(" "));
    let key = match mpi {
        Mpi::Nemesis => nemesis_key(&tools),
        Mpi::Mpich => mpich_key(&tools),
    };
    if !stamped(&v, &key) {
        let mut c = pip(&v);
        c.arg("install").args(BUILD_TOOLS);
        check(c, "pip install of the build tools", Duration::from_secs(600));
        let mut c = pip(&v);
        c.args(["install", "--no-build-isolation", "--no-binary", "mpi4py", "--no-cache-dir", "--no-deps"]);
        c.arg("--force-reinstall").arg(&sdist);
        match mpi {
            Mpi::Nemesis => {
                c.env("MPICC", setup().mpi.join("bin/mpicc")).env("NEMESIS_MPI_LIBDIR", &setup().profile_dir)
            }
            Mpi::Mpich => c.env("MPICC", "mpicc.mpich"),
        };
        // Both builds alike, and quicker than Python's -O3 -g: the suite tests behaviour.
        c.env("CFLAGS", "-O1 -g0");
        check(c, &format!("building mpi4py from its sdist with {}'s mpicc", mpi.name()), Duration::from_secs(1800));
        stamp(&v, &key);
    }
    Some((v, testdir))
}

#[test]
fn binary_wheel_loads_nemesis() {
    let test = "binary_wheel_loads_nemesis";
    if !python(test) {
        return;
    }
    let Some(v) = wheel_venv(test) else { return };
    let script = "from mpi4py import MPI\n\
                  c = MPI.COMM_WORLD\n\
                  total = c.allreduce(c.Get_rank() + 1)\n\
                  lib = MPI.Get_library_version().splitlines()[0]\n\
                  print(f'WHEEL {c.Get_rank()} {c.Get_size()} {total} {lib}', flush=True)\n";
    let py = v.join("bin/python");
    for n in [1u32, 3] {
        let o = run_with_limit(
            nemesis_run(n, &["--tag-output"], &[py.as_os_str(), OsStr::new("-c"), OsStr::new(script)]),
            Duration::from_secs(120),
        );
        assert!(o.status.success(), "the mpi4py wheel at {n} ranks: {}", show(&o));
        let text = String::from_utf8_lossy(&o.stdout);
        // `--tag-output` keeps each rank's lines whole ("[rank] WHEEL ...").
        let lines: Vec<&str> = text.lines().filter_map(|l| l.find("WHEEL ").map(|i| &l[i..])).collect();
        assert_eq!(lines.len(), n as usize, "one line per rank: {}", show(&o));
        for l in lines {
            let f: Vec<&str> = l.splitn(5, ' ').collect();
            assert!(f[4].contains("nemesis"), "the wheel loaded another MPI library ({}): {}", f[4], show(&o));
            assert_eq!(f[2], n.to_string(), "COMM_WORLD's size (singletons: another library): {}", show(&o));
            assert_eq!(f[3], (n * (n + 1) / 2).to_string(), "allreduce: {}", show(&o));
        }
    }
}

#[test]
fn pool_executor_with_three_workers() {
    let test = "pool_executor_with_three_workers";
    if !python(test) {
        return;
    }
    let Some(v) = wheel_venv(test) else { return };
    let script = dir("scripts").join("pool.py");
    std::fs::write(
        &script,
        "import os, time\n\
         from mpi4py import MPI\n\
         from mpi4py.futures import MPIPoolExecutor\n\
         def work(x):\n    time.sleep(0.02)\n    return x * x, os.getpid()\n\
         if __name__ == '__main__':\n\
         \x20   with MPIPoolExecutor(max_workers=3) as pool:\n\
         \x20       out = list(pool.map(work, range(40)))\n\
         \x20   assert [r for r, _ in out] == [x * x for x in range(40)], out\n\
         \x20   print('POOL', len({p for _, p in out}), MPI.Get_library_version().splitlines()[0], flush=True)\n",
    )
    .unwrap();
    let py = v.join("bin/python");
    // Room for the three workers: nemesis-run refuses spawns beyond the universe (MPI_ERR_SPAWN).
    let launch = nemesis_run(1, &["--universe-size", "4"], &[py.as_os_str(), script.as_os_str()]);
    let o = run_with_limit(launch, Duration::from_secs(180));
    assert!(o.status.success(), "MPIPoolExecutor(max_workers=3) under nemesis-run: {}", show(&o));
    let text = String::from_utf8_lossy(&o.stdout);
    let line = text
        .lines()
        .find_map(|l| l.find("POOL ").map(|i| &l[i..]))
        .unwrap_or_else(|| panic!("no result: {}", show(&o)));
    assert!(line.starts_with("POOL 3 ") && line.contains("nemesis"), "three workers on nemesis: {line}");
}

/// One test's outcome over the ranks.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum Outcome {
    Skip,
    Pass,
    /// A failure or an error on some rank (with its message).
    Fail(String),
    /// Still running when the job ended: at the per-test limit, or with a crash.
    Hang(String),
}

impl Outcome {
    fn bad(&self) -> bool {
        matches!(self, Outcome::Fail(_) | Outcome::Hang(_))
    }
    fn label(&self) -> String {
        match self {
            Outcome::Skip => "skip".into(),
            Outcome::Pass => "pass".into(),
            Outcome::Fail(m) => format!("fail: {m}"),
            Outcome::Hang(m) => format!("hang: {m}"),
        }
    }
}

/// What one rank wrote in one attempt: `(seq, id)` of tests started, outcomes by id, `end`.
#[derive(Default)]
struct RankLog {
    started: Vec<(u64, String)>,
    done: BTreeMap<String, Outcome>,
    ended: bool,
}

fn read_rank(path: &Path) -> RankLog {
    let mut r = RankLog::default();
    for line in std::fs::read_to_string(path).unwrap_or_default().lines() {
        let (head, msg) = line.split_once(" | ").unwrap_or((line, ""));
        let mut f = head.splitn(3, ' ');
        let (kind, seq, id) = (f.next().unwrap_or(""), f.next().unwrap_or("0"), f.next().unwrap_or(""));
        let o = match kind {
            "end" => {
                r.ended = true;
                continue;
            }
            "start" => {
                r.started.push((seq.parse().unwrap_or(0), id.to_string()));
                continue;
            }
            "pass" | "xfail" => Outcome::Pass,
            "skip" => Outcome::Skip,
            _ => Outcome::Fail(format!("{kind}: {msg}")),
        };
        // The worst outcome of a test on this rank (subtests report several).
        let e = r.done.entry(id.to_string()).or_insert(Outcome::Skip);
        if o > *e {
            *e = o;
        }
    }
    r
}

/// Every test's outcome in one run of the suite at `n` ranks, and notes on the attempts.
struct Suite {
    outcomes: BTreeMap<String, Outcome>,
    notes: Vec<String>,
    elapsed: Duration,
}

/// Runs the suite (its `modules`, or all of it) at `n` ranks on `mpi` until it has run every test
/// once: after a hang or a crash, again without the tests that finished on every rank and without
/// the culprit (the unfinished test started first), which counts as a hang.
fn run_suite(mpi: Mpi, n: u32, venv: &Path, testdir: &Path, modules: &[String], label: &str) -> Suite {
    let out = dir("mpi4py-runs").join(format!("{}-{n}{label}", mpi.name()));
    let _ = std::fs::remove_dir_all(&out);
    std::fs::create_dir_all(&out).unwrap();
    let runner = setup().mpi.join("tests/clients/mpi4py_runner.py");
    let py = venv.join("bin/python");
    let start = Instant::now();
    let mut suite = Suite { outcomes: BTreeMap::new(), notes: Vec::new(), elapsed: Duration::ZERO };
    for attempt in 0..ATTEMPTS {
        let adir = out.join(format!("attempt{attempt}"));
        std::fs::create_dir_all(&adir).unwrap();
        let xfile = adir.join("exclude.txt");
        // mpi4py's runner matches `*<line>*` unless the line has a `*`: `*<id>` matches the id only.
        std::fs::write(&xfile, suite.outcomes.keys().map(|k| format!("*{k}\n")).collect::<String>()).unwrap();
        let limit = per_test(n).as_secs().to_string();
        let args: Vec<&OsStr> = vec![
            py.as_os_str(),
            runner.as_os_str(),
            testdir.as_os_str(),
            adir.as_os_str(),
            OsStr::new(&limit),
            OsStr::new("--xfile"),
            xfile.as_os_str(),
        ];
        let args: Vec<&OsStr> = args.into_iter().chain(modules.iter().map(OsStr::new)).collect();
        let cmd = match mpi {
            // Room for the suite's spawns (test_spawn, test_dynproc, mpi4py.futures,
            // mpi4py.util.pool): spawned processes take slots of the universe, never reused within
            // a job; at 4 ranks the suite spawns more than 256.
            Mpi::Nemesis => nemesis_run(n, &["--wait", "yield", "--universe-size", "1024"], &args),
            Mpi::Mpich => mpich_run(n, &args),
        };
        // The suite's modules importable by the processes it spawns (mpi4py.util.pool's workers
        // unpickle functions of `test_util_pool`), as `python main.py` from `test/` makes them.
        let mut cmd = cmd;
        cmd.env("PYTHONPATH", testdir);
        let log = adir.join("output.log");
        let ended = run_logged(cmd, &log, PER_RUN);
        let ranks: Vec<RankLog> = (0..n).map(|r| read_rank(&adir.join(format!("rank{r}.txt")))).collect();
        // Tests finished on every rank: their outcome is final.
        for id in ranks[0].done.keys() {
            let all: Option<Vec<&Outcome>> = ranks.iter().map(|r| r.done.get(id)).collect();
            if let Some(worst) = all.and_then(|all| all.into_iter().max()) {
                suite.outcomes.insert(id.clone(), worst.clone());
            }
        }
        if ranks.iter().all(|r| r.ended) && ended.status.is_some() {
            break;
        }
        let text = std::fs::read_to_string(&log).unwrap_or_default();
        let why = match ended.status {
            None => format!("the job reached the run limit of {PER_RUN:?}"),
            Some(_) if text.contains("Timeout (") => format!("over {:?} (stack in {})", per_test(n), log.display()),
            Some(st) => format!("the job ended ({st}; see {})", log.display()),
        };
        let unfinished = ranks
            .iter()
            .flat_map(|r| r.started.iter().filter(|(_, id)| !r.done.contains_key(id)))
            .min_by_key(|(seq, _)| *seq);
        match unfinished {
            Some((_, id)) if !suite.outcomes.contains_key(id) => {
                suite.notes.push(format!("attempt {attempt}: {id}: {why}"));
                suite.outcomes.insert(id.clone(), Outcome::Hang(why));
            }
            _ => {
                // Outside any test: importing, MPI_Init_thread, fixtures or MPI_Finalize.
                suite.notes.push(format!("attempt {attempt}: outside a test: {why}"));
                break;
            }
        }
    }
    suite.elapsed = start.elapsed();
    suite
}

/// A difference from MPICH that is known, with its reason: a line of
/// `clients/mpi4py-differences.txt`.
struct Known {
    /// A test id; `*` matches any text.
    pattern: String,
    /// The rank counts it is known at (`None`: all).
    ranks: Option<Vec<u32>>,
    reason: String,
}

/// The known differences (`clients/mpi4py-differences.txt`): `pattern | ranks | reason` lines,
/// ranks `*` or a list such as `2,3` or `2-4`; `#` starts a comment.
fn known_differences() -> Vec<Known> {
    let path = setup().mpi.join("tests/clients/mpi4py-differences.txt");
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let mut known = Vec::new();
    for (i, line) in text.lines().enumerate() {
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let f: Vec<&str> = line.splitn(3, '|').map(str::trim).collect();
        assert!(
            f.len() == 3 && !f[0].is_empty() && !f[2].is_empty(),
            "{}:{}: `pattern | ranks | reason`",
            path.display(),
            i + 1
        );
        let ranks = (f[1] != "*").then(|| {
            f[1].split(',')
                .flat_map(|r| {
                    let (a, b) = r.split_once('-').unwrap_or((r, r));
                    let bad = || panic!("{}:{}: bad rank counts `{}`", path.display(), i + 1, f[1]);
                    let (a, b): (u32, u32) =
                        (a.trim().parse().unwrap_or_else(|_| bad()), b.trim().parse().unwrap_or_else(|_| bad()));
                    a..=b
                })
                .collect()
        });
        known.push(Known { pattern: f[0].to_string(), ranks, reason: f[2].to_string() });
    }
    known
}

/// The known difference that explains `id` failing at `n` ranks (its index).
fn known_at(known: &[Known], n: u32, id: &str) -> Option<usize> {
    known.iter().position(|k| k.ranks.as_ref().is_none_or(|r| r.contains(&n)) && glob(&k.pattern, id))
}

/// The module of a test id: `test_x.Class.test`, `unittest.loader._FailedTest.test_x` (a module
/// that failed to import), `setUpClass (test_x.Class)`.
fn module_of(id: &str) -> String {
    if let Some(m) = id.strip_prefix("unittest.loader._FailedTest.") {
        return m.to_string();
    }
    let id = id.rsplit_once(" (").map_or(id, |(_, inner)| inner.trim_end_matches(')'));
    id.split('.').next().unwrap_or(id).to_string()
}

/// `pattern` (with `*` for any text) matches the whole of `id`.
fn glob(pattern: &str, id: &str) -> bool {
    let parts: Vec<&str> = pattern.split('*').collect();
    let (first, last) = (parts[0], parts[parts.len() - 1]);
    if parts.len() == 1 {
        return pattern == id;
    }
    if !id.starts_with(first) || id.len() < first.len() + last.len() || !id.ends_with(last) {
        return false;
    }
    let mut rest = &id[first.len()..id.len() - last.len()];
    for p in &parts[1..parts.len() - 1] {
        match rest.find(p) {
            Some(i) => rest = &rest[i + p.len()..],
            None => return false,
        }
    }
    true
}

#[test]
fn globs_match_whole_ids() {
    assert!(glob("test_rma.*", "test_rma.TestRMAWorld.testPutGet"));
    assert!(glob("*.TestMessageRMA.*", "test_msgspec.TestMessageRMA.testMessageBad"));
    assert!(glob("a*b*c", "a-b-b-c"));
    assert!(!glob("test_rma.*", "xtest_rma.T"));
    assert!(!glob("test_io", "test_io.T"));
    assert!(!glob("a*b*c", "a-c"));
    assert!(!glob("ab*ba", "aba"));
    assert!(!known_differences().is_empty());
    assert_eq!(module_of("test_cco_buf.TestCCOBufSelf.testBcast"), "test_cco_buf");
    assert_eq!(module_of("unittest.loader._FailedTest.test_io"), "test_io");
    assert_eq!(module_of("setUpClass (test_util_sync.TestMutexWorld)"), "test_util_sync");
}

/// The rank counts of the comparison.
fn rank_counts() -> Vec<u32> {
    match std::env::var("NEMESIS_MPI4PY_RANKS") {
        Ok(v) if !ci() => v.split(',').filter_map(|s| s.trim().parse().ok()).collect(),
        _ => vec![1, 2, 3, 4],
    }
}

// Heavy (15–30 minutes on two cores): not in the README's test command; `.ci/run` runs it in
// release (`cargo test --release -p nemesis-mpi --test mpi4py -- --ignored`), where nemesis's
// library is built as MPICH's is, optimised (in debug, mpi4py's datatype-heavy tests take 2.5 ×
// MPICH's time and brush the per-test limit at 3 ranks).
#[test]
#[ignore = "heavy: .ci/run runs it in release (cargo test --release -p nemesis-mpi --test mpi4py -- --ignored)"]
fn test_suite_fails_only_where_mpich_fails() {
    let test = "test_suite_fails_only_where_mpich_fails";
    if !python(test)
        || !have_mpich_cc(test)
        || !have(runs("mpiexec.mpich", &["--version"]), test, "mpiexec.mpich is missing (apt-get install mpich)")
    {
        return;
    }
    let Some((ours, testdir)) = source_venv(test, Mpi::Nemesis) else { return };
    let Some((theirs, _)) = source_venv(test, Mpi::Mpich) else { return };
    let mut report = String::new();
    let mut differences = 0;
    writeln!(report, "# mpi4py {VERSION}'s test suite: nemesis vs MPICH\n").unwrap();
    writeln!(report, "| ranks | nemesis pass / fail / hang / skip | MPICH pass / fail / hang / skip (modules run) | differences from MPICH | time (nemesis, MPICH) |").unwrap();
    writeln!(report, "|---|---|---|---|---|").unwrap();
    let mut details = String::new();
    let known = known_differences();
    let mut used = vec![false; known.len()];
    for n in rank_counts() {
        let a = run_suite(Mpi::Nemesis, n, &ours, &testdir, &[], "");
        // MPICH runs the modules of nemesis's failures that the list does not explain: only there
        // can a difference be, and MPICH's busy polling makes its whole suite take most of an
        // hour at 3 and 4 ranks on two cores.
        let modules: BTreeSet<String> = a
            .outcomes
            .iter()
            .filter(|(id, o)| o.bad() && known_at(&known, n, id).is_none())
            .map(|(id, _)| module_of(id))
            .collect();
        let modules: Vec<String> = modules.into_iter().collect();
        let b = if modules.is_empty() {
            Suite { outcomes: BTreeMap::new(), notes: Vec::new(), elapsed: Duration::ZERO }
        } else {
            run_suite(Mpi::Mpich, n, &theirs, &testdir, &modules, "")
        };
        let count = |s: &Suite| {
            let k = |f: fn(&Outcome) -> bool| s.outcomes.values().filter(|o| f(o)).count();
            format!(
                "{} / {} / {} / {}",
                k(|o| *o == Outcome::Pass),
                k(|o| matches!(o, Outcome::Fail(_))),
                k(|o| matches!(o, Outcome::Hang(_))),
                k(|o| *o == Outcome::Skip)
            )
        };
        let b_ran = |id: &str| modules.contains(&module_of(id));
        let mut diff = Vec::new();
        for (id, o) in &a.outcomes {
            let theirs = b.outcomes.get(id);
            if o.bad() && !theirs.is_some_and(Outcome::bad) {
                let mpich = match theirs {
                    Some(t) => t.label(),
                    None if b_ran(id) => "not run".into(),
                    None => "module not run".into(),
                };
                let line = format!("- `{id}`: {} (MPICH: {mpich})", o.label());
                diff.push((id.clone(), line));
            }
        }
        for (id, o) in &b.outcomes {
            if !a.outcomes.contains_key(id) && !o.bad() {
                diff.push((id.clone(), format!("- `{id}`: not run (MPICH: {})", o.label())));
            }
        }
        let skipped_only_here = a
            .outcomes
            .iter()
            .filter(|(id, o)| **o == Outcome::Skip && b.outcomes.get(*id) == Some(&Outcome::Pass))
            .count();
        // Known differences (with their reasons) apart from the others.
        let (mut expected, mut unexpected) = (Vec::new(), Vec::new());
        for (id, line) in diff {
            match known_at(&known, n, &id) {
                Some(k) => {
                    used[k] = true;
                    expected.push(format!("{line}: known: {}", known[k].reason));
                }
                None => unexpected.push((id, line)),
            }
        }
        // A second run of their modules on nemesis: a failure that does not come back (a timing
        // test of the suite on a loaded machine: `TestThreadPool.test_terminate`, pure Python
        // threads, failed once at 4 ranks while CI built other crates) is reported, not counted.
        let mut flaky = Vec::new();
        if !unexpected.is_empty() {
            let again: BTreeSet<String> = unexpected.iter().map(|(id, _)| module_of(id)).collect();
            let again: Vec<String> = again.into_iter().collect();
            let rerun = run_suite(Mpi::Nemesis, n, &ours, &testdir, &again, "-again");
            let (gone, stay): (Vec<_>, Vec<_>) =
                unexpected.into_iter().partition(|(id, _)| rerun.outcomes.get(id) == Some(&Outcome::Pass));
            flaky = gone.into_iter().map(|(_, l)| format!("{l}: passed when its module ran again")).collect();
            unexpected = stay;
        }
        let unexpected: Vec<String> = unexpected.into_iter().map(|(_, l)| l).collect();
        writeln!(
            report,
            "| {n} | {} | {} ({}) | {} unexpected, {} known, {} passed again (and {skipped_only_here} skipped only on nemesis) | {:.0?}, {:.0?} |",
            count(&a),
            count(&b),
            if modules.is_empty() { "no module".to_string() } else { modules.join(" ") },
            unexpected.len(),
            expected.len(),
            flaky.len(),
            a.elapsed,
            b.elapsed
        )
        .unwrap();
        writeln!(details, "\n## {n} ranks: {} unexpected differences, {} known\n", unexpected.len(), expected.len())
            .unwrap();
        for l in a.notes.iter().map(|s| format!("- nemesis {s}")).chain(b.notes.iter().map(|s| format!("- MPICH {s}")))
        {
            writeln!(details, "{l}").unwrap();
        }
        for l in unexpected.iter().chain(&flaky).chain(&expected) {
            writeln!(details, "{l}").unwrap();
        }
        differences += unexpected.len();
    }
    report.push_str(&details);
    // A known difference no run showed: fixed (or not reached at these rank counts); the list
    // should lose it.
    let stale: Vec<String> = known
        .iter()
        .zip(&used)
        .filter(|(_, u)| !**u)
        .map(|(k, _)| format!("- `{}`: {}", k.pattern, k.reason))
        .collect();
    if !stale.is_empty() {
        writeln!(report, "\n## Known differences not seen in this run\n\n{}", stale.join("\n")).unwrap();
    }
    let path = dir("mpi4py-runs").join("report.md");
    std::fs::write(&path, &report).unwrap();
    eprintln!("{report}");
    assert_eq!(
        differences,
        0,
        "mpi4py's tests that fail on nemesis and not on MPICH, not in clients/mpi4py-differences.txt (report in {}):\n{report}",
        path.display()
    );
}
