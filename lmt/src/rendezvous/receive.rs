//! The receiver's side: a matched RTS ([`Lmt::pre_recv`]) becomes single-copy reads
//! (`progress_cma`, one `process_vm_readv` per sending process and pass, through the CMA batch)
//! or a ring of our pool (CTS, then `drain`); a refused read moves the rest to a ring (COOKIE).
//! The buffer is the caller's again when the outcome is reported: ring freed, or DONE sent.

use std::io;
use std::ptr::NonNull;

use nemesis_shm::Pieces;

use super::config::receiver_share;
use super::{CMA_MIN_PIECE, Cma, Lmt, Outcome, Policy, Rings, Step, Token};
use crate::cma::{Copier, Local};
use crate::error::Error;
use crate::wire::{Backend, Control, Rts};

/// Where a receive stands.
#[derive(Clone, Copy, Debug)]
pub(super) enum RecvState {
    /// Reading `offset..end` of the sender's buffer directly (`end` is `bytes`, or where the
    /// sender's part starts after a HELP).
    Cma { pid: u32, addr: u64, offset: u64, end: u64 },
    /// Waiting for a free ring of our pool, to move the rest from `offset`.
    WaitRing { offset: u64 },
    /// Copying out of our ring.
    Ring { ring: u16, offset: u64, chunk: u64 },
}

/// A receive in flight.
#[derive(Debug)]
pub(super) struct RecvX {
    /// The sender's transfer id.
    pub(super) id: u32,
    /// The sender's local rank.
    pub(super) peer: u16,
    pub(super) token: Token,
    /// The receive buffer (at least `bytes` long, ours to write until the outcome is taken).
    pub(super) dst: *mut u8,
    /// The receive buffer is in pieces (`dst` unused): data is scattered as it is copied.
    pub(super) pieces: Option<NonNull<dyn Pieces>>,
    /// Bytes to move: the message's length, or the buffer's if shorter.
    pub(super) bytes: u64,
    pub(super) state: RecvState,
    /// It began with single-copy reads.
    pub(super) began_cma: bool,
    /// The sender's part of a split single-copy transfer.
    pub(super) help: Help,
    /// Our reads were refused while the sender was writing its part: once it is done (HELPED),
    /// the rest goes through a ring from this offset.
    pub(super) resume: Option<u64>,
    /// The transfer failed while the sender was writing its part: it ends with this error once
    /// the sender is done (HELPED) or dead, never while the sender may still write into the
    /// buffer.
    pub(super) error: Option<Error>,
}

/// The part of a split single-copy transfer the sender writes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Help {
    /// None (not split, or the sender's part is written).
    No,
    /// Bytes `from..to` asked of the sender by HELP, HELPED not yet received.
    Waiting { from: u64, to: u64 },
    /// The sender wrote less than asked: we read `from..to` after our own part.
    Tail { from: u64, to: u64 },
}

impl<C: Copier> Lmt<C> {
    /// Receiver: a receive of `cap` bytes at `dst` matched `rts` from local rank `peer`. Chooses
    /// the backend and starts; the outcome comes out of [`take_done`](Self::take_done).
    ///
    /// # Safety
    /// The `cap` bytes at `dst` must stay valid for writes, and not be accessed otherwise, until
    /// this transfer's outcome is taken.
    pub unsafe fn pre_recv<R: Rings + ?Sized>(
        &mut self,
        peer: u16,
        token: Token,
        rts: &Rts,
        dst: *mut u8,
        cap: usize,
        rings: &R,
    ) {
        self.add_recv(peer, token, rts, dst, None, cap, rings);
    }

    /// Receiver: as [`pre_recv`](Self::pre_recv) into `pieces` (their length is the capacity).
    /// A single copy reads into the pieces (one iovec each) when they are long enough on
    /// average ([`CMA_MIN_PIECE`]) and is never split with the sender; otherwise the data comes
    /// through a ring, scattered as it is copied out.
    ///
    /// # Safety
    /// `pieces` must stay valid, its memory writable and not accessed otherwise, until this
    /// transfer's outcome is taken.
    pub unsafe fn pre_recv_pieces<R: Rings + ?Sized>(
        &mut self,
        peer: u16,
        token: Token,
        rts: &Rts,
        pieces: NonNull<dyn Pieces>,
        rings: &R,
    ) {
        // SAFETY: the caller's contract.
        let cap = unsafe { pieces.as_ref() }.len();
        self.add_recv(peer, token, rts, std::ptr::null_mut(), Some(pieces), cap, rings);
    }

    #[allow(clippy::too_many_arguments)]
    pub(super) fn add_recv<R: Rings + ?Sized>(
        &mut self,
        peer: u16,
        token: Token,
        rts: &Rts,
        dst: *mut u8,
        pieces: Option<NonNull<dyn Pieces>>,
        cap: usize,
        rings: &R,
    ) {
        let refuse = |lmt: &mut Lmt<C>, e: Error| {
            // Refused: nothing is read; the sender is released (DONE of nothing), the receive
            // fails with the reason.
            lmt.out.push((peer, Control::Done { id: rts.id, bytes: 0 }));
            lmt.stats.failed += 1;
            lmt.done.push((token, Outcome::Failed(e)));
        };
        let max = self.cfg.max_len.min(crate::wire::LEN_MAX);
        if rts.len > max {
            return refuse(self, Error::TooLong { len: rts.len, max });
        }
        let bytes = rts.len.min(cap as u64);
        if bytes == 0 {
            self.out.push((peer, Control::Done { id: rts.id, bytes: 0 }));
            self.done.push((token, Outcome::Moved { bytes: 0 }));
            return;
        }
        let mut pull = rts.backend == Backend::Cma && self.cma != Cma::Refused && self.cfg.policy != Policy::Ring;
        // Single copies name the sender's registered process, checked (a slot naming us, a dead
        // or reused pid: rings instead), and stay inside the buffer it announced (the kernel
        // checks that range against that process's own memory).
        let registered = if pull { self.copy_pid(peer, rings).ok().flatten() } else { None };
        if pull {
            let own = peer == self.me;
            let forged = match registered {
                Some(p) if p != rts.pid => Some(Error::Forged { what: "RTS pid", value: u64::from(rts.pid) }),
                _ if rts.addr.checked_add(rts.len).is_none_or(|end| end > crate::wire::LEN_MAX) => {
                    Some(Error::Forged { what: "RTS address", value: rts.addr })
                }
                // From ourselves, only what we are sending ourselves.
                _ if own && !self.sends.iter().any(|s| s.own_rts(self.me, rts)) => {
                    Some(Error::Forged { what: "RTS of this rank", value: rts.addr })
                }
                _ => None,
            };
            if let Some(e) = forged {
                return refuse(self, e);
            }
            pull = registered.is_some();
        }
        // Pieces are read into by a single copy only when they are long enough on average.
        let long_pieces = pieces.is_none_or(|p| {
            // SAFETY: `pieces` is valid until the outcome is taken (the caller's contract).
            unsafe { p.as_ref() }.count() as u64 * CMA_MIN_PIECE <= bytes
        });
        pull &= long_pieces;
        let mut help = Help::No;
        let state = if pull {
            let mut end = bytes;
            // The sender writes its part into one contiguous range: not into pieces, nor from this
            // rank (one thread does both sides: nothing to share).
            if bytes >= self.peer(peer).split_min && pieces.is_none() && peer != self.me {
                // Both cores copy: we read the first half, the sender writes the second (from a
                // page boundary of the message).
                let from = (bytes * receiver_share(bytes) / 16) & !4095;
                if from > 0 {
                    end = from;
                    help = Help::Waiting { from, to: bytes };
                    let dst = (dst as u64).wrapping_add(from);
                    let msg =
                        Control::Help { id: rts.id, offset: from, bytes: bytes - from, dst, pid: self.io.own_pid() };
                    self.out.push((peer, msg));
                    self.stats.split += 1;
                }
            }
            RecvState::Cma { pid: registered.unwrap_or(rts.pid), addr: rts.addr, offset: 0, end }
        } else {
            RecvState::WaitRing { offset: 0 }
        };
        self.recvs.push(RecvX {
            id: rts.id,
            peer,
            token,
            dst,
            pieces,
            bytes,
            state,
            began_cma: pull,
            help,
            resume: None,
            error: None,
        });
        let i = self.recvs.len() - 1;
        self.start_recv(i, rings);
    }

    /// Receiver: starts (or resumes) moving transfer `i`: assigns a ring and sends CTS or COOKIE.
    pub(super) fn start_recv<R: Rings + ?Sized>(&mut self, i: usize, rings: &R) {
        let RecvState::WaitRing { offset } = self.recvs[i].state else { return };
        let Some(ring) = self.ring_busy.iter().position(|b| !b) else { return };
        let Some(r) = rings.ring(self.me, ring as u16) else { return };
        self.ring_busy[ring] = true;
        let epoch = r.assign();
        let x = &mut self.recvs[i];
        let ring = ring as u16;
        let msg = if offset == 0 {
            Control::Cts { id: x.id, ring, epoch, bytes: x.bytes }
        } else {
            Control::Cookie { id: x.id, offset, ring, epoch, bytes: x.bytes }
        };
        x.state = RecvState::Ring { ring, offset, chunk: 0 };
        self.out.push((x.peer, msg));
    }

    pub(super) fn progress_recv<R: Rings + ?Sized>(&mut self, i: usize, rings: &R) -> Step {
        match self.recvs[i].state {
            RecvState::WaitRing { .. } => {
                self.start_recv(i, rings);
                Step::Same(matches!(self.recvs[i].state, RecvState::Ring { .. }))
            }
            // Served by `progress_cma`, several transfers per system call.
            RecvState::Cma { .. } => Step::Same(false),
            RecvState::Ring { ring, offset, chunk } => self.drain(i, ring, offset, chunk, rings),
        }
    }

    /// The single-copy reads of one pass: the transfers reading from one process are served by one
    /// `process_vm_readv` with an iovec per transfer (at most `cma_chunk` bytes and
    /// [`IOV_MAX`](crate::cma::IOV_MAX) transfers per call), so a window of messages costs one
    /// system call, not one each. On refusal every transfer of the call falls back to a ring
    /// (COOKIE).
    pub(super) fn progress_cma<R: Rings + ?Sized>(&mut self, rings: &R) -> bool {
        let mut order = std::mem::take(&mut self.scratch_order);
        order.clear();
        for (i, x) in self.recvs.iter().enumerate() {
            if let RecvState::Cma { pid, offset, end, .. } = x.state
                && offset < end
            {
                order.push((pid, i));
            }
        }
        if order.is_empty() {
            self.scratch_order = order;
            return false;
        }
        order.sort_unstable();
        let mut ends = std::mem::take(&mut self.scratch_ends);
        ends.clear();
        let mut moved = false;
        for group in order.chunk_by(|a, b| a.0 == b.0) {
            moved |= self.pull_group(group, &mut ends, rings);
        }
        // Finished and failed transfers leave the list, highest index first (`swap_remove` only
        // moves entries from above).
        ends.sort_unstable_by_key(|e| std::cmp::Reverse(e.0));
        for (i, err) in ends.drain(..) {
            match err {
                None => drop(self.own_part_read(i, rings)),
                Some(e) => drop(self.fail_recv(i, e, rings)),
            }
        }
        self.scratch_order = order;
        self.scratch_ends = ends;
        moved
    }

    /// One `process_vm_readv` for the transfers of `group` (all reading from one process).
    /// Transfers that end are added to `ends` (with their error, if any).
    pub(super) fn pull_group<R: Rings + ?Sized>(
        &mut self,
        group: &[(u32, usize)],
        ends: &mut Vec<(usize, Option<Error>)>,
        rings: &R,
    ) -> bool {
        let pid = group[0].0;
        // Each range is `offset..end` of the receive buffer (`end <= bytes <= cap`).
        let ranges = group.iter().map(|&(_, i)| match self.recvs[i].state {
            RecvState::Cma { addr, offset, end, .. } => {
                let x = &self.recvs[i];
                let l = match x.pieces {
                    Some(p) => Local::Pieces(p, offset),
                    None => Local::Addr(x.dst as usize + offset as usize),
                };
                (l, addr.wrapping_add(offset), end - offset)
            }
            _ => (Local::Addr(0), 0, 0),
        });
        let budget = self.cfg.cma_chunk as u64;
        // SAFETY: the pieces of a receive are valid until its outcome is taken (its contract).
        unsafe { self.batch.gather(budget, ranges) };
        let members = &group[..self.batch.took().len()];
        // SAFETY: each local iovec is a range of a receive buffer not yet written (`offset..offset
        // + n` of `bytes <= cap`), valid for writes and untouched otherwise until the transfer's
        // outcome is taken (pre_recv's contract).
        let read = unsafe { self.io.read(pid, &self.batch) };
        // Still running after the read (or found so within `ALIVE_RECHECK`): the pid named the
        // sender throughout (a pid is reused only after its process exited and was reaped, and
        // the pid allocator came round). Gone: what was read may be another process's.
        let read = match read {
            Ok(_) if !self.copy_alive(self.recvs[members[0].1].peer, pid, false) => {
                Err(io::Error::from_raw_os_error(libc::ESRCH))
            }
            r => r,
        };
        match read {
            Ok(0) => {
                ends.push((members[0].1, Some(Error::Cma("read nothing".into()))));
                false
            }
            Ok(mut got) => {
                self.cma = Cma::Usable;
                for (k, &(_, i)) in members.iter().enumerate() {
                    let want = self.batch.took()[k] as usize;
                    let took = got.min(want);
                    got -= took;
                    let x = &mut self.recvs[i];
                    if let RecvState::Cma { offset, end, .. } = &mut x.state {
                        *offset += took as u64;
                        if *offset == *end {
                            ends.push((i, None));
                        }
                    }
                    if took < want {
                        // The kernel stopped here (a fault): the next pass starts with it.
                        break;
                    }
                }
                true
            }
            Err(e) if matches!(e.raw_os_error(), Some(libc::EPERM | libc::ENOSYS | libc::EACCES)) => {
                if self.cma != Cma::Refused {
                    tracing::warn!(error = %e, "single-copy reads (CMA) are not allowed here: large messages go through shared-copy rings");
                }
                self.cma = Cma::Refused;
                for &(_, i) in members {
                    let x = &mut self.recvs[i];
                    if let RecvState::Cma { pid, addr, offset, .. } = x.state {
                        if matches!(x.help, Help::Waiting { .. }) {
                            // The sender may be writing into the buffer: wait for HELPED.
                            x.resume = Some(offset);
                            x.state = RecvState::Cma { pid, addr, offset, end: offset };
                        } else {
                            x.state = RecvState::WaitRing { offset };
                            self.start_recv(i, rings);
                        }
                    }
                }
                true
            }
            Err(e) if e.raw_os_error() == Some(libc::ESRCH) => {
                ends.extend(members.iter().map(|&(_, i)| (i, Some(Error::PeerDied))));
                true
            }
            // A bad address (EFAULT) or another error: the first transfer of the call is the one
            // the kernel could not read (a partial read would have returned a count).
            Err(e) => {
                ends.push((members[0].1, Some(Error::Cma(cma_error(&e)))));
                true
            }
        }
    }

    /// Copies the next chunks out of our ring.
    pub(super) fn drain<R: Rings + ?Sized>(
        &mut self,
        i: usize,
        ring: u16,
        mut offset: u64,
        mut chunk: u64,
        rings: &R,
    ) -> Step {
        let Some(r) = rings.ring(self.me, ring) else {
            return self.fail_recv(i, Error::Corrupt { what: "ring index", value: u64::from(ring) }, rings);
        };
        let slot = self.peer(self.recvs[i].peer).chunk(r.slot_size() as u64);
        let mut moved = false;
        for _ in 0..self.cfg.chunks_per_pass {
            let x = &self.recvs[i];
            if offset == x.bytes {
                break;
            }
            let n = slot.min(x.bytes - offset) as usize;
            let took = match x.pieces {
                // SAFETY: the pieces are valid and writable until the outcome is taken
                // (`pre_recv_pieces`'s contract); `scatter` reads the `n` bytes of the chunk.
                Some(p) => unsafe { r.try_take_with(chunk, n, |src| p.as_ref().scatter(offset as usize, src, n)) },
                None => {
                    // SAFETY: the receive buffer holds `cap >= bytes` bytes and `offset + n <= bytes`.
                    let dst = unsafe { std::slice::from_raw_parts_mut(x.dst.add(offset as usize), n) };
                    r.try_take(chunk, dst)
                }
            };
            match took {
                Ok(true) => {
                    offset += n as u64;
                    chunk += 1;
                    moved = true;
                }
                Ok(false) => break,
                Err(e) => return self.fail_recv(i, e, rings),
            }
        }
        self.recvs[i].state = RecvState::Ring { ring, offset, chunk };
        if offset == self.recvs[i].bytes {
            return self.post_recv(i, rings);
        }
        if moved {
            // Part of the message is in the buffer, not all.
            nemesis_shm::failpoint!("rendezvous-recv-mid-{}", self.recvs[i].peer);
        }
        Step::Same(moved)
    }

    /// Receiver: the transfer is over: frees the ring, or sends DONE after a single-copy read.
    pub(super) fn post_recv<R: Rings + ?Sized>(&mut self, i: usize, rings: &R) -> Step {
        let x = self.recvs.swap_remove(i);
        match x.state {
            RecvState::Ring { ring, .. } => {
                self.free_ring(ring, rings, false);
                if x.began_cma { self.stats.fallback += 1 } else { self.stats.ring += 1 }
            }
            _ => {
                self.out.push((x.peer, Control::Done { id: x.id, bytes: x.bytes }));
                self.stats.cma += 1;
            }
        }
        self.done.push((x.token, Outcome::Moved { bytes: x.bytes }));
        self.serve_waiting(rings);
        Step::Removed
    }

    pub(super) fn fail_recv<R: Rings + ?Sized>(&mut self, i: usize, e: Error, rings: &R) -> Step {
        let x = &mut self.recvs[i];
        if matches!(x.help, Help::Waiting { .. }) && e != Error::PeerDied {
            // The sender may be writing its part into the buffer: end only after its HELPED (or
            // its death), so that the buffer is the caller's again only when nobody writes.
            if let RecvState::Cma { pid, addr, offset, .. } = x.state {
                x.state = RecvState::Cma { pid, addr, offset, end: offset };
            }
            x.error = Some(e);
            return Step::Same(true);
        }
        let x = self.recvs.swap_remove(i);
        if let RecvState::Ring { ring, .. } = x.state {
            self.free_ring(ring, rings, true);
        }
        self.stats.failed += 1;
        self.done.push((x.token, Outcome::Failed(e)));
        self.serve_waiting(rings);
        Step::Removed
    }

    pub(super) fn free_ring<R: Rings + ?Sized>(&mut self, ring: u16, rings: &R, reset: bool) {
        if reset && let Some(r) = rings.ring(self.me, ring) {
            r.reset();
        }
        if let Some(b) = self.ring_busy.get_mut(usize::from(ring)) {
            *b = false;
        }
    }

    /// Gives freed rings to transfers waiting for one.
    pub(super) fn serve_waiting<R: Rings + ?Sized>(&mut self, rings: &R) {
        for i in 0..self.recvs.len() {
            if matches!(self.recvs[i].state, RecvState::WaitRing { .. }) {
                self.start_recv(i, rings);
            }
        }
    }
}

fn cma_error(e: &io::Error) -> String {
    e.to_string()
}
