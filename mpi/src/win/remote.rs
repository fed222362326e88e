//! The remote path: one-sided communication with targets on another node, or node peers that
//! refused CMA (`Path::Remote`), by **active messages** over the Endpoint on the window's own
//! context, applied by the target's progress.
//!
//! - [`wire`]: the messages (a request: header, the flattened target datatype as spans, data;
//!   a reply: a status and data);
//! - [`origin`]: the origin's operations in flight, their replies and completion;
//! - [`target`]: the target's receipt and application of requests, in arrival order, with the
//!   node-local paths' own kernels ([`apply`]), so accumulates are atomic per element whoever
//!   the origin is;
//! - [`grant`]: the target's FIFO of lock requests, on the same ticket lock node-local origins
//!   take;
//! - `super::progress`: who advances all this (every wait of every call, and a progress thread
//!   while the target computes).
//!
//! Every operation and synchronisation call of the window code reaches a remote target through
//! one of the functions here ([`issue`], [`take_request`], [`lock`], [`unlock`], [`lock_all`],
//! [`unlock_all`], [`flush`], [`flush_local`], [`created`], [`before_free`], [`freed`]) and
//! nowhere else. A window has a [`Remote`] (and the progress thread runs) when any member
//! reaches another by the remote path ([`created`]), so every target a remote origin can name
//! serves it.
//!
//! **Messages per operation.** A `Get`, `Get_accumulate`, `Fetch_and_op` or `Compare_and_swap`
//! is one request and one reply; a `Put` or `Accumulate` one request, held back until the
//! window's next request or synchronisation ([`origin::Tail`]) so that a flush rides in it; a
//! flush of a target with nothing held back, a lock or an unlock one request and one reply.
//! Data of any length is one message: the Endpoint's rendezvous moves the large ones (no split).
//! Tags on the window's context: [`wire::AM_TAG`] and `0x4000_0000 +` id for replies (the
//! window's own notices use small tags: `sync::FIRST_REMOTE_TAG`).

use std::borrow::Cow;
use std::ffi::c_int;

use super::lockword::Kind as LockKind;
use super::rma::{Kind as XKind, Side, Transfer};
use super::{Path, Window};
use crate::abi;
use crate::datatype::Layout;
use crate::error::{Fail, Res, Why};
use crate::state::{Access, State};

pub mod apply;
pub mod grant;
pub mod origin;
pub mod target;
pub mod wire;

use origin::{Into, Op, Origin};
use target::{Incoming, Memory, Target, Then};
use wire::{Kind, Span, Spans};

/// A window's remote-path state at this process: as an origin and as a target.
#[derive(Debug, Default)]
pub struct Remote {
    pub origin: Origin,
    pub target: Target,
    /// Puts, Gets and (where the window may) accumulates by the netmod's RMA, where it has it
    /// ([`super::ofi`]).
    pub ofi: Option<Box<super::ofi::Ofi>>,
}

/// What the remote path of a window still has under way at this process
/// ([`under_way`]: a checkpoint waits for none of it, `crate::ft::image::windows`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum UnderWay {
    /// Operations of this origin: held back, in flight, not yet flushed, or done with a result
    /// not yet taken.
    Origin,
    /// Requests of remote origins: matched and not yet applied, replies being sent, or lock
    /// requests waiting.
    Target,
}

/// What window `w`'s remote path has under way at this process, if anything (the origin's side
/// first); `None` for a window without one.
pub fn under_way(w: &Window) -> Option<UnderWay> {
    let r = w.remote.as_ref()?;
    let o = &r.origin;
    if o.tail.is_some() || !o.ops.is_empty() || !o.dirty.is_empty() || !o.finished.is_empty() {
        return Some(UnderWay::Origin);
    }
    let t = &r.target;
    (!t.incoming.is_empty() || replying(w) || t.locks.is_waiting()).then_some(UnderWay::Target)
}

/// True if this process is still sending replies to remote origins of window `w` (its progress
/// finishes them: `super::progress::advance`).
pub fn replying(w: &Window) -> bool {
    w.remote.as_ref().is_some_and(|r| !r.target.replies.is_empty())
}

/// True if window `w` has a target this process reaches by the remote path.
pub fn reaches_remotely(w: &Window) -> bool {
    w.targets.iter().any(|t| t.path == Path::Remote)
}

/// After window `h` was created (collectively): its remote-path state, and the progress
/// thread, if any member reaches another by the remote path. On a window spanning nodes every
/// member does. On one node only a peer that refused CMA does, which this process cannot see
/// (the refusal is the origin's, whether or not it is mutual): the members of such a window
/// (`MPI_Win_create` or dynamic, every member on this node: the same test everywhere) agree
/// on it first, so a target never leaves an origin's requests unserved.
pub fn created(acc: &mut Access, h: abi::Win) -> Res<()> {
    let w = super::win(acc.st(), h)?;
    let mine = reaches_remotely(w);
    let cma = matches!(w.flavor, abi::WIN_FLAVOR_CREATE | abi::WIN_FLAVOR_DYNAMIC);
    let serve = if cma && w.size() > 1 && w.targets.iter().all(|t| t.local.is_some()) {
        let c = w.comm.clone();
        !super::create::all_agree(acc, &c, !mine)?
    } else {
        mine
    };
    if serve {
        super::win_mut(acc.st(), h)?.remote = Some(Box::default());
        super::progress::register(acc, h);
        super::ofi::created(acc, h)?;
    }
    Ok(())
}

/// Before `MPI_Win_free`'s final barrier: completes every operation of this origin at its
/// target (a fence epoch left open still had puts in flight), then, once the barrier is passed
/// (every origin done with this target), the caller calls [`freed`].
pub fn before_free(acc: &mut Access, h: abi::Win) -> Res<()> {
    flush(acc, h, None)
}

/// Window `h` leaves: the replies still being sent are finished, locks held for remote
/// origins released, and the progress thread stopped with the last such window.
pub fn freed(acc: &mut Access, h: abi::Win) -> Res<()> {
    if super::win(acc.st(), h)?.remote.is_none() {
        return Ok(());
    }
    super::ofi::freed(acc.st(), h);
    // Replies in flight: their buffers must outlive their sends.
    let mut spins = 0;
    loop {
        advance(acc.st(), h);
        let w = super::win(acc.st(), h)?;
        if w.remote.as_ref().is_none_or(|r| r.target.replies.is_empty()) {
            break;
        }
        acc.pause(&mut spins);
    }
    let w = super::win_mut(acc.st(), h)?;
    if let Some(mut r) = w.remote.take() {
        let ctl = w.control(w.local);
        let (held, _never_granted) = r.target.locks.drain();
        for exclusive in held {
            if exclusive { ctl.lock.unlock_exclusive() } else { ctl.lock.unlock_shared() }
        }
    }
    super::progress::unregister(acc, h);
    Ok(())
}

/// The origin's data of side `s` as a layout.
pub(super) fn layout(s: &Side) -> Layout {
    if s.desc.is_dense() {
        Layout::Contig { ptr: s.addr.wrapping_offset(s.desc.first_byte()), len: s.bytes() }
    } else {
        Layout::Typed { base: s.addr, count: s.count, desc: s.desc.clone() }
    }
}

/// The target side of `x` as spans from the target's base (or address 0: dynamic).
fn spans_of(x: &Transfer) -> Vec<Span> {
    let mut s = Spans::default();
    crate::datatype::pack::for_each_block(&x.tside.desc, x.tside.count, |off, len| {
        s.push((x.disp as i64).wrapping_add(off as i64), len as u64);
    });
    s.spans
}

/// The basic element type of the target's data (what accumulates work on).
fn elem_of(x: &Transfer) -> c_int {
    x.tside.desc.leaf.or(x.tside.desc.named).unwrap_or(x.tside.dt)
}

/// The reply an operation waits for: its data length and where the data goes.
type Reply = Option<(usize, Into)>;

/// Issues transfer `x` (already checked) to its remote target: sent now, complete at the next
/// flush or unlock (or once its reply arrived). Its id, for a request.
fn send_transfer(acc: &mut Access, h: abi::Win, x: &Transfer, wanted: bool) -> Res<u32> {
    let spans = spans_of(x);
    let (elem, tbytes) = (elem_of(x), x.tside.bytes());
    // The data: copied into the request message once (borrowed when contiguous, packed when
    // not), so the origin buffer is free as soon as the call returns.
    let (kind, op, data, into): (Kind, c_int, Vec<Cow<[u8]>>, Reply) = match x.kind {
        XKind::Put => (Kind::Put, 0, vec![packed(&x.origin)], None),
        XKind::Get => (Kind::Get, 0, vec![], Some((tbytes, Into::Buffer(layout(&x.origin))))),
        XKind::Acc(op) => (Kind::Acc, op, vec![packed(&x.origin)], None),
        XKind::GetAcc(op) => {
            let d = if op == abi::NO_OP { Cow::Borrowed(&[][..]) } else { packed(&x.origin) };
            let res = x.result.as_ref().map_or(Into::Nothing, |r| Into::Buffer(layout(r)));
            (Kind::GetAcc, op, vec![d], Some((tbytes, res)))
        }
        XKind::Cas => {
            let n = x.tside.desc.size;
            // SAFETY: MPI's contract: the compare and origin buffers hold one element each.
            let (cmp, new) = unsafe {
                (std::slice::from_raw_parts(x.compare, n), std::slice::from_raw_parts(x.origin.addr.cast_const(), n))
            };
            let res = x.result.as_ref().map_or(Into::Nothing, |r| Into::Buffer(layout(r)));
            (Kind::Cas, 0, vec![Cow::Borrowed(cmp), Cow::Borrowed(new)], Some((n, res)))
        }
    };
    let pieces: Vec<&[u8]> = data.iter().map(|d| &d[..]).collect();
    let touches = matches!(kind, Kind::Put | Kind::Acc);
    let make = |id| origin::message(kind, 0, elem, op, id, &spans, &pieces);
    let id = send(acc.st(), h, x.target, make, into, wanted, touches)?;
    if touches {
        remote_mut(acc.st(), h)?.origin.touch(x.target);
    }
    Ok(id)
}

/// The data of origin side `s`: borrowed if contiguous, else packed.
fn packed(s: &Side) -> Cow<'_, [u8]> {
    // SAFETY: MPI's contract: the origin buffer holds the data its layout describes.
    unsafe { super::atomic::packed(s) }
}

/// Issues transfer `x` (already checked) to its remote target. For a request-based call
/// (`x.request`) the call then takes its request with [`take_request`].
pub fn issue(acc: &mut Access, h: abi::Win, x: &Transfer) -> Res<()> {
    if super::ofi::issue(acc.st(), h, x)? {
        return Ok(());
    }
    let id = send_transfer(acc, h, x, x.request)?;
    if x.request {
        remote_mut(acc.st(), h)?.origin.request = Some(id);
    }
    Ok(())
}

/// The request of the request-based operation this call issued to a remote target
/// (`MPI_Rput`...), if it did: it completes when the operation does (locally for `MPI_Rput` and
/// `MPI_Raccumulate`: MPI-4.1 §12.3.5). `None`: the call's operation completed already.
pub fn take_request(acc: &mut Access, h: abi::Win) -> Res<Option<abi::Request>> {
    let Some(id) = super::win_mut(acc.st(), h)?.remote.as_mut().and_then(|r| r.origin.request.take()) else {
        return Ok(None);
    };
    let ext = crate::request::Ext::Rma(Pending { win: h, id });
    let mut r = crate::request::Req::new(0, crate::request::State::Compound, false);
    r.ext = Some(Box::new(ext));
    let q = acc.st().reqs.insert(r).ok_or_else(|| Fail::new(abi::ERR_INTERN, None, Why::Arg("too many requests")))?;
    Ok(Some(q))
}

/// A request-based operation's request (`request::Ext::Rma`): window and op id.
#[derive(Clone, Copy, Debug)]
pub struct Pending {
    pub win: abi::Win,
    pub id: u32,
}

/// Polls request-based op `p`: its completion code once done (a freed window: `MPI_ERR_WIN`).
pub fn poll_request(st: &mut State, p: Pending) -> Option<c_int> {
    if super::win(st, p.win).ok().and_then(|w| w.remote.as_ref()).is_none() {
        return Some(abi::ERR_WIN);
    }
    advance(st, p.win);
    super::ofi::request::poll(st, p.win);
    let r = super::win_mut(st, p.win).ok()?.remote.as_mut()?;
    r.origin.take(p.id)
}

/// The remote state of window `h`.
fn remote_mut(st: &mut State, h: abi::Win) -> Res<&mut Remote> {
    let w = super::win_mut(st, h)?;
    w.remote.as_deref_mut().ok_or_else(|| Fail::new(abi::ERR_INTERN, None, Why::Arg("no remote path state")))
}

/// Sends the request `make(id)` to `target` (window rank), posting the receive of its reply
/// first if `reply` (its data length and destination): the op's id. The held-back request goes
/// first; with `hold` (a `Put` or `Accumulate` not request-based) this one is held back instead
/// ([`origin::Tail`]).
fn send(
    st: &mut State,
    h: abi::Win,
    target: u32,
    make: impl FnOnce(u32) -> Vec<u8>,
    reply: Reply,
    wanted: bool,
    hold: bool,
) -> Res<u32> {
    let phase = st.phase;
    let State { ep, wins, .. } = st;
    let Some(ep) = ep.as_mut() else { return Err(crate::state::not_running(phase)) };
    let w = wins.table.get_mut(h).ok_or_else(|| super::bad_win(h))?;
    let r = w.remote.as_deref_mut().ok_or_else(|| Fail::new(abi::ERR_INTERN, None, Why::Arg("no remote state")))?;
    let id = r.origin.next_id();
    let msg = make(id);
    if let Some(t) = r.origin.tail.take() {
        post(ep, &w.targets, w.comm.ctx, &mut r.origin, t, None)?;
    }
    let op = origin::Tail { target, id, msg };
    if hold && !wanted {
        r.origin.tail = Some(op);
        return Ok(id);
    }
    post(ep, &w.targets, w.comm.ctx, &mut r.origin, op, reply)?;
    if wanted && let Some(o) = r.origin.ops.last_mut() {
        o.wanted = true;
    }
    Ok(id)
}

/// Sends request `op` on context `ctx` (its reply's receive posted first if `reply`) and
/// records it in flight.
fn post(
    ep: &mut nemesis::Endpoint,
    targets: &[super::Target],
    ctx: u32,
    o: &mut Origin,
    op: origin::Tail,
    reply: Reply,
) -> Res<()> {
    let origin::Tail { target, id, msg } = op;
    let job = targets[target as usize].job;
    let endpoint = |e| Fail::new(crate::error::code_of(&e), None, Why::Endpoint(e));
    let reply = match reply {
        Some((len, into)) => {
            let mut buf = vec![0u8; wire::REPLY_HEADER + len];
            // SAFETY: `buf`'s heap block stays with the op (moving the Vec does not move it)
            // until the receive completed (`Origin::poll`).
            let rq = unsafe { ep.irecv_raw(buf.as_mut_ptr(), buf.len(), job as i32, wire::reply_tag(id), ctx) }
                .map_err(endpoint)?;
            Some((rq, buf, into))
        }
        None => None,
    };
    // SAFETY: `msg` stays with the op until the send completed (`Origin::poll`).
    let sq = unsafe { ep.isend_raw(msg.as_ptr(), msg.len(), job, wire::AM_TAG, ctx) }.map_err(endpoint)?;
    o.ops.push(Op { id, target, send: Some((sq, msg)), reply, wanted: false, code: abi::SUCCESS });
    Ok(())
}

/// Waits until `done(origin state)`, advancing the remote path (and everything a pause does)
/// meanwhile; then reports the first error the target found, if any.
fn wait(acc: &mut Access, h: abi::Win, mut done: impl FnMut(&Origin) -> bool) -> Res<()> {
    let mut spins = 0;
    loop {
        advance(acc.st(), h);
        let r = remote_mut(acc.st(), h)?;
        if done(&r.origin) {
            let code = r.origin.take_error();
            if code != abi::SUCCESS {
                let why = Why::Arg(match code {
                    abi::ERR_RMA_RANGE => "a target found the range of an operation outside its window",
                    abi::ERR_SIZE => "a target refused a reply past its limit (its window's size, at least 64 MiB)",
                    abi::ERRX_PROC_FAILED => "a process that may hold the target's lock died",
                    _ => "a remote target refused an operation",
                });
                return Err(Fail::new(code, None, why));
            }
            return Ok(());
        }
        acc.pause(&mut spins);
    }
}

/// Sends synchronisation `kind` (with `flags`) to each of targets `ts` at once and waits for
/// every reply (and every op to them before it).
fn sync_targets(acc: &mut Access, h: abi::Win, ts: &[u32], kind: Kind, flags: u8) -> Res<()> {
    if ts.is_empty() {
        return Ok(());
    }
    for &t in ts {
        let make = |id| origin::message(kind, flags, 0, 0, id, &[], &[]);
        send(acc.st(), h, t, make, Some((0, Into::Nothing)), false, false)?;
        if kind != Kind::Lock {
            remote_mut(acc.st(), h)?.origin.dirty.retain(|&d| d != t);
        }
    }
    wait(acc, h, |o| ts.iter().all(|&t| o.quiet(Some(t), false)))
}

/// True if target `tg` is reached by the remote path for synchronisation (its lock word is
/// not in this node's segment).
pub fn is_remote(tg: &super::Target) -> bool {
    tg.path == Path::Remote || tg.local.is_none()
}

/// The remote targets of window `h` (window ranks).
fn remote_targets(st: &State, h: abi::Win) -> Res<Vec<u32>> {
    let w = super::win(st, h)?;
    Ok((0..w.size()).filter(|&t| is_remote(&w.targets[t as usize])).collect())
}

/// `MPI_Win_lock_all`'s part on the remote targets: a shared lock requested of each at once,
/// granted when every one answered.
pub fn lock_all(acc: &mut Access, h: abi::Win) -> Res<()> {
    let ts = remote_targets(acc.st(), h)?;
    sync_targets(acc, h, &ts, Kind::Lock, 0)
}

/// `MPI_Win_unlock_all`'s part on the remote targets: every one unlocked at once (or, taken
/// with `MPI_MODE_NOCHECK`, flushed), complete when every one answered.
pub fn unlock_all(acc: &mut Access, h: abi::Win, nocheck: bool) -> Res<()> {
    if nocheck {
        return flush(acc, h, None);
    }
    super::ofi::flush(acc, h, None)?;
    let ts = remote_targets(acc.st(), h)?;
    sync_targets(acc, h, &ts, Kind::Unlock, 0)
}

/// Takes the passive-target lock of remote target `t` (window rank): returns once granted.
pub fn lock(acc: &mut Access, h: abi::Win, t: u32, kind: LockKind) -> Res<()> {
    let flags = if kind == LockKind::Exclusive { wire::EXCLUSIVE } else { 0 };
    sync_targets(acc, h, &[t], Kind::Lock, flags)
}

/// Releases the lock of remote target `t` once every operation to it completed there.
pub fn unlock(acc: &mut Access, h: abi::Win, t: u32, kind: LockKind) -> Res<()> {
    let _ = kind;
    super::ofi::flush(acc, h, Some(t))?;
    sync_targets(acc, h, &[t], Kind::Unlock, 0)
}

/// Completes every operation issued to remote target `t` (`None`: to every target) at the
/// target (`MPI_Win_flush*`, and before a fence, `MPI_Win_complete` and `MPI_Win_unlock_all`).
pub fn flush(acc: &mut Access, h: abi::Win, t: Option<u32>) -> Res<()> {
    if super::win(acc.st(), h)?.remote.is_none() {
        return Ok(());
    }
    super::ofi::flush(acc, h, t)?;
    flush_tail(acc.st(), h, t)?;
    let r = remote_mut(acc.st(), h)?;
    let dirty: Vec<u32> = r.origin.dirty.iter().copied().filter(|&d| t.is_none_or(|t| t == d)).collect();
    for d in dirty {
        let make = |id| origin::message(Kind::Flush, 0, 0, 0, id, &[], &[]);
        send(acc.st(), h, d, make, Some((0, Into::Nothing)), false, false)?;
        remote_mut(acc.st(), h)?.origin.dirty.retain(|&x| x != d);
    }
    wait(acc, h, |o| o.quiet(t, false))
}

/// Sends the held-back request, if its target is `t` (or any: `None`), with the flush of its
/// target in it (its reply then says all before it is applied there).
fn flush_tail(st: &mut State, h: abi::Win, t: Option<u32>) -> Res<()> {
    let phase = st.phase;
    let State { ep, wins, .. } = st;
    let Some(ep) = ep.as_mut() else { return Err(crate::state::not_running(phase)) };
    let w = wins.table.get_mut(h).ok_or_else(|| super::bad_win(h))?;
    let Some(r) = w.remote.as_deref_mut() else { return Ok(()) };
    let Some(mut tail) = r.origin.tail.take_if(|tl| t.is_none_or(|t| t == tl.target)) else { return Ok(()) };
    wire::mark_flush(&mut tail.msg);
    let target = tail.target;
    post(ep, &w.targets, w.comm.ctx, &mut r.origin, tail, Some((0, Into::Nothing)))?;
    r.origin.dirty.retain(|&d| d != target);
    Ok(())
}

/// Completes locally every operation issued to remote target `t` (`None`: all): their origin
/// buffers may be reused (`MPI_Win_flush_local*`).
pub fn flush_local(acc: &mut Access, h: abi::Win, t: Option<u32>) -> Res<()> {
    if super::win(acc.st(), h)?.remote.is_none() {
        return Ok(());
    }
    super::ofi::flush_local(acc, h, t)?;
    wait(acc, h, |o| o.quiet(t, true))
}

/// Advances window `h`'s remote path once (origin and target): true if anything moved.
pub fn advance(st: &mut State, h: abi::Win) -> bool {
    let State { ep, wins, .. } = st;
    let (Some(ep), Some(w)) = (ep.as_mut(), wins.table.get_mut(h)) else { return false };
    let Some(mut r) = w.remote.take() else { return false };
    let moved = r.origin.poll(ep) | serve(ep, w, &mut r.target);
    w.remote = Some(r);
    moved
}

/// The target's work: replies sent, new requests received, arrived ones applied in order,
/// waiting locks granted. True if anything moved.
fn serve(ep: &mut nemesis::Endpoint, w: &Window, t: &mut Target) -> bool {
    let ctx = w.comm.ctx;
    let mut moved = false;
    t.replies.retain(|(r, _)| !matches!(ep.test(*r), Ok(Some(_)) | Err(_)));
    // Match what arrived, in order (a bounded number per pass: the caller's loop comes back).
    for _ in 0..64 {
        let Ok(Some((msg, s))) = ep.improbe(nemesis::ANY_SOURCE, wire::AM_TAG, ctx) else { break };
        let mut buf = t.buffer(s.source, s.len);
        // SAFETY: `buf`'s heap block stays in `incoming` until the receive completed.
        match unsafe { ep.imrecv_raw(msg, buf.as_mut_ptr(), buf.len()) } {
            Ok(req) => t.incoming.push_back(Incoming { req, buf, origin: s.source, arrived: false }),
            Err(_) => break,
        }
        moved = true;
    }
    let mem = memory(w);
    while let Some(head) = t.incoming.front_mut() {
        if !head.arrived {
            match ep.test(head.req) {
                Ok(None) => break,
                Ok(Some(_)) => head.arrived = true,
                Err(_) => {
                    t.incoming.pop_front();
                    continue;
                }
            }
        }
        if !t.room_for_head() {
            break;
        }
        let Some(m) = t.incoming.pop_front() else { break };
        moved = true;
        match t.apply(&mem, m.origin, &m.buf) {
            Then::Nothing => {}
            Then::Reply(id, data) => reply(ep, t, m.origin, id, data, ctx),
            Then::Lock(wt) => t.locks.push(wt),
        }
    }
    if t.locks.is_waiting() {
        let ctl = w.control(w.local);
        let granted = t
            .locks
            .grant(|wt| if wt.exclusive { ctl.lock.try_exclusive(wt.ticket) } else { ctl.lock.try_shared(wt.ticket) });
        for g in granted {
            moved = true;
            reply(ep, t, g.origin, g.id, wire::reply(abi::SUCCESS, &[]), ctx);
        }
        if t.locks.stuck() && super::sync::dead_member(w).is_some() {
            for g in t.locks.abandon() {
                reply(ep, t, g.origin, g.id, wire::reply(abi::ERRX_PROC_FAILED, &[]), ctx);
            }
        }
    }
    moved
}

/// Sends reply `data` to request `id` of `origin` (job rank); its buffer kept until sent.
fn reply(ep: &mut nemesis::Endpoint, t: &mut Target, origin: u32, id: u32, data: Vec<u8>, ctx: u32) {
    // SAFETY: `data` is kept in `t.replies` until the send completed.
    if let Ok(r) = unsafe { ep.isend_raw(data.as_ptr(), data.len(), origin, wire::reply_tag(id), ctx) } {
        t.replies.push((r, data));
    }
}

/// This process's window memory as requests may touch it.
fn memory(w: &Window) -> Memory<'_> {
    let me = &w.targets[w.rank() as usize];
    let dynamic = w.flavor == abi::WIN_FLAVOR_DYNAMIC;
    let bounds = target::Bounds { base: w.base, size: me.size, regions: dynamic.then_some(&w.regions[..]) };
    Memory { bounds, ctl: w.control(w.local), w }
}
