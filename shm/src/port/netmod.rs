//! The hand-over from network modules: cells of our pool set aside in our netmod free queue
//! ([`Port::netmod_reserve`]), filled by a netmod ([`NetCell`]) and enqueued on our own receive
//! queue flagged `NETMOD` ([`Port::netmod_deliver`]), where [`Port::poll`] finds them in queue
//! order with `src == REMOTE`; released, they go back to the netmod free queue.
//!
//! Invariants: only we enqueue our own cells flagged `NETMOD` on our queue, so a flagged cell of
//! another pool is corrupt; local sends and network arrivals draw on separate free queues, so
//! neither starves the other.

use core::ptr;

use crate::arena::{Arena, CellRef};
use crate::cell::{HEADER_BYTES, MsgHeader, custody, flags};
use crate::error::{Error, Result};
use crate::node::Node;
use crate::sync::Ordering::*;

use super::{Incoming, Port, REMOTE};

/// A cell of our pool set aside for network arrivals, taken from our netmod free queue to be
/// filled by a netmod and delivered with [`Port::netmod_deliver`].
#[derive(Debug)]
pub struct NetCell<'n> {
    cell: CellRef<'n>,
    body: usize,
}

impl NetCell<'_> {
    /// The bytes after the header: the fault-tolerance room if the message has a piggyback
    /// ([`flags::FT_PIGGYBACK`]), then the fragment's payload.
    pub fn after_header(&mut self) -> &mut [u8] {
        // SAFETY: the cell is ours alone until delivered (taken from our netmod free queue); its
        // body holds `body` bytes, the first `HEADER_BYTES` for the header.
        unsafe { core::slice::from_raw_parts_mut(self.cell.body().add(HEADER_BYTES), self.body - HEADER_BYTES) }
    }
}

impl<'n, N: Node> Port<'n, N> {
    /// A network arrival in our receive queue: checked to be one of our own cells (only we
    /// enqueue those: our netmods), then delivered in queue order.
    #[cold]
    pub(super) fn netmod_fragment(
        &mut self,
        c: CellRef<'n>,
        owner: u16,
        hdr: MsgHeader,
    ) -> Result<Option<Incoming<'n>>> {
        if owner != self.me {
            return Err(Error::corrupt("netmod flag in a peer's cell", c.handle()));
        }
        let inc = self.cell_fragment(c, REMOTE, hdr)?;
        self.node.recv_queue(self.me).pop(c, self.node)?;
        if !self.markers.is_empty() {
            self.note_dequeued(c);
        }
        Ok(Some(inc))
    }

    /// Sets aside up to `n` cells of our pool for network arrivals (moving them from our free
    /// queue to our netmod free queue); returns how many were moved. Netmods fill them in
    /// [`netmod_cell`](Self::netmod_cell) and they come back there once the arrival is released,
    /// so local sends and network arrivals never starve each other.
    pub fn netmod_reserve(&mut self, n: usize) -> Result<usize> {
        let nq = self.node.netmod_free_queue(self.me);
        let mut moved = 0;
        while moved < n {
            let Some(c) = self.take_cell()? else { break };
            nq.enqueue(c, self.me, self.me)?;
            moved += 1;
        }
        Ok(moved)
    }

    /// A cell for a network arrival, or `None` if all are in use (the netmod then leaves data in
    /// its socket: flow control).
    pub fn netmod_cell(&mut self) -> Result<Option<NetCell<'n>>> {
        let nq = self.node.netmod_free_queue(self.me);
        let Some(c) = nq.peek()? else { return Ok(None) };
        if !self.node.pool(self.me).contains(&c.handle()) {
            return Err(Error::corrupt("foreign cell in netmod free queue", c.handle()));
        }
        nq.pop(c, self.node)?;
        // ORDERING: Relaxed; custody is read by others only after we are gone.
        c.link().custody.store(custody(0, self.me), Relaxed);
        self.node.arena().note_write(c.handle());
        Ok(Some(NetCell { cell: c, body: self.cell_body }))
    }

    /// Bytes of payload a netmod cell carries for a message with header `hdr` (its piggyback
    /// flag decides).
    pub fn netmod_cell_payload(&self, hdr: &MsgHeader) -> usize {
        self.cell_body - hdr.payload_offset()
    }

    /// Gives back a netmod cell taken but not delivered.
    pub fn netmod_recycle(&mut self, cell: NetCell<'n>) -> Result<()> {
        self.node.netmod_free_queue(self.me).enqueue(cell.cell, self.me, self.me)
    }

    /// Enqueues a filled netmod cell on our receive queue as fragment `frag` of the message
    /// `hdr` (`src`: the remote sender's global rank; `len`: the whole message's length). The
    /// netmod fills [`NetCell::after_header`] first: for fragment `k`, payload bytes
    /// `k * cap ..` with `cap = netmod_cell_payload(hdr)`.
    pub fn netmod_deliver(&mut self, cell: NetCell<'n>, hdr: &MsgHeader, frag: u16) -> Result<()> {
        let mut h = *hdr;
        h.flags |= flags::NETMOD;
        h.frag = frag;
        // SAFETY: the cell is ours alone until enqueued; its body starts with room for a header.
        unsafe { ptr::write_unaligned(cell.cell.body() as *mut MsgHeader, h) };
        self.node.recv_queue(self.me).enqueue(cell.cell, self.me, self.me)
    }
}
