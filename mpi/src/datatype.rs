//! Predefined datatypes: size and numeric kind of each, looked up from the handle by index.
//!
//! Only the predefined (contiguous, basic) types exist, so a message of `count` elements is
//! `count × size` contiguous bytes and the Endpoint moves bytes. The numeric kind decides which
//! reduction operations apply (MPI-3.1 §5.9.2: `MPI_CHAR` is text, not a "C integer", and takes
//! no operation; `MPI_BYTE` takes only the bitwise ones).

use std::ffi::c_int;

use crate::abi::{self, DATATYPE_BASE, DATATYPE_COUNT, Datatype};

/// What a datatype's bytes are, for reductions.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// `MPI_CHAR`: printable characters; no reduction applies.
    Char,
    /// `MPI_BYTE`: uninterpreted bytes; bitwise operations only.
    Byte,
    I8,
    I16,
    I32,
    I64,
    U8,
    U16,
    U32,
    U64,
    F32,
    F64,
}

/// One predefined datatype.
#[derive(Clone, Copy, Debug)]
pub struct Type {
    /// The C name, for messages.
    pub name: &'static str,
    /// Bytes per element.
    pub size: usize,
    pub kind: Kind,
}

const fn int_kind(size: usize, signed: bool) -> Kind {
    match (size, signed) {
        (1, true) => Kind::I8,
        (2, true) => Kind::I16,
        (4, true) => Kind::I32,
        (8, true) => Kind::I64,
        (1, false) => Kind::U8,
        (2, false) => Kind::U16,
        (4, false) => Kind::U32,
        _ => Kind::U64,
    }
}

const fn c_int_type(name: &'static str, size: usize, signed: bool) -> Type {
    Type { name, size, kind: int_kind(size, signed) }
}

use std::mem::size_of;

/// The predefined datatypes, in handle order (`abi::CHAR` is index 0). C's `long` follows the
/// platform (8 bytes on LP64).
pub static TYPES: [Type; DATATYPE_COUNT] = [
    Type { name: "MPI_CHAR", size: 1, kind: Kind::Char },
    c_int_type("MPI_SIGNED_CHAR", 1, true),
    c_int_type("MPI_UNSIGNED_CHAR", 1, false),
    Type { name: "MPI_BYTE", size: 1, kind: Kind::Byte },
    c_int_type("MPI_SHORT", size_of::<std::ffi::c_short>(), true),
    c_int_type("MPI_UNSIGNED_SHORT", size_of::<std::ffi::c_ushort>(), false),
    c_int_type("MPI_INT", size_of::<c_int>(), true),
    c_int_type("MPI_UNSIGNED", size_of::<std::ffi::c_uint>(), false),
    c_int_type("MPI_LONG", size_of::<std::ffi::c_long>(), true),
    c_int_type("MPI_UNSIGNED_LONG", size_of::<std::ffi::c_ulong>(), false),
    c_int_type("MPI_LONG_LONG", size_of::<std::ffi::c_longlong>(), true),
    c_int_type("MPI_UNSIGNED_LONG_LONG", size_of::<std::ffi::c_ulonglong>(), false),
    Type { name: "MPI_FLOAT", size: 4, kind: Kind::F32 },
    Type { name: "MPI_DOUBLE", size: 8, kind: Kind::F64 },
    c_int_type("MPI_INT8_T", 1, true),
    c_int_type("MPI_INT16_T", 2, true),
    c_int_type("MPI_INT32_T", 4, true),
    c_int_type("MPI_INT64_T", 8, true),
    c_int_type("MPI_UINT8_T", 1, false),
    c_int_type("MPI_UINT16_T", 2, false),
    c_int_type("MPI_UINT32_T", 4, false),
    c_int_type("MPI_UINT64_T", 8, false),
];

/// Bytes per element of each type, a separate small table for the send/receive fast path (one
/// load, no multiplication by the `Type` stride).
static SIZES: [u8; DATATYPE_COUNT] = {
    let mut s = [0u8; DATATYPE_COUNT];
    let mut i = 0;
    while i < DATATYPE_COUNT {
        s[i] = TYPES[i].size as u8;
        i += 1;
    }
    s
};

/// The type of handle `dt`, if it names a predefined type.
#[inline]
pub fn lookup(dt: Datatype) -> Option<&'static Type> {
    TYPES.get(dt.wrapping_sub(DATATYPE_BASE) as u32 as usize)
}

/// Bytes per element of `dt`, if it names a predefined type.
#[inline(always)]
pub fn size_of_handle(dt: Datatype) -> Option<usize> {
    SIZES.get(dt.wrapping_sub(DATATYPE_BASE) as u32 as usize).map(|&s| usize::from(s))
}

/// The handle of index `i` (for tests and messages).
pub fn handle(i: usize) -> Datatype {
    abi::DATATYPE_BASE + i as c_int
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn handles_find_their_types_and_garbage_finds_none() {
        assert_eq!(lookup(abi::INT).unwrap().size, 4);
        assert_eq!(lookup(abi::DOUBLE).unwrap().kind, Kind::F64);
        assert_eq!(lookup(abi::UINT16_T).unwrap().name, "MPI_UINT16_T");
        assert_eq!(size_of_handle(abi::LONG), Some(8));
        assert_eq!(size_of_handle(abi::CHAR), Some(1));
        for bad in [0, -1, abi::DATATYPE_NULL, abi::COMM_WORLD, abi::UINT64_T + 1, abi::DATATYPE_BASE - 1] {
            assert!(lookup(bad).is_none(), "{bad:#x}");
            assert!(size_of_handle(bad).is_none(), "{bad:#x}");
        }
        for (i, t) in TYPES.iter().enumerate() {
            assert_eq!(size_of_handle(handle(i)), Some(t.size), "{}", t.name);
        }
    }
}
