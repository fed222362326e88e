//! Large messages (rendezvous, `nemesis-lmt`) between real processes started by `nemesis-run`:
//! sizes from one byte past the eager limit to 64 MiB, odd lengths, unaligned buffers, receives
//! posted before and after the RTS, `ANY_SOURCE`, probes, truncation, many transfers in flight
//! both ways (more than the rings of a rank), order with eager messages, synchronous sends, sends
//! to oneself; every backend forced (`NEMESIS_LMT=shm|cma|auto`) and tiny rings; a sender or a
//! receiver killed in the middle of a transfer.
//!
//! `NEMESIS_STRESS=1` repeats the cases and adds 256 MiB.

mod common;

use std::time::Duration;

use common::{Rng, job, results, show, stress};
use nemesis::{ANY_SOURCE, ANY_TAG, Endpoint, Error, Request, WORLD};

fn main() {
    common::harness::main(
        rank_main,
        tests![
            shared_copy_rings,
            single_copy_cma,
            single_copy_cma_unsplit,
            auto_mixes_both_backends,
            over_each_netmod_between_two_nodes,
            tiny_rings_and_a_small_eager_limit,
            a_peer_killed_mid_transfer_fails_it_with_peer_died,
        ],
    );
}

/// The rank program, by `NEMESIS_TEST_ROLE`.
fn rank_main() {
    match std::env::var("NEMESIS_TEST_ROLE").unwrap_or_default().as_str() {
        "cases" => cases(),
        "sender-dies" => sender_dies(),
        "receiver-dies" => receiver_dies(),
        other => panic!("unknown role {other:?}"),
    }
}

/// The bytes of message `id` of `len` bytes.
fn data(id: u64, len: usize) -> Vec<u8> {
    let mut v = vec![0u8; len];
    Rng::new(id ^ (len as u64) << 20).fill(&mut v);
    v
}

fn assert_same(got: &[u8], want: &[u8], what: &str) {
    assert_eq!(got.len(), want.len(), "{what}: length");
    if got != want {
        let at = got.iter().zip(want).position(|(a, b)| a != b).unwrap();
        panic!("{what}: first difference at byte {at} of {}", want.len());
    }
}

/// Rank 0 and rank 1 run the cases against each other.
fn cases() {
    let mut ep = Endpoint::init().unwrap();
    let (me, size) = (ep.rank(), ep.size());
    assert_eq!(size, 2);
    let peer = 1 - me;
    let eager = ep.eager_limit();
    let mut sizes = vec![eager + 1, 100_003, (1 << 20) + 7, (8 << 20) - 3, 64 << 20];
    if stress() > 1 {
        sizes.push(256 << 20);
    }
    for round in 0..stress().min(3) {
        // 1. Sizes, unaligned at both ends; rank 0 sends, rank 1 receives (posted when the RTS
        //    arrives, through the blocking receive's bypass), then the other way.
        for (i, &len) in sizes.iter().enumerate() {
            let id = u64::from(round) << 32 | i as u64;
            let msg = data(id, len + 3);
            for sender in [0, 1] {
                if me == sender {
                    ep.send(&msg[3..], peer, i as i32, WORLD).unwrap();
                } else {
                    let mut buf = vec![0u8; len + 5];
                    let st = ep.recv(&mut buf[5..], peer as i32, i as i32, WORLD).unwrap();
                    assert_eq!((st.source, st.tag, st.len), (peer, i as i32, len));
                    assert_same(&buf[5..], &msg[3..], &format!("{len} bytes from {peer}"));
                }
            }
        }
        // 2. Unexpected: the RTS arrives before any receive; a probe sees the real length; an
        //    ANY_SOURCE/ANY_TAG receive takes it.
        let len = 3 * eager + 11;
        let msg = data(100, len);
        if me == 0 {
            let r = unsafe_isend(&mut ep, &msg, 1, 40);
            ep.send(b"sent", 1, 41, WORLD).unwrap();
            ep.wait(r).unwrap();
        } else {
            let mut b = [0u8; 4];
            ep.recv(&mut b, 0, 41, WORLD).unwrap();
            let st = ep.probe(0, 40, WORLD).unwrap();
            assert_eq!(st.len, len, "probe of an RTS reports the message's length");
            let mut buf = vec![0u8; len];
            let st = ep.recv(&mut buf, ANY_SOURCE, ANY_TAG, WORLD).unwrap();
            assert_eq!((st.source, st.tag, st.len), (0, 40, len));
            assert_same(&buf, &msg, "unexpected RTS");
        }
        // 3. Truncation: the receive keeps its buffer's length and says so; the sender completes;
        //    a zero-length buffer too; the next message is intact.
        let msg = data(200, 300_000);
        if me == 0 {
            ep.send(&msg, 1, 50, WORLD).unwrap();
            ep.send(&msg, 1, 51, WORLD).unwrap();
            ep.send(&msg, 1, 52, WORLD).unwrap();
        } else {
            let mut small = vec![0u8; 1000];
            let e = ep.recv(&mut small, 0, 50, WORLD).unwrap_err();
            assert!(matches!(e, Error::Truncated { len: 300_000, capacity: 1000, sender: 0, tag: 50 }), "{e}");
            assert_same(&small, &msg[..1000], "truncated");
            let e = ep.recv(&mut [], 0, 51, WORLD).unwrap_err();
            assert!(matches!(e, Error::Truncated { len: 300_000, capacity: 0, sender: 0, tag: 51 }), "{e}");
            let mut buf = vec![0u8; 300_000];
            ep.recv(&mut buf, 0, 52, WORLD).unwrap();
            assert_same(&buf, &msg, "after truncations");
        }
        // 4. Many in flight both ways (more transfers than a rank's rings), received in reverse
        //    tag order by posted receives, with eager messages in between keeping their order.
        let count = 12;
        let lens: Vec<usize> = (0..count).map(|k| 150_001 + 7919 * k).collect();
        let out: Vec<Vec<u8>> =
            lens.iter().enumerate().map(|(k, &l)| data(300 + 16 * u64::from(me) + k as u64, l)).collect();
        let want: Vec<Vec<u8>> =
            lens.iter().enumerate().map(|(k, &l)| data(300 + 16 * u64::from(peer) + k as u64, l)).collect();
        let mut inb: Vec<Vec<u8>> = lens.iter().map(|&l| vec![0u8; l]).collect();
        let mut small = [[0u8; 8]; 3];
        ep.scope(|s| {
            let mut rr: Vec<Request> = Vec::new();
            for (k, b) in inb.iter_mut().enumerate().rev() {
                rr.push(s.irecv(b, peer as i32, 100 + k as i32, 7).unwrap());
            }
            let sr: Vec<Request> =
                out.iter().enumerate().map(|(k, m)| s.isend(m, peer, 100 + k as i32, 7).unwrap()).collect();
            // Eager, large, eager on one tag: received in the order sent.
            let tail = out[0].as_slice();
            s.send(&1u64.to_le_bytes(), peer, 5, 8).unwrap();
            let mid = s.isend(tail, peer, 5, 8).unwrap();
            s.send(&3u64.to_le_bytes(), peer, 5, 8).unwrap();
            let mut big = vec![0u8; tail.len()];
            for (j, b) in small.iter_mut().enumerate() {
                if j == 1 {
                    let st = s.recv(&mut big, peer as i32, 5, 8).unwrap();
                    assert_eq!(st.len, lens[0], "the large message comes second");
                } else {
                    let st = s.recv(b, peer as i32, 5, 8).unwrap();
                    assert_eq!(st.len, 8);
                }
            }
            assert_same(&big, &want[0], "large between eager messages");
            for r in s.wait_all(&rr).into_iter().chain(s.wait_all(&sr)) {
                r.unwrap();
            }
            s.wait(mid).unwrap();
        })
        .expect("scope");
        for (k, b) in inb.iter().enumerate() {
            assert_same(b, &want[k], &format!("transfer {k} of {count}"));
        }
        assert_eq!(u64::from_le_bytes(small[0]), 1);
        assert_eq!(u64::from_le_bytes(small[2]), 3);
        // 5. Synchronous send of a large message, and a large message to oneself.
        let msg = data(400, 2 * eager + 1);
        if me == 0 {
            ep.ssend(&msg, 1, 60, WORLD).unwrap();
        } else {
            let mut buf = vec![0u8; msg.len()];
            ep.recv(&mut buf, 0, 60, WORLD).unwrap();
            assert_same(&buf, &msg, "ssend");
        }
        let r = unsafe_isend(&mut ep, &msg, me, 61);
        let mut buf = vec![0u8; msg.len()];
        ep.recv(&mut buf, me as i32, 61, WORLD).unwrap();
        ep.wait(r).unwrap();
        assert_same(&buf, &msg, "to oneself");
    }
    let st = ep.lmt_stats();
    assert_eq!((st.failed, st.fallback), (0, 0), "{st:?}");
    match policy().as_str() {
        // Between two nodes the netmod moves the data; only the transfers to oneself are local.
        _ if !ep.is_local(peer) => assert_eq!(st.ring + st.cma, u64::from(stress().min(3)), "{st:?}"),
        "shm" => assert!(st.ring > 0 && st.cma == 0, "{st:?}"),
        // CMA is allowed here (same user, no Yama restriction): every transfer reads directly.
        "cma" => {
            assert!(st.cma > 0 && st.ring == 0, "{st:?}");
            // Split with the sender from 32 KiB unless NEMESIS_CMA_SPLIT_MIN says otherwise.
            let unsplit = std::env::var("NEMESIS_CMA_SPLIT_MIN").is_ok();
            assert!(if unsplit { st.split == 0 } else { st.split > 0 }, "{st:?}");
        }
        _ => assert!(st.cma > 0 && st.ring > 0, "{st:?}"),
    }
    println!("RESULT rank {me} lmt cases ok ({}: {st:?})", policy());
    ep.finalize().unwrap();
}

fn policy() -> String {
    std::env::var("NEMESIS_LMT").unwrap_or_else(|_| "auto".into())
}

/// Starts sending `msg` (which the caller keeps alive until the request is waited for).
fn unsafe_isend(ep: &mut Endpoint, msg: &[u8], dest: u32, tag: i32) -> Request {
    // SAFETY: every caller waits for the request before `msg` goes out of scope.
    unsafe { ep.isend_raw(msg.as_ptr(), msg.len(), dest, tag, WORLD) }.unwrap()
}

fn lmt_job(n: u32, role: &str, env: &[(&str, &str)]) -> std::process::Output {
    let env: Vec<(&str, String)> = env.iter().map(|&(k, v)| (k, v.to_owned())).collect();
    job(n, &["--keep-going"], role, &env)
}

fn run_cases(env: &[(&str, &str)]) {
    let o = lmt_job(2, "cases", env);
    assert!(o.status.success(), "{env:?}: {}", show(&o));
    assert_eq!(results(&o).len(), 2, "{}", show(&o));
}

fn shared_copy_rings() {
    run_cases(&[("NEMESIS_LMT", "shm")]);
}

fn single_copy_cma() {
    run_cases(&[("NEMESIS_LMT", "cma")]);
}

/// Single copies never split: the receiver reads everything.
fn single_copy_cma_unsplit() {
    run_cases(&[("NEMESIS_LMT", "cma"), ("NEMESIS_CMA_SPLIT_MIN", "1g")]);
}

/// Rings below 1 MiB and from 8 MiB, split single copies between.
fn auto_mixes_both_backends() {
    run_cases(&[("NEMESIS_LMT", "auto"), ("NEMESIS_CMA_MIN", "1m"), ("NEMESIS_CMA_MAX", "8m")]);
}

/// One ring of two 4 KiB slots per rank: every transfer wraps around the ring many times and
/// most wait for the ring.
/// The same cases between two nodes: every transfer goes through the netmod (TCP; ofi reading
/// the sender's buffer, and ofi streaming it two-sided).
fn over_each_netmod_between_two_nodes() {
    let mut nets = common::netmods(true);
    nets.extend(common::netmods(false).into_iter().filter(|n| n.0 != "tcp"));
    for (label, env) in nets {
        let o = job(2, &["--nodes", "2"], "cases", &env);
        assert!(o.status.success(), "{label}: {}", show(&o));
        assert_eq!(results(&o).len(), 2, "{label}: {}", show(&o));
    }
}

fn tiny_rings_and_a_small_eager_limit() {
    run_cases(&[
        ("NEMESIS_LMT", "shm"),
        ("NEMESIS_LMT_RINGS_PER_RANK", "1"),
        ("NEMESIS_LMT_SLOTS", "2"),
        ("NEMESIS_LMT_SLOT_SIZE", "4096"),
        ("NEMESIS_EAGER_MAX", "2000"),
    ]);
}

// ---------------------------------------------------------------------------------------------
// A peer killed in the middle of a transfer.

const DYING: usize = 256 << 20;

fn die() -> ! {
    // SAFETY: raising a signal on ourselves.
    unsafe { libc::raise(libc::SIGKILL) };
    unreachable!()
}

/// Rank 0 sends 256 MiB and dies once rank 1 has started receiving; rank 1's receive fails
/// with `PeerDied`, and large messages still work afterwards (to itself: its rings were reset).
fn sender_dies() {
    let mut ep = Endpoint::init().unwrap();
    if ep.rank() == 0 {
        let msg = vec![7u8; DYING];
        let _r = unsafe_isend(&mut ep, &msg, 1, 1);
        let mut b = [0u8; 1];
        ep.recv(&mut b, 1, 2, WORLD).unwrap();
        for _ in 0..50 {
            ep.progress().unwrap();
        }
        die();
    }
    let mut buf = vec![0u8; DYING];
    // SAFETY: `buf` outlives the request (waited for below).
    let r = unsafe { ep.irecv_raw(buf.as_mut_ptr(), buf.len(), 0, 1, WORLD) }.unwrap();
    while ep.test(r).unwrap().is_none() && !buf[..4096].contains(&7) {
        std::thread::sleep(Duration::from_micros(100));
    }
    ep.send(&[1], 0, 2, WORLD).unwrap();
    // Where the provider moves the data without the sender (ofi reading the sender's buffer; the
    // `shm` provider copies even two-sided messages with one kernel copy by the receiver), the
    // transfer may finish before the sender is gone: then the data is whole. Otherwise the
    // receive fails.
    match ep.wait(r) {
        Err(Error::PeerDied { rank: 0 }) => {}
        Ok(st) if ofi() => assert!(st.len == DYING && buf.iter().all(|&b| b == 7), "a whole read"),
        other => panic!("{other:?}"),
    }
    let msg = data(9, 5 << 20);
    let r = unsafe_isend(&mut ep, &msg, 1, 3);
    let mut back = vec![0u8; msg.len()];
    ep.recv(&mut back, 1, 3, WORLD).unwrap();
    ep.wait(r).unwrap();
    assert_same(&back, &msg, "after the failure");
    println!("RESULT survivor ok");
    ep.finalize().unwrap();
}

/// The ofi netmod carries the job.
fn ofi() -> bool {
    std::env::var("NEMESIS_NETMOD").is_ok_and(|v| v == "ofi")
}

/// Rank 1 starts receiving 256 MiB and dies; rank 0's send fails with `PeerDied`.
fn receiver_dies() {
    let mut ep = Endpoint::init().unwrap();
    if ep.rank() == 1 {
        let mut buf = vec![0u8; DYING];
        // SAFETY: the process dies before `buf` is dropped.
        let r = unsafe { ep.irecv_raw(buf.as_mut_ptr(), buf.len(), 0, 1, WORLD) }.unwrap();
        while !buf[..4096].contains(&7) {
            assert!(ep.test(r).unwrap().is_none());
        }
        die();
    }
    let msg = vec![7u8; DYING];
    // As in `sender_dies`: a provider may have moved everything before the receiver died.
    match ep.send(&msg, 1, 1, WORLD) {
        Err(Error::PeerDied { rank: 1 }) => {}
        Ok(()) if ofi() => {}
        other => panic!("{other:?}"),
    }
    println!("RESULT survivor ok");
    ep.finalize().unwrap();
}

fn a_peer_killed_mid_transfer_fails_it_with_peer_died() {
    // (label, nodes, environment)
    type Case = (String, &'static str, Vec<(&'static str, String)>);
    let mut cases: Vec<Case> =
        ["shm", "cma"].iter().map(|&l| (l.to_owned(), "1", vec![("NEMESIS_LMT", l.to_owned())])).collect();
    let mut nets = common::netmods(true);
    nets.extend(common::netmods(false).into_iter().filter(|n| n.0 != "tcp"));
    for (label, mut env) in nets {
        // Heartbeats fast enough for a death that no operation in flight reveals.
        env.extend([("NEMESIS_OFI_HEARTBEAT_MS", "100".to_owned()), ("NEMESIS_TCP_HEARTBEAT_MS", "100".to_owned())]);
        cases.push((label, "2", env));
    }
    for (label, nodes, env) in cases {
        for role in ["sender-dies", "receiver-dies"] {
            let o = job(2, &["--keep-going", "--nodes", nodes], role, &env);
            assert_eq!(o.status.code(), Some(128 + 9), "{label} {role}: {}", show(&o));
            assert_eq!(results(&o), ["RESULT survivor ok"], "{label} {role}: {}", show(&o));
        }
    }
}
