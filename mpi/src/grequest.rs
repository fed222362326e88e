//! Generalized requests (MPI-4.1 §13.2): `MPI_Grequest_start`, `MPI_Grequest_complete`, and
//! the program's three callbacks.
//!
//! A generalized request is a request (`request::State::Compound`, its callbacks in
//! [`Ext::Greq`]) that the program completes itself with `MPI_Grequest_complete`. The callbacks
//! are called as the standard says:
//! - `query_fn` fills the status when a completion call (`MPI_Wait`, `MPI_Test`... and
//!   `MPI_Request_get_status`) finds the request complete ([`settle`]); its code, if not
//!   `MPI_SUCCESS`, is the status's `MPI_ERROR` and the completion call's error;
//! - `free_fn` after `query_fn`, when the completion call frees the request (or at
//!   `MPI_Request_free` of a complete one, or when a freed one completes): [`discard`] sets it
//!   aside and the call runs it before returning ([`run_frees`]); its error code is the call's;
//! - `cancel_fn` at `MPI_Cancel`, told whether `MPI_Grequest_complete` was already called
//!   ([`cancel`]).
//!
//! Every callback runs with no borrow of the library's state live (values copied out first, the
//! request looked up again afterwards), so that it may call MPI.

use std::cell::RefCell;
use std::ffi::{c_int, c_void};

use crate::abi;
use crate::error::{Fail, Res, Why};
use crate::p2p::null_arg;
use crate::request::{Completion, Ext, Req, State as ReqState};
use crate::state::{Access, State};

/// `MPI_Grequest_query_function *` (null allowed: no status filled).
pub type QueryFn = Option<abi::GrequestQueryFn>;
/// `MPI_Grequest_free_function *`.
pub type FreeFn = Option<abi::GrequestFreeFn>;
/// `MPI_Grequest_cancel_function *`.
pub type CancelFn = Option<abi::GrequestCancelFn>;

/// A generalized request's callbacks and progress.
#[derive(Debug)]
pub struct Greq {
    query: QueryFn,
    free: FreeFn,
    cancel: CancelFn,
    /// The program's `extra_state`, passed to every callback.
    extra: *mut c_void,
    /// `MPI_Grequest_complete` was called.
    complete: bool,
    /// The status `query_fn` filled, until reported (the state stays `Compound` until then, so
    /// that only the general completion path, which runs `free_fn`, takes it).
    pub result: Option<Completion>,
}

impl Greq {
    /// `MPI_Grequest_complete` was called.
    pub fn is_complete(&self) -> bool {
        self.complete
    }
}

/// The index of `MPI_COMM_WORLD` in the communicator table: a generalized request's failures go
/// to its error handler (the request has no communicator of its own).
const WORLD: usize = 0;

/// Runs a program callback through [`crate::state::outside`] (without the library lock, so that
/// it may call MPI). Taking the `Access` mutably proves no borrow of the state is live in this
/// frame or its callers.
fn outside<R>(_acc: &mut Access, f: impl FnOnce() -> R) -> R {
    // SAFETY: the `Access` is borrowed here, so no reference into the state is live (`outside`'s
    // rule); every caller copied out what the callback needs and looks the request up again.
    unsafe { crate::state::outside(f) }
}

thread_local! {
    /// The `free_fn` calls a completion call owes before it returns ([`discard`]).
    static FREES: RefCell<Vec<Greq>> = const { RefCell::new(Vec::new()) };
}

/// `MPI_Grequest_start`.
///
/// # Safety
/// `request` writable; the callbacks are the program's, callable with `extra_state`.
pub unsafe fn start(
    acc: &mut Access,
    query: QueryFn,
    free: FreeFn,
    cancel: CancelFn,
    extra: *mut c_void,
    request: *mut abi::Request,
) -> Res<()> {
    let st = acc.st();
    if st.ep.is_none() {
        return Err(crate::state::not_running(st.phase));
    }
    if request.is_null() {
        return Err(null_arg(None, "null request pointer"));
    }
    let g = Greq { query, free, cancel, extra, complete: false, result: None };
    let req = Req { ext: Some(Box::new(Ext::Greq(g))), ..Req::new(WORLD, ReqState::Compound, false) };
    let h = st.reqs.insert(req).ok_or_else(|| crate::p2p::start::too_many(WORLD))?;
    // SAFETY: checked non-null; MPI's contract.
    unsafe { *request = h };
    Ok(())
}

/// The generalized request named by `h`, and its slot.
fn greq(st: &mut State, h: abi::Request) -> Res<(usize, &mut Greq)> {
    let i = st.reqs.index(h).ok_or_else(|| Fail::new(abi::ERR_REQUEST, None, Why::Request(h)))?;
    match st.reqs.at_mut(i).and_then(|r| r.ext.as_deref_mut()) {
        Some(Ext::Greq(g)) => Ok((i, g)),
        _ => Err(Fail::new(abi::ERR_REQUEST, None, Why::Arg("not a generalized request (MPI_Grequest_start)"))),
    }
}

/// `MPI_Grequest_complete`: the operation is done; the next completion call reports it.
pub fn complete(acc: &mut Access, h: abi::Request) -> Res<()> {
    let (_, g) = greq(acc.st(), h)?;
    if g.complete {
        return Err(Fail::new(abi::ERR_REQUEST, None, Why::Arg("MPI_Grequest_complete called twice")));
    }
    g.complete = true;
    Ok(())
}

/// If request slot `i` is a generalized request the program completed and not yet queried, calls
/// its `query_fn` and records the status it filled: the request is then `Done`.
pub fn settle(acc: &mut Access, i: usize) -> Res<()> {
    let st = acc.st();
    let Some(Req { state: ReqState::Compound, ext: Some(ext), .. }) = st.reqs.at(i) else { return Ok(()) };
    let Ext::Greq(g) = &**ext else { return Ok(()) };
    if !g.complete || g.result.is_some() {
        return Ok(());
    }
    let (query, extra) = (g.query, g.extra);
    let mut s = Completion::empty().status();
    // SAFETY: the program's callback with its `extra_state` and a status to fill (MPI's
    // contract); no borrow of the state is live across it.
    let code = query.map_or(abi::SUCCESS, |q| outside(acc, || unsafe { q(extra, &mut s) }));
    let done = Completion {
        source: s.source,
        tag: s.tag,
        count: s.count(),
        code,
        why: (code != abi::SUCCESS).then_some(Why::Arg("the generalized request's query_fn failed")),
        cancelled: s.cancelled(),
    };
    if let Some(Ext::Greq(g)) = acc.st().reqs.at_mut(i).and_then(|r| r.ext.as_deref_mut()) {
        g.result = Some(done);
    }
    Ok(())
}

/// [`settle`] for every slot of the handles `hs` (null handles skipped).
pub fn settle_all(acc: &mut Access, hs: &[abi::Request]) -> Res<()> {
    for &h in hs {
        if let Some(i) = acc.st().reqs.index(h) {
            settle(acc, i)?;
        }
    }
    Ok(())
}

/// Frees request slot `i` (complete); a generalized request's `free_fn` is set aside for
/// [`run_frees`]; a persistent collective's recipe lets go of its datatypes and operation.
pub fn discard(st: &mut State, i: usize) {
    if let Some(recipe) = st.reqs.at_mut(i).and_then(|r| r.persistent.as_mut()).and_then(|p| p.coll.take()) {
        recipe.release(st);
    }
    if let Some(r) = st.reqs.at_mut(i)
        && let Some(ext) = r.ext.take_if(|e| matches!(**e, Ext::Greq(_)))
        && let Ext::Greq(g) = *ext
    {
        FREES.with_borrow_mut(|f| f.push(g));
    }
    st.reqs.remove_at(i);
}

/// Runs the `free_fn` of the generalized requests this call freed; the first failure is the
/// call's (with `MPI_COMM_WORLD`'s error handler).
pub fn run_frees(acc: &mut Access) -> Res<()> {
    let mut first = Ok(());
    while let Some(g) = FREES.with_borrow_mut(Vec::pop) {
        let Some(f) = g.free else { continue };
        // SAFETY: the program's callback with its `extra_state` (MPI's contract).
        let code = outside(acc, || unsafe { f(g.extra) });
        if code != abi::SUCCESS && first.is_ok() {
            first = Err(Fail::new(code, Some(WORLD), Why::Arg("the generalized request's free_fn failed")));
        }
    }
    first
}

/// `MPI_Cancel` of generalized request slot `i`: calls its `cancel_fn` with whether it is
/// complete; its error code is the call's.
pub fn cancel(acc: &mut Access, i: usize) -> Res<()> {
    let Some(Ext::Greq(g)) = acc.st().reqs.at(i).and_then(|r| r.ext.as_deref()) else { return Ok(()) };
    let (Some(f), extra, complete) = (g.cancel, g.extra, g.complete) else { return Ok(()) };
    // SAFETY: the program's callback with its `extra_state` (MPI's contract).
    let code = outside(acc, || unsafe { f(extra, c_int::from(complete)) });
    if code != abi::SUCCESS {
        return Err(Fail::new(code, Some(WORLD), Why::Arg("the generalized request's cancel_fn failed")));
    }
    Ok(())
}
