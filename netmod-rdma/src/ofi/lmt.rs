//! Large messages ([`nemesis_lmt::NetLmt`]'s backend): the sender registers its buffer and
//! offers it in the RTS where the receiver can read it (`fi_read`, one round trip, no copy); else
//! the receiver posts tagged receives (`tags::data`) into its buffer and the sender sends the data
//! two-sided. Each transfer moves in chunks of at most `chunk` bytes, as many at once as
//! large-message slots allow. Registrations go through the cache ([`crate::mrcache`]); keys we
//! choose are random.
//!
//! Invariants: a transfer's `inflight` counts its operations posted and not completed; its
//! buffer is the provider's while that is above zero (or, for a dead peer, until the heartbeat
//! timeout: see `reap`); its registration is released once, when it is reported or abandoned.

use std::ffi::c_void;
use std::ptr;
use std::time::Instant;

use nemesis_lmt::{LmtBackend, NetDone, Outcome, RecvPlan, RemoteBuf};
use nemesis_shm::{Error, Result};

use super::{Link, OfiNetmod, Op, RecvX, SendX};
use crate::fabric;
use crate::mrcache::Reg;
use crate::sys::*;
use crate::tags;

/// A random registration key of `size` bytes (at most 8), never the slab's 1 nor 0.
pub(super) fn random_key(size: usize) -> Result<u64> {
    let n = nemesis_shm::auth::nonce()?;
    let mut k = [0u8; 8];
    k.copy_from_slice(&n[..8]);
    let bits = 8 * size.clamp(1, 8) as u32;
    let k = u64::from_le_bytes(k) & (u64::MAX >> (64 - bits));
    Ok(k.max(2))
}

impl OfiNetmod<'_> {
    fn reg_desc(&self, reg: Option<Reg>) -> *mut c_void {
        if self.fi.caps.mr_mode & FI_MR_LOCAL == 0 {
            return ptr::null_mut();
        }
        reg.and_then(|r| self.mrs.handle(r.id)).map_or(ptr::null_mut(), fabric::desc)
    }

    /// Posts the operations of large messages that can go now: reads, data receives, data
    /// sends, in chunks, as slots allow.
    pub(super) fn pump_lmt(&mut self) -> bool {
        let mut moved = false;
        for k in 0..self.recvs.len() {
            loop {
                let r = &self.recvs[k];
                if r.failed.is_some() || r.posted >= r.bytes || self.free_lmt.is_empty() {
                    break;
                }
                let (peer, id, off, remote, reg) = (r.peer, r.id, r.posted, r.remote, r.reg);
                let n = (r.bytes - off).min(self.chunk as u64);
                // SAFETY: `off + n <= bytes`: inside the receive buffer (start_recv's contract).
                let dst = unsafe { r.dst.add(off as usize) } as *mut c_void;
                let Some(addr) = self.peers[peer as usize].addr else { break };
                let Some(slot) = self.free_lmt.pop() else { break };
                let (desc, ctx) = (self.reg_desc(reg), self.ctx(slot));
                let (rc, op, call) = match remote {
                    // SAFETY: the buffer is the provider's until the completion of `ctx`.
                    Some(rb) => (
                        unsafe { nm_read(self.fi.ep.0, dst, n as usize, desc, addr, rb.addr + off, rb.key, ctx) },
                        Op::Read { peer, id, bytes: n },
                        "fi_read",
                    ),
                    // SAFETY: as above.
                    None => (
                        unsafe { nm_trecv(self.fi.ep.0, dst, n as usize, desc, addr, tags::data(peer, id), 0, ctx) },
                        Op::DataRx { peer, id, bytes: n },
                        "fi_trecv",
                    ),
                };
                if rc == -(FI_EAGAIN as isize) {
                    self.free_lmt.push(slot);
                    break;
                }
                if rc != 0 {
                    self.free_lmt.push(slot);
                    self.died(peer, &format!("{call}: {}", fabric::strerror(rc as i64)));
                    break;
                }
                self.ops[slot] = op;
                let r = &mut self.recvs[k];
                r.posted += n;
                r.inflight += 1;
                moved = true;
            }
        }
        for k in 0..self.sends.len() {
            loop {
                let s = &self.sends[k];
                let Some((total, posted, _)) = s.stream else { break };
                if s.failed.is_some() || posted >= total || self.free_lmt.is_empty() {
                    break;
                }
                let (peer, id, reg) = (s.peer, s.id, s.reg);
                let n = (total - posted).min(self.chunk as u64);
                // SAFETY: `posted + n <= total <= len`: inside the sender's buffer, which stays
                // valid and unchanged until the transfer is reported (start_send's contract).
                let src = unsafe { s.addr.add(posted as usize) } as *const c_void;
                let Some(addr) = self.peers[peer as usize].addr else { break };
                let Some(slot) = self.free_lmt.pop() else { break };
                let (desc, ctx) = (self.reg_desc(reg), self.ctx(slot));
                // SAFETY: as above; the context is stable until the completion.
                let rc = unsafe { nm_tsend(self.fi.ep.0, src, n as usize, desc, addr, tags::data(self.me, id), ctx) };
                if rc == -(FI_EAGAIN as isize) {
                    self.free_lmt.push(slot);
                    break;
                }
                if rc != 0 {
                    self.free_lmt.push(slot);
                    self.died(peer, &format!("fi_tsend (data): {}", fabric::strerror(rc as i64)));
                    break;
                }
                self.ops[slot] = Op::DataTx { peer, id, bytes: n };
                let s = &mut self.sends[k];
                if let Some((_, posted, _)) = s.stream.as_mut() {
                    *posted += n;
                }
                s.inflight += 1;
                moved = true;
            }
        }
        moved
    }

    /// A registration for `len` bytes at `addr` (`exposed`: readable by peers).
    pub(super) fn acquire(&mut self, addr: *const u8, len: u64, exposed: bool) -> Result<Reg> {
        let access = if exposed { FI_SEND | FI_RECV | FI_READ | FI_REMOTE_READ } else { FI_SEND | FI_RECV | FI_READ };
        let prov_key = self.fi.caps.mr_mode & FI_MR_PROV_KEY != 0;
        let fi = &self.fi;
        self.mrs.acquire(addr as usize, len as usize, exposed, |start, bytes| {
            if prov_key {
                return fi.register(start as *const u8, bytes, access, 0);
            }
            // Our keys: random, since the key is all a peer needs to read an exposed
            // registration (and the pages around the buffer): one who can reach the endpoint must
            // not guess it. A key in use already is refused: another is drawn.
            let mut r = Err(Error::Net("no key".into()));
            for _ in 0..4 {
                r = fi.register(start as *const u8, bytes, access, random_key(fi.caps.mr_key_size)?);
                if r.is_ok() {
                    break;
                }
            }
            r
        })
    }

    /// Reports the transfers of dead peers that have nothing in flight, or whose operations the
    /// provider has not ended within the heartbeat timeout of the death (a provider that needs
    /// the dead peer's progress to end them — `shm`'s copies through the peer — never would).
    /// Such an operation's late completion is ignored; its buffer is the caller's again, so a
    /// provider that still wrote into it then would write into memory the caller may reuse: the
    /// price of not hanging on a dead peer.
    pub(super) fn reap(&mut self) {
        let failed = || Outcome::Failed(nemesis_lmt::Error::PeerDied);
        let limit = self.cfg.timing.timeout;
        let due = |f: Option<Instant>, inflight: u32| f.is_some_and(|t| inflight == 0 || t.elapsed() > limit);
        let mut k = 0;
        while k < self.sends.len() {
            if due(self.sends[k].failed, self.sends[k].inflight) {
                let s = self.sends.swap_remove(k);
                if let Some(r) = s.reg {
                    self.mrs.release(r.id);
                }
                self.done.push(NetDone { peer: s.peer, id: s.id, send: true, outcome: failed() });
            } else {
                k += 1;
            }
        }
        let mut k = 0;
        while k < self.recvs.len() {
            if due(self.recvs[k].failed, self.recvs[k].inflight) {
                let r = self.recvs.swap_remove(k);
                if let Some(g) = r.reg {
                    self.mrs.release(g.id);
                }
                self.done.push(NetDone { peer: r.peer, id: r.id, send: false, outcome: failed() });
            } else {
                k += 1;
            }
        }
    }
}

impl LmtBackend for OfiNetmod<'_> {
    unsafe fn pre_send(
        &mut self,
        peer: u32,
        id: u32,
        addr: *const u8,
        bytes: u64,
    ) -> nemesis_lmt::Result<Option<RemoteBuf>> {
        self.peer_index(peer).map_err(|e| nemesis_lmt::Error::Cma(e.to_string()))?;
        let mut s = SendX { peer, id, addr, len: bytes, reg: None, stream: None, inflight: 0, failed: None };
        let mut offer = None;
        if self.read_ok {
            match self.acquire(addr, bytes, true) {
                Ok(reg) => {
                    let at = if self.fi.caps.mr_mode & FI_MR_VIRT_ADDR != 0 {
                        addr as u64
                    } else {
                        addr as u64 - reg.start as u64
                    };
                    offer = Some(RemoteBuf { addr: at, key: reg.key });
                    s.reg = Some(reg);
                }
                Err(e) => tracing::debug!(error = %e, "registration for a read refused: the data will be sent"),
            }
        }
        self.sends.push(s);
        Ok(offer)
    }

    fn abandon_send(&mut self, peer: u32, id: u32) {
        if let Some(k) = self.sends.iter().position(|s| s.peer == peer && s.id == id && s.inflight == 0) {
            let s = self.sends.swap_remove(k);
            if let Some(r) = s.reg {
                self.mrs.release(r.id);
            }
        }
    }

    unsafe fn start_send(&mut self, peer: u32, id: u32, addr: *const u8, bytes: u64) -> nemesis_lmt::Result<()> {
        self.peer_index(peer).map_err(|e| nemesis_lmt::Error::Cma(e.to_string()))?;
        if self.peers[peer as usize].link != Link::Up {
            return Err(nemesis_lmt::Error::PeerDied);
        }
        let local_mr = self.fi.caps.mr_mode & FI_MR_LOCAL != 0;
        let k = match self.sends.iter().position(|s| s.peer == peer && s.id == id) {
            Some(k) if bytes > self.sends[k].len => {
                return Err(nemesis_lmt::Error::Corrupt { what: "bytes to send", value: bytes });
            }
            Some(k) => k,
            None => {
                self.sends.push(SendX {
                    peer,
                    id,
                    addr,
                    len: bytes,
                    reg: None,
                    stream: None,
                    inflight: 0,
                    failed: None,
                });
                self.sends.len() - 1
            }
        };
        if local_mr && self.sends[k].reg.is_none() {
            let reg = self.acquire(addr, bytes, false).map_err(|e| nemesis_lmt::Error::Cma(e.to_string()))?;
            self.sends[k].reg = Some(reg);
        }
        self.sends[k].stream = Some((bytes, 0, 0));
        self.pump_lmt();
        Ok(())
    }

    unsafe fn start_recv(
        &mut self,
        peer: u32,
        id: u32,
        dst: *mut u8,
        bytes: u64,
        remote: Option<RemoteBuf>,
    ) -> nemesis_lmt::Result<RecvPlan> {
        self.peer_index(peer).map_err(|e| nemesis_lmt::Error::Cma(e.to_string()))?;
        if self.peers[peer as usize].link == Link::Dead {
            return Err(nemesis_lmt::Error::PeerDied);
        }
        if self.recvs.iter().any(|r| r.peer == peer && r.id == id) {
            return Err(nemesis_lmt::Error::Corrupt { what: "transfer id already expected", value: u64::from(id) });
        }
        let remote = remote.filter(|_| self.read_ok);
        let reg = if self.fi.caps.mr_mode & FI_MR_LOCAL != 0 {
            Some(self.acquire(dst, bytes, false).map_err(|e| nemesis_lmt::Error::Cma(e.to_string()))?)
        } else {
            None
        };
        self.recvs.push(RecvX { peer, id, dst, bytes, remote, reg, posted: 0, got: 0, inflight: 0, failed: None });
        // Data receives are posted before the CTS leaves, so the data finds them.
        self.pump_lmt();
        Ok(if remote.is_some() { RecvPlan::Read } else { RecvPlan::Stream })
    }

    fn take_lmt_done(&mut self) -> Vec<NetDone> {
        std::mem::take(&mut self.done)
    }
}
