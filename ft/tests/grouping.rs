//! The grouping partitioner of chapter 4 on test matrices: block-diagonal patterns whose groups are known, a NAS
//! CG-like pattern (Table 6.1 of `guermouche-2011-thesis-send-determinism-hydee.txt`, T:2271: CG on 256 processes
//! gives 16 groups of 16, 6.25 % restarted, 18.98 % logged), stencils, and — with the `metis` feature — the
//! comparison of the pure-Rust bisection with METIS on all of them.

use nemesis_ft::matrix::CommMatrix;
use nemesis_ft::partition::{Bisector, CostModel, Grouping, evaluate, group};

/// `blocks` blocks of `size` ranks exchanging `heavy` bytes within a block, `light` across blocks.
fn block_diagonal(blocks: usize, size: usize, heavy: f64, light: f64) -> CommMatrix {
    CommMatrix::from_fn(blocks * size, |u, v| {
        if u == v {
            0.0
        } else if u as usize / size == v as usize / size {
            heavy
        } else {
            light
        }
    })
    .unwrap()
}

/// NAS CG's pattern on a `side` × `side` process grid: reductions along each row by recursive doubling (partners
/// at distance 1, 2, 4, ... in the row) and one transpose exchange with the process at the mirrored position, all
/// messages of the same size.
fn cg_like(side: usize) -> CommMatrix {
    CommMatrix::from_fn(side * side, |u, v| {
        let (ur, uc) = (u as usize / side, u as usize % side);
        let (vr, vc) = (v as usize / side, v as usize % side);
        let row_partner = ur == vr && (uc ^ vc).is_power_of_two();
        let transpose = ur == vc && uc == vr && u != v;
        if row_partner || transpose { 1e6 } else { 0.0 }
    })
    .unwrap()
}

/// A 5-point stencil on a `w` × `h` torus.
fn stencil_2d(w: usize, h: usize) -> CommMatrix {
    CommMatrix::from_fn(w * h, |u, v| {
        let (ux, uy, vx, vy) = (u as usize % w, u as usize / w, v as usize % w, v as usize / w);
        let dx = ux.abs_diff(vx).min(w - ux.abs_diff(vx));
        let dy = uy.abs_diff(vy).min(h - uy.abs_diff(vy));
        if dx + dy == 1 { 4096.0 } else { 0.0 }
    })
    .unwrap()
}

/// A 7-point stencil on an `n` × `n` × `m` grid (no wrap), heavier along x.
fn stencil_3d(n: usize, m: usize) -> CommMatrix {
    CommMatrix::from_fn(n * n * m, |u, v| {
        let c = |r: u32| (r as usize % n, (r as usize / n) % n, r as usize / (n * n));
        let ((ax, ay, az), (bx, by, bz)) = (c(u), c(v));
        match (ax.abs_diff(bx), ay.abs_diff(by), az.abs_diff(bz)) {
            (1, 0, 0) => 3000.0,
            (0, 1, 0) | (0, 0, 1) => 1000.0,
            _ => 0.0,
        }
    })
    .unwrap()
}

/// Points on a line with traffic decaying with distance, plus a little everywhere (no clean cut).
fn decaying(p: usize) -> CommMatrix {
    CommMatrix::from_fn(p, |u, v| {
        if u == v {
            0.0
        } else {
            let d = (u as f64 - v as f64).abs();
            1e6 / (d * d) + 10.0
        }
    })
    .unwrap()
}

fn groups(g: &Grouping) -> Vec<Vec<u32>> {
    let mut out = vec![Vec::new(); g.groups];
    for (r, &k) in g.group_of.iter().enumerate() {
        out[k as usize].push(r as u32);
    }
    out
}

#[test]
fn block_diagonal_8_blocks_of_8_gives_those_8_groups() {
    for light in [0.0, 1.0] {
        let m = block_diagonal(8, 8, 1e6, light);
        let g = group(&m, CostModel::default(), Bisector::Native).unwrap();
        assert_eq!(g.groups, 8, "light traffic {light}");
        for (k, members) in groups(&g).iter().enumerate() {
            assert_eq!(members, &(8 * k as u32..8 * k as u32 + 8).collect::<Vec<_>>());
        }
        assert!((g.evaluation.restart_share - 0.125).abs() < 1e-12);
    }
}

#[test]
fn sixteen_groups_of_sixteen_restart_a_sixteenth() {
    let m = block_diagonal(16, 16, 1e6, 10.0);
    let g = group(&m, CostModel::default(), Bisector::Native).unwrap();
    assert_eq!(g.groups, 16);
    assert!(groups(&g).iter().all(|members| members.len() == 16 && members.iter().all(|&r| r / 16 == members[0] / 16)));
    assert!((g.evaluation.restart_share - 0.0625).abs() < 1e-12, "{}", g.evaluation.restart_share);
}

/// Table 6.1's CG row: 16 groups of 16 (the rows of the process grid), 6.25 % restarted, ≈ 19 % logged.
#[test]
fn cg_pattern_gives_its_rows() {
    let m = cg_like(16);
    let g = group(&m, CostModel::default(), Bisector::Native).unwrap();
    assert_eq!(g.groups, 16);
    for members in groups(&g) {
        let row = members[0] / 16;
        assert_eq!(members, (row * 16..row * 16 + 16).collect::<Vec<_>>());
    }
    assert!((g.evaluation.restart_share - 0.0625).abs() < 1e-12);
    // 240 transposes against 256 × 4 row messages: 18.99 %, the 18.98 % of Table 6.1.
    assert!((g.evaluation.logged_share - 240.0 / 1264.0).abs() < 1e-9, "{}", g.evaluation.logged_share);
}

#[test]
fn the_cost_of_the_result_is_the_best_of_the_candidates_it_tried() {
    // The chosen partition is no worse than the obvious alternatives on a stencil.
    let m = stencil_2d(16, 16);
    let g = group(&m, CostModel::default(), Bisector::Native).unwrap();
    for k in [2usize, 4, 8, 16] {
        let rows: Vec<u32> = (0..256).map(|r| (r / (256 / k)) as u32).collect();
        let alt = evaluate(&m, &rows, CostModel::default());
        assert!(g.evaluation.cost <= alt.cost + 1e-12, "{k} row bands cost {} < {}", alt.cost, g.evaluation.cost);
    }
}

/// The test matrices, by name.
fn matrices() -> Vec<(&'static str, CommMatrix)> {
    vec![
        ("block-diagonal 8x8", block_diagonal(8, 8, 1e6, 0.0)),
        ("block-diagonal 16x16 noisy", block_diagonal(16, 16, 1e6, 10.0)),
        ("CG-like 16x16", cg_like(16)),
        ("2D stencil 16x16", stencil_2d(16, 16)),
        ("3D stencil 8x8x4", stencil_3d(8, 4)),
        ("decaying 96", decaying(96)),
    ]
}

#[test]
fn groupings_are_deterministic() {
    for (name, m) in matrices() {
        let a = group(&m, CostModel::default(), Bisector::Native).unwrap();
        let b = group(&m, CostModel::default(), Bisector::Native).unwrap();
        assert_eq!(a, b, "{name}");
        assert_eq!(a.group_of[0], 0, "groups are numbered by their lowest rank");
    }
}

#[cfg(not(feature = "metis"))]
#[test]
fn metis_needs_its_feature() {
    let m = block_diagonal(2, 2, 1.0, 0.0);
    assert!(matches!(group(&m, CostModel::default(), Bisector::Metis), Err(nemesis_ft::Error::Partitioner(_))));
}

/// The pure-Rust bisection does as well as METIS on every test matrix: the final HydEE cost is never more than
/// 1 % above METIS's. Run with `--features metis -- --nocapture` to see both.
#[cfg(feature = "metis")]
#[test]
fn native_bisection_does_as_well_as_metis() {
    for (name, m) in matrices() {
        let native = group(&m, CostModel::default(), Bisector::Native).unwrap();
        let metis = group(&m, CostModel::default(), Bisector::Metis).unwrap();
        eprintln!(
            "{name:28} native: {:3} groups, cost {:.5} | METIS: {:3} groups, cost {:.5}",
            native.groups, native.evaluation.cost, metis.groups, metis.evaluation.cost
        );
        assert!(native.evaluation.cost <= metis.evaluation.cost * 1.01 + 1e-12, "{name}");
    }
}
