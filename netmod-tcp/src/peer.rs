//! What this process keeps for each remote rank ([`Peer`]): where the connection stands
//! ([`Link`]), the bytes read and where they go ([`Rx`]), what is queued for it ([`Out`], with
//! each frame's MAC, [`Tag`]), the large messages' data expected from it ([`DataRecv`]), the
//! link's keys and frame numbers; and the authenticated connections of restarted ranks not
//! announced yet ([`Parked`]).
//!
//! Invariants:
//! - Data flows only in [`Link::Up`]: nothing is written before ACCEPT, nothing read before it is
//!   taken for a message.
//! - `out` is written in order, and a frame is numbered and tagged only once it reaches the
//!   front, so frame numbers follow the order on the wire.
//! - A new connection starts with no keys and both frame numbers at 0 ([`Peer::reset_keys`]).
//! - A [`Link::Dead`] peer holds no connection, no queue and no expected transfer: they went
//!   (failed) when it died.

use std::collections::VecDeque;
use std::net::{SocketAddr, TcpStream};
use std::time::Instant;

use nemesis_shm::auth::{FrameMac, NONCE_BYTES, StreamKey, Transcript};
use nemesis_shm::netmod::Arrival;

use crate::frame::{DATA_HEAD, PREFIX, TAG};

/// The state of the connection with one peer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Link {
    /// Nothing yet.
    Idle,
    /// Our connect is under way (`hello`: HELLO written, waiting for CHALLENGE; `proved`: the
    /// peer proved the job's secret and we sent our PROOF, waiting for ACCEPT or REJECT).
    Connecting {
        since: Instant,
        hello: bool,
        proved: bool,
    },
    /// Our attempt was refused in favour of the peer's own, which we wait for.
    Waiting {
        since: Instant,
    },
    /// Our attempt failed before it was authenticated (closed, or a proof that did not verify):
    /// another at `at`, until the timeout counted from `since`.
    Retry {
        since: Instant,
        at: Instant,
    },
    Up,
    /// The peer said BYE: it sends nothing more, and takes nothing more.
    Bye,
    Dead,
}

/// What is queued for a peer.
pub(crate) enum Out {
    /// A frame, or what is left of it (then its tag).
    Bytes { buf: Vec<u8>, at: usize, tag: Tag },
    /// A DATA frame of a large message, written from the sender's buffer.
    Data { head: [u8; PREFIX + DATA_HEAD], ptr: *const u8, len: usize, at: usize, id: u32, end: Option<u64>, tag: Tag },
}

/// The per-frame MAC of a frame being written: computed when the frame reaches the front of the
/// queue (frames are numbered in the order they go), empty on a link without MACs.
#[derive(Clone, Copy)]
pub(crate) struct Tag {
    /// The tag's bytes still to be written: `bytes[..len]`.
    pub(crate) bytes: [u8; TAG],
    pub(crate) len: usize,
    /// Numbered and computed (or known to need no tag): set once, at the front of the queue.
    pub(crate) sealed: bool,
}

impl Tag {
    pub(crate) const NONE: Tag = Tag { bytes: [0; TAG], len: 0, sealed: false };
}

/// Where the bytes read from a peer go.
pub(crate) enum Rx<'n> {
    /// Between frames.
    Frame,
    /// The payload of a message, into cells.
    Msg(Arrival<'n>),
    /// The bytes of a DATA frame: `left` more go to `dst` (expected transfer `k` of the peer).
    Data { k: usize, left: usize },
}

/// A large message's data expected from a peer.
pub(crate) struct DataRecv {
    /// The transfer's id, as the sender's DATA frames name it.
    pub(crate) id: u32,
    /// The receiver's buffer of `bytes` bytes, valid until the transfer is reported.
    pub(crate) dst: *mut u8,
    pub(crate) bytes: u64,
    /// Bytes written into `dst` so far, in order: DATA frames must start here.
    pub(crate) got: u64,
}

/// One remote rank, as this process sees it.
pub(crate) struct Peer<'n> {
    /// Its listener and heartbeat addresses; `None` until `Netmod::connect`, and while it is
    /// retired for a restart.
    pub(crate) card: Option<(SocketAddr, SocketAddr)>,
    /// Where the connection with it stands; data flows only in `Up`.
    pub(crate) link: Link,
    /// The connection (up or being set up); `None` when idle, dead, or closed after BYE.
    pub(crate) sock: Option<TcpStream>,
    /// Bytes read and not yet used: `buf[start..end]`.
    pub(crate) buf: Box<[u8]>,
    pub(crate) start: usize,
    pub(crate) end: usize,
    /// Where the next bytes read go.
    pub(crate) rx: Rx<'n>,
    /// Frames waiting to be written, in the order they go: anything new is queued behind them.
    pub(crate) out: VecDeque<Out>,
    /// Large messages' data expected from it, each by its transfer id (no id twice).
    pub(crate) recvs: Vec<DataRecv>,
    /// Our nonce of the handshake of our connection to it.
    pub(crate) nonce: [u8; NONCE_BYTES],
    /// The incarnation of its rank number we talk to (0 until a restart, see `docs/design/tcp.md`, "Restarts").
    pub(crate) inc: u32,
    /// Retired for a restart (`Netmod::retire`): dead, and waiting for its next incarnation.
    pub(crate) awaiting: bool,
    /// Our connection's handshake once the CHALLENGE came (checks the ACCEPT or REJECT).
    pub(crate) hs: Option<Transcript>,
    /// The link's per-frame MAC keys (when it has them) and frame numbers, each way.
    pub(crate) tx_key: Option<StreamKey>,
    pub(crate) rx_key: Option<StreamKey>,
    pub(crate) tx_seq: u64,
    pub(crate) rx_seq: u64,
    /// The MAC of the frame being read, until it verified.
    pub(crate) mac: Option<FrameMac>,
    /// Bytes read from its connection, and their count at the last check of silence (a link that
    /// delivers is alive whatever happens to heartbeats).
    pub(crate) rx_bytes: u64,
    pub(crate) rx_seen: u64,
    /// The last check of silence that found `rx_bytes` moved.
    pub(crate) rx_at: Option<Instant>,
}

impl Peer<'_> {
    pub(crate) fn new() -> Self {
        Peer {
            card: None,
            link: Link::Idle,
            sock: None,
            buf: Box::new([]),
            start: 0,
            end: 0,
            rx: Rx::Frame,
            out: VecDeque::new(),
            recvs: Vec::new(),
            nonce: [0; NONCE_BYTES],
            inc: 0,
            awaiting: false,
            hs: None,
            tx_key: None,
            rx_key: None,
            tx_seq: 0,
            rx_seq: 0,
            mac: None,
            rx_bytes: 0,
            rx_seen: 0,
            rx_at: None,
        }
    }

    /// Forgets the keys and numbers of a link (a new connection starts afresh).
    pub(crate) fn reset_keys(&mut self) {
        (self.hs, self.tx_key, self.rx_key, self.mac) = (None, None, None, None);
        (self.tx_seq, self.rx_seq) = (0, 0);
    }
}

/// An authenticated connection from a restarted rank's new incarnation that arrived before this
/// process was told of the restart (`Netmod::restarted`): neither accepted nor refused yet,
/// and out of epoll meanwhile. Dropped after the timeout, as any connection not set up in time.
pub(crate) struct Parked {
    /// The handshake it proved (its rank and incarnation).
    pub(crate) t: Transcript,
    pub(crate) sock: TcpStream,
    /// When it was parked: dropped once the timeout has passed.
    pub(crate) since: Instant,
}

/// Size of each connection's receive buffer.
pub(crate) const RX_BUF: usize = 64 << 10;
