//! The environment: start-up and shut-down, thread levels, version and processor name, clocks,
//! error strings and classes, the ABI's version and sizes (`MPI_Abi_get_*`), the hardware
//! (`MPI_Get_hw_resource_info`).
//!
//! **One transport.** [`bring_up`] starts the Endpoint for whichever of `MPI_Init` and
//! `MPI_Session_init` comes first; [`init`] then only fills `MPI_COMM_WORLD`'s and
//! `MPI_COMM_SELF`'s slots. [`finalize_world`] (`MPI_Finalize`) takes the transport down
//! ([`finalize`]) only when no session is open (`crate::session` has the whole life cycle).

use std::ffi::{c_char, c_int};
use std::sync::Arc;

use nemesis::Endpoint;

use crate::abi;
use crate::coll::{self, Tuning};
use crate::comm::Comm;
use crate::error::{Fail, Res, Why, class_of, string_of};
use crate::state::{Access, Phase, State, not_running};

/// The library's version string.
const LIBRARY_VERSION: &str = concat!(
    "nemesis-mpi ",
    env!("CARGO_PKG_VERSION"),
    ": the MPI-4.1 C interface (without one-sided communication and I/O) over the nemesis Endpoint"
);

/// `MPI_Init` and `MPI_Init_thread`: starts the process's transport unless a session did
/// ([`bring_up`]), then builds `MPI_COMM_WORLD` (contexts 0 and 1) and `MPI_COMM_SELF` (2 and
/// 3). Grants the level required (or the higher one a session asked for); from
/// `MPI_THREAD_MULTIPLE` on, every call takes the big lock (module `state`).
pub fn init(acc: &mut Access, required: c_int) -> Res<()> {
    let st = acc.st();
    match st.sessions.world {
        Phase::Before => {}
        Phase::Running => return Err(Fail::new(abi::ERR_OTHER, None, Why::Arg("MPI_Init called twice"))),
        Phase::After => return Err(not_running(Phase::After)),
    }
    if st.ep.is_none() {
        bring_up(acc, required)?;
    } else {
        raise_level(acc, required);
    }
    let st = acc.st();
    let (rank, size) = st.ep.as_ref().map_or((0, 1), |ep| (ep.rank(), ep.size()));
    // This process's world among the universe's ranks (`State::world_ranks`).
    let mut world =
        Comm::new(st.world_ranks.clone(), rank, size, nemesis::WORLD, abi::ERRORS_ARE_FATAL, &st.node_of_job);
    world.name = "MPI_COMM_WORLD".into();
    let mut me = Comm::new(vec![rank], rank, size, nemesis::WORLD + 2, abi::ERRORS_ARE_FATAL, &st.node_of_job);
    me.name = "MPI_COMM_SELF".into();
    st.comms[0] = Arc::new(world);
    st.comms[1] = Arc::new(me);
    st.refresh_fast(0);
    st.refresh_fast(1);
    st.sessions.world = Phase::Running;
    st.main_thread = Some(std::thread::current().id());
    // A spawned process meets its parents.
    crate::comm::dynproc::on_init(acc)?;
    // A restarted process communicates nothing before MPIX_Checkpoint_restore.
    crate::ft::park(acc.st());
    Ok(())
}

/// Starts the process's transport, once, for whichever comes first of `MPI_Init` and
/// `MPI_Session_init`: the Endpoint, the node of every job rank (from the process manager through
/// the Endpoint's bootstrap; an allgather over the job only when it spans nodes and the process
/// manager does not tell, PMIx: never on a restarted rank),
/// empty tables with `MPI_COMM_WORLD`'s and `MPI_COMM_SELF`'s slots held dead until `MPI_Init`
/// fills them (their contexts, 0–3, are never handed out), and thread level `required`.
pub fn bring_up(acc: &mut Access, required: c_int) -> Res<()> {
    if acc.st().phase == Phase::After {
        let why = Why::Arg("the transport was finalized (MPI_Finalize): it cannot start again in this process");
        return Err(Fail::new(abi::ERR_OTHER, None, why));
    }
    if crate::ft::awaiting_restore() {
        return Err(crate::ft::unrestored());
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
    let one_node = vec![0u32; size as usize];
    // The node's name for the collectives' levels and Comm_split_type's shared colour.
    let leader = ep.node_leader();
    let all_local = ep.local_ranks().len() == size as usize;
    // Restarted from a checkpoint: nothing may be exchanged before `MPIX_Checkpoint_restore`.
    let restarted = ep.restored_mpi().is_some();
    // This process's world among the universe's ranks (`comm::dynproc`), once.
    let world_ranks: Vec<u32> = crate::comm::dynproc::world_of(size);
    let st = acc.st();
    st.ep = Some(ep);
    let node_of_job: Vec<u32> = match tuning.fake_nodes {
        Some(k) => (0..size).map(|r| (u64::from(r) * u64::from(k) / u64::from(size)) as u32).collect(),
        None if all_local => one_node,
        // Each rank names its node by its lowest rank (the Endpoint's, as Comm_split_type's
        // shared colour), as the bootstrap learnt it from the process manager: nothing is
        // exchanged, so a restarted rank, whose peers are far past their start, has it too.
        None => match st.ep.as_ref().and_then(|ep| ep.node_leaders()) {
            Some(of) => of.to_vec(),
            None if restarted => {
                acc.st().ep = None;
                let why = "a restarted rank cannot learn the ranks' nodes: the process manager does not publish them";
                return Err(Fail::new(abi::ERR_OTHER, None, Why::Arg(why)));
            }
            None => {
                // Everyone of this process's world learns everyone's, in the world's collective
                // context (the first exchange of every process). Ranks of other worlds count as
                // nodes of their own until a connection tells (`comm::dynproc`).
                let world =
                    Comm::new(world_ranks.clone(), rank, size, nemesis::WORLD, abi::ERRORS_ARE_FATAL, &one_node);
                let all = coll::allgather_bytes(acc, &world, &tuning, &leader.to_ne_bytes());
                let all = all.inspect_err(|_| acc.st().ep = None)?;
                let mut of: Vec<u32> = (0..size).collect();
                for (b, &r) in all.chunks_exact(4).zip(&world_ranks) {
                    of[r as usize] = u32::from_ne_bytes([b[0], b[1], b[2], b[3]]);
                }
                of
            }
        },
    };
    let st = acc.st();
    st.comms = vec![Arc::new(dead_comm()), Arc::new(dead_comm())];
    st.comms_retired.clear();
    st.attr_values = crate::attr::predefined_values(size);
    if let Some(last) = st.user_codes.last() {
        st.attr_values[crate::attr::LASTUSEDCODE_INDEX] = last.0;
    }
    st.comm_slots.clear();
    st.node_of_job = node_of_job;
    st.world_ranks = world_ranks;
    st.contexts = crate::comm::context::Contexts::new();
    st.tuning = tuning;
    st.deferred.clear();
    st.defer_below = match &st.ep {
        Some(ep) if defer => ep.fastbox_payload() + 1,
        _ => 0,
    };
    st.provided = abi::THREAD_SINGLE;
    st.phase = Phase::Running;
    st.refresh_all_fast();
    raise_level(acc, required);
    Ok(())
}

/// A communicator slot held for `MPI_COMM_WORLD` or `MPI_COMM_SELF` while the world model is not
/// running: no member, not live (its handle is `MPI_ERR_COMM`).
fn dead_comm() -> Comm {
    let mut c = Comm::new(Vec::new(), 0, 0, 0, abi::ERRORS_ARE_FATAL, &[]);
    (c.live, c.identity) = (false, false);
    c
}

/// Grants thread level `required` if it is above the one in force (the process has one level:
/// the highest that `MPI_Init_thread` or a session asked for), and decides the fused paths.
///
/// With fault tolerance on, `MPI_THREAD_SERIALIZED` at most (MPI lets the level provided be
/// lower than the one required): threads calling MPI at once would interleave their sends to a
/// destination in an order the scheduler picks, which a re-execution after a restart does not
/// reproduce, and HydEE needs the program to be send-deterministic. Serialized calls are ordered
/// by the program itself.
pub fn raise_level(acc: &mut Access, required: c_int) {
    let st = acc.st();
    let ft = st.ep.as_ref().is_some_and(|ep| ep.ft_enabled());
    let most = if ft { abi::THREAD_SERIALIZED } else { abi::THREAD_MULTIPLE };
    if ft && required > most && st.provided < most {
        tracing::info!("fault tolerance: MPI_THREAD_SERIALIZED granted for MPI_THREAD_MULTIPLE (send determinism)");
    }
    st.provided = st.provided.max(required.clamp(abi::THREAD_SINGLE, most));
    st.fused = st.provided != abi::THREAD_MULTIPLE && !ft && !crate::win::progress::active();
    crate::state::set_fused(st.fused && st.deferred.is_empty());
    if st.provided == abi::THREAD_MULTIPLE {
        acc.become_threaded();
    }
}

/// `MPI_Finalize`: the world model ends. With no session open, the transport goes too
/// ([`finalize`]); otherwise `MPI_COMM_WORLD` and `MPI_COMM_SELF` die here (`MPI_COMM_SELF`'s
/// attributes deleted first, MPI-4.1 §11.2.4) and the last `MPI_Session_finalize` takes the
/// transport down.
pub fn finalize_world(acc: &mut Access) -> Res<()> {
    let st = acc.st();
    if st.sessions.world != Phase::Running {
        return Err(not_running(st.sessions.world));
    }
    if st.sessions.table.is_empty() {
        // The world model ends after MPI_COMM_SELF's delete callbacks (`MPI_Finalized` false
        // in them).
        let r = finalize(acc);
        acc.st().sessions.world = Phase::After;
        return r;
    }
    crate::attr::delete_all(acc, 1)?;
    let st = acc.st();
    for ci in 0..2 {
        st.comms[ci] = Arc::new(dead_comm());
        st.refresh_fast(ci);
    }
    st.sessions.world = Phase::After;
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
    if crate::win::progress::active() {
        // Windows left unfreed: their progress thread ends before the Endpoint does.
        crate::win::progress::stop(acc);
    }
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
    match st.ep.as_mut().or(st.parked.as_mut()) {
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
    unsafe { put(flag, c_int::from(st.sessions.world != Phase::Before)) }
}

/// `MPI_Finalized`.
///
/// # Safety
/// `flag` writable.
pub unsafe fn finalized(st: &State, flag: *mut c_int) -> Res<()> {
    // SAFETY: the caller's contract.
    unsafe { put(flag, c_int::from(st.sessions.world == Phase::After)) }
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
        return Err(not_running(st.sessions.world));
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

/// `MPI_Abi_get_version` (MPI-5.0, which MPI-4.1 programs probe): nemesis has MPICH's ABI, not
/// the standard ABI, so both numbers are -1 (MPI-5.0 §20.2).
///
/// # Safety
/// Both pointers writable.
pub unsafe fn abi_get_version(major: *mut c_int, minor: *mut c_int) -> Res<()> {
    // SAFETY: the caller's contract.
    unsafe {
        put(major, -1)?;
        put(minor, -1)
    }
}

/// `MPI_Abi_get_info` (MPI-5.0): the sizes of `MPI_Aint`, `MPI_Count` and `MPI_Offset`.
///
/// # Safety
/// `info` null or writable.
pub unsafe fn abi_get_info(acc: &mut Access, info: *mut abi::Info) -> Res<()> {
    let sizes = [
        ("mpi_aint_size", std::mem::size_of::<abi::Aint>()),
        ("mpi_count_size", std::mem::size_of::<abi::Count>()),
        ("mpi_offset_size", std::mem::size_of::<abi::Offset>()),
    ];
    let obj = sizes.iter().map(|(k, n)| (k.to_string(), n.to_string())).collect();
    // SAFETY: the caller's contract.
    unsafe { crate::info::hand_out_info(acc.st(), obj, info) }
}

/// The CPUs this process may run on (`sched_getaffinity`), as a list of ranges ("0-3,6").
fn allowed_cpus() -> Option<(usize, String)> {
    // SAFETY: a zeroed `cpu_set_t` is a valid empty set, which the call fills in.
    let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    // SAFETY: `set` is writable for its size; pid 0 is this thread.
    if unsafe { libc::sched_getaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &mut set) } != 0 {
        return None;
    }
    let max = 8 * std::mem::size_of::<libc::cpu_set_t>();
    // SAFETY: `i` is below the set's capacity.
    let cpus: Vec<usize> = (0..max).filter(|&i| unsafe { libc::CPU_ISSET(i, &set) }).collect();
    let mut ranges: Vec<String> = Vec::new();
    let mut k = 0;
    while k < cpus.len() {
        let first = cpus[k];
        while k + 1 < cpus.len() && cpus[k + 1] == cpus[k] + 1 {
            k += 1;
        }
        ranges.push(if cpus[k] == first { first.to_string() } else { format!("{first}-{}", cpus[k]) });
        k += 1;
    }
    Some((cpus.len(), ranges.join(",")))
}

/// A one-line file of `/sys`, trimmed.
fn sys_line(path: &str) -> Option<String> {
    std::fs::read_to_string(path).ok().map(|s| s.trim().to_string()).filter(|s| !s.is_empty())
}

/// `MPI_Get_hw_resource_info` (MPI-4.1): what the process runs on, from `/sys` and
/// `sched_getaffinity` (no hwloc): `mpi_hw_resource_type` names the resource type
/// `MPI_Comm_split_type` understands (`mpi_shared_memory`: a node); the `nemesis_*` keys are the
/// CPUs this process may use (`nemesis_cpus`, a list of ranges, and their count
/// `nemesis_num_cpus`), the node's online CPUs (`nemesis_online_cpus`) and NUMA nodes
/// (`nemesis_numa_nodes`), each present when the system tells it.
///
/// # Safety
/// `info` null or writable.
pub unsafe fn get_hw_resource_info(acc: &mut Access, info: *mut abi::Info) -> Res<()> {
    let mut obj = vec![("mpi_hw_resource_type".to_string(), "mpi_shared_memory".to_string())];
    if let Some((n, list)) = allowed_cpus() {
        obj.push(("nemesis_cpus".into(), list));
        obj.push(("nemesis_num_cpus".into(), n.to_string()));
    }
    if let Some(v) = sys_line("/sys/devices/system/cpu/online") {
        obj.push(("nemesis_online_cpus".into(), v));
    }
    if let Some(v) = sys_line("/sys/devices/system/node/online") {
        obj.push(("nemesis_numa_nodes".into(), v));
    }
    // SAFETY: the caller's contract.
    unsafe { crate::info::hand_out_info(acc.st(), obj, info) }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn this_process_may_run_somewhere() {
        let (n, list) = allowed_cpus().expect("sched_getaffinity");
        assert!(n >= 1, "{list}");
        assert!(!list.is_empty() && list.chars().all(|c| c.is_ascii_digit() || c == ',' || c == '-'), "{list}");
    }
}
