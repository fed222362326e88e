//! The pLogP cost models of the collective algorithms, and the choice of an algorithm by model.
//!
//! Source: the LaPIe thesis, `shared/papers/barchet-2005-thesis-lapie-collectives.txt` ("B", line
//! numbers), summarised in `shared/reference/p2pmpi-lapie.md`. pLogP (B §4.2): `L` the latency,
//! `g(m)` the gap between consecutive messages of `m` bytes; a message costs its sender `g(m)` and
//! arrives `L` later. Here `g(m) = k·g0 + m·G` for a message sent in `k` pieces of at most the
//! eager limit: the linear fit of the `g(m)` table `mpi/bench/plogp.c` measures (B:3758–3791).
//!
//! Costs for `P` ranks and `m` bytes (the formulas: `docs/design/mpi.md`, "Collective cost models"):
//! - broadcast: flat, binomial, segmented chain (B Tables 6.1–6.2, B:5062–5115; the chain wins
//!   when `g ≥ L`, trees when `g ≤ L`, B:5169–5171);
//! - reduce: flat, binomial, Rabenseifner for large messages (B:4326–4336);
//! - allreduce: recursive doubling, reduce then broadcast, Rabenseifner (B:4430–4443);
//! - scatter and gather: flat, binomial (B Table 6.3, B:5858–5867; B:4409);
//! - allgather: ring, Bruck, gather then broadcast (B:4465–4490);
//! - alltoall: direct exchange with rotated partners (B:6421–6424), not competing;
//! - barrier: dissemination, fan-in/fan-out (B:4258–4277).
//!
//! Two parameter sets: [`Params::SHM`] (between ranks of a node, measured) and [`Params::NET`]
//! (between node leaders: placeholders), overridable (`NEMESIS_COLL_SHM`, `NEMESIS_COLL_NET`);
//! every choice can be forced (`NEMESIS_COLL_ALG`): see `docs/mpi.md`.

/// pLogP parameters of one level (node or network), in nanoseconds.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Params {
    /// `L`: latency.
    pub l: f64,
    /// `g0`: gap per message (the `g(0)` of pLogP).
    pub g0: f64,
    /// `G`: gap per byte (the slope of `g(m)`).
    pub g_byte: f64,
    /// `γ`: local reduction per byte (`MPI_SUM` of doubles).
    pub gamma_byte: f64,
    /// `β`: local copy per byte (intermediate copies of tree algorithms, rotations).
    pub copy_byte: f64,
}

impl Params {
    /// Between ranks of a node: measured with `mpi/bench/plogp.c` (the median of three runs; the
    /// spread and the machine: `docs/design/mpi.md`, "Model parameters").
    pub const SHM: Params = Params { l: 110.0, g0: 47.0, g_byte: 0.145, gamma_byte: 0.060, copy_byte: 0.020 };
    /// Between nodes: placeholders (TCP on a 10 Gb/s network: 25 µs latency, 5 µs per message,
    /// 1.25 GB/s) until the TCP network module is measured on a real network (`plogp.c` over
    /// `nemesis-run --nodes 2` on this machine's loopback gave L ≈ 5 µs and g(0) ≈ 3.6 µs, but
    /// g(m) too noisy to fit).
    pub const NET: Params = Params { l: 25_000.0, g0: 5_000.0, g_byte: 0.8, gamma_byte: 0.45, copy_byte: 0.08 };

    /// Parses `L=190,g0=130,G=0.13,gamma=0.45,copy=0.08` (any subset) over `self`.
    pub fn parse_over(mut self, s: &str) -> Result<Params, String> {
        for item in s.split(',').map(str::trim).filter(|i| !i.is_empty()) {
            let (k, v) = item.split_once('=').ok_or_else(|| format!("`{item}`: expected key=value"))?;
            let v: f64 = v.trim().parse().map_err(|_| format!("`{item}`: not a number"))?;
            if !(v.is_finite() && v >= 0.0) {
                return Err(format!("`{item}`: must be a non-negative number"));
            }
            match k.trim() {
                "L" => self.l = v,
                "g0" => self.g0 = v,
                "G" => self.g_byte = v,
                "gamma" => self.gamma_byte = v,
                "copy" => self.copy_byte = v,
                other => return Err(format!("unknown parameter `{other}` (L, g0, G, gamma, copy)")),
            }
        }
        Ok(self)
    }
}

/// The model of one level for messages sent in pieces of at most `chunk` bytes.
#[derive(Clone, Copy, Debug)]
pub struct Model {
    pub p: Params,
    pub chunk: usize,
}

fn log2_ceil(n: usize) -> f64 {
    (usize::BITS - n.saturating_sub(1).leading_zeros()) as f64
}

fn log2_floor(n: usize) -> f64 {
    (usize::BITS - 1 - n.max(1).leading_zeros()) as f64
}

/// Largest power of two ≤ `n` (n ≥ 1).
pub fn pow2_floor(n: usize) -> usize {
    1 << log2_floor(n) as u32
}

impl Model {
    /// `g(m)`: the gap of an `m`-byte message (sent in pieces of at most `chunk`).
    pub fn g(&self, m: usize) -> f64 {
        let pieces = m.div_ceil(self.chunk.max(1)).max(1);
        pieces as f64 * self.p.g0 + m as f64 * self.p.g_byte
    }

    fn gamma(&self, m: usize) -> f64 {
        m as f64 * self.p.gamma_byte
    }

    fn copy(&self, m: usize) -> f64 {
        m as f64 * self.p.copy_byte
    }

    /// Broadcast of `m` bytes among `n` ranks.
    pub fn bcast(&self, alg: Bcast, n: usize, m: usize) -> f64 {
        let (l, p1) = (self.p.l, (n - 1) as f64);
        match alg {
            Bcast::Flat => l + p1 * self.g(m),
            Bcast::Binomial => log2_ceil(n) * l + log2_floor(n) * self.g(m),
            Bcast::Chain(s) => {
                let s = s.clamp(1, m.max(1));
                let k = m.div_ceil(s).max(1) as f64;
                p1 * (self.g(s) + l) + self.g(s) * (k - 1.0)
            }
        }
    }

    /// Reduce of `m` bytes among `n` ranks.
    pub fn reduce(&self, alg: Reduce, n: usize, m: usize) -> f64 {
        let l = self.p.l;
        match alg {
            Reduce::Flat => l + (n - 1) as f64 * (self.g(m) + self.gamma(m)),
            Reduce::Binomial => log2_ceil(n) * l + log2_floor(n) * (self.g(m) + self.gamma(m)),
            Reduce::Rabenseifner => {
                let (p2, frac) = self.rab_shape(n);
                let fold = if p2 == n { 0.0 } else { l + self.g(m) + self.gamma(m) };
                // Recursive halving (log2 p' exchanges, (p'−1)/p' of the data, reduced), then a
                // binomial gather of the same volume, then a hop to the root if it sat out.
                let halving = log2_floor(p2) * (l + self.p.g0) + frac * (m as f64 * self.p.g_byte + self.gamma(m));
                let gather = log2_floor(p2) * (l + self.p.g0) + frac * m as f64 * self.p.g_byte;
                fold + halving + gather + l + self.g(m)
            }
        }
    }

    fn rab_shape(&self, n: usize) -> (usize, f64) {
        let p2 = pow2_floor(n);
        (p2, (p2 - 1) as f64 / p2 as f64)
    }

    /// Allreduce of `m` bytes among `n` ranks.
    pub fn allreduce(&self, alg: Allreduce, n: usize, m: usize) -> f64 {
        let l = self.p.l;
        let (p2, frac) = self.rab_shape(n);
        let fold = if p2 == n { 0.0 } else { 2.0 * (l + self.g(m)) + self.gamma(m) };
        match alg {
            Allreduce::RecursiveDoubling => fold + log2_floor(p2) * (l + self.g(m) + self.gamma(m)),
            Allreduce::Rabenseifner => {
                fold + 2.0 * log2_floor(p2) * (l + self.p.g0) + frac * (2.0 * m as f64 * self.p.g_byte + self.gamma(m))
            }
            Allreduce::ReduceBcast => {
                let (r, _) = self.best_reduce(n, m);
                let (b, _) = self.best_bcast(n, m, 1);
                r + b
            }
        }
    }

    /// Gather (or scatter, its reverse) of `m` bytes per rank among `n` ranks.
    pub fn gather(&self, alg: Gather, n: usize, m: usize) -> f64 {
        match alg {
            Gather::Flat => self.p.l + (n - 1) as f64 * self.g(m),
            Gather::Binomial => {
                let mut t = 0.0;
                let mut span = 1;
                while span < n {
                    t += self.p.l + self.g(span.min(n - span) * m);
                    span *= 2;
                }
                t + self.copy(n * m)
            }
        }
    }

    /// Allgather of `m` bytes per rank among `n` ranks.
    pub fn allgather(&self, alg: Allgather, n: usize, m: usize) -> f64 {
        match alg {
            Allgather::Ring => (n - 1) as f64 * (self.p.l + self.g(m)),
            Allgather::Bruck => {
                let mut t = 0.0;
                let mut span = 1;
                while span < n {
                    t += self.p.l + self.g(span.min(n - span) * m);
                    span *= 2;
                }
                t + self.copy(n * m)
            }
            Allgather::GatherBcast => {
                self.gather(Gather::Flat, n, m).min(self.gather(Gather::Binomial, n, m))
                    + self.best_bcast(n, n * m, 1).0
            }
        }
    }

    /// Barrier among `n` ranks.
    pub fn barrier(&self, alg: Barrier, n: usize) -> f64 {
        match alg {
            Barrier::Dissemination => log2_ceil(n) * (self.p.l + self.p.g0),
            Barrier::FanInOut => 2.0 * (self.p.l + (n - 1) as f64 * self.p.g0),
        }
    }

    /// The cheapest broadcast of `m` bytes among `n` ranks, segments multiples of `elem` bytes.
    pub fn best_bcast(&self, n: usize, m: usize, elem: usize) -> (f64, Bcast) {
        let mut best = (self.bcast(Bcast::Binomial, n, m), Bcast::Binomial);
        let mut consider = |alg: Bcast| {
            let t = self.bcast(alg, n, m);
            if t < best.0 {
                best = (t, alg);
            }
        };
        consider(Bcast::Flat);
        if n > 2 {
            for s in segment_sizes(m, elem, self.chunk) {
                consider(Bcast::Chain(s));
            }
        }
        best
    }

    /// The cheapest reduce.
    pub fn best_reduce(&self, n: usize, m: usize) -> (f64, Reduce) {
        best_of(&[Reduce::Binomial, Reduce::Flat, Reduce::Rabenseifner], |a| self.reduce(a, n, m))
    }

    /// The cheapest allreduce.
    pub fn best_allreduce(&self, n: usize, m: usize) -> (f64, Allreduce) {
        best_of(&[Allreduce::RecursiveDoubling, Allreduce::Rabenseifner, Allreduce::ReduceBcast], |a| {
            self.allreduce(a, n, m)
        })
    }

    /// The cheapest gather (or scatter).
    pub fn best_gather(&self, n: usize, m: usize) -> (f64, Gather) {
        best_of(&[Gather::Flat, Gather::Binomial], |a| self.gather(a, n, m))
    }

    /// The cheapest allgather.
    pub fn best_allgather(&self, n: usize, m: usize) -> (f64, Allgather) {
        best_of(&[Allgather::Bruck, Allgather::Ring, Allgather::GatherBcast], |a| self.allgather(a, n, m))
    }

    /// The cheapest barrier.
    pub fn best_barrier(&self, n: usize) -> (f64, Barrier) {
        best_of(&[Barrier::Dissemination, Barrier::FanInOut], |a| self.barrier(a, n))
    }
}

fn best_of<A: Copy>(algs: &[A], cost: impl Fn(A) -> f64) -> (f64, A) {
    let mut best = (cost(algs[0]), algs[0]);
    for &a in &algs[1..] {
        let t = cost(a);
        if t < best.0 {
            best = (t, a);
        }
    }
    best
}

/// Candidate segment sizes for `m` bytes: `m/2^i` (B:5093) rounded up to whole elements, at most
/// `chunk` (a segment is one eager message), at least one element.
pub fn segment_sizes(m: usize, elem: usize, chunk: usize) -> impl Iterator<Item = usize> {
    let elem = elem.max(1);
    let cap = (chunk / elem).max(1) * elem;
    (0..usize::BITS)
        .map_while(move |i| {
            let s = m.checked_shr(i)?;
            if s == 0 && i > 0 {
                return None;
            }
            Some(s.div_ceil(elem).max(1) * elem)
        })
        .filter(move |&s| s <= cap || cap >= m)
}

/// Broadcast algorithms.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Bcast {
    Flat,
    Binomial,
    /// Segmented chain with segments of this many bytes.
    Chain(usize),
}

/// Reduce algorithms.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Reduce {
    Flat,
    Binomial,
    Rabenseifner,
}

/// Allreduce algorithms.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Allreduce {
    RecursiveDoubling,
    Rabenseifner,
    ReduceBcast,
}

/// Gather and scatter algorithms.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Gather {
    Flat,
    Binomial,
}

/// Allgather algorithms.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Allgather {
    Ring,
    Bruck,
    GatherBcast,
}

/// Barrier algorithms.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Barrier {
    Dissemination,
    FanInOut,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn model(l: f64, g0: f64, g_byte: f64) -> Model {
        Model { p: Params { l, g0, g_byte, gamma_byte: 0.5, copy_byte: 0.1 }, chunk: 65536 }
    }

    #[test]
    fn logs_and_powers() {
        assert_eq!((log2_ceil(1), log2_ceil(2), log2_ceil(5), log2_ceil(8)), (0.0, 1.0, 3.0, 3.0));
        assert_eq!((log2_floor(1), log2_floor(5), log2_floor(8)), (0.0, 2.0, 3.0));
        assert_eq!((pow2_floor(1), pow2_floor(6), pow2_floor(8)), (1, 4, 8));
    }

    #[test]
    fn bcast_formulas_are_the_thesis_tables() {
        let m = model(100.0, 10.0, 1.0);
        // g(1000) = 10 + 1000 = 1010.
        assert_eq!(m.g(1000), 1010.0);
        assert_eq!(m.bcast(Bcast::Flat, 5, 1000), 100.0 + 4.0 * 1010.0);
        assert_eq!(m.bcast(Bcast::Binomial, 5, 1000), 3.0 * 100.0 + 2.0 * 1010.0);
        // 4 segments of 250: g(250) = 260; (P−1)(g(s)+L) + g(s)(k−1).
        assert_eq!(m.bcast(Bcast::Chain(250), 5, 1000), 4.0 * 360.0 + 260.0 * 3.0);
        // Messages above the eager limit pay g0 per piece.
        assert_eq!(m.g(65536 * 2 + 1), 3.0 * 10.0 + (65536.0 * 2.0 + 1.0));
    }

    #[test]
    fn the_choice_follows_the_model() {
        // L ≫ g: the root's sends overlap the latency, the flat tree wins (one L).
        let lat = model(1000.0, 10.0, 0.01);
        assert_eq!(lat.best_bcast(8, 8, 8).1, Bcast::Flat);
        assert_eq!(lat.best_gather(16, 8).1, Gather::Flat);
        // g ≈ L: the binomial tree spreads the sends (B:5169–5171).
        let even = model(100.0, 100.0, 0.01);
        assert_eq!(even.best_bcast(8, 8, 8).1, Bcast::Binomial);
        assert_eq!(even.best_gather(16, 8).1, Gather::Binomial);
        assert_eq!(even.best_barrier(16).1, Barrier::Dissemination);
        // Bandwidth-bound (large message, g(m) ≫ L): the segmented chain (B:5169).
        let bw = model(100.0, 50.0, 1.0);
        assert!(matches!(bw.best_bcast(8, 1 << 20, 8).1, Bcast::Chain(_)), "{:?}", bw.best_bcast(8, 1 << 20, 8));
        // Two ranks: flat and binomial are the same single message; no chain.
        assert!(matches!(bw.best_bcast(2, 1 << 20, 8).1, Bcast::Binomial | Bcast::Flat));
        // Reduce: a tree for small, Rabenseifner for large messages (B:4329–4336).
        assert_eq!(even.best_reduce(8, 8).1, Reduce::Binomial);
        assert_eq!(bw.best_reduce(8, 1 << 20).1, Reduce::Rabenseifner);
        assert_eq!(even.best_allreduce(8, 8).1, Allreduce::RecursiveDoubling);
        assert_eq!(bw.best_allreduce(8, 1 << 20).1, Allreduce::Rabenseifner);
        // Large blocks: gather flat (no copies through intermediate ranks).
        assert_eq!(bw.best_gather(16, 1 << 16).1, Gather::Flat);
    }

    #[test]
    fn segment_sizes_halve_and_respect_elements_and_the_chunk() {
        let s: Vec<usize> = segment_sizes(1000, 8, 65536).collect();
        assert_eq!(s[0], 1000);
        assert_eq!(s[1], 504, "500 rounded up to whole 8-byte elements");
        assert!(s.iter().all(|&x| x % 8 == 0 && x >= 8));
        let big: Vec<usize> = segment_sizes(1 << 20, 4, 65536).collect();
        assert!(big.iter().all(|&x| x <= 65536), "{big:?}");
        assert!(big.contains(&65536));
        assert_eq!(segment_sizes(0, 4, 65536).collect::<Vec<_>>(), vec![4]);
    }

    #[test]
    fn parameters_parse_over_defaults() {
        let p = Params::SHM.parse_over("L=500, G=0.5").unwrap();
        assert_eq!((p.l, p.g_byte, p.g0), (500.0, 0.5, Params::SHM.g0));
        assert!(Params::SHM.parse_over("L").is_err());
        assert!(Params::SHM.parse_over("X=1").is_err());
        assert!(Params::SHM.parse_over("L=-1").is_err());
        assert_eq!(Params::SHM.parse_over("").unwrap(), Params::SHM);
    }
}
