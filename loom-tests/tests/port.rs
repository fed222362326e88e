//! loom models of the port (fastboxes, free-queue recycling, per-pair order), on the code that
//! ships, over a heap node.
#![cfg(loom)]

use loom::sync::Arc;
use loom::sync::atomic::{AtomicBool, Ordering::*};
use loom::thread;
use nemesis_loom_tests::{builder, params};
use nemesis_shm::{HeapNode, MsgHeader, Port, PortConfig, Sent};

fn cfg() -> PortConfig {
    PortConfig { fastbox_after: 1, scan_every: 1 << 20, check_every: 1 << 20 }
}

/// Sends `n` one-byte messages tagged 0..n, resuming pending ones until all are handed over.
fn send_all(port: &mut Port<'_, HeapNode>, dst: u16, n: i32) {
    for tag in 0..n {
        let hdr = MsgHeader { tag, ..MsgHeader::default() };
        if let Sent::Pending(mut ps) = port.send(dst, &hdr, &[tag as u8]).unwrap() {
            while !port.resume(&mut ps, &[tag as u8]).unwrap() {
                thread::yield_now();
            }
        }
    }
}

/// (c) Free-queue recycling: two cells carry three messages, so cells come back through the
/// receiver and are reused; a cell is never handed out while in use (its payload is intact when
/// read, and every message arrives once, in order).
#[test]
fn c_free_queue_recycling() {
    static EX: nemesis_loom_tests::Executions =
        nemesis_loom_tests::Executions("c_free_queue_recycling", std::sync::atomic::AtomicUsize::new(0));
    builder(3).check(|| {
        EX.hit();
        let node = Arc::new(HeapNode::new(2, params(0, 2)).unwrap());
        let sender = {
            let node = node.clone();
            thread::spawn(move || {
                let mut p = Port::new(&*node, 0, cfg()).unwrap();
                send_all(&mut p, 1, 3);
            })
        };
        let mut r = Port::new(&*node, 1, cfg()).unwrap();
        let mut next = 0;
        while next < 3 {
            match r.poll(&[0]).unwrap() {
                Some(inc) => {
                    let mut b = [0u8; 1];
                    inc.copy_to(&mut b);
                    assert_eq!((inc.header().tag, b[0]), (next, next as u8));
                    r.release(inc).unwrap();
                    next += 1;
                }
                None => thread::yield_now(),
            }
        }
        sender.join().unwrap();
        let s = Port::new(&*node, 0, cfg()).unwrap();
        assert_eq!(s.free_cells().unwrap(), 2, "both cells back in the owner's free queue");
    });
    EX.report();
}

/// (d) Fastbox plus queue ordering: with a one-slot fastbox, three messages take both paths
/// depending on whether the receiver has emptied the slot; they arrive in the order sent.
#[test]
fn d_fastbox_and_queue_order() {
    static EX: nemesis_loom_tests::Executions =
        nemesis_loom_tests::Executions("d_fastbox_and_queue_order", std::sync::atomic::AtomicUsize::new(0));
    builder(3).check(|| {
        EX.hit();
        let node = Arc::new(HeapNode::new(2, params(1, 2)).unwrap());
        let used_fastbox = Arc::new(AtomicBool::new(false));
        let sender = {
            let node = node.clone();
            thread::spawn(move || {
                let mut p = Port::new(&*node, 0, cfg()).unwrap();
                send_all(&mut p, 1, 3);
            })
        };
        let mut r = Port::new(&*node, 1, cfg()).unwrap();
        let mut next = 0;
        while next < 3 {
            match r.poll(&[0]).unwrap() {
                Some(inc) => {
                    assert_eq!(inc.header().tag, next, "non-overtaking across fastbox and queue");
                    if inc.via_fastbox() {
                        used_fastbox.store(true, Relaxed);
                    }
                    r.release(inc).unwrap();
                    next += 1;
                }
                None => thread::yield_now(),
            }
        }
        sender.join().unwrap();
        assert!(used_fastbox.load(Relaxed), "the first message always fits the empty fastbox");
    });
    EX.report();
}

/// The fastbox ring alone: six messages through four slots acknowledged every two, so slots are
/// reused; loom checks that every body write is ordered after the previous reads of that slot
/// (causality of the loom cell per slot) and that messages arrive in order.
#[test]
fn fastbox_ring_slot_reuse() {
    use nemesis_shm::fastbox::HeapFastbox;
    static EX: nemesis_loom_tests::Executions =
        nemesis_loom_tests::Executions("fastbox_ring_slot_reuse", std::sync::atomic::AtomicUsize::new(0));
    builder(3).check(|| {
        EX.hit();
        let fb = Arc::new(HeapFastbox::new(4, 64));
        let sender = {
            let fb = fb.clone();
            thread::spawn(move || {
                let (mut next, mut acked) = (0, 0);
                for tag in 0..6 {
                    let hdr = MsgHeader { tag, len: 1, ..MsgHeader::default() };
                    while !fb.get().try_send(&mut next, &mut acked, &hdr, 0, &[tag as u8]) {
                        thread::yield_now();
                    }
                }
            })
        };
        let mut next = 0;
        for tag in 0..6 {
            let m = loop {
                if let Some(m) = fb.get().peek(next).unwrap() {
                    break m;
                }
                thread::yield_now();
            };
            // SAFETY: `m` points to a published header and one-byte payload in the slot.
            let (t, byte) = unsafe { ((*m.hdr).tag, *m.payload) };
            assert_eq!((t, byte, m.len), (tag, tag as u8, 1));
            fb.get().release(&mut next);
        }
        sender.join().unwrap();
    });
    EX.report();
}
