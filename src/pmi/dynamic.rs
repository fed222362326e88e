//! Dynamic processes through the process manager: spawn requests and the name service, as
//! MPICH's clients send them (PMI-1's `mcmd=spawn` blocks and `publish_name`/`lookup_name`/
//! `unpublish_name`; PMI-2's `cmd=spawn` and `name-publish`/`name-lookup`/`name-unpublish`).
//! `nemesis-run` serves both (`crate::launch::server`); other servers answer as they can (Slurm's
//! PMI-2 refuses spawn), and a refusal comes back as its reason, not as an error of the
//! connection.

use super::{Pmi2Client, PmiClient, ProcessManager, v2::frame};
use crate::error::Result;

/// One command of a spawn request.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SpawnCommand {
    /// The program.
    pub program: String,
    /// Its arguments.
    pub args: Vec<String>,
    /// Processes to start.
    pub maxprocs: u32,
    /// Info keys and values (`host`, `wdir`, `path`, `soft`).
    pub info: Vec<(String, String)>,
}

/// What the process manager answered: an error code per process started (0: started), or why
/// it started nothing.
pub type Answer<T> = std::result::Result<T, String>;

/// A PMI-1 value: spaces escaped (the server unescapes), newlines refused.
fn esc1(v: &str) -> Answer<String> {
    if v.contains(['\n', '\r']) {
        return Err(format!("{v:?}: a newline cannot be sent to the process manager"));
    }
    Ok(v.replace('\\', "\\\\").replace(' ', "\\ "))
}

/// A PMI-2 value: no `;`.
fn esc2(v: &str) -> Answer<&str> {
    if v.contains([';', '\n']) {
        return Err(format!("{v:?}: ';' and newlines cannot be sent to the process manager"));
    }
    Ok(v)
}

fn codes(v: Option<&str>, n: usize) -> Vec<i32> {
    match v {
        Some(v) if !v.is_empty() => v.split(',').map(|c| c.trim().parse().unwrap_or(1)).collect(),
        _ => vec![0; n],
    }
}

impl PmiClient {
    /// PMI-1 spawn: one `mcmd=spawn` block per command, one answer.
    pub fn spawn(&mut self, cmds: &[SpawnCommand], preput: &[(String, String)]) -> Result<Answer<Vec<i32>>> {
        let mut text = String::new();
        for (i, c) in cmds.iter().enumerate() {
            let mut block = vec![
                "mcmd=spawn".to_owned(),
                format!("nprocs={}", c.maxprocs),
                format!(
                    "execname={}",
                    match esc1(&c.program) {
                        Ok(v) => v,
                        Err(e) => return Ok(Err(e)),
                    }
                ),
                format!("totspawns={}", cmds.len()),
                format!("spawnssofar={}", i + 1),
                format!("argcnt={}", c.args.len()),
            ];
            for (j, a) in c.args.iter().enumerate() {
                match esc1(a) {
                    Ok(a) => block.push(format!("arg{}={a}", j + 1)),
                    Err(e) => return Ok(Err(e)),
                }
            }
            block.push(format!("preput_num={}", preput.len()));
            for (j, (k, v)) in preput.iter().enumerate() {
                block.push(format!("preput_key_{j}={k}"));
                block.push(format!("preput_val_{j}={v}"));
            }
            block.push(format!("info_num={}", c.info.len()));
            for (j, (k, v)) in c.info.iter().enumerate() {
                match (esc1(k), esc1(v)) {
                    (Ok(k), Ok(v)) => {
                        block.push(format!("info_key_{j}={k}"));
                        block.push(format!("info_val_{j}={v}"));
                    }
                    (Err(e), _) | (_, Err(e)) => return Ok(Err(e)),
                }
            }
            block.push("endcmd".into());
            text.push_str(&block.join("\n"));
            text.push('\n');
        }
        let text = text.trim_end_matches('\n');
        let r = self.exchange("spawn", text, "spawn_result")?;
        if r.rc() != 0 {
            return Ok(Err(r.get("msg").unwrap_or("the process manager refused").replace('_', " ")));
        }
        let n = cmds.iter().map(|c| c.maxprocs as usize).sum();
        Ok(Ok(codes(r.get("errcodes"), n)))
    }

    /// PMI-1 `publish_name`, `unpublish_name`, `lookup_name`: the port found by a lookup.
    pub fn name(&mut self, op: &'static str, service: &str, port: Option<&str>) -> Result<Answer<Option<String>>> {
        let service = match esc1(service) {
            Ok(s) => s,
            Err(e) => return Ok(Err(e)),
        };
        let mut line = format!("cmd={op} service={service}");
        if let Some(p) = port {
            line.push_str(&format!(" port={}", p.replace(' ', "\\ ")));
        }
        let want = format!("{}_result", op.trim_end_matches("_name"));
        self.send_line(op, &line)?;
        let r = self.read_reply(op)?;
        if r.cmd() != want {
            return Ok(Err(format!("the process manager does not serve {op} (it answered {:?})", r.line())));
        }
        if r.rc() != 0 {
            return Ok(Err(r.get("msg").unwrap_or("refused").replace('_', " ")));
        }
        Ok(Ok(r.get("port").map(str::to_owned)))
    }
}

impl Pmi2Client {
    /// PMI-2 spawn.
    pub fn spawn(&mut self, cmds: &[SpawnCommand], preput: &[(String, String)]) -> Result<Answer<Vec<i32>>> {
        let mut body = format!("cmd=spawn;ncmds={};preputcount={};", cmds.len(), preput.len());
        let add = |body: &mut String, k: String, v: &str| -> Answer<()> {
            body.push_str(&format!("{k}={};", esc2(v)?));
            Ok(())
        };
        let built = (|| -> Answer<()> {
            for (j, (k, v)) in preput.iter().enumerate() {
                add(&mut body, format!("ppkey{j}"), k)?;
                add(&mut body, format!("ppval{j}"), v)?;
            }
            for c in cmds {
                add(&mut body, "subcmd".into(), &c.program)?;
                add(&mut body, "maxprocs".into(), &c.maxprocs.to_string())?;
                add(&mut body, "argc".into(), &c.args.len().to_string())?;
                for (j, a) in c.args.iter().enumerate() {
                    add(&mut body, format!("argv{j}"), a)?;
                }
                add(&mut body, "infokeycount".into(), &c.info.len().to_string())?;
                for (j, (k, v)) in c.info.iter().enumerate() {
                    add(&mut body, format!("infokey{j}"), k)?;
                    add(&mut body, format!("infoval{j}"), v)?;
                }
            }
            Ok(())
        })();
        if let Err(e) = built {
            return Ok(Err(e));
        }
        self.write("spawn", frame(&body).as_bytes())?;
        let r = self.read("spawn")?;
        if r.cmd() != "spawn-response" || r.rc() != 0 {
            let why = r.get("errmsg").or_else(|| r.get("msg")).unwrap_or("the process manager refused");
            return Ok(Err(why.to_owned()));
        }
        let n = cmds.iter().map(|c| c.maxprocs as usize).sum();
        Ok(Ok(codes(r.get("errcodes"), n)))
    }

    /// PMI-2 `name-publish`, `name-unpublish`, `name-lookup`.
    pub fn name(&mut self, op: &'static str, service: &str, port: Option<&str>) -> Result<Answer<Option<String>>> {
        let cmd = match op {
            "publish_name" => "name-publish",
            "unpublish_name" => "name-unpublish",
            _ => "name-lookup",
        };
        let mut body = match esc2(service) {
            Ok(s) => format!("cmd={cmd};name={s};"),
            Err(e) => return Ok(Err(e)),
        };
        if let Some(p) = port {
            match esc2(p) {
                Ok(p) => body.push_str(&format!("port={p};")),
                Err(e) => return Ok(Err(e)),
            }
        }
        self.write(op, frame(&body).as_bytes())?;
        let r = self.read(op)?;
        if r.cmd() != format!("{cmd}-response") || r.rc() != 0 {
            let why = r.get("errmsg").or_else(|| r.get("msg")).unwrap_or("refused");
            return Ok(Err(why.to_owned()));
        }
        Ok(Ok(r.get("value").or_else(|| r.get("port")).map(str::to_owned)))
    }
}

impl ProcessManager {
    /// Asks the process manager to start `cmds` (one `MPI_COMM_WORLD` for all), with `preput`
    /// in their key-value space.
    pub fn spawn(&mut self, cmds: &[SpawnCommand], preput: &[(String, String)]) -> Result<Answer<Vec<i32>>> {
        match self {
            ProcessManager::Pmi1(c) => c.spawn(cmds, preput),
            ProcessManager::Pmi2(c) => c.spawn(cmds, preput),
            #[cfg(feature = "pmix")]
            ProcessManager::Pmix(_) => Ok(Err("nemesis's PMIx client does not spawn processes".into())),
        }
    }

    /// The name service: `op` is `publish_name` (with `port`), `unpublish_name` or
    /// `lookup_name` (answers the port).
    pub fn name_service(
        &mut self,
        op: &'static str,
        service: &str,
        port: Option<&str>,
    ) -> Result<Answer<Option<String>>> {
        match self {
            ProcessManager::Pmi1(c) => c.name(op, service, port),
            ProcessManager::Pmi2(c) => c.name(op, service, port),
            #[cfg(feature = "pmix")]
            ProcessManager::Pmix(_) => Ok(Err("nemesis's PMIx client has no name service".into())),
        }
    }
}
