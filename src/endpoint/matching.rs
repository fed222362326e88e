//! Matching: a receive's selection ([`Want`]), posted receives, the unexpected list (take, find,
//! consume) and the local sources whose fastboxes are polled first.

use nemesis_ft::Delivery;
use nemesis_lmt::Rts;
use nemesis_shm::Incoming;

use super::progress::Active;
use super::request::{Op, RecvBuf, Request};
use super::unexpected::Slot;
use super::{ANY_SOURCE, ANY_TAG, Inner, Message, NOT_LOCAL, Peer, Status};

use crate::error::{Error, Result};

/// A receive's selection.
#[derive(Clone, Copy, Debug)]
pub(super) struct Want {
    pub(super) source: i32,
    pub(super) tag: i32,
    pub(super) context: u32,
}

impl Want {
    #[inline(always)]
    pub(super) fn matches(&self, source: u32, tag: i32, context: u32) -> bool {
        context == self.context
            && (self.source == ANY_SOURCE || self.source as u32 == source)
            && (self.tag == ANY_TAG || self.tag == tag)
    }
}

/// A posted receive.
#[derive(Clone, Copy, Debug)]
pub(super) struct Posted {
    pub(super) req: Request,
    pub(super) want: Want,
}

/// A message that arrived before its receive.
#[derive(Debug)]
pub(super) struct Unexpected {
    pub(super) source: u32,
    pub(super) tag: i32,
    pub(super) context: u32,
    /// The message's length.
    pub(super) len: usize,
    /// Its bytes, copied out of the segment (empty while `held` has them, and for an RTS).
    pub(super) data: Vec<u8>,
    /// Its fragments still in their cells, unreleased (back-pressure on the sender, see
    /// [`Inner::hold_unexpected`]): copied straight into the receive buffer when it is received.
    pub(super) held: Vec<Incoming<'static>>,
    /// Bytes received so far.
    pub(super) got: usize,
    /// A synchronous send's token: acknowledged when a receive takes the message.
    pub(super) sync: Option<u32>,
    /// A receive was matched to it while it was still arriving: it completes on the last fragment.
    pub(super) claimed: Option<Request>,
    /// A large message's request to send (`data` is empty): a receive that takes it starts the
    /// transfer.
    pub(super) rts: Option<Rts>,
    /// With fault tolerance: what receiving it does to the engine (`on_deliver` when a receive
    /// takes it; a probe does not).
    pub(super) delivery: Option<Delivery>,
    /// The sender's token for it (0: none): what a cancellation names.
    pub(super) token: u32,
    /// A matched probe took it ([`Message`](super::Message)): only that message's receive may.
    pub(super) reserved: bool,
}

impl Unexpected {
    /// A message of `source` (`len` bytes in all) marked with the sender's `token`, before any
    /// of it was copied into `data` or held in `held`.
    pub(super) fn new(source: u32, tag: i32, context: u32, len: usize, token: u32) -> Unexpected {
        Unexpected {
            source,
            tag,
            context,
            len,
            data: Vec::new(),
            held: Vec::new(),
            got: 0,
            sync: None,
            claimed: None,
            rts: None,
            delivery: None,
            token,
            reserved: false,
        }
    }

    /// True if a receive may still match it.
    #[inline(always)]
    pub(super) fn open(&self) -> bool {
        self.claimed.is_none() && !self.reserved
    }
}

/// What the unexpected list had for a receive.
pub(super) enum Found {
    /// A complete message: the receive's result, and what receiving it does to the engine (the
    /// caller applies it: at once for a blocking receive, when the application takes the
    /// request's result for a non-blocking one).
    Done(Result<Status>, Option<Delivery>),
    /// A message still arriving, now claimed by this request.
    Claimed(Request),
    Nothing,
}

/// Copies a fragment at `offset` into a receive buffer, truncating at its capacity.
#[inline(always)]
pub(super) fn copy_into(buf: RecvBuf, inc: &Incoming) {
    let off = inc.offset();
    if off < buf.cap {
        let n = inc.frag_len().min(buf.cap - off);
        if let Some(p) = buf.pieces {
            // SAFETY: the pieces are valid and writable (the receive's contract); the fragment's
            // `frag_len >= n` payload bytes are readable until it is released.
            unsafe { p.as_ref().scatter(off, inc.payload_ptr(), n) };
            return;
        }
        // SAFETY: `buf.ptr` is valid for `buf.cap` bytes (the receive's contract) and
        // `off + n <= cap`.
        let dst = unsafe { std::slice::from_raw_parts_mut(buf.ptr.add(off), n) };
        inc.copy_to(dst);
    }
}

/// The result of a receive whose message of `len` bytes went into a buffer of `cap`.
#[inline(always)]
pub(super) fn finish(status: Status, cap: usize) -> Result<Status> {
    if status.len > cap {
        Err(Error::Truncated { len: status.len, capacity: cap, sender: status.source, tag: status.tag })
    } else {
        Ok(status)
    }
}

impl Inner {
    #[inline(always)]
    pub(super) fn check_recv(&self, source: i32, tag: i32, context: u32) -> Result<Want> {
        if source != ANY_SOURCE && (source < 0 || source as u32 >= self.size) {
            return Err(Error::InvalidRank { rank: i64::from(source), size: self.size });
        }
        if tag != ANY_TAG && tag < 0 {
            return Err(Error::InvalidTag(tag));
        }
        Ok(Want { source, tag, context })
    }

    /// Starts a receive into `buf`: from the unexpected list, or posted.
    pub(super) fn irecv(&mut self, want: Want, buf: RecvBuf) -> Result<Request> {
        if !self.unexpected.is_empty() {
            match self.take_unexpected(want, buf) {
                Found::Done(r, d) => {
                    let req = self.reqs.insert_done(r);
                    self.ft_deliver_later(req, d);
                    return Ok(req);
                }
                Found::Claimed(req) => return Ok(req),
                Found::Nothing => {}
            }
        }
        // Messages already in the node are taken by the next progress (any wait or test).
        self.post(want, buf)
    }

    /// Starts the receive of reserved message `msg` into `buf`.
    pub(super) fn imrecv(&mut self, msg: Message, buf: RecvBuf) -> Result<Request> {
        match self.take_reserved(msg.id, buf) {
            Found::Done(r, d) => {
                let req = self.reqs.insert_done(r);
                self.ft_deliver_later(req, d);
                Ok(req)
            }
            Found::Claimed(req) => Ok(req),
            // Dropped while arriving: its sender died.
            Found::Nothing => Err(Error::PeerDied { rank: msg.source }),
        }
    }

    /// Posts a receive (after the unexpected list was searched).
    pub(super) fn post(&mut self, want: Want, buf: RecvBuf) -> Result<Request> {
        if want.source >= 0 && self.peer(want.source as u32) == Peer::Silent {
            return Ok(self.reqs.insert_done(Err(Error::PeerDied { rank: want.source as u32 })));
        }
        let req = self.reqs.insert(Op::Recv { buf, status: None });
        self.posted.push_back(Posted { req, want });
        self.expect(want.source, true);
        Ok(req)
    }

    /// Takes posted receive `i` out of the list: the first one (the common case: receives match
    /// in the order posted) without `VecDeque::remove`'s general shifting.
    #[inline(always)]
    pub(super) fn take_posted(&mut self, i: usize) -> Option<Posted> {
        if i == 0 { self.posted.pop_front() } else { self.posted.remove(i) }
    }

    /// A posted receive naming `source` (or `ANY_SOURCE`) was added (`add`) or removed: keeps
    /// `expected`, `expected_count` and `any_posted`.
    pub(super) fn expect(&mut self, source: i32, add: bool) {
        if source < 0 {
            // `ANY_SOURCE`.
            self.any_posted = if add { self.any_posted + 1 } else { self.any_posted.saturating_sub(1) };
            return;
        }
        let l = self.route.get(source as usize).copied().unwrap_or(NOT_LOCAL);
        let Some(c) = self.expected_count.get_mut(usize::from(l)) else { return };
        if add {
            *c += 1;
            if *c == 1 {
                self.expected.push(l);
            }
        } else if *c > 0 {
            *c -= 1;
            if *c == 0
                && let Some(k) = self.expected.iter().position(|&e| e == l)
            {
                self.expected.swap_remove(k);
            }
        }
    }

    /// Recomputes `expected` from the posted receives (after several left at once).
    pub(super) fn rebuild_expected(&mut self) {
        self.expected.clear();
        self.expected_count.fill(0);
        self.any_posted = 0;
        for k in 0..self.posted.len() {
            let source = self.posted[k].want.source;
            self.expect(source, true);
        }
    }

    /// Matches a receive against the unexpected list: the first matching message completes it,
    /// or, if that message is still arriving, the receive claims it and completes with its last
    /// fragment.
    pub(super) fn take_unexpected(&mut self, want: Want, buf: RecvBuf) -> Found {
        let Some(i) = self.unexpected.find(want) else {
            return Found::Nothing;
        };
        self.take_unexpected_at(i, buf)
    }

    /// Takes unexpected message `i` for a receive into `buf` (see [`take_unexpected`](
    /// Self::take_unexpected)).
    pub(super) fn take_unexpected_at(&mut self, i: Slot, buf: RecvBuf) -> Found {
        // The application receives it (a matched probe's receive included): the engine's delivery,
        // applied when the application takes the result (`Found::Done`: by the caller).
        let delivery = self.unexpected[i].1.delivery.take();
        if let Some(rts) = self.unexpected[i].1.rts {
            let (id, u) = self.unexpected.remove(i);
            let status = Status { source: u.source, tag: u.tag, len: rts.len as usize };
            let req = self.reqs.insert(Op::Lmt { status, cap: buf.cap, peer: u.source, recv: true, stage: None });
            let date = self.ft_rts_taken(id);
            self.ft_rdv_check_taken(id, Some((req, buf)));
            self.ft_rdv_started(req, Want { source: u.source as i32, tag: u.tag, context: u.context }, date, buf);
            self.start_lmt_recv(u.source, req, &rts, buf);
            self.forget_unexpected(u);
            self.ft_deliver_later(req, delivery);
            return Found::Claimed(req);
        }
        let u = &mut self.unexpected[i].1;
        let (source, sync) = (u.source, u.sync.take());
        if let Some(token) = sync
            && let Err(e) = self.send_ack(source, token)
        {
            return Found::Done(Err(e), delivery);
        }
        let u = &self.unexpected[i].1;
        if u.got < u.len && !u.held.is_empty() {
            // Still arriving, its first fragments held: its sender may need those cells to send
            // the rest. They go into the buffer now, the rest straight after them.
            let (_, mut u) = self.unexpected.remove(i);
            let status = Status { source: u.source, tag: u.tag, len: u.len };
            let req = self.reqs.insert(Op::Recv { buf, status: Some(status) });
            self.active[u.source as usize] = Active::Req(req);
            if let Err(e) = self.release_held(&mut u, Some(buf)) {
                self.reqs.complete(req, Err(e));
            }
            self.forget_unexpected(u);
            self.ft_deliver_later(req, delivery);
            return Found::Claimed(req);
        }
        if u.got < u.len {
            let req = self.reqs.insert(Op::Recv { buf, status: None });
            self.unexpected[i].1.claimed = Some(req);
            self.ft_deliver_later(req, delivery);
            return Found::Claimed(req);
        }
        let (_, u) = self.unexpected.remove(i);
        Found::Done(self.consume_unexpected(u, buf), delivery)
    }

    fn consume_unexpected(&mut self, mut u: Unexpected, buf: RecvBuf) -> Result<Status> {
        let n = u.data.len().min(buf.cap);
        if let Some(p) = buf.pieces {
            // SAFETY: the pieces are valid and writable (the receive's contract); `n` bytes of
            // our own buffer are read.
            unsafe { p.as_ref().scatter(0, u.data.as_ptr(), n) };
        } else if n > 0 {
            // SAFETY: `buf` is valid for `cap >= n` bytes (the receive's contract); the source is
            // our own buffer.
            unsafe { nemesis_shm::cell::copy_bytes(u.data.as_ptr(), buf.ptr, n) };
        }
        let status = Status { source: u.source, tag: u.tag, len: u.len };
        let released = self.release_held(&mut u, Some(buf));
        self.forget_unexpected(u);
        released?;
        finish(status, buf.cap)
    }

    /// Copies the held fragments of `u` into `buf` (if any) and releases them.
    pub(super) fn release_held(&mut self, u: &mut Unexpected, buf: Option<RecvBuf>) -> Result<()> {
        let mut res = Ok(());
        for inc in u.held.drain(..) {
            if let Some(buf) = buf {
                copy_into(buf, &inc);
            }
            if let Err(e) = self.port.release(inc) {
                res = Err(e.into());
            }
        }
        res
    }

    /// `u` leaves the unexpected list: its copied bytes no longer count, its buffer is reused.
    pub(super) fn forget_unexpected(&mut self, u: Unexpected) {
        self.unexpected_bytes -= u.data.len();
        self.recycle(u.data);
        self.relieve();
    }

    /// Back-pressure ends once the unexpected messages copied out fit the bound again.
    fn relieve(&mut self) {
        if self.throttled && self.unexpected_bytes <= self.cfg.unexpected_max {
            self.throttled = false;
            self.port.withhold_acks(false);
        }
    }

    /// A message from local rank `local` arrives with nobody to take it: true if its cells must
    /// stay held rather than be copied out (the copies would pass `NEMESIS_UNEXPECTED_MAX`).
    /// A fastbox message is always copied (the port needs its slot back in order); once past
    /// the bound, fastbox acknowledgements are withheld, so the sender's next messages come in
    /// cells, which are held: the sender runs out of cells and waits. Network arrivals are copied
    /// (their cells are the netmod's, shared by every remote sender).
    pub(super) fn hold_unexpected(&mut self, inc: &Incoming<'_>) -> bool {
        let over = self.unexpected_bytes + inc.len() > self.cfg.unexpected_max;
        if over && !self.throttled {
            self.throttled = true;
            self.port.withhold_acks(true);
        }
        over && !inc.via_fastbox() && inc.src != nemesis_shm::REMOTE
    }

    /// Counts `n` more bytes copied out for unexpected messages.
    pub(super) fn count_unexpected(&mut self, n: usize) {
        self.unexpected_bytes += n;
        if self.unexpected_bytes > self.cfg.unexpected_max && !self.throttled {
            self.throttled = true;
            self.port.withhold_acks(true);
        }
    }

    pub(super) fn recycle(&mut self, mut data: Vec<u8>) {
        if self.spare.len() < 64 && data.capacity() <= 1 << 20 {
            data.clear();
            self.spare.push(data);
        }
    }

    /// Reserves the first open unexpected message matching `want` for a matched probe: its id
    /// and status. No receive matches it afterwards but the one naming it ([`take_reserved`](
    /// Self::take_reserved)).
    pub(super) fn reserve_unexpected(&mut self, want: Want) -> Option<(u64, Status)> {
        let i = self.unexpected.find(want)?;
        let (id, u) = &mut self.unexpected[i];
        u.reserved = true;
        Some((*id, Status { source: u.source, tag: u.tag, len: u.len }))
    }

    /// Takes reserved message `id` for a receive into `buf`; `Found::Nothing` if it is gone (its
    /// sender died while it was arriving).
    pub(super) fn take_reserved(&mut self, id: u64, buf: RecvBuf) -> Found {
        let Some(i) = self.unexpected.find_any(|k, u| k == id && u.reserved) else { return Found::Nothing };
        self.unexpected[i].1.reserved = false;
        self.take_unexpected_at(i, buf)
    }

    pub(super) fn find_unexpected(&self, want: Want) -> Option<Status> {
        let u = &self.unexpected[self.unexpected.find(want)?].1;
        Some(Status { source: u.source, tag: u.tag, len: u.len })
    }

    pub(super) fn complete_claimed(&mut self, r: Request, mut u: Unexpected) {
        if let Some(Op::Recv { buf, .. }) = self.reqs.op_mut(r) {
            let buf = *buf;
            let res = self.consume_unexpected(u, buf);
            self.reqs.complete(r, res);
        } else {
            let _ = self.release_held(&mut u, None);
            self.forget_unexpected(u);
        }
    }
}
