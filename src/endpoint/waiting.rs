//! Waiting: waits on a request, the idle step of each wait mode, and the blocking receive that
//! bypasses the posted list ([`Bypass`]) with its tight fastbox loop.

use nemesis_shm::Incoming;
use nemesis_shm::netmod::Netmod;

use super::matching::{Want, copy_into, finish};
use super::progress::Active;
use super::request::{RecvBuf, Request};
use super::{ANY_TAG, Inner, KIND_EAGER, NOT_LOCAL, POLL_BUDGET, Peer, Status};

/// [`Incoming::kind_flags`] of eager data with a fault-tolerance piggyback (its stamp flag masked).
const KIND_EAGER_FT: u16 = KIND_EAGER as u16 | (nemesis_shm::cell::flags::FT_PIGGYBACK as u16) << 8;

use crate::bootstrap;
use crate::error::{Error, Result};
use crate::wait::Waiter;

/// A bypass wait whose source is not one local rank (`ANY_SOURCE`, or continuing a message).
const NOT_LOCAL_SOURCE: u16 = u16::MAX - 1;

/// A blocking receive's own state while it bypasses the posted list.
#[derive(Debug)]
pub(super) struct Bypass {
    pub(super) want: Want,
    pub(super) buf: RecvBuf,
    pub(super) status: Option<Status>,
    pub(super) done: Option<Result<Status>>,
    /// It matched a large message: the rendezvous request to wait for.
    pub(super) lmt: Option<Request>,
}

impl Bypass {
    fn new(want: Want, buf: RecvBuf) -> Bypass {
        Bypass { want, buf, status: None, done: None, lmt: None }
    }

    /// True while no message is matched to it.
    #[inline(always)]
    pub(super) fn open(&self) -> bool {
        self.status.is_none() && self.done.is_none() && self.lmt.is_none()
    }
}

impl Inner {
    /// Waits for `req` and takes its result. An error that is not the request's own (met while
    /// progressing) is returned once the request was settled (`settle.rs`): whatever this
    /// returns, `req` is stale and touches its buffer no more.
    pub(super) fn wait(&mut self, req: Request) -> Result<Status> {
        let mut waiter = Waiter::new(self.cfg.wait, self.spin);
        loop {
            if let Some(r) = self.reqs.take(req)? {
                self.ft_taken(req);
                return r;
            }
            if let Err(e) = self.idle_step(&mut waiter, None) {
                self.settle(&[req]);
                return Err(e);
            }
        }
    }

    /// Waits until `ready()`, a condition outside the Endpoint that another rank of this node
    /// makes true (a flag in the segment), with progress meanwhile; `peers` are the ranks that
    /// may make it true: once one of them is known to have ended with `ready()` still false, the
    /// wait fails with [`Error::PeerDied`]. The wait mode applies as for a blocking receive:
    /// quick checks of the condition between full polls, then spin, yield or block (the rank
    /// that makes it true rings our doorbell in block mode: [`Endpoint::wake`](
    /// super::Endpoint::wake)).
    pub(super) fn wait_until(&mut self, peers: &[u32], ready: &mut dyn FnMut() -> bool) -> Result<()> {
        let mut waiter = Waiter::new(self.cfg.wait, self.spin);
        loop {
            let quick = waiter.quick_checks(Self::TIGHT_SPINS);
            for _ in 0..quick {
                if ready() {
                    return Ok(());
                }
                for _ in 0..Self::TIGHT_PAUSES {
                    core::hint::spin_loop();
                }
            }
            waiter.checked(quick);
            if ready() {
                return Ok(());
            }
            self.no_dead_peer(peers, ready)?;
            if self.progress(None)? {
                waiter.progressed();
                continue;
            }
            self.idle_for(&mut waiter, None, ready)?;
        }
    }

    /// One step of [`wait_until`](Self::wait_until) that never sleeps (for callers that release
    /// a lock between steps): a check, a progress pass and liveness checks; true once `ready()`.
    pub(super) fn poll_until(&mut self, peers: &[u32], ready: &mut dyn FnMut() -> bool) -> Result<bool> {
        if ready() {
            return Ok(true);
        }
        self.progress(None)?;
        self.port.check_peers()?;
        if self.port.has_events() {
            self.handle_events(None)?;
        }
        self.no_dead_peer(peers, ready)?;
        Ok(ready())
    }

    /// `Err(PeerDied)` if one of `peers` is known to have ended while `ready()` is still false
    /// (checked after the death was seen: what it did before it died counts).
    fn no_dead_peer(&self, peers: &[u32], ready: &mut dyn FnMut() -> bool) -> Result<()> {
        match peers.iter().find(|&&r| r != self.rank && self.peer(r) != Peer::Alive) {
            Some(&rank) if !ready() => Err(Error::PeerDied { rank }),
            _ => Ok(()),
        }
    }

    /// A progress pass, then waiting according to the mode if nothing happened.
    pub(super) fn idle_step(&mut self, waiter: &mut Waiter, by: Option<&mut Bypass>) -> Result<()> {
        let mut by = by;
        if self.progress(by.as_deref_mut())? {
            waiter.progressed();
            Ok(())
        } else {
            self.idle(waiter, by)
        }
    }

    /// Nothing happened: liveness checks once the wait is long, then spin, yield or block.
    pub(super) fn idle(&mut self, waiter: &mut Waiter, by: Option<&mut Bypass>) -> Result<()> {
        self.idle_for(waiter, by, &mut || false)
    }

    /// [`idle`](Self::idle) for a wait that `ready` may also end (checked again once the doorbell
    /// is armed, as the queues are).
    fn idle_for(
        &mut self,
        waiter: &mut Waiter,
        by: Option<&mut Bypass>,
        ready: &mut dyn FnMut() -> bool,
    ) -> Result<()> {
        // Control messages the engine queued where nothing drains it at once (a delivery that
        // raised the taint of a process in recovery: its `MyPhase`): out before this process
        // waits, since the wait may be for what they unblock.
        if self.ft.as_deref().is_some_and(|ft| ft.process.has_actions()) {
            self.ft_drain()?;
            waiter.progressed();
            return Ok(());
        }
        if waiter.is_long() || bootstrap::take_failure_notice() {
            self.port.check_peers()?;
            if self.port.has_events() {
                self.handle_events(by)?;
                waiter.progressed();
                return Ok(());
            }
        }
        let bell = self.bell;
        let mut recheck_error = None;
        // The last look before sleeping covers every place a message may wait: the queue and
        // every fastbox. A poll scans the fastboxes of sources no receive names only every few
        // polls (`PortConfig::scan_every`), so without the scan an `ANY_SOURCE` receive woken by a
        // sender's ring for its fastbox message polled the queue alone and slept again: each
        // such message then waited for several doorbell timeouts (10 ms each).
        waiter.idle(bell, || {
            let polled = match self.port.poll(&[]) {
                // A peer event first (see below): the scan would pass it.
                Ok(None) if !self.port.has_events() => self.port.scan_fastboxes(),
                r => r,
            };
            match polled {
                Ok(None) if ready() => true,
                Ok(Some(inc)) => {
                    if let Err(e) = self.deliver(inc, by) {
                        recheck_error = Some(e);
                    }
                    true
                }
                // The poll learnt something (a retired peer's restart, reported before its first
                // message): handled before the next poll returns what follows.
                Ok(None) if self.port.has_events() => {
                    if let Err(e) = self.handle_events(by) {
                        recheck_error = Some(e);
                    }
                    true
                }
                Ok(None) => false,
                Err(e) => {
                    recheck_error = Some(e.into());
                    true
                }
            }
        });
        recheck_error.map_or(Ok(()), Err)
    }

    /// A blocking receive that bypasses the posted list: polls with itself as the match target.
    /// The common case inline: the awaited source's next message waits in its fastbox and matches.
    #[inline(always)]
    pub(super) fn recv_bypass(&mut self, want: Want, buf: RecvBuf) -> Result<Status> {
        let src_local = if want.source >= 0 {
            self.route.get(want.source as usize).copied().unwrap_or(NOT_LOCAL)
        } else {
            NOT_LOCAL
        };
        if src_local != NOT_LOCAL
            && let Some(inc) = self.port.poll_fastbox(src_local)?
        {
            // A fastbox message is whole; its sender is `want.source`. Plain eager data only (no
            // flag: a message with a fault-tolerance piggyback takes `recv_routed`).
            if inc.kind_flags() == u16::from(KIND_EAGER)
                && inc.context() == want.context
                && (want.tag == ANY_TAG || want.tag == inc.tag())
            {
                let status = Status { source: want.source as u32, tag: inc.tag(), len: inc.len() };
                copy_into(buf, &inc);
                self.port.release(inc)?;
                return finish(status, buf.cap);
            }
            return self.recv_routed(inc, want, buf, src_local);
        }
        self.recv_wait(want, buf, src_local)
    }

    /// A blocking receive whose awaited source's next message is not a plain match: routed the
    /// general way, then waited for.
    #[inline(never)]
    fn recv_routed(&mut self, inc: Incoming<'static>, want: Want, buf: RecvBuf, src_local: u16) -> Result<Status> {
        if inc.kind_flags()
            & !(u16::from(nemesis_shm::cell::flags::FT_STAMP | nemesis_shm::cell::flags::FT_STAMP_SHORT) << 8)
            == KIND_EAGER_FT
            && inc.context() == want.context
            && (want.tag == ANY_TAG || want.tag == inc.tag())
        {
            // The inline bypass with fault tolerance: the engine's arrival and delivery hooks.
            return self.recv_ft_fastbox(inc, want, buf, src_local);
        }
        let mut by = Bypass::new(want, buf);
        if let Err(e) = self.deliver(inc, Some(&mut by)) {
            return Err(self.bypass_failed(&mut by, e));
        }
        match by.done {
            Some(r) => r,
            // Not taken: if it began a message (or a rendezvous) for this receive, the general
            // loop continues it.
            None if !by.open() => self.recv_finish(by, NOT_LOCAL_SOURCE),
            None => self.recv_finish(Bypass::new(want, buf), src_local),
        }
    }

    /// A blocking receive with nothing to take yet.
    #[inline(never)]
    pub(super) fn recv_wait(&mut self, want: Want, buf: RecvBuf, src_local: u16) -> Result<Status> {
        self.recv_finish(Bypass::new(want, buf), src_local)
    }

    /// Waits for the blocking receive `by` to complete.
    fn recv_finish(&mut self, mut by: Bypass, src_local: u16) -> Result<Status> {
        let source = by.want.source;
        if by.open() && source >= 0 && self.peer(source as u32) == Peer::Silent {
            return Err(Error::PeerDied { rank: source as u32 });
        }
        match self.bypass_steps(&mut by, src_local) {
            Ok(r) => {
                // A message still arriving for this receive (it ended with an error of its own)
                // is dropped whole.
                self.bypass_left();
                r
            }
            Err(e) => Err(self.bypass_failed(&mut by, e)),
        }
    }

    /// The blocking receive `by` met error `e`, not its own, while progressing: what it had
    /// matched is settled (`settle.rs`) before the error is returned: the rest of an eager
    /// message goes into a sink, a rendezvous is finished.
    #[cold]
    fn bypass_failed(&mut self, by: &mut Bypass, e: Error) -> Error {
        self.bypass_left();
        if let Some(req) = by.lmt.take() {
            self.settle(&[req]);
        }
        e
    }

    /// The blocking receive leaves: the rest of a message still arriving for it is dropped.
    fn bypass_left(&mut self) {
        for a in self.active.iter_mut() {
            if matches!(a, Active::Bypass) {
                *a = Active::Discard;
            }
        }
    }

    /// Fastbox checks of the awaited source between two full polls while waiting.
    const TIGHT_SPINS: u32 = 64;

    /// `pause`s between two checks of the awaited fastbox: a `pause` takes about 23 ns on the
    /// project's machine, so 4 bound the detection delay to about 90 ns, well under a cache-line
    /// transfer. 8-byte one-way latency through the C ABI (`mpi/bench/compare-latency.sh`
    /// method, SCHED_FIFO, interleaved with Open MPI), median of per-round ratios to Open MPI in
    /// three runs: 16 pauses 0.55, 0.47, 0.52; 4 pauses 0.43, 0.36, 0.43; 1 pause 0.49.
    const TIGHT_PAUSES: u32 = 4;

    /// The loop of a blocking receive: `Ok` with its own result; `Err` with an error not its own
    /// (met while progressing), `by` left as it was then for [`bypass_failed`](Self::bypass_failed).
    fn bypass_steps(&mut self, by: &mut Bypass, src_local: u16) -> Result<Result<Status>> {
        let expected = [src_local];
        let exp: &[u16] = if src_local == NOT_LOCAL || src_local == NOT_LOCAL_SOURCE { &[] } else { &expected };
        let mut waiter = Waiter::new(self.cfg.wait, self.spin);
        loop {
            if let Some(r) = by.done.take() {
                return Ok(r);
            }
            if let Some(req) = by.lmt.take() {
                // The wait settles the transfer itself if it meets an error not its own.
                return Ok(self.wait(req));
            }
            let mut got = false;
            // Tight: only the awaited source's fastbox (the whole poll is much longer).
            let quick = waiter.quick_checks(Self::TIGHT_SPINS);
            if !exp.is_empty() && by.status.is_none() && quick > 0 {
                let mut empty = 0;
                for _ in 0..quick {
                    if let Some(inc) = self.port.poll_fastbox(src_local)? {
                        got = true;
                        let source = self.global[usize::from(inc.src)];
                        if inc.offset() == 0
                            && inc.is_last()
                            && inc.kind_flags() == u16::from(KIND_EAGER)
                            && by.want.matches(source, inc.tag(), inc.context())
                        {
                            let status = Status { source, tag: inc.tag(), len: inc.len() };
                            copy_into(by.buf, &inc);
                            self.port.release(inc)?;
                            return Ok(finish(status, by.buf.cap));
                        }
                        self.deliver(inc, Some(by))?;
                        break;
                    }
                    if self.port.has_queued() {
                        break;
                    }
                    empty += 1;
                    for _ in 0..Self::TIGHT_PAUSES {
                        core::hint::spin_loop();
                    }
                }
                waiter.checked(empty);
                if let Some(r) = by.done.take() {
                    return Ok(r);
                }
            }
            for _ in 0..POLL_BUDGET {
                match self.port.poll(exp)? {
                    Some(inc) => {
                        got = true;
                        self.deliver(inc, Some(by))?;
                        if by.done.is_some() || by.lmt.is_some() {
                            break;
                        }
                    }
                    None => break,
                }
            }
            if by.done.is_some() || by.lmt.is_some() {
                // Matched: back to the caller at once. Another netmod poll here would cost the
                // reply its system calls (a `fi_cq_read` of the ofi netmod's socket providers
                // polls their descriptors); the next wait makes that progress.
                continue;
            }
            got |= self.resume_pending()?;
            if self.ft_mail.is_some() {
                got |= self.ft_mail(Some(by))?;
            }
            got |= self.lmt_step()?;
            if let Some(net) = self.net.as_mut() {
                got |= net.poll(&mut self.port)?;
            }
            if self.port.has_events() {
                self.handle_events(Some(by))?;
            }
            if by.done.is_some() || by.lmt.is_some() {
                continue;
            }
            if got {
                waiter.progressed();
            } else {
                self.idle(&mut waiter, Some(by))?;
            }
        }
    }
}
