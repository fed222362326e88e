//! The remote path: targets on another node, or node peers that refused CMA
//! (`Path::Remote`). Helper R's module: every operation and synchronisation call of the window
//! code reaches a remote target through one of these functions, and nowhere else. Until the
//! remote path lands they refuse with `MPI_ERR_UNSUPPORTED_OPERATION`; the hooks that need no
//! work while no remote operation can exist (fence, flush, free) succeed.

use super::lockword::Kind as LockKind;
use super::rma::Transfer;
use crate::abi;
use crate::error::{Fail, Res, Why};
use crate::state::Access;

#[cold]
fn unsupported() -> Fail {
    Fail::new(
        abi::ERR_UNSUPPORTED_OPERATION,
        None,
        Why::Arg("one-sided communication with a target on another node (or without CMA) is not implemented yet"),
    )
}

/// Issues transfer `x` (already checked) to its remote target.
pub fn issue(acc: &mut Access, h: abi::Win, x: &Transfer) -> Res<()> {
    let _ = (acc, h, x);
    Err(unsupported())
}

/// Takes the passive-target lock of remote target `t` (window rank).
pub fn lock(acc: &mut Access, h: abi::Win, t: u32, kind: LockKind) -> Res<()> {
    let _ = (acc, h, t, kind);
    Err(unsupported())
}

/// Releases the lock of remote target `t` once every operation to it completed there.
pub fn unlock(acc: &mut Access, h: abi::Win, t: u32, kind: LockKind) -> Res<()> {
    let _ = (acc, h, t, kind);
    Err(unsupported())
}

/// Completes every operation issued to remote target `t` (`None`: to every target) at the
/// target (`MPI_Win_flush*`, and before a fence, `MPI_Win_complete` and `MPI_Win_unlock_all`).
pub fn flush(acc: &mut Access, h: abi::Win, t: Option<u32>) -> Res<()> {
    let _ = (acc, h, t);
    Ok(())
}

/// Before `MPI_Win_free`'s final barrier: whatever the remote path keeps for window `h`.
pub fn before_free(acc: &mut Access, h: abi::Win) -> Res<()> {
    let _ = (acc, h);
    Ok(())
}
