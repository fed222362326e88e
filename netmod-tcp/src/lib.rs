//! # nemesis-netmod-tcp: the TCP network module
//!
//! Implements [`nemesis_shm::netmod::Netmod`] (messages, through the receive queue) and
//! [`nemesis_lmt::LmtBackend`] (the data of large messages, streamed) over TCP:
//! - **connections**: one per pair of ranks, made on first use (non-blocking connect, then the
//!   handshake: HELLO naming the rank with a nonce, CHALLENGE and PROOF, each side proving the
//!   job's secret over both ranks and both nonces, `nemesis_shm::auth`; a connection that fails
//!   it is closed and changes no rank's state). Simultaneous connects are settled by rank: the accepting
//!   side refuses (REJECT) a connection from a higher rank while its own attempt to that rank is
//!   under way, and accepts one from a lower rank, dropping its own attempt. Data flows only after
//!   ACCEPT, so nothing is ever written on a connection that loses; messages wait per peer, not
//!   per socket. `TCP_NODELAY` on every socket.
//! - **framing** ([`frame`]): the cell header, so arrivals are cells already; a direct write when
//!   nothing is queued for the peer, else queued (copied) behind, keeping the order.
//! - **arrivals** are copied from the socket's buffer into cells of the process's netmod pool and
//!   enqueued on its receive queue; with no free cell the socket is left alone (flow control).
//! - **large messages**: after the rendezvous, DATA frames are written from the sender's buffer and
//!   read into the receiver's buffer, without staging.
//! - **failures**: a reset, or an end of stream without BYE, or heartbeats (the shared
//!   [`nemesis_shm::netmod::heartbeat`]) missing
//!   for the timeout, make the peer dead: a [`KIND_PEER_GONE`] notice follows its last arrival
//!   in the receive queue; its transfers fail.
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

use std::collections::VecDeque;
use std::io::{self, IoSlice, Read};
use std::net::{IpAddr, SocketAddr, TcpListener, TcpStream};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::time::{Duration, Instant};

use nemesis_lmt::{LmtBackend, NetDone, Outcome};
use nemesis_shm::auth::{self, JobSecret, NONCE_BYTES};
use nemesis_shm::cell::{FT_ROOM, HEADER_BYTES, flags};
use nemesis_shm::netmod::{Arrival, Inbox, KIND_PEER_GONE, Netmod, announce_deaths};
use nemesis_shm::{Error, MsgHeader, NetCell, PiggybackBytes, Result};

use frame::{DATA_FRAME, DATA_HEAD, Kind, PREFIX};
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
}

impl Default for TcpConfig {
    fn default() -> Self {
        TcpConfig {
            addr: None,
            ports: None,
            heartbeat: Timing::default().period,
            timeout: Timing::default().timeout,
            max_message: 16 << 20,
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
fn parse_card(card: &str) -> Option<(SocketAddr, SocketAddr)> {
    let rest = card.strip_prefix("tcp:")?;
    let mut it = rest.rsplitn(3, ':');
    let udp: u16 = it.next()?.parse().ok()?;
    let port: u16 = it.next()?.parse().ok()?;
    let ip: IpAddr = it.next()?.trim_start_matches('[').trim_end_matches(']').parse().ok()?;
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
    Up,
    /// The peer said BYE: it sends nothing more, and takes nothing more.
    Bye,
    Dead,
}

/// What is queued for a peer.
enum Out {
    /// A frame, or what is left of it.
    Bytes { buf: Vec<u8>, at: usize },
    /// A DATA frame of a large message, written from the sender's buffer.
    Data { head: [u8; PREFIX + DATA_HEAD], ptr: *const u8, len: usize, at: usize, id: u32, end: Option<u64> },
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
        }
    }
}

/// An accepted connection before it is authenticated: reading its HELLO (`claim` empty), then,
/// once CHALLENGE is sent, its PROOF (`claim`: the rank it claims, its nonce and ours). Nothing
/// of any rank's state is touched before the PROOF verifies.
struct Pending {
    sock: TcpStream,
    buf: [u8; PENDING_BUF],
    want: usize,
    got: usize,
    since: Instant,
    claim: Option<(u32, [u8; NONCE_BYTES], [u8; NONCE_BYTES])>,
    /// The incarnation its HELLO named.
    inc: u32,
}

/// An authenticated connection from a restarted rank's new incarnation that arrived before this
/// process was told of the restart ([`Netmod::restarted`]): neither accepted nor refused yet,
/// and out of epoll meanwhile. Dropped after the timeout, as any connection not set up in time.
struct Parked {
    rank: u32,
    inc: u32,
    sock: TcpStream,
    since: Instant,
}

/// Marks a parse error of a connection not yet authenticated: the connection is dropped, and
/// the peer's state is not touched (no death for a frame from who knows whom).
const UNAUTHENTICATED: &str = "unauthenticated: ";

/// Room for a HELLO frame, then for a PROOF frame.
const PENDING_BUF: usize = PREFIX + if frame::HELLO > frame::PROOF { frame::HELLO } else { frame::PROOF };

/// Size of each connection's receive buffer.
const RX_BUF: usize = 64 << 10;
/// epoll token of the listener; accepted connections before HELLO are `PENDING + index`; peers
/// are their rank.
const LISTENER: u64 = u64::MAX;
const PENDING: u64 = 1 << 40;

/// The TCP netmod of one process.
pub struct TcpNetmod<'n> {
    me: u32,
    size: u32,
    secret: JobSecret,
    cfg: TcpConfig,
    listener: TcpListener,
    card: String,
    epoll: OwnedFd,
    peers: Vec<Peer<'n>>,
    pending: Vec<Option<Pending>>,
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

fn io_err(what: &str, e: io::Error) -> Error {
    Error::Net(format!("{what}: {e}"))
}

impl<'n> TcpNetmod<'n> {
    /// `init`: listens and starts heartbeats, for global rank `me` of a job of `size` ranks whose
    /// secret is `secret` (connections and heartbeats that do not prove it are refused). The
    /// card is [`Netmod::card`].
    pub fn new(me: u32, size: u32, secret: JobSecret, cfg: TcpConfig) -> Result<TcpNetmod<'n>> {
        let ip = cfg.addr.unwrap_or_else(default_addr);
        let listener = match cfg.ports {
            None => TcpListener::bind((ip, 0)).map_err(|e| io_err(&format!("listen on {ip}"), e))?,
            Some((lo, hi)) => (lo..=hi)
                .find_map(|p| TcpListener::bind((ip, p)).ok())
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
        let nm = TcpNetmod {
            me,
            size,
            secret,
            cfg,
            listener,
            card,
            epoll,
            peers: (0..size).map(|_| Peer::new()).collect(),
            pending: Vec::new(),
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
        nm.ctl(libc::EPOLL_CTL_ADD, nm.listener.as_raw_fd(), libc::EPOLLIN as u32, LISTENER)?;
        Ok(nm)
    }

    /// The settings in force.
    pub fn config(&self) -> &TcpConfig {
        &self.cfg
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
        p.link = Link::Connecting { since: Instant::now(), hello: false, proved: false };
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

    /// Our connection to `rank` failed authentication (`why` is logged): it is closed, and the
    /// attempt waits as if refused; the peer is not declared dead for it (only if no connection
    /// is made within the timeout, as for any attempt).
    fn unauthenticated(&mut self, rank: u32, why: &str) {
        let p = &mut self.peers[rank as usize];
        tracing::warn!(rank, why, "dropped a connection that failed authentication");
        p.sock = None;
        p.buf = Box::new([]);
        (p.start, p.end) = (0, 0);
        if let Link::Connecting { since, .. } = p.link {
            p.link = Link::Waiting { since };
        }
        self.relist = true;
    }

    /// Accepts waiting connections.
    fn accept(&mut self) -> Result<bool> {
        let mut any = false;
        loop {
            match self.listener.accept() {
                Ok((s, _)) => {
                    any = true;
                    s.set_nonblocking(true).map_err(|e| io_err("accept", e))?;
                    s.set_nodelay(true).map_err(|e| io_err("TCP_NODELAY", e))?;
                    let i = match self.pending.iter().position(Option::is_none) {
                        Some(i) => i,
                        None => {
                            self.pending.push(None);
                            self.pending.len() - 1
                        }
                    };
                    self.ctl(libc::EPOLL_CTL_ADD, s.as_raw_fd(), libc::EPOLLIN as u32, PENDING + i as u64)?;
                    let buf = [0u8; PENDING_BUF];
                    let want = PREFIX + frame::HELLO;
                    let since = Instant::now();
                    self.pending[i] = Some(Pending { sock: s, buf, want, got: 0, since, claim: None, inc: 0 });
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Ok(any),
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                // Out of descriptors or a connection reset before accept: try again later.
                Err(e) => {
                    tracing::debug!(error = %e, "accept");
                    return Ok(any);
                }
            }
        }
    }

    /// Reads the HELLO, then the PROOF, of accepted connection `i`, answers the HELLO with
    /// CHALLENGE, and once the PROOF verifies accepts or refuses the connection. A connection that
    /// fails is closed, nothing else changes.
    fn read_hello(&mut self, i: usize) -> Result<()> {
        let Some(pc) = self.pending[i].as_mut() else { return Ok(()) };
        let want = pc.want;
        let n = match pc.sock.read(&mut pc.buf[pc.got..want]) {
            Ok(0) => {
                self.pending[i] = None;
                return Ok(());
            }
            Ok(n) => n,
            Err(e) if e.kind() == io::ErrorKind::WouldBlock || e.kind() == io::ErrorKind::Interrupted => return Ok(()),
            Err(_) => {
                self.pending[i] = None;
                return Ok(());
            }
        };
        pc.got += n;
        if pc.got < want {
            return Ok(());
        }
        let Some(mut pc) = self.pending[i].take() else { return Ok(()) };
        let Some((rank, nc, na)) = pc.claim else {
            // The HELLO: answer our nonce and our proof, then wait for the PROOF.
            let hello = pc.buf.first_chunk().and_then(|h| frame::check_hello(h, self.me, self.size));
            let Some((rank, nc)) = hello else {
                tracing::warn!("refused a connection that is not a HELLO of this job");
                return Ok(());
            };
            pc.inc = pc.buf.first_chunk().map_or(0, frame::hello_incarnation);
            let na = auth::nonce()?;
            let mut body = [0u8; frame::CHALLENGE];
            body[..NONCE_BYTES].copy_from_slice(&na);
            body[NONCE_BYTES..].copy_from_slice(&auth::accept_proof(&self.secret, rank, self.me, &nc, &na));
            if send_all(&pc.sock, &frame::frame(Kind::Challenge, &body)).is_ok() {
                (pc.claim, pc.want, pc.got) = (Some((rank, nc, na)), PREFIX + frame::PROOF, 0);
                self.pending[i] = Some(pc);
            }
            return Ok(());
        };
        let prefix: Option<&[u8; PREFIX]> = pc.buf.first_chunk();
        let proof = &pc.buf[PREFIX..PREFIX + frame::PROOF];
        let proved = prefix.is_some_and(|p| matches!(frame::parse_prefix(p), Ok((Kind::Proof, _))))
            && auth::check_proof(&self.secret, false, rank, self.me, &nc, &na, proof);
        if !proved {
            tracing::warn!(claimed = rank, "refused a connection that failed authentication");
            return Ok(());
        }
        let (inc, sock) = (pc.inc, pc.sock);
        let p = &self.peers[rank as usize];
        if inc < p.inc || (p.awaiting && inc == p.inc) {
            // A late connect of a dead incarnation: it must not stand for the rank.
            tracing::warn!(rank, incarnation = inc, current = p.inc, "refused a connection of a dead incarnation");
            return Ok(());
        }
        if p.awaiting {
            // A newer incarnation than the one retired, before we were told of it: it waits.
            tracing::debug!(
                rank,
                incarnation = inc,
                "connection of a restarted rank parked until its restart is known"
            );
            self.ctl(libc::EPOLL_CTL_DEL, sock.as_raw_fd(), 0, 0)?;
            self.parked.push(Parked { rank, inc, sock, since: Instant::now() });
            return Ok(());
        }
        if !settle(p.link, rank, self.me) {
            let _ = send_all(&sock, &frame::prefix(Kind::Reject, 0));
            return Ok(());
        }
        self.accept_link(rank, inc, sock, libc::EPOLL_CTL_MOD)
    }

    /// Accepts the authenticated connection `sock` of incarnation `inc` of `rank` as its link
    /// (`op`: how to enter it in epoll under the rank's token).
    fn accept_link(&mut self, rank: u32, inc: u32, sock: TcpStream, op: libc::c_int) -> Result<()> {
        if send_all(&sock, &frame::prefix(Kind::Accept, 0)).is_err() {
            return Ok(());
        }
        // Our own attempt, if any, is dropped (closing it removes it from epoll).
        let p = &mut self.peers[rank as usize];
        p.sock = None;
        self.ctl(op, sock.as_raw_fd(), libc::EPOLLIN as u32, u64::from(rank))?;
        let p = &mut self.peers[rank as usize];
        p.sock = Some(sock);
        p.link = Link::Up;
        p.inc = inc;
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
        let hello = frame::frame(Kind::Hello, &frame::hello_of(self.me, self.incarnation, self.size, &p.nonce));
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
                Err(why) if why.starts_with(UNAUTHENTICATED) => {
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
                Rx::Data { k, left } if p.start == p.end => {
                    let d = &p.recvs[k];
                    // SAFETY: `d.dst` holds `d.bytes` bytes (start_recv's contract) and
                    // `got + left <= bytes` (checked when the frame began).
                    let dst = unsafe { std::slice::from_raw_parts_mut(d.dst.add(d.got as usize), left) };
                    match sock.read(dst) {
                        Ok(n) if n > 0 => {
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
                        // Our connection, not authenticated yet: only the peer's CHALLENGE, with
                        // a proof of the job's secret for our nonce and its own.
                        let Ok((Kind::Challenge, _)) = parsed else {
                            return Err(format!("{UNAUTHENTICATED}{parsed:?} before CHALLENGE"));
                        };
                        if avail < PREFIX + frame::CHALLENGE {
                            return Ok(Flow::More);
                        }
                        let body = &p.buf[p.start + PREFIX..p.start + PREFIX + frame::CHALLENGE];
                        let mut na = [0u8; NONCE_BYTES];
                        na.copy_from_slice(&body[..NONCE_BYTES]);
                        let theirs = &body[NONCE_BYTES..];
                        if !auth::check_proof(&self.secret, true, me, rank, &p.nonce, &na, theirs) {
                            return Err(format!("{UNAUTHENTICATED}CHALLENGE without the job's secret"));
                        }
                        p.start += PREFIX + frame::CHALLENGE;
                        let ours = auth::connect_proof(&self.secret, me, rank, &p.nonce, &na);
                        let sent = p.sock.as_ref().map(|s| send_all(s, &frame::frame(Kind::Proof, &ours)));
                        if let Some(Err(e)) = sent {
                            return Err(format!("PROOF: {e}"));
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
                            p.start += PREFIX;
                            if kind == Kind::Accept {
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
                            p.start = at + DATA_HEAD;
                            p.rx = Rx::Data { k, left: n };
                        }
                    }
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
                Out::Bytes { buf, at } => send_nosignal(sock, &[IoSlice::new(&buf[*at..])]).map(|n| {
                    *at += n;
                    *at == buf.len()
                }),
                Out::Data { head, ptr, len, at, .. } => {
                    let h = head.len();
                    // SAFETY: the sender's buffer holds `len` bytes here until the transfer is
                    // reported (start_send's contract).
                    let data = unsafe { std::slice::from_raw_parts(*ptr, *len) };
                    let stop = failpoint_stop(*at, h + *len);
                    let r = if *at < h {
                        send_nosignal(sock, &[IoSlice::new(&head[*at..]), IoSlice::new(&data[..stop - h])])
                    } else {
                        send_nosignal(sock, &[IoSlice::new(&data[*at - h..stop - h])])
                    };
                    r.map(|n| {
                        *at += n;
                        if *at == stop && stop < h + *len {
                            nemesis_shm::failpoint!("tcp-data-mid-{}", rank);
                        }
                        *at == h + *len
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
        for (rank, quiet) in self.hb.silent(self.cfg.timeout) {
            if !matches!(self.peers[rank as usize].link, Link::Bye | Link::Dead) {
                self.died(rank, &format!("no heartbeat for {quiet:?}"));
            }
        }
        for rank in 0..self.size {
            if let Link::Connecting { since, .. } | Link::Waiting { since } = self.peers[rank as usize].link
                && now.duration_since(since) > self.cfg.timeout
            {
                self.died(rank, "connection not set up in time");
            }
        }
        let limit = self.cfg.timeout;
        for slot in &mut self.pending {
            if slot.as_ref().is_some_and(|p| now.duration_since(p.since) > limit) {
                *slot = None;
            }
        }
        self.parked.retain(|c| now.duration_since(c.since) <= limit);
    }

    /// Puts the notices of deaths into the receive queue, as cells allow; cells of arrivals that
    /// never completed go back.
    fn announce_deaths(&mut self, inbox: &mut dyn Inbox<'n>) -> Result<bool> {
        announce_deaths(self.me, &mut self.deaths, &mut self.spare, inbox)
    }

    /// Queues a whole frame (`head` then `body`) for `rank`, or writes it at once if nothing is
    /// queued.
    fn send_frame(&mut self, rank: u32, head: &[u8], body: &[u8]) -> Result<()> {
        let p = &mut self.peers[rank as usize];
        let parts = [head, body];
        let total = head.len() + body.len();
        let mut written = 0;
        if p.link == Link::Up
            && p.out.is_empty()
            && let Some(sock) = p.sock.as_mut()
        {
            let stop = failpoint_stop(0, total);
            let body_part = &body[..(stop - head.len()).min(body.len())];
            match send_nosignal(sock, &[IoSlice::new(head), IoSlice::new(body_part)]) {
                Ok(n) => written = n,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock || e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(self.died(rank, &format!("write: {e}"))),
            }
            if written == stop && stop < total {
                nemesis_shm::failpoint!("tcp-send-mid-{}", rank);
            }
        }
        if written < total {
            let mut buf = Vec::with_capacity(total - written);
            let mut skip = written;
            for b in parts {
                if skip >= b.len() {
                    skip -= b.len();
                    continue;
                }
                buf.extend_from_slice(&b[skip..]);
                skip = 0;
            }
            self.peers[rank as usize].out.push_back(Out::Bytes { buf, at: 0 });
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
        Link::Idle | Link::Waiting { .. } => true,
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
        let setting_up = !self.pending.iter().all(Option::is_none)
            || self.live.iter().any(|&r| self.peers[r as usize].link != Link::Up);
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
            if token == LISTENER {
                moved |= self.accept()?;
            } else if token >= PENDING {
                self.read_hello((token - PENDING) as usize)?;
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
        self.parked.retain(|c| c.rank != rank || c.inc > retired);
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
            if c.rank != rank || c.inc > incarnation {
                self.parked.push(c);
            } else if c.inc == incarnation && self.peers[i].link == Link::Idle {
                self.accept_link(rank, c.inc, c.sock, libc::EPOLL_CTL_ADD)?;
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
            self.peers[peer as usize].out.push_back(Out::Data { head, ptr, len: n, at: 0, id, end });
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
        for bad in ["udp:1.2.3.4:1:2", "tcp:1.2.3.4:1", "tcp:x:1:2", "tcp:1.2.3.4:99999:1"] {
            assert!(parse_card(bad).is_none(), "{bad}");
        }
        let c = TcpConfig::default();
        assert_eq!(c.detection_bound(), Duration::from_millis(5500));
    }
}
