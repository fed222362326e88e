//! `MPI_Pack_external`, `MPI_Unpack_external`, `MPI_Pack_external_size` and their `_c` forms
//! (MPI-4.1 §5.2.3): the "external32" representation, big-endian with the sizes of MPI-4.1
//! §13.5.2's table. Most types keep their size and only change byte order; `long` and
//! `unsigned long` are 4 bytes there (truncated on packing, extended on unpacking, as MPICH
//! does), `wchar_t` 2, and `long double` is IEEE binary128 (converted from and to the x87
//! format; unpacking truncates the significand to x87's 64 bits).
//!
//! The data is packed natively first (typemap order), then converted element by element. This
//! needs the type's data to be of one predefined type (its `leaf`: a basic type or a pair),
//! which every predefined type and every type built from one alone are; a struct mixing basic
//! types is refused with `MPI_ERR_TYPE`.

use std::ffi::{CStr, c_char, c_void};

use super::builtin::Kind;
use super::calls::running;
use super::{Layout, layout_large, pack};
use crate::abi::{self, Aint, Count, Datatype};
use crate::error::{Fail, Res, Why};
use crate::p2p::{null_arg, write_out};
use crate::state::Access;

/// How one component of an element converts.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Conv {
    /// Same size, byte order reversed.
    Swap(usize),
    /// A native 8-byte integer as 4 external bytes (`long`), or a 4-byte one as 2 (`wchar_t`).
    Narrow { native: usize, external: usize, signed: bool },
    /// x87 `long double` (16 native bytes) as binary128.
    X87,
}

impl Conv {
    fn native(self) -> usize {
        match self {
            Conv::Swap(n) => n,
            Conv::Narrow { native, .. } => native,
            Conv::X87 => 16,
        }
    }

    fn external(self) -> usize {
        match self {
            Conv::Swap(n) => n,
            Conv::Narrow { external, .. } => external,
            Conv::X87 => 16,
        }
    }
}

/// The components of one element of predefined type `dt`, in order (value then index for a
/// pair); `None` for a type external32 does not represent.
fn components(dt: Datatype) -> Option<Vec<Conv>> {
    use Conv::*;
    let long = Narrow { native: 8, external: 4, signed: true };
    Some(match dt {
        abi::LONG => vec![long],
        abi::UNSIGNED_LONG => vec![Narrow { native: 8, external: 4, signed: false }],
        abi::WCHAR => vec![Narrow { native: 4, external: 2, signed: false }],
        abi::FLOAT_INT => vec![Swap(4), Swap(4)],
        abi::DOUBLE_INT => vec![Swap(8), Swap(4)],
        abi::LONG_INT => vec![long, Swap(4)],
        abi::SHORT_INT => vec![Swap(2), Swap(4)],
        abi::LONG_DOUBLE_INT => vec![X87, Swap(4)],
        _ => {
            let b = super::lookup(dt)?;
            let n = b.size();
            match b.kind {
                Kind::F80 => vec![X87],
                Kind::C80 => vec![X87, X87],
                Kind::C32 | Kind::C64 | Kind::C128 | Kind::Pair => vec![Swap(n / 2), Swap(n / 2)],
                Kind::Bound => vec![],
                _ => vec![Swap(n)],
            }
        }
    })
}

/// The x87 value in `n` (16 bytes, little-endian) as binary128, big-endian, into `e`.
fn x87_to_quad(n: &[u8], e: &mut [u8]) {
    let significand = u64::from_le_bytes(n[..8].try_into().unwrap_or_default());
    let se = u16::from_le_bytes([n[8], n[9]]);
    // The fraction is the significand without its explicit integer bit.
    let q = (u128::from(se) << 112) | (u128::from(significand & !(1 << 63)) << 49);
    e.copy_from_slice(&q.to_be_bytes());
}

/// The binary128 value in `e` (big-endian) as x87, into `n` (10 bytes; the padding is zeroed).
fn quad_to_x87(e: &[u8], n: &mut [u8]) {
    let q = u128::from_be_bytes(e[..16].try_into().unwrap_or_default());
    let se = (q >> 112) as u16;
    let fraction = ((q >> 49) as u64) & !(1 << 63);
    let integer = if se & 0x7fff == 0 { 0 } else { 1 << 63 };
    n[..8].copy_from_slice(&(fraction | integer).to_le_bytes());
    n[8..10].copy_from_slice(&se.to_le_bytes());
    n[10..16].fill(0);
}

/// Converts native elements to external32 (`to_external`) or back, component by component.
fn convert(conv: &[Conv], src: &[u8], dst: &mut [u8], to_external: bool) {
    let (mut i, mut o) = (0, 0);
    while i < src.len() {
        for &c in conv {
            let (ni, no) = if to_external { (c.native(), c.external()) } else { (c.external(), c.native()) };
            let (s, d) = (&src[i..i + ni], &mut dst[o..o + no]);
            match c {
                Conv::Swap(_) => d.iter_mut().zip(s.iter().rev()).for_each(|(d, s)| *d = *s),
                Conv::Narrow { native, external, signed } => {
                    if to_external {
                        // The low `external` bytes, most significant first.
                        d.iter_mut().zip(s[..external].iter().rev()).for_each(|(d, s)| *d = *s);
                    } else {
                        let negative = signed && s[0] & 0x80 != 0;
                        d.fill(if negative { 0xff } else { 0 });
                        d[..external].iter_mut().zip(s.iter().rev()).for_each(|(d, s)| *d = *s);
                        debug_assert_eq!(d.len(), native);
                    }
                }
                Conv::X87 if to_external => x87_to_quad(s, d),
                Conv::X87 => quad_to_x87(s, d),
            }
            i += ni;
            o += no;
        }
    }
}

/// The conversion of `dt`'s data and its native and external32 element sizes.
fn plan(acc: &mut Access, datarep: *const c_char, dt: Datatype) -> Res<(Vec<Conv>, usize, usize)> {
    if datarep.is_null() {
        return Err(null_arg(None, "null datarep"));
    }
    // SAFETY: MPI's contract: a C string.
    if unsafe { CStr::from_ptr(datarep) }.to_bytes() != b"external32" {
        return Err(Fail::new(abi::ERR_ARG, None, Why::Arg("the data representation must be \"external32\"")));
    }
    let d = super::calls::query(acc, dt)?;
    let unsupported =
        || Fail::new(abi::ERR_TYPE, None, Why::Arg("external32 of a type mixing basic types is not supported yet"));
    if d.size == 0 {
        return Ok((Vec::new(), 0, 0));
    }
    let conv = d.leaf.and_then(components).ok_or_else(unsupported)?;
    let (n, e) = conv.iter().fold((0, 0), |(n, e), c| (n + c.native(), e + c.external()));
    if n == 0 || !d.size.is_multiple_of(n) {
        return Err(unsupported());
    }
    Ok((conv, n, e))
}

/// The external32 size of `count` elements of `dt`.
fn external_size(acc: &mut Access, datarep: *const c_char, count: i64, dt: Datatype) -> Res<u64> {
    let (_, n, e) = plan(acc, datarep, dt)?;
    let size = super::calls::query(acc, dt)?.size as u64;
    let count = u64::try_from(count).map_err(|_| Fail::new(abi::ERR_COUNT, None, Why::Arg("negative count")))?;
    Ok(if n == 0 { 0 } else { count.saturating_mul(size / n as u64 * e as u64) })
}

/// `MPI_Pack_external_size` (`Aint`) and `_c` (`MPI_Count`, the same 8 bytes).
///
/// # Safety
/// `datarep` a C string; `size` writable.
pub unsafe fn pack_external_size(
    acc: &mut Access,
    datarep: *const c_char,
    incount: i64,
    dt: Datatype,
    size: *mut Aint,
) -> Res<()> {
    let n = external_size(acc, datarep, incount, dt)?;
    // SAFETY: the caller's contract.
    unsafe { write_out(size, n as Aint) }
}

/// Reads `*position`, runs `f`, writes the new position (`MPI_Aint` and `MPI_Count` alike).
///
/// # Safety
/// `position` null or readable and writable.
unsafe fn moving(position: *mut Aint, f: impl FnOnce(i64) -> Res<i64>) -> Res<()> {
    if position.is_null() {
        return Err(null_arg(None, "null position pointer"));
    }
    // SAFETY: checked non-null; the caller's contract.
    let p = f(unsafe { *position })?;
    // SAFETY: as above.
    unsafe { *position = p };
    Ok(())
}

fn window(position: i64, size: i64, need: u64) -> Res<usize> {
    if position < 0 || size < 0 || position > size {
        return Err(Fail::new(abi::ERR_ARG, None, Why::Arg("position outside the packing buffer")));
    }
    if need > (size - position) as u64 {
        return Err(Fail::new(abi::ERR_TRUNCATE, None, Why::Arg("the packing buffer is too small")));
    }
    Ok(position as usize)
}

/// `MPI_Pack_external` and `_c` (`outsize` and the position as 8-byte integers).
///
/// # Safety
/// `datarep` a C string; MPI's contract on the buffers; `position` readable and writable.
#[allow(clippy::too_many_arguments)]
pub unsafe fn pack_external(
    acc: &mut Access,
    datarep: *const c_char,
    inbuf: *const c_void,
    incount: i64,
    dt: Datatype,
    outbuf: *mut c_void,
    outsize: i64,
    position: *mut Aint,
) -> Res<()> {
    let (conv, _, _) = plan(acc, datarep, dt)?;
    let need = external_size(acc, datarep, incount, dt)?;
    let st = running(acc)?;
    let l = layout_large(&st.types, inbuf.cast(), incount, dt, 0)?;
    // SAFETY: the caller's contract.
    unsafe {
        moving(position, |p| {
            let pos = window(p, outsize, need)?;
            if need > 0 && outbuf.is_null() {
                return Err(Fail::new(abi::ERR_BUFFER, None, Why::Buffer));
            }
            // SAFETY: MPI's contract on `inbuf`.
            let native = l.packed();
            // SAFETY: MPI's contract: `outsize` writable bytes at `outbuf`; the window was checked.
            let out = crate::p2p::out_bytes(outbuf.byte_add(pos), need as usize);
            convert(&conv, &native, out, true);
            Ok(p + need as i64)
        })
    }
}

/// `MPI_Unpack_external` and `_c`.
///
/// # Safety
/// `datarep` a C string; MPI's contract on the buffers; `position` readable and writable.
#[allow(clippy::too_many_arguments)]
pub unsafe fn unpack_external(
    acc: &mut Access,
    datarep: *const c_char,
    inbuf: *const c_void,
    insize: i64,
    position: *mut Aint,
    outbuf: *mut c_void,
    outcount: i64,
    dt: Datatype,
) -> Res<()> {
    let (conv, _, _) = plan(acc, datarep, dt)?;
    let need = external_size(acc, datarep, outcount, dt)?;
    let st = running(acc)?;
    let l = layout_large(&st.types, outbuf.cast_const().cast(), outcount, dt, 0)?;
    // SAFETY: the caller's contract.
    unsafe {
        moving(position, |p| {
            let pos = window(p, insize, need)?;
            if need > 0 && inbuf.is_null() {
                return Err(Fail::new(abi::ERR_BUFFER, None, Why::Buffer));
            }
            // SAFETY: MPI's contract: `insize` readable bytes at `inbuf`; the window was checked.
            let ext = crate::p2p::in_bytes(inbuf.byte_add(pos), need as usize);
            let mut native = vec![0u8; l.len()];
            convert(&conv, ext, &mut native, false);
            match &l {
                // SAFETY: MPI's contract on `outbuf`.
                Layout::Contig { ptr, len } => crate::p2p::out_bytes(ptr.cast(), *len).copy_from_slice(&native),
                // SAFETY: as above.
                Layout::Typed { base, count, desc } => pack::unpack(desc, *base, *count, &native),
            }
            Ok(p + need as i64)
        })
    }
}

/// `MPI_Count` outputs are `MPI_Aint`s here.
const _: () = assert!(size_of::<Count>() == size_of::<Aint>());

#[cfg(test)]
mod tests {
    use super::*;

    fn round_trip(dt: Datatype, native: &[u8], external: &[u8]) {
        let conv = components(dt).unwrap();
        let mut e = vec![0u8; external.len()];
        convert(&conv, native, &mut e, true);
        assert_eq!(e, external, "{dt:#x} to external32");
        let mut n = vec![0u8; native.len()];
        convert(&conv, &e, &mut n, false);
        assert_eq!(n, native, "{dt:#x} back");
    }

    #[test]
    fn external32_is_big_endian_with_its_own_sizes() {
        round_trip(abi::INT, &0x0102_0304i32.to_le_bytes(), &[1, 2, 3, 4]);
        round_trip(abi::LONG, &(-2i64).to_le_bytes(), &[0xff, 0xff, 0xff, 0xfe]);
        round_trip(abi::UNSIGNED_LONG, &7u64.to_le_bytes(), &[0, 0, 0, 7]);
        round_trip(abi::WCHAR, &0x41u32.to_le_bytes(), &[0, 0x41]);
        round_trip(abi::DOUBLE, &1.5f64.to_le_bytes(), &1.5f64.to_be_bytes());
        let c: Vec<u8> = [1.0f32, -2.0].iter().flat_map(|x| x.to_le_bytes()).collect();
        let ce: Vec<u8> = [1.0f32, -2.0].iter().flat_map(|x| x.to_be_bytes()).collect();
        round_trip(abi::C_FLOAT_COMPLEX, &c, &ce);
        let di: Vec<u8> = 2.0f64.to_le_bytes().into_iter().chain(9i32.to_le_bytes()).collect();
        let de: Vec<u8> = 2.0f64.to_be_bytes().into_iter().chain(9i32.to_be_bytes()).collect();
        round_trip(abi::DOUBLE_INT, &di, &de);
        // long double 1.5: x87 significand 0xC000.., exponent 16383; binary128 0x3fff8000...
        let mut ld = [0u8; 16];
        ld[..8].copy_from_slice(&0xC000_0000_0000_0000u64.to_le_bytes());
        ld[8..10].copy_from_slice(&16383u16.to_le_bytes());
        let mut q = [0u8; 16];
        q[0] = 0x3f;
        q[1] = 0xff;
        q[2] = 0x80;
        round_trip(abi::LONG_DOUBLE, &ld, &q);
        assert_eq!(components(abi::DOUBLE_INT).unwrap().iter().map(|c| c.external()).sum::<usize>(), 12);
    }
}
