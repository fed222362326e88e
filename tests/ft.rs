//! Fault tolerance (HydEE) in the transport, across real processes started by `nemesis-run` (and
//! Hydra): the piggyback on every path (fastbox, single and multi-cell eager, synchronous sends,
//! rendezvous, messages in pieces, each netmod) checked against the engine's records; arrival and delivery hooks (posted,
//! unexpected, probe); the sender log holds exactly the inter-group messages; acknowledgements free
//! it; checkpoint files (written, replaced, a damaged one refused); checkpoints with outstanding
//! requests refused; unexpected messages held in their cells by back-pressure saved whole; groups-file
//! errors; an exhausted log; the communication matrix of known patterns.
//!
//! The test binary is itself the rank program: `nemesis-run` starts it with `--nemesis-test-rank`
//! and a role in `NEMESIS_TEST_ROLE`.

mod common;

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::ptr::NonNull;

use common::{in_ci, job, results, run_with_timeout, show};
use nemesis::{Endpoint, Error, PieceList, Pieces, WORLD};

fn main() {
    common::harness::main(
        rank_main,
        tests![
            piggyback_on_every_path_in_one_node,
            piggyback_on_every_path_over_each_netmod,
            piggyback_with_groups_computed_and_under_hydra,
            acknowledgements_free_the_log,
            checkpoint_files_are_replaced_and_damage_is_refused,
            checkpoints_with_outstanding_requests_are_refused,
            unexpected_messages_held_by_back_pressure_are_checkpointed_whole,
            an_exhausted_sender_log_is_a_clear_error,
            bad_groups_files_are_refused_at_start,
            the_communication_matrix_of_known_patterns,
        ],
    );
}

/// The rank program, by `NEMESIS_TEST_ROLE`.
fn rank_main() {
    match std::env::var("NEMESIS_TEST_ROLE").unwrap_or_default().as_str() {
        "paths" => paths(),
        "acks" => acks(),
        "files" => files(),
        "outstanding" => outstanding(),
        "held" => held(),
        "exhausted" => exhausted(),
        "init-error" => init_error(),
        "matrix" => matrix(),
        other => panic!("unknown role {other:?}"),
    }
}

/// A scratch directory for one test.
fn scratch(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("nemesis-ft-test-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

/// A groups file in `dir`.
fn groups_file(dir: &Path, text: &str) -> String {
    let p = dir.join("groups");
    std::fs::write(&p, text).unwrap();
    p.display().to_string()
}

fn ok(o: &Output, ranks: usize) {
    assert!(o.status.success(), "{}", show(o));
    assert_eq!(results(o).iter().filter(|l| l.starts_with("RESULT ok")).count(), ranks, "{}", show(o));
}

// ---------------------------------------------------------------------------------------------
// The piggyback on every path.

/// How a path sends: a count of messages of a length, by `send`, `ssend` or `isend` + `wait`.
#[derive(Clone, Copy)]
enum How {
    Send,
    Ssend,
    Isend,
}

/// The paths of one round (rounds 1 to 5): small messages (cells, then the fastbox once claimed,
/// through the inline send path), single cells, several cells (rendezvous through TCP), synchronous
/// sends, rendezvous.
const PATHS: [(usize, usize, How); 5] =
    [(40, 24, How::Send), (4, 1000, How::Send), (2, 100_000, How::Send), (3, 100, How::Ssend), (2, 50_000, How::Isend)];

/// Round 8's messages in pieces: (index, length), eager and by rendezvous.
const PIECES: [(u32, usize); 2] = [(0, 300), (1, 100_000)];

/// A message: the sender's date (of this send) and phase, its round and index, then filler.
fn message(ep: &Endpoint, round: u32, i: u32, len: usize) -> Vec<u8> {
    let (date, phase) = ep.ft_clock().unwrap();
    let mut v = Vec::with_capacity(len);
    v.extend_from_slice(&(date + 1).to_le_bytes());
    v.extend_from_slice(&phase.to_le_bytes());
    v.extend_from_slice(&round.to_le_bytes());
    v.extend_from_slice(&i.to_le_bytes());
    v.extend((24..len).map(|k| (k as u32 ^ round ^ i) as u8));
    v
}

/// `(date, phase)` written in a message.
fn stamp(b: &[u8]) -> (u64, u64) {
    (u64::from_le_bytes(b[..8].try_into().unwrap()), u64::from_le_bytes(b[8..16].try_into().unwrap()))
}

fn send_path(ep: &mut Endpoint, dest: u32, round: u32, count: usize, len: usize, how: How) -> (u64, u64) {
    let mut bytes = 0;
    for i in 0..count as u32 {
        let m = message(ep, round, i, len);
        let tag = (round * 100 + i) as i32;
        match how {
            How::Send => ep.send(&m, dest, tag, WORLD).unwrap(),
            How::Ssend => ep.ssend(&m, dest, tag, WORLD).unwrap(),
            How::Isend => {
                // SAFETY: `m` outlives the request, waited for at once.
                let r = unsafe { ep.isend_raw(m.as_ptr(), m.len(), dest, tag, WORLD) }.unwrap();
                ep.wait(r).unwrap();
            }
        }
        bytes += len as u64;
    }
    (count as u64, bytes)
}

/// Receives a message of a path and checks it: its content; from another group, the engine's
/// record of its arrival (date and phase as sent); the receiver's phase after delivery.
fn check_received(ep: &Endpoint, src: u32, buf: &[u8], round: u32, i: u32, inter: bool, phase_before: u64) {
    let (date, phase) = stamp(buf);
    assert_eq!(buf, &message_like(date, phase, round, i, buf.len())[..], "content of {round}/{i}");
    if inter {
        // Recorded on arrival (later messages may have arrived since).
        let rec = ep.ft_received_from(src);
        assert!(
            rec.contains(&(date, phase)),
            "piggyback of message {round}/{i} from {src}: ({date}, {phase}) not in {rec:?}"
        );
        assert_eq!(ep.ft_clock().unwrap().1, phase_before.max(phase + 1), "phase after {round}/{i}");
    } else {
        assert_eq!(ep.ft_clock().unwrap().1, phase_before.max(phase), "phase after {round}/{i} (same group)");
    }
}

fn message_like(date: u64, phase: u64, round: u32, i: u32, len: usize) -> Vec<u8> {
    let mut v = Vec::with_capacity(len);
    v.extend_from_slice(&date.to_le_bytes());
    v.extend_from_slice(&phase.to_le_bytes());
    v.extend_from_slice(&round.to_le_bytes());
    v.extend_from_slice(&i.to_le_bytes());
    v.extend((24..len).map(|k| (k as u32 ^ round ^ i) as u8));
    v
}

fn recv_path(ep: &mut Endpoint, src: u32, round: u32, count: usize, len: usize, inter: bool) {
    let mut buf = vec![0u8; len];
    for i in 0..count as u32 {
        let before = ep.ft_clock().unwrap().1;
        let st = ep.recv(&mut buf, src as i32, (round * 100 + i) as i32, WORLD).unwrap();
        assert_eq!(st.len, len);
        check_received(ep, src, &buf, round, i, inter, before);
    }
}

/// Groups {0, 1} and {2, 3}. Each round: rank 0 sends a path to rank 2 (other group), rank 2 the
/// same path to rank 3 (same group), rank 3 one message back to rank 0 (other group): phases rise
/// by one each hop across groups, so every path carries a phase of its own. Then a round whose
/// receives are posted first, and one whose messages wait unexpected (probed first: a probe does
/// not deliver). Finally the logs: exactly the inter-group messages.
fn paths() {
    let mut ep = Endpoint::init().unwrap();
    let me = ep.rank();
    assert_eq!(ep.ft_group(), Some(me / 2));
    let mut sent_to = [(0u64, 0u64); 4];
    let add = |s: &mut [(u64, u64); 4], d: usize, (n, b): (u64, u64)| {
        s[d].0 += n;
        s[d].1 += b;
    };
    for (k, &(count, len, how)) in PATHS.iter().enumerate() {
        let round = k as u32 + 1;
        match me {
            0 => {
                let s = send_path(&mut ep, 2, round, count, len, how);
                add(&mut sent_to, 2, s);
                recv_path(&mut ep, 3, round, 1, 24, true);
            }
            2 => {
                recv_path(&mut ep, 0, round, count, len, true);
                let s = send_path(&mut ep, 3, round, count, len, how);
                add(&mut sent_to, 3, s);
            }
            3 => {
                recv_path(&mut ep, 2, round, count, len, false);
                let s = send_path(&mut ep, 0, round, 1, 24, How::Send);
                add(&mut sent_to, 0, s);
            }
            _ => {}
        }
    }
    // Round 6: receives posted before the messages leave (rank 2 says so to rank 0).
    // Round 7: the messages wait unexpected; a probe finds them without delivering.
    match me {
        0 => {
            let mut ready = [0u8; 24];
            ep.recv(&mut ready, 2, 600, WORLD).unwrap();
            add(&mut sent_to, 2, send_path(&mut ep, 2, 6, 2, 24, How::Send));
            add(&mut sent_to, 2, send_path(&mut ep, 2, 7, 2, 300, How::Send));
        }
        2 => {
            let mut bufs = [[0u8; 24]; 2];
            let [b0, b1] = &mut bufs;
            // SAFETY: the buffers outlive the requests, waited for below.
            let r0 = unsafe { ep.irecv_raw(b0.as_mut_ptr(), 24, 0, 600, WORLD) }.unwrap();
            // SAFETY: as above.
            let r1 = unsafe { ep.irecv_raw(b1.as_mut_ptr(), 24, 0, 601, WORLD) }.unwrap();
            let m = message(&ep, 6, 99, 24);
            add(&mut sent_to, 0, (1, 24));
            ep.send(&m, 0, 600, WORLD).unwrap();
            let before = ep.ft_clock().unwrap().1;
            ep.wait(r0).unwrap();
            let after0 = ep.ft_clock().unwrap().1;
            ep.wait(r1).unwrap();
            let (d0, p0) = stamp(&bufs[0]);
            let (d1, p1) = stamp(&bufs[1]);
            assert_eq!(after0, before.max(p0 + 1), "a posted receive delivers when matched");
            assert_eq!(ep.ft_clock().unwrap().1, after0.max(p1 + 1));
            let rec = ep.ft_received_from(0);
            assert!(rec.contains(&(d0, p0)) && rec.contains(&(d1, p1)), "{rec:?}");
            for i in 0..2u32 {
                let before = ep.ft_clock().unwrap().1;
                let st = ep.probe(0, (700 + i) as i32, WORLD).unwrap();
                assert_eq!(st.len, 300);
                assert_eq!(ep.ft_clock().unwrap().1, before, "a probe does not deliver");
                let mut buf = vec![0u8; 300];
                ep.recv(&mut buf, 0, (700 + i) as i32, WORLD).unwrap();
                check_received(&ep, 0, &buf, 7, i, true, before);
            }
        }
        _ => {}
    }
    // Round 8: messages in pieces (a derived datatype), eager and by rendezvous, the second
    // synchronous: gathered, piggybacked and logged as any other.
    match me {
        0 => {
            for (i, len) in PIECES {
                let mut m = message(&ep, 8, i, len);
                let (a, b) = m.split_at_mut(len / 3);
                // SAFETY: both halves of `m` stay valid and unchanged until the request is waited for.
                let list = unsafe { PieceList::new(vec![(a.as_mut_ptr(), a.len()), (b.as_mut_ptr(), b.len())]) };
                let pieces: NonNull<dyn Pieces> = NonNull::from(&list);
                // SAFETY: `list` and `m` outlive the request, waited for at once.
                let r = unsafe { ep.isend_pieces(pieces, 2, (800 + i) as i32, WORLD, i == 1) }.unwrap();
                ep.wait(r).unwrap();
                add(&mut sent_to, 2, (1, len as u64));
            }
        }
        2 => {
            for (i, len) in PIECES {
                let before = ep.ft_clock().unwrap().1;
                let mut buf = vec![0u8; len];
                ep.recv(&mut buf, 0, (800 + i) as i32, WORLD).unwrap();
                check_received(&ep, 0, &buf, 8, i, true, before);
            }
        }
        _ => {}
    }
    // The logs: the inter-group messages, each once, nothing else.
    let stats = ep.ft_stats().unwrap();
    let inter: Vec<usize> = (0..4).filter(|&d| d / 2 != me as usize / 2).collect();
    let (n, b) = inter.iter().fold((0, 0), |a, &d| (a.0 + sent_to[d].0, a.1 + sent_to[d].1));
    assert_eq!((stats.logged, stats.logged_bytes), (n, b), "rank {me}: logged messages and bytes");
    for d in 0..4u32 {
        let logged = ep.ft_logged(d);
        if inter.contains(&(d as usize)) {
            assert_eq!(logged.len() as u64, sent_to[d as usize].0, "rank {me}: log for {d}");
        } else {
            assert!(logged.is_empty(), "rank {me}: same-group messages to {d} were logged");
        }
    }
    if me == 0 {
        // Rank 0 sends to rank 2 only: its dates are consecutive, as rank 2 recorded them.
        let dates: Vec<u64> = ep.ft_logged(2).iter().map(|e| e.0).collect();
        assert_eq!(dates, (1..=sent_to[2].0).collect::<Vec<_>>());
    }
    if me == 2 {
        let sent: u64 = PATHS.iter().map(|p| p.0 as u64).sum::<u64>() + 4 + PIECES.len() as u64;
        let dates: Vec<u64> = ep.ft_received_from(0).iter().map(|e| e.0).collect();
        assert_eq!(dates, (1..=sent).collect::<Vec<_>>(), "every message of rank 0 was recorded on arrival");
    }
    assert_eq!(stats.dropped, 0);
    println!("RESULT ok {me} logged {} {}", stats.logged, stats.logged_bytes);
    ep.finalize().unwrap();
}

fn piggyback_on_every_path_in_one_node() {
    let dir = scratch("paths");
    let g = groups_file(&dir, "0 0\n1 0\n2 1\n3 1\n");
    ok(&job(4, &["--ft", &g], "paths", &[]), 4);
}

fn piggyback_on_every_path_over_each_netmod() {
    let dir = scratch("paths-tcp");
    let g = groups_file(&dir, "0 0\n1 0\n2 1\n3 1\n");
    // Ranks 0 and 1 on one node, 2 and 3 on the other: the inter-group traffic goes through the
    // netmod (TCP; with the `rdma` feature also the ofi netmod over each software provider).
    for (label, net) in common::netmods(true) {
        let o = job(4, &["--ft", &g, "--nodes", "2"], "paths", &net);
        assert!(o.status.success(), "{label}: {}", show(&o));
        ok(&o, 4);
    }
}

fn piggyback_with_groups_computed_and_under_hydra() {
    // K blocks of consecutive ranks: the same groups as the file.
    ok(&job(4, &["--ft-groups", "2"], "paths", &[]), 4);
    let found = Command::new("mpiexec.hydra").arg("--version").output().is_ok_and(|o| o.status.success());
    if !found {
        assert!(!in_ci(), "mpiexec.hydra is missing: CI must install Debian's mpich");
        eprintln!("skipped the Hydra half: mpiexec.hydra not found");
        return;
    }
    let dir = scratch("paths-hydra");
    let g = groups_file(&dir, "0 0\n1 0\n2 1\n3 1\n");
    let mut cmd = Command::new("mpiexec.hydra");
    cmd.args(["-n", "4"]).args(common::harness::me_as_rank());
    cmd.env("NEMESIS_TEST_ROLE", "paths").env("NEMESIS_FT_GROUPS", &g).env("NEMESIS_FT_DIR", dir.join("ckpt"));
    let o = run_with_timeout(cmd, std::time::Duration::from_secs(300));
    ok(&o, 4);
}

// ---------------------------------------------------------------------------------------------
// Acknowledgements free the log.

/// Groups {0} and {1}. Rank 0 logs ten messages to rank 1; rank 1 checkpoints; the next message
/// from rank 0 is acknowledged (Fig 6.3 lines 27–29), but the acknowledgement leaves only with
/// rank 1's next checkpoint (two generations are retained, and the older must stay covered by
/// rank 0's log): rank 0 then drops the older entries and keeps the acknowledged one. Rank 0's
/// checkpoints prune rank 1's record of its messages the same way, one checkpoint later.
fn acks() {
    let mut ep = Endpoint::init().unwrap();
    let me = ep.rank();
    let mut b = [0u8; 16];
    let dates = |v: Vec<(u64, u64)>| v.iter().map(|e| e.0).collect::<Vec<_>>();
    if me == 0 {
        for i in 0..10 {
            ep.send(&[i; 16], 1, 1, WORLD).unwrap();
        }
        assert_eq!(ep.ft_logged(1).len(), 10);
        ep.recv(&mut b, 1, 2, WORLD).unwrap(); // rank 1 checkpointed
        ep.send(&[10; 16], 1, 3, WORLD).unwrap();
        ep.recv(&mut b, 1, 4, WORLD).unwrap(); // rank 1 received it
        assert_eq!(ep.ft_logged(1).len(), 11, "the acknowledgement waits for rank 1's next checkpoint");
        ep.recv(&mut b, 1, 6, WORLD).unwrap(); // rank 1 checkpointed again: behind the acknowledgement
        assert_eq!(dates(ep.ft_logged(1)), [11], "acknowledged entry kept alone");
        assert_eq!(ep.ft_log_bytes().0, 16 + 8, "one entry and its envelope in memory");
        ep.checkpoint(b"rank 0").unwrap();
        ep.send(&[12; 16], 1, 5, WORLD).unwrap();
        ep.checkpoint(b"rank 0 again").unwrap();
        ep.send(&[13; 16], 1, 7, WORLD).unwrap();
    } else {
        for _ in 0..10 {
            ep.recv(&mut b, 0, 1, WORLD).unwrap();
        }
        assert_eq!(ep.ft_received_from(0).len(), 10);
        ep.checkpoint(b"rank 1").unwrap();
        ep.send(&[0; 16], 0, 2, WORLD).unwrap();
        ep.recv(&mut b, 0, 3, WORLD).unwrap();
        let sent = ep.ft_stats().unwrap().control_sent;
        ep.send(&[0; 16], 0, 4, WORLD).unwrap();
        ep.checkpoint(b"rank 1 again").unwrap();
        assert!(ep.ft_stats().unwrap().control_sent > sent, "the acknowledgement went out");
        ep.send(&[0; 16], 0, 6, WORLD).unwrap();
        ep.recv(&mut b, 0, 5, WORLD).unwrap();
        // Rank 0's first checkpoint (date 11) holds its sends, but it is its newest: rank 1's
        // record still has them all (rank 0 may yet restart from the start).
        assert_eq!(dates(ep.ft_received_from(0)), (1..=12).collect::<Vec<_>>(), "nothing pruned yet");
        ep.recv(&mut b, 0, 7, WORLD).unwrap();
        // Rank 0's second checkpoint made the first the older retained one: pruned through 11.
        assert_eq!(dates(ep.ft_received_from(0)), [12, 13], "pruned by rank 0's first checkpoint");
    }
    println!("RESULT ok {me}");
    ep.finalize().unwrap();
}

fn acknowledgements_free_the_log() {
    let dir = scratch("acks");
    let g = groups_file(&dir, "0 0\n1 1\n");
    ok(&job(2, &["--ft", &g], "acks", &[]), 2);
}

// ---------------------------------------------------------------------------------------------
// Checkpoint files.

/// Groups {0, 1} and {2, 3}; three checkpoints with ring traffic in between. After each, a rank's
/// files are the new generation and the previous one (no temporary file, older ones removed);
/// they read back; damaged copies are refused; the group's last durable generation is found.
fn files() {
    let mut ep = Endpoint::init().unwrap();
    let (me, n) = (ep.rank(), ep.size());
    let dir = ep.ft_dir().unwrap().to_owned();
    // This rank's files, temporary ones included: `[.]nemesis-ckpt-<job>-<rank>-<generation>.nft[.tmp]`.
    let mine = |dir: &Path| -> Vec<String> {
        let mut v: Vec<String> = std::fs::read_dir(dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .filter(|f| {
                let parts: Vec<&str> = f.trim_start_matches('.').split('-').collect();
                parts.len() == 5 && parts[0] == "nemesis" && parts[1] == "ckpt" && parts[3] == me.to_string()
            })
            .collect();
        v.sort();
        v
    };
    let mut buf = [0u8; 8];
    for g in 1..=3u64 {
        ep.send(&(u64::from(me) * 10 + g).to_le_bytes(), (me + 1) % n, 0, WORLD).unwrap();
        ep.recv(&mut buf, ((me + n - 1) % n) as i32, 0, WORLD).unwrap();
        let state = format!("rank {me} generation {g}").repeat(100);
        ep.checkpoint(state.as_bytes()).unwrap();
        let files = mine(&dir);
        let want: Vec<String> = (g.max(2) - 1..=g).map(|k| format!("-{me}-{k}.nft")).collect();
        assert_eq!(files.len(), want.len(), "rank {me} after generation {g}: {files:?}");
        assert!(files.iter().zip(&want).all(|(f, w)| f.ends_with(w)), "{files:?}");
        let stats = ep.ft_stats().unwrap();
        assert_eq!((stats.checkpoints, stats.generation), (g, g));
    }
    let path = dir.join(mine(&dir).last().unwrap());
    let key = ep.ft_checkpoint_key().unwrap().clone();
    let c = nemesis::ft::checkpoint::load(&path, &key).unwrap();
    assert_eq!((c.rank, c.generation, c.group), (me, 3, me / 2));
    assert_eq!(c.app, format!("rank {me} generation 3").repeat(100).into_bytes());
    let good = std::fs::read(&path).unwrap();
    let copy = dir.join(format!("damaged-{me}"));
    let mut bad = good.clone();
    bad[good.len() / 2] ^= 1;
    std::fs::write(&copy, &bad).unwrap();
    assert!(matches!(nemesis::ft::checkpoint::load(&copy, &key), Err(Error::CheckpointCorrupt { .. })));
    std::fs::write(&copy, &good[..good.len() - 5]).unwrap();
    assert!(matches!(nemesis::ft::checkpoint::load(&copy, &key), Err(Error::CheckpointCorrupt { .. })));
    std::fs::remove_file(&copy).unwrap();
    let members = [me & !1, me | 1];
    let latest = nemesis::ft::checkpoint::latest_durable(&dir, &key, me, &members).unwrap().unwrap();
    assert_eq!(latest.generation, 3);
    println!(
        "RESULT ok {me} {} bytes in {:?}",
        ep.ft_stats().unwrap().checkpoint_bytes,
        ep.ft_stats().unwrap().checkpoint_time
    );
    ep.finalize().unwrap();
}

fn checkpoint_files_are_replaced_and_damage_is_refused() {
    let dir = scratch("files");
    let g = groups_file(&dir, "0 0\n1 0\n2 1\n3 1\n");
    let ckpt = dir.join("ckpt");
    let o = job(4, &["--ft", &g], "files", &[("NEMESIS_FT_DIR", ckpt.display().to_string())]);
    ok(&o, 4);
    // A directory given by the user stays; the ranks removed their files at the end.
    let left: Vec<_> = std::fs::read_dir(&ckpt).unwrap().map(|e| e.unwrap().file_name()).collect();
    assert!(left.is_empty(), "{left:?}");
}

// ---------------------------------------------------------------------------------------------
// Outstanding requests, an exhausted log, errors.

fn outstanding() {
    let mut ep = Endpoint::init().unwrap();
    let me = ep.rank();
    let mut b = [0u8; 8];
    if me == 0 {
        let m = [1u8; 8];
        // SAFETY: `m` outlives the request, waited for below.
        let s = unsafe { ep.isend_raw(m.as_ptr(), 8, 1, 0, WORLD) }.unwrap();
        assert!(matches!(ep.checkpoint(b"x"), Err(Error::CheckpointOutstanding { requests: 1 })));
        // With fault tolerance a send's date is spent once it starts: it cannot be withdrawn.
        assert!(!ep.ft_enabled() || ep.send_id(s).is_none(), "a send is cancellable with fault tolerance");
        ep.wait(s).unwrap();
        // SAFETY: `b` outlives the request, waited for below.
        let r = unsafe { ep.irecv_raw(b.as_mut_ptr(), 8, 1, 1, WORLD) }.unwrap();
        let e = ep.checkpoint(b"x").unwrap_err();
        assert!(matches!(e, Error::CheckpointOutstanding { requests: 1 }), "{e}");
        assert!(e.to_string().contains("outstanding"), "{e}");
        ep.wait(r).unwrap();
    } else {
        ep.recv(&mut b, 0, 0, WORLD).unwrap();
        ep.send(&[2u8; 8], 0, 1, WORLD).unwrap();
    }
    ep.checkpoint(b"x").unwrap();
    println!("RESULT ok {me}");
    ep.finalize().unwrap();
}

fn checkpoints_with_outstanding_requests_are_refused() {
    let dir = scratch("outstanding");
    let g = groups_file(&dir, "0 0\n1 0\n");
    ok(&job(2, &["--ft", &g], "outstanding", &[]), 2);
    // Without fault tolerance the same rule holds (and nothing is written).
    ok(&job(2, &[], "outstanding", &[]), 2);
}

/// Messages of `held()`: 100 of 2000 bytes, more than rank 0's 64 cells.
const HELD: u32 = 100;

/// Groups {0, 1}, `NEMESIS_UNEXPECTED_MAX` 4 KiB. Rank 0 sends `HELD` messages that rank 1 receives
/// only after a checkpoint: past the bound rank 1 holds them in rank 0's cells, and rank 0 runs out
/// of cells in the middle of its sends. The checkpoint copies them out (rank 0 can go on and reach
/// the checkpoint) and its file holds every one of them, whole.
fn held() {
    let mut ep = Endpoint::init().unwrap();
    let me = ep.rank();
    let msg = |i: u32| -> Vec<u8> { (0..2000u32).map(|k| (k ^ i) as u8).collect() };
    if me == 0 {
        for i in 0..HELD {
            ep.send(&msg(i), 1, i as i32, WORLD).unwrap();
        }
    }
    ep.checkpoint(format!("rank {me}").as_bytes()).unwrap();
    if me == 1 {
        let dir = ep.ft_dir().unwrap().to_owned();
        let file = std::fs::read_dir(&dir)
            .unwrap()
            .map(|e| e.unwrap().path())
            .find(|p| p.file_name().unwrap().to_string_lossy().ends_with("-1-1.nft"))
            .expect("rank 1's checkpoint file");
        let c = nemesis::ft::checkpoint::load(&file, ep.ft_checkpoint_key().unwrap()).unwrap();
        assert_eq!(c.image.unexpected.len(), HELD as usize, "every message arrived before the checkpoint is in it");
        for (i, m) in c.image.unexpected.iter().enumerate() {
            assert_eq!((m.source, m.tag), (0, i as i32));
            assert_eq!(m.data, msg(i as u32), "message {i} saved whole");
        }
        let mut buf = vec![0u8; 2000];
        for i in 0..HELD {
            ep.recv(&mut buf, 0, i as i32, WORLD).unwrap();
            assert_eq!(buf, msg(i), "message {i}");
        }
    }
    println!("RESULT ok {me}");
    ep.finalize().unwrap();
}

fn unexpected_messages_held_by_back_pressure_are_checkpointed_whole() {
    let dir = scratch("held");
    let g = groups_file(&dir, "0 0\n1 0\n");
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_nemesis-run"));
    cmd.args(["-n", "2", "--ft", &g, "--"]).args(common::harness::me_as_rank());
    cmd.env("NEMESIS_TEST_ROLE", "held").env("NEMESIS_UNEXPECTED_MAX", "4k");
    ok(&run_with_timeout(cmd, std::time::Duration::from_secs(120)), 2);
}

fn exhausted() {
    let mut ep = Endpoint::init().unwrap();
    let me = ep.rank();
    if me == 0 {
        let mut sent = 0;
        let err = loop {
            match ep.send(&[7u8; 200], 1, 0, WORLD) {
                Ok(()) => sent += 1,
                Err(e) => break e,
            }
            assert!(sent < 1000, "the log never filled");
        };
        assert!(matches!(&err, Error::Ft(e) if matches!(**e, nemesis_ft::Error::LogExhausted { .. })), "{err}");
        println!("RESULT ok {me} after {sent}: {err}");
        ep.send(&[0u8; 8], 1, 1, WORLD).unwrap_err();
    } else {
        println!("RESULT ok {me}");
    }
    ep.finalize().unwrap();
}

fn an_exhausted_sender_log_is_a_clear_error() {
    let dir = scratch("exhausted");
    let g = groups_file(&dir, "0 0\n1 1\n");
    let env = [("NEMESIS_FT_LOG_MAX", "1k".to_owned()), ("NEMESIS_FT_SPILL_MAX", "2k".to_owned())];
    let o = job(2, &["--ft", &g], "exhausted", &env);
    ok(&o, 2);
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(out.contains("sender log exhausted"), "{out}");
}

fn init_error() {
    match Endpoint::init() {
        Ok(_) => panic!("a bad groups file was accepted"),
        Err(e) => println!("RESULT ok {e}"),
    }
}

fn bad_groups_files_are_refused_at_start() {
    let dir = scratch("bad-groups");
    for (text, expect) in [
        ("0 0\n1 0\n2 1\n", "no group to rank 3"),
        ("0 0\n1 0\n2 1\n3 1\n4 1\n", "rank 4 is not in the job"),
        ("0 0\n1 0\n2 1\n2 1\n", "already given"),
        ("0 0\n1 zero\n2 1\n3 1\n", "line 2"),
    ] {
        let g = groups_file(&dir, text);
        // The launcher checks it before any rank starts.
        let o = Command::new(env!("CARGO_BIN_EXE_nemesis-run"))
            .args(["-n", "4", "--ft", &g, "--", "sh", "-c", "echo started"])
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(1), "{}", show(&o));
        assert!(err.contains(expect) && err.contains(&g), "{err}");
        assert!(!String::from_utf8_lossy(&o.stdout).contains("started"), "a rank started");
        // A rank started by another process manager checks it at init.
        let o = job(4, &[], "init-error", &[("NEMESIS_FT_GROUPS", g.clone())]);
        assert!(o.status.success(), "{}", show(&o));
        let r = results(&o);
        assert_eq!(r.len(), 4, "{}", show(&o));
        assert!(r.iter().all(|l| l.contains(expect)), "{r:?}");
    }
    let o = Command::new(env!("CARGO_BIN_EXE_nemesis-run"))
        .args(["-n", "4", "--ft-groups", "5", "--", "true"])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(1), "{}", show(&o));
    assert!(String::from_utf8_lossy(&o.stderr).contains("1 to 4 groups"), "{}", show(&o));
}

// ---------------------------------------------------------------------------------------------
// The communication matrix.

/// Bytes of the rendezvous message of the ring pattern (above every eager limit of `isend`).
const RING_LARGE: usize = 200_000;

/// `NEMESIS_TEST_PATTERN`: `ring` (rank r sends (r + 1) · 100 bytes to r + 1, three times, then
/// one message of [`RING_LARGE`] bytes by rendezvous, with a synchronous send among them) or `all`
/// (rank u sends 10 · u + v bytes to every other rank v). Every rank checks its row of messages:
/// acknowledgements, rendezvous control and the RTS are not the application's.
fn matrix() {
    let mut ep = Endpoint::init().unwrap();
    let (me, n) = (ep.rank(), ep.size());
    let mut buf = vec![0u8; RING_LARGE];
    let ring = std::env::var("NEMESIS_TEST_PATTERN").unwrap() == "ring";
    let (next, prev) = ((me + 1) % n, ((me + n - 1) % n) as i32);
    if ring {
        for k in 0..3 {
            let m = vec![1u8; (me as usize + 1) * 100];
            let r = if k == 1 {
                // SAFETY: `m` outlives the request, waited for below.
                unsafe { ep.issend_raw(m.as_ptr(), m.len(), next, 0, WORLD) }.unwrap()
            } else {
                // SAFETY: as above.
                unsafe { ep.isend_raw(m.as_ptr(), m.len(), next, 0, WORLD) }.unwrap()
            };
            ep.recv(&mut buf, prev, 0, WORLD).unwrap();
            ep.wait(r).unwrap();
        }
        let large = vec![3u8; RING_LARGE];
        // SAFETY: `large` outlives the request, waited for below.
        let r = unsafe { ep.isend_raw(large.as_ptr(), large.len(), next, 1, WORLD) }.unwrap();
        ep.recv(&mut buf, prev, 1, WORLD).unwrap();
        ep.wait(r).unwrap();
    } else {
        for v in (0..n).filter(|&v| v != me) {
            ep.send(&vec![2u8; (10 * me + v) as usize], v, 1, WORLD).unwrap();
        }
        for u in (0..n).filter(|&u| u != me) {
            ep.recv(&mut buf, u as i32, 1, WORLD).unwrap();
        }
    }
    let t = ep.traffic();
    assert_eq!(t.len(), n as usize);
    let want: Vec<u64> =
        (0..n).map(|v| if ring { if v == next { 4 } else { 0 } } else { u64::from(v != me) }).collect();
    assert_eq!(t.iter().map(|x| x.messages).collect::<Vec<_>>(), want, "rank {me}: messages sent to each rank");
    println!("RESULT ok {me}");
    ep.finalize().unwrap();
}

fn the_communication_matrix_of_known_patterns() {
    let dir = scratch("matrix");
    let n = 4u32;
    let large = RING_LARGE as u64;
    let ring: Vec<Vec<u64>> = (0..n)
        .map(|u| (0..n).map(|v| if v == (u + 1) % n { 3 * (u as u64 + 1) * 100 + large } else { 0 }).collect())
        .collect();
    let all: Vec<Vec<u64>> =
        (0..n).map(|u| (0..n).map(|v| if u != v { u64::from(10 * u + v) } else { 0 }).collect()).collect();
    for (i, (pattern, want, extra)) in [
        ("ring", &ring, vec![]),
        ("ring", &ring, vec!["--ft-groups", "2", "--nodes", "2"]),
        ("all", &all, vec!["--ft-groups", "2"]),
        ("all", &all, vec!["--nodes", "2"]),
    ]
    .into_iter()
    .enumerate()
    {
        let file = dir.join(format!("{pattern}-{i}.csv"));
        let f = file.display().to_string();
        let mut args = vec!["--comm-matrix", &f];
        args.extend(extra.iter().copied());
        let o = job(n, &args, "matrix", &[("NEMESIS_TEST_PATTERN", pattern.to_owned())]);
        ok(&o, n as usize);
        let text = std::fs::read_to_string(&file).unwrap();
        let got: Vec<Vec<u64>> = text.lines().map(|l| l.split(',').map(|x| x.parse().unwrap()).collect()).collect();
        assert_eq!(&got, want, "{pattern} {extra:?}:\n{text}");
        // Beside it the message counts (what each rank's `traffic()` checked above).
        let counts = std::fs::read_to_string(nemesis::matrix::messages_file(&file)).unwrap();
        let counts: Vec<Vec<u64>> =
            counts.lines().map(|l| l.split(',').map(|x| x.parse().unwrap()).collect()).collect();
        let want_counts: Vec<Vec<u64>> = (0..n)
            .map(|u| {
                (0..n)
                    .map(|v| match pattern {
                        "ring" => 4 * u64::from(v == (u + 1) % n),
                        _ => u64::from(u != v),
                    })
                    .collect()
            })
            .collect();
        assert_eq!(counts, want_counts, "{pattern} {extra:?}: messages");
        // The grouping tool reads it.
        let m = nemesis_ft::matrix::CommMatrix::from_csv(&text).unwrap();
        assert_eq!(m.ranks(), n as usize);
    }
    // A job grouped by the launcher from a matrix a run wrote.
    let file = dir.join("ring-0.csv").display().to_string();
    let o =
        job(4, &["--ft-matrix", &file, "--ft-groups", "2"], "matrix", &[("NEMESIS_TEST_PATTERN", "ring".to_owned())]);
    ok(&o, 4);
}
