//! Application checkpoints with fault tolerance on ([`Endpoint::checkpoint`]): coordinated inside
//! the caller's group (HydEE's group checkpoint, Fig 6.3 lines 23–26 of
//! `guermouche-2011-thesis-send-determinism-hydee.txt`), written one file per rank and generation
//! (`crate::ft::checkpoint`).
//!
//! Every member of the group calls it at the same point of its program, with no operation
//! outstanding. Then:
//! 1. each member sends every other member a marker (stage 0) behind everything it sent before,
//!    on the same FIFO, and waits for theirs: the group's channels are flushed, every message a
//!    member sent before its checkpoint has arrived (messages that arrived and were not received
//!    are part of the state and saved with it);
//! 2. messages still arriving in several fragments complete, and large messages announced by an
//!    RTS (from other groups) are pulled in: the state holds whole messages only;
//! 3. the state is captured: the application's bytes, the engine's `checkpoint()`, the log's
//!    `snapshot()` and the unreceived messages, and written (temporary file, fsync, rename);
//! 4. each member tells the others (stage 1) that its file is durable, or that it failed, and
//!    waits for theirs; the group's new generation is durable once all are: only then are the
//!    generations before the previous one removed (two are retained, `crate::ft::checkpoint`),
//!    the acknowledgements and RPP prunings held back for the previous one sent, and the engine
//!    told (`checkpoint_durable`: the acknowledgements for the new one, held back in turn until
//!    the next). If any member failed, all abandon the new generation and the previous one stays
//!    in force.
//!
//! A member cannot start its next checkpoint before every member's stage-1 marker of this one has
//! arrived, so a message it sends after its checkpoint reaches the others after theirs.

use std::path::Path;
use std::time::Instant;

use super::matching::copy_into;
use super::progress::Active;
use super::request::{Op, RecvBuf, Request};
use super::{Endpoint, Inner, MARK_DURABLE, MARK_FAILED, MARK_SKIPPED, Peer, Status};

use crate::error::{Error, Result};
use crate::ft::FtStats;
use crate::ft::checkpoint::{self, FtImage, SavedMessage};
use crate::wait::Waiter;

impl Endpoint {
    /// Takes a checkpoint of this rank's `state` (the bytes the application needs to resume),
    /// coordinated with the other members of its fault-tolerance group, which call it at the same
    /// point of their programs. Returns once the whole group's new checkpoint is durable.
    ///
    /// No operation may be outstanding (every request completed and waited for or tested, no
    /// receive posted): [`Error::CheckpointOutstanding`] otherwise, with or without fault
    /// tolerance. Without fault tolerance there is nothing more to do and nothing is written. If a
    /// member cannot write its file, every member returns an error and the previous checkpoint
    /// stays in force. While a restarted group re-executes in its recovery round, the whole group
    /// skips the checkpoint: `Ok`, and no new generation (`ft_reexecuting`).
    pub fn checkpoint(&mut self, state: &[u8]) -> Result<()> {
        self.inner.checkpoint(state, &[])
    }

    /// [`Endpoint::checkpoint`] with `mpi`, the MPI library's own state, saved beside the
    /// application's (in [`FtImage::mpi`]) and handed back by [`Endpoint::restored_mpi`].
    pub fn checkpoint_with(&mut self, state: &[u8], mpi: &[u8]) -> Result<()> {
        self.inner.checkpoint(state, mpi)
    }

    /// The MPI library's state saved with the checkpoint this process was restarted from
    /// ([`Endpoint::checkpoint_with`]), or `None` for a process that was not restarted.
    pub fn restored_mpi(&self) -> Option<&[u8]> {
        self.inner.ft.as_deref().and_then(|ft| ft.restored_mpi.as_deref())
    }

    /// The application state of the checkpoint this process was restarted from (its group's last
    /// durable one), or `None` for a process that was not restarted.
    pub fn restored_state(&self) -> Option<Vec<u8>> {
        self.inner.ft.as_deref().and_then(|ft| ft.restored.clone())
    }

    /// Whether fault tolerance is on.
    #[inline(always)]
    pub fn ft_enabled(&self) -> bool {
        self.inner.ft.is_some()
    }

    /// This rank's fault-tolerance group, if fault tolerance is on.
    pub fn ft_group(&self) -> Option<u32> {
        self.inner.ft.as_deref().map(|ft| ft.group)
    }

    /// What fault tolerance did so far, if it is on.
    pub fn ft_stats(&self) -> Option<FtStats> {
        self.inner.ft.as_deref().map(|ft| ft.stats)
    }

    /// `(date, phase)` of the messages to `dest` in the sender log, oldest first (empty without
    /// fault tolerance).
    pub fn ft_logged(&self, dest: u32) -> Vec<(u64, u64)> {
        self.inner.ft.as_deref().map_or_else(Vec::new, |ft| ft.log.entries(dest))
    }

    /// Bytes the sender log holds in memory and in its spill file.
    pub fn ft_log_bytes(&self) -> (usize, u64) {
        self.inner.ft.as_deref().map_or((0, 0), |ft| (ft.log.memory_bytes(), ft.log.spilled_bytes()))
    }

    /// `(date, phase)` of the messages received from `source` that the engine recorded (those of
    /// other groups since their sender's last checkpoint; empty without fault tolerance).
    pub fn ft_received_from(&self, source: u32) -> Vec<(u64, u64)> {
        self.inner.ft.as_deref().map_or_else(Vec::new, |ft| ft.process.received_from(source))
    }

    /// The engine's date (sends so far) and phase, if fault tolerance is on.
    pub fn ft_clock(&self) -> Option<(u64, u64)> {
        self.inner.ft.as_deref().map(|ft| (ft.process.date(), ft.process.phase()))
    }

    /// The directory of checkpoint files, if fault tolerance is on.
    pub fn ft_dir(&self) -> Option<&Path> {
        self.inner.ft.as_deref().map(|ft| ft.dir.as_path())
    }

    /// The key of this job's checkpoint files ([`checkpoint::load`]), if fault tolerance is on.
    pub fn ft_checkpoint_key(&self) -> Option<&checkpoint::CheckpointKey> {
        self.inner.ft.as_deref().map(|ft| &ft.key)
    }
}

impl Inner {
    /// Operations of the application not yet complete and taken (the Endpoint's own are not),
    /// and messages a matched probe reserved that no receive has taken yet.
    fn outstanding(&self) -> usize {
        let internal =
            self.pending.iter().filter(|p| p.internal).count() + self.ft.as_deref().map_or(0, |ft| ft.replays.len());
        let reserved = self.unexpected.iter().filter(|(_, u)| u.reserved).count();
        self.reqs.live().saturating_sub(internal) + reserved
    }

    pub(super) fn checkpoint(&mut self, state: &[u8], mpi: &[u8]) -> Result<()> {
        let outstanding = self.outstanding();
        if outstanding > 0 {
            return Err(Error::CheckpointOutstanding { requests: outstanding });
        }
        if self.ft.is_none() {
            return Ok(());
        }
        if !self.ft_reexecuting() {
            self.ft_await_recovery()?;
        }
        // Unexpected messages are copied out whatever their bound (`NEMESIS_UNEXPECTED_MAX`) while
        // the group checkpoints: the state holds their bytes, and a sender whose cells they held
        // must be able to send its marker.
        let bound = std::mem::replace(&mut self.cfg.unexpected_max, usize::MAX);
        let r = self.unhold_unexpected(None).and_then(|()| self.group_checkpoint(state, mpi));
        self.cfg.unexpected_max = bound;
        self.count_unexpected(0);
        r
    }

    /// The engine takes no checkpoint during a recovery round: under the launcher's recovery,
    /// serves it until it is over (this rank's group-mates wait at the same point; a round may
    /// start while the group's channels are being flushed, so this runs again before the
    /// capture).
    fn ft_await_recovery(&mut self) -> Result<()> {
        if self.ft_recovers() {
            let mut waiter = Waiter::new(self.cfg.wait, self.spin);
            while self.ft.as_deref().is_some_and(|ft| ft.process.in_recovery()) {
                self.idle_step(&mut waiter, None)?;
            }
        }
        Ok(())
    }

    /// Copies the unexpected messages held in their cells out of the segment (those from
    /// `source` only, if given), and releases them.
    pub(super) fn unhold_unexpected(&mut self, source: Option<u32>) -> Result<()> {
        for k in self.unexpected.slots() {
            let u = &mut self.unexpected[k].1;
            if u.held.is_empty() || source.is_some_and(|s| s != u.source) {
                continue;
            }
            let held = std::mem::take(&mut u.held);
            let mut data = vec![0u8; u.len];
            let buf = RecvBuf::bytes(data.as_mut_ptr(), data.len());
            let mut res: Result<()> = Ok(());
            for inc in held {
                copy_into(buf, &inc);
                if let Err(e) = self.port.release(inc) {
                    res = Err(e.into());
                }
            }
            self.count_unexpected(data.len());
            self.unexpected[k].1.data = data;
            res?;
        }
        Ok(())
    }

    /// The group checkpoint proper (module documentation), fault tolerance on.
    fn group_checkpoint(&mut self, state: &[u8], mpi: &[u8]) -> Result<()> {
        let Some(ft) = self.ft.as_deref_mut() else { return Ok(()) };
        let t0 = Instant::now();
        // An abandoned or skipped attempt used its number: its markers are not this one's.
        let generation = ft.generation.max(ft.attempt) + 1;
        ft.attempt = generation;
        let partners = ft.partners.clone();
        // 1. The group's channels are flushed.
        for &p in &partners {
            self.send_ft_mark(p, generation, 0)?;
            nemesis_shm::failpoint!("ckpt-marker-sent");
        }
        self.wait_marks(&partners, generation, 0)?;
        // 2. Whole messages only, and no recovery round under way (unless this rank re-executes:
        //    then the group skips this checkpoint).
        self.settle_unexpected()?;
        let skip = self.ft_reexecuting();
        if !skip {
            self.ft_await_recovery()?;
        }
        // 3. Capture and write.
        let written = if skip { None } else { Some(self.capture_and_write(state, mpi, generation)) };
        nemesis_shm::failpoint!("ckpt-file-durable");
        // 4. Durable for the whole group, or abandoned (or skipped) by all.
        let stage = match &written {
            None => MARK_SKIPPED,
            Some(Ok(_)) => MARK_DURABLE,
            Some(Err(_)) => MARK_FAILED,
        };
        for &p in &partners {
            self.send_ft_mark(p, generation, stage)?;
            nemesis_shm::failpoint!("ckpt-durable-marker-sent");
        }
        self.wait_marks(&partners, generation, 1)?;
        let rank = self.rank;
        let Some(ft) = self.ft.as_deref_mut() else { return Ok(()) };
        let skipped = skip || partners.iter().any(|&p| ft.skipped[p as usize] >= generation);
        let failed = partners.iter().copied().find(|&p| ft.failed[p as usize] >= generation);
        let (path, bytes) = match (written, failed) {
            (Some(Ok(w)), None) if !skipped => w,
            (written, failed) => {
                if written.is_some() {
                    // Nothing to abandon if the engine refused the capture.
                    let _ = ft.process.checkpoint_abandoned();
                }
                if let Some(Ok((path, _))) = &written {
                    let _ = std::fs::remove_file(path);
                }
                self.ft_drain()?;
                if skipped {
                    tracing::debug!(rank, generation, "checkpoint skipped: the group re-executes in a recovery round");
                    return Ok(());
                }
                return Err(match (written, failed) {
                    (Some(Err(e)), _) => e,
                    (_, Some(p)) => Error::Checkpoint(format!(
                        "rank {p} of the group could not write its file: generation {generation} abandoned"
                    )),
                    _ => Error::Checkpoint("abandoned".into()),
                });
            }
        };
        // The previous generation becomes the older retained one: older files go, and what
        // frees the other groups' logs for it leaves (before what the new one allows is held).
        checkpoint::remove_older(&ft.dir, ft.job, rank, ft.generation)?;
        self.ft_release_deferred()?;
        let Some(ft) = self.ft.as_deref_mut() else { return Ok(()) };
        ft.process.checkpoint_durable(&ft.log)?;
        ft.generation = generation;
        ft.stats.checkpoints += 1;
        ft.stats.generation = generation;
        ft.stats.checkpoint_bytes = bytes;
        ft.stats.checkpoint_time = t0.elapsed();
        nemesis_shm::failpoint!("ckpt-group-durable");
        tracing::debug!(rank, generation, bytes, path = %path.display(), time = ?ft.stats.checkpoint_time, "checkpoint durable");
        self.ft_drain()
    }

    /// Step 3: captures this rank's state (the application's bytes, the engine's, the log, the
    /// unreceived messages, the MPI library's `mpi`) and writes its file of `generation`; its
    /// path and size.
    fn capture_and_write(&mut self, state: &[u8], mpi: &[u8], generation: u64) -> Result<(std::path::PathBuf, u64)> {
        let unexpected: Vec<SavedMessage> = self
            .unexpected
            .slots()
            .into_iter()
            .map(|k| &self.unexpected[k].1)
            .map(|u| SavedMessage {
                source: u.source,
                tag: u.tag,
                context: u.context,
                data: u.data.clone(),
                sync: u.sync,
                delivery: u.delivery,
            })
            .collect();
        let (rank, size) = (self.rank, self.size);
        let Some(ft) = self.ft.as_deref_mut() else { return Err(Error::Checkpoint("fault tolerance off".into())) };
        let process = ft.process.checkpoint()?;
        ft.log.snapshot().map_err(Error::from).and_then(|log| {
            let image = FtImage { process, log, unexpected, mpi: mpi.to_vec() };
            let w0 = Instant::now();
            let r = checkpoint::write(&ft.dir, &ft.key, rank, ft.group, generation, size, state, &image);
            ft.stats.checkpoint_write_time = w0.elapsed();
            r
        })
    }

    /// Waits until every partner's marker `stage` of `generation` has arrived (stage 1 also counts
    /// a failure marker).
    fn wait_marks(&mut self, partners: &[u32], generation: u64, stage: usize) -> Result<()> {
        let mut waiter = Waiter::new(self.cfg.wait, self.spin);
        loop {
            let Some(ft) = self.ft.as_deref() else { return Ok(()) };
            let Some(&missing) = partners.iter().find(|&&p| ft.marks[p as usize][stage] < generation) else {
                return Ok(());
            };
            // Under the launcher's recovery a dead member's group (ours) is killed and restarted:
            // wait for it.
            if self.peer(missing) != Peer::Alive && !self.ft_recovers() {
                return Err(Error::PeerDied { rank: missing });
            }
            self.idle_step(&mut waiter, None)?;
        }
    }

    /// Progress until no message is arriving in fragments and every unexpected RTS has been pulled
    /// into memory (in its place in the unexpected list: matching order is kept).
    ///
    /// A pull reads into a buffer of ours, of the length its RTS announced: one longer than this
    /// node's memory is not pulled ([`Error::RtsTooLong`], the RTS stays for a receive), nor one
    /// whose buffer cannot be had. An error met while pulls are under way does not drop their
    /// buffers under their transfers: they are finished first (through further errors, as a failed
    /// call's transfers are, `settle.rs`), and the messages they bring kept; then the error is
    /// returned.
    fn settle_unexpected(&mut self) -> Result<()> {
        let mut pulls: Vec<(u64, Request, Vec<u8>)> = Vec::new();
        let mut failure = None;
        let mut errors = 0;
        let limit = node_memory();
        let mut waiter = Waiter::new(self.cfg.wait, self.spin);
        loop {
            for k in self.unexpected.slots() {
                if failure.is_some() {
                    break;
                }
                let (id, u) = &mut self.unexpected[k];
                let (Some(rts), None) = (u.rts, u.claimed) else { continue };
                let (id, source) = (*id, u.source);
                let Some(mut buf) = (rts.len <= limit).then(|| zeroed(rts.len as usize)).flatten() else {
                    self.refused_rts += 1;
                    failure = Some(Error::RtsTooLong { sender: source, len: rts.len, limit });
                    break;
                };
                let status = Status { source, tag: u.tag, len: buf.len() };
                let req = self.reqs.insert(Op::Lmt { status, cap: buf.len(), peer: source, recv: true, stage: None });
                u.claimed = Some(req);
                let rb = RecvBuf::bytes(buf.as_mut_ptr(), buf.len());
                // The buffer's heap memory stays where it is when the Vec moves into `pulls`.
                self.start_lmt_recv(source, req, &rts, rb);
                pulls.push((id, req, buf));
            }
            let mut k = 0;
            while k < pulls.len() {
                let result = match self.reqs.take(pulls[k].1) {
                    Ok(None) => {
                        k += 1;
                        continue;
                    }
                    Ok(Some(result)) => result,
                    // Not possible: a pull's request lives until taken here.
                    Err(e) => Err(e),
                };
                let (id, _, data) = pulls.swap_remove(k);
                let here = self.unexpected.find_id(None, id).is_some();
                if let Err(e) = result {
                    // Its buffer may go: the transfer is over. The others are waited for first. Under
                    // recovery an RTS whose sender died is gone from the list: it comes again.
                    if here || !self.ft_recovers() {
                        failure.get_or_insert(e);
                    }
                    continue;
                }
                // Whole in memory: received, whatever becomes of its sender.
                self.ft_rts_taken(id);
                self.ft_rdv_check_taken(id, None);
                if let Some(k) = self.unexpected.find_id(None, id) {
                    self.count_unexpected(data.len());
                    let u = &mut self.unexpected[k].1;
                    u.got = data.len();
                    u.data = data;
                    u.rts = None;
                    u.claimed = None;
                }
            }
            let arriving = self.active.iter().any(|a| matches!(a, Active::Unexpected(_)));
            if pulls.is_empty() && (!arriving || failure.is_some()) {
                return failure.map_or(Ok(()), Err);
            }
            if failure.is_some() {
                // Finishing the pulls under way: every step of progress runs whatever the
                // others meet.
                self.settle_pass(&mut waiter, &mut errors);
            } else if let Err(e) = self.idle_step(&mut waiter, None) {
                failure = Some(e);
            }
        }
    }
}

/// This node's memory in bytes (`u64::MAX` if unknown): no buffer of ours is longer.
fn node_memory() -> u64 {
    // SAFETY: `sysconf` reads system values; no memory of ours is involved.
    let (pages, size) = unsafe { (libc::sysconf(libc::_SC_PHYS_PAGES), libc::sysconf(libc::_SC_PAGESIZE)) };
    match (u64::try_from(pages), u64::try_from(size)) {
        (Ok(p), Ok(s)) if p > 0 && s > 0 => p.saturating_mul(s),
        _ => u64::MAX,
    }
}

/// `len` zero bytes (pages the kernel zeroes as they are touched, as `vec![0; len]` has them), or
/// `None` if the memory cannot be had: never an abort.
fn zeroed(len: usize) -> Option<Vec<u8>> {
    if len == 0 {
        return Some(Vec::new());
    }
    let layout = std::alloc::Layout::array::<u8>(len).ok()?;
    // SAFETY: `layout` is not zero-sized.
    let p = unsafe { std::alloc::alloc_zeroed(layout) };
    if p.is_null() {
        return None;
    }
    // SAFETY: `p` comes from the global allocator with the layout of `len` bytes (a `Vec<u8>`'s of
    // capacity `len`), and its `len` bytes are initialised (zeroed).
    Some(unsafe { Vec::from_raw_parts(p, len, len) })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pull_buffers_are_bounded_and_never_abort() {
        assert!(node_memory() > 1 << 20);
        assert_eq!(zeroed(0), Some(Vec::new()));
        assert!(zeroed(4096).is_some_and(|v| v.len() == 4096 && v.iter().all(|&b| b == 0)));
        // More than any allocation can be: refused, not an abort or a capacity panic.
        assert_eq!(zeroed(isize::MAX as usize), None);
        assert_eq!(zeroed(usize::MAX), None);
    }
}
