//! What a `coll` run measured ([`Outcome`]): the members, the rank counts, the rows (collective
//! × size) and every round's time, with the summaries the reports and plots take from them
//! (medians, ratios to [`REFERENCE`], the median of per-round ratios).

use crate::report::REFERENCE;
use crate::stats::{Summary, finite, paired_ratio};
use crate::system::{Family, Skipped};

/// The collectives of `mpi_coll.c`, in its order.
pub const COLLECTIVES: [&str; 8] =
    ["barrier", "bcast", "reduce", "allreduce", "alltoall", "allgather", "gather", "scatter"];

/// One measured system.
#[derive(Clone, Debug)]
pub struct Member {
    pub name: String,
    pub family: Family,
    pub detail: String,
    /// How its ranks waited, per rank count of the plan (or why it was not run on that many).
    pub waits: Vec<String>,
}

/// Everything a `coll` run measured.
#[derive(Clone, Debug)]
pub struct Outcome {
    pub members: Vec<Member>,
    pub skipped: Vec<Skipped>,
    pub ranks: Vec<u32>,
    pub rows: Vec<(&'static str, usize)>,
    /// `values[m][k][j][r]`: member `m`, rank count `k`, row `j`, round `r` (µs; NaN where missing).
    pub values: Vec<Vec<Vec<Vec<f64>>>>,
    pub failures: Vec<String>,
    pub rounds: usize,
    /// The CPUs the ranks were bound to.
    pub cpus: Vec<usize>,
}

impl Outcome {
    /// The index of Open MPI among the members, if it was measured.
    pub fn reference(&self) -> Option<usize> {
        self.members.iter().position(|m| m.name == REFERENCE)
    }

    /// The median [min..max] of member `m` on rank count `k`, row `j`.
    pub fn figure(&self, m: usize, k: usize, j: usize) -> Option<Summary> {
        finite(&self.values[m][k][j])
    }

    /// Member `m`'s per-round ratio to Open MPI on rank count `k`, row `j`, summarised (none for
    /// Open MPI itself).
    pub fn to_reference(&self, m: usize, k: usize, j: usize) -> Option<Summary> {
        let r = self.reference().filter(|&r| r != m)?;
        paired_ratio(&self.values[m][k][j], &self.values[r][k][j])
    }
}
