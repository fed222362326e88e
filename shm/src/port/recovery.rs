//! Recovery from peers that ended ([`Port::check_peers`]): noticing deaths, repairing and
//! draining queues, taking back our cells, freeing dead senders' fastboxes, dropping their
//! half-sent messages, and retiring and restarting a peer ([`crate::incarnation`]). What the
//! port learns it reports as [`PeerEvent`]s. Design: `shared/ARCHITECTURE.md`, "Liveness and
//! failures".
//!
//! # Reclaim
//!
//! After rank `d` is gone and its receive queue drained, a cell of a live owner `o` can be lost
//! only in two ways, both visible in its custody word, which only `o` writes while it holds the
//! cell: custody "receive queue of `d`" (the queue is drained, so `d` had taken the cell out and
//! not returned it), or custody "free queue of `o`, by `d`" with the cell not swapped in (`d` died
//! returning it). Owner `o` checks its own pool for both, between its own operations, and puts
//! those cells back into its free queue. Cells a live rank holds carry other custodies.

use crate::arena::{Arena, CellRef};
use crate::cell::{custody, custody_queue, tail_gen, tail_handle};
use crate::error::{Error, Result};
use crate::node::{DRAIN_DONE, Node, free_queue_id, recv_queue_id};
use crate::queue::Liveness;
use crate::sync::Ordering::*;

use super::{Gone, Port, RETIRED_FRAG, Rx, Tx};

/// Something the port learned about a peer, for the layer above.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PeerEvent {
    /// The peer ended (died or finalized): sends to it fail with [`Error::PeerDead`](crate::Error::PeerDead).
    Gone {
        /// Its local rank.
        rank: u16,
    },
    /// Nothing more from the (gone) peer can be polled: everything it sent before it ended has
    /// been delivered. Receives that name it can now fail.
    Silent {
        /// Its local rank.
        rank: u16,
    },
    /// The peer died in the middle of a multi-cell message, which will never complete: the
    /// fragments already polled must be discarded.
    PartialDropped {
        /// Its local rank.
        rank: u16,
        /// The message's sequence number.
        seq: u32,
    },
    /// A peer this port retired ([`Port::retire_peer`]) runs again as a new incarnation
    /// ([`crate::incarnation`]): sends to it work again, and what arrives from it starts at
    /// sequence number 0.
    Restarted {
        /// Its local rank.
        rank: u16,
    },
}

impl<'n, N: Node> Port<'n, N> {
    /// Events about peers since the last call.
    ///
    /// Taking a [`PeerEvent::Restarted`] lets the peer's new incarnation's messages through: its
    /// traffic starts at number 0 (`expected` is 0 since the retirement; a box it claimed and we
    /// adopted since is kept), unless it was retired again meanwhile.
    pub fn take_events(&mut self) -> Vec<PeerEvent> {
        let events = core::mem::take(&mut self.events);
        for e in &events {
            if let PeerEvent::Restarted { rank } = *e
                && !self.gone[usize::from(rank)].retired
            {
                self.rx[usize::from(rank)].next_frag = 0;
            }
        }
        events
    }

    /// True if [`take_events`](Self::take_events) has something.
    #[inline(always)]
    pub fn has_events(&self) -> bool {
        !self.events.is_empty()
    }

    /// True if local rank `r` is known to this port to have ended.
    pub fn peer_gone(&self, r: u16) -> bool {
        self.gone.get(r as usize).is_some_and(|g| g.known)
    }

    /// Notices ended peers and recovers from their deaths: queue repairs, draining their receive
    /// queues, taking back our cells, freeing their fastboxes, dropping their partial messages.
    /// Runs every `check_every` polls; call it directly when waiting long.
    #[cold]
    pub fn check_peers(&mut self) -> Result<()> {
        let epoch = self.node.death_epoch();
        if epoch != self.epoch {
            self.epoch = epoch;
            self.observe_restarts()?;
            let q = self.node.recv_queue(self.me);
            for r in 0..self.node.ranks() {
                if self.gone[r as usize].known || !self.node.is_gone(r) || r == self.me {
                    continue;
                }
                self.gone[r as usize].known = true;
                self.gone[r as usize].incarnation = self.node.state_of(r)?.incarnation();
                self.tx[r as usize].gone = true;
                self.tx[r as usize].fb = None;
                self.events.push(PeerEvent::Gone { rank: r });
                self.markers.push((r, q.tail_now()));
            }
            q.repair_unlinked_head(self.node)?;
            self.node.free_queue(self.me).repair_unlinked_head(self.node)?;
        }
        self.recover()?;
        self.free_dead_boxes();
        self.check_markers();
        self.report_silent();
        Ok(())
    }

    /// Retires gone peer `r` so that it can be restarted as a new incarnation
    /// ([`crate::incarnation`], step 2): true once done, false if not possible yet (its death is
    /// not known yet, or it is not silent, or cells it held are not taken back yet, or its
    /// fastbox among ours is not freed yet: call [`check_peers`](Self::check_peers) and try again).
    ///
    /// The caller guarantees it holds no cell of `r`'s pool any more (every fragment from `r` was
    /// released) and no [`PendingSend`](super::PendingSend) to `r`. The per-pair state with `r` starts again from
    /// zero; sends to `r` fail with [`Error::PeerDead`](crate::Error::PeerDead) until [`PeerEvent::Restarted`].
    /// Idempotent.
    pub fn retire_peer(&mut self, r: u16) -> Result<bool> {
        self.node.check_rank(r)?;
        let g = self.gone[usize::from(r)];
        if g.retired {
            return Ok(true);
        }
        if r == self.me || !g.known || !g.reclaimed || !g.silent || self.rx[usize::from(r)].fb.is_some() {
            return Ok(false);
        }
        self.tx[usize::from(r)] = Tx { gone: true, ..Tx::default() };
        self.rx[usize::from(r)] = Rx { next_frag: RETIRED_FRAG, ..Rx::default() };
        self.gone[usize::from(r)].retired = true;
        Ok(true)
    }

    /// Peers retired by this port that run as another incarnation now: their per-pair state
    /// starts afresh and [`PeerEvent::Restarted`] is reported (the new incarnation may be gone
    /// already: the death check that follows sees it then).
    fn observe_restarts(&mut self) -> Result<()> {
        for r in 0..self.node.ranks() {
            self.observe_restart(r)?;
        }
        Ok(())
    }

    /// [`observe_restarts`](Self::observe_restarts) for peer `r` (checked): true if it runs again.
    /// Also called by a send to a retired peer, which may come before the next death-epoch check,
    /// and by a poll that finds a message of a retired peer. The new incarnation's messages are
    /// returned only once the caller took its `Restarted` (`RETIRED_FRAG`; loom
    /// `sender_dies_between_swap_and_link_then_restarts` found them returned before).
    /// The incarnation is visible then: the new process started after the reset that bumped it,
    /// and its message was acquired from the queue or box it published it in.
    #[cold]
    pub(super) fn observe_restart(&mut self, r: u16) -> Result<bool> {
        let g = self.gone[usize::from(r)];
        if !g.retired || self.node.state_of(r)?.incarnation() == g.incarnation {
            return Ok(false);
        }
        self.gone[usize::from(r)] = Gone::default();
        self.tx[usize::from(r)].gone = false;
        self.events.push(PeerEvent::Restarted { rank: r });
        Ok(true)
    }

    /// Reports gone peers from which nothing more can be polled: queue passed, fastbox holding
    /// no message in order.
    fn report_silent(&mut self) {
        for r in 0..self.node.ranks() {
            let g = self.gone[usize::from(r)];
            if !g.queue_passed || g.silent {
                continue;
            }
            let rx = self.rx[usize::from(r)];
            let pending = rx.fb.is_some_and(|fb| matches!(fb.peek(rx.fnext), Ok(Some(m)) if m.seq == rx.expected));
            if !pending && self.stash.is_none_or(|s| s.src != r) {
                self.gone[usize::from(r)].silent = true;
                self.events.push(PeerEvent::Silent { rank: r });
            }
        }
    }

    /// Drains gone ranks' receive queues (one drainer per queue) and takes back our cells.
    fn recover(&mut self) -> Result<()> {
        for r in 0..self.node.ranks() {
            let g = self.gone[r as usize];
            if !g.known || g.reclaimed {
                continue;
            }
            if !g.drained && self.try_drain(r)? {
                self.gone[r as usize].drained = true;
            }
            if self.gone[r as usize].drained {
                self.reclaim_from(r)?;
                self.gone[r as usize].reclaimed = true;
            }
        }
        Ok(())
    }

    /// Drains gone rank `r`'s receive queue if nobody alive is doing it. True once it is drained
    /// (by us or another rank).
    fn try_drain(&mut self, r: u16) -> Result<bool> {
        let st = self.node.state_of(r)?;
        let mine = u32::from(self.me) + 1;
        // ORDERING: Acquire; pairs with the Release store of DRAIN_DONE, or of a claim.
        let mut cur = st.drain.load(Acquire);
        loop {
            if cur == DRAIN_DONE {
                return Ok(true);
            }
            if cur != 0 && cur != mine && !self.node.is_gone((cur - 1) as u16) {
                return Ok(false); // a live rank drains it
            }
            // ORDERING: AcqRel; Acquire takes in the previous (dead) drainer's progress in the
            // queue's words; Release publishes our claim.
            match st.drain.compare_exchange(cur, mine, AcqRel, Acquire) {
                Ok(_) => break,
                Err(now) => cur = now,
            }
        }
        let q = self.node.recv_queue(r);
        q.seal();
        // A queue holds at most every cell of the node: more drained than that is a cycle in
        // corrupt links, an error rather than a drain without end.
        let most = self.node.arena().cell_count() as usize;
        let mut drained = 0usize;
        let live = Draining { node: self.node, me: self.me };
        while let Some(c) = q.drain_next(&live)? {
            drained += 1;
            if drained > most {
                return Err(Error::corrupt("drained queue cycle at cell", c.handle()));
            }
            crate::failpoint!("drain-mid");
            let owner = self.node.owner_of(c.handle());
            if !self.node.is_gone(owner) {
                self.node.free_queue(owner).enqueue(c, self.me, owner)?;
            }
        }
        // ORDERING: Release; owners Acquire it before reclaiming, after our returns.
        st.drain.store(DRAIN_DONE, Release);
        Ok(true)
    }

    /// Takes back our cells that gone rank `r` (drained) held or was returning (module doc,
    /// "Reclaim").
    fn reclaim_from(&mut self, r: u16) -> Result<()> {
        let fq = self.node.free_queue(self.me);
        let held_by_r = custody(free_queue_id(self.me), r);
        for c in self.node.pool(self.me) {
            // SAFETY: pool handles are valid.
            let link = unsafe { self.node.arena().link_unchecked(c) };
            // ORDERING: Acquire; the drain claim's Acquire already ordered us after the drainer,
            // this pairs with dead ranks' writes observed through their GONE mark.
            let cust = link.custody.load(Acquire);
            let lost = custody_queue(cust) == recv_queue_id(r) || (cust == held_by_r && !fq.holds_dead_enqueue(c)?);
            if lost {
                // SAFETY: pool handles are valid.
                fq.enqueue(unsafe { self.node.arena().cell_unchecked(c) }, self.me, self.me)?;
            }
        }
        Ok(())
    }

    /// Frees hosted boxes whose owner is gone and which hold nothing more to deliver.
    fn free_dead_boxes(&mut self) {
        for b in 0..self.box_owner.len() as u32 {
            // SAFETY: `me` valid, `b` in range.
            let fb = unsafe { self.node.fastbox(self.me, b) };
            // ORDERING: Acquire, as in `scan_fastboxes`.
            let owner = fb.owner().load(Acquire);
            if owner == 0 || owner > u32::from(self.node.ranks()) {
                continue;
            }
            let src = (owner - 1) as u16;
            if !self.node.is_gone(src) {
                continue;
            }
            self.adopt_box(fb, b, owner, src);
            let r = self.rx[usize::from(src)];
            // A message published in the next slot is delivered once its number comes up: the
            // sender wrote it only after every earlier message was enqueued whole, so those are in
            // our queue (or stashed) and will be delivered or dropped first. Kept until then, even
            // while it is not the expected one yet (k+1 in the box, k still in the queue). Only a
            // box whose sender is silent (everything deliverable was delivered) is freed with a
            // message in it: an out-of-order one a faulty sender left.
            let published = matches!(fb.peek(r.fnext), Ok(Some(_)));
            if published && !self.gone[usize::from(src)].silent {
                continue;
            }
            fb.clear();
            // SAFETY: ranks checked.
            unsafe { self.node.fastbox_map(self.me, src) }.store(0, Relaxed);
            let r = &mut self.rx[usize::from(src)];
            r.fb = None;
            r.fnext = 0;
            self.box_owner[b as usize] = 0;
            // ORDERING: Release; orders the clearing before the next claimant's Acquire CAS.
            fb.owner().store(0, Release);
        }
    }

    /// Notes that a dequeued cell's tail value passed partial-message markers.
    #[cold]
    pub(super) fn note_dequeued(&mut self, c: CellRef<'n>) {
        let link = c.link();
        // ORDERING: Relaxed; as in the queue's `own_value`.
        let g = tail_gen(link.enq_prev.load(Relaxed)).wrapping_add(1);
        self.drop_markers(|m| (g.wrapping_sub(tail_gen(m)) as i32) >= 0);
    }

    /// Drops partial messages whose markers the queue has passed by emptying.
    fn check_markers(&mut self) {
        if self.markers.is_empty() {
            return;
        }
        let q = self.node.recv_queue(self.me);
        let (empty, gen_) = q.empty_gen();
        if empty {
            self.drop_markers(|m| {
                tail_handle(m) == 0 && (gen_.wrapping_sub(tail_gen(m)) as i32) >= 0
                    || (gen_.wrapping_sub(tail_gen(m)) as i32) > 0
            });
        }
    }

    fn drop_markers(&mut self, passed: impl Fn(u64) -> bool) {
        let mut i = 0;
        while i < self.markers.len() {
            let (src, m) = self.markers[i];
            if passed(m) {
                self.markers.swap_remove(i);
                self.gone[src as usize].queue_passed = true;
                self.drop_partial(src);
            } else {
                i += 1;
            }
        }
    }

    /// Gone sender `src`'s queue traffic was all polled: a message still in progress from it is
    /// partial and never completes.
    pub(super) fn drop_partial(&mut self, src: u16) {
        let r = &mut self.rx[src as usize];
        if r.next_frag != 0 {
            let seq = r.expected;
            r.next_frag = 0;
            r.expected = r.expected.wrapping_add(1);
            self.events.push(PeerEvent::PartialDropped { rank: src, seq });
        }
    }
}

/// The node's liveness as a drainer sees it: the drainer itself is inside no enqueue while it
/// drains (a port is used by one thread at a time), so a cell of its own still unlinked is corrupt.
struct Draining<'n, N: ?Sized> {
    node: &'n N,
    me: u16,
}

impl<N: Node + ?Sized> Liveness for Draining<'_, N> {
    fn death_epoch(&self) -> u64 {
        self.node.death_epoch()
    }
    fn is_dead(&self, rank: u16) -> bool {
        self.node.is_dead(rank)
    }
    fn idle(&self, rank: u16) -> bool {
        rank == self.me
    }
}
