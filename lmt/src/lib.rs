//! # nemesis-lmt: large messages
//!
//! The NEMESIS large-message transfer (LMT, `shared/reference/nemesis.md`): a rendezvous — the
//! receive is matched before data moves — then one of two backends:
//! - [`ring`]: a ring of copy slots in the receiver's part of the node segment, the sender
//!   copying in while the receiver copies out (two cores copy at once);
//! - [`cma`]: a single copy by the receiver with `process_vm_readv`, where the kernel allows it.
//!
//! [`transfer`] is the state machine (sans I/O) the Endpoint's progress engine drives; [`wire`]
//! the encoding of its messages (RTS, CTS, DONE, COOKIE).

#[cfg(not(loom))]
pub mod cma;
pub mod error;
#[cfg(not(loom))]
pub mod net;
pub mod ring;
#[cfg(not(loom))]
pub mod transfer;
pub mod wire;

pub use error::{Error, Result};
#[cfg(not(loom))]
pub use net::{LmtBackend, NetDone, NetLmt, RecvPlan, RemoteBuf};
pub use ring::{HeapRing, RingRef};
#[cfg(not(loom))]
pub use transfer::{Config, Lmt, Outcome, PeerConfig, Policy, Rings, Stats, Token};
pub use wire::{Backend, Control, Rts};
