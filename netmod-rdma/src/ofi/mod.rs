//! The ofi netmod of one process ([`OfiNetmod`]): its state, its construction and its
//! [`Netmod`] pass. The protocol is in the crate documentation; why it is so, in
//! `docs/design/ofi.md`. The behaviour is split by concept, each an `impl OfiNetmod` block:
//!
//! - `slots`: operation slots (one `fi_context2` each) and the buffer slab; posting receives;
//! - `eager`: eager fragments out (`fi_tinject`, send buffers, per-peer queues) and in (checked
//!   and ordered by [`crate::frag::Rx`], then drained into cells);
//! - `completion`: the completion queue, and what each completed or failed operation means;
//! - `lmt`: large messages (RMA reads or two-sided data), their registrations, the
//!   [`nemesis_lmt::LmtBackend`];
//! - `peer`: peers' index, deaths and silence;
//! - `rma`: one-sided operations to peers' exposed regions (MPI windows across nodes).
//!
//! Invariants:
//! - every slot is in one state (`ops`); one that is not `Idle` is the provider's, with its
//!   context and buffer, until its completion, which is the only way back to a free list;
//! - every receive buffer is in exactly one place: posted, held by `rx`, or in `repost`
//!   ([`RxBuffers`] counts them);
//! - the eager fragments to one peer leave in the order of their sequence numbers: a fragment
//!   is queued behind any that wait (`Peer::out`), and `queued` is the sum of those queues;
//! - a transfer is reported in `done` once: complete, or failed when its peer dies and nothing of
//!   it is in flight (or the heartbeat timeout passed);
//! - fields drop in order: registrations, then the libfabric objects, then the slab they name.

mod completion;
mod eager;
mod lmt;
mod peer;
mod rma;
mod slots;

use std::collections::VecDeque;
use std::net::SocketAddr;
use std::time::{Duration, Instant};

use nemesis_lmt::{NetDone, RemoteBuf};
use nemesis_shm::auth::JobSecret;
use nemesis_shm::cell::{HEADER_BYTES, ft_flags, ft_room};
use nemesis_shm::netmod::heartbeat::{Heartbeat, Identity};
use nemesis_shm::netmod::{Inbox, KIND_PEER_GONE, Netmod};
use nemesis_shm::{Error, MsgHeader, NetCell, PiggybackBytes, Result};

use crate::fabric::{ATOMICS, Fid, Info, Objects, RMA_READ, RMA_WRITE};
use crate::frag::{self, FragKey, Refusals, Rx, TAG_BYTES};
use crate::mrcache::{MrCache, Reg};
use crate::sys::*;
use crate::{OfiConfig, Rndv, tags};

/// Bytes of each posted receive buffer and send buffer: the largest eager fragment, header and
/// MAC included.
const BUF: usize = 16 << 10;
/// Posted receive buffers and send buffers (fewer if the provider's queues are shorter).
const NBUF: usize = 64;
/// Operations of large messages in flight at once (reads, data sends and receives).
const NLMT_OPS: usize = 64;
/// Bytes of one operation of a large message (less if the provider's messages are shorter).
const CHUNK: usize = 4 << 20;
/// One-sided operations in flight at once.
const NRMA_OPS: usize = 64;
/// Completions taken per `fi_cq_read`.
const CQ_BATCH: usize = 16;
/// Largest fragment sent from the stack with `fi_tinject` (if the provider takes it).
const INJECT_MAX: usize = 512;

/// What an operation slot is doing. Slots `0..nrx` are the posted receive buffers, `nrx..nrx +
/// ntx` the send buffers, the rest large-message operations.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Op {
    Idle,
    /// Receive buffer posted.
    Rx,
    /// Send buffer in flight to `peer`.
    Tx {
        peer: u32,
    },
    /// `fi_read` of `bytes` bytes for the receive of transfer `id` from `peer`.
    Read {
        peer: u32,
        id: u32,
        bytes: u64,
    },
    /// Data of transfer `id` to `peer`.
    DataTx {
        peer: u32,
        id: u32,
        bytes: u64,
    },
    /// Data of transfer `id` from `peer`.
    DataRx {
        peer: u32,
        id: u32,
        bytes: u64,
    },
    /// A one-sided operation to `peer`, with its local registration's cache id (0: none).
    Rma {
        peer: u32,
        reg: u64,
    },
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Link {
    Up,
    /// The peer said goodbye: nothing more comes from it, nothing more goes to it.
    Bye,
    Dead,
}

/// A fragment queued for a peer: the provider had no room, or earlier ones wait.
struct Queued {
    bytes: Vec<u8>,
}

/// A peer as this process sends to it (what comes from it is in [`Rx`]).
struct Peer {
    addr: Option<fi_addr_t>,
    hb: Option<SocketAddr>,
    link: Link,
    /// Sequence number of the next fragment to this peer, and how often it wrapped (in the MAC).
    tx_seq: u32,
    tx_wraps: u32,
    out: VecDeque<Queued>,
}

impl Peer {
    fn new() -> Self {
        Peer { addr: None, hb: None, link: Link::Up, tx_seq: 0, tx_wraps: 0, out: VecDeque::new() }
    }
}

/// A large message this process sends.
struct SendX {
    peer: u32,
    id: u32,
    addr: *const u8,
    len: u64,
    /// Registration (offered for a read, or the local descriptor of data sends).
    reg: Option<Reg>,
    /// Streaming: bytes to send, sent (posted), and completed.
    stream: Option<(u64, u64, u64)>,
    inflight: u32,
    /// When the peer was found dead: the transfer is reported once nothing is in flight (or
    /// after a timeout: see [`OfiNetmod::reap`]).
    failed: Option<Instant>,
}

/// A large message this process receives.
struct RecvX {
    peer: u32,
    id: u32,
    dst: *mut u8,
    bytes: u64,
    /// The sender's buffer, when reading.
    remote: Option<RemoteBuf>,
    /// Local registration (for `FI_MR_LOCAL` providers).
    reg: Option<Reg>,
    posted: u64,
    got: u64,
    inflight: u32,
    /// As for [`SendX::failed`].
    failed: Option<Instant>,
}

/// Counters, for tests and statistics.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct OfiStats {
    /// Eager fragments sent with `fi_tinject`, and from send buffers.
    pub injected: u64,
    pub buffered: u64,
    /// Large-message bytes read with `fi_read`, and sent two-sided.
    pub read_bytes: u64,
    pub streamed_bytes: u64,
    /// Registrations made, and served by the cache.
    pub mr_made: u64,
    pub mr_hits: u64,
    /// Completions that came out of order and waited for their turn.
    pub parked: u64,
    /// Fragments the provider had no room for at once (queued, sent by a later pass).
    pub deferred: u64,
    /// One-sided operations: bytes written (`fi_write`) and read (`fi_read`), atomics posted.
    pub rma_put_bytes: u64,
    pub rma_get_bytes: u64,
    pub rma_atomics: u64,
    /// Received fragments dropped, by reason (a stranger's, duplicates...), and the last.
    pub refused: Refusals,
    /// Posted receives that ended in an error (a message too long for the buffer...).
    pub rx_errors: u64,
}

/// Where the receive buffers are: each is in exactly one place, so the places add up to
/// `total` (a buffer in none is lost to the netmod).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RxBuffers {
    /// Receive buffers of the netmod.
    pub total: usize,
    /// Posted to the provider.
    pub posted: usize,
    /// Holding fragments of peers: in order, waiting for cells, or parked ahead of their turn.
    pub held: usize,
    /// Waiting to be posted again at the next poll.
    pub to_post: usize,
}

/// Registered memory of the receive and send buffers: whole pages, zeroed.
struct Slab {
    ptr: *mut u8,
    layout: std::alloc::Layout,
}

impl Slab {
    fn new(bytes: usize) -> Result<Slab> {
        let layout = std::alloc::Layout::from_size_align(bytes.max(1), 4096)
            .map_err(|e| Error::Net(format!("buffer layout: {e}")))?;
        // SAFETY: a non-zero size.
        let ptr = unsafe { std::alloc::alloc_zeroed(layout) };
        if ptr.is_null() {
            return Err(Error::Net(format!("out of memory for {bytes} bytes of netmod buffers")));
        }
        Ok(Slab { ptr, layout })
    }
}

impl Drop for Slab {
    fn drop(&mut self) {
        // SAFETY: allocated with this layout, freed once.
        unsafe { std::alloc::dealloc(self.ptr, self.layout) };
    }
}

/// The ofi netmod of one process.
pub struct OfiNetmod<'n> {
    /// This process's global rank, and the job's size (`me < size <= tags::MAX_RANKS`).
    me: u32,
    size: u32,
    cfg: OfiConfig,
    /// This process's business card ([`crate::card`]).
    card: String,
    // Drop order: registrations, then the libfabric objects, then the memory they named.
    /// Registrations of large messages' buffers, cached or in use by a transfer.
    mrs: MrCache<Fid<fid_mr>>,
    /// Regions exposed to peers' one-sided operations, by id (`rma`).
    exposed: rma::Exposed,
    /// Registration of the slab (only for `FI_MR_LOCAL` providers).
    slab_mr: Option<Fid<fid_mr>>,
    fi: Objects,
    /// The receive buffers (slots `0..nrx`) then the send buffers (`nrx..nrx + ntx`), `BUF`
    /// bytes each.
    slab: Slab,
    /// Operation contexts (`FI_CONTEXT2`), one per slot, at stable addresses.
    ctx: Box<[fi_context2]>,
    /// What each slot is doing; a slot not `Idle` is the provider's until its completion.
    ops: Vec<Op>,
    nrx: usize,
    ntx: usize,
    /// Idle send-buffer slots: with the `Op::Tx` slots, exactly `nrx..nrx + ntx`.
    free_tx: Vec<usize>,
    /// Idle large-message slots: with those in flight, exactly `nrx + ntx..nrx + ntx +
    /// NLMT_OPS`.
    free_lmt: Vec<usize>,
    /// Idle one-sided slots: with the `Op::Rma` ones, exactly `nrx + ntx + NLMT_OPS..`.
    free_rma: Vec<usize>,
    /// One-sided operations in flight or queued, per rank.
    rma_pending: Vec<u32>,
    /// One-sided operations waiting for room, in order.
    rma_queue: VecDeque<rma::Pending>,
    /// Completion flags of writes and atomics (`FI_DELIVERY_COMPLETE`, until the provider
    /// refuses it).
    rma_flags: u64,
    /// Receive buffers to post again at the next poll: used, or refused (`EAGAIN`).
    repost: Vec<usize>,
    /// What comes in: each fragment checked, each peer's order, the moves into cells.
    rx: Rx<'n>,
    key: FragKey,
    /// Fragments queued for peers (sum of the peers' `out`), so a pass with none looks at no
    /// peer.
    queued: usize,
    /// One per rank of the job (this process's own entry unused).
    peers: Vec<Peer>,
    /// Large messages in progress, until reported in `done` (once each).
    sends: Vec<SendX>,
    recvs: Vec<RecvX>,
    /// Transfers ended, for [`nemesis_lmt::LmtBackend::take_lmt_done`].
    done: Vec<NetDone>,
    hb: Heartbeat,
    /// Ranks found dead whose notice is not yet in the receive queue.
    deaths: Vec<u32>,
    /// Cells of arrivals that never completed, to give back.
    spare: Vec<NetCell<'n>>,
    /// When to look at the heartbeats next (`peer::coarse_ms`).
    next_check: u64,
    /// Bytes of one large-message operation, and the largest fragment sent with `fi_tinject`.
    chunk: usize,
    inject: usize,
    /// Large messages are read (`FI_RMA`, `Rndv::Read`, keys of at most 64 bits).
    read_ok: bool,
    /// A fragment being built (`BUF` bytes).
    scratch: Box<[u8]>,
    /// Completions of one `fi_cq_read` (`CQ_BATCH`).
    cq: Box<[fi_cq_tagged_entry]>,
    stats: OfiStats,
    /// Goodbyes sent: receive buffers that fail are not posted again.
    finalized: bool,
}

impl std::fmt::Debug for OfiNetmod<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("OfiNetmod").field("me", &self.me).field("size", &self.size).field("card", &self.card).finish()
    }
}

// SAFETY: the raw pointers are libfabric objects used by one thread at a time (FI_THREAD_DOMAIN:
// the netmod is driven by one thread at a time), the netmod's own buffers, and large-message
// buffers of transfers in flight (valid by the LmtBackend contracts).
unsafe impl Send for OfiNetmod<'_> {}

fn peer_dead(rank: u32) -> Error {
    Error::NetPeerDead { rank }
}

impl<'n> OfiNetmod<'n> {
    /// `init`: opens the provider (the configured one, else the first with the capabilities),
    /// posts the receive buffers and starts heartbeats, for global rank `me` of a job of `size`
    /// ranks whose secret is `secret` (heartbeats are sealed with it). The card is
    /// [`Netmod::card`].
    pub fn new(me: u32, size: u32, secret: JobSecret, cfg: OfiConfig) -> Result<OfiNetmod<'n>> {
        if size > tags::MAX_RANKS {
            return Err(Error::Net(format!("the ofi netmod takes up to {} ranks", tags::MAX_RANKS)));
        }
        let (prov, dom) = (cfg.provider.as_deref(), cfg.domain.as_deref());
        // The most the provider has: RMA reads, writes and atomics (one-sided operations, `rma`),
        // RMA reads (large messages), tagged messages only.
        let full = RMA_READ | RMA_WRITE | ATOMICS;
        let info = match cfg.rndv {
            Rndv::Read => Info::get_caps(prov, dom, full)
                .or_else(|_| Info::get_caps(prov, dom, RMA_READ | RMA_WRITE))
                .or_else(|_| Info::get(prov, dom, true))
                .or_else(|_| Info::get(prov, dom, false))?,
            Rndv::Send => Info::get(prov, dom, false)?,
        };
        let fi = Objects::open(&info)?;
        let caps = fi.caps.clone();
        let read_ok = caps.rma && cfg.rndv == Rndv::Read && caps.mr_key_size <= 8;
        if me == 0 {
            tracing::info!(
                provider = %caps.prov,
                domain = %caps.domain,
                rma = caps.rma,
                mr_mode = format!("{:#x}", caps.mr_mode),
                inject = caps.inject_size,
                "ofi netmod: provider chosen"
            );
        }
        let nrx = NBUF.min(caps.rx_size.max(1));
        let ntx = NBUF.min(caps.tx_size.max(1));
        let slab = Slab::new((nrx + ntx) * BUF)?;
        let slab_mr = if caps.mr_mode & FI_MR_LOCAL != 0 {
            Some(fi.register(slab.ptr, (nrx + ntx) * BUF, FI_SEND | FI_RECV, 1)?.0)
        } else {
            None
        };
        let nops = nrx + ntx + NLMT_OPS + NRMA_OPS;
        let rma_flags = if caps.delivery_complete { 0 } else { FI_DELIVERY_COMPLETE };
        let ip = cfg.heartbeat_addr.unwrap_or_else(nemesis_shm::netmod::addr::default_addr);
        let key = FragKey::new(&secret);
        let rx = Rx::new(me, size, key.clone(), nrx, cfg.max_message);
        let hb = Heartbeat::start(ip, Identity::new(me, secret), cfg.timing.period)
            .map_err(|e| Error::Net(format!("heartbeat socket on {ip}: {e}")))?;
        let card = crate::card(&caps.prov, SocketAddr::new(ip, hb.port()), &fi.name()?);
        let chunk = CHUNK.min(caps.max_msg_size.max(BUF));
        let inject = caps.inject_size.min(INJECT_MAX);
        let mut nm = OfiNetmod {
            me,
            size,
            mrs: MrCache::new(cfg.mr_cache_for(&caps.prov)),
            cfg,
            card,
            slab_mr,
            fi,
            slab,
            ctx: vec![fi_context2::default(); nops].into_boxed_slice(),
            ops: vec![Op::Idle; nops],
            nrx,
            ntx,
            free_tx: (nrx..nrx + ntx).rev().collect(),
            free_lmt: (nrx + ntx..nrx + ntx + NLMT_OPS).rev().collect(),
            free_rma: (nrx + ntx + NLMT_OPS..nops).rev().collect(),
            rma_pending: vec![0; size as usize],
            rma_flags,
            rma_queue: VecDeque::new(),
            exposed: Vec::new(),
            repost: Vec::new(),
            rx,
            key,
            queued: 0,
            peers: (0..size).map(|_| Peer::new()).collect(),
            sends: Vec::new(),
            recvs: Vec::new(),
            done: Vec::new(),
            hb,
            deaths: Vec::new(),
            spare: Vec::new(),
            next_check: 0,
            chunk,
            inject,
            read_ok,
            scratch: vec![0u8; BUF].into_boxed_slice(),
            cq: vec![fi_cq_tagged_entry::default(); CQ_BATCH].into_boxed_slice(),
            stats: OfiStats::default(),
            finalized: false,
        };
        for i in 0..nrx {
            nm.post_rx(i)?;
        }
        Ok(nm)
    }

    /// The provider in use.
    pub fn provider(&self) -> &str {
        &self.fi.caps.prov
    }

    /// True if large messages are read (RMA) rather than sent.
    pub fn reads(&self) -> bool {
        self.read_ok
    }

    /// Counters so far.
    pub fn stats(&self) -> OfiStats {
        OfiStats {
            mr_made: self.mrs.made,
            mr_hits: self.mrs.hits,
            refused: self.rx.refusals(),
            parked: self.rx.parked(),
            ..self.stats
        }
    }

    /// Where the receive buffers are.
    pub fn rx_buffers(&self) -> RxBuffers {
        RxBuffers {
            total: self.nrx,
            posted: self.ops[..self.nrx].iter().filter(|o| **o == Op::Rx).count(),
            held: self.rx.held(),
            to_post: self.repost.len(),
        }
    }

    /// The settings in force.
    pub fn config(&self) -> &OfiConfig {
        &self.cfg
    }

    fn prov(&self) -> &str {
        &self.fi.caps.prov
    }
}

impl<'n> Netmod<'n> for OfiNetmod<'n> {
    fn card(&self) -> String {
        self.card.clone()
    }

    fn connect(&mut self, rank: u32, card: &str) -> Result<()> {
        let i = self.peer_index(rank)?;
        let (prov, hb, name) =
            crate::parse_card(card).ok_or_else(|| Error::Net(format!("bad business card {card:?} for rank {rank}")))?;
        if prov != self.fi.caps.prov {
            return Err(Error::Net(format!(
                "rank {rank} uses ofi provider {prov}, this rank {} (set NEMESIS_OFI_PROVIDER alike)",
                self.fi.caps.prov
            )));
        }
        self.peers[i].hb = Some(hb);
        // Watched from now on: a receive may wait on a peer we never talked to.
        self.hb.watch(rank, hb);
        match self.fi.insert(&name) {
            Ok(a) => self.peers[i].addr = Some(a),
            Err(e) => {
                self.died(rank, &format!("unreachable: {e}"));
            }
        }
        Ok(())
    }

    fn send(&mut self, dst: u32, hdr: &MsgHeader, ft: Option<&PiggybackBytes>, payload: &[u8]) -> Result<()> {
        self.peer_index(dst)?;
        if payload.len() > self.cfg.max_message {
            return Err(Error::TooLarge { len: payload.len(), max: self.cfg.max_message });
        }
        if self.peers[dst as usize].link != Link::Up {
            return Err(peer_dead(dst));
        }
        if self.peers[dst as usize].addr.is_none() {
            return Err(Error::Net(format!("no business card for rank {dst}")));
        }
        let mut h = *hdr;
        h.len = payload.len() as u32;
        h.src = self.me;
        h.dst = dst;
        // Only the piggyback flags travel, and only with a piggyback (in every fragment's room).
        h.flags = ft_flags(hdr.flags, ft.is_some());
        let room = ft_room(h.flags);
        let per = BUF - HEADER_BYTES - room - TAG_BYTES;
        let mut scratch = std::mem::take(&mut self.scratch);
        let mut off = 0;
        let mut frag = 0u16;
        let r = loop {
            let n = (payload.len() - off).min(per);
            let (w, wraps) = self.wire_header(dst, &h, frag);
            let ft = ft.map(|pb| &pb[..]);
            let len = frag::build(&self.key, &w, wraps, ft, &payload[off..off + n], &mut scratch);
            if let Err(e) = self.send_frag(dst, &scratch[..len]) {
                break Err(e);
            }
            off += n;
            frag = frag.wrapping_add(1);
            if off == payload.len() {
                break Ok(());
            }
        };
        self.scratch = scratch;
        r
    }

    fn poll(&mut self, inbox: &mut dyn Inbox<'n>) -> Result<bool> {
        if !self.repost.is_empty() {
            self.post_again()?;
        }
        let mut moved = self.poll_cq()?;
        if self.rx.is_ready() {
            moved |= self.drain(inbox)?;
        }
        if self.queued > 0 {
            moved |= self.flush();
        }
        if !self.sends.is_empty() || !self.recvs.is_empty() {
            moved |= self.pump_lmt();
        }
        if !self.rma_queue.is_empty() {
            moved |= self.rma_pump();
        }
        self.check_silence();
        if !self.deaths.is_empty() || !self.spare.is_empty() {
            moved |= self.announce_deaths(inbox)?;
        }
        Ok(moved)
    }

    fn busy(&self) -> bool {
        // Queues of dead peers are emptied: what is queued goes to live ones.
        self.free_tx.len() < self.ntx || self.queued > 0 || !self.rma_queue.is_empty()
    }

    fn finalize(&mut self) -> Result<()> {
        if self.finalized {
            return Ok(());
        }
        // Goodbye to every peer alive, behind what is queued for it.
        let me = self.me;
        for rank in (0..self.size).filter(|&r| r != me) {
            let p = &self.peers[rank as usize];
            if p.link == Link::Up && p.addr.is_some() {
                let h = MsgHeader { src: self.me, dst: rank, kind: KIND_PEER_GONE, ..MsgHeader::default() };
                let (w, wraps) = self.wire_header(rank, &h, 0);
                let mut b = [0u8; frag::wire_len(false, 0)];
                let len = frag::build(&self.key, &w, wraps, None, &[], &mut b);
                let _ = self.send_frag(rank, &b[..len]);
            }
        }
        let deadline = Instant::now() + self.cfg.timing.timeout;
        while self.busy() && Instant::now() < deadline {
            if self.poll_cq().is_err() {
                break;
            }
            self.flush();
            std::thread::sleep(Duration::from_micros(50));
        }
        self.finalized = true;
        for p in &mut self.peers {
            if p.link == Link::Up {
                p.link = Link::Bye;
            }
        }
        Ok(())
    }
}

impl Drop for OfiNetmod<'_> {
    fn drop(&mut self) {
        // Operations still posted name our buffers: the endpoint closes (fields drop in order:
        // registrations, the libfabric objects, then the buffers).
        self.finalized = true;
    }
}
