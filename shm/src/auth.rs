//! Job authentication for the netmods: a random per-job secret and what is made of it. The secret
//! never crosses the wire; what does is keyed MACs (HMAC-SHA256) over fresh values.
//!
//! - [`JobSecret`]: 256 random bits from the kernel (`getrandom`), never derived from names or
//!   pids. `nemesis-run` makes one per job and gives it to its ranks in `NEMESIS_JOB_SECRET`
//!   (removed from a rank's environment at start-up, with `PMI_*`); under another process manager
//!   rank 0 makes it and publishes it in the job's KVS, which only the job's processes read.
//! - The connection handshake ([`accept_proof`], [`connect_proof`]): the connecting rank sends its
//!   rank and a nonce; the accepting rank answers its own nonce and a MAC over both ranks and both
//!   nonces (it knows the secret, and is the rank that was meant); the connecting rank answers a
//!   MAC over the same with another label (it knows the secret, and is the rank it claims). Fresh
//!   nonces on both sides: a recorded handshake replayed does not verify.
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

const ACCEPT: &[u8] = b"nemesis-netmod accept v1";
const CONNECT: &[u8] = b"nemesis-netmod connect v1";
const BEAT: &[u8] = b"nemesis-netmod heartbeat v1";

/// The MAC of one side of a handshake: from rank `from` (connecting, nonce `nc`) to rank `to`
/// (accepting, nonce `na`); `accept` picks the accepting side's label.
fn proof(
    s: &JobSecret,
    accept: bool,
    from: u32,
    to: u32,
    nc: &[u8; NONCE_BYTES],
    na: &[u8; NONCE_BYTES],
) -> HmacSha256 {
    let label = if accept { ACCEPT } else { CONNECT };
    s.hmac(label, &[&from.to_le_bytes(), &to.to_le_bytes(), nc, na])
}

/// The accepting side's proof, for a connection from rank `from` to rank `to` with the
/// connecting side's nonce `nc` and the accepting side's `na`.
pub fn accept_proof(
    s: &JobSecret,
    from: u32,
    to: u32,
    nc: &[u8; NONCE_BYTES],
    na: &[u8; NONCE_BYTES],
) -> [u8; MAC_BYTES] {
    proof(s, true, from, to, nc, na).finalize().into_bytes().into()
}

/// The connecting side's proof (see [`accept_proof`]).
pub fn connect_proof(
    s: &JobSecret,
    from: u32,
    to: u32,
    nc: &[u8; NONCE_BYTES],
    na: &[u8; NONCE_BYTES],
) -> [u8; MAC_BYTES] {
    proof(s, false, from, to, nc, na).finalize().into_bytes().into()
}

/// Whether `tag` is [`accept_proof`] (`accept`) or [`connect_proof`] for these values, whole,
/// compared in constant time.
pub fn check_proof(
    s: &JobSecret,
    accept: bool,
    from: u32,
    to: u32,
    nc: &[u8; NONCE_BYTES],
    na: &[u8; NONCE_BYTES],
    tag: &[u8],
) -> bool {
    tag.len() == MAC_BYTES && proof(s, accept, from, to, nc, na).verify_slice(tag).is_ok()
}

/// Magic of a heartbeat datagram.
const BEAT_MAGIC: u32 = 0x6e68_6232;
/// Bytes of a heartbeat's MAC (HMAC-SHA256 truncated).
const BEAT_MAC: usize = 16;
/// Bytes of a heartbeat datagram: `[magic u32][rank u32][sequence u64][MAC 16]`.
pub const BEAT_BYTES: usize = 16 + BEAT_MAC;

/// Seals and opens heartbeat datagrams with a job's secret.
#[derive(Clone, Debug)]
pub struct BeatKey {
    secret: JobSecret,
}

impl BeatKey {
    /// The key of a job.
    pub fn new(secret: JobSecret) -> BeatKey {
        BeatKey { secret }
    }

    fn tag(&self, head: &[u8]) -> [u8; MAC_BYTES] {
        self.secret.mac(BEAT, &[head])
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
        if !self.secret.verify(BEAT, &[&buf[..16]], &buf[16..]) {
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
mod tests {
    use super::*;

    #[test]
    fn secrets_are_random_and_round_trip_in_hex() {
        let (a, b) = (JobSecret::generate().unwrap(), JobSecret::generate().unwrap());
        assert_ne!(a, b);
        assert_eq!(JobSecret::from_hex(&a.to_hex()).unwrap(), a);
        assert_eq!(format!("{a:?}"), "JobSecret(..)", "Debug does not show the secret");
        for bad in ["", "00", &"g".repeat(64), &"0".repeat(63), &"0".repeat(65), &"é".repeat(32)] {
            assert!(JobSecret::from_hex(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn handshake_proofs_bind_the_secret_both_ranks_and_both_nonces() {
        let s = JobSecret::generate().unwrap();
        let other = JobSecret::generate().unwrap();
        let (nc, na) = (nonce().unwrap(), nonce().unwrap());
        let p = accept_proof(&s, 3, 1, &nc, &na);
        assert!(check_proof(&s, true, 3, 1, &nc, &na, &p));
        assert!(!check_proof(&s, false, 3, 1, &nc, &na, &p), "the two directions differ");
        assert!(!check_proof(&other, true, 3, 1, &nc, &na, &p), "another secret");
        assert!(!check_proof(&s, true, 2, 1, &nc, &na, &p), "another claimed rank");
        assert!(!check_proof(&s, true, 3, 0, &nc, &na, &p), "another accepting rank");
        let fresh = nonce().unwrap();
        assert!(!check_proof(&s, true, 3, 1, &fresh, &na, &p), "a replay with another nonce");
        assert!(!check_proof(&s, true, 3, 1, &nc, &fresh, &p));
        assert!(!check_proof(&s, true, 3, 1, &nc, &na, &p[..16]), "a handshake proof is whole");
        let c = connect_proof(&s, 3, 1, &nc, &na);
        assert!(check_proof(&s, false, 3, 1, &nc, &na, &c));
        assert_ne!(c, p);
    }

    #[test]
    fn heartbeats_open_only_with_the_secret_and_as_sealed() {
        let s = JobSecret::generate().unwrap();
        let k = BeatKey::new(s.clone());
        let d = k.seal(7, 42);
        assert_eq!(k.open(&d), Some((7, 42)));
        assert_eq!(BeatKey::new(JobSecret::generate().unwrap()).open(&d), None, "another job's");
        for i in 0..BEAT_BYTES {
            let mut bad = d;
            bad[i] ^= 1;
            assert_eq!(k.open(&bad), None, "byte {i} changed");
        }
        assert_eq!(k.open(&d[..BEAT_BYTES - 1]), None);
        assert_eq!(k.open(&[0u8; BEAT_BYTES]), None);
        assert!(first_beat_seq() > 1);
    }
}
