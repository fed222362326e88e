//! Start-up: who am I, who shares my node, and the node's segment (`shared/ARCHITECTURE.md`,
//! "Bootstrap" and "The shared segment").
//!
//! Under a PMI-1 process manager (our `nemesis-run`, MPICH's Hydra):
//! 1. every rank puts its node id (`NEMESIS_NODE`, else the host name) under
//!    `nemesis-node-<rank>`; barrier; each reads all of them: the ranks of its node, in rank
//!    order, are its local ranks;
//! 2. the lowest rank of a node looks up [`segment_key`]`(node)`: `nemesis-run` put `fd:<n>` there
//!    (a memfd every rank inherited as descriptor `n`); if nothing is there (Hydra), it creates a
//!    named segment (`shm_open`, `O_EXCL`, 0600, random name) and puts `shm:<name>`; barrier;
//! 3. every rank attaches, checks the segment was made for its node's rank count, registers
//!    (publishing its pid for peers' pidfd watches); barrier; the name, if any, is unlinked (the
//!    last rank to register already did; the node leader does it again in case a rank died
//!    before registering).
//!
//! Without a process manager (no `PMI_FD`) the process is a singleton of size 1 with a private
//! memfd segment.

use std::os::fd::{FromRawFd, OwnedFd, RawFd};

use nemesis_shm::{Backing, Params, Segment};

use crate::error::{Error, Result};
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
}

/// The KVS key under which a node's segment handle is published: short enough for every PMI
/// server's key limit (64) whatever the host name.
pub fn segment_key(node: &str) -> String {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in node.bytes() {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x0100_0000_01b3);
    }
    format!("nemesis-seg-{h:016x}")
}

/// The KVS key under which a rank publishes its node id.
pub fn node_key(rank: u32) -> String {
    format!("nemesis-node-{rank}")
}

/// This node's id: `NEMESIS_NODE`, else the host name, made a PMI-safe token.
pub fn node_id() -> Result<String> {
    let raw = match std::env::var("NEMESIS_NODE") {
        Ok(v) if !v.trim().is_empty() => v,
        _ => hostname()?,
    };
    Ok(sanitize(&raw))
}

/// Keeps `[A-Za-z0-9._-]`, replaces the rest with `_`, at most 64 characters.
pub fn sanitize(s: &str) -> String {
    s.trim().chars().take(64).map(|c| if c.is_ascii_alphanumeric() || "._-".contains(c) { c } else { '_' }).collect()
}

fn hostname() -> Result<String> {
    let mut buf = [0u8; 256];
    // SAFETY: gethostname writes at most `buf.len()` bytes into `buf`.
    if unsafe { libc::gethostname(buf.as_mut_ptr().cast(), buf.len()) } != 0 {
        return Err(Error::io("gethostname", std::io::Error::last_os_error()));
    }
    let end = buf.iter().position(|&b| b == 0).unwrap_or(buf.len());
    Ok(String::from_utf8_lossy(&buf[..end]).into_owned())
}

/// Runs the start-up sequence of the module documentation.
pub fn bootstrap() -> Result<Boot> {
    let Some(mut pmi) = PmiClient::from_env()? else {
        return singleton();
    };
    let (rank, size) = (pmi.rank(), pmi.size());
    let node = node_id()?;
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
        if let Err(e) = pmi.put(&key, &format!("shm:{name}")) {
            let _ = seg.unlink();
            return Err(e);
        }
        tracing::debug!(%node, %name, ranks = local_size, "created the node segment");
        created = Some(seg);
    }
    pmi.barrier()?;
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
    Ok(Boot { rank, size, node, local_ranks, local_rank, segment, pmi: Some(pmi) })
}

/// Attaches to a published segment handle: `fd:<n>` (inherited) or `shm:<name>`.
fn attach(handle: &str) -> Result<Segment> {
    if let Some(n) = handle.strip_prefix("fd:") {
        let fd: RawFd = n.parse().map_err(|_| Error::Bootstrap(format!("bad segment handle {handle}")))?;
        // SAFETY: `nemesis-run` created this descriptor and every rank inherited it; this process
        // takes ownership of its copy and nothing else uses it.
        let owned = unsafe { OwnedFd::from_raw_fd(fd) };
        Ok(Segment::attach_fd(owned)?)
    } else if let Some(name) = handle.strip_prefix("shm:") {
        Ok(Segment::attach_named(name)?)
    } else {
        Err(Error::Bootstrap(format!("bad segment handle {handle}")))
    }
}

fn singleton() -> Result<Boot> {
    let segment = Segment::create(1, Params::from_env()?, Backing::Memfd)?;
    segment.register(0)?;
    Ok(Boot { rank: 0, size: 1, node: node_id()?, local_ranks: vec![0], local_rank: 0, segment, pmi: None })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_are_short_and_tokens_clean() {
        let long = "a".repeat(300);
        assert!(segment_key(&long).len() <= 64);
        assert_ne!(segment_key("node1"), segment_key("node2"));
        assert_eq!(sanitize(" my host=1 "), "my_host_1");
        assert_eq!(sanitize(&long).len(), 64);
    }

    #[test]
    fn bad_handles_are_errors() {
        assert!(matches!(attach("nonsense"), Err(Error::Bootstrap(_))));
        assert!(matches!(attach("fd:x"), Err(Error::Bootstrap(_))));
        assert!(matches!(attach("shm:/no-such-nemesis-segment"), Err(Error::Shm(_))));
    }
}
