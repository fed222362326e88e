//! Heartbeats, shared by every netmod: a background thread sends a UDP datagram to every watched
//! peer each period and records when each peer was last heard. A thread of its own, so that a
//! rank computing for minutes without calling the library is not taken for dead (the progress
//! engine only runs when the application calls in), and UDP so that heartbeats never queue behind
//! data (a TCP stream, a fabric's send queue). After `shared/reference/p2pmpi-lapie.md`
//! (heartbeats, `T_gossip` = 500 ms), without the gossip: each process watches every remote peer
//! whose card it has, from start-up (a receive may wait on a peer it never talked to), so the
//! cost is one datagram per remote peer and period: 2,000 datagrams a second per process for
//! 1,000 remote peers at the default 500 ms. Gossip (P2P-MPI's double binary round-robin) is the
//! way to larger jobs.
//!
//! The bound: a peer that stops (dies without its connection closing, hangs, is stopped, or is
//! cut off) is declared dead by the progress engine of each watcher within `timeout + period`
//! of its last heartbeat, plus the time until that watcher's next progress pass.
//!
//! What a datagram carries and what makes one count is [`Identity`]'s business alone
//! ([`Identity::seal`], [`Identity::open`]): the sender's rank and a sequence number, sealed with
//! a MAC keyed by the job's secret ([`crate::auth::BeatKey`]). A datagram counts only if it opens
//! with the secret, names a watched rank, comes from the address that rank's card gave, and
//! carries a sequence above the last one taken from that rank: a forged or replayed heartbeat
//! neither keeps a dead peer alive nor touches anyone else's state (heartbeats only ever refresh;
//! a death is silence).

use std::collections::HashMap;
use std::net::{IpAddr, SocketAddr, UdpSocket};
use std::sync::atomic::{AtomicBool, Ordering::Relaxed};
use std::sync::{Arc, Mutex, PoisonError};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use crate::auth::{BEAT_BYTES, BeatKey, JobSecret, first_beat_seq};
use crate::error::{Error, Result};

/// Bytes of a datagram.
pub const DATAGRAM: usize = BEAT_BYTES;

/// Who this process is to its watchers, and which datagrams count as a peer's.
#[derive(Clone, Debug)]
pub struct Identity {
    /// This process's global rank.
    pub rank: u32,
    /// The job's secret, as heartbeats use it: datagrams not sealed with it do not count.
    pub key: BeatKey,
}

impl Identity {
    /// Rank `rank` of the job whose secret is `secret`.
    pub fn new(rank: u32, secret: JobSecret) -> Identity {
        Identity { rank, key: BeatKey::new(secret) }
    }

    /// This process's datagram number `seq`.
    pub fn seal(&self, seq: u64) -> [u8; DATAGRAM] {
        self.key.seal(self.rank, seq)
    }

    /// The rank and sequence number of a received datagram, if it is a heartbeat of this job
    /// (the caller checks the sender's address and that the sequence grows).
    pub fn open(&self, buf: &[u8]) -> Option<(u32, u64)> {
        self.key.open(buf)
    }
}

/// When heartbeats go, and how long a silence means death.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Timing {
    /// Time between two heartbeats to each peer.
    pub period: Duration,
    /// A peer not heard for this long is dead.
    pub timeout: Duration,
}

impl Default for Timing {
    /// 500 ms periods, dead after 10 of them.
    fn default() -> Self {
        Timing { period: Duration::from_millis(500), timeout: Duration::from_millis(5000) }
    }
}

impl Timing {
    /// The defaults with the overrides in environment variables `period_var` (milliseconds; the
    /// timeout becomes 10 periods) and `timeout_var` (milliseconds); the timeout must be at least
    /// two periods.
    pub fn from_env(period_var: &str, timeout_var: &str) -> Result<Timing> {
        let mut t = Timing::default();
        let ms = |k: &str| -> Result<Option<Duration>> {
            let Some(v) = std::env::var(k).ok().filter(|v| !v.trim().is_empty()) else { return Ok(None) };
            match v.trim().parse::<u64>() {
                Ok(n) if n > 0 => Ok(Some(Duration::from_millis(n))),
                _ => Err(Error::Net(format!("{k}={v}: expected a positive number of milliseconds"))),
            }
        };
        if let Some(p) = ms(period_var)? {
            t.period = p;
            t.timeout = p * 10;
        }
        if let Some(d) = ms(timeout_var)? {
            t.timeout = d;
        }
        if t.timeout < t.period * 2 {
            return Err(Error::Net(format!(
                "the heartbeat timeout ({:?}) must be at least two periods ({:?})",
                t.timeout, t.period
            )));
        }
        Ok(t)
    }

    /// The detection bound: a stopped peer is declared dead within this long of its last
    /// heartbeat (plus the time until the watcher's next progress pass).
    pub fn detection_bound(&self) -> Duration {
        self.timeout + self.period
    }
}

#[derive(Default)]
struct Shared {
    /// Watched peers: rank → (address, last heard, last sequence number taken).
    peers: Mutex<HashMap<u32, (SocketAddr, Instant, u64)>>,
    stop: AtomicBool,
}

/// The heartbeat thread of one process.
pub struct Heartbeat {
    shared: Arc<Shared>,
    thread: Option<JoinHandle<()>>,
    port: u16,
}

impl std::fmt::Debug for Heartbeat {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Heartbeat").field("port", &self.port).finish()
    }
}

impl Heartbeat {
    /// Binds a UDP socket on `ip` and starts the thread, beating as `me` every `period`.
    pub fn start(ip: IpAddr, me: Identity, period: Duration) -> std::io::Result<Heartbeat> {
        let sock = UdpSocket::bind((ip, 0))?;
        let port = sock.local_addr()?.port();
        // Wake up often enough to send on time; reads in between.
        sock.set_read_timeout(Some((period / 4).max(Duration::from_millis(1))))?;
        let shared = Arc::new(Shared::default());
        let s = shared.clone();
        let thread =
            std::thread::Builder::new().name("nemesis-heartbeat".into()).spawn(move || run(&sock, &s, &me, period))?;
        Ok(Heartbeat { shared, thread: Some(thread), port })
    }

    /// The UDP port peers send heartbeats to.
    pub fn port(&self) -> u16 {
        self.port
    }

    /// Starts watching `rank` at `addr` (counting as heard now).
    pub fn watch(&self, rank: u32, addr: SocketAddr) {
        let mut p = self.shared.peers.lock().unwrap_or_else(PoisonError::into_inner);
        p.entry(rank).or_insert((addr, Instant::now(), 0));
    }

    /// Stops watching `rank`.
    pub fn unwatch(&self, rank: u32) {
        self.shared.peers.lock().unwrap_or_else(PoisonError::into_inner).remove(&rank);
    }

    /// Watched peers not heard for longer than `limit`, with how long.
    pub fn silent(&self, limit: Duration) -> Vec<(u32, Duration)> {
        let now = Instant::now();
        let p = self.shared.peers.lock().unwrap_or_else(PoisonError::into_inner);
        p.iter()
            .filter_map(|(&r, &(_, heard, _))| {
                let d = now.saturating_duration_since(heard);
                (d > limit).then_some((r, d))
            })
            .collect()
    }
}

impl Drop for Heartbeat {
    fn drop(&mut self) {
        self.shared.stop.store(true, Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

fn run(sock: &UdpSocket, shared: &Shared, me: &Identity, period: Duration) {
    let mut seq = first_beat_seq();
    let mut next = Instant::now();
    let mut buf = [0u8; 64];
    let mut targets = Vec::new();
    while !shared.stop.load(Relaxed) {
        if Instant::now() >= next {
            targets.clear();
            targets.extend(shared.peers.lock().unwrap_or_else(PoisonError::into_inner).values().map(|v| v.0));
            seq += 1;
            let out = me.seal(seq);
            for a in &targets {
                // A lost datagram is what the timeout's several periods allow for.
                let _ = sock.send_to(&out, a);
            }
            next += period;
            if next < Instant::now() {
                next = Instant::now() + period;
            }
        }
        if let Ok((n, src)) = sock.recv_from(&mut buf)
            && let Some((from, s)) = me.open(&buf[..n])
            && let Some(e) = shared.peers.lock().unwrap_or_else(PoisonError::into_inner).get_mut(&from)
            && e.0 == src
            && s > e.2
        {
            (e.1, e.2) = (Instant::now(), s);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Two jobs' secrets, made once.
    fn secret(job: usize) -> JobSecret {
        static S: std::sync::OnceLock<[JobSecret; 2]> = std::sync::OnceLock::new();
        S.get_or_init(|| [JobSecret::generate().unwrap(), JobSecret::generate().unwrap()])[job % 2].clone()
    }

    fn me(rank: u32, job: usize) -> Identity {
        Identity::new(rank, secret(job))
    }

    #[test]
    fn heard_peers_stay_fresh_and_a_stopped_one_goes_silent() {
        let ip = "127.0.0.1".parse().unwrap();
        let period = Duration::from_millis(20);
        let a = Heartbeat::start(ip, me(0, 9), period).unwrap();
        let b = Heartbeat::start(ip, me(1, 9), period).unwrap();
        a.watch(1, SocketAddr::new(ip, b.port()));
        b.watch(0, SocketAddr::new(ip, a.port()));
        std::thread::sleep(period * 15);
        assert!(a.silent(period * 10).is_empty(), "b beats");
        drop(b);
        let t0 = Instant::now();
        while a.silent(period * 10).is_empty() {
            assert!(t0.elapsed() < Duration::from_secs(30), "b never went silent");
            std::thread::sleep(period);
        }
        assert_eq!(a.silent(period * 10)[0].0, 1);
        // Another job's heartbeats do not count.
        let c = Heartbeat::start(ip, me(1, 10), period).unwrap();
        c.watch(0, SocketAddr::new(ip, a.port()));
        std::thread::sleep(period * 15);
        assert_eq!(a.silent(period * 10).len(), 1);
    }

    #[test]
    fn datagrams_of_other_jobs_and_junk_do_not_open() {
        let (a, b) = (me(3, 7), me(4, 7));
        assert_eq!(b.open(&a.seal(5)), Some((3, 5)));
        assert_eq!(me(4, 8).open(&a.seal(5)), None);
        assert_eq!(b.open(&a.seal(5)[..15]), None);
        let mut bad = a.seal(5);
        bad[0] ^= 1;
        assert_eq!(b.open(&bad), None);
    }

    #[test]
    fn forged_and_replayed_heartbeats_do_not_keep_a_peer_alive() {
        let ip: std::net::IpAddr = "127.0.0.1".parse().unwrap();
        let period = Duration::from_millis(20);
        let a = Heartbeat::start(ip, me(0, 1), period).unwrap();
        let b = Heartbeat::start(ip, me(1, 1), period).unwrap();
        a.watch(1, SocketAddr::new(ip, b.port()));
        std::thread::sleep(period * 5);
        assert!(a.silent(period * 10).is_empty(), "b beats");
        let b_port = b.port();
        drop(b);
        // From b's own address (its port, free again), then from elsewhere: a datagram of another
        // job claiming rank 1, rank 1's datagrams with an old sequence number (replayed), and a
        // valid one from another address. None counts: a goes on finding b silent.
        let at_b = UdpSocket::bind((ip, b_port)).unwrap();
        let elsewhere = UdpSocket::bind((ip, 0)).unwrap();
        let to_a = SocketAddr::new(ip, a.port());
        let old = me(1, 1).seal(1);
        let t0 = Instant::now();
        while t0.elapsed() < period * 30 {
            let _ = at_b.send_to(&me(1, 2).seal(first_beat_seq() * 2), to_a);
            let _ = at_b.send_to(&old, to_a);
            let _ = elsewhere.send_to(&me(1, 1).seal(first_beat_seq() * 2), to_a);
            std::thread::sleep(period / 4);
        }
        assert_eq!(a.silent(period * 10).first().map(|s| s.0), Some(1), "b is found silent all the same");
        // A datagram sealed with the secret, from b's address, above the last sequence: counts.
        let _ = at_b.send_to(&me(1, 1).seal(first_beat_seq() * 2), to_a);
        std::thread::sleep(period * 3);
        assert!(a.silent(period * 10).is_empty(), "a genuine heartbeat refreshes");
    }

    #[test]
    fn timing_from_the_environment() {
        // Variables no other test sets.
        // SAFETY: this test alone touches these names.
        unsafe {
            std::env::set_var("NEMESIS_HBT_P", "40");
            std::env::remove_var("NEMESIS_HBT_T");
        }
        let t = Timing::from_env("NEMESIS_HBT_P", "NEMESIS_HBT_T").unwrap();
        assert_eq!((t.period, t.timeout), (Duration::from_millis(40), Duration::from_millis(400)));
        assert_eq!(t.detection_bound(), Duration::from_millis(440));
        // SAFETY: as above.
        unsafe { std::env::set_var("NEMESIS_HBT_T", "50") };
        assert!(Timing::from_env("NEMESIS_HBT_P", "NEMESIS_HBT_T").is_err(), "less than two periods");
        // SAFETY: as above.
        unsafe { std::env::set_var("NEMESIS_HBT_P", "x") };
        assert!(Timing::from_env("NEMESIS_HBT_P", "NEMESIS_HBT_T").is_err());
        assert_eq!(Timing::from_env("NEMESIS_HBT_NONE", "NEMESIS_HBT_NONE2").unwrap(), Timing::default());
    }
}
