//! Every environment variable of the root crate, defined once: what it carries, who writes it,
//! who reads it, its default. `docs/configuration.md` is the user's page for the same names
//! (and for those of the other crates); `tests/configuration.rs` keeps the two in step.
//!
//! Sizes are spelled as [`parse_bytes`] reads them (`4096`, `64k`, `64KiB`, `1m`, `1MiB`, `1G`).

/// The job's secret, 64 hex digits: written by `nemesis-run` (a new one per job) into every
/// rank; read by the netmods' handshakes, heartbeats and fragment MACs and by the FT checkpoint
/// keys. Unset under another process manager: rank 0 then makes one and publishes it in the KVS.
pub use nemesis_shm::auth::ENV_JOB_SECRET;

// ---- Written by `nemesis-run`, read by the ranks ------------------------------------------

/// The rank's node id (a PMI-safe token, see [`super::sanitize_node_id`]). Written by
/// `nemesis-run` (`--node`, or `<host>.<i>` for pretend nodes); read by the bootstrap. Default:
/// the host name.
pub const ENV_NODE: &str = "NEMESIS_NODE";
/// [`LAUNCHER_NAME`] in every rank `nemesis-run` starts; read by the PMI client to know it talks
/// to nemesis's own server. Unset under other process managers.
pub const ENV_LAUNCHER: &str = "NEMESIS_LAUNCHER";
/// The value of [`ENV_LAUNCHER`].
pub const LAUNCHER_NAME: &str = "nemesis-run";
/// How ranks wait (`poll`, `yield` or `block`). Written by `nemesis-run --wait` or by the user;
/// read by `Config::from_env`. Default `yield`.
pub const ENV_WAIT: &str = "NEMESIS_WAIT";
/// The ranks of this process's `MPI_COMM_WORLD` among the job's (`PMI_SIZE` counts the whole
/// universe when `nemesis-run --universe-size` leaves room for spawned processes), as
/// `first,count`. Written by `nemesis-run` when the universe is larger than the job, and for
/// every spawned process; read by the bootstrap (ranks beyond `first + count` are not started
/// yet) and by the MPI library. Default: the whole job.
pub const ENV_WORLD: &str = "NEMESIS_WORLD";
/// The number of the command of `MPI_Comm_spawn_multiple` that started this process
/// (`MPI_APPNUM`). Written by `nemesis-run` for spawned processes; read by the MPI library.
/// Default 0.
pub const ENV_APPNUM: &str = "NEMESIS_APPNUM";
/// The PMI-1 wire: the rank's end of its PMI socket (a descriptor number). Written by
/// `nemesis-run` as Hydra writes it; read by the bootstrap and the PMI-1/PMI-2 clients.
pub const ENV_PMI_FD: &str = "PMI_FD";
/// The rank's number, as Hydra writes it; see [`ENV_PMI_FD`].
pub const ENV_PMI_RANK: &str = "PMI_RANK";
/// The job's size, as Hydra writes it; see [`ENV_PMI_FD`].
pub const ENV_PMI_SIZE: &str = "PMI_SIZE";
/// The rank's index among the ranks of its node, as Hydra writes it.
pub const ENV_LOCAL_RANK: &str = "MPI_LOCALRANKID";
/// Number of ranks on the rank's node, as Hydra writes it.
pub const ENV_LOCAL_SIZE: &str = "MPI_LOCALNRANKS";
/// The locality of every rank of the node, by local rank: `;`-separated, each
/// `package.numa.l3.l2.core` with `-` for none. Written by `nemesis-run` when it binds ranks;
/// read by the bootstrap (pair distances). Unset: the bootstrap finds the topology itself.
pub const ENV_LOCALITY: &str = "NEMESIS_LOCALITY";
/// The netmod between nodes, `tcp` or `ofi`. Written by `nemesis-run --netmod` or by the user;
/// read by the bootstrap. Default `tcp`.
pub const ENV_NETMOD: &str = "NEMESIS_NETMOD";
/// The TCP netmod's listening address. Written by `nemesis-run` as `127.0.0.1` for pretend nodes
/// (unless it or [`ENV_TCP_IF`] is set); read by `nemesis-netmod-tcp`. Default: the first
/// non-loopback IPv4 address of an interface that is up.
pub const ENV_TCP_ADDR: &str = "NEMESIS_TCP_ADDR";
/// The TCP netmod's interface (its first address), the alternative to [`ENV_TCP_ADDR`].
pub const ENV_TCP_IF: &str = "NEMESIS_TCP_IF";
/// The ofi netmod's heartbeat address; as [`ENV_TCP_ADDR`], read by `nemesis-netmod-rdma`.
pub const ENV_OFI_HEARTBEAT_ADDR: &str = "NEMESIS_OFI_HEARTBEAT_ADDR";
/// The ofi netmod's heartbeat interface; as [`ENV_TCP_IF`].
pub const ENV_OFI_HEARTBEAT_IF: &str = "NEMESIS_OFI_HEARTBEAT_IF";
/// Where the communication matrix goes (a file). Written by `nemesis-run --comm-matrix`; read by
/// every rank at `finalize` (rank 0 assembles it). Unset: no matrix.
pub const ENV_COMM_MATRIX: &str = "NEMESIS_COMM_MATRIX";

// ---- Fault tolerance: written by `nemesis-run --ft`, read by the ranks' FT wiring ---------

/// The groups file (`<rank> <group>` lines); FT is on when it is set. Written by `nemesis-run
/// --ft FILE` / `--ft-groups K` or by hand; read by `ft::FtConfig`. Unset: FT off.
pub const ENV_FT_GROUPS: &str = "NEMESIS_FT_GROUPS";
/// Directory of checkpoint files and of the sender log's spill file. Written by `nemesis-run`
/// (a private directory it makes, unless the user names one); read by the ranks, which make a
/// private one themselves when it is unset.
pub const ENV_FT_DIR: &str = "NEMESIS_FT_DIR";
/// The rank's end of its FT channel (a descriptor number, [`super::channel`]). Written by
/// `nemesis-run --ft` only; read by `ft::FtConfig`. Unset: no recovery, a death ends the job.
pub const ENV_FT_FD: &str = "NEMESIS_FT_FD";
/// `centralised` (default) or `distributed`: one recovery coordinator, or one per group (Fig
/// 6.7). Written by `nemesis-run --ft` (as `--ft-recovery` says); read by `ft::FtConfig`.
pub const ENV_FT_RECOVERY: &str = "NEMESIS_FT_RECOVERY";
/// `<round>:<group>[,<group>...]`: this process restarts in recovery round `round`, in which the
/// groups listed restart. Written by the launcher into restarted ranks only; read by the
/// bootstrap (a restarted rank is not checked for an inherited PMI descriptor) and by the FT
/// wiring (restore the group's last durable checkpoint).
pub const ENV_FT_RESTART: &str = "NEMESIS_FT_RESTART";
/// Bytes the sender log keeps in memory before it spills. User-set; read by `ft::FtConfig`.
/// Default `ft::DEFAULT_LOG_MAX` (256 MiB).
pub const ENV_FT_LOG_MAX: &str = "NEMESIS_FT_LOG_MAX";
/// Bytes the sender log's spill file may hold. User-set; default unbounded.
pub const ENV_FT_SPILL_MAX: &str = "NEMESIS_FT_SPILL_MAX";
/// The job's id in checkpoint file names. User-set; default the process manager's KVS name.
pub const ENV_FT_JOB: &str = "NEMESIS_FT_JOB";

// ---- Configuration the user sets, read by the ranks ----------------------------------------

/// Which process manager interface the bootstrap speaks: `auto` (default), `1`, `2`, `pmix` or
/// `singleton`.
pub const ENV_PMI: &str = "NEMESIS_PMI";
/// The stderr log filter (`LEVEL`, `TARGET=LEVEL`, ...; see `log`). Default: warnings only.
pub const ENV_LOG: &str = "NEMESIS_LOG";
/// Largest message sent eagerly (a size). Default `config::DEFAULT_EAGER_MAX` (12 KiB) with CMA,
/// `config::DEFAULT_EAGER_MAX_RING` (128 KiB) without.
pub const ENV_EAGER_MAX: &str = "NEMESIS_EAGER_MAX";
/// Largest message a blocking send to the node sends eagerly. Default 2 MiB.
pub const ENV_EAGER_BLOCKING_MAX: &str = "NEMESIS_EAGER_BLOCKING_MAX";
/// The rendezvous backend: `auto` (default), `shm` or `cma`.
pub const ENV_LMT: &str = "NEMESIS_LMT";
/// Under `auto`, the length from which CMA is used. Default 0.
pub const ENV_CMA_MIN: &str = "NEMESIS_CMA_MIN";
/// Under `auto`, the length from which the rings are used again. Default none.
pub const ENV_CMA_MAX: &str = "NEMESIS_CMA_MAX";
/// Single-copy transfers from this length are copied by both sides. Default 32 KiB.
pub const ENV_CMA_SPLIT_MIN: &str = "NEMESIS_CMA_SPLIT_MIN";
/// Thresholds by pair distance, over the measured table (`distance:field=size,...;...`).
pub const ENV_TOPO_TABLE: &str = "NEMESIS_TOPO_TABLE";
/// Bytes of unexpected messages copied out of the segment before back-pressure. Default 64 MiB.
pub const ENV_UNEXPECTED_MAX: &str = "NEMESIS_UNEXPECTED_MAX";
/// Empty polls a `yield` or `block` wait spins before it gives the core away. Default 2,000, or
/// 8 when the node has more ranks than CPUs.
pub const ENV_SPIN_POLLS: &str = "NEMESIS_SPIN_POLLS";

// ---- Read by `nemesis-run` itself ----------------------------------------------------------

/// The directory holding nemesis's `libmpi.so.12`, which `nemesis-run` puts first in the ranks'
/// `LD_LIBRARY_PATH` (empty: none). Default: the launcher's own directory, then `../lib` beside it.
pub const ENV_MPI_LIBDIR: &str = "NEMESIS_MPI_LIBDIR";
/// Tests only: the launcher leaves deaths unmarked in the segment, as a foreign process manager
/// would, so ranks must learn of them through pidfds.
pub const ENV_RUN_NO_MARKS: &str = "NEMESIS_RUN_NO_MARKS";

/// Parses `4096`, `64k`, `64KiB`, `1m`, `1MiB`.
pub fn parse_bytes(s: &str) -> Option<usize> {
    let t = s.trim().trim_end_matches("iB").trim_end_matches('B');
    let (num, mult) = match t.chars().last()? {
        'k' | 'K' => (&t[..t.len() - 1], 1usize << 10),
        'm' | 'M' => (&t[..t.len() - 1], 1 << 20),
        'g' | 'G' => (&t[..t.len() - 1], 1 << 30),
        _ => (t, 1),
    };
    num.trim().parse::<usize>().ok()?.checked_mul(mult)
}

/// Parses [`ENV_WORLD`]'s `first,count` (`None`: unset or malformed).
pub fn parse_world(v: &str) -> Option<(u32, u32)> {
    let (a, b) = v.split_once(',')?;
    let (first, count) = (a.trim().parse::<u32>().ok()?, b.trim().parse::<u32>().ok()?);
    (count > 0 && first.checked_add(count).is_some()).then_some((first, count))
}
