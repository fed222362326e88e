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
/// `Header::flags`: a `Put` or `Acc` that also asks what a `Flush` asks (reply `id` once
/// applied, with the origin's recorded failure): the origin's held-back last request carries
/// the flush that follows it (`super::origin::Tail`).
pub const FLUSH_AFTER: u8 = 2;

/// Sets [`FLUSH_AFTER`] in request `msg` (built by [`request`]).
pub fn mark_flush(msg: &mut [u8]) {
    if let Some(f) = msg.get_mut(1) {
        *f |= FLUSH_AFTER;
    }
}

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

/// The fewest bytes a target agrees to send in one reply: a reply may hold as many bytes as the
/// target's window (a get of all of it), and at least this many (a target type may repeat a
/// block of a small window). Beyond: `MPI_ERR_SIZE` ([`reply_limit`]).
pub const REPLY_FLOOR: u64 = 64 << 20;

/// Reply bytes a target keeps in flight at most: while more are being sent, it applies no
/// further request (they wait, in order, until its origins take their replies); alone, one reply
/// within [`reply_limit`] always goes.
pub const REPLIES_IN_FLIGHT: usize = 256 << 20;

/// The most bytes a target with `window` bytes of window memory sends in one reply: a request
/// asking more is refused with `MPI_ERR_SIZE` (the transfer's size, count × type, is beyond what
/// the target moves in one operation; the range itself may be inside the window, so not
/// `MPI_ERR_RMA_RANGE`), before anything is allocated.
pub fn reply_limit(window: u64) -> u64 {
    window.max(REPLY_FLOOR)
}

/// The bytes the reply to request `msg` will carry (0 for a request without fetched data, or
/// one that does not parse), saturating: for a target's accounting before it applies `msg`.
pub fn reply_bytes(msg: &[u8]) -> u64 {
    match parse(msg) {
        Ok(r) if matches!(r.header.kind, Kind::Get | Kind::GetAcc | Kind::Cas) => {
            r.spans.iter().map(|s| s.bytes().unwrap_or(u64::MAX)).fold(0, u64::saturating_add)
        }
        _ => 0,
    }
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
    // What each kind carries: synchronisations nothing, a get no data, the others spans.
    let fits = match kind {
        Kind::Lock | Kind::Unlock | Kind::Flush => header.runs == 0 && header.data == 0,
        Kind::Get => header.data == 0,
        Kind::Put | Kind::Acc | Kind::GetAcc | Kind::Cas => true,
    };
    if !fits || header.flags & !(EXCLUSIVE | FLUSH_AFTER) != 0 {
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
// The tags stay clear of the window's own notices.
const _: () = assert!(REPLY_BASE >= crate::win::sync::FIRST_REMOTE_TAG && AM_TAG > REPLY_BASE + MAX_ID as i32);

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    #[test]
    fn a_request_reads_back_as_written() {
        let h = Header { kind: Kind::Acc, flags: 0, dt: 0x4c00_0405, op: 0x5800_0003, id: 7, runs: 2, data: 12 };
        let spans = [Span { off: 8, len: 4, count: 3, stride: 16 }, Span { off: -4, len: 0, count: 1, stride: 0 }];
        let msg = request(&h, &spans, &[&[1; 8], &[2; 4]]);
        let r = parse(&msg).unwrap();
        assert_eq!((r.header, &r.spans[..], r.data), (h, &spans[..], &[1, 1, 1, 1, 1, 1, 1, 1, 2, 2, 2, 2][..]));
        let mut flushed = msg.clone();
        mark_flush(&mut flushed);
        assert_eq!(parse(&flushed).unwrap().header.flags, FLUSH_AFTER);
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

    /// xorshift64* (a fixed seed: the same messages every run).
    pub(crate) struct Rng(pub u64);

    impl Rng {
        pub fn next(&mut self) -> u64 {
            self.0 ^= self.0 >> 12;
            self.0 ^= self.0 << 25;
            self.0 ^= self.0 >> 27;
            self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
        }
        pub fn below(&mut self, n: usize) -> usize {
            (self.next() % n.max(1) as u64) as usize
        }
    }

    /// Valid requests of every kind (one to three spans, strided and negative; the held-back
    /// flush), and replies with and without data.
    pub(crate) fn valid_requests() -> Vec<Vec<u8>> {
        let h = |kind, flags, id, data| Header { kind, flags, dt: 0x4c00_0405, op: 0x5800_0003, id, runs: 0, data };
        let one = [Span { off: 8, len: 8, count: 1, stride: 0 }];
        let three = [
            Span { off: 0, len: 4, count: 3, stride: 16 },
            Span { off: 56, len: 8, count: 2, stride: -24 },
            Span { off: 4, len: 4, count: 1, stride: 0 },
        ];
        let out = vec![
            request(&h(Kind::Put, 0, 0, 8), &one, &[&[1; 8]]),
            request(&h(Kind::Put, FLUSH_AFTER, 3, 32), &three, &[&[2; 12], &[3; 20]]),
            request(&h(Kind::Get, 0, 4, 0), &one, &[]),
            request(&h(Kind::Get, 0, 5, 0), &three, &[]),
            request(&h(Kind::Acc, 0, 0, 32), &three, &[&[4; 32]]),
            request(&h(Kind::Acc, FLUSH_AFTER, 6, 8), &one, &[&[5; 8]]),
            request(&h(Kind::GetAcc, 0, 7, 32), &three, &[&[6; 32]]),
            request(&h(Kind::GetAcc, 0, 8, 0), &three[..2], &[]),
            request(&h(Kind::Cas, 0, 9, 16), &[Span { off: 16, len: 8, count: 1, stride: 0 }], &[&[7; 8], &[8; 8]]),
            request(&h(Kind::Lock, EXCLUSIVE, 10, 0), &[], &[]),
            request(&h(Kind::Lock, 0, 11, 0), &[], &[]),
            request(&h(Kind::Unlock, 0, 12, 0), &[], &[]),
            request(&h(Kind::Flush, 0, 13, 0), &[], &[]),
        ];
        out
    }

    /// One to four edits of `msg`: bit flips, bytes, cuts, insertions, deletions, a length
    /// field (`runs`, `data`) or a span's field set to a huge or small value, bytes appended.
    pub(crate) fn mutate(rng: &mut Rng, msg: &[u8]) -> Vec<u8> {
        const VALUES: [u64; 10] =
            [0, 1, 31, 32, 0x7fff_ffff, 0x8000_0000, 0xffff_ffff, i64::MAX as u64, 1 << 63, u64::MAX];
        let mut v = msg.to_vec();
        for _ in 0..=rng.below(4) {
            let at = rng.below(v.len() + 1);
            let value = if rng.below(2) == 0 { VALUES[rng.below(VALUES.len())] } else { rng.next() >> rng.below(64) };
            let set = |v: &mut Vec<u8>, at: usize, bytes: &[u8]| {
                for (k, &b) in bytes.iter().enumerate() {
                    if let Some(x) = v.get_mut(at + k) {
                        *x = b;
                    }
                }
            };
            match rng.below(9) {
                0 if !v.is_empty() => {
                    let i = rng.below(v.len());
                    v[i] ^= 1 << rng.below(8);
                }
                1 if !v.is_empty() => {
                    let i = rng.below(v.len());
                    v[i] = rng.next() as u8;
                }
                2 => v.truncate(at),
                3 => v.insert(at, rng.next() as u8),
                4 => {
                    let n = rng.below(40).min(v.len() - at);
                    v.drain(at..at + n);
                }
                5 => set(&mut v, 16, &(value as u32).to_ne_bytes()),
                6 => set(&mut v, 24, &value.to_ne_bytes()),
                7 => {
                    let field = HEADER + rng.below(4) * SPAN + rng.below(4) * 8;
                    set(&mut v, field, &value.to_ne_bytes());
                }
                _ => v.extend((0..rng.below(70)).map(|_| rng.next() as u8)),
            }
        }
        v
    }

    /// `parse` on `msg`: `Malformed`, or a request that accounts for every byte of `msg` and
    /// encodes back to it (less its padding); its spans' sizes computed without a panic.
    fn check(msg: &[u8]) -> bool {
        let Ok(r) = parse(msg) else { return false };
        let h = r.header;
        assert_eq!((h.runs as usize, h.data as usize), (r.spans.len(), r.data.len()), "{msg:?}");
        assert_eq!(HEADER + SPAN * r.spans.len() + r.data.len(), msg.len(), "{msg:?}");
        assert!(std::ptr::eq(r.data.as_ptr_range().end, msg.as_ptr_range().end), "data is the message's tail");
        let mut padless = msg.to_vec();
        padless[2..4].fill(0);
        padless[20..24].fill(0);
        assert_eq!(request(&h, &r.spans, &[r.data]), padless, "a parsed request encodes back");
        assert_eq!(h.flags & !(EXCLUSIVE | FLUSH_AFTER), 0, "{msg:?}");
        if matches!(h.kind, Kind::Lock | Kind::Unlock | Kind::Flush | Kind::Get) {
            assert!(r.data.is_empty(), "{msg:?}");
        }
        for s in &r.spans {
            let _ = (s.bytes(), s.extent());
        }
        true
    }

    #[test]
    fn mutated_requests_parse_or_are_malformed() {
        let valid = valid_requests();
        let mut replies = vec![reply(0, &[]), reply(53, &[9; 24]), reply(0, &[1; 8])];
        for m in &valid {
            assert!(check(m), "{m:?}");
            // Cut at every length, and one to 40 bytes too many.
            for n in 0..m.len() {
                assert!(!check(&m[..n]), "a cut request parses: {n} of {m:?}");
            }
            for extra in 1..=40 {
                assert!(!check(&[m.as_slice(), &vec![0; extra]].concat()));
            }
        }
        let mut rng = Rng(0x6e_656d_6573_6973);
        let mut parsed = 0;
        for _ in 0..120_000 {
            let k = rng.below(valid.len());
            let m = mutate(&mut rng, &valid[k]);
            parsed += usize::from(check(&m));
            let k = rng.below(replies.len());
            let r = mutate(&mut rng, &replies[k]);
            match parse_reply(&r) {
                Ok((code, data)) => {
                    assert_eq!((data.len() + REPLY_HEADER, code.to_ne_bytes()), (r.len(), word::<4>(&r, 0)));
                }
                Err(Malformed) => assert!(r.len() < REPLY_HEADER),
            }
            if replies.len() < 64 {
                replies.push(r);
            }
        }
        // The mutations reach past the length checks (a flipped flag or data byte parses).
        assert!(parsed > 10_000, "{parsed} of the mutated requests parse");
    }

    #[test]
    fn each_kind_carries_only_its_parts_and_replies_are_counted() {
        let h = |kind, flags, runs, data| Header { kind, flags, dt: 0, op: 0, id: 1, runs, data };
        let one = [Span { off: 0, len: 8, count: 3, stride: 8 }];
        // A synchronisation with spans or data, a get with data, an unknown flag: malformed.
        assert!(parse(&request(&h(Kind::Flush, 0, 1, 0), &one, &[])).is_err());
        assert!(parse(&request(&h(Kind::Lock, EXCLUSIVE, 0, 1), &[], &[&[0]])).is_err());
        assert!(parse(&request(&h(Kind::Get, 0, 1, 1), &one, &[&[0]])).is_err());
        assert!(parse(&request(&h(Kind::Put, 4, 1, 24), &one, &[&[0; 24]])).is_err());
        assert!(parse(&request(&h(Kind::Unlock, 0, 0, 0), &[], &[])).is_ok());
        // The bytes a reply will carry: the spans' of a fetch, saturating; none for a put.
        assert_eq!(reply_bytes(&request(&h(Kind::Get, 0, 1, 0), &one, &[])), 24);
        assert_eq!(reply_bytes(&request(&h(Kind::Put, 0, 1, 24), &one, &[&[0; 24]])), 0);
        let huge = [Span { off: 0, len: 8, count: u64::MAX, stride: 0 }, one[0]];
        assert_eq!(reply_bytes(&request(&h(Kind::GetAcc, 0, 2, 0), &huge, &[])), u64::MAX);
        assert_eq!(reply_bytes(&[1; 3]), 0);
        assert_eq!((reply_limit(16), reply_limit(1 << 40)), (REPLY_FLOOR, 1 << 40));
    }

    #[test]
    fn a_reply_carries_its_status() {
        let r = reply(53, &[5, 6]);
        assert_eq!(parse_reply(&r).unwrap(), (53, &[5u8, 6][..]));
        assert!(parse_reply(&r[..7]).is_err());
    }
}
