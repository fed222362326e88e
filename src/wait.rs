//! Waiting for progress: poll, yield, or block on the rank's doorbell
//! (`shared/ARCHITECTURE.md`, "Waiting").
//!
//! A waiter spins for a bounded number of empty polls, then (yield) gives the core away after
//! each further empty poll, or (block) arms its doorbell — a futex word in its rank record in the
//! segment — polls once more, and sleeps on it. Senders ring a doorbell only when it is armed, so
//! ranks that never block cost senders one load of a line nobody writes.
//!
//! The arm-then-check on the waiter's side and the publish-then-check on the sender's side would
//! need a full fence on every send to be race-free; instead the sleep has a timeout
//! ([`BLOCK_TIMEOUT`]): in the rare lost-wakeup race a message waits at most that long, and the
//! send fast path pays no fence. The timeout also bounds how long a sleeping rank takes to notice
//! a peer's death.
//!
//! The futex calls use `libc::syscall`: `nix` has no futex.

use std::time::Duration;

use nemesis_shm::node::DOORBELL_ARMED;
use std::sync::atomic::{AtomicU32, Ordering::*};

use crate::config::WaitMode;

/// Empty polls spent spinning before yielding or blocking, when every rank of the node has a CPU.
pub const SPIN_POLLS: u32 = 2000;

/// The same when the node has more ranks than CPUs: a rank that spins holds a core that the rank
/// it waits for may need, so it gives it away almost at once (as Open MPI's `mpi_yield_when_idle`
/// does after every empty poll). A few polls still catch an answer already on its way.
pub const OVERSUBSCRIBED_SPIN_POLLS: u32 = 8;

/// The spin of a node with `local_ranks` ranks: [`OVERSUBSCRIBED_SPIN_POLLS`] if they outnumber
/// the CPUs online, else [`SPIN_POLLS`].
pub fn default_spin(local_ranks: usize) -> u32 {
    // SAFETY: sysconf reads a system value.
    let cpus = unsafe { libc::sysconf(libc::_SC_NPROCESSORS_ONLN) };
    if cpus > 0 && local_ranks > cpus as usize { OVERSUBSCRIBED_SPIN_POLLS } else { SPIN_POLLS }
}

/// Empty polls after which a wait is long (liveness checks), whatever the spin.
const LONG_POLLS: u32 = SPIN_POLLS;

/// Longest sleep on a doorbell.
pub const BLOCK_TIMEOUT: Duration = Duration::from_millis(10);

/// Per-wait state.
#[derive(Debug)]
pub struct Waiter {
    mode: WaitMode,
    empty: u32,
    spin: u32,
}

impl Waiter {
    /// A fresh wait in `mode`, spinning `spin` empty polls before it yields or blocks.
    pub fn new(mode: WaitMode, spin: u32) -> Waiter {
        Waiter { mode, empty: 0, spin }
    }

    /// Called after a progress pass that found nothing. `doorbell` is this rank's doorbell and
    /// `recheck` polls once more after arming it (returns true if something arrived, in which
    /// case the waiter does not sleep).
    #[inline]
    pub fn idle(&mut self, doorbell: &AtomicU32, recheck: impl FnOnce() -> bool) {
        self.empty = self.empty.saturating_add(1);
        if self.mode == WaitMode::Poll {
            // Poll mode owns its core: re-poll at once. A `pause` here would add its own latency
            // (tens of cycles or more, depending on the CPU) to every message's detection.
            return;
        }
        if self.empty < self.spin {
            core::hint::spin_loop();
            return;
        }
        if self.mode == WaitMode::Yield {
            std::thread::yield_now();
            return;
        }
        // ORDERING: SeqCst; the store must be visible before our recheck reads the queues
        // (store-load order), for the common case where the sender rings after it.
        doorbell.store(DOORBELL_ARMED, SeqCst);
        if !recheck() {
            futex_wait(doorbell, DOORBELL_ARMED, BLOCK_TIMEOUT);
        }
        // ORDERING: Relaxed; only we arm it.
        doorbell.store(0, Relaxed);
    }

    /// How many of `max` quick checks of one awaited place (a fastbox) the wait may spend before
    /// its next full poll: all of them in poll mode; in yield and block modes only what is left of
    /// the spin, and none once it gives the core away. Such checks are empty polls too: a rank
    /// that spun them after every yield would hold the core the awaited rank needs when ranks
    /// outnumber CPUs (64 checks of ~100 ns between two yields made 4 ranks on 2 CPUs take
    /// 40–60 µs per 8-byte `MPI_Reduce` or `MPI_Gather`, against ~1 µs for Open MPI).
    #[inline]
    pub fn quick_checks(&self, max: u32) -> u32 {
        match self.mode {
            WaitMode::Poll => max,
            _ => self.spin.saturating_sub(self.empty).min(max),
        }
    }

    /// Counts `n` empty quick checks ([`quick_checks`](Self::quick_checks)) against the spin.
    #[inline]
    pub fn checked(&mut self, n: u32) {
        if self.mode != WaitMode::Poll {
            self.empty = self.empty.saturating_add(n);
        }
    }

    /// Called after progress: the next empty poll starts a fresh spin.
    #[inline]
    pub fn progressed(&mut self) {
        self.empty = 0;
    }

    /// True once the wait has gone on long enough for slow-path checks (liveness).
    #[inline]
    pub fn is_long(&self) -> bool {
        self.empty >= LONG_POLLS
    }
}

/// Rings `doorbell` if its rank is asleep (or about to be).
#[inline(always)]
pub fn ring(doorbell: &AtomicU32) {
    // ORDERING: Relaxed load: a hint; the waiter's timeout covers the race (module doc).
    if doorbell.load(Relaxed) == DOORBELL_ARMED {
        ring_slow(doorbell);
    }
}

#[cold]
fn ring_slow(doorbell: &AtomicU32) {
    // ORDERING: AcqRel; one ringer wakes it.
    if doorbell.swap(0, AcqRel) == DOORBELL_ARMED {
        futex_wake(doorbell);
    }
}

/// Sleeps while `*word == expected`, at most `timeout`. A shared (not private) futex: the word is
/// in memory mapped by several processes.
fn futex_wait(word: &AtomicU32, expected: u32, timeout: Duration) {
    let ts =
        libc::timespec { tv_sec: timeout.as_secs() as libc::time_t, tv_nsec: timeout.subsec_nanos() as libc::c_long };
    // SAFETY: `word` is a valid, aligned u32 for the duration of the call; FUTEX_WAIT only reads it.
    unsafe {
        libc::syscall(libc::SYS_futex, word.as_ptr(), libc::FUTEX_WAIT, expected, &ts as *const libc::timespec);
    }
}

/// Wakes one sleeper on `word` (shared futex).
fn futex_wake(word: &AtomicU32) {
    // SAFETY: as above; FUTEX_WAKE does not touch the memory.
    unsafe {
        libc::syscall(libc::SYS_futex, word.as_ptr(), libc::FUTEX_WAKE, i32::MAX);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;
    use std::time::Instant;

    #[test]
    fn a_ring_wakes_a_blocked_waiter_before_its_timeout() {
        let bell = Arc::new(AtomicU32::new(0));
        let b = bell.clone();
        let t = std::thread::spawn(move || {
            let start = Instant::now();
            let mut w = Waiter::new(WaitMode::Block, SPIN_POLLS);
            w.empty = SPIN_POLLS;
            // A long sleep: the ring must cut it short (the timeout alone would end it too, so
            // we loop on the waiter until the ringer's flag is seen).
            w.idle(&b, || false);
            start.elapsed()
        });
        // Ring once it is armed.
        let deadline = Instant::now() + Duration::from_secs(5);
        while bell.load(SeqCst) != DOORBELL_ARMED && Instant::now() < deadline {
            std::thread::yield_now();
        }
        ring(&bell);
        let slept = t.join().unwrap();
        assert!(slept < Duration::from_secs(5));
        assert_eq!(bell.load(SeqCst), 0, "disarmed after waking");
    }

    #[test]
    fn recheck_success_skips_the_sleep_and_poll_never_sleeps() {
        let bell = AtomicU32::new(0);
        let mut w = Waiter::new(WaitMode::Block, SPIN_POLLS);
        w.empty = SPIN_POLLS;
        let mut rechecked = false;
        w.idle(&bell, || {
            rechecked = true;
            true
        });
        assert!(rechecked);
        let mut p = Waiter::new(WaitMode::Poll, SPIN_POLLS);
        for _ in 0..10 * SPIN_POLLS {
            p.idle(&bell, || panic!("poll mode never arms"));
        }
        assert_eq!(bell.load(SeqCst), 0);
    }
}
