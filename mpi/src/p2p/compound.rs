//! Requests that are not one Endpoint operation (`request::State::Compound`, their parts in
//! [`Req::ext`]): `MPI_Isendrecv` and `MPI_Isendrecv_replace` here (a send and a receive, one
//! request), partitioned transfers in [`super::partitioned`], generalized requests in
//! `crate::grequest`.
//!
//! Such a request is polled ([`poll`]) like any other: when its parts are complete its state
//! becomes `Done` with the completion MPI reports, and the common completion code takes it from
//! there. A wait ([`wait`]) blocks on one of its pending Endpoint operations at a time
//! ([`pending`], [`took`]) or, when it has none (a generalized request, partitions not yet
//! ready), pauses between looks, letting other threads in.

use std::ffi::{c_int, c_void};

use super::{completion, null_arg, start};
use crate::abi::{self, Count, Datatype};
use crate::comm::Comm;
use crate::datatype::Layout;
use crate::datatype::pack::TypedBuf;
use crate::error::{Fail, Res};
use crate::request::{Completion, Ext, Mode, Req, State as ReqState};
use crate::state::{Access, State, not_running};

/// One operation of a compound request.
#[derive(Debug)]
pub enum Leg {
    /// In the Endpoint; its typed data's pieces, boxed, live until it completes.
    Pending(nemesis::Request, Option<Box<TypedBuf>>),
    /// Its result (`Ok` with a zero status for an operation on `MPI_PROC_NULL`).
    Done(Option<nemesis::Result<nemesis::Status>>),
}

impl Leg {
    fn from_state(state: ReqState, typed: Option<Box<TypedBuf>>) -> Leg {
        match state {
            ReqState::Pending(r) => Leg::Pending(r, typed),
            _ => Leg::Done(None),
        }
    }

    fn test(&mut self, ep: &mut nemesis::Endpoint) {
        if let Leg::Pending(r, _) = self {
            match ep.test(*r) {
                Ok(None) => {}
                Ok(Some(s)) => *self = Leg::Done(Some(Ok(s))),
                Err(e) => *self = Leg::Done(Some(Err(e))),
            }
        }
    }

    fn is(&self, r: nemesis::Request) -> bool {
        matches!(self, Leg::Pending(p, _) if *p == r)
    }

    /// The result, taken out (a done leg is read once).
    fn result(&mut self) -> Option<nemesis::Result<nemesis::Status>> {
        match self {
            Leg::Done(r) => r.take(),
            Leg::Pending(..) => None,
        }
    }
}

/// `MPI_Isendrecv(_replace)`'s parts: the send, the receive, and (`_replace`) the packed copy
/// the send reads from, kept until it completes.
#[derive(Debug)]
pub struct Pair {
    send: Leg,
    recv: Leg,
    /// Only kept (the send reads it), never read here.
    _copy: Option<Vec<u8>>,
}

impl Pair {
    /// The completion once both legs are done (ranks in communicator `c`): the receive's status,
    /// or the send's failure.
    fn completion(&mut self, c: Option<&Comm>) -> Option<Completion> {
        if matches!(self.send, Leg::Pending(..)) || matches!(self.recv, Leg::Pending(..)) {
            return None;
        }
        if let Some(Err(e)) = self.send.result() {
            return Some(completion(c, Err(e)));
        }
        Some(match self.recv.result() {
            Some(r) => completion(c, r),
            None => Completion::proc_null(),
        })
    }
}

/// The completion of a request-based one-sided operation that ended with `code`.
fn rma_completion(code: c_int) -> Completion {
    match code {
        abi::SUCCESS => Completion::empty(),
        _ => Completion {
            code,
            why: Some(crate::error::Why::Arg("a remote one-sided operation failed")),
            ..Completion::empty()
        },
    }
}

/// Polls compound request slot `i`: true once complete (its state `Done`).
pub fn poll(st: &mut State, i: usize) -> Res<bool> {
    let phase = st.phase;
    let Some(req) = st.reqs.at_mut(i) else { return Ok(true) };
    if !matches!(req.state, ReqState::Compound) {
        return Ok(true);
    }
    let ci = req.comm as usize;
    let done = match req.ext.as_deref_mut() {
        Some(Ext::Pair(p)) => {
            let Some(ep) = st.ep.as_mut() else { return Err(not_running(phase)) };
            p.send.test(ep);
            p.recv.test(ep);
            p.completion(st.comms.get(ci).map(|c| &**c))
        }
        Some(Ext::Part(_)) => return super::partitioned::poll(st, i),
        // Complete when the program says so and its query has filled the status
        // (`grequest::settle`); one the program freed is not queried.
        Some(Ext::Greq(g)) => return Ok(g.result.is_some() || (req.freed && g.is_complete())),
        Some(&mut Ext::Flush(w)) => super::bsend::flushed(st, w).then(Completion::empty),
        Some(&mut Ext::Rma(p)) => crate::win::remote::poll_request(st, p).map(rma_completion),
        None => Some(Completion::empty()),
    };
    let Some(done) = done else { return Ok(false) };
    if let Some(req) = st.reqs.at_mut(i) {
        req.state = ReqState::Done(done);
        // A generalized request keeps its callbacks for its `free_fn`.
        req.ext.take_if(|e| !matches!(**e, Ext::Greq(_)));
    }
    Ok(true)
}

/// The completion of a complete compound request whose state stays `Compound` until reported
/// (a partitioned or generalized one), taken out; `None` while it is not complete.
pub fn take_result(req: &mut Req) -> Option<Completion> {
    match req.ext.as_deref_mut()? {
        Ext::Part(p) => p.result.take(),
        Ext::Greq(g) => g.result.take(),
        _ => None,
    }
}

/// [`take_result`] without taking it.
pub fn result(req: &Req) -> Option<&Completion> {
    match req.ext.as_deref()? {
        Ext::Part(p) => p.result.as_ref(),
        Ext::Greq(g) => g.result.as_ref(),
        _ => None,
    }
}

/// The Endpoint operations compound request slot `i` waits for.
pub fn pending(st: &State, i: usize) -> Vec<nemesis::Request> {
    match st.reqs.at(i).and_then(|r| r.ext.as_deref()) {
        Some(Ext::Pair(p)) => [&p.send, &p.recv]
            .into_iter()
            .filter_map(|l| match l {
                Leg::Pending(r, _) => Some(*r),
                Leg::Done(_) => None,
            })
            .collect(),
        Some(Ext::Part(p)) => p.pending(),
        _ => Vec::new(),
    }
}

/// Records the result `res` of Endpoint operation `r` of compound request slot `i` (taken by a
/// wait).
pub fn took(st: &mut State, i: usize, r: nemesis::Request, res: nemesis::Result<nemesis::Status>) {
    match st.reqs.at_mut(i).and_then(|q| q.ext.as_deref_mut()) {
        Some(Ext::Pair(p)) => {
            if p.send.is(r) {
                p.send = Leg::Done(Some(res));
            } else if p.recv.is(r) {
                p.recv = Leg::Done(Some(res));
            }
        }
        Some(Ext::Part(p)) => p.took(r, res),
        _ => {}
    }
}

/// Waits until compound request slot `i` is complete.
pub fn wait(acc: &mut Access, i: usize) -> Res<()> {
    let mut spins = 0;
    loop {
        crate::grequest::settle(acc, i)?;
        if poll(acc.st(), i)? {
            return Ok(());
        }
        let p = pending(acc.st(), i);
        match p.first() {
            Some(&r) => {
                let res = acc.ep_wait(r)?;
                took(acc.st(), i, r, res);
            }
            None => {
                if !acc.threaded() {
                    acc.ep()?.progress().map_err(|e| Fail::endpoint(0, e))?;
                }
                acc.pause(&mut spins);
            }
        }
    }
}

/// `MPI_Isendrecv` (`replace`: `MPI_Isendrecv_replace`, where `recv` is the same buffer as
/// `send`): starts the send (from a packed copy with `replace`), then the receive; one request
/// completes when both have, with the receive's status.
///
/// # Safety
/// MPI's contract on the buffers (valid and untouched until the request completes); `request`
/// null or writable.
#[allow(clippy::too_many_arguments)]
pub unsafe fn isendrecv(
    acc: &mut Access,
    send: (*const c_void, Count, Datatype, c_int, c_int),
    recv: (*mut c_void, Count, Datatype, c_int, c_int),
    replace: bool,
    comm: abi::Comm,
    request: *mut abi::Request,
) -> Res<()> {
    if request.is_null() {
        return Err(null_arg(None, "null request pointer"));
    }
    let (sbuf, scount, stype, dest, stag) = send;
    let (rbuf, rcount, rtype, source, rtag) = recv;
    let st = acc.st();
    super::complete::reap(st);
    let s = start::target(st, sbuf, scount, stype, dest, stag, comm, true)?;
    let r = start::target(st, rbuf, rcount, rtype, source, rtag, comm, false)?;
    let (copy, sdata) = if replace {
        // SAFETY: MPI's contract: the buffer holds the data to send.
        let copy = unsafe { s.data.packed() };
        let data = Layout::Contig { ptr: copy.as_ptr().cast_mut(), len: copy.len() };
        (Some(copy), data)
    } else {
        (None, s.data)
    };
    // SAFETY: the data (the user's, or the copy kept in the request) stays until completion.
    let (sstate, styped) = unsafe { start::start_send(st, Mode::Standard, &sdata, s.peer, stag, s.ctx, s.ci) }?;
    // SAFETY: MPI's contract on the receive buffer.
    let started = unsafe { start::start_recv(st, &r.data, r.peer, rtag, r.ctx, r.ci) };
    let (rstate, rtyped) = match started {
        Ok(x) => x,
        Err(e) => {
            // The send is under way with no request to carry it: finish it first.
            if let ReqState::Pending(q) = sstate {
                let _ = acc.ep_wait(q)?;
            }
            return Err(e);
        }
    };
    let pair = Pair { send: Leg::from_state(sstate, styped), recv: Leg::from_state(rstate, rtyped), _copy: copy };
    let req = Req { ext: Some(Box::new(Ext::Pair(pair))), ..Req::new(s.ci, ReqState::Compound, true) };
    let st = acc.st();
    let h = st.reqs.insert(req).ok_or_else(|| start::too_many(s.ci))?;
    // SAFETY: checked non-null; MPI's contract.
    unsafe { *request = h };
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_pair_completes_with_the_receive_or_the_send_failure() {
        let ok = |n| Some(Ok(nemesis::Status { source: 0, tag: 5, len: n }));
        let mut p = Pair { send: Leg::Done(ok(1)), recv: Leg::Done(ok(9)), _copy: None };
        let c = p.completion(None).unwrap();
        assert_eq!((c.tag, c.count, c.code), (5, 9, abi::SUCCESS));
        let failed = Some(Err(nemesis::Error::InvalidRequest));
        let mut p = Pair { send: Leg::Done(failed), recv: Leg::Done(ok(9)), _copy: None };
        assert_ne!(p.completion(None).unwrap().code, abi::SUCCESS);
        let mut p = Pair { send: Leg::Done(None), recv: Leg::Done(None), _copy: None };
        assert_eq!(p.completion(None).unwrap().source, abi::PROC_NULL);
    }
}
