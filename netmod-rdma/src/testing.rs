//! For tests: a stranger's libfabric endpoint, outside every job, that sends raw bytes where a
//! rank's eager fragments land (the tag of eager fragments, to the fabric address of a rank's
//! card). Nothing of a netmod: no secret, no sequence numbers, no address vector entry at the
//! receiver.

use std::ffi::c_void;

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

    /// Sends `bytes` (at most the provider's inject size) to `to` with the eager fragments' tag,
    /// progressing this endpoint, and calling `between` (which progresses the receiver), until the
    /// provider takes them (a connection may have to be made first).
    pub fn send(&mut self, to: fi_addr_t, bytes: &[u8], mut between: impl FnMut()) -> Result<()> {
        if bytes.len() > self.fi.caps.inject_size {
            return Err(Error::Net(format!("{} bytes: more than the inject size", bytes.len())));
        }
        let t0 = std::time::Instant::now();
        loop {
            // SAFETY: `bytes` is read before the call returns (inject semantics).
            let rc = unsafe { nm_tinject(self.fi.ep.0, bytes.as_ptr() as *const c_void, bytes.len(), to, tags::MSG) };
            if rc == 0 {
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

    /// Reads this endpoint's completions (libfabric moves data when it is polled).
    pub fn progress(&mut self) {
        // SAFETY: `cq` holds 16 entries of the queue's format (tagged).
        let n = unsafe { nm_cq_read(self.fi.cq.0, self.cq.as_mut_ptr() as *mut c_void, self.cq.len()) };
        if n == -(FI_EAVAIL as isize) {
            let mut e = fi_cq_err_entry::default();
            // SAFETY: `e` receives one error entry.
            unsafe { nm_cq_readerr(self.fi.cq.0, &mut e, 0) };
        }
    }
}
