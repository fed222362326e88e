//! The program's error handlers and error classes (MPI-3.1 §8.3, §8.5):
//! `MPI_Comm_create_errhandler`, `MPI_Comm_call_errhandler`, `MPI_Errhandler_free`, and
//! `MPI_Add_error_class`/`_code`/`_string`, whose codes `MPI_Error_class`/`MPI_Error_string` know.

use std::ffi::{CStr, c_char, c_int};

use crate::abi::{self, Comm as CommH, Errhandler};
use crate::error::{Fail, Res, Why, class_of};
use crate::handle::Table;
use crate::p2p::comm_at;
use crate::state::{Access, State, not_running};

/// `MPI_Comm_errhandler_function` (variadic in C; MPI passes two arguments).
pub type ErrFn = unsafe extern "C" fn(*mut CommH, *mut c_int, ...);

/// A handler made by `MPI_Comm_create_errhandler`.
#[derive(Clone, Copy, Debug)]
pub struct UserErrh {
    pub f: ErrFn,
    /// `MPI_Errhandler_free` was called while a communicator still used it.
    pub freed: bool,
}

/// The program's handlers: handles `ERRH_DIRECT + index`.
pub type Errhs = Table<UserErrh>;

/// MPICH's direct error handler handles.
pub const ERRH_DIRECT: u32 = abi::handle::DIRECT | abi::handle::ERRHANDLER;

pub const fn table() -> Errhs {
    Table::new(ERRH_DIRECT)
}

/// The first code `MPI_Add_error_class`/`MPI_Add_error_code` hand out (MPICH's dynamic codes
/// have bit 30 set too); each new class or code is the next number.
pub const FIRST_USER_CODE: c_int = 0x4000_0000;

/// The program's error classes and codes: `(code, class, string)`, a class being its own
/// class.
pub type UserCodes = Vec<(c_int, c_int, String)>;

/// True if `h` is a handler a communicator may take.
pub fn valid(st: &State, h: Errhandler) -> bool {
    predefined(h) || st.errhs.get(h).is_some_and(|e| !e.freed)
}

/// `MPI_ERRORS_ARE_FATAL`, `MPI_ERRORS_ABORT` (MPI-4.0: aborts the communicator's processes; here,
/// as `MPI_Abort` does, the job) and `MPI_ERRORS_RETURN`.
pub fn predefined(h: Errhandler) -> bool {
    h == abi::ERRORS_ARE_FATAL || h == abi::ERRORS_ABORT || h == abi::ERRORS_RETURN
}

/// The function of the program's handler `h` (none for the predefined ones or a stale handle).
pub fn user_fn(st: &State, h: Errhandler) -> Option<ErrFn> {
    st.errhs.get(h).map(|e| e.f)
}

/// Runs the program's handler function `f` for `code` on communicator handle `comm`.
///
/// Reentrancy: the handler may call MPI (`MPI_Error_string`, `MPI_Comm_get_attr`, even
/// `MPI_Comm_free` of `comm`); the callers only return `code` afterwards, relying on nothing
/// they looked up before.
///
/// # Safety
/// As for [`crate::state::outside`]: the caller holds no reference into the state.
pub unsafe fn run(f: ErrFn, comm: CommH, code: c_int) {
    let (mut c, mut k) = (comm, code);
    // SAFETY: the program's handler with the two arguments MPI-3.1 §8.3.1 gives it; no
    // reference into the state is live (the caller's contract).
    unsafe { crate::state::outside(|| f(&mut c, &mut k)) };
}

/// `MPI_Comm_create_errhandler`.
///
/// # Safety
/// `out` null or writable.
pub unsafe fn create(acc: &mut Access, f: Option<ErrFn>, out: *mut Errhandler) -> Res<()> {
    let Some(f) = f else { return Err(Fail::new(abi::ERR_ARG, None, Why::Arg("null handler function"))) };
    if out.is_null() {
        return Err(Fail::new(abi::ERR_ARG, None, Why::Arg("null output pointer")));
    }
    let h = acc.st().errhs.insert(UserErrh { f, freed: false });
    let h = h.ok_or_else(|| Fail::new(abi::ERR_INTERN, None, Why::Arg("too many error handlers")))?;
    // SAFETY: checked non-null; MPI's contract.
    unsafe { *out = h };
    Ok(())
}

/// `MPI_Errhandler_free`: the handle becomes `MPI_ERRHANDLER_NULL`; a program's handler goes
/// once no live communicator uses it (the predefined ones stay).
///
/// # Safety
/// `errh` null or valid for reads and writes.
pub unsafe fn free(acc: &mut Access, errh: *mut Errhandler) -> Res<()> {
    if errh.is_null() {
        return Err(Fail::new(abi::ERR_ARG, None, Why::Arg("null error handler pointer")));
    }
    // SAFETY: checked non-null; the caller's contract.
    let h = unsafe { *errh };
    let st = acc.st();
    if !predefined(h) {
        match st.errhs.get_mut(h) {
            Some(e) if !e.freed => e.freed = true,
            _ => return Err(Fail::new(abi::ERR_ARG, None, Why::Errhandler(h))),
        }
        forget_if_unused(st, h);
    }
    // SAFETY: as above.
    unsafe { *errh = abi::ERRHANDLER_NULL };
    Ok(())
}

/// Removes freed handler `h` if no live communicator nor open session uses it.
pub fn forget_if_unused(st: &mut State, h: Errhandler) {
    let used = st.comms.iter().any(|c| c.live && c.errh == h) || st.sessions.table.iter().any(|(_, s)| s.errh == h);
    if st.errhs.get(h).is_some_and(|e| e.freed) && !used {
        st.errhs.remove(h);
    }
}

/// `MPI_Comm_call_errhandler`: runs `comm`'s handler for `code` (`MPI_ERRORS_ARE_FATAL` ends
/// the job; `MPI_ERRORS_RETURN` does nothing).
pub fn call(acc: &mut Access, comm: CommH, code: c_int) -> Res<()> {
    let st = acc.st();
    if st.ep.is_none() {
        return Err(not_running(st.phase));
    }
    let (ci, c) = comm_at(&st.comms, comm)?;
    let h = c.errh;
    if h == abi::ERRORS_ARE_FATAL || h == abi::ERRORS_ABORT {
        st.fatal("MPI_Comm_call_errhandler", Fail::new(code, Some(ci), Why::Arg("called by the program")));
    }
    if let Some(f) = user_fn(st, h) {
        // SAFETY: this frame holds the `Access` and no borrow from it any more.
        unsafe { run(f, comm, code) };
    }
    Ok(())
}

/// `MPI_Add_error_class`.
///
/// # Safety
/// `out` null or writable.
pub unsafe fn add_class(acc: &mut Access, out: *mut c_int) -> Res<()> {
    let st = acc.st();
    if out.is_null() {
        return Err(Fail::new(abi::ERR_ARG, None, Why::Arg("null output pointer")));
    }
    let code = next_code(st);
    st.user_codes.push((code, code, String::new()));
    // SAFETY: checked non-null; MPI's contract.
    unsafe { *out = code };
    Ok(())
}

/// `MPI_Add_error_code`: a new code of `class` (a predefined class or one of the program's).
///
/// # Safety
/// `out` null or writable.
pub unsafe fn add_code(acc: &mut Access, class: c_int, out: *mut c_int) -> Res<()> {
    let st = acc.st();
    let known = class_of(class) == Some(class) || st.user_codes.iter().any(|&(c, k, _)| c == class && k == class);
    if !known {
        return Err(Fail::new(abi::ERR_ARG, None, Why::Other(format!("{class} is not an error class"))));
    }
    if out.is_null() {
        return Err(Fail::new(abi::ERR_ARG, None, Why::Arg("null output pointer")));
    }
    let code = next_code(st);
    st.user_codes.push((code, class, String::new()));
    // SAFETY: checked non-null; MPI's contract.
    unsafe { *out = code };
    Ok(())
}

/// `MPI_Add_error_string`: the string of one of the program's classes or codes.
///
/// # Safety
/// `s` a NUL-terminated string.
pub unsafe fn add_string(acc: &mut Access, code: c_int, s: *const c_char) -> Res<()> {
    if s.is_null() {
        return Err(Fail::new(abi::ERR_ARG, None, Why::Arg("null string")));
    }
    // SAFETY: MPI's contract: a C string.
    let mut v = unsafe { CStr::from_ptr(s) }.to_string_lossy().into_owned();
    while v.len() >= abi::MAX_ERROR_STRING {
        v.pop();
    }
    let st = acc.st();
    let Some(e) = st.user_codes.iter_mut().find(|e| e.0 == code) else {
        return Err(Fail::new(abi::ERR_ARG, None, Why::Other(format!("{code} is not a code of the program's"))));
    };
    e.2 = v;
    Ok(())
}

/// The next code to hand out; `MPI_LASTUSEDCODE` follows it.
fn next_code(st: &mut State) -> c_int {
    let code = st.user_codes.last().map_or(FIRST_USER_CODE, |e| e.0 + 1);
    st.attr_values[crate::attr::LASTUSEDCODE_INDEX] = code;
    code
}

/// The class and string of one of the program's codes.
pub fn user_code(st: &State, code: c_int) -> Option<(c_int, String)> {
    st.user_codes.iter().find(|e| e.0 == code).map(|e| (e.1, e.2.clone()))
}
