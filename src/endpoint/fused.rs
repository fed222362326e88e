//! The fused paths: a blocking send written straight into the destination's fastbox, and a
//! blocking receive taken straight from the source's, for a layer above (the C ABI's `MPI_Send`
//! and `MPI_Recv`) that inlines them in its own entry point and keeps the general calls
//! ([`Endpoint::send`], [`Endpoint::recv`]) out of line.
//!
//! The caller names a peer by a [`Link`] the Endpoint made for it beforehand (a communicator's
//! table of them, built when the communicator is made), so the fused paths look up no route: a
//! link carries the peer's job rank, its local rank and its doorbell. A link made with fault
//! tolerance on, or for a rank of another node, names no local rank: the port finds no fastbox
//! for it, and every call goes the general way (which runs the fault-tolerance hooks).

use std::sync::atomic::AtomicU32;

use super::request::Request;
use super::{ANY_TAG, Endpoint, Inner, KIND_EAGER, NOT_LOCAL, SendId};

/// What the fused paths need of one peer: made by [`Endpoint::link`] for a caller's table (8-byte
/// aligned, 16 bytes: one load finds the ranks, one the doorbell).
#[derive(Clone, Copy, Debug)]
#[repr(C)]
pub struct Link {
    /// The peer's job rank.
    rank: u32,
    /// Its local rank; [`NOT_LOCAL`] for a rank of another node, or when fault tolerance is on
    /// (no fastbox is found for it: the fused paths decline).
    local: u16,
    _pad: u16,
    /// Its doorbell in the segment ([`NO_BELL`] when `local` is `NOT_LOCAL`).
    bell: *const AtomicU32,
}

/// The doorbell of a link with no local rank: never armed (nobody waits on it), so ringing it
/// does nothing.
static NO_BELL: AtomicU32 = AtomicU32::new(0);

impl Link {
    /// A link naming no peer (the fused paths decline it), for a table's unused entries.
    pub const NONE: Link = Link { rank: u32::MAX, local: NOT_LOCAL, _pad: 0, bell: &NO_BELL };

    /// The peer's job rank.
    #[inline(always)]
    pub fn rank(&self) -> u32 {
        self.rank
    }

    /// True if the fused paths may take this peer's messages from its fastbox: a rank of this
    /// node, fault tolerance off.
    #[inline(always)]
    pub fn is_local(&self) -> bool {
        self.local != NOT_LOCAL
    }
}

impl Endpoint {
    /// The longest message that travels in a fastbox (0 if fastboxes are off): the most a fused
    /// or deferred receive ([`try_recv_link`](Self::try_recv_link)) may take.
    #[inline(always)]
    pub fn fastbox_payload(&self) -> usize {
        self.inner.port.fastbox_payload()
    }

    /// The fused paths' link to job rank `rank` ([`Link::NONE`] for a rank outside the job).
    pub fn link(&self, rank: u32) -> Link {
        let inner = &*self.inner;
        let local = inner.route.get(rank as usize).copied().unwrap_or(NOT_LOCAL);
        match inner.bells.get(usize::from(local)) {
            Some(&bell) if inner.ft.is_none() => Link { rank, local, _pad: 0, bell },
            _ => Link { rank, ..Link::NONE },
        }
    }

    /// The fused blocking send: `buf` straight into the fastbox of `to`'s peer when it can go
    /// there at once — a valid tag, our box at the peer held with its next slot free, no earlier
    /// message to it waiting for cells (which this one would overtake), the message within a
    /// slot. True if sent (as [`send`](Self::send) would have: `buf` may be reused); false if
    /// nothing was done and the caller goes the general way ([`send`](Self::send)), which also
    /// reports errors.
    ///
    /// # Safety
    /// `to` was made by this Endpoint's [`link`](Self::link) (its doorbell lives in our segment).
    #[inline(always)]
    pub unsafe fn try_send_link(&mut self, buf: &[u8], to: Link, tag: i32, context: u32) -> bool {
        // SAFETY: the caller's contract.
        unsafe { self.send_link(buf, to, tag, context, 0) }
    }

    /// [`try_send_link`](Self::try_send_link) of a message whose header's `aux` is `aux`.
    ///
    /// # Safety
    /// As for [`try_send_link`](Self::try_send_link).
    #[inline(always)]
    unsafe fn send_link(&mut self, buf: &[u8], to: Link, tag: i32, context: u32, aux: u32) -> bool {
        let inner = &mut *self.inner;
        if tag < 0 || !inner.port.try_send_plain(to.local, inner.rank, to.rank, tag, context, KIND_EAGER, aux, buf) {
            return false;
        }
        // SAFETY: the caller's contract: the doorbell of a rank of our segment, or `NO_BELL`.
        crate::wait::ring(unsafe { &*to.bell });
        true
    }

    /// The fused non-blocking send (`MPI_Isend`): as [`try_send_link`](Self::try_send_link), the
    /// message marked with a fresh token as [`isend_raw`](Self::isend_raw) marks it. Returns the
    /// [`SendId`] that names it for [`cancel_send`](Self::cancel_send): the send is complete (the
    /// buffer may be reused) and no request was made. `None` if nothing was done: the caller goes
    /// the general way ([`isend_now`](Self::isend_now)).
    ///
    /// # Safety
    /// As for [`try_send_link`](Self::try_send_link).
    #[inline(always)]
    pub unsafe fn try_isend_link(&mut self, buf: &[u8], to: Link, tag: i32, context: u32) -> Option<SendId> {
        // The token `Inner::token` would take, taken only if the message goes.
        let token = self.inner.next_token.wrapping_add(1).max(1);
        // SAFETY: the caller's contract.
        if !unsafe { self.send_link(buf, to, tag, context, token) } {
            return None;
        }
        self.inner.next_token = token;
        Some(SendId { dest: to.rank, token, req: Request::NONE })
    }

    /// The fused blocking receive: the next message of `from`'s peer (a rank of this node) into
    /// the `cap` bytes at `ptr` when it already waits in its fastbox and nothing else could take
    /// it first (see [`Inner::nothing_before`]), the message plain eager data of `context` whose
    /// tag is `tag` (or `tag` is [`ANY_TAG`]) and that fits `cap`. Returns its length and tag, as
    /// [`recv`](Self::recv) would have; `None` if nothing was consumed and the caller goes the
    /// general way ([`recv`](Self::recv)): a message still on its way, a truncation, errors.
    ///
    /// An invalid tag (negative, not `ANY_TAG`) is not checked here: no sender's message carries
    /// one, so it matches nothing and the general path reports it.
    ///
    /// # Safety
    /// `ptr` is valid for `cap` bytes of writes (any pointer if `cap` is 0).
    #[inline(always)]
    pub unsafe fn try_recv_link(
        &mut self,
        ptr: *mut u8,
        cap: usize,
        from: Link,
        tag: i32,
        context: u32,
    ) -> Option<(u32, i32)> {
        let inner = &mut *self.inner;
        // Nothing waits anywhere (one test for the common case), or nothing that could come first.
        let idle = inner.unexpected.is_empty() && inner.posted.is_empty();
        if !idle && !inner.nothing_before(from) {
            return None;
        }
        // SAFETY: the caller's contract.
        unsafe { inner.port.take_plain(from.local, KIND_EAGER, tag, tag == ANY_TAG, context, ptr, cap) }
    }
}

impl Endpoint {
    /// [`try_recv_link`](Self::try_recv_link) that keeps trying while the message may be on its
    /// way (the peer's fastbox into this rank's next slot is empty): as many tries as a wait spins empty polls before it yields or blocks (the node's
    /// spin, `NEMESIS_SPIN_POLLS`; few when ranks outnumber CPUs), for a receive the caller
    /// would otherwise post and wait for (`MPI_Waitall` on a deferred `MPI_Irecv`). Nothing
    /// else progresses meanwhile, as in the spin of a wait that finds nothing.
    ///
    /// # Safety
    /// As for [`try_recv_link`](Self::try_recv_link).
    pub unsafe fn try_recv_link_spin(
        &mut self,
        ptr: *mut u8,
        cap: usize,
        from: Link,
        tag: i32,
        context: u32,
    ) -> Option<(u32, i32)> {
        for _ in 0..=self.inner.spin {
            // SAFETY: the caller's contract.
            if let Some(got) = unsafe { self.try_recv_link(ptr, cap, from, tag, context) } {
                return Some(got);
            }
            // No fastbox from that peer (its messages come in cells), or a message there that
            // was declined: waiting changes nothing.
            if !self.inner.port.fastbox_awaited(from.local) {
                return None;
            }
            core::hint::spin_loop();
        }
        None
    }
}

impl Inner {
    /// True if no message nor posted receive could come before the next message of `from` in
    /// MPI's order, for a receive naming `from` (fault tolerance off, which [`Endpoint::link`]
    /// ensured). MPI-3.1 §3.5: messages of one sender match receives in the order sent, and a
    /// message goes to the first posted receive it matches. So:
    /// - an unexpected message of `from` (in its own queue: the unexpected list is per source)
    ///   arrived before anything still in its fastbox, and could match this receive: none may
    ///   wait (messages of other sources cannot match a receive naming `from`);
    /// - a receive posted earlier that names `from`, or `ANY_SOURCE`, could match the fastbox's
    ///   message and must have it first: none may be posted (receives naming other sources
    ///   cannot match it).
    ///
    /// Messages of `from` still in the cell queue come before the fastbox's in order only if
    /// their numbers do; the port takes the fastbox message only if its number is the next
    /// expected (`Port::take_plain`), which covers them.
    #[inline(always)]
    pub(super) fn nothing_before(&self, from: Link) -> bool {
        self.unexpected.queue_is_empty(from.rank)
            && self.any_posted == 0
            && self.expected_count.get(usize::from(from.local)).is_none_or(|&c| c == 0)
    }
}
