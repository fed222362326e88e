//! `RPP[j]`, what a process accepted from one sender `j` of another group (Fig 6.3 line 4 of
//! `guermouche-2011-thesis-send-determinism-hydee.txt`, T:1958–1960), written on every arrival (lines 14–15,
//! T:1967–1968: `RPP[j].Maxdate ← date`, `RPP[j][date].phase ← phase`), kept as arithmetic runs.
//!
//! # Why runs, and why runs of dates as well as phases
//! The record is written on every inter-group arrival and read only off the message path: on recovery, where a
//! survivor lists the orphans a restarting sender will regenerate, with their dates and phases, and counts them per
//! phase (Fig 6.5 lines 8–14, T:2020–2044; [`crate::process`]'s `LastDate` resolution), and on pruning (hydee.md
//! \[R\]: entries covered by the sender's group checkpoint go). Writes must be cheap, reads exact.
//!
//! Phases alone cannot be run-length coded: the orphans are the received messages dated after the sender's
//! checkpoint, and the messages one sender sends to one receiver are not consecutive in its dates (it sends to
//! others in between), so the record must say *which* dates arrived — a run of phases that straddles the sender's
//! checkpoint date would not say how many of its messages are orphans. A [`Run`] is therefore an arithmetic
//! progression in both coordinates: dates `first, first + step, …, last` with phases `phase, phase + pstep, …`.
//! Send patterns that repeat give long runs: a sender streaming in one phase (`pstep` 0), or exchanging with this
//! process so that its phase rises by the same amount per message (`pstep` > 0). Anything else costs at most one
//! run per two messages (20 bytes a message, against 16 for a `(date, phase)` list). Expanding the runs gives back
//! exactly the `(date, phase)` of every message accepted.
//!
//! # The fast paths
//! When the current run has a known step and a constant phase, the next message extends it if and only if it
//! carries phase `key` and date `last + step`: two comparisons and one store (`Rpp::try_extend`). `key` is also
//! the "anything unusual?" flag of the arrival path: it holds `NO_FAST`, which no piggyback carries, whenever the
//! owner wants every arrival from this sender checked (`Rpp::set_permit`: an acknowledgement due, a recovery
//! round) or the run cannot be extended that way. A run whose phase rises has its own key, `next` (the phase the
//! next element carries), checked by `Rpp::try_extend_rising` after the same-group test, so that an exchange
//! across groups (each delivery raises the receiver's phase past the sender's) stays inline too without costing
//! the steady path anything. `Rpp::accept` handles the rest.

use serde::{Deserialize, Serialize};

use crate::piggyback::{MAX_DATE, MAX_PHASE, Piggyback};
use crate::process::{Delivery, Reception};
use crate::{Date, Error, Phase, Result};

/// Never a piggyback's phase (those fit 40 bits): a `key` that disables the fast path.
const NO_FAST: Phase = Phase::MAX;

/// Messages accepted from one sender, dates `first, first + step, …, last` with phases `phase, phase + pstep, …`.
///
/// Invariant (checked by [`ReceivedFrom`]'s restore): `1 <= first <= last <= MAX_DATE`, `step >= 1`,
/// `(last - first) % step == 0`, and every phase in `1..MAX_PHASE` (an accepted message's phase plus one must stay
/// encodable).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Run {
    pub first: Date,
    pub last: Date,
    pub step: Date,
    pub phase: Phase,
    pub pstep: Phase,
}

impl Run {
    /// Whether `date` is one of its elements.
    fn holds(&self, date: Date) -> bool {
        self.first <= date && date <= self.last && (date - self.first).is_multiple_of(self.step)
    }

    /// Drops the elements dated at most `date`; false if none is left.
    fn prune_through(&mut self, date: Date) -> bool {
        if self.last <= date {
            return false;
        }
        if self.first <= date {
            // No overflow: k * step <= last - first + step <= 2 * MAX_DATE, and the phases stay below MAX_PHASE.
            let k = (date - self.first) / self.step + 1;
            self.first += k * self.step;
            self.phase += k * self.pstep;
        }
        true
    }

    /// Appends the `(date, phase)` of the elements dated after `after`, ascending.
    fn expand_after(&self, after: Date, out: &mut Vec<(Date, Phase)>) {
        let mut r = *self;
        if !r.prune_through(after) {
            return;
        }
        let (mut date, mut phase) = (r.first, r.phase);
        loop {
            out.push((date, phase));
            if date >= r.last {
                return;
            }
            date += r.step;
            phase += r.pstep;
        }
    }

    /// Checks the invariant of a run read from a checkpoint, which must follow dates up to `after`.
    fn validate(&self, after: Date) -> Result<()> {
        let bad = |what| Err(Error::InvalidCheckpoint(what));
        if self.first <= after || self.first > self.last || self.last > MAX_DATE {
            return bad("RPP runs must be non-empty, ascending and within the date range");
        }
        if self.step == 0 || !(self.last - self.first).is_multiple_of(self.step) {
            return bad("an RPP run's step must divide its span");
        }
        let steps = (self.last - self.first) / self.step;
        let top = steps.checked_mul(self.pstep).and_then(|p| p.checked_add(self.phase));
        if self.phase == 0 || top.is_none_or(|p| p >= MAX_PHASE) {
            return bad("an RPP run's phases must lie in 1..MAX_PHASE");
        }
        Ok(())
    }
}

/// `RPP[j]` as saved in a checkpoint (Fig 6.3 line 25).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ReceivedFrom {
    /// Date of the last message accepted from that sender (`RPP[j].Maxdate`); 0 if none.
    pub max_date: Date,
    /// The accepted messages not yet covered by the sender's group checkpoint, ascending, all dated at most
    /// `max_date`.
    pub runs: Vec<Run>,
    /// Dates below `max_date` whose arrival was undone ([`Rpp::unrecord`]), ascending: accepted when they come
    /// again.
    #[serde(default)]
    pub holes: Vec<Date>,
    /// Records dated at most this were pruned (0: none).
    #[serde(default)]
    pub pruned: Date,
}

impl ReceivedFrom {
    /// `(date, phase)` of every recorded message, ascending (`RPP[j][date]`).
    pub fn entries(&self) -> Vec<(Date, Phase)> {
        let mut out = Vec::new();
        for run in &self.runs {
            run.expand_after(0, &mut out);
        }
        out
    }
}

/// The live record for one sender. Field order matters: the fast path reads the first three fields only, so they
/// share a cache line with whatever precedes them in the owner (`#[repr(C)]` keeps the order).
#[repr(C)]
#[derive(Clone, Debug)]
pub(crate) struct Rpp {
    /// The phase a message must carry to extend the current run on the fast path, or [`NO_FAST`].
    key: Phase,
    /// `RPP[j].Maxdate`: the date of the last message accepted; 0 if none.
    last: Date,
    /// The current run's date step; 0 while it has not had two elements.
    step: Date,
    /// The phase the next element of a rising run carries (`last_phase + pstep`, below `MAX_PHASE`), when the
    /// fast path may extend it; [`NO_FAST`] otherwise (and whenever `key` is not).
    next: Phase,
    /// The current run's phase step.
    pstep: Phase,
    /// The phase of the message dated `last`.
    last_phase: Phase,
    /// The current run's first date still recorded; above `last` when pruning emptied it (or before any message).
    /// With `step` 0, the run is `{first}` if `first == last`, else empty.
    first: Date,
    /// The phase at `first`.
    phase: Phase,
    /// Older runs, ascending, all dated below `first`.
    closed: Vec<Run>,
    /// Whether the owner lets arrivals take the fast path.
    permit: bool,
    /// Dates below `last` whose arrival was undone ([`Rpp::unrecord`]), ascending; empty but after a death in a
    /// rendezvous. Not on the fast paths: a hole is below `last`, which they never accept.
    holes: Vec<Date>,
    /// Records dated at most this were pruned ([`Rpp::prune_through`]): the previous arrival of one whose record
    /// goes is at most this if it is not in the runs.
    pruned: Date,
}

impl Default for Rpp {
    fn default() -> Rpp {
        Rpp {
            key: NO_FAST,
            last: 0,
            step: 0,
            next: NO_FAST,
            pstep: 0,
            last_phase: 0,
            first: 1,
            phase: 0,
            closed: Vec::new(),
            permit: false,
            holes: Vec::new(),
            pruned: 0,
        }
    }
}

impl Rpp {
    /// `RPP[j].Maxdate`.
    #[inline]
    pub(crate) fn max_date(&self) -> Date {
        self.last
    }

    /// The fast path: records `pb` and returns its delivery if it extends the current run in its phase, else
    /// leaves everything as it was.
    ///
    /// Correct without further checks: a match means `pb`'s date is `last + step > last` (not a duplicate), its
    /// phase is the run's, which was checked below `MAX_PHASE` when the run started (the delivery's phase plus one
    /// is encodable), and its release tag is 0 (`key` is compared with the phase and tag word whole).
    #[inline(always)]
    pub(crate) fn try_extend(&mut self, pb: Piggyback) -> Option<Delivery> {
        if pb.phase_tag() == self.key && pb.date() == self.last + self.step {
            self.last = pb.date();
            return Some(Delivery::packed(self.key + 1));
        }
        None
    }

    /// The second fast path: records `pb` and returns its delivery if it extends the current run, whose phase
    /// rises by `pstep` per element; else leaves everything as it was. A match means the date is `last + step`, the
    /// phase and tag word is `next`, which is below `MAX_PHASE` (kept so below) and carries no tag.
    #[inline(always)]
    pub(crate) fn try_extend_rising(&mut self, pb: Piggyback) -> Option<Delivery> {
        if pb.phase_tag() == self.next && pb.date() == self.last + self.step {
            let phase = self.next;
            self.last = pb.date();
            self.last_phase = phase;
            // No overflow: both terms are below 2⁴⁰.
            let next = phase + self.pstep;
            self.next = if next < MAX_PHASE { next } else { NO_FAST };
            return Some(Delivery::packed(phase + 1));
        }
        None
    }

    /// The checked path (Fig 6.3 lines 13–15): refuses duplicates and phases whose successor would not fit, and
    /// records the rest.
    pub(crate) fn accept(&mut self, pb: Piggyback) -> Result<Reception> {
        if pb.date() <= self.last {
            // Below the last arrival: a duplicate, unless its earlier arrival was undone.
            let Ok(h) = self.holes.binary_search(&pb.date()) else {
                return Ok(Reception::Duplicate);
            };
            if pb.phase() >= MAX_PHASE {
                return Err(Error::PhaseOverflow { phase: MAX_PHASE + 1 });
            }
            self.holes.remove(h);
            // Every run is past the hole or before it (`unrecord` split the one that held it); the current one
            // holds `last`, above the hole: a run of its own among the closed ones.
            let at = self.closed.partition_point(|r| r.last < pb.date());
            let run = Run { first: pb.date(), last: pb.date(), step: 1, phase: pb.phase(), pstep: 0 };
            self.closed.insert(at, run);
            return Ok(Reception::Deliver(Delivery::new(pb.phase() + 1, pb.tag())));
        }
        if pb.phase() >= MAX_PHASE {
            return Err(Error::PhaseOverflow { phase: MAX_PHASE + 1 });
        }
        self.record(pb.date(), pb.phase());
        Ok(Reception::Deliver(Delivery::new(pb.phase() + 1, pb.tag())))
    }

    /// Undoes the record of the arrival dated `date` (the transport lost the message before the application
    /// could take it whole: a rendezvous whose sender died before its data moved), so that the same date is
    /// accepted again. If it was the last arrival, `RPP[j].Maxdate` goes back to the previous one (exactly: the
    /// run's step, the previous run, or, when that was pruned, the pruning bound, which lies between it and
    /// `date`); otherwise the date becomes a hole. False if nothing was recorded at `date`.
    pub(crate) fn unrecord(&mut self, date: Date) -> bool {
        if date > self.last || date <= self.pruned || self.holes.binary_search(&date).is_ok() {
            return false;
        }
        let mut runs = std::mem::take(&mut self.closed);
        runs.extend(self.current());
        let Some(i) = runs.iter().position(|r| r.holds(date)) else {
            // Put back as they were: the current run stays in its fields.
            if self.first <= self.last {
                runs.pop();
            }
            self.closed = runs;
            return false;
        };
        let r = runs[i];
        let k = (date - r.first) / r.step;
        let mut parts = Vec::with_capacity(2);
        if date > r.first {
            parts.push(Run { last: date - r.step, ..r });
        }
        if date < r.last {
            parts.push(Run { first: date + r.step, phase: r.phase + (k + 1) * r.pstep, ..r });
        }
        runs.splice(i..=i, parts);
        if date < self.last {
            let at = self.holes.partition_point(|&h| h < date);
            self.holes.insert(at, date);
        } else {
            // The previous arrival: the last record left, or at most the pruning bound (and above every hole).
            self.last = runs.last().map_or(self.pruned, |r| r.last).max(self.pruned);
            let below = self.holes.partition_point(|&h| h <= self.last);
            self.holes.truncate(below);
        }
        // The run holding `last` (if any is left) is the current one again.
        match runs.pop_if(|r| r.last == self.last) {
            Some(c) => {
                let n = (c.last - c.first) / c.step;
                (self.first, self.phase) = (c.first, c.phase);
                (self.step, self.pstep) = if n == 0 { (0, 0) } else { (c.step, c.pstep) };
                self.last_phase = c.phase + n * c.pstep;
            }
            None => (self.first, self.step, self.pstep) = (self.last + 1, 0, 0),
        }
        self.closed = runs;
        self.refresh_key();
        true
    }

    /// The date up to which every message from the sender arrived (`RPP[j].Maxdate` below its first hole).
    pub(crate) fn complete_through(&self) -> Date {
        self.holes.first().map_or(self.last, |&h| h - 1)
    }

    /// The `Maxdate` to tell the sender restarting from its checkpoint dated `date`: the real one, unless a
    /// hole lies at or below `date` (a message its checkpoint holds in its log and that must be replayed).
    pub(crate) fn last_date_for(&self, date: Date) -> Date {
        match self.holes.first() {
            Some(&h) if h <= date => h - 1,
            _ => self.last,
        }
    }

    /// Records a message dated `date > last` in phase `phase < MAX_PHASE`.
    fn record(&mut self, date: Date, phase: Phase) {
        let single = self.step == 0 && self.first == self.last;
        let extends = if self.step != 0 {
            date - self.last == self.step && Some(phase) == self.last_phase.checked_add(self.pstep)
        } else {
            // A one-element run takes its steps from its second element (phases never decrease along a
            // sender's dates; a peer that says otherwise starts a new run).
            single && phase >= self.last_phase
        };
        if extends {
            if self.step == 0 {
                self.step = date - self.last;
                self.pstep = phase - self.last_phase;
            }
        } else {
            if let Some(run) = self.current() {
                self.closed.push(run);
            }
            (self.first, self.phase, self.step, self.pstep) = (date, phase, 0, 0);
        }
        self.last = date;
        self.last_phase = phase;
        self.refresh_key();
    }

    /// Whether the owner lets arrivals take the fast path.
    pub(crate) fn set_permit(&mut self, permit: bool) {
        self.permit = permit;
        self.refresh_key();
    }

    fn refresh_key(&mut self) {
        let extensible = self.permit && self.step != 0;
        self.key = if extensible && self.pstep == 0 { self.last_phase } else { NO_FAST };
        let next = self.last_phase + self.pstep;
        self.next = if extensible && self.pstep != 0 && next < MAX_PHASE { next } else { NO_FAST };
    }

    /// The current run, if it has an element.
    fn current(&self) -> Option<Run> {
        (self.first <= self.last).then_some(Run {
            first: self.first,
            last: self.last,
            step: self.step.max(1),
            phase: self.phase,
            pstep: self.pstep,
        })
    }

    /// Drops the records dated at most `date` (hydee.md \[R\]: covered by the sender's group checkpoint).
    /// `RPP[j].Maxdate` stays.
    pub(crate) fn prune_through(&mut self, date: Date) {
        self.pruned = self.pruned.max(date.min(self.last));
        let covered = self.holes.partition_point(|&h| h <= date);
        self.holes.drain(..covered);
        let gone = self.closed.iter().take_while(|r| r.last <= date).count();
        self.closed.drain(..gone);
        if let Some(run) = self.closed.first_mut() {
            run.prune_through(date);
        }
        if self.first > date || self.first > self.last {
            return;
        }
        if self.last <= date {
            // Emptied. With a known step the run stays open at its next element, so that the fast path (which
            // does not touch `first`) still extends it exactly.
            if self.step != 0 {
                self.first = self.last + self.step;
                self.phase = self.last_phase + self.pstep;
            } else {
                self.first = self.last + 1;
            }
        } else if let Some(mut run) = self.current() {
            run.prune_through(date);
            (self.first, self.phase) = (run.first, run.phase);
        }
    }

    /// Appends the `(date, phase)` of every record dated after `after`, ascending.
    pub(crate) fn expand_after(&self, after: Date, out: &mut Vec<(Date, Phase)>) {
        let first_live = self.closed.partition_point(|r| r.last <= after);
        for run in self.closed[first_live..].iter().chain(self.current().as_ref()) {
            run.expand_after(after, out);
        }
    }

    /// `(date, phase)` of every record, ascending.
    pub(crate) fn entries(&self) -> Vec<(Date, Phase)> {
        let mut out = Vec::new();
        self.expand_after(0, &mut out);
        out
    }

    /// Whether nothing was ever accepted and nothing is recorded.
    pub(crate) fn is_blank(&self) -> bool {
        self.last == 0 && self.closed.is_empty() && self.current().is_none()
    }

    /// The record as saved in a checkpoint.
    pub(crate) fn to_checkpoint(&self) -> ReceivedFrom {
        let mut runs = self.closed.clone();
        runs.extend(self.current());
        ReceivedFrom { max_date: self.last, runs, holes: self.holes.clone(), pruned: self.pruned }
    }

    /// The record saved in `saved`, checked (a checkpoint is read back from storage); the fast path stays off
    /// until [`Rpp::set_permit`].
    pub(crate) fn restore(saved: &ReceivedFrom) -> Result<Rpp> {
        let mut after = 0;
        for run in &saved.runs {
            run.validate(after)?;
            after = run.last;
        }
        if after > saved.max_date || saved.max_date > MAX_DATE {
            return Err(Error::InvalidCheckpoint("RPP runs must lie at or below Maxdate, within the date range"));
        }
        let first_run = saved.runs.first().map_or(Date::MAX, |r| r.first);
        if saved.pruned > saved.max_date || saved.pruned >= first_run {
            return Err(Error::InvalidCheckpoint("the RPP pruning bound must lie below its runs and Maxdate"));
        }
        let mut below = saved.pruned;
        for &h in &saved.holes {
            let recorded = saved.runs.iter().any(|r| r.holds(h));
            if h <= below || h >= saved.max_date || recorded {
                return Err(Error::InvalidCheckpoint("RPP holes must ascend between the pruning bound and Maxdate"));
            }
            below = h;
        }
        // Every saved run is closed; the next arrival opens a new one.
        Ok(Rpp {
            last: saved.max_date,
            first: saved.max_date + 1,
            closed: saved.runs.clone(),
            holes: saved.holes.clone(),
            pruned: saved.pruned,
            ..Rpp::default()
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn pb(date: Date, phase: Phase) -> Piggyback {
        Piggyback::new(date, phase, None).unwrap()
    }

    /// Arrival as the process makes it: fast paths first, checked path otherwise.
    fn arrive(r: &mut Rpp, date: Date, phase: Phase) -> (Reception, bool) {
        match r.try_extend(pb(date, phase)).or_else(|| r.try_extend_rising(pb(date, phase))) {
            Some(d) => (Reception::Deliver(d), true),
            None => (r.accept(pb(date, phase)).unwrap(), false),
        }
    }

    fn fast() -> Rpp {
        let mut r = Rpp::default();
        r.set_permit(true);
        r
    }

    #[test]
    fn a_stream_in_one_phase_takes_the_fast_path_after_two_messages() {
        let mut r = fast();
        let fast_taken: Vec<bool> = (1..=6).map(|k| arrive(&mut r, 3 * k, 2).1).collect();
        assert_eq!(fast_taken, [false, false, true, true, true, true]);
        assert_eq!(r.entries(), (1..=6).map(|k| (3 * k, 2)).collect::<Vec<_>>());
        assert_eq!(r.closed.len(), 0, "one run");
        assert_eq!(r.max_date(), 18);
    }

    #[test]
    fn the_fast_path_delivers_what_the_checked_path_would() {
        let (mut a, mut b) = (fast(), Rpp::default());
        for d in [2, 4, 6, 8] {
            let (ra, _) = arrive(&mut a, d, 5);
            let rb = b.accept(pb(d, 5)).unwrap();
            assert_eq!(ra, rb);
            assert_eq!(ra, Reception::Deliver(Delivery::new(6, 0)));
        }
        assert_eq!(a.entries(), b.entries());
    }

    #[test]
    fn the_fast_path_refuses_what_needs_checking() {
        let mut r = fast();
        arrive(&mut r, 1, 1);
        arrive(&mut r, 2, 1);
        // A released message (tag) with the expected date and phase: the packed date differs.
        assert!(r.try_extend(Piggyback::new(3, 1, Some(4)).unwrap()).is_none());
        assert!(r.try_extend(pb(3, 2)).is_none(), "another phase");
        assert!(r.try_extend(pb(4, 1)).is_none(), "another step");
        assert!(r.try_extend(pb(2, 1)).is_none(), "a duplicate");
        assert_eq!(r.max_date(), 2, "refusals change nothing");
        r.set_permit(false);
        assert!(r.try_extend(pb(3, 1)).is_none(), "not permitted");
        r.set_permit(true);
        assert!(r.try_extend(pb(3, 1)).is_some());
    }

    #[test]
    fn duplicates_and_overflow_on_the_checked_path() {
        let mut r = fast();
        arrive(&mut r, 5, 1);
        assert_eq!(r.accept(pb(5, 1)).unwrap(), Reception::Duplicate);
        assert_eq!(r.accept(pb(3, 1)).unwrap(), Reception::Duplicate);
        assert!(matches!(r.accept(pb(6, MAX_PHASE)), Err(Error::PhaseOverflow { .. })));
        // A run reaching MAX_PHASE - 1 by steps: its next element would not be encodable, and is refused.
        let mut r = fast();
        arrive(&mut r, 1, MAX_PHASE - 3);
        arrive(&mut r, 2, MAX_PHASE - 2);
        arrive(&mut r, 3, MAX_PHASE - 1);
        assert!(matches!(r.accept(pb(4, MAX_PHASE)), Err(Error::PhaseOverflow { .. })));
        assert_eq!(r.entries(), vec![(1, MAX_PHASE - 3), (2, MAX_PHASE - 2), (3, MAX_PHASE - 1)]);
    }

    #[test]
    fn rising_phases_make_one_run_on_the_second_fast_path() {
        // A ping-pong across groups: the sender's phase rises by two per message.
        let mut r = fast();
        let fast_taken: Vec<bool> = (0..10).map(|k| arrive(&mut r, k + 1, 2 * k + 1).1).collect();
        assert_eq!(fast_taken, [false, false, true, true, true, true, true, true, true, true]);
        assert!(r.try_extend(pb(11, 21)).is_none(), "not the steady path's");
        assert_eq!(r.closed.len(), 0);
        assert_eq!(r.entries(), (0..10).map(|k| (k + 1, 2 * k + 1)).collect::<Vec<_>>());
        // Refusals change nothing; permits apply to both paths.
        assert!(r.try_extend_rising(pb(11, 22)).is_none(), "another phase step");
        assert!(r.try_extend_rising(pb(12, 21)).is_none(), "another date step");
        assert!(r.try_extend_rising(Piggyback::new(11, 21, Some(1)).unwrap()).is_none(), "a tag");
        r.set_permit(false);
        assert!(r.try_extend_rising(pb(11, 21)).is_none(), "not permitted");
        r.set_permit(true);
        assert_eq!(r.try_extend_rising(pb(11, 21)), Some(Delivery::new(22, 0)));
        assert_eq!(r.max_date(), 11);
    }

    #[test]
    fn a_rising_run_stops_before_the_phase_overflows() {
        let mut r = fast();
        for (d, p) in [(1, MAX_PHASE - 7), (2, MAX_PHASE - 5), (3, MAX_PHASE - 3)] {
            arrive(&mut r, d, p);
        }
        // MAX_PHASE - 1 is the last acceptable phase; the one after it is not the fast path's to refuse.
        assert!(arrive(&mut r, 4, MAX_PHASE - 1).1);
        assert_eq!(r.next, NO_FAST);
        assert!(r.try_extend_rising(pb(5, MAX_PHASE)).is_none());
        assert!(matches!(r.accept(pb(5, MAX_PHASE)), Err(Error::PhaseOverflow { .. })));
        assert_eq!(r.max_date(), 4);
    }

    #[test]
    fn irregular_arrivals_cost_at_most_a_run_per_two_messages() {
        let mut r = fast();
        let dates = [1, 2, 4, 7, 11, 16, 22, 29, 37];
        for d in dates {
            arrive(&mut r, d, 1);
        }
        assert!(r.closed.len() < dates.len() / 2 + 1);
        assert_eq!(r.entries(), dates.iter().map(|&d| (d, 1)).collect::<Vec<_>>());
        // A phase that goes down (a peer breaking the rules) starts a run and is recorded as said.
        arrive(&mut r, 40, 3);
        arrive(&mut r, 41, 2);
        assert_eq!(&r.entries()[dates.len()..], &[(40, 3), (41, 2)]);
    }

    #[test]
    fn pruning_inside_a_run_keeps_its_tail_and_the_fast_path() {
        let mut r = fast();
        for d in (2..=20).step_by(2) {
            arrive(&mut r, d, 4);
        }
        r.prune_through(9);
        assert_eq!(r.entries(), (10..=20).step_by(2).map(|d| (d, 4)).collect::<Vec<_>>());
        r.prune_through(10);
        assert_eq!(r.entries()[0], (12, 4));
        assert!(arrive(&mut r, 22, 4).1, "still extended on the fast path");
        assert_eq!(r.max_date(), 22);
    }

    #[test]
    fn pruning_everything_keeps_maxdate_and_records_what_follows_exactly() {
        let mut r = fast();
        for d in (2..=10).step_by(2) {
            arrive(&mut r, d, 1);
        }
        r.prune_through(10);
        assert!(r.entries().is_empty());
        assert_eq!(r.max_date(), 10);
        // The run stays open at its next element: the fast path extends it, and the record holds exactly that.
        assert!(arrive(&mut r, 12, 1).1);
        assert_eq!(r.entries(), vec![(12, 1)]);
        // Pruned past the end (the sender checkpointed after sending elsewhere): what follows is recorded as is.
        r.prune_through(100);
        assert!(r.entries().is_empty());
        assert!(arrive(&mut r, 14, 1).1, "the next element of the run");
        assert_eq!(r.entries(), vec![(14, 1)]);
        arrive(&mut r, 150, 1);
        assert_eq!(r.entries(), vec![(14, 1), (150, 1)]);
        // A one-element run pruned away, then a new message.
        let mut r = fast();
        arrive(&mut r, 3, 2);
        r.prune_through(3);
        assert!(r.entries().is_empty() && !r.is_blank(), "emptied, Maxdate kept");
        arrive(&mut r, 4, 2);
        assert_eq!(r.entries(), vec![(4, 2)]);
    }

    #[test]
    fn pruning_and_lookups_across_closed_runs() {
        let mut r = fast();
        // Runs: 1..=3 phase 1; 10, 20, 30 phase 2; 31..=33 phases 5, 6, 7.
        for (d, p) in [(1, 1), (2, 1), (3, 1), (10, 2), (20, 2), (30, 2), (31, 5), (32, 6), (33, 7)] {
            arrive(&mut r, d, p);
        }
        let mut after = Vec::new();
        r.expand_after(20, &mut after);
        assert_eq!(after, vec![(30, 2), (31, 5), (32, 6), (33, 7)]);
        after.clear();
        r.expand_after(33, &mut after);
        assert!(after.is_empty());
        r.prune_through(15);
        assert_eq!(r.entries(), vec![(20, 2), (30, 2), (31, 5), (32, 6), (33, 7)]);
        r.prune_through(31);
        assert_eq!(r.entries(), vec![(32, 6), (33, 7)]);
    }

    #[test]
    fn an_arrival_undone_last_moves_maxdate_back_exactly() {
        // A steady run: Maxdate goes back by its step, and the run goes on.
        let mut r = fast();
        for d in [3, 6, 9, 12] {
            arrive(&mut r, d, 2);
        }
        assert!(r.unrecord(12));
        assert_eq!((r.max_date(), r.entries()), (9, vec![(3, 2), (6, 2), (9, 2)]));
        assert_eq!(arrive(&mut r, 12, 2), (Reception::Deliver(Delivery::new(3, 0)), true), "the run goes on");
        assert_eq!(r.entries().len(), 4);
        // A one-message run after a closed one: back to the closed run's end.
        let mut r = fast();
        for d in [1, 2, 7] {
            arrive(&mut r, d, 1);
        }
        assert!(r.unrecord(7));
        assert_eq!((r.max_date(), r.entries()), (2, vec![(1, 1), (2, 1)]));
        // Everything before it pruned: back to the pruning bound, which lies between the previous and it.
        let mut r = fast();
        for d in [2, 4, 9] {
            arrive(&mut r, d, 1);
        }
        r.prune_through(5);
        assert!(!r.unrecord(4), "pruned: nothing recorded");
        assert!(r.unrecord(9));
        assert_eq!((r.max_date(), r.entries()), (5, vec![]), "between 4, the previous, and 9");
        assert!(matches!(r.accept(pb(9, 1)).unwrap(), Reception::Deliver(_)));
        assert!(!r.unrecord(8) && !r.unrecord(10), "never recorded");
    }

    #[test]
    fn an_arrival_undone_below_a_later_one_is_a_hole_filled_once() {
        let mut r = fast();
        for d in 1..=6 {
            arrive(&mut r, d, 1);
        }
        assert!(r.unrecord(3));
        assert!(r.unrecord(5));
        assert_eq!(r.max_date(), 6);
        assert_eq!(r.complete_through(), 2);
        assert_eq!((r.last_date_for(2), r.last_date_for(4)), (6, 2));
        assert_eq!(r.entries(), vec![(1, 1), (2, 1), (4, 1), (6, 1)]);
        let saved = r.to_checkpoint();
        assert_eq!(saved.holes, vec![3, 5]);
        let mut back = Rpp::restore(&saved).unwrap();
        for r in [&mut r, &mut back] {
            assert_eq!(r.accept(pb(4, 1)).unwrap(), Reception::Duplicate);
            assert!(matches!(r.accept(pb(5, 1)).unwrap(), Reception::Deliver(_)));
            assert_eq!(r.accept(pb(5, 1)).unwrap(), Reception::Duplicate);
            assert_eq!(r.complete_through(), 2);
            r.prune_through(3);
            assert_eq!(r.complete_through(), 6, "a pruned hole is covered by the sender's checkpoint");
            assert_eq!(r.entries(), vec![(4, 1), (5, 1), (6, 1)]);
            assert!(matches!(r.accept(pb(7, 1)).unwrap(), Reception::Deliver(_)));
        }
        let bad = ReceivedFrom { max_date: 6, runs: vec![], holes: vec![6], pruned: 0 };
        assert!(Rpp::restore(&bad).is_err(), "a hole at Maxdate");
        let bad = ReceivedFrom { max_date: 6, runs: vec![], holes: vec![2], pruned: 3 };
        assert!(Rpp::restore(&bad).is_err(), "a hole below the pruning bound");
    }

    #[test]
    fn checkpoints_round_trip_and_are_checked() {
        let mut r = fast();
        for (d, p) in [(1, 1), (2, 1), (5, 2), (9, 3), (10, 3)] {
            arrive(&mut r, d, p);
        }
        let saved = r.to_checkpoint();
        assert_eq!(saved.entries(), r.entries());
        let mut back = Rpp::restore(&saved).unwrap();
        assert_eq!(back.entries(), r.entries());
        assert_eq!(back.max_date(), 10);
        back.set_permit(true);
        assert_eq!(arrive(&mut back, 10, 3).0, Reception::Duplicate);
        arrive(&mut back, 11, 3);
        assert_eq!(back.entries().last(), Some(&(11, 3)));
        let run = |first, last, step, phase, pstep| Run { first, last, step, phase, pstep };
        for bad in [
            vec![run(3, 1, 1, 1, 0)],
            vec![run(1, 4, 2, 1, 0)],
            vec![run(1, 4, 0, 1, 0)],
            vec![run(1, 2, 1, 0, 0)],
            vec![run(1, 3, 1, MAX_PHASE - 2, 1)],
            vec![run(1, 3, 1, 1, u64::MAX)],
            vec![run(1, 3, 1, 1, 0), run(3, 4, 1, 1, 0)],
            vec![run(1, 20, 1, 1, 0)],
        ] {
            let saved = ReceivedFrom { max_date: 10, runs: bad.clone(), ..Default::default() };
            assert!(matches!(Rpp::restore(&saved), Err(Error::InvalidCheckpoint(_))), "{bad:?}");
        }
        assert!(Rpp::restore(&ReceivedFrom { max_date: MAX_DATE + 1, ..Default::default() }).is_err());
    }

    proptest! {
        /// Arrivals undone (`unrecord`) agree with a list too: the records, `Maxdate` (back to the previous arrival or
        /// the pruning bound), holes accepted once and only them, through prunes and checkpoint round trips.
        #[test]
        fn undone_arrivals_match_a_list(
            ops in proptest::collection::vec((0u8..10, 0usize..8, 1u64..4), 1..150),
            permit in any::<bool>(),
        ) {
            let mut r = Rpp::default();
            r.set_permit(permit);
            let mut model: Vec<(Date, Phase)> = Vec::new();
            let mut holes: Vec<(Date, Phase)> = Vec::new();
            let (mut date, mut last, mut pruned) = (0, 0, 0);
            for (op, k, gap) in ops {
                match op {
                    0..=3 => {
                        date += gap;
                        prop_assert!(matches!(arrive(&mut r, date, 1 + date / 8).0, Reception::Deliver(_)));
                        model.push((date, 1 + date / 8));
                        last = date;
                    }
                    4 | 5 if !model.is_empty() => {
                        let (d, ph) = model.remove(model.len() - 1 - k % model.len());
                        prop_assert!(r.unrecord(d));
                        if d == last {
                            last = model.last().map_or(pruned, |e| e.0).max(pruned);
                            holes.retain(|h| h.0 < last);
                        } else {
                            holes.push((d, ph));
                            holes.sort_unstable();
                        }
                        prop_assert!(!r.unrecord(d), "twice");
                    }
                    6 if !holes.is_empty() => {
                        let (d, ph) = holes.remove(k % holes.len());
                        prop_assert!(matches!(r.accept(pb(d, ph)).unwrap(), Reception::Deliver(_)));
                        prop_assert_eq!(r.accept(pb(d, ph)).unwrap(), Reception::Duplicate);
                        model.push((d, ph));
                        model.sort_unstable();
                    }
                    7 => {
                        let through = date.saturating_sub(gap * 3);
                        r.prune_through(through);
                        pruned = pruned.max(through.min(last));
                        model.retain(|e| e.0 > through);
                        holes.retain(|h| h.0 > through);
                    }
                    8 => {
                        r = Rpp::restore(&r.to_checkpoint()).unwrap();
                        r.set_permit(permit);
                    }
                    _ => {
                        if let Some(&(d, ph)) = model.get(k % model.len().max(1)) {
                            prop_assert_eq!(r.accept(pb(d, ph)).unwrap(), Reception::Duplicate);
                        }
                    }
                }
                prop_assert_eq!(r.entries(), model.clone());
                prop_assert_eq!(r.max_date(), last);
                prop_assert_eq!(r.complete_through(), holes.first().map_or(last, |h| h.0 - 1));
            }
        }

        /// The runs agree with a plain `(date, phase)` list under random arrivals (with and without the fast path),
        /// duplicates, prunes and checkpoint round trips.
        #[test]
        fn matches_a_list(
            ops in proptest::collection::vec((0u8..10, 1u64..5, 0u64..3), 1..200),
            permit in any::<bool>(),
        ) {
            let mut r = Rpp::default();
            r.set_permit(permit);
            let mut model: Vec<(Date, Phase)> = Vec::new();
            let (mut date, mut phase) = (0, 1);
            for (op, gap, rise) in ops {
                match op {
                    // Mostly regular arrivals, so that runs grow and the fast path is taken.
                    0..=5 => {
                        date += if op < 4 { 2 } else { gap };
                        phase += if op == 5 { rise } else { 0 };
                        prop_assert_eq!(arrive(&mut r, date, phase).0, Reception::Deliver(Delivery::new(phase + 1, 0)));
                        model.push((date, phase));
                    }
                    6 => {
                        let old = date.saturating_sub(gap);
                        if old > 0 {
                            prop_assert_eq!(arrive(&mut r, old, phase).0, Reception::Duplicate);
                        }
                    }
                    7 | 8 => {
                        let through = date.saturating_sub(gap * rise) + if op == 8 { gap } else { 0 };
                        r.prune_through(through);
                        model.retain(|e| e.0 > through);
                    }
                    _ => {
                        r = Rpp::restore(&r.to_checkpoint()).unwrap();
                        r.set_permit(permit);
                    }
                }
                prop_assert_eq!(r.entries(), model.clone());
                prop_assert_eq!(r.max_date(), date);
                let after = date.saturating_sub(gap * 3);
                let mut got = Vec::new();
                r.expand_after(after, &mut got);
                let want: Vec<_> = model.iter().copied().filter(|e| e.0 > after).collect();
                prop_assert_eq!(got, want);
            }
        }
    }
}
