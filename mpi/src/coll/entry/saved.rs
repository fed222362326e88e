//! A persistent collective's arguments as a record ([`Args`]) rather than only a closure, so the
//! MPI state image (`crate::ft::image`) can save the request and rebuild it after a restart:
//! the operation, its buffers as the application's words, counts, datatype and operation
//! handles, root and communicator handle. `MPI_Start` runs the record ([`Args::start`]) whether
//! the request was made by the init call or rebuilt ([`restored`]).
//!
//! Recorded so far: `MPI_Barrier_init`, `MPI_Bcast_init`, `MPI_Allreduce_init`,
//! `MPI_Reduce_init` (and their `_c` forms); the other persistent collectives keep only their
//! closure (`Recipe::args` is `None`) and are not saved.
//!
//! **Invariants.** A record names handles, never resolved objects: at each start they are
//! resolved again, as the closure did. The sequence of tags a started collective takes is the
//! communicator's non-blocking collective count (`Comm::nbc`), saved with the communicator, so
//! a rebuilt request starts in step with the survivors'.

use std::ffi::c_int;
use std::rc::Rc;

use super::{Held, How, Recipe};
use crate::abi::{self, Count, Datatype};
use crate::error::Res;
use crate::state::{Access, State};

/// The arguments of a persistent collective, by operation (buffers as addresses).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
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
    Allreduce {
        sendbuf: usize,
        recvbuf: usize,
        count: Count,
        datatype: Datatype,
        op: abi::Op,
        comm: abi::Comm,
    },
    Reduce {
        sendbuf: usize,
        recvbuf: usize,
        count: Count,
        datatype: Datatype,
        op: abi::Op,
        root: c_int,
        comm: abi::Comm,
    },
}

impl Args {
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
                Args::Allreduce { sendbuf, recvbuf, count, datatype, op, comm } => {
                    super::allreduce(acc, sendbuf as *const _, recvbuf as *mut _, count, datatype, op, comm, how)
                }
                Args::Reduce { sendbuf, recvbuf, count, datatype, op, root, comm } => {
                    super::reduce(acc, sendbuf as *const _, recvbuf as *mut _, count, datatype, op, root, comm, how)
                }
            }
        }
    }

    /// The datatypes and operation the record names (for [`Held`]).
    pub fn held(&self) -> Held {
        match *self {
            Args::Barrier { .. } => Held::default(),
            Args::Bcast { datatype, .. } => Held::of(&[datatype], None),
            Args::Allreduce { datatype, op, .. } | Args::Reduce { datatype, op, .. } => Held::of(&[datatype], Some(op)),
        }
    }

    /// The communicator handle.
    pub fn comm(&self) -> abi::Comm {
        match *self {
            Args::Barrier { comm }
            | Args::Bcast { comm, .. }
            | Args::Allreduce { comm, .. }
            | Args::Reduce { comm, .. } => comm,
        }
    }
}

/// The start closure of record `args`.
pub(super) fn starter(args: Args) -> super::Starter {
    // SAFETY: MPI's contract on the buffers, at each start, as at the init call.
    Box::new(move |acc: &mut Access, r| unsafe { args.start(acc, r) })
}

impl Recipe {
    /// The record of the arguments, if this operation keeps one.
    pub fn args(&self) -> Option<&Args> {
        self.args.as_ref()
    }
}

/// A recipe rebuilt from a saved record, holding nothing yet: [`rehold`] holds its handles once
/// the datatypes and operations are restored.
pub fn restored(args: Args) -> Rc<Recipe> {
    Rc::new(Recipe { start: starter(args), held: Held::default(), args: Some(args) })
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
        let Some(args) = recipe_mut(st, i).and_then(|r| r.args) else { continue };
        let held = args.held().hold(st);
        if let Some(r) = recipe_mut(st, i) {
            r.held = held;
        }
    }
}
