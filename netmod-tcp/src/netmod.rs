//! [`Netmod`] for [`TcpNetmod`]: what the Endpoint calls. A progress pass ([`Netmod::poll`])
//! reads the connections (each directly when there are few, else as epoll tells), takes the
//! listener's authenticated connections, then writes what is queued, checks silence and
//! announces deaths. [`Netmod::retire`] and [`Netmod::restarted`] carry out the launcher's word on
//! restarted ranks (`docs/design/tcp.md`, "Restarts").
//!
//! Invariant: a retired rank's link, card and heartbeats are forgotten, and nothing of its next
//! incarnation is delivered before [`Netmod::restarted`] names it.

use std::io;
use std::os::fd::AsRawFd;
use std::time::{Duration, Instant};

use nemesis_shm::cell::{FT_ROOM, HEADER_BYTES, ft_carried, ft_flags, ft_room};
use nemesis_shm::netmod::{Inbox, Netmod};
use nemesis_shm::{Error, MsgHeader, PiggybackBytes, Result};

use crate::frame::{self, Kind, PREFIX};
use crate::peer::{Link, Rx};
use crate::socket::io_err;
use crate::{HANDOFF, TcpNetmod, parse_card};

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
        // Only the piggyback flags travel, and only with a piggyback.
        h.flags = ft_flags(hdr.flags, ft.is_some());
        let room = ft_room(h.flags);
        let mut head = [0u8; PREFIX + HEADER_BYTES + FT_ROOM];
        head[..PREFIX].copy_from_slice(&frame::prefix(Kind::Msg, HEADER_BYTES + room + payload.len()));
        head[PREFIX..PREFIX + HEADER_BYTES].copy_from_slice(&frame::header_bytes(&h));
        if let Some(pb) = ft {
            let at = PREFIX + HEADER_BYTES;
            let n = ft_carried(h.flags);
            head[at..at + n].copy_from_slice(&pb[..n]);
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
