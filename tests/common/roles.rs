//! Rank programs that several test binaries run under different launchers: the test binary
//! is itself the rank program (`rank_main` dispatches on `NEMESIS_TEST_ROLE`).

use std::time::Duration;

use nemesis::{ANY_SOURCE, ANY_TAG, Endpoint, Error, Request, WORLD};

use super::Rng;

// ---------------------------------------------------------------------------------------------
// Random all-to-all traffic (`NEMESIS_TEST_SEED`, `NEMESIS_TEST_COUNT`): random sizes up to five
// times the eager limit, tags and contexts, `ANY_SOURCE`/`ANY_TAG` receives mixed with specific
// ones, payload checks and per-(source, context) order. Prints `RESULT rank <r> received ...`.

/// One planned message.
#[derive(Clone, Copy, Debug)]
struct Msg {
    dst: u32,
    /// 0: received with ANY_TAG (ANY_SOURCE or a specific source); 1: received by (source, tag);
    /// 2: zero-byte messages.
    ctx: u32,
    tag: i32,
    len: usize,
}

/// Header carried in every message of contexts 0 and 1 (24 bytes).
const HDR: usize = 24;

/// What rank `src` sends, in order.
fn plan(seed: u64, src: u32, size: u32, count: u32, eager: usize) -> Vec<Msg> {
    let mut r = Rng::new(seed ^ (u64::from(src) << 32));
    (0..count)
        .map(|_| {
            let dst = r.below(u64::from(size)) as u32;
            let ctx = match r.below(10) {
                0..=5 => 0,
                6..=8 => 1,
                _ => 2,
            };
            let tag = r.below(4) as i32;
            let len = match (ctx, r.below(20)) {
                (2, _) => 0,
                (_, 0..=11) => HDR + r.below(200) as usize,
                (_, 12..=17) => HDR + r.below(20_000) as usize,
                (_, 18) => HDR + r.below((eager - HDR) as u64 + 1) as usize,
                // Rendezvous.
                _ => eager + 1 + r.below(4 * eager as u64) as usize,
            };
            Msg { dst, ctx, tag, len }
        })
        .collect()
}

/// The bytes of a message: a header (source, context, tag, index in (src, dst, ctx), index in
/// (src, dst, ctx, tag)) then pseudo-random bytes seeded by all of it.
fn content(src: u32, m: &Msg, idx: u32, tag_idx: u32) -> Vec<u8> {
    let mut v = Vec::with_capacity(m.len);
    for w in [src, m.ctx, m.tag as u32, idx, tag_idx, m.len as u32] {
        v.extend_from_slice(&w.to_le_bytes());
    }
    let mut r = Rng::new(u64::from(src) << 40 ^ u64::from(m.ctx) << 32 ^ u64::from(idx) << 8 ^ m.len as u64);
    let head = v.len().min(m.len);
    v.resize(m.len, 0);
    r.fill(&mut v[head..]);
    v
}

fn word(b: &[u8], i: usize) -> u32 {
    u32::from_le_bytes(b[4 * i..4 * i + 4].try_into().unwrap())
}

/// Checks a received message of context 0 or 1 and returns (src, idx, tag_idx).
fn check(buf: &[u8], st: &nemesis::Status, ctx: u32) -> (u32, u32, u32) {
    assert!(st.len >= HDR, "message of {} bytes in context {ctx}", st.len);
    let (src, c, tag, idx, tag_idx, len) =
        (word(buf, 0), word(buf, 1), word(buf, 2) as i32, word(buf, 3), word(buf, 4), word(buf, 5) as usize);
    assert_eq!((src, c, tag, len), (st.source, ctx, st.tag, st.len), "header of a message from {}", st.source);
    let m = Msg { dst: 0, ctx, tag, len };
    assert!(buf[..st.len] == content(src, &m, idx, tag_idx)[..], "payload from {src} #{idx}");
    (src, idx, tag_idx)
}

pub fn traffic() {
    let mut ep = Endpoint::init().unwrap();
    let (me, size) = (ep.rank(), ep.size());
    let seed: u64 = std::env::var("NEMESIS_TEST_SEED").unwrap().parse().unwrap();
    let count: u32 = std::env::var("NEMESIS_TEST_COUNT").unwrap().parse().unwrap();
    let eager = ep.eager_limit();
    let plans: Vec<Vec<Msg>> = (0..size).map(|s| plan(seed, s, size, count, eager)).collect();
    // What I will receive: per source, per context, per tag.
    let n = size as usize;
    let mut incoming = vec![[0u32; 3]; n];
    let mut incoming_tag = vec![[0u32; 4]; n];
    for (s, p) in plans.iter().enumerate() {
        for m in p.iter().filter(|m| m.dst == me) {
            incoming[s][m.ctx as usize] += 1;
            if m.ctx == 1 {
                incoming_tag[s][m.tag as usize] += 1;
            }
        }
    }
    let total0: u32 = incoming.iter().map(|c| c[0]).sum();
    let mut next0 = vec![0u32; n];
    let mut next1 = vec![[0u32; 4]; n];
    let on_ctx0 = |src: u32, idx: u32, next0: &mut Vec<u32>| {
        assert_eq!(idx, next0[src as usize], "non-overtaking from {src} in context 0");
        next0[src as usize] += 1;
    };
    // What this rank sends, made up front: rendezvous sends are non-blocking (a blocking one
    // would wait for a receive that the peer posts only after its own sends).
    let mut counters = vec![[0u32; 3]; n];
    let mut tag_counters = vec![[0u32; 4]; n];
    let outgoing: Vec<Vec<u8>> = plans[me as usize]
        .iter()
        .map(|m| {
            let c = &mut counters[m.dst as usize][m.ctx as usize];
            let t = &mut tag_counters[m.dst as usize][m.tag as usize];
            let data = if m.ctx == 2 { Vec::new() } else { content(me, m, *c, if m.ctx == 1 { *t } else { 0 }) };
            *c += 1;
            if m.ctx == 1 {
                *t += 1;
            }
            data
        })
        .collect();
    let max = 5 * eager + 1;
    // A window of ANY_SOURCE/ANY_TAG receives in context 0, open while sending.
    let window = 4.min(total0 as usize);
    let mut bufs: Vec<Vec<u8>> = (0..window).map(|_| vec![0u8; max]).collect();
    let mut buf = vec![0u8; max];
    // (source, index) of the context-0 messages received after the window, in order.
    let mut rest0 = Vec::new();
    ep.scope(|s| {
        let reqs: Vec<Request> = bufs.iter_mut().map(|b| s.irecv(b, ANY_SOURCE, ANY_TAG, 0).unwrap()).collect();
        let mut large = Vec::new();
        for (m, data) in plans[me as usize].iter().zip(&outgoing) {
            if data.len() > eager {
                large.push(s.isend(data, m.dst, m.tag, m.ctx).unwrap());
            } else {
                s.send(data, m.dst, m.tag, m.ctx).unwrap();
            }
        }
        // Context-0 messages taken so far, per source.
        let mut taken0 = vec![0u32; n];
        for r in s.wait_all(&reqs) {
            taken0[r.unwrap().source as usize] += 1;
        }
        // The rest: alternately ANY_SOURCE and the source with the most left, ANY_TAG, context 0.
        let mut turn = 0;
        while taken0.iter().sum::<u32>() < total0 {
            let src = if turn % 2 == 0 {
                ANY_SOURCE
            } else {
                (0..n).max_by_key(|&s| incoming[s][0] - taken0[s]).map(|s| s as i32).unwrap()
            };
            turn += 1;
            let st = s.recv(&mut buf, src, ANY_TAG, 0).unwrap();
            let (src, idx, _) = check(&buf, &st, 0);
            taken0[src as usize] += 1;
            rest0.push((src, idx));
        }
        // Context 1: by (source, tag), in an order that differs from the sending order.
        for tag in (0..4).rev() {
            for src in 0..n {
                while next1[src][tag] < incoming_tag[src][tag] {
                    let st = s.recv(&mut buf, src as i32, tag as i32, 1).unwrap();
                    let (from, _, tag_idx) = check(&buf, &st, 1);
                    assert_eq!((from, tag_idx), (src as u32, next1[src][tag]), "order by (source, tag)");
                    next1[src][tag] += 1;
                }
            }
        }
        // Context 2: zero-byte messages.
        for (src, inc) in incoming.iter().enumerate() {
            for _ in 0..inc[2] {
                let st = s.recv(&mut [], src as i32, ANY_TAG, 2).unwrap();
                assert_eq!((st.source, st.len), (src as u32, 0));
            }
        }
        for r in s.wait_all(&large) {
            r.unwrap();
        }
    })
    .expect("scope");
    // Order in context 0: the window matched first (posting order), then the rest.
    for b in &bufs {
        let st = nemesis::Status { source: word(b, 0), tag: word(b, 2) as i32, len: word(b, 5) as usize };
        let (src, idx, _) = check(b, &st, 0);
        on_ctx0(src, idx, &mut next0);
    }
    for &(src, idx) in &rest0 {
        on_ctx0(src, idx, &mut next0);
    }
    assert_eq!(ep.iprobe(ANY_SOURCE, ANY_TAG, 0).unwrap(), None, "nothing left over");
    let large = plans.iter().flatten().filter(|m| m.dst == me && m.len > eager).count();
    let total = total0 + incoming.iter().map(|c| c[1] + c[2]).sum::<u32>();
    println!("RESULT rank {me} received {total} messages ({large} by rendezvous)");
    ep.finalize().unwrap();
}

// ---------------------------------------------------------------------------------------------
// A peer killed while others wait on it (3 ranks or more: rank 2 dies). Prints
// `RESULT survivor <r> ok` on ranks 0 and 1.

pub fn peer_killed() {
    let mut ep = Endpoint::init().unwrap();
    let me = ep.rank();
    if me == 2 {
        // Send one message to rank 0 first: it must still be delivered after our death.
        ep.send(b"last words", 0, 5, WORLD).unwrap();
        std::thread::sleep(Duration::from_millis(300));
        // SAFETY: raising a signal on ourselves.
        unsafe { libc::raise(libc::SIGKILL) };
        unreachable!();
    }
    let mut buf = [0u8; 64];
    if me == 0 {
        let st = ep.recv(&mut buf, 2, 5, WORLD).unwrap();
        assert_eq!(&buf[..st.len], b"last words");
    }
    // Both survivors block on rank 2, which dies: PeerDied, not a hang.
    let e = ep.recv(&mut buf, 2, ANY_TAG, WORLD).unwrap_err();
    assert!(matches!(e, Error::PeerDied { rank: 2 }), "{e}");
    assert!(ep.peer_gone(2));
    // Sending to it fails the same way (once its death is known).
    let e = ep.send(&[1], 2, 0, WORLD).unwrap_err();
    assert!(matches!(e, Error::PeerDied { rank: 2 }), "{e}");
    // The survivors go on.
    let other = 1 - me;
    if me == 0 {
        ep.send(b"still here", other, 9, WORLD).unwrap();
    } else {
        let st = ep.recv(&mut buf, other as i32, 9, WORLD).unwrap();
        assert_eq!(&buf[..st.len], b"still here");
    }
    println!("RESULT survivor {me} ok");
    ep.finalize().unwrap();
}

// ---------------------------------------------------------------------------------------------
// A ring: a token around all ranks a few laps (each adds its rank + 1), then a message past the
// eager limit (rendezvous) around the ring. Prints `RESULT ring <r> on <node> with <k> local`.

pub fn ring() {
    let mut ep = Endpoint::init().unwrap();
    let (me, size) = (ep.rank(), ep.size());
    let (next, prev) = ((me + 1) % size, (me + size - 1) % size);
    const LAPS: u64 = 3;
    let mut token = [0u8; 8];
    for lap in 0..LAPS as i32 {
        if me == 0 {
            let t = u64::from_le_bytes(token) + 1;
            ep.send(&t.to_le_bytes(), next, lap, 0).unwrap();
            ep.recv(&mut token, prev as i32, lap, 0).unwrap();
        } else {
            ep.recv(&mut token, prev as i32, lap, 0).unwrap();
            let t = u64::from_le_bytes(token) + u64::from(me) + 1;
            ep.send(&t.to_le_bytes(), next, lap, 0).unwrap();
        }
    }
    if me == 0 {
        let n = u64::from(size);
        assert_eq!(u64::from_le_bytes(token), LAPS * n * (n + 1) / 2, "the token after {LAPS} laps");
    }
    let len = 4 * ep.eager_limit() + 3;
    let out: Vec<u8> = (0..len).map(|i| (i as u32).wrapping_mul(31).wrapping_add(me) as u8).collect();
    let mut inp = vec![0u8; len];
    ep.scope(|s| {
        let r = s.irecv(&mut inp, prev as i32, 99, 0).unwrap();
        let w = s.isend(&out, next, 99, 0).unwrap();
        for r in s.wait_all(&[r, w]) {
            r.unwrap();
        }
    })
    .expect("scope");
    assert!(inp.iter().enumerate().all(|(i, &b)| b == (i as u32).wrapping_mul(31).wrapping_add(prev) as u8));
    println!("RESULT ring {me} on {} with {} local", ep.node(), ep.local_ranks().len());
    ep.finalize().unwrap();
}

/// `Endpoint::init` must fail: prints `INIT-ERROR <error>` and exits 0 (1 if it succeeded).
pub fn init_error() {
    match Endpoint::init() {
        Ok(ep) => {
            println!("INIT-OK rank {} of {}", ep.rank(), ep.size());
            std::process::exit(1);
        }
        Err(e) => println!("INIT-ERROR {e}"),
    }
}
