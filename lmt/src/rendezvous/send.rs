//! The sender's side: the RTS ([`Lmt::pre_send`]), then on CTS or COOKIE the message copied into
//! the receiver's ring a few chunks a pass (`progress_send`); the buffer is the caller's again
//! once its last chunk is in the ring, or on DONE after the receiver read it itself. A HELP
//! (`split`) has the sender write part of a single copy instead.

use std::ptr::NonNull;

use nemesis_shm::Pieces;

use super::{Lmt, Outcome, Rings, Step, Token};
use crate::cma::Copier;
use crate::error::{Error, Result};
use crate::wire::{Backend, Rts};

/// Where a send stands.
#[derive(Clone, Copy, Debug)]
pub(super) enum SendState {
    /// RTS sent; waiting for CTS, COOKIE or DONE.
    AwaitReply,
    /// Copying into the receiver's ring.
    Ring { ring: u16, epoch: u32, offset: u64, chunk: u64, bytes: u64 },
    /// Writing `offset..end` of our buffer to `dst` (the start of that range) in process `pid`
    /// (HELP); `at` is the next byte; then HELPED, and DONE is awaited.
    Help { pid: u32, dst: u64, offset: u64, at: u64, end: u64 },
}

/// A send in flight.
#[derive(Debug)]
pub(super) struct SendX {
    /// Our transfer id (the RTS carries it; unique among our sends in flight).
    pub(super) id: u32,
    /// The receiver's local rank.
    pub(super) peer: u16,
    pub(super) token: Token,
    /// The message (`len` bytes, valid and unchanged until the outcome is taken).
    pub(super) addr: *const u8,
    /// The message is in pieces (`addr` unused): it goes through a ring, gathered as copied.
    pub(super) pieces: Option<NonNull<dyn Pieces>>,
    pub(super) len: u64,
    pub(super) state: SendState,
}

impl SendX {
    /// Whether `rts` is this send's, to rank `me` (ourselves), of contiguous bytes.
    pub(super) fn own_rts(&self, me: u16, rts: &Rts) -> bool {
        self.peer == me
            && self.id == rts.id
            && self.addr as u64 == rts.addr
            && self.len == rts.len
            && self.pieces.is_none()
    }
}

impl<C: Copier> Lmt<C> {
    /// Sender: a message of `len` bytes at `addr` for local rank `peer`. Returns the RTS to send
    /// (through the eager path, matched like a message).
    ///
    /// # Safety
    /// The `len` bytes at `addr` must stay valid and unchanged until this transfer's outcome is
    /// taken.
    pub unsafe fn pre_send(&mut self, peer: u16, token: Token, addr: *const u8, len: u64, pid: u32) -> Rts {
        let backend = self.backend_for(peer, len);
        self.add_send(peer, token, addr, None, len, pid, backend)
    }

    /// Sender: as [`pre_send`](Self::pre_send) for a message in `pieces`. It goes through the
    /// receiver's ring (a single copy would need the pieces' addresses on the receiver's side),
    /// each chunk gathered straight from the pieces.
    ///
    /// # Safety
    /// `pieces` must stay valid, its memory readable and unchanged, until this transfer's outcome
    /// is taken.
    pub unsafe fn pre_send_pieces(&mut self, peer: u16, token: Token, pieces: NonNull<dyn Pieces>, pid: u32) -> Rts {
        // SAFETY: the caller's contract.
        let len = unsafe { pieces.as_ref() }.len() as u64;
        self.add_send(peer, token, std::ptr::null(), Some(pieces), len, pid, Backend::Ring)
    }

    #[allow(clippy::too_many_arguments)]
    pub(super) fn add_send(
        &mut self,
        peer: u16,
        token: Token,
        addr: *const u8,
        pieces: Option<NonNull<dyn Pieces>>,
        len: u64,
        pid: u32,
        backend: Backend,
    ) -> Rts {
        let id = self.next_id;
        self.next_id = self.next_id.wrapping_add(1);
        self.sends.push(SendX { id, peer, token, addr, pieces, len, state: SendState::AwaitReply });
        Rts { id, len, addr: addr as u64, pid, key: 0, backend }
    }

    /// Sender: forgets a transfer whose RTS could not be sent (no outcome is reported).
    pub fn abandon(&mut self, token: Token) {
        self.sends.retain(|s| s.token != token);
    }

    /// Sender, on CTS: checks the ring and starts copying into it.
    pub(super) fn start_send<R: Rings + ?Sized>(
        &mut self,
        i: usize,
        ring: u16,
        epoch: u32,
        offset: u64,
        bytes: u64,
        rings: &R,
    ) -> Result<()> {
        let x = &self.sends[i];
        if !matches!(x.state, SendState::AwaitReply) || bytes > x.len || offset > bytes {
            return self.fail_send(i, Error::Corrupt { what: "CTS byte count", value: bytes });
        }
        match rings.ring(x.peer, ring) {
            Some(r) if r.epoch() == epoch => {}
            _ => return self.fail_send(i, Error::Corrupt { what: "CTS ring", value: u64::from(ring) }),
        }
        if offset == bytes {
            return self.post_send(i, bytes);
        }
        self.sends[i].state = SendState::Ring { ring, epoch, offset, chunk: 0, bytes };
        Ok(())
    }

    /// Sender, on COOKIE: the receiver moves the rest from `offset` through a ring.
    pub(super) fn handle_cookie<R: Rings + ?Sized>(
        &mut self,
        i: usize,
        offset: u64,
        ring: u16,
        epoch: u32,
        bytes: u64,
        rings: &R,
    ) -> Result<()> {
        self.start_send(i, ring, epoch, offset, bytes, rings)
    }

    /// Sender: the transfer is over (`bytes` moved); the buffer is free.
    pub(super) fn post_send(&mut self, i: usize, bytes: u64) -> Result<()> {
        let x = self.sends.swap_remove(i);
        if bytes > x.len {
            self.done.push((x.token, Outcome::Failed(Error::Corrupt { what: "DONE byte count", value: bytes })));
        } else {
            self.done.push((x.token, Outcome::Moved { bytes }));
        }
        Ok(())
    }

    pub(super) fn fail_send(&mut self, i: usize, e: Error) -> Result<()> {
        let x = self.sends.swap_remove(i);
        self.done.push((x.token, Outcome::Failed(e.clone())));
        Err(e)
    }

    pub(super) fn progress_send<R: Rings + ?Sized>(&mut self, i: usize, rings: &R) -> Step {
        let x = &mut self.sends[i];
        let SendState::Ring { ring, epoch, mut offset, mut chunk, bytes } = x.state else { return Step::Same(false) };
        let Some(r) = rings.ring(x.peer, ring) else {
            let _ = self.fail_send(i, Error::Corrupt { what: "ring index", value: u64::from(ring) });
            return Step::Removed;
        };
        let _ = epoch;
        let slot = self.peers.get(usize::from(x.peer)).map_or(r.slot_size() as u64, |p| p.chunk(r.slot_size() as u64));
        let mut moved = false;
        for _ in 0..self.cfg.chunks_per_pass {
            if offset == bytes {
                break;
            }
            let n = slot.min(bytes - offset) as usize;
            let put = match x.pieces {
                // SAFETY: the pieces are valid and readable until the outcome is taken
                // (`pre_send_pieces`'s contract); `gather` writes the `n` bytes `fill` must.
                Some(p) => unsafe { r.try_put_with(chunk, n, |dst| p.as_ref().gather(offset as usize, dst, n)) },
                None => {
                    // SAFETY: the sender's buffer holds `len >= bytes` bytes (pre_send's contract)
                    // and `offset + n <= bytes`.
                    let data = unsafe { std::slice::from_raw_parts(x.addr.add(offset as usize), n) };
                    r.try_put(chunk, data)
                }
            };
            if !put {
                break;
            }
            offset += n as u64;
            chunk += 1;
            moved = true;
        }
        x.state = SendState::Ring { ring, epoch, offset, chunk, bytes };
        if offset == bytes {
            let _ = self.post_send(i, bytes);
            return Step::Removed;
        }
        if moved {
            // Part of the message is in the receiver's ring, not all.
            nemesis_shm::failpoint!("rendezvous-send-mid-{}", x.peer);
        }
        Step::Same(moved)
    }
}
