//! Request-based operations (`MPI_Rput`, `MPI_Rget`, `MPI_Raccumulate`, `MPI_Rget_accumulate`)
//! on the netmod's RMA: their requests are the remote path's (`remote::Pending`, an id of the
//! window's origin), completed here.
//!
//! An operation without a result (`Rput`, `Raccumulate`) completes locally as soon as its data
//! is packed (what `MPI_Wait` on it means: MPI-4.1 §12.3.5), so its request is done when made.
//! One with a result (`Rget`, `Rget_accumulate`) completes when every RMA operation to its
//! target did ([`poll`]: the netmod's count per peer, without waiting) and its data is unpacked,
//! or at the next flush of that target ([`super::settle`]), whichever comes first.
//!
//! Invariant: an id in [`super::Ofi::reqs`] names a target with operations pending (its
//! buffers in the window's `Ofi`); it moves to the origin's `finished` when they settle.

use super::super::remote::Remote;
use super::super::rma::Transfer;
use crate::abi;
use crate::state::State;

/// Records request-based `x`'s request, if it is one: done now if `local` (no result), else
/// when its target settles.
pub fn record(r: &mut Remote, x: &Transfer, local: bool) {
    if !x.request {
        return;
    }
    let id = r.origin.next_id();
    if local {
        r.origin.finished.push((id, abi::SUCCESS));
    } else if let Some(o) = r.ofi.as_deref_mut() {
        o.reqs.push((id, x.target));
    }
    r.origin.request = Some(id);
}

/// Settles, without waiting, the targets of window `h` with requests pending whose RMA
/// operations all completed.
pub fn poll(st: &mut State, h: abi::Win) {
    let State { ep, wins, .. } = st;
    let (Some(ep), Some(w)) = (ep.as_mut(), wins.table.get_mut(h)) else { return };
    let Some(r) = w.remote.as_deref_mut() else { return };
    let Some(o) = r.ofi.as_deref() else { return };
    let mut ts: Vec<u32> = o.reqs.iter().map(|&(_, t)| t).collect();
    ts.dedup();
    for t in ts {
        let code = match ep.rma_flushed(w.targets[t as usize].job) {
            Ok(false) => continue,
            Ok(true) => abi::SUCCESS,
            Err(e) => crate::error::code_of(&e),
        };
        super::settle(r, &[t], code);
    }
}
