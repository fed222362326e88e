//! SIGINT and SIGTERM to the launcher, turned into bytes on a pipe (the self-pipe trick) that the
//! supervisor polls with everything else: the handler only `write`s, which is async-signal-safe,
//! and it works whichever thread of the process the signal lands on.
//!
//! All through `nix`; `sigaction` stays `unsafe` (a handler must be async-signal-safe), and the
//! handler borrows the pipe's descriptor from an atomic.

use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd};
use std::sync::atomic::{AtomicI32, Ordering};

use nix::errno::Errno;
use nix::fcntl::OFlag;
use nix::sys::signal::{SaFlags, SigAction, SigHandler, SigSet, Signal, sigaction};

use crate::error::{Error, Result};

/// Write end of the pipe of the job that handles signals, or -1. Read by the handler.
static PIPE_WRITE: AtomicI32 = AtomicI32::new(-1);

/// Signals the launcher turns into a clean end of the job.
const HANDLED: [Signal; 2] = [Signal::SIGINT, Signal::SIGTERM];

extern "C" fn on_signal(sig: libc::c_int) {
    // ORDERING: Relaxed; the descriptor was published before the handler was installed
    // (sigaction is a full barrier for this purpose: same thread or a later delivery).
    let fd = PIPE_WRITE.load(Ordering::Relaxed);
    if fd < 0 {
        return;
    }
    // Saved and restored around `write`, so that the interrupted code does not see it change.
    let errno = Errno::last_raw();
    // SAFETY: `fd` is the pipe's write end, open as long as PIPE_WRITE holds it (SignalPipe's
    // drop clears it before closing).
    let pipe = unsafe { BorrowedFd::borrow_raw(fd) };
    // write(2) is async-signal-safe. A full pipe (a flood of signals) loses the byte, which is
    // harmless: one is enough.
    let _ = nix::unistd::write(pipe, &[sig as u8]);
    Errno::set_raw(errno);
}

/// SIGINT and SIGTERM handling for the duration of a job; the previous dispositions come back
/// on drop.
pub(crate) struct SignalPipe {
    read: OwnedFd,
    _write: OwnedFd,
    old: Vec<(Signal, SigAction)>,
}

impl SignalPipe {
    /// Installs the handlers. Fails if another job of this process already handles signals.
    pub fn install() -> Result<SignalPipe> {
        let (read, write) = nix::unistd::pipe2(OFlag::O_CLOEXEC | OFlag::O_NONBLOCK)
            .map_err(|e| Error::io("pipe2", std::io::Error::from(e)))?;
        // ORDERING: AcqRel on success; only one job at a time may own the handlers.
        if PIPE_WRITE.compare_exchange(-1, write.as_raw_fd(), Ordering::AcqRel, Ordering::Acquire).is_err() {
            return Err(Error::Config("another job of this process already handles SIGINT and SIGTERM".into()));
        }
        let mut pipe = SignalPipe { read, _write: write, old: Vec::new() };
        // SA_RESTART: system calls the signal interrupts elsewhere in the host resume.
        let act = SigAction::new(SigHandler::Handler(on_signal), SaFlags::SA_RESTART, SigSet::empty());
        for sig in HANDLED {
            // SAFETY: the handler is async-signal-safe (an atomic load and a write).
            let old = unsafe { sigaction(sig, &act) }.map_err(|e| Error::io("sigaction", std::io::Error::from(e)))?;
            pipe.old.push((sig, old));
        }
        Ok(pipe)
    }

    /// The descriptor to poll for readability.
    pub fn fd(&self) -> BorrowedFd<'_> {
        self.read.as_fd()
    }

    /// The signals received since the last call, oldest first.
    pub fn take(&self) -> Vec<i32> {
        let mut buf = [0u8; 64];
        let mut sigs = Vec::new();
        // Non-blocking: ends on EAGAIN once the pipe is empty.
        while let Ok(n @ 1..) = nix::unistd::read(self.read.as_fd(), &mut buf) {
            sigs.extend(buf[..n].iter().map(|&b| i32::from(b)));
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
            let _ = unsafe { sigaction(*sig, old) };
        }
    }
}
