//! The table behind `MPI_Request` handles: a slab of slots (free list, allocation-free once warm)
//! holding the Endpoint's request and the communicator whose ranks the status speaks of.
//!
//! A handle carries its slot's generation, bumped every time the slot is freed, so a stale handle
//! (a request already completed and freed, kept by mistake) is refused with `MPI_ERR_REQUEST`
//! instead of naming the request that reuses its slot. `MPI_Request` is a C `int` whose top six
//! bits give its kind, so the generation has 8 bits; freed slots are reused first in, first out
//! and only once [`REUSE_AFTER`] of them wait, so a stale handle can alias a new request only
//! after its slot went round the generations: at least 256 × 256 requests later.
//!
//! A slot is `Pending` while the Endpoint works on it, or `Done` when it completed without the
//! Endpoint (a send to or receive from `MPI_PROC_NULL`) or when a completion was taken from the
//! Endpoint but not yet handed to the user (`MPI_Testall` that found only some complete: the
//! standard says it then completes none, so the results wait here).

use std::ffi::c_int;

use std::collections::VecDeque;

use crate::abi::{self, REQUEST_BASE, REQUEST_GENERATION_BITS, REQUEST_INDEX_BITS, REQUEST_MAX};

/// Freed slots are reused only once this many wait (until then the table grows): a slot's
/// generations go round at most once every `REUSE_AFTER` frees.
pub const REUSE_AFTER: usize = 256;
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
    Free,
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
    /// Generation of each slot, bumped when it is freed (wraps in `REQUEST_GENERATION_BITS`).
    generations: Vec<u8>,
    /// Free slots, oldest first.
    free: VecDeque<u32>,
}

const INDEX_MASK: u32 = (1 << REQUEST_INDEX_BITS) - 1;
const GENERATION_MASK: u32 = (1 << REQUEST_GENERATION_BITS) - 1;
const _: () = assert!(REQUEST_INDEX_BITS + REQUEST_GENERATION_BITS <= 26, "the kind bits stay free");

impl Requests {
    /// An empty table.
    pub const fn new() -> Requests {
        Requests { slots: Vec::new(), generations: Vec::new(), free: VecDeque::new() }
    }

    /// Stores `slot`; `None` if the handle space is exhausted.
    #[inline]
    pub fn insert(&mut self, slot: Slot) -> Option<abi::Request> {
        let i = if self.free.len() >= REUSE_AFTER || (self.slots.len() >= REQUEST_MAX && !self.free.is_empty()) {
            let i = self.free.pop_front()?;
            *self.slots.get_mut(i as usize)? = slot;
            i
        } else {
            if self.slots.len() >= REQUEST_MAX {
                return None;
            }
            self.slots.push(slot);
            self.generations.push(0);
            (self.slots.len() - 1) as u32
        };
        let g = u32::from(self.generations[i as usize]) & GENERATION_MASK;
        Some(REQUEST_BASE | (g << REQUEST_INDEX_BITS | i) as c_int)
    }

    /// The slot index of handle `h` if it names a live request of the current generation.
    #[inline]
    pub fn index(&self, h: abi::Request) -> Option<usize> {
        let bits = h.wrapping_sub(REQUEST_BASE) as u32;
        if bits >> (REQUEST_INDEX_BITS + REQUEST_GENERATION_BITS) != 0 {
            return None;
        }
        let i = (bits & INDEX_MASK) as usize;
        let g = bits >> REQUEST_INDEX_BITS;
        match (self.slots.get(i), self.generations.get(i)) {
            (Some(Slot::Free) | None, _) | (_, None) => None,
            (Some(_), Some(&gen_)) if u32::from(gen_) & GENERATION_MASK == g => Some(i),
            _ => None,
        }
    }

    /// The slot at index `i`.
    #[inline]
    pub fn get_mut(&mut self, i: usize) -> Option<&mut Slot> {
        self.slots.get_mut(i)
    }

    /// Frees slot `i`, returning what it held; its handles go stale.
    #[inline]
    pub fn remove(&mut self, i: usize) -> Option<Slot> {
        let s = self.slots.get_mut(i)?;
        if matches!(s, Slot::Free) {
            return None;
        }
        let old = std::mem::replace(s, Slot::Free);
        let g = &mut self.generations[i];
        *g = g.wrapping_add(1);
        self.free.push_back(i as u32);
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
        assert_eq!(t.index(-1), None);
        assert!(t.index(b).is_some());
    }

    /// A stale handle never names the request that reuses its slot, for as long as the
    /// generations allow: here, a request freed and then kept through 60,000 later requests.
    #[test]
    fn stale_handles_are_refused_after_their_slot_is_reused() {
        let mut t = Requests::default();
        let stale = t.insert(Slot::Done { comm: 0, done: Completion::proc_null() }).unwrap();
        t.remove(t.index(stale).unwrap());
        let mut live = std::collections::VecDeque::new();
        for n in 0..60_000u32 {
            let h = t.insert(Slot::Done { comm: n, done: Completion::proc_null() }).unwrap();
            assert_ne!(h, stale, "request {n} reused the stale handle");
            assert_eq!(t.index(stale), None, "after request {n}");
            live.push_back(h);
            // A few requests in flight at a time.
            if live.len() > 3 {
                let old = live.pop_front().unwrap();
                t.remove(t.index(old).unwrap());
            }
        }
        assert!(t.slots.len() <= REUSE_AFTER + 4, "the table stays small: {}", t.slots.len());
    }
}
