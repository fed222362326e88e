//! The TCP netmod across a restart of a remote rank (`nemesis-run --ft` over several nodes,
//! issue 13): rank 1 dies; rank 0 gets the death notice after its last message, retires it
//! (`Netmod::retire`); a late connect of the dead incarnation, proving the job's secret, is
//! refused; rank 1's new incarnation connects before rank 0 was told of it and waits (its
//! message is not delivered); once told (`Netmod::restarted`, the launcher's card), rank 0 takes
//! it, both talk, and heartbeats follow the new incarnation (no death declared for the old one's
//! silence or the new one's).

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::{Duration, Instant};

use nemesis_netmod_tcp::TcpConfig;
use nemesis_netmod_tcp::frame::{self, Kind, PREFIX};
use nemesis_shm::MsgHeader;
use nemesis_shm::auth::{self, JobSecret, Step, Transcript};
use nemesis_shm::netmod::Netmod;

#[path = "common/netrank.rs"]
mod netrank;
use netrank::{Rank, addrs, node};

const BEAT: Duration = Duration::from_millis(50);
const DEAD_AFTER: Duration = Duration::from_millis(1000);

fn cfg() -> TcpConfig {
    TcpConfig { addr: Some("127.0.0.1".parse().unwrap()), heartbeat: BEAT, timeout: DEAD_AFTER, ..TcpConfig::default() }
}

/// Polls `ranks` for `d` (or until `until` holds).
fn drive(ranks: &mut [&mut Rank<'_>], d: Duration, mut until: impl FnMut(&mut [&mut Rank<'_>]) -> bool) {
    let t0 = Instant::now();
    while t0.elapsed() < d && !until(ranks) {
        for r in ranks.iter_mut() {
            r.step();
        }
        std::thread::sleep(Duration::from_micros(300));
    }
}

/// A connection claiming incarnation `inc` of rank 1 that proves the job's secret (the connecting
/// side's PROOF over the whole transcript, as the netmod makes it): reads the CHALLENGE, sends the
/// PROOF, then reports whether the acceptor closed it without an answer (true) or answered
/// (false), polling `r` meanwhile.
fn late_connect(to: SocketAddr, r: &mut Rank<'_>, secret: &JobSecret, inc: u32) -> bool {
    let mut s = TcpStream::connect(to).unwrap();
    let nc = auth::nonce().unwrap();
    s.write_all(&frame::frame(Kind::Hello, &frame::hello_of(1, inc, 2, &nc))).unwrap();
    s.set_nonblocking(true).unwrap();
    let mut got = Vec::new();
    let t0 = Instant::now();
    let mut proved = false;
    while t0.elapsed() < Duration::from_secs(10) {
        r.step();
        let mut b = [0u8; 128];
        match s.read(&mut b) {
            Ok(0) => return true,
            Ok(n) => got.extend_from_slice(&b[..n]),
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => std::thread::sleep(Duration::from_millis(1)),
            Err(_) => return true,
        }
        if !proved && got.len() >= PREFIX + frame::CHALLENGE {
            let body: [u8; frame::CHALLENGE] = got[PREFIX..PREFIX + frame::CHALLENGE].try_into().unwrap();
            let (na, to_inc, to_flags) = frame::parse_challenge(&body);
            let t = Transcript {
                from: 1,
                from_inc: inc,
                from_flags: 0,
                nc,
                to: 0,
                to_inc,
                to_flags,
                na,
                dialed: to.to_string(),
            };
            s.write_all(&frame::frame(Kind::Proof, &t.proof(secret, Step::Connect))).unwrap();
            got.drain(..PREFIX + frame::CHALLENGE);
            proved = true;
        } else if proved && !got.is_empty() {
            return false;
        }
    }
    panic!("the late connect was neither refused nor answered");
}

#[test]
fn a_proper_late_connect_is_answered() {
    // The control of the refusals below: the same connection to a rank that knows no death of
    // rank 1 is answered, so a refusal there is the incarnation's, not a malformed handshake's.
    let secret = JobSecret::generate().unwrap();
    let n = node();
    let mut r0 = Rank::new(&n, 0, 2, &secret, cfg());
    let card0 = r0.net.card();
    assert!(!late_connect(addrs(&card0).0, &mut r0, &secret, 0), "a proof of the secret is answered");
}

#[test]
fn a_restarted_remote_rank_is_reached_at_its_new_card_and_its_old_incarnation_is_refused() {
    let secret = JobSecret::generate().unwrap();
    let (n0, n1, n1b) = (node(), node(), node());
    let mut r0 = Rank::new(&n0, 0, 2, &secret, cfg());
    let card0 = r0.net.card();
    let h = |tag| MsgHeader { tag, ..MsgHeader::default() };
    {
        let mut r1 = Rank::new(&n1, 1, 2, &secret, cfg());
        r0.net.connect(1, &r1.net.card()).unwrap();
        r1.net.connect(0, &card0).unwrap();
        r1.net.send(0, &h(1), None, b"first incarnation").unwrap();
        r0.net.send(1, &h(2), None, b"to the first").unwrap();
        drive(&mut [&mut r0, &mut r1], Duration::from_secs(20), |rs| rs[0].tags == [1] && rs[1].tags == [2]);
        assert_eq!((r0.tags.as_slice(), r1.tags.as_slice()), (&[1][..], &[2][..]));
        // Rank 1 dies (its sockets close without BYE).
    }
    drive(&mut [&mut r0], Duration::from_secs(20), |rs| !rs[0].gone.is_empty());
    assert_eq!(r0.gone, [1], "the death notice, after the last message");
    // The launcher asks for the retirement: no second notice for the same death.
    r0.net.retire(1).unwrap();
    drive(&mut [&mut r0], Duration::from_millis(200), |_| false);
    assert_eq!(r0.gone, [1]);
    assert!(matches!(r0.net.send(1, &h(3), None, b"lost"), Err(nemesis_shm::Error::NetPeerDead { rank: 1 })));

    // A late connect of the dead incarnation, with the job's secret: refused.
    assert!(late_connect(addrs(&card0).0, &mut r0, &secret, 0), "the dead incarnation is refused");

    // The new incarnation connects and sends before rank 0 was told: its connection waits.
    let mut r1 = Rank::new(&n1b, 1, 2, &secret, cfg());
    r1.net.set_incarnation(1);
    r1.net.connect(0, &card0).unwrap();
    r1.net.send(0, &h(4), None, b"from the second incarnation").unwrap();
    drive(&mut [&mut r0, &mut r1], Duration::from_millis(300), |_| false);
    assert_eq!(r0.tags, [1], "nothing of the new incarnation before its restart is known");
    // Old news is ignored; the launcher's card of the new incarnation makes the restart known.
    assert!(!r0.net.restarted(1, 0, &r1.net.card()).unwrap());
    assert!(r0.net.restarted(1, 1, &r1.net.card()).unwrap(), "rank 0 had retired it");
    r0.net.send(1, &h(5), None, b"to the second").unwrap();
    drive(&mut [&mut r0, &mut r1], Duration::from_secs(20), |rs| rs[0].tags == [1, 4] && rs[1].tags == [5]);
    assert_eq!((r0.tags.as_slice(), r1.tags.as_slice()), (&[1, 4][..], &[5][..]));
    // An older incarnation still is refused once the new one is up.
    assert!(late_connect(addrs(&card0).0, &mut r0, &secret, 0), "the dead incarnation is refused");

    // Heartbeats follow the new incarnation: no death for the old one's silence, none for the new.
    drive(&mut [&mut r0, &mut r1], DEAD_AFTER * 3, |_| false);
    assert_eq!((r0.gone.as_slice(), r1.gone.as_slice()), (&[1][..], &[][..]));
    r1.net.send(0, &h(6), None, b"still there").unwrap();
    drive(&mut [&mut r0, &mut r1], Duration::from_secs(20), |rs| rs[0].tags.len() == 3);
    assert_eq!(r0.tags, [1, 4, 6]);
}

#[test]
fn a_survivor_dials_a_restarted_rank_and_meets_its_new_incarnation() {
    // The survivor makes the connection this time: the restarted rank's listener must answer as
    // its new incarnation (it was answering as incarnation 0, which the survivor refused until
    // the link timed out).
    let secret = JobSecret::generate().unwrap();
    let (n0, n1, n1b) = (node(), node(), node());
    let mut r0 = Rank::new(&n0, 0, 2, &secret, cfg());
    let card0 = r0.net.card();
    let h = |tag| MsgHeader { tag, ..MsgHeader::default() };
    {
        let mut r1 = Rank::new(&n1, 1, 2, &secret, cfg());
        r0.net.connect(1, &r1.net.card()).unwrap();
        r1.net.connect(0, &card0).unwrap();
        r0.net.send(1, &h(1), None, b"to the first").unwrap();
        drive(&mut [&mut r0, &mut r1], Duration::from_secs(20), |rs| rs[1].tags == [1]);
        assert_eq!(r1.tags, [1]);
    }
    drive(&mut [&mut r0], Duration::from_secs(20), |rs| !rs[0].gone.is_empty());
    assert_eq!(r0.gone, [1]);
    r0.net.retire(1).unwrap();
    let mut r1 = Rank::new(&n1b, 1, 2, &secret, cfg());
    r1.net.set_incarnation(1);
    r1.net.connect(0, &card0).unwrap();
    assert!(r0.net.restarted(1, 1, &r1.net.card()).unwrap());
    r0.net.send(1, &h(2), None, b"to the second").unwrap();
    drive(&mut [&mut r0, &mut r1], Duration::from_secs(20), |rs| rs[1].tags == [2]);
    assert_eq!(r1.tags, [2], "the survivor's message reaches the new incarnation");
    assert_eq!(r0.gone, [1], "no second death");
}
