//! Deterministic crash points for tests: the cargo feature `failpoints` (off by default, so a
//! normal or release build has none of this) puts named points in the code where a process can be
//! made to stop for good at a precise instruction (between a queue's tail swap and its link,
//! inside a dequeue, in the middle of a drain, a multi-cell message or a rendezvous), instead of a
//! SIGKILL at a random time.
//!
//! A test arms a point in the process that is to die ([`arm`]); when the point is reached for the
//! `n`-th time, the process appends `hit <point> <pid>` to the record file (so the test can check
//! the death landed where it was meant to), then SIGKILLs itself (nothing after the point runs, as
//! in a real crash) or SIGSTOPs itself (for tests that look at a stopped process).
//!
//! The points are placed with [`failpoint!`](crate::failpoint!), which compiles to nothing
//! unless the crate that uses it has its own `failpoints` feature on (and never under loom).

/// What an armed point does once reached.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Action {
    /// SIGKILL this process.
    Kill,
    /// SIGSTOP this process (it can be resumed with SIGCONT).
    Stop,
}

#[cfg(all(feature = "failpoints", not(loom)))]
mod imp {
    use super::Action;
    use std::io::Write;
    use std::sync::Mutex;
    use std::sync::atomic::{AtomicBool, Ordering::Relaxed};

    struct Armed {
        point: String,
        remaining: u64,
        action: Action,
        record: std::path::PathBuf,
    }

    static ANY: AtomicBool = AtomicBool::new(false);
    static ARMED: Mutex<Vec<Armed>> = Mutex::new(Vec::new());

    pub fn arm(point: &str, nth: u64, action: Action, record: &std::path::Path) {
        let mut a = ARMED.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        a.push(Armed { point: point.to_owned(), remaining: nth.max(1), action, record: record.to_owned() });
        // ORDERING: Relaxed; the list itself is behind the mutex.
        ANY.store(true, Relaxed);
    }

    #[cold]
    fn reached(point: &str) {
        let mut a = ARMED.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        let Some(i) = a.iter().position(|x| x.point == point) else { return };
        a[i].remaining -= 1;
        if a[i].remaining > 0 {
            return;
        }
        let Armed { action, record, .. } = a.swap_remove(i);
        let pid = std::process::id();
        if let Ok(mut f) = std::fs::OpenOptions::new().create(true).append(true).open(&record) {
            // One write of the whole line: an O_APPEND write is atomic against the other
            // processes' records, `writeln!` on a `File` may split it into several.
            let _ = f.write_all(format!("hit {point} {pid}\n").as_bytes());
        }
        let sig = match action {
            Action::Kill => libc::SIGKILL,
            Action::Stop => libc::SIGSTOP,
        };
        // SAFETY: signalling this process.
        unsafe { libc::kill(pid as libc::pid_t, sig) };
    }

    #[inline(always)]
    pub fn hit(point: &str) {
        if armed() {
            reached(point);
        }
    }

    #[inline(always)]
    pub fn armed() -> bool {
        // ORDERING: Relaxed; a hint, `reached` takes the lock.
        ANY.load(Relaxed)
    }
}

/// Arms `point` in this process: its `nth` hit (from 1) records itself in `record` and does
/// `action`. Several points may be armed at once.
#[cfg(all(feature = "failpoints", not(loom)))]
pub fn arm(point: &str, nth: u64, action: Action, record: &std::path::Path) {
    imp::arm(point, nth, action, record);
}

/// Reaches `point` (called through [`failpoint!`](crate::failpoint!)).
#[cfg(all(feature = "failpoints", not(loom)))]
#[doc(hidden)]
#[inline(always)]
pub fn hit(point: &str) {
    imp::hit(point);
}

/// Whether any point is armed in this process (a named point built at run time is formatted only then).
#[cfg(all(feature = "failpoints", not(loom)))]
#[doc(hidden)]
#[inline(always)]
pub fn armed() -> bool {
    imp::armed()
}

/// Marks a named crash point; nothing unless the using crate's `failpoints` feature is on. With format
/// arguments the name is built when the point is reached (and a point is armed): `failpoint!("x-{}", peer)`
/// is a point per peer.
#[macro_export]
macro_rules! failpoint {
    ($point:literal) => {
        #[cfg(all(feature = "failpoints", not(loom)))]
        $crate::failpoint::hit($point);
    };
    ($fmt:literal, $($arg:expr),+ $(,)?) => {
        #[cfg(all(feature = "failpoints", not(loom)))]
        {
            if $crate::failpoint::armed() {
                $crate::failpoint::hit(&format!($fmt, $($arg),+));
            }
        }
    };
}
