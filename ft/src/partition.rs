//! Process grouping: the recursive-bisection partitioner of chapter 4 (Fig 4.3, T:941–984 of
//! `guermouche-2011-thesis-send-determinism-hydee.txt`) with the HydEE cost function (equation 4.3, T:1070–1074).
//!
//! Start with one part holding every process. Repeatedly take the largest part not yet marked; if it has more than
//! one process (`DEVRAITPARTITIONNER`, threshold 1, T:979) bisect it with a graph partitioner on `(M + Mᵀ)/2`
//! restricted to it (`BISSECT`, T:973); accept the split if the cost does not increase or the "force"
//! `B / (K − 1)` does not increase (`ACCEPTEBISSECTION`, T:981–984; `B` is the inter-part volume, `K` the number
//! of parts); otherwise mark the part (\[R\]: or the loop never ends). Keep the best partition seen (`MEILLEUR`).
//!
//! Cost (equation 4.3, T:1070–1074): `cost(Π) = α · L/D + β · Σ|P_k|² / P²` with `L` the inter-group volume
//! (every inter-group byte is logged under HydEE), `D` the total volume, `α = 23 %` (T:1002) and `β = 12.4 %`
//! (T:1022: 179 minutes lost per day of MTBF with a 297-minute optimal checkpoint interval, 30-minute checkpoints
//! and restarts). The second term is also the expected share of processes a failure restarts: 16 groups of 16 give
//! 16·16²/256² = 6.25 %.
//!
//! Two points the text leaves open, decided here:
//! - The force of the one-part partition, `B/0`, is taken as infinite: the first bisection is always accepted.
//! - The best partition is the cheapest with at least two groups: Table 6.1 (T:2271) reports two groups for NAS FT,
//!   an all-to-all code, where one group would be cheaper by the cost function (0.124 against ≈ 0.177); a single
//!   group means no fault containment at all, which HydEE exists to provide. One group is returned only for one
//!   process.
//! - Bisections are balanced to within [`BALANCE`] of half the part (the thesis asks for "two parts of nearly equal
//!   size", T:973), for the pure-Rust bisector and METIS alike.

use crate::bisection::{self, Graph};
use crate::matrix::CommMatrix;
use crate::{Error, GroupId, Rank, Result};

/// α of equation 4.3: the weight of the logged share (T:1002).
pub const ALPHA: f64 = 0.23;
/// β of equation 4.3: the weight of the restarted share (T:1022).
pub const BETA: f64 = 0.124;
/// A side may hold up to this factor times half the part (METIS's `ubvec` for the same run).
pub const BALANCE: f64 = 1.05;

/// Which graph partitioner bisects.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Bisector {
    /// The pure-Rust multilevel bisection of this crate (the default).
    #[default]
    Native,
    /// METIS's recursive bisection (`METIS_PartGraphRecursive` into two parts), with the `metis` feature.
    Metis,
}

/// The cost model of equation 4.1 (T:996): `α · L + β · R`.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct CostModel {
    pub alpha: f64,
    pub beta: f64,
}

impl Default for CostModel {
    fn default() -> Self {
        CostModel { alpha: ALPHA, beta: BETA }
    }
}

/// How a partition fares under the cost model.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Evaluation {
    /// `L / D`: share of the volume that crosses groups and is logged (0 when nothing is sent).
    pub logged_share: f64,
    /// `Σ|P_k|² / P²`: expected share of processes restarted by a failure.
    pub restart_share: f64,
    /// `α · logged_share + β · restart_share`.
    pub cost: f64,
}

/// A grouping of the ranks.
#[derive(Clone, Debug, PartialEq)]
pub struct Grouping {
    /// `group_of[r]` is rank `r`'s group; groups are numbered by their lowest rank, so rank 0 is in group 0.
    pub group_of: Vec<GroupId>,
    /// Number of groups.
    pub groups: usize,
    pub evaluation: Evaluation,
}

/// Evaluates the partition `group_of` of `matrix`'s ranks.
pub fn evaluate(matrix: &CommMatrix, group_of: &[GroupId], model: CostModel) -> Evaluation {
    let p = matrix.ranks();
    let mut sizes = std::collections::BTreeMap::<GroupId, f64>::new();
    for &g in group_of {
        *sizes.entry(g).or_default() += 1.0;
    }
    let mut logged = 0.0;
    for u in 0..p {
        for v in 0..p {
            if group_of.get(u) != group_of.get(v) {
                logged += matrix.get(u as Rank, v as Rank);
            }
        }
    }
    let total = matrix.total();
    let logged_share = if total > 0.0 { logged / total } else { 0.0 };
    let restart_share = sizes.values().map(|s| s * s).sum::<f64>() / (p as f64 * p as f64);
    Evaluation { logged_share, restart_share, cost: model.alpha * logged_share + model.beta * restart_share }
}

/// Volume sent between the two sets, both directions.
fn between(matrix: &CommMatrix, a: &[Rank], b: &[Rank]) -> f64 {
    let mut v = 0.0;
    for &x in a {
        for &y in b {
            v += matrix.get(x, y) + matrix.get(y, x);
        }
    }
    v
}

/// Largest side allowed when bisecting `n` vertices.
fn max_side(n: usize) -> u64 {
    let even = n.div_ceil(2) as u64;
    even.max((BALANCE * n as f64 / 2.0).floor() as u64)
}

/// Splits `part` in two with `bisector`, on `(M + Mᵀ)/2` restricted to it.
fn bisect(matrix: &CommMatrix, part: &[Rank], bisector: Bisector) -> Result<(Vec<Rank>, Vec<Rank>)> {
    let n = part.len();
    let graph = Graph::from_weights(n, |a, b| {
        let (u, v) = (part[a], part[b]);
        (matrix.get(u, v) + matrix.get(v, u)) / 2.0
    });
    let side = match bisector {
        Bisector::Native => bisection::bisect(&graph, max_side(n)),
        #[cfg(feature = "metis")]
        Bisector::Metis => crate::metis_bisection::bisect(&graph, BALANCE)?,
        #[cfg(not(feature = "metis"))]
        Bisector::Metis => {
            return Err(Error::Partitioner("this build has no METIS: rebuild with the `metis` feature".into()));
        }
    };
    let (mut a, mut b) = (Vec::new(), Vec::new());
    for (i, &r) in part.iter().enumerate() {
        if side[i] == 0 { a.push(r) } else { b.push(r) }
    }
    if a.is_empty() || b.is_empty() {
        return Err(Error::Partitioner(format!("bisection of {n} ranks left one side empty")));
    }
    Ok((a, b))
}

/// Groups the ranks of `matrix` by the algorithm of Fig 4.3 with the HydEE cost function.
///
/// ```
/// use nemesis_ft::matrix::CommMatrix;
/// use nemesis_ft::partition::{group, Bisector, CostModel};
/// // Two pairs that only talk inside themselves.
/// let m = CommMatrix::from_fn(4, |u, v| if u / 2 == v / 2 && u != v { 100.0 } else { 0.0 })?;
/// let g = group(&m, CostModel::default(), Bisector::Native)?;
/// assert_eq!(g.group_of, vec![0, 0, 1, 1]);
/// # Ok::<(), nemesis_ft::Error>(())
/// ```
pub fn group(matrix: &CommMatrix, model: CostModel, bisector: Bisector) -> Result<Grouping> {
    let p = matrix.ranks();
    let total = matrix.total();
    let share = |b: f64| if total > 0.0 { b / total } else { 0.0 };
    let cost_of = |b: f64, squares: f64| model.alpha * share(b) + model.beta * squares / (p as f64 * p as f64);

    // (members, marked)
    let mut parts: Vec<(Vec<Rank>, bool)> = vec![((0..p as Rank).collect(), false)];
    let mut inter = 0.0; // B
    let mut squares = (p * p) as f64; // Σ|P_k|²
    let mut best: Option<(f64, Vec<Vec<Rank>>)> = None;
    // Each turn takes the largest unmarked part; the lowest first rank on ties, for determinism.
    let largest = |parts: &[(Vec<Rank>, bool)]| {
        (0..parts.len())
            .filter(|&k| !parts[k].1)
            .max_by(|&a, &b| parts[a].0.len().cmp(&parts[b].0.len()).then(parts[b].0[0].cmp(&parts[a].0[0])))
    };
    while let Some(k) = largest(&parts) {
        if parts[k].0.len() <= 1 {
            parts[k].1 = true;
            continue;
        }
        let (a, b) = bisect(matrix, &parts[k].0, bisector)?;
        let k_parts = parts.len() as f64;
        let new_inter = inter + between(matrix, &a, &b);
        let n = parts[k].0.len() as f64;
        let new_squares = squares - n * n + (a.len() * a.len() + b.len() * b.len()) as f64;
        let (cost, new_cost) = (cost_of(inter, squares), cost_of(new_inter, new_squares));
        let force = if parts.len() == 1 { f64::INFINITY } else { inter / (k_parts - 1.0) };
        let new_force = new_inter / k_parts;
        if new_cost <= cost || new_force <= force {
            parts.swap_remove(k);
            parts.push((a, false));
            parts.push((b, false));
            inter = new_inter;
            squares = new_squares;
            if best.as_ref().is_none_or(|(c, _)| new_cost < *c) {
                best = Some((new_cost, parts.iter().map(|p| p.0.clone()).collect()));
            }
        } else {
            parts[k].1 = true;
        }
    }
    let chosen = best.map_or_else(|| parts.into_iter().map(|p| p.0).collect(), |b| b.1);
    Ok(numbered(matrix, chosen, model))
}

/// Groups the ranks of `matrix` into exactly `k` groups by the bisection of Fig 4.3 without its cost test: the
/// largest part is bisected (on `(M + Mᵀ)/2`, as in [`group`]) until there are `k` parts. For a job that asks for
/// a number of groups rather than the cheapest grouping (`nemesis-run --ft-groups K --ft-matrix FILE`).
///
/// ```
/// use nemesis_ft::matrix::CommMatrix;
/// use nemesis_ft::partition::{group_k, Bisector};
/// // Four pairs that only talk inside themselves, grouped two pairs a group.
/// let m = CommMatrix::from_fn(8, |u, v| if u / 2 == v / 2 && u != v { 100.0 } else { 0.0 })?;
/// let g = group_k(&m, 4, Bisector::Native)?;
/// assert_eq!(g.group_of, vec![0, 0, 1, 1, 2, 2, 3, 3]);
/// # Ok::<(), nemesis_ft::Error>(())
/// ```
pub fn group_k(matrix: &CommMatrix, k: usize, bisector: Bisector) -> Result<Grouping> {
    let p = matrix.ranks();
    if k == 0 || k > p {
        return Err(Error::Partitioner(format!("{k} groups of {p} ranks: every group needs a rank (1 <= K <= P)")));
    }
    let mut parts: Vec<Vec<Rank>> = vec![(0..p as Rank).collect()];
    while parts.len() < k {
        // The largest part, the lowest first rank on ties (deterministic); it has at least two ranks since k <= p.
        let Some(i) =
            (0..parts.len()).max_by(|&a, &b| parts[a].len().cmp(&parts[b].len()).then(parts[b][0].cmp(&parts[a][0])))
        else {
            break;
        };
        let (a, b) = bisect(matrix, &parts[i], bisector)?;
        parts.swap_remove(i);
        parts.push(a);
        parts.push(b);
    }
    Ok(numbered(matrix, parts, CostModel::default()))
}

/// The grouping that `parts` make, groups numbered by their lowest rank.
fn numbered(matrix: &CommMatrix, mut parts: Vec<Vec<Rank>>, model: CostModel) -> Grouping {
    let mut group_of = vec![0 as GroupId; matrix.ranks()];
    for part in &mut parts {
        part.sort_unstable();
    }
    parts.sort_unstable_by_key(|part| part[0]);
    for (g, part) in parts.iter().enumerate() {
        for &r in part {
            group_of[r as usize] = g as GroupId;
        }
    }
    let evaluation = evaluate(matrix, &group_of, model);
    Grouping { groups: parts.len(), group_of, evaluation }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn all_to_all_gives_two_groups() {
        // Table 6.1: NAS FT (all-to-all) ends with 2 groups of half the processes each.
        let m = CommMatrix::from_fn(16, |u, v| if u != v { 1000.0 } else { 0.0 }).unwrap();
        let g = group(&m, CostModel::default(), Bisector::Native).unwrap();
        assert_eq!(g.groups, 2);
        assert!((g.evaluation.restart_share - 0.5).abs() < 1e-12);
    }

    #[test]
    fn no_traffic_gives_singletons() {
        let m = CommMatrix::from_fn(5, |_, _| 0.0).unwrap();
        let g = group(&m, CostModel::default(), Bisector::Native).unwrap();
        assert_eq!(g.groups, 5);
        assert_eq!(g.group_of, vec![0, 1, 2, 3, 4]);
    }

    #[test]
    fn one_rank_is_one_group() {
        let m = CommMatrix::from_fn(1, |_, _| 3.0).unwrap();
        let g = group(&m, CostModel::default(), Bisector::Native).unwrap();
        assert_eq!(g.group_of, vec![0]);
    }

    #[test]
    fn evaluation_matches_the_formula() {
        // Two groups {0,1} {2}; 0->2 carries 3 of 10 bytes.
        let m = CommMatrix::new(3, vec![0.0, 7.0, 3.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0]).unwrap();
        let e = evaluate(&m, &[0, 0, 1], CostModel::default());
        assert!((e.logged_share - 0.3).abs() < 1e-12);
        assert!((e.restart_share - 5.0 / 9.0).abs() < 1e-12);
        assert!((e.cost - (ALPHA * 0.3 + BETA * 5.0 / 9.0)).abs() < 1e-12);
    }

    #[test]
    fn a_fixed_number_of_groups() {
        // A ring: neighbours talk.
        let m =
            CommMatrix::from_fn(12, |u, v| if (u + 1) % 12 == v || (v + 1) % 12 == u { 10.0 } else { 0.0 }).unwrap();
        for k in 1..=12 {
            let g = group_k(&m, k, Bisector::Native).unwrap();
            assert_eq!(g.groups, k);
            assert_eq!(g.group_of[0], 0);
        }
        // Recursive bisection: halves, then one half halved; each group an arc of the ring (three cuts).
        let g = group_k(&m, 3, Bisector::Native).unwrap();
        let mut sizes = [0; 3];
        for &x in &g.group_of {
            sizes[x as usize] += 1;
        }
        sizes.sort_unstable();
        assert_eq!(sizes, [3, 3, 6]);
        assert!((g.evaluation.logged_share - 0.25).abs() < 1e-12, "{:?}", g.evaluation);
        assert!(group_k(&m, 0, Bisector::Native).is_err());
        assert!(group_k(&m, 13, Bisector::Native).is_err());
    }

    #[test]
    fn balance_bound() {
        assert_eq!(max_side(2), 1);
        assert_eq!(max_side(3), 2);
        assert_eq!(max_side(64), 33);
        assert_eq!(max_side(256), 134);
    }
}
