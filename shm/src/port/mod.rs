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
//!   (`recovery.rs`, "Reclaim"); a dead sender's fastbox is freed once it holds nothing more to deliver
//!   (a message published in it waits for its number, even behind cells still in the queue); a
//!   message a dead sender left half-sent is reported dropped ([`PeerEvent::PartialDropped`]) once
//!   the queue has passed everything the sender enqueued, whichever message the receiver was at,
//!   so the layer above never delivers part of it.
//! - **Flow control** ([`Port::withhold_acks`]): the layer above may stop acknowledging fastbox
//!   messages and keep cells unreleased; a sender then runs out of both and waits.
//!
//! One `impl Port` per concept, all over the fields declared here: `incoming.rs` (a received
//! fragment), `send.rs`, `receive.rs` (polling, per-pair order, release), `netmod.rs` (network
//! arrivals through the receive queue), `recovery.rs` (peers that ended).

mod incoming;
mod netmod;
mod receive;
mod recovery;
mod send;
#[cfg(all(test, not(loom)))]
mod tests;

pub use incoming::{Incoming, REMOTE};
pub use netmod::NetCell;
pub use recovery::PeerEvent;
pub use send::{PendingSend, Sent};

use crate::arena::Arena;
use crate::cell::{CellHandle, HEADER_BYTES, MsgHeader};
use crate::error::{Error, Result};
use crate::fastbox::FastboxRef;
use crate::node::Node;

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

/// A process's port onto a [`Node`] as local rank `me`. Driven by one thread at a time.
pub struct Port<'n, N: Node> {
    /// The node; outlives every fragment this port hands out.
    node: &'n N,
    /// Our local rank: a valid rank of `node`, and the only port for it in this process.
    me: u16,
    /// Tunables; `scan_every` and `check_every` are powers of two.
    cfg: PortConfig,
    /// Bytes of a cell from its header on.
    cell_body: usize,
    /// One more than the largest payload sent through fastboxes; 0 when they are off.
    fbox_lim: usize,
    /// Largest message the cell path carries.
    max_message: usize,
    /// Sender state, one entry per local rank of the node.
    tx: Box<[Tx<'n>]>,
    /// Receiver state, one entry per local rank of the node.
    rx: Box<[Rx<'n>]>,
    /// Owner word last seen for each box we host (0: free).
    box_owner: Box<[u32]>,
    /// A cell taken from our queue ahead of fastbox messages of its sender that precede it;
    /// while set, nothing else is polled before it is delivered.
    stash: Option<Stashed>,
    /// Polls so far (wrapping): schedules the fastbox scans and the liveness checks.
    polls: u32,
    /// The node's death epoch when this port last looked at its peers ([`NO_EPOCH_SEEN`] before).
    epoch: u64,
    /// What this port has done about each local rank's death, one entry per rank.
    gone: Box<[Gone]>,
    /// Peer events not yet taken by [`take_events`](Self::take_events).
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

    /// Messages and payload bytes handed to this port for local rank `dst` so far (every message,
    /// whoever in the layer above sent it); `(0, 0)` for an unknown rank.
    pub fn sent_to(&self, dst: u16) -> (u64, u64) {
        self.tx.get(usize::from(dst)).map_or((0, 0), |t| (t.seq, t.bytes))
    }

    /// Cells currently linked in our free queue (for accounting and tests).
    pub fn free_cells(&self) -> Result<usize> {
        self.node.free_queue(self.me).count_linked()
    }
}
