//! Fault tolerance: the digest of a rendezvous message checked once its data is in.
//!
//! An eager message is hashed on arrival when it is whole in its first fragment (`ft.rs`,
//! `arrival_digest`), and the engine compares the result with the digest its stamp carries
//! (`nemesis_ft`'s `on_receive_stamped`). An RTS carries the stamp of data that has not moved: the
//! engine records the stamp at the RTS (sequence checked there), and the digest is compared here,
//! when the transfer completes — a mismatch completes the receive with
//! `SendDeterminismViolated` (a replay from a damaged log, or a sender that is not
//! send-deterministic), never with wrong data reported as good.
//!
//! Invariants: a check exists only for an RTS from another group whose stamp is set; it follows
//! the RTS from arrival to the receive that takes it (at once, or from the unexpected list by its
//! id) and leaves with the receive's completion, whatever its outcome.

use nemesis_ft::Stamp;
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
            // A receive in pieces without a staging buffer is not hashed.
            _ if buf.pieces.is_some() => return None,
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
}
