//! loom models of a rank restarted as a new incarnation (`shm/src/incarnation.rs`), on the code
//! that ships: a dead rank is retired by the live one (`Port::retire_peer`), reset by a launcher
//! (`incarnation::reset_rank`) and started again (`HeapNode::register`, a new `Port`), while the
//! live rank goes on polling, checking its peers and sending.
//!
//! Each model checks one of issue 13's requirements, with two or three threads and two cells per
//! rank: every complete message of the dead incarnation is delivered before its `Restarted` (or,
//! if partial, dropped whole), nothing of it (cell or fastbox slot) after; the new incarnation's
//! messages come after `Restarted`, in order from sequence number 0; every cell is back with its
//! owner.
//!
//! A rank "dies" by stopping for good and then being marked GONE (as its launcher would after
//! `waitpid`). Phase 1 (death, delivery, retirement) and phase 2 (reset, new incarnation, its
//! first messages) are ordered by the protocol (the launcher resets a rank only once every live
//! rank retired it), so each model makes one of them concurrent and runs the other on one
//! thread: every end state of the concurrent phase 1 meets phase 2, and phase 2's races are
//! explored from phase 1's end. Both at once exceeded what loom explores in minutes.
//!
//! Found by these models: a live rank returned the new incarnation's first messages before it
//! reported `Restarted` (its poll paths did not look at the retirement; the restart was noticed
//! only at the next death-epoch check). Fixed in `Port` (`RETIRED_FRAG`).
#![cfg(loom)]

use core::ptr;

use loom::sync::Arc;
use loom::sync::atomic::{AtomicBool, Ordering::*};
use loom::thread;
use nemesis_loom_tests::{Executions, builder, params};
use nemesis_shm::incarnation::reset_rank;
use nemesis_shm::{Arena, HeapNode, MsgHeader, Node, PeerEvent, Port, PortConfig, Sent};

/// Liveness checks only when the model calls `check_peers`; fastboxes claimed after
/// `fastbox_after` messages.
fn cfg(fastbox_after: u32) -> PortConfig {
    PortConfig { fastbox_after, scan_every: 1 << 20, check_every: 1 << 20 }
}

/// What the live rank saw, in order: a fragment `(tag, sequence number, offset)` or an event.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Seen {
    Frag(i32, u32, usize),
    Event(PeerEvent),
}

/// Tags at or above this one are the new incarnation's.
const NEW: i32 = 100;

/// The live rank, receiving from peer 0 (dead, then restarted).
struct Live<'n> {
    port: Port<'n, HeapNode>,
    seen: Vec<Seen>,
}

impl<'n> Live<'n> {
    fn new(node: &'n HeapNode, me: u16, cfg: PortConfig) -> Self {
        Live { port: Port::new(node, me, cfg).unwrap(), seen: Vec::new() }
    }

    fn events(&mut self) {
        self.seen.extend(self.port.take_events().into_iter().map(Seen::Event));
    }

    fn saw(&self, e: PeerEvent) -> bool {
        self.seen.contains(&Seen::Event(e))
    }

    /// One poll of peer 0; a fragment is recorded after the events its poll produced, and
    /// released at once. Checks the peers only when nothing came (as a waiting endpoint does).
    fn step(&mut self) {
        match self.port.poll(&[0]).unwrap() {
            Some(inc) => {
                self.events();
                let h = inc.header();
                self.seen.push(Seen::Frag(h.tag, h.seq, inc.offset()));
                self.port.release(inc).unwrap();
            }
            None => {
                self.port.check_peers().unwrap();
                self.events();
                thread::yield_now();
            }
        }
    }

    /// Receives until peer 0 is silent, then retires it (step 2 of `incarnation`).
    fn retire(&mut self) {
        while !self.saw(PeerEvent::Silent { rank: 0 }) {
            self.step();
        }
        while !self.port.retire_peer(0).unwrap() {
            self.port.check_peers().unwrap();
            self.events();
            thread::yield_now();
        }
    }

    /// Receives until `n` fragments of the new incarnation came.
    fn receive_new(&mut self, n: usize) {
        while self.seen.iter().filter(|s| matches!(s, Seen::Frag(t, ..) if *t >= NEW)).count() < n {
            self.step();
        }
    }

    /// Checks the order: the dead incarnation's fragments, `Restarted` once, then the new one's
    /// fragments `new` (tag, sequence number) in order and nothing of the dead one. Returns the
    /// dead incarnation's fragments and the events before `Restarted`.
    fn check_order(&self, new: &[(i32, u32)]) -> (Vec<(i32, u32, usize)>, Vec<PeerEvent>) {
        let restarted = Seen::Event(PeerEvent::Restarted { rank: 0 });
        let at = self.seen.iter().position(|s| *s == restarted);
        let first_new = self.seen.iter().position(|s| matches!(s, Seen::Frag(t, ..) if *t >= NEW));
        let (Some(at), Some(first_new)) = (at, first_new) else { panic!("no restart or no message: {:?}", self.seen) };
        assert!(at < first_new, "a message of the new incarnation before its Restarted: {:?}", self.seen);
        assert_eq!(self.seen.iter().filter(|s| **s == restarted).count(), 1, "{:?}", self.seen);
        let (before, after) = self.seen.split_at(at);
        let got: Vec<_> =
            after.iter().filter_map(|s| if let Seen::Frag(t, q, _) = s { Some((*t, *q)) } else { None }).collect();
        assert_eq!(got, new, "after Restarted: only the new incarnation's messages, in order: {:?}", self.seen);
        let old = before.iter().filter_map(|s| if let Seen::Frag(t, q, o) = s { Some((*t, *q, *o)) } else { None });
        let events = before.iter().filter_map(|s| if let Seen::Event(e) = s { Some(*e) } else { None });
        (old.collect(), events.collect())
    }
}

/// Sends one-byte messages with the given tags to `dst`, resuming pending ones until all are
/// handed over.
fn send_all(port: &mut Port<'_, HeapNode>, dst: u16, tags: &[i32]) {
    for &tag in tags {
        let hdr = MsgHeader { tag, ..MsgHeader::default() };
        if let Sent::Pending(mut ps) = port.send(dst, &hdr, None, &[tag as u8]).unwrap() {
            while !port.resume(&mut ps, &[tag as u8]).unwrap() {
                thread::yield_now();
            }
        }
    }
}

/// The launcher, once every live rank retired dead rank 0: resets it (its whole pool back in its
/// free queue) and starts its new incarnation, which sends `tags` to rank 1.
fn restart(node: &HeapNode, tags: &[i32]) {
    assert_eq!(reset_rank(node, 0).unwrap(), 1);
    assert_eq!(node.free_queue(0).count_linked().unwrap(), 2, "the dead incarnation's pool is back whole");
    node.register(0).unwrap();
    let mut p = Port::new(node, 0, cfg(1)).unwrap();
    send_all(&mut p, 1, tags);
}

/// Does what a port's send of a one-cell, empty message does up to its tail swap, and stops there
/// for good: the sender dies between its swap and its link (failpoint `send-after-swap`).
fn send_swap_only(node: &HeapNode, me: u16, dst: u16, tag: i32, seq: u32) {
    let c = node.free_queue(me).dequeue(node).unwrap().expect("a free cell");
    node.arena().note_write(c.handle());
    let hdr = MsgHeader { tag, seq, len: 0, frag: 0, ..MsgHeader::default() };
    // SAFETY: the cell is ours (taken from our free queue); its body starts with room for a header.
    unsafe { ptr::write_unaligned(c.body() as *mut MsgHeader, hdr) };
    // Never linked: the producer dies here.
    let _swapped = node.recv_queue(dst).swap_in(c, me, dst).unwrap();
}

/// Phase 1 in the models below (death and retirement, concurrent): the dead incarnation's
/// thread `old` against the live rank, until it retired rank 0. Phase 2 (reset, restart, new
/// messages) then runs on the main thread alone: its interleavings with the live rank's polls
/// are `restart_races_the_live_ranks_polls`'s, and the protocol orders the phases (the launcher
/// resets only once every live rank retired). Splitting them keeps each model to seconds; each
/// phase 1 end state still meets phase 2.
fn die_and_retire<'n>(node: &'n Arc<HeapNode>, old: impl FnOnce(&HeapNode) + Send + 'static) -> Live<'n> {
    let t = {
        let node = node.clone();
        thread::spawn(move || old(&node))
    };
    let mut live = Live::new(node, 1, cfg(1 << 20));
    live.retire();
    t.join().unwrap();
    live
}

/// Rank 0 sends message 0 in a cell, swaps message 1's cell into rank 1's queue and dies before
/// linking it. Rank 1 retires it, the launcher resets it and the new incarnation sends two
/// messages: rank 1 gets both of the dead incarnation's messages (the unlinked one too, linked
/// on the dead producer's behalf), then `Restarted`, then the new incarnation's two from sequence
/// number 0; rank 0's cells are all back once the new incarnation's were released.
#[test]
fn sender_dies_between_swap_and_link_then_restarts() {
    static EX: Executions =
        Executions("sender_dies_between_swap_and_link_then_restarts", std::sync::atomic::AtomicUsize::new(0));
    builder(5).check(|| {
        EX.hit();
        let node = Arc::new(HeapNode::new(2, params(0, 2)).unwrap());
        let mut live = die_and_retire(&node, |node| {
            let mut p = Port::new(node, 0, cfg(1 << 20)).unwrap();
            send_all(&mut p, 1, &[0]);
            drop(p);
            send_swap_only(node, 0, 1, 1, 1);
            node.mark_gone(0, 9).unwrap();
        });
        restart(&node, &[NEW, NEW + 1]);
        live.receive_new(2);
        let (old, _) = live.check_order(&[(NEW, 0), (NEW + 1, 1)]);
        assert_eq!(old, [(0, 0, 0), (1, 1, 0)], "every message the dead incarnation completed, once");
        assert_eq!(node.free_queue(0).count_linked().unwrap(), 2, "rank 0's cells are all back");
        assert_eq!(live.port.free_cells().unwrap(), 2);
    });
    EX.report();
}

/// Rank 0 sends a message of three cells' worth with two cells (the third waits for a cell rank
/// 1 returns, or never goes) and dies. Rank 1 gets it whole or reports it dropped, before
/// `Restarted`; the new incarnation's message (sequence number 0, fragment 0, like the dead one's
/// first) comes after, whole, never taken for the rest of the dead one's.
#[test]
fn sender_dies_mid_message_then_restarts() {
    static EX: Executions = Executions("sender_dies_mid_message_then_restarts", std::sync::atomic::AtomicUsize::new(0));
    builder(4).check(|| {
        EX.hit();
        let node = Arc::new(HeapNode::new(2, params(0, 2)).unwrap());
        let partial = Arc::new(AtomicBool::new(false));
        let mut live = die_and_retire(&node, {
            let partial = partial.clone();
            move |node| {
                let mut p = Port::new(node, 0, cfg(1 << 20)).unwrap();
                let big = vec![1u8; 3 * p.cell_payload()];
                let sent = p.send(1, &MsgHeader { tag: 0, ..MsgHeader::default() }, None, &big).unwrap();
                drop(p);
                // Relaxed: read after the join.
                partial.store(matches!(sent, Sent::Pending(_)), Relaxed);
                node.mark_gone(0, 9).unwrap();
            }
        });
        restart(&node, &[NEW]);
        live.receive_new(1);
        let partial = partial.load(Relaxed);
        let (old, events) = live.check_order(&[(NEW, 0)]);
        let dropped = events.contains(&PeerEvent::PartialDropped { rank: 0, seq: 0 });
        assert_eq!(dropped, partial, "{:?}", live.seen);
        let cap = live.port.cell_payload();
        let whole = [(0, 0, 0), (0, 0, cap), (0, 0, 2 * cap)];
        assert_eq!(old, whole[..if partial { 2 } else { 3 }], "{:?}", live.seen);
        assert_eq!(node.free_queue(0).count_linked().unwrap(), 2, "rank 0's cells are all back");
    });
    EX.report();
}

/// Rank 0 claims its fastbox at rank 1 (one box of one slot), fills it and dies. Rank 1
/// delivers that message (it is complete) before `Restarted`, and frees the box, clearing it,
/// before it retires rank 0: the new incarnation claims the same box and starts again at slot 0,
/// where the dead incarnation's stamp would otherwise pass for the new one's message 0.
#[test]
fn fastbox_slot_of_a_dead_incarnation_is_never_the_new_ones() {
    static EX: Executions =
        Executions("fastbox_slot_of_a_dead_incarnation_is_never_the_new_ones", std::sync::atomic::AtomicUsize::new(0));
    builder(5).check(|| {
        EX.hit();
        let node = Arc::new(HeapNode::new(2, params(1, 2)).unwrap());
        let mut live = die_and_retire(&node, |node| {
            let mut p = Port::new(node, 0, cfg(1)).unwrap();
            send_all(&mut p, 1, &[0]);
            drop(p);
            node.mark_gone(0, 9).unwrap();
        });
        restart(&node, &[NEW, NEW + 1]);
        live.receive_new(2);
        let (old, _) = live.check_order(&[(NEW, 0), (NEW + 1, 1)]);
        assert_eq!(old, [(0, 0, 0)], "the dead incarnation's fastbox message, once, before Restarted");
    });
    EX.report();
}

/// Phase 2 concurrent: rank 0 sent message 0 through its fastbox and message 1 in a cell, died,
/// and was retired by rank 1 (all before the model's threads start). The launcher resets it and
/// its new incarnation sends two messages (fastbox claimed at the first, the second in the box or
/// in a cell) while rank 1 polls and checks its peers: rank 1 reports `Restarted` before it
/// returns anything of the new incarnation, whose messages come in order from number 0.
#[test]
fn restart_races_the_live_ranks_polls() {
    static EX: Executions = Executions("restart_races_the_live_ranks_polls", std::sync::atomic::AtomicUsize::new(0));
    builder(5).check(|| {
        EX.hit();
        let node = Arc::new(HeapNode::new(2, params(1, 2)).unwrap());
        {
            let mut p = Port::new(&*node, 0, cfg(1)).unwrap();
            send_all(&mut p, 1, &[0, 1]);
        }
        node.mark_gone(0, 9).unwrap();
        let mut live = Live::new(&node, 1, cfg(1 << 20));
        live.retire();
        let new = {
            let node = node.clone();
            thread::spawn(move || restart(&node, &[NEW, NEW + 1]))
        };
        live.receive_new(2);
        new.join().unwrap();
        let (old, _) = live.check_order(&[(NEW, 0), (NEW + 1, 1)]);
        assert_eq!(old, [(0, 0, 0), (1, 1, 0)]);
    });
    EX.report();
}

/// The other way, phase 2 concurrent: rank 1 sent to rank 0 through a fastbox it claimed at rank
/// 0 and in a cell, rank 0 died without reading, and rank 1 retired it (its cell drained back
/// home), all before the model's threads start. The launcher resets rank 0; its new incarnation
/// polls while rank 1 sends again (claiming a box at it anew) and checks its peers: the new
/// incarnation gets rank 1's new messages from sequence number 0 and never what the dead one was
/// sent (the boxes it hosts were cleared and unowned: a stale stamp would pass for message 0 of
/// rank 1's new box before rank 1 wrote it); every cell of rank 1 is back home.
#[test]
fn dead_receiver_restarts_with_nothing_of_before() {
    static EX: Executions =
        Executions("dead_receiver_restarts_with_nothing_of_before", std::sync::atomic::AtomicUsize::new(0));
    builder(5).check(|| {
        EX.hit();
        let node = Arc::new(HeapNode::new(2, params(1, 2)).unwrap());
        let mut p = Port::new(&*node, 1, cfg(1)).unwrap();
        // Fastbox (claimed at the first message), then a cell (the slot is full).
        send_all(&mut p, 0, &[0, 1]);
        node.mark_gone(0, 9).unwrap();
        let mut live = Live { port: p, seen: Vec::new() };
        live.retire();
        assert_eq!(live.port.free_cells().unwrap(), 2, "rank 1's cells are back before the reset");
        reset_rank(&*node, 0).unwrap();
        node.register(0).unwrap();
        let new = {
            let node = node.clone();
            thread::spawn(move || {
                let mut q = Port::new(&*node, 0, cfg(1 << 20)).unwrap();
                let mut got = Vec::new();
                while got.len() < 2 {
                    match q.poll(&[1]).unwrap() {
                        Some(inc) => {
                            got.push((inc.tag(), inc.header().seq));
                            q.release(inc).unwrap();
                        }
                        None => thread::yield_now(),
                    }
                }
                assert_eq!(got, [(NEW, 0), (NEW + 1, 1)], "only what was sent to the new incarnation");
            })
        };
        for tag in [NEW, NEW + 1] {
            let hdr = MsgHeader { tag, ..MsgHeader::default() };
            // `PeerDead` until the port sees the new incarnation (here at once: the reset is
            // done); two cells and a fastbox are enough for both.
            assert!(matches!(live.port.send(0, &hdr, None, &[2]), Ok(Sent::Done)));
        }
        live.events();
        assert!(live.saw(PeerEvent::Restarted { rank: 0 }));
        new.join().unwrap();
        assert_eq!(live.port.free_cells().unwrap(), 2, "rank 1's cells are back");
    });
    EX.report();
}
