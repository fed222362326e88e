//! Connections made and accepted. The connecting side writes HELLO (its rank, incarnation and
//! nonce), reads the acceptor's CHALLENGE and proves the job's secret first (PROOF, over the
//! whole transcript and the address it dialed: `nemesis_shm::auth::Transcript`); the accepting
//! side answers ACCEPT or REJECT with its own proof. The acceptor's first half (HELLO, CHALLENGE,
//! PROOF) runs in the listener's thread ([`crate::listen`]); here: the connect, HELLO, and the
//! authenticated connections taken from the listener (refused, parked or accepted). The reading
//! of CHALLENGE, ACCEPT and REJECT is part of the parser (`receive`).
//!
//! Invariants:
//! - A connection that fails before it is authenticated is closed and changes no rank's state
//!   ([`UNAUTHENTICATED`]); the connecting side retries until the connection timeout.
//! - Simultaneous connects: both sides keep the connection the lower rank made ([`settle`]).
//! - A connection of a dead incarnation is refused; one of an incarnation not announced yet is
//!   parked, and accepted only at `Netmod::restarted`.

use std::io;
use std::net::TcpStream;
use std::os::fd::AsRawFd;
use std::time::{Duration, Instant};

use nemesis_shm::auth::{self, FLAG_INTEGRITY, Step, Transcript};
use nemesis_shm::{Error, Result};

use crate::TcpNetmod;
use crate::frame::{self, Kind};
use crate::listen;
use crate::peer::{Link, Parked, RX_BUF, Rx};
use crate::socket::{io_err, send_all};

/// Marks a parse error of a connection not yet authenticated: the connection is dropped, and
/// the peer's state is not touched (no death for a frame from who knows whom).
pub(crate) const UNAUTHENTICATED: &str = "unauthenticated: ";

impl TcpNetmod<'_> {
    /// Starts connecting to `rank` (its card is known).
    pub(crate) fn start_connect(&mut self, rank: u32) -> Result<()> {
        self.connect_since(rank, Instant::now())
    }

    /// Starts connecting to `rank`, the timeout counted from `since` (a first attempt's start).
    pub(crate) fn connect_since(&mut self, rank: u32, since: Instant) -> Result<()> {
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

    /// Our connection to `rank` failed before it was authenticated (`why` is logged): it is
    /// closed, and another attempt follows shortly; the peer is not declared dead for it (only if
    /// no connection is made within the timeout, as for any attempt).
    pub(crate) fn unauthenticated(&mut self, rank: u32, why: &str) {
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
    pub(crate) fn take_authenticated(&mut self) -> Result<()> {
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
    pub(crate) fn accept_link(&mut self, t: Transcript, sock: TcpStream) -> Result<()> {
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
    pub(crate) fn log_restarted_link(&self, rank: u32) {
        let inc = self.peers[rank as usize].inc;
        if inc > 0 || self.incarnation > 0 {
            tracing::info!(rank, incarnation = inc, own = self.incarnation, "link up with a restarted incarnation");
        }
    }

    /// Our connect to `rank` finished: sends HELLO.
    pub(crate) fn connected(&mut self, rank: u32) -> Result<()> {
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

    /// Makes sure a connection to `rank` exists or is under way; errors if it is dead or gone.
    pub(crate) fn ensure_link(&mut self, rank: u32) -> Result<()> {
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

#[cfg(test)]
mod tests {
    use std::time::Instant;

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
}
