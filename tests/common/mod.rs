//! What the multi-process test binaries share: their harness (`harness.rs`: the binary is also
//! the rank program), starting a job of the test binary itself under `nemesis-run`, reading what
//! its ranks printed, and a deterministic generator.
#![allow(dead_code)]

pub mod harness;
pub mod roles;

use std::io::Read;
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

/// `NEMESIS_STRESS=1` multiplies the traffic of the stress tests.
pub fn stress() -> u32 {
    if std::env::var("NEMESIS_STRESS").is_ok_and(|v| v != "0") { 20 } else { 1 }
}

/// True under CI (`CI=true`), where tests must not skip.
pub fn in_ci() -> bool {
    std::env::var("CI").is_ok_and(|v| v == "true" || v == "1")
}

/// Longest a test job may run (`NEMESIS_TEST_TIMEOUT` seconds, default 600): a hang fails the
/// test instead of stalling the suite.
fn job_timeout() -> Duration {
    let secs = std::env::var("NEMESIS_TEST_TIMEOUT").ok().and_then(|v| v.parse().ok()).unwrap_or(600);
    Duration::from_secs(secs)
}

/// Runs `nemesis-run -n <n> <args> -- <this test binary as a rank program>` with
/// `NEMESIS_TEST_ROLE=role`.
pub fn job(n: u32, launcher_args: &[&str], role: &str, env: &[(&str, String)]) -> Output {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_nemesis-run"));
    cmd.arg("-n").arg(n.to_string()).args(launcher_args).arg("--");
    cmd.args(harness::me_as_rank());
    cmd.env("NEMESIS_TEST_ROLE", role);
    for (k, v) in env {
        cmd.env(k, v);
    }
    run_with_timeout(cmd, job_timeout())
}

/// Runs `cmd` to its end, or ends it (SIGTERM: the launcher ends its ranks) after `limit` and
/// panics with what it printed.
pub fn run_with_timeout(mut cmd: Command, limit: Duration) -> Output {
    cmd.stdout(Stdio::piped()).stderr(Stdio::piped());
    let mut child = cmd.spawn().unwrap();
    let mut out = child.stdout.take().unwrap();
    let mut err = child.stderr.take().unwrap();
    let t_out = std::thread::spawn(move || {
        let mut v = Vec::new();
        let _ = out.read_to_end(&mut v);
        v
    });
    let t_err = std::thread::spawn(move || {
        let mut v = Vec::new();
        let _ = err.read_to_end(&mut v);
        v
    });
    let start = Instant::now();
    let status = loop {
        if let Some(st) = child.try_wait().unwrap() {
            break st;
        }
        if start.elapsed() > limit {
            // SAFETY: signalling our own child.
            unsafe { libc::kill(child.id() as libc::pid_t, libc::SIGTERM) };
            let st = child.wait().unwrap();
            let o = Output { status: st, stdout: t_out.join().unwrap(), stderr: t_err.join().unwrap() };
            panic!("job still running after {limit:?}: {}", show(&o));
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    Output { status, stdout: t_out.join().unwrap(), stderr: t_err.join().unwrap() }
}

/// A job's exit status and output, for assertion messages.
pub fn show(o: &Output) -> String {
    format!(
        "status {}\nstdout:\n{}\nstderr:\n{}",
        o.status,
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

/// Lines `RESULT ...` the ranks printed.
pub fn results(o: &Output) -> Vec<String> {
    String::from_utf8_lossy(&o.stdout).lines().filter_map(|l| l.find("RESULT").map(|i| l[i..].to_owned())).collect()
}

/// A small deterministic generator (xorshift64*), the same on every rank.
pub struct Rng(pub u64);

impl Rng {
    pub fn new(seed: u64) -> Rng {
        Rng(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1)
    }
    pub fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }
    pub fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
    /// Fills `buf` with pseudo-random bytes, a word at a time.
    pub fn fill(&mut self, buf: &mut [u8]) {
        let mut chunks = buf.chunks_exact_mut(8);
        for c in &mut chunks {
            c.copy_from_slice(&self.next().to_le_bytes());
        }
        let rem = chunks.into_remainder();
        let w = self.next().to_le_bytes();
        rem.copy_from_slice(&w[..rem.len()]);
    }
}

/// The netmods a test between nodes runs over, each as (label, environment of its ranks): TCP,
/// and with the `rdma` feature the ofi netmod over each of libfabric's software providers that
/// runs here (IP providers on the loopback interface), large messages read (`read: true`) or
/// streamed. A provider libfabric lacks is left out, except under CI, where that fails.
pub fn netmods(read: bool) -> Vec<(String, Vec<(&'static str, String)>)> {
    let mut v = vec![("tcp".to_owned(), vec![("NEMESIS_NETMOD", "tcp".to_owned())])];
    if cfg!(feature = "rdma") {
        for prov in ["tcp;ofi_rxm", "shm", "udp;ofi_rxd"] {
            if !ofi_provider(prov) {
                continue;
            }
            let mut env = vec![
                ("NEMESIS_NETMOD", "ofi".to_owned()),
                ("NEMESIS_OFI_PROVIDER", prov.to_owned()),
                ("NEMESIS_OFI_RNDV", if read { "read" } else { "send" }.to_owned()),
                ("NEMESIS_OFI_HEARTBEAT_ADDR", "127.0.0.1".to_owned()),
            ];
            if prov != "shm" {
                env.push(("NEMESIS_OFI_DOMAIN", "lo".to_owned()));
            }
            v.push((format!("ofi {prov} {}", if read { "read" } else { "send" }), env));
        }
    }
    v
}

/// True if libfabric offers `prov` here (asked with `fi_info`).
fn ofi_provider(prov: &str) -> bool {
    let ok = Command::new("fi_info")
        .args(["-p", prov, "-t", "FI_EP_RDM"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    if !ok {
        assert!(!in_ci(), "libfabric provider {prov} (or fi_info) is missing: CI installs libfabric-bin");
        eprintln!("skipped: libfabric provider {prov} not available (fi_info -p '{prov}')");
    }
    ok
}
