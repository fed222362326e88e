//! `nemesis-bench bw`: OSU-style streaming bandwidth through the Endpoint, the loop of
//! `shared/bench/mpi_pingpong.c bw` (a window of 64 non-blocking sends of one buffer into 64
//! receives into one buffer, then a 1-byte acknowledgement; about 1 GiB per size), for one or
//! more configurations (`--variant name:VAR=value,...`, e.g. `NEMESIS_LMT=shm`), interleaved
//! round by round with:
//! - one core's memcpy bandwidth for the same sizes (the method of `memcpy_bw.c`), the ceiling
//!   for a copy;
//! - optionally a peer running `mpi_pingpong bw` (`--openmpi BIN`: built with `mpicc.openmpi`,
//!   run with `mpiexec.openmpi --bind-to core`; `--c-abi BIN`: built with this project's
//!   `mpicc`, run with `nemesis-run --bind core`).
//!
//! Every figure is a median over rounds with its min and max; ratios are medians of per-round
//! ratios (the machine is shared and noisy).

use std::path::PathBuf;
use std::process::Command;
use std::time::Instant;

use nemesis::launch::{Bind, Job, Wait};
use nemesis::{Endpoint, Request, WORLD};

use crate::stats::{Summary, ratio_of_rounds};

/// What to measure.
#[derive(Clone, Debug, clap::Args)]
pub struct Opts {
    /// Measured rounds.
    #[arg(long, default_value_t = 5)]
    pub rounds: usize,
    /// Message sizes in bytes.
    #[arg(long, value_delimiter = ',', default_values_t = DEFAULT_SIZES)]
    pub sizes: Vec<usize>,
    /// A configuration to measure, `name:VAR=value,VAR=value` (repeatable; default: the defaults).
    #[arg(long = "variant")]
    pub variants: Vec<String>,
    /// `mpi_pingpong` built with `mpicc.openmpi`: run next to ours with `mpiexec.openmpi`.
    #[arg(long)]
    pub openmpi: Option<PathBuf>,
    /// `mpi_pingpong` built with this project's `mpicc`: run with `nemesis-run`.
    #[arg(long)]
    pub c_abi: Option<PathBuf>,
    /// A tenth of the iterations, two rounds.
    #[arg(long)]
    pub quick: bool,
}

const DEFAULT_SIZES: [usize; 10] =
    [16 << 10, 32 << 10, 64 << 10, (64 << 10) + 1, 128 << 10, 256 << 10, 512 << 10, 1 << 20, 4 << 20, 16 << 20];

/// The messages of the window (as `mpi_pingpong.c`).
const WINDOW: usize = 64;

/// Iterations (windows) for `size`, as `mpi_pingpong.c`: about 1 GiB, 20 to 5000 windows.
fn iters(size: usize, quick: bool) -> usize {
    let n = ((1usize << 30) / (WINDOW * size)).clamp(20, 5000);
    if quick { (n / 10).max(5) } else { n }
}

/// Runs a system for all sizes: MB/s by size.
type RunFn = Box<dyn Fn(&[usize]) -> Result<Vec<f64>, String>>;

/// One measured system: its name and how to run it.
struct System {
    name: String,
    run: RunFn,
}

fn endpoint_system(name: String, env: Vec<(String, String)>, quick: bool) -> System {
    System {
        name,
        run: Box::new(move |sizes| {
            let out = std::env::temp_dir().join(format!("nemesis-bw-{}-{}", std::process::id(), rand_suffix()));
            let mut args = vec![
                "__bw-rank".to_owned(),
                "--out".into(),
                out.display().to_string(),
                "--sizes".into(),
                sizes.iter().map(|s| s.to_string()).collect::<Vec<_>>().join(","),
            ];
            if quick {
                args.push("--quick".into());
            }
            let exe = std::env::current_exe().map_err(|e| e.to_string())?;
            let mut job = Job::new(exe, args).ranks(2).bind(Bind::Core).wait(Wait::Poll);
            for (k, v) in &env {
                job = job.env(k, v);
            }
            let outcome = job.run().map_err(|e| e.to_string())?;
            if !outcome.success() {
                return Err(format!("ranks failed: {:?}", outcome.ending()));
            }
            let text = std::fs::read_to_string(&out).map_err(|e| e.to_string())?;
            let _ = std::fs::remove_file(&out);
            parse_bw(&text, sizes)
        }),
    }
}

/// A new suffix for each results file of this process.
fn rand_suffix() -> u64 {
    static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
}

/// `bw SIZE MBPS` lines, for the sizes asked (missing ones are an error).
fn parse_bw(text: &str, sizes: &[usize]) -> Result<Vec<f64>, String> {
    let mut found = std::collections::HashMap::new();
    for line in text.lines() {
        let mut w = line.split_whitespace();
        if w.next() == Some("bw")
            && let (Some(Ok(s)), Some(Ok(v))) = (w.next().map(str::parse::<usize>), w.next().map(str::parse::<f64>))
        {
            found.insert(s, v);
        }
    }
    sizes.iter().map(|s| found.get(s).copied().ok_or_else(|| format!("no figure for {s} bytes in:\n{text}"))).collect()
}

/// An `mpi_pingpong` binary under a launcher, for the power-of-two sizes only.
fn mpi_system(name: &str, launcher: Vec<String>, bin: PathBuf) -> System {
    System {
        name: name.to_owned(),
        run: Box::new(move |sizes| {
            let max = sizes.iter().copied().max().unwrap_or(1);
            let o = Command::new(&launcher[0])
                .args(&launcher[1..])
                .arg(&bin)
                .args(["bw", &max.to_string()])
                .output()
                .map_err(|e| format!("{}: {e}", launcher[0]))?;
            if !o.status.success() {
                return Err(format!("{} failed: {}", launcher[0], String::from_utf8_lossy(&o.stderr)));
            }
            let text = String::from_utf8_lossy(&o.stdout);
            // Sizes the program does not run (not powers of two) are NaN.
            Ok(sizes
                .iter()
                .map(|s| parse_bw(&text, std::slice::from_ref(s)).map(|v| v[0]).unwrap_or(f64::NAN))
                .collect())
        }),
    }
}

/// One core's memcpy bandwidth (MB/s) for `size`, as `memcpy_bw.c`: best of 5 timed runs of
/// about 2 GB each (a tenth with `quick`), on hot buffers.
fn memcpy_mbps(size: usize, quick: bool) -> f64 {
    let a = vec![1u8; size];
    let mut b = vec![2u8; size];
    let reps = (if quick { 2e8 } else { 2e9 } / size as f64) as usize + 1;
    let mut best = f64::MAX;
    for _ in 0..5 {
        let t0 = Instant::now();
        for _ in 0..reps {
            b.copy_from_slice(&a);
            std::hint::black_box(&mut b);
        }
        best = best.min(t0.elapsed().as_secs_f64());
    }
    (size * reps) as f64 / best / 1e6
}

pub fn run(opts: &Opts) {
    let rounds = if opts.quick { 2 } else { opts.rounds.max(1) };
    let mut systems = Vec::new();
    if opts.variants.is_empty() {
        systems.push(endpoint_system("nemesis".into(), Vec::new(), opts.quick));
    }
    for v in &opts.variants {
        let (name, env) = v.split_once(':').unwrap_or((v.as_str(), ""));
        let env = env
            .split(',')
            .filter(|s| !s.is_empty())
            .filter_map(|kv| kv.split_once('=').map(|(k, v)| (k.to_owned(), v.to_owned())))
            .collect();
        systems.push(endpoint_system(name.to_owned(), env, opts.quick));
    }
    if let Some(bin) = &opts.openmpi {
        let l = ["mpiexec.openmpi", "--allow-run-as-root", "-n", "2", "--bind-to", "core"];
        systems.push(mpi_system("openmpi", l.iter().map(|s| s.to_string()).collect(), bin.clone()));
    }
    if let Some(bin) = &opts.c_abi {
        let run = std::env::current_exe().ok().and_then(|p| Some(p.parent()?.join("nemesis-run")));
        let run = run.filter(|p| p.exists()).map(|p| p.display().to_string()).unwrap_or("nemesis-run".into());
        let l = [run.as_str(), "-n", "2", "--bind", "core", "--"];
        systems.push(mpi_system("nemesis-c-abi", l.iter().map(|s| s.to_string()).collect(), bin.clone()));
    }
    let sizes = &opts.sizes;
    // results[system][size][round]
    let mut results = vec![vec![vec![f64::NAN; rounds]; sizes.len()]; systems.len()];
    let mut memcpy = vec![vec![0.0; rounds]; sizes.len()];
    let (a, b) = crate::pin::pair();
    for round in 0..rounds {
        for (k, sys) in systems.iter().enumerate() {
            eprintln!("round {}/{rounds}: {}", round + 1, sys.name);
            match (sys.run)(sizes) {
                Ok(v) => {
                    for (j, x) in v.into_iter().enumerate() {
                        results[k][j][round] = x;
                    }
                }
                Err(e) => eprintln!("nemesis-bench bw: {}: {e}", sys.name),
            }
        }
        let _ = crate::pin::pin(a);
        for (j, &s) in sizes.iter().enumerate() {
            memcpy[j][round] = memcpy_mbps(s, opts.quick);
        }
    }
    report(&systems, sizes, &results, &memcpy, rounds, (a, b));
}

fn cell(v: &[f64]) -> String {
    let v: Vec<f64> = v.iter().copied().filter(|x| x.is_finite()).collect();
    match Summary::of(&v) {
        Some(s) => format!("{:.0} [{:.0}..{:.0}]", s.median, s.min, s.max),
        None => "-".into(),
    }
}

fn ratio(a: &[f64], b: &[f64]) -> String {
    let pairs: (Vec<f64>, Vec<f64>) =
        a.iter().zip(b).filter(|(x, y)| x.is_finite() && y.is_finite() && **y > 0.0).map(|(x, y)| (*x, *y)).unzip();
    match ratio_of_rounds(&pairs.0, &pairs.1) {
        Some(s) => format!("{:.2} [{:.2}..{:.2}]", s.median, s.min, s.max),
        None => "-".into(),
    }
}

fn report(
    systems: &[System],
    sizes: &[usize],
    res: &[Vec<Vec<f64>>],
    memcpy: &[Vec<f64>],
    rounds: usize,
    cpus: (usize, usize),
) {
    println!(
        "nemesis-bench bw: window of {WINDOW}, 2 ranks pinned to CPUs {} and {}, {rounds} rounds, MB/s medians [min..max]",
        cpus.0, cpus.1
    );
    let mut head = format!("{:>10} {:>26}", "bytes", "memcpy (one core)");
    for s in systems {
        head += &format!(" {:>26}", s.name);
    }
    println!("{head}");
    for (j, &size) in sizes.iter().enumerate() {
        let mut line = format!("{size:>10} {:>26}", cell(&memcpy[j]));
        for r in res {
            line += &format!(" {:>26}", cell(&r[j]));
        }
        println!("{line}");
    }
    println!("ratios (medians of per-round ratios):");
    let peer = systems.iter().position(|s| s.name == "openmpi");
    for (k, s) in systems.iter().enumerate() {
        if Some(k) == peer {
            continue;
        }
        for (j, &size) in sizes.iter().enumerate() {
            let mut line = format!("{:>16} {size:>10}: / memcpy {}", s.name, ratio(&res[k][j], &memcpy[j]));
            if let Some(p) = peer {
                line += &format!("  / openmpi {}", ratio(&res[k][j], &res[p][j]));
            }
            println!("{line}");
        }
    }
}

/// The rank side: both ranks run every size; rank 0 writes `bw SIZE MBPS` lines to `out`.
pub fn rank(out: &str, sizes: &[usize], quick: bool) {
    let mut ep = Endpoint::init().expect("endpoint");
    assert_eq!(ep.size(), 2, "bw runs on two ranks");
    let me = ep.rank();
    let peer = 1 - me;
    let max = sizes.iter().copied().max().unwrap_or(1);
    let mut buf = vec![b'a'; max];
    let mut text = String::new();
    let mut reqs: Vec<Request> = Vec::with_capacity(WINDOW);
    for &size in sizes {
        let n = iters(size, quick);
        let skip = n / 10 + 1;
        barrier(&mut ep, peer);
        let mut t0 = Instant::now();
        for i in 0..n + skip {
            if i == skip {
                t0 = Instant::now();
            }
            reqs.clear();
            for _ in 0..WINDOW {
                // SAFETY: `buf` outlives the requests, all waited for below; the receives write
                // the same bytes the sends read, as the C benchmark does (MPI forbids reading a
                // buffer being received into, but every byte written is the same `a`).
                let r = unsafe {
                    if me == 0 {
                        ep.isend_raw(buf.as_ptr(), size, peer, 2, WORLD)
                    } else {
                        ep.irecv_raw(buf.as_mut_ptr(), size, peer as i32, 2, WORLD)
                    }
                };
                reqs.push(r.expect("post"));
            }
            for r in ep.wait_all(&reqs) {
                r.expect("wait");
            }
            let mut ack = [0u8; 1];
            if me == 0 {
                ep.recv(&mut ack, peer as i32, 3, WORLD).expect("ack");
            } else {
                ep.send(&ack, peer, 3, WORLD).expect("ack");
            }
        }
        let secs = t0.elapsed().as_secs_f64();
        text += &format!("bw {size} {:.1}\n", (size * WINDOW * n) as f64 / secs / 1e6);
    }
    if me == 0 {
        std::fs::write(out, text).expect("write the results");
    }
    ep.finalize().expect("finalize");
}

fn barrier(ep: &mut Endpoint, peer: u32) {
    let mut b = [0u8; 0];
    if ep.rank() == 0 {
        ep.send(&[], peer, 9, WORLD).expect("barrier");
        ep.recv(&mut b, peer as i32, 9, WORLD).expect("barrier");
    } else {
        ep.recv(&mut b, peer as i32, 9, WORLD).expect("barrier");
        ep.send(&[], peer, 9, WORLD).expect("barrier");
    }
}
