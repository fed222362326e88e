//! One-sided operations' vocabulary: what the provider offers ([`RmaCaps`]), what a peer needs
//! to reach a registered region ([`RmaKey`], exchanged as bytes), and libfabric's atomic types
//! and operations ([`FiType`], [`FiOp`], whose values are libfabric's `enum fi_datatype` and
//! `enum fi_op`). The operations themselves are [`crate::OfiNetmod`]'s `rma_*` methods (feature
//! `libfabric`); this module builds without it.
//!
//! Invariants: a key names a region of `len` bytes; an operation at `off` for `n` bytes is
//! posted only if `off + n <= len` (checked before the provider sees it), so a peer's operation
//! never reaches outside the region it was given.

/// What the provider of a netmod offers for one-sided operations.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RmaCaps {
    /// `fi_write` and `fi_read` to peers' registered regions.
    pub write: bool,
    pub read: bool,
    /// `fi_atomic`, `fi_fetch_atomic`, `fi_compare_atomic` (which types and operations:
    /// `OfiNetmod::rma_atomic_valid`).
    pub atomic: bool,
}

/// A region registered for peers' RMA: the address its byte 0 has in operations (its virtual
/// address with `FI_MR_VIRT_ADDR`, else 0), its key and its length.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RmaKey {
    pub base: u64,
    pub key: u64,
    pub len: u64,
}

impl RmaKey {
    /// Bytes of [`RmaKey::to_bytes`].
    pub const BYTES: usize = 24;

    /// The key as peers receive it (little-endian base, key, length).
    pub fn to_bytes(&self) -> [u8; RmaKey::BYTES] {
        let mut b = [0u8; RmaKey::BYTES];
        b[..8].copy_from_slice(&self.base.to_le_bytes());
        b[8..16].copy_from_slice(&self.key.to_le_bytes());
        b[16..].copy_from_slice(&self.len.to_le_bytes());
        b
    }

    /// Decodes [`RmaKey::to_bytes`]; `None` for another length.
    pub fn from_bytes(b: &[u8]) -> Option<RmaKey> {
        let b: &[u8; RmaKey::BYTES] = b.try_into().ok()?;
        let word = |i: usize| {
            let mut w = [0u8; 8];
            w.copy_from_slice(&b[i..i + 8]);
            u64::from_le_bytes(w)
        };
        Some(RmaKey { base: word(0), key: word(8), len: word(16) })
    }

    /// The operation address of `n` bytes at `off`, if inside the region.
    pub fn at(&self, off: u64, n: u64) -> Option<u64> {
        let end = off.checked_add(n)?;
        (end <= self.len).then(|| self.base.wrapping_add(off))
    }
}

/// A region this process exposed: its id (to withdraw it) and the key peers need.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RmaRegion {
    pub id: u32,
    pub key: RmaKey,
}

/// An atomic operation's element type (libfabric's `enum fi_datatype`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u32)]
pub enum FiType {
    I8 = 0,
    U8 = 1,
    I16 = 2,
    U16 = 3,
    I32 = 4,
    U32 = 5,
    I64 = 6,
    U64 = 7,
    F32 = 8,
    F64 = 9,
}

impl FiType {
    /// Bytes of one element.
    pub const fn size(self) -> usize {
        match self {
            FiType::I8 | FiType::U8 => 1,
            FiType::I16 | FiType::U16 => 2,
            FiType::I32 | FiType::U32 | FiType::F32 => 4,
            FiType::I64 | FiType::U64 | FiType::F64 => 8,
        }
    }
}

/// An atomic operation (libfabric's `enum fi_op`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u32)]
pub enum FiOp {
    Min = 0,
    Max = 1,
    Sum = 2,
    Prod = 3,
    Lor = 4,
    Land = 5,
    Bor = 6,
    Band = 7,
    Lxor = 8,
    Bxor = 9,
    /// Fetch only (`fi_fetch_atomic`).
    Read = 10,
    /// Replace (`MPI_REPLACE`).
    Write = 11,
    /// Compare and swap (`fi_compare_atomic`).
    Cswap = 12,
}

/// Which atomic call: without result, fetching, comparing.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AtomicKind {
    Update,
    Fetch,
    Compare,
}

/// One atomic operation's origin side: `kind` of `op` on `count` elements of `ty`, operands at
/// `src`, comparands at `compare` (`Compare`; else null), old values into `result` (`Fetch`,
/// `Compare`; else null).
#[derive(Clone, Copy, Debug)]
pub struct Atomic {
    pub kind: AtomicKind,
    pub op: FiOp,
    pub ty: FiType,
    pub src: *const u8,
    pub compare: *const u8,
    pub result: *mut u8,
    pub count: usize,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_round_trip_and_bound_their_region() {
        let k = RmaKey { base: 0x7f00_0000_1000, key: 0xdead_beef, len: 64 };
        assert_eq!(RmaKey::from_bytes(&k.to_bytes()), Some(k));
        assert_eq!(RmaKey::from_bytes(&[0; 23]), None);
        assert_eq!(k.at(0, 64), Some(k.base));
        assert_eq!(k.at(56, 8), Some(k.base + 56));
        assert_eq!(k.at(57, 8), None);
        assert_eq!(k.at(u64::MAX, 2), None);
        assert_eq!(FiType::F64.size(), 8);
        assert_eq!((FiOp::Cswap as u32, FiType::F64 as u32), (12, 9));
    }
}
