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
//! ([`Identity::seal`], [`Identity::open`]): a per-job secret would go there.

use std::collections::HashMap;
use std::net::{IpAddr, SocketAddr, UdpSocket};
use std::sync::atomic::{AtomicBool, Ordering::Relaxed};
use std::sync::{Arc, Mutex, PoisonError};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use crate::error::{Error, Result};

/// Datagram: `[magic u32][rank u32][job key u64]`.
const MAGIC: u32 = 0x6e68_6274;
/// Bytes of a datagram.
pub const DATAGRAM: usize = 16;

/// Who this process is to its watchers, and which datagrams count as a peer's.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Identity {
    /// This process's global rank.
    pub rank: u32,
    /// The job's key: datagrams of other jobs do not count.
    pub job: u64,
}

impl Identity {
    /// This process's datagram.
    pub fn seal(&self) -> [u8; DATAGRAM] {
        let mut out = [0u8; DATAGRAM];
        out[0..4].copy_from_slice(&MAGIC.to_le_bytes());
        out[4..8].copy_from_slice(&self.rank.to_le_bytes());
        out[8..16].copy_from_slice(&self.job.to_le_bytes());
        out
    }

    /// The rank a received datagram is from, if it is a heartbeat of this job.
    pub fn open(&self, buf: &[u8]) -> Option<u32> {
        if buf.len() != DATAGRAM || buf[0..4] != MAGIC.to_le_bytes() || buf[8..16] != self.job.to_le_bytes() {
            return None;
        }
        Some(u32::from_le_bytes([buf[4], buf[5], buf[6], buf[7]]))
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
    /// Watched peers: rank → (address, last heard).
    peers: Mutex<HashMap<u32, (SocketAddr, Instant)>>,
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
        p.entry(rank).or_insert((addr, Instant::now()));
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
            .filter_map(|(&r, &(_, heard))| {
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
    let out = me.seal();
    let mut next = Instant::now();
    let mut buf = [0u8; 64];
    let mut targets = Vec::new();
    while !shared.stop.load(Relaxed) {
        if Instant::now() >= next {
            targets.clear();
            targets.extend(shared.peers.lock().unwrap_or_else(PoisonError::into_inner).values().map(|v| v.0));
            for a in &targets {
                // A lost datagram is what the timeout's several periods allow for.
                let _ = sock.send_to(&out, a);
            }
            next += period;
            if next < Instant::now() {
                next = Instant::now() + period;
            }
        }
        if let Ok((n, _)) = sock.recv_from(&mut buf)
            && let Some(from) = me.open(&buf[..n])
            && let Some(e) = shared.peers.lock().unwrap_or_else(PoisonError::into_inner).get_mut(&from)
        {
            e.1 = Instant::now();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn me(rank: u32, job: u64) -> Identity {
        Identity { rank, job }
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
        assert_eq!(b.open(&a.seal()), Some(3));
        assert_eq!(me(4, 8).open(&a.seal()), None);
        assert_eq!(b.open(&a.seal()[..15]), None);
        let mut bad = a.seal();
        bad[0] ^= 1;
        assert_eq!(b.open(&bad), None);
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
