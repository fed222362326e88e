//! The collectives' C arguments decoded once into typed values, so that the `int` forms, the
//! large-count `_c` forms (MPI-4.0 §6.1, "embiggened" bindings) and the persistent forms
//! (`MPI_Bcast_init`..., MPI-4.0 §6.13) of one operation share one entry: counts are `MPI_Count`
//! ([`abi::Count`], the `int` forms widen theirs), count arrays [`Counts`] and displacement
//! arrays [`Disps`] are either width, and [`How`] says whether the call blocks, returns a request
//! or makes a persistent one. Each operation's entry is in the file of its family: the rooted
//! ones in `rooted.rs`, the ones over the whole communicator in `whole.rs`, the neighbourhood
//! ones in `neighbor.rs`; the algorithms stay where they were (`coll`, `nbc`, `vector`, `inter`).
//!
//! **Large counts.** A count above `INT_MAX` is moved as one element of a derived type holding
//! all of them ([`fit`]); the algorithms take byte lengths as `usize`. A count array entry above
//! `INT_MAX` (the v- and w-forms) is refused with `MPI_ERR_COUNT`.
//!
//! **Persistent collectives.** `*_init` checks the arguments and makes an inactive persistent
//! request holding a [`Recipe`]: every `MPI_Start` compiles the operation's non-blocking
//! schedule afresh from the arguments given at init (the send data is read at the start, as MPI
//! requires; the count and displacement arrays are copied at init). The started schedule is
//! advanced, completed, reported and restarted as any request; `MPI_Request_free` frees it.
//! On an intercommunicator too (its non-blocking schedules); the init accepts `MPI_ROOT` and
//! `MPI_PROC_NULL` roots there and refuses `MPI_IN_PLACE` in a buffer the process uses.

mod neighbor;
mod rooted;
mod saved;
mod whole;

pub use neighbor::{neighbor_allgatherv, neighbor_alltoallv, neighbor_alltoallw, neighbor_blocks};
pub use rooted::{bcast, reduce, vblocks};
pub use saved::{Args, Reduction, Side, WSide, rehold, restored};
pub use whole::{allgatherv, allreduce, alltoallv, alltoallw, barrier, blocks, reduce_scatter, scan};

use std::ffi::{c_int, c_void};
use std::rc::Rc;
use std::sync::Arc;

use crate::abi::{self, Aint, Count, Datatype};
use crate::comm::Comm;
use crate::datatype;
use crate::error::{Fail, Res, Why};
use crate::p2p::null_arg;
use crate::request::{Persistent, Req, State as ReqState};
use crate::state::{Access, not_running};

/// How a collective runs.
#[derive(Clone, Copy, Debug)]
pub enum How {
    /// `MPI_Bcast`: returns when complete.
    Blocking,
    /// `MPI_Ibcast`: the request, written when started.
    Nonblocking(*mut abi::Request),
    /// `MPI_Bcast_init`: an inactive persistent request, written when made.
    Persistent(*mut abi::Request),
}

/// A count array: `int`s or `MPI_Count`s.
#[derive(Clone, Copy, Debug)]
pub enum Counts {
    Int(*const c_int),
    Big(*const Count),
}

/// A displacement array: `int`s or `MPI_Aint`s.
#[derive(Clone, Copy, Debug)]
pub enum Disps {
    Int(*const c_int),
    Aint(*const Aint),
}

/// An `int` array decoded from a [`Counts`] or [`Disps`]; `None` when the caller passed null
/// (the algorithms report it where it matters).
pub type Ints = Option<Vec<c_int>>;

/// The pointer the `int` algorithms take.
pub fn ptr(v: &Ints) -> *const c_int {
    opt_ptr(v)
}

/// The pointer of an optional array (null when not given).
fn opt_ptr<T>(v: &Option<Vec<T>>) -> *const T {
    v.as_ref().map_or(std::ptr::null(), |v| v.as_ptr())
}

fn too_big(ci: Option<usize>, what: &'static str) -> Fail {
    Fail::new(abi::ERR_COUNT, ci, Why::Arg(what))
}

/// Reads `n` values of a count array as `int`s.
///
/// # Safety
/// A non-null array holds `n` values.
pub unsafe fn counts(c: Counts, n: usize, ci: Option<usize>) -> Res<Ints> {
    match c {
        Counts::Int(p) if p.is_null() => Ok(None),
        Counts::Big(p) if p.is_null() => Ok(None),
        // SAFETY: the caller's contract.
        Counts::Int(p) => Ok(Some(unsafe { std::slice::from_raw_parts(p, n) }.to_vec())),
        // SAFETY: the caller's contract.
        Counts::Big(p) => unsafe { std::slice::from_raw_parts(p, n) }
            .iter()
            .map(|&k| c_int::try_from(k).map_err(|_| too_big(ci, "a count array entry above INT_MAX")))
            .collect::<Res<Vec<_>>>()
            .map(Some),
    }
}

/// Reads `n` values of a displacement array as `int`s.
///
/// # Safety
/// A non-null array holds `n` values.
pub unsafe fn disps(d: Disps, n: usize, ci: Option<usize>) -> Res<Ints> {
    match d {
        Disps::Int(p) if p.is_null() => Ok(None),
        Disps::Aint(p) if p.is_null() => Ok(None),
        // SAFETY: the caller's contract.
        Disps::Int(p) => Ok(Some(unsafe { std::slice::from_raw_parts(p, n) }.to_vec())),
        // SAFETY: the caller's contract.
        Disps::Aint(p) => unsafe { std::slice::from_raw_parts(p, n) }
            .iter()
            .map(|&k| {
                c_int::try_from(k).map_err(|_| Fail::new(abi::ERR_ARG, ci, Why::Arg("a displacement beyond int")))
            })
            .collect::<Res<Vec<_>>>()
            .map(Some),
    }
}

/// The communicator's table index, when the handle names one (for the error handler).
fn comm_index(acc: &mut Access, comm: abi::Comm) -> Option<usize> {
    crate::p2p::comm_at(&acc.st().comms, comm).ok().map(|(i, _)| i)
}

/// The communicator (any kind): its index and itself.
fn comm_of(acc: &mut Access, comm: abi::Comm) -> Res<(usize, Arc<Comm>)> {
    let st = acc.st();
    if st.ep.is_none() {
        return Err(not_running(st.phase));
    }
    crate::p2p::comm_at(&st.comms, comm).map(|(i, c)| (i, c.clone()))
}

/// Elements in one block of a derived type made for a count above `INT_MAX`.
const CHUNK: Count = 1 << 30;

/// Runs `f` with `parts` (`(count, datatype)`) as `int` counts: a count that fits goes as it
/// is; a larger one as one element of a derived type holding `count` elements of the datatype,
/// made for the call and freed after it (operations in flight keep its layout).
pub fn fit<R>(
    acc: &mut Access,
    ci: Option<usize>,
    parts: &[(Count, Datatype)],
    f: impl FnOnce(&mut Access, &[(c_int, Datatype)]) -> Res<R>,
) -> Res<R> {
    let mut made = Vec::new();
    let mut args = Vec::with_capacity(parts.len());
    for &(count, dt) in parts {
        match c_int::try_from(count) {
            Ok(c) => args.push((c, dt)),
            Err(_) if count < 0 => {
                release(acc, made);
                return Err(too_big(ci, "a count below INT_MIN"));
            }
            Err(_) => match big_type(acc, count, dt) {
                Ok(t) => {
                    made.push(t);
                    args.push((1, t));
                }
                Err(mut e) => {
                    release(acc, made);
                    if e.comm.is_none() {
                        e.comm = ci;
                    }
                    return Err(e);
                }
            },
        }
    }
    let r = f(acc, &args);
    release(acc, made);
    r
}

fn release(acc: &mut Access, made: Vec<Datatype>) {
    for mut t in made {
        // SAFETY: a handle made by `big_type`, freed once.
        let _ = unsafe { datatype::calls::free(acc, &mut t) };
    }
}

/// A committed derived type of `count` (above `INT_MAX`) elements of `dt`, laid out as `count`
/// consecutive elements: `count / CHUNK` blocks of `CHUNK`, then the rest.
fn big_type(acc: &mut Access, count: Count, dt: Datatype) -> Res<Datatype> {
    use datatype::calls::{commit, contiguous, create_struct, free};
    let (q, r) = (count / CHUNK, count % CHUNK);
    let q = c_int::try_from(q).map_err(|_| too_big(None, "a count beyond the address space"))?;
    let extent = datatype::any(&acc.st().types, dt)?.extent() as Aint;
    let (mut chunk, mut blocks, mut rest, mut all) = (0, 0, 0, 0);
    // SAFETY: the out-pointers are locals; each intermediate handle is freed once below.
    unsafe {
        contiguous(acc, CHUNK as c_int, dt, &mut chunk)?;
        let made = contiguous(acc, q, chunk, &mut blocks);
        free(acc, &mut chunk)?;
        made?;
        if r == 0 {
            all = blocks;
        } else {
            contiguous(acc, r as c_int, dt, &mut rest)?;
            let disp = (q as Aint).checked_mul(CHUNK as Aint).and_then(|b| b.checked_mul(extent));
            let Some(disp) = disp else {
                free(acc, &mut blocks)?;
                free(acc, &mut rest)?;
                return Err(too_big(None, "a count beyond the address space"));
            };
            let made = create_struct(acc, 2, [1, 1].as_ptr(), [0, disp].as_ptr(), [blocks, rest].as_ptr(), &mut all);
            free(acc, &mut blocks)?;
            free(acc, &mut rest)?;
            made?;
        }
        commit(acc, &all)?;
    }
    Ok(all)
}

/// What `MPI_Start` runs for a persistent collective: the operation's non-blocking form with the
/// arguments given at init, a record ([`Args`], which the MPI state image saves), writing the
/// new request to its argument. It resolves the handles at
/// each start, so it holds the derived datatypes and the user operation it names
/// ([`datatype::hold`], [`crate::op::hold`]) from the init until the request's slot is removed
/// ([`Recipe::release`], by `grequest::discard`): freed meanwhile, they stay usable and their
/// slots are not reused.
#[derive(Debug)]
pub struct Recipe {
    held: Held,
    args: Args,
}

/// The handles a recipe holds: derived datatypes (a handle once per use) and a user operation.
#[derive(Debug, Default)]
pub struct Held {
    types: Vec<Datatype>,
    op: Option<abi::Op>,
}

impl Held {
    /// The datatypes `types` and operation `op` a recipe names (any handles: a recipe holds
    /// the ones naming a derived type or a user operation).
    pub fn of(types: &[Datatype], op: Option<abi::Op>) -> Held {
        Held { types: types.to_vec(), op }
    }

    /// Holds what names a live derived type or user operation, and keeps only those.
    fn hold(mut self, st: &mut crate::state::State) -> Held {
        self.types.retain(|&t| st.types.get(t).is_some_and(|e| !e.freed));
        for &t in &self.types {
            datatype::hold(&mut st.types, t);
        }
        self.op = self.op.filter(|&o| st.ops.get(o).is_some_and(|u| !u.freed));
        if let Some(o) = self.op {
            crate::op::hold(&mut st.ops, o);
        }
        self
    }
}

impl Recipe {
    /// Ends the holds of the recipe's handles (once, when its request's slot is removed): a
    /// datatype or operation the program freed meanwhile goes now.
    pub fn release(&self, st: &mut crate::state::State) {
        for &t in &self.held.types {
            datatype::release(&mut st.types, t);
        }
        if let Some(o) = self.held.op {
            crate::op::release(&mut st.ops, o);
        }
    }
}

/// Makes persistent collective request `request` with arguments `args` once `check` accepted
/// them; the recipe holds the handles they name.
///
/// # Safety
/// `request` null or writable; MPI's contract on the record's buffers, at each start.
unsafe fn persist(
    acc: &mut Access,
    request: *mut abi::Request,
    check: impl FnOnce(&mut Access, &Comm, usize) -> Res<()>,
    args: Args,
) -> Res<()> {
    let (ci, c) = comm_of(acc, args.comm())?;
    if request.is_null() {
        return Err(null_arg(Some(ci), "request"));
    }
    check(acc, &c, ci)?;
    let data = datatype::Layout::Contig { ptr: std::ptr::null_mut(), len: 0 };
    let st = acc.st();
    let recipe = Rc::new(Recipe { held: args.held().hold(st), args });
    let p = Persistent { send: None, data, peer: None, tag: 0, ctx: c.coll_ctx(), coll: Some(recipe.clone()) };
    let req = Req { persistent: Some(Box::new(p)), coll: true, ..Req::new(ci, ReqState::Inactive, false) };
    let Some(h) = st.reqs.insert(req) else {
        recipe.release(st);
        return Err(Fail::new(abi::ERR_INTERN, Some(ci), Why::Arg("too many requests")));
    };
    // SAFETY: checked non-null; MPI's contract.
    unsafe { *request = h };
    Ok(())
}

/// `MPI_Start` of persistent collective request `h` (inactive, checked by the caller): runs its
/// recipe and moves the schedule it made into `h`'s slot.
pub fn start(acc: &mut Access, h: abi::Request, recipe: &Recipe) -> Res<()> {
    let mut fresh = abi::REQUEST_NULL;
    // SAFETY: MPI's contract on the buffers given at init.
    unsafe { recipe.args.start(acc, &mut fresh)? };
    let st = acc.st();
    let Some(fi) = st.reqs.index(fresh) else {
        return Err(Fail::new(abi::ERR_INTERN, None, Why::Arg("the started collective has no request")));
    };
    let state = st.reqs.at_mut(fi).map_or(ReqState::Inactive, |r| std::mem::replace(&mut r.state, ReqState::Inactive));
    st.reqs.remove_at(fi);
    st.colls.retain(|&k| k != fi);
    let Some(pi) = st.reqs.index(h) else { return Err(Fail::new(abi::ERR_REQUEST, None, Why::Request(h))) };
    let active = matches!(state, ReqState::Coll(_));
    if let Some(r) = st.reqs.at_mut(pi) {
        r.state = state;
    }
    if active && !st.colls.contains(&pi) {
        st.colls.push(pi);
    }
    Ok(())
}

/// True if `buf` is `MPI_IN_PLACE`.
fn in_place<T>(buf: *const T) -> bool {
    buf as usize == abi::IN_PLACE
}

/// A root argument checked as the starting call will check it: on an intercommunicator,
/// `MPI_ROOT` and `MPI_PROC_NULL` too (the root's group).
fn check_root(root: c_int, c: &Comm, ci: usize) -> Res<()> {
    if c.local.is_some() && (root == abi::ROOT || root == abi::PROC_NULL) {
        return Ok(());
    }
    super::check_root(root, c, ci).map(|_| ())
}

/// True if this process uses a rooted collective's members' side (a gather's send, a scatter's
/// receive): every process of an intracommunicator (the root its own block), on an
/// intercommunicator the other group's (not `MPI_ROOT` nor `MPI_PROC_NULL`).
fn member_side(c: &Comm, root: c_int) -> bool {
    c.local.is_none() || (root != abi::ROOT && root != abi::PROC_NULL)
}

/// True at the `MPI_PROC_NULL` members of an intercommunicator's root group: none of their
/// arguments is significant (MPI-4.1 §6.2.3), none is checked.
fn idle(c: &Comm, root: c_int) -> bool {
    c.local.is_some() && root == abi::PROC_NULL
}

/// A side's count and datatype checked as the starting call will check them, unless its buffer
/// is `MPI_IN_PLACE` (the side is then ignored; on an intercommunicator [`no_in_place`] refuses
/// it).
fn check_side<T>(acc: &mut Access, buf: *const T, count: Count, dt: Datatype, ci: usize) -> Res<()> {
    if in_place(buf) {
        return Ok(());
    }
    check_count(count, ci)?;
    check_type(acc, dt, ci)
}

/// On an intercommunicator, `MPI_IN_PLACE` refused (`MPI_ERR_BUFFER`, as the starting call
/// would) in a buffer this process uses: `at_root`'s at `MPI_ROOT`, none at `MPI_PROC_NULL`,
/// `at_members`' elsewhere (everywhere when `root` is `None`).
fn no_in_place(
    c: &Comm,
    root: Option<c_int>,
    at_root: &[*const c_void],
    at_members: &[*const c_void],
    ci: usize,
) -> Res<()> {
    let used = match root {
        _ if c.local.is_none() => &[][..],
        Some(abi::ROOT) => at_root,
        Some(abi::PROC_NULL) => &[],
        _ => at_members,
    };
    if used.iter().any(|&b| in_place(b)) {
        return Err(super::in_place_misused(ci));
    }
    Ok(())
}

/// A count checked as non-negative.
fn check_count(count: Count, ci: usize) -> Res<()> {
    if count < 0 {
        return Err(Fail::new(abi::ERR_COUNT, Some(ci), Why::Arg("a negative count")));
    }
    Ok(())
}

/// A datatype checked as usable (predefined, or derived and committed).
fn check_type(acc: &mut Access, dt: Datatype, ci: usize) -> Res<()> {
    if datatype::size_of_handle(dt).is_some() {
        return Ok(());
    }
    datatype::resolve(&acc.st().types, dt, ci).map(|_| ())
}

/// A reduction's arguments checked: count, datatype, operation.
fn check_reduction(acc: &mut Access, count: Count, dt: Datatype, op: abi::Op, ci: usize) -> Res<()> {
    check_count(count, ci)?;
    check_type(acc, dt, ci)?;
    check_op(acc, op, ci)
}

/// An operation checked as known (predefined or the user's).
fn check_op(acc: &mut Access, op: abi::Op, ci: usize) -> Res<()> {
    let known = acc.st().ops.get(op).is_some()
        || crate::op::OpKind::lookup(op).is_some()
        || crate::op::Loc::lookup(op).is_some();
    if !known {
        return Err(Fail::new(abi::ERR_OP, Some(ci), Why::Arg("an invalid operation")));
    }
    Ok(())
}
