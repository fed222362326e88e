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
//! - [`node`]: what a node shares, over a segment or the heap; [`layout`]: the segment's layout;
//! - [`port`]: a rank's send/poll/release API, per-pair ordering, failure recovery;
//! - `segment`, `os` (not under loom): creating, attaching and watching the mapped segment.
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
//! assert!(matches!(a.send(1, &hdr, b"hello").unwrap(), Sent::Done));
//! let inc = b.poll(&[0]).unwrap().expect("a message");
//! let mut buf = [0u8; 5];
//! inc.copy_to(&mut buf);
//! assert_eq!((&buf, inc.tag(), inc.src), (b"hello", 7, 0));
//! b.release(inc).unwrap();
//! ```
//!
//! # Parameters
//!
//! See [`Params`]. The defaults and the measurements that chose them are recorded in the README
//! section "Shared-memory parameters".

pub mod arena;
pub mod cell;
pub mod error;
pub mod fastbox;
pub mod layout;
pub mod node;
#[cfg(not(loom))]
pub mod os;
pub mod port;
pub mod queue;
#[cfg(not(loom))]
pub mod segment;
pub mod sync;

pub use arena::{Arena, HeapArena};
pub use cell::{CellHandle, MsgHeader, NULL};
pub use error::{Error, Result};
pub use fastbox::FastboxRef;
pub use layout::{Layout, Params};
pub use node::{HeapNode, Node, RankState};
pub use port::{Incoming, PeerEvent, PendingSend, Port, PortConfig, Sent};
pub use queue::{Liveness, Queue, QueueShared};
#[cfg(not(loom))]
pub use segment::{Backing, Segment};
