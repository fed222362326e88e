//! Clients of the process manager interfaces a nemesis rank can be started under, and the one
//! face the bootstrap sees of them ([`ProcessManager`]):
//!
//! - [`v1`]: PMI-1, the line protocol over `PMI_FD` that MPICH's Hydra and our `nemesis-run`
//!   serve (and Slurm's `pmi2` plugin answers too);
//! - [`v2`]: PMI-2, length-prefixed `;`-separated commands over the same descriptor, as Hydra and
//!   Slurm's `pmi2` plugin (`srun --mpi=pmi2`) serve it, and `nemesis-run` too;
//! - `pmix` (cargo feature `pmix`): PMIx through the system `libpmix`, for `srun --mpi=pmix` and
//!   Open MPI's or PRRTE's launchers.
//!
//! Which one a rank uses is decided by `crate::bootstrap` from the environment.

pub mod dynamic;
pub mod v1;
pub mod v2;

#[cfg(feature = "pmix")]
pub mod pmix;

pub use dynamic::SpawnCommand;
pub use v1::PmiClient;
pub use v2::Pmi2Client;

use crate::error::{Error, Result};

/// The process manager that started this process, guessed from the variables each sets, for
/// messages ("PMI-2 (Slurm)").
pub fn launcher() -> &'static str {
    let set = |v: &str| std::env::var_os(v).is_some();
    if std::env::var(crate::contract::ENV_LAUNCHER).is_ok_and(|v| v == crate::contract::LAUNCHER_NAME) {
        "nemesis-run"
    } else if set("HYDI_CONTROL_FD") || set("HYDRA_USER_PROVIDED_BINDING") {
        "Hydra"
    } else if set("SLURM_STEP_ID") || set("SLURM_JOB_ID") {
        "Slurm"
    } else if set("OMPI_COMM_WORLD_SIZE") || set("OMPI_MCA_orte_hnp_uri") {
        "Open MPI"
    } else if set("PRTE_LAUNCHED") || set("PRTE_MCA_prte_base_jobid") {
        "PRRTE"
    } else {
        "an unknown process manager"
    }
}

/// `"<interface> (<process manager>)"`, the name errors carry.
pub(crate) fn pm_label(interface: &str) -> String {
    format!("{interface} ({})", launcher())
}

/// The number in environment variable `name`.
pub(crate) fn env_num<T: std::str::FromStr>(pm: &str, name: &str) -> Result<T> {
    let v = std::env::var(name).map_err(|_| Error::pmi(pm, "environment", format!("{name} is not set")))?;
    v.trim().parse().map_err(|_| Error::pmi(pm, "environment", format!("{name}={v} is not a number")))
}

/// Refuses a key or value the wire protocol cannot carry: empty, longer than `max`, or holding
/// one of `forbidden`, a newline or a control character.
pub(crate) fn check_token(pm: &str, op: &'static str, what: &str, v: &str, max: usize, forbidden: &str) -> Result<()> {
    if v.is_empty() || v.len() > max || v.chars().any(|c| c.is_control() || forbidden.contains(c)) {
        return Err(Error::pmi(
            pm,
            op,
            format!("{what} {v:?} is empty, too long (max {max}) or holds one of {forbidden:?} or a control character"),
        ));
    }
    Ok(())
}

/// Longest reply line a PMI client reads: far above what any server sends (MPICH's simple PMI
/// reads lines of `PMIU_MAXLINE` = 1024 bytes; values are at most 1024 bytes, escaped at most
/// twice that), the same as PMI-2's longest message ([`v2::MESSAGE_MAX`]).
pub const REPLY_LINE_MAX: usize = 64 * 1024;

/// Reads one reply line of at most `max` bytes, its newline included: `Ok(None)` at end of file
/// before any byte; an error (naming `pm` and `op`, quoting at most 200 bytes of it) for a longer
/// line, one the connection cut short, or a failed read. Reads no further than `max + 1` bytes,
/// whatever the server sends.
pub(crate) fn read_line_bounded(
    r: &mut impl std::io::BufRead,
    max: usize,
    pm: &str,
    op: &'static str,
) -> Result<Option<String>> {
    use std::io::{BufRead as _, Read as _};
    let mut line = Vec::new();
    let n =
        r.take(max as u64 + 1).read_until(b'\n', &mut line).map_err(|e| Error::pmi(pm, op, format!("read: {e}")))?;
    if n == 0 {
        return Ok(None);
    }
    let text = String::from_utf8_lossy(&line).into_owned();
    let quoted = || {
        let mut cut = text.len().min(200);
        while !text.is_char_boundary(cut) {
            cut -= 1;
        }
        format!("{:?}{}", &text[..cut], if cut < text.len() { "..." } else { "" })
    };
    if !text.ends_with('\n') {
        let why = if line.len() > max {
            format!("a reply longer than {max} bytes ({})", quoted())
        } else {
            format!("the connection closed in the middle of a reply ({})", quoted())
        };
        return Err(Error::pmi(pm, op, why));
    }
    Ok(Some(text))
}

/// Writes all of `bytes` to the process manager's descriptor without raising SIGPIPE if it has
/// gone (a C program through `libmpi.so` keeps SIGPIPE's default action, which would kill it
/// silently); a closed connection is an error naming `pm` and `op`.
pub(crate) fn send_all(pm: &str, op: &'static str, fd: &impl std::os::fd::AsRawFd, bytes: &[u8]) -> Result<()> {
    let mut done = 0;
    while done < bytes.len() {
        let rest = &bytes[done..];
        // SAFETY: sends at most `rest.len()` bytes from `rest` on a descriptor we own.
        let mut n = unsafe { libc::send(fd.as_raw_fd(), rest.as_ptr().cast(), rest.len(), libc::MSG_NOSIGNAL) };
        if n < 0 && std::io::Error::last_os_error().raw_os_error() == Some(libc::ENOTSOCK) {
            // A pipe or a file: plain write (Rust programs ignore SIGPIPE anyway).
            // SAFETY: as above.
            n = unsafe { libc::write(fd.as_raw_fd(), rest.as_ptr().cast(), rest.len()) };
        }
        if n < 0 {
            let e = std::io::Error::last_os_error();
            match e.raw_os_error() {
                Some(libc::EINTR) => continue,
                Some(libc::EPIPE | libc::ECONNRESET) => {
                    return Err(Error::pmi(pm, op, "the process manager closed the connection".into()));
                }
                _ => return Err(Error::pmi(pm, op, format!("write: {e}"))),
            }
        }
        done += n as usize;
    }
    Ok(())
}

/// What a connected client knows: whom it speaks to, and its place in the job.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Session {
    /// The interface and the process manager, e.g. `PMI-2 (Slurm)`.
    pm: String,
    rank: u32,
    size: u32,
}

impl Session {
    pub(crate) fn new(pm: String, rank: u32, size: u32) -> Session {
        Session { pm, rank, size }
    }

    /// The interface and the process manager, e.g. `PMI-2 (Slurm)`: errors carry it.
    pub fn server(&self) -> &str {
        &self.pm
    }

    /// This process's rank in the job.
    pub fn rank(&self) -> u32 {
        self.rank
    }

    /// Number of processes in the job.
    pub fn size(&self) -> u32 {
        self.size
    }

    /// An error of operation `op` naming the process manager.
    pub(crate) fn err(&self, op: &'static str, msg: String) -> Error {
        Error::pmi(&self.pm, op, msg)
    }
}

/// Where the process manager placed the ranks: this rank's node and the ranks it shares it with.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Placement {
    /// A name of this node that every rank on it computes alike, and no rank elsewhere.
    pub node: String,
    /// The ranks on this node, in rank order (this rank among them).
    pub local_ranks: Vec<u32>,
    /// The node of every rank of the job, named by its lowest rank (as
    /// `Endpoint::node_leader`), when the process manager tells it (`PMI_process_mapping`).
    pub leaders: Option<Vec<u32>>,
}

/// The node index of every rank from a `PMI_process_mapping` value (MPICH's format, which Hydra
/// and Slurm publish): `(vector,(first node, node count, ranks per node),...)`; ranks are dealt in
/// order to the blocks, and the vector is dealt again from its start while ranks remain (that is
/// how a cyclic layout is written). `None` if the value is malformed or covers no rank.
pub fn node_of_ranks(mapping: &str, size: u32) -> Option<Vec<u32>> {
    let body = mapping.trim().strip_prefix('(')?.strip_suffix(')')?.trim();
    let rest = body.strip_prefix("vector")?;
    let mut blocks = Vec::new();
    for part in rest.split(')') {
        let part = part.trim().trim_start_matches(',').trim();
        if part.is_empty() {
            continue;
        }
        let nums: Vec<u32> =
            part.strip_prefix('(')?.split(',').map(|n| n.trim().parse().ok()).collect::<Option<_>>()?;
        let &[first, count, per] = nums.as_slice() else { return None };
        blocks.push((first, count, per));
    }
    if blocks.iter().all(|&(_, count, per)| count == 0 || per == 0) {
        return None;
    }
    let size = size as usize;
    let mut out = Vec::with_capacity(size);
    // Every step deals at least one rank (a block of empty nodes is skipped whole), so the work
    // is bounded by `size` and the blocks, whatever counts the value names.
    'deal: while out.len() < size {
        for &(first, count, per) in &blocks {
            if per == 0 {
                continue;
            }
            for node in first..first.checked_add(count)? {
                if out.len() == size {
                    break 'deal;
                }
                let take = (per as usize).min(size - out.len());
                out.extend(std::iter::repeat_n(node, take));
            }
        }
    }
    Some(out)
}

/// The placement of rank `rank` from a `PMI_process_mapping` value, with its node named
/// `<host>.<index>` (host names alone are not always unique: containers).
pub(crate) fn placement_from_mapping(mapping: &str, rank: u32, size: u32) -> Option<Placement> {
    let nodes = node_of_ranks(mapping, size)?;
    let mine = *nodes.get(rank as usize)?;
    let local_ranks = (0..size).filter(|&r| nodes[r as usize] == mine).collect();
    let host = crate::contract::hostname().unwrap_or_else(|_| "node".into());
    let node = crate::contract::sanitize_node_id(&format!("{host}.{mine}"));
    Some(Placement { node, local_ranks, leaders: Some(leaders_of(&nodes)) })
}

/// Every rank's node named by its lowest rank, from any names of the nodes (`nodes[r]`: rank
/// `r`'s), equal names sharing a node.
pub fn leaders_of<T: Eq + std::hash::Hash>(nodes: &[T]) -> Vec<u32> {
    let mut first = std::collections::HashMap::with_capacity(nodes.len());
    nodes.iter().enumerate().map(|(r, n)| *first.entry(n).or_insert(r as u32)).collect()
}

/// A connected client of whichever interface the process manager offers.
#[derive(Debug)]
pub enum ProcessManager {
    /// PMI-1 over `PMI_FD`.
    Pmi1(PmiClient),
    /// PMI-2 over `PMI_FD`.
    Pmi2(Pmi2Client),
    /// PMIx through `libpmix`.
    #[cfg(feature = "pmix")]
    Pmix(pmix::PmixClient),
}

impl ProcessManager {
    /// Whom the client speaks to and its place in the job.
    pub fn session(&self) -> &Session {
        match self {
            ProcessManager::Pmi1(c) => c.session(),
            ProcessManager::Pmi2(c) => c.session(),
            #[cfg(feature = "pmix")]
            ProcessManager::Pmix(c) => c.session(),
        }
    }

    /// The interface and the process manager, e.g. `PMI-2 (Slurm)`.
    pub fn name(&self) -> &str {
        self.session().server()
    }

    /// This process's rank.
    pub fn rank(&self) -> u32 {
        self.session().rank()
    }

    /// Number of ranks in the job.
    pub fn size(&self) -> u32 {
        self.session().size()
    }

    /// A name of the job, the same on every rank (KVS name, job id, namespace).
    pub fn job_id(&self) -> &str {
        match self {
            ProcessManager::Pmi1(c) => c.kvsname(),
            ProcessManager::Pmi2(c) => c.job_id(),
            #[cfg(feature = "pmix")]
            ProcessManager::Pmix(c) => c.namespace(),
        }
    }

    /// Publishes `key = value` (visible to the others after the next [`barrier`](Self::barrier)).
    pub fn put(&mut self, key: &str, value: &str) -> Result<()> {
        match self {
            ProcessManager::Pmi1(c) => c.put(key, value),
            ProcessManager::Pmi2(c) => c.put(key, value),
            #[cfg(feature = "pmix")]
            ProcessManager::Pmix(c) => c.put(key, value),
        }
    }

    /// The value rank `owner` published under `key` (PMIx keys belong to a process; PMI-1 and
    /// PMI-2 have one space for the job), or `None` if nothing is there.
    #[cfg_attr(not(feature = "pmix"), allow(unused_variables))]
    pub fn get(&mut self, owner: u32, key: &str) -> Result<Option<String>> {
        match self {
            ProcessManager::Pmi1(c) => c.get(key),
            ProcessManager::Pmi2(c) => c.get(key),
            #[cfg(feature = "pmix")]
            ProcessManager::Pmix(c) => c.get(owner, key),
        }
    }

    /// Like [`get`](Self::get), but a missing key is an error naming it and its owner.
    pub fn get_required(&mut self, owner: u32, key: &str, what: &str) -> Result<String> {
        self.get(owner, key)?.ok_or_else(|| {
            Error::pmi(self.name(), "get", format!("rank {owner} published no {what} (key {key} is missing)"))
        })
    }

    /// Waits until every rank of the job has entered it; what was put before is visible after.
    pub fn barrier(&mut self) -> Result<()> {
        match self {
            ProcessManager::Pmi1(c) => c.barrier(),
            ProcessManager::Pmi2(c) => c.barrier(),
            #[cfg(feature = "pmix")]
            ProcessManager::Pmix(c) => c.barrier(),
        }
    }

    /// True if a barrier completes over the ranks still taking part when others died (our
    /// `nemesis-run`); other process managers wait for every rank.
    pub fn barrier_survives_departures(&self) -> bool {
        launcher() == "nemesis-run"
    }

    /// Where the process manager says the ranks are, if it says (PMI-1 and PMI-2:
    /// `PMI_process_mapping`; PMIx: the local peers).
    pub fn placement(&mut self) -> Result<Option<Placement>> {
        let (rank, size) = (self.rank(), self.size());
        let mapping = match self {
            ProcessManager::Pmi1(c) => c.get("PMI_process_mapping")?,
            ProcessManager::Pmi2(c) => c.job_attr("PMI_process_mapping")?,
            #[cfg(feature = "pmix")]
            ProcessManager::Pmix(c) => return c.placement(),
        };
        let Some(mapping) = mapping else { return Ok(None) };
        match placement_from_mapping(&mapping, rank, size) {
            Some(p) => Ok(Some(p)),
            None => Err(Error::pmi(self.name(), "placement", format!("malformed PMI_process_mapping {mapping:?}"))),
        }
    }

    /// Asks the process manager to end the job with `code`.
    pub fn abort(&mut self, code: i32, msg: &str) -> Result<()> {
        match self {
            ProcessManager::Pmi1(c) => c.abort(code, msg),
            ProcessManager::Pmi2(c) => c.abort(code, msg),
            #[cfg(feature = "pmix")]
            ProcessManager::Pmix(c) => c.abort(code, msg),
        }
    }

    /// Ends the session cleanly.
    pub fn finalize(self) -> Result<()> {
        match self {
            ProcessManager::Pmi1(c) => c.finalize(),
            ProcessManager::Pmi2(c) => c.finalize(),
            #[cfg(feature = "pmix")]
            ProcessManager::Pmix(c) => c.finalize(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_rank_s_node_is_its_lowest_rank() {
        assert_eq!(leaders_of(&["a", "b", "a", "c", "b"]), vec![0, 1, 0, 3, 1]);
        let p = placement_from_mapping("(vector,(0,2,2))", 3, 4).unwrap();
        assert_eq!(p.local_ranks, vec![2, 3]);
        assert_eq!(p.leaders, Some(vec![0, 0, 2, 2]));
    }

    #[test]
    fn process_mappings_parse() {
        assert_eq!(node_of_ranks("(vector,(0,1,4))", 4).unwrap(), [0, 0, 0, 0]);
        // Huge counts deal only the ranks there are (found by fuzzing: this took minutes).
        assert_eq!(node_of_ranks("(vector,(0,2,2000000000))", 4).unwrap(), [0, 0, 0, 0]);
        assert_eq!(node_of_ranks("(vector,(5,4000000000,0),(1,3,1))", 5).unwrap(), [1, 2, 3, 1, 2]);
        assert_eq!(node_of_ranks("(vector,(0,2,3),(2,1,2))", 8).unwrap(), [0, 0, 0, 1, 1, 1, 2, 2]);
        // Cyclic over two nodes: the vector is dealt again.
        assert_eq!(node_of_ranks("(vector,(0,2,1))", 5).unwrap(), [0, 1, 0, 1, 0]);
        assert_eq!(node_of_ranks(" (vector, (0,1,2), (1,1,2)) ", 4).unwrap(), [0, 0, 1, 1]);
        for bad in
            ["", "vector", "(vector)", "(vector,(0,0,0))", "(vector,(0,1))", "(vector,(a,1,2))", "(list,(0,1,2))"]
        {
            assert_eq!(node_of_ranks(bad, 4), None, "{bad}");
        }
        let p = placement_from_mapping("(vector,(0,2,2))", 3, 4).unwrap();
        assert_eq!(p.local_ranks, [2, 3]);
        assert!(p.node.ends_with(".1"), "{}", p.node);
        assert_ne!(placement_from_mapping("(vector,(0,2,2))", 0, 4).unwrap().node, p.node);
    }

    #[test]
    fn tokens_are_checked() {
        assert!(check_token("PMI-2 (x)", "put", "value", "tcp:1.2.3.4:5:6", 64, ";=").is_ok());
        for bad in ["", "a;b", "a=b", "a\nb", &"x".repeat(65)] {
            let e = check_token("PMI-2 (x)", "put", "value", bad, 64, ";=").unwrap_err();
            assert!(e.to_string().starts_with("PMI-2 (x): put: value"), "{e}");
        }
    }
}
