//! What `rma` prints and writes: a table per transport and mode (a row per operation × flavour
//! × synchronisation × size, a column per system, then the ratios), the targets met or
//! missed, and `rma.csv` / `rma-systems.csv`.
//!
//! Every ratio is the median [min..max] of per-round ratios of two systems measured back to back
//! in the same round; a bandwidth's fraction of memcpy pairs it with the memcpy of its round.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use super::{Member, Mode, Outcome, Row, Transport};
use crate::error::{Error, Result};
use crate::report::{field, spread, table};
use crate::sizes::human;
use crate::stats::{Summary, finite, paired_ratio};
use crate::system::Family;

/// The implementations ratios are taken to, in this order (over TCP with `-tcp` appended).
const REFERENCES: [&str; 2] = ["openmpi", "mpich"];

/// A bound of issue 34's targets: the ratio must be at most (or, for bandwidth, at least) this.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Target {
    pub bound: f64,
    pub at_most: bool,
}

impl Target {
    fn met(self, ratio: f64) -> bool {
        if self.at_most { ratio <= self.bound } else { ratio >= self.bound }
    }

    fn describe(self) -> String {
        format!("{}{}", if self.at_most { "<=" } else { ">=" }, self.bound)
    }
}

/// The target for nemesis member `a` against reference `b` at `row`, if the issue names one:
/// 8-byte put, get and fetch-and-op with flush on a node at most 1.0 x Open MPI's and 0.2 x
/// MPICH's; put and get bandwidth at least 1.0 x Open MPI's; 8-byte put over TCP at most 0.9 x
/// Open MPI's.
pub fn target(row: &Row, a: &Member, b: &Member) -> Option<Target> {
    if a.family != Family::Nemesis {
        return None;
    }
    let reference = b.name.strip_suffix("-tcp").unwrap_or(&b.name);
    let small = row.bytes == 8 && row.sync == "flush";
    let t = |bound, at_most| Some(Target { bound, at_most });
    match (row.transport, row.mode, reference) {
        (Transport::Node, Mode::Lat, "openmpi") if small && ["put", "get", "fop"].contains(&row.op) => t(1.0, true),
        (Transport::Node, Mode::Lat, "mpich") if small && ["put", "get", "fop"].contains(&row.op) => t(0.2, true),
        (Transport::Node, Mode::Bw, "openmpi") if row.sync == "flush" => t(1.0, false),
        (Transport::Tcp, Mode::Lat, "openmpi") if small && row.op == "put" => t(0.9, true),
        _ => None,
    }
}

impl Outcome {
    /// The members over `t`.
    pub fn over(&self, t: Transport) -> Vec<usize> {
        (0..self.members.len()).filter(|&m| self.members[m].transport == t).collect()
    }

    /// The member that is reference `name` over `t`.
    pub fn reference(&self, t: Transport, name: &str) -> Option<usize> {
        let want = match t {
            Transport::Node => name.to_owned(),
            Transport::Tcp => format!("{name}-tcp"),
        };
        self.members.iter().position(|m| m.transport == t && m.name == want)
    }

    /// The ratio pairs over `t`: every member against every reference listed after it.
    pub fn pairs(&self, t: Transport) -> Vec<(usize, usize)> {
        let ms = self.over(t);
        let mut out = Vec::new();
        for r in REFERENCES.iter().filter_map(|n| self.reference(t, n)) {
            for &a in ms.iter().filter(|&&a| a != r) {
                // Each pair once: a reference against a later one, not the other way.
                let later = REFERENCES.iter().position(|n| self.members[a].name.starts_with(n));
                let rn = REFERENCES.iter().position(|n| self.members[r].name.starts_with(n));
                if later.is_none() || later < rn {
                    out.push((a, r));
                }
            }
        }
        out.sort_unstable();
        out
    }

    /// Member `m`'s median [min..max] at row `j`.
    pub fn figure(&self, m: usize, j: usize) -> Option<Summary> {
        finite(&self.values[m][j])
    }

    /// The per-round ratio of member `a` to member `b` at row `j`.
    pub fn ratio(&self, a: usize, b: usize, j: usize) -> Option<Summary> {
        paired_ratio(&self.values[a][j], &self.values[b][j])
    }

    /// Member `m`'s bandwidth at row `j` as a fraction of one core's memcpy of that size.
    pub fn of_memcpy(&self, m: usize, j: usize) -> Option<Summary> {
        let row = &self.rows[j];
        if row.mode != Mode::Bw {
            return None;
        }
        paired_ratio(&self.values[m][j], self.memcpy.get(&row.bytes)?)
    }
}

fn ratio_cell(s: Option<Summary>, t: Option<Target>) -> String {
    match (s, t) {
        (Some(s), Some(t)) => format!("{} {}", spread(&Some(s)), if t.met(s.median) { "ok" } else { "MISSED" }),
        (s, _) => spread(&s),
    }
}

/// The terminal report.
pub fn text(o: &Outcome) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "nemesis-bench rma: one-sided operations of osu_rma.c, rank 0 on CPU {} the origin, rank 1 on CPU {} the \
         target; {} rounds, the systems of each operation back to back (order rotating); medians [min..max]; \
         ratios are medians of per-round ratios",
        o.cpus.0, o.cpus.1, o.rounds
    );
    let width = o.members.iter().map(|s| s.name.len()).chain(o.skipped.iter().map(|s| s.name.len())).max();
    let width = width.unwrap_or(0);
    for m in &o.members {
        let _ = writeln!(out, "  {:<width$}  {}", m.name, m.detail);
    }
    for s in &o.skipped {
        let _ = writeln!(out, "  {:<width$}  skipped: {}", s.name, s.reason);
    }
    for t in [Transport::Node, Transport::Tcp] {
        for mode in [Mode::Lat, Mode::Bw] {
            let rows: Vec<usize> =
                (0..o.rows.len()).filter(|&j| o.rows[j].transport == t && o.rows[j].mode == mode).collect();
            let ms = o.over(t);
            if rows.is_empty() || ms.is_empty() {
                continue;
            }
            let (what, better) = match mode {
                Mode::Lat => ("latency, us per operation + synchronisation", "lower"),
                Mode::Bw => ("bandwidth, MB/s (windows of 64 operations, one synchronisation)", "higher"),
            };
            let place = match t {
                Transport::Node => "one node, shared memory",
                Transport::Tcp => "two node identities, TCP over loopback",
            };
            let _ = writeln!(out, "\none-sided {what}, {place} ({better} is better)");
            out += &section(o, &rows, &ms);
        }
    }
    out += &targets(o);
    if !o.refused.is_empty() {
        let _ = writeln!(out, "\nrefused by the MPI (no figures):");
        // One line per member and reason, naming every combination refused for it.
        let mut seen: Vec<(usize, &str)> = Vec::new();
        for (m, _, why) in &o.refused {
            if seen.contains(&(*m, why.as_str())) {
                continue;
            }
            seen.push((*m, why));
            let whats: Vec<&str> =
                o.refused.iter().filter(|(k, _, w)| k == m && w == why).map(|(_, what, _)| what.as_str()).collect();
            let _ = writeln!(out, "  {}: {why}: {}", o.members[*m].name, whats.join(", "));
        }
    }
    if !o.failures.is_empty() {
        let _ = writeln!(out, "\nfailed runs (their figures are missing):");
        for f in &o.failures {
            let _ = writeln!(out, "  {f}");
        }
    }
    out
}

/// The table of `rows` for members `ms`: figures, ratios, and for bandwidth the memcpy fractions.
fn section(o: &Outcome, rows: &[usize], ms: &[usize]) -> String {
    let t = o.rows[rows[0]].transport;
    let bw = o.rows[rows[0]].mode == Mode::Bw;
    let pairs = o.pairs(t);
    let mut head: Vec<String> = ["op", "window", "sync", "bytes"].map(String::from).to_vec();
    head.extend(ms.iter().map(|&m| o.members[m].name.clone()));
    head.extend(pairs.iter().map(|&(a, b)| format!("{}/{}", o.members[a].name, o.members[b].name)));
    if bw {
        head.push("memcpy".into());
        head.extend(ms.iter().map(|&m| format!("{}/memcpy", o.members[m].name)));
    }
    let body: Vec<Vec<String>> = rows
        .iter()
        .map(|&j| {
            let r = &o.rows[j];
            let mut row = vec![r.op.to_owned(), r.flavor.to_owned(), r.sync.to_owned(), human(r.bytes)];
            row.extend(ms.iter().map(|&m| spread(&o.figure(m, j))));
            for &(a, b) in &pairs {
                row.push(ratio_cell(o.ratio(a, b, j), target(r, &o.members[a], &o.members[b])));
            }
            if bw {
                row.push(spread(&o.memcpy.get(&r.bytes).and_then(|v| finite(v))));
                row.extend(ms.iter().map(|&m| spread(&o.of_memcpy(m, j))));
            }
            row
        })
        .collect();
    table(&head, &body)
}

/// The targets, each met or missed (nothing without a nemesis figure).
fn targets(o: &Outcome) -> String {
    let mut lines = Vec::new();
    for (j, r) in o.rows.iter().enumerate() {
        for (a, b) in o.pairs(r.transport) {
            let (ma, mb) = (&o.members[a], &o.members[b]);
            let (Some(t), Some(s)) = (target(r, ma, mb), o.ratio(a, b, j)) else { continue };
            lines.push(format!(
                "  {} {} {} {} {} B: {}/{} {} (target {}): {}",
                r.transport.name(),
                r.mode.name(),
                r.op,
                r.flavor,
                r.bytes,
                ma.name,
                mb.name,
                spread(&Some(s)),
                t.describe(),
                if t.met(s.median) { "met" } else { "MISSED" }
            ));
        }
    }
    if lines.is_empty() { String::new() } else { format!("\nissue 34's targets:\n{}\n", lines.join("\n")) }
}

/// The columns of `rma.csv`.
pub const COLUMNS: &str = "system,family,transport,mode,op,flavor,sync,bytes,unit,rounds,median,min,max,\
ratio_to_openmpi,ratio_to_openmpi_min,ratio_to_openmpi_max,ratio_to_mpich,ratio_to_mpich_min,ratio_to_mpich_max,\
memcpy_mbps,fraction_of_memcpy,fraction_of_memcpy_min,fraction_of_memcpy_max";

/// Writes `rma.csv` (a row per member and row) and `rma-systems.csv` into `dir`; returns the
/// files written.
pub fn write_csv(o: &Outcome, dir: &Path) -> Result<Vec<PathBuf>> {
    std::fs::create_dir_all(dir).map_err(|e| Error::file("create", dir, e))?;
    let opt = |v: Option<f64>| v.map(|x| x.to_string()).unwrap_or_default();
    let three = |s: Option<Summary>| {
        format!("{},{},{}", opt(s.map(|s| s.median)), opt(s.map(|s| s.min)), opt(s.map(|s| s.max)))
    };
    let mut t = format!("{COLUMNS}\n");
    for (m, mem) in o.members.iter().enumerate() {
        for (j, r) in o.rows.iter().enumerate().filter(|(_, r)| r.transport == mem.transport) {
            let to = |name| o.reference(r.transport, name).filter(|&b| b != m).and_then(|b| o.ratio(m, b, j));
            let memcpy = o.memcpy.get(&r.bytes).filter(|_| r.mode == Mode::Bw).and_then(|v| finite(v));
            let n = o.values[m][j].iter().filter(|v| v.is_finite()).count();
            let _ = writeln!(
                t,
                "{},{},{},{},{},{},{},{},{},{n},{},{},{},{},{}",
                field(&mem.name),
                mem.family.name(),
                r.transport.name(),
                r.mode.name(),
                r.op,
                r.flavor,
                r.sync,
                r.bytes,
                field(r.mode.unit()),
                three(o.figure(m, j)),
                three(to("openmpi")),
                three(to("mpich")),
                opt(memcpy.map(|s| s.median)),
                three(o.of_memcpy(m, j)),
            );
        }
    }
    let measured = o.members.iter().map(|m| (m.name.as_str(), m.family, m.detail.as_str()));
    let systems = crate::report::systems_csv(measured, &o.skipped);
    let mut written = Vec::new();
    for (name, text) in [("rma.csv", t), ("rma-systems.csv", systems)] {
        let p = dir.join(name);
        std::fs::write(&p, text).map_err(|e| Error::file("write", &p, e))?;
        written.push(p);
    }
    Ok(written)
}
