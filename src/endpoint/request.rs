//! The request table: a slab of request slots addressed by `(index, generation)` handles, so a
//! stale handle (completed and freed, or from another scope) is refused instead of aliasing a
//! newer request. Allocation-free once warm: freed slots are reused.

use std::ptr::NonNull;

use nemesis_shm::{PendingSend, Pieces};

use crate::endpoint::Status;
pub use crate::endpoint::handle::Request;
use crate::error::{Error, Result};

/// What a receive request fills: `cap` bytes at `ptr`, or `pieces` (of length `cap`; `ptr`
/// unused).
#[derive(Clone, Copy, Debug)]
pub(crate) struct RecvBuf {
    pub ptr: *mut u8,
    pub cap: usize,
    pub pieces: Option<NonNull<dyn Pieces>>,
}

impl RecvBuf {
    /// `cap` contiguous bytes at `ptr`.
    #[inline(always)]
    pub fn bytes(ptr: *mut u8, cap: usize) -> RecvBuf {
        RecvBuf { ptr, cap, pieces: None }
    }
}

/// A message of a rendezvous with a remote peer staged through a buffer of the Endpoint's: the
/// network rendezvous moves contiguous bytes, the caller's buffer is in pieces.
#[derive(Debug)]
pub(crate) struct Stage {
    pub bytes: Box<[u8]>,
    /// A receive: where the bytes go once they arrived.
    pub into: Option<NonNull<dyn Pieces>>,
}

/// An operation in flight.
#[derive(Debug)]
pub(crate) enum Op {
    /// A send waiting for cells: `ps` is resumed by progress with the caller's buffer (`len`
    /// bytes at `buf`, or `pieces`).
    Send { ps: PendingSend, buf: *const u8, len: usize, dest: u32, pieces: Option<NonNull<dyn Pieces>> },
    /// A posted receive, or one matched to a message still arriving.
    Recv { buf: RecvBuf, status: Option<Status> },
    /// A synchronous send handed over, waiting for the receiver's acknowledgement.
    Sync,
    /// A large message in rendezvous (either side): `status` is what completion reports, `cap`
    /// the receive buffer's length (a send: the message's length), `peer` the other side's rank,
    /// `stage` the Endpoint's copy of a message in pieces to or from a remote peer.
    Lmt { status: Status, cap: usize, peer: u32, recv: bool, stage: Option<Box<Stage>> },
    /// A send the fault-tolerance engine holds back (recovery): tried again, in order, when it
    /// resumes sends.
    Held(crate::endpoint::ft::FtSend),
}

#[derive(Debug)]
enum State {
    Free { next: u32 },
    Active(Op),
    Done(Result<Status>),
}

#[derive(Debug)]
struct Slot {
    /// Bumped every time the slot is freed: handles of earlier requests go stale.
    generation: u32,
    state: State,
    /// A cancellable send's message: `(destination, token)` (token 0: none).
    sent: (u32, u32),
}

/// The table.
#[derive(Debug, Default)]
pub(crate) struct Requests {
    slots: Vec<Slot>,
    /// Head of the free list (`u32::MAX`: none).
    free: Option<u32>,
}

impl Requests {
    /// A new request in state `op`.
    pub fn insert(&mut self, op: Op) -> Request {
        self.insert_state(State::Active(op), (0, 0))
    }

    /// [`insert`](Self::insert) of a send's operation, recording the message it sent
    /// ([`set_sent`](Self::set_sent)) at once.
    pub fn insert_sent(&mut self, op: Op, dest: u32, token: u32) -> Request {
        self.insert_state(State::Active(op), (dest, token))
    }

    /// [`insert_done`](Self::insert_done) of a send, recording the message it sent at once.
    pub fn insert_done_sent(&mut self, result: Result<Status>, dest: u32, token: u32) -> Request {
        self.insert_state(State::Done(result), (dest, token))
    }

    /// A new request already complete with `result`.
    pub fn insert_done(&mut self, result: Result<Status>) -> Request {
        self.insert_state(State::Done(result), (0, 0))
    }

    /// An existing request `req` given the new operation `op`, or a new request in state `op`.
    pub fn set_or_insert(&mut self, req: Option<Request>, op: Op) -> Request {
        if let Some(r) = req
            && let Some(slot) = self.slot_mut(r)
        {
            slot.state = State::Active(op);
            return r;
        }
        self.insert(op)
    }

    /// Requests in flight, or complete and not yet taken (a scan: for checkpoints, not for a
    /// message path).
    pub fn live(&self) -> usize {
        self.slots.iter().filter(|s| !matches!(s.state, State::Free { .. })).count()
    }

    fn insert_state(&mut self, state: State, sent: (u32, u32)) -> Request {
        match self.free {
            Some(i) => {
                let slot = &mut self.slots[i as usize];
                self.free = match slot.state {
                    State::Free { next } if next != u32::MAX => Some(next),
                    _ => None,
                };
                slot.state = state;
                slot.sent = sent;
                Request { index: i, generation: slot.generation }
            }
            None => {
                let i = self.slots.len() as u32;
                self.slots.push(Slot { generation: 0, state, sent });
                Request { index: i, generation: 0 }
            }
        }
    }

    fn slot(&self, r: Request) -> Option<&Slot> {
        self.slots
            .get(r.index as usize)
            .filter(|s| s.generation == r.generation && !matches!(s.state, State::Free { .. }))
    }

    fn slot_mut(&mut self, r: Request) -> Option<&mut Slot> {
        self.slots
            .get_mut(r.index as usize)
            .filter(|s| s.generation == r.generation && !matches!(s.state, State::Free { .. }))
    }

    /// Records the message a cancellable send request sent: `(destination, token)`.
    pub fn set_sent(&mut self, r: Request, dest: u32, token: u32) {
        if let Some(s) = self.slot_mut(r) {
            s.sent = (dest, token);
        }
    }

    /// The message a live send request sent, if it was recorded: `(destination, token)`.
    pub fn sent(&self, r: Request) -> Option<(u32, u32)> {
        self.slot(r).map(|s| s.sent).filter(|s| s.1 != 0)
    }

    /// True if `r` names a live request.
    pub fn is_valid(&self, r: Request) -> bool {
        self.slot(r).is_some()
    }

    /// The in-flight operation of `r`, if it is still in flight.
    pub fn op_mut(&mut self, r: Request) -> Option<&mut Op> {
        match self.slot_mut(r) {
            Some(Slot { state: State::Active(op), .. }) => Some(op),
            _ => None,
        }
    }

    /// True if `r` is complete (its result waits to be taken).
    pub fn is_done(&self, r: Request) -> Result<bool> {
        match self.slot(r) {
            Some(s) => Ok(matches!(s.state, State::Done(_))),
            None => Err(Error::InvalidRequest),
        }
    }

    /// Completes `r` with `result` (it must be in flight).
    pub fn complete(&mut self, r: Request, result: Result<Status>) {
        if let Some(s) = self.slot_mut(r) {
            s.state = State::Done(result);
        }
    }

    /// Takes the result of a complete request and frees it; `None` if still in flight.
    pub fn take(&mut self, r: Request) -> Result<Option<Result<Status>>> {
        let free = self.free;
        let Some(slot) = self.slot_mut(r) else { return Err(Error::InvalidRequest) };
        if !matches!(slot.state, State::Done(_)) {
            return Ok(None);
        }
        let state = std::mem::replace(&mut slot.state, State::Free { next: free.unwrap_or(u32::MAX) });
        slot.generation = slot.generation.wrapping_add(1);
        self.free = Some(r.index);
        match state {
            State::Done(res) => Ok(Some(res)),
            _ => Ok(None),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn handles_go_stale_and_slots_are_reused() {
        let mut t = Requests::default();
        let a = t.insert_done(Ok(Status { source: 1, tag: 2, len: 3 }));
        let b = t.insert(Op::Recv { buf: RecvBuf::bytes(std::ptr::null_mut(), 0), status: None });
        assert!(t.is_done(a).unwrap());
        assert!(!t.is_done(b).unwrap());
        assert_eq!(t.take(b).unwrap().map(|r| r.is_ok()), None, "in flight");
        let got = t.take(a).unwrap().unwrap().unwrap();
        assert_eq!(got, Status { source: 1, tag: 2, len: 3 });
        assert!(matches!(t.take(a), Err(Error::InvalidRequest)), "stale after take");
        let c = t.insert_done(Err(Error::InvalidTag(-5)));
        assert_ne!(c, a, "same slot, new generation");
        assert!(matches!(t.is_done(a), Err(Error::InvalidRequest)));
        assert!(matches!(t.take(c).unwrap(), Some(Err(Error::InvalidTag(-5)))));
        t.complete(b, Ok(Status { source: 0, tag: 0, len: 0 }));
        assert!(t.take(b).unwrap().unwrap().is_ok());
    }
}
