//! The TCP netmod's authentication against a raw socket that does not know the job's secret
//! (`nemesis_shm::auth`): garbage, a HELLO answered with a proof made with another secret, a
//! recorded proof replayed against a fresh challenge, an impostor listening at a peer's address,
//! and forged heartbeats. Each is dropped or ignored without touching any rank's state (no death
//! notice), and the real peers then talk as if nothing happened.

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream, UdpSocket};
use std::time::{Duration, Instant};

use nemesis_netmod_tcp::TcpConfig;
use nemesis_netmod_tcp::frame::{self, Kind, PREFIX};
use nemesis_shm::MsgHeader;
use nemesis_shm::auth::{self, BeatKey, JobSecret, NONCE_BYTES};
use nemesis_shm::netmod::Netmod;

#[path = "common/netrank.rs"]
mod netrank;
use netrank::{Rank, addrs, node};

const BEAT: Duration = Duration::from_millis(50);
const DEAD_AFTER: Duration = Duration::from_millis(1500);

fn cfg() -> TcpConfig {
    TcpConfig { addr: Some("127.0.0.1".parse().unwrap()), heartbeat: BEAT, timeout: DEAD_AFTER, ..TcpConfig::default() }
}

/// Polls `ranks` while `f` says to go on, at most `limit`.
fn drive(ranks: &mut [&mut Rank<'_>], limit: Duration, mut go_on: impl FnMut(&mut [&mut Rank<'_>]) -> bool) {
    let t0 = Instant::now();
    while t0.elapsed() < limit && go_on(ranks) {
        for r in ranks.iter_mut() {
            r.step();
        }
        std::thread::sleep(Duration::from_micros(200));
    }
}

/// Reads until the peer closes (true) or `limit` passes (false), polling `r` meanwhile.
fn closed_by(s: &mut TcpStream, r: &mut Rank<'_>, limit: Duration) -> bool {
    s.set_nonblocking(true).unwrap();
    let t0 = Instant::now();
    let mut buf = [0u8; 256];
    while t0.elapsed() < limit {
        r.step();
        match s.read(&mut buf) {
            Ok(0) => return true,
            Ok(_) => {}
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => std::thread::sleep(Duration::from_millis(1)),
            Err(_) => return true,
        }
    }
    false
}

/// Sends a HELLO claiming `rank` of a job of `size` with nonce `nc`, and reads the CHALLENGE:
/// the acceptor's nonce and proof.
fn hello(s: &mut TcpStream, r: &mut Rank<'_>, rank: u32, size: u32, nc: &[u8; NONCE_BYTES]) -> Vec<u8> {
    s.write_all(&frame::frame(Kind::Hello, &frame::hello(rank, size, nc))).unwrap();
    let mut got = Vec::new();
    let want = PREFIX + frame::CHALLENGE;
    let t0 = Instant::now();
    s.set_nonblocking(true).unwrap();
    while got.len() < want {
        assert!(t0.elapsed() < Duration::from_secs(10), "no CHALLENGE");
        r.step();
        let mut b = [0u8; 64];
        match s.read(&mut b[..want - got.len()]) {
            Ok(0) => panic!("closed before CHALLENGE"),
            Ok(n) => got.extend_from_slice(&b[..n]),
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => std::thread::sleep(Duration::from_millis(1)),
            Err(e) => panic!("{e}"),
        }
    }
    assert_eq!(frame::parse_prefix(got[..PREFIX].try_into().unwrap()).unwrap(), (Kind::Challenge, frame::CHALLENGE));
    got.split_off(PREFIX)
}

#[test]
fn connections_without_the_secret_are_dropped_and_touch_no_rank() {
    let secret = JobSecret::generate().unwrap();
    let stranger = JobSecret::generate().unwrap();
    let (n0, n1) = (node(), node());
    let mut r0 = Rank::new(&n0, 0, 3, &secret, cfg());
    let mut r1 = Rank::new(&n1, 1, 3, &secret, cfg());
    let (tcp0, _) = addrs(&r0.net.card());
    r0.net.connect(1, &r1.net.card()).unwrap();
    r1.net.connect(0, &r0.net.card()).unwrap();

    // Garbage.
    let mut g = TcpStream::connect(tcp0).unwrap();
    g.write_all(&[0xff; 64]).unwrap();
    assert!(closed_by(&mut g, &mut r0, Duration::from_secs(10)), "garbage is dropped");

    // A HELLO claiming rank 1, then a PROOF made with another secret.
    let mut w = TcpStream::connect(tcp0).unwrap();
    let nc = auth::nonce().unwrap();
    let ch = hello(&mut w, &mut r0, 1, 3, &nc);
    let na: [u8; NONCE_BYTES] = ch[..NONCE_BYTES].try_into().unwrap();
    assert!(
        !auth::check_proof(&stranger, true, 1, 0, &nc, &na, &ch[NONCE_BYTES..]),
        "the challenge proves the acceptor's secret, not ours"
    );
    let forged = auth::connect_proof(&stranger, 1, 0, &nc, &na);
    w.write_all(&frame::frame(Kind::Proof, &forged)).unwrap();
    assert!(closed_by(&mut w, &mut r0, Duration::from_secs(10)), "a proof with another secret is refused");

    // A recorded proof (valid for an earlier challenge) replayed against a fresh one.
    let mut first = TcpStream::connect(tcp0).unwrap();
    let ch1 = hello(&mut first, &mut r0, 2, 3, &nc);
    let recorded = auth::connect_proof(&secret, 2, 0, &nc, ch1[..NONCE_BYTES].try_into().unwrap());
    drop(first);
    let mut replay = TcpStream::connect(tcp0).unwrap();
    let ch2 = hello(&mut replay, &mut r0, 2, 3, &nc);
    assert_ne!(ch1[..NONCE_BYTES], ch2[..NONCE_BYTES], "every challenge has a fresh nonce");
    replay.write_all(&frame::frame(Kind::Proof, &recorded)).unwrap();
    assert!(closed_by(&mut replay, &mut r0, Duration::from_secs(10)), "a replayed proof is refused");

    // A message before the handshake ends, on a HELLO's connection.
    let mut early = TcpStream::connect(tcp0).unwrap();
    let _ = hello(&mut early, &mut r0, 1, 3, &nc);
    early.write_all(&frame::prefix(Kind::Msg, 64)).unwrap();
    early.write_all(&[0u8; 64]).unwrap();
    assert!(closed_by(&mut early, &mut r0, Duration::from_secs(10)), "frames before PROOF end the connection");

    // Nobody died, and ranks 0 and 1 (whose rank every attempt claimed) talk as before.
    let h = MsgHeader { tag: 7, ..MsgHeader::default() };
    r1.net.send(0, &h, None, b"after the attacks").unwrap();
    r0.net.send(1, &MsgHeader { tag: 8, ..h }, None, b"back").unwrap();
    drive(&mut [&mut r0, &mut r1], Duration::from_secs(20), |rs| rs[0].tags.is_empty() || rs[1].tags.is_empty());
    assert_eq!((r0.tags.as_slice(), r1.tags.as_slice()), (&[7][..], &[8][..]));
    assert_eq!((r0.gone.as_slice(), r1.gone.as_slice()), (&[][..], &[][..]), "no death from unauthenticated bytes");
}

#[test]
fn an_impostor_at_a_peers_address_is_dropped_without_a_death() {
    let secret = JobSecret::generate().unwrap();
    let n0 = node();
    let mut r0 = Rank::new(&n0, 0, 2, &secret, cfg());
    // Rank 1's card names a listener that does not know the secret (its heartbeats go nowhere:
    // the timeout is what would end rank 1, not the impostor's bytes).
    let impostor = TcpListener::bind("127.0.0.1:0").unwrap();
    let beats = UdpSocket::bind("127.0.0.1:0").unwrap();
    let card =
        format!("tcp:127.0.0.1:{}:{}", impostor.local_addr().unwrap().port(), beats.local_addr().unwrap().port());
    r0.net.connect(1, &card).unwrap();
    r0.net.send(1, &MsgHeader::default(), None, b"for rank 1").unwrap();
    impostor.set_nonblocking(true).unwrap();
    let t0 = Instant::now();
    let mut s = loop {
        r0.step();
        if let Ok((s, _)) = impostor.accept() {
            break s;
        }
        assert!(t0.elapsed() < Duration::from_secs(10), "rank 0 never connected");
    };
    s.set_nonblocking(true).unwrap();
    let mut hello = Vec::new();
    while hello.len() < PREFIX + frame::HELLO {
        r0.step();
        let mut b = [0u8; 64];
        match s.read(&mut b) {
            Ok(n) => hello.extend_from_slice(&b[..n]),
            Err(_) => std::thread::sleep(Duration::from_millis(1)),
        }
        assert!(t0.elapsed() < Duration::from_secs(10), "no HELLO");
    }
    // A challenge whose proof is made with another secret.
    let (rank, nc) = frame::check_hello(hello[..PREFIX + frame::HELLO].try_into().unwrap(), 1, 2).unwrap();
    assert_eq!(rank, 0);
    let na = auth::nonce().unwrap();
    let proof = auth::accept_proof(&JobSecret::generate().unwrap(), 0, 1, &nc, &na);
    s.write_all(&frame::frame(Kind::Challenge, &[&na[..], &proof[..]].concat())).unwrap();
    assert!(closed_by(&mut s, &mut r0, DEAD_AFTER / 2), "rank 0 drops the impostor");
    assert!(r0.gone.is_empty(), "and does not declare rank 1 dead for its bytes");
    let mut rest = [0u8; 64];
    assert!(matches!(s.read(&mut rest), Ok(0) | Err(_)), "no PROOF was sent to it");
}

#[test]
fn forged_heartbeats_neither_revive_nor_kill() {
    let secret = JobSecret::generate().unwrap();
    let (n0, n1, n2) = (node(), node(), node());
    let mut r0 = Rank::new(&n0, 0, 3, &secret, cfg());
    let mut r1 = Rank::new(&n1, 1, 3, &secret, cfg());
    let r2 = Rank::new(&n2, 2, 3, &secret, cfg());
    let (_, udp0) = addrs(&r0.net.card());
    let (_, udp2) = addrs(&r2.net.card());
    let (c0, c1) = (r0.net.card(), r1.net.card());
    r0.net.connect(1, &c1).unwrap();
    r1.net.connect(0, &c0).unwrap();
    r0.net.connect(2, &r2.net.card()).unwrap();
    // Rank 2 vanishes (its heartbeats stop); an attacker beats in its name: with another secret,
    // and replaying a datagram of rank 2's with an old sequence number, from rank 2's own
    // address. Meanwhile it sends rank 0 junk claiming rank 1, who must not die of it.
    drop(r2);
    let at2 = UdpSocket::bind(udp2).unwrap();
    let stranger = BeatKey::new(JobSecret::generate().unwrap());
    let old = BeatKey::new(secret.clone()).seal(2, 1);
    let t0 = Instant::now();
    while !r0.gone.contains(&2) {
        assert!(t0.elapsed() < DEAD_AFTER * 10, "rank 2 kept alive by forged heartbeats");
        let _ = at2.send_to(&stranger.seal(2, u64::MAX), udp0);
        let _ = at2.send_to(&old, udp0);
        let _ = at2.send_to(&[0u8; 32], udp0);
        let _ = at2.send_to(&stranger.seal(1, 0), udp0);
        r0.step();
        r1.step();
        std::thread::sleep(BEAT / 5);
    }
    assert_eq!(r0.gone, [2], "rank 2 found dead, rank 1 not");
    let h = MsgHeader { tag: 9, ..MsgHeader::default() };
    r1.net.send(0, &h, None, b"alive").unwrap();
    drive(&mut [&mut r0, &mut r1], Duration::from_secs(20), |rs| rs[0].tags.is_empty());
    assert_eq!(r0.tags, [9]);
    assert!(r1.gone.is_empty() && r0.gone == [2]);
}
