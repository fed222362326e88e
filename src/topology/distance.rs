//! How far apart two ranks of a node are, and the thresholds chosen for that distance.
//!
//! A rank's [`Locality`] is, at each level, the object holding every CPU it is bound to
//! (`nemesis-run` passes every local rank's in `NEMESIS_LOCALITY`); two ranks are at the finest
//! level they share ([`Distance`]). Unbound ranks, and every rank of a build or launcher that
//! gives no locality, are at [`Distance::Unknown`].
//!
//! The thresholds that depend on the distance — eager limits, the rendezvous backend's size
//! range, the length from which a single copy is split, the copy-ring chunk — are looked up per
//! pair in a [`PairTable`] once, at start-up: the eager fast path compares with one limit as
//! before (the smallest of the node's pairs) and only messages above it look at their pair's.
//! The table's rows are partial: a field left `None` takes the node-wide value (`NEMESIS_EAGER_MAX`
//! and the other variables, or their measured defaults). `NEMESIS_TOPO_TABLE` sets rows, e.g.
//! `package:eager=8K,split=64K;machine:lmt_max=1M`.

use std::fmt;

use super::Level;
use crate::contract::parse_bytes;
use crate::error::{Error, Result};

/// The distance between two ranks of a node, closest first.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Distance {
    /// The same core: SMT siblings (or ranks bound to one core).
    Core = 0,
    /// Different cores sharing an L2 cache.
    L2 = 1,
    /// Sharing an L3 cache.
    L3 = 2,
    /// The same NUMA node, no shared cache.
    Numa = 3,
    /// The same package, different NUMA nodes.
    Package = 4,
    /// Different packages.
    Machine = 5,
    /// Not known (a rank is not bound, or no locality was given).
    Unknown = 6,
}

impl Distance {
    /// Every distance, by index.
    pub const ALL: [Distance; 7] = [
        Distance::Core,
        Distance::L2,
        Distance::L3,
        Distance::Numa,
        Distance::Package,
        Distance::Machine,
        Distance::Unknown,
    ];

    /// `core`, `l2`, `l3`, `numa`, `package`, `machine`, `unknown`.
    pub fn name(self) -> &'static str {
        match self {
            Distance::Core => "core",
            Distance::L2 => "l2",
            Distance::L3 => "l3",
            Distance::Numa => "numa",
            Distance::Package => "package",
            Distance::Machine => "machine",
            Distance::Unknown => "unknown",
        }
    }

    /// The distance named `s` (see [`name`](Self::name)).
    pub fn parse(s: &str) -> Option<Distance> {
        Distance::ALL.into_iter().find(|d| d.name() == s.trim())
    }
}

impl fmt::Display for Distance {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// Where a rank is bound: the logical index of the object holding all its CPUs at each level
/// (`None`: its CPUs span several, or it is not bound).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct Locality {
    /// Indexed by [`Level`].
    pub ids: [Option<u32>; 5],
}

/// The environment variable in which `nemesis-run` gives each rank the locality of every rank
/// of its node (at its former path).
pub use crate::contract::ENV_LOCALITY;

impl Locality {
    /// The distance between ranks at `self` and `other`: the finest level whose object they share.
    pub fn distance(&self, other: &Locality) -> Distance {
        let same = |l: Level| self.ids[l as usize].is_some() && self.ids[l as usize] == other.ids[l as usize];
        if same(Level::Core) {
            Distance::Core
        } else if same(Level::L2) {
            Distance::L2
        } else if same(Level::L3) {
            Distance::L3
        } else if same(Level::Numa) {
            Distance::Numa
        } else if same(Level::Package) {
            Distance::Package
        } else if self.ids[Level::Package as usize].is_some() && other.ids[Level::Package as usize].is_some() {
            Distance::Machine
        } else {
            Distance::Unknown
        }
    }

    /// `package.numa.l3.l2.core`, `-` for none.
    pub fn encode(&self) -> String {
        let f: Vec<String> = self.ids.iter().map(|i| i.map_or("-".into(), |v| v.to_string())).collect();
        f.join(".")
    }

    /// Parses [`encode`](Self::encode)'s form.
    pub fn decode(s: &str) -> Option<Locality> {
        let parts: Vec<&str> = s.trim().split('.').collect();
        if parts.len() != 5 {
            return None;
        }
        let mut ids = [None; 5];
        for (slot, p) in ids.iter_mut().zip(parts) {
            *slot = if p == "-" { None } else { Some(p.parse().ok()?) };
        }
        Some(Locality { ids })
    }

    /// Every local rank's locality from [`ENV_LOCALITY`], if set and naming exactly `local_ranks`
    /// ranks; `None` otherwise (a malformed value is logged and ignored: distances are then
    /// unknown, which only costs tuning).
    pub fn from_env(local_ranks: usize) -> Option<Vec<Locality>> {
        let v = std::env::var(ENV_LOCALITY).ok()?;
        let all: Option<Vec<Locality>> = v.split(';').map(Locality::decode).collect();
        match all {
            Some(all) if all.len() == local_ranks => Some(all),
            _ => {
                tracing::warn!(value = %v, local_ranks, "{ENV_LOCALITY} is malformed or names another number of ranks: pair distances unknown");
                None
            }
        }
    }
}

/// The thresholds of one distance; `None` takes the node-wide value.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PairThresholds {
    /// Largest message sent eagerly by every send (`eager`).
    pub eager_max: Option<usize>,
    /// Largest message a blocking send sends eagerly (`eager_blocking`).
    pub eager_blocking_max: Option<usize>,
    /// Under `NEMESIS_LMT=auto`, rendezvous from this length use a single copy (`lmt_min`).
    pub cma_min: Option<usize>,
    /// ... and from this length the rings again (`lmt_max`).
    pub cma_max: Option<usize>,
    /// Single copies from this length are split between both processes (`split`).
    pub split_min: Option<usize>,
    /// Bytes per copy-ring chunk, at most the ring's slot size (`ring_chunk`).
    pub ring_chunk: Option<usize>,
}

impl PairThresholds {
    const FIELDS: [&'static str; 6] = ["eager", "eager_blocking", "lmt_min", "lmt_max", "split", "ring_chunk"];

    fn field(&mut self, name: &str) -> Option<&mut Option<usize>> {
        Some(match name {
            "eager" => &mut self.eager_max,
            "eager_blocking" => &mut self.eager_blocking_max,
            "lmt_min" => &mut self.cma_min,
            "lmt_max" => &mut self.cma_max,
            "split" => &mut self.split_min,
            "ring_chunk" => &mut self.ring_chunk,
            _ => return None,
        })
    }

    /// `eager=12288,split=32768` for the fields set.
    pub fn describe(&self) -> String {
        let mut copy = *self;
        let parts: Vec<String> =
            Self::FIELDS.iter().filter_map(|&f| copy.field(f).and_then(|v| v.map(|v| format!("{f}={v}")))).collect();
        if parts.is_empty() { "-".into() } else { parts.join(",") }
    }
}

/// Thresholds by [`Distance`].
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PairTable {
    /// Indexed by `Distance as usize`.
    pub rows: [PairThresholds; 7],
}

/// The measured table. Every default of `config.rs` was measured between two cores that share an
/// L3 cache and nothing closer (this machine: `nemesis-bench topo` shows the distance; `docs/large-messages.md`
/// gives the `nemesis-bench bw` and `latency` runs): they are the node-wide
/// values, so the `l3` row has nothing to override, and no other distance exists on this machine
/// to measure. A machine with more distances is measured by running the same commands with the
/// two ranks on a pair of CPUs at each distance (`nemesis-bench topo` lists one pair per distance;
/// `taskset -c A,B nemesis-bench bw ...` pins to them) and its rows go in `NEMESIS_TOPO_TABLE`.
pub const MEASURED: PairTable = PairTable {
    rows: [PairThresholds {
        eager_max: None,
        eager_blocking_max: None,
        cma_min: None,
        cma_max: None,
        split_min: None,
        ring_chunk: None,
    }; 7],
};

impl PairTable {
    /// The row of `d`.
    pub fn row(&self, d: Distance) -> &PairThresholds {
        &self.rows[d as usize]
    }

    /// Forgets `field` (`eager`, `split`, ...) in every row: a node-wide variable set by the user
    /// overrides the measured rows (but not rows the user sets in `NEMESIS_TOPO_TABLE` after it).
    pub fn clear(&mut self, field: &str) {
        for r in &mut self.rows {
            if let Some(f) = r.field(field) {
                *f = None;
            }
        }
    }

    /// Applies `NEMESIS_TOPO_TABLE`-style rows: `dist:field=size,...;dist:...`, where `dist` is a
    /// [`Distance`] name or `*` (every distance).
    pub fn apply(&mut self, spec: &str) -> Result<()> {
        let bad = |m: String| Error::Config(format!("NEMESIS_TOPO_TABLE={spec}: {m}"));
        for row in spec.split(';').map(str::trim).filter(|r| !r.is_empty()) {
            let (dist, fields) =
                row.split_once(':').ok_or_else(|| bad(format!("`{row}` is not distance:field=size,...")))?;
            let targets: Vec<Distance> = match dist.trim() {
                "*" => Distance::ALL.to_vec(),
                d => vec![Distance::parse(d).ok_or_else(|| {
                    bad(format!("`{d}` is not a distance (core, l2, l3, numa, package, machine, unknown or *)"))
                })?],
            };
            for kv in fields.split(',').map(str::trim).filter(|f| !f.is_empty()) {
                let (k, v) = kv.split_once('=').ok_or_else(|| bad(format!("`{kv}` is not field=size")))?;
                let v = parse_bytes(v).ok_or_else(|| bad(format!("`{v}` is not a size")))?;
                for &d in &targets {
                    let slot = self.rows[d as usize]
                        .field(k.trim())
                        .ok_or_else(|| bad(format!("`{k}` is not a field ({})", PairThresholds::FIELDS.join(", "))))?;
                    *slot = Some(v);
                }
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn loc(ids: [Option<u32>; 5]) -> Locality {
        Locality { ids }
    }

    #[test]
    fn distances_from_localities() {
        // 2 packages × 2 NUMA × 8 cores × 2 PUs, each core its own L2, an L3 per NUMA node.
        let a = loc([Some(0), Some(0), Some(0), Some(0), Some(0)]);
        let sibling = a;
        let l3 = loc([Some(0), Some(0), Some(0), Some(1), Some(1)]);
        let numa = loc([Some(0), Some(1), Some(1), Some(8), Some(8)]);
        let far = loc([Some(1), Some(2), Some(2), Some(16), Some(16)]);
        let shared_l2 = loc([Some(0), Some(0), Some(0), Some(0), Some(1)]);
        let same_node_only = loc([Some(0), Some(0), None, None, None]);
        let unbound = Locality::default();
        assert_eq!(a.distance(&sibling), Distance::Core);
        assert_eq!(a.distance(&shared_l2), Distance::L2);
        assert_eq!(a.distance(&l3), Distance::L3);
        assert_eq!(a.distance(&same_node_only), Distance::Numa);
        assert_eq!(a.distance(&numa), Distance::Package);
        assert_eq!(a.distance(&far), Distance::Machine);
        assert_eq!(a.distance(&unbound), Distance::Unknown);
        for l in [a, numa, same_node_only, unbound] {
            assert_eq!(Locality::decode(&l.encode()), Some(l));
        }
        assert_eq!(same_node_only.encode(), "0.0.-.-.-");
        assert_eq!(Locality::decode("0.0.0"), None);
        assert_eq!(Locality::decode("0.x.0.0.0"), None);
    }

    #[test]
    fn table_rows_parse_and_clear() {
        let mut t = MEASURED;
        t.apply("package:eager=8K,split=64K; machine:lmt_max=1M ;*:ring_chunk=16K").unwrap();
        assert_eq!(t.row(Distance::Package).eager_max, Some(8192));
        assert_eq!(t.row(Distance::Package).split_min, Some(65536));
        assert_eq!(t.row(Distance::Machine).cma_max, Some(1 << 20));
        assert_eq!(t.row(Distance::L3).eager_max, None);
        assert!(Distance::ALL.iter().all(|&d| t.row(d).ring_chunk == Some(16384)));
        assert_eq!(t.row(Distance::Package).describe(), "eager=8192,split=65536,ring_chunk=16384");
        t.clear("eager");
        assert_eq!(t.row(Distance::Package).eager_max, None);
        for bad in ["package", "socket:eager=1", "l3:speed=1", "l3:eager=x", "l3:eager"] {
            assert!(matches!(MEASURED.clone().apply(bad), Err(Error::Config(_))), "{bad}");
        }
    }
}
