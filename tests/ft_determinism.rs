//! Send determinism checked in real processes (HydEE stamps, `nemesis_ft`'s `process/stamps.rs`):
//! a program whose re-execution sends other messages than its first run is caught by
//! `nemesis-run --ft`, not silently accepted.
//!
//! Two ranks in two groups. Rank 0 sends rank 1 two messages (tag 7) whose order depends on its
//! incarnation (the first run `A` then `B`, a restarted one `B` then `A`), waits for rank 1's
//! acknowledgement, and in its first incarnation holds there, serving its endpoint, until the test
//! SIGKILLs it (the kill lands at the point the test chose, not against a clock). Rank 1 has
//! received both: they are orphans of the restarted rank 0, which regenerates them.
//!
//! - With digests (the default) the regenerated message 1 has the date and sequence number of the
//!   orphan but not its digest: the restarted rank's send fails with `SendDeterminismViolated`
//!   naming rank 0, destination 1 and sequence number 1, and the job ends with that message.
//! - With [`ENV_FT_TEST_UNDIGESTED`] (stamps carry the sequence number alone) the same job ends
//!   "well": the regenerated messages are suppressed by date and sequence number, and rank 1 holds
//!   `A, B` while the restarted rank 0 believes it sent `B, A` — what the digest catches.
//!
//! Payloads are eager (one cell) or [`RENDEZVOUS`] bytes (past every eager limit: a blocking send
//! on the node is eager up to 2 MiB), over one node or `--nodes 2` (the TCP netmod between the
//! ranks). Eager payloads of 8 and 100 bytes carry the short stamp (`FT_STAMP_SHORT`: the low
//! halves of the sequence number and digest, rebuilt and checked by the receiver), [`LONG_EAGER`]
//! bytes the long one.
//!
//! The receiver's side: with [`ENV_FT_TEST_MISDIGESTED`] every digest is sent wrong (as a damaged
//! log would replay it), and a failure-free job whose rank 0 sends rank 1 one message ends with
//! `SendDeterminismViolated` from rank 1's receive: checked on arrival for an eager message, once
//! the data is in for a rendezvous one, at its last fragment for an eager message in several
//! (`src/endpoint/ft_rdv.rs`).
//!
//! The test binary is itself the rank program (`rank_main`).

mod common;

use std::io::Read;
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use nemesis::Endpoint;

/// The test-only switches of `nemesis::ft` (not re-exported: their values are the contract).
const ENV_FT_TEST_UNDIGESTED: &str = "NEMESIS_FT_TEST_UNDIGESTED";
const ENV_FT_TEST_MISDIGESTED: &str = "NEMESIS_FT_TEST_MISDIGESTED";

/// A message that goes by rendezvous on every path.
const RENDEZVOUS: usize = 3 << 20;

/// A blocking send on the node that goes eagerly, in several fragments.
const SEVERAL_FRAGMENTS: usize = 200_000;
/// An eager message too long for the short stamp (`nemesis::ft`'s `SHORT_STAMP_MAX`, 192 bytes).
const LONG_EAGER: usize = 300;

fn main() {
    common::harness::main(
        rank_main,
        tests![
            a_reordered_reexecution_is_caught,
            a_reordered_reexecution_is_caught_by_rendezvous,
            a_reordered_reexecution_is_caught_over_two_nodes,
            a_reordered_reexecution_is_caught_with_long_stamps,
            a_reordered_reexecution_of_8_bytes_is_caught_over_two_nodes,
            without_the_digest_it_would_have_been_silent,
            without_the_digest_it_would_have_been_silent_by_rendezvous,
            a_deterministic_reexecution_recovers,
            a_wrong_digest_is_refused_on_arrival,
            a_wrong_digest_is_refused_at_the_last_fragment,
            a_wrong_short_digest_is_refused_on_arrival_over_two_nodes,
            a_wrong_digest_is_refused_once_a_rendezvous_is_in,
            a_wrong_digest_is_refused_once_a_rendezvous_is_in_over_two_nodes,
            a_wrong_digest_is_refused_once_a_rendezvous_is_in_pieces,
            a_rendezvous_in_pieces_with_the_right_digest_is_delivered,
        ],
    );
}

/// Message `which` (0: `A`, 1: `B`) of `len` bytes.
fn message(which: u8, len: usize) -> Vec<u8> {
    (0..len).map(|i| if i == 0 { b'A' + which } else { (i as u8).wrapping_mul(31).wrapping_add(which) }).collect()
}

/// The rank program.
fn rank_main() {
    let dir = PathBuf::from(std::env::var("FT_TEST_DIR").unwrap());
    let len: usize = std::env::var("FT_TEST_LEN").unwrap().parse().unwrap();
    // `1`: the restarted rank 0 sends in the same order (a deterministic program).
    let same_order = std::env::var("FT_TEST_SAME_ORDER").is_ok_and(|v| v == "1");
    nemesis::log::init();
    let mut ep = match Endpoint::init() {
        Ok(ep) => ep,
        Err(e) => {
            nemesis::say!("rank cannot start: {e}");
            std::process::exit(1);
        }
    };
    let me = ep.rank();
    if std::env::var("FT_TEST_ONE").is_ok_and(|v| v == "1") {
        // One message, no failure.
        if me == 0 {
            ep.send(&message(0, len), 1, 7, 0).unwrap();
        } else {
            let pieces = std::env::var("FT_TEST_PIECES").is_ok_and(|v| v == "1");
            let got = if pieces { recv_in_pieces(&mut ep, len) } else { recv_whole(&mut ep, len) };
            let buf = match got {
                Ok(buf) => buf,
                Err(e) => {
                    println!("RESULT error rank {me}: {e}");
                    ep.abort(3, &e.to_string());
                }
            };
            println!("RESULT received {}", buf == message(0, len));
        }
        ep.finalize().unwrap();
        return;
    }
    let incarnation = std::fs::read_dir(&dir)
        .unwrap()
        .flatten()
        .filter(|e| e.file_name().to_string_lossy().starts_with(&format!("started-{me}-")))
        .count();
    std::fs::write(dir.join(format!("started-{me}-{}", std::process::id())), "").unwrap();
    if me == 0 {
        let order: [u8; 2] = if incarnation == 0 || same_order { [0, 1] } else { [1, 0] };
        for &m in &order {
            if let Err(e) = ep.send(&message(m, len), 1, 7, 0) {
                println!("RESULT error rank {me}: {e}");
                ep.abort(3, &e.to_string());
            }
        }
        let mut ack = [0u8; 3];
        ep.recv(&mut ack, 1, 9, 0).unwrap();
        if incarnation == 0 {
            let marker = dir.join("held-0");
            std::fs::write(marker.with_extension("tmp"), std::process::id().to_string()).unwrap();
            std::fs::rename(marker.with_extension("tmp"), &marker).unwrap();
            loop {
                let _ = ep.progress();
                std::thread::sleep(Duration::from_millis(1));
            }
        }
        ep.send(&order, 1, 8, 0).unwrap();
    } else {
        let mut got = Vec::new();
        for _ in 0..2 {
            let mut buf = vec![0u8; len];
            ep.recv(&mut buf, 0, 7, 0).unwrap();
            let which = buf[0] - b'A';
            assert_eq!(buf, message(which, len), "a message arrived whole");
            got.push(which);
        }
        ep.send(b"ack", 0, 9, 0).unwrap();
        let mut claimed = [0u8; 2];
        ep.recv(&mut claimed, 0, 8, 0).unwrap();
        println!("RESULT received {got:?} sender-sent {:?}", claimed.to_vec());
    }
    ep.finalize().unwrap();
}

/// Message 0 from rank 0 (tag 7) into a contiguous buffer.
fn recv_whole(ep: &mut Endpoint, len: usize) -> nemesis::Result<Vec<u8>> {
    let mut buf = vec![0u8; len];
    ep.recv(&mut buf, 0, 7, 0)?;
    Ok(buf)
}

/// Message 0 from rank 0 (tag 7) into pieces of [`PIECE`] bytes with a gap of as much between
/// them (as a strided datatype receives), packed back for the comparison.
fn recv_in_pieces(ep: &mut Endpoint, len: usize) -> nemesis::Result<Vec<u8>> {
    const PIECE: usize = 4096;
    let mut spread = vec![0u8; 2 * len + PIECE];
    let base = spread.as_mut_ptr();
    // SAFETY: each piece lies inside `spread`, which outlives the receive; none overlap.
    let list = unsafe {
        nemesis::PieceList::new(
            (0..len.div_ceil(PIECE)).map(|i| (base.add(2 * i * PIECE), PIECE.min(len - i * PIECE))).collect(),
        )
    };
    let mut list: Box<dyn nemesis::Pieces> = Box::new(list);
    // SAFETY: the list and its memory stay valid and untouched until the request completes below.
    let req = unsafe { ep.irecv_pieces(std::ptr::NonNull::from(&mut *list), 0, 7, 0)? };
    ep.wait(req)?;
    Ok(spread.chunks(PIECE).step_by(2).flatten().take(len).copied().collect())
}

/// What a job gave.
struct Done {
    ok: bool,
    stdout: String,
    stderr: String,
}

/// One job at a time (2 cores).
static ONE_AT_A_TIME: std::sync::Mutex<()> = std::sync::Mutex::new(());

/// Runs the job (`len`-byte messages, launcher arguments `extra`, more environment `env`), kills
/// rank 0 where it holds, and waits for the end.
fn job(name: &str, len: usize, extra: &[&str], env: &[(&str, &str)]) -> Done {
    run_job(name, len, extra, env, true)
}

/// [`job`], killing rank 0 where it holds if `kill`.
fn run_job(name: &str, len: usize, extra: &[&str], env: &[(&str, &str)], kill: bool) -> Done {
    let _serial = ONE_AT_A_TIME.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
    let dir = std::env::temp_dir().join(format!("nemesis-ftd-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(dir.join("ckpt")).unwrap();
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_nemesis-run"));
    cmd.args(["-n", "2", "--wait", "yield", "--ft-groups", "2"]).args(extra).arg("--");
    cmd.args(common::harness::me_as_rank());
    cmd.env("FT_TEST_DIR", &dir)
        .env("FT_TEST_LEN", len.to_string())
        .env("NEMESIS_FT_DIR", dir.join("ckpt"))
        .env("NEMESIS_LOG", std::env::var("FT_TEST_LOG").unwrap_or_else(|_| "nemesis::launch=info".into()))
        .envs(env.iter().copied())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let start = Instant::now();
    let mut child = cmd.spawn().unwrap();
    let mut o = child.stdout.take().unwrap();
    let mut e = child.stderr.take().unwrap();
    let out = std::thread::spawn(move || {
        let mut s = String::new();
        let _ = o.read_to_string(&mut s);
        s
    });
    let err = std::thread::spawn(move || {
        let mut s = String::new();
        let _ = e.read_to_string(&mut s);
        s
    });
    let limit = Duration::from_secs(120);
    let marker = dir.join("held-0");
    let mut killed = false;
    let status = loop {
        if let Some(st) = child.try_wait().unwrap() {
            break st;
        }
        if !killed && let Some(pid) = std::fs::read_to_string(&marker).ok().and_then(|p| p.trim().parse::<i32>().ok()) {
            // SAFETY: a signal to rank 0 of this job (its pid from its own marker).
            unsafe { libc::kill(pid, libc::SIGKILL) };
            eprintln!("test: killed rank 0 (pid {pid}) at {:?}", start.elapsed());
            killed = true;
        }
        if start.elapsed() > limit {
            // SAFETY: our own child.
            unsafe { libc::kill(child.id() as libc::pid_t, libc::SIGTERM) };
            break child.wait().unwrap();
        }
        std::thread::sleep(Duration::from_millis(5));
    };
    let done = Done { ok: status.success(), stdout: out.join().unwrap(), stderr: err.join().unwrap() };
    let _ = std::fs::remove_dir_all(&dir);
    assert!(killed || !kill, "rank 0 never held; stdout:\n{}\nstderr:\n{}", done.stdout, done.stderr);
    done
}

/// The job ends with the violation, naming rank 0, destination 1 and sequence number 1.
fn caught(name: &str, len: usize, extra: &[&str]) {
    let d = job(name, len, extra, &[]);
    let all = format!("{}\n{}", d.stdout, d.stderr);
    assert!(!d.ok, "the job must fail; stdout:\n{}\nstderr:\n{}", d.stdout, d.stderr);
    let want = "send determinism violated: rank 0's message 1 to rank 1";
    assert!(all.contains(want), "no {want:?}; stdout:\n{}\nstderr:\n{}", d.stdout, d.stderr);
    assert!(all.contains("digest"), "the digest names the mismatch:\n{all}");
    assert!(d.stderr.contains("aborts the job"), "the job ends through the launcher:\n{}", d.stderr);
}

fn a_reordered_reexecution_is_caught() {
    caught("eager", 100, &[]);
}

fn a_reordered_reexecution_is_caught_by_rendezvous() {
    caught("rendezvous", RENDEZVOUS, &[]);
}

fn a_reordered_reexecution_is_caught_over_two_nodes() {
    caught("nodes", 100, &["--nodes", "2"]);
}

fn a_reordered_reexecution_is_caught_with_long_stamps() {
    caught("long-stamps", LONG_EAGER, &[]);
}

/// The message of one cache line (short stamp) between nodes: the orphans' stamps the receiver
/// recorded were rebuilt from short ones.
fn a_reordered_reexecution_of_8_bytes_is_caught_over_two_nodes() {
    caught("nodes-8", 8, &["--nodes", "2"]);
}

/// Without digests the job "succeeds" with rank 1 holding what the restarted rank 0 did not send.
fn silent(name: &str, len: usize) {
    let d = job(name, len, &[], &[(ENV_FT_TEST_UNDIGESTED, "1")]);
    assert!(d.ok, "the job ends as if nothing happened; stdout:\n{}\nstderr:\n{}", d.stdout, d.stderr);
    assert!(d.stdout.contains("RESULT received [0, 1] sender-sent [1, 0]"), "stdout:\n{}", d.stdout);
    assert!(!d.stderr.contains("send determinism"), "{}", d.stderr);
}

fn without_the_digest_it_would_have_been_silent() {
    silent("undigested", 100);
}

fn without_the_digest_it_would_have_been_silent_by_rendezvous() {
    silent("undigested-rendezvous", RENDEZVOUS);
}

/// The control: the restarted rank sends the same messages in the same order, the stamps match,
/// the job ends well and rank 1 holds what the sender sent.
fn a_deterministic_reexecution_recovers() {
    let d = job("same-order", 100, &[], &[("FT_TEST_SAME_ORDER", "1")]);
    assert!(d.ok, "stdout:\n{}\nstderr:\n{}", d.stdout, d.stderr);
    assert!(d.stdout.contains("RESULT received [0, 1] sender-sent [0, 1]"), "stdout:\n{}", d.stdout);
}

/// One message with a wrong digest: rank 1's receive fails with the violation naming rank 0's
/// message 1 to rank 1, and the job ends.
fn refused(name: &str, len: usize, extra: &[&str], what: &str) {
    let env = [(ENV_FT_TEST_MISDIGESTED, "1"), ("FT_TEST_ONE", "1")];
    let d = run_job(name, len, extra, &env, false);
    let all = format!("{}\n{}", d.stdout, d.stderr);
    assert!(!d.ok, "the job must fail; stdout:\n{}\nstderr:\n{}", d.stdout, d.stderr);
    let want = "RESULT error rank 1: fault tolerance: send determinism violated: rank 0's message 1 to rank 1";
    assert!(all.contains(want), "no {want:?}:\n{all}");
    assert!(all.contains(what), "no {what:?}:\n{all}");
    assert!(!all.contains("RESULT received"), "{all}");
}

fn a_wrong_digest_is_refused_on_arrival() {
    refused("misdigested", 100, &[], "arrived with a payload that does not match its digest");
}

/// An eager message in several cells (a blocking send on the node is eager up to 2 MiB; a cell
/// holds far less): hashed as its fragments arrive, compared at the last.
fn a_wrong_digest_is_refused_at_the_last_fragment() {
    let what = "arrived in several fragments with data that does not match its digest";
    refused("misdigested-fragments", SEVERAL_FRAGMENTS, &[], what);
}

/// The low half of the digest, in the header's `aux` (short stamp), checked through the TCP netmod.
fn a_wrong_short_digest_is_refused_on_arrival_over_two_nodes() {
    refused("misdigested-8", 8, &["--nodes", "2"], "arrived with a payload that does not match its digest");
}

fn a_wrong_digest_is_refused_once_a_rendezvous_is_in() {
    refused(
        "misdigested-rendezvous",
        RENDEZVOUS,
        &[],
        "arrived by rendezvous with data that does not match its digest",
    );
}

/// The rendezvous lands in pieces (no staging buffer on the node): hashed piece by piece.
fn a_wrong_digest_is_refused_once_a_rendezvous_is_in_pieces() {
    let env = [(ENV_FT_TEST_MISDIGESTED, "1"), ("FT_TEST_ONE", "1"), ("FT_TEST_PIECES", "1")];
    let d = run_job("misdigested-rendezvous-pieces", RENDEZVOUS, &[], &env, false);
    let all = format!("{}\n{}", d.stdout, d.stderr);
    assert!(!d.ok, "the job must fail:\n{all}");
    assert!(all.contains("arrived by rendezvous with data that does not match its digest"), "{all}");
    assert!(!all.contains("RESULT received"), "{all}");
}

/// The same receive in pieces with the right digest: the data arrives whole and the job ends
/// well (the digest over the pieces is the sender's).
fn a_rendezvous_in_pieces_with_the_right_digest_is_delivered() {
    let env = [("FT_TEST_ONE", "1"), ("FT_TEST_PIECES", "1")];
    let d = run_job("rendezvous-pieces", RENDEZVOUS, &[], &env, false);
    assert!(d.ok, "stdout:\n{}\nstderr:\n{}", d.stdout, d.stderr);
    assert!(d.stdout.contains("RESULT received true"), "stdout:\n{}", d.stdout);
}

fn a_wrong_digest_is_refused_once_a_rendezvous_is_in_over_two_nodes() {
    let what = "arrived by rendezvous with data that does not match its digest";
    refused("misdigested-rendezvous-nodes", RENDEZVOUS, &["--nodes", "2"], what);
}
