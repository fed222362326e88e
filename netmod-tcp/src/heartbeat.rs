//! Heartbeats: a background thread sends a UDP datagram to every watched peer each period and
//! records when each peer was last heard. A thread of its own, so that a rank computing for
//! minutes without calling the library is not taken for dead (the progress engine only runs when
//! the application calls in), and UDP so that heartbeats never queue behind data in a TCP stream.
//! After `shared/reference/p2pmpi-lapie.md` (heartbeats, `T_gossip` = 500 ms), without the
//! gossip: each process watches every remote peer whose card it has, from start-up (a receive may
//! wait on a peer it never talked to), so the cost is one datagram per remote peer and period:
//! 2,000 datagrams a second per process for 1,000 remote peers at the default 500 ms. Gossip
//! (P2P-MPI's double binary round-robin) is the way to larger jobs.
//!
//! The bound: a peer that stops (dies without its connection closing, hangs, is stopped, or is
//! cut off) is declared dead by the progress engine of each watcher within `timeout + period`
//! of its last heartbeat, plus the time until that watcher's next progress pass.

use std::collections::HashMap;
use std::net::{SocketAddr, UdpSocket};
use std::sync::atomic::{AtomicBool, Ordering::Relaxed};
use std::sync::{Arc, Mutex, PoisonError};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// Datagram: `[magic u32][rank u32][job key u64]`.
const MAGIC: u32 = 0x6e68_6274;
const DATAGRAM: usize = 16;

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

impl Heartbeat {
    /// Binds a UDP socket on `ip` and starts the thread: this process is `rank` of job `job`.
    pub fn start(ip: std::net::IpAddr, rank: u32, job: u64, period: Duration) -> std::io::Result<Heartbeat> {
        let sock = UdpSocket::bind((ip, 0))?;
        let port = sock.local_addr()?.port();
        // Wake up often enough to send on time; reads in between.
        sock.set_read_timeout(Some((period / 4).max(Duration::from_millis(1))))?;
        let shared = Arc::new(Shared::default());
        let s = shared.clone();
        let thread = std::thread::Builder::new()
            .name("nemesis-heartbeat".into())
            .spawn(move || run(&sock, &s, rank, job, period))?;
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

fn run(sock: &UdpSocket, shared: &Shared, rank: u32, job: u64, period: Duration) {
    let mut out = [0u8; DATAGRAM];
    out[0..4].copy_from_slice(&MAGIC.to_le_bytes());
    out[4..8].copy_from_slice(&rank.to_le_bytes());
    out[8..16].copy_from_slice(&job.to_le_bytes());
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
            && n == DATAGRAM
            && buf[0..4] == MAGIC.to_le_bytes()
            && buf[8..16] == job.to_le_bytes()
        {
            let from = u32::from_le_bytes([buf[4], buf[5], buf[6], buf[7]]);
            if let Some(e) = shared.peers.lock().unwrap_or_else(PoisonError::into_inner).get_mut(&from) {
                e.1 = Instant::now();
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn heard_peers_stay_fresh_and_a_stopped_one_goes_silent() {
        let ip = "127.0.0.1".parse().unwrap();
        let period = Duration::from_millis(20);
        let a = Heartbeat::start(ip, 0, 9, period).unwrap();
        let b = Heartbeat::start(ip, 1, 9, period).unwrap();
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
        let c = Heartbeat::start(ip, 1, 10, period).unwrap();
        c.watch(0, SocketAddr::new(ip, a.port()));
        std::thread::sleep(period * 15);
        assert_eq!(a.silent(period * 10).len(), 1);
    }
}
