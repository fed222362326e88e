//! Attributes (MPI-3.1 §6.7): the predefined attributes of `MPI_COMM_WORLD` (`MPI_TAG_UB`,
//! `MPI_HOST`, `MPI_IO`, `MPI_WTIME_IS_GLOBAL`, `MPI_UNIVERSE_SIZE`, `MPI_LASTUSEDCODE`,
//! `MPI_APPNUM`) and keyvals with copy and delete callbacks on communicators and datatypes
//! (`MPI_Type_create_keyval`...: one table, each keyval of one kind); `MPI_Alloc_mem`/
//! `MPI_Free_mem`; `MPI_Pcontrol`. Info objects are in [`crate::info`].

use std::ffi::{c_int, c_void};
use std::sync::Arc;

use crate::abi::{self, Aint, Comm as CommH, Datatype, Info};
use crate::comm::handle_of;
use crate::error::{Fail, Res, Why};
use crate::handle::Table;
use crate::p2p::comm_at;
use crate::state::{Access, State, not_running};

pub use crate::info::{Infos, infos};

/// `MPI_Comm_copy_attr_function`.
pub type CopyFn = unsafe extern "C" fn(CommH, c_int, *mut c_void, *mut c_void, *mut c_void, *mut c_int) -> c_int;
/// `MPI_Comm_delete_attr_function`.
pub type DeleteFn = unsafe extern "C" fn(CommH, c_int, *mut c_void, *mut c_void) -> c_int;

/// A keyval made by `MPI_Comm_create_keyval`.
#[derive(Clone, Copy, Debug)]
pub struct Keyval {
    pub copy: Option<CopyFn>,
    pub delete: Option<DeleteFn>,
    /// The user's `extra_state` (an address).
    pub extra: usize,
    /// Freed by `MPI_Comm_free_keyval` while attributes still used it: no new ones.
    pub freed: bool,
    /// A datatype keyval (`MPI_Type_create_keyval`; the callbacks take a datatype handle, an
    /// `int` as a communicator's is); communicator keyvals are not.
    pub types: bool,
}

/// The keyvals: handles `KEYVAL_DIRECT + index`.
pub type Keyvals = Table<Keyval>;

/// MPICH's direct keyval handles.
pub const KEYVAL_DIRECT: u32 = abi::handle::DIRECT | abi::handle::KEYVAL;

pub const fn keyvals() -> Keyvals {
    Table::new(KEYVAL_DIRECT)
}

/// Where `MPI_LASTUSEDCODE`'s value is in [`State::attr_values`].
pub const LASTUSEDCODE_INDEX: usize = 5;

/// The predefined attribute keys, in the order of [`State::attr_values`].
const PREDEFINED: [c_int; 7] =
    [abi::TAG_UB, abi::HOST, abi::IO, abi::WTIME_IS_GLOBAL, abi::UNIVERSE_SIZE, abi::LASTUSEDCODE, abi::APPNUM];

/// The predefined attributes' values for a job of `size` ranks: tags go to `INT_MAX`, no host
/// rank, every rank can do I/O, clocks are per node (not global), the universe is the job, the
/// last error code is the last class, one application.
pub fn predefined_values(size: u32) -> [c_int; 7] {
    [c_int::MAX, abi::PROC_NULL, abi::ANY_SOURCE, 0, size as c_int, abi::ERRX_LAST, 0]
}

fn running(acc: &mut Access) -> Res<&mut State> {
    let st = acc.st();
    if st.ep.is_none() {
        return Err(not_running(st.phase));
    }
    Ok(st)
}

#[cold]
fn bad_keyval(k: c_int) -> Fail {
    Fail::new(abi::ERR_KEYVAL, None, Why::Other(format!("{k:#x} is not a valid keyval")))
}

#[cold]
fn null_arg(what: &'static str) -> Fail {
    Fail::new(abi::ERR_ARG, None, Why::Arg(what))
}

/// `MPI_Comm_create_keyval`.
///
/// # Safety
/// `keyval` null or writable.
pub unsafe fn create_keyval(
    acc: &mut Access,
    copy: Option<CopyFn>,
    delete: Option<DeleteFn>,
    keyval: *mut c_int,
    extra: *mut c_void,
    types: bool,
) -> Res<()> {
    let st = running(acc)?;
    if keyval.is_null() {
        return Err(null_arg("null keyval pointer"));
    }
    let k = st.keyvals.insert(Keyval { copy, delete, extra: extra as usize, freed: false, types });
    let k = k.ok_or_else(|| Fail::new(abi::ERR_INTERN, None, Why::Arg("too many keyvals")))?;
    // SAFETY: checked non-null; MPI's contract.
    unsafe { *keyval = k };
    Ok(())
}

/// `MPI_Comm_free_keyval`: the keyval goes once no communicator has an attribute of it.
///
/// # Safety
/// `keyval` null or valid for reads and writes.
pub unsafe fn free_keyval(acc: &mut Access, keyval: *mut c_int, types: bool) -> Res<()> {
    let st = running(acc)?;
    if keyval.is_null() {
        return Err(null_arg("null keyval pointer"));
    }
    // SAFETY: checked non-null; MPI's contract.
    let k = unsafe { *keyval };
    match st.keyvals.get_mut(k) {
        Some(kv) if !kv.freed && kv.types == types => kv.freed = true,
        _ => return Err(bad_keyval(k)),
    }
    forget_if_unused(st, k);
    // SAFETY: as above.
    unsafe { *keyval = abi::KEYVAL_INVALID };
    Ok(())
}

/// Removes freed keyval `k` from the table if no live communicator has an attribute of it.
fn forget_if_unused(st: &mut State, k: c_int) {
    let freed = st.keyvals.get(k).is_some_and(|kv| kv.freed);
    let on_comm = st.comms.iter().any(|c| c.live && c.attrs.iter().any(|&(a, _)| a == k));
    if freed && !on_comm && !st.type_attrs.iter().any(|&(_, a, _)| a == k) {
        st.keyvals.remove(k);
    }
}

// ---------------------------------------------------------------------------------------------
// The callbacks. Each runs through `state::outside` (it may call MPI, see the state module's
// doc): its function and `extra_state` are copied out of the keyval table first, and the object
// and keyval are looked up again after it returns (the callback may have freed or changed them;
// under `MPI_THREAD_MULTIPLE` another thread may have run meanwhile).

/// Runs delete callback `f` (of keyval `k`, with `extra`) on value `v` of object `obj` (a
/// communicator or a datatype handle, both `int`s).
///
/// # Safety
/// As for [`crate::state::outside`]: the caller holds no reference into the state.
unsafe fn run_delete(f: DeleteFn, obj: c_int, k: c_int, v: usize, extra: usize) -> c_int {
    // SAFETY: the user's callback with the arguments MPI-3.1 §6.7.2 (§6.7.4 for a datatype's)
    // gives it; no reference into the state is live (the caller's contract).
    unsafe { crate::state::outside(|| f(obj, k, v as *mut c_void, extra as *mut c_void)) }
}

/// Runs the copy callback of keyval `k` (as `kv` was when looked up) on value `v` of object
/// `obj`: the value for the duplicate, if the callback gives one.
///
/// # Safety
/// As for [`crate::state::outside`]: the caller holds no reference into the state.
unsafe fn run_copy(kv: Keyval, obj: c_int, k: c_int, v: usize) -> Result<Option<usize>, c_int> {
    let Some(f) = kv.copy else { return Ok(None) };
    let (mut new, mut flag): (*mut c_void, c_int) = (std::ptr::null_mut(), 0);
    // SAFETY: the user's callback with the arguments MPI-3.1 §6.7.2 (§6.7.4) gives it; `new`
    // and `flag` are ours; no reference into the state is live (the caller's contract).
    let rc = unsafe {
        crate::state::outside(|| f(obj, k, kv.extra as *mut c_void, v as *mut c_void, (&raw mut new).cast(), &mut flag))
    };
    if rc != abi::SUCCESS {
        return Err(rc);
    }
    Ok((flag != 0).then_some(new as usize))
}

/// Runs the delete callback of attribute `(k, v)` of communicator `ci`, if its keyval has one.
fn delete_callback(acc: &mut Access, ci: usize, k: c_int, v: usize) -> Res<()> {
    let Some(kv) = acc.st().keyvals.get(k).copied() else { return Ok(()) };
    let Some(f) = kv.delete else { return Ok(()) };
    // SAFETY: this frame holds the `Access` and no borrow from it (see `state::outside`).
    let rc = unsafe { run_delete(f, handle_of(ci), k, v, kv.extra) };
    if rc != abi::SUCCESS {
        return Err(Fail::new(rc, Some(ci), Why::Arg("an attribute's delete callback failed")));
    }
    Ok(())
}

/// `MPI_Comm_set_attr` (a value already set is deleted first, its delete callback run).
pub fn set_attr(acc: &mut Access, comm: CommH, k: c_int, v: *mut c_void) -> Res<()> {
    let st = running(acc)?;
    let (ci, c) = comm_at(&st.comms, comm)?;
    if st.keyvals.get(k).is_none_or(|kv| kv.freed || kv.types) {
        return Err(bad_keyval(k).on(ci));
    }
    if let Some(&(_, old)) = c.attrs.iter().find(|&&(a, _)| a == k) {
        delete_callback(acc, ci, k, old)?;
    }
    // Looked up again after the callback: the communicator may be gone (then this is an error
    // as for a freed one). The key is replaced whatever happened meanwhile: one value per key.
    let st = acc.st();
    let (ci, _) = comm_at(&st.comms, comm)?;
    let c = Arc::make_mut(&mut st.comms[ci]);
    c.attrs.retain(|&(a, _)| a != k);
    c.attrs.push((k, v as usize));
    st.refresh_fast(ci);
    Ok(())
}

/// `MPI_Comm_get_attr`: `*(void **)v` gets the value (for a predefined key, the address of an
/// `int` holding it).
///
/// # Safety
/// `v` and `flag` null or writable.
pub unsafe fn get_attr(acc: &mut Access, comm: CommH, k: c_int, v: *mut c_void, flag: *mut c_int) -> Res<()> {
    let st = running(acc)?;
    let (ci, c) = comm_at(&st.comms, comm)?;
    if v.is_null() || flag.is_null() {
        return Err(null_arg("null output pointer").on(ci));
    }
    let found = match PREDEFINED.iter().position(|&p| p == k) {
        Some(i) => Some(std::ptr::addr_of!(st.attr_values[i]) as usize),
        None if st.keyvals.get(k).is_none_or(|kv| kv.types) => return Err(bad_keyval(k).on(ci)),
        None => c.attrs.iter().find(|&&(a, _)| a == k).map(|&(_, x)| x),
    };
    // SAFETY: checked non-null; MPI's contract: `v` is a `void **` in disguise.
    unsafe {
        *flag = c_int::from(found.is_some());
        if let Some(x) = found {
            *v.cast::<*mut c_void>() = x as *mut c_void;
        }
    }
    Ok(())
}

/// `MPI_Comm_delete_attr`.
pub fn delete_attr(acc: &mut Access, comm: CommH, k: c_int) -> Res<()> {
    let st = running(acc)?;
    let (ci, c) = comm_at(&st.comms, comm)?;
    let Some(&(_, old)) = c.attrs.iter().find(|&&(a, _)| a == k) else { return Err(bad_keyval(k).on(ci)) };
    delete_callback(acc, ci, k, old)?;
    // Looked up again: the callback may have freed the communicator or changed its attributes.
    let st = acc.st();
    let (ci, _) = comm_at(&st.comms, comm)?;
    Arc::make_mut(&mut st.comms[ci]).attrs.retain(|&(a, x)| !(a == k && x == old));
    st.refresh_fast(ci);
    forget_if_unused(st, k);
    Ok(())
}

/// The attributes communicator `from` passes to its duplicate `to` (`MPI_Comm_dup`): each
/// keyval's copy callback decides.
pub fn copy_all(acc: &mut Access, from: usize, to: usize) -> Res<()> {
    let out = copies(acc, from)?;
    let st = acc.st();
    // `to` is the duplicate's slot, which no one else knows yet: still there.
    Arc::make_mut(&mut st.comms[to]).attrs = out;
    st.refresh_fast(to);
    Ok(())
}

/// The attributes a duplicate of communicator `from` gets: those whose copy callbacks say so,
/// with the values they give. The callbacks see the attributes as they were at the call (a
/// copy), each keyval looked up just before its callback runs.
pub fn copies(acc: &mut Access, from: usize) -> Res<Vec<(c_int, usize)>> {
    let attrs = match acc.st().comms.get(from) {
        Some(c) => c.attrs.clone(),
        None => return Ok(Vec::new()),
    };
    let mut out = Vec::new();
    for (k, v) in attrs {
        let Some(kv) = acc.st().keyvals.get(k).copied() else { continue };
        // SAFETY: this frame holds the `Access` and no borrow from it (see `state::outside`).
        match unsafe { run_copy(kv, handle_of(from), k, v) } {
            Ok(Some(new)) => out.push((k, new)),
            Ok(None) => {}
            Err(rc) => return Err(Fail::new(rc, Some(from), Why::Arg("an attribute's copy callback failed"))),
        }
    }
    Ok(out)
}

/// Deletes every attribute of communicator `ci` (`MPI_Comm_free`, and `MPI_COMM_SELF`'s at
/// `MPI_Finalize`), running the callbacks in LIFO order (the reverse of the order they were
/// set, as MPI-4.1 §11.2.4 asks at finalize). Each attribute stays on the communicator until
/// its callback returns (a callback may read the others); a failing callback stops the deletion
/// with its code, leaving that attribute and the earlier ones. Attributes a callback sets are
/// deleted in turn.
pub fn delete_all(acc: &mut Access, ci: usize) -> Res<()> {
    loop {
        let Some((k, v)) = acc.st().comms.get(ci).filter(|c| c.live).and_then(|c| c.attrs.last().copied()) else {
            return Ok(());
        };
        delete_callback(acc, ci, k, v)?;
        // Looked up again: the callback may have changed the attributes (or freed the
        // communicator, which ends the loop).
        let st = acc.st();
        if let Some(c) = st.comms.get_mut(ci).filter(|c| c.live) {
            Arc::make_mut(c).attrs.retain(|&(a, x)| !(a == k && x == v));
        }
        forget_if_unused(st, k);
    }
}

// ---------------------------------------------------------------------------------------------
// Attributes on datatypes.

/// Runs the delete callback of attribute `(k, v)` of datatype `dt`, if its keyval has one.
fn type_delete_callback(acc: &mut Access, dt: Datatype, k: c_int, v: usize) -> Res<()> {
    let Some(kv) = acc.st().keyvals.get(k).copied() else { return Ok(()) };
    let Some(f) = kv.delete else { return Ok(()) };
    // SAFETY: as in `delete_callback`.
    let rc = unsafe { run_delete(f, dt, k, v, kv.extra) };
    if rc != abi::SUCCESS {
        return Err(Fail::new(rc, None, Why::Arg("a datatype attribute's delete callback failed")));
    }
    Ok(())
}

/// A valid datatype and datatype keyval.
fn type_keyval(st: &State, dt: Datatype, k: c_int) -> Res<()> {
    crate::datatype::any(&st.types, dt)?;
    if st.keyvals.get(k).is_none_or(|kv| kv.freed || !kv.types) {
        return Err(bad_keyval(k));
    }
    Ok(())
}

/// `MPI_Type_set_attr` (a value already set is deleted first, its delete callback run).
pub fn type_set_attr(acc: &mut Access, dt: Datatype, k: c_int, v: *mut c_void) -> Res<()> {
    let st = running(acc)?;
    type_keyval(st, dt, k)?;
    if let Some(&(_, _, old)) = st.type_attrs.iter().find(|&&(t, a, _)| t == dt && a == k) {
        type_delete_callback(acc, dt, k, old)?;
        // Looked up again: the callback may have freed the type.
        crate::datatype::any(&acc.st().types, dt)?;
    }
    let st = acc.st();
    st.type_attrs.retain(|&(t, a, _)| !(t == dt && a == k));
    st.type_attrs.push((dt, k, v as usize));
    Ok(())
}

/// `MPI_Type_get_attr`.
///
/// # Safety
/// `v` and `flag` null or writable.
pub unsafe fn type_get_attr(acc: &mut Access, dt: Datatype, k: c_int, v: *mut c_void, flag: *mut c_int) -> Res<()> {
    let st = running(acc)?;
    crate::datatype::any(&st.types, dt)?;
    if st.keyvals.get(k).is_none_or(|kv| !kv.types) {
        return Err(bad_keyval(k));
    }
    if v.is_null() || flag.is_null() {
        return Err(null_arg("null output pointer"));
    }
    let found = st.type_attrs.iter().find(|&&(t, a, _)| t == dt && a == k).map(|&(_, _, x)| x);
    // SAFETY: checked non-null; MPI's contract: `v` is a `void **` in disguise.
    unsafe {
        *flag = c_int::from(found.is_some());
        if let Some(x) = found {
            *v.cast::<*mut c_void>() = x as *mut c_void;
        }
    }
    Ok(())
}

/// `MPI_Type_delete_attr`.
pub fn type_delete_attr(acc: &mut Access, dt: Datatype, k: c_int) -> Res<()> {
    let st = running(acc)?;
    crate::datatype::any(&st.types, dt)?;
    if st.keyvals.get(k).is_none_or(|kv| !kv.types) {
        return Err(bad_keyval(k));
    }
    let Some(&(_, _, old)) = st.type_attrs.iter().find(|&&(t, a, _)| t == dt && a == k) else {
        return Err(bad_keyval(k));
    };
    type_delete_callback(acc, dt, k, old)?;
    let st = acc.st();
    st.type_attrs.retain(|&(t, a, x)| !(t == dt && a == k && x == old));
    forget_if_unused(st, k);
    Ok(())
}

/// The attributes datatype `from` passes to its duplicate `to` (`MPI_Type_dup`): those of
/// `from` at the call, each keyval looked up just before its copy callback runs.
pub fn type_copy_all(acc: &mut Access, from: Datatype, to: Datatype) -> Res<()> {
    let attrs: Vec<(c_int, usize)> = acc.st().type_attrs.iter().filter(|a| a.0 == from).map(|a| (a.1, a.2)).collect();
    for (k, v) in attrs {
        let Some(kv) = acc.st().keyvals.get(k).copied() else { continue };
        // SAFETY: as in `copies`.
        match unsafe { run_copy(kv, from, k, v) } {
            // `to` is the duplicate's handle, which no one else knows yet.
            Ok(Some(new)) => acc.st().type_attrs.push((to, k, new)),
            Ok(None) => {}
            Err(rc) => return Err(Fail::new(rc, None, Why::Arg("a datatype attribute's copy callback failed"))),
        }
    }
    Ok(())
}

/// Deletes every attribute of datatype `dt` (`MPI_Type_free`), running the callbacks in LIFO
/// order, each attribute staying on the type until its callback returns (as [`delete_all`]).
pub fn type_delete_all(acc: &mut Access, dt: Datatype) -> Res<()> {
    loop {
        let Some((k, v)) = acc.st().type_attrs.iter().rev().find(|a| a.0 == dt).map(|a| (a.1, a.2)) else {
            return Ok(());
        };
        type_delete_callback(acc, dt, k, v)?;
        let st = acc.st();
        st.type_attrs.retain(|&(t, a, x)| !(t == dt && a == k && x == v));
        forget_if_unused(st, k);
    }
}

// ---------------------------------------------------------------------------------------------
// Memory and profiling control.

/// `MPI_Alloc_mem`: `size` bytes, page-aligned in a block node peers can map when a window
/// lies in it ([`crate::win::allocmem`]), or from `malloc`; `*(void **)base` gets the address.
///
/// # Safety
/// `base` null or writable (a `void **` in disguise).
pub unsafe fn alloc_mem(size: Aint, _info: Info, base: *mut c_void) -> Res<()> {
    if size < 0 {
        return Err(Fail::new(abi::ERR_ARG, None, Why::Arg("negative size")));
    }
    if base.is_null() {
        return Err(null_arg("null base pointer"));
    }
    let p = crate::win::allocmem::alloc(size as usize)?;
    // SAFETY: checked non-null; MPI's contract.
    unsafe { *base.cast::<*mut c_void>() = p };
    Ok(())
}

/// `MPI_Free_mem` (of memory a window still lies in: released with the last such window).
///
/// # Safety
/// `base` null or an address `MPI_Alloc_mem` gave and not freed since.
pub unsafe fn free_mem(base: *mut c_void) -> Res<()> {
    // SAFETY: the caller's contract.
    unsafe { crate::win::allocmem::free(base) };
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn predefined_attributes() {
        let v = predefined_values(6);
        assert_eq!(v[0], c_int::MAX, "MPI_TAG_UB");
        assert_eq!(v[4], 6, "MPI_UNIVERSE_SIZE");
        assert_eq!(PREDEFINED.len(), v.len());
    }
}
