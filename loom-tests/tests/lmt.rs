//! loom models of the shared-copy ring of `nemesis-lmt` (the code that ships, over a heap ring):
//! a pipelined transfer through fewer slots than chunks, and a ring handed from one transfer to
//! the next through its epoch and a CTS, as the receiver's pool does.
#![cfg(loom)]

use loom::sync::Arc;
use loom::sync::atomic::{AtomicU32, Ordering::*};
use loom::thread;
use nemesis_lmt::HeapRing;
use nemesis_loom_tests::{Executions, builder};

/// Chunk `k`'s bytes in a transfer `t`: `len` bytes of `t * 16 + k`.
fn chunk(t: u8, k: u8, len: usize) -> Vec<u8> {
    vec![t * 16 + k; len]
}

/// Sends chunks `0..n` of transfer `t` (the last one `last` bytes long) into `ring`.
fn put_all(ring: &HeapRing, t: u8, n: u8, last: usize) {
    let r = ring.get();
    for k in 0..n {
        let len = if k + 1 == n { last } else { r.slot_size() };
        while !r.try_put(u64::from(k), &chunk(t, k, len)) {
            thread::yield_now();
        }
    }
}

/// Takes chunks `0..n` of transfer `t` and checks them.
fn take_all(ring: &HeapRing, t: u8, n: u8, last: usize) {
    let r = ring.get();
    for k in 0..n {
        let len = if k + 1 == n { last } else { r.slot_size() };
        let mut dst = vec![0u8; len];
        while !r.try_take(u64::from(k), &mut dst).unwrap() {
            thread::yield_now();
        }
        assert_eq!(dst, chunk(t, k, len), "chunk {k} of transfer {t}");
    }
}

/// Four chunks (the last short) through two slots: every slot is reused; loom checks each body
/// write is ordered after the previous read of that slot, and the data arrive intact.
#[test]
fn ring_pipelined_transfer() {
    static EX: Executions = Executions("ring_pipelined_transfer", std::sync::atomic::AtomicUsize::new(0));
    builder(3).check(|| {
        EX.hit();
        let ring = Arc::new(HeapRing::new(2, 4));
        let sender = {
            let ring = ring.clone();
            thread::spawn(move || put_all(&ring, 0, 4, 3))
        };
        take_all(&ring, 0, 4, 3);
        sender.join().unwrap();
    });
    EX.report();
}

/// The receiver assigns the ring (a new epoch) and sends CTS carrying it; the sender checks the
/// ring's epoch against it before writing. Then the ring goes to the next transfer the same way:
/// its writes are ordered after the receiver's reads of the previous one (through the slots'
/// length words, not through the sender's own history).
#[test]
fn ring_handed_to_the_next_transfer() {
    static EX: Executions = Executions("ring_handed_to_the_next_transfer", std::sync::atomic::AtomicUsize::new(0));
    builder(2).check(|| {
        EX.hit();
        let ring = Arc::new(HeapRing::new(2, 2));
        // One CTS word per transfer: the epoch its sender may write under (0: not yet).
        let cts = Arc::new([AtomicU32::new(0), AtomicU32::new(0)]);
        let sender = {
            let (ring, cts) = (ring.clone(), cts.clone());
            thread::spawn(move || {
                for t in 0..2u8 {
                    let epoch = loop {
                        // ORDERING: Acquire, as the CTS message's delivery through the queue.
                        let e = cts[usize::from(t)].load(Acquire);
                        if e != 0 {
                            break e;
                        }
                        thread::yield_now();
                    };
                    assert_eq!(ring.get().epoch(), epoch, "the ring is this transfer's");
                    put_all(&ring, t + 1, 3, 1);
                }
            })
        };
        for t in 0..2u8 {
            let epoch = ring.get().assign();
            cts[usize::from(t)].store(epoch, Release);
            take_all(&ring, t + 1, 3, 1);
        }
        sender.join().unwrap();
    });
    EX.report();
}
