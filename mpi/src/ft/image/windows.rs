//! Windows in the MPI state image (`super`, issue 34): the window table with its shape, the
//! window keyvals (functions as the other keyvals'), and per window what its members agreed on
//! at creation and what this rank holds: flavour, the private communicator (saved as the
//! communicator image saves one: members, contexts, collective count), every target's size,
//! displacement unit, path and node-local index, hints, name, attributes, error handler handle,
//! whether a fence epoch is open, this rank's base address, the dynamic regions it attached, the
//! node segment's address and length, the pid of the node's leader then, and for
//! `MPI_Win_allocate`/`MPI_Win_allocate_shared` **the bytes of this rank's part**.
//! `MPI_Win_create` and dynamic memory is the application's (like a persistent request's
//! buffer): it puts it back at the same address.
//!
//! **When a checkpoint is allowed** ([`outstanding`]): no epoch open on any window but a fence
//! epoch no operation used since its fence (a fence completes every operation), no lock of this
//! rank's held by a peer, no accumulate under way on it. Request-based operations are requests
//! (`super::requests` refuses them).
//!
//! **Restore without messages** (the restart contract; [`SavedWins::apply`]): every member of a
//! window is in the restarted group (a window never spans FT groups: `win::create` refuses) and
//! calls `MPIX_Checkpoint_restore`. The node's leader (local index 0) creates the segment under
//! [`segment::restart_name`] (the leader's pid at the checkpoint and the window's context: every
//! member read both then) at the address its old one had (`MAP_FIXED_NOREPLACE`), publishes its
//! new pid and marks the segment ready (`opens` = 1); the others open it at their own old
//! addresses, retrying for [`OPEN_WAIT`] while it is not made, not yet its full length (the
//! leader between `shm_open` and `posix_fallocate`) or not marked ready (a stale segment of an
//! earlier failed restore, whose leader's pid is dead, is passed over), and the last opener
//! unlinks the name. A rank whose restore fails unlinks every restart name of its windows. Each member then
//! copies its saved bytes back, republishes its regions and its pid (a CMA path restored with pid
//! 0 reads the peer's pid from its control block: `Window::path_of`). `MPI_WIN_BASE` and every
//! pointer the application kept into window memory stay valid.
//!
//! **Invariants.** Saved addresses are checked against the saved segment before anything is
//! copied: a member's bytes go to its own part of the mapping and nowhere else.

use std::ffi::c_int;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use super::put_table;
use super::{Saved, SavedComm, build, get_attrs, get_comm, get_keyval, get_table, put_attrs, put_comm, put_keyval};
use crate::abi::{self, Aint};
use crate::attr::Keyval;
use crate::ft::wire::{Bad, Reader, Writer};
use crate::state::State;
use crate::win::remote::{self, UnderWay};
use crate::win::segment::{self, Mapping};
use crate::win::{AttrValues, Epoch, Hints, Path, Target, Window};

/// How long a member waits for its node's leader to re-create a window's segment.
pub const OPEN_WAIT: Duration = Duration::from_secs(60);

/// Why `MPIX_Checkpoint` is refused because of a window, if it is (module documentation).
pub fn outstanding(st: &State) -> Option<String> {
    st.wins.table.iter().find_map(|(h, w)| {
        let e = &w.epoch;
        let why = if e.access.is_some() {
            "an access epoch (MPI_Win_start) is open"
        } else if e.exposure.is_some() {
            "an exposure epoch (MPI_Win_post) is open"
        } else if e.any_passive() {
            "a passive-target epoch (MPI_Win_lock, MPI_Win_lock_all) is open"
        } else if e.fence && e.fence_used {
            "operations were issued since the last MPI_Win_fence (close the epoch with a fence)"
        } else if let Some(u) = remote::under_way(w) {
            match u {
                UnderWay::Origin => "operations to remote targets are not complete (flush, unlock or fence first)",
                UnderWay::Target => "requests of remote origins are being served",
            }
        } else if !w.control(w.local).lock.is_free() {
            "a peer holds this rank's lock (MPI_Win_lock)"
        } else if w.control(w.local).acc_mutex.load(Ordering::Acquire) != 0 {
            // ORDERING: Acquire: a diagnostic look after the holders' releases.
            "an accumulate is under way on this rank's memory"
        } else {
            return None;
        };
        let name = if w.name.is_empty() { String::new() } else { format!(" ({})", w.name) };
        Some(format!("window {h:#x}{name}: {why}: no epoch but a completed fence may be open at MPIX_Checkpoint"))
    })
}

/// A window as saved.
struct SavedWin {
    comm: SavedComm,
    flavor: c_int,
    targets: Vec<Target>,
    seg_addr: usize,
    seg_len: usize,
    controls: u32,
    leader_pid: u32,
    local: u32,
    base: usize,
    attr_values: (Aint, c_int, c_int, c_int),
    hints: Hints,
    name: String,
    attrs: Vec<(c_int, usize)>,
    errh: abi::Errhandler,
    fence: bool,
    regions: Vec<(usize, usize)>,
    /// The window has remote-path state (`win::remote::created`): made afresh, the progress
    /// thread started again ([`start_progress`]).
    remote: bool,
    /// This rank's part of allocated memory.
    bytes: Vec<u8>,
    /// The segment mapped again ([`SavedWins::map`]).
    seg: Option<Mapping>,
}

/// The windows read back, not yet applied.
pub struct SavedWins {
    wins: Saved<SavedWin>,
    keyvals: Saved<Keyval>,
}

fn alloc(flavor: c_int) -> bool {
    flavor == abi::WIN_FLAVOR_ALLOCATE || flavor == abi::WIN_FLAVOR_SHARED
}

fn put_win(w: &mut Writer, win: &Window) {
    put_comm(w, &win.comm);
    w.i32(win.flavor);
    w.len(win.targets.len());
    for (r, t) in win.targets.iter().enumerate() {
        w.len(t.size);
        w.len(t.disp_unit);
        // A peer's `MPI_Alloc_mem` memory mapped here is not restored: CMA reaches it then.
        let peer = win.peer_maps.iter().find(|m| m.0 as usize == r).map(|m| m.1.peer_base);
        let (kind, base) = match (t.path, peer) {
            (_, Some(b)) => (1, b),
            (Path::Mapped { base }, None) => (0, base),
            (Path::Cma { base, .. }, None) => (1, base),
            (Path::Remote, None) => (2, 0),
        };
        w.u8(kind);
        w.u64(base as u64);
        w.u32(t.local.unwrap_or(u32::MAX));
        w.u32(t.job);
    }
    w.u64(win.seg.addr() as u64);
    w.len(win.seg.len());
    w.u32(win.seg.controls());
    // ORDERING: Relaxed: published at creation, before the collectives since.
    w.u32(win.control(0).pid.load(Ordering::Relaxed));
    w.u32(win.local);
    w.u64(win.base as u64);
    let a = &win.attr_values;
    w.i64(a.size);
    w.i32(a.disp_unit);
    w.i32(a.flavor);
    w.i32(a.model);
    let h = &win.hints;
    for b in [h.no_locks, h.same_size, h.same_disp_unit, h.alloc_shared_noncontig] {
        w.bool(b);
    }
    w.str(&h.accumulate_ordering);
    w.str(&h.accumulate_ops);
    w.str(&win.name);
    put_attrs(w, &win.attrs);
    w.i32(win.errh);
    w.bool(win.epoch.fence);
    w.bool(win.remote.is_some());
    w.len(win.regions.len());
    for &(b, n) in &win.regions {
        w.u64(b as u64);
        w.len(n);
    }
    let size = win.targets[win.rank() as usize].size;
    if alloc(win.flavor) && size > 0 {
        // SAFETY: this rank's part of the mapped segment, `size` bytes at `base` (creation laid
        // it out so); no epoch is open (`outstanding`), so no peer writes it now.
        w.bytes(unsafe { std::slice::from_raw_parts(win.base as *const u8, size) });
    } else {
        w.bytes(&[]);
    }
}

fn get_win(r: &mut Reader) -> Result<SavedWin, Bad> {
    let comm = get_comm(r, 1)?;
    let flavor = r.i32()?;
    let n = r.len(25)?;
    let targets = (0..n)
        .map(|_| {
            let (size, disp_unit) = (r.u64()? as usize, r.u64()? as usize);
            let (kind, base) = (r.u8()?, r.u64()? as usize);
            // A CMA peer's pid is learnt from its control block after the restart (0 here).
            let path = match kind {
                0 => Path::Mapped { base },
                1 => Path::Cma { pid: 0, base },
                2 => Path::Remote,
                k => return Err(format!("window path kind {k}")),
            };
            let local = Some(r.u32()?).filter(|&l| l != u32::MAX);
            Ok(Target { size, disp_unit, path, local, job: r.u32()? })
        })
        .collect::<Result<Vec<_>, Bad>>()?;
    let (seg_addr, seg_len, controls, leader_pid) = (r.u64()? as usize, r.u64()? as usize, r.u32()?, r.u32()?);
    let (local, base) = (r.u32()?, r.u64()? as usize);
    let attr_values = (r.i64()?, r.i32()?, r.i32()?, r.i32()?);
    let (no_locks, same_size, same_disp_unit, alloc_shared_noncontig) = (r.bool()?, r.bool()?, r.bool()?, r.bool()?);
    let hints = Hints {
        no_locks,
        accumulate_ordering: r.string()?,
        accumulate_ops: r.string()?,
        same_size,
        same_disp_unit,
        alloc_shared_noncontig,
        nic_atomics: None,
    };
    let (name, attrs, errh, fence, remote) = (r.string()?, get_attrs(r)?, r.i32()?, r.bool()?, r.bool()?);
    let n = r.len(16)?;
    let regions = (0..n).map(|_| Ok((r.u64()? as usize, r.u64()? as usize))).collect::<Result<_, Bad>>()?;
    let bytes = r.bytes()?.to_vec();
    Ok(SavedWin {
        comm,
        flavor,
        targets,
        seg_addr,
        seg_len,
        controls,
        leader_pid,
        local,
        base,
        attr_values,
        hints,
        name,
        attrs,
        errh,
        fence,
        regions,
        remote,
        bytes,
        seg: None,
    })
}

/// Saves the window keyvals and the windows (module documentation); `Err` names a callback in
/// no module.
pub fn put(w: &mut Writer, st: &State) -> Result<(), String> {
    let mut failed = Ok(());
    put_table(w, &st.wins.keyvals, |w, k| failed = std::mem::replace(&mut failed, Ok(())).and(put_keyval(w, k)));
    failed.map_err(|e| format!("a window keyval: {e}"))?;
    put_table(w, &st.wins.table, put_win);
    Ok(())
}

/// Reads what [`put`] saved.
pub fn get(r: &mut Reader) -> Result<SavedWins, Bad> {
    let keyvals = get_table(r, get_keyval)?;
    let wins = get_table(r, get_win)?;
    Ok(SavedWins { wins, keyvals })
}

impl SavedWins {
    /// Why these windows cannot be restored at job rank `me` of `size`, if they cannot.
    pub fn check(&self, me: u32, size: u32) -> Result<(), String> {
        for (i, s) in &self.wins.1 {
            let c = &s.comm;
            let rank = c.world.iter().position(|&j| j == me);
            let bad = if c.world.iter().any(|&j| j >= size) || rank.is_none() {
                Some("its members are not of this job's rank".to_string())
            } else if s.targets.len() != c.world.len() {
                Some(format!("{} targets for {} members", s.targets.len(), c.world.len()))
            } else if s.controls == 0 || s.local >= s.controls {
                Some(format!("control block {} of {}", s.local, s.controls))
            } else if !layout_ok(s, rank.unwrap_or(0)) {
                Some("its memory is not inside its segment".to_string())
            } else {
                None
            };
            if let Some(b) = bad {
                return Err(format!("window at slot {i}: {b}"));
            }
        }
        Ok(())
    }

    /// Maps every window's segment again at its old address (module documentation), after
    /// [`SavedWins::check`] and before the restore changes anything: an address range the
    /// program took first fails the restore with nothing changed.
    ///
    /// On failure no name of this restore stays in `/dev/shm`: this rank unlinks every window's
    /// restart name (created, opened or not yet made: the restore of the group fails with it) and
    /// unmaps what it mapped.
    pub fn map(&mut self) -> Result<(), String> {
        let mut failed = None;
        for (i, s) in &mut self.wins.1 {
            match remap(s, locals(s), s.comm.ctx) {
                Ok(m) => s.seg = Some(m),
                Err(e) => {
                    failed = Some(format!("window at slot {i}: {e}"));
                    break;
                }
            }
        }
        let Some(e) = failed else { return Ok(()) };
        for (_, s) in &mut self.wins.1 {
            s.seg = None;
            if locals(s) > 1 {
                segment::unlink(&segment::restart_name(s.leader_pid, s.comm.ctx));
            }
        }
        Err(e)
    }

    /// Puts the window keyvals and the windows back (module documentation). Runs last in the
    /// restore: the communicators, error handlers and contexts are back.
    pub fn apply(self, st: &mut State) -> Result<(), String> {
        let ((kl0, kl1, kl2), k) = self.keyvals;
        st.wins.keyvals.restore((kl0, kl1, &kl2), k)?;
        let ((l0, l1, l2), saved) = self.wins;
        let mut wins = Vec::with_capacity(saved.len());
        for (i, s) in saved {
            let h = st.wins.table.handle(i);
            let w = window(st, s).map_err(|e| format!("window {h:#x}: {e}"))?;
            wins.push((i, w));
        }
        st.wins.table.restore((l0, l1, &l2), wins)
    }
}

/// After a restore: the remote path's progress runs again for every window that has one (its
/// state is fresh: the peers restarted with this rank, nothing is in flight).
pub fn start_progress(acc: &mut crate::state::Access) {
    let hs: Vec<c_int> = acc.st().wins.table.iter().filter(|(_, w)| w.remote.is_some()).map(|(h, _)| h).collect();
    for h in hs {
        crate::win::progress::register(acc, h);
    }
}

/// Lets the remote path finish what the last synchronisation left moving (replies being sent),
/// a bounded number of rounds, before [`outstanding`] looks.
pub fn settle(st: &mut State) {
    for _ in 0..1000 {
        let busy = st.wins.table.iter().any(|(_, w)| remote::replying(w));
        if !busy || !crate::win::progress::advance(st) {
            return;
        }
    }
}

/// How many members of the window are on this node (share its segment).
fn locals(s: &SavedWin) -> u32 {
    s.targets.iter().filter(|t| t.local.is_some()).count() as u32
}

/// True if this rank's saved memory (allocate flavours) lies inside the saved segment.
fn layout_ok(s: &SavedWin, rank: usize) -> bool {
    if !alloc(s.flavor) {
        return s.bytes.is_empty();
    }
    let size = s.targets[rank].size;
    let inside = s.base >= s.seg_addr && s.base.checked_add(size).is_some_and(|e| e <= s.seg_addr + s.seg_len);
    s.bytes.len() == size && (size == 0 || inside)
}

/// The window of `s`, in its segment mapped again at the old address, its memory put back.
fn window(st: &State, s: SavedWin) -> Result<Window, String> {
    let Some(seg) = s.seg else { return Err("its memory was not mapped again".into()) };
    let comm = Arc::new(build(st, s.comm));
    let c = seg.control(s.local);
    if !s.bytes.is_empty() {
        // SAFETY: `check` put `[base, base + len)` inside the segment, mapped at its old address
        // by `map`; nothing else in this process uses it yet.
        unsafe { std::ptr::copy_nonoverlapping(s.bytes.as_ptr(), s.base as *mut u8, s.bytes.len()) };
    }
    // ORDERING: Release: the memory put back happens before a peer that reads the pid (CMA).
    c.pid.store(std::process::id(), Ordering::Release);
    let (size, disp_unit, flavor, model) = s.attr_values;
    let w = Window {
        comm,
        flavor: s.flavor,
        targets: s.targets.into(),
        seg: Arc::new(seg),
        local: s.local,
        base: s.base,
        attr_values: Box::new(AttrValues { size, disp_unit, flavor, model }),
        hints: s.hints,
        name: s.name,
        attrs: s.attrs,
        errh: s.errh,
        epoch: Epoch { fence: s.fence, ..Epoch::default() },
        regions: s.regions,
        remote: s.remote.then(Box::default),
        in_block: None,
        peer_maps: Vec::new(),
    };
    if w.flavor == abi::WIN_FLAVOR_DYNAMIC {
        crate::win::attrs::publish(&w);
    }
    Ok(w)
}

/// True if process `pid` exists.
fn alive(pid: u32) -> bool {
    // SAFETY: signal 0 sends nothing: an existence check.
    pid != 0
        && (unsafe { libc::kill(pid as libc::pid_t, 0) } == 0
            || std::io::Error::last_os_error().raw_os_error() == Some(libc::EPERM))
}

/// The window's segment on this node, made again without a message (module documentation).
fn remap(s: &SavedWin, locals: u32, ctx: u32) -> Result<Mapping, String> {
    let (addr, len, n) = (s.seg_addr, s.seg_len, s.controls);
    let fail = |e: std::io::Error| format!("its memory cannot be mapped again at {addr:#x}: {e}");
    if locals <= 1 {
        return Mapping::private_at(addr, len, n).map_err(fail);
    }
    let name = segment::restart_name(s.leader_pid, ctx);
    if s.local == 0 {
        let m = Mapping::create_at(&name, addr, len, n).map_err(fail)?;
        // ORDERING: the pid (Relaxed) is ordered before the ready mark by its Release.
        m.control(0).pid.store(std::process::id(), Ordering::Relaxed);
        m.control(0).opens.store(1, Ordering::Release);
        return Ok(m);
    }
    let t = Instant::now();
    loop {
        match Mapping::open_at(&name, addr, len, n) {
            Ok(m) => {
                let c = m.control(0);
                // ORDERING: Acquire: pairs with the leader's ready mark (its pid before it).
                if c.opens.load(Ordering::Acquire) >= 1 && alive(c.pid.load(Ordering::Relaxed)) {
                    // ORDERING: AcqRel: one count per opener; the last sees every other's.
                    if c.opens.fetch_add(1, Ordering::AcqRel) + 1 == locals {
                        segment::unlink(&name);
                    }
                    return Ok(m);
                }
                // Not ready yet, or stale (an earlier restore's leader died): drop and retry.
            }
            // Not made yet, or made but not yet its full length (the leader is between
            // `shm_open` and `posix_fallocate`): retry.
            Err(e) if e.raw_os_error() == Some(libc::ENOENT) || e.kind() == std::io::ErrorKind::InvalidData => {}
            Err(e) => return Err(fail(e)),
        }
        if t.elapsed() > OPEN_WAIT {
            return Err(format!(
                "the node's first member of the window did not re-create its memory within {} s (did it call \
                 MPIX_Checkpoint_restore?)",
                OPEN_WAIT.as_secs()
            ));
        }
        std::thread::sleep(Duration::from_millis(1));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ft::image::SavedComm;

    /// An address range of this test's own, far from what the allocator and thread stacks use
    /// (`k` of a few).
    fn range(k: usize) -> usize {
        0x3a3a_0000_0000 + (std::process::id() as usize % 4096) * 0x10_0000 + k * 0x1_0000
    }

    fn saved(seg_addr: usize, local: u32, leader_pid: u32) -> SavedWin {
        let target = Target { size: 64, disp_unit: 1, path: Path::Mapped { base: 0 }, local: Some(local), job: local };
        SavedWin {
            comm: SavedComm {
                world: vec![0, 1],
                ctx: 0x7fff_0000 + std::process::id() % 0xffff,
                send_ctx: 0,
                errh: abi::ERRORS_ARE_FATAL,
                name: String::new(),
                nbc: 0,
                topo: None,
                attrs: Vec::new(),
                session: None,
                local: None,
            },
            flavor: abi::WIN_FLAVOR_SHARED,
            targets: vec![target; 2],
            seg_addr,
            seg_len: 2 * segment::PAGE,
            controls: 2,
            leader_pid,
            local,
            base: seg_addr + segment::PAGE + 64 * local as usize,
            attr_values: (64, 1, abi::WIN_FLAVOR_SHARED, abi::WIN_UNIFIED),
            hints: Hints::default(),
            name: String::new(),
            attrs: Vec::new(),
            errh: abi::ERRORS_ARE_FATAL,
            fence: false,
            regions: Vec::new(),
            remote: false,
            bytes: vec![local as u8 + 1; 64],
            seg: None,
        }
    }

    #[test]
    fn a_segment_comes_back_at_its_addresses_without_a_message() {
        let len = 2 * segment::PAGE;
        let (a, b) = (range(0), range(1));
        // A stale segment of an earlier restore, its leader dead (pid 0 is never alive here).
        let (s0, s1) = (saved(a, 0, 1), saved(b, 1, 1));
        assert!(layout_ok(&s0, 0) && layout_ok(&s1, 1));
        let name = segment::restart_name(1, s0.comm.ctx);
        let stale = Mapping::create(&name, len, 2).unwrap();
        stale.control(0).opens.store(1, Ordering::Relaxed);
        drop(stale);
        let member = std::thread::spawn(move || remap(&s1, 2, s1.comm.ctx).map(|m| m.addr() as usize));
        std::thread::sleep(Duration::from_millis(20));
        let lead = remap(&s0, 2, s0.comm.ctx).unwrap();
        assert_eq!(lead.addr() as usize, a, "the leader's segment is where it was");
        let other = member.join().unwrap().unwrap();
        assert_eq!(other, b, "the member's segment is where it was");
        // One segment: the member's open counted in the leader's control block.
        assert_eq!(lead.control(0).opens.load(Ordering::Acquire), 2, "both opened it");
        assert!(Mapping::open(&name, len, 2).is_err(), "the last opener unlinked the name");
        // A taken range is refused with its reason, never replaced.
        let e = Mapping::private_at(a, len, 2).unwrap_err();
        assert!(e.to_string().contains("in use"), "{e}");
    }

    #[test]
    fn a_member_waits_while_the_segment_is_shorter_than_its_layout() {
        // The leader between `shm_open` and `posix_fallocate`: the name exists, empty.
        let (a, b) = (range(2), range(3));
        let (s0, s1) = (saved(a, 0, 2), saved(b, 1, 2));
        let name = segment::restart_name(2, s0.comm.ctx);
        let flags = libc::O_CREAT | libc::O_EXCL | libc::O_RDWR;
        // SAFETY: a NUL-terminated name; the descriptor is closed at once (the name stays).
        let fd = unsafe { libc::shm_open(name.as_ptr(), flags, 0o600) };
        assert!(fd >= 0, "{}", std::io::Error::last_os_error());
        // SAFETY: ours.
        unsafe { libc::close(fd) };
        let member = std::thread::spawn(move || remap(&s1, 2, s1.comm.ctx).map(|m| m.addr() as usize));
        std::thread::sleep(Duration::from_millis(20));
        assert!(!member.is_finished(), "the member gave up on a segment not yet its length");
        let lead = remap(&s0, 2, s0.comm.ctx).unwrap();
        assert_eq!(member.join().unwrap(), Ok(b));
        assert_eq!(lead.control(0).opens.load(Ordering::Acquire), 2, "both opened it");
    }

    #[test]
    fn a_failed_restore_leaves_no_name() {
        // Window 0 is restored (this rank its node's leader); window 1's range is taken: the
        // restore fails and unlinks both names (window 1's made by its leader before this
        // member failed).
        let (a, b) = (range(4), range(5));
        let taken = Mapping::private_at(b, 2 * segment::PAGE, 2).unwrap();
        let first = saved(a, 0, 3);
        let name0 = segment::restart_name(3, first.comm.ctx);
        let mut second = saved(b, 1, 3);
        second.comm.ctx += 1;
        let name = segment::restart_name(3, second.comm.ctx);
        let made = Mapping::create(&name, 2 * segment::PAGE, 2).unwrap();
        made.control(0).pid.store(std::process::id(), Ordering::Relaxed);
        made.control(0).opens.store(1, Ordering::Release);
        let mut wins =
            SavedWins { wins: ((0, 0, Vec::new()), vec![(0, first), (1, second)]), keyvals: Default::default() };
        let e = wins.map().unwrap_err();
        assert!(e.starts_with("window at slot 1: ") && e.contains("in use"), "{e}");
        assert!(wins.wins.1.iter().all(|(_, s)| s.seg.is_none()), "what was mapped is unmapped");
        assert!(Mapping::private_at(a, 2 * segment::PAGE, 2).is_ok(), "window 0's range is free again");
        assert!(Mapping::open(&name0, 2 * segment::PAGE, 2).is_err(), "window 0's name (made here) is gone");
        assert!(Mapping::open(&name, 2 * segment::PAGE, 2).is_err(), "window 1's name is gone");
        drop((taken, made));
    }

    #[test]
    fn memory_outside_its_segment_is_refused() {
        let mut s = saved(0x1000_0000, 0, 1);
        assert!(layout_ok(&s, 0));
        s.base = s.seg_addr + s.seg_len - 8;
        assert!(!layout_ok(&s, 0), "past the end");
        s.base = s.seg_addr - 64;
        assert!(!layout_ok(&s, 0), "before the start");
        s.base = s.seg_addr + segment::PAGE;
        s.bytes.pop();
        assert!(!layout_ok(&s, 0), "bytes of another length");
    }
}
