//! Process topologies (MPI-3.1 §7): Cartesian (`MPI_Dims_create`, `MPI_Cart_*`,
//! `MPI_Cartdim_get`), graph (`MPI_Graph_*`, `MPI_Graphdims_get`) and distributed graph
//! (`MPI_Dist_graph_create(_adjacent)`, `MPI_Dist_graph_neighbors(_count)`) communicators,
//! `MPI_Topo_test`, and the neighbour lists the neighbourhood collectives use. A topology is the communicator's description only: ranks are never
//! reordered (`reorder` is allowed to be ignored), the new communicator is a split of the old one.
//! The mapping calls (`MPI_Cart_map`, `MPI_Graph_map`) are in [`map`].

use std::ffi::c_int;
use std::sync::Arc;

use crate::abi::{self, Comm as CommH};
use crate::comm::{index_of, split};
use crate::error::{Fail, Res, Why};
use crate::p2p::intra_at;
use crate::state::{Access, State, not_running};

pub mod map;
pub use map::{cart_map, graph_map};

/// `MPI_GRAPH`, `MPI_CART`, `MPI_DIST_GRAPH` (MPICH's `MPIR_Topo_type`).
pub const GRAPH: c_int = 1;
pub const CART: c_int = 2;
pub const DIST_GRAPH: c_int = 3;

/// A communicator's topology.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Topo {
    /// Dimensions (row-major: the last varies fastest) and periodicity.
    Cart { dims: Vec<c_int>, periods: Vec<bool> },
    /// MPI's graph arrays: `index[i]` is the end of node `i`'s neighbours in `edges`.
    Graph { index: Vec<c_int>, edges: Vec<c_int> },
    /// This rank's part of a distributed graph: its in- and out-neighbours (communicator
    /// ranks, in order, repeats allowed) and their weights (`None`: unweighted).
    DistGraph { sources: Vec<c_int>, destinations: Vec<c_int>, weights: Option<(Vec<c_int>, Vec<c_int>)> },
}

impl Topo {
    /// The Cartesian coordinates of rank `r`.
    pub fn coords(dims: &[c_int], mut r: c_int) -> Vec<c_int> {
        let mut c = vec![0; dims.len()];
        for i in (0..dims.len()).rev() {
            let d = dims[i].max(1);
            c[i] = r % d;
            r /= d;
        }
        c
    }

    /// The rank at `coords` (periodic dimensions wrap; `None` outside a non-periodic one).
    pub fn rank_of(dims: &[c_int], periods: &[bool], coords: &[c_int]) -> Option<c_int> {
        let mut r: c_int = 0;
        for i in 0..dims.len() {
            let d = dims[i];
            let mut c = coords[i];
            if periods[i] {
                c = c.rem_euclid(d);
            } else if !(0..d).contains(&c) {
                return None;
            }
            r = r * d + c;
        }
        Some(r)
    }
}

/// Balanced factors for `MPI_Dims_create`: the zero entries of `dims` get factors of `nnodes`
/// divided by the product of the others, as close to each other as can be, in non-increasing
/// order (each prime factor, largest first, goes to the smallest of them).
pub fn dims_create(nnodes: c_int, dims: &mut [c_int]) -> Res<()> {
    let bad = |what| Fail::new(abi::ERR_DIMS, None, Why::Arg(what));
    if nnodes < 1 || dims.iter().any(|&d| d < 0) {
        return Err(bad("MPI_Dims_create: a negative size or dimension"));
    }
    let fixed: i64 = dims.iter().filter(|&&d| d > 0).map(|&d| i64::from(d)).product();
    if i64::from(nnodes) % fixed != 0 {
        return Err(bad("MPI_Dims_create: the given dimensions do not divide the number of nodes"));
    }
    let mut left = nnodes / fixed as c_int;
    let free: Vec<usize> = (0..dims.len()).filter(|&i| dims[i] == 0).collect();
    if free.is_empty() {
        return if left == 1 { Ok(()) } else { Err(bad("MPI_Dims_create: the dimensions do not multiply up")) };
    }
    let mut primes = Vec::new();
    let mut p = 2;
    while p * p <= left {
        while left % p == 0 {
            primes.push(p);
            left /= p;
        }
        p += 1;
    }
    if left > 1 {
        primes.push(left);
    }
    let mut f = vec![1; free.len()];
    for &q in primes.iter().rev() {
        if let Some(i) = (0..f.len()).min_by_key(|&i| f[i]) {
            f[i] *= q;
        }
    }
    f.sort_unstable_by(|a, b| b.cmp(a));
    for (k, &i) in free.iter().enumerate() {
        dims[i] = f[k];
    }
    Ok(())
}

/// `MPI_Dims_create`.
///
/// # Safety
/// `dims` readable and writable for `ndims` ints.
pub unsafe fn dims_create_c(nnodes: c_int, ndims: c_int, dims: *mut c_int) -> Res<()> {
    if ndims < 0 || (ndims > 0 && dims.is_null()) {
        return Err(Fail::new(abi::ERR_DIMS, None, Why::Arg("bad ndims or dims")));
    }
    // SAFETY: MPI's contract: `ndims` ints.
    let d = if ndims == 0 { &mut [][..] } else { unsafe { std::slice::from_raw_parts_mut(dims, ndims as usize) } };
    dims_create(nnodes, d)
}

/// Reads `n` ints at `p` (null for none).
///
/// # Safety
/// `p` readable for `n` ints if `n > 0`.
pub(crate) unsafe fn ints(p: *const c_int, n: usize) -> Res<Vec<c_int>> {
    if n == 0 {
        return Ok(Vec::new());
    }
    if p.is_null() {
        return Err(Fail::new(abi::ERR_ARG, None, Why::Arg("null array")));
    }
    // SAFETY: the caller's contract.
    Ok(unsafe { std::slice::from_raw_parts(p, n) }.to_vec())
}

/// The first `n` members of `comm_old` form the new communicator (by split: the others get
/// `MPI_COMM_NULL`), which then gets topology `t`.
///
/// # Safety
/// `out` null or writable.
unsafe fn make(acc: &mut Access, comm_old: CommH, n: c_int, t: Topo, out: *mut CommH) -> Res<()> {
    let st = running(acc)?;
    let (ci, c) = intra_at(&st.comms, comm_old)?;
    if n < 0 || n as u32 > c.size {
        return Err(Fail::new(abi::ERR_ARG, Some(ci), Why::Arg("the topology has more nodes than the communicator")));
    }
    if out.is_null() {
        return Err(Fail::new(abi::ERR_ARG, Some(ci), Why::Arg("null output pointer")));
    }
    let color = if (c.rank as c_int) < n { 0 } else { abi::UNDEFINED };
    let key = c.rank as c_int;
    // SAFETY: checked non-null.
    unsafe { split(acc, comm_old, color, key, out) }?;
    // SAFETY: written by split.
    let h = unsafe { *out };
    if h != abi::COMM_NULL {
        let st = acc.st();
        let i = index_of(h);
        Arc::make_mut(&mut st.comms[i]).topo = Some(Arc::new(t));
        st.refresh_fast(i);
    }
    Ok(())
}

pub(crate) fn running(acc: &mut Access) -> Res<&mut State> {
    let st = acc.st();
    if st.ep.is_none() {
        return Err(not_running(st.phase));
    }
    Ok(st)
}

/// `MPI_Cart_create`.
///
/// # Safety
/// `dims` and `periods` readable for `ndims` ints; `out` null or writable.
pub unsafe fn cart_create(
    acc: &mut Access,
    comm_old: CommH,
    ndims: c_int,
    dims: *const c_int,
    periods: *const c_int,
    _reorder: c_int,
    out: *mut CommH,
) -> Res<()> {
    if ndims < 0 {
        return Err(Fail::new(abi::ERR_DIMS, None, Why::Arg("negative ndims")));
    }
    let n = ndims as usize;
    // SAFETY: MPI's contract.
    let (dims, periods) = unsafe { (ints(dims, n)?, ints(periods, n)?) };
    if dims.iter().any(|&d| d <= 0) {
        return Err(Fail::new(abi::ERR_DIMS, None, Why::Arg("a dimension below 1")));
    }
    let size = dims.iter().try_fold(1 as c_int, |a, &d| a.checked_mul(d));
    let size = size.ok_or_else(|| Fail::new(abi::ERR_DIMS, None, Why::Arg("too many nodes")))?;
    let t = Topo::Cart { dims, periods: periods.iter().map(|&p| p != 0).collect() };
    // SAFETY: the caller's contract.
    unsafe { make(acc, comm_old, size, t, out) }
}

/// `MPI_Graph_create`.
///
/// # Safety
/// `index` readable for `nnodes` ints, `edges` for `index[nnodes - 1]`; `out` null or writable.
pub unsafe fn graph_create(
    acc: &mut Access,
    comm_old: CommH,
    nnodes: c_int,
    index: *const c_int,
    edges: *const c_int,
    _reorder: c_int,
    out: *mut CommH,
) -> Res<()> {
    if nnodes < 0 {
        return Err(Fail::new(abi::ERR_ARG, None, Why::Arg("negative nnodes")));
    }
    // SAFETY: MPI's contract.
    let index = unsafe { ints(index, nnodes as usize)? };
    let nedges = index.last().copied().unwrap_or(0);
    let monotone = index.windows(2).all(|w| w[0] <= w[1]) && index.first().is_none_or(|&i| i >= 0);
    if nedges < 0 || !monotone {
        return Err(Fail::new(abi::ERR_ARG, None, Why::Arg("a bad graph index")));
    }
    // SAFETY: MPI's contract.
    let edges = unsafe { ints(edges, nedges as usize)? };
    if edges.iter().any(|&e| !(0..nnodes).contains(&e)) {
        return Err(Fail::new(abi::ERR_RANK, None, Why::Arg("a graph edge to no node")));
    }
    // SAFETY: the caller's contract.
    unsafe { make(acc, comm_old, nnodes, Topo::Graph { index, edges }, out) }
}

/// The topology of `comm`, and its index.
fn topo_of(st: &State, comm: CommH) -> Res<(usize, Option<Arc<Topo>>)> {
    let (ci, c) = intra_at(&st.comms, comm)?;
    Ok((ci, c.topo.clone()))
}

#[cold]
fn not_cart(ci: usize) -> Fail {
    Fail::new(abi::ERR_TOPOLOGY, Some(ci), Why::Arg("not a Cartesian communicator"))
}

#[cold]
fn not_graph(ci: usize) -> Fail {
    Fail::new(abi::ERR_TOPOLOGY, Some(ci), Why::Arg("not a graph communicator"))
}

fn cart(st: &State, comm: CommH) -> Res<(usize, Vec<c_int>, Vec<bool>)> {
    match topo_of(st, comm)? {
        (ci, Some(t)) => match &*t {
            Topo::Cart { dims, periods } => Ok((ci, dims.clone(), periods.clone())),
            _ => Err(not_cart(ci)),
        },
        (ci, None) => Err(not_cart(ci)),
    }
}

fn graph(st: &State, comm: CommH) -> Res<(usize, Vec<c_int>, Vec<c_int>)> {
    match topo_of(st, comm)? {
        (ci, Some(t)) => match &*t {
            Topo::Graph { index, edges } => Ok((ci, index.clone(), edges.clone())),
            _ => Err(not_graph(ci)),
        },
        (ci, None) => Err(not_graph(ci)),
    }
}

/// Writes `v` to the first `max` ints at `p`.
///
/// # Safety
/// `p` writable for `min(max, v.len())` ints.
unsafe fn put_ints(p: *mut c_int, max: c_int, v: &[c_int]) -> Res<()> {
    let n = v.len().min(usize::try_from(max).unwrap_or(0));
    if n > 0 && p.is_null() {
        return Err(Fail::new(abi::ERR_ARG, None, Why::Arg("null output array")));
    }
    for (i, &x) in v.iter().take(n).enumerate() {
        // SAFETY: the caller's contract.
        unsafe { *p.add(i) = x };
    }
    Ok(())
}

/// Writes one int.
///
/// # Safety
/// `p` null or writable.
pub(crate) unsafe fn put(p: *mut c_int, v: c_int) -> Res<()> {
    if p.is_null() {
        return Err(Fail::new(abi::ERR_ARG, None, Why::Arg("null output pointer")));
    }
    // SAFETY: checked non-null; MPI's contract.
    unsafe { *p = v };
    Ok(())
}

/// `MPI_Topo_test`.
///
/// # Safety
/// `status` null or writable.
pub unsafe fn topo_test(acc: &mut Access, comm: CommH, status: *mut c_int) -> Res<()> {
    let st = running(acc)?;
    let v = match crate::p2p::comm_at(&st.comms, comm)?.1.topo.as_deref() {
        Some(Topo::Cart { .. }) => CART,
        Some(Topo::Graph { .. }) => GRAPH,
        Some(Topo::DistGraph { .. }) => DIST_GRAPH,
        None => abi::UNDEFINED,
    };
    // SAFETY: the caller's contract.
    unsafe { put(status, v) }
}

/// `MPI_Cartdim_get`.
///
/// # Safety
/// `ndims` null or writable.
pub unsafe fn cartdim_get(acc: &mut Access, comm: CommH, ndims: *mut c_int) -> Res<()> {
    let (_, dims, _) = cart(running(acc)?, comm)?;
    // SAFETY: the caller's contract.
    unsafe { put(ndims, dims.len() as c_int) }
}

/// `MPI_Cart_get`.
///
/// # Safety
/// The three arrays writable for `maxdims` ints.
pub unsafe fn cart_get(
    acc: &mut Access,
    comm: CommH,
    maxdims: c_int,
    dims: *mut c_int,
    periods: *mut c_int,
    coords: *mut c_int,
) -> Res<()> {
    let st = running(acc)?;
    let (ci, d, p) = cart(st, comm)?;
    let me = st.comms[ci].rank as c_int;
    let pv: Vec<c_int> = p.iter().map(|&x| c_int::from(x)).collect();
    // SAFETY: the caller's contract.
    unsafe {
        put_ints(dims, maxdims, &d)?;
        put_ints(periods, maxdims, &pv)?;
        put_ints(coords, maxdims, &Topo::coords(&d, me))
    }
}

/// `MPI_Cart_rank`.
///
/// # Safety
/// `coords` readable for the communicator's dimensions; `rank` null or writable.
pub unsafe fn cart_rank(acc: &mut Access, comm: CommH, coords: *const c_int, rank: *mut c_int) -> Res<()> {
    let (ci, d, p) = cart(running(acc)?, comm)?;
    // SAFETY: MPI's contract.
    let c = unsafe { ints(coords, d.len())? };
    let r = Topo::rank_of(&d, &p, &c)
        .ok_or_else(|| Fail::new(abi::ERR_ARG, Some(ci), Why::Arg("coordinates outside a non-periodic dimension")))?;
    // SAFETY: the caller's contract.
    unsafe { put(rank, r) }
}

/// `MPI_Cart_coords`.
///
/// # Safety
/// `coords` writable for `maxdims` ints.
pub unsafe fn cart_coords(acc: &mut Access, comm: CommH, rank: c_int, maxdims: c_int, coords: *mut c_int) -> Res<()> {
    let st = running(acc)?;
    let (ci, d, _) = cart(st, comm)?;
    if rank < 0 || rank as u32 >= st.comms[ci].size {
        return Err(Fail::new(abi::ERR_RANK, Some(ci), Why::Rank { rank, size: st.comms[ci].size }));
    }
    // SAFETY: the caller's contract.
    unsafe { put_ints(coords, maxdims, &Topo::coords(&d, rank)) }
}

/// `MPI_Cart_shift`: the ranks `disp` behind and ahead along `direction` (`MPI_PROC_NULL`
/// past the edge of a non-periodic dimension).
///
/// # Safety
/// `source` and `dest` null or writable.
pub unsafe fn cart_shift(
    acc: &mut Access,
    comm: CommH,
    direction: c_int,
    disp: c_int,
    source: *mut c_int,
    dest: *mut c_int,
) -> Res<()> {
    let st = running(acc)?;
    let (ci, d, p) = cart(st, comm)?;
    let dir = usize::try_from(direction).ok().filter(|&k| k < d.len());
    let dir = dir.ok_or_else(|| Fail::new(abi::ERR_DIMS, Some(ci), Why::Arg("direction outside the dimensions")))?;
    let me = Topo::coords(&d, st.comms[ci].rank as c_int);
    let at = |delta: c_int| {
        let mut c = me.clone();
        c[dir] = c[dir].saturating_add(delta);
        Topo::rank_of(&d, &p, &c).unwrap_or(abi::PROC_NULL)
    };
    // SAFETY: the caller's contract.
    unsafe {
        put(source, at(disp.saturating_neg()))?;
        put(dest, at(disp))
    }
}

/// `MPI_Cart_sub`: the members that agree on the dropped coordinates form a communicator with
/// the remaining dimensions.
///
/// # Safety
/// `remain` readable for the communicator's dimensions; `out` null or writable.
pub unsafe fn cart_sub(acc: &mut Access, comm: CommH, remain: *const c_int, out: *mut CommH) -> Res<()> {
    let st = running(acc)?;
    let (ci, d, p) = cart(st, comm)?;
    // SAFETY: MPI's contract.
    let keep = unsafe { ints(remain, d.len())? };
    let me = Topo::coords(&d, st.comms[ci].rank as c_int);
    let (mut color, mut key) = (0 as c_int, 0 as c_int);
    let (mut nd, mut np) = (Vec::new(), Vec::new());
    for i in 0..d.len() {
        if keep[i] != 0 {
            key = key * d[i] + me[i];
            nd.push(d[i]);
            np.push(p[i]);
        } else {
            color = color * d[i] + me[i];
        }
    }
    if out.is_null() {
        return Err(Fail::new(abi::ERR_ARG, Some(ci), Why::Arg("null output pointer")));
    }
    // SAFETY: checked non-null.
    unsafe { split(acc, comm, color, key, out) }?;
    // SAFETY: written by split.
    let h = unsafe { *out };
    let st = acc.st();
    let i = index_of(h);
    // A sub-grid of no dimensions is a single process (MPI-3.1 §7.5.7): still Cartesian.
    Arc::make_mut(&mut st.comms[i]).topo = Some(Arc::new(Topo::Cart { dims: nd, periods: np }));
    st.refresh_fast(i);
    Ok(())
}

/// `MPI_Graphdims_get`.
///
/// # Safety
/// Both outputs null or writable.
pub unsafe fn graphdims_get(acc: &mut Access, comm: CommH, nnodes: *mut c_int, nedges: *mut c_int) -> Res<()> {
    let (_, index, edges) = graph(running(acc)?, comm)?;
    // SAFETY: the caller's contract.
    unsafe {
        put(nnodes, index.len() as c_int)?;
        put(nedges, edges.len() as c_int)
    }
}

/// `MPI_Graph_get`.
///
/// # Safety
/// `index` writable for `maxindex` ints, `edges` for `maxedges`.
pub unsafe fn graph_get(
    acc: &mut Access,
    comm: CommH,
    maxindex: c_int,
    maxedges: c_int,
    index: *mut c_int,
    edges: *mut c_int,
) -> Res<()> {
    let (_, i, e) = graph(running(acc)?, comm)?;
    // SAFETY: the caller's contract.
    unsafe {
        put_ints(index, maxindex, &i)?;
        put_ints(edges, maxedges, &e)
    }
}

/// The neighbours of graph node `rank`.
fn neighbours(ci: usize, index: &[c_int], edges: &[c_int], rank: c_int) -> Res<Vec<c_int>> {
    let r = usize::try_from(rank).ok().filter(|&r| r < index.len());
    let r = r.ok_or_else(|| Fail::new(abi::ERR_RANK, Some(ci), Why::Rank { rank, size: index.len() as u32 }))?;
    let from = if r == 0 { 0 } else { index[r - 1] as usize };
    Ok(edges.get(from..index[r] as usize).unwrap_or_default().to_vec())
}

/// `MPI_Graph_neighbors_count`.
///
/// # Safety
/// `n` null or writable.
pub unsafe fn graph_neighbors_count(acc: &mut Access, comm: CommH, rank: c_int, n: *mut c_int) -> Res<()> {
    let (ci, i, e) = graph(running(acc)?, comm)?;
    let v = neighbours(ci, &i, &e, rank)?;
    // SAFETY: the caller's contract.
    unsafe { put(n, v.len() as c_int) }
}

/// `MPI_Graph_neighbors`.
///
/// # Safety
/// `out` writable for `max` ints.
pub unsafe fn graph_neighbors(acc: &mut Access, comm: CommH, rank: c_int, max: c_int, out: *mut c_int) -> Res<()> {
    let (ci, i, e) = graph(running(acc)?, comm)?;
    let v = neighbours(ci, &i, &e, rank)?;
    // SAFETY: the caller's contract.
    unsafe { put_ints(out, max, &v) }
}

/// A neighbour of a neighbourhood collective: its communicator rank (`MPI_PROC_NULL` for a
/// missing Cartesian neighbour) and the tag offset its message travels with.
pub type Neighbour = (c_int, i32);

/// This rank's in- and out-neighbours on `comm`'s topology, in MPI's order (MPI-3.1 §7.6):
/// Cartesian, for each dimension the `-1` then the `+1` neighbour; graph, the neighbours in
/// `MPI_Graph_neighbors` order both ways; distributed graph, the sources and the destinations.
/// Along a Cartesian dimension a message sent towards `+1` lands in the receiver's `-1` slot:
/// each direction has its own tag offset, so with two ranks in a periodic dimension (both
/// neighbours the same rank) the two messages are told apart.
pub fn neighbour_lists(c: &crate::comm::Comm, ci: usize) -> Res<(Vec<Neighbour>, Vec<Neighbour>)> {
    let no_topo = || Fail::new(abi::ERR_TOPOLOGY, Some(ci), Why::Arg("the communicator has no topology"));
    let t = c.topo.as_deref().ok_or_else(no_topo)?;
    let me = c.rank as c_int;
    Ok(match t {
        Topo::Cart { dims, periods } => {
            let at = Topo::coords(dims, me);
            let (mut ins, mut outs) = (Vec::new(), Vec::new());
            for d in 0..dims.len() {
                let shifted = |by: c_int| {
                    let mut x = at.clone();
                    x[d] += by;
                    Topo::rank_of(dims, periods, &x).unwrap_or(abi::PROC_NULL)
                };
                let (minus, plus) = (shifted(-1), shifted(1));
                let base = 2 * d as i32;
                ins.push((minus, base + 1));
                ins.push((plus, base));
                outs.push((minus, base));
                outs.push((plus, base + 1));
            }
            (ins, outs)
        }
        Topo::Graph { index, edges } => {
            let v: Vec<Neighbour> = neighbours(ci, index, edges, me)?.into_iter().map(|r| (r, 0)).collect();
            (v.clone(), v)
        }
        Topo::DistGraph { sources, destinations, .. } => {
            (sources.iter().map(|&r| (r, 0)).collect(), destinations.iter().map(|&r| (r, 0)).collect())
        }
    })
}

/// Reads `n` weights, or `None` for `MPI_UNWEIGHTED` (`MPI_WEIGHTS_EMPTY` with no edge: none).
///
/// # Safety
/// MPI's contract: `p` is a sentinel or holds `n` ints.
unsafe fn weights(p: *const c_int, n: usize) -> Res<Option<Vec<c_int>>> {
    if p as usize == crate::symbols::MPI_UNWEIGHTED.addr() {
        return Ok(None);
    }
    if p as usize == crate::symbols::MPI_WEIGHTS_EMPTY.addr() {
        return if n == 0 {
            Ok(Some(Vec::new()))
        } else {
            Err(Fail::new(abi::ERR_ARG, None, Why::Arg("MPI_WEIGHTS_EMPTY with edges")))
        };
    }
    // SAFETY: the caller's contract.
    unsafe { ints(p, n) }.map(Some)
}

fn check_ranks(v: &[c_int], size: u32, ci: usize) -> Res<()> {
    if v.iter().any(|&r| !(0..size as c_int).contains(&r)) {
        return Err(Fail::new(abi::ERR_RANK, Some(ci), Why::Arg("a distributed graph edge to no rank")));
    }
    Ok(())
}

/// `MPI_Dist_graph_create_adjacent`: each rank gives its own in- and out-neighbours.
///
/// # Safety
/// MPI's contract on the arrays; `out` null or writable.
#[allow(clippy::too_many_arguments)]
pub unsafe fn dist_graph_create_adjacent(
    acc: &mut Access,
    comm_old: CommH,
    indegree: c_int,
    sources: *const c_int,
    sourceweights: *const c_int,
    outdegree: c_int,
    destinations: *const c_int,
    destweights: *const c_int,
    _reorder: c_int,
    out: *mut CommH,
) -> Res<()> {
    let st = running(acc)?;
    let (ci, c) = intra_at(&st.comms, comm_old)?;
    let size = c.size;
    if indegree < 0 || outdegree < 0 {
        return Err(Fail::new(abi::ERR_ARG, Some(ci), Why::Arg("a negative degree")));
    }
    let (i, o) = (indegree as usize, outdegree as usize);
    // SAFETY: MPI's contract.
    let (sources, destinations) = unsafe { (ints(sources, i)?, ints(destinations, o)?) };
    check_ranks(&sources, size, ci)?;
    check_ranks(&destinations, size, ci)?;
    // SAFETY: MPI's contract.
    let (sw, dw) = unsafe { (weights(sourceweights, i)?, weights(destweights, o)?) };
    let weights = match (sw, dw) {
        (Some(a), Some(b)) => Some((a, b)),
        (None, None) => None,
        _ => return Err(Fail::new(abi::ERR_ARG, Some(ci), Why::Arg("weights on one side only"))),
    };
    // SAFETY: the caller's contract.
    unsafe { make(acc, comm_old, size as c_int, Topo::DistGraph { sources, destinations, weights }, out) }
}

/// `MPI_Dist_graph_create`: every rank gives some edges of the graph; the edges are exchanged
/// (all-gathered, in the order of the ranks that gave them) and each rank keeps those it is
/// an end of, in that order.
///
/// # Safety
/// MPI's contract on the arrays; `out` null or writable.
#[allow(clippy::too_many_arguments)]
pub unsafe fn dist_graph_create(
    acc: &mut Access,
    comm_old: CommH,
    n: c_int,
    sources: *const c_int,
    degrees: *const c_int,
    destinations: *const c_int,
    weights_p: *const c_int,
    _reorder: c_int,
    out: *mut CommH,
) -> Res<()> {
    let st = running(acc)?;
    let (ci, c) = intra_at(&st.comms, comm_old)?;
    let (c, tu) = (c.clone(), st.tuning);
    if n < 0 {
        return Err(Fail::new(abi::ERR_ARG, Some(ci), Why::Arg("a negative number of sources")));
    }
    // SAFETY: MPI's contract.
    let (srcs, degs) = unsafe { (ints(sources, n as usize)?, ints(degrees, n as usize)?) };
    if degs.iter().any(|&d| d < 0) {
        return Err(Fail::new(abi::ERR_ARG, Some(ci), Why::Arg("a negative degree")));
    }
    let m: usize = degs.iter().map(|&d| d as usize).sum();
    // SAFETY: MPI's contract.
    let (dsts, w) = unsafe { (ints(destinations, m)?, weights(weights_p, m)?) };
    check_ranks(&srcs, c.size, ci)?;
    check_ranks(&dsts, c.size, ci)?;
    // Edges as (source, destination, weight), 12 bytes each.
    let mut mine = Vec::with_capacity(m * 12);
    let mut k = 0;
    for (&s, &d) in srcs.iter().zip(&degs) {
        for _ in 0..d {
            for v in [s, dsts[k], w.as_ref().map_or(1, |w| w[k])] {
                mine.extend_from_slice(&v.to_ne_bytes());
            }
            k += 1;
        }
    }
    let counts = crate::coll::allgather_bytes(acc, &c, &tu, &(m as u64).to_ne_bytes())?;
    let counts: Vec<usize> =
        counts.chunks_exact(8).map(|b| u64::from_ne_bytes(b.try_into().unwrap_or([0; 8])) as usize).collect();
    let most = counts.iter().copied().max().unwrap_or(0);
    mine.resize(most * 12, 0);
    let all = crate::coll::allgather_bytes(acc, &c, &tu, &mine)?;
    let me = c.rank as c_int;
    let (mut ins, mut outs, mut iw, mut ow) = (Vec::new(), Vec::new(), Vec::new(), Vec::new());
    for (r, &cnt) in counts.iter().enumerate() {
        for e in all[r * most * 12..].chunks_exact(12).take(cnt) {
            let get = |i: usize| c_int::from_ne_bytes(e[i * 4..i * 4 + 4].try_into().unwrap_or([0; 4]));
            let (s, d, wt) = (get(0), get(1), get(2));
            if d == me {
                ins.push(s);
                iw.push(wt);
            }
            if s == me {
                outs.push(d);
                ow.push(wt);
            }
        }
    }
    let weights = w.is_some().then_some((iw, ow));
    // SAFETY: the caller's contract.
    unsafe { make(acc, comm_old, c.size as c_int, Topo::DistGraph { sources: ins, destinations: outs, weights }, out) }
}

fn dist(st: &State, comm: CommH) -> Res<(usize, Arc<Topo>)> {
    match topo_of(st, comm)? {
        (ci, Some(t)) if matches!(*t, Topo::DistGraph { .. }) => Ok((ci, t)),
        (ci, _) => Err(Fail::new(abi::ERR_TOPOLOGY, Some(ci), Why::Arg("not a distributed graph communicator"))),
    }
}

/// `MPI_Dist_graph_neighbors_count`.
///
/// # Safety
/// The pointers null or writable.
pub unsafe fn dist_graph_neighbors_count(
    acc: &mut Access,
    comm: CommH,
    indegree: *mut c_int,
    outdegree: *mut c_int,
    weighted: *mut c_int,
) -> Res<()> {
    let (_, t) = dist(running(acc)?, comm)?;
    let Topo::DistGraph { sources, destinations, weights } = &*t else { return Ok(()) };
    // SAFETY: the caller's contract.
    unsafe {
        put(indegree, sources.len() as c_int)?;
        put(outdegree, destinations.len() as c_int)?;
        put(weighted, c_int::from(weights.is_some()))
    }
}

/// `MPI_Dist_graph_neighbors`.
///
/// # Safety
/// The arrays writable for their `max` entries (weights: unless `MPI_UNWEIGHTED`).
#[allow(clippy::too_many_arguments)]
pub unsafe fn dist_graph_neighbors(
    acc: &mut Access,
    comm: CommH,
    maxin: c_int,
    sources: *mut c_int,
    sourceweights: *mut c_int,
    maxout: c_int,
    destinations: *mut c_int,
    destweights: *mut c_int,
) -> Res<()> {
    let (_, t) = dist(running(acc)?, comm)?;
    let Topo::DistGraph { sources: s, destinations: d, weights } = &*t else { return Ok(()) };
    let unweighted = |p: *mut c_int| {
        p as usize == crate::symbols::MPI_UNWEIGHTED.addr() || p as usize == crate::symbols::MPI_WEIGHTS_EMPTY.addr()
    };
    // SAFETY: the caller's contract.
    unsafe {
        put_ints(sources, maxin, s)?;
        put_ints(destinations, maxout, d)?;
        if let Some((sw, dw)) = weights {
            if !unweighted(sourceweights) {
                put_ints(sourceweights, maxin, sw)?;
            }
            if !unweighted(destweights) {
                put_ints(destweights, maxout, dw)?;
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dims_are_balanced_and_non_increasing() {
        let mut d = [0, 0];
        dims_create(12, &mut d).unwrap();
        assert_eq!(d, [4, 3]);
        let mut d = [0, 0, 0];
        dims_create(8, &mut d).unwrap();
        assert_eq!(d, [2, 2, 2]);
        let mut d = [0, 3, 0];
        dims_create(30, &mut d).unwrap();
        assert_eq!(d, [5, 3, 2]);
        let mut d = [0, 0];
        dims_create(7, &mut d).unwrap();
        assert_eq!(d, [7, 1]);
        assert!(dims_create(10, &mut [3, 0]).is_err());
    }

    #[test]
    fn coordinates_and_ranks() {
        let (d, p) = ([2, 3], [false, true]);
        assert_eq!(Topo::coords(&d, 5), vec![1, 2]);
        assert_eq!(Topo::rank_of(&d, &p, &[1, 2]), Some(5));
        assert_eq!(Topo::rank_of(&d, &p, &[1, 3]), Some(3), "periodic wrap");
        assert_eq!(Topo::rank_of(&d, &p, &[2, 0]), None);
    }
}
