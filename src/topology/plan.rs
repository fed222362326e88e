//! Mapping and binding policies (`nemesis-run --map-by`, `--bind`): which PU each rank is placed
//! on, and which CPUs it is then allowed to run on.
//!
//! **Mapping** orders the machine's PUs and gives rank `i` the `i`-th (wrapping around when ranks
//! outnumber PUs: oversubscribed). In every policy the first PU of every core comes before any
//! second hardware thread (physical cores before SMT siblings, which share a core's caches and
//! pipelines):
//! - `core` (`core:compact`, the default): cores in logical order, so consecutive ranks share the
//!   closest caches; `core:spread`: ranks evenly spaced over the cores (rank `i` of `n` on core
//!   `⌊i·C/n⌋`);
//! - `l3`, `numa`, `package` (`:spread`, the default for these): round robin over the objects of
//!   that level, so consecutive ranks land on different L3s, NUMA nodes or packages (Open MPI's
//!   `--map-by numa`); `:compact`: fill one object's cores before the next.
//!
//! **Binding** then restricts each rank to the object of the chosen level that holds its PU:
//! `hwthread` (the PU), `core`, `l2`, `l3`, `numa`, `package`, or `none`.
//!
//! Without the `hwloc` feature the machine is the affinity fallback (each allowed CPU a core,
//! nothing above): `--bind core|none` with the default mapping work as before (rank `i` on the
//! `i mod n`-th allowed CPU); every other choice is an error naming the feature.

use super::{Level, Machine, NEEDS_HWLOC, Source, cpu_list};
use crate::error::{Error, Result};

/// The level a rank is bound to.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum Bind {
    /// No binding: the kernel places the rank.
    #[default]
    None,
    /// The rank's PU (one hardware thread).
    HwThread,
    /// Its core (every SMT sibling).
    Core,
    /// Its L2 cache's CPUs.
    L2,
    /// Its L3 cache's CPUs.
    L3,
    /// Its NUMA node's CPUs.
    Numa,
    /// Its package's CPUs.
    Package,
}

impl Bind {
    /// Parses `none`, `hwthread`, `core`, `l2`, `l3`, `numa`, `package`.
    pub fn parse(s: &str) -> Result<Bind> {
        Ok(match s.trim() {
            "none" => Bind::None,
            "hwthread" => Bind::HwThread,
            "core" => Bind::Core,
            "l2" => Bind::L2,
            "l3" => Bind::L3,
            "numa" => Bind::Numa,
            "package" => Bind::Package,
            other => {
                return Err(Error::Config(format!(
                    "--bind {other}: expected core, hwthread, l2, l3, numa, package or none"
                )));
            }
        })
    }

    /// The name [`parse`](Self::parse) takes.
    pub fn name(self) -> &'static str {
        match self {
            Bind::None => "none",
            Bind::HwThread => "hwthread",
            Bind::Core => "core",
            Bind::L2 => "l2",
            Bind::L3 => "l3",
            Bind::Numa => "numa",
            Bind::Package => "package",
        }
    }

    fn level(self) -> Option<Level> {
        match self {
            Bind::None | Bind::HwThread => None,
            Bind::Core => Some(Level::Core),
            Bind::L2 => Some(Level::L2),
            Bind::L3 => Some(Level::L3),
            Bind::Numa => Some(Level::Numa),
            Bind::Package => Some(Level::Package),
        }
    }
}

/// The level ranks are distributed over.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum MapLevel {
    /// Cores.
    #[default]
    Core,
    /// L3 caches.
    L3,
    /// NUMA nodes.
    Numa,
    /// Packages.
    Package,
}

/// Spread consecutive ranks apart, or keep them together.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Order {
    /// Apart: round robin over the level's objects (evenly spaced cores for `core`).
    Spread,
    /// Together: fill an object before the next.
    Compact,
}

/// A mapping policy: `--map-by level[:spread|compact]`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MapBy {
    /// The level.
    pub level: MapLevel,
    /// The order (default: compact for cores, spread for the others).
    pub order: Order,
}

impl Default for MapBy {
    fn default() -> Self {
        MapBy { level: MapLevel::Core, order: Order::Compact }
    }
}

impl MapBy {
    /// Parses `core`, `l3`, `numa`, `package`, each optionally followed by `:spread` or
    /// `:compact`.
    pub fn parse(s: &str) -> Result<MapBy> {
        let (level, order) = match s.trim().split_once(':') {
            Some((l, o)) => (l, Some(o)),
            None => (s.trim(), None),
        };
        let level = match level {
            "core" => MapLevel::Core,
            "l3" => MapLevel::L3,
            "numa" => MapLevel::Numa,
            "package" => MapLevel::Package,
            other => return Err(Error::Config(format!("--map-by {other}: expected core, l3, numa or package"))),
        };
        let order = match order {
            None if level == MapLevel::Core => Order::Compact,
            None => Order::Spread,
            Some("spread") => Order::Spread,
            Some("compact") => Order::Compact,
            Some(o) => return Err(Error::Config(format!("--map-by {s}: {o} is not spread or compact"))),
        };
        Ok(MapBy { level, order })
    }

    /// `level:order`.
    pub fn name(self) -> String {
        let l = match self.level {
            MapLevel::Core => "core",
            MapLevel::L3 => "l3",
            MapLevel::Numa => "numa",
            MapLevel::Package => "package",
        };
        let o = match self.order {
            Order::Spread => "spread",
            Order::Compact => "compact",
        };
        format!("{l}:{o}")
    }
}

/// Where one rank goes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Slot {
    /// The rank's PU: an index into [`Machine::pus`].
    pub pu: usize,
    /// The CPUs (OS numbers) it is bound to; empty: not bound.
    pub cpus: Vec<u32>,
    /// More ranks than PUs: this rank shares its PU with an earlier one.
    pub oversubscribed: bool,
}

/// A job's placement: one [`Slot`] per rank.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Plan {
    /// The machine planned for.
    pub machine: Machine,
    /// The policies.
    pub map: MapBy,
    /// See [`Bind`].
    pub bind: Bind,
    /// Slot of each rank.
    pub slots: Vec<Slot>,
}

impl Plan {
    /// Places `ranks` ranks on `machine`. Errors: a level the machine does not have (e.g. no L3
    /// information, or the affinity fallback of a build without hwloc).
    pub fn new(machine: Machine, ranks: u32, map: MapBy, bind: Bind) -> Result<Plan> {
        if machine.pus.is_empty() {
            return Err(Error::Config("the topology has no usable PU".into()));
        }
        let fallback = machine.source == Source::Affinity;
        if fallback && (map != MapBy::default() || !matches!(bind, Bind::None | Bind::Core)) {
            let what = if map != MapBy::default() {
                format!("--map-by {}", map.name())
            } else {
                format!("--bind {}", bind.name())
            };
            return Err(Error::Config(format!("{what} {NEEDS_HWLOC}")));
        }
        let order = mapping_order(&machine, ranks, map)?;
        if let Some(level) = bind.level()
            && machine.count(level) == 0
        {
            return Err(Error::Config(format!(
                "--bind {}: the topology has no {} level",
                bind.name(),
                level.hwloc_name()
            )));
        }
        let n = order.len();
        let slots = (0..ranks as usize)
            .map(|i| {
                let pu = order[i % n];
                let cpus = match bind.level() {
                    _ if bind == Bind::None => Vec::new(),
                    None => vec![machine.pus[pu].os],
                    Some(level) => {
                        let id = machine.pus[pu].id(level);
                        machine.pus.iter().filter(|p| p.id(level) == id).map(|p| p.os).collect()
                    }
                };
                Slot { pu, cpus, oversubscribed: i >= n }
            })
            .collect();
        Ok(Plan { machine, map, bind, slots })
    }

    /// True if some rank shares its PU with another.
    pub fn oversubscribed(&self) -> bool {
        self.slots.iter().any(|s| s.oversubscribed)
    }

    /// The OS number of each rank's PU.
    pub fn pus(&self) -> Vec<u32> {
        self.slots.iter().map(|s| self.machine.pus[s.pu].os).collect()
    }

    /// The NUMA node (OS index) whose memory rank `rank` should own: the node holding every CPU
    /// it is bound to; `None` if it is not bound, or bound across nodes (the kernel decides).
    pub fn numa_node(&self, rank: usize) -> Option<u32> {
        let s = self.slots.get(rank)?;
        if s.cpus.is_empty() { None } else { self.machine.numa_node_of(&s.cpus) }
    }

    /// What `--report-bindings` and `--dry-run` print for `rank` after `rank N: `: its CPU set
    /// and the objects it covers, e.g. `cpus 6-7 covers L2 L#3 + Core L#3, memory on NUMA node
    /// P#0`, or `not bound: cpus 0-1 covers Machine L#0` (`allowed`: the CPUs an unbound rank
    /// may use; empty: the whole machine).
    pub fn describe(&self, rank: usize, allowed: &[u32]) -> String {
        let Some(s) = self.slots.get(rank) else { return "not planned".into() };
        if s.cpus.is_empty() {
            let cpus: Vec<u32> =
                if allowed.is_empty() { self.machine.pus.iter().map(|p| p.os).collect() } else { allowed.to_vec() };
            return format!("not bound: cpus {} covers {}", cpu_list(&cpus), self.machine.cover(&cpus).join(", "));
        }
        let mut line = format!("cpus {} covers {}", cpu_list(&s.cpus), self.machine.cover(&s.cpus).join(", "));
        if let Some(node) = self.numa_node(rank) {
            line += &format!(", memory on NUMA node P#{node}");
        }
        if s.oversubscribed {
            line += " (oversubscribed)";
        }
        line
    }
}

/// The PUs in the order ranks take them.
fn mapping_order(m: &Machine, ranks: u32, map: MapBy) -> Result<Vec<usize>> {
    // Tiers of hardware threads: every core's first PU, then every core's second, ...
    let tiers = m.pus.iter().map(|p| p.smt).max().unwrap_or(0) + 1;
    let tier = |t: u32| -> Vec<usize> { (0..m.pus.len()).filter(|&i| m.pus[i].smt == t).collect() };
    let level = match map.level {
        MapLevel::Core => None,
        MapLevel::L3 => Some(Level::L3),
        MapLevel::Numa => Some(Level::Numa),
        MapLevel::Package => Some(Level::Package),
    };
    if let Some(l) = level
        && m.count(l) == 0
    {
        return Err(Error::Config(format!("--map-by {}: the topology has no {} level", map.name(), l.hwloc_name())));
    }
    let mut order = Vec::with_capacity(m.pus.len());
    match (level, map.order) {
        (None, Order::Spread) => {
            let first = tier(0);
            let n = ranks as usize;
            if n <= first.len() {
                order.extend((0..n).map(|i| first[i * first.len() / n]));
                // The other PUs follow for completeness (never reached by these ranks).
                let rest: Vec<usize> = (0..m.pus.len()).filter(|i| !order.contains(i)).collect();
                order.extend(rest);
            } else {
                (0..tiers).for_each(|t| order.extend(tier(t)));
            }
        }
        (_, Order::Compact) => (0..tiers).for_each(|t| order.extend(tier(t))),
        (Some(l), Order::Spread) => {
            let mut ids: Vec<u32> = m.pus.iter().filter_map(|p| p.id(l)).collect();
            ids.sort_unstable();
            ids.dedup();
            for t in 0..tiers {
                // Per object, its PUs of this tier in logical order; then take one from each in turn.
                let mut queues: Vec<std::collections::VecDeque<usize>> = ids
                    .iter()
                    .map(|&id| tier(t).into_iter().filter(|&i| m.pus[i].id(l) == Some(id)).collect())
                    .collect();
                // PUs outside every object of the level come last.
                let orphans: Vec<usize> = tier(t).into_iter().filter(|&i| m.pus[i].id(l).is_none()).collect();
                while queues.iter().any(|q| !q.is_empty()) {
                    for q in &mut queues {
                        if let Some(i) = q.pop_front() {
                            order.push(i);
                        }
                    }
                }
                order.extend(orphans);
            }
        }
    }
    Ok(order)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cpus(p: &Plan) -> Vec<Vec<u32>> {
        p.slots.iter().map(|s| s.cpus.clone()).collect()
    }

    #[test]
    fn policies_parse() {
        assert_eq!(MapBy::parse("numa").unwrap(), MapBy { level: MapLevel::Numa, order: Order::Spread });
        assert_eq!(MapBy::parse("core").unwrap(), MapBy::default());
        assert_eq!(MapBy::parse("l3:compact").unwrap().name(), "l3:compact");
        assert!(matches!(MapBy::parse("socket"), Err(Error::Config(_))));
        assert!(matches!(MapBy::parse("numa:wide"), Err(Error::Config(_))));
        for b in ["none", "hwthread", "core", "l2", "l3", "numa", "package"] {
            assert_eq!(Bind::parse(b).unwrap().name(), b);
        }
        assert!(matches!(Bind::parse("board"), Err(Error::Config(_))));
    }

    #[test]
    fn the_fallback_keeps_core_binding_and_refuses_the_rest() {
        let m = Machine {
            pus: (0..3)
                .map(|i| super::super::Pu { os: i * 2, logical: i, ids: [None, None, None, None, Some(i)], smt: 0 })
                .collect(),
            numa_os: Vec::new(),
            source: Source::Affinity,
        };
        let p = Plan::new(m.clone(), 4, MapBy::default(), Bind::Core).unwrap();
        // Rank i on the (i mod n)-th allowed CPU, as before.
        assert_eq!(cpus(&p), [vec![0], vec![2], vec![4], vec![0]]);
        assert!(p.slots[3].oversubscribed);
        for b in [Bind::HwThread, Bind::L2, Bind::L3, Bind::Numa, Bind::Package] {
            let e = Plan::new(m.clone(), 2, MapBy::default(), b).unwrap_err();
            assert!(e.to_string().contains("hwloc"), "{e}");
        }
        let e = Plan::new(m, 2, MapBy::parse("numa").unwrap(), Bind::Core).unwrap_err();
        assert!(e.to_string().contains("--map-by numa:spread") && e.to_string().contains("hwloc"), "{e}");
    }
}
