//! # nemesis
//!
//! A message transport for parallel programs: the NEMESIS design of MPICH2 rebuilt
//! (`shared/ARCHITECTURE.md`). This crate holds the [`Endpoint`] (MPI-style point-to-point with
//! matching), the bootstrap over PMI-1, PMI-2 or PMIx, and the `nemesis-run` launcher.

pub mod bootstrap;
pub mod config;
pub mod contract;
pub mod endpoint;
pub mod error;
pub mod ft;
mod hygiene;
pub mod launch;
pub mod log;
pub mod matrix;
pub mod net;
pub mod pmi;
/// One-sided operations' vocabulary ([`Endpoint`]'s `rma_*` calls).
pub mod rma {
    pub use nemesis_netmod_rdma::rma::{Atomic, AtomicKind, FiOp, FiType, RmaCaps, RmaKey, RmaRegion};
}
pub mod topology;
mod wait;

pub use config::{Config, WaitMode};
pub use endpoint::{ANY_SOURCE, ANY_TAG, Endpoint, Link, Message, Request, Scope, SendId, Status, Traffic, WORLD};
pub use error::{Error, Result};
pub use ft::FtStats;
pub use nemesis_shm::{PieceList, Pieces};
