//! `RPP[j]`, what a process accepted from one sender `j` of another group (Fig 6.3 line 4 of
//! `shared/papers/guermouche-2011-thesis-send-determinism-hydee.txt`, T:1958–1960), written on every arrival
//! (lines 14–15, T:1967–1968: `RPP[j].Maxdate ← date`, `RPP[j][date].phase ← phase`), kept as arithmetic runs.
//!
//! It is written on the message path and read off it: on recovery, to list and count the orphans a restarting
//! sender will regenerate (Fig 6.5 lines 8–14, T:2020–2044), and on pruning (`shared/reference/hydee.md` \[R\]:
//! entries covered by the sender's group checkpoint go). Writes must be cheap, reads exact. Why runs of dates as well
//! as phases, and how the fast paths are keyed: `docs/design/hydee.md`.
//!
//! Invariants:
//! - Expanding the [`Run`]s gives back exactly the `(date, phase)` of every message accepted, neither pruned nor
//!   undone.
//! - `Rpp::try_extend` and `Rpp::try_extend_rising` record a message only if it extends the current run (two
//!   comparisons and one store), else change nothing; their keys hold `NO_FAST`, which no piggyback carries,
//!   whenever the owner wants every arrival checked (`Rpp::set_permit`). `Rpp::accept` handles the rest.
//! - Holes (arrivals undone) lie below `RPP[j].Maxdate`, where the fast paths never accept.

use serde::{Deserialize, Serialize};

use crate::piggyback::{MAX_DATE, MAX_PHASE, Piggyback, Stamp};
use crate::process::events::{Delivery, Reception};
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
    /// Dates below `max_date` whose arrival was undone
    /// ([`Process::on_receive_undone`](crate::Process::on_receive_undone)), ascending: accepted when they come again.
    #[serde(default)]
    pub holes: Vec<Date>,
    /// Records dated at most this were pruned (0: none).
    #[serde(default)]
    pub pruned: Date,
    /// The [`Stamp`]s of the recorded messages that carried one, ascending by date (each date one of `runs`'):
    /// what a restarted sender's regenerated messages are compared with.
    #[serde(default)]
    pub stamps: Vec<(Date, Stamp)>,
    /// Sequence number of the last message accepted from that sender (0: none, or unstamped).
    #[serde(default)]
    pub last_seq: u64,
    /// Not about reception: the number of messages this process had sent *to* that rank, the last per-destination
    /// sequence number it used. Kept here, with everything else the process saves per peer, so that
    /// [`ProcessState`](crate::ProcessState) keeps its fields.
    #[serde(default)]
    pub sent: u64,
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

    /// Whether `date` is a hole: an arrival undone, to be accepted again.
    pub(crate) fn is_hole(&self, date: Date) -> bool {
        self.holes.binary_search(&date).is_ok()
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
        ReceivedFrom { max_date: self.last, runs, holes: self.holes.clone(), pruned: self.pruned, ..Default::default() }
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
mod tests;
