//! Starting and ending an Endpoint: `init` (bootstrap, the node's segment and port, the netmod,
//! the FT engine and its channel, per-pair thresholds) and `finalize` (outstanding sends, the
//! communication matrix, the closing barrier, leaving the segment). A drop without `finalize`
//! finalizes, or, while panicking, leaves the segment as a failed rank.

use std::collections::VecDeque;

use nemesis_lmt::{Lmt, NetLmt};
use nemesis_shm::netmod::Netmod;
use nemesis_shm::{Node, Port, PortConfig, Segment};

use super::progress::Active;
use super::rendezvous::SegRings;
use super::request::Requests;
use super::unexpected::UnexpectedList;
use super::{Endpoint, Inner, NOT_LOCAL, Pair, Peer, Traffic, recovery};
use crate::bootstrap::{self, Boot};
use crate::config::Config;
use crate::error::Result;
use crate::topology::{Distance, Locality, PairThresholds};
use crate::wait::Waiter;

impl Endpoint {
    /// Starts this process's endpoint: bootstrap through PMI-1 (or as a singleton), attach the
    /// node segment, read the `NEMESIS_*` configuration. It installs no `tracing` subscriber:
    /// that is the program's choice ([`crate::log::init`] is ours).
    pub fn init() -> Result<Endpoint> {
        Self::init_with(Config::from_env()?)
    }

    /// As [`init`](Self::init), with the configuration given rather than read from `NEMESIS_*`
    /// (for a runtime that takes its settings elsewhere). Every rank of a job should pass the
    /// same one.
    pub fn init_with(cfg: Config) -> Result<Endpoint> {
        let ft = crate::ft::FtConfig::from_env()?;
        let boot = bootstrap::bootstrap()?;
        Self::from_boot(boot, cfg, ft)
    }

    fn from_boot(boot: Boot, cfg: Config, ft_cfg: Option<crate::ft::FtConfig>) -> Result<Endpoint> {
        let Boot { rank, size, local_ranks, leaders, local_rank, segment, pmi, node, net, localities: published } =
            boot;
        let nlocal = local_ranks.len();
        let mut route = vec![NOT_LOCAL; size as usize];
        for (l, &g) in local_ranks.iter().enumerate() {
            route[g as usize] = l as u16;
        }
        let segment = std::sync::Arc::new(segment);
        // SAFETY: `segment` is in an `Arc` (its address never changes) held by `Inner`, which drops
        // `net` and `port` before it; they, the rings, the doorbells and the mail flag borrowed from `seg` never
        // leave `Inner`, so the `'static` borrows never outlive the segment.
        let seg: &'static Segment = unsafe { &*(&*segment as *const Segment) };
        let mut port = Port::new(seg, local_rank, PortConfig::default())?;
        if net.is_some() {
            // Half of our cells take network arrivals, half our sends to local peers.
            port.netmod_reserve(seg.params().cells_per_rank as usize / 2)?;
        }
        let bell = &seg.state_of(local_rank)?.doorbell;
        let bells =
            (0..local_ranks.len() as u16).map(|l| seg.state_of(l).map(|st| &st.doorbell)).collect::<Result<_, _>>()?;
        let p = *seg.params();
        let pids = (0..local_ranks.len() as u16)
            .map(|l| seg.state_of(l).ok().and_then(|st| Some((st.pid_here()?, st.start_time()))))
            .collect();
        let rings = SegRings {
            seg,
            per: p.lmt_rings_per_rank as u16,
            slots: p.lmt_slots,
            slot_size: p.lmt_slot_size as usize,
            pids,
        };
        let lmt_cfg = nemesis_lmt::Config {
            policy: cfg.lmt,
            cma_min: cfg.cma_min as u64,
            cma_max: cfg.cma_max as u64,
            split_min: cfg.split_min as u64,
            ..nemesis_lmt::Config::default()
        };
        let mut lmt = Lmt::new(local_rank, rings.per, lmt_cfg);
        if cfg.lmt != nemesis_lmt::Policy::Ring {
            // Peers read large messages straight from our buffers where the kernel allows it.
            nemesis_lmt::cma::allow_readers();
            let probe = nemesis_lmt::cma::probe_startup();
            if let Err(why) = &probe
                && local_rank == 0
            {
                tracing::warn!(
                    "single-copy reads (CMA) are not allowed here ({why}): large messages go through shared-copy rings"
                );
            }
            lmt.set_cma(probe.is_ok());
        }
        let default_eager =
            if lmt.cma_allowed() { crate::config::DEFAULT_EAGER_MAX } else { crate::config::DEFAULT_EAGER_MAX_RING };
        let max = port.max_message();
        let eager_net = cfg.eager_max.unwrap_or(default_eager).min(max);
        // Each local peer's distance, from the localities the launcher gave (or, without, those
        // the ranks published at start-up), and its thresholds.
        let localities = Locality::from_env(nlocal).or(published);
        let mut pairs = Vec::with_capacity(nlocal);
        for l in 0..nlocal {
            let distance =
                localities.as_ref().map_or(Distance::Unknown, |v| v[usize::from(local_rank)].distance(&v[l]));
            let row: &PairThresholds = cfg.pairs.row(distance);
            let eager = row.eager_max.or(cfg.eager_max).unwrap_or(default_eager).min(max);
            let blocking =
                row.eager_blocking_max.or(cfg.eager_blocking_max).unwrap_or(crate::config::DEFAULT_EAGER_BLOCKING_MAX);
            pairs.push(Pair { distance, eager, eager_blocking: blocking.min(max).max(eager) });
            lmt.set_peer(
                l as u16,
                nemesis_lmt::PeerConfig {
                    cma_min: row.cma_min.unwrap_or(cfg.cma_min) as u64,
                    cma_max: row.cma_max.unwrap_or(cfg.cma_max) as u64,
                    split_min: row.split_min.unwrap_or(cfg.split_min) as u64,
                    ring_chunk: row.ring_chunk.unwrap_or(0) as u64,
                },
            );
        }
        // The inline paths compare with the smallest limit of the node's pairs: one comparison,
        // as with a single limit; only a message above it looks at its pair's.
        let others = || pairs.iter().enumerate().filter(|&(l, _)| l != usize::from(local_rank)).map(|(_, p)| p);
        let eager = others().map(|p| p.eager).min().unwrap_or(eager_net);
        let eager_blocking = others().map(|p| p.eager_blocking).min().unwrap_or(eager_net).max(eager);
        let job_id = match pmi.as_ref() {
            Some(p) => p.job_id().to_owned(),
            None => format!("singleton-{}", std::process::id()),
        };
        let (ft, saved) = match ft_cfg {
            Some(c) => {
                let (ft, saved) = crate::ft::Ft::new(c, rank, size, &job_id)?;
                (Some(Box::new(ft)), saved)
            }
            None => (None, Vec::new()),
        };
        let ft_off = ft.is_none();
        let ft_mail = match ft.as_deref() {
            Some(f) if f.channel.is_some() => Some(&seg.state_of(local_rank)?.mail),
            _ => None,
        };
        let mut inner = Inner {
            net,
            port,
            segment,
            bell,
            bells,
            ft_mail,
            pmi,
            rank,
            size,
            local_rank,
            route: route.into(),
            global: local_ranks.into(),
            cfg,
            spin: cfg.spin_polls.unwrap_or_else(|| crate::wait::default_spin(nlocal)),
            eager,
            eager_blocking,
            eager_net,
            pairs: pairs.into(),
            inline_below: if ft_off { eager + 1 } else { 0 },
            inline_blocking_below: if ft_off { eager_blocking + 1 } else { 0 },
            ft,
            own: vec![Traffic::default(); size as usize].into(),
            other: vec![Traffic::default(); size as usize].into(),
            reqs: Requests::default(),
            posted: VecDeque::new(),
            unexpected: UnexpectedList::new(size),
            next_unexpected: 0,
            unexpected_bytes: 0,
            throttled: false,
            active: vec![Active::None; size as usize].into(),
            pending: VecDeque::new(),
            expected: Vec::new(),
            expected_count: vec![0; nlocal].into(),
            any_posted: 0,
            peers: vec![Peer::Alive; size as usize].into(),
            spare: Vec::new(),
            sync_waiting: Vec::new(),
            next_token: 0,
            cancels: Vec::new(),
            lmt,
            netlmt: NetLmt::new(),
            rings,
            ft_rdv: recovery::Rendezvous::default(),
            refused_rts: 0,
            pid: std::process::id(),
            node,
            leaders: leaders.map(Vec::into_boxed_slice),
            finalized: false,
        };
        inner.restore_unexpected(saved);
        if let Some(ft) = inner.ft.as_deref_mut()
            && ft.process.in_recovery()
        {
            // Restarted: tell the launcher, and send the engine's first messages (`Restarted` to
            // the other groups, `MyPhase` to the coordinator).
            let generation = ft.generation;
            if let Some(ch) = ft.channel.as_mut() {
                ch.send(&crate::contract::channel::Frame::Running { generation });
            }
            inner.ft_drain()?;
        }
        tracing::debug!(rank, size, wait = cfg.wait.name(), eager_max = eager, ft = !ft_off, "endpoint ready");
        Ok(Endpoint { inner: Box::new(inner) })
    }

    /// Completes outstanding sends, synchronises with the other ranks, and leaves the segment.
    pub fn finalize(mut self) -> Result<()> {
        self.inner.finalize()
    }

    /// The node of every rank of the job, named by its lowest rank (each node's
    /// [`node_leader`](Self::node_leader)), as the bootstrap learnt it from the process manager
    /// without exchanging anything with the peers (so a restarted rank has it too); `None` when
    /// the process manager did not tell (PMIx): the ranks must then exchange their leaders.
    pub fn node_leaders(&self) -> Option<&[u32]> {
        self.inner.leaders.as_deref()
    }
}

impl Drop for Endpoint {
    fn drop(&mut self) {
        if self.inner.finalized {
            return;
        }
        if std::thread::panicking() {
            // No barrier with ranks that may be waiting on us: leave the segment as a failed rank
            // (peers complete what waits on us with `PeerDied`).
            self.inner.finalized = true;
            let _ = self.inner.segment.mark_gone(self.inner.local_rank, nemesis_shm::node::STATUS_ABANDONED);
            return;
        }
        if let Err(e) = self.inner.finalize() {
            tracing::warn!(error = %e, "finalize on drop failed");
        }
    }
}

impl Inner {
    fn finalize(&mut self) -> Result<()> {
        if self.finalized {
            return Ok(());
        }
        self.finalized = true;
        // Complete outstanding sends (a send to a dead peer completes with an error).
        let mut waiter = Waiter::new(self.cfg.wait, self.spin);
        let mut warned = false;
        while !self.pending.is_empty()
            || self.ft.as_deref().is_some_and(|ft| !ft.held.is_empty() || !ft.replays.is_empty())
            || self.lmt.busy()
            || self.lmt.has_output()
            || self.netlmt.busy()
            || self.netlmt.has_output()
            || self.net.as_ref().is_some_and(|n| n.busy())
        {
            self.idle_step(&mut waiter, None)?;
            if waiter.is_long() && self.lmt.busy() && !warned {
                tracing::warn!("finalize waits for large messages still in flight (sends not yet received?)");
                warned = true;
            }
        }
        // Unexpected messages never received give their cells back to their senders, which may
        // wait for them to finish.
        for (_, mut u) in self.unexpected.take_all() {
            let _ = self.release_held(&mut u, None);
        }
        let matrix = std::env::var_os(crate::contract::ENV_COMM_MATRIX).filter(|v| !v.is_empty());
        if let Some(file) = &matrix {
            crate::matrix::write_row(std::path::Path::new(file), self.rank, &self.traffic())?;
        }
        // Under recovery, a rank that finished may still hold what a restarted group needs.
        self.ft_finish_wait()?;
        // A process manager other than ours waits in its barrier for every rank, dead ones too:
        // with a peer known dead, the survivors leave without it.
        let dead = (0..self.size).filter(|&r| self.peer(r) != Peer::Alive).count();
        if let Some(pmi) = self.pmi.as_mut() {
            if dead == 0 || pmi.barrier_survives_departures() {
                pmi.barrier()?;
            } else {
                tracing::warn!(dead, pm = %pmi.name(), "finalize without the process manager's barrier: ranks died");
            }
        }
        // Every rank is past its last checkpoint: the files are not needed any more.
        if let Some(ft) = self.ft.as_deref() {
            ft.finish(self.rank);
        }
        if let Some(file) = &matrix
            && self.rank == 0
        {
            crate::matrix::assemble(std::path::Path::new(file), self.size)?;
        }
        if let Some(net) = self.net.as_mut() {
            net.finalize()?;
        }
        self.segment.mark_gone(self.local_rank, nemesis_shm::node::STATUS_CLEAN)?;
        if let Some(pmi) = self.pmi.take() {
            pmi.finalize()?;
        }
        Ok(())
    }
}
