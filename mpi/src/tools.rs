//! The MPI tool information interface, MPI_T (MPI-4.1 §15.3), answered honestly: nemesis
//! exposes no control variable, performance variable, category, event type nor event source, so
//! every `*_get_num` is 0, every query on an index is `MPI_T_ERR_INVALID_INDEX`, on a name
//! `MPI_T_ERR_INVALID_NAME`, and every handle (none is ever handed out) is
//! `MPI_T_ERR_INVALID_HANDLE`. Performance-variable sessions exist (they hold no handle).
//!
//! MPI_T has its own life: `MPI_T_init_thread` and `MPI_T_finalize` count (they nest, and may
//! come before `MPI_Init` and after `MPI_Finalize`); every other call needs the count above 0
//! (`MPI_T_ERR_NOT_INITIALIZED`). Its errors are returned, never given to an error handler
//! (§15.3.10): they are `Why::On` failures with `MPI_ERRORS_RETURN`.

use std::ffi::{c_char, c_int, c_void};
use std::sync::Mutex;

use crate::abi;
use crate::error::{Fail, Res, Why};

/// MPI_T's error classes (MPICH's numbers).
pub const T_ERR_MEMORY: c_int = 59;
pub const T_ERR_NOT_INITIALIZED: c_int = 60;
pub const T_ERR_INVALID_INDEX: c_int = 62;
pub const T_ERR_INVALID_HANDLE: c_int = 64;
pub const T_ERR_INVALID_SESSION: c_int = 67;
pub const T_ERR_INVALID_NAME: c_int = 73;

/// An MPI_T handle (`MPI_T_enum`, `MPI_T_cvar_handle`, `MPI_T_pvar_handle`,
/// `MPI_T_pvar_session`, `MPI_T_event_registration`, `MPI_T_event_instance`: pointers in
/// MPICH's ABI).
pub type THandle = *mut c_void;

/// `MPI_T_PVAR_ALL_HANDLES`'s value: the address of its data symbol (`crate::symbols`).
fn all_handles() -> usize {
    crate::symbols::MPI_T_PVAR_ALL_HANDLES.addr()
}

/// MPI_T's state.
struct Tools {
    /// `MPI_T_init_thread` calls not yet finalized.
    inits: u32,
    /// Live performance-variable sessions (their handles: distinct non-null addresses).
    sessions: Vec<usize>,
    /// The next session's handle.
    next: usize,
}

static TOOLS: Mutex<Tools> = Mutex::new(Tools { inits: 0, sessions: Vec::new(), next: 0x1000 });

fn tools() -> std::sync::MutexGuard<'static, Tools> {
    TOOLS.lock().unwrap_or_else(|e| e.into_inner())
}

/// An MPI_T failure: returned as it is.
#[cold]
fn t_err(code: c_int, why: &'static str) -> Fail {
    Fail::new(code, None, Why::On { errh: abi::ERRORS_RETURN, handle: 0, why: Box::new(Why::Arg(why)) })
}

/// MPI_T is initialized.
fn ready() -> Res<()> {
    if tools().inits == 0 {
        return Err(t_err(T_ERR_NOT_INITIALIZED, "MPI_T is not initialized"));
    }
    Ok(())
}

fn no_index() -> Res<()> {
    ready()?;
    Err(t_err(T_ERR_INVALID_INDEX, "nemesis exposes no such MPI_T variable, category, event or source"))
}

fn no_name() -> Res<()> {
    ready()?;
    Err(t_err(T_ERR_INVALID_NAME, "nemesis exposes no MPI_T variable, category or event by that name"))
}

fn no_handle() -> Res<()> {
    ready()?;
    Err(t_err(T_ERR_INVALID_HANDLE, "nemesis hands out no MPI_T handle of this kind"))
}

/// Writes `v` through `out` (MPI_T: a null pointer is `MPI_T_ERR_INVALID`).
///
/// # Safety
/// `out` null or writable.
unsafe fn put<T>(out: *mut T, v: T) -> Res<()> {
    if out.is_null() {
        return Err(t_err(74, "null output pointer"));
    }
    // SAFETY: checked non-null; the caller's contract.
    unsafe { out.write(v) };
    Ok(())
}

/// `MPI_T_init_thread`: MPI_T's level is the one asked for (nemesis's lock covers MPI_T too).
///
/// # Safety
/// `provided` null or writable.
pub unsafe fn init_thread(required: c_int, provided: *mut c_int) -> Res<()> {
    // SAFETY: the caller's contract.
    unsafe { put(provided, required.clamp(abi::THREAD_SINGLE, abi::THREAD_MULTIPLE))? };
    tools().inits += 1;
    Ok(())
}

/// `MPI_T_finalize`.
pub fn finalize() -> Res<()> {
    let mut t = tools();
    if t.inits == 0 {
        return Err(t_err(T_ERR_NOT_INITIALIZED, "MPI_T_finalize without MPI_T_init_thread"));
    }
    t.inits -= 1;
    if t.inits == 0 {
        t.sessions.clear();
    }
    Ok(())
}

/// Every `*_get_num` (control and performance variables, categories, events, sources) and
/// `MPI_T_category_changed`: 0.
///
/// # Safety
/// `n` null or writable.
pub unsafe fn get_num(n: *mut c_int) -> Res<()> {
    ready()?;
    // SAFETY: the caller's contract.
    unsafe { put(n, 0) }
}

/// The queries on an index (`*_get_info`, `MPI_T_category_get_cvars`... `source_get_timestamp`,
/// `cvar_handle_alloc`, `event_handle_alloc`): no such index.
pub fn by_index(_index: c_int) -> Res<()> {
    no_index()
}

/// `MPI_T_cvar_get_index`, `MPI_T_pvar_get_index`, `MPI_T_category_get_index`,
/// `MPI_T_event_get_index`: no such name (checked to be a string).
pub fn by_name(name: *const c_char) -> Res<()> {
    ready()?;
    if name.is_null() {
        return Err(t_err(74, "null name"));
    }
    no_name()
}

/// The calls on a handle nemesis never hands out (control variables, enumerations, event
/// registrations and instances).
pub fn by_handle(_handle: THandle) -> Res<()> {
    no_handle()
}

/// `MPI_T_pvar_session_create`.
///
/// # Safety
/// `session` null or writable.
pub unsafe fn pvar_session_create(session: *mut THandle) -> Res<()> {
    ready()?;
    let mut t = tools();
    let h = t.next;
    t.next += 0x10;
    // SAFETY: the caller's contract.
    unsafe { put(session, h as THandle)? };
    t.sessions.push(h);
    Ok(())
}

/// `MPI_T_pvar_session_free`: the handle becomes `MPI_T_PVAR_SESSION_NULL`.
///
/// # Safety
/// `session` null or valid for reads and writes.
pub unsafe fn pvar_session_free(session: *mut THandle) -> Res<()> {
    ready()?;
    if session.is_null() {
        return Err(t_err(T_ERR_INVALID_SESSION, "null session pointer"));
    }
    // SAFETY: checked non-null; the caller's contract.
    let h = unsafe { *session } as usize;
    let mut t = tools();
    let Some(i) = t.sessions.iter().position(|&s| s == h) else {
        return Err(t_err(T_ERR_INVALID_SESSION, "not a performance-variable session"));
    };
    t.sessions.swap_remove(i);
    // SAFETY: as above.
    unsafe { *session = std::ptr::null_mut() };
    Ok(())
}

/// A call on performance variable `handle` of `session`: the session must be live; no handle
/// is (`MPI_T_PVAR_ALL_HANDLES` names none, which `all` allows: start, stop, reset).
pub fn pvar(session: THandle, handle: THandle, all: bool) -> Res<()> {
    ready()?;
    if !tools().sessions.contains(&(session as usize)) {
        return Err(t_err(T_ERR_INVALID_SESSION, "not a performance-variable session"));
    }
    if all && handle as usize == all_handles() {
        return Ok(());
    }
    no_handle()
}

/// `MPI_T_pvar_handle_alloc`: the session must be live; no index is.
pub fn pvar_handle_alloc(session: THandle, _index: c_int) -> Res<()> {
    ready()?;
    if !tools().sessions.contains(&(session as usize)) {
        return Err(t_err(T_ERR_INVALID_SESSION, "not a performance-variable session"));
    }
    no_index()
}

/// `MPI_T_pvar_handle_free`.
///
/// # Safety
/// `handle` null or readable.
pub unsafe fn pvar_handle_free(session: THandle, handle: *mut THandle) -> Res<()> {
    let h = match handle.is_null() {
        true => std::ptr::null_mut(),
        // SAFETY: checked non-null; the caller's contract.
        false => unsafe { *handle },
    };
    pvar(session, h, false)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn init_counts_and_sessions() {
        // One test touches the global state: the steps in order.
        assert_eq!(finalize().unwrap_err().code, T_ERR_NOT_INITIALIZED);
        assert_eq!(by_index(0).unwrap_err().code, T_ERR_NOT_INITIALIZED);
        let mut p = -1;
        // SAFETY: a local.
        unsafe { init_thread(abi::THREAD_MULTIPLE, &mut p) }.unwrap();
        assert_eq!(p, abi::THREAD_MULTIPLE);
        // SAFETY: as above.
        unsafe { init_thread(abi::THREAD_SINGLE, &mut p) }.unwrap();
        let mut n = -1;
        // SAFETY: as above.
        unsafe { get_num(&mut n) }.unwrap();
        assert_eq!(n, 0);
        assert_eq!(by_index(0).unwrap_err().code, T_ERR_INVALID_INDEX);
        assert_eq!(by_name(c"x".as_ptr()).unwrap_err().code, T_ERR_INVALID_NAME);
        assert_eq!(by_handle(std::ptr::null_mut()).unwrap_err().code, T_ERR_INVALID_HANDLE);
        let mut s: THandle = std::ptr::null_mut();
        // SAFETY: as above.
        unsafe { pvar_session_create(&mut s) }.unwrap();
        assert!(!s.is_null());
        pvar(s, all_handles() as THandle, true).unwrap();
        assert_eq!(pvar(s, all_handles() as THandle, false).unwrap_err().code, T_ERR_INVALID_HANDLE);
        assert_eq!(pvar_handle_alloc(s, 0).unwrap_err().code, T_ERR_INVALID_INDEX);
        let mut gone = s;
        // SAFETY: as above.
        unsafe { pvar_session_free(&mut gone) }.unwrap();
        assert!(gone.is_null());
        assert_eq!(pvar(s, all_handles() as THandle, true).unwrap_err().code, T_ERR_INVALID_SESSION);
        finalize().unwrap();
        finalize().unwrap();
        assert_eq!(finalize().unwrap_err().code, T_ERR_NOT_INITIALIZED);
    }
}
