//! Topology mapping (MPI-4.1 §8.5.8): `MPI_Cart_map` and `MPI_Graph_map`. nemesis never
//! reorders ranks (the topology constructors keep the old rank), so the mapping is the identity
//! on the first ranks and `MPI_UNDEFINED` for the ranks outside the grid or graph, as MPICH's.

use std::ffi::c_int;

use super::{ints, put, running};
use crate::abi::{self, Comm as CommH};
use crate::error::{Fail, Res, Why};
use crate::p2p::intra_at;
use crate::state::Access;

/// The rank this process takes in a topology of `nodes` nodes over a communicator of `size`
/// where it has rank `rank`: itself, or `MPI_UNDEFINED` outside.
fn identity(rank: u32, nodes: c_int) -> c_int {
    if (rank as c_int) < nodes { rank as c_int } else { abi::UNDEFINED }
}

/// `MPI_Cart_map`: a grid of `dims` (with `periods`, which change nothing here).
///
/// # Safety
/// `dims` and `periods` readable for `ndims` ints; `newrank` null or writable.
pub unsafe fn cart_map(
    acc: &mut Access,
    comm: CommH,
    ndims: c_int,
    dims: *const c_int,
    _periods: *const c_int,
    newrank: *mut c_int,
) -> Res<()> {
    let st = running(acc)?;
    let (ci, c) = intra_at(&st.comms, comm)?;
    let (rank, size) = (c.rank, c.size);
    if ndims < 0 {
        return Err(Fail::new(abi::ERR_ARG, Some(ci), Why::Arg("negative ndims")));
    }
    // SAFETY: MPI's contract.
    let dims = unsafe { ints(dims, ndims as usize) }.map_err(|e| e.on(ci))?;
    // An empty dimension makes an empty grid: every rank is outside (as MPICH).
    if dims.iter().any(|&d| d < 0) {
        return Err(Fail::new(abi::ERR_DIMS, Some(ci), Why::Arg("a negative dimension")));
    }
    let nodes = dims.iter().try_fold(1 as c_int, |a, &d| a.checked_mul(d)).filter(|&n| n as u32 <= size);
    let nodes =
        nodes.ok_or_else(|| Fail::new(abi::ERR_DIMS, Some(ci), Why::Arg("the grid is larger than the group")))?;
    // SAFETY: the caller's contract.
    unsafe { put(newrank, identity(rank, nodes)) }.map_err(|e| e.on(ci))
}

/// `MPI_Graph_map`: a graph of `nnodes` nodes (`index` and `edges` as `MPI_Graph_create`'s,
/// not read: the mapping does not depend on them).
///
/// # Safety
/// `newrank` null or writable.
pub unsafe fn graph_map(
    acc: &mut Access,
    comm: CommH,
    nnodes: c_int,
    index: *const c_int,
    edges: *const c_int,
    newrank: *mut c_int,
) -> Res<()> {
    let st = running(acc)?;
    let (ci, c) = intra_at(&st.comms, comm)?;
    let (rank, size) = (c.rank, c.size);
    if nnodes < 0 {
        return Err(Fail::new(abi::ERR_ARG, Some(ci), Why::Arg("negative nnodes")));
    }
    if nnodes as u32 > size {
        return Err(Fail::new(abi::ERR_ARG, Some(ci), Why::Arg("the graph has more nodes than the group")));
    }
    // The edges play no part in an identity mapping; MPICH does not check them either.
    let _ = (index, edges);
    // SAFETY: the caller's contract.
    unsafe { put(newrank, identity(rank, nnodes)) }.map_err(|e| e.on(ci))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ranks_outside_the_topology_are_undefined() {
        assert_eq!(identity(0, 1), 0);
        assert_eq!(identity(3, 4), 3);
        assert_eq!(identity(4, 4), abi::UNDEFINED);
    }
}
