//! The environment: start-up and shut-down, thread levels, version and processor name, clocks,
//! error strings and classes, error handlers, datatype sizes.

use std::ffi::{c_char, c_int};
use std::sync::Arc;

use nemesis::Endpoint;

use crate::abi;
use crate::coll::{self, Tuning};
use crate::comm::{Comm, Nodes};
use crate::error::{Fail, Res, Why, class_of, string_of};
use crate::state::{Access, Phase, State, not_running};

/// The library's version string.
const LIBRARY_VERSION: &str =
    concat!("nemesis-mpi ", env!("CARGO_PKG_VERSION"), ": MPI-3.1 subset over the nemesis Endpoint");

/// `MPI_Init` and `MPI_Init_thread`: starts the Endpoint, builds `MPI_COMM_WORLD` (contexts 0
/// and 1) and `MPI_COMM_SELF` (2 and 3), and learns which job ranks share a node. Grants the level
/// required; from `MPI_THREAD_MULTIPLE` on, every call takes the big lock (module `state`).
pub fn init(acc: &mut Access, required: c_int) -> Res<()> {
    let st = acc.st();
    match st.phase {
        Phase::Before => {}
        Phase::Running => return Err(Fail::new(abi::ERR_OTHER, None, Why::Arg("MPI_Init called twice"))),
        Phase::After => return Err(not_running(Phase::After)),
    }
    let tuning =
        Tuning::from_vars(|k| std::env::var(k).ok()).map_err(|e| Fail::new(abi::ERR_OTHER, None, Why::Other(e)))?;
    let defer = match std::env::var("NEMESIS_DEFER_RECV").as_deref() {
        Err(_) | Ok("1") => true,
        Ok("0") => false,
        Ok(v) => {
            let why = format!("NEMESIS_DEFER_RECV={v}: expected 0 or 1");
            return Err(Fail::new(abi::ERR_OTHER, None, Why::Other(why)));
        }
    };
    // A C program has no other way to see nemesis's warnings (NEMESIS_LOG); a process that set
    // its own subscriber keeps it.
    nemesis::log::init();
    let ep = Endpoint::init().map_err(|e| Fail::new(abi::ERR_OTHER, None, Why::Endpoint(e)))?;
    let (rank, size) = (ep.rank(), ep.size());
    let world_ranks: Vec<u32> = (0..size).collect();
    let one_node = vec![0u32; size as usize];
    let mut world = Comm::new(world_ranks, rank, size, nemesis::WORLD, abi::ERRORS_ARE_FATAL, &one_node);
    // The node's name for the collectives' levels and Comm_split_type's shared colour.
    let leader = ep.node_leader();
    let all_local = ep.local_ranks().len() == size as usize;
    st.ep = Some(ep);
    let node_of_job: Vec<u32> = match tuning.fake_nodes {
        Some(k) => (0..size).map(|r| (u64::from(r) * u64::from(k) / u64::from(size)) as u32).collect(),
        None if all_local => one_node,
        None => {
            // Each rank names its node by its lowest rank (the Endpoint's, as Comm_split_type's
            // shared colour); everyone learns everyone's.
            let all = coll::allgather_bytes(acc, &world, &tuning, &leader.to_ne_bytes());
            let all = all.inspect_err(|_| acc.st().ep = None)?;
            all.chunks_exact(4).map(|b| u32::from_ne_bytes([b[0], b[1], b[2], b[3]])).collect()
        }
    };
    world.nodes = Nodes::group(size as usize, |r| node_of_job[r]);
    let me = Comm::new(vec![rank], rank, size, nemesis::WORLD + 2, abi::ERRORS_ARE_FATAL, &node_of_job);
    let st = acc.st();
    world.name = "MPI_COMM_WORLD".into();
    let mut me = me;
    me.name = "MPI_COMM_SELF".into();
    st.comms = vec![Arc::new(world), Arc::new(me)];
    st.comms_retired.clear();
    st.attr_values = crate::attr::predefined_values(size);
    if let Some(last) = st.user_codes.last() {
        st.attr_values[crate::attr::LASTUSEDCODE_INDEX] = last.0;
    }
    st.comm_slots.clear();
    st.node_of_job = node_of_job;
    st.contexts = crate::comm::context::Contexts::new();
    st.tuning = tuning;
    st.deferred.clear();
    st.defer_below = match &st.ep {
        Some(ep) if defer => ep.fastbox_payload() + 1,
        _ => 0,
    };
    st.provided = required.clamp(abi::THREAD_SINGLE, abi::THREAD_MULTIPLE);
    st.main_thread = Some(std::thread::current().id());
    st.phase = Phase::Running;
    st.refresh_all_fast();
    let ft = st.ep.as_ref().is_some_and(|ep| ep.ft_enabled());
    st.fused = st.provided != abi::THREAD_MULTIPLE && !ft;
    crate::state::set_fused(st.fused);
    if st.provided == abi::THREAD_MULTIPLE {
        acc.become_threaded();
    }
    Ok(())
}

/// `MPI_Finalize`: completes outstanding sends and synchronises with the other ranks (the
/// Endpoint's finalize), then nothing but the query functions may be called.
///
/// `MPI_COMM_SELF`'s attributes are deleted first, in LIFO order, as if it were freed
/// (MPI-4.1 §11.2.4): their callbacks may call MPI, which is still running (`MPI_Finalized`
/// says false), so no borrow of the state is held across them; everything else is looked up
/// afterwards. A failing callback fails the call, MPI still running.
pub fn finalize(acc: &mut Access) -> Res<()> {
    let st = acc.st();
    if st.ep.is_none() {
        return Err(not_running(st.phase));
    }
    crate::attr::delete_all(acc, 1)?;
    let st = acc.st();
    let Some(ep) = st.ep.take() else { return Err(not_running(st.phase)) };
    st.fused = false;
    crate::state::set_fused(false);
    st.phase = Phase::After;
    st.refresh_all_fast();
    for c in &st.comms {
        coll::area::release(c);
    }
    st.comms.clear();
    st.reqs = crate::request::table();
    st.types.clear();
    crate::p2p::mprobe::clear(st);
    st.type_names.clear();
    st.freed.clear();
    st.bsend = crate::p2p::bsend::Bsend::new();
    ep.finalize().map_err(|e| Fail::new(abi::ERR_OTHER, None, Why::Endpoint(e)))
}

/// `MPI_Abort`: ends the whole job with `code`.
pub fn abort(acc: &mut Access, comm: abi::Comm, code: c_int) -> ! {
    let st = acc.st();
    let msg = format!("MPI_Abort(comm {comm:#x}, errorcode {code}) called");
    match st.ep.as_mut() {
        Some(ep) => ep.abort(code, &msg),
        None => {
            eprintln!("nemesis-mpi: {msg}");
            std::process::exit(code & 0xff)
        }
    }
}

/// Writes `s` into a C buffer of `cap` bytes (NUL included) and its length into `len`.
///
/// # Safety
/// `buf` writable for `cap` bytes; `len` writable or null.
pub(crate) unsafe fn put_str(s: &str, buf: *mut c_char, cap: usize, len: *mut c_int) -> Res<()> {
    if buf.is_null() {
        return Err(Fail::new(abi::ERR_ARG, None, Why::Arg("null string buffer")));
    }
    let mut n = s.len().min(cap - 1);
    while !s.is_char_boundary(n) {
        n -= 1;
    }
    // SAFETY: the caller's contract: `cap > n` writable bytes.
    unsafe {
        std::ptr::copy_nonoverlapping(s.as_ptr(), buf as *mut u8, n);
        *buf.add(n) = 0;
        if !len.is_null() {
            *len = n as c_int;
        }
    }
    Ok(())
}

/// Writes `v` through `out`.
///
/// # Safety
/// `out` null or writable.
unsafe fn put<T>(out: *mut T, v: T) -> Res<()> {
    if out.is_null() {
        return Err(Fail::new(abi::ERR_ARG, None, Why::Arg("null output pointer")));
    }
    // SAFETY: checked non-null; the caller's contract.
    unsafe { out.write(v) };
    Ok(())
}

/// `MPI_Initialized`.
///
/// # Safety
/// `flag` writable.
pub unsafe fn initialized(st: &State, flag: *mut c_int) -> Res<()> {
    // SAFETY: the caller's contract.
    unsafe { put(flag, c_int::from(st.phase != Phase::Before)) }
}

/// `MPI_Finalized`.
///
/// # Safety
/// `flag` writable.
pub unsafe fn finalized(st: &State, flag: *mut c_int) -> Res<()> {
    // SAFETY: the caller's contract.
    unsafe { put(flag, c_int::from(st.phase == Phase::After)) }
}

/// `MPI_Get_version`.
///
/// # Safety
/// Both pointers writable.
pub unsafe fn get_version(version: *mut c_int, subversion: *mut c_int) -> Res<()> {
    // SAFETY: the caller's contract.
    unsafe {
        put(version, abi::VERSION)?;
        put(subversion, abi::SUBVERSION)
    }
}

/// `MPI_Get_library_version`.
///
/// # Safety
/// `version` writable for `MPI_MAX_LIBRARY_VERSION_STRING` bytes, `len` writable.
pub unsafe fn get_library_version(version: *mut c_char, len: *mut c_int) -> Res<()> {
    // SAFETY: the caller's contract.
    unsafe { put_str(LIBRARY_VERSION, version, abi::MAX_LIBRARY_VERSION_STRING, len) }
}

/// `MPI_Query_thread`.
///
/// # Safety
/// `provided` writable.
pub unsafe fn query_thread(st: &State, provided: *mut c_int) -> Res<()> {
    if st.phase != Phase::Running {
        return Err(not_running(st.phase));
    }
    // SAFETY: the caller's contract.
    unsafe { put(provided, st.provided) }
}

/// `MPI_Is_thread_main`.
///
/// # Safety
/// `flag` writable.
pub unsafe fn is_thread_main(st: &State, flag: *mut c_int) -> Res<()> {
    if st.phase != Phase::Running {
        return Err(not_running(st.phase));
    }
    let main = st.main_thread == Some(std::thread::current().id());
    // SAFETY: the caller's contract.
    unsafe { put(flag, c_int::from(main)) }
}

/// `MPI_Get_processor_name`: the host name.
///
/// # Safety
/// `name` writable for `MPI_MAX_PROCESSOR_NAME` bytes, `len` writable.
pub unsafe fn get_processor_name(name: *mut c_char, len: *mut c_int) -> Res<()> {
    let host = nemesis::launch::contract::hostname().unwrap_or_else(|_| "localhost".into());
    // SAFETY: the caller's contract.
    unsafe { put_str(&host, name, abi::MAX_PROCESSOR_NAME, len) }
}

/// `MPI_Wtime`: seconds on the monotonic clock (the same clock on every rank of a node).
pub fn wtime() -> f64 {
    let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: `ts` is a valid timespec to write; CLOCK_MONOTONIC always exists on Linux.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    ts.tv_sec as f64 + ts.tv_nsec as f64 * 1e-9
}

/// `MPI_Wtick`: the monotonic clock's resolution.
pub fn wtick() -> f64 {
    let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: as in `wtime`.
    let ok = unsafe { libc::clock_getres(libc::CLOCK_MONOTONIC, &mut ts) } == 0;
    if ok && (ts.tv_sec > 0 || ts.tv_nsec > 0) { ts.tv_sec as f64 + ts.tv_nsec as f64 * 1e-9 } else { 1e-9 }
}

/// `MPI_Error_string`.
///
/// # Safety
/// `string` writable for `MPI_MAX_ERROR_STRING` bytes, `len` writable.
pub unsafe fn error_string(st: &State, code: c_int, string: *mut c_char, len: *mut c_int) -> Res<()> {
    if let Some((_, s)) = crate::errh::user_code(st, code) {
        // SAFETY: the caller's contract.
        return unsafe { put_str(&s, string, abi::MAX_ERROR_STRING, len) };
    }
    if class_of(code).is_none() {
        return Err(Fail::new(abi::ERR_ARG, None, Why::Other(format!("{code} is not an error code"))));
    }
    // SAFETY: the caller's contract.
    unsafe { put_str(&string_of(code), string, abi::MAX_ERROR_STRING, len) }
}

/// `MPI_Error_class`.
///
/// # Safety
/// `class` writable.
pub unsafe fn error_class(st: &State, code: c_int, class: *mut c_int) -> Res<()> {
    let c = class_of(code)
        .or_else(|| crate::errh::user_code(st, code).map(|(c, _)| c))
        .ok_or_else(|| Fail::new(abi::ERR_ARG, None, Why::Other(format!("{code} is not an error code"))))?;
    // SAFETY: the caller's contract.
    unsafe { put(class, c) }
}
