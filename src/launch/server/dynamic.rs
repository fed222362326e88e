//! Dynamic processes in the PMI server: spawn requests (PMI-1's `mcmd=spawn` blocks, PMI-2's
//! `cmd=spawn`, as MPICH's clients send them) and the name service (`publish_name`,
//! `lookup_name`, `unpublish_name`; PMI-2's `name-publish`, `name-lookup`, `name-unpublish`).
//!
//! The server only parses and answers: a complete request becomes [`Action::Spawn`]; the
//! supervisor starts the processes, admits them ([`PmiServer::admit`]) and answers with
//! [`PmiServer::spawn_done`]. Spawned ranks take slots `size..universe` of the job (universe
//! ranks, consecutive per request) and form their own group: their barriers are their own, and
//! the keys a spawn pre-puts are seen by its group only.
//!
//! What holds: a request is bounded like any other input ([`SPAWN_CMDS_MAX`] commands,
//! [`SPAWN_ARGS_MAX`] arguments and info keys, [`super::VALUE_MAX`] bytes a value); a published
//! name has one port, and publishing it again is an error (MPI-4.1 §11.4.4).

use super::{Action, PmiServer, Wire, token, unescape};

/// Most commands in one spawn request (`MPI_Comm_spawn_multiple`'s `count`).
pub const SPAWN_CMDS_MAX: usize = 64;
/// Most arguments, info keys or pre-put keys of one command.
pub const SPAWN_ARGS_MAX: usize = 256;
/// Most names published at once in the job.
pub const NAMES_MAX: usize = 4096;

/// One command of a spawn request.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SpawnCmd {
    /// The program (looked up in `PATH`, or in the `path` info key's directories).
    pub program: String,
    /// Its arguments (without the program).
    pub args: Vec<String>,
    /// Processes to start.
    pub maxprocs: u32,
    /// Info keys (`host`, `wdir`, `path`, `soft`), in order.
    pub info: Vec<(String, String)>,
}

/// A whole spawn request: the commands start together and form one `MPI_COMM_WORLD`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SpawnRequest {
    pub cmds: Vec<SpawnCmd>,
    /// Keys the children find in their key-value space (MPICH's `PARENT_ROOT_PORT_NAME`).
    pub preput: Vec<(String, String)>,
}

impl SpawnRequest {
    /// Processes asked for in all.
    pub fn total(&self) -> u64 {
        self.cmds.iter().map(|c| u64::from(c.maxprocs)).sum()
    }
}

/// A PMI-1 `mcmd=spawn` block being received (one per rank).
#[derive(Debug, Clone, Default)]
pub(super) struct Mcmd {
    /// The commands of the blocks received so far, the current one last.
    req: SpawnRequest,
    /// `totspawns` of the blocks (MPICH sends one block per command).
    total: usize,
    /// Something in the blocks was wrong: answered with this once the last block is in.
    bad: Option<&'static str>,
    /// Pre-put and info keys by index, paired at `endcmd`.
    keys: Vec<(String, Option<String>, Option<String>)>,
}

/// Parses a count within `max`.
fn count(v: &str, max: usize) -> Option<usize> {
    v.trim().parse::<usize>().ok().filter(|&n| n <= max)
}

impl Mcmd {
    /// One `key=value` line of the block.
    fn line(&mut self, line: &str) {
        let Some((k, v)) = line.split_once('=') else {
            self.bad = Some("malformed_spawn_line");
            return;
        };
        let v = unescape(v);
        if v.len() > super::VALUE_MAX {
            self.bad = Some("spawn_value_too_long");
            return;
        }
        let cmd = self.req.cmds.last_mut();
        let Some(cmd) = cmd else { return };
        match k {
            "nprocs" => match count(&v, u32::MAX as usize) {
                Some(n) => cmd.maxprocs = n as u32,
                None => self.bad = Some("bad_nprocs"),
            },
            "execname" => cmd.program = v,
            "totspawns" => match count(&v, SPAWN_CMDS_MAX) {
                Some(n) => self.total = n,
                None => self.bad = Some("too_many_spawn_commands"),
            },
            "spawnssofar" | "argcnt" | "preput_num" | "info_num" => {}
            _ => {
                if let Some(i) = k.strip_prefix("arg").and_then(|i| i.parse::<usize>().ok()) {
                    if i == 0 || i > SPAWN_ARGS_MAX {
                        self.bad = Some("too_many_arguments");
                    } else {
                        if cmd.args.len() < i {
                            cmd.args.resize(i, String::new());
                        }
                        cmd.args[i - 1] = v;
                    }
                    return;
                }
                for (prefix, info, val) in [
                    ("preput_key_", false, false),
                    ("preput_val_", false, true),
                    ("info_key_", true, false),
                    ("info_val_", true, true),
                ] {
                    if let Some(i) = k.strip_prefix(prefix).and_then(|i| i.parse::<usize>().ok()) {
                        if i >= SPAWN_ARGS_MAX || self.keys.len() >= 2 * SPAWN_ARGS_MAX {
                            self.bad = Some("too_many_keys");
                            return;
                        }
                        let name = format!("{}{i}", if info { "i" } else { "p" });
                        let slot = match self.keys.iter().position(|(n, _, _)| *n == name) {
                            Some(s) => s,
                            None => {
                                self.keys.push((name, None, None));
                                self.keys.len() - 1
                            }
                        };
                        if val {
                            self.keys[slot].2 = Some(v);
                        } else {
                            self.keys[slot].1 = Some(v);
                        }
                        return;
                    }
                }
                // Unknown keys are ignored, as Hydra does.
            }
        }
    }

    /// The end of one block: its keys go where they belong.
    fn end_block(&mut self) {
        let keys = std::mem::take(&mut self.keys);
        let mut keys: Vec<_> = keys.into_iter().collect();
        keys.sort_by_key(|(n, _, _)| (n.as_bytes()[0], n[1..].parse::<usize>().unwrap_or(0)));
        for (name, k, v) in keys {
            let (Some(k), Some(v)) = (k, v) else {
                self.bad = Some("a_key_without_value");
                continue;
            };
            if name.starts_with('i') {
                if let Some(c) = self.req.cmds.last_mut() {
                    c.info.push((k, v));
                }
            } else if !self.req.preput.iter().any(|(pk, _)| *pk == k) {
                self.req.preput.push((k, v));
            }
        }
    }
}

/// Checks what every request must satisfy; the reason otherwise.
fn check(req: &SpawnRequest) -> Result<(), &'static str> {
    if req.cmds.is_empty() {
        return Err("no_command_to_spawn");
    }
    if req.cmds.iter().any(|c| c.program.is_empty()) {
        return Err("no_program_to_spawn");
    }
    if req.total() == 0 {
        return Err("no_processes_to_spawn");
    }
    Ok(())
}

impl PmiServer {
    /// One line of a PMI-1 `mcmd=` block of `rank` (the `mcmd=` line included). True while the
    /// block goes on.
    pub(super) fn on_mcmd_line(&mut self, rank: u32, line: &str, out: &mut Vec<Action>) {
        let r = rank as usize;
        let line = line.trim();
        if let Some(what) = line.strip_prefix("mcmd=") {
            let m = self.mcmds.entry(rank).or_default();
            if what != "spawn" {
                m.bad = Some("unknown_mcmd");
            }
            if m.req.cmds.len() >= SPAWN_CMDS_MAX {
                m.bad = Some("too_many_spawn_commands");
            } else {
                m.req.cmds.push(SpawnCmd::default());
            }
            self.ranks[r].in_mcmd = true;
            return;
        }
        let Some(m) = self.mcmds.get_mut(&rank) else { return };
        if line != "endcmd" {
            m.line(line);
            return;
        }
        m.end_block();
        self.ranks[r].in_mcmd = false;
        if m.req.cmds.len() < m.total.max(1) && m.bad.is_none() {
            return; // more blocks to come
        }
        let m = self.mcmds.remove(&rank).unwrap_or_default();
        match m.bad.map_or_else(|| check(&m.req), Err) {
            Ok(()) => out.push(Action::Spawn { rank, request: m.req }),
            Err(why) => Self::reply(out, rank, format!("cmd=spawn_result rc=-1 msg={why}")),
        }
    }

    /// PMI-2 `cmd=spawn;ncmds=N;preputcount=K;ppkeyI=;ppvalI=;` then per command
    /// `subcmd=;maxprocs=;argc=;argvJ=;infokeycount=;infokeyJ=;infovalJ=;`.
    pub(super) fn on_spawn2(&mut self, rank: u32, m: &crate::pmi::v2::Message, out: &mut Vec<Action>) {
        match spawn2(m) {
            Ok(request) => out.push(Action::Spawn { rank, request }),
            Err(why) => Self::reply2(out, rank, format!("cmd=spawn-response;rc=-1;errmsg={why};")),
        }
    }

    /// The supervisor's answer to `rank`'s [`Action::Spawn`]: the error code of every process
    /// asked for (0: started), or why nothing was started.
    pub fn spawn_done(&mut self, rank: u32, result: Result<Vec<i32>, String>, out: &mut Vec<Action>) {
        let wire = self.wire(rank);
        let line = match (&result, wire) {
            (Ok(codes), Wire::V1) => format!("cmd=spawn_result rc=0 errcodes={}", join(codes)),
            (Ok(codes), Wire::V2) => format!("cmd=spawn-response;rc=0;errcodes={};", join(codes)),
            (Err(why), Wire::V1) => format!("cmd=spawn_result rc=-1 msg={}", token(why)),
            (Err(why), Wire::V2) => format!("cmd=spawn-response;rc=-1;errmsg={};", why.replace(';', ",")),
        };
        match wire {
            Wire::V1 => Self::reply(out, rank, line),
            Wire::V2 => Self::reply2(out, rank, line),
        }
    }

    /// Slots not taken yet: `(first, count)` of the free universe ranks at the end.
    pub fn free_slots(&self) -> (u32, u32) {
        let first = self.ranks.iter().rposition(|r| r.stage != super::Stage::Unborn).map_or(0, |i| i + 1);
        (first as u32, (self.ranks.len() - first) as u32)
    }

    /// Admits ranks `first..first + appnums.len()` as a new group started by a spawn (rank
    /// `first + i` runs command `appnums[i]`), with the keys the request pre-put.
    pub fn admit(&mut self, first: u32, appnums: &[u32], preput: &[(String, String)]) {
        self.groups += 1;
        let group = self.groups;
        for (i, &app) in appnums.iter().enumerate() {
            if let Some(st) = self.ranks.get_mut(first as usize + i) {
                *st = super::RankPmi { group, appnum: app, ..super::RankPmi::fresh() };
            }
        }
        let table = self.preputs.entry(group).or_default();
        for (k, v) in preput {
            table.0.insert(k.clone(), (v.clone(), None));
        }
    }

    /// The value of `key` for `rank`: its group's pre-put keys first, then the job's.
    pub(super) fn lookup_key(&self, rank: u32, key: &str) -> Option<&str> {
        let group = self.ranks.get(rank as usize).map_or(0, |r| r.group);
        self.preputs.get(&group).and_then(|t| t.get(key)).or_else(|| self.kvs.get(key))
    }

    /// PMI-1 `publish_name`, `unpublish_name`, `lookup_name`: the reply line.
    pub(super) fn on_name1(&mut self, cmd: &str, service: Option<&str>, port: Option<&str>) -> String {
        let verb = cmd.trim_end_matches("_name");
        let Some(service) = service.filter(|s| !s.is_empty() && s.len() <= super::KEY_MAX) else {
            return format!("cmd={verb}_result rc=-1 msg=missing_or_long_service");
        };
        match self.name_op(cmd, service, port) {
            Ok(Some(p)) => format!("cmd={verb}_result rc=0 port={p}"),
            Ok(None) => format!("cmd={verb}_result rc=0 info=ok"),
            Err(why) => format!("cmd={verb}_result rc=-1 msg={why}"),
        }
    }

    /// PMI-2 `name-publish`, `name-unpublish`, `name-lookup`: the reply body.
    pub(super) fn on_name2(&mut self, cmd: &str, m: &crate::pmi::v2::Message) -> String {
        let op = match cmd {
            "name-publish" => "publish_name",
            "name-unpublish" => "unpublish_name",
            _ => "lookup_name",
        };
        let Some(service) = m.get("name").filter(|s| !s.is_empty() && s.len() <= super::KEY_MAX) else {
            return format!("cmd={cmd}-response;rc=-1;errmsg=missing or long name;");
        };
        match self.name_op(op, service, m.get("port")) {
            Ok(Some(p)) => format!("cmd={cmd}-response;rc=0;found=TRUE;value={p};"),
            Ok(None) => format!("cmd={cmd}-response;rc=0;"),
            Err(why) => format!("cmd={cmd}-response;rc=-1;found=FALSE;errmsg={};", why.replace('_', " ")),
        }
    }

    fn name_op(&mut self, op: &str, service: &str, port: Option<&str>) -> Result<Option<String>, &'static str> {
        match op {
            "publish_name" => {
                let Some(port) = port.filter(|p| !p.is_empty() && p.len() <= super::VALUE_MAX) else {
                    return Err("missing_or_long_port");
                };
                if self.names.contains_key(service) {
                    return Err("name_already_published");
                }
                if self.names.len() >= NAMES_MAX {
                    return Err("too_many_names");
                }
                self.names.insert(service.to_owned(), port.to_owned());
                Ok(None)
            }
            "unpublish_name" => self.names.remove(service).map(|_| None).ok_or("name_not_published"),
            _ => self.names.get(service).map(|p| Some(p.clone())).ok_or("name_not_found"),
        }
    }
}

fn join(codes: &[i32]) -> String {
    codes.iter().map(i32::to_string).collect::<Vec<_>>().join(",")
}

/// Parses a PMI-2 spawn request (attributes in order: each `subcmd` starts a command).
fn spawn2(m: &crate::pmi::v2::Message) -> Result<SpawnRequest, &'static str> {
    let mut req = SpawnRequest::default();
    let mut ppkeys: Vec<(usize, String)> = Vec::new();
    let mut ppvals: Vec<(usize, String)> = Vec::new();
    let mut ikeys: Vec<(usize, String)> = Vec::new();
    let mut ivals: Vec<(usize, String)> = Vec::new();
    let idx =
        |k: &str, p: &str| k.strip_prefix(p).and_then(|i| i.parse::<usize>().ok()).filter(|&i| i < SPAWN_ARGS_MAX);
    let flush = |req: &mut SpawnRequest, ik: &mut Vec<(usize, String)>, iv: &mut Vec<(usize, String)>| {
        if let Some(c) = req.cmds.last_mut() {
            ik.sort();
            for (i, k) in ik.drain(..) {
                if let Some((_, v)) = iv.iter().find(|(j, _)| *j == i) {
                    c.info.push((k, v.clone()));
                }
            }
            iv.clear();
        }
    };
    for (k, v) in m.attrs() {
        if v.len() > super::VALUE_MAX {
            return Err("value too long");
        }
        match k {
            "subcmd" => {
                flush(&mut req, &mut ikeys, &mut ivals);
                if req.cmds.len() >= SPAWN_CMDS_MAX {
                    return Err("too many commands");
                }
                req.cmds.push(SpawnCmd { program: v.to_owned(), ..SpawnCmd::default() });
            }
            "maxprocs" => {
                let c = req.cmds.last_mut().ok_or("maxprocs before subcmd")?;
                c.maxprocs = v.trim().parse().map_err(|_| "bad maxprocs")?;
            }
            "ncmds" | "preputcount" | "argc" | "infokeycount" => {}
            _ => {
                if let Some(i) = idx(k, "argv") {
                    let c = req.cmds.last_mut().ok_or("argv before subcmd")?;
                    if c.args.len() <= i {
                        c.args.resize(i + 1, String::new());
                    }
                    c.args[i] = v.to_owned();
                } else if let Some(i) = idx(k, "ppkey") {
                    ppkeys.push((i, v.to_owned()));
                } else if let Some(i) = idx(k, "ppval") {
                    ppvals.push((i, v.to_owned()));
                } else if let Some(i) = idx(k, "infokey") {
                    ikeys.push((i, v.to_owned()));
                } else if let Some(i) = idx(k, "infoval") {
                    ivals.push((i, v.to_owned()));
                }
            }
        }
    }
    flush(&mut req, &mut ikeys, &mut ivals);
    ppkeys.sort();
    for (i, k) in ppkeys {
        if let Some((_, v)) = ppvals.iter().find(|(j, _)| *j == i) {
            req.preput.push((k, v.clone()));
        }
    }
    check(&req).map_err(|w| match w {
        "no_command_to_spawn" => "no command to spawn",
        "no_program_to_spawn" => "no program to spawn",
        _ => "no processes to spawn",
    })?;
    Ok(req)
}
