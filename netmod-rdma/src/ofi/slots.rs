//! Operation slots and the buffer slab: each operation posted to libfabric names one slot's
//! `fi_context2`, and a completion's context finds its slot back (checked: an address that is no
//! slot's is an error, never an index). Slots `0..nrx` are the receive buffers, `nrx..nrx + ntx`
//! the send buffers, both `BUF` bytes of the slab; the rest carry large-message operations.
//!
//! A receive buffer the provider refuses (`EAGAIN`) waits in `repost` for the next poll.

use std::ffi::c_void;
use std::ptr;

use nemesis_shm::Result;

use super::{BUF, OfiNetmod, Op};
use crate::fabric::{self, check};
use crate::sys::*;
use crate::tags;

impl OfiNetmod<'_> {
    pub(super) fn ctx(&mut self, slot: usize) -> *mut c_void {
        &mut self.ctx[slot] as *mut fi_context2 as *mut c_void
    }

    /// The slot of a completion's context, checked.
    pub(super) fn slot_of(&self, p: *mut c_void) -> Option<usize> {
        let base = self.ctx.as_ptr() as usize;
        let size = std::mem::size_of::<fi_context2>();
        let off = (p as usize).checked_sub(base)?;
        (off % size == 0 && off / size < self.ctx.len()).then_some(off / size)
    }

    pub(super) fn buf(&self, slot: usize) -> *mut u8 {
        debug_assert!(slot < self.nrx + self.ntx);
        // SAFETY: slot `slot` of the slab, `BUF` bytes inside its allocation.
        unsafe { self.slab.ptr.add(slot * BUF) }
    }

    pub(super) fn slab_desc(&self) -> *mut c_void {
        self.slab_mr.as_ref().map_or(ptr::null_mut(), fabric::desc)
    }

    /// Posts the receive buffers that wait for it (used, or refused with `EAGAIN` before).
    pub(super) fn post_again(&mut self) -> Result<()> {
        let mut list = std::mem::take(&mut self.repost);
        let mut r = Ok(());
        for k in 0..list.len() {
            if let Err(e) = self.post_rx(list[k]) {
                // Kept for a later attempt, with those not tried.
                self.repost.extend_from_slice(&list[k..]);
                r = Err(e);
                break;
            }
        }
        // The allocation is kept (`post_rx` lists refused buffers again in `repost`).
        list.clear();
        list.append(&mut self.repost);
        self.repost = list;
        r
    }

    /// Posts receive buffer `i` (again).
    pub(super) fn post_rx(&mut self, i: usize) -> Result<()> {
        let (buf, desc, ctx) = (self.buf(i), self.slab_desc(), self.ctx(i));
        // SAFETY: buffer `i` is ours and idle until its completion; its context is stable.
        let rc = unsafe { nm_trecv(self.fi.ep.0, buf as *mut c_void, BUF, desc, FI_ADDR_UNSPEC, tags::MSG, 0, ctx) };
        if rc == -(FI_EAGAIN as isize) {
            self.repost.push(i);
            return Ok(());
        }
        check(self.prov(), "fi_trecv", rc as i64)?;
        self.ops[i] = Op::Rx;
        Ok(())
    }
}
