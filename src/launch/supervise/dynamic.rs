//! Spawned processes (`MPI_Comm_spawn`): the supervisor's side of [`Action::Spawn`].
//!
//! A request takes the next free slots of the universe (`--universe-size`), consecutive ranks
//! `first..first + n`, and starts its processes on a node identity of their own (a new segment,
//! named by the `host` info key or `<node>.spawn<k>`), so that they reach their parents through
//! the netmod as ranks of another node do. They form one group in the PMI server (their own
//! barriers and pre-put keys) and learn their `MPI_COMM_WORLD` from `NEMESIS_WORLD`. From then on
//! they are ranks like the others: their output goes to the launcher's (tagged with their
//! universe ranks under `--tag-output`), their deaths are watched and end the job as any rank's,
//! and the job ends when every process, spawned or not, has exited.
//!
//! All or nothing: every program is resolved before any process starts, and a process that
//! cannot start takes those of its request already started with it (they are not failures of the
//! job). With the `soft` info key (`min:max`, `a,b,c`), fewer processes than asked for may
//! start: the most that fit in the free slots.

use std::ffi::OsString;
use std::path::{Path, PathBuf};

use nemesis_shm::{Backing, Params, Segment};
use nix::sys::signal::Signal;

use std::os::fd::OwnedFd;

use super::{Conn, Forwarder, Rank, Stream, Supervisor, signal};
use crate::contract::{ENV_APPNUM, ENV_WORLD, HANDLE_FD, sanitize_node_id, segment_key};
use crate::launch::server::SpawnRequest;
use crate::launch::spawn::{self, Extra, Placement};

/// The values `soft` allows (`1:4`, `1:4:2`, `2,4`), ascending.
fn soft_counts(spec: &str, max: u32) -> Option<Vec<u32>> {
    let mut out = Vec::new();
    for part in spec.split(',') {
        let nums: Vec<u32> = part.split(':').map(|n| n.trim().parse().ok()).collect::<Option<_>>()?;
        match nums[..] {
            [n] => out.push(n),
            [a, b] => out.extend(a..=b.min(max)),
            [a, b, s] if s > 0 => out.extend((a..=b.min(max)).step_by(s as usize)),
            _ => return None,
        }
    }
    out.retain(|&n| n <= max);
    out.sort_unstable();
    out.dedup();
    Some(out)
}

/// `program` as it will run: itself if it names a path, else the first executable match in the
/// `path` info key's directories, else itself (looked up in `PATH` by the start); an error if a
/// path names nothing executable.
fn resolve(program: &str, path: Option<&str>, wdir: Option<&Path>) -> Result<OsString, String> {
    let executable = |p: &Path| {
        use std::os::unix::fs::PermissionsExt;
        p.metadata().is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
    };
    if program.contains('/') {
        let p = match wdir {
            Some(d) if !program.starts_with('/') => d.join(program),
            _ => PathBuf::from(program),
        };
        return if executable(&p) { Ok(p.into_os_string()) } else { Err(format!("{program}: no such executable")) };
    }
    if let Some(dirs) = path {
        for d in dirs.split(':').filter(|d| !d.is_empty()) {
            let p = Path::new(d).join(program);
            if executable(&p) {
                return Ok(p.into_os_string());
            }
        }
    }
    let in_path =
        std::env::var_os("PATH").is_some_and(|v| std::env::split_paths(&v).any(|d| executable(&d.join(program))));
    if in_path { Ok(program.into()) } else { Err(format!("{program}: not found in PATH")) }
}

/// One process to start: its command, working directory and number in the request.
struct Planned {
    program: OsString,
    args: Vec<OsString>,
    cwd: Option<PathBuf>,
    appnum: u32,
}

impl Supervisor {
    /// Handles `rank`'s spawn request: starts the processes or says why not.
    pub(super) fn on_spawn(&mut self, rank: u32, req: SpawnRequest) {
        let result = self.start_spawn(&req);
        if let Err(why) = &result {
            tracing::info!(rank, %why, "spawn refused");
        }
        let mut out = Vec::new();
        self.server.spawn_done(rank, result, &mut out);
        self.actions.extend(out);
    }

    fn start_spawn(&mut self, req: &SpawnRequest) -> Result<Vec<i32>, String> {
        if self.recovery.is_some() {
            return Err("MPI_Comm_spawn is not supported with fault tolerance (--ft)".into());
        }
        if self.ending.is_some() {
            return Err("the job is ending".into());
        }
        let (first, free) = self.server.free_slots();
        let universe = first + free;
        if first as usize != self.ranks.len() {
            return Err("the launcher's slots are out of order".into());
        }
        // How many processes each command gets.
        let total = req.total();
        let mut counts: Vec<u32> = req.cmds.iter().map(|c| c.maxprocs).collect();
        // Processes asked for and not started (`soft`): their error codes are 1.
        let mut unstarted = 0;
        if total > u64::from(free) {
            let soft = (req.cmds.len() == 1)
                .then(|| req.cmds[0].info.iter().find(|(k, _)| k == "soft").map(|(_, v)| v.clone()))
                .flatten();
            let fit = soft
                .and_then(|s| soft_counts(&s, req.cmds[0].maxprocs))
                .and_then(|v| v.into_iter().rev().find(|&n| n <= free && n > 0));
            match fit {
                Some(n) => {
                    unstarted = counts[0] - n;
                    counts[0] = n;
                }
                None => {
                    return Err(format!(
                        "{total} processes asked for, {free} free slots in the universe of {universe} \
                         (start the job with nemesis-run --universe-size N)"
                    ));
                }
            }
        }
        let mut planned = Vec::new();
        for (app, (c, &n)) in req.cmds.iter().zip(&counts).enumerate() {
            let info = |k: &str| c.info.iter().rev().find(|(key, _)| key == k).map(|(_, v)| v.as_str());
            let cwd = info("wdir").map(PathBuf::from);
            if let Some(d) = &cwd
                && !d.is_dir()
            {
                return Err(format!("wdir {}: not a directory", d.display()));
            }
            let program = resolve(&c.program, info("path"), cwd.as_deref())?;
            for _ in 0..n {
                planned.push(Planned {
                    program: program.clone(),
                    args: c.args.iter().map(OsString::from).collect(),
                    cwd: cwd.clone(),
                    appnum: app as u32,
                });
            }
        }
        let count = planned.len() as u32;
        let local_size = u16::try_from(count).map_err(|_| format!("{count} processes on one node: too many"))?;
        // A node identity of their own: the `host` key's name, or the launcher's node's.
        let host = req.cmds.iter().flat_map(|c| &c.info).find(|(k, _)| k == "host").map(|(_, v)| v.as_str());
        let group = self.segments.len();
        let base = host.map_or_else(|| format!("{}.spawn{group}", self.ranks[0].place.node), str::to_owned);
        let mut node = sanitize_node_id(&base);
        if self.server.value(&segment_key(&node)).is_some() {
            node = sanitize_node_id(&format!("{base}.{group}"));
        }
        let params = Params::from_env().map_err(|e| e.to_string())?;
        let seg = Segment::create(local_size, params, Backing::Memfd).map_err(|e| e.to_string())?;
        self.server.preput(&segment_key(&node), &format!("{HANDLE_FD}{}", seg.fd()));
        self.segments.push(seg);
        let ni = self.segments.len() - 1;
        let appnums: Vec<u32> = planned.iter().map(|p| p.appnum).collect();
        self.server.admit(first, &appnums, &req.preput);
        let world = format!("{first},{count}");
        tracing::info!(first, count, %node, "spawning");
        let mut pipes: Vec<(u32, Stream, OwnedFd)> = Vec::new();
        for (local, p) in planned.into_iter().enumerate() {
            let rank = first + local as u32;
            let place = Placement {
                rank,
                size: universe,
                node: node.clone(),
                local_rank: local as u16,
                local_size,
                cpus: Vec::new(),
                locality: None,
            };
            let extra = Extra {
                ft_channel: false,
                env: vec![(ENV_WORLD.into(), world.clone()), (ENV_APPNUM.into(), p.appnum.to_string())],
                inherit_output: !self.job.tag_output,
                command: Some((p.program, p.args)),
                cwd: p.cwd,
            };
            let s = match spawn::start(&self.job, &place, self.segments[ni].fd(), &extra) {
                Ok(s) => s,
                Err(e) => {
                    // Those of the request already started go; they are not the job's failures.
                    for r in self.ranks.iter_mut().filter(|r| r.rank >= first) {
                        r.stopped = true;
                        signal(r.pid, Signal::SIGKILL);
                    }
                    for r in first + local as u32..first + count {
                        let mut out = Vec::new();
                        self.server.on_gone(r, &mut out);
                        self.actions.extend(out);
                    }
                    return Err(e.to_string());
                }
            };
            tracing::debug!(rank, pid = s.pid, "spawned");
            if let Some(o) = s.stdout {
                pipes.push((rank, Stream::Stdout, OwnedFd::from(o)));
            }
            if let Some(e) = s.stderr {
                pipes.push((rank, Stream::Stderr, OwnedFd::from(e)));
            }
            self.ranks.push(Rank {
                rank,
                node: ni,
                local: local as u16,
                pid: s.pid,
                child: s.child,
                pidfd: Some(s.pidfd),
                conn: Some(Conn { sock: s.pmi, input: Vec::new(), output: Vec::new() }),
                exit: None,
                stopped: false,
                ft: None,
                place,
                incarnation: 0,
            });
        }
        if !pipes.is_empty() {
            // Tagged with their ranks in the universe, as the job's own ranks are.
            match Forwarder::start(pipes) {
                Ok(f) => self.spawned_output.push(f),
                Err(e) => tracing::warn!(error = %e, "the spawned processes' output is not forwarded"),
            }
        }
        let mut codes = vec![0; count as usize];
        codes.resize((count + unstarted) as usize, 1);
        Ok(codes)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn soft_ranges_list_what_may_start() {
        assert_eq!(soft_counts("1:4", 8), Some(vec![1, 2, 3, 4]));
        assert_eq!(soft_counts("2,4,1:2", 3), Some(vec![1, 2]));
        assert_eq!(soft_counts("0:8:4", 8), Some(vec![0, 4, 8]));
        assert_eq!(soft_counts("x", 8), None);
    }

    #[test]
    fn programs_resolve_or_say_why_not() {
        assert_eq!(resolve("sh", None, None).unwrap(), OsString::from("sh"));
        assert_eq!(resolve("sh", Some("/nonexistent:/bin"), None).unwrap(), OsString::from("/bin/sh"));
        assert!(resolve("/nonexistent/x", None, None).unwrap_err().contains("no such executable"));
        assert!(resolve("surely-not-a-program-xyz", None, None).unwrap_err().contains("not found"));
    }
}
