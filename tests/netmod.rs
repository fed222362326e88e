//! Two netmods in one process, each feeding the receive queue of its own (heap) node: messages
//! of every size both ways (half of them with a fault-tolerance piggyback, on every fragment), more traffic than the netmod's cells hold, large messages through
//! the rendezvous (streamed, or read where the netmod reads), a peer that vanishes, a peer that
//! says goodbye. Every test runs over the TCP netmod and, with the `rdma` feature, over the ofi
//! netmod with each of libfabric's software providers (`tcp;ofi_rxm`, `shm`, `udp;ofi_rxd`),
//! reading and streaming large messages. A provider libfabric does not offer here is skipped,
//! except under CI, where it fails.

mod common;

use std::time::{Duration, Instant};

use nemesis_lmt::{Control, LmtBackend, NetLmt, Outcome};
use nemesis_netmod_tcp::{TcpConfig, TcpNetmod};
use nemesis_shm::auth::JobSecret;
use nemesis_shm::netmod::{KIND_PEER_GONE, Netmod};
use nemesis_shm::{HeapNode, MsgHeader, Params, PiggybackBytes, Port, PortConfig, REMOTE};

/// A netmod with its large-message backend.
trait Net<'n>: Netmod<'n> + LmtBackend {}
impl<'n, T: Netmod<'n> + LmtBackend> Net<'n> for T {}

/// Which netmod a test runs on.
#[derive(Clone, Copy, Debug)]
enum Kind {
    Tcp,
    /// The ofi netmod with a provider, reading (true) or streaming large messages.
    #[cfg_attr(not(feature = "rdma"), allow(dead_code))]
    Ofi(&'static str, bool),
}

/// The secret of the tests' job (one per test process).
fn job_secret() -> JobSecret {
    static S: std::sync::OnceLock<JobSecret> = std::sync::OnceLock::new();
    S.get_or_init(|| JobSecret::generate().unwrap()).clone()
}

/// Heartbeats fast enough for a vanished peer to be noticed within a test.
const BEAT: Duration = Duration::from_millis(50);
const DEAD_AFTER: Duration = Duration::from_millis(1000);

impl Kind {
    fn make<'n>(self, me: u32, size: u32) -> Option<Box<dyn Net<'n> + 'n>> {
        match self {
            Kind::Tcp => {
                let cfg = TcpConfig {
                    addr: Some("127.0.0.1".parse().unwrap()),
                    heartbeat: BEAT,
                    timeout: DEAD_AFTER,
                    ..TcpConfig::default()
                };
                Some(Box::new(TcpNetmod::new(me, size, job_secret(), cfg).unwrap()))
            }
            #[cfg(feature = "rdma")]
            Kind::Ofi(prov, read) => {
                use nemesis_netmod_rdma::{OfiConfig, OfiNetmod, Rndv};
                let cfg = OfiConfig {
                    provider: Some(prov.into()),
                    // IP providers on the loopback interface.
                    domain: (prov != "shm").then(|| "lo".into()),
                    rndv: if read { Rndv::Read } else { Rndv::Send },
                    heartbeat_addr: Some("127.0.0.1".parse().unwrap()),
                    timing: nemesis_shm::netmod::heartbeat::Timing { period: BEAT, timeout: DEAD_AFTER },
                    ..OfiConfig::default()
                };
                match OfiNetmod::new(me, size, job_secret(), cfg) {
                    Ok(n) => {
                        assert_eq!(n.reads(), read, "{prov} reads large messages");
                        Some(Box::new(n))
                    }
                    Err(e) if !common::in_ci() => {
                        eprintln!("skipped: ofi provider {prov} not available here: {e}");
                        None
                    }
                    Err(e) => panic!("ofi provider {prov}: {e}"),
                }
            }
            #[cfg(not(feature = "rdma"))]
            Kind::Ofi(..) => None,
        }
    }
}

/// Every netmod this build has, each provider reading and streaming.
fn kinds() -> Vec<Kind> {
    let mut k = vec![Kind::Tcp];
    if cfg!(feature = "rdma") {
        for prov in ["tcp;ofi_rxm", "shm", "udp;ofi_rxd"] {
            k.push(Kind::Ofi(prov, true));
            k.push(Kind::Ofi(prov, false));
        }
    }
    k
}

fn node() -> HeapNode {
    HeapNode::new(1, Params { cells_per_rank: 64, ..Params::DEFAULT }).unwrap()
}

fn pattern(seed: u32, len: usize) -> Vec<u8> {
    (0..len as u32).map(|i| (i.wrapping_mul(2654435761) >> 13).wrapping_add(seed) as u8).collect()
}

/// A rank: its port on its own node and its netmod.
struct Rank<'n> {
    port: Port<'n, HeapNode>,
    net: Box<dyn Net<'n> + 'n>,
    /// Messages being reassembled: (header, bytes, received, piggyback).
    partial: Vec<(MsgHeader, Vec<u8>, usize, Option<PiggybackBytes>)>,
}

impl<'n> Rank<'n> {
    fn new(node: &'n HeapNode, net: Box<dyn Net<'n> + 'n>) -> Rank<'n> {
        let mut port = Port::new(node, 0, PortConfig::default()).unwrap();
        assert_eq!(port.netmod_reserve(32).unwrap(), 32);
        Rank { port, net, partial: Vec::new() }
    }

    /// One pass: the netmod, then the receive queue. Returns whole messages (header, payload).
    fn step(&mut self) -> Vec<(MsgHeader, Vec<u8>)> {
        self.step_ft().into_iter().map(|(h, b, _)| (h, b)).collect()
    }

    /// [`Rank::step`] with each message's fault-tolerance piggyback (the same on every fragment).
    fn step_ft(&mut self) -> Vec<(MsgHeader, Vec<u8>, Option<PiggybackBytes>)> {
        self.net.poll(&mut self.port).unwrap();
        let mut out = Vec::new();
        while let Some(inc) = self.port.poll(&[]).unwrap() {
            assert_eq!(inc.src, REMOTE);
            let h = inc.header();
            let i = match self.partial.iter().position(|p| p.0.src == h.src && p.2 < p.1.len()) {
                Some(i) if inc.offset() > 0 => i,
                _ => {
                    assert_eq!(inc.offset(), 0, "a fragment without its first");
                    self.partial.push((h, vec![0u8; h.len as usize], 0, inc.piggyback()));
                    self.partial.len() - 1
                }
            };
            let p = &mut self.partial[i];
            assert_eq!(inc.piggyback(), p.3, "every fragment carries the message's piggyback");
            let n = inc.copy_to(&mut p.1[inc.offset()..]);
            p.2 += n;
            let last = inc.is_last();
            self.port.release(inc).unwrap();
            if last {
                let (h, b, got, pb) = self.partial.remove(i);
                assert_eq!(got, b.len());
                out.push((h, b, pb));
            }
        }
        out
    }
}

fn pair<'n>(kind: Kind, a: &'n HeapNode, b: &'n HeapNode) -> Option<(Rank<'n>, Rank<'n>)> {
    let (mut r0, mut r1) = (Rank::new(a, kind.make(0, 2)?), Rank::new(b, kind.make(1, 2)?));
    let (c0, c1) = (r0.net.card(), r1.net.card());
    r0.net.connect(1, &c1).unwrap();
    r1.net.connect(0, &c0).unwrap();
    Some((r0, r1))
}

fn until<T>(what: &str, mut f: impl FnMut() -> Option<T>) -> T {
    let t0 = Instant::now();
    loop {
        if let Some(v) = f() {
            return v;
        }
        assert!(t0.elapsed() < Duration::from_secs(60), "timed out waiting for {what}");
    }
}

#[test]
fn messages_both_ways_through_few_cells() {
    for kind in kinds() {
        let (na, nb) = (node(), node());
        let Some((mut r0, mut r1)) = pair(kind, &na, &nb) else { continue };
        let sizes = [0usize, 1, 100, 16_000, 16_384, 70_000, 200_001, 5, 16_370];
        // Odd messages carry a fault-tolerance piggyback, with its stamp (`FT_STAMP` in the
        // header), its short stamp (`FT_STAMP_SHORT`) or none: what is not carried arrives zero.
        let ft = |k: usize| {
            (k % 2 == 1).then(|| {
                std::array::from_fn::<u8, { nemesis_shm::cell::FT_PIGGYBACK_BYTES }, _>(|i| (k * 16 + i + 1) as u8)
            })
        };
        let stamp_flag = |k: usize| {
            use nemesis_shm::cell::flags::{FT_STAMP, FT_STAMP_SHORT};
            [0, FT_STAMP, 0, 0, 0, FT_STAMP_SHORT][k % 6]
        };
        let arrived = |k: usize| {
            ft(k).map(|mut pb| {
                let flags = nemesis_shm::cell::flags::FT_PIGGYBACK | stamp_flag(k);
                pb[nemesis_shm::cell::ft_carried(flags)..].fill(0);
                pb
            })
        };
        // Both send before either polls (the TCP netmod connects both ways at once: one
        // connection survives).
        for (k, &len) in sizes.iter().enumerate() {
            let flags = stamp_flag(k);
            let h = MsgHeader { tag: k as i32, context: 3, kind: 1, aux: 9, flags, ..MsgHeader::default() };
            r0.net.send(1, &h, ft(k).as_ref(), &pattern(k as u32, len)).unwrap();
            r1.net.send(0, &h, ft(k).as_ref(), &pattern(100 + k as u32, len)).unwrap();
        }
        let (mut got0, mut got1) = (Vec::new(), Vec::new());
        until("all messages", || {
            got0.extend(r0.step_ft());
            got1.extend(r1.step_ft());
            (got0.len() == sizes.len() && got1.len() == sizes.len()).then_some(())
        });
        for (k, &len) in sizes.iter().enumerate() {
            let (h, b, pb) = &got1[k];
            assert_eq!(
                (h.src, h.dst, h.tag, h.context, h.kind, h.aux),
                (0, 1, k as i32, 3, 1, 9),
                "{kind:?}: in order"
            );
            assert!(*b == pattern(k as u32, len), "{kind:?}: payload {k}");
            assert_eq!(*pb, arrived(k), "{kind:?}: piggyback of message {k}");
            let (h, b, pb) = &got0[k];
            assert_eq!((h.src, h.tag), (1, k as i32));
            assert!(*b == pattern(100 + k as u32, len));
            assert_eq!(*pb, arrived(k), "{kind:?}");
        }
        // More traffic than the 32 netmod cells hold, never released in between on one side: the
        // sender's data waits (socket, provider, queue), nothing is lost, the order holds.
        for k in 0..100u32 {
            r0.net.send(1, &MsgHeader { tag: k as i32, ..MsgHeader::default() }, None, &pattern(k, 20_000)).unwrap();
        }
        let mut n = 0;
        until("100 messages through 32 cells", || {
            r0.step();
            for (h, b) in r1.step() {
                assert_eq!(h.tag, n as i32, "{kind:?}");
                assert!(b == pattern(n, 20_000));
                n += 1;
            }
            (n == 100).then_some(())
        });
        r0.net.finalize().unwrap();
        r1.net.finalize().unwrap();
    }
}

/// One large message from r0 to r1 through the rendezvous (the RTS handed over directly), into
/// a receive buffer `short` bytes shorter than the message.
fn rendezvous(r0: &mut Rank<'_>, r1: &mut Rank<'_>, len: usize, short: usize, kind: Kind) {
    let (mut s, mut r) = (NetLmt::new(), NetLmt::new());
    let msg = pattern(len as u32, len);
    let mut dst = vec![0u8; len - short];
    // SAFETY: both buffers outlive the transfer, driven to the end below.
    let rts = unsafe { s.pre_send(1, 11, msg.as_ptr(), msg.len() as u64, &mut *r0.net) };
    // SAFETY: as above.
    unsafe { r.pre_recv(0, 22, &rts, dst.as_mut_ptr(), dst.len(), &mut *r1.net) };
    let (mut so, mut ro) = (None, None);
    until("both sides done", || {
        r0.step();
        r1.step();
        // Control messages would travel as messages; here they are handed over directly.
        for (_, c) in r.take_out().collect::<Vec<_>>() {
            // A reading netmod answers DONE once the data is in; a streaming one CTS.
            let reads = matches!(kind, Kind::Ofi(_, true));
            assert!(
                matches!((reads, c), (false, Control::Cts { .. }) | (true, Control::Done { .. })),
                "{kind:?}: {c:?}"
            );
            s.handle(1, c, &mut *r0.net).unwrap();
        }
        s.progress(&mut *r0.net);
        r.progress(&mut *r1.net);
        so = so.take().or(s.take_done().next());
        ro = ro.take().or(r.take_done().next());
        (so.is_some() && ro.is_some()).then_some(())
    });
    let bytes = dst.len() as u64;
    assert_eq!(so, Some((11, Outcome::Moved { bytes })), "{kind:?} {len}");
    assert_eq!(ro, Some((22, Outcome::Moved { bytes })), "{kind:?} {len}");
    assert!(dst == msg[..dst.len()], "{kind:?}: the data of {len} bytes");
    assert!(!s.busy() && !r.busy());
}

#[test]
fn large_messages_after_the_rendezvous() {
    for kind in kinds() {
        let (na, nb) = (node(), node());
        let Some((mut r0, mut r1)) = pair(kind, &na, &nb) else { continue };
        for (len, short) in [(1, 0), (100_000, 0), ((5 << 20) + 3, 1000), (9 << 20, 0)] {
            rendezvous(&mut r0, &mut r1, len, short, kind);
        }
        // From the same buffer again (a registration cache hit where it reads).
        rendezvous(&mut r0, &mut r1, 9 << 20, 0, kind);
        r0.net.finalize().unwrap();
        r1.net.finalize().unwrap();
    }
}

#[test]
fn a_vanished_peer_is_announced_after_its_last_message() {
    for kind in kinds() {
        let (na, nb) = (node(), node());
        let Some((mut r0, mut r1)) = pair(kind, &na, &nb) else { continue };
        r1.net.send(0, &MsgHeader { tag: 5, ..MsgHeader::default() }, None, b"last words").unwrap();
        let mut seen = Vec::new();
        until("the message", || {
            seen.extend(r0.step().into_iter().map(|(h, b)| (h.kind, h.src, b)));
            r1.step();
            (!r1.net.busy() && !seen.is_empty()).then_some(())
        });
        // Rank 1 vanishes without a goodbye (its sockets and heartbeats stop as a killed
        // process's would).
        drop(r1);
        until("the notice", || {
            seen.extend(r0.step().into_iter().map(|(h, b)| (h.kind, h.src, b)));
            seen.iter().any(|s| s.0 == KIND_PEER_GONE).then_some(())
        });
        assert_eq!(seen[0], (0, 1, b"last words".to_vec()), "{kind:?}: the message first, then the notice");
        assert_eq!((seen[1].0, seen[1].1), (KIND_PEER_GONE, 1));
        let e = r0.net.send(1, &MsgHeader::default(), None, b"x").unwrap_err();
        assert!(matches!(e, nemesis_shm::Error::NetPeerDead { rank: 1 }), "{e}");
    }
}

#[test]
fn a_peer_that_said_goodbye_is_not_taken_for_dead() {
    for kind in kinds() {
        let (na, nb) = (node(), node());
        let Some((mut r0, mut r1)) = pair(kind, &na, &nb) else { continue };
        r1.net.send(0, &MsgHeader { tag: 1, ..MsgHeader::default() }, None, b"bye").unwrap();
        let mut seen = Vec::new();
        until("the message", || {
            seen.extend(r0.step());
            r1.step();
            (!seen.is_empty()).then_some(())
        });
        r1.net.finalize().unwrap();
        drop(r1);
        // Well past the heartbeat timeout: no notice.
        let t0 = Instant::now();
        while t0.elapsed() < DEAD_AFTER * 2 {
            for (h, _) in r0.step() {
                assert_ne!(h.kind, KIND_PEER_GONE, "{kind:?}: a peer that finalized is not dead");
            }
        }
        assert!(r0.net.send(1, &MsgHeader::default(), None, b"x").is_err(), "{kind:?}: nothing goes to it");
    }
}
