//! For tests: a stranger's libfabric endpoint, outside every job, that sends raw bytes where a
//! rank's eager fragments land (the tag of eager fragments, to the fabric address of a rank's
//! card). Nothing of a netmod: no secret, no sequence numbers, no address vector entry at the
//! receiver. And the settings tests share.

use std::ffi::c_void;
use std::ptr;

use nemesis_shm::{Error, Result};

use crate::fabric::{self, Info, Objects};
use crate::sys::*;
use crate::tags;

/// The settings of tests over provider `prov`: on the loopback interface (but `shm`), heartbeats
/// on 127.0.0.1.
pub fn config(prov: &str) -> crate::OfiConfig {
    crate::OfiConfig {
        provider: Some(prov.into()),
        domain: (prov != "shm").then(|| "lo".into()),
        heartbeat_addr: Some("127.0.0.1".parse().expect("an address")),
        ..crate::OfiConfig::default()
    }
}

/// True in CI (`CI=true`), where a missing provider fails a test instead of skipping it.
pub fn in_ci() -> bool {
    std::env::var("CI").is_ok_and(|v| v == "true" || v == "1")
}

/// Ranks 0 and 1 of a job of two over `prov` ([`config`]) sharing `secret`, connected to each
/// other; `None` where the provider is missing outside CI (said on stderr: the test skips).
pub fn connected_pair<'n>(
    prov: &str,
    secret: &nemesis_shm::auth::JobSecret,
) -> Option<(crate::OfiNetmod<'n>, crate::OfiNetmod<'n>)> {
    use nemesis_shm::netmod::Netmod;
    let mk = |me: u32| match crate::OfiNetmod::new(me, 2, secret.clone(), config(prov)) {
        Ok(n) => Some(n),
        Err(e) if !in_ci() => {
            eprintln!("skipped: ofi provider {prov}: {e}");
            None
        }
        Err(e) => panic!("ofi provider {prov}: {e}"),
    };
    let (mut n0, mut n1) = (mk(0)?, mk(1)?);
    let (c0, c1) = (n0.card(), n1.card());
    n0.connect(1, &c1).expect("rank 1's card");
    n1.connect(0, &c0).expect("rank 0's card");
    Some((n0, n1))
}

/// A port on `node` with cells reserved for a netmod's arrivals.
pub fn netmod_port(node: &nemesis_shm::HeapNode) -> nemesis_shm::Port<'_, nemesis_shm::HeapNode> {
    let mut p = nemesis_shm::Port::new(node, 0, nemesis_shm::PortConfig::default()).expect("a port");
    p.netmod_reserve(32).expect("cells for the netmod");
    p
}

/// A stranger's endpoint (see the module documentation).
pub struct Stranger {
    fi: Objects,
    cq: Box<[fi_cq_tagged_entry]>,
}

// SAFETY: libfabric objects of this value only, used by one thread at a time (FI_THREAD_DOMAIN).
unsafe impl Send for Stranger {}

impl std::fmt::Debug for Stranger {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Stranger").field("provider", &self.fi.caps.prov).finish()
    }
}

impl Stranger {
    /// An endpoint of provider `prov` on `domain` (as [`crate::OfiConfig`]'s), with RMA reads if
    /// `rma`.
    pub fn new(prov: &str, domain: Option<&str>, rma: bool) -> Result<Stranger> {
        let info = Info::get(Some(prov), domain, rma)?;
        let fi = Objects::open(&info)?;
        Ok(Stranger { fi, cq: vec![fi_cq_tagged_entry::default(); 16].into_boxed_slice() })
    }

    /// The fabric address of a rank's business card, in this endpoint's address vector.
    pub fn target(&self, card: &str) -> Result<fi_addr_t> {
        let (_, _, name) = crate::parse_card(card).ok_or_else(|| Error::Net(format!("bad business card {card:?}")))?;
        self.fi.insert(&name)
    }

    /// Sends `bytes` to `to` with the eager fragments' tag, progressing this endpoint, and calling
    /// `between` (which progresses the receiver), until the provider takes them (a connection may
    /// have to be made first) and, beyond the inject size, until the send completes.
    pub fn send(&mut self, to: fi_addr_t, bytes: &[u8], mut between: impl FnMut()) -> Result<()> {
        let inject = bytes.len() <= self.fi.caps.inject_size;
        let mut ctx = fi_context2::default();
        let t0 = std::time::Instant::now();
        loop {
            let rc = if inject {
                // SAFETY: `bytes` is read before the call returns (inject semantics).
                unsafe { nm_tinject(self.fi.ep.0, bytes.as_ptr() as *const c_void, bytes.len(), to, tags::MSG) }
            } else {
                let ctx = &mut ctx as *mut fi_context2 as *mut c_void;
                // SAFETY: `bytes` and `ctx` outlive the operation: this call waits for its
                // completion below (no FI_MR_LOCAL: the software providers need no descriptor).
                unsafe {
                    nm_tsend(
                        self.fi.ep.0,
                        bytes.as_ptr() as *const c_void,
                        bytes.len(),
                        ptr::null_mut(),
                        to,
                        tags::MSG,
                        ctx,
                    )
                }
            };
            if rc == 0 {
                if !inject {
                    self.wait(&mut ctx, t0, &mut between)?;
                }
                return Ok(());
            }
            if rc != -(FI_EAGAIN as isize) {
                return Err(fabric::fi_error(&self.fi.caps.prov, "fi_tinject", rc as i64));
            }
            if t0.elapsed() > std::time::Duration::from_secs(60) {
                return Err(Error::Net("the stranger's fi_tinject: no room for 60 s".into()));
            }
            self.progress();
            between();
        }
    }

    /// Reads `len` bytes at `addr` of the memory registered under `key` at `from` (`fi_read`),
    /// progressing as [`Stranger::send`] does: the bytes, or `None` if the read failed or did
    /// not complete within `patience` (a provider may never answer a read it refuses: its buffer
    /// and context are then leaked, the provider may still write them).
    pub fn read(
        &mut self,
        from: fi_addr_t,
        addr: u64,
        key: u64,
        len: usize,
        patience: std::time::Duration,
        mut between: impl FnMut(),
    ) -> Result<Option<Vec<u8>>> {
        let buf: *mut [u8] = Box::into_raw(vec![0u8; len].into_boxed_slice());
        let ctx: *mut fi_context2 = Box::into_raw(Box::default());
        // SAFETY: both allocations were just made and are freed once (below, when the provider is
        // done with them).
        let free = || unsafe { (Box::from_raw(buf), Box::from_raw(ctx)).0.into_vec() };
        let t0 = std::time::Instant::now();
        loop {
            // SAFETY: `buf` and `ctx` live until the operation completes (or forever).
            let rc = unsafe {
                nm_read(
                    self.fi.ep.0,
                    buf as *mut u8 as *mut c_void,
                    len,
                    ptr::null_mut(),
                    from,
                    addr,
                    key,
                    ctx as *mut c_void,
                )
            };
            if rc == 0 {
                loop {
                    if let Some(ok) = self.progress_for(ctx as *mut c_void) {
                        let b = free();
                        return Ok(ok.then_some(b));
                    }
                    if t0.elapsed() > patience {
                        return Ok(None);
                    }
                    between();
                }
            }
            if rc != -(FI_EAGAIN as isize) || t0.elapsed() > patience {
                free();
                return Ok(None);
            }
            self.progress();
            between();
        }
    }

    /// Progresses until the operation of `ctx` completes: true if it succeeded.
    fn wait(&mut self, ctx: &mut fi_context2, t0: std::time::Instant, between: &mut impl FnMut()) -> Result<bool> {
        let want = ctx as *mut fi_context2 as *mut c_void;
        loop {
            if let Some(ok) = self.progress_for(want) {
                return Ok(ok);
            }
            if t0.elapsed() > std::time::Duration::from_secs(60) {
                return Err(Error::Net("the stranger's operation: no completion for 60 s".into()));
            }
            between();
        }
    }

    /// Reads this endpoint's completions (libfabric moves data when it is polled).
    pub fn progress(&mut self) {
        self.progress_for(ptr::null_mut());
    }

    /// As [`Stranger::progress`]; whether the operation of context `want` succeeded, once it
    /// completed.
    fn progress_for(&mut self, want: *mut c_void) -> Option<bool> {
        // SAFETY: `cq` holds 16 entries of the queue's format (tagged).
        let n = unsafe { nm_cq_read(self.fi.cq.0, self.cq.as_mut_ptr() as *mut c_void, self.cq.len()) };
        if n > 0 {
            return self.cq[..n as usize].iter().any(|e| e.op_context == want).then_some(true);
        }
        if n == -(FI_EAVAIL as isize) {
            let mut e = fi_cq_err_entry::default();
            // SAFETY: `e` receives one error entry.
            unsafe { nm_cq_readerr(self.fi.cq.0, &mut e, 0) };
            return (e.op_context == want).then_some(false);
        }
        None
    }
}
