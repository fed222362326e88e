//! The MPI calls on datatypes (MPI-4.1 §5.1, §5.2): constructors, commit and free, queries
//! (size, extents, elements, name, envelope and contents), `MPI_Pack`/`MPI_Unpack`/
//! `MPI_Pack_size`, `MPI_Get_address` and the address arithmetic.
//!
//! **One function per `int`/`_c` pair.** A constructor, `MPI_Pack(_c)`... is generic over its
//! count type ([`Width`]: `int` or `MPI_Count`), which says which C form was called: the
//! arguments are widened to `i64` and the same code runs, the form recorded for
//! `MPI_Type_get_envelope`/`_contents` (an `int`-form query refuses a type a `_c` constructor
//! made: `MPI_ERR_TYPE`). Where both forms take 8-byte values (`MPI_Type_create_resized`) the
//! binding names the [`Form`]; the size and extent queries write through untyped pointers
//! (`MPI_UNDEFINED` where an `int` cannot hold the size).
//!
//! The query calls work on every valid type, committed or not; they need no running MPI for the
//! predefined types (like `MPI_Type_size` before `MPI_Init`), but derived types exist only between
//! `MPI_Init` and `MPI_Finalize`.

use std::ffi::{c_char, c_int, c_void};
use std::sync::Arc;

use super::construct::{self as make, Form};
use super::desc::{Invalid, TypeDesc};
use super::pack::elements_in;
pub use super::packing::{pack_call, pack_size, unpack_call};
use super::{Entry, any, predefined_name};
use crate::abi::{self, Aint, Count, Datatype, Status};
use crate::error::{Fail, Res, Why};
use crate::p2p::{null_arg, wants, write_out};
use crate::state::{Access, State, not_running};

/// The state, with MPI running.
pub(super) fn running(acc: &mut Access) -> Res<&mut State> {
    let st = acc.st();
    if st.ep.is_none() {
        return Err(not_running(st.phase));
    }
    Ok(st)
}

pub(super) fn invalid(e: Invalid) -> Fail {
    match e {
        Invalid::Count => Fail::new(abi::ERR_COUNT, None, Why::Arg("negative count or block length")),
        Invalid::Overflow => Fail::new(abi::ERR_ARG, None, Why::Arg("the type's size or extent overflows")),
        Invalid::Rank => Fail::new(abi::ERR_RANK, None, Why::Arg("darray: rank must be in 0..size")),
        Invalid::Arg(s) => Fail::new(abi::ERR_ARG, None, Why::Arg(s)),
    }
}

/// `n` elements at `p` (empty for 0), refusing a negative count and a null array.
///
/// # Safety
/// `p` readable for `n` elements when `n > 0`.
pub(super) unsafe fn array<'a, T>(p: *const T, n: impl Into<i64>) -> Res<&'a [T]> {
    let n: i64 = n.into();
    if n < 0 {
        return Err(Fail::new(abi::ERR_COUNT, None, Why::Arg("negative count")));
    }
    if n == 0 {
        return Ok(&[]);
    }
    if p.is_null() {
        return Err(null_arg(None, "null array argument"));
    }
    // SAFETY: the caller's contract.
    Ok(unsafe { std::slice::from_raw_parts(p, n as usize) })
}

/// `n` elements at `p` widened to `i64` (`int`s, `MPI_Aint`s or `MPI_Count`s).
///
/// # Safety
/// As for [`array`].
pub(super) unsafe fn wide<T: Copy + TryInto<i64>>(p: *const T, n: impl Into<i64>) -> Res<Vec<i64>> {
    // SAFETY: the caller's contract.
    Ok(unsafe { array(p, n) }?.iter().map(|&x| x.try_into().unwrap_or(i64::MAX)).collect())
}

/// Stores a new derived type and writes its handle.
///
/// # Safety
/// `newtype` null or writable.
pub(super) unsafe fn store(st: &mut State, d: Result<TypeDesc, Invalid>, newtype: *mut Datatype) -> Res<()> {
    let d = d.map_err(invalid)?;
    if newtype.is_null() {
        return Err(null_arg(None, "null newtype pointer"));
    }
    let h = st
        .types
        .insert(Entry::new(Arc::new(d), false))
        .ok_or_else(|| Fail::new(abi::ERR_INTERN, None, Why::Arg("too many datatypes")))?;
    // SAFETY: checked non-null; MPI's contract.
    unsafe { *newtype = h };
    Ok(())
}

/// Makes a derived type of `oldtype` by `make` and writes its handle (the steps of every
/// constructor of one old type: MPI running, the old type valid, the arguments checked).
///
/// # Safety
/// `newtype` null or writable.
unsafe fn derive(
    acc: &mut Access,
    oldtype: Datatype,
    newtype: *mut Datatype,
    make: impl FnOnce(&Arc<TypeDesc>) -> Res<TypeDesc>,
) -> Res<()> {
    let st = running(acc)?;
    let o = old(st, oldtype)?;
    let d = make(&o)?;
    // SAFETY: the caller's contract.
    unsafe { store(st, Ok(d), newtype) }
}

/// The old type of a constructor.
pub(super) fn old(st: &State, dt: Datatype) -> Res<Arc<TypeDesc>> {
    any(&st.types, dt)
}

/// A count argument of a constructor or a packing call: an `int` (the `int` form) or an
/// `MPI_Count` (the `_c` form). Its width says which form was called ([`Form`]): the `int` forms
/// widen their arguments to the `_c` forms' and run the same code.
pub trait Width: Copy + Into<i64> + TryFrom<i64> + TryFrom<usize> {
    const FORM: Form;
}

impl Width for c_int {
    const FORM: Form = Form::Int;
}

impl Width for Count {
    const FORM: Form = Form::Large;
}

/// `MPI_Type_contiguous(_c)`.
///
/// # Safety
/// `newtype` writable.
pub unsafe fn contiguous<N: Width>(acc: &mut Access, count: N, oldtype: Datatype, newtype: *mut Datatype) -> Res<()> {
    // SAFETY: MPI's contract.
    unsafe { derive(acc, oldtype, newtype, |o| make::contiguous(N::FORM, count.into(), o).map_err(invalid)) }
}

/// `MPI_Type_vector(_c)` and `MPI_Type_create_hvector(_c)` (`bytes`: the stride is in bytes).
///
/// # Safety
/// `newtype` writable.
pub unsafe fn vector<N: Width>(
    acc: &mut Access,
    count: N,
    blocklength: N,
    stride: impl Into<i64>,
    bytes: bool,
    oldtype: Datatype,
    newtype: *mut Datatype,
) -> Res<()> {
    let (c, b, s) = (count.into(), blocklength.into(), stride.into());
    // SAFETY: MPI's contract.
    unsafe { derive(acc, oldtype, newtype, |o| make::vector(N::FORM, c, b, s, bytes, o).map_err(invalid)) }
}

/// A constructor's displacements: in elements or in bytes (`int`s or `MPI_Aint`s in the `int`
/// forms, `MPI_Count`s in the `_c` forms).
#[derive(Clone, Copy, Debug)]
pub enum Displs<T> {
    Elements(*const T),
    Bytes(*const T),
}

impl<T: Copy + TryInto<i64>> Displs<T> {
    /// The `count` displacements, and whether they are in bytes.
    ///
    /// # Safety
    /// The array readable for `count` elements.
    unsafe fn read(self, count: i64) -> Res<(Vec<i64>, bool)> {
        Ok(match self {
            // SAFETY: the caller's contract.
            Displs::Elements(p) => (unsafe { wide(p, count) }?, false),
            // SAFETY: as above.
            Displs::Bytes(p) => (unsafe { wide(p, count) }?, true),
        })
    }
}

/// `MPI_Type_indexed(_c)` and `MPI_Type_create_hindexed(_c)`.
///
/// # Safety
/// The arrays readable for `count` elements; `newtype` writable.
pub unsafe fn indexed<N: Width, D: Copy + TryInto<i64>>(
    acc: &mut Access,
    count: N,
    blocklengths: *const N,
    displs: Displs<D>,
    oldtype: Datatype,
    newtype: *mut Datatype,
) -> Res<()> {
    // SAFETY: MPI's contract: the arrays readable for `count` elements, `newtype` writable.
    unsafe {
        derive(acc, oldtype, newtype, |o| {
            let bls = wide(blocklengths, count)?;
            let (displs, bytes) = displs.read(count.into())?;
            make::indexed(N::FORM, &bls, &displs, bytes, o).map_err(invalid)
        })
    }
}

/// `MPI_Type_create_indexed_block(_c)` and `MPI_Type_create_hindexed_block(_c)`.
///
/// # Safety
/// The displacement array readable for `count` elements; `newtype` writable.
pub unsafe fn indexed_block<N: Width, D: Copy + TryInto<i64>>(
    acc: &mut Access,
    count: N,
    blocklength: N,
    displs: Displs<D>,
    oldtype: Datatype,
    newtype: *mut Datatype,
) -> Res<()> {
    // SAFETY: MPI's contract: the array readable for `count` elements, `newtype` writable.
    unsafe {
        derive(acc, oldtype, newtype, |o| {
            let (displs, bytes) = displs.read(count.into())?;
            make::indexed_block(N::FORM, blocklength.into(), &displs, bytes, o).map_err(invalid)
        })
    }
}

/// `MPI_Type_create_struct(_c)` (and MPI-1's `MPI_Type_struct`).
///
/// # Safety
/// The arrays readable for `count` elements; `newtype` writable.
pub unsafe fn create_struct<N: Width, D: Copy + TryInto<i64>>(
    acc: &mut Access,
    count: N,
    blocklengths: *const N,
    displs: *const D,
    types: *const Datatype,
    newtype: *mut Datatype,
) -> Res<()> {
    let st = running(acc)?;
    // SAFETY: MPI's contract: `count` elements each.
    let (bls, ds, ts) = unsafe { (wide(blocklengths, count)?, wide(displs, count)?, array(types, count)?) };
    let olds: Vec<Arc<TypeDesc>> = ts.iter().map(|&t| old(st, t)).collect::<Res<_>>()?;
    // SAFETY: MPI's contract.
    unsafe { store(st, make::create_struct(N::FORM, &bls, &ds, &olds), newtype) }
}

/// `MPI_Type_create_subarray(_c)`.
///
/// # Safety
/// The arrays readable for `ndims` elements; `newtype` writable.
#[allow(clippy::too_many_arguments)]
pub unsafe fn subarray<N: Width>(
    acc: &mut Access,
    ndims: c_int,
    sizes: *const N,
    subsizes: *const N,
    starts: *const N,
    order: c_int,
    oldtype: Datatype,
    newtype: *mut Datatype,
) -> Res<()> {
    // SAFETY: MPI's contract: the arrays readable for `ndims` elements, `newtype` writable.
    unsafe {
        derive(acc, oldtype, newtype, |o| {
            let (a, b, c) = (wide(sizes, ndims)?, wide(subsizes, ndims)?, wide(starts, ndims)?);
            make::subarray(N::FORM, &a, &b, &c, order, o).map_err(invalid)
        })
    }
}

/// `MPI_Type_create_darray(_c)` (`gsizes` of `int`s or of `MPI_Count`s).
///
/// # Safety
/// The arrays readable for `ndims` elements; `newtype` writable.
#[allow(clippy::too_many_arguments)]
pub unsafe fn darray<N: Width>(
    acc: &mut Access,
    size: c_int,
    rank: c_int,
    ndims: c_int,
    gsizes: *const N,
    distribs: *const c_int,
    dargs: *const c_int,
    psizes: *const c_int,
    order: c_int,
    oldtype: Datatype,
    newtype: *mut Datatype,
) -> Res<()> {
    // SAFETY: MPI's contract: the arrays readable for `ndims` elements, `newtype` writable.
    unsafe {
        derive(acc, oldtype, newtype, |o| {
            let gsizes = &wide(gsizes, ndims)?;
            let (distribs, dargs, psizes) = (array(distribs, ndims)?, array(dargs, ndims)?, array(psizes, ndims)?);
            make::darray(N::FORM, &make::Darray { size, rank, gsizes, distribs, dargs, psizes, order }, o)
                .map_err(invalid)
        })
    }
}

/// `MPI_Type_create_resized(_c)`: `form` says which (both take 8-byte bounds).
///
/// # Safety
/// `newtype` writable.
pub unsafe fn resized(
    acc: &mut Access,
    form: Form,
    oldtype: Datatype,
    lb: i64,
    extent: i64,
    newtype: *mut Datatype,
) -> Res<()> {
    // SAFETY: MPI's contract.
    unsafe { derive(acc, oldtype, newtype, |o| Ok(make::resized(form, lb, extent, o))) }
}

/// `MPI_Type_dup`.
///
/// # Safety
/// `newtype` writable.
pub unsafe fn dup(acc: &mut Access, oldtype: Datatype, newtype: *mut Datatype) -> Res<()> {
    let committed = running(acc)?.types.get(oldtype).is_none_or(|e| e.committed);
    // SAFETY: MPI's contract.
    unsafe { derive(acc, oldtype, newtype, |o| Ok(make::dup(o))) }?;
    // The duplicate of a committed type is committed (MPI-3.1 §4.1.10).
    // SAFETY: `store` wrote it.
    let h = unsafe { *newtype };
    if let Some(e) = acc.st().types.get_mut(h) {
        e.committed = committed;
    }
    // The copy callbacks may call MPI: no borrow of the state across them.
    crate::attr::type_copy_all(acc, oldtype, h)
}

/// `MPI_Type_commit`.
///
/// # Safety
/// `datatype` readable.
pub unsafe fn commit(acc: &mut Access, datatype: *const Datatype) -> Res<()> {
    let st = running(acc)?;
    if datatype.is_null() {
        return Err(null_arg(None, "null datatype pointer"));
    }
    // SAFETY: checked non-null; MPI's contract.
    let h = unsafe { *datatype };
    if super::predefined_desc(h).is_some() {
        return Ok(());
    }
    let e = st.types.get_mut(h).ok_or_else(|| super::bad_type(h, None))?;
    e.committed = true;
    Ok(())
}

/// `MPI_Type_free`: the handle goes; operations in flight and types built from it keep the
/// layout (shared); a handle [`super::hold`] keeps stays until its last holder lets go (a
/// second free of it fails as for any freed handle).
///
/// # Safety
/// `datatype` readable and writable.
pub unsafe fn free(acc: &mut Access, datatype: *mut Datatype) -> Res<()> {
    let st = running(acc)?;
    if datatype.is_null() {
        return Err(null_arg(None, "null datatype pointer"));
    }
    // SAFETY: checked non-null; MPI's contract.
    let h = unsafe { *datatype };
    match st.types.get(h) {
        _ if super::predefined_desc(h).is_some() => return Err(predefined_free()),
        None => return Err(super::bad_type(h, None)),
        Some(e) if e.predefined => return Err(predefined_free()),
        Some(e) if e.freed => return Err(super::bad_type(h, None)),
        Some(_) => {}
    }
    // The delete callbacks may call MPI (even free this type: then it is gone, an error as for
    // a second free): no borrow of the state across them, the handle looked up again after.
    crate::attr::type_delete_all(acc, h)?;
    super::unlist(&mut acc.st().types, h)?;
    // SAFETY: as above.
    unsafe { *datatype = abi::DATATYPE_NULL };
    Ok(())
}

#[cold]
fn predefined_free() -> Fail {
    Fail::new(abi::ERR_TYPE, None, Why::Arg("predefined datatypes cannot be freed"))
}

/// The descriptor of `dt` for a query: predefined ones at any time, derived ones while running.
pub(crate) fn query(acc: &mut Access, dt: Datatype) -> Res<Arc<TypeDesc>> {
    if let Some(d) = super::predefined_desc(dt) {
        return Ok(d);
    }
    any(&acc.st().types, dt)
}

/// `MPI_Type_size` (`MPI_UNDEFINED` past `INT_MAX`) and `MPI_Type_size_x` (`x`: an `MPI_Count`).
///
/// # Safety
/// `size` writable as a `c_int` (or an `MPI_Count` with `x`).
pub unsafe fn size(acc: &mut Access, dt: Datatype, size: *mut c_void, x: bool) -> Res<()> {
    let d = query(acc, dt)?;
    // SAFETY: the caller's contract.
    unsafe {
        if x {
            write_out(size.cast::<Count>(), d.size as Count)
        } else {
            write_out(size.cast::<c_int>(), c_int::try_from(d.size).unwrap_or(abi::UNDEFINED))
        }
    }
}

/// `MPI_Type_get_extent` (`true_extent`: `MPI_Type_get_true_extent`) with `MPI_Aint` outputs;
/// the `_x` forms write `MPI_Count`s, the same 8 bytes here.
///
/// # Safety
/// `lb` and `extent` writable.
pub unsafe fn extent(acc: &mut Access, dt: Datatype, lb: *mut Aint, extent: *mut Aint, true_extent: bool) -> Res<()> {
    let d = query(acc, dt)?;
    let (l, u) = if true_extent { (d.true_lb, d.true_ub) } else { (d.lb, d.ub) };
    // SAFETY: the caller's contract.
    unsafe {
        write_out(lb, l as Aint)?;
        write_out(extent, (u - l) as Aint)
    }
}

/// `MPI_Get_count`: whole elements of `dt` in the message, or `MPI_UNDEFINED`.
///
/// # Safety
/// `status` readable, `count` writable.
pub unsafe fn get_count(acc: &mut Access, status: *const Status, dt: Datatype, count: *mut c_int) -> Res<()> {
    let n = count_in(acc, status, dt)?.and_then(|n| c_int::try_from(n).ok());
    // SAFETY: the caller's contract.
    unsafe { write_out(count, n.unwrap_or(abi::UNDEFINED)) }
}

/// Whole elements of `dt` in the message `status` describes.
fn count_in(acc: &mut Access, status: *const Status, dt: Datatype) -> Res<Option<usize>> {
    if !wants(status) {
        return Err(null_arg(None, "null status pointer"));
    }
    let d = query(acc, dt)?;
    // SAFETY: checked; MPI's contract.
    let bytes = unsafe { (*status).count() };
    Ok(if bytes < 0 {
        None
    } else if d.size == 0 {
        (bytes == 0).then_some(0)
    } else if (bytes as usize).is_multiple_of(d.size) {
        Some(bytes as usize / d.size)
    } else {
        None
    })
}

/// `MPI_Get_elements` (`x`: `MPI_Get_elements_x`, an `MPI_Count`): basic elements received.
///
/// # Safety
/// `status` readable, `count` writable.
pub unsafe fn get_elements(
    acc: &mut Access,
    status: *const Status,
    dt: Datatype,
    count: *mut c_void,
    x: bool,
) -> Res<()> {
    if !wants(status) {
        return Err(null_arg(None, "null status pointer"));
    }
    let d = query(acc, dt)?;
    // SAFETY: checked; MPI's contract.
    let bytes = unsafe { (*status).count() };
    let n = usize::try_from(bytes).ok().and_then(|b| elements_in(&d, b));
    // SAFETY: the caller's contract.
    unsafe {
        if x {
            write_out(count.cast::<Count>(), n.map_or(abi::UNDEFINED as Count, |n| n as Count))
        } else {
            write_out(count.cast::<c_int>(), n.and_then(|n| c_int::try_from(n).ok()).unwrap_or(abi::UNDEFINED))
        }
    }
}

/// `MPI_Status_set_elements` (`x`: `_x`): sets the status's byte count to `count` elements of `dt`.
///
/// # Safety
/// `status` writable.
pub unsafe fn set_elements(acc: &mut Access, status: *mut Status, dt: Datatype, count: Count) -> Res<()> {
    if !wants(status) {
        return Err(null_arg(None, "null status pointer"));
    }
    if count < 0 {
        return Err(Fail::new(abi::ERR_COUNT, None, Why::Arg("negative element count")));
    }
    let d = query(acc, dt)?;
    // Whole elements of the type, then basic elements of its first runs.
    let whole = (count as u64).checked_div(d.elems).unwrap_or(0);
    let mut rem = (count as u64).checked_rem(d.elems).unwrap_or(0);
    let mut bytes = whole * d.size as u64;
    for r in d.runs.iter() {
        let per = (r.bytes() / r.elem) as u64;
        let take = rem.min(per);
        bytes += take * r.elem as u64;
        rem -= take;
    }
    // SAFETY: checked; MPI's contract.
    unsafe { (*status).set_count(bytes as i64) };
    Ok(())
}

/// `MPI_Status_set_cancelled`.
///
/// # Safety
/// `status` writable.
pub unsafe fn set_cancelled(status: *mut Status, flag: c_int) -> Res<()> {
    if !wants(status) {
        return Err(null_arg(None, "null status pointer"));
    }
    // SAFETY: checked; MPI's contract.
    unsafe { (*status).set_cancelled(flag != 0) };
    Ok(())
}

/// `MPI_Type_get_name`.
///
/// # Safety
/// `name` writable for `MPI_MAX_OBJECT_NAME` bytes, `len` writable.
pub unsafe fn get_name(acc: &mut Access, dt: Datatype, name: *mut c_char, len: *mut c_int) -> Res<()> {
    let st = acc.st();
    let s: String = match st.type_names.get(&dt) {
        Some(n) => n.clone(),
        // MPI-4.1 §5.1.13 (as for communicators and windows): the null handle's name is its own.
        None if dt == abi::DATATYPE_NULL => "MPI_DATATYPE_NULL".to_string(),
        None => match predefined_name(dt) {
            Some(n) => n.to_string(),
            None => st.types.get(dt).map(|e| e.name.clone()).ok_or_else(|| super::bad_type(dt, None))?,
        },
    };
    // SAFETY: the caller's contract.
    unsafe { crate::env::put_str(&s, name, abi::MAX_OBJECT_NAME, len) }
}

/// `MPI_Type_set_name` (predefined types can be renamed too).
///
/// # Safety
/// `name` a NUL-terminated string.
pub unsafe fn set_name(acc: &mut Access, dt: Datatype, name: *const c_char) -> Res<()> {
    let st = running(acc)?;
    if name.is_null() {
        return Err(null_arg(None, "null name"));
    }
    // SAFETY: MPI's contract: a C string.
    let s = unsafe { std::ffi::CStr::from_ptr(name) }.to_string_lossy();
    let mut s = s.into_owned();
    while s.len() >= abi::MAX_OBJECT_NAME {
        s.pop();
    }
    if predefined_name(dt).is_some() {
        st.type_names.insert(dt, s);
        return Ok(());
    }
    st.types.get_mut(dt).ok_or_else(|| super::bad_type(dt, None))?.name = s;
    Ok(())
}

/// `MPI_Type_get_envelope(_c)`. The `int` form has no large counts (`num_large_counts` null)
/// and refuses a type a `_c` constructor made, whose arguments it cannot return.
///
/// # Safety
/// The outputs writable (`num_large_counts` in the `_c` form only).
pub unsafe fn get_envelope<N: Width>(
    acc: &mut Access,
    dt: Datatype,
    num_integers: *mut N,
    num_addresses: *mut N,
    num_large_counts: *mut N,
    num_datatypes: *mut N,
    combiner: *mut c_int,
) -> Res<()> {
    let d = query(acc, dt)?;
    let (ni, na, nc, nd, c) = match &d.contents {
        None => (0, 0, 0, 0, abi::COMBINER_NAMED),
        Some(c) if N::FORM == Form::Int && !c.counts.is_empty() => return Err(made_by_c()),
        Some(c) => (c.ints.len(), c.aints.len(), c.counts.len(), c.types.len(), c.combiner),
    };
    let n = |k: usize| N::try_from(k).map_err(|_| Fail::new(abi::ERR_ARG, None, Why::Arg("too many arguments")));
    // SAFETY: the caller's contract.
    unsafe {
        write_out(num_integers, n(ni)?)?;
        write_out(num_addresses, n(na)?)?;
        if N::FORM == Form::Large {
            write_out(num_large_counts, n(nc)?)?;
        }
        write_out(num_datatypes, n(nd)?)?;
        write_out(combiner, c)
    }
}

#[cold]
fn made_by_c() -> Fail {
    Fail::new(
        abi::ERR_TYPE,
        None,
        Why::Arg("the datatype was made by a large-count (_c) constructor: use MPI_Type_get_envelope_c/contents_c"),
    )
}

/// `MPI_Type_get_contents(_c)`: the constructor's arguments; derived types among them come back
/// as new handles (to be freed by the caller), predefined ones as themselves. The `int` form has
/// no large counts (`max_large_counts` 0, `large_counts` null) and refuses a type a `_c`
/// constructor made.
///
/// # Safety
/// The arrays writable for their `max_` lengths.
#[allow(clippy::too_many_arguments)]
pub unsafe fn get_contents<N: Width>(
    acc: &mut Access,
    dt: Datatype,
    max_integers: N,
    max_addresses: N,
    max_large_counts: N,
    max_datatypes: N,
    integers: *mut c_int,
    addresses: *mut Aint,
    large_counts: *mut Count,
    datatypes: *mut Datatype,
) -> Res<()> {
    if query(acc, dt)?.contents.as_ref().is_some_and(|c| N::FORM == Form::Int && !c.counts.is_empty()) {
        return Err(made_by_c());
    }
    let st = running(acc)?;
    let d = any(&st.types, dt)?;
    let Some(c) = &d.contents else {
        return Err(Fail::new(
            abi::ERR_TYPE,
            None,
            Why::Arg("a predefined datatype has no contents (MPI_COMBINER_NAMED)"),
        ));
    };
    let short = |max: N, n: usize| {
        let m: i64 = max.into();
        m < 0 || (m as u64) < n as u64
    };
    if short(max_integers, c.ints.len())
        || short(max_addresses, c.aints.len())
        || short(max_large_counts, c.counts.len())
        || short(max_datatypes, c.types.len())
    {
        return Err(Fail::new(abi::ERR_ARG, None, Why::Arg("the arrays are shorter than MPI_Type_get_envelope said")));
    }
    if (!c.ints.is_empty() && integers.is_null())
        || (!c.aints.is_empty() && addresses.is_null())
        || (!c.counts.is_empty() && large_counts.is_null())
        || (!c.types.is_empty() && datatypes.is_null())
    {
        return Err(null_arg(None, "null contents array"));
    }
    let mut handles = Vec::with_capacity(c.types.len());
    for t in &c.types {
        let h = match t.named {
            Some(h) => h,
            // Committed: it describes data exactly as the original did.
            None => st
                .types
                .insert(Entry::new(t.clone(), true))
                .ok_or_else(|| Fail::new(abi::ERR_INTERN, None, Why::Arg("too many datatypes")))?,
        };
        handles.push(h);
    }
    // SAFETY: the caller's contract: arrays of at least the lengths checked above, non-null
    // where anything is written (checked above).
    unsafe {
        put(&c.ints, integers);
        put(&c.aints, addresses);
        put(&c.counts, large_counts);
        put(&handles, datatypes);
    }
    Ok(())
}

/// Copies `src` to `dst` (which may be null when `src` is empty).
///
/// # Safety
/// `dst` writable for `src.len()` elements when `src` is not empty.
unsafe fn put<T: Copy>(src: &[T], dst: *mut T) {
    if !src.is_empty() {
        // SAFETY: the caller's contract.
        unsafe { std::ptr::copy_nonoverlapping(src.as_ptr(), dst, src.len()) };
    }
}

/// `MPI_Get_address`: the address as an integer (the same in absolute terms as `MPI_BOTTOM`'s).
///
/// # Safety
/// `address` writable.
pub unsafe fn get_address(location: *const c_void, address: *mut Aint) -> Res<()> {
    // SAFETY: the caller's contract.
    unsafe { write_out(address, location as Aint) }
}
