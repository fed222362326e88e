//! The table behind `MPI_Request` handles (a [`Table`]): each request's state, the communicator
//! its status speaks of, and what a persistent request starts again.
//!
//! A request is `Pending` while the Endpoint works on it, `Done` when its result is known but not
//! yet handed to the user (an operation on `MPI_PROC_NULL`, a buffered send, a result that
//! `MPI_Testall` took but must not report yet, a cancelled receive), and `Inactive` for a
//! persistent request between its completion and the next `MPI_Start`. A request the user freed
//! (`MPI_Request_free`) while active stays until it completes, then goes without a report.

use crate::abi;
use crate::datatype::Layout;
use crate::datatype::pack::TypedBuf;
use crate::error::Why;
use crate::handle::Table;
use std::ffi::c_int;

/// A completed operation as MPI reports it.
#[derive(Debug)]
pub struct Completion {
    /// `MPI_SOURCE` (communicator rank, or `MPI_PROC_NULL`).
    pub source: c_int,
    pub tag: c_int,
    /// Bytes received.
    pub count: i64,
    /// `MPI_SUCCESS` or the error code.
    pub code: c_int,
    /// Why it failed (when `code` is not `MPI_SUCCESS`).
    pub why: Option<Why>,
    /// The operation was cancelled (`MPI_Test_cancelled`).
    pub cancelled: bool,
}

impl Completion {
    /// A successful completion.
    pub fn ok(source: c_int, tag: c_int, count: i64) -> Completion {
        Completion { source, tag, count, code: abi::SUCCESS, why: None, cancelled: false }
    }

    /// The completion of an operation on `MPI_PROC_NULL` (MPI-3.1 §3.11).
    pub fn proc_null() -> Completion {
        Completion::ok(abi::PROC_NULL, abi::ANY_TAG, 0)
    }

    /// The empty status's completion (MPI-3.1 §3.7.3): a null or inactive request.
    pub fn empty() -> Completion {
        Completion::ok(abi::ANY_SOURCE, abi::ANY_TAG, 0)
    }

    /// A cancelled operation: the empty status with the cancelled bit (MPI-3.1 §3.8.4).
    pub fn cancelled() -> Completion {
        Completion { cancelled: true, ..Completion::empty() }
    }

    /// The status this completion fills (with `MPI_ERROR` set).
    pub fn status(&self) -> abi::Status {
        let mut s = abi::Status::new(self.source, self.tag, self.code, self.count);
        s.set_cancelled(self.cancelled);
        s
    }
}

/// Where a request is.
#[derive(Debug)]
pub enum State {
    /// A persistent request not started (or completed and not restarted).
    Inactive,
    /// The Endpoint works on it.
    Pending(nemesis::Request),
    /// Complete; the result waits to be reported.
    Done(Completion),
}

/// The send modes (MPI-3.1 §3.4); ready sends are standard sends (the receive is posted, by the
/// program's contract, so nothing differs).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mode {
    Standard,
    Synchronous,
    Buffered,
    Ready,
}

/// What a persistent request starts each time (`MPI_Send_init`... `MPI_Recv_init`): its
/// arguments, resolved when it was made (so freeing the datatype or the communicator afterwards
/// changes nothing, as MPI wants).
#[derive(Clone, Debug)]
pub struct Persistent {
    /// `Some(mode)` for a send, `None` for a receive.
    pub send: Option<Mode>,
    pub data: Layout,
    /// Job rank to send to, or the Endpoint's source to receive from; `None`: `MPI_PROC_NULL`.
    pub peer: Option<i32>,
    pub tag: c_int,
    /// The communicator's point-to-point context.
    pub ctx: u32,
}

/// One request.
#[derive(Debug)]
pub struct Req {
    /// Index of the communicator in the table (for the status's ranks and the error handler).
    pub comm: u32,
    pub state: State,
    /// A receive (its cancellation is local; a send's needs the receiver).
    pub recv: bool,
    /// `MPI_Request_free` was called while it was active: it goes, unreported, once complete.
    pub freed: bool,
    /// Set for persistent requests.
    pub persistent: Option<Box<Persistent>>,
    /// Typed (non-contiguous) data, as the pieces the Endpoint copies to and from, while the
    /// operation is in flight.
    pub typed: Option<Box<TypedBuf>>,
    /// A non-blocking send's message, for `MPI_Cancel`.
    pub sent: Option<nemesis::SendId>,
    /// `MPI_Cancel` of a send: the receiver's answer (`Err(Cancelled)` or `Ok`: matched).
    pub cancel: Option<nemesis::Request>,
}

impl Req {
    /// A request in `state`.
    pub fn new(comm: usize, state: State, recv: bool) -> Req {
        Req { comm: comm as u32, state, recv, freed: false, persistent: None, typed: None, sent: None, cancel: None }
    }
}

/// The request table: handles `REQUEST_DIRECT + index`.
pub type Requests = Table<Req>;

/// An empty request table.
pub const fn table() -> Requests {
    Table::new(abi::REQUEST_DIRECT)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn completions_fill_statuses() {
        let s = Completion::ok(3, 4, 1 << 33).status();
        assert_eq!((s.source, s.tag, s.error, s.count(), s.cancelled()), (3, 4, 0, 1 << 33, false));
        let s = Completion::cancelled().status();
        assert!(s.cancelled());
        assert_eq!((s.source, s.tag, s.count()), (abi::ANY_SOURCE, abi::ANY_TAG, 0));
        let s = Completion::proc_null().status();
        assert_eq!((s.source, s.tag), (abi::PROC_NULL, abi::ANY_TAG));
    }
}
