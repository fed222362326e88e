//! The launcher: starts the ranks of a job on this machine, serves their PMI-1 or PMI-2
//! conversation and watches them until they end (`shared/ARCHITECTURE.md`, "Bootstrap" and
//! "Liveness and failures"; the steps of a job are in `docs/design/launcher.md`). The `nemesis-run`
//! binary is a command line over [`Job`]; a benchmark that starts its own ranks uses [`Job`] directly.
//!
//! What the ranks find (environment, KVS keys, FT frames) is [`crate::contract`], which the rank
//! side reads too. Modules: [`server`] (the PMI server, sans-I/O; `server::dynamic`: spawn requests
//! and the name service), `spawn` (one rank's command, environment and what runs between `fork` and
//! `exec`), `supervise` (the event loop, liveness marks, teardown, restarts; `supervise::dynamic`:
//! the processes `MPI_Comm_spawn` asks for, in the slots of [`Job::universe_size`]), `recovery`
//! (HydEE's recovery coordinators, sans-I/O), `ft` (groups and the FT directory), `output`
//! (`--tag-output`), `signals` (the SIGINT/SIGTERM self-pipe).
//!
//! What holds:
//! - Nothing is left in `/dev/shm`: a node's segment is a memfd the ranks inherit.
//! - A rank that ends is marked GONE in its segment: peers blocked on it get `PeerDied`, never hang.
//! - A failed rank ends the job unless [`Job::keep_going`] (SIGTERM, then SIGKILL after
//!   [`Job::kill_grace`]); a PMI `abort` ends it always, with the code the rank asked for.
//! - Ranks die with the launcher: their `PR_SET_PDEATHSIG` is tied to the thread that forked them,
//!   which stays in [`Job::run`] until every rank is reaped.
//!
//! # Example
//!
//! ```
//! use nemesis::launch::{Bind, Ending, Job};
//!
//! let outcome = Job::new("sh", ["-c", "test \"$PMI_SIZE\" = 2 && exit $PMI_RANK"])
//!     .ranks(2)
//!     .bind(Bind::None)
//!     .keep_going(true)
//!     .run()
//!     .unwrap();
//! assert_eq!(outcome.ranks()[0].code(), 0);
//! assert_eq!(outcome.ranks()[1].code(), 1);
//! assert_eq!(outcome.exit_code(), 1); // the first failing rank's code
//! assert_eq!(*outcome.ending(), Ending::Completed);
//! ```

mod ft;
mod output;
mod recovery;
pub mod server;
mod signals;
mod spawn;
mod supervise;

use std::ffi::{OsStr, OsString};
use std::os::unix::process::ExitStatusExt;
use std::process::ExitStatus;
use std::time::Duration;

use nemesis_shm::{Backing, Params, Segment};

use crate::error::{Error, Result};
use crate::topology::{self, Machine, Plan};

pub use ft::FtGroups;
pub use recovery::{DEFAULT_MAX_RESTARTS, RecoveryMode};

/// How ranks are bound to CPUs (`--bind`; [`crate::topology::plan`]).
pub use crate::topology::Bind;
/// How ranks are mapped onto the machine (`--map-by`).
pub use crate::topology::MapBy;

/// How ranks wait for messages (sets `NEMESIS_WAIT` in their environment).
pub use crate::config::WaitMode as Wait;
/// The launcher's contract with its ranks, at its former path.
pub use crate::contract;

/// A job to start: a program, its arguments, and how to run its ranks. See the [module
/// documentation](self) for an example.
#[derive(Debug, Clone)]
pub struct Job {
    program: OsString,
    args: Vec<OsString>,
    ranks: u32,
    bind: Bind,
    map: Option<MapBy>,
    report_bindings: bool,
    wait: Option<Wait>,
    env: Vec<(OsString, OsString)>,
    tag_output: bool,
    keep_going: bool,
    handle_signals: bool,
    kill_grace: Duration,
    node: Option<String>,
    nodes: u32,
    ft: Option<FtGroups>,
    ft_recovery: RecoveryMode,
    ft_max_restarts: u32,
    comm_matrix: Option<std::path::PathBuf>,
    /// `--universe-size`: ranks the job may grow to by `MPI_Comm_spawn`.
    universe: Option<u32>,
}

/// Default time between SIGTERM and SIGKILL when a job is torn down.
pub const DEFAULT_KILL_GRACE: Duration = Duration::from_millis(500);

impl Job {
    /// A job of one rank running `program` with `args` (`program` is looked up in `PATH`).
    pub fn new<I, S>(program: impl AsRef<OsStr>, args: I) -> Job
    where
        I: IntoIterator<Item = S>,
        S: AsRef<OsStr>,
    {
        Job {
            program: program.as_ref().to_owned(),
            args: args.into_iter().map(|a| a.as_ref().to_owned()).collect(),
            ranks: 1,
            bind: Bind::None,
            map: None,
            report_bindings: false,
            wait: None,
            env: Vec::new(),
            tag_output: false,
            keep_going: false,
            handle_signals: false,
            kill_grace: DEFAULT_KILL_GRACE,
            node: None,
            nodes: 1,
            ft: None,
            ft_recovery: RecoveryMode::Centralised,
            ft_max_restarts: recovery::DEFAULT_MAX_RESTARTS,
            comm_matrix: None,
            universe: None,
        }
    }

    /// True if the ranks' environment sets `var` (the launcher's own, or `env`), not empty.
    fn sets(&self, var: &str) -> bool {
        self.env
            .iter()
            .rev()
            .find(|(k, _)| k == var)
            .map_or_else(|| std::env::var_os(var).is_some_and(|v| !v.is_empty()), |(_, v)| !v.is_empty())
    }

    /// Number of ranks (`-n`); at least 1.
    pub fn ranks(mut self, n: u32) -> Job {
        self.ranks = n;
        self
    }

    /// CPU binding (`--bind`); [`Bind::None`] by default.
    pub fn bind(mut self, bind: Bind) -> Job {
        self.bind = bind;
        self
    }

    /// Mapping policy (`--map-by`); by default cores in order ([`MapBy::default`]). Any policy but
    /// the default needs the `hwloc` feature.
    pub fn map_by(mut self, map: MapBy) -> Job {
        self.map = Some(map);
        self
    }

    /// Prints one line per rank before starting them (`--report-bindings`): its CPU set and
    /// the topology objects it covers ([`crate::topology::Plan::describe`]).
    pub fn report_bindings(mut self, on: bool) -> Job {
        self.report_bindings = on;
        self
    }

    /// The placement of the ranks: `None` when nothing asks for one (no binding, no mapping, no
    /// report), so that a plain job never reads the topology.
    pub fn plan(&self) -> Result<Option<Plan>> {
        if self.bind == Bind::None && self.map.is_none() && !self.report_bindings {
            return Ok(None);
        }
        let machine = Machine::load()?;
        Plan::new(machine, self.ranks, self.map.unwrap_or_default(), self.bind).map(Some)
    }

    /// What `--dry-run` prints: the topology, the policies, and for every rank its node and
    /// [`crate::topology::Plan::describe`]'s line. Starts nothing.
    pub fn dry_run(&self) -> Result<Vec<String>> {
        let node = self.node_id_or_local()?;
        let nodes = plan_nodes(self.ranks, &node, self.nodes)?;
        let plan = match self.plan()? {
            Some(p) => p,
            None => Plan::new(Machine::load()?, self.ranks, MapBy::default(), Bind::None)?,
        };
        let allowed = if plan.machine.source.is_this_machine() { topology::allowed_cpus()? } else { Vec::new() };
        let mut out = vec![
            format!("topology: {}", plan.machine.summary()),
            format!("policy: --map-by {} --bind {}", plan.map.name(), plan.bind.name()),
        ];
        for n in &nodes {
            for (local, &rank) in n.ranks.iter().enumerate() {
                out.push(format!(
                    "rank {rank} (node {}, local rank {local}): {}",
                    n.id,
                    plan.describe(rank as usize, &allowed)
                ));
            }
        }
        if plan.oversubscribed() {
            out.push(format!("{} ranks on {} PUs: oversubscribed", self.ranks, plan.machine.pus.len()));
        }
        Ok(out)
    }

    fn node_id_or_local(&self) -> Result<String> {
        let node = match &self.node {
            Some(n) => contract::sanitize_node_id(n),
            None => contract::local_node_id()?,
        };
        if node.is_empty() {
            return Err(Error::Config("the node id is empty".into()));
        }
        Ok(node)
    }

    /// Sets `NEMESIS_WAIT` in every rank (`--wait`); otherwise the ranks inherit the launcher's.
    pub fn wait(mut self, wait: Wait) -> Job {
        self.wait = Some(wait);
        self
    }

    /// Adds `key=value` to every rank's environment. The launcher's own variables (PMI and
    /// [`contract`]) take precedence.
    pub fn env(mut self, key: impl AsRef<OsStr>, value: impl AsRef<OsStr>) -> Job {
        self.env.push((key.as_ref().to_owned(), value.as_ref().to_owned()));
        self
    }

    /// Prefixes each line of the ranks' output with `[rank] ` (`--tag-output`); by default ranks
    /// inherit the launcher's stdout and stderr.
    pub fn tag_output(mut self, on: bool) -> Job {
        self.tag_output = on;
        self
    }

    /// Lets the other ranks go on when one fails (`--keep-going`); by default the job is torn
    /// down.
    pub fn keep_going(mut self, on: bool) -> Job {
        self.keep_going = on;
        self
    }

    /// Ends the job cleanly on SIGINT or SIGTERM to this process (what `nemesis-run` does):
    /// handlers are installed for the duration of [`Job::run`] and the previous dispositions
    /// restored after. Off by default: a library does not take over a host's signals unasked.
    pub fn handle_signals(mut self, on: bool) -> Job {
        self.handle_signals = on;
        self
    }

    /// Time between SIGTERM and SIGKILL when the job is torn down ([`DEFAULT_KILL_GRACE`]).
    pub fn kill_grace(mut self, grace: Duration) -> Job {
        self.kill_grace = grace;
        self
    }

    /// The node id given to ranks (`NEMESIS_NODE`); by default [`contract::local_node_id`]
    /// (`NEMESIS_NODE` of the launcher, else the host name). Sanitised to a PMI-safe token.
    pub fn node_id(mut self, node: &str) -> Job {
        self.node = Some(node.to_owned());
        self
    }

    /// Splits the ranks into `k` nodes (`--nodes K`): blocks of consecutive ranks, node `i` named
    /// `<node id>.<i>`, each with its own segment, so that traffic between them goes through a
    /// network module as between machines. 1 by default.
    pub fn nodes(mut self, k: u32) -> Job {
        self.nodes = k;
        self
    }

    /// Runs the job with fault tolerance (HydEE) in groups from `groups` (`--ft FILE`,
    /// `--ft-groups K`, `--ft-matrix FILE`): checked before any rank starts (a bad file is
    /// [`Error::Config`]), then given to the ranks as `NEMESIS_FT_GROUPS`; checkpoints go to
    /// `NEMESIS_FT_DIR` if set, else to a directory made for the job and removed after it.
    pub fn ft(mut self, groups: FtGroups) -> Job {
        self.ft = Some(groups);
        self
    }

    /// With [`ft`](Self::ft): how many recovery coordinators restart failed groups
    /// (`--ft-recovery centralised|distributed`; centralised by default).
    pub fn ft_recovery(mut self, mode: RecoveryMode) -> Job {
        self.ft_recovery = mode;
        self
    }

    /// With [`ft`](Self::ft): a group that fails more than `n` times ends the job
    /// (`--ft-max-restarts N`, [`DEFAULT_MAX_RESTARTS`] by default).
    pub fn ft_max_restarts(mut self, n: u32) -> Job {
        self.ft_max_restarts = n;
        self
    }

    /// Writes the job's communication matrix (bytes each rank sent to each rank; the CSV that
    /// `nemesis-ft groups --matrix` reads) to `file` at the end (`--comm-matrix FILE`): sets
    /// `NEMESIS_COMM_MATRIX` in every rank; rank 0 writes it when the ranks finalize.
    pub fn comm_matrix(mut self, file: impl Into<std::path::PathBuf>) -> Job {
        self.comm_matrix = Some(file.into());
        self
    }

    /// The job may grow to `n` ranks by `MPI_Comm_spawn` (`--universe-size N`; `MPI_UNIVERSE_SIZE`):
    /// spawned processes take the slots beyond the ranks the job starts with. By default the
    /// universe is the job (or, under Slurm, its allocation, `SLURM_NTASKS`), and a spawn beyond
    /// it fails with the reason. A universe larger than the job gives every rank the netmod
    /// (spawned processes run on node identities of their own).
    pub fn universe_size(mut self, n: u32) -> Job {
        self.universe = Some(n);
        self
    }

    /// The universe's size: [`universe_size`](Self::universe_size), else the Slurm allocation,
    /// else the job; never below the job.
    pub fn universe(&self) -> u32 {
        let slurm = || std::env::var("SLURM_NTASKS").ok().and_then(|v| v.trim().parse::<u32>().ok());
        self.universe.or_else(slurm).unwrap_or(self.ranks).max(self.ranks)
    }

    /// Starts the ranks and supervises them until every one has ended.
    ///
    /// The ranks are forked from the calling thread, which stays in this call until all are
    /// reaped: their `PR_SET_PDEATHSIG` is tied to that thread, so a launcher killed with SIGKILL
    /// takes them along. The host must not reap children it did not start (`waitpid(-1)`).
    ///
    /// Errors before any rank runs: a bad configuration ([`Error::Config`]), the segment
    /// ([`Error::Shm`]), a program that cannot be started ([`Error::Spawn`]; ranks already
    /// started are killed and reaped first). Once the ranks run, every ending is an [`Outcome`].
    pub fn run(mut self) -> Result<Outcome> {
        // The job's secret (netmod handshakes and heartbeats), new for every job, to every rank.
        let secret = nemesis_shm::auth::JobSecret::generate()?;
        self.env.push((nemesis_shm::auth::ENV_JOB_SECRET.into(), secret.to_hex().into()));
        // Pretend nodes on this host talk over loopback unless told otherwise: nothing listens on
        // an address other hosts reach.
        for (addr, iface) in [
            (contract::ENV_TCP_ADDR, contract::ENV_TCP_IF),
            (contract::ENV_OFI_HEARTBEAT_ADDR, contract::ENV_OFI_HEARTBEAT_IF),
        ] {
            let netmod = self.nodes > 1 || self.universe() > self.ranks;
            if netmod && !self.sets(addr) && !self.sets(iface) {
                self.env.push((addr.into(), "127.0.0.1".into()));
            }
        }
        if self.ranks == 0 {
            return Err(Error::Config("a job needs at least one rank (-n 1 or more)".into()));
        }
        if self.program.is_empty() {
            return Err(Error::Config("no program to run".into()));
        }
        let node = self.node_id_or_local()?;
        let nodes = plan_nodes(self.ranks, &node, self.nodes)?;
        let plan = self.plan()?;
        if let Some(p) = &plan
            && !p.machine.source.is_this_machine()
            && p.bind != Bind::None
        {
            return Err(Error::Config(format!(
                "cannot bind ranks to a topology that is not this machine's ({}): unset it, or print the plan with --dry-run",
                p.machine.source
            )));
        }
        if let Some(p) = &plan {
            if p.oversubscribed() {
                tracing::warn!(ranks = self.ranks, pus = p.machine.pus.len(), "more ranks than PUs: ranks share PUs");
            }
            if self.report_bindings {
                let allowed = topology::allowed_cpus()?;
                for r in 0..self.ranks as usize {
                    crate::say!("nemesis-run: rank {r}: {}", p.describe(r, &allowed));
                }
            }
        }
        if let Some(file) = &self.comm_matrix {
            let file = std::path::absolute(file).map_err(|e| Error::Config(format!("--comm-matrix: {e}")))?;
            self.env.push((contract::ENV_COMM_MATRIX.into(), file.into()));
        }
        let ft = match &self.ft {
            Some(g) => Some(ft::setup(g, self.ranks, &self.env)?),
            None => None,
        };
        let mut recovery = None;
        if let Some(f) = &ft {
            self.env.extend(f.env.iter().map(|(k, v)| (k.into(), v.into())));
            // Between pretend nodes the TCP netmod reconnects to restarted ranks; the ofi netmod
            // cannot (yet): there a death ends the job.
            let ofi = self.env.iter().rev().find(|(k, _)| k == contract::ENV_NETMOD).map_or_else(
                || std::env::var(contract::ENV_NETMOD).is_ok_and(|v| v.trim() == "ofi"),
                |(_, v)| v.to_str().is_some_and(|v| v.trim() == "ofi"),
            );
            if self.nodes == 1 || !ofi {
                self.env.push((contract::ENV_FT_RECOVERY.into(), self.ft_recovery.name().into()));
                recovery = Some(recovery::Recovery::new(f.group_of.clone(), self.ft_recovery, self.ft_max_restarts)?);
            } else {
                tracing::warn!("fault tolerance over the ofi netmod runs failure-free: a death ends the job");
            }
        }
        let outcome = self.start(nodes, plan, recovery);
        if let Some(f) = ft {
            f.finish();
        }
        outcome
    }

    /// Creates the segments and runs the ranks of `nodes`.
    fn start(self, nodes: Vec<NodePlan>, plan: Option<Plan>, recovery: Option<recovery::Recovery>) -> Result<Outcome> {
        let node = nodes.first().map(|n| n.id.clone()).unwrap_or_default();
        let params = Params::from_env()?;
        let mut segments = Vec::with_capacity(nodes.len());
        for n in &nodes {
            let local = u16::try_from(n.ranks.len())
                .map_err(|_| Error::Config(format!("{} ranks on node {}: too many", n.ranks.len(), n.id)))?;
            // Each rank's memory in the segment on its NUMA node, where the plan binds it to one.
            let numa: Vec<Option<u32>> =
                n.ranks.iter().map(|&r| plan.as_ref().and_then(|p| p.numa_node(r as usize))).collect();
            if numa.iter().any(Option::is_some) {
                let (seg, refused) = Segment::create_placed(local, params, &numa)?;
                if let Some(e) = refused {
                    tracing::warn!(error = %e, "NUMA placement of the segment refused (mbind): memory stays where the kernel puts it");
                }
                segments.push(seg);
            } else {
                segments.push(Segment::create(local, params, Backing::Memfd)?);
            }
        }
        tracing::info!(
            ranks = self.ranks,
            node = %node,
            program = %self.program.to_string_lossy(),
            "starting job"
        );
        supervise::run(self, nodes, segments, plan, recovery)
    }
}

/// The ranks of one node id.
#[derive(Debug, Clone)]
pub(crate) struct NodePlan {
    pub id: String,
    /// Global ranks, in order: index = local rank.
    pub ranks: Vec<u32>,
}

/// Splits `n` ranks over `k` node ids in blocks whose sizes differ by at most one (node `i` gets
/// ranks `i·n/k .. (i+1)·n/k`); with one node, its id is `node` itself, else `node.i`.
fn plan_nodes(n: u32, node: &str, k: u32) -> Result<Vec<NodePlan>> {
    if k == 0 || k > n {
        return Err(Error::Config(format!("{k} nodes for {n} ranks: every node needs a rank (1 <= K <= N)")));
    }
    if k == 1 {
        return Ok(vec![NodePlan { id: node.to_owned(), ranks: (0..n).collect() }]);
    }
    let (n64, k64) = (u64::from(n), u64::from(k));
    Ok((0..k64)
        .map(|i| NodePlan {
            id: contract::sanitize_node_id(&format!("{node}.{i}")),
            ranks: ((i * n64 / k64) as u32..((i + 1) * n64 / k64) as u32).collect(),
        })
        .collect())
}

/// How one rank ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RankExit {
    /// Its rank.
    pub rank: u32,
    /// Its process id.
    pub pid: u32,
    /// Its wait status.
    pub status: ExitStatus,
    /// True if the launcher had signalled it (teardown) before it ended.
    pub stopped_by_launcher: bool,
}

impl RankExit {
    /// Its exit code as a shell reports it: the code, or 128 + the signal that killed it.
    pub fn code(&self) -> i32 {
        status_code(&self.status)
    }

    /// What happened, as printed by the launcher: `exited with code 2`, `killed by signal 9`.
    pub fn describe(&self) -> String {
        match (self.status.code(), self.status.signal()) {
            (Some(c), _) => format!("exited with code {c}"),
            (None, Some(s)) => format!("killed by signal {s}"),
            _ => format!("ended with wait status {:#x}", self.status.into_raw()),
        }
    }
}

fn status_code(s: &ExitStatus) -> i32 {
    match (s.code(), s.signal()) {
        (Some(c), _) => c,
        (None, Some(sig)) => 128 + sig,
        _ => 1,
    }
}

/// Why a job ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Ending {
    /// Every rank ended by itself (some may have failed, with [`Job::keep_going`]).
    Completed,
    /// `rank` failed and the launcher ended the others.
    RankFailed {
        /// The rank whose failure ended the job.
        rank: u32,
    },
    /// `rank` called PMI `abort`.
    Aborted {
        /// The rank that aborted.
        rank: u32,
        /// The code it asked for.
        code: i32,
        /// Its message.
        message: String,
    },
    /// The launcher received `signal` (SIGINT or SIGTERM) and ended the job.
    Interrupted {
        /// The signal number.
        signal: i32,
    },
}

/// How a job ended: every rank's exit and the reason.
#[derive(Debug, Clone)]
pub struct Outcome {
    ranks: Vec<RankExit>,
    ending: Ending,
    /// Index into `ranks` of the first rank seen failing on its own (not stopped by us).
    first_failure: Option<usize>,
}

impl Outcome {
    /// Every rank's exit, by rank.
    pub fn ranks(&self) -> &[RankExit] {
        &self.ranks
    }

    /// Why the job ended.
    pub fn ending(&self) -> &Ending {
        &self.ending
    }

    /// The first rank seen failing on its own, if any.
    pub fn first_failure(&self) -> Option<&RankExit> {
        self.first_failure.map(|i| &self.ranks[i])
    }

    /// The launcher's exit code: 128 + the signal if interrupted; the requested code (0–255,
    /// else 1) if a rank aborted; else the first failing rank's [`RankExit::code`]; else 0.
    pub fn exit_code(&self) -> i32 {
        match &self.ending {
            Ending::Interrupted { signal } => 128 + signal,
            Ending::Aborted { code, .. } => {
                if (0..=255).contains(code) {
                    *code
                } else {
                    1
                }
            }
            _ => self.first_failure().map_or(0, RankExit::code),
        }
    }

    /// True if every rank exited with code 0 and nothing ended the job early.
    pub fn success(&self) -> bool {
        self.exit_code() == 0 && self.ending == Ending::Completed
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ranks_split_into_blocks_over_nodes() {
        let one = plan_nodes(4, "h", 1).unwrap();
        assert_eq!((one.len(), one[0].id.as_str(), one[0].ranks.clone()), (1, "h", vec![0, 1, 2, 3]));
        let three = plan_nodes(8, "h", 3).unwrap();
        let ids: Vec<&str> = three.iter().map(|n| n.id.as_str()).collect();
        assert_eq!(ids, ["h.0", "h.1", "h.2"]);
        let ranks: Vec<Vec<u32>> = three.iter().map(|n| n.ranks.clone()).collect();
        assert_eq!(ranks, [vec![0, 1], vec![2, 3, 4], vec![5, 6, 7]]);
        assert!(matches!(plan_nodes(2, "h", 3), Err(Error::Config(_))));
        assert!(matches!(plan_nodes(2, "h", 0), Err(Error::Config(_))));
    }
}
