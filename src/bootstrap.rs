//! Start-up: who am I, who shares my node, and the node's segment (`shared/ARCHITECTURE.md`,
//! "Bootstrap" and "The shared segment").
//!
//! Under a PMI-1 process manager (our `nemesis-run`, MPICH's Hydra):
//! 1. every rank puts its node id (`NEMESIS_NODE`, else the host name) under
//!    `nemesis-node-<rank>`; barrier; each reads all of them: the ranks of its node, in rank
//!    order, are its local ranks;
//! 2. the lowest rank of a node looks up `segment_key(node)` (the launcher contract,
//!    `crate::launch::contract`): `nemesis-run` put `fd:<n>` there
//!    (a memfd every rank inherited as descriptor `n`); if nothing is there (Hydra), it creates a
//!    named segment (`shm_open`, `O_EXCL`, 0600, random name) and puts `shm:<name>`; barrier;
//! 3. every rank attaches, checks the segment was made for its node's rank count, registers
//!    (publishing its pid for peers' pidfd watches); barrier; the name, if any, is unlinked (the
//!    last rank to register already did; the node leader does it again in case a rank died
//!    before registering).
//!
//! When some ranks are on other nodes, each rank also starts the netmod (`NEMESIS_NETMOD`: TCP,
//! or libfabric with the `rdma` feature) and puts its business card under `nemesis-card-<rank>` before the second barrier; after it, each reads the cards of
//! the ranks on other nodes (connections are made on first use).
//!
//! Without a process manager (no `PMI_FD`) the process is a singleton of size 1 with a private
//! memfd segment.

use std::os::fd::{FromRawFd, OwnedFd, RawFd};
use std::sync::atomic::{AtomicBool, Ordering::Relaxed};

use nemesis_shm::netmod::Netmod;
use nemesis_shm::{Backing, Params, Segment};

use crate::error::{Error, Result};
use crate::launch::contract::{HANDLE_FD, HANDLE_SHM, local_node_id, node_key, segment_key};
use crate::net::{Net, NetKind};
use crate::pmi::PmiClient;

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
    /// This process's local rank.
    pub local_rank: u16,
    /// The node's segment, attached and registered.
    pub segment: Segment,
    /// The PMI connection (`None` for a singleton).
    pub pmi: Option<PmiClient>,
    /// The network module, if ranks are on other nodes.
    pub net: Option<Net<'static>>,
}

/// The KVS key of rank `rank`'s netmod business card.
pub fn card_key(rank: u32) -> String {
    format!("nemesis-card-{rank}")
}

/// A key naming the job, from its KVS name (FNV-1a): netmods refuse connections of other jobs.
fn job_key(kvsname: &str) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in kvsname.bytes() {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x0100_0000_01b3);
    }
    h
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

/// Runs the start-up sequence of the module documentation.
pub fn bootstrap() -> Result<Boot> {
    let Some(mut pmi) = PmiClient::from_env()? else {
        return singleton();
    };
    install_failure_notice();
    let (rank, size) = (pmi.rank(), pmi.size());
    let node = local_node_id()?;
    pmi.put(&node_key(rank), &node)?;
    pmi.barrier()?;
    let mut local_ranks = Vec::new();
    for r in 0..size {
        let n = if r == rank {
            node.clone()
        } else {
            pmi.get(&node_key(r))?.ok_or_else(|| Error::Bootstrap(format!("rank {r} published no node id")))?
        };
        if n == node {
            local_ranks.push(r);
        }
    }
    let local_rank = local_ranks
        .iter()
        .position(|&r| r == rank)
        .ok_or_else(|| Error::Bootstrap("this rank is missing from its own node".into()))?;
    let local_rank = u16::try_from(local_rank).map_err(|_| Error::Bootstrap("too many ranks on one node".into()))?;
    let local_size =
        u16::try_from(local_ranks.len()).map_err(|_| Error::Bootstrap("too many ranks on one node".into()))?;
    let key = segment_key(&node);
    let mut created = None;
    if local_rank == 0 && pmi.get(&key)?.is_none() {
        let seg = Segment::create(local_size, Params::from_env()?, Backing::Named)?;
        let name = seg.name().unwrap_or_default().to_owned();
        if let Err(e) = pmi.put(&key, &format!("{HANDLE_SHM}{name}")) {
            let _ = seg.unlink();
            return Err(e);
        }
        tracing::debug!(%node, %name, ranks = local_size, "created the node segment");
        created = Some(seg);
    }
    let mut net = None;
    if local_ranks.len() < size as usize {
        let n = Net::start(NetKind::from_env()?, rank, size, job_key(pmi.kvsname()))?;
        pmi.put(&card_key(rank), &n.card())?;
        net = Some(n);
    }
    pmi.barrier()?;
    if let Some(n) = net.as_mut() {
        for r in (0..size).filter(|r| !local_ranks.contains(r)) {
            let card = pmi.get(&card_key(r))?.ok_or_else(|| Error::Bootstrap(format!("rank {r} published no card")))?;
            n.connect(r, &card)?;
        }
    }
    let segment = match created {
        Some(seg) => seg,
        None => {
            let handle =
                pmi.get(&key)?.ok_or_else(|| Error::Bootstrap(format!("no segment published for node {node}")))?;
            attach(&handle)?
        }
    };
    if segment.layout().ranks != local_size {
        return Err(Error::Bootstrap(format!(
            "the segment of node {node} was made for {} ranks, the node has {local_size}",
            segment.layout().ranks
        )));
    }
    segment.register(local_rank)?;
    pmi.barrier()?;
    if local_rank == 0 {
        segment.unlink()?;
    }
    tracing::debug!(rank, size, %node, local_rank, local_size, "bootstrap done");
    Ok(Boot { rank, size, node, local_ranks, local_rank, segment, pmi: Some(pmi), net })
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
        local_rank: 0,
        segment,
        pmi: None,
        net: None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bad_handles_are_errors() {
        assert!(matches!(attach("nonsense"), Err(Error::Bootstrap(_))));
        assert!(matches!(attach("fd:x"), Err(Error::Bootstrap(_))));
        assert!(matches!(attach("shm:/no-such-nemesis-segment"), Err(Error::Shm(_))));
    }
}
