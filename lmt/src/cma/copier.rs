//! The system side of single copies, as the rendezvous state machine sees it: [`Copier`] is what
//! it asks (is this process fit, is it still alive, copy these ranges), [`Kernel`] the answer that
//! ships (pidfds, `/proc`, `process_vm_readv`/`writev`). The state machine makes no system call
//! itself, so a test can drive it with a copier of its own.
//!
//! Invariant: [`Kernel`] copies to or from a pid only once [`PeerProcess::open`] accepted it for
//! the peer asking, and forgets the acceptance when that peer dies.

use std::io;

use super::{Batch, PeerProcess, read_vectored, write_vectored};
use crate::error::{Error, Result};

/// What the rendezvous asks of the system for single copies.
pub trait Copier {
    /// This process's id (what a HELP names, what a rank's transfers with itself copy from).
    fn own_pid(&self) -> u32;
    /// Checks process `pid` that local rank `peer` registered, started at `start` (clock ticks
    /// since boot; `None` or 0: unknown), fit for single copies. Once per pid: later calls for
    /// the same pair answer as the first did.
    fn check(&mut self, peer: u16, pid: u32, start: Option<u64>) -> Result<()>;
    /// Why the last check of `peer`'s process refused it, if it did.
    fn refusal(&self, peer: u16) -> Option<&Error>;
    /// Forgets `peer`'s check: it died, and its successor is checked anew.
    fn forget(&mut self, peer: u16);
    /// Whether process `pid` of `peer`, accepted by [`check`](Self::check), still runs: asked
    /// now for a `write`, possibly lately for a read. False for a pid not accepted for `peer`.
    fn alive(&self, peer: u16, pid: u32, write: bool) -> bool;
    /// Reads the remote ranges of `batch` in process `pid` into its local ones, in order;
    /// returns the bytes read (fewer if stopped at a fault).
    ///
    /// # Safety
    /// Every local iovec of `batch` is memory of this process valid for writes of its length and
    /// not otherwise accessed during the call.
    unsafe fn read(&mut self, pid: u32, batch: &Batch) -> io::Result<usize>;
    /// Writes the local ranges of `batch` to its remote ones in process `pid`, in order; returns
    /// the bytes written (fewer if stopped at a fault).
    ///
    /// # Safety
    /// `pid` was accepted by [`check`](Self::check), or is this process under
    /// `Lmt::allow_own_process`, and every remote range is memory that process asked to be
    /// written (a HELP's range of its receive buffer).
    unsafe fn write(&mut self, pid: u32, batch: &Batch) -> io::Result<usize>;
}

/// The kernel's single copies: Cross-Memory Attach, with each peer's process checked once.
#[derive(Debug)]
pub struct Kernel {
    /// This process's id.
    pid: u32,
    /// Per local peer: the pid its slot named when last checked, and the check's result.
    procs: Vec<Option<(u32, Result<PeerProcess>)>>,
}

impl Default for Kernel {
    fn default() -> Kernel {
        Kernel { pid: std::process::id(), procs: Vec::new() }
    }
}

impl Copier for Kernel {
    fn own_pid(&self) -> u32 {
        self.pid
    }

    fn check(&mut self, peer: u16, pid: u32, start: Option<u64>) -> Result<()> {
        let i = usize::from(peer);
        if self.procs.len() <= i {
            self.procs.resize_with(i + 1, || None);
        }
        if !matches!(&self.procs[i], Some((p, _)) if *p == pid) {
            let checked = PeerProcess::open(peer, pid, start);
            if let Err(e) = &checked {
                tracing::warn!(error = %e, "single copies with this peer refused: its large messages go through rings");
            }
            self.procs[i] = Some((pid, checked));
        }
        match &self.procs[i] {
            Some((_, Err(e))) => Err(e.clone()),
            _ => Ok(()),
        }
    }

    fn refusal(&self, peer: u16) -> Option<&Error> {
        match self.procs.get(usize::from(peer)) {
            Some(Some((_, Err(e)))) => Some(e),
            _ => None,
        }
    }

    fn forget(&mut self, peer: u16) {
        if let Some(p) = self.procs.get_mut(usize::from(peer)) {
            *p = None;
        }
    }

    fn alive(&self, peer: u16, pid: u32, write: bool) -> bool {
        match self.procs.get(usize::from(peer)) {
            Some(Some((_, Ok(p)))) if p.pid() == pid => {
                if write {
                    p.alive()
                } else {
                    p.alive_lately()
                }
            }
            _ => false,
        }
    }

    unsafe fn read(&mut self, pid: u32, batch: &Batch) -> io::Result<usize> {
        // SAFETY: the caller's contract is `read_vectored`'s.
        unsafe { read_vectored(pid, batch.local(), batch.remote()) }
    }

    unsafe fn write(&mut self, pid: u32, batch: &Batch) -> io::Result<usize> {
        // SAFETY: the kernel only reads our local ranges (checking them); the remote ones are
        // memory the target asked to be written (the caller's contract).
        unsafe { write_vectored(pid, batch.local(), batch.remote()) }
    }
}
