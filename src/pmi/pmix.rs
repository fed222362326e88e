//! PMIx client through the system `libpmix` (cargo feature `pmix`; bindings generated at build
//! time against Debian's `libpmix-dev` headers): the interface of `srun --mpi=pmix` and of Open
//! MPI's and PRRTE's launchers.
//!
//! What the bootstrap needs of it: `PMIx_Init` (our namespace and rank), the job size
//! (`PMIX_JOB_SIZE`) and this node's ranks (`PMIX_LOCAL_PEERS`, checked against
//! `PMIX_LOCAL_RANK` and `PMIX_LOCAL_SIZE`) from the job's data, `PMIx_Put` + `PMIx_Commit` of
//! our keys, `PMIx_Fence` with `PMIX_COLLECT_DATA` as the barrier (every rank's keys are then in
//! every rank's local store), `PMIx_Get` of a peer's key (a key belongs to the process that put
//! it), `PMIx_Abort` and `PMIx_Finalize`.

use std::ffi::{CStr, CString, c_char};

use super::{Placement, Session, check_token, pm_label};
use crate::error::{Error, Result};

#[allow(non_camel_case_types, non_upper_case_globals, non_snake_case, dead_code, unsafe_op_in_unsafe_fn)]
#[allow(clippy::all, clippy::undocumented_unsafe_blocks)]
mod sys {
    include!(concat!(env!("OUT_DIR"), "/pmix_bindings.rs"));
}

/// `PMIX_RANK_WILDCARD` (`UINT32_MAX-1` in `pmix_common.h`): the job as a whole.
const RANK_WILDCARD: u32 = u32::MAX - 1;

/// A PMIx attribute name (the `PMIX_*` string constants of the headers, with their NUL).
fn key(k: &[u8]) -> &CStr {
    // The generated constants are NUL-terminated byte strings.
    CStr::from_bytes_with_nul(k).unwrap_or(c"")
}

/// A connection to the PMIx server of this node.
#[derive(Debug)]
pub struct PmixClient {
    me: sys::pmix_proc_t,
    nspace: String,
    /// Whom we speak to, our rank and the job size.
    s: Session,
    finalized: bool,
}

// SAFETY: libpmix is thread safe (its progress thread serialises the calls); the client is a
// plain value (a namespace and a rank).
unsafe impl Send for PmixClient {}

/// A value `PMIx_Get` returned, freed on drop.
struct Value(*mut sys::pmix_value_t);

impl Drop for Value {
    fn drop(&mut self) {
        if !self.0.is_null() {
            // SAFETY: `PMIx_Get` allocated it with malloc and handed it to us; PMIX_VALUE_RELEASE
            // is exactly this destruct + free.
            unsafe {
                sys::PMIx_Value_destruct(self.0);
                libc::free(self.0.cast());
            }
        }
    }
}

impl Value {
    fn as_u64(&self) -> Option<u64> {
        // SAFETY: non-null (checked by the caller of `get_value`), initialised by libpmix; the
        // union field read is the one `type_` names.
        unsafe {
            let v = &*self.0;
            Some(match u32::from(v.type_) {
                sys::PMIX_UINT16 => u64::from(v.data.uint16),
                sys::PMIX_UINT32 => u64::from(v.data.uint32),
                sys::PMIX_PROC_RANK => u64::from(v.data.rank),
                sys::PMIX_UINT64 => v.data.uint64,
                sys::PMIX_UINT8 => u64::from(v.data.uint8),
                sys::PMIX_INT => u64::try_from(v.data.integer).ok()?,
                sys::PMIX_SIZE => v.data.size as u64,
                _ => return None,
            })
        }
    }

    fn as_string(&self) -> Option<String> {
        // SAFETY: as in `as_u64`; a PMIX_STRING value holds a NUL-terminated string or null.
        unsafe {
            let v = &*self.0;
            if u32::from(v.type_) != sys::PMIX_STRING || v.data.string.is_null() {
                return None;
            }
            Some(CStr::from_ptr(v.data.string).to_string_lossy().into_owned())
        }
    }
}

fn status_string(rc: sys::pmix_status_t) -> String {
    // SAFETY: PMIx_Error_string returns a static string for any status.
    let s = unsafe { sys::PMIx_Error_string(rc) };
    if s.is_null() {
        return format!("status {rc}");
    }
    // SAFETY: a static NUL-terminated string.
    format!("{} ({rc})", unsafe { CStr::from_ptr(s) }.to_string_lossy())
}

/// A `pmix_info_t` holding a boolean `true` under `name` (nothing allocated: no destruct needed).
fn flag_info(name: &[u8]) -> sys::pmix_info_t {
    let mut info = sys::pmix_info_t::default();
    for (d, s) in info.key.iter_mut().zip(key(name).to_bytes()) {
        *d = *s as c_char;
    }
    info.value.type_ = sys::PMIX_BOOL as sys::pmix_data_type_t;
    info.value.data.flag = true;
    info
}

impl PmixClient {
    /// Initialises the PMIx client library, which connects to the server named by the
    /// `PMIX_SERVER_URI*` variables, and reads the job size.
    pub fn from_env() -> Result<PmixClient> {
        let pm = pm_label("PMIx");
        let mut me = sys::pmix_proc_t::default();
        // SAFETY: `me` is a valid out-parameter; no info.
        let rc = unsafe { sys::PMIx_Init(&mut me, std::ptr::null_mut(), 0) };
        if rc != sys::PMIX_SUCCESS as sys::pmix_status_t {
            return Err(Error::pmi(
                &pm,
                "PMIx_Init",
                format!("the PMIx server cannot be reached: {}", status_string(rc)),
            ));
        }
        // SAFETY: PMIx_Init filled `nspace` with a NUL-terminated name.
        let nspace = unsafe { CStr::from_ptr(me.nspace.as_ptr()) }.to_string_lossy().into_owned();
        let mut c = PmixClient { me, nspace, s: Session::new(pm, me.rank, 0), finalized: false };
        let size = c.job_u64(sys::PMIX_JOB_SIZE, "PMIX_JOB_SIZE")?;
        let size = u32::try_from(size)
            .ok()
            .filter(|&s| s > me.rank)
            .ok_or_else(|| c.s.err("PMIx_Get", format!("rank {} in a job of {size}", me.rank)))?;
        c.s = Session::new(c.s.server().to_owned(), me.rank, size);
        Ok(c)
    }

    /// Whom it speaks to and its place in the job.
    pub fn session(&self) -> &Session {
        &self.s
    }

    /// The job's namespace.
    pub fn namespace(&self) -> &str {
        &self.nspace
    }

    fn proc_of(&self, rank: u32) -> sys::pmix_proc_t {
        let mut p = self.me;
        p.rank = rank;
        p
    }

    /// `PMIx_Get` of `name` on `rank` (or the job: [`RANK_WILDCARD`]); `None` if not found.
    fn get_value(&self, rank: u32, name: &CStr, infos: &[sys::pmix_info_t]) -> Result<Option<Value>> {
        let p = self.proc_of(rank);
        let mut out: *mut sys::pmix_value_t = std::ptr::null_mut();
        // SAFETY: valid proc, NUL-terminated key, `infos.len()` infos, and an out-pointer that
        // receives a malloc'ed value (owned by `Value` below).
        let rc = unsafe { sys::PMIx_Get(&p, name.as_ptr(), infos.as_ptr(), infos.len(), &mut out) };
        let v = Value(out);
        if rc == sys::PMIX_ERR_NOT_FOUND {
            return Ok(None);
        }
        if rc != sys::PMIX_SUCCESS as sys::pmix_status_t || out.is_null() {
            let who = if rank == RANK_WILDCARD { "the job".to_owned() } else { format!("rank {rank}") };
            return Err(self.s.err("PMIx_Get", format!("{} of {who}: {}", name.to_string_lossy(), status_string(rc))));
        }
        Ok(Some(v))
    }

    fn job_u64(&self, name: &[u8], what: &str) -> Result<u64> {
        let v = self.get_value(RANK_WILDCARD, key(name), &[])?;
        v.as_ref()
            .and_then(Value::as_u64)
            .ok_or_else(|| self.s.err("PMIx_Get", format!("the server gave no {what} (or not as a number)")))
    }

    /// Publishes `key = value` to every process of the job (after the next barrier).
    pub fn put(&mut self, k: &str, value: &str) -> Result<()> {
        check_token(self.s.server(), "PMIx_Put", "key", k, sys::PMIX_MAX_KEYLEN as usize, "")?;
        let ck = CString::new(k).map_err(|_| self.s.err("PMIx_Put", format!("key {k:?} holds a NUL")))?;
        let cv = CString::new(value).map_err(|_| self.s.err("PMIx_Put", format!("value {value:?} holds a NUL")))?;
        let mut v = sys::pmix_value_t { type_: sys::PMIX_STRING as sys::pmix_data_type_t, ..Default::default() };
        v.data.string = cv.as_ptr().cast_mut();
        // SAFETY: key and value are valid for the call; PMIx_Put copies the value (it does not
        // keep our pointer).
        let rc = unsafe { sys::PMIx_Put(sys::PMIX_GLOBAL as sys::pmix_scope_t, ck.as_ptr(), &mut v) };
        if rc != sys::PMIX_SUCCESS as sys::pmix_status_t {
            return Err(self.s.err("PMIx_Put", format!("{k}: {}", status_string(rc))));
        }
        Ok(())
    }

    /// The value rank `owner` put under `key`, or `None` if it put nothing there. Asked of the
    /// local store only (`PMIX_OPTIONAL`): after a barrier every rank's keys are there, and a key
    /// nobody put is then an answer, not a wait.
    pub fn get(&mut self, owner: u32, k: &str) -> Result<Option<String>> {
        let ck = CString::new(k).map_err(|_| self.s.err("PMIx_Get", format!("key {k:?} holds a NUL")))?;
        let v = self.get_value(owner, &ck, &[flag_info(sys::PMIX_OPTIONAL)])?;
        match v {
            None => Ok(None),
            Some(v) => v
                .as_string()
                .map(Some)
                .ok_or_else(|| self.s.err("PMIx_Get", format!("{k} of rank {owner} is not a string"))),
        }
    }

    /// Commits what was put, then waits for every process of the job, collecting everyone's data.
    pub fn barrier(&mut self) -> Result<()> {
        // SAFETY: no arguments.
        let rc = unsafe { sys::PMIx_Commit() };
        if rc != sys::PMIX_SUCCESS as sys::pmix_status_t {
            return Err(self.s.err("PMIx_Commit", status_string(rc)));
        }
        let all = [self.proc_of(RANK_WILDCARD)];
        let info = [flag_info(sys::PMIX_COLLECT_DATA)];
        // SAFETY: one proc (the whole namespace) and one info, valid for the call.
        let rc = unsafe { sys::PMIx_Fence(all.as_ptr(), 1, info.as_ptr(), 1) };
        if rc != sys::PMIX_SUCCESS as sys::pmix_status_t {
            return Err(self.s.err("PMIx_Fence", status_string(rc)));
        }
        Ok(())
    }

    /// This node's ranks from the job data (`PMIX_LOCAL_PEERS`), checked against our
    /// `PMIX_LOCAL_RANK` and `PMIX_LOCAL_SIZE`; the node is named by its host name and node id.
    /// `None` if the server does not say.
    pub fn placement(&mut self) -> Result<Option<Placement>> {
        let Some(peers) = self.get_value(RANK_WILDCARD, key(sys::PMIX_LOCAL_PEERS), &[])? else {
            return Ok(None);
        };
        let peers =
            peers.as_string().ok_or_else(|| self.s.err("PMIx_Get", "PMIX_LOCAL_PEERS is not a string".into()))?;
        let mut local: Vec<u32> = peers
            .split(',')
            .map(|r| r.trim().parse::<u32>().ok().filter(|&r| r < self.s.size()))
            .collect::<Option<_>>()
            .ok_or_else(|| self.s.err("PMIx_Get", format!("malformed PMIX_LOCAL_PEERS {peers:?}")))?;
        local.sort_unstable();
        local.dedup();
        let me = self.me.rank;
        let Some(index) = local.iter().position(|&r| r == me) else {
            return Err(self.s.err("PMIx_Get", format!("PMIX_LOCAL_PEERS {peers:?} does not hold this rank ({me})")));
        };
        let local_size = self.job_u64(sys::PMIX_LOCAL_SIZE, "PMIX_LOCAL_SIZE").ok();
        if local_size.is_some_and(|n| n != local.len() as u64) {
            return Err(self
                .s
                .err("PMIx_Get", format!("PMIX_LOCAL_SIZE {local_size:?} but PMIX_LOCAL_PEERS {peers:?}")));
        }
        // The local rank is our position among the node's ranks when both are in rank order,
        // which is how the segment numbers them; a server may number them otherwise (that is
        // only logged).
        let lrank = self.get_value(me, key(sys::PMIX_LOCAL_RANK), &[])?.as_ref().and_then(Value::as_u64);
        if lrank.is_some_and(|l| l != index as u64) {
            tracing::debug!(pmix_local_rank = ?lrank, index, "PMIx numbers local ranks in another order");
        }
        let host = self
            .get_value(me, key(sys::PMIX_HOSTNAME), &[])?
            .and_then(|v| v.as_string())
            .unwrap_or_else(|| crate::contract::hostname().unwrap_or_else(|_| "node".into()));
        let nodeid = self.get_value(me, key(sys::PMIX_NODEID), &[])?.as_ref().and_then(Value::as_u64);
        let name = match nodeid {
            Some(id) => format!("{host}.{id}"),
            None => host,
        };
        Ok(Some(Placement { node: crate::contract::sanitize_node_id(&name), local_ranks: local, leaders: None }))
    }

    /// Asks the process manager to end the job with `code`.
    pub fn abort(&mut self, code: i32, msg: &str) -> Result<()> {
        let msg = CString::new(msg.replace('\0', " ")).unwrap_or_default();
        // SAFETY: a NUL-terminated message; no procs (the whole job).
        let rc = unsafe { sys::PMIx_Abort(code, msg.as_ptr(), std::ptr::null_mut(), 0) };
        if rc != sys::PMIX_SUCCESS as sys::pmix_status_t {
            return Err(self.s.err("PMIx_Abort", status_string(rc)));
        }
        Ok(())
    }

    /// Ends the session cleanly.
    pub fn finalize(mut self) -> Result<()> {
        self.finalized = true;
        // SAFETY: no info.
        let rc = unsafe { sys::PMIx_Finalize(std::ptr::null(), 0) };
        if rc != sys::PMIX_SUCCESS as sys::pmix_status_t {
            return Err(self.s.err("PMIx_Finalize", status_string(rc)));
        }
        Ok(())
    }
}

impl Drop for PmixClient {
    /// A client that goes away without `finalize` (an error during start-up) still says goodbye:
    /// PMIx servers treat a process that initialised and exits silently as a failure of the job.
    fn drop(&mut self) {
        if !self.finalized {
            // SAFETY: no info.
            unsafe { sys::PMIx_Finalize(std::ptr::null(), 0) };
        }
    }
}
