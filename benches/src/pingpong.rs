//! `nemesis-bench pingpong`: the README's main job. Starts two ranks of this binary with
//! `nemesis::launch` (pinned to two cores, polling), and measures through the Endpoint, round by
//! round and interleaved with a raw cache-line ping-pong between the same two cores:
//! - one-way latency by message size (ping-pong, half the round trip);
//! - streaming bandwidth by message size (a window of messages, then one acknowledgement);
//! - the 8-byte message rate through fastboxes and, separately, through the cell queue, as OSU's
//!   `osu_mbw_mr` measures it (windows of non-blocking sends and pre-posted receives).
//!
//! Rank 0 prints the table: medians over rounds with their spread, and the 8-byte latency as a
//! per-round ratio to the cache-line limit.

use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::time::Instant;

use nemesis::launch::{Bind, Job, Wait};
use nemesis::{Endpoint, WORLD};

use crate::stats::{Summary, ratio_of_rounds};

/// What to measure.
#[derive(Clone, Debug, clap::Args)]
pub struct Opts {
    /// Measured rounds (every measurement runs once per round, interleaved).
    #[arg(long, default_value_t = 11)]
    pub rounds: usize,
    /// Message sizes in bytes (default: 0 to the eager limit).
    #[arg(long, value_delimiter = ',')]
    pub sizes: Vec<usize>,
    /// Fewer rounds and iterations (a few seconds).
    #[arg(long)]
    pub quick: bool,
}

const DEFAULT_SIZES: [usize; 9] = [0, 8, 64, 256, 1024, 4096, 16384, 32768, 65536];

/// Runs the two ranks and lets rank 0 print the results.
pub fn run(opts: &Opts) {
    let page = nemesis_shm::os::memfd("pingpong-line").expect("memfd");
    nemesis_shm::os::reserve(&page, 4096).expect("a page");
    nemesis_shm::os::inheritable(&page).expect("inheritable");
    let rounds = if opts.quick { 3 } else { opts.rounds.max(1) };
    let sizes: Vec<String> = if opts.sizes.is_empty() { DEFAULT_SIZES.to_vec() } else { opts.sizes.clone() }
        .iter()
        .map(|s| s.to_string())
        .collect();
    let mut args = vec![
        "__pingpong-rank".to_owned(),
        "--rounds".into(),
        rounds.to_string(),
        "--line-fd".into(),
        page.as_raw_fd().to_string(),
        "--sizes".into(),
        sizes.join(","),
    ];
    if opts.quick {
        args.push("--quick".into());
    }
    let exe = std::env::current_exe().expect("own path");
    let outcome = Job::new(exe, args).ranks(2).bind(Bind::Core).wait(Wait::Poll).run().expect("start the ranks");
    if !outcome.success() {
        eprintln!("nemesis-bench pingpong: the ranks failed: {:?}", outcome.ending());
        std::process::exit(1);
    }
}

/// A cache line each way in the shared page, as `cacheline_pingpong.c`.
struct Line {
    map: memmap2::MmapMut,
}

impl Line {
    fn word(&self, i: usize) -> &AtomicU64 {
        // SAFETY: offsets 0 and 64 of a 4096-byte page-aligned mapping; only atomics use it.
        unsafe { &*(self.map.as_ptr().add(64 * i) as *const AtomicU64) }
    }

    fn pingpong(&self, ping: bool, base: u64, n: usize) {
        let (a, b) = (self.word(0), self.word(1));
        for i in base + 1..=base + n as u64 {
            if ping {
                a.store(i, Relaxed);
                while b.load(Relaxed) != i {}
            } else {
                while a.load(Relaxed) != i {}
                b.store(i, Relaxed);
            }
        }
    }
}

/// Iterations for a message of `len` bytes: fewer for large ones.
fn iters(len: usize, quick: bool) -> usize {
    let n = if len <= 1024 { 20_000 } else { (20_000 * 1024 / len).max(200) };
    if quick { n / 10 } else { n }
}

/// The rank side: both ranks run the same schedule; rank 0 times it and prints.
pub fn rank(rounds: usize, line_fd: RawFd, sizes: &[usize], quick: bool) {
    let mut ep = Endpoint::init().expect("endpoint");
    assert_eq!(ep.size(), 2, "pingpong runs on two ranks");
    let me = ep.rank();
    let ping = me == 0;
    let peer = 1 - me;
    // SAFETY: the launcher's parent made this descriptor for us; nothing else uses it here.
    let page = unsafe { OwnedFd::from_raw_fd(line_fd) };
    // SAFETY: a shared 4096-byte memfd, used only through atomics.
    let line = Line { map: unsafe { memmap2::MmapMut::map_mut(&page) }.expect("map the page") };
    let sizes: Vec<usize> = sizes.iter().copied().filter(|&s| s <= ep.eager_limit()).collect();
    let max = sizes.iter().copied().max().unwrap_or(8).max(8);
    let out = vec![1u8; max];
    let mut buf = vec![0u8; max];
    let n_line = if quick { 20_000 } else { 200_000 };
    let n_rate = if quick { 20_000 } else { 200_000 };

    // Measurements per round: cache line, latency per size, bandwidth per size, rate (2).
    let mut limit = vec![0.0; rounds];
    let mut lat = vec![vec![0.0; rounds]; sizes.len()];
    let mut bw = vec![vec![0.0; rounds]; sizes.len()];
    let mut rate = [vec![0.0; rounds], vec![0.0; rounds]];
    let mut base = 0u64;
    for r in 0..=rounds {
        let warm = r == 0;
        // Cache-line limit.
        let t = Instant::now();
        line.pingpong(ping, base, n_line);
        base += n_line as u64;
        if !warm {
            limit[r - 1] = t.elapsed().as_nanos() as f64 / n_line as f64 / 2.0;
        }
        for (k, &len) in sizes.iter().enumerate() {
            let n = iters(len, quick);
            let t = Instant::now();
            for _ in 0..n {
                if ping {
                    ep.send(&out[..len], peer, 1, WORLD).expect("send");
                    ep.recv(&mut buf[..len], peer as i32, 1, WORLD).expect("recv");
                } else {
                    ep.recv(&mut buf[..len], peer as i32, 1, WORLD).expect("recv");
                    ep.send(&out[..len], peer, 1, WORLD).expect("send");
                }
            }
            if !warm {
                lat[k][r - 1] = t.elapsed().as_nanos() as f64 / n as f64 / 2.0;
            }
            let t = Instant::now();
            stream(&mut ep, ping, peer, &out[..len], &mut buf[..len], n);
            if !warm {
                bw[k][r - 1] = (len * n) as f64 / t.elapsed().as_secs_f64() / 1e6;
            }
        }
        for (path, fastbox) in [true, false].into_iter().enumerate() {
            ep.set_fastboxes(fastbox);
            let t = Instant::now();
            windows(&mut ep, ping, peer, n_rate);
            if !warm {
                rate[path][r - 1] = (n_rate / WINDOW * WINDOW) as f64 / t.elapsed().as_secs_f64() / 1e6;
            }
        }
        ep.set_fastboxes(true);
    }
    // Where each rank runs, as each sees its own affinity (the launcher pinned both): rank 1
    // tells rank 0, which prints.
    let here = crate::pin::describe(&crate::pin::allowed());
    if me == 0 {
        let mut there = [0u8; 4096];
        let st = ep.recv(&mut there, peer as i32, 5, WORLD).expect("the peer's CPUs");
        let cpus = (here, String::from_utf8_lossy(&there[..st.len]).into_owned());
        report(&sizes, &limit, &lat, &bw, &rate, rounds, &cpus);
    } else {
        ep.send(here.as_bytes(), peer, 5, WORLD).expect("send our CPUs");
    }
    ep.finalize().expect("finalize");
}

/// Messages per window of the rate test: the fastbox ring's slots (16 by default), so that every
/// message of the fastbox-path figure does go through the fastbox (OSU's `osu_mbw_mr` uses 64).
const WINDOW: usize = 16;

/// The message rate as OSU measures it: windows of non-blocking 8-byte sends matched by windows
/// of pre-posted receives, each completed with `wait_all`, then one acknowledgement.
fn windows(ep: &mut Endpoint, ping: bool, peer: u32, n: usize) {
    let out = [1u8; 8];
    let mut bufs = [[0u8; 8]; WINDOW];
    for _ in 0..n / WINDOW {
        ep.scope(|s| {
            let reqs: Vec<_> = if ping {
                (0..WINDOW).map(|_| s.isend(&out, peer, 4, WORLD).expect("isend")).collect()
            } else {
                bufs.iter_mut().map(|b| s.irecv(b, peer as i32, 4, WORLD).expect("irecv")).collect()
            };
            for r in s.wait_all(&reqs) {
                r.expect("wait");
            }
        })
        .expect("scope");
    }
    let mut ack = [0u8; 0];
    if ping {
        ep.recv(&mut ack, peer as i32, 3, WORLD).expect("ack");
    } else {
        ep.send(&ack, peer, 3, WORLD).expect("ack");
    }
}

/// `n` messages from the ping side, then an acknowledgement back.
fn stream(ep: &mut Endpoint, ping: bool, peer: u32, out: &[u8], buf: &mut [u8], n: usize) {
    if ping {
        for _ in 0..n {
            ep.send(out, peer, 2, WORLD).expect("send");
        }
        ep.recv(&mut buf[..0], peer as i32, 3, WORLD).expect("ack");
    } else {
        for _ in 0..n {
            ep.recv(buf, peer as i32, 2, WORLD).expect("recv");
        }
        ep.send(&[], peer, 3, WORLD).expect("ack");
    }
}

fn cell(s: &Summary, digits: usize) -> String {
    format!("{:.d$} [{:.d$} .. {:.d$}]", s.median, s.min, s.max, d = digits)
}

fn report(
    sizes: &[usize],
    limit: &[f64],
    lat: &[Vec<f64>],
    bw: &[Vec<f64>],
    rate: &[Vec<f64>; 2],
    rounds: usize,
    (a, b): &(String, String),
) {
    let s = |v: &[f64]| Summary::of(v).expect("samples");
    println!("nemesis pingpong: 2 ranks pinned to CPUs {a} and {b}, {rounds} rounds, medians [min .. max]");
    println!("{:>8} {:>30} {:>34}", "bytes", "one-way latency, ns", "bandwidth, MB/s");
    for (k, &len) in sizes.iter().enumerate() {
        println!("{len:>8} {:>30} {:>34}", cell(&s(&lat[k]), 1), cell(&s(&bw[k]), 0));
    }
    let l = s(limit);
    println!("cache-line limit between the two cores: {} ns one-way", cell(&l, 1));
    if let Some(k) = sizes.iter().position(|&x| x == 8) {
        let ratio = ratio_of_rounds(&lat[k], limit).expect("ratios");
        println!("8-byte latency / cache-line limit, per round: {}", cell(&ratio, 2));
    }
    println!("8-byte message rate (windows of {WINDOW}), fastbox path: {} M msg/s", cell(&s(&rate[0]), 2));
    println!("8-byte message rate (windows of {WINDOW}), queue path:   {} M msg/s", cell(&s(&rate[1]), 2));
}
