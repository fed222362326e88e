//! # nemesis-netmod-tcp: the TCP network module
//!
//! Implements [`nemesis_shm::netmod::Netmod`] (messages, through the receive queue) and
//! [`nemesis_lmt::LmtBackend`] (the data of large messages, streamed) over TCP: one connection
//! per pair of ranks, made on first use and authenticated by the job's secret
//! (`nemesis_shm::auth`); frames that carry the cell header, so arrivals are cells already
//! ([`frame`]); heartbeats ([`nemesis_shm::netmod::heartbeat`]) and connection errors for
//! failures; restarted ranks (`nemesis-run --ft`, HydEE's recovery) taken on at the launcher's
//! word. The model is NEMESIS's netmod (`shared/reference/nemesis.md`, "Netmods": arrivals on
//! the process's receive queue, a direct send when nothing is queued); restarts follow HydEE's
//! recovery (`shared/reference/hydee.md`). The design and its reasoning: `docs/design/tcp.md`.
//!
//! Where things are: `config` (settings, cards), `peer` (the state kept per remote rank),
//! `handshake` (connections made and accepted), [`listen`] (the thread that authenticates new
//! connections), `receive` and `send` (frames read and written), `liveness` (deaths), `netmod` and
//! `lmt` (the two traits), `socket` (the system calls shared by all).
//!
//! Invariants:
//! - Data flows only on an authenticated connection (after ACCEPT); a connection that fails
//!   before is closed and changes no rank's state.
//! - Per peer, frames go in the order they were sent; messages wait per peer, not per socket.
//! - A peer found dead (reset, end of stream without BYE, a protocol violation, or heartbeats
//!   missing for the timeout while its connection delivered nothing either) gets one
//!   [`KIND_PEER_GONE`](nemesis_shm::netmod::KIND_PEER_GONE) notice after its last arrival in the
//!   receive queue; its transfers fail.
//! - With per-frame MACs ([`TcpConfig::integrity`]), a message is delivered and a transfer
//!   completes only once its last frame's MAC verified; a frame changed, injected, dropped or
//!   replayed ends the link.
//! - Nothing of a restarted rank's new incarnation is delivered before
//!   [`Netmod::restarted`](nemesis_shm::netmod::Netmod::restarted) names it; a dead
//!   incarnation's connections are refused.
//!
//! Configuration: `NEMESIS_TCP_*`, see [`TcpConfig::from_env`].

mod config;
pub mod frame;
#[doc(hidden)]
pub mod fuzzing;
mod handshake;
pub mod listen;
mod liveness;
mod lmt;
mod netmod;
mod peer;
mod receive;
mod send;
mod socket;

use std::io;
use std::net::SocketAddr;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::time::Instant;

use nemesis_lmt::NetDone;
use nemesis_shm::auth::{FLAG_INTEGRITY, JobSecret};
use nemesis_shm::netmod::heartbeat::{Heartbeat, Identity};
use nemesis_shm::{Error, NetCell, Result};

pub use config::{TcpConfig, parse_card};
pub use nemesis_shm::netmod::addr::{default_addr, interface_addr};
use peer::{Parked, Peer};
pub use socket::send_nosignal;
use socket::{bind, io_err};

/// epoll token of the listener thread's hand-over; peers are their rank.
pub(crate) const HANDOFF: u64 = u64::MAX;

/// The TCP netmod of one process.
///
/// Made by [`TcpNetmod::new`], driven through [`Netmod`](nemesis_shm::netmod::Netmod) (messages) and
/// [`LmtBackend`](nemesis_lmt::LmtBackend) (large messages' data) by one thread at a time.
pub struct TcpNetmod<'n> {
    /// This process's global rank, and the job's number of ranks.
    me: u32,
    size: u32,
    /// What every connection and heartbeat must prove.
    secret: JobSecret,
    cfg: TcpConfig,
    /// The thread that accepts and authenticates connections.
    listener: listen::Listener,
    /// What peers dial: `tcp:<ip>:<port>:<heartbeat port>`.
    card: String,
    /// Readiness of the connections (token: the rank) and of the listener's hand-over
    /// ([`HANDOFF`]).
    epoll: OwnedFd,
    /// One per rank of the job, indexed by rank (ours unused).
    peers: Vec<Peer<'n>>,
    /// Connections of restarted ranks waiting for `Netmod::restarted`.
    parked: Vec<Parked>,
    /// This process's incarnation of its rank number (`Netmod::set_incarnation`).
    incarnation: u32,
    hb: Heartbeat,
    /// Deaths whose notice waits for a free cell.
    deaths: Vec<u32>,
    /// Cells taken for arrivals that did not complete (their peer died), for reuse.
    spare: Vec<NetCell<'n>>,
    /// Large-message transfers finished or failed, until the LMT engine takes them.
    done: Vec<NetDone>,
    /// When silence is checked next (every half heartbeat period).
    next_check: Instant,
    events: Vec<libc::epoll_event>,
    /// Ranks with a socket (up or being set up), rebuilt when `relist` is set.
    live: Vec<u32>,
    relist: bool,
    /// Progress passes, counted to run epoll every few when connections are read directly.
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

impl<'n> TcpNetmod<'n> {
    /// `init`: listens and starts heartbeats, for global rank `me` of a job of `size` ranks whose
    /// secret is `secret` (connections and heartbeats that do not prove it are refused). The
    /// card is [`Netmod::card`](nemesis_shm::netmod::Netmod::card).
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

    pub(crate) fn ctl(&self, op: libc::c_int, fd: RawFd, events: u32, token: u64) -> Result<()> {
        let mut ev = libc::epoll_event { events, u64: token };
        // SAFETY: both descriptors are open; `ev` is a valid event for the call.
        if unsafe { libc::epoll_ctl(self.epoll.as_raw_fd(), op, fd, &mut ev) } < 0 {
            return Err(io_err("epoll_ctl", io::Error::last_os_error()));
        }
        Ok(())
    }

    pub(crate) fn peer_index(&self, rank: u32) -> Result<usize> {
        if rank >= self.size || rank == self.me {
            return Err(Error::Net(format!("rank {rank} is not a remote peer (job of {} ranks)", self.size)));
        }
        Ok(rank as usize)
    }
}
