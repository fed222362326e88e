//! Sending: [`Port::send`] and its fused and gathered forms, the fastbox claim, cells from our
//! free queue, and [`PendingSend`]s resumed once cells come back.
//!
//! Invariants: messages to one peer are numbered in the order they are accepted (`Tx::seq`);
//! while one of them waits for cells (`Tx::queued != 0`) every later one waits behind it, so the
//! receiver can deliver them in order whatever path each took. A message goes into a fastbox
//! only whole, and only after every earlier message to the same peer was enqueued whole.

use core::ptr;

use crate::arena::{Arena, CellRef};
use crate::cell::{
    FT_PIGGYBACK_BYTES, FT_ROOM, HEADER_BYTES, MsgHeader, PiggybackBytes, custody, flags, ft_room, ft_write,
};
use crate::error::{Error, Result};
use crate::node::Node;
use crate::pieces::{Payload, Pieces};
use crate::sync::Ordering::*;

use super::Port;

/// Result of [`Port::send`].
#[derive(Debug)]
#[must_use = "a pending send must be resumed or its message never completes"]
pub enum Sent {
    /// The message is on its way: written into a fastbox or enqueued in cells.
    Done,
    /// Cells ran out (or an earlier message to the same peer is still pending): resume it with
    /// [`Port::resume`] and the same payload.
    Pending(PendingSend),
}

/// A message not yet fully handed over.
#[derive(Debug, Clone)]
pub struct PendingSend {
    dst: u16,
    hdr: MsgHeader,
    /// The message's number among those to `dst` (`hdr.seq` is its low 32 bits).
    seq: u64,
    /// The piggyback, if `hdr` has [`flags::FT_PIGGYBACK`] (zeros otherwise).
    ft: PiggybackBytes,
    /// Payload bytes already enqueued.
    offset: usize,
}

impl PendingSend {
    /// Destination local rank.
    pub fn dst(&self) -> u16 {
        self.dst
    }
    /// The message's header (with its sequence number).
    pub fn header(&self) -> &MsgHeader {
        &self.hdr
    }
    /// Bytes handed over so far.
    pub fn offset(&self) -> usize {
        self.offset
    }

    /// The piggyback the message carries, if any.
    pub fn piggyback(&self) -> Option<&PiggybackBytes> {
        (self.hdr.flags & flags::FT_PIGGYBACK != 0).then_some(&self.ft)
    }
}

impl<'n, N: Node> Port<'n, N> {
    /// Sends `payload` to local rank `dst` with header `hdr` (its `seq`, `frag` and `len` are set
    /// here) and, for fault tolerance, the piggyback `ft`: the port then sets
    /// [`flags::FT_PIGGYBACK`] and writes it into the room after the header of the fastbox slot or
    /// of every cell, its stamp included if `hdr.flags` has [`flags::FT_STAMP`], or its short
    /// form with [`flags::FT_STAMP_SHORT`] (the caller's choice: it knows which destinations look
    /// at stamps, and puts the digest's low half in `aux`). `hdr.flags` must not have
    /// [`flags::FT_PIGGYBACK`] itself, nor a stamp flag without `ft`.
    ///
    /// The common case, a small message to a peer whose fastbox we hold and whose next slot is
    /// free, is done inline (with or without a piggyback); everything else in
    /// `send_slow`.
    #[inline(always)]
    pub fn send(&mut self, dst: u16, hdr: &MsgHeader, ft: Option<&PiggybackBytes>, payload: &[u8]) -> Result<Sent> {
        self.send_from(dst, hdr, ft, payload)
    }

    /// The fused send of a plain message (kind `kind`, no flag; header `src`, `dst`, `tag`,
    /// `context`, `aux`: 0, or the token that names a non-blocking send for a cancellation): into our fastbox at local rank `to` when we hold one, no earlier message
    /// to `to` waits for cells, the payload fits a slot and the next slot is free. True if sent;
    /// false if nothing was done, and [`send`](Self::send) takes the message (it claims boxes,
    /// checks ranks and lengths, uses cells). A `to` that is no local rank (such as `u16::MAX`:
    /// local ranks are fewer) finds no entry and returns false.
    #[inline(always)]
    #[allow(clippy::too_many_arguments)]
    pub fn try_send_plain(
        &mut self,
        to: u16,
        src: u32,
        dst: u32,
        tag: i32,
        context: u32,
        kind: u8,
        aux: u32,
        payload: &[u8],
    ) -> bool {
        // A gone peer has no fastbox (`fb` is cleared when its death is noticed).
        if let Some(t) = self.tx.get_mut(usize::from(to))
            && let Some(fb) = t.fb.as_ref()
            && t.queued == 0
            && payload.len() < self.fbox_lim
            && fb.try_send_plain(&mut t.fnext, &mut t.facked, src, dst, tag, context, kind, aux, t.seq as u32, payload)
        {
            t.seq = t.seq.wrapping_add(1);
            t.bytes += payload.len() as u64;
            return true;
        }
        false
    }

    /// As [`send`](Self::send) for a payload in pieces, gathered as it is copied into the slot or
    /// the cells.
    #[inline]
    pub fn send_pieces(
        &mut self,
        dst: u16,
        hdr: &MsgHeader,
        ft: Option<&PiggybackBytes>,
        payload: &dyn Pieces,
    ) -> Result<Sent> {
        self.send_from(dst, hdr, ft, payload)
    }

    #[inline(always)]
    fn send_from<P: Payload + ?Sized>(
        &mut self,
        dst: u16,
        hdr: &MsgHeader,
        ft: Option<&PiggybackBytes>,
        payload: &P,
    ) -> Result<Sent> {
        debug_assert!(
            ft.is_some() || hdr.flags & (flags::FT_STAMP | flags::FT_STAMP_SHORT) == 0,
            "a stamp flag without a piggyback"
        );
        // The larger room: capacities do not depend on the stamp.
        let room = if ft.is_some() { FT_ROOM } else { 0 };
        // A gone peer has no fastbox (`fb` is cleared when its death is noticed).
        if let Some(t) = self.tx.get_mut(usize::from(dst))
            && let Some(fb) = t.fb
            && t.queued == 0
            && payload.len() + room < self.fbox_lim
            && hdr.flags & flags::FT_PIGGYBACK == 0
            && fb.try_send_from(&mut t.fnext, &mut t.facked, hdr, ft, t.seq as u32, payload)
        {
            t.seq = t.seq.wrapping_add(1);
            t.bytes += payload.len() as u64;
            return Ok(Sent::Done);
        }
        match ft {
            None => self.send_slow::<P, false>(dst, hdr, &[0; FT_PIGGYBACK_BYTES], payload),
            Some(pb) => self.send_slow::<P, true>(dst, hdr, pb, payload),
        }
    }

    /// Everything [`send`](Self::send) does not do inline: checks, the fastbox claim, cells. `FT`:
    /// with the piggyback `ft` (one instance each way, so that a port without fault tolerance runs
    /// no code of it).
    #[inline(never)]
    fn send_slow<P: Payload + ?Sized, const FT: bool>(
        &mut self,
        dst: u16,
        hdr: &MsgHeader,
        ft: &PiggybackBytes,
        payload: &P,
    ) -> Result<Sent> {
        self.node.check_rank(dst)?;
        if payload.len() > self.max_message {
            return Err(Error::TooLarge { len: payload.len(), max: self.max_message });
        }
        if self.tx[dst as usize].gone && !self.observe_restart(dst)? {
            return Err(Error::PeerDead { rank: dst });
        }
        let t = &mut self.tx[dst as usize];
        let mut h = *hdr;
        let seq = t.seq;
        h.seq = seq as u32;
        h.frag = 0;
        h.len = payload.len() as u32;
        h.flags = h.flags & !(flags::FT_PIGGYBACK | flags::FT_STAMP | flags::FT_STAMP_SHORT)
            | crate::cell::ft_flags(h.flags, FT);
        t.seq = t.seq.wrapping_add(1);
        t.sent = t.sent.wrapping_add(1);
        t.bytes += payload.len() as u64;
        let pending = |offset| Ok(Sent::Pending(PendingSend { dst, hdr: h, seq, ft: *ft, offset }));
        if t.queued != 0 {
            // An earlier message to `dst` is still pending: this one waits behind it.
            t.queued += 1;
            return pending(0);
        }
        if h.payload_offset() + payload.len() < HEADER_BYTES + self.fbox_lim
            && self.try_fastbox(dst, &h, FT.then_some(ft), payload)
        {
            return Ok(Sent::Done);
        }
        let mut offset = 0;
        if self.push_cells::<P, FT>(dst, &h, ft, &mut offset, payload)? {
            Ok(Sent::Done)
        } else {
            self.tx[dst as usize].queued += 1;
            pending(offset)
        }
    }

    /// Continues a pending send with the same payload. Returns true once the whole message is
    /// handed over. Pending sends to one peer must be resumed in the order they were returned;
    /// a later one makes no progress before the earlier ones completed.
    pub fn resume(&mut self, ps: &mut PendingSend, payload: &[u8]) -> Result<bool> {
        self.resume_from(ps, payload)
    }

    /// As [`resume`](Self::resume) for a send of [`send_pieces`](Self::send_pieces).
    pub fn resume_pieces(&mut self, ps: &mut PendingSend, payload: &dyn Pieces) -> Result<bool> {
        self.resume_from(ps, payload)
    }

    fn resume_from<P: Payload + ?Sized>(&mut self, ps: &mut PendingSend, payload: &P) -> Result<bool> {
        if self.tx[ps.dst as usize].gone && !self.observe_restart(ps.dst)? {
            return Err(Error::PeerDead { rank: ps.dst });
        }
        let t = &self.tx[ps.dst as usize];
        if t.seq.wrapping_sub(t.queued) != ps.seq {
            // Not the oldest message waiting for `dst`.
            return Ok(false);
        }
        let ft = ps.piggyback().copied();
        if ps.offset == 0
            && ps.hdr.payload_offset() + payload.len() < HEADER_BYTES + self.fbox_lim
            && self.try_fastbox(ps.dst, &ps.hdr.clone(), ft.as_ref(), payload)
        {
            self.tx[ps.dst as usize].queued -= 1;
            return Ok(true);
        }
        let (dst, hdr, pb) = (ps.dst, ps.hdr, ps.ft);
        let done = if ft.is_some() {
            self.push_cells::<P, true>(dst, &hdr, &pb, &mut ps.offset, payload)?
        } else {
            self.push_cells::<P, false>(dst, &hdr, &pb, &mut ps.offset, payload)?
        };
        if done {
            self.tx[ps.dst as usize].queued -= 1;
        }
        Ok(done)
    }

    /// Writes the message into our fastbox at `dst`, claiming one first if we have sent enough to
    /// `dst`. False if there is no box or its next slot is full. `h` has the piggyback flag
    /// exactly when `ft` is given, and the stamp flag only then.
    #[inline(always)]
    fn try_fastbox<P: Payload + ?Sized>(
        &mut self,
        dst: u16,
        h: &MsgHeader,
        ft: Option<&PiggybackBytes>,
        payload: &P,
    ) -> bool {
        let t = &mut self.tx[dst as usize];
        if t.fb.is_none() {
            // First attempt once `fastbox_after` messages went to `dst`, then every 1024 messages.
            if t.sent < self.cfg.fastbox_after || (t.claim_tried && !t.sent.is_multiple_of(1024)) || dst == self.me {
                return false;
            }
            t.claim_tried = true;
            if !self.claim_fastbox(dst) {
                return false;
            }
        }
        let t = &mut self.tx[dst as usize];
        match t.fb {
            Some(fb) => {
                // `try_send_from` sets the piggyback flag itself (the stamp flag stays).
                let mut plain = *h;
                plain.flags &= !flags::FT_PIGGYBACK;
                fb.try_send_from(&mut t.fnext, &mut t.facked, &plain, ft, h.seq, payload)
            }
            None => false,
        }
    }

    /// Claims a free box among those `dst` hosts. Tried after `fastbox_after` messages and then
    /// every 1024 messages while none is free.
    #[cold]
    fn claim_fastbox(&mut self, dst: u16) -> bool {
        for b in 0..self.node.params().fastboxes_per_rank {
            // SAFETY: `dst` checked by the caller, `b` in range.
            let fb = unsafe { self.node.fastbox(dst, b) };
            // ORDERING: AcqRel; Acquire takes in the receiver's clearing of the box before it
            // freed it; Release orders our claim before the map entry below.
            if fb.owner().compare_exchange(0, u32::from(self.me) + 1, AcqRel, Relaxed).is_ok() {
                // ORDERING: Release; the receiver Acquires the map entry, then checks the owner.
                // SAFETY: both ranks checked.
                unsafe { self.node.fastbox_map(dst, self.me) }.store(b + 1, Release);
                let t = &mut self.tx[dst as usize];
                t.fb = Some(fb);
                t.fnext = 0;
                t.facked = 0;
                return true;
            }
        }
        false
    }

    /// Takes a cell from our free queue.
    #[inline]
    pub(super) fn take_cell(&mut self) -> Result<Option<CellRef<'n>>> {
        let fq = self.node.free_queue(self.me);
        let Some(c) = fq.peek()? else { return Ok(None) };
        if !self.node.pool(self.me).contains(&c.handle()) {
            return Err(Error::corrupt("foreign cell in free queue", c.handle()));
        }
        fq.pop(c, self.node)?;
        // ORDERING: Relaxed; custody is read by others only after we are gone.
        c.link().custody.store(custody(0, self.me), Relaxed);
        Ok(Some(c))
    }

    /// Enqueues the rest of message `h` to `dst` from `*offset` in cells (with the piggyback `ft`
    /// if `FT`, which `h` is flagged for); false if cells ran out first.
    fn push_cells<P: Payload + ?Sized, const FT: bool>(
        &mut self,
        dst: u16,
        h: &MsgHeader,
        ft: &PiggybackBytes,
        offset: &mut usize,
        payload: &P,
    ) -> Result<bool> {
        // `h` is flagged as `FT` says (the receiver finds each fragment's offset with the same room).
        let room = ft_room(h.flags);
        let cap = self.cell_body - HEADER_BYTES - room;
        let q = self.node.recv_queue(dst);
        loop {
            let Some(c) = self.take_cell()? else {
                return Ok(false);
            };
            let n = cap.min(payload.len() - *offset);
            let mut h = *h;
            h.frag = (*offset / cap) as u16;
            self.node.arena().note_write(c.handle());
            // SAFETY: `c` is ours (taken from our free queue) and its body holds a header, the
            // piggyback room if `FT` (`cap` is counted after it), and `cap` payload bytes.
            unsafe {
                let body = c.body();
                ptr::write_unaligned(body as *mut MsgHeader, h);
                if FT {
                    // The room: the piggyback, then zeros up to the payload.
                    let r = body.add(HEADER_BYTES);
                    ptr::write_bytes(r, 0, room);
                    ft_write(h.flags, ft, r);
                }
                payload.copy_out(*offset, body.add(HEADER_BYTES + room), n);
            }
            let enqueued = q.swap_in(c, self.me, dst).and_then(|s| {
                crate::failpoint!("send-after-swap");
                s.link()
            });
            if let Err(e) = enqueued {
                self.node.free_queue(self.me).enqueue(c, self.me, self.me)?;
                if let Error::PeerDead { rank } = e {
                    self.tx[rank as usize].gone = true;
                    self.tx[rank as usize].fb = None;
                }
                return Err(e);
            }
            *offset += n;
            if *offset >= payload.len() {
                return Ok(true);
            }
            crate::failpoint!("send-mid-message");
            crate::failpoint!("send-mid-message-to-{}", dst);
        }
    }
}
