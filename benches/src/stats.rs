//! Statistics for benchmark rounds: medians with their spread, and ratios taken per round (the
//! machine is shared and noisy, so figures compared with each other come from the same round).

/// Median, minimum and maximum of a sample.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Summary {
    pub median: f64,
    pub min: f64,
    pub max: f64,
}

impl Summary {
    /// Summarises `xs`; `None` if empty or if any value is not finite.
    pub fn of(xs: &[f64]) -> Option<Summary> {
        if xs.is_empty() || xs.iter().any(|x| !x.is_finite()) {
            return None;
        }
        let mut v = xs.to_vec();
        v.sort_by(f64::total_cmp);
        Some(Summary { median: median_sorted(&v), min: v[0], max: v[v.len() - 1] })
    }
}

fn median_sorted(v: &[f64]) -> f64 {
    let n = v.len();
    if n % 2 == 1 { v[n / 2] } else { (v[n / 2 - 1] + v[n / 2]) / 2.0 }
}

/// Per-round ratios `a[i] / b[i]`, summarised: the way two systems measured in the same rounds
/// are compared.
pub fn ratio_of_rounds(a: &[f64], b: &[f64]) -> Option<Summary> {
    if a.len() != b.len() || b.contains(&0.0) {
        return None;
    }
    let r: Vec<f64> = a.iter().zip(b).map(|(x, y)| x / y).collect();
    Summary::of(&r)
}

/// Summary of the finite values of `xs` (failed runs are NaN), or `None` if there are none.
pub fn finite(xs: &[f64]) -> Option<Summary> {
    let v: Vec<f64> = xs.iter().copied().filter(|x| x.is_finite()).collect();
    Summary::of(&v)
}

/// Per-round ratios `a[r] / b[r]` over the rounds where both have a finite figure and `b[r]` is
/// not 0, summarised; `None` if no round has both.
pub fn paired_ratio(a: &[f64], b: &[f64]) -> Option<Summary> {
    let (x, y): (Vec<f64>, Vec<f64>) =
        a.iter().zip(b).filter(|(x, y)| x.is_finite() && y.is_finite() && **y != 0.0).map(|(x, y)| (*x, *y)).unzip();
    ratio_of_rounds(&x, &y)
}

/// The index of the best of `medians` (`None` entries and non-finite ones do not compete): the
/// highest if `higher_is_better`, else the lowest.
pub fn best(medians: &[Option<f64>], higher_is_better: bool) -> Option<usize> {
    let mut best: Option<(usize, f64)> = None;
    for (i, m) in medians.iter().enumerate() {
        let Some(v) = m.filter(|v| v.is_finite()) else { continue };
        let better = match best {
            None => true,
            Some((_, b)) => {
                if higher_is_better {
                    v > b
                } else {
                    v < b
                }
            }
        };
        if better {
            best = Some((i, v));
        }
    }
    best.map(|(i, _)| i)
}

/// The order in which `systems` run in each of `rounds` rounds: interleaved (A B C A B C ...),
/// and rotated by one each round so no system always runs first after a pause.
pub fn interleave(systems: usize, rounds: usize) -> Vec<(usize, usize)> {
    (0..rounds).flat_map(|r| (0..systems).map(move |k| (r, (k + r) % systems))).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn median_odd_even_and_spread() {
        assert_eq!(Summary::of(&[3.0, 1.0, 2.0]).map(|s| s.median), Some(2.0));
        assert_eq!(Summary::of(&[4.0, 1.0, 2.0, 3.0]).map(|s| s.median), Some(2.5));
        assert_eq!(Summary::of(&[]), None);
        assert_eq!(Summary::of(&[5.0, -1.0, 2.0]), Some(Summary { median: 2.0, min: -1.0, max: 5.0 }));
        assert_eq!(Summary::of(&[1.0, f64::NAN]), None);
    }

    #[test]
    fn ratios_are_per_round() {
        // Round 2 is slow for both systems: per-round ratios stay at 2, a ratio of medians would not.
        let a = [2.0, 20.0, 2.2];
        let b = [1.0, 10.0, 1.1];
        let s = ratio_of_rounds(&a, &b).unwrap();
        assert!((s.median - 2.0).abs() < 1e-12 && (s.min - 2.0).abs() < 1e-12 && (s.max - 2.0).abs() < 1e-12);
        assert_eq!(ratio_of_rounds(&a, &b[..2]), None);
        assert_eq!(ratio_of_rounds(&a, &[1.0, 0.0, 1.0]), None);
    }

    #[test]
    fn failed_rounds_are_left_out() {
        let s = finite(&[f64::NAN, 3.0, 1.0]).unwrap();
        assert_eq!((s.median, s.min, s.max), (2.0, 1.0, 3.0));
        assert_eq!(finite(&[f64::NAN]), None);
        // Round 1 failed for `a`, round 2 has a zero baseline: only round 0 and 3 count.
        let r = paired_ratio(&[2.0, f64::NAN, 5.0, 9.0], &[1.0, 1.0, 0.0, 3.0]).unwrap();
        assert_eq!((r.min, r.max), (2.0, 3.0));
        assert_eq!(paired_ratio(&[f64::NAN], &[1.0]), None);
    }

    #[test]
    fn best_by_direction() {
        let m = [Some(3.0), None, Some(1.0), Some(f64::NAN), Some(2.0)];
        assert_eq!(best(&m, true), Some(0));
        assert_eq!(best(&m, false), Some(2));
        assert_eq!(best(&[None, Some(f64::NAN)], true), None);
    }

    #[test]
    fn interleaving_covers_every_pair_once_and_rotates() {
        let order = interleave(3, 4);
        assert_eq!(order.len(), 12);
        for r in 0..4 {
            let mut ks: Vec<usize> = order.iter().filter(|(rr, _)| *rr == r).map(|(_, k)| *k).collect();
            assert_eq!(ks[0], r % 3, "round {r} starts with a different system");
            ks.sort();
            assert_eq!(ks, vec![0, 1, 2]);
        }
    }
}
