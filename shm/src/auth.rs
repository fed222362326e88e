//! Job authentication for the netmods: a random per-job secret and what is made of it. Between
//! ranks only keyed MACs of it travel (HMAC-SHA256 over fresh values; keyed BLAKE3 per frame);
//! the secret itself reaches the ranks from `nemesis-run` or, under another process manager,
//! through that process manager's KVS (`docs/security.md`).
//!
//! - [`JobSecret`]: 256 random bits from the kernel (`getrandom`), never derived from names or
//!   pids. `nemesis-run` makes one per job and gives it to its ranks in `NEMESIS_JOB_SECRET`
//!   (removed from a rank's environment at start-up, with `PMI_*`); under another process manager
//!   rank 0 makes it and publishes it in the job's KVS, which only the job's processes read.
//! - The connection handshake ([`Transcript`], the TCP netmod's): the connecting rank sends its
//!   rank, incarnation and a nonce (HELLO); the accepting rank answers its nonce and incarnation
//!   and nothing made with the secret (CHALLENGE); the connecting rank proves first (PROOF, a MAC
//!   over the whole transcript: both ranks, both incarnations, both nonces, both sides' options
//!   and the address it dialed), then the accepting rank (ACCEPT or REJECT, a MAC over the same
//!   with its own label). A stranger's HELLO gets no MAC at all; a proof made for one address does
//!   not verify at another, so a party that relays a handshake between two ranks from an address
//!   of its own is refused; fresh nonces on both sides: a recorded handshake replayed does not
//!   verify. Each link then has two stream keys ([`StreamKey`], one per direction) for per-frame
//!   MACs.
//! - Heartbeats ([`BeatKey`]): `[magic][rank][sequence][MAC over the three]`, the sequence
//!   strictly increasing per sender, so a datagram replayed, or claiming another rank, does not
//!   count.

use hmac::{Hmac, Mac};
use sha2::Sha256;

use crate::error::{Error, Result};

/// Bytes of a job secret (256 bits).
pub const SECRET_BYTES: usize = 32;
/// Bytes of a handshake nonce.
pub const NONCE_BYTES: usize = 16;
/// Bytes of a handshake MAC (HMAC-SHA256).
pub const MAC_BYTES: usize = 32;
/// The environment variable `nemesis-run` hands the secret in (hexadecimal).
pub const ENV_JOB_SECRET: &str = "NEMESIS_JOB_SECRET";
/// The KVS key the secret is published under when rank 0 makes it.
pub const KVS_JOB_SECRET: &str = "nemesis-job-secret";

type HmacSha256 = Hmac<Sha256>;

/// A job's secret. Its `Debug` does not show it.
#[derive(Clone, PartialEq, Eq)]
pub struct JobSecret([u8; SECRET_BYTES]);

impl std::fmt::Debug for JobSecret {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("JobSecret(..)")
    }
}

impl JobSecret {
    /// A new secret from the kernel's random source.
    pub fn generate() -> Result<JobSecret> {
        let mut b = [0u8; SECRET_BYTES];
        crate::os::random_bytes(&mut b)?;
        Ok(JobSecret(b))
    }

    /// The secret as 64 hexadecimal digits (for the environment or the KVS).
    pub fn to_hex(&self) -> String {
        self.0.iter().map(|b| format!("{b:02x}")).collect()
    }

    /// Parses 64 hexadecimal digits.
    pub fn from_hex(s: &str) -> Result<JobSecret> {
        let s = s.trim();
        let bad = || Error::Net(format!("a job secret is {} hexadecimal digits", 2 * SECRET_BYTES));
        if s.len() != 2 * SECRET_BYTES || !s.is_ascii() {
            return Err(bad());
        }
        let mut b = [0u8; SECRET_BYTES];
        for (i, out) in b.iter_mut().enumerate() {
            *out = u8::from_str_radix(&s[2 * i..2 * i + 2], 16).map_err(|_| bad())?;
        }
        Ok(JobSecret(b))
    }

    /// The secret in `NEMESIS_JOB_SECRET`, if set.
    pub fn from_env() -> Result<Option<JobSecret>> {
        match std::env::var(ENV_JOB_SECRET) {
            Ok(v) => Self::from_hex(&v).map(Some).map_err(|e| Error::Net(format!("{ENV_JOB_SECRET}: {e}"))),
            Err(_) => Ok(None),
        }
    }

    fn hmac(&self, label: &[u8], parts: &[&[u8]]) -> HmacSha256 {
        // HMAC takes a key of any length: `new_from_slice` cannot fail.
        let mut m = HmacSha256::new_from_slice(&self.0).unwrap_or_else(|_| unreachable!("HMAC takes any key"));
        m.update(&(label.len() as u32).to_le_bytes());
        m.update(label);
        for p in parts {
            m.update(&(p.len() as u32).to_le_bytes());
            m.update(p);
        }
        m
    }

    /// HMAC-SHA256 of `label` and `parts` (each length-prefixed: no two inputs collide).
    pub fn mac(&self, label: &[u8], parts: &[&[u8]]) -> [u8; MAC_BYTES] {
        self.hmac(label, parts).finalize().into_bytes().into()
    }

    /// Whether `tag` is the MAC of `label` and `parts`, or its first `tag.len()` bytes (at least
    /// 16), compared in constant time.
    pub fn verify(&self, label: &[u8], parts: &[&[u8]], tag: &[u8]) -> bool {
        tag.len() >= 16 && self.hmac(label, parts).verify_truncated_left(tag).is_ok()
    }
}

/// A fresh nonce.
pub fn nonce() -> Result<[u8; NONCE_BYTES]> {
    let mut n = [0u8; NONCE_BYTES];
    crate::os::random_bytes(&mut n)?;
    Ok(n)
}

const BEAT: &[u8] = b"nemesis-netmod heartbeat v1";

const CONNECT_V3: &[u8] = b"nemesis-netmod connect v3";
const ACCEPT_V3: &[u8] = b"nemesis-netmod accept v3";
const REJECT_V3: &[u8] = b"nemesis-netmod reject v3";
const STREAM_UP: &[u8] = b"nemesis-netmod stream connector-to-acceptor v3";
const STREAM_DOWN: &[u8] = b"nemesis-netmod stream acceptor-to-connector v3";

/// Which message of a handshake a proof is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Step {
    /// The connecting side's PROOF (sent first).
    Connect,
    /// The accepting side's ACCEPT.
    Accept,
    /// The accepting side's REJECT (it keeps its own attempt: simultaneous connects).
    Reject,
}

/// Everything a connection's handshake said, which both proofs and the stream keys cover.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Transcript {
    /// The connecting rank, its incarnation, its options (bit 0: per-frame MACs) and nonce.
    pub from: u32,
    pub from_inc: u32,
    pub from_flags: u32,
    pub nc: [u8; NONCE_BYTES],
    /// The accepting rank, its incarnation, its options and nonce.
    pub to: u32,
    pub to_inc: u32,
    pub to_flags: u32,
    pub na: [u8; NONCE_BYTES],
    /// The address the connecting side dialed, as the accepting rank's card gives it (the
    /// accepting side checks it against its own card): a proof made for a connection to another
    /// address (a relay's) does not verify.
    pub dialed: String,
}

impl Transcript {
    fn mac(&self, s: &JobSecret, label: &[u8]) -> HmacSha256 {
        let words = [self.from, self.from_inc, self.from_flags, self.to, self.to_inc, self.to_flags];
        let mut w = [0u8; 24];
        for (i, v) in words.iter().enumerate() {
            w[4 * i..4 * i + 4].copy_from_slice(&v.to_le_bytes());
        }
        s.hmac(label, &[&w, &self.nc, &self.na, self.dialed.as_bytes()])
    }

    fn label(step: Step) -> &'static [u8] {
        match step {
            Step::Connect => CONNECT_V3,
            Step::Accept => ACCEPT_V3,
            Step::Reject => REJECT_V3,
        }
    }

    /// The proof of `step` for this transcript.
    pub fn proof(&self, s: &JobSecret, step: Step) -> [u8; MAC_BYTES] {
        self.mac(s, Self::label(step)).finalize().into_bytes().into()
    }

    /// Whether `tag` is the proof of `step` for this transcript, whole, compared in constant time.
    pub fn check(&self, s: &JobSecret, step: Step, tag: &[u8]) -> bool {
        tag.len() == MAC_BYTES && self.mac(s, Self::label(step)).verify_slice(tag).is_ok()
    }

    /// Whether the link asked for per-frame MACs (either side's option bit 0).
    pub fn integrity(&self) -> bool {
        (self.from_flags | self.to_flags) & FLAG_INTEGRITY != 0
    }

    /// The link's stream keys: `(connector to acceptor, acceptor to connector)`, derived from the
    /// secret and the whole transcript (fresh for every connection).
    pub fn stream_keys(&self, s: &JobSecret) -> (StreamKey, StreamKey) {
        let key = |label: &[u8]| -> [u8; MAC_BYTES] { self.mac(s, label).finalize().into_bytes().into() };
        (StreamKey::new(&key(STREAM_UP)), StreamKey::new(&key(STREAM_DOWN)))
    }
}

/// Option bit of a handshake: per-frame MACs on the link.
pub const FLAG_INTEGRITY: u32 = 1;

/// Bytes of a per-frame MAC (keyed BLAKE3, truncated).
pub const FRAME_TAG: usize = 16;

/// One direction of a link's per-frame MACs: frame number `seq` (counted from 0 in each
/// direction) is tagged with keyed BLAKE3(key, seq ‖ frame bytes), truncated. A frame changed,
/// dropped, replayed or reordered does not verify. BLAKE3 in its keyed mode is a PRF, so a MAC;
/// it is used here rather than HMAC-SHA256 for its speed on long frames (its SIMD tree hashing):
/// 1 MiB messages over loopback with per-frame MACs ran at 0.28 × the bandwidth without them
/// under HMAC-SHA256 (with SHA-NI), at 0.59 × under BLAKE3 (AVX-512), medians of 9 interleaved
/// rounds each (netmod-tcp's `integrity_cost` example).
#[derive(Clone)]
pub struct StreamKey(blake3::Hasher);

impl std::fmt::Debug for StreamKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("StreamKey(..)")
    }
}

impl StreamKey {
    fn new(key: &[u8; MAC_BYTES]) -> StreamKey {
        StreamKey(blake3::Hasher::new_keyed(key))
    }

    /// Starts the MAC of frame `seq`.
    pub fn begin(&self, seq: u64) -> FrameMac {
        let mut m = self.0.clone();
        m.update(&seq.to_le_bytes());
        FrameMac(m)
    }

    /// The tag of frame `seq` made of `parts`, in order.
    pub fn tag(&self, seq: u64, parts: &[&[u8]]) -> [u8; FRAME_TAG] {
        let mut m = self.begin(seq);
        for p in parts {
            m.update(p);
        }
        m.finish()
    }
}

/// The MAC of one frame, fed as its bytes come.
#[derive(Clone)]
pub struct FrameMac(blake3::Hasher);

impl std::fmt::Debug for FrameMac {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("FrameMac(..)")
    }
}

impl FrameMac {
    /// The next bytes of the frame.
    pub fn update(&mut self, bytes: &[u8]) {
        self.0.update(bytes);
    }

    /// The tag.
    pub fn finish(self) -> [u8; FRAME_TAG] {
        let full = self.0.finalize();
        let mut t = [0u8; FRAME_TAG];
        t.copy_from_slice(&full.as_bytes()[..FRAME_TAG]);
        t
    }

    /// Whether `tag` is this frame's tag, compared in constant time.
    pub fn verify(self, tag: &[u8]) -> bool {
        if tag.len() != FRAME_TAG {
            return false;
        }
        let want = self.finish();
        // Every byte compared whatever the first difference: the time says nothing of the tag.
        let diff = want.iter().zip(tag).fold(0u8, |d, (a, b)| d | (a ^ b));
        core::hint::black_box(diff) == 0
    }
}

/// Magic of a heartbeat datagram.
const BEAT_MAGIC: u32 = 0x6e68_6232;
/// Bytes of a heartbeat's MAC (HMAC-SHA256 truncated).
const BEAT_MAC: usize = 16;
/// Bytes of a heartbeat datagram: `[magic u32][rank u32][sequence u64][MAC 16]`.
pub const BEAT_BYTES: usize = 16 + BEAT_MAC;

/// Seals and opens heartbeat datagrams with a job's secret.
#[derive(Clone)]
pub struct BeatKey {
    secret: JobSecret,
    /// HMAC keyed and fed the label once: each datagram costs a clone and its own bytes.
    keyed: HmacSha256,
}

impl std::fmt::Debug for BeatKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("BeatKey(..)")
    }
}

impl BeatKey {
    /// The key of a job.
    pub fn new(secret: JobSecret) -> BeatKey {
        let keyed = secret.hmac(BEAT, &[]);
        BeatKey { secret, keyed }
    }

    /// The secret's MAC of `head` under the heartbeat label (as `JobSecret::mac(BEAT, [head])`).
    fn mac_of(&self, head: &[u8]) -> HmacSha256 {
        let mut m = self.keyed.clone();
        m.update(&(head.len() as u32).to_le_bytes());
        m.update(head);
        m
    }

    fn tag(&self, head: &[u8]) -> [u8; MAC_BYTES] {
        self.mac_of(head).finalize().into_bytes().into()
    }

    /// The job's secret this key seals with.
    pub fn secret(&self) -> &JobSecret {
        &self.secret
    }

    /// The datagram of rank `rank`'s heartbeat number `seq` (which must grow from one to the
    /// next: a receiver takes only a sequence above the last it took from that rank).
    pub fn seal(&self, rank: u32, seq: u64) -> [u8; BEAT_BYTES] {
        let mut out = [0u8; BEAT_BYTES];
        out[0..4].copy_from_slice(&BEAT_MAGIC.to_le_bytes());
        out[4..8].copy_from_slice(&rank.to_le_bytes());
        out[8..16].copy_from_slice(&seq.to_le_bytes());
        let tag = self.tag(&out[..16]);
        out[16..].copy_from_slice(&tag[..BEAT_MAC]);
        out
    }

    /// `(rank, sequence)` of a datagram made with this job's secret; `None` for anything else.
    /// The caller checks the sequence against the last one taken from that rank.
    pub fn open(&self, buf: &[u8]) -> Option<(u32, u64)> {
        if buf.len() != BEAT_BYTES || buf[0..4] != BEAT_MAGIC.to_le_bytes() {
            return None;
        }
        if self.mac_of(&buf[..16]).verify_truncated_left(&buf[16..]).is_err() {
            return None;
        }
        let rank = u32::from_le_bytes([buf[4], buf[5], buf[6], buf[7]]);
        let mut seq = [0u8; 8];
        seq.copy_from_slice(&buf[8..16]);
        Some((rank, u64::from_le_bytes(seq)))
    }
}

/// The first sequence number of a heartbeat stream: nanoseconds since the epoch, so that a rank
/// restarted under the same rank number starts above where it was.
pub fn first_beat_seq() -> u64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(1, |d| d.as_nanos() as u64)
}

#[cfg(test)]
mod tests;
