//! `MPI_Pack`, `MPI_Unpack`, `MPI_Pack_size` and their `_c` forms (MPI-4.1 §5.2): the packed form
//! is the data bytes in typemap order ([`super::pack`]), so the packed size is `count × size`.
//! One implementation over `i64` positions and sizes serves both forms ([`Width`]: the `int`
//! forms widen their arguments).

use std::ffi::c_void;

use super::calls::{Width, running};
use super::{Layout, any, layout_large, pack};
use crate::abi::{self, Datatype};
use crate::error::{Fail, Res, Why};
use crate::p2p::{comm_at, null_arg, write_out};
use crate::state::Access;

/// Checks a packing window: `position` in `0..=size`, `need` bytes fitting after it.
fn window(position: i64, size: i64, need: usize) -> Res<usize> {
    if position < 0 || size < 0 || position > size {
        return Err(Fail::new(abi::ERR_ARG, None, Why::Arg("position outside the packing buffer")));
    }
    if need as u64 > (size - position) as u64 {
        return Err(Fail::new(abi::ERR_TRUNCATE, None, Why::Arg("the packing buffer is too small")));
    }
    Ok(position as usize)
}

/// The packed size of `incount` elements of `dt`.
fn packed_size(acc: &mut Access, incount: i64, dt: Datatype, comm: abi::Comm) -> Res<u64> {
    let st = running(acc)?;
    comm_at(&st.comms, comm)?;
    if incount < 0 {
        return Err(Fail::new(abi::ERR_COUNT, None, Why::Arg("negative count")));
    }
    let d = any(&st.types, dt)?;
    (incount as u64)
        .checked_mul(d.size as u64)
        .ok_or_else(|| Fail::new(abi::ERR_COUNT, None, Why::Arg("the packed size overflows")))
}

/// `MPI_Pack_size(_c)`: `incount × size` (the `int` form: `MPI_ERR_COUNT` past `INT_MAX`).
///
/// # Safety
/// `size` writable.
pub unsafe fn pack_size<N: Width>(
    acc: &mut Access,
    incount: N,
    dt: Datatype,
    comm: abi::Comm,
    size: *mut N,
) -> Res<()> {
    let n = packed_size(acc, incount.into(), dt, comm)?;
    let n = i64::try_from(n).ok().and_then(|n| N::try_from(n).ok());
    let n = n.ok_or_else(|| Fail::new(abi::ERR_COUNT, None, Why::Arg("the packed size exceeds INT_MAX")))?;
    // SAFETY: the caller's contract.
    unsafe { write_out(size, n) }
}

/// Packs `incount` elements of `dt` at `inbuf` into `outbuf[position..outsize]`; returns the new
/// position.
///
/// # Safety
/// MPI's contract on the buffers.
#[allow(clippy::too_many_arguments)]
unsafe fn pack_at(
    acc: &mut Access,
    inbuf: *const c_void,
    incount: i64,
    dt: Datatype,
    outbuf: *mut c_void,
    outsize: i64,
    position: i64,
    comm: abi::Comm,
) -> Res<i64> {
    let st = running(acc)?;
    let (ci, _) = comm_at(&st.comms, comm)?;
    let l = layout_large(&st.types, inbuf.cast(), incount, dt, ci)?;
    let pos = window(position, outsize, l.len())?;
    if !l.is_empty() && outbuf.is_null() {
        return Err(Fail::new(abi::ERR_BUFFER, Some(ci), Why::Buffer));
    }
    // SAFETY: MPI's contract: `outsize` writable bytes at `outbuf`; the window was checked.
    let out = unsafe { crate::p2p::out_bytes(outbuf.byte_add(pos), l.len()) };
    match &l {
        // SAFETY: MPI's contract on `inbuf`.
        Layout::Contig { ptr, len } => out.copy_from_slice(unsafe { crate::p2p::in_bytes(ptr.cast(), *len) }),
        // SAFETY: as above.
        Layout::Typed { base, count, desc } => unsafe { pack::pack(desc, *base, *count, out) },
    }
    Ok((pos + l.len()) as i64)
}

/// Unpacks `outcount` elements of `dt` from `inbuf[position..insize]` into `outbuf`; returns the
/// new position.
///
/// # Safety
/// MPI's contract on the buffers.
#[allow(clippy::too_many_arguments)]
unsafe fn unpack_at(
    acc: &mut Access,
    inbuf: *const c_void,
    insize: i64,
    position: i64,
    outbuf: *mut c_void,
    outcount: i64,
    dt: Datatype,
    comm: abi::Comm,
) -> Res<i64> {
    let st = running(acc)?;
    let (ci, _) = comm_at(&st.comms, comm)?;
    let l = layout_large(&st.types, outbuf.cast_const().cast(), outcount, dt, ci)?;
    let pos = window(position, insize, l.len())?;
    if !l.is_empty() && inbuf.is_null() {
        return Err(Fail::new(abi::ERR_BUFFER, Some(ci), Why::Buffer));
    }
    // SAFETY: MPI's contract: `insize` readable bytes at `inbuf`; the window was checked.
    let data = unsafe { crate::p2p::in_bytes(inbuf.byte_add(pos), l.len()) };
    match &l {
        // SAFETY: MPI's contract on `outbuf`.
        Layout::Contig { ptr, len } => unsafe { crate::p2p::out_bytes(ptr.cast(), *len) }.copy_from_slice(data),
        // SAFETY: as above.
        Layout::Typed { base, count, desc } => unsafe { pack::unpack(desc, *base, *count, data) },
    }
    Ok((pos + l.len()) as i64)
}

/// Reads `*position`, runs `f` on it, writes the new position back (an `int` or an `MPI_Count`).
///
/// # Safety
/// `position` null or readable and writable.
unsafe fn moving<T: Copy + Into<i64> + TryFrom<i64>>(position: *mut T, f: impl FnOnce(i64) -> Res<i64>) -> Res<()> {
    if position.is_null() {
        return Err(null_arg(None, "null position pointer"));
    }
    // SAFETY: checked non-null; the caller's contract.
    let p = f(unsafe { *position }.into())?;
    let p = T::try_from(p).map_err(|_| Fail::new(abi::ERR_ARG, None, Why::Arg("the position overflows")))?;
    // SAFETY: as above.
    unsafe { *position = p };
    Ok(())
}

/// `MPI_Pack(_c)`.
///
/// # Safety
/// MPI's contract on the buffers; `position` readable and writable.
#[allow(clippy::too_many_arguments)]
pub unsafe fn pack_call<N: Width>(
    acc: &mut Access,
    inbuf: *const c_void,
    incount: N,
    dt: Datatype,
    outbuf: *mut c_void,
    outsize: N,
    position: *mut N,
    comm: abi::Comm,
) -> Res<()> {
    // SAFETY: the caller's contract.
    unsafe { moving(position, |p| pack_at(acc, inbuf, incount.into(), dt, outbuf, outsize.into(), p, comm)) }
}

/// `MPI_Unpack(_c)`.
///
/// # Safety
/// MPI's contract on the buffers; `position` readable and writable.
#[allow(clippy::too_many_arguments)]
pub unsafe fn unpack_call<N: Width>(
    acc: &mut Access,
    inbuf: *const c_void,
    insize: N,
    position: *mut N,
    outbuf: *mut c_void,
    outcount: N,
    dt: Datatype,
    comm: abi::Comm,
) -> Res<()> {
    // SAFETY: the caller's contract.
    unsafe { moving(position, |p| unpack_at(acc, inbuf, insize.into(), p, outbuf, outcount.into(), dt, comm)) }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn packing_windows() {
        assert_eq!(window(0, 10, 10).unwrap(), 0);
        assert_eq!(window(4, 10, 6).unwrap(), 4);
        assert_eq!(window(4, 10, 7).unwrap_err().code, abi::ERR_TRUNCATE);
        assert_eq!(window(11, 10, 0).unwrap_err().code, abi::ERR_ARG);
        assert_eq!(window(-1, 10, 0).unwrap_err().code, abi::ERR_ARG);
        assert_eq!(window(1 << 40, 1 << 41, 1 << 40).unwrap(), 1 << 40);
    }
}
