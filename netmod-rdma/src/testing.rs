//! For tests: a stranger's libfabric endpoint, outside every job, that sends raw bytes where a
//! rank's eager fragments land (the tag of eager fragments, to the fabric address of a rank's
//! card). Nothing of a netmod: no secret, no sequence numbers, no address vector entry at the
//! receiver.

use std::ffi::c_void;
use std::ptr;

use nemesis_shm::{Error, Result};

use crate::fabric::{self, Info, Objects};
use crate::sys::*;
use crate::tags;

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
    /// An endpoint of provider `prov` on `domain` (as [`crate::OfiConfig`]'s).
    pub fn new(prov: &str, domain: Option<&str>) -> Result<Stranger> {
        let info = Info::get(Some(prov), domain, false)?;
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

    /// Progresses until the operation of `ctx` completes (successfully or not).
    fn wait(&mut self, ctx: &mut fi_context2, t0: std::time::Instant, between: &mut impl FnMut()) -> Result<()> {
        let want = ctx as *mut fi_context2 as *mut c_void;
        while !self.progress_for(want) {
            if t0.elapsed() > std::time::Duration::from_secs(60) {
                return Err(Error::Net("the stranger's fi_tsend: no completion for 60 s".into()));
            }
            between();
        }
        Ok(())
    }

    /// Reads this endpoint's completions (libfabric moves data when it is polled).
    pub fn progress(&mut self) {
        self.progress_for(ptr::null_mut());
    }

    /// As [`Stranger::progress`]; true if the operation of context `want` completed.
    fn progress_for(&mut self, want: *mut c_void) -> bool {
        // SAFETY: `cq` holds 16 entries of the queue's format (tagged).
        let n = unsafe { nm_cq_read(self.fi.cq.0, self.cq.as_mut_ptr() as *mut c_void, self.cq.len()) };
        if n > 0 {
            return self.cq[..n as usize].iter().any(|e| e.op_context == want);
        }
        if n == -(FI_EAVAIL as isize) {
            let mut e = fi_cq_err_entry::default();
            // SAFETY: `e` receives one error entry.
            unsafe { nm_cq_readerr(self.fi.cq.0, &mut e, 0) };
            return e.op_context == want;
        }
        false
    }
}
