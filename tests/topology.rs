//! Topology: mapping and binding plans on synthetic machines rank by rank, `nemesis-run
//! --report-bindings` against the ranks' real affinity, `--dry-run`, the build without hwloc
//! (the affinity fallback and its clear errors), NUMA placement decisions, and pair distances
//! choosing thresholds in a real job.
//!
//! The plans are checked on machines built in code ([`Machine::uniform`]), so they run in every
//! build; with the `hwloc` feature, hwloc's reading of the same synthetic descriptions is checked
//! to be those machines, and `nemesis-run --dry-run` plans a 2-package 64-core machine through
//! `HWLOC_SYNTHETIC`.

mod common;

use std::process::Command;

use common::{job, results, show};
use nemesis::topology::{Bind, Distance, Level, Machine, MapBy, Plan, Pu, Source, parse_cpu_list};
use nemesis::{Endpoint, WORLD};

const LAUNCHER: &str = env!("CARGO_BIN_EXE_nemesis-run");

// ---------------------------------------------------------------------------------------------
// Plans on synthetic machines.

/// 1 package × 2 cores.
fn small() -> Machine {
    Machine::uniform(1, 1, 1, 2, 1)
}

/// 2 packages × 2 NUMA nodes (an L3 each) × 8 cores × 2 PUs: core `c` has PUs `2c` and `2c + 1`,
/// is in NUMA node `c / 8` and package `c / 16`.
fn two_sockets() -> Machine {
    Machine::uniform(2, 2, 1, 8, 2)
}

/// 4 NUMA nodes × 16 cores, one PU each, and nothing else known (no package, no caches: what
/// hwloc reads from `numa:4 core:16`).
fn four_numa() -> Machine {
    let pus =
        (0..64u32).map(|i| Pu { os: i, logical: i, ids: [None, Some(i / 16), None, None, Some(i)], smt: 0 }).collect();
    Machine { pus, numa_os: vec![0, 1, 2, 3], source: Source::Synthetic("numa:4 core:16".into()) }
}

fn plan(m: Machine, n: u32, map: &str, bind: Bind) -> Plan {
    Plan::new(m, n, MapBy::parse(map).unwrap(), bind).unwrap()
}

/// The OS number of each rank's PU.
fn pus(m: Machine, n: u32, map: &str) -> Vec<u32> {
    plan(m, n, map, Bind::HwThread).pus()
}

fn one_package_of_two_cores() {
    for map in ["core", "core:spread", "numa", "numa:compact", "package", "package:compact", "l3", "l3:compact"] {
        assert_eq!(pus(small(), 2, map), [0, 1], "{map}");
        // A third rank shares a PU.
        let p = plan(small(), 3, map, Bind::Core);
        assert_eq!(p.pus(), [0, 1, 0], "{map}");
        assert_eq!(p.slots.iter().map(|s| s.oversubscribed).collect::<Vec<_>>(), [false, false, true]);
    }
    let p = plan(small(), 2, "core", Bind::Package);
    assert!(p.slots.iter().all(|s| s.cpus == [0, 1]));
    assert_eq!(plan(small(), 2, "core", Bind::None).slots[0].cpus, Vec::<u32>::new());
}

fn two_sockets_each_mapping_rank_by_rank() {
    let core_pu = |c: u32| 2 * c;
    // Compact: cores in order, then the second PU of each core (physical cores first).
    let want: Vec<u32> = (0..32).map(core_pu).chain((0..8).map(|c| core_pu(c) + 1)).collect();
    assert_eq!(pus(two_sockets(), 40, "core"), want);
    for compact in ["numa:compact", "package:compact", "l3:compact"] {
        assert_eq!(pus(two_sockets(), 40, compact), want, "{compact}");
    }
    // Spread over cores: 8 ranks every 4th core.
    assert_eq!(pus(two_sockets(), 8, "core:spread"), (0..8).map(|i| core_pu(4 * i)).collect::<Vec<_>>());
    // NUMA (and L3) round robin: rank i on node i % 4, the (i / 4)-th core of that node; past
    // 32 ranks, the second PUs in the same order.
    let numa: Vec<u32> = (0..40u32)
        .map(|i| {
            let j = i % 32;
            core_pu(8 * (j % 4) + j / 4) + u32::from(i >= 32)
        })
        .collect();
    assert_eq!(pus(two_sockets(), 40, "numa"), numa);
    assert_eq!(pus(two_sockets(), 40, "l3:spread"), numa);
    // Packages alternate.
    let pkg: Vec<u32> = (0..6u32).map(|i| core_pu(16 * (i % 2) + i / 2)).collect();
    assert_eq!(pus(two_sockets(), 6, "package"), pkg);
    // 65 ranks on 64 PUs: the last one wraps to the first PU.
    let p = plan(two_sockets(), 65, "core", Bind::HwThread);
    assert_eq!((p.pus()[64], p.slots[64].oversubscribed, p.slots[63].oversubscribed), (0, true, false));
}

fn two_sockets_each_binding_rank_by_rank() {
    let m = two_sockets;
    let range = |a: u32, b: u32| (a..b).collect::<Vec<u32>>();
    for i in 0..8u32 {
        let c = 8 * (i % 4) + i / 4; // the core `numa` mapping gives rank i
        let (node, pkg) = (c / 8, c / 16);
        let check = |bind: Bind, want: Vec<u32>| {
            let p = plan(m(), 8, "numa", bind);
            assert_eq!(p.slots[i as usize].cpus, want, "rank {i}, --bind {}", bind.name());
        };
        check(Bind::HwThread, vec![2 * c]);
        check(Bind::Core, vec![2 * c, 2 * c + 1]);
        check(Bind::L2, vec![2 * c, 2 * c + 1]);
        check(Bind::L3, range(16 * node, 16 * node + 16));
        check(Bind::Numa, range(16 * node, 16 * node + 16));
        check(Bind::Package, range(32 * pkg, 32 * pkg + 32));
        check(Bind::None, vec![]);
    }
}

fn four_numa_nodes_rank_by_rank() {
    // Round robin over the nodes: rank i on node i % 4, its (i / 4)-th core.
    let want: Vec<u32> = (0..10u32).map(|i| 16 * (i % 4) + i / 4).collect();
    assert_eq!(pus(four_numa(), 10, "numa"), want);
    assert_eq!(pus(four_numa(), 10, "core"), (0..10).collect::<Vec<_>>());
    assert_eq!(pus(four_numa(), 4, "core:spread"), [0, 16, 32, 48]);
    let p = plan(four_numa(), 5, "numa", Bind::Numa);
    for (i, s) in p.slots.iter().enumerate() {
        let node = i as u32 % 4;
        assert_eq!(s.cpus, (16 * node..16 * node + 16).collect::<Vec<_>>(), "rank {i}");
    }
    // Levels this machine does not have are clear errors.
    for (map, bind) in [("l3", Bind::Core), ("package", Bind::Core), ("core", Bind::L3), ("core", Bind::Package)] {
        let e = Plan::new(four_numa(), 2, MapBy::parse(map).unwrap(), bind).unwrap_err();
        assert!(e.to_string().contains("has no"), "{map} {}: {e}", bind.name());
    }
}

fn numa_placement_decisions() {
    // Bound within one node: the rank's memory goes there; across nodes or unbound: the kernel's.
    let p = plan(two_sockets(), 8, "numa", Bind::Core);
    assert_eq!((0..8).map(|r| p.numa_node(r)).collect::<Vec<_>>(), (0..8).map(|i| Some(i % 4)).collect::<Vec<_>>());
    let p = plan(two_sockets(), 4, "package", Bind::Package);
    assert!((0..4).all(|r| p.numa_node(r).is_none()), "a package spans two nodes");
    let p = plan(two_sockets(), 4, "numa", Bind::None);
    assert!((0..4).all(|r| p.numa_node(r).is_none()));
    // OS numbering of nodes is honoured.
    let mut m = four_numa();
    m.numa_os = vec![7, 5, 3, 1];
    let p = plan(m, 4, "numa", Bind::Core);
    assert_eq!((0..4).map(|r| p.numa_node(r)).collect::<Vec<_>>(), [Some(7), Some(5), Some(3), Some(1)]);
    assert!(p.describe(0, &[]).ends_with("memory on NUMA node P#7"), "{}", p.describe(0, &[]));
}

fn pair_distances_from_plans() {
    let p = plan(two_sockets(), 8, "core", Bind::HwThread);
    let loc = |r: usize| p.machine.locality_of(&p.slots[r].cpus);
    // Ranks 0..7 on cores 0..7 (one NUMA node, one L3), then further apart under `numa`.
    assert_eq!(loc(0).distance(&loc(1)), Distance::L3);
    let p2 = plan(two_sockets(), 40, "core", Bind::HwThread);
    let loc2 = |r: usize| p2.machine.locality_of(&p2.slots[r].cpus);
    assert_eq!(loc2(0).distance(&loc2(32)), Distance::Core, "SMT siblings");
    assert_eq!(loc2(0).distance(&loc2(8)), Distance::Package);
    assert_eq!(loc2(0).distance(&loc2(16)), Distance::Machine);
    let p3 = plan(two_sockets(), 2, "core", Bind::None);
    assert_eq!(p3.machine.locality_of(&p3.slots[0].cpus).distance(&loc(1)), Distance::Unknown);
    assert_eq!(two_sockets().count(Level::Core), 32);
}

// ---------------------------------------------------------------------------------------------
// nemesis-run on this machine.

fn launcher(args: &[&str], env: &[(&str, &str)]) -> std::process::Output {
    let mut c = Command::new(LAUNCHER);
    c.args(args);
    for (k, v) in env {
        c.env(k, v);
    }
    c.output().unwrap()
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

/// A rank and its CPUs.
type RankCpus = (u32, Vec<u32>);

/// `--report-bindings` lines (`rank -> cpus`) and each rank's `Cpus_allowed_list`.
fn reported_and_real(args: &[&str]) -> (Vec<RankCpus>, Vec<RankCpus>) {
    let mut all = vec!["--report-bindings", "--tag-output"];
    all.extend_from_slice(args);
    all.extend_from_slice(&["--", "sh", "-c", "grep Cpus_allowed_list /proc/self/status"]);
    let o = launcher(&all, &[]);
    assert!(o.status.success(), "{}", show(&o));
    let mut reported: Vec<RankCpus> = text(&o.stderr)
        .lines()
        .filter_map(|l| {
            let rest = l.strip_prefix("nemesis-run: rank ")?;
            let (rank, rest) = rest.split_once(": ")?;
            let cpus = rest.trim_start_matches("not bound: ").strip_prefix("cpus ")?.split(' ').next()?;
            Some((rank.parse().ok()?, parse_cpu_list(cpus)?))
        })
        .collect();
    let mut real: Vec<RankCpus> = text(&o.stdout)
        .lines()
        .filter_map(|l| {
            let (rank, rest) = l.strip_prefix('[')?.split_once("] Cpus_allowed_list:")?;
            Some((rank.parse().ok()?, parse_cpu_list(rest)?))
        })
        .collect();
    reported.sort();
    real.sort();
    (reported, real)
}

fn report_bindings_match_the_ranks_affinity() {
    let mut cases: Vec<Vec<&str>> = vec![vec!["-n", "3", "--bind", "core"], vec!["-n", "2", "--bind", "none"]];
    if nemesis::topology::HWLOC {
        cases.extend([
            vec!["-n", "2", "--bind", "hwthread", "--map-by", "numa"],
            vec!["-n", "2", "--bind", "l3", "--map-by", "core:spread"],
            vec!["-n", "2", "--bind", "numa"],
            vec!["-n", "2", "--bind", "package", "--map-by", "package:compact"],
        ]);
    }
    for args in cases {
        let (reported, real) = reported_and_real(&args);
        let n: u32 = args[1].parse().unwrap();
        assert_eq!(reported.len(), n as usize, "{args:?}: one line per rank");
        assert_eq!(reported, real, "{args:?}");
    }
}

fn dry_run_prints_the_plan_and_starts_nothing() {
    let marker = std::env::temp_dir().join(format!("nemesis-dry-run-{}", std::process::id()));
    let touch = format!("touch {}", marker.display());
    let o = launcher(&["-n", "2", "--bind", "core", "--dry-run", "--", "sh", "-c", &touch], &[]);
    assert!(o.status.success(), "{}", show(&o));
    assert!(!marker.exists(), "--dry-run started a rank");
    let out = text(&o.stdout);
    assert!(out.starts_with("topology: "), "{out}");
    assert!(out.contains("rank 0 (node ") && out.contains("rank 1 (node "), "{out}");
}

#[cfg(not(feature = "hwloc"))]
fn without_hwloc_the_fallback_and_clear_errors() {
    for args in [
        vec!["-n", "2", "--bind", "numa", "--", "true"],
        vec!["-n", "2", "--bind", "hwthread", "--", "true"],
        vec!["-n", "2", "--map-by", "l3", "--bind", "core", "--", "true"],
        vec!["-n", "2", "--bind", "l2", "--dry-run", "--", "true"],
    ] {
        let o = launcher(&args, &[]);
        let err = text(&o.stderr);
        assert_eq!(o.status.code(), Some(1), "{args:?}: {err}");
        assert!(err.contains("hwloc") && err.contains("--features hwloc"), "{args:?}: {err}");
    }
    let o = launcher(&["-n", "1", "--dry-run", "--", "true"], &[("HWLOC_SYNTHETIC", "pack:2 core:4")]);
    assert!(!o.status.success() && text(&o.stderr).contains("HWLOC_SYNTHETIC"), "{}", show(&o));
    // The fallback: rank i on the (i mod n)-th allowed CPU, reported as such.
    let o = launcher(&["-n", "1", "--bind", "core", "--dry-run", "--", "true"], &[]);
    assert!(text(&o.stdout).contains("built without the `hwloc` feature"), "{}", show(&o));
}

#[cfg(feature = "hwloc")]
fn hwloc_reads_the_synthetic_machines_as_built() {
    let m = Machine::synthetic("pack:2 numa:2 l3:1 core:8 l2:1 pu:2").unwrap();
    assert_eq!(m.pus, two_sockets().pus);
    let m = Machine::synthetic("pack:1 core:2 l2:1 pu:1").unwrap();
    assert_eq!(m.pus.iter().map(|p| (p.os, p.id(Level::Core))).collect::<Vec<_>>(), [(0, Some(0)), (1, Some(1))]);
    let m = Machine::synthetic("numa:4 core:16 pu:1").unwrap();
    assert_eq!(
        m.pus.iter().map(|p| p.id(Level::Numa)).collect::<Vec<_>>(),
        four_numa().pus.iter().map(|p| p.id(Level::Numa)).collect::<Vec<_>>()
    );
    assert_eq!((m.count(Level::L3), m.count(Level::Package)), (0, 0));
}

#[cfg(feature = "hwloc")]
fn dry_run_plans_a_two_socket_64_core_machine() {
    // 2 packages × 2 NUMA nodes × 16 cores × 2 PUs: core c has PUs 2c, 2c + 1.
    let desc = ("HWLOC_SYNTHETIC", "pack:2 numa:2 l3:1 core:16 pu:2");
    let o = launcher(&["-n", "8", "--map-by", "package", "--bind", "core", "--dry-run", "--", "true"], &[desc]);
    assert!(o.status.success(), "{}", show(&o));
    let out = text(&o.stdout);
    assert!(out.contains("2 packages, 4 NUMA nodes, 4 L3, 0 L2, 64 cores, 128 PUs"), "{out}");
    for i in 0..8u32 {
        let core = 32 * (i % 2) + i / 2;
        let node = core / 16;
        let want = format!("cpus {}-{} covers Core L#{core}, memory on NUMA node P#{node}", 2 * core, 2 * core + 1);
        let line = out.lines().find(|l| l.starts_with(&format!("rank {i} "))).unwrap_or_default();
        assert!(line.ends_with(&want), "rank {i}: {line:?} should end with {want:?}");
    }
    // Binding the real ranks to a machine that is not this one is refused.
    let o = launcher(&["-n", "2", "--bind", "core", "--", "true"], &[desc]);
    assert_eq!(o.status.code(), Some(1));
    assert!(text(&o.stderr).contains("not this machine's"), "{}", show(&o));
    let o = launcher(&["-n", "2", "--dry-run", "--", "true"], &[("HWLOC_SYNTHETIC", "bogus:2")]);
    assert!(!o.status.success() && text(&o.stderr).contains("bogus"), "{}", show(&o));
}

// ---------------------------------------------------------------------------------------------
// Pair distances choosing thresholds in a real job.

fn main() {
    common::harness::main(
        rank_main,
        tests![
            one_package_of_two_cores,
            two_sockets_each_mapping_rank_by_rank,
            two_sockets_each_binding_rank_by_rank,
            four_numa_nodes_rank_by_rank,
            numa_placement_decisions,
            pair_distances_from_plans,
            report_bindings_match_the_ranks_affinity,
            dry_run_prints_the_plan_and_starts_nothing,
            #[cfg(not(feature = "hwloc"))]
            without_hwloc_the_fallback_and_clear_errors,
            #[cfg(feature = "hwloc")]
            hwloc_reads_the_synthetic_machines_as_built,
            #[cfg(feature = "hwloc")]
            dry_run_plans_a_two_socket_64_core_machine,
            pair_distances_choose_the_thresholds,
            bound_ranks_know_their_distance_and_node_here,
            ranks_bound_by_hydra_publish_their_localities,
        ],
    );
}

/// The rank program, by `NEMESIS_TEST_ROLE`.
fn rank_main() {
    match std::env::var("NEMESIS_TEST_ROLE").unwrap_or_default().as_str() {
        "distances" => distances(),
        other => panic!("unknown role {other:?}"),
    }
}

/// Rank 0 sends 4 KiB to each other rank; the receivers report how it moved and every rank
/// reports its distances and eager limits.
fn distances() {
    let mut ep = Endpoint::init().unwrap();
    let (rank, size) = (ep.rank(), ep.size());
    let msg = vec![7u8; 4096];
    for r in 0..size {
        println!(
            "RESULT {rank} {r} {} {}",
            ep.distance(r).map_or("remote", Distance::name),
            ep.eager_limit_to(r).unwrap()
        );
    }
    let local = ep.local_ranks().iter().position(|&r| r == rank).unwrap() as u16;
    println!("RESULT {rank} numa {:?}", ep.segment().placed_node(local).unwrap());
    if rank == 0 {
        for r in 1..size {
            ep.send(&msg, r, 1, WORLD).unwrap();
        }
    } else {
        let mut buf = vec![0u8; 4096];
        ep.recv(&mut buf, 0, 1, WORLD).unwrap();
        assert_eq!(buf, msg);
        println!("RESULT {rank} rendezvous {}", ep.lmt_stats().ring + ep.lmt_stats().cma);
    }
    ep.finalize().unwrap();
}

fn pair_distances_choose_the_thresholds() {
    // Synthetic localities: ranks 0 and 1 share an L3, rank 2 is on the other package. The table
    // sends 4 KiB eagerly to the first and by rendezvous to the second (blocking sends included).
    let env = [
        ("NEMESIS_LOCALITY", "0.0.0.0.0;0.0.0.1.1;1.2.2.16.16".to_owned()),
        ("NEMESIS_TOPO_TABLE", "*:eager=20K;machine:eager=1K,eager_blocking=1K".to_owned()),
    ];
    let o = job(3, &[], "distances", &env);
    assert!(o.status.success(), "{}", show(&o));
    let mut r = results(&o);
    r.sort();
    let want = [
        "RESULT 0 0 core 20480",
        "RESULT 0 1 l3 20480",
        "RESULT 0 2 machine 1024",
        "RESULT 0 numa None",
        "RESULT 1 0 l3 20480",
        "RESULT 1 1 core 20480",
        "RESULT 1 2 machine 1024",
        "RESULT 1 numa None",
        "RESULT 1 rendezvous 0",
        "RESULT 2 0 machine 1024",
        "RESULT 2 1 machine 1024",
        "RESULT 2 2 core 20480",
        "RESULT 2 numa None",
        "RESULT 2 rendezvous 1",
    ];
    assert_eq!(r, want, "{}", show(&o));
    // Without localities every pair is at one (unknown) distance with the node-wide limit.
    let o = job(2, &[], "distances", &[("NEMESIS_TOPO_TABLE", "unknown:eager=2K,eager_blocking=2K".to_owned())]);
    assert!(o.status.success(), "{}", show(&o));
    let r = results(&o);
    assert!(
        r.contains(&"RESULT 0 1 unknown 2048".to_owned()) && r.contains(&"RESULT 1 rendezvous 1".to_owned()),
        "{r:?}"
    );
}

/// On this machine, ranks bound by the plan know their real distance, and (with hwloc, which
/// knows the NUMA nodes) their memory in the segment is placed on their node.
fn bound_ranks_know_their_distance_and_node_here() {
    let m = Machine::load().unwrap();
    let p = Plan::new(m, 2, MapBy::default(), Bind::Core).unwrap();
    let loc = |r: usize| p.machine.locality_of(&p.slots[r].cpus);
    let d = loc(0).distance(&loc(1));
    let o = job(2, &["--bind", "core"], "distances", &[]);
    assert!(o.status.success(), "{}", show(&o));
    let r = results(&o);
    let want = format!("RESULT 0 1 {} ", d.name());
    assert!(r.iter().any(|l| l.starts_with(&want)), "{want}: {r:?}");
    for rank in 0..2 {
        let node = p.numa_node(rank);
        assert!(r.contains(&format!("RESULT {rank} numa {node:?}")), "rank {rank} on {node:?}: {r:?}");
        assert_eq!(node.is_some(), nemesis::topology::HWLOC);
    }
}

/// Under another process manager that binds its ranks (`mpiexec.hydra -bind-to core`), the ranks
/// publish their own localities at start-up (with hwloc) and know their distance without
/// `nemesis-run`'s plan; unbound, or without hwloc (whose fallback cannot compare two
/// processes' CPUs), the distance is unknown.
fn ranks_bound_by_hydra_publish_their_localities() {
    let found = Command::new("mpiexec.hydra").arg("--version").output().is_ok_and(|o| o.status.success());
    if !found {
        assert!(!common::in_ci(), "mpiexec.hydra is missing: CI must install Debian's mpich");
        eprintln!("skipped: mpiexec.hydra not found (apt-get install mpich)");
        return;
    }
    let m = Machine::load().unwrap();
    let p = Plan::new(m, 2, MapBy::default(), Bind::Core).unwrap();
    let loc = |r: usize| p.machine.locality_of(&p.slots[r].cpus);
    let bound = if nemesis::topology::HWLOC { loc(0).distance(&loc(1)).name() } else { "unknown" };
    for (args, want) in [(&["-bind-to", "core"][..], bound), (&[][..], "unknown")] {
        let o = Command::new("mpiexec.hydra")
            .args(["-n", "2"])
            .args(args)
            .args(common::harness::me_as_rank())
            .env("NEMESIS_TEST_ROLE", "distances")
            .env_remove("NEMESIS_LOCALITY")
            .output()
            .unwrap();
        assert!(o.status.success(), "{}", show(&o));
        let r = results(&o);
        for (a, b) in [(0, 1), (1, 0)] {
            let line = format!("RESULT {a} {b} {want} ");
            assert!(r.iter().any(|l| l.starts_with(&line)), "{args:?}: {line}: {r:?}");
        }
    }
}
