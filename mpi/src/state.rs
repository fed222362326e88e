//! The process's MPI state (one per process, as MPI has), its access from the exported
//! functions, and what happens when a call fails: the communicator's error handler returns the
//! code or ends the job with a message naming the call and the rank.
//!
//! **Threads.** Every call reaches the state through an [`Access`]: under `MPI_THREAD_MULTIPLE` it
//! holds the big lock (the progress engine and every table behind it) and releases it while
//! waiting; below that level the application orders its calls (the levels' contract) and no lock
//! is taken, so the fast path pays one test of a flag. A panic inside a call is caught at the
//! boundary ([`call`]) and becomes `MPI_ERR_INTERN` through the error handler.
//!
//! **Callbacks.** MPI lets every function of the program that the library calls (attribute copy
//! and delete callbacks, reduction operations, error handlers) call MPI in turn, at every thread
//! level. Such a function is called only through [`outside`], which releases the big lock if
//! this thread holds it and takes it again afterwards. The rule for the code around it: **no
//! reference into the [`State`] is live across an `outside` call** — no `&mut State` argument or
//! local in any frame on the stack, nor anything borrowed from one (a table entry, the Endpoint).
//! Frames above a callback hold an [`Access`] (a flag, not a borrow of the state) and take
//! short borrows with [`Access::st`]; what the callback needs (the function, `extra_state`,
//! values) is copied out first, and handles are looked up again afterwards, since the callback
//! may free or create any object. Otherwise the nested call's `&mut State` would alias a live
//! one (undefined behaviour below `MPI_THREAD_MULTIPLE`, a deadlock on the lock above it).
//! Under `MPI_THREAD_MULTIPLE` other threads may run while the callback does, as they may during
//! [`Access::pause`]: each site says which facts it looks up again. `outside` is `unsafe` for
//! this rule; a site reads
//!
//! ```ignore
//! let (f, extra) = { let kv = acc.st().keyvals.get(k)?; (kv.delete?, kv.extra) }; // copy out
//! // SAFETY: this frame holds the `Access` and no borrow from it (see `state::outside`).
//! let rc = unsafe { state::outside(|| f(handle, k, v, extra)) };
//! let st = acc.st(); // look up again: the callback may have freed the object
//! ```
//!
//! The sites: attribute copy and delete callbacks (`attr`), error handlers ([`State::fail`]
//! returns the handler, run by the exported function's wrapper once its borrow ended;
//! `errh::call`), user reductions (`op::UserCall::apply`, reached from the blocking collectives,
//! which hold only an `Access`, and from non-blocking ones, whose schedule is taken out of the
//! request table meanwhile: `p2p::complete::advance_coll_user`), and `MPI_Finalize`
//! (`MPI_COMM_SELF`'s delete callbacks).

use std::cell::UnsafeCell;
use std::collections::{BTreeMap, VecDeque};
use std::ffi::c_int;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use nemesis::Endpoint;

use crate::abi::{self, ERRORS_ARE_FATAL, ERRORS_RETURN};
use crate::coll::Tuning;
use crate::comm::Comm;
use crate::comm::context::Contexts;
use crate::datatype::Types;
use crate::error::{Fail, Res, Why, name_of};
use crate::lock::BigLock;
use crate::p2p::bsend::Bsend;
use crate::p2p::mprobe::Messages;
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
/// (64 bytes: an entry is found with one shift, as with 32, and fills one cache line.)
#[derive(Clone, Copy, Debug)]
#[repr(C, align(64))]
pub struct Fast {
    /// Members (0: not a live communicator).
    pub size: u32,
    /// Point-to-point context.
    pub ctx: u32,
    /// Job rank of each member (`size` entries).
    pub world: *const u32,
    /// Communicator rank of each job rank (an entry per job rank).
    pub from_world: *const i32,
    /// The context sends carry (`ctx` but on an intercommunicator).
    pub send_ctx: u32,
    /// The Endpoint's link to each member (`size` entries, `comm::links`): its job rank, local
    /// rank and doorbell, for the fused paths.
    pub links: *const nemesis::Link,
}

/// Communicators with a fast-path entry.
pub const FAST_COMMS: usize = 64;

impl Fast {
    const NONE: Fast = Fast {
        size: 0,
        ctx: 0,
        world: std::ptr::null(),
        from_world: std::ptr::null(),
        send_ctx: 0,
        links: std::ptr::null(),
    };

    /// The entry of communicator `c`, whose links are at `links` (`world` and `from_world` point
    /// into its boxed rank maps, which never move and live as long as the table's `Arc` of it;
    /// `links` into the state's table for it: a change or a free replaces that `Arc` and
    /// refreshes the entry and its links at once).
    fn of(c: &Comm, links: *const nemesis::Link) -> Fast {
        let (world, from_world) = (c.world.as_ptr(), c.from_world.as_ptr());
        Fast { size: c.size, ctx: c.ctx, world, from_world, send_ctx: c.send_ctx, links }
    }

    /// The job rank of member `rank`, if it is one.
    #[inline(always)]
    pub fn job(&self, rank: c_int) -> Option<u32> {
        if rank as u32 >= self.size {
            return None;
        }
        // SAFETY: `world` has `size` entries (the table's invariant) and `rank < size`.
        Some(unsafe { *self.world.add(rank as usize) })
    }

    /// The link to member `rank`, if it is one (the fused paths).
    #[inline(always)]
    pub fn member(&self, rank: c_int) -> Option<nemesis::Link> {
        if rank as u32 >= self.size {
            return None;
        }
        // SAFETY: `links` has `size` entries (the table's invariant) and `rank < size`.
        Some(unsafe { *self.links.add(rank as usize) })
    }
}

/// Everything MPI keeps between calls. (`repr(C)` with the fast-path table first: the fast paths
/// address it from the state's own address.)
#[repr(C)]
pub struct State {
    /// The fast-path view of the first communicators: `Fast::of(&comms[i], ..)` while running,
    /// `NONE` otherwise. So a non-zero `size` implies that `ep` is `Some`.
    pub fast: [Fast; FAST_COMMS],
    /// The links of the communicators with a fast entry (`Fast::links` points into them).
    pub links: crate::comm::links::Links,
    pub phase: Phase,
    /// The Endpoint (`Some` while running).
    pub ep: Option<Endpoint>,
    /// The Endpoint of a restarted process between `MPI_Init` and `MPIX_Checkpoint_restore`,
    /// while `ep` is `None`: nothing communicates before the restore (`crate::ft::park`); it
    /// still ends the job on a fatal error.
    pub parked: Option<Endpoint>,
    /// The communicator table: handle = `COMM_BASE + index`; 0 is `MPI_COMM_WORLD`, 1
    /// `MPI_COMM_SELF`.
    pub comms: Vec<Arc<Comm>>,
    /// Freed communicators that an operation of ours still names (`comm::reclaim`).
    pub comms_retired: Vec<usize>,
    /// Slots of `comms` free for new communicators.
    pub comm_slots: Vec<usize>,
    /// The groups.
    pub groups: crate::group::Groups,
    /// The user's reduction operations.
    pub ops: crate::op::UserOps,
    /// Attribute keyvals.
    pub keyvals: crate::attr::Keyvals,
    /// Info objects.
    pub infos: crate::attr::Infos,
    /// The program's error handlers.
    pub errhs: crate::errh::Errhs,
    /// The program's error classes and codes.
    pub user_codes: crate::errh::UserCodes,
    /// The predefined attributes' values (`MPI_Comm_get_attr` hands out their addresses, which
    /// stay valid: the state is static).
    pub attr_values: [c_int; 7],
    pub reqs: Requests,
    /// The derived datatypes.
    pub types: Types,
    /// Messages reserved by matched probes.
    pub messages: Messages,
    /// Names given to predefined datatypes (`MPI_Type_set_name`).
    pub type_names: BTreeMap<abi::Datatype, String>,
    /// Slots of requests freed by `MPI_Request_free` while active: freed when they complete.
    pub freed: Vec<usize>,
    /// Slots of non-blocking collectives in flight: every completion call advances them all.
    pub colls: Vec<usize>,
    /// Slots of the deferred receives (`request::State::Deferred`), in the order they were
    /// started: `MPI_Irecv`'s fast path keeps a small receive from a rank of this node here
    /// instead of posting it, and `MPI_Waitall`'s takes its message straight from the fastbox
    /// when it already waits there, the oldest first ([`nemesis::Endpoint::try_recv_link`]:
    /// nothing posted nor unexpected could match before it). Every other call that may match,
    /// probe or wait posts them all first, in order ([`State::post_deferred`]): MPI's matching
    /// order holds, and no peer waits on a receive that was started but not posted (an
    /// `MPI_Ssend` that needs its match to return, a rendezvous). The fused paths do not run
    /// while any is deferred ([`State::fused`]). Changed through [`State::defer`],
    /// [`State::undefer_oldest`] and [`State::post_deferred`].
    pub deferred: VecDeque<usize>,
    /// Receives shorter than this may be deferred: one more than the fastbox's payload, or 0
    /// (none) with `NEMESIS_DEFER_RECV=0`.
    pub defer_below: usize,
    /// The fused paths may run while no receive is deferred ([`FUSED`] is this, or false while
    /// some are: the fused `MPI_Recv` must not take a message a deferred receive matches first,
    /// and a blocking call must post them; so the fused paths test nothing for them).
    pub fused: bool,
    /// Attributes on datatypes: (datatype, keyval, value), in the order they were set.
    pub type_attrs: Vec<(abi::Datatype, c_int, usize)>,
    /// The buffered mode's attached buffer.
    pub bsend: Bsend,
    /// The thread level granted.
    pub provided: c_int,
    /// The thread that called `MPI_Init` (for `MPI_Is_thread_main`).
    pub main_thread: Option<std::thread::ThreadId>,
    /// The contexts new communicators may take (`crate::comm::context`).
    pub contexts: Contexts,
    /// Node id of every job rank (equal ids share a node).
    pub node_of_job: Vec<u32>,
    /// The job ranks of this process's world (`MPI_COMM_WORLD`, `mpi://WORLD`): the whole job,
    /// or its part of the universe `nemesis-run --universe-size` makes room for spawned
    /// processes in (`crate::comm::dynproc::world_of`, read once when the transport starts).
    pub world_ranks: Vec<u32>,
    /// The collectives' model parameters and overrides.
    pub tuning: Tuning,
    /// The world model's phase, the sessions, communicator hints (`crate::session`).
    pub sessions: crate::session::Sessions,
    /// The windows and their keyvals (`crate::win`).
    pub wins: crate::win::Wins,
}

impl State {
    /// True while the transport runs, parked or not (`crate::ft::park`): the test of the calls
    /// a restarted rank may make before `MPIX_Checkpoint_restore` (`MPI_Comm_rank`,
    /// `MPI_Comm_size`, `MPI_Comm_set_errhandler`, `MPI_Comm_get_errhandler`).
    pub fn started(&self) -> bool {
        self.ep.is_some() || self.parked.is_some()
    }

    /// Posts the deferred receives to the Endpoint, oldest first (see [`State::deferred`]).
    #[inline]
    pub fn post_deferred(&mut self) {
        if !self.deferred.is_empty() {
            crate::p2p::complete::post_deferred(self);
            set_fused(self.fused);
        }
    }

    /// Defers the receive of slot `i` (after those deferred before it); the fused paths stop
    /// until none is deferred any more.
    #[inline(always)]
    pub fn defer(&mut self, i: usize) {
        if self.deferred.is_empty() {
            set_fused(false);
        }
        self.deferred.push_back(i);
    }

    /// The oldest deferred receive completed (taken from the fastbox): no longer deferred.
    #[inline(always)]
    pub fn undefer_oldest(&mut self) {
        self.deferred.pop_front();
        if self.deferred.is_empty() {
            set_fused(self.fused);
        }
    }

    const fn new() -> State {
        State {
            fast: [Fast::NONE; FAST_COMMS],
            links: crate::comm::links::Links::new(),
            phase: Phase::Before,
            ep: None,
            parked: None,
            comms: Vec::new(),
            comms_retired: Vec::new(),
            comm_slots: Vec::new(),
            groups: crate::group::table(),
            ops: crate::op::table(),
            keyvals: crate::attr::keyvals(),
            infos: crate::attr::infos(),
            errhs: crate::errh::table(),
            user_codes: Vec::new(),
            attr_values: [0; 7],
            reqs: crate::request::table(),
            types: crate::datatype::table(),
            messages: crate::p2p::mprobe::table(),
            type_names: BTreeMap::new(),
            freed: Vec::new(),
            colls: Vec::new(),
            deferred: VecDeque::new(),
            defer_below: 0,
            fused: false,
            type_attrs: Vec::new(),
            bsend: Bsend::new(),
            provided: abi::THREAD_SINGLE,
            main_thread: None,
            contexts: Contexts::new(),
            node_of_job: Vec::new(),
            world_ranks: Vec::new(),
            tuning: Tuning::DEFAULT,
            sessions: crate::session::Sessions::new(),
            wins: crate::win::table(),
        }
    }

    /// Brings the fast-path entry of communicator `i` up to date with the table.
    pub fn refresh_fast(&mut self, i: usize) {
        let Some(f) = self.fast.get_mut(i) else { return };
        *f = match (self.phase, self.comms.get(i), self.ep.as_ref()) {
            (Phase::Running, Some(c), Some(ep)) if c.live => Fast::of(c, self.links.of(i, c, ep)),
            _ => {
                self.links.clear(i);
                Fast::NONE
            }
        };
    }

    /// Rebuilds every fast-path entry.
    pub fn refresh_all_fast(&mut self) {
        for i in 0..FAST_COMMS {
            self.refresh_fast(i);
        }
    }

    /// Hands failure `f` of `call` to the error handler of its communicator: the code to return
    /// under `MPI_ERRORS_RETURN`, the program's handler to run first under one of its own
    /// (`Failed::report` runs it once this borrow has ended); ends the job under
    /// `MPI_ERRORS_ARE_FATAL`.
    #[cold]
    #[inline(never)]
    pub fn fail(&mut self, call: &'static str, f: Fail) -> Failed {
        let ci = f.comm.filter(|&i| i < self.comms.len()).unwrap_or(0);
        // A session's failure goes to its own handler, an MPI_T failure is returned (`Why::On`).
        let (errh, obj, own) = match f.why {
            Why::On { errh, handle, .. } => (errh, handle, true),
            _ => (self.comms.get(ci).map_or(ERRORS_ARE_FATAL, |c| c.errh), crate::comm::handle_of(ci), false),
        };
        if errh == ERRORS_RETURN && (self.phase == Phase::Running || own) {
            return Failed { code: f.code, handler: None };
        }
        // The program's handler runs, then the call returns the code (MPI-3.1 §8.3).
        if self.phase == Phase::Running
            && let Some(h) = crate::errh::invocation(self, errh, obj)
        {
            return Failed { code: f.code, handler: Some(h) };
        }
        self.fatal(call, f)
    }

    /// Ends the job because `call` failed with `f`.
    #[cold]
    pub fn fatal(&mut self, call: &'static str, f: Fail) -> ! {
        let msg = format!("{call} failed: {}: {} (error handler MPI_ERRORS_ARE_FATAL)", name_of(f.code), f.why);
        match self.ep.as_mut().or(self.parked.as_mut()) {
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

/// A failure as its error handler takes it ([`State::fail`]): the code the call returns, and the
/// program's handler to run first (with the object's handle), if it has one.
#[must_use]
pub struct Failed {
    code: c_int,
    handler: Option<crate::errh::Invoke>,
}

impl Failed {
    /// Runs the program's handler, if any, and gives the code to return. Called by the
    /// exported functions' wrappers once their borrow of the state has ended (the frames above
    /// are the C caller's): the handler may call MPI ([`outside`]).
    #[cold]
    fn report(self) -> c_int {
        if let Some(h) = self.handler {
            // SAFETY: see above: no reference into the state is live in this thread.
            unsafe { crate::errh::invoke(h, self.code) };
        }
        self.code
    }
}

/// The state's one instance.
struct Global(UnsafeCell<State>);

// SAFETY: the state is reached only through an `Access`: under `MPI_THREAD_MULTIPLE` an `Access`
// holds `LOCK`, so one thread at a time touches the state and the lock's release/acquire orders
// their accesses; below that level the application calls MPI from one thread at a time (the
// levels' contract), and its own synchronisation between those calls orders them.
unsafe impl Sync for Global {}

static STATE: Global = Global(UnsafeCell::new(State::new()));

/// The big lock: held by every call while `THREADED` (a first, coarse step: the progress engine
/// and every table behind it; finer locks can replace it later).
static LOCK: BigLock = BigLock::new();

/// Runs `f`, which calls a function of the program's (a callback), so that the callback may call
/// MPI: with the big lock released if this thread holds it (taken again afterwards, also if `f`
/// unwinds).
///
/// Afterwards the receives the callback deferred (`MPI_Irecv`'s fast path) are posted: a call
/// relies on none being deferred once it has entered (`Access::enter` posted them).
///
/// # Safety
/// No reference into the [`State`] is live across the call, in any frame of this thread (the
/// module doc's rule): the callback's MPI calls, and this function afterwards, make their own.
/// A frame that holds an [`Access`] and no borrow from it meets this for itself (the borrow
/// checker sees to the frames below it that got the `Access` from it).
pub unsafe fn outside<R>(f: impl FnOnce() -> R) -> R {
    /// Takes the lock again when dropped, if it was held.
    struct Relock(bool);
    impl Drop for Relock {
        fn drop(&mut self) {
            if self.0 {
                LOCK.lock();
            }
        }
    }
    let held = BigLock::held_here();
    if held {
        LOCK.unlock();
    }
    let relock = Relock(held);
    let r = f();
    drop(relock);
    // SAFETY: no reference into the state is live (the caller's contract); the lock is held
    // again, or calls do not lock (the application serializes them).
    unsafe { &mut *STATE.0.get() }.post_deferred();
    r
}

/// Runs `f` on the state holding the big lock, outside any call (the one-sided progress thread,
/// `crate::win::progress`): `f` must first check that calls still lock (its own record of it),
/// else the state is not its to touch.
pub fn with_lock<R>(f: impl FnOnce(&mut State) -> R) -> R {
    LOCK.lock();
    /// Releases the lock when dropped (`f` may unwind).
    struct Unlock;
    impl Drop for Unlock {
        fn drop(&mut self) {
            LOCK.unlock();
        }
    }
    let _unlock = Unlock;
    // SAFETY: the lock is held; `f`'s contract keeps it away from a state that calls reach
    // unlocked.
    f(unsafe { &mut *STATE.0.get() })
}

/// Calls take `LOCK`: `MPI_THREAD_MULTIPLE` was granted, or a one-sided window spans nodes (its
/// progress thread, `crate::win::progress`). Set by `MPI_Init_thread` before the application can
/// start threads that call MPI (thread creation orders the store before their loads, so
/// `Relaxed` suffices), never cleared then (calls after `MPI_Finalize` still lock); set and
/// cleared by [`Access::lock_calls`] below that level, inside a call (the program orders its
/// calls, and so the store before the next call's load).
static THREADED: AtomicBool = AtomicBool::new(false);

/// The fused paths (`p2p::send_fused`, `p2p::recv_fused`) may run: MPI is running, below
/// `MPI_THREAD_MULTIPLE` and without fault tolerance (whose hooks every message takes). One load
/// decides, before anything else, so that a call they would decline pays nothing more. Set by
/// `MPI_Init` once the Endpoint and the thread level are known (before the application's threads
/// could call: `Relaxed`, as `THREADED`), cleared by `MPI_Finalize`.
static FUSED: AtomicBool = AtomicBool::new(false);

/// Allows (or stops) the fused paths ([`FUSED`]).
pub fn set_fused(on: bool) {
    // ORDERING: Relaxed: see `FUSED`.
    FUSED.store(on, Ordering::Relaxed);
}

/// One pause of a waiting loop: a short spin for the first 64 looks (`spins` counts them),
/// then a yield of the core (ranks may outnumber cores).
fn back_off(spins: &mut u32) {
    *spins = spins.saturating_add(1);
    if *spins < 64 {
        for _ in 0..32 {
            std::hint::spin_loop();
        }
    } else {
        std::thread::yield_now();
    }
}

/// The right to use the state for the length of one MPI call: the big lock's guard under
/// `MPI_THREAD_MULTIPLE`, nothing otherwise.
///
/// A `&mut State` is borrowed from it ([`Access::st`]) for as long as the code needs it and
/// never across [`Access::pause`], which lets other threads in: waiting (for a message, a
/// request, a collective's piece) releases the lock between two looks, so a thread blocked in
/// `MPI_Recv` does not stop another one's `MPI_Send` that it may be waiting for. The blocking
/// Endpoint operations go through here ([`Access::ep_send`], [`Access::ep_recv`],
/// [`Access::ep_wait`], [`Access::ep_probe`]): the Endpoint's own blocking calls (and the
/// receive's bypass of the posted list) when they may block ([`Access::may_block`]), a start and a
/// test loop otherwise.
pub struct Access {
    /// This call holds the big lock.
    locked: bool,
}

impl Access {
    /// Enters a call: takes the big lock if `MPI_THREAD_MULTIPLE` was granted.
    #[inline(always)]
    pub fn enter() -> Access {
        // ORDERING: Relaxed: see `THREADED`.
        let locked = THREADED.load(Ordering::Relaxed);
        if locked {
            LOCK.lock();
        }
        let mut acc = Access { locked };
        // Every call with an `Access` may match, probe or wait: the deferred receives go first.
        acc.st().post_deferred();
        acc
    }

    /// The state, for as long as this borrow lasts.
    #[inline(always)]
    pub fn st(&mut self) -> &mut State {
        // SAFETY: the one reference handed out by this `Access` at a time (it borrows `self`
        // mutably), and one `Access` is alive per call; under MULTIPLE it holds the lock, below
        // the application serializes its calls (see `Global`).
        unsafe { &mut *STATE.0.get() }
    }

    /// True if calls lock (`MPI_THREAD_MULTIPLE`).
    #[inline(always)]
    pub fn threaded(&self) -> bool {
        self.locked
    }

    /// Grants `MPI_THREAD_MULTIPLE` from now on (by `MPI_Init_thread`, before the application's
    /// threads call): this call takes the lock too, so it is released consistently.
    pub fn become_threaded(&mut self) {
        // ORDERING: Relaxed: see `THREADED`.
        THREADED.store(true, Ordering::Relaxed);
        if !self.locked {
            LOCK.lock();
            self.locked = true;
        }
    }

    /// Makes calls take the lock from now on (`on`), or no longer, without changing the thread
    /// level granted: the one-sided progress thread (`crate::win::progress`) needs it while a
    /// window spans nodes. This call takes the lock too when it starts locking (it releases it
    /// consistently either way).
    pub fn lock_calls(&mut self, on: bool) {
        // ORDERING: Relaxed: changed inside a call holding the lock or alone (below
        // `MPI_THREAD_MULTIPLE` the program serializes its calls), before the progress thread
        // starts or after it stopped touching the state (see `crate::win::progress`).
        THREADED.store(on, Ordering::Relaxed);
        if on && !self.locked {
            LOCK.lock();
            self.locked = true;
        }
    }

    /// True if a wait may block in the Endpoint's own blocking calls: no other thread needs the
    /// lock, no non-blocking collective is in flight, and no window has a member on another node.
    /// A schedule's next round starts only when the schedule is advanced, and MPI's progress
    /// rule asks every blocking call to move them: a peer may wait in `MPI_Wait` for the round
    /// this process would post next while it waits here for that peer (so may a one-sided
    /// origin wait for this target's answer). Otherwise waits poll and [`Access::pause`] between
    /// looks.
    #[inline(always)]
    pub fn may_block(&mut self) -> bool {
        !self.locked && self.st().colls.is_empty() && !crate::win::progress::active()
    }

    /// Between two looks of a wait that does not block in the Endpoint ([`Access::may_block`]):
    /// advances the non-blocking collectives in flight, lets other threads in for a moment
    /// (releasing the lock when calls lock), spins or yields according to how long the wait has
    /// lasted (`spins`), and takes the lock again.
    pub fn pause(&mut self, spins: &mut u32) {
        if !self.st().colls.is_empty() {
            crate::p2p::complete::advance_colls(self);
        }
        if crate::win::progress::active() && crate::win::progress::advance(self.st()) {
            *spins = 0;
        }
        if self.locked {
            LOCK.unlock();
            back_off(spins);
            LOCK.lock();
        } else {
            back_off(spins);
        }
    }

    /// The Endpoint (MPI running).
    #[inline(always)]
    pub fn ep(&mut self) -> Res<&mut Endpoint> {
        let st = self.st();
        match st.ep.as_mut() {
            Some(ep) => Ok(ep),
            None => Err(not_running(st.phase)),
        }
    }

    /// Waits for Endpoint request `r`.
    pub fn ep_wait(&mut self, r: nemesis::Request) -> Res<nemesis::Result<nemesis::Status>> {
        if self.may_block() {
            return Ok(self.ep()?.wait(r));
        }
        let mut spins = 0;
        loop {
            match self.ep()?.test(r) {
                Ok(None) => self.pause(&mut spins),
                Ok(Some(s)) => return Ok(Ok(s)),
                Err(e) => return Ok(Err(e)),
            }
        }
    }

    /// Sends `data` to job rank `to` (synchronously with `sync`), blocking until it may be reused.
    pub fn ep_send(&mut self, data: &[u8], to: u32, tag: i32, ctx: u32, sync: bool) -> Res<nemesis::Result<()>> {
        let block = self.may_block();
        let ep = self.ep()?;
        if block {
            return Ok(if sync { ep.ssend(data, to, tag, ctx) } else { ep.send(data, to, tag, ctx) });
        }
        // SAFETY: `data` outlives the request, which is waited for before returning.
        let r = unsafe {
            if sync {
                ep.issend_raw(data.as_ptr(), data.len(), to, tag, ctx)
            } else {
                ep.isend_raw(data.as_ptr(), data.len(), to, tag, ctx)
            }
        };
        match r {
            Ok(r) => Ok(self.ep_wait(r)?.map(drop)),
            Err(e) => Ok(Err(e)),
        }
    }

    /// Receives into `buf` a message from job rank `from` (or `nemesis::ANY_SOURCE`).
    pub fn ep_recv(&mut self, buf: &mut [u8], from: i32, tag: i32, ctx: u32) -> Res<nemesis::Result<nemesis::Status>> {
        let block = self.may_block();
        let ep = self.ep()?;
        if block {
            return Ok(ep.recv(buf, from, tag, ctx));
        }
        // SAFETY: `buf` is borrowed for this whole call, and the request is waited for.
        match unsafe { ep.irecv_raw(buf.as_mut_ptr(), buf.len(), from, tag, ctx) } {
            Ok(r) => self.ep_wait(r),
            Err(e) => Ok(Err(e)),
        }
    }

    /// Waits until a message matching `(from, tag, ctx)` has arrived, without receiving it.
    pub fn ep_probe(&mut self, from: i32, tag: i32, ctx: u32) -> Res<nemesis::Result<nemesis::Status>> {
        if self.may_block() {
            return Ok(self.ep()?.probe(from, tag, ctx));
        }
        let mut spins = 0;
        loop {
            match self.ep()?.iprobe(from, tag, ctx) {
                Ok(None) => self.pause(&mut spins),
                Ok(Some(s)) => return Ok(Ok(s)),
                Err(e) => return Ok(Err(e)),
            }
        }
    }
}

impl Drop for Access {
    #[inline(always)]
    fn drop(&mut self) {
        if self.locked {
            LOCK.unlock();
        }
    }
}

/// Runs `f`, the body of MPI function `call`, with the state's [`Access`]; its failure goes to
/// the error handler. A panic inside it (a bug: nothing a caller or a peer does should cause one)
/// becomes `MPI_ERR_INTERN` through the error handler instead of crossing the C boundary (the
/// `Access` is dropped while unwinding: the lock is released).
#[inline(always)]
pub fn call(call: &'static str, f: impl FnOnce(&mut Access) -> Res<()>) -> c_int {
    guard(call, || body(call, f))
}

/// True if the fused paths may run ([`FUSED`]). The exported function tests it first, alone, so
/// that a call the fused paths would decline (fault tolerance, `MPI_THREAD_MULTIPLE`) goes on at
/// once (`exports::mpi_fused!`).
#[inline(always)]
pub fn fused_on() -> bool {
    // ORDERING: Relaxed: see `FUSED`.
    FUSED.load(Ordering::Relaxed)
}

/// The state for a fused path (`p2p::send_fused`), outside the panic guard.
///
/// # Safety
/// [`fused_on`] was true for this call (so it is not under `MPI_THREAD_MULTIPLE`: one call at a
/// time), and the caller holds no other reference to the state while it uses this one.
#[inline(always)]
pub unsafe fn unlocked() -> &'static mut State {
    // SAFETY: not threaded (`FUSED` is never set under `MPI_THREAD_MULTIPLE`): the application
    // calls MPI from one thread at a time (the levels' contract, see `Global`), and the caller
    // holds no other reference.
    unsafe { &mut *STATE.0.get() }
}

/// The general path after a fused path declined the call (`p2p::send_fused`): `f` on the
/// state, unlocked (the fused path ran, so the call is not locked), inside the panic guard; its
/// failure goes to the error handler.
#[inline(always)]
pub fn after_fused(call: &'static str, f: impl FnOnce(&mut State) -> Res<()>) -> c_int {
    guard(call, || {
        // SAFETY: the fused path found the call unlocked (`unlocked`); this is its only
        // reference now.
        let st = unsafe { &mut *STATE.0.get() };
        match f(st) {
            Ok(()) => abi::SUCCESS,
            Err(e) => st.fail(call, e).report(),
        }
    })
}

/// [`call`] for the functions with a fast path (`MPI_Send`, `MPI_Recv`...): below
/// `MPI_THREAD_MULTIPLE`, `fast` runs first on the state itself and settles the common call
/// (`Some`); anything else, and every call under `MPI_THREAD_MULTIPLE`, goes to `slow`, a
/// function of its own (`exports::mpi_fast!` makes one taking the arguments by value, which
/// [`slow_call`] runs with an [`Access`]), so that the fast path's code carries nothing of the
/// lock nor of the validating path.
#[inline(always)]
pub fn call_fast(
    call: &'static str,
    fast: impl FnOnce(&mut State) -> Option<Res<()>>,
    slow: impl FnOnce() -> c_int,
) -> c_int {
    guard(call, || {
        // ORDERING: Relaxed: see `THREADED`.
        if !THREADED.load(Ordering::Relaxed) {
            // SAFETY: not threaded: the application calls MPI from one thread at a time (the
            // levels' contract, see `Global`), and this is the call's only reference.
            let st = unsafe { &mut *STATE.0.get() };
            if let Some(r) = fast(st) {
                return match r {
                    Ok(()) => abi::SUCCESS,
                    Err(e) => st.fail(call, e).report(),
                };
            }
        }
        slow()
    })
}

/// The slow path of a function with a fast path: `f` with an [`Access`] (inside the caller's
/// panic guard).
#[inline(always)]
pub fn slow_call(call: &'static str, f: impl FnOnce(&mut Access) -> Res<()>) -> c_int {
    body(call, f)
}

#[inline(always)]
fn body(call: &'static str, f: impl FnOnce(&mut Access) -> Res<()>) -> c_int {
    let mut acc = Access::enter();
    match f(&mut acc) {
        Ok(()) => abi::SUCCESS,
        Err(e) => acc.st().fail(call, e).report(),
    }
}

/// Runs `f`, turning a panic into `MPI_ERR_INTERN` through the error handler.
#[inline(always)]
fn guard(call: &'static str, f: impl FnOnce() -> c_int) -> c_int {
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
    // The panicking call's `Access` was dropped while unwinding (releasing the lock, if held).
    let mut acc = Access::enter();
    acc.st().fail(call, Fail::new(abi::ERR_INTERN, None, Why::Panic(text))).report()
}

/// The failure of a call made outside `MPI_Init`..`MPI_Finalize`.
#[cold]
pub fn not_running(phase: Phase) -> Fail {
    if phase == Phase::Running && crate::ft::awaiting_restore() {
        return crate::ft::unrestored();
    }
    let why = match phase {
        Phase::Before => "called before MPI_Init",
        _ => "called after MPI_Finalize",
    };
    Fail::new(abi::ERR_OTHER, None, Why::Arg(why))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn outside_releases_the_lock_and_takes_it_again() {
        LOCK.lock();
        // Another thread gets the lock while the callback runs.
        let other = || std::thread::spawn(|| LOCK.lock()).join().map(|()| LOCK.unlock()).is_ok();
        // SAFETY: this test holds no reference into the state (so below).
        let taken_meanwhile = unsafe { outside(|| !BigLock::held_here() && other()) };
        assert!(taken_meanwhile && BigLock::held_here());
        // A callback that unwinds: the lock is held again all the same.
        // SAFETY: as above.
        let unwound = std::panic::catch_unwind(|| unsafe { outside(|| panic!("callback")) });
        assert!(unwound.is_err());
        assert!(BigLock::held_here());
        LOCK.unlock();
        // Not holding it (below MPI_THREAD_MULTIPLE): `outside` takes none.
        // SAFETY: as above.
        assert!(unsafe { outside(|| !BigLock::held_here()) });
        assert!(!BigLock::held_here());
    }
}
