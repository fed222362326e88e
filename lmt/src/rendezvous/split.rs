//! A single copy shared by both cores: from `split_min` bytes the receiver reads the first part
//! of the sender's buffer while the sender, asked by HELP, writes the rest into the receive
//! buffer (`process_vm_writev`, through the CMA batch), then answers HELPED with what it wrote;
//! the receiver reads whatever the sender did not write. The range a HELP names is checked
//! against the sender's message and the receiver's registered process before anything is
//! written.

use super::receive::{Help, RecvState};
use super::send::SendState;
use super::{Lmt, Rings, Step};
use crate::cma::{Copier, Local};
use crate::error::{Error, Result};
use crate::wire::Control;

impl<C: Copier> Lmt<C> {
    /// Sender, on HELP: checks the range and starts writing it into the receiver's buffer, in
    /// the receiver's registered process (`registered`, checked by `copy_pid`) only. A HELP
    /// naming another process, a destination range that wraps, or a receiver whose process is
    /// refused is refused: nothing is written, HELPED of nothing tells the receiver to read the
    /// whole range itself, and the error is returned (the transfer goes on and completes).
    pub(super) fn start_help(
        &mut self,
        i: usize,
        offset: u64,
        bytes: u64,
        dst: u64,
        pid: u32,
        registered: Result<Option<u32>>,
    ) -> Result<()> {
        let x = &self.sends[i];
        let end = offset.checked_add(bytes).filter(|&e| e <= x.len);
        let Some(end) = end.filter(|_| matches!(x.state, SendState::AwaitReply) && x.pieces.is_none()) else {
            return self.fail_send(i, Error::Corrupt { what: "HELP range", value: offset });
        };
        let (registered, refused) = match registered {
            Ok(r) => (r, None),
            Err(e) => (None, Some(e)),
        };
        let refused = refused.or(match registered {
            Some(p) if p != pid => Some(Error::Forged { what: "HELP pid", value: u64::from(pid) }),
            _ if dst.checked_add(bytes).is_none() => Some(Error::Forged { what: "HELP destination", value: dst }),
            _ => None,
        });
        match (registered, refused) {
            (Some(pid), None) => {
                // The receiver reads its part from our buffer; we are to write the rest into its.
                nemesis_shm::failpoint!("rendezvous-help-{}", x.peer);
                self.sends[i].state = SendState::Help { pid, dst, offset, at: offset, end };
                Ok(())
            }
            (_, refused) => {
                self.out.push((x.peer, Control::Helped { id: x.id, bytes: 0 }));
                refused.map_or(Ok(()), Err)
            }
        }
    }

    /// Receiver, on HELPED: the sender wrote `bytes` of its part; we read what it did not.
    pub(super) fn helped<R: Rings + ?Sized>(&mut self, i: usize, bytes: u64, rings: &R) -> Result<()> {
        let x = &mut self.recvs[i];
        let Help::Waiting { from, to } = x.help else {
            self.fail_recv(i, Error::Corrupt { what: "HELPED without HELP", value: bytes }, rings);
            return Err(Error::Corrupt { what: "HELPED without HELP", value: bytes });
        };
        if bytes > to - from {
            // The sender says it is done: nothing writes into the buffer any more.
            x.help = Help::No;
            self.fail_recv(i, Error::Corrupt { what: "HELPED byte count", value: bytes }, rings);
            return Err(Error::Corrupt { what: "HELPED byte count", value: bytes });
        }
        x.help = if bytes == to - from { Help::No } else { Help::Tail { from: from + bytes, to } };
        if let RecvState::Cma { offset, end, .. } = x.state
            && offset == end
        {
            self.own_part_read(i, rings);
        }
        Ok(())
    }

    /// Receiver: our part of a single-copy transfer is read: the transfer is over, or goes on
    /// with what the sender left (a tail), or waits for HELPED.
    pub(super) fn own_part_read<R: Rings + ?Sized>(&mut self, i: usize, rings: &R) -> Step {
        let x = &mut self.recvs[i];
        if matches!(x.help, Help::Waiting { .. }) {
            // Our part is in the buffer; the sender writes the rest.
            nemesis_shm::failpoint!("rendezvous-recv-half-{}", x.peer);
            return Step::Same(false);
        }
        if let Some(e) = x.error.take() {
            return self.fail_recv(i, e, rings);
        }
        if let Some(offset) = x.resume
            && !matches!(x.help, Help::Waiting { .. })
        {
            // Whatever the sender wrote is moved again through the ring (same bytes): simpler
            // than a second hole, and only after a refusal.
            (x.resume, x.help, x.state) = (None, Help::No, RecvState::WaitRing { offset });
            self.start_recv(i, rings);
            return Step::Same(true);
        }
        match (x.help, &mut x.state) {
            (Help::No, _) => self.post_recv(i, rings),
            (Help::Tail { from, to }, RecvState::Cma { offset, end, .. }) => {
                (*offset, *end) = (from, to);
                x.help = Help::No;
                Step::Same(true)
            }
            _ => Step::Same(false),
        }
    }

    /// Sender: writes the next bytes of the HELP ranges into the receivers' buffers: one
    /// `process_vm_writev` per receiving process and pass, an iovec per transfer (at most
    /// `cma_chunk` bytes and [`IOV_MAX`](crate::cma::IOV_MAX) transfers per call); sends HELPED
    /// for each range written, or at the first refusal or fault (the receiver reads the rest
    /// itself).
    pub(super) fn progress_helps(&mut self) -> bool {
        let mut order = std::mem::take(&mut self.scratch_order);
        order.clear();
        for (i, x) in self.sends.iter().enumerate() {
            if let SendState::Help { pid, .. } = x.state {
                order.push((pid, i));
            }
        }
        order.sort_unstable();
        let mut moved = false;
        let mut dead = Vec::new();
        for group in order.chunk_by(|a, b| a.0 == b.0) {
            moved = true;
            if self.push_group(group) {
                dead.extend(group.iter().map(|&(_, i)| i));
            }
        }
        self.scratch_order = order;
        // Highest index first: `swap_remove` only moves entries from above.
        dead.sort_unstable_by(|a, b| b.cmp(a));
        for i in dead {
            if matches!(self.sends[i].state, SendState::Help { .. }) {
                let _ = self.fail_send(i, Error::PeerDied);
            }
        }
        moved
    }

    /// One `process_vm_writev` for the HELP ranges of `group` (all in one process). True if that
    /// process is gone.
    pub(super) fn push_group(&mut self, group: &[(u32, usize)]) -> bool {
        let pid = group[0].0;
        // Each range is `at..end` of the sender's buffer (`end <= len`, checked by `start_help`).
        let ranges = group.iter().map(|&(_, i)| match self.sends[i].state {
            SendState::Help { dst, offset, at, end, .. } => {
                (Local::Addr(self.sends[i].addr as usize + at as usize), dst.wrapping_add(at - offset), end - at)
            }
            _ => (Local::Addr(0), 0, 0),
        });
        let budget = self.cfg.cma_chunk as u64;
        // SAFETY: every range is of a contiguous buffer (a send in pieces gets no HELP).
        unsafe { self.batch.gather(budget, ranges) };
        let members = &group[..self.batch.took().len()];
        // A pid is reused only after its process exited: alive now, it names the receiver.
        if !self.copy_alive(self.sends[members[0].1].peer, pid, true) {
            return true;
        }
        // SAFETY: `pid` passed `copy_pid`: another process than this one and not sharing its
        // memory, or this one under `allow_own_process`, whose contract makes every HELP range a
        // receive buffer of one of our ranks, valid for writes and not otherwise accessed.
        let wrote = unsafe { self.io.write(pid, &self.batch) };
        let mut got = match wrote {
            Ok(n) => n,
            Err(e) if e.raw_os_error() == Some(libc::ESRCH) => return true,
            // Refused or faulted: the first range stops here, the others go on next pass (a
            // refusal stops them all in turn).
            Err(_) => 0,
        };
        for (k, &(_, i)) in members.iter().enumerate() {
            let want = self.batch.took()[k] as usize;
            let took = got.min(want);
            got -= took;
            let x = &mut self.sends[i];
            let SendState::Help { offset, at, end, .. } = &mut x.state else { continue };
            *at += took as u64;
            let stopped = took < want;
            if *at == *end || stopped {
                let bytes = *at - *offset;
                x.state = SendState::AwaitReply;
                self.out.push((x.peer, Control::Helped { id: x.id, bytes }));
            }
            if stopped {
                break;
            }
        }
        false
    }
}
