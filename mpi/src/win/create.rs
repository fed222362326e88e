//! Window creation and `MPI_Win_free` (MPI-4.1 §12.2): the four flavours (`MPI_Win_create`,
//! `MPI_Win_allocate`, `MPI_Win_allocate_shared`, `MPI_Win_create_dynamic`, and the `_c`
//! forms) share one collective sequence:
//!
//! 1. a context pair for the window's private communicator (as `MPI_Comm_dup` agrees on one);
//! 2. one allgather of every member's [`Record`] (size, displacement unit, base, pid, node, FT
//!    group, and whether its arguments were valid): every member then decides alike whether
//!    the creation fails (a bad argument anywhere, `MPI_Win_allocate_shared` across nodes, a
//!    window across fault-tolerance groups) and can bounds-check every target;
//! 3. the node's segment ([`super::segment`]): created by the node's lowest member, then an
//!    agreement on the outcome, opened by the others, an agreement again, and the name
//!    unlinked. A failure anywhere (a full `/dev/shm`) is `MPI_ERR_NO_MEM` at every member, with
//!    nothing left behind.
//!
//! A failed creation releases its context and mappings; the error goes to the communicator's
//! handler.

use std::ffi::{c_int, c_void};
use std::sync::Arc;

use super::allocmem;
use super::segment::{self, Mapping};
use super::{AttrValues, Epoch, Hints, Path, Target, Window};
use crate::abi::{self, Aint};
use crate::comm::{Comm, context};
use crate::error::{Fail, Res, Why};
use crate::p2p::intra_at;
use crate::state::{Access, not_running};

/// What each member tells the others at creation.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
struct Record {
    size: u64,
    disp_unit: u64,
    base: u64,
    pid: u32,
    node: u32,
    /// Fault-tolerance group (`u32::MAX`: FT off).
    ft_group: u32,
    /// 0, or the error class of this member's invalid arguments.
    err: i32,
    /// An address in this process that CMA may read (the probe of [`cma_allowed`]).
    probe: u64,
    /// 1 if this member asked for `alloc_shared_noncontig` (any member's request holds for all:
    /// every member must compute the same layout).
    noncontig: u32,
    /// `MPI_Win_create` over `MPI_Alloc_mem` memory: the block's descriptor here (-1: none)
    /// and the window's offset in it ([`super::allocmem`]: node peers map it).
    memfd: i32,
    moff: u64,
}

const RECORD: usize = 64;

impl Record {
    fn bytes(&self) -> [u8; RECORD] {
        let mut b = [0u8; RECORD];
        b[0..8].copy_from_slice(&self.size.to_le_bytes());
        b[8..16].copy_from_slice(&self.disp_unit.to_le_bytes());
        b[16..24].copy_from_slice(&self.base.to_le_bytes());
        b[24..28].copy_from_slice(&self.pid.to_le_bytes());
        b[28..32].copy_from_slice(&self.node.to_le_bytes());
        b[32..36].copy_from_slice(&self.ft_group.to_le_bytes());
        b[36..40].copy_from_slice(&self.err.to_le_bytes());
        b[40..48].copy_from_slice(&self.probe.to_le_bytes());
        b[48..52].copy_from_slice(&self.noncontig.to_le_bytes());
        b[52..56].copy_from_slice(&self.memfd.to_le_bytes());
        b[56..64].copy_from_slice(&self.moff.to_le_bytes());
        b
    }

    fn of(b: &[u8]) -> Record {
        let u64_at = |i: usize| u64::from_le_bytes(b[i..i + 8].try_into().unwrap_or_default());
        let u32_at = |i: usize| u32::from_le_bytes(b[i..i + 4].try_into().unwrap_or_default());
        Record {
            size: u64_at(0),
            disp_unit: u64_at(8),
            base: u64_at(16),
            pid: u32_at(24),
            node: u32_at(28),
            ft_group: u32_at(32),
            err: u32_at(36) as i32,
            probe: u64_at(40),
            noncontig: u32_at(48),
            memfd: u32_at(52) as i32,
            moff: u64_at(56),
        }
    }
}

/// A byte CMA probes read (its address goes to the peers).
static PROBE: u8 = 0x5a;

/// True if this process may read process `pid`'s memory by CMA (same user, ptrace scope).
fn cma_allowed(pid: u32, addr: u64) -> bool {
    let mut b = [0u8; 1];
    let local = libc::iovec { iov_base: b.as_mut_ptr().cast(), iov_len: 1 };
    let remote = libc::iovec { iov_base: addr as usize as *mut c_void, iov_len: 1 };
    // SAFETY: `local` is our own one-byte buffer; the kernel checks `remote` and our permission.
    let n = unsafe { libc::process_vm_readv(pid as libc::pid_t, &local, 1, &remote, 1, 0) };
    n == 1 && b[0] == PROBE
}

/// What the creation call was given.
#[derive(Clone, Copy, Debug)]
pub struct Args {
    pub flavor: c_int,
    /// `MPI_Win_create`'s base.
    pub base: *mut c_void,
    pub size: Aint,
    pub disp_unit: Aint,
    pub info: abi::Info,
    pub comm: abi::Comm,
    /// `MPI_Win_allocate*`'s `void *baseptr` (a `void **`).
    pub baseptr: *mut c_void,
    pub out: *mut abi::Win,
}

/// This member's own argument error, if any (decided before the collective part, reported
/// by every member after it).
fn check_args(a: &Args) -> Option<(c_int, &'static str)> {
    let alloc = a.flavor == abi::WIN_FLAVOR_ALLOCATE || a.flavor == abi::WIN_FLAVOR_SHARED;
    if a.out.is_null() {
        return Some((abi::ERR_ARG, "null window pointer"));
    }
    if a.flavor != abi::WIN_FLAVOR_DYNAMIC {
        if a.size < 0 {
            return Some((abi::ERR_SIZE, "negative window size"));
        }
        if a.disp_unit <= 0 || a.disp_unit > c_int::MAX as Aint {
            return Some((abi::ERR_DISP, "the displacement unit must be positive"));
        }
    }
    if alloc && a.baseptr.is_null() {
        return Some((abi::ERR_ARG, "null baseptr"));
    }
    if a.flavor == abi::WIN_FLAVOR_CREATE && a.base.is_null() && a.size > 0 {
        return Some((abi::ERR_BASE, "null base with a positive size"));
    }
    None
}

/// Sets hint `k` to `v` if this library reads it (other keys are ignored, MPI-4.1 §10).
pub fn apply_hint(h: &mut Hints, k: &str, v: String) {
    let yes = v.trim() == "true";
    match k {
        "no_locks" => h.no_locks = yes,
        "accumulate_ordering" => h.accumulate_ordering = v,
        "accumulate_ops" => h.accumulate_ops = v,
        "same_size" => h.same_size = yes,
        "same_disp_unit" => h.same_disp_unit = yes,
        "alloc_shared_noncontig" => h.alloc_shared_noncontig = yes,
        "nemesis_nic_atomics" => h.nic_atomics = Some(yes),
        _ => {}
    }
}

/// The hints of info `info`.
fn hints(acc: &mut Access, info: abi::Info) -> Res<Hints> {
    let mut h = Hints {
        accumulate_ordering: "rar,raw,war,waw".into(),
        accumulate_ops: "same_op_no_op".into(),
        ..Hints::default()
    };
    if info == abi::INFO_NULL {
        return Ok(h);
    }
    for (k, v) in crate::info::contents(acc.st(), info)? {
        apply_hint(&mut h, &k, v);
    }
    Ok(h)
}

/// Allgathers one flag over `c`: true if every member's is (the agreement steps; also a
/// barrier).
pub fn all_agree(acc: &mut Access, c: &Comm, ok: bool) -> Res<bool> {
    let tu = acc.st().tuning;
    let all = crate::coll::allgather_bytes(acc, c, &tu, &[u8::from(ok)])?;
    Ok(all.iter().all(|&b| b == 1))
}

/// The window's segment on this node: created, agreed on, opened, agreed on, unlinked.
/// `None`: it failed somewhere (at every member alike).
fn node_segment(
    acc: &mut Access,
    c: &Comm,
    recs: &[Record],
    locals: &[u32],
    sizes: &[usize],
    align: usize,
) -> Res<Option<(Mapping, Vec<usize>)>> {
    let me = c.rank;
    let lay = segment::layout(sizes, align);
    let n = locals.len() as u32;
    let leader = locals[0];
    let name = segment::name(recs[leader as usize].pid, c.ctx);
    let shared = locals.len() > 1;
    // Round 1: the leader creates (or this member maps privately, alone on its node).
    let mut map = match (&lay, leader == me) {
        (Some((_, len)), true) if shared => Mapping::create(&name, *len, n).ok(),
        (Some((_, len)), true) => Mapping::private(*len, n).ok(),
        _ => None,
    };
    let created = leader != me || map.is_some();
    if !all_agree(acc, c, created && lay.is_some())? {
        if leader == me && shared && map.is_some() {
            segment::unlink(&name);
        }
        return Ok(None);
    }
    // Round 2: the others open it.
    if leader != me
        && let Some((_, len)) = &lay
    {
        map = Mapping::open(&name, *len, n).ok();
    }
    let ok = all_agree(acc, c, map.is_some())?;
    if leader == me && shared {
        segment::unlink(&name);
    }
    match (ok, map, lay) {
        (true, Some(m), Some((offs, _))) => Ok(Some((m, offs))),
        _ => Ok(None),
    }
}

/// `MPI_Win_create`, `MPI_Win_allocate`, `MPI_Win_allocate_shared`, `MPI_Win_create_dynamic`
/// (and the `_c` forms): see the module doc.
///
/// # Safety
/// The pointers of `a` null or valid as MPI says (`out` writable, `baseptr` a writable
/// `void **`).
pub unsafe fn create(acc: &mut Access, a: Args) -> Res<()> {
    let st = acc.st();
    if st.ep.is_none() {
        return Err(not_running(st.phase));
    }
    let (ci, parent) = intra_at(&st.comms, a.comm)?;
    let (parent, tu) = (parent.clone(), st.tuning);
    let own_err = check_args(&a);
    let hints = hints(acc, a.info).map_err(|e| e.on(ci))?;
    // 1. The private communicator's context.
    let ctx = context::agree(acc, ci, &parent, &tu).map_err(|e| e.on(ci))?;
    let st = acc.st();
    let Some(ep) = st.ep.as_ref() else { return Err(not_running(st.phase)) };
    let (me_job, job_size, ft_group) = (ep.rank(), ep.size(), ep.ft_group());
    let ft_on = ep.ft_enabled();
    let c = Arc::new(Comm::new(parent.world.to_vec(), me_job, job_size, ctx, abi::ERRORS_ARE_FATAL, &st.node_of_job));
    let node = st.node_of_job.get(me_job as usize).copied().unwrap_or(0);
    let r = build(acc, &a, &c, &hints, own_err, node, ft_on.then(|| ft_group.unwrap_or(0)));
    match r {
        Ok(w) => {
            let st = acc.st();
            let Some(h) = st.wins.table.insert(w) else {
                return Err(Fail::new(abi::ERR_INTERN, Some(ci), Why::Arg("too many windows")));
            };
            // SAFETY: checked non-null by `check_args` (every member agreed it was valid).
            unsafe { *a.out = h };
            super::remote::created(acc, h)
        }
        Err(e) => {
            let st = acc.st();
            crate::coll::area::release(&c);
            st.contexts.release(ctx);
            Err(e.on(ci))
        }
    }
}

/// Steps 2 and 3 of the creation, then the window.
fn build(
    acc: &mut Access,
    a: &Args,
    c: &Arc<Comm>,
    hints: &Hints,
    own_err: Option<(c_int, &'static str)>,
    node: u32,
    ft_group: Option<u32>,
) -> Res<Window> {
    let tu = acc.st().tuning;
    let dynamic = a.flavor == abi::WIN_FLAVOR_DYNAMIC;
    let create = a.flavor == abi::WIN_FLAVOR_CREATE && own_err.is_none() && a.size > 0;
    let block = if create { allocmem::find(a.base as usize, a.size as usize) } else { None };
    let mine = Record {
        size: if dynamic { 0 } else { a.size.max(0) as u64 },
        disp_unit: if dynamic { 1 } else { a.disp_unit.max(1) as u64 },
        base: if a.flavor == abi::WIN_FLAVOR_CREATE { a.base as u64 } else { 0 },
        pid: std::process::id(),
        node,
        ft_group: ft_group.unwrap_or(u32::MAX),
        err: own_err.map_or(0, |e| e.0),
        probe: &raw const PROBE as u64,
        noncontig: u32::from(hints.alloc_shared_noncontig),
        memfd: block.map_or(-1, |b| b.0),
        moff: block.map_or(0, |b| b.1 as u64),
    };
    let all = crate::coll::allgather_bytes(acc, c, &tu, &mine.bytes())?;
    let recs: Vec<Record> = all.chunks_exact(RECORD).map(Record::of).collect();
    if let Some((code, what)) = own_err {
        return Err(Fail::new(code, None, Why::Arg(what)));
    }
    if let Some(r) = recs.iter().position(|r| r.err != 0) {
        let why = Why::Other(format!("rank {r} of the window gave invalid arguments"));
        return Err(Fail::new(recs[r].err, None, why));
    }
    if ft_group.is_some() && recs.iter().any(|r| r.ft_group != mine.ft_group) {
        let why = "with fault tolerance, a window must lie within one FT group (its members span several)";
        return Err(Fail::new(abi::ERR_UNSUPPORTED_OPERATION, None, Why::Arg(why)));
    }
    if a.flavor == abi::WIN_FLAVOR_SHARED && recs.iter().any(|r| r.node != node) {
        let why = "MPI_Win_allocate_shared over members of several nodes";
        return Err(Fail::new(abi::ERR_RMA_SHARED, None, Why::Arg(why)));
    }
    let me = c.rank;
    let locals: Vec<u32> = (0..c.size).filter(|&r| recs[r as usize].node == node).collect();
    let alloc = a.flavor == abi::WIN_FLAVOR_ALLOCATE || a.flavor == abi::WIN_FLAVOR_SHARED;
    let sizes: Vec<usize> = locals.iter().map(|&r| if alloc { recs[r as usize].size as usize } else { 0 }).collect();
    let noncontig = a.flavor == abi::WIN_FLAVOR_SHARED && recs.iter().any(|r| r.noncontig != 0);
    let align = match a.flavor {
        abi::WIN_FLAVOR_SHARED if noncontig => segment::PAGE,
        abi::WIN_FLAVOR_SHARED => 1,
        _ => 64,
    };
    let Some((seg, offs)) = node_segment(acc, c, &recs, &locals, &sizes, align)? else {
        let why = "the window's shared memory could not be created (/dev/shm full?)";
        return Err(Fail::new(abi::ERR_NO_MEM, None, Why::Arg(why)));
    };
    let local_of = |r: u32| locals.iter().position(|&l| l == r).map(|i| i as u32);
    let my_local = local_of(me).unwrap_or(0);
    // ORDERING: Relaxed: read by a checkpoint of this group and by a restore, after collectives.
    seg.control(my_local).pid.store(std::process::id(), std::sync::atomic::Ordering::Relaxed);
    let mut targets = Vec::with_capacity(c.size as usize);
    let mut cma: Vec<(u32, bool)> = Vec::new();
    let in_block = if create { allocmem::hold(a.base as usize) } else { None };
    let mut peer_maps = Vec::new();
    for r in 0..c.size {
        let rec = recs[r as usize];
        let local = local_of(r);
        let path = match local {
            Some(l) if alloc => Path::Mapped { base: seg.addr() as usize + offs[l as usize] },
            Some(_) if r == me => Path::Mapped { base: rec.base as usize },
            Some(_)
                if let Some(m) =
                    allocmem::map_peer(rec.pid, rec.memfd, rec.moff, rec.size as usize, rec.base as usize) =>
            {
                let base = m.base;
                peer_maps.push((r, m));
                Path::Mapped { base }
            }
            Some(_) => {
                let ok = match cma.iter().find(|e| e.0 == rec.pid) {
                    Some(e) => e.1,
                    None => {
                        let ok = cma_allowed(rec.pid, rec.probe);
                        cma.push((rec.pid, ok));
                        ok
                    }
                };
                if ok { Path::Cma { pid: rec.pid, base: rec.base as usize } } else { Path::Remote }
            }
            None => Path::Remote,
        };
        let job = c.world[r as usize];
        targets.push(Target { size: rec.size as usize, disp_unit: rec.disp_unit as usize, path, local, job });
    }
    let base = match targets[me as usize].path {
        Path::Mapped { base } if !dynamic => base,
        _ => 0,
    };
    if alloc {
        // SAFETY: checked non-null; MPI's contract: a `void **` in disguise.
        unsafe { *a.baseptr.cast::<*mut c_void>() = base as *mut c_void };
    }
    let model = abi::WIN_UNIFIED;
    let attr_values =
        Box::new(AttrValues { size: mine.size as Aint, disp_unit: mine.disp_unit as c_int, flavor: a.flavor, model });
    Ok(Window {
        comm: c.clone(),
        flavor: a.flavor,
        targets: targets.into(),
        seg: Arc::new(seg),
        local: my_local,
        base,
        attr_values,
        hints: Hints { alloc_shared_noncontig: noncontig, ..hints.clone() },
        name: String::new(),
        attrs: Vec::new(),
        errh: abi::ERRORS_ARE_FATAL,
        epoch: Epoch::default(),
        regions: Vec::new(),
        remote: None,
        in_block,
        peer_maps,
    })
}

/// `MPI_Win_free`: collective; the attributes' delete callbacks run first; every member waits
/// for the others (nobody touches a segment or a member's memory any more), then the window,
/// its context and its mapping go.
///
/// # Safety
/// `win` null or valid for reads and writes.
pub unsafe fn free(acc: &mut Access, win: *mut abi::Win) -> Res<()> {
    if win.is_null() {
        return Err(super::null_out());
    }
    // SAFETY: checked non-null; the caller's contract.
    let h = unsafe { *win };
    super::with(acc, h, |acc| {
        let w = super::win(acc.st(), h)?;
        w.epoch.check_free().map_err(|why| Fail::new(abi::ERR_RMA_SYNC, None, Why::Arg(why)))?;
        super::attrs::delete_all(acc, h)?;
        let c = super::win(acc.st(), h)?.comm.clone();
        super::remote::before_free(acc, h)?;
        all_agree(acc, &c, true)?;
        super::remote::freed(acc, h)?;
        let st = acc.st();
        let Some(w) = st.wins.table.remove(h) else { return Err(super::bad_win(h)) };
        crate::coll::area::release(&w.comm);
        st.contexts.release(w.comm.ctx);
        crate::errh::forget_if_unused(st, w.errh);
        // SAFETY: as above.
        unsafe { *win = abi::WIN_NULL };
        Ok(())
    })
}
