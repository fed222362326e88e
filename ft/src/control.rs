//! HydEE's control messages and their versioned wire encoding.
//!
//! The messages are those of Figs 6.3–6.7 of `guermouche-2011-thesis-send-determinism-hydee.txt` (names translated:
//! Redémarrage → [`Control::Restarted`], DerniereDate → [`Control::LastDate`], Ma_Phase → [`Control::MyPhase`],
//! OrphelinNotification → [`Control::OrphanNotification`], NotifierEnvoiEnr → [`Control::NotifySendLogged`],
//! NotifierEnvoiMsg → [`Control::NotifySendMsg`], MsgEnregistres → [`Control::LoggedPhases`], Orphelin →
//! [`Control::OrphanCounts`], ListePhasesOrphelins → [`Control::OrphanPhases`], OrphelinsRecus →
//! [`Control::OrphansReceived`]), plus three this implementation needs and the figures leave implicit:
//! [`Control::FailureNotice`] (the "À la défaillance d'un processus" trigger of Fig 6.5 line 6),
//! [`Control::Checkpointed`] (the pruning of RPP, hydee.md \[R\]), and the round number every recovery message
//! carries so that a failure during recovery can start a fresh round; and [`Control::OrphanStamps`], which lets a
//! restarted sender check its regenerated messages against what their receiver recorded (`process/stamps.rs`).
//!
//! Wire format, little-endian: `version: u8 = 1`, `kind: u8`, then the fields in declaration order — `u64` for
//! dates, phases, rounds and counts, `u32` for group ids, and `u32 length` + elements for lists. Decoding checks
//! every length against the bytes present before allocating, rejects values the protocol never produces (a zero
//! round or phase, unsorted or duplicate list entries, counts of zero) and trailing bytes, and never panics.

use serde::{Deserialize, Serialize};

use crate::piggyback::{MAX_DATE, MAX_PHASE, Stamp};
use crate::{CoordinatorId, Date, Error, GroupId, Phase, Rank, Result, Round};

/// Version byte of the current wire encoding.
pub const WIRE_VERSION: u8 = 1;

/// Who a control message goes to or comes from.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub enum Endpoint {
    /// An application process.
    Process(Rank),
    /// A recovery coordinator.
    Coordinator(CoordinatorId),
}

impl std::fmt::Display for Endpoint {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Endpoint::Process(r) => write!(f, "rank {r}"),
            Endpoint::Coordinator(c) => write!(f, "coordinator {c}"),
        }
    }
}

/// How far the coordinator lets processes send during a recovery round.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub enum Horizon {
    /// No orphan of a phase below this one is pending anywhere: a process whose phase is at most this may send
    /// (the strict `<` rule of Fig 6.6 lines 17 and 21, T:2009).
    UpTo(Phase),
    /// No orphan is pending anywhere: the round is over.
    Unbounded,
}

impl Horizon {
    /// Whether a process in `phase` may send under this horizon.
    pub fn admits(self, phase: Phase) -> bool {
        match self {
            Horizon::UpTo(h) => phase <= h,
            Horizon::Unbounded => true,
        }
    }
}

/// A HydEE control message.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Control {
    /// Process → process. The receiver's group has a durable checkpoint that holds every message from the
    /// addressee dated below `date`: drop them from the log (Fig 6.3 lines 16–18 and 27–29, T:2097).
    Ack { date: Date },
    /// Process → process. The sender's group has a durable checkpoint taken when the sender's date was `date`:
    /// RPP entries for the sender at or below it will never describe an orphan again (hydee.md \[R\], RPP pruning).
    Checkpointed { date: Date },
    /// Coordinator → surviving process: recovery round `round` starts; the listed groups restart from their
    /// checkpoints.
    FailureNotice { round: Round, restarting: Vec<GroupId> },
    /// Restarting process → every process outside its group (Fig 6.4 line 8): it restarts from a checkpoint taken
    /// at `date`, in which the last message it had received from the addressee was dated `last_received`.
    Restarted { round: Round, date: Date, last_received: Date },
    /// Process → restarting process (Fig 6.5 line 9): the last message received from the addressee was dated
    /// `last_date`; `orphans` lists, oldest first, the date and phase of each message received from it after its
    /// checkpoint — the orphans it is about to regenerate.
    LastDate { round: Round, last_date: Date, orphans: Vec<(Date, Phase)> },
    /// Process → its coordinator (Fig 6.4 line 9, Fig 6.5 line 17): the phase up to which it must wait before
    /// sending. Sent again if that phase rises during the round.
    MyPhase { round: Round, phase: Phase },
    /// Process → its coordinator (Fig 6.5 line 15): phases of the logged messages it holds for replay.
    LoggedPhases { round: Round, phases: Vec<Phase> },
    /// Process → its coordinator (Fig 6.5 line 16, counts per hydee.md \[R\]): how many orphans it expects per phase.
    OrphanCounts { round: Round, counts: Vec<(Phase, u64)> },
    /// Restarting process → coordinator of the orphan's receiver (Fig 6.4 line 17): an orphan of `phase` was
    /// regenerated and suppressed.
    OrphanNotification { round: Round, phase: Phase },
    /// Coordinator → process holding logged messages (Fig 6.6 line 19): replay those of phase at most `phase`.
    NotifySendLogged { round: Round, phase: Phase },
    /// Coordinator → process (Fig 6.6 line 23): it may send while its phase is within `horizon`.
    NotifySendMsg { round: Round, horizon: Horizon },
    /// Coordinator → every coordinator (Fig 6.7 line 17): phases in which its processes expect orphans.
    OrphanPhases { round: Round, phases: Vec<Phase> },
    /// Coordinator → every coordinator (Fig 6.7 line 30): its processes have received every orphan of `phase`.
    OrphansReceived { round: Round, phase: Phase },
    /// Process → restarting process, just before the [`Control::LastDate`] it completes: the [`Stamp`] of each
    /// orphan that `LastDate` lists, in its order (sequence numbers ascending). Not sent when there are no orphans
    /// or one of them arrived unstamped; the regenerated messages are then checked by date alone.
    OrphanStamps { round: Round, stamps: Vec<Stamp> },
}

mod kind {
    pub const ACK: u8 = 1;
    pub const CHECKPOINTED: u8 = 2;
    pub const FAILURE_NOTICE: u8 = 3;
    pub const RESTARTED: u8 = 4;
    pub const LAST_DATE: u8 = 5;
    pub const MY_PHASE: u8 = 6;
    pub const LOGGED_PHASES: u8 = 7;
    pub const ORPHAN_COUNTS: u8 = 8;
    pub const ORPHAN_NOTIFICATION: u8 = 9;
    pub const NOTIFY_SEND_LOGGED: u8 = 10;
    pub const NOTIFY_SEND_MSG: u8 = 11;
    pub const ORPHAN_PHASES: u8 = 12;
    pub const ORPHANS_RECEIVED: u8 = 13;
    pub const ORPHAN_STAMPS: u8 = 14;
}

/// The wire value of [`Horizon::Unbounded`].
const UNBOUNDED: u64 = u64::MAX;

impl Control {
    /// The message's name, for diagnostics.
    pub fn name(&self) -> &'static str {
        match self {
            Control::Ack { .. } => "Ack",
            Control::Checkpointed { .. } => "Checkpointed",
            Control::FailureNotice { .. } => "FailureNotice",
            Control::Restarted { .. } => "Restarted",
            Control::LastDate { .. } => "LastDate",
            Control::MyPhase { .. } => "MyPhase",
            Control::LoggedPhases { .. } => "LoggedPhases",
            Control::OrphanCounts { .. } => "OrphanCounts",
            Control::OrphanNotification { .. } => "OrphanNotification",
            Control::NotifySendLogged { .. } => "NotifySendLogged",
            Control::NotifySendMsg { .. } => "NotifySendMsg",
            Control::OrphanPhases { .. } => "OrphanPhases",
            Control::OrphansReceived { .. } => "OrphansReceived",
            Control::OrphanStamps { .. } => "OrphanStamps",
        }
    }

    /// The recovery round the message belongs to (`None` for the failure-free messages).
    pub fn round(&self) -> Option<Round> {
        match *self {
            Control::Ack { .. } | Control::Checkpointed { .. } => None,
            Control::FailureNotice { round, .. }
            | Control::Restarted { round, .. }
            | Control::LastDate { round, .. }
            | Control::MyPhase { round, .. }
            | Control::LoggedPhases { round, .. }
            | Control::OrphanCounts { round, .. }
            | Control::OrphanNotification { round, .. }
            | Control::NotifySendLogged { round, .. }
            | Control::NotifySendMsg { round, .. }
            | Control::OrphanPhases { round, .. }
            | Control::OrphansReceived { round, .. }
            | Control::OrphanStamps { round, .. } => Some(round),
        }
    }

    /// Appends the wire encoding to `out`.
    pub fn encode_into(&self, out: &mut Vec<u8>) {
        fn u64s(out: &mut Vec<u8>, values: &[u64]) {
            for v in values {
                out.extend_from_slice(&v.to_le_bytes());
            }
        }
        fn len(out: &mut Vec<u8>, n: usize) {
            // Lists longer than u32::MAX cannot be built from a job of at most 2^32 ranks and 2^40 phases in
            // memory; saturating keeps encoding total, and the decoder would then report truncation.
            out.extend_from_slice(&u32::try_from(n).unwrap_or(u32::MAX).to_le_bytes());
        }
        out.push(WIRE_VERSION);
        match self {
            Control::Ack { date } => {
                out.push(kind::ACK);
                u64s(out, &[*date]);
            }
            Control::Checkpointed { date } => {
                out.push(kind::CHECKPOINTED);
                u64s(out, &[*date]);
            }
            Control::FailureNotice { round, restarting } => {
                out.push(kind::FAILURE_NOTICE);
                u64s(out, &[*round]);
                len(out, restarting.len());
                for g in restarting {
                    out.extend_from_slice(&g.to_le_bytes());
                }
            }
            Control::Restarted { round, date, last_received } => {
                out.push(kind::RESTARTED);
                u64s(out, &[*round, *date, *last_received]);
            }
            Control::LastDate { round, last_date, orphans } => {
                out.push(kind::LAST_DATE);
                u64s(out, &[*round, *last_date]);
                len(out, orphans.len());
                for (d, p) in orphans {
                    u64s(out, &[*d, *p]);
                }
            }
            Control::MyPhase { round, phase } => {
                out.push(kind::MY_PHASE);
                u64s(out, &[*round, *phase]);
            }
            Control::LoggedPhases { round, phases } => {
                out.push(kind::LOGGED_PHASES);
                u64s(out, &[*round]);
                len(out, phases.len());
                u64s(out, phases);
            }
            Control::OrphanCounts { round, counts } => {
                out.push(kind::ORPHAN_COUNTS);
                u64s(out, &[*round]);
                len(out, counts.len());
                for (p, c) in counts {
                    u64s(out, &[*p, *c]);
                }
            }
            Control::OrphanNotification { round, phase } => {
                out.push(kind::ORPHAN_NOTIFICATION);
                u64s(out, &[*round, *phase]);
            }
            Control::NotifySendLogged { round, phase } => {
                out.push(kind::NOTIFY_SEND_LOGGED);
                u64s(out, &[*round, *phase]);
            }
            Control::NotifySendMsg { round, horizon } => {
                out.push(kind::NOTIFY_SEND_MSG);
                let h = match horizon {
                    Horizon::UpTo(p) => *p,
                    Horizon::Unbounded => UNBOUNDED,
                };
                u64s(out, &[*round, h]);
            }
            Control::OrphanPhases { round, phases } => {
                out.push(kind::ORPHAN_PHASES);
                u64s(out, &[*round]);
                len(out, phases.len());
                u64s(out, phases);
            }
            Control::OrphansReceived { round, phase } => {
                out.push(kind::ORPHANS_RECEIVED);
                u64s(out, &[*round, *phase]);
            }
            Control::OrphanStamps { round, stamps } => {
                out.push(kind::ORPHAN_STAMPS);
                u64s(out, &[*round]);
                len(out, stamps.len());
                for s in stamps {
                    u64s(out, &[s.seq, s.digest]);
                }
            }
        }
    }

    /// The wire encoding.
    ///
    /// ```
    /// use nemesis_ft::Control;
    /// let m = Control::Restarted { round: 1, date: 40, last_received: 7 };
    /// assert_eq!(Control::decode(&m.encode()).unwrap(), m);
    /// ```
    pub fn encode(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(32);
        self.encode_into(&mut out);
        out
    }

    /// Decodes untrusted bytes.
    pub fn decode(bytes: &[u8]) -> Result<Control> {
        let mut r = Reader { bytes, pos: 0 };
        let version = r.u8()?;
        if version != WIRE_VERSION {
            return Err(Error::UnsupportedVersion(version));
        }
        let msg = match r.u8()? {
            kind::ACK => Control::Ack { date: r.date()? },
            kind::CHECKPOINTED => Control::Checkpointed { date: r.date()? },
            kind::FAILURE_NOTICE => {
                let round = r.round()?;
                let n = r.len(4)?;
                let mut restarting = Vec::with_capacity(n);
                for _ in 0..n {
                    restarting.push(r.u32()?);
                }
                strictly_ascending(&restarting, "restarting groups")?;
                if restarting.is_empty() {
                    return Err(Error::InvalidField { field: "restarting groups (count)", value: 0 });
                }
                Control::FailureNotice { round, restarting }
            }
            kind::RESTARTED => Control::Restarted { round: r.round()?, date: r.date()?, last_received: r.date()? },
            kind::LAST_DATE => {
                let round = r.round()?;
                let last_date = r.date()?;
                let n = r.len(16)?;
                let mut orphans = Vec::with_capacity(n);
                for _ in 0..n {
                    orphans.push((r.date()?, r.phase()?));
                }
                let dates: Vec<Date> = orphans.iter().map(|o| o.0).collect();
                strictly_ascending(&dates, "orphan dates")?;
                if let Some(&(d, _)) = orphans.last()
                    && (d > last_date || d == 0)
                {
                    return Err(Error::InvalidField { field: "orphan date", value: d });
                }
                Control::LastDate { round, last_date, orphans }
            }
            kind::MY_PHASE => Control::MyPhase { round: r.round()?, phase: r.phase()? },
            kind::LOGGED_PHASES => {
                let round = r.round()?;
                let phases = r.phases()?;
                Control::LoggedPhases { round, phases }
            }
            kind::ORPHAN_COUNTS => {
                let round = r.round()?;
                let n = r.len(16)?;
                let mut counts = Vec::with_capacity(n);
                for _ in 0..n {
                    let p = r.phase()?;
                    let c = r.u64()?;
                    if c == 0 {
                        return Err(Error::InvalidField { field: "orphan count", value: 0 });
                    }
                    counts.push((p, c));
                }
                let phases: Vec<Phase> = counts.iter().map(|c| c.0).collect();
                strictly_ascending(&phases, "orphan-count phases")?;
                Control::OrphanCounts { round, counts }
            }
            kind::ORPHAN_NOTIFICATION => Control::OrphanNotification { round: r.round()?, phase: r.phase()? },
            kind::NOTIFY_SEND_LOGGED => Control::NotifySendLogged { round: r.round()?, phase: r.phase()? },
            kind::NOTIFY_SEND_MSG => {
                let round = r.round()?;
                let h = r.u64()?;
                let horizon = if h == UNBOUNDED {
                    Horizon::Unbounded
                } else if (1..=MAX_PHASE).contains(&h) {
                    Horizon::UpTo(h)
                } else {
                    return Err(Error::InvalidField { field: "horizon", value: h });
                };
                Control::NotifySendMsg { round, horizon }
            }
            kind::ORPHAN_PHASES => {
                let round = r.round()?;
                let phases = r.phases()?;
                Control::OrphanPhases { round, phases }
            }
            kind::ORPHANS_RECEIVED => Control::OrphansReceived { round: r.round()?, phase: r.phase()? },
            kind::ORPHAN_STAMPS => {
                let round = r.round()?;
                let n = r.len(16)?;
                let mut stamps = Vec::with_capacity(n);
                for _ in 0..n {
                    let seq = r.date()?;
                    if seq == 0 {
                        return Err(Error::InvalidField { field: "orphan sequence number", value: 0 });
                    }
                    stamps.push(Stamp { seq, digest: r.u64()? });
                }
                let seqs: Vec<u64> = stamps.iter().map(|s| s.seq).collect();
                strictly_ascending(&seqs, "orphan sequence numbers")?;
                if stamps.is_empty() {
                    return Err(Error::InvalidField { field: "orphan stamps (count)", value: 0 });
                }
                Control::OrphanStamps { round, stamps }
            }
            other => return Err(Error::UnknownMessageKind(other)),
        };
        if r.pos != bytes.len() {
            return Err(Error::TrailingBytes(bytes.len() - r.pos));
        }
        Ok(msg)
    }
}

fn strictly_ascending<T: Copy + Into<u64> + Ord>(values: &[T], field: &'static str) -> Result<()> {
    match values.windows(2).find(|w| w[0] >= w[1]) {
        Some(w) => Err(Error::InvalidField { field, value: w[1].into() }),
        None => Ok(()),
    }
}

struct Reader<'a> {
    bytes: &'a [u8],
    pos: usize,
}

impl Reader<'_> {
    fn take<const N: usize>(&mut self) -> Result<[u8; N]> {
        let chunk = self.bytes.get(self.pos..self.pos + N).ok_or(Error::Truncated {
            what: "control message",
            needed: self.pos + N,
            available: self.bytes.len(),
        })?;
        self.pos += N;
        let mut out = [0u8; N];
        out.copy_from_slice(chunk);
        Ok(out)
    }
    fn u8(&mut self) -> Result<u8> {
        Ok(self.take::<1>()?[0])
    }
    fn u32(&mut self) -> Result<u32> {
        Ok(u32::from_le_bytes(self.take()?))
    }
    fn u64(&mut self) -> Result<u64> {
        Ok(u64::from_le_bytes(self.take()?))
    }
    fn round(&mut self) -> Result<Round> {
        match self.u64()? {
            0 => Err(Error::InvalidField { field: "round", value: 0 }),
            r => Ok(r),
        }
    }
    fn date(&mut self) -> Result<Date> {
        match self.u64()? {
            d if d > MAX_DATE => Err(Error::InvalidField { field: "date", value: d }),
            d => Ok(d),
        }
    }
    fn phase(&mut self) -> Result<Phase> {
        match self.u64()? {
            p if p == 0 || p > MAX_PHASE => Err(Error::InvalidField { field: "phase", value: p }),
            p => Ok(p),
        }
    }
    /// A list length whose elements of `size` bytes are all present: never allocates for bytes that are not there.
    fn len(&mut self, size: usize) -> Result<usize> {
        let n = self.u32()? as usize;
        let needed = n.saturating_mul(size);
        let remaining = self.bytes.len() - self.pos;
        if needed > remaining {
            return Err(Error::Truncated {
                what: "control-message list",
                needed: self.pos.saturating_add(needed),
                available: self.bytes.len(),
            });
        }
        Ok(n)
    }
    fn phases(&mut self) -> Result<Vec<Phase>> {
        let n = self.len(8)?;
        let mut phases = Vec::with_capacity(n);
        for _ in 0..n {
            phases.push(self.phase()?);
        }
        strictly_ascending(&phases, "phases")?;
        Ok(phases)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn samples() -> Vec<Control> {
        vec![
            Control::Ack { date: 9 },
            Control::Checkpointed { date: 0 },
            Control::FailureNotice { round: 2, restarting: vec![0, 3] },
            Control::Restarted { round: 1, date: 0, last_received: 0 },
            Control::LastDate { round: 1, last_date: 12, orphans: vec![(3, 1), (12, 2)] },
            Control::LastDate { round: 1, last_date: 0, orphans: vec![] },
            Control::MyPhase { round: 4, phase: 3 },
            Control::LoggedPhases { round: 4, phases: vec![1, 2, 5] },
            Control::OrphanCounts { round: 4, counts: vec![(2, 2), (7, 1)] },
            Control::OrphanNotification { round: 4, phase: 2 },
            Control::NotifySendLogged { round: 4, phase: 2 },
            Control::NotifySendMsg { round: 4, horizon: Horizon::UpTo(2) },
            Control::NotifySendMsg { round: 4, horizon: Horizon::Unbounded },
            Control::OrphanPhases { round: 4, phases: vec![] },
            Control::OrphansReceived { round: 4, phase: 2 },
            Control::OrphanStamps {
                round: 1,
                stamps: vec![Stamp { seq: 2, digest: 7 }, Stamp { seq: 3, digest: u64::MAX }],
            },
        ]
    }

    #[test]
    fn every_message_round_trips() {
        for m in samples() {
            let bytes = m.encode();
            assert_eq!(bytes[0], WIRE_VERSION);
            assert_eq!(Control::decode(&bytes).unwrap(), m, "{}", m.name());
        }
    }

    #[test]
    fn every_strict_prefix_is_truncated() {
        for m in samples() {
            let bytes = m.encode();
            for cut in 0..bytes.len() {
                assert!(
                    matches!(Control::decode(&bytes[..cut]), Err(Error::Truncated { .. })),
                    "{} cut at {cut}",
                    m.name()
                );
            }
        }
    }

    #[test]
    fn malformed_messages_get_typed_errors() {
        assert!(matches!(Control::decode(&[2, 1]), Err(Error::UnsupportedVersion(2))));
        assert!(matches!(Control::decode(&[1, 99]), Err(Error::UnknownMessageKind(99))));
        let mut extra = Control::Ack { date: 1 }.encode();
        extra.push(0);
        assert!(matches!(Control::decode(&extra), Err(Error::TrailingBytes(1))));
        let zero_round = Control::MyPhase { round: 1, phase: 1 }.encode();
        let mut bad = zero_round.clone();
        bad[2..10].copy_from_slice(&0u64.to_le_bytes());
        assert!(matches!(Control::decode(&bad), Err(Error::InvalidField { field: "round", .. })));
        let mut bad = zero_round;
        bad[10..18].copy_from_slice(&0u64.to_le_bytes());
        assert!(matches!(Control::decode(&bad), Err(Error::InvalidField { field: "phase", .. })));
        let unsorted = Control::LoggedPhases { round: 1, phases: vec![3, 2] }.encode();
        assert!(matches!(Control::decode(&unsorted), Err(Error::InvalidField { .. })));
        let zero_count = Control::OrphanCounts { round: 1, counts: vec![(1, 0)] }.encode();
        assert!(matches!(Control::decode(&zero_count), Err(Error::InvalidField { field: "orphan count", .. })));
        let late_orphan = Control::LastDate { round: 1, last_date: 3, orphans: vec![(4, 1)] }.encode();
        assert!(matches!(Control::decode(&late_orphan), Err(Error::InvalidField { field: "orphan date", .. })));
        let st = |seq| Stamp { seq, digest: 1 };
        let unsorted = Control::OrphanStamps { round: 1, stamps: vec![st(2), st(1)] };
        assert!(matches!(Control::decode(&unsorted.encode()), Err(Error::InvalidField { .. })));
        let unstamped = Control::OrphanStamps { round: 1, stamps: vec![st(0), st(1)] };
        assert!(matches!(Control::decode(&unstamped.encode()), Err(Error::InvalidField { .. })));
        let none = Control::OrphanStamps { round: 1, stamps: vec![] };
        assert!(matches!(Control::decode(&none.encode()), Err(Error::InvalidField { .. })));
        let empty_notice = Control::FailureNotice { round: 1, restarting: vec![] }.encode();
        assert!(Control::decode(&empty_notice).is_err());
        let bad_horizon = Control::NotifySendMsg { round: 1, horizon: Horizon::UpTo(MAX_PHASE + 1) }.encode();
        assert!(matches!(Control::decode(&bad_horizon), Err(Error::InvalidField { field: "horizon", .. })));
    }

    #[test]
    fn a_huge_list_length_does_not_allocate() {
        let mut bytes = vec![WIRE_VERSION, kind::LOGGED_PHASES];
        bytes.extend_from_slice(&1u64.to_le_bytes());
        bytes.extend_from_slice(&u32::MAX.to_le_bytes());
        assert!(matches!(Control::decode(&bytes), Err(Error::Truncated { .. })));
    }

    proptest! {
        #[test]
        fn arbitrary_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..64)) {
            if let Ok(m) = Control::decode(&bytes) {
                prop_assert_eq!(m.encode(), bytes);
            }
        }

        #[test]
        fn arbitrary_bytes_after_a_valid_header_never_panic(kind in 0u8..16, body in proptest::collection::vec(any::<u8>(), 0..80)) {
            let mut bytes = vec![WIRE_VERSION, kind];
            bytes.extend(body);
            if let Ok(m) = Control::decode(&bytes) {
                prop_assert_eq!(m.encode(), bytes);
            }
        }
    }
}
