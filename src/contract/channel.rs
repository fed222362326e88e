//! The fault-tolerance channel between `nemesis-run` and each rank: a Unix socket pair per rank
//! (the rank's end inherited as descriptor [`ENV_FT_FD`]), carrying the HydEE engine's messages
//! between processes and the launcher's recovery coordinators, and the launcher's restart protocol
//! (`nemesis_shm::incarnation`; over several nodes, restarted ranks' new cards, [`Frame::Card`]).
//! Why a socket of its own rather than the PMI connection: `docs/design/launcher.md`.
//!
//! Frames: a 4-byte little-endian body length (at most [`FRAME_MAX`]), then the body: a kind byte
//! and its fields (little-endian integers). A malformed frame is a typed error, never a panic. The
//! launcher sets the rank's mail flag in the segment (`RankState::mail`) after writing and rings its
//! doorbell, so a rank reads the socket only when there is something to read.

use std::io::{self, Read};
use std::os::fd::AsRawFd;
use std::os::unix::net::UnixStream;

use nemesis_ft::{Control, CoordinatorId, Round};

use crate::error::{Error, Result};

pub use super::env::{ENV_FT_FD, ENV_FT_RECOVERY};

/// Longest frame body accepted.
pub const FRAME_MAX: usize = 1 << 20;

mod kind {
    pub const ENGINE: u8 = 1;
    pub const RETIRE: u8 = 2;
    pub const RETIRED: u8 = 3;
    pub const REPLAYED: u8 = 4;
    pub const RUNNING: u8 = 5;
    pub const FINISHING: u8 = 6;
    pub const FINISH: u8 = 7;
    pub const RESTORED: u8 = 8;
    pub const WARNING: u8 = 9;
    pub const UNRECOVERABLE: u8 = 10;
    pub const CARD: u8 = 11;
}

/// One frame.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Frame {
    /// An engine message from (launcher → rank) or to (rank → launcher) recovery coordinator
    /// `coordinator`.
    Engine { coordinator: CoordinatorId, msg: Control },
    /// Launcher → surviving rank: these dead ranks will be restarted; forget them
    /// (`Port::retire_peer`) and answer [`Frame::Retired`].
    Retire { ranks: Vec<u32> },
    /// Rank → launcher: done for these ranks.
    Retired { ranks: Vec<u32> },
    /// Rank → launcher: messages (and their payload bytes) it replayed from its log in `round`,
    /// since its previous report.
    Replayed { round: Round, messages: u64, bytes: u64 },
    /// Restarted rank → launcher: it restored checkpoint `generation` (0: none, from the start)
    /// and runs.
    Running { generation: u64 },
    /// Restarted rank → launcher, before [`Frame::Running`]: it took `read_us` µs to find, read,
    /// check and restore its group's last durable checkpoint (or to find there is none), whose
    /// file it wrote at `written_unix_us` µs after the Unix epoch (0: no checkpoint). The launcher
    /// reports them with the recovery (the checkpoint's read time, the work the group lost).
    Restored { read_us: u64, written_unix_us: u64 },
    /// Rank → launcher: it reached the end of its program (finalize) and waits for
    /// [`Frame::Finish`], serving recovery meanwhile.
    Finishing,
    /// Launcher → ranks: every rank is finishing and no recovery is under way.
    Finish,
    /// Restarted rank → launcher: something to tell the user (the launcher prints it), e.g. a
    /// damaged checkpoint file its group fell back from.
    Warning { text: String },
    /// Restarted rank → launcher: its group cannot restart (why): the job ends.
    Unrecoverable { text: String },
    /// Launcher → every other rank (`--nodes` above 1): restarted rank `rank` runs as
    /// incarnation `incarnation` and its netmod is reached at `card` (the business card it put).
    Card { rank: u32, incarnation: u32, card: String },
}

fn bad(what: &str) -> Error {
    Error::Config(format!("fault-tolerance channel: malformed frame ({what})"))
}

/// Reads little-endian fields from a frame body.
struct Fields<'a>(&'a [u8]);

impl Fields<'_> {
    fn u32(&mut self) -> Result<u32> {
        let (h, t) = self.0.split_first_chunk::<4>().ok_or_else(|| bad("short field"))?;
        self.0 = t;
        Ok(u32::from_le_bytes(*h))
    }
    fn u64(&mut self) -> Result<u64> {
        let (h, t) = self.0.split_first_chunk::<8>().ok_or_else(|| bad("short field"))?;
        self.0 = t;
        Ok(u64::from_le_bytes(*h))
    }
    fn ranks(&mut self) -> Result<Vec<u32>> {
        let n = self.u32()? as usize;
        if n > self.0.len() / 4 {
            return Err(bad("rank count beyond the frame"));
        }
        (0..n).map(|_| self.u32()).collect()
    }
    fn text(&mut self) -> Result<String> {
        let n = self.u32()? as usize;
        if n > self.0.len() {
            return Err(bad("text beyond the frame"));
        }
        let (t, rest) = self.0.split_at(n);
        self.0 = rest;
        String::from_utf8(t.to_vec()).map_err(|_| bad("text not UTF-8"))
    }
    fn end(self) -> Result<()> {
        if self.0.is_empty() { Ok(()) } else { Err(bad("trailing bytes")) }
    }
}

impl Frame {
    /// Appends the frame, length first, to `out`.
    pub fn encode(&self, out: &mut Vec<u8>) {
        let start = out.len();
        out.extend_from_slice(&[0; 4]);
        let ranks = |out: &mut Vec<u8>, k: u8, r: &[u32]| {
            out.push(k);
            out.extend_from_slice(&(r.len() as u32).to_le_bytes());
            for x in r {
                out.extend_from_slice(&x.to_le_bytes());
            }
        };
        match self {
            Frame::Engine { coordinator, msg } => {
                out.push(kind::ENGINE);
                out.extend_from_slice(&coordinator.to_le_bytes());
                msg.encode_into(out);
            }
            Frame::Retire { ranks: r } => ranks(out, kind::RETIRE, r),
            Frame::Retired { ranks: r } => ranks(out, kind::RETIRED, r),
            Frame::Replayed { round, messages, bytes } => {
                out.push(kind::REPLAYED);
                for v in [*round, *messages, *bytes] {
                    out.extend_from_slice(&v.to_le_bytes());
                }
            }
            Frame::Running { generation } => {
                out.push(kind::RUNNING);
                out.extend_from_slice(&generation.to_le_bytes());
            }
            Frame::Restored { read_us, written_unix_us } => {
                out.push(kind::RESTORED);
                for v in [*read_us, *written_unix_us] {
                    out.extend_from_slice(&v.to_le_bytes());
                }
            }
            Frame::Finishing => out.push(kind::FINISHING),
            Frame::Finish => out.push(kind::FINISH),
            Frame::Card { rank, incarnation, card } => {
                out.push(kind::CARD);
                for v in [*rank, *incarnation, card.len() as u32] {
                    out.extend_from_slice(&v.to_le_bytes());
                }
                out.extend_from_slice(card.as_bytes());
            }
            Frame::Warning { text } | Frame::Unrecoverable { text } => {
                out.push(if matches!(self, Frame::Warning { .. }) { kind::WARNING } else { kind::UNRECOVERABLE });
                // Longer texts are cut (at a character boundary) to fit a frame.
                let mut n = text.len().min(FRAME_MAX - 16);
                while !text.is_char_boundary(n) {
                    n -= 1;
                }
                out.extend_from_slice(&(n as u32).to_le_bytes());
                out.extend_from_slice(&text.as_bytes()[..n]);
            }
        }
        let len = (out.len() - start - 4) as u32;
        out[start..start + 4].copy_from_slice(&len.to_le_bytes());
    }

    /// Decodes one frame body.
    pub fn decode(body: &[u8]) -> Result<Frame> {
        let (&k, rest) = body.split_first().ok_or_else(|| bad("empty"))?;
        let mut f = Fields(rest);
        let frame = match k {
            kind::ENGINE => {
                let coordinator = f.u32()?;
                let msg = Control::decode(f.0)?;
                return Ok(Frame::Engine { coordinator, msg });
            }
            kind::RETIRE => Frame::Retire { ranks: f.ranks()? },
            kind::RETIRED => Frame::Retired { ranks: f.ranks()? },
            kind::REPLAYED => Frame::Replayed { round: f.u64()?, messages: f.u64()?, bytes: f.u64()? },
            kind::RUNNING => Frame::Running { generation: f.u64()? },
            kind::RESTORED => Frame::Restored { read_us: f.u64()?, written_unix_us: f.u64()? },
            kind::FINISHING => Frame::Finishing,
            kind::FINISH => Frame::Finish,
            kind::WARNING => Frame::Warning { text: f.text()? },
            kind::UNRECOVERABLE => Frame::Unrecoverable { text: f.text()? },
            kind::CARD => Frame::Card { rank: f.u32()?, incarnation: f.u32()?, card: f.text()? },
            _ => return Err(bad("unknown kind")),
        };
        f.end()?;
        Ok(frame)
    }
}

/// One end of a channel: a non-blocking socket with its input and output buffers.
#[derive(Debug)]
pub struct Channel {
    sock: UnixStream,
    input: Vec<u8>,
    output: Vec<u8>,
    closed: bool,
}

impl Channel {
    /// A channel over `sock` (made non-blocking).
    pub fn new(sock: UnixStream) -> Result<Channel> {
        sock.set_nonblocking(true).map_err(|e| Error::io("fault-tolerance channel O_NONBLOCK", e))?;
        Ok(Channel { sock, input: Vec::new(), output: Vec::new(), closed: false })
    }

    /// The socket (for `poll`).
    pub fn socket(&self) -> &UnixStream {
        &self.sock
    }

    /// True once the other end closed (or the socket failed).
    pub fn is_closed(&self) -> bool {
        self.closed
    }

    /// Whether output waits to be written.
    pub fn has_output(&self) -> bool {
        !self.output.is_empty()
    }

    /// Queues `frame` and writes what the socket takes now.
    pub fn send(&mut self, frame: &Frame) {
        frame.encode(&mut self.output);
        self.flush();
    }

    /// Writes buffered output as far as the socket takes it (without SIGPIPE).
    pub fn flush(&mut self) {
        while !self.output.is_empty() && !self.closed {
            let r =
                nix::sys::socket::send(self.sock.as_raw_fd(), &self.output, nix::sys::socket::MsgFlags::MSG_NOSIGNAL);
            match r {
                Ok(n) => {
                    self.output.drain(..n);
                }
                Err(nix::errno::Errno::EINTR) => {}
                Err(nix::errno::Errno::EAGAIN) => return,
                Err(_) => {
                    self.closed = true;
                    self.output.clear();
                }
            }
        }
    }

    /// Reads what is there and returns the complete frames.
    pub fn receive(&mut self) -> Result<Vec<Frame>> {
        self.receive_bounded(usize::MAX)
    }

    /// [`receive`](Self::receive) in at most `reads` reads of 8 KiB (the launcher's, whose
    /// level-triggered poll comes back for the rest): what a rank can make it hold is one frame
    /// and one read, since frames are taken after every read.
    pub fn receive_bounded(&mut self, reads: usize) -> Result<Vec<Frame>> {
        let mut buf = [0u8; 8192];
        let mut frames = Vec::new();
        for _ in 0..reads {
            match (&self.sock).read(&mut buf) {
                Ok(0) => {
                    self.closed = true;
                    break;
                }
                Ok(n) => {
                    self.input.extend_from_slice(&buf[..n]);
                    self.take_frames(&mut frames)?;
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                Err(_) => {
                    self.closed = true;
                    break;
                }
            }
        }
        Ok(frames)
    }

    /// Moves the complete frames at the head of the input to `frames`.
    fn take_frames(&mut self, frames: &mut Vec<Frame>) -> Result<()> {
        let mut at = 0;
        while let Some(len) = self.input.get(at..at + 4) {
            let n = u32::from_le_bytes([len[0], len[1], len[2], len[3]]) as usize;
            if n == 0 || n > FRAME_MAX {
                self.input.clear();
                return Err(bad("length out of range"));
            }
            let Some(body) = self.input.get(at + 4..at + 4 + n) else { break };
            frames.push(Frame::decode(body)?);
            at += 4 + n;
        }
        self.input.drain(..at);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn frames_round_trip_and_bad_ones_are_errors() {
        let frames = [
            Frame::Engine { coordinator: 3, msg: Control::MyPhase { round: 2, phase: 7 } },
            Frame::Retire { ranks: vec![1, 5] },
            Frame::Retired { ranks: vec![] },
            Frame::Replayed { round: 1, messages: 9, bytes: 900 },
            Frame::Running { generation: 4 },
            Frame::Restored { read_us: 1234, written_unix_us: 1_700_000_000_000_000 },
            Frame::Finishing,
            Frame::Finish,
            Frame::Warning { text: "checkpoint file é refused".into() },
            Frame::Unrecoverable { text: String::new() },
            Frame::Card { rank: 5, incarnation: 2, card: "tcp:127.0.0.1:4000:4001".into() },
        ];
        let (a, b) = UnixStream::pair().unwrap();
        let (mut a, mut b) = (Channel::new(a).unwrap(), Channel::new(b).unwrap());
        for f in &frames {
            a.send(f);
        }
        let mut got = Vec::new();
        while got.len() < frames.len() {
            got.extend(b.receive().unwrap());
        }
        assert_eq!(got, frames);
        for body in [
            &[][..],
            &[99],
            &[kind::RETIRE, 9, 0, 0, 0],
            &[kind::FINISH, 0],
            &[kind::WARNING, 2, 0, 0, 0, b'a'],
            &[kind::WARNING, 1, 0, 0, 0, 0xff],
            &[kind::ENGINE, 0, 0, 0, 0, 77],
            &[kind::CARD, 1, 0, 0, 0, 1, 0, 0, 0, 9, 0, 0, 0, b'x'],
        ] {
            assert!(Frame::decode(body).is_err(), "{body:?}");
        }
        drop(a);
        assert!(b.receive().unwrap().is_empty());
        assert!(b.is_closed());
    }

    #[test]
    fn a_rank_writing_without_end_is_read_in_bounded_steps() {
        // A rank that writes frames without end: each bounded receive returns after its reads,
        // holding at most one partial frame, and the frames come whole and in order.
        let (a, b) = UnixStream::pair().unwrap();
        let mut b = Channel::new(b).unwrap();
        let writer = std::thread::spawn(move || {
            let mut a = a;
            let mut one = Vec::new();
            Frame::Running { generation: 7 }.encode(&mut one);
            let block: Vec<u8> = one.iter().copied().cycle().take(one.len() * 4096).collect();
            // Until the reader closes its end (EPIPE: the write fails).
            while std::io::Write::write_all(&mut a, &block).is_ok() {}
        });
        // Frames of 9 bytes: 16 reads of 8 KiB take at most 16 * 8192 / 9 of them.
        let mut total = 0;
        while total < 200_000 {
            let frames = b.receive_bounded(16).unwrap();
            if frames.is_empty() {
                std::thread::yield_now();
            }
            assert!(frames.len() <= 16 * 8192 / 9, "{} frames from 16 reads", frames.len());
            assert!(frames.iter().all(|f| *f == Frame::Running { generation: 7 }));
            assert!(b.input.len() < 4 + FRAME_MAX, "input held: {}", b.input.len());
            total += frames.len();
        }
        drop(b);
        writer.join().unwrap();
    }
}
