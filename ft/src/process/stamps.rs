//! Send determinism checked, not assumed: the [`Stamp`] hooks.
//!
//! HydEE suppresses a regenerated orphan (a message its receiver got before the sender rolled back) by its date
//! alone (Fig 6.4 lines 13–22), which trusts the re-execution to send the same messages in the same order. Two
//! messages to one destination that swap dates on re-execution would make the wrong one suppressed and the other
//! delivered twice, and nobody would know. So each message also carries a [`Stamp`]: its per-destination sequence
//! number (`Peer::sent`, counted on every send path, fast ones included) and a 64-bit [`digest`](crate::digest) of
//! its envelope and payload, which the driver computes and passes in (the engine never sees a payload).
//!
//! - The receiver keeps the stamps of what it accepted from each sender of another group (`Peer::stamps`, pruned
//!   with the RPP, saved with it in [`ReceivedFrom`]) and checks that each new message from a sender is the next
//!   in its sequence (`Peer::rx_seq`) and, when the driver hashed what arrived, that the payload matches its
//!   digest: a replay from a survivor's log to a restarted receiver is checked so.
//! - `LastDate` carries the stamps of the orphans; the restarted sender suppresses a regenerated message only if
//!   its date, sequence number and digest all match the orphan's, and refuses a send that would skip one.
//!
//! Any mismatch is [`Error::SendDeterminismViolated`], never a duplicate or a drop. A driver stamps everything or
//! nothing: an unstamped message (seq 0) is not checked, and neither is an orphan its receiver got unstamped.
//!
//! Cost: the sender hashes each message once (about 0.2 cycle per byte, a handful of multiplies under 32 bytes)
//! and both ends carry 16 more bytes per message; the receiver keeps 24 bytes per unpruned record.

use std::collections::VecDeque;

use super::events::{Outbound, Reception};
use super::{Peer, Process};
use crate::piggyback::{Piggyback, Stamp};
use crate::rpp::ReceivedFrom;
use crate::{Date, Error, Phase, Rank, Result};

impl Process {
    /// [`Process::on_send`] for a driver that stamps: `digest` is the message's
    /// ([`digest::digest`](crate::digest::digest)`(envelope, payload)`); returns with the outcome the [`Stamp`] to
    /// transmit (or log) with the piggyback — [`Stamp::NONE`] with [`Outbound::Hold`], which sends nothing.
    #[inline]
    pub fn on_send_stamped(&mut self, to: Rank, digest: u64) -> Result<(Outbound, Stamp)> {
        let Some(peer) = self.peers.get_mut(to as usize) else {
            return Err(self.unknown(to));
        };
        if self.date >= self.fast_send_limit {
            let out = self.send_checked(to, self.phase, Some(digest))?;
            return Ok((out, self.stamp_after(to, &out, digest)));
        }
        self.date += 1;
        peer.sent += 1;
        let piggyback = Piggyback::from_parts(self.date, self.phase, 0);
        Ok((Outbound::Transmit { piggyback, log: peer.inter != 0 }, Stamp { seq: peer.sent, digest }))
    }

    /// [`Process::on_send_as_of`] for a driver that stamps (see [`Process::on_send_stamped`]).
    pub fn on_send_as_of_stamped(&mut self, to: Rank, phase: Phase, digest: u64) -> Result<(Outbound, Stamp)> {
        if self.peers.get(to as usize).is_none() {
            return Err(self.unknown(to));
        }
        let out = self.send_checked(to, phase.min(self.phase), Some(digest))?;
        Ok((out, self.stamp_after(to, &out, digest)))
    }

    /// [`Process::send_fast`] for a driver that stamps: the same, with the message's [`Stamp`].
    #[inline(always)]
    pub fn send_fast_stamped(&mut self, to: Rank, digest: u64) -> Option<(Piggyback, bool, Stamp)> {
        let (piggyback, log) = self.send_fast(to)?;
        // In bounds: `send_fast` checked it.
        let seq = self.peers.get(to as usize).map_or(0, |p| p.sent);
        Some((piggyback, log, Stamp { seq, digest }))
    }

    fn stamp_after(&self, to: Rank, out: &Outbound, digest: u64) -> Stamp {
        match out {
            Outbound::Hold => Stamp::NONE,
            _ => Stamp { seq: self.peers[to as usize].sent, digest },
        }
    }

    /// [`Process::on_receive`] for a driver that stamps: `stamp` is the one the message carried, `digest` the
    /// digest of what arrived (envelope and payload) if the driver computed it. A message accepted from another
    /// group must be the next in its sender's sequence to this process and match its digest, else
    /// [`Error::SendDeterminismViolated`], with nothing recorded (the process must not go on: the application is
    /// not send-deterministic, or its log is damaged).
    ///
    /// Inline, the common case: from another group, the next in sequence, its digest right (if given), and the
    /// next message of a steady run on one of the RPP's fast paths (as in [`Process::on_receive`]), recorded at
    /// once; anything else is a call.
    #[inline(always)]
    pub fn on_receive_stamped(
        &mut self,
        from: Rank,
        pb: Piggyback,
        stamp: Stamp,
        digest: Option<u64>,
    ) -> Result<Reception> {
        if let Some(peer) = self.peers.get_mut(from as usize)
            && peer.inter != 0
            && stamp.is_some()
            && peer.next_in_sequence(pb.date(), stamp, digest)
            && let Some(delivery) = match peer.received.try_extend(pb) {
                None => peer.received.try_extend_rising(pb),
                fast => fast,
            }
        {
            peer.record_next(pb.date(), stamp);
            return Ok(Reception::Deliver(delivery));
        }
        self.on_receive_stamped_checked(from, pb, stamp, digest)
    }

    /// [`Process::on_receive_stamped`] off its inline case: the checks in full, then [`Process::on_receive`].
    #[inline(never)]
    fn on_receive_stamped_checked(
        &mut self,
        from: Rank,
        pb: Piggyback,
        stamp: Stamp,
        digest: Option<u64>,
    ) -> Result<Reception> {
        let Some(peer) = self.peers.get(from as usize) else {
            return Err(self.unknown(from));
        };
        let before = peer.received.max_date();
        let check = peer.inter != 0 && stamp.is_some();
        // The common case passes the checks at once.
        if check && !peer.next_in_sequence(pb.date(), stamp, digest) {
            self.check_stamp_rest(from, pb.date(), before, stamp, digest)?;
        }
        let reception = self.on_receive(from, pb)?;
        if check && matches!(reception, Reception::Deliver(_)) {
            self.record_stamp(from, pb.date(), before, stamp);
        }
        Ok(reception)
    }

    /// [`Process::check_stamp`] for an arrival that is not the common case, unless it is stale (a restarting
    /// process drops it, unchecked).
    #[cold]
    #[inline(never)]
    fn check_stamp_rest(&self, from: Rank, date: Date, before: Date, stamp: Stamp, digest: Option<u64>) -> Result<()> {
        let stale = self.recovery.as_deref().is_some_and(|r| r.restarting && r.awaiting_last_date.contains(&from));
        if stale { Ok(()) } else { self.check_stamp(from, date, before, stamp, digest) }
    }

    /// [`Process::receive_deliver_fast`] for a driver that stamps: `true` exactly when that would be, and the
    /// stamp checks of [`Process::on_receive_stamped`] pass; `false`, with nothing changed, otherwise.
    #[inline(always)]
    pub fn receive_deliver_fast_stamped(
        &mut self,
        from: Rank,
        pb: Piggyback,
        stamp: Stamp,
        digest: Option<u64>,
    ) -> bool {
        let Some(peer) = self.peers.get(from as usize) else {
            return false;
        };
        let check = peer.inter != 0 && stamp.is_some();
        if check && !peer.next_in_sequence(pb.date(), stamp, digest) {
            return false;
        }
        if !self.receive_deliver_fast(from, pb) {
            return false;
        }
        if check && let Some(peer) = self.peers.get_mut(from as usize) {
            peer.record_next(pb.date(), stamp);
        }
        true
    }

    /// Checks the stamp of a message from `from` at `date`, arriving when the last date accepted from it is
    /// `before` (and not stale): nothing to check for a duplicate.
    fn check_stamp(&self, from: Rank, date: Date, before: Date, stamp: Stamp, digest: Option<u64>) -> Result<()> {
        let peer = &self.peers[from as usize];
        let bad =
            |what| Err(Error::SendDeterminismViolated { rank: from, dest: self.rank, seq: stamp.seq, date, what });
        let new = date > before;
        if !new && !peer.received.is_hole(date) {
            return Ok(());
        }
        if digest.is_some_and(|d| d != stamp.digest) {
            return bad("arrived with a payload that does not match its digest");
        }
        if new {
            // Nothing was ever accepted (the first message is 1), or the last stamp is known.
            if (peer.rx_seq != 0 || before == 0) && stamp.seq != peer.rx_seq + 1 {
                return bad("arrived out of sequence (not the next message from its sender)");
            }
            return Ok(());
        }
        // A hole filled again (`on_receive_undone`): between its neighbours.
        let at = peer.stamps.partition_point(|s| s.0 < date);
        let after_prev = at == 0 || peer.stamps[at - 1].1.seq < stamp.seq;
        let before_next = peer.stamps.get(at).is_none_or(|s| s.1.seq > stamp.seq);
        if !(after_prev && before_next) {
            return bad("fills a hole out of sequence");
        }
        Ok(())
    }

    /// Records the stamp of a message accepted from `from` at `date` (checked by [`Process::check_stamp`]).
    #[inline(always)]
    fn record_stamp(&mut self, from: Rank, date: Date, before: Date, stamp: Stamp) {
        let peer = &mut self.peers[from as usize];
        if date > before {
            peer.record_next(date, stamp);
        } else {
            let at = peer.stamps.partition_point(|s| s.0 < date);
            peer.stamps.insert(at, (date, stamp));
        }
    }

    /// The record of the arrival at `date` was undone; `last` was `RPP[j].Maxdate` before.
    pub(super) fn unrecord_stamp(peer: &mut Peer, date: Date, last: Date) {
        if let Ok(i) = peer.stamps.binary_search_by_key(&date, |s| s.0)
            && let Some((_, s)) = peer.stamps.remove(i)
            && date == last
        {
            peer.rx_seq = s.seq - 1;
        }
    }

    /// The stamps of `orphans` (ascending dates, all recorded), or none if one of them was not stamped.
    pub(super) fn orphan_stamps(stamps: &VecDeque<(Date, Stamp)>, orphans: &[(Date, Phase)]) -> Vec<Stamp> {
        let mut out = Vec::with_capacity(orphans.len());
        for &(date, _) in orphans {
            match stamps.binary_search_by_key(&date, |s| s.0) {
                Ok(i) => out.push(stamps[i].1),
                Err(_) => return Vec::new(),
            }
        }
        out
    }

    /// Why a send at `date` with sequence number `seq` and `digest` does not fit the next orphan owed to its
    /// destination (recorded at `odate` with `stamp`), if it does not.
    pub(super) fn regenerated_mismatch(
        odate: Date,
        stamp: Stamp,
        date: Date,
        seq: u64,
        digest: Option<u64>,
    ) -> Option<&'static str> {
        if !stamp.is_some() {
            return None;
        }
        if odate == date {
            if stamp.seq != seq {
                return Some("regenerates an orphan its receiver recorded under another sequence number");
            }
            if digest.is_some_and(|d| d != stamp.digest) {
                return Some("regenerates an orphan whose content differs from what its receiver recorded (digest)");
            }
            return None;
        }
        if stamp.seq == seq {
            return Some("has the sequence number of an orphan its receiver recorded at another date");
        }
        (stamp.seq < seq).then_some("skips an orphan its receiver recorded")
    }
}

impl Peer {
    /// The common case of a stamped arrival from this rank, which every stamped hook tests first: a new message
    /// (after every date accepted from it), the next in its sequence, and its digest right if the driver computed
    /// one. Anything else goes through [`Process::check_stamp`].
    #[inline(always)]
    fn next_in_sequence(&self, date: Date, stamp: Stamp, digest: Option<u64>) -> bool {
        stamp.seq == self.rx_seq + 1 && date > self.received.max_date() && digest.is_none_or(|d| d == stamp.digest)
    }

    /// Records the stamp of a message accepted as [`next_in_sequence`](Self::next_in_sequence).
    #[inline(always)]
    fn record_next(&mut self, date: Date, stamp: Stamp) {
        self.rx_seq = stamp.seq;
        self.stamps.push_back((date, stamp));
    }
}

/// The stamps saved in `r`, checked (a checkpoint is read back from storage).
pub(super) fn restore(r: &ReceivedFrom) -> Result<VecDeque<(Date, Stamp)>> {
    let mut last = (r.pruned, 0);
    for &(date, s) in &r.stamps {
        if date <= last.0 || date > r.max_date || s.seq <= last.1 || s.seq > r.last_seq {
            return Err(Error::InvalidCheckpoint(
                "stamps must ascend in date and sequence, between the pruning bound and the last received",
            ));
        }
        last = (date, s.seq);
    }
    Ok(r.stamps.iter().copied().collect())
}
