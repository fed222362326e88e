//! `nemesis-bench`: the benchmarks of nemesis. See `docs/benchmarks.md`.

use std::os::fd::RawFd;

use clap::{Parser, Subcommand};

mod baseline;
mod callgrind;
mod coll;
mod compare;
mod error;
mod ft;
mod ft_recovery;
#[cfg(feature = "iceoryx2")]
mod iceoryx;
mod instructions;
mod launch;
mod link;
mod mr;
mod pin;
mod pingpong;
mod plan;
mod plogp;
mod plot;
mod proc;
mod progress;
mod report;
mod rma;
mod shm;
mod sizes;
mod stats;
mod suite;
mod system;
mod topo;
mod workload;

use error::{Error, Result};
use workload::Workload;

#[derive(Parser)]
#[command(name = "nemesis-bench", about = "Benchmarks of the nemesis transport", version)]
struct Cli {
    #[command(subcommand)]
    command: Cmd,
}

#[derive(Subcommand)]
enum Cmd {
    /// The topology in force, the distance of every pair of CPUs, one CPU pair per distance to
    /// measure it on, and the thresholds each distance gets.
    Topo,
    /// The main job: two ranks through the Endpoint — latency and bandwidth by message size, the
    /// 8-byte message rate (fastbox and queue paths), next to the cache-line limit.
    Pingpong {
        #[command(flatten)]
        opts: pingpong::Opts,
    },
    /// One-way latency by size (mpi_pingpong.c's loop) through the Endpoint and its variants,
    /// next to the cache-line limit (and other systems with --with).
    Latency {
        #[command(flatten)]
        opts: compare::EndpointOpts,
    },
    /// Streaming bandwidth by size (OSU's window of 64, as mpi_pingpong.c) through the Endpoint
    /// and its variants, next to one core's memcpy (and other systems with --with).
    Bw {
        #[command(flatten)]
        opts: compare::EndpointOpts,
    },
    /// Bidirectional streaming bandwidth by size (OSU's osu_bibw) through the Endpoint and its
    /// variants, next to one core's memcpy.
    Bibw {
        #[command(flatten)]
        opts: compare::EndpointOpts,
    },
    /// Aggregate message rate and bandwidth with several pairs of ranks at once (OSU's
    /// osu_mbw_mr).
    Mr {
        #[command(flatten)]
        opts: mr::Opts,
    },
    /// The pLogP parameters of the Endpoint (L, o_s(m), o_r(m), g(m); Kielmann's procedure).
    Plogp {
        #[command(flatten)]
        opts: plogp::Opts,
    },
    /// The ceilings: cache-line latency between the two cores, one core's memcpy bandwidth, and
    /// copying data the other core has just written.
    Baseline {
        #[command(flatten)]
        opts: baseline::Opts,
    },
    /// Latency and bandwidth of nemesis next to the alternatives (Unix sockets, pipes, iceoryx2,
    /// Open MPI, MPICH), and the collectives of the MPI systems, interleaved, with ratios; tables,
    /// CSV and plots.
    Compare {
        #[command(flatten)]
        opts: compare::CompareOpts,
    },
    /// The collectives of mpi_coll.c (barrier, bcast, reduce, allreduce, alltoall, allgather,
    /// gather, scatter) through nemesis's C ABI, Open MPI and MPICH on 2 and 4 ranks, interleaved,
    /// with ratios to Open MPI; tables, CSV and plots.
    Coll {
        #[command(flatten)]
        opts: coll::Opts,
    },
    /// One-sided latency and bandwidth (osu_rma.c: put, get, accumulate, fetch-and-op,
    /// compare-and-swap; windows of every flavour; flush, lock, fence, PSCW) through nemesis's C
    /// ABI, Open MPI and MPICH on one node, and nemesis against Open MPI over TCP, paired per
    /// round, with the ratios of issue 34's targets and the fraction of one core's memcpy.
    Rma {
        #[command(flatten)]
        opts: rma::Opts,
    },
    /// What fault tolerance (HydEE) costs on the failure-free path, FT on against off: 8-byte
    /// latency inside a group and across groups, ft_stencil without checkpoints, and the
    /// checkpoint time. Last line: `ft overhead: intra <r> inter <r> app <r>`.
    FtOverhead {
        #[command(flatten)]
        opts: ft::Opts,
    },
    /// What recovering a failed group costs (HydEE): ft_stencil under the launcher with recovery
    /// at 4 and 8 ranks, failure-free and with a rank SIGKILLed after a checkpoint, interleaved:
    /// the time to the group running again, the checkpoint's read time, the messages and bytes
    /// replayed, the work lost, the survivors' longer run, and the two goals.
    FtRecovery {
        #[command(flatten)]
        opts: ft_recovery::Opts,
    },
    /// Instructions per enqueue, dequeue and fastbox send + receive, under callgrind.
    Instructions {
        /// Operations per measured region.
        #[arg(long, default_value_t = 10_000)]
        iters: usize,
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
    #[command(name = "__link", hide = true)]
    Link {
        #[command(flatten)]
        args: link::RankArgs,
    },
    #[command(name = "__launch", hide = true)]
    Launch {
        #[command(flatten)]
        opts: launch::Opts,
    },
    #[command(name = "__mr", hide = true)]
    MrRank {
        #[arg(long, value_delimiter = ',', required = true)]
        sizes: Vec<usize>,
        #[arg(long)]
        quick: bool,
    },
    #[command(name = "__plogp", hide = true)]
    PlogpRank {
        #[arg(long, value_delimiter = ',', required = true)]
        sizes: Vec<usize>,
        #[arg(long)]
        samples: usize,
        #[arg(long)]
        epsilon: f64,
    },
    #[command(name = "__stencil", hide = true)]
    Stencil { cells: usize, iterations: u64, interval: u64 },
    #[command(name = "__instructions-worker", hide = true)]
    InstructionsWorker {
        #[arg(long)]
        iters: usize,
    },
}

fn run(cmd: Cmd) -> Result<i32> {
    match cmd {
        Cmd::Pingpong { opts } => pingpong::run(&opts),
        Cmd::Latency { opts } => compare::endpoint(Workload::Latency, &opts)?,
        Cmd::Bw { opts } => compare::endpoint(Workload::Bandwidth, &opts)?,
        Cmd::Bibw { opts } => compare::endpoint(Workload::BiBandwidth, &opts)?,
        Cmd::Mr { opts } => mr::run(&opts)?,
        Cmd::Plogp { opts } => plogp::run(&opts)?,
        Cmd::Baseline { opts } => baseline::run(&opts)?,
        Cmd::Compare { opts } => compare::compare(&opts)?,
        Cmd::Coll { opts } => coll::command(&opts)?,
        Cmd::Rma { opts } => rma::command(&opts)?,
        Cmd::FtOverhead { opts } => ft::run(&opts)?,
        Cmd::FtRecovery { opts } => ft_recovery::command(&opts)?,
        Cmd::Stencil { cells, iterations, interval } => ft::stencil_rank(cells, iterations, interval)?,
        Cmd::Instructions { iters } => {
            if iters < 10_000 {
                return Err(Error::Usage("instructions: at least 10000 operations per region".into()));
            }
            instructions::run(iters).map_err(|e| Error::io("instructions", e))?
        }
        Cmd::ShmPingpong { plan } => shm::pingpong(&plan),
        Cmd::FastboxCompare { plan } => shm::fastbox_compare(&plan),
        Cmd::ShmCells { plan } => shm::cells(&plan),
        Cmd::SegmentSize => shm::segment_size(),
        Cmd::Topo => topo::run()?,
        Cmd::Peer { kind, plan, cpu, fds } => shm::peer(kind, &plan, cpu, &fds),
        Cmd::PingpongRank { rounds, line_fd, sizes, quick } => pingpong::rank(rounds, line_fd, &sizes, quick),
        Cmd::Link { args } => link::rank_main(&args)?,
        Cmd::Launch { opts } => return launch::run(&opts),
        Cmd::MrRank { sizes, quick } => mr::rank(&sizes, quick)?,
        Cmd::PlogpRank { sizes, samples, epsilon } => plogp::rank(&sizes, samples, epsilon)?,
        Cmd::InstructionsWorker { iters } => instructions::worker(iters),
    }
    Ok(0)
}

fn main() {
    // Our log output (NEMESIS_LOG) for this process and the rank programs it runs as.
    nemesis::log::init();
    let cli = Cli::parse();
    match run(cli.command) {
        Ok(code) => std::process::exit(code),
        Err(e) => {
            eprintln!("nemesis-bench: {e}");
            std::process::exit(e.exit_code());
        }
    }
}
