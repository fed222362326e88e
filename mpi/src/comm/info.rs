//! Communicator hints (MPI-4.1 §7.4.4): `MPI_Comm_set_info`, `MPI_Comm_get_info`,
//! `MPI_Comm_dup_with_info`, `MPI_Comm_idup_with_info`, and the hints a new communicator takes.
//!
//! nemesis knows the assertions MPI-4.1 defines for communicators (`mpi_assert_no_any_tag`,
//! `mpi_assert_no_any_source`, `mpi_assert_exact_length`, `mpi_assert_allow_overtaking`) and
//! acts on none; it keeps their values as given and ignores every other key, as MPICH does:
//! `MPI_Comm_get_info` returns the four, `false` unless set.
//!
//! **Which hints a new communicator has.** `MPI_Comm_dup` and `MPI_Comm_idup` copy the
//! parent's (MPI-4.1 §7.4.2: "the hints are copied"); `MPI_Comm_dup_with_info`,
//! `MPI_Comm_idup_with_info` and `MPI_Comm_split_type` take those of their info argument (as
//! MPICH); the other creations start from the defaults. An idup's communicator is made when its
//! request completes (`made_by_idup`): the info of `MPI_Comm_idup_with_info` waits for it in
//! `Hints::idup`, keyed by the call's `newcomm` pointer (which MPI keeps writable until the
//! request completes, so no two idups in flight share it), and is dropped if the idup fails.
//!
//! **Where hints live.** A side table (`Sessions::comm_hints`) keyed by the communicator's `nbc`
//! counter, an `Arc` every communicator gets fresh and its copies share: an entry whose key no
//! longer upgrades belongs to a communicator that is gone, and is dropped at the next insertion.
//! A communicator without an entry has the defaults only.

use std::sync::atomic::AtomicU32;
use std::sync::{Arc, Weak};

use super::{Comm, index_of, null_out};
use crate::abi;
use crate::error::{Fail, Res, Why};
use crate::info::InfoObj;
use crate::p2p::comm_at;
use crate::state::{Access, State, not_running};

/// The hints of the communicators that were given some, and those waiting for an idup.
#[derive(Debug, Default)]
pub struct Hints {
    kept: Vec<(Weak<AtomicU32>, InfoObj)>,
    /// `MPI_Comm_idup_with_info`'s hints by the call's `newcomm` pointer (as an address).
    idup: Vec<(usize, InfoObj)>,
}

impl Hints {
    pub const fn new() -> Hints {
        Hints { kept: Vec::new(), idup: Vec::new() }
    }
}

/// The assertions MPI-4.1 defines for communicators, with their default.
pub const ASSERTIONS: [&str; 4] =
    ["mpi_assert_no_any_tag", "mpi_assert_no_any_source", "mpi_assert_exact_length", "mpi_assert_allow_overtaking"];

/// The hints kept for communicator `c`.
pub(crate) fn hints_of<'a>(st: &'a State, c: &Comm) -> Option<&'a InfoObj> {
    let key = Arc::downgrade(&c.nbc);
    st.sessions.comm_hints.kept.iter().find(|(k, _)| k.ptr_eq(&key)).map(|(_, v)| v)
}

/// Sets the hints nemesis knows among `given` on communicator `c` (replacing the values of keys
/// it had, keeping the others unless `replace`).
pub fn set_hints(st: &mut State, c: &Comm, given: InfoObj, replace: bool) {
    let hints = &mut st.sessions.comm_hints.kept;
    hints.retain(|(k, _)| k.strong_count() > 0);
    let key = Arc::downgrade(&c.nbc);
    let obj = match hints.iter_mut().find(|(k, _)| k.ptr_eq(&key)) {
        Some((_, v)) => v,
        None => {
            hints.push((key, Vec::new()));
            &mut hints.last_mut().expect("just pushed").1
        }
    };
    if replace {
        obj.clear();
    }
    for (k, v) in given.into_iter().filter(|(k, _)| ASSERTIONS.contains(&k.as_str())) {
        match obj.iter_mut().find(|(a, _)| *a == k) {
            Some(e) => e.1 = v,
            None => obj.push((k, v)),
        }
    }
}

/// New communicator `h` takes `given` as its hints (`None`: those of communicator `from`).
pub(super) fn inherit(st: &mut State, h: abi::Comm, given: Option<InfoObj>, from: &Comm) {
    let Some(obj) = given.or_else(|| hints_of(st, from).cloned()) else { return };
    if let Some(c) = st.comms.get(index_of(h)).cloned() {
        set_hints(st, &c, obj, true);
    }
}

/// The hints of an `MPI_Comm_idup_with_info` whose output is `out`, taken (`None` for a plain
/// `MPI_Comm_idup`): at its completion, or its failure.
pub fn idup_hints(st: &mut State, out: *mut abi::Comm) -> Option<InfoObj> {
    let hints = &mut st.sessions.comm_hints.idup;
    hints.iter().position(|(p, _)| *p == out as usize).map(|k| hints.remove(k).1)
}

/// The hints communicator `h`, made by the idup of `parent` whose output is `out`, takes: its
/// info's if it was an `MPI_Comm_idup_with_info`, else the parent's.
pub(super) fn on_idup(st: &mut State, h: abi::Comm, out: *mut abi::Comm, parent: &Comm) {
    let given = idup_hints(st, out);
    inherit(st, h, given, parent);
}

/// The contents of info argument `info` (`MPI_INFO_NULL`: none).
fn given(st: &State, info: abi::Info) -> Res<InfoObj> {
    if info == abi::INFO_NULL {
        return Ok(Vec::new());
    }
    crate::info::contents(st, info)
}

/// `MPI_Comm_set_info`.
pub fn set_info(acc: &mut Access, comm: abi::Comm, info: abi::Info) -> Res<()> {
    let st = acc.st();
    if st.ep.is_none() {
        return Err(not_running(st.phase));
    }
    let (ci, c) = comm_at(&st.comms, comm)?;
    let c = c.clone();
    if info == abi::INFO_NULL {
        return Err(Fail::new(abi::ERR_INFO, Some(ci), Why::Arg("MPI_INFO_NULL is not an info object")));
    }
    let obj = crate::info::contents(st, info).map_err(|e| e.on(ci))?;
    set_hints(st, &c, obj, false);
    Ok(())
}

/// `MPI_Comm_get_info`: a new info object with the hints in force.
///
/// # Safety
/// `info_used` null or writable.
pub unsafe fn get_info(acc: &mut Access, comm: abi::Comm, info_used: *mut abi::Info) -> Res<()> {
    let st = acc.st();
    if st.ep.is_none() {
        return Err(not_running(st.phase));
    }
    let (ci, c) = comm_at(&st.comms, comm)?;
    if info_used.is_null() {
        return Err(null_out(Some(ci)));
    }
    let set = hints_of(st, c).cloned().unwrap_or_default();
    let mut obj: InfoObj = ASSERTIONS
        .iter()
        .filter(|a| !set.iter().any(|(k, _)| k == *a))
        .map(|a| (a.to_string(), "false".to_string()))
        .collect();
    obj.extend(set);
    // SAFETY: the caller's contract.
    unsafe { crate::info::hand_out_info(st, obj, info_used) }.map_err(|e| e.on(ci))
}

/// `MPI_Comm_dup_with_info`: `MPI_Comm_dup` whose copy takes the hints of `info` instead of
/// `comm`'s.
///
/// # Safety
/// `newcomm` null or writable.
pub unsafe fn dup_with_info(acc: &mut Access, comm: abi::Comm, info: abi::Info, newcomm: *mut abi::Comm) -> Res<()> {
    let obj = given(acc.st(), info)?;
    // SAFETY: the caller's contract.
    unsafe { super::dup(acc, comm, newcomm)? };
    // SAFETY: `dup` wrote it.
    let h = unsafe { *newcomm };
    given_to(acc.st(), h, obj);
    Ok(())
}

/// Communicator `h` (if it is one) has the hints nemesis knows among `obj`, and no other.
pub(super) fn given_to(st: &mut State, h: abi::Comm, obj: InfoObj) {
    if let Some(c) = st.comms.get(index_of(h)).filter(|c| c.live).cloned() {
        set_hints(st, &c, obj, true);
    }
}

/// `MPI_Comm_idup_with_info`: `MPI_Comm_idup` (`crate::coll::nbc::idup`) whose communicator,
/// made when the request completes, takes the hints of `info` (see the module's doc).
///
/// # Safety
/// `newcomm` and `request` null or writable until the request completes.
pub unsafe fn idup_with_info(
    acc: &mut Access,
    comm: abi::Comm,
    info: abi::Info,
    newcomm: *mut abi::Comm,
    request: *mut abi::Request,
) -> Res<()> {
    let st = acc.st();
    let obj = given(st, info)?;
    // Waiting before the idup starts: it may complete at once. A stale entry for the same
    // output (an idup whose request was freed before completing) is replaced.
    let _ = idup_hints(st, newcomm);
    st.sessions.comm_hints.idup.push((newcomm as usize, obj));
    // SAFETY: the caller's contract.
    let r = unsafe { crate::coll::nbc::idup(acc, comm, newcomm, request) };
    if r.is_err() {
        let _ = idup_hints(acc.st(), newcomm);
    }
    r
}
