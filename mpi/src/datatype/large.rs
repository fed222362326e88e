//! The large-count (`_c`) forms of the datatype calls (MPI-4.1 §5.1, §5.2): constructors taking
//! `MPI_Count` counts and displacements, the queries writing `MPI_Count`s, and
//! `MPI_Reduce_local_c`.
//!
//! The constructors share [`super::construct`] with the `int` forms and record their arguments
//! as large counts ([`Form::Large`]); a type so made reports them through
//! `MPI_Type_get_envelope_c`/`MPI_Type_get_contents_c` only (the `int` forms refuse it with
//! `MPI_ERR_TYPE`, as they cannot return large counts).

use std::ffi::{c_int, c_void};
use std::sync::Arc;

use super::calls::{array, old, running, store, wide};
use super::construct::{self as make, Darray, Form};
use super::desc::TypeDesc;
use crate::abi::{self, Aint, Count, Datatype};
use crate::error::{Fail, Res, Why};
use crate::p2p::{null_arg, write_out};
use crate::state::Access;

/// `MPI_Type_contiguous_c`.
///
/// # Safety
/// `newtype` writable.
pub unsafe fn contiguous_c(acc: &mut Access, count: Count, oldtype: Datatype, newtype: *mut Datatype) -> Res<()> {
    let st = running(acc)?;
    let o = old(st, oldtype)?;
    // SAFETY: MPI's contract.
    unsafe { store(st, make::contiguous(Form::Large, count, &o), newtype) }
}

/// `MPI_Type_vector_c` and `MPI_Type_create_hvector_c` (`bytes`: the stride is in bytes).
///
/// # Safety
/// `newtype` writable.
pub unsafe fn vector_c(
    acc: &mut Access,
    count: Count,
    blocklength: Count,
    stride: Count,
    bytes: bool,
    oldtype: Datatype,
    newtype: *mut Datatype,
) -> Res<()> {
    let st = running(acc)?;
    let o = old(st, oldtype)?;
    // SAFETY: MPI's contract.
    unsafe { store(st, make::vector(Form::Large, count, blocklength, stride, bytes, &o), newtype) }
}

/// `MPI_Type_indexed_c` and `MPI_Type_create_hindexed_c` (`bytes`: displacements in bytes).
///
/// # Safety
/// The arrays readable for `count` elements; `newtype` writable.
pub unsafe fn indexed_c(
    acc: &mut Access,
    count: Count,
    blocklengths: *const Count,
    displacements: *const Count,
    bytes: bool,
    oldtype: Datatype,
    newtype: *mut Datatype,
) -> Res<()> {
    let st = running(acc)?;
    let o = old(st, oldtype)?;
    // SAFETY: MPI's contract: `count` elements each.
    let (b, d) = unsafe { (array(blocklengths, count)?, array(displacements, count)?) };
    // SAFETY: MPI's contract.
    unsafe { store(st, make::indexed(Form::Large, b, d, bytes, &o), newtype) }
}

/// `MPI_Type_create_indexed_block_c` and `MPI_Type_create_hindexed_block_c`.
///
/// # Safety
/// The displacement array readable for `count` elements; `newtype` writable.
pub unsafe fn indexed_block_c(
    acc: &mut Access,
    count: Count,
    blocklength: Count,
    displacements: *const Count,
    bytes: bool,
    oldtype: Datatype,
    newtype: *mut Datatype,
) -> Res<()> {
    let st = running(acc)?;
    let o = old(st, oldtype)?;
    // SAFETY: MPI's contract: `count` elements.
    let d = unsafe { array(displacements, count) }?;
    // SAFETY: MPI's contract.
    unsafe { store(st, make::indexed_block(Form::Large, blocklength, d, bytes, &o), newtype) }
}

/// `MPI_Type_create_struct_c`.
///
/// # Safety
/// The arrays readable for `count` elements; `newtype` writable.
pub unsafe fn create_struct_c(
    acc: &mut Access,
    count: Count,
    blocklengths: *const Count,
    displacements: *const Count,
    types: *const Datatype,
    newtype: *mut Datatype,
) -> Res<()> {
    let st = running(acc)?;
    // SAFETY: MPI's contract: `count` elements each.
    let (b, d, t) = unsafe { (array(blocklengths, count)?, array(displacements, count)?, array(types, count)?) };
    let olds: Vec<Arc<TypeDesc>> = t.iter().map(|&t| old(st, t)).collect::<Res<_>>()?;
    // SAFETY: MPI's contract.
    unsafe { store(st, make::create_struct(Form::Large, b, d, &olds), newtype) }
}

/// `MPI_Type_create_subarray_c`.
///
/// # Safety
/// The arrays readable for `ndims` elements; `newtype` writable.
#[allow(clippy::too_many_arguments)]
pub unsafe fn subarray_c(
    acc: &mut Access,
    ndims: c_int,
    sizes: *const Count,
    subsizes: *const Count,
    starts: *const Count,
    order: c_int,
    oldtype: Datatype,
    newtype: *mut Datatype,
) -> Res<()> {
    let st = running(acc)?;
    let o = old(st, oldtype)?;
    // SAFETY: MPI's contract: `ndims` elements each.
    let (a, b, c) = unsafe { (array(sizes, ndims)?, array(subsizes, ndims)?, array(starts, ndims)?) };
    // SAFETY: MPI's contract.
    unsafe { store(st, make::subarray(Form::Large, a, b, c, order, &o), newtype) }
}

/// `MPI_Type_create_darray` (`gsizes` of `int`s, `Form::Int`) and `MPI_Type_create_darray_c`
/// (of `MPI_Count`s).
///
/// # Safety
/// The arrays readable for `ndims` elements (`gsizes` of `T`); `newtype` writable.
#[allow(clippy::too_many_arguments)]
pub unsafe fn darray<T: Copy + TryInto<i64>>(
    acc: &mut Access,
    form: Form,
    size: c_int,
    rank: c_int,
    ndims: c_int,
    gsizes: *const T,
    distribs: *const c_int,
    dargs: *const c_int,
    psizes: *const c_int,
    order: c_int,
    oldtype: Datatype,
    newtype: *mut Datatype,
) -> Res<()> {
    let st = running(acc)?;
    let o = old(st, oldtype)?;
    // SAFETY: MPI's contract: `ndims` elements each.
    let a = unsafe {
        let gsizes = &wide(gsizes, ndims)?;
        let (distribs, dargs, psizes) = (array(distribs, ndims)?, array(dargs, ndims)?, array(psizes, ndims)?);
        make::darray(form, &Darray { size, rank, gsizes, distribs, dargs, psizes, order }, &o)
    };
    // SAFETY: MPI's contract.
    unsafe { store(st, a, newtype) }
}

/// `MPI_Type_create_resized_c`.
///
/// # Safety
/// `newtype` writable.
pub unsafe fn resized_c(
    acc: &mut Access,
    oldtype: Datatype,
    lb: Count,
    extent: Count,
    newtype: *mut Datatype,
) -> Res<()> {
    let st = running(acc)?;
    let o = old(st, oldtype)?;
    // SAFETY: MPI's contract.
    unsafe { store(st, Ok(make::resized(Form::Large, lb, extent, &o)), newtype) }
}

/// `MPI_Type_size_c`.
///
/// # Safety
/// `size` writable.
pub unsafe fn size_c(acc: &mut Access, dt: Datatype, size: *mut Count) -> Res<()> {
    // SAFETY: the caller's contract; an `MPI_Count` output.
    unsafe { super::calls::size(acc, dt, size.cast(), true) }
}

/// `MPI_Type_get_extent_c` and `MPI_Type_get_true_extent_c` (`MPI_Count`s: 8 bytes, as
/// `MPI_Aint`s are).
///
/// # Safety
/// `lb` and `extent` writable.
pub unsafe fn extent_c(
    acc: &mut Access,
    dt: Datatype,
    lb: *mut Count,
    extent: *mut Count,
    true_extent: bool,
) -> Res<()> {
    const { assert!(size_of::<Count>() == size_of::<Aint>()) };
    // SAFETY: the caller's contract; `MPI_Count` and `MPI_Aint` have one size and alignment here.
    unsafe { super::calls::extent(acc, dt, lb.cast(), extent.cast(), true_extent) }
}

/// `MPI_Type_get_envelope_c`.
///
/// # Safety
/// The five outputs writable.
pub unsafe fn get_envelope_c(
    acc: &mut Access,
    dt: Datatype,
    num_integers: *mut Count,
    num_addresses: *mut Count,
    num_large_counts: *mut Count,
    num_datatypes: *mut Count,
    combiner: *mut c_int,
) -> Res<()> {
    let d = super::calls::query(acc, dt)?;
    let (ni, na, nc, nd, c) = match &d.contents {
        None => (0, 0, 0, 0, abi::COMBINER_NAMED),
        Some(c) => (c.ints.len(), c.aints.len(), c.counts.len(), c.types.len(), c.combiner),
    };
    // SAFETY: the caller's contract.
    unsafe {
        write_out(num_integers, ni as Count)?;
        write_out(num_addresses, na as Count)?;
        write_out(num_large_counts, nc as Count)?;
        write_out(num_datatypes, nd as Count)?;
        write_out(combiner, c)
    }
}

/// `MPI_Type_get_contents_c`.
///
/// # Safety
/// The arrays writable for their `max_` lengths.
#[allow(clippy::too_many_arguments)]
pub unsafe fn get_contents_c(
    acc: &mut Access,
    dt: Datatype,
    max_integers: Count,
    max_addresses: Count,
    max_large_counts: Count,
    max_datatypes: Count,
    integers: *mut c_int,
    addresses: *mut Aint,
    large_counts: *mut Count,
    datatypes: *mut Datatype,
) -> Res<()> {
    let d = super::any(&running(acc)?.types, dt)?;
    let n = d.contents.as_ref().map_or(0, |c| c.counts.len());
    if max_large_counts < n as Count {
        return Err(Fail::new(
            abi::ERR_ARG,
            None,
            Why::Arg("the arrays are shorter than MPI_Type_get_envelope_c said"),
        ));
    }
    if n > 0 && large_counts.is_null() {
        return Err(null_arg(None, "null contents array"));
    }
    let clamp = |m: Count| c_int::try_from(m.max(0)).unwrap_or(c_int::MAX);
    // SAFETY: the caller's contract (the int, address and type arrays).
    unsafe {
        super::calls::contents_into(
            acc,
            dt,
            (clamp(max_integers), clamp(max_addresses), clamp(max_datatypes)),
            (integers, addresses, datatypes),
        )?
    };
    if let Some(c) = &d.contents {
        // SAFETY: the caller's contract: at least `n` writable (checked above).
        unsafe { std::ptr::copy_nonoverlapping(c.counts.as_ptr(), large_counts, n) };
    }
    Ok(())
}

/// `MPI_Reduce_local_c`: in pieces of at most `INT_MAX` elements (the elements are independent).
///
/// # Safety
/// MPI's contract on the buffers.
pub unsafe fn reduce_local_c(
    acc: &mut Access,
    inbuf: *const c_void,
    inoutbuf: *mut c_void,
    count: Count,
    dt: Datatype,
    op: abi::Op,
) -> Res<()> {
    if count < 0 {
        return Err(Fail::new(abi::ERR_COUNT, None, Why::Arg("negative count")));
    }
    let ext = super::calls::query(acc, dt)?.extent();
    let mut done: Count = 0;
    loop {
        let n = (count - done).min(Count::from(c_int::MAX));
        let off = (done as isize).wrapping_mul(ext);
        // SAFETY: MPI's contract: the pieces are the buffers' elements `done..done + n`.
        unsafe {
            crate::coll::reduce_local(
                acc,
                inbuf.wrapping_byte_offset(off),
                inoutbuf.wrapping_byte_offset(off),
                n as c_int,
                dt,
                op,
            )?
        };
        done += n;
        if done >= count {
            return Ok(());
        }
    }
}
