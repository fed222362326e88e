//! An iterative halo exchange with application checkpoints: every rank smooths its block of a
//! periodic 1-D field (`u[i] ← (u[i-1] + 2·u[i] + u[i+1]) / 4`), exchanging one boundary cell with
//! each neighbour per iteration, and checkpoints its block every `interval` iterations through
//! [`Endpoint::checkpoint`]; a restarted rank resumes from [`Endpoint::restored_state`]. Rank 0
//! prints `checksum <hex>` at the end (FNV-1a of every rank's block, in rank order): the same with
//! fault tolerance on or off, and the same as `mpi/examples/ft_stencil.c`.
//!
//! ```sh
//! cargo build --release --example ft_stencil
//! target/release/nemesis-run -n 8 --ft-groups 4 -- target/release/examples/ft_stencil
//! target/release/nemesis-run -n 8 -- target/release/examples/ft_stencil 4096 1000 100  # cells, iterations, interval
//! target/release/nemesis-run -n 8 -- target/release/examples/ft_stencil 4096 1000 100 irecv  # Irecv/Isend/Wait halos
//! ```
//!
//! Without arguments: [`CELLS`] cells per rank, [`ITERATIONS`] iterations, a checkpoint every
//! [`INTERVAL`]. At 8 ranks on the project's 2-core machine an iteration takes about 9 ms however
//! small the block (the ranks outnumber the cores four to one: the time goes to the scheduler, not
//! to the 32768 cells), so the defaults run about 18 s on a quiet machine (`--ft-groups 4`: 20000
//! iterations took 176 s) with a checkpoint about once a second; a loaded machine is slower. An
//! interval of 0 takes no checkpoint. Rank 0 also prints, on standard error, the time of the
//! iterations, the checkpoints taken and their mean time.

use std::time::Instant;

use nemesis::{Endpoint, WORLD};

/// Cells per rank by default.
pub const CELLS: usize = 1 << 15;
/// Iterations by default.
pub const ITERATIONS: u64 = 2_000;
/// Iterations between checkpoints by default.
pub const INTERVAL: u64 = 100;

/// What a run measured (rank 0's view).
#[derive(Clone, Copy, Debug)]
pub struct Report {
    pub checksum: u64,
    /// Seconds from the first iteration to the last (checkpoints included).
    pub seconds: f64,
    pub checkpoints: u64,
    /// Seconds spent in checkpoints.
    pub checkpoint_seconds: f64,
}

const FNV_BASIS: u64 = 0xcbf2_9ce4_8422_2325;

fn fnv(mut h: u64, bytes: &[u8]) -> u64 {
    for &b in bytes {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x0100_0000_01b3);
    }
    h
}

/// The state a checkpoint holds: the next iteration, then the block.
fn encode(next: u64, block: &[f64]) -> Vec<u8> {
    let mut v = Vec::with_capacity(8 + 8 * block.len());
    v.extend_from_slice(&next.to_le_bytes());
    for x in block {
        v.extend_from_slice(&x.to_le_bytes());
    }
    v
}

fn decode(state: &[u8], cells: usize) -> Option<(u64, Vec<f64>)> {
    if state.len() != 8 + 8 * cells {
        return None;
    }
    let next = u64::from_le_bytes(state[..8].try_into().ok()?);
    let block = state[8..].chunks_exact(8).map(|c| f64::from_le_bytes(c.try_into().unwrap_or([0; 8]))).collect();
    Some((next, block))
}

/// Runs the computation on `ep`: `cells` cells per rank, `iterations` iterations, a checkpoint every
/// `interval` (0: none). Every rank returns; rank 0's report holds the checksum.
pub fn run(ep: &mut Endpoint, cells: usize, iterations: u64, interval: u64) -> nemesis::Result<Report> {
    run_halo(ep, cells, iterations, interval, 8)
}

/// [`run`] with halo messages of `halo` bytes (at least 8, a multiple of 8): the boundary cell
/// repeated, so that halos above the eager limit go by rendezvous. The receiver checks that every
/// copy agrees: a message delivered half-copied is an error, not a wrong checksum by chance.
pub fn run_halo(
    ep: &mut Endpoint,
    cells: usize,
    iterations: u64,
    interval: u64,
    halo: usize,
) -> nemesis::Result<Report> {
    run_with(ep, cells, iterations, interval, halo, false)
}

/// [`run_halo`], the halos received by blocking receives, or (`nonblocking`) by receives posted
/// before the sends and waited for after them (the usual MPI halo exchange: `Irecv`, `Isend`,
/// `Waitall`).
pub fn run_with(
    ep: &mut Endpoint,
    cells: usize,
    iterations: u64,
    interval: u64,
    halo: usize,
    nonblocking: bool,
) -> nemesis::Result<Report> {
    run_observed(ep, cells, iterations, interval, halo, nonblocking, &mut |_, _| {})
}

/// [`run_with`], calling `at(ep, it)` at the start of every iteration `it` (after the checkpoint
/// of the iterations before it, if one was due; no request outstanding): where a test holds a rank
/// to kill it.
pub fn run_observed(
    ep: &mut Endpoint,
    cells: usize,
    iterations: u64,
    interval: u64,
    halo: usize,
    nonblocking: bool,
    at: &mut dyn FnMut(&mut Endpoint, u64),
) -> nemesis::Result<Report> {
    let halo = halo.max(8).next_multiple_of(8);
    let (rank, size) = (ep.rank(), ep.size());
    let (left, right) = ((rank + size - 1) % size, (rank + 1) % size);
    // u[0] and u[cells + 1] are the halo cells.
    let mut u = vec![0.0f64; cells + 2];
    let mut next = 0;
    match ep.restored_state().and_then(|s| decode(&s, cells)) {
        Some((n, block)) => {
            next = n;
            u[1..=cells].copy_from_slice(&block);
        }
        None => {
            for (i, x) in u[1..=cells].iter_mut().enumerate() {
                *x = ((rank as usize * cells + i) % 97) as f64;
            }
        }
    }
    let mut v = u.clone();
    let (mut checkpoints, mut in_checkpoints) = (0, 0.0);
    let t0 = Instant::now();
    let (mut from_left, mut from_right) = (vec![0u8; halo], vec![0u8; halo]);
    let (mut first, mut last) = (vec![0u8; halo], vec![0u8; halo]);
    for it in next..iterations {
        at(ep, it);
        // My first cell goes left (tag 0), my last right (tag 1).
        fill(&mut first, u[1]);
        fill(&mut last, u[cells]);
        let receives = if nonblocking {
            // SAFETY: the buffers outlive the requests, waited for in this iteration.
            let r0 = unsafe { ep.irecv_raw(from_left.as_mut_ptr(), halo, left as i32, 1, WORLD) }?;
            // SAFETY: as above.
            let r1 = unsafe { ep.irecv_raw(from_right.as_mut_ptr(), halo, right as i32, 0, WORLD) }?;
            Some((r0, r1))
        } else {
            None
        };
        // SAFETY: the buffers outlive the requests, waited for in this iteration.
        let s0 = unsafe { ep.isend_raw(first.as_ptr(), halo, left, 0, WORLD) }?;
        // SAFETY: as above.
        let s1 = unsafe { ep.isend_raw(last.as_ptr(), halo, right, 1, WORLD) }?;
        match receives {
            Some((r0, r1)) => {
                ep.wait(r0)?;
                ep.wait(r1)?;
            }
            None => {
                ep.recv(&mut from_left, left as i32, 1, WORLD)?;
                ep.recv(&mut from_right, right as i32, 0, WORLD)?;
            }
        }
        ep.wait(s0)?;
        ep.wait(s1)?;
        u[0] = cell(&from_left, left)?;
        u[cells + 1] = cell(&from_right, right)?;
        for i in 1..=cells {
            v[i] = (u[i - 1] + 2.0 * u[i] + u[i + 1]) * 0.25;
        }
        std::mem::swap(&mut u, &mut v);
        if interval > 0 && (it + 1) % interval == 0 && it + 1 < iterations {
            let c0 = Instant::now();
            ep.checkpoint(&encode(it + 1, &u[1..=cells]))?;
            in_checkpoints += c0.elapsed().as_secs_f64();
            checkpoints += 1;
        }
    }
    let seconds = t0.elapsed().as_secs_f64();
    let mut bytes = Vec::with_capacity(8 * cells);
    for x in &u[1..=cells] {
        bytes.extend_from_slice(&x.to_le_bytes());
    }
    let mine = fnv(FNV_BASIS, &bytes);
    let mut checksum = 0;
    if rank == 0 {
        checksum = fnv(FNV_BASIS, &mine.to_le_bytes());
        let mut h = [0u8; 8];
        for r in 1..size {
            ep.recv(&mut h, r as i32, 9, WORLD)?;
            checksum = fnv(checksum, &h);
        }
    } else {
        ep.send(&mine.to_le_bytes(), 0, 9, WORLD)?;
    }
    Ok(Report { checksum, seconds, checkpoints, checkpoint_seconds: in_checkpoints })
}

/// A halo message: `x` in every 8 bytes.
fn fill(msg: &mut [u8], x: f64) {
    for c in msg.chunks_exact_mut(8) {
        c.copy_from_slice(&x.to_le_bytes());
    }
}

/// The cell a halo message from `from` carries, if all its copies agree.
fn cell(msg: &[u8], from: u32) -> nemesis::Result<f64> {
    let first = &msg[..8];
    if msg.chunks_exact(8).any(|c| c != first) {
        return Err(nemesis::Error::Config(format!("ft_stencil: the halo from rank {from} arrived damaged")));
    }
    Ok(f64::from_le_bytes([first[0], first[1], first[2], first[3], first[4], first[5], first[6], first[7]]))
}

fn arg<T: std::str::FromStr>(i: usize, default: T) -> T {
    std::env::args().nth(i).and_then(|a| a.parse().ok()).unwrap_or(default)
}

#[allow(dead_code)]
fn main() -> nemesis::Result<()> {
    nemesis::log::init();
    let (cells, iterations, interval) = (arg(1, CELLS), arg(2, ITERATIONS), arg(3, INTERVAL));
    let nonblocking = std::env::args().nth(4).is_some_and(|a| a == "irecv");
    let mut ep = Endpoint::init()?;
    let r = run_with(&mut ep, cells.max(1), iterations, interval, 8, nonblocking)?;
    if ep.rank() == 0 {
        let mean = if r.checkpoints > 0 { 1e3 * r.checkpoint_seconds / r.checkpoints as f64 } else { 0.0 };
        eprintln!(
            "ft_stencil: {} ranks, {cells} cells each, {iterations} iterations in {:.2} s; {} checkpoints, {mean:.1} ms each",
            ep.size(),
            r.seconds,
            r.checkpoints
        );
        println!("checksum {:016x}", r.checksum);
    }
    ep.finalize()
}
