//! Communicators from groups, without a parent communicator (MPI-4.1 §7.4.2, §7.6.2):
//! `MPI_Comm_create_from_group` and `MPI_Intercomm_create_from_groups`, the Sessions model's way
//! to communicators (they work as well under the world model).
//!
//! **Where they talk.** Lacking a parent, the members meet in the job's collective context
//! (`MPI_COMM_WORLD`'s, context 1, whether or not the world model runs) under tags of their own:
//! [`FROM_GROUP`] and [`INTER_LOCAL`]/[`INTER_LEADERS`] plus a hash of the string tag, above
//! every tag the world's own collectives use (fixed ones, `COMM_GROUP + t`, the non-blocking
//! ones below `0x5000_0100`). Creations that MPI lets run at once have different string tags
//! (MPI-4.1 §7.4.2), so their messages do not meet; a hash collision between two such creations
//! with members in common could mix them (at most 2^27 tags per kind).
//!
//! **Contexts.** The members agree on a context among themselves as `MPI_Comm_create_group`'s
//! do ([`context::agree_by`]), keyed by the world's context and the tag's hash. An
//! intercommunicator's groups each agree on their own two (receive, local), and the leaders swap
//! their receive contexts; the remote group is known to everyone (an argument).

use std::ffi::{c_char, c_int};

use super::context::{self, round_reduction};
use super::{Comm, inter, intra, null_out, store};
use crate::abi;
use crate::coll::{self, Tuning, algo::Reduction};
use crate::datatype::Kind;
use crate::error::{Fail, Res, Why};
use crate::op::OpKind;
use crate::state::{Access, State, not_running};

/// `MPI_Comm_create_from_group`'s tags: `FROM_GROUP + hash % SPAN`.
pub const FROM_GROUP: i32 = 0x6000_0000;
/// `MPI_Intercomm_create_from_groups`' tags in each group.
pub const INTER_LOCAL: i32 = 0x6800_0000;
/// `MPI_Intercomm_create_from_groups`' tags between the leaders.
pub const INTER_LEADERS: i32 = 0x7000_0000;
/// Tags per kind.
const SPAN: u32 = 1 << 27;

/// FNV-1a of the string tag.
fn hash(s: &str) -> u32 {
    s.bytes().fold(0x811c_9dc5u32, |h, b| (h ^ u32::from(b)).wrapping_mul(0x0100_0193))
}

/// The error handler a new communicator takes (`MPI_ERRHANDLER_NULL`: `MPI_ERRORS_ARE_FATAL`).
fn handler(st: &State, errh: abi::Errhandler) -> Res<abi::Errhandler> {
    let errh = if errh == abi::ERRHANDLER_NULL { abi::ERRORS_ARE_FATAL } else { errh };
    crate::errh::check(st, errh, crate::errh::Kind::Comm)?;
    Ok(errh)
}

/// What both creations check first: the transport runs, the group's members with this process
/// among them, the string tag, the error handler, and the info argument.
///
/// # Safety
/// `stringtag` null or NUL-terminated.
unsafe fn begin(
    acc: &mut Access,
    group: abi::Group,
    stringtag: *const c_char,
    info: abi::Info,
    errh: abi::Errhandler,
) -> Res<(Vec<u32>, u32, abi::Errhandler, u32, Tuning)> {
    let st = acc.st();
    let Some(me) = st.ep.as_ref().map(|e| e.rank()) else { return Err(not_running(st.phase)) };
    let members = crate::group::members(st, group)?.to_vec();
    if !members.contains(&me) {
        return Err(Fail::new(abi::ERR_GROUP, None, Why::Arg("the calling process is not in the group")));
    }
    // SAFETY: the caller's contract.
    let tag = unsafe { crate::session::c_string(stringtag, crate::session::MAX_STRINGTAG_LEN, "stringtag")? };
    if info != abi::INFO_NULL {
        crate::info::contents(st, info)?;
    }
    let errh = handler(st, errh)?;
    Ok((members, me, errh, hash(&tag), st.tuning))
}

/// The members `members` as a communicator meeting in the job's collective context (a temporary:
/// no shared area).
fn meeting(st: &State, members: Vec<u32>, me: u32, errh: abi::Errhandler) -> Comm {
    let size = st.ep.as_ref().map_or(1, |e| e.size());
    let mut c = Comm::new(members, me, size, nemesis::WORLD, errh, &st.node_of_job);
    c.area = coll::area::AreaUse::off();
    c
}

/// A context agreed among the members of `over` under `tag` (`key`: the creation's name).
fn agree(acc: &mut Access, over: &Comm, tu: &Tuning, tag: i32, key: u32) -> Res<u32> {
    context::agree_by(acc, 0, (nemesis::WORLD, key), |acc, bytes| {
        coll::allreduce_bytes(acc, over, tu, bytes, round_reduction(), tag)
    })
}

/// Runs `f`; its failure goes to error handler `errh` (the one the new communicator was to take,
/// MPI-4.1 §9.3, with `MPI_COMM_NULL`) when it is one.
fn through(acc: &mut Access, errh: abi::Errhandler, f: impl FnOnce(&mut Access) -> Res<()>) -> Res<()> {
    f(acc).map_err(|e| match handler(acc.st(), errh) {
        Ok(errh) if !matches!(e.why, Why::On { .. }) => {
            Fail::new(e.code, e.comm, Why::On { errh, handle: abi::COMM_NULL, why: Box::new(e.why) })
        }
        _ => e,
    })
}

/// `MPI_Comm_create_from_group`: collective over the members of `group`; a failure goes to
/// `errh`.
///
/// # Safety
/// `stringtag` NUL-terminated; `newcomm` null or writable.
pub unsafe fn create_from_group(
    acc: &mut Access,
    group: abi::Group,
    stringtag: *const c_char,
    info: abi::Info,
    errh: abi::Errhandler,
    newcomm: *mut abi::Comm,
) -> Res<()> {
    // SAFETY: the caller's contract.
    through(acc, errh, |acc| unsafe { create_in(acc, group, stringtag, info, errh, newcomm) })
}

/// [`create_from_group`]'s work.
///
/// # Safety
/// As [`create_from_group`].
unsafe fn create_in(
    acc: &mut Access,
    group: abi::Group,
    stringtag: *const c_char,
    info: abi::Info,
    errh: abi::Errhandler,
    newcomm: *mut abi::Comm,
) -> Res<()> {
    if newcomm.is_null() {
        return Err(null_out(None));
    }
    // SAFETY: the caller's contract.
    let (members, me, errh, h, tu) = unsafe { begin(acc, group, stringtag, info, errh)? };
    let over = meeting(acc.st(), members.clone(), me, errh);
    let ctx = agree(acc, &over, &tu, FROM_GROUP + (h % SPAN) as i32, h % SPAN)?;
    let st = acc.st();
    let session = crate::session::of_group(st, group);
    let c = intra(st, members, ctx, super::Lineage { errh, session });
    let c = store(st, c);
    // SAFETY: checked non-null; MPI's contract.
    unsafe { *newcomm = c };
    Ok(())
}

/// Native-endian `u64` words as bytes and back.
fn bytes_of(w: &[u64]) -> Vec<u8> {
    w.iter().flat_map(|x| x.to_ne_bytes()).collect()
}

fn words_of(b: &[u8]) -> Vec<u64> {
    b.chunks_exact(8).map(|c| u64::from_ne_bytes(c.try_into().unwrap_or([0; 8]))).collect()
}

/// `MPI_Intercomm_create_from_groups`: collective over both groups; the leaders (`local_leader`
/// of `local_group`, `remote_leader` of `remote_group`) swap their groups' receive contexts. A
/// failure goes to `errh`.
///
/// # Safety
/// `stringtag` NUL-terminated; `newintercomm` null or writable.
#[allow(clippy::too_many_arguments)]
pub unsafe fn intercomm_create_from_groups(
    acc: &mut Access,
    local_group: abi::Group,
    local_leader: c_int,
    remote_group: abi::Group,
    remote_leader: c_int,
    stringtag: *const c_char,
    info: abi::Info,
    errh: abi::Errhandler,
    newintercomm: *mut abi::Comm,
) -> Res<()> {
    let (lg, ll, rg, rl) = (local_group, local_leader, remote_group, remote_leader);
    // SAFETY: the caller's contract.
    through(acc, errh, |acc| unsafe { inter_in(acc, lg, ll, rg, rl, stringtag, info, errh, newintercomm) })
}

/// [`intercomm_create_from_groups`]' work.
///
/// # Safety
/// As [`intercomm_create_from_groups`].
#[allow(clippy::too_many_arguments)]
unsafe fn inter_in(
    acc: &mut Access,
    local_group: abi::Group,
    local_leader: c_int,
    remote_group: abi::Group,
    remote_leader: c_int,
    stringtag: *const c_char,
    info: abi::Info,
    errh: abi::Errhandler,
    newintercomm: *mut abi::Comm,
) -> Res<()> {
    if newintercomm.is_null() {
        return Err(null_out(None));
    }
    // SAFETY: the caller's contract.
    let (mine, me, errh, h, tu) = unsafe { begin(acc, local_group, stringtag, info, errh)? };
    let remote = crate::group::members(acc.st(), remote_group)?.to_vec();
    if !(0..mine.len() as c_int).contains(&local_leader) {
        return Err(Fail::new(abi::ERR_RANK, None, Why::Rank { rank: local_leader, size: mine.len() as u32 }));
    }
    if !(0..remote.len() as c_int).contains(&remote_leader) {
        return Err(Fail::new(abi::ERR_RANK, None, Why::Rank { rank: remote_leader, size: remote.len() as u32 }));
    }
    if remote.iter().any(|r| mine.contains(r)) {
        return Err(Fail::new(abi::ERR_GROUP, None, Why::Arg("the local and remote groups overlap")));
    }
    let over = meeting(acc.st(), mine.clone(), me, errh);
    let (local_tag, key) = (INTER_LOCAL + (h % SPAN) as i32, SPAN + h % SPAN);
    let ctx = agree(acc, &over, &tu, local_tag, key)?;
    let lctx = agree(acc, &over, &tu, local_tag, key).inspect_err(|_| acc.st().contexts.release(ctx))?;
    // The leader learns the remote group's receive context; its group learns it from it (an
    // OR-allreduce of a success flag and the context, zeros elsewhere).
    let mut news = [0u64; 2];
    if mine[local_leader as usize] == me {
        let to = remote[remote_leader as usize];
        let tag = INTER_LEADERS + (h % SPAN) as i32;
        let got = inter::swap(acc, to, tag, over.coll_send_ctx(), over.coll_ctx(), &ctx.to_ne_bytes());
        if let Ok(b) = got
            && let Ok(w) = <[u8; 4]>::try_from(b.as_slice())
        {
            news = [1, u64::from(u32::from_ne_bytes(w))];
        }
    }
    let mut bytes = bytes_of(&news);
    let or = Reduction::builtin(OpKind::Bor, Kind::U64, 8);
    let shared = coll::allreduce_bytes(acc, &over, &tu, &mut bytes, or, local_tag);
    let news = words_of(&bytes);
    let st = acc.st();
    if shared.is_err() || news.first() != Some(&1) {
        st.contexts.release(ctx);
        st.contexts.release(lctx);
        shared?;
        return Err(Fail::new(abi::ERR_OTHER, None, Why::Arg("the leaders could not exchange contexts")));
    }
    let rctx = news[1] as u32;
    let session = crate::session::of_group(st, local_group);
    let c = inter::make(st, mine, remote, (ctx, lctx, rctx), super::Lineage { errh, session });
    // SAFETY: checked non-null; MPI's contract.
    unsafe { *newintercomm = c };
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tags_stay_in_their_ranges() {
        for s in ["", "a", "org.mpi-forum.tag", &"x".repeat(255)] {
            let h = hash(s) % SPAN;
            assert!(FROM_GROUP + h as i32 >= FROM_GROUP && FROM_GROUP + (h as i32) < INTER_LOCAL);
            assert!(INTER_LEADERS + (h as i32) > INTER_LEADERS - 1);
        }
        assert_ne!(hash("a"), hash("b"));
        assert!(INTER_LEADERS.checked_add(SPAN as i32 - 1).is_some());
    }
}
