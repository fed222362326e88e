//! A rank's part in the recovery of failed groups under `nemesis-run --ft` (HydEE,
//! `shared/reference/hydee.md`): the launcher runs the coordinators and restarts groups
//! (`crate::launch`), and talks to the rank through its channel ([`crate::contract::channel`]).
//! The reasoning behind each rule is in `docs/design/endpoint.md` ("Recovery in a rank").
//!
//! - **Engine messages** from a coordinator go to the engine (`on_control`); its answers go back
//!   through the channel (`ft.rs`, `ft_drain`).
//! - **Retirement** (`nemesis_shm::incarnation`, step 2): asked by the launcher, a survivor drops
//!   everything of the dead incarnations, retires them in its port or netmod, and answers.
//! - **Remote restarts**: a restarted rank's new card ([`Frame::Card`]) reconnects the netmod.
//!
//! What holds:
//! - A dead peer is never *silent* under recovery: receives that name it wait for its new
//!   incarnation.
//! - A send to a dead rank completes (the message is in the sender's log, or its sender restarts
//!   too: T:502–525 of `guermouche-2011-thesis-send-determinism-hydee.txt`).
//! - A message counts as received when its data is in: a rendezvous or a multi-cell eager message
//!   whose sender dies before its end has its arrival taken back
//!   (`nemesis_ft::Process::on_receive_undone`) and its receive posted again with the message's own
//!   envelope, once the dead sender is silent and before it is retired.
//! - A sender stops writing into a dead receiver's ring or buffer before it retires it
//!   (`nemesis_lmt::Lmt::peer_gone`), so never into the new incarnation's.
//! - Finalize keeps serving recovery until every rank finished ([`Frame::Finish`]).

use std::sync::atomic::Ordering::*;

use nemesis_ft::Endpoint as FtEndpoint;
use nemesis_shm::Incoming;
use nemesis_shm::netmod::Netmod;

use super::matching::{Posted, Want};
use super::progress::Active;
use super::request::{Op, RecvBuf, Request};
use super::waiting::Bypass;
use super::{Inner, NOT_LOCAL, Peer};
use crate::contract::channel::Frame;
use crate::error::{Error, Result};

/// The messages whose data may not all come, under recovery: rendezvous, and eager messages in
/// several cells.
#[derive(Debug, Default)]
pub(super) struct Rendezvous {
    /// Receives whose transfer is under way, or failed with its sender's death.
    recvs: Vec<RdvRecv>,
    /// `(unexpected id, date)` of each such RTS in the unexpected list.
    unexpected: Vec<(u64, u64)>,
    /// The eager message in several cells (or netmod cells) being received from each source, as
    /// its first fragment announced it (one per source: a source's messages come in order).
    eager: Vec<EagerArrival>,
}

/// The first fragment of an eager message in several fragments arrived (kept by the engine).
#[derive(Clone, Copy, Debug)]
struct EagerArrival {
    /// The message's envelope and date (its sender's).
    source: u32,
    tag: i32,
    context: u32,
    date: u64,
}

/// A receive that took the RTS of a message of another group.
#[derive(Debug)]
struct RdvRecv {
    req: Request,
    /// The message's envelope and date (its sender's).
    source: u32,
    tag: i32,
    context: u32,
    date: u64,
    buf: RecvBuf,
    /// Its transfer failed with the sender's death: posted again once the sender is silent.
    withdrawn: bool,
}

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
    pub(super) fn ft_mail(&mut self, by: Option<&mut Bypass>) -> Result<bool> {
        match self.ft_mail {
            // ORDERING: Relaxed; a hint, the swap in `ft_channel` orders the reads.
            Some(m) if m.load(Relaxed) != 0 => self.ft_channel(by),
            _ => Ok(false),
        }
    }

    /// (`by`: the blocking receive waiting, if any: the peer events handled here may concern it.)
    #[inline(never)]
    fn ft_channel(&mut self, by: Option<&mut Bypass>) -> Result<bool> {
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
            self.ft_retire(by)?;
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
    fn ft_retire(&mut self, by: Option<&mut Bypass>) -> Result<()> {
        self.port.check_peers()?;
        if self.port.has_events() {
            self.handle_events(by)?;
        }
        let retiring = self.ft.as_deref().map(|ft| ft.retiring.clone()).unwrap_or_default();
        if let Some(net) = self.net.as_mut()
            && retiring.iter().any(|&r| self.route.get(r as usize) == Some(&NOT_LOCAL))
        {
            // What a dead rank's connection already holds (it wrote it before it died) comes in
            // before its retirement closes the connection, as a dead rank's cells do through the
            // segment: a message it completed is delivered, one it left half-written is taken
            // back, whichever of the launcher's word and the socket's bytes this rank saw first.
            net.poll(&mut self.port)?;
        }
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

    /// The date of the RTS `inc`, from a local or a remote rank, if it must be tracked: under
    /// recovery (`delivery`: the engine kept it). From a rank of this group too: its death kills
    /// this rank, which waits for that rather than failing its receive (and exiting first, a death
    /// of its own).
    pub(super) fn ft_rts_date(&self, inc: &Incoming, delivery: bool) -> Option<u64> {
        let ft = self.ft.as_deref()?;
        if !delivery || ft.channel.is_none() {
            return None;
        }
        Some(crate::ft::unwire(&inc.piggyback()?).ok()?.0.date())
    }

    /// Under recovery, the first fragment `inc` of an eager message in several fragments from
    /// `source` was kept by the engine: its envelope and date, to take its arrival back if its
    /// sender dies before the last fragment.
    #[cold]
    #[inline(never)]
    pub(super) fn ft_eager_started(&mut self, inc: &Incoming, source: u32) {
        let Some(date) = self.ft_rts_date(inc, true) else { return };
        let e = EagerArrival { source, tag: inc.tag(), context: inc.context(), date };
        match self.ft_rdv.eager.iter_mut().find(|e| e.source == source) {
            Some(slot) => *slot = e,
            None => self.ft_rdv.eager.push(e),
        }
    }

    /// Under recovery, the eager message being received from dead rank `dead` will never
    /// complete (its sender is silent): its arrival is taken back from the engine and the receive
    /// that matched it waits for the restarted sender's copy (module documentation). False if
    /// nothing of the kind was under way (the caller then fails what waited on it).
    pub(super) fn ft_eager_withdrawn(&mut self, dead: u32, by: Option<&mut Bypass>) -> Result<bool> {
        let Some(i) = self.ft_rdv.eager.iter().position(|e| e.source == dead) else { return Ok(false) };
        let e = self.ft_rdv.eager.swap_remove(i);
        let want = Want { source: dead as i32, tag: e.tag, context: e.context };
        match std::mem::take(&mut self.active[dead as usize]) {
            Active::Bypass => match by {
                // The blocking receive waits again, for this message alone.
                Some(b) => {
                    b.status = None;
                    b.want = want;
                }
                // Not possible: a bypass that leaves turns its state into `Discard`.
                None => return Ok(false),
            },
            Active::Req(r) => {
                if let Some(&mut Op::Recv { buf, .. }) = self.reqs.op_mut(r) {
                    self.ft_repost(r, want, buf);
                }
            }
            Active::Unexpected(id) => {
                if let Some(k) = self.unexpected.find_id(Some(dead), id) {
                    let (_, mut u) = self.unexpected.remove(k);
                    if let Some(r) = u.claimed
                        && let Some(&mut Op::Recv { buf, .. }) = self.reqs.op_mut(r)
                    {
                        self.ft_repost(r, want, buf);
                    }
                    // Its cells go back; the message is dropped whole.
                    let _ = self.release_held(&mut u, None);
                    self.forget_unexpected(u);
                }
            }
            other => {
                // Nothing this rank keeps (a message already being discarded, a control message).
                self.active[dead as usize] = other;
                return Ok(false);
            }
        }
        if let Some(ft) = self.ft.as_deref_mut() {
            ft.process.on_receive_undone(dead, e.date)?;
        }
        tracing::debug!(
            source = dead,
            date = e.date,
            tag = e.tag,
            "HydEE: partial eager message lost with its sender; arrival taken back, receive waits again"
        );
        Ok(true)
    }

    /// Receive `req` into `buf` waits again for a message `want` names exactly, first among the
    /// posted receives; the delivery its lost message had promised goes (the new copy brings its
    /// own).
    fn ft_repost(&mut self, req: Request, want: Want, buf: RecvBuf) {
        if let Some(op) = self.reqs.op_mut(req) {
            *op = Op::Recv { buf, status: None };
            self.posted.push_front(Posted { req, want });
            self.expect(want.source, true);
        }
        if let Some(ft) = self.ft.as_deref_mut() {
            ft.deferred.retain(|&(r, _)| r != req);
        }
    }

    /// An RTS of another group dated `date` waits in the unexpected list under `id`.
    pub(super) fn ft_rts_unexpected(&mut self, id: u64, date: Option<u64>) {
        if let Some(date) = date {
            self.ft_rdv.unexpected.push((id, date));
        }
    }

    /// The date of unexpected RTS `id`, if tracked; it leaves the list.
    pub(super) fn ft_rts_taken(&mut self, id: u64) -> Option<u64> {
        if self.ft_rdv.unexpected.is_empty() {
            return None;
        }
        let i = self.ft_rdv.unexpected.iter().position(|e| e.0 == id)?;
        Some(self.ft_rdv.unexpected.swap_remove(i).1)
    }

    /// Receive `req` into `buf` took the RTS `(source, tag, context)` dated `date` (if tracked).
    pub(super) fn ft_rdv_started(&mut self, req: Request, want: Want, date: Option<u64>, buf: RecvBuf) {
        if let Some(date) = date {
            let (source, tag, context) = (want.source as u32, want.tag, want.context);
            self.ft_rdv.recvs.push(RdvRecv { req, source, tag, context, date, buf, withdrawn: false });
        }
    }

    /// The transfer of receive `req` ended (`died`: with its sender's death). True if the receive
    /// waits for its sender's next incarnation instead of completing now.
    pub(super) fn ft_rdv_ended(&mut self, req: Request, died: bool) -> bool {
        if self.ft_rdv.recvs.is_empty() {
            return false;
        }
        let Some(i) = self.ft_rdv.recvs.iter().position(|r| r.req == req) else { return false };
        if died {
            self.ft_rdv.recvs[i].withdrawn = true;
            return true;
        }
        self.ft_rdv.recvs.swap_remove(i);
        false
    }

    /// Dead rank `dead` is silent (its transfers with us have ended, `Lmt::peer_gone` or
    /// `NetLmt::peer_gone`): the rendezvous from it whose data did not all come are taken back
    /// from the engine and their receives posted again (module documentation); its RTS still
    /// unexpected are dropped.
    pub(super) fn ft_rdv_silent(&mut self, dead: u32) -> Result<()> {
        if self.ft_rdv.recvs.is_empty() && self.ft_rdv.unexpected.is_empty() {
            return Ok(());
        }
        let mut dates = Vec::new();
        // The dead rank's queue only, front to back; a removal keeps the next one at `k`.
        let mut k = 0;
        while let Some(slot) = self.unexpected.nth_of(dead, k) {
            let (id, u) = &self.unexpected[slot];
            let tracked = u.rts.is_some();
            let Some(e) = self.ft_rdv.unexpected.iter().position(|e| tracked && e.0 == *id) else {
                k += 1;
                continue;
            };
            dates.push(self.ft_rdv.unexpected.swap_remove(e).1);
            let (_, u) = self.unexpected.remove(slot);
            // A checkpoint pulling it in sees its transfer fail and the message gone.
            self.forget_unexpected(u);
        }
        let mut again = Vec::new();
        let mut k = 0;
        while k < self.ft_rdv.recvs.len() {
            let r = &self.ft_rdv.recvs[k];
            if r.source == dead && r.withdrawn {
                again.push(self.ft_rdv.recvs.swap_remove(k));
            } else {
                k += 1;
            }
        }
        dates.extend(again.iter().map(|r| r.date));
        // Last first: each is then the last arrival from `dead` if nothing later came.
        dates.sort_unstable_by(|a, b| b.cmp(a));
        if let Some(ft) = self.ft.as_deref_mut() {
            for &date in &dates {
                ft.process.on_receive_undone(dead, date)?;
            }
        }
        // Matched in arrival (date) order: posted again first, in that order.
        again.sort_unstable_by_key(|r| std::cmp::Reverse(r.date));
        for r in again {
            tracing::debug!(
                source = dead,
                date = r.date,
                tag = r.tag,
                "HydEE: rendezvous lost with its sender; receive posted again"
            );
            let want = Want { source: dead as i32, tag: r.tag, context: r.context };
            self.ft_repost(r.req, want, r.buf);
        }
        if !dates.is_empty() {
            tracing::debug!(source = dead, ?dates, "HydEE: arrivals of rendezvous taken back");
        }
        Ok(())
    }
}
