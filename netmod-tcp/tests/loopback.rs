//! Two TCP netmods in one process over loopback, each feeding the receive queue of its own
//! (heap) node: messages of every size both ways, connections opened by both sides at once,
//! large messages streamed through the rendezvous, a peer that vanishes.

use std::time::{Duration, Instant};

use nemesis_lmt::{Control, NetLmt, Outcome};
use nemesis_netmod_tcp::{TcpConfig, TcpNetmod};
use nemesis_shm::netmod::{KIND_PEER_GONE, Netmod};
use nemesis_shm::{HeapNode, MsgHeader, Params, Port, PortConfig, REMOTE};

fn node() -> HeapNode {
    HeapNode::new(1, Params { cells_per_rank: 64, ..Params::DEFAULT }).unwrap()
}

fn cfg() -> TcpConfig {
    TcpConfig { addr: Some("127.0.0.1".parse().unwrap()), ..TcpConfig::default() }
}

fn pattern(seed: u32, len: usize) -> Vec<u8> {
    (0..len as u32).map(|i| (i.wrapping_mul(2654435761) >> 13).wrapping_add(seed) as u8).collect()
}

/// A rank: its port on its own node and its netmod.
struct Rank<'n> {
    port: Port<'n, HeapNode>,
    net: TcpNetmod<'n>,
    /// Messages being reassembled: (header, bytes, received).
    partial: Vec<(MsgHeader, Vec<u8>, usize)>,
}

impl<'n> Rank<'n> {
    fn new(node: &'n HeapNode, me: u32, size: u32) -> Rank<'n> {
        let mut port = Port::new(node, 0, PortConfig::default()).unwrap();
        assert_eq!(port.netmod_reserve(32).unwrap(), 32);
        Rank { port, net: TcpNetmod::new(me, size, 42, cfg()).unwrap(), partial: Vec::new() }
    }

    /// One pass: the netmod, then the receive queue. Returns whole messages (header, payload).
    fn step(&mut self) -> Vec<(MsgHeader, Vec<u8>)> {
        self.net.poll(&mut self.port).unwrap();
        let mut out = Vec::new();
        while let Some(inc) = self.port.poll(&[]).unwrap() {
            assert_eq!(inc.src, REMOTE);
            let h = inc.header();
            let i = match self.partial.iter().position(|p| p.0.src == h.src && p.2 < p.1.len()) {
                Some(i) if inc.offset() > 0 => i,
                _ => {
                    assert_eq!(inc.offset(), 0, "a fragment without its first");
                    self.partial.push((h, vec![0u8; h.len as usize], 0));
                    self.partial.len() - 1
                }
            };
            let p = &mut self.partial[i];
            let n = inc.copy_to(&mut p.1[inc.offset()..]);
            p.2 += n;
            let last = inc.is_last();
            self.port.release(inc).unwrap();
            if last {
                let (h, b, got) = self.partial.remove(i);
                assert_eq!(got, b.len());
                out.push((h, b));
            }
        }
        out
    }
}

fn pair<'n>(a: &'n HeapNode, b: &'n HeapNode) -> (Rank<'n>, Rank<'n>) {
    let (mut r0, mut r1) = (Rank::new(a, 0, 2), Rank::new(b, 1, 2));
    let (c0, c1) = (r0.net.card(), r1.net.card());
    r0.net.connect(1, &c1).unwrap();
    r1.net.connect(0, &c0).unwrap();
    (r0, r1)
}

fn until<T>(what: &str, mut f: impl FnMut() -> Option<T>) -> T {
    let t0 = Instant::now();
    loop {
        if let Some(v) = f() {
            return v;
        }
        assert!(t0.elapsed() < Duration::from_secs(30), "timed out waiting for {what}");
    }
}

#[test]
fn messages_both_ways_with_simultaneous_connects() {
    let (na, nb) = (node(), node());
    let (mut r0, mut r1) = pair(&na, &nb);
    let sizes = [0usize, 1, 100, 16_000, 16_384, 70_000, 200_001];
    // Both send before either polls: both connect at once; one connection survives.
    for (k, &len) in sizes.iter().enumerate() {
        let h = MsgHeader { tag: k as i32, context: 3, kind: 1, aux: 9, ..MsgHeader::default() };
        r0.net.send(1, &h, &pattern(k as u32, len)).unwrap();
        r1.net.send(0, &h, &pattern(100 + k as u32, len)).unwrap();
    }
    let (mut got0, mut got1) = (Vec::new(), Vec::new());
    until("all messages", || {
        got0.extend(r0.step());
        got1.extend(r1.step());
        (got0.len() == sizes.len() && got1.len() == sizes.len()).then_some(())
    });
    for (k, &len) in sizes.iter().enumerate() {
        let (h, b) = &got1[k];
        assert_eq!((h.src, h.dst, h.tag, h.context, h.kind, h.aux), (0, 1, k as i32, 3, 1, 9), "in order");
        assert!(*b == pattern(k as u32, len), "payload {k}");
        let (h, b) = &got0[k];
        assert_eq!((h.src, h.tag), (1, k as i32));
        assert!(*b == pattern(100 + k as u32, len));
    }
    // More traffic than the 32 netmod cells hold, never released in between on one side: the
    // sender's data waits in the socket and the queue, nothing is lost.
    for k in 0..100u32 {
        r0.net.send(1, &MsgHeader { tag: k as i32, ..MsgHeader::default() }, &pattern(k, 20_000)).unwrap();
    }
    let mut n = 0;
    until("100 messages through 32 cells", || {
        r0.step();
        for (h, b) in r1.step() {
            assert_eq!(h.tag, n as i32);
            assert!(b == pattern(n, 20_000));
            n += 1;
        }
        (n == 100).then_some(())
    });
    r0.net.finalize().unwrap();
    r1.net.finalize().unwrap();
}

#[test]
fn large_messages_stream_after_the_rendezvous() {
    let (na, nb) = (node(), node());
    let (mut r0, mut r1) = pair(&na, &nb);
    let (mut s, mut r) = (NetLmt::new(), NetLmt::new());
    let msg = pattern(7, (5 << 20) + 3);
    let mut dst = vec![0u8; msg.len() - 1000];
    // SAFETY: both buffers outlive the transfer, driven to the end below.
    let rts = unsafe { s.pre_send(1, 11, msg.as_ptr(), msg.len() as u64, &mut r0.net) };
    // The RTS would travel as a message; here it is handed over directly.
    // SAFETY: as above.
    unsafe { r.pre_recv(0, 22, &rts, dst.as_mut_ptr(), dst.len(), &mut r1.net) };
    let cts: Vec<(u32, Control)> = r.take_out().collect();
    assert_eq!(cts.len(), 1);
    s.handle(1, cts[0].1, &mut r0.net).unwrap();
    let (mut so, mut ro) = (None, None);
    until("both sides done", || {
        r0.step();
        r1.step();
        s.progress(&mut r0.net);
        r.progress(&mut r1.net);
        so = so.take().or(s.take_done().next());
        ro = ro.take().or(r.take_done().next());
        (so.is_some() && ro.is_some()).then_some(())
    });
    let bytes = dst.len() as u64;
    assert_eq!(so, Some((11, Outcome::Moved { bytes })));
    assert_eq!(ro, Some((22, Outcome::Moved { bytes })));
    assert!(dst == msg[..dst.len()]);
}

#[test]
fn a_vanished_peer_is_announced_after_its_last_message() {
    let (na, nb) = (node(), node());
    let (mut r0, mut r1) = pair(&na, &nb);
    r1.net.send(0, &MsgHeader { tag: 5, ..MsgHeader::default() }, b"last words").unwrap();
    until("the connection", || {
        r0.step();
        r1.step();
        (!r1.net.busy()).then_some(())
    });
    // Rank 1 vanishes without BYE (its sockets close as a killed process's would).
    drop(r1);
    let mut seen = Vec::new();
    until("the notice", || {
        for (h, b) in r0.step() {
            seen.push((h.kind, h.src, b));
        }
        seen.iter().any(|s| s.0 == KIND_PEER_GONE).then_some(())
    });
    assert_eq!(seen[0], (0, 1, b"last words".to_vec()), "the message first, then the notice");
    assert_eq!((seen[1].0, seen[1].1), (KIND_PEER_GONE, 1));
    let e = r0.net.send(1, &MsgHeader::default(), b"x").unwrap_err();
    assert!(matches!(e, nemesis_shm::Error::NetPeerDead { rank: 1 }), "{e}");
}
