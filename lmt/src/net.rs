//! Rendezvous with remote peers, through a network module's [`LmtBackend`] (the TCP netmod
//! streams the data; the RDMA netmod reads it from the sender's registered buffer, or streams it).
//! Sans I/O: the backend the caller passes moves the data; control messages come out of
//! [`NetLmt::take_out`], finished transfers out of [`NetLmt::take_done`].
//!
//! The exchange: the sender's RTS (matched like an eager message), carrying what its backend
//! offers ([`LmtBackend::pre_send`]: for a network read, the remote address and key of its
//! registered buffer). Once a receive takes it, the receiver's backend chooses
//! ([`LmtBackend::start_recv`]):
//! - **stream**: the receiver readies its buffer and answers CTS at once with the byte count it
//!   takes (fewer than the message when its buffer is shorter); on CTS the sender's backend moves
//!   that many bytes ([`LmtBackend::start_send`]); each side ends when its backend reports it.
//! - **read**: the receiver's backend reads the bytes from the sender's buffer itself (zero copy,
//!   one round trip); once they are in, the receiver answers DONE with the count, and the
//!   sender's transfer ends on it ([`LmtBackend::abandon_send`]).

use crate::error::{Error, Result};
use crate::rendezvous::{Outcome, Token};
use crate::wire::{Backend, Control, Rts};

/// The sender's buffer as a remote peer can read it: what an RTS offers for a network read.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RemoteBuf {
    /// The address to read at, as the network names it (a virtual address or an offset into the
    /// registration).
    pub addr: u64,
    /// The registration's key.
    pub key: u64,
}

/// How the receiver's backend takes a transfer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RecvPlan {
    /// The sender streams the data after CTS.
    Stream,
    /// The receiver reads the data from the sender's buffer, then sends DONE.
    Read,
}

/// A network's way of moving the data of large messages.
pub trait LmtBackend {
    /// Sender, before its RTS: readies the `bytes` bytes at `addr` of transfer `id` to remote rank
    /// `peer` for a read by the receiver, and returns what the RTS offers; `None` (the default):
    /// the data can only be streamed.
    ///
    /// # Safety
    /// The bytes stay valid and unchanged until the backend reports the transfer, or until
    /// [`abandon_send`](Self::abandon_send).
    unsafe fn pre_send(&mut self, peer: u32, id: u32, addr: *const u8, bytes: u64) -> Result<Option<RemoteBuf>> {
        let _ = (peer, id, addr, bytes);
        Ok(None)
    }
    /// Sender: transfer `id` to `peer` ends without data moving through the backend (its RTS was
    /// not sent, the receiver took no bytes, or the receiver read the data and answered DONE).
    fn abandon_send(&mut self, peer: u32, id: u32) {
        let _ = (peer, id);
    }
    /// Sender, on CTS: streams `bytes` bytes at `addr` as transfer `id` to global rank `peer`.
    ///
    /// # Safety
    /// The bytes stay valid and unchanged until the backend reports the transfer.
    unsafe fn start_send(&mut self, peer: u32, id: u32, addr: *const u8, bytes: u64) -> Result<()>;
    /// Receiver, before its CTS: the `bytes` bytes of transfer `id` from `peer` go to `dst`;
    /// `remote` is what the RTS offered for a read. Returns how the bytes come.
    ///
    /// # Safety
    /// `dst` stays valid for writes of `bytes` bytes, and is not accessed otherwise, until the
    /// backend reports the transfer.
    unsafe fn start_recv(
        &mut self,
        peer: u32,
        id: u32,
        dst: *mut u8,
        bytes: u64,
        remote: Option<RemoteBuf>,
    ) -> Result<RecvPlan>;
    /// Transfers the backend finished (or failed) since the last call.
    fn take_lmt_done(&mut self) -> Vec<NetDone>;
}

/// A transfer a backend finished.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NetDone {
    /// The other side's global rank.
    pub peer: u32,
    /// The sender's transfer id.
    pub id: u32,
    /// This side sent (else received).
    pub send: bool,
    /// How it ended.
    pub outcome: Outcome,
}

#[derive(Debug)]
struct Send {
    peer: u32,
    id: u32,
    token: Token,
    addr: *const u8,
    len: u64,
    /// CTS received: the backend moves the data.
    started: bool,
    /// The RTS offered a read: DONE may end the transfer.
    offered: bool,
}

#[derive(Debug)]
struct Recv {
    peer: u32,
    id: u32,
    token: Token,
    /// The backend reads the data: DONE goes to the sender once it is in.
    read: bool,
}

/// The rendezvous transfers of one process with remote peers.
#[derive(Debug)]
pub struct NetLmt {
    /// Longest message an RTS may announce ([`crate::Config::max_len`]).
    max_len: u64,
    next_id: u32,
    sends: Vec<Send>,
    recvs: Vec<Recv>,
    out: Vec<(u32, Control)>,
    done: Vec<(Token, Outcome)>,
}

// SAFETY: the raw pointers are the caller's buffers of transfers in flight, valid until their
// outcome is taken (the caller's contract); nothing is tied to a thread.
unsafe impl std::marker::Send for NetLmt {}

impl Default for NetLmt {
    fn default() -> Self {
        NetLmt::new()
    }
}

impl NetLmt {
    /// No transfers yet.
    pub fn new() -> NetLmt {
        NetLmt {
            max_len: crate::wire::LEN_MAX,
            next_id: 0,
            sends: Vec::new(),
            recvs: Vec::new(),
            out: Vec::new(),
            done: Vec::new(),
        }
    }

    /// Refuses RTSs announcing more than `max` bytes ([`Error::TooLong`]; at most
    /// [`crate::wire::LEN_MAX`] in any case).
    pub fn set_max_len(&mut self, max: u64) {
        self.max_len = max.min(crate::wire::LEN_MAX);
    }

    /// True while transfers are in flight.
    pub fn busy(&self) -> bool {
        !self.sends.is_empty() || !self.recvs.is_empty()
    }

    /// True if there is something to take.
    pub fn has_output(&self) -> bool {
        !self.out.is_empty() || !self.done.is_empty()
    }

    /// Control messages to send: `(global rank, message)`.
    pub fn take_out(&mut self) -> std::vec::Drain<'_, (u32, Control)> {
        self.out.drain(..)
    }

    /// Transfers finished on this side since the last call.
    pub fn take_done(&mut self) -> std::vec::Drain<'_, (Token, Outcome)> {
        self.done.drain(..)
    }

    /// Sender: a message of `len` bytes at `addr` for remote rank `peer`; returns the RTS to send.
    ///
    /// # Safety
    /// The `len` bytes at `addr` must stay valid and unchanged until this transfer's outcome is
    /// taken (or it is [abandoned](Self::abandon)).
    pub unsafe fn pre_send<B: LmtBackend + ?Sized>(
        &mut self,
        peer: u32,
        token: Token,
        addr: *const u8,
        len: u64,
        backend: &mut B,
    ) -> Rts {
        let id = self.next_id;
        self.next_id = self.next_id.wrapping_add(1);
        // SAFETY: the caller's contract on the buffer. A backend that cannot ready it for a read
        // leaves streaming, which always works.
        let remote = unsafe { backend.pre_send(peer, id, addr, len) }.ok().flatten();
        self.sends.push(Send { peer, id, token, addr, len, started: false, offered: remote.is_some() });
        match remote {
            Some(r) => Rts { id, len, addr: r.addr, pid: 0, key: r.key, backend: Backend::NetRead },
            None => Rts { id, len, addr: 0, pid: 0, key: 0, backend: Backend::Net },
        }
    }

    /// Sender: forgets a transfer whose RTS could not be sent (no outcome is reported).
    pub fn abandon<B: LmtBackend + ?Sized>(&mut self, token: Token, backend: &mut B) {
        for s in self.sends.extract_if(.., |s| s.token == token) {
            backend.abandon_send(s.peer, s.id);
        }
    }

    /// Receiver: a receive of `cap` bytes at `dst` took `rts` from remote rank `peer`.
    ///
    /// # Safety
    /// The `cap` bytes at `dst` must stay valid for writes, and not be accessed otherwise, until
    /// this transfer's outcome is taken.
    pub unsafe fn pre_recv<B: LmtBackend + ?Sized>(
        &mut self,
        peer: u32,
        token: Token,
        rts: &Rts,
        dst: *mut u8,
        cap: usize,
        backend: &mut B,
    ) {
        if rts.len > self.max_len {
            // The sender still waits: tell it no bytes are taken.
            self.out.push((peer, Control::Cts { id: rts.id, ring: 0, epoch: 0, bytes: 0 }));
            self.done.push((token, Outcome::Failed(Error::TooLong { len: rts.len, max: self.max_len })));
            return;
        }
        let bytes = rts.len.min(cap as u64);
        let cts = Control::Cts { id: rts.id, ring: 0, epoch: 0, bytes };
        if bytes == 0 {
            self.out.push((peer, cts));
            self.done.push((token, Outcome::Moved { bytes: 0 }));
            return;
        }
        let remote = (rts.backend == Backend::NetRead).then_some(RemoteBuf { addr: rts.addr, key: rts.key });
        // SAFETY: the caller's contract on `dst`, for `bytes <= cap`.
        match unsafe { backend.start_recv(peer, rts.id, dst, bytes, remote) } {
            Ok(RecvPlan::Stream) => {
                self.out.push((peer, cts));
                self.recvs.push(Recv { peer, id: rts.id, token, read: false });
            }
            Ok(RecvPlan::Read) => self.recvs.push(Recv { peer, id: rts.id, token, read: true }),
            Err(e) => {
                // The sender still waits: tell it no bytes are taken.
                self.out.push((peer, Control::Cts { id: rts.id, ring: 0, epoch: 0, bytes: 0 }));
                self.done.push((token, Outcome::Failed(e)));
            }
        }
    }

    /// A rendezvous message other than RTS from remote rank `peer`: CTS (stream what it asks) or
    /// DONE (the receiver read the data). Messages about transfers no longer in flight are
    /// ignored; malformed ones are errors.
    pub fn handle<B: LmtBackend + ?Sized>(&mut self, peer: u32, msg: Control, backend: &mut B) -> Result<()> {
        let (id, bytes, read) = match msg {
            Control::Cts { id, bytes, .. } => (id, bytes, false),
            Control::Done { id, bytes } => (id, bytes, true),
            _ => return Err(Error::Wire { what: "rendezvous message from a remote peer", value: u64::from(msg.id()) }),
        };
        let Some(i) = self.sends.iter().position(|s| s.id == id && s.peer == peer && !s.started) else {
            return Ok(());
        };
        let s = &mut self.sends[i];
        if bytes > s.len || (read && !s.offered) {
            let s = self.sends.swap_remove(i);
            backend.abandon_send(peer, id);
            let e = Error::Corrupt {
                what: if read { "DONE for a streamed transfer" } else { "CTS byte count" },
                value: bytes,
            };
            self.done.push((s.token, Outcome::Failed(e.clone())));
            return Err(e);
        }
        if bytes == 0 || read {
            // Nothing to stream: no bytes taken, or the receiver has read them.
            let s = self.sends.swap_remove(i);
            backend.abandon_send(peer, id);
            self.done.push((s.token, Outcome::Moved { bytes }));
            return Ok(());
        }
        s.started = true;
        // SAFETY: `pre_send`'s contract: the buffer stays valid until the outcome is taken.
        if let Err(e) = unsafe { backend.start_send(peer, id, s.addr, bytes) } {
            let s = self.sends.swap_remove(i);
            backend.abandon_send(peer, id);
            self.done.push((s.token, Outcome::Failed(e)));
        }
        Ok(())
    }

    /// Collects what the backend finished. True if anything did.
    pub fn progress<B: LmtBackend + ?Sized>(&mut self, backend: &mut B) -> bool {
        let finished = backend.take_lmt_done();
        let any = !finished.is_empty();
        for d in finished {
            let token = if d.send {
                let Some(i) = self.sends.iter().position(|s| s.id == d.id && s.peer == d.peer) else { continue };
                self.sends.swap_remove(i).token
            } else {
                let Some(i) = self.recvs.iter().position(|r| r.id == d.id && r.peer == d.peer) else { continue };
                let r = self.recvs.swap_remove(i);
                if let (true, Outcome::Moved { bytes }) = (r.read, &d.outcome) {
                    self.out.push((r.peer, Control::Done { id: r.id, bytes: *bytes }));
                }
                r.token
            };
            self.done.push((token, d.outcome));
        }
        any
    }

    /// Remote rank `peer` died: its transfers fail with [`Error::PeerDied`] (the backend has
    /// dropped its side of them).
    pub fn peer_gone(&mut self, peer: u32) {
        for s in self.sends.extract_if(.., |s| s.peer == peer) {
            self.done.push((s.token, Outcome::Failed(Error::PeerDied)));
        }
        for r in self.recvs.extract_if(.., |r| r.peer == peer) {
            self.done.push((r.token, Outcome::Failed(Error::PeerDied)));
        }
    }
}

#[cfg(test)]
mod tests;
