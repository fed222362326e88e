//! The workloads every two-process system runs, as `shared/bench/mpi_pingpong.c` runs them (the
//! same sizes, iterations, warm-up and output lines), so that a system measured through this
//! crate's rank programs and one measured through `mpi_pingpong` under its own `mpiexec` are
//! compared like for like:
//! - `lat`: ping-pong of one buffer, one-way time = round trip / 2, 20,000 iterations after
//!   2,000 warm-up ones up to 8 KiB, 1,000 after 100 above; prints `lat SIZE USEC`;
//! - `bw`: OSU-style window of 64 sends of one buffer into 64 receives into one buffer, then a
//!   1-byte acknowledgement; about 1 GiB per size (20 to 5,000 windows), a tenth more as warm-up;
//!   prints `bw SIZE MB/s`;
//! - `bibw`: OSU's bidirectional variant (both ranks post 64 receives and 64 sends each
//!   window, no acknowledgement); prints `bibw SIZE MB/s` counting both directions.
//!
//! A [`Link`] is one side of a connection between rank 0 and rank 1; the loops here are written
//! once over it.

use std::collections::BTreeMap;
use std::io::Write;
use std::time::Instant;

use crate::error::{Error, Result};

/// Messages in flight per window (as `mpi_pingpong.c` and OSU).
pub const WINDOW: usize = 64;

/// What is measured.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Workload {
    /// One-way latency (µs).
    Latency,
    /// Streaming bandwidth (MB/s).
    Bandwidth,
    /// Bidirectional streaming bandwidth (MB/s, both directions).
    BiBandwidth,
}

impl Workload {
    /// The word of the program's command line and output lines (`lat`, `bw`, `bibw`).
    pub fn key(self) -> &'static str {
        match self {
            Workload::Latency => "lat",
            Workload::Bandwidth => "bw",
            Workload::BiBandwidth => "bibw",
        }
    }

    /// Parses [`Workload::key`].
    pub fn from_key(s: &str) -> Option<Workload> {
        [Workload::Latency, Workload::Bandwidth, Workload::BiBandwidth].into_iter().find(|w| w.key() == s)
    }

    /// The name of its CSV and plot files (`latency`, `bw`, `bibw`).
    pub fn file_stem(self) -> &'static str {
        match self {
            Workload::Latency => "latency",
            _ => self.key(),
        }
    }

    /// The unit of its figures.
    pub fn unit(self) -> &'static str {
        match self {
            Workload::Latency => "us",
            Workload::Bandwidth | Workload::BiBandwidth => "MB/s",
        }
    }

    /// What its figures are, for table titles and plot axes.
    pub fn title(self) -> &'static str {
        match self {
            Workload::Latency => "one-way latency",
            Workload::Bandwidth => "bandwidth",
            Workload::BiBandwidth => "bidirectional bandwidth",
        }
    }

    /// True for bandwidths, false for times.
    pub fn higher_is_better(self) -> bool {
        self != Workload::Latency
    }

    /// The sizes `mpi_pingpong` runs up to `max` for this workload (latency from 0 bytes, the
    /// bandwidths from 1).
    pub fn sizes(self, max: usize) -> Vec<usize> {
        crate::sizes::doubling(max, self == Workload::Latency)
    }
}

/// Iterations and warm-up iterations of the latency loop for `size` bytes.
pub fn latency_iters(size: usize) -> (usize, usize) {
    if size > 8192 { (1000, 100) } else { (20_000, 2000) }
}

/// Windows and warm-up windows of the bandwidth loops for `size` bytes: about 1 GiB.
pub fn bandwidth_iters(size: usize) -> (usize, usize) {
    let n = ((1usize << 30) / (WINDOW * size.max(1))).clamp(20, 5000);
    (n, n / 10 + 1)
}

/// One side of a two-process connection (rank 0 or 1), as the workloads use it. A message is one
/// buffer, received whole into a buffer of the same length.
pub trait Link {
    /// 0 (the side that times and prints) or 1.
    fn rank(&self) -> u32;
    /// Sends `buf` as one message; returns when `buf` may be reused.
    fn send(&mut self, buf: &[u8]) -> Result<()>;
    /// Receives one message of `buf.len()` bytes into `buf`.
    fn recv(&mut self, buf: &mut [u8]) -> Result<()>;
    /// Sends `count` messages of `buf` (a window); returns when all have left.
    fn send_window(&mut self, buf: &[u8], count: usize) -> Result<()> {
        (0..count).try_for_each(|_| self.send(buf))
    }
    /// Receives `count` messages into `buf` (a window).
    fn recv_window(&mut self, buf: &mut [u8], count: usize) -> Result<()> {
        (0..count).try_for_each(|_| self.recv(buf))
    }
    /// Receives `count` messages into `inbox` while sending `count` of `out`, both at once (for
    /// `bibw`); only transports with non-blocking operations have it.
    fn exchange_window(&mut self, out: &[u8], inbox: &mut [u8], count: usize) -> Result<()> {
        let _ = (out, inbox, count);
        Err(Error::Usage("this system has no bidirectional workload".into()))
    }
}

/// Rank 0 sends an empty message and rank 1 answers with one: both sides have arrived.
pub fn barrier(link: &mut dyn Link) -> Result<()> {
    let mut nothing = [0u8; 0];
    if link.rank() == 0 {
        link.send(&nothing)?;
        link.recv(&mut nothing)
    } else {
        link.recv(&mut nothing)?;
        link.send(&nothing)
    }
}

/// `(iters, skip)` scaled by `scale` (tests run a fraction), at least one of each.
pub fn scaled((iters, skip): (usize, usize), scale: f64) -> (usize, usize) {
    let f = |n: usize| ((n as f64 * scale) as usize).max(1);
    (f(iters), f(skip))
}

/// Runs `workload` for `sizes` over `link` with `scale` times the iterations (1 for figures that
/// compare with `mpi_pingpong`'s); rank 0 writes one line per size to `out`.
pub fn run(link: &mut dyn Link, workload: Workload, sizes: &[usize], scale: f64, out: &mut dyn Write) -> Result<()> {
    let max = sizes.iter().copied().max().unwrap_or(0).max(1);
    let mut buf = vec![b'a'; max];
    let mut inbox = vec![0u8; if workload == Workload::BiBandwidth { max } else { 0 }];
    for &size in sizes {
        barrier(link)?;
        let figure = match workload {
            Workload::Latency => latency(link, &mut buf[..size], scaled(latency_iters(size), scale))?,
            Workload::Bandwidth => bandwidth(link, &mut buf[..size], scaled(bandwidth_iters(size), scale))?,
            Workload::BiBandwidth => {
                bibandwidth(link, &buf[..size], &mut inbox[..size], scaled(bandwidth_iters(size), scale))?
            }
        };
        if link.rank() == 0 {
            let line = match workload {
                Workload::Latency => format!("lat {size} {figure:.3}"),
                _ => format!("{} {size} {figure:.3}", workload.key()),
            };
            writeln!(out, "{line}").and_then(|_| out.flush()).map_err(|e| Error::io("write the results", e))?;
        }
    }
    Ok(())
}

/// One-way time in µs: half the round trip of a ping-pong.
fn latency(link: &mut dyn Link, buf: &mut [u8], (iters, skip): (usize, usize)) -> Result<f64> {
    let mut t0 = Instant::now();
    for i in 0..iters + skip {
        if i == skip {
            t0 = Instant::now();
        }
        if link.rank() == 0 {
            link.send(buf)?;
            link.recv(buf)?;
        } else {
            link.recv(buf)?;
            link.send(buf)?;
        }
    }
    Ok(t0.elapsed().as_secs_f64() * 1e6 / (2 * iters) as f64)
}

/// MB/s from rank 0 to rank 1, windows of [`WINDOW`] then a 1-byte acknowledgement.
fn bandwidth(link: &mut dyn Link, buf: &mut [u8], (iters, skip): (usize, usize)) -> Result<f64> {
    let mut ack = [0u8; 1];
    let mut t0 = Instant::now();
    for i in 0..iters + skip {
        if i == skip {
            t0 = Instant::now();
        }
        if link.rank() == 0 {
            link.send_window(buf, WINDOW)?;
            link.recv(&mut ack)?;
        } else {
            link.recv_window(buf, WINDOW)?;
            link.send(&ack)?;
        }
    }
    Ok((buf.len() * WINDOW * iters) as f64 / t0.elapsed().as_secs_f64() / 1e6)
}

/// MB/s both ways together.
fn bibandwidth(link: &mut dyn Link, out: &[u8], inbox: &mut [u8], (iters, skip): (usize, usize)) -> Result<f64> {
    let mut t0 = Instant::now();
    for i in 0..iters + skip {
        if i == skip {
            t0 = Instant::now();
        }
        link.exchange_window(out, inbox, WINDOW)?;
    }
    Ok((2 * out.len() * WINDOW * iters) as f64 / t0.elapsed().as_secs_f64() / 1e6)
}

/// The figures of `KEY SIZE VALUE` lines (`lat 8 0.25`) in a program's output, by size; other
/// lines are ignored.
pub fn parse_figures(text: &str, key: &str) -> BTreeMap<usize, f64> {
    let mut found = BTreeMap::new();
    for line in text.lines() {
        let mut w = line.split_whitespace();
        if w.next() == Some(key)
            && let (Some(Ok(size)), Some(Ok(v))) = (w.next().map(str::parse), w.next().map(str::parse::<f64>))
            && v.is_finite()
        {
            found.insert(size, v);
        }
    }
    found
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn iterations_as_mpi_pingpong() {
        assert_eq!(latency_iters(8192), (20_000, 2000));
        assert_eq!(latency_iters(8193), (1000, 100));
        assert_eq!(bandwidth_iters(1), (5000, 501));
        assert_eq!(bandwidth_iters(16 << 10), (1024, 103));
        assert_eq!(bandwidth_iters(4 << 20), (20, 3));
        assert_eq!(scaled((20_000, 2000), 0.01), (200, 20));
        assert_eq!(scaled((20, 3), 0.01), (1, 1));
    }

    #[test]
    fn parses_program_output() {
        let text = "warning: something\nlat 0 0.249\nlat 8 0.347\nbw 8 10.0\nlat x 1\nlat 16 nan\n";
        let lat = parse_figures(text, "lat");
        assert_eq!(lat.into_iter().collect::<Vec<_>>(), vec![(0, 0.249), (8, 0.347)]);
        assert_eq!(parse_figures(text, "bw").get(&8), Some(&10.0));
    }

    /// Both sides of a link in one process, over two queues: the loops terminate and print.
    struct Loopback {
        rank: u32,
        inbox: std::sync::mpsc::Receiver<Vec<u8>>,
        outbox: std::sync::mpsc::Sender<Vec<u8>>,
    }

    impl Link for Loopback {
        fn rank(&self) -> u32 {
            self.rank
        }
        fn send(&mut self, buf: &[u8]) -> Result<()> {
            self.outbox.send(buf.to_vec()).map_err(|_| Error::Run("peer gone".into()))
        }
        fn recv(&mut self, buf: &mut [u8]) -> Result<()> {
            let m = self.inbox.recv().map_err(|_| Error::Run("peer gone".into()))?;
            buf.copy_from_slice(&m);
            Ok(())
        }
    }

    #[test]
    fn rank_zero_prints_one_line_per_size() {
        let (a_tx, a_rx) = std::sync::mpsc::channel();
        let (b_tx, b_rx) = std::sync::mpsc::channel();
        let peer = std::thread::spawn(move || {
            let mut l = Loopback { rank: 1, inbox: b_rx, outbox: a_tx };
            run(&mut l, Workload::Latency, &[0, 4], 0.01, &mut std::io::sink())
        });
        let mut l = Loopback { rank: 0, inbox: a_rx, outbox: b_tx };
        let mut out = Vec::new();
        run(&mut l, Workload::Latency, &[0, 4], 0.01, &mut out).unwrap();
        peer.join().unwrap().unwrap();
        let text = String::from_utf8(out).unwrap();
        assert_eq!(parse_figures(&text, "lat").keys().copied().collect::<Vec<_>>(), vec![0, 4]);
        let mut l = Loopback { rank: 0, inbox: std::sync::mpsc::channel().1, outbox: std::sync::mpsc::channel().0 };
        assert!(l.exchange_window(&[], &mut [], 1).is_err());
    }
}
