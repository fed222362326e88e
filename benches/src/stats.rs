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
