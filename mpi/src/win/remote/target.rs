//! The target's side of the remote path: requests from origins on other nodes are received in
//! arrival order and applied to this process's window memory with the kernels node-local origins
//! use (`super::super::atomic`: accumulates are atomic per basic element whoever the origin is),
//! then answered.
//!
//! **Order.** Requests are matched in arrival order (one probe at a time on the window's
//! context, [`wire::AM_TAG`]) and applied strictly in that order, the oldest first, once its data
//! is in ([`Target::incoming`]): a `Flush` or `Unlock` is answered only after everything its
//! origin sent before it was applied.
//!
//! **Never trust the wire.** Every span is checked against this process's window (its size; for
//! a dynamic window the regions attached here) and every length against the message before any
//! byte moves; a request that fails answers `MPI_ERR_RMA_RANGE` (or `MPI_ERR_TYPE`/`MPI_ERR_OP`
//! for a bad element type or operation), in its own reply or, for one without a reply, in the
//! next `Flush`/`Unlock` reply of its origin ([`Target::faults`]).
//!
//! **Bounded replies.** A fetch's reply is as large as its spans, which a peer may repeat over
//! one block any number of times: a reply larger than [`wire::reply_limit`] of this window is
//! refused (`MPI_ERR_SIZE`) before anything is allocated, and while replies of more than
//! [`wire::REPLIES_IN_FLIGHT`] bytes are being sent no further request is applied
//! ([`Target::room_for_head`]). A request too large for this process's memory is received
//! into nothing and answered `MPI_ERR_NO_MEM` ([`Target::buffer`]).

use std::collections::VecDeque;
use std::ffi::c_int;

use super::grant::{Queue, Waiting};
use super::wire::{self, Kind, Span};
use crate::abi;
use crate::win::Window;
use crate::win::segment::Control;

/// A request being received.
#[derive(Debug)]
pub struct Incoming {
    pub req: nemesis::Request,
    pub buf: Vec<u8>,
    /// The origin's job rank.
    pub origin: u32,
    /// Its data is in (the receive completed).
    pub arrived: bool,
}

/// The target's state of one window.
#[derive(Debug, Default)]
pub struct Target {
    /// Requests matched, oldest first; the head is applied once arrived.
    pub incoming: VecDeque<Incoming>,
    /// Replies the Endpoint is sending (their buffers live until done).
    pub replies: Vec<(nemesis::Request, Vec<u8>)>,
    /// Lock requests and locks held for remote origins.
    pub locks: Queue,
    /// The first failure of each origin's requests without a reply, for its next `Flush` or
    /// `Unlock`: (origin job rank, MPI error class).
    pub faults: Vec<(u32, c_int)>,
}

/// Where requests may touch this process's memory.
#[derive(Clone, Copy, Debug)]
pub struct Bounds<'a> {
    /// The window's base address (0 for a dynamic window: offsets are addresses).
    pub base: usize,
    /// Its size in bytes (unused for a dynamic window).
    pub size: usize,
    /// A dynamic window's attached regions (base, length); `None` for the other flavours.
    pub regions: Option<&'a [(usize, usize)]>,
}

impl Bounds<'_> {
    /// The most bytes one reply may carry ([`wire::reply_limit`] of the window's bytes here).
    fn reply_limit(&self) -> u64 {
        let bytes = match self.regions {
            None => self.size as u64,
            Some(rs) => rs.iter().map(|&(_, l)| l as u64).fold(0, u64::saturating_add),
        };
        wire::reply_limit(bytes)
    }

    /// Refuses a reply of `total` bytes beyond [`Self::reply_limit`] (`MPI_ERR_SIZE`).
    fn check_reply(&self, total: usize) -> Result<(), c_int> {
        if total as u64 > self.reply_limit() { Err(abi::ERR_SIZE) } else { Ok(()) }
    }

    /// The address of `s.off` if every block of `s` lies inside the window (or one region).
    fn resolve(&self, s: &Span) -> Option<usize> {
        let (lo, hi) = s.extent()?;
        match self.regions {
            None if lo >= 0 && hi <= self.size as i128 => Some(self.base.wrapping_add(s.off as usize)),
            None => None,
            Some(rs) => {
                rs.iter().any(|&(b, l)| lo >= b as i128 && hi <= b as i128 + l as i128).then_some(s.off as usize)
            }
        }
    }
}

/// This process's window, as requests may touch it.
#[derive(Clone, Copy, Debug)]
pub struct Memory<'a> {
    pub bounds: Bounds<'a>,
    /// This process's control block (lock word, accumulate mutex).
    pub ctl: &'a Control,
    /// The window (for the accumulate kernels).
    pub w: &'a Window,
}

/// What applying a request asks of the caller.
#[derive(Debug, PartialEq, Eq)]
pub enum Then {
    /// Nothing (no reply).
    Nothing,
    /// Send this reply with id `.0`.
    Reply(u32, Vec<u8>),
    /// Queue this lock request (granted later: [`Queue::grant`]).
    Lock(Waiting),
}

impl Target {
    /// Bytes of the replies being sent.
    fn in_flight(&self) -> usize {
        self.replies.iter().map(|(_, b)| b.len()).sum()
    }

    /// True if the oldest request may be applied now: no replies in flight, or room among them
    /// for its reply ([`wire::REPLIES_IN_FLIGHT`]).
    pub fn room_for_head(&self) -> bool {
        self.incoming.front().is_none_or(|head| room(self.in_flight(), &head.buf))
    }

    /// A receive buffer of `len` bytes for a request of `origin`; empty if the memory is not
    /// there (the request is then cut: refused, and `MPI_ERR_NO_MEM` recorded for its origin).
    pub fn buffer(&mut self, origin: u32, len: usize) -> Vec<u8> {
        let mut buf = Vec::new();
        if buf.try_reserve_exact(len).is_ok() {
            buf.resize(len, 0);
        } else {
            self.fault(origin, abi::ERR_NO_MEM);
        }
        buf
    }

    /// Records failure `code` of a request of `origin` without a reply.
    fn fault(&mut self, origin: u32, code: c_int) {
        if !self.faults.iter().any(|&(o, _)| o == origin) {
            self.faults.push((origin, code));
        }
    }

    /// Takes `origin`'s recorded failure (success if none).
    fn take_fault(&mut self, origin: u32) -> c_int {
        match self.faults.iter().position(|&(o, _)| o == origin) {
            Some(k) => self.faults.swap_remove(k).1,
            None => abi::SUCCESS,
        }
    }

    /// Applies request `msg` of `origin` to `mem`.
    pub fn apply(&mut self, mem: &Memory, origin: u32, msg: &[u8]) -> Then {
        let Ok(r) = wire::parse(msg) else {
            // Not even its id is known: the origin hears of it at its next flush.
            self.fault(origin, abi::ERR_OTHER);
            return Then::Nothing;
        };
        let (h, id) = (r.header, r.header.id);
        let reply = |code: c_int, data: &[u8]| Then::Reply(id, wire::reply(code, data));
        match h.kind {
            Kind::Lock => {
                let exclusive = h.flags & wire::EXCLUSIVE != 0;
                return Then::Lock(Waiting { origin, exclusive, id, ticket: mem.ctl.lock.ticket() });
            }
            Kind::Unlock => {
                match self.locks.release(origin) {
                    Some(true) => mem.ctl.lock.unlock_exclusive(),
                    Some(false) => mem.ctl.lock.unlock_shared(),
                    None => {}
                }
                return reply(self.take_fault(origin), &[]);
            }
            Kind::Flush => return reply(self.take_fault(origin), &[]),
            _ => {}
        }
        let res = apply_data(mem, h.kind, h.dt, h.op, &r.spans, r.data);
        match (h.kind, res) {
            (Kind::Put | Kind::Acc, res) => {
                if let Err(code) = res {
                    self.fault(origin, code);
                }
                match h.flags & wire::FLUSH_AFTER {
                    0 => Then::Nothing,
                    _ => reply(self.take_fault(origin), &[]),
                }
            }
            (_, Ok(old)) => reply(abi::SUCCESS, &old),
            (_, Err(code)) => reply(code, &[]),
        }
    }
}

/// True if request `msg` may be applied while replies of `in_flight` bytes are being sent (a
/// request without a reply always may).
fn room(in_flight: usize, msg: &[u8]) -> bool {
    let want = usize::try_from(wire::reply_bytes(msg)).unwrap_or(usize::MAX);
    want == 0 || in_flight == 0 || in_flight.saturating_add(want) <= wire::REPLIES_IN_FLIGHT
}

/// The addresses of every span of `spans` in `b` and their total bytes, if all lie inside.
fn place(b: &Bounds, spans: &[Span]) -> Result<(Vec<usize>, usize), c_int> {
    let mut at = Vec::with_capacity(spans.len());
    let mut total: u64 = 0;
    for s in spans {
        if s.len == 0 || s.count == 0 {
            at.push(0);
            continue;
        }
        at.push(b.resolve(s).ok_or(abi::ERR_RMA_RANGE)?);
        total = s.bytes().and_then(|n| total.checked_add(n)).ok_or(abi::ERR_RMA_RANGE)?;
    }
    Ok((at, usize::try_from(total).map_err(|_| abi::ERR_RMA_RANGE)?))
}

/// Calls `f(address, packed offset, len)` for every block of `spans` (placed at `at`). Empty
/// spans are skipped: `place` checked no address for them, and a peer's count is unbounded.
fn each_block(spans: &[Span], at: &[usize], mut f: impl FnMut(usize, usize, usize)) {
    let mut pos = 0;
    for (s, &a) in spans.iter().zip(at).filter(|(s, _)| s.len != 0 && s.count != 0) {
        s.blocks(|off, len| {
            f(a.wrapping_add(off.wrapping_sub(s.off) as usize), pos, len);
            pos += len;
        });
    }
}

/// Stores `data` into the spans (a `Put`).
fn put(b: &Bounds, spans: &[Span], data: &[u8]) -> Result<(), c_int> {
    let (at, total) = place(b, spans)?;
    if data.len() != total {
        return Err(abi::ERR_SIZE);
    }
    each_block(spans, &at, |a, pos, len| {
        // SAFETY: `place` checked the block inside this process's window memory, which is
        // mapped while the window lives; `data` is our receive buffer.
        unsafe { std::ptr::copy_nonoverlapping(data.as_ptr().add(pos), a as *mut u8, len) };
    });
    Ok(())
}

/// The spans' bytes (a `Get`).
fn get(b: &Bounds, spans: &[Span]) -> Result<Vec<u8>, c_int> {
    let (at, total) = place(b, spans)?;
    // A peer's spans may repeat one block of the window any number of times: bounded, then
    // allocated only if the memory is there (an error, not an abort).
    b.check_reply(total)?;
    let mut out = Vec::new();
    out.try_reserve_exact(total).map_err(|_| abi::ERR_NO_MEM)?;
    out.resize(total, 0);
    each_block(spans, &at, |a, pos, len| {
        // SAFETY: as for `put`, reading into our own buffer of `total` bytes.
        unsafe { std::ptr::copy_nonoverlapping(a as *const u8, out.as_mut_ptr().add(pos), len) };
    });
    Ok(out)
}

/// Applies a data request; the bytes fetched (empty for `Put`/`Acc`) or an MPI error class.
fn apply_data(mem: &Memory, kind: Kind, dt: i32, op: i32, spans: &[Span], data: &[u8]) -> Result<Vec<u8>, c_int> {
    match kind {
        Kind::Put => put(&mem.bounds, spans, data).map(|()| Vec::new()),
        Kind::Get => get(&mem.bounds, spans),
        Kind::Acc | Kind::GetAcc | Kind::Cas => {
            // Checked here; the kernels then work from the window's base.
            let (_, total) = place(&mem.bounds, spans)?;
            if kind != Kind::Acc {
                mem.bounds.check_reply(total)?;
            }
            super::apply::accumulate(mem.w, kind, dt, op, spans, total, data)
        }
        Kind::Lock | Kind::Unlock | Kind::Flush => Ok(Vec::new()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn span(off: i64, len: u64, count: u64, stride: i64) -> Span {
        Span { off, len, count, stride }
    }

    #[test]
    fn spans_outside_the_window_move_nothing() {
        let mut mem = [0u8; 64];
        let b = Bounds { base: mem.as_mut_ptr() as usize, size: 64, regions: None };
        // A strided put, read back.
        put(&b, &[span(8, 4, 3, 16)], &[1; 12]).unwrap();
        assert_eq!(get(&b, &[span(8, 4, 3, 16)]).unwrap(), [1; 12]);
        assert_eq!((mem[7], mem[8], mem[12], mem[24], mem[40], mem[44]), (0, 1, 0, 1, 1, 0));
        // One byte past the end, before the start, a stride walking out, an overflowing count.
        for s in [span(61, 4, 1, 0), span(-1, 2, 1, 0), span(0, 8, 9, 8), span(0, 8, 2, -8), span(0, 1, u64::MAX, 1)] {
            assert_eq!(put(&b, &[s], &[9; 8]), Err(abi::ERR_RMA_RANGE), "{s:?}");
            assert_eq!(get(&b, &[s]), Err(abi::ERR_RMA_RANGE), "{s:?}");
        }
        // Data that does not fill the spans.
        assert_eq!(put(&b, &[span(0, 8, 1, 0)], &[9; 7]), Err(abi::ERR_SIZE));
        assert!(mem.iter().all(|&x| x <= 1), "nothing written by a refused request");
        // A dynamic window: inside one attached region only.
        let region = [(mem.as_ptr() as usize + 16, 16)];
        let d = Bounds { base: 0, size: 0, regions: Some(&region) };
        let inside = (mem.as_ptr() as usize + 20) as i64;
        assert_eq!(get(&d, &[span(inside, 12, 1, 0)]).unwrap().len(), 12);
        assert_eq!(get(&d, &[span(inside, 13, 1, 0)]), Err(abi::ERR_RMA_RANGE));
        assert_eq!(get(&d, &[span(8, 4, 1, 0)]), Err(abi::ERR_RMA_RANGE));
    }

    #[test]
    fn empty_spans_move_nothing_whatever_their_count() {
        let mut mem = [0u8; 64];
        let b = Bounds { base: mem.as_mut_ptr() as usize, size: 64, regions: None };
        for s in [span(0, 0, u64::MAX, 0), span(-8, 0, u64::MAX, 1 << 40), span(0, 8, 0, 8)] {
            assert_eq!(put(&b, &[s, span(8, 1, 1, 0)], &[3]), Ok(()), "{s:?}");
            assert_eq!(get(&b, &[s, span(8, 1, 1, 0)]), Ok(vec![3]), "{s:?}");
        }
        // A block repeated past the reply limit (or any memory): refused before any allocation.
        assert_eq!(get(&b, &[span(0, 8, 1 << 60, 0)]), Err(abi::ERR_SIZE));
        let limit = wire::REPLY_FLOOR;
        assert_eq!(get(&b, &[span(0, 8, limit / 8 + 1, 0)]), Err(abi::ERR_SIZE));
        assert_eq!(get(&b, &[span(0, 8, limit / 16, 0), span(0, 8, limit / 16 + 1, 0)]), Err(abi::ERR_SIZE));
        assert_eq!(get(&b, &[span(0, 8, limit / 8, 0)]).map(|v| v.len() as u64), Ok(limit), "at the limit");
        // A larger window: its own size is the limit.
        let d = Bounds { base: 0, size: 0, regions: Some(&[(b.base, 64), (0, 1 << 40)]) };
        assert_eq!(d.reply_limit(), (1 << 40) + 64);
    }

    #[test]
    fn replies_in_flight_hold_back_the_next_request_but_never_the_only_one() {
        let get = |n: u64| {
            let h = wire::Header { kind: Kind::Get, flags: 0, dt: 0, op: 0, id: 1, runs: 1, data: 0 };
            wire::request(&h, &[span(0, 1 << 20, n, 0)], &[])
        };
        assert!(room(0, &get(1 << 20)), "no reply in flight: it goes (its own limit checks it)");
        assert!(!room(1, &get(256)), "256 MiB more than the room");
        assert!(room(1 << 20, &get(255)));
        assert!(room(usize::MAX, &[0; 3]), "a request without a reply");
        let mut t = Target::default();
        assert!(t.room_for_head(), "nothing waits");
        assert!(t.buffer(2, usize::MAX).is_empty());
        assert_eq!(t.take_fault(2), abi::ERR_NO_MEM, "a request too large to receive");
    }

    /// Mutated requests (`wire`'s own test's) applied as puts and gets to a window of 64 bytes
    /// between two guards, plain and dynamic: nothing outside is ever written.
    #[test]
    fn mutated_requests_stay_inside_the_window() {
        use super::super::wire::tests::{Rng, mutate, valid_requests};
        let mut mem = [0xa5u8; 192];
        let base = mem.as_mut_ptr() as usize + 64;
        let plain = Bounds { base, size: 64, regions: None };
        let region = [(base + 16, 32)];
        let dynamic = Bounds { base: 0, size: 0, regions: Some(&region) };
        let valid = valid_requests();
        let mut rng = Rng(0x7461_7267_6574);
        let mut applied = 0;
        for _ in 0..60_000 {
            let k = rng.below(valid.len());
            let mut m = mutate(&mut rng, &valid[k]);
            let dynamic_window = rng.below(2) == 1;
            if dynamic_window && m.len() >= 40 {
                // Offsets are addresses in a dynamic window.
                let off = i64::from_ne_bytes(m[32..40].try_into().unwrap()).wrapping_add(base as i64);
                m[32..40].copy_from_slice(&off.to_ne_bytes());
            }
            let Ok(r) = wire::parse(&m) else { continue };
            let b = if dynamic_window { &dynamic } else { &plain };
            let put_ok = put(b, &r.spans, r.data).is_ok();
            // A get's size is the peer's to choose (see `get`): the small ones run here.
            let got = match place(b, &r.spans) {
                Ok((_, total)) if total <= 1 << 16 => get(b, &r.spans).map(|v| v.len() == total),
                _ => Ok(true),
            };
            assert!(got.unwrap_or(true), "a get returned other than its size: {m:?}");
            applied += usize::from(put_ok);
            assert!(mem[..64].iter().chain(&mem[128..]).all(|&x| x == 0xa5), "written outside by {m:?}");
        }
        assert!(applied > 1000, "{applied} puts applied");
    }
}
