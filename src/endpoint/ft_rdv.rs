//! Fault tolerance: the digest of a message checked once its data is in, when it did not come
//! whole in one fragment.
//!
//! An eager message is hashed on arrival when it is whole in its first fragment (`ft.rs`,
//! `arrival_digest`), and the engine compares the result with the digest its stamp carries
//! (`nemesis_ft`'s `on_receive_stamped`). Two other cases are checked here; in both the engine
//! checks the stamp's sequence on the first fragment, and its digest is compared when the data is
//! in — a mismatch is `SendDeterminismViolated` (a replay from a damaged log, or a sender that is
//! not send-deterministic), never wrong data reported as good:
//! - **An eager message in several fragments** is hashed fragment by fragment as they arrive, in
//!   channel order ([`EagerCheck`]; the digest does not depend on how its input is split), whatever
//!   they go to (a receive, the unexpected list, a bypass); the last fragment compares, before it
//!   completes anything, and a mismatch is the error of the progress call that met it.
//! - **An RTS** carries the stamp of data that has not moved: the digest is compared when the
//!   transfer completes, over the staging buffer, the receive's bytes or its pieces in order, and a
//!   mismatch completes the receive with the error.
//!
//! Invariants: a check exists only for a message from another group whose stamp is set. An RTS's
//! check follows it from arrival to the receive that takes it (at once, or from the unexpected
//! list by its id) and leaves with the receive's completion, whatever its outcome. An eager check
//! is at most one per sender (a sender's fragments do not interleave); it leaves at the last
//! fragment, or when its sender dies mid-message (`drop_partial`).

use nemesis_ft::Stamp;
use nemesis_ft::digest::Digest;
use nemesis_shm::Incoming;

use super::Inner;
use super::request::{Op, RecvBuf, Request};
use crate::error::Error;
use crate::ft::{envelope, unwire};

/// What the data of a rendezvous message must hash to.
#[derive(Clone, Copy, Debug)]
pub(crate) struct RdvCheck {
    source: u32,
    tag: i32,
    context: u32,
    date: u64,
    stamp: Stamp,
}

/// An eager message in several fragments being hashed as it arrives.
#[derive(Clone, Debug)]
pub(crate) struct EagerCheck {
    source: u32,
    date: u64,
    stamp: Stamp,
    hashed: Digest,
}

/// Where a check waits: with an unexpected RTS (its id), or with the receive that took it.
#[derive(Debug)]
pub(crate) enum RdvAt {
    Unexpected(u64),
    Recv(Request, RecvBuf),
}

impl Inner {
    /// The check of RTS `inc` from `source`, if its digest is to be checked.
    pub(super) fn ft_rdv_check(&self, inc: &Incoming, source: u32) -> Option<RdvCheck> {
        let ft = self.ft.as_deref()?;
        if !ft.digested.get(source as usize).copied().unwrap_or(false) {
            return None;
        }
        let (pb, stamp) = unwire(&inc.piggyback()?).ok()?;
        stamp.is_some().then_some(RdvCheck { source, tag: inc.tag(), context: inc.context(), date: pb.date(), stamp })
    }

    /// Check `c` waits at `at`.
    pub(super) fn ft_rdv_check_at(&mut self, c: Option<RdvCheck>, at: RdvAt) {
        if let (Some(c), Some(ft)) = (c, self.ft.as_deref_mut()) {
            // A receive posted again (its sender died mid-transfer) takes the new copy's check.
            if let RdvAt::Recv(req, _) = at {
                ft.rdv_checks.retain(|(a, _)| !matches!(a, RdvAt::Recv(r, _) if *r == req));
            }
            ft.rdv_checks.push((at, c));
        }
    }

    /// Unexpected RTS `id` is taken by receive `req` into `buf` (`None`: it leaves otherwise).
    pub(super) fn ft_rdv_check_taken(&mut self, id: u64, to: Option<(Request, RecvBuf)>) {
        let Some(ft) = self.ft.as_deref_mut() else { return };
        let Some(i) = ft.rdv_checks.iter().position(|(at, _)| matches!(at, RdvAt::Unexpected(x) if *x == id)) else {
            return;
        };
        match to {
            Some((req, buf)) => ft.rdv_checks[i].0 = RdvAt::Recv(req, buf),
            None => {
                ft.rdv_checks.swap_remove(i);
            }
        }
    }

    /// Receive `req` ended (`moved`: its data is in, `len` bytes of it): the violation if the data
    /// does not match its digest. Its check leaves in any case.
    pub(super) fn ft_rdv_check_done(&mut self, req: Request, moved: Option<usize>) -> Option<Error> {
        let ft = self.ft.as_deref_mut()?;
        if ft.rdv_checks.is_empty() {
            return None;
        }
        let i = ft.rdv_checks.iter().position(|(at, _)| matches!(at, RdvAt::Recv(r, _) if *r == req))?;
        let (RdvAt::Recv(_, buf), c) = ft.rdv_checks.swap_remove(i) else { return None };
        let len = moved?;
        let head = envelope(c.tag, c.context);
        let digest = match self.reqs.op_mut(req) {
            Some(Op::Lmt { stage: Some(st), .. }) => {
                nemesis_ft::digest::digest(&head, &st.bytes[..len.min(st.bytes.len())])
            }
            _ if buf.pieces.is_some() => {
                let mut d = Digest::new();
                d.update(&head);
                if let Some(p) = buf.pieces {
                    // SAFETY: the pieces stay valid until the receive completes (not yet); the
                    // transfer wrote their first `len` packed bytes, which `visit` walks in order.
                    let p = unsafe { p.as_ref() };
                    p.visit(0, len, &mut |ptr, n| {
                        // SAFETY: `visit` hands out pieces of the receive's memory, `n` bytes each.
                        d.update(unsafe { std::slice::from_raw_parts(ptr, n) });
                        true
                    });
                }
                d.finish()
            }
            // SAFETY: the receive's buffer is valid until its request completes (not yet), and
            // its first `len` bytes (at most its capacity) were written by the transfer.
            _ => nemesis_ft::digest::digest(&head, unsafe { std::slice::from_raw_parts(buf.ptr, len.min(buf.cap)) }),
        };
        (digest != c.stamp.digest).then(|| {
            Error::from(nemesis_ft::Error::SendDeterminismViolated {
                rank: c.source,
                dest: self.rank,
                seq: c.stamp.seq,
                date: c.date,
                what: "arrived by rendezvous with data that does not match its digest",
            })
        })
    }

    /// The first fragment `inc` of a message from `source` that is not whole in it, kept by the
    /// engine: its digest is computed as its fragments arrive, if it is checked (module
    /// documentation). Any earlier check of `source` is gone (its message was abandoned).
    #[cold]
    #[inline(never)]
    pub(super) fn ft_eager_check_start(&mut self, inc: &Incoming, source: u32) {
        let Some(ft) = self.ft.as_deref_mut() else { return };
        ft.eager_checks.retain(|c| c.source != source);
        let kind = inc.kind();
        if !(kind == super::KIND_EAGER || kind == super::KIND_EAGER_SYNC)
            || !ft.digested.get(source as usize).copied().unwrap_or(false)
        {
            return;
        }
        let Some((pb, stamp)) = inc.piggyback().and_then(|b| unwire(&b).ok()) else { return };
        if !stamp.is_some() {
            return;
        }
        let mut hashed = Digest::new();
        hashed.update(&envelope(inc.tag(), inc.context()));
        // SAFETY: the fragment is not released while `inc` is borrowed; its `frag_len` payload
        // bytes at `payload_ptr` were validated against its slot or cell when it was polled.
        hashed.update(unsafe { std::slice::from_raw_parts(inc.payload_ptr(), inc.frag_len()) });
        ft.eager_checks.push(EagerCheck { source, date: pb.date(), stamp, hashed });
    }

    /// A later fragment `inc` from `source`: hashed into its message's check, and at the last
    /// one the violation if the message does not match its digest.
    #[cold]
    #[inline(never)]
    pub(super) fn ft_eager_check_fragment(&mut self, inc: &Incoming, source: u32) -> Result<(), Error> {
        let Some(ft) = self.ft.as_deref_mut() else { return Ok(()) };
        let Some(i) = ft.eager_checks.iter().position(|c| c.source == source) else { return Ok(()) };
        // SAFETY: as in `ft_eager_check_start`.
        ft.eager_checks[i].hashed.update(unsafe { std::slice::from_raw_parts(inc.payload_ptr(), inc.frag_len()) });
        if !inc.is_last() {
            return Ok(());
        }
        let c = ft.eager_checks.swap_remove(i);
        if c.hashed.finish() == c.stamp.digest {
            return Ok(());
        }
        Err(Error::from(nemesis_ft::Error::SendDeterminismViolated {
            rank: c.source,
            dest: self.rank,
            seq: c.stamp.seq,
            date: c.date,
            what: "arrived in several fragments with data that does not match its digest",
        }))
    }

    /// Sender `dead` will send no more of the message it was sending: its check goes.
    pub(super) fn ft_eager_check_dropped(&mut self, dead: u32) {
        if let Some(ft) = self.ft.as_deref_mut()
            && !ft.eager_checks.is_empty()
        {
            ft.eager_checks.retain(|c| c.source != dead);
        }
    }
}
