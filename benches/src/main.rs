//! `nemesis-bench`: the benchmarks of nemesis. See the README, "Benchmarks".

use std::os::fd::RawFd;

use clap::{Parser, Subcommand};

mod bw;
mod callgrind;
mod instructions;
mod pin;
mod pingpong;
mod shm;
mod stats;

#[derive(Parser)]
#[command(name = "nemesis-bench", about = "Benchmarks of the nemesis transport", version)]
struct Cli {
    #[command(subcommand)]
    command: Cmd,
}

#[derive(Subcommand)]
enum Cmd {
    /// The main job: two ranks through the Endpoint — latency and bandwidth by message size, the
    /// 8-byte message rate (fastbox and queue paths), next to the cache-line limit.
    Pingpong {
        #[command(flatten)]
        opts: pingpong::Opts,
    },
    /// Streaming bandwidth as `mpi_pingpong.c bw` (windows of 64), per configuration, next to
    /// one core's memcpy and optionally Open MPI and the C ABI running `mpi_pingpong`.
    Bw {
        #[command(flatten)]
        opts: bw::Opts,
    },
    /// 8-byte one-way latency through a fastbox and through the cell queue, next to the
    /// cache-line ping-pong limit between the same two cores.
    ShmPingpong {
        #[command(flatten)]
        plan: shm::Plan,
    },
    /// Single-slot fastbox (NEMESIS) against rings (Open MPI's design): latency and message rate.
    FastboxCompare {
        #[command(flatten)]
        plan: shm::Plan,
    },
    /// Streaming bandwidth through cells for several cell sizes.
    ShmCells {
        #[command(flatten)]
        plan: shm::Plan,
    },
    /// Segment bytes per local rank at 8, 64 and 256 ranks.
    SegmentSize,
    /// Instructions per enqueue, dequeue and fastbox send + receive, under callgrind.
    Instructions {
        /// Operations per measured region.
        #[arg(long, default_value_t = 10_000)]
        iters: usize,
    },
    #[command(name = "__peer", hide = true)]
    Peer {
        kind: shm::PeerKind,
        #[command(flatten)]
        plan: shm::Plan,
        #[arg(long)]
        cpu: usize,
        #[arg(long, value_delimiter = ',')]
        fds: Vec<RawFd>,
    },
    #[command(name = "__pingpong-rank", hide = true)]
    PingpongRank {
        #[arg(long)]
        rounds: usize,
        #[arg(long)]
        line_fd: RawFd,
        #[arg(long, value_delimiter = ',')]
        sizes: Vec<usize>,
        #[arg(long)]
        quick: bool,
    },
    #[command(name = "__bw-rank", hide = true)]
    BwRank {
        #[arg(long)]
        out: String,
        #[arg(long, value_delimiter = ',')]
        sizes: Vec<usize>,
        #[arg(long)]
        quick: bool,
    },
    #[command(name = "__instructions-worker", hide = true)]
    InstructionsWorker {
        #[arg(long)]
        iters: usize,
    },
}

fn main() {
    let cli = Cli::parse();
    match cli.command {
        Cmd::Pingpong { opts } => pingpong::run(&opts),
        Cmd::Bw { opts } => bw::run(&opts),
        Cmd::BwRank { out, sizes, quick } => bw::rank(&out, &sizes, quick),
        Cmd::PingpongRank { rounds, line_fd, sizes, quick } => pingpong::rank(rounds, line_fd, &sizes, quick),
        Cmd::ShmPingpong { plan } => shm::pingpong(&plan),
        Cmd::FastboxCompare { plan } => shm::fastbox_compare(&plan),
        Cmd::ShmCells { plan } => shm::cells(&plan),
        Cmd::SegmentSize => shm::segment_size(),
        Cmd::Instructions { iters } => {
            if iters < 10_000 {
                eprintln!("nemesis-bench instructions: at least 10000 operations per region");
                std::process::exit(2);
            }
            if let Err(e) = instructions::run(iters) {
                eprintln!("nemesis-bench instructions: {e}");
                std::process::exit(1);
            }
        }
        Cmd::Peer { kind, plan, cpu, fds } => shm::peer(kind, &plan, cpu, &fds),
        Cmd::InstructionsWorker { iters } => instructions::worker(iters),
    }
}
