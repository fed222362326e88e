//! Buffers in pieces ([`Pieces`]: non-contiguous memory, an MPI derived datatype): a send is
//! gathered straight from its pieces into the fastbox slot, the cells or the receiver's copy
//! ring; a receive is scattered straight from each fragment, ring chunk or unexpected message
//! into its pieces, or read into them by a single copy (one iovec per piece). No packed copy of
//! the message is made, but with a remote peer: the network module sends from and receives into
//! contiguous bytes, so the Endpoint stages those messages through a buffer of its own.

use std::ptr::NonNull;

use nemesis_shm::{MsgHeader, Pieces, Sent};

use super::eager::{Mode, Pending};
use super::request::{Op, RecvBuf, Request};
use super::{Endpoint, Inner, KIND_EAGER_SYNC, Message, NOT_LOCAL, Status};

use crate::error::Result;

impl Endpoint {
    /// Starts sending the bytes of `pieces` to `dest` (as [`isend_raw`](Self::isend_raw), or
    /// as [`issend_raw`](Self::issend_raw) if `sync`).
    ///
    /// # Safety
    /// `pieces` must stay valid, its memory readable and unchanged, until the request completes.
    pub unsafe fn isend_pieces(
        &mut self,
        pieces: NonNull<dyn Pieces>,
        dest: u32,
        tag: i32,
        context: u32,
        sync: bool,
    ) -> Result<Request> {
        let inner = &mut *self.inner;
        // SAFETY: valid (the caller's contract).
        let p = unsafe { pieces.as_ref() };
        let len = p.len();
        Inner::check_len(len)?;
        let local = inner.check_send(dest, tag)?;
        if inner.ft.is_some() {
            // Fault tolerance piggybacks and logs contiguous messages: the pieces are gathered
            // once, into a copy kept until the send completes.
            let mut bytes = vec![0u8; len].into_boxed_slice();
            // SAFETY: `bytes` holds `len` bytes; the pieces are readable.
            unsafe { p.gather(0, bytes.as_mut_ptr(), len) };
            let mode = if sync { Mode::Sync } else { Mode::Standard };
            // SAFETY: `bytes` is kept until the request completes (`ft_keep`); a boxed slice's
            // memory does not move with the box.
            let req = unsafe { inner.send_slow(bytes.as_ptr(), len, local, dest, tag, context, mode, 0) }?;
            inner.ft_keep(req, bytes);
            return Ok(req);
        }
        let token = inner.token();
        // The pair's eager limit (a remote peer's: the network's).
        let limit = inner.pairs.get(usize::from(local)).map_or(inner.eager_net, |p| p.eager);
        if len > limit {
            // SAFETY: the caller's contract.
            return unsafe {
                inner.lmt_send(std::ptr::null(), len, Some(pieces), local, dest, tag, context, token, None, None)
            };
        }
        if local == NOT_LOCAL {
            // The network module copies the message before it returns: gather it here.
            let mut bytes = inner.spare.pop().unwrap_or_default();
            bytes.resize(len, 0);
            // SAFETY: `bytes` holds `len` bytes; the pieces are readable.
            unsafe { p.gather(0, bytes.as_mut_ptr(), len) };
            let mode = if sync { Mode::Sync } else { Mode::Standard };
            // SAFETY: `bytes` is valid until the send returns, which is when the netmod copied it.
            let req = unsafe { inner.send_slow(bytes.as_ptr(), len, local, dest, tag, context, mode, token) };
            inner.recycle(bytes);
            return req;
        }
        let mut hdr = MsgHeader { aux: token, ..inner.header(dest, tag, context) };
        if sync {
            hdr.kind = KIND_EAGER_SYNC;
        }
        let status = Status { source: inner.rank, tag, len };
        let req = match inner.port.send_pieces(local, &hdr, None, p) {
            Ok(Sent::Done) => {
                inner.ring(local);
                if sync {
                    let req = inner.reqs.insert(Op::Sync);
                    inner.sync_waiting.push((token, req, dest, status));
                    req
                } else {
                    inner.reqs.insert_done(Ok(status))
                }
            }
            Ok(Sent::Pending(ps)) => {
                let op = Op::Send { ps, buf: std::ptr::null(), len, dest, pieces: Some(pieces) };
                let req = inner.reqs.insert(op);
                inner.pending.push_back(Pending { req, internal: false, sync: sync.then_some(token), own: None });
                req
            }
            Err(e) => return Err(inner.send_error(e, dest)),
        };
        inner.reqs.set_sent(req, dest, token);
        Ok(req)
    }

    /// Starts receiving a message matching `(source, tag, context)` into `pieces` (their
    /// length is the capacity), as [`irecv_raw`](Self::irecv_raw).
    ///
    /// # Safety
    /// `pieces` must stay valid, its memory writable and not accessed otherwise, until the
    /// request completes.
    pub unsafe fn irecv_pieces(
        &mut self,
        pieces: NonNull<dyn Pieces>,
        source: i32,
        tag: i32,
        context: u32,
    ) -> Result<Request> {
        let inner = &mut *self.inner;
        let want = inner.check_recv(source, tag, context)?;
        // SAFETY: the caller's contract.
        inner.irecv(want, unsafe { pieces_buf(pieces) })
    }

    /// Starts receiving reserved message `msg` into `pieces` (MPI's `MPI_Imrecv`).
    ///
    /// # Safety
    /// As for [`irecv_pieces`](Self::irecv_pieces).
    pub unsafe fn imrecv_pieces(&mut self, msg: Message, pieces: NonNull<dyn Pieces>) -> Result<Request> {
        // SAFETY: the caller's contract.
        self.inner.imrecv(msg, unsafe { pieces_buf(pieces) })
    }
}

/// A receive buffer of `pieces`.
///
/// # Safety
/// `pieces` is valid.
unsafe fn pieces_buf(pieces: NonNull<dyn Pieces>) -> RecvBuf {
    // SAFETY: valid (the caller's contract).
    let cap = unsafe { pieces.as_ref() }.len();
    RecvBuf { ptr: std::ptr::null_mut(), cap, pieces: Some(pieces) }
}
