//! `nemesis-bench rma`: one-sided latency and bandwidth of nemesis's C ABI, Open MPI and MPICH,
//! paired per round. `mpi/bench/osu_rma.c` (OSU's one-sided structure: rank 0 the origin, rank 1
//! the target, one operation or a window of 64 per synchronisation; standard MPI only) is built
//! with each implementation's compiler and run by its own launcher on 2 ranks pinned one per CPU.
//!
//! In each round every group of runs — one operation in one mode (latency or bandwidth) over one
//! transport — runs its systems back to back, the order rotating each round; a run covers every
//! window flavour, synchronisation and size of the plan, so a failing combination (Open MPI
//! 4.1.4's `MPI_Compare_and_swap` under its default `osc/rdma` crashes the target) costs only its
//! own operation's figures. Over TCP, nemesis's ranks sit on two node identities (`--nodes 2`)
//! and Open MPI's use `btl tcp,self` with `osc pt2pt` ([`Mpi::tcp_command`]).
//!
//! Reported per row (transport × mode × operation × flavour × synchronisation × size): each
//! system's median [min..max] over the rounds, the ratios of the targets as medians of
//! per-round ratios (nemesis to Open MPI and to MPICH; Open MPI to MPICH), and for bandwidth the
//! fraction of one core's memcpy of the same size, measured in the same round on the first CPU
//! ([`crate::baseline::memcpy_mbps`], `memcpy_bw.c`'s method).

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Duration;

use crate::error::{Error, Result};
use crate::progress::{progress, say};
use crate::system::{Context, Family, IdleWait, Mpi, OSU_RMA, Skipped};

pub mod report;

/// The operations of `osu_rma.c`.
pub const OPS: [&str; 5] = ["put", "get", "acc", "fop", "cas"];
/// Its window flavours (`create` on `malloc`'s memory, reached by CMA; `create-allocmem` on
/// `MPI_Alloc_mem`'s, as OSU's benchmarks and many codes make a `MPI_Win_create` window).
pub const FLAVORS: [&str; 5] = ["allocate", "shared", "create", "create-allocmem", "dynamic"];
/// Its synchronisations.
pub const SYNCS: [&str; 4] = ["flush", "lock", "fence", "pscw"];

/// Latency iterations per size with `--quick` (`osu_rma.c`'s default is 20,000 up to 8 KiB).
const QUICK_LAT_ITERS: usize = 2000;
/// Bandwidth windows per size with `--quick` (two per batch: `osu_rma.c`'s least).
const QUICK_BW_ITERS: usize = 40;

/// `rma`'s command line.
#[derive(Clone, Debug, clap::Args)]
pub struct Opts {
    /// The MPI systems, comma-separated [default: nemesis-c-abi, openmpi, mpich].
    #[arg(long, value_delimiter = ',')]
    pub systems: Vec<String>,
    /// Measured rounds [default: 5, 3 with --quick].
    #[arg(long)]
    pub rounds: Option<usize>,
    /// Latency operations, of put, get, acc, fop, cas.
    #[arg(long, value_delimiter = ',', default_value = "put,get,acc,fop,cas")]
    pub ops: Vec<String>,
    /// Window flavours, of allocate, shared, create, create-allocmem, dynamic (over TCP without
    /// shared).
    #[arg(long, value_delimiter = ',', default_value = "allocate,shared,create,create-allocmem")]
    pub flavors: Vec<String>,
    /// Synchronisations, of flush, lock, fence, pscw.
    #[arg(long, value_delimiter = ',', default_value = "flush")]
    pub syncs: Vec<String>,
    /// Latency sizes in bytes (fop and cas run at 8 only).
    #[arg(long, value_delimiter = ',', value_parser = crate::sizes::parse_size, default_value = "8")]
    pub lat_sizes: Vec<usize>,
    /// Bandwidth operations (windows of 64, then one synchronisation); empty for none.
    #[arg(long, value_delimiter = ',', default_value = "put,get")]
    pub bw_ops: Vec<String>,
    /// Bandwidth sizes in bytes.
    #[arg(long, value_delimiter = ',', value_parser = crate::sizes::parse_size, default_value = "64K,1M")]
    pub bw_sizes: Vec<usize>,
    /// Latency operations over TCP (nemesis on two node identities, Open MPI over btl/tcp with
    /// osc/pt2pt); empty for none.
    #[arg(long, value_delimiter = ',', default_value = "put")]
    pub tcp_ops: Vec<String>,
    /// Three rounds, a tenth of the latency iterations, the fewest bandwidth windows.
    #[arg(long)]
    pub quick: bool,
    /// Write rma.csv and rma-systems.csv into this folder (created if needed).
    #[arg(long)]
    pub out: Option<PathBuf>,
    /// Longest time one run may take, in seconds.
    #[arg(long, default_value_t = 300)]
    pub timeout: u64,
}

/// Where the two ranks talk.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Transport {
    /// One node: shared memory.
    Node,
    /// Two node identities over loopback TCP.
    Tcp,
}

impl Transport {
    pub fn name(self) -> &'static str {
        match self {
            Transport::Node => "node",
            Transport::Tcp => "tcp",
        }
    }
}

/// Latency (µs per operation and synchronisation, lower is better) or bandwidth (MB/s, higher).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Mode {
    Lat,
    Bw,
}

impl Mode {
    /// `osu_rma.c`'s name of the mode, first field after `rma` in its lines.
    pub fn name(self) -> &'static str {
        match self {
            Mode::Lat => "lat",
            Mode::Bw => "bw",
        }
    }

    pub fn unit(self) -> &'static str {
        match self {
            Mode::Lat => "us",
            Mode::Bw => "MB/s",
        }
    }
}

/// One figure of the report: a combination `osu_rma.c` prints a line for.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct Row {
    pub transport: Transport,
    pub mode: Mode,
    pub op: &'static str,
    pub flavor: &'static str,
    pub sync: &'static str,
    pub bytes: usize,
}

/// One run per round: an operation in one mode over one transport, with every flavour,
/// synchronisation and size of the plan.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Group {
    pub transport: Transport,
    pub mode: Mode,
    pub op: &'static str,
    /// `osu_rma.c`'s arguments.
    pub args: Vec<String>,
}

/// What to run.
#[derive(Clone, Debug)]
pub struct Plan {
    pub groups: Vec<Group>,
    pub rows: Vec<Row>,
    pub rounds: usize,
    pub timeout: Duration,
    /// Bytes of each timed memcpy trial (the bandwidth baseline).
    pub memcpy_bytes: f64,
}

/// `name` if it is one of `known`, else a usage error naming the option.
fn known(option: &str, name: &str, known: &[&'static str]) -> Result<&'static str> {
    known
        .iter()
        .copied()
        .find(|k| *k == name)
        .ok_or_else(|| Error::Usage(format!("--{option}: `{name}` is not one of {}", known.join(", "))))
}

/// The names of a list option, each once, in the order given.
fn names(option: &str, given: &[String], of: &[&'static str]) -> Result<Vec<&'static str>> {
    let mut out = Vec::new();
    for n in given.iter().map(|s| s.trim()).filter(|s| !s.is_empty()) {
        let k = known(option, n, of)?;
        if !out.contains(&k) {
            out.push(k);
        }
    }
    Ok(out)
}

/// The sizes `osu_rma.c` measures `op` at among `sizes`: fop and cas at 8 bytes only, acc at
/// whole 8-byte elements.
pub fn op_sizes(op: &str, sizes: &[usize]) -> Vec<usize> {
    let mut out: Vec<usize> = match op {
        "fop" | "cas" => vec![8],
        "acc" => sizes.iter().map(|s| s / 8 * 8).collect(),
        _ => sizes.to_vec(),
    };
    out.dedup();
    out
}

impl Plan {
    /// The plan of these options; a bad one is a usage error.
    pub fn new(o: &Opts) -> Result<Plan> {
        let ops = names("ops", &o.ops, &OPS)?;
        let flavors = names("flavors", &o.flavors, &FLAVORS)?;
        let syncs = names("syncs", &o.syncs, &SYNCS)?;
        let bw_ops = names("bw-ops", &o.bw_ops, &OPS[..2])?;
        let tcp_ops = names("tcp-ops", &o.tcp_ops, &OPS)?;
        if flavors.is_empty() || syncs.is_empty() {
            return Err(Error::Usage("--flavors and --syncs name at least one each".into()));
        }
        if ops.is_empty() && bw_ops.is_empty() && tcp_ops.is_empty() {
            return Err(Error::Usage("nothing to run: --ops, --bw-ops and --tcp-ops are all empty".into()));
        }
        let tcp_flavors: Vec<&'static str> = flavors.iter().copied().filter(|f| *f != "shared").collect();
        if !tcp_ops.is_empty() && tcp_flavors.is_empty() {
            return Err(Error::Usage("--tcp-ops: a shared window spans one node; name another flavour".into()));
        }
        for (opt, sizes) in [("lat-sizes", &o.lat_sizes), ("bw-sizes", &o.bw_sizes)] {
            if sizes.is_empty() || sizes.len() > 16 || sizes.iter().any(|&s| s > 1 << 30) {
                return Err(Error::Usage(format!("--{opt}: 1 to 16 sizes of at most 1G")));
            }
        }
        let rounds = o.rounds.unwrap_or(if o.quick { 3 } else { 5 });
        if rounds == 0 || o.timeout == 0 {
            return Err(Error::Usage("--rounds and --timeout must be at least 1".into()));
        }
        let iters = |mode: Mode| match (o.quick, mode) {
            (false, _) => None,
            (true, Mode::Lat) => Some(QUICK_LAT_ITERS),
            (true, Mode::Bw) => Some(QUICK_BW_ITERS),
        };
        let mut plan = Plan {
            groups: Vec::new(),
            rows: Vec::new(),
            rounds,
            timeout: Duration::from_secs(o.timeout),
            memcpy_bytes: if o.quick { 2e8 } else { 2e9 },
        };
        let mut add =
            |transport: Transport, mode: Mode, op_list: &[&'static str], flavors: &[&'static str], sizes: &[usize]| {
                for &op in op_list {
                    let sizes = op_sizes(op, sizes);
                    let mut args = vec![
                        mode.name().to_owned(),
                        op.to_owned(),
                        flavors.join(","),
                        syncs.join(","),
                        sizes.iter().map(usize::to_string).collect::<Vec<_>>().join(","),
                    ];
                    args.extend(iters(mode).map(|i| i.to_string()));
                    plan.groups.push(Group { transport, mode, op, args });
                    for &flavor in flavors {
                        for &sync in &syncs {
                            for &bytes in &sizes {
                                plan.rows.push(Row { transport, mode, op, flavor, sync, bytes });
                            }
                        }
                    }
                }
            };
        add(Transport::Node, Mode::Lat, &ops, &flavors, &o.lat_sizes);
        add(Transport::Node, Mode::Bw, &bw_ops, &flavors, &o.bw_sizes);
        add(Transport::Tcp, Mode::Lat, &tcp_ops, &tcp_flavors, &o.lat_sizes);
        Ok(plan)
    }

    /// The bandwidth sizes (memcpy is measured at each, every round).
    pub fn bw_sizes(&self) -> Vec<usize> {
        let mut v: Vec<usize> = self.rows.iter().filter(|r| r.mode == Mode::Bw).map(|r| r.bytes).collect();
        v.sort_unstable();
        v.dedup();
        v
    }
}

/// A line of `osu_rma.c`.
#[derive(Clone, Debug, PartialEq)]
pub enum Line {
    /// `rma lat|bw OP FLAVOR SYNC BYTES VALUE`.
    Figure { mode: Mode, op: &'static str, flavor: &'static str, sync: &'static str, bytes: usize, value: f64 },
    /// `rma skip OP FLAVOR SYNC REASON...`: the MPI refused the combination.
    Skip { op: &'static str, flavor: &'static str, sync: &'static str, reason: String },
}

/// The `rma` lines of a run's output; other lines (a launcher's notices) are ignored. An `rma`
/// line that is not well formed is an error naming it.
pub fn parse(text: &str) -> Result<Vec<Line>> {
    let mut out = Vec::new();
    for line in text.lines() {
        let w: Vec<&str> = line.split_whitespace().collect();
        if w.first() != Some(&"rma") {
            continue;
        }
        let bad = |why: &str| Error::Run(format!("osu_rma printed a bad line `{}`: {why}", line.trim()));
        let name = |i: usize, of: &[&'static str]| {
            w.get(i).and_then(|n| of.iter().copied().find(|k| k == n)).ok_or_else(|| bad("unknown name"))
        };
        if w.get(1) == Some(&"skip") {
            if w.len() < 6 {
                return Err(bad("expected `rma skip OP FLAVOR SYNC REASON`"));
            }
            let (op, flavor, sync) = (name(2, &OPS)?, name(3, &FLAVORS)?, name(4, &SYNCS)?);
            out.push(Line::Skip { op, flavor, sync, reason: w[5..].join(" ") });
            continue;
        }
        let [_, mode, _, _, _, bytes, value] = w[..] else {
            return Err(bad("expected `rma lat|bw OP FLAVOR SYNC BYTES VALUE`"));
        };
        let mode = match mode {
            "lat" => Mode::Lat,
            "bw" => Mode::Bw,
            _ => return Err(bad("the mode is lat, bw or skip")),
        };
        let (op, flavor, sync) = (name(2, &OPS)?, name(3, &FLAVORS)?, name(4, &SYNCS)?);
        let bytes: usize = bytes.parse().map_err(|_| bad("the size is not a byte count"))?;
        let value: f64 = value.parse().map_err(|_| bad("the figure is not a number"))?;
        if !value.is_finite() || value <= 0.0 {
            return Err(bad("the figure is not a finite positive number"));
        }
        out.push(Line::Figure { mode, op, flavor, sync, bytes, value });
    }
    Ok(out)
}

/// One measured system over one transport.
#[derive(Clone, Debug)]
pub struct Member {
    /// `openmpi`, or `openmpi-tcp` over TCP.
    pub name: String,
    pub family: Family,
    pub transport: Transport,
    /// What runs, and how.
    pub detail: String,
}

/// Everything an `rma` run measured.
#[derive(Clone, Debug)]
pub struct Outcome {
    pub members: Vec<Member>,
    pub skipped: Vec<Skipped>,
    pub rows: Vec<Row>,
    /// `values[m][j][r]`: member `m`, row `j`, round `r` (NaN where missing).
    pub values: Vec<Vec<Vec<f64>>>,
    /// One core's memcpy in MB/s by size, per round.
    pub memcpy: BTreeMap<usize, Vec<f64>>,
    /// Combinations an MPI refused: (member, "op flavor sync", its reason), each once.
    pub refused: Vec<(usize, String, String)>,
    pub failures: Vec<String>,
    pub rounds: usize,
    pub cpus: (usize, usize),
}

/// A run is given up after this many failures.
const GIVE_UP: usize = 2;

/// The members of `found`: each over one node, and nemesis and Open MPI also over TCP when the
/// plan has TCP rows (MPICH's TCP member is skipped with the reason).
fn members(ctx: &Context, found: Vec<Mpi>, plan: &Plan, skipped: &mut Vec<Skipped>) -> Vec<(Member, Mpi)> {
    let tcp = plan.groups.iter().any(|g| g.transport == Transport::Tcp);
    let mut out: Vec<(Member, Mpi)> = found
        .iter()
        .map(|m| {
            let detail = match m.command(ctx, 2, false, IdleWait::Yield, &[]) {
                Ok((_, how)) => format!("{}; wait {how}", m.detail),
                Err(why) => format!("{}; {why}", m.detail),
            };
            (Member { name: m.name.clone(), family: m.family, transport: Transport::Node, detail }, m.clone())
        })
        .collect();
    if tcp {
        for m in found {
            let name = format!("{}-tcp", m.name);
            match m.tcp_command(ctx, &[]) {
                Ok((_, how)) => {
                    let detail = format!("{}; {how}", m.detail);
                    out.push((Member { name, family: m.family, transport: Transport::Tcp, detail }, m))
                }
                Err(reason) => skipped.push(Skipped { name, reason }),
            }
        }
    }
    out
}

/// Runs `found` on `plan`.
pub fn run(ctx: &Context, found: Vec<Mpi>, mut skipped: Vec<Skipped>, plan: &Plan) -> Result<Outcome> {
    let (members, mpis): (Vec<Member>, Vec<Mpi>) = members(ctx, found, plan, &mut skipped).into_iter().unzip();
    let mut values = vec![vec![vec![f64::NAN; plan.rounds]; plan.rows.len()]; members.len()];
    let index: BTreeMap<Row, usize> = plan.rows.iter().enumerate().map(|(j, r)| (*r, j)).collect();
    let bw_sizes = plan.bw_sizes();
    let mut memcpy: BTreeMap<usize, Vec<f64>> = bw_sizes.iter().map(|&s| (s, vec![f64::NAN; plan.rounds])).collect();
    let (mut refused, mut failures) = (Vec::new(), Vec::new());
    let mut failed = BTreeMap::<(usize, usize), usize>::new();
    let by_group: Vec<Vec<usize>> = plan
        .groups
        .iter()
        .map(|g| (0..members.len()).filter(|&m| members[m].transport == g.transport).collect())
        .collect();
    let total: usize = by_group.iter().map(Vec::len).sum::<usize>() * plan.rounds;
    let bar = progress(total as u64);
    for round in 0..plan.rounds {
        for &s in &bw_sizes {
            let mbps = crate::pin::on_cpu(ctx.cpus.0, || crate::baseline::memcpy_mbps(s, plan.memcpy_bytes, 5))
                .map_err(|e| Error::io("pin", e))?;
            if let Some(v) = memcpy.get_mut(&s) {
                v[round] = mbps;
            }
        }
        for (g, group) in plan.groups.iter().enumerate() {
            let ms = &by_group[g];
            // Back to back, the first one rotating each round.
            for k in 0..ms.len() {
                let m = ms[(k + round) % ms.len()];
                let mem = &members[m];
                bar.set_message(format!(
                    "round {}/{}: {} {} {}",
                    round + 1,
                    plan.rounds,
                    mem.name,
                    group.mode.name(),
                    group.op
                ));
                if failed.get(&(m, g)).copied().unwrap_or(0) >= GIVE_UP {
                    bar.inc(1);
                    continue;
                }
                let cmd = match mem.transport {
                    Transport::Node => mpis[m].command(ctx, 2, false, IdleWait::Yield, &group.args),
                    Transport::Tcp => mpis[m].tcp_command(ctx, &group.args),
                };
                let problem = match cmd {
                    Err(why) => Some(why),
                    Ok((cmd, _)) => match crate::proc::run_all(vec![cmd], plan.timeout) {
                        Err(e) => Some(e.to_string()),
                        Ok(done) => {
                            let d = &done[0];
                            match parse(&d.stdout) {
                                Err(e) => Some(e.to_string()),
                                Ok(lines) => {
                                    let got = record(&lines, group, m, round, &index, &mut values, &mut refused);
                                    if !d.status.success() {
                                        Some(format!("failed ({}):\n    {}", d.status, d.stderr_tail()))
                                    } else if got == 0 && lines.is_empty() {
                                        Some(format!("no `rma` lines in its output:\n    {}", d.stderr_tail()))
                                    } else {
                                        None
                                    }
                                }
                            }
                        }
                    },
                };
                if let Some(p) = problem {
                    *failed.entry((m, g)).or_default() += 1;
                    let line = format!("round {}: {} {} {}: {p}", round + 1, mem.name, group.mode.name(), group.op);
                    say(&bar, format!("nemesis-bench: {line}"));
                    failures.push(line);
                }
                bar.inc(1);
            }
        }
    }
    bar.finish_and_clear();
    Ok(Outcome {
        members,
        skipped,
        rows: plan.rows.clone(),
        values,
        memcpy,
        refused,
        failures,
        rounds: plan.rounds,
        cpus: ctx.cpus,
    })
}

/// Files `lines` of member `m`'s run of `group` in round `round`; returns the figures kept.
fn record(
    lines: &[Line],
    group: &Group,
    m: usize,
    round: usize,
    index: &BTreeMap<Row, usize>,
    values: &mut [Vec<Vec<f64>>],
    refused: &mut Vec<(usize, String, String)>,
) -> usize {
    let mut kept = 0;
    for l in lines {
        match l {
            Line::Figure { mode, op, flavor, sync, bytes, value } => {
                let row = Row { transport: group.transport, mode: *mode, op, flavor, sync, bytes: *bytes };
                if let Some(&j) = index.get(&row) {
                    values[m][j][round] = *value;
                    kept += 1;
                }
            }
            Line::Skip { op, flavor, sync, reason } => {
                let what = format!("{} {op} {flavor} {sync}", group.mode.name());
                if !refused.iter().any(|(k, w, _)| *k == m && *w == what) {
                    refused.push((m, what, reason.clone()));
                }
            }
        }
    }
    kept
}

/// `rma`.
pub fn command(o: &Opts) -> Result<()> {
    let plan = Plan::new(o)?;
    let ctx = Context::new()?;
    let (found, skipped) = crate::system::discover_mpi(&ctx, &o.systems, OSU_RMA)?;
    let outcome = run(&ctx, found, skipped, &plan)?;
    print!("{}", report::text(&outcome));
    if let Some(dir) = &o.out {
        let files = report::write_csv(&outcome, dir)?;
        println!("\nwrote {}", files.iter().map(|f| f.display().to_string()).collect::<Vec<_>>().join(", "));
    }
    Ok(())
}

#[cfg(test)]
mod tests;
