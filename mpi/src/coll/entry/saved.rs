//! A persistent collective's arguments as a record ([`Args`]), not a closure, so the
//! MPI state image (`crate::ft::image`) can save the request and rebuild it after a restart:
//! the operation, its buffers as the application's words, counts, datatype and operation
//! handles, root and communicator handle. `MPI_Start` runs the record ([`Args::start`]) whether
//! the request was made by the init call or rebuilt ([`restored`]): there is no other recipe.
//!
//! Recorded so far: `MPI_Barrier_init`, `MPI_Bcast_init`, `MPI_Allreduce_init`,
//! `MPI_Reduce_init`, `MPI_Gather_init`, `MPI_Scatter_init`, `MPI_Allgather_init`,
//! `MPI_Alltoall_init`, `MPI_Reduce_scatter_block_init`, `MPI_Scan_init`, `MPI_Exscan_init`,
//! `MPI_Gatherv_init`, `MPI_Scatterv_init`, `MPI_Allgatherv_init`, `MPI_Alltoallv_init` (and their
//! `_c` forms; the arrays as copied at init), `MPI_Neighbor_allgather(v)_init`,
//! `MPI_Neighbor_alltoall(v/w)_init`, `MPI_Reduce_scatter_init`, `MPI_Alltoallw_init`: every
//! persistent collective.
//!
//! **Invariants.** A record names handles, never resolved objects: at each start they are
//! resolved again, as the closure did. The sequence of tags a started collective takes is the
//! communicator's non-blocking collective count (`Comm::nbc`), saved with the communicator, so
//! a rebuilt request starts in step with the survivors'.

use std::ffi::c_int;
use std::rc::Rc;

use super::{Counts, Disps, Held, How, Ints, Recipe, opt_ptr, ptr};
use crate::abi::{self, Aint, Count, Datatype};
use crate::coll::nbc::Shape;
use crate::error::Res;
use crate::state::{Access, State};

/// The arguments of a persistent collective, by operation (buffers as addresses).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Args {
    Barrier {
        comm: abi::Comm,
    },
    Bcast {
        buffer: usize,
        count: Count,
        datatype: Datatype,
        root: c_int,
        comm: abi::Comm,
    },
    /// Allreduce, reduce, reduce_scatter_block, scan and exscan, by `kind`.
    Reduction {
        kind: Reduction,
        sendbuf: usize,
        recvbuf: usize,
        count: Count,
        datatype: Datatype,
        op: abi::Op,
        comm: abi::Comm,
    },
    /// Gather and scatter (`root` given), allgather, alltoall; the neighbourhood allgather and
    /// alltoall (`neighbour`).
    Blocks {
        shape: Shape,
        neighbour: bool,
        sendbuf: usize,
        sendcount: Count,
        sendtype: Datatype,
        recvbuf: usize,
        recvcount: Count,
        recvtype: Datatype,
        root: Option<c_int>,
        comm: abi::Comm,
    },
    /// Gatherv and scatterv (`root` given), allgatherv, alltoallv, by `shape`, and their
    /// neighbourhood forms (`neighbour`): the arrays as copied at init (the root's only, for
    /// gatherv and scatterv).
    Vector {
        shape: Shape,
        neighbour: bool,
        send: Side,
        recv: Side,
        root: Option<c_int>,
        comm: abi::Comm,
    },
    /// Alltoallw and its neighbourhood form (`neighbour`): the arrays as copied at init.
    W {
        neighbour: bool,
        send: WSide,
        recv: WSide,
        comm: abi::Comm,
    },
}

/// One side of an [`Args::W`]: counts, byte displacements and datatypes per peer.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct WSide {
    pub buf: usize,
    pub counts: Ints,
    pub displs: Option<Vec<Aint>>,
    pub types: Option<Vec<Datatype>>,
}

impl WSide {
    /// The datatypes named (none when not given).
    fn types(&self) -> &[Datatype] {
        self.types.as_deref().unwrap_or_default()
    }
}

/// One side of an [`Args::Vector`]: a single block's count, or count and displacement arrays.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Side {
    pub buf: usize,
    pub count: Count,
    pub counts: Ints,
    pub displs: Ints,
    pub datatype: Datatype,
}

impl Side {
    /// The arrays and datatype as the entries take them.
    fn many(&self) -> (Counts, Disps, Datatype) {
        (Counts::Int(ptr(&self.counts)), Disps::Int(ptr(&self.displs)), self.datatype)
    }
}

/// Which reduction an [`Args::Reduction`] is.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Reduction {
    /// `MPI_Allreduce_init`.
    All,
    /// `MPI_Reduce_init` to this root.
    Root(c_int),
    /// `MPI_Reduce_scatter_block_init` (`count` per member).
    ScatterBlock,
    /// `MPI_Reduce_scatter_init`: the counts as copied at init (`count` unused).
    Scatter(Ints),
    /// `MPI_Scan_init`, `MPI_Exscan_init` (`true`).
    Scan(bool),
}

impl Args {
    /// An [`Args::Blocks`] of sides `send` and `recv` (buffer, count, datatype).
    pub fn blocks(
        shape: Shape,
        neighbour: bool,
        send: (usize, Count, Datatype),
        recv: (usize, Count, Datatype),
        root: Option<c_int>,
        comm: abi::Comm,
    ) -> Args {
        let ((sendbuf, sendcount, sendtype), (recvbuf, recvcount, recvtype)) = (send, recv);
        Args::Blocks { shape, neighbour, sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, root, comm }
    }

    /// Starts the operation (its non-blocking form), writing the new request to `r`.
    ///
    /// # Safety
    /// MPI's contract on the buffers, as at the init call.
    pub unsafe fn start(&self, acc: &mut Access, r: *mut abi::Request) -> Res<()> {
        let how = How::Nonblocking(r);
        // SAFETY: the caller's contract.
        unsafe {
            match *self {
                Args::Barrier { comm } => super::barrier(acc, comm, how),
                Args::Bcast { buffer, count, datatype, root, comm } => {
                    super::bcast(acc, buffer as *mut _, count, datatype, root, comm, how)
                }
                Args::Reduction { ref kind, sendbuf, recvbuf, count, datatype: dt, op, comm } => {
                    let (send, recv) = (sendbuf as *const _, recvbuf as *mut _);
                    match kind {
                        Reduction::All => super::allreduce(acc, send, recv, count, dt, op, comm, how),
                        &Reduction::Root(root) => super::reduce(acc, send, recv, count, dt, op, root, comm, how),
                        Reduction::ScatterBlock => {
                            let none = Counts::Int(std::ptr::null());
                            super::reduce_scatter(acc, send, recv, none, Some(count), dt, op, comm, how)
                        }
                        Reduction::Scatter(counts) => {
                            let counts = Counts::Int(ptr(counts));
                            super::reduce_scatter(acc, send, recv, counts, None, dt, op, comm, how)
                        }
                        &Reduction::Scan(exclusive) => {
                            super::scan(acc, send, recv, count, dt, op, comm, exclusive, how)
                        }
                    }
                }
                Args::Blocks {
                    shape,
                    neighbour,
                    sendbuf,
                    sendcount,
                    sendtype,
                    recvbuf,
                    recvcount,
                    recvtype,
                    root,
                    comm,
                } => {
                    let (send, recv) = (sendbuf as *const _, recvbuf as *mut _);
                    if neighbour {
                        let all = shape == Shape::Alltoall;
                        return super::neighbor_blocks(
                            acc, all, send, sendcount, sendtype, recv, recvcount, recvtype, comm, how,
                        );
                    }
                    super::blocks(acc, shape, send, sendcount, sendtype, recv, recvcount, recvtype, root, comm, how)
                }
                Args::Vector { shape, neighbour, ref send, ref recv, root, comm } => {
                    let (sb, rb) = (send.buf as *const _, recv.buf as *mut _);
                    let ((sc, sd, st), (rc, rd, rt)) = (send.many(), recv.many());
                    match (shape, root) {
                        (Shape::Alltoall, _) if neighbour => {
                            super::neighbor_alltoallv(acc, sb, sc, sd, st, rb, rc, rd, rt, comm, how)
                        }
                        _ if neighbour => {
                            super::neighbor_allgatherv(acc, sb, send.count, st, rb, rc, rd, rt, comm, how)
                        }
                        (Shape::Gather, Some(root)) => {
                            super::vblocks(acc, shape, sb, rb, (send.count, st), recv.many(), root, comm, how)
                        }
                        (Shape::Scatter, Some(root)) => {
                            super::vblocks(acc, shape, sb, rb, (recv.count, rt), send.many(), root, comm, how)
                        }
                        (Shape::Alltoall, _) => super::alltoallv(acc, sb, sc, sd, st, rb, rc, rd, rt, comm, how),
                        _ => super::allgatherv(acc, sb, send.count, st, rb, rc, rd, rt, comm, how),
                    }
                }
                Args::W { neighbour, ref send, ref recv, comm } => {
                    let (sb, rb) = (send.buf as *const _, recv.buf as *mut _);
                    let (sc, rc) = (Counts::Int(ptr(&send.counts)), Counts::Int(ptr(&recv.counts)));
                    let (sd, rd) = (opt_ptr(&send.displs), opt_ptr(&recv.displs));
                    let (st, rt) = (opt_ptr(&send.types), opt_ptr(&recv.types));
                    if neighbour {
                        super::neighbor_alltoallw(acc, sb, sc, sd, st, rb, rc, rd, rt, comm, how)
                    } else {
                        let (sd, rd) = (Disps::Aint(sd), Disps::Aint(rd));
                        super::alltoallw(acc, sb, sc, sd, st, rb, rc, rd, rt, comm, how)
                    }
                }
            }
        }
    }

    /// The datatypes and operation the record names (for [`Held`]).
    pub fn held(&self) -> Held {
        match *self {
            Args::Barrier { .. } => Held::default(),
            Args::Bcast { datatype, .. } => Held::of(&[datatype], None),
            Args::Reduction { datatype, op, .. } => Held::of(&[datatype], Some(op)),
            Args::Blocks { sendtype, recvtype, .. } => Held::of(&[sendtype, recvtype], None),
            Args::Vector { ref send, ref recv, .. } => Held::of(&[send.datatype, recv.datatype], None),
            Args::W { ref send, ref recv, .. } => Held::of(&[send.types(), recv.types()].concat(), None),
        }
    }

    /// The communicator handle.
    pub fn comm(&self) -> abi::Comm {
        match *self {
            Args::Barrier { comm }
            | Args::Bcast { comm, .. }
            | Args::Reduction { comm, .. }
            | Args::Blocks { comm, .. }
            | Args::Vector { comm, .. }
            | Args::W { comm, .. } => comm,
        }
    }
}

impl Recipe {
    /// The record of the arguments.
    pub fn args(&self) -> &Args {
        &self.args
    }
}

/// A recipe rebuilt from a saved record, holding nothing yet: [`rehold`] holds its handles once
/// the datatypes and operations are restored.
pub fn restored(args: Args) -> Rc<Recipe> {
    Rc::new(Recipe { held: Held::default(), args })
}

/// The recipe of the request at slot `i` of `st`'s table, if it has one and holds it alone.
fn recipe_mut(st: &mut State, i: usize) -> Option<&mut Recipe> {
    st.reqs.at_mut(i)?.persistent.as_deref_mut()?.coll.as_mut().and_then(Rc::get_mut)
}

/// Holds the handles of every rebuilt recipe in `st`'s request table ([`restored`]), once its
/// datatypes and operations are back. (A recipe is shared only while started, never just after
/// a restore.)
pub fn rehold(st: &mut State) {
    let slots: Vec<usize> = st.reqs.iter().filter_map(|(h, _)| st.reqs.index(h)).collect();
    for i in slots {
        let Some(args) = recipe_mut(st, i).map(|r| r.args.clone()) else { continue };
        let held = args.held().hold(st);
        if let Some(r) = recipe_mut(st, i) {
            r.held = held;
        }
    }
}
