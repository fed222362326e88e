//! One-sided operations through the netmod (MPI windows whose targets are on other nodes): where
//! the netmod to a rank has RMA (the libfabric netmod on a provider with `FI_RMA`, and for
//! atomics `FI_ATOMIC`), memory this rank exposes is written, read and updated by peers' NICs
//! or providers without its CPU's part in each operation (a provider with manual progress needs
//! this rank's progress, which every call of the Endpoint makes).
//!
//! The vocabulary is [`nemesis_netmod_rdma::rma`]'s (re-exported as [`crate::rma`]); without the
//! `rdma` feature, or over the TCP netmod, [`Endpoint::rma_caps`] is `None` and nothing else is
//! called. The two-sided paths are untouched: these calls only post operations and look at
//! their completions, which the netmod's ordinary poll reads.
//!
//! Invariants: an operation is posted only to a rank of another node whose netmod connection
//! has RMA, or to this rank itself after [`Endpoint::rma_loopback`]; its buffers are the provider's until [`Endpoint::rma_flushed`] of that rank is true
//! (or the rank is dead: an error).

use super::{Endpoint, NOT_LOCAL};
use crate::error::{Error, Result};
use crate::rma::{Atomic, AtomicKind, FiOp, FiType, RmaCaps, RmaKey, RmaRegion};

#[cfg(feature = "rdma")]
use crate::net::Net;

/// The error of a call that needs RMA on a build or netmod without it.
fn no_rma() -> Error {
    Error::Config("one-sided operations through the netmod need the libfabric netmod with RMA".into())
}

impl Endpoint {
    /// The libfabric netmod, when it runs.
    #[cfg(feature = "rdma")]
    fn ofi(&mut self) -> Option<&mut nemesis_netmod_rdma::OfiNetmod<'static>> {
        match self.inner.net.as_mut() {
            Some(Net::Ofi(n)) => Some(n),
            _ => None,
        }
    }

    /// What the netmod to `rank` offers for one-sided operations; `None` for a rank of this
    /// node (or this rank), without a netmod, or over a netmod without RMA.
    pub fn rma_caps(&self, rank: u32) -> Option<RmaCaps> {
        let remote = self.inner.route.get(rank as usize).is_some_and(|&l| l == NOT_LOCAL);
        if !remote {
            return None;
        }
        #[cfg(feature = "rdma")]
        if let Some(Net::Ofi(n)) = self.inner.net.as_ref() {
            let c = n.rma_caps();
            return (c.read || c.write).then_some(c);
        }
        None
    }

    /// True if the netmod does atomic `kind` of `op` on elements of `ty`.
    pub fn rma_atomic_valid(&self, kind: AtomicKind, op: FiOp, ty: FiType) -> bool {
        #[cfg(feature = "rdma")]
        if let Some(Net::Ofi(n)) = self.inner.net.as_ref() {
            return n.rma_atomic_valid(kind, op, ty);
        }
        let _ = (kind, op, ty);
        false
    }

    /// The most elements one atomic `kind` of `op` on `ty` may carry: 0 where the netmod does
    /// not do it.
    pub fn rma_atomic_count(&self, kind: AtomicKind, op: FiOp, ty: FiType) -> usize {
        #[cfg(feature = "rdma")]
        if let Some(Net::Ofi(n)) = self.inner.net.as_ref() {
            return n.rma_atomic_count(kind, op, ty);
        }
        let _ = (kind, op, ty);
        0
    }

    /// Exposes `len` bytes at `addr` to peers' one-sided operations: `None` where the netmod has
    /// no RMA.
    ///
    /// # Safety
    /// The memory stays valid until [`Endpoint::rma_withdraw`] (or the Endpoint's end), and
    /// peers may change it at any time meanwhile.
    pub unsafe fn rma_expose(&mut self, addr: *mut u8, len: usize) -> Result<Option<RmaRegion>> {
        #[cfg(feature = "rdma")]
        if let Some(n) = self.ofi()
            && n.rma_caps().read
        {
            // SAFETY: the caller's contract, passed on.
            return Ok(Some(unsafe { n.rma_expose(addr, len) }?));
        }
        let _ = (addr, len);
        Ok(None)
    }

    /// Ends the exposure of region `id`.
    pub fn rma_withdraw(&mut self, id: u32) {
        #[cfg(feature = "rdma")]
        if let Some(n) = self.ofi() {
            n.rma_withdraw(id);
        }
        let _ = id;
    }

    /// Makes this rank a target of its own one-sided operations through the netmod (its own
    /// address known to the provider): false where the netmod has no atomics or refuses it.
    /// A window whose every origin of a target must go through the provider's atomics needs it
    /// for the target's own accumulates.
    pub fn rma_loopback(&mut self) -> bool {
        #[cfg(feature = "rdma")]
        if let Some(n) = self.ofi()
            && n.rma_caps().atomic
        {
            return n.rma_loopback().is_ok();
        }
        false
    }

    /// Connects the netmod to `rank` if it was not yet (a rank started later), then gives it
    /// (this rank itself after [`Endpoint::rma_loopback`]).
    #[cfg(feature = "rdma")]
    fn ofi_to(&mut self, rank: u32) -> Result<&mut nemesis_netmod_rdma::OfiNetmod<'static>> {
        if rank == self.rank() {
            return self.ofi().filter(|n| n.connected(rank)).ok_or_else(no_rma);
        }
        if self.rma_caps(rank).is_none() {
            return Err(no_rma());
        }
        if !self.ofi().is_some_and(|n| n.connected(rank)) {
            self.learn_peer(rank)?;
        }
        self.ofi().ok_or_else(no_rma)
    }

    /// Writes `len` bytes at `src` to `off` of `rank`'s region `to` (`fi_write`).
    ///
    /// # Safety
    /// `src` holds `len` bytes, unchanged until [`Endpoint::rma_flushed`] of `rank` is true.
    pub unsafe fn rma_write(&mut self, rank: u32, src: *const u8, len: usize, to: &RmaKey, off: u64) -> Result<()> {
        #[cfg(feature = "rdma")]
        let r = {
            let n = self.ofi_to(rank)?;
            // SAFETY: the caller's contract, passed on.
            unsafe { n.rma_write(rank, src, len, to, off) }.map_err(Error::from)
        };
        #[cfg(not(feature = "rdma"))]
        let r = {
            let _ = (rank, src, len, to, off);
            Err(no_rma())
        };
        r
    }

    /// Reads `len` bytes at `off` of `rank`'s region `from` into `dst` (`fi_read`).
    ///
    /// # Safety
    /// `dst` holds `len` bytes, the provider's until [`Endpoint::rma_flushed`] of `rank` is true.
    pub unsafe fn rma_read(&mut self, rank: u32, dst: *mut u8, len: usize, from: &RmaKey, off: u64) -> Result<()> {
        #[cfg(feature = "rdma")]
        let r = {
            let n = self.ofi_to(rank)?;
            // SAFETY: the caller's contract, passed on.
            unsafe { n.rma_read(rank, dst, len, from, off) }.map_err(Error::from)
        };
        #[cfg(not(feature = "rdma"))]
        let r = {
            let _ = (rank, dst, len, from, off);
            Err(no_rma())
        };
        r
    }

    /// Atomic `a` at `off` of `rank`'s region `to`.
    ///
    /// # Safety
    /// As [`nemesis_netmod_rdma::OfiNetmod::rma_atomic`], until [`Endpoint::rma_flushed`] of
    /// `rank` is true.
    pub unsafe fn rma_atomic(&mut self, rank: u32, a: &Atomic, to: &RmaKey, off: u64) -> Result<()> {
        #[cfg(feature = "rdma")]
        let r = {
            let n = self.ofi_to(rank)?;
            // SAFETY: the caller's contract, passed on.
            unsafe { n.rma_atomic(rank, a, to, off) }.map_err(Error::from)
        };
        #[cfg(not(feature = "rdma"))]
        let r = {
            let _ = (rank, a, to, off);
            Err(no_rma())
        };
        r
    }

    /// One pass of progress, then true once every one-sided operation to `rank` completed (at
    /// the target, for writes and atomics where the provider completes on delivery); an error if
    /// `rank` died.
    pub fn rma_flushed(&mut self, rank: u32) -> Result<bool> {
        self.progress()?;
        #[cfg(feature = "rdma")]
        if let Some(n) = self.ofi() {
            return Ok(n.rma_flushed(rank)?);
        }
        let _ = rank;
        Ok(true)
    }

    /// Bytes written and read, and atomics posted, by one-sided operations so far (zero without
    /// the libfabric netmod): what proves which path carried a window's operations.
    pub fn rma_counts(&self) -> (u64, u64, u64) {
        #[cfg(feature = "rdma")]
        if let Some(Net::Ofi(n)) = self.inner.net.as_ref() {
            let s = n.stats();
            return (s.rma_put_bytes, s.rma_get_bytes, s.rma_atomics);
        }
        (0, 0, 0)
    }
}
