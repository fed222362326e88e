//! The piggyback HydEE attaches to every application message: `(date, phase)`, plus the recovery round in which a
//! message was released, in 12 bytes.
//!
//! HydEE piggybacks only the send date and the phase (T:2247, `guermouche-2011-thesis-send-determinism-hydee.txt`
//! line 2247: "HydEE n'attache que le numéro de phase et la date"); the sender's group is derived from its rank,
//! not sent (hydee.md \[R\] on Fig 6.3 line 10). The shared-memory cell header reserves exactly 12 bytes for it.
//!
//! Layout, little-endian: bytes 0..6 date (48 bits), bytes 6..11 phase (40 bits), byte 11 release tag.
//! - 48 bits of date: dates count sends only (see [`crate::process`]), 2⁴⁸ sends is about a year at 10⁷ sends/s.
//! - 40 bits of phase: a phase grows by at most one per inter-group hop of a causal chain (T:1997–2001), 2⁴⁰ hops
//!   is twelve days of back-to-back 1 µs inter-group ping-pong.
//! - The tag is 0 for messages sent outside recovery; during recovery round `r` a process that the coordinator has
//!   released marks what it sends with `tag(r) ∈ 1..=255`, so that a receiver can tell messages sent under the
//!   phase rules of its current round from messages sent before the failure notice reached their sender (the latter
//!   may depend on orphans; see `docs/design/hydee.md`, "Released messages").
//!
//! Overflow is a typed error at the engine, never a silent wrap.

use serde::{Deserialize, Serialize};

use crate::{Date, Error, Phase, Result, Round};

/// Bytes a piggyback occupies in a message header.
pub const PIGGYBACK_LEN: usize = 12;

/// Largest date the piggyback can carry.
pub const MAX_DATE: Date = (1 << 48) - 1;

/// Largest phase the piggyback can carry.
pub const MAX_PHASE: Phase = (1 << 40) - 1;

/// `(date, phase)` of one application message, and the recovery round that released it if any.
///
/// Invariant: `1 <= date <= MAX_DATE`, `1 <= phase <= MAX_PHASE` (the engine never builds anything else, and
/// [`Piggyback::decode`] rejects anything else).
#[derive(Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Piggyback {
    date: Date,
    /// The phase in bits 0..40, the release tag in bits 56..64 (two words keep the type in registers). The arrival
    /// fast path compares this word whole, so a released message never matches an expectation without a tag, and
    /// a same-group delivery is this word as it is ([`Delivery`](crate::Delivery) packs the same way).
    phase_tag: u64,
}

impl std::fmt::Debug for Piggyback {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Piggyback")
            .field("date", &self.date())
            .field("phase", &self.phase())
            .field("tag", &self.tag())
            .finish()
    }
}

/// `phase` (at most `MAX_PHASE`) in bits 0..40 and `tag` in bits 56..64.
#[inline]
pub(crate) const fn pack_phase(phase: Phase, tag: u8) -> u64 {
    phase | ((tag as u64) << 56)
}

/// The 1..=255 tag of recovery round `round` (rounds count from 1). Rounds 255 apart share a tag; a message would
/// have to stay in flight across 255 recoveries to be mistaken.
#[inline]
pub(crate) fn round_tag(round: Round) -> u8 {
    // Lossless: the remainder is below 255.
    ((round.wrapping_sub(1) % 255) + 1) as u8
}

impl Piggyback {
    /// A piggyback for a message sent at `date` in `phase`, released in recovery round `released_in` if any.
    pub fn new(date: Date, phase: Phase, released_in: Option<Round>) -> Result<Self> {
        if date == 0 || date > MAX_DATE {
            return Err(Error::DateOverflow { date });
        }
        if phase == 0 || phase > MAX_PHASE {
            return Err(Error::PhaseOverflow { phase });
        }
        Ok(Piggyback::from_parts(date, phase, released_in.map_or(0, round_tag)))
    }

    /// Built by the engine, which keeps both values in range.
    #[inline]
    pub(crate) const fn from_parts(date: Date, phase: Phase, tag: u8) -> Self {
        Piggyback { date, phase_tag: pack_phase(phase, tag) }
    }

    /// The sender's date at the send (its count of sends so far, this one included).
    #[inline]
    pub const fn date(&self) -> Date {
        self.date
    }

    /// The phase with the release tag in bits 56..64: equal to the phase exactly when the tag is 0.
    #[inline]
    pub(crate) const fn phase_tag(&self) -> u64 {
        self.phase_tag
    }

    /// The sender's phase at the send.
    #[inline]
    pub const fn phase(&self) -> Phase {
        self.phase_tag & MAX_PHASE
    }

    /// The release tag: 0 outside recovery, else the tag of the round that released the message.
    #[inline]
    pub const fn tag(&self) -> u8 {
        (self.phase_tag >> 56) as u8
    }

    /// Whether the message was released by recovery round `round`.
    #[inline]
    pub fn released_in(&self, round: Round) -> bool {
        let tag = self.tag();
        tag != 0 && tag == round_tag(round)
    }

    /// The same message re-marked as released by `round` (used when a logged message is replayed).
    #[inline]
    pub(crate) fn with_round(self, round: Round) -> Self {
        Piggyback::from_parts(self.date, self.phase(), round_tag(round))
    }

    /// The 12 header bytes.
    #[inline]
    pub fn encode(&self) -> [u8; PIGGYBACK_LEN] {
        let lo = self.date | (self.phase() << 48);
        let hi = ((self.phase() >> 16) as u32) | ((self.tag() as u32) << 24);
        let mut out = [0u8; PIGGYBACK_LEN];
        out[..8].copy_from_slice(&lo.to_le_bytes());
        out[8..].copy_from_slice(&hi.to_le_bytes());
        out
    }

    /// Reads 12 header bytes. Any bit pattern decodes into range; a date or phase of 0 (never sent) is rejected.
    #[inline]
    pub fn decode(bytes: &[u8; PIGGYBACK_LEN]) -> Result<Self> {
        let mut lo = [0u8; 8];
        lo.copy_from_slice(&bytes[..8]);
        let mut hi = [0u8; 4];
        hi.copy_from_slice(&bytes[8..]);
        let lo = u64::from_le_bytes(lo);
        let hi = u32::from_le_bytes(hi);
        let date = lo & MAX_DATE;
        let phase = (lo >> 48) | (((hi & 0x00ff_ffff) as u64) << 16);
        let tag = (hi >> 24) as u8;
        if date == 0 {
            return Err(Error::InvalidField { field: "piggyback date", value: 0 });
        }
        if phase == 0 {
            return Err(Error::InvalidField { field: "piggyback phase", value: 0 });
        }
        Ok(Piggyback::from_parts(date, phase, tag))
    }

    /// Reads a piggyback from the front of `bytes`.
    /// Inline, and the error built only when there is one: on every arrival.
    #[inline]
    pub fn decode_slice(bytes: &[u8]) -> Result<Self> {
        match bytes.first_chunk::<PIGGYBACK_LEN>() {
            Some(head) => Self::decode(head),
            None => Err(Error::Truncated { what: "piggyback", needed: PIGGYBACK_LEN, available: bytes.len() }),
        }
    }
}

/// Bytes a [`Stamp`] occupies on the wire, after the [`Piggyback`].
pub const STAMP_LEN: usize = 16;

/// What a message carries beyond its [`Piggyback`] so that a re-execution can be checked against the first one:
/// its per-destination sequence number and the 64-bit [`digest`](crate::digest) of its envelope and payload.
///
/// `seq` counts the sender's messages to that destination, from 1: the n-th message from a process to a rank
/// carries `seq` n in every execution of a send-deterministic program. A `seq` of 0 means "not stamped" (a driver
/// that does not compute digests): comparisons skip it.
///
/// Wire layout, little-endian, 16 bytes: `seq` (8 bytes; it never exceeds the date, so 48 bits are used), then
/// `digest` (8 bytes). With the piggyback, an application message carries 28 bytes of fault-tolerance header.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Stamp {
    pub seq: u64,
    pub digest: u64,
}

impl Stamp {
    /// The stamp of a driver that computes none.
    pub const NONE: Stamp = Stamp { seq: 0, digest: 0 };

    /// Whether the message was stamped.
    #[inline]
    pub const fn is_some(&self) -> bool {
        self.seq != 0
    }

    /// The 16 wire bytes.
    #[inline]
    pub fn encode(&self) -> [u8; STAMP_LEN] {
        let mut out = [0u8; STAMP_LEN];
        out[..8].copy_from_slice(&self.seq.to_le_bytes());
        out[8..].copy_from_slice(&self.digest.to_le_bytes());
        out
    }

    /// Reads 16 wire bytes; a sequence number past [`MAX_DATE`] (never sent) is rejected.
    #[inline]
    pub fn decode(bytes: &[u8; STAMP_LEN]) -> Result<Stamp> {
        let mut seq = [0u8; 8];
        seq.copy_from_slice(&bytes[..8]);
        let mut digest = [0u8; 8];
        digest.copy_from_slice(&bytes[8..]);
        let seq = u64::from_le_bytes(seq);
        if seq > MAX_DATE {
            return Err(Error::InvalidField { field: "stamp sequence number", value: seq });
        }
        Ok(Stamp { seq, digest: u64::from_le_bytes(digest) })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn extremes_round_trip() {
        for (d, p, r) in [(1, 1, None), (MAX_DATE, MAX_PHASE, Some(255)), (12345, 678, Some(1)), (7, 9, Some(256))] {
            let pb = Piggyback::new(d, p, r).unwrap();
            assert_eq!(Piggyback::decode(&pb.encode()).unwrap(), pb);
        }
    }

    #[test]
    fn out_of_range_values_are_refused() {
        assert!(matches!(Piggyback::new(0, 1, None), Err(Error::DateOverflow { .. })));
        assert!(matches!(Piggyback::new(MAX_DATE + 1, 1, None), Err(Error::DateOverflow { .. })));
        assert!(matches!(Piggyback::new(1, 0, None), Err(Error::PhaseOverflow { .. })));
        assert!(matches!(Piggyback::new(1, MAX_PHASE + 1, None), Err(Error::PhaseOverflow { .. })));
        assert!(Piggyback::decode(&[0; 12]).is_err());
        assert!(matches!(Piggyback::decode_slice(&[1; 11]), Err(Error::Truncated { .. })));
    }

    #[test]
    fn round_tags_cycle_through_1_to_255() {
        assert_eq!(round_tag(1), 1);
        assert_eq!(round_tag(255), 255);
        assert_eq!(round_tag(256), 1);
        let pb = Piggyback::new(3, 4, Some(7)).unwrap();
        assert!(pb.released_in(7));
        assert!(!pb.released_in(8));
        assert!(!Piggyback::new(3, 4, None).unwrap().released_in(1));
    }

    proptest! {
        #[test]
        fn encoding_is_a_bijection_on_valid_values(d in 1..=MAX_DATE, p in 1..=MAX_PHASE, r in proptest::option::of(1u64..10_000)) {
            let pb = Piggyback::new(d, p, r).unwrap();
            let back = Piggyback::decode(&pb.encode()).unwrap();
            prop_assert_eq!(back, pb);
            prop_assert_eq!(back.date(), d);
            prop_assert_eq!(back.phase(), p);
        }

        #[test]
        fn stamps_round_trip(seq in 0..=MAX_DATE, digest in any::<u64>()) {
            let s = Stamp { seq, digest };
            prop_assert_eq!(Stamp::decode(&s.encode()).unwrap(), s);
        }

        #[test]
        fn any_stamp_bytes_decode_without_panicking(bytes in proptest::array::uniform16(any::<u8>())) {
            if let Ok(s) = Stamp::decode(&bytes) {
                prop_assert_eq!(s.encode(), bytes);
            }
        }

        #[test]
        fn any_bytes_decode_without_panicking(bytes in proptest::array::uniform12(any::<u8>())) {
            if let Ok(pb) = Piggyback::decode(&bytes) {
                prop_assert_eq!(pb.encode(), bytes);
            }
        }
    }
}
