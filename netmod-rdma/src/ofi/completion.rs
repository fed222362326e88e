//! The completion queue: `fi_cq_read` in batches of `CQ_BATCH`, each completion's context
//! mapped back to its slot, and the slot's operation finished: a receive buffer's fragment
//! arrives, a send buffer is free again, a large-message chunk counts towards its transfer. An
//! error completion makes the operation's peer dead, except on a posted receive buffer, whose
//! sender is not known: that one is counted and posted again.
//!
//! Invariant: a slot in flight goes back to its free list (or is posted again) only here, once
//! the provider has ended its operation (a cancelled one ends with an error completion).

use std::ffi::c_void;

use nemesis_lmt::{NetDone, Outcome};
use nemesis_shm::{Error, Result};

use super::{BUF, CQ_BATCH, OfiNetmod, Op};
use crate::fabric::{self, fi_error};
use crate::sys::*;

impl OfiNetmod<'_> {
    /// Reads the completion queue until it is empty. True if anything completed.
    pub(super) fn poll_cq(&mut self) -> Result<bool> {
        let mut any = false;
        loop {
            // SAFETY: `cq` holds CQ_BATCH entries of the queue's format (tagged).
            let n = unsafe { nm_cq_read(self.fi.cq.0, self.cq.as_mut_ptr() as *mut c_void, CQ_BATCH) };
            if n > 0 {
                any = true;
                for k in 0..n as usize {
                    let e = self.cq[k];
                    self.complete(e.op_context, e.len)?;
                }
                if (n as usize) < CQ_BATCH {
                    return Ok(any);
                }
            } else if n == -(FI_EAGAIN as isize) {
                return Ok(any);
            } else if n == -(FI_EAVAIL as isize) {
                any = true;
                self.complete_error()?;
            } else {
                return Err(fi_error(self.prov(), "fi_cq_read", n as i64));
            }
        }
    }

    fn complete(&mut self, ctx: *mut c_void, len: usize) -> Result<()> {
        let Some(slot) = self.slot_of(ctx) else {
            return Err(Error::Net(format!("ofi provider {}: a completion for an unknown context", self.prov())));
        };
        let op = std::mem::replace(&mut self.ops[slot], Op::Idle);
        match op {
            Op::Idle => {}
            Op::Rx => self.arrived(slot, len.min(BUF))?,
            Op::Tx { .. } => self.free_tx.push(slot),
            Op::Read { peer, id, bytes } | Op::DataRx { peer, id, bytes } => {
                self.free_lmt.push(slot);
                if let Some(k) = self.recvs.iter().position(|r| r.peer == peer && r.id == id) {
                    let r = &mut self.recvs[k];
                    r.inflight -= 1;
                    r.got += bytes;
                    if r.got == r.bytes && r.failed.is_none() {
                        let r = self.recvs.swap_remove(k);
                        if let Some(g) = r.reg {
                            self.mrs.release(g.id);
                        }
                        if r.remote.is_some() {
                            self.stats.read_bytes += r.bytes;
                        }
                        self.done.push(NetDone { peer, id, send: false, outcome: Outcome::Moved { bytes: r.bytes } });
                    }
                }
                self.reap();
            }
            Op::DataTx { peer, id, bytes } => {
                self.free_lmt.push(slot);
                if let Some(k) = self.sends.iter().position(|s| s.peer == peer && s.id == id) {
                    let s = &mut self.sends[k];
                    s.inflight -= 1;
                    if let Some((total, posted, acked)) = s.stream.as_mut() {
                        *acked += bytes;
                        if *acked == *total && *posted == *total && s.failed.is_none() {
                            let total = *total;
                            let s = self.sends.swap_remove(k);
                            if let Some(r) = s.reg {
                                self.mrs.release(r.id);
                            }
                            self.stats.streamed_bytes += total;
                            let outcome = Outcome::Moved { bytes: total };
                            self.done.push(NetDone { peer, id, send: true, outcome });
                        }
                    }
                }
                self.reap();
            }
            Op::Rma { peer, reg } => self.rma_complete(Some(slot), peer, reg, None),
        }
        Ok(())
    }

    /// An error completion: the operation's peer is dead (a posted receive buffer's error is
    /// logged and the buffer posted again: the sender is not known).
    fn complete_error(&mut self) -> Result<()> {
        let mut e = fi_cq_err_entry::default();
        // SAFETY: `e` receives one error entry.
        let n = unsafe { nm_cq_readerr(self.fi.cq.0, &mut e, 0) };
        if n != 1 {
            return if n == -(FI_EAGAIN as isize) {
                Ok(())
            } else {
                Err(fi_error(self.prov(), "fi_cq_readerr", n as i64))
            };
        }
        let mut text = [0 as std::ffi::c_char; 256];
        // SAFETY: the entry just read and a buffer of its length; the result is NUL-terminated.
        let p = unsafe { nm_cq_strerror(self.fi.cq.0, e.prov_errno, e.err_data, text.as_mut_ptr(), text.len()) };
        let why = format!("{} ({})", fabric::c_str(p), fabric::strerror(i64::from(e.err)));
        let Some(slot) = self.slot_of(e.op_context) else {
            return Err(Error::Net(format!("ofi provider {}: an error for an unknown context: {why}", self.prov())));
        };
        let cancelled = e.err == FI_ECANCELED as i32;
        match self.ops[slot] {
            Op::Idle => {}
            Op::Rx => {
                self.ops[slot] = Op::Idle;
                if !cancelled {
                    // Anyone may send what fails a receive (too long a message): counted, logged
                    // at the 1st, 2nd, 4th... time.
                    self.stats.rx_errors += 1;
                    if self.stats.rx_errors.is_power_of_two() {
                        let n = self.stats.rx_errors;
                        tracing::warn!(provider = %self.fi.caps.prov, %why, failed = n, "a receive failed");
                    }
                }
                if !self.finalized {
                    self.post_rx(slot)?;
                }
            }
            Op::Tx { peer } => {
                self.ops[slot] = Op::Idle;
                self.free_tx.push(slot);
                self.died(peer, &format!("send: {why}"));
            }
            Op::Read { peer, id, .. } | Op::DataRx { peer, id, .. } => {
                self.ops[slot] = Op::Idle;
                self.free_lmt.push(slot);
                if let Some(r) = self.recvs.iter_mut().find(|r| r.peer == peer && r.id == id) {
                    r.inflight -= 1;
                }
                if !cancelled {
                    self.died(peer, &format!("large-message receive: {why}"));
                }
                self.reap();
            }
            Op::DataTx { peer, id, .. } => {
                self.ops[slot] = Op::Idle;
                self.free_lmt.push(slot);
                if let Some(s) = self.sends.iter_mut().find(|s| s.peer == peer && s.id == id) {
                    s.inflight -= 1;
                }
                self.died(peer, &format!("large-message send: {why}"));
                self.reap();
            }
            Op::Rma { peer, reg } => {
                self.ops[slot] = Op::Idle;
                self.rma_complete(Some(slot), peer, reg, (!cancelled).then_some(why.as_str()));
            }
        }
        Ok(())
    }
}
