//! The table behind `MPI_Request` handles (a [`Table`]) holding the Endpoint's request and the communicator whose ranks the status speaks of.
//!
//! A slot is `Pending` while the Endpoint works on it, or `Done` when it completed without the
//! Endpoint (a send to or receive from `MPI_PROC_NULL`) or when a completion was taken from the
//! Endpoint but not yet handed to the user (`MPI_Testall` that found only some complete: the
//! standard says it then completes none, so the results wait here).

use std::ffi::c_int;

use crate::abi;
use crate::error::Why;
use crate::handle::Table;

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
}

impl Completion {
    /// The completion of an operation on `MPI_PROC_NULL` (MPI-3.1 §3.11).
    pub fn proc_null() -> Completion {
        Completion { source: abi::PROC_NULL, tag: abi::ANY_TAG, count: 0, code: abi::SUCCESS, why: None }
    }

    /// The status this completion fills (with `MPI_ERROR` set).
    pub fn status(&self) -> abi::Status {
        abi::Status::new(self.source, self.tag, self.code, self.count)
    }
}

/// A request's state.
#[derive(Debug)]
pub enum Slot {
    Pending {
        ep: nemesis::Request,
        /// Index of the communicator in the table.
        comm: u32,
    },
    Done {
        comm: u32,
        done: Completion,
    },
}

/// The request table: handles `REQUEST_DIRECT + index`.
pub type Requests = Table<Slot>;

/// An empty request table.
pub const fn table() -> Requests {
    Table::new(abi::REQUEST_DIRECT)
}
