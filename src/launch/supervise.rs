//! The launcher's event loop: one `poll` over the ranks' PMI sockets, their pidfds (readable once
//! a process has exited) and the signal pipe, on the thread that forked the ranks.
//!
//! Each turn handles, in this order: signals to the launcher; PMI lines (replies are buffered
//! per rank and written without blocking, so a rank that does not read cannot stall the job);
//! rank exits. A rank's remaining PMI lines are read before its exit is handled, so an `abort`
//! sent just before exiting is seen as an abort. On each exit the rank is marked GONE in its
//! node's segment with its raw wait status, and leaves the PMI barriers.
//!
//! Teardown (a failed rank without `keep_going`, an abort, SIGINT/SIGTERM): SIGTERM to every
//! rank still running, SIGKILL to those left after the grace period. The pids are ours and not
//! yet reaped, so a signal cannot reach a process that reused one. A second SIGINT/SIGTERM during
//! the grace period sends SIGKILL at once. Only the rank processes are signalled (and only they
//! carry the death signal): processes a rank starts are its own to end, so a rank that is a shell
//! script should `exec` its program. The ranks stay in the launcher's process group, so a
//! terminal's Ctrl-C reaches them as it reaches the launcher, and rank 0 can read the terminal.
//!
//! System calls through `nix` (kill, send, poll); `libc` only for `W_EXITCODE`, a macro nix lacks.

use std::collections::BTreeSet;
use std::io::{self, Read};
use std::os::fd::{AsFd, AsRawFd, OwnedFd};
use std::os::unix::net::UnixStream;
use std::os::unix::process::ExitStatusExt;
use std::process::{Child, ExitStatus};
use std::time::Instant;

use nemesis_shm::{Node, Segment};
use nix::errno::Errno;
use nix::poll::{PollFd, PollFlags, PollTimeout, poll};
use nix::sys::signal::Signal;
use nix::sys::socket::MsgFlags;
use nix::unistd::Pid;

use super::output::{Forwarder, Stream, sanitize};
use super::recovery::{Recovery, Step};
use super::server::{Action, PmiServer};
use super::signals::SignalPipe;
use super::spawn::{self, Extra, Placement, Started};
use super::{Ending, Job, NodePlan, Outcome, RankExit};
use crate::contract::channel::{Channel, Frame};
use crate::contract::{ENV_FT_RESTART, ENV_RUN_NO_MARKS, HANDLE_FD, card_key, process_mapping, segment_key};
use crate::error::{Error, Result};
use crate::topology::Plan;

/// One rank's PMI connection.
struct Conn {
    sock: UnixStream,
    /// Bytes received after the last complete message: at most one message's limit
    /// ([`super::server::LINE_MAX`], [`super::server::MESSAGE2_MAX`]) and one read.
    input: Vec<u8>,
    /// Replies not yet written (at most [`OUTPUT_MAX`]).
    output: Vec<u8>,
}

/// Bytes one read of a PMI connection takes.
const READ_CHUNK: usize = 8192;
/// Reads of one PMI or fault-tolerance connection per turn of the event loop, so a rank that
/// writes without end neither starves the others nor fills the launcher's memory.
const READS_PER_TURN: usize = 16;
/// Replies held for a rank that does not read them: past this its connection is closed.
const OUTPUT_MAX: usize = 1 << 20;
/// Longest text of a rank the launcher prints (an abort message, a recovery warning).
const TEXT_MAX: usize = 1024;

/// One running (or ended) rank.
struct Rank {
    rank: u32,
    node: usize,
    local: u16,
    pid: u32,
    child: Child,
    /// `None` once reaped.
    pidfd: Option<OwnedFd>,
    conn: Option<Conn>,
    exit: Option<ExitStatus>,
    /// Signalled by the launcher (teardown).
    stopped: bool,
    /// Its fault-tolerance channel (`--ft`).
    ft: Option<Channel>,
    /// Where it runs, to start it again.
    place: Placement,
    /// Its incarnation (restarts so far; the segment counts the same).
    incarnation: u32,
}

struct Supervisor {
    job: Job,
    ranks: Vec<Rank>,
    segments: Vec<Segment>,
    server: PmiServer,
    signals: Option<SignalPipe>,
    ending: Option<Ending>,
    /// When the survivors of a teardown get SIGKILL; `None` once sent (or no teardown).
    kill_at: Option<Instant>,
    /// Order in which ranks were seen failing on their own.
    failures: Vec<usize>,
    actions: Vec<Action>,
    /// Recovery of failed groups (`--ft`).
    recovery: Option<Recovery>,
    /// A restart the segments were not ready for yet, tried again at every turn.
    restart: Option<(Vec<u32>, u64, Vec<u32>)>,
    /// Restarted ranks whose new business card the ranks of other nodes have not been told yet
    /// (`--ft` over several nodes).
    cards: BTreeSet<u32>,
    /// The output of spawned processes under `--tag-output` (one forwarder per spawn).
    spawned_output: Vec<Forwarder>,
}

/// How [`read_bounded`] stopped.
#[derive(Debug)]
enum ReadEnd {
    /// Nothing more to read now.
    Drained,
    /// Its reads are done; more may be there.
    Budget,
    /// The other end closed.
    Closed,
    /// The socket failed.
    Failed(io::Error),
    /// The input can never become a message.
    Refused,
}

/// Reads at most `reads` chunks of [`READ_CHUNK`] bytes from `src` into `input`, handing `input`
/// to `take` after each: it handles the complete messages and removes them, and answers false if
/// what is left can never become one. So `input` never holds more than what `take` leaves (an
/// incomplete message within its limit) and one chunk, whatever `src` has.
fn read_bounded(
    src: &mut impl Read,
    input: &mut Vec<u8>,
    reads: usize,
    mut take: impl FnMut(&mut Vec<u8>) -> bool,
) -> ReadEnd {
    let mut buf = [0u8; READ_CHUNK];
    let mut done = 0;
    while done < reads {
        match src.read(&mut buf) {
            Ok(0) => return ReadEnd::Closed,
            Ok(n) => {
                done += 1;
                input.extend_from_slice(&buf[..n]);
                if !take(input) {
                    return ReadEnd::Refused;
                }
            }
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => return ReadEnd::Drained,
            Err(e) => return ReadEnd::Failed(e),
        }
    }
    ReadEnd::Budget
}

/// Sends `sig` to our unreaped child `pid`.
/// `pid` is our child, not yet reaped, so it names that process and no other.
fn signal(pid: u32, sig: Signal) {
    let _ = nix::sys::signal::kill(Pid::from_raw(pid as i32), sig);
}

/// Writes what it can of `buf` to a non-blocking socket without raising SIGPIPE; returns the
/// bytes written (0 if it would block).
fn send_some(sock: &UnixStream, buf: &[u8]) -> io::Result<usize> {
    loop {
        match nix::sys::socket::send(sock.as_raw_fd(), buf, MsgFlags::MSG_NOSIGNAL) {
            Ok(n) => return Ok(n),
            Err(Errno::EINTR) => continue,
            Err(Errno::EAGAIN) => return Ok(0),
            Err(e) => return Err(e.into()),
        }
    }
}

/// Starts the ranks of `job` over `nodes` (one segment each) and supervises them to the end.
pub(crate) fn run(
    job: Job,
    nodes: Vec<NodePlan>,
    segments: Vec<Segment>,
    plan: Option<Plan>,
    recovery: Option<Recovery>,
) -> Result<Outcome> {
    // Every rank is told the universe's size: spawned processes take the slots beyond the job.
    let size = job.universe();
    let mut server = PmiServer::with_universe(job.ranks, size, &format!("kvs_{}_0", std::process::id()));
    let sizes: Vec<u32> = nodes.iter().map(|n| n.ranks.len() as u32).collect();
    server.preput("PMI_process_mapping", &process_mapping(&sizes));
    for (n, seg) in nodes.iter().zip(&segments) {
        server.preput(&segment_key(&n.id), &format!("{HANDLE_FD}{}", seg.fd()));
    }
    let signals = if job.handle_signals { Some(SignalPipe::install()?) } else { None };

    let mut sup = Supervisor {
        job,
        ranks: Vec::with_capacity(size as usize),
        segments,
        server,
        signals,
        ending: None,
        kill_at: None,
        failures: Vec::new(),
        actions: Vec::new(),
        recovery,
        restart: None,
        cards: BTreeSet::new(),
        spawned_output: Vec::new(),
    };
    let mut extra = Extra { ft_channel: sup.recovery.is_some(), ..Extra::default() };
    if size > sup.job.ranks {
        extra.env.push((crate::contract::ENV_WORLD.into(), format!("0,{}", sup.job.ranks)));
    }
    let mut pipes = Vec::new();
    for (ni, n) in nodes.iter().enumerate() {
        let local_size = n.ranks.len() as u16;
        // Every rank of the node learns every local rank's locality: pair distances.
        let locality = plan.as_ref().map(|p| {
            let all: Vec<String> =
                n.ranks.iter().map(|&r| p.machine.locality_of(&p.slots[r as usize].cpus).encode()).collect();
            all.join(";")
        });
        for (local, &rank) in n.ranks.iter().enumerate() {
            let local = local as u16;
            let place = Placement {
                rank,
                size,
                node: n.id.clone(),
                local_rank: local,
                local_size,
                // All nodes of a job are on this machine: the plan places by global rank.
                cpus: plan.as_ref().map(|p| p.slots[rank as usize].cpus.clone()).unwrap_or_default(),
                locality: locality.clone(),
            };
            let started = match spawn::start(&sup.job, &place, sup.segments[ni].fd(), &extra) {
                Ok(s) => s,
                Err(e) => {
                    sup.abandon();
                    return Err(e);
                }
            };
            let Started { child, pid, pidfd, pmi, ft, stdout, stderr } = started;
            let ft = match ft.map(Channel::new).transpose() {
                Ok(c) => c,
                Err(e) => {
                    sup.abandon();
                    return Err(e);
                }
            };
            tracing::debug!(rank, pid, cpus = ?place.cpus, "rank started");
            if let Some(o) = stdout {
                pipes.push((rank, Stream::Stdout, OwnedFd::from(o)));
            }
            if let Some(e) = stderr {
                pipes.push((rank, Stream::Stderr, OwnedFd::from(e)));
            }
            sup.ranks.push(Rank {
                rank,
                node: ni,
                local,
                pid,
                child,
                pidfd: Some(pidfd),
                conn: Some(Conn { sock: pmi, input: Vec::new(), output: Vec::new() }),
                exit: None,
                stopped: false,
                ft,
                place,
                incarnation: 0,
            });
        }
    }
    // Ranks were pushed node by node; index them by rank.
    sup.ranks.sort_by_key(|r| r.rank);
    let forwarder = if pipes.is_empty() { None } else { Some(Forwarder::start(pipes)) };
    let forwarder = match forwarder.transpose() {
        Ok(f) => f,
        Err(e) => {
            sup.abandon();
            return Err(e);
        }
    };
    let outcome = sup.supervise();
    if let Some(f) = forwarder {
        f.finish();
    }
    outcome
}

impl Supervisor {
    /// Kills and reaps every rank started so far (start-up failed).
    fn abandon(&mut self) {
        for r in &mut self.ranks {
            signal(r.pid, Signal::SIGKILL);
            let _ = r.child.wait();
        }
    }

    fn supervise(mut self) -> Result<Outcome> {
        // A restart may be pending with every rank dead (all groups failed at once).
        while self.ranks.iter().any(|r| r.exit.is_none()) || (self.restart.is_some() && self.ending.is_none()) {
            self.turn()?;
        }
        for f in self.spawned_output.drain(..) {
            f.finish();
        }
        let ending = self.ending.take().unwrap_or(Ending::Completed);
        let ranks: Vec<RankExit> = self
            .ranks
            .iter()
            .map(|r| RankExit {
                rank: r.rank,
                pid: r.pid,
                status: r.exit.unwrap_or_else(|| ExitStatus::from_raw(0)),
                stopped_by_launcher: r.stopped,
            })
            .collect();
        tracing::info!(?ending, "job ended");
        Ok(Outcome { ranks, ending, first_failure: self.failures.first().copied() })
    }

    /// One poll and what it found.
    fn turn(&mut self) -> Result<()> {
        // What each pollfd is.
        enum Src {
            Signals,
            Conn(usize),
            Exit(usize),
            Ft(usize),
        }
        let mut pfds = Vec::with_capacity(2 * self.ranks.len() + 1);
        let mut srcs = Vec::with_capacity(pfds.capacity());
        if let Some(s) = &self.signals {
            pfds.push(PollFd::new(s.fd(), PollFlags::POLLIN));
            srcs.push(Src::Signals);
        }
        for (i, r) in self.ranks.iter().enumerate() {
            if let Some(c) = &r.conn {
                let events =
                    if c.output.is_empty() { PollFlags::POLLIN } else { PollFlags::POLLIN | PollFlags::POLLOUT };
                pfds.push(PollFd::new(c.sock.as_fd(), events));
                srcs.push(Src::Conn(i));
            }
            if let Some(p) = &r.pidfd {
                pfds.push(PollFd::new(p.as_fd(), PollFlags::POLLIN));
                srcs.push(Src::Exit(i));
            }
            if let Some(c) = r.ft.as_ref().filter(|c| !c.is_closed()) {
                let events = if c.has_output() { PollFlags::POLLIN | PollFlags::POLLOUT } else { PollFlags::POLLIN };
                pfds.push(PollFd::new(c.socket().as_fd(), events));
                srcs.push(Src::Ft(i));
            }
        }
        let timeout = match self.kill_at {
            None if self.restart.is_some() => PollTimeout::from(10u8),
            None => PollTimeout::NONE,
            Some(t) => PollTimeout::try_from(t.saturating_duration_since(Instant::now())).unwrap_or(PollTimeout::MAX),
        };
        let polled = poll(&mut pfds, timeout);
        // What was ready, taken before anything is handled (the pollfds borrow the ranks).
        let revents: Vec<PollFlags> = pfds.iter().map(|p| p.revents().unwrap_or(PollFlags::POLLERR)).collect();
        drop(pfds);
        match polled {
            Ok(_) | Err(Errno::EINTR) => {}
            Err(e) => {
                self.teardown_now();
                return Err(Error::io("poll", e.into()));
            }
        }
        let ready = |kind: fn(&Src) -> bool| {
            revents.iter().zip(&srcs).filter(move |(ev, s)| !ev.is_empty() && kind(s)).map(|(ev, s)| (*ev, s))
        };
        let signalled = ready(|s| matches!(s, Src::Signals)).next().is_some();
        let conns: Vec<(usize, PollFlags)> = ready(|s| matches!(s, Src::Conn(_)))
            .filter_map(|(ev, s)| if let Src::Conn(i) = s { Some((*i, ev)) } else { None })
            .collect();
        let exits: Vec<usize> = ready(|s| matches!(s, Src::Exit(_)))
            .filter_map(|(_, s)| if let Src::Exit(i) = s { Some(*i) } else { None })
            .collect();
        let fts: Vec<usize> = ready(|s| matches!(s, Src::Ft(_)))
            .filter_map(|(_, s)| if let Src::Ft(i) = s { Some(*i) } else { None })
            .collect();
        if signalled {
            self.on_signals();
        }
        for (i, ev) in conns {
            if ev.contains(PollFlags::POLLOUT) {
                self.flush(i);
            }
            if !(ev - PollFlags::POLLOUT).is_empty() {
                self.read_conn(i, false);
            }
        }
        // Before the channels: a restarted rank puts its card before it says anything there, and
        // what others learn of it through their channels must come after its card.
        if !self.cards.is_empty() {
            self.announce_cards();
        }
        for i in fts {
            self.read_ft(i, READS_PER_TURN);
        }
        for i in exits {
            self.on_exit(i);
        }
        if self.restart.is_some() && self.ending.is_none() {
            self.try_restart();
        }
        if self.kill_at.is_some_and(|t| Instant::now() >= t) {
            self.kill_survivors();
        }
        Ok(())
    }

    fn on_signals(&mut self) {
        let sigs = self.signals.as_ref().map(SignalPipe::take).unwrap_or_default();
        for sig in sigs {
            if self.ending.is_some() {
                // Already ending: a second signal means now.
                tracing::info!(signal = sig, "signal during teardown: killing the ranks now");
                self.kill_survivors();
                continue;
            }
            crate::say!("nemesis-run: {} received, ending the job", signal_name(sig));
            self.teardown(Ending::Interrupted { signal: sig });
        }
    }

    /// Reads what rank `i` sent (at most [`READS_PER_TURN`] reads, or all there is once it
    /// `exited`: that is finite) and handles each complete message as it comes, so that what is
    /// held stays below one message's limit and one read.
    fn read_conn(&mut self, i: usize, exited: bool) {
        let reads = if exited { usize::MAX } else { READS_PER_TURN };
        let rank = self.ranks[i].rank;
        let Some(conn) = self.ranks[i].conn.as_mut() else {
            return;
        };
        let (server, actions) = (&mut self.server, &mut self.actions);
        let end = read_bounded(&mut &conn.sock, &mut conn.input, reads, |input| server.on_bytes(rank, input, actions));
        self.apply_actions();
        match end {
            ReadEnd::Drained | ReadEnd::Budget => {}
            ReadEnd::Closed => self.close_conn(i),
            ReadEnd::Failed(e) => {
                tracing::debug!(rank, error = %e, "PMI connection failed");
                self.close_conn(i);
            }
            ReadEnd::Refused => {
                let why = self.server.refusal(rank).unwrap_or("a malformed PMI message");
                crate::say!("nemesis-run: rank {rank} sent {why}: its PMI connection is closed");
                self.close_conn(i);
            }
        }
    }

    /// Carries out what the PMI server asked for.
    fn apply_actions(&mut self) {
        let actions = std::mem::take(&mut self.actions);
        let mut overflowing = Vec::new();
        for a in actions {
            match a {
                Action::Reply { rank, line } => {
                    let i = rank as usize;
                    if let Some(c) = self.ranks.get_mut(i).and_then(|r| r.conn.as_mut()) {
                        c.output.extend_from_slice(line.as_bytes());
                        self.flush(i);
                    }
                    if self.ranks.get(i).and_then(|r| r.conn.as_ref()).is_some_and(|c| c.output.len() > OUTPUT_MAX) {
                        overflowing.push(i);
                    }
                }
                Action::Spawn { rank, request } => self.on_spawn(rank, request),
                Action::Abort { rank, code, message } => {
                    let pid = self.ranks.get(rank as usize).map_or(0, |r| r.pid);
                    if self.ending.is_none() {
                        // The rank's words reach the operator's terminal: no escape sequences.
                        let message = sanitize(&message, TEXT_MAX);
                        let msg = if message.is_empty() { String::new() } else { format!(": {message}") };
                        crate::say!("nemesis-run: rank {rank} (pid {pid}) called abort with exit code {code}{msg}");
                        tracing::info!(rank, pid, code, %message, "rank aborted the job");
                        self.teardown(Ending::Aborted { rank, code, message });
                    }
                }
            }
        }
        for i in overflowing {
            if self.ranks[i].conn.is_some() {
                let rank = self.ranks[i].rank;
                crate::say!(
                    "nemesis-run: rank {rank} does not read its PMI replies ({OUTPUT_MAX} bytes pending): its PMI connection is closed"
                );
                self.close_conn(i);
            }
        }
        // A spawn's answer, and what its new ranks need.
        if !self.actions.is_empty() {
            self.apply_actions();
        }
    }

    /// Writes buffered replies to rank `i` as far as the socket takes them.
    fn flush(&mut self, i: usize) {
        let Some(c) = self.ranks[i].conn.as_mut() else {
            return;
        };
        while !c.output.is_empty() {
            match send_some(&c.sock, &c.output) {
                Ok(0) => return,
                Ok(n) => {
                    c.output.drain(..n);
                }
                Err(e) => {
                    tracing::debug!(rank = self.ranks[i].rank, error = %e, "PMI reply not delivered");
                    self.close_conn(i);
                    return;
                }
            }
        }
    }

    /// Drops rank `i`'s PMI connection: it takes part in no more barriers.
    fn close_conn(&mut self, i: usize) {
        if self.ranks[i].conn.take().is_some() {
            self.server.on_gone(self.ranks[i].rank, &mut self.actions);
            self.apply_actions();
        }
    }

    /// Rank `i`'s pidfd is readable: it has exited. Reaps it and marks it.
    fn on_exit(&mut self, i: usize) {
        // What it wrote before it died comes first (an abort, typically; a restarted rank that
        // cannot restart says why on its fault-tolerance channel).
        self.read_conn(i, true);
        self.read_ft(i, usize::MAX);
        let r = &mut self.ranks[i];
        let status = match r.child.try_wait() {
            Ok(Some(s)) => s,
            Ok(None) => return, // spurious wake-up
            Err(e) => {
                tracing::warn!(rank = r.rank, error = %e, "waitpid failed");
                ExitStatus::from_raw(libc::W_EXITCODE(1, 0))
            }
        };
        r.exit = Some(status);
        r.pidfd = None;
        let (rank, pid, node, local, stopped) = (r.rank, r.pid, r.node, r.local, r.stopped);
        // `NEMESIS_RUN_NO_MARKS` (tests only) leaves deaths unmarked, as a foreign process
        // manager would: ranks must then learn of them through pidfds.
        if std::env::var_os(ENV_RUN_NO_MARKS).is_none()
            && let Err(e) = self.segments[node].mark_gone(local, status.into_raw() as u32)
        {
            tracing::warn!(rank, error = %e, "could not mark the rank gone in the segment");
        }
        self.close_conn(i);
        let exit = RankExit { rank, pid, status, stopped_by_launcher: stopped };
        if let Some(rec) = self.recovery.as_mut()
            && self.ending.is_none()
        {
            self.ranks[i].ft = None;
            if status.success() {
                rec.on_clean_exit(rank);
                return;
            }
            let how = match (status.code(), status.signal()) {
                (Some(c), _) => format!("exit code {c}"),
                (None, Some(s)) => format!("signal {s}"),
                _ => format!("wait status {:#x}", status.into_raw()),
            };
            tracing::info!(rank, pid, %how, "rank died: recovery");
            // Its card names a listener that is gone: nobody gets it any more, and the next
            // incarnation puts its own.
            self.server.remove(&card_key(rank));
            self.cards.remove(&rank);
            let steps = rec.on_death(rank, how);
            self.apply_steps(steps);
            return;
        }
        if status.success() {
            tracing::debug!(rank, pid, "rank exited");
            return;
        }
        if stopped && self.ending.is_none() {
            // A spawned process ended with the spawn that could not start all of its own.
            tracing::debug!(rank, pid, status = %exit.describe(), "abandoned spawned process ended");
            return;
        }
        if self.ending.is_some() {
            // Part of a teardown already under way: not a cause.
            tracing::debug!(rank, pid, status = %exit.describe(), "rank ended during teardown");
            return;
        }
        self.failures.push(i);
        crate::say!("nemesis-run: rank {rank} (pid {pid}) {}", exit.describe());
        tracing::info!(rank, pid, status = %exit.describe(), "rank failed");
        if !self.job.keep_going {
            self.teardown(Ending::RankFailed { rank });
        }
    }

    /// Reads rank `i`'s fault-tolerance channel (at most `reads` reads: all there is once it
    /// exited) and hands its frames to recovery.
    fn read_ft(&mut self, i: usize, reads: usize) {
        let rank = self.ranks[i].rank;
        let Some(c) = self.ranks[i].ft.as_mut() else { return };
        c.flush();
        let frames = c.receive_bounded(reads);
        let steps = match (frames, self.recovery.as_mut()) {
            (Ok(frames), Some(rec)) => {
                let mut all = Vec::new();
                let mut res = Ok(());
                for f in frames {
                    match rec.on_frame(rank, f) {
                        Ok(s) => all.extend(s),
                        Err(e) => {
                            res = Err(e);
                            break;
                        }
                    }
                }
                res.map(|()| all)
            }
            (Ok(_), None) => Ok(Vec::new()),
            (Err(e), _) => Err(e),
        };
        self.apply_steps(steps);
    }

    /// Carries out what recovery asked for; an error of recovery ends the job.
    fn apply_steps(&mut self, steps: Result<Vec<Step>>) {
        let steps = match steps {
            Ok(s) => s,
            Err(e) => {
                if self.ending.is_none() {
                    crate::say!("nemesis-run: fault-tolerance recovery failed: {e}");
                    self.teardown(Ending::RankFailed { rank: 0 });
                }
                return;
            }
        };
        for step in steps {
            match step {
                Step::Send { rank, frame } => self.send_ft(rank, &frame),
                Step::Kill { rank } => {
                    if let Some(r) = self.ranks.get(rank as usize).filter(|r| r.exit.is_none()) {
                        tracing::debug!(rank, pid = r.pid, "SIGKILL: its group restarts");
                        signal(r.pid, Signal::SIGKILL);
                    }
                }
                Step::Restart { ranks, round, groups } => {
                    self.restart = Some((ranks, round, groups));
                    self.try_restart();
                }
                // Both carry text a rank sent (a warning, why it cannot restart).
                Step::Print(line) => crate::say!("{}", sanitize(&line, 2 * TEXT_MAX)),
                Step::Fail { rank, message } => {
                    if self.ending.is_none() {
                        crate::say!("nemesis-run: {}", sanitize(&message, 2 * TEXT_MAX));
                        self.failures.push(rank as usize);
                        self.teardown(Ending::RankFailed { rank });
                    }
                }
            }
        }
    }

    /// Writes `frame` to `rank`'s channel, raises its mail flag and rings its doorbell.
    fn send_ft(&mut self, rank: u32, frame: &Frame) {
        let Some(r) = self.ranks.get_mut(rank as usize) else { return };
        let Some(c) = r.ft.as_mut() else { return };
        c.send(frame);
        if let Ok(st) = self.segments[r.node].state_of(r.local) {
            // ORDERING: Release; the rank's Acquire swap of the flag orders its read of the
            // socket after (the bytes are in the socket already).
            st.mail.store(1, std::sync::atomic::Ordering::Release);
            crate::wait::ring(&st.doorbell);
        }
    }

    /// Resets the dead ranks of the pending restart in their segments and starts them again;
    /// if a segment is not ready yet (a drain under way), tries again at the next turn.
    fn try_restart(&mut self) {
        let Some((ranks, round, groups)) = self.restart.clone() else { return };
        for &rank in &ranks {
            let Some(r) = self.ranks.get(rank as usize) else { continue };
            if r.exit.is_none() {
                return; // not reaped yet
            }
            let seg = &self.segments[r.node];
            if seg.state_of(r.local).map(|s| s.is_gone()).unwrap_or(false) {
                match nemesis_shm::incarnation::reset_rank(seg, r.local) {
                    Ok(inc) => {
                        tracing::debug!(rank, incarnation = inc, "rank reset in the segment");
                        self.ranks[rank as usize].incarnation = inc;
                    }
                    Err(nemesis_shm::Error::NotReady { what, rank: l }) => {
                        tracing::debug!(rank, local = l, what, "restart waits");
                        return;
                    }
                    Err(e) => {
                        self.apply_steps(Err(e.into()));
                        return;
                    }
                }
            }
        }
        self.restart = None;
        let list = groups.iter().map(u32::to_string).collect::<Vec<_>>().join(",");
        let extra = Extra {
            ft_channel: true,
            env: vec![(ENV_FT_RESTART.into(), format!("{round}:{list}"))],
            inherit_output: true,
            ..Extra::default()
        };
        for &rank in &ranks {
            let i = rank as usize;
            let (node, place) = (self.ranks[i].node, self.ranks[i].place.clone());
            let started = spawn::start(&self.job, &place, self.segments[node].fd(), &extra)
                .and_then(|mut s| Ok((s.ft.take().map(Channel::new).transpose()?, s)));
            let (ft, s) = match started {
                Ok(x) => x,
                Err(e) => {
                    self.apply_steps(Err(e));
                    return;
                }
            };
            tracing::info!(rank, pid = s.pid, round, "rank restarted");
            let r = &mut self.ranks[i];
            r.pid = s.pid;
            r.child = s.child;
            r.pidfd = Some(s.pidfd);
            r.conn = Some(Conn { sock: s.pmi, input: Vec::new(), output: Vec::new() });
            r.exit = None;
            r.ft = ft;
            self.server.rejoin(rank);
            if self.segments.len() > 1 {
                self.cards.insert(rank);
            }
        }
        if let Some(rec) = self.recovery.as_mut() {
            rec.restarted(&ranks);
        }
    }

    /// Tells the ranks of the other nodes the new card of each restarted rank that has put it
    /// (`Frame::Card`): their netmods reconnect to the new incarnation.
    fn announce_cards(&mut self) {
        let ready: Vec<u32> =
            self.cards.iter().copied().filter(|&r| self.server.value(&card_key(r)).is_some()).collect();
        for rank in ready {
            self.cards.remove(&rank);
            let Some(card) = self.server.value(&card_key(rank)).map(str::to_owned) else { continue };
            let (node, incarnation) = (self.ranks[rank as usize].node, self.ranks[rank as usize].incarnation);
            tracing::debug!(rank, incarnation, %card, "restarted rank's card to the other nodes");
            let frame = Frame::Card { rank, incarnation, card };
            for other in 0..self.ranks.len() {
                let o = &self.ranks[other];
                if o.node != node && o.exit.is_none() {
                    self.send_ft(o.rank, &frame);
                }
            }
        }
    }

    /// Ends the job: SIGTERM now, SIGKILL after the grace period.
    fn teardown(&mut self, why: Ending) {
        if self.ending.is_some() {
            return;
        }
        tracing::info!(?why, "tearing the job down");
        self.ending = Some(why);
        for r in self.ranks.iter_mut().filter(|r| r.exit.is_none()) {
            signal(r.pid, Signal::SIGTERM);
            r.stopped = true;
        }
        self.kill_at = Some(Instant::now() + self.job.kill_grace);
    }

    /// SIGKILL to every rank still running.
    fn kill_survivors(&mut self) {
        for r in self.ranks.iter_mut().filter(|r| r.exit.is_none()) {
            tracing::debug!(rank = r.rank, pid = r.pid, "SIGKILL");
            signal(r.pid, Signal::SIGKILL);
            r.stopped = true;
        }
        self.kill_at = None;
    }

    /// The event loop cannot go on: kill everything and reap it.
    fn teardown_now(&mut self) {
        self.kill_survivors();
        for r in self.ranks.iter_mut().filter(|r| r.exit.is_none()) {
            if let Ok(s) = r.child.wait() {
                r.exit = Some(s);
            }
        }
    }
}

fn signal_name(sig: i32) -> String {
    match Signal::try_from(sig) {
        Ok(s @ (Signal::SIGINT | Signal::SIGTERM)) => s.as_str().into(),
        _ => format!("signal {sig}"),
    }
}

mod dynamic;

#[cfg(test)]
mod tests;
