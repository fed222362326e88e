//! The per-message hooks of failure-free operation (Fig 6.3 lines 6–22 of
//! `shared/papers/guermouche-2011-thesis-send-determinism-hydee.txt`, T:1948–1984), and the send rules of a
//! restarting process (Fig 6.4 lines 13–22) on their checked path.
//!
//! A send has one hook, [`Process::on_send`]; a reception has two: [`Process::on_receive`] on arrival, in channel
//! order (RPP, acknowledgements, duplicates, stale messages), and [`Process::on_deliver`] when the application takes
//! the message, in its order (the phase). `send_fast` and `receive_deliver_fast` are the same hooks' common cases
//! alone, for a transport's inline path.
//!
//! Invariants:
//! - Each hook has one fast path behind one comparison (`fast_send_limit`, the RPP key, `deliver_guard`); whatever
//!   needs more fails it and goes to `send_checked`, `receive_checked` or `deliver_checked`.
//! - The fast paths allocate nothing, queue no action and carry no tracing.
//! - The phase changes on delivery only, never on arrival (\[R+\]; why: `docs/design/hydee.md`).

use super::checkpoint::AckState;
use super::events::{Action, Delivery, Outbound, Reception};
use super::{DateRule, Process};
use crate::control::{Control, Endpoint};
use crate::piggyback::{MAX_DATE, Piggyback};
use crate::{Date, Error, Phase, Rank, Result};

impl Process {
    /// Send hook: call before transmitting an application message to `to` (Fig 6.3 lines 6–10, Fig 6.4 lines 13–22).
    #[inline]
    pub fn on_send(&mut self, to: Rank) -> Result<Outbound> {
        let Some(peer) = self.peers.get_mut(to as usize) else {
            return Err(self.unknown(to));
        };
        if self.date >= self.fast_send_limit {
            return self.send_checked(to, self.phase, None);
        }
        self.date += 1;
        peer.sent += 1;
        Ok(Outbound::Transmit { piggyback: Piggyback::from_parts(self.date, self.phase, 0), log: peer.inter != 0 })
    }

    /// [`Process::on_send`] for a send the application made when this process was in phase `phase`, tried
    /// only now: a send [`Outbound::Hold`] held back (or one queued behind it), which a non-blocking send leaves
    /// to the transport while the application goes on — and may receive meanwhile. \[R+\] The message carries
    /// the phase of the application's send, not the current one: what the application received after it cannot
    /// be in the message, and a phase raised by such deliveries depends on when the hold was lifted, so a
    /// re-execution would log the same message under another phase than its receiver recorded — and a later
    /// round, releasing replays and orphans by phase, waits forever (`tests/ft_recovery.rs`,
    /// `early_sequential_failures`, hung that way). The date is the current one: held sends go in order.
    pub fn on_send_as_of(&mut self, to: Rank, phase: Phase) -> Result<Outbound> {
        if self.peers.get(to as usize).is_none() {
            return Err(self.unknown(to));
        }
        self.send_checked(to, phase.min(self.phase), None)
    }

    /// [`Process::on_send`]'s common case alone, for a transport's inline path: `Some((piggyback, log))` exactly
    /// when `on_send` would return `Outbound::Transmit { piggyback, log }` without going off its fast path (and
    /// with the same effect); `None`, with nothing changed, otherwise (call `on_send` then). No `Result` to carry:
    /// the caller keeps the piggyback in registers.
    #[inline(always)]
    pub fn send_fast(&mut self, to: Rank) -> Option<(Piggyback, bool)> {
        let peer = self.peers.get_mut(to as usize)?;
        if self.date >= self.fast_send_limit {
            return None;
        }
        self.date += 1;
        peer.sent += 1;
        Some((Piggyback::from_parts(self.date, self.phase, 0), peer.inter != 0))
    }

    /// [`Process::on_receive`] then [`Process::on_deliver`] for a message the application takes at once, in their
    /// common case alone (a transport's inline receive): `true` exactly when `on_receive` would return
    /// `Reception::Deliver` by one of its fast paths and leave no action, with the effect of both calls; `false`,
    /// with nothing changed, otherwise (call `on_receive` then).
    #[inline(always)]
    pub fn receive_deliver_fast(&mut self, from: Rank, pb: Piggyback) -> bool {
        let Some(peer) = self.peers.get_mut(from as usize) else {
            return false;
        };
        let delivery = if let Some(d) = peer.received.try_extend(pb) {
            d
        } else if peer.inter == 0 {
            Delivery::packed(pb.phase_tag())
        } else if let Some(d) = peer.received.try_extend_rising(pb) {
            d
        } else {
            return false;
        };
        // The fast paths queue no action: `actions` is as it was (empty on the caller's fast path).
        self.on_deliver(delivery);
        true
    }

    /// Arrival hook: call when an application message from `from` reaches this process, in the order of the
    /// channel (Fig 6.3 lines 11–18: RPP, acknowledgements). Its effect on the phase waits for
    /// [`Process::on_deliver`].
    #[inline]
    pub fn on_receive(&mut self, from: Rank, pb: Piggyback) -> Result<Reception> {
        let Some(peer) = self.peers.get_mut(from as usize) else {
            return Err(self.unknown(from));
        };
        // Other group, the next message of a steady run (lines 13–15): the RPP's fast path, which also stands for
        // "nothing unusual" (it is off for same-group peers, acknowledgements due and recovery).
        if let Some(delivery) = peer.received.try_extend(pb) {
            return Ok(Reception::Deliver(delivery));
        }
        if peer.inter == 0 {
            // Same group: nothing to record (line 20).
            return Ok(Reception::Deliver(Delivery::packed(pb.phase_tag())));
        }
        // Other group, a run whose phase rises (an exchange across groups): the second fast path.
        if let Some(delivery) = peer.received.try_extend_rising(pb) {
            return Ok(Reception::Deliver(delivery));
        }
        self.receive_checked(from, pb)
    }

    /// Delivery hook: call when the application receives a message accepted by [`Process::on_receive`], in the
    /// application's order (Fig 6.3 lines 13 and 20: the phase). Phases follow what the application has received,
    /// not what happens to have arrived, so a re-execution that receives in the same order computes the same
    /// phases whatever the timing of arrivals.
    #[inline]
    pub fn on_deliver(&mut self, delivery: Delivery) {
        // One comparison for the common case: the phase does not rise, no tag, nothing to check.
        if delivery.phase_tag > self.deliver_guard {
            if self.slow_deliver {
                return self.deliver_checked(delivery);
            }
            // A tag outside recovery (a released message arriving after the round ended) is only a phase here.
            let phase = delivery.phase();
            if phase > self.phase {
                self.phase = phase;
                self.deliver_guard = phase;
            }
        }
    }

    /// Undoes an arrival that [`Process::on_receive`] accepted from `from` at `date` when the transport cannot give
    /// the message to the application whole: a rendezvous whose sender died before its data had all moved (the
    /// message is the *arrival of its data*, not of its announcement). The sender restarts and regenerates it,
    /// and the arrival of that copy is accepted as new, where it would otherwise be dropped as an orphan. Its
    /// record leaves the RPP (`LastDate` does not list it as an orphan, so no `OrphanNotification` is waited
    /// for), and `RPP[j].Maxdate` goes back to the previous arrival, or, if a later message from `from` arrived
    /// meanwhile, the date stays a hole that the next arrival at that date fills. A phase the message brought
    /// with [`Process::on_deliver`] stays: a phase only orders replays, and a higher one only delays them.
    ///
    /// Call it once nothing more can arrive from the dead incarnation (the transport's channel from it is
    /// drained), before answering its restart's `Restarted`. Returns whether anything was recorded at `date`
    /// (nothing is for a sender of this process's group).
    pub fn on_receive_undone(&mut self, from: Rank, date: Date) -> Result<bool> {
        let slow_inter = self.slow_inter;
        let Some(peer) = self.peers.get_mut(from as usize) else {
            return Err(self.unknown(from));
        };
        if peer.inter == 0 {
            return Ok(false);
        }
        let last = peer.received.max_date();
        let undone = peer.received.unrecord(date);
        if undone {
            Process::unrecord_stamp(peer, date, last);
        }
        let permit = Process::fast_arrivals(slow_inter, peer);
        peer.received.set_permit(permit);
        Ok(undone)
    }

    /// The send hooks off their fast path. `digest`: the message's, if the driver stamps (`stamps.rs`); a
    /// regenerated orphan is then suppressed only if it matches the receiver's record.
    #[cold]
    #[inline(never)]
    pub(super) fn send_checked(&mut self, to: Rank, phase: Phase, digest: Option<u64>) -> Result<Outbound> {
        if self.date >= MAX_DATE {
            return Err(Error::DateOverflow { date: self.date + 1 });
        }
        let inter = self.peers[to as usize].group != self.group;
        let seq = self.peers[to as usize].sent + 1;
        let Some(rec) = self.recovery.as_deref_mut() else {
            self.date += 1;
            self.peers[to as usize].sent = seq;
            return Ok(Outbound::Transmit { piggyback: Piggyback::from_parts(self.date, phase, 0), log: inter });
        };
        let bound = phase.min(rec.taint);
        if !rec.may_send_at(bound) {
            if !rec.holding {
                tracing::debug!(rank = self.rank, to, bound, taint = rec.taint, horizon = ?rec.horizon, "HydEE: sends held");
            }
            rec.holding = true;
            rec.hold_bound = bound;
            self.register_taint();
            return Ok(Outbound::Hold);
        }
        let date = self.date + 1;
        let front = rec.owed.get(&to).and_then(|q| q.front()).copied();
        let owed_here = front.is_some_and(|o| o.0 == date);
        let mismatch =
            front.and_then(|(odate, _, stamp)| Process::regenerated_mismatch(odate, stamp, date, seq, digest));
        let mismatch = mismatch.or_else(|| {
            // The send that should regenerate the orphan dated `next_owed` went elsewhere, or was skipped.
            (date >= rec.next_owed && !owed_here).then_some("comes past the date of an orphan it did not regenerate")
        });
        if let Some(what) = mismatch {
            return Err(Error::SendDeterminismViolated { rank: self.rank, dest: to, seq, date, what });
        }
        self.date = date;
        self.peers[to as usize].sent = seq;
        let tag = if rec.complete { 0 } else { rec.tag };
        let piggyback = Piggyback::from_parts(date, phase, tag);
        if !inter {
            return Ok(Outbound::Transmit { piggyback, log: false });
        }
        if owed_here
            && let Some(q) = rec.owed.get_mut(&to)
            && let Some(&(_, recorded_phase, _)) = q.front()
        {
            q.pop_front();
            tracing::debug!(rank = self.rank, to, date, recorded_phase, phase, "HydEE: orphan regenerated");
            if q.is_empty() {
                rec.owed.remove(&to);
            }
            rec.update_next_owed();
            let coordinator = self.topology.coordinator_of(to)?;
            let msg = Control::OrphanNotification { round: rec.round, phase: recorded_phase };
            self.actions.push_back(Action::Control { to: Endpoint::Coordinator(coordinator), msg });
            if date < self.peers[to as usize].ack_floor {
                return Ok(Outbound::Drop);
            }
            return Ok(Outbound::LogOnly { piggyback });
        }
        Ok(Outbound::Transmit { piggyback, log: true })
    }

    /// Inter-group arrivals off the fast path: the first messages of a run, phases that change, acknowledgements,
    /// recovery. Not `#[cold]`: a sender whose phase rises with every message (an exchange across groups) comes
    /// here every time.
    #[inline(never)]
    fn receive_checked(&mut self, from: Rank, pb: Piggyback) -> Result<Reception> {
        if let Some(rec) = self.recovery.as_deref()
            && rec.restarting
            && rec.awaiting_last_date.contains(&from)
        {
            return Ok(Reception::Stale);
        }
        let slow_inter = self.slow_inter;
        let peer = &mut self.peers[from as usize];
        let reception = peer.received.accept(pb)?;
        if reception == Reception::Duplicate {
            return Ok(reception);
        }
        match peer.ack {
            AckState::Idle | AckState::Noted { .. } => {}
            AckState::Armed { was_due } => peer.ack = AckState::Noted { date: pb.date(), was_due },
            AckState::Due => {
                peer.ack = AckState::Idle;
                let msg = Control::Ack { date: pb.date() };
                self.actions.push_back(Action::Control { to: Endpoint::Process(from), msg });
            }
        }
        let permit = Process::fast_arrivals(slow_inter, peer);
        peer.received.set_permit(permit);
        Ok(reception)
    }

    #[cold]
    #[inline(never)]
    fn deliver_checked(&mut self, delivery: Delivery) {
        let phase = delivery.phase();
        if phase > self.phase {
            self.phase = phase;
        }
        if let Some(rec) = self.recovery.as_deref_mut()
            && !rec.complete
            && !delivery.released_in(rec.round)
            && phase > rec.taint
        {
            rec.taint = phase;
            self.register_taint();
        }
        if self.date_rule == DateRule::SendsAndReceptions {
            // Saturates: the next send reports the overflow.
            self.date = (self.date + 1).min(MAX_DATE);
        }
    }
}
