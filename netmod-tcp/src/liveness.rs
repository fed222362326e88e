//! Deaths of peers: a reset, an end of stream without BYE, a protocol violation, or heartbeats
//! (the shared [`nemesis_shm::netmod::heartbeat`]) missing for the timeout while the connection
//! delivered nothing either; and a connection not set up within the timeout.
//!
//! Invariants:
//! - A peer dies once ([`TcpNetmod::died`]): its connection and queue are dropped, its transfers
//!   fail, and one [`KIND_PEER_GONE`](nemesis_shm::netmod::KIND_PEER_GONE) notice follows its
//!   last arrival in the receive queue (as soon as a cell is free).
//! - A link that delivers is alive, whatever becomes of its heartbeats.

use std::time::Instant;

use nemesis_lmt::{NetDone, Outcome};
use nemesis_shm::netmod::{Inbox, announce_deaths};
use nemesis_shm::{Error, Result};

use crate::TcpNetmod;
use crate::peer::{Link, Out, Rx};

impl<'n> TcpNetmod<'n> {
    /// Marks `rank` dead (`why` is logged): drops its connection and queue, fails its transfers,
    /// and schedules the notice through the receive queue. Returns the error for a caller that
    /// was sending to it.
    pub(crate) fn died(&mut self, rank: u32, why: &str) -> Error {
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

    /// Declares dead the peers that stopped answering or never finished connecting.
    pub(crate) fn check_silence(&mut self) {
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
    pub(crate) fn announce_deaths(&mut self, inbox: &mut dyn Inbox<'n>) -> Result<bool> {
        announce_deaths(self.me, &mut self.deaths, &mut self.spare, inbox)
    }
}
