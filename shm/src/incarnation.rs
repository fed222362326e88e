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
//! Invariant: nothing of the dead incarnation (cell, box, ring) is in use at step 3; the case by
//! case argument is in `docs/design/shm.md`, "Incarnations".

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
mod tests;
