//! The TCP netmod's authentication against a raw socket that does not know the job's secret
//! (`nemesis_shm::auth`): garbage, a HELLO (which earns nothing made with the secret) followed by a
//! proof made with another secret, a recorded proof replayed against a fresh challenge, an
//! impostor listening at a peer's address, a relay forwarding a handshake between two real ranks
//! from an address of its own, and forged heartbeats. Each is dropped or ignored without touching
//! any rank's state (no death notice), and the real peers then talk as if nothing happened. With
//! per-frame MACs on, a byte changed on the way is detected, and messages large and small pass
//! unchanged.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream, UdpSocket};
use std::time::{Duration, Instant};

use nemesis_netmod_tcp::TcpConfig;
use nemesis_netmod_tcp::frame::{self, Kind, PREFIX};
use nemesis_shm::MsgHeader;
use nemesis_shm::auth::{self, BeatKey, JobSecret, NONCE_BYTES, Step, Transcript};
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
/// the acceptor's nonce, incarnation and options.
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

/// The transcript of a handshake of rank `from` with nonce `nc` to rank `to`, listening at
/// `dialed`, which answered CHALLENGE body `ch`.
fn transcript(dialed: SocketAddr, from: u32, to: u32, nc: &[u8; NONCE_BYTES], ch: &[u8]) -> Transcript {
    let (na, to_inc, to_flags) = frame::parse_challenge(ch.try_into().unwrap());
    Transcript { from, from_inc: 0, from_flags: 0, nc: *nc, to, to_inc, to_flags, na, dialed: dialed.to_string() }
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
    assert_eq!(
        ch.len(),
        NONCE_BYTES + 8,
        "a HELLO earns a nonce, an incarnation and options: nothing made with the secret"
    );
    let t = transcript(tcp0, 1, 0, &nc, &ch);
    w.write_all(&frame::frame(Kind::Proof, &t.proof(&stranger, Step::Connect))).unwrap();
    assert!(closed_by(&mut w, &mut r0, Duration::from_secs(10)), "a proof with another secret is refused");

    // A recorded proof (valid for an earlier challenge) replayed against a fresh one.
    let mut first = TcpStream::connect(tcp0).unwrap();
    let ch1 = hello(&mut first, &mut r0, 2, 3, &nc);
    let recorded = transcript(tcp0, 2, 0, &nc, &ch1).proof(&secret, Step::Connect);
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
    // The impostor challenges: rank 0 proves first, but its proof names the impostor's address
    // (the one it dialed): it verifies for no real rank's listener.
    let (rank, nc) = frame::check_hello(hello[..PREFIX + frame::HELLO].try_into().unwrap(), 1, 2).unwrap();
    assert_eq!(rank, 0);
    let na = auth::nonce().unwrap();
    s.write_all(&frame::frame(Kind::Challenge, &frame::challenge(&na, 0, 0))).unwrap();
    let mut proof = Vec::new();
    while proof.len() < PREFIX + frame::PROOF {
        r0.step();
        let mut b = [0u8; 64];
        match s.read(&mut b[..PREFIX + frame::PROOF - proof.len()]) {
            Ok(0) => panic!("closed before PROOF"),
            Ok(n) => proof.extend_from_slice(&b[..n]),
            Err(_) => std::thread::sleep(Duration::from_millis(1)),
        }
        assert!(t0.elapsed() < Duration::from_secs(10), "no PROOF");
    }
    let ch = frame::challenge(&na, 0, 0);
    let mut t = transcript(impostor.local_addr().unwrap(), 0, 1, &nc, &ch);
    assert!(t.check(&secret, Step::Connect, &proof[PREFIX..]), "the proof is for the impostor's address");
    t.dialed = "127.0.0.1:1".into();
    assert!(!t.check(&secret, Step::Connect, &proof[PREFIX..]), "and for no other");
    // An ACCEPT whose proof is made with another secret: dropped, no death.
    let forged =
        transcript(impostor.local_addr().unwrap(), 0, 1, &nc, &ch).proof(&JobSecret::generate().unwrap(), Step::Accept);
    s.write_all(&frame::frame(Kind::Accept, &forged)).unwrap();
    assert!(closed_by(&mut s, &mut r0, DEAD_AFTER / 2), "rank 0 drops the impostor");
    assert!(r0.gone.is_empty(), "and does not declare rank 1 dead for its bytes");
}

/// Forwards what is readable between `a` and `b` (both non-blocking); false once either closed.
fn forward(a: &mut TcpStream, b: &mut TcpStream) -> bool {
    let mut open = true;
    for flip in [false, true] {
        let (from, to) = if flip { (&mut *b, &mut *a) } else { (&mut *a, &mut *b) };
        let mut buf = [0u8; 4096];
        match from.read(&mut buf) {
            Ok(0) => open = false,
            Ok(n) => {
                to.set_nonblocking(false).unwrap();
                open &= to.write_all(&buf[..n]).is_ok();
                to.set_nonblocking(true).unwrap();
            }
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {}
            Err(_) => open = false,
        }
    }
    open
}

/// A MSG frame claiming `src` to `dst`, tag `tag` (no MAC: the link has none).
fn injected(src: u32, dst: u32, tag: i32) -> Vec<u8> {
    let body = b"injected";
    let h = MsgHeader { src, dst, tag, len: body.len() as u32, ..MsgHeader::default() };
    [&frame::prefix(Kind::Msg, nemesis_shm::cell::HEADER_BYTES + body.len())[..], &frame::header_bytes(&h), body]
        .concat()
}

#[test]
fn a_relay_between_two_ranks_is_authenticated_as_neither() {
    let secret = JobSecret::generate().unwrap();
    let (n0, n1) = (node(), node());
    let mut r0 = Rank::new(&n0, 0, 2, &secret, cfg());
    let mut r1 = Rank::new(&n1, 1, 2, &secret, cfg());
    let (tcp1, udp1) = addrs(&r1.net.card());
    r1.net.connect(0, &r0.net.card()).unwrap();
    // Rank 0 reaches rank 1 through the attacker's address (a squatted port, a redirected
    // name): the attacker relays rank 0's handshake to rank 1's real listener and rank 1's
    // answers back, then speaks on both connections as the rank at the other end.
    let relay = TcpListener::bind("127.0.0.1:0").unwrap();
    relay.set_nonblocking(true).unwrap();
    r0.net.connect(1, &format!("tcp:127.0.0.1:{}:{}", relay.local_addr().unwrap().port(), udp1.port())).unwrap();
    r0.net.send(1, &MsgHeader { tag: 1, ..MsgHeader::default() }, None, b"for rank 1").unwrap();
    let t0 = Instant::now();
    let mut a = loop {
        r0.step();
        r1.step();
        if let Ok((s, _)) = relay.accept() {
            break s;
        }
        assert!(t0.elapsed() < Duration::from_secs(10), "rank 0 never connected");
    };
    let mut b = TcpStream::connect(tcp1).unwrap();
    a.set_nonblocking(true).unwrap();
    b.set_nonblocking(true).unwrap();
    let mut open = true;
    while t0.elapsed() < DEAD_AFTER / 2 && open {
        r0.step();
        r1.step();
        open = forward(&mut a, &mut b);
        std::thread::sleep(Duration::from_micros(200));
    }
    // Whatever became of the handshake, the attacker speaks: to rank 1 as rank 0, to rank 0 as
    // rank 1.
    let _ = b.write_all(&injected(0, 1, 666));
    let _ = a.write_all(&injected(1, 0, 777));
    let t1 = Instant::now();
    while t1.elapsed() < DEAD_AFTER / 3 {
        r0.step();
        r1.step();
        let _ = forward(&mut a, &mut b);
        std::thread::sleep(Duration::from_micros(200));
    }
    assert!(r1.tags.is_empty(), "rank 1 took messages through the relay as rank 0's: {:?}", r1.tags);
    assert!(r0.tags.is_empty(), "rank 0 took messages from the relay as rank 1's: {:?}", r0.tags);
    assert!(r1.gone.is_empty() && r0.gone.is_empty(), "no death for the relay's bytes: {:?} {:?}", r0.gone, r1.gone);
}

/// A forwarder in front of `to`: joins each connection it accepts to a new one to `to`, and
/// flips the lowest bit of byte `flip` (counted from the start) of what the connecting side
/// sends, if given.
fn forwarder(to: SocketAddr, flip: Option<usize>) -> SocketAddr {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let at = l.local_addr().unwrap();
    std::thread::spawn(move || {
        for c in l.incoming() {
            let Ok(c) = c else { return };
            let Ok(s) = TcpStream::connect(to) else { return };
            let pipe = |mut from: TcpStream, mut to: TcpStream, flip: Option<usize>| {
                std::thread::spawn(move || {
                    let (mut buf, mut seen) = ([0u8; 65536], 0usize);
                    while let Ok(n) = from.read(&mut buf) {
                        if n == 0 {
                            break;
                        }
                        if let Some(f) = flip.filter(|&f| f >= seen && f < seen + n) {
                            buf[f - seen] ^= 1;
                        }
                        seen += n;
                        if to.write_all(&buf[..n]).is_err() {
                            break;
                        }
                    }
                    let _ = to.shutdown(std::net::Shutdown::Write);
                })
            };
            pipe(c.try_clone().unwrap(), s.try_clone().unwrap(), flip);
            pipe(s, c, None);
        }
    });
    at
}

/// Two ranks whose link has per-frame MACs, rank 1 reached through a forwarder that flips byte
/// `flip` of what rank 0 sends.
fn through_forwarder<'n>(
    n0: &'n nemesis_shm::HeapNode,
    n1: &'n nemesis_shm::HeapNode,
    flip: Option<usize>,
) -> (Rank<'n>, Rank<'n>) {
    let secret = JobSecret::generate().unwrap();
    let c = TcpConfig { integrity: true, ..cfg() };
    let mut r0 = Rank::new(n0, 0, 2, &secret, c.clone());
    let mut r1 = Rank::new(n1, 1, 2, &secret, c);
    let (tcp1, _) = addrs(&r1.net.card());
    r1.net.advertise(forwarder(tcp1, flip));
    r0.net.connect(1, &r1.net.card()).unwrap();
    r1.net.connect(0, &r0.net.card()).unwrap();
    (r0, r1)
}

#[test]
fn with_integrity_on_a_flipped_byte_is_detected_and_nothing_of_it_delivered() {
    // Rank 0's bytes: HELLO and PROOF, then its first message: prefix, header, payload. The
    // forwarder flips a bit of the header's tag (a field nothing else checks).
    let tag_at = MsgHeader { tag: 0x0a0b_0c0d, ..MsgHeader::default() }
        .to_bytes()
        .windows(4)
        .position(|w| w == 0x0a0b_0c0du32.to_le_bytes())
        .unwrap();
    let flip = 2 * PREFIX + frame::HELLO + frame::PROOF + PREFIX + tag_at;
    let (n0, n1) = (node(), node());
    let (mut r0, mut r1) = through_forwarder(&n0, &n1, Some(flip));
    r0.net.send(1, &MsgHeader { tag: 2, ..MsgHeader::default() }, None, b"changed on the way").unwrap();
    drive(&mut [&mut r0, &mut r1], Duration::from_secs(20), |rs| rs[1].gone.is_empty());
    assert_eq!(r1.gone, [0], "the changed frame ends the link");
    assert!(r1.tags.is_empty(), "nothing of the changed message is delivered: {:?}", r1.tags);

    // Untouched, messages of every size pass both ways under MACs, through many frames.
    let (n2, n3) = (node(), node());
    let (mut r0, mut r1) = through_forwarder(&n2, &n3, None);
    let big = vec![7u8; 100_000];
    for i in 0..20 {
        let body = if i % 4 == 3 { &big[..] } else { &big[..i * 10] };
        r0.net.send(1, &MsgHeader { tag: i as i32, ..MsgHeader::default() }, None, body).unwrap();
        r1.net.send(0, &MsgHeader { tag: i as i32, ..MsgHeader::default() }, None, body).unwrap();
    }
    drive(&mut [&mut r0, &mut r1], Duration::from_secs(30), |rs| rs[0].tags.len() < 20 || rs[1].tags.len() < 20);
    assert_eq!(r1.tags, (0..20).collect::<Vec<_>>());
    assert_eq!(r0.tags, (0..20).collect::<Vec<_>>());
    assert!(r0.gone.is_empty() && r1.gone.is_empty());
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

#[test]
fn with_integrity_large_messages_pass_and_a_changed_data_byte_fails_the_transfer() {
    use nemesis_lmt::{LmtBackend, Outcome};
    let len = 3usize << 20;
    let src: Vec<u8> = (0..len).map(|i| (i * 7 + i / 4096) as u8).collect();
    // A byte two MiB into what rank 0 sends: inside a DATA frame.
    for flip in [None, Some(2 << 20)] {
        let (n0, n1) = (node(), node());
        let (mut r0, mut r1) = through_forwarder(&n0, &n1, flip);
        let mut dst = vec![0u8; len];
        let (mut sent, mut got) = (None, None);
        // SAFETY: `src` and `dst` outlive the transfer (the netmods are dropped first).
        unsafe {
            r1.net.start_recv(0, 5, dst.as_mut_ptr(), len as u64, None).unwrap();
            r0.net.start_send(1, 5, src.as_ptr(), len as u64).unwrap();
        }
        let t0 = Instant::now();
        while got.is_none() || (sent.is_none() && flip.is_none()) {
            assert!(t0.elapsed() < Duration::from_secs(60), "the transfer did not end");
            r0.step();
            r1.step();
            sent = sent.or(r0.net.take_lmt_done().into_iter().find(|d| d.id == 5).map(|d| d.outcome));
            got = got.or(r1.net.take_lmt_done().into_iter().find(|d| d.id == 5).map(|d| d.outcome));
        }
        match flip {
            None => {
                assert!(matches!(got, Some(Outcome::Moved { bytes }) if bytes == len as u64), "{got:?}");
                assert!(matches!(sent, Some(Outcome::Moved { .. })), "{sent:?}");
                assert!(dst == src, "the bytes arrived as sent");
                assert!(r0.gone.is_empty() && r1.gone.is_empty());
            }
            Some(_) => {
                assert!(matches!(got, Some(Outcome::Failed(_))), "a changed frame fails the transfer: {got:?}");
                drive(&mut [&mut r0, &mut r1], Duration::from_secs(10), |rs| rs[1].gone.is_empty());
                assert_eq!(r1.gone, [0]);
            }
        }
        drop((r0, r1));
    }
}
