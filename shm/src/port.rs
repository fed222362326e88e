//! A rank's port onto its node: the API the layer above sends and receives with.
//!
//! - **Send**: [`Port::send`] tries the pair's fastbox, then cells from the rank's own free queue
//!   (several cells for a long message), enqueued on the receiver's queue. When cells run out it
//!   returns a [`PendingSend`] that [`Port::resume`] continues once cells come back; a later
//!   message to the same peer waits behind it.
//! - **Receive**: [`Port::poll`] returns the next message fragment in per-pair order: fastboxes of
//!   the sources the caller expects first, then the receive queue (through the shadow head), and
//!   every few polls all hosted fastboxes (for `ANY_SOURCE`). The caller copies the payload out
//!   and calls [`Port::release`], which frees the slot or returns the cell to its owner.
//! - **Order**: every message carries a per-pair sequence number. A fastbox message is taken only
//!   when it is the next expected from its sender; a cell that arrives ahead of the expected
//!   number waits while the fastbox messages before it (written before it, so visible) are
//!   delivered.
//! - **Failures** ([`Port::check_peers`], run every few polls): peers that ended are noticed
//!   through the death epoch; a queue whose producer died between swap and link is repaired; the
//!   receive queue of a dead rank is sealed and drained by one live rank, which returns each cell
//!   to its owner; each owner then takes back its own cells that the dead rank had taken out
//!   ("Reclaim" below); a dead sender's fastbox is freed once it holds nothing more to deliver
//!   (a message published in it waits for its number, even behind cells still in the queue); a
//!   message a dead sender left half-sent is reported dropped ([`PeerEvent::PartialDropped`]) once
//!   the queue has passed everything the sender enqueued, whichever message the receiver was at,
//!   so the layer above never delivers part of it.
//! - **Flow control** ([`Port::withhold_acks`]): the layer above may stop acknowledging fastbox
//!   messages and keep cells unreleased; a sender then runs out of both and waits.
//!
//! # Reclaim
//!
//! After rank `d` is gone and its receive queue drained, a cell of a live owner `o` can be lost
//! only in two ways, both visible in its custody word, which only `o` writes while it holds the
//! cell: custody "receive queue of `d`" (the queue is drained, so `d` had taken the cell out and
//! not returned it), or custody "free queue of `o`, by `d`" with the cell not swapped in (`d` died
//! returning it). Owner `o` checks its own pool for both, between its own operations, and puts
//! those cells back into its free queue. Cells a live rank holds carry other custodies.

use core::marker::PhantomData;
use core::ptr;

use crate::arena::{Arena, CellRef};

use crate::cell::{
    CellHandle, FT_PIGGYBACK_BYTES, FT_ROOM, HEADER_BYTES, MsgHeader, NULL, PiggybackBytes, copy_bytes, custody,
    custody_queue, flags, tail_gen, tail_handle,
};
use crate::error::{Error, Result};
use crate::fastbox::{FastboxRef, Published};
use crate::node::{DRAIN_DONE, Node, free_queue_id, recv_queue_id};
use crate::pieces::{Payload, Pieces};
use crate::queue::Liveness;
use crate::sync::Ordering::*;

/// [`Incoming::src`] of a network arrival: the sender is remote, its global rank is the header's
/// `src`.
pub const REMOTE: u16 = u16::MAX;

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

/// Tunables of a port that do not change the segment layout.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PortConfig {
    /// Messages a sender sends to a peer through cells before it claims a fastbox hosted by that
    /// peer (Open MPI: 16).
    pub fastbox_after: u32,
    /// Polls between scans of every hosted fastbox (for `ANY_SOURCE`); a power of two.
    pub scan_every: u32,
    /// Polls between liveness checks; a power of two.
    pub check_every: u32,
}

impl Default for PortConfig {
    fn default() -> Self {
        PortConfig { fastbox_after: 16, scan_every: 16, check_every: 1024 }
    }
}

/// Result of [`Port::send`].
#[derive(Debug)]
#[must_use = "a pending send must be resumed or its message never completes"]
pub enum Sent {
    /// The message is on its way: written into a fastbox or enqueued in cells.
    Done,
    /// Cells ran out (or an earlier message to the same peer is still pending): resume it with
    /// [`Port::resume`] and the same payload.
    Pending(PendingSend),
}

/// A message not yet fully handed over.
#[derive(Debug, Clone)]
pub struct PendingSend {
    dst: u16,
    hdr: MsgHeader,
    /// The message's number among those to `dst` (`hdr.seq` is its low 32 bits).
    seq: u64,
    /// The piggyback, if `hdr` has [`flags::FT_PIGGYBACK`] (zeros otherwise).
    ft: PiggybackBytes,
    /// Payload bytes already enqueued.
    offset: usize,
}

impl PendingSend {
    /// Destination local rank.
    pub fn dst(&self) -> u16 {
        self.dst
    }
    /// The message's header (with its sequence number).
    pub fn header(&self) -> &MsgHeader {
        &self.hdr
    }
    /// Bytes handed over so far.
    pub fn offset(&self) -> usize {
        self.offset
    }

    /// The piggyback the message carries, if any.
    pub fn piggyback(&self) -> Option<&PiggybackBytes> {
        (self.hdr.flags & flags::FT_PIGGYBACK != 0).then_some(&self.ft)
    }
}

/// A received fragment: a whole message from a fastbox, or one cell of a message. It points at the
/// header and payload where they lie (slot or cell), in the node's memory (lifetime `'n`), until it
/// is released.
///
/// Neither `Copy` nor `Clone`: [`Port::release`] consumes it, so a slot or cell is released once,
/// and nothing reads it after the sender may have reused it. It remembers the port that polled
/// it; another port refuses it ([`Error::ForeignFragment`]), so it cannot be released on another
/// node's port (whose cells it does not name) or another rank's.
///
/// ```
/// use nemesis_shm::{Error, HeapNode, MsgHeader, Params, Port, PortConfig};
///
/// let (n1, n2) = (HeapNode::new(2, Params::DEFAULT).unwrap(), HeapNode::new(2, Params::DEFAULT).unwrap());
/// let mut a = Port::new(&n1, 0, PortConfig::default()).unwrap();
/// let mut b = Port::new(&n1, 1, PortConfig::default()).unwrap();
/// let mut other = Port::new(&n2, 1, PortConfig::default()).unwrap();
/// let _ = a.send(1, &MsgHeader::default(), None, b"x").unwrap();
/// let inc = b.poll(&[0]).unwrap().unwrap();
/// assert!(matches!(other.release(inc), Err(Error::ForeignFragment)));
/// ```
///
/// Released twice, it does not compile:
///
/// ```compile_fail
/// # use nemesis_shm::{HeapNode, MsgHeader, Params, Port, PortConfig};
/// # let node = HeapNode::new(2, Params::DEFAULT).unwrap();
/// # let mut a = Port::new(&node, 0, PortConfig::default()).unwrap();
/// # let mut b = Port::new(&node, 1, PortConfig::default()).unwrap();
/// # let _ = a.send(1, &MsgHeader::default(), None, b"x").unwrap();
/// let inc = b.poll(&[0]).unwrap().unwrap();
/// b.release(inc).unwrap();
/// b.release(inc).unwrap(); // use of a moved value
/// ```
///
/// Nor does keeping it past its node:
///
/// ```compile_fail
/// # use nemesis_shm::{HeapNode, MsgHeader, Params, Port, PortConfig};
/// let inc = {
///     let node = HeapNode::new(2, Params::DEFAULT).unwrap();
///     let mut a = Port::new(&node, 0, PortConfig::default()).unwrap();
///     let mut b = Port::new(&node, 1, PortConfig::default()).unwrap();
///     let _ = a.send(1, &MsgHeader::default(), None, b"x").unwrap();
///     b.poll(&[0]).unwrap().unwrap()
/// }; // `node` dropped here while borrowed
/// let _ = inc.tag();
/// ```
#[derive(Debug)]
#[must_use = "a fragment holds its slot or cell until released"]
pub struct Incoming<'n> {
    /// The header in the slot or cell. Only fields that need no validation are read through it;
    /// the lengths below were checked when the fragment was polled.
    hdr: *const MsgHeader,
    payload: *const u8,
    /// Length of the whole message.
    len: u32,
    /// Offset of this fragment's payload in the message.
    offset: u32,
    /// Length of this fragment's payload.
    frag_len: u32,
    /// The cell holding the fragment, or [`NULL`] for a fastbox slot.
    cell: CellHandle,
    /// Local rank of the sender (from the fastbox or the cell's pool, never from the header), or
    /// [`REMOTE`] for a network arrival (whose header's `src` is the sender's global rank).
    pub src: u16,
    last: bool,
    /// Id of the port that polled it.
    port: u64,
    /// The slot or cell lies in the node's memory, borrowed for `'n`.
    _node: PhantomData<&'n ()>,
}

// SAFETY: the pointers refer to shared memory that stays ours until `release`; nothing is tied to
// a thread.
unsafe impl Send for Incoming<'_> {}

impl<'n> Incoming<'n> {
    #[inline(always)]
    fn from_fastbox(src: u16, m: &Published, port: u64) -> Incoming<'n> {
        let (hdr, len, payload) = (m.hdr, m.len, m.payload);
        Incoming { hdr, payload, len, offset: 0, frag_len: len, cell: NULL, src, last: true, port, _node: PhantomData }
    }

    /// A copy of the message header (`len` is the whole message's).
    #[inline(always)]
    pub fn header(&self) -> MsgHeader {
        // SAFETY: `hdr` points to a header in a slot or cell that stays ours until `release`.
        let mut h = unsafe { ptr::read_unaligned(self.hdr) };
        h.len = self.len;
        h
    }

    /// The tag.
    #[inline(always)]
    pub fn tag(&self) -> i32 {
        // SAFETY: as in `header`.
        unsafe { ptr::read_unaligned(ptr::addr_of!((*self.hdr).tag)) }
    }

    /// The context id.
    #[inline(always)]
    pub fn context(&self) -> u32 {
        // SAFETY: as in `header`.
        unsafe { ptr::read_unaligned(ptr::addr_of!((*self.hdr).context)) }
    }

    /// The message kind (defined by the layer above).
    #[inline(always)]
    pub fn kind(&self) -> u8 {
        // SAFETY: as in `header`.
        unsafe { ptr::read_unaligned(ptr::addr_of!((*self.hdr).kind)) }
    }

    /// The kind-specific word of the header.
    #[inline(always)]
    pub fn aux(&self) -> u32 {
        // SAFETY: as in `header`.
        unsafe { ptr::read_unaligned(ptr::addr_of!((*self.hdr).aux)) }
    }

    /// The header's kind (low byte) and flags (high byte) in one word, one load: one comparison
    /// tells a plain message of a kind (no flag) from everything else.
    #[inline(always)]
    pub fn kind_flags(&self) -> u16 {
        // SAFETY: as in `header`; `kind` and `flags` are adjacent bytes of the `repr(C)` header
        // (kind first, checked in `cell.rs`), read as one little-endian word.
        u16::from_le(unsafe { ptr::read_unaligned(ptr::addr_of!((*self.hdr).kind) as *const u16) })
    }

    /// The fault-tolerance piggyback the message carries ([`flags::FT_PIGGYBACK`]), if any. Every
    /// fragment of a message carries the same one.
    #[inline(always)]
    pub fn piggyback(&self) -> Option<PiggybackBytes> {
        // SAFETY: as in `header`.
        let fl = unsafe { ptr::read_unaligned(ptr::addr_of!((*self.hdr).flags)) };
        if fl & flags::FT_PIGGYBACK == 0 {
            return None;
        }
        // SAFETY: a flagged fragment was validated (when polled) to hold the room after its
        // header inside its slot or cell: the payload starts `FT_ROOM` bytes after it.
        Some(unsafe { ptr::read_unaligned((self.hdr as *const u8).add(HEADER_BYTES) as *const PiggybackBytes) })
    }

    /// Length of the whole message.
    #[inline(always)]
    pub fn len(&self) -> usize {
        self.len as usize
    }

    /// True for a zero-byte message.
    #[inline(always)]
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Offset of this fragment's payload in the message.
    #[inline(always)]
    pub fn offset(&self) -> usize {
        self.offset as usize
    }

    /// Length of this fragment's payload.
    #[inline(always)]
    pub fn frag_len(&self) -> usize {
        self.frag_len as usize
    }

    /// True if this is the message's last fragment.
    #[inline(always)]
    pub fn is_last(&self) -> bool {
        self.last
    }

    /// True if the message came through a fastbox.
    #[inline(always)]
    pub fn via_fastbox(&self) -> bool {
        self.cell == NULL
    }

    /// Copies the fragment's payload into `dst[..frag_len]` (or as much as fits).
    #[inline(always)]
    pub fn copy_to(&self, dst: &mut [u8]) -> usize {
        let n = (self.frag_len as usize).min(dst.len());
        // SAFETY: `payload` points to `frag_len` bytes validated against the slot or cell when the
        // fragment was polled; the slot stays ours until `release`.
        unsafe { copy_bytes(self.payload, dst.as_mut_ptr(), n) };
        n
    }

    /// Pointer to the fragment's `frag_len` payload bytes, valid until the fragment is released.
    pub fn payload_ptr(&self) -> *const u8 {
        self.payload
    }
}

/// Something the port learned about a peer, for the layer above.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PeerEvent {
    /// The peer ended (died or finalized): sends to it fail with [`Error::PeerDead`].
    Gone {
        /// Its local rank.
        rank: u16,
    },
    /// Nothing more from the (gone) peer can be polled: everything it sent before it ended has
    /// been delivered. Receives that name it can now fail.
    Silent {
        /// Its local rank.
        rank: u16,
    },
    /// The peer died in the middle of a multi-cell message, which will never complete: the
    /// fragments already polled must be discarded.
    PartialDropped {
        /// Its local rank.
        rank: u16,
        /// The message's sequence number.
        seq: u32,
    },
    /// A peer this port retired ([`Port::retire_peer`]) runs again as a new incarnation
    /// ([`crate::incarnation`]): sends to it work again, and what arrives from it starts at
    /// sequence number 0.
    Restarted {
        /// Its local rank.
        rank: u16,
    },
}

/// Sender state toward one peer (private to this process).
#[derive(Clone, Copy, Default)]
struct Tx<'n> {
    /// Number of the next message to this peer: the messages sent to it so far. Its low 32 bits
    /// are the header's sequence number.
    seq: u64,
    /// Messages accepted but not fully handed over (waiting for cells): the oldest of them is
    /// number `seq - queued`. 0 when idle: one comparison on the inline path, and sending there
    /// bumps `seq` alone.
    queued: u64,
    /// Payload bytes of the messages sent to this peer so far (with `seq`, the traffic counters of
    /// a communication matrix: one addition on the send path).
    bytes: u64,
    /// Messages sent to this peer, for the fastbox claim.
    sent: u32,
    /// Our fastbox at this peer, once claimed.
    fb: Option<FastboxRef<'n>>,
    /// Index of our next message in that box.
    fnext: u32,
    /// The receiver's ack count as we last read it.
    facked: u32,
    /// The peer is gone.
    gone: bool,
    /// A fastbox claim was attempted (and failed: all the peer's boxes were taken).
    claim_tried: bool,
}

/// Receiver state toward one peer.
#[derive(Clone, Copy, Default)]
struct Rx<'n> {
    /// Sequence number of the next message expected from this peer.
    expected: u32,
    /// Next fragment expected of the message being received (0: between messages);
    /// [`RETIRED_FRAG`] once the peer is retired, until its restart is observed.
    next_frag: u16,
    /// The box this peer owns among ours, once seen, and its index.
    fb: Option<FastboxRef<'n>>,
    fb_index: u32,
    /// Index of the next message to read from that box.
    fnext: u32,
}

/// What this port has done about a gone peer.
#[derive(Clone, Copy, Debug, Default)]
struct Gone {
    known: bool,
    drained: bool,
    reclaimed: bool,
    /// Our queue has been consumed past where it was when the death was seen.
    queue_passed: bool,
    /// [`PeerEvent::Silent`] was reported.
    silent: bool,
    /// The peer's incarnation when its death was seen.
    incarnation: u32,
    /// [`Port::retire_peer`] was called: a new incarnation is awaited.
    retired: bool,
}

/// A cell dequeued ahead of fastbox messages that precede it.
#[derive(Clone, Copy, Debug)]
struct Stashed {
    cell: CellHandle,
    src: u16,
    hdr: MsgHeader,
}

/// `Port::epoch` before the port looked at its peers for the first time.
const NO_EPOCH_SEEN: u64 = u64::MAX;

/// [`Rx::next_frag`] of a retired peer ([`Port::retire_peer`]): no fragment index (a message has
/// at most `u16::MAX` fragments, numbered from 0, and `next_frag` goes back to 0 after the last),
/// so the first cell or fastbox message of the peer's new incarnation fails the in-order tests of
/// the poll paths and reaches their slow end, where the restart is observed (if no death-epoch
/// check or send did it first): that poll reports [`PeerEvent::Restarted`] and returns nothing.
/// The messages come once the caller took that event ([`Port::take_events`] clears the mark).
/// So the layer above handles `Restarted` before it sees anything of the new incarnation (its
/// state for the peer is reset there: a message of the new incarnation taken for the dead one's
/// would be lost; loom `incarnation.rs`). The fast paths pay nothing.
const RETIRED_FRAG: u16 = u16::MAX;

/// What `poll_queue` calls a cell out of order (`Error::Corrupt`), which `queue_refused` looks at.
const OUT_OF_ORDER: &str = "cell sequence number";

/// A process's port onto a [`Node`] as local rank `me`. Driven by one thread at a time.
pub struct Port<'n, N: Node> {
    node: &'n N,
    me: u16,
    cfg: PortConfig,
    /// Bytes of a cell from its header on.
    cell_body: usize,
    /// One more than the largest payload sent through fastboxes; 0 when they are off.
    fbox_lim: usize,
    /// Largest message the cell path carries.
    max_message: usize,
    tx: Box<[Tx<'n>]>,
    rx: Box<[Rx<'n>]>,
    /// Owner word last seen for each box we host (0: free).
    box_owner: Box<[u32]>,
    stash: Option<Stashed>,
    polls: u32,
    epoch: u64,
    gone: Box<[Gone]>,
    events: Vec<PeerEvent>,
    /// Unique among the ports this process ever opened; recorded in every [`Incoming`].
    id: u64,
    /// Fastbox acknowledgements are withheld ([`withhold_acks`](Self::withhold_acks)).
    acks_withheld: bool,
    /// Dead senders whose cells may still be in our queue: `(src, tail value of our queue when
    /// the death was seen)`. Everything it enqueued was swapped in before that value; once our
    /// consumer has passed it, the message being received from it (whatever its number: the
    /// receiver may have lagged several messages behind when the death was seen) is partial and
    /// dropped, and the sender can become silent.
    markers: Vec<(u16, u64)>,
}

/// The ports open in this process, by `(node address, local rank)`, and the next port id.
struct OpenPorts {
    open: Vec<(usize, u16)>,
    next_id: u64,
}

static OPEN_PORTS: std::sync::Mutex<OpenPorts> = std::sync::Mutex::new(OpenPorts { open: Vec::new(), next_id: 1 });

/// Identifies a node while it is borrowed (its address).
fn node_key<N: Node>(node: &N) -> usize {
    node as *const N as usize
}

/// Records a port for `(node, rank)` and returns a fresh port id, or refuses a second one.
fn open_port(node: usize, rank: u16) -> Result<u64> {
    let mut o = OPEN_PORTS.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
    if o.open.contains(&(node, rank)) {
        return Err(Error::PortOpen { rank });
    }
    o.open.push((node, rank));
    o.next_id += 1;
    Ok(o.next_id)
}

impl<N: Node> Drop for Port<'_, N> {
    fn drop(&mut self) {
        let mut o = OPEN_PORTS.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        let key = (node_key(self.node), self.me);
        o.open.retain(|&k| k != key);
    }
}

impl<'n, N: Node> Port<'n, N> {
    /// A port for local rank `me`. The rank's liveness record is the caller's business (the
    /// segment's `attach` sets it).
    ///
    /// A rank has one consumer: while this port lives, another port for the same rank of the same
    /// node in this process is refused ([`Error::PortOpen`]); two would both take the rank's
    /// messages and release each other's slots.
    pub fn new(node: &'n N, me: u16, cfg: PortConfig) -> Result<Self> {
        node.check_rank(me)?;
        if !cfg.scan_every.is_power_of_two() || !cfg.check_every.is_power_of_two() {
            return Err(Error::InvalidParams("scan_every and check_every must be powers of two".into()));
        }
        let id = open_port(node_key(node), me)?;
        let n = node.ranks() as usize;
        let p = node.params();
        let cell_body = node.arena().body_size();
        Ok(Port {
            node,
            me,
            cfg,
            cell_body,
            fbox_lim: if p.fastboxes_per_rank == 0 { 0 } else { p.fastbox_payload() + 1 },
            max_message: (cell_body - HEADER_BYTES - crate::cell::FT_ROOM) * usize::from(u16::MAX),
            tx: vec![Tx::default(); n].into(),
            rx: vec![Rx::default(); n].into(),
            box_owner: vec![0; p.fastboxes_per_rank as usize].into(),
            stash: None,
            polls: 0,
            // Never an epoch the node reaches: the first `check_peers` scans every rank, so a peer
            // that was already gone when this port was made (it sent, died and was reaped while
            // this rank was still between its registration and here) is learnt like any other
            // death. Starting from the current epoch would miss it until another rank died.
            epoch: NO_EPOCH_SEEN,
            gone: vec![Gone::default(); n].into(),
            events: Vec::new(),
            id,
            acks_withheld: false,
            markers: Vec::new(),
        })
    }

    /// This port's local rank.
    pub fn rank(&self) -> u16 {
        self.me
    }

    /// The node.
    pub fn node(&self) -> &'n N {
        self.node
    }

    /// Largest payload a fastbox carries without a fault-tolerance piggyback (0 if fastboxes are
    /// off).
    pub fn fastbox_payload(&self) -> usize {
        self.fbox_lim.saturating_sub(1)
    }

    /// Stops (or resumes) sending through fastboxes: every message then goes in cells. Receiving
    /// is unaffected. For benchmarks and diagnosis.
    pub fn set_fastboxes(&mut self, on: bool) {
        let p = self.node.params();
        self.fbox_lim = if on && p.fastboxes_per_rank > 0 { p.fastbox_payload() + 1 } else { 0 };
    }

    /// Payload bytes one cell carries without a fault-tolerance piggyback.
    pub fn cell_payload(&self) -> usize {
        self.cell_body - HEADER_BYTES
    }

    /// Largest message the cell path carries (fragment indices are 16 bits).
    pub fn max_message(&self) -> usize {
        self.max_message
    }

    /// Sends `payload` to local rank `dst` with header `hdr` (its `seq`, `frag` and `len` are set
    /// here) and, for fault tolerance, the piggyback `ft`: the port then sets
    /// [`flags::FT_PIGGYBACK`] and writes it into the room after the header of the fastbox slot or
    /// of every cell. `hdr.flags` must not have that flag itself.
    ///
    /// The common case, a small message to a peer whose fastbox we hold and whose next slot is
    /// free, is done inline (with or without a piggyback); everything else in
    /// [`send_slow`](Self::send_slow).
    #[inline(always)]
    pub fn send(&mut self, dst: u16, hdr: &MsgHeader, ft: Option<&PiggybackBytes>, payload: &[u8]) -> Result<Sent> {
        self.send_from(dst, hdr, ft, payload)
    }

    /// The fused send of a plain message (kind `kind`, no flag; header `src`, `dst`, `tag`,
    /// `context`, `aux`: 0, or the token that names a non-blocking send for a cancellation): into our fastbox at local rank `to` when we hold one, no earlier message
    /// to `to` waits for cells, the payload fits a slot and the next slot is free. True if sent;
    /// false if nothing was done, and [`send`](Self::send) takes the message (it claims boxes,
    /// checks ranks and lengths, uses cells). A `to` that is no local rank (such as `u16::MAX`:
    /// local ranks are fewer) finds no entry and returns false.
    #[inline(always)]
    #[allow(clippy::too_many_arguments)]
    pub fn try_send_plain(
        &mut self,
        to: u16,
        src: u32,
        dst: u32,
        tag: i32,
        context: u32,
        kind: u8,
        aux: u32,
        payload: &[u8],
    ) -> bool {
        // A gone peer has no fastbox (`fb` is cleared when its death is noticed).
        if let Some(t) = self.tx.get_mut(usize::from(to))
            && let Some(fb) = t.fb.as_ref()
            && t.queued == 0
            && payload.len() < self.fbox_lim
            && fb.try_send_plain(&mut t.fnext, &mut t.facked, src, dst, tag, context, kind, aux, t.seq as u32, payload)
        {
            t.seq = t.seq.wrapping_add(1);
            t.bytes += payload.len() as u64;
            return true;
        }
        false
    }

    /// The fused receive of a plain message: the next message of local rank `from` if it waits in
    /// its fastbox in order (no stashed cell, no message of `from` half received) and is plain
    /// (kind `kind`, no flag) with context `context`, tag `tag` (any with `any_tag`), and at most
    /// `cap` bytes: copied to `dst` and released; returns its length and tag. `None` consumes
    /// nothing: the general path ([`poll`](Self::poll)) then takes whatever waits. A `from` that
    /// is no local rank returns `None`.
    ///
    /// # Safety
    /// `dst` is valid for `cap` bytes of writes (any pointer if `cap` is 0).
    #[inline(always)]
    #[allow(clippy::too_many_arguments)]
    pub unsafe fn take_plain(
        &mut self,
        from: u16,
        kind: u8,
        tag: i32,
        any_tag: bool,
        context: u32,
        dst: *mut u8,
        cap: usize,
    ) -> Option<(u32, i32)> {
        if self.stash.is_some() {
            return None;
        }
        let r = self.rx.get_mut(usize::from(from))?;
        let fb = r.fb.as_ref()?;
        if r.next_frag != 0 {
            return None;
        }
        // SAFETY: the caller's contract.
        let got = unsafe { fb.take_plain(&mut r.fnext, r.expected, kind, tag, any_tag, context, dst, cap) }?;
        r.expected = r.expected.wrapping_add(1);
        Some(got)
    }

    /// True if the next message of local rank `from` may still arrive in its fastbox: it has one
    /// into this port and its next slot is empty. False when it has none, or a message already
    /// waits there (one that [`take_plain`](Self::take_plain) declined stays declined however
    /// long the caller waits).
    #[inline(always)]
    pub fn fastbox_awaited(&self, from: u16) -> bool {
        let Some(r) = self.rx.get(usize::from(from)) else { return false };
        r.fb.as_ref().is_some_and(|fb| self.stash.is_none() && r.next_frag == 0 && !fb.published(r.fnext))
    }

    /// As [`send`](Self::send) for a payload in pieces, gathered as it is copied into the slot or
    /// the cells.
    #[inline]
    pub fn send_pieces(
        &mut self,
        dst: u16,
        hdr: &MsgHeader,
        ft: Option<&PiggybackBytes>,
        payload: &dyn Pieces,
    ) -> Result<Sent> {
        self.send_from(dst, hdr, ft, payload)
    }

    #[inline(always)]
    fn send_from<P: Payload + ?Sized>(
        &mut self,
        dst: u16,
        hdr: &MsgHeader,
        ft: Option<&PiggybackBytes>,
        payload: &P,
    ) -> Result<Sent> {
        let room = if ft.is_some() { FT_ROOM } else { 0 };
        // A gone peer has no fastbox (`fb` is cleared when its death is noticed).
        if let Some(t) = self.tx.get_mut(usize::from(dst))
            && let Some(fb) = t.fb
            && t.queued == 0
            && payload.len() + room < self.fbox_lim
            && hdr.flags & flags::FT_PIGGYBACK == 0
            && fb.try_send_from(&mut t.fnext, &mut t.facked, hdr, ft, t.seq as u32, payload)
        {
            t.seq = t.seq.wrapping_add(1);
            t.bytes += payload.len() as u64;
            return Ok(Sent::Done);
        }
        match ft {
            None => self.send_slow::<P, false>(dst, hdr, &[0; FT_PIGGYBACK_BYTES], payload),
            Some(pb) => self.send_slow::<P, true>(dst, hdr, pb, payload),
        }
    }

    /// Everything [`send`](Self::send) does not do inline: checks, the fastbox claim, cells. `FT`:
    /// with the piggyback `ft` (one instance each way, so that a port without fault tolerance runs
    /// no code of it).
    #[inline(never)]
    fn send_slow<P: Payload + ?Sized, const FT: bool>(
        &mut self,
        dst: u16,
        hdr: &MsgHeader,
        ft: &PiggybackBytes,
        payload: &P,
    ) -> Result<Sent> {
        self.node.check_rank(dst)?;
        if payload.len() > self.max_message {
            return Err(Error::TooLarge { len: payload.len(), max: self.max_message });
        }
        if self.tx[dst as usize].gone && !self.observe_restart(dst)? {
            return Err(Error::PeerDead { rank: dst });
        }
        let t = &mut self.tx[dst as usize];
        let mut h = *hdr;
        let seq = t.seq;
        h.seq = seq as u32;
        h.frag = 0;
        h.len = payload.len() as u32;
        if FT {
            h.flags |= flags::FT_PIGGYBACK;
        } else {
            h.flags &= !flags::FT_PIGGYBACK;
        }
        t.seq = t.seq.wrapping_add(1);
        t.sent = t.sent.wrapping_add(1);
        t.bytes += payload.len() as u64;
        let pending = |offset| Ok(Sent::Pending(PendingSend { dst, hdr: h, seq, ft: *ft, offset }));
        if t.queued != 0 {
            // An earlier message to `dst` is still pending: this one waits behind it.
            t.queued += 1;
            return pending(0);
        }
        if h.payload_offset() + payload.len() < HEADER_BYTES + self.fbox_lim
            && self.try_fastbox(dst, &h, FT.then_some(ft), payload)
        {
            return Ok(Sent::Done);
        }
        let mut offset = 0;
        if self.push_cells::<P, FT>(dst, &h, ft, &mut offset, payload)? {
            Ok(Sent::Done)
        } else {
            self.tx[dst as usize].queued += 1;
            pending(offset)
        }
    }

    /// Continues a pending send with the same payload. Returns true once the whole message is
    /// handed over. Pending sends to one peer must be resumed in the order they were returned;
    /// a later one makes no progress before the earlier ones completed.
    pub fn resume(&mut self, ps: &mut PendingSend, payload: &[u8]) -> Result<bool> {
        self.resume_from(ps, payload)
    }

    /// As [`resume`](Self::resume) for a send of [`send_pieces`](Self::send_pieces).
    pub fn resume_pieces(&mut self, ps: &mut PendingSend, payload: &dyn Pieces) -> Result<bool> {
        self.resume_from(ps, payload)
    }

    fn resume_from<P: Payload + ?Sized>(&mut self, ps: &mut PendingSend, payload: &P) -> Result<bool> {
        if self.tx[ps.dst as usize].gone && !self.observe_restart(ps.dst)? {
            return Err(Error::PeerDead { rank: ps.dst });
        }
        let t = &self.tx[ps.dst as usize];
        if t.seq.wrapping_sub(t.queued) != ps.seq {
            // Not the oldest message waiting for `dst`.
            return Ok(false);
        }
        let ft = ps.piggyback().copied();
        if ps.offset == 0
            && ps.hdr.payload_offset() + payload.len() < HEADER_BYTES + self.fbox_lim
            && self.try_fastbox(ps.dst, &ps.hdr.clone(), ft.as_ref(), payload)
        {
            self.tx[ps.dst as usize].queued -= 1;
            return Ok(true);
        }
        let (dst, hdr, pb) = (ps.dst, ps.hdr, ps.ft);
        let done = if ft.is_some() {
            self.push_cells::<P, true>(dst, &hdr, &pb, &mut ps.offset, payload)?
        } else {
            self.push_cells::<P, false>(dst, &hdr, &pb, &mut ps.offset, payload)?
        };
        if done {
            self.tx[ps.dst as usize].queued -= 1;
        }
        Ok(done)
    }

    /// Writes the message into our fastbox at `dst`, claiming one first if we have sent enough to
    /// `dst`. False if there is no box or its next slot is full. `h` has the piggyback flag
    /// exactly when `ft` is given.
    #[inline(always)]
    fn try_fastbox<P: Payload + ?Sized>(
        &mut self,
        dst: u16,
        h: &MsgHeader,
        ft: Option<&PiggybackBytes>,
        payload: &P,
    ) -> bool {
        let t = &mut self.tx[dst as usize];
        if t.fb.is_none() {
            // First attempt once `fastbox_after` messages went to `dst`, then every 1024 messages.
            if t.sent < self.cfg.fastbox_after || (t.claim_tried && !t.sent.is_multiple_of(1024)) || dst == self.me {
                return false;
            }
            t.claim_tried = true;
            if !self.claim_fastbox(dst) {
                return false;
            }
        }
        let t = &mut self.tx[dst as usize];
        match t.fb {
            Some(fb) => {
                let mut plain = *h;
                plain.flags &= !flags::FT_PIGGYBACK;
                fb.try_send_from(&mut t.fnext, &mut t.facked, &plain, ft, h.seq, payload)
            }
            None => false,
        }
    }

    /// Claims a free box among those `dst` hosts. Tried after `fastbox_after` messages and then
    /// every 1024 messages while none is free.
    #[cold]
    fn claim_fastbox(&mut self, dst: u16) -> bool {
        for b in 0..self.node.params().fastboxes_per_rank {
            // SAFETY: `dst` checked by the caller, `b` in range.
            let fb = unsafe { self.node.fastbox(dst, b) };
            // ORDERING: AcqRel; Acquire takes in the receiver's clearing of the box before it
            // freed it; Release orders our claim before the map entry below.
            if fb.owner().compare_exchange(0, u32::from(self.me) + 1, AcqRel, Relaxed).is_ok() {
                // ORDERING: Release; the receiver Acquires the map entry, then checks the owner.
                // SAFETY: both ranks checked.
                unsafe { self.node.fastbox_map(dst, self.me) }.store(b + 1, Release);
                let t = &mut self.tx[dst as usize];
                t.fb = Some(fb);
                t.fnext = 0;
                t.facked = 0;
                return true;
            }
        }
        false
    }

    /// Takes a cell from our free queue.
    #[inline]
    fn take_cell(&mut self) -> Result<Option<CellRef<'n>>> {
        let fq = self.node.free_queue(self.me);
        let Some(c) = fq.peek()? else { return Ok(None) };
        if !self.node.pool(self.me).contains(&c.handle()) {
            return Err(Error::corrupt("foreign cell in free queue", c.handle()));
        }
        fq.pop(c, self.node)?;
        // ORDERING: Relaxed; custody is read by others only after we are gone.
        c.link().custody.store(custody(0, self.me), Relaxed);
        Ok(Some(c))
    }

    /// Enqueues the rest of message `h` to `dst` from `*offset` in cells (with the piggyback `ft`
    /// if `FT`, which `h` is flagged for); false if cells ran out first.
    fn push_cells<P: Payload + ?Sized, const FT: bool>(
        &mut self,
        dst: u16,
        h: &MsgHeader,
        ft: &PiggybackBytes,
        offset: &mut usize,
        payload: &P,
    ) -> Result<bool> {
        let room = if FT { FT_ROOM } else { 0 };
        let cap = self.cell_body - HEADER_BYTES - room;
        let q = self.node.recv_queue(dst);
        loop {
            let Some(c) = self.take_cell()? else {
                return Ok(false);
            };
            let n = cap.min(payload.len() - *offset);
            let mut h = *h;
            h.frag = (*offset / cap) as u16;
            self.node.arena().note_write(c.handle());
            // SAFETY: `c` is ours (taken from our free queue) and its body holds a header, the
            // piggyback room if `FT` (`cap` is counted after it), and `cap` payload bytes.
            unsafe {
                let body = c.body();
                ptr::write_unaligned(body as *mut MsgHeader, h);
                if FT {
                    // The room: the piggyback, then zeros up to the payload.
                    let r = body.add(HEADER_BYTES);
                    ptr::write_bytes(r, 0, FT_ROOM);
                    ptr::write_unaligned(r as *mut PiggybackBytes, *ft);
                }
                payload.copy_out(*offset, body.add(HEADER_BYTES + room), n);
            }
            let enqueued = q.swap_in(c, self.me, dst).and_then(|s| {
                crate::failpoint!("send-after-swap");
                s.link()
            });
            if let Err(e) = enqueued {
                self.node.free_queue(self.me).enqueue(c, self.me, self.me)?;
                if let Error::PeerDead { rank } = e {
                    self.tx[rank as usize].gone = true;
                    self.tx[rank as usize].fb = None;
                }
                return Err(e);
            }
            *offset += n;
            if *offset >= payload.len() {
                return Ok(true);
            }
            crate::failpoint!("send-mid-message");
            crate::failpoint!("send-mid-message-to-{}", dst);
        }
    }

    /// Returns the next fragment in per-pair order, if any. `expected` lists the sources whose
    /// fastboxes are polled first (the sources of posted receives).
    ///
    /// A poll that finds the first message of a retired peer's new incarnation reports
    /// [`PeerEvent::Restarted`] and returns `None`; the new incarnation's messages come once that
    /// event was taken ([`take_events`](Self::take_events)). A caller that waits handles
    /// [`has_events`](Self::has_events) before it sleeps.
    ///
    /// The common case, the next message of an expected source waiting in its fastbox, is done
    /// inline; everything else in [`poll_slow`](Self::poll_slow).
    #[inline(always)]
    pub fn poll(&mut self, expected: &[u16]) -> Result<Option<Incoming<'n>>> {
        if self.stash.is_none() {
            for &src in expected {
                if let Some(r) = self.rx.get_mut(usize::from(src))
                    && let Some(fb) = r.fb
                    && r.next_frag == 0
                    && let Some(m) = fb.peek(r.fnext)?
                    && m.seq == r.expected
                {
                    r.expected = r.expected.wrapping_add(1);
                    return Ok(Some(Incoming::from_fastbox(src, &m, self.id)));
                }
            }
        }
        self.poll_slow(expected)
    }

    /// Only the inline part of [`poll`](Self::poll) for one source: its next message if it waits
    /// in its fastbox, in order. For tight waits on one source, between full polls.
    #[inline(always)]
    pub fn poll_fastbox(&mut self, src: u16) -> Result<Option<Incoming<'n>>> {
        if self.stash.is_none()
            && let Some(r) = self.rx.get_mut(usize::from(src))
            && let Some(fb) = r.fb
            && r.next_frag == 0
            && let Some(m) = fb.peek(r.fnext)?
            && m.seq == r.expected
        {
            r.expected = r.expected.wrapping_add(1);
            return Ok(Some(Incoming::from_fastbox(src, &m, self.id)));
        }
        Ok(None)
    }

    /// True if something other than fastbox messages waits to be polled: a cell in our queue, or a
    /// stashed cell. A tight wait on one fastbox should then fall back to a full [`poll`](Self::poll).
    #[inline(always)]
    pub fn has_queued(&self) -> bool {
        self.stash.is_some() || self.node.recv_queue(self.me).has_visible()
    }

    /// Everything [`poll`](Self::poll) does not do inline: the stash, fastbox discovery, the
    /// queue, and every few polls all hosted fastboxes and liveness.
    #[inline(never)]
    fn poll_slow(&mut self, expected: &[u16]) -> Result<Option<Incoming<'n>>> {
        self.polls = self.polls.wrapping_add(1);
        if self.stash.is_some() {
            return self.poll_stash();
        }
        for &src in expected {
            self.node.check_rank(src)?;
            // Boxes already known were polled inline by `poll`.
            if self.rx[usize::from(src)].fb.is_none()
                && let Some(i) = self.poll_fastbox_of(src)?
            {
                return Ok(Some(i));
            }
        }
        match self.poll_queue() {
            Ok(Some(i)) => return Ok(Some(i)),
            Ok(None) => {}
            Err(e) => {
                self.queue_refused(e)?;
                return Ok(None);
            }
        }
        if self.polls & (self.cfg.scan_every - 1) == 0
            && let Some(i) = self.scan_fastboxes()?
        {
            return Ok(Some(i));
        }
        if self.polls & (self.cfg.check_every - 1) == 0 {
            self.check_peers()?;
        }
        Ok(None)
    }

    /// Polls every fastbox now, whatever the schedule (the layer above calls this when it waits
    /// on `ANY_SOURCE` for long).
    pub fn scan_fastboxes(&mut self) -> Result<Option<Incoming<'n>>> {
        for b in 0..self.box_owner.len() as u32 {
            // SAFETY: `me` is valid and `b < fastboxes_per_rank`.
            let fb = unsafe { self.node.fastbox(self.me, b) };
            // ORDERING: Acquire; pairs with the claim, after which the sender writes slots.
            let owner = fb.owner().load(Acquire);
            if owner == 0 {
                continue;
            }
            let src = (owner - 1) as u16;
            self.node.check_rank(src).map_err(|_| Error::corrupt("fastbox owner", owner))?;
            self.adopt_box(fb, b, owner, src);
            if let Some(i) = self.take_from_box(src)? {
                return Ok(Some(i));
            }
        }
        Ok(None)
    }

    /// Records that box `b` belongs to `src`, starting to read it from its first message if it
    /// is new to us.
    fn adopt_box(&mut self, mut fb: FastboxRef<'n>, b: u32, owner: u32, src: u16) {
        let r = &mut self.rx[usize::from(src)];
        if self.box_owner[b as usize] != owner || r.fb.is_none() || r.fb_index != b {
            self.box_owner[b as usize] = owner;
            if self.acks_withheld {
                fb.withhold_acks(true, 0);
            }
            r.fb = Some(fb);
            r.fb_index = b;
            r.fnext = 0;
        }
    }

    /// Polls the fastbox `src` owns among ours, discovering it through the map if needed.
    fn poll_fastbox_of(&mut self, src: u16) -> Result<Option<Incoming<'n>>> {
        if self.rx[usize::from(src)].fb.is_none() {
            // SAFETY: both ranks checked.
            // ORDERING: Acquire; pairs with the claimant's Release store.
            let b = unsafe { self.node.fastbox_map(self.me, src) }.load(Acquire);
            if b == 0 {
                return Ok(None);
            }
            if b > self.node.params().fastboxes_per_rank {
                return Err(Error::corrupt("fastbox map entry", b));
            }
            // SAFETY: `b - 1 < fastboxes_per_rank`, checked above.
            let fb = unsafe { self.node.fastbox(self.me, b - 1) };
            // ORDERING: Acquire, as in `scan_fastboxes`.
            let owner = fb.owner().load(Acquire);
            if owner != u32::from(src) + 1 {
                return Ok(None);
            }
            self.adopt_box(fb, b - 1, owner, src);
        }
        self.take_from_box(src)
    }

    /// The message in `src`'s box, if it is the next expected from `src`.
    fn take_from_box(&mut self, src: u16) -> Result<Option<Incoming<'n>>> {
        let r = &mut self.rx[usize::from(src)];
        let Some(fb) = r.fb else { return Ok(None) };
        let Some(m) = fb.peek(r.fnext)? else { return Ok(None) };
        if m.seq != r.expected || r.next_frag != 0 {
            if r.next_frag == RETIRED_FRAG {
                // A box of a retired peer with a message in it is its new incarnation's (the dead
                // one's box was freed before the retirement): `Restarted` now, as for a cell.
                self.observe_restart(src)?;
            }
            return Ok(None);
        }
        r.expected = r.expected.wrapping_add(1);
        Ok(Some(Incoming::from_fastbox(src, &m, self.id)))
    }

    /// The first cell of our queue, if it is in order (or stashed behind fastbox messages).
    #[inline(always)]
    fn poll_queue(&mut self) -> Result<Option<Incoming<'n>>> {
        let q = self.node.recv_queue(self.me);
        let Some(c) = q.peek()? else { return Ok(None) };
        let src = self.node.owner_of(c.handle());
        self.node.arena().note_read(c.handle());
        // SAFETY: `peek` validated `c`; its body starts with a header.
        let hdr = unsafe { ptr::read_unaligned(c.body() as *const MsgHeader) };
        if hdr.flags & flags::NETMOD != 0 {
            return self.netmod_fragment(c, src, hdr);
        }
        let r = &mut self.rx[src as usize];
        if hdr.seq == r.expected && hdr.frag == r.next_frag {
            let inc = self.cell_fragment(c, src, hdr)?;
            crate::failpoint!("dequeue-before-pop");
            q.pop(c, self.node)?;
            self.advance(src, &inc);
            if !self.markers.is_empty() {
                self.note_dequeued(c);
            }
            return Ok(Some(inc));
        }
        if hdr.frag == 0 && r.next_frag == 0 && (hdr.seq.wrapping_sub(r.expected) as i32) > 0 {
            // Fastbox messages from `src` precede this cell: deliver them first. Its fields are
            // checked now; the stash makes it again when it is its turn.
            let _checked = self.cell_fragment(c, src, hdr)?;
            q.pop(c, self.node)?;
            if !self.markers.is_empty() {
                self.note_dequeued(c);
            }
            self.stash = Some(Stashed { cell: c.handle(), src, hdr });
            return self.poll_stash();
        }
        Err(Error::corrupt(OUT_OF_ORDER, hdr.seq))
    }

    /// `poll_queue` refused the cell at the head of our queue (`e`): it was neither the next
    /// fragment expected from its sender nor a message to stash behind fastbox messages. The
    /// first cell of a retired peer's new incarnation is such a cell (the dead one's were all
    /// polled before the retirement): `Restarted` now, the cell once that event was taken
    /// (`Ok`: the poll returns nothing). Any other is a faulty sender's: `e`. Out of
    /// `poll_queue`, whose hot path stays as it was.
    #[cold]
    #[inline(never)]
    fn queue_refused(&mut self, e: Error) -> Result<()> {
        if !matches!(e, Error::Corrupt { what: OUT_OF_ORDER, .. }) {
            return Err(e);
        }
        let Some(c) = self.node.recv_queue(self.me).peek()? else { return Err(e) };
        let src = self.node.owner_of(c.handle());
        if self.rx[usize::from(src)].next_frag == RETIRED_FRAG
            && (!self.gone[usize::from(src)].retired || self.observe_restart(src)?)
        {
            return Ok(());
        }
        Err(e)
    }

    /// Builds the fragment for cell `c`, validating its length fields.
    #[inline(always)]
    fn cell_fragment(&self, c: CellRef<'n>, src: u16, hdr: MsgHeader) -> Result<Incoming<'n>> {
        let cap = self.cell_body - hdr.payload_offset();
        let offset = usize::from(hdr.frag) * cap;
        let len = hdr.len as usize;
        if len > self.max_message {
            // No sender makes a message the cell path cannot carry: the layer above must not
            // size a buffer by this length.
            return Err(Error::corrupt("cell message length", hdr.len));
        }
        if offset > len || (offset == len && len != 0) {
            return Err(Error::corrupt("cell fragment index", hdr.frag));
        }
        let frag_len = cap.min(len - offset);
        Ok(Incoming {
            hdr: c.body() as *const MsgHeader,
            // SAFETY: the payload offset is inside the body.
            payload: unsafe { c.body().add(hdr.payload_offset()) },
            len: hdr.len,
            offset: offset as u32,
            frag_len: frag_len as u32,
            cell: c.handle(),
            src,
            last: offset + frag_len == len,
            port: self.id,
            _node: PhantomData,
        })
    }

    #[inline(always)]
    fn advance(&mut self, src: u16, inc: &Incoming<'n>) {
        let r = &mut self.rx[src as usize];
        if inc.last {
            r.expected = r.expected.wrapping_add(1);
            r.next_frag = 0;
        } else {
            r.next_frag += 1;
        }
    }

    /// Delivers fastbox messages that precede the stashed cell, then the cell.
    #[cold]
    fn poll_stash(&mut self) -> Result<Option<Incoming<'n>>> {
        let Some(s) = self.stash else { return Ok(None) };
        if self.rx[s.src as usize].expected == s.hdr.seq {
            self.stash = None;
            // SAFETY: the stashed handle was validated when it was dequeued.
            let c = unsafe { self.node.arena().cell_unchecked(s.cell) };
            let inc = self.cell_fragment(c, s.src, s.hdr)?;
            self.advance(s.src, &inc);
            if self.gone[usize::from(s.src)].queue_passed {
                // The queue passed the sender's last cell when this one was stashed: the rest
                // of its message will never come.
                self.drop_partial(s.src);
            }
            return Ok(Some(inc));
        }
        match self.poll_fastbox_of(s.src)? {
            Some(i) => Ok(Some(i)),
            // The sender wrote the missing messages into its fastbox before enqueuing this cell,
            // so they are visible; their absence means a faulty sender.
            None => Err(Error::corrupt("sequence gap before cell", s.hdr.seq)),
        }
    }

    /// Frees the fastbox slot or returns the cell of a fragment that was copied out. A fragment
    /// another port polled is refused with [`Error::ForeignFragment`].
    #[inline(always)]
    pub fn release(&mut self, inc: Incoming<'n>) -> Result<()> {
        if inc.port != self.id {
            return Err(Error::ForeignFragment);
        }
        if inc.cell == NULL {
            // SAFETY: this port made `inc` (checked above) from a fastbox of local rank `src`,
            // a valid rank: `src < rx.len()`.
            let r = unsafe { self.rx.get_unchecked_mut(usize::from(inc.src)) };
            if let Some(fb) = r.fb {
                fb.release(&mut r.fnext);
            }
            return Ok(());
        }
        self.return_cell(inc.cell, inc.src)
    }

    /// Returns a polled cell to its owner's free queue.
    #[inline(never)]
    fn return_cell(&mut self, c: CellHandle, src: u16) -> Result<()> {
        let owner = self.node.owner_of(c);
        // SAFETY: `c` was validated when this port polled it (`release` checked the port).
        let cell = unsafe { self.node.arena().cell_unchecked(c) };
        if src == REMOTE {
            // A network arrival, in one of our cells set aside for the netmods.
            return self.node.netmod_free_queue(self.me).enqueue(cell, self.me, self.me);
        }
        // A gone owner's free queue is never consumed again: returning there is harmless.
        self.node.free_queue(owner).enqueue(cell, self.me, owner)
    }

    /// A network arrival in our receive queue: checked to be one of our own cells (only we
    /// enqueue those: our netmods), then delivered in queue order.
    #[cold]
    fn netmod_fragment(&mut self, c: CellRef<'n>, owner: u16, hdr: MsgHeader) -> Result<Option<Incoming<'n>>> {
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

    /// Messages and payload bytes handed to this port for local rank `dst` so far (every message,
    /// whoever in the layer above sent it); `(0, 0)` for an unknown rank.
    pub fn sent_to(&self, dst: u16) -> (u64, u64) {
        self.tx.get(usize::from(dst)).map_or((0, 0), |t| (t.seq, t.bytes))
    }

    /// Stops (`true`) or resumes acknowledging fastbox messages, for flow control by the layer
    /// above (its unexpected messages take too much memory): a sender then writes only the
    /// slots it already knew free, and sends the rest in cells, which the layer above may keep
    /// unreleased until their receive comes (the sender then runs out of cells and waits).
    /// Messages are still polled and delivered in order.
    pub fn withhold_acks(&mut self, on: bool) {
        if self.acks_withheld == on {
            return;
        }
        self.acks_withheld = on;
        for r in self.rx.iter_mut() {
            let next = r.fnext;
            if let Some(fb) = r.fb.as_mut() {
                fb.withhold_acks(on, next);
            }
        }
    }

    /// Events about peers since the last call.
    ///
    /// Taking a [`PeerEvent::Restarted`] lets the peer's new incarnation's messages through: its
    /// traffic starts at number 0 (`expected` is 0 since the retirement; a box it claimed and we
    /// adopted since is kept), unless it was retired again meanwhile.
    pub fn take_events(&mut self) -> Vec<PeerEvent> {
        let events = core::mem::take(&mut self.events);
        for e in &events {
            if let PeerEvent::Restarted { rank } = *e
                && !self.gone[usize::from(rank)].retired
            {
                self.rx[usize::from(rank)].next_frag = 0;
            }
        }
        events
    }

    /// True if local rank `r` is known to this port to have ended.
    pub fn peer_gone(&self, r: u16) -> bool {
        self.gone.get(r as usize).is_some_and(|g| g.known)
    }

    /// Cells currently linked in our free queue (for accounting and tests).
    pub fn free_cells(&self) -> Result<usize> {
        self.node.free_queue(self.me).count_linked()
    }

    /// Notices ended peers and recovers from their deaths: queue repairs, draining their receive
    /// queues, taking back our cells, freeing their fastboxes, dropping their partial messages.
    /// Runs every `check_every` polls; call it directly when waiting long.
    #[cold]
    pub fn check_peers(&mut self) -> Result<()> {
        let epoch = self.node.death_epoch();
        if epoch != self.epoch {
            self.epoch = epoch;
            self.observe_restarts()?;
            let q = self.node.recv_queue(self.me);
            for r in 0..self.node.ranks() {
                if self.gone[r as usize].known || !self.node.is_gone(r) || r == self.me {
                    continue;
                }
                self.gone[r as usize].known = true;
                self.gone[r as usize].incarnation = self.node.state_of(r)?.incarnation();
                self.tx[r as usize].gone = true;
                self.tx[r as usize].fb = None;
                self.events.push(PeerEvent::Gone { rank: r });
                self.markers.push((r, q.tail_now()));
            }
            q.repair_unlinked_head(self.node)?;
            self.node.free_queue(self.me).repair_unlinked_head(self.node)?;
        }
        self.recover()?;
        self.free_dead_boxes();
        self.check_markers();
        self.report_silent();
        Ok(())
    }

    /// Retires gone peer `r` so that it can be restarted as a new incarnation
    /// ([`crate::incarnation`], step 2): true once done, false if not possible yet (its death is
    /// not known yet, or it is not silent, or cells it held are not taken back yet, or its
    /// fastbox among ours is not freed yet: call [`check_peers`](Self::check_peers) and try again).
    ///
    /// The caller guarantees it holds no cell of `r`'s pool any more (every fragment from `r` was
    /// released) and no [`PendingSend`] to `r`. The per-pair state with `r` starts again from
    /// zero; sends to `r` fail with [`Error::PeerDead`] until [`PeerEvent::Restarted`].
    /// Idempotent.
    pub fn retire_peer(&mut self, r: u16) -> Result<bool> {
        self.node.check_rank(r)?;
        let g = self.gone[usize::from(r)];
        if g.retired {
            return Ok(true);
        }
        if r == self.me || !g.known || !g.reclaimed || !g.silent || self.rx[usize::from(r)].fb.is_some() {
            return Ok(false);
        }
        self.tx[usize::from(r)] = Tx { gone: true, ..Tx::default() };
        self.rx[usize::from(r)] = Rx { next_frag: RETIRED_FRAG, ..Rx::default() };
        self.gone[usize::from(r)].retired = true;
        Ok(true)
    }

    /// Peers retired by this port that run as another incarnation now: their per-pair state
    /// starts afresh and [`PeerEvent::Restarted`] is reported (the new incarnation may be gone
    /// already: the death check that follows sees it then).
    fn observe_restarts(&mut self) -> Result<()> {
        for r in 0..self.node.ranks() {
            self.observe_restart(r)?;
        }
        Ok(())
    }

    /// [`observe_restarts`](Self::observe_restarts) for peer `r` (checked): true if it runs again.
    /// Also called by a send to a retired peer, which may come before the next death-epoch check,
    /// and by a poll that finds a message of a retired peer. The new incarnation's messages are
    /// returned only once the caller took its `Restarted` (`RETIRED_FRAG`; loom
    /// `sender_dies_between_swap_and_link_then_restarts` found them returned before).
    /// The incarnation is visible then: the new process started after the reset that bumped it,
    /// and its message was acquired from the queue or box it published it in.
    #[cold]
    fn observe_restart(&mut self, r: u16) -> Result<bool> {
        let g = self.gone[usize::from(r)];
        if !g.retired || self.node.state_of(r)?.incarnation() == g.incarnation {
            return Ok(false);
        }
        self.gone[usize::from(r)] = Gone::default();
        self.tx[usize::from(r)].gone = false;
        self.events.push(PeerEvent::Restarted { rank: r });
        Ok(true)
    }

    /// Reports gone peers from which nothing more can be polled: queue passed, fastbox holding
    /// no message in order.
    fn report_silent(&mut self) {
        for r in 0..self.node.ranks() {
            let g = self.gone[usize::from(r)];
            if !g.queue_passed || g.silent {
                continue;
            }
            let rx = self.rx[usize::from(r)];
            let pending = rx.fb.is_some_and(|fb| matches!(fb.peek(rx.fnext), Ok(Some(m)) if m.seq == rx.expected));
            if !pending && self.stash.is_none_or(|s| s.src != r) {
                self.gone[usize::from(r)].silent = true;
                self.events.push(PeerEvent::Silent { rank: r });
            }
        }
    }

    /// True if [`take_events`](Self::take_events) has something.
    #[inline(always)]
    pub fn has_events(&self) -> bool {
        !self.events.is_empty()
    }

    /// Drains gone ranks' receive queues (one drainer per queue) and takes back our cells.
    fn recover(&mut self) -> Result<()> {
        for r in 0..self.node.ranks() {
            let g = self.gone[r as usize];
            if !g.known || g.reclaimed {
                continue;
            }
            if !g.drained && self.try_drain(r)? {
                self.gone[r as usize].drained = true;
            }
            if self.gone[r as usize].drained {
                self.reclaim_from(r)?;
                self.gone[r as usize].reclaimed = true;
            }
        }
        Ok(())
    }

    /// Drains gone rank `r`'s receive queue if nobody alive is doing it. True once it is drained
    /// (by us or another rank).
    fn try_drain(&mut self, r: u16) -> Result<bool> {
        let st = self.node.state_of(r)?;
        let mine = u32::from(self.me) + 1;
        // ORDERING: Acquire; pairs with the Release store of DRAIN_DONE, or of a claim.
        let mut cur = st.drain.load(Acquire);
        loop {
            if cur == DRAIN_DONE {
                return Ok(true);
            }
            if cur != 0 && cur != mine && !self.node.is_gone((cur - 1) as u16) {
                return Ok(false); // a live rank drains it
            }
            // ORDERING: AcqRel; Acquire takes in the previous (dead) drainer's progress in the
            // queue's words; Release publishes our claim.
            match st.drain.compare_exchange(cur, mine, AcqRel, Acquire) {
                Ok(_) => break,
                Err(now) => cur = now,
            }
        }
        let q = self.node.recv_queue(r);
        q.seal();
        while let Some(c) = q.drain_next(self.node)? {
            crate::failpoint!("drain-mid");
            let owner = self.node.owner_of(c.handle());
            if !self.node.is_gone(owner) {
                self.node.free_queue(owner).enqueue(c, self.me, owner)?;
            }
        }
        // ORDERING: Release; owners Acquire it before reclaiming, after our returns.
        st.drain.store(DRAIN_DONE, Release);
        Ok(true)
    }

    /// Takes back our cells that gone rank `r` (drained) held or was returning (module doc,
    /// "Reclaim").
    fn reclaim_from(&mut self, r: u16) -> Result<()> {
        let fq = self.node.free_queue(self.me);
        let held_by_r = custody(free_queue_id(self.me), r);
        for c in self.node.pool(self.me) {
            // SAFETY: pool handles are valid.
            let link = unsafe { self.node.arena().link_unchecked(c) };
            // ORDERING: Acquire; the drain claim's Acquire already ordered us after the drainer,
            // this pairs with dead ranks' writes observed through their GONE mark.
            let cust = link.custody.load(Acquire);
            let lost = custody_queue(cust) == recv_queue_id(r) || (cust == held_by_r && !fq.holds_dead_enqueue(c)?);
            if lost {
                // SAFETY: pool handles are valid.
                fq.enqueue(unsafe { self.node.arena().cell_unchecked(c) }, self.me, self.me)?;
            }
        }
        Ok(())
    }

    /// Frees hosted boxes whose owner is gone and which hold nothing more to deliver.
    fn free_dead_boxes(&mut self) {
        for b in 0..self.box_owner.len() as u32 {
            // SAFETY: `me` valid, `b` in range.
            let fb = unsafe { self.node.fastbox(self.me, b) };
            // ORDERING: Acquire, as in `scan_fastboxes`.
            let owner = fb.owner().load(Acquire);
            if owner == 0 || owner > u32::from(self.node.ranks()) {
                continue;
            }
            let src = (owner - 1) as u16;
            if !self.node.is_gone(src) {
                continue;
            }
            self.adopt_box(fb, b, owner, src);
            let r = self.rx[usize::from(src)];
            // A message published in the next slot is delivered once its number comes up: the
            // sender wrote it only after every earlier message was enqueued whole, so those are in
            // our queue (or stashed) and will be delivered or dropped first. Kept until then, even
            // while it is not the expected one yet (k+1 in the box, k still in the queue). Only a
            // box whose sender is silent (everything deliverable was delivered) is freed with a
            // message in it: an out-of-order one a faulty sender left.
            let published = matches!(fb.peek(r.fnext), Ok(Some(_)));
            if published && !self.gone[usize::from(src)].silent {
                continue;
            }
            fb.clear();
            // SAFETY: ranks checked.
            unsafe { self.node.fastbox_map(self.me, src) }.store(0, Relaxed);
            let r = &mut self.rx[usize::from(src)];
            r.fb = None;
            r.fnext = 0;
            self.box_owner[b as usize] = 0;
            // ORDERING: Release; orders the clearing before the next claimant's Acquire CAS.
            fb.owner().store(0, Release);
        }
    }

    /// Notes that a dequeued cell's tail value passed partial-message markers.
    #[cold]
    fn note_dequeued(&mut self, c: CellRef<'n>) {
        let link = c.link();
        // ORDERING: Relaxed; as in the queue's `own_value`.
        let g = tail_gen(link.enq_prev.load(Relaxed)).wrapping_add(1);
        self.drop_markers(|m| (g.wrapping_sub(tail_gen(m)) as i32) >= 0);
    }

    /// Drops partial messages whose markers the queue has passed by emptying.
    fn check_markers(&mut self) {
        if self.markers.is_empty() {
            return;
        }
        let q = self.node.recv_queue(self.me);
        let (empty, gen_) = q.empty_gen();
        if empty {
            self.drop_markers(|m| {
                tail_handle(m) == 0 && (gen_.wrapping_sub(tail_gen(m)) as i32) >= 0
                    || (gen_.wrapping_sub(tail_gen(m)) as i32) > 0
            });
        }
    }

    fn drop_markers(&mut self, passed: impl Fn(u64) -> bool) {
        let mut i = 0;
        while i < self.markers.len() {
            let (src, m) = self.markers[i];
            if passed(m) {
                self.markers.swap_remove(i);
                self.gone[src as usize].queue_passed = true;
                self.drop_partial(src);
            } else {
                i += 1;
            }
        }
    }

    /// Gone sender `src`'s queue traffic was all polled: a message still in progress from it is
    /// partial and never completes.
    fn drop_partial(&mut self, src: u16) {
        let r = &mut self.rx[src as usize];
        if r.next_frag != 0 {
            let seq = r.expected;
            r.next_frag = 0;
            r.expected = r.expected.wrapping_add(1);
            self.events.push(PeerEvent::PartialDropped { rank: src, seq });
        }
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;
    use crate::layout::Params;
    use crate::node::HeapNode;

    fn cfg() -> PortConfig {
        PortConfig { fastbox_after: 4, scan_every: 4, check_every: 1 }
    }

    fn small() -> Params {
        Params {
            cell_size: 256,
            cells_per_rank: 8,
            fastbox_slots: 4,
            fastbox_slot_size: 128,
            fastboxes_per_rank: 2,
            ..Params::DEFAULT
        }
    }

    fn payload(seq: u32, len: usize) -> Vec<u8> {
        (0..len).map(|i| (i as u32).wrapping_mul(31).wrapping_add(seq) as u8).collect()
    }

    /// Polls one whole message from `port`, reassembling fragments; releases as it goes.
    fn recv_msg(port: &mut Port<'_, HeapNode>, expected: &[u16]) -> Option<(u16, MsgHeader, Vec<u8>, bool)> {
        let first = port.poll(expected).unwrap()?;
        let mut buf = vec![0u8; first.header().len as usize];
        let (src, hdr, fb) = (first.src, first.header(), first.via_fastbox());
        let mut inc = first;
        loop {
            inc.copy_to(&mut buf[inc.offset()..]);
            let last = inc.is_last();
            port.release(inc).unwrap();
            if last {
                return Some((src, hdr, buf, fb));
            }
            inc = loop {
                if let Some(i) = port.poll(expected).unwrap() {
                    break i;
                }
            };
            assert_eq!((inc.src, inc.header().seq), (src, hdr.seq), "fragments of one message are consecutive");
        }
    }

    /// A netmod's arrivals: cells set aside from rank 0's pool, filled and delivered as a
    /// three-fragment message from remote rank 77 between local messages; they come out with
    /// `src == REMOTE`, in queue order, and return to the netmod free queue when released.
    #[test]
    fn netmod_arrivals_come_through_the_receive_queue() {
        let node = HeapNode::new(2, small()).unwrap();
        let mut a = Port::new(&node, 0, cfg()).unwrap();
        let mut b = Port::new(&node, 1, PortConfig { fastbox_after: 1000, ..cfg() }).unwrap();
        assert_eq!(a.netmod_reserve(3).unwrap(), 3);
        let hdr = MsgHeader { src: 77, dst: 0, tag: 5, context: 1, len: 600, ..MsgHeader::default() };
        let cap = a.netmod_cell_payload(&hdr);
        let msg = payload(9, 600);
        assert!(matches!(
            b.send(0, &MsgHeader { tag: 1, ..MsgHeader::default() }, None, &[1; 10]).unwrap(),
            Sent::Done
        ));
        for (k, chunk) in msg.chunks(cap).enumerate() {
            let mut c = a.netmod_cell().unwrap().expect("a reserved cell");
            c.after_header()[..chunk.len()].copy_from_slice(chunk);
            a.netmod_deliver(c, &hdr, k as u16).unwrap();
        }
        assert!(a.netmod_cell().unwrap().is_none(), "all three in use");
        assert!(matches!(
            b.send(0, &MsgHeader { tag: 2, ..MsgHeader::default() }, None, &[2; 10]).unwrap(),
            Sent::Done
        ));
        let (src, h, _, _) = recv_msg(&mut a, &[]).unwrap();
        assert_eq!((src, h.tag), (1, 1));
        let (src, h, got, _) = recv_msg(&mut a, &[]).unwrap();
        assert_eq!((src, h.src, h.tag, h.context, h.len), (REMOTE, 77, 5, 1, 600));
        assert_eq!(got, msg);
        let (src, h, _, _) = recv_msg(&mut a, &[]).unwrap();
        assert_eq!((src, h.tag), (1, 2));
        for _ in 0..3 {
            let c = a.netmod_cell().unwrap().expect("released back to the netmod free queue");
            a.netmod_deliver(c, &hdr, 0).unwrap();
        }
        // A peer cannot pass its own cell off as a network arrival.
        let forged = MsgHeader { flags: flags::NETMOD, ..MsgHeader::default() };
        assert!(matches!(b.send(0, &forged, None, &[0; 100]).unwrap(), Sent::Done));
        let mut errors = 0;
        for _ in 0..10 {
            match a.poll(&[]) {
                Ok(Some(i)) => a.release(i).unwrap(),
                Ok(None) => {}
                Err(e) => {
                    assert!(matches!(e, Error::Corrupt { .. }), "{e}");
                    errors += 1;
                    break;
                }
            }
        }
        assert_eq!(errors, 1);
    }

    /// The piggyback of message `i`.
    fn pb(i: u32) -> PiggybackBytes {
        let mut b = [0u8; 12];
        for (k, x) in b.iter_mut().enumerate() {
            *x = (i as u8).wrapping_mul(7).wrapping_add(k as u8 + 1);
        }
        b
    }

    /// Fault-tolerance piggybacks on every path: cells before the fastbox claim, the fastbox (the
    /// inline send path once claimed), single and multi-cell messages, sends that wait for cells,
    /// mixed with messages without one; each arrives with its own piggyback (on every fragment) and
    /// an intact payload.
    #[test]
    fn piggybacks_travel_on_every_path() {
        let node = HeapNode::new(2, small()).unwrap();
        let mut a = Port::new(&node, 0, cfg()).unwrap();
        let mut b = Port::new(&node, 1, cfg()).unwrap();
        // Fastbox slots carry 128 - 32 = 96 bytes, 80 with a piggyback; cells 256 - 32 - 16 = 208.
        let sizes = [0usize, 8, 79, 80, 95, 150, 208, 209, 600, 1500];
        let mut via = [0usize; 2];
        let mut pending: Vec<(PendingSend, Vec<u8>)> = Vec::new();
        let mut next = 0u32;
        for i in 0..60u32 {
            let p = payload(i, sizes[i as usize % sizes.len()]);
            let with = i % 3 != 2;
            let ft = pb(i);
            let hdr = MsgHeader { tag: i as i32, ..MsgHeader::default() };
            match a.send(1, &hdr, with.then_some(&ft), &p).unwrap() {
                Sent::Done => {}
                Sent::Pending(ps) => {
                    assert_eq!(ps.piggyback().is_some(), with);
                    pending.push((ps, p));
                }
            }
            // Receive everything sent so far, resuming what waits for cells.
            loop {
                pending.retain_mut(|(ps, p)| !a.resume(ps, p).unwrap());
                let Some(first) = b.poll(&[0]).unwrap() else {
                    if pending.is_empty() {
                        break;
                    }
                    continue;
                };
                let tag = first.tag() as u32;
                assert_eq!(tag, next, "order");
                let want = payload(tag, sizes[tag as usize % sizes.len()]);
                let carried = tag % 3 != 2;
                let mut got = vec![0u8; first.len()];
                let mut inc = first;
                via[usize::from(inc.via_fastbox())] += 1;
                loop {
                    assert_eq!(inc.piggyback(), carried.then(|| pb(tag)), "message {tag}, offset {}", inc.offset());
                    inc.copy_to(&mut got[inc.offset()..]);
                    let last = inc.is_last();
                    b.release(inc).unwrap();
                    if last {
                        break;
                    }
                    inc = loop {
                        pending.retain_mut(|(ps, p)| !a.resume(ps, p).unwrap());
                        if let Some(i) = b.poll(&[0]).unwrap() {
                            break i;
                        }
                    };
                }
                assert_eq!(got, want, "payload of message {tag}");
                next += 1;
            }
        }
        assert_eq!(next, 60);
        assert!(via[0] > 0 && via[1] > 0, "both paths were taken: {via:?}");
        assert_eq!(a.free_cells().unwrap(), 8, "every cell came back");
    }

    /// A flagged fastbox message whose length leaves no room for the piggyback inside the slot is
    /// refused.
    #[test]
    fn piggyback_room_is_bounds_checked() {
        let node = HeapNode::new(2, small()).unwrap();
        let mut a = Port::new(&node, 0, cfg()).unwrap();
        let mut b = Port::new(&node, 1, cfg()).unwrap();
        for i in 0..5 {
            let _ = a.send(1, &MsgHeader::default(), Some(&pb(i)), &[i as u8]).unwrap();
        }
        for _ in 0..4 {
            recv_msg(&mut b, &[0]).unwrap();
        }
        // SAFETY: box 0 of rank 1 exists.
        let fb = unsafe { node.fastbox(1, 0) };
        // 90 bytes fit a slot (96) without the room, not with it (80).
        // SAFETY: we write the header's `len` field of slot 1, inside the box.
        unsafe { (fb.bodies.add(fb.body_stride + 16) as *mut u32).write_unaligned(90) };
        assert!(matches!(b.poll(&[0]), Err(Error::Corrupt { .. })));
    }

    #[test]
    fn order_is_kept_across_fastbox_and_queue() {
        let node = HeapNode::new(2, small()).unwrap();
        let mut a = Port::new(&node, 0, cfg()).unwrap();
        let mut b = Port::new(&node, 1, cfg()).unwrap();
        // 40 messages, never polled in between: the 4-slot box fills and the rest go to cells,
        // interleaving the two paths. Sizes vary across the fastbox limit.
        let mut sent = Vec::new();
        let mut next = 0;
        let mut pending: Vec<(PendingSend, Vec<u8>)> = Vec::new();
        for i in 0..40u32 {
            let p = payload(i, [0, 8, 50, 88, 120, 300][i as usize % 6]);
            let hdr = MsgHeader { tag: i as i32, context: 3, ..MsgHeader::default() };
            match a.send(1, &hdr, None, &p).unwrap() {
                Sent::Done => {}
                Sent::Pending(ps) => pending.push((ps, p.clone())),
            }
            sent.push(p);
            // Keep cells flowing so sends do not stall forever.
            if i % 3 == 2 {
                let (_, h, got, _) = recv_msg(&mut b, &[0]).unwrap();
                assert_eq!(got, sent[h.tag as usize]);
                assert_eq!(h.tag as usize, next);
                next += 1;
            }
            pending.retain_mut(|(ps, p)| !a.resume(ps, p).unwrap());
        }
        let mut fastboxed = 0;
        while next < 40 {
            pending.retain_mut(|(ps, p)| !a.resume(ps, p).unwrap());
            if let Some((src, h, got, fb)) = recv_msg(&mut b, &[0]) {
                assert_eq!(src, 0);
                assert_eq!(h.tag, next as i32, "non-overtaking");
                assert_eq!(h.context, 3);
                assert_eq!(got, sent[next]);
                fastboxed += usize::from(fb);
                next += 1;
            }
        }
        assert!(fastboxed > 0, "some messages used the fastbox");
        assert_eq!(b.poll(&[0]).unwrap().map(|i| i.tag()), None);
    }

    #[test]
    fn long_messages_span_cells_and_wait_for_cells() {
        let node = HeapNode::new(2, Params { fastboxes_per_rank: 0, ..small() }).unwrap();
        let mut a = Port::new(&node, 0, cfg()).unwrap();
        let mut b = Port::new(&node, 1, cfg()).unwrap();
        let big = payload(1, 3000); // 15 cells of 208 bytes; the pool has 8
        let Sent::Pending(mut ps) = a.send(1, &MsgHeader::default(), None, &big).unwrap() else {
            panic!("8 cells cannot carry 3000 bytes")
        };
        let small_msg = payload(2, 10);
        let Sent::Pending(mut ps2) =
            a.send(1, &MsgHeader { tag: 1, ..MsgHeader::default() }, None, &small_msg).unwrap()
        else {
            panic!("a later message waits behind a pending one")
        };
        assert!(!a.resume(&mut ps2, &small_msg).unwrap(), "no progress before the earlier message");
        let mut got = vec![0u8; big.len()];
        let mut done = false;
        let mut done2 = false;
        let mut second = None;
        while second.is_none() {
            if !done {
                done = a.resume(&mut ps, &big).unwrap();
            } else if !done2 {
                done2 = a.resume(&mut ps2, &small_msg).unwrap();
            }
            if let Some(inc) = b.poll(&[0]).unwrap() {
                if inc.header().tag == 0 {
                    inc.copy_to(&mut got[inc.offset()..]);
                } else {
                    let mut s = vec![0u8; inc.frag_len()];
                    inc.copy_to(&mut s);
                    second = Some(s);
                }
                b.release(inc).unwrap();
            }
        }
        assert_eq!(got, big);
        assert_eq!(second.unwrap(), small_msg);
        assert_eq!(a.free_cells().unwrap(), 8, "every cell came back");
    }

    #[test]
    fn zero_byte_messages_and_errors() {
        let node = HeapNode::new(2, small()).unwrap();
        let mut a = Port::new(&node, 0, cfg()).unwrap();
        let mut b = Port::new(&node, 1, cfg()).unwrap();
        for _ in 0..10 {
            assert!(matches!(a.send(1, &MsgHeader::default(), None, &[]).unwrap(), Sent::Done));
            let (_, h, got, _) = recv_msg(&mut b, &[0]).unwrap();
            assert_eq!((h.len, got.len()), (0, 0));
        }
        assert!(matches!(a.send(2, &MsgHeader::default(), None, &[]), Err(Error::BadRank { rank: 2, .. })));
        let huge = vec![0u8; a.max_message() + 1];
        assert!(matches!(a.send(1, &MsgHeader::default(), None, &huge), Err(Error::TooLarge { .. })));
        assert!(matches!(b.poll(&[5]), Err(Error::BadRank { .. })));
    }

    #[test]
    fn any_source_finds_fastbox_messages() {
        let node = HeapNode::new(3, small()).unwrap();
        let mut a = Port::new(&node, 0, cfg()).unwrap();
        let mut c = Port::new(&node, 2, cfg()).unwrap();
        let mut b = Port::new(&node, 1, cfg()).unwrap();
        for i in 0..12u32 {
            let _ = a.send(1, &MsgHeader { tag: i as i32, ..MsgHeader::default() }, None, &payload(i, 8)).unwrap();
            let _ =
                c.send(1, &MsgHeader { tag: 100 + i as i32, ..MsgHeader::default() }, None, &payload(i, 8)).unwrap();
        }
        let mut from = [0u32; 3];
        let mut fb = 0;
        for _ in 0..1000 {
            if let Some((src, h, got, via)) = recv_msg(&mut b, &[]) {
                let i = (h.tag % 100) as u32;
                assert_eq!(i, from[src as usize], "per-source order");
                assert_eq!(got, payload(i, 8));
                from[src as usize] += 1;
                fb += usize::from(via);
            }
        }
        assert_eq!(from, [12, 0, 12]);
        assert!(fb > 0, "ANY_SOURCE polling scanned the fastboxes");
    }

    #[test]
    fn dead_receiver_cells_come_back() {
        let node = HeapNode::new(3, Params { fastboxes_per_rank: 0, ..small() }).unwrap();
        let mut a = Port::new(&node, 0, cfg()).unwrap();
        let mut b = Port::new(&node, 1, cfg()).unwrap();
        let mut c = Port::new(&node, 2, cfg()).unwrap();
        for i in 0..5 {
            assert!(matches!(a.send(1, &MsgHeader::default(), None, &payload(i, 100)).unwrap(), Sent::Done));
            assert!(matches!(c.send(1, &MsgHeader::default(), None, &payload(i, 100)).unwrap(), Sent::Done));
        }
        let held = b.poll(&[]).unwrap().unwrap(); // b takes a cell out, never returns it...
        assert!(!held.via_fastbox());
        node.mark_gone(1, 9).unwrap(); // ...and dies
        assert_eq!(a.free_cells().unwrap(), 3);
        a.check_peers().unwrap();
        c.check_peers().unwrap();
        assert!(a.take_events().contains(&PeerEvent::Gone { rank: 1 }));
        assert_eq!(a.free_cells().unwrap(), 8, "a got back the cells in b's queue and the one b held");
        assert_eq!(c.free_cells().unwrap(), 8);
        assert!(matches!(a.send(1, &MsgHeader::default(), None, &[1]), Err(Error::PeerDead { rank: 1 })));
        // a can still talk to c.
        assert!(matches!(a.send(2, &MsgHeader::default(), None, &[1]).unwrap(), Sent::Done));
        assert!(recv_msg(&mut c, &[0]).is_some());
    }

    #[test]
    fn a_peer_gone_before_the_port_was_made_is_learnt() {
        let node = HeapNode::new(3, Params { fastboxes_per_rank: 0, ..small() }).unwrap();
        let mut b = Port::new(&node, 1, cfg()).unwrap();
        assert!(matches!(b.send(0, &MsgHeader { tag: 5, ..MsgHeader::default() }, None, &[7]).unwrap(), Sent::Done));
        drop(b);
        node.mark_gone(1, 9).unwrap(); // sent, died and was reaped before rank 0 got here
        let mut a = Port::new(&node, 0, cfg()).unwrap();
        a.check_peers().unwrap();
        assert_eq!(a.take_events(), vec![PeerEvent::Gone { rank: 1 }]);
        let inc = a.poll(&[1]).unwrap().expect("the dead sender's message is still delivered");
        assert_eq!(inc.header().tag, 5);
        a.release(inc).unwrap();
    }

    #[test]
    fn dead_receiver_while_returning_a_cell() {
        let node = HeapNode::new(2, Params { fastboxes_per_rank: 0, ..small() }).unwrap();
        let mut a = Port::new(&node, 0, cfg()).unwrap();
        let mut b = Port::new(&node, 1, cfg()).unwrap();
        assert!(matches!(a.send(1, &MsgHeader::default(), None, &[7]).unwrap(), Sent::Done));
        let inc = b.poll(&[0]).unwrap().unwrap();
        let cell = inc.cell;
        assert_ne!(cell, NULL, "a cell");
        // b began returning the cell (custody written) and died before its CAS.
        let link = node.arena().link(cell, "t").unwrap();
        link.enq_prev.store(node.free_queue(0).tail_now(), Relaxed);
        link.custody.store(custody(free_queue_id(0), 1), Relaxed);
        node.mark_gone(1, 9).unwrap();
        a.check_peers().unwrap();
        assert_eq!(a.free_cells().unwrap(), 8);
    }

    #[test]
    fn dead_sender_partial_message_is_dropped_and_box_freed() {
        let node = HeapNode::new(2, Params { cells_per_rank: 4, ..small() }).unwrap();
        let mut a = Port::new(&node, 0, cfg()).unwrap();
        let mut b = Port::new(&node, 1, cfg()).unwrap();
        // Enough messages to claim a fastbox; leave two of them unread.
        for i in 0..8 {
            let _ = a.send(1, &MsgHeader { tag: i, ..MsgHeader::default() }, None, &[i as u8]).unwrap();
            if i < 6 {
                recv_msg(&mut b, &[0]).unwrap();
            }
        }
        let big = payload(0, 2000);
        let Sent::Pending(_ps) = a.send(1, &MsgHeader { tag: 99, ..MsgHeader::default() }, None, &big).unwrap() else {
            panic!("4 cells cannot carry 2000 bytes")
        };
        node.mark_gone(0, 9).unwrap(); // a dies with the message half sent
        let mut tags = Vec::new();
        let mut frags = 0;
        let mut events = Vec::new();
        for _ in 0..50 {
            if let Some(inc) = b.poll(&[0]).unwrap() {
                assert!(!events.contains(&PeerEvent::Silent { rank: 0 }), "silent before its last message");
                if inc.header().tag == 99 {
                    frags += 1;
                } else {
                    tags.push(inc.header().tag);
                }
                b.release(inc).unwrap();
            }
            events.extend(b.take_events());
        }
        assert_eq!(tags, vec![6, 7], "completed messages are delivered");
        assert_eq!(frags, 4, "four fragments arrived");
        assert!(events.contains(&PeerEvent::PartialDropped { rank: 0, seq: 8 }));
        assert!(events.contains(&PeerEvent::Silent { rank: 0 }), "{events:?}");
        // SAFETY: rank 1 and box 0 exist.
        assert!(
            // SAFETY: rank 1 hosts boxes 0 and 1.
            (0..2).all(|bx| unsafe { node.fastbox(1, bx) }.owner().load(Relaxed) == 0),
            "box freed"
        );
    }

    /// The dead sender's partial message begins with the last cell it enqueued, which the
    /// receiver dequeues ahead of a fastbox message and stashes: once that cell is delivered, the
    /// message is reported dropped (the queue had passed the sender's last cell already).
    #[test]
    fn partial_message_in_a_stashed_cell_is_dropped() {
        let node = HeapNode::new(2, Params { cells_per_rank: 2, ..small() }).unwrap();
        let mut a = Port::new(&node, 0, PortConfig { fastbox_after: 2, ..cfg() }).unwrap();
        let mut b = Port::new(&node, 1, cfg()).unwrap();
        // Message 0 in a cell, which b keeps; message 1 in the fastbox; message 2 needs three
        // cells and gets the last one.
        assert!(matches!(a.send(1, &MsgHeader { tag: 0, ..MsgHeader::default() }, None, &[0]).unwrap(), Sent::Done));
        let held = b.poll(&[0]).unwrap().unwrap();
        assert!(matches!(a.send(1, &MsgHeader { tag: 1, ..MsgHeader::default() }, None, &[1]).unwrap(), Sent::Done));
        let big = payload(2, 3 * a.cell_payload());
        let Sent::Pending(_ps) = a.send(1, &MsgHeader { tag: 2, ..MsgHeader::default() }, None, &big).unwrap() else {
            panic!("one cell cannot carry three cells' worth")
        };
        node.mark_gone(0, 9).unwrap();
        b.release(held).unwrap();
        b.check_peers().unwrap(); // the death is seen before the queue is polled: b lags
        let mut got = Vec::new();
        let mut events = b.take_events();
        for _ in 0..10 {
            if let Some(inc) = b.poll(&[]).unwrap() {
                got.push((inc.tag(), inc.offset(), inc.via_fastbox()));
                b.release(inc).unwrap();
            }
            b.check_peers().unwrap();
            events.extend(b.take_events());
        }
        assert_eq!(got, vec![(1, 0, true), (2, 0, false)]);
        assert!(events.contains(&PeerEvent::PartialDropped { rank: 0, seq: 2 }), "{events:?}");
        assert!(events.contains(&PeerEvent::Silent { rank: 0 }), "{events:?}");
    }

    #[test]
    fn one_port_per_rank_and_fragments_stay_with_their_port() {
        let node = HeapNode::new(2, small()).unwrap();
        let mut a = Port::new(&node, 0, cfg()).unwrap();
        let b = Port::new(&node, 1, cfg()).unwrap();
        assert!(matches!(Port::new(&node, 1, cfg()), Err(Error::PortOpen { rank: 1 })));
        drop(b);
        let mut b = Port::new(&node, 1, cfg()).unwrap();
        for i in 0..2u8 {
            let _ = a.send(1, &MsgHeader::default(), None, &[i; 100]).unwrap();
        }
        let first = b.poll(&[0]).unwrap().unwrap();
        // Another rank's port of the same node refuses it: its fastbox counters are not ours.
        assert!(matches!(a.release(first), Err(Error::ForeignFragment)));
        // A later port of the same rank refuses the fragments of an earlier one.
        let second = b.poll(&[0]).unwrap().unwrap();
        drop(b);
        let mut b = Port::new(&node, 1, cfg()).unwrap();
        assert!(matches!(b.release(second), Err(Error::ForeignFragment)));
    }

    /// With acknowledgements withheld, a sender writes only the slots it knew free, then sends in
    /// cells; messages still arrive in order; resumed, the fastbox carries again.
    #[test]
    fn withheld_acks_send_the_rest_in_cells() {
        let node = HeapNode::new(2, small()).unwrap();
        let mut a = Port::new(&node, 0, PortConfig { fastbox_after: 1, ..cfg() }).unwrap();
        let mut b = Port::new(&node, 1, cfg()).unwrap();
        b.withhold_acks(true);
        let mut via_fastbox = 0;
        for i in 0..12i32 {
            let _ = a.send(1, &MsgHeader { tag: i, ..MsgHeader::default() }, None, &[i as u8]).unwrap();
            let (_, h, got, fb) = recv_msg(&mut b, &[0]).unwrap();
            assert_eq!((h.tag, got[0]), (i, i as u8));
            via_fastbox += usize::from(fb);
        }
        assert_eq!(via_fastbox, 4, "the four slots known free, then cells");
        b.withhold_acks(false);
        let _ = a.send(1, &MsgHeader { tag: 12, ..MsgHeader::default() }, None, &[12]).unwrap();
        assert!(recv_msg(&mut b, &[0]).unwrap().3, "acknowledged again: the fastbox carries");
    }

    #[test]
    fn cell_lengths_beyond_the_largest_message_are_corrupt() {
        let node = HeapNode::new(2, Params { fastboxes_per_rank: 0, ..small() }).unwrap();
        let mut a = Port::new(&node, 0, cfg()).unwrap();
        let mut b = Port::new(&node, 1, cfg()).unwrap();
        assert!(matches!(a.send(1, &MsgHeader::default(), None, &[1; 10]).unwrap(), Sent::Done));
        // The sender rewrites the header's length after enqueuing (a faulty peer).
        let c = node.recv_queue(1).peek().unwrap().unwrap();
        // SAFETY: `c` is a cell of the heap node; `len` is at offset 16 of the header.
        unsafe { (c.body().add(16) as *mut u32).write_unaligned(u32::MAX) };
        assert!(matches!(b.poll(&[0]), Err(Error::Corrupt { what: "cell message length", .. })));
    }

    #[test]
    fn corrupt_fastbox_length_is_an_error() {
        let node = HeapNode::new(2, small()).unwrap();
        let mut a = Port::new(&node, 0, cfg()).unwrap();
        let mut b = Port::new(&node, 1, cfg()).unwrap();
        for i in 0..5 {
            let _ = a.send(1, &MsgHeader::default(), None, &[i]).unwrap();
        }
        for _ in 0..4 {
            recv_msg(&mut b, &[0]).unwrap();
        }
        // The box was claimed at the fourth message (slot 0); the fifth is in slot 1: corrupt its
        // length.
        // SAFETY: box 0 of rank 1 exists.
        let fb = unsafe { node.fastbox(1, 0) };
        assert_eq!(fb.owner().load(Relaxed), 1);
        // SAFETY: we write the header's `len` field of slot 1, inside the box.
        unsafe { (fb.bodies.add(fb.body_stride + 16) as *mut u32).write_unaligned(1 << 30) };
        assert!(matches!(b.poll(&[0]), Err(Error::Corrupt { .. })));
    }
}
