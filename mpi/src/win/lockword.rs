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
//! abandoned (an `MPI_Win_lock` returns only once it holds the lock) — except when a process
//! that may hold it died ([`Watch`], [`dead`]).
//!
//! **Dead holders.** A process killed while it holds the lock (or waits with a ticket, or holds
//! a window's accumulate mutex) never releases it: its waiters would wait forever. A waiter that
//! has waited [`PATIENCE`] looks, once per [`PATIENCE`], for a dead process among those that can
//! hold what it waits for (the lock word: the window's members on this node, whose pids their
//! control blocks record — remote origins' locks are taken by their target, a member; the
//! accumulate mutex: its holder, whose pid is the mutex's value) and then fails with
//! `MPIX_ERR_PROC_FAILED`, its ticket abandoned. Nothing is recovered: the dead holder may have
//! left the window half-written (an accumulate's elements partly combined, an exclusive epoch's
//! puts partly done), and nobody can tell how far it got. The lock stays held for good instead,
//! so every later waiter also waits, finds the dead process and fails: no survivor enters the
//! lock or the mutex past a dead holder and reads its half-applied state unwarned.

use std::sync::atomic::{AtomicU32, Ordering::*};
use std::time::{Duration, Instant};

use crate::abi;
use crate::error::{Fail, Why};

/// How long a waiter waits before it looks for a dead holder, and between two looks.
pub const PATIENCE: Duration = Duration::from_millis(100);

/// A waiter's clock for its looks for dead holders (create it when the wait begins).
#[derive(Debug, Default)]
pub struct Watch {
    next: Option<Instant>,
}

impl Watch {
    /// Called after each look that did not get in: true once per [`PATIENCE`] of waiting
    /// (never on the first call, which starts the clock).
    pub fn due(&mut self) -> bool {
        let now = Instant::now();
        match self.next {
            Some(t) if now < t => false,
            next => {
                self.next = Some(now + PATIENCE);
                next.is_some()
            }
        }
    }
}

/// True if process `pid` is gone: no such process, or a zombie (killed, not yet reaped by its
/// launcher). 0 (a pid not known yet) and processes of other users count as alive.
pub fn dead(pid: u32) -> bool {
    let Ok(p) = libc::pid_t::try_from(pid) else { return false };
    if p <= 0 {
        return false;
    }
    // SAFETY: signal 0 sends nothing: existence and permission are checked only.
    if unsafe { libc::kill(p, 0) } != 0 {
        return std::io::Error::last_os_error().raw_os_error() == Some(libc::ESRCH);
    }
    // /proc/<pid>/stat: "pid (comm) S ...", the state after the last ')'.
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .is_ok_and(|s| s.rsplit_once(')').is_some_and(|(_, rest)| rest.trim_start().starts_with(['Z', 'X'])))
}

/// This process's pid (the accumulate mutex's value while it holds it), read once.
pub fn my_pid() -> u32 {
    static PID: AtomicU32 = AtomicU32::new(0);
    // ORDERING: Relaxed: every thread computes the same value.
    match PID.load(Relaxed) {
        0 => {
            let p = std::process::id();
            PID.store(p, Relaxed);
            p
        }
        p => p,
    }
}

/// The failure of a wait whose holder (or possible holder) `pid` died.
#[cold]
pub fn holder_died(what: &str, pid: u32) -> Fail {
    let why = format!("{what}: process {pid}, which may hold it, died (the window's state there is unknown)");
    Fail::new(abi::ERRX_PROC_FAILED, None, Why::Other(why))
}

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
    fn a_dead_process_is_seen_and_a_live_one_is_not() {
        assert!(!dead(std::process::id()) && !dead(0) && !dead(1), "this process, none, init");
        let mut child = std::process::Command::new("true").spawn().unwrap();
        let pid = child.id();
        // Exited, not reaped: a zombie, dead all the same.
        while std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|s| !s.contains(") Z")) {
            std::thread::sleep(Duration::from_millis(1));
        }
        assert!(dead(pid), "a zombie");
        child.wait().unwrap();
        assert!(dead(pid), "reaped");
        assert_eq!(my_pid(), std::process::id());
    }

    #[test]
    fn a_watch_is_due_once_per_patience_and_not_at_first() {
        let mut w = Watch::default();
        assert!(!w.due());
        assert!(!w.due(), "not before PATIENCE");
        std::thread::sleep(PATIENCE);
        assert!(w.due());
        assert!(!w.due());
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
