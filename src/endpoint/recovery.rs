//! Recovery of failed groups with `nemesis-run --ft` (its channel, `crate::ft::channel`): the
//! launcher runs the recovery coordinators and restarts failed groups; a rank serves its part.
//!
//! - **Engine messages** from a coordinator come through the channel and go to the engine
//!   (`on_control`); the engine's messages for coordinators go back through it (`ft.rs`,
//!   `ft_drain`). Messages between processes (`Restarted`, `LastDate`, replays) travel on the
//!   per-pair FIFOs as in failure-free operation.
//! - **Retirement** (`nemesis_shm::incarnation`, step 2): when the launcher asks, a surviving rank
//!   makes sure it holds nothing of the dead incarnations (unexpected messages kept in their
//!   cells are copied out, sends waiting for cells to them are dropped), retires them in its
//!   port, and answers. A dead rank of another node is retired in the netmod (`Netmod::retire`:
//!   connection, queue and transfers dropped), and answered for once the netmod's death notice
//!   has come through the receive queue, behind everything the dead incarnation had sent.
//! - **Remote restarts**: the launcher sends the new card of a restarted rank of another node
//!   ([`Frame::Card`]); the netmod reconnects to the new incarnation (`Netmod::restarted`) and,
//!   if this rank had retired the old one, the peer counts as restarted from then on, as a
//!   local peer does when the port sees its new incarnation in the segment. A dead peer is never *silent* here: receives that name it keep waiting
//!   for its new incarnation (its messages are replayed from logs or sent again), where without
//!   recovery they fail with `PeerDied`.
//! - **Sends to a dead rank** are lost with it, as HydEE's model has it (T:502–525): an
//!   inter-group message is in the sender's log and replayed once the rank restarts; an
//!   intra-group sender is in the failed group and restarts too. Such a send completes.
//! - **The end**: finalize tells the launcher and keeps serving recovery until every rank has
//!   finished ([`Frame::Finish`]): a rank that finished may still hold logged messages a
//!   restarted group needs.
//!
//! The launcher sets the rank's mail flag in the segment after writing to the channel: one load
//! per progress pass tells whether to read it.

use std::sync::atomic::Ordering::*;

use nemesis_ft::Endpoint as FtEndpoint;
use nemesis_shm::netmod::Netmod;

use super::{Inner, NOT_LOCAL, Peer};
use crate::error::{Error, Result};
use crate::ft::channel::Frame;

impl Inner {
    /// Whether `e`, the failure of a send to `dest`, means the message is lost with its dead
    /// receiver under recovery (the send then completes; module documentation).
    pub(super) fn ft_lost(&self, e: &Error) -> bool {
        matches!(e, Error::PeerDied { .. }) && self.ft.as_deref().is_some_and(|ft| ft.channel.is_some())
    }

    /// This rank re-executes after its restart: the recovery round it was restarted in is not
    /// over (a later round supersedes it only by restarting this rank again). Its group's
    /// checkpoints are skipped meanwhile: the round may need messages it sends after one (when it
    /// restarted from an older generation than the one it failed after), so it cannot wait for
    /// the round to end there, and the engine takes no checkpoint during a round.
    pub(super) fn ft_reexecuting(&self) -> bool {
        self.ft.as_deref().is_some_and(|ft| ft.process.in_recovery() && ft.restart_round == Some(ft.process.round()))
    }

    /// True with the launcher's channel (recovery of failed groups).
    pub(super) fn ft_recovers(&self) -> bool {
        self.ft.as_deref().is_some_and(|ft| ft.channel.is_some())
    }

    /// The launcher's channel, if its mail flag is up (or a retirement is pending): reads and
    /// handles its frames. True if anything happened.
    #[inline]
    pub(super) fn ft_mail(&mut self) -> Result<bool> {
        match self.ft_mail {
            // ORDERING: Relaxed; a hint, the swap in `ft_channel` orders the reads.
            Some(m) if m.load(Relaxed) != 0 => self.ft_channel(),
            _ => Ok(false),
        }
    }

    #[inline(never)]
    fn ft_channel(&mut self) -> Result<bool> {
        if let Some(m) = self.ft_mail {
            // ORDERING: Acquire; pairs with the launcher's Release store after its write (the
            // socket orders the bytes themselves).
            m.swap(0, Acquire);
        }
        let Some(ft) = self.ft.as_deref_mut() else { return Ok(false) };
        let Some(ch) = ft.channel.as_mut() else { return Ok(false) };
        let frames = ch.receive()?;
        let got = !frames.is_empty();
        for f in frames {
            match f {
                Frame::Engine { coordinator, msg } => {
                    let Some(ft) = self.ft.as_deref_mut() else { break };
                    tracing::debug!(coordinator, msg = msg.name(), "HydEE: from the coordinator");
                    ft.stats.control_received += 1;
                    ft.process.on_control(FtEndpoint::Coordinator(coordinator), msg, &ft.log)?;
                    self.ft_drain()?;
                }
                Frame::Retire { ranks } => {
                    if let Some(ft) = self.ft.as_deref_mut() {
                        ft.retiring.extend(ranks);
                    }
                }
                Frame::Finish => {
                    if let Some(ft) = self.ft.as_deref_mut() {
                        ft.finish = true;
                    }
                }
                Frame::Card { rank, incarnation, card } => self.ft_card(rank, incarnation, &card)?,
                other => {
                    return Err(Error::Config(format!("fault-tolerance channel: unexpected frame {other:?}")));
                }
            }
        }
        if self.ft.as_deref().is_some_and(|ft| !ft.retiring.is_empty()) {
            self.ft_retire()?;
            if self.ft.as_deref().is_some_and(|ft| !ft.retiring.is_empty())
                && let Some(m) = self.ft_mail
            {
                // Not done: look again at the next pass.
                // ORDERING: Relaxed; our own reminder.
                m.store(1, Relaxed);
            }
        }
        Ok(got)
    }

    /// Retires the dead ranks the launcher named, as far as possible now; tells it which.
    fn ft_retire(&mut self) -> Result<()> {
        self.port.check_peers()?;
        if self.port.has_events() {
            self.handle_events(None)?;
        }
        let retiring = self.ft.as_deref().map(|ft| ft.retiring.clone()).unwrap_or_default();
        let mut done = Vec::new();
        for r in retiring {
            let Some(&local) = self.route.get(r as usize) else {
                done.push(r);
                continue;
            };
            if local == NOT_LOCAL {
                // Nothing of it in this node's segment; its connection goes, and once the
                // netmod's notice came through the receive queue, so did all it had sent.
                match self.net.as_mut() {
                    Some(net) => net.retire(r)?,
                    None => {
                        done.push(r);
                        continue;
                    }
                }
                if self.ft.as_deref().is_some_and(|ft| ft.net_silent.contains(&r)) {
                    done.push(r);
                }
                continue;
            }
            self.release_from(r)?;
            if self.port.retire_peer(local)? {
                done.push(r);
            }
        }
        if done.is_empty() {
            return Ok(());
        }
        tracing::debug!(?done, "HydEE: dead ranks retired");
        if let Some(ft) = self.ft.as_deref_mut() {
            ft.retiring.retain(|r| !done.contains(r));
            if let Some(ch) = ft.channel.as_mut() {
                ch.send(&Frame::Retired { ranks: done });
            }
        }
        Ok(())
    }

    /// Lets go of everything of dead rank `r`'s that this rank holds: unexpected messages still
    /// in its cells are copied out, sends waiting for cells to it are dropped (lost with it).
    fn release_from(&mut self, r: u32) -> Result<()> {
        self.unhold_unexpected(Some(r))?;
        let mut i = 0;
        while i < self.pending.len() {
            let p = &self.pending[i];
            let to_r = matches!(self.reqs.op_mut(p.req), Some(super::request::Op::Send { dest, .. }) if *dest == r);
            if !to_r {
                i += 1;
                continue;
            }
            let Some(p) = self.pending.remove(i) else { break };
            let status = super::Status { source: self.rank, tag: 0, len: 0 };
            self.reqs.complete(p.req, Ok(status));
            if p.internal {
                let _ = self.reqs.take(p.req);
            }
        }
        Ok(())
    }

    /// A dead peer is silent (everything it sent was delivered or dropped), under recovery: what
    /// waits on it keeps waiting for its next incarnation, but synchronous sends to it complete
    /// (their message is lost with it and replayed from the log).
    pub(super) fn ft_peer_silent(&mut self, dead: u32) {
        let mut i = 0;
        while i < self.sync_waiting.len() {
            if self.sync_waiting[i].2 == dead {
                let (_, req, _, status) = self.sync_waiting.swap_remove(i);
                self.reqs.complete(req, Ok(status));
            } else {
                i += 1;
            }
        }
    }

    /// The launcher's news that remote rank `rank` runs again as `incarnation`, reached at `card`:
    /// the netmod reconnects to it; if this rank had retired it, it restarted.
    fn ft_card(&mut self, rank: u32, incarnation: u32, card: &str) -> Result<()> {
        if self.route.get(rank as usize) != Some(&NOT_LOCAL) {
            // A rank of this node: its restart shows in the segment.
            return Ok(());
        }
        let Some(net) = self.net.as_mut() else { return Ok(()) };
        if net.restarted(rank, incarnation, card)? {
            if let Some(ft) = self.ft.as_deref_mut() {
                ft.net_silent.retain(|&r| r != rank);
            }
            self.ft_peer_restarted(rank);
        }
        Ok(())
    }

    /// A retired peer (global rank `g`) runs again as a new incarnation.
    pub(super) fn ft_peer_restarted(&mut self, g: u32) {
        tracing::info!(rank = g, "peer restarted");
        if let Some(p) = self.peers.get_mut(g as usize) {
            *p = Peer::Alive;
        }
        if let Some(a) = self.active.get_mut(g as usize) {
            *a = super::progress::Active::None;
        }
        // Its pid changed: no single-copy transfer with it until it is known again.
        if let Some(&local) = self.route.get(g as usize)
            && local != NOT_LOCAL
            && let Some(p) = self.rings.pids.get_mut(usize::from(local))
        {
            *p = None;
        }
    }

    /// At finalize, under recovery: tells the launcher and serves recovery until every rank has
    /// finished.
    pub(super) fn ft_finish_wait(&mut self) -> Result<()> {
        let Some(ft) = self.ft.as_deref_mut() else { return Ok(()) };
        let Some(ch) = ft.channel.as_mut() else { return Ok(()) };
        ch.send(&Frame::Finishing);
        let mut waiter = crate::wait::Waiter::new(self.cfg.wait, self.spin);
        while !self.ft.as_deref().is_some_and(|ft| ft.finish) {
            self.idle_step(&mut waiter, None)?;
        }
        Ok(())
    }

    /// Tells the launcher what this rank replayed since its last report.
    pub(super) fn ft_report_replays(&mut self) {
        let Some(ft) = self.ft.as_deref_mut() else { return };
        let (m, b) = (ft.stats.replayed, ft.stats.replayed_bytes);
        if (m, b) == ft.replays_reported {
            return;
        }
        let frame = Frame::Replayed {
            round: ft.process.round(),
            messages: m - ft.replays_reported.0,
            bytes: b - ft.replays_reported.1,
        };
        if let Some(ch) = ft.channel.as_mut() {
            ch.send(&frame);
            ft.replays_reported = (m, b);
        }
    }
}
