//! Eager fragments, out and in. Out: a fragment of at most `inject` bytes goes with
//! `fi_tinject` from the stack, a larger one from a send buffer; one the provider has no room for
//! waits in its peer's queue, as does every later one to that peer. In: a completed receive
//! buffer is checked and put in its sender's order by [`crate::frag::Rx`] (refused: posted again
//! at once), then drained into cells.
//!
//! Invariants: each peer's fragments carry consecutive sequence numbers (`wire_header`, with the
//! count of wraps under the MAC) and reach the provider in that order; a drained buffer is posted
//! again at the next poll, not between its arrival and its receiver.

use std::ffi::c_void;
use std::ptr;

use nemesis_shm::netmod::Inbox;
use nemesis_shm::{Error, MsgHeader, Result};

use super::{BUF, Link, OfiNetmod, Op, Queued};
use crate::fabric;
use crate::frag::Ended;
use crate::sys::*;
use crate::tags;

impl<'n> OfiNetmod<'n> {
    /// Sends one wire fragment (`bytes`: header, room and data) to `rank`, or queues it behind
    /// what waits. `Err` only if the peer is dead.
    pub(super) fn send_frag(&mut self, rank: u32, bytes: &[u8]) -> Result<()> {
        if !self.peers[rank as usize].out.is_empty() || !self.try_send(rank, bytes)? {
            self.peers[rank as usize].out.push_back(Queued { bytes: bytes.to_vec() });
            self.queued += 1;
            self.stats.deferred += 1;
        }
        Ok(())
    }

    /// Hands a fragment to the provider: true if taken, false if it has no room now.
    fn try_send(&mut self, rank: u32, bytes: &[u8]) -> Result<bool> {
        let Some(addr) = self.peers[rank as usize].addr else {
            return Err(Error::Net(format!("no business card for rank {rank}")));
        };
        if bytes.len() <= self.inject {
            // SAFETY: `bytes` is read before the call returns (inject semantics).
            let rc = unsafe { nm_tinject(self.fi.ep.0, bytes.as_ptr() as *const c_void, bytes.len(), addr, tags::MSG) };
            return match rc {
                0 => {
                    self.stats.injected += 1;
                    Ok(true)
                }
                rc if rc == -(FI_EAGAIN as isize) => Ok(false),
                rc => Err(self.died(rank, &format!("fi_tinject: {}", fabric::strerror(rc as i64)))),
            };
        }
        let Some(slot) = self.free_tx.pop() else { return Ok(false) };
        let buf = self.buf(slot);
        // SAFETY: send buffer `slot` is idle (on the free list) and holds `BUF >= bytes.len()`
        // bytes.
        unsafe { ptr::copy_nonoverlapping(bytes.as_ptr(), buf, bytes.len()) };
        let (desc, ctx) = (self.slab_desc(), self.ctx(slot));
        // SAFETY: the buffer stays untouched until the completion of `ctx`'s operation.
        let rc = unsafe { nm_tsend(self.fi.ep.0, buf as *const c_void, bytes.len(), desc, addr, tags::MSG, ctx) };
        match rc {
            0 => {
                self.ops[slot] = Op::Tx { peer: rank };
                self.stats.buffered += 1;
                Ok(true)
            }
            rc if rc == -(FI_EAGAIN as isize) => {
                self.free_tx.push(slot);
                Ok(false)
            }
            rc => {
                self.free_tx.push(slot);
                Err(self.died(rank, &format!("fi_tsend: {}", fabric::strerror(rc as i64))))
            }
        }
    }

    /// Sends what waits for each peer, in order, as the provider takes it.
    pub(super) fn flush(&mut self) -> bool {
        let mut moved = false;
        for rank in 0..self.size {
            while let Some(q) = self.peers[rank as usize].out.pop_front() {
                self.queued -= 1;
                match self.try_send(rank, &q.bytes) {
                    Ok(true) => moved = true,
                    Ok(false) => {
                        self.peers[rank as usize].out.push_front(q);
                        self.queued += 1;
                        break;
                    }
                    Err(_) => break,
                }
            }
        }
        moved
    }

    /// The wire header of fragment `frag` of a message `h` to `rank`, and the wraps of its
    /// sequence number.
    pub(super) fn wire_header(&mut self, rank: u32, h: &MsgHeader, frag: u16) -> (MsgHeader, u32) {
        let p = &mut self.peers[rank as usize];
        let (seq, wraps) = (p.tx_seq, p.tx_wraps);
        p.tx_seq = p.tx_seq.wrapping_add(1);
        if p.tx_seq == 0 {
            p.tx_wraps = p.tx_wraps.wrapping_add(1);
        }
        (MsgHeader { seq, frag, ..*h }, wraps)
    }

    /// Receive buffer `i` holds a fragment of `len` bytes: checked, then in its sender's order
    /// or parked; a refused one (counted) is posted again at once.
    pub(super) fn arrived(&mut self, i: usize, len: usize) -> Result<()> {
        // SAFETY: buffer `i` holds `len` received bytes, ours until posted again.
        let bytes = unsafe { std::slice::from_raw_parts(self.buf(i), len) };
        if self.rx.arrived(i, bytes).is_err() {
            return self.post_rx(i);
        }
        Ok(())
    }

    /// Moves the fragments that wait, peer by peer, into cells. True if any moved.
    pub(super) fn drain(&mut self, inbox: &mut dyn Inbox<'n>) -> Result<bool> {
        let slab = self.slab.ptr;
        let mut ended = Vec::new();
        // Used buffers are posted again at the start of the next poll: not between this arrival
        // and its receiver.
        let moved = self.rx.drain(
            // SAFETY: a buffer the provider completed with `len` bytes, ours until posted again.
            |i, len| unsafe { std::slice::from_raw_parts(slab.add(i * BUF), len) },
            &mut self.spare,
            inbox,
            &mut self.repost,
            &mut ended,
        );
        for e in ended {
            match e {
                Ended::Goodbye(rank) => {
                    if self.peers[rank as usize].link == Link::Up {
                        self.peers[rank as usize].link = Link::Bye;
                    }
                    self.hb.unwatch(rank);
                }
                Ended::Broken(rank, why) => {
                    self.died(rank, &why);
                }
            }
        }
        Ok(moved)
    }
}
