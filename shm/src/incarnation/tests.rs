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
