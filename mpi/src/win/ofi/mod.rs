//! `MPI_Put` and `MPI_Get` (and `MPI_Rput`, `MPI_Rget`) to targets on other nodes by the
//! netmod's RMA (`fi_write`, `fi_read`), where the libfabric netmod to them has it: no active
//! message, no work of the target's MPI library per operation (its provider's progress only,
//! which its progress thread makes while it computes). Accumulates by the provider's atomics
//! where a window may use them: [`atomic`] (its rule); requests: [`request`].
//!
//! At creation of a window that has the remote path ([`super::remote::created`]), each member
//! exposes its window memory (`MPI_Win_create`, `MPI_Win_allocate`; not dynamic windows, whose
//! regions come and go) where its netmod has RMA, and one allgather gives every member each
//! one's key ([`nemesis::rma::RmaKey`]), and whether the window uses the provider's atomics. A
//! `Put` or `Get` to a target with a key goes here from [`super::remote::issue`], block by block
//! of the target's layout (the origin's data packed once); dynamic windows and
//! `NEMESIS_OFI_RMA=off` stay on the active messages, as do accumulates unless [`atomic`]'s rule
//! lets the window use the provider's atomics (they are not atomic with node-local origins' CPU
//! atomics).
//!
//! Completion: [`flush`] waits until the netmod reports every operation to the targets flushed
//! (writes complete on delivery where the provider has it), then unpacks gets; it runs first in
//! every flush, unlock, fence and complete of the remote path, before its active-message flush
//! (sent only to targets that also got active messages).
//!
//! Invariants: an operation is posted only within the target's window (its range checked by
//! `rma::prepare`, and again against the key's length by the netmod); the packed data of puts
//! and the landing buffers of gets live in [`Ofi`] until the flush of their target; this
//! process's region is withdrawn only after `MPI_Win_free`'s barrier (no member reaches it
//! any more).

use nemesis::rma::RmaKey;

use super::remote::Remote;
use super::rma::{Kind as XKind, Transfer};
use super::{Path, Window};
use crate::abi;
use crate::datatype::{Layout, pack};
use crate::error::{Fail, Res, Why};
use crate::state::{Access, State, not_running};

pub mod atomic;
pub mod request;

/// A window's RMA state at this process.
#[derive(Debug, Default)]
pub struct Ofi {
    /// The region this process exposed, if it did.
    pub exposed: Option<u32>,
    /// Each member's key, where this process reaches it by RMA.
    pub keys: Vec<Option<RmaKey>>,
    /// Targets (window ranks) with operations posted since their last flush.
    pub dirty: Vec<u32>,
    /// Puts' packed data, by target, until its flush.
    pub held: Vec<(u32, Vec<u8>)>,
    /// Gets' landing buffers, by target, and where their data goes at the flush.
    pub gets: Vec<(u32, Vec<u8>, Layout)>,
    /// Request-based operations with a result, by id, and their target ([`request`]).
    pub reqs: Vec<(u32, u32)>,
    /// The types (a bit per `FiType`) whose accumulates go by the provider's atomics, the same
    /// at every member (0: none, [`atomic`]'s rule), and the provider's most elements per atomic.
    pub nic: u16,
    pub counts: atomic::Counts,
    /// Bytes put and got by RMA, and atomics posted, through this window (logged at its free).
    pub put_bytes: u64,
    pub got_bytes: u64,
    pub atomics: u64,
}

/// True if window `w` uses the provider's atomics (`nemesis_nic_atomics` in force).
pub fn nic_atomics(w: &Window) -> bool {
    w.remote.as_deref().and_then(|r| r.ofi.as_deref()).is_some_and(|o| o.nic != 0)
}

/// True unless `NEMESIS_OFI_RMA=off` (every Put and Get then goes by active messages).
fn wanted() -> bool {
    std::env::var("NEMESIS_OFI_RMA").map_or(true, |v| v.trim() != "off")
}

/// Collective over window `h`'s members, after [`super::remote::created`] gave it a remote
/// state: exposes this process's window memory where the netmod has RMA and gathers every
/// member's key.
pub fn created(acc: &mut Access, h: abi::Win) -> Res<()> {
    let w = super::win(acc.st(), h)?;
    if w.flavor == abi::WIN_FLAVOR_DYNAMIC {
        return Ok(());
    }
    let (base, size, c, me) = (w.base, w.targets[w.rank() as usize].size, w.comm.clone(), w.rank() as usize);
    let jobs: Vec<(u32, bool)> = w.targets.iter().map(|t| (t.job, t.path == Path::Remote)).collect();
    // Atomics' rule: no other member on this node, and not refused by the info key.
    let alone = w.targets.iter().enumerate().all(|(i, t)| i == me || t.local.is_none());
    let nic_wanted = alone && w.hints.nic_atomics != Some(false);
    let st = acc.st();
    let phase = st.phase;
    let Some(ep) = st.ep.as_mut() else { return Err(not_running(phase)) };
    let usable = wanted() && jobs.iter().any(|&(j, remote)| remote && ep.rma_caps(j).is_some_and(|c| c.write));
    // [has a key, may use atomics, covered types (2 bytes), key]
    let mut mine = [0u8; 4 + RmaKey::BYTES];
    let mut exposed = None;
    if usable && size > 0 {
        // SAFETY: the window's memory, valid until the window is freed, where `freed` withdraws
        // it after the last member's access (MPI_Win_free's barrier).
        if let Ok(Some(r)) = unsafe { ep.rma_expose(base as *mut u8, size) } {
            mine[0] = 1;
            mine[4..].copy_from_slice(&r.key.to_bytes());
            exposed = Some(r.id);
        }
    }
    let can = usable
        && nic_wanted
        && (size == 0 || exposed.is_some())
        && jobs.iter().any(|&(j, _)| ep.rma_caps(j).is_some_and(|c| c.atomic))
        && ep.rma_loopback();
    let counts = if can { atomic::Counts::of(ep) } else { atomic::Counts::default() };
    mine[1] = u8::from(can);
    mine[2..4].copy_from_slice(&atomic::covered(&counts).to_le_bytes());
    let tu = acc.st().tuning;
    let all = crate::coll::allgather_bytes(acc, &c, &tu, &mine)?;
    let each = || all.chunks(mine.len());
    let nic =
        if each().all(|b| b[1] == 1) { each().fold(u16::MAX, |m, b| m & u16::from_le_bytes([b[2], b[3]])) } else { 0 };
    let keys = each()
        .zip(&jobs)
        .enumerate()
        .map(|(i, (b, &(_, remote)))| {
            let reached = remote || (nic != 0 && i == me);
            (usable && reached && b[0] == 1).then(|| RmaKey::from_bytes(&b[4..])).flatten()
        })
        .collect::<Vec<_>>();
    tracing::debug!(nic = format_args!("{nic:#x}"), "window created: types whose accumulates go by provider atomics");
    if let Some(r) = super::win_mut(acc.st(), h)?.remote.as_deref_mut() {
        r.ofi = Some(Box::new(Ofi { exposed, keys, nic, counts, ..Ofi::default() }));
    } else if let (Some(id), Some(ep)) = (exposed, acc.st().ep.as_mut()) {
        ep.rma_withdraw(id);
    }
    Ok(())
}

/// Window `h` leaves (after `MPI_Win_free`'s barrier): this process's region is withdrawn.
pub fn freed(st: &mut State, h: abi::Win) {
    let State { ep, wins, .. } = st;
    let Some(w) = wins.table.get_mut(h) else { return };
    let Some(o) = w.remote.as_deref_mut().and_then(|r| r.ofi.take()) else { return };
    let keys = o.keys.iter().filter(|k| k.is_some()).count();
    tracing::debug!(
        put = o.put_bytes,
        got = o.got_bytes,
        atomics = o.atomics,
        targets = keys,
        "window freed: bytes moved by netmod RMA"
    );
    if let (Some(id), Some(ep)) = (o.exposed, ep.as_mut()) {
        ep.rma_withdraw(id);
    }
}

pub(super) fn endpoint(e: nemesis::error::Error) -> Fail {
    Fail::new(crate::error::code_of(&e), None, Why::Endpoint(e))
}

/// Carries out `x` (checked) by RMA if it is a Put or Get (request-based or not) to a target
/// with a key: false if it is not for this path.
pub fn issue(st: &mut State, h: abi::Win, x: &Transfer) -> Res<bool> {
    if !matches!(x.kind, XKind::Put | XKind::Get) {
        return Ok(false);
    }
    let phase = st.phase;
    let State { ep, wins, .. } = st;
    let Some(ep) = ep.as_mut() else { return Err(not_running(phase)) };
    let w = wins.table.get_mut(h).ok_or_else(|| super::bad_win(h))?;
    let job = w.targets[x.target as usize].job;
    let Some(r) = w.remote.as_deref_mut() else { return Ok(false) };
    let Some(o) = r.ofi.as_deref_mut() else { return Ok(false) };
    let Some(key) = o.keys.get(x.target as usize).copied().flatten() else { return Ok(false) };
    if w.targets[x.target as usize].path != Path::Remote {
        return Ok(false);
    }
    let put = x.kind == XKind::Put;
    let mut data = if put {
        // SAFETY: MPI's contract: the origin buffer holds the data its layout describes.
        unsafe { super::remote::layout(&x.origin).packed() }
    } else {
        vec![0u8; x.tside.bytes()]
    };
    let mut at = 0usize;
    let mut posted = Ok(());
    pack::for_each_block(&x.tside.desc, x.tside.count, |off, len| {
        if posted.is_err() {
            return;
        }
        let disp = (x.disp as i64).wrapping_add(off as i64) as u64;
        // SAFETY: `data` holds the packed data (`tside.bytes()` bytes, the blocks' sum); its heap
        // block stays in `o.held`/`o.gets` until the target's flush.
        posted = unsafe {
            let p = data.as_mut_ptr().add(at);
            if put { ep.rma_write(job, p, len, &key, disp) } else { ep.rma_read(job, p, len, &key, disp) }
        };
        at += len;
    });
    // Posted blocks name `data`: it is kept even on an error (its flush frees it).
    if put {
        o.put_bytes += data.len() as u64;
        o.held.push((x.target, data));
    } else {
        o.got_bytes += data.len() as u64;
        o.gets.push((x.target, data, super::remote::layout(&x.origin)));
    }
    if !o.dirty.contains(&x.target) {
        o.dirty.push(x.target);
    }
    request::record(r, x, put);
    posted.map_err(endpoint)?;
    Ok(true)
}

/// Completes every RMA operation to target `t` (`None`: to every target) of window `h`: waits
/// for the netmod's completions (serving the window's active messages meanwhile), then unpacks
/// the gets.
pub fn flush(acc: &mut Access, h: abi::Win, t: Option<u32>) -> Res<()> {
    let Some(o) = super::win(acc.st(), h)?.remote.as_deref().and_then(|r| r.ofi.as_deref()) else { return Ok(()) };
    let ts: Vec<u32> = o.dirty.iter().copied().filter(|&d| t.is_none_or(|t| t == d)).collect();
    if ts.is_empty() {
        return Ok(());
    }
    let jobs: Vec<u32> = {
        let w = super::win(acc.st(), h)?;
        ts.iter().map(|&d| w.targets[d as usize].job).collect()
    };
    let mut spins = 0;
    let mut result = Ok(());
    for &job in &jobs {
        loop {
            let st = acc.st();
            let phase = st.phase;
            let Some(ep) = st.ep.as_mut() else { return Err(not_running(phase)) };
            match ep.rma_flushed(job) {
                Ok(true) => break,
                Ok(false) => {}
                Err(e) => {
                    result = Err(endpoint(e));
                    break;
                }
            }
            super::remote::advance(acc.st(), h);
            acc.pause(&mut spins);
        }
    }
    let code = match &result {
        Ok(()) => abi::SUCCESS,
        Err(f) => f.code,
    };
    if let Some(r) = super::win_mut(acc.st(), h)?.remote.as_deref_mut() {
        settle(r, &ts, code);
    }
    result
}

/// Completes locally the RMA operations to target `t` (`None`: every target) of window `h`
/// (`MPI_Win_flush_local*`): only the targets with reads or fetching atomics pending are
/// flushed; puts' and plain accumulates' data is packed already (the origin buffer is free),
/// so they are left to complete at the next flush.
pub fn flush_local(acc: &mut Access, h: abi::Win, t: Option<u32>) -> Res<()> {
    let Some(o) = super::win(acc.st(), h)?.remote.as_deref().and_then(|r| r.ofi.as_deref()) else { return Ok(()) };
    let mut ts: Vec<u32> = o.gets.iter().map(|g| g.0).filter(|&d| t.is_none_or(|t| t == d)).collect();
    ts.sort_unstable();
    ts.dedup();
    for d in ts {
        flush(acc, h, Some(d))?;
    }
    Ok(())
}

/// The RMA operations to targets `ts` completed (with MPI error class `code`): their buffers
/// released, gets' and fetching atomics' data unpacked (unless `code` is an error), their
/// requests done.
pub fn settle(r: &mut Remote, ts: &[u32], code: std::ffi::c_int) {
    let Some(o) = r.ofi.as_deref_mut() else { return };
    o.dirty.retain(|d| !ts.contains(d));
    o.held.retain(|(d, _)| !ts.contains(d));
    let mut k = 0;
    while k < o.gets.len() {
        if !ts.contains(&o.gets[k].0) {
            k += 1;
            continue;
        }
        let (_, data, into) = o.gets.swap_remove(k);
        if code != abi::SUCCESS {
            continue;
        }
        match into {
            Layout::Contig { ptr, len } => {
                // SAFETY: MPI's contract: the origin buffer holds `len` writable bytes until the
                // operation completes (now); `data` is our landing buffer.
                unsafe { std::ptr::copy_nonoverlapping(data.as_ptr(), ptr, len.min(data.len())) };
            }
            Layout::Typed { base, count, desc } => {
                // SAFETY: as above, element by element.
                unsafe { pack::unpack(&desc, base, count, &data) };
            }
        }
    }
    let done: Vec<u32> = o.reqs.iter().filter(|(_, t)| ts.contains(t)).map(|&(id, _)| id).collect();
    o.reqs.retain(|(_, t)| !ts.contains(t));
    r.origin.finished.extend(done.into_iter().map(|id| (id, code)));
}
