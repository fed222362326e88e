//! libfabric's objects, owned: the library (opened at run time, so that a build with the feature
//! still starts where libfabric is missing and says so), the provider chosen by `fi_getinfo`, and
//! the fabric, domain, completion queue, address vector, endpoint and memory registrations opened
//! from it. Every failure is an [`Error::Net`] naming the provider, the call and `fi_strerror`'s
//! text.

use std::ffi::{CStr, CString, c_char, c_int, c_void};
use std::ptr;
use std::sync::OnceLock;

use nemesis_shm::Error;

use crate::sys::*;

type GetInfo = unsafe extern "C" fn(u32, *const c_char, *const c_char, u64, *const fi_info, *mut *mut fi_info) -> c_int;
type FreeInfo = unsafe extern "C" fn(*mut fi_info);
type DupInfo = unsafe extern "C" fn(*const fi_info) -> *mut fi_info;
type Fabric = unsafe extern "C" fn(*mut fi_fabric_attr, *mut *mut fid_fabric, *mut c_void) -> c_int;
type StrError = unsafe extern "C" fn(c_int) -> *const c_char;

/// The entry points of libfabric that are real functions (the others are `static inline`, in the
/// shim).
struct Lib {
    getinfo: GetInfo,
    freeinfo: FreeInfo,
    dupinfo: DupInfo,
    fabric: Fabric,
    strerror: StrError,
}

/// The library's soname (Debian's libfabric1).
const SONAME: &str = "libfabric.so.1";

fn lib() -> Result<&'static Lib, Error> {
    static LIB: OnceLock<Result<Lib, String>> = OnceLock::new();
    LIB.get_or_init(|| open_lib(SONAME)).as_ref().map_err(|e| Error::Net(e.clone()))
}

fn open_lib(soname: &str) -> Result<Lib, String> {
    let name = CString::new(soname).map_err(|e| e.to_string())?;
    // SAFETY: dlopen with a NUL-terminated name; the handle is kept for the process's life.
    let h = unsafe { libc::dlopen(name.as_ptr(), libc::RTLD_NOW | libc::RTLD_GLOBAL) };
    if h.is_null() {
        // SAFETY: dlerror returns a NUL-terminated message (or null).
        let why = unsafe { libc::dlerror() };
        let why = if why.is_null() {
            "not found".to_owned()
        } else {
            // SAFETY: non-null, NUL-terminated, valid until the next dl call.
            unsafe { CStr::from_ptr(why) }.to_string_lossy().into_owned()
        };
        return Err(format!("the ofi netmod needs libfabric ({soname}; Debian: libfabric1): {why}"));
    }
    let sym = |s: &str| -> Result<*mut c_void, String> {
        let c = CString::new(s).map_err(|e| e.to_string())?;
        // SAFETY: `h` is a live handle; `c` is NUL-terminated.
        let p = unsafe { libc::dlsym(h, c.as_ptr()) };
        if p.is_null() { Err(format!("{soname} has no symbol {s}")) } else { Ok(p) }
    };
    // SAFETY: each symbol is the libfabric function of that name, whose C signature the type
    // spells (fabric.h of the same ABI version, 1.x).
    unsafe {
        Ok(Lib {
            getinfo: std::mem::transmute::<*mut c_void, GetInfo>(sym("fi_getinfo")?),
            freeinfo: std::mem::transmute::<*mut c_void, FreeInfo>(sym("fi_freeinfo")?),
            dupinfo: std::mem::transmute::<*mut c_void, DupInfo>(sym("fi_dupinfo")?),
            fabric: std::mem::transmute::<*mut c_void, Fabric>(sym("fi_fabric")?),
            strerror: std::mem::transmute::<*mut c_void, StrError>(sym("fi_strerror")?),
        })
    }
}

/// `fi_strerror`'s text for a libfabric return code (negative or positive).
pub(crate) fn strerror(code: i64) -> String {
    let Ok(l) = lib() else { return format!("error {code}") };
    let n = c_int::try_from(code.unsigned_abs()).unwrap_or(c_int::MAX);
    // SAFETY: fi_strerror returns a static NUL-terminated string for any number.
    let p = unsafe { (l.strerror)(n) };
    if p.is_null() {
        return format!("error {code}");
    }
    // SAFETY: as above.
    unsafe { CStr::from_ptr(p) }.to_string_lossy().into_owned()
}

/// The error of call `call` on provider `prov` that returned `code`.
pub(crate) fn fi_error(prov: &str, call: &str, code: i64) -> Error {
    Error::Net(format!("ofi provider {prov}: {call}: {} ({code})", strerror(code)))
}

/// Checks a libfabric return code.
pub(crate) fn check(prov: &str, call: &str, rc: i64) -> Result<(), Error> {
    if rc < 0 { Err(fi_error(prov, call, rc)) } else { Ok(()) }
}

/// A C string libfabric may free (`fi_freeinfo` frees the names in an info).
fn c_dup(s: &str) -> Result<*mut c_char, Error> {
    let c = CString::new(s).map_err(|_| Error::Net(format!("a NUL byte in {s:?}")))?;
    // SAFETY: strdup copies a NUL-terminated string into malloc'ed memory.
    let p = unsafe { libc::strdup(c.as_ptr()) };
    if p.is_null() { Err(Error::Net("out of memory".into())) } else { Ok(p) }
}

/// Reads a C string field (null: empty).
pub(crate) fn c_str(p: *const c_char) -> String {
    if p.is_null() {
        return String::new();
    }
    // SAFETY: libfabric's names are NUL-terminated strings owned by their info.
    unsafe { CStr::from_ptr(p) }.to_string_lossy().into_owned()
}

/// What a chosen provider offers, read from its `fi_info`.
#[derive(Clone, Debug)]
pub(crate) struct Caps {
    /// The provider's name (`tcp;ofi_rxm`, `shm`, ...).
    pub prov: String,
    /// The domain (an interface, for IP providers).
    pub domain: String,
    /// RMA reads are possible.
    pub rma: bool,
    /// RMA writes too (`FI_WRITE`, `FI_REMOTE_WRITE`), and atomics (`FI_ATOMIC`).
    pub write: bool,
    pub atomic: bool,
    /// The transmit operations complete on delivery by default.
    pub delivery_complete: bool,
    /// `mr_mode` bits in force.
    pub mr_mode: u64,
    /// Bytes of a registration key.
    pub mr_key_size: usize,
    /// Largest message.
    pub max_msg_size: usize,
    /// Largest message `fi_tinject` takes.
    pub inject_size: usize,
    /// Depth of the transmit and receive queues.
    pub tx_size: usize,
    pub rx_size: usize,
}

/// Removes, once per process and before its first `shm` endpoint, the regions libfabric's `shm`
/// provider left under this process's id. The provider names an endpoint's region
/// `/dev/shm/<pid>:<domain>:<endpoint>` and only its owner removes it, so a process killed with
/// SIGKILL leaves it; when the kernel gives its pid to a later process, that process's
/// `fi_enable` finds the region and fails with `EBUSY` (seen in CI after the pids wrapped). A
/// region under this pid older than this process (`/proc/self`'s time is the process's start) is
/// a dead process's: no live one has this pid, and this process had not started.
fn clear_dead_shm_regions() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        let pid = std::process::id();
        let Ok(born) = std::fs::metadata("/proc/self").and_then(|m| m.modified()) else { return };
        let Ok(dir) = std::fs::read_dir("/dev/shm") else { return };
        for e in dir.flatten() {
            let Ok(made) = e.metadata().and_then(|m| m.modified()) else { continue };
            if dead_region(&e.file_name().to_string_lossy(), pid, made, born) {
                let _ = std::fs::remove_file(e.path());
            }
        }
    });
}

/// Region `name` made at `made` is one the `shm` provider left for process `pid` before a
/// process with that id started at `born`: `<pid>:<n>:<n>` exactly, and older.
fn dead_region(name: &str, pid: u32, made: std::time::SystemTime, born: std::time::SystemTime) -> bool {
    let Some(rest) = name.strip_prefix(&format!("{pid}:")) else { return false };
    let parts: Vec<&str> = rest.split(':').collect();
    parts.len() == 2 && parts.iter().all(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit())) && made < born
}

#[cfg(test)]
mod dead_regions {
    use std::time::{Duration, SystemTime};

    #[test]
    fn only_older_regions_of_this_pid_are_dead() {
        let born = SystemTime::UNIX_EPOCH + Duration::from_secs(1000);
        let old = born - Duration::from_secs(1);
        let new = born + Duration::from_secs(1);
        assert!(super::dead_region("42:0:0", 42, old, born));
        assert!(super::dead_region("42:3:17", 42, old, born));
        assert!(!super::dead_region("42:0:0", 42, new, born), "this process's own");
        assert!(!super::dead_region("421:0:0", 42, old, born), "another pid");
        assert!(!super::dead_region("42:0", 42, old, born));
        assert!(!super::dead_region("42:0:0:1", 42, old, born));
        assert!(!super::dead_region("42:a:0", 42, old, born));
        assert!(!super::dead_region("nemesis-42:0:0", 42, old, born));
    }
}

/// The `fi_info` list of `fi_getinfo`, owned.
pub(crate) struct Info(*mut fi_info);

impl Drop for Info {
    fn drop(&mut self) {
        if let (false, Ok(l)) = (self.0.is_null(), lib()) {
            // SAFETY: a list from fi_getinfo or fi_dupinfo, freed once.
            unsafe { (l.freeinfo)(self.0) };
        }
    }
}

/// Capabilities of RMA reads (large messages), of RMA writes, and of atomics (one-sided
/// operations of `ofi/rma.rs`).
pub(crate) const RMA_READ: u64 = FI_RMA | FI_READ | FI_REMOTE_READ;
pub(crate) const RMA_WRITE: u64 = FI_RMA | FI_WRITE | FI_REMOTE_WRITE;
pub(crate) const ATOMICS: u64 = FI_ATOMIC | FI_READ | FI_WRITE | FI_REMOTE_READ | FI_REMOTE_WRITE;

/// The `mr_mode` bits this netmod honours: local descriptors, virtual or offset addressing,
/// provider keys, allocated memory only, endpoint-bound registrations. Not `FI_MR_RAW` (keys
/// longer than 64 bits) nor `FI_MR_HMEM`.
pub(crate) const MR_MODES: u64 = FI_MR_LOCAL | FI_MR_VIRT_ADDR | FI_MR_ALLOCATED | FI_MR_PROV_KEY | FI_MR_ENDPOINT;

impl Info {
    /// Providers of reliable-datagram endpoints with tagged messages, messages to one peer
    /// processed in order (`FI_ORDER_SAS`), manual data progress, and, with `rma`, RMA reads.
    /// `prov` and `domain` narrow the search.
    pub(crate) fn get(prov: Option<&str>, domain: Option<&str>, rma: bool) -> Result<Info, Error> {
        Info::get_caps(prov, domain, if rma { RMA_READ } else { 0 })
    }

    /// As [`Info::get`], with capabilities `extra` (`RMA_READ`, `RMA_WRITE`, `ATOMICS`) on top of
    /// the tagged messages.
    pub(crate) fn get_caps(prov: Option<&str>, domain: Option<&str>, extra: u64) -> Result<Info, Error> {
        let l = lib()?;
        let what = prov.unwrap_or("(any)");
        // SAFETY: fi_dupinfo(NULL) allocates a zeroed info with its attribute structs.
        let hints = Info(unsafe { (l.dupinfo)(ptr::null()) });
        if hints.0.is_null() {
            return Err(Error::Net("fi_allocinfo: out of memory".into()));
        }
        // SAFETY: `hints` is a fresh info whose attribute pointers fi_dupinfo set; the names we
        // store are malloc'ed, for fi_freeinfo to free.
        unsafe {
            let h = &mut *hints.0;
            h.caps = FI_TAGGED | FI_SEND | FI_RECV;
            h.caps |= extra;
            // Every operation's context points to an `fi_context2` we own until its completion.
            h.mode = FI_CONTEXT | FI_CONTEXT2;
            (*h.ep_attr).type_ = FI_EP_RDM;
            (*h.tx_attr).msg_order = FI_ORDER_SAS;
            (*h.rx_attr).msg_order = FI_ORDER_SAS;
            let d = &mut *h.domain_attr;
            d.mr_mode = MR_MODES as c_int;
            d.threading = FI_THREAD_DOMAIN;
            d.data_progress = FI_PROGRESS_MANUAL;
            d.resource_mgmt = FI_RM_ENABLED;
            if let Some(name) = domain {
                d.name = c_dup(name)?;
            }
            if let Some(p) = prov {
                (*h.fabric_attr).prov_name = c_dup(p)?;
            }
        }
        let mut out: *mut fi_info = ptr::null_mut();
        let version = fi_version_of(FI_MAJOR_VERSION as u32, FI_MINOR_VERSION as u32);
        // SAFETY: valid hints; `out` receives a list we own (freed by `Info`).
        let rc = unsafe { (l.getinfo)(version, ptr::null(), ptr::null(), 0, hints.0, &mut out) };
        if rc != 0 || out.is_null() {
            let caps = match extra {
                0 => "FI_EP_RDM, FI_TAGGED",
                RMA_READ => "FI_EP_RDM, FI_TAGGED, FI_RMA",
                _ if extra & FI_ATOMIC != 0 => "FI_EP_RDM, FI_TAGGED, FI_RMA, FI_ATOMIC",
                _ => "FI_EP_RDM, FI_TAGGED, FI_RMA (read and write)",
            };
            let code = if rc != 0 { i64::from(rc) } else { -(FI_ENODATA as i64) };
            return Err(Error::Net(format!(
                "ofi provider {what}: no provider offers {caps} with FI_ORDER_SAS{}: fi_getinfo: {} ({code})",
                domain.map(|d| format!(" on domain {d}")).unwrap_or_default(),
                strerror(code)
            )));
        }
        Ok(Info(out))
    }

    /// The first provider of the list.
    pub(crate) fn first(&self) -> *mut fi_info {
        self.0
    }

    /// What the first provider offers.
    pub(crate) fn caps(&self) -> Caps {
        // SAFETY: a non-empty list from fi_getinfo: every attribute pointer is set.
        unsafe {
            let i = &*self.0;
            let (d, f, ep, tx, rx) = (&*i.domain_attr, &*i.fabric_attr, &*i.ep_attr, &*i.tx_attr, &*i.rx_attr);
            Caps {
                prov: c_str(f.prov_name),
                domain: c_str(d.name),
                rma: i.caps & FI_RMA != 0,
                write: i.caps & (FI_RMA | FI_WRITE | FI_REMOTE_WRITE) == FI_RMA | FI_WRITE | FI_REMOTE_WRITE,
                atomic: i.caps & FI_ATOMIC != 0,
                delivery_complete: (*i.tx_attr).op_flags & FI_DELIVERY_COMPLETE != 0,
                mr_mode: d.mr_mode as u64,
                mr_key_size: d.mr_key_size,
                max_msg_size: ep.max_msg_size,
                inject_size: tx.inject_size,
                tx_size: tx.size,
                rx_size: rx.size,
            }
        }
    }
}

/// A libfabric object, closed on drop.
pub(crate) struct Fid<T>(pub *mut T);

impl<T> Fid<T> {
    pub(crate) fn fid(&self) -> *mut fid {
        // Every libfabric object starts with its `struct fid`.
        self.0 as *mut fid
    }
}

impl<T> Drop for Fid<T> {
    fn drop(&mut self) {
        if !self.0.is_null() {
            // SAFETY: an object libfabric opened for us, closed once.
            unsafe { nm_close(self.fid()) };
        }
    }
}

/// The opened objects, in the order they close (drop order is field order: the endpoint first,
/// the fabric last).
pub(crate) struct Objects {
    pub ep: Fid<fid_ep>,
    pub av: Fid<fid_av>,
    pub cq: Fid<fid_cq>,
    pub domain: Fid<fid_domain>,
    /// Held open for the domain.
    pub _fabric: Fid<fid_fabric>,
    pub caps: Caps,
}

impl Objects {
    /// Opens the first provider of `info`: fabric, domain, one completion queue (tagged format,
    /// no wait object: it is only ever polled), an address vector, an enabled endpoint.
    pub(crate) fn open(info: &Info) -> Result<Objects, Error> {
        let l = lib()?;
        let caps = info.caps();
        let prov = caps.prov.clone();
        if prov == "shm" {
            clear_dead_shm_regions();
        }
        let i = info.first();
        let mut fabric: *mut fid_fabric = ptr::null_mut();
        // SAFETY: the info's fabric attributes; `fabric` receives the object.
        check(&prov, "fi_fabric", i64::from(unsafe { (l.fabric)((*i).fabric_attr, &mut fabric, ptr::null_mut()) }))?;
        let fabric = Fid(fabric);
        let mut domain: *mut fid_domain = ptr::null_mut();
        // SAFETY: an open fabric and its info.
        check(&prov, "fi_domain", i64::from(unsafe { nm_domain(fabric.0, i, &mut domain, ptr::null_mut()) }))?;
        let domain = Fid(domain);
        let mut cq_attr = fi_cq_attr {
            size: caps.tx_size + caps.rx_size,
            format: FI_CQ_FORMAT_TAGGED,
            wait_obj: FI_WAIT_NONE,
            ..fi_cq_attr::default()
        };
        let mut cq: *mut fid_cq = ptr::null_mut();
        // SAFETY: an open domain; `cq_attr` outlives the call.
        check(&prov, "fi_cq_open", i64::from(unsafe { nm_cq_open(domain.0, &mut cq_attr, &mut cq, ptr::null_mut()) }))?;
        let cq = Fid(cq);
        // SAFETY: the info's domain attributes.
        let av_type = match unsafe { (*(*i).domain_attr).av_type } {
            FI_AV_UNSPEC => FI_AV_TABLE,
            t => t,
        };
        let mut av_attr = fi_av_attr { type_: av_type, ..fi_av_attr::default() };
        let mut av: *mut fid_av = ptr::null_mut();
        // SAFETY: as above.
        check(&prov, "fi_av_open", i64::from(unsafe { nm_av_open(domain.0, &mut av_attr, &mut av, ptr::null_mut()) }))?;
        let av = Fid(av);
        let mut ep: *mut fid_ep = ptr::null_mut();
        // SAFETY: as above.
        check(&prov, "fi_endpoint", i64::from(unsafe { nm_endpoint(domain.0, i, &mut ep, ptr::null_mut()) }))?;
        let ep = Fid(ep);
        // SAFETY: open objects of one domain.
        unsafe {
            check(&prov, "fi_ep_bind(cq)", i64::from(nm_ep_bind(ep.0, cq.fid(), FI_TRANSMIT | FI_RECV)))?;
            check(&prov, "fi_ep_bind(av)", i64::from(nm_ep_bind(ep.0, av.fid(), 0)))?;
            check(&prov, "fi_enable", i64::from(nm_enable(ep.0)))?;
        }
        Ok(Objects { ep, av, cq, domain, _fabric: fabric, caps })
    }

    /// This endpoint's address (`fi_getname`).
    pub(crate) fn name(&self) -> Result<Vec<u8>, Error> {
        let mut len: usize = 0;
        // SAFETY: a size query: a null buffer of length 0 yields -FI_ETOOSMALL and the length.
        let rc = unsafe { nm_getname(self.ep.fid(), ptr::null_mut(), &mut len) };
        if rc != 0 && rc != -(FI_ETOOSMALL as c_int) {
            return Err(fi_error(&self.caps.prov, "fi_getname", i64::from(rc)));
        }
        let mut buf = vec![0u8; len.max(1)];
        let mut len = buf.len();
        // SAFETY: `buf` holds `len` bytes.
        let rc = unsafe { nm_getname(self.ep.fid(), buf.as_mut_ptr() as *mut c_void, &mut len) };
        check(&self.caps.prov, "fi_getname", i64::from(rc))?;
        buf.truncate(len);
        Ok(buf)
    }

    /// Inserts a peer's address into the address vector.
    pub(crate) fn insert(&self, addr: &[u8]) -> Result<fi_addr_t, Error> {
        let mut out: fi_addr_t = FI_ADDR_UNSPEC;
        // SAFETY: `addr` is one address in the provider's format (the peer's fi_getname; a bad
        // one is refused by the provider); `out` receives its handle.
        let n = unsafe { nm_av_insert(self.av.0, addr.as_ptr() as *const c_void, 1, &mut out, 0, ptr::null_mut()) };
        if n != 1 || out == FI_ADDR_UNSPEC {
            return Err(fi_error(&self.caps.prov, "fi_av_insert", i64::from(n.min(0)).min(-(FI_EINVAL as i64))));
        }
        Ok(out)
    }

    /// Registers `len` bytes at `addr` with `access`, honouring the `mr_mode` in force (provider
    /// keys or ours, endpoint binding). Returns the registration and its key.
    pub(crate) fn register(
        &self,
        addr: *const u8,
        len: usize,
        access: u64,
        key: u64,
    ) -> Result<(Fid<fid_mr>, u64), Error> {
        let prov = &self.caps.prov;
        let mut mr: *mut fid_mr = ptr::null_mut();
        // SAFETY: the caller's memory range; the provider records it (and pins it if it must).
        let rc = unsafe {
            nm_mr_reg(self.domain.0, addr as *const c_void, len, access, 0, key, 0, &mut mr, ptr::null_mut())
        };
        check(prov, "fi_mr_reg", i64::from(rc))?;
        let mr = Fid(mr);
        if self.caps.mr_mode & FI_MR_ENDPOINT != 0 {
            // SAFETY: an open registration and endpoint of one domain.
            unsafe {
                check(prov, "fi_mr_bind", i64::from(nm_mr_bind(mr.0, self.ep.fid(), 0)))?;
                check(prov, "fi_mr_enable", i64::from(nm_mr_enable(mr.0)))?;
            }
        }
        // SAFETY: an open registration.
        let key = unsafe { nm_mr_key(mr.0) };
        if key == FI_KEY_NOTAVAIL {
            return Err(Error::Net(format!("ofi provider {prov}: fi_mr_key: the key does not fit 64 bits")));
        }
        Ok((mr, key))
    }
}

/// The local descriptor of a registration (for `FI_MR_LOCAL` providers).
pub(crate) fn desc(mr: &Fid<fid_mr>) -> *mut c_void {
    // SAFETY: an open registration.
    unsafe { nm_mr_desc(mr.0) }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_missing_library_is_named() {
        let e = open_lib("libfabric-not-here.so.9").err().expect("no such library");
        assert!(e.contains("libfabric-not-here.so.9") && e.contains("libfabric1"), "{e}");
        assert!(open_lib(SONAME).is_ok(), "the system's libfabric opens");
        assert!(strerror(-(FI_EAGAIN as i64)).contains("temporarily unavailable"));
    }
}
