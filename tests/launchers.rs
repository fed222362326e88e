//! Every bootstrap end to end, with the same rank programs (`tests/common/roles.rs`: random
//! all-to-all traffic, a ring with a rendezvous message, a peer killed while others wait on it,
//! and the ring over two node identities) under each launcher:
//!
//! | module | launcher | interface |
//! |---|---|---|
//! | `nemesis_run_pmi1` | `nemesis-run` | PMI-1 |
//! | `nemesis_run_pmi2` | `nemesis-run` with `NEMESIS_PMI=2` | PMI-2 |
//! | `hydra_pmi1` | `mpiexec.hydra` (Debian `mpich`) | PMI-1 |
//! | `hydra_pmi2` | `mpiexec.hydra` with `NEMESIS_PMI=2` | PMI-2 |
//! | `srun_pmi2` | `srun --mpi=pmi2` (Slurm's `pmi2` plugin; chosen from `SLURM_MPI_TYPE`) | PMI-2 |
//! | `srun_pmi1` | `srun --mpi=pmi2` with `NEMESIS_PMI=1` (the plugin answers PMI-1 too) | PMI-1 |
//! | `srun_pmix` | `srun --mpi=pmix` | PMIx |
//! | `openmpi` | `mpiexec.openmpi` | PMIx |
//!
//! Without the `pmix` feature the PMIx launchers must fail with the error naming it (no silent
//! singletons); with it (`cargo test -p nemesis --features pmix --test launchers`) they run the
//! programs. The Slurm tests need a running Slurm (`.ci/slurm-up`, root): they skip when `srun`
//! does not answer, and fail instead under `CI=true`. Two node identities are given by
//! `--nodes 2` to `nemesis-run` and by a wrapper setting `NEMESIS_NODE` from the rank elsewhere.
//!
//! Bootstrap errors against a fake process manager (a server that closes, a malformed reply, a
//! missing key, over PMI-1 and PMI-2) and jobs with no reachable process manager are at the end.

mod common;

use std::io::{BufRead, BufReader, Read, Write};
use std::os::fd::AsRawFd;
use std::os::unix::net::UnixStream;
use std::os::unix::process::CommandExt;
use std::process::{Command, Output};
use std::sync::OnceLock;
use std::time::Duration;

use common::harness::Test;
use common::{in_ci, results, roles, run_with_timeout, show};

fn main() {
    common::harness::main(rank_main, every_test());
}

/// The rank program, by `NEMESIS_TEST_ROLE`.
fn rank_main() {
    // The library logs nowhere of itself: the ranks report their interface through our logger.
    nemesis::log::init();
    match std::env::var("NEMESIS_TEST_ROLE").unwrap_or_default().as_str() {
        "traffic" => roles::traffic(),
        "ring" => roles::ring(),
        "peer-killed" => roles::peer_killed(),
        "init-error" => roles::init_error(),
        other => panic!("unknown role {other:?}"),
    }
}

/// A launcher and the interface its ranks speak.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Launcher {
    RunPmi1,
    RunPmi2,
    HydraPmi1,
    HydraPmi2,
    SrunPmi2,
    SrunPmi1,
    SrunPmix,
    OpenMpi,
}

use Launcher::*;

/// True if `cmd args` runs and exits 0 within `secs`.
fn answers(cmd: &str, args: &[&str], secs: u64) -> bool {
    let mut c = Command::new("timeout");
    c.arg(secs.to_string()).arg(cmd).args(args);
    c.output().is_ok_and(|o| o.status.success())
}

/// Whether Slurm answers (`srun -n1 true`), asked once; and whether it has the pmix plugin.
fn slurm() -> (bool, bool) {
    static SLURM: OnceLock<(bool, bool)> = OnceLock::new();
    *SLURM.get_or_init(|| {
        if !answers("srun", &["-n1", "true"], 60) {
            return (false, false);
        }
        let list = Command::new("srun")
            .arg("--mpi=list")
            .output()
            .map(|o| String::from_utf8_lossy(&o.stdout).into_owned() + &String::from_utf8_lossy(&o.stderr));
        (true, list.is_ok_and(|l| l.lines().any(|x| x.trim().starts_with("pmix"))))
    })
}

/// The ends of the logs of the Slurm daemons `.ci/slurm-up` started, for a failure message.
fn slurm_logs() -> String {
    let mut out = String::new();
    for f in ["/run/nemesis-slurm/slurmctld.log", "/run/nemesis-slurm/slurmd.log"] {
        let text = std::fs::read_to_string(f).unwrap_or_else(|e| format!("({e})"));
        let lines: Vec<&str> = text.lines().collect();
        out += &format!("\n--- {f}\n{}", lines[lines.len().saturating_sub(40)..].join("\n"));
    }
    out
}

impl Launcher {
    /// Whether it can run here; `false` skips (with a message), except under CI where a missing
    /// launcher fails the test.
    fn available(self) -> bool {
        let (ok, what) = match self {
            RunPmi1 | RunPmi2 => (true, ""),
            HydraPmi1 | HydraPmi2 => {
                (answers("mpiexec.hydra", &["--version"], 20), "mpiexec.hydra (apt-get install mpich)")
            }
            OpenMpi => {
                (answers("mpiexec.openmpi", &["--version"], 20), "mpiexec.openmpi (apt-get install openmpi-bin)")
            }
            SrunPmi2 | SrunPmi1 => (slurm().0, "a running Slurm (.ci/slurm-up, as root)"),
            SrunPmix => {
                let (up, pmix) = slurm();
                if up && !pmix {
                    // Debian's Slurm may lack the plugin: then there is nothing to test, even in CI.
                    eprintln!("skipped: this Slurm has no pmix plugin (srun --mpi=list)");
                    return false;
                }
                (up, "a running Slurm (.ci/slurm-up, as root)")
            }
        };
        if !ok {
            let logs = if matches!(self, SrunPmi2 | SrunPmi1 | SrunPmix) { slurm_logs() } else { String::new() };
            assert!(!in_ci(), "{self:?} needs {what}, missing under CI=true{logs}");
            eprintln!("skipped {self:?}: needs {what}");
        }
        ok
    }

    fn pmix(self) -> bool {
        matches!(self, SrunPmix | OpenMpi)
    }

    /// The command starting `n` ranks of `program args`.
    fn command(self, n: u32, program: &[String]) -> Command {
        let n = n.to_string();
        let mut c = match self {
            RunPmi1 | RunPmi2 => {
                let mut c = Command::new(env!("CARGO_BIN_EXE_nemesis-run"));
                c.args(["-n", &n, "--"]);
                c
            }
            HydraPmi1 | HydraPmi2 => {
                let mut c = Command::new("mpiexec.hydra");
                c.args(["-n", &n]);
                c
            }
            SrunPmi2 | SrunPmi1 | SrunPmix => {
                let mut c = Command::new("srun");
                let mpi = if self == SrunPmix { "--mpi=pmix" } else { "--mpi=pmi2" };
                c.args(["-n", &n, "--overcommit", mpi, "--kill-on-bad-exit=0", "--quiet"]);
                c
            }
            OpenMpi => {
                let mut c = Command::new("mpiexec.openmpi");
                c.args(["--allow-run-as-root", "--oversubscribe", "-n", &n]);
                c
            }
        };
        c.args(program);
        match self {
            RunPmi2 | HydraPmi2 => {
                c.env("NEMESIS_PMI", "2");
            }
            SrunPmi1 => {
                c.env("NEMESIS_PMI", "1");
            }
            _ => {
                c.env_remove("NEMESIS_PMI");
            }
        }
        c.env("NEMESIS_LOG", "info");
        c
    }
}

/// This test binary as a rank program.
fn rank_program() -> Vec<String> {
    common::harness::me_as_rank().into_iter().map(|a| a.to_string_lossy().into_owned()).collect()
}

/// The rank program behind a wrapper that gives ranks `0..n/2` the node id `node0` and the
/// others `node1`, from the rank the process manager set.
fn on_two_nodes(n: u32, program: Vec<String>) -> Vec<String> {
    let script = format!(
        "r=${{PMI_RANK:-${{PMIX_RANK:-${{SLURM_PROCID:-0}}}}}}; NEMESIS_NODE=node$(( r / {} )) exec \"$0\" \"$@\"",
        n.div_ceil(2)
    );
    let mut v = vec!["sh".to_owned(), "-c".to_owned(), script];
    v.extend(program);
    v
}

/// Runs `role` on `n` ranks under `l`; `None` if `l` is not available here.
fn run(l: Launcher, n: u32, role: &str, two_nodes: bool, env: &[(&str, &str)]) -> Option<Output> {
    if !l.available() {
        return None;
    }
    let mut program = rank_program();
    if two_nodes && !matches!(l, RunPmi1 | RunPmi2) {
        program = on_two_nodes(n, program);
    }
    let mut c = l.command(n, &program);
    if two_nodes && matches!(l, RunPmi1 | RunPmi2) {
        // `nemesis-run --nodes 2 -n N -- ...`: the option goes before `--`.
        let args: Vec<String> = c.get_args().map(|a| a.to_string_lossy().into_owned()).collect();
        let mut c2 = Command::new(c.get_program());
        c2.args(["--nodes", "2"]).args(args);
        for (k, v) in c.get_envs() {
            match v {
                Some(v) => c2.env(k, v),
                None => c2.env_remove(k),
            };
        }
        c = c2;
    }
    c.env("NEMESIS_TEST_ROLE", role).env_remove("NEMESIS_NODE");
    for (k, v) in env {
        c.env(k, v);
    }
    Some(run_with_timeout(c, Duration::from_secs(180)))
}

/// Without the `pmix` feature, a PMIx launcher's ranks must refuse to start, naming it.
fn refused_without_pmix(o: &Output) {
    let out = String::from_utf8_lossy(&o.stdout).into_owned() + &String::from_utf8_lossy(&o.stderr);
    assert!(!o.status.success(), "{}", show(o));
    assert!(out.contains("PMIX_NAMESPACE=") && out.contains("without the `pmix` feature"), "{}", show(o));
}

/// Checks the output of a job that should have run; `false` if it was a PMIx launcher in a build
/// without the feature (then the refusal was checked instead).
fn ran(l: Launcher, o: &Output) -> bool {
    if l.pmix() && !cfg!(feature = "pmix") {
        refused_without_pmix(o);
        return false;
    }
    assert!(o.status.success(), "{l:?}: {}", show(o));
    true
}

/// The interface the ranks said they used (`NEMESIS_LOG=info`), e.g. `PMI-2 (Slurm)`.
fn interface_used(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr)
        .lines()
        .find_map(|l| l.split("interface=").nth(1).map(|r| r.split(" size=").next().unwrap_or(r).to_owned()))
        .unwrap_or_default()
}

fn expected_interface(l: Launcher) -> &'static str {
    match l {
        RunPmi1 => "PMI-1 (nemesis-run)",
        RunPmi2 => "PMI-2 (nemesis-run)",
        HydraPmi1 => "PMI-1 (Hydra)",
        HydraPmi2 => "PMI-2 (Hydra)",
        SrunPmi2 => "PMI-2 (Slurm)",
        SrunPmi1 => "PMI-1 (Slurm)",
        SrunPmix => "PMIx (Slurm)",
        OpenMpi => "PMIx (Open MPI)",
    }
}

fn traffic(l: Launcher) {
    let seed = (std::process::id() ^ 0x5eed).to_string();
    let Some(o) = run(l, 4, "traffic", false, &[("NEMESIS_TEST_SEED", &seed), ("NEMESIS_TEST_COUNT", "150")]) else {
        return;
    };
    if ran(l, &o) {
        assert_eq!(results(&o).len(), 4, "seed {seed}: {}", show(&o));
        assert_eq!(interface_used(&o), expected_interface(l), "{}", show(&o));
    }
}

/// One node: every rank shares the segment, placed there by the process manager.
fn ring(l: Launcher) {
    let Some(o) = run(l, 4, "ring", false, &[]) else { return };
    if ran(l, &o) {
        let r = results(&o);
        assert_eq!(r.len(), 4, "{}", show(&o));
        assert!(r.iter().all(|l| l.ends_with("with 4 local")), "{r:?}");
        // The placement came from the process manager (`<host>.<node index>`), except under
        // nemesis-run, which names the node itself (NEMESIS_NODE).
        if !matches!(l, RunPmi1 | RunPmi2) {
            assert!(r.iter().all(|l| l.contains(".0 with")), "{l:?} did not place the ranks: {r:?}");
        }
    }
}

/// Two node identities: two ranks on each, reached through TCP from the other.
fn two_nodes(l: Launcher) {
    let Some(o) = run(l, 4, "ring", true, &[]) else { return };
    if ran(l, &o) {
        let r = results(&o);
        assert_eq!(r.len(), 4, "{}", show(&o));
        assert!(r.iter().all(|l| l.ends_with("with 2 local")), "{r:?}");
        let nodes: std::collections::BTreeSet<&str> =
            r.iter().filter_map(|l| l.split(" on ").nth(1)?.split(' ').next()).collect();
        assert_eq!(nodes.len(), 2, "{r:?}");
    }
}

/// Rank 2 of 3 kills itself while the others wait on it: they get `PeerDied` and finish, or
/// the launcher ends the job (Hydra and Open MPI do when a rank dies); never a hang.
fn dead_peer(l: Launcher) {
    let extra: &[(&str, &str)] = &[];
    let Some(o) = (match l {
        RunPmi1 | RunPmi2 => {
            // nemesis-run needs --keep-going for the survivors to go on.
            if !l.available() {
                return;
            }
            let mut c = l.command(3, &rank_program());
            let args: Vec<String> = c.get_args().map(|a| a.to_string_lossy().into_owned()).collect();
            let mut c2 = Command::new(c.get_program());
            c2.arg("--keep-going").args(args).env("NEMESIS_TEST_ROLE", "peer-killed");
            if l == RunPmi2 {
                c2.env("NEMESIS_PMI", "2");
            }
            c = c2;
            Some(run_with_timeout(c, Duration::from_secs(180)))
        }
        _ => run(l, 3, "peer-killed", false, extra),
    }) else {
        return;
    };
    if l.pmix() && !cfg!(feature = "pmix") {
        return refused_without_pmix(&o);
    }
    assert!(!o.status.success(), "a rank was killed: the job cannot succeed\n{}", show(&o));
    let survivors = results(&o).len();
    eprintln!("{l:?}: {survivors} survivors finished; the job ended with {}", o.status);
    match l {
        // Ours and Slurm (--kill-on-bad-exit=0) let the survivors finish.
        RunPmi1 | RunPmi2 | SrunPmi2 | SrunPmi1 | SrunPmix => assert_eq!(survivors, 2, "{}", show(&o)),
        // Hydra and Open MPI end the job when a rank dies.
        HydraPmi1 | HydraPmi2 | OpenMpi => assert!(survivors <= 2, "{}", show(&o)),
    }
}

/// A program's test under one launcher.
type Program = fn(Launcher);

/// Every test: the four programs under each launcher (`<launcher>::<program>`, as the module
/// table above names them), then the rest.
fn every_test() -> Vec<Test> {
    let launchers = [
        ("nemesis_run_pmi1", RunPmi1),
        ("nemesis_run_pmi2", RunPmi2),
        ("hydra_pmi1", HydraPmi1),
        ("hydra_pmi2", HydraPmi2),
        ("srun_pmi2", SrunPmi2),
        ("srun_pmi1", SrunPmi1),
        ("srun_pmix", SrunPmix),
        ("openmpi", OpenMpi),
    ];
    let programs: [(&str, Program); 4] =
        [("traffic", traffic), ("ring", ring), ("two_nodes", two_nodes), ("dead_peer", dead_peer)];
    let mut v = Vec::new();
    for (module, l) in launchers {
        for (name, f) in programs {
            v.push(Test::new(format!("{module}::{name}"), move || f(l)));
        }
    }
    v.extend(
        tests![
            several_processes_without_a_process_manager_fail_naming_what_is_missing,
            srun_without_a_pmi_plugin_is_refused,
            a_process_manager_that_closes_is_named,
            a_malformed_reply_is_named,
            a_missing_key_is_named,
        ]
        .into_iter()
        .map(Test::from),
    );
    v
}

// ---------------------------------------------------------------------------------------------
// No silent singletons: a job of several processes without a process manager it can reach.

/// Runs the test binary alone (no launcher) as role `init-error` with `env`.
fn alone(env: &[(&str, &str)]) -> Output {
    let p = rank_program();
    let mut c = Command::new(&p[0]);
    c.args(&p[1..]).env("NEMESIS_TEST_ROLE", "init-error");
    for v in ["PMI_FD", "PMI_RANK", "PMI_SIZE", "PMIX_NAMESPACE", "SLURM_NTASKS", "SLURM_STEP_NUM_TASKS", "NEMESIS_PMI"]
    {
        c.env_remove(v);
    }
    for (k, v) in env {
        c.env(k, v);
    }
    run_with_timeout(c, Duration::from_secs(60))
}

fn init_error(o: &Output) -> String {
    assert!(o.status.success(), "Endpoint::init should have failed: {}", show(o));
    let out = String::from_utf8_lossy(&o.stdout);
    let found = out.lines().find_map(|l| l.find("INIT-ERROR ").map(|i| l[i + 11..].to_owned()));
    found.unwrap_or_else(|| panic!("no INIT-ERROR line: {}", show(o)))
}

fn several_processes_without_a_process_manager_fail_naming_what_is_missing() {
    let e = init_error(&alone(&[("SLURM_STEP_NUM_TASKS", "4"), ("SLURM_NTASKS", "4")]));
    assert!(e.contains("one of 4 (SLURM_STEP_NUM_TASKS=4)") && e.contains("srun --mpi=pmi2 or srun --mpi=pmix"), "{e}");
    let e = init_error(&alone(&[("OMPI_COMM_WORLD_SIZE", "2")]));
    assert!(e.contains("OMPI_COMM_WORLD_SIZE=2") && e.contains("no PMIx server"), "{e}");
    let e = init_error(&alone(&[("PMIX_NAMESPACE", "fake.ns"), ("PMIX_RANK", "0"), ("NEMESIS_PMI", "pmix")]));
    if cfg!(feature = "pmix") {
        assert!(e.contains("PMIx") && e.contains("PMIx_Init"), "{e}");
    } else {
        assert!(e.contains("PMIX_NAMESPACE=fake.ns") && e.contains("without the `pmix` feature"), "{e}");
    }
    // Asked for: a singleton anyway.
    let o = alone(&[("SLURM_NTASKS", "4"), ("NEMESIS_PMI", "singleton")]);
    assert_eq!(o.status.code(), Some(1), "{}", show(&o));
    assert!(String::from_utf8_lossy(&o.stdout).contains("INIT-OK rank 0 of 1"), "{}", show(&o));
}

/// `srun` without an MPI plugin (`--mpi=none`, the default of many sites) starts processes that
/// must refuse to run as singletons.
fn srun_without_a_pmi_plugin_is_refused() {
    if !SrunPmi2.available() {
        return;
    }
    let p = rank_program();
    let mut c = Command::new("srun");
    c.args(["-n", "2", "--overcommit", "--mpi=none", "--quiet"]).args(&p).env("NEMESIS_TEST_ROLE", "init-error");
    let o = run_with_timeout(c, Duration::from_secs(120));
    let errors: Vec<_> =
        String::from_utf8_lossy(&o.stdout).lines().filter(|l| l.contains("INIT-ERROR")).map(str::to_owned).collect();
    assert_eq!(errors.len(), 2, "{}", show(&o));
    assert!(errors.iter().all(|e| e.contains("SLURM_STEP_NUM_TASKS=2") && e.contains("srun --mpi=pmi2")), "{errors:?}");
}

// ---------------------------------------------------------------------------------------------
// Bootstrap errors against a fake process manager: the rank's `Endpoint::init` must fail with
// an error naming the interface and the process manager, never hang or panic.

/// One step of a fake server: what the rank sends (a prefix), and the reply (`None`: close).
struct Step {
    v2: bool,
    expect: &'static str,
    reply: Option<String>,
}

fn v1(expect: &'static str, reply: &str) -> Step {
    Step { v2: false, expect, reply: Some(format!("{reply}\n")) }
}

fn v2(expect: &'static str, reply: &str) -> Step {
    Step { v2: true, expect, reply: Some(format!("{:6}{reply}", reply.len())) }
}

fn close(v2: bool, expect: &'static str) -> Step {
    Step { v2, expect, reply: None }
}

/// Starts the test binary as rank 0 of 2 (role `init-error`, as if under Slurm) with `PMI_FD` on
/// a socket whose other end follows `script`; returns the error it reported.
fn against_fake_server(pmi: &str, script: Vec<Step>) -> String {
    let (ours, theirs) = UnixStream::pair().unwrap();
    let fd = theirs.as_raw_fd();
    let p = rank_program();
    let mut c = Command::new(&p[0]);
    c.args(&p[1..]).env("NEMESIS_TEST_ROLE", "init-error");
    c.env("PMI_FD", fd.to_string()).env("PMI_RANK", "0").env("PMI_SIZE", "2").env("NEMESIS_PMI", pmi);
    // A node id of our own: no placement query, straight to the node id exchange.
    c.env("NEMESIS_NODE", "fake").env("SLURM_JOB_ID", "1").env_remove("NEMESIS_LAUNCHER").env_remove("PMIX_NAMESPACE");
    // SAFETY: only fcntl on a descriptor the child inherits, between fork and exec.
    unsafe {
        c.pre_exec(move || {
            if libc::fcntl(fd, libc::F_SETFD, 0) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
    let server = std::thread::spawn(move || {
        let mut r = BufReader::new(ours.try_clone().unwrap());
        let mut w = ours;
        for step in script {
            let got = if step.v2 {
                let mut len = [0u8; 6];
                r.read_exact(&mut len).unwrap();
                let n: usize = std::str::from_utf8(&len).unwrap().trim().parse().unwrap();
                let mut body = vec![0u8; n];
                r.read_exact(&mut body).unwrap();
                String::from_utf8(body).unwrap()
            } else {
                let mut line = String::new();
                r.read_line(&mut line).unwrap();
                line
            };
            assert!(got.starts_with(step.expect), "the rank sent {got:?}, expected {:?}", step.expect);
            match step.reply {
                Some(reply) => w.write_all(reply.as_bytes()).unwrap(),
                None => return,
            }
        }
        // Keep the connection open until the rank is done.
        let mut rest = Vec::new();
        let _ = r.read_to_end(&mut rest);
    });
    let o = run_with_timeout(c, Duration::from_secs(60));
    drop(theirs);
    server.join().unwrap();
    init_error(&o)
}

fn pmi1_startup() -> Vec<Step> {
    vec![
        v1("cmd=init pmi_version=1", "cmd=response_to_init pmi_version=1 pmi_subversion=1 rc=0"),
        v1("cmd=get_maxes", "cmd=maxes kvsname_max=256 keylen_max=64 vallen_max=1024 rc=0"),
        v1("cmd=get_appnum", "cmd=appnum appnum=0 rc=0"),
        v1("cmd=get_my_kvsname", "cmd=my_kvsname kvsname=kvs_1 rc=0"),
    ]
}

fn pmi2_startup() -> Vec<Step> {
    vec![
        v1("cmd=init pmi_version=2", "cmd=response_to_init pmi_version=2 pmi_subversion=0 rc=0"),
        v2("cmd=fullinit;", "cmd=fullinit-response;rank=0;size=2;appnum=0;rc=0;"),
        v2("cmd=job-getid;", "cmd=job-getid-response;jobid=1.0;rc=0;"),
    ]
}

fn a_process_manager_that_closes_is_named() {
    let e = against_fake_server("1", vec![close(false, "cmd=init")]);
    assert_eq!(e, "PMI-1 (Slurm): init: the process manager closed the connection");
    let mut s = pmi2_startup();
    s.push(v2("cmd=kvs-put;key=nemesis-node-0;value=fake;", "cmd=kvs-put-response;rc=0;"));
    s.push(close(true, "cmd=kvs-fence;"));
    let e = against_fake_server("2", s);
    assert_eq!(e, "PMI-2 (Slurm): kvs-fence: the process manager closed the connection");
}

fn a_malformed_reply_is_named() {
    let e = against_fake_server(
        "1",
        vec![
            v1("cmd=init", "cmd=response_to_init pmi_version=1 pmi_subversion=1 rc=0"),
            v1("cmd=get_maxes", "garbage here"),
        ],
    );
    assert_eq!(e, "PMI-1 (Slurm): get_maxes: malformed reply: expected cmd=maxes, got \"garbage here\"");
    let e = against_fake_server(
        "2",
        vec![
            v1("cmd=init pmi_version=2", "cmd=response_to_init pmi_version=2 pmi_subversion=0 rc=0"),
            Step { v2: true, expect: "cmd=fullinit;", reply: Some("xx12cmd=fullinit-response;".into()) },
        ],
    );
    assert!(e.starts_with("PMI-2 (Slurm): fullinit: malformed reply: length field"), "{e}");
}

fn a_missing_key_is_named() {
    let mut s = pmi1_startup();
    s.push(v1("cmd=put kvsname=kvs_1 key=nemesis-node-0 value=fake", "cmd=put_result rc=0 msg=success"));
    s.push(v1("cmd=barrier_in", "cmd=barrier_out"));
    s.push(v1("cmd=get kvsname=kvs_1 key=nemesis-node-1", "cmd=get_result rc=-1 msg=key_not_found"));
    let e = against_fake_server("1", s);
    assert_eq!(e, "PMI-1 (Slurm): get: rank 1 published no node id (key nemesis-node-1 is missing)");
    let mut s = pmi2_startup();
    s.push(v2("cmd=kvs-put;key=nemesis-node-0;value=fake;", "cmd=kvs-put-response;rc=0;"));
    s.push(v2("cmd=kvs-fence;", "cmd=kvs-fence-response;rc=0;"));
    s.push(v2("cmd=kvs-get;jobid=1.0;key=nemesis-no-such-key;", "cmd=kvs-get-response;found=FALSE;rc=0;"));
    s.push(v2("cmd=kvs-get;jobid=1.0;key=nemesis-node-1;", "cmd=kvs-get-response;found=FALSE;rc=0;"));
    let e = against_fake_server("2", s);
    assert_eq!(e, "PMI-2 (Slurm): get: rank 1 published no node id (key nemesis-node-1 is missing)");
}
