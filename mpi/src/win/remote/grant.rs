//! The target's queue of lock requests from origins on other nodes: first come, first granted.
//!
//! A remote origin cannot spin on the target's lock word, so the target takes the word on its
//! behalf (the same word node-local origins take: one lock, whoever asks). Requests wait in
//! arrival order and only the oldest may be granted: a shared request behind an exclusive one
//! waits for it, so a stream of shared lockers cannot starve an exclusive one, nor exclusive ones
//! a shared one (MPI-3.1 §11.5.3 leaves fairness to the implementation; this is FIFO). Each
//! progress pass retries the head ([`Queue::grant`]) with the word's try-lock, which fails while
//! a node-local holder or an earlier grant conflicts. The lock word (`super::super::lockword`)
//! is itself a fair ticket lock: a request takes its ticket when it arrives, so remote and
//! node-local lockers are served in one order.
//!
//! A head that waits long while a member of the window on this node died ([`Queue::stuck`]) is
//! never granted (the dead process may hold the word: `super::super::lockword`'s "Dead
//! holders"): every waiting request is answered `MPIX_ERR_PROC_FAILED` ([`Queue::abandon`]).

use std::collections::VecDeque;

use crate::win::lockword::Watch;

/// A request waiting for the lock.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Waiting {
    /// The origin's job rank.
    pub origin: u32,
    pub exclusive: bool,
    /// The id its grant replies to.
    pub id: u32,
    /// Its ticket of the target's lock word (taken on arrival: its place among every locker,
    /// node-local ones included).
    pub ticket: u32,
}

/// Lock requests not granted yet, oldest first, and the locks held for remote origins.
#[derive(Debug, Default)]
pub struct Queue {
    /// Not granted yet, in arrival order.
    waiting: VecDeque<Waiting>,
    /// (origin, exclusive) of each lock held for a remote origin (an origin holds at most one
    /// lock on a window's target: MPI-3.1 §11.5.3).
    held: Vec<(u32, bool)>,
    /// The head's wait, for [`Queue::stuck`].
    watch: Watch,
}

impl Queue {
    /// Queues a request.
    pub fn push(&mut self, w: Waiting) {
        self.waiting.push_back(w);
    }

    /// True if requests wait.
    pub fn is_waiting(&self) -> bool {
        !self.waiting.is_empty()
    }

    /// Grants the oldest requests while `try_lock(request)` takes the word for them (its ticket
    /// is served): the ones granted, in order (their replies go now).
    pub fn grant(&mut self, mut try_lock: impl FnMut(&Waiting) -> bool) -> Vec<Waiting> {
        let mut granted = Vec::new();
        while let Some(&w) = self.waiting.front() {
            if !try_lock(&w) {
                break;
            }
            self.waiting.pop_front();
            self.held.push((w.origin, w.exclusive));
            granted.push(w);
            self.watch = Watch::default();
        }
        granted
    }

    /// True once per `lockword::PATIENCE` while the same head waits (after a [`grant`](Self::grant)
    /// that granted it nothing): time to look for a dead holder.
    pub fn stuck(&mut self) -> bool {
        self.is_waiting() && self.watch.due()
    }

    /// Every request waiting, given up (their tickets abandoned: the word is not handed on).
    pub fn abandon(&mut self) -> Vec<Waiting> {
        self.watch = Watch::default();
        self.waiting.drain(..).collect()
    }

    /// The lock `origin` holds, released from the queue's books: `Some(exclusive)`, or `None`
    /// if it holds none (an unlock without a lock, or one taken with `MPI_MODE_NOCHECK`).
    pub fn release(&mut self, origin: u32) -> Option<bool> {
        let k = self.held.iter().position(|&(o, _)| o == origin)?;
        Some(self.held.swap_remove(k).1)
    }

    /// Every lock held for a remote origin, released from the books, and the tickets of the
    /// requests never granted (the window is freed).
    pub fn drain(&mut self) -> (Vec<bool>, Vec<Waiting>) {
        (self.held.drain(..).map(|(_, e)| e).collect(), self.waiting.drain(..).collect())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A lock word: shared holders, or one exclusive (tickets ignored).
    #[derive(Default)]
    struct Word {
        shared: u32,
        exclusive: bool,
    }

    impl Word {
        fn take(&mut self, w: &Waiting) -> bool {
            self.try_lock(w.exclusive)
        }
        fn try_lock(&mut self, exclusive: bool) -> bool {
            match exclusive {
                true if self.shared == 0 && !self.exclusive => self.exclusive = true,
                false if !self.exclusive => self.shared += 1,
                _ => return false,
            }
            true
        }
        fn unlock(&mut self, exclusive: bool) {
            if exclusive { self.exclusive = false } else { self.shared -= 1 }
        }
    }

    #[test]
    fn the_oldest_goes_first_and_shared_ones_wait_behind_an_exclusive_one() {
        let (mut q, mut word) = (Queue::default(), Word::default());
        // A node-local origin holds the word shared.
        assert!(word.try_lock(false));
        q.push(Waiting { origin: 1, exclusive: true, id: 1, ticket: 0 });
        q.push(Waiting { origin: 2, exclusive: false, id: 2, ticket: 1 });
        q.push(Waiting { origin: 3, exclusive: false, id: 3, ticket: 2 });
        // The shared requests could be granted but wait behind the exclusive one.
        assert!(q.grant(|w| word.take(w)).is_empty());
        word.unlock(false);
        let g = q.grant(|w| word.take(w));
        assert_eq!(g.iter().map(|w| w.origin).collect::<Vec<_>>(), [1]);
        assert_eq!(q.release(1), Some(true));
        word.unlock(true);
        let g = q.grant(|w| word.take(w));
        assert_eq!(g.iter().map(|w| w.origin).collect::<Vec<_>>(), [2, 3]);
        assert!(!q.is_waiting());
        assert_eq!(q.release(4), None);
        assert_eq!(q.drain().0, [false, false]);
    }

    #[test]
    fn a_head_that_waits_is_stuck_after_patience_and_abandoned() {
        let mut q = Queue::default();
        assert!(!q.stuck(), "nothing waits");
        q.push(Waiting { origin: 1, exclusive: true, id: 1, ticket: 0 });
        q.push(Waiting { origin: 2, exclusive: false, id: 2, ticket: 1 });
        assert!(q.grant(|_| false).is_empty());
        assert!(!q.stuck(), "not at once");
        std::thread::sleep(crate::win::lockword::PATIENCE);
        assert!(q.stuck());
        assert_eq!(q.abandon().iter().map(|w| w.id).collect::<Vec<_>>(), [1, 2]);
        assert!(!q.is_waiting() && !q.stuck());
    }
}
