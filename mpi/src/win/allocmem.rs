//! `MPI_Alloc_mem`'s memory, shareable with node peers: each block is a sealed `memfd`
//! mapped `MAP_SHARED`, so an `MPI_Win_create` over (part of) a block lets the window's node
//! peers map that part at creation and load and store it as they do an `MPI_Win_allocate`
//! window, instead of a `process_vm_writev`/`readv` system call per access (MPICH registers
//! `MPI_Alloc_mem` memory for the same reason). A peer opens the owner's descriptor as
//! `/proc/<pid>/fd/<fd>` (the kernel checks the same ptrace read permission as for
//! `/proc/<pid>/mem`); where that fails the window falls back to CMA or the remote path.
//!
//! Invariants:
//! - A block's file is sealed against shrinking and growing before its address is handed out,
//!   so a peer that checked the seals and the size can never fault (`SIGBUS`) on its mapping.
//! - A peer maps only the pages of the window's range and accesses only inside the window
//!   (every access is bounds-checked against the target's size first).
//! - A block stays mapped, and its descriptor open, while a window lies in it: `MPI_Free_mem`
//!   of such a block (erroneous, MPI-4.1 §12.2.1) only marks it, and the last window over it
//!   releases it at `MPI_Win_free`. A freed block is out of the registry, so no later window
//!   can reach it; a peer's mapping of it keeps the pages alive, never the owner's address.
//! - Without a memfd (none, the block limit reached, `NEMESIS_ALLOC_MEM=malloc`) a block comes
//!   from `malloc`, registered all the same (descriptor -1): peers reach it by CMA, and
//!   `MPI_Free_mem` while a window lies in it is deferred alike (CMA into freed heap memory
//!   would corrupt the owner's heap).

use std::collections::BTreeMap;
use std::io;
use std::sync::Mutex;

use crate::abi;
use crate::error::{Fail, Res, Why};

/// Most blocks at once (each holds a descriptor); beyond, `malloc`.
const MAX_BLOCKS: usize = 256;

/// The seals a block carries.
const SEALS: libc::c_int = libc::F_SEAL_SHRINK | libc::F_SEAL_GROW | libc::F_SEAL_SEAL;

/// One live block.
#[derive(Debug)]
struct Block {
    /// Length (a memfd's: whole pages).
    len: usize,
    /// The memfd, or -1: memory from `malloc`.
    fd: libc::c_int,
    /// Windows lying in it now.
    windows: u32,
    /// `MPI_Free_mem` came while windows lay in it: released with the last.
    freed: bool,
}

/// Blocks by address.
static BLOCKS: Mutex<BTreeMap<usize, Block>> = Mutex::new(BTreeMap::new());

fn blocks() -> std::sync::MutexGuard<'static, BTreeMap<usize, Block>> {
    BLOCKS.lock().unwrap_or_else(|p| p.into_inner())
}

fn page() -> usize {
    // SAFETY: a plain query.
    let p = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    if p > 0 { p as usize } else { 4096 }
}

/// A sealed memfd of `len` bytes, mapped: (address, descriptor).
fn memfd_block(len: usize) -> io::Result<(usize, libc::c_int)> {
    let flags = libc::MFD_CLOEXEC | libc::MFD_ALLOW_SEALING;
    // SAFETY: a NUL-terminated name.
    let fd = unsafe { libc::memfd_create(c"nemesis-alloc-mem".as_ptr(), flags) };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    let fail = |fd| {
        let e = io::Error::last_os_error();
        // SAFETY: ours, not shared yet.
        unsafe { libc::close(fd) };
        Err(e)
    };
    // SAFETY: `fd` is ours; its size set, then sealed (no shrinking or growing from now on).
    let sized =
        unsafe { libc::ftruncate(fd, len as libc::off_t) == 0 && libc::fcntl(fd, libc::F_ADD_SEALS, SEALS) == 0 };
    if !sized {
        return fail(fd);
    }
    let prot = libc::PROT_READ | libc::PROT_WRITE;
    // SAFETY: a fresh shared mapping of our own file.
    let p = unsafe { libc::mmap(std::ptr::null_mut(), len, prot, libc::MAP_SHARED, fd, 0) };
    if p == libc::MAP_FAILED {
        return fail(fd);
    }
    Ok((p as usize, fd))
}

fn malloc_only() -> bool {
    std::env::var_os("NEMESIS_ALLOC_MEM").is_some_and(|v| v == "malloc")
}

/// `MPI_Alloc_mem`: `size` bytes, page-aligned in a shareable block (or, failing that, from
/// `malloc`, at least 16-byte aligned).
pub fn alloc(size: usize) -> Res<*mut libc::c_void> {
    let pg = page();
    let len = size.max(1).checked_next_multiple_of(pg);
    if let Some(len) = len.filter(|_| !malloc_only()) {
        let mut b = blocks();
        if b.values().filter(|k| k.fd >= 0).count() < MAX_BLOCKS
            && let Ok((addr, fd)) = memfd_block(len)
        {
            b.insert(addr, Block { len, fd, windows: 0, freed: false });
            return Ok(addr as *mut libc::c_void);
        }
    }
    // SAFETY: plain allocation; at least one byte so a zero size gets a freeable pointer.
    let p = unsafe { libc::malloc(size.max(1)) };
    if p.is_null() {
        return Err(Fail::new(abi::ERR_NO_MEM, None, Why::Arg("out of memory")));
    }
    blocks().insert(p as usize, Block { len: size.max(1), fd: -1, windows: 0, freed: false });
    Ok(p)
}

/// Unmaps and closes (or frees) a block out of the registry.
fn release(addr: usize, b: Block) {
    // SAFETY: the block's own memory and descriptor, out of the registry: nothing reaches them.
    unsafe {
        if b.fd < 0 {
            libc::free(addr as *mut libc::c_void);
        } else {
            libc::munmap(addr as *mut libc::c_void, b.len);
            libc::close(b.fd);
        }
    }
}

/// `MPI_Free_mem`.
///
/// # Safety
/// `base` null or an address [`alloc`] gave and not freed since.
pub unsafe fn free(base: *mut libc::c_void) {
    if base.is_null() {
        return;
    }
    let mut b = blocks();
    match b.get_mut(&(base as usize)) {
        Some(blk) if blk.windows > 0 => blk.freed = true,
        Some(_) => {
            if let Some(blk) = b.remove(&(base as usize)) {
                release(base as usize, blk);
            }
        }
        // Not from `MPI_Alloc_mem` (erroneous): left alone rather than handed to `free`.
        None => {}
    }
}

/// Where `[addr, addr + len)` lies in a live memfd block: (its descriptor, offset in it).
pub fn find(addr: usize, len: usize) -> Option<(libc::c_int, usize)> {
    let b = blocks();
    let (&start, blk) = b.range(..=addr).next_back()?;
    let end = addr.checked_add(len)?;
    (blk.fd >= 0 && !blk.freed && end <= start + blk.len).then_some((blk.fd, addr - start))
}

/// A window over the block holding `addr` (found by [`find`]), released when dropped.
#[derive(Debug)]
pub struct InBlock(usize);

/// Counts a window in the block holding `addr` (memfd or `malloc`).
pub fn hold(addr: usize) -> Option<InBlock> {
    let mut b = blocks();
    let (&start, blk) = b.range_mut(..=addr).next_back()?;
    (addr < start + blk.len && !blk.freed).then(|| {
        blk.windows += 1;
        InBlock(start)
    })
}

impl Drop for InBlock {
    fn drop(&mut self) {
        let mut b = blocks();
        let Some(blk) = b.get_mut(&self.0) else { return };
        blk.windows = blk.windows.saturating_sub(1);
        if blk.windows == 0
            && blk.freed
            && let Some(blk) = b.remove(&self.0)
        {
            release(self.0, blk);
        }
    }
}

/// A node peer's window memory mapped here (unmapped when dropped).
#[derive(Debug)]
pub struct PeerMap {
    /// Our mapping: whole pages.
    map: usize,
    len: usize,
    /// Where the peer's window starts in our mapping.
    pub base: usize,
    /// The peer's window base in its own address space (a checkpoint saves it).
    pub peer_base: usize,
}

impl Drop for PeerMap {
    fn drop(&mut self) {
        // SAFETY: our own mapping of this length; the window holding it is gone.
        unsafe { libc::munmap(self.map as *mut libc::c_void, self.len) };
    }
}

/// Maps `size` bytes at offset `off` of descriptor `fd` of process `pid` (its window at
/// `peer_base`), if its file is a sealed block long enough.
pub fn map_peer(pid: u32, fd: i32, off: u64, size: usize, peer_base: usize) -> Option<PeerMap> {
    if fd < 0 || size == 0 {
        return None;
    }
    let pg = page();
    let off = usize::try_from(off).ok()?;
    let first = off - off % pg;
    let len = off.checked_add(size)?.checked_next_multiple_of(pg)? - first;
    let path = std::ffi::CString::new(format!("/proc/{pid}/fd/{fd}")).ok()?;
    // SAFETY: a NUL-terminated path.
    let f = unsafe { libc::open(path.as_ptr(), libc::O_RDWR | libc::O_CLOEXEC) };
    if f < 0 {
        return None;
    }
    // SAFETY: an all-zero `stat` is a valid value to be overwritten; `f` is ours.
    let mut sb: libc::stat = unsafe { std::mem::zeroed() };
    // SAFETY: `f` is ours, `sb` writable.
    let ok = unsafe { libc::fstat(f, &mut sb) } == 0
        && (sb.st_size as u64) >= (first + len) as u64
        // SAFETY: `f` is ours.
        && unsafe { libc::fcntl(f, libc::F_GET_SEALS) } & SEALS == SEALS;
    let p = if ok {
        let prot = libc::PROT_READ | libc::PROT_WRITE;
        // SAFETY: a fresh shared mapping of a file sealed at least this long (checked).
        unsafe { libc::mmap(std::ptr::null_mut(), len, prot, libc::MAP_SHARED, f, first as libc::off_t) }
    } else {
        libc::MAP_FAILED
    };
    // SAFETY: ours; the mapping keeps the file.
    unsafe { libc::close(f) };
    (p != libc::MAP_FAILED).then(|| PeerMap { map: p as usize, len, base: p as usize + (off - first), peer_base })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn blocks_are_found_held_and_freed_last() {
        let p = alloc(100).unwrap() as usize;
        let (fd, off) = find(p + 8, 50).expect("a block");
        assert!(fd >= 0 && off == 8);
        assert!(find(p + 8, page()).is_none(), "past the block's end");
        let held = hold(p + 8).unwrap();
        // SAFETY: from `alloc`.
        unsafe { free(p as *mut libc::c_void) };
        assert!(find(p, 8).is_none(), "a freed block is not offered to new windows");
        // The window still uses it: still mapped.
        // SAFETY: the block is mapped until `held` goes.
        unsafe { (p as *mut u8).write(7) };
        drop(held);
        assert!(blocks().get(&p).is_none(), "released with its last window");
    }

    #[test]
    fn a_peer_maps_a_window_in_a_block_and_sees_its_stores() {
        let p = alloc(3 * page()).unwrap() as usize;
        let at = p + page() + 16;
        let (fd, off) = find(at, 64).unwrap();
        let m = map_peer(std::process::id(), fd, off as u64, 64, at).expect("mapped");
        // SAFETY: both inside the block, mapped.
        unsafe {
            (m.base as *mut u64).write(0x1234);
            assert_eq!((at as *const u64).read(), 0x1234);
        }
        assert!(map_peer(std::process::id(), fd, off as u64, 3 * page(), at).is_none(), "beyond the file");
        drop(m);
        // SAFETY: from `alloc`.
        unsafe { free(p as *mut libc::c_void) };
        assert!(blocks().get(&p).is_none());
    }
}
