//! Receiving: [`Port::poll`] and its fused forms, per-pair order between fastboxes and the
//! receive queue, and [`Port::release`].
//!
//! Invariants: a fragment is returned only when it is the next expected from its sender
//! (`Rx::expected`, `Rx::next_frag`). A cell that arrives ahead of fastbox messages of its sender
//! is stashed until they are delivered: the sender wrote them before it, so they are visible. A
//! gap before a stashed cell, or a cell neither in order nor stashable, is a faulty sender's.

use core::marker::PhantomData;
use core::ptr;

use crate::arena::{Arena, CellRef};
use crate::cell::{CellHandle, MsgHeader, NULL, flags};
use crate::error::{Error, Result};
use crate::fastbox::FastboxRef;
use crate::node::Node;
use crate::sync::Ordering::*;

use super::{Incoming, Port, REMOTE, RETIRED_FRAG, Stashed};

/// What `poll_queue` calls a cell out of order (`Error::Corrupt`), which `queue_refused` looks at.
const OUT_OF_ORDER: &str = "cell sequence number";

impl<'n, N: Node> Port<'n, N> {
    /// The fused receive of a plain message: the next message of local rank `from` if it waits in
    /// its fastbox in order (no stashed cell, no message of `from` half received) and is plain
    /// (kind `kind`, no flag) with context `context`, tag `tag` (any with `any_tag`), and at most
    /// `cap` bytes: copied to `dst` and released; returns its length and tag. `None` consumes
    /// nothing: the general path ([`poll`](Self::poll)) then takes whatever waits. A `from` that
    /// is no local rank returns `None`.
    ///
    /// # Safety
    /// `dst` is valid for `cap` bytes of writes (any pointer if `cap` is 0).
    #[inline(always)]
    #[allow(clippy::too_many_arguments)]
    pub unsafe fn take_plain(
        &mut self,
        from: u16,
        kind: u8,
        tag: i32,
        any_tag: bool,
        context: u32,
        dst: *mut u8,
        cap: usize,
    ) -> Option<(u32, i32)> {
        if self.stash.is_some() {
            return None;
        }
        let r = self.rx.get_mut(usize::from(from))?;
        let fb = r.fb.as_ref()?;
        if r.next_frag != 0 {
            return None;
        }
        // SAFETY: the caller's contract.
        let got = unsafe { fb.take_plain(&mut r.fnext, r.expected, kind, tag, any_tag, context, dst, cap) }?;
        r.expected = r.expected.wrapping_add(1);
        Some(got)
    }

    /// True if the next message of local rank `from` may still arrive in its fastbox: it has one
    /// into this port and its next slot is empty. False when it has none, or a message already
    /// waits there (one that [`take_plain`](Self::take_plain) declined stays declined however
    /// long the caller waits).
    #[inline(always)]
    pub fn fastbox_awaited(&self, from: u16) -> bool {
        let Some(r) = self.rx.get(usize::from(from)) else { return false };
        r.fb.as_ref().is_some_and(|fb| self.stash.is_none() && r.next_frag == 0 && !fb.published(r.fnext))
    }

    /// Returns the next fragment in per-pair order, if any. `expected` lists the sources whose
    /// fastboxes are polled first (the sources of posted receives).
    ///
    /// A poll that finds the first message of a retired peer's new incarnation reports
    /// [`PeerEvent::Restarted`](super::PeerEvent::Restarted) and returns `None`; the new incarnation's messages come once that
    /// event was taken ([`take_events`](Self::take_events)). A caller that waits handles
    /// [`has_events`](Self::has_events) before it sleeps.
    ///
    /// The common case, the next message of an expected source waiting in its fastbox, is done
    /// inline; everything else in `poll_slow`.
    #[inline(always)]
    pub fn poll(&mut self, expected: &[u16]) -> Result<Option<Incoming<'n>>> {
        if self.stash.is_none() {
            for &src in expected {
                if let Some(r) = self.rx.get_mut(usize::from(src))
                    && let Some(fb) = r.fb
                    && r.next_frag == 0
                    && let Some(m) = fb.peek(r.fnext)?
                    && m.seq == r.expected
                {
                    r.expected = r.expected.wrapping_add(1);
                    return Ok(Some(Incoming::from_fastbox(src, &m, self.id)));
                }
            }
        }
        self.poll_slow(expected)
    }

    /// Only the inline part of [`poll`](Self::poll) for one source: its next message if it waits
    /// in its fastbox, in order. For tight waits on one source, between full polls.
    #[inline(always)]
    pub fn poll_fastbox(&mut self, src: u16) -> Result<Option<Incoming<'n>>> {
        if self.stash.is_none()
            && let Some(r) = self.rx.get_mut(usize::from(src))
            && let Some(fb) = r.fb
            && r.next_frag == 0
            && let Some(m) = fb.peek(r.fnext)?
            && m.seq == r.expected
        {
            r.expected = r.expected.wrapping_add(1);
            return Ok(Some(Incoming::from_fastbox(src, &m, self.id)));
        }
        Ok(None)
    }

    /// True if something other than fastbox messages waits to be polled: a cell in our queue, or a
    /// stashed cell. A tight wait on one fastbox should then fall back to a full [`poll`](Self::poll).
    #[inline(always)]
    pub fn has_queued(&self) -> bool {
        self.stash.is_some() || self.node.recv_queue(self.me).has_visible()
    }

    /// Everything [`poll`](Self::poll) does not do inline: the stash, fastbox discovery, the
    /// queue, and every few polls all hosted fastboxes and liveness.
    #[inline(never)]
    fn poll_slow(&mut self, expected: &[u16]) -> Result<Option<Incoming<'n>>> {
        self.polls = self.polls.wrapping_add(1);
        if self.stash.is_some() {
            return self.poll_stash();
        }
        for &src in expected {
            self.node.check_rank(src)?;
            // Boxes already known were polled inline by `poll`.
            if self.rx[usize::from(src)].fb.is_none()
                && let Some(i) = self.poll_fastbox_of(src)?
            {
                return Ok(Some(i));
            }
        }
        match self.poll_queue() {
            Ok(Some(i)) => return Ok(Some(i)),
            Ok(None) => {}
            Err(e) => {
                self.queue_refused(e)?;
                return Ok(None);
            }
        }
        if self.polls & (self.cfg.scan_every - 1) == 0
            && let Some(i) = self.scan_fastboxes()?
        {
            return Ok(Some(i));
        }
        if self.polls & (self.cfg.check_every - 1) == 0 {
            self.check_peers()?;
        }
        Ok(None)
    }

    /// Polls every fastbox now, whatever the schedule (the Endpoint calls this in its last look
    /// before a block-mode sleep, so that a fastbox message whose ring woke it is taken at once).
    pub fn scan_fastboxes(&mut self) -> Result<Option<Incoming<'n>>> {
        for b in 0..self.box_owner.len() as u32 {
            // SAFETY: `me` is valid and `b < fastboxes_per_rank`.
            let fb = unsafe { self.node.fastbox(self.me, b) };
            // ORDERING: Acquire; pairs with the claim, after which the sender writes slots.
            let owner = fb.owner().load(Acquire);
            if owner == 0 {
                continue;
            }
            let src = (owner - 1) as u16;
            self.node.check_rank(src).map_err(|_| Error::corrupt("fastbox owner", owner))?;
            self.adopt_box(fb, b, owner, src);
            if let Some(i) = self.take_from_box(src)? {
                return Ok(Some(i));
            }
        }
        Ok(None)
    }

    /// Records that box `b` belongs to `src`, starting to read it from its first message if it
    /// is new to us.
    pub(super) fn adopt_box(&mut self, mut fb: FastboxRef<'n>, b: u32, owner: u32, src: u16) {
        let r = &mut self.rx[usize::from(src)];
        if self.box_owner[b as usize] != owner || r.fb.is_none() || r.fb_index != b {
            self.box_owner[b as usize] = owner;
            if self.acks_withheld {
                fb.withhold_acks(true, 0);
            }
            r.fb = Some(fb);
            r.fb_index = b;
            r.fnext = 0;
        }
    }

    /// Polls the fastbox `src` owns among ours, discovering it through the map if needed.
    fn poll_fastbox_of(&mut self, src: u16) -> Result<Option<Incoming<'n>>> {
        if self.rx[usize::from(src)].fb.is_none() {
            // SAFETY: both ranks checked.
            // ORDERING: Acquire; pairs with the claimant's Release store.
            let b = unsafe { self.node.fastbox_map(self.me, src) }.load(Acquire);
            if b == 0 {
                return Ok(None);
            }
            if b > self.node.params().fastboxes_per_rank {
                return Err(Error::corrupt("fastbox map entry", b));
            }
            // SAFETY: `b - 1 < fastboxes_per_rank`, checked above.
            let fb = unsafe { self.node.fastbox(self.me, b - 1) };
            // ORDERING: Acquire, as in `scan_fastboxes`.
            let owner = fb.owner().load(Acquire);
            if owner != u32::from(src) + 1 {
                return Ok(None);
            }
            self.adopt_box(fb, b - 1, owner, src);
        }
        self.take_from_box(src)
    }

    /// The message in `src`'s box, if it is the next expected from `src`.
    fn take_from_box(&mut self, src: u16) -> Result<Option<Incoming<'n>>> {
        let r = &mut self.rx[usize::from(src)];
        let Some(fb) = r.fb else { return Ok(None) };
        let Some(m) = fb.peek(r.fnext)? else { return Ok(None) };
        if m.seq != r.expected || r.next_frag != 0 {
            if r.next_frag == RETIRED_FRAG {
                // A box of a retired peer with a message in it is its new incarnation's (the dead
                // one's box was freed before the retirement): `Restarted` now, as for a cell.
                self.observe_restart(src)?;
            }
            return Ok(None);
        }
        r.expected = r.expected.wrapping_add(1);
        Ok(Some(Incoming::from_fastbox(src, &m, self.id)))
    }

    /// The first cell of our queue, if it is in order (or stashed behind fastbox messages).
    #[inline(always)]
    fn poll_queue(&mut self) -> Result<Option<Incoming<'n>>> {
        let q = self.node.recv_queue(self.me);
        let Some(c) = q.peek()? else { return Ok(None) };
        let src = self.node.owner_of(c.handle());
        self.node.arena().note_read(c.handle());
        // SAFETY: `peek` validated `c`; its body starts with a header.
        let hdr = unsafe { ptr::read_unaligned(c.body() as *const MsgHeader) };
        if hdr.flags & flags::NETMOD != 0 {
            return self.netmod_fragment(c, src, hdr);
        }
        let r = &mut self.rx[src as usize];
        if hdr.seq == r.expected && hdr.frag == r.next_frag {
            let inc = self.cell_fragment(c, src, hdr)?;
            crate::failpoint!("dequeue-before-pop");
            q.pop(c, self.node)?;
            self.advance(src, &inc);
            if !self.markers.is_empty() {
                self.note_dequeued(c);
            }
            return Ok(Some(inc));
        }
        if hdr.frag == 0 && r.next_frag == 0 && (hdr.seq.wrapping_sub(r.expected) as i32) > 0 {
            // Fastbox messages from `src` precede this cell: deliver them first. Its fields are
            // checked now; the stash makes it again when it is its turn.
            let _checked = self.cell_fragment(c, src, hdr)?;
            q.pop(c, self.node)?;
            if !self.markers.is_empty() {
                self.note_dequeued(c);
            }
            self.stash = Some(Stashed { cell: c.handle(), src, hdr });
            return self.poll_stash();
        }
        Err(Error::corrupt(OUT_OF_ORDER, hdr.seq))
    }

    /// `poll_queue` refused the cell at the head of our queue (`e`): it was neither the next
    /// fragment expected from its sender nor a message to stash behind fastbox messages. The
    /// first cell of a retired peer's new incarnation is such a cell (the dead one's were all
    /// polled before the retirement): `Restarted` now, the cell once that event was taken
    /// (`Ok`: the poll returns nothing). Any other is a faulty sender's: `e`. Out of
    /// `poll_queue`, whose hot path stays as it was.
    #[cold]
    #[inline(never)]
    fn queue_refused(&mut self, e: Error) -> Result<()> {
        if !matches!(e, Error::Corrupt { what: OUT_OF_ORDER, .. }) {
            return Err(e);
        }
        let Some(c) = self.node.recv_queue(self.me).peek()? else { return Err(e) };
        let src = self.node.owner_of(c.handle());
        if self.rx[usize::from(src)].next_frag == RETIRED_FRAG
            && (!self.gone[usize::from(src)].retired || self.observe_restart(src)?)
        {
            return Ok(());
        }
        Err(e)
    }

    /// Builds the fragment for cell `c`, validating its length fields.
    #[inline(always)]
    pub(super) fn cell_fragment(&self, c: CellRef<'n>, src: u16, hdr: MsgHeader) -> Result<Incoming<'n>> {
        let cap = self.cell_body - hdr.payload_offset();
        let offset = usize::from(hdr.frag) * cap;
        let len = hdr.len as usize;
        if len > self.max_message {
            // No sender makes a message the cell path cannot carry: the layer above must not
            // size a buffer by this length.
            return Err(Error::corrupt("cell message length", hdr.len));
        }
        if offset > len || (offset == len && len != 0) {
            return Err(Error::corrupt("cell fragment index", hdr.frag));
        }
        let frag_len = cap.min(len - offset);
        Ok(Incoming {
            hdr: c.body() as *const MsgHeader,
            // SAFETY: the payload offset is inside the body.
            payload: unsafe { c.body().add(hdr.payload_offset()) },
            len: hdr.len,
            offset: offset as u32,
            frag_len: frag_len as u32,
            cell: c.handle(),
            src,
            last: offset + frag_len == len,
            port: self.id,
            _node: PhantomData,
        })
    }

    #[inline(always)]
    fn advance(&mut self, src: u16, inc: &Incoming<'n>) {
        let r = &mut self.rx[src as usize];
        if inc.last {
            r.expected = r.expected.wrapping_add(1);
            r.next_frag = 0;
        } else {
            r.next_frag += 1;
        }
    }

    /// Delivers fastbox messages that precede the stashed cell, then the cell.
    #[cold]
    fn poll_stash(&mut self) -> Result<Option<Incoming<'n>>> {
        let Some(s) = self.stash else { return Ok(None) };
        if self.rx[s.src as usize].expected == s.hdr.seq {
            self.stash = None;
            // SAFETY: the stashed handle was validated when it was dequeued.
            let c = unsafe { self.node.arena().cell_unchecked(s.cell) };
            let inc = self.cell_fragment(c, s.src, s.hdr)?;
            self.advance(s.src, &inc);
            if self.gone[usize::from(s.src)].queue_passed {
                // The queue passed the sender's last cell when this one was stashed: the rest
                // of its message will never come.
                self.drop_partial(s.src);
            }
            return Ok(Some(inc));
        }
        match self.poll_fastbox_of(s.src)? {
            Some(i) => Ok(Some(i)),
            // The sender wrote the missing messages into its fastbox before enqueuing this cell,
            // so they are visible; their absence means a faulty sender.
            None => Err(Error::corrupt("sequence gap before cell", s.hdr.seq)),
        }
    }

    /// Frees the fastbox slot or returns the cell of a fragment that was copied out. A fragment
    /// another port polled is refused with [`Error::ForeignFragment`].
    #[inline(always)]
    pub fn release(&mut self, inc: Incoming<'n>) -> Result<()> {
        if inc.port != self.id {
            return Err(Error::ForeignFragment);
        }
        if inc.cell == NULL {
            // SAFETY: this port made `inc` (checked above) from a fastbox of local rank `src`,
            // a valid rank: `src < rx.len()`.
            let r = unsafe { self.rx.get_unchecked_mut(usize::from(inc.src)) };
            if let Some(fb) = r.fb {
                fb.release(&mut r.fnext);
            }
            return Ok(());
        }
        self.return_cell(inc.cell, inc.src)
    }

    /// Returns a polled cell to its owner's free queue.
    #[inline(never)]
    fn return_cell(&mut self, c: CellHandle, src: u16) -> Result<()> {
        let owner = self.node.owner_of(c);
        // SAFETY: `c` was validated when this port polled it (`release` checked the port).
        let cell = unsafe { self.node.arena().cell_unchecked(c) };
        if src == REMOTE {
            // A network arrival, in one of our cells set aside for the netmods.
            return self.node.netmod_free_queue(self.me).enqueue(cell, self.me, self.me);
        }
        // A gone owner's free queue is never consumed again: returning there is harmless.
        self.node.free_queue(owner).enqueue(cell, self.me, owner)
    }

    /// Stops (`true`) or resumes acknowledging fastbox messages, for flow control by the layer
    /// above (its unexpected messages take too much memory): a sender then writes only the
    /// slots it already knew free, and sends the rest in cells, which the layer above may keep
    /// unreleased until their receive comes (the sender then runs out of cells and waits).
    /// Messages are still polled and delivered in order.
    pub fn withhold_acks(&mut self, on: bool) {
        if self.acks_withheld == on {
            return;
        }
        self.acks_withheld = on;
        for r in self.rx.iter_mut() {
            let next = r.fnext;
            if let Some(fb) = r.fb.as_mut() {
                fb.withhold_acks(on, next);
            }
        }
    }
}
