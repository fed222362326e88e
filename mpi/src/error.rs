//! Error classes and codes: their names and texts (`MPI_Error_string`), the class of each code
//! (`MPI_Error_class`), the mapping of Endpoint errors onto them, and [`Fail`], what a failed call
//! carries to the error handler.
//!
//! Every code this library returns is a class. A dead peer is the extension class
//! `MPIX_ERR_PROC_FAILED` (the name MPI's fault-tolerance proposal uses), so that a program can
//! tell it from every other failure.

use std::ffi::c_int;
use std::fmt;

use crate::abi;

/// Name and text of every class (index = class) up to the extension class.
const CLASSES: [(&str, &str); 59] = [
    ("MPI_SUCCESS", "no error"),
    ("MPI_ERR_BUFFER", "invalid buffer pointer"),
    ("MPI_ERR_COUNT", "invalid count argument"),
    ("MPI_ERR_TYPE", "invalid datatype"),
    ("MPI_ERR_TAG", "invalid tag"),
    ("MPI_ERR_COMM", "invalid communicator"),
    ("MPI_ERR_RANK", "invalid rank"),
    ("MPI_ERR_REQUEST", "invalid request"),
    ("MPI_ERR_ROOT", "invalid root"),
    ("MPI_ERR_GROUP", "invalid group"),
    ("MPI_ERR_OP", "invalid operation"),
    ("MPI_ERR_TOPOLOGY", "invalid topology"),
    ("MPI_ERR_DIMS", "invalid dimension argument"),
    ("MPI_ERR_ARG", "invalid argument"),
    ("MPI_ERR_UNKNOWN", "unknown error"),
    ("MPI_ERR_TRUNCATE", "message truncated on receive"),
    ("MPI_ERR_OTHER", "known error not in this list"),
    ("MPI_ERR_INTERN", "internal error"),
    ("MPI_ERR_PENDING", "pending request"),
    ("MPI_ERR_IN_STATUS", "error code is in status"),
    ("MPI_ERR_ACCESS", "permission denied"),
    ("MPI_ERR_AMODE", "invalid access mode"),
    ("MPI_ERR_ASSERT", "invalid assert argument"),
    ("MPI_ERR_BAD_FILE", "invalid file name"),
    ("MPI_ERR_BASE", "invalid base argument"),
    ("MPI_ERR_CONVERSION", "data conversion error"),
    ("MPI_ERR_DISP", "invalid displacement argument"),
    ("MPI_ERR_DUP_DATAREP", "data representation already defined"),
    ("MPI_ERR_FILE_EXISTS", "file exists"),
    ("MPI_ERR_FILE_IN_USE", "file in use"),
    ("MPI_ERR_FILE", "invalid file handle"),
    ("MPI_ERR_INFO_KEY", "invalid info key"),
    ("MPI_ERR_INFO_NOKEY", "info key not defined"),
    ("MPI_ERR_INFO_VALUE", "invalid info value"),
    ("MPI_ERR_INFO", "invalid info object"),
    ("MPI_ERR_IO", "I/O error"),
    ("MPI_ERR_KEYVAL", "invalid keyval"),
    ("MPI_ERR_LOCKTYPE", "invalid lock type"),
    ("MPI_ERR_NAME", "invalid service name"),
    ("MPI_ERR_NO_MEM", "out of memory"),
    ("MPI_ERR_NOT_SAME", "collective argument not identical on all processes"),
    ("MPI_ERR_NO_SPACE", "not enough space"),
    ("MPI_ERR_NO_SUCH_FILE", "file does not exist"),
    ("MPI_ERR_PORT", "invalid port name"),
    ("MPI_ERR_QUOTA", "quota exceeded"),
    ("MPI_ERR_READ_ONLY", "read-only file or file system"),
    ("MPI_ERR_RMA_CONFLICT", "conflicting accesses to a window"),
    ("MPI_ERR_RMA_SYNC", "wrong synchronisation of RMA calls"),
    ("MPI_ERR_SERVICE", "invalid service name"),
    ("MPI_ERR_SIZE", "invalid size argument"),
    ("MPI_ERR_SPAWN", "error in spawning processes"),
    ("MPI_ERR_UNSUPPORTED_DATAREP", "unsupported data representation"),
    ("MPI_ERR_UNSUPPORTED_OPERATION", "unsupported operation"),
    ("MPI_ERR_WIN", "invalid window"),
    ("MPI_ERR_RMA_RANGE", "target memory outside the window"),
    ("MPI_ERR_RMA_ATTACH", "memory cannot be attached"),
    ("MPI_ERR_RMA_SHARED", "memory cannot be shared"),
    ("MPI_ERR_RMA_FLAVOR", "wrong window flavor"),
    ("MPIX_ERR_PROC_FAILED", "a process taking part in the operation died"),
];

/// The class of error code `code`, if it is one this library defines.
pub fn class_of(code: c_int) -> Option<c_int> {
    (0..CLASSES.len() as c_int).contains(&code).then_some(code)
}

/// The name of code `code` (`MPI_ERR_RANK`...).
pub fn name_of(code: c_int) -> &'static str {
    CLASSES.get(code as u32 as usize).map_or("(unknown error code)", |e| e.0)
}

/// The text `MPI_Error_string` gives for `code`.
pub fn string_of(code: c_int) -> String {
    match CLASSES.get(code as u32 as usize) {
        Some((name, text)) => format!("{name}: {text}"),
        None => format!("unknown error code {code}"),
    }
}

/// The code for an Endpoint error.
pub fn code_of(e: &nemesis::Error) -> c_int {
    use nemesis::Error as E;
    match e {
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
    /// An error handler other than the two predefined ones.
    Errhandler(c_int),
    /// A collective's arguments disagree between ranks (`count × size` differs).
    Mismatch { expected: usize, got: usize },
    /// Some other invalid argument.
    Arg(&'static str),
    /// `MPI_Waitall`/`MPI_Testall`: the first failed request's index and code.
    InStatus { index: usize, code: c_int },
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
                (Some(o), Some(t)) => write!(f, "{} is not defined on {}", o.name(), t.name),
                (Some(o), None) => write!(f, "{} on an invalid datatype {dt:#x}", o.name()),
            },
            Why::Request(r) => write!(f, "{r:#x} is not an active request"),
            Why::Errhandler(e) => {
                write!(f, "{e:#x} is not an error handler (MPI_ERRORS_ARE_FATAL or MPI_ERRORS_RETURN)")
            }
            Why::Mismatch { expected, got } => {
                write!(f, "ranks disagree on the data size: {expected} bytes expected, {got} received")
            }
            Why::Arg(s) => write!(f, "{s}"),
            Why::InStatus { index, code } => {
                write!(f, "request {index} failed with {} (the others' codes are in their statuses)", name_of(*code))
            }
            Why::Panic(s) => write!(f, "internal error (a panic in the library): {s}"),
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
}

/// Result of the library's internal functions.
pub type Res<T> = Result<T, Fail>;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn classes_codes_and_names_agree() {
        assert_eq!(CLASSES.len() as c_int, abi::ERRX_PROC_FAILED + 1);
        assert_eq!(name_of(abi::ERR_TRUNCATE), "MPI_ERR_TRUNCATE");
        assert_eq!(name_of(abi::ERR_RMA_FLAVOR), "MPI_ERR_RMA_FLAVOR");
        assert_eq!(name_of(abi::ERRX_PROC_FAILED), "MPIX_ERR_PROC_FAILED");
        assert_eq!(class_of(abi::ERR_RANK), Some(abi::ERR_RANK));
        assert_eq!(class_of(abi::ERR_LASTCODE + 1), None);
        assert_eq!(class_of(-1), None);
        assert!(string_of(abi::ERR_COMM).contains("invalid communicator"));
        let e = nemesis::Error::Truncated { len: 9, capacity: 8, sender: 1, tag: 2 };
        assert_eq!(code_of(&e), abi::ERR_TRUNCATE);
        assert_eq!(code_of(&nemesis::Error::PeerDied { rank: 3 }), abi::ERRX_PROC_FAILED);
        assert_eq!(code_of(&nemesis::Error::TooLarge { len: 1, limit: 0 }), abi::ERR_COUNT);
    }
}
