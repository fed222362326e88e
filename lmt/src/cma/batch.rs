//! The CMA batch: the iovecs of one vectored single copy (`process_vm_readv` or
//! `process_vm_writev`) over the ranges of several transfers with one process, so that a window
//! of messages costs one system call, not one each. The rendezvous (`crate::rendezvous`) says
//! which ranges and applies the result; this module builds the iovecs, a [`Copier`](super::Copier)
//! makes the call.
//!
//! Invariant: after [`Batch::gather`], `took[k]` is the byte count of the `k`-th range gathered,
//! and the local and remote iovecs hold exactly those bytes, in order (at most [`IOV_MAX`] iovecs
//! a side).

use std::ptr::NonNull;

use nemesis_shm::Pieces;

use super::IOV_MAX;

/// Our side of a single-copy range: an address, or a packed offset of pieces.
#[derive(Clone, Copy)]
pub(crate) enum Local {
    Addr(usize),
    Pieces(NonNull<dyn Pieces>, u64),
}

/// The iovecs of one CMA call, kept between calls to avoid allocating every pass.
#[derive(Debug, Default)]
pub struct Batch {
    local: Vec<libc::iovec>,
    remote: Vec<libc::iovec>,
    /// Bytes of each range in the iovecs.
    took: Vec<u64>,
}

impl Batch {
    /// Fills the iovecs of one CMA call for `(our side, remote address, bytes left)` ranges in
    /// order: at most `budget` bytes and [`IOV_MAX`] iovecs on either side, and
    /// [`took`](Self::took) with the bytes of each range included (the i-th entry for the i-th
    /// range; fewer entries than ranges when a limit is reached, and a range in pieces may be cut
    /// short at the iovec limit). A range is one remote iovec and one local iovec per piece.
    ///
    /// # Safety
    /// Every `Local::Pieces` is valid (its transfer's contract).
    pub(crate) unsafe fn gather(&mut self, mut budget: u64, ranges: impl Iterator<Item = (Local, u64, u64)>) {
        let (local, remote, took) = (&mut self.local, &mut self.remote, &mut self.took);
        local.clear();
        remote.clear();
        took.clear();
        for (l, r, left) in ranges {
            if budget == 0 || local.len() == IOV_MAX {
                break;
            }
            let want = left.min(budget);
            let n = match l {
                Local::Addr(a) => {
                    local.push(libc::iovec { iov_base: a as *mut libc::c_void, iov_len: want as usize });
                    want
                }
                Local::Pieces(p, offset) => {
                    let mut n = 0;
                    // SAFETY: valid (the caller's contract).
                    unsafe { p.as_ref() }.visit(offset as usize, want as usize, &mut |a, k| {
                        if local.len() == IOV_MAX {
                            return false;
                        }
                        local.push(libc::iovec { iov_base: a.cast(), iov_len: k });
                        n += k as u64;
                        true
                    });
                    n
                }
            };
            if n == 0 {
                break;
            }
            budget -= n;
            remote.push(libc::iovec { iov_base: r as usize as *mut libc::c_void, iov_len: n as usize });
            took.push(n);
        }
    }

    /// Bytes of each range the last [`gather`](Self::gather) included, in order.
    pub fn took(&self) -> &[u64] {
        &self.took
    }

    /// Our side of the gathered ranges, in order.
    pub fn local(&self) -> &[libc::iovec] {
        &self.local
    }

    /// The peer's side of the gathered ranges, in order.
    pub fn remote(&self) -> &[libc::iovec] {
        &self.remote
    }
}
