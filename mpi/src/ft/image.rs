//! The MPI state image: the library's objects a rank holds at `MPIX_Checkpoint`, saved with the
//! group's checkpoint (the opaque `mpi` section of `nemesis::ft::checkpoint::FtImage`, under the
//! file's MAC and checksum) and put back by `MPIX_Checkpoint_restore` after a restart, before it
//! returns the application's bytes: a handle the application kept in its checkpointed state names
//! the same object afterwards. Issue 33, package A.
//!
//! **Handles keep their values.** A handle is its table slot (`crate::handle`): each table is
//! saved with its shape (slots in all, the free list from its head) and every live object at its
//! index, and restored into a fresh table (only `MPI_Init`'s objects: restoring is refused once
//! the program made others) as the same slots, the free ones free and in the same free-list
//! order (the next object made gets the handle it would have got). The communicator table is
//! rebuilt the same way (slots after `MPI_COMM_WORLD` and `MPI_COMM_SELF`, free slots listed).
//!
//! **Saved, per kind:**
//! - communicators, intra and inter (an intercommunicator's local group is a communicator of its
//!   own, saved inside it): members as job ranks, point-to-point/collective contexts (`ctx`,
//!   `send_ctx`), name, error handler handle, the session it belongs to, topology (Cartesian, graph, distributed graph), and
//!   the count of non-blocking collectives started on it (`Comm::nbc`), whose tags the survivors
//!   expect in step. `MPI_COMM_WORLD` and `MPI_COMM_SELF` exist after `MPI_Init`: their name,
//!   handler and count are put back. Node structure and rank maps are recomputed from the members;
//!   the shared collective area is never used under fault tolerance.
//! - the context allocator's free mask (`crate::comm::context`), so the next communicator made by
//!   the restarted group agrees on the context the survivors expect (no creation can be under
//!   way at a checkpoint: none is outstanding);
//! - groups (their job ranks); info objects (their keys and values, in order);
//! - sessions, which groups came from their process sets, the program's error classes, codes and
//!   strings, the attached buffers of buffered sends, communicators' hints ([`process`]);
//! - derived datatypes: each descriptor whole, layout and recipe (`super::types`), with
//!   committed, name, whether predefined (`MPI_Type_create_f90_*`) and whether freed while a
//!   persistent collective holds it (it stays freed: a second free fails, the last release
//!   removes it); names given to predefined types;
//! - user reduction operations, user error handlers and attribute keyvals: each function
//!   ([`super::code`]: module and offset, re-resolved after the restart, which ASLR moved; a
//!   module gone or rebuilt is refused with the reason, never called), commutativity, kind, a
//!   keyval's `extra_state`, an operation's freed mark (as a datatype's);
//! - attributes of communicators and datatypes: keyval and value. A value (like `extra_state`) is
//!   the application's word, saved as it is: a pointer it holds is valid after the restart only if
//!   the application makes it so (its heap is its own checkpoint's business; a static's address
//!   moves with ASLR). MPI copies and frees nothing at a checkpoint or a restore: no callback runs.
//! - inactive persistent point-to-point requests (`MPI_Send_init`... `MPI_Recv_init`): the
//!   request table's shape and each one's recipe at its slot ([`requests`]); `MPI_Start` on the
//!   handle kept works after the restart. Its buffer address is the application's word, like an
//!   attribute value: the application puts its buffer back at that address.
//! - inactive persistent collectives (every `MPI_*_init` collective): the record of their
//!   arguments (`crate::coll::entry::Args`) at its slot, rebuilt into a request under the same
//!   handle; its tags follow the communicator's saved collective count, in step with the
//!   survivors'.
//!
//! - inactive partitioned requests (`MPI_Psend_init`, `MPI_Precv_init`: [`requests`]), with the
//!   sender's setup once started, and the id the next partitioned send takes.
//!
//! **Refused at a checkpoint** (`MPI_ERR_PENDING`, with or without fault tolerance:
//! [`outstanding`]): every request that is not an inactive persistent one — active, complete
//! and not yet waited for, or a generalized request (`MPI_Grequest_start`) not yet completed and
//! freed: its operation is the program's, which the checkpoint does not hold — and a buffered
//! send whose message has not left (its receive not matched; the completed ones are reclaimed
//! first), and a window with an epoch open other than a fence epoch no operation used since its
//! fence, or with remote operations or requests under way ([`windows::outstanding`]). The
//! Endpoint refuses its own operations still under way, as before.
//!
//! - windows (issue 34, [`windows`]): the window table's shape, window keyvals, and per window
//!   its private communicator, targets, hints, name, attributes, handler, an open fence epoch,
//!   regions, and the bytes of this rank's part of `MPI_Win_allocate`/`_shared` memory, mapped
//!   back at the same address by a restore that sends nothing. A window with any other epoch
//!   open refuses the checkpoint ([`outstanding`]).
//!
//! **Not saved:** the `MPI_T` tools interface's sessions and handles (a tool's state, not the
//! program's), and files (not implemented by this library).
//!
//! **Invariants.** Nothing is changed by a restore refused for a reason the program can cause
//! (objects made before it, a module gone or rebuilt): the image is read whole, every function
//! resolved and every table checked fresh first. An image of another version is refused with a message naming both.

use std::ffi::c_int;
use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};

mod process;
mod requests;
pub mod windows;

use super::code::{self, CodeRef};
use super::types;
use super::wire::{Bad, Reader, Writer};
use crate::abi;
use crate::attr::{CopyFn, DeleteFn, Keyval};
use crate::comm::Comm;
use crate::errh::{ErrFn, Fun, Kind, UserErrh};
use crate::handle::Table;
use crate::op::{UserFunc, UserOp};
use crate::state::State;
use crate::topo::Topo;

/// The image's magic bytes.
const MAGIC: &[u8; 8] = b"NEMMPI\0\0";
/// The image's version.
const VERSION: u32 = 5;

/// A table's shape ([`Table::layout`]).
type Layout = (usize, usize, Vec<u32>);

/// A table read back: its shape and its objects by index.
type Saved<T> = (Layout, Vec<(usize, T)>);

fn put_layout(w: &mut Writer, (slots, permanent, free): &Layout) {
    w.len(*slots);
    w.len(*permanent);
    w.u32s(free);
}

fn get_layout(r: &mut Reader) -> Result<Layout, Bad> {
    Ok((r.u64()? as usize, r.u64()? as usize, r.u32s()?))
}

/// Saves table `t`: its shape, then each live object with `put` (index first).
fn put_table<T>(w: &mut Writer, t: &Table<T>, mut put: impl FnMut(&mut Writer, &T)) {
    let layout = t.layout();
    put_layout(w, &layout);
    let live: Vec<(usize, &T)> = (layout.1..layout.0).filter_map(|i| t.at(i).map(|v| (i, v))).collect();
    w.len(live.len());
    for (i, v) in live {
        w.len(i);
        put(w, v);
    }
}

/// Reads a table [`put_table`] saved.
fn get_table<T>(r: &mut Reader, mut get: impl FnMut(&mut Reader) -> Result<T, Bad>) -> Result<Saved<T>, Bad> {
    let layout = get_layout(r)?;
    let n = r.len(9)?;
    let objects = (0..n).map(|_| Ok((r.u64()? as usize, get(r)?))).collect::<Result<_, Bad>>()?;
    Ok((layout, objects))
}

/// A communicator as saved.
struct SavedComm {
    world: Vec<u32>,
    ctx: u32,
    send_ctx: u32,
    errh: abi::Errhandler,
    name: String,
    nbc: u32,
    topo: Option<Topo>,
    attrs: Vec<(c_int, usize)>,
    session: Option<c_int>,
    local: Option<Box<SavedComm>>,
}

fn put_attrs(w: &mut Writer, attrs: &[(c_int, usize)]) {
    w.len(attrs.len());
    for &(k, v) in attrs {
        w.i32(k);
        w.u64(v as u64);
    }
}

fn get_attrs(r: &mut Reader) -> Result<Vec<(c_int, usize)>, Bad> {
    let n = r.len(12)?;
    (0..n).map(|_| Ok((r.i32()?, r.u64()? as usize))).collect()
}

fn put_topo(w: &mut Writer, t: Option<&Topo>) {
    match t {
        None => w.u8(0),
        Some(Topo::Cart { dims, periods }) => {
            w.u8(1);
            w.i32s(dims);
            w.len(periods.len());
            periods.iter().for_each(|&p| w.bool(p));
        }
        Some(Topo::Graph { index, edges }) => {
            w.u8(2);
            w.i32s(index);
            w.i32s(edges);
        }
        Some(Topo::DistGraph { sources, destinations, weights }) => {
            w.u8(3);
            w.i32s(sources);
            w.i32s(destinations);
            w.bool(weights.is_some());
            if let Some((a, b)) = weights {
                w.i32s(a);
                w.i32s(b);
            }
        }
    }
}

fn get_topo(r: &mut Reader) -> Result<Option<Topo>, Bad> {
    Ok(match r.u8()? {
        0 => None,
        1 => {
            let dims = r.i32s()?;
            let n = r.len(1)?;
            let periods = (0..n).map(|_| r.bool()).collect::<Result<_, Bad>>()?;
            Some(Topo::Cart { dims, periods })
        }
        2 => Some(Topo::Graph { index: r.i32s()?, edges: r.i32s()? }),
        3 => {
            let (sources, destinations) = (r.i32s()?, r.i32s()?);
            let weights = if r.bool()? { Some((r.i32s()?, r.i32s()?)) } else { None };
            Some(Topo::DistGraph { sources, destinations, weights })
        }
        k => return Err(format!("topology kind {k}")),
    })
}

fn put_comm(w: &mut Writer, c: &Comm) {
    w.u32s(&c.world);
    w.u32(c.ctx);
    w.u32(c.send_ctx);
    w.i32(c.errh);
    w.str(&c.name);
    // ORDERING: Relaxed: this process's own counter, read with no collective under way (none is
    // outstanding at a checkpoint).
    w.u32(c.nbc.load(Ordering::Relaxed));
    put_topo(w, c.topo.as_deref());
    put_attrs(w, &c.attrs);
    w.bool(c.session.is_some());
    w.i32(c.session.unwrap_or(0));
    w.bool(c.local.is_some());
    if let Some(l) = &c.local {
        put_comm(w, l);
    }
}

fn get_comm(r: &mut Reader, depth: usize) -> Result<SavedComm, Bad> {
    let (world, ctx, send_ctx, errh, name, nbc) = (r.u32s()?, r.u32()?, r.u32()?, r.i32()?, r.string()?, r.u32()?);
    let (topo, attrs) = (get_topo(r)?, get_attrs(r)?);
    let session = if r.bool()? { Some(r.i32()?) } else { r.i32().map(|_| None)? };
    let local = match r.bool()? {
        true if depth == 0 => Some(Box::new(get_comm(r, 1)?)),
        true => return Err("an intercommunicator's local group that is one too".into()),
        false => None,
    };
    Ok(SavedComm { world, ctx, send_ctx, errh, name, nbc, topo, attrs, session, local })
}

/// The function of a user operation or error handler, and which C type it has.
fn put_code(w: &mut Writer, kind: u8, addr: usize, what: &str) -> Result<(), String> {
    let r = code::locate(addr).map_err(|e| format!("{what}: {e}"))?;
    w.u8(kind);
    r.put(w);
    Ok(())
}

/// Saves keyval `k`: its callbacks as code references, `extra_state`, marks.
fn put_keyval(w: &mut Writer, k: &Keyval) -> Result<(), String> {
    let mut failed = Ok(());
    for (f, what) in
        [(k.copy.map(|f| f as usize), "a copy callback"), (k.delete.map(|f| f as usize), "a delete callback")]
    {
        w.bool(f.is_some());
        if let Some(f) = f {
            let r = put_code(w, 0, f, what);
            failed = failed.and(r);
        }
    }
    w.u64(k.extra as u64);
    w.bool(k.freed);
    w.bool(k.types);
    failed
}

/// Reads a keyval [`put_keyval`] saved, its callbacks resolved in this process.
fn get_keyval(r: &mut Reader) -> Result<Keyval, Bad> {
    let copy = if r.bool()? {
        let (_, addr) = get_code(r, "an attribute copy callback")?;
        // SAFETY: `addr` is, in this process, the function saved (`code::resolve`), a copy
        // callback then.
        Some(unsafe { std::mem::transmute::<usize, CopyFn>(addr) })
    } else {
        None
    };
    let delete = if r.bool()? {
        let (_, addr) = get_code(r, "an attribute delete callback")?;
        // SAFETY: as above, a delete callback.
        Some(unsafe { std::mem::transmute::<usize, DeleteFn>(addr) })
    } else {
        None
    };
    Ok(Keyval { copy, delete, extra: r.u64()? as usize, freed: r.bool()?, types: r.bool()? })
}

/// Why `MPIX_Checkpoint` is refused (`MPI_ERR_PENDING`), if it is: a request of the program's
/// outstanding ([`requests::outstanding`]; with or without fault tolerance, as the Endpoint's
/// own check), a buffered send's message not yet gone (its receiver has not matched it), a
/// window with an epoch open or remote work under way ([`windows::outstanding`]).
pub fn outstanding(st: &mut State) -> Option<String> {
    windows::settle(st);
    if let Some(w) = crate::p2p::bsend::in_flight(st) {
        return Some(format!(
            "a buffered send from the attached buffer ({w:?}) has not left yet (its receive not matched): \
             no message may be in flight at MPIX_Checkpoint"
        ));
    }
    requests::outstanding(&st.reqs).or_else(|| windows::outstanding(st))
}

/// The image of `st`'s objects (module documentation); `Err` names the object that cannot be
/// saved and why.
pub fn save(st: &mut State) -> Result<Vec<u8>, String> {
    crate::comm::reclaim(st);
    let mut w = Writer::default();
    w.0.extend_from_slice(MAGIC);
    w.u32(VERSION);
    let free = st.contexts.saved().ok_or("a communicator creation is under way")?;
    w.len(free.len());
    free.iter().for_each(|&x| w.u64(x));
    put_table(&mut w, &st.groups, |w, g| w.u32s(g));
    put_table(&mut w, &st.infos, |w, info| {
        w.len(info.len());
        for (k, v) in info {
            w.str(k);
            w.str(v);
        }
    });
    put_table(&mut w, &st.types, types::put_entry);
    w.len(st.type_names.len());
    for (h, n) in &st.type_names {
        w.i32(*h);
        w.str(n);
    }
    let mut failed = None;
    put_table(&mut w, &st.ops, |w, o| {
        let (kind, addr) = match o.f {
            UserFunc::Int(f) => (0, f as usize),
            UserFunc::Large(f) => (1, f as usize),
        };
        let r = put_code(w, kind, addr, "a user operation");
        w.bool(o.commute);
        w.bool(o.freed);
        failed = failed.take().or(r.err());
    });
    put_table(&mut w, st.errhs.objects(), |w, e| {
        let (kind, addr) = match e.f {
            Fun::Int(f) => (0, f as usize),
            Fun::File(f) => (1, f as usize),
        };
        let r = put_code(w, kind, addr, "an error handler");
        w.u8(match e.kind {
            Kind::Comm => 0,
            Kind::File => 1,
            Kind::Win => 2,
            Kind::Session => 3,
        });
        w.u32(e.handles);
        failed = failed.take().or(r.err());
    });
    w.i32(st.errhs.file_default);
    put_table(&mut w, &st.keyvals, |w, k| {
        let r = put_keyval(w, k);
        failed = failed.take().or(r.err());
    });
    w.len(st.type_attrs.len());
    for &(t, k, v) in &st.type_attrs {
        w.i32(t);
        w.i32(k);
        w.u64(v as u64);
    }
    if let Some(e) = failed {
        return Err(e);
    }
    // Communicators: every slot, live ones saved (a freed one still retired counts as free).
    w.len(st.comms.len());
    for c in st.comms.iter() {
        w.bool(c.live);
        if c.live {
            put_comm(&mut w, c);
        }
    }
    w.u32s(&st.comm_slots.iter().map(|&i| i as u32).collect::<Vec<_>>());
    requests::put(&mut w, &st.reqs);
    process::put(&mut w, st);
    windows::put(&mut w, st)?;
    Ok(w.0)
}

/// An image read and checked, not yet applied.
struct Image {
    free: Vec<u64>,
    groups: Saved<Arc<[u32]>>,
    infos: Saved<crate::info::InfoObj>,
    types: Saved<crate::datatype::Entry>,
    type_names: Vec<(abi::Datatype, String)>,
    ops: Saved<UserOp>,
    errhs: Saved<UserErrh>,
    file_default: abi::Errhandler,
    keyvals: Saved<Keyval>,
    type_attrs: Vec<(abi::Datatype, c_int, usize)>,
    comms: Vec<Option<SavedComm>>,
    comm_free: Vec<u32>,
    reqs: requests::SavedRequests,
    process: process::Process,
    wins: windows::SavedWins,
}

/// The address of a saved function in this process.
fn get_code(r: &mut Reader, what: &str) -> Result<(u8, usize), Bad> {
    let kind = r.u8()?;
    let c = CodeRef::get(r)?;
    let addr = code::resolve(&c).map_err(|e| format!("{what}: {e}"))?;
    Ok((kind, addr))
}

fn read(b: &[u8]) -> Result<Image, Bad> {
    if b.get(..8) != Some(&MAGIC[..]) {
        return Err("not an MPI state image".into());
    }
    let mut r = Reader::new(&b[8..]);
    let v = r.u32()?;
    if v != VERSION {
        return Err(format!("MPI state image version {v}, this library reads {VERSION}"));
    }
    let n = r.len(8)?;
    let free = (0..n).map(|_| r.u64()).collect::<Result<_, Bad>>()?;
    let groups = get_table(&mut r, |r| Ok(Arc::from(r.u32s()?)))?;
    let infos = get_table(&mut r, |r| {
        let n = r.len(16)?;
        (0..n).map(|_| Ok((r.string()?, r.string()?))).collect()
    })?;
    let types = get_table(&mut r, types::get_entry)?;
    let n = r.len(12)?;
    let type_names = (0..n).map(|_| Ok((r.i32()?, r.string()?))).collect::<Result<_, Bad>>()?;
    let ops = get_table(&mut r, |r| {
        let (kind, addr) = get_code(r, "a user operation")?;
        // SAFETY: `addr` is, in this process, the function saved (its module's code there is
        // the same bytes, `code::resolve`), which had this C type (`kind`).
        let f = unsafe {
            match kind {
                0 => UserFunc::Int(std::mem::transmute::<usize, crate::op::UserFn>(addr)),
                _ => UserFunc::Large(std::mem::transmute::<usize, abi::UserFnC>(addr)),
            }
        };
        Ok(UserOp { f, commute: r.bool()?, holds: 0, freed: r.bool()? })
    })?;
    let errhs = get_table(&mut r, |r| {
        let (kind, addr) = get_code(r, "an error handler")?;
        // SAFETY: as for the operations above.
        let f = unsafe {
            match kind {
                0 => Fun::Int(std::mem::transmute::<usize, ErrFn>(addr)),
                _ => Fun::File(std::mem::transmute::<usize, abi::FileErrFn>(addr)),
            }
        };
        let kind = match r.u8()? {
            0 => Kind::Comm,
            1 => Kind::File,
            2 => Kind::Win,
            _ => Kind::Session,
        };
        Ok(UserErrh { f, kind, handles: r.u32()? })
    })?;
    let file_default = r.i32()?;
    let keyvals = get_table(&mut r, get_keyval)?;
    let n = r.len(16)?;
    let type_attrs = (0..n).map(|_| Ok((r.i32()?, r.i32()?, r.u64()? as usize))).collect::<Result<_, Bad>>()?;
    let n = r.len(1)?;
    let comms =
        (0..n).map(|_| if r.bool()? { get_comm(&mut r, 0).map(Some) } else { Ok(None) }).collect::<Result<_, Bad>>()?;
    let comm_free = r.u32s()?;
    let reqs = requests::get(&mut r)?;
    let process = process::get(&mut r)?;
    let wins = windows::get(&mut r)?;
    if !r.done() {
        return Err("bytes after the image".into());
    }
    Ok(Image {
        free,
        groups,
        infos,
        types,
        type_names,
        ops,
        errhs,
        file_default,
        keyvals,
        type_attrs,
        comms,
        comm_free,
        reqs,
        process,
        wins,
    })
}

/// A communicator of this process from its saved form.
fn build(st: &State, s: SavedComm) -> Comm {
    let (me, size) = st.ep.as_ref().map_or((0, 1), |e| (e.rank(), e.size()));
    let mut c = match s.local {
        Some(l) => {
            let local = build(st, *l);
            Comm::inter(local, s.world, s.ctx, s.send_ctx, size, &st.node_of_job)
        }
        None => Comm::new(s.world, me, size, s.ctx, s.errh, &st.node_of_job),
    };
    c.send_ctx = s.send_ctx;
    c.errh = s.errh;
    c.name = s.name;
    c.nbc = Arc::new(AtomicU32::new(s.nbc));
    c.topo = s.topo.map(Arc::new);
    c.attrs = s.attrs;
    c.session = s.session;
    c
}

/// Puts back the objects of image `b` into `st`, which holds only `MPI_Init`'s (module
/// documentation). `Err`: why not; nothing changed then.
pub fn restore(st: &mut State, b: &[u8]) -> Result<(), String> {
    let mut im = read(b)?;
    let fresh = st.comms.len() == 2
        && st.groups.is_empty()
        && st.infos.is_empty()
        && st.types.is_empty()
        && st.ops.is_empty()
        && st.errhs.objects().is_empty()
        && st.keyvals.is_empty()
        && st.type_attrs.is_empty()
        && st.reqs.iter().next().is_none()
        && st.comms.iter().all(|c| c.attrs.is_empty())
        && process::fresh(st)
        && st.wins.table.is_empty()
        && st.wins.keyvals.is_empty();
    if !fresh {
        return Err("the program made MPI objects before MPIX_Checkpoint_restore: restore first".into());
    }
    let (me, size) = st.ep.as_ref().map_or((0, 1), |e| (e.rank(), e.size()));
    // Check what would fail before changing anything.
    for c in im.comms.iter().flatten() {
        let members = c.local.as_ref().map_or(&c.world, |l| &l.world);
        if c.world.iter().any(|&w| w >= size) || !members.contains(&me) {
            return Err(format!("a communicator whose members {members:?} are not of this job's rank {me}"));
        }
    }
    if im.comms.len() < 2 || im.comms[0].is_none() || im.comms[1].is_none() {
        return Err("no MPI_COMM_WORLD or MPI_COMM_SELF".into());
    }
    let live = |i: usize| im.comms.get(i).is_some_and(Option::is_some);
    im.reqs.check(live)?;
    im.process.check(live)?;
    im.wins.check(me, size)?;
    im.wins.map()?;
    im.reqs.apply(&mut st.reqs)?;
    if !st.contexts.restore(&im.free) {
        return Err(format!("a context mask of {} words", im.free.len()));
    }
    let (gl, g) = im.groups;
    st.groups.restore((gl.0, gl.1, &gl.2), g)?;
    let (il, i) = im.infos;
    st.infos.restore((il.0, il.1, &il.2), i)?;
    let (tl, t) = im.types;
    st.types.restore((tl.0, tl.1, &tl.2), t)?;
    st.type_names = im.type_names.into_iter().collect();
    let (ol, o) = im.ops;
    st.ops.restore((ol.0, ol.1, &ol.2), o)?;
    let (el, e) = im.errhs;
    st.errhs.objects_mut().restore((el.0, el.1, &el.2), e)?;
    st.errhs.file_default = im.file_default;
    let (kl, k) = im.keyvals;
    st.keyvals.restore((kl.0, kl.1, &kl.2), k)?;
    st.type_attrs = im.type_attrs;
    im.process.apply_sessions(st)?;
    let freed = unfree(st);
    crate::coll::entry::rehold(st);
    refree(st, freed);
    for (i, saved) in im.comms.into_iter().enumerate() {
        match saved {
            Some(s) if i < 2 => {
                let c = Arc::make_mut(&mut st.comms[i]);
                (c.errh, c.name, c.attrs) = (s.errh, s.name, s.attrs);
                c.nbc = Arc::new(AtomicU32::new(s.nbc));
            }
            Some(s) => {
                let c = Arc::new(build(st, s));
                st.comms.push(c);
            }
            None => st.comms.push(Arc::new(tombstone())),
        }
    }
    // Slots freed before the checkpoint, then any other free one (a retired one then).
    let n = st.comms.len();
    let mut slots: Vec<usize> = im.comm_free.iter().map(|&i| i as usize).filter(|&i| i >= 2 && i < n).collect();
    let others: Vec<usize> = (2..n).filter(|&i| !st.comms[i].live && !slots.contains(&i)).collect();
    slots.extend(others);
    st.comm_slots = slots;
    for i in 0..n {
        st.refresh_fast(i);
    }
    im.process.apply(st);
    im.wins.apply(st)
}

/// The datatypes and operations freed while held (their marks taken off, so that `rehold`
/// holds them again as their holders did).
fn unfree(st: &mut State) -> (Vec<abi::Datatype>, Vec<abi::Op>) {
    let types: Vec<_> = st.types.iter().filter(|(_, e)| e.freed).map(|(h, _)| h).collect();
    let ops: Vec<_> = st.ops.iter().filter(|(_, o)| o.freed).map(|(h, _)| h).collect();
    for &h in &types {
        if let Some(e) = st.types.get_mut(h) {
            e.freed = false;
        }
    }
    for &h in &ops {
        if let Some(o) = st.ops.get_mut(h) {
            o.freed = false;
        }
    }
    (types, ops)
}

/// Puts back the marks [`unfree`] took off; one nothing holds any more goes, as at its last
/// release.
fn refree(st: &mut State, (types, ops): (Vec<abi::Datatype>, Vec<abi::Op>)) {
    for h in types {
        match st.types.get_mut(h) {
            Some(e) if e.holds > 0 => e.freed = true,
            _ => drop(st.types.remove(h)),
        }
    }
    for h in ops {
        match st.ops.get_mut(h) {
            Some(o) if o.holds > 0 => o.freed = true,
            _ => {
                st.ops.remove(h);
            }
        }
    }
}

/// A free communicator slot's content.
fn tombstone() -> Comm {
    let mut c = Comm::new(Vec::new(), 0, 0, 0, abi::ERRORS_ARE_FATAL, &[]);
    (c.live, c.identity) = (false, false);
    c
}
