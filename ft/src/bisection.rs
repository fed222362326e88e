//! Pure-Rust graph bisection, the default `BISSECT` of the grouping algorithm (Fig 4.3 line 6 of
//! `guermouche-2011-thesis-send-determinism-hydee.txt`, which used Scotch; T:973 names METIS as equivalent).
//!
//! The method is the multilevel scheme METIS and Scotch are built on (Karypis & Kumar 1998; Hendrickson & Leland
//! 1995) — implemented here from that description: coarsen by heavy-edge matching until the graph is small, bisect
//! the coarsest graph by greedy graph growing from several seeds, then project back level by level, refining each
//! level with Fiduccia–Mattheyses passes (moves by decreasing gain, each vertex once per pass, rolled back to the
//! best prefix) under the balance bound. The whole is run from a few seeds and the smallest cut kept.
//!
//! One exact step comes first: if the graph is disconnected and some set of its components fills one side within
//! the balance bound, that zero-cut split is optimal and is returned (a subset-sum over component sizes). This is
//! what makes block-diagonal matrices come apart exactly along their blocks.

use std::cmp::Ordering;
use std::collections::BinaryHeap;

/// An undirected graph with positive edge weights and vertex weights, in compressed sparse rows.
#[derive(Clone, Debug)]
pub(crate) struct Graph {
    /// `xadj[v]..xadj[v + 1]` indexes `v`'s neighbours in `adj` and `w`; `xadj.len() == n + 1`.
    pub xadj: Vec<usize>,
    /// Neighbours; never `v` itself; each undirected edge appears once from each end.
    pub adj: Vec<u32>,
    /// Edge weights, all positive, equal from both ends.
    pub w: Vec<f64>,
    /// Vertex weights, all positive.
    pub vw: Vec<u64>,
}

impl Graph {
    /// The graph of the `n` vertices with `weight(u, v)` (symmetric, evaluated for `u < v`) as edge weights;
    /// zero weights make no edge.
    pub fn from_weights(n: usize, weight: impl Fn(usize, usize) -> f64) -> Graph {
        let mut lists: Vec<Vec<(u32, f64)>> = vec![Vec::new(); n];
        for u in 0..n {
            for v in u + 1..n {
                let w = weight(u, v);
                if w > 0.0 {
                    lists[u].push((v as u32, w));
                    lists[v].push((u as u32, w));
                }
            }
        }
        let mut g = Graph { xadj: Vec::with_capacity(n + 1), adj: Vec::new(), w: Vec::new(), vw: vec![1; n] };
        g.xadj.push(0);
        for list in lists {
            for (v, w) in list {
                g.adj.push(v);
                g.w.push(w);
            }
            g.xadj.push(g.adj.len());
        }
        g
    }

    pub fn n(&self) -> usize {
        self.vw.len()
    }

    fn neighbours(&self, v: usize) -> impl Iterator<Item = (usize, f64)> + '_ {
        (self.xadj[v]..self.xadj[v + 1]).map(|i| (self.adj[i] as usize, self.w[i]))
    }

    fn total_vertex_weight(&self) -> u64 {
        self.vw.iter().sum()
    }

    fn total_edge_weight(&self) -> f64 {
        self.w.iter().sum::<f64>() / 2.0
    }
}

/// Weight of the edges between the two sides.
pub(crate) fn cut(g: &Graph, side: &[u8]) -> f64 {
    let mut c = 0.0;
    for v in 0..g.n() {
        for (u, w) in g.neighbours(v) {
            if u > v && side[u] != side[v] {
                c += w;
            }
        }
    }
    c
}

/// A small deterministic generator (xorshift64*): the bisection must give the same answer on every run.
struct Rng(u64);

impl Rng {
    fn new(seed: u64) -> Rng {
        Rng(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1)
    }
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n.max(1) as u64) as usize
    }
    fn shuffle<T>(&mut self, v: &mut [T]) {
        for i in (1..v.len()).rev() {
            let j = self.below(i + 1);
            v.swap(i, j);
        }
    }
}

/// Independent multilevel runs; the best is kept.
const TRIALS: u64 = 4;
/// Coarsening stops at this many vertices.
const COARSEST: usize = 40;
/// Greedy-growing attempts on the coarsest graph.
const GROWINGS: usize = 8;
/// FM passes per level at most.
const FM_PASSES: usize = 8;

/// Splits `g` into sides 0 and 1, each of total vertex weight at most `max_side`, with a small cut.
/// `max_side` must be at least half the total vertex weight, rounded up.
pub(crate) fn bisect(g: &Graph, max_side: u64) -> Vec<u8> {
    let n = g.n();
    if n <= 1 {
        return vec![0; n];
    }
    if let Some(side) = pack_components(g, max_side) {
        return side;
    }
    let mut best: Option<(f64, u64, Vec<u8>)> = None;
    for trial in 0..TRIALS {
        let side = multilevel(g, max_side, &mut Rng::new(trial + 1));
        let c = cut(g, &side);
        let imbalance = imbalance(g, &side);
        let better = best.as_ref().is_none_or(|(bc, bi, _)| c < *bc || (c == *bc && imbalance < *bi));
        if better {
            best = Some((c, imbalance, side));
        }
    }
    best.map_or_else(|| vec![0; n], |b| b.2)
}

fn imbalance(g: &Graph, side: &[u8]) -> u64 {
    let mut sw = [0u64; 2];
    for v in 0..g.n() {
        sw[side[v] as usize] += g.vw[v];
    }
    sw[0].abs_diff(sw[1])
}

/// A zero-cut bisection from whole connected components, if their sizes allow one within the bound.
fn pack_components(g: &Graph, max_side: u64) -> Option<Vec<u8>> {
    let n = g.n();
    let mut comp = vec![usize::MAX; n];
    let mut sizes: Vec<u64> = Vec::new();
    let mut stack = Vec::new();
    for s in 0..n {
        if comp[s] != usize::MAX {
            continue;
        }
        let c = sizes.len();
        sizes.push(0);
        comp[s] = c;
        stack.push(s);
        while let Some(v) = stack.pop() {
            sizes[c] += g.vw[v];
            for (u, _) in g.neighbours(v) {
                if comp[u] == usize::MAX {
                    comp[u] = c;
                    stack.push(u);
                }
            }
        }
    }
    if sizes.len() < 2 {
        return None;
    }
    let total: u64 = sizes.iter().sum();
    let lo = total.saturating_sub(max_side);
    // Subset sum: `via[s]` is the component that first reached sum `s` (descending sweep: each used once).
    let cap = total as usize;
    let mut via = vec![usize::MAX; cap + 1];
    let mut reachable = vec![false; cap + 1];
    reachable[0] = true;
    for (c, &size) in sizes.iter().enumerate() {
        let size = size as usize;
        for s in (size..=cap).rev() {
            if !reachable[s] && reachable[s - size] {
                reachable[s] = true;
                via[s] = c;
            }
        }
    }
    let half = total as f64 / 2.0;
    let target = (lo..=max_side.min(total))
        .filter(|&s| s > 0 && s < total && reachable[s as usize])
        .min_by(|a, b| (*a as f64 - half).abs().total_cmp(&(*b as f64 - half).abs()))?;
    let mut chosen = vec![false; sizes.len()];
    let mut s = target as usize;
    while s > 0 {
        let c = via[s];
        chosen[c] = true;
        s -= sizes[c] as usize;
    }
    Some(comp.iter().map(|&c| u8::from(chosen[c])).collect())
}

/// Coarsen, bisect the coarsest graph, project back with refinement.
fn multilevel(g: &Graph, max_side: u64, rng: &mut Rng) -> Vec<u8> {
    let total = g.total_vertex_weight();
    // Coarse vertices heavier than this would make balanced sides hard to reach.
    let max_vertex = (total / 16).max(1);
    let mut graphs: Vec<Graph> = Vec::new();
    let mut maps: Vec<Vec<u32>> = Vec::new();
    loop {
        let current = graphs.last().unwrap_or(g);
        if current.n() <= COARSEST {
            break;
        }
        let (coarse, map) = coarsen(current, max_vertex, rng);
        if coarse.n() * 20 > current.n() * 19 {
            break;
        }
        graphs.push(coarse);
        maps.push(map);
    }
    let coarsest = graphs.last().unwrap_or(g);
    let mut side = initial_bisection(coarsest, max_side, rng);
    for level in (0..maps.len()).rev() {
        let finer = if level == 0 { g } else { &graphs[level - 1] };
        side = maps[level].iter().map(|&c| side[c as usize]).collect();
        refine(finer, &mut side, max_side);
    }
    side
}

/// Heavy-edge matching: each vertex, in random order, pairs with the unmatched neighbour it shares the heaviest
/// edge with (if their weights allow); pairs become one coarse vertex.
fn coarsen(g: &Graph, max_vertex: u64, rng: &mut Rng) -> (Graph, Vec<u32>) {
    let n = g.n();
    let mut order: Vec<usize> = (0..n).collect();
    rng.shuffle(&mut order);
    let mut mate = vec![usize::MAX; n];
    for &v in &order {
        if mate[v] != usize::MAX {
            continue;
        }
        let mut best: Option<(f64, usize)> = None;
        for (u, w) in g.neighbours(v) {
            if mate[u] == usize::MAX && g.vw[u] + g.vw[v] <= max_vertex && best.is_none_or(|(bw, _)| w > bw) {
                best = Some((w, u));
            }
        }
        match best {
            Some((_, u)) => {
                mate[v] = u;
                mate[u] = v;
            }
            None => mate[v] = v,
        }
    }
    let mut map = vec![u32::MAX; n];
    let mut members: Vec<(usize, usize)> = Vec::new();
    for v in 0..n {
        if map[v] == u32::MAX {
            let c = members.len() as u32;
            map[v] = c;
            map[mate[v]] = c;
            members.push((v, mate[v]));
        }
    }
    let nc = members.len();
    let mut coarse =
        Graph { xadj: Vec::with_capacity(nc + 1), adj: Vec::new(), w: Vec::new(), vw: Vec::with_capacity(nc) };
    coarse.xadj.push(0);
    let mut slot = vec![usize::MAX; nc];
    for (c, &(a, b)) in members.iter().enumerate() {
        let start = coarse.adj.len();
        let vertices: &[usize] = if a == b { &[a] } else { &[a, b] };
        let mut weight = 0;
        for &v in vertices {
            weight += g.vw[v];
            for (u, w) in g.neighbours(v) {
                let cu = map[u] as usize;
                if cu == c {
                    continue;
                }
                if slot[cu] == usize::MAX || slot[cu] < start {
                    slot[cu] = coarse.adj.len();
                    coarse.adj.push(cu as u32);
                    coarse.w.push(w);
                } else {
                    coarse.w[slot[cu]] += w;
                }
            }
        }
        coarse.vw.push(weight);
        coarse.xadj.push(coarse.adj.len());
    }
    (coarse, map)
}

/// Greedy graph growing from several seeds (each refined), keeping the smallest cut.
fn initial_bisection(g: &Graph, max_side: u64, rng: &mut Rng) -> Vec<u8> {
    let n = g.n();
    let total = g.total_vertex_weight();
    let mut best: Option<(f64, Vec<u8>)> = None;
    for _ in 0..GROWINGS.min(n.max(1)) {
        let mut side = vec![1u8; n];
        // gain[v]: cut decrease if v moves to side 0.
        let mut gain: Vec<f64> = (0..n).map(|v| -g.neighbours(v).map(|(_, w)| w).sum::<f64>()).collect();
        let mut grown = 0u64;
        let mut next = Some(rng.below(n));
        while let Some(v) = next {
            side[v] = 0;
            grown += g.vw[v];
            for (u, w) in g.neighbours(v) {
                gain[u] += 2.0 * w;
            }
            if grown >= total / 2 {
                break;
            }
            next = (0..n)
                .filter(|&u| side[u] == 1 && grown + g.vw[u] <= max_side)
                .max_by(|&a, &b| gain[a].total_cmp(&gain[b]).then(b.cmp(&a)));
        }
        refine(g, &mut side, max_side);
        let c = cut(g, &side);
        if best.as_ref().is_none_or(|(bc, _)| c < *bc) {
            best = Some((c, side));
        }
    }
    best.map_or_else(|| vec![0; n], |b| b.1)
}

/// A heap entry: a vertex's gain when pushed, and the version of its gain then.
#[derive(PartialEq)]
struct Candidate {
    gain: f64,
    vertex: usize,
    version: u32,
}

impl Eq for Candidate {}

impl PartialOrd for Candidate {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for Candidate {
    fn cmp(&self, other: &Self) -> Ordering {
        // Highest gain first; lowest vertex on ties, for determinism.
        self.gain.total_cmp(&other.gain).then(other.vertex.cmp(&self.vertex))
    }
}

/// Fiduccia–Mattheyses refinement under the balance bound. A pass may overshoot the bound by one vertex (or no
/// move would be possible from an exactly balanced split); only states within it are kept.
fn refine(g: &Graph, side: &mut [u8], max_side: u64) {
    let n = g.n();
    let eps = 1e-12 * g.total_edge_weight().max(1.0);
    let mut sw = [0u64; 2];
    for v in 0..n {
        sw[side[v] as usize] += g.vw[v];
    }
    rebalance(g, side, &mut sw, max_side);
    let slack = g.vw.iter().copied().max().unwrap_or(1);
    let patience = 20 + n / 4;
    // Lexicographic quality: excess over the bound, then cut, then imbalance.
    let quality = |sw: &[u64; 2], cut: f64| (sw[0].max(sw[1]).saturating_sub(max_side), cut, sw[0].abs_diff(sw[1]));
    let better = |a: (u64, f64, u64), b: (u64, f64, u64)| {
        a.0 < b.0 || (a.0 == b.0 && (a.1 < b.1 - eps || (a.1 <= b.1 + eps && a.2 < b.2)))
    };
    let mut gain = vec![0.0f64; n];
    let mut version = vec![0u32; n];
    let mut locked = vec![false; n];
    let mut heap = BinaryHeap::with_capacity(n);
    let mut moves: Vec<usize> = Vec::new();
    for _ in 0..FM_PASSES {
        heap.clear();
        moves.clear();
        for v in 0..n {
            let mut g_v = 0.0;
            for (u, w) in g.neighbours(v) {
                g_v += if side[u] == side[v] { -w } else { w };
            }
            gain[v] = g_v;
            locked[v] = false;
            version[v] = version[v].wrapping_add(1);
            heap.push(Candidate { gain: g_v, vertex: v, version: version[v] });
        }
        // Cut relative to the pass's start.
        let mut cur = 0.0;
        let mut best = quality(&sw, cur);
        let mut best_len = 0;
        let mut since_best = 0;
        while let Some(c) = heap.pop() {
            let v = c.vertex;
            if locked[v] || c.version != version[v] {
                continue;
            }
            let from = side[v] as usize;
            let to = 1 - from;
            if sw[to] + g.vw[v] > max_side + slack {
                continue;
            }
            side[v] = to as u8;
            sw[from] -= g.vw[v];
            sw[to] += g.vw[v];
            locked[v] = true;
            cur -= gain[v];
            moves.push(v);
            for (u, w) in g.neighbours(v) {
                if locked[u] {
                    continue;
                }
                gain[u] += if side[u] as usize == to { -2.0 * w } else { 2.0 * w };
                version[u] = version[u].wrapping_add(1);
                heap.push(Candidate { gain: gain[u], vertex: u, version: version[u] });
            }
            let q = quality(&sw, cur);
            if better(q, best) {
                best = q;
                best_len = moves.len();
                since_best = 0;
            } else {
                since_best += 1;
                if since_best > patience {
                    break;
                }
            }
        }
        for &v in moves[best_len..].iter().rev() {
            let from = side[v] as usize;
            side[v] = (1 - from) as u8;
            sw[from] -= g.vw[v];
            sw[1 - from] += g.vw[v];
        }
        if best_len == 0 {
            break;
        }
    }
}

/// Moves vertices off a side heavier than the bound, cheapest first (coarse levels may not manage; vertices of
/// weight 1 at the finest level always do).
fn rebalance(g: &Graph, side: &mut [u8], sw: &mut [u64; 2], max_side: u64) {
    while let Some(heavy) = (0..2).find(|&s| sw[s] > max_side) {
        let light = 1 - heavy;
        let candidate = (0..g.n())
            .filter(|&v| side[v] as usize == heavy && sw[light] + g.vw[v] <= max_side)
            .map(|v| {
                let gain: f64 = g.neighbours(v).map(|(u, w)| if side[u] == side[v] { -w } else { w }).sum();
                (gain, v)
            })
            .max_by(|a, b| a.0.total_cmp(&b.0).then(b.1.cmp(&a.1)));
        let Some((_, v)) = candidate else {
            return;
        };
        side[v] = light as u8;
        sw[heavy] -= g.vw[v];
        sw[light] += g.vw[v];
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sides_ok(g: &Graph, side: &[u8], max_side: u64) -> bool {
        let ones: u64 = (0..g.n()).filter(|&v| side[v] == 1).map(|v| g.vw[v]).sum();
        let total = g.total_vertex_weight();
        ones <= max_side && total - ones <= max_side
    }

    #[test]
    fn two_cliques_joined_by_one_edge_split_at_the_edge() {
        let g = Graph::from_weights(60, |u, v| {
            if (u < 30) == (v < 30) {
                10.0
            } else if u == 0 && v == 59 {
                1.0
            } else {
                0.0
            }
        });
        let side = bisect(&g, 30);
        assert!(sides_ok(&g, &side, 30));
        assert_eq!(cut(&g, &side), 1.0);
    }

    #[test]
    fn components_are_packed_exactly() {
        // Four blocks of 8 with no traffic between them: a zero cut exists and must be found.
        let g = Graph::from_weights(32, |u, v| if u / 8 == v / 8 { 5.0 } else { 0.0 });
        let side = bisect(&g, 16);
        assert_eq!(cut(&g, &side), 0.0);
        assert!(sides_ok(&g, &side, 16));
    }

    #[test]
    fn a_ring_is_cut_twice() {
        let n = 100;
        let g = Graph::from_weights(n, |u, v| if v == u + 1 || (u == 0 && v == n - 1) { 1.0 } else { 0.0 });
        let side = bisect(&g, 50);
        assert!(sides_ok(&g, &side, 50));
        assert_eq!(cut(&g, &side), 2.0);
    }

    #[test]
    fn a_grid_is_cut_along_its_short_side() {
        // 16 x 8 grid: the best balanced cut crosses the 8 rows between columns 7 and 8.
        let (w, h) = (16, 8);
        let g = Graph::from_weights(w * h, |a, b| {
            let (ax, ay, bx, by) = (a % w, a / w, b % w, b / w);
            if ax.abs_diff(bx) + ay.abs_diff(by) == 1 { 1.0 } else { 0.0 }
        });
        let side = bisect(&g, (w * h / 2) as u64);
        assert!(sides_ok(&g, &side, (w * h / 2) as u64));
        assert_eq!(cut(&g, &side), h as f64);
    }

    #[test]
    fn respects_the_balance_bound_on_a_star() {
        let g = Graph::from_weights(21, |u, _| if u == 0 { 1.0 } else { 0.0 });
        let side = bisect(&g, 11);
        assert!(sides_ok(&g, &side, 11));
    }
}
