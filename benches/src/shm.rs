//! Shared-memory core benchmarks: two processes pinned to two cores.
//!
//! - `shm-pingpong`: 8-byte one-way latency through a fastbox and through the cell queue, next to
//!   a raw cache-line ping-pong between the same cores (the hardware limit, measured as
//!   `shared/bench/cacheline_pingpong.c` does), interleaved round by round.
//! - `fastbox-compare`: a single-slot fastbox (NEMESIS) against a ring (Open MPI's design), for
//!   latency and message rate.
//! - `shm-cells`: streaming bandwidth through cells for several cell sizes (chooses the default).
//! - `segment-size`: segment bytes per rank at 8, 64 and 256 local ranks.
//!
//! The parent is rank 0 and times everything; the child (this binary, `__peer`) is rank 1 and
//! runs the same schedule, so no other synchronisation is needed.

use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::process::{Child, Command};
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::time::Instant;

use nemesis_shm::{Backing, Layout, MsgHeader, Params, Port, PortConfig, Segment, Sent};

use crate::pin;
use crate::stats::{Summary, interleave, ratio_of_rounds};

/// Which benchmark a peer runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum PeerKind {
    Pingpong,
    FastboxCompare,
    Cells,
}

/// Sizes and counts shared by parent and peer.
#[derive(Clone, Copy, Debug, clap::Args)]
pub struct Plan {
    /// Measured rounds (systems interleaved within each round).
    #[arg(long, default_value_t = 15)]
    pub rounds: usize,
    /// Round trips (or messages) per system per round.
    #[arg(long, default_value_t = 20_000)]
    pub iters: usize,
}

/// Parameters of the fastbox segment of `shm-pingpong` (the defaults).
fn fastbox_params() -> Params {
    Params::DEFAULT
}

/// Parameters of the queue-only segment: no fastboxes.
fn queue_params() -> Params {
    Params { fastboxes_per_rank: 0, ..Params::DEFAULT }
}

fn port_cfg() -> PortConfig {
    PortConfig { fastbox_after: 1, ..PortConfig::default() }
}

/// A page shared by both processes for the cache-line ping-pong.
struct Line {
    map: memmap2::MmapMut,
    fd: OwnedFd,
}

impl Line {
    fn new() -> Line {
        let fd = nemesis_shm::os::memfd("cacheline").expect("memfd");
        nemesis_shm::os::reserve(&fd, 4096).expect("reserve a page");
        Self::map(fd)
    }
    fn map(fd: OwnedFd) -> Line {
        // SAFETY: a 4096-byte memfd; only atomics are accessed through it.
        let map = unsafe { memmap2::MmapMut::map_mut(&fd) }.expect("mmap");
        Line { map, fd }
    }
    fn word(&self, i: usize) -> &AtomicU64 {
        // SAFETY: `i * 64 + 8 <= 4096` for the two words used; page-aligned mapping.
        unsafe { &*(self.map.as_ptr().add(64 * i) as *const AtomicU64) }
    }
}

/// One side of a cache-line ping-pong: the ping side writes `ping` and waits for `pong`, as
/// `cacheline_pingpong.c` does (no pause instruction, plain loads and stores).
fn cacheline(line: &Line, ping_side: bool, base: u64, n: usize) {
    let (ping, pong) = (line.word(0), line.word(1));
    for i in base + 1..=base + n as u64 {
        if ping_side {
            ping.store(i, Relaxed);
            while pong.load(Relaxed) != i {}
        } else {
            while ping.load(Relaxed) != i {}
            pong.store(i, Relaxed);
        }
    }
}

fn send(port: &mut Port<'_, Segment>, dst: u16, payload: &[u8]) {
    let hdr = MsgHeader::default();
    if let Sent::Pending(mut ps) = port.send(dst, &hdr, payload).expect("send") {
        while !port.resume(&mut ps, payload).expect("resume") {}
    }
}

/// Receives one whole message (all its fragments) into `buf`.
fn recv(port: &mut Port<'_, Segment>, src: u16, buf: &mut [u8]) {
    loop {
        if let Some(inc) = port.poll(&[src]).expect("poll") {
            let at = inc.offset().min(buf.len());
            inc.copy_to(&mut buf[at..]);
            let last = inc.is_last();
            port.release(inc).expect("release");
            if last {
                return;
            }
        }
    }
}

/// `n` round trips of `len`-byte messages through `port`.
fn port_pingpong(port: &mut Port<'_, Segment>, ping_side: bool, n: usize, len: usize) {
    let peer = 1 - port.rank();
    let out = vec![7u8; len];
    let mut buf = vec![0u8; len.max(1)];
    for _ in 0..n {
        if ping_side {
            send(port, peer, &out);
            recv(port, peer, &mut buf);
        } else {
            recv(port, peer, &mut buf);
            send(port, peer, &out);
        }
    }
}

/// `n` `len`-byte messages from the ping side, then one acknowledgement back: message rate or
/// bandwidth.
fn port_stream(port: &mut Port<'_, Segment>, ping_side: bool, n: usize, len: usize) {
    let peer = 1 - port.rank();
    let out = vec![7u8; len];
    let mut buf = vec![0u8; len.max(1)];
    if ping_side {
        for _ in 0..n {
            send(port, peer, &out);
        }
        recv(port, peer, &mut buf);
    } else {
        for _ in 0..n {
            recv(port, peer, &mut buf);
        }
        send(port, peer, &out[..0]);
    }
}

/// The segments and page a run shares with its peer.
struct Shared {
    segments: Vec<Segment>,
    line: Line,
}

impl Shared {
    fn create(params: &[Params]) -> Shared {
        Shared {
            segments: params
                .iter()
                .map(|p| {
                    let s = Segment::create(2, *p, Backing::Memfd).expect("segment");
                    s.watch_pids(false);
                    s
                })
                .collect(),
            line: Line::new(),
        }
    }

    fn fds(&self) -> Vec<RawFd> {
        let mut v: Vec<RawFd> = self.segments.iter().map(|s| s.inheritable_fd().expect("fd")).collect();
        nemesis_shm::os::inheritable(&self.line.fd).expect("fd");
        v.push(self.line.fd.as_raw_fd());
        v
    }

    /// The peer's view: attaches to the descriptors it inherited.
    fn attach(fds: &[RawFd]) -> Shared {
        let (line, segs) = fds.split_last().expect("descriptors");
        // SAFETY: descriptors inherited from the parent, used only through these objects.
        let own = |fd: RawFd| unsafe { OwnedFd::from_raw_fd(fd) };
        let segments = segs
            .iter()
            .map(|&fd| {
                let s = Segment::attach_fd(own(fd)).expect("attach");
                s.watch_pids(false);
                s
            })
            .collect();
        Shared { segments, line: Line::map(own(*line)) }
    }
}

fn spawn_peer(kind: PeerKind, plan: &Plan, fds: &[RawFd], cpu: usize, extra: &[String]) -> Child {
    let fds: Vec<String> = fds.iter().map(|f| f.to_string()).collect();
    Command::new(std::env::current_exe().expect("own path"))
        .arg("__peer")
        .arg(format!("{kind:?}").to_lowercase().replace("fastboxcompare", "fastbox-compare"))
        .args(["--rounds", &plan.rounds.to_string(), "--iters", &plan.iters.to_string()])
        .args(["--cpu", &cpu.to_string(), "--fds", &fds.join(",")])
        .args(extra)
        .spawn()
        .expect("spawn peer")
}

/// Runs `k` systems interleaved for `plan.rounds` rounds (after one warm-up round at a tenth of
/// the iterations): `run(system, ping_side, base, iterations)`. On the ping side, returns each
/// system's per-round time per iteration, in ns.
fn rounds(plan: &Plan, ping_side: bool, k: usize, mut run: impl FnMut(usize, bool, u64, usize)) -> Vec<Vec<f64>> {
    let warm = (plan.iters / 10).max(1);
    let mut base = 0u64;
    for s in 0..k {
        run(s, ping_side, base, warm);
        base += warm as u64;
    }
    let mut out = vec![vec![0.0; plan.rounds]; k];
    for (r, s) in interleave(k, plan.rounds) {
        let t = Instant::now();
        run(s, ping_side, base, plan.iters);
        out[s][r] = t.elapsed().as_nanos() as f64 / plan.iters as f64;
        base += plan.iters as u64;
    }
    out
}

/// The shm-pingpong schedule, run by both sides.
fn pingpong_schedule(sh: &Shared, me: u16, plan: &Plan) -> Vec<Vec<f64>> {
    let mut fb = Port::new(&sh.segments[0], me, port_cfg()).expect("port");
    let mut q = Port::new(&sh.segments[1], me, port_cfg()).expect("port");
    rounds(plan, me == 0, 3, |s, ping, base, n| match s {
        0 => cacheline(&sh.line, ping, base, n),
        1 => port_pingpong(&mut fb, ping, n, 8),
        _ => port_pingpong(&mut q, ping, n, 8),
    })
}

fn fmt(s: &Summary) -> String {
    format!("{:8.1} [{:.1} .. {:.1}]", s.median, s.min, s.max)
}

/// `nemesis-bench shm-pingpong`.
pub fn pingpong(plan: &Plan) {
    let (a, b) = pin::pair();
    let sh = Shared::create(&[fastbox_params(), queue_params()]);
    let mut child = spawn_peer(PeerKind::Pingpong, plan, &sh.fds(), b, &[]);
    pin::pin(a).expect("pin");
    println!("shm-pingpong: 8-byte messages, cores {a} and {b}, {} rounds of {} round trips", plan.rounds, plan.iters);
    let t = pingpong_schedule(&sh, 0, plan);
    assert!(child.wait().expect("peer").success(), "peer failed");
    // Times are per round trip: one-way is half.
    let one_way: Vec<Vec<f64>> = t.iter().map(|v| v.iter().map(|x| x / 2.0).collect()).collect();
    let [line, fb, q] = [0, 1, 2].map(|i| Summary::of(&one_way[i]).expect("samples"));
    println!("one-way latency, ns (median [min .. max]):");
    println!("  cache-line limit {}", fmt(&line));
    println!("  fastbox          {}", fmt(&fb));
    println!("  queue            {}", fmt(&q));
    let ratio = ratio_of_rounds(&one_way[1], &one_way[0]).expect("ratios");
    let qratio = ratio_of_rounds(&one_way[2], &one_way[0]).expect("ratios");
    println!("  fastbox/limit per round: {}", fmt(&ratio));
    println!("  queue/limit per round:   {}", fmt(&qratio));
    println!(
        "fastbox {:.0} ns, queue {:.0} ns, cache-line limit {:.0} ns, fastbox/limit {:.2}",
        fb.median, q.median, line.median, ratio.median
    );
}

/// Parameters compared by `fastbox-compare`: one slot (NEMESIS) and rings.
fn compare_params() -> Vec<(String, Params)> {
    [(1, 256), (4, 256), (8, 256), (16, 256)]
        .into_iter()
        .map(|(slots, size)| {
            let name = if slots == 1 { format!("single slot ({size} B)") } else { format!("ring {slots} x {size} B") };
            (name, Params { fastbox_slots: slots, fastbox_slot_size: size, ..Params::DEFAULT })
        })
        .collect()
}

fn compare_schedule(sh: &Shared, me: u16, plan: &Plan) -> Vec<Vec<f64>> {
    let mut ports: Vec<Port<'_, Segment>> =
        sh.segments.iter().map(|s| Port::new(s, me, port_cfg()).expect("port")).collect();
    let n = ports.len();
    // Latency of every variant, then rate of every variant.
    rounds(plan, me == 0, 2 * n, |s, ping, _, it| {
        if s < n { port_pingpong(&mut ports[s], ping, it, 8) } else { port_stream(&mut ports[s - n], ping, it, 8) }
    })
}

/// `nemesis-bench fastbox-compare`.
pub fn fastbox_compare(plan: &Plan) {
    let (a, b) = pin::pair();
    let variants = compare_params();
    let sh = Shared::create(&variants.iter().map(|v| v.1).collect::<Vec<_>>());
    let mut child = spawn_peer(PeerKind::FastboxCompare, plan, &sh.fds(), b, &[]);
    pin::pin(a).expect("pin");
    println!("fastbox-compare: 8-byte messages, cores {a} and {b}, {} rounds of {}", plan.rounds, plan.iters);
    let t = compare_schedule(&sh, 0, plan);
    assert!(child.wait().expect("peer").success(), "peer failed");
    let n = variants.len();
    println!("{:<22} {:>28} {:>30}", "fastbox", "one-way latency, ns", "message rate, Mmsg/s");
    for (i, (name, _)) in variants.iter().enumerate() {
        let lat = Summary::of(&t[i].iter().map(|x| x / 2.0).collect::<Vec<_>>()).expect("samples");
        let rate = Summary::of(&t[n + i].iter().map(|x| 1e3 / x).collect::<Vec<_>>()).expect("samples");
        println!(
            "{name:<22} {:>28} {:>30}",
            fmt(&lat),
            format!("{:.2} [{:.2} .. {:.2}]", rate.median, rate.min, rate.max)
        );
    }
}

/// Cell sizes compared by `shm-cells`, with message sizes streamed through them.
const CELL_SIZES: [u32; 5] = [4096, 8192, 16384, 32768, 65536];
const STREAM_SIZES: [usize; 4] = [4096, 16384, 65536, 262144];

fn cells_params() -> Vec<Params> {
    // Same pool memory for each cell size: 1 MiB per rank (MPICH CH4: 64 x 16 KiB).
    CELL_SIZES
        .iter()
        .map(|&c| Params { cell_size: c, cells_per_rank: (1 << 20) / c, fastboxes_per_rank: 0, ..Params::DEFAULT })
        .collect()
}

fn cells_schedule(sh: &Shared, me: u16, plan: &Plan) -> Vec<Vec<f64>> {
    let mut ports: Vec<Port<'_, Segment>> =
        sh.segments.iter().map(|s| Port::new(s, me, port_cfg()).expect("port")).collect();
    let nc = ports.len();
    rounds(plan, me == 0, STREAM_SIZES.len() * nc, |s, ping, _, _| {
        let len = STREAM_SIZES[s / nc];
        port_stream(&mut ports[s % nc], ping, stream_count(plan, len), len)
    })
}

/// Messages of `len` bytes streamed per round: about `plan.iters` 4 KiB worth.
fn stream_count(plan: &Plan, len: usize) -> usize {
    (plan.iters / (len / 4096).max(1)).max(8)
}

/// `nemesis-bench shm-cells`.
pub fn cells(plan: &Plan) {
    let (a, b) = pin::pair();
    let params = cells_params();
    let sh = Shared::create(&params);
    let mut child = spawn_peer(PeerKind::Cells, plan, &sh.fds(), b, &[]);
    pin::pin(a).expect("pin");
    println!("shm-cells: streaming through cells (1 MiB pool per rank), cores {a} and {b}, {} rounds", plan.rounds);
    let t = cells_schedule(&sh, 0, plan);
    assert!(child.wait().expect("peer").success(), "peer failed");
    print!("{:>10}", "message");
    for c in CELL_SIZES {
        print!("{:>22}", format!("cell {} KiB, GB/s", c / 1024));
    }
    println!();
    for (mi, &len) in STREAM_SIZES.iter().enumerate() {
        print!("{:>10}", len);
        for ci in 0..CELL_SIZES.len() {
            let n = stream_count(plan, len);
            // Time per "iteration" is the whole stream divided by plan.iters.
            let gbs: Vec<f64> =
                t[mi * CELL_SIZES.len() + ci].iter().map(|x| (len * n) as f64 / (x * plan.iters as f64)).collect();
            let s = Summary::of(&gbs).expect("samples");
            print!("{:>22}", format!("{:.2} [{:.2}..{:.2}]", s.median, s.min, s.max));
        }
        println!();
    }
}

/// `nemesis-bench segment-size`: the memory budget.
pub fn segment_size() {
    let p = Params::DEFAULT;
    println!(
        "segment bytes per local rank, default parameters ({} cells x {} KiB, {} fastboxes of {} x {} B per receiver):",
        p.cells_per_rank,
        p.cell_size / 1024,
        p.fastboxes_per_rank,
        p.fastbox_slots,
        p.fastbox_slot_size
    );
    println!(
        "{:>6} {:>16} {:>18} {:>16} {:>30}",
        "ranks", "bytes/rank", "fastbox bytes/rank", "segment total", "64 KiB box per pair, bytes/rank"
    );
    for ranks in [8u16, 64, 256] {
        let l = Layout::new(ranks, p).expect("layout");
        println!(
            "{ranks:>6} {:>16} {:>18} {:>16} {:>30}",
            l.bytes_per_rank(),
            l.fastbox_bytes_per_rank(),
            l.total,
            65536 * (u64::from(ranks) - 1)
        );
    }
}

/// The peer side of every two-process benchmark.
pub fn peer(kind: PeerKind, plan: &Plan, cpu: usize, fds: &[RawFd]) {
    pin::pin(cpu).expect("pin");
    let sh = Shared::attach(fds);
    match kind {
        PeerKind::Pingpong => {
            pingpong_schedule(&sh, 1, plan);
        }
        PeerKind::FastboxCompare => {
            compare_schedule(&sh, 1, plan);
        }
        PeerKind::Cells => {
            cells_schedule(&sh, 1, plan);
        }
    }
}
