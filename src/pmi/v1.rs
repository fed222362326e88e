//! PMI-1 "simple" wire protocol, client side: the protocol MPICH's Hydra speaks over the descriptor
//! it passes in `PMI_FD` (with `PMI_RANK`, `PMI_SIZE`), so `mpiexec.hydra -n 8 ./prog` starts a
//! nemesis program unmodified; `nemesis-run` implements the server side (`crate::launch`).
//!
//! Each exchange is one line of space-separated `key=value` attributes from the client and one in
//! reply, e.g. `cmd=init pmi_version=1 pmi_subversion=1` answered by
//! `cmd=response_to_init pmi_version=1 pmi_subversion=1 rc=0` (MPICH `src/pmi`, "PMI version 1.2
//! message protocol"). Values must not contain spaces, `=` or newlines; [`PmiClient::put`] refuses
//! them rather than corrupting the exchange.

use std::fs::File;
use std::io::BufReader;
use std::os::fd::{FromRawFd, RawFd};

use super::{REPLY_LINE_MAX, Session, check_token, env_num, pm_label, read_line_bounded, send_all};
use crate::error::{Error, Result};

/// A connection to a PMI-1 server.
#[derive(Debug)]
pub struct PmiClient {
    reader: BufReader<File>,
    writer: File,
    /// Whom we speak to, our rank and the job size.
    s: Session,
    appnum: i32,
    kvsname: String,
    /// Longest key and value the server accepts (from `get_maxes`).
    key_max: usize,
    val_max: usize,
}

/// The attributes of one reply line.
#[derive(Debug, Default)]
pub(super) struct Reply(Vec<(String, String)>, String);

impl Reply {
    fn parse(line: &str) -> Reply {
        Reply(
            line.split_ascii_whitespace()
                .filter_map(|t| t.split_once('=').map(|(k, v)| (k.to_owned(), v.to_owned())))
                .collect(),
            line.trim_end().chars().take(200).collect(),
        )
    }

    /// The line as received (at most 200 characters), for errors.
    pub(super) fn line(&self) -> &str {
        &self.1
    }

    pub(super) fn get(&self, key: &str) -> Option<&str> {
        self.0.iter().find(|(k, _)| k == key).map(|(_, v)| v.as_str())
    }

    pub(super) fn cmd(&self) -> &str {
        self.get("cmd").unwrap_or("")
    }

    /// `rc`, 0 when absent (some replies carry none).
    pub(super) fn rc(&self) -> i32 {
        self.get("rc").and_then(|v| v.parse().ok()).unwrap_or(0)
    }
}

impl PmiClient {
    /// Connects through the environment a PMI-1 process manager sets (`PMI_FD`, `PMI_RANK`,
    /// `PMI_SIZE`) and performs `init`, `get_maxes`, `get_appnum` and `get_my_kvsname`. `None` if
    /// no process manager started us (no `PMI_FD`): a singleton.
    pub fn from_env() -> Result<Option<PmiClient>> {
        if std::env::var_os("PMI_FD").is_none() {
            return Ok(None);
        }
        let pm = pm_label("PMI-1");
        let fd: RawFd = env_num(&pm, "PMI_FD")?;
        let rank: u32 = env_num(&pm, "PMI_RANK")?;
        let size: u32 = env_num(&pm, "PMI_SIZE")?;
        if rank >= size {
            return Err(Error::pmi(&pm, "environment", format!("PMI_RANK={rank} >= PMI_SIZE={size}")));
        }
        // SAFETY: the descriptor number comes from our process manager, which opened it for us; we
        // take ownership of it (nothing else in this process uses it).
        let file = unsafe { File::from_raw_fd(fd) };
        Self::connect_to(file, rank, size, pm).map(Some)
    }

    /// Performs the start-up exchanges over `file` for rank `rank` of `size`.
    pub fn connect(file: File, rank: u32, size: u32) -> Result<PmiClient> {
        Self::connect_to(file, rank, size, pm_label("PMI-1"))
    }

    fn connect_to(file: File, rank: u32, size: u32, pm: String) -> Result<PmiClient> {
        let writer = file.try_clone().map_err(|e| Error::io("dup PMI descriptor", e))?;
        let mut c = PmiClient {
            reader: BufReader::new(file),
            writer,
            s: Session::new(pm, rank, size),
            appnum: 0,
            kvsname: String::new(),
            key_max: 64,
            val_max: 256,
        };
        let r = c.exchange("init", "cmd=init pmi_version=1 pmi_subversion=1", "response_to_init")?;
        if r.rc() != 0 {
            return Err(c.s.err("init", format!("the server refused PMI 1.1 (rc={})", r.rc())));
        }
        let r = c.exchange("get_maxes", "cmd=get_maxes", "maxes")?;
        let num = |k| r.get(k).and_then(|v| v.parse::<usize>().ok());
        c.key_max = num("keylen_max").unwrap_or(c.key_max);
        c.val_max = num("vallen_max").unwrap_or(c.val_max);
        let r = c.exchange("get_appnum", "cmd=get_appnum", "appnum")?;
        c.appnum = r.get("appnum").and_then(|v| v.parse().ok()).unwrap_or(0);
        let r = c.exchange("get_my_kvsname", "cmd=get_my_kvsname", "my_kvsname")?;
        c.kvsname =
            r.get("kvsname").ok_or_else(|| c.s.err("get_my_kvsname", "no kvsname in the reply".into()))?.to_owned();
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

    /// The name of the job's key-value space.
    pub fn kvsname(&self) -> &str {
        &self.kvsname
    }

    /// Longest key and value the server accepts.
    pub fn maxes(&self) -> (usize, usize) {
        (self.key_max, self.val_max)
    }

    pub(super) fn send_line(&mut self, op: &'static str, line: &str) -> Result<()> {
        let mut buf = Vec::with_capacity(line.len() + 1);
        buf.extend_from_slice(line.as_bytes());
        buf.push(b'\n');
        send_all(&self.s.pm, op, &self.writer, &buf)
    }

    pub(super) fn read_reply(&mut self, op: &'static str) -> Result<Reply> {
        match read_line_bounded(&mut self.reader, REPLY_LINE_MAX, &self.s.pm, op)? {
            Some(line) => Ok(Reply::parse(&line)),
            None => Err(self.s.err(op, "the process manager closed the connection".into())),
        }
    }

    pub(super) fn exchange(&mut self, op: &'static str, line: &str, want: &str) -> Result<Reply> {
        self.send_line(op, line)?;
        let r = self.read_reply(op)?;
        if r.cmd() != want {
            return Err(self.s.err(op, format!("malformed reply: expected cmd={want}, got {:?}", r.line())));
        }
        Ok(r)
    }

    /// Stores `key = value` in the job's key-value space (visible to others after a barrier).
    pub fn put(&mut self, key: &str, value: &str) -> Result<()> {
        check_token(&self.s.pm, "put", "key", key, self.key_max, " =")?;
        check_token(&self.s.pm, "put", "value", value, self.val_max, " =")?;
        let line = format!("cmd=put kvsname={} key={key} value={value}", self.kvsname);
        let r = self.exchange("put", &line, "put_result")?;
        if r.rc() != 0 {
            return Err(self.s.err("put", format!("refused: {}", r.get("msg").unwrap_or("no reason given"))));
        }
        Ok(())
    }

    /// The value of `key`, or `None` if nobody put it.
    pub fn get(&mut self, key: &str) -> Result<Option<String>> {
        check_token(&self.s.pm, "get", "key", key, self.key_max, " =")?;
        let line = format!("cmd=get kvsname={} key={key}", self.kvsname);
        let r = self.exchange("get", &line, "get_result")?;
        if r.rc() != 0 {
            return Ok(None);
        }
        Ok(r.get("value").map(str::to_owned))
    }

    /// Waits until every process of the job has entered the barrier.
    pub fn barrier(&mut self) -> Result<()> {
        self.exchange("barrier", "cmd=barrier_in", "barrier_out").map(drop)
    }

    /// Ends the session cleanly.
    pub fn finalize(mut self) -> Result<()> {
        self.exchange("finalize", "cmd=finalize", "finalize_ack").map(drop)
    }

    /// Asks the process manager to end the job with `code` (no reply is expected).
    pub fn abort(&mut self, code: i32, msg: &str) -> Result<()> {
        let msg: String = msg.chars().map(|c| if c.is_whitespace() || c == '=' { '_' } else { c }).collect();
        self.send_line("abort", &format!("cmd=abort exitcode={code} msg={msg}"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::BufRead;
    use std::io::Write;
    use std::os::unix::net::UnixStream;

    /// A toy server answering one fixed script; the real server is `crate::launch`.
    fn serve(mut s: UnixStream, script: Vec<(&'static str, &'static str)>) -> std::thread::JoinHandle<Vec<String>> {
        std::thread::spawn(move || {
            let mut r = BufReader::new(s.try_clone().unwrap());
            let mut seen = Vec::new();
            for (expect, reply) in script {
                let mut line = String::new();
                r.read_line(&mut line).unwrap();
                assert!(line.starts_with(expect), "got {line:?}, expected {expect:?}");
                seen.push(line.trim_end().to_owned());
                if !reply.is_empty() {
                    s.write_all(reply.as_bytes()).unwrap();
                }
            }
            seen
        })
    }

    fn startup() -> Vec<(&'static str, &'static str)> {
        vec![
            ("cmd=init pmi_version=1 pmi_subversion=1", "cmd=response_to_init pmi_version=1 pmi_subversion=1 rc=0\n"),
            ("cmd=get_maxes", "cmd=maxes kvsname_max=256 keylen_max=64 vallen_max=1024 rc=0\n"),
            ("cmd=get_appnum", "cmd=appnum appnum=0 rc=0\n"),
            ("cmd=get_my_kvsname", "cmd=my_kvsname kvsname=kvs_42_0 rc=0\n"),
        ]
    }

    #[test]
    fn client_speaks_the_simple_protocol() {
        let (a, b) = UnixStream::pair().unwrap();
        let mut script = startup();
        script.extend([
            ("cmd=put kvsname=kvs_42_0 key=node-0 value=host", "cmd=put_result rc=0 msg=success\n"),
            ("cmd=barrier_in", "cmd=barrier_out\n"),
            ("cmd=get kvsname=kvs_42_0 key=node-1", "cmd=get_result rc=0 msg=success value=other\n"),
            ("cmd=get kvsname=kvs_42_0 key=missing", "cmd=get_result rc=-1 msg=key_missing\n"),
            ("cmd=abort exitcode=3 msg=it_broke", ""),
            ("cmd=finalize", "cmd=finalize_ack\n"),
        ]);
        let server = serve(b, script);
        let mut c = PmiClient::connect(File::from(std::os::fd::OwnedFd::from(a)), 0, 2).unwrap();
        assert_eq!((c.session().rank(), c.session().size(), c.kvsname(), c.maxes()), (0, 2, "kvs_42_0", (64, 1024)));
        c.put("node-0", "host").unwrap();
        c.barrier().unwrap();
        assert_eq!(c.get("node-1").unwrap().as_deref(), Some("other"));
        assert_eq!(c.get("missing").unwrap(), None);
        c.abort(3, "it broke").unwrap();
        c.finalize().unwrap();
        assert_eq!(server.join().unwrap().len(), 10);
    }

    #[test]
    fn bad_values_and_replies_are_typed_errors() {
        let (a, b) = UnixStream::pair().unwrap();
        let mut script = startup();
        script.push(("cmd=barrier_in", "cmd=something_else\n"));
        let server = serve(b, script);
        let mut c = PmiClient::connect(File::from(std::os::fd::OwnedFd::from(a)), 1, 2).unwrap();
        assert!(matches!(c.put("k", "has space"), Err(Error::Pmi { op: "put", .. })));
        assert!(matches!(c.put("k=1", "v"), Err(Error::Pmi { op: "put", .. })));
        assert!(matches!(c.put("k", &"x".repeat(2000)), Err(Error::Pmi { op: "put", .. })));
        assert!(matches!(c.barrier(), Err(Error::Pmi { op: "barrier", .. })));
        server.join().unwrap();
        // The server is gone: the next exchange reports it.
        assert!(matches!(c.barrier(), Err(Error::Pmi { .. })));
    }

    #[test]
    fn an_endless_reply_is_an_error_after_a_bounded_read() {
        let (a, b) = UnixStream::pair().unwrap();
        let server = serve(b.try_clone().unwrap(), startup());
        let mut c = PmiClient::connect(File::from(std::os::fd::OwnedFd::from(a)), 0, 2).unwrap();
        server.join().unwrap();
        // 8 MiB without a newline, then the server hangs up (or is hung up on).
        let flood = std::thread::spawn(move || {
            let mut b = b;
            let _ = b.write_all(&vec![b'x'; 8 << 20]);
        });
        let e = c.barrier().unwrap_err().to_string();
        assert!(e.contains("a reply longer than 65536 bytes"), "{e}");
        assert!(e.len() < 1000, "the error quotes a bounded part of the reply ({} bytes)", e.len());
        drop(c);
        flood.join().unwrap();
    }
}
