//! Cancellation (MPI's `MPI_Cancel`): withdrawing a posted receive, or a sent message that no
//! receive has matched yet.
//!
//! - **Receives** are withdrawn locally: a receive still in the posted list has matched nothing
//!   (a message matched to it leaves the list at once), so it is removed and completes with
//!   [`Error::Cancelled`]; otherwise it goes on.
//! - **Sends** need the receiver, which holds the message (an eager message in its unexpected
//!   list, or a rendezvous message's RTS). Every non-blocking send's message carries a token in
//!   its header (`aux`); cancelling sends a [`KIND_CANCEL`] naming it, which travels after the
//!   message itself (the pair's messages are handed over in order), so the receiver has it or has
//!   matched it when the request arrives. The receiver drops it if it is still unmatched (the rest
//!   of a message still arriving is discarded) and answers [`KIND_CANCEL_ACK`] with the outcome.
//!   On "dropped" the sender ends the send (a rendezvous transfer is abandoned, a synchronous send
//!   stops waiting for its acknowledgement) and both requests complete with `Cancelled`; on
//!   "matched" the send completes normally. As in MPICH, the answer needs the receiver's progress.

use nemesis_shm::MsgHeader;

use super::progress::Active;
use super::request::{Op, Request};
use super::{Inner, KIND_CANCEL, KIND_CANCEL_ACK, NOT_LOCAL, Peer, SendId, Status};

use crate::error::{Error, Result};

/// A send's cancellation waiting for the receiver's answer.
#[derive(Debug)]
pub(super) struct Cancelling {
    /// The message: its receiver and token.
    dest: u32,
    token: u32,
    /// The send's own request (possibly already complete and taken).
    send: Request,
    /// Completes with `Err(Cancelled)` or, if the message was matched, `Ok`.
    answer: Request,
}

impl Inner {
    /// Withdraws posted receive `req` if it has not matched a message: true if it did (the
    /// request then completes with [`Error::Cancelled`]).
    pub(super) fn cancel_recv(&mut self, req: Request) -> Result<bool> {
        if !self.reqs.is_valid(req) {
            return Err(Error::InvalidRequest);
        }
        let Some(i) = self.posted.iter().position(|p| p.req == req) else { return Ok(false) };
        let Some(p) = self.take_posted(i) else { return Err(Error::InvalidRequest) };
        self.expect(p.want.source, false);
        self.reqs.complete(req, Err(Error::Cancelled));
        Ok(true)
    }

    /// Starts cancelling the send that sent message `id`: the request of the receiver's answer
    /// (`Err(Cancelled)`: dropped, the send's request too; `Ok`: a receive had matched it).
    pub(super) fn cancel_send(&mut self, id: SendId) -> Result<Request> {
        let answer = self.reqs.insert(Op::Sync);
        let status = Status { source: self.rank, tag: 0, len: 0 };
        if id.token == 0 || id.dest >= self.size || self.peer(id.dest) != Peer::Alive || self.ft.is_some() {
            // Nothing to name, or nobody to ask: the send takes its normal course (a dead
            // receiver fails it). With fault tolerance a send is never withdrawn: its date is
            // spent, it may be in the log and in the receiver's record of arrivals.
            self.reqs.complete(answer, Ok(status));
            return Ok(answer);
        }
        let hdr = MsgHeader { kind: KIND_CANCEL, aux: id.token, ..self.header(id.dest, 0, 0) };
        let local = self.route[id.dest as usize];
        let sent = if local == NOT_LOCAL {
            self.net_send(id.dest, &hdr, None, &[])
        } else {
            self.send_internal(local, &hdr, None, &[])
        };
        match sent {
            Ok(()) => {
                self.cancels.push(Cancelling { dest: id.dest, token: id.token, send: id.req, answer });
            }
            Err(Error::PeerDied { .. }) => self.reqs.complete(answer, Ok(status)),
            Err(e) => {
                let _ = self.reqs.take(answer);
                return Err(e);
            }
        }
        Ok(answer)
    }

    /// Receiver: rank `source` asks to drop its message `token` if no receive matched it yet.
    pub(super) fn cancel_requested(&mut self, source: u32, token: u32) -> Result<()> {
        let found = self.unexpected.find_from(source, |_, u| u.token == token && u.open());
        let dropped = match found {
            Some(i) => {
                let (id, u) = self.unexpected.remove(i);
                // The rest of a message still arriving is discarded.
                if let Some(a) = self.active.get_mut(source as usize)
                    && matches!(*a, Active::Unexpected(k) if k == id)
                {
                    *a = Active::Discard;
                }
                self.recycle(u.data);
                true
            }
            None => false,
        };
        let hdr = MsgHeader { kind: KIND_CANCEL_ACK, aux: token, tag: i32::from(dropped), ..self.header(source, 0, 0) };
        // A dead sender waits for no answer.
        self.send_own(source, &hdr, None, &[])
    }

    /// Sender: rank `source` answered the cancellation of message `token`.
    pub(super) fn cancel_answered(&mut self, source: u32, token: u32, dropped: bool) {
        let Some(k) = self.cancels.iter().position(|c| c.dest == source && c.token == token) else { return };
        let c = self.cancels.swap_remove(k);
        if !dropped {
            self.reqs.complete(c.answer, Ok(Status { source: self.rank, tag: 0, len: 0 }));
            return;
        }
        // The message is gone: end the send (if its request is still in flight) as cancelled.
        if let Some(i) = self.sync_waiting.iter().position(|w| w.0 == token && w.2 == source) {
            self.sync_waiting.swap_remove(i);
        }
        match self.reqs.op_mut(c.send) {
            Some(Op::Lmt { recv: false, .. }) => {
                self.lmt.abandon(c.send.token());
                if let Some(net) = self.net.as_mut() {
                    self.netlmt.abandon(c.send.token(), net);
                }
            }
            // Still waiting for cells: the rest goes (the receiver discards it), from a copy.
            Some(Op::Send { .. }) => self.detach_pending(c.send),
            _ => {}
        }
        if self.reqs.op_mut(c.send).is_some() {
            self.reqs.complete(c.send, Err(Error::Cancelled));
        }
        self.reqs.complete(c.answer, Err(Error::Cancelled));
    }

    /// A peer is gone: cancellations waiting for its answer complete as "not cancelled" (its
    /// sends fail on their own).
    pub(super) fn cancels_to_dead(&mut self, dead: u32) {
        let mut i = 0;
        while i < self.cancels.len() {
            if self.cancels[i].dest == dead {
                let c = self.cancels.swap_remove(i);
                self.reqs.complete(c.answer, Ok(Status { source: self.rank, tag: 0, len: 0 }));
            } else {
                i += 1;
            }
        }
    }
}
