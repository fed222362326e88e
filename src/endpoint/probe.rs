//! Probes: whether a matching message has arrived, without receiving it; matched probes reserve
//! the message found ([`Message`]), which no other receive then matches and only
//! `imrecv_raw`/`mrecv` take.

use super::request::{RecvBuf, Request};
use super::{Endpoint, Message, Peer, Status};
use crate::error::{Error, Result};
use crate::wait::Waiter;

impl Endpoint {
    /// Whether a message matching `(source, tag, context)` has arrived, without receiving it.
    pub fn iprobe(&mut self, source: i32, tag: i32, context: u32) -> Result<Option<Status>> {
        let inner = &mut *self.inner;
        let want = inner.check_recv(source, tag, context)?;
        inner.progress(None)?;
        if let Some(st) = inner.find_unexpected(want) {
            return Ok(Some(st));
        }
        inner.scan_every_fastbox()?;
        Ok(inner.find_unexpected(want))
    }

    /// Waits until a message matching `(source, tag, context)` has arrived, without receiving it.
    pub fn probe(&mut self, source: i32, tag: i32, context: u32) -> Result<Status> {
        let inner = &mut *self.inner;
        let want = inner.check_recv(source, tag, context)?;
        let mut waiter = Waiter::new(inner.cfg.wait, inner.spin);
        loop {
            if let Some(st) = inner.find_unexpected(want) {
                return Ok(st);
            }
            if want.source >= 0 && inner.peer(want.source as u32) == Peer::Silent {
                return Err(Error::PeerDied { rank: want.source as u32 });
            }
            inner.idle_step(&mut waiter, None)?;
        }
    }

    /// Reserves a message matching `(source, tag, context)` if one has arrived (MPI's
    /// `MPI_Improbe`): no other receive will match it; receive it with [`imrecv_raw`](
    /// Self::imrecv_raw) or [`mrecv`](Self::mrecv).
    pub fn improbe(&mut self, source: i32, tag: i32, context: u32) -> Result<Option<(Message, Status)>> {
        let inner = &mut *self.inner;
        let want = inner.check_recv(source, tag, context)?;
        inner.progress(None)?;
        if inner.find_unexpected(want).is_none() {
            inner.scan_every_fastbox()?;
        }
        Ok(inner.reserve_unexpected(want).map(|(id, st)| (Message { id, source: st.source }, st)))
    }

    /// Waits until a message matching `(source, tag, context)` has arrived and reserves it
    /// (MPI's `MPI_Mprobe`).
    pub fn mprobe(&mut self, source: i32, tag: i32, context: u32) -> Result<(Message, Status)> {
        let inner = &mut *self.inner;
        let want = inner.check_recv(source, tag, context)?;
        let mut waiter = Waiter::new(inner.cfg.wait, inner.spin);
        loop {
            if let Some((id, st)) = inner.reserve_unexpected(want) {
                return Ok((Message { id, source: st.source }, st));
            }
            if want.source >= 0 && inner.peer(want.source as u32) == Peer::Silent {
                return Err(Error::PeerDied { rank: want.source as u32 });
            }
            inner.idle_step(&mut waiter, None)?;
        }
    }

    /// Starts receiving reserved message `msg` into the `cap` bytes at `ptr` (MPI's `MPI_Imrecv`).
    ///
    /// # Safety
    /// As for [`irecv_raw`](Self::irecv_raw).
    pub unsafe fn imrecv_raw(&mut self, msg: Message, ptr: *mut u8, cap: usize) -> Result<Request> {
        self.inner.imrecv(msg, RecvBuf::bytes(ptr, cap))
    }

    /// Receives reserved message `msg` into `buf` (MPI's `MPI_Mrecv`).
    pub fn mrecv(&mut self, msg: Message, buf: &mut [u8]) -> Result<Status> {
        // SAFETY: `buf` outlives the request, which we wait for before returning.
        let req = unsafe { self.imrecv_raw(msg, buf.as_mut_ptr(), buf.len()) }?;
        self.inner.wait(req)
    }
}
