//! The Endpoint across real processes started by `nemesis-run`: random all-to-all traffic with
//! random sizes up to five times the eager limit (rendezvous above it), random tags and contexts, `ANY_SOURCE`/`ANY_TAG` receives
//! mixed with specific ones, payload checks and per-(source, context) order, with 2, 4 and 8 ranks
//! (8 is oversubscribed on 2 cores) and every wait mode; errors between processes; a peer killed
//! while others wait on it; the CPU use of a rank blocked in `block` mode; a blocking `ANY_SOURCE`
//! receiver in `block` mode among 8 ranks.
//!
//! The test binary is itself the rank program: `nemesis-run` starts it with `--nemesis-test-rank`
//! and a role in `NEMESIS_TEST_ROLE`. `NEMESIS_STRESS=1` multiplies the traffic.

mod common;

use std::process::{Command, Output};
use std::time::{Duration, Instant};

use common::{in_ci, job, results, roles, show, stress};
use std::ptr::NonNull;

use nemesis::{ANY_SOURCE, ANY_TAG, Endpoint, Error, PieceList, Pieces, Request, WORLD};

fn main() {
    common::harness::main(
        rank_main,
        tests![
            traffic_2_ranks,
            traffic_4_ranks_block_mode,
            traffic_8_ranks_oversubscribed,
            traffic_over_two_nodes,
            errors_between_processes,
            synchronous_sends_between_processes,
            messages_in_pieces_between_processes,
            cancellation_and_matched_probes_between_processes,
            peer_killed_while_others_wait_on_it,
            peer_death_is_found_through_pidfds_without_marks,
            two_nodes_in_two_network_namespaces,
            a_stopped_remote_peer_is_declared_dead_within_the_heartbeat_bound,
            idle_rank_in_block_mode_uses_little_cpu,
            any_source_receiver_in_block_mode_takes_fastbox_messages_at_once,
            hydra_with_two_node_identities,
            hydra_starts_an_unmodified_nemesis_program,
            readme_examples_run_under_nemesis_run,
        ],
    );
}

/// The rank program, by `NEMESIS_TEST_ROLE`.
fn rank_main() {
    match std::env::var("NEMESIS_TEST_ROLE").unwrap_or_default().as_str() {
        "traffic" => roles::traffic(),
        "errors" => errors(),
        "peer-killed" => roles::peer_killed(),
        "idle-block" => idle_block(),
        "any-source-block" => any_source_block(),
        "ssend" => ssend(),
        "cancel" => cancel(),
        "pieces" => pieces(),
        "stopped" => stopped(),
        other => panic!("unknown role {other:?}"),
    }
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

fn traffic_2_ranks() {
    run_traffic(2, "poll", 400);
}

fn traffic_4_ranks_block_mode() {
    run_traffic(4, "block", 200);
}

fn traffic_8_ranks_oversubscribed() {
    run_traffic(8, "yield", 100);
}

/// 2 × 2 ranks over two nodes (and 5 over three): local pairs through the segment, the others
/// through each netmod; `ANY_SOURCE` receives mix local and remote senders.
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

fn synchronous_sends_between_processes() {
    let o = job(2, &[], "ssend", &[]);
    assert!(o.status.success(), "{}", show(&o));
    assert_eq!(results(&o).len(), 2, "{}", show(&o));
}

// ---------------------------------------------------------------------------------------------
// Cancellation and matched probes.

fn cancel() {
    let mut ep = Endpoint::init().unwrap();
    let me = ep.rank();
    let big = vec![7u8; 4 * ep.eager_limit() + 5];
    let small = [5u8; 100];
    if me == 0 {
        // Four messages; rank 1 matches only the last before we cancel them all.
        // SAFETY: the buffers outlive the requests, waited for below.
        let sends = unsafe {
            [
                ep.isend_raw(small.as_ptr(), small.len(), 1, 10, WORLD).unwrap(),
                ep.isend_raw(big.as_ptr(), big.len(), 1, 11, WORLD).unwrap(),
                ep.issend_raw(small.as_ptr(), small.len(), 1, 12, WORLD).unwrap(),
                ep.isend_raw(small.as_ptr(), small.len(), 1, 13, WORLD).unwrap(),
            ]
        };
        let ids: Vec<_> = sends.iter().map(|&r| ep.send_id(r).expect("a send id")).collect();
        let mut b = [0u8; 1];
        ep.recv(&mut b, 1, 1, WORLD).unwrap(); // "rank 1 has received tag 13"
        let answers: Vec<Request> = ids.iter().map(|&id| ep.cancel_send(id).unwrap()).collect();
        for (k, &a) in answers.iter().enumerate() {
            let got = ep.wait(a);
            if k < 3 {
                assert!(matches!(got, Err(Error::Cancelled)), "message {k} not cancelled: {got:?}");
            } else {
                assert!(got.is_ok(), "a matched message was cancelled: {got:?}");
            }
        }
        // The sends in flight end cancelled; the eager ones completed already.
        assert!(ep.wait(sends[0]).is_ok());
        assert!(matches!(ep.wait(sends[1]), Err(Error::Cancelled)));
        assert!(matches!(ep.wait(sends[2]), Err(Error::Cancelled)));
        assert!(ep.wait(sends[3]).is_ok());
        ep.send(&[1], 1, 2, WORLD).unwrap(); // "check"
        // Matched probes: tags 20 (small), 21 (large), 22 and 23 (large).
        ep.send(&small, 1, 20, WORLD).unwrap();
        ep.send(&big, 1, 21, WORLD).unwrap();
        ep.send(&small[..50], 1, 22, WORLD).unwrap();
        ep.send(&big[..big.len() - 1], 1, 23, WORLD).unwrap();
    } else if me == 1 {
        // A posted receive is withdrawn; one that matched is not.
        let mut b = [0u8; 200];
        // SAFETY: `b` outlives the request (completed by the cancellation).
        let r = unsafe { ep.irecv_raw(b.as_mut_ptr(), b.len(), 0, 50, WORLD) }.unwrap();
        assert!(ep.cancel_recv(r).unwrap());
        assert!(matches!(ep.wait(r), Err(Error::Cancelled)));
        assert_eq!(ep.recv(&mut b, 0, 13, WORLD).unwrap().len, 100);
        ep.send(&[1], 0, 1, WORLD).unwrap();
        // Answering the cancellations needs progress: the wait for "check" gives it.
        let mut one = [0u8; 1];
        ep.recv(&mut one, 0, 2, WORLD).unwrap();
        for tag in [10, 11, 12] {
            assert_eq!(ep.iprobe(0, tag, WORLD).unwrap(), None, "tag {tag} was not dropped");
        }
        let (m20, st) = ep.mprobe(ANY_SOURCE, 20, WORLD).unwrap();
        assert_eq!((st.source, st.tag, st.len), (0, 20, 100));
        // An ANY_TAG receive no longer sees the reserved message: it gets the next one.
        let mut large = vec![0u8; big.len()];
        let st = ep.recv(&mut large, ANY_SOURCE, ANY_TAG, WORLD).unwrap();
        assert_eq!((st.tag, st.len), (21, big.len()));
        assert!(large.iter().all(|&x| x == 7));
        assert_eq!(ep.mrecv(m20, &mut b).unwrap().len, 100);
        assert!(b[..100].iter().all(|&x| x == 5));
        let found = loop {
            if let Some(f) = ep.improbe(0, 22, WORLD).unwrap() {
                break f;
            }
        };
        assert_eq!(found.1.len, 50);
        assert_eq!(ep.iprobe(0, 22, WORLD).unwrap(), None, "a reserved message is not probed again");
        assert_eq!(ep.mrecv(found.0, &mut b).unwrap().len, 50);
        let (m23, st) = ep.mprobe(0, ANY_TAG, WORLD).unwrap();
        assert_eq!((st.tag, st.len), (23, big.len() - 1));
        large.fill(0);
        // SAFETY: `large` outlives the request.
        let r = unsafe { ep.imrecv_raw(m23, large.as_mut_ptr(), large.len()) }.unwrap();
        assert_eq!(ep.wait(r).unwrap().len, big.len() - 1);
        assert!(large[..big.len() - 1].iter().all(|&x| x == 7));
    }
    println!("RESULT cancel ok on {me}");
    ep.finalize().unwrap();
}

// ---------------------------------------------------------------------------------------------
// Buffers in pieces.

/// `total` packed bytes laid out as pieces of `plen` every `stride` bytes.
#[derive(Clone, Copy, Debug)]
struct Strided {
    total: usize,
    plen: usize,
    stride: usize,
}

impl Strided {
    /// Bytes the layout spans.
    fn span(&self) -> usize {
        self.total.div_ceil(self.plen) * self.stride
    }

    /// Where packed byte `i` is.
    fn at(&self, i: usize) -> usize {
        i / self.plen * self.stride + i % self.plen
    }

    /// The pieces in `buf` (of `span()` bytes), leaked for the test's lifetime.
    fn pieces(&self, buf: &mut [u8]) -> NonNull<dyn Pieces> {
        assert!(buf.len() >= self.span());
        let base = buf.as_mut_ptr();
        let list = (0..self.total.div_ceil(self.plen))
            .map(|k| (base.wrapping_add(k * self.stride), self.plen.min(self.total - k * self.plen)))
            .collect();
        // SAFETY: disjoint ranges of `buf`, which every caller keeps alive until its request ends.
        let list: Box<dyn Pieces> = Box::new(unsafe { PieceList::new(list) });
        NonNull::from(Box::leak(list))
    }

    /// A buffer whose packed bytes are message `k`'s and whose gaps hold 0xee.
    fn filled(&self, k: usize) -> Vec<u8> {
        let mut b = vec![0xeeu8; self.span()];
        for i in 0..self.total {
            b[self.at(i)] = pattern(k, i);
        }
        b
    }

    /// Checks that `buf` holds the first `n` bytes of message `k` in its pieces and 0xee elsewhere.
    fn check(&self, buf: &[u8], k: usize, n: usize) {
        let mut want = vec![0xeeu8; buf.len()];
        for i in 0..n.min(self.total) {
            want[self.at(i)] = pattern(k, i);
        }
        if let Some(i) = (0..buf.len()).find(|&i| buf[i] != want[i]) {
            panic!("message {k} in {self:?}: byte {i} is {:#x}, not {:#x}", buf[i], want[i]);
        }
    }
}

fn pattern(k: usize, i: usize) -> u8 {
    (i * 31 + k * 7 + 1) as u8
}

/// Rank 0 sends messages in pieces of every path (fastbox, cells, cells running out, rendezvous,
/// synchronous); rank 1 receives them into other pieces or contiguous buffers, posted or
/// unexpected, truncated once; then rank 1 sends contiguous messages that rank 0 takes into
/// pieces through matched probes.
fn pieces() {
    let mut ep = Endpoint::init().unwrap();
    let me = ep.rank();
    let eager = ep.eager_limit();
    let lens = [40, 100, eager - 7, 3 * eager + 11, 300 << 10];
    let send_shapes = [(3, 5), (512, 520)];
    // (message, length, sender's shape, sync)
    let mut cases = Vec::new();
    for (s, &(plen, stride)) in send_shapes.iter().enumerate() {
        for (l, &total) in lens.iter().enumerate() {
            cases.push((cases.len(), Strided { total, plen, stride }, (l + s) % 2 == 1));
        }
    }
    let recv_shapes = [(7, 9), (4096, 4100)];
    let window = 48;
    if me == 0 {
        for &(k, shape, sync) in &cases {
            let mut buf = shape.filled(k);
            let p = shape.pieces(&mut buf);
            // SAFETY: `buf` and the pieces outlive the request, waited for here.
            let r = unsafe { ep.isend_pieces(p, 1, k as i32, WORLD, sync) }.unwrap();
            assert_eq!(ep.wait(r).unwrap().len, shape.total);
        }
        // A window of eager messages the receiver takes late: cells run out, sends wait.
        let shape = Strided { total: eager, plen: 64, stride: 80 };
        let mut bufs: Vec<Vec<u8>> = (0..window).map(|k| shape.filled(100 + k)).collect();
        let reqs: Vec<Request> = bufs
            .iter_mut()
            .enumerate()
            // SAFETY: the buffers outlive the requests, waited for below.
            .map(|(k, b)| unsafe { ep.isend_pieces(shape.pieces(b), 1, 1000 + k as i32, WORLD, false) }.unwrap())
            .collect();
        for r in ep.wait_all(&reqs) {
            assert_eq!(r.unwrap().len, eager);
        }
        // Into pieces from contiguous messages: matched probes, then a posted receive.
        let big = 4 * eager + 3;
        let shape = Strided { total: big, plen: 1000, stride: 1100 };
        for tag in [2000, 2001] {
            let (m, st) = ep.mprobe(1, tag, WORLD).unwrap();
            let total = st.len;
            let sh = Strided { total, ..shape };
            let mut buf = vec![0xeeu8; sh.span()];
            // SAFETY: `buf` outlives the request.
            let r = unsafe { ep.imrecv_pieces(m, sh.pieces(&mut buf)) }.unwrap();
            assert_eq!(ep.wait(r).unwrap().len, total);
            sh.check(&buf, tag as usize, total);
        }
        let mut buf = vec![0xeeu8; shape.span()];
        // SAFETY: `buf` outlives the request.
        let r = unsafe { ep.irecv_pieces(shape.pieces(&mut buf), 1, 2002, WORLD) }.unwrap();
        assert_eq!(ep.wait(r).unwrap().len, big);
        shape.check(&buf, 2002, big);
    } else if me == 1 {
        for &(k, shape, _) in &cases {
            let (plen, stride) = recv_shapes[k % 2];
            let truncate = k == 3;
            let total = if truncate { shape.total - 5 } else { shape.total };
            let rs = Strided { total, plen, stride };
            let mut buf = vec![0xeeu8; rs.span()];
            if k % 3 == 2 {
                let mut flat = vec![0u8; total];
                let st = ep.recv(&mut flat, 0, k as i32, WORLD).unwrap();
                assert_eq!(st.len, total);
                assert!(flat.iter().enumerate().all(|(i, &b)| b == pattern(k, i)), "message {k} contiguous");
                continue;
            }
            // SAFETY: `buf` outlives the request, waited for here.
            let r = unsafe { ep.irecv_pieces(rs.pieces(&mut buf), 0, k as i32, WORLD) }.unwrap();
            match ep.wait(r) {
                Ok(st) => assert!(!truncate && st.len == total),
                Err(Error::Truncated { len, capacity, .. }) => {
                    assert!(truncate && (len, capacity) == (shape.total, total))
                }
                Err(e) => panic!("message {k}: {e}"),
            }
            rs.check(&buf, k, total);
        }
        std::thread::sleep(Duration::from_millis(200));
        let shape = Strided { total: eager, plen: 33, stride: 40 };
        for k in 0..window {
            let mut buf = vec![0xeeu8; shape.span()];
            // SAFETY: `buf` outlives the request, waited for here.
            let r = unsafe { ep.irecv_pieces(shape.pieces(&mut buf), 0, 1000 + k as i32, WORLD) }.unwrap();
            assert_eq!(ep.wait(r).unwrap().len, eager);
            shape.check(&buf, 100 + k, eager);
        }
        let big = 4 * eager + 3;
        for (tag, len) in [(2000, 300), (2001, big), (2002, big)] {
            let data: Vec<u8> = (0..len).map(|i| pattern(tag, i)).collect();
            // Non-blocking: above the eager limit, a rendezvous (a blocking send would go eagerly).
            // SAFETY: `data` outlives the request, waited for here.
            let r = unsafe { ep.isend_raw(data.as_ptr(), len, 0, tag as i32, WORLD) }.unwrap();
            ep.wait(r).unwrap();
        }
    }
    println!("RESULT pieces ok on {me}: {:?}", ep.lmt_stats());
    ep.finalize().unwrap();
}

fn messages_in_pieces_between_processes() {
    for nodes in [&[][..], &["--nodes", "2"]] {
        for lmt in ["ring", "cma"] {
            let o = job(2, nodes, "pieces", &[("NEMESIS_LMT", lmt.into())]);
            assert!(o.status.success(), "{nodes:?} {lmt}: {}", show(&o));
            assert_eq!(results(&o).len(), 2, "{}", show(&o));
        }
    }
}

fn cancellation_and_matched_probes_between_processes() {
    for nodes in [&[][..], &["--nodes", "2"]] {
        let o = job(2, nodes, "cancel", &[]);
        assert!(o.status.success(), "{nodes:?}: {}", show(&o));
        assert_eq!(results(&o).len(), 2, "{}", show(&o));
    }
}

// ---------------------------------------------------------------------------------------------
// A peer killed while others wait on it.

fn peer_killed_while_others_wait_on_it() {
    for wait in ["poll", "block"] {
        let o = job(3, &["--keep-going", "--wait", wait], "peer-killed", &[]);
        assert_eq!(o.status.code(), Some(128 + 9), "{}", show(&o));
        assert_eq!(results(&o).len(), 2, "{}", show(&o));
    }
}

/// The same without the launcher's marks in the segment, as under a process manager that knows
/// nothing of nemesis: the survivors find the death through pidfds on the pids ranks publish.
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
         exec ip netns exec \"$n\" env NEMESIS_TCP_ADDR=\"$a\" {exe} {rank_arg}",
        ns.names[0],
        ns.addrs[0],
        ns.names[1],
        ns.addrs[1],
        rank_arg = common::harness::RANK_ARG
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
// A blocking `ANY_SOURCE` receive in `block` mode takes what waits in fastboxes at once.

/// Rounds of [`any_source_block`]: past `PortConfig::fastbox_after`, so the answers come through
/// the fastboxes.
const ANY_SOURCE_ROUNDS: u64 = 150;

/// Rank 0 hands out a task per round; the others answer it (8 bytes, tag by round) and rank 0
/// takes the answers with blocking `ANY_SOURCE`/`ANY_TAG` receives, as a manager does.
fn any_source_block() {
    let mut ep = Endpoint::init().unwrap();
    let (me, n) = (ep.rank(), ep.size());
    let t0 = Instant::now();
    for round in 0..ANY_SOURCE_ROUNDS {
        let tag = 20 + (round % 3) as i32;
        if me == 0 {
            for w in 1..n {
                ep.send(&round.to_le_bytes(), w, 10, WORLD).unwrap();
            }
            let mut seen = vec![0; n as usize];
            for _ in 1..n {
                let mut b = [0u8; 8];
                let st = ep.recv(&mut b, ANY_SOURCE, ANY_TAG, WORLD).unwrap();
                assert_eq!((st.len, st.tag), (8, tag), "round {round}");
                assert_eq!(u64::from_le_bytes(b), round * 1000 + u64::from(st.source), "round {round}");
                seen[st.source as usize] += 1;
            }
            assert!(seen[1..].iter().all(|&c| c == 1), "round {round}: answers {seen:?}");
        } else {
            let mut b = [0u8; 8];
            ep.recv(&mut b, 0, 10, WORLD).unwrap();
            assert_eq!(u64::from_le_bytes(b), round);
            ep.send(&(round * 1000 + u64::from(me)).to_le_bytes(), 0, tag, WORLD).unwrap();
        }
    }
    if me == 0 {
        println!("RESULT any-source rounds {ANY_SOURCE_ROUNDS} in {:.3} s", t0.elapsed().as_secs_f64());
    }
    ep.finalize().unwrap();
}

/// 8 ranks on 2 cores in `block` mode (they block after a few empty polls). Before the sleep's
/// last look scanned every fastbox, rank 0 woken by an answer's ring polled only its queue and
/// slept again: each answer waited up to `scan_every` doorbell timeouts (about 80 ms), over a
/// minute for this job; now it takes well under a second.
fn any_source_receiver_in_block_mode_takes_fastbox_messages_at_once() {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_nemesis-run"));
    cmd.args(["-n", "8", "--wait", "block", "--"]).args(common::harness::me_as_rank());
    cmd.env("NEMESIS_TEST_ROLE", "any-source-block");
    let o = common::run_with_timeout(cmd, Duration::from_secs(30));
    assert!(o.status.success(), "{}", show(&o));
    println!("{}", results(&o).pop().unwrap());
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
    cmd.args(args).args(common::harness::me_as_rank());
    cmd.env("NEMESIS_TEST_ROLE", role);
    for (k, v) in env {
        cmd.env(k, v);
    }
    cmd.output().unwrap()
}

/// Under Hydra with two node identities (`NEMESIS_NODE` per MPMD section): traffic between them
/// goes through each netmod.
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
            args.push(common::harness::RANK_ARG.to_owned());
        }
        let mut c = Command::new(h);
        c.args(&args).envs(net.iter().map(|(k, v)| (k, v)));
        let o = common::run_with_timeout(c, Duration::from_secs(300));
        assert!(o.status.success(), "{label}: {}", show(&o));
        assert_eq!(results(&o).len(), 4, "{label}: {}", show(&o));
    }
}

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
