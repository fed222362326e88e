//! Fault tolerance (HydEE, `crate::ft`) on the Endpoint's paths: the send hook with the sender log
//! and the piggyback, the arrival hook (stale and duplicate messages dropped, a dropped RTS or
//! synchronous send answered so that its sender completes), the delivery hook, the engine's
//! control messages on the per-pair FIFO, and the actions the engine asks for (control messages,
//! replays from the log, log garbage collection, held sends resumed).
//!
//! Every function here runs only with fault tolerance on: the inline paths reach them through
//! comparisons they make anyway (`inline_below`, the header's kind and flags in one word).

use nemesis_ft::{
    Action, Control as FtControl, Delivery, Endpoint as FtEndpoint, Outbound, Piggyback, Reception, Stamp,
};
use nemesis_lmt::Control;
use nemesis_shm::{Incoming, MsgHeader, Sent};

use super::eager::{Mode, Pending};
use super::matching::{Unexpected, Want, copy_into, finish};
use super::progress::Active;
use super::request::{Op, RecvBuf, Request};
use super::waiting::Bypass;
use super::{
    Inner, KIND_EAGER, KIND_EAGER_SYNC, KIND_FT_CONTROL, KIND_FT_MARK, KIND_RTS, MARK_DURABLE, MARK_SKIPPED, NOT_LOCAL,
    Status, raw_slice,
};

use crate::error::{Error, Result};
use crate::ft::checkpoint::SavedMessage;
use crate::ft::{ENVELOPE, Ft, envelope, parse_envelope, short_aux, stamp_flag, unwire, widen_stamp, wire};
use nemesis_shm::cell::flags::FT_STAMP_SHORT;

/// A send as the application asked for it, kept while the engine holds it.
#[derive(Clone, Copy, Debug)]
pub(crate) struct FtSend {
    pub(crate) ptr: *const u8,
    pub(crate) len: usize,
    pub(crate) local: u16,
    pub(crate) dest: u32,
    pub(crate) tag: i32,
    pub(crate) context: u32,
    pub(crate) sync: bool,
    /// Longer messages go by rendezvous (the eager limit of this kind of send).
    pub(crate) limit: usize,
}

/// What one try of a send gave.
enum Attempt {
    /// The engine holds it back.
    Held,
    /// Sent, logged or dropped: the request if one is needed (`None`: complete).
    Sent(Option<Request>),
}

impl Inner {
    /// An existing request given a new operation, or a new request.
    pub(super) fn set_op(&mut self, req: Option<Request>, op: Op) -> Request {
        self.reqs.set_or_insert(req, op)
    }

    /// A send with fault tolerance on, after the argument checks: `None` when complete on return.
    /// Sends the engine holds back (recovery) wait in order, and later ones behind them.
    ///
    /// # Safety
    /// The `len` bytes at `s.ptr` must stay valid and unchanged until the request completes.
    pub(super) unsafe fn send_ft(&mut self, s: FtSend) -> Result<Option<Request>> {
        let held = self.ft.as_deref().is_some_and(|ft| !ft.held.is_empty());
        if !held {
            // SAFETY: the caller's contract.
            let attempt = unsafe { self.ft_attempt(s, None) }?;
            // The send hook may have queued control messages: a regenerated orphan's
            // `OrphanNotification`, a held send's `MyPhase`. They go out now: the caller may next
            // block in a receive that only they can unblock (the coordinator's horizon waits for
            // them), and nothing else is bound to drain the engine before that.
            self.ft_drain_if_any()?;
            match attempt {
                Attempt::Sent(req) => return Ok(req),
                Attempt::Held => {}
            }
        }
        Ok(Some(self.hold(s)))
    }

    /// [`ft_drain`](Self::ft_drain) if the engine has actions waiting.
    #[inline]
    fn ft_drain_if_any(&mut self) -> Result<()> {
        if self.ft.as_deref().is_some_and(|ft| ft.process.has_actions()) { self.ft_drain() } else { Ok(()) }
    }

    /// Keeps a send the engine holds back (or one behind it), in order: its request.
    /// It keeps the phase of this call: tried again later, after deliveries the application made
    /// meanwhile, it still carries it ([`on_send_as_of`](nemesis_ft::Process::on_send_as_of)).
    fn hold(&mut self, s: FtSend) -> Request {
        let req = self.reqs.insert(Op::Held(s));
        if let Some(ft) = self.ft.as_deref_mut() {
            let phase = ft.process.phase();
            ft.held.push_back((req, phase));
        }
        req
    }

    /// A blocking send with fault tolerance on. The common case inline, with no request: no send
    /// held, the engine's send hook on its fast path ([`send_fast`](nemesis_ft::Process::send_fast)),
    /// to a local rank, eager, into a fastbox or cells at once. Anything else takes the general
    /// path ([`send_ft_blocking_slow`](Self::send_ft_blocking_slow)).
    #[inline(always)]
    pub(super) fn send_ft_blocking(&mut self, buf: &[u8], local: u16, dest: u32, tag: i32, context: u32) -> Result<()> {
        if local != NOT_LOCAL
            && buf.len() <= self.eager_limit_of(local, Mode::Blocking)
            && let Some(ft) = self.ft.as_deref_mut()
            && ft.held.is_empty()
            && let Some((piggyback, log, stamp, flags)) = {
                let digest = ft.digest(dest, tag, context, buf);
                let flags = ft.stamp_flags(dest, buf.len(), false);
                ft.process.send_fast_stamped(dest, digest).map(|(p, l, s)| (p, l, s, flags))
            }
        {
            if log {
                self.ft_log(dest, piggyback, stamp, tag, context, buf)?;
            }
            let pb = wire(piggyback, stamp);
            let aux = if flags == FT_STAMP_SHORT { short_aux(stamp) } else { 0 };
            let hdr = MsgHeader { flags, aux, ..self.header(dest, tag, context) };
            return match self.port.send(local, &hdr, Some(&pb), buf) {
                Ok(Sent::Done) => {
                    self.ring(local);
                    Ok(())
                }
                Ok(Sent::Pending(ps)) => self.send_ft_wait_cells(ps, buf, dest),
                Err(e) => self.send_ft_failed(e, dest),
            };
        }
        self.send_ft_blocking_slow(buf, local, dest, tag, context)
    }

    /// A blocking send short of cells: it waits in the pending list.
    #[inline(never)]
    fn send_ft_wait_cells(&mut self, ps: nemesis_shm::PendingSend, buf: &[u8], dest: u32) -> Result<()> {
        let req = self.reqs.insert(Op::Send { ps, buf: buf.as_ptr(), len: buf.len(), dest, pieces: None });
        self.pending.push_back(Pending { req, internal: false, sync: None, own: None });
        self.wait(req).map(drop)
    }

    /// [`send_ft_blocking`](Self::send_ft_blocking) off its common case: the general send, then
    /// the wait for its request if it has one.
    #[inline(never)]
    fn send_ft_blocking_slow(&mut self, buf: &[u8], local: u16, dest: u32, tag: i32, context: u32) -> Result<()> {
        let limit = self.eager_limit_of(local, Mode::Blocking);
        let s = FtSend { ptr: buf.as_ptr(), len: buf.len(), local, dest, tag, context, sync: false, limit };
        // SAFETY: `buf` outlives the request, which we wait for before returning.
        match unsafe { self.send_ft(s) }? {
            None => Ok(()),
            Some(req) => self.wait(req).map(drop),
        }
    }

    /// The engine's send hook, then the send it allows. `held`: a held send's request and the
    /// phase of its call (`None` for a new send).
    ///
    /// # Safety
    /// As for [`send_ft`](Self::send_ft).
    unsafe fn ft_attempt(&mut self, s: FtSend, held: Option<(Request, u64)>) -> Result<Attempt> {
        let Some(ft) = self.ft.as_deref_mut() else {
            return Err(Error::Config("a fault-tolerant send without fault tolerance".into()));
        };
        // SAFETY: the caller's contract.
        let digest = ft.digest(s.dest, s.tag, s.context, unsafe { raw_slice(s.ptr, s.len) });
        let ((out, stamp), req) = match held {
            None => (ft.process.on_send_stamped(s.dest, digest)?, None),
            Some((req, phase)) => (ft.process.on_send_as_of_stamped(s.dest, phase, digest)?, Some(req)),
        };
        // SAFETY: the caller's contract.
        unsafe { self.ft_outbound(s, req, out, stamp) }
    }

    /// The send the engine's send hook allowed (`out`), stamped `stamp`. `req`: the request of a
    /// held send.
    ///
    /// # Safety
    /// As for [`send_ft`](Self::send_ft).
    unsafe fn ft_outbound(&mut self, s: FtSend, req: Option<Request>, out: Outbound, stamp: Stamp) -> Result<Attempt> {
        let status = Status { source: self.rank, tag: s.tag, len: s.len };
        // SAFETY: the caller's contract.
        let data = unsafe { raw_slice(s.ptr, s.len) };
        let (piggyback, log) = match out {
            Outbound::Transmit { piggyback, log } => (piggyback, log),
            Outbound::LogOnly { piggyback } => {
                // A regenerated orphan: the destination has it; the log keeps it for a later rollback.
                self.ft_log(s.dest, piggyback, stamp, s.tag, s.context, data)?;
                return Ok(Attempt::Sent(self.complete_send(req, status)));
            }
            Outbound::Drop => return Ok(Attempt::Sent(self.complete_send(req, status))),
            Outbound::Hold => return Ok(Attempt::Held),
        };
        let pb = wire(piggyback, stamp);
        if s.len > s.limit {
            // SAFETY: the caller's contract.
            let req =
                unsafe { self.lmt_send(s.ptr, s.len, None, s.local, s.dest, s.tag, s.context, 0, Some(&pb), req) }?;
            if log {
                // Copied into the log while the receiver moves the data: done before the send can
                // complete, and the buffer is the caller's again once it has (and before a
                // `Restarted` can ask for a replay: the same call).
                self.ft_log(s.dest, piggyback, stamp, s.tag, s.context, data)?;
                // The RTS to another group is out, no data has moved.
                nemesis_shm::failpoint!("ft-rendezvous-sent");
            }
            return Ok(Attempt::Sent(Some(req)));
        }
        if log {
            self.ft_log(s.dest, piggyback, stamp, s.tag, s.context, data)?;
        }
        // No token but a synchronous send's (for its acknowledgement): with fault tolerance a
        // send is not cancelled.
        let (mut hdr, token) = self.eager_header(s.dest, s.tag, s.context, s.sync, 0);
        hdr.flags |= self.ft.as_deref().map_or(0, |ft| ft.stamp_flags(s.dest, s.len, s.sync));
        if hdr.flags & FT_STAMP_SHORT != 0 {
            // Not synchronous: no token in `aux`.
            hdr.aux = short_aux(stamp);
        }
        if s.local == NOT_LOCAL {
            match self.net_send(s.dest, &hdr, Some(&pb), data) {
                Ok(()) => self.count(s.dest, s.len),
                // Under recovery a message to a dead rank is lost with it (`recovery.rs`).
                Err(e) if self.ft_lost(&e) => return Ok(Attempt::Sent(self.complete_send(req, status))),
                Err(e) => return Err(e),
            }
        } else {
            match self.port.send(s.local, &hdr, Some(&pb), data) {
                Ok(Sent::Done) => self.ring(s.local),
                Ok(Sent::Pending(ps)) => {
                    let req = self.set_op(req, Op::Send { ps, buf: s.ptr, len: s.len, dest: s.dest, pieces: None });
                    let sync = s.sync.then_some(token);
                    self.pending.push_back(Pending { req, internal: false, sync, own: None });
                    return Ok(Attempt::Sent(Some(req)));
                }
                Err(e) => {
                    self.send_ft_failed(e, s.dest)?;
                    return Ok(Attempt::Sent(self.complete_send(req, status)));
                }
            }
        }
        if s.sync {
            let req = self.set_op(req, Op::Sync);
            self.sync_waiting.push((token, req, s.dest, status));
            return Ok(Attempt::Sent(Some(req)));
        }
        Ok(Attempt::Sent(self.complete_send(req, status)))
    }

    /// A send to local rank `dest` failed: under recovery, a message to a dead rank is lost with
    /// it (`recovery.rs`) and the send completes; otherwise the error.
    #[cold]
    fn send_ft_failed(&mut self, e: nemesis_shm::Error, dest: u32) -> Result<()> {
        let e = self.send_error(e, dest);
        if self.ft_lost(&e) { Ok(()) } else { Err(e) }
    }

    /// A send complete at once: its request (if it has one) completes.
    fn complete_send(&mut self, req: Option<Request>, status: Status) -> Option<Request> {
        let r = req?;
        self.reqs.complete(r, Ok(status));
        Some(r)
    }

    /// Appends an inter-group message to the sender log, behind its envelope, with its stamp.
    /// Inline: on every inter-group send, the call would cost about as much as the append's fast
    /// path.
    #[inline(always)]
    fn ft_log(&mut self, dest: u32, pb: Piggyback, stamp: Stamp, tag: i32, context: u32, data: &[u8]) -> Result<()> {
        let Some(ft) = self.ft.as_deref_mut() else { return Ok(()) };
        ft.log.append_stamped(dest, pb, stamp, &envelope(tag, context), data)?;
        ft.stats.logged += 1;
        ft.stats.logged_bytes += data.len() as u64;
        Ok(())
    }

    /// The delivery hook of a message that request `req` receives: applied when the application
    /// takes the request's result ([`ft_taken`](Self::ft_taken)), not when the message arrives.
    /// \[R+\] Phases must follow what the application has received: with the hook at arrival, a
    /// send made between a non-blocking receive and its wait carries a phase that depends on
    /// whether the message happened to have arrived, a re-execution computes other phases than the
    /// first run, and a later recovery round waits forever for orphans in phases no regenerated
    /// message has (`ft/tests/hydee/properties.rs`, `phases_follow_deliveries_not_arrivals`).
    #[inline(always)]
    pub(super) fn ft_deliver_later(&mut self, req: Request, d: Option<Delivery>) {
        if let Some(d) = d
            && let Some(ft) = self.ft.as_deref_mut()
        {
            ft.deferred.push((req, d));
        }
    }

    /// The application took `req`'s result: the delivery it was waiting for, if any.
    #[inline(always)]
    pub(super) fn ft_taken(&mut self, req: Request) {
        if let Some(ft) = self.ft.as_deref_mut()
            && !ft.deferred.is_empty()
        {
            ft.take_deferred(req);
        }
    }

    /// The engine's delivery hook: the application receives a message whose arrival gave `d`.
    #[inline(always)]
    pub(super) fn ft_deliver(&mut self, d: Option<Delivery>) {
        if let Some(d) = d
            && let Some(ft) = self.ft.as_deref_mut()
        {
            ft.process.on_deliver(d);
        }
    }

    /// The engine's arrival hook for the first fragment of a message with a piggyback from
    /// `source`: `Some` to keep it (what delivering it will do), `None` to drop it. The fragment
    /// is not released. Inline: the common case (kept, nothing for the engine to do) is a few
    /// comparisons; the rest is [`ft_arrival_rest`](Self::ft_arrival_rest).
    #[inline]
    pub(super) fn ft_arrival(&mut self, inc: &Incoming, source: u32) -> Result<Option<Delivery>> {
        let Some(ft) = self.ft.as_deref_mut() else {
            return Err(ft_off(source));
        };
        let Some(bytes) = inc.piggyback() else {
            return Err(Error::Shm(nemesis_shm::Error::Corrupt { what: "piggyback", value: 0 }));
        };
        let reception;
        let pb;
        if ft.inter.get(source as usize).copied().unwrap_or(false) {
            let (stamp, digest);
            (pb, stamp, digest) = arrival_stamp(ft, inc, source, &bytes)?;
            reception = ft.process.on_receive_stamped(source, pb, stamp, digest)?;
        } else {
            // The engine does not look at the stamps of this group's messages.
            pb = Piggyback::decode_slice(&bytes)?;
            reception = ft.process.on_receive(source, pb)?;
        }
        if let Reception::Deliver(d) = reception
            && !ft.process.has_actions()
        {
            return Ok(Some(d));
        }
        self.ft_arrival_rest(source, pb, reception)
    }

    /// [`ft_arrival`](Self::ft_arrival) off its common case: a message dropped (stale or
    /// duplicate), or actions the engine asks for (an acknowledgement to send...).
    #[inline(never)]
    fn ft_arrival_rest(&mut self, source: u32, pb: Piggyback, reception: Reception) -> Result<Option<Delivery>> {
        let kept = match reception {
            Reception::Deliver(d) => Some(d),
            Reception::Stale | Reception::Duplicate => {
                if let Some(ft) = self.ft.as_deref_mut() {
                    ft.stats.dropped += 1;
                }
                tracing::debug!(source, date = pb.date(), ?reception, "HydEE: arrival dropped");
                None
            }
        };
        if self.ft.as_deref().is_some_and(|ft| ft.process.has_actions()) {
            self.ft_drain()?;
        }
        Ok(kept)
    }

    /// Drops a message the engine refused on arrival (its sender replays it from its log if it is
    /// needed); a synchronous send or an RTS is answered so that its sender completes.
    pub(super) fn drop_arrival(&mut self, inc: Incoming<'static>, source: u32, _by: Option<&mut Bypass>) -> Result<()> {
        let (kind, aux, last) = (inc.kind(), inc.aux(), inc.is_last());
        let mut rts = None;
        if kind == KIND_RTS && last {
            let mut bytes = [0u8; nemesis_lmt::wire::MAX_ENCODED];
            let n = inc.copy_to(&mut bytes);
            if let Ok(Control::Rts(r)) = Control::decode(&bytes[..n]) {
                rts = Some(r);
            }
        }
        self.port.release(inc)?;
        if !last {
            self.active[source as usize] = Active::Discard;
        }
        if kind == KIND_EAGER_SYNC {
            self.send_ack(source, aux)?;
        }
        if let Some(rts) = rts {
            self.release_rts(source, &rts)?;
        }
        Ok(())
    }

    /// A message of the fault-tolerance kinds: a control message of the engine, or a checkpoint
    /// marker.
    pub(super) fn deliver_ft(&mut self, inc: Incoming<'static>, source: u32) -> Result<()> {
        if inc.kind() == KIND_FT_MARK {
            let (generation, stage) = (u64::from(inc.aux()), inc.tag());
            self.port.release(inc)?;
            let Some(ft) = self.ft.as_deref_mut() else { return Ok(()) };
            let s = source as usize;
            match stage {
                0 => ft.marks[s][0] = ft.marks[s][0].max(generation),
                MARK_DURABLE => ft.marks[s][1] = ft.marks[s][1].max(generation),
                MARK_SKIPPED => {
                    ft.marks[s][1] = ft.marks[s][1].max(generation);
                    ft.skipped[s] = ft.skipped[s].max(generation);
                }
                _ => {
                    ft.marks[s][1] = ft.marks[s][1].max(generation);
                    ft.failed[s] = ft.failed[s].max(generation);
                }
            }
            return Ok(());
        }
        let len = inc.len();
        let mut bytes = vec![0u8; len];
        inc.copy_to(&mut bytes);
        let last = inc.is_last();
        self.port.release(inc)?;
        if !last {
            if let Some(ft) = self.ft.as_deref_mut() {
                ft.partial_control.push((source, bytes));
            }
            self.active[source as usize] = Active::FtControl;
            return Ok(());
        }
        self.ft_control(source, &bytes)
    }

    /// A further fragment of a control message from `source`.
    pub(super) fn ft_control_fragment(&mut self, inc: Incoming<'static>, source: u32) -> Result<()> {
        let (off, last) = (inc.offset(), inc.is_last());
        let i = self.ft.as_deref().and_then(|ft| ft.partial_control.iter().position(|(s, _)| *s == source));
        if let (Some(i), Some(ft)) = (i, self.ft.as_deref_mut()) {
            let buf = &mut ft.partial_control[i].1;
            let off = off.min(buf.len());
            inc.copy_to(&mut buf[off..]);
        }
        self.port.release(inc)?;
        if !last {
            return Ok(());
        }
        self.active[source as usize] = Active::None;
        let Some(bytes) = i.and_then(|i| self.ft.as_deref_mut().map(|ft| ft.partial_control.swap_remove(i).1)) else {
            return Ok(());
        };
        self.ft_control(source, &bytes)
    }

    /// A control message of the engine from process `source`.
    fn ft_control(&mut self, source: u32, bytes: &[u8]) -> Result<()> {
        let msg = FtControl::decode(bytes)?;
        let Some(ft) = self.ft.as_deref_mut() else {
            return Err(Error::Config(format!(
                "rank {source} sent a fault-tolerance control message and fault tolerance is off here"
            )));
        };
        ft.stats.control_received += 1;
        tracing::debug!(source, msg = msg.name(), "HydEE: control message");
        if let FtControl::Restarted { date, last_received, .. } = &msg
            && tracing::enabled!(tracing::Level::DEBUG)
        {
            let logged = ft.log.entries(source);
            tracing::debug!(
                source,
                date,
                last_received,
                logged = logged.len(),
                first = ?logged.first(),
                last = ?logged.last(),
                "HydEE: Restarted; log for it"
            );
        }
        ft.process.on_control(FtEndpoint::Process(source), msg, &ft.log)?;
        self.ft_drain()
    }

    /// Applies the engine's actions until none is left (`poll_action`): control messages go out on
    /// the FIFO of their destination, replays are read back from the log, acknowledged log entries
    /// are dropped, held sends are tried again.
    pub(super) fn ft_drain(&mut self) -> Result<()> {
        loop {
            let Some(action) = self.ft.as_deref_mut().and_then(|ft| ft.process.poll_action()) else {
                self.ft_report_replays();
                return Ok(());
            };
            match action {
                Action::Control { to: FtEndpoint::Process(j), msg }
                    if matches!(msg, FtControl::Ack { .. } | FtControl::Checkpointed { .. }) =>
                {
                    if let Some(ft) = self.ft.as_deref_mut() {
                        ft.defer_gc(j, msg);
                    }
                }
                Action::Control { to: FtEndpoint::Process(j), msg } => self.send_ft_control(j, &msg)?,
                Action::Control { to: FtEndpoint::Coordinator(c), msg } => {
                    tracing::debug!(coordinator = c, msg = msg.name(), "HydEE: message for a recovery coordinator");
                    if let Some(ft) = self.ft.as_deref_mut() {
                        match ft.channel.as_mut() {
                            Some(ch) => {
                                ch.send(&crate::contract::channel::Frame::Engine { coordinator: c, msg });
                                ft.stats.control_sent += 1;
                            }
                            None => ft.to_coordinator.push((c, msg)),
                        }
                    }
                }
                Action::Replay { to, piggyback } => self.replay(to, piggyback)?,
                Action::DiscardLog { to, before } => {
                    if let Some(ft) = self.ft.as_deref_mut() {
                        ft.log.discard_before(to, before);
                    }
                }
                Action::ResumeSends => self.resume_held()?,
            }
        }
    }

    /// Sends the acknowledgements and RPP prunings held back since the group's previous durable
    /// checkpoint (`Ft::defer_gc`): its newest one is durable now, the previous one becomes the
    /// older of the two retained.
    pub(super) fn ft_release_deferred(&mut self) -> Result<()> {
        let deferred = self.ft.as_deref_mut().map(|ft| std::mem::take(&mut ft.gc_deferred)).unwrap_or_default();
        for (j, msg) in deferred {
            self.send_ft_control(j, &msg)?;
        }
        Ok(())
    }

    /// Sends a control message of the engine to process `to`, on the FIFO of its messages.
    fn send_ft_control(&mut self, to: u32, msg: &FtControl) -> Result<()> {
        let bytes = msg.encode();
        let hdr = MsgHeader { kind: KIND_FT_CONTROL, ..self.header(to, 0, 0) };
        // Recovery deals with a dead peer.
        self.send_own(to, &hdr, None, &bytes)?;
        if let Some(ft) = self.ft.as_deref_mut() {
            ft.stats.control_sent += 1;
        }
        Ok(())
    }

    /// Sends checkpoint marker `stage` of generation `generation` to process `to`.
    pub(super) fn send_ft_mark(&mut self, to: u32, generation: u64, stage: i32) -> Result<()> {
        let aux = u32::try_from(generation)
            .map_err(|_| Error::Checkpoint(format!("generation {generation} does not fit the marker")))?;
        let hdr = MsgHeader { kind: KIND_FT_MARK, aux, ..self.header(to, stage, 0) };
        // A dead member is found by the wait for its marker.
        self.send_own(to, &hdr, None, &[])
    }

    /// Tries the held sends again, in order, until the engine holds one back again.
    fn resume_held(&mut self) -> Result<()> {
        loop {
            let Some((req, phase)) = self.ft.as_deref().and_then(|ft| ft.held.front().copied()) else {
                return Ok(());
            };
            let s = match self.reqs.op_mut(req) {
                Some(Op::Held(s)) => *s,
                // Not held any more (cannot happen: only this function takes held sends).
                _ => {
                    if let Some(ft) = self.ft.as_deref_mut() {
                        ft.held.pop_front();
                    }
                    continue;
                }
            };
            // SAFETY: a held send's buffer stays valid until its request completes (the contract
            // of the call that started it).
            let attempt = unsafe { self.ft_attempt(s, Some((req, phase))) };
            if matches!(attempt, Ok(Attempt::Held)) {
                return Ok(());
            }
            if let Some(ft) = self.ft.as_deref_mut() {
                ft.held.pop_front();
            }
            if let Err(e) = attempt {
                self.reqs.complete(req, Err(e));
            }
        }
    }

    /// Transmits again the message logged for `to` at `pb.date()`, with piggyback `pb`.
    fn replay(&mut self, to: u32, pb: Piggyback) -> Result<()> {
        let Some(ft) = self.ft.as_deref_mut() else { return Ok(()) };
        let mut buf = Vec::new();
        let (_, stamp) = ft.log.read_stamped(to, pb.date(), &mut buf)?;
        let (tag, context) =
            parse_envelope(&buf).ok_or_else(|| Error::Checkpoint("a logged message without its envelope".into()))?;
        let flags = stamp_flag(ft.stamps(to));
        let bytes = wire(pb, stamp);
        let local = self.route[to as usize];
        let len = buf.len() - ENVELOPE;
        ft.stats.replayed += 1;
        ft.stats.replayed_bytes += len as u64;
        tracing::debug!(to, date = pb.date(), len, "HydEE: replay");
        if len > self.eager_limit_of(local, Mode::Standard) {
            let payload = buf.split_off(ENVELOPE);
            // SAFETY: `payload` is kept with the request until it completes (`ft_reap_replays`); a
            // `Vec`'s heap buffer does not move with it.
            let req =
                unsafe { self.lmt_send(payload.as_ptr(), len, None, local, to, tag, context, 0, Some(&bytes), None) }?;
            if let Some(ft) = self.ft.as_deref_mut() {
                ft.replays.push((req, payload));
            }
            return Ok(());
        }
        let hdr = MsgHeader { flags, ..self.header(to, tag, context) };
        self.send_own(to, &hdr, Some(&bytes), &buf[ENVELOPE..])
    }

    /// Keeps `bytes`, the contiguous copy a send of `req` goes from (a message in pieces), until
    /// the send completes.
    pub(super) fn ft_keep(&mut self, req: Request, bytes: Box<[u8]>) {
        if self.reqs.is_done(req).unwrap_or(true) {
            return;
        }
        if let Some(ft) = self.ft.as_deref_mut() {
            ft.staged.push((req, bytes));
        }
    }

    /// Frees the buffers of replays sent by rendezvous once their transfer is over, and the copies
    /// of sends in pieces once their request completed (or was taken: its handle is then stale).
    pub(super) fn ft_reap_replays(&mut self) {
        let (Some(ft), reqs) = (self.ft.as_deref_mut(), &mut self.reqs) else { return };
        ft.replays.retain(|&(req, _)| match reqs.take(req) {
            Ok(None) => true,
            Ok(Some(Err(e))) => {
                tracing::warn!(error = %e, "HydEE: a replay failed");
                false
            }
            _ => false,
        });
        ft.staged.retain(|(req, _)| matches!(reqs.is_done(*req), Ok(false)));
    }

    /// The inline bypass with fault tolerance: a fastbox message with a piggyback from
    /// `want.source` that matches the blocking receive `want`. Inline, the common case: the
    /// engine's arrival and delivery hooks on their fast paths
    /// ([`receive_deliver_fast`](nemesis_ft::Process::receive_deliver_fast)) and nothing queued
    /// for it to do; anything else is [`recv_ft_checked`](Self::recv_ft_checked).
    #[inline(always)]
    pub(super) fn recv_ft_fastbox(
        &mut self,
        inc: Incoming<'static>,
        want: Want,
        buf: RecvBuf,
        src_local: u16,
    ) -> Result<Status> {
        let source = want.source as u32;
        if let Some(ft) = self.ft.as_deref_mut()
            && let Some(bytes) = inc.piggyback()
            && !ft.process.has_actions()
            && receive_fast(ft, &inc, source, &bytes)
        {
            let status = Status { source, tag: inc.tag(), len: inc.len() };
            copy_into(buf, &inc);
            self.port.release(inc)?;
            return finish(status, buf.cap);
        }
        self.recv_ft_checked(inc, want, buf, src_local)
    }

    /// [`recv_ft_fastbox`](Self::recv_ft_fastbox) off its common case: the engine's hooks in full;
    /// a message it drops leaves the receive waiting on.
    #[inline(never)]
    fn recv_ft_checked(&mut self, inc: Incoming<'static>, want: Want, buf: RecvBuf, src_local: u16) -> Result<Status> {
        let source = want.source as u32;
        match self.ft_arrival(&inc, source) {
            Ok(Some(d)) => {
                self.ft_deliver(Some(d));
                let status = Status { source, tag: inc.tag(), len: inc.len() };
                copy_into(buf, &inc);
                self.port.release(inc)?;
                finish(status, buf.cap)
            }
            Ok(None) => {
                self.drop_arrival(inc, source, None)?;
                self.recv_wait(want, buf, src_local)
            }
            Err(e) => {
                self.port.release(inc)?;
                Err(e)
            }
        }
    }

    /// Puts back the messages a restored checkpoint holds (they had arrived, unreceived).
    pub(super) fn restore_unexpected(&mut self, saved: Vec<SavedMessage>) {
        for m in saved {
            let id = self.next_unexpected;
            self.next_unexpected += 1;
            let mut u = Unexpected::new(m.source, m.tag, m.context, m.data.len(), 0);
            u.got = m.data.len();
            u.sync = m.sync;
            u.delivery = m.delivery;
            self.count_unexpected(m.data.len());
            u.data = m.data;
            self.unexpected.push((id, u));
        }
    }
}

/// The engine's arrival and delivery hooks together on their fast paths for message `inc` from
/// `source` with piggyback `bytes` (`receive_deliver_fast`): stamped from another group, the
/// piggyback alone from this one (whose stamps the engine does not look at).
#[inline(always)]
fn receive_fast(ft: &mut Ft, inc: &Incoming, source: u32, bytes: &nemesis_shm::PiggybackBytes) -> bool {
    if ft.inter.get(source as usize).copied().unwrap_or(false) {
        let Ok((pb, stamp, digest)) = arrival_stamp(ft, inc, source, bytes) else { return false };
        ft.process.receive_deliver_fast_stamped(source, pb, stamp, digest)
    } else {
        let Ok(pb) = Piggyback::decode_slice(bytes) else { return false };
        ft.process.receive_deliver_fast(source, pb)
    }
}

/// The piggyback and full stamp of message `inc` from `source` (of another group) with piggyback
/// `bytes`, and the digest of what arrived if it was hashed ([`arrival_digest`]): a short stamp
/// (`FT_STAMP_SHORT`, the one reader of that form) is rebuilt from the sequence number expected
/// next from `source` ([`widen_stamp`]). A short stamp on a message that was not hashed is an error:
/// its digest could not be checked.
#[inline(always)]
fn arrival_stamp(
    ft: &Ft,
    inc: &Incoming,
    source: u32,
    bytes: &nemesis_shm::PiggybackBytes,
) -> Result<(Piggyback, nemesis_ft::Stamp, Option<u64>)> {
    use nemesis_shm::cell::flags::FT_STAMP;
    let (pb, stamp) = unwire(bytes)?;
    let digest = arrival_digest(ft, inc, source);
    if inc.kind_flags() >> 8 & u16::from(FT_STAMP | FT_STAMP_SHORT) != u16::from(FT_STAMP_SHORT) {
        return Ok((pb, stamp, digest));
    }
    let Some(d) = digest else {
        return Err(Error::Shm(nemesis_shm::Error::Corrupt { what: "short stamp on a message not hashed", value: 0 }));
    };
    let next = ft.process.last_seq_from(source).wrapping_add(1);
    Ok((pb, widen_stamp(stamp.seq as u32, inc.aux(), d, next), digest))
}

/// The digest of eager message `inc` from `source` as it arrived, when the engine checks it (a
/// sender of another group) and the message is whole in this fragment. A message in several
/// fragments is hashed as its fragments arrive, an RTS once its data is in (`ft_rdv.rs`).
#[inline(always)]
fn arrival_digest(ft: &Ft, inc: &Incoming, source: u32) -> Option<u64> {
    let kind = inc.kind();
    if !ft.digested.get(source as usize).copied().unwrap_or(false)
        || !(kind == KIND_EAGER || kind == KIND_EAGER_SYNC)
        || inc.offset() != 0
        || !inc.is_last()
    {
        return None;
    }
    // SAFETY: the fragment is not released while `inc` is borrowed; its `frag_len` payload bytes
    // at `payload_ptr` were validated against its slot or cell when it was polled.
    let payload = unsafe { std::slice::from_raw_parts(inc.payload_ptr(), inc.frag_len()) };
    Some(nemesis_ft::digest::digest(&envelope(inc.tag(), inc.context()), payload))
}

/// A message with a piggyback from `source` while fault tolerance is off here.
#[cold]
fn ft_off(source: u32) -> Error {
    Error::Config(format!(
        "rank {source} sent a message with a fault-tolerance piggyback and fault tolerance is off here \
         (every rank needs the same NEMESIS_FT_GROUPS)"
    ))
}
