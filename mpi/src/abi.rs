//! The C ABI's types and constants, one for one with `include/mpi.h` (a unit test parses the
//! header and checks every value here against it).
//!
//! Handles are `int`s, as in MPICH: a kind-specific base plus an index, so that a lookup is a
//! subtraction, a bounds check and one load (no hashing, no pointer chasing), and so that garbage
//! (0, small integers, another kind's handle) is recognised as invalid. The predefined handles are
//! compile-time constants in the header, which lets the C compiler pass them as immediates.

use std::ffi::c_int;

/// `MPI_Comm`.
pub type Comm = c_int;
/// `MPI_Datatype`.
pub type Datatype = c_int;
/// `MPI_Op`.
pub type Op = c_int;
/// `MPI_Request`.
pub type Request = c_int;
/// `MPI_Errhandler`.
pub type Errhandler = c_int;

/// `MPI_Status`: the standard's public fields, then the private byte count.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Status {
    /// `MPI_SOURCE`: the sender's rank in the communicator.
    pub source: c_int,
    /// `MPI_TAG`.
    pub tag: c_int,
    /// `MPI_ERROR`: set by the multiple-completion calls (`MPI_Waitall`, `MPI_Testall`).
    pub error: c_int,
    /// `nemesis_cancelled` (cancellation is not supported: always 0).
    pub cancelled: c_int,
    /// `nemesis_count`: bytes received (what `MPI_Get_count` divides by the type's size).
    pub count: i64,
}

// Versions.
pub const VERSION: c_int = 3;
pub const SUBVERSION: c_int = 1;

// Ranks, tags and other special values. ANY_SOURCE and ANY_TAG equal the Endpoint's wildcards,
// so WORLD receives pass them through unchanged.
pub const ANY_SOURCE: c_int = -1;
pub const ANY_TAG: c_int = -1;
pub const PROC_NULL: c_int = -2;
pub const ROOT: c_int = -3;
pub const UNDEFINED: c_int = -32766;

pub const MAX_PROCESSOR_NAME: usize = 256;
pub const MAX_ERROR_STRING: usize = 512;
pub const MAX_LIBRARY_VERSION_STRING: usize = 256;

// Thread levels.
pub const THREAD_SINGLE: c_int = 0;
pub const THREAD_FUNNELED: c_int = 1;
pub const THREAD_SERIALIZED: c_int = 2;
pub const THREAD_MULTIPLE: c_int = 3;

// Communicators: COMM_BASE + index in the communicator table.
pub const COMM_NULL: Comm = 0x0400_0000;
pub const COMM_BASE: Comm = 0x4400_0000;
pub const COMM_WORLD: Comm = COMM_BASE;
pub const COMM_SELF: Comm = COMM_BASE + 1;

// Datatypes: DATATYPE_BASE + index in `datatype::TYPES`.
pub const DATATYPE_NULL: Datatype = 0x0c00_0000;
pub const DATATYPE_BASE: Datatype = 0x4c00_0000;
pub const CHAR: Datatype = DATATYPE_BASE;
pub const SIGNED_CHAR: Datatype = DATATYPE_BASE + 1;
pub const UNSIGNED_CHAR: Datatype = DATATYPE_BASE + 2;
pub const BYTE: Datatype = DATATYPE_BASE + 3;
pub const SHORT: Datatype = DATATYPE_BASE + 4;
pub const UNSIGNED_SHORT: Datatype = DATATYPE_BASE + 5;
pub const INT: Datatype = DATATYPE_BASE + 6;
pub const UNSIGNED: Datatype = DATATYPE_BASE + 7;
pub const LONG: Datatype = DATATYPE_BASE + 8;
pub const UNSIGNED_LONG: Datatype = DATATYPE_BASE + 9;
pub const LONG_LONG: Datatype = DATATYPE_BASE + 10;
pub const UNSIGNED_LONG_LONG: Datatype = DATATYPE_BASE + 11;
pub const FLOAT: Datatype = DATATYPE_BASE + 12;
pub const DOUBLE: Datatype = DATATYPE_BASE + 13;
pub const INT8_T: Datatype = DATATYPE_BASE + 14;
pub const INT16_T: Datatype = DATATYPE_BASE + 15;
pub const INT32_T: Datatype = DATATYPE_BASE + 16;
pub const INT64_T: Datatype = DATATYPE_BASE + 17;
pub const UINT8_T: Datatype = DATATYPE_BASE + 18;
pub const UINT16_T: Datatype = DATATYPE_BASE + 19;
pub const UINT32_T: Datatype = DATATYPE_BASE + 20;
pub const UINT64_T: Datatype = DATATYPE_BASE + 21;
/// Number of predefined datatypes.
pub const DATATYPE_COUNT: usize = 22;

// Reduction operations: OP_BASE + index.
pub const OP_NULL: Op = 0x1800_0000;
pub const OP_BASE: Op = 0x5800_0000;
pub const MAX: Op = OP_BASE;
pub const MIN: Op = OP_BASE + 1;
pub const SUM: Op = OP_BASE + 2;
pub const PROD: Op = OP_BASE + 3;
pub const LAND: Op = OP_BASE + 4;
pub const BAND: Op = OP_BASE + 5;
pub const LOR: Op = OP_BASE + 6;
pub const BOR: Op = OP_BASE + 7;
pub const LXOR: Op = OP_BASE + 8;
pub const BXOR: Op = OP_BASE + 9;
/// Number of predefined operations.
pub const OP_COUNT: usize = 10;

// Requests: REQUEST_BASE | generation << REQUEST_INDEX_BITS | slot index, in the 26 bits below
// the handle kind.
pub const REQUEST_NULL: Request = 0x2c00_0000;
pub const REQUEST_BASE: Request = 0x6c00_0000;
/// Bits of a request handle that name its slot.
pub const REQUEST_INDEX_BITS: u32 = 18;
/// Bits of a request handle that carry its slot's generation.
pub const REQUEST_GENERATION_BITS: u32 = 8;
/// Slots the request table may grow to.
pub const REQUEST_MAX: usize = 1 << REQUEST_INDEX_BITS;

// Error handlers.
pub const ERRHANDLER_NULL: Errhandler = 0x1400_0000;
pub const ERRORS_ARE_FATAL: Errhandler = 0x5400_0000;
pub const ERRORS_RETURN: Errhandler = 0x5400_0001;

// Sentinel pointers.
/// `MPI_IN_PLACE`.
pub const IN_PLACE: usize = usize::MAX;
/// `MPI_STATUS_IGNORE` and `MPI_STATUSES_IGNORE`.
pub const STATUS_IGNORE: usize = 1;

// Error classes (MPI-3.1 §8.4, Table 8.1), each its own code, and one extension class.
// `MPI_ERR_LASTCODE` is the largest code.
pub const SUCCESS: c_int = 0;
pub const ERR_BUFFER: c_int = 1;
pub const ERR_COUNT: c_int = 2;
pub const ERR_TYPE: c_int = 3;
pub const ERR_TAG: c_int = 4;
pub const ERR_COMM: c_int = 5;
pub const ERR_RANK: c_int = 6;
pub const ERR_REQUEST: c_int = 7;
pub const ERR_ROOT: c_int = 8;
pub const ERR_GROUP: c_int = 9;
pub const ERR_OP: c_int = 10;
pub const ERR_TOPOLOGY: c_int = 11;
pub const ERR_DIMS: c_int = 12;
pub const ERR_ARG: c_int = 13;
pub const ERR_UNKNOWN: c_int = 14;
pub const ERR_TRUNCATE: c_int = 15;
pub const ERR_OTHER: c_int = 16;
pub const ERR_INTERN: c_int = 17;
pub const ERR_PENDING: c_int = 18;
pub const ERR_IN_STATUS: c_int = 19;
pub const ERR_ACCESS: c_int = 20;
pub const ERR_AMODE: c_int = 21;
pub const ERR_ASSERT: c_int = 22;
pub const ERR_BAD_FILE: c_int = 23;
pub const ERR_BASE: c_int = 24;
pub const ERR_CONVERSION: c_int = 25;
pub const ERR_DISP: c_int = 26;
pub const ERR_DUP_DATAREP: c_int = 27;
pub const ERR_FILE_EXISTS: c_int = 28;
pub const ERR_FILE_IN_USE: c_int = 29;
pub const ERR_FILE: c_int = 30;
pub const ERR_INFO_KEY: c_int = 31;
pub const ERR_INFO_NOKEY: c_int = 32;
pub const ERR_INFO_VALUE: c_int = 33;
pub const ERR_INFO: c_int = 34;
pub const ERR_IO: c_int = 35;
pub const ERR_KEYVAL: c_int = 36;
pub const ERR_LOCKTYPE: c_int = 37;
pub const ERR_NAME: c_int = 38;
pub const ERR_NO_MEM: c_int = 39;
pub const ERR_NOT_SAME: c_int = 40;
pub const ERR_NO_SPACE: c_int = 41;
pub const ERR_NO_SUCH_FILE: c_int = 42;
pub const ERR_PORT: c_int = 43;
pub const ERR_QUOTA: c_int = 44;
pub const ERR_READ_ONLY: c_int = 45;
pub const ERR_RMA_CONFLICT: c_int = 46;
pub const ERR_RMA_SYNC: c_int = 47;
pub const ERR_SERVICE: c_int = 48;
pub const ERR_SIZE: c_int = 49;
pub const ERR_SPAWN: c_int = 50;
pub const ERR_UNSUPPORTED_DATAREP: c_int = 51;
pub const ERR_UNSUPPORTED_OPERATION: c_int = 52;
pub const ERR_WIN: c_int = 53;
pub const ERR_RMA_RANGE: c_int = 54;
pub const ERR_RMA_ATTACH: c_int = 55;
pub const ERR_RMA_SHARED: c_int = 56;
pub const ERR_RMA_FLAVOR: c_int = 57;
/// Extension class (the MPI-4 fault-tolerance proposal's name): the peer of an operation died.
pub const ERRX_PROC_FAILED: c_int = 58;
pub const ERR_LASTCODE: c_int = 58;

#[cfg(test)]
mod tests {
    use super::*;

    /// The value of every `#define NAME VALUE` in `mpi.h` whose value is an integer (decimal,
    /// hex, negative, or a cast of one).
    fn header_defines() -> std::collections::HashMap<String, i64> {
        let text = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/include/mpi.h")).unwrap();
        let mut out = std::collections::HashMap::new();
        for line in text.lines() {
            let mut it = line.split_whitespace();
            if it.next() != Some("#define") {
                continue;
            }
            let (Some(name), rest) = (it.next(), it.collect::<Vec<_>>().join(" ")) else { continue };
            let v = rest.split("/*").next().unwrap_or("").trim();
            let v = v.rsplit(')').find(|p| !p.trim().is_empty()).unwrap_or(v);
            let v = v.trim().trim_start_matches('(').trim_end_matches(')').trim();
            let parsed = if let Some(h) = v.strip_prefix("0x") {
                i64::from_str_radix(h, 16).ok()
            } else {
                v.parse::<i64>().ok()
            };
            if let Some(x) = parsed {
                out.insert(name.to_string(), x);
            }
        }
        out
    }

    #[test]
    fn the_header_and_the_library_agree() {
        let h = header_defines();
        let want: &[(&str, i64)] = &[
            ("MPI_VERSION", VERSION.into()),
            ("MPI_SUBVERSION", SUBVERSION.into()),
            ("MPI_ANY_SOURCE", ANY_SOURCE.into()),
            ("MPI_ANY_TAG", ANY_TAG.into()),
            ("MPI_PROC_NULL", PROC_NULL.into()),
            ("MPI_ROOT", ROOT.into()),
            ("MPI_UNDEFINED", UNDEFINED.into()),
            ("MPI_MAX_PROCESSOR_NAME", MAX_PROCESSOR_NAME as i64),
            ("MPI_MAX_ERROR_STRING", MAX_ERROR_STRING as i64),
            ("MPI_MAX_LIBRARY_VERSION_STRING", MAX_LIBRARY_VERSION_STRING as i64),
            ("MPI_THREAD_SINGLE", THREAD_SINGLE.into()),
            ("MPI_THREAD_FUNNELED", THREAD_FUNNELED.into()),
            ("MPI_THREAD_SERIALIZED", THREAD_SERIALIZED.into()),
            ("MPI_THREAD_MULTIPLE", THREAD_MULTIPLE.into()),
            ("MPI_COMM_NULL", COMM_NULL.into()),
            ("MPI_COMM_WORLD", COMM_WORLD.into()),
            ("MPI_COMM_SELF", COMM_SELF.into()),
            ("MPI_DATATYPE_NULL", DATATYPE_NULL.into()),
            ("MPI_OP_NULL", OP_NULL.into()),
            ("MPI_MAX", MAX.into()),
            ("MPI_MIN", MIN.into()),
            ("MPI_SUM", SUM.into()),
            ("MPI_PROD", PROD.into()),
            ("MPI_LAND", LAND.into()),
            ("MPI_BAND", BAND.into()),
            ("MPI_LOR", LOR.into()),
            ("MPI_BOR", BOR.into()),
            ("MPI_LXOR", LXOR.into()),
            ("MPI_BXOR", BXOR.into()),
            ("MPI_REQUEST_NULL", REQUEST_NULL.into()),
            ("MPI_ERRHANDLER_NULL", ERRHANDLER_NULL.into()),
            ("MPI_ERRORS_ARE_FATAL", ERRORS_ARE_FATAL.into()),
            ("MPI_ERRORS_RETURN", ERRORS_RETURN.into()),
            ("MPI_IN_PLACE", -1),
            ("MPI_STATUS_IGNORE", STATUS_IGNORE as i64),
            ("MPI_STATUSES_IGNORE", STATUS_IGNORE as i64),
            ("MPI_SUCCESS", SUCCESS.into()),
            ("MPI_ERR_TRUNCATE", ERR_TRUNCATE.into()),
            ("MPI_ERR_RMA_FLAVOR", ERR_RMA_FLAVOR.into()),
            ("MPIX_ERR_PROC_FAILED", ERRX_PROC_FAILED.into()),
            ("MPI_ERR_LASTCODE", ERR_LASTCODE.into()),
        ];
        for (name, v) in want {
            assert_eq!(h.get(*name), Some(v), "{name}");
        }
        // Every datatype in handle order, and every error class by its name.
        for (i, t) in crate::datatype::TYPES.iter().enumerate() {
            assert_eq!(h.get(t.name), Some(&i64::from(DATATYPE_BASE + i as c_int)), "{}", t.name);
        }
        for class in 0..=ERRX_PROC_FAILED {
            let name = crate::error::name_of(class);
            assert_eq!(h.get(name), Some(&i64::from(class)), "{name}");
        }
        assert_eq!(std::mem::size_of::<Status>(), 24, "MPI_Status is 4 ints and a long long");
    }
}
