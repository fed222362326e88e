//! Wall-clock nanoseconds per [`SenderLog::append_parts`] of an 8-byte envelope and an 8-byte payload (what an
//! inter-group 8-byte send logs), where instruction counts miss the cost: page faults and the zeroing of fresh
//! memory.
//!
//! `cargo bench -p nemesis-ft --bench log_growth [-- ROUNDS]` prints one line per case with the median and the
//! spread over the rounds (each round a fresh process state):
//!
//! ```text
//! log-grow <median> [<min>..<max>] ns    a fresh log takes 2M messages without an acknowledgement (a job that
//!                                          has not checkpointed yet: the log only grows)
//! log-steady <median> [<min>..<max>] ns  the same log, emptied by an acknowledgement, takes them again
//! log-acked <median> [<min>..<max>] ns   a fresh log acknowledged every 4096 messages (GC in a steady state)
//! log-run <median> [<min>..<max>] ns     a fresh log in a new process (this binary run again) takes 22,000
//!                                          messages without an acknowledgement: what one rank of `nemesis-bench
//!                                          ft-overhead`'s inter-group latency run logs (20,000 timed round trips
//!                                          after 2,000 of warm-up)
//! ```

use std::hint::black_box;
use std::time::Instant;

use nemesis_ft::{LogConfig, Piggyback, SenderLog};

const MESSAGES: u64 = 2_000_000;
const ACK_EVERY: u64 = 4096;
/// Messages one rank of a latency run sends (`nemesis-bench`'s `latency_iters(8)`: 20,000 and 2,000 of warm-up).
const RUN: u64 = 22_000;
const ENVELOPE: [u8; 8] = [7, 0, 0, 0, 1, 0, 0, 0];

fn config() -> LogConfig {
    LogConfig { memory_limit: usize::MAX, spill_dir: None, spill_limit: None }
}

/// Appends `n` messages dated `from + 1..` to rank 1, acknowledging every `ack` of them (0: never); ns per append.
fn appends(log: &mut SenderLog, from: u64, n: u64, ack: u64, payload: &[u8]) -> f64 {
    let t = Instant::now();
    for d in from + 1..=from + n {
        let pb = Piggyback::new(d, 1, None).expect("piggyback");
        log.append_parts(1, pb, &ENVELOPE, payload).expect("append");
        if ack != 0 && d % ack == 0 {
            log.discard_before(1, d + 1);
        }
    }
    t.elapsed().as_nanos() as f64 / n as f64
}

fn summary(mut v: Vec<f64>) -> String {
    v.sort_by(f64::total_cmp);
    format!("{:.1} [{:.1}..{:.1}] ns", v[v.len() / 2], v[0], v[v.len() - 1])
}

fn main() {
    let rounds: usize = std::env::args().skip(1).find_map(|a| a.parse().ok()).unwrap_or(7);
    let payload = black_box(vec![0x5au8; 8]);
    let (mut grow, mut steady, mut acked, mut run) = (Vec::new(), Vec::new(), Vec::new(), Vec::new());
    if std::env::args().any(|a| a == "--child-run") {
        let mut log = SenderLog::new(2, config());
        println!("{}", appends(&mut log, 0, RUN, 0, &payload));
        return;
    }
    let exe = std::env::current_exe().expect("this binary");
    for _ in 0..rounds {
        // In a new process: its heap as small and unfaulted as a fresh rank's.
        let out = std::process::Command::new(&exe).arg("--child-run").output().expect("run this binary again");
        run.push(String::from_utf8_lossy(&out.stdout).trim().parse().expect("ns per append"));
        let mut log = SenderLog::new(2, config());
        grow.push(appends(&mut log, 0, MESSAGES, 0, &payload));
        log.discard_before(1, MESSAGES + 1);
        steady.push(appends(&mut log, MESSAGES, MESSAGES, 0, &payload));
        drop(log);
        let mut log = SenderLog::new(2, config());
        acked.push(appends(&mut log, 0, MESSAGES, ACK_EVERY, &payload));
    }
    println!("log-grow {}", summary(grow));
    println!("log-steady {}", summary(steady));
    println!("log-acked {}", summary(acked));
    println!("log-run {}", summary(run));
}
