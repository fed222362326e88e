//! The predefined basic datatypes: MPICH's handles, each type's size (bits 8–15 of its handle),
//! what its bytes are (for reductions) and which class of MPI-3.1 §5.9.2 it belongs to (which
//! decides the operations that apply).
//!
//! A handle is found by its low byte, unique among the basic types: one load from a 256-entry
//! table and one comparison recognise it (the send/receive fast path), the size is then a shift.

use std::ffi::c_int;

use crate::abi::{self, Datatype};

/// What a datatype's bytes are, for reductions.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// Characters (`MPI_CHAR`, `MPI_WCHAR`, `MPI_CHARACTER`): no reduction applies (MPI-4.1
    /// §6.9.2; MPICH accepts `MPI_CHAR` and `MPI_CHARACTER` as integers, the standard does not).
    Char,
    /// Uninterpreted bytes (`MPI_BYTE`, `MPI_PACKED`).
    Byte,
    I8,
    I16,
    I32,
    I64,
    U8,
    U16,
    U32,
    U64,
    F16,
    F32,
    F64,
    /// x87 extended precision in 16 bytes (`long double`).
    F80,
    /// Fortran's `REAL*16`: IEEE binary128 with gfortran (no reduction kernel yet).
    F128,
    /// Complex numbers of two `F32`, `F64`, `F80` or `F128`.
    C32,
    C64,
    C80,
    C128,
    /// Pairs of one kind (`MPI_2INT`...): MINLOC and MAXLOC only.
    Pair,
    /// `MPI_LB` and `MPI_UB` (MPI-1 markers of size 0).
    Bound,
}

/// The datatype classes of MPI-3.1 §5.9.2, which decide the operations that apply.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Class {
    CInt,
    FortranInt,
    Float,
    Logical,
    Complex,
    Byte,
    /// `MPI_AINT`, `MPI_OFFSET`, `MPI_COUNT`.
    MultiLanguage,
    /// Pairs for MINLOC and MAXLOC.
    Pair,
    /// Characters, packed data, markers: no operation.
    None,
}

/// One predefined basic datatype.
#[derive(Clone, Copy, Debug)]
pub struct Builtin {
    /// The C name.
    pub name: &'static str,
    pub handle: Datatype,
    pub kind: Kind,
    pub class: Class,
}

impl Builtin {
    /// Bytes per element.
    pub const fn size(&self) -> usize {
        size_in(self.handle)
    }
}

/// The size encoded in a basic type's handle.
const fn size_in(h: Datatype) -> usize {
    ((h as u32 >> 8) & 0xff) as usize
}

const fn int(name: &'static str, handle: Datatype, signed: bool, class: Class) -> Builtin {
    let kind = match (size_in(handle), signed) {
        (1, true) => Kind::I8,
        (2, true) => Kind::I16,
        (4, true) => Kind::I32,
        (8, true) => Kind::I64,
        (1, false) => Kind::U8,
        (2, false) => Kind::U16,
        (4, false) => Kind::U32,
        _ => Kind::U64,
    };
    Builtin { name, handle, kind, class }
}

const fn of(name: &'static str, handle: Datatype, kind: Kind, class: Class) -> Builtin {
    Builtin { name, handle, kind, class }
}

use Class as C;
use Kind as K;
use abi as a;

/// Every predefined basic datatype of MPICH's header (`MPI_LONG_LONG` is `MPI_LONG_LONG_INT`,
/// `MPI_C_COMPLEX` is `MPI_C_FLOAT_COMPLEX`). C's `long` and `MPI_AINT`/`MPI_OFFSET`/`MPI_COUNT`
/// are 8 bytes (LP64), `long double` 16.
pub static BUILTIN: [Builtin; 60] = [
    of("MPI_CHAR", a::CHAR, K::Char, C::None),
    int("MPI_SIGNED_CHAR", a::SIGNED_CHAR, true, C::CInt),
    int("MPI_UNSIGNED_CHAR", a::UNSIGNED_CHAR, false, C::CInt),
    of("MPI_BYTE", a::BYTE, K::Byte, C::Byte),
    of("MPI_WCHAR", a::WCHAR, K::Char, C::None),
    int("MPI_SHORT", a::SHORT, true, C::CInt),
    int("MPI_UNSIGNED_SHORT", a::UNSIGNED_SHORT, false, C::CInt),
    int("MPI_INT", a::INT, true, C::CInt),
    int("MPI_UNSIGNED", a::UNSIGNED, false, C::CInt),
    int("MPI_LONG", a::LONG, true, C::CInt),
    int("MPI_UNSIGNED_LONG", a::UNSIGNED_LONG, false, C::CInt),
    of("MPI_FLOAT", a::FLOAT, K::F32, C::Float),
    of("MPI_DOUBLE", a::DOUBLE, K::F64, C::Float),
    of("MPI_LONG_DOUBLE", a::LONG_DOUBLE, K::F80, C::Float),
    int("MPI_LONG_LONG_INT", a::LONG_LONG_INT, true, C::CInt),
    int("MPI_UNSIGNED_LONG_LONG", a::UNSIGNED_LONG_LONG, false, C::CInt),
    of("MPI_PACKED", a::PACKED, K::Byte, C::None),
    of("MPI_LB", a::LB, K::Bound, C::None),
    of("MPI_UB", a::UB, K::Bound, C::None),
    of("MPI_2INT", a::TWO_INT, K::Pair, C::Pair),
    of("MPI_COMPLEX", a::COMPLEX, K::C32, C::Complex),
    of("MPI_DOUBLE_COMPLEX", a::DOUBLE_COMPLEX, K::C64, C::Complex),
    int("MPI_LOGICAL", a::LOGICAL, true, C::Logical),
    of("MPI_REAL", a::REAL, K::F32, C::Float),
    of("MPI_DOUBLE_PRECISION", a::DOUBLE_PRECISION, K::F64, C::Float),
    int("MPI_INTEGER", a::INTEGER, true, C::FortranInt),
    of("MPI_2INTEGER", a::TWO_INTEGER, K::Pair, C::Pair),
    of("MPI_2REAL", a::TWO_REAL, K::Pair, C::Pair),
    of("MPI_2DOUBLE_PRECISION", a::TWO_DOUBLE_PRECISION, K::Pair, C::Pair),
    of("MPI_CHARACTER", a::CHARACTER, K::Char, C::None),
    of("MPI_REAL4", a::REAL4, K::F32, C::Float),
    of("MPI_REAL8", a::REAL8, K::F64, C::Float),
    of("MPI_REAL16", a::REAL16, K::F128, C::Float),
    of("MPI_COMPLEX8", a::COMPLEX8, K::C32, C::Complex),
    of("MPI_COMPLEX16", a::COMPLEX16, K::C64, C::Complex),
    of("MPI_COMPLEX32", a::COMPLEX32, K::C128, C::Complex),
    int("MPI_INTEGER1", a::INTEGER1, true, C::FortranInt),
    int("MPI_INTEGER2", a::INTEGER2, true, C::FortranInt),
    int("MPI_INTEGER4", a::INTEGER4, true, C::FortranInt),
    int("MPI_INTEGER8", a::INTEGER8, true, C::FortranInt),
    int("MPI_INT8_T", a::INT8_T, true, C::CInt),
    int("MPI_INT16_T", a::INT16_T, true, C::CInt),
    int("MPI_INT32_T", a::INT32_T, true, C::CInt),
    int("MPI_INT64_T", a::INT64_T, true, C::CInt),
    int("MPI_UINT8_T", a::UINT8_T, false, C::CInt),
    int("MPI_UINT16_T", a::UINT16_T, false, C::CInt),
    int("MPI_UINT32_T", a::UINT32_T, false, C::CInt),
    int("MPI_UINT64_T", a::UINT64_T, false, C::CInt),
    int("MPI_C_BOOL", a::C_BOOL, false, C::Logical),
    of("MPI_C_FLOAT_COMPLEX", a::C_FLOAT_COMPLEX, K::C32, C::Complex),
    of("MPI_C_DOUBLE_COMPLEX", a::C_DOUBLE_COMPLEX, K::C64, C::Complex),
    of("MPI_C_LONG_DOUBLE_COMPLEX", a::C_LONG_DOUBLE_COMPLEX, K::C80, C::Complex),
    of("MPIX_C_FLOAT16", a::C_FLOAT16, K::F16, C::Float),
    int("MPI_AINT", a::AINT, true, C::MultiLanguage),
    int("MPI_OFFSET", a::OFFSET, true, C::MultiLanguage),
    int("MPI_COUNT", a::COUNT, true, C::MultiLanguage),
    int("MPI_CXX_BOOL", a::CXX_BOOL, false, C::Logical),
    of("MPI_CXX_FLOAT_COMPLEX", a::CXX_FLOAT_COMPLEX, K::C32, C::Complex),
    of("MPI_CXX_DOUBLE_COMPLEX", a::CXX_DOUBLE_COMPLEX, K::C64, C::Complex),
    of("MPI_CXX_LONG_DOUBLE_COMPLEX", a::CXX_LONG_DOUBLE_COMPLEX, K::C80, C::Complex),
];

/// Index into [`BUILTIN`] by a handle's low byte (`u8::MAX`: none).
static SLOT: [u8; 256] = {
    let mut t = [u8::MAX; 256];
    let mut i = 0;
    while i < BUILTIN.len() {
        let low = (BUILTIN[i].handle as u32 & 0xff) as usize;
        assert!(t[low] == u8::MAX, "two basic types share a low byte");
        t[low] = i as u8;
        i += 1;
    }
    t
};

/// The full handle by its low byte, for the fast path's one comparison. An unused entry holds a
/// value whose low byte differs from its index: no handle equals it.
static HANDLE: [u32; 256] = {
    let mut t = [0u32; 256];
    let mut i = 0;
    while i < 256 {
        t[i] = i as u32 ^ 0x80;
        i += 1;
    }
    let mut i = 0;
    while i < BUILTIN.len() {
        t[(BUILTIN[i].handle as u32 & 0xff) as usize] = BUILTIN[i].handle as u32;
        i += 1;
    }
    t
};

/// The index in [`BUILTIN`] of handle `dt`, if it is a predefined basic type.
#[inline]
pub fn index_of(dt: Datatype) -> Option<usize> {
    let i = usize::from(SLOT[(dt as u32 & 0xff) as usize]);
    BUILTIN.get(i).filter(|b| b.handle == dt).map(|_| i)
}

/// The predefined basic type of handle `dt`, if it is one.
#[inline]
pub fn lookup(dt: Datatype) -> Option<&'static Builtin> {
    index_of(dt).map(|i| &BUILTIN[i])
}

/// Bytes per element of `dt`, if it is a predefined basic type: one load and one comparison.
#[inline(always)]
pub fn size_of_handle(dt: Datatype) -> Option<usize> {
    if HANDLE[(dt as u32 & 0xff) as usize] == dt as u32 { Some(size_in(dt)) } else { None }
}

/// The name of a predefined basic type's handle, for messages.
pub fn name_of(dt: c_int) -> Option<&'static str> {
    lookup(dt).map(|b| b.name)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn handles_find_their_types_and_garbage_finds_none() {
        assert_eq!(lookup(abi::INT).unwrap().size(), 4);
        assert_eq!(lookup(abi::DOUBLE).unwrap().kind, Kind::F64);
        assert_eq!(lookup(abi::UINT16_T).unwrap().name, "MPI_UINT16_T");
        assert_eq!(size_of_handle(abi::LONG), Some(8));
        assert_eq!(size_of_handle(abi::CHAR), Some(1));
        assert_eq!(size_of_handle(abi::LONG_DOUBLE), Some(16));
        assert_eq!(size_of_handle(abi::C_LONG_DOUBLE_COMPLEX), Some(32));
        for bad in
            [0, -1, abi::DATATYPE_NULL, abi::COMM_WORLD, abi::INT + 0x100, abi::INT | 0x0100_0000, abi::DOUBLE_INT]
        {
            assert!(lookup(bad).is_none(), "{bad:#x}");
            assert!(size_of_handle(bad).is_none(), "{bad:#x}");
        }
        for t in BUILTIN.iter() {
            assert_eq!(size_of_handle(t.handle), Some(t.size()), "{}", t.name);
            assert_eq!(lookup(t.handle).map(|b| b.name), Some(t.name));
        }
    }

    #[test]
    fn sizes_match_the_c_types() {
        use std::ffi::*;
        use std::mem::size_of;
        let c = [
            (abi::SHORT, size_of::<c_short>()),
            (abi::INT, size_of::<c_int>()),
            (abi::LONG, size_of::<c_long>()),
            (abi::LONG_LONG, size_of::<c_longlong>()),
            (abi::AINT, size_of::<abi::Aint>()),
            (abi::OFFSET, size_of::<abi::Offset>()),
            (abi::COUNT, size_of::<abi::Count>()),
            (abi::C_BOOL, size_of::<bool>()),
            (abi::WCHAR, size_of::<libc::wchar_t>()),
        ];
        for (h, n) in c {
            assert_eq!(size_of_handle(h), Some(n), "{}", name_of(h).unwrap());
        }
    }
}
