//! Inactive persistent and partitioned requests in the MPI state image (`super`): the request
//! table's shape (each slot's generation, the free slots in order) and, at its slot, every
//! request `MPI_Send_init`, `MPI_Bsend_init`, `MPI_Ssend_init`, `MPI_Rsend_init` or
//! `MPI_Recv_init` made — its recipe as resolved then ([`Persistent`]: send mode, buffer, peer as
//! a job rank, tag, the communicator's context) and its communicator's slot. After the restore
//! the same handle names it and `MPI_Start` sends or receives what it did before the checkpoint,
//! matching the survivors' messages (same job ranks, tag and context).
//!
//! **The buffer is the application's word.** Its address (and, for a non-contiguous datatype,
//! the descriptor, saved whole by [`super::types`]) is saved as it is: the request names the same
//! bytes after the restart only if the application puts its buffer back at that address (its
//! memory is its own checkpoint's business, as for attribute values; a static's or the stack's
//! address moves with ASLR).
//!
//! Inactive persistent collectives (every `MPI_*_init` collective) are saved as the record of
//! their arguments (`crate::coll::entry::Args`: buffers as the application's words, like the
//! point-to-point ones; count, displacement and datatype arrays as copied at init) and their
//! collective context, and rebuilt at their slot; their handles are held again once the
//! datatypes and operations are back (`crate::coll::entry::rehold`).
//!
//! Inactive partitioned requests (`MPI_Psend_init`, `MPI_Precv_init`) are saved as what their
//! init resolved (`crate::p2p::partitioned::Saved`: peer, tag, context, partitions, buffer) and
//! the sender's setup once the first `MPI_Start` sent it (so neither side sends or waits for it
//! again); with them, the id the next partitioned send of the process takes.
//!
//! **Not saved:** any other request, which [`outstanding`] makes `MPIX_Checkpoint` refuse.
//!
//! **Invariants.** A request is restored only onto a communicator slot the image restores live;
//! the table is read whole and checked before anything changes.

use super::super::types::{get_desc, put_desc};
use super::super::wire::{Bad, Reader, Writer};
use crate::abi::{Count, Datatype};
use crate::coll::entry::{Args, Reduction, Side, WSide, restored};
use crate::coll::nbc::Shape;
use crate::datatype::Layout;
use crate::p2p::partitioned::{self, Part};
use crate::request::{Ext, Mode, Persistent, Req, Requests, State};

/// True for a request this module saves: an inactive persistent one, partitioned or not.
pub fn saved(r: &Req) -> bool {
    matches!(r.state, State::Inactive) && !r.freed && (r.ext.is_none() && r.persistent.is_some() || part(r).is_some())
}

/// What is saved of `r` if it is an inactive partitioned request.
fn part(r: &Req) -> Option<partitioned::Saved> {
    match r.ext.as_deref() {
        Some(Ext::Part(p)) => p.saved(),
        _ => None,
    }
}

/// Why `MPIX_Checkpoint` is refused with `t`'s requests, if it is: a request of the program's
/// that is not an inactive persistent one (active, complete and not yet waited for or tested,
/// a generalized request not completed and freed). A freed request still under way is the
/// Endpoint's to count (its operation is), save a generalized one, which only the program can
/// complete.
pub fn outstanding(t: &Requests) -> Option<String> {
    let (h, r) = t.iter().find(|(_, r)| !saved(r) && (!r.freed || matches!(r.ext.as_deref(), Some(Ext::Greq(_)))))?;
    let what = match (&r.state, r.ext.as_deref()) {
        (_, Some(Ext::Greq(_))) => {
            "a generalized request (MPI_Grequest_start): MPI_Grequest_complete it and complete it (MPI_Wait, \
             MPI_Test) first"
        }
        (State::Done(_), _) => "a request complete but not yet waited for or tested",
        (_, Some(Ext::Part(_))) => "an active partitioned request",
        _ if r.is_persistent() => "an active persistent request",
        _ => "a request not complete",
    };
    Some(format!("{what} ({h:#x}) is outstanding: no request may be at MPIX_Checkpoint"))
}

fn put_layout(w: &mut Writer, d: &Layout) {
    match d {
        Layout::Contig { ptr, len } => {
            w.u8(0);
            w.u64(*ptr as u64);
            w.len(*len);
        }
        Layout::Typed { base, count, desc } => {
            w.u8(1);
            w.u64(*base as u64);
            w.len(*count);
            put_desc(w, desc);
        }
    }
}

fn get_layout(r: &mut Reader) -> Result<Layout, Bad> {
    Ok(match r.u8()? {
        0 => Layout::Contig { ptr: r.u64()? as usize as *mut u8, len: r.u64()? as usize },
        1 => {
            let (base, count) = (r.u64()? as usize as *mut u8, r.u64()? as usize);
            Layout::Typed { base, count, desc: get_desc(r, 0)? }
        }
        k => return Err(format!("buffer kind {k}")),
    })
}

/// The kind byte of a persistent collective (after the send modes).
const COLL: u8 = 5;
/// The kind byte of a partitioned request.
const PART: u8 = 6;

/// A persistent collective's (unused) data.
const NO_DATA: Layout = Layout::Contig { ptr: std::ptr::null_mut(), len: 0 };

fn shape_code(s: Shape) -> u8 {
    match s {
        Shape::Gather => 0,
        Shape::Scatter => 1,
        Shape::Allgather => 2,
        Shape::Alltoall => 3,
    }
}

fn shape_of(k: u8) -> Result<Shape, Bad> {
    Ok(match k {
        0 => Shape::Gather,
        1 => Shape::Scatter,
        2 => Shape::Allgather,
        3 => Shape::Alltoall,
        k => return Err(format!("block collective shape {k}")),
    })
}

/// A buffer's address, count and datatype.
fn put_side(w: &mut Writer, buf: usize, count: Count, dt: Datatype) {
    w.u64(buf as u64);
    w.u64(count as u64);
    w.i32(dt);
}

fn get_side(r: &mut Reader) -> Result<(usize, Count, Datatype), Bad> {
    Ok((r.u64()? as usize, r.u64()? as Count, r.i32()?))
}

fn put_args(w: &mut Writer, a: &Args) {
    w.i32(a.comm());
    match *a {
        Args::Barrier { .. } => w.u8(0),
        Args::Bcast { buffer, count, datatype, root, .. } => {
            w.u8(1);
            put_side(w, buffer, count, datatype);
            w.i32(root);
        }
        Args::Reduction { ref kind, sendbuf, recvbuf, count, datatype, op, .. } => {
            w.u8(2);
            let (k, arg) = match *kind {
                Reduction::All => (0, 0),
                Reduction::Root(root) => (1, root),
                Reduction::ScatterBlock => (2, 0),
                Reduction::Scan(exclusive) => (3, exclusive as i32),
                Reduction::Scatter(_) => (4, 0),
            };
            w.u8(k);
            w.i32(arg);
            if let Reduction::Scatter(counts) = kind {
                put_ints(w, counts);
            }
            put_side(w, sendbuf, count, datatype);
            w.u64(recvbuf as u64);
            w.i32(op);
        }
        Args::Blocks { shape, neighbour, sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, root, .. } => {
            w.u8(3);
            w.u8(shape_code(shape));
            w.bool(neighbour);
            put_side(w, sendbuf, sendcount, sendtype);
            put_side(w, recvbuf, recvcount, recvtype);
            put_root(w, root);
        }
        Args::Vector { shape, neighbour, ref send, ref recv, root, .. } => {
            w.u8(4);
            w.u8(shape_code(shape));
            w.bool(neighbour);
            for s in [send, recv] {
                put_side(w, s.buf, s.count, s.datatype);
                put_ints(w, &s.counts);
                put_ints(w, &s.displs);
            }
            put_root(w, root);
        }
        Args::W { neighbour, ref send, ref recv, .. } => {
            w.u8(5);
            w.bool(neighbour);
            for s in [send, recv] {
                w.u64(s.buf as u64);
                put_ints(w, &s.counts);
                w.bool(s.displs.is_some());
                w.i64s(s.displs.as_deref().unwrap_or_default().iter().copied());
                put_ints(w, &s.types);
            }
        }
    }
}

fn put_root(w: &mut Writer, root: Option<i32>) {
    w.bool(root.is_some());
    w.i32(root.unwrap_or(0));
}

fn get_root(r: &mut Reader) -> Result<Option<i32>, Bad> {
    Ok(if r.bool()? { Some(r.i32()?) } else { r.i32().map(|_| None)? })
}

/// A count or displacement array as copied at init (`None`: not given).
fn put_ints(w: &mut Writer, v: &Option<Vec<i32>>) {
    w.bool(v.is_some());
    w.i32s(v.as_deref().unwrap_or(&[]));
}

fn get_ints(r: &mut Reader) -> Result<Option<Vec<i32>>, Bad> {
    let given = r.bool()?;
    let v = r.i32s()?;
    Ok(given.then_some(v))
}

fn get_args(r: &mut Reader) -> Result<Args, Bad> {
    let (comm, kind) = (r.i32()?, r.u8()?);
    Ok(match kind {
        0 => Args::Barrier { comm },
        1 => {
            let (buffer, count, datatype) = get_side(r)?;
            Args::Bcast { buffer, count, datatype, root: r.i32()?, comm }
        }
        2 => {
            let kind = match (r.u8()?, r.i32()?) {
                (0, _) => Reduction::All,
                (1, root) => Reduction::Root(root),
                (2, _) => Reduction::ScatterBlock,
                (3, exclusive) => Reduction::Scan(exclusive != 0),
                (4, _) => Reduction::Scatter(get_ints(r)?),
                (k, _) => return Err(format!("reduction kind {k}")),
            };
            let (sendbuf, count, datatype) = get_side(r)?;
            Args::Reduction { kind, sendbuf, recvbuf: r.u64()? as usize, count, datatype, op: r.i32()?, comm }
        }
        3 => {
            let (shape, neighbour) = (shape_of(r.u8()?)?, r.bool()?);
            let ((sendbuf, sendcount, sendtype), (recvbuf, recvcount, recvtype)) = (get_side(r)?, get_side(r)?);
            let root = get_root(r)?;
            Args::Blocks { shape, neighbour, sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, root, comm }
        }
        4 => {
            let (shape, neighbour) = (shape_of(r.u8()?)?, r.bool()?);
            let mut side = || -> Result<Side, Bad> {
                let (buf, count, datatype) = get_side(r)?;
                Ok(Side { buf, count, counts: get_ints(r)?, displs: get_ints(r)?, datatype })
            };
            let (send, recv) = (side()?, side()?);
            Args::Vector { shape, neighbour, send, recv, root: get_root(r)?, comm }
        }
        5 => {
            let neighbour = r.bool()?;
            let mut side = || -> Result<WSide, Bad> {
                let (buf, counts) = (r.u64()? as usize, get_ints(r)?);
                let given = r.bool()?;
                let displs = r.i64s()?;
                Ok(WSide { buf, counts, displs: given.then_some(displs), types: get_ints(r)? })
            };
            let (send, recv) = (side()?, side()?);
            Args::W { neighbour, send, recv, comm }
        }
        k => return Err(format!("persistent collective kind {k}")),
    })
}

fn mode_code(m: Option<Mode>) -> u8 {
    match m {
        None => 0,
        Some(Mode::Standard) => 1,
        Some(Mode::Synchronous) => 2,
        Some(Mode::Buffered) => 3,
        Some(Mode::Ready) => 4,
    }
}

fn mode_of(k: u8) -> Result<Option<Mode>, Bad> {
    Ok(match k {
        0 => None,
        1 => Some(Mode::Standard),
        2 => Some(Mode::Synchronous),
        3 => Some(Mode::Buffered),
        4 => Some(Mode::Ready),
        k => return Err(format!("send mode {k}")),
    })
}

/// Saves table `t`: its shape, then each request [`saved`] selects at its slot.
pub fn put(w: &mut Writer, t: &Requests) {
    let (generations, free) = t.shape();
    w.bytes(&generations);
    w.u32s(&free);
    let live: Vec<(usize, &Req, &Persistent)> = t
        .iter()
        .filter(|(_, r)| saved(r))
        .filter_map(|(h, r)| Some((t.index(h)?, r, r.persistent.as_deref()?)))
        .collect();
    let parts: Vec<(usize, &Req, partitioned::Saved)> =
        t.iter().filter_map(|(h, r)| Some((t.index(h)?, r, part(r).filter(|_| saved(r))?))).collect();
    w.len(live.len() + parts.len());
    for (i, r, p) in parts {
        w.len(i);
        w.u32(r.comm);
        w.u8(PART);
        put_part(w, &p);
    }
    for (i, r, p) in live {
        w.len(i);
        w.u32(r.comm);
        if let Some(a) = p.coll.as_deref().map(|c| c.args()) {
            w.u8(COLL);
            put_args(w, a);
            w.u32(p.ctx);
            continue;
        }
        w.u8(mode_code(p.send));
        put_layout(w, &p.data);
        w.bool(p.peer.is_some());
        w.i32(p.peer.unwrap_or(0));
        w.i32(p.tag);
        w.u32(p.ctx);
    }
    w.u32(partitioned::next_id());
}

fn put_part(w: &mut Writer, p: &partitioned::Saved) {
    w.bool(p.send);
    w.bool(p.peer.is_some());
    w.i32(p.peer.unwrap_or(0));
    w.i32(p.rank);
    w.i32(p.tag);
    w.u32(p.ctx);
    w.len(p.partitions);
    w.len(p.bytes);
    put_layout(w, &p.data);
    w.bool(p.setup.is_some());
    let (n, b, id) = p.setup.unwrap_or_default();
    w.len(n);
    w.len(b);
    w.u32(id);
    w.bool(p.introduced);
}

fn get_part(r: &mut Reader) -> Result<partitioned::Saved, Bad> {
    let send = r.bool()?;
    let peer = if r.bool()? { Some(r.i32()?) } else { r.i32().map(|_| None)? };
    let (rank, tag, ctx, partitions, bytes) = (r.i32()?, r.i32()?, r.u32()?, r.u64()? as usize, r.u64()? as usize);
    let data = get_layout(r)?;
    let given = r.bool()?;
    let setup = (r.u64()? as usize, r.u64()? as usize, r.u32()?);
    let introduced = r.bool()?;
    if partitions.checked_mul(bytes) != Some(data.len()) {
        return Err(format!("a partitioned request of {partitions} × {bytes} bytes over {} bytes", data.len()));
    }
    let setup = given.then_some(setup);
    Ok(partitioned::Saved { send, peer, rank, tag, ctx, partitions, bytes, data, setup, introduced })
}

/// A request table as read back, not yet applied.
pub struct SavedRequests {
    generations: Vec<u8>,
    free: Vec<u32>,
    live: Vec<(usize, Req)>,
    /// The id of the next partitioned send (`partitioned::next_id`).
    next_part: u32,
}

/// Reads what [`put`] saved.
pub fn get(r: &mut Reader) -> Result<SavedRequests, Bad> {
    let generations = r.bytes()?.to_vec();
    let free = r.u32s()?;
    let n = r.len(24)?;
    let live = (0..n)
        .map(|_| {
            let (i, comm, kind) = (r.u64()? as usize, r.u32()?, r.u8()?);
            if kind == PART {
                let p = get_part(r)?;
                let recv = !p.send;
                let ext = Some(Box::new(Ext::Part(Box::new(Part::restored(p)))));
                return Ok((i, Req { ext, ..Req::new(comm as usize, State::Inactive, recv) }));
            }
            if kind == COLL {
                let (args, ctx) = (get_args(r)?, r.u32()?);
                let p = Persistent { send: None, data: NO_DATA, peer: None, tag: 0, ctx, coll: Some(restored(args)) };
                let req = Req {
                    persistent: Some(Box::new(p)),
                    coll: true,
                    ..Req::new(comm as usize, State::Inactive, false)
                };
                return Ok((i, req));
            }
            let send = mode_of(kind)?;
            let data = get_layout(r)?;
            let peer = if r.bool()? { Some(r.i32()?) } else { r.i32().map(|_| None)? };
            let (tag, ctx) = (r.i32()?, r.u32()?);
            let p = Persistent { send, data, peer, tag, ctx, coll: None };
            let req = Req { persistent: Some(Box::new(p)), ..Req::new(comm as usize, State::Inactive, send.is_none()) };
            Ok((i, req))
        })
        .collect::<Result<_, Bad>>()?;
    Ok(SavedRequests { generations, free, live, next_part: r.u32()? })
}

impl SavedRequests {
    /// Why these requests cannot be restored with `live_comm` telling which communicator slots
    /// the image restores live, if they cannot.
    pub fn check(&self, live_comm: impl Fn(usize) -> bool) -> Result<(), String> {
        match self.live.iter().find(|(_, r)| !live_comm(r.comm as usize)) {
            Some((i, r)) => Err(format!("persistent request {i} on communicator slot {}, not restored", r.comm)),
            None => Ok(()),
        }
    }

    /// Puts them into empty table `t` ([`Requests::restore`]).
    pub fn apply(self, t: &mut Requests) -> Result<(), String> {
        t.restore(self.generations, self.free, self.live)?;
        partitioned::set_next_id(self.next_part);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_recorded_collective_reads_back_as_saved() {
        let all = [
            Args::Barrier { comm: 0x8400_0002u32 as i32 },
            Args::Bcast { buffer: 0x3e00_0000_0080, count: 1 << 33, datatype: 0x4c00_0405, root: 1, comm: 7 },
            Args::Reduction {
                kind: Reduction::All,
                sendbuf: 1,
                recvbuf: 2,
                count: 3,
                datatype: 4,
                op: 0x5800_0003,
                comm: 5,
            },
            Args::Reduction {
                kind: Reduction::Root(-3),
                sendbuf: 6,
                recvbuf: 7,
                count: 0,
                datatype: 8,
                op: 9,
                comm: 10,
            },
            Args::Blocks {
                shape: Shape::Scatter,
                neighbour: false,
                sendbuf: 11,
                sendcount: 12,
                sendtype: 13,
                recvbuf: 14,
                recvcount: 15,
                recvtype: 16,
                root: Some(-4),
                comm: 17,
            },
            Args::Blocks {
                shape: Shape::Alltoall,
                neighbour: true,
                sendbuf: crate::abi::IN_PLACE,
                sendcount: 0,
                sendtype: 0,
                recvbuf: 18,
                recvcount: 19,
                recvtype: 20,
                root: None,
                comm: 21,
            },
            Args::Reduction {
                kind: Reduction::ScatterBlock,
                sendbuf: 22,
                recvbuf: 23,
                count: 24,
                datatype: 25,
                op: 26,
                comm: 27,
            },
            Args::Vector {
                shape: Shape::Gather,
                neighbour: false,
                send: Side { buf: 34, count: 35, counts: None, displs: None, datatype: 36 },
                recv: Side { buf: 37, count: 0, counts: Some(vec![1, 2]), displs: Some(vec![]), datatype: 38 },
                root: Some(1),
                comm: 39,
            },
            Args::Reduction {
                kind: Reduction::Scatter(Some(vec![3, 0, 2])),
                sendbuf: 40,
                recvbuf: 41,
                count: 0,
                datatype: 42,
                op: 43,
                comm: 44,
            },
            Args::W {
                neighbour: true,
                send: WSide { buf: 45, counts: Some(vec![1]), displs: Some(vec![-8, 1 << 40]), types: Some(vec![46]) },
                recv: WSide { buf: 47, counts: None, displs: None, types: None },
                comm: 48,
            },
            Args::Reduction {
                kind: Reduction::Scan(true),
                sendbuf: 28,
                recvbuf: 29,
                count: 30,
                datatype: 31,
                op: 32,
                comm: 33,
            },
        ];
        for a in all.clone() {
            let mut w = Writer::default();
            put_args(&mut w, &a);
            let mut r = Reader::new(&w.0);
            assert_eq!(get_args(&mut r), Ok(a));
            assert!(r.done());
        }
        let mut w = Writer::default();
        put_args(&mut w, &all[0]);
        w.0[4] = 9;
        assert!(get_args(&mut Reader::new(&w.0)).is_err_and(|e| e.contains("kind 9")));
    }

    #[test]
    fn a_partitioned_request_reads_back_as_saved() {
        let data = Layout::Contig { ptr: 0x3e00_0000_0280 as *mut u8, len: 16 };
        let p = partitioned::Saved {
            send: true,
            peer: Some(3),
            rank: 1,
            tag: 11,
            ctx: 0x40,
            partitions: 2,
            bytes: 8,
            data,
            setup: Some((2, 8, 7)),
            introduced: true,
        };
        let mut w = Writer::default();
        put_part(&mut w, &p);
        let mut r = Reader::new(&w.0);
        let q = get_part(&mut r).expect("reads back");
        assert!(r.done());
        assert_eq!(format!("{p:?}"), format!("{q:?}"));
        let none = partitioned::Saved { peer: None, setup: None, introduced: false, send: false, ..p.clone() };
        let mut w = Writer::default();
        put_part(&mut w, &none);
        let q = get_part(&mut Reader::new(&w.0)).expect("reads back");
        assert_eq!(format!("{none:?}"), format!("{q:?}"));
        // A buffer that is not partitions × bytes is refused.
        let odd = partitioned::Saved { bytes: 5, ..p };
        let mut w = Writer::default();
        put_part(&mut w, &odd);
        assert!(get_part(&mut Reader::new(&w.0)).is_err_and(|e| e.contains("2 × 5 bytes over 16")));
    }
}
