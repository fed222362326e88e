//! `nemesis-bench baseline`: the ceilings the transport is judged against, measured between the
//! two CPUs the benchmarks use (the methods of `shared/bench/cacheline_pingpong.c`,
//! `memcpy_bw.c` and `crosscore_copy.c`, here on two pinned threads of one process):
//! - the one-way latency of a cache line between the two cores (two counters on separate lines,
//!   bounced back and forth): no message can arrive sooner;
//! - one core's memcpy bandwidth by size, on buffers touched before timing, best of several
//!   timed runs: no copy is faster;
//! - the bandwidth of copying data the other core has just written (one thread writes a
//!   shared buffer, the other copies it; only the copies are timed): the ceiling for a
//!   single-copy transfer.

use std::hint::black_box;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Instant;

use crate::error::{Error, Result};
use crate::pin::on_cpu;
use crate::sizes::human;
use crate::stats::Summary;

/// Two counters a cache line apart (128 bytes: also apart for adjacent-line prefetchers).
#[repr(C, align(128))]
struct Lines {
    ping: AtomicU64,
    _pad: [u8; 120],
    pong: AtomicU64,
}

/// One-way cache-line latency between CPUs `a` and `b` in ns: half the mean round trip of `iters`
/// bounces.
pub fn cacheline_ns(a: usize, b: usize, iters: u64) -> Result<f64> {
    two_cpus(a, b)?;
    let lines = Lines { ping: AtomicU64::new(0), _pad: [0; 120], pong: AtomicU64::new(0) };
    let l = &lines;
    let round_trip = std::thread::scope(|s| {
        let echo = s.spawn(move || {
            crate::pin::pin(b)?;
            for i in 1..=iters {
                // ORDERING: Relaxed: the counters carry no other data; only the line's trip is
                // measured.
                while l.ping.load(Ordering::Relaxed) != i {
                    std::hint::spin_loop();
                }
                l.pong.store(i, Ordering::Relaxed);
            }
            Ok::<(), std::io::Error>(())
        });
        let timed = on_cpu(a, || {
            let t0 = Instant::now();
            for i in 1..=iters {
                l.ping.store(i, Ordering::Relaxed);
                while l.pong.load(Ordering::Relaxed) != i {
                    std::hint::spin_loop();
                }
            }
            t0.elapsed().as_nanos() as f64 / iters as f64
        });
        let echoed = echo.join().unwrap_or_else(|_| Err(std::io::Error::other("the echo thread panicked")));
        echoed.and(timed)
    });
    Ok(round_trip.map_err(|e| Error::io(format!("pin to CPUs {a} and {b}"), e))? / 2.0)
}

/// Two spinning threads on one CPU would take turns only at scheduler ticks.
fn two_cpus(a: usize, b: usize) -> Result<()> {
    if a == b {
        return Err(Error::Usage(format!("the two-core ceilings need two CPUs; this process may only use CPU {a}")));
    }
    Ok(())
}

/// Repetitions of a `size`-byte copy that move about `bytes`, at most 2^20 (small copies are
/// bounded by calls, not bytes).
fn reps(size: usize, bytes: f64) -> usize {
    ((bytes / size.max(1) as f64) as usize).clamp(1, 1 << 20)
}

const PAGE: usize = 4096;

/// A buffer of `len` bytes that starts on a page boundary (as `memcpy_bw.c`'s `aligned_alloc`).
///
/// Two buffers placed anyhow can make memcpy ten times slower than it is: glibc 2.36 copies
/// with `rep movsb` from a few KiB up to its non-temporal threshold, and on AMD Zen 3 (this
/// machine's EPYC, family 25) `rep movsb` runs at 2.8 GB/s instead of 35–93 when the
/// destination starts 1 to 31 bytes after the source modulo 4096 (measured with distances 0,
/// 8, 16, 32, 64, 2048 at 4K–256K). Two `vec!`s of the same size of 4K or more allocated one
/// after the other on the heap are 16 bytes apart modulo 4096 (glibc's malloc header), while
/// large ones mapped on their own are both 16 bytes past a page boundary, 0 apart: `compare
/// --quick` read 1–3 GB/s at 4–128K next to 25–47 at 1M. Buffers on page boundaries are 0 apart.
struct PageAligned {
    buf: Vec<u8>,
    start: usize,
    len: usize,
}

impl PageAligned {
    /// `len` bytes of `byte`, every page touched (no page faults while timing).
    fn new(len: usize, byte: u8) -> PageAligned {
        let buf = vec![byte; len + PAGE];
        let start = buf.as_ptr().align_offset(PAGE);
        PageAligned { buf, start, len }
    }

    fn as_slice(&self) -> &[u8] {
        &self.buf[self.start..self.start + self.len]
    }

    fn as_mut_slice(&mut self) -> &mut [u8] {
        &mut self.buf[self.start..self.start + self.len]
    }
}

/// One core's memcpy bandwidth for `size` bytes in MB/s, on the calling thread: the best of
/// `trials` timed runs of about `bytes` each, between page-aligned buffers ([`PageAligned`]).
pub fn memcpy_mbps(size: usize, bytes: f64, trials: usize) -> f64 {
    let src = PageAligned::new(size, 1);
    let mut dst = PageAligned::new(size, 2);
    let (src, dst) = (src.as_slice(), dst.as_mut_slice());
    let n = reps(size, bytes);
    let mut best = f64::MAX;
    for _ in 0..trials.max(1) {
        let t0 = Instant::now();
        for _ in 0..n {
            dst.copy_from_slice(black_box(src));
            black_box(&mut *dst);
        }
        best = best.min(t0.elapsed().as_secs_f64());
    }
    (size * n) as f64 / best / 1e6
}

/// A buffer two threads take turns on (the writer fills it, then the copier reads it).
struct Turns {
    buf: *mut u8,
    len: usize,
    /// Odd `2r-1`: round r's data is written, the copier's turn; even `2r`: the copier is done.
    turn: AtomicU64,
}

// SAFETY: the buffer is only touched by the thread whose turn it is; turns are handed over with
// release stores and acquire loads of `turn`.
unsafe impl Sync for Turns {}

/// Bandwidth in MB/s of copying `size` bytes last written by CPU `a`, on CPU `b` (only the
/// copies are timed), over `rounds` rounds.
pub fn crosscore_mbps(a: usize, b: usize, size: usize, rounds: u64) -> Result<f64> {
    two_cpus(a, b)?;
    let mut shared = PageAligned::new(size.max(1), 1);
    let t = Turns { buf: shared.as_mut_slice().as_mut_ptr(), len: size, turn: AtomicU64::new(0) };
    let t = &t;
    let copied = std::thread::scope(|s| {
        let copier = s.spawn(move || {
            crate::pin::pin(b)?;
            let mut own = PageAligned::new(t.len.max(1), 2);
            let own = own.as_mut_slice();
            let mut secs = 0.0;
            for r in 1..=rounds {
                // ORDERING: Acquire: pairs with the writer's Release, so its bytes are visible.
                while t.turn.load(Ordering::Acquire) != 2 * r - 1 {
                    std::hint::spin_loop();
                }
                let t0 = Instant::now();
                // SAFETY: it is the copier's turn: the writer does not touch `buf` until the
                // store below; `own` and `buf` are distinct allocations of at least `len` bytes.
                unsafe { std::ptr::copy_nonoverlapping(t.buf, own.as_mut_ptr(), t.len) };
                black_box(&mut *own);
                secs += t0.elapsed().as_secs_f64();
                // ORDERING: Release: the copy is done before the writer may write again.
                t.turn.store(2 * r, Ordering::Release);
            }
            Ok::<f64, std::io::Error>(secs)
        });
        let written = on_cpu(a, || {
            for r in 1..=rounds {
                // SAFETY: the writer's turn (the copier finished round r-1 or has not started):
                // nothing else touches `buf`, which holds `len` bytes.
                unsafe { std::ptr::write_bytes(t.buf, r as u8, t.len) };
                // ORDERING: Release: the bytes are written before the copier's turn starts.
                t.turn.store(2 * r - 1, Ordering::Release);
                // ORDERING: Acquire: pairs with the copier's Release (its copy is finished).
                while t.turn.load(Ordering::Acquire) != 2 * r {
                    std::hint::spin_loop();
                }
            }
        });
        let secs = copier.join().unwrap_or_else(|_| Err(std::io::Error::other("the copier panicked")));
        written.and(secs)
    });
    let secs = copied.map_err(|e| Error::io(format!("pin to CPUs {a} and {b}"), e))?;
    drop(shared);
    Ok((size as u64 * rounds) as f64 / secs / 1e6)
}

/// What `baseline` measures.
#[derive(Clone, Debug, clap::Args)]
pub struct Opts {
    /// Runs of each measurement (medians with min and max).
    #[arg(long, default_value_t = 5)]
    pub rounds: usize,
    /// Copy sizes (default: 4K to 64M by factors of 4, as memcpy_bw.c; 4K to 4M with --quick).
    #[arg(long, value_delimiter = ',', value_parser = crate::sizes::parse_size)]
    pub sizes: Vec<usize>,
    /// Three rounds of a tenth of the work, sizes to 4M.
    #[arg(long)]
    pub quick: bool,
}

pub fn run(o: &Opts) -> Result<()> {
    if o.rounds == 0 {
        return Err(Error::Usage("--rounds must be at least 1".into()));
    }
    let rounds = if o.quick { o.rounds.min(3) } else { o.rounds };
    let sizes: Vec<usize> = if o.sizes.is_empty() {
        let max = if o.quick { 4 << 20 } else { 64 << 20 };
        std::iter::successors(Some(4096usize), |s| Some(s * 4)).take_while(|&s| s <= max).collect()
    } else {
        o.sizes.clone()
    };
    if let Some(s) = sizes.iter().find(|&&s| s == 0 || s > 1 << 30) {
        return Err(Error::Usage(format!("copy size {s}: sizes go from 1 byte to 1G")));
    }
    let (a, b) = crate::pin::pair();
    let scale = if o.quick { 0.1 } else { 1.0 };
    let line_iters = (2_000_000.0 * scale) as u64;
    let mut line = Vec::with_capacity(rounds);
    let mut memcpy = vec![Vec::with_capacity(rounds); sizes.len()];
    let mut cross = vec![Vec::with_capacity(rounds); sizes.len()];
    let bar = crate::progress::progress((rounds * (1 + sizes.len())) as u64);
    for r in 0..rounds {
        bar.set_message(format!("round {}/{rounds}: cache line", r + 1));
        line.push(cacheline_ns(a, b, line_iters)?);
        bar.inc(1);
        for (j, &s) in sizes.iter().enumerate() {
            bar.set_message(format!("round {}/{rounds}: copies of {}", r + 1, human(s)));
            memcpy[j].push(on_cpu(a, || memcpy_mbps(s, 2e9 * scale, 5)).map_err(|e| Error::io("pin", e))?);
            let cross_rounds = (2e9 * scale / s as f64) as u64 + 5;
            cross[j].push(crosscore_mbps(a, b, s, cross_rounds)?);
            bar.inc(1);
        }
    }
    bar.finish_and_clear();
    let cell = |v: &[f64], k: f64, d: usize| match Summary::of(v) {
        Some(s) => format!("{:.d$} [{:.d$} .. {:.d$}]", s.median / k, s.min / k, s.max / k),
        None => "-".into(),
    };
    println!("nemesis-bench baseline: CPUs {a} and {b}, {rounds} rounds, medians [min .. max]");
    println!("cache-line one-way latency between CPU {a} and CPU {b}: {} ns", cell(&line, 1.0, 1));
    println!(
        "{:>8}  {:>28}  {:>28}",
        "bytes",
        format!("memcpy on CPU {a}, GB/s"),
        format!("copy on {b} of data from {a}, GB/s")
    );
    for (j, &s) in sizes.iter().enumerate() {
        println!("{:>8}  {:>28}  {:>28}", human(s), cell(&memcpy[j], 1e3, 2), cell(&cross[j], 1e3, 2));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ceilings_are_measured() {
        let (a, b) = crate::pin::pair();
        if a == b {
            return; // one CPU: nothing to measure between two
        }
        assert!(cacheline_ns(a, b, 1000).unwrap() > 0.0);
        assert!(memcpy_mbps(4096, 1e6, 2) > 0.0);
        assert!(crosscore_mbps(a, b, 4096, 10).unwrap() > 0.0);
        assert!(cacheline_ns(a, a, 10).is_err());
        assert_eq!(reps(1, 1e12), 1 << 20);
        assert_eq!(reps(1 << 30, 1.0), 1);
    }

    #[test]
    fn page_aligned_buffers() {
        for len in [1, 4096, 5000] {
            let mut b = PageAligned::new(len, 7);
            assert_eq!(b.as_slice().as_ptr() as usize % PAGE, 0);
            assert_eq!(b.as_mut_slice().len(), len);
            assert!(b.as_slice().iter().all(|&x| x == 7));
        }
    }
}
