//! Soak: 16 ranks (oversubscribed, `yield` waits) send each other random traffic for
//! `NEMESIS_SOAK` seconds (3 by default; CI runs 60 in release mode) while the test SIGKILLs some
//! of them at random points of their traffic (`nemesis-run --keep-going`): each victim holds
//! after a random number of sends (its traffic lasts until then, however slow the machine), its
//! messages in flight, and is killed there, never racing a clock it could beat. Sizes from 0 bytes to 4 MiB (fastboxes,
//! cells, rendezvous), standard and synchronous non-blocking sends, receives through
//! `ANY_SOURCE`/`ANY_TAG` and named ones, probes. Every rank checks every byte it receives, that
//! messages of one (source, tag) come in the order sent and none twice, and at the end that it got
//! every message a surviving sender completed to it (each sender's last message lists its counts).
//!
//! `NEMESIS_SOAK_SEED` replays a run (the seed is printed).

mod common;

use std::collections::HashMap;
use std::time::{Duration, Instant};

use common::{Rng, run_with_timeout, show};
use nemesis::{ANY_SOURCE, ANY_TAG, Endpoint, Error, Request, WORLD};

const RANKS: u32 = 16;
/// Data tags; `END` carries a sender's counts.
const TAGS: i32 = 4;
const END: i32 = 100;
/// Sends in flight per rank.
const WINDOW: usize = 6;
const MAX_LEN: usize = 4 << 20;

fn seconds() -> u64 {
    std::env::var("NEMESIS_SOAK").ok().and_then(|v| v.parse().ok()).unwrap_or(3)
}

fn main() {
    common::harness::main(soak_rank, tests![soak_with_random_kills]);
}

/// The bytes of message `idx` of (`src`, `dst`, `tag`), `len` long.
fn content(src: u32, dst: u32, tag: i32, idx: u32, len: usize) -> Vec<u8> {
    let mut v = vec![0u8; len];
    Rng::new(u64::from(src) << 48 ^ u64::from(dst) << 40 ^ (tag as u64) << 32 ^ u64::from(idx)).fill(&mut v);
    v
}

/// A random length: mostly small, some a few cells, a few by rendezvous up to 4 MiB.
fn length(r: &mut Rng) -> usize {
    match r.below(100) {
        0..=59 => r.below(257) as usize,
        60..=86 => 257 + r.below(16 * 1024) as usize,
        87..=97 => 16 * 1024 + r.below(256 * 1024) as usize,
        _ => 256 * 1024 + r.below((MAX_LEN - 256 * 1024) as u64 + 1) as usize,
    }
}

struct InFlight {
    req: Request,
    _buf: Vec<u8>,
    dst: u32,
}

/// What a rank checks of its arrivals.
struct Arrivals {
    /// Next index expected per (source, tag).
    next: HashMap<(u32, i32), u32>,
    /// Sources done: their END arrived, or they died and nothing more can come.
    done: Vec<bool>,
    /// Sources that died with a message in progress (a receive failed with `PeerDied`).
    lost: Vec<bool>,
    buf: Vec<u8>,
    received: u64,
}

impl Arrivals {
    /// Receives the message `st` announced (or, one time in three, whatever `ANY_SOURCE`
    /// brings) and checks it.
    fn take(&mut self, ep: &mut Endpoint, me: u32, st: nemesis::Status, r: &mut Rng) {
        let (src, tag) = if r.below(3) == 0 { (ANY_SOURCE, ANY_TAG) } else { (st.source as i32, st.tag) };
        let got = ep.recv(&mut self.buf, src, tag, WORLD);
        let st = match got {
            Ok(st) => st,
            Err(Error::PeerDied { rank }) => {
                // A message it was sending when it died: dropped whole.
                self.lost[rank as usize] = true;
                return;
            }
            Err(e) => panic!("rank {me}: receive from {src} tag {tag}: {e}"),
        };
        self.check(me, st);
    }

    /// Checks a message received into `buf`: its bytes, its place in its (source, tag) order; for
    /// an END, that every message its sender completed to us arrived.
    fn check(&mut self, me: u32, st: nemesis::Status) {
        if st.tag == END {
            let counts: Vec<u32> =
                self.buf[..st.len].chunks_exact(4).map(|c| u32::from_le_bytes(c.try_into().unwrap())).collect();
            for (t, &n) in counts.iter().enumerate() {
                let have = self.next.get(&(st.source, t as i32)).copied().unwrap_or(0);
                assert_eq!(have, n, "rank {me}: from {} tag {t}: received {have}, sent {n}", st.source);
            }
            self.done[st.source as usize] = true;
            return;
        }
        let idx = self.next.entry((st.source, st.tag)).or_insert(0);
        let mut want = content(st.source, me, st.tag, *idx, st.len);
        if self.buf[..st.len] != want[..] && self.lost[st.source as usize] {
            // A source that died with a rendezvous message in progress (its receive failed) may
            // have completed later eager ones: they follow the lost one, in order.
            if let Some(later) = (*idx + 1..*idx + 1 + WINDOW as u32 * 4)
                .find(|&i| self.buf[..st.len] == content(st.source, me, st.tag, i, st.len)[..])
            {
                *idx = later;
                want = content(st.source, me, st.tag, later, st.len);
            }
        }
        assert!(
            self.buf[..st.len] == want[..],
            "rank {me}: message {idx} from {} tag {} ({} bytes) differs (lost, duplicated or out of order)",
            st.source,
            st.tag,
            st.len
        );
        *idx += 1;
        self.received += 1;
    }

    /// Receives what has arrived; true if anything did.
    fn poll(&mut self, ep: &mut Endpoint, me: u32, r: &mut Rng) -> bool {
        match ep.iprobe(ANY_SOURCE, ANY_TAG, WORLD) {
            Ok(Some(st)) => {
                if r.below(8) == 0 {
                    // The blocking probe finds the same message.
                    let again = ep.probe(st.source as i32, st.tag, WORLD).unwrap();
                    assert_eq!((again.source, again.tag, again.len), (st.source, st.tag, st.len));
                }
                self.take(ep, me, st, r);
                true
            }
            Ok(None) => false,
            Err(e) => panic!("rank {me}: iprobe: {e}"),
        }
    }
}

/// `NEMESIS_SOAK_HOLD` (`<rank>:<sends>,...`): after how many sends this rank holds, if a victim.
fn hold_of(me: u32) -> Option<u64> {
    std::env::var("NEMESIS_SOAK_HOLD").unwrap_or_default().split(',').find_map(|h| {
        let (r, n) = h.split_once(':')?;
        (r.parse() == Ok(me)).then(|| n.parse().unwrap())
    })
}

/// A victim at its hold: says so (`held-<rank>` holding its pid) and waits to be killed, its
/// sends in flight and nothing received meanwhile.
fn hold(dir: &str, me: u32) -> ! {
    let marker = format!("{dir}/held-{me}");
    std::fs::write(format!("{marker}.tmp"), std::process::id().to_string()).unwrap();
    std::fs::rename(format!("{marker}.tmp"), &marker).unwrap();
    loop {
        std::thread::sleep(Duration::from_secs(1));
    }
}

fn soak_rank() {
    let mut ep = Endpoint::init().unwrap();
    let (me, size) = (ep.rank(), ep.size());
    let dir = std::env::var("NEMESIS_SOAK_DIR").unwrap();
    let hold_at = hold_of(me);
    let seed: u64 = std::env::var("NEMESIS_SOAK_SEED").unwrap().parse().unwrap();
    let mut r = Rng::new(seed ^ u64::from(me) << 20);
    let deadline = Instant::now() + Duration::from_secs(seconds());
    let mut arr = Arrivals {
        next: HashMap::new(),
        done: (0..size).map(|s| s == me).collect(),
        lost: vec![false; size as usize],
        buf: vec![0u8; MAX_LEN],
        received: 0,
    };
    // Per (destination, tag): messages handed over so far, and completed.
    let mut idx: HashMap<(u32, i32), u32> = HashMap::new();
    let mut completed: HashMap<(u32, i32), u32> = HashMap::new();
    let mut inflight: Vec<(InFlight, i32)> = Vec::new();
    let mut sent = 0u64;
    let finish = |ep: &mut Endpoint,
                  f: InFlight,
                  tag: i32,
                  res: nemesis::Result<nemesis::Status>,
                  completed: &mut HashMap<(u32, i32), u32>| match res {
        Ok(_) => *completed.entry((f.dst, tag)).or_insert(0) += 1,
        Err(Error::PeerDied { rank }) if rank == f.dst => assert!(ep.peer_gone(f.dst)),
        Err(e) => panic!("rank {me}: send to {}: {e}", f.dst),
    };
    while Instant::now() < deadline || hold_at.is_some_and(|h| sent < h) {
        if inflight.len() < WINDOW {
            let dst = (me + 1 + r.below(u64::from(size - 1)) as u32) % size;
            if !ep.peer_gone(dst) {
                let tag = r.below(TAGS as u64) as i32;
                let i = idx.entry((dst, tag)).or_insert(0);
                let len = length(&mut r);
                let buf = content(me, dst, tag, *i, len);
                // SAFETY: `buf` moves into `inflight` (its heap bytes stay put) and stays there
                // until the request completes.
                let started = unsafe {
                    if r.below(6) == 0 {
                        ep.issend_raw(buf.as_ptr(), len, dst, tag, WORLD)
                    } else {
                        ep.isend_raw(buf.as_ptr(), len, dst, tag, WORLD)
                    }
                };
                match started {
                    Ok(req) => {
                        *i += 1;
                        sent += 1;
                        inflight.push((InFlight { req, _buf: buf, dst }, tag));
                        if hold_at == Some(sent) {
                            hold(&dir, me);
                        }
                    }
                    Err(Error::PeerDied { .. }) => {}
                    Err(e) => panic!("rank {me}: send to {dst}: {e}"),
                }
            }
        }
        let mut k = 0;
        while k < inflight.len() {
            let req = inflight[k].0.req;
            match ep.test(req) {
                Ok(None) => k += 1,
                Ok(Some(st)) => {
                    let (f, tag) = inflight.swap_remove(k);
                    finish(&mut ep, f, tag, Ok(st), &mut completed);
                }
                Err(e) => {
                    let (f, tag) = inflight.swap_remove(k);
                    finish(&mut ep, f, tag, Err(e), &mut completed);
                }
            }
        }
        while arr.poll(&mut ep, me, &mut r) {}
    }
    // Complete the sends in flight (receiving meanwhile: peers may wait for us to take theirs).
    while !inflight.is_empty() {
        let (f, tag) = inflight.swap_remove(0);
        let res = loop {
            match ep.test(f.req) {
                Ok(None) => {
                    arr.poll(&mut ep, me, &mut r);
                }
                Ok(Some(st)) => break Ok(st),
                Err(e) => break Err(e),
            }
        };
        finish(&mut ep, f, tag, res, &mut completed);
    }
    // Each destination learns how many messages of each tag we completed to it.
    for dst in (0..size).filter(|&d| d != me) {
        let counts: Vec<u8> =
            (0..TAGS).flat_map(|t| completed.get(&(dst, t)).copied().unwrap_or(0).to_le_bytes()).collect();
        // SAFETY: `counts` lives until the request completes below.
        let req = match unsafe { ep.isend_raw(counts.as_ptr(), counts.len(), dst, END, WORLD) } {
            Ok(req) => req,
            Err(Error::PeerDied { .. }) => continue,
            Err(e) => panic!("rank {me}: END to {dst}: {e}"),
        };
        loop {
            match ep.test(req) {
                Ok(None) => {
                    arr.poll(&mut ep, me, &mut r);
                }
                Ok(Some(_)) | Err(Error::PeerDied { .. }) => break,
                Err(e) => panic!("rank {me}: END to {dst}: {e}"),
            }
        }
    }
    // Receive until every source sent its END or died with nothing more to come.
    let limit = Instant::now() + Duration::from_secs(120);
    while arr.done.iter().any(|d| !d) {
        if arr.poll(&mut ep, me, &mut r) {
            continue;
        }
        for s in 0..size {
            if !arr.done[s as usize] && ep.peer_gone(s) {
                // Whatever it sent before dying, then PeerDied.
                loop {
                    match ep.recv(&mut arr.buf, s as i32, ANY_TAG, WORLD) {
                        Ok(st) => arr.check(me, st),
                        Err(Error::PeerDied { .. }) => break,
                        Err(e) => panic!("rank {me}: draining dead {s}: {e}"),
                    }
                }
                arr.done[s as usize] = true;
            }
        }
        assert!(Instant::now() < limit, "rank {me}: still waiting for {:?}", arr.done);
        std::thread::sleep(Duration::from_micros(200));
    }
    let lost: Vec<u32> = (0..size).filter(|&s| arr.lost[s as usize]).collect();
    println!(
        "RESULT ok rank {me} sent {sent} received {} (messages lost with their dead sender from {lost:?})",
        arr.received
    );
    let _ = ep.finalize();
}

fn soak_with_random_kills() {
    let secs = seconds();
    let seed: u64 = std::env::var("NEMESIS_SOAK_SEED").ok().and_then(|v| v.parse().ok()).unwrap_or_else(|| {
        std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_nanos() as u64
    });
    eprintln!("soak: {RANKS} ranks for {secs} s, seed {seed} (NEMESIS_SOAK_SEED={seed} replays it)");
    let dir = std::env::temp_dir().join(format!("nemesis-soak-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let mut cmd = std::process::Command::new(env!("CARGO_BIN_EXE_nemesis-run"));
    cmd.args(["-n", &RANKS.to_string(), "--keep-going", "--wait", "yield", "--"]);
    cmd.args(common::harness::me_as_rank());
    cmd.env("NEMESIS_TEST_ROLE", "soak")
        .env("NEMESIS_SOAK", secs.to_string())
        .env("NEMESIS_SOAK_SEED", seed.to_string())
        .env("NEMESIS_SOAK_DIR", &dir);
    // Kills at random points of the traffic: one, plus one per 20 s, at most four; each victim
    // holds after a random number of sends (3 to 20 per second of traffic: the first seconds in
    // a debug build under load) and is killed there.
    let mut r = Rng::new(seed);
    let kills = (1 + secs / 20).min(4) as usize;
    let mut victims: Vec<u32> = Vec::new();
    while victims.len() < kills {
        let v = r.below(u64::from(RANKS)) as u32;
        if !victims.contains(&v) {
            victims.push(v);
        }
    }
    let plan: Vec<(u32, u64)> = victims.iter().map(|&v| (v, 3 * secs + r.below(17 * secs + 1))).collect();
    let spec: Vec<String> = plan.iter().map(|(v, n)| format!("{v}:{n}")).collect();
    cmd.env("NEMESIS_SOAK_HOLD", spec.join(","));
    let killer_dir = dir.clone();
    let done = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let over = done.clone();
    let killer = std::thread::spawn(move || {
        let mut left = plan;
        // ORDERING: Relaxed; a flag to stop polling, nothing published with it.
        while !left.is_empty() && !over.load(std::sync::atomic::Ordering::Relaxed) {
            left.retain(|&(v, n)| {
                let Ok(pid) = std::fs::read_to_string(killer_dir.join(format!("held-{v}"))) else { return true };
                let pid: i32 = pid.trim().parse().unwrap();
                // SAFETY: signalling a rank of our job (its pid from its own marker).
                unsafe { libc::kill(pid, libc::SIGKILL) };
                eprintln!("soak: killed rank {v} (pid {pid}) after its {n} sends");
                false
            });
            std::thread::sleep(Duration::from_millis(5));
        }
    });
    let o = run_with_timeout(cmd, Duration::from_secs(secs + 240));
    // ORDERING: Relaxed; see above.
    done.store(true, std::sync::atomic::Ordering::Relaxed);
    killer.join().unwrap();
    let _ = std::fs::remove_dir_all(&dir);
    let ok: Vec<String> = common::results(&o).into_iter().filter(|l| l.starts_with("RESULT ok")).collect();
    for l in &ok {
        eprintln!("{l}");
    }
    let survivors: Vec<u32> = (0..RANKS).filter(|k| !victims.contains(k)).collect();
    for s in &survivors {
        assert!(
            ok.iter().any(|l| l.starts_with(&format!("RESULT ok rank {s} "))),
            "rank {s} did not finish: {}",
            show(&o)
        );
    }
    assert_eq!(ok.len(), survivors.len(), "a victim finished or a line is missing: {}", show(&o));
}
