//! Start-up: who am I, who shares my node, and the node's segment (`shared/ARCHITECTURE.md`,
//! "Bootstrap" and "The shared segment"; the reasoning is in `docs/design/launcher.md`, "A rank's
//! start-up").
//!
//! [`choose`] picks the process manager interface from the environment (`NEMESIS_PMI`, else PMIx,
//! PMI-2, PMI-1 or a singleton by what is set); then, over any of them ([`ProcessManager`]):
//! 1. **placement**: the ranks of this node, from the process manager's mapping or from every
//!    rank's node id put in the KVS (both also give every rank's node: [`Boot::leaders`]);
//! 2. the lowest rank of a node finds the launcher's segment (`segment_key(node)`,
//!    [`crate::contract`]) or creates a named one and publishes it; barrier;
//! 3. every rank attaches and registers; barrier; a name, if any, is unlinked.
//!
//! Over several nodes each rank also starts the netmod and publishes its business card
//! (`card_key`) before the second barrier.
//!
//! What holds:
//! - Never several singletons that each believe they are the job: an environment that shows a job
//!   of several processes without a process manager to reach is an error naming what is missing.
//! - Nothing stays in `/dev/shm`: a named segment is unlinked once every rank attached, and by any
//!   rank whose start-up fails after it created or attached it.
//! - A singleton has a private memfd segment.

use std::os::fd::{FromRawFd, OwnedFd, RawFd};
use std::sync::atomic::{AtomicBool, Ordering::Relaxed};

use nemesis_shm::auth::{JobSecret, KVS_JOB_SECRET};
use nemesis_shm::netmod::Netmod;
use nemesis_shm::{Backing, Node, Params, Segment};

use crate::contract::{
    ENV_FT_RESTART, ENV_LAUNCHER, ENV_LOCALITY, ENV_NODE, ENV_PMI, HANDLE_FD, HANDLE_SHM, LAUNCHER_NAME, local_node_id,
    node_key, segment_key,
};
use crate::error::{Error, Result};
use crate::net::{Net, NetKind};
use crate::pmi::{Pmi2Client, PmiClient, ProcessManager};
#[cfg(feature = "hwloc")]
use crate::topology::Machine;
use crate::topology::distance::Locality;

/// What start-up found out.
#[derive(Debug)]
pub struct Boot {
    /// This process's rank in the job.
    pub rank: u32,
    /// Number of ranks in the job.
    pub size: u32,
    /// This node's id.
    pub node: String,
    /// Global ranks on this node, in rank order: index = local rank.
    pub local_ranks: Vec<u32>,
    /// The node of every rank of the job, named by its lowest rank (as `local_ranks[0]` is on
    /// each node), when the process manager or the node ids in its key-value space tell it: a
    /// restarted rank learns it without its peers (`None` under PMIx).
    pub leaders: Option<Vec<u32>>,
    /// This process's local rank.
    pub local_rank: u16,
    /// The node's segment, attached and registered.
    pub segment: Segment,
    /// The process manager connection (`None` for a singleton).
    pub pmi: Option<ProcessManager>,
    /// The network module, if ranks are on other nodes.
    pub net: Option<Net<'static>>,
    /// Every local rank's locality, by local rank, as the ranks published them (with the `hwloc`
    /// feature, when the launcher gave none in `NEMESIS_LOCALITY`): the pair distances under
    /// any process manager.
    pub localities: Option<Vec<Locality>>,
}

/// The KVS key of rank `rank`'s locality.
fn locality_key(rank: u32) -> String {
    format!("nemesis-loc-{rank}")
}

/// This process's locality, read from the machine's topology and its own CPU set, if it must
/// publish it: with the `hwloc` feature (the affinity fallback numbers CPUs per process, so its
/// localities cannot be compared between ranks), when the launcher gave no localities, and when
/// the process is bound to some of the machine's CPUs (the process manager bound it: `srun
/// --cpu-bind`, `mpiexec.hydra -bind-to`); an unbound rank floats, its distances are unknown.
fn own_locality() -> Option<Locality> {
    if std::env::var(ENV_LOCALITY).is_ok_and(|v| !v.trim().is_empty()) {
        return None;
    }
    #[cfg(feature = "hwloc")]
    {
        let cpus = crate::topology::allowed_cpus().ok()?;
        let online = std::fs::read_to_string("/sys/devices/system/cpu/online").ok()?;
        if cpus.len() >= crate::topology::parse_cpu_list(online.trim())?.len() {
            return None;
        }
        match Machine::load() {
            Ok(machine) => Some(machine.locality_of(&cpus)),
            Err(e) => {
                tracing::debug!(error = %e, "no topology: pair distances unknown");
                None
            }
        }
    }
    #[cfg(not(feature = "hwloc"))]
    {
        None
    }
}

/// The KVS key of rank `rank`'s netmod business card, at its former path.
pub use crate::contract::card_key;

/// The job's secret under a process manager other than `nemesis-run` (which hands its own in
/// the environment): rank 0 makes it (`getrandom`) and publishes it in the job's KVS, which only
/// the job's processes read; after a barrier every rank reads it. Every rank of a job with ranks
/// on several nodes calls this, at the same point.
fn job_secret(pm: &mut ProcessManager, rank: u32) -> Result<JobSecret> {
    if rank == 0 {
        let s = JobSecret::generate()?;
        pm.put(KVS_JOB_SECRET, &s.to_hex())?;
        pm.barrier()?;
        return Ok(s);
    }
    pm.barrier()?;
    let hex = pm.get_required(0, KVS_JOB_SECRET, "the job's secret")?;
    JobSecret::from_hex(&hex).map_err(|e| Error::Bootstrap(format!("the job's secret from rank 0: {e}")))
}

/// Set by the SIGUSR1 handler: a peer failed (Hydra's notice).
static FAILURE_NOTICE: AtomicBool = AtomicBool::new(false);

extern "C" fn on_failure_notice(_: libc::c_int) {
    // ORDERING: Relaxed; a hint read by the rank's own thread. Only an atomic store: async-signal
    // safe.
    FAILURE_NOTICE.store(true, Relaxed);
}

/// True once after Hydra signalled a peer's failure: time to look at the peers now.
pub fn take_failure_notice() -> bool {
    // ORDERING: Relaxed, see `on_failure_notice`.
    FAILURE_NOTICE.load(Relaxed) && FAILURE_NOTICE.swap(false, Relaxed)
}

/// Under Hydra (it sets `HYDI_CONTROL_FD`), a rank's failure is notified to the others with
/// SIGUSR1 (MPICH's convention with `-disable-auto-cleanup`), whose default action would kill
/// them. If the application left SIGUSR1 at its default, it becomes that notice. (Hydra 4.0.2
/// still tears the job down shortly after, whatever the ranks do.)
fn install_failure_notice() {
    if std::env::var_os("HYDI_CONTROL_FD").is_none() {
        return;
    }
    // SAFETY: we only read the current disposition, then install a handler that stores to an
    // atomic (async-signal safe) if the disposition was the default.
    unsafe {
        let mut old: libc::sigaction = std::mem::zeroed();
        if libc::sigaction(libc::SIGUSR1, std::ptr::null(), &mut old) != 0 || old.sa_sigaction != libc::SIG_DFL {
            return;
        }
        let mut sa: libc::sigaction = std::mem::zeroed();
        sa.sa_sigaction = on_failure_notice as extern "C" fn(libc::c_int) as usize;
        sa.sa_flags = libc::SA_RESTART;
        libc::sigemptyset(&mut sa.sa_mask);
        libc::sigaction(libc::SIGUSR1, &sa, std::ptr::null_mut());
    }
}

/// The process manager interface chosen, and why (logged at `NEMESIS_LOG=info`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Choice {
    /// No process manager: a job of one.
    Singleton(String),
    /// PMI-1 over `PMI_FD`.
    Pmi1(String),
    /// PMI-2 over `PMI_FD`.
    Pmi2(String),
    /// PMIx through `libpmix`.
    Pmix(String),
}

/// Variables that show this process is one of several, in the order they are looked at: a job
/// without a reachable process manager must fail rather than run as a lone singleton.
const MULTI_PROCESS_HINTS: [&str; 5] =
    ["PMI_SIZE", "SLURM_STEP_NUM_TASKS", "SLURM_NTASKS", "OMPI_COMM_WORLD_SIZE", "MPI_LOCALNRANKS"];

/// Chooses the interface from the environment (`env` looks a variable up): `NEMESIS_PMI`
/// (`auto`, `1`, `2`, `pmix`, `singleton`) if set, else PMIx when `PMIX_NAMESPACE` is set, PMI-2
/// over `PMI_FD` when asked (`PMI_VERSION=2`, or Slurm's `SLURM_MPI_TYPE=pmi2`), PMI-1 over
/// `PMI_FD`, else a singleton, unless the environment shows a job of several processes, which is
/// an error naming what was found and what is missing.
pub fn choose(env: &dyn Fn(&str) -> Option<String>) -> Result<Choice> {
    let set = |v: &str| env(v).filter(|x| !x.trim().is_empty());
    let wanted = set(ENV_PMI).map(|v| v.trim().to_ascii_lowercase()).unwrap_or_else(|| "auto".into());
    let fd = set("PMI_FD");
    let pmix = set("PMIX_NAMESPACE");
    let under_nemesis_run = env(ENV_LAUNCHER).is_some_and(|v| v == LAUNCHER_NAME);
    let no_pmix_feature = |ns: &str| {
        Error::Bootstrap(format!(
            "launched by a PMIx process manager (PMIX_NAMESPACE={ns}) but built without the `pmix` feature: \
             rebuild nemesis with `--features pmix`, or launch with PMI-1/PMI-2 (srun --mpi=pmi2, mpiexec.hydra)"
        ))
    };
    match wanted.as_str() {
        "auto" => {}
        "singleton" | "none" => return Ok(Choice::Singleton("NEMESIS_PMI=singleton".into())),
        "1" | "pmi1" | "pmi-1" | "2" | "pmi2" | "pmi-2" => {
            let two = wanted.contains('2');
            if fd.is_none() {
                return Err(Error::Bootstrap(format!(
                    "NEMESIS_PMI={wanted} asks for PMI-{} but PMI_FD is not set: no PMI process manager started this process",
                    if two { 2 } else { 1 }
                )));
            }
            let why = format!("NEMESIS_PMI={wanted}");
            return Ok(if two { Choice::Pmi2(why) } else { Choice::Pmi1(why) });
        }
        "pmix" => {
            let Some(ns) = pmix else {
                return Err(Error::Bootstrap(
                    "NEMESIS_PMI=pmix but PMIX_NAMESPACE is not set: no PMIx server started this process".into(),
                ));
            };
            if !cfg!(feature = "pmix") {
                return Err(no_pmix_feature(&ns));
            }
            return Ok(Choice::Pmix(format!("NEMESIS_PMI=pmix, PMIX_NAMESPACE={ns}")));
        }
        other => {
            return Err(Error::Config(format!("NEMESIS_PMI={other}: expected auto, 1, 2, pmix or singleton")));
        }
    }
    if let Some(ns) = pmix.as_ref().filter(|_| !under_nemesis_run) {
        if cfg!(feature = "pmix") {
            return Ok(Choice::Pmix(format!("PMIX_NAMESPACE={ns}")));
        }
        if fd.is_none() {
            return Err(no_pmix_feature(ns));
        }
        // A PMI descriptor as well: that one we can speak (and say what we passed over).
        tracing::info!(namespace = %ns, "PMIX_NAMESPACE is set but this build has no PMIx client: using PMI_FD");
    }
    if fd.is_some() {
        let version = set("PMI_VERSION").map(|v| v.trim().to_owned());
        return Ok(match (version.as_deref(), set("SLURM_MPI_TYPE").as_deref().map(str::trim)) {
            (Some("2"), _) => Choice::Pmi2(format!("PMI_FD, PMI_VERSION=2{}", subversion(&set))),
            (Some("1"), _) => Choice::Pmi1(format!("PMI_FD, PMI_VERSION=1{}", subversion(&set))),
            (_, Some("pmi2")) => Choice::Pmi2("PMI_FD, SLURM_MPI_TYPE=pmi2".into()),
            _ => Choice::Pmi1("PMI_FD".into()),
        });
    }
    if let Some(port) = set("PMI_PORT") {
        return Err(Error::Bootstrap(format!(
            "started with PMI_PORT={port} (Hydra's -pmi-port), which nemesis does not speak: launch without -pmi-port (PMI_FD)"
        )));
    }
    for var in MULTI_PROCESS_HINTS {
        // A batch step's SLURM_NTASKS speaks of the allocation; within a step, its own count.
        if var == "SLURM_NTASKS" && set("SLURM_STEP_NUM_TASKS").is_some() {
            continue;
        }
        let Some(v) = set(var) else { continue };
        if v.trim().parse::<u64>().is_ok_and(|n| n > 1) {
            let lacks = if var.starts_with("SLURM") {
                "Slurm gave it no process manager interface (neither PMI_FD nor PMIX_NAMESPACE is set): \
                 launch with srun --mpi=pmi2 or srun --mpi=pmix"
            } else if var.starts_with("OMPI") {
                "Open MPI's launcher gave it no PMIx server (PMIX_NAMESPACE is not set)"
            } else {
                "neither PMI_FD nor PMIX_NAMESPACE is set, so no process manager can be reached"
            };
            return Err(Error::Bootstrap(format!(
                "this process is one of {} ({var}={}) but {lacks}; set NEMESIS_PMI=singleton to run it alone anyway",
                v.trim(),
                v.trim()
            )));
        }
    }
    Ok(Choice::Singleton("no process manager variables".into()))
}

fn subversion(set: &dyn Fn(&str) -> Option<String>) -> String {
    set("PMI_SUBVERSION").map(|s| format!(", PMI_SUBVERSION={}", s.trim())).unwrap_or_default()
}

/// Connects to the process manager `choice` names (`None` for a singleton).
fn connect(choice: &Choice) -> Result<Option<ProcessManager>> {
    Ok(match choice {
        Choice::Singleton(_) => None,
        Choice::Pmi1(_) => PmiClient::from_env()?.map(ProcessManager::Pmi1),
        Choice::Pmi2(_) => Pmi2Client::from_env()?.map(ProcessManager::Pmi2),
        #[cfg(feature = "pmix")]
        Choice::Pmix(_) => Some(ProcessManager::Pmix(crate::pmi::pmix::PmixClient::from_env()?)),
        #[cfg(not(feature = "pmix"))]
        Choice::Pmix(_) => return Err(Error::Bootstrap("PMIx chosen in a build without the `pmix` feature".into())),
    })
}

/// Runs the start-up sequence of the module documentation.
pub fn bootstrap() -> Result<Boot> {
    let choice = choose(&|v| std::env::var(v).ok())?;
    // A rank `nemesis-run --ft` restarts after a failure joins a running job: the others are past
    // the start-up barriers, and everything it reads from the key-value space is there already.
    let restarted = std::env::var_os(ENV_FT_RESTART).is_some();
    if matches!(choice, Choice::Pmi1(_) | Choice::Pmi2(_)) {
        crate::hygiene::check_pmi_fd()?;
    }
    let Some(mut pm) = connect(&choice)? else {
        if let Choice::Singleton(why) = &choice {
            tracing::info!(why = %why, "bootstrap: singleton");
        }
        return singleton();
    };
    // `nemesis-run`'s secret for the job, read before it leaves the environment.
    let given_secret = JobSecret::from_env()?;
    // Before any thread of ours starts (the netmod's): programs this rank starts inherit neither
    // the channel nor its variables (nor the secret).
    crate::hygiene::seal_pmi_channel()?;
    let (rank, size) = (pm.rank(), pm.size());
    // Under `nemesis-run --universe-size` the job may grow: the bootstrap meets this process's
    // world only (`NEMESIS_WORLD`). Ranks beyond it are not started yet, and those started later
    // connect to this one; ranks before it (the parents, other spawns, perhaps still starting
    // and not yet published) are met when a connection needs them (`Endpoint::learn_peer`).
    let world = std::env::var(crate::contract::ENV_WORLD)
        .ok()
        .and_then(|v| crate::contract::parse_world(&v))
        .map_or(0..size, |(first, count)| first.min(size)..(first + count).min(size));
    if rank == 0 {
        tracing::info!(interface = %pm.name(), size, why = ?choice, "bootstrap");
    } else {
        tracing::debug!(interface = %pm.name(), rank, size, "bootstrap");
    }
    install_failure_notice();
    let explicit_node = std::env::var(ENV_NODE).is_ok_and(|v| !v.trim().is_empty());
    let placed = if explicit_node { None } else { pm.placement()? };
    let (node, local_ranks, leaders) = match placed {
        Some(p) => {
            tracing::debug!(rank, node = %p.node, local = ?p.local_ranks, "placement from the process manager");
            (p.node, p.local_ranks, p.leaders)
        }
        None => {
            // Node ids through the key-value space: ranks with the same id share a node.
            let node = local_node_id()?;
            pm.put(&node_key(rank), &node)?;
            if !restarted {
                pm.barrier()?;
            }
            let mut ids = Vec::with_capacity(world.len());
            for r in world.clone() {
                ids.push(if r == rank { node.clone() } else { pm.get_required(r, &node_key(r), "node id")? });
            }
            let local_ranks = world.clone().zip(&ids).filter(|(_, n)| **n == node).map(|(r, _)| r).collect();
            // Every rank's node (by its lowest rank), which a restarted rank could not gather
            // from the others; a rank of another world counts as a node of its own.
            let mut leaders: Vec<u32> = (0..size).collect();
            for (r, l) in world.clone().zip(crate::pmi::leaders_of(&ids)) {
                leaders[r as usize] = world.start + l;
            }
            (node, local_ranks, Some(leaders))
        }
    };
    let local_rank = local_ranks
        .iter()
        .position(|&r| r == rank)
        .ok_or_else(|| Error::Bootstrap(format!("{}: this rank is missing from its own node", pm.name())))?;
    let local_rank = u16::try_from(local_rank).map_err(|_| Error::Bootstrap("too many ranks on one node".into()))?;
    let local_size =
        u16::try_from(local_ranks.len()).map_err(|_| Error::Bootstrap("too many ranks on one node".into()))?;
    let leader = local_ranks[0];
    let key = segment_key(&node);
    let under_nemesis_run = std::env::var(ENV_LAUNCHER).is_ok_and(|v| v == LAUNCHER_NAME);
    let mut created = None;
    // Only `nemesis-run` pre-puts segments; asking another server for a key nobody put may wait
    // for a fence (Hydra's PMI-2).
    if local_rank == 0 && !(under_nemesis_run && pm.get(rank, &key)?.is_some()) {
        let seg = Segment::create(local_size, Params::from_env()?, Backing::Named)?;
        let name = seg.name().unwrap_or_default().to_owned();
        if let Err(e) = pm.put(&key, &format!("{HANDLE_SHM}{name}")) {
            let _ = seg.unlink();
            return Err(e);
        }
        tracing::debug!(%node, %name, ranks = local_size, "created the node segment");
        created = Some(seg);
    }
    let own = own_locality();
    if let Some(l) = &own {
        pm.put(&locality_key(rank), &l.encode())?;
    }
    let mut net = None;
    if local_ranks.len() < size as usize {
        let secret = match given_secret {
            Some(s) => s,
            // Made with a barrier, which a restarted rank's peers, long past it, would not join.
            None if restarted => {
                return Err(Error::Bootstrap("a restarted rank needs the job's secret from its launcher".into()));
            }
            None => job_secret(&mut pm, rank)?,
        };
        let n = Net::start(NetKind::from_env()?, rank, size, secret)?;
        tracing::debug!(rank, card = %n.card(), "netmod listening");
        pm.put(&card_key(rank), &n.card())?;
        net = Some(n);
    }
    if !restarted {
        pm.barrier()?;
    }
    if let Some(n) = net.as_mut() {
        for r in world.clone().filter(|r| !local_ranks.contains(r)) {
            if restarted {
                // A rank restarted with this one has not put its new card yet (the launcher
                // removed its old one): the launcher tells it through its channel.
                match pm.get(r, &card_key(r))? {
                    Some(card) => n.connect(r, &card)?,
                    None => tracing::debug!(rank = r, "no card yet: restarted with this rank"),
                }
                continue;
            }
            let card = pm.get_required(r, &card_key(r), "netmod business card")?;
            n.connect(r, &card)?;
        }
    }
    let segment = match created {
        Some(seg) => seg,
        None => attach(&pm.get_required(leader, &key, &format!("segment for node {node}"))?)?,
    };
    if segment.layout().ranks != local_size {
        return Err(Error::Bootstrap(format!(
            "the segment of node {node} was made for {} ranks, the node has {local_size}",
            segment.layout().ranks
        )));
    }
    let localities = match own {
        Some(_) => {
            let mut all = Vec::with_capacity(local_ranks.len());
            for &r in &local_ranks {
                // A peer that published none (another build) leaves every distance unknown.
                match pm.get(r, &locality_key(r))?.as_deref().and_then(Locality::decode) {
                    Some(l) => all.push(l),
                    None => break,
                }
            }
            (all.len() == local_ranks.len()).then_some(all)
        }
        None => None,
    };
    segment.register(local_rank)?;
    if let Some(n) = net.as_mut() {
        // Which incarnation of its rank number this process is (the launcher counts them in the
        // segment when it restarts a rank): its connections say so.
        n.set_incarnation(segment.state_of(local_rank)?.incarnation());
    }
    if !restarted {
        pm.barrier()?;
    }
    // Every rank attached: the name goes now, whoever registered last (a rank that died before
    // registering would have left it).
    segment.unlink()?;
    tracing::debug!(rank, size, %node, local_rank, local_size, "bootstrap done");
    Ok(Boot { rank, size, node, local_ranks, leaders, local_rank, segment, pmi: Some(pm), net, localities })
}

/// Attaches to a published segment handle: `fd:<n>` (inherited) or `shm:<name>`.
fn attach(handle: &str) -> Result<Segment> {
    if let Some(n) = handle.strip_prefix(HANDLE_FD) {
        let fd: RawFd = n.parse().map_err(|_| Error::Bootstrap(format!("bad segment handle {handle}")))?;
        // SAFETY: `nemesis-run` created this descriptor and every rank inherited it; this process
        // takes ownership of its copy and nothing else uses it.
        let owned = unsafe { OwnedFd::from_raw_fd(fd) };
        Ok(Segment::attach_fd(owned)?)
    } else if let Some(name) = handle.strip_prefix(HANDLE_SHM) {
        Ok(Segment::attach_named(name)?)
    } else {
        Err(Error::Bootstrap(format!("bad segment handle {handle}")))
    }
}

fn singleton() -> Result<Boot> {
    let segment = Segment::create(1, Params::from_env()?, Backing::Memfd)?;
    segment.register(0)?;
    Ok(Boot {
        rank: 0,
        size: 1,
        node: local_node_id()?,
        local_ranks: vec![0],
        leaders: Some(vec![0]),
        local_rank: 0,
        segment,
        pmi: None,
        net: None,
        localities: None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn choice(vars: &[(&str, &str)]) -> Result<Choice> {
        let vars: Vec<(String, String)> = vars.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
        choose(&|name| vars.iter().find(|(k, _)| k == name).map(|(_, v)| v.clone()))
    }

    fn err(vars: &[(&str, &str)]) -> String {
        choice(vars).unwrap_err().to_string()
    }

    #[test]
    fn the_interface_follows_the_environment() {
        assert!(matches!(choice(&[]).unwrap(), Choice::Singleton(_)));
        assert!(matches!(choice(&[("PMI_FD", "5"), ("PMI_SIZE", "4")]).unwrap(), Choice::Pmi1(_)));
        assert!(matches!(choice(&[("PMI_FD", "5"), ("PMI_VERSION", "2")]).unwrap(), Choice::Pmi2(_)));
        assert!(matches!(choice(&[("PMI_FD", "5"), ("NEMESIS_PMI", "2")]).unwrap(), Choice::Pmi2(_)));
        assert!(matches!(choice(&[("PMI_FD", "5"), ("SLURM_MPI_TYPE", "pmi2")]).unwrap(), Choice::Pmi2(_)));
        // Asked for explicitly, NEMESIS_PMI wins.
        let c = choice(&[("PMI_FD", "5"), ("SLURM_MPI_TYPE", "pmi2"), ("NEMESIS_PMI", "1")]).unwrap();
        assert_eq!(c, Choice::Pmi1("NEMESIS_PMI=1".into()));
        assert!(matches!(
            choice(&[("PMI_FD", "5"), ("PMI_VERSION", "1"), ("SLURM_MPI_TYPE", "pmi2")]).unwrap(),
            Choice::Pmi1(_)
        ));
        assert!(matches!(
            choice(&[("SLURM_NTASKS", "4"), ("NEMESIS_PMI", "singleton")]).unwrap(),
            Choice::Singleton(_)
        ));
        assert!(matches!(choice(&[("NEMESIS_PMI", "7")]), Err(Error::Config(_))));
        assert!(err(&[("NEMESIS_PMI", "2")]).contains("PMI_FD is not set"));
        assert!(err(&[("NEMESIS_PMI", "pmix")]).contains("PMIX_NAMESPACE is not set"));
        // nemesis-run's ranks ignore a PMIx namespace inherited from the launcher's own job.
        let c = choice(&[("PMI_FD", "5"), ("PMIX_NAMESPACE", "ns"), ("NEMESIS_LAUNCHER", "nemesis-run")]).unwrap();
        assert!(matches!(c, Choice::Pmi1(_)), "{c:?}");
        if cfg!(feature = "pmix") {
            assert!(matches!(choice(&[("PMIX_NAMESPACE", "ns"), ("PMIX_RANK", "0")]).unwrap(), Choice::Pmix(_)));
        } else {
            let e = err(&[("PMIX_NAMESPACE", "slurm.pmix.3.0"), ("PMIX_RANK", "0")]);
            assert!(e.contains("PMIX_NAMESPACE=slurm.pmix.3.0") && e.contains("without the `pmix` feature"), "{e}");
            // A PMI descriptor as well: that one is used.
            assert!(matches!(choice(&[("PMIX_NAMESPACE", "ns"), ("PMI_FD", "5")]).unwrap(), Choice::Pmi1(_)));
        }
    }

    #[test]
    fn a_job_of_several_without_a_process_manager_is_an_error() {
        let e = err(&[("SLURM_STEP_NUM_TASKS", "4"), ("SLURM_NTASKS", "4")]);
        assert!(e.contains("one of 4 (SLURM_STEP_NUM_TASKS=4)") && e.contains("srun --mpi=pmi2"), "{e}");
        assert!(err(&[("SLURM_NTASKS", "2")]).contains("SLURM_NTASKS=2"));
        assert!(err(&[("OMPI_COMM_WORLD_SIZE", "3")]).contains("no PMIx server"));
        assert!(err(&[("PMI_SIZE", "2")]).contains("neither PMI_FD nor PMIX_NAMESPACE"));
        assert!(err(&[("PMI_PORT", "host:4000"), ("PMI_SIZE", "2")]).contains("-pmi-port"));
        // A step of one task inside a larger allocation is a singleton.
        assert!(matches!(
            choice(&[("SLURM_STEP_NUM_TASKS", "1"), ("SLURM_NTASKS", "8")]).unwrap(),
            Choice::Singleton(_)
        ));
        assert!(matches!(choice(&[("OMPI_COMM_WORLD_SIZE", "1")]).unwrap(), Choice::Singleton(_)));
    }

    #[test]
    fn bad_handles_are_errors() {
        assert!(matches!(attach("nonsense"), Err(Error::Bootstrap(_))));
        assert!(matches!(attach("fd:x"), Err(Error::Bootstrap(_))));
        assert!(matches!(attach("shm:/no-such-nemesis-segment"), Err(Error::Shm(_))));
    }
}
