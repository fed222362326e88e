//! # nemesis-netmod-tcp: the TCP network module
//!
//! Implements [`nemesis_shm::netmod::Netmod`] (messages, through the receive queue) and
//! [`nemesis_lmt::LmtBackend`] (the data of large messages, streamed) over TCP:
//! - **connections**: one per pair of ranks, made on first use (non-blocking connect, then the
//!   handshake: HELLO naming the rank, its incarnation and a nonce; CHALLENGE, the acceptor's
//!   nonce and incarnation; PROOF, the connecting side's proof of the job's secret over the whole
//!   transcript, including the address it dialed; ACCEPT or REJECT with the accepting side's own
//!   proof, `nemesis_shm::auth::Transcript`). The connecting side proves first, so a stranger's
//!   HELLO earns nothing made with the secret, and a handshake relayed from an address other than
//!   the one the accepting rank's card gives does not verify. A connection that fails is closed
//!   and changes no rank's state; the connecting side tries again until the connection timeout.
//!   The accepting side's first half runs in a thread of its own ([`listen`]): connections not
//!   authenticated are bounded ([`TcpConfig::pending_max`]) and closed after the timeout whether
//!   or not the application calls in. Simultaneous connects are settled by rank: the accepting
//!   side refuses (REJECT) a connection from a higher rank while its own attempt to that rank is
//!   under way, and accepts one from a lower rank, dropping its own attempt. Data flows only after
//!   ACCEPT, so nothing is ever written on a connection that loses; messages wait per peer, not
//!   per socket. `TCP_NODELAY` on every socket.
//! - **framing** ([`frame`]): the cell header, so arrivals are cells already; a direct write when
//!   nothing is queued for the peer, else queued (copied) behind, keeping the order.
//! - **integrity** (`NEMESIS_TCP_INTEGRITY=1`, off by default: see [`TcpConfig::integrity`]):
//!   each link has two stream keys derived from the secret and its handshake, and every frame
//!   after ACCEPT carries a MAC over its number and bytes; a frame changed, injected, dropped or
//!   replayed ends the link (the peer is declared dead). A message is delivered only once its
//!   MAC verified (the cells before its last may be handed over earlier, and are abandoned with
//!   the peer), a large message's transfer completes only once its last frame's did.
//! - **arrivals** are copied from the socket's buffer into cells of the process's netmod pool and
//!   enqueued on its receive queue; with no free cell the socket is left alone (flow control).
//! - **large messages**: after the rendezvous, DATA frames are written from the sender's buffer and
//!   read into the receiver's buffer, without staging.
//! - **failures**: a reset, or an end of stream without BYE, or heartbeats (the shared
//!   [`nemesis_shm::netmod::heartbeat`]) missing for the timeout while the connection delivered
//!   nothing either, make the peer dead: a [`KIND_PEER_GONE`] notice follows its last arrival in
//!   the receive queue; its transfers fail.
//! - **restarts** (`nemesis-run --ft` over several nodes, HydEE's recovery): a restarted rank is
//!   a new *incarnation* of its rank number (`nemesis_shm::incarnation`), with a new listener, a
//!   new heartbeat socket and so a new card, which it puts through PMI (the launcher's server
//!   takes the put and removed the dead incarnation's card at its death, so no stale card is
//!   served). Who tells the others: the launcher. It alone knows for sure that a rank died and
//!   when its next incarnation runs (it restarts it), while a peer's own view is partial: a peer
//!   that never had a connection learns of a death only by heartbeat silence, seconds later,
//!   and a connection from a new incarnation proves nothing about what became of the old one's
//!   messages. So the protocol is driven from the launcher's fault-tolerance channel, and the
//!   handshake only guards it:
//!   1. [`Netmod::retire`] (the launcher asks every survivor to retire the dead ranks): the link
//!      is declared dead if it was not (connection, queue and transfers dropped; the
//!      [`KIND_PEER_GONE`] notice follows its last arrival, so the Endpoint knows every message
//!      of the dead incarnation was delivered before it answers: HydEE's "delivered before its
//!      `Restarted` or not at all"), its card forgotten, its heartbeats unwatched (no death
//!      declared later for the old incarnation's silence).
//!   2. [`Netmod::restarted`] (the launcher's `Card` frame, once the new incarnation put its card):
//!      a fresh link, made on first use, to the new card; heartbeats watched at its new address
//!      from now on. The Endpoint reports the restart to the engine at the same moment.
//!   3. The HELLO carries the connecting process's incarnation ([`frame::hello_of`]): a
//!      connection of an incarnation older than the one known, or of the retired one, is refused
//!      (a late connect); one of a newer incarnation that comes before step 2 (the new process
//!      can be quicker than the survivor's reading of its channel) is authenticated, then
//!      *parked* — neither accepted nor refused, nothing read from it — and accepted at step 2, so
//!      nothing of the new incarnation is delivered before its restart is known. A parked
//!      connection not taken within the timeout is dropped, as any connection not set up in time.
//!
//!   A rank restarted together with `rank` may not find its card at start-up (not put yet): its
//!   sends to it wait in the queue until step 2 brings the card.
//!
//! Configuration (`NEMESIS_TCP_*`, see [`TcpConfig::from_env`]): the address or interface to use,
//! a port range, the heartbeat period and timeout.

pub mod frame;
#[doc(hidden)]
pub mod fuzzing;
pub mod listen;

use std::collections::VecDeque;
use std::io::{self, IoSlice, Read};
use std::net::{IpAddr, SocketAddr, TcpListener, TcpStream};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::time::{Duration, Instant};

use nemesis_lmt::{LmtBackend, NetDone, Outcome};
use nemesis_shm::auth::{self, FLAG_INTEGRITY, FrameMac, JobSecret, NONCE_BYTES, Step, StreamKey, Transcript};
use nemesis_shm::cell::{FT_ROOM, HEADER_BYTES, flags};
use nemesis_shm::netmod::{Arrival, Inbox, KIND_PEER_GONE, Netmod, announce_deaths};
use nemesis_shm::{Error, MsgHeader, NetCell, PiggybackBytes, Result};

use frame::{DATA_FRAME, DATA_HEAD, Kind, PREFIX, TAG};
pub use nemesis_shm::netmod::addr::{default_addr, interface_addr};
use nemesis_shm::netmod::heartbeat::{Heartbeat, Identity, Timing};

/// Settings of the TCP netmod.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TcpConfig {
    /// The address to listen on and advertise (`NEMESIS_TCP_ADDR`, or the first address of the
    /// interface named by `NEMESIS_TCP_IF`); by default the first non-loopback IPv4 address of an
    /// interface that is up, else 127.0.0.1.
    pub addr: Option<IpAddr>,
    /// Ports to listen on (`NEMESIS_TCP_PORTS=lo-hi`); by default any the kernel gives.
    pub ports: Option<(u16, u16)>,
    /// Heartbeat period (`NEMESIS_TCP_HEARTBEAT_MS`, default 500).
    pub heartbeat: Duration,
    /// A peer not heard for this long is dead (`NEMESIS_TCP_TIMEOUT_MS`, default 10 periods);
    /// also the longest a connection may take to be set up.
    pub timeout: Duration,
    /// Largest message frame accepted from a peer (eager messages; larger ones go by rendezvous).
    pub max_message: usize,
    /// Per-frame MACs on every link (`NEMESIS_TCP_INTEGRITY=1`; a link has them if either side
    /// asks). Off by default: the MAC (keyed BLAKE3) brings 1 MiB messages over loopback to about
    /// 0.6 × their bandwidth without it, and adds about 0.6 µs to an 8-byte message (the
    /// `integrity_cost` example; README, "Security"); the handshake authenticates every link
    /// either way.
    pub integrity: bool,
    /// Connections held at most before they prove the job's secret (`NEMESIS_TCP_PENDING_MAX`,
    /// default 64); beyond it a new one evicts the oldest.
    pub pending_max: usize,
}

impl Default for TcpConfig {
    fn default() -> Self {
        TcpConfig {
            addr: None,
            ports: None,
            heartbeat: Timing::default().period,
            timeout: Timing::default().timeout,
            max_message: 16 << 20,
            integrity: false,
            pending_max: 64,
        }
    }
}

impl TcpConfig {
    /// The defaults with the `NEMESIS_TCP_*` overrides.
    pub fn from_env() -> Result<TcpConfig> {
        let addr = nemesis_shm::netmod::addr::addr_from_env("NEMESIS_TCP_ADDR", "NEMESIS_TCP_IF")?;
        let mut c = TcpConfig { addr, ..TcpConfig::default() };
        if let Some(v) = std::env::var("NEMESIS_TCP_PORTS").ok().filter(|v| !v.trim().is_empty()) {
            let bad = || Error::Net(format!("NEMESIS_TCP_PORTS={v}: expected lo-hi, e.g. 40000-40100"));
            let (lo, hi) = v.trim().split_once('-').ok_or_else(bad)?;
            let (lo, hi): (u16, u16) = (lo.parse().map_err(|_| bad())?, hi.parse().map_err(|_| bad())?);
            if lo == 0 || lo > hi {
                return Err(bad());
            }
            c.ports = Some((lo, hi));
        }
        if let Some(v) = std::env::var("NEMESIS_TCP_INTEGRITY").ok().filter(|v| !v.trim().is_empty()) {
            c.integrity = match v.trim() {
                "1" | "on" | "yes" => true,
                "0" | "off" | "no" => false,
                _ => return Err(Error::Net(format!("NEMESIS_TCP_INTEGRITY={v}: expected 1 or 0"))),
            };
        }
        if let Some(v) = std::env::var("NEMESIS_TCP_PENDING_MAX").ok().filter(|v| !v.trim().is_empty()) {
            c.pending_max = v
                .trim()
                .parse()
                .ok()
                .filter(|&n| n > 0)
                .ok_or_else(|| Error::Net(format!("NEMESIS_TCP_PENDING_MAX={v}: expected a positive number")))?;
        }
        let t = Timing::from_env("NEMESIS_TCP_HEARTBEAT_MS", "NEMESIS_TCP_TIMEOUT_MS")?;
        (c.heartbeat, c.timeout) = (t.period, t.timeout);
        Ok(c)
    }

    /// The detection bound: a stopped peer is declared dead within this long of its last
    /// heartbeat (plus the time until the watcher's next progress pass).
    pub fn detection_bound(&self) -> Duration {
        Timing { period: self.heartbeat, timeout: self.timeout }.detection_bound()
    }
}

/// A peer's card: `tcp:<ip>:<port>:<heartbeat port>`.
pub fn parse_card(card: &str) -> Option<(SocketAddr, SocketAddr)> {
    let rest = card.strip_prefix("tcp:")?;
    let mut it = rest.rsplitn(3, ':');
    let udp: u16 = it.next()?.parse().ok()?;
    let port: u16 = it.next()?.parse().ok()?;
    let host = it.next()?;
    // Brackets only around an IPv6 address, and both of them.
    let ip: IpAddr = match host.strip_prefix('[') {
        Some(h) => IpAddr::V6(h.strip_suffix(']')?.parse().ok()?),
        None => host.parse().ok()?,
    };
    Some((SocketAddr::new(ip, port), SocketAddr::new(ip, udp)))
}

/// The state of the connection with one peer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Link {
    /// Nothing yet.
    Idle,
    /// Our connect is under way (`hello`: HELLO written, waiting for CHALLENGE; `proved`: the
    /// peer proved the job's secret and we sent our PROOF, waiting for ACCEPT or REJECT).
    Connecting {
        since: Instant,
        hello: bool,
        proved: bool,
    },
    /// Our attempt was refused in favour of the peer's own, which we wait for.
    Waiting {
        since: Instant,
    },
    /// Our attempt failed before it was authenticated (closed, or a proof that did not verify):
    /// another at `at`, until the timeout counted from `since`.
    Retry {
        since: Instant,
        at: Instant,
    },
    Up,
    /// The peer said BYE: it sends nothing more, and takes nothing more.
    Bye,
    Dead,
}

/// What is queued for a peer.
enum Out {
    /// A frame, or what is left of it (then its tag).
    Bytes { buf: Vec<u8>, at: usize, tag: Tag },
    /// A DATA frame of a large message, written from the sender's buffer.
    Data { head: [u8; PREFIX + DATA_HEAD], ptr: *const u8, len: usize, at: usize, id: u32, end: Option<u64>, tag: Tag },
}

/// The per-frame MAC of a frame being written: computed when the frame reaches the front of the
/// queue (frames are numbered in the order they go), empty on a link without MACs.
#[derive(Clone, Copy)]
struct Tag {
    bytes: [u8; TAG],
    len: usize,
    sealed: bool,
}

impl Tag {
    const NONE: Tag = Tag { bytes: [0; TAG], len: 0, sealed: false };
}

/// Where the bytes read from a peer go.
enum Rx<'n> {
    /// Between frames.
    Frame,
    /// The payload of a message, into cells.
    Msg(Arrival<'n>),
    /// The bytes of a DATA frame: `left` more go to `dst` (expected transfer `k` of the peer).
    Data { k: usize, left: usize },
}

/// A large message's data expected from a peer.
struct DataRecv {
    id: u32,
    dst: *mut u8,
    bytes: u64,
    got: u64,
}

struct Peer<'n> {
    card: Option<(SocketAddr, SocketAddr)>,
    link: Link,
    sock: Option<TcpStream>,
    /// Bytes read and not yet used: `buf[start..end]`.
    buf: Box<[u8]>,
    start: usize,
    end: usize,
    rx: Rx<'n>,
    out: VecDeque<Out>,
    recvs: Vec<DataRecv>,
    /// Our nonce of the handshake of our connection to it.
    nonce: [u8; NONCE_BYTES],
    /// The incarnation of its rank number we talk to (0 until a restart, see "Restarts").
    inc: u32,
    /// Retired for a restart ([`Netmod::retire`]): dead, and waiting for its next incarnation.
    awaiting: bool,
    /// Our connection's handshake once the CHALLENGE came (checks the ACCEPT or REJECT).
    hs: Option<Transcript>,
    /// The link's per-frame MAC keys (when it has them) and frame numbers, each way.
    tx_key: Option<StreamKey>,
    rx_key: Option<StreamKey>,
    tx_seq: u64,
    rx_seq: u64,
    /// The MAC of the frame being read, until it verified.
    mac: Option<FrameMac>,
    /// Bytes read from its connection, and their count at the last check of silence (a link that
    /// delivers is alive whatever happens to heartbeats).
    rx_bytes: u64,
    rx_seen: u64,
    /// The last check of silence that found `rx_bytes` moved.
    rx_at: Option<Instant>,
}

impl Peer<'_> {
    fn new() -> Self {
        Peer {
            card: None,
            link: Link::Idle,
            sock: None,
            buf: Box::new([]),
            start: 0,
            end: 0,
            rx: Rx::Frame,
            out: VecDeque::new(),
            recvs: Vec::new(),
            nonce: [0; NONCE_BYTES],
            inc: 0,
            awaiting: false,
            hs: None,
            tx_key: None,
            rx_key: None,
            tx_seq: 0,
            rx_seq: 0,
            mac: None,
            rx_bytes: 0,
            rx_seen: 0,
            rx_at: None,
        }
    }

    /// Forgets the keys and numbers of a link (a new connection starts afresh).
    fn reset_keys(&mut self) {
        (self.hs, self.tx_key, self.rx_key, self.mac) = (None, None, None, None);
        (self.tx_seq, self.rx_seq) = (0, 0);
    }
}

/// An authenticated connection from a restarted rank's new incarnation that arrived before this
/// process was told of the restart ([`Netmod::restarted`]): neither accepted nor refused yet,
/// and out of epoll meanwhile. Dropped after the timeout, as any connection not set up in time.
struct Parked {
    t: Transcript,
    sock: TcpStream,
    since: Instant,
}

/// Marks a parse error of a connection not yet authenticated: the connection is dropped, and
/// the peer's state is not touched (no death for a frame from who knows whom).
const UNAUTHENTICATED: &str = "unauthenticated: ";

/// Size of each connection's receive buffer.
const RX_BUF: usize = 64 << 10;
/// epoll token of the listener thread's hand-over; peers are their rank.
const HANDOFF: u64 = u64::MAX;

/// The TCP netmod of one process.
pub struct TcpNetmod<'n> {
    me: u32,
    size: u32,
    secret: JobSecret,
    cfg: TcpConfig,
    listener: listen::Listener,
    card: String,
    epoll: OwnedFd,
    peers: Vec<Peer<'n>>,
    parked: Vec<Parked>,
    /// This process's incarnation of its rank number ([`Netmod::set_incarnation`]).
    incarnation: u32,
    hb: Heartbeat,
    /// Deaths whose notice waits for a free cell.
    deaths: Vec<u32>,
    /// Cells taken for arrivals that did not complete (their peer died), for reuse.
    spare: Vec<NetCell<'n>>,
    done: Vec<NetDone>,
    next_check: Instant,
    events: Vec<libc::epoll_event>,
    /// Ranks with a socket (up or being set up), rebuilt when `relist` is set.
    live: Vec<u32>,
    relist: bool,
    polls: u32,
}

impl std::fmt::Debug for TcpNetmod<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TcpNetmod").field("me", &self.me).field("size", &self.size).field("card", &self.card).finish()
    }
}

// SAFETY: the raw pointers are large-message buffers of transfers in flight, valid until the
// transfer is reported (the LmtBackend contracts); the netmod is driven by one thread at a time.
unsafe impl Send for TcpNetmod<'_> {}

/// Writes `bufs` to `sock` with `sendmsg(MSG_NOSIGNAL)`: a write to a connection the peer reset
/// is an `EPIPE` error, never a SIGPIPE (which kills a C program: only Rust's runtime ignores it;
/// `write_vectored` is a plain `writev`). Every write of this netmod goes through here.
pub fn send_nosignal(sock: &TcpStream, bufs: &[IoSlice<'_>]) -> io::Result<usize> {
    socket2::SockRef::from(sock).send_vectored_with_flags(bufs, libc::MSG_NOSIGNAL)
}

/// [`send_nosignal`] until all of `buf` is written (short frames of the handshake).
fn send_all(sock: &TcpStream, mut buf: &[u8]) -> io::Result<()> {
    while !buf.is_empty() {
        match send_nosignal(sock, &[IoSlice::new(buf)]) {
            Ok(0) => return Err(io::ErrorKind::WriteZero.into()),
            Ok(n) => buf = &buf[n..],
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

/// Where a write of a frame of `total` bytes, `at` of them written, stops: the frame's end, but
/// with the cargo feature `failpoints` and a point armed in this process, a frame of at least 4
/// KiB is written in two halves, with a failpoint between them (`tcp-send-mid-<rank>` for a
/// message, `tcp-data-mid-<rank>` for the data of a large message, naming the receiver): a sender
/// can be made to die with half a frame on the wire, as a crash in the middle of a large write
/// would leave it. Tests only.
#[inline(always)]
fn failpoint_stop(at: usize, total: usize) -> usize {
    #[cfg(feature = "failpoints")]
    if total >= 4096 && at < total / 2 && nemesis_shm::failpoint::armed() {
        return total / 2;
    }
    let _ = at;
    total
}

/// A listener on `ip`:`port` with room for a burst of connections in the kernel's queue.
fn bind(ip: IpAddr, port: u16) -> io::Result<TcpListener> {
    let addr = SocketAddr::new(ip, port);
    let s = socket2::Socket::new(socket2::Domain::for_address(addr), socket2::Type::STREAM, None)?;
    s.bind(&addr.into())?;
    s.listen(1024)?;
    Ok(s.into())
}

fn io_err(what: &str, e: io::Error) -> Error {
    Error::Net(format!("{what}: {e}"))
}

impl<'n> TcpNetmod<'n> {
    /// `init`: listens and starts heartbeats, for global rank `me` of a job of `size` ranks whose
    /// secret is `secret` (connections and heartbeats that do not prove it are refused). The
    /// card is [`Netmod::card`].
    pub fn new(me: u32, size: u32, secret: JobSecret, cfg: TcpConfig) -> Result<TcpNetmod<'n>> {
        let ip = cfg.addr.unwrap_or_else(default_addr);
        if ip.is_unspecified() || ip.is_multicast() {
            return Err(Error::Net(format!("cannot listen on {ip}: the address of one interface is needed")));
        }
        let listener = match cfg.ports {
            None => bind(ip, 0).map_err(|e| io_err(&format!("listen on {ip}"), e))?,
            Some((lo, hi)) => (lo..=hi)
                .find_map(|p| bind(ip, p).ok())
                .ok_or_else(|| Error::Net(format!("no free port in {lo}-{hi} on {ip}")))?,
        };
        listener.set_nonblocking(true).map_err(|e| io_err("listener", e))?;
        let port = listener.local_addr().map_err(|e| io_err("listener", e))?.port();
        // SAFETY: epoll_create1 returns a new descriptor (or -1).
        let fd = unsafe { libc::epoll_create1(libc::EPOLL_CLOEXEC) };
        if fd < 0 {
            return Err(io_err("epoll_create1", io::Error::last_os_error()));
        }
        // SAFETY: `fd` is a descriptor we own from here on.
        let epoll = unsafe { OwnedFd::from_raw_fd(fd) };
        let hb = Heartbeat::start(ip, Identity::new(me, secret.clone()), cfg.heartbeat)
            .map_err(|e| io_err("heartbeat socket", e))?;
        let host = if ip.is_ipv6() { format!("[{ip}]") } else { ip.to_string() };
        let card = format!("tcp:{host}:{port}:{}", hb.port());
        let job = listen::Job {
            me,
            size,
            secret: secret.clone(),
            flags: if cfg.integrity { FLAG_INTEGRITY } else { 0 },
            limit: cfg.timeout,
            max: cfg.pending_max,
        };
        let listener = listen::Listener::start(listener, job, SocketAddr::new(ip, port).to_string())
            .map_err(|e| io_err("listener thread", e))?;
        let nm = TcpNetmod {
            me,
            size,
            secret,
            cfg,
            listener,
            card,
            epoll,
            peers: (0..size).map(|_| Peer::new()).collect(),
            parked: Vec::new(),
            incarnation: 0,
            hb,
            deaths: Vec::new(),
            spare: Vec::new(),
            done: Vec::new(),
            next_check: Instant::now(),
            events: vec![libc::epoll_event { events: 0, u64: 0 }; 64],
            live: Vec::new(),
            relist: false,
            polls: 0,
        };
        nm.ctl(libc::EPOLL_CTL_ADD, nm.listener.handoff.as_raw_fd(), libc::EPOLLIN as u32, HANDOFF)?;
        Ok(nm)
    }

    /// The settings in force.
    pub fn config(&self) -> &TcpConfig {
        &self.cfg
    }

    /// Connections the listener holds that have not proved the job's secret yet.
    pub fn held_unauthenticated(&self) -> usize {
        self.listener.shared.held.load(std::sync::atomic::Ordering::Relaxed)
    }

    /// Tests only: peers are to reach this process at `addr` (a forwarder in front of its
    /// listener): the card names it, and so do the proofs this process checks.
    #[doc(hidden)]
    pub fn advertise(&mut self, addr: SocketAddr) {
        let udp = self.hb.port();
        let host = if addr.is_ipv6() { format!("[{}]", addr.ip()) } else { addr.ip().to_string() };
        self.card = format!("tcp:{host}:{}:{udp}", addr.port());
        *self.listener.shared.dialed.lock().unwrap_or_else(std::sync::PoisonError::into_inner) = addr.to_string();
    }

    fn ctl(&self, op: libc::c_int, fd: RawFd, events: u32, token: u64) -> Result<()> {
        let mut ev = libc::epoll_event { events, u64: token };
        // SAFETY: both descriptors are open; `ev` is a valid event for the call.
        if unsafe { libc::epoll_ctl(self.epoll.as_raw_fd(), op, fd, &mut ev) } < 0 {
            return Err(io_err("epoll_ctl", io::Error::last_os_error()));
        }
        Ok(())
    }

    fn peer_index(&self, rank: u32) -> Result<usize> {
        if rank >= self.size || rank == self.me {
            return Err(Error::Net(format!("rank {rank} is not a remote peer (job of {} ranks)", self.size)));
        }
        Ok(rank as usize)
    }

    /// Starts connecting to `rank` (its card is known).
    fn start_connect(&mut self, rank: u32) -> Result<()> {
        self.connect_since(rank, Instant::now())
    }

    /// Starts connecting to `rank`, the timeout counted from `since` (a first attempt's start).
    fn connect_since(&mut self, rank: u32, since: Instant) -> Result<()> {
        let p = &self.peers[rank as usize];
        let Some((addr, _)) = p.card else {
            return Err(Error::Net(format!("no business card for rank {rank}")));
        };
        let sock = socket2::Socket::new(socket2::Domain::for_address(addr), socket2::Type::STREAM, None)
            .map_err(|e| io_err("socket", e))?;
        sock.set_nonblocking(true).map_err(|e| io_err("socket", e))?;
        sock.set_tcp_nodelay(true).map_err(|e| io_err("TCP_NODELAY", e))?;
        match sock.connect(&addr.into()) {
            Ok(()) => {}
            Err(e) if e.raw_os_error() == Some(libc::EINPROGRESS) || e.kind() == io::ErrorKind::WouldBlock => {}
            Err(e) => return Err(self.died(rank, &format!("connect to {addr}: {e}"))),
        }
        let stream: TcpStream = sock.into();
        self.ctl(libc::EPOLL_CTL_ADD, stream.as_raw_fd(), (libc::EPOLLIN | libc::EPOLLOUT) as u32, u64::from(rank))?;
        let p = &mut self.peers[rank as usize];
        p.sock = Some(stream);
        p.link = Link::Connecting { since, hello: false, proved: false };
        p.reset_keys();
        self.relist = true;
        if let Some((_, udp)) = p.card {
            self.hb.watch(rank, udp);
        }
        Ok(())
    }

    /// Marks `rank` dead (`why` is logged): drops its connection and queue, fails its transfers,
    /// and schedules the notice through the receive queue. Returns the error for a caller that
    /// was sending to it.
    fn died(&mut self, rank: u32, why: &str) -> Error {
        let p = &mut self.peers[rank as usize];
        if p.link != Link::Dead {
            self.relist = true;
            tracing::warn!(rank, why, "remote peer is gone");
            p.link = Link::Dead;
            p.sock = None;
            p.buf = Box::new([]);
            p.start = 0;
            p.end = 0;
            if let Rx::Msg(a) = std::mem::replace(&mut p.rx, Rx::Frame)
                && let Some(c) = a.into_cell()
            {
                self.spare.push(c);
            }
            for o in p.out.drain(..) {
                if let Out::Data { id, end: Some(_), .. } = o {
                    let outcome = Outcome::Failed(nemesis_lmt::Error::PeerDied);
                    self.done.push(NetDone { peer: rank, id, send: true, outcome });
                }
            }
            for r in p.recvs.drain(..) {
                let outcome = Outcome::Failed(nemesis_lmt::Error::PeerDied);
                self.done.push(NetDone { peer: rank, id: r.id, send: false, outcome });
            }
            self.hb.unwatch(rank);
            self.deaths.push(rank);
        }
        Error::NetPeerDead { rank }
    }

    /// Our connection to `rank` failed before it was authenticated (`why` is logged): it is
    /// closed, and another attempt follows shortly; the peer is not declared dead for it (only if
    /// no connection is made within the timeout, as for any attempt).
    fn unauthenticated(&mut self, rank: u32, why: &str) {
        let retry = self.cfg.heartbeat.min(Duration::from_millis(200));
        let p = &mut self.peers[rank as usize];
        tracing::warn!(rank, why, "dropped a connection that failed authentication");
        p.sock = None;
        p.buf = Box::new([]);
        (p.start, p.end) = (0, 0);
        p.reset_keys();
        if let Link::Connecting { since, .. } = p.link {
            p.link = Link::Retry { since, at: Instant::now() + retry };
        }
        self.relist = true;
    }

    /// Takes the connections the listener authenticated: refuses those of a dead incarnation,
    /// parks those of an incarnation not announced yet, settles simultaneous connects (REJECT,
    /// with our proof), accepts the rest.
    fn take_authenticated(&mut self) -> Result<()> {
        for listen::Authed { t, sock } in self.listener.take() {
            let (rank, inc) = (t.from, t.from_inc);
            let p = &self.peers[rank as usize];
            if inc < p.inc || (p.awaiting && inc == p.inc) {
                // A late connect of a dead incarnation: it must not stand for the rank.
                tracing::warn!(rank, incarnation = inc, current = p.inc, "refused a connection of a dead incarnation");
                continue;
            }
            if p.awaiting {
                // A newer incarnation than the one retired, before we were told of it: it waits.
                tracing::debug!(
                    rank,
                    incarnation = inc,
                    "connection of a restarted rank parked until its restart is known"
                );
                self.parked.push(Parked { t, sock, since: Instant::now() });
                continue;
            }
            if !settle(p.link, rank, self.me) {
                let _ = send_all(&sock, &frame::frame(Kind::Reject, &t.proof(&self.secret, Step::Reject)));
                continue;
            }
            self.accept_link(t, sock)?;
        }
        Ok(())
    }

    /// Accepts the authenticated connection `sock`, whose handshake was `t`, as the link of its
    /// rank: ACCEPT with our proof, and the link's keys if it has per-frame MACs.
    fn accept_link(&mut self, t: Transcript, sock: TcpStream) -> Result<()> {
        let rank = t.from;
        if send_all(&sock, &frame::frame(Kind::Accept, &t.proof(&self.secret, Step::Accept))).is_err() {
            return Ok(());
        }
        // Our own attempt, if any, is dropped (closing it removes it from epoll).
        let p = &mut self.peers[rank as usize];
        p.sock = None;
        self.ctl(libc::EPOLL_CTL_ADD, sock.as_raw_fd(), libc::EPOLLIN as u32, u64::from(rank))?;
        let keys = t.integrity().then(|| t.stream_keys(&self.secret));
        let p = &mut self.peers[rank as usize];
        p.reset_keys();
        if let Some((up, down)) = keys {
            (p.tx_key, p.rx_key) = (Some(down), Some(up));
        }
        p.sock = Some(sock);
        p.link = Link::Up;
        p.inc = t.from_inc;
        self.relist = true;
        p.buf = vec![0u8; RX_BUF].into_boxed_slice();
        p.start = 0;
        p.end = 0;
        p.rx = Rx::Frame;
        if let Some((_, udp)) = p.card {
            self.hb.watch(rank, udp);
        }
        self.log_restarted_link(rank);
        Ok(())
    }

    /// Says when a link between incarnations other than the first comes up (the proof, in logs,
    /// that recovery reconnected through this netmod).
    fn log_restarted_link(&self, rank: u32) {
        let inc = self.peers[rank as usize].inc;
        if inc > 0 || self.incarnation > 0 {
            tracing::info!(rank, incarnation = inc, own = self.incarnation, "link up with a restarted incarnation");
        }
    }

    /// Our connect to `rank` finished: sends HELLO.
    fn connected(&mut self, rank: u32) -> Result<()> {
        let p = &mut self.peers[rank as usize];
        let Some(sock) = p.sock.as_mut() else { return Ok(()) };
        match sock.take_error() {
            Ok(None) => {}
            Ok(Some(e)) | Err(e) => {
                let why = format!("connect: {e}");
                self.died(rank, &why);
                return Ok(());
            }
        }
        if sock.peer_addr().is_err() {
            return Ok(()); // still connecting
        }
        p.nonce = auth::nonce()?;
        let flags = if self.cfg.integrity { FLAG_INTEGRITY } else { 0 };
        let hello =
            frame::frame(Kind::Hello, &frame::hello_with(self.me, self.incarnation, flags, self.size, &p.nonce));
        if let Err(e) = send_all(sock, &hello) {
            let why = format!("HELLO: {e}");
            self.died(rank, &why);
            return Ok(());
        }
        let fd = sock.as_raw_fd();
        p.buf = vec![0u8; RX_BUF].into_boxed_slice();
        p.start = 0;
        p.end = 0;
        p.rx = Rx::Frame;
        if let Link::Connecting { since, .. } = p.link {
            p.link = Link::Connecting { since, hello: true, proved: false };
        }
        self.ctl(libc::EPOLL_CTL_MOD, fd, libc::EPOLLIN as u32, u64::from(rank))
    }

    /// Reads from `rank`'s connection and moves what arrived on. True if anything did.
    fn pump(&mut self, rank: u32, inbox: &mut dyn Inbox<'n>) -> Result<bool> {
        let mut moved = false;
        // A read that returned less than it asked for emptied the socket's receive queue (the
        // kernel's `tcp_recvmsg` stops short of the length only when no data is queued): what it
        // brought is used, and the next read waits for the next pass instead of costing a system
        // call that finds nothing (one `EAGAIN` after every arrival, on the path of every small
        // message and its reply; an end of stream is seen at the next pass).
        let mut drained = false;
        loop {
            match self.parse(rank, inbox) {
                Ok(Flow::More) if drained => return Ok(moved),
                Ok(Flow::More) => {}
                Ok(Flow::Blocked) => return Ok(moved),
                // Before ACCEPT nothing is authenticated: whatever it sent, no death for it.
                Err(why)
                    if why.starts_with(UNAUTHENTICATED)
                        || matches!(self.peers[rank as usize].link, Link::Connecting { .. }) =>
                {
                    self.unauthenticated(rank, &why);
                    return Ok(true);
                }
                Err(why) => {
                    self.died(rank, &why);
                    return Ok(true);
                }
            }
            let p = &mut self.peers[rank as usize];
            if p.buf.is_empty() {
                // Not connected yet (or no longer).
                return Ok(moved);
            }
            let Some(sock) = p.sock.as_mut() else { return Ok(moved) };
            // Large-message bytes go straight to the receiver's buffer once the staging buffer is
            // used up.
            let r = match p.rx {
                Rx::Data { k, left } if p.start == p.end && left > 0 => {
                    let d = &p.recvs[k];
                    // SAFETY: `d.dst` holds `d.bytes` bytes (start_recv's contract) and
                    // `got + left <= bytes` (checked when the frame began).
                    let dst = unsafe { std::slice::from_raw_parts_mut(d.dst.add(d.got as usize), left) };
                    match sock.read(dst) {
                        Ok(n) if n > 0 => {
                            if let Some(m) = p.mac.as_mut() {
                                m.update(&dst[..n]);
                            }
                            p.rx_bytes += n as u64;
                            let d = &mut p.recvs[k];
                            d.got += n as u64;
                            p.rx = Rx::Data { k, left: left - n };
                            moved = true;
                            drained = n < left;
                            continue;
                        }
                        other => other,
                    }
                }
                _ => {
                    if p.start > 0 {
                        p.buf.copy_within(p.start..p.end, 0);
                        p.end -= p.start;
                        p.start = 0;
                    }
                    let end = p.end;
                    match sock.read(&mut p.buf[end..]) {
                        Ok(n) if n > 0 => {
                            drained = n < p.buf.len() - end;
                            p.end += n;
                            p.rx_bytes += n as u64;
                            moved = true;
                            continue;
                        }
                        other => other,
                    }
                }
            };
            match r {
                Ok(_) => {
                    // End of stream.
                    let p = &mut self.peers[rank as usize];
                    if p.link == Link::Bye {
                        p.sock = None;
                        self.relist = true;
                    } else {
                        self.died(rank, "connection closed without BYE");
                    }
                    return Ok(true);
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Ok(moved),
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => {
                    self.died(rank, &format!("read: {e}"));
                    return Ok(true);
                }
            }
        }
    }

    /// Uses the bytes buffered from `rank`. `Err` is a protocol violation (the peer is broken).
    fn parse(&mut self, rank: u32, inbox: &mut dyn Inbox<'n>) -> std::result::Result<Flow, String> {
        loop {
            let me = self.me;
            let max = self.cfg.max_message;
            let p = &mut self.peers[rank as usize];
            let avail = p.end - p.start;
            match &mut p.rx {
                Rx::Frame => {
                    if avail < PREFIX {
                        return Ok(Flow::More);
                    }
                    let pre: [u8; PREFIX] = p.buf[p.start..p.start + PREFIX].try_into().map_err(|_| "prefix")?;
                    let parsed = frame::parse_prefix(&pre);
                    if let Link::Connecting { since, hello: true, proved: false } = p.link {
                        // Our connection, not authenticated yet: only the peer's CHALLENGE (its
                        // nonce, incarnation and options), which we answer with our proof first.
                        let Ok((Kind::Challenge, _)) = parsed else {
                            return Err(format!("{UNAUTHENTICATED}{parsed:?} before CHALLENGE"));
                        };
                        if avail < PREFIX + frame::CHALLENGE {
                            return Ok(Flow::More);
                        }
                        let at = p.start + PREFIX;
                        let body: &[u8; frame::CHALLENGE] =
                            p.buf[at..at + frame::CHALLENGE].try_into().map_err(|_| "challenge")?;
                        let (na, inc, flags) = frame::parse_challenge(body);
                        if inc < p.inc {
                            return Err(format!(
                                "{UNAUTHENTICATED}incarnation {inc} answered, {} or later expected",
                                p.inc
                            ));
                        }
                        let Some((dialed, _)) = p.card else { return Err(format!("{UNAUTHENTICATED}no card")) };
                        let t = Transcript {
                            from: me,
                            from_inc: self.incarnation,
                            from_flags: if self.cfg.integrity { FLAG_INTEGRITY } else { 0 },
                            nc: p.nonce,
                            to: rank,
                            to_inc: inc,
                            to_flags: flags,
                            na,
                            dialed: dialed.to_string(),
                        };
                        p.start += PREFIX + frame::CHALLENGE;
                        let ours = t.proof(&self.secret, Step::Connect);
                        p.hs = Some(t);
                        let sent = p.sock.as_ref().map(|s| send_all(s, &frame::frame(Kind::Proof, &ours)));
                        if let Some(Err(e)) = sent {
                            return Err(format!("{UNAUTHENTICATED}PROOF: {e}"));
                        }
                        p.link = Link::Connecting { since, hello: true, proved: true };
                        continue;
                    }
                    let (kind, len) = parsed?;
                    match kind {
                        Kind::Challenge | Kind::Proof => return Err(format!("{kind:?} outside a handshake")),
                        Kind::Accept | Kind::Reject => {
                            let Link::Connecting { proved: true, .. } = p.link else {
                                return Err(format!("{kind:?} outside a connection attempt"));
                            };
                            if avail < PREFIX + frame::PROOF {
                                return Ok(Flow::More);
                            }
                            // The accepting side's proof, over the handshake we proved.
                            let step = if kind == Kind::Accept { Step::Accept } else { Step::Reject };
                            let theirs = &p.buf[p.start + PREFIX..p.start + PREFIX + frame::PROOF];
                            let Some(t) = p.hs.take().filter(|t| t.check(&self.secret, step, theirs)) else {
                                return Err(format!("{UNAUTHENTICATED}{kind:?} without the job's secret"));
                            };
                            p.start += PREFIX + frame::PROOF;
                            if kind == Kind::Accept {
                                if t.integrity() {
                                    let (up, down) = t.stream_keys(&self.secret);
                                    (p.tx_key, p.rx_key) = (Some(up), Some(down));
                                }
                                p.inc = t.to_inc;
                                p.link = Link::Up;
                                self.log_restarted_link(rank);
                            } else {
                                p.link = Link::Waiting { since: Instant::now() };
                                p.sock = None;
                                self.relist = true;
                                return Ok(Flow::Blocked);
                            }
                        }
                        Kind::Bye => {
                            if p.link != Link::Up {
                                return Err("BYE outside a connection".into());
                            }
                            if let Some(k) = &p.rx_key {
                                if avail < PREFIX + TAG {
                                    return Ok(Flow::More);
                                }
                                let mut m = k.begin(p.rx_seq);
                                m.update(&p.buf[p.start..p.start + PREFIX]);
                                if !m.verify(&p.buf[p.start + PREFIX..p.start + PREFIX + TAG]) {
                                    return Err(format!("BYE (frame {}) fails its MAC", p.rx_seq));
                                }
                                p.rx_seq += 1;
                                p.start += TAG;
                            }
                            p.start += PREFIX;
                            p.link = Link::Bye;
                            self.hb.unwatch(rank);
                        }
                        Kind::Hello => return Err("HELLO on an open connection".into()),
                        Kind::Msg => {
                            if p.link != Link::Up {
                                return Err("message before ACCEPT".into());
                            }
                            if avail < PREFIX + HEADER_BYTES {
                                return Ok(Flow::More);
                            }
                            let at = p.start + PREFIX;
                            let hdr = frame::parse_header(&p.buf[at..at + HEADER_BYTES]);
                            let room = if hdr.flags & flags::FT_PIGGYBACK != 0 { FT_ROOM } else { 0 };
                            if len < HEADER_BYTES + room {
                                return Err(format!("message frame of {len} bytes"));
                            }
                            let payload = len - HEADER_BYTES - room;
                            if hdr.src != rank || hdr.dst != me || hdr.len as usize != payload || payload > max {
                                return Err(format!(
                                    "message header (src {}, dst {}, len {}) in a frame of {payload} payload bytes from rank {rank}",
                                    hdr.src, hdr.dst, hdr.len
                                ));
                            }
                            if hdr.kind == KIND_PEER_GONE {
                                return Err("reserved message kind".into());
                            }
                            if avail < PREFIX + HEADER_BYTES + room {
                                return Ok(Flow::More);
                            }
                            let ft = &p.buf[at + HEADER_BYTES..at + HEADER_BYTES + room];
                            if let Some(k) = &p.rx_key {
                                let mut m = k.begin(p.rx_seq);
                                m.update(&p.buf[p.start..at + HEADER_BYTES + room]);
                                p.mac = Some(m);
                                p.rx_seq += 1;
                            }
                            p.rx = Rx::Msg(Arrival::new(&hdr, ft, inbox));
                            p.start = at + HEADER_BYTES + room;
                        }
                        Kind::Data => {
                            if p.link != Link::Up {
                                return Err("data before ACCEPT".into());
                            }
                            if avail < PREFIX + DATA_HEAD {
                                return Ok(Flow::More);
                            }
                            let at = p.start + PREFIX;
                            let (id, offset) = frame::parse_data_head(&p.buf[at..at + DATA_HEAD]);
                            let n = len - DATA_HEAD;
                            let Some(k) = p.recvs.iter().position(|d| d.id == id) else {
                                return Err(format!("data for transfer {id}, which is not expected"));
                            };
                            let d = &p.recvs[k];
                            if offset != d.got || d.got + n as u64 > d.bytes {
                                return Err(format!(
                                    "data of transfer {id} at {offset} (+{n}), expected {} of {}",
                                    d.got, d.bytes
                                ));
                            }
                            if let Some(key) = &p.rx_key {
                                let mut m = key.begin(p.rx_seq);
                                m.update(&p.buf[p.start..at + DATA_HEAD]);
                                p.mac = Some(m);
                                p.rx_seq += 1;
                            }
                            p.start = at + DATA_HEAD;
                            p.rx = Rx::Data { k, left: n };
                        }
                    }
                }
                Rx::Msg(a) if p.rx_key.is_some() => {
                    // With MACs, the message's last byte (or, empty, the message) is handed over
                    // only once the frame's MAC verified: until then its last cell is held.
                    let left = a.left();
                    if let Some(m) = p.mac.as_mut() {
                        if left > 1 {
                            let n = avail.min(left - 1);
                            if n == 0 {
                                return Ok(Flow::More);
                            }
                            let used = a.feed(&p.buf[p.start..p.start + n], &mut self.spare, inbox)?;
                            m.update(&p.buf[p.start..p.start + used]);
                            p.start += used;
                            if used < n {
                                return Ok(Flow::Blocked);
                            }
                            continue;
                        }
                        if avail < left + TAG {
                            return Ok(Flow::More);
                        }
                        m.update(&p.buf[p.start..p.start + left]);
                        let tag = &p.buf[p.start + left..p.start + left + TAG];
                        if !p.mac.take().is_some_and(|m| m.verify(tag)) {
                            return Err(format!("message frame {} fails its MAC", p.rx_seq - 1));
                        }
                    }
                    // Verified: the rest, then past the tag.
                    let used = a.feed(&p.buf[p.start..p.start + left], &mut self.spare, inbox)?;
                    p.start += used;
                    if !a.is_whole() {
                        return Ok(Flow::Blocked);
                    }
                    p.start += TAG;
                    p.rx = Rx::Frame;
                }
                Rx::Msg(a) => {
                    let used = a.feed(&p.buf[p.start..p.end], &mut self.spare, inbox)?;
                    p.start += used;
                    if a.is_whole() {
                        p.rx = Rx::Frame;
                    } else if used < avail {
                        // No free cell.
                        return Ok(Flow::Blocked);
                    } else {
                        return Ok(Flow::More);
                    }
                }
                Rx::Data { k, left } => {
                    let (k, left) = (*k, *left);
                    if left > 0 {
                        if avail == 0 {
                            return Ok(Flow::More);
                        }
                        let n = left.min(avail);
                        if let Some(m) = p.mac.as_mut() {
                            m.update(&p.buf[p.start..p.start + n]);
                        }
                        let d = &mut p.recvs[k];
                        // SAFETY: `d.dst` holds `d.bytes` bytes and `got + n <= bytes` (checked
                        // when the frame began).
                        unsafe {
                            nemesis_shm::cell::copy_bytes(p.buf.as_ptr().add(p.start), d.dst.add(d.got as usize), n)
                        };
                        d.got += n as u64;
                        p.start += n;
                        p.rx = Rx::Data { k, left: left - n };
                        continue;
                    }
                    if p.rx_key.is_some() {
                        // The frame's MAC before its bytes count.
                        if avail < TAG {
                            return Ok(Flow::More);
                        }
                        let tag = &p.buf[p.start..p.start + TAG];
                        if !p.mac.take().is_some_and(|m| m.verify(tag)) {
                            return Err(format!("data frame {} fails its MAC", p.rx_seq - 1));
                        }
                        p.start += TAG;
                    }
                    p.rx = Rx::Frame;
                    if p.recvs[k].got == p.recvs[k].bytes {
                        let d = p.recvs.swap_remove(k);
                        let outcome = Outcome::Moved { bytes: d.bytes };
                        self.done.push(NetDone { peer: rank, id: d.id, send: false, outcome });
                    }
                }
            }
        }
    }

    /// Writes what is queued for `rank`. True if anything was written.
    fn flush(&mut self, rank: u32) -> bool {
        let mut moved = false;
        loop {
            let p = &mut self.peers[rank as usize];
            if p.link != Link::Up {
                return moved;
            }
            let Some(sock) = p.sock.as_mut() else { return moved };
            let Some(front) = p.out.front_mut() else { return moved };
            let r = match front {
                Out::Bytes { buf, at, tag } => {
                    if !tag.sealed {
                        // At the front of the queue: this frame is the next to go, numbered now.
                        if let Some(k) = &p.tx_key {
                            *tag = Tag { bytes: k.tag(p.tx_seq, &[buf]), len: TAG, sealed: true };
                            p.tx_seq += 1;
                        }
                        tag.sealed = true;
                    }
                    let n = buf.len();
                    let r = if *at < n {
                        send_nosignal(sock, &[IoSlice::new(&buf[*at..]), IoSlice::new(&tag.bytes[..tag.len])])
                    } else {
                        send_nosignal(sock, &[IoSlice::new(&tag.bytes[*at - n..tag.len])])
                    };
                    r.map(|w| {
                        *at += w;
                        *at == n + tag.len
                    })
                }
                Out::Data { head, ptr, len, at, tag, .. } => {
                    let h = head.len();
                    // SAFETY: the sender's buffer holds `len` bytes here until the transfer is
                    // reported (start_send's contract).
                    let data = unsafe { std::slice::from_raw_parts(*ptr, *len) };
                    if !tag.sealed {
                        if let Some(k) = &p.tx_key {
                            *tag = Tag { bytes: k.tag(p.tx_seq, &[head, data]), len: TAG, sealed: true };
                            p.tx_seq += 1;
                        }
                        tag.sealed = true;
                    }
                    let body = h + *len;
                    let stop = failpoint_stop(*at, body);
                    let stop = if stop < body { stop } else { body + tag.len };
                    let t = &tag.bytes[..tag.len];
                    let r = if *at < h {
                        let d = &data[..stop.min(body) - h];
                        let t = if stop > body { t } else { &[][..] };
                        send_nosignal(sock, &[IoSlice::new(&head[*at..]), IoSlice::new(d), IoSlice::new(t)])
                    } else if *at < body {
                        let t = if stop > body { t } else { &[][..] };
                        send_nosignal(sock, &[IoSlice::new(&data[*at - h..stop.min(body) - h]), IoSlice::new(t)])
                    } else {
                        send_nosignal(sock, &[IoSlice::new(&t[*at - body..])])
                    };
                    r.map(|n| {
                        *at += n;
                        if *at == stop && stop < body {
                            nemesis_shm::failpoint!("tcp-data-mid-{}", rank);
                        }
                        *at == body + tag.len
                    })
                }
            };
            match r {
                Ok(true) => {
                    moved = true;
                    if let Some(Out::Data { id, end: Some(total), .. }) = p.out.pop_front() {
                        let outcome = Outcome::Moved { bytes: total };
                        self.done.push(NetDone { peer: rank, id, send: true, outcome });
                    }
                }
                Ok(false) => moved = true,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return moved,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => {
                    self.died(rank, &format!("write: {e}"));
                    return true;
                }
            }
        }
    }

    /// Declares dead the peers that stopped answering or never finished connecting.
    fn check_silence(&mut self) {
        let now = Instant::now();
        if now < self.next_check {
            return;
        }
        self.next_check = now + self.cfg.heartbeat / 2;
        for p in &mut self.peers {
            if p.rx_bytes != p.rx_seen {
                (p.rx_seen, p.rx_at) = (p.rx_bytes, Some(now));
            }
        }
        for (rank, quiet) in self.hb.silent(self.cfg.timeout) {
            let p = &self.peers[rank as usize];
            if p.rx_at.is_some_and(|t| now.duration_since(t) <= self.cfg.timeout) {
                // Its connection delivered within the timeout: alive, whatever became of its
                // heartbeats (a flood may have drowned them).
                continue;
            }
            if !matches!(p.link, Link::Bye | Link::Dead) {
                self.died(rank, &format!("no heartbeat for {quiet:?}"));
            }
        }
        for rank in 0..self.size {
            match self.peers[rank as usize].link {
                Link::Connecting { since, .. } | Link::Waiting { since } | Link::Retry { since, .. }
                    if now.duration_since(since) > self.cfg.timeout =>
                {
                    self.died(rank, "connection not set up in time");
                }
                Link::Retry { since, at } if now >= at => {
                    // A failed connect declares the peer dead, as on first use.
                    let _ = self.connect_since(rank, since);
                }
                _ => {}
            }
        }
        let limit = self.cfg.timeout;
        self.parked.retain(|c| now.duration_since(c.since) <= limit);
    }

    /// Puts the notices of deaths into the receive queue, as cells allow; cells of arrivals that
    /// never completed go back.
    fn announce_deaths(&mut self, inbox: &mut dyn Inbox<'n>) -> Result<bool> {
        announce_deaths(self.me, &mut self.deaths, &mut self.spare, inbox)
    }

    /// Queues a whole frame (`head` then `body`) for `rank`, or writes it at once if nothing is
    /// queued (with its MAC, on a link with them).
    fn send_frame(&mut self, rank: u32, head: &[u8], body: &[u8]) -> Result<()> {
        let p = &mut self.peers[rank as usize];
        let total = head.len() + body.len();
        let mut written = 0;
        let mut tag = Tag::NONE;
        if p.link == Link::Up
            && p.out.is_empty()
            && let Some(sock) = p.sock.as_mut()
        {
            if let Some(k) = &p.tx_key {
                tag = Tag { bytes: k.tag(p.tx_seq, &[head, body]), len: TAG, sealed: true };
                p.tx_seq += 1;
            }
            tag.sealed = true;
            let stop = failpoint_stop(0, total);
            let body_part = &body[..(stop - head.len()).min(body.len())];
            let t = if stop == total { &tag.bytes[..tag.len] } else { &[][..] };
            match send_nosignal(sock, &[IoSlice::new(head), IoSlice::new(body_part), IoSlice::new(t)]) {
                Ok(n) => written = n,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock || e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(self.died(rank, &format!("write: {e}"))),
            }
            if written == stop && stop < total {
                nemesis_shm::failpoint!("tcp-send-mid-{}", rank);
            }
        }
        if written < total + tag.len {
            // What is left of the frame, then of its tag (whose bytes are kept in `tag`).
            let mut buf = Vec::with_capacity(total);
            let mut skip = written.min(total);
            for b in [head, body] {
                if skip >= b.len() {
                    skip -= b.len();
                    continue;
                }
                buf.extend_from_slice(&b[skip..]);
                skip = 0;
            }
            let mut t = tag;
            if written > total {
                // Part of the tag went: the rest only.
                let w = written - total;
                t.bytes.copy_within(w..t.len, 0);
                t.len -= w;
            }
            self.peers[rank as usize].out.push_back(Out::Bytes { buf, at: 0, tag: t });
        }
        Ok(())
    }

    /// Makes sure a connection to `rank` exists or is under way; errors if it is dead or gone.
    fn ensure_link(&mut self, rank: u32) -> Result<()> {
        let p = &self.peers[rank as usize];
        match p.link {
            // A restarted process whose peer restarts with it: the card comes from the launcher
            // ([`Netmod::restarted`]); what is sent meanwhile waits.
            Link::Idle if p.card.is_none() && self.incarnation > 0 => Ok(()),
            Link::Idle => self.start_connect(rank),
            Link::Dead | Link::Bye => Err(Error::NetPeerDead { rank }),
            _ => Ok(()),
        }
    }
}

/// Whether to accept a connection from rank `from` whose HELLO arrived while our link with it is
/// `link`. When both sides connect at once, the connection the lower rank made wins: the higher
/// rank accepts it (and drops its own attempt), the lower rank refuses the other. Each side decides
/// alone, and both decide for the same connection.
fn settle(link: Link, from: u32, me: u32) -> bool {
    match link {
        Link::Idle | Link::Waiting { .. } | Link::Retry { .. } => true,
        Link::Connecting { .. } => from < me,
        Link::Up | Link::Bye | Link::Dead => false,
    }
}

/// Connections read directly on every pass (above, epoll tells which to read).
const DIRECT_MAX: usize = 8;
/// With direct reads, epoll (new connections, connections being set up) runs every this many
/// passes.
const EPOLL_EVERY: u32 = 16;

impl<'n> TcpNetmod<'n> {
    /// The end of a pass: connections blocked on cells, queued sends, silence, deaths.
    fn after_reads(&mut self, inbox: &mut dyn Inbox<'n>) -> Result<bool> {
        let mut moved = false;
        for k in 0..self.live.len() {
            let rank = self.live[k];
            let p = &self.peers[rank as usize];
            if p.link == Link::Up && (p.start < p.end || matches!(&p.rx, Rx::Msg(a) if !a.has_cell())) {
                moved |= self.pump(rank, inbox)?;
            }
            if !self.peers[rank as usize].out.is_empty() {
                moved |= self.flush(rank);
            }
        }
        self.check_silence();
        if !self.deaths.is_empty() || !self.spare.is_empty() {
            moved |= self.announce_deaths(inbox)?;
        }
        Ok(moved)
    }
}

/// What parsing stopped on.
enum Flow {
    /// It needs more bytes from the socket.
    More,
    /// It cannot go on now (no free cell, or the connection changed).
    Blocked,
}

impl<'n> Netmod<'n> for TcpNetmod<'n> {
    fn card(&self) -> String {
        self.card.clone()
    }

    fn connect(&mut self, rank: u32, card: &str) -> Result<()> {
        let i = self.peer_index(rank)?;
        let parsed =
            parse_card(card).ok_or_else(|| Error::Net(format!("bad business card {card:?} for rank {rank}")))?;
        self.peers[i].card = Some(parsed);
        // Watched from now on, connected or not: a receive may wait on a peer we never talked to.
        self.hb.watch(rank, parsed.1);
        Ok(())
    }

    fn send(&mut self, dst: u32, hdr: &MsgHeader, ft: Option<&PiggybackBytes>, payload: &[u8]) -> Result<()> {
        self.peer_index(dst)?;
        if payload.len() > self.cfg.max_message {
            return Err(Error::TooLarge { len: payload.len(), max: self.cfg.max_message });
        }
        self.ensure_link(dst)?;
        let mut h = *hdr;
        h.len = payload.len() as u32;
        h.src = self.me;
        h.dst = dst;
        // Only the piggyback flag travels, and only with a piggyback.
        h.flags = if ft.is_some() { flags::FT_PIGGYBACK } else { 0 };
        let room = if ft.is_some() { FT_ROOM } else { 0 };
        let mut head = [0u8; PREFIX + HEADER_BYTES + FT_ROOM];
        head[..PREFIX].copy_from_slice(&frame::prefix(Kind::Msg, HEADER_BYTES + room + payload.len()));
        head[PREFIX..PREFIX + HEADER_BYTES].copy_from_slice(&frame::header_bytes(&h));
        if let Some(pb) = ft {
            let at = PREFIX + HEADER_BYTES;
            head[at..at + pb.len()].copy_from_slice(pb);
        }
        self.send_frame(dst, &head[..PREFIX + HEADER_BYTES + room], payload)
    }

    fn poll(&mut self, inbox: &mut dyn Inbox<'n>) -> Result<bool> {
        let mut moved = false;
        if self.relist {
            self.relist = false;
            let peers = &self.peers;
            self.live.clear();
            self.live.extend((0..self.size).filter(|&r| peers[r as usize].sock.is_some()));
        }
        // With few connections, reading each directly costs one system call where epoll and a
        // read cost two (the latency of small messages); epoll still runs every few passes for new
        // connections, and always with many.
        let direct = self.live.len() <= DIRECT_MAX;
        if direct {
            for k in 0..self.live.len() {
                let rank = self.live[k];
                if self.peers[rank as usize].link == Link::Up {
                    moved |= self.pump(rank, inbox)?;
                }
            }
        }
        self.polls = self.polls.wrapping_add(1);
        let setting_up = self.live.iter().any(|&r| self.peers[r as usize].link != Link::Up);
        if direct && !setting_up && !self.polls.is_multiple_of(EPOLL_EVERY) {
            moved |= self.after_reads(inbox)?;
            return Ok(moved);
        }
        let cap = self.events.len() as i32;
        // SAFETY: `events` holds `cap` entries for the kernel to fill.
        let n = unsafe { libc::epoll_wait(self.epoll.as_raw_fd(), self.events.as_mut_ptr(), cap, 0) };
        if n < 0 {
            let e = io::Error::last_os_error();
            if e.kind() != io::ErrorKind::Interrupted {
                return Err(io_err("epoll_wait", e));
            }
        }
        for k in 0..n.max(0) as usize {
            let token = self.events[k].u64;
            if token == HANDOFF {
                self.take_authenticated()?;
                moved = true;
            } else if token < u64::from(self.size) {
                let rank = token as u32;
                if let Link::Connecting { hello: false, .. } = self.peers[rank as usize].link {
                    self.connected(rank)?;
                }
                if !direct || self.peers[rank as usize].link != Link::Up {
                    moved |= self.pump(rank, inbox)?;
                }
            }
        }
        if self.relist {
            return Ok(true);
        }
        moved |= self.after_reads(inbox)?;
        Ok(moved)
    }

    fn busy(&self) -> bool {
        self.peers.iter().any(|p| !p.out.is_empty() && !matches!(p.link, Link::Dead | Link::Bye))
    }

    fn finalize(&mut self) -> Result<()> {
        let deadline = Instant::now() + self.cfg.timeout;
        for rank in 0..self.size {
            if self.peers[rank as usize].link == Link::Up {
                let _ = self.send_frame(rank, &frame::prefix(Kind::Bye, 0), &[]);
            }
        }
        while self.busy() && Instant::now() < deadline {
            for rank in 0..self.size {
                if !self.peers[rank as usize].out.is_empty() {
                    self.flush(rank);
                }
            }
            std::thread::sleep(Duration::from_micros(100));
        }
        for p in &mut self.peers {
            if let Some(s) = p.sock.take() {
                let _ = s.shutdown(std::net::Shutdown::Write);
            }
            if p.link == Link::Up {
                p.link = Link::Bye;
            }
        }
        Ok(())
    }

    fn set_incarnation(&mut self, incarnation: u32) {
        self.incarnation = incarnation;
        // The listener thread answers HELLOs with it (its CHALLENGE): a restarted rank is dialed
        // as its new incarnation.
        self.listener.shared.incarnation.store(incarnation, std::sync::atomic::Ordering::Relaxed);
    }

    fn retire(&mut self, rank: u32) -> Result<()> {
        let i = self.peer_index(rank)?;
        if self.peers[i].link != Link::Dead {
            self.died(rank, "retired: it restarts");
        }
        let p = &mut self.peers[i];
        p.awaiting = true;
        p.card = None;
        let retired = p.inc;
        self.hb.unwatch(rank);
        self.parked.retain(|c| c.t.from != rank || c.t.from_inc > retired);
        Ok(())
    }

    fn restarted(&mut self, rank: u32, incarnation: u32, card: &str) -> Result<bool> {
        let i = self.peer_index(rank)?;
        let parsed =
            parse_card(card).ok_or_else(|| Error::Net(format!("bad business card {card:?} for rank {rank}")))?;
        let p = &mut self.peers[i];
        if incarnation < p.inc || (incarnation == p.inc && (p.awaiting || p.link == Link::Dead)) {
            // Old news: that incarnation is dead already.
            return Ok(false);
        }
        let was_retired = p.awaiting;
        if p.link == Link::Dead {
            // Everything of the dead incarnation went when it died: a fresh link, made on first
            // use as at the start.
            p.link = Link::Idle;
            p.sock = None;
            p.buf = Box::new([]);
            (p.start, p.end) = (0, 0);
            p.rx = Rx::Frame;
            p.out.clear();
            p.recvs.clear();
        }
        p.card = Some(parsed);
        p.inc = incarnation;
        p.awaiting = false;
        // Its heartbeats come from its new address, counted from now.
        self.hb.unwatch(rank);
        self.hb.watch(rank, parsed.1);
        for c in std::mem::take(&mut self.parked) {
            if c.t.from != rank || c.t.from_inc > incarnation {
                self.parked.push(c);
            } else if c.t.from_inc == incarnation && self.peers[i].link == Link::Idle {
                self.accept_link(c.t, c.sock)?;
            }
        }
        if self.peers[i].link == Link::Idle && !self.peers[i].out.is_empty() {
            // Sends waited for the card (a rank restarted with this one); a failed connect
            // declares the peer dead, as on first use.
            let _ = self.start_connect(rank);
        }
        tracing::debug!(rank, incarnation, card, was_retired, "restarted peer's card");
        Ok(was_retired)
    }
}

impl LmtBackend for TcpNetmod<'_> {
    unsafe fn start_send(&mut self, peer: u32, id: u32, addr: *const u8, bytes: u64) -> nemesis_lmt::Result<()> {
        self.peer_index(peer).map_err(|e| nemesis_lmt::Error::Cma(e.to_string()))?;
        if self.ensure_link(peer).is_err() {
            return Err(nemesis_lmt::Error::PeerDied);
        }
        let mut offset = 0u64;
        while offset < bytes {
            let n = (bytes - offset).min(DATA_FRAME as u64) as usize;
            let end = (offset + n as u64 == bytes).then_some(bytes);
            let head = frame::data_head(id, offset, n);
            // SAFETY: `offset + n <= bytes`: inside the sender's buffer (the caller's contract).
            let ptr = unsafe { addr.add(offset as usize) };
            self.peers[peer as usize].out.push_back(Out::Data { head, ptr, len: n, at: 0, id, end, tag: Tag::NONE });
            offset += n as u64;
        }
        self.flush(peer);
        Ok(())
    }

    unsafe fn start_recv(
        &mut self,
        peer: u32,
        id: u32,
        dst: *mut u8,
        bytes: u64,
        _remote: Option<nemesis_lmt::RemoteBuf>,
    ) -> nemesis_lmt::Result<nemesis_lmt::RecvPlan> {
        self.peer_index(peer).map_err(|e| nemesis_lmt::Error::Cma(e.to_string()))?;
        let p = &mut self.peers[peer as usize];
        if matches!(p.link, Link::Dead | Link::Bye) {
            return Err(nemesis_lmt::Error::PeerDied);
        }
        if p.recvs.iter().any(|d| d.id == id) {
            return Err(nemesis_lmt::Error::Corrupt { what: "transfer id already expected", value: u64::from(id) });
        }
        p.recvs.push(DataRecv { id, dst, bytes, got: 0 });
        Ok(nemesis_lmt::RecvPlan::Stream)
    }

    fn take_lmt_done(&mut self) -> Vec<NetDone> {
        std::mem::take(&mut self.done)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn simultaneous_connects_settle_on_the_lower_ranks_connection() {
        let now = Instant::now();
        for hello in [false, true] {
            let c = Link::Connecting { since: now, hello, proved: hello };
            // Ranks 2 and 5 connect to each other at once: 5 accepts 2's, 2 refuses 5's.
            assert!(settle(c, 2, 5));
            assert!(!settle(c, 5, 2));
        }
        assert!(settle(Link::Idle, 7, 1) && settle(Link::Idle, 1, 7));
        assert!(settle(Link::Waiting { since: now }, 9, 1), "refused earlier: the peer's own comes");
        for l in [Link::Up, Link::Bye, Link::Dead] {
            assert!(!settle(l, 0, 1) && !settle(l, 1, 0), "{l:?}");
        }
    }

    #[test]
    fn cards_parse_and_config_is_checked() {
        let (t, u) = parse_card("tcp:10.1.2.3:4000:4001").unwrap();
        assert_eq!((t.to_string(), u.port()), ("10.1.2.3:4000".into(), 4001));
        let (t, _) = parse_card("tcp:[::1]:5:6").unwrap();
        assert_eq!(t.to_string(), "[::1]:5");
        for bad in [
            "udp:1.2.3.4:1:2",
            "tcp:1.2.3.4:1",
            "tcp:x:1:2",
            "tcp:1.2.3.4:99999:1",
            "tcp:[1.2.3.4]:1:2",
            "tcp:[::1:1:2",
        ] {
            assert!(parse_card(bad).is_none(), "{bad}");
        }
        let c = TcpConfig::default();
        assert_eq!(c.detection_bound(), Duration::from_millis(5500));
    }
}
