//! Synchronisation calls (MPI-4.1 §12.5): `MPI_Win_fence`, post/start/complete/wait/test
//! (PSCW), passive target (`MPI_Win_lock`/`unlock`, `lock_all`/`unlock_all`, the flushes) and
//! `MPI_Win_sync`. Each checks its transition in the window's [`super::Epoch`] first
//! (`MPI_ERR_RMA_SYNC` otherwise), then synchronises:
//!
//! - **fence**: the remote path's operations complete, a full memory fence, a barrier over the
//!   window's private communicator, a fence again;
//! - **PSCW**: zero-byte messages in the window's private context, the same for node peers and
//!   remote ones: a target's post sends `POST` to each origin, `MPI_Win_start` receives them
//!   (unless `MPI_MODE_NOCHECK`), `MPI_Win_complete` fences memory and sends `COMPLETE` to each
//!   target, which `MPI_Win_wait` receives;
//! - **passive target**: the lock word in the target's control block ([`super::lockword`]) for a
//!   node-local target, the remote path's lock otherwise; unlock and flush fence memory (the
//!   direct paths complete every operation at once) and complete the remote path's.
//!
//! Waits pause through [`Access::pause`]: other threads get the lock, non-blocking collectives
//! advance, the core is yielded when ranks outnumber cores, and the Endpoint's progress runs
//! (the remote path's active messages are served while this process waits).

use std::ffi::c_int;
use std::sync::atomic::Ordering::{Acquire, SeqCst};
use std::sync::atomic::fence;

use super::epoch::Held;
use super::lockword::{self, Kind as LockKind, Watch};
use super::{MODE_ALL, MODE_NOCHECK, MODE_NOSUCCEED, Path, Window, remote, win, win_mut};
use crate::abi;
use crate::error::{Fail, Res, Why};
use crate::state::Access;

/// Tags of the window's private context used here (the remote path uses tags from
/// [`FIRST_REMOTE_TAG`] on).
const TAG_POST: i32 = 1;
const TAG_COMPLETE: i32 = 2;
/// The first tag the remote path may use in a window's private context.
pub const FIRST_REMOTE_TAG: i32 = 16;

#[cold]
fn sync_err(why: &'static str) -> Fail {
    Fail::new(abi::ERR_RMA_SYNC, None, Why::Arg(why))
}

fn check_assert(assert: c_int, allowed: c_int) -> Res<()> {
    if assert & !allowed != 0 {
        return Err(Fail::new(abi::ERR_ASSERT, None, Why::Other(format!("invalid assertion {assert:#x}"))));
    }
    Ok(())
}

#[cold]
fn endpoint(e: nemesis::Error) -> Fail {
    let mut f = Fail::endpoint(0, e);
    f.comm = None;
    f
}

/// `MPI_Win_fence`.
pub fn fence_call(acc: &mut Access, assert: c_int, h: abi::Win) -> Res<()> {
    super::with(acc, h, |acc| {
        check_assert(assert, MODE_ALL)?;
        win(acc.st(), h)?.epoch.check_fence().map_err(sync_err)?;
        remote::flush(acc, h, None)?;
        let c = win(acc.st(), h)?.comm.clone();
        fence(SeqCst);
        super::create::all_agree(acc, &c, true)?;
        fence(SeqCst);
        win_mut(acc.st(), h)?.epoch.fenced(assert & MODE_NOSUCCEED == 0);
        Ok(())
    })
}

/// The window ranks of group `g`'s members (each must be a member of the window).
fn ranks_of(acc: &mut Access, h: abi::Win, g: abi::Group) -> Res<Vec<u32>> {
    let st = acc.st();
    let members = crate::group::members(st, g)?;
    let w = win(st, h)?;
    members
        .iter()
        .map(|&j| match w.comm.from_world.get(j as usize) {
            Some(&r) if r >= 0 => Ok(r as u32),
            _ => Err(Fail::new(abi::ERR_GROUP, None, Why::Arg("a group member is not a member of the window"))),
        })
        .collect()
}

/// The window's private context and the job ranks of window ranks `ranks`.
fn jobs_of(acc: &mut Access, h: abi::Win, ranks: &[u32]) -> Res<(u32, Vec<u32>)> {
    let w = win(acc.st(), h)?;
    Ok((w.comm.ctx, ranks.iter().map(|&r| w.comm.world[r as usize]).collect()))
}

/// Sends a zero-byte notice with `tag` to each of window ranks `to`.
fn notify(acc: &mut Access, h: abi::Win, to: &[u32], tag: i32) -> Res<()> {
    let (ctx, jobs) = jobs_of(acc, h, to)?;
    for j in jobs {
        acc.ep_send(&[], j, tag, ctx, false)?.map_err(endpoint)?;
    }
    Ok(())
}

/// Receives a zero-byte notice with `tag` from each of window ranks `from`.
fn await_notices(acc: &mut Access, h: abi::Win, from: &[u32], tag: i32) -> Res<()> {
    let (ctx, jobs) = jobs_of(acc, h, from)?;
    for j in jobs {
        acc.ep_recv(&mut [], j as i32, tag, ctx)?.map_err(endpoint)?;
    }
    Ok(())
}

/// `MPI_Win_post`: this process exposes its window to the members of `g`.
pub fn post(acc: &mut Access, g: abi::Group, assert: c_int, h: abi::Win) -> Res<()> {
    super::with(acc, h, |acc| {
        check_assert(assert, MODE_ALL)?;
        let origins = ranks_of(acc, h, g)?;
        win_mut(acc.st(), h)?.epoch.check_post().map_err(sync_err)?;
        fence(SeqCst);
        if assert & MODE_NOCHECK == 0 {
            notify(acc, h, &origins, TAG_POST)?;
        }
        win_mut(acc.st(), h)?.epoch.exposure = Some(origins);
        Ok(())
    })
}

/// `MPI_Win_start`: an access epoch to the members of `g`, once each posted.
pub fn start(acc: &mut Access, g: abi::Group, assert: c_int, h: abi::Win) -> Res<()> {
    super::with(acc, h, |acc| {
        check_assert(assert, MODE_ALL)?;
        let targets = ranks_of(acc, h, g)?;
        win_mut(acc.st(), h)?.epoch.check_start().map_err(sync_err)?;
        if assert & MODE_NOCHECK == 0 {
            await_notices(acc, h, &targets, TAG_POST)?;
        }
        fence(SeqCst);
        win_mut(acc.st(), h)?.epoch.access = Some(targets);
        Ok(())
    })
}

/// `MPI_Win_complete`: ends the access epoch; each target learns it.
pub fn complete(acc: &mut Access, h: abi::Win) -> Res<()> {
    super::with(acc, h, |acc| {
        let Some(targets) = win(acc.st(), h)?.epoch.access.clone() else {
            return Err(sync_err("MPI_Win_complete without MPI_Win_start"));
        };
        remote::flush(acc, h, None)?;
        fence(SeqCst);
        notify(acc, h, &targets, TAG_COMPLETE)?;
        win_mut(acc.st(), h)?.epoch.access = None;
        Ok(())
    })
}

/// `MPI_Win_wait`: ends the exposure epoch once every origin completed.
pub fn wait(acc: &mut Access, h: abi::Win) -> Res<()> {
    super::with(acc, h, |acc| {
        let Some(origins) = win(acc.st(), h)?.epoch.exposure.clone() else {
            return Err(sync_err("MPI_Win_wait without MPI_Win_post"));
        };
        await_notices(acc, h, &origins, TAG_COMPLETE)?;
        fence(SeqCst);
        win_mut(acc.st(), h)?.epoch.exposure = None;
        Ok(())
    })
}

/// `MPI_Win_test`: `MPI_Win_wait` if every origin completed already (`*flag` true), else
/// nothing (`*flag` false).
///
/// # Safety
/// `flag` null or writable.
pub unsafe fn test(acc: &mut Access, h: abi::Win, flag: *mut c_int) -> Res<()> {
    super::with(acc, h, |acc| {
        if flag.is_null() {
            return Err(super::null_out());
        }
        let Some(origins) = win(acc.st(), h)?.epoch.exposure.clone() else {
            return Err(sync_err("MPI_Win_test without MPI_Win_post"));
        };
        let (ctx, jobs) = jobs_of(acc, h, &origins)?;
        let mut all = true;
        for j in jobs {
            // Several origins may be one process only once each: a probe per origin suffices.
            if acc.ep()?.iprobe(j as i32, TAG_COMPLETE, ctx).map_err(endpoint)?.is_none() {
                all = false;
                break;
            }
        }
        if all {
            await_notices(acc, h, &origins, TAG_COMPLETE)?;
            fence(SeqCst);
            win_mut(acc.st(), h)?.epoch.exposure = None;
        }
        // SAFETY: checked non-null; MPI's contract.
        unsafe { *flag = c_int::from(all) };
        Ok(())
    })
}

/// Waits until the lock word of node-local target `local` admits ticket `t` of `kind`.
fn take_lock(acc: &mut Access, h: abi::Win, local: u32, kind: LockKind) -> Res<()> {
    let seg = win(acc.st(), h)?.seg.clone();
    let l = &seg.control(local).lock;
    let t = l.ticket();
    let (mut spins, mut watch) = (0, Watch::default());
    loop {
        let inside = if kind == LockKind::Shared { l.try_shared(t) } else { l.try_exclusive(t) };
        if inside {
            return Ok(());
        }
        if watch.due()
            && let Some(pid) = dead_member(win(acc.st(), h)?)
        {
            return Err(lockword::holder_died("MPI_Win_lock waited for a lock", pid));
        }
        // The remote path's messages are served meanwhile (a remote origin may hold the lock).
        acc.ep()?.progress().map_err(endpoint)?;
        acc.pause(&mut spins);
    }
}

/// A dead member of window `w` on this node (its pid), if any: the processes that can hold or
/// wait for a lock word of this node (`lockword`'s "Dead holders").
pub(super) fn dead_member(w: &Window) -> Option<u32> {
    let me = lockword::my_pid();
    // ORDERING: Acquire: the pid each member published at creation (or restore).
    w.targets
        .iter()
        .filter_map(|t| t.local)
        .map(|l| w.control(l).pid.load(Acquire))
        .find(|&p| p != me && lockword::dead(p))
}

/// Acquires the lock of target `t` (window rank).
fn acquire(acc: &mut Access, h: abi::Win, t: u32, kind: LockKind) -> Res<()> {
    let tg = win(acc.st(), h)?.targets[t as usize];
    match (tg.path, tg.local) {
        (Path::Remote, _) | (_, None) => remote::lock(acc, h, t, kind),
        (_, Some(local)) => take_lock(acc, h, local, kind),
    }
}

/// Releases the lock of target `t`, its operations complete.
fn release(acc: &mut Access, h: abi::Win, t: u32, held: Held) -> Res<()> {
    let w = win(acc.st(), h)?;
    let tg = w.targets[t as usize];
    if matches!(tg.path, Path::Remote) || tg.local.is_none() {
        // An unlock completes the target's operations as a flush does (one round trip).
        return if held.nocheck { remote::flush(acc, h, Some(t)) } else { remote::unlock(acc, h, t, held.kind) };
    }
    fence(SeqCst);
    if !held.nocheck
        && let Some(local) = tg.local
    {
        let l = &w.control(local).lock;
        if held.kind == LockKind::Shared { l.unlock_shared() } else { l.unlock_exclusive() }
    }
    Ok(())
}

/// A target rank of a passive-target call: `None` for `MPI_PROC_NULL`.
fn target_of(acc: &mut Access, h: abi::Win, rank: c_int) -> Res<Option<u32>> {
    let n = win(acc.st(), h)?.size();
    if rank == abi::PROC_NULL {
        return Ok(None);
    }
    if rank < 0 || rank as u32 >= n {
        return Err(Fail::new(abi::ERR_RANK, None, Why::Rank { rank, size: n }));
    }
    Ok(Some(rank as u32))
}

/// `MPI_Win_lock`.
pub fn lock(acc: &mut Access, lock_type: c_int, rank: c_int, assert: c_int, h: abi::Win) -> Res<()> {
    super::with(acc, h, |acc| {
        let kind = match lock_type {
            super::LOCK_SHARED => LockKind::Shared,
            super::LOCK_EXCLUSIVE => LockKind::Exclusive,
            _ => return Err(Fail::new(abi::ERR_LOCKTYPE, None, Why::Other(format!("invalid lock type {lock_type}")))),
        };
        check_assert(assert, MODE_NOCHECK)?;
        let Some(t) = target_of(acc, h, rank)? else { return Ok(()) };
        win_mut(acc.st(), h)?.epoch.check_lock(t).map_err(sync_err)?;
        let nocheck = assert & MODE_NOCHECK != 0;
        if !nocheck {
            acquire(acc, h, t, kind)?;
        }
        fence(SeqCst);
        win_mut(acc.st(), h)?.epoch.locks.insert(t, Held { kind, nocheck });
        Ok(())
    })
}

/// `MPI_Win_unlock`.
pub fn unlock(acc: &mut Access, rank: c_int, h: abi::Win) -> Res<()> {
    super::with(acc, h, |acc| {
        let Some(t) = target_of(acc, h, rank)? else { return Ok(()) };
        let Some(held) = win(acc.st(), h)?.epoch.locks.get(&t).copied() else {
            return Err(sync_err("MPI_Win_unlock of a target this process has not locked"));
        };
        release(acc, h, t, held)?;
        win_mut(acc.st(), h)?.epoch.locks.remove(&t);
        Ok(())
    })
}

/// `MPI_Win_lock_all`: a shared lock on every member, in rank order.
pub fn lock_all(acc: &mut Access, assert: c_int, h: abi::Win) -> Res<()> {
    super::with(acc, h, |acc| {
        check_assert(assert, MODE_NOCHECK)?;
        win_mut(acc.st(), h)?.epoch.check_lock_all().map_err(sync_err)?;
        let nocheck = assert & MODE_NOCHECK != 0;
        if !nocheck {
            // The remote targets at once (one round trip), then the node-local ones in order.
            remote::lock_all(acc, h)?;
            for t in 0..win(acc.st(), h)?.size() {
                if !remote::is_remote(&win(acc.st(), h)?.targets[t as usize]) {
                    acquire(acc, h, t, LockKind::Shared)?;
                }
            }
        }
        fence(SeqCst);
        win_mut(acc.st(), h)?.epoch.lock_all = Some(nocheck);
        Ok(())
    })
}

/// `MPI_Win_unlock_all`.
pub fn unlock_all(acc: &mut Access, h: abi::Win) -> Res<()> {
    super::with(acc, h, |acc| {
        let Some(nocheck) = win(acc.st(), h)?.epoch.lock_all else {
            return Err(sync_err("MPI_Win_unlock_all without MPI_Win_lock_all"));
        };
        remote::unlock_all(acc, h, nocheck)?;
        for t in 0..win(acc.st(), h)?.size() {
            if !remote::is_remote(&win(acc.st(), h)?.targets[t as usize]) {
                release(acc, h, t, Held { kind: LockKind::Shared, nocheck })?;
            }
        }
        win_mut(acc.st(), h)?.epoch.lock_all = None;
        Ok(())
    })
}

/// `MPI_Win_flush` (`rank`) and `MPI_Win_flush_all` (`None`): the direct paths completed every
/// operation already; the remote path completes its own at their targets.
pub fn flush(acc: &mut Access, rank: Option<c_int>, h: abi::Win) -> Res<()> {
    flush_as(acc, rank, h, false)
}

/// `MPI_Win_flush_local` (`rank`) and `MPI_Win_flush_local_all` (`None`): as [`flush`], but the
/// remote path completes its operations locally only (no round trip for puts and accumulates).
pub fn flush_local(acc: &mut Access, rank: Option<c_int>, h: abi::Win) -> Res<()> {
    flush_as(acc, rank, h, true)
}

/// A flush, `local` or not.
fn flush_as(acc: &mut Access, rank: Option<c_int>, h: abi::Win, local: bool) -> Res<()> {
    super::with(acc, h, |acc| {
        let t = match rank {
            Some(r) => match target_of(acc, h, r)? {
                Some(t) => Some(t),
                None => return Ok(()),
            },
            None => None,
        };
        let e = &win(acc.st(), h)?.epoch;
        let inside = match t {
            Some(t) => e.passive(t),
            None => e.any_passive(),
        };
        if !inside {
            return Err(sync_err("a flush outside a passive-target epoch"));
        }
        if local {
            remote::flush_local(acc, h, t)?
        } else {
            remote::flush(acc, h, t)?
        }
        fence(SeqCst);
        Ok(())
    })
}

/// `MPI_Win_sync`: a full memory fence (the public and private copies are one: unified model).
pub fn sync(acc: &mut Access, h: abi::Win) -> Res<()> {
    super::with(acc, h, |_| {
        fence(SeqCst);
        Ok(())
    })
}
