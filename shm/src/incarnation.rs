//! Incarnations of a rank number: what a launcher does in the segment to start a dead rank again
//! (HydEE's recovery of a failed group, `nemesis-run --ft`), and what the live ranks do first.
//!
//! A rank number's [`RankState`](crate::RankState) counts its incarnations. A dead rank `d` is
//! started again in three steps:
//!
//! 1. **Death** (as without restarts): `d` is marked GONE; each live rank notices it
//!    ([`Port::check_peers`](crate::Port::check_peers)): `d`'s receive queue is sealed and drained
//!    (by one of them), each takes back its own cells `d` held, polls or drops everything `d`
//!    had sent it (the peer becomes *silent*) and frees `d`'s fastboxes among its own.
//! 2. **Retirement**: once silent, and once the layer above has released every cell of `d`'s
//!    pool it held (unexpected messages kept in their cells are copied out) and dropped its
//!    pending sends to `d`, each live rank calls [`Port::retire_peer`](crate::Port::retire_peer):
//!    its per-pair state with `d` (sequence numbers both ways, fastbox positions) starts again
//!    from zero, and it will never touch the dead incarnation's cells, boxes or rings again. The
//!    launcher learns it through its control channel. So every message of the dead incarnation
//!    was delivered (or dropped whole, if partial) before the live rank could see anything of the
//!    new one: HydEE's requirement that a dead incarnation's messages arrive before its
//!    `Restarted` or not at all.
//! 3. **Reset** ([`reset_rank`], by the launcher, which maps the segment): once every live rank
//!    retired `d` and the receive queue of every dead rank is drained (a drain returns cells to
//!    live owners: `d`'s must not come back to it after the reset; with no live rank at all there
//!    is no drainer and no owner to return to, and every dead rank is reset), `d`'s receive, free and
//!    netmod queues are emptied, its whole pool goes back into its free queue, the fastboxes it
//!    hosts are cleared and unowned, its fastbox map row is zeroed, the control words of the
//!    copy rings it hosts are zeroed, its record is cleared, its incarnation bumped, and its
//!    state set back to EMPTY (Release) — then the death epoch is bumped so that live ranks look:
//!    a port that retired `d` and sees another incarnation reports
//!    [`PeerEvent::Restarted`](crate::PeerEvent::Restarted) and sends to it again. The new
//!    process registers (EMPTY → ALIVE) as at the start of a job.
//!
//! Nothing of the dead incarnation can be in use at step 3: its cells were all either in its own
//! queues (reset), in a live rank's receive queue (polled before that rank became silent), held
//! by a live rank (released before retirement), in a dead rank's queue (drained: dropped, the
//! owner being gone), or held by a dead process (never touched again). Its boxes are written only
//! by itself (dead) and read by their hosts (freed before retirement); the boxes it hosts are
//! written by live ranks only while they believe it alive (not after they noticed the death,
//! which precedes their retirement).

use crate::arena::Arena;
use crate::error::{Error, Result};
use crate::layout::QueueKind;
use crate::node::{DRAIN_DONE, Node, STATE_ALIVE, STATE_EMPTY, STATE_GONE};
use crate::sync::Ordering::*;

/// Resets dead rank `r` of `node` for a new incarnation (step 3 of the module documentation) and
/// returns that incarnation. The caller (a launcher) guarantees that every live rank of the node
/// retired `r`; this checks what the segment shows: `r` is GONE, and the receive queue of every
/// GONE rank is drained ([`Error::NotReady`] otherwise, nothing changed).
pub fn reset_rank<N: Node>(node: &N, r: u16) -> Result<u32> {
    let st = node.state_of(r)?;
    // ORDERING: Acquire; pairs with `mark_gone`'s Release: what the dead rank did is visible.
    if st.state.load(Acquire) != STATE_GONE {
        return Err(Error::NotReady { what: "rank to restart is not gone", rank: r });
    }
    // With no live rank, nobody drains and nobody needs a cell back: every dead rank is reset
    // (the caller restarts them all), its queues emptied and its pool refilled whole.
    // ORDERING: Acquire, as in `Node::is_gone`.
    // SAFETY: `d < ranks()`.
    let any_alive = (0..node.ranks()).any(|d| unsafe { node.rank_state(d) }.state.load(Acquire) == STATE_ALIVE);
    for d in 0..node.ranks() {
        // SAFETY: `d < ranks()`.
        let sd = unsafe { node.rank_state(d) };
        // ORDERING: Acquire; pairs with the drainer's Release store of DRAIN_DONE, after which
        // the drainer touches the queue no more and every cell it returned is in its owner's
        // free queue.
        if any_alive && sd.state.load(Acquire) == STATE_GONE && sd.drain.load(Acquire) != DRAIN_DONE {
            return Err(Error::NotReady { what: "a dead rank's receive queue is not drained yet", rank: d });
        }
    }
    // SAFETY: `r` was checked by `state_of`.
    unsafe {
        node.queue_shared(r, QueueKind::Recv).reset();
        node.queue_shared(r, QueueKind::Free).reset();
        node.queue_shared(r, QueueKind::Netmod).reset();
    }
    let fq = node.free_queue(r);
    for c in node.pool(r) {
        fq.enqueue(node.arena().cell(c, "pool cell")?, r, r)?;
    }
    for b in 0..node.params().fastboxes_per_rank {
        // SAFETY: `r` checked, `b` below `fastboxes_per_rank`.
        let fb = unsafe { node.fastbox(r, b) };
        fb.clear();
        // ORDERING: Relaxed; published by the state's Release store below.
        fb.owner().store(0, Relaxed);
    }
    for s in 0..node.ranks() {
        // SAFETY: both ranks below `ranks()`.
        unsafe { node.fastbox_map(r, s) }.store(0, Relaxed);
    }
    let p = node.params();
    let control = 64 * (1 + p.lmt_slots as usize);
    for i in 0..p.lmt_rings_per_rank {
        if let Some(base) = node.lmt_ring_base(r, i) {
            // The epoch word (first line) is kept: it only grows, so a CTS of the dead
            // incarnation never matches the ring again. The slots' length words are zeroed.
            for k in 1..=p.lmt_slots as usize {
                // SAFETY: `lmt_ring_base` bounds-checked `(r, i)` and returned the start of a ring
                // whose control area is `control` bytes of 64-byte lines, each starting with an
                // aligned u32 length word; nobody uses the ring now (module documentation).
                let word = unsafe { &*(base.add(64 * k) as *const crate::sync::AtomicU32) };
                debug_assert!(64 * k < control);
                word.store(0, Relaxed);
            }
        }
    }
    // ORDERING: Relaxed; all published by the Release store of the state below.
    st.status.store(0, Relaxed);
    st.pid.store(0, Relaxed);
    st.start_time.store(0, Relaxed);
    st.pidns.store(0, Relaxed);
    st.doorbell.store(0, Relaxed);
    st.mail.store(0, Relaxed);
    st.drain.store(0, Relaxed);
    // ORDERING: Release; a rank that Acquires the new incarnation (or the EMPTY state) sees the
    // reset above.
    let inc = st.incarnation.fetch_add(1, Release).wrapping_add(1);
    // ORDERING: Release; publishes the reset to producers and to the new process's registration.
    st.state.store(STATE_EMPTY, Release);
    // ORDERING: Release; live ranks Acquire the epoch, then look at states and incarnations.
    node.death_epoch_word().fetch_add(1, Release);
    Ok(inc)
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;
    use crate::cell::MsgHeader;
    use crate::layout::Params;
    use crate::node::{HeapNode, STATE_ALIVE};
    use crate::port::{PeerEvent, Port, PortConfig, Sent};

    fn cfg() -> PortConfig {
        PortConfig { fastbox_after: 2, scan_every: 4, check_every: 1 }
    }

    fn params() -> Params {
        Params {
            cell_size: 256,
            cells_per_rank: 8,
            fastbox_slots: 4,
            fastbox_slot_size: 128,
            fastboxes_per_rank: 2,
            ..Params::DEFAULT
        }
    }

    fn hdr(tag: i32) -> MsgHeader {
        MsgHeader { tag, ..MsgHeader::default() }
    }

    /// Polls whole messages (tag, first payload byte) until none comes, releasing every fragment.
    fn drain(port: &mut Port<'_, HeapNode>) -> Vec<(u16, i32, u8)> {
        let mut got = Vec::new();
        for _ in 0..64 {
            let Some(inc) = port.poll(&[]).unwrap() else { continue };
            let mut b = vec![0u8; inc.len()];
            if inc.offset() == 0 {
                inc.copy_to(&mut b);
                got.push((inc.src, inc.tag(), b.first().copied().unwrap_or(0)));
            }
            port.release(inc).unwrap();
        }
        got
    }

    fn checks(port: &mut Port<'_, HeapNode>, n: usize) -> Vec<PeerEvent> {
        let mut ev = Vec::new();
        for _ in 0..n {
            port.check_peers().unwrap();
            ev.extend(port.take_events());
        }
        ev
    }

    /// Rank 2 sends to 0 (fastbox and cells), takes a cell of 0's and dies; 0 and 1 retire it; the
    /// launcher resets it; the new incarnation talks to both from sequence number 0, and its
    /// whole pool is back.
    #[test]
    fn a_dead_rank_restarts_as_a_new_incarnation() {
        let node = HeapNode::new(3, params()).unwrap();
        let mut a = Port::new(&node, 0, cfg()).unwrap();
        let mut b = Port::new(&node, 1, cfg()).unwrap();
        {
            let mut c = Port::new(&node, 2, cfg()).unwrap();
            for i in 0..6u8 {
                assert!(matches!(c.send(0, &hdr(i32::from(i)), None, &[i; 20]).unwrap(), Sent::Done));
            }
            // A message of 0's in 2's queue, taken out and never returned.
            assert!(matches!(a.send(2, &hdr(50), None, &[9; 200]).unwrap(), Sent::Done));
            let held = c.poll(&[]).unwrap().unwrap();
            drop(held); // never released: the cell stays out
            assert!(matches!(b.send(2, &hdr(51), None, &[9; 200]).unwrap(), Sent::Done));
        }
        assert_eq!(node.state_of(2).unwrap().incarnation(), 0);
        // Not dead yet: no reset.
        assert!(matches!(reset_rank(&node, 2), Err(Error::NotReady { .. })));
        node.mark_gone(2, 9).unwrap();
        // Nobody noticed: the queue is not drained.
        assert!(matches!(reset_rank(&node, 2), Err(Error::NotReady { rank: 2, .. })));
        assert!(!a.retire_peer(2).unwrap(), "its death is not known yet");
        // Everything 2 sent before it died is delivered, in order, before the retirement.
        let mut got = Vec::new();
        for _ in 0..8 {
            got.extend(drain(&mut a));
            a.check_peers().unwrap();
        }
        assert_eq!(got, (0..6).map(|i| (2, i32::from(i), i)).collect::<Vec<_>>());
        let ev_a = a.take_events();
        assert!(ev_a.contains(&PeerEvent::Gone { rank: 2 }) && ev_a.contains(&PeerEvent::Silent { rank: 2 }));
        assert!(a.retire_peer(2).unwrap());
        checks(&mut b, 4);
        assert!(b.retire_peer(2).unwrap());
        assert!(matches!(a.send(2, &hdr(0), None, &[1]), Err(Error::PeerDead { rank: 2 })));
        assert_eq!(a.free_cells().unwrap(), 8, "0 took back the cell 2 held");
        assert_eq!(reset_rank(&node, 2).unwrap(), 1);
        assert_eq!(node.state_of(2).unwrap().incarnation(), 1);
        assert_eq!(node.free_queue(2).count_linked().unwrap(), 8, "the whole pool is back");
        assert!(!node.is_gone(2));
        node.state_of(2).unwrap().state.store(STATE_ALIVE, Release);
        let mut c = Port::new(&node, 2, cfg()).unwrap();
        assert!(checks(&mut a, 1).contains(&PeerEvent::Restarted { rank: 2 }));
        assert!(checks(&mut b, 1).contains(&PeerEvent::Restarted { rank: 2 }));
        for i in 0..6u8 {
            assert!(matches!(c.send(0, &hdr(100 + i32::from(i)), None, &[i; 20]).unwrap(), Sent::Done));
            assert!(matches!(a.send(2, &hdr(200 + i32::from(i)), None, &[i; 150]).unwrap(), Sent::Done));
            assert!(matches!(b.send(2, &hdr(300 + i32::from(i)), None, &[i; 8]).unwrap(), Sent::Done));
        }
        assert_eq!(drain(&mut a), (0..6).map(|i| (2, 100 + i32::from(i), i)).collect::<Vec<_>>());
        let got = drain(&mut c);
        let from0: Vec<_> = got.iter().filter(|m| m.0 == 0).map(|m| m.1).collect();
        let from1: Vec<_> = got.iter().filter(|m| m.0 == 1).map(|m| m.1).collect();
        assert_eq!(from0, (200..206).collect::<Vec<_>>());
        assert_eq!(from1, (300..306).collect::<Vec<_>>());
        drop(c);
    }

    /// The live rank polls the new incarnation's messages (a two-cell message or a fastbox one,
    /// then another) with no liveness check since the reset: the poll that finds the first
    /// reports `Restarted` and returns nothing, and so do the next ones until the event was
    /// taken; then they come in order (loom
    /// `sender_dies_between_swap_and_link_then_restarts` found them returned before `Restarted`).
    #[test]
    fn restarted_comes_before_the_new_incarnations_first_fragment() {
        for fastbox_first in [false, true] {
            let node = HeapNode::new(2, params()).unwrap();
            let mut a = Port::new(&node, 0, PortConfig { check_every: 1 << 20, ..cfg() }).unwrap();
            node.mark_gone(1, 9).unwrap();
            checks(&mut a, 3);
            assert!(a.retire_peer(1).unwrap());
            reset_rank(&node, 1).unwrap();
            node.register(1).unwrap();
            let mut c = Port::new(&node, 1, PortConfig { fastbox_after: 1, ..cfg() }).unwrap();
            let first = if fastbox_first { vec![7; 10] } else { vec![7; 300] };
            assert!(matches!(c.send(0, &hdr(1), None, &first).unwrap(), Sent::Done));
            assert!(matches!(c.send(0, &hdr(2), None, &[8; 10]).unwrap(), Sent::Done));
            assert!(a.poll(&[1]).unwrap().is_none(), "fastbox first: {fastbox_first}");
            assert!(a.poll(&[1]).unwrap().is_none(), "held until Restarted is taken");
            assert_eq!(a.take_events(), [PeerEvent::Restarted { rank: 1 }], "fastbox first: {fastbox_first}");
            let mut got = Vec::new();
            while let Some(inc) = a.poll(&[1]).unwrap() {
                got.push((inc.tag(), inc.header().seq, inc.offset()));
                a.release(inc).unwrap();
            }
            let second = (2, 1, 0);
            let first = if fastbox_first { vec![(1, 0, 0)] } else { vec![(1, 0, 0), (1, 0, a.cell_payload())] };
            assert_eq!(got, [first, vec![second]].concat());
            assert!(a.take_events().is_empty());
        }
    }

    /// The new incarnation dies before a retired peer looked: the peer sees the restart, then
    /// the new death, and drains what the new incarnation had sent.
    #[test]
    fn a_restarted_rank_that_dies_again_is_seen_dying_again() {
        let node = HeapNode::new(2, params()).unwrap();
        let mut a = Port::new(&node, 0, cfg()).unwrap();
        node.mark_gone(1, 9).unwrap();
        checks(&mut a, 3);
        assert!(a.retire_peer(1).unwrap());
        reset_rank(&node, 1).unwrap();
        node.state_of(1).unwrap().state.store(STATE_ALIVE, Release);
        {
            let mut c = Port::new(&node, 1, cfg()).unwrap();
            assert!(matches!(c.send(0, &hdr(7), None, &[7; 10]).unwrap(), Sent::Done));
        }
        node.mark_gone(1, 9).unwrap();
        let ev = checks(&mut a, 1);
        assert_eq!(ev.first(), Some(&PeerEvent::Restarted { rank: 1 }), "{ev:?}");
        assert!(ev.contains(&PeerEvent::Gone { rank: 1 }), "{ev:?}");
        let mut got = drain(&mut a);
        got.extend(drain(&mut a));
        assert_eq!(got, [(1, 7, 7)]);
        checks(&mut a, 2);
        assert!(a.retire_peer(1).unwrap());
        assert_eq!(reset_rank(&node, 1).unwrap(), 2);
    }
}
