//! Dynamic processes (MPI-4.1 §11): ports, `MPI_Comm_accept`/`connect`/`join`/`disconnect`,
//! `MPI_Comm_get_parent`, and (in [`spawn`]) `MPI_Comm_spawn(_multiple)` and the name service.
//!
//! **One universe.** Under `nemesis-run --universe-size N` every process, spawned or not, is a
//! rank of one Endpoint of `N` ranks (`PMI_SIZE`); a process's `MPI_COMM_WORLD` is its group
//! (`NEMESIS_WORLD`), and spawned groups take the slots beyond the first job, on node identities
//! of their own, reached through the netmod. So an intercommunicator between two groups is the
//! same object `MPI_Intercomm_create` makes ([`super::inter`]): point-to-point and collectives
//! on it need nothing new. Processes of two different universes (two `nemesis-run` jobs) cannot
//! connect: their ranks share no transport.
//!
//! **Ports.** A port name is `nemesis-port:<universe rank of the opener>:<number>`; the number,
//! unique in the opener, is the tag the two roots meet with in [`CONTROL`], a context no
//! communicator is ever given. The connecting root sends its group (universe ranks, node ids)
//! and its group's receive context, the accepting root answers with its own, and each root
//! broadcasts the outcome to its group ([`meet`]): the pattern of `MPI_Intercomm_create`, whose
//! peer communicator here is the universe.
//!
//! What holds: a failure at a root reaches every member of its group with its class (no member
//! waits for a root that gave up); nothing but the two roots' messages travels in [`CONTROL`].

pub mod spawn;

use std::collections::BTreeSet;
use std::ffi::{CStr, c_char, c_int};
use std::sync::Mutex;

use super::inter::{bytes_of, make, two_contexts, words_of};
use super::{Comm, context, null_out, on, shared};
use crate::abi;
use crate::coll::{self, Tuning};
use crate::error::{Fail, Res, Why};
use crate::state::Access;

/// The context the roots of a connection meet in: beyond every pair [`context`] hands out.
pub const CONTROL: u32 = nemesis::WORLD + 4 + 2 * context::PAIRS as u32;
/// The tag of `MPI_Comm_join`'s meeting (port numbers stay below it).
const JOIN_TAG: i32 = 0x7fff_0000;
/// Where `MPI_APPNUM`'s value is in `State::attr_values` (`crate::attr::predefined_values`).
const APPNUM_INDEX: usize = 6;
/// What every port name starts with.
const PORT_PREFIX: &str = "nemesis-port:";

/// This process's dynamic-process state (behind the library's own lock when threads share it;
/// the mutex only makes the static safe).
struct Dyn {
    /// Ports open here (`MPI_Open_port`, not closed yet).
    ports: BTreeSet<String>,
    /// The number of the next port.
    next: i32,
    /// `MPI_Comm_get_parent`'s communicator: its handle and its context. The communicator's
    /// object is replaced whenever one of its properties changes (an error handler, a name, an
    /// attribute), so it is known by its context id, unique among live communicators; a free
    /// or a disconnect forgets it ([`forget`]).
    parent: Option<(abi::Comm, u32)>,
}

static DYN: Mutex<Dyn> = Mutex::new(Dyn { ports: BTreeSet::new(), next: 1, parent: None });

fn dyn_state() -> std::sync::MutexGuard<'static, Dyn> {
    DYN.lock().unwrap_or_else(|p| p.into_inner())
}

/// A port name: the opener's universe rank and the port's number.
fn parse_port(name: &str) -> Option<(u32, i32)> {
    let (rank, n) = name.trim().strip_prefix(PORT_PREFIX)?.split_once(':')?;
    let n = n.parse::<i32>().ok().filter(|&n| n > 0 && n < JOIN_TAG)?;
    Some((rank.parse().ok()?, n))
}

fn bad_port(ci: Option<usize>, why: &'static str) -> Fail {
    Fail::new(abi::ERR_PORT, ci, Why::Arg(why))
}

/// A C string argument of at most `max` bytes.
///
/// # Safety
/// `s` null or NUL-terminated.
pub(crate) unsafe fn c_string(s: *const c_char, max: usize, class: c_int, what: &'static str) -> Res<String> {
    if s.is_null() {
        return Err(Fail::new(class, None, Why::Arg(what)));
    }
    // SAFETY: the caller's contract.
    let v = unsafe { CStr::from_ptr(s) }.to_string_lossy().into_owned();
    if v.len() >= max {
        return Err(Fail::new(class, None, Why::Arg(what)));
    }
    Ok(v)
}

/// `info` is `MPI_INFO_NULL`, `MPI_INFO_ENV` or a live info object (its keys are ignored):
/// else `MPI_ERR_INFO`.
pub(crate) fn check_info(acc: &mut Access, info: abi::Info) -> Res<()> {
    if info == abi::INFO_NULL || info == abi::INFO_ENV || acc.st().infos.get(info).is_some() {
        return Ok(());
    }
    Err(Fail::new(abi::ERR_INFO, None, Why::Other(format!("{info:#x} is not a valid info object"))))
}

/// Opens a port here: its name.
pub(crate) fn open_port_name(acc: &mut Access) -> Res<String> {
    let me = acc.ep()?.rank();
    let mut d = dyn_state();
    if d.next >= JOIN_TAG {
        return Err(Fail::new(abi::ERR_PORT, None, Why::Arg("no more ports can be opened in this process")));
    }
    let name = format!("{PORT_PREFIX}{me}:{}", d.next);
    d.next += 1;
    d.ports.insert(name.clone());
    Ok(name)
}

/// `MPI_Open_port`: writes the new port's name (at most `MPI_MAX_PORT_NAME` bytes).
///
/// # Safety
/// `port_name` null or writable for `MPI_MAX_PORT_NAME` bytes.
pub unsafe fn open_port(acc: &mut Access, info: abi::Info, port_name: *mut c_char) -> Res<()> {
    if port_name.is_null() {
        return Err(null_out(None));
    }
    check_info(acc, info)?;
    let name = open_port_name(acc)?;
    // SAFETY: MPI's contract: MPI_MAX_PORT_NAME bytes.
    unsafe { crate::env::put_str(&name, port_name, abi::MAX_PORT_NAME, std::ptr::null_mut()) }
}

/// `MPI_Close_port`.
///
/// # Safety
/// `port_name` null or NUL-terminated.
pub unsafe fn close_port(acc: &mut Access, port_name: *const c_char) -> Res<()> {
    acc.ep()?;
    // SAFETY: the caller's contract.
    let name = unsafe { c_string(port_name, abi::MAX_PORT_NAME, abi::ERR_PORT, "null or long port name") }?;
    if !dyn_state().ports.remove(name.trim()) {
        return Err(bad_port(None, "no port of that name is open in this process"));
    }
    Ok(())
}

/// Which end of a meeting this group's root is.
#[derive(Clone, Copy, Debug)]
enum Role {
    /// Waits for a connection on port number `tag` (from `from`, if known).
    Accept { tag: i32, from: Option<u32> },
    /// Connects to the root `to` on port number `tag`.
    Connect { to: u32, tag: i32 },
}

/// What one group tells the other: its receive context, universe ranks and node ids.
fn pack(ctx: u32, lc: &Comm, node_of: &[u32]) -> Vec<u8> {
    let n = lc.world.len() as u32;
    let mut w = vec![ctx, n];
    w.extend_from_slice(&lc.world);
    w.extend(lc.world.iter().map(|&r| node_of.get(r as usize).copied().unwrap_or(r)));
    bytes_of(&w)
}

/// The root's side of a meeting: the other group's words (`ctx, n, ranks.., nodes..`).
fn root_meets(acc: &mut Access, lc: &Comm, role: Role, ctx: u32) -> Res<Vec<u32>> {
    let mine = pack(ctx, lc, &acc.st().node_of_job);
    let fail = |e| Fail::endpoint(0, e);
    let theirs = match role {
        Role::Connect { to, tag } => {
            acc.ep()?.learn_peer(to).map_err(fail)?;
            super::inter::swap(acc, to, tag, CONTROL, CONTROL, &mine)?
        }
        Role::Accept { tag, from } => {
            let src = from.map_or(nemesis::ANY_SOURCE, |f| f as i32);
            if let Some(f) = from {
                acc.ep()?.learn_peer(f).map_err(fail)?;
            }
            let s = acc.ep_probe(src, tag, CONTROL)?.map_err(fail)?;
            let mut buf = vec![0u8; s.len];
            acc.ep_recv(&mut buf, s.source as i32, tag, CONTROL)?.map_err(fail)?;
            acc.ep()?.learn_peer(s.source).map_err(fail)?;
            acc.ep_send(&mine, s.source, tag, CONTROL, false)?.map_err(fail)?;
            buf
        }
    };
    let w = words_of(&theirs);
    let n = w.get(1).map_or(0, |&n| n as usize);
    if n == 0 || w.len() != 2 + 2 * n {
        return Err(Fail::new(abi::ERR_INTERN, None, Why::Arg("a malformed group from the other root")));
    }
    if w[2..2 + n].iter().any(|r| lc.world.contains(r)) {
        return Err(Fail::new(abi::ERR_COMM, None, Why::Arg("the two groups of a connection overlap")));
    }
    Ok(w)
}

/// Makes the intercommunicator between `comm`'s group (collective over it; `root` meets the
/// other group's root as `role` says, `role` significant at `root` only): its handle. `role`
/// is `Err` at a root that could not even start (a bad port): its group fails with it.
fn meet(acc: &mut Access, comm: abi::Comm, root: c_int, role: Res<Role>) -> Res<abi::Comm> {
    let (ci, lc, tu) = shared(acc, comm)?;
    if lc.local.is_some() {
        return Err(crate::p2p::not_intra(ci));
    }
    if root < 0 || root as u32 >= lc.size {
        return Err(Fail::new(abi::ERR_ROOT, Some(ci), Why::Root { root, size: lc.size }));
    }
    let (ctx, lctx) = two_contexts(acc, ci, &lc, &tu)?;
    let mut news = Vec::new();
    let mut root_fail = None;
    if lc.rank == root as u32 {
        let got = role.and_then(|r| root_meets(acc, &lc, r, ctx));
        let words = match got {
            Ok(mut w) => {
                w.insert(0, abi::SUCCESS as u32);
                w
            }
            Err(f) => {
                let code = f.code as u32;
                root_fail = Some(f);
                vec![code]
            }
        };
        news = bytes_of(&words);
    }
    let sent = coll::bcast_bytes(acc, &lc, &tu, root as usize, &mut news).map_err(on(ci));
    let words = words_of(&news);
    let st = acc.st();
    let give_back = |st: &mut crate::state::State| {
        st.contexts.release(ctx);
        st.contexts.release(lctx);
    };
    if let Err(e) = sent {
        give_back(st);
        return Err(e);
    }
    let code = words.first().map_or(abi::ERR_INTERN, |&w| w as c_int);
    if code != abi::SUCCESS {
        give_back(st);
        return Err(root_fail
            .map(|mut f| {
                f.comm = Some(ci);
                f
            })
            .unwrap_or_else(|| Fail::new(code, Some(ci), Why::Arg("the connection failed at the root"))));
    }
    let (rctx, n) = (words[1], words[2] as usize);
    let remote = words[3..3 + n].to_vec();
    let nodes = &words[3 + n..3 + 2 * n];
    for (&r, &node) in remote.iter().zip(nodes) {
        if let Some(slot) = st.node_of_job.get_mut(r as usize) {
            *slot = node;
        }
    }
    let h = make(st, lc.world.to_vec(), remote.clone(), (ctx, lctx, rctx), lc.errh);
    // Every member reaches every remote member: their cards, for those started after us.
    let fail = |e| Fail::endpoint(ci, e);
    for r in remote {
        acc.ep()?.learn_peer(r).map_err(fail)?;
    }
    Ok(h)
}

/// `MPI_Comm_accept` (`accepting`) or `MPI_Comm_connect`: the port name is read at `root` only.
///
/// # Safety
/// `port_name` null or NUL-terminated (at `root`); `newcomm` null or writable.
pub unsafe fn accept_or_connect(
    acc: &mut Access,
    accepting: bool,
    port_name: *const c_char,
    info: abi::Info,
    root: c_int,
    comm: abi::Comm,
    newcomm: *mut abi::Comm,
) -> Res<()> {
    if newcomm.is_null() {
        return Err(null_out(None));
    }
    let (ci, lc, _) = shared(acc, comm)?;
    let size = acc.ep()?.size();
    check_info(acc, info)?;
    let role = if lc.rank as c_int != root {
        Ok(Role::Accept { tag: 0, from: None })
    } else {
        // SAFETY: the caller's contract.
        let name = unsafe { c_string(port_name, abi::MAX_PORT_NAME, abi::ERR_PORT, "null or long port name") };
        name.and_then(|n| {
            if !accepting {
                return connect_role(&n, size, ci);
            }
            if !dyn_state().ports.contains(n.trim()) {
                return Err(bad_port(Some(ci), "MPI_Comm_accept on a port not open in this process"));
            }
            let (_, tag) = parse_port(&n).ok_or_else(|| bad_port(Some(ci), "not a nemesis port name"))?;
            Ok(Role::Accept { tag, from: None })
        })
    };
    let h = meet(acc, comm, root, role)?;
    // SAFETY: checked non-null; MPI's contract.
    unsafe { *newcomm = h };
    Ok(())
}

fn connect_role(name: &str, size: u32, ci: usize) -> Res<Role> {
    let (to, tag) = parse_port(name).ok_or_else(|| bad_port(Some(ci), "not a nemesis port name"))?;
    if to >= size {
        return Err(bad_port(Some(ci), "the port's process is not in this universe"));
    }
    Ok(Role::Connect { to, tag })
}

/// Connects `comm`'s group to the group whose root opened `port` (the children's side of a
/// spawn): the intercommunicator.
pub(crate) fn connect_to(acc: &mut Access, port: &str, comm: abi::Comm) -> Res<abi::Comm> {
    let size = acc.ep()?.size();
    meet(acc, comm, 0, connect_role(port, size, 0))
}

/// Accepts on `port` over `comm` with `root` (the parents' side of a spawn; the port is open at
/// `root`).
pub(crate) fn accept_on(acc: &mut Access, port: &str, root: c_int, comm: abi::Comm) -> Res<abi::Comm> {
    let role = parse_port(port)
        .map(|(_, tag)| Role::Accept { tag, from: None })
        .ok_or_else(|| bad_port(None, "not a nemesis port name"));
    meet(acc, comm, root, role)
}

/// Forgets a port opened for a spawn.
pub(crate) fn forget_port(name: &str) {
    dyn_state().ports.remove(name);
}

/// `MPI_Comm_join`: the two processes at the ends of the connected socket `fd` swap their
/// universe ranks over it; the lower one accepts.
///
/// # Safety
/// `intercomm` null or writable.
pub unsafe fn join(acc: &mut Access, fd: c_int, intercomm: *mut abi::Comm) -> Res<()> {
    if intercomm.is_null() {
        return Err(null_out(None));
    }
    let (me, job) = {
        let ep = acc.ep()?;
        let job = ep.process_manager().map_or_else(String::new, |p| p.job_id().to_owned());
        (ep.rank(), job)
    };
    if fd < 0 {
        return Err(Fail::new(abi::ERR_ARG, None, Why::Arg("MPI_Comm_join: a negative socket")));
    }
    let (peer, peer_job) = swap_over_fd(acc, fd, me, &job)?;
    if peer_job != job {
        return Err(Fail::new(
            abi::ERR_OTHER,
            None,
            Why::Other(format!(
                "MPI_Comm_join: the other process belongs to another job ({peer_job:?}, this one is {job:?}): \
                 nemesis connects processes of one nemesis-run universe only"
            )),
        ));
    }
    if peer == me || peer >= acc.ep()?.size() {
        return Err(Fail::new(abi::ERR_ARG, None, Why::Arg("MPI_Comm_join: the socket does not lead to another rank")));
    }
    let role = if me < peer {
        Role::Accept { tag: JOIN_TAG, from: Some(peer) }
    } else {
        Role::Connect { to: peer, tag: JOIN_TAG }
    };
    let h = meet(acc, abi::COMM_SELF, 0, Ok(role))?;
    // SAFETY: checked non-null; MPI's contract.
    unsafe { *intercomm = h };
    Ok(())
}

/// Writes `nemesis-join <rank> <job>\n` to `fd` and reads the other side's line, keeping the
/// Endpoint progressing while it waits (the other side may wait for a message of ours first).
fn swap_over_fd(acc: &mut Access, fd: c_int, me: u32, job: &str) -> Res<(u32, String)> {
    use std::io::{Read, Write};
    use std::os::fd::{AsRawFd, BorrowedFd};
    let io = |e: std::io::Error| Fail::new(abi::ERR_OTHER, None, Why::Other(format!("MPI_Comm_join: the socket: {e}")));
    // SAFETY: the caller owns `fd` and keeps it open during the call; we only borrow it.
    let b = unsafe { BorrowedFd::borrow_raw(fd) };
    let mut f = std::fs::File::from(b.try_clone_to_owned().map_err(io)?);
    f.write_all(format!("nemesis-join {me} {job}\n").as_bytes()).map_err(io)?;
    let mut line = Vec::new();
    let mut byte = [0u8; 1];
    while line.len() < 1024 {
        let mut pfd = libc::pollfd { fd: f.as_raw_fd(), events: libc::POLLIN, revents: 0 };
        // SAFETY: one valid pollfd, for the duration of the call.
        let ready = unsafe { libc::poll(&mut pfd, 1, 1) };
        if ready < 0 {
            let e = std::io::Error::last_os_error();
            if e.kind() == std::io::ErrorKind::Interrupted {
                continue;
            }
            return Err(io(e));
        }
        if ready == 0 {
            acc.ep()?.progress().map_err(|e| Fail::endpoint(0, e))?;
            continue;
        }
        match f.read(&mut byte).map_err(io)? {
            0 => break,
            _ if byte[0] == b'\n' => break,
            _ => line.push(byte[0]),
        }
    }
    let line = String::from_utf8_lossy(&line).into_owned();
    let mut parts = line.splitn(3, ' ');
    match (parts.next(), parts.next().and_then(|r| r.parse::<u32>().ok()), parts.next()) {
        (Some("nemesis-join"), Some(r), Some(j)) => Ok((r, j.to_owned())),
        _ => Err(Fail::new(
            abi::ERR_OTHER,
            None,
            Why::Other(format!("MPI_Comm_join: the other side is not a nemesis process ({line:?})")),
        )),
    }
}

/// `MPI_Comm_disconnect`: completes this process's pending operations on the communicator
/// (their handles stay valid for the user's `MPI_Wait`), waits until both groups reached it, then
/// frees the communicator and sets the handle to `MPI_COMM_NULL`.
///
/// # Safety
/// `comm` null or readable and writable.
pub unsafe fn disconnect(acc: &mut Access, comm: *mut abi::Comm) -> Res<()> {
    if comm.is_null() {
        return Err(null_out(None));
    }
    // SAFETY: checked non-null; MPI's contract.
    let h = unsafe { *comm };
    if matches!(h, abi::COMM_WORLD | abi::COMM_SELF) || h == abi::COMM_NULL {
        return Err(Fail::new(
            abi::ERR_COMM,
            None,
            Why::Arg("MPI_Comm_disconnect of a predefined or null communicator"),
        ));
    }
    let (ci, c, tu) = shared(acc, h)?;
    // This process's operations on it complete first (their handles stay the user's).
    let st = acc.st();
    let mine: Vec<usize> =
        st.reqs.iter().filter(|(_, r)| r.comm as usize == ci).filter_map(|(rh, _)| st.reqs.index(rh)).collect();
    for i in mine {
        crate::p2p::complete::wait_slot(acc, i).map_err(on(ci))?;
    }
    synchronize(acc, ci, &c, &tu)?;
    forget(h);
    // SAFETY: `comm` is valid as checked above.
    unsafe { super::free(acc, comm) }
}

/// Every member of both groups (or of the one group) reached this point.
fn synchronize(acc: &mut Access, ci: usize, c: &Comm, tu: &Tuning) -> Res<()> {
    match &c.local {
        Some(local) => super::inter::exchange(acc, c, local, tu, &[]).map(drop).map_err(on(ci)),
        None => coll::allgather_bytes(acc, c, tu, &[]).map(drop).map_err(on(ci)),
    }
}

/// `MPI_Comm_get_parent`: the intercommunicator to the parents of a spawned process while it
/// is not freed or disconnected, else `MPI_COMM_NULL`.
///
/// # Safety
/// `parent` null or writable.
pub unsafe fn get_parent(acc: &mut Access, parent: *mut abi::Comm) -> Res<()> {
    if parent.is_null() {
        return Err(null_out(None));
    }
    let st = acc.st();
    if st.ep.is_none() {
        return Err(crate::state::not_running(st.phase));
    }
    let d = dyn_state();
    let h = match &d.parent {
        Some((h, ctx)) => match crate::p2p::comm_at(&st.comms, *h) {
            Ok((_, now)) if now.live && now.ctx == *ctx => *h,
            _ => abi::COMM_NULL,
        },
        None => abi::COMM_NULL,
    };
    // SAFETY: checked non-null; MPI's contract.
    unsafe { *parent = h };
    Ok(())
}

/// The universe ranks of this process's `MPI_COMM_WORLD` (`NEMESIS_WORLD`, else all `size`).
pub fn world_of(size: u32) -> Vec<u32> {
    let given = std::env::var(nemesis::contract::ENV_WORLD).ok().and_then(|v| nemesis::contract::parse_world(&v));
    match given {
        Some((first, count)) if first.saturating_add(count) <= size => (first..first + count).collect(),
        _ => (0..size).collect(),
    }
}

/// After `MPI_Init` built `MPI_COMM_WORLD`: a spawned process (`NEMESIS_APPNUM` set by
/// `nemesis-run`) sets `MPI_APPNUM` and connects its world to its parents, whose root opened
/// the port the spawn pre-put as `PARENT_ROOT_PORT_NAME` (MPICH's key).
pub fn on_init(acc: &mut Access) -> Res<()> {
    *dyn_state() = Dyn { ports: BTreeSet::new(), next: 1, parent: None };
    let Some(app) = std::env::var(nemesis::contract::ENV_APPNUM).ok().and_then(|v| v.trim().parse::<c_int>().ok())
    else {
        return Ok(());
    };
    acc.st().attr_values[APPNUM_INDEX] = app;
    let port = {
        let ep = acc.ep()?;
        let Some(pm) = ep.process_manager() else { return Ok(()) };
        pm.get(0, spawn::PARENT_PORT_KEY).map_err(|e| Fail::endpoint(0, e))?
    };
    let Some(port) = port else {
        return Err(Fail::new(abi::ERR_SPAWN, None, Why::Arg("a spawned process without its parents' port")));
    };
    let h = connect_to(acc, &port, abi::COMM_WORLD)?;
    let (_, obj) = crate::p2p::comm_at(&acc.st().comms, h)?;
    let ctx = obj.ctx;
    dyn_state().parent = Some((h, ctx));
    Ok(())
}

/// Forgets `MPI_Comm_get_parent`'s communicator if it is `h` (freed or disconnected): from then
/// on `MPI_Comm_get_parent` returns `MPI_COMM_NULL`.
pub fn forget(h: abi::Comm) {
    let mut d = dyn_state();
    if d.parent.as_ref().is_some_and(|(p, _)| *p == h) {
        d.parent = None;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn port_names_round_trip_and_bad_ones_are_refused() {
        assert_eq!(parse_port("nemesis-port:3:17"), Some((3, 17)));
        for bad in ["", "nemesis-port:", "nemesis-port:x:1", "nemesis-port:1:0", "tag#0$port#1", "nemesis-port:1:-2"] {
            assert_eq!(parse_port(bad), None, "{bad}");
        }
        assert_eq!(parse_port(&format!("nemesis-port:1:{JOIN_TAG}")), None);
    }

    #[test]
    fn the_control_context_is_beyond_every_pair() {
        assert!(CONTROL >= nemesis::WORLD + 4 + 2 * context::PAIRS as u32);
    }
}
