//! One-sided operations to peers' registered regions, for MPI windows whose targets are on other
//! nodes: regions exposed to peers (`rma_expose`, `rma_withdraw`), `fi_write`, `fi_read` and the
//! atomics (`fi_atomic`, `fi_fetch_atomic`, `fi_compare_atomic`) where the provider has them
//! ([`RmaCaps`]), and their completions counted per peer (`rma_pending`), which a flush waits for
//! while the netmod is polled as usual. An operation the provider has no room for (`EAGAIN`, a
//! connection still being made, no free slot) waits in `rma_queue`, posted by later polls in
//! order.
//!
//! Writes ask for delivery completion (`FI_DELIVERY_COMPLETE`) where the provider takes it: a
//! completed write is then in the target's memory. A provider that refuses the flag completes
//! them at its default (`FI_TRANSMIT_COMPLETE`), said once in the log.
//!
//! Invariants:
//! - `rma_pending[peer]` counts the one-sided operations to `peer` posted and not completed
//!   (an error completion counts too, and makes the peer dead);
//! - an operation at `off` for `n` bytes of a region is posted only if `off + n` is within the
//!   region's length ([`RmaKey::at`]);
//! - an exposed region stays registered until `rma_withdraw` or the netmod's end; our keys for
//!   it are random (the key is all a peer needs).

use nemesis_shm::{Error, Result};
use std::ffi::c_void;

use super::lmt::random_key;
use super::{Link, OfiNetmod, Op, peer_dead};
use crate::fabric::{self, Fid};
use crate::rma::{Atomic, AtomicKind, FiOp, FiType, RmaCaps, RmaKey, RmaRegion};
use crate::sys::*;

/// Access of an exposed region.
const EXPOSED: u64 = FI_READ | FI_WRITE | FI_REMOTE_READ | FI_REMOTE_WRITE;

impl OfiNetmod<'_> {
    /// What this netmod's provider offers for one-sided operations (nothing with
    /// `NEMESIS_OFI_RNDV=send`, or keys longer than 64 bits; atomics only without `FI_MR_LOCAL`,
    /// whose result buffers would need registrations).
    pub fn rma_caps(&self) -> RmaCaps {
        let c = &self.fi.caps;
        let ok = c.rma && c.mr_key_size <= 8;
        RmaCaps { write: ok && c.write, read: ok, atomic: ok && c.write && c.atomic && c.mr_mode & FI_MR_LOCAL == 0 }
    }

    /// True if the provider does `kind` of `op` on elements of `ty` (`fi_*atomicvalid`).
    pub fn rma_atomic_valid(&self, kind: AtomicKind, op: FiOp, ty: FiType) -> bool {
        self.rma_atomic_count(kind, op, ty) > 0
    }

    /// The most elements one atomic `kind` of `op` on `ty` may carry (`fi_*atomicvalid`'s
    /// count): 0 where the provider does not do it.
    pub fn rma_atomic_count(&self, kind: AtomicKind, op: FiOp, ty: FiType) -> usize {
        if !self.rma_caps().atomic {
            return 0;
        }
        let k = match kind {
            AtomicKind::Update => 0,
            AtomicKind::Fetch => 1,
            AtomicKind::Compare => 2,
        };
        let mut count = 0usize;
        // SAFETY: an open endpoint; the shim refuses one without an atomic table.
        let rc = unsafe { nm_atomicvalid(self.fi.ep.0, k, ty as i32, op as i32, &mut count) };
        if rc == 0 { count } else { 0 }
    }

    /// Registers `len` bytes at `addr` for peers' reads, writes and atomics.
    ///
    /// # Safety
    /// The memory stays valid until [`OfiNetmod::rma_withdraw`] of the region (or the netmod's
    /// end), and may change under the caller at any time while exposed.
    pub unsafe fn rma_expose(&mut self, addr: *mut u8, len: usize) -> Result<RmaRegion> {
        if !self.rma_caps().read {
            return Err(Error::Net(format!("ofi provider {}: no RMA", self.prov())));
        }
        let fi = &self.fi;
        let (mr, key) = if fi.caps.mr_mode & FI_MR_PROV_KEY != 0 {
            fi.register(addr, len.max(1), EXPOSED, 0)?
        } else {
            let mut r = Err(Error::Net("no key".into()));
            for _ in 0..4 {
                r = fi.register(addr, len.max(1), EXPOSED, random_key(fi.caps.mr_key_size)?);
                if r.is_ok() {
                    break;
                }
            }
            r?
        };
        let base = if fi.caps.mr_mode & FI_MR_VIRT_ADDR != 0 { addr as u64 } else { 0 };
        let id = match self.exposed.iter().position(Option::is_none) {
            Some(i) => i,
            None => {
                self.exposed.push(None);
                self.exposed.len() - 1
            }
        };
        self.exposed[id] = Some(mr);
        Ok(RmaRegion { id: id as u32, key: RmaKey { base, key, len: len as u64 } })
    }

    /// Ends the registration of an exposed region (peers' later operations on it fail at them).
    pub fn rma_withdraw(&mut self, id: u32) {
        if let Some(e) = self.exposed.get_mut(id as usize) {
            drop(e.take());
        }
    }

    /// True if `peer`'s address is known (`Netmod::connect` was called for it).
    pub fn connected(&self, peer: u32) -> bool {
        self.peers.get(peer as usize).is_some_and(|p| p.addr.is_some())
    }

    /// Makes this process a target of its own one-sided operations (its own address inserted
    /// into the address vector once): what lets every origin of a window's memory, this
    /// process included, update it through the provider's atomics, which are not atomic with
    /// the CPU's. An error if the provider refuses its own address, or is one whose operations
    /// to itself are known to fail: `udp;ofi_rxd` (libfabric 1.17's rxd crashes in
    /// `fi_cq_read` after an atomic to its own address, where it reports `FI_LOCAL_COMM`).
    pub fn rma_loopback(&mut self) -> Result<()> {
        let me = self.me as usize;
        if self.peers[me].addr.is_some() {
            return Ok(());
        }
        if self.fi.caps.prov.contains("ofi_rxd") {
            return Err(Error::Net(format!("ofi provider {}: no one-sided operations to itself", self.prov())));
        }
        let (_, _, name) = crate::parse_card(&self.card).ok_or_else(|| Error::Net("bad own business card".into()))?;
        let a = self.fi.insert(&name).map_err(|e| Error::Net(format!("own address: {e}")))?;
        self.peers[me].addr = Some(a);
        Ok(())
    }

    /// One-sided operations to `peer` posted and not completed.
    pub fn rma_pending(&self, peer: u32) -> u32 {
        self.rma_pending.get(peer as usize).copied().unwrap_or(0)
    }

    /// True once every operation to `peer` completed; an error if `peer` is dead (its
    /// operations may not have reached it).
    pub fn rma_flushed(&self, peer: u32) -> Result<bool> {
        match self.peers.get(peer as usize) {
            Some(p) if p.link == Link::Dead => Err(peer_dead(peer)),
            Some(_) => Ok(self.rma_pending(peer) == 0),
            None => Err(Error::Net(format!("rank {peer} is not a peer"))),
        }
    }

    /// `fi_write` of `len` bytes at `src` to `off` of `peer`'s region `to`, in chunks of the
    /// provider's largest message.
    ///
    /// # Safety
    /// `src` holds `len` bytes, unchanged until [`OfiNetmod::rma_pending`] of `peer` is 0.
    pub unsafe fn rma_write(&mut self, peer: u32, src: *const u8, len: usize, to: &RmaKey, off: u64) -> Result<()> {
        self.rma_check(peer, to, off, len as u64, self.rma_caps().write, "write")?;
        self.rma_chunks(peer, src as *mut u8, len, to, off, true)?;
        self.stats.rma_put_bytes += len as u64;
        Ok(())
    }

    /// `fi_read` of `len` bytes at `off` of `peer`'s region `from` into `dst`.
    ///
    /// # Safety
    /// `dst` holds `len` bytes, the provider's until [`OfiNetmod::rma_pending`] of `peer` is 0.
    pub unsafe fn rma_read(&mut self, peer: u32, dst: *mut u8, len: usize, from: &RmaKey, off: u64) -> Result<()> {
        self.rma_check(peer, from, off, len as u64, self.rma_caps().read, "read")?;
        self.rma_chunks(peer, dst, len, from, off, false)?;
        self.stats.rma_get_bytes += len as u64;
        Ok(())
    }

    fn rma_chunks(&mut self, peer: u32, buf: *mut u8, len: usize, key: &RmaKey, off: u64, write: bool) -> Result<()> {
        let mut done = 0usize;
        while done < len {
            let n = (len - done).min(self.chunk);
            // SAFETY: within the caller's `len` bytes.
            let local = unsafe { buf.add(done) };
            let reg = self.rma_local(local, n)?;
            let at = key.base.wrapping_add(off + done as u64);
            let what = if write { What::Write } else { What::Read };
            self.rma_post(Pending { peer, reg, what, local, count: n, at, key: key.key, ..Pending::NONE });
            done += n;
        }
        Ok(())
    }

    /// Atomic `a` at `off` of `peer`'s region `to`. Check [`OfiNetmod::rma_atomic_valid`]
    /// first.
    ///
    /// # Safety
    /// `a`'s buffers hold `a.count` elements (those its kind uses), valid until
    /// [`OfiNetmod::rma_pending`] of `peer` is 0.
    pub unsafe fn rma_atomic(&mut self, peer: u32, a: &Atomic, to: &RmaKey, off: u64) -> Result<()> {
        let bytes = (a.count * a.ty.size()) as u64;
        self.rma_check(peer, to, off, bytes, self.rma_atomic_valid(a.kind, a.op, a.ty), "atomic")?;
        let at = to.base.wrapping_add(off);
        let what = What::Atomic { kind: a.kind, op: a.op, ty: a.ty };
        let (local, compare, result, count) = (a.src as *mut u8, a.compare, a.result, a.count);
        self.rma_post(Pending { peer, what, local, compare, result, count, at, key: to.key, ..Pending::NONE });
        self.stats.rma_atomics += 1;
        Ok(())
    }

    /// Posts the operations that wait for room (at each poll).
    pub(super) fn rma_pump(&mut self) -> bool {
        let mut moved = false;
        while let Some(p) = self.rma_queue.pop_front() {
            match self.rma_try(p) {
                Ok(true) => moved = true,
                Ok(false) => {
                    self.rma_queue.push_front(p);
                    break;
                }
                Err(why) => {
                    self.rma_complete(None, p.peer, p.reg, Some(&why));
                    moved = true;
                }
            }
        }
        moved
    }

    /// Counts `p` pending and posts it, or queues it behind others (or while the provider has no
    /// room or no slot is free).
    fn rma_post(&mut self, p: Pending) {
        self.rma_pending[p.peer as usize] += 1;
        if self.rma_queue.is_empty() {
            match self.rma_try(p) {
                Ok(true) => return,
                Ok(false) => {}
                Err(why) => {
                    self.rma_complete(None, p.peer, p.reg, Some(&why));
                    return;
                }
            }
        }
        self.rma_queue.push_back(p);
    }

    /// Posts `p` with a slot's context: false if there is no room now.
    fn rma_try(&mut self, p: Pending) -> std::result::Result<bool, String> {
        if self.peers[p.peer as usize].link != Link::Up {
            return Err("the peer is gone".into());
        }
        let Some(addr) = self.peers[p.peer as usize].addr else { return Err("not connected".into()) };
        let Some(slot) = self.free_rma.pop() else { return Ok(false) };
        let desc = match p.reg {
            0 => std::ptr::null_mut(),
            r => self.mrs.handle(r).map_or(std::ptr::null_mut(), fabric::desc),
        };
        let ctx = self.ctx(slot);
        let ep = self.fi.ep.0;
        let (l, t) = (p.local as *mut c_void, p.at);
        loop {
            // SAFETY: the buffers are valid until the completion of `ctx` (the callers'
            // contracts); atomics need no descriptors (no FI_MR_LOCAL: see `rma_caps`).
            let rc = unsafe {
                match p.what {
                    What::Write => nm_write(ep, l, p.count, desc, addr, t, p.key, ctx, self.rma_flags),
                    What::Read => nm_rma_read(ep, l, p.count, desc, addr, t, p.key, ctx),
                    What::Atomic { kind, op, ty } => {
                        let (ty, op) = (ty as i32, op as i32);
                        let (c, r) = (p.compare as *const c_void, p.result as *mut c_void);
                        match kind {
                            AtomicKind::Update => {
                                nm_atomic(ep, l, p.count, addr, t, p.key, ty, op, ctx, self.rma_flags)
                            }
                            AtomicKind::Fetch => nm_fetch_atomic(ep, l, p.count, r, addr, t, p.key, ty, op, ctx),
                            AtomicKind::Compare => nm_compare_atomic(ep, l, p.count, c, r, addr, t, p.key, ty, op, ctx),
                        }
                    }
                }
            };
            if rc == 0 {
                self.ops[slot] = Op::Rma { peer: p.peer, reg: p.reg };
                return Ok(true);
            }
            if rc == -(FI_EBADFLAGS as isize) && self.rma_flags != 0 {
                tracing::info!(provider = %self.fi.caps.prov, "ofi: no FI_DELIVERY_COMPLETE: RMA writes complete on transmission");
                self.rma_flags = 0;
                continue;
            }
            self.free_rma.push(slot);
            if rc == -(FI_EAGAIN as isize) {
                return Ok(false);
            }
            return Err(fabric::strerror(rc as i64));
        }
    }

    fn rma_check(&self, peer: u32, key: &RmaKey, off: u64, n: u64, can: bool, what: &str) -> Result<()> {
        // This process itself once `rma_loopback` gave it its own address.
        if !(peer == self.me && self.peers[peer as usize].addr.is_some()) {
            self.peer_index(peer)?;
        }
        if !can {
            return Err(Error::Net(format!("ofi provider {}: no RMA {what} here", self.prov())));
        }
        if key.at(off, n).is_none() {
            return Err(Error::Net(format!("RMA {what} of {n} bytes at {off}: outside the region of {}", key.len)));
        }
        if self.peers[peer as usize].link != Link::Up {
            return Err(peer_dead(peer));
        }
        Ok(())
    }

    /// A local registration of `n` bytes at `p` where the provider needs one (`FI_MR_LOCAL`): its
    /// cache id, else 0.
    fn rma_local(&mut self, p: *const u8, n: usize) -> Result<u64> {
        if self.fi.caps.mr_mode & FI_MR_LOCAL == 0 {
            return Ok(0);
        }
        Ok(self.acquire(p, n as u64, false)?.id)
    }

    fn release_reg(&mut self, reg: u64) {
        if reg != 0 {
            self.mrs.release(reg);
        }
    }

    /// A one-sided operation's completion (`error`: its peer dies).
    pub(super) fn rma_complete(&mut self, slot: Option<usize>, peer: u32, reg: u64, error: Option<&str>) {
        if let Some(slot) = slot {
            self.free_rma.push(slot);
        }
        self.release_reg(reg);
        if let Some(n) = self.rma_pending.get_mut(peer as usize) {
            *n = n.saturating_sub(1);
        }
        if let Some(why) = error {
            self.died(peer, &format!("one-sided operation: {why}"));
        }
    }
}

/// The exposed regions' registrations (dropped before the libfabric objects).
pub(super) type Exposed = Vec<Option<Fid<fid_mr>>>;

/// What a one-sided operation does.
#[derive(Clone, Copy, Debug)]
enum What {
    Write,
    Read,
    Atomic { kind: AtomicKind, op: FiOp, ty: FiType },
}

/// A one-sided operation, posted or waiting for room (`rma_queue`): `count` bytes (elements for
/// atomics) at `local` to or from `at` under `key` at `peer`.
#[derive(Clone, Copy, Debug)]
pub(super) struct Pending {
    peer: u32,
    reg: u64,
    what: What,
    local: *mut u8,
    compare: *const u8,
    result: *mut u8,
    count: usize,
    at: u64,
    key: u64,
}

impl Pending {
    const NONE: Pending = Pending {
        peer: 0,
        reg: 0,
        what: What::Read,
        local: std::ptr::null_mut(),
        compare: std::ptr::null(),
        result: std::ptr::null_mut(),
        count: 0,
        at: 0,
        key: 0,
    };
}
