//! Progress: a poll pass, the routing of each arrival ([`Inner::deliver`]), resuming pending sends,
//! and peer events (a dead peer's partial message and what waits on it).

use nemesis_shm::cell::flags;
use nemesis_shm::netmod::{KIND_PEER_GONE, Netmod};
use nemesis_shm::{Incoming, PeerEvent, REMOTE};

use super::eager::Pending;
use super::matching::{Unexpected, copy_into, finish};
use super::request::{Op, Request};
use super::waiting::Bypass;
use super::{
    Inner, KIND_CANCEL, KIND_CANCEL_ACK, KIND_EAGER, KIND_EAGER_SYNC, KIND_FT_CONTROL, KIND_FT_MARK, KIND_LMT,
    KIND_RTS, KIND_SYNC_ACK, NOT_LOCAL, POLL_BUDGET, Peer, Status, raw_slice,
};

use crate::error::{Error, Result};

/// Where the fragments of the message being received from a source go.
#[derive(Clone, Copy, Debug, Default)]
pub(super) enum Active {
    #[default]
    None,
    /// The blocking receive in progress (its buffer is on the caller's side).
    Bypass,
    /// A message whose receive ended early (an error): its remaining fragments are dropped.
    Discard,
    Req(Request),
    Unexpected(u64),
    /// A fault-tolerance control message longer than one cell (reassembled in the FT state).
    FtControl,
}

impl Inner {
    /// One progress pass for waits other than the bypass: pending sends, the node, peer events.
    /// True if anything happened.
    pub(super) fn progress(&mut self, mut by: Option<&mut Bypass>) -> Result<bool> {
        let mut got = self.resume_pending()?;
        if self.ft_mail.is_some() {
            got |= self.ft_mail(by.as_deref_mut())?;
        }
        got |= self.lmt_step()?;
        if let Some(net) = self.net.as_mut() {
            got |= net.poll(&mut self.port)?;
        }
        for _ in 0..POLL_BUDGET {
            let Some(inc) = self.port.poll(&self.expected)? else { break };
            got = true;
            self.deliver(inc, by.as_deref_mut())?;
        }
        if self.port.has_events() {
            self.handle_events(by)?;
            got = true;
        }
        Ok(got)
    }

    /// Takes what waits in every fastbox now, whatever the port's schedule (an ordinary poll
    /// looks at the fastboxes of sources no receive names only every 16th time): a non-blocking
    /// probe that found nothing looks here before it answers, so a message sent before some
    /// synchronisation the prober also passed (a barrier through the collective areas, say) is
    /// found by the first probe after it (`MPI_Iprobe`, and `MPI_Win_test` through it).
    pub(super) fn scan_every_fastbox(&mut self) -> Result<()> {
        for _ in 0..POLL_BUDGET {
            let Some(inc) = self.port.scan_fastboxes()? else { break };
            self.deliver(inc, None)?;
        }
        Ok(())
    }

    /// The sender's global rank of a fragment.
    #[inline(always)]
    fn source_of(&self, inc: &Incoming) -> u32 {
        if inc.src == REMOTE { inc.header().src } else { self.global[usize::from(inc.src)] }
    }

    /// Routes one fragment: to the bypass receive, a posted receive, or the unexpected list.
    pub(super) fn deliver(&mut self, inc: Incoming<'static>, mut by: Option<&mut Bypass>) -> Result<()> {
        let source = self.source_of(&inc);
        if source >= self.size {
            self.port.release(inc)?;
            return Err(Error::Shm(nemesis_shm::Error::Corrupt { what: "sender rank", value: u64::from(source) }));
        }
        let src = source as usize;
        if inc.offset() == 0 {
            let (tag, context) = (inc.tag(), inc.context());
            let status = Status { source, tag, len: inc.len() };
            // Plain eager data (no flag) is told from everything else by one comparison.
            let mut sync = None;
            let mut delivery = None;
            let kind_flags = inc.kind_flags();
            if kind_flags != u16::from(KIND_EAGER) {
                let kind = kind_flags as u8;
                if kind_flags & (u16::from(flags::FT_PIGGYBACK) << 8) != 0 {
                    // The engine's arrival hook, in channel order; stale and duplicate messages go.
                    match self.ft_arrival(&inc, source) {
                        Ok(Some(d)) => {
                            delivery = Some(d);
                            if !inc.is_last() {
                                // Its digest is checked at its last fragment (`ft_rdv.rs`).
                                self.ft_eager_check_start(&inc, source);
                                if self.ft_recovers() {
                                    // Its arrival is taken back if its sender dies before the
                                    // last fragment (`recovery.rs`).
                                    self.ft_eager_started(&inc, source);
                                }
                            }
                        }
                        Ok(None) => return self.drop_arrival(inc, source, by),
                        Err(e) => {
                            self.port.release(inc)?;
                            return Err(e);
                        }
                    }
                }
                match kind {
                    KIND_SYNC_ACK => {
                        let token = inc.aux();
                        self.port.release(inc)?;
                        if let Some(i) = self.sync_waiting.iter().position(|w| w.0 == token && w.2 == source) {
                            let (_, req, _, st) = self.sync_waiting.swap_remove(i);
                            self.reqs.complete(req, Ok(st));
                        }
                        return Ok(());
                    }
                    KIND_RTS | KIND_LMT => return self.deliver_lmt(inc, source, by, delivery),
                    KIND_PEER_GONE if inc.src == REMOTE => {
                        self.port.release(inc)?;
                        if self.ft_recovers() {
                            return self.ft_remote_silent(source, by);
                        }
                        return self.peer_silent(source, by);
                    }
                    KIND_CANCEL | KIND_CANCEL_ACK => {
                        let (token, result) = (inc.aux(), tag);
                        self.port.release(inc)?;
                        return if kind == KIND_CANCEL {
                            self.cancel_requested(source, token)
                        } else {
                            self.cancel_answered(source, token, result == 1);
                            Ok(())
                        };
                    }
                    KIND_FT_CONTROL | KIND_FT_MARK => return self.deliver_ft(inc, source),
                    KIND_EAGER_SYNC => sync = Some(inc.aux()),
                    _ => {}
                }
            }
            if let Some(b) = by.as_deref_mut()
                && b.open()
                && b.want.matches(source, tag, context)
            {
                self.ft_deliver(delivery);
                if let Some(token) = sync {
                    self.send_ack(source, token)?;
                }
                copy_into(b.buf, &inc);
                if inc.is_last() {
                    b.done = Some(finish(status, b.buf.cap));
                } else {
                    b.status = Some(status);
                    self.active[src] = Active::Bypass;
                }
            } else if let Some(i) = self.posted.iter().position(|p| p.want.matches(source, tag, context)) {
                let Some(p) = self.take_posted(i) else { return Err(Error::InvalidRequest) };
                self.expect(p.want.source, false);
                self.ft_deliver_later(p.req, delivery);
                if let Some(token) = sync {
                    self.send_ack(source, token)?;
                }
                if let Some(Op::Recv { buf, status: st }) = self.reqs.op_mut(p.req) {
                    let buf = *buf;
                    copy_into(buf, &inc);
                    if inc.is_last() {
                        self.reqs.complete(p.req, finish(status, buf.cap));
                    } else {
                        *st = Some(status);
                        self.active[src] = Active::Req(p.req);
                    }
                }
            } else {
                let id = self.next_unexpected;
                self.next_unexpected += 1;
                let mut u = Unexpected::new(source, tag, context, inc.len(), inc.aux());
                u.got = inc.frag_len();
                u.sync = sync;
                u.delivery = delivery;
                if !inc.is_last() {
                    self.active[src] = Active::Unexpected(id);
                }
                if self.hold_unexpected(&inc) {
                    u.held.push(inc);
                    self.unexpected.push((id, u));
                    return Ok(());
                }
                let mut data = self.spare.pop().unwrap_or_default();
                data.resize(inc.len(), 0);
                inc.copy_to(&mut data);
                self.count_unexpected(data.len());
                u.data = data;
                self.unexpected.push((id, u));
            }
        } else {
            if let Some(ft) = self.ft.as_deref()
                && !ft.eager_checks.is_empty()
                && !matches!(self.active[src], Active::FtControl)
                && let Err(e) = self.ft_eager_check_fragment(&inc, source)
            {
                self.port.release(inc)?;
                return Err(e);
            }
            match self.active[src] {
                Active::Bypass => match &mut by {
                    Some(b) => {
                        copy_into(b.buf, &inc);
                        if inc.is_last() {
                            let Some(st) = b.status.take() else { return Err(Error::InvalidRequest) };
                            b.done = Some(finish(st, b.buf.cap));
                            self.active[src] = Active::None;
                        }
                    }
                    // Not possible: `bypass_loop` turns its state into `Discard` when it leaves.
                    None => self.active[src] = if inc.is_last() { Active::None } else { Active::Discard },
                },
                Active::Discard => {
                    if inc.is_last() {
                        self.active[src] = Active::None;
                    }
                }
                Active::Req(r) => {
                    if let Some(Op::Recv { buf, status }) = self.reqs.op_mut(r) {
                        let buf = *buf;
                        copy_into(buf, &inc);
                        if inc.is_last() {
                            let Some(st) = status.take() else { return Err(Error::InvalidRequest) };
                            self.reqs.complete(r, finish(st, buf.cap));
                            self.active[src] = Active::None;
                        }
                    }
                }
                Active::FtControl => return self.ft_control_fragment(inc, source),
                Active::Unexpected(id) => {
                    if let Some(i) = self.unexpected.find_id(Some(source), id) {
                        let last = inc.is_last();
                        let u = &mut self.unexpected[i].1;
                        let copied = if u.held.is_empty() {
                            let off = inc.offset().min(u.data.len());
                            u.got += inc.copy_to(&mut u.data[off..]);
                            Some(inc)
                        } else {
                            // Its first fragment is held: so are the others.
                            u.got += inc.frag_len();
                            u.held.push(inc);
                            None
                        };
                        if last {
                            self.active[src] = Active::None;
                            if let Some(r) = u.claimed {
                                let (_, u) = self.unexpected.remove(i);
                                self.complete_claimed(r, u);
                            }
                        }
                        if let Some(inc) = copied {
                            self.port.release(inc)?;
                        }
                        return Ok(());
                    }
                }
                Active::None => {
                    self.port.release(inc)?;
                    return Err(Error::Shm(nemesis_shm::Error::Corrupt { what: "fragment without a first", value: 0 }));
                }
            }
        }
        self.port.release(inc)?;
        Ok(())
    }

    /// Resumes pending sends in order. True if one completed.
    pub(super) fn resume_pending(&mut self) -> Result<bool> {
        if self.pending.is_empty() {
            return Ok(false);
        }
        let mut done = false;
        let mut i = 0;
        while i < self.pending.len() {
            let Pending { req, internal, sync, ref own } = self.pending[i];
            let Some(Op::Send { ps, buf, len, dest, pieces }) = self.reqs.op_mut(req) else {
                self.pending.remove(i);
                continue;
            };
            let (buf, len, dest) = (*buf, *len, *dest);
            let tag = ps.header().tag;
            let local = ps.dst();
            let resumed = match (own, *pieces) {
                (Some(own), _) => self.port.resume(ps, &own[..]),
                // SAFETY: the send's pieces stay valid until its request completes (callers'
                // contract).
                (None, Some(p)) => self.port.resume_pieces(ps, unsafe { p.as_ref() }),
                // SAFETY: the send's buffer stays valid until its request completes (callers'
                // contract); `len` bytes were given.
                (None, None) => self.port.resume(ps, unsafe { raw_slice(buf, len) }),
            };
            match resumed {
                Ok(true) => {
                    self.ring(local);
                    let status = Status { source: self.rank, tag, len };
                    match sync {
                        Some(token) => {
                            if let Some(op) = self.reqs.op_mut(req) {
                                *op = Op::Sync;
                            }
                            self.sync_waiting.push((token, req, dest, status));
                        }
                        None => self.reqs.complete(req, Ok(status)),
                    }
                    if internal {
                        let _ = self.reqs.take(req);
                    }
                    self.pending.remove(i);
                    done = true;
                }
                Ok(false) => i += 1,
                Err(e) => {
                    let e = self.send_error(e, dest);
                    // Under recovery a message to a dead rank is lost with it (`recovery.rs`).
                    let result = if self.ft_lost(&e) { Ok(Status { source: self.rank, tag, len }) } else { Err(e) };
                    self.reqs.complete(req, result);
                    if internal {
                        let _ = self.reqs.take(req);
                    }
                    self.pending.remove(i);
                    done = true;
                }
            }
        }
        Ok(done)
    }

    /// Reacts to what the port learnt about local peers.
    pub(super) fn handle_events(&mut self, mut by: Option<&mut Bypass>) -> Result<()> {
        for ev in self.port.take_events() {
            match ev {
                PeerEvent::Gone { rank } => {
                    let g = self.global[usize::from(rank)];
                    if self.peers[g as usize] == Peer::Alive {
                        self.peers[g as usize] = Peer::Gone;
                    }
                    tracing::warn!(rank = g, "peer ended");
                }
                PeerEvent::PartialDropped { rank, .. } => {
                    let dead = self.global[usize::from(rank)];
                    self.drop_partial(dead, by.as_deref_mut())?;
                }
                PeerEvent::Silent { rank } => {
                    // Large messages with it fail (their requests complete at the next step).
                    self.lmt.peer_gone(rank, &self.rings);
                    let dead = self.global[usize::from(rank)];
                    if self.ft_recovers() {
                        // It will be restarted: what waits on it keeps waiting; its rendezvous
                        // or eager messages whose data did not all come are received again
                        // (`recovery.rs`).
                        self.drop_partial(dead, by.as_deref_mut())?;
                        self.ft_peer_silent(dead);
                        self.lmt_finish();
                        self.ft_rdv_silent(dead)?;
                    } else {
                        self.peer_silent(dead, by.as_deref_mut())?;
                    }
                }
                PeerEvent::Restarted { rank } => self.ft_peer_restarted(self.global[usize::from(rank)]),
            }
        }
        Ok(())
    }

    /// Under recovery, the netmod's notice that remote rank `dead` is gone came through the receive
    /// queue after its last arrival: as for a silent local peer under recovery, its large
    /// transfers fail, its partial message and rendezvous whose data did not all come are received
    /// again from its next incarnation, and what waits on it keeps waiting for that; the
    /// retirement the launcher asks for may complete (`recovery.rs`).
    fn ft_remote_silent(&mut self, dead: u32, by: Option<&mut Bypass>) -> Result<()> {
        self.saw_death(dead);
        self.netlmt.peer_gone(dead);
        self.drop_partial(dead, by)?;
        self.ft_peer_silent(dead);
        self.lmt_finish();
        self.ft_rdv_silent(dead)?;
        if let Some(ft) = self.ft.as_deref_mut()
            && !ft.net_silent.contains(&dead)
        {
            ft.net_silent.push(dead);
        }
        tracing::warn!(rank = dead, "remote peer is gone: what waits on it waits for its restart");
        Ok(())
    }

    /// The message being received from dead rank `dead` will never complete: its receive fails,
    /// or under recovery waits for the sender's next incarnation (`recovery.rs`).
    fn drop_partial(&mut self, dead: u32, by: Option<&mut Bypass>) -> Result<()> {
        let mut by = by;
        self.ft_eager_check_dropped(dead);
        if self.ft_recovers() && self.ft_eager_withdrawn(dead, by.as_deref_mut())? {
            return Ok(());
        }
        match std::mem::take(&mut self.active[dead as usize]) {
            Active::Bypass => {
                if let Some(b) = by {
                    b.done = Some(Err(Error::PeerDied { rank: dead }));
                }
            }
            Active::Req(r) => self.reqs.complete(r, Err(Error::PeerDied { rank: dead })),
            Active::Unexpected(id) => {
                if let Some(i) = self.unexpected.find_id(Some(dead), id) {
                    let (_, mut u) = self.unexpected.remove(i);
                    if let Some(r) = u.claimed {
                        self.reqs.complete(r, Err(Error::PeerDied { rank: dead }));
                    }
                    // Its cells go back; the message is dropped whole.
                    let _ = self.release_held(&mut u, None);
                    self.forget_unexpected(u);
                }
            }
            Active::FtControl => {
                if let Some(ft) = self.ft.as_deref_mut() {
                    ft.partial_control.retain(|(s, _)| *s != dead);
                }
            }
            Active::None | Active::Discard => {}
        }
        Ok(())
    }

    /// Nothing more can arrive from rank `dead` (a local peer whose queue traffic was drained, or
    /// a remote one whose netmod notice came through the queue after its last arrival): what
    /// waits on it fails with `PeerDied`.
    fn peer_silent(&mut self, dead: u32, mut by: Option<&mut Bypass>) -> Result<()> {
        if self.peers[dead as usize] == Peer::Silent {
            return Ok(());
        }
        self.peers[dead as usize] = Peer::Silent;
        self.drop_partial(dead, by.as_deref_mut())?;
        self.cancels_to_dead(dead);
        if self.route[dead as usize] == NOT_LOCAL {
            self.netlmt.peer_gone(dead);
            tracing::warn!(rank = dead, "remote peer is gone");
        }
        let mut i = 0;
        while i < self.posted.len() {
            if self.posted[i].want.source == dead as i32 {
                let Some(p) = self.take_posted(i) else { return Err(Error::InvalidRequest) };
                self.reqs.complete(p.req, Err(Error::PeerDied { rank: dead }));
            } else {
                i += 1;
            }
        }
        self.rebuild_expected();
        // Synchronous sends to it will never be acknowledged.
        let mut i = 0;
        while i < self.sync_waiting.len() {
            if self.sync_waiting[i].2 == dead {
                let (_, req, _, _) = self.sync_waiting.swap_remove(i);
                self.reqs.complete(req, Err(Error::PeerDied { rank: dead }));
            } else {
                i += 1;
            }
        }
        if let Some(b) = by
            && b.want.source == dead as i32
            && b.done.is_none()
            && b.lmt.is_none()
        {
            b.done = Some(Err(Error::PeerDied { rank: dead }));
        }
        Ok(())
    }
}
