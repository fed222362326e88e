//! The netmod proper: eager fragments through posted buffers, large messages by RMA read or
//! two-sided tagged data, completions, deaths (see the crate documentation).

use std::collections::VecDeque;
use std::ffi::c_void;
use std::net::SocketAddr;
use std::ptr;
use std::time::{Duration, Instant};

use nemesis_lmt::{LmtBackend, NetDone, Outcome, RecvPlan, RemoteBuf};
use nemesis_shm::auth::JobSecret;
use nemesis_shm::cell::{FT_ROOM, HEADER_BYTES, flags};
use nemesis_shm::netmod::heartbeat::{Heartbeat, Identity};
use nemesis_shm::netmod::{Inbox, KIND_PEER_GONE, Netmod, announce_deaths};
use nemesis_shm::{Error, MsgHeader, NetCell, PiggybackBytes, Result};

use crate::fabric::{self, Fid, Info, Objects, check, fi_error};
use crate::frag::{self, Ended, FragKey, Refusals, Rx, TAG_BYTES};
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
    me: u32,
    size: u32,
    cfg: OfiConfig,
    card: String,
    // Drop order: registrations, then the libfabric objects, then the memory they named.
    mrs: MrCache<Fid<fid_mr>>,
    slab_mr: Option<Fid<fid_mr>>,
    fi: Objects,
    slab: Slab,
    /// Operation contexts (`FI_CONTEXT2`), one per slot, at stable addresses.
    ctx: Box<[fi_context2]>,
    ops: Vec<Op>,
    nrx: usize,
    ntx: usize,
    free_tx: Vec<usize>,
    free_lmt: Vec<usize>,
    /// Receive buffers to post again at the next poll: used, or refused (`EAGAIN`).
    repost: Vec<usize>,
    /// What comes in: each fragment checked, each peer's order, the moves into cells.
    rx: Rx<'n>,
    key: FragKey,
    /// Fragments queued for peers (sum of the peers' `out`), so a pass with none looks at no
    /// peer.
    queued: usize,
    peers: Vec<Peer>,
    sends: Vec<SendX>,
    recvs: Vec<RecvX>,
    done: Vec<NetDone>,
    hb: Heartbeat,
    deaths: Vec<u32>,
    spare: Vec<NetCell<'n>>,
    /// When to look at the heartbeats next ([`coarse_ms`]).
    next_check: u64,
    chunk: usize,
    inject: usize,
    read_ok: bool,
    scratch: Box<[u8]>,
    cq: Box<[fi_cq_tagged_entry]>,
    stats: OfiStats,
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

/// Milliseconds of the coarse monotonic clock (`CLOCK_MONOTONIC_COARSE`: the kernel's tick, a
/// few milliseconds, read from the vDSO without a timestamp counter), which paces the silence
/// checks of every poll: 8–16 ns a read on the project's machine against 45–50 ns for
/// `Instant::now`, on a pass of a few hundred instructions.
fn coarse_ms() -> u64 {
    let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: `ts` is a valid timespec for the call to write.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC_COARSE, &mut ts) };
    ts.tv_sec as u64 * 1000 + ts.tv_nsec as u64 / 1_000_000
}

/// A random registration key of `size` bytes (at most 8), never the slab's 1 nor 0.
fn random_key(size: usize) -> Result<u64> {
    let n = nemesis_shm::auth::nonce()?;
    let mut k = [0u8; 8];
    k.copy_from_slice(&n[..8]);
    let bits = 8 * size.clamp(1, 8) as u32;
    let k = u64::from_le_bytes(k) & (u64::MAX >> (64 - bits));
    Ok(k.max(2))
}

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
        let info = match cfg.rndv {
            Rndv::Read => Info::get(prov, dom, true).or_else(|_| Info::get(prov, dom, false))?,
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
        let nops = nrx + ntx + NLMT_OPS;
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
            free_lmt: (nrx + ntx..nops).rev().collect(),
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

    fn ctx(&mut self, slot: usize) -> *mut c_void {
        &mut self.ctx[slot] as *mut fi_context2 as *mut c_void
    }

    /// The slot of a completion's context, checked.
    fn slot_of(&self, p: *mut c_void) -> Option<usize> {
        let base = self.ctx.as_ptr() as usize;
        let size = std::mem::size_of::<fi_context2>();
        let off = (p as usize).checked_sub(base)?;
        (off % size == 0 && off / size < self.ctx.len()).then_some(off / size)
    }

    fn buf(&self, slot: usize) -> *mut u8 {
        debug_assert!(slot < self.nrx + self.ntx);
        // SAFETY: slot `slot` of the slab, `BUF` bytes inside its allocation.
        unsafe { self.slab.ptr.add(slot * BUF) }
    }

    fn slab_desc(&self) -> *mut c_void {
        self.slab_mr.as_ref().map_or(ptr::null_mut(), fabric::desc)
    }

    fn reg_desc(&self, reg: Option<Reg>) -> *mut c_void {
        if self.fi.caps.mr_mode & FI_MR_LOCAL == 0 {
            return ptr::null_mut();
        }
        reg.and_then(|r| self.mrs.handle(r.id)).map_or(ptr::null_mut(), fabric::desc)
    }

    /// Posts the receive buffers that wait for it (used, or refused with `EAGAIN` before).
    fn post_again(&mut self) -> Result<()> {
        let mut list = std::mem::take(&mut self.repost);
        let mut r = Ok(());
        for k in 0..list.len() {
            if let Err(e) = self.post_rx(list[k]) {
                // Kept for a later attempt, with those not tried.
                self.repost.extend_from_slice(&list[k..]);
                r = Err(e);
                break;
            }
        }
        // The allocation is kept (`post_rx` lists refused buffers again in `repost`).
        list.clear();
        list.append(&mut self.repost);
        self.repost = list;
        r
    }

    /// Posts receive buffer `i` (again).
    fn post_rx(&mut self, i: usize) -> Result<()> {
        let (buf, desc, ctx) = (self.buf(i), self.slab_desc(), self.ctx(i));
        // SAFETY: buffer `i` is ours and idle until its completion; its context is stable.
        let rc = unsafe { nm_trecv(self.fi.ep.0, buf as *mut c_void, BUF, desc, FI_ADDR_UNSPEC, tags::MSG, 0, ctx) };
        if rc == -(FI_EAGAIN as isize) {
            self.repost.push(i);
            return Ok(());
        }
        check(self.prov(), "fi_trecv", rc as i64)?;
        self.ops[i] = Op::Rx;
        Ok(())
    }

    fn peer_index(&self, rank: u32) -> Result<usize> {
        if rank >= self.size || rank == self.me {
            return Err(Error::Net(format!("rank {rank} is not a remote peer (job of {} ranks)", self.size)));
        }
        Ok(rank as usize)
    }

    /// Marks `rank` dead (`why` is logged): drops what waits for it and what came from it, fails
    /// its transfers (once their operations are done), schedules the notice.
    fn died(&mut self, rank: u32, why: &str) -> Error {
        let Some(p) = self.peers.get_mut(rank as usize) else { return peer_dead(rank) };
        if p.link != Link::Dead {
            tracing::warn!(rank, why, provider = %self.fi.caps.prov, "remote peer is gone");
            p.link = Link::Dead;
            self.queued -= p.out.len();
            p.out.clear();
            let mut used = Vec::new();
            if let Some(c) = self.rx.close(rank, &mut used) {
                self.spare.push(c);
            }
            for i in used {
                let _ = self.post_rx(i);
            }
            let now = Some(Instant::now());
            for s in self.sends.iter_mut().filter(|s| s.peer == rank) {
                s.failed = now;
            }
            for r in self.recvs.iter_mut().filter(|r| r.peer == rank) {
                r.failed = now;
            }
            // Posted data receives from it are cancelled (their completions say so).
            for slot in self.nrx + self.ntx..self.ops.len() {
                if let Op::DataRx { peer, .. } = self.ops[slot]
                    && peer == rank
                {
                    let ctx = self.ctx(slot);
                    // SAFETY: an operation posted on our endpoint with this context.
                    unsafe { nm_cancel(self.fi.ep.fid(), ctx) };
                }
            }
            self.hb.unwatch(rank);
            self.deaths.push(rank);
            self.reap();
        }
        peer_dead(rank)
    }

    /// Reports the transfers of dead peers that have nothing in flight, or whose operations the
    /// provider has not ended within the heartbeat timeout of the death (a provider that needs
    /// the dead peer's progress to end them — `shm`'s copies through the peer — never would).
    /// Such an operation's late completion is ignored; its buffer is the caller's again, so a
    /// provider that still wrote into it then would write into memory the caller may reuse: the
    /// price of not hanging on a dead peer.
    fn reap(&mut self) {
        let failed = || Outcome::Failed(nemesis_lmt::Error::PeerDied);
        let limit = self.cfg.timing.timeout;
        let due = |f: Option<Instant>, inflight: u32| f.is_some_and(|t| inflight == 0 || t.elapsed() > limit);
        let mut k = 0;
        while k < self.sends.len() {
            if due(self.sends[k].failed, self.sends[k].inflight) {
                let s = self.sends.swap_remove(k);
                if let Some(r) = s.reg {
                    self.mrs.release(r.id);
                }
                self.done.push(NetDone { peer: s.peer, id: s.id, send: true, outcome: failed() });
            } else {
                k += 1;
            }
        }
        let mut k = 0;
        while k < self.recvs.len() {
            if due(self.recvs[k].failed, self.recvs[k].inflight) {
                let r = self.recvs.swap_remove(k);
                if let Some(g) = r.reg {
                    self.mrs.release(g.id);
                }
                self.done.push(NetDone { peer: r.peer, id: r.id, send: false, outcome: failed() });
            } else {
                k += 1;
            }
        }
    }

    // ---------------------------------------------------------------------------------------
    // Sending eager fragments.

    /// Sends one wire fragment (`bytes`: header, room and data) to `rank`, or queues it behind
    /// what waits. `Err` only if the peer is dead.
    fn send_frag(&mut self, rank: u32, bytes: &[u8]) -> Result<()> {
        if !self.peers[rank as usize].out.is_empty() || !self.try_send(rank, bytes)? {
            self.peers[rank as usize].out.push_back(Queued { bytes: bytes.to_vec() });
            self.queued += 1;
            self.stats.deferred += 1;
        }
        Ok(())
    }

    /// Hands a fragment to the provider: true if taken, false if it has no room now.
    fn try_send(&mut self, rank: u32, bytes: &[u8]) -> Result<bool> {
        let Some(addr) = self.peers[rank as usize].addr else {
            return Err(Error::Net(format!("no business card for rank {rank}")));
        };
        if bytes.len() <= self.inject {
            // SAFETY: `bytes` is read before the call returns (inject semantics).
            let rc = unsafe { nm_tinject(self.fi.ep.0, bytes.as_ptr() as *const c_void, bytes.len(), addr, tags::MSG) };
            return match rc {
                0 => {
                    self.stats.injected += 1;
                    Ok(true)
                }
                rc if rc == -(FI_EAGAIN as isize) => Ok(false),
                rc => Err(self.died(rank, &format!("fi_tinject: {}", fabric::strerror(rc as i64)))),
            };
        }
        let Some(slot) = self.free_tx.pop() else { return Ok(false) };
        let buf = self.buf(slot);
        // SAFETY: send buffer `slot` is idle (on the free list) and holds `BUF >= bytes.len()`
        // bytes.
        unsafe { ptr::copy_nonoverlapping(bytes.as_ptr(), buf, bytes.len()) };
        let (desc, ctx) = (self.slab_desc(), self.ctx(slot));
        // SAFETY: the buffer stays untouched until the completion of `ctx`'s operation.
        let rc = unsafe { nm_tsend(self.fi.ep.0, buf as *const c_void, bytes.len(), desc, addr, tags::MSG, ctx) };
        match rc {
            0 => {
                self.ops[slot] = Op::Tx { peer: rank };
                self.stats.buffered += 1;
                Ok(true)
            }
            rc if rc == -(FI_EAGAIN as isize) => {
                self.free_tx.push(slot);
                Ok(false)
            }
            rc => {
                self.free_tx.push(slot);
                Err(self.died(rank, &format!("fi_tsend: {}", fabric::strerror(rc as i64))))
            }
        }
    }

    /// Sends what waits for each peer, in order, as the provider takes it.
    fn flush(&mut self) -> bool {
        let mut moved = false;
        for rank in 0..self.size {
            while let Some(q) = self.peers[rank as usize].out.pop_front() {
                self.queued -= 1;
                match self.try_send(rank, &q.bytes) {
                    Ok(true) => moved = true,
                    Ok(false) => {
                        self.peers[rank as usize].out.push_front(q);
                        self.queued += 1;
                        break;
                    }
                    Err(_) => break,
                }
            }
        }
        moved
    }

    /// The wire header of fragment `frag` of a message `h` to `rank`, and the wraps of its
    /// sequence number.
    fn wire_header(&mut self, rank: u32, h: &MsgHeader, frag: u16) -> (MsgHeader, u32) {
        let p = &mut self.peers[rank as usize];
        let (seq, wraps) = (p.tx_seq, p.tx_wraps);
        p.tx_seq = p.tx_seq.wrapping_add(1);
        if p.tx_seq == 0 {
            p.tx_wraps = p.tx_wraps.wrapping_add(1);
        }
        (MsgHeader { seq, frag, ..*h }, wraps)
    }

    // ---------------------------------------------------------------------------------------
    // Completions.

    /// Reads the completion queue until it is empty. True if anything completed.
    fn poll_cq(&mut self) -> Result<bool> {
        let mut any = false;
        loop {
            // SAFETY: `cq` holds CQ_BATCH entries of the queue's format (tagged).
            let n = unsafe { nm_cq_read(self.fi.cq.0, self.cq.as_mut_ptr() as *mut c_void, CQ_BATCH) };
            if n > 0 {
                any = true;
                for k in 0..n as usize {
                    let e = self.cq[k];
                    self.complete(e.op_context, e.len)?;
                }
                if (n as usize) < CQ_BATCH {
                    return Ok(any);
                }
            } else if n == -(FI_EAGAIN as isize) {
                return Ok(any);
            } else if n == -(FI_EAVAIL as isize) {
                any = true;
                self.complete_error()?;
            } else {
                return Err(fi_error(self.prov(), "fi_cq_read", n as i64));
            }
        }
    }

    fn complete(&mut self, ctx: *mut c_void, len: usize) -> Result<()> {
        let Some(slot) = self.slot_of(ctx) else {
            return Err(Error::Net(format!("ofi provider {}: a completion for an unknown context", self.prov())));
        };
        let op = std::mem::replace(&mut self.ops[slot], Op::Idle);
        match op {
            Op::Idle => {}
            Op::Rx => self.arrived(slot, len.min(BUF))?,
            Op::Tx { .. } => self.free_tx.push(slot),
            Op::Read { peer, id, bytes } | Op::DataRx { peer, id, bytes } => {
                self.free_lmt.push(slot);
                if let Some(k) = self.recvs.iter().position(|r| r.peer == peer && r.id == id) {
                    let r = &mut self.recvs[k];
                    r.inflight -= 1;
                    r.got += bytes;
                    if r.got == r.bytes && r.failed.is_none() {
                        let r = self.recvs.swap_remove(k);
                        if let Some(g) = r.reg {
                            self.mrs.release(g.id);
                        }
                        if r.remote.is_some() {
                            self.stats.read_bytes += r.bytes;
                        }
                        self.done.push(NetDone { peer, id, send: false, outcome: Outcome::Moved { bytes: r.bytes } });
                    }
                }
                self.reap();
            }
            Op::DataTx { peer, id, bytes } => {
                self.free_lmt.push(slot);
                if let Some(k) = self.sends.iter().position(|s| s.peer == peer && s.id == id) {
                    let s = &mut self.sends[k];
                    s.inflight -= 1;
                    if let Some((total, posted, acked)) = s.stream.as_mut() {
                        *acked += bytes;
                        if *acked == *total && *posted == *total && s.failed.is_none() {
                            let total = *total;
                            let s = self.sends.swap_remove(k);
                            if let Some(r) = s.reg {
                                self.mrs.release(r.id);
                            }
                            self.stats.streamed_bytes += total;
                            let outcome = Outcome::Moved { bytes: total };
                            self.done.push(NetDone { peer, id, send: true, outcome });
                        }
                    }
                }
                self.reap();
            }
        }
        Ok(())
    }

    /// An error completion: the operation's peer is dead (a posted receive buffer's error is
    /// logged and the buffer posted again: the sender is not known).
    fn complete_error(&mut self) -> Result<()> {
        let mut e = fi_cq_err_entry::default();
        // SAFETY: `e` receives one error entry.
        let n = unsafe { nm_cq_readerr(self.fi.cq.0, &mut e, 0) };
        if n != 1 {
            return if n == -(FI_EAGAIN as isize) {
                Ok(())
            } else {
                Err(fi_error(self.prov(), "fi_cq_readerr", n as i64))
            };
        }
        let mut text = [0 as std::ffi::c_char; 256];
        // SAFETY: the entry just read and a buffer of its length; the result is NUL-terminated.
        let p = unsafe { nm_cq_strerror(self.fi.cq.0, e.prov_errno, e.err_data, text.as_mut_ptr(), text.len()) };
        let why = format!("{} ({})", fabric::c_str(p), fabric::strerror(i64::from(e.err)));
        let Some(slot) = self.slot_of(e.op_context) else {
            return Err(Error::Net(format!("ofi provider {}: an error for an unknown context: {why}", self.prov())));
        };
        let cancelled = e.err == FI_ECANCELED as i32;
        match self.ops[slot] {
            Op::Idle => {}
            Op::Rx => {
                self.ops[slot] = Op::Idle;
                if !cancelled {
                    // Anyone may send what fails a receive (too long a message): counted, logged
                    // at the 1st, 2nd, 4th... time.
                    self.stats.rx_errors += 1;
                    if self.stats.rx_errors.is_power_of_two() {
                        let n = self.stats.rx_errors;
                        tracing::warn!(provider = %self.fi.caps.prov, %why, failed = n, "a receive failed");
                    }
                }
                if !self.finalized {
                    self.post_rx(slot)?;
                }
            }
            Op::Tx { peer } => {
                self.ops[slot] = Op::Idle;
                self.free_tx.push(slot);
                self.died(peer, &format!("send: {why}"));
            }
            Op::Read { peer, id, .. } | Op::DataRx { peer, id, .. } => {
                self.ops[slot] = Op::Idle;
                self.free_lmt.push(slot);
                if let Some(r) = self.recvs.iter_mut().find(|r| r.peer == peer && r.id == id) {
                    r.inflight -= 1;
                }
                if !cancelled {
                    self.died(peer, &format!("large-message receive: {why}"));
                }
                self.reap();
            }
            Op::DataTx { peer, id, .. } => {
                self.ops[slot] = Op::Idle;
                self.free_lmt.push(slot);
                if let Some(s) = self.sends.iter_mut().find(|s| s.peer == peer && s.id == id) {
                    s.inflight -= 1;
                }
                self.died(peer, &format!("large-message send: {why}"));
                self.reap();
            }
        }
        Ok(())
    }

    /// Receive buffer `i` holds a fragment of `len` bytes: checked, then in its sender's order
    /// or parked; a refused one (counted) is posted again at once.
    fn arrived(&mut self, i: usize, len: usize) -> Result<()> {
        // SAFETY: buffer `i` holds `len` received bytes, ours until posted again.
        let bytes = unsafe { std::slice::from_raw_parts(self.buf(i), len) };
        if self.rx.arrived(i, bytes).is_err() {
            return self.post_rx(i);
        }
        Ok(())
    }

    /// Moves the fragments that wait, peer by peer, into cells. True if any moved.
    fn drain(&mut self, inbox: &mut dyn Inbox<'n>) -> Result<bool> {
        let slab = self.slab.ptr;
        let mut ended = Vec::new();
        // Used buffers are posted again at the start of the next poll: not between this arrival
        // and its receiver.
        let moved = self.rx.drain(
            // SAFETY: a buffer the provider completed with `len` bytes, ours until posted again.
            |i, len| unsafe { std::slice::from_raw_parts(slab.add(i * BUF), len) },
            &mut self.spare,
            inbox,
            &mut self.repost,
            &mut ended,
        );
        for e in ended {
            match e {
                Ended::Goodbye(rank) => {
                    if self.peers[rank as usize].link == Link::Up {
                        self.peers[rank as usize].link = Link::Bye;
                    }
                    self.hb.unwatch(rank);
                }
                Ended::Broken(rank, why) => {
                    self.died(rank, &why);
                }
            }
        }
        Ok(moved)
    }

    // ---------------------------------------------------------------------------------------
    // Large messages.

    /// Posts the operations of large messages that can go now: reads, data receives, data
    /// sends, in chunks, as slots allow.
    fn pump_lmt(&mut self) -> bool {
        let mut moved = false;
        for k in 0..self.recvs.len() {
            loop {
                let r = &self.recvs[k];
                if r.failed.is_some() || r.posted >= r.bytes || self.free_lmt.is_empty() {
                    break;
                }
                let (peer, id, off, remote, reg) = (r.peer, r.id, r.posted, r.remote, r.reg);
                let n = (r.bytes - off).min(self.chunk as u64);
                // SAFETY: `off + n <= bytes`: inside the receive buffer (start_recv's contract).
                let dst = unsafe { r.dst.add(off as usize) } as *mut c_void;
                let Some(addr) = self.peers[peer as usize].addr else { break };
                let Some(slot) = self.free_lmt.pop() else { break };
                let (desc, ctx) = (self.reg_desc(reg), self.ctx(slot));
                let (rc, op, call) = match remote {
                    // SAFETY: the buffer is the provider's until the completion of `ctx`.
                    Some(rb) => (
                        unsafe { nm_read(self.fi.ep.0, dst, n as usize, desc, addr, rb.addr + off, rb.key, ctx) },
                        Op::Read { peer, id, bytes: n },
                        "fi_read",
                    ),
                    // SAFETY: as above.
                    None => (
                        unsafe { nm_trecv(self.fi.ep.0, dst, n as usize, desc, addr, tags::data(peer, id), 0, ctx) },
                        Op::DataRx { peer, id, bytes: n },
                        "fi_trecv",
                    ),
                };
                if rc == -(FI_EAGAIN as isize) {
                    self.free_lmt.push(slot);
                    break;
                }
                if rc != 0 {
                    self.free_lmt.push(slot);
                    self.died(peer, &format!("{call}: {}", fabric::strerror(rc as i64)));
                    break;
                }
                self.ops[slot] = op;
                let r = &mut self.recvs[k];
                r.posted += n;
                r.inflight += 1;
                moved = true;
            }
        }
        for k in 0..self.sends.len() {
            loop {
                let s = &self.sends[k];
                let Some((total, posted, _)) = s.stream else { break };
                if s.failed.is_some() || posted >= total || self.free_lmt.is_empty() {
                    break;
                }
                let (peer, id, reg) = (s.peer, s.id, s.reg);
                let n = (total - posted).min(self.chunk as u64);
                // SAFETY: `posted + n <= total <= len`: inside the sender's buffer, which stays
                // valid and unchanged until the transfer is reported (start_send's contract).
                let src = unsafe { s.addr.add(posted as usize) } as *const c_void;
                let Some(addr) = self.peers[peer as usize].addr else { break };
                let Some(slot) = self.free_lmt.pop() else { break };
                let (desc, ctx) = (self.reg_desc(reg), self.ctx(slot));
                // SAFETY: as above; the context is stable until the completion.
                let rc = unsafe { nm_tsend(self.fi.ep.0, src, n as usize, desc, addr, tags::data(self.me, id), ctx) };
                if rc == -(FI_EAGAIN as isize) {
                    self.free_lmt.push(slot);
                    break;
                }
                if rc != 0 {
                    self.free_lmt.push(slot);
                    self.died(peer, &format!("fi_tsend (data): {}", fabric::strerror(rc as i64)));
                    break;
                }
                self.ops[slot] = Op::DataTx { peer, id, bytes: n };
                let s = &mut self.sends[k];
                if let Some((_, posted, _)) = s.stream.as_mut() {
                    *posted += n;
                }
                s.inflight += 1;
                moved = true;
            }
        }
        moved
    }

    /// A registration for `len` bytes at `addr` (`exposed`: readable by peers).
    fn acquire(&mut self, addr: *const u8, len: u64, exposed: bool) -> Result<Reg> {
        let access = if exposed { FI_SEND | FI_RECV | FI_READ | FI_REMOTE_READ } else { FI_SEND | FI_RECV | FI_READ };
        let prov_key = self.fi.caps.mr_mode & FI_MR_PROV_KEY != 0;
        let fi = &self.fi;
        self.mrs.acquire(addr as usize, len as usize, exposed, |start, bytes| {
            if prov_key {
                return fi.register(start as *const u8, bytes, access, 0);
            }
            // Our keys: random, since the key is all a peer needs to read an exposed
            // registration (and the pages around the buffer): one who can reach the endpoint must
            // not guess it. A key in use already is refused: another is drawn.
            let mut r = Err(Error::Net("no key".into()));
            for _ in 0..4 {
                r = fi.register(start as *const u8, bytes, access, random_key(fi.caps.mr_key_size)?);
                if r.is_ok() {
                    break;
                }
            }
            r
        })
    }

    // ---------------------------------------------------------------------------------------
    // Silence and deaths.

    fn check_silence(&mut self) {
        let now = coarse_ms();
        if now < self.next_check {
            return;
        }
        self.next_check = now + (self.cfg.timing.period / 2).as_millis() as u64;
        if self.sends.iter().any(|s| s.failed.is_some()) || self.recvs.iter().any(|r| r.failed.is_some()) {
            self.reap();
        }
        for (rank, quiet) in self.hb.silent(self.cfg.timing.timeout) {
            if self.peers.get(rank as usize).is_some_and(|p| p.link == Link::Up) {
                self.died(rank, &format!("no heartbeat for {quiet:?}"));
            }
        }
    }

    /// Puts the notices of deaths into the receive queue, as cells allow; cells of arrivals that
    /// never completed go back.
    fn announce_deaths(&mut self, inbox: &mut dyn Inbox<'n>) -> Result<bool> {
        announce_deaths(self.me, &mut self.deaths, &mut self.spare, inbox)
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
        // Only the piggyback flag travels, and only with a piggyback (in every fragment's room).
        h.flags = if ft.is_some() { flags::FT_PIGGYBACK } else { 0 };
        let room = if ft.is_some() { FT_ROOM } else { 0 };
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
        self.check_silence();
        if !self.deaths.is_empty() || !self.spare.is_empty() {
            moved |= self.announce_deaths(inbox)?;
        }
        Ok(moved)
    }

    fn busy(&self) -> bool {
        // Queues of dead peers are emptied: what is queued goes to live ones.
        self.free_tx.len() < self.ntx || self.queued > 0
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

impl LmtBackend for OfiNetmod<'_> {
    unsafe fn pre_send(
        &mut self,
        peer: u32,
        id: u32,
        addr: *const u8,
        bytes: u64,
    ) -> nemesis_lmt::Result<Option<RemoteBuf>> {
        self.peer_index(peer).map_err(|e| nemesis_lmt::Error::Cma(e.to_string()))?;
        let mut s = SendX { peer, id, addr, len: bytes, reg: None, stream: None, inflight: 0, failed: None };
        let mut offer = None;
        if self.read_ok {
            match self.acquire(addr, bytes, true) {
                Ok(reg) => {
                    let at = if self.fi.caps.mr_mode & FI_MR_VIRT_ADDR != 0 {
                        addr as u64
                    } else {
                        addr as u64 - reg.start as u64
                    };
                    offer = Some(RemoteBuf { addr: at, key: reg.key });
                    s.reg = Some(reg);
                }
                Err(e) => tracing::debug!(error = %e, "registration for a read refused: the data will be sent"),
            }
        }
        self.sends.push(s);
        Ok(offer)
    }

    fn abandon_send(&mut self, peer: u32, id: u32) {
        if let Some(k) = self.sends.iter().position(|s| s.peer == peer && s.id == id && s.inflight == 0) {
            let s = self.sends.swap_remove(k);
            if let Some(r) = s.reg {
                self.mrs.release(r.id);
            }
        }
    }

    unsafe fn start_send(&mut self, peer: u32, id: u32, addr: *const u8, bytes: u64) -> nemesis_lmt::Result<()> {
        self.peer_index(peer).map_err(|e| nemesis_lmt::Error::Cma(e.to_string()))?;
        if self.peers[peer as usize].link != Link::Up {
            return Err(nemesis_lmt::Error::PeerDied);
        }
        let local_mr = self.fi.caps.mr_mode & FI_MR_LOCAL != 0;
        let k = match self.sends.iter().position(|s| s.peer == peer && s.id == id) {
            Some(k) if bytes > self.sends[k].len => {
                return Err(nemesis_lmt::Error::Corrupt { what: "bytes to send", value: bytes });
            }
            Some(k) => k,
            None => {
                self.sends.push(SendX {
                    peer,
                    id,
                    addr,
                    len: bytes,
                    reg: None,
                    stream: None,
                    inflight: 0,
                    failed: None,
                });
                self.sends.len() - 1
            }
        };
        if local_mr && self.sends[k].reg.is_none() {
            let reg = self.acquire(addr, bytes, false).map_err(|e| nemesis_lmt::Error::Cma(e.to_string()))?;
            self.sends[k].reg = Some(reg);
        }
        self.sends[k].stream = Some((bytes, 0, 0));
        self.pump_lmt();
        Ok(())
    }

    unsafe fn start_recv(
        &mut self,
        peer: u32,
        id: u32,
        dst: *mut u8,
        bytes: u64,
        remote: Option<RemoteBuf>,
    ) -> nemesis_lmt::Result<RecvPlan> {
        self.peer_index(peer).map_err(|e| nemesis_lmt::Error::Cma(e.to_string()))?;
        if self.peers[peer as usize].link == Link::Dead {
            return Err(nemesis_lmt::Error::PeerDied);
        }
        if self.recvs.iter().any(|r| r.peer == peer && r.id == id) {
            return Err(nemesis_lmt::Error::Corrupt { what: "transfer id already expected", value: u64::from(id) });
        }
        let remote = remote.filter(|_| self.read_ok);
        let reg = if self.fi.caps.mr_mode & FI_MR_LOCAL != 0 {
            Some(self.acquire(dst, bytes, false).map_err(|e| nemesis_lmt::Error::Cma(e.to_string()))?)
        } else {
            None
        };
        self.recvs.push(RecvX { peer, id, dst, bytes, remote, reg, posted: 0, got: 0, inflight: 0, failed: None });
        // Data receives are posted before the CTS leaves, so the data finds them.
        self.pump_lmt();
        Ok(if remote.is_some() { RecvPlan::Read } else { RecvPlan::Stream })
    }

    fn take_lmt_done(&mut self) -> Vec<NetDone> {
        std::mem::take(&mut self.done)
    }
}

impl Drop for OfiNetmod<'_> {
    fn drop(&mut self) {
        // Operations still posted name our buffers: the endpoint closes (fields drop in order:
        // registrations, the libfabric objects, then the buffers).
        self.finalized = true;
    }
}
