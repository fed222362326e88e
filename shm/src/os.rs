//! The few operating-system calls the segment needs, kept in one place: `memfd_create`,
//! `shm_open`, backing-store reservation, pidfds.

use std::ffi::CString;
use std::fs::File;
use std::io;
use std::os::fd::{AsFd, AsRawFd, FromRawFd, OwnedFd, RawFd};

use crate::error::{Error, Result};

fn last_os_error(op: &'static str) -> Error {
    Error::io(op, io::Error::last_os_error())
}

/// An anonymous memory file, close-on-exec (see [`inheritable`] to pass it to children), that
/// can be sealed ([`seal_size`]).
pub fn memfd(name: &str) -> Result<OwnedFd> {
    let cname = CString::new(name).map_err(|_| Error::InvalidParams("memfd name contains NUL".into()))?;
    // SAFETY: `cname` is a valid C string; the returned descriptor is owned by us.
    let fd = unsafe { libc::memfd_create(cname.as_ptr(), libc::MFD_CLOEXEC | libc::MFD_ALLOW_SEALING) };
    if fd < 0 {
        return Err(last_os_error("memfd_create"));
    }
    // SAFETY: `fd` is a fresh descriptor nobody else owns.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// A new POSIX shared-memory object with an unpredictable name, created exclusively with mode
/// 0600. Returns the descriptor and the name (with its leading `/`).
pub fn shm_create_exclusive(prefix: &str) -> Result<(OwnedFd, String)> {
    for _ in 0..16 {
        let name = format!("/{prefix}-{:016x}{:016x}", random_u64()?, random_u64()?);
        let cname = CString::new(name.clone()).map_err(|_| Error::InvalidParams("shm name contains NUL".into()))?;
        // SAFETY: `cname` is a valid C string.
        let fd = unsafe {
            libc::shm_open(cname.as_ptr(), libc::O_CREAT | libc::O_EXCL | libc::O_RDWR | libc::O_CLOEXEC, 0o600)
        };
        if fd >= 0 {
            // SAFETY: fresh descriptor.
            return Ok((unsafe { OwnedFd::from_raw_fd(fd) }, name));
        }
        let err = io::Error::last_os_error();
        if err.raw_os_error() != Some(libc::EEXIST) {
            return Err(Error::io("shm_open(O_CREAT|O_EXCL)", err));
        }
    }
    Err(Error::io("shm_open: no unused name found", io::Error::from_raw_os_error(libc::EEXIST)))
}

/// Opens an existing shared-memory object read-write.
pub fn shm_open_existing(name: &str) -> Result<OwnedFd> {
    let cname = CString::new(name).map_err(|_| Error::InvalidParams("shm name contains NUL".into()))?;
    // SAFETY: `cname` is a valid C string.
    let fd = unsafe { libc::shm_open(cname.as_ptr(), libc::O_RDWR | libc::O_CLOEXEC, 0) };
    if fd < 0 {
        return Err(last_os_error("shm_open"));
    }
    // SAFETY: fresh descriptor.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// Removes a shared-memory object's name. Missing names are not an error.
pub fn shm_unlink(name: &str) -> Result<()> {
    let cname = CString::new(name).map_err(|_| Error::InvalidParams("shm name contains NUL".into()))?;
    // SAFETY: `cname` is a valid C string.
    if unsafe { libc::shm_unlink(cname.as_ptr()) } != 0 {
        let err = io::Error::last_os_error();
        if err.raw_os_error() != Some(libc::ENOENT) {
            return Err(Error::io("shm_unlink", err));
        }
    }
    Ok(())
}

/// Sizes `fd` to `len` bytes and reserves its backing store, so that touching any page later
/// cannot fail with SIGBUS. A full tmpfs or a memory limit gives [`Error::NoSpace`].
pub fn reserve(fd: &impl AsFd, len: u64) -> Result<()> {
    let raw = fd.as_fd().as_raw_fd();
    let off_len = libc::off_t::try_from(len).map_err(|_| Error::InvalidParams(format!("segment of {len} bytes")))?;
    // SAFETY: plain syscall on a descriptor we hold.
    let rc = unsafe { libc::posix_fallocate(raw, 0, off_len) };
    match rc {
        0 => Ok(()),
        libc::ENOSPC | libc::ENOMEM | libc::EFBIG | libc::EDQUOT => {
            Err(Error::NoSpace { bytes: len, source: io::Error::from_raw_os_error(rc) })
        }
        _ => Err(Error::io("posix_fallocate", io::Error::from_raw_os_error(rc))),
    }
}

/// Size of the file behind `fd`.
pub fn file_size(fd: &impl AsFd) -> Result<u64> {
    let file = File::from(fd.as_fd().try_clone_to_owned().map_err(|e| Error::io("dup", e))?);
    Ok(file.metadata().map_err(|e| Error::io("fstat", e))?.len())
}

/// The seals of a sized segment: its size can never change again (one `ftruncate` by a faulty
/// process would otherwise give every rank SIGBUS), and no other seal can be added (a write
/// seal would make later mappings fail).
const SIZE_SEALS: libc::c_int = libc::F_SEAL_SHRINK | libc::F_SEAL_GROW | libc::F_SEAL_SEAL;

/// Seals the size of the memory file `fd` (see [`SIZE_SEALS`]).
pub fn seal_size(fd: &impl AsFd) -> Result<()> {
    // SAFETY: fcntl on a descriptor we hold; no memory is passed.
    if unsafe { libc::fcntl(fd.as_fd().as_raw_fd(), libc::F_ADD_SEALS, SIZE_SEALS) } != 0 {
        return Err(last_os_error("fcntl(F_ADD_SEALS)"));
    }
    Ok(())
}

/// True if the memory file `fd` carries the size seals of [`seal_size`].
pub fn size_sealed(fd: &impl AsFd) -> Result<bool> {
    // SAFETY: fcntl on a descriptor we hold; no memory is passed.
    let seals = unsafe { libc::fcntl(fd.as_fd().as_raw_fd(), libc::F_GET_SEALS) };
    if seals < 0 {
        return Err(last_os_error("fcntl(F_GET_SEALS)"));
    }
    Ok(seals & SIZE_SEALS == SIZE_SEALS)
}

/// Sets close-on-exec on `fd`: a program the process starts (`system()`, `exec`) does not
/// inherit it.
pub fn set_cloexec(fd: RawFd) -> Result<()> {
    // SAFETY: fcntl on a descriptor the caller holds; no memory is passed.
    let flags = unsafe { libc::fcntl(fd, libc::F_GETFD) };
    if flags < 0 {
        return Err(last_os_error("fcntl(F_GETFD)"));
    }
    // SAFETY: as above.
    if unsafe { libc::fcntl(fd, libc::F_SETFD, flags | libc::FD_CLOEXEC) } < 0 {
        return Err(last_os_error("fcntl(F_SETFD)"));
    }
    Ok(())
}

/// Clears close-on-exec so that children started with `exec` inherit `fd`.
pub fn inheritable(fd: RawFd) -> Result<()> {
    // SAFETY: fcntl on a descriptor the caller holds; no memory is passed.
    let flags = unsafe { libc::fcntl(fd, libc::F_GETFD) };
    if flags < 0 {
        return Err(last_os_error("fcntl(F_GETFD)"));
    }
    // SAFETY: as above.
    if unsafe { libc::fcntl(fd, libc::F_SETFD, flags & !libc::FD_CLOEXEC) } < 0 {
        return Err(last_os_error("fcntl(F_SETFD)"));
    }
    Ok(())
}

/// 64 random bits from the kernel.
pub fn random_u64() -> Result<u64> {
    let mut b = [0u8; 8];
    // SAFETY: writes at most 8 bytes into `b`.
    let n = unsafe { libc::getrandom(b.as_mut_ptr().cast(), b.len(), 0) };
    if n != 8 {
        return Err(last_os_error("getrandom"));
    }
    Ok(u64::from_ne_bytes(b))
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
        let mut p = libc::pollfd { fd: self.0.as_raw_fd(), events: libc::POLLIN, revents: 0 };
        // SAFETY: one valid pollfd, zero timeout.
        let n = unsafe { libc::poll(&mut p, 1, 0) };
        n > 0 && p.revents & (libc::POLLIN | libc::POLLHUP | libc::POLLERR) != 0
    }
}
