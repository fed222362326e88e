//! The Sessions model (MPI-4.1 §11.3): `MPI_Session_init`/`finalize`, process sets, their
//! groups and info, and the sessions' error handlers; beside it the world model's phase
//! (`MPI_Init`..`MPI_Finalize`), which the two models share the transport with.
//!
//! **One transport, two models.** The process has one Endpoint whichever model starts it: the
//! first of `MPI_Init` and `MPI_Session_init` brings it up (`env::bring_up`), the other finds it
//! running. An Endpoint starts once per process, so the transport stays up until the world model
//! ends with no session open (`MPI_Finalize`, or the last `MPI_Session_finalize` after it), or
//! until the process exits when only sessions used it (an exit hook: the world model may still
//! start after the last session ends). A session cannot start once the transport is down. `State::phase` is the transport's
//! (`Running` while it is up); [`Sessions::world`] is the world model's, which
//! `MPI_Initialized`/`MPI_Finalized` report. `MPI_COMM_WORLD`'s and `MPI_COMM_SELF`'s table
//! slots are dead while the world model is not running.
//!
//! **Process sets.** Every session sees `mpi://WORLD` (the job), `mpi://SELF` (this process)
//! and `nemesis://NODE` (the job ranks on this process's node: a name every process shares,
//! naming a different set on each node). Communicators come from a set's group through
//! `MPI_Comm_create_from_group` (`crate::comm::from_group`).
//!
//! **Errors.** A failed session call reports through the session's error handler
//! ([`on_session`]); a session starts with the handler `MPI_Session_init` is given.

use std::ffi::{CStr, c_char, c_int};
use std::sync::{Arc, Weak};

use crate::abi::{self, Errhandler, Group, Info};
use crate::error::{Fail, Res, Why};
use crate::handle::Table;
use crate::info::InfoObj;
use crate::state::{Access, Phase, State};

/// `MPI_Session` (an `int` handle, as MPICH's).
pub type SessionH = c_int;

/// The handle kind of sessions (MPICH's: `MPI_SESSION_NULL` is `0x38000000`).
pub const SESSION_KIND: u32 = 0xe << 26;
/// Handles of the table's entries.
pub const SESSION_DIRECT: u32 = abi::handle::DIRECT | SESSION_KIND;
/// `MPI_SESSION_NULL`.
pub const SESSION_NULL: SessionH = 0x3800_0000;

/// `MPI_MAX_PSET_NAME_LEN` (MPICH's), the NUL included.
pub const MAX_PSET_NAME_LEN: usize = 256;
/// `MPI_MAX_STRINGTAG_LEN` (MPICH's), the NUL included.
pub const MAX_STRINGTAG_LEN: usize = 256;

/// The process sets every session sees, in `MPI_Session_get_nth_pset`'s order.
pub const PSETS: [&str; 3] = ["mpi://WORLD", "mpi://SELF", "nemesis://NODE"];

/// One open session.
#[derive(Clone, Debug)]
pub struct Session {
    /// Its error handler.
    pub errh: Errhandler,
    /// The thread level it asked for (`thread_level` in its info; `MPI_THREAD_SINGLE` without).
    pub level: c_int,
    /// The info it was started with (`MPI_Session_get_info` adds `thread_level`).
    pub info: InfoObj,
}

/// The world model's phase and the sessions.
#[derive(Debug)]
pub struct Sessions {
    /// `MPI_Init` .. `MPI_Finalize`.
    pub world: Phase,
    /// The open sessions: handles `SESSION_DIRECT + index`.
    pub table: Table<Session>,
    /// Hints of communicators (`crate::comm::info`).
    pub comm_hints: crate::comm::info::Hints,
    /// The exit hook that takes down a transport only sessions used is registered.
    pub exit_hook: bool,
    /// The groups of process sets (`MPI_Group_from_session_pset`), with their session: a
    /// communicator created from one belongs to the session. A group is known by its members'
    /// allocation, which the `Weak` keeps from reuse (a freed handle may name another group).
    pub pset_groups: Vec<(Weak<[u32]>, SessionH)>,
}

impl Sessions {
    pub const fn new() -> Sessions {
        Sessions {
            world: Phase::Before,
            table: Table::new(SESSION_DIRECT),
            comm_hints: crate::comm::info::Hints::new(),
            exit_hook: false,
            pset_groups: Vec::new(),
        }
    }
}

impl Default for Sessions {
    fn default() -> Self {
        Sessions::new()
    }
}

#[cold]
fn null_arg(what: &'static str) -> Fail {
    Fail::new(abi::ERR_ARG, None, Why::Arg(what))
}

#[cold]
fn bad_session(h: SessionH) -> Fail {
    Fail::new(abi::ERR_SESSION, None, Why::Other(format!("{h:#x} is not an open session")))
}

/// The thread level a `thread_level` value names (MPI-4.1 §11.3.1), if it names one.
pub fn level_named(v: &str) -> Option<c_int> {
    match v.trim() {
        "MPI_THREAD_SINGLE" => Some(abi::THREAD_SINGLE),
        "MPI_THREAD_FUNNELED" => Some(abi::THREAD_FUNNELED),
        "MPI_THREAD_SERIALIZED" => Some(abi::THREAD_SERIALIZED),
        "MPI_THREAD_MULTIPLE" => Some(abi::THREAD_MULTIPLE),
        _ => None,
    }
}

/// The name of thread level `l`.
pub fn level_name(l: c_int) -> &'static str {
    match l {
        abi::THREAD_SINGLE => "MPI_THREAD_SINGLE",
        abi::THREAD_FUNNELED => "MPI_THREAD_FUNNELED",
        abi::THREAD_SERIALIZED => "MPI_THREAD_SERIALIZED",
        _ => "MPI_THREAD_MULTIPLE",
    }
}

/// Runs `f`, the body of a call on session `h`; its failure goes to that session's handler.
pub fn on_session<T>(acc: &mut Access, h: SessionH, f: impl FnOnce(&mut Access) -> Res<T>) -> Res<T> {
    f(acc).map_err(|e| match acc.st().sessions.table.get(h) {
        Some(s) if !matches!(e.why, Why::On { .. }) => {
            let errh = s.errh;
            Fail::new(e.code, e.comm, Why::On { errh, handle: h, why: Box::new(e.why) })
        }
        _ => e,
    })
}

/// The open session `h`.
pub(crate) fn session(st: &State, h: SessionH) -> Res<&Session> {
    st.sessions.table.get(h).ok_or_else(|| bad_session(h))
}

/// A C string argument of at most `max` bytes.
///
/// # Safety
/// `s` null or NUL-terminated.
pub(crate) unsafe fn c_string(s: *const c_char, max: usize, what: &'static str) -> Res<String> {
    if s.is_null() {
        return Err(null_arg(what));
    }
    // SAFETY: the caller's contract.
    let v = unsafe { CStr::from_ptr(s) }.to_string_lossy().into_owned();
    if v.len() >= max {
        return Err(Fail::new(abi::ERR_ARG, None, Why::Other(format!("{what} longer than {} bytes", max - 1))));
    }
    Ok(v)
}

/// Writes `v` through `out`.
///
/// # Safety
/// `out` null or writable.
unsafe fn put<T>(out: *mut T, v: T) -> Res<()> {
    if out.is_null() {
        return Err(null_arg("null output pointer"));
    }
    // SAFETY: checked non-null; the caller's contract.
    unsafe { out.write(v) };
    Ok(())
}

/// `MPI_Session_init`: starts the transport if neither model has, at the level the info's
/// `thread_level` names (higher than the one in force: the process's level rises).
///
/// # Safety
/// `session` null or writable.
pub unsafe fn init(acc: &mut Access, info: Info, errh: Errhandler, session: *mut SessionH) -> Res<()> {
    if session.is_null() {
        return Err(null_arg("null session pointer"));
    }
    let st = acc.st();
    let obj = if info == abi::INFO_NULL { Vec::new() } else { crate::info::contents(st, info)? };
    let level = match obj.iter().find(|(k, _)| k == "thread_level") {
        Some((_, v)) => level_named(v).ok_or_else(|| {
            Fail::new(abi::ERR_INFO_VALUE, None, Why::Other(format!("thread_level {v:?} names no thread level")))
        })?,
        None => abi::THREAD_SINGLE,
    };
    let errh = if errh == abi::ERRHANDLER_NULL { abi::ERRORS_ARE_FATAL } else { errh };
    crate::errh::check(st, errh, crate::errh::Kind::Session)?;
    if st.ep.is_none() {
        crate::env::bring_up(acc, level)?;
        if acc.st().sessions.world == Phase::Before && !acc.st().sessions.exit_hook {
            // SAFETY: registers a plain function; `at_exit` touches only the state, through an
            // `Access`, as any call does.
            acc.st().sessions.exit_hook = unsafe { libc::atexit(at_exit) } == 0;
        }
    } else {
        crate::env::raise_level(acc, level);
    }
    let st = acc.st();
    let h = st.sessions.table.insert(Session { errh, level, info: obj });
    let h = h.ok_or_else(|| Fail::new(abi::ERR_INTERN, None, Why::Arg("too many sessions")))?;
    // SAFETY: checked non-null; MPI's contract.
    unsafe { *session = h };
    Ok(())
}

/// `MPI_Session_finalize`: the handle becomes `MPI_SESSION_NULL`; the last user of the
/// transport (no session left, the world model not running) takes it down, which synchronises
/// with the other processes of the job as `MPI_Finalize` does.
///
/// # Safety
/// `session` null or valid for reads and writes.
pub unsafe fn finalize(acc: &mut Access, session: *mut SessionH) -> Res<()> {
    if session.is_null() {
        return Err(null_arg("null session pointer"));
    }
    // SAFETY: checked non-null; the caller's contract.
    let h = unsafe { *session };
    crate::session::session(acc.st(), h)?;
    // The messages in its buffer are sent first; the buffer ends with it.
    crate::p2p::bsend::session_end(acc, h)?;
    let st = acc.st();
    let gone = st.sessions.table.remove(h).ok_or_else(|| bad_session(h))?;
    crate::errh::forget_if_unused(st, gone.errh);
    // SAFETY: as above.
    unsafe { *session = SESSION_NULL };
    if st.sessions.table.is_empty() && st.sessions.world == Phase::After {
        crate::env::finalize(acc)?;
    }
    Ok(())
}

/// At the process's exit: takes the transport down if sessions alone used it and all were
/// finalized (the world model may start later, and a new Endpoint cannot: so the last
/// `MPI_Session_finalize` of a process that never called `MPI_Init` leaves it up).
extern "C" fn at_exit() {
    let mut acc = Access::enter();
    let st = acc.st();
    if st.ep.is_some() && st.sessions.world == Phase::Before && st.sessions.table.is_empty() {
        let _ = crate::env::finalize(&mut acc);
    }
}

/// The job ranks of process set `name` (`None`: no such set).
fn pset_members(st: &State, name: &str) -> Option<Vec<u32>> {
    let ep = st.ep.as_ref()?;
    let me = ep.rank();
    let world = &st.world_ranks;
    match name {
        // This process's world: the job, or its part of the universe when `nemesis-run
        // --universe-size` made room for spawned processes (`State::world_ranks`).
        "mpi://WORLD" => Some(world.clone()),
        "mpi://SELF" => Some(vec![me]),
        "nemesis://NODE" => {
            let node_of = |r: u32| st.node_of_job.get(r as usize).copied().unwrap_or(0);
            Some(world.iter().copied().filter(|&r| node_of(r) == node_of(me)).collect())
        }
        _ => None,
    }
}

#[cold]
fn no_pset(name: &str) -> Fail {
    Fail::new(abi::ERR_ARG, None, Why::Other(format!("no process set named {name:?}")))
}

/// `MPI_Session_get_num_psets`.
///
/// # Safety
/// `n` null or writable.
pub unsafe fn get_num_psets(acc: &mut Access, h: SessionH, _info: Info, n: *mut c_int) -> Res<()> {
    session(acc.st(), h)?;
    // SAFETY: the caller's contract.
    unsafe { put(n, PSETS.len() as c_int) }
}

/// `MPI_Session_get_nth_pset`: with `*pset_len` 0, the length the name needs (its NUL
/// included) into `*pset_len`; otherwise the name, cut to `*pset_len - 1` bytes, and its NUL.
///
/// # Safety
/// `pset_len` valid for reads and writes; `name` writable for `*pset_len` bytes.
pub unsafe fn get_nth_pset(
    acc: &mut Access,
    h: SessionH,
    _info: Info,
    n: c_int,
    pset_len: *mut c_int,
    name: *mut c_char,
) -> Res<()> {
    session(acc.st(), h)?;
    let Some(p) = usize::try_from(n).ok().and_then(|i| PSETS.get(i)) else {
        return Err(Fail::new(abi::ERR_ARG, None, Why::Other(format!("no process set number {n}"))));
    };
    if pset_len.is_null() {
        return Err(null_arg("null pset_len"));
    }
    // SAFETY: checked non-null; the caller's contract.
    let cap = unsafe { *pset_len };
    if cap < 0 {
        return Err(Fail::new(abi::ERR_ARG, None, Why::Arg("negative pset_len")));
    }
    if cap == 0 {
        // SAFETY: as above.
        unsafe { *pset_len = p.len() as c_int + 1 };
        return Ok(());
    }
    // SAFETY: the caller's contract: `cap` writable bytes.
    unsafe { crate::env::put_str(p, name, cap as usize, std::ptr::null_mut()) }
}

/// `MPI_Session_get_pset_info`: `mpi_size`, the set's size.
///
/// # Safety
/// `name` NUL-terminated; `info` null or writable.
pub unsafe fn get_pset_info(acc: &mut Access, h: SessionH, name: *const c_char, info: *mut Info) -> Res<()> {
    // SAFETY: the caller's contract.
    let name = unsafe { c_string(name, MAX_PSET_NAME_LEN, "pset name")? };
    let st = acc.st();
    session(st, h)?;
    let members = pset_members(st, &name).ok_or_else(|| no_pset(&name))?;
    let obj = vec![("mpi_size".to_string(), members.len().to_string())];
    // SAFETY: the caller's contract.
    unsafe { crate::info::hand_out_info(st, obj, info) }
}

/// `MPI_Session_get_info`: the info the session started with, and its `thread_level`.
///
/// # Safety
/// `info` null or writable.
pub unsafe fn get_info(acc: &mut Access, h: SessionH, info: *mut Info) -> Res<()> {
    let st = acc.st();
    let s = session(st, h)?;
    let mut obj: InfoObj = s.info.iter().filter(|(k, _)| k != "thread_level").cloned().collect();
    obj.push(("thread_level".into(), level_name(s.level.max(st.provided)).into()));
    // SAFETY: the caller's contract.
    unsafe { crate::info::hand_out_info(st, obj, info) }
}

/// `MPI_Group_from_session_pset`.
///
/// # Safety
/// `name` NUL-terminated; `group` null or writable.
pub unsafe fn group_from_pset(acc: &mut Access, h: SessionH, name: *const c_char, group: *mut Group) -> Res<()> {
    // SAFETY: the caller's contract.
    let name = unsafe { c_string(name, MAX_PSET_NAME_LEN, "pset name")? };
    let st = acc.st();
    session(st, h)?;
    let members = pset_members(st, &name).ok_or_else(|| no_pset(&name))?;
    // SAFETY: the caller's contract.
    unsafe { crate::group::hand_out(st, members, group)? };
    // SAFETY: written by `hand_out`.
    let g = unsafe { *group };
    if let Some(m) = st.groups.get(g) {
        let m = Arc::downgrade(m);
        st.sessions.pset_groups.retain(|(w, _)| w.strong_count() > 0);
        st.sessions.pset_groups.push((m, h));
    }
    Ok(())
}

/// The session group `g` came from (`MPI_Group_from_session_pset`), if any.
pub(crate) fn of_group(st: &State, g: Group) -> Option<SessionH> {
    let m = st.groups.get(g)?;
    st.sessions.pset_groups.iter().find(|(w, _)| std::ptr::addr_eq(w.as_ptr(), Arc::as_ptr(m))).map(|&(_, s)| s)
}

/// `MPI_Session_set_errhandler`.
pub fn set_errhandler(acc: &mut Access, h: SessionH, errh: Errhandler) -> Res<()> {
    let st = acc.st();
    session(st, h)?;
    crate::errh::check(st, errh, crate::errh::Kind::Session)?;
    if let Some(s) = st.sessions.table.get_mut(h) {
        let old = std::mem::replace(&mut s.errh, errh);
        crate::errh::forget_if_unused(st, old);
    }
    Ok(())
}

/// `MPI_Session_get_errhandler`: a new handle to the handler, which the program frees.
///
/// # Safety
/// `errh` null or writable.
pub unsafe fn get_errhandler(acc: &mut Access, h: SessionH, errh: *mut Errhandler) -> Res<()> {
    let st = acc.st();
    let e = session(st, h)?.errh;
    if errh.is_null() {
        return Err(null_arg("null output pointer"));
    }
    let e = crate::errh::hand_out(st, e);
    // SAFETY: the caller's contract.
    unsafe { put(errh, e) }
}

/// `MPI_Session_call_errhandler`: runs the session's handler for `code`
/// (`MPI_ERRORS_ARE_FATAL` and `MPI_ERRORS_ABORT` end the job; `MPI_ERRORS_RETURN` does nothing).
pub fn call_errhandler(acc: &mut Access, h: SessionH, code: c_int) -> Res<()> {
    let st = acc.st();
    let errh = session(st, h)?.errh;
    match errh {
        abi::ERRORS_RETURN => {}
        abi::ERRORS_ARE_FATAL | abi::ERRORS_ABORT => {
            st.fatal("MPI_Session_call_errhandler", Fail::new(code, None, Why::Arg("called by the program")))
        }
        _ => {
            if let Some(f) = crate::errh::user_fn(st, errh) {
                // SAFETY: this frame holds the `Access` and no borrow from it any more; the
                // handler may call MPI (the session's calls look it up again).
                unsafe { crate::errh::run(f, h, code) };
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn thread_levels_by_name() {
        for l in [abi::THREAD_SINGLE, abi::THREAD_FUNNELED, abi::THREAD_SERIALIZED, abi::THREAD_MULTIPLE] {
            assert_eq!(level_named(level_name(l)), Some(l));
        }
        assert_eq!(level_named("MPI_THREAD_PARALLEL"), None);
    }

    #[test]
    fn session_handles_are_mpichs() {
        assert_eq!(SESSION_NULL as u32 & (0xf << 26), SESSION_KIND);
        let mut t: Table<u8> = Table::new(SESSION_DIRECT);
        assert_eq!(t.insert(1), Some(0xb800_0000u32 as c_int));
    }
}
