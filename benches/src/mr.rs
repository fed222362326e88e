//! `nemesis-bench mr`: aggregate message rate and bandwidth with several pairs of ranks at once
//! (OSU's `osu_mbw_mr`): with P pairs, rank i sends to rank i+P windows of 64 non-blocking sends
//! matched by 64 pre-posted receives, then waits for a 1-byte acknowledgement; every rank starts
//! together after a barrier, and rank 0 times from there to a barrier after the last window.
//! Pair counts are interleaved round by round. More ranks than CPUs makes the ranks yield
//! instead of poll (and the figures then measure oversubscription).

use std::fmt::Write as _;
use std::time::Instant;

use nemesis::launch::Wait;
use nemesis::{Endpoint, WORLD};

use crate::error::{Error, Result};
use crate::link::EndpointLink;
use crate::plan::{Plan, SuiteOpts};
use crate::progress::{progress, say};
use crate::report::{field, spread, table};
use crate::sizes::human;
use crate::stats::finite;
use crate::workload::{Link, WINDOW};

/// `mr`'s options.
#[derive(Clone, Debug, clap::Args)]
pub struct Opts {
    /// Numbers of pairs, comma-separated [default: 1,2].
    #[arg(long, value_delimiter = ',')]
    pub pairs: Vec<u32>,
    #[command(flatten)]
    pub suite: SuiteOpts,
}

const ACK: i32 = 2;
const BARRIER: i32 = 3;

/// Windows (and warm-up windows) per pair for `size` bytes: about 256 MiB, 5 to 5000 windows.
fn windows(size: usize, quick: bool) -> (usize, usize) {
    let n = ((1usize << 28) / (WINDOW * size.max(1))).clamp(5, 5000);
    let n = if quick { (n / 10).max(5) } else { n };
    (n, n / 10 + 1)
}

/// Every rank waits for all the others (through rank 0).
fn barrier(ep: &mut Endpoint) -> Result<()> {
    let mut nothing = [0u8; 0];
    if ep.rank() == 0 {
        for r in 1..ep.size() {
            ep.recv(&mut nothing, r as i32, BARRIER, WORLD)?;
        }
        for r in 1..ep.size() {
            ep.send(&nothing, r, BARRIER, WORLD)?;
        }
    } else {
        ep.send(&nothing, 0, BARRIER, WORLD)?;
        ep.recv(&mut nothing, 0, BARRIER, WORLD)?;
    }
    Ok(())
}

/// The rank side (`__mr`): rank 0 prints `mr SIZE MB/s Mmsg/s` per size.
pub fn rank(sizes: &[usize], quick: bool) -> Result<()> {
    let ep = Endpoint::init()?;
    let (n, me) = (ep.size(), ep.rank());
    if n < 2 || n % 2 != 0 {
        return Err(Error::Usage(format!("mr runs on an even number of ranks, not {n}")));
    }
    let pairs = n / 2;
    let sender = me < pairs;
    let peer = if sender { me + pairs } else { me - pairs };
    let mut link = EndpointLink::new(ep, peer);
    let mut buf = vec![b'a'; sizes.iter().copied().max().unwrap_or(0).max(1)];
    let mut ack = [0u8; 1];
    for &size in sizes {
        let (iters, skip) = windows(size, quick);
        let mut t0 = Instant::now();
        for i in 0..iters + skip {
            if i == skip {
                barrier(link.endpoint())?;
                t0 = Instant::now();
            }
            if sender {
                link.send_window(&buf[..size], WINDOW)?;
                link.endpoint().recv(&mut ack, peer as i32, ACK, WORLD)?;
            } else {
                link.recv_window(&mut buf[..size], WINDOW)?;
                link.endpoint().send(&ack, peer, ACK, WORLD)?;
            }
        }
        barrier(link.endpoint())?;
        let secs = t0.elapsed().as_secs_f64();
        if me == 0 {
            let msgs = (pairs as usize * WINDOW * iters) as f64;
            println!("mr {size} {:.3} {:.4}", msgs * size as f64 / secs / 1e6, msgs / secs / 1e6);
        }
    }
    link.finish()
}

/// `mr`.
pub fn run(o: &Opts) -> Result<()> {
    let ctx = crate::system::Context::new()?;
    let pairs = if o.pairs.is_empty() { vec![1, 2] } else { o.pairs.clone() };
    if pairs.iter().any(|&p| p == 0 || p > 512) {
        return Err(Error::Usage("--pairs: each count from 1 to 512".into()));
    }
    let plan = Plan::new(&o.suite, vec![crate::workload::Workload::Bandwidth])?;
    let sizes = plan.sizes_of(crate::workload::Workload::Bandwidth);
    let allowed = crate::pin::allowed();
    let cpus = allowed.len();
    let list = sizes.iter().map(usize::to_string).collect::<Vec<_>>().join(",");
    let mut args = vec!["__mr".to_owned(), "--sizes".into(), list];
    if plan.quick {
        args.push("--quick".into());
    }
    // [pair count][size][round] of (MB/s, M msg/s)
    let mut mbps = vec![vec![vec![f64::NAN; plan.rounds]; sizes.len()]; pairs.len()];
    let mut rate = mbps.clone();
    let mut failures = Vec::new();
    let bar = progress((pairs.len() * plan.rounds) as u64);
    for (round, k) in crate::stats::interleave(pairs.len(), plan.rounds) {
        let ranks = 2 * pairs[k];
        let wait = if ranks as usize <= cpus { Wait::Poll } else { Wait::Yield };
        bar.set_message(format!("round {}/{}: {} pair(s)", round + 1, plan.rounds, pairs[k]));
        match crate::launch::capture(&ctx, ranks, wait, &args, plan.timeout) {
            Ok(text) => {
                for line in text.lines() {
                    let w: Vec<&str> = line.split_whitespace().collect();
                    if let ["mr", s, m, r] = w[..]
                        && let (Ok(s), Ok(m), Ok(r)) = (s.parse::<usize>(), m.parse::<f64>(), r.parse::<f64>())
                        && let Some(j) = sizes.iter().position(|&x| x == s)
                    {
                        mbps[k][j][round] = m;
                        rate[k][j][round] = r;
                    }
                }
            }
            Err(e) => {
                say(&bar, format!("nemesis-bench mr: {} pair(s): {e}", pairs[k]));
                failures.push(format!("round {}: {} pair(s): {e}", round + 1, pairs[k]));
            }
        }
        bar.inc(1);
    }
    bar.finish_and_clear();
    let mut head = vec!["bytes".to_owned()];
    for &p in &pairs {
        head.push(format!("{p}p MB/s"));
        head.push(format!("{p}p M msg/s"));
    }
    let body: Vec<Vec<String>> = sizes
        .iter()
        .enumerate()
        .map(|(j, &s)| {
            let mut r = vec![human(s)];
            for k in 0..pairs.len() {
                r.push(spread(&finite(&mbps[k][j])));
                r.push(spread(&finite(&rate[k][j])));
            }
            r
        })
        .collect();
    let list = allowed.iter().map(usize::to_string).collect::<Vec<_>>().join(",");
    println!(
        "nemesis-bench mr: aggregate over P pairs (rank i sends to i+P), windows of {WINDOW}; CPUs {list}; \
         {} rounds, pair counts interleaved; medians [min..max]",
        plan.rounds
    );
    for &p in &pairs {
        let wait = if 2 * p as usize <= cpus { "poll" } else { "yield (more ranks than CPUs)" };
        println!("  {p} pair(s): {} ranks bound one per CPU in turn, wait {wait}", 2 * p);
    }
    print!("{}", table(&head, &body));
    for f in &failures {
        println!("failed: {f}");
    }
    if let Some(dir) = &o.suite.out {
        std::fs::create_dir_all(dir).map_err(|e| crate::error::Error::file("create", dir, e))?;
        let mut t = String::from("pairs,ranks,bytes,rounds,mbps,mbps_min,mbps_max,mmsgs,mmsgs_min,mmsgs_max\n");
        for (k, &p) in pairs.iter().enumerate() {
            for (j, &s) in sizes.iter().enumerate() {
                let (m, r) = (finite(&mbps[k][j]), finite(&rate[k][j]));
                let n = mbps[k][j].iter().filter(|x| x.is_finite()).count();
                let f = |x: Option<f64>| x.map(|v| v.to_string()).unwrap_or_default();
                let _ = writeln!(
                    t,
                    "{p},{},{s},{n},{},{},{},{},{},{}",
                    2 * p,
                    f(m.map(|x| x.median)),
                    f(m.map(|x| x.min)),
                    f(m.map(|x| x.max)),
                    f(r.map(|x| x.median)),
                    f(r.map(|x| x.min)),
                    f(r.map(|x| x.max))
                );
            }
        }
        let path = dir.join("mr.csv");
        std::fs::write(&path, t).map_err(|e| crate::error::Error::file("write", &path, e))?;
        println!("\nwrote {}", field(&path.display().to_string()));
    }
    Ok(())
}
