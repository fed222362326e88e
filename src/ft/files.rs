//! The fault-tolerance directory and the files made in it, safe from the machine's other users:
//! a directory the ranks make for themselves ([`private_dir`]) is this user's alone (mode 0700,
//! a real directory; one found there already is checked, never trusted); a directory the user
//! names ([`given_dir`]) is refused if another user can write it; files are created new
//! ([`create_new`]: `O_CREAT | O_EXCL | O_NOFOLLOW`, mode 0600 from the start), never opened
//! through a name someone else may have planted.

use std::fs::File;
use std::os::unix::fs::{DirBuilderExt, MetadataExt, OpenOptionsExt, PermissionsExt};
use std::path::Path;

use crate::error::{Error, Result};

pub(crate) mod unsafe_dir;
use unsafe_dir::euid;
pub use unsafe_dir::{DirFault, UnsafeDir};

fn refuse(path: &Path, m: &std::fs::Metadata, fault: DirFault) -> Error {
    Error::FtDir(Box::new(UnsafeDir { path: path.to_owned(), owner: m.uid(), mode: m.mode() & 0o7777, fault }))
}

/// Makes `path` (its parent must exist) for this job's ranks, mode 0700, or takes it if it
/// exists and is already that: a real directory (not a link), this user's, mode 0700 (group and
/// others have no access at all). Anything else is [`Error::FtDir`]. Every rank of a node may
/// call it at once: the first makes it, the others find it.
pub fn private_dir(path: &Path) -> Result<()> {
    match std::fs::DirBuilder::new().mode(0o700).create(path) {
        Ok(()) => {
            // The umask may have taken bits away: the directory is ours, give them back.
            std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o700))
                .map_err(|e| Error::Config(format!("{}: {e}", path.display())))?;
        }
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {}
        Err(e) => {
            return Err(Error::Config(format!("{}={}: cannot create it: {e}", super::ENV_FT_DIR, path.display())));
        }
    }
    let m = std::fs::symlink_metadata(path).map_err(|e| Error::Config(format!("{}: {e}", path.display())))?;
    if m.file_type().is_symlink() {
        return Err(refuse(path, &m, DirFault::Symlink));
    }
    if !m.is_dir() {
        return Err(refuse(path, &m, DirFault::NotADirectory));
    }
    if m.uid() != euid() {
        return Err(refuse(path, &m, DirFault::Owner));
    }
    // The set-group-id bit a parent passes on is harmless; access bits must be exactly 0700.
    if m.mode() & 0o777 != 0o700 {
        return Err(refuse(path, &m, DirFault::NotPrivate));
    }
    Ok(())
}

/// Takes the directory the user named (made, with its missing parents, mode 0700, if it does
/// not exist): refused ([`Error::FtDir`]) if it is not a directory, if it belongs to another user
/// than this one or root, or if its group or other users may write it. A link the user gave is
/// followed (the user chose it).
pub fn given_dir(path: &Path) -> Result<()> {
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(path)
        .map_err(|e| Error::Config(format!("{}={}: cannot create it: {e}", super::ENV_FT_DIR, path.display())))?;
    let m = std::fs::metadata(path).map_err(|e| Error::Config(format!("{}: {e}", path.display())))?;
    if !m.is_dir() {
        return Err(refuse(path, &m, DirFault::NotADirectory));
    }
    if m.uid() != euid() && m.uid() != 0 {
        return Err(refuse(path, &m, DirFault::Owner));
    }
    if m.mode() & 0o022 != 0 {
        return Err(refuse(path, &m, DirFault::Writable));
    }
    Ok(())
}

/// A new file at `path` for writing, mode 0600: never an existing file, and never through a
/// link (`O_EXCL | O_NOFOLLOW`).
pub fn create_new(path: &Path) -> std::io::Result<File> {
    std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC)
        .open(path)
}

/// [`create_new`], where a name left by a crashed earlier attempt (a stale temporary file, or
/// anything else under that name) is removed first: the name itself (a link goes, never what
/// it points to; a directory there is an error).
pub fn create_replacing(path: &Path) -> std::io::Result<File> {
    match create_new(path) {
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {
            std::fs::remove_file(path)?;
            create_new(path)
        }
        r => r,
    }
}

/// Opens `path` for reading, never through a link.
pub fn open_read(path: &Path) -> std::io::Result<File> {
    std::fs::OpenOptions::new().read(true).custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC).open(path)
}

#[cfg(test)]
mod tests {
    use std::path::PathBuf;

    use super::*;

    fn scratch(name: &str) -> PathBuf {
        let d = std::env::temp_dir().join(format!("nemesis-ft-files-test-{}-{name}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        let _ = std::fs::remove_file(&d);
        d
    }

    fn fault(r: Result<()>) -> (DirFault, String) {
        match r {
            Err(Error::FtDir(u)) => (u.fault, Error::FtDir(u).to_string()),
            other => panic!("not refused: {other:?}"),
        }
    }

    #[test]
    fn a_private_directory_is_made_0700_or_taken_only_if_it_is_that() {
        let d = scratch("private");
        private_dir(&d).unwrap();
        let m = std::fs::symlink_metadata(&d).unwrap();
        assert_eq!(m.mode() & 0o777, 0o700);
        // Another rank of the job finds it.
        private_dir(&d).unwrap();
        std::fs::set_permissions(&d, std::fs::Permissions::from_mode(0o755)).unwrap();
        let (f, text) = fault(private_dir(&d));
        assert_eq!(f, DirFault::NotPrivate);
        assert!(text.contains(&d.display().to_string()) && text.contains("mode 0755"), "{text}");
        std::fs::remove_dir(&d).unwrap();
        std::fs::write(&d, b"").unwrap();
        assert_eq!(fault(private_dir(&d)).0, DirFault::NotADirectory);
        std::fs::remove_file(&d).unwrap();
    }

    #[test]
    fn a_given_directory_is_refused_if_others_can_write_it() {
        let base = scratch("given");
        let d = base.join("a/b");
        given_dir(&d).unwrap();
        assert_eq!(std::fs::metadata(&d).unwrap().mode() & 0o777, 0o700);
        // Readable by others is the user's choice; writable is not.
        std::fs::set_permissions(&d, std::fs::Permissions::from_mode(0o755)).unwrap();
        given_dir(&d).unwrap();
        for mode in [0o775, 0o757, 0o1777] {
            std::fs::set_permissions(&d, std::fs::Permissions::from_mode(mode)).unwrap();
            let (f, text) = fault(given_dir(&d));
            assert_eq!(f, DirFault::Writable, "{mode:o}");
            assert!(text.contains(&format!("mode {mode:04o}")) && text.contains("may write it"), "{text}");
        }
        std::fs::remove_dir_all(&base).unwrap();
    }

    #[test]
    fn new_files_are_private_and_never_follow_a_planted_link() {
        let d = scratch("create");
        std::fs::create_dir(&d).unwrap();
        let victim = d.join("victim");
        std::fs::write(&victim, b"precious").unwrap();
        let name = d.join("f");
        std::os::unix::fs::symlink(&victim, &name).unwrap();
        assert_eq!(create_new(&name).unwrap_err().kind(), std::io::ErrorKind::AlreadyExists);
        assert!(open_read(&name).is_err(), "a link is not read through");
        let f = create_replacing(&name).unwrap();
        assert_eq!(f.metadata().unwrap().mode() & 0o777, 0o600);
        assert!(!std::fs::symlink_metadata(&name).unwrap().file_type().is_symlink());
        assert_eq!(std::fs::read(&victim).unwrap(), b"precious");
        std::fs::remove_dir_all(&d).unwrap();
    }
}
