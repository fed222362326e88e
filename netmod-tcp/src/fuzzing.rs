//! Entry points of the fuzz targets (the workspace's `fuzz/`): the decoding of what a remote peer
//! sends, fed with a fuzzer's bytes. Not part of the API.
//!
//! - [`frames`]: a connection's byte stream (frames, message headers and payloads into cells,
//!   large-message DATA into an expected transfer), as [`TcpNetmod`]'s parser takes it;
//! - [`hello`]: the HELLO and PROOF an accepting side reads from a new connection;
//! - [`card`]: a peer's business card, as the KVS hands it.
//!
//! Neither may panic, loop or touch memory outside what it owns, whatever the bytes: a peer's
//! bytes are refused with a protocol error, never trusted.

use std::cell::RefCell;

use nemesis_shm::auth::{JobSecret, NONCE_BYTES, Step, Transcript};
use nemesis_shm::{HeapNode, Params, Port, PortConfig};

use crate::frame::{self, HELLO, PREFIX};
use crate::peer::{DataRecv, Link, Rx};
use crate::receive::Flow;
use crate::{TcpConfig, TcpNetmod};

/// The process of [`frames`]: one node, port and netmod per thread (the netmod listens on
/// loopback and runs a heartbeat thread: made once), and a large-message buffer.
struct World {
    port: Port<'static, HeapNode>,
    net: TcpNetmod<'static>,
    data: Vec<u8>,
}

thread_local! {
    static WORLD: RefCell<Option<World>> = const { RefCell::new(None) };
}

/// Bytes a transfer of [`frames`] expects.
const DATA_BYTES: usize = 64 << 10;

fn world() -> World {
    let params = Params { cells_per_rank: 16, cell_size: 1024, ..Params::DEFAULT };
    let node: &'static HeapNode = Box::leak(Box::new(HeapNode::new(1, params).expect("heap node")));
    let mut port = Port::new(node, 0, PortConfig::default()).expect("port");
    port.netmod_reserve(8).expect("netmod cells");
    let cfg = TcpConfig { addr: Some([127, 0, 0, 1].into()), ..TcpConfig::default() };
    let net = TcpNetmod::new(0, 2, secret(), cfg).expect("netmod");
    World { port, net, data: vec![0u8; DATA_BYTES] }
}

/// The secret of the fuzzed job (fixed, so that seeds can hold valid proofs).
pub fn secret() -> JobSecret {
    JobSecret::from_hex(&"5a".repeat(32)).expect("a secret")
}

/// Our nonce in the handshakes of [`frames`] (fixed, as [`secret`]).
pub const NONCE: [u8; NONCE_BYTES] = [7; NONCE_BYTES];

/// Parses `data` as the stream rank 1 sent to rank 0. The first byte picks the connection's
/// state (up; our HELLO sent, waiting for CHALLENGE; our PROOF sent, waiting for ACCEPT) and the
/// id of the large message expected.
pub fn frames(data: &[u8]) {
    let Some((&first, stream)) = data.split_first() else { return };
    WORLD.with(|w| {
        let mut w = w.borrow_mut();
        let w = w.get_or_insert_with(world);
        let dst = w.data.as_mut_ptr();
        let p = &mut w.net.peers[1];
        let since = std::time::Instant::now();
        p.link = match first % 3 {
            0 => Link::Up,
            1 => Link::Connecting { since, hello: true, proved: false },
            _ => Link::Connecting { since, hello: true, proved: true },
        };
        p.reset_keys();
        if first % 3 == 2 {
            p.hs = Some(ours());
        }
        let dialed: std::net::SocketAddr = DIALED.parse().expect("an address");
        p.card = Some((dialed, dialed));
        p.nonce = NONCE;
        p.buf = stream.into();
        (p.start, p.end) = (0, stream.len());
        p.rx = Rx::Frame;
        p.recvs.clear();
        p.recvs.push(DataRecv { id: u32::from(first / 3), dst, bytes: DATA_BYTES as u64, got: 0 });
        // Parse until the bytes are used up or refused, taking arrivals out as they come (a
        // bounded number of rounds: each delivers a cell or ends).
        for _ in 0..stream.len() + 2 {
            let flow = w.net.parse(1, &mut w.port);
            let mut any = false;
            while let Ok(Some(inc)) = w.port.poll(&[]) {
                any = true;
                let mut sink = [0u8; 64];
                inc.copy_to(&mut sink);
                if w.port.release(inc).is_err() {
                    break;
                }
            }
            match flow {
                Ok(Flow::Blocked) if any => {}
                _ => break,
            }
        }
        // Cells of a message cut short go back; the connection is forgotten.
        if let Rx::Msg(a) = std::mem::replace(&mut w.net.peers[1].rx, Rx::Frame)
            && let Some(c) = a.into_cell()
        {
            w.net.spare.push(c);
        }
        while let Some(c) = w.net.spare.pop() {
            let _ = w.port.netmod_recycle(c);
        }
        let p = &mut w.net.peers[1];
        p.recvs.clear();
        p.buf = Box::new([]);
        w.net.done.clear();
    });
}

/// The address the fuzzed acceptor's card gives (which proofs of [`hello`] name), and the one
/// [`frames`]' rank 0 dialed for rank 1.
pub const DIALED: &str = "127.0.0.1:4000";

/// Rank 1's nonce in the CHALLENGE of [`frames`] (fixed, as [`secret`]).
pub const PEER_NONCE: [u8; NONCE_BYTES] = [3; NONCE_BYTES];

/// The handshake of [`frames`]' connection from rank 0 to rank 1 once rank 1's CHALLENGE
/// ([`PEER_NONCE`], incarnation 0, no options) came: its ACCEPT's proof is
/// `ours().proof(&secret(), Step::Accept)`.
pub fn ours() -> Transcript {
    Transcript {
        from: 0,
        from_inc: 0,
        from_flags: 0,
        nc: NONCE,
        to: 1,
        to_inc: 0,
        to_flags: 0,
        na: PEER_NONCE,
        dialed: DIALED.into(),
    }
}

/// The transcript of a handshake to rank 0 (incarnation 0, no options, nonce [`NONCE`]) that
/// HELLO body fields `rank`, `inc`, `flags` and `nc` open.
pub fn transcript(rank: u32, inc: u32, flags: u32, nc: [u8; NONCE_BYTES]) -> Transcript {
    Transcript {
        from: rank,
        from_inc: inc,
        from_flags: flags,
        nc,
        to: 0,
        to_inc: 0,
        to_flags: 0,
        na: NONCE,
        dialed: DIALED.into(),
    }
}

/// Checks `data` as the HELLO of a new connection to rank 0 of a job of 4 ranks, then (what
/// follows it) as the PROOF answering our CHALLENGE, as the listener's thread does.
pub fn hello(data: &[u8]) {
    let Some((h, rest)) = data.split_first_chunk::<{ PREFIX + HELLO }>() else { return };
    if let Some((rank, nc)) = frame::check_hello(h, 0, 4) {
        assert!(rank > 0 && rank < 4);
        let t = transcript(rank, frame::hello_incarnation(h), frame::hello_flags(h), nc);
        if let Some((pre, proof)) = rest.split_first_chunk::<PREFIX>() {
            let ok = matches!(frame::parse_prefix(pre), Ok((frame::Kind::Proof, _)))
                && t.check(&secret(), Step::Connect, proof);
            assert!(!ok || proof == t.proof(&secret(), Step::Connect));
        }
    }
}

/// Parses `data` as a business card: an error, or two addresses on one host that print back as
/// a card that parses the same.
pub fn card(data: &[u8]) {
    let Ok(text) = std::str::from_utf8(data) else { return };
    if let Some((tcp, udp)) = crate::parse_card(text) {
        assert_eq!(tcp.ip(), udp.ip());
        let host = if tcp.is_ipv6() { format!("[{}]", tcp.ip()) } else { tcp.ip().to_string() };
        let again = format!("tcp:{host}:{}:{}", tcp.port(), udp.port());
        assert_eq!(crate::parse_card(&again), Some((tcp, udp)), "{again}");
    }
}
