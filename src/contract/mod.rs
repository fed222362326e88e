//! The contract between the launcher (`nemesis-run`, [`crate::launch`]) and the ranks it starts
//! (the bootstrap, the PMI clients, the FT wiring): every environment variable and every message
//! that passes between them, defined here once. Both sides import this module, never each other.
//!
//! - [`env`](mod@env): the environment variables, each with what it carries, who writes it, who reads it
//!   and its default; also the configuration variables the user sets for the ranks.
//! - [`kvs`]: the keys of the job's key-value space (segment handles, node ids, business cards,
//!   Hydra's `PMI_process_mapping`).
//! - [`channel`]: the frames of the fault-tolerance channel, a Unix socket per rank.
//!
//! The PMI wire itself (PMI-1, PMI-2, PMIx) is a standard both sides speak and lives in
//! [`crate::pmi`]; the launcher's server uses its codecs.
//!
//! Every rank gets, as MPICH's Hydra sets them (observed with `mpiexec.hydra` 4.0.2): `PMI_FD`,
//! `PMI_RANK`, `PMI_SIZE`, `MPI_LOCALRANKID`, `MPI_LOCALNRANKS`; and from nemesis: [`ENV_NODE`],
//! [`ENV_LAUNCHER`], [`ENV_JOB_SECRET`], [`ENV_WAIT`] when a wait mode was chosen, and the FT
//! variables under `--ft`.

pub mod channel;
pub mod env;
pub mod kvs;

pub use env::*;
pub use kvs::*;
