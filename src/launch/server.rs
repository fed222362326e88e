//! PMI-1 and PMI-2 server: the state machine behind `nemesis-run`'s end of each rank's `PMI_FD`.
//! The wire format is MPICH's (`src/pmi`, "PMI version 1.1 message protocol"; PMI-2's framing is
//! `crate::pmi::v2`'s), the replies Hydra 4.0.2's, checked against its sources
//! (`pmiserv_pmi_v1.c`, `pmip_pmi_v1.c`); every query and its reply, and where this server differs
//! from Hydra on purpose, are in `docs/design/launcher.md` ("The PMI server").
//!
//! Sans-I/O: [`PmiServer::on_line`] (PMI-1) and [`PmiServer::on_bytes`] (PMI-2, after an `init`
//! that asks for it) take what a rank sent and emit [`Action`]s (replies to write, an abort to carry
//! out); [`PmiServer::on_gone`] tells it a rank can take part no more. The supervisor
//! (`supervise.rs`) does the socket I/O.
//!
//! What holds:
//! - What a rank can make the launcher hold is bounded: a line of [`LINE_MAX`] bytes, a PMI-2
//!   message of [`MESSAGE2_MAX`] (longer closes the connection), keys of [`KEY_MAX`] and values of
//!   [`VALUE_MAX`] bytes as Hydra, [`KEYS_PER_RANK`] keys per rank, an abort text of
//!   [`ABORT_TEXT_MAX`]; every reply is bounded by these.
//! - A bad command gets `rc=-1` and a reason; it never ends the job.
//! - A barrier (PMI-1's and PMI-2's `kvs-fence` are one) completes once every rank *still taking
//!   part* entered it: a rank stops taking part when it finalizes, closes its connection or ends.
//! - A put is visible to every rank at once.

use std::collections::HashMap;

mod dynamic;

pub use dynamic::{SpawnCmd, SpawnRequest};

/// Longest KVS name, key and value (what `get_maxes` announces; Hydra's values).
pub const KVSNAME_MAX: usize = 256;
/// See [`KVSNAME_MAX`].
pub const KEY_MAX: usize = 64;
/// See [`KVSNAME_MAX`].
pub const VALUE_MAX: usize = 1024;
/// Longest line accepted from a rank (a `put` of the longest key and value fits with room).
pub const LINE_MAX: usize = 4096;
/// Most keys (of the KVS and node attributes) one rank may create; overwriting a key is free.
pub const KEYS_PER_RANK: usize = 1024;
/// Longest abort message kept (longer ones are cut at a character boundary).
pub const ABORT_TEXT_MAX: usize = 1024;

/// Longest PMI-2 message accepted from a rank (MPICH's `PMII_MAX_COMMAND_LEN`).
pub const MESSAGE2_MAX: usize = crate::pmi::v2::MESSAGE_MAX;

/// The wire format a rank speaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Wire {
    /// PMI-1 lines (and PMI-2's opening `init`).
    V1,
    /// PMI-2's length-prefixed messages, after a PMI-2 `init`.
    V2,
}

/// What the I/O layer must do after an event.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Action {
    /// Write `line` to `rank`'s connection: a PMI-1 line with its `\n`, or a framed PMI-2
    /// message.
    Reply {
        /// Destination rank.
        rank: u32,
        /// The reply, framed for the rank's wire format.
        line: String,
    },
    /// `rank` asked to end the job with exit code `code`.
    Abort {
        /// The rank that called abort.
        rank: u32,
        /// Requested exit code.
        code: i32,
        /// Its message (unescaped), possibly empty.
        message: String,
    },
    /// `rank` asks for new processes (`MPI_Comm_spawn`): start them, [`PmiServer::admit`] them,
    /// and answer with [`PmiServer::spawn_done`].
    Spawn {
        /// The rank that asked.
        rank: u32,
        /// What to start.
        request: SpawnRequest,
    },
}

/// Where a rank stands in the PMI conversation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Stage {
    /// Takes part in barriers (connected or not yet).
    Active,
    /// Sent `finalize`: out of every later barrier.
    Finalized,
    /// Its connection closed or its process ended.
    Gone,
    /// A slot of the universe no process was started in yet (`nemesis-run --universe-size`).
    Unborn,
}

#[derive(Debug, Clone, Copy)]
struct RankPmi {
    /// Keys it created (they count against [`KEYS_PER_RANK`]).
    keys: usize,
    /// Why its connection must close, once [`PmiServer::on_bytes`] said so.
    refused: Option<&'static str>,
    stage: Stage,
    /// True while the rank waits in the current barrier.
    in_barrier: bool,
    /// True while the rank is inside an `mcmd=` block (PMI-1 spawn), skipped up to `endcmd`.
    in_mcmd: bool,
    /// The wire format it speaks now.
    wire: Wire,
    /// Its group: 0 for the ranks the job started with, then one per spawn. Barriers are per
    /// group.
    group: u32,
    /// Its command's number in the spawn that started it (`MPI_APPNUM`).
    appnum: u32,
}

/// The PMI-1 server of one job: its KVS, barrier and per-rank state.
#[derive(Debug)]
pub struct PmiServer {
    kvsname: String,
    kvs: Table,
    /// PMI-2 node attributes (one table: the launcher does not tell its pretend nodes apart here).
    node_attrs: Table,
    ranks: Vec<RankPmi>,
    /// Universe size announced (the job's rank count, or `nemesis-run --universe-size`).
    universe: u32,
    /// PMI-1 spawn blocks being received, by rank.
    mcmds: HashMap<u32, dynamic::Mcmd>,
    /// Keys pre-put by each spawn, by group.
    preputs: HashMap<u32, Table>,
    /// The name service: service name to port name.
    names: HashMap<String, String>,
    /// Groups started so far by spawns.
    groups: u32,
}

/// Keys and values, each with the rank that created it (`None`: the launcher's).
#[derive(Debug, Default)]
struct Table(HashMap<String, (String, Option<u32>)>);

impl Table {
    fn get(&self, key: &str) -> Option<&str> {
        self.0.get(key).map(|(v, _)| v.as_str())
    }

    /// Stores `key = value` for `rank`, counting a new key in its [`RankPmi::keys`]; a new key
    /// beyond [`KEYS_PER_RANK`] is refused.
    fn put(&mut self, ranks: &mut [RankPmi], rank: u32, key: &str, value: &str) -> Result<(), ()> {
        if let Some(e) = self.0.get_mut(key) {
            e.0 = value.to_owned();
            return Ok(());
        }
        let st = ranks.get_mut(rank as usize).ok_or(())?;
        if st.keys >= KEYS_PER_RANK {
            return Err(());
        }
        st.keys += 1;
        self.0.insert(key.to_owned(), (value.to_owned(), Some(rank)));
        Ok(())
    }

    fn remove(&mut self, ranks: &mut [RankPmi], key: &str) {
        if let Some((_, Some(r))) = self.0.remove(key)
            && let Some(st) = ranks.get_mut(r as usize)
        {
            st.keys = st.keys.saturating_sub(1);
        }
    }
}

/// One parsed line: `cmd` and the other attributes in order. Values are kept as sent.
struct Query<'a> {
    cmd: &'a str,
    attrs: Vec<(&'a str, &'a str)>,
}

impl<'a> Query<'a> {
    /// Parses `cmd=<name> key=value ...`; keys are MPICH's `[A-Za-z0-9_/-]+`; a value runs to the
    /// next unescaped space (a backslash escapes the character after it).
    fn parse(line: &'a str) -> Result<Query<'a>, &'static str> {
        let mut attrs = Vec::new();
        let mut rest = line;
        let mut cmd = None;
        loop {
            rest = rest.trim_start_matches(' ');
            if rest.is_empty() {
                break;
            }
            let key_end = rest.find(|c: char| !(c.is_ascii_alphanumeric() || "_-/".contains(c))).unwrap_or(rest.len());
            if key_end == 0 {
                return Err("malformed_line");
            }
            let key = &rest[..key_end];
            rest = &rest[key_end..];
            let value = if let Some(after) = rest.strip_prefix('=') {
                let b = after.as_bytes();
                let mut i = 0;
                while i < b.len() && b[i] != b' ' {
                    i += if b[i] == b'\\' && i + 1 < b.len() { 2 } else { 1 };
                }
                // An escape may have skipped into a multi-byte character: stay on a boundary.
                while !after.is_char_boundary(i) {
                    i += 1;
                }
                rest = &after[i..];
                &after[..i]
            } else if rest.is_empty() || rest.starts_with(' ') {
                ""
            } else {
                return Err("malformed_line");
            };
            if cmd.is_none() {
                if key != "cmd" || value.is_empty() {
                    return Err("expected_cmd");
                }
                cmd = Some(value);
            } else {
                attrs.push((key, value));
            }
        }
        Ok(Query { cmd: cmd.ok_or("empty_line")?, attrs })
    }

    fn get(&self, key: &str) -> Option<&'a str> {
        self.attrs.iter().find(|(k, _)| *k == key).map(|(_, v)| *v)
    }
}

impl RankPmi {
    fn fresh() -> RankPmi {
        RankPmi {
            keys: 0,
            refused: None,
            stage: Stage::Active,
            in_barrier: false,
            in_mcmd: false,
            wire: Wire::V1,
            group: 0,
            appnum: 0,
        }
    }
}

/// `text` cut to [`ABORT_TEXT_MAX`] bytes, at a character boundary.
fn cut(mut text: String) -> String {
    if text.len() > ABORT_TEXT_MAX {
        let mut n = ABORT_TEXT_MAX;
        while !text.is_char_boundary(n) {
            n -= 1;
        }
        text.truncate(n);
    }
    text
}

/// The exit code of an `abort` (1 if absent or not a number, as Hydra).
fn exit_code(v: Option<&str>) -> i32 {
    v.map_or(1, |v| v.trim().parse().unwrap_or(1))
}

/// Removes MPICH's backslash escapes (`a\ b` is `a b`).
fn unescape(v: &str) -> String {
    let mut out = String::with_capacity(v.len());
    let mut chars = v.chars();
    while let Some(c) = chars.next() {
        if c == '\\'
            && let Some(n) = chars.next()
        {
            out.push(n);
            continue;
        }
        out.push(c);
    }
    out
}

/// Makes `s` usable as a reply value: no spaces, `=`, newlines or control characters.
fn token(s: &str) -> String {
    s.chars().take(200).map(|c| if c.is_ascii_graphic() && c != '=' { c } else { '_' }).collect()
}

impl PmiServer {
    /// A server for `size` ranks whose KVS is called `kvsname`.
    pub fn new(size: u32, kvsname: &str) -> PmiServer {
        PmiServer::with_universe(size, size, kvsname)
    }

    /// A server for `size` ranks and `universe - size` more that spawns may start (slots
    /// `size..universe`, [`Action::Spawn`]); every rank is told the universe's size.
    pub fn with_universe(size: u32, universe: u32, kvsname: &str) -> PmiServer {
        let universe = universe.max(size);
        let mut ranks = vec![RankPmi::fresh(); universe as usize];
        for r in &mut ranks[size as usize..] {
            r.stage = Stage::Unborn;
        }
        PmiServer {
            kvsname: token(kvsname),
            kvs: Table::default(),
            node_attrs: Table::default(),
            ranks,
            universe,
            mcmds: HashMap::new(),
            preputs: HashMap::new(),
            names: HashMap::new(),
            groups: 0,
        }
    }

    /// The KVS name given to ranks.
    pub fn kvsname(&self) -> &str {
        &self.kvsname
    }

    /// Stores `key = value` before any rank starts (the launcher's pre-put keys).
    pub fn preput(&mut self, key: &str, value: &str) {
        self.kvs.0.insert(key.to_owned(), (value.to_owned(), None));
    }

    /// Forgets `key` (a dead rank's business card, `nemesis-run --ft`): a `get` finds nothing
    /// until the key is put again.
    pub fn remove(&mut self, key: &str) {
        self.kvs.remove(&mut self.ranks, key);
    }

    /// The value stored under `key`, as a `get` would return it.
    pub fn value(&self, key: &str) -> Option<&str> {
        self.kvs.get(key)
    }

    /// Why `rank`'s connection must close, once [`on_bytes`](Self::on_bytes) returned false.
    pub fn refusal(&self, rank: u32) -> Option<&'static str> {
        self.ranks.get(rank as usize).and_then(|r| r.refused)
    }

    fn reply(out: &mut Vec<Action>, rank: u32, line: String) {
        let mut line = line;
        line.push('\n');
        out.push(Action::Reply { rank, line });
    }

    /// Queues a PMI-2 reply (`cmd=...;`), framed.
    fn reply2(out: &mut Vec<Action>, rank: u32, body: String) {
        out.push(Action::Reply { rank, line: crate::pmi::v2::frame(&body) });
    }

    /// The wire format `rank` speaks now.
    pub fn wire(&self, rank: u32) -> Wire {
        self.ranks.get(rank as usize).map_or(Wire::V1, |r| r.wire)
    }

    /// Handles the complete messages at the start of `input` (what `rank` sent, in order) and
    /// removes them; an incomplete one stays for later. One message at a time: a PMI-2 `init`
    /// changes how the next is framed. Returns false if `input` holds something that can never
    /// become a message (a line or message too long, a bad length field): the connection should
    /// be closed (after the error reply queued here).
    pub fn on_bytes(&mut self, rank: u32, input: &mut Vec<u8>, out: &mut Vec<Action>) -> bool {
        let mut start = 0;
        let ok = loop {
            let rest = &input[start..];
            match self.wire(rank) {
                Wire::V1 => {
                    let nl = rest.iter().take(LINE_MAX + 1).position(|&b| b == b'\n');
                    let Some(nl) = nl else {
                        if rest.len() > LINE_MAX {
                            self.refuse(rank, "a PMI line longer than 4096 bytes");
                            Self::reply(out, rank, "cmd=error rc=-1 msg=line_too_long".into());
                            break false;
                        }
                        break true;
                    };
                    let line = String::from_utf8_lossy(&rest[..nl]).into_owned();
                    start += nl + 1;
                    self.on_line(rank, &line, out);
                }
                Wire::V2 => {
                    if rest.len() < 6 {
                        break true;
                    }
                    let len = std::str::from_utf8(&rest[..6]).ok().and_then(|s| s.trim().parse::<usize>().ok());
                    let Some(len) = len.filter(|&n| n <= MESSAGE2_MAX) else {
                        self.refuse(rank, "a PMI-2 length field that is not a number up to 65536");
                        Self::reply2(out, rank, "cmd=error;rc=-1;errmsg=bad length field;".into());
                        break false;
                    };
                    if rest.len() < 6 + len {
                        break true;
                    }
                    let body = String::from_utf8_lossy(&rest[6..6 + len]).into_owned();
                    start += 6 + len;
                    self.on_message2(rank, &body, out);
                }
            }
        };
        input.drain(..start);
        ok
    }

    /// Records why `rank`'s connection closes.
    fn refuse(&mut self, rank: u32, why: &'static str) {
        tracing::debug!(rank, why, "PMI connection refused");
        if let Some(r) = self.ranks.get_mut(rank as usize) {
            r.refused = Some(why);
        }
    }

    /// Handles one line (without its newline) from `rank`.
    pub fn on_line(&mut self, rank: u32, line: &str, out: &mut Vec<Action>) {
        let Some(me) = self.ranks.get(rank as usize).copied() else {
            return;
        };
        let line = line.strip_suffix('\r').unwrap_or(line);
        // PMI-1 spawn arrives as multi-line `mcmd=spawn` ... `endcmd` blocks, one per command;
        // answered once, after the last.
        if me.in_mcmd || line.starts_with("mcmd=") {
            return self.on_mcmd_line(rank, line, out);
        }
        if line.trim().is_empty() {
            return;
        }
        let q = match Query::parse(line) {
            Ok(q) => q,
            Err(why) => {
                tracing::warn!(rank, line, "malformed PMI line");
                return Self::reply(out, rank, format!("cmd=error rc=-1 msg={why}"));
            }
        };
        tracing::trace!(rank, line, "PMI");
        if me.stage == Stage::Finalized && q.cmd != "finalize" {
            return Self::reply(out, rank, format!("cmd=error rc=-1 msg={}_after_finalize", token(q.cmd)));
        }
        match q.cmd {
            "init" => {
                let v = q.get("pmi_version").and_then(|v| v.parse::<i32>().ok());
                let s = q.get("pmi_subversion").and_then(|v| v.parse::<i32>().ok());
                if v == Some(2) && s == Some(0) {
                    self.ranks[rank as usize].wire = Wire::V2;
                    return Self::reply(out, rank, "cmd=response_to_init pmi_version=2 pmi_subversion=0 rc=0".into());
                }
                let rc = if v == Some(1) && s.is_some_and(|s| s <= 1) { 0 } else { -1 };
                Self::reply(out, rank, format!("cmd=response_to_init pmi_version=1 pmi_subversion=1 rc={rc}"));
            }
            "get_maxes" => Self::reply(
                out,
                rank,
                format!("cmd=maxes kvsname_max={KVSNAME_MAX} keylen_max={KEY_MAX} vallen_max={VALUE_MAX} rc=0"),
            ),
            "get_appnum" => Self::reply(out, rank, format!("cmd=appnum appnum={} rc=0", me.appnum)),
            "publish_name" | "unpublish_name" | "lookup_name" => {
                let line = self.on_name1(q.cmd, q.get("service"), q.get("port"));
                Self::reply(out, rank, line);
            }
            "get_my_kvsname" => Self::reply(out, rank, format!("cmd=my_kvsname kvsname={} rc=0", self.kvsname)),
            "get_universe_size" => Self::reply(out, rank, format!("cmd=universe_size size={} rc=0", self.universe)),
            "put" => {
                let line = self.put(rank, &q);
                Self::reply(out, rank, line);
            }
            "get" => {
                let line = self.get(rank, &q);
                Self::reply(out, rank, line);
            }
            "barrier_in" => {
                if !self.enter_barrier(rank, out) {
                    Self::reply(out, rank, "cmd=barrier_out rc=-1 msg=already_in_barrier".into());
                }
            }
            "finalize" => self.finalize_rank(rank, out),
            "abort" => {
                let message = cut(unescape(q.get("message").or_else(|| q.get("msg")).unwrap_or("")));
                out.push(Action::Abort { rank, code: exit_code(q.get("exitcode")), message });
            }
            other => {
                tracing::warn!(rank, cmd = other, "unknown PMI command");
                Self::reply(out, rank, format!("cmd=error rc=-1 msg=unknown_command_{}", token(other)));
            }
        }
    }

    /// Handles one PMI-2 message (the body, after the length) from `rank`.
    pub fn on_message2(&mut self, rank: u32, body: &str, out: &mut Vec<Action>) {
        let Some(me) = self.ranks.get(rank as usize).copied() else {
            return;
        };
        let Some(m) = crate::pmi::v2::Message::parse(body) else {
            tracing::warn!(rank, body, "malformed PMI-2 message");
            return Self::reply2(out, rank, "cmd=error;rc=-1;errmsg=expected cmd=;".into());
        };
        tracing::trace!(rank, body, "PMI-2");
        let cmd = m.cmd().to_owned();
        let err = |out: &mut Vec<Action>, why: &str| {
            Self::reply2(out, rank, format!("cmd={}-response;rc=-1;errmsg={};", token(&cmd), why.replace(';', ",")))
        };
        if me.stage == Stage::Finalized && cmd != "finalize" {
            return err(out, "after finalize");
        }
        // Keys and values as PMI-2 carries them: no `;`.
        let clean = |v: &str| !v.contains(';');
        match cmd.as_str() {
            "fullinit" => {
                let asked = m.get("pmirank").or_else(|| m.get("pmiid"));
                if asked.is_some_and(|id| id.trim().parse::<u32>().ok() != Some(rank)) {
                    return err(out, &format!("this connection is rank {rank}"));
                }
                let (size, app) = (self.ranks.len(), me.appnum);
                Self::reply2(
                    out,
                    rank,
                    format!(
                        "cmd=fullinit-response;pmi-version=2;pmi-subversion=0;rank={rank};size={size};appnum={app};\
                         debugged=FALSE;pmiverbose=FALSE;rc=0;"
                    ),
                );
            }
            "job-getid" => Self::reply2(out, rank, format!("cmd=job-getid-response;jobid={};rc=0;", self.kvsname)),
            "info-getjobattr" => {
                let value = match m.get("key") {
                    Some("universeSize") => Some(self.universe.to_string()),
                    Some(k) => self.kvs.get(k).filter(|_| k.starts_with("PMI_")).map(str::to_owned),
                    None => return err(out, "missing key"),
                };
                let line = match value.filter(|v| clean(v)) {
                    Some(v) => format!("cmd=info-getjobattr-response;found=TRUE;value={v};rc=0;"),
                    None => "cmd=info-getjobattr-response;found=FALSE;rc=0;".to_owned(),
                };
                Self::reply2(out, rank, line);
            }
            "info-putnodeattr" => {
                let (Some(k), Some(v)) = (m.get("key"), m.get("value")) else {
                    return err(out, "missing key or value");
                };
                if k.is_empty() || k.len() > KEY_MAX || v.len() > VALUE_MAX {
                    return err(out, "key or value too long");
                }
                if self.node_attrs.put(&mut self.ranks, rank, k, v).is_err() {
                    return err(out, "too many keys");
                }
                Self::reply2(out, rank, "cmd=info-putnodeattr-response;rc=0;".into());
            }
            "info-getnodeattr" => {
                let Some(k) = m.get("key") else { return err(out, "missing key") };
                let line = match self.node_attrs.get(k) {
                    Some(v) => format!("cmd=info-getnodeattr-response;found=TRUE;value={v};rc=0;"),
                    None => "cmd=info-getnodeattr-response;found=FALSE;rc=0;".to_owned(),
                };
                Self::reply2(out, rank, line);
            }
            "kvs-put" => {
                let (Some(k), Some(v)) = (m.get("key"), m.get("value")) else {
                    return err(out, "missing key or value");
                };
                if k.is_empty() || k.len() > KEY_MAX {
                    return err(out, "key too long");
                }
                if v.len() > VALUE_MAX {
                    return err(out, "value too long");
                }
                if self.kvs.put(&mut self.ranks, rank, k, v).is_err() {
                    return err(out, "too many keys");
                }
                Self::reply2(out, rank, "cmd=kvs-put-response;rc=0;".into());
            }
            "kvs-get" => {
                let Some(k) = m.get("key") else { return err(out, "missing key") };
                if let Some(j) = m.get("jobid").filter(|j| !j.is_empty() && *j != self.kvsname) {
                    return err(out, &format!("unknown jobid {}", token(j)));
                }
                let line = match self.lookup_key(rank, k).filter(|v| clean(v)) {
                    Some(v) => format!("cmd=kvs-get-response;found=TRUE;value={v};rc=0;"),
                    None => "cmd=kvs-get-response;found=FALSE;rc=0;".to_owned(),
                };
                Self::reply2(out, rank, line);
            }
            "kvs-fence" => {
                if !self.enter_barrier(rank, out) {
                    err(out, "already in the fence");
                }
            }
            "finalize" => self.finalize_rank(rank, out),
            "spawn" => self.on_spawn2(rank, &m, out),
            "name-publish" | "name-unpublish" | "name-lookup" => {
                let body = self.on_name2(&cmd, &m);
                Self::reply2(out, rank, body);
            }
            "abort" => {
                let message = cut(m.get("message").or_else(|| m.get("msg")).unwrap_or("").to_owned());
                out.push(Action::Abort { rank, code: exit_code(m.get("exitcode")), message });
            }
            other => {
                tracing::warn!(rank, cmd = other, "unknown PMI-2 command");
                Self::reply2(out, rank, format!("cmd=error;rc=-1;errmsg=unknown command {};", token(other)));
            }
        }
    }

    fn put(&mut self, rank: u32, q: &Query<'_>) -> String {
        let (Some(key), Some(value)) = (q.get("key"), q.get("value")) else {
            return "cmd=put_result rc=-1 msg=missing_key_or_value".into();
        };
        if let Some(k) = q.get("kvsname")
            && k != self.kvsname
        {
            return format!("cmd=put_result rc=-1 msg=unknown_kvsname_{}", token(k));
        }
        if key.is_empty() || key.len() > KEY_MAX {
            return "cmd=put_result rc=-1 msg=key_too_long".into();
        }
        if value.len() > VALUE_MAX {
            return "cmd=put_result rc=-1 msg=value_too_long".into();
        }
        if self.kvs.put(&mut self.ranks, rank, key, value).is_err() {
            return "cmd=put_result rc=-1 msg=too_many_keys".into();
        }
        "cmd=put_result rc=0 msg=success".into()
    }

    fn get(&self, rank: u32, q: &Query<'_>) -> String {
        let Some(key) = q.get("key") else {
            return "cmd=get_result rc=-1 msg=missing_key value=unknown".into();
        };
        if let Some(k) = q.get("kvsname")
            && k != self.kvsname
        {
            return format!("cmd=get_result rc=-1 msg=unknown_kvsname_{} value=unknown", token(k));
        }
        match self.lookup_key(rank, key) {
            Some(v) => format!("cmd=get_result rc=0 msg=success value={v}"),
            None => format!("cmd=get_result rc=-1 msg=key_{}_not_found value=unknown", token(key)),
        }
    }

    /// `rank` enters the barrier (PMI-1 `barrier_in`, PMI-2 `kvs-fence`); false if it is in it
    /// already.
    fn enter_barrier(&mut self, rank: u32, out: &mut Vec<Action>) -> bool {
        let st = &mut self.ranks[rank as usize];
        if st.in_barrier {
            return false;
        }
        st.in_barrier = true;
        let group = st.group;
        self.release_barrier(group, out);
        true
    }

    /// `rank` finalizes: acknowledged in its wire format, out of every later barrier (one may
    /// have been waiting for it only).
    fn finalize_rank(&mut self, rank: u32, out: &mut Vec<Action>) {
        let st = &mut self.ranks[rank as usize];
        st.stage = Stage::Finalized;
        match st.wire {
            Wire::V1 => Self::reply(out, rank, "cmd=finalize_ack".into()),
            Wire::V2 => Self::reply2(out, rank, "cmd=finalize-response;rc=0;".into()),
        }
        let group = st.group;
        self.release_barrier(group, out);
    }

    /// Releases `group`'s barrier if every rank of it taking part entered it.
    fn release_barrier(&mut self, group: u32, out: &mut Vec<Action>) {
        let active = || self.ranks.iter().filter(|r| r.stage == Stage::Active && r.group == group);
        let waiting = active().filter(|r| r.in_barrier).count();
        if waiting == 0 || waiting < active().count() {
            return;
        }
        for (r, st) in self.ranks.iter_mut().enumerate() {
            if st.in_barrier && st.group == group {
                st.in_barrier = false;
                match st.wire {
                    Wire::V1 => Self::reply(out, r as u32, "cmd=barrier_out".into()),
                    Wire::V2 => Self::reply2(out, r as u32, "cmd=kvs-fence-response;rc=0;".into()),
                }
            }
        }
    }

    /// `rank` was started again (`nemesis-run --ft` restarts a failed group): it takes part in
    /// barriers again, as a fresh rank.
    pub fn rejoin(&mut self, rank: u32) {
        if let Some(st) = self.ranks.get_mut(rank as usize) {
            // Its keys stay, and count against it still.
            *st = RankPmi { keys: st.keys, group: st.group, appnum: st.appnum, ..RankPmi::fresh() };
        }
    }

    /// `rank` takes part no more: its connection closed or its process ended. A barrier that was
    /// waiting only for it completes.
    pub fn on_gone(&mut self, rank: u32, out: &mut Vec<Action>) {
        let Some(st) = self.ranks.get_mut(rank as usize) else {
            return;
        };
        if matches!(st.stage, Stage::Gone | Stage::Unborn) {
            return;
        }
        st.stage = Stage::Gone;
        st.in_barrier = false;
        let group = st.group;
        self.release_barrier(group, out);
    }
}

#[cfg(test)]
mod tests;
