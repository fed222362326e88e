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
//! - [`port`]: a rank's send/poll/release API, per-pair ordering, failure recovery; [`pieces`]:
//!   payloads gathered from (and fragments scattered into) non-contiguous buffers;
//! - `segment`, `os` (not under loom): creating, attaching and watching the mapped segment;
//! - [`failpoint`]: named crash points for tests (cargo feature `failpoints`).
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
//! See [`Params`]; the README section "Shared-memory parameters" lists them with their variables.
//! Measured on the project's 2-core machine (2026-11-21), two processes pinned to two cores:
//!
//! - **Fastbox: single slot against a ring** (`nemesis-bench fastbox-compare --rounds 11`, 8-byte
//!   messages, medians): one 256-byte slot (NEMESIS) 339 ns one-way and 8.3 M msg/s; rings of
//!   4, 8 and 16 slots of 256 bytes 283, 260 and 255 ns and 8.0, 10.8 and 14.8 M msg/s. The ring
//!   wins on both: a single slot must be acknowledged after every message, which puts the ack's
//!   cache-line transfer on the critical path, and it cannot pipeline. 16 × 256 B first; then
//!   64 × 256 B (2026-11-24, issue 16): a window of 64 non-blocking sends (OSU's, `mpi_pingpong.c
//!   bw`) then goes whole through the ring instead of 48 of its messages through cells, which
//!   costs the sender of 8-byte messages 608 instructions per message in `MPI_Isend` +
//!   `MPI_Waitall` instead of 844 (`mpi/bench/stream-instructions.sh`; callgrind, so the loaded
//!   machine did not matter), for 192 KiB more per rank.
//! - **Cells** (`nemesis-bench shm-cells --rounds 7`, streaming, 1 MiB pool per rank): 16 KiB cells
//!   give 8.0, 11.3, 11.4 and 10.1 GB/s for 4, 16, 64 and 256 KiB messages, within 10 % of the
//!   best cell size for each; kept: 64 × 16 KiB.
//! - **Memory** (`nemesis-bench segment-size`): 1.09 MiB per local rank at 8, 64 and 256 ranks,
//!   67 KiB of it fastboxes; a 64 KiB box per pair would be 16 MiB per rank at 256 ranks.
//! - **Latency** (`nemesis-bench shm-pingpong --rounds 41`): fastbox one-way 229–237 ns against a
//!   cache-line ping-pong of 212–294 ns between the same cores (per-round ratio 0.80–1.08).

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
