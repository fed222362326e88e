//! The rank side of the systems this program measures itself (`nemesis-bench __link`): a
//! [`Link`] over the nemesis Endpoint, over a pipe pair, over a Unix socket pair, or (module
//! `iceoryx`) over iceoryx2 request-response, each running the workloads of
//! [`crate::workload`]. Rank 0 prints the `KEY SIZE VALUE` lines on its stdout.

use std::fs::File;
use std::io::{Read, Write};
use std::os::fd::{FromRawFd, OwnedFd, RawFd};

use nemesis::{Endpoint, Request, WORLD};

use crate::error::{Error, Result};
use crate::workload::{self, Link, Workload};

/// The tag of every benchmark message: one tag keeps MPI's non-overtaking order across the
/// workload's messages and acknowledgements.
const TAG: i32 = 1;

/// The Endpoint between ranks 0 and 1; windows are non-blocking operations completed together,
/// as OSU's benchmarks do.
pub struct EndpointLink {
    ep: Endpoint,
    peer: u32,
    reqs: Vec<Request>,
}

impl EndpointLink {
    /// This rank's Endpoint, in a job of exactly two ranks.
    pub fn init() -> Result<EndpointLink> {
        let ep = Endpoint::init()?;
        if ep.size() != 2 {
            return Err(Error::Usage(format!("the benchmark runs on 2 ranks, not {}", ep.size())));
        }
        let peer = 1 - ep.rank();
        Ok(EndpointLink::new(ep, peer))
    }

    /// The link from `ep`'s rank to `peer`.
    pub fn new(ep: Endpoint, peer: u32) -> EndpointLink {
        EndpointLink { ep, peer, reqs: Vec::with_capacity(2 * workload::WINDOW) }
    }

    /// The Endpoint itself.
    pub fn endpoint(&mut self) -> &mut Endpoint {
        &mut self.ep
    }

    /// Finalizes the Endpoint.
    pub fn finish(self) -> Result<()> {
        Ok(self.ep.finalize()?)
    }

    fn complete(&mut self) -> Result<()> {
        let results = self.ep.wait_all(&self.reqs);
        self.reqs.clear();
        results.into_iter().try_for_each(|r| r.map(drop)).map_err(Error::from)
    }

    /// Posts `count` receives into `buf`.
    fn post_recvs(&mut self, buf: &mut [u8], count: usize) -> Result<()> {
        for _ in 0..count {
            // SAFETY: `buf` outlives the requests: every caller completes them (`complete`)
            // before returning. All `count` receives write into the same buffer, one after
            // another on this thread, as `mpi_pingpong.c` and OSU do; nothing reads `buf` until
            // they are all complete.
            let r = unsafe { self.ep.irecv_raw(buf.as_mut_ptr(), buf.len(), self.peer as i32, TAG, WORLD) }?;
            self.reqs.push(r);
        }
        Ok(())
    }

    /// Posts `count` sends of `buf`.
    fn post_sends(&mut self, buf: &[u8], count: usize) -> Result<()> {
        for _ in 0..count {
            // SAFETY: `buf` outlives the requests (completed before the caller returns) and is
            // only read meanwhile.
            let r = unsafe { self.ep.isend_raw(buf.as_ptr(), buf.len(), self.peer, TAG, WORLD) }?;
            self.reqs.push(r);
        }
        Ok(())
    }
}

impl Link for EndpointLink {
    fn rank(&self) -> u32 {
        self.ep.rank()
    }

    fn send(&mut self, buf: &[u8]) -> Result<()> {
        Ok(self.ep.send(buf, self.peer, TAG, WORLD)?)
    }

    fn recv(&mut self, buf: &mut [u8]) -> Result<()> {
        self.ep.recv(buf, self.peer as i32, TAG, WORLD)?;
        Ok(())
    }

    fn send_window(&mut self, buf: &[u8], count: usize) -> Result<()> {
        self.post_sends(buf, count)?;
        self.complete()
    }

    fn recv_window(&mut self, buf: &mut [u8], count: usize) -> Result<()> {
        self.post_recvs(buf, count)?;
        self.complete()
    }

    fn exchange_window(&mut self, out: &[u8], inbox: &mut [u8], count: usize) -> Result<()> {
        self.post_recvs(inbox, count)?;
        self.post_sends(out, count)?;
        self.complete()
    }
}

/// A byte stream each way (a pipe pair, or both directions of one Unix socket), used with
/// blocking reads and writes as programs use them. A stream has no empty message: a 0-byte
/// message is sent as one byte.
pub struct StreamLink {
    rank: u32,
    rx: File,
    tx: File,
}

impl StreamLink {
    /// The link over descriptors inherited from the parent: `[read, write]`, or one socket used
    /// both ways.
    pub fn from_fds(rank: u32, fds: &[RawFd]) -> Result<StreamLink> {
        let own = |fd: RawFd| -> Result<File> {
            // SAFETY: the parent passed this descriptor to this process for this link alone; it
            // is open (inherited through exec) and nothing else here owns it.
            Ok(File::from(unsafe { OwnedFd::from_raw_fd(fd) }))
        };
        let (rx, tx) = match *fds {
            [sock] => {
                let rx = own(sock)?;
                let tx = rx.try_clone().map_err(|e| Error::io("duplicate the socket", e))?;
                (rx, tx)
            }
            [r, w] => (own(r)?, own(w)?),
            _ => return Err(Error::Usage(format!("a stream link needs 1 or 2 descriptors, not {}", fds.len()))),
        };
        Ok(StreamLink { rank, rx, tx })
    }
}

impl Link for StreamLink {
    fn rank(&self) -> u32 {
        self.rank
    }

    fn send(&mut self, buf: &[u8]) -> Result<()> {
        let bytes = if buf.is_empty() { &[0u8][..] } else { buf };
        self.tx.write_all(bytes).map_err(|e| Error::io("write to the peer", e))
    }

    fn recv(&mut self, buf: &mut [u8]) -> Result<()> {
        let mut one = [0u8; 1];
        let into = if buf.is_empty() { &mut one[..] } else { buf };
        self.rx.read_exact(into).map_err(|e| Error::io("read from the peer", e))
    }
}

/// What `__link` runs.
#[derive(Clone, Debug, clap::Args)]
pub struct RankArgs {
    /// `nemesis-shm`, `pipe`, `unix-socket` or `iceoryx2`.
    pub system: String,
    /// `lat`, `bw` or `bibw`.
    pub workload: String,
    #[arg(long, value_delimiter = ',', required = true)]
    pub sizes: Vec<usize>,
    /// This side (pipe, socket, iceoryx2; the Endpoint knows its rank).
    #[arg(long, default_value_t = 0)]
    pub rank: u32,
    /// The CPU to pin this process to (pipe, socket, iceoryx2; nemesis-shm is pinned by its
    /// launcher).
    #[arg(long)]
    pub cpu: Option<usize>,
    /// Inherited descriptors of the stream.
    #[arg(long, value_delimiter = ',')]
    pub fds: Vec<RawFd>,
    /// The iceoryx2 service name.
    #[arg(long)]
    pub service: Option<String>,
    /// Fraction of the iterations to run (tests).
    #[arg(long, default_value_t = 1.0)]
    pub scale: f64,
}

/// Runs one rank of a two-process measurement.
pub fn rank_main(a: &RankArgs) -> Result<()> {
    let w = Workload::from_key(&a.workload).ok_or_else(|| Error::Usage(format!("unknown workload {}", a.workload)))?;
    if let Some(cpu) = a.cpu {
        crate::pin::pin(cpu).map_err(|e| Error::io(format!("pin to CPU {cpu}"), e))?;
    }
    let mut out = std::io::stdout().lock();
    match a.system.as_str() {
        "nemesis-shm" => {
            let mut link = EndpointLink::init()?;
            workload::run(&mut link, w, &a.sizes, a.scale, &mut out)?;
            link.finish()
        }
        "pipe" | "unix-socket" => {
            let mut link = StreamLink::from_fds(a.rank, &a.fds)?;
            workload::run(&mut link, w, &a.sizes, a.scale, &mut out)
        }
        #[cfg(feature = "iceoryx2")]
        "iceoryx2" => {
            let service = a.service.as_deref().ok_or_else(|| Error::Usage("iceoryx2 needs --service".into()))?;
            let max = a.sizes.iter().copied().max().unwrap_or(0);
            let mut link = crate::iceoryx::IceoryxLink::open(a.rank, service, max)?;
            workload::run(&mut link, w, &a.sizes, a.scale, &mut out)
        }
        other => Err(Error::Usage(format!("no rank side for system {other}"))),
    }
}
