//! The listener's thread: accepts connections and runs the part of the handshake that needs no
//! rank's state (HELLO read, CHALLENGE sent, PROOF checked), then hands each authenticated
//! connection to the progress engine, which settles and answers it (ACCEPT or REJECT). Why a
//! thread rather than accepts at `poll`: `docs/design/tcp.md`, "The listener's thread".
//!
//! Invariants:
//! - At most `max` connections not yet authenticated are held; a new one beyond it evicts the
//!   oldest (one that sent nothing first).
//! - A connection that has not proved the job's secret within the timeout is closed, whether or
//!   not the application calls in.
//! - The thread touches no rank's state and no socket of a link: it only hands connections over
//!   (`Listener::take`, woken through `handoff`).

use std::io::{self, Read};
use std::net::{TcpListener, TcpStream};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicUsize, Ordering::Relaxed};
use std::sync::{Arc, Mutex, PoisonError};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use nemesis_shm::auth::{self, JobSecret, Step, Transcript};

use crate::frame::{self, Kind, PREFIX};
use crate::socket::send_all;

/// A connection whose PROOF verified: the rank it proved to be, and the whole handshake.
pub(crate) struct Authed {
    pub t: Transcript,
    pub sock: TcpStream,
}

/// What the thread and the progress engine share.
pub(crate) struct Shared {
    stop: AtomicBool,
    /// This process's incarnation (set before any connection is made).
    pub incarnation: AtomicU32,
    /// The address peers dial (the card's), which proofs must name.
    pub dialed: Mutex<String>,
    /// Authenticated connections for the progress engine.
    pub ready: Mutex<Vec<Authed>>,
    /// Connections held, not yet authenticated (for tests and logs).
    pub held: AtomicUsize,
}

/// The listener's thread.
pub(crate) struct Listener {
    pub shared: Arc<Shared>,
    /// Written by the thread when it hands a connection over (in the engine's epoll).
    pub handoff: Arc<OwnedFd>,
    /// Written to stop the thread.
    wake: Arc<OwnedFd>,
    thread: Option<JoinHandle<()>>,
}

/// What the thread needs to know of the job.
pub(crate) struct Job {
    pub me: u32,
    pub size: u32,
    pub secret: JobSecret,
    pub flags: u32,
    /// How long a connection may take to prove the secret.
    pub limit: Duration,
    /// Connections held at most before one proves the secret.
    pub max: usize,
}

fn eventfd() -> io::Result<OwnedFd> {
    // SAFETY: eventfd returns a new descriptor or -1.
    let fd = unsafe { libc::eventfd(0, libc::EFD_CLOEXEC | libc::EFD_NONBLOCK) };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: a descriptor we own from here on.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// Adds one to eventfd `fd` (wakes whoever polls it).
fn signal(fd: RawFd) {
    let one = 1u64;
    // SAFETY: an 8-byte write from a u64 to an open eventfd.
    let _ = unsafe { libc::write(fd, (&raw const one).cast(), 8) };
}

/// Empties eventfd `fd`.
pub(crate) fn clear(fd: RawFd) {
    let mut v = 0u64;
    // SAFETY: an 8-byte read into a u64 from an open eventfd (non-blocking).
    let _ = unsafe { libc::read(fd, (&raw mut v).cast(), 8) };
}

impl Listener {
    /// Starts the thread on `listener` (non-blocking) for `job`, whose card names `dialed`.
    pub fn start(listener: TcpListener, job: Job, dialed: String) -> io::Result<Listener> {
        let shared = Arc::new(Shared {
            stop: AtomicBool::new(false),
            incarnation: AtomicU32::new(0),
            dialed: Mutex::new(dialed),
            ready: Mutex::new(Vec::new()),
            held: AtomicUsize::new(0),
        });
        let handoff = Arc::new(eventfd()?);
        let wake = Arc::new(eventfd()?);
        let (s, h, w) = (shared.clone(), handoff.clone(), wake.clone());
        let thread = std::thread::Builder::new()
            .name("nemesis-tcp-listen".into())
            .spawn(move || Run { listener, job, shared: s, handoff: h, wake: w, held: Vec::new(), dropped: 0 }.run())?;
        Ok(Listener { shared, handoff, wake, thread: Some(thread) })
    }

    /// The connections handed over since the last call.
    pub fn take(&self) -> Vec<Authed> {
        clear(self.handoff.as_raw_fd());
        std::mem::take(&mut *self.shared.ready.lock().unwrap_or_else(PoisonError::into_inner))
    }
}

impl Drop for Listener {
    fn drop(&mut self) {
        self.shared.stop.store(true, Relaxed);
        signal(self.wake.as_raw_fd());
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// A connection not authenticated yet: reading its HELLO (`claim` empty), then, once CHALLENGE
/// is sent, its PROOF (`claim`: the transcript but for nothing).
struct Held {
    sock: TcpStream,
    buf: [u8; HELD_BUF],
    want: usize,
    got: usize,
    since: Instant,
    claim: Option<Transcript>,
}

/// Room for a HELLO frame, then for a PROOF frame.
const HELD_BUF: usize = PREFIX + if frame::HELLO > frame::PROOF { frame::HELLO } else { frame::PROOF };

/// Connections accepted per wake-up at most (the rest wait for the next round).
const ACCEPT_BURST: usize = 256;

struct Run {
    listener: TcpListener,
    job: Job,
    shared: Arc<Shared>,
    handoff: Arc<OwnedFd>,
    wake: Arc<OwnedFd>,
    held: Vec<Held>,
    /// Connections dropped without proof since the last warning.
    dropped: u64,
}

impl Run {
    fn run(mut self) {
        let mut fds: Vec<libc::pollfd> = Vec::new();
        let mut warned = Instant::now();
        while !self.shared.stop.load(Relaxed) {
            fds.clear();
            fds.push(libc::pollfd { fd: self.wake.as_raw_fd(), events: libc::POLLIN, revents: 0 });
            fds.push(libc::pollfd { fd: self.listener.as_raw_fd(), events: libc::POLLIN, revents: 0 });
            fds.extend(self.held.iter().map(|h| libc::pollfd {
                fd: h.sock.as_raw_fd(),
                events: libc::POLLIN,
                revents: 0,
            }));
            let now = Instant::now();
            let next = self.held.iter().map(|h| h.since + self.job.limit).min();
            let wait =
                next.map_or(Duration::from_secs(1), |t| t.saturating_duration_since(now)).min(Duration::from_secs(1));
            let ms = wait.as_millis() as i32 + 1;
            // SAFETY: `fds` holds that many valid pollfds for the call.
            let n = unsafe { libc::poll(fds.as_mut_ptr(), fds.len() as libc::nfds_t, ms) };
            if n < 0 {
                continue;
            }
            if fds[0].revents != 0 {
                clear(self.wake.as_raw_fd());
            }
            // Connections that spoke, last first (removing keeps the earlier indices).
            for k in (0..self.held.len()).rev() {
                if fds[k + 2].revents != 0 {
                    self.read(k);
                }
            }
            let now = Instant::now();
            let limit = self.job.limit;
            let before = self.held.len();
            self.held.retain(|h| now.duration_since(h.since) <= limit);
            self.dropped += (before - self.held.len()) as u64;
            if fds[1].revents != 0 {
                self.accept();
            }
            self.shared.held.store(self.held.len(), Relaxed);
            if self.dropped > 0 && warned.elapsed() >= Duration::from_secs(10) {
                tracing::warn!(
                    dropped = self.dropped,
                    "closed connections that did not prove the job's secret (too slow, too many, or not of this job)"
                );
                (self.dropped, warned) = (0, Instant::now());
            }
        }
    }

    /// Accepts what waits, evicting the oldest held connections beyond the bound.
    fn accept(&mut self) {
        for _ in 0..ACCEPT_BURST {
            let s = match self.listener.accept() {
                Ok((s, _)) => s,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                // Nothing more, out of descriptors, or a connection reset before accept: later.
                Err(_) => return,
            };
            if s.set_nonblocking(true).is_err() || s.set_nodelay(true).is_err() {
                continue;
            }
            if self.held.len() >= self.job.max.max(1) {
                // The oldest that said nothing, else the oldest.
                let k = self.held.iter().position(|h| h.got == 0 && h.claim.is_none()).unwrap_or(0);
                self.held.remove(k);
                self.dropped += 1;
            }
            let since = Instant::now();
            self.held.push(Held {
                sock: s,
                buf: [0; HELD_BUF],
                want: PREFIX + frame::HELLO,
                got: 0,
                since,
                claim: None,
            });
        }
    }

    /// Reads from held connection `k`: its HELLO (answered with CHALLENGE), then its PROOF
    /// (handed over if it verifies). A connection that fails is closed; nothing else changes.
    fn read(&mut self, k: usize) {
        let h = &mut self.held[k];
        let want = h.want;
        match h.sock.read(&mut h.buf[h.got..want]) {
            Ok(0) => {
                self.held.remove(k);
                return;
            }
            Ok(n) => h.got += n,
            Err(e) if e.kind() == io::ErrorKind::WouldBlock || e.kind() == io::ErrorKind::Interrupted => return,
            Err(_) => {
                self.held.remove(k);
                return;
            }
        }
        if h.got < want {
            return;
        }
        let mut h = self.held.remove(k);
        let Some(t) = h.claim.take() else {
            // The HELLO: our nonce, incarnation and options, and nothing made with the secret.
            let Some(head) = h.buf.first_chunk::<{ PREFIX + frame::HELLO }>() else { return };
            let Some((rank, nc)) = frame::check_hello(head, self.job.me, self.job.size) else {
                self.dropped += 1;
                return;
            };
            let Ok(na) = auth::nonce() else { return };
            let inc = self.shared.incarnation.load(Relaxed);
            let dialed = self.shared.dialed.lock().unwrap_or_else(PoisonError::into_inner).clone();
            let t = Transcript {
                from: rank,
                from_inc: frame::hello_incarnation(head),
                from_flags: frame::hello_flags(head),
                nc,
                to: self.job.me,
                to_inc: inc,
                to_flags: self.job.flags,
                na,
                dialed,
            };
            if send_all(&h.sock, &frame::frame(Kind::Challenge, &frame::challenge(&na, inc, self.job.flags))).is_ok() {
                (h.claim, h.want, h.got) = (Some(t), PREFIX + frame::PROOF, 0);
                self.held.push(h);
            }
            return;
        };
        let proved =
            h.buf.first_chunk::<PREFIX>().is_some_and(|p| matches!(frame::parse_prefix(p), Ok((Kind::Proof, _))))
                && t.check(&self.job.secret, Step::Connect, &h.buf[PREFIX..PREFIX + frame::PROOF]);
        if !proved {
            tracing::debug!(claimed = t.from, "refused a connection that failed authentication");
            self.dropped += 1;
            return;
        }
        self.shared.ready.lock().unwrap_or_else(PoisonError::into_inner).push(Authed { t, sock: h.sock });
        signal(self.handoff.as_raw_fd());
    }
}
