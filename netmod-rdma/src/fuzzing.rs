//! Entry point of the fuzz target `ofi_fragments` (the workspace's `fuzz/`): the eager fragments
//! one rank receives, as [`crate::frag::Rx`] takes them from completed receive buffers, fed with
//! a fuzzer's bytes. Not part of the API.
//!
//! [`fragments`] must neither panic nor loop whatever the bytes, and never lose a receive
//! buffer: after every step each buffer is posted (free) or held by a peer's order, exactly once.

use nemesis_shm::auth::JobSecret;
use nemesis_shm::cell::{FT_ROOM, HEADER_BYTES, flags, ft_room};
use nemesis_shm::netmod::{Inbox, KIND_PEER_GONE};
use nemesis_shm::{HeapNode, MsgHeader, NetCell, Params, Port, PortConfig};

use crate::frag::{self, Ended, FragKey, Rx, TAG_BYTES};

/// Receive buffers of the fuzzed rank, and their bytes.
pub const NBUF: usize = 8;
pub const BUF: usize = 256;
/// Largest message of the fuzzed job.
pub const MAX_MESSAGE: usize = 4096;
/// Ranks of the fuzzed job: rank 0 receives from ranks 1 and 2.
pub const SIZE: u32 = 3;
/// Operations per input at most.
const OPS: usize = 256;
/// Fragments in flight (sent, not delivered) at most, and fragments remembered for replays.
const INFLIGHT: usize = 64;
const HISTORY: usize = 64;

/// The secret of the fuzzed job (fixed, so that seeds hold valid MACs).
pub fn secret() -> JobSecret {
    JobSecret::from_hex(&"6f".repeat(32)).expect("a secret")
}

/// Reads the input front to back; past its end, zeros.
struct Input<'a>(&'a [u8]);

impl Input<'_> {
    fn u8(&mut self) -> u8 {
        let (&b, rest) = self.0.split_first().unwrap_or((&0, &[]));
        self.0 = rest;
        b
    }
    fn take(&mut self, n: usize) -> &[u8] {
        let (a, b) = self.0.split_at(n.min(self.0.len()));
        self.0 = b;
        a
    }
}

/// One of the two senders: its next sequence number (64 bits: the wire takes the low 32) and
/// its fragments in flight, in the order sent.
#[derive(Default)]
struct Sender {
    seq: u64,
    inflight: Vec<Vec<u8>>,
}

/// The operations of an input, one byte each, then their arguments:
/// - `0 p len tag fl`: rank `1 + p % 2` sends a message of `4 × len` bytes (bit 0 of `fl`: with
///   a piggyback; bit 1: a goodbye instead), cut into fragments in flight;
/// - `1 p k`: its `k`-th fragment in flight arrives (out of order if `k` is not 0);
/// - `2 p k i`: a bit of that fragment flips on the way;
/// - `3 n bytes`: `n` bytes from anyone arrive;
/// - `4 p ahead n bytes`: `n` bytes sealed with the job's key as rank `p`'s fragment a few
///   sequence numbers ahead arrive (a peer of the job that breaks the protocol);
/// - `5 k`: a copy of the `k`-th fragment arrived before arrives again (a replay);
/// - `6`: the fragments in order go into cells; `7`: the receiver takes what is in cells.
pub fn fragments(data: &[u8]) {
    let params = Params {
        cell_size: 256,
        cells_per_rank: 8,
        fastbox_slots: 4,
        fastbox_slot_size: 128,
        fastboxes_per_rank: 1,
        lmt_rings_per_rank: 1,
        lmt_slots: 1,
        lmt_slot_size: 4096,
    };
    let node = HeapNode::new(1, params).expect("a heap node");
    let mut port = Port::new(&node, 0, PortConfig::default()).expect("a port");
    port.netmod_reserve(4).expect("netmod cells");
    let key = FragKey::new(&secret());
    let mut rx = Rx::new(0, SIZE, key.clone(), NBUF, MAX_MESSAGE);
    let mut slab = vec![0u8; NBUF * BUF];
    let mut free: Vec<usize> = (0..NBUF).rev().collect();
    let mut spare: Vec<NetCell<'_>> = Vec::new();
    let mut senders = [Sender::default(), Sender::default()];
    let mut history: Vec<Vec<u8>> = Vec::new();
    let mut inp = Input(data);
    for _ in 0..OPS {
        if inp.0.is_empty() {
            break;
        }
        let mut arrival: Option<Vec<u8>> = None;
        match inp.u8() % 8 {
            0 => {
                let p = usize::from(inp.u8() % 2);
                let len = usize::from(inp.u8()) * 4;
                let tag = i32::from(inp.u8());
                let fl = inp.u8();
                send(&key, &mut senders[p], p as u32 + 1, len, tag, fl);
            }
            1 => {
                let s = &mut senders[usize::from(inp.u8() % 2)];
                let k = usize::from(inp.u8());
                if !s.inflight.is_empty() {
                    arrival = Some(s.inflight.remove(k % s.inflight.len()));
                }
            }
            2 => {
                let s = &mut senders[usize::from(inp.u8() % 2)];
                let (k, i) = (usize::from(inp.u8()), usize::from(inp.u8()));
                if !s.inflight.is_empty() {
                    let n = s.inflight.len();
                    let f = &mut s.inflight[k % n];
                    let at = i % f.len();
                    f[at] ^= 1 << (i % 8);
                }
            }
            3 => {
                let n = usize::from(inp.u8());
                arrival = Some(inp.take(n).to_vec());
            }
            4 => {
                let p = u32::from(inp.u8() % 2) + 1;
                let ahead = u32::from(inp.u8() % 4);
                let n = usize::from(inp.u8());
                let mut f = inp.take(n).to_vec();
                if f.len() >= HEADER_BYTES
                    && let Some((next, wraps)) = rx.next_seq(p)
                    && let Some(h) = MsgHeader::from_bytes(&f)
                {
                    let seq = next.wrapping_add(ahead);
                    let w = wraps + u32::from(seq < next);
                    let h = MsgHeader { src: p, dst: 0, seq, ..h };
                    f[..HEADER_BYTES].copy_from_slice(&h.to_bytes());
                    f.resize(f.len() + TAG_BYTES, 0);
                    let body = f.len() - TAG_BYTES;
                    key.seal(&mut f, body, w);
                }
                arrival = Some(f);
            }
            5 => {
                let k = usize::from(inp.u8());
                if !history.is_empty() {
                    arrival = Some(history[k % history.len()].clone());
                }
            }
            6 => {
                let mut ended = Vec::new();
                let slab = &slab;
                rx.drain(|i, len| &slab[i * BUF..i * BUF + len], &mut spare, &mut port, &mut free, &mut ended);
                for e in ended {
                    if let Ended::Broken(rank, _) = e
                        && let Some(c) = rx.close(rank, &mut free)
                    {
                        spare.push(c);
                    }
                }
            }
            _ => {
                for _ in 0..8 {
                    match port.poll(&[]) {
                        Ok(Some(inc)) => {
                            let _ = port.release(inc);
                        }
                        _ => break,
                    }
                }
            }
        }
        if let Some(f) = arrival {
            // The provider truncates what is longer than the posted buffer.
            let Some(b) = free.pop() else { continue };
            let n = f.len().min(BUF);
            slab[b * BUF..b * BUF + n].copy_from_slice(&f[..n]);
            if rx.arrived(b, &slab[b * BUF..b * BUF + n]).is_err() {
                free.push(b);
            }
            if history.len() < HISTORY {
                history.push(f);
            }
        }
        assert_eq!(free.len() + rx.held(), NBUF, "a receive buffer is lost");
    }
    for c in spare {
        let _ = port.recycle(c);
    }
}

/// Rank `rank` (sender `s`) sends a message of `len` bytes (a goodbye with bit 1 of `fl`),
/// cut into fragments of the fuzzed buffers' size, as the netmod does.
fn send(key: &FragKey, s: &mut Sender, rank: u32, len: usize, tag: i32, fl: u8) {
    let goodbye = fl & 2 != 0;
    let ft = fl & 1 != 0 && !goodbye;
    let (len, kind) = if goodbye { (0, KIND_PEER_GONE) } else { (len, 0) };
    let h = MsgHeader {
        src: rank,
        dst: 0,
        tag,
        len: len as u32,
        kind,
        flags: if ft { flags::FT_PIGGYBACK } else { 0 },
        ..MsgHeader::default()
    };
    let per = BUF - HEADER_BYTES - ft_room(h.flags) - TAG_BYTES;
    let payload: Vec<u8> = (0..len).map(|i| i as u8 ^ tag as u8).collect();
    let (mut off, mut fragno) = (0, 0u16);
    loop {
        if s.inflight.len() >= INFLIGHT {
            return;
        }
        let n = (len - off).min(per);
        let w = MsgHeader { seq: s.seq as u32, frag: fragno, ..h };
        let mut out = vec![0u8; frag::wire_len(ft, n)];
        let pb = [0x5a; FT_ROOM];
        let k = frag::build(key, &w, (s.seq >> 32) as u32, ft.then_some(&pb[..]), &payload[off..off + n], &mut out);
        out.truncate(k);
        s.inflight.push(out);
        s.seq += 1;
        off += n;
        fragno = fragno.wrapping_add(1);
        if off == len {
            return;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn messages_in_any_order_with_strangers_and_replays_lose_no_buffer() {
        // Rank 1: a message of three fragments with a piggyback; rank 2: a small one; they arrive
        // out of order, with a stranger's bytes, a flipped bit and replays between; drains and
        // receives; then a goodbye.
        let mut input = vec![0, 0, 100, 7, 1, 0, 1, 3, 9, 0];
        input.extend([1, 0, 2, 1, 0, 0, 3, 40]);
        input.extend([0xee; 40]);
        input.extend([2, 1, 0, 5, 1, 1, 0, 6, 7, 1, 0, 0, 5, 0, 5, 2, 6, 7]);
        input.extend([4, 0, 1, 48]);
        input.extend(MsgHeader { len: 8, ..MsgHeader::default() }.to_bytes());
        input.extend([1; 16]);
        input.extend([0, 0, 0, 0, 2, 1, 0, 6, 7, 6, 7]);
        fragments(&input);
        for n in 0..input.len() {
            fragments(&input[..n]);
        }
    }
}
