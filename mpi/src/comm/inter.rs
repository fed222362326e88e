//! Intercommunicators (MPI-3.1 §6.6): two disjoint groups, point-to-point ranks naming the other
//! one.
//!
//! **Representation.** An intercommunicator is a [`Comm`] whose `size`, `world` and `from_world`
//! are the **remote** group's, so every point-to-point path (the fast one included) translates
//! ranks into the remote group and statuses back without knowing the kind; `rank` is this
//! process's rank in its own group, which `Comm::local` holds as an intracommunicator of its own
//! (its own context pair: the local steps of collectives and creations run there).
//!
//! **Contexts.** Each group agrees on the context it receives in over its local communicator
//! (the usual agreement, [`context`]); the leaders swap them with the group lists, and each
//! member sends in the other group's (`Comm::send_ctx`). A context need only be free where it is
//! received, so no agreement spans both groups, except `MPI_Intercomm_merge`'s, whose
//! intracommunicator needs one context in every member: its rounds reduce in each group, the
//! leaders combine the two results and each group broadcasts the combination.
//!
//! **Leaders.** `MPI_Intercomm_create`'s leaders meet over the peer communicator with the
//! caller's tag (in its point-to-point context, as MPI specifies); the creations from an
//! intercommunicator (dup, split, create, merge) use rank 0 of each group and the
//! intercommunicator's own collective context.

use std::ffi::c_int;
use std::sync::Arc;

use super::context::{self, MERGE};
use super::{Comm, intra, null_out, on, shared, store};
use crate::abi;
use crate::coll::{self, Tuning, tag};
use crate::error::{Fail, Res, Why};
use crate::p2p::{comm_at, not_intra};
use crate::state::{Access, State};

/// Native-endian `u32` words as bytes.
pub(super) fn bytes_of(words: &[u32]) -> Vec<u8> {
    words.iter().flat_map(|w| w.to_ne_bytes()).collect()
}

/// Bytes as native-endian `u32` words (a partial word at the end is dropped).
pub(super) fn words_of(bytes: &[u8]) -> Vec<u32> {
    bytes.chunks_exact(4).map(|b| u32::from_ne_bytes([b[0], b[1], b[2], b[3]])).collect()
}

/// Sends `mine` to job rank `to` in context `send_ctx` and receives job rank `to`'s message (of
/// any length) in `recv_ctx`, both with `tag`: the leaders' exchange. The send is non-blocking,
/// so two leaders exchanging never wait on one another.
pub fn swap(acc: &mut Access, to: u32, tag: i32, send_ctx: u32, recv_ctx: u32, mine: &[u8]) -> Res<Vec<u8>> {
    let fail = |e| Fail::endpoint(0, e);
    // SAFETY: `mine` outlives the request, which is waited for below.
    let r = unsafe { acc.ep()?.isend_raw(mine.as_ptr(), mine.len(), to, tag, send_ctx) }.map_err(fail)?;
    let got = (|| {
        let s = acc.ep_probe(to as i32, tag, recv_ctx)?.map_err(fail)?;
        let mut buf = vec![0u8; s.len];
        acc.ep_recv(&mut buf, to as i32, tag, recv_ctx)?.map_err(fail)?;
        Ok(buf)
    })();
    let sent = acc.ep_wait(r).and_then(|s| s.map_err(fail));
    let got = got?;
    sent?;
    Ok(got)
}

/// The local group of intercommunicator `c`.
fn local_of(c: &Comm, ci: usize) -> Res<Arc<Comm>> {
    c.local.clone().ok_or_else(|| Fail::new(abi::ERR_COMM, Some(ci), Why::Arg("not an intercommunicator")))
}

/// The exchange between the groups of intercommunicator `c` behind every creation from it:
/// `mine` (the same at every member of this group) goes to the other group, whose own comes
/// back, at every member.
pub(super) fn exchange(acc: &mut Access, c: &Comm, local: &Comm, tu: &Tuning, mine: &[u8]) -> Res<Vec<u8>> {
    let mut theirs = if local.rank == 0 {
        swap(acc, c.world[0], tag::COMM, c.coll_send_ctx(), c.coll_ctx(), mine)?
    } else {
        Vec::new()
    };
    coll::bcast_bytes(acc, local, tu, 0, &mut theirs)?;
    Ok(theirs)
}

/// The two contexts of a new intercommunicator made by the members of `local` (its receive
/// context, then its local group's), agreed among them.
pub(super) fn two_contexts(acc: &mut Access, ci: usize, local: &Comm, tu: &Tuning) -> Res<(u32, u32)> {
    let ctx = context::agree(acc, ci, local, tu).map_err(on(ci))?;
    match context::agree(acc, ci, local, tu) {
        Ok(lctx) => Ok((ctx, lctx)),
        Err(e) => {
            acc.st().contexts.release(ctx);
            Err(on(ci)(e))
        }
    }
}

/// Gives back contexts agreed for a creation that did not happen (here).
fn release(st: &mut State, ctxs: &[u32]) {
    for &x in ctxs {
        st.contexts.release(x);
    }
}

/// The new intercommunicator between job ranks `mine` (this process among them, with local
/// context `lctx`) and `remote`, received in `ctx` and sent in `rctx`.
pub(super) fn make(
    st: &mut State,
    mine: Vec<u32>,
    remote: Vec<u32>,
    (ctx, lctx, rctx): (u32, u32, u32),
    from: impl Into<super::Lineage>,
) -> abi::Comm {
    let local = intra(st, mine, lctx, from.into());
    let size = st.ep.as_ref().map_or(1, |e| e.size());
    let c = Comm::inter(local, remote, ctx, rctx, size, &st.node_of_job);
    store(st, c)
}

/// `MPI_Intercomm_create`: collective over `local_comm` and the remote group's; the leaders
/// (`local_leader` here, `remote_leader` of `peer_comm` there) swap their groups and receive
/// contexts over `peer_comm` with `tag`, then each broadcasts the other group's in its own.
///
/// # Safety
/// `newcomm` null or writable.
pub unsafe fn create_from(
    acc: &mut Access,
    local_comm: abi::Comm,
    local_leader: c_int,
    peer_comm: abi::Comm,
    remote_leader: c_int,
    tag: c_int,
    newcomm: *mut abi::Comm,
) -> Res<()> {
    let (ci, lc, tu) = shared(acc, local_comm)?;
    if newcomm.is_null() {
        return Err(null_out(Some(ci)));
    }
    if lc.local.is_some() {
        return Err(not_intra(ci));
    }
    if local_leader < 0 || local_leader as u32 >= lc.size {
        return Err(Fail::new(abi::ERR_RANK, Some(ci), Why::Rank { rank: local_leader, size: lc.size }));
    }
    let (ctx, lctx) = two_contexts(acc, ci, &lc, &tu)?;
    let leader = local_leader as usize;
    // The leader's news for its group: an error class (the group fails with it) or success, the
    // remote group's receive context and its job ranks.
    let mut news = Vec::new();
    if lc.rank as usize == leader {
        let words = match meet(acc, &lc, peer_comm, remote_leader, tag, ctx) {
            Ok(mut w) => {
                w.insert(0, abi::SUCCESS as u32);
                w
            }
            Err(f) => vec![f.code as u32],
        };
        news = bytes_of(&words);
    }
    let got = coll::bcast_bytes(acc, &lc, &tu, leader, &mut news).map_err(on(ci));
    let words = words_of(&news);
    let st = acc.st();
    if let Err(e) = got {
        release(st, &[ctx, lctx]);
        return Err(e);
    }
    let code = words.first().map_or(abi::ERR_INTERN, |&w| w as c_int);
    if code != abi::SUCCESS || words.len() < 3 {
        release(st, &[ctx, lctx]);
        let why = Why::Arg(
            "MPI_Intercomm_create failed at the local leader (peer communicator, remote leader, tag or overlapping groups)",
        );
        return Err(Fail::new(if code == abi::SUCCESS { abi::ERR_INTERN } else { code }, Some(ci), why));
    }
    let h = make(st, lc.world.to_vec(), words[2..].to_vec(), (ctx, lctx, words[1]), lc.lineage());
    // SAFETY: checked non-null; MPI's contract.
    unsafe { *newcomm = h };
    Ok(())
}

/// The local leader's part of `MPI_Intercomm_create`: the swap with the remote leader over the
/// peer communicator; the remote group's receive context and job ranks.
fn meet(
    acc: &mut Access,
    lc: &Comm,
    peer_comm: abi::Comm,
    remote_leader: c_int,
    tag: c_int,
    ctx: u32,
) -> Res<Vec<u32>> {
    let st = acc.st();
    let (pi, pc) = comm_at(&st.comms, peer_comm)?;
    if remote_leader < 0 || remote_leader as u32 >= pc.size {
        return Err(Fail::new(abi::ERR_RANK, Some(pi), Why::Rank { rank: remote_leader, size: pc.size }));
    }
    if tag < 0 {
        return Err(Fail::new(abi::ERR_TAG, Some(pi), Why::Tag(tag)));
    }
    let (to, send_ctx, recv_ctx) = (pc.world[remote_leader as usize], pc.send_ctx, pc.ctx);
    if lc.world.contains(&to) {
        return Err(Fail::new(abi::ERR_RANK, Some(pi), Why::Arg("the remote leader is in the local group")));
    }
    let mut mine = vec![ctx];
    mine.extend_from_slice(&lc.world);
    let theirs = words_of(&swap(acc, to, tag, send_ctx, recv_ctx, &bytes_of(&mine))?);
    if theirs.len() < 2 || theirs[1..].iter().any(|w| lc.world.contains(w)) {
        return Err(Fail::new(abi::ERR_COMM, Some(pi), Why::Arg("the two groups of an intercommunicator overlap")));
    }
    Ok(theirs)
}

/// `MPI_Comm_dup` of intercommunicator `c` (index `ci`): its handle (attributes are the
/// caller's to copy).
pub fn dup(acc: &mut Access, ci: usize, c: &Comm, tu: &Tuning) -> Res<abi::Comm> {
    let local = local_of(c, ci)?;
    let (ctx, lctx) = two_contexts(acc, ci, &local, tu)?;
    match exchange(acc, c, &local, tu, &ctx.to_ne_bytes()) {
        Ok(theirs) if theirs.len() == 4 => {
            let rctx = words_of(&theirs)[0];
            Ok(make(acc.st(), local.world.to_vec(), c.world.to_vec(), (ctx, lctx, rctx), c.lineage()))
        }
        other => {
            release(acc.st(), &[ctx, lctx]);
            Err(on(ci)(other.err().unwrap_or_else(|| Fail::new(abi::ERR_INTERN, None, Why::Arg("a short exchange")))))
        }
    }
}

/// `MPI_Comm_split` of intercommunicator `c`: each group splits by colour and key, and the
/// members of a colour present in both groups get an intercommunicator between their two parts
/// (MPI-3.1 §6.4.2); the others `MPI_COMM_NULL`.
pub fn split(acc: &mut Access, ci: usize, c: &Comm, tu: &Tuning, color: c_int, key: c_int) -> Res<abi::Comm> {
    let local = local_of(c, ci)?;
    let mine = bytes_of(&[color as u32, key as u32]);
    let table = coll::allgather_bytes(acc, &local, tu, &mine).map_err(on(ci))?;
    // The members of `color` in a group's table (colour and key per rank), by key then rank.
    let members = |table: &[u8], world: &[u32]| -> Vec<u32> {
        let w = words_of(table);
        let mut m: Vec<(c_int, usize)> = (0..world.len().min(w.len() / 2))
            .filter(|&r| w[2 * r] as c_int == color)
            .map(|r| (w[2 * r + 1] as c_int, r))
            .collect();
        m.sort_unstable();
        m.iter().map(|&(_, r)| world[r]).collect()
    };
    derive(acc, ci, c, &local, tu, &table, |theirs| {
        if color == abi::UNDEFINED {
            return None;
        }
        let remote = members(theirs, &c.world);
        (!remote.is_empty()).then(|| (members(&table, &local.world), remote))
    })
}

/// `MPI_Comm_create` on intercommunicator `c`: `group` (a subgroup of the local group, the same
/// at every local member) and the remote group's form the new intercommunicator; a member of
/// neither, or either group empty, gets `MPI_COMM_NULL`.
pub fn create(acc: &mut Access, ci: usize, c: &Comm, tu: &Tuning, group: abi::Group) -> Res<abi::Comm> {
    let local = local_of(c, ci)?;
    let st = acc.st();
    let members = crate::group::members(st, group).map_err(on(ci))?;
    if members.iter().any(|&w| local.rank_of_world(w) < 0) {
        return Err(Fail::new(abi::ERR_GROUP, Some(ci), Why::Arg("the group is not a subset of the local group")));
    }
    let me = st.ep.as_ref().map_or(0, |e| e.rank());
    let table = bytes_of(&members);
    derive(acc, ci, c, &local, tu, &table, |theirs| {
        let remote = words_of(theirs);
        (members.contains(&me) && !remote.is_empty()).then(|| (members.to_vec(), remote))
    })
}

/// A creation from intercommunicator `c` by every member of both groups: the local group agrees
/// on two contexts, the groups swap `table` (this group's, the same at every member) and the
/// contexts, and `pick` says from the other group's table which local and remote job ranks this
/// process's new intercommunicator has (`None`: `MPI_COMM_NULL`).
fn derive(
    acc: &mut Access,
    ci: usize,
    c: &Comm,
    local: &Comm,
    tu: &Tuning,
    table: &[u8],
    pick: impl FnOnce(&[u8]) -> Option<(Vec<u32>, Vec<u32>)>,
) -> Res<abi::Comm> {
    let (ctx, lctx) = two_contexts(acc, ci, local, tu)?;
    let mut mine = ctx.to_ne_bytes().to_vec();
    mine.extend_from_slice(table);
    let theirs = match exchange(acc, c, local, tu, &mine) {
        Ok(t) if t.len() >= 4 => t,
        other => {
            release(acc.st(), &[ctx, lctx]);
            return Err(on(ci)(
                other.err().unwrap_or_else(|| Fail::new(abi::ERR_INTERN, None, Why::Arg("a short exchange"))),
            ));
        }
    };
    let rctx = words_of(&theirs[..4])[0];
    let st = acc.st();
    Ok(match pick(&theirs[4..]) {
        Some((mine, remote)) => make(st, mine, remote, (ctx, lctx, rctx), c.lineage()),
        None => {
            release(st, &[ctx, lctx]);
            abi::COMM_NULL
        }
    })
}

/// `MPI_Intercomm_merge`: the intracommunicator over both groups, the group that gave `high`
/// false first (MPI-3.1 §6.6.2); if both gave the same, the group whose leader has the lower job
/// rank first.
///
/// # Safety
/// `newintra` null or writable.
pub unsafe fn merge(acc: &mut Access, intercomm: abi::Comm, high: c_int, newintra: *mut abi::Comm) -> Res<()> {
    let (ci, c, tu) = shared(acc, intercomm)?;
    if newintra.is_null() {
        return Err(null_out(Some(ci)));
    }
    let local = local_of(&c, ci)?;
    let high = u32::from(high != 0);
    let theirs = words_of(&exchange(acc, &c, &local, &tu, &bytes_of(&[high, local.ctx])).map_err(on(ci))?);
    let &[their_high, their_lctx] = theirs.as_slice() else {
        return Err(Fail::new(abi::ERR_INTERN, Some(ci), Why::Arg("a short exchange")));
    };
    // One key in both groups: the lower of their local contexts.
    let key = (local.ctx.min(their_lctx), MERGE);
    let ctx = context::agree_by(acc, ci, key, |acc, bytes| {
        coll::allreduce_bytes(acc, &local, &tu, bytes, context::round_reduction(), tag::COMM)?;
        let mut combined = if local.rank == 0 {
            let other = swap(acc, c.world[0], tag::COMM, c.coll_send_ctx(), c.coll_ctx(), bytes)?;
            bytes.iter().zip(other.iter().chain(std::iter::repeat(&0))).map(|(a, b)| a & b).collect()
        } else {
            Vec::new()
        };
        coll::bcast_bytes(acc, &local, &tu, 0, &mut combined)?;
        *bytes = combined;
        Ok(())
    })
    .map_err(on(ci))?;
    let mine_first = (high, local.world[0]) < (their_high, c.world[0]);
    let mut world = Vec::with_capacity(local.world.len() + c.world.len());
    let (a, b) = if mine_first { (&local.world, &c.world) } else { (&c.world, &local.world) };
    world.extend_from_slice(a);
    world.extend_from_slice(b);
    let st = acc.st();
    let c2 = intra(st, world, ctx, c.lineage());
    let h = store(st, c2);
    // SAFETY: checked non-null; MPI's contract.
    unsafe { *newintra = h };
    Ok(())
}

/// `MPI_Comm_test_inter`.
///
/// # Safety
/// `flag` null or writable.
pub unsafe fn test_inter(acc: &mut Access, comm: abi::Comm, flag: *mut c_int) -> Res<()> {
    let (ci, c, _) = shared(acc, comm)?;
    if flag.is_null() {
        return Err(null_out(Some(ci)));
    }
    // SAFETY: checked non-null; MPI's contract.
    unsafe { *flag = c_int::from(c.local.is_some()) };
    Ok(())
}

/// `MPI_Comm_remote_size` (`MPI_ERR_COMM` on an intracommunicator).
///
/// # Safety
/// `size` null or writable.
pub unsafe fn remote_size(acc: &mut Access, comm: abi::Comm, size: *mut c_int) -> Res<()> {
    let (ci, c, _) = shared(acc, comm)?;
    local_of(&c, ci)?;
    if size.is_null() {
        return Err(null_out(Some(ci)));
    }
    // SAFETY: checked non-null; MPI's contract.
    unsafe { *size = c.size as c_int };
    Ok(())
}

/// `MPI_Comm_remote_group` (`MPI_ERR_COMM` on an intracommunicator).
///
/// # Safety
/// `group` null or writable.
pub unsafe fn remote_group(acc: &mut Access, comm: abi::Comm, group: *mut abi::Group) -> Res<()> {
    let (ci, c, _) = shared(acc, comm)?;
    local_of(&c, ci)?;
    // SAFETY: the caller's contract.
    unsafe { crate::group::hand_out(acc.st(), c.world.to_vec(), group) }.map_err(on(ci))
}
