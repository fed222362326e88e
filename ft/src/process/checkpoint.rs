//! Group checkpoints and acknowledgements (Fig 6.3 lines 23–29 of
//! `shared/papers/guermouche-2011-thesis-send-determinism-hydee.txt`, T:1948–1984): what a process saves, when it
//! acknowledges what it received, and when it lets senders prune their RPP.
//!
//! A checkpoint is captured ([`Process::checkpoint`]), then made durable ([`Process::checkpoint_durable`]) or
//! abandoned ([`Process::checkpoint_abandoned`]); the application image and the sender log are saved beside the
//! [`ProcessState`] by the driver.
//!
//! Invariants:
//! - Acknowledgements wait for durability (`shared/reference/hydee.md` \[R\]); an ack names the *first* message
//!   received after the capture (\[R+\], the acknowledgement window of `docs/design/hydee.md`).
//! - One checkpoint at a time: none is captured while one awaits durability, nor during recovery.
//! - Only peers of other groups ever leave [`AckState::Idle`].

use serde::{Deserialize, Serialize};

use super::events::Action;
use super::{DateRule, Process};
use crate::control::{Control, Endpoint};
use crate::log::LogIndex;
use crate::rpp::ReceivedFrom;
use crate::{Date, Error, Phase, Rank, Result};

/// The fault-tolerance part of a process checkpoint (Fig 6.3 line 25, less the application image and the log).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ProcessState {
    pub rank: Rank,
    pub date: Date,
    pub phase: Phase,
    /// RPP, for the senders with something recorded, ascending by rank; also lists (with a blank record) the
    /// ranks of the process's own group it has sent to, for their sequence numbers ([`ReceivedFrom::sent`]).
    pub received: Vec<(Rank, ReceivedFrom)>,
    /// Date of this process's previous durable checkpoint.
    pub last_checkpoint_date: Date,
    pub date_rule: DateRule,
}

/// Acknowledgement duty toward one sender of another group (`RM[j]` of Fig 6.3, with the window of \[R+\]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum AckState {
    /// Nothing to acknowledge.
    Idle,
    /// A checkpoint was captured and nothing received since; `was_due` keeps the previous durable checkpoint's duty
    /// in case this one is abandoned.
    Armed { was_due: bool },
    /// A checkpoint was captured and `date` is the first message received since: acknowledged once durable.
    Noted { date: Date, was_due: bool },
    /// The last checkpoint is durable: acknowledge the next reception.
    Due,
}

/// Whether a checkpoint's state has been captured and awaits durability.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum CheckpointStage {
    Idle,
    Captured { date: Date },
}

impl Process {
    /// Captures the FT state for a group checkpoint (save it with the application image and
    /// [`SenderLog::snapshot`](crate::SenderLog::snapshot)). Refused during recovery. Acknowledgements wait for
    /// [`Process::checkpoint_durable`] (\[R\]).
    pub fn checkpoint(&mut self) -> Result<ProcessState> {
        if let Some(rec) = &self.recovery {
            return Err(Error::CheckpointDuringRecovery { round: rec.round });
        }
        if self.checkpoint != CheckpointStage::Idle {
            return Err(Error::CheckpointPending);
        }
        self.checkpoint = CheckpointStage::Captured { date: self.date };
        for peer in self.peers.iter_mut().filter(|p| p.group != self.group) {
            peer.ack = AckState::Armed { was_due: peer.ack == AckState::Due };
            peer.captured_max = peer.received.max_date();
        }
        self.refresh_permits();
        Ok(self.state())
    }

    /// The last captured checkpoint is on stable storage: send the acknowledgements it allows and tell the peers
    /// this process logged messages for that their RPP entries up to its date can go.
    pub fn checkpoint_durable(&mut self, log: &impl LogIndex) -> Result<()> {
        let CheckpointStage::Captured { date } = self.checkpoint else {
            return Err(Error::NoPendingCheckpoint);
        };
        self.checkpoint = CheckpointStage::Idle;
        for (j, peer) in self.peers.iter_mut().enumerate() {
            if peer.group == self.group {
                continue;
            }
            let j = j as Rank;
            match peer.ack {
                AckState::Noted { date: first, .. } => {
                    peer.ack = AckState::Idle;
                    let msg = Control::Ack { date: first };
                    self.actions.push_back(Action::Control { to: Endpoint::Process(j), msg });
                }
                AckState::Armed { .. } => peer.ack = AckState::Due,
                AckState::Idle | AckState::Due => {}
            }
            peer.checkpointed_max = peer.captured_max;
            if log.last_logged(j) > self.last_checkpoint_date {
                let msg = Control::Checkpointed { date };
                self.actions.push_back(Action::Control { to: Endpoint::Process(j), msg });
            }
        }
        self.last_checkpoint_date = date;
        self.refresh_permits();
        Ok(())
    }

    /// The last captured checkpoint will never be durable: the previous durable one stays in force.
    pub fn checkpoint_abandoned(&mut self) -> Result<()> {
        if self.checkpoint == CheckpointStage::Idle {
            return Err(Error::NoPendingCheckpoint);
        }
        self.checkpoint = CheckpointStage::Idle;
        for (j, peer) in self.peers.iter_mut().enumerate() {
            peer.ack = match peer.ack {
                // The previous checkpoint was owed an ack on the first reception after it, which is this one.
                AckState::Noted { date, was_due: true } => {
                    let msg = Control::Ack { date };
                    self.actions.push_back(Action::Control { to: Endpoint::Process(j as Rank), msg });
                    AckState::Idle
                }
                AckState::Armed { was_due: true } => AckState::Due,
                AckState::Armed { was_due: false } | AckState::Noted { was_due: false, .. } => AckState::Idle,
                other => other,
            };
        }
        self.refresh_permits();
        Ok(())
    }

    /// The FT state as it would be checkpointed now.
    pub fn state(&self) -> ProcessState {
        let received = self
            .peers
            .iter()
            .enumerate()
            .filter(|(_, p)| !p.received.is_blank() || p.sent != 0)
            .map(|(j, p)| {
                let mut r = p.received.to_checkpoint();
                r.stamps = p.stamps.iter().copied().collect();
                r.last_seq = p.rx_seq;
                r.sent = p.sent;
                (j as Rank, r)
            })
            .collect();
        ProcessState {
            rank: self.rank,
            date: self.date,
            phase: self.phase,
            received,
            last_checkpoint_date: self.last_checkpoint_date,
            date_rule: self.date_rule,
        }
    }
}
