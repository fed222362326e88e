//! What goes into and out of a [`Process`](crate::Process) on the message path and beside it: the [`Outbound`]
//! verdict on a send, the [`Reception`] verdict on an arrival, the [`Delivery`] the transport keeps with an accepted
//! message until the application takes it, and the [`Action`]s the driver drains with
//! [`Process::poll_action`](crate::Process::poll_action).
//!
//! These are plain values with no behaviour of their own, so that the RPP (`crate::rpp`) can produce them without
//! depending on the engine that consumes them.
//!
//! Invariant: a [`Delivery`] packs its phase and release tag exactly as a [`Piggyback`] does
//! ([`pack_phase`]): a same-group delivery is the piggyback's word as it is.

use serde::{Deserialize, Serialize};

use crate::control::{Control, Endpoint};
use crate::piggyback::{MAX_PHASE, Piggyback, pack_phase, round_tag};
use crate::{Date, Phase, Rank, Round};

/// What the driver does with an application message the process is about to send.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Outbound {
    /// Put `piggyback` in the header and transmit; if `log`, first copy the payload into the sender log under
    /// `(destination, piggyback)` (inter-group message, Fig 6.3 lines 8–9).
    Transmit { piggyback: Piggyback, log: bool },
    /// A regenerated orphan (Fig 6.4 lines 16–17): the destination already has it. Do not transmit; copy it into
    /// the sender log under `(destination, piggyback)` (\[R\]: a later rollback of the destination's group needs it).
    LogOnly { piggyback: Piggyback },
    /// A regenerated orphan that the destination's durable checkpoint already holds (it acknowledged it): neither
    /// transmit nor log.
    Drop,
    /// Not now: keep the send pending and call [`Process::on_send`](crate::Process::on_send) again after
    /// [`Action::ResumeSends`]. Nothing changed in the process.
    Hold,
}

/// What the driver does with an application message that arrived.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Reception {
    /// Keep it for the application; when the application receives it, pass the [`Delivery`] to
    /// [`Process::on_deliver`](crate::Process::on_deliver).
    Deliver(Delivery),
    /// Drop it: sent before its sender heard of the failure, it will be replayed from the sender's log.
    Stale,
    /// Drop it: a message from that sender with this date or a later one was already delivered.
    Duplicate,
}

/// What delivering an accepted message to the application does to the receiving process: the phase it brings
/// (the sender's phase, plus one if the sender is in another group: Fig 6.3 lines 13 and 20) and the recovery
/// round that released it. The transport keeps it with the message between
/// [`Process::on_receive`](crate::Process::on_receive) and [`Process::on_deliver`](crate::Process::on_deliver).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Delivery {
    /// The phase (at most `MAX_PHASE`) in bits 0..40, the piggyback's release tag in bits 56..64: one word, so that
    /// a same-group delivery is the piggyback's word as it is, and
    /// [`Process::on_deliver`](crate::Process::on_deliver) compares it whole (a tag makes it large and sends it to
    /// the checked branch).
    pub(super) phase_tag: u64,
}

impl Delivery {
    #[inline]
    pub(crate) const fn new(phase: Phase, tag: u8) -> Delivery {
        Delivery { phase_tag: pack_phase(phase, tag) }
    }

    /// From a phase and tag already packed as [`pack_phase`] does.
    #[inline]
    pub(crate) const fn packed(phase_tag: u64) -> Delivery {
        Delivery { phase_tag }
    }

    /// The phase the process moves to, at least, when the application receives the message.
    #[inline]
    pub const fn phase(&self) -> Phase {
        self.phase_tag & MAX_PHASE
    }

    pub(super) fn released_in(&self, round: Round) -> bool {
        let tag = (self.phase_tag >> 56) as u8;
        tag != 0 && tag == round_tag(round)
    }
}

/// Work for the driver, produced by events other than the per-message hooks.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Action {
    /// Send a control message.
    Control { to: Endpoint, msg: Control },
    /// Transmit again the message logged for `to` at `piggyback.date()`, with this piggyback (its original date and
    /// phase, marked as released by the current round).
    Replay { to: Rank, piggyback: Piggyback },
    /// Drop the sender-log entries for `to` dated below `before`.
    DiscardLog { to: Rank, before: Date },
    /// Sends answered with [`Outbound::Hold`] may be tried again.
    ResumeSends,
}
