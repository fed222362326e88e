//! The machine's topology: where ranks run, where their memory lives, and how far apart two
//! ranks are (`shared/ARCHITECTURE.md`, "Topology").
//!
//! The design follows Mercier's habilitation (`shared/papers/mercier-2019-hdr-nemesis-topology.txt`):
//! hwloc's tree of packages, NUMA nodes, caches, cores and processing units (PUs), numbered
//! *logically* so that consecutive numbers are physically close (L1815–1830; the OS's physical
//! numbering varies with the BIOS, L1755–1763), is what placement policies walk; communication
//! between cores sharing an L3 is faster than between NUMA nodes, itself faster than between
//! packages (L434), hence the pair distances of [`Distance`].
//!
//! - [`Machine`]: the flattened tree — every PU with the logical index of the core, L2, L3, NUMA
//!   node and package above it. With the cargo feature `hwloc` it is read through `hwlocality`
//!   from the system libhwloc (this machine, or `HWLOC_XMLFILE` / `HWLOC_SYNTHETIC`, which hwloc
//!   itself honours and we name in messages); without it, [`Machine::load`] gives the CPUs this
//!   process may use, one core each and nothing above (the affinity fallback).
//! - [`plan`]: the launcher's binding and mapping policies (`nemesis-run --bind`, `--map-by`).
//! - [`distance`]: pair distances from each rank's binding, and the per-distance thresholds table.

pub mod distance;
#[cfg(feature = "hwloc")]
mod hwloc;
pub mod plan;

use std::fmt::Write as _;

pub use distance::{Distance, Locality, PairTable, PairThresholds};
pub use plan::{Bind, MapBy, MapLevel, Order, Plan, Slot};

use crate::error::{Error, Result};

/// The levels above a PU, finest last; [`Pu::ids`] is indexed by them.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Level {
    /// A processor package (socket).
    Package = 0,
    /// A NUMA node (memory with its CPUs).
    Numa = 1,
    /// An L3 cache (and the CPUs that share it).
    L3 = 2,
    /// An L2 cache.
    L2 = 3,
    /// A core (its PUs are SMT siblings).
    Core = 4,
}

impl Level {
    /// Every level, coarsest first in the usual nesting.
    pub const ALL: [Level; 5] = [Level::Package, Level::Numa, Level::L3, Level::L2, Level::Core];

    /// hwloc's name of the level's objects.
    pub fn hwloc_name(self) -> &'static str {
        match self {
            Level::Package => "Package",
            Level::Numa => "NUMANode",
            Level::L3 => "L3",
            Level::L2 => "L2",
            Level::Core => "Core",
        }
    }
}

/// One processing unit (hardware thread).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Pu {
    /// The OS's CPU number (what `sched_setaffinity` takes).
    pub os: u32,
    /// hwloc's logical index of the PU.
    pub logical: u32,
    /// Logical index of the object above at each [`Level`] (`None`: no such level here).
    pub ids: [Option<u32>; 5],
    /// Rank of this PU among its core's PUs (0: the first hardware thread of its core).
    pub smt: u32,
}

impl Pu {
    /// The object above at `level`.
    pub fn id(&self, level: Level) -> Option<u32> {
        self.ids[level as usize]
    }
}

/// Where the topology came from.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Source {
    /// hwloc's discovery of this machine.
    System,
    /// `HWLOC_SYNTHETIC` (or a synthetic description given in code).
    Synthetic(String),
    /// `HWLOC_XMLFILE`.
    Xml(String),
    /// No hwloc: the CPUs this process may use (`sched_getaffinity`), one core each.
    Affinity,
}

impl Source {
    /// True if the topology is this machine's, so that binding to it means something.
    pub fn is_this_machine(&self) -> bool {
        matches!(self, Source::System | Source::Affinity)
    }
}

impl std::fmt::Display for Source {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Source::System => f.write_str("this machine (hwloc)"),
            Source::Synthetic(d) => write!(f, "HWLOC_SYNTHETIC={d}"),
            Source::Xml(p) => write!(f, "HWLOC_XMLFILE={p}"),
            Source::Affinity => f.write_str("the CPUs this process may use (built without the `hwloc` feature)"),
        }
    }
}

/// The machine as a list of PUs in logical order.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Machine {
    /// Usable PUs in hwloc's logical order (restricted to this process's affinity for
    /// [`Source::System`]).
    pub pus: Vec<Pu>,
    /// OS index of each NUMA node, by logical index (what `mbind` takes).
    pub numa_os: Vec<u32>,
    /// Where it came from.
    pub source: Source,
}

/// The message of every option that needs the topology when the `hwloc` feature is off.
pub const NEEDS_HWLOC: &str = "needs the machine's topology: this nemesis was built without the `hwloc` feature (build with `--features hwloc`, which links the system libhwloc: Debian's libhwloc-dev)";

/// True if this build reads topologies through hwloc (cargo feature `hwloc`).
pub const HWLOC: bool = cfg!(feature = "hwloc");

impl Machine {
    /// The topology in force: hwloc's (this machine, or `HWLOC_XMLFILE` / `HWLOC_SYNTHETIC`) with
    /// the `hwloc` feature; otherwise the affinity fallback, and an error if one of those
    /// variables asks for a topology only hwloc can read.
    pub fn load() -> Result<Machine> {
        #[cfg(feature = "hwloc")]
        {
            hwloc::load()
        }
        #[cfg(not(feature = "hwloc"))]
        {
            for var in ["HWLOC_SYNTHETIC", "HWLOC_XMLFILE"] {
                if let Ok(v) = std::env::var(var)
                    && !v.trim().is_empty()
                {
                    return Err(Error::Config(format!("{var}={v} {NEEDS_HWLOC}")));
                }
            }
            Machine::from_affinity()
        }
    }

    /// A synthetic topology in hwloc's syntax (e.g. `pack:2 numa:2 l3:1 core:8 pu:2`).
    #[cfg(feature = "hwloc")]
    pub fn synthetic(description: &str) -> Result<Machine> {
        hwloc::synthetic(description)
    }

    /// The affinity fallback: every CPU this process may use is a core of its own, no level above.
    pub fn from_affinity() -> Result<Machine> {
        let pus = allowed_cpus()?
            .into_iter()
            .enumerate()
            .map(|(i, os)| Pu { os, logical: i as u32, ids: [None, None, None, None, Some(i as u32)], smt: 0 })
            .collect();
        Ok(Machine { pus, numa_os: Vec::new(), source: Source::Affinity })
    }

    /// A uniform machine built in code: `packages × numa × l3 × cores × pus`, each core with its
    /// own L2, PUs numbered in logical order (as hwloc numbers synthetic topologies). For tests and
    /// for checking what hwloc reads.
    pub fn uniform(packages: u32, numa: u32, l3: u32, cores: u32, pus: u32) -> Machine {
        let mut out = Vec::new();
        let (mut core, mut l3i, mut nodei) = (0u32, 0u32, 0u32);
        for p in 0..packages {
            for _ in 0..numa {
                for _ in 0..l3 {
                    for _ in 0..cores {
                        for t in 0..pus {
                            let i = out.len() as u32;
                            let ids = [Some(p), Some(nodei), Some(l3i), Some(core), Some(core)];
                            out.push(Pu { os: i, logical: i, ids, smt: t });
                        }
                        core += 1;
                    }
                    l3i += 1;
                }
                nodei += 1;
            }
        }
        Machine { pus: out, numa_os: (0..nodei).collect(), source: Source::Synthetic("uniform".into()) }
    }

    /// Number of objects at `level` (0 if the level is unknown).
    pub fn count(&self, level: Level) -> usize {
        let mut ids: Vec<u32> = self.pus.iter().filter_map(|p| p.id(level)).collect();
        ids.sort_unstable();
        ids.dedup();
        ids.len()
    }

    /// One line: the counts of every level and where the topology came from.
    pub fn summary(&self) -> String {
        let mut s = String::new();
        for (level, name) in [
            (Level::Package, "packages"),
            (Level::Numa, "NUMA nodes"),
            (Level::L3, "L3"),
            (Level::L2, "L2"),
            (Level::Core, "cores"),
        ] {
            let _ = write!(s, "{} {name}, ", self.count(level));
        }
        let _ = write!(s, "{} PUs ({})", self.pus.len(), self.source);
        s
    }

    /// Indexes into [`pus`](Self::pus) of the PUs whose OS numbers are in `cpus`.
    fn indexes_of(&self, cpus: &[u32]) -> Vec<usize> {
        self.pus.iter().enumerate().filter(|(_, p)| cpus.contains(&p.os)).map(|(i, _)| i).collect()
    }

    /// The largest objects exactly covering `cpus`, coarsest first (`Machine L#0` if it is every
    /// PU): `["NUMANode L#1"]`, `["Core L#2", "PU L#6 (P#6)"]`. CPUs not in the topology are named
    /// `CPU P#n`.
    pub fn cover(&self, cpus: &[u32]) -> Vec<String> {
        let inside = self.indexes_of(cpus);
        if inside.len() == self.pus.len() && !self.pus.is_empty() {
            return vec!["Machine L#0".into()];
        }
        // Levels from the one with fewest objects: the coarsest, whatever the nesting here.
        let mut levels: Vec<Level> = Level::ALL.into_iter().filter(|&l| self.count(l) > 0).collect();
        levels.sort_by_key(|&l| self.count(l));
        let members = |level: Level, id: u32| -> Vec<usize> {
            (0..self.pus.len()).filter(|&j| self.pus[j].id(level) == Some(id)).collect()
        };
        let mut covered = vec![false; self.pus.len()];
        let mut out = Vec::new();
        for &i in &inside {
            if covered[i] {
                continue;
            }
            // The coarsest object holding PU i that lies inside the set, named with every level
            // whose object is that same set (as lstopo writes `L2 L#2 + Core L#2`).
            let mut found: Option<(Vec<usize>, Vec<String>)> = None;
            for &level in &levels {
                let Some(id) = self.pus[i].id(level) else { continue };
                let m = members(level, id);
                match &mut found {
                    Some((set, names)) if *set == m => names.push(format!("{} L#{id}", level.hwloc_name())),
                    Some(_) => {}
                    None if m.iter().all(|j| inside.contains(j)) => {
                        found = Some((m, vec![format!("{} L#{id}", level.hwloc_name())]));
                    }
                    None => {}
                }
            }
            let pu = format!("PU L#{} (P#{})", self.pus[i].logical, self.pus[i].os);
            match found {
                Some((set, mut names)) => {
                    if set.len() == 1 {
                        names.push(pu);
                    }
                    for j in set {
                        covered[j] = true;
                    }
                    out.push(names.join(" + "));
                }
                None => {
                    covered[i] = true;
                    out.push(pu);
                }
            }
        }
        for &c in cpus {
            if !self.pus.iter().any(|p| p.os == c) {
                out.push(format!("CPU P#{c}"));
            }
        }
        out
    }

    /// The locality of a rank bound to `cpus`: at each level, the object holding all of them.
    pub fn locality_of(&self, cpus: &[u32]) -> Locality {
        let inside = self.indexes_of(cpus);
        let mut ids = [None; 5];
        if inside.is_empty() {
            return Locality { ids };
        }
        for level in Level::ALL {
            let first = self.pus[inside[0]].id(level);
            if inside.iter().all(|&i| self.pus[i].id(level) == first) {
                ids[level as usize] = first;
            }
        }
        Locality { ids }
    }

    /// The OS index of the NUMA node holding every CPU of `cpus`, if one does.
    pub fn numa_node_of(&self, cpus: &[u32]) -> Option<u32> {
        let node = self.locality_of(cpus).ids[Level::Numa as usize]?;
        self.numa_os.get(node as usize).copied()
    }
}

/// `0-3,8,10-11`: CPU numbers as ranges.
pub fn cpu_list(cpus: &[u32]) -> String {
    let mut v = cpus.to_vec();
    v.sort_unstable();
    v.dedup();
    let mut out = String::new();
    let mut i = 0;
    while i < v.len() {
        let mut j = i;
        while j + 1 < v.len() && v[j + 1] == v[j] + 1 {
            j += 1;
        }
        if !out.is_empty() {
            out.push(',');
        }
        if j == i {
            let _ = write!(out, "{}", v[i]);
        } else {
            let _ = write!(out, "{}-{}", v[i], v[j]);
        }
        i = j + 1;
    }
    out
}

/// Parses what [`cpu_list`] writes (and `/proc/self/status`'s `Cpus_allowed_list`).
pub fn parse_cpu_list(s: &str) -> Option<Vec<u32>> {
    let mut out = Vec::new();
    for part in s.trim().split(',').filter(|p| !p.is_empty()) {
        match part.split_once('-') {
            Some((a, b)) => {
                let (a, b) = (a.trim().parse::<u32>().ok()?, b.trim().parse::<u32>().ok()?);
                if b < a {
                    return None;
                }
                out.extend(a..=b);
            }
            None => out.push(part.trim().parse().ok()?),
        }
    }
    Some(out)
}

/// The CPUs this process may run on, in increasing order (`sched_getaffinity`).
pub fn allowed_cpus() -> Result<Vec<u32>> {
    use nix::sched::{CpuSet, sched_getaffinity};
    let set = sched_getaffinity(nix::unistd::Pid::from_raw(0)).map_err(|e| Error::io("sched_getaffinity", e.into()))?;
    let cpus: Vec<u32> = (0..CpuSet::count()).filter(|&c| set.is_set(c).unwrap_or(false)).map(|c| c as u32).collect();
    if cpus.is_empty() {
        return Err(Error::Config("no CPU is allowed to this process".into()));
    }
    Ok(cpus)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cpu_lists_round_trip() {
        assert_eq!(cpu_list(&[0, 1, 2, 3, 8, 10, 11]), "0-3,8,10-11");
        assert_eq!(cpu_list(&[5]), "5");
        assert_eq!(parse_cpu_list("0-3,8,10-11").unwrap(), vec![0, 1, 2, 3, 8, 10, 11]);
        assert_eq!(parse_cpu_list("3-1"), None);
        assert_eq!(parse_cpu_list("x"), None);
    }

    #[test]
    fn cover_names_the_largest_objects() {
        let m = Machine::uniform(2, 2, 1, 8, 2);
        assert_eq!(m.count(Level::Package), 2);
        assert_eq!(m.count(Level::Numa), 4);
        assert_eq!(m.count(Level::Core), 32);
        let all: Vec<u32> = (0..64).collect();
        assert_eq!(m.cover(&all), ["Machine L#0"]);
        // NUMA node 1 = cores 8..16 = PUs 16..32 (its L3 is the same set: the NUMA level has fewer
        // objects, so it is named).
        let node1: Vec<u32> = (16..32).collect();
        assert_eq!(m.cover(&node1), ["NUMANode L#1 + L3 L#1"]);
        assert_eq!(m.cover(&[4, 5]), ["L2 L#2 + Core L#2"]);
        assert_eq!(m.cover(&[4, 5, 6]), ["L2 L#2 + Core L#2", "PU L#6 (P#6)"]);
        let one_pu_per_core = Machine::uniform(1, 1, 1, 2, 1);
        assert_eq!(one_pu_per_core.cover(&[1]), ["L2 L#1 + Core L#1 + PU L#1 (P#1)"]);
        assert_eq!(m.cover(&[200]), ["CPU P#200"]);
        let loc = m.locality_of(&[4, 5]);
        assert_eq!(loc.ids, [Some(0), Some(0), Some(0), Some(2), Some(2)]);
        assert_eq!(m.numa_node_of(&node1), Some(1));
        assert_eq!(m.numa_node_of(&(0..32).collect::<Vec<_>>()), None);
    }
}
