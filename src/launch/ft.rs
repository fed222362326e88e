//! The launcher's part of fault tolerance for the failure-free path: the job's groups (a groups
//! file, consecutive blocks, or the bisection of chapter 4 over a communication matrix), checked
//! before any rank starts, and the checkpoint directory (made for the job, mode 0700, and removed
//! after it, unless `NEMESIS_FT_DIR` names one: that one is refused if another user can write it,
//! `crate::ft::files`). Ranks learn both through the environment (`NEMESIS_FT_GROUPS`,
//! `NEMESIS_FT_DIR`), as they would under another process manager.

use std::path::{Path, PathBuf};

use nemesis_ft::GroupId;
use nemesis_ft::matrix::CommMatrix;
use nemesis_ft::partition::{self, Bisector, CostModel};

use crate::contract::{ENV_FT_DIR, ENV_FT_GROUPS};
use crate::error::{Error, Result};
use crate::ft::{files, read_groups};

/// Where a job's fault-tolerance groups come from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FtGroups {
    /// A groups file (`nemesis-run --ft FILE`): `<rank> <group>` lines, as `nemesis-ft groups` prints.
    File(PathBuf),
    /// `k` groups of consecutive ranks (`--ft-groups K`).
    Blocks(u32),
    /// The bisection of chapter 4 over a communication matrix (`--ft-matrix FILE`): into `k` groups
    /// (`--ft-groups K`), or as many as the HydEE cost function chooses.
    Matrix { file: PathBuf, groups: Option<u32> },
}

/// What the launcher set up for a fault-tolerant job.
#[derive(Debug)]
pub(crate) struct FtSetup {
    /// Variables for every rank.
    pub env: Vec<(String, PathBuf)>,
    /// A directory made for the job, removed after it.
    pub made_dir: Option<PathBuf>,
    /// The group of each rank.
    pub group_of: Vec<GroupId>,
}

impl FtSetup {
    /// Removes what was made for the job.
    pub(crate) fn finish(self) {
        if let Some(d) = self.made_dir
            && let Err(e) = std::fs::remove_dir_all(&d)
        {
            tracing::warn!(error = %e, dir = %d.display(), "could not remove the job's fault-tolerance directory");
        }
    }
}

fn cfg(msg: String) -> Error {
    Error::Config(msg)
}

/// The groups of a job of `ranks` ranks, checked (every rank exactly once).
pub(crate) fn resolve(groups: &FtGroups, ranks: u32) -> Result<Vec<GroupId>> {
    let n = ranks as usize;
    match groups {
        FtGroups::File(p) => read_groups(p, n),
        FtGroups::Blocks(k) => nemesis_ft::topology::blocks(n, *k as usize)
            .map_err(|_| cfg(format!("--ft-groups {k}: a job of {ranks} ranks has 1 to {ranks} groups"))),
        FtGroups::Matrix { file, groups } => {
            let text = std::fs::read_to_string(file).map_err(|e| cfg(format!("{}: {e}", file.display())))?;
            let m = CommMatrix::from_csv(&text).map_err(|e| cfg(format!("{}: {e}", file.display())))?;
            if m.ranks() != n {
                return Err(cfg(format!("{}: a matrix of {} ranks for a job of {ranks}", file.display(), m.ranks())));
            }
            let g = match groups {
                Some(k) => partition::group_k(&m, *k as usize, Bisector::Native),
                None => partition::group(&m, CostModel::default(), Bisector::Native),
            }
            .map_err(|e| cfg(format!("grouping {}: {e}", file.display())))?;
            tracing::info!(
                groups = g.groups,
                restart_share = g.evaluation.restart_share,
                logged_share = g.evaluation.logged_share,
                "fault-tolerance groups from the communication matrix"
            );
            Ok(g.group_of)
        }
    }
}

/// The groups file text of `group_of`.
fn groups_text(group_of: &[GroupId]) -> String {
    group_of.iter().enumerate().map(|(r, g)| format!("{r} {g}\n")).collect()
}

/// Checks the groups and prepares the directory and the variables of a job of `ranks` ranks.
/// `env` holds the job's own variables (a `NEMESIS_FT_DIR` there or in the launcher's
/// environment is used as it is).
pub(crate) fn setup(
    groups: &FtGroups,
    ranks: u32,
    env: &[(std::ffi::OsString, std::ffi::OsString)],
) -> Result<FtSetup> {
    let group_of = resolve(groups, ranks)?;
    let given = env
        .iter()
        .rev()
        .find(|(k, _)| k == ENV_FT_DIR)
        .map(|(_, v)| PathBuf::from(v))
        .or_else(|| std::env::var_os(ENV_FT_DIR).map(PathBuf::from))
        .filter(|p| !p.as_os_str().is_empty());
    let (dir, made_dir) = match given {
        Some(d) => {
            files::given_dir(&d)?;
            (d, None)
        }
        None => {
            let d = make_job_dir()?;
            (d.clone(), Some(d))
        }
    };
    let dir = absolute(&dir)?;
    let groups_file = match groups {
        FtGroups::File(p) => absolute(p)?,
        _ => {
            let p = dir.join("groups");
            std::fs::write(&p, groups_text(&group_of)).map_err(|e| cfg(format!("{}: {e}", p.display())))?;
            p
        }
    };
    Ok(FtSetup { env: vec![(ENV_FT_GROUPS.into(), groups_file), (ENV_FT_DIR.into(), dir)], made_dir, group_of })
}

fn absolute(p: &Path) -> Result<PathBuf> {
    std::path::absolute(p).map_err(|e| cfg(format!("{}: {e}", p.display())))
}

/// A fresh directory for the job's checkpoints: `$TMPDIR/nemesis-ft-<pid>-<n>`, mode 0700. A name
/// taken already (by anyone: a directory, a file, a link) is skipped, never used; the one made is
/// checked as the ranks check it ([`files::private_dir`]).
fn make_job_dir() -> Result<PathBuf> {
    use std::os::unix::fs::DirBuilderExt;
    let base = std::env::temp_dir();
    for n in 0..1000u32 {
        let d = base.join(format!("nemesis-ft-{}-{n}", std::process::id()));
        match std::fs::DirBuilder::new().mode(0o700).create(&d) {
            Ok(()) => {
                files::private_dir(&d)?;
                return Ok(d);
            }
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => continue,
            Err(e) => return Err(Error::io("creating the checkpoint directory", e)),
        }
    }
    Err(cfg(format!("no free name for a checkpoint directory in {}", base.display())))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn groups_from_each_source() {
        assert_eq!(resolve(&FtGroups::Blocks(2), 4).unwrap(), vec![0, 0, 1, 1]);
        assert!(matches!(resolve(&FtGroups::Blocks(5), 4), Err(Error::Config(_))));
        let dir = std::env::temp_dir().join(format!("nemesis-launch-ft-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let m = dir.join("m.csv");
        // Two pairs talking inside themselves.
        std::fs::write(&m, "0,9,0,0\n9,0,0,0\n0,0,0,9\n0,0,9,0\n").unwrap();
        let g = resolve(&FtGroups::Matrix { file: m.clone(), groups: None }, 4).unwrap();
        assert_eq!(g, vec![0, 0, 1, 1]);
        assert_eq!(resolve(&FtGroups::Matrix { file: m.clone(), groups: Some(1) }, 4).unwrap(), vec![0; 4]);
        let e = resolve(&FtGroups::Matrix { file: m, groups: None }, 5).unwrap_err().to_string();
        assert!(e.contains("4 ranks for a job of 5"), "{e}");
        let f = dir.join("g");
        std::fs::write(&f, "0 0\n1 0\n2 1\n").unwrap();
        let e = resolve(&FtGroups::File(f.clone()), 4).unwrap_err().to_string();
        assert!(e.contains("rank 3") && e.contains(&f.display().to_string()), "{e}");
        let s = setup(&FtGroups::Blocks(2), 4, &[]).unwrap();
        let made = s.made_dir.clone().unwrap();
        let groups = std::fs::read_to_string(made.join("groups")).unwrap();
        assert_eq!(groups, "0 0\n1 0\n2 1\n3 1\n");
        s.finish();
        assert!(!made.exists());
        std::fs::remove_dir_all(&dir).unwrap();
    }

    /// `setup` with `NEMESIS_FT_DIR` set to `d` in the job's variables.
    fn setup_in(d: &Path) -> Result<FtSetup> {
        setup(&FtGroups::Blocks(2), 4, &[(ENV_FT_DIR.into(), d.as_os_str().to_owned())])
    }

    #[test]
    fn a_given_directory_other_users_can_write_is_refused() {
        use std::os::unix::fs::PermissionsExt;
        let d = std::env::temp_dir().join(format!("nemesis-launch-ft-given-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir(&d).unwrap();
        std::fs::set_permissions(&d, std::fs::Permissions::from_mode(0o777)).unwrap();
        let e = setup_in(&d).unwrap_err();
        let Error::FtDir(u) = &e else { panic!("{e}") };
        assert_eq!((u.fault, u.mode), (files::DirFault::Writable, 0o777));
        assert!(e.to_string().contains(&d.display().to_string()), "{e}");
        assert!(!d.join("groups").exists(), "nothing was written into it");
        // Another user's (as root in CI: `nobody`'s), even without write access for others.
        std::fs::set_permissions(&d, std::fs::Permissions::from_mode(0o755)).unwrap();
        if std::os::unix::fs::chown(&d, Some(65534), Some(65534)).is_ok() {
            let e = setup_in(&d).unwrap_err();
            let Error::FtDir(u) = &e else { panic!("{e}") };
            assert_eq!((u.fault, u.owner), (files::DirFault::Owner, 65534));
            assert!(e.to_string().contains("uid 65534"), "{e}");
        } else {
            eprintln!("not root: the other-owner case is not tried");
        }
        // The user's own, not writable by others: taken, and left after the job.
        // SAFETY: `geteuid` takes no argument and cannot fail.
        let me = unsafe { libc::geteuid() };
        std::os::unix::fs::chown(&d, Some(me), None).unwrap();
        let s = setup_in(&d).unwrap();
        assert!(s.made_dir.is_none());
        s.finish();
        assert!(d.join("groups").exists());
        std::fs::remove_dir_all(&d).unwrap();
    }
}
