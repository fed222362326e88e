//! `nemesis-bench ft-overhead`: what fault tolerance (HydEE) costs on the failure-free path, FT on
//! against FT off in the same run, as medians of per-round ratios with their spread (rounds
//! interleaved, the order rotating):
//!
//! - **intra**: 8-byte one-way latency between two ranks of one group (piggyback, engine hooks);
//! - **inter**: the same between two ranks of two groups (plus the copy into the sender log, the
//!   arrival records, the phases rising with each message);
//! - **app**: the time of `examples/ft_stencil.rs` without checkpoints (8 ranks in 4 groups by
//!   default, `NEMESIS_WAIT=yield` as the ranks outnumber the cores);
//! - the **checkpoint** time of the same computation with checkpoints (mean per checkpoint, from
//!   the call to the group's durability, and the file size per rank).
//!
//! The last line is `ft overhead: intra <r> inter <r> app <r>` (targets: 1.05, 1.15, 1.03).

use std::process::Command;
use std::time::Duration;

use crate::error::{Error, Result};
use crate::plan::{Plan, SuiteOpts};
use crate::stats::{Summary, interleave, ratio_of_rounds};
use crate::system::{Context, System};
use crate::workload::Workload;

#[path = "../../examples/ft_stencil.rs"]
#[allow(dead_code)]
mod stencil;

/// `ft-overhead`'s command line.
#[derive(Clone, Debug, clap::Args)]
pub struct Opts {
    /// Fewer rounds (3) and a shorter computation.
    #[arg(long)]
    pub quick: bool,
    /// Measured rounds [default: 7, 3 with --quick].
    #[arg(long)]
    pub rounds: Option<usize>,
    /// Ranks of the computation (in groups of two consecutive ranks).
    #[arg(long, default_value_t = 8)]
    pub ranks: u32,
    /// Cells per rank of the computation.
    #[arg(long, default_value_t = stencil::CELLS)]
    pub cells: usize,
    /// Iterations of the computation [default: 1000, 200 with --quick].
    #[arg(long)]
    pub iterations: Option<u64>,
    /// Iterations between checkpoints for the checkpoint time [default: a tenth of the iterations].
    #[arg(long)]
    pub interval: Option<u64>,
    /// Longest time one run may take, in seconds.
    #[arg(long, default_value_t = 600)]
    pub timeout: u64,
    /// The latencies alone: no computation, no checkpoint (the last line's app ratio is n/a).
    #[arg(long)]
    pub latency_only: bool,
}

/// The computation's figures, as rank 0 prints them (`stencil <s> <checkpoints> <s in them> <bytes>`).
#[derive(Clone, Copy, Debug)]
struct StencilRun {
    seconds: f64,
    checkpoints: u64,
    checkpoint_seconds: f64,
    checkpoint_bytes: u64,
}

/// Names the rank that `ft-recovery` will kill in its first incarnation.
pub const ENV_HOLD_LAST: &str = "NEMESIS_BENCH_HOLD_LAST";

/// The rank program of the computation (`__stencil`). The rank [`ENV_HOLD_LAST`] names, in its
/// first incarnation, holds at its last iteration (serving its endpoint) until it is killed: a
/// kill that comes late lands all the same, never after the job ended.
pub fn stencil_rank(cells: usize, iterations: u64, interval: u64) -> Result<()> {
    // Read before `init`, which takes the launcher's variables out of a rank's environment.
    let first = std::env::var_os("NEMESIS_FT_RESTART").is_none();
    let victim: Option<u32> = std::env::var(ENV_HOLD_LAST).ok().and_then(|v| v.parse().ok());
    let mut ep = nemesis::Endpoint::init()?;
    let hold = first && victim == Some(ep.rank());
    let last = iterations.saturating_sub(1);
    let mut at = |ep: &mut nemesis::Endpoint, it: u64| {
        if hold && it == last {
            loop {
                let _ = ep.progress();
                std::thread::sleep(std::time::Duration::from_millis(1));
            }
        }
    };
    let r = stencil::run_observed(&mut ep, cells, iterations, interval, 8, false, &mut at)?;
    if ep.rank() == 0 {
        let bytes = ep.ft_stats().map_or(0, |s| s.checkpoint_bytes);
        println!("stencil {} {} {} {bytes} {:016x}", r.seconds, r.checkpoints, r.checkpoint_seconds, r.checksum);
    }
    ep.finalize()?;
    Ok(())
}

/// A groups file and a checkpoint directory under `dir`, as environment variables.
fn ft_env(dir: &std::path::Path, name: &str, groups: &str) -> Result<Vec<(String, String)>> {
    let file = dir.join(format!("{name}.groups"));
    std::fs::write(&file, groups).map_err(|e| Error::io("write a groups file", e))?;
    let ckpt = dir.join(name);
    std::fs::create_dir_all(&ckpt).map_err(|e| Error::io("create a checkpoint directory", e))?;
    Ok(vec![
        ("NEMESIS_FT_GROUPS".to_owned(), file.display().to_string()),
        ("NEMESIS_FT_DIR".to_owned(), ckpt.display().to_string()),
    ])
}

/// One run of the computation with `env`.
fn stencil_once(
    ctx: &Context,
    o: &Opts,
    iterations: u64,
    interval: u64,
    env: &[(String, String)],
) -> Result<StencilRun> {
    let mut c = Command::new(&ctx.exe);
    c.args(["__launch", "--ranks", &o.ranks.to_string(), "--wait", "yield"]);
    for (k, v) in env {
        c.arg("--env").arg(format!("{k}={v}"));
    }
    c.arg("--").arg(&ctx.exe).arg("__stencil");
    c.args([o.cells.to_string(), iterations.to_string(), interval.to_string()]);
    let done = crate::proc::run_all(vec![c], Duration::from_secs(o.timeout))?;
    let d = &done[0];
    if !d.status.success() {
        return Err(Error::Run(format!("ft_stencil failed ({}):\n    {}", d.status, d.stderr_tail())));
    }
    let line = d
        .stdout
        .lines()
        .find_map(|l| l.strip_prefix("stencil "))
        .ok_or_else(|| Error::Run(format!("ft_stencil printed no figures:\n    {}", d.stdout)))?;
    let f: Vec<&str> = line.split_whitespace().collect();
    let num = |i: usize| f.get(i).and_then(|x| x.parse::<f64>().ok()).unwrap_or(f64::NAN);
    Ok(StencilRun {
        seconds: num(0),
        checkpoints: num(1) as u64,
        checkpoint_seconds: num(2),
        checkpoint_bytes: num(3) as u64,
    })
}

fn fmt(s: &Option<Summary>) -> String {
    match s {
        Some(s) => format!("{:.3} ({:.3}–{:.3})", s.median, s.min, s.max),
        None => "n/a".into(),
    }
}

/// Runs the benchmark and prints its table and last line.
pub fn run(o: &Opts) -> Result<()> {
    let ctx = Context::new()?;
    let rounds = o.rounds.unwrap_or(if o.quick { 3 } else { 7 });
    if rounds == 0 || o.ranks < 2 {
        return Err(Error::Usage("ft-overhead needs a round and two ranks".into()));
    }
    let iterations = o.iterations.unwrap_or(if o.quick { 200 } else { 1000 });
    let interval = o.interval.unwrap_or((iterations / 10).max(1));
    let dir = std::env::temp_dir().join(format!("nemesis-bench-ft-{}", std::process::id()));
    std::fs::create_dir_all(&dir).map_err(|e| Error::io("create the benchmark's directory", e))?;
    let result = measure(&ctx, o, rounds, iterations, interval, &dir);
    let _ = std::fs::remove_dir_all(&dir);
    result
}

fn measure(
    ctx: &Context,
    o: &Opts,
    rounds: usize,
    iterations: u64,
    interval: u64,
    dir: &std::path::Path,
) -> Result<()> {
    // Latency: FT off, two ranks of one group, two ranks of two groups.
    let suite = SuiteOpts {
        rounds: Some(rounds),
        max_size: None,
        sizes: vec![8],
        quick: o.quick,
        out: None,
        timeout: o.timeout,
        iters_scale: None,
    };
    let plan = Plan::new(&suite, vec![Workload::Latency])?;
    let systems = [
        System::endpoint("ft-off", Vec::new()),
        System::endpoint("ft-intra", ft_env(dir, "intra", "0 0\n1 0\n")?),
        System::endpoint("ft-inter", ft_env(dir, "inter", "0 0\n1 1\n")?),
    ];
    let mut lat = vec![vec![f64::NAN; rounds]; systems.len()];
    let groups: String = (0..o.ranks).map(|r| format!("{r} {}\n", r / 2)).collect();
    let app_env = ft_env(dir, "app", &groups)?;
    let mut app = vec![vec![f64::NAN; rounds]; 2];
    eprintln!(
        "ft-overhead: {rounds} rounds; 8-byte latency FT off / one group / two groups; ft_stencil {} ranks x {} cells x {iterations} iterations FT off / on",
        o.ranks, o.cells
    );
    for (r, k) in interleave(systems.len(), rounds) {
        let run = systems[k].run(ctx, Workload::Latency, &[8], &plan)?;
        lat[k][r] = run.values[0];
        // The computation, FT off and on, in the same round.
        if k == systems.len() - 1 && !o.latency_only {
            // Off first in even rounds, on first in odd ones.
            for m in [r % 2, (r + 1) % 2] {
                let env = if m == 0 { &[][..] } else { &app_env[..] };
                app[m][r] = stencil_once(ctx, o, iterations, 0, env)?.seconds;
            }
        }
        eprintln!("  round {r}: {} {:.3} us", systems[k].name, lat[k][r]);
    }
    let intra = ratio_of_rounds(&lat[1], &lat[0]);
    let inter = ratio_of_rounds(&lat[2], &lat[0]);
    let app_ratio = ratio_of_rounds(&app[1], &app[0]);
    let med = |k: usize| Summary::of(&lat[k]).map_or(f64::NAN, |s| s.median);
    println!(
        "8-byte one-way latency, median of {rounds} rounds (us): FT off {:.3}, one group {:.3}, two groups {:.3}",
        med(0),
        med(1),
        med(2)
    );
    println!("  intra-group / off, per round: {}", fmt(&intra));
    println!("  inter-group / off, per round: {}", fmt(&inter));
    let m = |s: &Option<Summary>| s.map_or(f64::NAN, |s| s.median);
    if o.latency_only {
        println!("ft overhead: intra {:.3} inter {:.3} app n/a", m(&intra), m(&inter));
        return Ok(());
    }
    let ckpt = stencil_once(ctx, o, iterations, interval, &app_env)?;
    let secs = |i: usize| Summary::of(&app[i]).map_or(f64::NAN, |s| s.median);
    println!(
        "ft_stencil without checkpoints, median of {rounds} rounds (s): FT off {:.3}, FT on {:.3}; on / off per round: {}",
        secs(0),
        secs(1),
        fmt(&app_ratio)
    );
    let mean = if ckpt.checkpoints > 0 { ckpt.checkpoint_seconds / ckpt.checkpoints as f64 } else { f64::NAN };
    println!(
        "checkpoint: {} checkpoints of {} bytes per rank ({} ranks), {:.1} ms each from the call to the group's durability (ft_stencil with a checkpoint every {interval} iterations: {:.3} s)",
        ckpt.checkpoints,
        ckpt.checkpoint_bytes,
        o.ranks,
        1e3 * mean,
        ckpt.seconds
    );
    println!("ft overhead: intra {:.3} inter {:.3} app {:.3}", m(&intra), m(&inter), m(&app_ratio));
    Ok(())
}
