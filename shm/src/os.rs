//! The few operating-system calls the segment needs, kept in one place: `memfd_create`,
//! `shm_open`, backing-store reservation, pidfds.
//!
//! Through `nix` where it has the call (memfd, shm_open/unlink, posix_fallocate, fcntl, poll):
//! no `unsafe` here for them. `libc` stays for what nix 0.31 lacks: `getrandom` and
//! `pidfd_open` (a raw `syscall`).

use std::fs::File;
use std::io;
use std::os::fd::{AsFd, BorrowedFd, FromRawFd, OwnedFd, RawFd};

use nix::errno::Errno;
use nix::fcntl::{FcntlArg, FdFlag, OFlag, SealFlag, fcntl};
use nix::poll::{PollFd, PollFlags, PollTimeout, poll};
use nix::sys::memfd::{MFdFlags, memfd_create};
use nix::sys::stat::Mode;

use crate::error::{Error, Result};

fn os_error(op: &'static str, e: Errno) -> Error {
    Error::io(op, io::Error::from(e))
}

/// `name` as a C string may hold no NUL.
fn no_nul<'a>(name: &'a str, what: &str) -> Result<&'a str> {
    if name.contains('\0') {
        return Err(Error::InvalidParams(format!("{what} name contains NUL")));
    }
    Ok(name)
}

/// An anonymous memory file, close-on-exec (see [`inheritable`] to pass it to children), that
/// can be sealed ([`seal_size`]).
pub fn memfd(name: &str) -> Result<OwnedFd> {
    memfd_create(no_nul(name, "memfd")?, MFdFlags::MFD_CLOEXEC | MFdFlags::MFD_ALLOW_SEALING)
        .map_err(|e| os_error("memfd_create", e))
}

/// A new POSIX shared-memory object with an unpredictable name, created exclusively with mode
/// 0600. Returns the descriptor and the name (with its leading `/`).
pub fn shm_create_exclusive(prefix: &str) -> Result<(OwnedFd, String)> {
    for _ in 0..16 {
        let name = format!("/{prefix}-{:016x}{:016x}", random_u64()?, random_u64()?);
        let flags = OFlag::O_CREAT | OFlag::O_EXCL | OFlag::O_RDWR | OFlag::O_CLOEXEC;
        match nix::sys::mman::shm_open(no_nul(&name, "shm")?, flags, Mode::S_IRUSR | Mode::S_IWUSR) {
            Ok(fd) => return Ok((fd, name)),
            Err(Errno::EEXIST) => continue,
            Err(e) => return Err(os_error("shm_open(O_CREAT|O_EXCL)", e)),
        }
    }
    Err(os_error("shm_open: no unused name found", Errno::EEXIST))
}

/// Opens an existing shared-memory object read-write.
pub fn shm_open_existing(name: &str) -> Result<OwnedFd> {
    nix::sys::mman::shm_open(no_nul(name, "shm")?, OFlag::O_RDWR | OFlag::O_CLOEXEC, Mode::empty())
        .map_err(|e| os_error("shm_open", e))
}

/// Removes a shared-memory object's name. Missing names are not an error.
pub fn shm_unlink(name: &str) -> Result<()> {
    match nix::sys::mman::shm_unlink(no_nul(name, "shm")?) {
        Ok(()) | Err(Errno::ENOENT) => Ok(()),
        Err(e) => Err(os_error("shm_unlink", e)),
    }
}

/// Sizes `fd` to `len` bytes and reserves its backing store, so that touching any page later
/// cannot fail with SIGBUS. A full tmpfs or a memory limit gives [`Error::NoSpace`].
pub fn reserve(fd: &impl AsFd, len: u64) -> Result<()> {
    let off_len = libc::off_t::try_from(len).map_err(|_| Error::InvalidParams(format!("segment of {len} bytes")))?;
    match nix::fcntl::posix_fallocate(fd.as_fd(), 0, off_len) {
        Ok(()) => Ok(()),
        Err(e @ (Errno::ENOSPC | Errno::ENOMEM | Errno::EFBIG | Errno::EDQUOT)) => {
            Err(Error::NoSpace { bytes: len, source: io::Error::from(e) })
        }
        Err(e) => Err(os_error("posix_fallocate", e)),
    }
}

/// `mbind`'s `MPOL_PREFERRED`: allocate on the given node, elsewhere if it is full.
const MPOL_PREFERRED: libc::c_int = 1;
/// `get_mempolicy`'s flag: the policy of the range holding `addr`.
const MPOL_F_ADDR: libc::c_ulong = 1 << 1;
/// NUMA nodes a node mask here can name.
const MAX_NODES: usize = 1024;

/// Sets the memory policy of `len` bytes at `addr` (page-aligned, inside a shared mapping) to
/// "preferably on NUMA node `node`" (`mbind(MPOL_PREFERRED)`). On a shared mapping of a memfd or
/// shm object the policy belongs to the object's pages, whoever faults or reserves them later
/// (Linux's shared policy of tmpfs): so it is set before the memory is reserved.
///
/// # Safety
/// `addr..addr + len` must be a mapping the caller owns: the policy of whatever is mapped there
/// changes (never its contents).
pub unsafe fn prefer_node(addr: *mut u8, len: usize, node: u32) -> io::Result<()> {
    if node as usize >= MAX_NODES {
        return Err(io::Error::new(io::ErrorKind::InvalidInput, format!("NUMA node {node} beyond {MAX_NODES}")));
    }
    let mut mask = [0u64; MAX_NODES / 64];
    mask[node as usize / 64] |= 1 << (node % 64);
    // SAFETY: mbind reads `mask` (MAX_NODES bits) and changes only the policy of the caller's
    // mapping at `addr..addr + len`, never its contents.
    let rc = unsafe {
        libc::syscall(libc::SYS_mbind, addr, len, MPOL_PREFERRED, mask.as_ptr(), MAX_NODES as libc::c_ulong, 0u32)
    };
    if rc != 0 { Err(io::Error::last_os_error()) } else { Ok(()) }
}

/// The node the memory policy of the page at `addr` prefers, if its policy is `MPOL_PREFERRED`
/// (`get_mempolicy(MPOL_F_ADDR)`).
///
/// # Safety
/// `addr` must lie in a mapping of this process (the kernel only reads its policy; an unmapped
/// address is an `EFAULT` error).
pub unsafe fn preferred_node(addr: *const u8) -> io::Result<Option<u32>> {
    let mut mode: libc::c_int = 0;
    let mut mask = [0u64; MAX_NODES / 64];
    // SAFETY: get_mempolicy writes `mode` and at most MAX_NODES bits into `mask`; it only reads
    // the policy of the mapping at `addr`.
    let rc = unsafe {
        libc::syscall(
            libc::SYS_get_mempolicy,
            &mut mode as *mut libc::c_int,
            mask.as_mut_ptr(),
            MAX_NODES as libc::c_ulong,
            addr,
            MPOL_F_ADDR,
        )
    };
    if rc != 0 {
        return Err(io::Error::last_os_error());
    }
    if mode != MPOL_PREFERRED {
        return Ok(None);
    }
    Ok((0..MAX_NODES).find(|&n| mask[n / 64] & (1 << (n % 64)) != 0).map(|n| n as u32))
}

/// The NUMA node holding the page at `addr` (`move_pages` in query mode), once it is allocated.
pub fn node_of_page(addr: *const u8) -> io::Result<u32> {
    let pages = [addr as *mut libc::c_void];
    let mut status = [0 as libc::c_int];
    // SAFETY: move_pages with a null node list only queries: it writes one status for one page.
    let rc = unsafe {
        libc::syscall(
            libc::SYS_move_pages,
            0,
            1 as libc::c_ulong,
            pages.as_ptr(),
            std::ptr::null::<libc::c_int>(),
            status.as_mut_ptr(),
            0,
        )
    };
    if rc != 0 {
        return Err(io::Error::last_os_error());
    }
    if status[0] < 0 {
        return Err(io::Error::from_raw_os_error(-status[0]));
    }
    Ok(status[0] as u32)
}

/// Size of the file behind `fd`.
pub fn file_size(fd: &impl AsFd) -> Result<u64> {
    let file = File::from(fd.as_fd().try_clone_to_owned().map_err(|e| Error::io("dup", e))?);
    Ok(file.metadata().map_err(|e| Error::io("fstat", e))?.len())
}

/// The seals of a sized segment: its size can never change again (one `ftruncate` by a faulty
/// process would otherwise give every rank SIGBUS), and no other seal can be added (a write
/// seal would make later mappings fail).
const SIZE_SEALS: SealFlag = SealFlag::F_SEAL_SHRINK.union(SealFlag::F_SEAL_GROW).union(SealFlag::F_SEAL_SEAL);

/// Seals the size of the memory file `fd` (see `SIZE_SEALS`).
pub fn seal_size(fd: &impl AsFd) -> Result<()> {
    fcntl(fd.as_fd(), FcntlArg::F_ADD_SEALS(SIZE_SEALS)).map_err(|e| os_error("fcntl(F_ADD_SEALS)", e))?;
    Ok(())
}

/// True if the memory file `fd` carries the size seals of [`seal_size`].
pub fn size_sealed(fd: &impl AsFd) -> Result<bool> {
    let seals = fcntl(fd.as_fd(), FcntlArg::F_GET_SEALS).map_err(|e| os_error("fcntl(F_GET_SEALS)", e))?;
    Ok(SealFlag::from_bits_retain(seals).contains(SIZE_SEALS))
}

/// Sets close-on-exec on `fd`: a program the process starts (`system()`, `exec`) does not
/// inherit it.
pub fn set_cloexec(fd: RawFd) -> Result<()> {
    // SAFETY: the caller holds `fd` open for the duration of this call.
    let fd = unsafe { BorrowedFd::borrow_raw(fd) };
    let flags = fcntl(fd, FcntlArg::F_GETFD).map_err(|e| os_error("fcntl(F_GETFD)", e))?;
    let flags = FdFlag::from_bits_retain(flags) | FdFlag::FD_CLOEXEC;
    fcntl(fd, FcntlArg::F_SETFD(flags)).map_err(|e| os_error("fcntl(F_SETFD)", e))?;
    Ok(())
}

/// Clears close-on-exec so that children started with `exec` inherit `fd`.
pub fn inheritable(fd: impl AsFd) -> Result<()> {
    let flags = fcntl(fd.as_fd(), FcntlArg::F_GETFD).map_err(|e| os_error("fcntl(F_GETFD)", e))?;
    let flags = FdFlag::from_bits_retain(flags) - FdFlag::FD_CLOEXEC;
    fcntl(fd.as_fd(), FcntlArg::F_SETFD(flags)).map_err(|e| os_error("fcntl(F_SETFD)", e))?;
    Ok(())
}

/// 64 random bits from the kernel (`libc`: nix has no `getrandom`).
pub fn random_u64() -> Result<u64> {
    let mut b = [0u8; 8];
    random_bytes(&mut b)?;
    Ok(u64::from_ne_bytes(b))
}

/// Fills `buf` from the kernel's random source (`getrandom`, blocking until it is seeded).
pub fn random_bytes(buf: &mut [u8]) -> Result<()> {
    let mut done = 0;
    while done < buf.len() {
        let rest = &mut buf[done..];
        // SAFETY: writes at most `rest.len()` bytes into `rest`.
        let n = unsafe { libc::getrandom(rest.as_mut_ptr().cast(), rest.len(), 0) };
        if n < 0 {
            let e = io::Error::last_os_error();
            if e.kind() == io::ErrorKind::Interrupted {
                continue;
            }
            return Err(Error::io("getrandom", e));
        }
        done += n as usize;
    }
    Ok(())
}

/// Start time of process `pid` in clock ticks since boot (`/proc/<pid>/stat`, field 22), to tell a
/// process from a later one that reused its pid.
pub fn process_start_time(pid: u32) -> Option<u64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The command name (field 2) may contain spaces and parentheses: fields resume after the
    // last ')'.
    let rest = &stat[stat.rfind(')')? + 1..];
    rest.split_ascii_whitespace().nth(19)?.parse().ok()
}

/// The identity of this process's pid namespace: the inode of `/proc/self/ns/pid` (0 if `/proc`
/// cannot tell). Two processes see each other's pids alike only if these are equal.
pub fn pid_namespace() -> u64 {
    use std::os::unix::fs::MetadataExt;
    std::fs::metadata("/proc/self/ns/pid").map_or(0, |m| m.ino())
}

/// A pidfd: a handle on a process that cannot be confused with a later process of the same pid.
#[derive(Debug)]
pub struct PidFd(OwnedFd);

impl PidFd {
    /// Opens a pidfd on `pid`. `None` if the process no longer exists.
    pub fn open(pid: u32) -> Result<Option<PidFd>> {
        // `libc`: nix 0.31 has no pidfd_open.
        // SAFETY: plain syscall with integer arguments.
        let fd = unsafe { libc::syscall(libc::SYS_pidfd_open, pid as libc::pid_t, 0) };
        if fd < 0 {
            let err = io::Error::last_os_error();
            return match err.raw_os_error() {
                Some(libc::ESRCH) => Ok(None),
                _ => Err(Error::io("pidfd_open", err)),
            };
        }
        // SAFETY: fresh descriptor.
        Ok(Some(PidFd(unsafe { OwnedFd::from_raw_fd(fd as RawFd) })))
    }

    /// True once the process has exited (the pidfd polls readable).
    pub fn exited(&self) -> bool {
        let mut p = [PollFd::new(self.0.as_fd(), PollFlags::POLLIN)];
        let ready = PollFlags::POLLIN | PollFlags::POLLHUP | PollFlags::POLLERR;
        poll(&mut p, PollTimeout::ZERO).is_ok_and(|n| n > 0) && p[0].revents().is_some_and(|r| r.intersects(ready))
    }
}
