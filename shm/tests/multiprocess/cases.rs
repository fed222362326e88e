//! The cases of `multiprocess.rs` (not under loom).

use std::os::fd::{FromRawFd, OwnedFd, RawFd};
use std::os::unix::process::ExitStatusExt;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicU64, Ordering::*};
use std::time::{Duration, Instant};

use nemesis_shm::{Backing, Error, MsgHeader, Node, Params, PeerEvent, Port, PortConfig, QueueKind, Segment, Sent};

/// Small cells and boxes, so that a test run mixes every path: fastbox, one cell, several cells,
/// pending sends, senders without a fastbox (more senders than boxes).
fn params() -> Params {
    Params {
        cell_size: 1024,
        cells_per_rank: 16,
        fastbox_slots: 4,
        fastbox_slot_size: 256,
        fastboxes_per_rank: 4,
        ..Params::DEFAULT
    }
}

fn port_cfg() -> PortConfig {
    PortConfig { fastbox_after: 8, scan_every: 16, check_every: 256 }
}

fn stress() -> bool {
    std::env::var("NEMESIS_STRESS").is_ok_and(|v| v != "0")
}

/// Deterministic pseudo-random bytes for message `i` of producer `p`.
fn message(p: u16, i: u32, len: usize) -> Vec<u8> {
    let mut x = (u64::from(p) << 32 | u64::from(i)).wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1;
    (0..len)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x as u8
        })
        .collect()
}

/// The size of message `i` of producer `p`: half fit a fastbox, most of the rest one or two cells,
/// some up to eight cells.
fn size(p: u16, i: u32) -> usize {
    let r = (u64::from(p) * 7919 + u64::from(i)).wrapping_mul(0x2545_f491_4f6c_dd1d) >> 40;
    match r % 10 {
        0..=4 => (r % 200) as usize,
        5..=8 => (r % 2000) as usize,
        _ => (r % 8000) as usize,
    }
}

/// A page of counters shared with the children: `[p]` = messages producer p fully handed over
/// (`[0]`: messages the slow consumer took). The test kills a child once its count is reached.
struct Stats {
    map: memmap2::MmapMut,
    fd: OwnedFd,
}

impl Stats {
    fn new() -> Stats {
        let fd = nemesis_shm::os::memfd("stats").unwrap();
        nemesis_shm::os::reserve(&fd, 4096).unwrap();
        // SAFETY: a fresh memfd of 4096 bytes; only AtomicU64 accesses are made through it.
        let map = unsafe { memmap2::MmapMut::map_mut(&fd) }.unwrap();
        Stats { map, fd }
    }
    fn attach(fd: RawFd) -> Stats {
        // SAFETY: the parent passed us this descriptor.
        let fd = unsafe { OwnedFd::from_raw_fd(fd) };
        // SAFETY: as in `new`.
        let map = unsafe { memmap2::MmapMut::map_mut(&fd) }.unwrap();
        Stats { map, fd }
    }
    fn get(&self, i: usize) -> &AtomicU64 {
        assert!(i < 512);
        // SAFETY: in bounds and 8-aligned in a page-aligned mapping.
        unsafe { &*(self.map.as_ptr().add(8 * i) as *const AtomicU64) }
    }
}

/// What a child is to do.
#[derive(Clone, Copy, Debug)]
enum Role {
    Consumer,
    Producer {
        messages: u32,
    },
    /// Sends to the consumer until it dies, then must get all its cells back.
    ProducerUntilDeath,
    /// Consumes for a while without end (it is killed).
    SlowConsumer,
}

impl Role {
    fn encode(self) -> String {
        match self {
            Role::Consumer => "consumer".into(),
            Role::Producer { messages } => format!("producer:{messages}"),
            Role::ProducerUntilDeath => "until-death".into(),
            Role::SlowConsumer => "slow-consumer".into(),
        }
    }
    fn decode(s: &str) -> Role {
        match s.split_once(':') {
            Some(("producer", n)) => Role::Producer { messages: n.parse().unwrap() },
            _ if s == "consumer" => Role::Consumer,
            _ if s == "until-death" => Role::ProducerUntilDeath,
            _ if s == "slow-consumer" => Role::SlowConsumer,
            _ => panic!("unknown role {s}"),
        }
    }
}

pub fn main() {
    crate::harness::main(
        || if std::env::var_os("NEMESIS_TEST_CORRUPT_FD").is_some() { corrupter() } else { child() },
        crate::tests![
            one_consumer_seven_producers,
            producers_killed_mid_stream,
            consumer_killed_gives_cells_back,
            corruption_is_detected,
            bad_headers_are_typed_errors,
        ],
    );
}

/// A child process in the role `NEMESIS_TEST_ROLE`.
fn child() {
    let role = std::env::var("NEMESIS_TEST_ROLE").expect("NEMESIS_TEST_ROLE");
    let code = match run_child(Role::decode(&role)) {
        Ok(()) => 0,
        Err(msg) => {
            println!("CHILD-ERROR {msg}");
            1
        }
    };
    std::process::exit(code);
}

fn env_num<T: std::str::FromStr>(k: &str) -> T {
    std::env::var(k).ok().and_then(|v| v.parse().ok()).unwrap_or_else(|| panic!("{k} missing"))
}

fn run_child(role: Role) -> Result<(), String> {
    // SAFETY: the parent made this descriptor inheritable for us and does not use our copy.
    let fd = unsafe { OwnedFd::from_raw_fd(env_num::<RawFd>("NEMESIS_TEST_FD")) };
    let seg = Segment::attach_fd(fd).map_err(|e| e.to_string())?;
    if std::env::var("NEMESIS_TEST_NO_PIDFD").is_ok() {
        seg.watch_pids(false);
    }
    let rank: u16 = env_num("NEMESIS_TEST_RANK");
    seg.register(rank).map_err(|e| e.to_string())?;
    let stats = Stats::attach(env_num("NEMESIS_TEST_STATS_FD"));
    let mut port = Port::new(&seg, rank, port_cfg()).map_err(|e| e.to_string())?;
    match role {
        Role::Consumer => consume(&seg, &mut port, &stats),
        Role::SlowConsumer => loop {
            if let Some(inc) = port.poll(&[]).map_err(|e| e.to_string())? {
                port.release(inc).map_err(|e| e.to_string())?;
                stats.get(0).fetch_add(1, Release);
            }
            std::thread::sleep(Duration::from_micros(50));
        },
        Role::Producer { messages } => produce(&mut port, &stats, messages),
        Role::ProducerUntilDeath => produce_until_death(&seg, &mut port),
    }
}

fn produce(port: &mut Port<'_, Segment>, stats: &Stats, messages: u32) -> Result<(), String> {
    let p = port.rank();
    let mut backoff = nemesis_shm::sync::Backoff::new();
    for i in 0..messages {
        let payload = message(p, i, size(p, i));
        let hdr = MsgHeader { tag: i as i32, context: u32::from(p), ..MsgHeader::default() };
        if let Sent::Pending(mut ps) = port.send(0, &hdr, None, &payload).map_err(|e| e.to_string())? {
            while !port.resume(&mut ps, &payload).map_err(|e| e.to_string())? {
                port.poll(&[]).map_err(|e| e.to_string())?;
                backoff.snooze();
            }
            backoff.reset();
        }
        stats.get(usize::from(p)).store(u64::from(i) + 1, Release);
    }
    Ok(())
}

fn produce_until_death(seg: &Segment, port: &mut Port<'_, Segment>) -> Result<(), String> {
    let p = port.rank();
    let mut i = 0u32;
    let dead = 'send: loop {
        let payload = message(p, i, size(p, i));
        let hdr = MsgHeader { tag: i as i32, ..MsgHeader::default() };
        let mut pending = match port.send(0, &hdr, None, &payload) {
            Ok(Sent::Done) => None,
            Ok(Sent::Pending(ps)) => Some(ps),
            Err(Error::PeerDead { .. }) => break 'send true,
            Err(e) => return Err(e.to_string()),
        };
        while let Some(ps) = &mut pending {
            match port.resume(ps, &payload) {
                Ok(true) => pending = None,
                Ok(false) => {
                    port.check_peers().map_err(|e| e.to_string())?;
                    std::thread::yield_now();
                }
                Err(Error::PeerDead { .. }) => break 'send true,
                Err(e) => return Err(e.to_string()),
            }
        }
        i += 1;
    };
    assert!(dead);
    let deadline = Instant::now() + Duration::from_secs(60);
    let want = seg.params().cells_per_rank as usize;
    loop {
        port.check_peers().map_err(|e| e.to_string())?;
        let free = port.free_cells().map_err(|e| e.to_string())?;
        if free == want {
            println!("RESULT producer {p} sent {i} and got all {want} cells back");
            return Ok(());
        }
        if Instant::now() > deadline {
            return Err(format!("producer {p}: only {free} of {want} cells came back"));
        }
        std::thread::sleep(Duration::from_millis(1));
    }
}

/// Reassembles and checks every message; returns once every producer is gone and drained.
fn consume(seg: &Segment, port: &mut Port<'_, Segment>, stats: &Stats) -> Result<(), String> {
    let n = seg.ranks();
    let producers: Vec<u16> = (1..n).collect();
    let mut next = vec![0u32; n as usize];
    let mut partial: Vec<Option<Vec<u8>>> = vec![None; n as usize];
    let mut dropped = 0usize;
    let mut fastboxed = 0usize;
    let mut multi = 0usize;
    let mut idle = 0u32;
    let mut backoff = nemesis_shm::sync::Backoff::new();
    loop {
        match port.poll(&producers).map_err(|e| format!("poll: {e}"))? {
            Some(inc) => {
                idle = 0;
                backoff.reset();
                let p = inc.src;
                if inc.header().context != u32::from(p) || inc.header().tag as u32 != next[p as usize] {
                    return Err(format!(
                        "producer {p}: got message {} (context {}), expected {}",
                        inc.header().tag,
                        inc.header().context,
                        next[p as usize]
                    ));
                }
                let buf = partial[p as usize].get_or_insert_with(|| vec![0; inc.header().len as usize]);
                if inc.offset() + inc.frag_len() > buf.len() {
                    return Err(format!("producer {p}: fragment past the message"));
                }
                inc.copy_to(&mut buf[inc.offset()..]);
                fastboxed += usize::from(inc.via_fastbox());
                multi += usize::from(inc.offset() > 0);
                let last = inc.is_last();
                port.release(inc).map_err(|e| e.to_string())?;
                if last {
                    let got = partial[p as usize].take().unwrap_or_default();
                    let i = next[p as usize];
                    if got != message(p, i, size(p, i)) {
                        return Err(format!("producer {p}: message {i} corrupt ({} bytes)", got.len()));
                    }
                    next[p as usize] += 1;
                }
            }
            None => {
                for ev in port.take_events() {
                    if let PeerEvent::PartialDropped { rank, .. } = ev {
                        partial[rank as usize] = None;
                        dropped += 1;
                    }
                }
                if producers.iter().all(|&p| seg.is_gone(p)) {
                    idle += 1;
                    port.check_peers().map_err(|e| e.to_string())?;
                    if idle > 2000 && port.scan_fastboxes().map_err(|e| e.to_string())?.is_none() {
                        let (empty, _) = seg.recv_queue(port.rank()).empty_gen();
                        if empty {
                            break;
                        }
                    }
                    if idle > 200_000 {
                        return Err("queue never drained".into());
                    }
                } else {
                    backoff.snooze();
                }
            }
        }
    }
    let mut total = 0u64;
    for &p in &producers {
        let done = stats.get(usize::from(p)).load(Acquire);
        let got = u64::from(next[p as usize]);
        // A producer killed between completing a message and recording it has one more.
        if got != done && got != done + 1 {
            return Err(format!("producer {p}: received {got} messages, it completed {done}"));
        }
        if partial[p as usize].is_some() {
            return Err(format!("producer {p}: a partial message was neither completed nor dropped"));
        }
        total += got;
    }
    println!("RESULT consumer received={total} fastbox={fastboxed} multi-cell={multi} dropped-partials={dropped}");
    Ok(())
}

/// The launcher side.
struct Job {
    seg: Segment,
    stats: Stats,
    children: Vec<(u16, Child)>,
}

impl Job {
    fn new(ranks: u16) -> Job {
        Job { seg: Segment::create(ranks, params(), Backing::Memfd).unwrap(), stats: Stats::new(), children: vec![] }
    }

    fn spawn(&mut self, rank: u16, role: Role, extra: &[(&str, &str)]) {
        let fd = self.seg.inheritable_fd().unwrap();
        let sfd = std::os::fd::AsRawFd::as_raw_fd(&self.stats.fd);
        nemesis_shm::os::inheritable(&self.stats.fd).unwrap();
        let mut cmd = Command::new(std::env::current_exe().unwrap());
        cmd.arg(crate::harness::RANK_ARG)
            .env("NEMESIS_TEST_ROLE", role.encode())
            .env("NEMESIS_TEST_FD", fd.to_string())
            .env("NEMESIS_TEST_STATS_FD", sfd.to_string())
            .env("NEMESIS_TEST_RANK", rank.to_string())
            .stdout(Stdio::piped());
        for (k, v) in extra {
            cmd.env(k, v);
        }
        self.children.push((rank, cmd.spawn().unwrap()));
    }

    fn kill(&mut self, rank: u16) {
        let (_, c) = self.children.iter_mut().find(|(r, _)| *r == rank).unwrap();
        let _ = c.kill();
    }

    /// Waits until counter `slot` of [`Stats`] reaches `n` (a child that cannot end by itself
    /// reports its progress there), then kills `rank`.
    fn kill_at(&mut self, rank: u16, slot: usize, n: u64) {
        let t = Instant::now();
        while self.stats.get(slot).load(Acquire) < n {
            if let Some((_, c)) = self.children.iter_mut().find(|(r, _)| *r == rank)
                && let Some(st) = c.try_wait().unwrap()
            {
                panic!("rank {rank} ended ({st}) before its count {n}");
            }
            assert!(t.elapsed() < Duration::from_secs(120), "counter {slot} never reached {n}");
            std::thread::sleep(Duration::from_millis(1));
        }
        self.kill(rank);
    }

    /// Waits for every child, marking each GONE when it ends (unless `mark` is false: then peers
    /// must learn of deaths through pidfds). Returns each child's status and output.
    fn wait(mut self, mark: bool, limit: Duration) -> Vec<(u16, std::process::ExitStatus, String)> {
        let deadline = Instant::now() + limit;
        let mut done = Vec::new();
        while !self.children.is_empty() {
            let mut i = 0;
            while i < self.children.len() {
                if let Some(st) = self.children[i].1.try_wait().unwrap() {
                    let (rank, mut child) = self.children.swap_remove(i);
                    if mark {
                        self.seg.mark_gone(rank, st.into_raw() as u32).unwrap();
                    }
                    let mut out = String::new();
                    std::io::Read::read_to_string(child.stdout.as_mut().unwrap(), &mut out).unwrap();
                    done.push((rank, st, out));
                } else {
                    i += 1;
                }
            }
            if Instant::now() > deadline {
                for (_, c) in &mut self.children {
                    let _ = c.kill();
                }
                panic!(
                    "children still running after {limit:?}: {:?}",
                    self.children.iter().map(|c| c.0).collect::<Vec<_>>()
                );
            }
            std::thread::sleep(Duration::from_millis(2));
        }
        done.sort_by_key(|d| d.0);
        done
    }
}

/// The child's `RESULT` or `CHILD-ERROR` line.
fn result_line(out: &str) -> &str {
    out.lines().find_map(|l| l.find("RESULT").or_else(|| l.find("CHILD-ERROR")).map(|i| &l[i..])).unwrap_or(out)
}

fn assert_consumer_ok(done: &[(u16, std::process::ExitStatus, String)]) -> String {
    let (_, st, out) = &done[0];
    assert!(st.success(), "consumer failed: {} ({st})", result_line(out));
    result_line(out).to_owned()
}

fn one_consumer_seven_producers() {
    let per = if stress() { 1_000_000 / 7 } else { 1_500 };
    let mut job = Job::new(8);
    job.spawn(0, Role::Consumer, &[]);
    for p in 1..8 {
        job.spawn(p, Role::Producer { messages: per }, &[]);
    }
    let done = job.wait(true, Duration::from_secs(if stress() { 1800 } else { 300 }));
    let summary = assert_consumer_ok(&done);
    for (r, st, out) in &done[1..] {
        assert!(st.success(), "producer {r}: {}", result_line(out));
    }
    eprintln!("{summary}");
    assert!(summary.contains(&format!("received={}", 7 * per)), "{summary}");
    assert!(!summary.contains("fastbox=0 "), "fastboxes were used: {summary}");
    assert!(!summary.contains("multi-cell=0 "), "multi-cell messages were sent: {summary}");
}

/// Producers are killed with SIGKILL mid-stream, repeatedly: three that never end by themselves,
/// each once it has handed over a random number of messages (at a random point of the ones after);
/// the consumer receives every message each completed, drops their partial messages, and gets
/// everything the live ones send.
fn producers_killed_mid_stream() {
    let rounds = if stress() { 20 } else { 3 };
    for round in 0..rounds {
        let per = if stress() { 20_000 } else { 1_500 };
        let victims = [1u16, 3, 4];
        let mut job = Job::new(6);
        job.spawn(0, Role::Consumer, &[]);
        for p in 1..6 {
            let messages = if victims.contains(&p) { u32::MAX } else { per };
            job.spawn(p, Role::Producer { messages }, &[]);
        }
        let seed = nemesis_shm::os::random_u64().unwrap();
        for (k, p) in victims.into_iter().enumerate() {
            job.kill_at(p, usize::from(p), 1 + (seed >> (16 * k)) % u64::from(per / 2));
        }
        let done = job.wait(true, Duration::from_secs(300));
        let summary = assert_consumer_ok(&done);
        eprintln!("round {round}: {summary}");
        for (r, st, out) in &done[1..] {
            if victims.contains(r) {
                assert_eq!(st.signal(), Some(9), "producer {r}: {st}");
            } else {
                assert!(st.success(), "producer {r}: {}", result_line(out));
            }
        }
    }
}

/// The consumer is killed mid-stream (once it has taken 100 messages): the producers (and the
/// drain one of them runs) give every cell back to its owner, marks from the launcher or, without
/// them, pidfds.
fn consumer_killed_gives_cells_back() {
    for mark in [true, false] {
        let mut job = Job::new(4);
        // With marks, pidfd watching is off so that the marks alone must do.
        let extra: &[(&str, &str)] = if mark { &[("NEMESIS_TEST_NO_PIDFD", "1")] } else { &[] };
        job.spawn(0, Role::SlowConsumer, extra);
        for p in 1..4 {
            job.spawn(p, Role::ProducerUntilDeath, extra);
        }
        job.kill_at(0, 0, 100);
        let done = job.wait(mark, Duration::from_secs(120));
        assert_eq!(done[0].1.signal(), Some(9));
        for (r, st, out) in &done[1..] {
            assert!(st.success(), "producer {r} (marks: {mark}): {}", result_line(out));
            assert!(result_line(out).contains("got all 16 cells back"), "{}", result_line(out));
        }
    }
}

/// Has a separate, hostile process write `(offset, value)` words into the segment.
fn corrupt(seg: &Segment, writes: &[(usize, u64)]) {
    let fd = seg.inheritable_fd().unwrap();
    let spec: Vec<String> = writes.iter().map(|(o, v)| format!("{o}:{v}")).collect();
    let status = Command::new(std::env::current_exe().unwrap())
        .arg(crate::harness::RANK_ARG)
        .env("NEMESIS_TEST_CORRUPT_FD", fd.to_string())
        .env("NEMESIS_TEST_CORRUPT", spec.join(","))
        .status()
        .unwrap();
    assert!(status.success());
}

/// The hostile process: writes the words of `NEMESIS_TEST_CORRUPT` into the segment.
fn corrupter() {
    let fd = std::env::var("NEMESIS_TEST_CORRUPT_FD").unwrap();
    // SAFETY: the parent passed this descriptor.
    let seg = Segment::attach_fd(unsafe { OwnedFd::from_raw_fd(fd.parse().unwrap()) }).unwrap();
    for w in std::env::var("NEMESIS_TEST_CORRUPT").unwrap().split(',') {
        let (o, v) = w.split_once(':').unwrap();
        let (o, v): (usize, u64) = (o.parse().unwrap(), v.parse().unwrap());
        assert!(o + 8 <= seg.len());
        // SAFETY: inside the mapping (checked); this process is the hostile one on purpose.
        unsafe { (seg.base_ptr().add(o) as *mut u64).write_volatile(v) };
    }
    std::process::exit(0);
}

/// Another process corrupts queue words, cell links, fastbox owners and lengths; the victim gets
/// [`Error::Corrupt`], never an out-of-bounds access or a crash.
fn corruption_is_detected() {
    // Queue `index` as the node numbers them: 2r the receive queue of rank r, 2r + 1 its free queue.
    let queue_off = |seg: &Segment, index: usize| {
        let kind = if index.is_multiple_of(2) { QueueKind::Recv } else { QueueKind::Free };
        seg.layout().queue_off((index / 2) as u16, kind) as usize
    };
    let cell_off = |seg: &Segment, h: u32| seg.layout().cells_off as usize + (h as usize - 1) * 1024;
    let setup = || {
        let seg = Segment::create(3, params(), Backing::Memfd).unwrap();
        seg.watch_pids(false);
        seg
    };
    let is_corrupt = |r: Result<_, Error>| matches!(r, Err(Error::Corrupt { .. }));

    // A cell's `next` pointing outside the arena.
    let seg = setup();
    let (mut a, mut b) = (Port::new(&seg, 0, port_cfg()).unwrap(), Port::new(&seg, 1, port_cfg()).unwrap());
    for i in 0..3 {
        assert!(matches!(a.send(1, &MsgHeader::default(), None, &[i]).unwrap(), Sent::Done));
    }
    corrupt(&seg, &[(cell_off(&seg, 1), 0x0FFF_FFFF)]);
    // The first message is delivered; the link behind it is checked before it is followed.
    let first = b.poll(&[0]).unwrap().unwrap();
    b.release(first).unwrap();
    assert!(is_corrupt(b.poll(&[0]).map(|_| ())), "next link");

    // The free queue's tail (garbage handle): the return path fails cleanly.
    let seg = setup();
    let (mut a, mut b) = (Port::new(&seg, 0, port_cfg()).unwrap(), Port::new(&seg, 1, port_cfg()).unwrap());
    assert!(matches!(a.send(1, &MsgHeader::default(), None, &[1]).unwrap(), Sent::Done));
    let inc = b.poll(&[0]).unwrap().unwrap();
    corrupt(&seg, &[(queue_off(&seg, 1) + 8, 1 << 32 | 0x7FFF_FFF0)]);
    assert!(is_corrupt(b.release(inc)), "free-queue tail");

    // The receive queue's head.
    let seg = setup();
    let mut b = Port::new(&seg, 1, port_cfg()).unwrap();
    corrupt(&seg, &[(queue_off(&seg, 2), 0xFFFF_FF00)]);
    assert!(is_corrupt(b.poll(&[]).map(|_| ())), "head");

    // A cell's header length (a fragment index past the message).
    let seg = setup();
    let (mut a, mut b) = (Port::new(&seg, 0, port_cfg()).unwrap(), Port::new(&seg, 1, port_cfg()).unwrap());
    assert!(matches!(a.send(1, &MsgHeader::default(), None, &[1, 2, 3]).unwrap(), Sent::Done));
    // frag (u16 at header offset 24) = 50 while len (at 16) = 3.
    corrupt(&seg, &[(cell_off(&seg, 1) + 16 + 24, 50)]);
    assert!(is_corrupt(b.poll(&[0]).map(|_| ())), "fragment index");

    // A fastbox owner naming a rank that does not exist.
    let seg = setup();
    let mut b = Port::new(&seg, 1, port_cfg()).unwrap();
    let box0 = seg.layout().fbox_off as usize + seg.layout().fbox_bytes as usize * 4; // rank 1, box 0
    corrupt(&seg, &[(box0, 999)]);
    assert!(is_corrupt(b.scan_fastboxes().map(|_| ())), "fastbox owner");

    // A fastbox slot whose length exceeds the slot, from a legitimately claimed box.
    let seg = setup();
    let (mut a, mut b) = (Port::new(&seg, 0, port_cfg()).unwrap(), Port::new(&seg, 1, port_cfg()).unwrap());
    for i in 0..7 {
        assert!(matches!(a.send(1, &MsgHeader::default(), None, &[i]).unwrap(), Sent::Done));
        let inc = b.poll(&[0]).unwrap().unwrap();
        b.release(inc).unwrap();
    }
    // The eighth message claims a box (`fastbox_after`) and goes into its slot 0.
    assert!(matches!(a.send(1, &MsgHeader::default(), None, &[9]).unwrap(), Sent::Done));
    let slot0 = box0 + 128; // after the owner and ack lines
    corrupt(&seg, &[(slot0 + 8 + 16, 1 << 20)]);
    assert!(is_corrupt(b.poll(&[0]).map(|_| ())), "fastbox length");
}

/// Attaching to a segment whose header does not match gives typed errors.
fn bad_headers_are_typed_errors() {
    let fresh = || Segment::create(2, params(), Backing::Memfd).unwrap();
    let reopen = |s: &Segment| {
        // SAFETY: dup of a descriptor we own.
        let fd = unsafe { libc_dup(s.fd()) };
        Segment::attach_fd(fd)
    };
    let s = fresh();
    assert!(reopen(&s).is_ok());
    s.expect(2, &params()).unwrap();
    assert!(matches!(s.expect(3, &params()), Err(Error::LayoutMismatch { .. })));
    type IsExpected = fn(&Error) -> bool;
    let cases: [(usize, u64, IsExpected); 4] = [
        (0, 0x1234, |e| matches!(e, Error::BadMagic { .. })),
        (8, 999, |e| matches!(e, Error::VersionMismatch { .. })),
        (16, 0xdead, |e| matches!(e, Error::LayoutMismatch { .. })),
        (24, 12345, |e| matches!(e, Error::SizeMismatch { .. })),
    ];
    for (off, val, ok) in cases {
        let s = fresh();
        // SAFETY: header words inside the mapping; the magic at 0, version (u32) at 8, hash at 16,
        // total at 24.
        unsafe {
            if off == 8 {
                (s.base_ptr().add(off) as *mut u32).write_volatile(val as u32);
            } else {
                (s.base_ptr().add(off) as *mut u64).write_volatile(val);
            }
        }
        let e = reopen(&s).unwrap_err();
        assert!(ok(&e), "offset {off}: {e}");
    }
}

/// # Safety
/// `fd` must be open.
unsafe fn libc_dup(fd: RawFd) -> OwnedFd {
    let new = std::fs::File::from(
        // SAFETY: the caller guarantees `fd` is open; we borrow it only to duplicate it.
        unsafe { std::os::fd::BorrowedFd::borrow_raw(fd) }.try_clone_to_owned().unwrap(),
    );
    new.into()
}
