//! loom models of the NEMESIS MPSC queue, on the code that ships (`nemesis_shm::queue`).
#![cfg(loom)]

use loom::sync::Arc;
use loom::thread;
use nemesis_loom_tests::{Deaths, OneQueue, builder};
use nemesis_shm::Liveness;

/// Dequeues until `want` cells were seen, yielding while the queue looks empty and, as a port
/// does, looking for an unlinked head only when the death epoch changed.
fn drain(q: &OneQueue, live: &Deaths, want: usize) -> Vec<u32> {
    let mut got = Vec::new();
    let mut epoch = 0;
    while got.len() < want {
        match q.queue().dequeue(live).unwrap() {
            Some(c) => got.push(c.handle()),
            None => {
                let now = live.death_epoch();
                if now != epoch {
                    epoch = now;
                    q.queue().repair_unlinked_head(live).unwrap();
                } else {
                    thread::yield_now();
                }
            }
        }
    }
    got
}

/// Checks per-producer FIFO, no loss, no duplicate: producer p enqueued `cells[p]` in order.
fn check_order(got: &[u32], cells: &[Vec<u32>]) {
    let mut all: Vec<u32> = cells.concat();
    let mut seen = got.to_vec();
    all.sort_unstable();
    seen.sort_unstable();
    assert_eq!(seen, all, "every cell exactly once");
    for mine in cells {
        let order: Vec<u32> = got.iter().copied().filter(|c| mine.contains(c)).collect();
        assert_eq!(&order, mine, "per-producer FIFO");
    }
}

/// (a) Three producers, one consumer, including the dequeue race where the emptying CAS fails
/// and the consumer waits for `next`.
#[test]
fn a_three_producers_one_consumer() {
    static EX: nemesis_loom_tests::Executions =
        nemesis_loom_tests::Executions("a_three_producers_one_consumer", std::sync::atomic::AtomicUsize::new(0));
    builder(2).check(|| {
        EX.hit();
        let q = Arc::new(OneQueue::new(3));
        let live = Arc::new(Deaths::new(4));
        let producers: Vec<_> = (1..=3u32)
            .map(|c| {
                let q = q.clone();
                thread::spawn(move || q.queue().enqueue(q.cell(c), c as u16, 0).unwrap())
            })
            .collect();
        let got = drain(&q, &live, 3);
        for p in producers {
            p.join().unwrap();
        }
        check_order(&got, &[vec![1], vec![2], vec![3]]);
        assert_eq!(q.queue().dequeue(&*live).unwrap().map(|c| c.handle()), None);
    });
    EX.report();
}

/// (a) Two producers of two cells each: per-producer FIFO through CAS retries.
#[test]
fn a_two_producers_two_cells_each() {
    static EX: nemesis_loom_tests::Executions =
        nemesis_loom_tests::Executions("a_two_producers_two_cells_each", std::sync::atomic::AtomicUsize::new(0));
    builder(2).check(|| {
        EX.hit();
        let q = Arc::new(OneQueue::new(4));
        let live = Arc::new(Deaths::new(3));
        let producers: Vec<_> = [[1u32, 2], [3, 4]]
            .into_iter()
            .enumerate()
            .map(|(p, cells)| {
                let q = q.clone();
                thread::spawn(move || {
                    for c in cells {
                        q.queue().enqueue(q.cell(c), p as u16 + 1, 0).unwrap();
                    }
                })
            })
            .collect();
        let got = drain(&q, &live, 4);
        for p in producers {
            p.join().unwrap();
        }
        check_order(&got, &[vec![1, 2], vec![3, 4]]);
    });
    EX.report();
}

/// (b) Shadow-head transitions: the consumer empties the queue while a producer refills it; the
/// cell published through `head` after the emptying CAS is never lost, and the shadow is empty at
/// the end.
#[test]
fn b_shadow_head_empty_nonempty_empty() {
    static EX: nemesis_loom_tests::Executions =
        nemesis_loom_tests::Executions("b_shadow_head_empty_nonempty_empty", std::sync::atomic::AtomicUsize::new(0));
    builder(3).check(|| {
        EX.hit();
        let q = Arc::new(OneQueue::new(3));
        let live = Arc::new(Deaths::new(2));
        let p = {
            let q = q.clone();
            thread::spawn(move || {
                q.queue().enqueue(q.cell(1), 1, 0).unwrap();
                thread::yield_now();
                q.queue().enqueue(q.cell(2), 1, 0).unwrap();
                q.queue().enqueue(q.cell(3), 1, 0).unwrap();
            })
        };
        let got = drain(&q, &live, 3);
        p.join().unwrap();
        assert_eq!(got, vec![1, 2, 3]);
        assert!(q.queue().empty_gen().0, "empty again, through the shadow");
        q.queue().enqueue(q.cell(1), 1, 0).unwrap();
        assert_eq!(q.queue().dequeue(&*live).unwrap().map(|c| c.handle()), Some(1));
    });
    EX.report();
}

/// (e) A producer stops forever between its swap and its link. The consumer links its cell once
/// it is known dead: nothing the other producer enqueued is lost or duplicated, order is kept.
#[test]
fn e_producer_dies_between_swap_and_link() {
    static EX: nemesis_loom_tests::Executions =
        nemesis_loom_tests::Executions("e_producer_dies_between_swap_and_link", std::sync::atomic::AtomicUsize::new(0));
    builder(3).check(|| {
        EX.hit();
        let q = Arc::new(OneQueue::new(3));
        let live = Arc::new(Deaths::new(3));
        let dying = {
            let (q, live) = (q.clone(), live.clone());
            thread::spawn(move || {
                q.queue().swap_in(q.cell(1), 1, 0).unwrap().abandon();
                live.kill(1);
            })
        };
        let other = {
            let q = q.clone();
            thread::spawn(move || {
                q.queue().enqueue(q.cell(2), 2, 0).unwrap();
                q.queue().enqueue(q.cell(3), 2, 0).unwrap();
            })
        };
        let got = drain(&q, &live, 3);
        dying.join().unwrap();
        other.join().unwrap();
        check_order(&got, &[vec![1], vec![2, 3]]);
        assert_eq!(q.queue().dequeue(&*live).unwrap().map(|c| c.handle()), None);
    });
    EX.report();
}

/// (f) A producer stops forever just before its swap (its records written). The consumer must not
/// link its cell: it sees exactly the other producer's cells.
#[test]
fn f_producer_dies_before_swap() {
    static EX: nemesis_loom_tests::Executions =
        nemesis_loom_tests::Executions("f_producer_dies_before_swap", std::sync::atomic::AtomicUsize::new(0));
    builder(3).check(|| {
        EX.hit();
        let q = Arc::new(OneQueue::new(3));
        let live = Arc::new(Deaths::new(3));
        let dying = {
            let (q, live) = (q.clone(), live.clone());
            thread::spawn(move || {
                q.queue().prepare_only(q.cell(1), 1);
                live.kill(1);
            })
        };
        let other = {
            let q = q.clone();
            thread::spawn(move || {
                q.queue().enqueue(q.cell(2), 2, 0).unwrap();
                q.queue().enqueue(q.cell(3), 2, 0).unwrap();
            })
        };
        let got = drain(&q, &live, 2);
        dying.join().unwrap();
        other.join().unwrap();
        assert_eq!(got, vec![2, 3]);
        assert!(!q.queue().repair_unlinked_head(&*live).unwrap());
        assert_eq!(
            q.queue().dequeue(&*live).unwrap().map(|c| c.handle()),
            None,
            "the dead producer's cell is not linked"
        );
        assert!(!q.queue().holds_dead_enqueue(1).unwrap());
    });
    EX.report();
}

/// A consumer dies at any point of a dequeue; the drain that follows returns every cell still in
/// the queue exactly once, including cells enqueued concurrently before the seal.
#[test]
fn consumer_dies_then_drain() {
    static EX: nemesis_loom_tests::Executions =
        nemesis_loom_tests::Executions("consumer_dies_then_drain", std::sync::atomic::AtomicUsize::new(0));
    builder(3).check(|| {
        EX.hit();
        let q = Arc::new(OneQueue::new(3));
        let live = Arc::new(Deaths::new(3));
        q.queue().enqueue(q.cell(1), 1, 0).unwrap();
        let consumer = {
            let (q, live) = (q.clone(), live.clone());
            thread::spawn(move || {
                let taken = q.queue().dequeue(&*live).unwrap().map(|c| c.handle());
                live.kill(0);
                taken
            })
        };
        let producer = {
            let q = q.clone();
            thread::spawn(move || q.queue().enqueue(q.cell(2), 2, 0).is_ok())
        };
        let taken = consumer.join().unwrap();
        let enqueued = producer.join().unwrap();
        q.queue().seal();
        assert!(q.queue().enqueue(q.cell(3), 2, 0).is_err(), "sealed");
        let mut drained = Vec::new();
        while let Some(c) = q.queue().drain_next(&*live).unwrap() {
            drained.push(c.handle());
        }
        let mut all: Vec<u32> = taken.into_iter().chain(drained).collect();
        all.sort_unstable();
        let want: Vec<u32> = if enqueued { vec![1, 2] } else { vec![1] };
        assert_eq!(all, want);
    });
    EX.report();
}
