//! `nemesis-bench topo`: the topology in force, the distance of every pair of CPUs this process
//! may use, one CPU pair per distance (to measure that distance's thresholds with `taskset -c
//! A,B nemesis-bench bw ...`), and the thresholds each distance gets (`NEMESIS_TOPO_TABLE` over
//! the measured table, `NEMESIS_*` node-wide values), as the Endpoint computes them.

use nemesis::Config;
use nemesis::config::{DEFAULT_EAGER_BLOCKING_MAX, DEFAULT_EAGER_MAX, DEFAULT_EAGER_MAX_RING};
use nemesis::topology::{self, Distance, Machine};

use crate::error::Result;

/// Prints the report.
pub fn run() -> Result<()> {
    let machine = Machine::load()?;
    let cfg = Config::from_env()?;
    println!("topology: {}", machine.summary());
    let cpus: Vec<u32> = machine.pus.iter().map(|p| p.os).collect();
    let loc = |cpu: u32| machine.locality_of(&[cpu]);
    // The distance matrix (up to 16 CPUs: larger machines list one pair per distance only).
    if cpus.len() <= 16 {
        println!("\npair distances (CPUs by OS number):");
        print!("{:>6}", "");
        cpus.iter().for_each(|c| print!(" {c:>8}"));
        println!();
        for &a in &cpus {
            print!("{a:>6}");
            for &b in &cpus {
                print!(" {:>8}", if a == b { "-" } else { loc(a).distance(&loc(b)).name() });
            }
            println!();
        }
    }
    println!("\none pair per distance present (measure with `taskset -c A,B nemesis-bench bw ...`):");
    let mut any = false;
    for d in Distance::ALL {
        let pair = cpus
            .iter()
            .enumerate()
            .find_map(|(i, &a)| cpus[i + 1..].iter().find(|&&b| loc(a).distance(&loc(b)) == d).map(|&b| (a, b)));
        if let Some((a, b)) = pair {
            println!("  {:<8} CPUs {a},{b}", d.name());
            any = true;
        }
    }
    if !any {
        println!("  none: a single CPU");
    }
    println!("\nthresholds in force by distance (bytes; `-`: none; eager depends on CMA, probed by each rank):");
    println!(
        "  {:<8} {:>10} {:>14} {:>10} {:>10} {:>10} {:>10}  set by",
        "distance", "eager", "eager_blocking", "lmt_min", "lmt_max", "split", "ring_chunk"
    );
    let show = |v: usize| if v == usize::MAX { "-".to_owned() } else { v.to_string() };
    for d in Distance::ALL {
        let row = cfg.pairs.row(d);
        let eager = match row.eager_max.or(cfg.eager_max) {
            Some(v) => v.to_string(),
            None => format!("{DEFAULT_EAGER_MAX}|{DEFAULT_EAGER_MAX_RING}"),
        };
        let blocking = row.eager_blocking_max.or(cfg.eager_blocking_max).unwrap_or(DEFAULT_EAGER_BLOCKING_MAX);
        let chunk = row.ring_chunk.map_or("slot".to_owned(), |v| v.to_string());
        println!(
            "  {:<8} {eager:>10} {blocking:>14} {:>10} {:>10} {:>10} {chunk:>10}  {}",
            d.name(),
            show(row.cma_min.unwrap_or(cfg.cma_min)),
            show(row.cma_max.unwrap_or(cfg.cma_max)),
            show(row.split_min.unwrap_or(cfg.split_min)),
            if row.describe() == "-" { "node-wide".to_owned() } else { format!("table: {}", row.describe()) },
        );
    }
    println!(
        "\nThe node-wide values were measured with nemesis-bench bw and latency between two CPUs at distance l3 \
         (docs/large-messages.md); set rows with NEMESIS_TOPO_TABLE (e.g. package:eager=8K,split=64K). \
         hwloc: {}.",
        if topology::HWLOC { "built in" } else { "not built in (feature `hwloc`): every pair is at distance unknown" }
    );
    Ok(())
}
