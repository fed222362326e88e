//! The network module interface (`shared/reference/nemesis.md`, "Netmods";
//! `shared/ARCHITECTURE.md`, "Netmods"): inter-node traffic fitted into the intra-node model. A
//! netmod's arrivals go into cells of the receiving process's pool set aside for it (its netmod
//! free queue, in the segment) and are enqueued on the process's own receive queue, so the
//! process polls one place whatever the source; the sending side is the same call for every
//! peer, with a direct send when the netmod has nothing queued for that peer.
//!
//! The NEMESIS interface, as methods: `init` is the netmod's constructor, which yields its
//! business card ([`Netmod::card`]); [`connect`](Netmod::connect) records a peer's card and
//! connects lazily, on first use; [`send`](Netmod::send); [`poll`](Netmod::poll) (arrivals and
//! queued sends; there is no `recv`); [`finalize`](Netmod::finalize). A remote peer's death
//! comes through the receive queue too ([`KIND_PEER_GONE`]), after its last arrivals.
//!
//! What every netmod needs besides: [`heartbeat`] (the failure detector) and [`addr`] (this
//! machine's IP addresses).

pub mod addr;
pub mod heartbeat;

use crate::cell::MsgHeader;
use crate::error::Result;
use crate::node::Node;
use crate::port::{NetCell, Port};

/// Where a netmod puts arrivals: the receive queue of its process (a [`Port`]).
pub trait Inbox<'n> {
    /// A cell for an arrival, or `None` if all the netmod's cells are in use (the netmod then
    /// leaves data in its socket until the process releases some: flow control).
    fn cell(&mut self) -> Result<Option<NetCell<'n>>>;
    /// Payload bytes one cell carries for a message with header `hdr`.
    fn cell_payload(&self, hdr: &MsgHeader) -> usize;
    /// Enqueues a filled cell as fragment `frag` of message `hdr` (`src`: the sender's global
    /// rank; `len`: the whole message's length).
    fn deliver(&mut self, cell: NetCell<'n>, hdr: &MsgHeader, frag: u16) -> Result<()>;
    /// Gives back a cell taken but not delivered.
    fn recycle(&mut self, cell: NetCell<'n>) -> Result<()>;
}

impl<'n, N: Node> Inbox<'n> for Port<'n, N> {
    fn cell(&mut self) -> Result<Option<NetCell<'n>>> {
        self.netmod_cell()
    }
    fn cell_payload(&self, hdr: &MsgHeader) -> usize {
        self.netmod_cell_payload(hdr)
    }
    fn deliver(&mut self, cell: NetCell<'n>, hdr: &MsgHeader, frag: u16) -> Result<()> {
        self.netmod_deliver(cell, hdr, frag)
    }
    fn recycle(&mut self, cell: NetCell<'n>) -> Result<()> {
        self.netmod_recycle(cell)
    }
}

/// Message kind of a netmod's notice, delivered through the receive queue like an arrival, that
/// the remote peer named by the header's `src` is gone (its connection was reset or closed without
/// a goodbye, it stopped answering heartbeats, or it broke the protocol). It comes after
/// everything that peer's connection delivered, so once the layer above sees it nothing more from
/// that peer can arrive. The layer above defines every other kind; it must not use this one.
pub const KIND_PEER_GONE: u8 = 0xff;

/// A network module, driven by one thread (the process's progress engine). `'n` is the lifetime
/// of the node its arrivals go to.
pub trait Netmod<'n> {
    /// This process's business card: what peers need to reach it (published through PMI).
    fn card(&self) -> String;
    /// Records the card of global rank `rank`; the connection is made on first use.
    fn connect(&mut self, rank: u32, card: &str) -> Result<()>;
    /// Sends a message (the header's `len` is `payload.len()`) to global rank `dst`: written to
    /// the network at once when nothing is queued for `dst`, else queued (copied) behind what is,
    /// so messages to one peer keep their order. The payload may be reused on return.
    fn send(&mut self, dst: u32, hdr: &MsgHeader, payload: &[u8]) -> Result<()>;
    /// Moves arrivals into `inbox` and pushes queued sends. True if anything happened.
    fn poll(&mut self, inbox: &mut dyn Inbox<'n>) -> Result<bool>;
    /// True while sends are queued.
    fn busy(&self) -> bool;
    /// Flushes queued sends, says goodbye to connected peers and closes.
    fn finalize(&mut self) -> Result<()>;
}
