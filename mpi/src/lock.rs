//! The big lock of `MPI_THREAD_MULTIPLE`: a futex mutex (Drepper, "Futexes Are Tricky", mutex 2)
//! taken and released without a guard object, so that a call can release it while it waits and
//! take it again, and so that an unthreaded call pays nothing but a flag test for it.
//!
//! The word is 0 (free), 1 (held) or 2 (held, and a thread may sleep on it).
//!
//! [`BigLock`] is the one lock of the MPI library (`state::LOCK`): a [`RawLock`] that also knows
//! whether the calling thread holds it, so that a program's callback can be run with it released
//! (`state::outside`) wherever the callback is reached from.

use std::cell::Cell;
use std::sync::atomic::{AtomicU32, Ordering};

/// The lock word.
pub struct RawLock {
    word: AtomicU32,
}

impl RawLock {
    /// A free lock.
    pub const fn new() -> RawLock {
        RawLock { word: AtomicU32::new(0) }
    }

    /// Takes the lock, sleeping while another thread holds it.
    #[inline]
    pub fn lock(&self) {
        // ORDERING: Acquire on success: what the previous holder wrote before its release is
        // visible to us.
        if self.word.compare_exchange(0, 1, Ordering::Acquire, Ordering::Relaxed).is_err() {
            self.lock_contended();
        }
    }

    #[cold]
    #[inline(never)]
    fn lock_contended(&self) {
        // ORDERING: Acquire when we get it (swap returns 0), as in `lock`. Marking the word 2
        // tells the holder to wake a sleeper when it releases.
        while self.word.swap(2, Ordering::Acquire) != 0 {
            futex(&self.word, libc::FUTEX_WAIT | libc::FUTEX_PRIVATE_FLAG, 2);
        }
    }

    /// Releases the lock (the caller holds it).
    #[inline]
    pub fn unlock(&self) {
        // ORDERING: Release: our writes under the lock happen before the next holder's Acquire.
        if self.word.swap(0, Ordering::Release) == 2 {
            futex(&self.word, libc::FUTEX_WAKE | libc::FUTEX_PRIVATE_FLAG, 1);
        }
    }
}

impl Default for RawLock {
    fn default() -> Self {
        RawLock::new()
    }
}

thread_local! {
    /// This thread holds the process's [`BigLock`]: set by its `lock`, cleared by its `unlock`.
    static HOLDS: Cell<bool> = const { Cell::new(false) };
}

/// A [`RawLock`] whose holder knows it holds it ([`BigLock::held_here`]). One per process: the
/// per-thread flag is shared by all (the library has one, `state::LOCK`).
pub struct BigLock {
    raw: RawLock,
}

impl BigLock {
    /// A free lock.
    pub const fn new() -> BigLock {
        BigLock { raw: RawLock::new() }
    }

    /// Takes the lock, sleeping while another thread holds it.
    #[inline(always)]
    pub fn lock(&self) {
        self.raw.lock();
        HOLDS.set(true);
    }

    /// Releases the lock (the calling thread holds it).
    #[inline(always)]
    pub fn unlock(&self) {
        HOLDS.set(false);
        self.raw.unlock();
    }

    /// True if the calling thread holds the lock.
    #[inline(always)]
    pub fn held_here() -> bool {
        HOLDS.get()
    }
}

impl Default for BigLock {
    fn default() -> Self {
        BigLock::new()
    }
}

/// `futex(2)` on a word of this process (private: the lock is never shared with another one).
fn futex(word: &AtomicU32, op: libc::c_int, val: u32) {
    // SAFETY: `word` is a valid, aligned u32 for the call's duration; a wait returns at once if
    // the word is no longer `val`, a wake touches no memory; errors (EAGAIN, EINTR) only mean
    // "look again", which the callers' loops do.
    unsafe {
        libc::syscall(libc::SYS_futex, word.as_ptr(), op, val, std::ptr::null::<libc::timespec>());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn threads_take_turns() {
        static L: RawLock = RawLock::new();
        static mut COUNT: u64 = 0;
        let threads: Vec<_> = (0..4)
            .map(|_| {
                std::thread::spawn(|| {
                    for _ in 0..20_000 {
                        L.lock();
                        // SAFETY: the lock serializes every access to COUNT.
                        unsafe { COUNT += 1 };
                        L.unlock();
                    }
                })
            })
            .collect();
        for t in threads {
            t.join().unwrap();
        }
        L.lock();
        // SAFETY: under the lock, every thread joined.
        assert_eq!(unsafe { COUNT }, 80_000);
        L.unlock();
    }
}
