//! Rendezvous (`nemesis-lmt`): the RTS of a large send, starting a receive's transfer, rendezvous
//! arrivals, and the steps that drive transfers and batch their control messages.

use std::ptr::NonNull;

use nemesis_ft::Delivery;
use nemesis_lmt::{Control, Outcome, RingRef, Rings, Rts};
use nemesis_shm::{Incoming, MsgHeader, Node, Pieces, PiggybackBytes, Segment};

use super::ft_rdv::RdvAt;
use super::matching::{Unexpected, Want, finish};
use super::request::{Op, RecvBuf, Request, Stage};
use super::waiting::Bypass;
use super::{Inner, KIND_LMT, KIND_RTS, NOT_LOCAL, Peer, Status};

use crate::error::{Error, Result};

/// Longest rendezvous message an RTS may announce: what user space can map
/// ([`nemesis_lmt::wire::LEN_MAX`]); no buffer is longer, so an RTS announcing more does not
/// decode and is refused where it arrives.
const RTS_MAX: u64 = nemesis_lmt::wire::LEN_MAX;

/// Largest payload of a KIND_LMT message: control messages to one peer are sent back to back in
/// one message, up to what a fastbox slot carries (and at most this).
const LMT_BATCH_MAX: usize = 256;

/// The node's copy rings, as `nemesis-lmt` sees them.
pub(super) struct SegRings {
    pub(super) seg: &'static Segment,
    pub(super) per: u16,
    pub(super) slots: u32,
    pub(super) slot_size: usize,
    /// The pid each local rank registered, read once after start-up (every rank registered
    /// before the bootstrap's barrier; a later write into the shared rank table changes nothing
    /// here), where it names that process from here ([`nemesis_shm::RankState::pid_here`]), with
    /// the start time it registered (0: unknown), so that a pid reused later is refused.
    pub(super) pids: Vec<Option<(u32, u64)>>,
}

impl Rings for SegRings {
    fn ring(&self, host: u16, index: u16) -> Option<RingRef<'_>> {
        let base = self.seg.lmt_ring_base(host, u32::from(index))?;
        // SAFETY: `lmt_ring_base` bounds-checked `host` and `index` and returned the page-aligned
        // start of that ring's `lmt_ring_bytes` inside the mapped segment, which lives as long as
        // `self.seg`; ring memory is used only through the ring protocol.
        Some(unsafe { RingRef::in_segment(base, self.slots, self.slot_size) })
    }

    fn rings_per_rank(&self) -> u16 {
        self.per
    }

    fn pid(&self, rank: u16) -> Option<u32> {
        self.pids.get(usize::from(rank)).copied().flatten().map(|(pid, _)| pid)
    }

    fn start_time(&self, rank: u16) -> Option<u64> {
        self.pids.get(usize::from(rank)).copied().flatten().map(|(_, start)| start).filter(|&s| s != 0)
    }
}

impl Inner {
    /// Starts a rendezvous send to rank `dest` (local rank `local`, or [`NOT_LOCAL`]): its RTS
    /// goes like an eager message (ordered with the eager messages to `dest`, with the
    /// fault-tolerance piggyback `ft` if given); the data moves once a receive matched it. `token`
    /// marks the RTS for cancellation (0: none). A message in `pieces` (then `ptr` is unused) goes
    /// through the receiver's ring to a local peer, and from a copy of ours to a remote one.
    /// `req`: an existing request of the send to take over (a send the engine held), else a new
    /// one.
    ///
    /// # Safety
    /// The `len` bytes at `ptr` (or the pieces, of length `len`) must stay valid and unchanged
    /// until the request completes.
    #[inline(never)]
    #[allow(clippy::too_many_arguments)]
    pub(super) unsafe fn lmt_send(
        &mut self,
        ptr: *const u8,
        len: usize,
        pieces: Option<NonNull<dyn Pieces>>,
        local: u16,
        dest: u32,
        tag: i32,
        context: u32,
        token: u32,
        ft: Option<&PiggybackBytes>,
        req: Option<Request>,
    ) -> Result<Request> {
        let status = Status { source: self.rank, tag, len };
        let fresh = req.is_none();
        let mut ptr = ptr;
        let stage = match pieces {
            Some(p) if local == NOT_LOCAL => {
                let mut bytes = vec![0u8; len].into_boxed_slice();
                // SAFETY: the pieces are valid and readable (the caller's contract); `bytes` holds
                // their `len` bytes.
                unsafe { p.as_ref().gather(0, bytes.as_mut_ptr(), len) };
                // The boxed bytes do not move when the box does: valid until the request ends.
                ptr = bytes.as_ptr();
                Some(Box::new(Stage { bytes, into: None }))
            }
            _ => None,
        };
        let req = self.set_op(req, Op::Lmt { status, cap: len, peer: dest, recv: false, stage });
        self.reqs.set_sent(req, dest, token);
        // The stamp of a fault-tolerant message travels in its RTS to another group.
        let flags = crate::ft::stamp_flag(ft.is_some() && self.ft.as_deref().is_some_and(|f| f.stamps(dest)));
        let hdr = MsgHeader { kind: KIND_RTS, aux: token, flags, ..self.header(dest, tag, context) };
        let mut bytes = [0u8; nemesis_lmt::wire::MAX_ENCODED];
        let sent = if local == NOT_LOCAL {
            match self.net.as_mut() {
                Some(net) => {
                    // SAFETY: the caller's contract: the buffer stays valid until the request
                    // completes, which is when `nemesis-lmt` reports the transfer's outcome.
                    let rts = unsafe { self.netlmt.pre_send(dest, req.token(), ptr, len as u64, net) };
                    let n = Control::Rts(rts).encode(&mut bytes);
                    self.net_send(dest, &hdr, ft, &bytes[..n])
                }
                // The error of a job without a network module.
                None => self.net_send(dest, &hdr, None, &[]),
            }
        } else {
            let rts = match pieces {
                // SAFETY: as above.
                Some(p) => unsafe { self.lmt.pre_send_pieces(local, req.token(), p, self.pid) },
                // SAFETY: as above.
                None => unsafe { self.lmt.pre_send(local, req.token(), ptr, len as u64, self.pid) },
            };
            let n = Control::Rts(rts).encode(&mut bytes);
            self.send_internal(local, &hdr, ft, &bytes[..n])
        };
        if let Err(e) = sent {
            self.lmt.abandon(req.token());
            if let Some(net) = self.net.as_mut() {
                self.netlmt.abandon(req.token(), net);
            }
            if local == NOT_LOCAL && self.ft_lost(&e) {
                // Under recovery the message is lost with its dead receiver (`recovery.rs`).
                self.reqs.complete(req, Ok(status));
                return Ok(req);
            }
            if fresh {
                // Nobody has the handle: the error is the call's.
                self.reqs.complete(req, Ok(status));
                let _ = self.reqs.take(req);
            }
            return Err(e);
        }
        self.count(dest, len);
        Ok(req)
    }

    /// Receiver: a receive (`req`, into `buf`) took the RTS of rank `source`.
    pub(super) fn start_lmt_recv(&mut self, source: u32, req: Request, rts: &Rts, buf: RecvBuf) {
        if self.peer(source) != Peer::Alive {
            // The sender ended: its buffer is gone (its send cannot have completed unmatched).
            // Under recovery the message comes again (`recovery.rs`).
            if !self.ft_rdv_ended(req, true) {
                self.reqs.complete(req, Err(Error::PeerDied { rank: source }));
            }
            return;
        }
        let local = self.route[source as usize];
        if local != NOT_LOCAL {
            // SAFETY: `buf` is valid for `cap` bytes of writes (or its pieces are), untouched
            // otherwise, until the request completes (the receive's contract); it completes when
            // the transfer's outcome is taken.
            unsafe {
                match buf.pieces {
                    Some(p) => self.lmt.pre_recv_pieces(local, req.token(), rts, p, &self.rings),
                    None => self.lmt.pre_recv(local, req.token(), rts, buf.ptr, buf.cap, &self.rings),
                }
            }
        } else if self.net.is_some() {
            let mut ptr = buf.ptr;
            if let Some(p) = buf.pieces {
                // The network rendezvous fills contiguous bytes: ours, scattered on completion.
                let mut bytes = vec![0u8; buf.cap].into_boxed_slice();
                ptr = bytes.as_mut_ptr();
                if let Some(Op::Lmt { stage, .. }) = self.reqs.op_mut(req) {
                    *stage = Some(Box::new(Stage { bytes, into: Some(p) }));
                }
            }
            if let Some(net) = self.net.as_mut() {
                // SAFETY: as above (a staging buffer is owned by the request until it completes).
                unsafe { self.netlmt.pre_recv(source, req.token(), rts, ptr, buf.cap, net) };
            }
        }
    }

    /// An RTS (matched here like an eager message's first fragment; `delivery`: what receiving it
    /// does to the fault-tolerance engine) or another rendezvous message (handed to `nemesis-lmt`).
    #[inline(never)]
    pub(super) fn deliver_lmt(
        &mut self,
        inc: Incoming<'static>,
        source: u32,
        by: Option<&mut Bypass>,
        delivery: Option<Delivery>,
    ) -> Result<()> {
        let mut bytes = [0u8; LMT_BATCH_MAX];
        let (kind, tag, context, len, token) = (inc.kind(), inc.tag(), inc.context(), inc.len(), inc.aux());
        let src = self.route[source as usize];
        let whole = inc.is_last() && len <= bytes.len();
        let n = if whole { inc.copy_to(&mut bytes) } else { 0 };
        // Under recovery, an RTS: its date, to take its arrival back if its sender dies before the
        // data is in (`recovery.rs`).
        let rts_date = if delivery.is_some() { self.ft_rts_date(&inc, kind == KIND_RTS) } else { None };
        let check = if delivery.is_some() && kind == KIND_RTS { self.ft_rdv_check(&inc, source) } else { None };
        self.port.release(inc)?;
        if !whole {
            let what = "rendezvous message length";
            return Err(Error::Lmt(nemesis_lmt::Error::Wire { what, value: len as u64 }));
        }
        if kind == KIND_LMT {
            // One or more control messages back to back.
            let (lmt, netlmt, rings, mut net) = (&mut self.lmt, &mut self.netlmt, &self.rings, self.net.as_mut());
            let decoded = Control::decode_all(&bytes[..n], |msg| {
                let handled = match (src, net.as_deref_mut()) {
                    (NOT_LOCAL, Some(net)) => netlmt.handle(source, msg, net),
                    (NOT_LOCAL, None) => Ok(()),
                    _ => lmt.handle(src, msg, rings),
                };
                if let Err(e) = handled {
                    // The transfer it named failed with `e` (its request reports it).
                    tracing::warn!(error = %e, peer = source, "bad rendezvous message");
                }
            });
            return decoded.map_err(Error::Lmt);
        }
        let msg = match Control::decode(&bytes[..n]) {
            Ok(msg) => msg,
            Err(nemesis_lmt::Error::TooLong { len, .. }) => {
                // No send makes such a message (none has a buffer that long): its length is never
                // stored, nor allocated by a checkpoint that would pull it in.
                self.refused_rts += 1;
                return Err(Error::RtsTooLong { sender: source, len, limit: RTS_MAX });
            }
            Err(e) => return Err(e.into()),
        };
        let Control::Rts(rts) = msg else {
            return Err(Error::Lmt(nemesis_lmt::Error::Wire { what: "RTS message type", value: u64::from(kind) }));
        };
        let status = Status { source, tag, len: rts.len as usize };
        let msg = Want { source: source as i32, tag, context };
        if let Some(b) = by
            && b.open()
            && b.want.matches(source, tag, context)
        {
            self.ft_deliver(delivery);
            let req = self.reqs.insert(Op::Lmt { status, cap: b.buf.cap, peer: source, recv: true, stage: None });
            b.lmt = Some(req);
            self.ft_rdv_check_at(check, RdvAt::Recv(req, b.buf));
            self.ft_rdv_started(req, msg, rts_date, b.buf);
            self.start_lmt_recv(source, req, &rts, b.buf);
        } else if let Some(i) = self.posted.iter().position(|p| p.want.matches(source, tag, context)) {
            let Some(p) = self.take_posted(i) else { return Err(Error::InvalidRequest) };
            self.expect(p.want.source, false);
            self.ft_deliver_later(p.req, delivery);
            if let Some(op) = self.reqs.op_mut(p.req)
                && let Op::Recv { buf, .. } = *op
            {
                *op = Op::Lmt { status, cap: buf.cap, peer: source, recv: true, stage: None };
                self.ft_rdv_check_at(check, RdvAt::Recv(p.req, buf));
                self.ft_rdv_started(p.req, msg, rts_date, buf);
                self.start_lmt_recv(source, p.req, &rts, buf);
            }
        } else {
            let id = self.next_unexpected;
            self.next_unexpected += 1;
            let mut u = Unexpected::new(source, tag, context, rts.len as usize, token);
            u.rts = Some(rts);
            u.delivery = delivery;
            self.unexpected.push((id, u));
            self.ft_rts_unexpected(id, rts_date);
            self.ft_rdv_check_at(check, RdvAt::Unexpected(id));
        }
        Ok(())
    }

    /// Releases the sender of `rts` (rank `source`), whose message nobody will take: its transfer
    /// ends with no bytes moved.
    pub(super) fn release_rts(&mut self, source: u32, rts: &Rts) -> Result<()> {
        let local = self.route[source as usize];
        let mut bytes = [0u8; nemesis_lmt::wire::MAX_ENCODED];
        if local == NOT_LOCAL {
            let n = Control::Cts { id: rts.id, ring: 0, epoch: 0, bytes: 0 }.encode(&mut bytes);
            let hdr = MsgHeader { kind: KIND_LMT, ..self.header(source, 0, 0) };
            match self.net_send(source, &hdr, None, &bytes[..n]) {
                Ok(()) | Err(Error::PeerDied { .. }) => Ok(()),
                Err(e) => Err(e),
            }
        } else {
            let n = Control::Done { id: rts.id, bytes: 0 }.encode(&mut bytes);
            self.send_lmt_batch(local, &bytes[..n])
        }
    }

    /// Drives the large messages in flight, if any. True if anything happened.
    #[inline(always)]
    pub(super) fn lmt_step(&mut self) -> Result<bool> {
        if !self.lmt.busy() && !self.lmt.has_output() && !self.netlmt.busy() && !self.netlmt.has_output() {
            return Ok(false);
        }
        self.lmt_step_slow()
    }

    /// Sends encoded control messages to local rank `peer` as one KIND_LMT message.
    pub(super) fn send_lmt_batch(&mut self, peer: u16, bytes: &[u8]) -> Result<()> {
        let hdr = MsgHeader { kind: KIND_LMT, ..self.header(self.global[usize::from(peer)], 0, 0) };
        match self.send_internal(peer, &hdr, None, bytes) {
            // Its transfers fail when its death is handled.
            Ok(()) | Err(Error::PeerDied { .. }) => Ok(()),
            Err(e) => Err(e),
        }
    }

    #[inline(never)]
    fn lmt_step_slow(&mut self) -> Result<bool> {
        let moved = self.lmt.progress(&self.rings);
        if moved && self.lmt.busy() {
            nemesis_shm::failpoint!("rendezvous-mid");
        }
        let any = moved || self.lmt.has_output();
        let out: Vec<(u16, Control)> = self.lmt.take_out().collect();
        // Consecutive messages to one peer travel together (a window of transfers finishing in one
        // pass costs one message, not one each): a DONE, HELP or HELPED is 16 to 36 bytes.
        let limit = self.port.fastbox_payload().clamp(nemesis_lmt::wire::MAX_ENCODED, LMT_BATCH_MAX);
        let mut batch = [0u8; LMT_BATCH_MAX];
        let mut used = 0;
        for (k, &(peer, msg)) in out.iter().enumerate() {
            let mut bytes = [0u8; nemesis_lmt::wire::MAX_ENCODED];
            let n = msg.encode(&mut bytes);
            batch[used..used + n].copy_from_slice(&bytes[..n]);
            used += n;
            let next_fits = out.get(k + 1).is_some_and(|&(p, m)| p == peer && used + m.encoded_len() <= limit);
            if !next_fits {
                self.send_lmt_batch(peer, &batch[..used])?;
                used = 0;
            }
        }
        let mut any = any;
        if let Some(net) = self.net.as_mut() {
            any |= self.netlmt.progress(net) || self.netlmt.has_output();
        }
        let out: Vec<(u32, Control)> = self.netlmt.take_out().collect();
        for (peer, msg) in out {
            let mut bytes = [0u8; nemesis_lmt::wire::MAX_ENCODED];
            let n = msg.encode(&mut bytes);
            let hdr = MsgHeader { kind: KIND_LMT, ..self.header(peer, 0, 0) };
            match self.net_send(peer, &hdr, None, &bytes[..n]) {
                Ok(()) | Err(Error::PeerDied { .. }) => {}
                Err(e) => return Err(e),
            }
        }
        self.lmt_finish();
        Ok(any)
    }

    /// Completes the requests of the transfers that ended.
    pub(super) fn lmt_finish(&mut self) {
        let mut done: Vec<(u64, Outcome)> = self.lmt.take_done().collect();
        done.extend(self.netlmt.take_done());
        for (token, outcome) in done {
            let req = Request::from_token(token);
            let Some(&mut Op::Lmt { status, cap, peer, recv, .. }) = self.reqs.op_mut(req) else { continue };
            let died = matches!(outcome, Outcome::Failed(nemesis_lmt::Error::PeerDied));
            if recv && self.ft_rdv_ended(req, died) {
                // Its sender died before the data was in: the message comes again (`recovery.rs`).
                self.saw_death(peer);
                continue;
            }
            let Some(Op::Lmt { stage, .. }) = self.reqs.op_mut(req) else { continue };
            if let (Outcome::Moved { .. }, Some(st)) = (&outcome, stage.as_deref())
                && let Some(p) = st.into
            {
                let n = status.len.min(cap).min(st.bytes.len());
                // SAFETY: the receive's pieces are valid and writable until it completes (now);
                // `n` bytes of our staging buffer are read.
                unsafe { p.as_ref().scatter(0, st.bytes.as_ptr(), n) };
            }
            let moved = matches!(outcome, Outcome::Moved { .. }).then(|| status.len.min(cap));
            if recv && let Some(e) = self.ft_rdv_check_done(req, moved) {
                self.reqs.complete(req, Err(e));
                continue;
            }
            let result = match outcome {
                Outcome::Moved { .. } if recv => finish(status, cap),
                Outcome::Moved { .. } => Ok(status),
                Outcome::Failed(nemesis_lmt::Error::PeerDied) => {
                    self.saw_death(peer);
                    let e = Error::PeerDied { rank: peer };
                    // Under recovery a message to a dead rank is lost with it (`recovery.rs`).
                    if !recv && self.ft_lost(&e) { Ok(status) } else { Err(e) }
                }
                Outcome::Failed(e) => Err(Error::Lmt(e)),
            };
            self.reqs.complete(req, result);
        }
        self.ft_reap_replays();
    }
}
