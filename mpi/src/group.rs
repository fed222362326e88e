//! Groups (MPI-3.1 §6.3): ordered sets of processes, kept as the job ranks of their members in
//! group rank order. `MPI_GROUP_EMPTY` is predefined; every other group is an entry of the table
//! (`GROUP_DIRECT + index`), freed by `MPI_Group_free`.

use std::ffi::c_int;
use std::sync::Arc;

use crate::abi::{self, Group};
use crate::error::{Fail, Res, Why};
use crate::handle::Table;
use crate::p2p::comm_at;
use crate::state::{Access, State, not_running};

/// The table of groups.
pub type Groups = Table<Arc<[u32]>>;

/// Handles of table entries: MPICH's direct group handles.
pub const GROUP_DIRECT: u32 = abi::handle::DIRECT | abi::handle::GROUP;

pub const fn table() -> Groups {
    Table::new(GROUP_DIRECT)
}

#[cold]
fn bad_group(h: Group) -> Fail {
    Fail::new(abi::ERR_GROUP, None, Why::Other(format!("{h:#x} is not a valid group")))
}

#[cold]
fn null_out() -> Fail {
    Fail::new(abi::ERR_ARG, None, Why::Arg("null output pointer"))
}

#[cold]
fn bad_rank(what: &'static str) -> Fail {
    Fail::new(abi::ERR_RANK, None, Why::Arg(what))
}

/// The members (job ranks) of group `h`.
pub fn members(st: &State, h: Group) -> Res<Arc<[u32]>> {
    if h == abi::GROUP_EMPTY {
        return Ok(Arc::from(Vec::new()));
    }
    st.groups.get(h).cloned().ok_or_else(|| bad_group(h))
}

fn running(acc: &mut Access) -> Res<&mut State> {
    let st = acc.st();
    if st.ep.is_none() {
        return Err(not_running(st.phase));
    }
    Ok(st)
}

/// Stores a new group (the empty one is `MPI_GROUP_EMPTY`) and writes its handle.
///
/// # Safety
/// `out` null or writable.
pub(crate) unsafe fn hand_out(st: &mut State, ranks: Vec<u32>, out: *mut Group) -> Res<()> {
    if out.is_null() {
        return Err(null_out());
    }
    let h = if ranks.is_empty() {
        abi::GROUP_EMPTY
    } else {
        st.groups.insert(ranks.into()).ok_or_else(|| Fail::new(abi::ERR_INTERN, None, Why::Arg("too many groups")))?
    };
    // SAFETY: checked non-null; MPI's contract.
    unsafe { *out = h };
    Ok(())
}

/// Writes `v` to `out` (checked non-null).
///
/// # Safety
/// `out` null or writable.
unsafe fn put(out: *mut c_int, v: c_int) -> Res<()> {
    if out.is_null() {
        return Err(null_out());
    }
    // SAFETY: checked non-null; MPI's contract.
    unsafe { *out = v };
    Ok(())
}

/// `MPI_Comm_group`.
///
/// # Safety
/// `out` null or writable.
pub unsafe fn comm_group(acc: &mut Access, comm: abi::Comm, out: *mut Group) -> Res<()> {
    let st = running(acc)?;
    let (_, c) = comm_at(&st.comms, comm)?;
    let ranks = c.local_world().to_vec();
    // SAFETY: the caller's contract.
    unsafe { hand_out(st, ranks, out) }
}

/// `MPI_Group_size` (`rank: false`) and `MPI_Group_rank` (`MPI_UNDEFINED` for a non-member).
///
/// # Safety
/// `out` null or writable.
pub unsafe fn size_or_rank(acc: &mut Access, group: Group, out: *mut c_int, rank: bool) -> Res<()> {
    let st = running(acc)?;
    let g = members(st, group)?;
    let v = if rank {
        let me = st.ep.as_ref().map_or(0, |e| e.rank());
        g.iter().position(|&w| w == me).map_or(abi::UNDEFINED, |r| r as c_int)
    } else {
        g.len() as c_int
    };
    // SAFETY: the caller's contract.
    unsafe { put(out, v) }
}

/// `MPI_Group_free`.
///
/// # Safety
/// `group` null or valid for reads and writes.
pub unsafe fn free(acc: &mut Access, group: *mut Group) -> Res<()> {
    let st = running(acc)?;
    if group.is_null() {
        return Err(null_out());
    }
    // SAFETY: checked non-null; MPI's contract.
    let h = unsafe { *group };
    // Freeing MPI_GROUP_EMPTY is allowed (MPI-3.1 §6.3.3 erratum): it stays.
    if h != abi::GROUP_EMPTY && st.groups.remove(h).is_none() {
        return Err(bad_group(h));
    }
    // SAFETY: as above.
    unsafe { *group = abi::GROUP_NULL };
    Ok(())
}

/// `MPI_Group_translate_ranks`.
///
/// # Safety
/// `ranks1` readable and `ranks2` writable for `n` ints.
pub unsafe fn translate_ranks(
    acc: &mut Access,
    g1: Group,
    n: c_int,
    ranks1: *const c_int,
    g2: Group,
    ranks2: *mut c_int,
) -> Res<()> {
    let st = running(acc)?;
    let (a, b) = (members(st, g1)?, members(st, g2)?);
    if n < 0 {
        return Err(Fail::new(abi::ERR_COUNT, None, Why::Count(n)));
    }
    if n > 0 && (ranks1.is_null() || ranks2.is_null()) {
        return Err(null_out());
    }
    for i in 0..n as usize {
        // SAFETY: MPI's contract: `n` ranks to read and to write.
        let r = unsafe { *ranks1.add(i) };
        let t = if r == abi::PROC_NULL {
            abi::PROC_NULL
        } else {
            let w =
                *a.get(usize::try_from(r).unwrap_or(usize::MAX)).ok_or_else(|| bad_rank("rank not in the group"))?;
            b.iter().position(|&x| x == w).map_or(abi::UNDEFINED, |k| k as c_int)
        };
        // SAFETY: as above.
        unsafe { *ranks2.add(i) = t };
    }
    Ok(())
}

/// `MPI_IDENT` (same members, same order), `MPI_SIMILAR` (same members) or `MPI_UNEQUAL`.
pub fn compare_members(a: &[u32], b: &[u32]) -> c_int {
    if a == b {
        return abi::IDENT;
    }
    let (mut x, mut y) = (a.to_vec(), b.to_vec());
    x.sort_unstable();
    y.sort_unstable();
    if x == y { abi::SIMILAR } else { abi::UNEQUAL }
}

/// `MPI_Group_compare`.
///
/// # Safety
/// `out` null or writable.
pub unsafe fn compare(acc: &mut Access, g1: Group, g2: Group, out: *mut c_int) -> Res<()> {
    let st = running(acc)?;
    let v = compare_members(&members(st, g1)?, &members(st, g2)?);
    // SAFETY: the caller's contract.
    unsafe { put(out, v) }
}

/// A set operation of two groups.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SetOp {
    Union,
    Intersection,
    Difference,
}

/// The members of `a op b`, in MPI's order: those of `a` first (in `a`'s order), then for a
/// union those of `b` not in `a`.
pub fn combine(a: &[u32], b: &[u32], op: SetOp) -> Vec<u32> {
    match op {
        SetOp::Union => a.iter().copied().chain(b.iter().copied().filter(|w| !a.contains(w))).collect(),
        SetOp::Intersection => a.iter().copied().filter(|w| b.contains(w)).collect(),
        SetOp::Difference => a.iter().copied().filter(|w| !b.contains(w)).collect(),
    }
}

/// `MPI_Group_union`, `MPI_Group_intersection`, `MPI_Group_difference`.
///
/// # Safety
/// `out` null or writable.
pub unsafe fn set_op(acc: &mut Access, g1: Group, g2: Group, op: SetOp, out: *mut Group) -> Res<()> {
    let st = running(acc)?;
    let v = combine(&members(st, g1)?, &members(st, g2)?, op);
    // SAFETY: the caller's contract.
    unsafe { hand_out(st, v, out) }
}

/// Group ranks `list` checked: in `0..size`, each at most once.
fn checked_ranks(list: &[c_int], size: usize) -> Res<Vec<usize>> {
    let mut seen = vec![false; size];
    list.iter()
        .map(|&r| {
            let i = usize::try_from(r).ok().filter(|&i| i < size).ok_or_else(|| bad_rank("rank not in the group"))?;
            if std::mem::replace(&mut seen[i], true) {
                return Err(bad_rank("a rank given twice"));
            }
            Ok(i)
        })
        .collect()
}

/// The group ranks of `(first, last, stride)` triplets (`MPI_Group_range_incl`/`_excl`).
pub fn expand_ranges(ranges: &[[c_int; 3]], size: usize) -> Res<Vec<c_int>> {
    let mut out = Vec::new();
    for &[first, last, stride] in ranges {
        if stride == 0 {
            return Err(Fail::new(abi::ERR_ARG, None, Why::Arg("a range with stride 0")));
        }
        let inside = |r: c_int| usize::try_from(r).is_ok_and(|i| i < size);
        if !inside(first) || !inside(last) || (stride > 0 && first > last) || (stride < 0 && first < last) {
            return Err(bad_rank("a range outside the group"));
        }
        let mut r = i64::from(first);
        while (stride > 0 && r <= i64::from(last)) || (stride < 0 && r >= i64::from(last)) {
            out.push(r as c_int);
            r += i64::from(stride);
        }
    }
    Ok(out)
}

/// `MPI_Group_incl`/`MPI_Group_excl` (`exclude`) of group ranks `list`.
fn incl_excl(g: &[u32], list: &[c_int], exclude: bool) -> Res<Vec<u32>> {
    let idx = checked_ranks(list, g.len())?;
    Ok(if exclude {
        let mut keep = vec![true; g.len()];
        for i in idx {
            keep[i] = false;
        }
        g.iter().zip(keep).filter(|&(_, k)| k).map(|(&w, _)| w).collect()
    } else {
        idx.into_iter().map(|i| g[i]).collect()
    })
}

/// The `n` elements at `p` (an argument array of MPI's).
///
/// # Safety
/// `p` readable for `n` elements if `n > 0`; the slice is used while the call runs.
unsafe fn array<'a, T>(p: *const T, n: c_int) -> Res<&'a [T]> {
    if n < 0 {
        return Err(Fail::new(abi::ERR_COUNT, None, Why::Count(n)));
    }
    if n == 0 {
        return Ok(&[]);
    }
    if p.is_null() {
        return Err(Fail::new(abi::ERR_ARG, None, Why::Arg("null array")));
    }
    // SAFETY: the caller's contract: `n` elements.
    Ok(unsafe { std::slice::from_raw_parts(p, n as usize) })
}

/// `MPI_Group_incl` and `MPI_Group_excl` (`exclude`).
///
/// # Safety
/// `ranks` readable for `n` ints; `out` null or writable.
pub unsafe fn incl(
    acc: &mut Access,
    group: Group,
    n: c_int,
    ranks: *const c_int,
    exclude: bool,
    out: *mut Group,
) -> Res<()> {
    let st = running(acc)?;
    let g = members(st, group)?;
    // SAFETY: MPI's contract: `n` ranks.
    let v = incl_excl(&g, unsafe { array(ranks, n) }?, exclude)?;
    // SAFETY: the caller's contract.
    unsafe { hand_out(st, v, out) }
}

/// `MPI_Group_range_incl` and `MPI_Group_range_excl` (`exclude`).
///
/// # Safety
/// `ranges` readable for `n` triplets; `out` null or writable.
pub unsafe fn range_incl(
    acc: &mut Access,
    group: Group,
    n: c_int,
    ranges: *const [c_int; 3],
    exclude: bool,
    out: *mut Group,
) -> Res<()> {
    let st = running(acc)?;
    let g = members(st, group)?;
    // SAFETY: MPI's contract: `n` triplets.
    let ranks = expand_ranges(unsafe { array(ranges, n) }?, g.len())?;
    let v = incl_excl(&g, &ranks, exclude)?;
    // SAFETY: the caller's contract.
    unsafe { hand_out(st, v, out) }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn set_operations_keep_mpi_order() {
        let (a, b) = ([5, 1, 3], [3, 4, 5, 0]);
        assert_eq!(combine(&a, &b, SetOp::Union), vec![5, 1, 3, 4, 0]);
        assert_eq!(combine(&a, &b, SetOp::Intersection), vec![5, 3]);
        assert_eq!(combine(&a, &b, SetOp::Difference), vec![1]);
        assert_eq!(compare_members(&a, &[5, 1, 3]), abi::IDENT);
        assert_eq!(compare_members(&a, &[1, 3, 5]), abi::SIMILAR);
        assert_eq!(compare_members(&a, &[1, 3]), abi::UNEQUAL);
    }

    #[test]
    fn ranges_and_inclusions() {
        assert_eq!(expand_ranges(&[[0, 6, 3], [7, 5, -1]], 8).unwrap(), vec![0, 3, 6, 7, 6, 5]);
        assert!(expand_ranges(&[[0, 8, 1]], 8).is_err());
        assert!(expand_ranges(&[[3, 1, 1]], 8).is_err());
        assert!(expand_ranges(&[[1, 1, 0]], 8).is_err());
        let g = [10, 11, 12, 13];
        assert_eq!(incl_excl(&g, &[3, 0], false).unwrap(), vec![13, 10]);
        assert_eq!(incl_excl(&g, &[3, 0], true).unwrap(), vec![11, 12]);
        assert!(incl_excl(&g, &[1, 1], false).is_err());
        assert!(incl_excl(&g, &[4], true).is_err());
    }
}
