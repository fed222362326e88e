//! The passive-target lock of one member's window (`MPI_Win_lock`): a task-fair reader-writer
//! ticket lock in the member's control block, so every node-local origin takes it with atomics
//! alone (no message, no target involvement).
//!
//! Algorithm: a ticket lock (Mellor-Crummey and Scott's, "Scalable reader-writer
//! synchronization", 1991, its fair variant) in four words. A locker takes a ticket
//! (`next`); when `serving` reaches it, a shared locker joins the `readers` and admits the next
//! ticket at once, an exclusive one waits for the readers to leave and admits the next ticket
//! only when it unlocks. Tickets are served in order, so neither kind starves the other: a stream
//! of shared lockers cannot pass an exclusive locker waiting before them, and the shared lockers
//! queued behind an exclusive one all enter together once it leaves.
//!
//! Each step is one non-blocking look ([`LockWord::try_shared`], [`LockWord::try_exclusive`]);
//! the caller waits between looks with the library's pause (progress continues, the core is
//! yielded when ranks outnumber cores). A ticket, once taken, must be served: waiting is not
//! abandoned (an `MPI_Win_lock` returns only once it holds the lock).

use std::sync::atomic::{AtomicU32, Ordering::*};

/// The lock word (zero: free).
#[repr(C)]
#[derive(Debug, Default)]
pub struct LockWord {
    /// The next ticket to hand out (wraps).
    next: AtomicU32,
    /// The ticket admitted now: its holder may enter (the tickets before it entered already).
    serving: AtomicU32,
    /// Shared holders inside.
    readers: AtomicU32,
    /// Reserved (keeps the word 16 bytes).
    _pad: AtomicU32,
}

/// The kinds of lock.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    Shared,
    Exclusive,
}

impl LockWord {
    /// Takes a ticket: the caller's place in the queue.
    pub fn ticket(&self) -> u32 {
        // ORDERING: Relaxed: the ticket is only compared with `serving`, whose Acquire orders
        // what the previous holders did.
        self.next.fetch_add(1, Relaxed)
    }

    /// A shared locker with ticket `t` enters if it is being served: true once inside.
    pub fn try_shared(&self, t: u32) -> bool {
        // ORDERING: Acquire: the previous holder's release of `serving` (an exclusive holder's
        // writes) happens before this holder's accesses.
        if self.serving.load(Acquire) != t {
            return false;
        }
        // ORDERING: the reader count rises before the next ticket is admitted (Release below),
        // so an exclusive locker served next sees this reader inside.
        self.readers.fetch_add(1, Relaxed);
        self.serving.store(t.wrapping_add(1), Release);
        true
    }

    /// An exclusive locker with ticket `t` enters once served and once the readers left: true
    /// once inside.
    pub fn try_exclusive(&self, t: u32) -> bool {
        // ORDERING: Acquire on both: the readers' and the previous holder's releases happen
        // before this holder's accesses.
        self.serving.load(Acquire) == t && self.readers.load(Acquire) == 0
    }

    /// A shared holder leaves.
    pub fn unlock_shared(&self) {
        // ORDERING: Release: this holder's accesses happen before an exclusive locker's entry
        // (its Acquire load of `readers`).
        self.readers.fetch_sub(1, Release);
    }

    /// The exclusive holder leaves: the next ticket is admitted.
    pub fn unlock_exclusive(&self) {
        // ORDERING: Release: this holder's accesses happen before the next holder's entry.
        self.serving.fetch_add(1, Release);
    }

    /// True if nobody holds or waits for the lock.
    pub fn is_free(&self) -> bool {
        // ORDERING: Acquire: a diagnostic look after the holders' releases.
        self.next.load(Acquire) == self.serving.load(Acquire) && self.readers.load(Acquire) == 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;
    use std::sync::atomic::AtomicBool;

    fn lock(l: &LockWord, k: Kind) {
        let t = l.ticket();
        let try_it = || if k == Kind::Shared { l.try_shared(t) } else { l.try_exclusive(t) };
        while !try_it() {
            std::thread::yield_now();
        }
    }

    fn unlock(l: &LockWord, k: Kind) {
        if k == Kind::Shared { l.unlock_shared() } else { l.unlock_exclusive() }
    }

    #[test]
    fn shared_lockers_share_and_exclusive_ones_exclude() {
        let l = LockWord::default();
        assert!(l.is_free());
        let (a, b) = (l.ticket(), l.ticket());
        assert!(l.try_shared(a) && l.try_shared(b), "two readers inside at once");
        let w = l.ticket();
        assert!(!l.try_exclusive(w), "the writer waits for the readers");
        let r = l.ticket();
        assert!(!l.try_shared(r), "a reader behind a waiting writer does not pass it");
        l.unlock_shared();
        l.unlock_shared();
        assert!(l.try_exclusive(w));
        assert!(!l.try_shared(r));
        l.unlock_exclusive();
        assert!(l.try_shared(r));
        l.unlock_shared();
        assert!(l.is_free());
    }

    #[test]
    fn mutual_exclusion_and_no_starvation_under_threads() {
        let l = Arc::new(LockWord::default());
        let inside = Arc::new(AtomicU32::new(0));
        let stop = Arc::new(AtomicBool::new(false));
        let entries = Arc::new(std::sync::atomic::AtomicU64::new(0));
        // Readers that relock at once, forever: the writer still gets in, repeatedly.
        let readers: Vec<_> = (0..3)
            .map(|_| {
                let (l, inside, stop, entries) = (l.clone(), inside.clone(), stop.clone(), entries.clone());
                std::thread::spawn(move || {
                    let mut n = 0u64;
                    while !stop.load(Relaxed) {
                        entries.fetch_add(1, Relaxed);
                        lock(&l, Kind::Shared);
                        assert_eq!(inside.load(SeqCst) & 1, 0, "no writer while a reader is in");
                        inside.fetch_add(2, SeqCst);
                        inside.fetch_sub(2, SeqCst);
                        unlock(&l, Kind::Shared);
                        n += 1;
                    }
                    n
                })
            })
            .collect();
        while entries.load(Relaxed) < 300 {
            std::thread::yield_now();
        }
        for _ in 0..200 {
            lock(&l, Kind::Exclusive);
            assert_eq!(inside.fetch_add(1, SeqCst), 0, "the writer is alone");
            inside.fetch_sub(1, SeqCst);
            unlock(&l, Kind::Exclusive);
        }
        stop.store(true, Relaxed);
        let total: u64 = readers.into_iter().map(|h| h.join().unwrap()).sum();
        assert!(total > 0, "the readers got in too");
        assert!(l.is_free());
    }
}
