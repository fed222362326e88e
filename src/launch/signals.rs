//! SIGINT and SIGTERM to the launcher, turned into bytes on a pipe (the self-pipe trick) that the
//! supervisor polls with everything else: the handler only `write`s, which is async-signal-safe,
//! and it works whichever thread of the process the signal lands on.

use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::sync::atomic::{AtomicI32, Ordering};

use crate::error::{Error, Result};

/// Write end of the pipe of the job that handles signals, or -1. Read by the handler.
static PIPE_WRITE: AtomicI32 = AtomicI32::new(-1);

/// Signals the launcher turns into a clean end of the job.
const HANDLED: [libc::c_int; 2] = [libc::SIGINT, libc::SIGTERM];

extern "C" fn on_signal(sig: libc::c_int) {
    // ORDERING: Relaxed; the descriptor was published before the handler was installed
    // (sigaction is a full barrier for this purpose: same thread or a later delivery).
    let fd = PIPE_WRITE.load(Ordering::Relaxed);
    if fd < 0 {
        return;
    }
    // SAFETY: __errno_location returns this thread's errno; saved and restored around `write`
    // so that the interrupted code does not see it change.
    let errno = unsafe { *libc::__errno_location() };
    let byte = sig as u8;
    // SAFETY: write(2) is async-signal-safe; one byte from a live local. A full pipe (a flood of
    // signals) loses the byte, which is harmless: one is enough.
    unsafe {
        libc::write(fd, (&byte as *const u8).cast(), 1);
        *libc::__errno_location() = errno;
    }
}

/// SIGINT and SIGTERM handling for the duration of a job; the previous dispositions come back
/// on drop.
pub(crate) struct SignalPipe {
    read: OwnedFd,
    _write: OwnedFd,
    old: Vec<(libc::c_int, libc::sigaction)>,
}

impl SignalPipe {
    /// Installs the handlers. Fails if another job of this process already handles signals.
    pub fn install() -> Result<SignalPipe> {
        let mut fds = [0 as RawFd; 2];
        // SAFETY: pipe2 writes two descriptors into `fds`.
        if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC | libc::O_NONBLOCK) } != 0 {
            return Err(Error::io("pipe2", io::Error::last_os_error()));
        }
        // SAFETY: fresh descriptors that nothing else owns.
        let (read, write) = unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) };
        // ORDERING: AcqRel on success; only one job at a time may own the handlers.
        if PIPE_WRITE.compare_exchange(-1, write.as_raw_fd(), Ordering::AcqRel, Ordering::Acquire).is_err() {
            return Err(Error::Config("another job of this process already handles SIGINT and SIGTERM".into()));
        }
        let mut pipe = SignalPipe { read, _write: write, old: Vec::new() };
        for sig in HANDLED {
            // SAFETY: a zeroed sigaction is valid (empty mask, no flags) before we fill it.
            let mut act: libc::sigaction = unsafe { std::mem::zeroed() };
            act.sa_sigaction = on_signal as *const () as libc::sighandler_t;
            // SA_RESTART: system calls the signal interrupts elsewhere in the host resume.
            act.sa_flags = libc::SA_RESTART;
            // SAFETY: a zeroed sigaction to receive the old disposition.
            let mut old: libc::sigaction = unsafe { std::mem::zeroed() };
            // SAFETY: valid pointers to two sigaction structs; the handler is async-signal-safe.
            if unsafe { libc::sigaction(sig, &act, &mut old) } != 0 {
                return Err(Error::io("sigaction", io::Error::last_os_error()));
            }
            pipe.old.push((sig, old));
        }
        Ok(pipe)
    }

    /// The descriptor to poll for readability.
    pub fn fd(&self) -> RawFd {
        self.read.as_raw_fd()
    }

    /// The signals received since the last call, oldest first.
    pub fn take(&self) -> Vec<i32> {
        let mut buf = [0u8; 64];
        let mut sigs = Vec::new();
        loop {
            // SAFETY: reads at most `buf.len()` bytes into `buf` from our non-blocking pipe.
            let n = unsafe { libc::read(self.read.as_raw_fd(), buf.as_mut_ptr().cast(), buf.len()) };
            if n <= 0 {
                break;
            }
            sigs.extend(buf[..n as usize].iter().map(|&b| i32::from(b)));
        }
        sigs
    }
}

impl Drop for SignalPipe {
    fn drop(&mut self) {
        // ORDERING: Release; first, so that a late signal finds no descriptor to write to by the
        // time the pipe closes (with the fields, after this body).
        PIPE_WRITE.store(-1, Ordering::Release);
        for (sig, old) in &self.old {
            // SAFETY: restores the disposition saved at install.
            unsafe { libc::sigaction(*sig, old, std::ptr::null_mut()) };
        }
    }
}
