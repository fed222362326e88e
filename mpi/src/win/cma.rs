//! The single copy into and out of a node peer's private window memory (`MPI_Win_create` and
//! dynamic windows): `process_vm_writev`/`process_vm_readv` (Cross-Memory Attach). Every such
//! system call of the window code is made here. A creation probes each peer once
//! (`create::cma_allowed`); a peer that refuses (ptrace scope, another user, a container) is
//! reached by the remote path instead.

use std::io;

use super::rma::{Kind, Transfer, blocks, pair_blocks};
use crate::abi;
use crate::error::{Fail, Res, Why};

/// Most iovecs one call takes (`IOV_MAX`).
const IOV_MAX: usize = 1024;

#[cold]
fn failed(e: io::Error) -> Fail {
    Fail::new(abi::ERR_OTHER, None, Why::Other(format!("single copy with a node peer failed: {e}")))
}

/// One vectored call, all of it (the kernel may stop early at an iovec boundary: the rest is
/// retried; a call that moves nothing fails).
fn vectored(pid: u32, write: bool, local: &[libc::iovec], remote: &[libc::iovec]) -> Res<()> {
    if pid == 0 {
        let why = "the node peer has not called MPIX_Checkpoint_restore yet (its pid is not published)";
        return Err(Fail::new(abi::ERR_OTHER, None, Why::Arg(why)));
    }
    let total: usize = local.iter().map(|v| v.iov_len).sum();
    if total == 0 {
        return Ok(());
    }
    let mut done = call(pid, write, local, remote)?;
    while done < total {
        // Skip what went already.
        let (mut l, mut r) = (local.to_vec(), remote.to_vec());
        for v in [&mut l, &mut r] {
            let mut skip = done;
            while skip > 0 && !v.is_empty() {
                if v[0].iov_len <= skip {
                    skip -= v[0].iov_len;
                    v.remove(0);
                } else {
                    v[0].iov_base = (v[0].iov_base as usize + skip) as *mut libc::c_void;
                    v[0].iov_len -= skip;
                    skip = 0;
                }
            }
        }
        done += call(pid, write, &l, &r)?;
    }
    Ok(())
}

/// One system call: the bytes it moved (at least one).
#[inline]
fn call(pid: u32, write: bool, l: &[libc::iovec], r: &[libc::iovec]) -> Res<usize> {
    // SAFETY: the local iovecs describe the program's buffers (MPI's contract: valid for the
    // operation), the remote ones the peer's window, range-checked by `rma::prepare` or the fast
    // path's `reach`; the kernel checks the peer's side against its address space and our
    // permission.
    let n = unsafe {
        if write {
            libc::process_vm_writev(pid as libc::pid_t, l.as_ptr(), l.len() as _, r.as_ptr(), r.len() as _, 0)
        } else {
            libc::process_vm_readv(pid as libc::pid_t, l.as_ptr(), l.len() as _, r.as_ptr(), r.len() as _, 0)
        }
    };
    if n <= 0 {
        return Err(failed(if n < 0 { io::Error::last_os_error() } else { io::ErrorKind::WriteZero.into() }));
    }
    Ok(n as usize)
}

/// `bytes` contiguous bytes between `local` and address `remote` of process `pid` (`write`: to
/// it), by one system call when the kernel moves them all at once (the fast paths' put/get).
pub fn dense(pid: u32, write: bool, local: *mut u8, remote: usize, bytes: usize) -> Res<()> {
    let l = [libc::iovec { iov_base: local.cast(), iov_len: bytes }];
    let r = [libc::iovec { iov_base: remote as *mut libc::c_void, iov_len: bytes }];
    vectored(pid, write, &l, &r)
}

/// A Put (write) or Get (read) of transfer `x` with process `pid`, whose window starts at
/// `base` (0: dynamic).
pub fn put_get(pid: u32, base: usize, x: &Transfer) -> Res<()> {
    let tbase = base.wrapping_add_signed(x.disp);
    let (tb, ob) = (blocks(&x.tside), blocks(&x.origin));
    let (mut local, mut remote) = (Vec::new(), Vec::new());
    let write = x.kind == Kind::Put;
    let mut res = Ok(());
    pair_blocks(&tb, &ob, |t, o, n| {
        local.push(libc::iovec { iov_base: x.origin.addr.wrapping_offset(o).cast(), iov_len: n });
        remote.push(libc::iovec { iov_base: (tbase.wrapping_add_signed(t)) as *mut libc::c_void, iov_len: n });
        if local.len() == IOV_MAX && res.is_ok() {
            res = vectored(pid, write, &local, &remote);
            local.clear();
            remote.clear();
        }
    });
    res?;
    if !local.is_empty() {
        vectored(pid, write, &local, &remote)?;
    }
    Ok(())
}

/// Reads `buf.len()` bytes at `addr` in process `pid`.
pub fn read(pid: u32, addr: usize, buf: &mut [u8]) -> Res<()> {
    let l = [libc::iovec { iov_base: buf.as_mut_ptr().cast(), iov_len: buf.len() }];
    let r = [libc::iovec { iov_base: addr as *mut libc::c_void, iov_len: buf.len() }];
    vectored(pid, false, &l, &r)
}

/// Writes `buf` at `addr` in process `pid`.
pub fn write(pid: u32, addr: usize, buf: &[u8]) -> Res<()> {
    let l = [libc::iovec { iov_base: buf.as_ptr() as *mut libc::c_void, iov_len: buf.len() }];
    let r = [libc::iovec { iov_base: addr as *mut libc::c_void, iov_len: buf.len() }];
    vectored(pid, true, &l, &r)
}
