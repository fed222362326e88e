//! # nemesis-mpi
//!
//! The C ABI of nemesis: `libmpi.so`, the MPI-4.1 C interface (one-sided communication and I/O
//! not yet) over the nemesis [`Endpoint`] (`nemesis::Endpoint`), with the standard header `include/mpi.h` and the `bin/mpicc` wrapper, so
//! unmodified MPI programs and benchmarks build and run on nemesis (`mpi/README.md`).
//!
//! Modules:
//! - [`abi`]: the C types and constants, one for one with `mpi.h` (MPICH's values);
//! - [`symbols`]: the data symbols and callbacks programs built against MPICH's `mpi.h` reference;
//! - [`handle`]: the tables behind handles;
//! - [`lock`]: the big lock of `MPI_THREAD_MULTIPLE`;
//! - [`exports`]: the exported `MPI_*` symbols and their `PMPI_*` twins (generated into
//!   `src/gen/exports.rs` from `api/mpi.api` and `api/bind/*.txt` by the test `generated`);
//! - [`convert`]: handle conversions, and the body of the functions not implemented yet;
//! - [`ft`]: the `MPIX_Checkpoint` extension (application checkpoints with fault tolerance);
//! - [`state`]: the process's MPI state, its access (the big lock), error handlers, the panic guard;
//! - [`mod@env`]: init and finalize (one transport for both models), thread levels, clocks,
//!   error strings, the ABI and hardware queries;
//! - [`session`]: the Sessions model (process sets, session error handlers) and the world
//!   model's phase;
//! - [`comm`]: communicators (table, contexts, rank maps, dup/split/free);
//! - [`p2p`]: point-to-point (the fast paths), send modes, persistent requests, completion;
//! - [`request`]: the request table;
//! - [`coll`]: collectives, their pLogP models and algorithms;
//! - [`datatype`], [`op`]: predefined datatypes and reduction operations;
//! - [`error`]: error classes and codes (and removing the program's);
//! - [`info`]: info objects and `MPI_INFO_ENV`;
//! - [`tools`]: the tool information interface (MPI_T), with no variables;
//! - [`topo`]: process topologies and their mapping;
//! - [`win`]: one-sided communication (windows, epochs, the node-local paths).
//!
//! [`Endpoint`]: nemesis::Endpoint

pub mod abi;
pub mod attr;
pub mod coll;
pub mod comm;
pub mod convert;
pub mod datatype;
pub mod env;
pub mod errh;
pub mod error;
pub mod exports;
pub mod ft;
pub mod grequest;
pub mod group;
pub mod handle;
pub mod info;
pub mod lock;
pub mod op;
pub mod p2p;
pub mod request;
pub mod session;
pub mod state;
pub mod symbols;
pub mod tools;
pub mod topo;
pub mod win;
