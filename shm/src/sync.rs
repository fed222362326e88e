//! The `cfg(loom)` alias layer: every algorithm in this crate imports its atomics from here, so loom
//! model-checks exactly the code that ships (iceoryx2 does the same; see `shared/STYLE.md`).
//!
//! Under `--cfg loom` the atomics are loom's and live on the heap (loom atomics cannot live in a
//! mapping); otherwise they are `std`'s, placed in the shared segment.

#[cfg(loom)]
pub use loom::sync::atomic::{AtomicU32, AtomicU64, Ordering, fence};
#[cfg(not(loom))]
pub use std::sync::atomic::{AtomicU32, AtomicU64, Ordering, fence};

/// One step of a spin wait. Under loom a spin is a yield to the model's scheduler, or loom would
/// explore an unbounded loop.
#[inline]
pub fn spin_hint() {
    #[cfg(loom)]
    loom::thread::yield_now();
    #[cfg(not(loom))]
    core::hint::spin_loop();
}

/// Gives the core away: used once spinning has gone on long enough that the thread we wait for is
/// probably not running (more ranks than cores).
#[inline]
pub fn yield_now() {
    #[cfg(loom)]
    loom::thread::yield_now();
    #[cfg(not(loom))]
    std::thread::yield_now();
}

/// Exponential backoff for waits on another process: spin with `spin_loop` hints, then yield.
/// The shape of `crossbeam_utils::Backoff`, but on this module's `spin_hint` and `yield_now`:
/// crossbeam's spins with `core::hint::spin_loop` under loom too, which loom cannot schedule.
///
/// ```
/// use nemesis_shm::sync::Backoff;
/// let mut backoff = Backoff::new();
/// let mut polls = 0;
/// while polls < 3 {
///     polls += 1;
///     backoff.snooze();
/// }
/// assert!(!backoff.is_completed());
/// ```
#[derive(Debug, Default)]
pub struct Backoff {
    /// Number of waits so far, saturated at `YIELD_LIMIT + 1`.
    step: u32,
}

impl Backoff {
    /// Up to this step, a wait spins `2^step` times.
    const SPIN_LIMIT: u32 = 6;
    /// After this step, `is_completed` says the wait is long: time for slow-path checks. Under
    /// loom every wait is a scheduling point, so the slow path comes at once.
    #[cfg(not(loom))]
    const YIELD_LIMIT: u32 = 10;
    #[cfg(loom)]
    const YIELD_LIMIT: u32 = 0;

    pub const fn new() -> Self {
        Backoff { step: 0 }
    }

    /// Waits a little: spins while the wait is short, yields the core once it is not.
    #[inline]
    pub fn snooze(&mut self) {
        if self.step <= Self::SPIN_LIMIT {
            #[cfg(not(loom))]
            for _ in 0..(1u32 << self.step) {
                spin_hint();
            }
            #[cfg(loom)]
            spin_hint();
        } else {
            yield_now();
        }
        if self.step < Self::YIELD_LIMIT + 1 {
            self.step += 1;
        }
    }

    /// True once the wait has lasted long enough to justify slow-path checks (liveness, repair).
    #[inline]
    pub fn is_completed(&self) -> bool {
        self.step > Self::YIELD_LIMIT
    }

    /// Starts over, after progress.
    #[inline]
    pub fn reset(&mut self) {
        self.step = 0;
    }
}
