//! `--tag-output`: one thread reads every rank's stdout and stderr pipes and writes each complete
//! line, prefixed `[rank] `, to the launcher's stdout or stderr in a single write, so lines of
//! different ranks never interleave within a line. A last line without a newline gets one.
//!
//! The thread is separate from the supervisor so that a slow reader of the launcher's output
//! never delays PMI replies or the teardown of a failed job.
//!
//! Its system calls (fcntl, pipe2, read, poll) go through `nix`: no `unsafe` here.
//!
//! [`sanitize`] makes text a rank sent the launcher (an abort message, a fault-tolerance warning)
//! safe for the operator's terminal; the ranks' own output is forwarded as they wrote it.

use std::io::{self, Write};
use std::os::fd::{AsFd, OwnedFd};
use std::thread::JoinHandle;

use nix::errno::Errno;
use nix::fcntl::{FcntlArg, OFlag, fcntl};
use nix::poll::{PollFd, PollFlags, PollTimeout, poll};

use crate::error::{Error, Result};

/// Which of the launcher's streams a pipe feeds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Stream {
    Stdout,
    Stderr,
}

/// One rank's pipe.
struct Source {
    rank: u32,
    stream: Stream,
    fd: OwnedFd,
    /// Bytes read after the last newline.
    partial: Vec<u8>,
}

/// A line longer than this is cut and emitted in pieces rather than held without bound.
const LINE_CAP: usize = 1 << 20;

/// The forwarding thread.
pub(crate) struct Forwarder {
    thread: Option<JoinHandle<()>>,
    /// Closing it (dropping) tells the thread to drain what is readable and stop.
    stop: Option<OwnedFd>,
}

fn set_nonblocking(fd: impl AsFd) -> io::Result<()> {
    let flags = OFlag::from_bits_retain(fcntl(fd.as_fd(), FcntlArg::F_GETFL)?);
    fcntl(fd.as_fd(), FcntlArg::F_SETFL(flags | OFlag::O_NONBLOCK))?;
    Ok(())
}

impl Forwarder {
    /// Starts forwarding `pipes` (rank, stream, read end).
    pub fn start(pipes: Vec<(u32, Stream, OwnedFd)>) -> Result<Forwarder> {
        let mut sources = Vec::with_capacity(pipes.len());
        for (rank, stream, fd) in pipes {
            set_nonblocking(&fd).map_err(|e| Error::io("output pipe O_NONBLOCK", e))?;
            sources.push(Source { rank, stream, fd, partial: Vec::new() });
        }
        let (stop_read, stop_write) =
            nix::unistd::pipe2(OFlag::O_CLOEXEC).map_err(|e| Error::io("pipe2", io::Error::from(e)))?;
        let thread = std::thread::Builder::new()
            .name("nemesis-run-output".into())
            .spawn(move || forward(sources, stop_read))
            .map_err(|e| Error::io("spawn the output thread", e))?;
        Ok(Forwarder { thread: Some(thread), stop: Some(stop_write) })
    }

    /// Drains what the ranks wrote and stops (called once every rank has exited: what is left in
    /// a pipe is readable at once; a grandchild still holding a pipe open is not waited for).
    pub fn finish(mut self) {
        self.stop_and_join();
    }

    fn stop_and_join(&mut self) {
        drop(self.stop.take());
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

impl Drop for Forwarder {
    fn drop(&mut self) {
        self.stop_and_join();
    }
}

/// Writes `[rank] line\n` for every complete line of `s.partial` (all of it if `all`).
fn emit(s: &mut Source, all: bool) {
    let mut out = Vec::new();
    let mut start = 0;
    while let Some(nl) = s.partial[start..].iter().position(|&b| b == b'\n') {
        push_line(&mut out, s.rank, &s.partial[start..start + nl]);
        start += nl + 1;
    }
    if (all || s.partial.len() - start >= LINE_CAP) && start < s.partial.len() {
        push_line(&mut out, s.rank, &s.partial[start..]);
        start = s.partial.len();
    }
    s.partial.drain(..start);
    if out.is_empty() {
        return;
    }
    // Errors (a closed stdout) are ignored: the ranks must not block on a full pipe because
    // nobody reads the launcher's output.
    let _ = match s.stream {
        Stream::Stdout => {
            let mut o = io::stdout().lock();
            o.write_all(&out).and_then(|()| o.flush())
        }
        Stream::Stderr => io::stderr().lock().write_all(&out),
    };
}

fn push_line(out: &mut Vec<u8>, rank: u32, line: &[u8]) {
    out.extend_from_slice(format!("[{rank}] ").as_bytes());
    out.extend_from_slice(line);
    out.push(b'\n');
}

/// Reads what is available from `s`, at most `budget` reads; false once it reached end of file
/// (or failed).
fn read_some(s: &mut Source, budget: usize) -> bool {
    let mut buf = [0u8; 65536];
    for _ in 0..budget {
        match nix::unistd::read(&s.fd, &mut buf) {
            Ok(0) => return false,
            Ok(n) => {
                s.partial.extend_from_slice(&buf[..n]);
                emit(s, false);
            }
            Err(Errno::EINTR) => {}
            Err(Errno::EAGAIN) => return true,
            Err(_) => return false,
        }
    }
    true
}

fn forward(mut sources: Vec<Source>, stop: OwnedFd) {
    let mut stopping = false;
    while !sources.is_empty() && !stopping {
        let mut pfds: Vec<PollFd<'_>> = sources.iter().map(|s| PollFd::new(s.fd.as_fd(), PollFlags::POLLIN)).collect();
        pfds.push(PollFd::new(stop.as_fd(), PollFlags::POLLIN));
        match poll(&mut pfds, PollTimeout::NONE) {
            Ok(_) => {}
            Err(Errno::EINTR) => continue,
            Err(_) => break,
        }
        let ready: Vec<bool> = pfds.iter().map(|p| p.revents().is_some_and(|r| !r.is_empty())).collect();
        drop(pfds);
        stopping = ready.last().copied().unwrap_or(false);
        let mut i = 0;
        sources.retain_mut(|s| {
            let ready = ready[i];
            i += 1;
            if !ready || read_some(s, usize::MAX) {
                return true;
            }
            emit(s, true);
            false
        });
    }
    // Stopping: the ranks are gone, what they wrote is in the pipes; take it and flush. A bounded
    // number of reads, in case a process they started goes on writing.
    for s in &mut sources {
        read_some(s, 64);
        emit(s, true);
    }
}

/// `text` as the launcher prints it for a rank: printable characters kept (any script), every
/// other one — control characters (so no escape sequence reaches the terminal), and the
/// invisible ones that reorder or hide text (bidirectional overrides, zero-width characters) —
/// written `\x1b` or `\u{202e}`; cut after `max` bytes of the result, saying how many bytes of
/// the text were left out.
pub(crate) fn sanitize(text: &str, max: usize) -> String {
    use std::fmt::Write as _;
    let mut out = String::with_capacity(text.len().min(max) + 32);
    for (at, c) in text.char_indices() {
        if out.len() >= max {
            let _ = write!(out, "... ({} more bytes)", text.len() - at);
            break;
        }
        if shown(c) {
            out.push(c);
        } else if (c as u32) < 0x100 {
            let _ = write!(out, "\\x{:02x}", c as u32);
        } else {
            let _ = write!(out, "\\u{{{:x}}}", c as u32);
        }
    }
    out
}

/// Whether `c` prints as itself: not a control character (C0, DEL, C1), not a format character
/// that moves or hides text.
fn shown(c: char) -> bool {
    !c.is_control()
        && !matches!(c, '\u{ad}' | '\u{200b}'..='\u{200f}' | '\u{2028}'..='\u{202e}' | '\u{2060}'..='\u{206f}' | '\u{feff}' | '\u{fff9}'..='\u{fffb}')
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sanitized_text_has_no_escapes_and_a_bound() {
        let evil = "boom\x1b]0;pwned\x07\x1b[2J\r\n\u{9b}31m\u{202e}txt.exe\u{7f}\0 \u{e9}t\u{e9} \u{1f600}";
        let s = sanitize(evil, 1000);
        assert_eq!(
            s,
            "boom\\x1b]0;pwned\\x07\\x1b[2J\\x0d\\x0a\\x9b31m\\u{202e}txt.exe\\x7f\\x00 \u{e9}t\u{e9} \u{1f600}"
        );
        assert!(!s.chars().any(|c| c.is_control()));
        let long = "a".repeat(5000);
        let s = sanitize(&long, 100);
        assert_eq!(s, format!("{}... (4900 more bytes)", "a".repeat(100)));
        assert_eq!(sanitize("", 10), "");
    }
}
