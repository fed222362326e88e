//! A window's synchronisation state at one process (MPI-4.1 §12.5): which access epochs are
//! open (fence, general active target, passive target per target or on all) and whether an
//! exposure epoch is (post/wait). Pure bookkeeping: the calls in [`super::sync`] check a
//! transition here, do the synchronisation, then record it; an operation asks
//! [`Epoch::may_access`] first. A wrong sequence is `MPI_ERR_RMA_SYNC`.

use std::collections::BTreeMap;

use super::lockword::Kind;

/// A passive-target lock this process holds on one target.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Held {
    pub kind: Kind,
    /// Taken with `MPI_MODE_NOCHECK`: no lock word was touched.
    pub nocheck: bool,
}

/// The epochs open at this process on one window.
#[derive(Clone, Debug, Default)]
pub struct Epoch {
    /// A fence opened an epoch that the next fence closes (not after `MPI_MODE_NOSUCCEED`).
    pub fence: bool,
    /// Operations were issued in the current fence epoch (a lock or start then conflicts).
    pub fence_used: bool,
    /// `MPI_Win_start`'s targets (window ranks), until `MPI_Win_complete`.
    pub access: Option<Vec<u32>>,
    /// `MPI_Win_post`'s origins (window ranks), until `MPI_Win_wait` or a successful test.
    pub exposure: Option<Vec<u32>>,
    /// `MPI_Win_lock`'s targets.
    pub locks: BTreeMap<u32, Held>,
    /// `MPI_Win_lock_all` is in force (`Some(nocheck)`).
    pub lock_all: Option<bool>,
}

/// A transition refused: why (for `MPI_ERR_RMA_SYNC`).
pub type Refused = &'static str;

impl Epoch {
    /// True if an operation to target `t` is inside an access epoch.
    pub fn may_access(&self, t: u32) -> bool {
        self.fence
            || self.lock_all.is_some()
            || self.locks.contains_key(&t)
            || self.access.as_ref().is_some_and(|g| g.contains(&t))
    }

    /// True if target `t` is in a passive-target epoch (flush applies).
    pub fn passive(&self, t: u32) -> bool {
        self.lock_all.is_some() || self.locks.contains_key(&t)
    }

    /// True if any passive epoch is open.
    pub fn any_passive(&self) -> bool {
        self.lock_all.is_some() || !self.locks.is_empty()
    }

    /// A fence may close a fence epoch and open the next.
    pub fn check_fence(&self) -> Result<(), Refused> {
        if self.access.is_some() || self.exposure.is_some() {
            return Err("MPI_Win_fence inside a post/start epoch");
        }
        if self.any_passive() {
            return Err("MPI_Win_fence inside a passive-target (lock) epoch");
        }
        Ok(())
    }

    /// A fence happened; `succeed`: not `MPI_MODE_NOSUCCEED` (an epoch follows).
    pub fn fenced(&mut self, succeed: bool) {
        self.fence = succeed;
        self.fence_used = false;
    }

    /// The fence epoch ends implicitly if nothing used it (a lock or a start may follow a fence
    /// that opened an epoch no operation used, as after the first fence of a program).
    fn leave_unused_fence(&mut self) -> Result<(), Refused> {
        if self.fence && self.fence_used {
            return Err("a fence epoch with operations is open (close it with a fence)");
        }
        self.fence = false;
        Ok(())
    }

    /// `MPI_Win_start` may open an access epoch.
    pub fn check_start(&mut self) -> Result<(), Refused> {
        if self.access.is_some() {
            return Err("MPI_Win_start while an access epoch (start) is open");
        }
        if self.any_passive() {
            return Err("MPI_Win_start inside a passive-target epoch");
        }
        self.leave_unused_fence()
    }

    /// `MPI_Win_post` may open an exposure epoch.
    pub fn check_post(&mut self) -> Result<(), Refused> {
        if self.exposure.is_some() {
            return Err("MPI_Win_post while an exposure epoch is open");
        }
        self.leave_unused_fence()
    }

    /// `MPI_Win_lock` of target `t` may open a passive epoch.
    pub fn check_lock(&mut self, t: u32) -> Result<(), Refused> {
        if self.locks.contains_key(&t) {
            return Err("the target is locked already by this process");
        }
        if self.lock_all.is_some() {
            return Err("MPI_Win_lock inside MPI_Win_lock_all");
        }
        if self.access.is_some() {
            return Err("MPI_Win_lock inside a start/complete epoch");
        }
        self.leave_unused_fence()
    }

    /// `MPI_Win_lock_all` may open a passive epoch on every target.
    pub fn check_lock_all(&mut self) -> Result<(), Refused> {
        if self.any_passive() {
            return Err("MPI_Win_lock_all while a lock is held");
        }
        if self.access.is_some() {
            return Err("MPI_Win_lock_all inside a start/complete epoch");
        }
        self.leave_unused_fence()
    }

    /// An operation to a target went out in the current epoch.
    pub fn used(&mut self) {
        if self.fence {
            self.fence_used = true;
        }
    }

    /// `MPI_Win_free` may free the window: no epoch is open but a fence's.
    pub fn check_free(&self) -> Result<(), Refused> {
        if self.access.is_some() || self.exposure.is_some() || self.any_passive() {
            return Err("MPI_Win_free with an epoch open (unlock, complete or wait first)");
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn epochs_open_and_close_in_the_standard_order() {
        let mut e = Epoch::default();
        assert!(!e.may_access(0));
        e.check_fence().unwrap();
        e.fenced(true);
        assert!(e.may_access(3));
        // An unused fence epoch gives way to a lock.
        e.check_lock(1).unwrap();
        e.locks.insert(1, Held { kind: Kind::Shared, nocheck: false });
        assert!(e.may_access(1) && !e.may_access(2));
        assert!(e.check_lock(1).is_err(), "locked twice");
        assert!(e.check_fence().is_err());
        assert!(e.check_lock_all().is_err());
        assert!(e.check_free().is_err());
        e.locks.remove(&1);
        e.check_fence().unwrap();
        e.fenced(true);
        e.used();
        assert!(e.check_lock(0).is_err(), "a used fence epoch must be closed by a fence");
        assert!(e.check_start().is_err());
        e.fenced(false);
        e.check_start().unwrap();
        e.access = Some(vec![2]);
        assert!(e.may_access(2) && !e.may_access(1));
        assert!(e.check_start().is_err(), "start twice");
        e.check_post().unwrap();
        e.exposure = Some(vec![2]);
        assert!(e.check_post().is_err());
        assert!(e.check_free().is_err());
        e.access = None;
        e.exposure = None;
        e.check_free().unwrap();
        e.check_lock_all().unwrap();
        e.lock_all = Some(false);
        assert!(e.passive(5) && e.may_access(5));
        assert!(e.check_lock(5).is_err());
    }
}
