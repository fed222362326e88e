//! A window's shared segment on one node: a [`Control`] block per node-local member, then (for
//! `MPI_Win_allocate` and `MPI_Win_allocate_shared`) the members' memory, in rank order.
//!
//! The node's lowest member of the window creates it (`shm_open` of a name made from its pid
//! and the window's context, then `posix_fallocate`, so a full `/dev/shm` fails here and not
//! with a `SIGBUS` later), the others open it once every member learned that the creation
//! succeeded, and the creator unlinks the name once every member mapped it
//! ([`super::create`] runs these steps). Every OS call of the window code on shared memory is
//! made here.
//!
//! **Layout** ([`layout`]): the control blocks fill whole pages; the memory follows. For
//! `MPI_Win_allocate_shared` it is by default (MPI-3.1 §11.2.3) contiguous across ranks: a
//! member's first byte follows the previous member's last; with `alloc_shared_noncontig` each
//! member's part starts on a page of its own. `MPI_Win_allocate`'s parts start on cache lines
//! (64 bytes: aligned for every type and for the native atomics, no false sharing).
//!
//! **Invariants.** A fresh segment is zero-filled: every lock word is free, every mutex open, no
//! region attached. Values read from the segment (region bounds) are written by peers that may
//! be faulty: every use checks them against what it may touch.

use std::ffi::CString;
use std::io;
use std::sync::atomic::{AtomicU32, AtomicU64};

use super::lockword::LockWord;

/// Regions a member of a dynamic window may have attached at once (one more is
/// `MPI_ERR_RMA_ATTACH`).
pub const MAX_REGIONS: usize = 64;

/// The page size the layout rounds to.
pub const PAGE: usize = 4096;

/// One attached region of a dynamic window, as published in the control block.
#[repr(C)]
#[derive(Debug, Default)]
pub struct Region {
    /// Start address in the owner's address space (0: free entry).
    pub base: AtomicU64,
    /// Length in bytes.
    pub len: AtomicU64,
}

/// A node-local member's control block.
#[repr(C, align(64))]
#[derive(Debug)]
pub struct Control {
    /// The passive-target lock of this member's window ([`LockWord`]).
    pub lock: LockWord,
    /// The accumulate mutex: 0 free, else its holder's pid (read-modify-writes that are not one
    /// native atomic; the pid lets a waiter see a dead holder: `lockword`'s "Dead holders").
    pub acc_mutex: AtomicU32,
    /// Seqlock of `regions`: odd while the owner changes them.
    pub regions_seq: AtomicU64,
    /// The dynamic window's attached regions (dynamic windows only).
    pub regions: [Region; MAX_REGIONS],
    /// The member's pid, published at creation and again by a restore (a restart changes pids:
    /// the CMA path reads it here).
    pub pid: AtomicU32,
    /// Block 0 only, on a segment a restore made ([`Mapping::create_at`]): the members that
    /// mapped it so far (the creator sets 1 once the segment is ready; the last opener unlinks
    /// the name).
    pub opens: AtomicU32,
}

/// Bytes of one control block (a multiple of 64).
pub const CONTROL_BYTES: usize = std::mem::size_of::<Control>();
const _: () = assert!(CONTROL_BYTES.is_multiple_of(64));

/// Where everything is in a segment for `sizes` (the node-local members' memory, in rank order;
/// all zero for windows whose memory is the program's), each member's part starting at a
/// multiple of `align` (1: contiguous): the offset of each member's memory and the segment's
/// length.
pub fn layout(sizes: &[usize], align: usize) -> Option<(Vec<usize>, usize)> {
    let controls = (sizes.len().max(1) * CONTROL_BYTES).next_multiple_of(PAGE);
    let mut at = controls;
    let mut offs = Vec::with_capacity(sizes.len());
    for &s in sizes {
        at = at.checked_next_multiple_of(align.max(1))?;
        offs.push(at);
        at = at.checked_add(s)?;
    }
    Some((offs, at.checked_next_multiple_of(PAGE)?.max(PAGE)))
}

/// A mapped segment. Unmapped when the last holder drops it.
#[derive(Debug)]
pub struct Mapping {
    addr: *mut u8,
    len: usize,
    /// Control blocks at the start.
    controls: u32,
}

// SAFETY: the mapping is shared memory reached through atomics (control blocks) or by the
// program's own synchronisation (window memory, MPI's rules); the pointer is never freed before
// the last holder drops it.
unsafe impl Send for Mapping {}
// SAFETY: as above.
unsafe impl Sync for Mapping {}

impl Mapping {
    /// Address of the first byte.
    pub fn addr(&self) -> *mut u8 {
        self.addr
    }

    /// Length in bytes.
    pub fn len(&self) -> usize {
        self.len
    }

    /// True if empty (never: a segment holds at least one control block).
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Control blocks at the start.
    pub fn controls(&self) -> u32 {
        self.controls
    }

    /// Control block `i` (of the node-local member of that index).
    pub fn control(&self, i: u32) -> &Control {
        assert!(i < self.controls, "control block {i} of {}", self.controls);
        // SAFETY: the layout puts `controls` blocks at the start of the mapping, 64-aligned (the
        // mapping is page-aligned); the mapping lives as long as `self`; every field is atomic.
        unsafe { &*self.addr.cast::<Control>().add(i as usize) }
    }

    /// A private anonymous mapping (a window of one node-local member needs no name): zeroed.
    pub fn private(len: usize, controls: u32) -> io::Result<Mapping> {
        // SAFETY: a fresh anonymous mapping; nothing aliases it.
        let p = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED | libc::MAP_ANONYMOUS,
                -1,
                0,
            )
        };
        if p == libc::MAP_FAILED {
            return Err(io::Error::last_os_error());
        }
        Ok(Mapping { addr: p.cast(), len, controls })
    }

    /// Creates shared segment `name` of `len` bytes (backed: `posix_fallocate`) and maps it.
    pub fn create(name: &CString, len: usize, controls: u32) -> io::Result<Mapping> {
        Self::create_with(name, len, |fd| map_fd(fd, len, controls))
    }

    /// [`Mapping::create`] mapped at exactly `addr` (a restore: `map_at`).
    pub fn create_at(name: &CString, addr: usize, len: usize, controls: u32) -> io::Result<Mapping> {
        Self::create_with(name, len, |fd| map_at(fd, addr, len, controls))
    }

    /// [`Mapping::private`] at exactly `addr` (a restore: `map_at`).
    pub fn private_at(addr: usize, len: usize, controls: u32) -> io::Result<Mapping> {
        map_at(-1, addr, len, controls)
    }

    /// [`Mapping::open`] mapped at exactly `addr` (a restore: `map_at`).
    pub fn open_at(name: &CString, addr: usize, len: usize, controls: u32) -> io::Result<Mapping> {
        Self::open_with(name, len, |fd| map_at(fd, addr, len, controls))
    }

    fn create_with(
        name: &CString,
        len: usize,
        map: impl FnOnce(libc::c_int) -> io::Result<Mapping>,
    ) -> io::Result<Mapping> {
        let flags = libc::O_CREAT | libc::O_EXCL | libc::O_RDWR | libc::O_CLOEXEC;
        // SAFETY: a NUL-terminated name.
        let mut fd = unsafe { libc::shm_open(name.as_ptr(), flags, 0o600) };
        if fd < 0 && io::Error::last_os_error().raw_os_error() == Some(libc::EEXIST) {
            // A stale name (a crashed job whose pid came back): ours now.
            unlink(name);
            // SAFETY: as above.
            fd = unsafe { libc::shm_open(name.as_ptr(), flags, 0o600) };
        }
        if fd < 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: `fd` is ours.
        let rc = unsafe { libc::posix_fallocate(fd, 0, len as libc::off_t) };
        let r = if rc != 0 { Err(io::Error::from_raw_os_error(rc)) } else { map(fd) };
        // SAFETY: `fd` is ours; the mapping (if any) keeps the memory.
        unsafe { libc::close(fd) };
        if r.is_err() {
            unlink(name);
        }
        r
    }

    /// Opens and maps segment `name`, which must hold at least `len` bytes.
    pub fn open(name: &CString, len: usize, controls: u32) -> io::Result<Mapping> {
        Self::open_with(name, len, |fd| map_fd(fd, len, controls))
    }

    fn open_with(
        name: &CString,
        len: usize,
        map: impl FnOnce(libc::c_int) -> io::Result<Mapping>,
    ) -> io::Result<Mapping> {
        // SAFETY: a NUL-terminated name.
        let fd = unsafe { libc::shm_open(name.as_ptr(), libc::O_RDWR | libc::O_CLOEXEC, 0) };
        if fd < 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: an all-zero `stat` is a valid value to be overwritten.
        let mut sb: libc::stat = unsafe { std::mem::zeroed() };
        // SAFETY: `fd` is ours, `sb` writable.
        let r = if unsafe { libc::fstat(fd, &mut sb) } != 0 {
            Err(io::Error::last_os_error())
        } else if (sb.st_size as u64) < len as u64 {
            Err(io::Error::new(io::ErrorKind::InvalidData, "window segment shorter than its layout"))
        } else {
            map(fd)
        };
        // SAFETY: `fd` is ours.
        unsafe { libc::close(fd) };
        r
    }
}

fn map_fd(fd: libc::c_int, len: usize, controls: u32) -> io::Result<Mapping> {
    // SAFETY: mapping `len` bytes of a file at least that long; nothing in this process aliases
    // the new mapping.
    let p =
        unsafe { libc::mmap(std::ptr::null_mut(), len, libc::PROT_READ | libc::PROT_WRITE, libc::MAP_SHARED, fd, 0) };
    if p == libc::MAP_FAILED {
        return Err(io::Error::last_os_error());
    }
    Ok(Mapping { addr: p.cast(), len, controls })
}

/// Maps `len` bytes at exactly `addr`, shared: of `fd`, or anonymous if `fd` is -1
/// (`MAP_FIXED_NOREPLACE`: a range this process uses already is refused, never replaced).
fn map_at(fd: libc::c_int, addr: usize, len: usize, controls: u32) -> io::Result<Mapping> {
    let anon = if fd < 0 { libc::MAP_ANONYMOUS } else { 0 };
    let flags = libc::MAP_SHARED | libc::MAP_FIXED_NOREPLACE | anon;
    // SAFETY: `MAP_FIXED_NOREPLACE` never replaces a mapping of this process; `fd` (if any) is
    // at least `len` bytes long.
    let p = unsafe { libc::mmap(addr as *mut libc::c_void, len, libc::PROT_READ | libc::PROT_WRITE, flags, fd, 0) };
    if p == libc::MAP_FAILED {
        let e = io::Error::last_os_error();
        if e.raw_os_error() == Some(libc::EEXIST) {
            let what = format!("the address range {addr:#x}..{:#x} is in use in this process", addr + len);
            return Err(io::Error::new(io::ErrorKind::AddrInUse, what));
        }
        return Err(e);
    }
    if p as usize != addr {
        // A kernel older than 4.17 takes the address as a hint only.
        // SAFETY: the mapping just made, `len` bytes.
        unsafe { libc::munmap(p, len) };
        return Err(io::Error::new(io::ErrorKind::AddrInUse, format!("the kernel would not map at {addr:#x}")));
    }
    Ok(Mapping { addr: p.cast(), len, controls })
}

/// Removes segment name `name` (mappings stay).
pub fn unlink(name: &CString) {
    // SAFETY: a NUL-terminated name.
    unsafe { libc::shm_unlink(name.as_ptr()) };
}

/// The name of the segment the node's member of pid `leader` creates for the window of context
/// `ctx` (unique while the window lives: the leader's contexts are).
pub fn name(leader: u32, ctx: u32) -> CString {
    CString::new(format!("/nemesis-win-{leader}-{ctx}")).unwrap_or_default()
}

/// The name of the segment a restore re-creates for the window of context `ctx` whose node
/// leader had pid `leader` when the checkpoint was taken (every member read it from the leader's
/// control block then: they agree on it without a message).
pub fn restart_name(leader: u32, ctx: u32) -> CString {
    CString::new(format!("/nemesis-winr-{leader}-{ctx}")).unwrap_or_default()
}

impl Drop for Mapping {
    fn drop(&mut self) {
        // SAFETY: the mapping was made by `mmap` with this length and no holder remains.
        unsafe { libc::munmap(self.addr.cast(), self.len) };
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn layout_is_contiguous_by_default_and_paged_when_not() {
        let (offs, len) = layout(&[3, 0, 5], 1).unwrap();
        assert_eq!(offs[0], PAGE, "controls take a page");
        assert_eq!(offs, vec![PAGE, PAGE + 3, PAGE + 3]);
        assert_eq!(len, 2 * PAGE);
        let (offs, len) = layout(&[3, 0, 5], PAGE).unwrap();
        assert_eq!(offs, vec![PAGE, 2 * PAGE, 2 * PAGE]);
        assert_eq!(len, 3 * PAGE);
        let (offs, _) = layout(&[3, 0, 5], 64).unwrap();
        assert_eq!(offs, vec![PAGE, PAGE + 64, PAGE + 64], "Win_allocate: cache-line parts");
        let (offs, len) = layout(&[0, 0], 1).unwrap();
        assert_eq!((offs, len), (vec![PAGE, PAGE], PAGE));
        assert!(layout(&[usize::MAX, 1], 1).is_none(), "overflow is refused");
        assert_eq!(CONTROL_BYTES % 64, 0);
        assert_eq!(std::mem::align_of::<Control>(), 64);
    }

    #[test]
    fn a_named_segment_is_shared_and_a_failed_one_leaves_nothing() {
        let name = CString::new(format!("/nemesis-win-test-{}", std::process::id())).unwrap();
        let a = Mapping::create(&name, 2 * PAGE, 2).unwrap();
        let b = Mapping::open(&name, 2 * PAGE, 2).unwrap();
        unlink(&name);
        a.control(1).acc_mutex.store(7, std::sync::atomic::Ordering::Release);
        assert_eq!(b.control(1).acc_mutex.load(std::sync::atomic::Ordering::Acquire), 7);
        assert!(Mapping::open(&name, PAGE, 1).is_err(), "unlinked");
        assert!(Mapping::open(&CString::new("/nemesis-win-none").unwrap(), PAGE, 1).is_err());
        // Far more than /dev/shm holds: posix_fallocate fails, the name is gone again.
        assert!(Mapping::create(&name, 1 << 50, 1).is_err());
        assert!(Mapping::open(&name, PAGE, 1).is_err(), "a failed creation unlinks its name");
    }

    #[test]
    fn a_private_mapping_starts_unlocked() {
        let m = Mapping::private(PAGE, 2).unwrap();
        assert!(m.control(1).lock.is_free());
        assert_eq!(m.control(0).acc_mutex.load(std::sync::atomic::Ordering::Relaxed), 0);
    }
}
