//! [`LmtBackend`] for [`TcpNetmod`]: after the rendezvous, a large message's data goes in DATA
//! frames of at most [`DATA_FRAME`] bytes, written from the sender's buffer and read into the
//! receiver's, so that messages queued behind a transfer are not held for all of it.
//!
//! Invariant: the buffers stay the caller's until the transfer is reported through
//! [`LmtBackend::take_lmt_done`] (moved, or failed with the peer's death).

use nemesis_lmt::{LmtBackend, NetDone};

use crate::TcpNetmod;
use crate::frame::{self, DATA_FRAME};
use crate::peer::{DataRecv, Link, Out, Tag};

impl LmtBackend for TcpNetmod<'_> {
    unsafe fn start_send(&mut self, peer: u32, id: u32, addr: *const u8, bytes: u64) -> nemesis_lmt::Result<()> {
        self.peer_index(peer).map_err(|e| nemesis_lmt::Error::Cma(e.to_string()))?;
        if self.ensure_link(peer).is_err() {
            return Err(nemesis_lmt::Error::PeerDied);
        }
        let mut offset = 0u64;
        while offset < bytes {
            let n = (bytes - offset).min(DATA_FRAME as u64) as usize;
            let end = (offset + n as u64 == bytes).then_some(bytes);
            let head = frame::data_head(id, offset, n);
            // SAFETY: `offset + n <= bytes`: inside the sender's buffer (the caller's contract).
            let ptr = unsafe { addr.add(offset as usize) };
            self.peers[peer as usize].out.push_back(Out::Data { head, ptr, len: n, at: 0, id, end, tag: Tag::NONE });
            offset += n as u64;
        }
        self.flush(peer);
        Ok(())
    }

    unsafe fn start_recv(
        &mut self,
        peer: u32,
        id: u32,
        dst: *mut u8,
        bytes: u64,
        _remote: Option<nemesis_lmt::RemoteBuf>,
    ) -> nemesis_lmt::Result<nemesis_lmt::RecvPlan> {
        self.peer_index(peer).map_err(|e| nemesis_lmt::Error::Cma(e.to_string()))?;
        let p = &mut self.peers[peer as usize];
        if matches!(p.link, Link::Dead | Link::Bye) {
            return Err(nemesis_lmt::Error::PeerDied);
        }
        if p.recvs.iter().any(|d| d.id == id) {
            return Err(nemesis_lmt::Error::Corrupt { what: "transfer id already expected", value: u64::from(id) });
        }
        p.recvs.push(DataRecv { id, dst, bytes, got: 0 });
        Ok(nemesis_lmt::RecvPlan::Stream)
    }

    fn take_lmt_done(&mut self) -> Vec<NetDone> {
        std::mem::take(&mut self.done)
    }
}
