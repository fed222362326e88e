//! A refused fault-tolerance directory, as an error says it: where, whose, its mode, and why
//! ([`crate::Error::FtDir`]); apart from the checks so that the error type needs nothing else.

use std::path::PathBuf;

/// What is wrong with a fault-tolerance directory.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DirFault {
    /// A symbolic link where the ranks make their directory (it would send the files elsewhere).
    Symlink,
    /// Not a directory.
    NotADirectory,
    /// Another user owns it (and can read, replace or remove what is in it).
    Owner,
    /// A directory the ranks make has a mode other than 0700.
    NotPrivate,
    /// The group or others may write it (and plant files or links in it).
    Writable,
}

/// A fault-tolerance directory refused ([`Error::FtDir`]): where, whose, its mode, and why.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct UnsafeDir {
    pub path: PathBuf,
    /// Owner's uid.
    pub owner: u32,
    /// Permission bits (`st_mode & 0o7777`).
    pub mode: u32,
    pub fault: DirFault,
}

impl std::fmt::Display for UnsafeDir {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let me = euid();
        write!(
            f,
            "fault-tolerance directory {} (owner {}, mode {:04o}) refused: ",
            self.path.display(),
            user(self.owner),
            self.mode
        )?;
        match self.fault {
            DirFault::Symlink => f.write_str(
                "it is a symbolic link, not a directory this job made: its files would go where the link says",
            ),
            DirFault::NotADirectory => f.write_str("it is not a directory"),
            DirFault::Owner => write!(
                f,
                "it belongs to another user than this process's ({}), who could read, replace or remove its checkpoints",
                user(me)
            ),
            DirFault::NotPrivate => f.write_str(
                "the directory the ranks make for themselves must have mode 0700 (made by another program, or by \
                 an older version?)",
            ),
            DirFault::Writable => f.write_str(
                "the group or other users may write it, and could plant files or links where checkpoints go \
                 (chmod go-w, or another directory)",
            ),
        }?;
        write!(f, "; remove it, or name a directory of this user's in {}", crate::contract::ENV_FT_DIR)
    }
}

impl std::error::Error for UnsafeDir {}

/// This process's effective uid.
pub(super) fn euid() -> u32 {
    // SAFETY: `geteuid` takes no argument and cannot fail.
    unsafe { libc::geteuid() }
}

/// `uid N (name)`, or `uid N` where the user database has no name for it.
fn user(uid: u32) -> String {
    // SAFETY: `passwd` is plain data (integers and pointers): all zeros is a valid value.
    let mut pw: libc::passwd = unsafe { std::mem::zeroed() };
    let mut buf = vec![0 as libc::c_char; 1024];
    let mut found: *mut libc::passwd = std::ptr::null_mut();
    // SAFETY: every pointer is to a live local of the length given; `getpwuid_r` writes the
    // entry's strings into `buf` and points `found` at `pw` or leaves it null.
    let rc = unsafe { libc::getpwuid_r(uid, &mut pw, buf.as_mut_ptr(), buf.len(), &mut found) };
    if rc != 0 || found.is_null() || pw.pw_name.is_null() {
        return format!("uid {uid}");
    }
    // SAFETY: on success `pw_name` points at a NUL-terminated string inside `buf`, alive here.
    let name = unsafe { std::ffi::CStr::from_ptr(pw.pw_name) };
    format!("uid {uid} ({})", name.to_string_lossy())
}
