//! Eager sends: argument checks, the message header, doorbells, the slow send path (netmod,
//! or rendezvous above the eager limit), the Endpoint's own messages (acks) and the record of a
//! send waiting for cells ([`Pending`]; progress resumes it).

use nemesis_shm::netmod::Netmod;
use nemesis_shm::{MsgHeader, Sent};

use super::request::{Op, Request};
use super::{Inner, KIND_EAGER, KIND_EAGER_SYNC, KIND_SYNC_ACK, NOT_LOCAL, Status, raw_slice};

use crate::error::{Error, Result};
use crate::wait;

/// What kind of send leaves the inline path.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Mode {
    /// `isend_raw`: eager up to the pair's eager limit.
    Standard,
    /// `issend_raw`, `ssend`: as `Standard`, acknowledged once matched.
    Sync,
    /// `send`: eager up to the pair's blocking limit (the caller waits for the request).
    Blocking,
}

/// A send waiting for cells.
#[derive(Debug)]
pub(super) struct Pending {
    pub(super) req: Request,
    /// Sent by the Endpoint itself (an acknowledgement, a rendezvous message): nobody waits for it.
    pub(super) internal: bool,
    /// A synchronous send: once handed over, it waits for the acknowledgement of this token.
    pub(super) sync: Option<u32>,
    /// The payload of an internal message, owned here (`Op::Send`'s buffer is then unused).
    pub(super) own: Option<Box<[u8]>>,
}

impl Inner {
    #[inline(always)]
    pub(super) fn check_send(&self, dest: u32, tag: i32) -> Result<u16> {
        // `route` has an entry per rank: one test checks the rank and finds its local rank
        // (NOT_LOCAL for a remote one, which the slow path takes).
        let Some(&local) = self.route.get(dest as usize) else {
            return Err(Error::InvalidRank { rank: i64::from(dest), size: self.size });
        };
        if tag < 0 {
            return Err(Error::InvalidTag(tag));
        }
        Ok(local)
    }

    /// A length given with a raw pointer: no buffer is longer than `isize::MAX` bytes.
    #[inline(always)]
    pub(super) fn check_len(len: usize) -> Result<()> {
        if len > isize::MAX as usize {
            return Err(Error::TooLarge { len, limit: isize::MAX as usize });
        }
        Ok(())
    }

    #[inline(always)]
    pub(super) fn header(&self, dest: u32, tag: i32, context: u32) -> MsgHeader {
        MsgHeader { src: self.rank, dst: dest, tag, context, kind: KIND_EAGER, ..MsgHeader::default() }
    }

    /// Wakes `local` if it sleeps on its doorbell.
    #[inline(always)]
    pub(super) fn ring(&self, local: u16) {
        if let Some(bell) = self.bells.get(usize::from(local)) {
            wait::ring(bell);
        }
    }

    pub(super) fn send_error(&mut self, e: nemesis_shm::Error, dest: u32) -> Error {
        match e {
            nemesis_shm::Error::PeerDead { .. } => {
                self.saw_death(dest);
                Error::PeerDied { rank: dest }
            }
            other => Error::Shm(other),
        }
    }

    /// An eager send to local rank `local` (in a fastbox or cells; if cells are short, it waits in
    /// the pending list): the inline path of `isend_raw` (`SYNC` false) and `issend_raw` (`SYNC`
    /// true, acknowledged once matched), and of a message above the node's smallest eager limit
    /// that is within its pair's.
    ///
    /// # Safety
    /// The `len` bytes at `ptr` must stay valid and unchanged until the request completes.
    #[inline(always)]
    pub(super) unsafe fn send_eager<const SYNC: bool>(
        &mut self,
        ptr: *const u8,
        len: usize,
        local: u16,
        dest: u32,
        tag: i32,
        context: u32,
    ) -> Result<Request> {
        let (hdr, token) = self.eager_header(dest, tag, context, SYNC);
        // SAFETY: the caller guarantees `len` readable bytes at `ptr`.
        let data = unsafe { raw_slice(ptr, len) };
        match self.port.send(local, &hdr, data) {
            Ok(Sent::Done) => {
                self.ring(local);
                Ok(self.eager_sent(SYNC, token, dest, Status { source: self.rank, tag, len }))
            }
            Ok(Sent::Pending(ps)) => {
                let req = self.reqs.insert(Op::Send { ps, buf: ptr, len, dest });
                let sync = if SYNC { Some(token) } else { None };
                self.pending.push_back(Pending { req, internal: false, sync, own: None });
                Ok(req)
            }
            Err(e) => Err(self.send_error(e, dest)),
        }
    }

    /// Sends that leave the inline path: above the node's smallest eager limit of `mode` (eager
    /// still if within the pair's, else rendezvous), and every send to a remote peer (through the
    /// netmod, or rendezvous above its limit; `Mode::Sync`: acknowledged when matched).
    ///
    /// # Safety
    /// The `len` bytes at `ptr` must stay valid and unchanged until the request completes.
    #[inline(never)]
    #[allow(clippy::too_many_arguments)]
    pub(super) unsafe fn send_slow(
        &mut self,
        ptr: *const u8,
        len: usize,
        local: u16,
        dest: u32,
        tag: i32,
        context: u32,
        mode: Mode,
    ) -> Result<Request> {
        let sync = mode == Mode::Sync;
        if let Some(p) = self.pairs.get(usize::from(local)) {
            if len > if mode == Mode::Blocking { p.eager_blocking } else { p.eager } {
                // A rendezvous send completes once the receiver has the data: synchronous already.
                // SAFETY: the caller's contract.
                return unsafe { self.lmt_send(ptr, len, local, dest, tag, context) };
            }
            // Above the node's smallest eager limit, within this pair's.
            return if sync {
                // SAFETY: the caller's contract.
                unsafe { self.send_eager::<true>(ptr, len, local, dest, tag, context) }
            } else {
                // SAFETY: the caller's contract.
                unsafe { self.send_eager::<false>(ptr, len, local, dest, tag, context) }
            };
        }
        if len > self.eager_net {
            // SAFETY: the caller's contract.
            return unsafe { self.lmt_send(ptr, len, local, dest, tag, context) };
        }
        let (hdr, token) = self.eager_header(dest, tag, context, sync);
        // SAFETY: the caller guarantees `len` readable bytes at `ptr`.
        let data = unsafe { raw_slice(ptr, len) };
        self.net_send(dest, &hdr, data)?;
        Ok(self.eager_sent(sync, token, dest, Status { source: self.rank, tag, len }))
    }

    /// The header of eager data, and the token a synchronous send (`sync`) is acknowledged with.
    #[inline(always)]
    fn eager_header(&mut self, dest: u32, tag: i32, context: u32, sync: bool) -> (MsgHeader, u32) {
        let mut hdr = self.header(dest, tag, context);
        let token = self.next_token;
        if sync {
            self.next_token = self.next_token.wrapping_add(1);
            hdr.kind = KIND_EAGER_SYNC;
            hdr.aux = token;
        }
        (hdr, token)
    }

    /// The request of eager data handed over: complete, or (`sync`) waiting for the
    /// acknowledgement of `token`.
    #[inline(always)]
    fn eager_sent(&mut self, sync: bool, token: u32, dest: u32, status: Status) -> Request {
        if sync {
            let req = self.reqs.insert(Op::Sync);
            self.sync_waiting.push((token, req, dest, status));
            req
        } else {
            self.reqs.insert_done(Ok(status))
        }
    }

    /// Sends through the netmod (the message is written or copied on return).
    pub(super) fn net_send(&mut self, dest: u32, hdr: &MsgHeader, data: &[u8]) -> Result<()> {
        let Some(net) = self.net.as_mut() else {
            return Err(Error::Bootstrap(format!("rank {dest} is on another node and no network module runs")));
        };
        match net.send(dest, hdr, data) {
            Ok(()) => Ok(()),
            Err(nemesis_shm::Error::NetPeerDead { rank }) => Err(Error::PeerDied { rank }),
            Err(e) => Err(e.into()),
        }
    }

    /// Sends a message of the Endpoint's own (nobody waits for it): if cells are short it waits
    /// in the pending list with a copy of its payload.
    pub(super) fn send_internal(&mut self, local: u16, hdr: &MsgHeader, payload: &[u8]) -> Result<()> {
        match self.port.send(local, hdr, payload) {
            Ok(Sent::Done) => {
                self.ring(local);
                Ok(())
            }
            Ok(Sent::Pending(ps)) => {
                let dest = hdr.dst;
                let req = self.reqs.insert(Op::Send { ps, buf: std::ptr::null(), len: payload.len(), dest });
                let own = Some(payload.into());
                self.pending.push_back(Pending { req, internal: true, sync: None, own });
                Ok(())
            }
            Err(e) => Err(self.send_error(e, hdr.dst)),
        }
    }

    /// Acknowledges a synchronous send's match to rank `dest`.
    pub(super) fn send_ack(&mut self, dest: u32, token: u32) -> Result<()> {
        let hdr = MsgHeader { kind: KIND_SYNC_ACK, aux: token, ..self.header(dest, 0, 0) };
        let local = self.route[dest as usize];
        let sent =
            if local == NOT_LOCAL { self.net_send(dest, &hdr, &[]) } else { self.send_internal(local, &hdr, &[]) };
        match sent {
            // The sender died: nobody waits for the acknowledgement.
            Err(Error::PeerDied { .. }) => Ok(()),
            r => r,
        }
    }
}
