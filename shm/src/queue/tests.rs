use super::*;
use crate::layout::Params;
use crate::node::{HeapNode, Node};

fn node(ranks: u16, cells: u32) -> HeapNode {
    HeapNode::new(ranks, Params { cells_per_rank: cells, fastboxes_per_rank: 0, ..Params::DEFAULT }).unwrap()
}

/// Takes `n` cells out of rank `r`'s free queue.
fn take(node: &HeapNode, r: u16, n: usize) -> Vec<CellRef<'_>> {
    let fq = node.free_queue(r);
    (0..n).map(|_| fq.dequeue(node).unwrap().expect("a free cell")).collect()
}

#[test]
fn fifo_through_shadow_and_empty_transitions() {
    let n = node(2, 8);
    let q = n.recv_queue(1);
    let cells = take(&n, 0, 8);
    assert_eq!(q.dequeue(&n).unwrap(), None);
    for round in 0..3 {
        for &c in &cells[..5] {
            q.enqueue(c, 0, 1).unwrap();
        }
        assert_eq!(q.count_linked().unwrap(), 5, "round {round}");
        for &c in &cells[..5] {
            assert_eq!(q.dequeue(&n).unwrap(), Some(c));
        }
        assert_eq!(q.dequeue(&n).unwrap(), None);
        assert!(q.empty_gen().0);
    }
    // Interleaved: enqueue while the consumer holds the shadow.
    q.enqueue(cells[0], 0, 1).unwrap();
    assert_eq!(q.peek().unwrap(), Some(cells[0]));
    q.enqueue(cells[1], 0, 1).unwrap();
    q.pop(cells[0], &n).unwrap();
    assert_eq!(q.dequeue(&n).unwrap(), Some(cells[1]));
    assert_eq!(q.dequeue(&n).unwrap(), None);
}

#[test]
fn recycled_cell_next_is_cleared() {
    let n = node(2, 4);
    let q = n.recv_queue(1);
    let c = take(&n, 0, 2);
    q.enqueue(c[0], 0, 1).unwrap();
    q.enqueue(c[1], 0, 1).unwrap();
    // Stale link left in c[0] from its previous trip.
    assert_eq!(q.dequeue(&n).unwrap(), Some(c[0]));
    assert_eq!(q.dequeue(&n).unwrap(), Some(c[1]));
    q.enqueue(c[0], 0, 1).unwrap();
    assert_eq!(q.dequeue(&n).unwrap(), Some(c[0]));
    assert_eq!(q.dequeue(&n).unwrap(), None, "a stale next would resurrect c[1]");
}

#[test]
fn dead_producer_between_swap_and_link_is_repaired() {
    let n = node(3, 4);
    let q = n.recv_queue(2);
    let a = take(&n, 0, 2);
    let b = take(&n, 1, 2);
    q.enqueue(a[0], 0, 2).unwrap();
    q.swap_in(b[0], 1, 2).unwrap().abandon(); // rank 1 dies here
    q.enqueue(a[1], 0, 2).unwrap(); // linked behind b[0]
    n.mark_gone(1, 9).unwrap();
    assert_eq!(q.dequeue(&n).unwrap(), Some(a[0]));
    assert_eq!(q.dequeue(&n).unwrap(), Some(b[0]), "the dead producer's swapped cell is linked in");
    assert_eq!(q.dequeue(&n).unwrap(), Some(a[1]));
    assert_eq!(q.dequeue(&n).unwrap(), None);
}

#[test]
fn dead_producer_into_empty_queue_is_repaired() {
    let n = node(3, 4);
    let q = n.recv_queue(2);
    let a = take(&n, 0, 1);
    let b = take(&n, 1, 1);
    q.swap_in(b[0], 1, 2).unwrap().abandon(); // swapped into the empty tail, head never stored
    q.enqueue(a[0], 0, 2).unwrap();
    assert_eq!(q.dequeue(&n).unwrap(), None, "nothing visible before the repair");
    assert!(!q.repair_unlinked_head(&n).unwrap(), "the producer is alive: wait");
    n.mark_gone(1, 9).unwrap();
    assert!(q.repair_unlinked_head(&n).unwrap());
    assert_eq!(q.dequeue(&n).unwrap(), Some(b[0]));
    assert_eq!(q.dequeue(&n).unwrap(), Some(a[0]));
    assert_eq!(q.dequeue(&n).unwrap(), None);
}

#[test]
fn producer_dead_before_swap_is_not_linked() {
    let n = node(3, 4);
    let q = n.recv_queue(2);
    let a = take(&n, 0, 2);
    let b = take(&n, 1, 1);
    q.enqueue(a[0], 0, 2).unwrap();
    // Rank 1 wrote its records for an attempt on the current tail, then died before the CAS.
    let link = b[0].link();
    link.enq_prev.store(q.tail_now(), Relaxed);
    link.custody.store(custody(q.id(), 1), Relaxed);
    q.enqueue(a[1], 0, 2).unwrap();
    n.mark_gone(1, 9).unwrap();
    assert!(!q.holds_dead_enqueue(b[0].handle()).unwrap());
    assert_eq!(q.dequeue(&n).unwrap(), Some(a[0]));
    assert_eq!(q.dequeue(&n).unwrap(), Some(a[1]));
    assert_eq!(q.dequeue(&n).unwrap(), None);
    assert!(!q.repair_unlinked_head(&n).unwrap());
}

#[test]
fn sealed_queue_refuses_and_drains_in_order() {
    let n = node(3, 4);
    let q = n.recv_queue(2);
    let a = take(&n, 0, 3);
    for &c in &a {
        q.enqueue(c, 0, 2).unwrap();
    }
    assert_eq!(q.peek().unwrap(), Some(a[0])); // the consumer took a[0] into its shadow...
    n.mark_gone(2, 9).unwrap(); // ...and died
    q.seal();
    let b = take(&n, 1, 1);
    assert!(matches!(q.enqueue(b[0], 1, 2), Err(Error::PeerDead { rank: 2 })));
    let drained: Vec<_> = std::iter::from_fn(|| q.drain_next(&n).unwrap()).collect();
    assert_eq!(drained, a);
    assert_eq!(q.drain_next(&n).unwrap(), None);
}

#[test]
fn drain_after_consumer_died_inside_peek() {
    let n = node(2, 4);
    let q = n.recv_queue(1);
    let a = take(&n, 0, 2);
    q.enqueue(a[0], 0, 1).unwrap();
    q.enqueue(a[1], 0, 1).unwrap();
    // Died between `shadow = head` and `head = NULL`.
    q.shared.shadow.store(a[0].handle(), Relaxed);
    q.seal();
    let drained: Vec<_> = std::iter::from_fn(|| q.drain_next(&n).unwrap()).collect();
    assert_eq!(drained, a, "head == shadow must not be taken twice");
}

#[test]
fn drain_after_consumer_died_after_emptying_cas() {
    let n = node(2, 4);
    let q = n.recv_queue(1);
    let a = take(&n, 0, 2);
    q.enqueue(a[0], 0, 1).unwrap();
    assert_eq!(q.peek().unwrap(), Some(a[0]));
    // The emptying CAS succeeded, then the consumer died before clearing the shadow.
    let v = own_value(a[0].link(), a[0].handle());
    q.shared.tail.store(tail_value(tail_gen(v) + 1, NULL), Relaxed);
    // A producer then enqueued into the (now empty) queue.
    q.enqueue(a[1], 0, 1).unwrap();
    q.seal();
    let drained: Vec<_> = std::iter::from_fn(|| q.drain_next(&n).unwrap()).collect();
    assert_eq!(drained, vec![a[1]], "a[0] was already out of the queue");
}

#[test]
fn a_tail_nobody_swapped_in_is_corrupt_not_a_wait() {
    // Found by fuzzing (`shm_port`): a write moved a queue's tail to a cell that never
    // replaced the last one, and popping that last cell waited forever for its link.
    let n = node(2, 4);
    let q = n.recv_queue(1);
    let a = take(&n, 0, 2);
    q.enqueue(a[0], 0, 1).unwrap();
    let first = q.peek().unwrap().unwrap();
    q.shared.tail.store(tail_value(77, a[1].handle()), Relaxed);
    assert!(matches!(q.pop(first, &n), Err(Error::Corrupt { what: "queue tail (no cell replaced it)", .. })));
}

#[test]
fn corrupt_links_are_errors() {
    let n = node(2, 4);
    let q = n.recv_queue(1);
    let a = take(&n, 0, 2);
    q.enqueue(a[0], 0, 1).unwrap();
    q.enqueue(a[1], 0, 1).unwrap();
    a[0].link().next.store(9999, Relaxed);
    assert_eq!(q.peek().unwrap(), Some(a[0]));
    q.pop(a[0], &n).unwrap(); // stored in the shadow, not used...
    assert!(matches!(q.peek(), Err(Error::Corrupt { .. })), "...until the next peek checks it");
    q.shared.shadow.store(u32::MAX, Relaxed);
    assert!(matches!(q.peek(), Err(Error::Corrupt { .. })));
    q.shared.shadow.store(NULL, Relaxed);
    q.shared.head.store(77, Relaxed);
    assert!(matches!(q.peek(), Err(Error::Corrupt { .. })));
    assert!(matches!(n.arena().cell(0, "handle 0"), Err(Error::Corrupt { .. })));
    q.shared.tail.store(tail_value(5, 12345), Relaxed);
    assert!(matches!(q.enqueue(a[0], 0, 1), Err(Error::Corrupt { .. })));
}
