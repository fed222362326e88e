//! Info objects (MPI-3.1 §9, MPI-4.1 §10): `MPI_Info_*` and `MPI_INFO_ENV`, whose contents are
//! made up at each look from the process's environment.
//!
//! An info object is an ordered list of (key, value) strings; keys are at most
//! `MPI_MAX_INFO_KEY` bytes and not empty, values at most `MPI_MAX_INFO_VAL`.

use std::ffi::{CStr, c_char, c_int};

use crate::abi::{self, Info};
use crate::error::{Fail, Res, Why};
use crate::handle::Table;
use crate::state::{Access, State};

#[cold]
fn null_arg(what: &'static str) -> Fail {
    Fail::new(abi::ERR_ARG, None, Why::Arg(what))
}

/// An info object: keys and values in the order they were first set.
pub type InfoObj = Vec<(String, String)>;

/// The info objects: handles `INFO_DIRECT + index`.
pub type Infos = Table<InfoObj>;

/// MPICH's direct info handles.
pub const INFO_DIRECT: u32 = abi::handle::DIRECT | abi::handle::INFO;

pub const fn infos() -> Infos {
    Table::new(INFO_DIRECT)
}

#[cold]
fn bad_info(h: Info) -> Fail {
    Fail::new(abi::ERR_INFO, None, Why::Other(format!("{h:#x} is not a valid info object")))
}

/// `MPI_INFO_ENV`'s contents (MPI-4.1 §11.2.4): the command, its arguments, the job size, the
/// working directory, the host, the architecture and the thread level.
fn info_env(st: &State) -> InfoObj {
    let mut args = std::env::args();
    let command = args.next().unwrap_or_default();
    let argv = args.collect::<Vec<_>>().join(" ");
    let size = st.ep.as_ref().map_or(1, |e| e.size());
    let wdir = std::env::current_dir().map(|d| d.display().to_string()).unwrap_or_default();
    let host = nemesis::launch::contract::hostname().unwrap_or_else(|_| "localhost".into());
    let level = crate::session::level_name(st.provided);
    let arch = std::env::consts::ARCH.to_string();
    let fields = [("command", command), ("argv", argv), ("maxprocs", size.to_string()), ("wdir", wdir)];
    fields
        .into_iter()
        .chain([("host", host), ("arch", arch), ("thread_level", level.to_string())])
        .map(|(k, v)| (k.to_string(), v))
        .collect()
}

/// The contents of info `h` (`MPI_INFO_ENV` made up on the spot).
pub fn contents(st: &State, h: Info) -> Res<InfoObj> {
    info_of(st, h)
}

/// The contents of info `h` (`MPI_INFO_ENV` made up on the spot).
fn info_of(st: &State, h: Info) -> Res<InfoObj> {
    if h == abi::INFO_ENV {
        return Ok(info_env(st));
    }
    st.infos.get(h).cloned().ok_or_else(|| bad_info(h))
}

/// A key or value argument: a C string of at most `max` bytes (`MPI_MAX_INFO_KEY`/`_VAL`).
///
/// # Safety
/// `s` null or a NUL-terminated string.
unsafe fn c_str(s: *const c_char, max: usize, class: c_int) -> Res<String> {
    if s.is_null() {
        return Err(Fail::new(class, None, Why::Arg("null string")));
    }
    // SAFETY: the caller's contract.
    let v = unsafe { CStr::from_ptr(s) }.to_string_lossy().into_owned();
    if v.len() > max || (class == abi::ERR_INFO_KEY && v.is_empty()) {
        return Err(Fail::new(class, None, Why::Arg("info key or value too long (or an empty key)")));
    }
    Ok(v)
}

/// Stores a new info object and writes its handle.
///
/// # Safety
/// `out` null or writable.
pub(crate) unsafe fn hand_out_info(st: &mut State, v: InfoObj, out: *mut Info) -> Res<()> {
    if out.is_null() {
        return Err(null_arg("null info pointer"));
    }
    let h = st.infos.insert(v).ok_or_else(|| Fail::new(abi::ERR_INTERN, None, Why::Arg("too many info objects")))?;
    // SAFETY: checked non-null; MPI's contract.
    unsafe { *out = h };
    Ok(())
}

/// `MPI_Info_create`.
///
/// # Safety
/// `out` null or writable.
pub unsafe fn info_create(acc: &mut Access, out: *mut Info) -> Res<()> {
    // SAFETY: the caller's contract.
    unsafe { hand_out_info(acc.st(), Vec::new(), out) }
}

/// `MPI_Info_dup` (of `MPI_INFO_ENV` too).
///
/// # Safety
/// `out` null or writable.
pub unsafe fn info_dup(acc: &mut Access, info: Info, out: *mut Info) -> Res<()> {
    let st = acc.st();
    let v = info_of(st, info)?;
    // SAFETY: the caller's contract.
    unsafe { hand_out_info(st, v, out) }
}

/// `MPI_Info_free`.
///
/// # Safety
/// `info` null or valid for reads and writes.
pub unsafe fn info_free(acc: &mut Access, info: *mut Info) -> Res<()> {
    if info.is_null() {
        return Err(null_arg("null info pointer"));
    }
    // SAFETY: checked non-null; MPI's contract.
    let h = unsafe { *info };
    acc.st().infos.remove(h).ok_or_else(|| bad_info(h))?;
    // SAFETY: as above.
    unsafe { *info = abi::INFO_NULL };
    Ok(())
}

/// `MPI_Info_set`.
///
/// # Safety
/// `key` and `value` NUL-terminated strings.
pub unsafe fn info_set(acc: &mut Access, info: Info, key: *const c_char, value: *const c_char) -> Res<()> {
    // SAFETY: the caller's contract.
    let (k, v) = unsafe {
        (c_str(key, abi::MAX_INFO_KEY, abi::ERR_INFO_KEY)?, c_str(value, abi::MAX_INFO_VAL, abi::ERR_INFO_VALUE)?)
    };
    put(acc.st(), info, &k, &v)
}

/// Sets `key` to `value` in info object `info` (replacing its value if it has one).
pub fn put(st: &mut State, info: Info, key: &str, value: &str) -> Res<()> {
    let obj = st.infos.get_mut(info).ok_or_else(|| bad_info(info))?;
    match obj.iter_mut().find(|(a, _)| a == key) {
        Some(e) => e.1 = value.to_string(),
        None => obj.push((key.to_string(), value.to_string())),
    }
    Ok(())
}

/// `MPI_Info_delete`.
///
/// # Safety
/// `key` a NUL-terminated string.
pub unsafe fn info_delete(acc: &mut Access, info: Info, key: *const c_char) -> Res<()> {
    // SAFETY: the caller's contract.
    let k = unsafe { c_str(key, abi::MAX_INFO_KEY, abi::ERR_INFO_KEY)? };
    let obj = acc.st().infos.get_mut(info).ok_or_else(|| bad_info(info))?;
    let before = obj.len();
    obj.retain(|(a, _)| *a != k);
    if obj.len() == before {
        return Err(Fail::new(abi::ERR_INFO_NOKEY, None, Why::Arg("no such info key")));
    }
    Ok(())
}

/// `MPI_Info_get` (`value` gets at most `valuelen` bytes and a NUL) and `MPI_Info_get_valuelen`
/// (`value` null: `*valuelen` gets the length).
///
/// # Safety
/// `key` a NUL-terminated string; `value` null or writable for `valuelen + 1` bytes; `valuelen`
/// (for `get_valuelen`) and `flag` writable.
pub unsafe fn info_get(
    acc: &mut Access,
    info: Info,
    key: *const c_char,
    valuelen: *mut c_int,
    cap: c_int,
    value: *mut c_char,
    flag: *mut c_int,
) -> Res<()> {
    // SAFETY: the caller's contract.
    let k = unsafe { c_str(key, abi::MAX_INFO_KEY, abi::ERR_INFO_KEY)? };
    let obj = info_of(acc.st(), info)?;
    if flag.is_null() {
        return Err(null_arg("null flag pointer"));
    }
    let found = obj.iter().find(|(a, _)| *a == k).map(|(_, v)| v.as_bytes());
    // SAFETY: MPI's contract on the outputs (checked non-null where written).
    unsafe {
        *flag = c_int::from(found.is_some());
        let Some(v) = found else { return Ok(()) };
        if !valuelen.is_null() {
            *valuelen = v.len() as c_int;
        }
        if !value.is_null() {
            if cap < 0 {
                return Err(Fail::new(abi::ERR_ARG, None, Why::Arg("negative valuelen")));
            }
            let n = v.len().min(cap as usize);
            std::ptr::copy_nonoverlapping(v.as_ptr(), value.cast::<u8>(), n);
            *value.add(n) = 0;
        }
    }
    Ok(())
}

/// `MPI_Info_get_nkeys` (`n` null) and `MPI_Info_get_nthkey` (key `n` into `key`, which holds
/// `MPI_MAX_INFO_KEY + 1` bytes).
///
/// # Safety
/// `nkeys` null or writable; `key` writable as said.
pub unsafe fn info_keys(acc: &mut Access, info: Info, nkeys: *mut c_int, n: c_int, key: *mut c_char) -> Res<()> {
    let obj = info_of(acc.st(), info)?;
    // SAFETY: MPI's contract on the outputs (checked non-null where written).
    unsafe {
        if !nkeys.is_null() {
            *nkeys = obj.len() as c_int;
            return Ok(());
        }
        let Some((k, _)) = usize::try_from(n).ok().and_then(|i| obj.get(i)) else {
            return Err(Fail::new(abi::ERR_ARG, None, Why::Arg("info key index out of range")));
        };
        if key.is_null() {
            return Err(null_arg("null key buffer"));
        }
        std::ptr::copy_nonoverlapping(k.as_ptr(), key.cast::<u8>(), k.len());
        *key.add(k.len()) = 0;
    }
    Ok(())
}

/// `MPI_Info_create_env` (MPI-4.0): a new info object with `MPI_INFO_ENV`'s contents (callable
/// before `MPI_Init`; the command line comes from the process, not from `argc`/`argv`, which a
/// C program may have edited).
///
/// # Safety
/// `out` null or writable.
pub unsafe fn info_create_env(acc: &mut Access, out: *mut Info) -> Res<()> {
    let st = acc.st();
    let v = info_env(st);
    // SAFETY: the caller's contract.
    unsafe { hand_out_info(st, v, out) }
}

/// `MPI_Info_get_string` (MPI-4.0): with `*buflen` 0, only the length the value needs (its NUL
/// included) into `*buflen`; otherwise the value, cut to `*buflen - 1` bytes, and its NUL, and
/// the length it needs into `*buflen`. `*flag` tells whether the key is set.
///
/// # Safety
/// `key` NUL-terminated; `buflen` and `flag` valid for reads and writes; `value` writable for
/// `*buflen` bytes.
pub unsafe fn info_get_string(
    acc: &mut Access,
    info: Info,
    key: *const c_char,
    buflen: *mut c_int,
    value: *mut c_char,
    flag: *mut c_int,
) -> Res<()> {
    // SAFETY: the caller's contract.
    let k = unsafe { c_str(key, abi::MAX_INFO_KEY, abi::ERR_INFO_KEY)? };
    let obj = info_of(acc.st(), info)?;
    if flag.is_null() || buflen.is_null() {
        return Err(null_arg("null flag or buflen pointer"));
    }
    // SAFETY: checked non-null; MPI's contract.
    let cap = unsafe { *buflen };
    if cap < 0 {
        return Err(Fail::new(abi::ERR_ARG, None, Why::Arg("negative buflen")));
    }
    let found = obj.iter().find(|(a, _)| *a == k).map(|(_, v)| v.as_bytes());
    // SAFETY: MPI's contract on the outputs (checked non-null where written).
    unsafe {
        *flag = c_int::from(found.is_some());
        let Some(v) = found else { return Ok(()) };
        *buflen = v.len() as c_int + 1;
        if cap > 0 {
            if value.is_null() {
                return Err(null_arg("null value buffer"));
            }
            let n = v.len().min(cap as usize - 1);
            std::ptr::copy_nonoverlapping(v.as_ptr(), value.cast::<u8>(), n);
            *value.add(n) = 0;
        }
    }
    Ok(())
}
