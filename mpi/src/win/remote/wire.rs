//! The active messages of one-sided communication to a target on another node: their format,
//! built by the origin and read by the target (sans-I/O: bytes in, bytes out; `origin.rs` and
//! `target.rs` do the sending).
//!
//! A request is one Endpoint message on the window's context with tag [`AM_TAG`]: a
//! [`Header`] (32 bytes), then `runs` [`Span`]s (32 bytes each: the flattened target datatype),
//! then `data` bytes (the origin's packed data; for `Cas` the compare value, then the new one).
//! A reply goes back on the same context with tag [`reply_tag`]`(id)`: a status word (an MPI
//! error class, 0 for success) and 4 bytes of padding, then the data fetched, if any.
//!
//! Everything is in the byte order of the machines (one architecture per job, as the data the
//! operations carry). A reader never trusts a length: every size is checked against the message
//! before anything is read, and a bad message is [`Malformed`].

use std::mem::size_of;

/// The tag of every request on a window's context.
pub const AM_TAG: i32 = 0x7fff_fff0;
/// Reply tags are `REPLY_BASE + id`, `id` in `1..=MAX_ID`.
const REPLY_BASE: i32 = 0x4000_0000;
/// The largest reply id.
pub const MAX_ID: u32 = 0x3fff_0000;

/// The tag of the reply to request `id` (`1..=MAX_ID`).
pub fn reply_tag(id: u32) -> i32 {
    REPLY_BASE + id.min(MAX_ID) as i32
}

/// What a request asks.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u8)]
pub enum Kind {
    /// Store `data` into the spans.
    Put = 1,
    /// Reply with the spans' bytes.
    Get = 2,
    /// Combine `data` into the spans with `op` on elements of `dt`.
    Acc = 3,
    /// As `Acc`, replying with the bytes before (`MPI_NO_OP`: `data` empty, fetch only).
    GetAcc = 4,
    /// `data` is the compare value then the new one (one element each); reply: the old one.
    Cas = 5,
    /// Lock the target's window for the origin (`flags` & [`EXCLUSIVE`]); reply once granted.
    Lock = 6,
    /// Release the origin's lock; reply once every earlier request of the origin is applied.
    Unlock = 7,
    /// Reply once every earlier request of the origin is applied.
    Flush = 8,
}

impl Kind {
    fn from_u8(b: u8) -> Option<Kind> {
        Some(match b {
            1 => Kind::Put,
            2 => Kind::Get,
            3 => Kind::Acc,
            4 => Kind::GetAcc,
            5 => Kind::Cas,
            6 => Kind::Lock,
            7 => Kind::Unlock,
            8 => Kind::Flush,
            _ => return None,
        })
    }
}

/// `Header::flags`: an exclusive lock (`Lock`).
pub const EXCLUSIVE: u8 = 1;

/// A request's fixed part.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Header {
    pub kind: Kind,
    pub flags: u8,
    /// The basic datatype of the target's elements (`MPI_Datatype`; accumulates and `Cas`).
    pub dt: i32,
    /// The operation (`MPI_Op`; accumulates).
    pub op: i32,
    /// The reply's id (0: no reply).
    pub id: u32,
    /// Spans that follow.
    pub runs: u32,
    /// Data bytes after the spans.
    pub data: u64,
}

/// `count` blocks of `len` bytes, `stride` apart, the first `off` bytes from the window's base
/// (from address 0 in a dynamic window): a piece of the flattened target datatype.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Span {
    pub off: i64,
    pub len: u64,
    pub count: u64,
    pub stride: i64,
}

impl Span {
    /// Data bytes in the span (`None` on overflow).
    pub fn bytes(&self) -> Option<u64> {
        self.len.checked_mul(self.count)
    }

    /// The span's lowest and highest-plus-one byte offsets (`None` if empty or overflowing).
    pub fn extent(&self) -> Option<(i128, i128)> {
        if self.len == 0 || self.count == 0 {
            return None;
        }
        let last = i128::from(self.off) + i128::from(self.count - 1) * i128::from(self.stride);
        let lo = i128::from(self.off).min(last);
        let hi = i128::from(self.off).max(last) + i128::from(self.len);
        Some((lo, hi))
    }

    /// Calls `f(offset, len)` for every block, in order.
    pub fn blocks(&self, mut f: impl FnMut(i64, usize)) {
        let mut off = self.off;
        for _ in 0..self.count {
            f(off, self.len as usize);
            off = off.wrapping_add(self.stride);
        }
    }
}

const HEADER: usize = 32;
const SPAN: usize = 32;
/// A reply's status part.
pub const REPLY_HEADER: usize = 8;

/// Flattens blocks (offset, length), given in order, into spans: blocks of one length at a
/// constant stride become one span (a vector is one span however long).
#[derive(Debug, Default)]
pub struct Spans {
    pub spans: Vec<Span>,
}

impl Spans {
    /// Appends block `(off, len)` (empty blocks are dropped).
    pub fn push(&mut self, off: i64, len: u64) {
        if len == 0 {
            return;
        }
        if let Some(s) = self.spans.last_mut()
            && s.len == len
        {
            let next = if s.count == 1 { off.wrapping_sub(s.off) } else { s.stride };
            if s.off.wrapping_add(next.wrapping_mul(s.count as i64)) == off {
                s.stride = next;
                s.count += 1;
                return;
            }
        }
        // Blocks that touch make one longer block.
        if let Some(s) = self.spans.last_mut()
            && s.count == 1
            && s.off.wrapping_add(s.len as i64) == off
        {
            s.len += len;
            return;
        }
        self.spans.push(Span { off, len, count: 1, stride: 0 });
    }
}

/// Builds a request: header, spans, then `data` (the pieces in order).
pub fn request(h: &Header, spans: &[Span], data: &[&[u8]]) -> Vec<u8> {
    let len: usize = data.iter().map(|d| d.len()).sum();
    let mut v = Vec::with_capacity(HEADER + SPAN * spans.len() + len);
    v.push(h.kind as u8);
    v.push(h.flags);
    v.extend_from_slice(&[0; 2]);
    v.extend_from_slice(&h.dt.to_ne_bytes());
    v.extend_from_slice(&h.op.to_ne_bytes());
    v.extend_from_slice(&h.id.to_ne_bytes());
    v.extend_from_slice(&(spans.len() as u32).to_ne_bytes());
    v.extend_from_slice(&[0; 4]);
    v.extend_from_slice(&(len as u64).to_ne_bytes());
    for s in spans {
        v.extend_from_slice(&s.off.to_ne_bytes());
        v.extend_from_slice(&s.len.to_ne_bytes());
        v.extend_from_slice(&s.count.to_ne_bytes());
        v.extend_from_slice(&s.stride.to_ne_bytes());
    }
    for d in data {
        v.extend_from_slice(d);
    }
    v
}

/// A request that does not parse.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Malformed;

/// A request, read.
#[derive(Debug)]
pub struct Request<'a> {
    pub header: Header,
    pub spans: Vec<Span>,
    pub data: &'a [u8],
}

fn word<const N: usize>(b: &[u8], at: usize) -> [u8; N] {
    let mut w = [0; N];
    w.copy_from_slice(&b[at..at + N]);
    w
}

/// Reads request `msg`.
pub fn parse(msg: &[u8]) -> Result<Request<'_>, Malformed> {
    if msg.len() < HEADER {
        return Err(Malformed);
    }
    let kind = Kind::from_u8(msg[0]).ok_or(Malformed)?;
    let header = Header {
        kind,
        flags: msg[1],
        dt: i32::from_ne_bytes(word(msg, 4)),
        op: i32::from_ne_bytes(word(msg, 8)),
        id: u32::from_ne_bytes(word(msg, 12)),
        runs: u32::from_ne_bytes(word(msg, 16)),
        data: u64::from_ne_bytes(word(msg, 24)),
    };
    let spans_end = (header.runs as usize).checked_mul(SPAN).and_then(|s| s.checked_add(HEADER)).ok_or(Malformed)?;
    let end = usize::try_from(header.data).ok().and_then(|d| d.checked_add(spans_end)).ok_or(Malformed)?;
    if end != msg.len() {
        return Err(Malformed);
    }
    let spans = (0..header.runs as usize)
        .map(|k| {
            let at = HEADER + k * SPAN;
            Span {
                off: i64::from_ne_bytes(word(msg, at)),
                len: u64::from_ne_bytes(word(msg, at + 8)),
                count: u64::from_ne_bytes(word(msg, at + 16)),
                stride: i64::from_ne_bytes(word(msg, at + 24)),
            }
        })
        .collect();
    Ok(Request { header, spans, data: &msg[spans_end..] })
}

/// A reply: status `code` (an MPI error class, 0: success), then `data`.
pub fn reply(code: i32, data: &[u8]) -> Vec<u8> {
    let mut v = Vec::with_capacity(REPLY_HEADER + data.len());
    v.extend_from_slice(&code.to_ne_bytes());
    v.extend_from_slice(&[0; 4]);
    v.extend_from_slice(data);
    v
}

/// A reply's status and data (`Malformed` if shorter than its status).
pub fn parse_reply(msg: &[u8]) -> Result<(i32, &[u8]), Malformed> {
    if msg.len() < REPLY_HEADER {
        return Err(Malformed);
    }
    Ok((i32::from_ne_bytes(word(msg, 0)), &msg[REPLY_HEADER..]))
}

const _: () = assert!(size_of::<Span>() == SPAN);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_request_reads_back_as_written() {
        let h = Header { kind: Kind::Acc, flags: 0, dt: 0x4c00_0405, op: 0x5800_0003, id: 7, runs: 2, data: 12 };
        let spans = [Span { off: 8, len: 4, count: 3, stride: 16 }, Span { off: -4, len: 0, count: 1, stride: 0 }];
        let msg = request(&h, &spans, &[&[1; 8], &[2; 4]]);
        let r = parse(&msg).unwrap();
        assert_eq!((r.header, &r.spans[..], r.data), (h, &spans[..], &[1, 1, 1, 1, 1, 1, 1, 1, 2, 2, 2, 2][..]));
        // Cut or padded, or a length that overflows: refused.
        assert_eq!(parse(&msg[..msg.len() - 1]).unwrap_err(), Malformed);
        let mut long = msg.clone();
        long.push(0);
        assert!(parse(&long).is_err());
        let mut huge = msg;
        huge[16..20].copy_from_slice(&u32::MAX.to_ne_bytes());
        assert!(parse(&huge).is_err());
        assert!(parse(&[9; 32]).is_err());
    }

    #[test]
    fn blocks_at_a_constant_stride_make_one_span() {
        let mut s = Spans::default();
        for k in 0..100 {
            s.push(k * 24, 8);
        }
        assert_eq!(s.spans, [Span { off: 0, len: 8, count: 100, stride: 24 }]);
        let mut c = Spans::default();
        c.push(0, 8);
        c.push(8, 4);
        c.push(40, 4);
        assert_eq!(
            c.spans,
            [Span { off: 0, len: 12, count: 1, stride: 0 }, Span { off: 40, len: 4, count: 1, stride: 0 }]
        );
        let neg = Span { off: 100, len: 8, count: 3, stride: -50 };
        assert_eq!(neg.extent(), Some((0, 108)));
    }

    #[test]
    fn a_reply_carries_its_status() {
        let r = reply(53, &[5, 6]);
        assert_eq!(parse_reply(&r).unwrap(), (53, &[5u8, 6][..]));
        assert!(parse_reply(&r[..7]).is_err());
    }
}
