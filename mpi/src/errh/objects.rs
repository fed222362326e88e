//! The error-handler calls on files and windows (MPI-4.1 §9.3.2, §9.3.3):
//! `MPI_File_set_errhandler`, `MPI_File_get_errhandler` and `MPI_File_call_errhandler` on
//! `MPI_FILE_NULL` (the handler `MPI_File_open` gives a new file, and the one errors of file
//! calls without a file go to), and the window calls on windows (`crate::win`; a window's
//! handler is `MPI_ERRORS_ARE_FATAL` until set).
//!
//! I/O is not implemented yet: no file can exist, so these calls on any other file report
//! `MPI_ERR_UNSUPPORTED_OPERATION` (as the other file calls do). The errors of the file calls go
//! to `MPI_FILE_NULL`'s handler, as MPI-4.1 §9.3.3 says for file errors with no file; those of
//! the window calls to the window's handler, or, for an invalid window (`MPI_WIN_NULL`:
//! `MPI_ERR_WIN`), to `MPI_COMM_WORLD`'s.

use std::ffi::c_int;

use super::{Kind, check, forget_if_unused, hand_out, invocation, invoke};
use crate::abi::{self, Errhandler};
use crate::error::{Fail, Res, Why};
use crate::state::Access;

/// A failure of a file call, for `MPI_FILE_NULL`'s handler.
#[cold]
fn on_file_null(acc: &mut Access, f: Fail) -> Fail {
    let errh = acc.st().errhs.file_default;
    Fail::new(f.code, None, Why::On { errh, handle: 0, why: Box::new(f.why) })
}

/// Runs `f` if `fh` is `MPI_FILE_NULL` (no other file can be open yet); its failures go to
/// `MPI_FILE_NULL`'s handler.
fn on_null_file<T>(acc: &mut Access, fh: abi::File, f: impl FnOnce(&mut Access) -> Res<T>) -> Res<T> {
    let r = if fh.is_null() {
        f(acc)
    } else {
        Err(Fail::new(abi::ERR_UNSUPPORTED_OPERATION, None, Why::Arg("files (MPI-IO) are not implemented yet")))
    };
    r.map_err(|e| on_file_null(acc, e))
}

/// `MPI_File_set_errhandler` on `MPI_FILE_NULL`: the handler of the files opened from now on.
pub fn file_set(acc: &mut Access, fh: abi::File, errh: Errhandler) -> Res<()> {
    on_null_file(acc, fh, |acc| {
        let st = acc.st();
        check(st, errh, Kind::File)?;
        let old = std::mem::replace(&mut st.errhs.file_default, errh);
        forget_if_unused(st, old);
        Ok(())
    })
}

/// `MPI_File_get_errhandler` on `MPI_FILE_NULL`: a new handle to its handler.
///
/// # Safety
/// `out` null or writable.
pub unsafe fn file_get(acc: &mut Access, fh: abi::File, out: *mut Errhandler) -> Res<()> {
    on_null_file(acc, fh, |acc| {
        if out.is_null() {
            return Err(Fail::new(abi::ERR_ARG, None, Why::Arg("null output pointer")));
        }
        let st = acc.st();
        let h = hand_out(st, st.errhs.file_default);
        // SAFETY: checked non-null; MPI's contract.
        unsafe { *out = h };
        Ok(())
    })
}

/// `MPI_File_call_errhandler` on `MPI_FILE_NULL`: runs its handler for `code`
/// (`MPI_ERRORS_ARE_FATAL` and `MPI_ERRORS_ABORT` end the job; `MPI_ERRORS_RETURN` does
/// nothing).
pub fn file_call(acc: &mut Access, fh: abi::File, code: c_int) -> Res<()> {
    on_null_file(acc, fh, |acc| {
        let st = acc.st();
        let h = st.errhs.file_default;
        if h == abi::ERRORS_ARE_FATAL || h == abi::ERRORS_ABORT {
            st.fatal("MPI_File_call_errhandler", Fail::new(code, None, Why::Arg("called by the program")));
        }
        if let Some(i) = invocation(st, h, 0) {
            // SAFETY: this frame holds the `Access` and no borrow from it any more.
            unsafe { invoke(i, code) };
        }
        Ok(())
    })
}

/// `MPI_Win_set_errhandler`: the window first, then the handler (a window's or predefined).
pub fn win_set(acc: &mut Access, win: abi::Win, errh: Errhandler) -> Res<()> {
    crate::win::with(acc, win, |acc| {
        let st = acc.st();
        check(st, errh, Kind::Win)?;
        let w = crate::win::win_mut(st, win)?;
        let old = std::mem::replace(&mut w.errh, errh);
        forget_if_unused(st, old);
        Ok(())
    })
}

/// `MPI_Win_get_errhandler`: a new handle to the window's handler.
///
/// # Safety
/// `out` null or writable.
pub unsafe fn win_get(acc: &mut Access, win: abi::Win, out: *mut Errhandler) -> Res<()> {
    crate::win::with(acc, win, |acc| {
        if out.is_null() {
            return Err(Fail::new(abi::ERR_ARG, None, Why::Arg("null output pointer")));
        }
        let st = acc.st();
        let h = crate::win::win(st, win)?.errh;
        let h = hand_out(st, h);
        // SAFETY: checked non-null; MPI's contract.
        unsafe { *out = h };
        Ok(())
    })
}

/// `MPI_Win_call_errhandler`: runs the window's handler for `code` (`MPI_ERRORS_ARE_FATAL` and
/// `MPI_ERRORS_ABORT` end the job; `MPI_ERRORS_RETURN` does nothing).
pub fn win_call(acc: &mut Access, win: abi::Win, code: c_int) -> Res<()> {
    crate::win::lookup(acc, win)?;
    let st = acc.st();
    let h = crate::win::win(st, win)?.errh;
    if h == abi::ERRORS_ARE_FATAL || h == abi::ERRORS_ABORT {
        st.fatal("MPI_Win_call_errhandler", Fail::new(code, None, Why::Arg("called by the program")));
    }
    if let Some(i) = invocation(st, h, win) {
        // SAFETY: this frame holds the `Access` and no borrow from it any more.
        unsafe { invoke(i, code) };
    }
    Ok(())
}

/// `MPI_Win_get_name` (`MPI_WIN_NULL`'s is its own, MPI-4.1 §12.2.8).
///
/// # Safety
/// `name` null or writable for `MPI_MAX_OBJECT_NAME` bytes, `len` null or writable.
pub unsafe fn win_name(acc: &mut Access, win: abi::Win, name: *mut std::ffi::c_char, len: *mut c_int) -> Res<()> {
    // SAFETY: the caller's contract.
    unsafe { crate::win::attrs::get_name(acc, win, name, len) }
}
