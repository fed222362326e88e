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

use crate::cell::{FT_ROOM, MsgHeader, PiggybackBytes, flags, ft_room};
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
    /// Sends a message (the header's `len` is `payload.len()`) to global rank `dst`, with the
    /// fault-tolerance piggyback `ft` if given (the receiver's cell then has
    /// [`crate::cell::flags::FT_PIGGYBACK`], the header's [`crate::cell::flags::FT_STAMP`], and the
    /// piggyback in its room ([`crate::cell::ft_room`], [`crate::cell::ft_flags`]), as a local message
    /// would): written to the network at once when nothing is queued for `dst`,
    /// else queued (copied) behind what is, so messages to one peer keep their order. The payload
    /// may be reused on return.
    fn send(&mut self, dst: u32, hdr: &MsgHeader, ft: Option<&PiggybackBytes>, payload: &[u8]) -> Result<()>;
    /// Moves arrivals into `inbox` and pushes queued sends. True if anything happened.
    fn poll(&mut self, inbox: &mut dyn Inbox<'n>) -> Result<bool>;
    /// True while sends are queued.
    fn busy(&self) -> bool;
    /// Flushes queued sends, says goodbye to connected peers and closes.
    fn finalize(&mut self) -> Result<()>;

    /// This process is incarnation `incarnation` of its rank number (a rank restarted by fault
    /// tolerance's recovery, `crate::incarnation`); its connections say so. Called before any
    /// connection is made. Netmods that cannot restart peers ignore it.
    fn set_incarnation(&mut self, _incarnation: u32) {}

    /// Recovery: remote rank `rank` is dead and will be restarted. Its connection, what is queued
    /// for it and its transfers are dropped, its card forgotten, its heartbeats no longer
    /// watched; unless it was already declared dead, a [`KIND_PEER_GONE`] notice follows its last
    /// arrival in the receive queue (as for any death). Nothing of it is accepted again before
    /// [`restarted`](Netmod::restarted) names its next incarnation.
    fn retire(&mut self, rank: u32) -> Result<()> {
        Err(crate::Error::Net(format!("this netmod cannot retire rank {rank} for a restart")))
    }

    /// Recovery: remote rank `rank` runs again as incarnation `incarnation`, reached at `card`.
    /// True if this process had retired an older incarnation (the peer restarted, from its point
    /// of view); false if it only learns the card (it was itself restarted with `rank`).
    fn restarted(&mut self, rank: u32, incarnation: u32, card: &str) -> Result<bool> {
        let _ = (incarnation, card);
        Err(crate::Error::Net(format!("this netmod cannot reconnect to a restarted rank {rank}")))
    }
}

/// A message from a remote peer being put into cells of the receive queue as its bytes come (a
/// cell is delivered when full or when the message ends; an empty message still takes one): the
/// receiving half every netmod shares.
pub struct Arrival<'n> {
    hdr: MsgHeader,
    /// Bytes of fault-tolerance room behind the header, and their content.
    room: usize,
    ft: [u8; FT_ROOM],
    /// Message bytes not yet received.
    left: usize,
    /// Fragment (cell) being filled, and the payload one cell takes.
    frag: u16,
    cap: usize,
    cell: Option<NetCell<'n>>,
    filled: usize,
}

impl<'n> Arrival<'n> {
    /// A message with header `hdr` (only its piggyback flags are kept; `len` is the whole
    /// message's) whose fault-tolerance room holds `ft` (empty without the flag).
    pub fn new(hdr: &MsgHeader, ft: &[u8], inbox: &dyn Inbox<'n>) -> Arrival<'n> {
        let mut h = *hdr;
        h.flags &= flags::FT_PIGGYBACK | flags::FT_STAMP | flags::FT_STAMP_SHORT;
        h.seq = 0;
        h.frag = 0;
        let room = ft_room(h.flags);
        let mut room_bytes = [0u8; FT_ROOM];
        let n = ft.len().min(room);
        room_bytes[..n].copy_from_slice(&ft[..n]);
        Arrival {
            hdr: h,
            room,
            ft: room_bytes,
            left: h.len as usize,
            frag: 0,
            cap: inbox.cell_payload(&h),
            cell: None,
            filled: 0,
        }
    }

    /// The message's header.
    pub fn header(&self) -> &MsgHeader {
        &self.hdr
    }

    /// Message bytes still to come.
    pub fn left(&self) -> usize {
        self.left
    }

    /// True once every cell of the message is delivered.
    pub fn is_whole(&self) -> bool {
        self.left == 0 && self.frag > 0
    }

    /// True while a cell is held for the next bytes.
    pub fn has_cell(&self) -> bool {
        self.cell.is_some()
    }

    /// The cell held, if any (the message is abandoned: its peer died).
    pub fn into_cell(self) -> Option<NetCell<'n>> {
        self.cell
    }

    /// Puts `data`, the next bytes of the message, into cells, taking them from `spare` first,
    /// then from `inbox`. Returns the bytes used: fewer than given when no cell is free (flow
    /// control: the caller keeps the rest). `Err` says what went wrong with the cells.
    pub fn feed(
        &mut self,
        data: &[u8],
        spare: &mut Vec<NetCell<'n>>,
        inbox: &mut dyn Inbox<'n>,
    ) -> core::result::Result<usize, String> {
        let mut used = 0;
        while !self.is_whole() {
            // This cell's length: what is left of the message, up to a cell.
            let want = (self.left + self.filled).min(self.cap);
            if self.cell.is_none() {
                let c = match spare.pop() {
                    Some(c) => c,
                    None => match inbox.cell() {
                        Ok(Some(c)) => c,
                        Ok(None) => return Ok(used),
                        Err(e) => return Err(format!("netmod cells: {e}")),
                    },
                };
                self.cell = Some(c);
                self.filled = 0;
            }
            let Some(c) = self.cell.as_mut() else { return Ok(used) };
            let body = c.after_header();
            if body.len() < self.room + want {
                return Err("cell smaller than its payload".into());
            }
            body[..self.room].copy_from_slice(&self.ft[..self.room]);
            let n = (want - self.filled).min(data.len() - used);
            body[self.room + self.filled..self.room + self.filled + n].copy_from_slice(&data[used..used + n]);
            used += n;
            self.filled += n;
            self.left -= n;
            if self.filled < want {
                // The rest of this cell comes with the next bytes.
                return Ok(used);
            }
            let Some(c) = self.cell.take() else { return Ok(used) };
            inbox.deliver(c, &self.hdr, self.frag).map_err(|e| format!("delivery: {e}"))?;
            self.frag = self.frag.checked_add(1).ok_or("too many fragments")?;
            self.filled = 0;
        }
        Ok(used)
    }
}

/// Puts the notices of the deaths in `deaths` (remote ranks, in order) into the receive queue of
/// rank `me`, as cells allow (a notice that finds no cell waits for the next call), then gives
/// back the cells of arrivals that never completed (`spare`). True if a notice went.
pub fn announce_deaths<'n>(
    me: u32,
    deaths: &mut Vec<u32>,
    spare: &mut Vec<NetCell<'n>>,
    inbox: &mut dyn Inbox<'n>,
) -> Result<bool> {
    let mut any = false;
    while let Some(&rank) = deaths.first() {
        let cell = match spare.pop() {
            Some(c) => c,
            None => match inbox.cell()? {
                Some(c) => c,
                None => break,
            },
        };
        let hdr = MsgHeader { src: rank, dst: me, kind: KIND_PEER_GONE, ..MsgHeader::default() };
        inbox.deliver(cell, &hdr, 0)?;
        deaths.remove(0);
        any = true;
    }
    while let Some(c) = spare.pop() {
        inbox.recycle(c)?;
    }
    Ok(any)
}
