//! The process's MPI state (one per process, as MPI has), its access from the exported
//! functions, and what happens when a call fails: the communicator's error handler returns the
//! code or ends the job with a message naming the call and the rank.
//!
//! **Threads.** `MPI_Init_thread` grants at most `MPI_THREAD_SERIALIZED`: the Endpoint is driven
//! by one thread at a time, and so is this state. The application orders its MPI calls (that is
//! the level's contract), which gives the happens-before between threads; no lock is taken, so
//! the fast path pays nothing for it. A panic inside a call is caught at the boundary
//! ([`guard`]) and becomes `MPI_ERR_INTERN` through the error handler.

use std::cell::UnsafeCell;
use std::ffi::c_int;

use nemesis::Endpoint;

use crate::abi::{self, ERRORS_ARE_FATAL, ERRORS_RETURN};
use crate::coll::Tuning;
use crate::comm::Comm;
use crate::error::{Fail, Why, name_of};
use crate::request::Requests;

/// Where the process is in MPI's life.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Phase {
    /// Before `MPI_Init`.
    Before,
    /// Between `MPI_Init` and `MPI_Finalize`.
    Running,
    /// After `MPI_Finalize`.
    After,
}

/// What the point-to-point fast paths need of a communicator: a fixed array indexed like the
/// communicator table (first [`FAST_COMMS`] communicators), so a lookup is one bounds check
/// against a constant and loads at a fixed offset from the state. An entry whose `size` is 0
/// (no such communicator, freed, or MPI not running) sends every call to the validating path.
#[derive(Clone, Copy, Debug)]
#[repr(C)]
pub struct Fast {
    /// Members (0: not a live communicator).
    pub size: u32,
    /// Point-to-point context.
    pub ctx: u32,
    /// Job rank of each member (`size` entries).
    pub world: *const u32,
    /// Communicator rank of each job rank (an entry per job rank).
    pub from_world: *const i32,
    _pad: u64,
}

/// Communicators with a fast-path entry.
pub const FAST_COMMS: usize = 64;

impl Fast {
    const NONE: Fast = Fast { size: 0, ctx: 0, world: std::ptr::null(), from_world: std::ptr::null(), _pad: 0 };

    /// The entry of communicator `c` (the pointers are into its boxed rank maps, which never move
    /// and live as long as the communicator table: communicators are never removed from it).
    pub fn of(c: &Comm) -> Fast {
        if !c.live {
            return Fast::NONE;
        }
        Fast { size: c.size, ctx: c.ctx, world: c.world.as_ptr(), from_world: c.from_world.as_ptr(), _pad: 0 }
    }
}

/// Everything MPI keeps between calls. (`repr(C)` with the fast-path table first: the fast paths
/// address it from the state's own address.)
#[repr(C)]
pub struct State {
    /// The fast-path view of the first communicators: `Fast::of(&comms[i])` while running,
    /// `NONE` otherwise. So a non-zero `size` implies that `ep` is `Some`.
    pub fast: [Fast; FAST_COMMS],
    pub phase: Phase,
    /// The Endpoint (`Some` while running).
    pub ep: Option<Endpoint>,
    /// The communicator table: handle = `COMM_BASE + index`; 0 is `MPI_COMM_WORLD`, 1
    /// `MPI_COMM_SELF`.
    pub comms: Vec<Comm>,
    pub reqs: Requests,
    /// The thread level granted.
    pub provided: c_int,
    /// The thread that called `MPI_Init` (for `MPI_Is_thread_main`).
    pub main_thread: Option<std::thread::ThreadId>,
    /// The next context this process may give a new communicator (see `crate::comm`).
    pub next_ctx: u32,
    /// Node id of every job rank (equal ids share a node).
    pub node_of_job: Vec<u32>,
    /// The collectives' model parameters and overrides.
    pub tuning: Tuning,
}

impl State {
    const fn new() -> State {
        State {
            fast: [Fast::NONE; FAST_COMMS],
            phase: Phase::Before,
            ep: None,
            comms: Vec::new(),
            reqs: crate::request::table(),
            provided: abi::THREAD_SINGLE,
            main_thread: None,
            next_ctx: 0,
            node_of_job: Vec::new(),
            tuning: Tuning::DEFAULT,
        }
    }

    /// Brings the fast-path entry of communicator `i` up to date with the table.
    pub fn refresh_fast(&mut self, i: usize) {
        if let Some(f) = self.fast.get_mut(i) {
            *f = if self.phase == Phase::Running { self.comms.get(i).map_or(Fast::NONE, Fast::of) } else { Fast::NONE };
        }
    }

    /// Rebuilds every fast-path entry.
    pub fn refresh_all_fast(&mut self) {
        for i in 0..FAST_COMMS {
            self.refresh_fast(i);
        }
    }

    /// Hands failure `f` of `call` to the error handler of its communicator: returns the code
    /// under `MPI_ERRORS_RETURN`, ends the job under `MPI_ERRORS_ARE_FATAL`.
    #[cold]
    #[inline(never)]
    pub fn fail(&mut self, call: &'static str, f: Fail) -> c_int {
        let errh =
            f.comm.and_then(|i| self.comms.get(i)).or_else(|| self.comms.first()).map_or(ERRORS_ARE_FATAL, |c| c.errh);
        if errh == ERRORS_RETURN && self.phase == Phase::Running {
            return f.code;
        }
        self.fatal(call, f)
    }

    /// Ends the job because `call` failed with `f`.
    #[cold]
    pub fn fatal(&mut self, call: &'static str, f: Fail) -> ! {
        let msg = format!("{call} failed: {}: {} (error handler MPI_ERRORS_ARE_FATAL)", name_of(f.code), f.why);
        match self.ep.as_mut() {
            // Prints "nemesis: rank R aborts the job (code C): <msg>" and ends every rank.
            Some(ep) => ep.abort(f.code, &msg),
            None => {
                let rank = std::env::var("PMI_RANK").unwrap_or_else(|_| "0".into());
                eprintln!("nemesis-mpi: rank {rank}: {msg}");
                std::process::exit(f.code & 0xff)
            }
        }
    }
}

/// The state's one instance.
struct Global(UnsafeCell<State>);

// SAFETY: MPI is called from one thread at a time (the thread level granted is at most
// MPI_THREAD_SERIALIZED, whose contract is that the application orders its calls); see `state`.
unsafe impl Sync for Global {}

static STATE: Global = Global(UnsafeCell::new(State::new()));

/// The process's MPI state.
///
/// # Safety
/// Only one reference from this function may be alive at a time: each exported function takes it
/// once and passes it down, never calling back into an exported function while it holds it, and
/// MPI calls are serialized by the application (`MPI_THREAD_SERIALIZED`).
#[inline(always)]
pub unsafe fn state() -> &'static mut State {
    // SAFETY: the caller's contract: no other reference to the state is alive.
    unsafe { &mut *STATE.0.get() }
}

/// Runs `f`, the body of MPI function `call`; a panic inside it (a bug: nothing a caller or a
/// peer does should cause one) becomes `MPI_ERR_INTERN` through the error handler instead of
/// crossing the C boundary.
#[inline(always)]
pub fn guard(call: &'static str, f: impl FnOnce() -> c_int) -> c_int {
    match std::panic::catch_unwind(std::panic::AssertUnwindSafe(f)) {
        Ok(code) => code,
        Err(p) => panicked(call, p),
    }
}

#[cold]
#[inline(never)]
fn panicked(call: &'static str, p: Box<dyn std::any::Any + Send>) -> c_int {
    let text = p
        .downcast_ref::<&str>()
        .map(|s| s.to_string())
        .or_else(|| p.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "(no message)".into());
    // SAFETY: the panicking body's reference to the state was dropped while unwinding.
    let st = unsafe { state() };
    st.fail(call, Fail::new(abi::ERR_INTERN, None, Why::Panic(text)))
}

/// The failure of a call made outside `MPI_Init`..`MPI_Finalize`.
#[cold]
pub fn not_running(phase: Phase) -> Fail {
    let why = match phase {
        Phase::Before => "called before MPI_Init",
        _ => "called after MPI_Finalize",
    };
    Fail::new(abi::ERR_OTHER, None, Why::Arg(why))
}
