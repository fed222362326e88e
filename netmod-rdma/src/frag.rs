//! Eager fragments: their wire form, the check of every received one, and their way back into
//! each sender's order and into cells. No libfabric here (the fuzz target drives it with plain
//! buffers).
//!
//! A fragment is `[header][piggyback room, with the flag][data][MAC]`: the MAC is keyed BLAKE3,
//! truncated to [`TAG_BYTES`], keyed by a key derived from the job's secret, over the header, the
//! room, the fragment's length and the count of wraps of the header's 32-bit sequence number
//! (both ends keep it: the pair's 64-bit sequence number is authenticated, so a fragment
//! replayed, even after the 32 bits wrap, is a duplicate). libfabric does not say reliably who
//! sent a message, so a fragment is its claimed sender's only if the MAC verifies. The data is
//! not under the MAC: what it proves is who sent the fragment, which one of theirs it is and how
//! long it is, which a stranger who cannot read the job's traffic cannot make (the threat model
//! and the cost of a MAC over the data: `docs/design/ofi.md`).
//!
//! Invariants: a fragment that fails a check is refused ([`Refusal`]): its buffer is posted
//! again, it is counted ([`Refusals`]), and no peer's state changes. Only a fragment that
//! verifies moves its sender's sequence; one ahead of its turn waits (parked) at most as far
//! ahead as the receive buffers reach, which no well-behaved sender exceeds.

use std::collections::{BTreeMap, VecDeque};

use nemesis_shm::auth::JobSecret;
use nemesis_shm::cell::{FT_ROOM, HEADER_BYTES, ft_carried, ft_room};
use nemesis_shm::netmod::{Arrival, Inbox, KIND_PEER_GONE};
use nemesis_shm::{MsgHeader, NetCell};

/// Bytes of a fragment's MAC (keyed BLAKE3 truncated to 128 bits).
pub const TAG_BYTES: usize = 16;

/// The label the fragment key is derived under.
const KEY_LABEL: &[u8] = b"nemesis-ofi fragment key v1";

/// The key of a job's fragments, for keyed BLAKE3 (a PRF, so a MAC): what a fragment's MAC
/// covers is at most 60 bytes, one BLAKE3 block, one compression (HMAC-SHA256 takes two, and
/// a copy of its keyed state).
#[derive(Clone)]
pub struct FragKey {
    key: [u8; 32],
}

impl std::fmt::Debug for FragKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("FragKey(..)")
    }
}

impl FragKey {
    /// The fragment key of the job whose secret is `secret`.
    pub fn new(secret: &JobSecret) -> FragKey {
        FragKey { key: secret.mac(KEY_LABEL, &[]) }
    }

    /// The MAC of fragment body `body` (header, room, data) and `wraps`: over the header, the
    /// room, the body's length and `wraps`.
    fn mac(&self, body: &[u8], wraps: u32) -> blake3::Hash {
        let room = MsgHeader::from_bytes(body).map_or(0, |h| ft_room(h.flags));
        let head = &body[..body.len().min(HEADER_BYTES + room)];
        let mut m = [0u8; HEADER_BYTES + FT_ROOM + 12];
        m[..head.len()].copy_from_slice(head);
        let n = head.len();
        m[n..n + 8].copy_from_slice(&(body.len() as u64).to_le_bytes());
        m[n + 8..n + 12].copy_from_slice(&wraps.to_le_bytes());
        blake3::keyed_hash(&self.key, &m[..n + 12])
    }

    /// Writes the MAC of fragment body `buf[..body]` (with `wraps`, the wraps of its sequence
    /// number) at `buf[body..body + TAG_BYTES]`.
    pub fn seal(&self, buf: &mut [u8], body: usize, wraps: u32) {
        let tag = self.mac(&buf[..body], wraps);
        buf[body..body + TAG_BYTES].copy_from_slice(&tag.as_bytes()[..TAG_BYTES]);
    }

    /// Whether `frag` (body and MAC) was sealed with this key and `wraps`, compared in constant
    /// time.
    pub fn verify(&self, frag: &[u8], wraps: u32) -> bool {
        let Some(body) = frag.len().checked_sub(TAG_BYTES) else { return false };
        let want = self.mac(&frag[..body], wraps);
        // Every byte compared whatever the first difference: the time says nothing of the tag.
        let diff = want.as_bytes()[..TAG_BYTES].iter().zip(&frag[body..]).fold(0u8, |d, (a, b)| d | (a ^ b));
        core::hint::black_box(diff) == 0
    }
}

/// Writes the fragment of header `h` (with its `seq` and `frag`), piggyback `ft` (in the room the
/// header's flag asks for) and `data` into `out`, sealed with `key` and `wraps`. Returns its
/// length; `out` must hold [`wire_len`] bytes.
pub fn build(key: &FragKey, h: &MsgHeader, wraps: u32, ft: Option<&[u8]>, data: &[u8], out: &mut [u8]) -> usize {
    let room = ft_room(h.flags);
    let body = HEADER_BYTES + room + data.len();
    out[..HEADER_BYTES].copy_from_slice(&h.to_bytes());
    let r = &mut out[HEADER_BYTES..HEADER_BYTES + room];
    r.fill(0);
    if let Some(pb) = ft {
        // The bytes the flags carry (`ft_carried`, as every other writer of the room), the rest zero.
        let n = ft_carried(h.flags).min(pb.len());
        r[..n].copy_from_slice(&pb[..n]);
    }
    out[HEADER_BYTES + room..body].copy_from_slice(data);
    key.seal(out, body, wraps);
    body + TAG_BYTES
}

/// Bytes of a fragment of `data` bytes, with the (larger) piggyback room or not: a capacity.
pub const fn wire_len(room: bool, data: usize) -> usize {
    HEADER_BYTES + if room { FT_ROOM } else { 0 } + data + TAG_BYTES
}

/// Why a received fragment was dropped. `src` and `seq` are what the fragment claims.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Refusal {
    /// Too short to hold a header and a MAC.
    Short { len: usize },
    /// Claims a source that is no peer of this rank, or another destination.
    Misaddressed { src: u32, dst: u32 },
    /// Its MAC does not verify: not made with the job's secret (a stranger), or altered.
    Forged { src: u32, seq: u32 },
    /// From a peer that died or said goodbye.
    Closed { src: u32 },
    /// A sequence number already received: a duplicate, or a replay.
    Duplicate { src: u32, seq: u32 },
    /// A sequence number further ahead of `expected` than the receive buffers reach: no
    /// well-behaved peer has that many fragments in flight.
    Ahead { src: u32, seq: u32, expected: u32 },
}

impl std::fmt::Display for Refusal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match *self {
            Refusal::Short { len } => write!(f, "a fragment of {len} bytes, shorter than a header and its MAC"),
            Refusal::Misaddressed { src, dst } => {
                write!(f, "a fragment from rank {src} to rank {dst}: not for this rank")
            }
            Refusal::Forged { src, seq } => {
                write!(f, "fragment {seq} claiming rank {src}: its MAC does not verify (not of this job)")
            }
            Refusal::Closed { src } => write!(f, "a fragment claiming rank {src}, which is gone"),
            Refusal::Duplicate { src, seq } => write!(f, "fragment {seq} of rank {src} again (duplicate or replay)"),
            Refusal::Ahead { src, seq, expected } => {
                write!(f, "fragment {seq} of rank {src} while {expected} is due: beyond the receive buffers")
            }
        }
    }
}

/// Fragments refused so far, by reason, and the last one.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Refusals {
    pub short: u64,
    pub misaddressed: u64,
    pub forged: u64,
    pub closed: u64,
    pub duplicate: u64,
    pub ahead: u64,
    pub last: Option<Refusal>,
}

impl Refusals {
    /// Every fragment refused.
    pub fn total(&self) -> u64 {
        self.short + self.misaddressed + self.forged + self.closed + self.duplicate + self.ahead
    }

    fn count(&mut self, r: Refusal) {
        let n = match r {
            Refusal::Short { .. } => &mut self.short,
            Refusal::Misaddressed { .. } => &mut self.misaddressed,
            Refusal::Forged { .. } => &mut self.forged,
            Refusal::Closed { .. } => &mut self.closed,
            Refusal::Duplicate { .. } => &mut self.duplicate,
            Refusal::Ahead { .. } => &mut self.ahead,
        };
        *n += 1;
        // Logged at the 1st, 2nd, 4th, 8th... of a kind: a flood does not flood the log.
        if n.is_power_of_two() && !matches!(r, Refusal::Closed { .. }) {
            tracing::warn!(refused = *n, "ofi netmod: {r}: dropped");
        }
        self.last = Some(r);
    }
}

/// A fragment held in a receive buffer: `(buffer, bytes without the MAC, bytes used)`.
type Held = (usize, usize, usize);

/// The message being put into cells for one peer, and the next wire fragment it expects.
struct Assembly<'n> {
    arrival: Arrival<'n>,
    wire_frag: u16,
}

/// What comes in from one peer.
struct RxPeer<'n> {
    /// The 64-bit sequence number of the next fragment due (the wire carries its low 32 bits).
    next: u64,
    /// Buffers of fragments in order, not yet all in cells.
    inq: VecDeque<Held>,
    /// Buffers of fragments ahead of their turn, by 64-bit sequence number: (buffer, bytes).
    parked: BTreeMap<u64, (usize, usize)>,
    asm: Option<Assembly<'n>>,
    /// Dead or gone: nothing more is taken from it.
    closed: bool,
}

/// How a peer's stream ended while draining it.
#[derive(Debug, PartialEq, Eq)]
pub enum Ended {
    /// It said goodbye: nothing more comes from it.
    Goodbye(u32),
    /// A fragment that verified broke the protocol (a peer of the job with a bug): it is dead.
    Broken(u32, String),
}

/// The receiving side of the eager fragments of one rank: the check of each received buffer,
/// each peer's order, the moves into cells.
pub struct Rx<'n> {
    me: u32,
    size: u32,
    key: FragKey,
    /// How far ahead of its turn a fragment may be: the receive buffers.
    window: u64,
    max_message: usize,
    peers: Vec<RxPeer<'n>>,
    /// Peers with fragments in order, in order of arrival (each listed once).
    ready: VecDeque<u32>,
    refused: Refusals,
    /// Fragments that came ahead of their turn and waited.
    parked: u64,
}

impl<'n> Rx<'n> {
    /// For rank `me` of `size`, with `window` receive buffers, messages up to `max_message`.
    pub fn new(me: u32, size: u32, key: FragKey, window: usize, max_message: usize) -> Rx<'n> {
        let peer = || RxPeer { next: 0, inq: VecDeque::new(), parked: BTreeMap::new(), asm: None, closed: false };
        Rx {
            me,
            size,
            key,
            window: window as u64,
            max_message,
            peers: (0..size).map(|_| peer()).collect(),
            ready: VecDeque::new(),
            refused: Refusals::default(),
            parked: 0,
        }
    }

    /// Fragments refused so far.
    pub fn refusals(&self) -> Refusals {
        self.refused
    }

    /// Fragments that came ahead of their turn and waited, so far.
    pub fn parked(&self) -> u64 {
        self.parked
    }

    /// Buffers held (in order or parked) over every peer.
    pub fn held(&self) -> usize {
        self.peers.iter().map(|p| p.inq.len() + p.parked.len()).sum()
    }

    /// True if some peer has fragments to drain.
    pub fn is_ready(&self) -> bool {
        !self.ready.is_empty()
    }

    /// Receive buffer `buf` holds `bytes`: checked, then queued in its sender's order or parked.
    /// `Err`: refused (and counted); the buffer is the caller's to post again.
    pub fn arrived(&mut self, buf: usize, bytes: &[u8]) -> Result<(), Refusal> {
        let r = self.admit(buf, bytes);
        if let Err(why) = r {
            self.refused.count(why);
        }
        r
    }

    fn admit(&mut self, buf: usize, bytes: &[u8]) -> Result<(), Refusal> {
        let short = Refusal::Short { len: bytes.len() };
        if bytes.len() < HEADER_BYTES + TAG_BYTES {
            return Err(short);
        }
        let h = MsgHeader::from_bytes(bytes).ok_or(short)?;
        let (src, seq) = (h.src, h.seq);
        if src >= self.size || src == self.me || h.dst != self.me {
            return Err(Refusal::Misaddressed { src, dst: h.dst });
        }
        let p = &mut self.peers[src as usize];
        if p.closed {
            return Err(Refusal::Closed { src });
        }
        // The 64-bit number nearest the expected one with these low 32 bits.
        let full = p.next.wrapping_add_signed(i64::from(seq.wrapping_sub(p.next as u32) as i32));
        if !self.key.verify(bytes, (full >> 32) as u32) {
            return Err(Refusal::Forged { src, seq });
        }
        let len = bytes.len() - TAG_BYTES;
        if full < p.next || p.parked.contains_key(&full) {
            return Err(Refusal::Duplicate { src, seq });
        }
        if full - p.next >= self.window {
            return Err(Refusal::Ahead { src, seq, expected: p.next as u32 });
        }
        if full > p.next {
            p.parked.insert(full, (buf, len));
            self.parked += 1;
            return Ok(());
        }
        let was_idle = p.inq.is_empty();
        p.inq.push_back((buf, len, 0));
        p.next += 1;
        while let Some((j, l)) = p.parked.remove(&p.next) {
            p.inq.push_back((j, l, 0));
            p.next += 1;
        }
        if was_idle {
            self.ready.push_back(src);
        }
        Ok(())
    }

    /// The 32 bits and wraps of the next sequence number due from `rank`.
    pub fn next_seq(&self, rank: u32) -> Option<(u32, u32)> {
        self.peers.get(rank as usize).map(|p| (p.next as u32, (p.next >> 32) as u32))
    }

    /// Nothing more is taken from `rank` (it died): its buffers go to `free`; the cell of its
    /// message half put into cells is returned.
    pub fn close(&mut self, rank: u32, free: &mut Vec<usize>) -> Option<NetCell<'n>> {
        let p = self.peers.get_mut(rank as usize)?;
        p.closed = true;
        free.extend(p.inq.drain(..).map(|(i, _, _)| i));
        free.extend(std::mem::take(&mut p.parked).into_values().map(|(i, _)| i));
        p.asm.take().and_then(|a| a.arrival.into_cell())
    }

    /// Moves the fragments in order, peer by peer, into cells (`data(buffer, bytes)`: a received
    /// buffer's bytes). Used buffers go to `free`; peers whose stream ended are in `ended` (a
    /// broken one's buffers stay for the caller's [`Rx::close`]). True if any fragment moved.
    pub fn drain<'b>(
        &mut self,
        data: impl Fn(usize, usize) -> &'b [u8],
        spare: &mut Vec<NetCell<'n>>,
        inbox: &mut dyn Inbox<'n>,
        free: &mut Vec<usize>,
        ended: &mut Vec<Ended>,
    ) -> bool {
        let mut moved = false;
        let mut n = self.ready.len();
        while n > 0 {
            n -= 1;
            let Some(rank) = self.ready.pop_front() else { break };
            match self.drain_peer(rank, &data, spare, inbox, free) {
                Ok(Some(true)) => moved = true,
                Ok(Some(false)) => {
                    // Out of cells: this peer waits at the front (its order), the rest too.
                    self.ready.push_front(rank);
                    return moved;
                }
                Ok(None) => {
                    moved = true;
                    ended.push(Ended::Goodbye(rank));
                }
                Err(why) => {
                    moved = true;
                    ended.push(Ended::Broken(rank, why));
                }
            }
        }
        moved
    }

    /// Uses `rank`'s fragments in order. `Some(true)`: all used; `Some(false)`: out of cells (the
    /// rest waits); `None`: a goodbye; `Err`: the peer broke the protocol.
    fn drain_peer<'b>(
        &mut self,
        rank: u32,
        data: &impl Fn(usize, usize) -> &'b [u8],
        spare: &mut Vec<NetCell<'n>>,
        inbox: &mut dyn Inbox<'n>,
        free: &mut Vec<usize>,
    ) -> Result<Option<bool>, String> {
        let max = self.max_message;
        let p = &mut self.peers[rank as usize];
        loop {
            let Some(&(i, len, mut off)) = p.inq.front() else { return Ok(Some(true)) };
            let bytes = data(i, len);
            if off == 0 {
                let h = MsgHeader::from_bytes(bytes).ok_or("fragment shorter than its header")?;
                let room = ft_room(h.flags);
                if len < HEADER_BYTES + room {
                    return Err(format!("fragment of {len} bytes"));
                }
                let chunk = len - HEADER_BYTES - room;
                if h.kind == KIND_PEER_GONE {
                    if h.len != 0 || p.asm.is_some() {
                        return Err("goodbye inside a message".into());
                    }
                    // Nothing comes after a goodbye.
                    p.closed = true;
                    free.extend(p.inq.drain(..).map(|(j, _, _)| j));
                    free.extend(std::mem::take(&mut p.parked).into_values().map(|(j, _)| j));
                    return Ok(None);
                }
                match p.asm.as_mut() {
                    None => {
                        if h.frag != 0 || h.len as usize > max || chunk > h.len as usize {
                            return Err(format!(
                                "message of {} bytes starting with fragment {} of {chunk} bytes",
                                h.len, h.frag
                            ));
                        }
                        let arrival = Arrival::new(&h, &bytes[HEADER_BYTES..HEADER_BYTES + room], inbox);
                        p.asm = Some(Assembly { arrival, wire_frag: 1 });
                    }
                    Some(a) => {
                        let left = a.arrival.left();
                        if h.frag != a.wire_frag || h.len != a.arrival.header().len || chunk > left || chunk == 0 {
                            return Err(format!(
                                "fragment {} ({chunk} bytes) where fragment {} of {left} more bytes was due",
                                h.frag, a.wire_frag
                            ));
                        }
                        a.wire_frag = a.wire_frag.wrapping_add(1);
                    }
                }
                off = HEADER_BYTES + room;
                p.inq[0].2 = off;
            }
            let Some(a) = p.asm.as_mut() else { return Err("data outside a message".into()) };
            let used = a.arrival.feed(&bytes[off..], spare, inbox)?;
            let whole = a.arrival.is_whole();
            // Out of cells: bytes left over, or an empty message without its cell.
            let blocked = used < len - off || (!whole && a.arrival.left() == 0);
            if whole {
                p.asm = None;
            }
            off += used;
            if blocked {
                p.inq[0].2 = off;
                return Ok(Some(false));
            }
            p.inq.pop_front();
            free.push(i);
        }
    }
}

#[cfg(test)]
mod tests;
