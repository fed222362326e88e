//! loom models of crash recovery (`shm/src/queue.rs` and `shm/src/port/mod.rs`, "Failures"), on the
//! code that ships: a producer that links and then dies, a dead sender's fastbox holding message
//! k+1 while k is still in the queue, a partial message left by a dead sender behind a lagging
//! receiver, and a dead receiver whose queue is drained and whose cells are taken back.
//!
//! A rank "dies" by stopping for good and then being marked GONE (as its launcher would after
//! `waitpid`), so everything it wrote before is visible to whoever learns of its death.
#![cfg(loom)]

use loom::sync::Arc;
use loom::thread;
use nemesis_loom_tests::{Deaths, Executions, OneQueue, builder, params};
use nemesis_shm::{HeapNode, Liveness, MsgHeader, Node, PeerEvent, Port, PortConfig, Sent};

/// A producer enqueues (swap, then `head`) and dies right after its link, while an unrelated
/// death bumps the epoch, so the consumer may look for an unlinked head at any moment: the cell
/// is delivered exactly once (the consumer must not take it from `shadow` and then again from the
/// `head` the producer stored just before dying).
#[test]
fn producer_links_then_dies() {
    static EX: Executions = Executions("producer_links_then_dies", std::sync::atomic::AtomicUsize::new(0));
    builder(3).check(|| {
        EX.hit();
        let q = Arc::new(OneQueue::new(2));
        let live = Arc::new(Deaths::new(3));
        let producer = {
            let (q, live) = (q.clone(), live.clone());
            thread::spawn(move || {
                q.queue().enqueue(q.cell(1), 1, 0).unwrap();
                live.kill(1);
            })
        };
        let bystander = {
            let live = live.clone();
            thread::spawn(move || live.kill(2))
        };
        let mut epoch = 0;
        let got = loop {
            if let Some(c) = q.queue().dequeue(&*live).unwrap() {
                break c.handle();
            }
            let now = live.death_epoch();
            if now != epoch {
                epoch = now;
                q.queue().repair_unlinked_head(&*live).unwrap();
            } else {
                thread::yield_now();
            }
        };
        producer.join().unwrap();
        bystander.join().unwrap();
        assert_eq!(got, 1);
        // `peek`, not `dequeue`: a cell handed out twice would wait forever for a successor.
        assert_eq!(q.queue().peek().unwrap().map(|c| c.handle()), None, "delivered twice");
        assert!(!q.queue().repair_unlinked_head(&*live).unwrap());
    });
    EX.report();
}

/// Liveness checks only when the model calls `check_peers`.
fn cfg(fastbox_after: u32) -> PortConfig {
    PortConfig { fastbox_after, scan_every: 1 << 20, check_every: 1 << 20 }
}

/// Receives from local rank 0 (polling its fastbox first, checking peers between polls) until it
/// is reported silent; returns every fragment's `(tag, frag offset)` and the events.
fn receive_until_silent(r: &mut Port<'_, HeapNode>) -> (Vec<(i32, usize)>, Vec<PeerEvent>) {
    let (mut got, mut events) = (Vec::new(), Vec::new());
    while !events.contains(&PeerEvent::Silent { rank: 0 }) {
        r.check_peers().unwrap();
        events.extend(r.take_events());
        match r.poll(&[0]).unwrap() {
            Some(inc) => {
                got.push((inc.tag(), inc.offset()));
                r.release(inc).unwrap();
                events.extend(r.take_events());
            }
            None => thread::yield_now(),
        }
    }
    (got, events)
}

/// Message k goes in a cell, message k+1 into the sender's (just claimed) fastbox, and the sender
/// dies. The receiver may notice the death before it dequeued k: the box, whose slot holds k+1
/// (not the expected number yet), must not be freed before k+1 was delivered.
#[test]
fn dead_sender_fastbox_keeps_k_plus_1_behind_k() {
    static EX: Executions =
        Executions("dead_sender_fastbox_keeps_k_plus_1_behind_k", std::sync::atomic::AtomicUsize::new(0));
    builder(3).check(|| {
        EX.hit();
        let node = Arc::new(HeapNode::new(2, params(1, 2)).unwrap());
        let sender = {
            let node = node.clone();
            thread::spawn(move || {
                let mut p = Port::new(&*node, 0, cfg(2)).unwrap();
                for tag in 0..2 {
                    let sent = p.send(1, &MsgHeader { tag, ..MsgHeader::default() }, None, &[tag as u8]).unwrap();
                    assert!(matches!(sent, Sent::Done));
                }
                node.mark_gone(0, 9).unwrap();
            })
        };
        let mut r = Port::new(&*node, 1, cfg(2)).unwrap();
        let (got, _) = receive_until_silent(&mut r);
        sender.join().unwrap();
        assert_eq!(got, vec![(0, 0), (1, 0)], "message k+1 (fastbox) lost behind k (cell)");
    });
    EX.report();
}

/// The sender hands over message k whole, then only part of message k+1 (cells run out), and
/// dies. The receiver may notice the death before it has polled k (it lags): once the queue has
/// passed everything the sender enqueued, k+1 is reported dropped.
#[test]
fn partial_message_dropped_behind_a_lagging_receiver() {
    static EX: Executions =
        Executions("partial_message_dropped_behind_a_lagging_receiver", std::sync::atomic::AtomicUsize::new(0));
    builder(3).check(|| {
        EX.hit();
        let node = Arc::new(HeapNode::new(2, params(0, 2)).unwrap());
        let sender = {
            let node = node.clone();
            thread::spawn(move || {
                let mut p = Port::new(&*node, 0, cfg(1 << 20)).unwrap();
                let k = p.send(1, &MsgHeader { tag: 0, ..MsgHeader::default() }, None, &[7]).unwrap();
                assert!(matches!(k, Sent::Done));
                // Three cells' worth with one or two cells free: the rest waits (unless the
                // receiver returned both cells in time, and the message went whole).
                let big = vec![1u8; 3 * p.cell_payload()];
                let k1 = p.send(1, &MsgHeader { tag: 1, ..MsgHeader::default() }, None, &big).unwrap();
                node.mark_gone(0, 9).unwrap();
                matches!(k1, Sent::Pending(_))
            })
        };
        let mut r = Port::new(&*node, 1, cfg(1 << 20)).unwrap();
        let (got, events) = receive_until_silent(&mut r);
        let partial = sender.join().unwrap();
        assert_eq!(got[..2], [(0, 0), (1, 0)]);
        let dropped = events.contains(&PeerEvent::PartialDropped { rank: 0, seq: 1 });
        assert_eq!(dropped, partial, "{got:?} {events:?}");
        if !partial {
            assert_eq!(got.len(), 4, "the whole message");
        }
    });
    EX.report();
}

/// Rank 1 receives one message, keeps its cell and dies, while rank 0 sends it a second one (which
/// may find the queue sealed). Rank 0 learns of the death, drains rank 1's queue (returning every
/// cell to its owner) and takes back the cell rank 1 held: both its cells are home again.
#[test]
fn dead_receiver_queue_drained_and_cells_taken_back() {
    static EX: Executions =
        Executions("dead_receiver_queue_drained_and_cells_taken_back", std::sync::atomic::AtomicUsize::new(0));
    builder(3).check(|| {
        EX.hit();
        let node = Arc::new(HeapNode::new(2, params(0, 2)).unwrap());
        let receiver = {
            let node = node.clone();
            thread::spawn(move || {
                let mut r = Port::new(&*node, 1, cfg(1 << 20)).unwrap();
                // Takes the first message, never releases it, and dies.
                while r.poll(&[]).unwrap().is_none() {
                    thread::yield_now();
                }
                node.mark_gone(1, 9).unwrap();
            })
        };
        let mut p = Port::new(&*node, 0, cfg(1 << 20)).unwrap();
        assert!(matches!(p.send(1, &MsgHeader::default(), None, &[0]).unwrap(), Sent::Done));
        // Before or after the death: enqueued (then drained) or refused (then kept).
        let _ = p.send(1, &MsgHeader::default(), None, &[1]);
        // Checks until the death is known (the epoch is bumped just after the GONE mark).
        while !p.take_events().contains(&PeerEvent::Gone { rank: 1 }) {
            thread::yield_now();
            p.check_peers().unwrap();
        }
        receiver.join().unwrap();
        assert_eq!(p.free_cells().unwrap(), 2, "every cell of rank 0 is back in its free queue");
    });
    EX.report();
}
