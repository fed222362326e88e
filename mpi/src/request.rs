//! The table behind `MPI_Request` handles: a slab of slots (free list, allocation-free once warm)
//! holding the Endpoint's request and the communicator whose ranks the status speaks of.
//!
//! A slot is `Pending` while the Endpoint works on it, or `Done` when it completed without the
//! Endpoint (a send to or receive from `MPI_PROC_NULL`) or when a completion was taken from the
//! Endpoint but not yet handed to the user (`MPI_Testall` that found only some complete: the
//! standard says it then completes none, so the results wait here).

use std::ffi::c_int;

use crate::abi::{self, REQUEST_BASE, REQUEST_MAX};
use crate::error::Why;

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
        abi::Status { source: self.source, tag: self.tag, error: self.code, cancelled: 0, count: self.count }
    }
}

/// A slot's state.
#[derive(Debug)]
pub enum Slot {
    Free {
        /// Next free slot (`u32::MAX`: none).
        next: u32,
    },
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

/// The request table.
#[derive(Debug, Default)]
pub struct Requests {
    slots: Vec<Slot>,
    /// Head of the free list.
    free: Option<u32>,
}

impl Requests {
    /// An empty table.
    pub const fn new() -> Requests {
        Requests { slots: Vec::new(), free: None }
    }

    /// Stores `slot`; `None` if the handle space is exhausted.
    #[inline]
    pub fn insert(&mut self, slot: Slot) -> Option<abi::Request> {
        let i = match self.free {
            Some(i) => {
                let s = self.slots.get_mut(i as usize)?;
                self.free = match *s {
                    Slot::Free { next } if next != u32::MAX => Some(next),
                    _ => None,
                };
                *s = slot;
                i
            }
            None => {
                if self.slots.len() >= REQUEST_MAX {
                    return None;
                }
                self.slots.push(slot);
                (self.slots.len() - 1) as u32
            }
        };
        Some(REQUEST_BASE + i as c_int)
    }

    /// The slot index of handle `h` if it names a live request.
    #[inline]
    pub fn index(&self, h: abi::Request) -> Option<usize> {
        let i = h.wrapping_sub(REQUEST_BASE) as u32 as usize;
        match self.slots.get(i) {
            Some(Slot::Free { .. }) | None => None,
            Some(_) => Some(i),
        }
    }

    /// The slot at index `i`.
    #[inline]
    pub fn get_mut(&mut self, i: usize) -> Option<&mut Slot> {
        self.slots.get_mut(i)
    }

    /// Frees slot `i`, returning what it held.
    #[inline]
    pub fn remove(&mut self, i: usize) -> Option<Slot> {
        let next = self.free.unwrap_or(u32::MAX);
        let s = self.slots.get_mut(i)?;
        if matches!(s, Slot::Free { .. }) {
            return None;
        }
        let old = std::mem::replace(s, Slot::Free { next });
        self.free = Some(i as u32);
        Some(old)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slots_are_reused_and_freed_handles_are_refused() {
        let mut t = Requests::default();
        let a = t.insert(Slot::Done { comm: 0, done: Completion::proc_null() }).unwrap();
        let b = t.insert(Slot::Done { comm: 1, done: Completion::proc_null() }).unwrap();
        assert_eq!(a, REQUEST_BASE);
        assert_eq!(b, REQUEST_BASE + 1);
        let ia = t.index(a).unwrap();
        assert!(matches!(t.remove(ia), Some(Slot::Done { comm: 0, .. })));
        assert_eq!(t.index(a), None, "freed");
        assert!(t.remove(ia).is_none(), "twice");
        assert_eq!(t.index(abi::REQUEST_NULL), None);
        assert_eq!(t.index(0), None);
        let c = t.insert(Slot::Done { comm: 2, done: Completion::proc_null() }).unwrap();
        assert_eq!(c, a, "the freed slot is reused");
        assert!(t.index(b).is_some());
    }
}
