//! PMI-2 wire protocol, client side: what MPICH's Hydra and Slurm's `pmi2` plugin
//! (`srun --mpi=pmi2`) serve over the descriptor in `PMI_FD`; `nemesis-run` serves it too
//! (`crate::launch::server`).
//!
//! The conversation opens in the PMI-1 line format, `cmd=init pmi_version=2 pmi_subversion=0`
//! answered by `cmd=response_to_init pmi_version=2 pmi_subversion=0 rc=0`; from then on every
//! message is six ASCII characters giving the length of the rest (`printf("%6u")`), then
//! `cmd=<name>;key=value;...;` (MPICH `src/pmi/src/pmi_wire.c`, and the exchanges of
//! `src/pmi/maint/pmi-2.0.txt`):
//!
//! | query | reply |
//! |---|---|
//! | `cmd=fullinit;pmijobid=<j>;pmirank=<r>;threaded=FALSE;` | `cmd=fullinit-response;rank=<r>;size=<n>;appnum=<a>;rc=0;` |
//! | `cmd=job-getid;` | `cmd=job-getid-response;jobid=<id>;rc=0;` |
//! | `cmd=info-getjobattr;key=PMI_process_mapping;` | `cmd=info-getjobattr-response;found=TRUE;value=(vector,...);rc=0;` |
//! | `cmd=kvs-put;key=<k>;value=<v>;` | `cmd=kvs-put-response;rc=0;` |
//! | `cmd=kvs-fence;` | `cmd=kvs-fence-response;rc=0;` (see [`Pmi2Client::barrier`]) |
//! | `cmd=kvs-get;jobid=<id>;key=<k>;` | `cmd=kvs-get-response;found=TRUE;value=<v>;rc=0;` (or `found=FALSE`) |
//! | `cmd=finalize;` | `cmd=finalize-response;rc=0;` |
//! | `cmd=abort;isworld=TRUE;exitcode=<n>;message=<m>;` | none: the job ends |
//!
//! A reply with a non-zero `rc` is an error carrying the server's `errmsg`. Values cannot hold
//! `;` (PMI-2 has no escape that every server reads alike): [`Pmi2Client::put`] refuses them.

use std::fs::File;
use std::io::{BufReader, ErrorKind, Read};
use std::os::fd::{FromRawFd, RawFd};

use super::{REPLY_LINE_MAX, Session, check_token, env_num, pm_label, read_line_bounded, send_all};
use crate::error::{Error, Result};

/// Longest key and value sent (`PMI2_MAX_KEYLEN`, `PMI2_MAX_VALLEN` of MPICH's and Slurm's
/// `pmi2.h`).
pub const KEY_MAX: usize = 64;
/// See [`KEY_MAX`].
pub const VALUE_MAX: usize = 1024;
/// The key nobody puts, got after each fence to wait for every process (see
/// [`Pmi2Client::barrier`]).
pub const BARRIER_KEY: &str = "nemesis-no-such-key";

/// Longest reply accepted (MPICH's `PMII_MAX_COMMAND_LEN`).
pub const MESSAGE_MAX: usize = 64 * 1024;

/// One PMI-2 message: its attributes in order, and the text for errors.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Message {
    attrs: Vec<(String, String)>,
    text: String,
}

impl Message {
    /// Parses the body of a message (after the length): `cmd=<name>;key=value;...;`. `None`
    /// if it does not start with `cmd=`.
    pub fn parse(body: &str) -> Option<Message> {
        if !body.starts_with("cmd=") {
            return None;
        }
        let attrs = body
            .split(';')
            .filter(|t| !t.is_empty())
            .map(|t| match t.split_once('=') {
                Some((k, v)) => (k.trim().to_owned(), v.to_owned()),
                None => (t.trim().to_owned(), String::new()),
            })
            .collect();
        Some(Message { attrs, text: body.chars().take(200).collect() })
    }

    /// The value of `key`.
    pub fn get(&self, key: &str) -> Option<&str> {
        self.attrs.iter().find(|(k, _)| k == key).map(|(_, v)| v.as_str())
    }

    /// The command name.
    pub fn cmd(&self) -> &str {
        self.get("cmd").unwrap_or("")
    }

    /// `rc`, 0 when absent.
    pub fn rc(&self) -> i32 {
        self.get("rc").and_then(|v| v.trim().parse().ok()).unwrap_or(0)
    }

    /// True if `key` is `TRUE` (PMI-2's boolean; `1` and `yes` accepted too).
    pub fn flag(&self, key: &str) -> bool {
        self.get(key).is_some_and(|v| matches!(v.trim(), "TRUE" | "true" | "1" | "yes"))
    }

    /// The attributes after `cmd`, in order.
    pub fn attrs(&self) -> impl Iterator<Item = (&str, &str)> {
        self.attrs.iter().filter(|(k, _)| k != "cmd").map(|(k, v)| (k.as_str(), v.as_str()))
    }

    /// The message as received (at most 200 characters).
    pub fn text(&self) -> &str {
        &self.text
    }
}

/// Frames `body` (`cmd=...;`) for the wire: its length in six characters, then the body.
pub fn frame(body: &str) -> String {
    format!("{:6}{body}", body.len())
}

/// A connection to a PMI-2 server.
#[derive(Debug)]
pub struct Pmi2Client {
    reader: BufReader<File>,
    writer: File,
    /// Whom we speak to, our rank and the job size.
    s: Session,
    appnum: i32,
    job_id: String,
}

impl Pmi2Client {
    /// Connects through `PMI_FD` (with `PMI_ID` or `PMI_RANK` naming this process to the server,
    /// as MPICH's client does, and `PMI_JOBID` its job, which Slurm requires) and performs `init`,
    /// `fullinit` and `job-getid`. `None` without `PMI_FD`.
    pub fn from_env() -> Result<Option<Pmi2Client>> {
        if std::env::var_os("PMI_FD").is_none() {
            return Ok(None);
        }
        let pm = pm_label("PMI-2");
        let fd: RawFd = env_num(&pm, "PMI_FD")?;
        let id = ["PMI_ID", "PMI_RANK"]
            .into_iter()
            .find(|v| std::env::var_os(v).is_some())
            .map(|v| env_num::<u32>(&pm, v))
            .transpose()?;
        // SAFETY: the descriptor number comes from our process manager, which opened it for us; we
        // take ownership of it (nothing else in this process uses it).
        let file = unsafe { File::from_raw_fd(fd) };
        let job = std::env::var("PMI_JOBID").ok().filter(|j| !j.is_empty() && !j.contains(';'));
        Self::connect_to(file, id, job.as_deref(), pm).map(Some)
    }

    /// Performs the start-up exchanges over `file`; `id` is what the server knows this process
    /// by (its rank, from `PMI_RANK`), if anything, and `job` the job id the server gave.
    pub fn connect(file: File, id: Option<u32>, job: Option<&str>) -> Result<Pmi2Client> {
        Self::connect_to(file, id, job, pm_label("PMI-2"))
    }

    fn connect_to(file: File, id: Option<u32>, job: Option<&str>, pm: String) -> Result<Pmi2Client> {
        let writer = file.try_clone().map_err(|e| Error::io("dup PMI descriptor", e))?;
        let mut c = Pmi2Client {
            reader: BufReader::new(file),
            writer,
            s: Session::new(pm, 0, 0),
            appnum: 0,
            job_id: String::new(),
        };
        // The opening exchange is in PMI-1's line format.
        c.write("init", b"cmd=init pmi_version=2 pmi_subversion=0\n")?;
        let Some(line) = read_line_bounded(&mut c.reader, REPLY_LINE_MAX, &c.s.pm, "init")? else {
            return Err(c.s.err("init", "the process manager closed the connection".into()));
        };
        let words: Vec<(&str, &str)> = line.split_ascii_whitespace().filter_map(|w| w.split_once('=')).collect();
        let attr = |k: &str| words.iter().find(|(key, _)| *key == k).map(|(_, v)| *v);
        if attr("cmd") != Some("response_to_init") {
            return Err(c.s.err("init", format!("malformed reply {:?}", line.trim_end())));
        }
        if attr("rc").is_some_and(|rc| rc != "0") || attr("pmi_version") != Some("2") {
            return Err(c.s.err("init", format!("the server does not speak PMI-2: it answered {:?}", line.trim_end())));
        }
        let mut query = "cmd=fullinit;".to_owned();
        if let Some(job) = job {
            query += &format!("pmijobid={job};");
        }
        if let Some(id) = id {
            query += &format!("pmirank={id};");
        }
        query += "threaded=FALSE;";
        let r = c.exchange("fullinit", &query, "fullinit-response")?;
        let num = |k: &str| r.get(k).and_then(|v| v.trim().parse::<i64>().ok());
        let (Some(rank), Some(size)) = (num("rank"), num("size")) else {
            return Err(c.s.err("fullinit", format!("no rank or size in the reply {:?}", r.text())));
        };
        if size < 1 || rank < 0 || rank >= size || size > i64::from(u32::MAX) {
            return Err(c.s.err("fullinit", format!("rank {rank} of {size} in the reply {:?}", r.text())));
        }
        (c.s.rank, c.s.size, c.appnum) = (rank as u32, size as u32, num("appnum").unwrap_or(0) as i32);
        let r = c.exchange("job-getid", "cmd=job-getid;", "job-getid-response")?;
        c.job_id = match r.get("jobid") {
            Some(j) if !j.is_empty() => j.to_owned(),
            _ => return Err(c.s.err("job-getid", format!("no jobid in the reply {:?}", r.text()))),
        };
        Ok(c)
    }

    /// Whom it speaks to and its place in the job.
    pub fn session(&self) -> &Session {
        &self.s
    }

    /// The application number (MPMD jobs).
    pub fn appnum(&self) -> i32 {
        self.appnum
    }

    /// The job's id (its key-value space).
    pub fn job_id(&self) -> &str {
        &self.job_id
    }

    pub(super) fn write(&mut self, op: &'static str, bytes: &[u8]) -> Result<()> {
        send_all(&self.s.pm, op, &self.writer, bytes)
    }

    pub(super) fn read(&mut self, op: &'static str) -> Result<Message> {
        let closed = |pm: &str, e: std::io::Error| {
            if e.kind() == ErrorKind::UnexpectedEof {
                Error::pmi(pm, op, "the process manager closed the connection".into())
            } else {
                Error::pmi(pm, op, format!("read: {e}"))
            }
        };
        let mut len = [0u8; 6];
        self.reader.read_exact(&mut len).map_err(|e| closed(&self.s.pm, e))?;
        let n = std::str::from_utf8(&len)
            .ok()
            .and_then(|s| s.trim().parse::<usize>().ok())
            .filter(|&n| n <= MESSAGE_MAX)
            .ok_or_else(|| {
                self.s.err(op, format!("malformed reply: length field {:?}", String::from_utf8_lossy(&len)))
            })?;
        let mut body = vec![0u8; n];
        self.reader.read_exact(&mut body).map_err(|e| closed(&self.s.pm, e))?;
        let body = String::from_utf8_lossy(&body);
        Message::parse(&body).ok_or_else(|| self.s.err(op, format!("malformed reply {body:?}")))
    }

    /// Sends `body` and reads the reply, which must be `want` with `rc=0`.
    fn exchange(&mut self, op: &'static str, body: &str, want: &str) -> Result<Message> {
        self.write(op, frame(body).as_bytes())?;
        let r = self.read(op)?;
        if r.cmd() != want {
            return Err(self.s.err(op, format!("malformed reply: expected cmd={want}, got {:?}", r.text())));
        }
        if r.rc() != 0 {
            let why = r.get("errmsg").or_else(|| r.get("msg")).unwrap_or("no reason given");
            return Err(self.s.err(op, format!("refused (rc={}): {why}", r.rc())));
        }
        Ok(r)
    }

    /// Stores `key = value` in the job's key-value space (visible to others after a fence).
    pub fn put(&mut self, key: &str, value: &str) -> Result<()> {
        check_token(&self.s.pm, "kvs-put", "key", key, KEY_MAX, ";=")?;
        check_token(&self.s.pm, "kvs-put", "value", value, VALUE_MAX, ";")?;
        self.exchange("kvs-put", &format!("cmd=kvs-put;key={key};value={value};"), "kvs-put-response").map(drop)
    }

    /// The value of `key`, or `None` if nobody put it.
    pub fn get(&mut self, key: &str) -> Result<Option<String>> {
        check_token(&self.s.pm, "kvs-get", "key", key, KEY_MAX, ";=")?;
        let body = format!("cmd=kvs-get;jobid={};key={key};", self.job_id);
        let r = self.exchange("kvs-get", &body, "kvs-get-response")?;
        Ok(if r.flag("found") { r.get("value").map(str::to_owned) } else { None })
    }

    /// The job attribute `key` (e.g. `PMI_process_mapping`), or `None` if the server has none.
    pub fn job_attr(&mut self, key: &str) -> Result<Option<String>> {
        check_token(&self.s.pm, "info-getjobattr", "key", key, KEY_MAX, ";=")?;
        let body = format!("cmd=info-getjobattr;key={key};");
        let r = self.exchange("info-getjobattr", &body, "info-getjobattr-response")?;
        Ok(if r.flag("found") { r.get("value").map(str::to_owned) } else { None })
    }

    /// Waits until every process of the job has entered the fence; puts before it are visible to
    /// every process after it. A fence alone is not a barrier everywhere: Hydra answers it at once
    /// and holds back instead any `kvs-get` of a missing key until every process has fenced, so a
    /// get of a key nobody puts follows (MPICH's PMI-2 barrier does the same); Slurm's and
    /// `nemesis-run`'s fences wait, and the get then answers at once.
    pub fn barrier(&mut self) -> Result<()> {
        self.exchange("kvs-fence", "cmd=kvs-fence;", "kvs-fence-response")?;
        let body = format!("cmd=kvs-get;jobid={};key={BARRIER_KEY};", self.job_id);
        self.exchange("kvs-fence", &body, "kvs-get-response").map(drop)
    }

    /// Ends the session cleanly.
    pub fn finalize(mut self) -> Result<()> {
        self.exchange("finalize", "cmd=finalize;", "finalize-response").map(drop)
    }

    /// Asks the process manager to end the job with `code` (no reply is expected).
    pub fn abort(&mut self, code: i32, msg: &str) -> Result<()> {
        let msg: String = msg.chars().take(512).map(|c| if c == ';' || c.is_control() { ' ' } else { c }).collect();
        let body = format!("cmd=abort;isworld=TRUE;exitcode={code};message={msg};");
        self.write("abort", frame(&body).as_bytes())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::BufRead;
    use std::io::Write;
    use std::os::unix::net::UnixStream;

    /// A toy server answering a fixed script (after the PMI-1 style init line); the real server
    /// is `crate::launch::server`.
    fn serve(
        s: UnixStream,
        init_reply: &'static str,
        script: Vec<(&'static str, String)>,
    ) -> std::thread::JoinHandle<()> {
        std::thread::spawn(move || {
            let mut r = BufReader::new(s.try_clone().unwrap());
            let mut w = s;
            let mut line = String::new();
            r.read_line(&mut line).unwrap();
            assert_eq!(line, "cmd=init pmi_version=2 pmi_subversion=0\n");
            w.write_all(init_reply.as_bytes()).unwrap();
            for (expect, reply) in script {
                let mut len = [0u8; 6];
                if r.read_exact(&mut len).is_err() {
                    return;
                }
                let n: usize = std::str::from_utf8(&len).unwrap().trim().parse().unwrap();
                let mut body = vec![0u8; n];
                r.read_exact(&mut body).unwrap();
                let body = String::from_utf8(body).unwrap();
                assert_eq!(body, expect);
                w.write_all(reply.as_bytes()).unwrap();
            }
        })
    }

    const INIT_OK: &str = "cmd=response_to_init pmi_version=2 pmi_subversion=0 rc=0\n";

    fn startup() -> Vec<(&'static str, String)> {
        vec![
            (
                "cmd=fullinit;pmijobid=7.0;pmirank=1;threaded=FALSE;",
                frame(
                    "cmd=fullinit-response;pmi-version=2;pmi-subversion=0;rank=1;size=4;appnum=0;debugged=FALSE;pmiverbose=FALSE;rc=0;",
                ),
            ),
            ("cmd=job-getid;", frame("cmd=job-getid-response;jobid=kvs_7_0;rc=0;")),
        ]
    }

    fn pair() -> (File, UnixStream) {
        let (a, b) = UnixStream::pair().unwrap();
        (File::from(std::os::fd::OwnedFd::from(a)), b)
    }

    #[test]
    fn client_speaks_pmi2() {
        let (f, s) = pair();
        let mut script = startup();
        script.extend([
            ("cmd=kvs-put;key=nemesis-node-1;value=host a;", frame("cmd=kvs-put-response;rc=0;")),
            ("cmd=kvs-fence;", frame("cmd=kvs-fence-response;rc=0;")),
            ("cmd=kvs-get;jobid=kvs_7_0;key=nemesis-no-such-key;", frame("cmd=kvs-get-response;found=FALSE;rc=0;")),
            ("cmd=kvs-get;jobid=kvs_7_0;key=k;", frame("cmd=kvs-get-response;found=TRUE;value=v=1;rc=0;")),
            ("cmd=kvs-get;jobid=kvs_7_0;key=gone;", frame("cmd=kvs-get-response;found=FALSE;rc=0;")),
            (
                "cmd=info-getjobattr;key=PMI_process_mapping;",
                frame("cmd=info-getjobattr-response;found=TRUE;value=(vector,(0,1,4));rc=0;"),
            ),
            ("cmd=abort;isworld=TRUE;exitcode=3;message=it broke ;", String::new()),
            ("cmd=finalize;", frame("cmd=finalize-response;rc=0;")),
        ]);
        let server = serve(s, INIT_OK, script);
        let mut c = Pmi2Client::connect(f, Some(1), Some("7.0")).unwrap();
        assert_eq!((c.session().rank(), c.session().size(), c.appnum(), c.job_id()), (1, 4, 0, "kvs_7_0"));
        c.put("nemesis-node-1", "host a").unwrap();
        c.barrier().unwrap();
        assert_eq!(c.get("k").unwrap().as_deref(), Some("v=1"));
        assert_eq!(c.get("gone").unwrap(), None);
        assert_eq!(c.job_attr("PMI_process_mapping").unwrap().as_deref(), Some("(vector,(0,1,4))"));
        c.abort(3, "it broke;").unwrap();
        c.finalize().unwrap();
        server.join().unwrap();
    }

    #[test]
    fn a_server_that_speaks_only_pmi1_is_named() {
        let (f, s) = pair();
        let server = serve(s, "cmd=response_to_init pmi_version=1 pmi_subversion=1 rc=-1\n", vec![]);
        let e = Pmi2Client::connect(f, Some(0), None).unwrap_err();
        assert!(e.to_string().contains("does not speak PMI-2"), "{e}");
        assert!(matches!(e, Error::Pmi { op: "init", .. }));
        server.join().unwrap();
    }

    #[test]
    fn malformed_replies_refusals_and_a_closed_server_are_errors() {
        // A reply whose length field is not a number.
        let (f, s) = pair();
        let server =
            serve(s, INIT_OK, vec![("cmd=fullinit;pmirank=1;threaded=FALSE;", "abcdefcmd=fullinit-response;".into())]);
        let e = Pmi2Client::connect(f, Some(1), None).unwrap_err();
        assert!(e.to_string().contains("malformed reply: length field"), "{e}");
        server.join().unwrap();
        // The wrong command, then rc != 0, then the server closes.
        let (f, s) = pair();
        let mut script = startup();
        script.push(("cmd=kvs-fence;", frame("cmd=kvs-put-response;rc=0;")));
        script.push(("cmd=kvs-put;key=a;value=b;", frame("cmd=kvs-put-response;rc=-1;errmsg=kvs full;")));
        let server = serve(s, INIT_OK, script);
        let mut c = Pmi2Client::connect(f, Some(1), Some("7.0")).unwrap();
        let e = c.barrier().unwrap_err();
        assert!(e.to_string().contains("expected cmd=kvs-fence-response"), "{e}");
        let e = c.put("a", "b").unwrap_err();
        assert!(e.to_string().contains("refused (rc=-1): kvs full"), "{e}");
        assert!(matches!(c.put("a", "has;semicolon"), Err(Error::Pmi { op: "kvs-put", .. })));
        assert!(matches!(c.get("k=1"), Err(Error::Pmi { op: "kvs-get", .. })));
        server.join().unwrap();
        let e = c.get("k").unwrap_err();
        assert!(e.to_string().contains("closed the connection"), "{e}");
        // A reply cut short.
        let (f, s) = pair();
        let server = serve(s, INIT_OK, vec![("cmd=fullinit;pmirank=1;threaded=FALSE;", "    40cmd=fullinit".into())]);
        let e = Pmi2Client::connect(f, Some(1), None).unwrap_err();
        assert!(e.to_string().contains("closed the connection"), "{e}");
        server.join().unwrap();
    }

    #[test]
    fn messages_parse() {
        let m = Message::parse("cmd=kvs-get-response;found=TRUE;value=a=b;rc=0;").unwrap();
        assert_eq!((m.cmd(), m.get("value"), m.rc(), m.flag("found")), ("kvs-get-response", Some("a=b"), 0, true));
        assert_eq!(m.attrs().count(), 3);
        assert!(Message::parse("rc=0;cmd=x;").is_none());
        assert_eq!(frame("cmd=kvs-fence;"), "    14cmd=kvs-fence;");
    }
}
