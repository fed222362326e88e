//! One-sided communication (MPI-4.1 chapter 12, MPI-3.1 §11): window objects, their creation
//! flavours, attributes and epochs, and the operations on node-local targets.
//!
//! **Objects.** A window is an entry of [`Wins`] (handles `0xa0000000 + index`, MPICH's direct
//! window handles; `MPI_WIN_NULL` is `0x20000000`). It holds a private communicator over the
//! creating one's members (a context pair of its own, taken as `MPI_Comm_dup` takes one, never
//! in the communicator table): the window's own collectives and messages (fence barriers, PSCW
//! notices, the remote path's active messages) travel there and match nothing of the program's.
//!
//! **Memory.** Each window has one shared segment per node ([`segment`]): a control block per
//! node-local member (lock word, accumulate mutex, dynamic-region table), then for
//! `MPI_Win_allocate`/`MPI_Win_allocate_shared` the members' memory, so node-local peers load and
//! store each other's window directly. How this process reaches each target is its [`Path`]:
//! mapped memory, the single copy of CMA (`process_vm_readv`/`writev`, for `MPI_Win_create` and
//! dynamic memory of a node peer), or the remote path ([`remote`]).
//!
//! **Invariants.** Every target's `size` and `disp_unit` are every member's (one allgather at
//! creation), so an origin bounds-checks every access before it touches memory: nothing is ever
//! written outside a target's window. A mapping lives as long as its window (an `Arc` held by the
//! window and by any wait on a control block). Errors of a call on a valid window go to the
//! window's error handler (`MPI_ERRORS_ARE_FATAL` unless set, MPI-4.1 §9.3); errors on an
//! invalid window handle are `MPI_ERR_WIN` for `MPI_COMM_WORLD`'s handler.

use std::ffi::c_int;
use std::sync::Arc;

use crate::abi::{self, Aint, Errhandler};
use crate::comm::Comm;
use crate::error::{Fail, Res, Why};
use crate::handle::Table;
use crate::state::{Access, State, not_running};

pub mod allocmem;
pub mod atomic;
pub mod attrs;
pub mod cma;
pub mod create;
pub mod epoch;
pub mod fast;
pub mod lockword;
pub mod ofi;
pub mod progress;
pub mod remote;
pub mod rma;
pub mod segment;
pub mod sync;

pub use epoch::Epoch;
pub use segment::{Control, Mapping};

/// MPICH's direct window handles (`HANDLE_KIND_DIRECT | MPIR_WIN << 26`).
pub const WIN_DIRECT: u32 = abi::handle::DIRECT | (0x8 << 26);

/// Predefined window attribute keys (MPICH's `mpi.h`).
pub const WIN_BASE: c_int = 0x6600_0001;
pub const WIN_SIZE: c_int = 0x6600_0003;
pub const WIN_DISP_UNIT: c_int = 0x6600_0005;
pub const WIN_CREATE_FLAVOR: c_int = 0x6600_0007;
pub const WIN_MODEL: c_int = 0x6600_0009;

/// Lock types and assertions (MPICH's values).
pub const LOCK_EXCLUSIVE: c_int = 234;
pub const LOCK_SHARED: c_int = 235;
pub const MODE_NOCHECK: c_int = 1024;
pub const MODE_NOSTORE: c_int = 2048;
pub const MODE_NOPUT: c_int = 4096;
pub const MODE_NOPRECEDE: c_int = 8192;
pub const MODE_NOSUCCEED: c_int = 16384;
/// Every assertion bit.
pub const MODE_ALL: c_int = MODE_NOCHECK | MODE_NOSTORE | MODE_NOPUT | MODE_NOPRECEDE | MODE_NOSUCCEED;

/// MPICH's window keyval handles (kind 3 in bits 22–25 of a keyval handle): a table of their
/// own, so a window keyval names nothing in the communicators' and datatypes' table.
pub const WIN_KEYVAL_DIRECT: u32 = crate::attr::KEYVAL_DIRECT | (0x3 << 22);

/// The windows and their keyvals.
#[derive(Debug)]
pub struct Wins {
    /// Handles `WIN_DIRECT + index`.
    pub table: Table<Window>,
    /// `MPI_Win_create_keyval`'s (the `types` flag unused).
    pub keyvals: Table<crate::attr::Keyval>,
}

pub const fn table() -> Wins {
    Wins { table: Table::new(WIN_DIRECT), keyvals: Table::new(WIN_KEYVAL_DIRECT) }
}

/// How this process reaches one target's memory.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Path {
    /// Mapped in this process at `base` (the window's segment, or this rank's own memory): load
    /// and store. For a dynamic window `base` is 0 (displacements are addresses).
    Mapped { base: usize },
    /// A node peer's private memory (`MPI_Win_create`, dynamic): single copy by
    /// `process_vm_readv`/`process_vm_writev` into process `pid` at `base` (0: dynamic).
    Cma { pid: u32, base: usize },
    /// Another node, or CMA refused: the remote path ([`remote`]).
    Remote,
}

/// What every member knows of one target.
#[derive(Clone, Copy, Debug)]
pub struct Target {
    /// Bytes of its window (dynamic: 0; its attached regions bound accesses instead).
    pub size: usize,
    /// Its displacement unit (bytes).
    pub disp_unit: usize,
    pub path: Path,
    /// Its index among the window's members on this node (its control block in the segment),
    /// if it shares this node.
    pub local: Option<u32>,
    /// Its job rank.
    pub job: u32,
}

/// The hints a window was created with, as in force (`MPI_Win_get_info` reports them).
#[derive(Clone, Debug, Default)]
pub struct Hints {
    pub no_locks: bool,
    /// `accumulate_ordering`: the value as given ("rar,raw,war,waw" by default).
    pub accumulate_ordering: String,
    /// `accumulate_ops`: "same_op_no_op" or "same_op" (default "same_op_no_op").
    pub accumulate_ops: String,
    pub same_size: bool,
    pub same_disp_unit: bool,
    pub alloc_shared_noncontig: bool,
    /// `nemesis_nic_atomics` as given (`None`: unset, the automatic rule of `ofi::atomic`).
    pub nic_atomics: Option<bool>,
}

/// Values the predefined attributes point to (boxed in the window: stable addresses while it
/// lives).
#[derive(Debug, Default)]
pub struct AttrValues {
    pub size: Aint,
    pub disp_unit: c_int,
    pub flavor: c_int,
    pub model: c_int,
}

/// One window.
#[derive(Debug)]
pub struct Window {
    /// The private communicator (its context pair taken at creation, released at free).
    pub comm: Arc<Comm>,
    /// `MPI_WIN_FLAVOR_CREATE`, `_ALLOCATE`, `_DYNAMIC` or `_SHARED`.
    pub flavor: c_int,
    /// One entry per member, in rank order.
    pub targets: Box<[Target]>,
    /// This node's segment (control blocks, and allocated memory).
    pub seg: Arc<Mapping>,
    /// This process's index among the node-local members.
    pub local: u32,
    /// This process's window base (`MPI_WIN_BASE`; 0 for dynamic windows).
    pub base: usize,
    pub attr_values: Box<AttrValues>,
    pub hints: Hints,
    /// `MPI_Win_set_name`'s (empty: none).
    pub name: String,
    /// Attributes: keyval and value, in the order they were set.
    pub attrs: Vec<(c_int, usize)>,
    pub errh: Errhandler,
    /// The synchronisation state (access and exposure epochs).
    pub epoch: Epoch,
    /// Regions attached to a dynamic window by this process: (base, length).
    pub regions: Vec<(usize, usize)>,
    /// The remote path's state, if a target is remote (`remote::created`).
    pub remote: Option<Box<remote::Remote>>,
    /// `MPI_Win_create` over `MPI_Alloc_mem` memory: the block this window lies in (kept until
    /// the window goes, [`allocmem`]).
    pub in_block: Option<allocmem::InBlock>,
    /// Node peers' `MPI_Alloc_mem` window memory mapped here: (their rank, the mapping); their
    /// targets' paths are `Path::Mapped` into it.
    pub peer_maps: Vec<(u32, allocmem::PeerMap)>,
}

impl Window {
    /// This process's rank in the window.
    pub fn rank(&self) -> u32 {
        self.comm.rank
    }

    /// Members.
    pub fn size(&self) -> u32 {
        self.comm.size
    }

    /// The control block of node-local member `local`.
    pub fn control(&self, local: u32) -> &Control {
        self.seg.control(local)
    }

    /// How this process reaches target `t` now: a CMA peer's pid as that peer published it in
    /// its control block when a restore left 0 in the path (pids change at a restart; 0 until
    /// the peer restored, which the single copy refuses).
    pub fn path_of(&self, t: u32) -> Path {
        let tg = &self.targets[t as usize];
        match (tg.path, tg.local) {
            (Path::Cma { pid: 0, base }, Some(l)) => {
                // ORDERING: Acquire: the peer published its pid (Release) after it mapped the
                // segment and put its memory back.
                Path::Cma { pid: self.control(l).pid.load(std::sync::atomic::Ordering::Acquire), base }
            }
            (p, _) => p,
        }
    }
}

/// A failure on window `h` (its error handler decides).
#[cold]
pub fn on_win(w: &Window, h: abi::Win, code: c_int, why: Why) -> Fail {
    Fail::new(code, None, Why::On { errh: w.errh, handle: h, why: Box::new(why) })
}

/// As [`on_win`] for an argument error with a fixed text.
#[cold]
pub fn win_err(w: &Window, h: abi::Win, code: c_int, what: &'static str) -> Fail {
    on_win(w, h, code, Why::Arg(what))
}

/// Routes failure `f` (of a call on window `h`) to the window's handler unless it already names
/// a handler.
#[cold]
pub fn route(st: &State, h: abi::Win, f: Fail) -> Fail {
    if matches!(f.why, Why::On { .. }) {
        return f;
    }
    match st.wins.table.get(h) {
        Some(w) => Fail::new(f.code, None, Why::On { errh: w.errh, handle: h, why: Box::new(f.why) }),
        None => f,
    }
}

/// Runs `f` on window `h`, routing its failures to the window's error handler.
pub fn with<T>(acc: &mut Access, h: abi::Win, f: impl FnOnce(&mut Access) -> Res<T>) -> Res<T> {
    lookup(acc, h)?;
    f(acc).map_err(|e| route(acc.st(), h, e))
}

#[cold]
pub fn bad_win(h: abi::Win) -> Fail {
    let why = if h == abi::WIN_NULL {
        Why::Arg("MPI_WIN_NULL is not a window")
    } else {
        Why::Other(format!("{h:#x} is not a valid window"))
    };
    Fail::new(abi::ERR_WIN, None, why)
}

/// Checks that MPI runs and `h` names a live window.
pub fn lookup(acc: &mut Access, h: abi::Win) -> Res<()> {
    let st = acc.st();
    if st.ep.is_none() {
        return Err(not_running(st.phase));
    }
    if st.wins.table.get(h).is_none() {
        return Err(bad_win(h));
    }
    Ok(())
}

/// The live window `h` (MPI running).
pub fn win(st: &State, h: abi::Win) -> Res<&Window> {
    if st.ep.is_none() {
        return Err(not_running(st.phase));
    }
    st.wins.table.get(h).ok_or_else(|| bad_win(h))
}

/// The live window `h`, mutably.
pub fn win_mut(st: &mut State, h: abi::Win) -> Res<&mut Window> {
    if st.ep.is_none() {
        return Err(not_running(st.phase));
    }
    st.wins.table.get_mut(h).ok_or_else(|| bad_win(h))
}

/// A null output pointer.
#[cold]
pub fn null_out() -> Fail {
    Fail::new(abi::ERR_ARG, None, Why::Arg("null output pointer"))
}
