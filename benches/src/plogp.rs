//! `nemesis-bench plogp`: the pLogP parameters of the Endpoint between two ranks, by Kielmann's
//! procedure as the LaPIe thesis describes it (shared/reference/p2pmpi-lapie.md, "pLogP"):
//! - `g(0)`: bursts of n empty messages followed by one acknowledgement, n doubling until the
//!   time per message changes by less than ε; then `g(0) = RTT_n(0) / n`;
//! - `RTT1(m)`: m bytes from the measuring rank, an empty reply from the mirror (median of the
//!   samples);
//! - `L = (RTT1(0) - 2 g(0)) / 2` and `g(m) = RTT1(m) - RTT1(0) + g(0)`;
//! - `o_s(m)`: the time of the blocking send of m bytes (taken in the same exchanges as
//!   `RTT1(m)`: the reply is awaited after the send returns);
//! - `o_r(m)`: the time of receiving m bytes that have already arrived: the measuring rank sends
//!   an empty message, waits Δ = 2·RTT1(m) + 1 µs without touching the Endpoint, then times the
//!   receive.
//!
//! Sizes double from 0, with extra samples around the eager limit where the protocol changes.
//! The table is the thesis's: `bytes os os_min os_cnfint or or_min or_cnfint g` (mean, minimum,
//! half-width of the 95% confidence interval of the mean), with `L`; times in µs.

use std::fmt::Write as _;
use std::time::{Duration, Instant};

use nemesis::launch::Wait;

use crate::error::{Error, Result};
use crate::link::EndpointLink;
use crate::workload::Link;

/// `plogp`'s options.
#[derive(Clone, Debug, clap::Args)]
pub struct Opts {
    /// Largest message; sizes double from 0 up to it [default: 1M; 256K with --quick].
    #[arg(long, value_parser = crate::sizes::parse_size)]
    pub max_size: Option<usize>,
    /// Exactly these sizes instead (the points around the eager limit are still added).
    #[arg(long, value_delimiter = ',', value_parser = crate::sizes::parse_size)]
    pub sizes: Vec<usize>,
    /// Samples per size and parameter [default: 200; 30 with --quick].
    #[arg(long)]
    pub samples: Option<usize>,
    /// Stability margin of g(0): the bursts double until the gap per message changes by less.
    #[arg(long, default_value_t = 0.02)]
    pub epsilon: f64,
    /// Fewer samples and sizes: seconds.
    #[arg(long)]
    pub quick: bool,
    /// Also write the table as plogp.csv into this folder.
    #[arg(long)]
    pub out: Option<std::path::PathBuf>,
    /// Longest time the measurement may take, in seconds.
    #[arg(long, default_value_t = 600)]
    pub timeout: u64,
}

/// Control messages (burst lengths) travel on their own tag.
const CONTROL: i32 = 5;
/// The longest burst tried for g(0).
const MAX_BURST: u64 = 1 << 16;

/// Mean, minimum and half-width of the 95% confidence interval of the mean.
fn mean_min_ci(xs: &[f64]) -> (f64, f64, f64) {
    let n = xs.len() as f64;
    if xs.is_empty() {
        return (f64::NAN, f64::NAN, f64::NAN);
    }
    let mean = xs.iter().sum::<f64>() / n;
    let min = xs.iter().copied().fold(f64::INFINITY, f64::min);
    let var = if xs.len() > 1 { xs.iter().map(|x| (x - mean) * (x - mean)).sum::<f64>() / (n - 1.0) } else { 0.0 };
    (mean, min, 1.96 * var.sqrt() / n.sqrt())
}

fn median(xs: &[f64]) -> f64 {
    crate::stats::Summary::of(xs).map(|s| s.median).unwrap_or(f64::NAN)
}

fn us(t: Instant) -> f64 {
    t.elapsed().as_secs_f64() * 1e6
}

/// The sizes asked for, plus points around the eager limit (`limit - 1`, `limit`, `limit + 1`,
/// `limit + limit/4`) that are within the largest size asked for.
fn with_threshold(sizes: &[usize], limit: usize) -> Vec<usize> {
    let max = sizes.iter().copied().max().unwrap_or(0);
    let mut v = sizes.to_vec();
    v.extend([limit.saturating_sub(1), limit, limit + 1, limit + limit / 4].into_iter().filter(|&s| s <= max));
    v.sort_unstable();
    v.dedup();
    v
}

/// The rank side (`__plogp`): rank 0 measures and prints `plogp-*` lines; rank 1 mirrors.
pub fn rank(sizes: &[usize], samples: usize, epsilon: f64) -> Result<()> {
    let mut l = EndpointLink::init()?;
    let measure = l.rank() == 0;
    let limit = l.endpoint().eager_limit();
    let sizes = with_threshold(sizes, limit);
    let max = sizes.iter().copied().max().unwrap_or(0).max(1);
    let mut buf = vec![b'a'; max];
    let mut nothing = [0u8; 0];
    let warm = samples / 10 + 2;

    // g(0) from bursts.
    let (mut n, mut prev, mut g0, mut stable) = (1u64, f64::NAN, f64::NAN, false);
    loop {
        let mut reps = Vec::new();
        for _ in 0..5 {
            if measure {
                l.endpoint().send(&n.to_le_bytes(), 1, CONTROL, nemesis::WORLD)?;
                let t0 = Instant::now();
                for _ in 0..n {
                    l.send(&nothing)?;
                }
                l.recv(&mut nothing)?;
                reps.push(us(t0) / n as f64);
            } else {
                let mut c = [0u8; 8];
                l.endpoint().recv(&mut c, 0, CONTROL, nemesis::WORLD)?;
                for _ in 0..u64::from_le_bytes(c) {
                    l.recv(&mut nothing)?;
                }
                l.send(&nothing)?;
            }
        }
        // The measuring side decides whether to go on, and tells the mirror.
        let mut go = [0u8; 1];
        if measure {
            g0 = median(&reps);
            stable = (g0 - prev).abs() <= epsilon * g0;
            go[0] = u8::from(!stable && n < MAX_BURST);
            l.endpoint().send(&go, 1, CONTROL, nemesis::WORLD)?;
        } else {
            l.endpoint().recv(&mut go, 0, CONTROL, nemesis::WORLD)?;
        }
        if go[0] == 0 {
            break;
        }
        prev = g0;
        n *= 2;
    }
    if measure {
        println!("plogp-eager {limit}");
        println!("plogp-gap0 {g0:.6} {n} {}", u8::from(stable));
    }

    for &m in &sizes {
        // RTT1(m) and o_s(m).
        let (mut rtt, mut os) = (Vec::with_capacity(samples), Vec::with_capacity(samples));
        for i in 0..warm + samples {
            if measure {
                let t0 = Instant::now();
                l.send(&buf[..m])?;
                let sent = us(t0);
                l.recv(&mut nothing)?;
                if i >= warm {
                    os.push(sent);
                    rtt.push(us(t0));
                }
            } else {
                l.recv(&mut buf[..m])?;
                l.send(&nothing)?;
            }
        }
        // o_r(m): the reply has arrived before the receive is timed.
        let delta = Duration::from_secs_f64((2.0 * median(&rtt) + 1.0).max(1.0) * 1e-6);
        let mut or = Vec::with_capacity(samples);
        for i in 0..warm + samples {
            if measure {
                l.send(&nothing)?;
                let t = Instant::now();
                while t.elapsed() < delta {
                    std::hint::spin_loop();
                }
                let t0 = Instant::now();
                l.recv(&mut buf[..m])?;
                if i >= warm {
                    or.push(us(t0));
                }
            } else {
                l.recv(&mut nothing)?;
                l.send(&buf[..m])?;
            }
        }
        if measure {
            let (o, omin, oci) = mean_min_ci(&os);
            let (r, rmin, rci) = mean_min_ci(&or);
            println!("plogp-row {m} {:.6} {o:.6} {omin:.6} {oci:.6} {r:.6} {rmin:.6} {rci:.6}", median(&rtt));
        }
    }
    l.finish()
}

/// One row of the table, from a `plogp-row` line.
#[derive(Clone, Debug, PartialEq)]
struct Row {
    bytes: usize,
    rtt: f64,
    os: [f64; 3],
    or: [f64; 3],
}

/// What the measuring rank printed.
#[derive(Clone, Debug, PartialEq)]
struct Measured {
    eager: Option<usize>,
    g0: f64,
    burst: u64,
    stable: bool,
    rows: Vec<Row>,
}

fn parse(text: &str) -> Result<Measured> {
    let mut m = Measured { eager: None, g0: f64::NAN, burst: 0, stable: false, rows: Vec::new() };
    let f = |s: &str| s.parse::<f64>().unwrap_or(f64::NAN);
    for line in text.lines() {
        let w: Vec<&str> = line.split_whitespace().collect();
        match w[..] {
            ["plogp-eager", e] => m.eager = e.parse().ok(),
            ["plogp-gap0", g, n, s] => (m.g0, m.burst, m.stable) = (f(g), n.parse().unwrap_or(0), s == "1"),
            ["plogp-row", b, rtt, o1, o2, o3, r1, r2, r3] => {
                let bytes = b.parse().map_err(|_| Error::Run(format!("plogp: bad line `{line}`")))?;
                m.rows.push(Row { bytes, rtt: f(rtt), os: [f(o1), f(o2), f(o3)], or: [f(r1), f(r2), f(r3)] });
            }
            _ => {}
        }
    }
    if m.rows.is_empty() || !m.g0.is_finite() {
        return Err(Error::Run(format!("plogp: no parameters in the ranks' output:\n{text}")));
    }
    Ok(m)
}

/// The table, with `L` and `g(m)` derived.
fn table(m: &Measured, header: &str) -> (String, String) {
    let rtt0 = m.rows.iter().find(|r| r.bytes == 0).map(|r| r.rtt).unwrap_or(f64::NAN);
    let latency = (rtt0 - 2.0 * m.g0) / 2.0;
    let mut t = String::new();
    let _ = writeln!(t, "{header}");
    if let Some(e) = m.eager {
        let _ = writeln!(t, "# eager limit {e} bytes (rendezvous above): sampled densely around it");
    }
    let how = if m.stable { "stable within epsilon" } else { "NOT stable: the last burst's value" };
    let _ = writeln!(t, "# g(0) = {:.4} from bursts of {} messages ({how})", m.g0, m.burst);
    let _ = writeln!(t, "# RTT1(0) = {rtt0:.4}");
    let _ = writeln!(t, "# Latency = {latency:.4}");
    let _ = writeln!(t, "# bytes os os_min os_cnfint or or_min or_cnfint g");
    let mut csv = String::from("bytes,os,os_min,os_cnfint,or,or_min,or_cnfint,g,rtt1,latency,g0\n");
    for r in &m.rows {
        let g = r.rtt - rtt0 + m.g0;
        let [o, omin, oci] = r.os;
        let [q, qmin, qci] = r.or;
        let _ = writeln!(t, "{} {o:.4} {omin:.4} {oci:.4} {q:.4} {qmin:.4} {qci:.4} {g:.4}", r.bytes);
        let _ = writeln!(csv, "{},{o},{omin},{oci},{q},{qmin},{qci},{g},{},{latency},{}", r.bytes, r.rtt, m.g0);
    }
    (t, csv)
}

/// `plogp`.
pub fn run(o: &Opts) -> Result<()> {
    if !(o.epsilon > 0.0 && o.epsilon < 1.0) {
        return Err(Error::Usage("--epsilon must be between 0 and 1".into()));
    }
    let samples = o.samples.unwrap_or(if o.quick { 30 } else { 200 });
    if samples == 0 {
        return Err(Error::Usage("--samples must be at least 1".into()));
    }
    let sizes = if o.sizes.is_empty() {
        crate::sizes::doubling(o.max_size.unwrap_or(if o.quick { 256 << 10 } else { 1 << 20 }), true)
    } else {
        o.sizes.clone()
    };
    if sizes.iter().any(|&s| s > 1 << 30) {
        return Err(Error::Usage("messages go up to 1G".into()));
    }
    let ctx = crate::system::Context::new()?;
    let list = sizes.iter().map(usize::to_string).collect::<Vec<_>>().join(",");
    let args = ["__plogp", "--sizes", &list, "--samples", &samples.to_string(), "--epsilon", &o.epsilon.to_string()];
    let args: Vec<String> = args.iter().map(|s| s.to_string()).collect();
    let text = crate::launch::capture(&ctx, 2, Wait::Poll, &args, Duration::from_secs(o.timeout.max(1)))?;
    let m = parse(&text)?;
    let (a, b) = ctx.cpus;
    let header = format!(
        "# pLogP parameters of the nemesis Endpoint (Kielmann's procedure), 2 ranks pinned to CPUs {a} and {b}, \
         {samples} samples per size; times in microseconds"
    );
    let (t, csv) = table(&m, &header);
    print!("{t}");
    if let Some(dir) = &o.out {
        std::fs::create_dir_all(dir).map_err(|e| Error::file("create", dir, e))?;
        let path = dir.join("plogp.csv");
        std::fs::write(&path, csv).map_err(|e| Error::file("write", &path, e))?;
        println!("# wrote {}", path.display());
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn statistics_and_threshold_points() {
        let (mean, min, ci) = mean_min_ci(&[1.0, 2.0, 3.0]);
        assert_eq!((mean, min), (2.0, 1.0));
        assert!((ci - 1.96 / 3f64.sqrt()).abs() < 1e-12);
        assert!(mean_min_ci(&[]).0.is_nan());
        assert_eq!(with_threshold(&[0, 1 << 20], 65536), vec![0, 65535, 65536, 65537, 81920, 1 << 20]);
        assert_eq!(with_threshold(&[0, 8], 65536), vec![0, 8]);
    }

    #[test]
    fn parameters_from_the_ranks_lines() {
        let text = "plogp-eager 65536\nplogp-gap0 0.1 64 1\n\
                    plogp-row 0 1.0 0.2 0.1 0.01 0.3 0.2 0.02\nplogp-row 8 1.5 0.2 0.1 0.01 0.3 0.2 0.02\n";
        let m = parse(text).unwrap();
        assert_eq!((m.eager, m.burst, m.stable, m.rows.len()), (Some(65536), 64, true, 2));
        let (t, csv) = table(&m, "# test");
        // L = (1.0 - 2 * 0.1) / 2; g(8) = 1.5 - 1.0 + 0.1.
        assert!(t.contains("# Latency = 0.4000"), "{t}");
        assert!(t.lines().any(|l| l.starts_with("8 ") && l.ends_with(" 0.6000")), "{t}");
        assert_eq!(csv.lines().count(), 3);
        assert!(parse("nothing\n").is_err());
    }
}
