//! Eager sends: argument checks, the message header, doorbells, the slow send path (netmod,
//! or rendezvous above the eager limit), the Endpoint's own messages (acks) and the record of a
//! send waiting for cells ([`Pending`]; progress resumes it).

use nemesis_shm::netmod::Netmod;
use nemesis_shm::{MsgHeader, PiggybackBytes, Sent};

use super::request::{Op, Request};
use super::{Inner, KIND_EAGER, KIND_EAGER_SYNC, KIND_SYNC_ACK, NOT_LOCAL, SendId, Status, raw_slice};

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

    /// A fresh message token (never 0, which marks a message nobody will cancel).
    pub(super) fn token(&mut self) -> u32 {
        self.next_token = self.next_token.wrapping_add(1).max(1);
        self.next_token
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

    /// Counts an application message to `dest` that does not go through the port as it is (the
    /// communication matrix).
    pub(super) fn count(&mut self, dest: u32, len: usize) {
        if let Some(t) = self.other.get_mut(dest as usize) {
            t.messages += 1;
            t.bytes += len as u64;
        }
    }

    /// Application messages and bytes sent to each rank.
    pub(super) fn traffic(&self) -> Vec<super::Traffic> {
        (0..self.size as usize)
            .map(|d| {
                let (mut messages, mut bytes) = (self.other[d].messages, self.other[d].bytes);
                let local = self.route[d];
                if local != NOT_LOCAL {
                    let (m, b) = self.port.sent_to(local);
                    messages += m - self.own[d].messages;
                    bytes += b - self.own[d].bytes;
                }
                super::Traffic { messages, bytes }
            })
            .collect()
    }

    /// The longest message a send of `mode` to local rank `local` (`NOT_LOCAL`: a remote rank)
    /// sends eagerly: its pair's limit, or the netmod's.
    pub(super) fn eager_limit_of(&self, local: u16, mode: Mode) -> usize {
        match self.pairs.get(usize::from(local)) {
            Some(p) if mode == Mode::Blocking => p.eager_blocking,
            Some(p) => p.eager,
            None => self.eager_net,
        }
    }

    /// A blocking send that leaves the inline path: to a remote peer, above the node's smallest
    /// blocking eager limit, or any send with fault tolerance on.
    #[inline(never)]
    pub(super) fn send_blocking_slow(
        &mut self,
        buf: &[u8],
        local: u16,
        dest: u32,
        tag: i32,
        context: u32,
    ) -> Result<()> {
        if self.ft.is_some() {
            return self.send_ft_blocking(buf, local, dest, tag, context);
        }
        if local == NOT_LOCAL && buf.len() <= self.eager_net {
            // Eager to another node: the netmod has sent or copied the message when it returns,
            // so no request is made and waited for.
            let (hdr, _) = self.eager_header(dest, tag, context, false, 0);
            self.net_send(dest, &hdr, None, buf)?;
            self.count(dest, buf.len());
            return Ok(());
        }
        // A token, though nobody cancels a blocking send: a rendezvous send that meets an error not
        // its own is cancelled at its receiver if the RTS is not taken yet (`settle.rs`).
        let token = self.token();
        // SAFETY: `buf` outlives the request, which we wait for before returning.
        let req = unsafe { self.send_slow(buf.as_ptr(), buf.len(), local, dest, tag, context, Mode::Blocking, token) }?;
        self.wait(req).map(drop)
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
    /// that is within its pair's. `token` marks the message for cancellation (0: none; a
    /// synchronous send gets one).
    ///
    /// # Safety
    /// The `len` bytes at `ptr` must stay valid and unchanged until the request completes.
    #[inline(always)]
    #[allow(clippy::too_many_arguments)]
    pub(super) unsafe fn send_eager<const SYNC: bool>(
        &mut self,
        ptr: *const u8,
        len: usize,
        local: u16,
        dest: u32,
        tag: i32,
        context: u32,
        token: u32,
    ) -> Result<Request> {
        // SAFETY: the caller's contract.
        match unsafe { self.eager_out::<SYNC>(ptr, len, local, dest, tag, context, token) }? {
            Ok(token) => Ok(self.eager_sent(SYNC, token, dest, Status { source: self.rank, tag, len })),
            Err(req) => Ok(req),
        }
    }

    /// [`send_eager`](Self::send_eager) of a standard send that makes no request when the
    /// message goes out whole at once (`Endpoint::isend_now`): `Ok(Ok(id))` then, `id` naming
    /// the message for a cancellation; `Ok(Err(req))` for one left waiting for cells.
    ///
    /// # Safety
    /// As for [`send_eager`](Self::send_eager).
    #[inline(always)]
    #[allow(clippy::too_many_arguments)]
    pub(super) unsafe fn send_eager_now(
        &mut self,
        ptr: *const u8,
        len: usize,
        local: u16,
        dest: u32,
        tag: i32,
        context: u32,
        token: u32,
    ) -> Result<core::result::Result<SendId, Request>> {
        // SAFETY: the caller's contract.
        let out = unsafe { self.eager_out::<false>(ptr, len, local, dest, tag, context, token) }?;
        Ok(out.map(|token| SendId { dest, token, req: Request::NONE }))
    }

    /// The message of [`send_eager`](Self::send_eager) handed to the port: `Ok(Ok(token))` when
    /// it went out whole at once (the token it carries), `Ok(Err(req))` for one left waiting for
    /// cells (its request, in the pending list).
    ///
    /// # Safety
    /// As for [`send_eager`](Self::send_eager).
    #[inline(always)]
    #[allow(clippy::too_many_arguments)]
    unsafe fn eager_out<const SYNC: bool>(
        &mut self,
        ptr: *const u8,
        len: usize,
        local: u16,
        dest: u32,
        tag: i32,
        context: u32,
        token: u32,
    ) -> Result<core::result::Result<u32, Request>> {
        let (hdr, token) = self.eager_header(dest, tag, context, SYNC, token);
        // SAFETY: the caller guarantees `len` readable bytes at `ptr`.
        let data = unsafe { raw_slice(ptr, len) };
        match self.port.send(local, &hdr, None, data) {
            Ok(Sent::Done) => {
                self.ring(local);
                Ok(Ok(token))
            }
            Ok(Sent::Pending(ps)) => {
                let req = self.reqs.insert_sent(Op::Send { ps, buf: ptr, len, dest, pieces: None }, dest, token);
                let sync = SYNC.then_some(token);
                self.pending.push_back(Pending { req, internal: false, sync, own: None });
                Ok(Err(req))
            }
            Err(e) => Err(self.send_error(e, dest)),
        }
    }

    /// Sends that leave the inline path: above the node's smallest eager limit of `mode` (eager
    /// still if within the pair's, else rendezvous), every send to a remote peer (through the
    /// netmod, or rendezvous above its limit; `Mode::Sync`: acknowledged when matched), and every
    /// send with fault tolerance on (`ft.rs`). `token` marks the message for cancellation (0:
    /// none; a synchronous send gets one; with fault tolerance none is).
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
        token: u32,
    ) -> Result<Request> {
        let sync = mode == Mode::Sync;
        if self.ft.is_some() {
            let limit = self.eager_limit_of(local, mode);
            let s = super::ft::FtSend { ptr, len, local, dest, tag, context, sync, limit };
            // SAFETY: the caller's contract.
            let req = unsafe { self.send_ft(s) }?;
            return Ok(req.unwrap_or_else(|| self.reqs.insert_done(Ok(Status { source: self.rank, tag, len }))));
        }
        if let Some(p) = self.pairs.get(usize::from(local)) {
            if len > if mode == Mode::Blocking { p.eager_blocking } else { p.eager } {
                // A rendezvous send completes once the receiver has the data: synchronous already.
                // SAFETY: the caller's contract.
                return unsafe { self.lmt_send(ptr, len, None, local, dest, tag, context, token, None, None) };
            }
            // Above the node's smallest eager limit, within this pair's.
            return if sync {
                // SAFETY: the caller's contract.
                unsafe { self.send_eager::<true>(ptr, len, local, dest, tag, context, token) }
            } else {
                // SAFETY: the caller's contract.
                unsafe { self.send_eager::<false>(ptr, len, local, dest, tag, context, token) }
            };
        }
        if len > self.eager_net {
            // SAFETY: the caller's contract.
            return unsafe { self.lmt_send(ptr, len, None, local, dest, tag, context, token, None, None) };
        }
        let (hdr, token) = self.eager_header(dest, tag, context, sync, token);
        // SAFETY: the caller guarantees `len` readable bytes at `ptr`.
        let data = unsafe { raw_slice(ptr, len) };
        self.net_send(dest, &hdr, None, data)?;
        self.count(dest, len);
        Ok(self.eager_sent(sync, token, dest, Status { source: self.rank, tag, len }))
    }

    /// The header of eager data marked with `token` (a synchronous send (`sync`) without one
    /// takes a new one, which it is acknowledged with), and the token.
    #[inline(always)]
    pub(super) fn eager_header(
        &mut self,
        dest: u32,
        tag: i32,
        context: u32,
        sync: bool,
        token: u32,
    ) -> (MsgHeader, u32) {
        let mut hdr = self.header(dest, tag, context);
        let token = if sync && token == 0 { self.token() } else { token };
        hdr.aux = token;
        if sync {
            hdr.kind = KIND_EAGER_SYNC;
        }
        (hdr, token)
    }

    /// The request of eager data handed over (recording the message, for cancellation): complete, or (`sync`) waiting for the
    /// acknowledgement of `token`.
    #[inline(always)]
    pub(super) fn eager_sent(&mut self, sync: bool, token: u32, dest: u32, status: Status) -> Request {
        if sync {
            let req = self.reqs.insert_sent(Op::Sync, dest, token);
            self.sync_waiting.push((token, req, dest, status));
            req
        } else {
            self.reqs.insert_done_sent(Ok(status), dest, token)
        }
    }

    /// Sends through the netmod (the message is written or copied on return), with the
    /// fault-tolerance piggyback `ft` if given.
    pub(super) fn net_send(
        &mut self,
        dest: u32,
        hdr: &MsgHeader,
        ft: Option<&PiggybackBytes>,
        data: &[u8],
    ) -> Result<()> {
        let Some(net) = self.net.as_mut() else {
            return Err(Error::Bootstrap(format!("rank {dest} is on another node and no network module runs")));
        };
        match net.send(dest, hdr, ft, data) {
            Ok(()) => Ok(()),
            Err(nemesis_shm::Error::NetPeerDead { rank }) => Err(Error::PeerDied { rank }),
            Err(e) => Err(e.into()),
        }
    }

    /// Sends a message of the Endpoint's own (nobody waits for it), with the fault-tolerance
    /// piggyback `ft` if given (an RTS): if cells are short it waits in the pending list with a
    /// copy of its payload.
    pub(super) fn send_internal(
        &mut self,
        local: u16,
        hdr: &MsgHeader,
        ft: Option<&PiggybackBytes>,
        payload: &[u8],
    ) -> Result<()> {
        if let Some(t) = self.own.get_mut(hdr.dst as usize) {
            t.messages += 1;
            t.bytes += payload.len() as u64;
        }
        match self.port.send(local, hdr, ft, payload) {
            Ok(Sent::Done) => {
                self.ring(local);
                Ok(())
            }
            Ok(Sent::Pending(ps)) => {
                let dest = hdr.dst;
                let req =
                    self.reqs.insert(Op::Send { ps, buf: std::ptr::null(), len: payload.len(), dest, pieces: None });
                let own = Some(payload.into());
                self.pending.push_back(Pending { req, internal: true, sync: None, own });
                Ok(())
            }
            Err(e) => Err(self.send_error(e, hdr.dst)),
        }
    }

    /// Sends a message of the Endpoint's own to rank `dest` (through the port or the netmod), with
    /// the fault-tolerance piggyback `ft` if given (a replay). A dead `dest` is no error: nobody
    /// waits for the message there.
    pub(super) fn send_own(
        &mut self,
        dest: u32,
        hdr: &MsgHeader,
        ft: Option<&PiggybackBytes>,
        payload: &[u8],
    ) -> Result<()> {
        let Some(&local) = self.route.get(dest as usize) else {
            return Err(Error::InvalidRank { rank: i64::from(dest), size: self.size });
        };
        let sent = if local == NOT_LOCAL {
            self.net_send(dest, hdr, ft, payload)
        } else {
            self.send_internal(local, hdr, ft, payload)
        };
        match sent {
            Err(Error::PeerDied { .. }) => Ok(()),
            r => r,
        }
    }

    /// Acknowledges a synchronous send's match to rank `dest`.
    pub(super) fn send_ack(&mut self, dest: u32, token: u32) -> Result<()> {
        let hdr = MsgHeader { kind: KIND_SYNC_ACK, aux: token, ..self.header(dest, 0, 0) };
        self.send_own(dest, &hdr, None, &[])
    }
}
