//! Non-blocking collectives under fault tolerance: schedules that advance only at deterministic
//! points of the program.
//!
//! HydEE (the Endpoint's fault tolerance) needs every process to send the same messages in the
//! same order when it re-executes after a rollback: each message's date is its place in the
//! process's sends, and its stamp (per-destination sequence number and digest) is checked against
//! what the receivers recorded (`nemesis_ft`'s `process/stamps.rs`). A schedule that advances
//! inside whatever request the program happens to test (the invariant of `nbc.rs` without fault
//! tolerance) posts its later rounds' sends where its earlier rounds happened to have completed:
//! at timing-dependent places among the program's other sends, so that a re-execution would be
//! refused (`SendDeterminismViolated`) or, without stamps, would be silently wrong.
//!
//! With fault tolerance on (the Endpoint's `ft_enabled`), a schedule therefore moves only at
//! points of the program's own order:
//! - the call that starts it posts its first round ([`super::submit`]);
//! - any call that tests, waits for, frees or inspects a request (`MPI_Test*`, `MPI_Wait*`,
//!   `MPI_Request_free`, `MPI_Request_get_status*`, `MPI_Cancel`: `p2p::complete`'s
//!   `check_running`, and a wait for a collective request) completes every schedule in flight,
//!   one at a time, in the order the process started them, each waiting only for its own
//!   transfers ([`complete_in_order`]). Elsewhere nothing moves: not `Sched::advance` called on
//!   one request, not `advance_colls` in the pauses of other waits (their number depends on
//!   timing), not a communicator creation waiting for a context window (an `MPI_Comm_idup` in
//!   flight moves at the next completion call instead).
//!
//! Invariants: between two such points a process sends nothing of a schedule's; at a point the
//! sends of the schedules come in their start order, each schedule's rounds in its order, each
//! round's steps in the compiled order, and the payloads are the same (a round's reductions run in
//! its steps' order, after all its transfers). The deliveries of a round's receives may come in
//! any order, but no send happens between them and the engine's phase after a round is the
//! maximum over its deliveries, the same in any order. So the whole send sequence of a process
//! (dates, per-destination sequence numbers and digests) depends only on its program and data.
//!
//! What it costs: no overlap (a test of an unfinished collective blocks until it completes), and
//! progress of a collective is guaranteed only by completing a request — which MPI permits: a
//! non-blocking collective need not progress while a process computes or blocks in a
//! point-to-point call. A program whose processes start collectives on different communicators in
//! different orders and complete them crosswise, each waiting for the other's second collective
//! before its first, waits forever here (each completes in its own start order).

use std::cell::Cell;
use std::sync::atomic::{AtomicU64, Ordering};

use crate::p2p::complete::advance_coll_user;
use crate::request::{Req, State as ReqState};
use crate::state::{Access, State};

thread_local! {
    /// Set while [`complete_in_order`] drives a schedule: `Sched::advance` of an ordered schedule
    /// does nothing otherwise.
    static DRIVING: Cell<bool> = const { Cell::new(false) };
}

/// The process's count of non-blocking collectives started (their start order).
static STARTED: AtomicU64 = AtomicU64::new(0);

/// The next start number.
pub(super) fn next_start() -> u64 {
    // ORDERING: a counter; schedules are started under the library lock, one at a time.
    STARTED.fetch_add(1, Ordering::Relaxed)
}

/// True while [`complete_in_order`] drives a schedule on this thread.
pub(super) fn driving() -> bool {
    DRIVING.with(Cell::get)
}

/// True if schedules must advance at deterministic points only: fault tolerance is on.
pub fn is_ordered(st: &State) -> bool {
    st.ep.as_ref().is_some_and(|ep| ep.ft_enabled())
}

/// The schedule in flight started first, and its slot.
fn first(st: &mut State) -> Option<usize> {
    let mut best: Option<(u64, usize)> = None;
    for &i in &st.colls {
        if let Some(Req { state: ReqState::Coll(s), .. }) = st.reqs.at(i) {
            let n = s.started;
            if best.is_none_or(|b| n < b.0) {
                best = Some((n, i));
            }
        }
    }
    best.map(|b| b.1)
}

/// Completes every schedule in flight, in start order, each waiting for its own transfers only
/// (see the module documentation). A schedule that fails completes with its error (reported by
/// its request); an error of the library itself leaves the rest in flight.
pub fn complete_in_order(acc: &mut Access) {
    // Not from inside a schedule being driven (its wait pauses, and a pause advances schedules).
    if driving() {
        return;
    }
    while let Some(i) = first(acc.st()) {
        DRIVING.with(|d| d.set(true));
        let res = drive(acc, i);
        DRIVING.with(|d| d.set(false));
        let colls = &mut acc.st().colls;
        if let Some(p) = colls.iter().position(|&x| x == i) {
            colls.swap_remove(p);
        }
        if res.is_err() {
            return;
        }
    }
}

/// Advances schedule slot `i` until it completes.
fn drive(acc: &mut Access, i: usize) -> crate::error::Res<()> {
    let mut spins = 0;
    loop {
        let Some(pending) = advance_coll_user(acc, i)? else { return Ok(()) };
        if pending.is_empty() || acc.threaded() {
            // Nothing of its own in flight (an agreement's round that retries) or other threads
            // may take its transfers: look again after a pause.
            acc.pause(&mut spins);
            if !acc.threaded() {
                acc.ep()?.progress().map_err(|e| crate::error::Fail::endpoint(0, e))?;
            }
            continue;
        }
        let (j, res) = acc.ep()?.wait_any(&pending).map_err(|e| crate::error::Fail::endpoint(0, e))?;
        if let Some(Req { state: ReqState::Coll(s), .. }) = acc.st().reqs.at_mut(i) {
            s.took(pending[j], res);
        }
    }
}
