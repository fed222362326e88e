//! The Endpoint across real processes started by `nemesis-run`: random all-to-all traffic with
//! random sizes up to five times the eager limit (rendezvous above it), random tags and contexts, `ANY_SOURCE`/`ANY_TAG` receives
//! mixed with specific ones, payload checks and per-(source, context) order, with 2, 4 and 8 ranks
//! (8 is oversubscribed on 2 cores) and every wait mode; errors between processes; a peer killed
//! while others wait on it; the CPU use of a rank blocked in `block` mode.
//!
//! The test binary is itself the rank program: `nemesis-run` starts it with `--exact rank_main`
//! and a role in `NEMESIS_TEST_ROLE`. `NEMESIS_STRESS=1` multiplies the traffic.

mod common;

use std::process::{Command, Output};
use std::time::{Duration, Instant};

use common::{in_ci, job, results, roles, show, stress};
use nemesis::{Endpoint, Error, WORLD};

/// Entry point of the ranks; a no-op when the test harness runs it directly.
#[test]
fn rank_main() {
    let Ok(role) = std::env::var("NEMESIS_TEST_ROLE") else { return };
    let result = std::panic::catch_unwind(|| match role.as_str() {
        "traffic" => roles::traffic(),
        "errors" => errors(),
        "peer-killed" => roles::peer_killed(),
        "idle-block" => idle_block(),
        "ssend" => ssend(),
        "stopped" => stopped(),
        other => panic!("unknown role {other}"),
    });
    std::process::exit(if result.is_ok() { 0 } else { 1 });
}

// ---------------------------------------------------------------------------------------------
// Random all-to-all traffic.

fn run_traffic(n: u32, wait: &str, count: u32) {
    let seed = std::process::id() as u64 ^ u64::from(n) << 20;
    let o = job(
        n,
        &["--wait", wait],
        "traffic",
        &[("NEMESIS_TEST_SEED", seed.to_string()), ("NEMESIS_TEST_COUNT", (count * stress()).to_string())],
    );
    assert!(o.status.success(), "seed {seed}: {}", show(&o));
    assert_eq!(results(&o).len(), n as usize, "{}", show(&o));
}

#[test]
fn traffic_2_ranks() {
    run_traffic(2, "poll", 400);
}

#[test]
fn traffic_4_ranks_block_mode() {
    run_traffic(4, "block", 200);
}

#[test]
fn traffic_8_ranks_oversubscribed() {
    run_traffic(8, "yield", 100);
}

/// 2 × 2 ranks over two nodes (and 5 over three): local pairs through the segment, the others
/// through each netmod; `ANY_SOURCE` receives mix local and remote senders.
#[test]
fn traffic_over_two_nodes() {
    for (label, net) in common::netmods(true) {
        for (n, k, wait) in [(4, 2, "poll"), (5, 3, "yield")] {
            let seed = std::process::id() as u64 ^ u64::from(n) << 24;
            let mut env = net.clone();
            env.push(("NEMESIS_TEST_SEED", seed.to_string()));
            env.push(("NEMESIS_TEST_COUNT", (200 * stress()).to_string()));
            let o = job(n, &["--nodes", &k.to_string(), "--wait", wait], "traffic", &env);
            assert!(o.status.success(), "{label}, seed {seed}: {}", show(&o));
            assert_eq!(results(&o).len(), n as usize, "{label}: {}", show(&o));
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Errors between processes.

fn errors() {
    let mut ep = Endpoint::init().unwrap();
    let (me, size) = (ep.rank(), ep.size());
    assert_eq!(size, 2);
    let other = 1 - me;
    assert!(matches!(ep.send(&[1], size, 0, WORLD), Err(Error::InvalidRank { .. })));
    assert!(matches!(ep.send(&[1], other, -1, WORLD), Err(Error::InvalidTag(-1))));
    if me == 0 {
        ep.send(&[7u8; 500], 1, 1, WORLD).unwrap();
        ep.send(&[8u8; 20], 1, 2, WORLD).unwrap();
    } else {
        let mut small = [0u8; 10];
        let e = ep.recv(&mut small, 0, 1, WORLD).unwrap_err();
        assert!(matches!(e, Error::Truncated { len: 500, capacity: 10, sender: 0, tag: 1 }), "{e}");
        assert_eq!(small, [7u8; 10]);
        let mut b = [0u8; 20];
        assert_eq!(ep.recv(&mut b, 0, 2, WORLD).unwrap().len, 20, "the next message is intact");
    }
    println!("RESULT errors ok on {me}");
    ep.finalize().unwrap();
}

#[test]
fn errors_between_processes() {
    let o = job(2, &[], "errors", &[]);
    assert!(o.status.success(), "{}", show(&o));
    assert_eq!(results(&o).len(), 2, "{}", show(&o));
}

// ---------------------------------------------------------------------------------------------
// Synchronous sends between processes.

fn ssend() {
    let mut ep = Endpoint::init().unwrap();
    let me = ep.rank();
    let msg = [9u8; 300];
    if me == 0 {
        // SAFETY: `msg` outlives the request.
        let r = unsafe { ep.issend_raw(msg.as_ptr(), msg.len(), 1, 1, WORLD) }.unwrap();
        // Rank 1 posts its receive only after our tag-2 message, sent below: until then the
        // synchronous send cannot complete, however long we test it.
        for _ in 0..2000 {
            assert_eq!(ep.test(r).unwrap(), None, "completed before the receive was posted");
        }
        ep.send(&[2], 1, 2, WORLD).unwrap();
        ep.wait(r).unwrap();
        // Blocking form, the other way round, and into a receive posted first.
        ep.ssend(&msg, 1, 3, WORLD).unwrap();
    } else {
        let mut b = [0u8; 300];
        ep.recv(&mut b, 0, 2, WORLD).unwrap();
        assert_eq!(ep.recv(&mut b, 0, 1, WORLD).unwrap().len, 300);
        assert_eq!(ep.recv(&mut b, 0, 3, WORLD).unwrap().len, 300);
    }
    println!("RESULT ssend ok on {me}");
    ep.finalize().unwrap();
}

#[test]
fn synchronous_sends_between_processes() {
    let o = job(2, &[], "ssend", &[]);
    assert!(o.status.success(), "{}", show(&o));
    assert_eq!(results(&o).len(), 2, "{}", show(&o));
}

// ---------------------------------------------------------------------------------------------
// A peer killed while others wait on it.

#[test]
fn peer_killed_while_others_wait_on_it() {
    for wait in ["poll", "block"] {
        let o = job(3, &["--keep-going", "--wait", wait], "peer-killed", &[]);
        assert_eq!(o.status.code(), Some(128 + 9), "{}", show(&o));
        assert_eq!(results(&o).len(), 2, "{}", show(&o));
    }
}

/// The same without the launcher's marks in the segment, as under a process manager that knows
/// nothing of nemesis: the survivors find the death through pidfds on the pids ranks publish.
#[test]
fn peer_death_is_found_through_pidfds_without_marks() {
    let o = job(3, &["--keep-going"], "peer-killed", &[("NEMESIS_RUN_NO_MARKS", "1".into())]);
    assert_eq!(o.status.code(), Some(128 + 9), "{}", show(&o));
    assert_eq!(results(&o).len(), 2, "{}", show(&o));
}

/// Two network namespaces joined by a veth pair, removed on drop.
struct Netns {
    names: [String; 2],
    addrs: [String; 2],
}

impl Netns {
    /// Creates them, or says why it cannot.
    fn new() -> Result<Netns, String> {
        let id = std::process::id() % 100_000;
        let names = [format!("nemt{id}a"), format!("nemt{id}b")];
        let octet = 1 + id % 250;
        let addrs = [format!("10.201.{octet}.1"), format!("10.201.{octet}.2")];
        let (va, vb) = (format!("nmv{id}a"), format!("nmv{id}b"));
        let ns = Netns { names: names.clone(), addrs: addrs.clone() };
        let steps: Vec<Vec<String>> = vec![
            vec!["netns".into(), "add".into(), names[0].clone()],
            vec!["netns".into(), "add".into(), names[1].clone()],
            vec![
                "link".into(),
                "add".into(),
                va.clone(),
                "type".into(),
                "veth".into(),
                "peer".into(),
                "name".into(),
                vb.clone(),
            ],
            vec!["link".into(), "set".into(), va.clone(), "netns".into(), names[0].clone()],
            vec!["link".into(), "set".into(), vb.clone(), "netns".into(), names[1].clone()],
            vec![
                "-n".into(),
                names[0].clone(),
                "addr".into(),
                "add".into(),
                format!("{}/24", addrs[0]),
                "dev".into(),
                va.clone(),
            ],
            vec![
                "-n".into(),
                names[1].clone(),
                "addr".into(),
                "add".into(),
                format!("{}/24", addrs[1]),
                "dev".into(),
                vb.clone(),
            ],
            vec!["-n".into(), names[0].clone(), "link".into(), "set".into(), va, "up".into()],
            vec!["-n".into(), names[1].clone(), "link".into(), "set".into(), vb, "up".into()],
            vec!["-n".into(), names[0].clone(), "link".into(), "set".into(), "lo".into(), "up".into()],
            vec!["-n".into(), names[1].clone(), "link".into(), "set".into(), "lo".into(), "up".into()],
        ];
        for args in steps {
            let o = Command::new("ip").args(&args).output().map_err(|e| format!("ip: {e}"))?;
            if !o.status.success() {
                return Err(format!("ip {}: {}", args.join(" "), String::from_utf8_lossy(&o.stderr).trim()));
            }
        }
        Ok(ns)
    }
}

impl Drop for Netns {
    fn drop(&mut self) {
        for n in &self.names {
            let _ = Command::new("ip").args(["netns", "del", n]).output();
        }
    }
}

/// Two nodes in two network namespaces joined by a veth pair, as two machines: each rank runs
/// in its namespace (`ip netns exec`) with its own address. Skipped with a message where network
/// namespaces cannot be made (not root); under CI it must run unless `NEMESIS_NO_NETNS=1`.
#[test]
fn two_nodes_in_two_network_namespaces() {
    let ns = match Netns::new() {
        Ok(ns) => ns,
        Err(why) => {
            let excused = std::env::var("NEMESIS_NO_NETNS").is_ok_and(|v| v == "1");
            assert!(!in_ci() || excused, "network namespaces are needed under CI: {why}");
            eprintln!("skipped: cannot make network namespaces here ({why})");
            return;
        }
    };
    let exe = std::env::current_exe().unwrap().display().to_string();
    let script = format!(
        "if [ \"$PMI_RANK\" = 0 ]; then n={} a={}; else n={} a={}; fi; \
         exec ip netns exec \"$n\" env NEMESIS_TCP_ADDR=\"$a\" {exe} --exact rank_main --nocapture --test-threads=1",
        ns.names[0], ns.addrs[0], ns.names[1], ns.addrs[1]
    );
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_nemesis-run"));
    cmd.args(["-n", "2", "--nodes", "2", "--", "sh", "-c", &script]);
    cmd.env("NEMESIS_TEST_ROLE", "traffic").env("NEMESIS_TEST_SEED", "7").env("NEMESIS_TEST_COUNT", "150");
    let o = common::run_with_timeout(cmd, Duration::from_secs(300));
    assert!(o.status.success(), "{}", show(&o));
    assert_eq!(results(&o).len(), 2, "{}", show(&o));
}

// ---------------------------------------------------------------------------------------------
// A remote peer that stops answering (SIGSTOP: its connection stays open) is found by heartbeats.

/// Heartbeat settings of the test, for every netmod: 100 ms period, 1 s timeout (bound 1.1 s).
const HB: [(&str, &str); 4] = [
    ("NEMESIS_TCP_HEARTBEAT_MS", "100"),
    ("NEMESIS_TCP_TIMEOUT_MS", "1000"),
    ("NEMESIS_OFI_HEARTBEAT_MS", "100"),
    ("NEMESIS_OFI_TIMEOUT_MS", "1000"),
];

fn stopped() {
    let mut ep = Endpoint::init().unwrap();
    if ep.rank() == 1 {
        // Synchronous: it is in rank 0's hands before we stop.
        ep.ssend(&std::process::id().to_le_bytes(), 0, 1, WORLD).unwrap();
        // SAFETY: stopping ourselves; rank 0 kills us.
        unsafe { libc::raise(libc::SIGSTOP) };
        unreachable!("rank 0 kills the stopped rank");
    }
    let mut pid = [0u8; 4];
    ep.recv(&mut pid, 1, 1, WORLD).unwrap();
    let t0 = Instant::now();
    let e = ep.recv(&mut [0u8; 8], 1, 2, WORLD).unwrap_err();
    let waited = t0.elapsed();
    assert!(matches!(e, Error::PeerDied { rank: 1 }), "{e}");
    // SAFETY: killing the stopped rank (same user, our job).
    unsafe { libc::kill(i32::from_le_bytes(pid), libc::SIGKILL) };
    println!("RESULT detected after {:.3} s", waited.as_secs_f64());
    ep.finalize().unwrap();
}

#[test]
fn a_stopped_remote_peer_is_declared_dead_within_the_heartbeat_bound() {
    for (label, net) in common::netmods(true) {
        let mut env: Vec<(&str, String)> = HB.iter().map(|&(k, v)| (k, v.to_owned())).collect();
        env.extend(net);
        let o = job(2, &["--keep-going", "--nodes", "2"], "stopped", &env);
        assert_eq!(o.status.code(), Some(128 + 9), "{label}: {}", show(&o));
        let line = results(&o).pop().unwrap_or_else(|| panic!("{label}: {}", show(&o)));
        let secs: f64 = line.split_whitespace().nth(3).unwrap().parse().unwrap();
        // Not before the timeout (heartbeats kept coming until the stop, a moment after the pid
        // was sent); within a generous multiple of the bound (this machine is shared).
        assert!(secs > 0.9, "{label}: declared dead after {secs} s, before the 1 s timeout");
        assert!(secs < 10.0 * 1.1, "{label}: declared dead after {secs} s, bound 1.1 s");
    }
}

// ---------------------------------------------------------------------------------------------
// A rank blocked in `block` mode uses next to no CPU.

fn cpu_seconds() -> f64 {
    // SAFETY: getrusage fills the struct.
    let mut u: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: as above.
    unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut u) };
    let t = |tv: libc::timeval| tv.tv_sec as f64 + tv.tv_usec as f64 * 1e-6;
    t(u.ru_utime) + t(u.ru_stime)
}

fn idle_block() {
    let mut ep = Endpoint::init().unwrap();
    if ep.rank() == 0 {
        std::thread::sleep(Duration::from_secs(2));
        ep.send(b"wake up", 1, 0, WORLD).unwrap();
    } else {
        let (t0, c0) = (Instant::now(), cpu_seconds());
        let mut b = [0u8; 16];
        ep.recv(&mut b, 0, 0, WORLD).unwrap();
        let (wall, cpu) = (t0.elapsed().as_secs_f64(), cpu_seconds() - c0);
        println!("RESULT idle wall {wall:.3} s cpu {cpu:.3} s");
    }
    ep.finalize().unwrap();
}

#[test]
fn idle_rank_in_block_mode_uses_little_cpu() {
    let o = job(2, &["--wait", "block"], "idle-block", &[]);
    assert!(o.status.success(), "{}", show(&o));
    let line = results(&o).pop().unwrap();
    let nums: Vec<f64> = line.split_whitespace().filter_map(|w| w.parse().ok()).collect();
    let (wall, cpu) = (nums[0], nums[1]);
    assert!(wall > 1.5, "{line}");
    // Generous: the spin before blocking and the 10 ms wake-ups cost a little.
    assert!(cpu < 0.25 * wall, "an idle blocked rank used {cpu} s of CPU in {wall} s");
}

// ---------------------------------------------------------------------------------------------
// Under MPICH's Hydra (`mpiexec.hydra` from Debian's `mpich`): the same programs, unmodified.

/// `mpiexec.hydra`, or `None` (then the test skips, except under CI where it fails).
fn hydra() -> Option<&'static str> {
    let found = Command::new("mpiexec.hydra").arg("--version").output().is_ok_and(|o| o.status.success());
    if !found {
        assert!(!in_ci(), "mpiexec.hydra is missing: CI must install Debian's mpich");
        eprintln!("skipped: mpiexec.hydra not found (apt-get install mpich)");
        return None;
    }
    Some("mpiexec.hydra")
}

fn shm_entries() -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir("/dev/shm")
        .map(|d| d.filter_map(|e| e.ok()).map(|e| e.file_name().to_string_lossy().into_owned()).collect())
        .unwrap_or_default();
    v.sort();
    v
}

fn hydra_job(hydra: &str, args: &[&str], role: &str, env: &[(&str, String)]) -> Output {
    let mut cmd = Command::new(hydra);
    cmd.args(args).arg(std::env::current_exe().unwrap()).args(["--exact", "rank_main", "--nocapture"]);
    cmd.env("NEMESIS_TEST_ROLE", role);
    for (k, v) in env {
        cmd.env(k, v);
    }
    cmd.output().unwrap()
}

/// Under Hydra with two node identities (`NEMESIS_NODE` per MPMD section): traffic between them
/// goes through each netmod.
#[test]
fn hydra_with_two_node_identities() {
    let Some(h) = hydra() else { return };
    for (label, net) in common::netmods(true) {
        let mut args = Vec::new();
        for (i, node) in ["alpha", "beta"].iter().enumerate() {
            if i > 0 {
                args.push(":".to_owned());
            }
            args.extend(["-n", "2", "-env", "NEMESIS_NODE", node].map(str::to_owned));
            args.extend(["-env", "NEMESIS_TEST_ROLE", "traffic", "-env", "NEMESIS_TEST_SEED", "91"].map(str::to_owned));
            args.extend(["-env", "NEMESIS_TEST_COUNT", "100"].map(str::to_owned));
            args.push(std::env::current_exe().unwrap().display().to_string());
            args.extend(["--exact", "rank_main", "--nocapture"].map(str::to_owned));
        }
        let mut c = Command::new(h);
        c.args(&args).envs(net.iter().map(|(k, v)| (k, v)));
        let o = common::run_with_timeout(c, Duration::from_secs(300));
        assert!(o.status.success(), "{label}: {}", show(&o));
        assert_eq!(results(&o).len(), 4, "{label}: {}", show(&o));
    }
}

#[test]
fn hydra_starts_an_unmodified_nemesis_program() {
    let Some(h) = hydra() else { return };
    let before = shm_entries();
    let o = hydra_job(
        h,
        &["-n", "4"],
        "traffic",
        &[("NEMESIS_TEST_SEED", "77".into()), ("NEMESIS_TEST_COUNT", "100".into())],
    );
    assert!(o.status.success(), "{}", show(&o));
    assert_eq!(results(&o).len(), 4, "{}", show(&o));
    let leaked: Vec<_> =
        shm_entries().into_iter().filter(|e| !before.contains(e) && e.starts_with("nemesis")).collect();
    assert!(leaked.is_empty(), "left in /dev/shm: {leaked:?}");
}

// ---------------------------------------------------------------------------------------------
// The examples of the README, as built by `cargo test`.

fn example(name: &str) -> std::path::PathBuf {
    let exe = std::env::current_exe().unwrap();
    exe.parent().unwrap().parent().unwrap().join("examples").join(name)
}

#[test]
fn readme_examples_run_under_nemesis_run() {
    let o =
        Command::new(env!("CARGO_BIN_EXE_nemesis-run")).args(["-n", "3", "--"]).arg(example("hello")).output().unwrap();
    assert!(o.status.success(), "{}", show(&o));
    let out = String::from_utf8_lossy(&o.stdout);
    for r in 1..3 {
        assert!(out.contains(&format!("rank {r} says {}", r * 10)), "{out}");
    }
    let o = Command::new(env!("CARGO_BIN_EXE_nemesis-run"))
        .args(["-n", "4", "--"])
        .arg(example("ring"))
        .arg("3")
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", show(&o));
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(out.contains("lap 2: the token came back with 12 bytes"), "{out}");
    assert!(out.contains("rank 0 heard from all 4 ranks: true"), "{out}");
}
