//! The jobs of `tests/c/ft_app.c` (or its rsmpi twin) that `tests/ft_app.rs` and `tests/ft_app_faults.rs` run:
//! 8 ranks under `nemesis-run --wait yield` (in 4 groups of 2 with fault tolerance), one at a time, each in a
//! directory of its own (`FT_TEST_DIR`: start files `started-<rank>-<pid>`, hold markers, the failpoints' record
//! `failpoints`; `ckpt`: the checkpoint directory), and what they printed: rank 0's checksum, every rank's `OK`
//! line, the launcher's recovery lines and restarts, the iterations restarted ranks resumed at.

#![allow(dead_code)]

use std::collections::BTreeMap;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crate::common::setup;

pub const RANKS: u32 = 8;
pub const TWO: &[&str] = &["--nodes", "2"];

/// One job at a time (8 ranks on 2 cores), whatever the harness's test threads.
static ONE_AT_A_TIME: Mutex<()> = Mutex::new(());

/// A running job of `ft_app`.
pub struct Job {
    child: Child,
    out: Option<std::thread::JoinHandle<Vec<u8>>>,
    err: Arc<Mutex<Vec<u8>>>,
    err_thread: Option<std::thread::JoinHandle<()>>,
    /// `FT_TEST_DIR`.
    pub dir: PathBuf,
    start: Instant,
    _serial: std::sync::MutexGuard<'static, ()>,
}

/// How it ended.
pub struct Done {
    pub ok: bool,
    pub stdout: String,
    pub stderr: String,
    /// Incarnations per rank (their start files).
    pub started: BTreeMap<u32, usize>,
    /// What the checkpoint directory held at the end.
    pub checkpoint_files: Vec<String>,
    /// The failpoints' record at the end ([`hits_in`]).
    pub hits: Vec<(String, u32)>,
}

pub fn read_into(mut r: impl Read + Send + 'static, sink: Arc<Mutex<Vec<u8>>>) -> std::thread::JoinHandle<()> {
    std::thread::spawn(move || {
        let mut buf = [0u8; 4096];
        while let Ok(n) = r.read(&mut buf) {
            if n == 0 {
                break;
            }
            sink.lock().unwrap().extend_from_slice(&buf[..n]);
        }
    })
}

impl Job {
    /// `ft_app` on 8 ranks; `ft`: in 4 groups with fault tolerance; `holds`:
    /// `(rank, incarnation, iteration)`.
    pub fn start(prog: &Path, name: &str, ft: bool, extra: &[&str], holds: &[(u32, u32, u32)]) -> Job {
        Job::start_with(prog, name, ft, extra, holds, &[])
    }

    /// As [`Job::start`], with more environment `env`.
    pub fn start_with(
        prog: &Path,
        name: &str,
        ft: bool,
        extra: &[&str],
        holds: &[(u32, u32, u32)],
        env: &[(&str, &str)],
    ) -> Job {
        let serial = ONE_AT_A_TIME.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        let dir = std::env::temp_dir().join(format!("nemesis-ft-app-{}-{name}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(dir.join("ckpt")).unwrap();
        let spec: Vec<String> = holds.iter().map(|(r, i, it)| format!("{r}@{i}:{it}")).collect();
        let mut cmd = Command::new(&setup().launcher);
        cmd.args(["-n", &RANKS.to_string(), "--wait", "yield"]);
        if ft {
            cmd.args(["--ft-groups", "4"]);
        }
        cmd.args(extra).arg("--").arg(prog);
        cmd.env_remove("LD_LIBRARY_PATH")
            .env("FT_TEST_DIR", &dir)
            .env("NEMESIS_FT_DIR", dir.join("ckpt"))
            .env("FT_TEST_HOLD", spec.join(","))
            .env("NEMESIS_LOG", "nemesis::launch=info")
            .envs(env.iter().copied());
        cmd.stdout(Stdio::piped()).stderr(Stdio::piped());
        let mut child = cmd.spawn().unwrap();
        let mut o = child.stdout.take().unwrap();
        let out = std::thread::spawn(move || {
            let mut v = Vec::new();
            let _ = o.read_to_end(&mut v);
            v
        });
        let err = Arc::new(Mutex::new(Vec::new()));
        let err_thread = read_into(child.stderr.take().unwrap(), err.clone());
        Job { child, out: Some(out), err, err_thread: Some(err_thread), dir, start: Instant::now(), _serial: serial }
    }

    pub fn stderr(&self) -> String {
        String::from_utf8_lossy(&self.err.lock().unwrap()).into_owned()
    }

    /// Incarnations started so far per rank.
    pub fn started(&self) -> BTreeMap<u32, usize> {
        started_in(&self.dir)
    }

    /// Recovery lines the launcher printed so far.
    pub fn recoveries(&self) -> usize {
        recovery_lines(&self.stderr()).len()
    }

    pub fn wait_until(&self, what: &str, mut f: impl FnMut(&Job) -> bool) {
        let t = Instant::now();
        while !f(self) {
            assert!(t.elapsed() < Duration::from_secs(240), "timed out waiting for {what}:\n{}", self.stderr());
            std::thread::sleep(Duration::from_millis(5));
        }
    }

    pub fn held(&self, (rank, inc, it): (u32, u32, u32)) -> Option<u32> {
        std::fs::read_to_string(self.dir.join(format!("held-{rank}-{inc}-{it}"))).ok()?.trim().parse().ok()
    }

    /// Waits for the holds, then SIGKILLs them together: the pids killed.
    pub fn kill_held(&self, holds: &[(u32, u32, u32)]) -> Vec<u32> {
        self.wait_until(&format!("{holds:?} to hold"), |j| holds.iter().all(|&h| j.held(h).is_some()));
        let pids: Vec<u32> = holds.iter().map(|&h| self.held(h).unwrap()).collect();
        for &pid in &pids {
            // SAFETY: a signal to a rank of this job (its pid from its own hold marker).
            unsafe { libc::kill(pid as libc::pid_t, libc::SIGKILL) };
        }
        eprintln!("test: killed {holds:?} (pids {pids:?}) at {:?}", self.start.elapsed());
        pids
    }

    pub fn finish(mut self) -> Done {
        let status = loop {
            if let Some(st) = self.child.try_wait().unwrap() {
                break st;
            }
            if self.start.elapsed() > Duration::from_secs(300) {
                let _ = self.child.kill();
                break self.child.wait().unwrap();
            }
            std::thread::sleep(Duration::from_millis(20));
        };
        let stdout = String::from_utf8_lossy(&self.out.take().unwrap().join().unwrap()).into_owned();
        let _ = self.err_thread.take().unwrap().join();
        let checkpoint_files = std::fs::read_dir(self.dir.join("ckpt"))
            .map(|d| d.flatten().map(|e| e.file_name().to_string_lossy().into_owned()).collect())
            .unwrap_or_default();
        let (stderr, started, hits) = (self.stderr(), self.started(), hits_in(&self.dir));
        let done = Done { ok: status.success(), stdout, stderr, started, checkpoint_files, hits };
        let _ = std::fs::remove_dir_all(&self.dir);
        done
    }
}

pub fn started_in(dir: &Path) -> BTreeMap<u32, usize> {
    started_pids(dir).into_iter().map(|(r, p)| (r, p.len())).collect()
}

/// The failpoints' record of the job in `dir` (`failpoints`, `tests/c/ft_hold.h`): `(point, pid)` of each hit so
/// far.
pub fn hits_in(dir: &Path) -> Vec<(String, u32)> {
    let record = std::fs::read_to_string(dir.join("failpoints")).unwrap_or_default();
    let hit = |l: &str| {
        let mut w = l.strip_prefix("hit ")?.split(' ');
        Some((w.next()?.to_owned(), w.next()?.parse().ok()?))
    };
    record.lines().filter_map(hit).collect()
}

/// The pids of the incarnations started so far per rank (in no order).
pub fn started_pids(dir: &Path) -> BTreeMap<u32, Vec<u32>> {
    let mut m: BTreeMap<u32, Vec<u32>> = BTreeMap::new();
    for e in std::fs::read_dir(dir).unwrap().flatten() {
        let name = e.file_name().to_string_lossy().into_owned();
        if let Some((r, pid)) = name.strip_prefix("started-").and_then(|r| r.split_once('-')) {
            m.entry(r.parse().unwrap()).or_default().push(pid.parse().unwrap());
        }
    }
    m
}

pub fn recovery_lines(err: &str) -> Vec<&str> {
    err.lines().filter(|l| l.starts_with("nemesis-run: rank ") && l.contains(" restarted from ")).collect()
}

impl Done {
    pub fn show(&self) -> String {
        format!("stdout:\n{}\nstderr:\n{}\nstarted: {:?}", self.stdout, self.stderr, self.started)
    }

    /// Rank 0's `checksum <hex> exact <hex>`: the same with and without failures.
    pub fn checksum(&self) -> String {
        let c = self.stdout.lines().find_map(|l| l.strip_prefix("checksum "));
        c.unwrap_or_else(|| panic!("no checksum: {}", self.show())).to_owned()
    }

    /// Restarts per rank from the launcher's log (`rank restarted rank=R`).
    pub fn restarts_logged(&self) -> BTreeMap<u32, usize> {
        let mut m = BTreeMap::new();
        for l in self.stderr.lines() {
            if let Some(r) = l.split(" rank restarted rank=").nth(1).and_then(|t| t.split(' ').next()?.parse().ok()) {
                *m.entry(r).or_default() += 1;
            }
        }
        m
    }

    /// The iterations `rank`'s restarted incarnations said they resume at.
    pub fn resumed(&self, rank: u32) -> Vec<u32> {
        let head = format!("ft_app: rank {rank} incarnation ");
        self.stderr
            .lines()
            .filter_map(|l| l.strip_prefix(&head)?.split(" resumes at iteration ").nth(1)?.trim().parse().ok())
            .collect()
    }

    /// The job ended well with `reference`, every rank printed its OK line once, and `restarts`
    /// (rank, times) are exactly the ranks started again.
    pub fn check(&self, reference: &str, restarts: &BTreeMap<u32, usize>) {
        assert!(self.ok, "{}", self.show());
        assert_eq!(self.checksum(), reference, "{}", self.show());
        for r in 0..RANKS {
            let line = format!("OK ft_app {r}");
            assert_eq!(self.stdout.lines().filter(|l| *l == line).count(), 1, "{line}: {}", self.show());
        }
        assert_eq!(&self.restarts_logged(), restarts, "{}", self.show());
    }
}

/// The failure-free checksum of `prog` (with fault tolerance, over `extra`).
pub fn reference(prog: &Path, extra: &[&str]) -> String {
    static REFS: Mutex<BTreeMap<String, String>> = Mutex::new(BTreeMap::new());
    let key = format!("{} {}", prog.display(), extra.join(" "));
    if let Some(c) = REFS.lock().unwrap().get(&key) {
        return c.clone();
    }
    let d = Job::start(prog, "reference", true, extra, &[]).finish();
    d.check(&d.checksum(), &BTreeMap::new());
    let c = d.checksum();
    REFS.lock().unwrap().insert(key, c.clone());
    c
}

/// Ranks of `groups` restarted `times` times each.
pub fn restarts(groups: &[(u32, usize)]) -> BTreeMap<u32, usize> {
    groups.iter().flat_map(|&(g, n)| [(2 * g, n), (2 * g + 1, n)]).collect()
}

/// Each of `ranks` (killed by the test at `it`) resumed at `it` in its group's restart.
pub fn resumed_at(d: &Done, ranks: &[u32], it: u32) {
    for &r in ranks {
        assert!(d.resumed(r).contains(&it), "rank {r} did not resume at iteration {it}: {}", d.show());
    }
}

/// The checksum without the residual's last bits (`exact`), which depend on the order the
/// library sums in, which depends on its configuration (fault tolerance, nodes).
pub fn rounded(checksum: &str) -> &str {
    checksum.split_whitespace().next().unwrap()
}
