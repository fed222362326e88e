//! The C ABI's types and constants, one for one with `include/mpi.h`, which are MPICH 4.0's
//! (Debian's `libmpich-dev`, `libmpich.so.12`): a program compiled against MPICH's `mpi.h` passes
//! these values, lays out `MPI_Status` this way and references the symbols of [`crate::symbols`].
//! Unit tests parse our header and check every value here against it, and check every integer
//! constant the two headers share against MPICH's header where it is installed.
//!
//! **Handles** are `int`s in MPICH's encoding: bits 30–31 say builtin (`01`) or direct (`10`),
//! bits 26–29 the kind of object, the low bits an index. The library keeps one table per kind
//! (`crate::handle::Table`), so a lookup is a subtraction, a bounds check and one load, and
//! garbage (0, small integers, another kind's handle) is recognised as invalid. The predefined
//! handles are compile-time constants, which lets the C compiler pass them as immediates.

use std::ffi::{c_int, c_long, c_void};

/// `MPI_Comm`.
pub type Comm = c_int;
/// `MPI_Datatype`.
pub type Datatype = c_int;
/// `MPI_Op`.
pub type Op = c_int;
/// `MPI_Request`.
pub type Request = c_int;
/// `MPI_Message`.
pub type Message = c_int;
/// `MPI_Errhandler`.
pub type Errhandler = c_int;
/// `MPI_Group`.
pub type Group = c_int;
/// `MPI_Info`.
pub type Info = c_int;
/// `MPI_Fint`.
pub type Fint = c_int;
/// `MPI_Aint`.
pub type Aint = c_long;
/// `MPI_Offset`.
pub type Offset = c_long;
/// `MPI_Count`.
pub type Count = c_long;
/// `MPI_Win`.
pub type Win = c_int;
/// `MPI_Session`.
pub type Session = c_int;
/// `MPI_File`: a pointer in MPICH's ABI (`struct ADIOI_FileD *`); `MPI_FILE_NULL` is null.
pub type File = *mut c_void;
/// `MPI_T_enum` (a pointer in MPICH's ABI, as are the other `MPI_T_` handles).
pub type TEnum = *mut c_void;
/// `MPI_T_cvar_handle`.
pub type TCvarHandle = *mut c_void;
/// `MPI_T_pvar_handle`.
pub type TPvarHandle = *mut c_void;
/// `MPI_T_pvar_session`.
pub type TPvarSession = *mut c_void;
/// `MPI_T_event_registration`.
pub type TEventRegistration = *mut c_void;
/// `MPI_T_event_instance`.
pub type TEventInstance = *mut c_void;

/// `MPI_File_errhandler_function`.
pub type FileErrFn = unsafe extern "C" fn(*mut File, *mut c_int, ...);
/// `MPI_User_function_c`.
pub type UserFnC = unsafe extern "C" fn(*mut c_void, *mut c_void, *mut Count, *mut c_int);
/// `MPI_Grequest_query_function`.
pub type GrequestQueryFn = unsafe extern "C" fn(*mut c_void, *mut Status) -> c_int;
/// `MPI_Grequest_free_function`.
pub type GrequestFreeFn = unsafe extern "C" fn(*mut c_void) -> c_int;
/// `MPI_Grequest_cancel_function`.
pub type GrequestCancelFn = unsafe extern "C" fn(*mut c_void, c_int) -> c_int;
/// `MPI_Datarep_conversion_function`.
pub type DatarepConversionFn =
    unsafe extern "C" fn(*mut c_void, c_int, c_int, *mut c_void, Offset, *mut c_void) -> c_int;
/// `MPI_Datarep_conversion_function_c`.
pub type DatarepConversionFnC =
    unsafe extern "C" fn(*mut c_void, c_int, Count, *mut c_void, Offset, *mut c_void) -> c_int;
/// `MPI_Datarep_extent_function`.
pub type DatarepExtentFn = unsafe extern "C" fn(c_int, *mut Aint, *mut c_void) -> c_int;
/// `MPI_T_event_cb_function`.
pub type TEventCbFn = unsafe extern "C" fn(TEventInstance, TEventRegistration, c_int, *mut c_void);
/// `MPI_T_event_dropped_cb_function`.
pub type TEventDroppedCbFn = unsafe extern "C" fn(Count, TEventRegistration, c_int, c_int, *mut c_void);
/// `MPI_T_event_free_cb_function`.
pub type TEventFreeCbFn = unsafe extern "C" fn(TEventRegistration, c_int, *mut c_void);

/// `MPI_Status` (MPICH 4.0's layout): the byte count is split in `count_lo` and the upper bits of
/// `count_hi_and_cancelled`, whose bit 0 says "cancelled".
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Status {
    /// Bits 0–31 of the byte count.
    pub count_lo: c_int,
    /// Bits 32–62 of the byte count in bits 1–31; bit 0: cancelled.
    pub count_hi_and_cancelled: c_int,
    /// `MPI_SOURCE`: the sender's rank in the communicator.
    pub source: c_int,
    /// `MPI_TAG`.
    pub tag: c_int,
    /// `MPI_ERROR`: set by the multiple-completion calls.
    pub error: c_int,
}

impl Status {
    /// A status with these fields, not cancelled.
    #[inline(always)]
    pub fn new(source: c_int, tag: c_int, error: c_int, count: i64) -> Status {
        Status {
            count_lo: count as c_int,
            count_hi_and_cancelled: ((count as u64 >> 32) << 1) as c_int,
            source,
            tag,
            error,
        }
    }

    /// The byte count (`MPI_Get_count` divides it by the type's size).
    #[inline]
    pub fn count(&self) -> i64 {
        let hi = (self.count_hi_and_cancelled as u32 >> 1) as u64;
        ((hi << 32) | self.count_lo as u32 as u64) as i64
    }

    /// Sets the byte count, keeping the cancelled bit (`MPI_Status_set_elements`).
    pub fn set_count(&mut self, count: i64) {
        let cancelled = self.count_hi_and_cancelled & 1;
        self.count_lo = count as c_int;
        self.count_hi_and_cancelled = (((count as u64 >> 32) << 1) as c_int) | cancelled;
    }

    /// `MPI_Test_cancelled`.
    #[inline]
    pub fn cancelled(&self) -> bool {
        self.count_hi_and_cancelled & 1 != 0
    }

    /// `MPI_Status_set_cancelled`.
    pub fn set_cancelled(&mut self, on: bool) {
        self.count_hi_and_cancelled = (self.count_hi_and_cancelled & !1) | c_int::from(on);
    }
}

/// The Fortran 2008 status as C sees it (`MPI_F08_status`): the same fields.
pub type F08Status = Status;

/// Handle encoding (MPICH's `HANDLE_KIND` and `MPIR_Object_kind`).
pub mod handle {
    use std::ffi::c_int;

    /// Bits 30–31: a predefined object.
    pub const BUILTIN: u32 = 0x4000_0000;
    /// Bits 30–31: an object in a table (MPICH's "direct" objects).
    pub const DIRECT: u32 = 0x8000_0000;
    /// Bits 26–29: the kind of object.
    pub const COMM: u32 = 0x1 << 26;
    pub const GROUP: u32 = 0x2 << 26;
    pub const DATATYPE: u32 = 0x3 << 26;
    pub const ERRHANDLER: u32 = 0x5 << 26;
    pub const OP: u32 = 0x6 << 26;
    pub const INFO: u32 = 0x7 << 26;
    pub const KEYVAL: u32 = 0x9 << 26;
    pub const REQUEST: u32 = 0xb << 26;
    /// Indices below bit 26.
    pub const INDEX_BITS: u32 = 26;

    /// The handle of a table entry: `base + index`.
    pub const fn of(base: u32, index: usize) -> c_int {
        (base + index as u32) as c_int
    }
}

// Versions.
pub const VERSION: c_int = 4;
pub const SUBVERSION: c_int = 1;

// Ranks, tags and other special values (MPICH's: note MPI_PROC_NULL is -1 and MPI_ANY_SOURCE
// -2, while the Endpoint's wildcard source is -1; the library translates).
pub const PROC_NULL: c_int = -1;
pub const ANY_SOURCE: c_int = -2;
pub const ROOT: c_int = -3;
pub const ANY_TAG: c_int = -1;
pub const UNDEFINED: c_int = -32766;
/// `MPI_Comm_split_type`'s node-wide split.
pub const COMM_TYPE_SHARED: c_int = 1;
pub const COMM_TYPE_HW_GUIDED: c_int = 2;
pub const COMM_TYPE_HW_UNGUIDED: c_int = 3;
/// MPI-4.1's split by the resources a `mpi_hw_resource_type` hint names (the value after
/// `MPI_COMM_TYPE_HW_UNGUIDED`, as in MPICH 4.2).
pub const COMM_TYPE_RESOURCE_GUIDED: c_int = 4;

pub const MAX_PROCESSOR_NAME: usize = 128;
pub const MAX_LIBRARY_VERSION_STRING: usize = 8192;
pub const MAX_ERROR_STRING: usize = 512;
pub const MAX_PORT_NAME: usize = 256;
pub const MAX_OBJECT_NAME: usize = 128;
pub const MAX_INFO_KEY: usize = 255;
pub const MAX_INFO_VAL: usize = 1024;
/// The most `MPI_Bsend` may take of the attached buffer per message beyond its data.
pub const BSEND_OVERHEAD: usize = 96;

// Thread levels.
pub const THREAD_SINGLE: c_int = 0;
pub const THREAD_FUNNELED: c_int = 1;
pub const THREAD_SERIALIZED: c_int = 2;
pub const THREAD_MULTIPLE: c_int = 3;

// Compare results.
pub const IDENT: c_int = 0;
pub const CONGRUENT: c_int = 1;
pub const SIMILAR: c_int = 2;
pub const UNEQUAL: c_int = 3;

// Communicators: COMM_BASE + index in the communicator table (0: MPI_COMM_WORLD, 1:
// MPI_COMM_SELF, MPICH's values).
pub const COMM_NULL: Comm = 0x0400_0000;
pub const COMM_BASE: Comm = 0x4400_0000;
pub const COMM_WORLD: Comm = COMM_BASE;
pub const COMM_SELF: Comm = COMM_BASE + 1;

// Groups.
pub const GROUP_NULL: Group = 0x0800_0000;
pub const GROUP_EMPTY: Group = 0x4800_0000;

// Datatypes. A predefined basic type is `0x4c00SSII`: SS its size in bytes, II an index unique
// among them (`crate::datatype::BUILTIN`). Derived types are `DATATYPE_DIRECT + index` in the
// datatype table, whose first five entries are MPICH's predefined MINLOC/MAXLOC pairs.
pub const DATATYPE_NULL: Datatype = 0x0c00_0000;
pub const DATATYPE_BUILTIN: u32 = handle::BUILTIN | handle::DATATYPE;
pub const DATATYPE_DIRECT: u32 = handle::DIRECT | handle::DATATYPE;
pub const CHAR: Datatype = 0x4c00_0101;
pub const SIGNED_CHAR: Datatype = 0x4c00_0118;
pub const UNSIGNED_CHAR: Datatype = 0x4c00_0102;
pub const BYTE: Datatype = 0x4c00_010d;
pub const WCHAR: Datatype = 0x4c00_040e;
pub const SHORT: Datatype = 0x4c00_0203;
pub const UNSIGNED_SHORT: Datatype = 0x4c00_0204;
pub const INT: Datatype = 0x4c00_0405;
pub const UNSIGNED: Datatype = 0x4c00_0406;
pub const LONG: Datatype = 0x4c00_0807;
pub const UNSIGNED_LONG: Datatype = 0x4c00_0808;
pub const FLOAT: Datatype = 0x4c00_040a;
pub const DOUBLE: Datatype = 0x4c00_080b;
pub const LONG_DOUBLE: Datatype = 0x4c00_100c;
pub const LONG_LONG_INT: Datatype = 0x4c00_0809;
pub const LONG_LONG: Datatype = LONG_LONG_INT;
pub const UNSIGNED_LONG_LONG: Datatype = 0x4c00_0819;
pub const PACKED: Datatype = 0x4c00_010f;
pub const LB: Datatype = 0x4c00_0010;
pub const UB: Datatype = 0x4c00_0011;
pub const FLOAT_INT: Datatype = 0x8c00_0000_u32 as c_int;
pub const DOUBLE_INT: Datatype = 0x8c00_0001_u32 as c_int;
pub const LONG_INT: Datatype = 0x8c00_0002_u32 as c_int;
pub const SHORT_INT: Datatype = 0x8c00_0003_u32 as c_int;
pub const TWO_INT: Datatype = 0x4c00_0816;
pub const LONG_DOUBLE_INT: Datatype = 0x8c00_0004_u32 as c_int;
/// Table entries taken by the predefined pairs (`FLOAT_INT` ... `LONG_DOUBLE_INT`).
pub const PAIR_TYPES: usize = 5;
pub const COMPLEX: Datatype = 0x4c00_081e;
pub const DOUBLE_COMPLEX: Datatype = 0x4c00_1022;
pub const LOGICAL: Datatype = 0x4c00_041d;
pub const REAL: Datatype = 0x4c00_041c;
pub const DOUBLE_PRECISION: Datatype = 0x4c00_081f;
pub const INTEGER: Datatype = 0x4c00_041b;
pub const TWO_INTEGER: Datatype = 0x4c00_0820;
pub const TWO_REAL: Datatype = 0x4c00_0821;
pub const TWO_DOUBLE_PRECISION: Datatype = 0x4c00_1023;
pub const CHARACTER: Datatype = 0x4c00_011a;
pub const REAL4: Datatype = 0x4c00_0427;
pub const REAL8: Datatype = 0x4c00_0829;
pub const REAL16: Datatype = 0x4c00_102b;
pub const COMPLEX8: Datatype = 0x4c00_0828;
pub const COMPLEX16: Datatype = 0x4c00_102a;
pub const COMPLEX32: Datatype = 0x4c00_202c;
pub const INTEGER1: Datatype = 0x4c00_012d;
pub const INTEGER2: Datatype = 0x4c00_022f;
pub const INTEGER4: Datatype = 0x4c00_0430;
pub const INTEGER8: Datatype = 0x4c00_0831;
pub const INT8_T: Datatype = 0x4c00_0137;
pub const INT16_T: Datatype = 0x4c00_0238;
pub const INT32_T: Datatype = 0x4c00_0439;
pub const INT64_T: Datatype = 0x4c00_083a;
pub const UINT8_T: Datatype = 0x4c00_013b;
pub const UINT16_T: Datatype = 0x4c00_023c;
pub const UINT32_T: Datatype = 0x4c00_043d;
pub const UINT64_T: Datatype = 0x4c00_083e;
pub const C_BOOL: Datatype = 0x4c00_013f;
pub const C_FLOAT_COMPLEX: Datatype = 0x4c00_0840;
pub const C_DOUBLE_COMPLEX: Datatype = 0x4c00_1041;
pub const C_LONG_DOUBLE_COMPLEX: Datatype = 0x4c00_2042;
pub const C_FLOAT16: Datatype = 0x4c00_0246;
pub const AINT: Datatype = 0x4c00_0843;
pub const OFFSET: Datatype = 0x4c00_0844;
pub const COUNT: Datatype = 0x4c00_0845;
pub const CXX_BOOL: Datatype = 0x4c00_0133;
pub const CXX_FLOAT_COMPLEX: Datatype = 0x4c00_0834;
pub const CXX_DOUBLE_COMPLEX: Datatype = 0x4c00_1035;
pub const CXX_LONG_DOUBLE_COMPLEX: Datatype = 0x4c00_2036;

// Datatype combiners (MPI_Type_get_envelope).
pub const COMBINER_NAMED: c_int = 1;
pub const COMBINER_DUP: c_int = 2;
pub const COMBINER_CONTIGUOUS: c_int = 3;
pub const COMBINER_VECTOR: c_int = 4;
pub const COMBINER_HVECTOR: c_int = 6;
pub const COMBINER_INDEXED: c_int = 7;
pub const COMBINER_HINDEXED: c_int = 9;
pub const COMBINER_INDEXED_BLOCK: c_int = 10;
pub const COMBINER_STRUCT: c_int = 12;
pub const COMBINER_SUBARRAY: c_int = 13;
pub const COMBINER_DARRAY: c_int = 14;
pub const COMBINER_RESIZED: c_int = 18;
pub const COMBINER_HINDEXED_BLOCK: c_int = 19;
/// MPI-4.1 (`MPI_Type_get_value_index`); MPICH 4.1's value.
pub const COMBINER_VALUE_INDEX: c_int = 20;
pub const ORDER_C: c_int = 56;
pub const ORDER_FORTRAN: c_int = 57;

// Reduction operations: OP_BUILTIN + 1.. (MPICH's order).
pub const OP_NULL: Op = 0x1800_0000;
pub const OP_BUILTIN: u32 = handle::BUILTIN | handle::OP;
pub const MAX: Op = 0x5800_0001;
pub const MIN: Op = 0x5800_0002;
pub const SUM: Op = 0x5800_0003;
pub const PROD: Op = 0x5800_0004;
pub const LAND: Op = 0x5800_0005;
pub const BAND: Op = 0x5800_0006;
pub const LOR: Op = 0x5800_0007;
pub const BOR: Op = 0x5800_0008;
pub const LXOR: Op = 0x5800_0009;
pub const BXOR: Op = 0x5800_000a;
pub const MINLOC: Op = 0x5800_000b;
pub const MAXLOC: Op = 0x5800_000c;
pub const REPLACE: Op = 0x5800_000d;
pub const NO_OP: Op = 0x5800_000e;

// Requests: REQUEST_DIRECT | generation << REQUEST_INDEX_BITS | slot index (the 26 bits below
// the handle kind: the slot's generation makes a stale handle invalid). Matched messages of
// MPI_Mprobe have handles of their own (`p2p::mprobe`).
pub const REQUEST_NULL: Request = 0x2c00_0000;
pub const REQUEST_DIRECT: u32 = handle::DIRECT | handle::REQUEST;
/// Bits of a request handle that name its slot.
pub const REQUEST_INDEX_BITS: u32 = 18;
/// Bits of a request handle that carry its slot's generation.
pub const REQUEST_GENERATION_BITS: u32 = 8;
/// Slots the request table may grow to.
pub const REQUEST_MAX: usize = 1 << REQUEST_INDEX_BITS;
pub const MESSAGE_NULL: Message = 0x2c00_0000;
pub const MESSAGE_NO_PROC: Message = 0x6c00_0000;

// Error handlers.
pub const ERRHANDLER_NULL: Errhandler = 0x1400_0000;
pub const ERRORS_ARE_FATAL: Errhandler = 0x5400_0000;
pub const ERRORS_RETURN: Errhandler = 0x5400_0001;
pub const ERRORS_ABORT: Errhandler = 0x5400_0003;

// Info, windows, keys.
pub const INFO_NULL: Info = 0x1c00_0000;
pub const INFO_ENV: Info = 0x5c00_0001;
pub const WIN_NULL: Win = 0x2000_0000;
pub const SESSION_NULL: Session = 0x3800_0000;
pub const WIN_FLAVOR_CREATE: c_int = 1;
pub const WIN_FLAVOR_ALLOCATE: c_int = 2;
pub const WIN_FLAVOR_DYNAMIC: c_int = 3;
pub const WIN_FLAVOR_SHARED: c_int = 4;
pub const WIN_SEPARATE: c_int = 1;
pub const WIN_UNIFIED: c_int = 2;
/// File access modes (`MPI_File_open`; MPICH's `mpio.h`).
pub const MODE_CREATE: c_int = 1;
pub const MODE_RDONLY: c_int = 2;
pub const MODE_WRONLY: c_int = 4;
pub const MODE_RDWR: c_int = 8;
pub const MODE_DELETE_ON_CLOSE: c_int = 16;
pub const MODE_UNIQUE_OPEN: c_int = 32;
pub const MODE_EXCL: c_int = 64;
pub const MODE_APPEND: c_int = 128;
pub const MODE_SEQUENTIAL: c_int = 256;
pub const SEEK_SET: c_int = 600;
pub const SEEK_CUR: c_int = 602;
pub const SEEK_END: c_int = 604;
pub const DISPLACEMENT_CURRENT: Offset = -54_278_278;
pub const MAX_DATAREP_STRING: usize = 128;
pub const MAX_PSET_NAME_LEN: usize = 256;
pub const MAX_STRINGTAG_LEN: usize = 256;
pub const KEYVAL_INVALID: c_int = 0x2400_0000;
pub const TAG_UB: c_int = 0x6440_0001;
pub const HOST: c_int = 0x6440_0003;
pub const IO: c_int = 0x6440_0005;
pub const WTIME_IS_GLOBAL: c_int = 0x6440_0007;
pub const UNIVERSE_SIZE: c_int = 0x6440_0009;
pub const LASTUSEDCODE: c_int = 0x6440_000b;
pub const APPNUM: c_int = 0x6440_000d;

// Sentinel pointers.
/// `MPI_BOTTOM`: address 0 (a buffer argument then names absolute addresses).
pub const BOTTOM: usize = 0;
/// `MPI_IN_PLACE`.
pub const IN_PLACE: usize = usize::MAX;
/// `MPI_STATUS_IGNORE` and `MPI_STATUSES_IGNORE`.
pub const STATUS_IGNORE: usize = 1;

// Error classes, MPICH's numbering. Every code this library returns is a class.
pub const SUCCESS: c_int = 0;
pub const ERR_BUFFER: c_int = 1;
pub const ERR_COUNT: c_int = 2;
pub const ERR_TYPE: c_int = 3;
pub const ERR_TAG: c_int = 4;
pub const ERR_COMM: c_int = 5;
pub const ERR_RANK: c_int = 6;
pub const ERR_ROOT: c_int = 7;
pub const ERR_GROUP: c_int = 8;
pub const ERR_OP: c_int = 9;
pub const ERR_TOPOLOGY: c_int = 10;
pub const ERR_DIMS: c_int = 11;
pub const ERR_ARG: c_int = 12;
pub const ERR_UNKNOWN: c_int = 13;
pub const ERR_TRUNCATE: c_int = 14;
pub const ERR_OTHER: c_int = 15;
pub const ERR_INTERN: c_int = 16;
pub const ERR_IN_STATUS: c_int = 17;
pub const ERR_PENDING: c_int = 18;
pub const ERR_REQUEST: c_int = 19;
pub const ERR_ACCESS: c_int = 20;
pub const ERR_AMODE: c_int = 21;
pub const ERR_BAD_FILE: c_int = 22;
pub const ERR_CONVERSION: c_int = 23;
pub const ERR_DUP_DATAREP: c_int = 24;
pub const ERR_FILE_EXISTS: c_int = 25;
pub const ERR_FILE_IN_USE: c_int = 26;
pub const ERR_FILE: c_int = 27;
pub const ERR_INFO: c_int = 28;
pub const ERR_INFO_KEY: c_int = 29;
pub const ERR_INFO_VALUE: c_int = 30;
pub const ERR_INFO_NOKEY: c_int = 31;
pub const ERR_IO: c_int = 32;
pub const ERR_NAME: c_int = 33;
pub const ERR_NO_MEM: c_int = 34;
pub const ERR_NOT_SAME: c_int = 35;
pub const ERR_NO_SPACE: c_int = 36;
pub const ERR_NO_SUCH_FILE: c_int = 37;
pub const ERR_PORT: c_int = 38;
pub const ERR_QUOTA: c_int = 39;
pub const ERR_READ_ONLY: c_int = 40;
pub const ERR_SERVICE: c_int = 41;
pub const ERR_SPAWN: c_int = 42;
pub const ERR_UNSUPPORTED_DATAREP: c_int = 43;
pub const ERR_UNSUPPORTED_OPERATION: c_int = 44;
pub const ERR_WIN: c_int = 45;
pub const ERR_BASE: c_int = 46;
pub const ERR_LOCKTYPE: c_int = 47;
pub const ERR_KEYVAL: c_int = 48;
pub const ERR_RMA_CONFLICT: c_int = 49;
pub const ERR_RMA_SYNC: c_int = 50;
pub const ERR_SIZE: c_int = 51;
pub const ERR_DISP: c_int = 52;
pub const ERR_ASSERT: c_int = 53;
pub const ERR_RMA_RANGE: c_int = 55;
pub const ERR_RMA_ATTACH: c_int = 56;
pub const ERR_RMA_SHARED: c_int = 57;
pub const ERR_RMA_FLAVOR: c_int = 58;
pub const ERR_SESSION: c_int = 75;
pub const ERR_PROC_ABORTED: c_int = 76;
pub const ERR_VALUE_TOO_LARGE: c_int = 77;
pub const ERR_LASTCODE: c_int = 0x3fff_ffff;
/// Extension class (the MPI fault-tolerance proposal's name, MPICH's value): the peer of an
/// operation died.
pub const ERRX_PROC_FAILED: c_int = 101;
pub const ERRX_PROC_FAILED_PENDING: c_int = 102;
pub const ERRX_REVOKED: c_int = 103;
/// nemesis's fault-tolerance classes (`crate::ft`), above MPICH's extension classes (101–105):
/// the program is not send-deterministic (a re-executed send differs from the first run's).
pub const ERRX_SEND_DETERMINISM: c_int = 120;
/// The sender log reached its bounds (`NEMESIS_FT_LOG_MAX`, `NEMESIS_FT_SPILL_MAX`).
pub const ERRX_LOG_EXHAUSTED: c_int = 121;
/// A restarted process communicated before `MPIX_Checkpoint_restore`.
pub const ERRX_NOT_RESTORED: c_int = 122;
/// The last predefined class (`MPI_LASTUSEDCODE` before the program adds any).
pub const ERRX_LAST: c_int = ERRX_NOT_RESTORED;

#[cfg(test)]
mod tests {
    use std::collections::HashMap;

    use super::*;

    /// The integer value of every `#define NAME VALUE` (decimal, hex, negative, `NULL`, or a cast of
    /// one, or another such name) and of every enumerator of a `MPI_` name in the header `text`
    /// (`NAME = VALUE`, or the previous enumerator's value plus one).
    pub(crate) fn header_values(text: &str) -> HashMap<String, i64> {
        let parse = |v: &str| {
            let v = v.split("/*").next().unwrap_or("").trim();
            // `((MPI_Op)0x58000001)`, `(MPI_Op)(0x58000001)`, `(-1)`: the last number in it.
            let v = v.rsplit(')').find(|p| !p.trim().is_empty()).unwrap_or(v);
            let v = v.trim().trim_start_matches('(').trim_end_matches(')').trim().trim_end_matches(',');
            if let Some(h) = v.strip_prefix("0x") {
                // Handles are C ints: 0x8c000000 is negative.
                u32::from_str_radix(h, 16).ok().map(|x| i64::from(x as i32))
            } else if v == "NULL" {
                Some(0)
            } else {
                v.parse::<i64>().ok()
            }
        };
        let mut out = HashMap::new();
        let mut aliases = Vec::new();
        // Inside an enum: the value of the last enumerator.
        let mut in_enum: Option<i64> = None;
        for line in text.lines() {
            let line = line.split("/*").next().unwrap_or("").trim();
            if line.starts_with("typedef enum") || line.starts_with("enum") {
                in_enum = Some(-1);
            }
            if let Some(last) = in_enum.as_mut() {
                // The enumerators of this line: after `{` if any, before `}` if any.
                let body = line.split_once('{').map_or(line, |(_, b)| b);
                let body = body.split('}').next().unwrap_or(body);
                if !line.starts_with("typedef enum") || line.contains('{') {
                    for item in body.split(',').map(str::trim).filter(|i| !i.is_empty()) {
                        let (name, value) = match item.split_once('=') {
                            Some((n, v)) => {
                                let v = v.trim();
                                (n.trim(), parse(v).or_else(|| out.get(v).copied()))
                            }
                            None => (item, Some(*last + 1)),
                        };
                        if let Some(v) = value {
                            *last = v;
                            out.insert(name.to_string(), v);
                        }
                    }
                }
                if line.contains('}') {
                    in_enum = None;
                }
                continue;
            }
            let Some(rest) = line.strip_prefix("#define ") else { continue };
            let mut it = rest.split_whitespace();
            let (Some(name), rest) = (it.next(), it.collect::<Vec<_>>().join(" ")) else { continue };
            if name.contains('(') {
                continue;
            }
            match parse(&rest) {
                Some(x) => {
                    out.insert(name.to_string(), x);
                }
                None => aliases.push((name.to_string(), rest.trim_matches(|c| c == '(' || c == ')').to_string())),
            }
        }
        // `MPI_LONG_LONG MPI_LONG_LONG_INT`, `MPI_INTEGER16 ((MPI_Datatype)MPI_DATATYPE_NULL)`.
        // `MPIX_ERR_PROC_FAILED MPICH_ERR_FIRST_MPIX+1`: sums of names and numbers.
        for (name, target) in aliases {
            let target = target.rsplit(')').next().unwrap_or(&target).trim().to_string();
            let terms: Option<Vec<i64>> =
                target.split('+').map(|t| out.get(t.trim()).copied().or_else(|| parse(t.trim()))).collect();
            if let Some(terms) = terms {
                out.insert(name, terms.iter().sum());
            }
        }
        out
    }

    fn ours() -> HashMap<String, i64> {
        header_values(&std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/include/mpi.h")).unwrap())
    }

    #[test]
    fn the_header_and_the_library_agree() {
        let h = ours();
        let want: &[(&str, i64)] = &[
            ("MPI_VERSION", VERSION.into()),
            ("MPI_SUBVERSION", SUBVERSION.into()),
            ("MPI_ANY_SOURCE", ANY_SOURCE.into()),
            ("MPI_ANY_TAG", ANY_TAG.into()),
            ("MPI_PROC_NULL", PROC_NULL.into()),
            ("MPI_ROOT", ROOT.into()),
            ("MPI_UNDEFINED", UNDEFINED.into()),
            ("MPI_COMM_TYPE_SHARED", COMM_TYPE_SHARED.into()),
            ("MPI_COMM_TYPE_HW_GUIDED", COMM_TYPE_HW_GUIDED.into()),
            ("MPI_COMM_TYPE_HW_UNGUIDED", COMM_TYPE_HW_UNGUIDED.into()),
            ("MPI_COMM_TYPE_RESOURCE_GUIDED", COMM_TYPE_RESOURCE_GUIDED.into()),
            ("MPI_MAX_PROCESSOR_NAME", MAX_PROCESSOR_NAME as i64),
            ("MPI_MAX_ERROR_STRING", MAX_ERROR_STRING as i64),
            ("MPI_MAX_LIBRARY_VERSION_STRING", MAX_LIBRARY_VERSION_STRING as i64),
            ("MPI_MAX_OBJECT_NAME", MAX_OBJECT_NAME as i64),
            ("MPI_MAX_PORT_NAME", MAX_PORT_NAME as i64),
            ("MPI_MAX_INFO_KEY", MAX_INFO_KEY as i64),
            ("MPI_MAX_INFO_VAL", MAX_INFO_VAL as i64),
            ("MPI_BSEND_OVERHEAD", BSEND_OVERHEAD as i64),
            ("MPI_THREAD_SINGLE", THREAD_SINGLE.into()),
            ("MPI_THREAD_FUNNELED", THREAD_FUNNELED.into()),
            ("MPI_THREAD_SERIALIZED", THREAD_SERIALIZED.into()),
            ("MPI_THREAD_MULTIPLE", THREAD_MULTIPLE.into()),
            ("MPI_IDENT", IDENT.into()),
            ("MPI_CONGRUENT", CONGRUENT.into()),
            ("MPI_SIMILAR", SIMILAR.into()),
            ("MPI_UNEQUAL", UNEQUAL.into()),
            ("MPI_COMM_NULL", COMM_NULL.into()),
            ("MPI_COMM_WORLD", COMM_WORLD.into()),
            ("MPI_COMM_SELF", COMM_SELF.into()),
            ("MPI_GROUP_NULL", GROUP_NULL.into()),
            ("MPI_GROUP_EMPTY", GROUP_EMPTY.into()),
            ("MPI_DATATYPE_NULL", DATATYPE_NULL.into()),
            ("MPI_LONG_LONG", LONG_LONG.into()),
            ("MPI_FLOAT_INT", FLOAT_INT.into()),
            ("MPI_DOUBLE_INT", DOUBLE_INT.into()),
            ("MPI_LONG_INT", LONG_INT.into()),
            ("MPI_SHORT_INT", SHORT_INT.into()),
            ("MPI_2INT", TWO_INT.into()),
            ("MPI_LONG_DOUBLE_INT", LONG_DOUBLE_INT.into()),
            ("MPI_COMBINER_NAMED", COMBINER_NAMED.into()),
            ("MPI_COMBINER_DUP", COMBINER_DUP.into()),
            ("MPI_COMBINER_CONTIGUOUS", COMBINER_CONTIGUOUS.into()),
            ("MPI_COMBINER_VECTOR", COMBINER_VECTOR.into()),
            ("MPI_COMBINER_HVECTOR", COMBINER_HVECTOR.into()),
            ("MPI_COMBINER_INDEXED", COMBINER_INDEXED.into()),
            ("MPI_COMBINER_HINDEXED", COMBINER_HINDEXED.into()),
            ("MPI_COMBINER_INDEXED_BLOCK", COMBINER_INDEXED_BLOCK.into()),
            ("MPI_COMBINER_HINDEXED_BLOCK", COMBINER_HINDEXED_BLOCK.into()),
            ("MPI_COMBINER_VALUE_INDEX", COMBINER_VALUE_INDEX.into()),
            ("MPI_SESSION_NULL", SESSION_NULL.into()),
            ("MPI_WIN_FLAVOR_CREATE", WIN_FLAVOR_CREATE.into()),
            ("MPI_WIN_FLAVOR_ALLOCATE", WIN_FLAVOR_ALLOCATE.into()),
            ("MPI_WIN_FLAVOR_DYNAMIC", WIN_FLAVOR_DYNAMIC.into()),
            ("MPI_WIN_FLAVOR_SHARED", WIN_FLAVOR_SHARED.into()),
            ("MPI_WIN_SEPARATE", WIN_SEPARATE.into()),
            ("MPI_WIN_UNIFIED", WIN_UNIFIED.into()),
            ("MPI_MODE_CREATE", MODE_CREATE.into()),
            ("MPI_MODE_RDONLY", MODE_RDONLY.into()),
            ("MPI_MODE_WRONLY", MODE_WRONLY.into()),
            ("MPI_MODE_RDWR", MODE_RDWR.into()),
            ("MPI_MODE_DELETE_ON_CLOSE", MODE_DELETE_ON_CLOSE.into()),
            ("MPI_MODE_UNIQUE_OPEN", MODE_UNIQUE_OPEN.into()),
            ("MPI_MODE_EXCL", MODE_EXCL.into()),
            ("MPI_MODE_APPEND", MODE_APPEND.into()),
            ("MPI_MODE_SEQUENTIAL", MODE_SEQUENTIAL.into()),
            ("MPI_SEEK_SET", SEEK_SET.into()),
            ("MPI_SEEK_CUR", SEEK_CUR.into()),
            ("MPI_SEEK_END", SEEK_END.into()),
            ("MPI_DISPLACEMENT_CURRENT", DISPLACEMENT_CURRENT),
            ("MPI_MAX_DATAREP_STRING", MAX_DATAREP_STRING as i64),
            ("MPI_MAX_PSET_NAME_LEN", MAX_PSET_NAME_LEN as i64),
            ("MPI_MAX_STRINGTAG_LEN", MAX_STRINGTAG_LEN as i64),
            ("MPI_COMBINER_STRUCT", COMBINER_STRUCT.into()),
            ("MPI_COMBINER_SUBARRAY", COMBINER_SUBARRAY.into()),
            ("MPI_COMBINER_DARRAY", COMBINER_DARRAY.into()),
            ("MPI_COMBINER_RESIZED", COMBINER_RESIZED.into()),
            ("MPI_ORDER_C", ORDER_C.into()),
            ("MPI_ORDER_FORTRAN", ORDER_FORTRAN.into()),
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
            ("MPI_MINLOC", MINLOC.into()),
            ("MPI_MAXLOC", MAXLOC.into()),
            ("MPI_REPLACE", REPLACE.into()),
            ("MPI_NO_OP", NO_OP.into()),
            ("MPI_REQUEST_NULL", REQUEST_NULL.into()),
            ("MPI_MESSAGE_NULL", MESSAGE_NULL.into()),
            ("MPI_MESSAGE_NO_PROC", MESSAGE_NO_PROC.into()),
            ("MPI_ERRHANDLER_NULL", ERRHANDLER_NULL.into()),
            ("MPI_ERRORS_ARE_FATAL", ERRORS_ARE_FATAL.into()),
            ("MPI_ERRORS_RETURN", ERRORS_RETURN.into()),
            ("MPI_ERRORS_ABORT", ERRORS_ABORT.into()),
            ("MPI_INFO_NULL", INFO_NULL.into()),
            ("MPI_INFO_ENV", INFO_ENV.into()),
            ("MPI_WIN_NULL", WIN_NULL.into()),
            ("MPI_KEYVAL_INVALID", KEYVAL_INVALID.into()),
            ("MPI_TAG_UB", TAG_UB.into()),
            ("MPI_HOST", HOST.into()),
            ("MPI_IO", IO.into()),
            ("MPI_WTIME_IS_GLOBAL", WTIME_IS_GLOBAL.into()),
            ("MPI_UNIVERSE_SIZE", UNIVERSE_SIZE.into()),
            ("MPI_LASTUSEDCODE", LASTUSEDCODE.into()),
            ("MPI_APPNUM", APPNUM.into()),
            ("MPI_BOTTOM", BOTTOM as i64),
            ("MPI_IN_PLACE", -1),
            ("MPI_STATUS_IGNORE", STATUS_IGNORE as i64),
            ("MPI_STATUSES_IGNORE", STATUS_IGNORE as i64),
            ("MPI_F_STATUS_SIZE", 5),
            ("MPI_SUCCESS", SUCCESS.into()),
            ("MPI_ERR_LASTCODE", ERR_LASTCODE.into()),
            ("MPIX_ERR_PROC_FAILED", ERRX_PROC_FAILED.into()),
            ("MPIX_ERR_PROC_FAILED_PENDING", ERRX_PROC_FAILED_PENDING.into()),
            ("MPIX_ERR_REVOKED", ERRX_REVOKED.into()),
            ("MPIX_ERR_SEND_DETERMINISM", ERRX_SEND_DETERMINISM.into()),
            ("MPIX_ERR_LOG_EXHAUSTED", ERRX_LOG_EXHAUSTED.into()),
            ("MPIX_ERR_NOT_RESTORED", ERRX_NOT_RESTORED.into()),
        ];
        for (name, v) in want {
            assert_eq!(h.get(*name), Some(v), "{name}");
        }
        // Every predefined basic datatype and every error class by its name.
        for t in crate::datatype::BUILTIN.iter() {
            assert_eq!(h.get(t.name), Some(&i64::from(t.handle)), "{}", t.name);
        }
        for &(code, name, _) in crate::error::CLASSES.iter() {
            assert_eq!(h.get(name), Some(&i64::from(code)), "{name}");
        }
        assert_eq!(std::mem::size_of::<Status>(), 20, "MPI_Status is 5 ints");
    }

    #[test]
    fn every_shared_constant_has_mpichs_value() {
        let path = "/usr/include/x86_64-linux-gnu/mpich/mpi.h";
        let Ok(mut text) = std::fs::read_to_string(path) else {
            assert!(std::env::var("CI").as_deref() != Ok("true"), "{path} is missing: install libmpich-dev");
            eprintln!("skipped: {path} is missing (install libmpich-dev)");
            return;
        };
        // MPICH's mpi.h includes mpio.h (the I/O constants).
        text += &std::fs::read_to_string(path.replace("mpi.h", "mpio.h")).unwrap_or_default();
        let mpich = header_values(&text);
        let ours = ours();
        // The version is what this library implements (4.1), not MPICH's (4.0).
        let differ = ["MPI_VERSION", "MPI_SUBVERSION"];
        let mut shared = 0;
        for (name, v) in &ours {
            if differ.contains(&name.as_str()) {
                continue;
            }
            if let Some(m) = mpich.get(name) {
                assert_eq!(v, m, "{name}: ours {v:#x}, MPICH's {m:#x}");
                shared += 1;
            }
        }
        // Everything but our own markers (NEMESIS_MPI) and MPI-4.1's additions (MPICH 4.0.2 has
        // MPI-4.0) is in MPICH's header.
        // MPI-4.1 names MPICH 4.0 lacks (MPICH 4.1's and 4.2's values).
        let newer = ["MPI_BUFFER_AUTOMATIC", "MPI_COMBINER_VALUE_INDEX", "MPI_COMM_TYPE_RESOURCE_GUIDED"];
        // nemesis's own extension classes (fault tolerance), above MPICH's.
        let own = ["MPIX_ERR_SEND_DETERMINISM", "MPIX_ERR_LOG_EXHAUSTED", "MPIX_ERR_NOT_RESTORED"];
        for n in own {
            assert!(!mpich.contains_key(n), "{n} is MPICH's now");
        }
        let mpich_last = mpich.get("MPICH_ERR_LAST_MPIX").copied().unwrap_or(105);
        assert!(i64::from(ERRX_SEND_DETERMINISM) > mpich_last, "our classes collide with MPICH's ({mpich_last})");
        let missing: Vec<&String> = ours
            .keys()
            .filter(|n| !mpich.contains_key(*n) && n.starts_with("MPI") && !differ.contains(&n.as_str()))
            .filter(|n| !newer.contains(&n.as_str()) && !own.contains(&n.as_str()))
            .collect();
        assert!(missing.is_empty(), "not in MPICH's header: {missing:?}");
        assert!(shared > 200, "only {shared} constants compared: is the parser broken?");
    }

    #[test]
    fn the_status_count_round_trips_with_the_cancelled_bit() {
        for n in [0i64, 1, 8, i32::MAX as i64, 1 << 32, (1 << 40) + 5, (1 << 62) - 1] {
            let mut s = Status::new(3, 4, 0, n);
            assert_eq!(s.count(), n);
            assert!(!s.cancelled());
            s.set_cancelled(true);
            assert_eq!(s.count(), n);
            assert!(s.cancelled());
            s.set_count(n / 2);
            assert_eq!((s.count(), s.cancelled()), (n / 2, true));
        }
    }
}
