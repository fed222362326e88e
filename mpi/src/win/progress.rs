//! Progress of the remote path: who applies the active messages a target receives
//! (`super::remote`), so that passive-target operations complete without any call at the target.
//!
//! Two agents: every MPI call that waits ([`crate::state::Access::pause`] advances the windows
//! with remote members, and [`crate::state::Access::may_block`] keeps waits out of the
//! Endpoint's own blocking calls while one exists), and a **progress thread** for the time the
//! target computes: started when the first window with a remote member is created, stopped when
//! the last one is freed (or at `MPI_Finalize`). The thread takes the big lock (`state::LOCK`),
//! advances the windows, releases it and sleeps with a backoff ([`Backoff`]: yields while there
//! is work, then sleeps 20 µs doubling to 1 ms while idle).
//!
//! **Cost.** The thread needs the program's calls to take the lock: from the first such window
//! on, calls lock as under `MPI_THREAD_MULTIPLE` and the fused `MPI_Send`/`MPI_Recv` paths are
//! off (`state::set_fused`), whatever the thread level granted (`MPI_Query_thread` still answers
//! the level granted). Jobs that never create a window spanning nodes pay nothing: one load of
//! [`active`] in each pause of a wait. When the last such window is freed, calls stop locking
//! (unless `MPI_THREAD_MULTIPLE` was granted) and the fused paths come back.
//!
//! **Invariants.** [`WINS`] lists the live windows with a remote member; [`ACTIVE`] is its
//! length; [`GENERATION`] names the running thread: a thread whose generation is not the current
//! one ends at its next look (so stopping never waits for it, and never under the lock).

use std::ffi::c_int;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::time::Duration;

use crate::abi;
use crate::state::{Access, State};

/// Live windows with a remote member (their handles).
static WINS: Mutex<Vec<c_int>> = Mutex::new(Vec::new());
/// `WINS.len()`, for the pauses' one load.
static ACTIVE: AtomicUsize = AtomicUsize::new(0);
/// The generation of the thread that should run (0: none); bumped at every start and stop.
static GENERATION: AtomicU64 = AtomicU64::new(0);

/// The first sleep of an idle thread, and its ceiling.
const IDLE_FIRST: Duration = Duration::from_micros(20);
const IDLE_MOST: Duration = Duration::from_millis(1);

/// True while some window has a remote member.
#[inline(always)]
pub fn active() -> bool {
    // ORDERING: Relaxed: changed under the state's access (the lock, or the program's own
    // serialization), which orders it for every call that reads it.
    ACTIVE.load(Ordering::Relaxed) != 0
}

fn wins() -> std::sync::MutexGuard<'static, Vec<c_int>> {
    WINS.lock().unwrap_or_else(|p| p.into_inner())
}

/// Window `h` has remote members: from now on calls lock and the progress thread runs.
pub fn register(acc: &mut Access, h: c_int) {
    let n = {
        let mut w = wins();
        w.push(h);
        w.len()
    };
    // ORDERING: Relaxed: see `active`.
    ACTIVE.store(n, Ordering::Relaxed);
    if n == 1 {
        acc.lock_calls(true);
        let st = acc.st();
        st.fused = false;
        crate::state::set_fused(false);
        start();
    }
}

/// Window `h` is being freed: the last one stops the thread and gives back the fused paths.
pub fn unregister(acc: &mut Access, h: c_int) {
    let n = {
        let mut w = wins();
        w.retain(|&x| x != h);
        w.len()
    };
    // ORDERING: Relaxed: see `active`.
    let was = ACTIVE.swap(n, Ordering::Relaxed);
    if n == 0 && was != 0 {
        stop(acc);
    }
}

/// Stops the thread (if running) and, below `MPI_THREAD_MULTIPLE`, lets calls go unlocked and
/// the fused paths run again (`MPI_Finalize` too, with every window gone).
pub fn stop(acc: &mut Access) {
    // ORDERING: Relaxed: the thread reads it under the lock, which this call holds.
    GENERATION.fetch_add(1, Ordering::Relaxed);
    wins().clear();
    ACTIVE.store(0, Ordering::Relaxed);
    let st = acc.st();
    if st.provided != abi::THREAD_MULTIPLE {
        let ft = st.ep.as_ref().is_some_and(|ep| ep.ft_enabled());
        st.fused = st.phase == crate::state::Phase::Running && !ft;
        crate::state::set_fused(st.fused && st.deferred.is_empty());
        acc.lock_calls(false);
    }
}

/// Advances every window with a remote member once: true if anything moved.
pub fn advance(st: &mut State) -> bool {
    // By index, the list's lock taken per window (no copy of the list per look): the list
    // changes only under the state's access, which our `st` is, and `remote::advance`
    // registers and unregisters nothing.
    let mut moved = false;
    for k in 0.. {
        let Some(h) = wins().get(k).copied() else { break };
        moved |= super::remote::advance(st, h);
    }
    moved
}

/// Starts a progress thread of a new generation.
fn start() {
    // ORDERING: Relaxed: the thread reads it under the lock, which this call holds.
    let gen_ = GENERATION.fetch_add(1, Ordering::Relaxed) + 1;
    let spawned = std::thread::Builder::new().name("nemesis-rma".into()).spawn(move || run(gen_));
    if let Err(e) = spawned {
        // Progress still happens in every call that waits; only the overlap with computation is
        // lost.
        tracing::warn!("one-sided progress thread not started: {e}");
    }
}

/// The progress thread's loop.
fn run(gen_: u64) {
    let mut idle = Backoff::default();
    loop {
        let moved = crate::state::with_lock(|st| {
            // ORDERING: Relaxed: written under the lock we hold. A stale generation: the calls
            // may no longer lock, so the state is not ours to touch.
            if GENERATION.load(Ordering::Relaxed) != gen_ {
                return None;
            }
            st.ep.as_ref()?;
            Some(advance(st))
        });
        match moved {
            Some(moved) => idle.after(moved),
            None => return,
        }
    }
}

/// The thread's pause between two looks: a yield while looks find work, then sleeps that
/// double from [`IDLE_FIRST`] to [`IDLE_MOST`] while they find none.
#[derive(Debug, Default)]
struct Backoff {
    sleep: Option<Duration>,
}

impl Backoff {
    fn after(&mut self, moved: bool) {
        if moved {
            self.sleep = None;
            std::thread::yield_now();
            return;
        }
        let d = self.sleep.map_or(IDLE_FIRST, |d| (d * 2).min(IDLE_MOST));
        self.sleep = Some(d);
        std::thread::sleep(d);
    }
}
