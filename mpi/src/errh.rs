//! The program's error handlers and error classes (MPI-4.1 §9.3, §9.5): handlers of the four
//! kinds (`MPI_Comm_`/`MPI_File_`/`MPI_Win_`/`MPI_Session_create_errhandler`), the handler
//! `MPI_FILE_NULL` holds (the one `MPI_File_open` gives a new file, and the one errors of file
//! calls without a file go to), `MPI_Errhandler_free`, and `MPI_Add_error_class`/`_code`/
//! `_string`, whose codes `MPI_Error_class`/`MPI_Error_string` know.
//!
//! **Lifetimes** (MPI-4.1 §9.3). A program's handler lives while the program holds a handle to
//! it or an object uses it: `handles` counts the handles handed out (one by its creation, one by
//! every `MPI_*_get_errhandler` that returns it) and `MPI_Errhandler_free` takes one back; the
//! objects using it (live communicators, open sessions, `MPI_FILE_NULL`) are found by looking
//! ([`forget_if_unused`] runs whenever one lets go of it). The predefined handlers are never
//! freed: freeing one (as a handle from `MPI_Comm_get_errhandler` may be) only resets the handle.
//!
//! **Kinds.** A handler serves the objects of its kind only (a communicator's on a file is
//! `MPI_ERR_ARG`, as in MPICH); the predefined ones serve every kind. A file handler's function
//! takes an `MPI_File *` (a pointer in MPICH's ABI), the others an `int` handle's address.

use std::ffi::{CStr, c_char, c_int};

pub mod objects;

use crate::abi::{self, Comm as CommH, Errhandler, FileErrFn};
use crate::error::{Fail, Res, Why, class_of};
use crate::handle::Table;
use crate::p2p::comm_at;
use crate::state::{Access, State, not_running};

/// `MPI_Comm_errhandler_function` (variadic in C; MPI passes two arguments); also the window's
/// and the session's, whose handles are `int`s too.
pub type ErrFn = unsafe extern "C" fn(*mut CommH, *mut c_int, ...);

/// What a handler is for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    Comm,
    File,
    Win,
    Session,
}

impl Kind {
    fn name(self) -> &'static str {
        match self {
            Kind::Comm => "a communicator",
            Kind::File => "a file",
            Kind::Win => "a window",
            Kind::Session => "a session",
        }
    }
}

/// A handler's function.
#[derive(Clone, Copy, Debug)]
pub enum Fun {
    /// Of a communicator, window or session (an `int` handle).
    Int(ErrFn),
    /// Of a file (an `MPI_File`, a pointer).
    File(FileErrFn),
}

/// A handler made by one of the `MPI_*_create_errhandler` calls.
#[derive(Clone, Copy, Debug)]
pub struct UserErrh {
    pub f: Fun,
    pub kind: Kind,
    /// Handles the program holds (see the module's doc); 0: it goes once no object uses it.
    pub handles: u32,
}

/// The program's handlers (handles `ERRH_DIRECT + index`) and `MPI_FILE_NULL`'s.
#[derive(Debug)]
pub struct Errhs {
    table: Table<UserErrh>,
    /// The handler of `MPI_FILE_NULL` (MPI-4.1 §14.7: `MPI_ERRORS_RETURN` at first).
    pub file_default: Errhandler,
}

/// MPICH's direct error handler handles.
pub const ERRH_DIRECT: u32 = abi::handle::DIRECT | abi::handle::ERRHANDLER;

pub const fn table() -> Errhs {
    Errhs { table: Table::new(ERRH_DIRECT), file_default: abi::ERRORS_RETURN }
}

impl Errhs {
    /// The program's handlers by handle (a checkpoint saves them: `crate::ft::image`).
    pub fn objects(&self) -> &Table<UserErrh> {
        &self.table
    }

    /// The same, to restore them.
    pub fn objects_mut(&mut self) -> &mut Table<UserErrh> {
        &mut self.table
    }
}

/// The first code `MPI_Add_error_class`/`MPI_Add_error_code` hand out (MPICH's dynamic codes
/// have bit 30 set too); each new class or code is the next number.
pub const FIRST_USER_CODE: c_int = 0x4000_0000;

/// The program's error classes and codes: `(code, class, string)`, a class being its own
/// class.
pub type UserCodes = Vec<(c_int, c_int, String)>;

/// `MPI_ERRORS_ARE_FATAL`, `MPI_ERRORS_ABORT` (MPI-4.0: aborts the communicator's processes; here,
/// as `MPI_Abort` does, the job) and `MPI_ERRORS_RETURN`.
pub fn predefined(h: Errhandler) -> bool {
    h == abi::ERRORS_ARE_FATAL || h == abi::ERRORS_ABORT || h == abi::ERRORS_RETURN
}

/// Checks that an object of `kind` may take handler `h`: a predefined one, or one of the
/// program's of that kind that it still holds a handle to. Both failures are `MPI_ERR_ARG`, as
/// in MPICH 4.0 (which has no `MPI_ERR_ERRHANDLER`, MPI-4.1's class for the first).
pub fn check(st: &State, h: Errhandler, kind: Kind) -> Res<()> {
    if predefined(h) {
        return Ok(());
    }
    match st.errhs.table.get(h) {
        Some(e) if e.handles > 0 && e.kind == kind => Ok(()),
        Some(e) if e.handles > 0 => Err(Fail::new(
            abi::ERR_ARG,
            None,
            Why::Other(format!("{h:#x} is an error handler for {}, not {}", e.kind.name(), kind.name())),
        )),
        _ => Err(Fail::new(abi::ERR_ARG, None, Why::Errhandler(h))),
    }
}

/// Handler `h` as a new handle for the program (`MPI_*_get_errhandler`: the program frees it).
pub fn hand_out(st: &mut State, h: Errhandler) -> Errhandler {
    if let Some(e) = st.errhs.table.get_mut(h) {
        e.handles += 1;
    }
    h
}

/// The function of the program's handler `h` for an object with an `int` handle (none for the
/// predefined ones, a stale handle or a file's).
pub fn user_fn(st: &State, h: Errhandler) -> Option<ErrFn> {
    match st.errhs.table.get(h)?.f {
        Fun::Int(f) => Some(f),
        Fun::File(_) => None,
    }
}

/// A program's handler to run for a failure, and the object it is told about.
#[derive(Clone, Copy, Debug)]
pub enum Invoke {
    /// A communicator's, window's or session's, with the object's handle.
    Int(ErrFn, c_int),
    /// A file's, for `MPI_FILE_NULL` (no file can be open yet).
    FileNull(FileErrFn),
}

/// What handler `h` runs for a failure on the object with handle `obj` (none for the
/// predefined handlers).
pub fn invocation(st: &State, h: Errhandler, obj: c_int) -> Option<Invoke> {
    Some(match st.errhs.table.get(h)?.f {
        Fun::Int(f) => Invoke::Int(f, obj),
        Fun::File(f) => Invoke::FileNull(f),
    })
}

/// Runs `i` for `code`.
///
/// # Safety
/// As for [`run`].
pub unsafe fn invoke(i: Invoke, code: c_int) {
    match i {
        // SAFETY: the caller's contract.
        Invoke::Int(f, obj) => unsafe { run(f, obj, code) },
        Invoke::FileNull(f) => {
            let (mut fh, mut k): (abi::File, c_int) = (std::ptr::null_mut(), code);
            // SAFETY: the program's file handler with the two arguments MPI-4.1 §9.3.3 gives
            // it; no reference into the state is live (the caller's contract).
            unsafe { crate::state::outside(|| f(&mut fh, &mut k)) };
        }
    }
}

/// Runs the program's handler function `f` for `code` on the object with handle `obj`.
///
/// Reentrancy: the handler may call MPI (`MPI_Error_string`, `MPI_Comm_get_attr`, even
/// `MPI_Comm_free` of `comm`); the callers only return `code` afterwards, relying on nothing
/// they looked up before.
///
/// # Safety
/// As for [`crate::state::outside`]: the caller holds no reference into the state.
pub unsafe fn run(f: ErrFn, obj: c_int, code: c_int) {
    let (mut c, mut k) = (obj, code);
    // SAFETY: the program's handler with the two arguments MPI-4.1 §9.3 gives it; no reference
    // into the state is live (the caller's contract).
    unsafe { crate::state::outside(|| f(&mut c, &mut k)) };
}

/// `MPI_Comm_create_errhandler`.
///
/// # Safety
/// `out` null or writable.
pub unsafe fn create(acc: &mut Access, f: Option<ErrFn>, out: *mut Errhandler) -> Res<()> {
    // SAFETY: the caller's contract.
    unsafe { create_kind(acc, f, Kind::Comm, out) }
}

/// `MPI_Win_create_errhandler` (`kind` `Win`), `MPI_Session_create_errhandler` (`Session`).
///
/// # Safety
/// `out` null or writable.
pub unsafe fn create_kind(acc: &mut Access, f: Option<ErrFn>, kind: Kind, out: *mut Errhandler) -> Res<()> {
    let Some(f) = f else { return Err(Fail::new(abi::ERR_ARG, None, Why::Arg("null handler function"))) };
    // SAFETY: the caller's contract.
    unsafe { insert(acc, Fun::Int(f), kind, out) }
}

/// `MPI_File_create_errhandler`.
///
/// # Safety
/// `out` null or writable.
pub unsafe fn create_file(acc: &mut Access, f: Option<FileErrFn>, out: *mut Errhandler) -> Res<()> {
    let Some(f) = f else { return Err(Fail::new(abi::ERR_ARG, None, Why::Arg("null handler function"))) };
    // SAFETY: the caller's contract.
    unsafe { insert(acc, Fun::File(f), Kind::File, out) }
}

/// Stores a new handler (one handle held by the program).
///
/// # Safety
/// `out` null or writable.
unsafe fn insert(acc: &mut Access, f: Fun, kind: Kind, out: *mut Errhandler) -> Res<()> {
    if out.is_null() {
        return Err(Fail::new(abi::ERR_ARG, None, Why::Arg("null output pointer")));
    }
    let h = acc.st().errhs.table.insert(UserErrh { f, kind, handles: 1 });
    let h = h.ok_or_else(|| Fail::new(abi::ERR_INTERN, None, Why::Arg("too many error handlers")))?;
    // SAFETY: checked non-null; MPI's contract.
    unsafe { *out = h };
    Ok(())
}

/// `MPI_Errhandler_free`: the handle becomes `MPI_ERRHANDLER_NULL`; a program's handler goes
/// once the program holds no handle to it and no object uses it (the predefined ones stay).
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
        match st.errhs.table.get_mut(h) {
            Some(e) if e.handles > 0 => e.handles -= 1,
            _ => return Err(Fail::new(abi::ERR_ARG, None, Why::Errhandler(h))),
        }
        forget_if_unused(st, h);
    }
    // SAFETY: as above.
    unsafe { *errh = abi::ERRHANDLER_NULL };
    Ok(())
}

/// Removes handler `h` if the program holds no handle to it and no live communicator, open
/// session, window nor `MPI_FILE_NULL` uses it.
pub fn forget_if_unused(st: &mut State, h: Errhandler) {
    if st.errhs.table.get(h).is_none_or(|e| e.handles > 0) {
        return;
    }
    let used = st.errhs.file_default == h
        || st.comms.iter().any(|c| c.live && c.errh == h)
        || st.sessions.table.iter().any(|(_, s)| s.errh == h)
        || st.wins.table.iter().any(|(_, w)| w.errh == h);
    if !used {
        st.errhs.table.remove(h);
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
