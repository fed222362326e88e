//! What a suite run prints and writes: terminal tables (a row per size, a column per system),
//! CSV files (a row per system and size, the system in its own column) and, through
//! [`crate::plot`], SVG plots.
//!
//! Ratios are medians of per-round ratios (a figure over the baseline or over another system's
//! figure of the same round). The "best peer" of a system at a size is the alternative
//! (`unix-socket`, `pipe`, `iceoryx2`, `openmpi`, `mpich`; never itself, never a nemesis
//! system) with the best median there.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use crate::error::{Error, Result};
use crate::sizes::human;
use crate::stats::{Summary, best, finite, paired_ratio};
use crate::suite::{Outcome, Series};
use crate::system::{Family, Skipped};

/// The system every ratio is taken to.
pub const REFERENCE: &str = "openmpi";

/// One system at one size.
#[derive(Clone, Debug)]
pub struct Row {
    pub system: String,
    pub family: Family,
    pub bytes: usize,
    /// Rounds with a figure.
    pub rounds: usize,
    pub figure: Option<Summary>,
    pub to_baseline: Option<Summary>,
    pub best_peer: Option<String>,
    pub to_peer: Option<Summary>,
    /// The ratio to Open MPI's figure of the same round (none for Open MPI itself, or without it).
    pub to_openmpi: Option<Summary>,
}

/// The rows of `s`, by size then system.
pub fn rows(o: &Outcome, s: &Series) -> Vec<Row> {
    let mut out = Vec::new();
    let openmpi = openmpi(o, s);
    for (j, &bytes) in s.sizes.iter().enumerate() {
        let medians: Vec<Option<f64>> = s.values.iter().map(|v| finite(&v[j]).map(|x| x.median)).collect();
        for (m, &k) in s.members.iter().enumerate() {
            let v = &s.values[m][j];
            // The best peer other than this system.
            let peers: Vec<Option<f64>> = (0..s.members.len())
                .map(|p| medians[p].filter(|_| p != m && o.family(s.members[p]) == Family::Peer))
                .collect();
            let peer = best(&peers, s.workload.higher_is_better());
            out.push(Row {
                system: o.systems[k].name.clone(),
                family: o.systems[k].family,
                bytes,
                rounds: v.iter().filter(|x| x.is_finite()).count(),
                figure: finite(v),
                to_baseline: paired_ratio(v, &s.baseline[j]),
                best_peer: peer.map(|p| o.systems[s.members[p]].name.clone()),
                to_peer: peer.and_then(|p| paired_ratio(v, &s.values[p][j])),
                to_openmpi: openmpi.filter(|&p| p != m).and_then(|p| paired_ratio(v, &s.values[p][j])),
            });
        }
    }
    out
}

/// The member of `s` that is Open MPI, if it was measured.
fn openmpi(o: &Outcome, s: &Series) -> Option<usize> {
    s.members.iter().position(|&k| o.systems[k].name == REFERENCE)
}

/// A figure with 3 significant digits or so.
pub fn num(v: f64) -> String {
    let a = v.abs();
    if v == 0.0 {
        "0".into()
    } else if a >= 100.0 {
        format!("{v:.0}")
    } else if a >= 10.0 {
        format!("{v:.1}")
    } else if a >= 1.0 {
        format!("{v:.2}")
    } else if a >= 0.001 {
        format!("{v:.3}")
    } else {
        format!("{v:.1e}")
    }
}

pub fn spread(s: &Option<Summary>) -> String {
    match s {
        Some(s) => format!("{} [{}..{}]", num(s.median), num(s.min), num(s.max)),
        None => "-".into(),
    }
}

/// A right-aligned text table: `head` then a line per row of `body`.
pub fn table(head: &[String], body: &[Vec<String>]) -> String {
    let cols = head.len();
    let mut w = head.iter().map(|h| h.len()).collect::<Vec<_>>();
    for r in body {
        for (c, cell) in r.iter().enumerate().take(cols) {
            w[c] = w[c].max(cell.chars().count());
        }
    }
    let mut out = String::new();
    let line = |cells: &[String], out: &mut String| {
        let parts: Vec<String> = cells.iter().enumerate().map(|(c, s)| format!("{s:>width$}", width = w[c])).collect();
        let _ = writeln!(out, "  {}", parts.join("  "));
    };
    line(head, &mut out);
    for r in body {
        line(r, &mut out);
    }
    out
}

/// The terminal report of a suite run.
pub fn text(o: &Outcome, command: &str) -> String {
    let mut out = String::new();
    let (a, b) = o.cpus;
    let _ = writeln!(
        out,
        "nemesis-bench {command}: 2 processes per system pinned to CPUs {a} and {b}; {} rounds, systems interleaved; \
         medians [min..max]",
        o.rounds
    );
    let width = o.systems.iter().map(|s| s.name.len()).chain(o.skipped.iter().map(|s| s.name.len())).max().unwrap_or(0);
    if o.scale != 1.0 {
        let _ = writeln!(
            out,
            "  (nemesis-bench's own rank programs ran {} of mpi_pingpong's iterations; the MPI programs ran all)",
            o.scale
        );
    }
    for s in &o.systems {
        let _ = writeln!(out, "  {:<width$}  {}", s.name, s.detail);
    }
    for s in &o.skipped {
        let _ = writeln!(out, "  {:<width$}  skipped: {}", s.name, s.reason);
    }
    for s in &o.series {
        let names: Vec<String> = s.members.iter().map(|&k| o.systems[k].name.clone()).collect();
        let rows = rows(o, s);
        let n = s.members.len();
        let w = s.workload;
        let better = if w.higher_is_better() { "higher is better" } else { "lower is better" };
        let _ = writeln!(out, "\n{}, {} ({better})", w.title(), w.unit());
        let mut head = vec!["bytes".to_owned(), s.baseline_name().to_owned()];
        head.extend(names.iter().cloned());
        let body: Vec<Vec<String>> = s
            .sizes
            .iter()
            .enumerate()
            .map(|(j, &bytes)| {
                let mut r = vec![human(bytes), spread(&finite(&s.baseline[j]))];
                r.extend(rows[j * n..(j + 1) * n].iter().map(|x| spread(&x.figure)));
                r
            })
            .collect();
        out += &table(&head, &body);
        let base = match w {
            crate::workload::Workload::Latency => "the cache-line latency between the two CPUs",
            _ => "one core's memcpy of the same size",
        };
        let _ = writeln!(out, "ratio to {base} (median of per-round ratios)");
        let mut head = vec!["bytes".to_owned()];
        head.extend(names.iter().cloned());
        let ratio_table = |f: &dyn Fn(&Row) -> String| -> Vec<Vec<String>> {
            s.sizes
                .iter()
                .enumerate()
                .map(|(j, &bytes)| {
                    let mut r = vec![human(bytes)];
                    r.extend(rows[j * n..(j + 1) * n].iter().map(f));
                    r
                })
                .collect()
        };
        out += &table(&head, &ratio_table(&|r| r.to_baseline.map(|x| num(x.median)).unwrap_or("-".into())));
        if rows.iter().any(|r| r.best_peer.is_some()) {
            let _ =
                writeln!(out, "ratio to the best peer of this run at that size (median of per-round ratios; the peer)");
            out += &table(
                &head,
                &ratio_table(&|r| match (&r.to_peer, &r.best_peer) {
                    (Some(x), Some(p)) => format!("{} {p}", num(x.median)),
                    _ => "-".into(),
                }),
            );
        }
        // Open MPI is the reference of the targets: its own table, with the spread, from the
        // smallest size (the small-message window of `bw` starts at 1 byte).
        let Some(rf) = openmpi(o, s) else { continue };
        let others: Vec<usize> = (0..n).filter(|&m| m != rf).collect();
        if others.is_empty() {
            continue;
        }
        let better = if w.higher_is_better() { "above 1 is better" } else { "below 1 is better" };
        let _ = writeln!(out, "ratio to openmpi (median of per-round ratios [min..max]; {better})");
        let mut head = vec!["bytes".to_owned()];
        head.extend(others.iter().map(|&m| names[m].clone()));
        let body: Vec<Vec<String>> = s
            .sizes
            .iter()
            .enumerate()
            .map(|(j, &bytes)| {
                let mut r = vec![human(bytes)];
                r.extend(others.iter().map(|&m| spread(&rows[j * n + m].to_openmpi)));
                r
            })
            .collect();
        out += &table(&head, &body);
    }
    if !o.failures.is_empty() {
        let _ = writeln!(out, "\nfailed runs (their figures are missing):");
        for f in &o.failures {
            let _ = writeln!(out, "  {f}");
        }
    }
    out
}

/// A CSV field, quoted if it needs to be.
pub fn field(s: &str) -> String {
    if s.contains([',', '"', '\n', '\r']) { format!("\"{}\"", s.replace('"', "\"\"")) } else { s.to_owned() }
}

fn opt(v: Option<f64>) -> String {
    v.map(|x| x.to_string()).unwrap_or_default()
}

/// The systems file: every system measured (name, family, how it ran) and every one skipped
/// (with why).
pub fn systems_csv<'a>(measured: impl Iterator<Item = (&'a str, Family, &'a str)>, skipped: &[Skipped]) -> String {
    let mut systems = String::from("system,family,status,detail\n");
    for (name, family, detail) in measured {
        let _ = writeln!(systems, "{},{},measured,{}", field(name), family.name(), field(detail));
    }
    for s in skipped {
        let fam = if s.name.starts_with("nemesis") { Family::Nemesis } else { Family::Peer };
        let _ = writeln!(systems, "{},{},skipped,{}", field(&s.name), fam.name(), field(&s.reason));
    }
    systems
}

/// The columns of a series' CSV file.
pub const SERIES_COLUMNS: &str = "system,family,workload,bytes,unit,rounds,median,min,max,baseline,\
ratio_to_baseline,ratio_to_baseline_min,ratio_to_baseline_max,best_peer,ratio_to_best_peer,ratio_to_best_peer_min,\
ratio_to_best_peer_max,ratio_to_openmpi,ratio_to_openmpi_min,ratio_to_openmpi_max";

/// Writes `PREFIX-<workload>.csv` for each series, `PREFIX-systems.csv` and
/// `PREFIX-baseline.csv` into `dir`; returns the files written.
pub fn write_csv(o: &Outcome, dir: &Path, prefix: &str) -> Result<Vec<PathBuf>> {
    std::fs::create_dir_all(dir).map_err(|e| Error::file("create", dir, e))?;
    let mut written = Vec::new();
    let mut put = |name: String, text: String| -> Result<()> {
        let p = dir.join(name);
        std::fs::write(&p, text).map_err(|e| Error::file("write", &p, e))?;
        written.push(p);
        Ok(())
    };
    let mut baseline = String::from("baseline,workload,bytes,unit,rounds,median,min,max\n");
    for s in &o.series {
        let mut t = format!("{SERIES_COLUMNS}\n");
        for r in rows(o, s) {
            let sm = |f: fn(&Summary) -> f64, x: &Option<Summary>| opt(x.as_ref().map(f));
            let fields = [
                field(&r.system),
                r.family.name().into(),
                s.workload.key().into(),
                r.bytes.to_string(),
                s.workload.unit().into(),
                r.rounds.to_string(),
                sm(|x| x.median, &r.figure),
                sm(|x| x.min, &r.figure),
                sm(|x| x.max, &r.figure),
                s.baseline_name().into(),
                sm(|x| x.median, &r.to_baseline),
                sm(|x| x.min, &r.to_baseline),
                sm(|x| x.max, &r.to_baseline),
                r.best_peer.as_deref().map(field).unwrap_or_default(),
                sm(|x| x.median, &r.to_peer),
                sm(|x| x.min, &r.to_peer),
                sm(|x| x.max, &r.to_peer),
                sm(|x| x.median, &r.to_openmpi),
                sm(|x| x.min, &r.to_openmpi),
                sm(|x| x.max, &r.to_openmpi),
            ];
            t += &fields.join(",");
            t.push('\n');
        }
        put(format!("{prefix}-{}.csv", s.workload.file_stem()), t)?;
        for (j, &bytes) in s.sizes.iter().enumerate() {
            let f = finite(&s.baseline[j]);
            let n = s.baseline[j].iter().filter(|x| x.is_finite()).count();
            let _ = writeln!(
                baseline,
                "{},{},{bytes},{},{n},{},{},{}",
                s.baseline_name(),
                s.workload.key(),
                s.workload.unit(),
                opt(f.map(|x| x.median)),
                opt(f.map(|x| x.min)),
                opt(f.map(|x| x.max))
            );
        }
    }
    let measured = o.systems.iter().map(|s| (s.name.as_str(), s.family, s.detail.as_str()));
    put(format!("{prefix}-systems.csv"), systems_csv(measured, &o.skipped))?;
    put(format!("{prefix}-baseline.csv"), baseline)?;
    Ok(written)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::system::System;
    use crate::workload::Workload;

    fn outcome() -> Outcome {
        let mut peer = System::endpoint("pipe", Vec::new());
        peer.family = Family::Peer;
        let mut peer2 = System::endpoint("unix-socket", Vec::new());
        peer2.family = Family::Peer;
        let systems = vec![System::endpoint("nemesis-shm", Vec::new()), peer, peer2];
        let series = Series {
            workload: Workload::Latency,
            sizes: vec![0, 8],
            members: vec![0, 1, 2],
            // [member][size][round]
            values: vec![
                vec![vec![1.0, 2.0], vec![1.0, f64::NAN]],
                vec![vec![4.0, 4.0], vec![5.0, 5.0]],
                vec![vec![2.0, 8.0], vec![f64::NAN, f64::NAN]],
            ],
            baseline: vec![vec![0.5, 0.5], vec![0.5, 1.0]],
        };
        Outcome {
            systems,
            skipped: Vec::new(),
            series: vec![series],
            failures: Vec::new(),
            rounds: 2,
            cpus: (0, 1),
            scale: 1.0,
        }
    }

    #[test]
    fn ratios_to_baseline_and_best_peer() {
        let o = outcome();
        let r = rows(&o, &o.series[0]);
        assert_eq!(r.len(), 6);
        // 0 bytes: pipe's median 4, unix-socket's 5: the best (lowest) is pipe.
        assert_eq!(r[0].best_peer.as_deref(), Some("pipe"));
        assert_eq!(r[0].to_peer.map(|s| (s.min, s.max)), Some((0.25, 0.5)));
        assert_eq!(r[0].to_baseline.map(|s| s.median), Some(3.0));
        // A peer's best peer is the other peer.
        assert_eq!(r[1].best_peer.as_deref(), Some("unix-socket"));
        // 8 bytes: one round for nemesis, unix-socket never measured.
        assert_eq!(r[3].rounds, 1);
        assert_eq!(r[3].best_peer.as_deref(), Some("pipe"));
        assert_eq!(r[4].best_peer, None);
        assert_eq!(r[5].figure, None);
    }

    #[test]
    fn csv_and_text() {
        let o = outcome();
        let dir = std::env::temp_dir().join(format!("nemesis-bench-report-{}", std::process::id()));
        let files = write_csv(&o, &dir, "t").unwrap();
        let lat = std::fs::read_to_string(dir.join("t-latency.csv")).unwrap();
        let mut lines = lat.lines();
        assert_eq!(lines.next(), Some(SERIES_COLUMNS));
        assert_eq!(lines.count(), 6);
        assert_eq!(files.len(), 3);
        std::fs::remove_dir_all(&dir).unwrap();
        let t = text(&o, "test");
        assert!(t.contains("one-way latency, us"), "{t}");
        assert_eq!(field("a,b"), "\"a,b\"");
        assert_eq!(field("plain"), "plain");
        assert_eq!(field("a\"b,"), "\"a\"\"b,\"");
        assert_eq!(num(0.2104), "0.210");
        assert_eq!(num(12345.6), "12346");
        assert_eq!(num(0.00012), "1.2e-4");
    }
}
