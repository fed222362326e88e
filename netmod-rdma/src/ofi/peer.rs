//! Peers: their index, their death and their silence. A peer dies of a completion error, a
//! send the provider refuses, an address it cannot insert, a fragment that breaks the protocol,
//! or silence (the heartbeats of [`nemesis_shm::netmod::heartbeat`]); a goodbye ends it without
//! a death.
//!
//! Invariants: a peer dies once (`Link::Dead` is final); its death empties its queue, closes its
//! incoming order (the buffers held go back to the provider), cancels the data receives posted
//! for it, fails its transfers, and schedules one `KIND_PEER_GONE` notice behind its last
//! arrival.

use std::time::Instant;

use nemesis_shm::netmod::{Inbox, announce_deaths};
use nemesis_shm::{Error, Result};

use super::{Link, OfiNetmod, Op, peer_dead};
use crate::sys::*;

/// Milliseconds of the coarse monotonic clock (`CLOCK_MONOTONIC_COARSE`: the kernel's tick, a
/// few milliseconds, read from the vDSO without a timestamp counter), which paces the silence
/// checks of every poll at a fraction of the cost of `Instant::now` (see `docs/design/ofi.md`).
fn coarse_ms() -> u64 {
    let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: `ts` is a valid timespec for the call to write.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC_COARSE, &mut ts) };
    ts.tv_sec as u64 * 1000 + ts.tv_nsec as u64 / 1_000_000
}

impl<'n> OfiNetmod<'n> {
    pub(super) fn peer_index(&self, rank: u32) -> Result<usize> {
        if rank >= self.size || rank == self.me {
            return Err(Error::Net(format!("rank {rank} is not a remote peer (job of {} ranks)", self.size)));
        }
        Ok(rank as usize)
    }

    /// Marks `rank` dead (`why` is logged): drops what waits for it and what came from it, fails
    /// its transfers (once their operations are done), schedules the notice.
    pub(super) fn died(&mut self, rank: u32, why: &str) -> Error {
        let Some(p) = self.peers.get_mut(rank as usize) else { return peer_dead(rank) };
        if p.link != Link::Dead {
            tracing::warn!(rank, why, provider = %self.fi.caps.prov, "remote peer is gone");
            p.link = Link::Dead;
            self.queued -= p.out.len();
            p.out.clear();
            let mut used = Vec::new();
            if let Some(c) = self.rx.close(rank, &mut used) {
                self.spare.push(c);
            }
            for i in used {
                let _ = self.post_rx(i);
            }
            let now = Some(Instant::now());
            for s in self.sends.iter_mut().filter(|s| s.peer == rank) {
                s.failed = now;
            }
            for r in self.recvs.iter_mut().filter(|r| r.peer == rank) {
                r.failed = now;
            }
            // Posted data receives from it are cancelled (their completions say so).
            for slot in self.nrx + self.ntx..self.ops.len() {
                if let Op::DataRx { peer, .. } = self.ops[slot]
                    && peer == rank
                {
                    let ctx = self.ctx(slot);
                    // SAFETY: an operation posted on our endpoint with this context.
                    unsafe { nm_cancel(self.fi.ep.fid(), ctx) };
                }
            }
            self.hb.unwatch(rank);
            self.deaths.push(rank);
            self.reap();
        }
        peer_dead(rank)
    }

    pub(super) fn check_silence(&mut self) {
        let now = coarse_ms();
        if now < self.next_check {
            return;
        }
        self.next_check = now + (self.cfg.timing.period / 2).as_millis() as u64;
        if self.sends.iter().any(|s| s.failed.is_some()) || self.recvs.iter().any(|r| r.failed.is_some()) {
            self.reap();
        }
        for (rank, quiet) in self.hb.silent(self.cfg.timing.timeout) {
            if self.peers.get(rank as usize).is_some_and(|p| p.link == Link::Up) {
                self.died(rank, &format!("no heartbeat for {quiet:?}"));
            }
        }
    }

    /// Puts the notices of deaths into the receive queue, as cells allow; cells of arrivals that
    /// never completed go back.
    pub(super) fn announce_deaths(&mut self, inbox: &mut dyn Inbox<'n>) -> Result<bool> {
        announce_deaths(self.me, &mut self.deaths, &mut self.spare, inbox)
    }
}
