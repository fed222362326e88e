//! Heartbeats, shared by every netmod: a background thread sends a UDP datagram to every watched
//! peer each period and records when each peer was last heard. After
//! `shared/reference/p2pmpi-lapie.md` (heartbeats, `T_gossip` = 500 ms), without the gossip: each
//! process watches every remote peer whose card it has, from start-up. Why a thread of its own
//! and UDP, what it costs, and how floods are borne: `docs/design/shm.md`, "Heartbeats".
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
//!
//! Floods: each wake drains the socket whole (`recvmmsg`, batches of [`BATCH`]); a datagram not
//! of a heartbeat's size, or not from a watched address, is dropped before any MAC is checked,
//! and at most [`CHECKS_PER_PERIOD`] MACs are checked per watched address and period. A silence
//! that overlaps an overflow of the socket (`SO_MEMINFO`) proves nothing: [`Heartbeat::silent`]
//! reports it only once it lasts [`FLOOD_GRACE`] times the limit.

use std::collections::HashMap;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr, SocketAddrV4, SocketAddrV6, UdpSocket};
use std::os::fd::AsRawFd;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::Relaxed};
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

/// Datagrams read per `recvmmsg`.
pub const BATCH: usize = 32;
/// MACs checked per watched address and period, at most (the rest are dropped unchecked).
pub const CHECKS_PER_PERIOD: u32 = 64;
/// Bytes asked for the socket's receive buffer (the kernel caps it at `net.core.rmem_max`).
const RCVBUF: libc::c_int = 4 << 20;

/// Under an overflow of the socket, a silence counts only once it lasts this many times the limit.
pub const FLOOD_GRACE: u32 = 4;
/// `SO_MEMINFO` (generic Linux value; `libc` does not export it for every architecture).
const SO_MEMINFO: libc::c_int = 55;

/// Watched peers.
#[derive(Default)]
struct Peers {
    /// When the socket last lost datagrams (its receive buffer was full).
    overflowed: Option<Instant>,
    /// rank → (address, last heard, last sequence number taken).
    by_rank: HashMap<u32, (SocketAddr, Instant, u64)>,
    /// address → (rank, MACs checked this period).
    by_addr: HashMap<SocketAddr, (u32, u32)>,
}

#[derive(Default)]
struct Shared {
    peers: Mutex<Peers>,
    stop: AtomicBool,
    /// Datagrams dropped unchecked: from an address not watched, or of the wrong size.
    strangers: AtomicU64,
    /// Datagrams from a watched address dropped over its budget of MAC checks.
    over_budget: AtomicU64,
    /// Datagrams whose MAC was checked and failed, or that were stale (an old sequence number).
    refused: AtomicU64,
    /// Heartbeats taken.
    taken: AtomicU64,
    /// Datagrams the kernel dropped for a full receive buffer.
    lost: AtomicU64,
}

/// What the heartbeat thread did with the datagrams it read ([`Heartbeat::stats`]).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Stats {
    /// Dropped without a MAC check: not from a watched peer's address, or not of a heartbeat's size.
    pub strangers: u64,
    /// From a watched address beyond its MAC checks of the period: dropped unchecked.
    pub over_budget: u64,
    /// Checked and refused (a bad MAC, another rank's, or an old sequence number).
    pub refused: u64,
    /// Heartbeats taken.
    pub taken: u64,
    /// Datagrams the kernel dropped, the socket's receive buffer full (a flood).
    pub lost: u64,
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
        sock.set_nonblocking(true)?;
        // Room for a burst of strangers' datagrams between two drains (best effort: the kernel
        // caps it, and a failure leaves the default).
        let want = RCVBUF;
        // SAFETY: the socket is open; the option value is a c_int of the size given.
        unsafe {
            libc::setsockopt(
                sock.as_raw_fd(),
                libc::SOL_SOCKET,
                libc::SO_RCVBUF,
                (&raw const want).cast(),
                size_of::<libc::c_int>() as libc::socklen_t,
            )
        };
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
        if let std::collections::hash_map::Entry::Vacant(e) = p.by_rank.entry(rank) {
            e.insert((addr, Instant::now(), 0));
            p.by_addr.insert(addr, (rank, 0));
        }
    }

    /// Stops watching `rank`.
    pub fn unwatch(&self, rank: u32) {
        let mut p = self.shared.peers.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some((addr, ..)) = p.by_rank.remove(&rank)
            && p.by_addr.get(&addr).is_some_and(|a| a.0 == rank)
        {
            p.by_addr.remove(&addr);
        }
    }

    /// What the thread did with the datagrams it read so far.
    pub fn stats(&self) -> Stats {
        let s = &self.shared;
        Stats {
            strangers: s.strangers.load(Relaxed),
            over_budget: s.over_budget.load(Relaxed),
            refused: s.refused.load(Relaxed),
            taken: s.taken.load(Relaxed),
            lost: s.lost.load(Relaxed),
        }
    }

    /// Watched peers not heard for longer than `limit`, with how long; while the socket lost
    /// datagrams within the last `limit`, only those silent for [`FLOOD_GRACE`] times `limit`.
    pub fn silent(&self, limit: Duration) -> Vec<(u32, Duration)> {
        let now = Instant::now();
        let p = self.shared.peers.lock().unwrap_or_else(PoisonError::into_inner);
        let flooded = p.overflowed.is_some_and(|t| now.saturating_duration_since(t) <= limit);
        let limit = if flooded { limit * FLOOD_GRACE } else { limit };
        p.by_rank
            .iter()
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
    let mut targets = Vec::new();
    let mut rx = Batch::new();
    let mut lost = drops(sock);
    while !shared.stop.load(Relaxed) {
        let now = Instant::now();
        if now >= next {
            targets.clear();
            {
                let mut p = shared.peers.lock().unwrap_or_else(PoisonError::into_inner);
                targets.extend(p.by_rank.values().map(|v| v.0));
                // A new period: every watched address gets its MAC checks again.
                p.by_addr.values_mut().for_each(|a| a.1 = 0);
            }
            seq += 1;
            let out = me.seal(seq);
            for a in &targets {
                // A lost datagram is what the timeout's several periods allow for.
                let _ = sock.send_to(&out, a);
            }
            next += period;
            if next < now {
                next = now + period;
            }
        }
        // Sleep until the next send (at most a quarter period, for the stop flag), or datagrams.
        let wait = next.saturating_duration_since(Instant::now()).min(period / 4).max(Duration::from_millis(1));
        let mut pfd = libc::pollfd { fd: sock.as_raw_fd(), events: libc::POLLIN, revents: 0 };
        // SAFETY: one valid pollfd for the call.
        let ready = unsafe { libc::poll(&mut pfd, 1, wait.as_millis().min(i32::MAX as u128) as i32) };
        if ready > 0 {
            drain(sock, shared, me, &mut rx, next);
            let now_lost = drops(sock);
            if now_lost > lost {
                shared.lost.fetch_add(u64::from(now_lost.wrapping_sub(lost)), Relaxed);
                shared.peers.lock().unwrap_or_else(PoisonError::into_inner).overflowed = Some(Instant::now());
            }
            lost = now_lost;
        }
    }
}

/// Datagrams the kernel dropped on `sock` so far (its receive buffer full); 0 where unknown.
fn drops(sock: &UdpSocket) -> u32 {
    let mut info = [0u32; libc::SK_MEMINFO_DROPS as usize + 1];
    let mut len = size_of_val(&info) as libc::socklen_t;
    // SAFETY: the socket is open; `info` holds `len` bytes for the kernel to fill.
    let r =
        unsafe { libc::getsockopt(sock.as_raw_fd(), libc::SOL_SOCKET, SO_MEMINFO, info.as_mut_ptr().cast(), &mut len) };
    if r == 0 && len as usize >= size_of_val(&info) { info[libc::SK_MEMINFO_DROPS as usize] } else { 0 }
}

/// Buffers of one `recvmmsg`.
struct Batch {
    bufs: [[u8; 64]; BATCH],
    addrs: [libc::sockaddr_storage; BATCH],
    iovs: [libc::iovec; BATCH],
    hdrs: [libc::mmsghdr; BATCH],
}

impl Batch {
    fn new() -> Box<Batch> {
        // SAFETY: all-zero bytes are valid for these plain C structures and byte arrays (the
        // pointers inside are set before each use).
        Box::new(unsafe { std::mem::zeroed() })
    }

    /// Reads up to [`BATCH`] datagrams without waiting; how many.
    fn recv(&mut self, sock: &UdpSocket) -> usize {
        for k in 0..BATCH {
            self.iovs[k] = libc::iovec { iov_base: self.bufs[k].as_mut_ptr().cast(), iov_len: self.bufs[k].len() };
            let h = &mut self.hdrs[k].msg_hdr;
            h.msg_name = (&raw mut self.addrs[k]).cast();
            h.msg_namelen = size_of::<libc::sockaddr_storage>() as libc::socklen_t;
            h.msg_iov = &raw mut self.iovs[k];
            h.msg_iovlen = 1;
            h.msg_control = std::ptr::null_mut();
            h.msg_controllen = 0;
            h.msg_flags = 0;
            self.hdrs[k].msg_len = 0;
        }
        // SAFETY: BATCH headers, each naming a buffer and an address of this (boxed, unmoved)
        // structure, valid for the call.
        let n = unsafe {
            libc::recvmmsg(
                sock.as_raw_fd(),
                self.hdrs.as_mut_ptr(),
                BATCH as libc::c_uint,
                libc::MSG_DONTWAIT,
                std::ptr::null_mut(),
            )
        };
        n.max(0) as usize
    }

    /// Datagram `k` of the last `recv`: its source and bytes.
    fn get(&self, k: usize) -> (Option<SocketAddr>, &[u8]) {
        let len = (self.hdrs[k].msg_len as usize).min(self.bufs[k].len());
        (sockaddr(&self.addrs[k]), &self.bufs[k][..len])
    }
}

/// The socket address in `ss` (as `recvmmsg` filled it).
fn sockaddr(ss: &libc::sockaddr_storage) -> Option<SocketAddr> {
    match i32::from(ss.ss_family) {
        libc::AF_INET => {
            // SAFETY: an AF_INET address is a sockaddr_in, which sockaddr_storage is large and
            // aligned enough to hold.
            let a = unsafe { &*(ss as *const libc::sockaddr_storage).cast::<libc::sockaddr_in>() };
            let ip = Ipv4Addr::from(u32::from_be(a.sin_addr.s_addr));
            Some(SocketAddr::V4(SocketAddrV4::new(ip, u16::from_be(a.sin_port))))
        }
        libc::AF_INET6 => {
            // SAFETY: as above, for sockaddr_in6.
            let a = unsafe { &*(ss as *const libc::sockaddr_storage).cast::<libc::sockaddr_in6>() };
            let ip = Ipv6Addr::from(a.sin6_addr.s6_addr);
            Some(SocketAddr::V6(SocketAddrV6::new(ip, u16::from_be(a.sin6_port), a.sin6_flowinfo, a.sin6_scope_id)))
        }
        _ => None,
    }
}

/// Reads every datagram waiting (until the socket is empty, or `until`: sends stay on time) and
/// takes the heartbeats among them.
fn drain(sock: &UdpSocket, shared: &Shared, me: &Identity, rx: &mut Batch, until: Instant) {
    let (mut strangers, mut over, mut refused, mut taken) = (0u64, 0u64, 0u64, 0u64);
    loop {
        let n = rx.recv(sock);
        if n == 0 {
            break;
        }
        let now = Instant::now();
        let mut p = shared.peers.lock().unwrap_or_else(PoisonError::into_inner);
        for k in 0..n {
            let (src, bytes) = rx.get(k);
            // Cheap refusals first: the size, then the source (no MAC computed for strangers).
            let Some(slot) = src.filter(|_| bytes.len() == DATAGRAM).and_then(|a| p.by_addr.get_mut(&a)) else {
                strangers += 1;
                continue;
            };
            if slot.1 >= CHECKS_PER_PERIOD {
                over += 1;
                continue;
            }
            slot.1 += 1;
            let expected = slot.0;
            match me.open(bytes) {
                Some((from, s)) if from == expected => match p.by_rank.get_mut(&from) {
                    Some(e) if s > e.2 => {
                        (e.1, e.2) = (now, s);
                        taken += 1;
                    }
                    _ => refused += 1,
                },
                _ => refused += 1,
            }
        }
        drop(p);
        if n < BATCH || Instant::now() >= until {
            break;
        }
    }
    shared.strangers.fetch_add(strangers, Relaxed);
    shared.over_budget.fetch_add(over, Relaxed);
    shared.refused.fetch_add(refused, Relaxed);
    shared.taken.fetch_add(taken, Relaxed);
}

#[cfg(test)]
mod tests;
