//! loom models of the collectives' shared area (`nemesis_shm::collarea`, the code that ships,
//! over a heap area with 2 one-byte banks per member in each lane, so that a bank is reused within three collectives;
//! the segment's lanes have 32 and 4): sequence words and banks over consecutive collectives, a fast
//! member reusing a bank while a slow one may still read it, and an area handed from one team to
//! the next through its release and claim. Every bank write is tracked against the reads before
//! it.
#![cfg(loom)]

use loom::sync::Arc;
use loom::thread;
use nemesis_loom_tests::{Executions, builder};
use nemesis_shm::HeapArea;
use nemesis_shm::collarea::Lane;

/// The models' builder: spinning members yield at every check, which loom counts as branches.
fn model(bound: usize) -> loom::model::Builder {
    let mut b = builder(bound);
    b.max_branches = 100_000;
    b
}

/// A flag wait as the C ABI's, with the model's scheduler in place of the Endpoint.
fn wait(_: u32, ready: &mut dyn FnMut() -> bool) -> Result<(), nemesis_shm::Error> {
    while !ready() {
        thread::yield_now();
    }
    Ok(())
}

/// Allreduce of one byte through the area: every member writes its own, then sums all.
fn allreduce(a: &Lane, me: u32, n: u32, s: u64, v: u8) -> u8 {
    let mut w = wait;
    a.enter_with(me, n, s, 1, |b| b[0] = v, &mut 0, &mut w).unwrap();
    (0..n).map(|j| a.read(j, s, 1, |b| b[0], &mut w).unwrap()).sum()
}

/// Broadcast of one byte from `root`; `floor` is the root's memory of the members' progress.
fn bcast(a: &Lane, me: u32, n: u32, s: u64, root: u32, v: u8, floor: &mut u64) -> u8 {
    let mut w = wait;
    if me == root {
        a.enter_with(me, n, s, 1, |b| b[0] = v, floor, &mut w).unwrap();
        v
    } else {
        a.enter(me, s).unwrap();
        a.read(root, s, 1, |b| b[0], &mut w).unwrap()
    }
}

/// Two members, two consecutive collectives: an allreduce (bank 1), then a broadcast from
/// member 1 (bank 0). Both get the sum and the broadcast value. (Three spinning members took
/// loom more than ten minutes even with one preemption.)
#[test]
fn a_allreduce_then_bcast() {
    static EX: Executions = Executions("a_allreduce_then_bcast", std::sync::atomic::AtomicUsize::new(0));
    model(2).check(|| {
        EX.hit();
        let h = Arc::new(HeapArea::new(2, 2, 1));
        h.get().claim(2).unwrap();
        let run = |h: Arc<HeapArea>, me: u32| {
            let a = h.get();
            assert_eq!(allreduce(a.lane(0), me, 2, 1, me as u8 + 1), 3);
            assert_eq!(bcast(a.lane(0), me, 2, 2, 1, 42, &mut 0), 42);
        };
        let ts: Vec<_> = (1..2)
            .map(|me| {
                let h = h.clone();
                thread::spawn(move || run(h, me))
            })
            .collect();
        run(h, 0);
        for t in ts {
            t.join().unwrap();
        }
    });
    EX.report();
}

/// Two members, three broadcasts from member 0: the third reuses the first's bank while member 1
/// may still be reading it, unless the protocol holds member 0 back (loom reports a write not
/// ordered after that read); each broadcast delivers its own value.
#[test]
fn b_bank_reuse_two_members() {
    static EX: Executions = Executions("b_bank_reuse_two_members", std::sync::atomic::AtomicUsize::new(0));
    model(3).check(|| {
        EX.hit();
        let h = Arc::new(HeapArea::new(2, 2, 1));
        h.get().claim(2).unwrap();
        let reader = {
            let h = h.clone();
            thread::spawn(move || {
                let a = h.get();
                for s in 1..=3u64 {
                    assert_eq!(bcast(a.lane(0), 1, 2, s, 0, s as u8 * 10, &mut 0), s as u8 * 10);
                }
            })
        };
        let a = h.get();
        // The root keeps its memory of the reader's progress across the three, as the C ABI does.
        let mut floor = 0;
        for s in 1..=3u64 {
            bcast(a.lane(0), 0, 2, s, 0, s as u8 * 10, &mut floor);
        }
        reader.join().unwrap();
    });
    EX.report();
}

/// A team of two uses the area once and releases it; the claimer of the next team (a team of
/// one) waits for it to be free, claims it and writes the bank the old team's reader read: the
/// releases and the claim order that write after the read, and the claim finds the sequence
/// words zeroed.
#[test]
fn c_area_handed_to_the_next_team() {
    static EX: Executions = Executions("c_area_handed_to_the_next_team", std::sync::atomic::AtomicUsize::new(0));
    model(2).check(|| {
        EX.hit();
        let h = Arc::new(HeapArea::new(2, 2, 1));
        let stamp = h.get().claim(2).unwrap();
        let a = h.get();
        // Old member 0 broadcasts and releases at once (its part is over).
        assert_eq!(bcast(a.lane(0), 0, 2, 1, 0, 7, &mut 0), 7);
        a.release(stamp).unwrap();
        let reader = {
            let h = h.clone();
            thread::spawn(move || {
                let a = h.get();
                assert_eq!(bcast(a.lane(0), 1, 2, 1, 0, 7, &mut 0), 7);
                a.release(stamp).unwrap();
            })
        };
        // The next team's claimer, on the same thread as old member 0.
        let next = loop {
            match a.claim(1) {
                Some(s) => break s,
                None => thread::yield_now(),
            }
        };
        assert_ne!(next, stamp);
        assert!(!a.lane(0).reached(1, 1), "the claim zeroed the old member's word");
        assert_eq!(bcast(a.lane(0), 0, 1, 1, 0, 9, &mut 0), 9);
        reader.join().unwrap();
    });
    EX.report();
}
