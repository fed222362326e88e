//! Error classes and codes: their names and texts (`MPI_Error_string`), the class of each code
//! (`MPI_Error_class`), the mapping of Endpoint errors onto them, [`Fail`], what a failed call
//! carries to the error handler (a communicator's, or with [`Why::On`] a session's or none), and
//! the removal of the program's classes, codes and strings (MPI-4.1 `MPI_Remove_error_*`).
//!
//! Every code this library returns is a class. A dead peer is the extension class
//! `MPIX_ERR_PROC_FAILED` (the name MPI's fault-tolerance proposal uses), so that a program can
//! tell it from every other failure.

use std::ffi::c_int;
use std::fmt;

use crate::abi;

/// Code, name and text of every class the library defines (MPICH's numbering: 54 is unused; the
/// tool-interface classes 59–74 and 78 are defined, never returned).
pub const CLASSES: [(c_int, &str, &str); 85] = [
    (abi::SUCCESS, "MPI_SUCCESS", "no error"),
    (abi::ERR_BUFFER, "MPI_ERR_BUFFER", "invalid buffer pointer"),
    (abi::ERR_COUNT, "MPI_ERR_COUNT", "invalid count argument"),
    (abi::ERR_TYPE, "MPI_ERR_TYPE", "invalid datatype"),
    (abi::ERR_TAG, "MPI_ERR_TAG", "invalid tag"),
    (abi::ERR_COMM, "MPI_ERR_COMM", "invalid communicator"),
    (abi::ERR_RANK, "MPI_ERR_RANK", "invalid rank"),
    (abi::ERR_ROOT, "MPI_ERR_ROOT", "invalid root"),
    (abi::ERR_GROUP, "MPI_ERR_GROUP", "invalid group"),
    (abi::ERR_OP, "MPI_ERR_OP", "invalid operation"),
    (abi::ERR_TOPOLOGY, "MPI_ERR_TOPOLOGY", "invalid topology"),
    (abi::ERR_DIMS, "MPI_ERR_DIMS", "invalid dimension argument"),
    (abi::ERR_ARG, "MPI_ERR_ARG", "invalid argument"),
    (abi::ERR_UNKNOWN, "MPI_ERR_UNKNOWN", "unknown error"),
    (abi::ERR_TRUNCATE, "MPI_ERR_TRUNCATE", "message truncated on receive"),
    (abi::ERR_OTHER, "MPI_ERR_OTHER", "known error not in this list"),
    (abi::ERR_INTERN, "MPI_ERR_INTERN", "internal error"),
    (abi::ERR_IN_STATUS, "MPI_ERR_IN_STATUS", "error code is in status"),
    (abi::ERR_PENDING, "MPI_ERR_PENDING", "pending request"),
    (abi::ERR_REQUEST, "MPI_ERR_REQUEST", "invalid request"),
    (abi::ERR_ACCESS, "MPI_ERR_ACCESS", "permission denied"),
    (abi::ERR_AMODE, "MPI_ERR_AMODE", "invalid access mode"),
    (abi::ERR_BAD_FILE, "MPI_ERR_BAD_FILE", "invalid file name"),
    (abi::ERR_CONVERSION, "MPI_ERR_CONVERSION", "data conversion error"),
    (abi::ERR_DUP_DATAREP, "MPI_ERR_DUP_DATAREP", "data representation already defined"),
    (abi::ERR_FILE_EXISTS, "MPI_ERR_FILE_EXISTS", "file exists"),
    (abi::ERR_FILE_IN_USE, "MPI_ERR_FILE_IN_USE", "file in use"),
    (abi::ERR_FILE, "MPI_ERR_FILE", "invalid file handle"),
    (abi::ERR_INFO, "MPI_ERR_INFO", "invalid info object"),
    (abi::ERR_INFO_KEY, "MPI_ERR_INFO_KEY", "invalid info key"),
    (abi::ERR_INFO_VALUE, "MPI_ERR_INFO_VALUE", "invalid info value"),
    (abi::ERR_INFO_NOKEY, "MPI_ERR_INFO_NOKEY", "info key not defined"),
    (abi::ERR_IO, "MPI_ERR_IO", "I/O error"),
    (abi::ERR_NAME, "MPI_ERR_NAME", "invalid service name"),
    (abi::ERR_NO_MEM, "MPI_ERR_NO_MEM", "out of memory"),
    (abi::ERR_NOT_SAME, "MPI_ERR_NOT_SAME", "collective argument not identical on all processes"),
    (abi::ERR_NO_SPACE, "MPI_ERR_NO_SPACE", "not enough space"),
    (abi::ERR_NO_SUCH_FILE, "MPI_ERR_NO_SUCH_FILE", "file does not exist"),
    (abi::ERR_PORT, "MPI_ERR_PORT", "invalid port name"),
    (abi::ERR_QUOTA, "MPI_ERR_QUOTA", "quota exceeded"),
    (abi::ERR_READ_ONLY, "MPI_ERR_READ_ONLY", "read-only file or file system"),
    (abi::ERR_SERVICE, "MPI_ERR_SERVICE", "invalid service name"),
    (abi::ERR_SPAWN, "MPI_ERR_SPAWN", "error in spawning processes"),
    (abi::ERR_UNSUPPORTED_DATAREP, "MPI_ERR_UNSUPPORTED_DATAREP", "unsupported data representation"),
    (abi::ERR_UNSUPPORTED_OPERATION, "MPI_ERR_UNSUPPORTED_OPERATION", "unsupported operation"),
    (abi::ERR_WIN, "MPI_ERR_WIN", "invalid window"),
    (abi::ERR_BASE, "MPI_ERR_BASE", "invalid base argument"),
    (abi::ERR_LOCKTYPE, "MPI_ERR_LOCKTYPE", "invalid lock type"),
    (abi::ERR_KEYVAL, "MPI_ERR_KEYVAL", "invalid keyval"),
    (abi::ERR_RMA_CONFLICT, "MPI_ERR_RMA_CONFLICT", "conflicting accesses to a window"),
    (abi::ERR_RMA_SYNC, "MPI_ERR_RMA_SYNC", "wrong synchronisation of RMA calls"),
    (abi::ERR_SIZE, "MPI_ERR_SIZE", "invalid size argument"),
    (abi::ERR_DISP, "MPI_ERR_DISP", "invalid displacement argument"),
    (abi::ERR_ASSERT, "MPI_ERR_ASSERT", "invalid assert argument"),
    (abi::ERR_RMA_RANGE, "MPI_ERR_RMA_RANGE", "target memory outside the window"),
    (abi::ERR_RMA_ATTACH, "MPI_ERR_RMA_ATTACH", "memory cannot be attached"),
    (abi::ERR_RMA_SHARED, "MPI_ERR_RMA_SHARED", "memory cannot be shared"),
    (abi::ERR_RMA_FLAVOR, "MPI_ERR_RMA_FLAVOR", "wrong window flavor"),
    (59, "MPI_T_ERR_MEMORY", "tool interface: out of memory"),
    (60, "MPI_T_ERR_NOT_INITIALIZED", "tool interface: not initialized"),
    (61, "MPI_T_ERR_CANNOT_INIT", "tool interface: cannot be initialized now"),
    (62, "MPI_T_ERR_INVALID_INDEX", "tool interface: invalid index"),
    (63, "MPI_T_ERR_INVALID_ITEM", "tool interface: invalid item"),
    (64, "MPI_T_ERR_INVALID_HANDLE", "tool interface: invalid handle"),
    (65, "MPI_T_ERR_OUT_OF_HANDLES", "tool interface: out of handles"),
    (66, "MPI_T_ERR_OUT_OF_SESSIONS", "tool interface: out of sessions"),
    (67, "MPI_T_ERR_INVALID_SESSION", "tool interface: invalid session"),
    (68, "MPI_T_ERR_CVAR_SET_NOT_NOW", "tool interface: control variable cannot be set now"),
    (69, "MPI_T_ERR_CVAR_SET_NEVER", "tool interface: control variable can never be set"),
    (70, "MPI_T_ERR_PVAR_NO_STARTSTOP", "tool interface: performance variable cannot be started or stopped"),
    (71, "MPI_T_ERR_PVAR_NO_WRITE", "tool interface: performance variable cannot be written"),
    (72, "MPI_T_ERR_PVAR_NO_ATOMIC", "tool interface: performance variable cannot be read and written atomically"),
    (73, "MPI_T_ERR_INVALID_NAME", "tool interface: invalid name"),
    (74, "MPI_T_ERR_INVALID", "tool interface: invalid use"),
    (abi::ERR_SESSION, "MPI_ERR_SESSION", "invalid session"),
    (abi::ERR_PROC_ABORTED, "MPI_ERR_PROC_ABORTED", "communication with an aborted process"),
    (abi::ERR_VALUE_TOO_LARGE, "MPI_ERR_VALUE_TOO_LARGE", "value too large to store"),
    (78, "MPI_T_ERR_NOT_SUPPORTED", "tool interface: not supported"),
    (abi::ERRX_PROC_FAILED, "MPIX_ERR_PROC_FAILED", "a process taking part in the operation died"),
    (abi::ERRX_PROC_FAILED_PENDING, "MPIX_ERR_PROC_FAILED_PENDING", "a failure left this request pending"),
    (abi::ERRX_REVOKED, "MPIX_ERR_REVOKED", "the communication object was revoked"),
    (
        abi::ERRX_SEND_DETERMINISM,
        "MPIX_ERR_SEND_DETERMINISM",
        "the program is not send-deterministic: a re-executed send differs from the first execution's",
    ),
    (abi::ERRX_LOG_EXHAUSTED, "MPIX_ERR_LOG_EXHAUSTED", "the fault-tolerance sender log is full"),
    (
        abi::ERRX_NOT_RESTORED,
        "MPIX_ERR_NOT_RESTORED",
        "a restarted process communicated before MPIX_Checkpoint_restore",
    ),
    (abi::ERR_LASTCODE, "MPI_ERR_LASTCODE", "last error code"),
];

fn entry(code: c_int) -> Option<&'static (c_int, &'static str, &'static str)> {
    CLASSES.iter().find(|e| e.0 == code && code != abi::ERR_LASTCODE)
}

/// The class of error code `code`, if it is one this library defines.
pub fn class_of(code: c_int) -> Option<c_int> {
    entry(code).map(|e| e.0)
}

/// The name of code `code` (`MPI_ERR_RANK`...).
pub fn name_of(code: c_int) -> &'static str {
    entry(code).map_or("(unknown error code)", |e| e.1)
}

/// The text `MPI_Error_string` gives for `code`; for a fault-tolerance class, with the last
/// failure of that class this process met (which names the ranks, the message's sequence...).
pub fn string_of(code: c_int) -> String {
    match entry(code) {
        Some((_, name, text)) => match last_ft(code) {
            Some(detail) => format!("{name}: {text}: {detail}"),
            None => format!("{name}: {text}"),
        },
        None => format!("unknown error code {code}"),
    }
}

/// The last failure of each fault-tolerance class (`MPIX_ERR_SEND_DETERMINISM`...), as
/// [`code_of`] met it: `MPI_Error_string` names it.
static LAST_FT: std::sync::Mutex<Vec<(c_int, String)>> = std::sync::Mutex::new(Vec::new());

fn last_ft(code: c_int) -> Option<String> {
    let last = LAST_FT.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
    last.iter().find(|e| e.0 == code).map(|e| e.1.clone())
}

/// The class of a fault-tolerance failure: the ones a program can provoke have their own
/// (remembered for `MPI_Error_string`); a spill-file failure is `MPI_ERR_IO`.
#[cold]
fn ft_code(e: &nemesis_ft::Error) -> c_int {
    use nemesis_ft::Error as F;
    let code = match e {
        F::SendDeterminismViolated { .. } => abi::ERRX_SEND_DETERMINISM,
        F::LogExhausted { .. } => abi::ERRX_LOG_EXHAUSTED,
        F::Io(_) => return abi::ERR_IO,
        _ => return abi::ERR_OTHER,
    };
    let mut last = LAST_FT.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
    last.retain(|x| x.0 != code);
    last.push((code, e.to_string()));
    code
}

/// The code for an Endpoint error.
pub fn code_of(e: &nemesis::Error) -> c_int {
    use nemesis::Error as E;
    match e {
        E::Ft(f) => ft_code(f),
        E::InvalidRank { .. } => abi::ERR_RANK,
        E::InvalidTag(_) => abi::ERR_TAG,
        E::Truncated { .. } => abi::ERR_TRUNCATE,
        E::PeerDied { .. } => abi::ERRX_PROC_FAILED,
        // Longer than any buffer can be: not reachable through `count × datatype size`.
        E::TooLarge { .. } => abi::ERR_COUNT,
        E::InvalidRequest => abi::ERR_REQUEST,
        _ => abi::ERR_OTHER,
    }
}

/// Why a call failed, in terms the user can act on (formatted only when the error is reported).
#[derive(Debug)]
pub enum Why {
    /// An Endpoint error.
    Endpoint(nemesis::Error),
    /// A handle that names no live communicator.
    Comm(c_int),
    /// A handle that names no predefined datatype.
    Type(c_int),
    /// A negative count.
    Count(c_int),
    /// A null buffer with a positive count.
    Buffer,
    /// A rank outside the communicator.
    Rank { rank: c_int, size: u32 },
    /// A root outside the communicator.
    Root { root: c_int, size: u32 },
    /// A negative tag on a send (or below `MPI_ANY_TAG` on a receive).
    Tag(c_int),
    /// A handle that names no operation, or one the standard does not define on the datatype.
    Op { op: c_int, dt: c_int },
    /// A handle that names no live request.
    Request(c_int),
    /// A handle that names no error handler (null, freed, or garbage).
    Errhandler(c_int),
    /// A collective's arguments disagree between ranks (`count × size` differs).
    Mismatch { expected: usize, got: usize },
    /// Some other invalid argument.
    Arg(&'static str),
    /// `MPI_Waitall`/`MPI_Testall`: the first failed request's index and code.
    InStatus { index: usize, code: c_int },
    /// A failure that an object other than a communicator handles (a session): its error
    /// handler, its handle, and why.
    On { errh: abi::Errhandler, handle: c_int, why: Box<Why> },
    /// A panic inside the library (a bug): its message.
    Panic(String),
    /// Anything else.
    Other(String),
}

impl fmt::Display for Why {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Why::Endpoint(e) => write!(f, "{e}"),
            Why::Comm(c) => write!(f, "{c:#x} is not a valid communicator"),
            Why::Type(t) => write!(f, "{t:#x} is not a valid (predefined) datatype"),
            Why::Count(c) => write!(f, "count {c} is negative"),
            Why::Buffer => write!(f, "null buffer with a positive count"),
            Why::Rank { rank, size } => write!(f, "rank {rank} is not in a communicator of size {size}"),
            Why::Root { root, size } => write!(f, "root {root} is not in a communicator of size {size}"),
            Why::Tag(t) => write!(f, "tag {t} is invalid (tags are 0..=INT_MAX; MPI_ANY_TAG only on receives)"),
            Why::Op { op, dt } => match (crate::op::OpKind::lookup(*op), crate::datatype::lookup(*dt)) {
                (None, _) => write!(f, "{op:#x} is not a valid operation"),
                (Some(o), Some(t)) => {
                    write!(f, "{} is not defined on {} (or not implemented for it)", o.name(), t.name)
                }
                (Some(o), None) => write!(f, "{} on an invalid datatype {dt:#x}", o.name()),
            },
            Why::Request(r) => write!(f, "{r:#x} is not an active request"),
            Why::Errhandler(e) => {
                write!(f, "{e:#x} is not an error handler (a predefined one or one the program holds)")
            }
            Why::Mismatch { expected, got } => {
                write!(f, "ranks disagree on the data size: {expected} bytes expected, {got} received")
            }
            Why::Arg(s) => write!(f, "{s}"),
            Why::InStatus { index, code } => {
                write!(f, "request {index} failed with {} (the others' codes are in their statuses)", name_of(*code))
            }
            Why::Panic(s) => write!(f, "internal error (a panic in the library): {s}"),
            Why::On { handle, why, .. } => write!(f, "{why} (on {handle:#x})"),
            Why::Other(s) => write!(f, "{s}"),
        }
    }
}

/// A failed call: the code to return, the communicator whose error handler decides, and why.
#[derive(Debug)]
pub struct Fail {
    pub code: c_int,
    /// Index of the communicator in the table; `None`: `MPI_COMM_WORLD`'s handler decides (errors
    /// not tied to a communicator, MPI-3.1 §8.3).
    pub comm: Option<usize>,
    pub why: Why,
}

impl Fail {
    #[cold]
    pub fn new(code: c_int, comm: Option<usize>, why: Why) -> Fail {
        Fail { code, comm, why }
    }

    #[cold]
    pub fn endpoint(comm: usize, e: nemesis::Error) -> Fail {
        Fail { code: code_of(&e), comm: Some(comm), why: Why::Endpoint(e) }
    }

    /// The failure, on communicator `ci` (its error handler decides) unless it names one already.
    #[cold]
    pub fn on(mut self, ci: usize) -> Fail {
        self.comm.get_or_insert(ci);
        self
    }
}

/// Result of the library's internal functions.
pub type Res<T> = Result<T, Fail>;

// ---------------------------------------------------------------------------------------------
// Removing the program's classes, codes and strings (MPI-4.1 §9.5).

#[cold]
fn still_named(code: c_int) -> Fail {
    Fail::new(abi::ERR_ARG, None, Why::Other(format!("{code} still has a string (MPI_Remove_error_string first)")))
}

#[cold]
fn not_removable(code: c_int, what: &str) -> Fail {
    Fail::new(abi::ERR_ARG, None, Why::Other(format!("{code} is not {what} of the program's")))
}

/// `MPI_Remove_error_class`: one of the program's classes (`MPI_Add_error_class`) that no code
/// of the program's still belongs to and that has no string left (MPI-4.1 §9.5: codes and
/// strings are removed first).
pub fn remove_error_class(acc: &mut crate::state::Access, class: c_int) -> Res<()> {
    let codes = &mut acc.st().user_codes;
    let Some(i) = codes.iter().position(|&(c, k, _)| c == class && k == class) else {
        return Err(not_removable(class, "a class"));
    };
    if codes.iter().any(|&(c, k, _)| k == class && c != class) {
        return Err(Fail::new(abi::ERR_ARG, None, Why::Other(format!("error class {class} still has codes"))));
    }
    if !codes[i].2.is_empty() {
        return Err(still_named(class));
    }
    codes.remove(i);
    Ok(())
}

/// `MPI_Remove_error_code`: one of the program's codes (`MPI_Add_error_code`; not a class)
/// whose string was removed first, if it had one.
pub fn remove_error_code(acc: &mut crate::state::Access, code: c_int) -> Res<()> {
    let codes = &mut acc.st().user_codes;
    let Some(i) = codes.iter().position(|&(c, k, _)| c == code && k != code) else {
        return Err(not_removable(code, "a code"));
    };
    if !codes[i].2.is_empty() {
        return Err(still_named(code));
    }
    codes.remove(i);
    Ok(())
}

/// `MPI_Remove_error_string`: the string `MPI_Add_error_string` gave one of the program's
/// classes or codes.
pub fn remove_error_string(acc: &mut crate::state::Access, code: c_int) -> Res<()> {
    let codes = &mut acc.st().user_codes;
    match codes.iter_mut().find(|e| e.0 == code) {
        Some(e) if !e.2.is_empty() => {
            e.2.clear();
            Ok(())
        }
        Some(_) => Err(Fail::new(abi::ERR_ARG, None, Why::Other(format!("error code {code} has no string")))),
        None => Err(not_removable(code, "a class or code")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn classes_codes_and_names_agree() {
        assert_eq!(name_of(abi::ERR_TRUNCATE), "MPI_ERR_TRUNCATE");
        assert_eq!(name_of(abi::ERR_RMA_FLAVOR), "MPI_ERR_RMA_FLAVOR");
        assert_eq!(name_of(abi::ERRX_PROC_FAILED), "MPIX_ERR_PROC_FAILED");
        assert_eq!(class_of(abi::ERR_RANK), Some(abi::ERR_RANK));
        assert_eq!(class_of(54), None, "a gap in MPICH's numbering");
        assert_eq!(class_of(abi::ERR_LASTCODE), None);
        assert_eq!(class_of(-1), None);
        assert!(string_of(abi::ERR_COMM).contains("invalid communicator"));
        let mut codes: Vec<c_int> = CLASSES.iter().map(|e| e.0).collect();
        codes.dedup();
        assert_eq!(codes.len(), CLASSES.len(), "codes ascend without repetition");
        assert!(codes.windows(2).all(|w| w[0] < w[1]));
        let e = nemesis::Error::Truncated { len: 9, capacity: 8, sender: 1, tag: 2 };
        assert_eq!(code_of(&e), abi::ERR_TRUNCATE);
        assert_eq!(code_of(&nemesis::Error::PeerDied { rank: 3 }), abi::ERRX_PROC_FAILED);
        assert_eq!(code_of(&nemesis::Error::TooLarge { len: 1, limit: 0 }), abi::ERR_COUNT);
    }

    #[test]
    fn fault_tolerance_failures_have_classes_that_name_them() {
        let e = nemesis_ft::Error::SendDeterminismViolated { rank: 3, dest: 1, seq: 7, date: 9, what: "differs" };
        assert_eq!(code_of(&nemesis::Error::Ft(Box::new(e))), abi::ERRX_SEND_DETERMINISM);
        let s = string_of(abi::ERRX_SEND_DETERMINISM);
        assert!(s.starts_with("MPIX_ERR_SEND_DETERMINISM: the program is not send-deterministic"), "{s}");
        assert!(s.contains("rank 3's message 7 to rank 1"), "{s}");
        let e = nemesis_ft::Error::LogExhausted { memory_limit: 10, spill_limit: 20 };
        assert_eq!(code_of(&nemesis::Error::Ft(Box::new(e))), abi::ERRX_LOG_EXHAUSTED);
        assert!(string_of(abi::ERRX_LOG_EXHAUSTED).contains("10 bytes in memory"));
        assert!(string_of(abi::ERRX_NOT_RESTORED).contains("before MPIX_Checkpoint_restore"));
        let e = nemesis_ft::Error::CheckpointPending;
        assert_eq!(code_of(&nemesis::Error::Ft(Box::new(e))), abi::ERR_OTHER);
    }
}
