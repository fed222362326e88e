//! # nemesis-shm: the shared-memory core of nemesis
//!
//! The NEMESIS design of MPICH2 (`shared/reference/nemesis.md`), rebuilt: one segment per node,
//! fixed-size cells in per-rank pools, lock-free MPSC receive and free queues with a shadow head,
//! and per-pair fastboxes, all robust to any local process dying at any instruction.
//!
//! Layers, bottom up:
//! - [`sync`]: the `cfg(loom)` alias layer (std atomics, or loom's);
//! - [`arena`], [`cell`]: cell memory addressed by handles, link words, the message header;
//! - [`queue`]: the NEMESIS MPSC queue with shadow head, and its failure repairs;
//! - [`fastbox`]: per-pair rings of slots;
//! - [`collarea`]: the collectives' shared areas (flags and banks per communicator member);
//! - [`node`]: what a node shares, over a segment or the heap; [`layout`]: the segment's layout;
//! - [`port`]: a rank's send/poll/release API, per-pair order, the netmods' hand-over, failure
//!   recovery; [`pieces`]: payloads gathered from (and fragments scattered into) non-contiguous
//!   buffers; [`incarnation`]: starting a dead rank again;
//! - `segment`, `os` (not under loom): creating, attaching and watching the mapped segment;
//! - `netmod`, `auth` (not under loom): the network module interface with its heartbeats and
//!   addresses, and the job's secret;
//! - [`error`]: the crate's one error enum; [`failpoint`](mod@failpoint): named crash points for tests (cargo
//!   feature `failpoints`).
//!
//! # Example
//!
//! ```
//! use nemesis_shm::{HeapNode, MsgHeader, Params, Port, PortConfig, Sent};
//!
//! let node = HeapNode::new(2, Params::DEFAULT).unwrap();
//! let mut a = Port::new(&node, 0, PortConfig::default()).unwrap();
//! let mut b = Port::new(&node, 1, PortConfig::default()).unwrap();
//! let hdr = MsgHeader { tag: 7, ..MsgHeader::default() };
//! assert!(matches!(a.send(1, &hdr, None, b"hello").unwrap(), Sent::Done));
//! let inc = b.poll(&[0]).unwrap().expect("a message");
//! let mut buf = [0u8; 5];
//! inc.copy_to(&mut buf);
//! assert_eq!((&buf, inc.tag(), inc.src), (b"hello", 7, 0));
//! b.release(inc).unwrap();
//! ```
//!
//! # Parameters
//!
//! See [`Params`]; `docs/configuration.md` lists them with their variables, `docs/design/shm.md` why each default.
//! The defaults were measured: `docs/design/shm.md`, "Parameters".

pub mod arena;
#[cfg(not(loom))]
pub mod auth;
pub mod cell;
pub mod collarea;
pub mod error;
pub mod failpoint;
pub mod fastbox;
pub mod incarnation;
pub mod layout;
#[cfg(not(loom))]
pub mod netmod;
pub mod node;
#[cfg(not(loom))]
pub mod os;
pub mod pieces;
pub mod port;
pub mod queue;
#[cfg(not(loom))]
pub mod segment;
pub mod sync;

pub use arena::{Arena, HeapArena};
pub use cell::{CellHandle, MsgHeader, NULL, PiggybackBytes};
pub use collarea::{AreaRef, HeapArea};
pub use error::{Error, Result};
pub use fastbox::FastboxRef;
pub use layout::{Layout, Params, QueueKind};
pub use node::{HeapNode, Node, RankState};
pub use pieces::{Payload, PieceList, Pieces};
pub use port::{Incoming, NetCell, PeerEvent, PendingSend, Port, PortConfig, REMOTE, Sent};
pub use queue::{Liveness, Queue, QueueShared};
#[cfg(not(loom))]
pub use segment::{Backing, Segment};
