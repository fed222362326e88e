//! `MPI_Comm_spawn`, `MPI_Comm_spawn_multiple` and the name service (`MPI_Publish_name`,
//! `MPI_Unpublish_name`, `MPI_Lookup_name`), through the process manager
//! (`nemesis::pmi::dynamic`).
//!
//! A spawn: the root opens a port and asks the process manager to start the commands with the
//! port pre-put as `PARENT_ROOT_PORT_NAME`; the root's answer (error codes, or why nothing
//! started) is broadcast to the parents; on success the parents accept on the port while the
//! children, in `MPI_Init`, connect to it (`super::on_init`). Only `nemesis-run` can start
//! processes that share this job's transport: under any other process manager, or none, the
//! spawn is `MPI_ERR_SPAWN` with the reason, through the communicator's error handler, and
//! `array_of_errcodes` is filled with it.

use std::ffi::{c_char, c_int};

use nemesis::pmi::SpawnCommand;

use super::{accept_on, c_string, forget_port, open_port_name};
use crate::abi;
use crate::coll;
use crate::comm::{null_out, on, shared};
use crate::error::{Fail, Res, Why};
use crate::state::Access;

/// The key under which the children find their parents' port (MPICH's name).
pub const PARENT_PORT_KEY: &str = "PARENT_ROOT_PORT_NAME";
/// Longest command or argument accepted.
const ARG_MAX: usize = 4096;
/// Most arguments of one command.
const ARGS_MAX: usize = 256;

/// The info keys of `info` (`MPI_INFO_NULL`: none).
fn info_pairs(acc: &mut Access, info: abi::Info) -> Res<Vec<(String, String)>> {
    if info == abi::INFO_NULL {
        return Ok(Vec::new());
    }
    let keys = ["host", "wdir", "path", "soft", "arch", "file"];
    match acc.st().infos.get(info) {
        Some(obj) => Ok(obj.iter().filter(|(k, _)| keys.contains(&k.as_str())).cloned().collect()),
        None => Err(Fail::new(abi::ERR_INFO, None, Why::Other(format!("{info:#x} is not a valid info object")))),
    }
}

/// One command as the root passed it.
///
/// # Safety
/// `command` NUL-terminated; `argv` null or a null-terminated array of NUL-terminated strings.
unsafe fn command_of(
    acc: &mut Access,
    command: *const c_char,
    argv: *const *const c_char,
    maxprocs: c_int,
    info: abi::Info,
) -> Res<SpawnCommand> {
    // SAFETY: the caller's contract.
    let program = unsafe { c_string(command, ARG_MAX, abi::ERR_SPAWN, "a null or long command") }?;
    if program.trim().is_empty() {
        return Err(Fail::new(abi::ERR_SPAWN, None, Why::Arg("an empty command")));
    }
    if maxprocs <= 0 {
        return Err(Fail::new(abi::ERR_ARG, None, Why::Arg("maxprocs must be positive")));
    }
    let mut args = Vec::new();
    if !argv.is_null() {
        loop {
            // SAFETY: a null-terminated array (MPI's contract); we stop at the null.
            let a = unsafe { *argv.add(args.len()) };
            if a.is_null() {
                break;
            }
            if args.len() >= ARGS_MAX {
                return Err(Fail::new(abi::ERR_ARG, None, Why::Arg("more than 256 arguments")));
            }
            // SAFETY: a NUL-terminated string (MPI's contract).
            args.push(unsafe { c_string(a, ARG_MAX, abi::ERR_ARG, "a long argument") }?);
        }
    }
    let info = info_pairs(acc, info)?;
    Ok(SpawnCommand { program, args, maxprocs: maxprocs as u32, info })
}

/// The root asks the process manager: the error code of every process, or why none started
/// (and the class to report it with).
fn ask(acc: &mut Access, cmds: &[SpawnCommand], port: &str) -> Result<Vec<i32>, (c_int, String)> {
    let launcher = nemesis::pmi::launcher();
    let ep = acc.ep().map_err(|f| (f.code, "MPI is not running".to_owned()))?;
    let Some(pm) = ep.process_manager() else {
        return Err((
            abi::ERR_SPAWN,
            "this process is a singleton (no process manager to start processes): run it under nemesis-run \
             --universe-size N"
                .into(),
        ));
    };
    if launcher != "nemesis-run" {
        return Err((
            abi::ERR_SPAWN,
            format!(
                "the process manager ({}) cannot start processes that share this job's transport: \
                 MPI_Comm_spawn needs nemesis-run --universe-size N",
                pm.name()
            ),
        ));
    }
    let preput = [(PARENT_PORT_KEY.to_owned(), port.to_owned())];
    match pm.spawn(cmds, &preput) {
        Ok(Ok(codes)) => Ok(codes),
        Ok(Err(why)) => Err((abi::ERR_SPAWN, format!("{}: {why}", pm.name()))),
        Err(e) => Err((abi::ERR_SPAWN, e.to_string())),
    }
}

/// Writes `code` (or the codes) into `errcodes` (`MPI_ERRCODES_IGNORE`: nothing).
fn fill(errcodes: *mut c_int, codes: &[c_int]) {
    if errcodes.is_null() {
        return;
    }
    for (i, &c) in codes.iter().enumerate() {
        // SAFETY: MPI's contract: one code per process asked for at the root (the count the
        // root's answer carries).
        unsafe { *errcodes.add(i) = c };
    }
}

/// The spawn, collective over `comm`: `cmds` is significant at `root` only (where a bad
/// argument is `Err`, failing the whole group).
fn spawn_cmds(
    acc: &mut Access,
    cmds: Res<Vec<SpawnCommand>>,
    root: c_int,
    comm: abi::Comm,
    intercomm: *mut abi::Comm,
    errcodes: *mut c_int,
) -> Res<()> {
    let (ci, lc, tu) = shared(acc, comm)?;
    if intercomm.is_null() {
        return Err(null_out(Some(ci)));
    }
    if lc.local.is_some() {
        return Err(crate::p2p::not_intra(ci));
    }
    if root < 0 || root as u32 >= lc.size {
        return Err(Fail::new(abi::ERR_ROOT, Some(ci), Why::Root { root, size: lc.size }));
    }
    let at_root = lc.rank as c_int == root;
    // The root's news: [class, processes asked for, codes... | reason bytes].
    let mut news = Vec::new();
    let mut port = String::new();
    let mut root_fail = None;
    if at_root {
        let asked: u32 = cmds.as_ref().map_or(0, |c| c.iter().map(|c| c.maxprocs).sum());
        let answer = match cmds {
            Err(f) => {
                root_fail = Some(f);
                Err((abi::ERR_ARG, String::new()))
            }
            Ok(cmds) => match open_port_name(acc) {
                Ok(p) => {
                    port = p;
                    ask(acc, &cmds, &port)
                }
                Err(f) => Err((f.code, "no port for the children".into())),
            },
        };
        match answer {
            Ok(codes) => {
                news.extend((abi::SUCCESS as u32).to_ne_bytes());
                news.extend((codes.len() as u32).to_ne_bytes());
                news.extend(codes.iter().flat_map(|c| c.to_ne_bytes()));
            }
            Err((code, why)) => {
                forget_port(&port);
                let code = root_fail.as_ref().map_or(code, |f| f.code);
                news.extend((code as u32).to_ne_bytes());
                news.extend(asked.to_ne_bytes());
                news.extend(why.as_bytes());
            }
        }
    }
    coll::bcast_bytes(acc, &lc, &tu, root as usize, &mut news).map_err(on(ci))?;
    let word = |i: usize| news.get(4 * i..4 * i + 4).map_or(0, |b| u32::from_ne_bytes([b[0], b[1], b[2], b[3]]));
    let (code, n) = (word(0) as c_int, word(1) as usize);
    if code != abi::SUCCESS {
        fill(errcodes, &vec![abi::ERR_SPAWN; n]);
        if let Some(mut f) = root_fail {
            f.comm = Some(ci);
            return Err(f);
        }
        let why = String::from_utf8_lossy(news.get(8..).unwrap_or(&[])).into_owned();
        let why = if why.is_empty() { "the root's arguments are invalid".to_owned() } else { why };
        return Err(Fail::new(code, Some(ci), Why::Other(format!("the spawn failed at the root: {why}"))));
    }
    let codes: Vec<c_int> = (0..n).map(|i| word(2 + i) as c_int).collect();
    let h = accept_on(acc, if at_root { &port } else { "nemesis-port:0:1" }, root, comm);
    if at_root {
        forget_port(&port);
    }
    let h = h?;
    // Processes a `soft` spawn did not start have MPI_ERR_SPAWN; the call succeeds with those
    // that did (MPI-4.1 §11.3.4).
    let codes: Vec<c_int> = codes.into_iter().map(|c| if c == 0 { abi::SUCCESS } else { abi::ERR_SPAWN }).collect();
    fill(errcodes, &codes);
    // SAFETY: checked non-null; MPI's contract.
    unsafe { *intercomm = h };
    Ok(())
}

/// `MPI_Comm_spawn`.
///
/// # Safety
/// At `root`: `command` NUL-terminated, `argv` `MPI_ARGV_NULL` or a null-terminated array of
/// strings. `intercomm` writable; `errcodes` `MPI_ERRCODES_IGNORE` or writable for the root's
/// `maxprocs` codes.
#[allow(clippy::too_many_arguments)]
pub unsafe fn spawn(
    acc: &mut Access,
    command: *const c_char,
    argv: *const *const c_char,
    maxprocs: c_int,
    info: abi::Info,
    root: c_int,
    comm: abi::Comm,
    intercomm: *mut abi::Comm,
    errcodes: *mut c_int,
) -> Res<()> {
    // One command of `MPI_Comm_spawn_multiple`.
    // SAFETY: arrays of one entry each, living across the call; the rest is the caller's contract.
    unsafe { spawn_multiple(acc, 1, &command, &argv, &maxprocs, &info, root, comm, intercomm, errcodes) }
}

/// `MPI_Comm_spawn_multiple`.
///
/// # Safety
/// At `root`: `commands`, `maxprocs` and `infos` hold `count` entries, `argvs`
/// `MPI_ARGVS_NULL` or `count` argument arrays (each `MPI_ARGV_NULL` or null-terminated).
/// `intercomm` and `errcodes` as for [`spawn`].
#[allow(clippy::too_many_arguments)]
pub unsafe fn spawn_multiple(
    acc: &mut Access,
    count: c_int,
    commands: *const *const c_char,
    argvs: *const *const *const c_char,
    maxprocs: *const c_int,
    infos: *const abi::Info,
    root: c_int,
    comm: abi::Comm,
    intercomm: *mut abi::Comm,
    errcodes: *mut c_int,
) -> Res<()> {
    let (_, lc, _) = shared(acc, comm)?;
    let cmds = if lc.rank as c_int == root {
        (|| {
            if count <= 0 {
                return Err(Fail::new(abi::ERR_ARG, None, Why::Arg("count must be positive")));
            }
            if commands.is_null() || maxprocs.is_null() || infos.is_null() {
                return Err(Fail::new(abi::ERR_ARG, None, Why::Arg("a null array of commands, maxprocs or infos")));
            }
            let mut out = Vec::with_capacity(count as usize);
            for i in 0..count as usize {
                // SAFETY: `count` entries each (MPI's contract at the root).
                let (c, m, inf) = unsafe { (*commands.add(i), *maxprocs.add(i), *infos.add(i)) };
                // SAFETY: as above; `argvs` null is MPI_ARGVS_NULL.
                let argv = if argvs.is_null() { std::ptr::null() } else { unsafe { *argvs.add(i) } };
                // SAFETY: the caller's contract.
                out.push(unsafe { command_of(acc, c, argv, m, inf) }?);
            }
            Ok(out)
        })()
    } else {
        Ok(Vec::new())
    };
    spawn_cmds(acc, cmds, root, comm, intercomm, errcodes)
}

/// The process manager's name service: `op` on `service`.
fn name_service(acc: &mut Access, op: &'static str, service: &str, port: Option<&str>) -> Res<Option<String>> {
    let class = if op == "lookup_name" { abi::ERR_NAME } else { abi::ERR_SERVICE };
    let ep = acc.ep()?;
    let Some(pm) = ep.process_manager() else {
        return Err(Fail::new(class, None, Why::Arg("a singleton has no name service (run under nemesis-run)")));
    };
    match pm.name_service(op, service, port) {
        Ok(Ok(p)) => Ok(p),
        Ok(Err(why)) => Err(Fail::new(class, None, Why::Other(format!("{op} {service:?}: {why}")))),
        Err(e) => Err(Fail::new(class, None, Why::Other(format!("{op} {service:?}: {e}")))),
    }
}

/// A service name argument.
///
/// # Safety
/// `s` null or NUL-terminated.
unsafe fn service_of(s: *const c_char, class: c_int) -> Res<String> {
    // SAFETY: the caller's contract.
    let v = unsafe { c_string(s, 64, class, "a null or long service name (at most 63 bytes)") }?;
    if v.is_empty() || v.contains(|c: char| c.is_whitespace() || c == ';' || c == '=') {
        return Err(Fail::new(class, None, Why::Arg("a service name must be non-empty, without spaces, ';' or '='")));
    }
    Ok(v)
}

/// `MPI_Publish_name` (`op` `publish_name`) and `MPI_Unpublish_name` (`unpublish_name`; the
/// port is not compared).
///
/// # Safety
/// `service_name` and `port_name` NUL-terminated.
pub unsafe fn publish(
    acc: &mut Access,
    op: &'static str,
    service_name: *const c_char,
    info: abi::Info,
    port_name: *const c_char,
) -> Res<()> {
    super::check_info(acc, info)?;
    // SAFETY: the caller's contract.
    let (service, port) = unsafe {
        (
            service_of(service_name, abi::ERR_SERVICE)?,
            c_string(port_name, abi::MAX_PORT_NAME, abi::ERR_PORT, "a null or long port name")?,
        )
    };
    let port = (op == "publish_name").then_some(port.as_str());
    name_service(acc, op, &service, port).map(drop)
}

/// `MPI_Lookup_name`: the port published under `service_name` into `port_name`
/// (`MPI_MAX_PORT_NAME` bytes).
///
/// # Safety
/// `service_name` NUL-terminated; `port_name` null or writable for `MPI_MAX_PORT_NAME` bytes.
pub unsafe fn lookup_name(
    acc: &mut Access,
    service_name: *const c_char,
    info: abi::Info,
    port_name: *mut c_char,
) -> Res<()> {
    super::check_info(acc, info)?;
    // SAFETY: the caller's contract.
    let service = unsafe { service_of(service_name, abi::ERR_NAME) }?;
    if port_name.is_null() {
        return Err(null_out(None));
    }
    let port = name_service(acc, "lookup_name", &service, None)?
        .ok_or_else(|| Fail::new(abi::ERR_NAME, None, Why::Arg("the name service answered no port")))?;
    // SAFETY: MPI's contract: MPI_MAX_PORT_NAME bytes.
    unsafe { crate::env::put_str(&port, port_name, abi::MAX_PORT_NAME, std::ptr::null_mut()) }
}
