//! METIS as `BISSECT` (Fig 4.3 line 6; T:973 names METIS next to the Scotch the thesis used), through the `metis`
//! crate, which builds METIS from vendored sources: the `metis` feature needs a C compiler, no system library.
//!
//! METIS takes integer edge weights that must sum below 2³¹ (32-bit `idx_t` in the vendored build): byte volumes
//! are scaled so that the total weight is 2²⁸, each non-zero weight kept at least 1.

use crate::bisection::Graph;
use crate::{Error, Result};

/// Splits `g` into two sides with METIS's recursive bisection, each side at most `balance` times half the
/// vertex weight.
pub(crate) fn bisect(g: &Graph, balance: f64) -> Result<Vec<u8>> {
    let n = g.n();
    if n <= 1 {
        return Ok(vec![0; n]);
    }
    let to_idx = |x: usize| metis::Idx::try_from(x).map_err(|_| Error::Partitioner("graph too large for METIS".into()));
    let xadj = g.xadj.iter().map(|&x| to_idx(x)).collect::<Result<Vec<_>>>()?;
    let adjncy = g.adj.iter().map(|&v| to_idx(v as usize)).collect::<Result<Vec<_>>>()?;
    let total: f64 = g.w.iter().sum();
    let scale = if total > 0.0 { f64::from(1u32 << 28) / total } else { 1.0 };
    let adjwgt: Vec<metis::Idx> = g.w.iter().map(|&w| ((w * scale).round() as metis::Idx).max(1)).collect();
    let vwgt = g.vw.iter().map(|&w| to_idx(w as usize)).collect::<Result<Vec<_>>>()?;
    let ubvec = [balance as metis::Real];
    let mut part = vec![0 as metis::Idx; n];
    metis::Graph::new(1, 2, &xadj, &adjncy)
        .map_err(|e| Error::Partitioner(format!("METIS input: {e:?}")))?
        .set_adjwgt(&adjwgt)
        .set_vwgt(&vwgt)
        .set_ubvec(&ubvec)
        .set_option(metis::option::Seed(1))
        .part_recursive(&mut part)
        .map_err(|e| Error::Partitioner(format!("METIS: {e:?}")))?;
    Ok(part.into_iter().map(|p| u8::from(p != 0)).collect())
}
