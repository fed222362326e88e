//! Settling a call's requests after an error that is not theirs (another peer's malformed message,
//! a failure of the node or the network, met while progressing): a call returns only once no
//! transfer can still touch its caller's memory. Why, and what each kind of request does, is in
//! `docs/design/endpoint.md` ("Settling").
//!
//! [`Inner::settle`], for every request of the call:
//! - what no peer has been told about is **withdrawn** (a receive not yet matched leaves the posted
//!   list; a send waiting for cells goes on from the Endpoint's copy; a held FT send is dropped);
//! - a receive matched to an eager message still arriving takes the rest into a sink;
//! - a rendezvous is cancelled at its receiver if the RTS was not taken (`cancel.rs`), else
//!   **finished**: progress goes on, through further errors (logged), until its outcome is in.
//!
//! Invariant: when the call returns the error, every handle of the call is stale and the caller's
//! memory its own again.

use nemesis_shm::netmod::Netmod;

use super::progress::Active;
use super::request::{Op, Request};
use super::{Inner, POLL_BUDGET, SendId, raw_slice};

use crate::error::Error;
use crate::wait::Waiter;

/// Errors of a settle logged in full; later ones are counted.
const LOGGED: u32 = 4;

impl Inner {
    /// Settles `reqs` after an error that is not theirs (module documentation): on return none of
    /// them touches its buffer any more and each handle is stale; their results are dropped (the
    /// caller returns the error it met).
    pub(super) fn settle(&mut self, reqs: &[Request]) {
        let mut left: Vec<Request> = Vec::new();
        let mut answers: Vec<Request> = Vec::new();
        for &r in reqs {
            if !self.withdraw(r, Some(&mut answers)) {
                left.push(r);
            }
        }
        if left.is_empty() && answers.is_empty() {
            return;
        }
        let mut waiter = Waiter::new(self.cfg.wait, self.spin);
        let mut errors = 0u32;
        loop {
            // A request can change kind meanwhile (a rendezvous whose sender died is posted again
            // under recovery): each is looked at again.
            left.retain(|&r| !self.withdraw(r, None));
            answers.retain(|&a| !self.drop_if_done(a));
            if left.is_empty() && answers.is_empty() {
                break;
            }
            self.settle_pass(&mut waiter, &mut errors);
        }
        if errors > LOGGED {
            tracing::warn!(errors, "errors met while finishing the transfers of a failed call");
        }
    }

    /// Withdraws request `r` if it can be (module documentation); true once it touches no buffer
    /// of the caller's (it is then freed, or an internal request of the Endpoint's). A rendezvous
    /// send is asked to be cancelled at its receiver if `answers` is given (the first look): the
    /// answer's request goes there. False: a transfer to finish.
    fn withdraw(&mut self, r: Request, answers: Option<&mut Vec<Request>>) -> bool {
        let Some(op) = self.reqs.op_mut(r) else {
            // Complete (the result goes) or stale.
            self.drop_if_done(r);
            return true;
        };
        match op {
            Op::Recv { status: None, .. } => {
                if let Some(i) = self.posted.iter().position(|p| p.req == r) {
                    if let Some(p) = self.take_posted(i) {
                        self.expect(p.want.source, false);
                    }
                } else if let Some(k) = self.unexpected.find_any(|_, u| u.claimed == Some(r)) {
                    // The message goes on arriving into our memory, for a later receive; the
                    // engine's delivery waits for that one.
                    let d = self.ft.as_deref_mut().and_then(|ft| {
                        let i = ft.deferred.iter().position(|&(q, _)| q == r)?;
                        Some(ft.deferred.swap_remove(i).1)
                    });
                    let u = &mut self.unexpected[k].1;
                    u.claimed = None;
                    if d.is_some() {
                        u.delivery = d;
                    }
                }
            }
            Op::Recv { status: Some(_), .. } => {
                // The rest of its message goes into a sink.
                for a in self.active.iter_mut() {
                    if matches!(*a, Active::Req(q) if q == r) {
                        *a = Active::Discard;
                    }
                }
            }
            Op::Send { .. } => self.detach_pending(r),
            Op::Sync => self.sync_waiting.retain(|w| w.1 != r),
            Op::Held(_) => {
                if let Some(ft) = self.ft.as_deref_mut() {
                    ft.held.retain(|&(q, _)| q != r);
                }
            }
            Op::Lmt { recv: false, .. } => {
                if let (Some(answers), Some((dest, token))) = (answers, self.reqs.sent(r)) {
                    match self.cancel_send(SendId { dest, token, req: r }) {
                        Ok(a) => answers.push(a),
                        // Not asked: the transfer is finished instead.
                        Err(e) => tracing::warn!(error = %e, "cancelling a rendezvous send failed"),
                    }
                }
                return false;
            }
            Op::Lmt { recv: true, .. } => return false,
        }
        self.reqs.complete(r, Err(Error::Cancelled));
        self.drop_if_done(r);
        true
    }

    /// Frees request `r` if it is complete (its result dropped, a delivery it waited for applied:
    /// the message was consumed); true if it was, or is stale.
    fn drop_if_done(&mut self, r: Request) -> bool {
        match self.reqs.take(r) {
            Ok(None) => false,
            Ok(Some(_)) => {
                self.ft_taken(r);
                true
            }
            Err(_) => true,
        }
    }

    /// Send `r`, if it waits for cells, goes on from a copy of its message under a request of the
    /// Endpoint's own (freed when it completes; a synchronous one no longer waits for its
    /// acknowledgement): `r` no longer touches the caller's buffer and may complete. The message
    /// cannot just be dropped: part of it may be out, and the port hands a pair's messages over
    /// in order (later ones wait behind it).
    pub(super) fn detach_pending(&mut self, r: Request) {
        let Some(k) = self.pending.iter().position(|p| p.req == r) else { return };
        let Some(op) = self.reqs.op_mut(r) else { return };
        let Op::Send { buf, len, pieces, .. } = *op else { return };
        let copy: Box<[u8]> = match pieces {
            Some(p) => {
                let mut bytes = vec![0u8; len].into_boxed_slice();
                // SAFETY: the send's pieces are valid and readable until its request completes
                // (the caller's contract; it has not); `bytes` holds their `len` bytes.
                unsafe { p.as_ref().gather(0, bytes.as_mut_ptr(), len) };
                bytes
            }
            // SAFETY: the send's buffer holds `len` readable bytes until its request completes
            // (the caller's contract; it has not).
            None => unsafe { raw_slice(buf, len) }.into(),
        };
        let op = std::mem::replace(op, Op::Sync);
        let own = self.reqs.insert(op);
        let p = &mut self.pending[k];
        p.req = own;
        p.own = Some(copy);
        p.internal = true;
        p.sync = None;
    }

    /// One progress pass of a settle: every step runs whatever the others meet (an error of one
    /// must not keep the transfer being finished from moving), errors logged; then the wait mode
    /// applies if nothing happened.
    pub(super) fn settle_pass(&mut self, waiter: &mut Waiter, errors: &mut u32) {
        let mut got = false;
        note(&mut got, errors, self.resume_pending());
        if self.ft_mail.is_some() {
            note(&mut got, errors, self.ft_mail(None));
        }
        note(&mut got, errors, self.lmt_step());
        if let Some(net) = self.net.as_mut() {
            note(&mut got, errors, net.poll(&mut self.port).map_err(Error::from));
        }
        for _ in 0..POLL_BUDGET {
            match self.port.poll(&self.expected) {
                Ok(Some(inc)) => note(&mut got, errors, self.deliver(inc, None).map(|()| true)),
                Ok(None) => break,
                Err(e) => {
                    note(&mut got, errors, Err(e.into()));
                    break;
                }
            }
        }
        if self.port.has_events() {
            note(&mut got, errors, self.handle_events(None).map(|()| true));
        }
        if got {
            waiter.progressed();
        } else if let Err(e) = self.idle(waiter, None) {
            note(&mut got, errors, Err(e));
            // A failure on every pass would spin: give the core away between tries.
            std::thread::yield_now();
        }
    }
}

/// What one step of a settle's pass gave: `got` if it moved something; an error is counted in
/// `errors`, and logged if among the first.
fn note(got: &mut bool, errors: &mut u32, r: Result<bool, Error>) {
    match r {
        Ok(g) => *got |= g,
        Err(e) => {
            *errors += 1;
            if *errors <= LOGGED {
                tracing::warn!(error = %e, "error while finishing the transfers of a failed call");
            }
        }
    }
}
