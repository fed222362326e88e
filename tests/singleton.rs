//! The Endpoint as a singleton (no process manager: size 1), talking to itself through its own
//! queue: matching order, wildcards, contexts, unexpected messages, truncation, zero-byte and
//! multi-cell messages, non-blocking requests, scopes, probes, argument errors.

use nemesis::{ANY_SOURCE, ANY_TAG, Endpoint, Error, WORLD};

fn ep() -> Endpoint {
    // SAFETY: tests of this file never set PMI variables; removing them makes a singleton even
    // if the harness runs under a process manager.
    unsafe {
        std::env::remove_var("PMI_FD");
    }
    Endpoint::init().unwrap()
}

fn pattern(seed: u32, len: usize) -> Vec<u8> {
    (0..len).map(|i| (i as u32).wrapping_mul(2654435761).wrapping_add(seed) as u8).collect()
}

#[test]
fn singleton_rank_and_size() {
    let e = ep();
    assert_eq!((e.rank(), e.size()), (0, 1));
    e.finalize().unwrap();
}

#[test]
fn messages_match_in_order_by_tag_and_context() {
    let mut e = ep();
    for (tag, ctx) in [(1, WORLD), (2, WORLD), (1, 5), (1, WORLD)] {
        e.send(&[tag as u8, ctx as u8], 0, tag, ctx).unwrap();
    }
    let mut b = [0u8; 2];
    // Tag 1 in WORLD: the first one sent with that tag (non-overtaking).
    let st = e.recv(&mut b, 0, 1, WORLD).unwrap();
    assert_eq!((st.tag, st.len, b), (1, 2, [1, 0]));
    // Context 5 only matches its own message.
    let st = e.recv(&mut b, ANY_SOURCE, ANY_TAG, 5).unwrap();
    assert_eq!((st.tag, b), (1, [1, 5]));
    // ANY_TAG takes the oldest remaining in WORLD: tag 2, then the second tag 1.
    assert_eq!(e.recv(&mut b, ANY_SOURCE, ANY_TAG, WORLD).unwrap().tag, 2);
    assert_eq!(e.recv(&mut b, 0, ANY_TAG, WORLD).unwrap().tag, 1);
    assert_eq!(e.iprobe(ANY_SOURCE, ANY_TAG, WORLD).unwrap(), None);
}

#[test]
fn truncation_reports_the_real_length_and_writes_nothing_past_the_buffer() {
    let mut e = ep();
    let msg = pattern(7, 3000); // several cells
    e.send(&msg, 0, 3, WORLD).unwrap();
    let mut buf = [0xEEu8; 120];
    let err = e.recv(&mut buf[..100], 0, 3, WORLD).unwrap_err();
    assert!(matches!(err, Error::Truncated { len: 3000, capacity: 100, sender: 0, tag: 3 }), "{err}");
    assert_eq!(&buf[..100], &msg[..100]);
    assert!(buf[100..].iter().all(|&b| b == 0xEE), "nothing past the buffer");
    // The same with a small (fastbox-sized) message and a posted receive.
    let mut out = [0u8; 2];
    e.scope(|s| {
        let r = s.irecv(&mut out, 0, 9, WORLD).unwrap();
        s.send(&[1, 2, 3, 4], 0, 9, WORLD).unwrap();
        assert!(matches!(s.wait(r), Err(Error::Truncated { len: 4, capacity: 2, sender: 0, tag: 9 })));
    })
    .expect("scope");
    assert_eq!(out, [1, 2]);
}

#[test]
fn zero_byte_and_multi_cell_messages() {
    // A blocking send to oneself completes before the receive only if it goes eagerly: the eager
    // limit is raised past several cells (the default with single copies is 12 KiB, under a cell).
    // SAFETY: as in `ep`.
    unsafe { std::env::remove_var("PMI_FD") };
    let cfg = nemesis::Config { eager_max: Some(60_000), ..nemesis::Config::default() };
    let mut e = Endpoint::init_with(cfg).unwrap();
    e.send(&[], 0, 0, WORLD).unwrap();
    let st = e.recv(&mut [], 0, 0, WORLD).unwrap();
    assert_eq!(st.len, 0);
    let limit = e.eager_limit();
    assert_eq!(limit, 60_000);
    for len in [1, 8, 216, 217, 16336, 16337, 50_000, limit] {
        let msg = pattern(len as u32, len);
        e.send(&msg, 0, 4, WORLD).unwrap();
        let mut buf = vec![0u8; len];
        let st = e.recv(&mut buf, 0, 4, WORLD).unwrap();
        assert_eq!((st.len, st.source), (len, 0));
        assert!(buf == msg, "length {len}");
    }
}

#[test]
fn nonblocking_requests_complete_in_any_order() {
    let mut e = ep();
    let mut bufs = vec![vec![0u8; 100]; 5];
    let msgs: Vec<Vec<u8>> = (0..5).map(|i| pattern(i, 100)).collect();
    e.scope(|s| {
        let mut recvs = Vec::new();
        for (i, b) in bufs.iter_mut().enumerate() {
            recvs.push(s.irecv(b, 0, i as i32, WORLD).unwrap());
        }
        let sends: Vec<_> =
            msgs.iter().enumerate().rev().map(|(i, m)| s.isend(m, 0, i as i32, WORLD).unwrap()).collect();
        // Complete the receives out of order.
        for &i in &[3usize, 0, 4, 1, 2] {
            let st = s.wait(recvs[i]).unwrap();
            assert_eq!(st.tag, i as i32);
        }
        for r in s.wait_all(&sends) {
            r.unwrap();
        }
        // Stale handles are refused.
        assert!(matches!(s.wait(recvs[0]), Err(Error::InvalidRequest)));
    })
    .expect("scope");
    for (b, m) in bufs.iter().zip(&msgs) {
        assert_eq!(b, m);
    }
}

#[test]
fn wait_any_and_test() {
    let mut e = ep();
    let mut a = [0u8; 1];
    let mut b = [0u8; 1];
    e.scope(|s| {
        let ra = s.irecv(&mut a, 0, 1, WORLD).unwrap();
        let rb = s.irecv(&mut b, 0, 2, WORLD).unwrap();
        assert_eq!(s.test(rb).unwrap(), None);
        s.send(&[22], 0, 2, WORLD).unwrap();
        let (i, st) = s.wait_any(&[ra, rb]).unwrap();
        assert_eq!((i, st.unwrap().tag), (1, 2));
        s.send(&[11], 0, 1, WORLD).unwrap();
        let mut done = None;
        for _ in 0..1000 {
            if let Some(st) = s.test(ra).unwrap() {
                done = Some(st);
                break;
            }
        }
        assert_eq!(done.unwrap().tag, 1);
        assert!(matches!(s.wait_any(&[ra, rb]), Err(Error::InvalidRequest)));
    })
    .expect("scope");
    assert_eq!((a, b), ([11], [22]));
}

#[test]
fn probe_sees_the_message_without_taking_it() {
    let mut e = ep();
    assert_eq!(e.iprobe(0, 5, WORLD).unwrap(), None);
    e.send(&pattern(1, 300), 0, 5, WORLD).unwrap();
    let st = e.probe(ANY_SOURCE, 5, WORLD).unwrap();
    assert_eq!((st.source, st.tag, st.len), (0, 5, 300));
    assert_eq!(e.iprobe(0, ANY_TAG, WORLD).unwrap(), Some(st));
    let mut buf = vec![0u8; st.len];
    e.recv(&mut buf, 0, 5, WORLD).unwrap();
    assert_eq!(buf, pattern(1, 300));
    assert_eq!(e.iprobe(0, ANY_TAG, WORLD).unwrap(), None);
}

#[test]
fn argument_errors() {
    let mut e = ep();
    assert!(matches!(e.send(&[1], 1, 0, WORLD), Err(Error::InvalidRank { rank: 1, size: 1 })));
    assert!(matches!(e.send(&[1], 0, -3, WORLD), Err(Error::InvalidTag(-3))));
    assert!(matches!(e.recv(&mut [0], 2, 0, WORLD), Err(Error::InvalidRank { rank: 2, .. })));
    assert!(matches!(e.recv(&mut [0], -7, 0, WORLD), Err(Error::InvalidRank { rank: -7, .. })));
    assert!(matches!(e.recv(&mut [0], 0, -2, WORLD), Err(Error::InvalidTag(-2))));
}

#[test]
fn large_messages_to_oneself_by_rendezvous() {
    // Above the eager limit: a blocking send to oneself would wait for its own receive (as in
    // MPI), so the send is non-blocking; the receive is posted after, then before, the RTS.
    let mut e = ep();
    let len = 3 * e.eager_limit() + 5;
    let msg = pattern(9, len);
    let mut buf = vec![0u8; len];
    e.scope(|s| {
        let r = s.isend(&msg, 0, 1, WORLD).unwrap();
        assert_eq!(s.recv(&mut buf, 0, 1, WORLD).unwrap().len, len);
        s.wait(r).unwrap();
    })
    .expect("scope");
    assert!(buf == msg);
    buf.fill(0);
    e.scope(|s| {
        let rr = s.irecv(&mut buf, 0, 2, WORLD).unwrap();
        let sr = s.isend(&msg, 0, 2, WORLD).unwrap();
        for r in s.wait_all(&[sr, rr]) {
            assert_eq!(r.unwrap().len, len);
        }
    })
    .expect("scope");
    assert!(buf == msg);
}

#[test]
fn many_unexpected_messages_beyond_the_cell_pool() {
    // 64 cells of 16 KiB: 200 messages of 10 KiB sent to self before any receive. The sends
    // progress (copying the unexpected ones out) to get their cells back.
    let mut e = ep();
    for i in 0..200 {
        e.send(&pattern(i, 10_000), 0, i as i32, WORLD).unwrap();
    }
    let mut buf = vec![0u8; 10_000];
    for i in 0..200 {
        e.recv(&mut buf, 0, i as i32, WORLD).unwrap();
        assert_eq!(buf, pattern(i, 10_000));
    }
}

#[test]
fn synchronous_send_completes_when_matched() {
    let mut e = ep();
    let msg = [5u8; 40];
    let mut buf = [0u8; 40];
    // SAFETY: `msg` outlives the request, waited for below.
    let r = unsafe { e.issend_raw(msg.as_ptr(), msg.len(), 0, 3, WORLD) }.unwrap();
    for _ in 0..100 {
        assert_eq!(e.test(r).unwrap(), None, "not matched yet");
    }
    let st = e.recv(&mut buf, 0, 3, WORLD).unwrap();
    assert_eq!((st.len, &buf[..]), (40, &msg[..]));
    // The acknowledgement (tag 0, context 0 on the wire) is now first in our queue; a blocking
    // receive of tag 0 in context 0 must skip it and take the real message behind it.
    e.send(&[1], 0, 0, WORLD).unwrap();
    let st = e.recv(&mut buf, 0, 0, WORLD).unwrap();
    assert_eq!((st.len, buf[0]), (1, 1));
    assert_eq!(e.wait(r).unwrap().tag, 3);
    assert_eq!(e.iprobe(ANY_SOURCE, ANY_TAG, WORLD).unwrap(), None, "the acknowledgement is not a message");
}
