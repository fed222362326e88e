//! Reading the topology through `hwlocality` (cargo feature `hwloc`, the system libhwloc).
//!
//! hwloc 2 keeps NUMA nodes out of the tree of CPUs (they hang as memory children of the object
//! whose CPUs they serve), so each level is read the same way whatever the nesting: every object
//! of the level's type, and the PUs of its CPU set.

use hwlocality::Topology;
use hwlocality::object::types::ObjectType;

use super::{Level, Machine, Pu, Source, allowed_cpus};
use crate::error::{Error, Result};

fn hwloc_error(what: &str, e: impl std::fmt::Display) -> Error {
    Error::Config(format!("hwloc: {what}: {e}"))
}

/// This machine, or what `HWLOC_SYNTHETIC` / `HWLOC_XMLFILE` describe.
pub(super) fn load() -> Result<Machine> {
    if let Ok(d) = std::env::var("HWLOC_SYNTHETIC")
        && !d.trim().is_empty()
    {
        return synthetic(&d);
    }
    if let Ok(p) = std::env::var("HWLOC_XMLFILE")
        && !p.trim().is_empty()
    {
        let builder =
            Topology::builder().from_xml_file(&p).map_err(|e| hwloc_error(&format!("HWLOC_XMLFILE={p}"), e))?;
        let topo = builder.build().map_err(|e| hwloc_error(&format!("HWLOC_XMLFILE={p}"), e))?;
        return Ok(flatten(&topo, Source::Xml(p), None));
    }
    let topo = Topology::new().map_err(|e| hwloc_error("discovering this machine", e))?;
    Ok(flatten(&topo, Source::System, Some(allowed_cpus()?)))
}

/// A synthetic topology (`pack:2 numa:2 l3:1 core:8 pu:2`).
pub(super) fn synthetic(description: &str) -> Result<Machine> {
    let what = format!("synthetic topology {description:?}");
    let builder = Topology::builder().from_synthetic(description).map_err(|e| hwloc_error(&what, e))?;
    let topo = builder.build().map_err(|e| hwloc_error(&what, e))?;
    Ok(flatten(&topo, Source::Synthetic(description.to_owned()), None))
}

/// The PUs of `topo` (only those in `allowed`, if given) with their ancestors' logical indexes.
fn flatten(topo: &Topology, source: Source, allowed: Option<Vec<u32>>) -> Machine {
    let mut pus: Vec<Pu> = topo
        .objects_with_type(ObjectType::PU)
        .filter_map(|o| {
            let os = o.os_index()? as u32;
            Some(Pu { os, logical: o.logical_index() as u32, ids: [None; 5], smt: 0 })
        })
        .collect();
    pus.sort_by_key(|p| p.logical);
    let mut numa_os = Vec::new();
    for (level, ty) in [
        (Level::Package, ObjectType::Package),
        (Level::Numa, ObjectType::NUMANode),
        (Level::L3, ObjectType::L3Cache),
        (Level::L2, ObjectType::L2Cache),
        (Level::Core, ObjectType::Core),
    ] {
        for o in topo.objects_with_type(ty) {
            let id = o.logical_index() as u32;
            if level == Level::Numa {
                let os = o.os_index().map_or(id, |x| x as u32);
                if numa_os.len() <= id as usize {
                    numa_os.resize(id as usize + 1, 0);
                }
                numa_os[id as usize] = os;
            }
            let Some(set) = o.cpuset() else { continue };
            for cpu in set.iter_set() {
                let cpu = usize::from(cpu) as u32;
                if let Some(p) = pus.iter_mut().find(|p| p.os == cpu) {
                    p.ids[level as usize] = Some(id);
                }
            }
        }
    }
    // The SMT rank of each PU within its core, in logical order.
    let mut seen: Vec<(u32, u32)> = Vec::new();
    for p in &mut pus {
        if let Some(core) = p.id(Level::Core) {
            match seen.iter_mut().find(|(c, _)| *c == core) {
                Some((_, n)) => {
                    p.smt = *n;
                    *n += 1;
                }
                None => seen.push((core, 1)),
            }
        }
    }
    if let Some(allowed) = allowed {
        pus.retain(|p| allowed.contains(&p.os));
    }
    Machine { pus, numa_os, source }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn synthetic_topologies_read_as_built() {
        // hwloc numbers synthetic PUs in logical order, SMT siblings consecutive.
        let m = synthetic("pack:2 numa:2 l3:1 core:8 l2:1 pu:2").unwrap();
        let mut want = Machine::uniform(2, 2, 1, 8, 2);
        want.source = m.source.clone();
        assert_eq!(m, want);
        let small = synthetic("pack:1 core:2 pu:1").unwrap();
        assert_eq!(small.pus.len(), 2);
        assert_eq!(small.count(Level::Numa), 1, "hwloc inserts a NUMA node");
        assert!(matches!(synthetic("bogus:3"), Err(Error::Config(m)) if m.contains("bogus")));
    }

    #[test]
    fn this_machine_has_the_allowed_cpus() {
        let m = load_system();
        assert_eq!(m.pus.iter().map(|p| p.os).collect::<Vec<_>>(), allowed_cpus().unwrap());
        assert!(m.count(Level::Core) >= 1);
        assert!(m.count(Level::Numa) >= 1);
    }

    fn load_system() -> Machine {
        let topo = Topology::new().unwrap();
        flatten(&topo, Source::System, Some(allowed_cpus().unwrap()))
    }
}
