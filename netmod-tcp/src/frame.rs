//! The TCP netmod's frames. Every frame starts with an 8-byte prefix
//! `[type u8][version u8][0 u16][body length u32]` (little-endian), then its body:
//! - HELLO: `[rank u32][job size u32][incarnation u32][options u32][nonce 16]`, from the
//!   connecting side (the incarnation: how many times its rank number was restarted, `nemesis-run
//!   --ft`; options bit 0: per-frame MACs wanted);
//! - CHALLENGE: `[nonce 16][incarnation u32][options u32]`, the accepting side's answer: nothing
//!   made with the job's secret, so a stranger's HELLO earns nothing;
//! - PROOF: `[proof 32]`, the connecting side's proof of the job's secret over the whole
//!   transcript ([`nemesis_shm::auth::Transcript`], step `Connect`): it proves first;
//! - ACCEPT, REJECT: `[proof 32]`, the accepting side's answer once the PROOF verified, with its
//!   own proof (steps `Accept`, `Reject`; REJECT settles simultaneous connects);
//! - MSG: the 32-byte message header as in a cell (native byte order: both ends run this build),
//!   the 32-byte fault-tolerance room if the header's piggyback flag is set, then the payload;
//! - DATA: `[transfer id u32][0 u32][offset u64]` then bytes of a large message, streamed from the
//!   sender's buffer into the receiver's;
//! - BYE: empty; the sender finalizes and sends nothing more.
//!
//! On a link with per-frame MACs (either side asked), every frame after ACCEPT is followed by a
//! [`TAG`]-byte tag (`nemesis_shm::auth::StreamKey`) not counted in its prefix's length.
//!
//! A peer's bytes are never trusted: lengths are checked against what the frame type allows
//! before anything is read or allocated.

use nemesis_shm::MsgHeader;
use nemesis_shm::auth::{FRAME_TAG, MAC_BYTES, NONCE_BYTES};
use nemesis_shm::cell::HEADER_BYTES;

/// Version of this framing (3: the connecting side proves first, every proof covers the whole
/// transcript, per-frame MACs).
pub const VERSION: u8 = 3;
/// Bytes of the prefix.
pub const PREFIX: usize = 8;
/// Bytes of a HELLO body.
pub const HELLO: usize = 16 + NONCE_BYTES;
/// Bytes of a CHALLENGE body.
pub const CHALLENGE: usize = NONCE_BYTES + 8;
/// Bytes of a PROOF body, and of an ACCEPT's or a REJECT's.
pub const PROOF: usize = MAC_BYTES;
/// Bytes of a per-frame MAC, after each frame on a link with them.
pub const TAG: usize = FRAME_TAG;
/// Bytes of a DATA sub-header.
pub const DATA_HEAD: usize = 16;
/// Largest DATA frame: a large message goes in frames of this size, so that messages queued
/// behind it are not held for the whole transfer.
pub const DATA_FRAME: usize = 1 << 20;

/// Frame types.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    Hello = 1,
    Accept = 2,
    Reject = 3,
    Msg = 4,
    Data = 5,
    Bye = 6,
    Challenge = 7,
    Proof = 8,
}

impl Kind {
    fn from_code(c: u8) -> Option<Kind> {
        Some(match c {
            1 => Kind::Hello,
            2 => Kind::Accept,
            3 => Kind::Reject,
            4 => Kind::Msg,
            5 => Kind::Data,
            6 => Kind::Bye,
            7 => Kind::Challenge,
            8 => Kind::Proof,
            _ => return None,
        })
    }
}

/// A prefix.
pub fn prefix(kind: Kind, body: usize) -> [u8; PREFIX] {
    let mut p = [0u8; PREFIX];
    p[0] = kind as u8;
    p[1] = VERSION;
    p[4..8].copy_from_slice(&(body as u32).to_le_bytes());
    p
}

/// Decodes a prefix: the frame type and its body length, or what is wrong with it.
pub fn parse_prefix(p: &[u8; PREFIX]) -> Result<(Kind, usize), String> {
    let kind = Kind::from_code(p[0]).ok_or_else(|| format!("unknown frame type {}", p[0]))?;
    if p[1] != VERSION {
        return Err(format!("frame version {} (this build speaks {VERSION})", p[1]));
    }
    let len = u32::from_le_bytes([p[4], p[5], p[6], p[7]]) as usize;
    let ok = match kind {
        Kind::Hello => len == HELLO,
        Kind::Challenge => len == CHALLENGE,
        Kind::Proof | Kind::Accept | Kind::Reject => len == PROOF,
        Kind::Bye => len == 0,
        Kind::Msg => len >= HEADER_BYTES,
        Kind::Data => len > DATA_HEAD && len <= DATA_HEAD + DATA_FRAME,
    };
    if !ok {
        return Err(format!("{kind:?} frame of {len} bytes"));
    }
    Ok((kind, len))
}

/// A HELLO body of a rank's first incarnation.
pub fn hello(rank: u32, size: u32, nonce: &[u8; NONCE_BYTES]) -> [u8; HELLO] {
    hello_of(rank, 0, size, nonce)
}

/// A HELLO body of incarnation `incarnation` of `rank`, without options.
pub fn hello_of(rank: u32, incarnation: u32, size: u32, nonce: &[u8; NONCE_BYTES]) -> [u8; HELLO] {
    hello_with(rank, incarnation, 0, size, nonce)
}

/// A HELLO body of incarnation `incarnation` of `rank` with options `flags`.
pub fn hello_with(rank: u32, incarnation: u32, flags: u32, size: u32, nonce: &[u8; NONCE_BYTES]) -> [u8; HELLO] {
    let mut b = [0u8; HELLO];
    b[0..4].copy_from_slice(&rank.to_le_bytes());
    b[4..8].copy_from_slice(&size.to_le_bytes());
    b[8..12].copy_from_slice(&incarnation.to_le_bytes());
    b[12..16].copy_from_slice(&flags.to_le_bytes());
    b[16..].copy_from_slice(nonce);
    b
}

/// The options a HELLO frame (prefix and body) names.
pub fn hello_flags(b: &[u8; PREFIX + HELLO]) -> u32 {
    u32::from_le_bytes([b[PREFIX + 12], b[PREFIX + 13], b[PREFIX + 14], b[PREFIX + 15]])
}

/// A CHALLENGE body: the accepting side's nonce, incarnation and options.
pub fn challenge(nonce: &[u8; NONCE_BYTES], incarnation: u32, flags: u32) -> [u8; CHALLENGE] {
    let mut b = [0u8; CHALLENGE];
    b[..NONCE_BYTES].copy_from_slice(nonce);
    b[NONCE_BYTES..NONCE_BYTES + 4].copy_from_slice(&incarnation.to_le_bytes());
    b[NONCE_BYTES + 4..].copy_from_slice(&flags.to_le_bytes());
    b
}

/// Decodes a CHALLENGE body: `(nonce, incarnation, options)`.
pub fn parse_challenge(b: &[u8; CHALLENGE]) -> ([u8; NONCE_BYTES], u32, u32) {
    let mut nonce = [0u8; NONCE_BYTES];
    nonce.copy_from_slice(&b[..NONCE_BYTES]);
    let w = |i: usize| u32::from_le_bytes([b[i], b[i + 1], b[i + 2], b[i + 3]]);
    (nonce, w(NONCE_BYTES), w(NONCE_BYTES + 4))
}

/// Decodes a HELLO body: `(rank, size, nonce)`.
pub fn parse_hello(b: &[u8; HELLO]) -> (u32, u32, [u8; NONCE_BYTES]) {
    let w = |i: usize| u32::from_le_bytes([b[i], b[i + 1], b[i + 2], b[i + 3]]);
    let mut nonce = [0u8; NONCE_BYTES];
    nonce.copy_from_slice(&b[16..]);
    (w(0), w(4), nonce)
}

/// The incarnation a HELLO frame (prefix and body) names.
pub fn hello_incarnation(b: &[u8; PREFIX + HELLO]) -> u32 {
    u32::from_le_bytes([b[PREFIX + 8], b[PREFIX + 9], b[PREFIX + 10], b[PREFIX + 11]])
}

/// Checks the HELLO frame (prefix and body) of a connection to rank `me` of a job of `size`
/// ranks: the rank it claims and its nonce, or `None` if it is not a HELLO naming another rank
/// of a job of that size. Nothing is proved yet: the claim is checked by the PROOF that follows.
pub fn check_hello(b: &[u8; PREFIX + HELLO], me: u32, size: u32) -> Option<(u32, [u8; NONCE_BYTES])> {
    let (prefix, body) = b.split_first_chunk::<PREFIX>()?;
    let (rank, sz, nonce) = parse_hello(body.try_into().ok()?);
    let valid = matches!(parse_prefix(prefix), Ok((Kind::Hello, _))) && sz == size && rank < size && rank != me;
    valid.then_some((rank, nonce))
}

/// A whole frame of `kind` with `body`.
pub fn frame(kind: Kind, body: &[u8]) -> Vec<u8> {
    let mut f = prefix(kind, body.len()).to_vec();
    f.extend_from_slice(body);
    f
}

/// A DATA prefix and sub-header for `bytes` bytes of transfer `id` at `offset`.
pub fn data_head(id: u32, offset: u64, bytes: usize) -> [u8; PREFIX + DATA_HEAD] {
    let mut h = [0u8; PREFIX + DATA_HEAD];
    h[..PREFIX].copy_from_slice(&prefix(Kind::Data, DATA_HEAD + bytes));
    h[PREFIX..PREFIX + 4].copy_from_slice(&id.to_le_bytes());
    h[PREFIX + 8..PREFIX + 16].copy_from_slice(&offset.to_le_bytes());
    h
}

/// Decodes a DATA sub-header: `(id, offset)`.
pub fn parse_data_head(b: &[u8]) -> (u32, u64) {
    let id = u32::from_le_bytes([b[0], b[1], b[2], b[3]]);
    let mut o = [0u8; 8];
    o.copy_from_slice(&b[8..16]);
    (id, u64::from_le_bytes(o))
}

/// The bytes of a message header.
pub fn header_bytes(h: &MsgHeader) -> [u8; HEADER_BYTES] {
    h.to_bytes()
}

/// A message header from its bytes (any bit pattern is a header; its fields are checked by the
/// caller); `b` holds at least `HEADER_BYTES` bytes.
pub fn parse_header(b: &[u8]) -> MsgHeader {
    MsgHeader::from_bytes(b).unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn frames_round_trip_and_bad_prefixes_are_refused() {
        for (k, len) in [(Kind::Hello, HELLO), (Kind::Accept, PROOF), (Kind::Msg, 40), (Kind::Data, 17), (Kind::Bye, 0)]
        {
            assert_eq!(parse_prefix(&prefix(k, len)).unwrap(), (k, len));
        }
        assert!(parse_prefix(&prefix(Kind::Hello, 3)).is_err());
        assert!(parse_prefix(&prefix(Kind::Msg, 31)).is_err());
        assert!(parse_prefix(&prefix(Kind::Data, DATA_HEAD)).is_err());
        assert!(parse_prefix(&prefix(Kind::Data, DATA_HEAD + DATA_FRAME + 1)).is_err());
        let mut p = prefix(Kind::Bye, 0);
        p[1] = 9;
        assert!(parse_prefix(&p).is_err());
        p[0] = 0;
        assert!(parse_prefix(&p).is_err());
        assert_eq!(parse_hello(&hello(3, 8, &[9; NONCE_BYTES])), (3, 8, [9; NONCE_BYTES]));
        let h = frame(Kind::Hello, &hello_of(3, 7, 8, &[9; NONCE_BYTES]));
        assert_eq!(hello_incarnation(h[..].try_into().unwrap()), 7);
        assert_eq!(check_hello(h[..].try_into().unwrap(), 0, 8), Some((3, [9; NONCE_BYTES])));
        let h = frame(Kind::Hello, &hello_with(3, 7, 1, 8, &[9; NONCE_BYTES]));
        assert_eq!(hello_flags(h[..].try_into().unwrap()), 1);
        assert_eq!(parse_challenge(&challenge(&[4; NONCE_BYTES], 5, 1)), ([4; NONCE_BYTES], 5, 1));
        assert!(parse_prefix(&prefix(Kind::Accept, 0)).is_err(), "an ACCEPT carries a proof");
        for (k, len) in
            [(Kind::Challenge, CHALLENGE), (Kind::Proof, PROOF), (Kind::Accept, PROOF), (Kind::Reject, PROOF)]
        {
            assert_eq!(parse_prefix(&prefix(k, len)).unwrap(), (k, len));
            assert!(parse_prefix(&prefix(k, len - 1)).is_err());
        }
        let d = data_head(7, 1 << 40, 100);
        assert_eq!(parse_prefix(d[..PREFIX].try_into().unwrap()).unwrap(), (Kind::Data, DATA_HEAD + 100));
        assert_eq!(parse_data_head(&d[PREFIX..]), (7, 1 << 40));
        let h = MsgHeader { src: 1, dst: 2, tag: 3, context: 4, len: 5, kind: 6, aux: 7, ..MsgHeader::default() };
        assert_eq!(parse_header(&header_bytes(&h)), h);
    }
}
