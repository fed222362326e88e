//! The 64-bit message digest of a [`Stamp`](crate::Stamp): a hash of a message's envelope and payload, so that a
//! re-executed send can be compared with what its receiver recorded of the first execution's (see
//! [`crate::process`], "Send determinism").
//!
//! Written here, not taken from a crate: it must be the same function in every build of the job (a restarted
//! process compares its digests with those its peers computed), and it is small. The construction is a
//! multiply-xorshift over little-endian 8-byte words in four independent lanes (a 32-byte block per round, as
//! xxHash64 and wyhash lay theirs out), the length folded in at the end, and the 64-bit finaliser of SplitMix64
//! (Steele, Lea and Flood, "Fast splittable pseudorandom number generators", OOPSLA 2014). Per word: one xor, one
//! multiply, one shift-xor; the lanes keep four multiplies in flight, about 0.2 cycle per byte on a current x86-64
//! (the multiply's throughput), against about 1 cycle per byte for byte-wise FNV-1a. Messages under 32 bytes take
//! one lane: a handful of multiplies in all.
//!
//! What it is for: telling apart two messages a correct program would never confuse (different payloads, tags,
//! communicators or lengths). It is not a MAC: nothing here resists a peer that chooses its bytes to collide, and
//! none needs to (a peer can send anything anyway). Two different messages collide with probability about 2⁻⁶⁴.
//!
//! Invariant: the digest of a byte string does not depend on how it is split among [`Digest::update`] calls
//! (the sender hashes envelope and payload as two slices, the sender log a restored entry as one).

/// Odd multipliers: the 64-bit golden ratio and the two of SplitMix64's finaliser.
const K0: u64 = 0x9E37_79B9_7F4A_7C15;
const K1: u64 = 0xBF58_476D_1CE4_E5B9;
const K2: u64 = 0x94D0_49BB_1331_11EB;

/// Lane seeds: distinct, so that equal words in different lanes do not cancel.
const SEEDS: [u64; 4] = [K0, K1, K2, K0 ^ K1];

/// Bytes per block (four lanes of one word).
const BLOCK: usize = 32;

/// One word into one lane.
#[inline(always)]
fn absorb(lane: u64, word: u64) -> u64 {
    let x = (lane ^ word).wrapping_mul(K0);
    x ^ (x >> 29)
}

/// The little-endian word of `b` (at most 8 bytes), zero-padded.
#[inline(always)]
fn word(b: &[u8]) -> u64 {
    match b.first_chunk::<8>() {
        Some(w) => u64::from_le_bytes(*w),
        None => tail(b),
    }
}

/// [`word`] of fewer than 8 bytes, read in place (two overlapping loads of 4, or three of 1) rather than copied
/// into a padded buffer: no call to `memcpy` for the length only known at run time.
#[inline(always)]
fn tail(b: &[u8]) -> u64 {
    let n = b.len();
    if n >= 4 {
        let lo = b.first_chunk::<4>().map_or(0, |w| u32::from_le_bytes(*w)) as u64;
        let hi = b.last_chunk::<4>().map_or(0, |w| u32::from_le_bytes(*w)) as u64;
        // The overlapping bytes are the same in both: OR keeps them.
        lo | hi << (8 * (n - 4))
    } else if n > 0 {
        b[0] as u64 | (b[n / 2] as u64) << (8 * (n / 2)) | (b[n - 1] as u64) << (8 * (n - 1))
    } else {
        0
    }
}

/// `bytes` (under a block) word by word into `lane`, the last word zero-padded.
#[inline(always)]
fn absorb_tail(mut lane: u64, bytes: &[u8]) -> u64 {
    let mut words = bytes.chunks_exact(8);
    for w in &mut words {
        lane = absorb(lane, word(w));
    }
    let rest = words.remainder();
    if !rest.is_empty() {
        lane = absorb(lane, tail(rest));
    }
    lane
}

/// SplitMix64's finaliser.
#[inline(always)]
fn avalanche(mut x: u64) -> u64 {
    x = (x ^ (x >> 30)).wrapping_mul(K1);
    x = (x ^ (x >> 27)).wrapping_mul(K2);
    x ^ (x >> 31)
}

/// A digest being computed.
///
/// ```
/// use nemesis_ft::digest::{Digest, digest};
/// let mut d = Digest::new();
/// d.update(b"env.");
/// d.update(b"payload");
/// assert_eq!(d.finish(), digest(b"env.", b"payload"));
/// assert_eq!(digest(b"env.", b"payload"), digest(b"", b"env.payload"));
/// assert_ne!(digest(b"", b"a"), digest(b"", b"a\0"));
/// ```
#[derive(Clone, Debug)]
pub struct Digest {
    lanes: [u64; 4],
    /// Bytes not yet absorbed (fewer than a block), at the front.
    buf: [u8; BLOCK],
    buffered: usize,
    len: u64,
}

impl Default for Digest {
    fn default() -> Self {
        Digest::new()
    }
}

impl Digest {
    pub fn new() -> Digest {
        Digest { lanes: SEEDS, buf: [0; BLOCK], buffered: 0, len: 0 }
    }

    #[inline(always)]
    fn block(lanes: &mut [u64; 4], b: &[u8; BLOCK]) {
        for (i, lane) in lanes.iter_mut().enumerate() {
            *lane = absorb(*lane, word(&b[8 * i..8 * i + 8]));
        }
    }

    /// Appends `bytes` to the hashed string.
    #[inline]
    pub fn update(&mut self, mut bytes: &[u8]) {
        self.len = self.len.wrapping_add(bytes.len() as u64);
        if self.buffered > 0 {
            let take = (BLOCK - self.buffered).min(bytes.len());
            self.buf[self.buffered..self.buffered + take].copy_from_slice(&bytes[..take]);
            self.buffered += take;
            bytes = &bytes[take..];
            if self.buffered < BLOCK {
                return;
            }
            let b = self.buf;
            Self::block(&mut self.lanes, &b);
            self.buffered = 0;
        }
        let mut blocks = bytes.chunks_exact(BLOCK);
        for b in &mut blocks {
            if let Ok(b) = b.try_into() {
                Self::block(&mut self.lanes, b);
            }
        }
        let rest = blocks.remainder();
        self.buf[..rest.len()].copy_from_slice(rest);
        self.buffered = rest.len();
    }

    /// The digest of everything appended.
    #[inline]
    pub fn finish(&self) -> u64 {
        // The tail (under a block) word by word into the first lane, the last word zero-padded: the length
        // folded in below tells "a" from "a\0".
        let mut lanes = self.lanes;
        lanes[0] = absorb_tail(lanes[0], &self.buf[..self.buffered]);
        finish(lanes, self.len)
    }
}

/// The digest of `head` followed by `payload` (a message's envelope and its data): the same as of their
/// concatenation. An empty or 8-byte `head` (a transport's envelope) takes a path with no buffering: the words
/// go from the slices to the lanes in registers (measured by `benches/hooks.rs`, `ft-digest-1k`).
///
/// Inline, the common case of a small message (an 8-byte envelope and under 24 payload bytes, one lane): a
/// handful of multiplies, the other lanes' seeds folded into constants; anything else is a call.
#[inline(always)]
pub fn digest(head: &[u8], payload: &[u8]) -> u64 {
    if let Some(h) = head.first_chunk::<8>()
        && head.len() == 8
        && payload.len() < BLOCK - 8
    {
        let lane = absorb_tail(absorb(SEEDS[0], u64::from_le_bytes(*h)), payload);
        return finish([lane, SEEDS[1], SEEDS[2], SEEDS[3]], payload.len() as u64 + 8);
    }
    digest_long(head, payload)
}

/// [`digest`] off its inline case.
#[inline(never)]
fn digest_long(head: &[u8], payload: &[u8]) -> u64 {
    match head.len() {
        0 => digest_words(None, payload),
        8 => digest_words(Some(word(head)), payload),
        _ => {
            let mut d = Digest::new();
            d.update(head);
            d.update(payload);
            d.finish()
        }
    }
}

/// [`digest`] of the word `head` (if any) followed by `payload`, word by word.
#[inline]
fn digest_words(head: Option<u64>, payload: &[u8]) -> u64 {
    let len = payload.len() as u64 + if head.is_some() { 8 } else { 0 };
    let mut lanes = SEEDS;
    let mut rest = payload;
    if let Some(h) = head {
        if payload.len() >= BLOCK - 8 {
            // The first block: the head word and 24 payload bytes.
            lanes[0] = absorb(lanes[0], h);
            for i in 0..3 {
                lanes[i + 1] = absorb(lanes[i + 1], word(&payload[8 * i..8 * i + 8]));
            }
            rest = &payload[BLOCK - 8..];
        } else {
            // Under a block in all: the tail, the head word first.
            lanes[0] = absorb_tail(absorb(lanes[0], h), payload);
            return finish(lanes, len);
        }
    }
    let mut blocks = rest.chunks_exact(BLOCK);
    for b in &mut blocks {
        if let Ok(b) = b.try_into() {
            Digest::block(&mut lanes, b);
        }
    }
    lanes[0] = absorb_tail(lanes[0], blocks.remainder());
    finish(lanes, len)
}

/// The lanes (the tail already absorbed into the first) and the length into the digest.
#[inline(always)]
fn finish(lanes: [u64; 4], len: u64) -> u64 {
    let [h0, h1, h2, h3] = lanes;
    let h = h0.rotate_left(1) ^ h1.rotate_left(7) ^ h2.rotate_left(12) ^ h3.rotate_left(18);
    avalanche(h ^ len.wrapping_mul(K2))
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn known_values_are_stable() {
        // The function is part of the protocol: a change must be deliberate (and bump the control wire version).
        let a = digest(b"", b"");
        let b = digest(b"", b"abc");
        assert_ne!(a, b);
        assert_eq!(digest(b"", b""), a);
        let long: Vec<u8> = (0..=255u8).collect();
        assert_eq!(digest(&long[..3], &long[3..]), digest(&long, &[]));
    }

    #[test]
    fn pinned_values() {
        // Values of the function as first shipped (33-W): every path (the inline one, the word paths, the
        // stream) must keep giving them; the sender, the receiver and a restored log all compare with them.
        let bytes: Vec<u8> = (0..100u8).map(|i| i.wrapping_mul(37).wrapping_add(11)).collect();
        for (h, p, want) in [
            (0usize, 0usize, 0xb0bc_4691_509e_8b38u64),
            (0, 3, 0x40a6_4505_433a_6cae),
            (0, 8, 0x5152_ed14_237b_a278),
            (8, 0, 0x5152_ed14_237b_a278),
            (8, 1, 0x0005_15ad_55f2_5762),
            (8, 5, 0x32fc_d633_d6c3_0b94),
            (8, 8, 0xdce5_dbf5_8702_8f3b),
            (8, 13, 0x2783_628d_d0f9_a31b),
            (8, 16, 0x581a_4b4c_2f88_79aa),
            (8, 23, 0xa4c3_8c54_cbd1_249b),
            (8, 24, 0x5774_ca70_9714_eb72),
            (8, 31, 0x3920_e190_f2ae_9b64),
            (8, 57, 0x16bf_e993_3a66_fea4),
            (3, 20, 0xcf30_c433_55b7_ad3f),
            (0, 99, 0x10be_7862_4ae2_3f6d),
        ] {
            let (head, payload) = (&bytes[..h], &bytes[h..h + p]);
            assert_eq!(digest(head, payload), want, "head {h}, payload {p}");
            let mut d = Digest::new();
            d.update(head);
            d.update(payload);
            assert_eq!(d.finish(), want, "stream: head {h}, payload {p}");
        }
    }

    #[test]
    fn tail_reads_the_padded_word() {
        let b = [0x11u8, 0x22, 0x33, 0x44, 0x55, 0x66, 0x77];
        for n in 0..=7 {
            let mut w = [0u8; 8];
            w[..n].copy_from_slice(&b[..n]);
            assert_eq!(tail(&b[..n]), u64::from_le_bytes(w), "{n} bytes");
        }
    }

    #[test]
    fn single_bit_and_length_changes_are_seen() {
        let base: Vec<u8> = (0..100u8).collect();
        let d = digest(b"", &base);
        for i in 0..base.len() {
            for bit in 0..8 {
                let mut m = base.clone();
                m[i] ^= 1 << bit;
                assert_ne!(digest(b"", &m), d, "byte {i} bit {bit}");
            }
        }
        for n in 0..base.len() {
            assert_ne!(digest(b"", &base[..n]), d);
        }
    }

    #[test]
    fn swapped_words_differ() {
        // Two 8-byte words exchanged (an envelope's tag and context, say) must not cancel.
        let a = [1u8, 0, 0, 0, 0, 0, 0, 0, 2, 0, 0, 0, 0, 0, 0, 0];
        let mut b = a;
        b.rotate_left(8);
        assert_ne!(digest(b"", &a), digest(b"", &b));
    }

    proptest! {
        #[test]
        fn the_word_paths_agree_with_the_stream(
            head in proptest::option::of(any::<[u8; 8]>()),
            payload in proptest::collection::vec(any::<u8>(), 0..150),
        ) {
            let head: &[u8] = head.as_ref().map_or(&[], |h| &h[..]);
            let mut d = Digest::new();
            d.update(head);
            d.update(&payload);
            prop_assert_eq!(digest(head, &payload), d.finish());
            let whole = [head, &payload[..]].concat();
            let mut d = Digest::new();
            d.update(&whole);
            prop_assert_eq!(digest(head, &payload), d.finish());
        }

        #[test]
        fn any_split_gives_the_same_digest(
            bytes in proptest::collection::vec(any::<u8>(), 0..200),
            cuts in proptest::collection::vec(any::<usize>(), 0..4),
        ) {
            let whole = digest(&bytes, &[]);
            let mut d = Digest::new();
            let mut at = 0;
            let mut cuts: Vec<usize> = cuts.into_iter().map(|c| c % (bytes.len() + 1)).collect();
            cuts.sort_unstable();
            for c in cuts {
                d.update(&bytes[at..c]);
                at = c;
            }
            d.update(&bytes[at..]);
            prop_assert_eq!(d.finish(), whole);
        }
    }
}
