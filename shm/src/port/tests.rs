use super::*;
use crate::cell::{FT_PIGGYBACK_BYTES, NULL, PiggybackBytes, custody, flags};
use crate::layout::Params;
use crate::node::{HeapNode, free_queue_id};
use crate::sync::Ordering::Relaxed;

fn cfg() -> PortConfig {
    PortConfig { fastbox_after: 4, scan_every: 4, check_every: 1 }
}

fn small() -> Params {
    Params {
        cell_size: 256,
        cells_per_rank: 8,
        fastbox_slots: 4,
        fastbox_slot_size: 128,
        fastboxes_per_rank: 2,
        ..Params::DEFAULT
    }
}

fn payload(seq: u32, len: usize) -> Vec<u8> {
    (0..len).map(|i| (i as u32).wrapping_mul(31).wrapping_add(seq) as u8).collect()
}

/// Polls one whole message from `port`, reassembling fragments; releases as it goes.
fn recv_msg(port: &mut Port<'_, HeapNode>, expected: &[u16]) -> Option<(u16, MsgHeader, Vec<u8>, bool)> {
    let first = port.poll(expected).unwrap()?;
    let mut buf = vec![0u8; first.header().len as usize];
    let (src, hdr, fb) = (first.src, first.header(), first.via_fastbox());
    let mut inc = first;
    loop {
        inc.copy_to(&mut buf[inc.offset()..]);
        let last = inc.is_last();
        port.release(inc).unwrap();
        if last {
            return Some((src, hdr, buf, fb));
        }
        inc = loop {
            if let Some(i) = port.poll(expected).unwrap() {
                break i;
            }
        };
        assert_eq!((inc.src, inc.header().seq), (src, hdr.seq), "fragments of one message are consecutive");
    }
}

/// A netmod's arrivals: cells set aside from rank 0's pool, filled and delivered as a
/// three-fragment message from remote rank 77 between local messages; they come out with
/// `src == REMOTE`, in queue order, and return to the netmod free queue when released.
#[test]
fn netmod_arrivals_come_through_the_receive_queue() {
    let node = HeapNode::new(2, small()).unwrap();
    let mut a = Port::new(&node, 0, cfg()).unwrap();
    let mut b = Port::new(&node, 1, PortConfig { fastbox_after: 1000, ..cfg() }).unwrap();
    assert_eq!(a.netmod_reserve(3).unwrap(), 3);
    let hdr = MsgHeader { src: 77, dst: 0, tag: 5, context: 1, len: 600, ..MsgHeader::default() };
    let cap = a.netmod_cell_payload(&hdr);
    let msg = payload(9, 600);
    assert!(matches!(b.send(0, &MsgHeader { tag: 1, ..MsgHeader::default() }, None, &[1; 10]).unwrap(), Sent::Done));
    for (k, chunk) in msg.chunks(cap).enumerate() {
        let mut c = a.netmod_cell().unwrap().expect("a reserved cell");
        c.after_header()[..chunk.len()].copy_from_slice(chunk);
        a.netmod_deliver(c, &hdr, k as u16).unwrap();
    }
    assert!(a.netmod_cell().unwrap().is_none(), "all three in use");
    assert!(matches!(b.send(0, &MsgHeader { tag: 2, ..MsgHeader::default() }, None, &[2; 10]).unwrap(), Sent::Done));
    let (src, h, _, _) = recv_msg(&mut a, &[]).unwrap();
    assert_eq!((src, h.tag), (1, 1));
    let (src, h, got, _) = recv_msg(&mut a, &[]).unwrap();
    assert_eq!((src, h.src, h.tag, h.context, h.len), (REMOTE, 77, 5, 1, 600));
    assert_eq!(got, msg);
    let (src, h, _, _) = recv_msg(&mut a, &[]).unwrap();
    assert_eq!((src, h.tag), (1, 2));
    for _ in 0..3 {
        let c = a.netmod_cell().unwrap().expect("released back to the netmod free queue");
        a.netmod_deliver(c, &hdr, 0).unwrap();
    }
    // A peer cannot pass its own cell off as a network arrival.
    let forged = MsgHeader { flags: flags::NETMOD, ..MsgHeader::default() };
    assert!(matches!(b.send(0, &forged, None, &[0; 100]).unwrap(), Sent::Done));
    let mut errors = 0;
    for _ in 0..10 {
        match a.poll(&[]) {
            Ok(Some(i)) => a.release(i).unwrap(),
            Ok(None) => {}
            Err(e) => {
                assert!(matches!(e, Error::Corrupt { .. }), "{e}");
                errors += 1;
                break;
            }
        }
    }
    assert_eq!(errors, 1);
}

/// The piggyback of message `i`, no byte zero.
fn pb(i: u32) -> PiggybackBytes {
    let mut b = [0u8; FT_PIGGYBACK_BYTES];
    for (k, x) in b.iter_mut().enumerate() {
        *x = (i as u8).wrapping_mul(7).wrapping_add(k as u8 + 1) | 1;
    }
    b
}

/// The stamp flag message `i` is sent with: [`flags::FT_STAMP`] (its stamp travels), the short
/// stamp ([`flags::FT_STAMP_SHORT`]) or none, in turn.
fn stamp_flag(i: u32) -> u8 {
    [0, flags::FT_STAMP, 0, flags::FT_STAMP_SHORT][i as usize % 4]
}

/// The piggyback message `i` arrives with: [`pb`], zero past the bytes its flags carry
/// ([`crate::cell::ft_carried`]: the short rooms), whatever the bytes given.
fn arrived(i: u32) -> PiggybackBytes {
    let mut b = pb(i);
    b[crate::cell::ft_carried(flags::FT_PIGGYBACK | stamp_flag(i))..].fill(0);
    b
}

/// Fault-tolerance piggybacks on every path: cells before the fastbox claim, the fastbox (the
/// inline send path once claimed), single and multi-cell messages, sends that wait for cells,
/// mixed with messages without one; each arrives with its own piggyback (on every fragment) and
/// an intact payload.
#[test]
fn piggybacks_travel_on_every_path() {
    let node = HeapNode::new(2, small()).unwrap();
    let mut a = Port::new(&node, 0, cfg()).unwrap();
    let mut b = Port::new(&node, 1, cfg()).unwrap();
    // Fastbox slots carry 128 - 32 = 96 bytes, 64 with a piggyback; cells 256 - 32 - 32 = 192.
    let sizes = [0usize, 8, 63, 64, 95, 150, 192, 193, 600, 1500];
    let mut via = [0usize; 2];
    let mut pending: Vec<(PendingSend, Vec<u8>)> = Vec::new();
    let mut next = 0u32;
    for i in 0..60u32 {
        let p = payload(i, sizes[i as usize % sizes.len()]);
        let with = i % 3 != 2;
        let ft = pb(i);
        let flags = if with { stamp_flag(i) } else { 0 };
        let hdr = MsgHeader { tag: i as i32, flags, ..MsgHeader::default() };
        match a.send(1, &hdr, with.then_some(&ft), &p).unwrap() {
            Sent::Done => {}
            Sent::Pending(ps) => {
                assert_eq!(ps.piggyback().is_some(), with);
                pending.push((ps, p));
            }
        }
        // Receive everything sent so far, resuming what waits for cells.
        loop {
            pending.retain_mut(|(ps, p)| !a.resume(ps, p).unwrap());
            let Some(first) = b.poll(&[0]).unwrap() else {
                if pending.is_empty() {
                    break;
                }
                continue;
            };
            let tag = first.tag() as u32;
            assert_eq!(tag, next, "order");
            let want = payload(tag, sizes[tag as usize % sizes.len()]);
            let carried = tag % 3 != 2;
            let mut got = vec![0u8; first.len()];
            let mut inc = first;
            via[usize::from(inc.via_fastbox())] += 1;
            loop {
                assert_eq!(inc.piggyback(), carried.then(|| arrived(tag)), "message {tag}, offset {}", inc.offset());
                let stamp_flags = u16::from(flags::FT_STAMP | flags::FT_STAMP_SHORT) << 8;
                let want = if carried { u16::from(stamp_flag(tag)) << 8 } else { 0 };
                assert_eq!(inc.kind_flags() & stamp_flags, want, "message {tag}: stamp flags");
                inc.copy_to(&mut got[inc.offset()..]);
                let last = inc.is_last();
                b.release(inc).unwrap();
                if last {
                    break;
                }
                inc = loop {
                    pending.retain_mut(|(ps, p)| !a.resume(ps, p).unwrap());
                    if let Some(i) = b.poll(&[0]).unwrap() {
                        break i;
                    }
                };
            }
            assert_eq!(got, want, "payload of message {tag}");
            next += 1;
        }
    }
    assert_eq!(next, 60);
    assert!(via[0] > 0 && via[1] > 0, "both paths were taken: {via:?}");
    assert_eq!(a.free_cells().unwrap(), 8, "every cell came back");
}

/// A flagged fastbox message whose length leaves no room for the piggyback inside the slot is
/// refused.
#[test]
fn piggyback_room_is_bounds_checked() {
    let node = HeapNode::new(2, small()).unwrap();
    let mut a = Port::new(&node, 0, cfg()).unwrap();
    let mut b = Port::new(&node, 1, cfg()).unwrap();
    for i in 0..5 {
        let _ = a.send(1, &MsgHeader::default(), Some(&pb(i)), &[i as u8]).unwrap();
    }
    for _ in 0..4 {
        recv_msg(&mut b, &[0]).unwrap();
    }
    // SAFETY: box 0 of rank 1 exists.
    let fb = unsafe { node.fastbox(1, 0) };
    // 90 bytes fit a slot (96) without the room, not with it (64).
    // SAFETY: we write the header's `len` field of slot 1, inside the box.
    unsafe { (fb.bodies.add(fb.body_stride + 16) as *mut u32).write_unaligned(90) };
    assert!(matches!(b.poll(&[0]), Err(Error::Corrupt { .. })));
}

#[test]
fn order_is_kept_across_fastbox_and_queue() {
    let node = HeapNode::new(2, small()).unwrap();
    let mut a = Port::new(&node, 0, cfg()).unwrap();
    let mut b = Port::new(&node, 1, cfg()).unwrap();
    // 40 messages, never polled in between: the 4-slot box fills and the rest go to cells,
    // interleaving the two paths. Sizes vary across the fastbox limit.
    let mut sent = Vec::new();
    let mut next = 0;
    let mut pending: Vec<(PendingSend, Vec<u8>)> = Vec::new();
    for i in 0..40u32 {
        let p = payload(i, [0, 8, 50, 88, 120, 300][i as usize % 6]);
        let hdr = MsgHeader { tag: i as i32, context: 3, ..MsgHeader::default() };
        match a.send(1, &hdr, None, &p).unwrap() {
            Sent::Done => {}
            Sent::Pending(ps) => pending.push((ps, p.clone())),
        }
        sent.push(p);
        // Keep cells flowing so sends do not stall forever.
        if i % 3 == 2 {
            let (_, h, got, _) = recv_msg(&mut b, &[0]).unwrap();
            assert_eq!(got, sent[h.tag as usize]);
            assert_eq!(h.tag as usize, next);
            next += 1;
        }
        pending.retain_mut(|(ps, p)| !a.resume(ps, p).unwrap());
    }
    let mut fastboxed = 0;
    while next < 40 {
        pending.retain_mut(|(ps, p)| !a.resume(ps, p).unwrap());
        if let Some((src, h, got, fb)) = recv_msg(&mut b, &[0]) {
            assert_eq!(src, 0);
            assert_eq!(h.tag, next as i32, "non-overtaking");
            assert_eq!(h.context, 3);
            assert_eq!(got, sent[next]);
            fastboxed += usize::from(fb);
            next += 1;
        }
    }
    assert!(fastboxed > 0, "some messages used the fastbox");
    assert_eq!(b.poll(&[0]).unwrap().map(|i| i.tag()), None);
}

#[test]
fn long_messages_span_cells_and_wait_for_cells() {
    let node = HeapNode::new(2, Params { fastboxes_per_rank: 0, ..small() }).unwrap();
    let mut a = Port::new(&node, 0, cfg()).unwrap();
    let mut b = Port::new(&node, 1, cfg()).unwrap();
    let big = payload(1, 3000); // 15 cells of 208 bytes; the pool has 8
    let Sent::Pending(mut ps) = a.send(1, &MsgHeader::default(), None, &big).unwrap() else {
        panic!("8 cells cannot carry 3000 bytes")
    };
    let small_msg = payload(2, 10);
    let Sent::Pending(mut ps2) = a.send(1, &MsgHeader { tag: 1, ..MsgHeader::default() }, None, &small_msg).unwrap()
    else {
        panic!("a later message waits behind a pending one")
    };
    assert!(!a.resume(&mut ps2, &small_msg).unwrap(), "no progress before the earlier message");
    let mut got = vec![0u8; big.len()];
    let mut done = false;
    let mut done2 = false;
    let mut second = None;
    while second.is_none() {
        if !done {
            done = a.resume(&mut ps, &big).unwrap();
        } else if !done2 {
            done2 = a.resume(&mut ps2, &small_msg).unwrap();
        }
        if let Some(inc) = b.poll(&[0]).unwrap() {
            if inc.header().tag == 0 {
                inc.copy_to(&mut got[inc.offset()..]);
            } else {
                let mut s = vec![0u8; inc.frag_len()];
                inc.copy_to(&mut s);
                second = Some(s);
            }
            b.release(inc).unwrap();
        }
    }
    assert_eq!(got, big);
    assert_eq!(second.unwrap(), small_msg);
    assert_eq!(a.free_cells().unwrap(), 8, "every cell came back");
}

#[test]
fn zero_byte_messages_and_errors() {
    let node = HeapNode::new(2, small()).unwrap();
    let mut a = Port::new(&node, 0, cfg()).unwrap();
    let mut b = Port::new(&node, 1, cfg()).unwrap();
    for _ in 0..10 {
        assert!(matches!(a.send(1, &MsgHeader::default(), None, &[]).unwrap(), Sent::Done));
        let (_, h, got, _) = recv_msg(&mut b, &[0]).unwrap();
        assert_eq!((h.len, got.len()), (0, 0));
    }
    assert!(matches!(a.send(2, &MsgHeader::default(), None, &[]), Err(Error::BadRank { rank: 2, .. })));
    let huge = vec![0u8; a.max_message() + 1];
    assert!(matches!(a.send(1, &MsgHeader::default(), None, &huge), Err(Error::TooLarge { .. })));
    assert!(matches!(b.poll(&[5]), Err(Error::BadRank { .. })));
}

#[test]
fn any_source_finds_fastbox_messages() {
    let node = HeapNode::new(3, small()).unwrap();
    let mut a = Port::new(&node, 0, cfg()).unwrap();
    let mut c = Port::new(&node, 2, cfg()).unwrap();
    let mut b = Port::new(&node, 1, cfg()).unwrap();
    for i in 0..12u32 {
        let _ = a.send(1, &MsgHeader { tag: i as i32, ..MsgHeader::default() }, None, &payload(i, 8)).unwrap();
        let _ = c.send(1, &MsgHeader { tag: 100 + i as i32, ..MsgHeader::default() }, None, &payload(i, 8)).unwrap();
    }
    let mut from = [0u32; 3];
    let mut fb = 0;
    for _ in 0..1000 {
        if let Some((src, h, got, via)) = recv_msg(&mut b, &[]) {
            let i = (h.tag % 100) as u32;
            assert_eq!(i, from[src as usize], "per-source order");
            assert_eq!(got, payload(i, 8));
            from[src as usize] += 1;
            fb += usize::from(via);
        }
    }
    assert_eq!(from, [12, 0, 12]);
    assert!(fb > 0, "ANY_SOURCE polling scanned the fastboxes");
}

#[test]
fn dead_receiver_cells_come_back() {
    let node = HeapNode::new(3, Params { fastboxes_per_rank: 0, ..small() }).unwrap();
    let mut a = Port::new(&node, 0, cfg()).unwrap();
    let mut b = Port::new(&node, 1, cfg()).unwrap();
    let mut c = Port::new(&node, 2, cfg()).unwrap();
    for i in 0..5 {
        assert!(matches!(a.send(1, &MsgHeader::default(), None, &payload(i, 100)).unwrap(), Sent::Done));
        assert!(matches!(c.send(1, &MsgHeader::default(), None, &payload(i, 100)).unwrap(), Sent::Done));
    }
    let held = b.poll(&[]).unwrap().unwrap(); // b takes a cell out, never returns it...
    assert!(!held.via_fastbox());
    node.mark_gone(1, 9).unwrap(); // ...and dies
    assert_eq!(a.free_cells().unwrap(), 3);
    a.check_peers().unwrap();
    c.check_peers().unwrap();
    assert!(a.take_events().contains(&PeerEvent::Gone { rank: 1 }));
    assert_eq!(a.free_cells().unwrap(), 8, "a got back the cells in b's queue and the one b held");
    assert_eq!(c.free_cells().unwrap(), 8);
    assert!(matches!(a.send(1, &MsgHeader::default(), None, &[1]), Err(Error::PeerDead { rank: 1 })));
    // a can still talk to c.
    assert!(matches!(a.send(2, &MsgHeader::default(), None, &[1]).unwrap(), Sent::Done));
    assert!(recv_msg(&mut c, &[0]).is_some());
}

#[test]
fn a_peer_gone_before_the_port_was_made_is_learnt() {
    let node = HeapNode::new(3, Params { fastboxes_per_rank: 0, ..small() }).unwrap();
    let mut b = Port::new(&node, 1, cfg()).unwrap();
    assert!(matches!(b.send(0, &MsgHeader { tag: 5, ..MsgHeader::default() }, None, &[7]).unwrap(), Sent::Done));
    drop(b);
    node.mark_gone(1, 9).unwrap(); // sent, died and was reaped before rank 0 got here
    let mut a = Port::new(&node, 0, cfg()).unwrap();
    a.check_peers().unwrap();
    assert_eq!(a.take_events(), vec![PeerEvent::Gone { rank: 1 }]);
    let inc = a.poll(&[1]).unwrap().expect("the dead sender's message is still delivered");
    assert_eq!(inc.header().tag, 5);
    a.release(inc).unwrap();
}

#[test]
fn dead_receiver_while_returning_a_cell() {
    let node = HeapNode::new(2, Params { fastboxes_per_rank: 0, ..small() }).unwrap();
    let mut a = Port::new(&node, 0, cfg()).unwrap();
    let mut b = Port::new(&node, 1, cfg()).unwrap();
    assert!(matches!(a.send(1, &MsgHeader::default(), None, &[7]).unwrap(), Sent::Done));
    let inc = b.poll(&[0]).unwrap().unwrap();
    let cell = inc.cell;
    assert_ne!(cell, NULL, "a cell");
    // b began returning the cell (custody written) and died before its CAS.
    let link = node.arena().link(cell, "t").unwrap();
    link.enq_prev.store(node.free_queue(0).tail_now(), Relaxed);
    link.custody.store(custody(free_queue_id(0), 1), Relaxed);
    node.mark_gone(1, 9).unwrap();
    a.check_peers().unwrap();
    assert_eq!(a.free_cells().unwrap(), 8);
}

#[test]
fn dead_sender_partial_message_is_dropped_and_box_freed() {
    let node = HeapNode::new(2, Params { cells_per_rank: 4, ..small() }).unwrap();
    let mut a = Port::new(&node, 0, cfg()).unwrap();
    let mut b = Port::new(&node, 1, cfg()).unwrap();
    // Enough messages to claim a fastbox; leave two of them unread.
    for i in 0..8 {
        let _ = a.send(1, &MsgHeader { tag: i, ..MsgHeader::default() }, None, &[i as u8]).unwrap();
        if i < 6 {
            recv_msg(&mut b, &[0]).unwrap();
        }
    }
    let big = payload(0, 2000);
    let Sent::Pending(_ps) = a.send(1, &MsgHeader { tag: 99, ..MsgHeader::default() }, None, &big).unwrap() else {
        panic!("4 cells cannot carry 2000 bytes")
    };
    node.mark_gone(0, 9).unwrap(); // a dies with the message half sent
    let mut tags = Vec::new();
    let mut frags = 0;
    let mut events = Vec::new();
    for _ in 0..50 {
        if let Some(inc) = b.poll(&[0]).unwrap() {
            assert!(!events.contains(&PeerEvent::Silent { rank: 0 }), "silent before its last message");
            if inc.header().tag == 99 {
                frags += 1;
            } else {
                tags.push(inc.header().tag);
            }
            b.release(inc).unwrap();
        }
        events.extend(b.take_events());
    }
    assert_eq!(tags, vec![6, 7], "completed messages are delivered");
    assert_eq!(frags, 4, "four fragments arrived");
    assert!(events.contains(&PeerEvent::PartialDropped { rank: 0, seq: 8 }));
    assert!(events.contains(&PeerEvent::Silent { rank: 0 }), "{events:?}");
    // SAFETY: rank 1 and box 0 exist.
    assert!(
        // SAFETY: rank 1 hosts boxes 0 and 1.
        (0..2).all(|bx| unsafe { node.fastbox(1, bx) }.owner().load(Relaxed) == 0),
        "box freed"
    );
}

/// The dead sender's partial message begins with the last cell it enqueued, which the
/// receiver dequeues ahead of a fastbox message and stashes: once that cell is delivered, the
/// message is reported dropped (the queue had passed the sender's last cell already).
#[test]
fn partial_message_in_a_stashed_cell_is_dropped() {
    let node = HeapNode::new(2, Params { cells_per_rank: 2, ..small() }).unwrap();
    let mut a = Port::new(&node, 0, PortConfig { fastbox_after: 2, ..cfg() }).unwrap();
    let mut b = Port::new(&node, 1, cfg()).unwrap();
    // Message 0 in a cell, which b keeps; message 1 in the fastbox; message 2 needs three
    // cells and gets the last one.
    assert!(matches!(a.send(1, &MsgHeader { tag: 0, ..MsgHeader::default() }, None, &[0]).unwrap(), Sent::Done));
    let held = b.poll(&[0]).unwrap().unwrap();
    assert!(matches!(a.send(1, &MsgHeader { tag: 1, ..MsgHeader::default() }, None, &[1]).unwrap(), Sent::Done));
    let big = payload(2, 3 * a.cell_payload());
    let Sent::Pending(_ps) = a.send(1, &MsgHeader { tag: 2, ..MsgHeader::default() }, None, &big).unwrap() else {
        panic!("one cell cannot carry three cells' worth")
    };
    node.mark_gone(0, 9).unwrap();
    b.release(held).unwrap();
    b.check_peers().unwrap(); // the death is seen before the queue is polled: b lags
    let mut got = Vec::new();
    let mut events = b.take_events();
    for _ in 0..10 {
        if let Some(inc) = b.poll(&[]).unwrap() {
            got.push((inc.tag(), inc.offset(), inc.via_fastbox()));
            b.release(inc).unwrap();
        }
        b.check_peers().unwrap();
        events.extend(b.take_events());
    }
    assert_eq!(got, vec![(1, 0, true), (2, 0, false)]);
    assert!(events.contains(&PeerEvent::PartialDropped { rank: 0, seq: 2 }), "{events:?}");
    assert!(events.contains(&PeerEvent::Silent { rank: 0 }), "{events:?}");
}

#[test]
fn one_port_per_rank_and_fragments_stay_with_their_port() {
    let node = HeapNode::new(2, small()).unwrap();
    let mut a = Port::new(&node, 0, cfg()).unwrap();
    let b = Port::new(&node, 1, cfg()).unwrap();
    assert!(matches!(Port::new(&node, 1, cfg()), Err(Error::PortOpen { rank: 1 })));
    drop(b);
    let mut b = Port::new(&node, 1, cfg()).unwrap();
    for i in 0..2u8 {
        let _ = a.send(1, &MsgHeader::default(), None, &[i; 100]).unwrap();
    }
    let first = b.poll(&[0]).unwrap().unwrap();
    // Another rank's port of the same node refuses it: its fastbox counters are not ours.
    assert!(matches!(a.release(first), Err(Error::ForeignFragment)));
    // A later port of the same rank refuses the fragments of an earlier one.
    let second = b.poll(&[0]).unwrap().unwrap();
    drop(b);
    let mut b = Port::new(&node, 1, cfg()).unwrap();
    assert!(matches!(b.release(second), Err(Error::ForeignFragment)));
}

/// With acknowledgements withheld, a sender writes only the slots it knew free, then sends in
/// cells; messages still arrive in order; resumed, the fastbox carries again.
#[test]
fn withheld_acks_send_the_rest_in_cells() {
    let node = HeapNode::new(2, small()).unwrap();
    let mut a = Port::new(&node, 0, PortConfig { fastbox_after: 1, ..cfg() }).unwrap();
    let mut b = Port::new(&node, 1, cfg()).unwrap();
    b.withhold_acks(true);
    let mut via_fastbox = 0;
    for i in 0..12i32 {
        let _ = a.send(1, &MsgHeader { tag: i, ..MsgHeader::default() }, None, &[i as u8]).unwrap();
        let (_, h, got, fb) = recv_msg(&mut b, &[0]).unwrap();
        assert_eq!((h.tag, got[0]), (i, i as u8));
        via_fastbox += usize::from(fb);
    }
    assert_eq!(via_fastbox, 4, "the four slots known free, then cells");
    b.withhold_acks(false);
    let _ = a.send(1, &MsgHeader { tag: 12, ..MsgHeader::default() }, None, &[12]).unwrap();
    assert!(recv_msg(&mut b, &[0]).unwrap().3, "acknowledged again: the fastbox carries");
}

#[test]
fn cell_lengths_beyond_the_largest_message_are_corrupt() {
    let node = HeapNode::new(2, Params { fastboxes_per_rank: 0, ..small() }).unwrap();
    let mut a = Port::new(&node, 0, cfg()).unwrap();
    let mut b = Port::new(&node, 1, cfg()).unwrap();
    assert!(matches!(a.send(1, &MsgHeader::default(), None, &[1; 10]).unwrap(), Sent::Done));
    // The sender rewrites the header's length after enqueuing (a faulty peer).
    let c = node.recv_queue(1).peek().unwrap().unwrap();
    // SAFETY: `c` is a cell of the heap node; `len` is at offset 16 of the header.
    unsafe { (c.body().add(16) as *mut u32).write_unaligned(u32::MAX) };
    assert!(matches!(b.poll(&[0]), Err(Error::Corrupt { what: "cell message length", .. })));
}

#[test]
fn corrupt_fastbox_length_is_an_error() {
    let node = HeapNode::new(2, small()).unwrap();
    let mut a = Port::new(&node, 0, cfg()).unwrap();
    let mut b = Port::new(&node, 1, cfg()).unwrap();
    for i in 0..5 {
        let _ = a.send(1, &MsgHeader::default(), None, &[i]).unwrap();
    }
    for _ in 0..4 {
        recv_msg(&mut b, &[0]).unwrap();
    }
    // The box was claimed at the fourth message (slot 0); the fifth is in slot 1: corrupt its
    // length.
    // SAFETY: box 0 of rank 1 exists.
    let fb = unsafe { node.fastbox(1, 0) };
    assert_eq!(fb.owner().load(Relaxed), 1);
    // SAFETY: we write the header's `len` field of slot 1, inside the box.
    unsafe { (fb.bodies.add(fb.body_stride + 16) as *mut u32).write_unaligned(1 << 30) };
    assert!(matches!(b.poll(&[0]), Err(Error::Corrupt { .. })));
}
