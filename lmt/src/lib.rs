//! # nemesis-lmt: large messages
//!
//! The NEMESIS large-message transfer (LMT, `shared/reference/nemesis.md`): a rendezvous — the
//! receive is matched before data moves — then one of two backends within a node:
//! - [`ring`]: a ring of copy slots in the receiver's part of the node segment, the sender
//!   copying in while the receiver copies out (two cores copy at once);
//! - [`cma`]: a single copy with `process_vm_readv` (split with the sender's
//!   `process_vm_writev` for long messages), where the kernel allows it.
//!
//! [`rendezvous`] is the state machine the Endpoint's progress engine drives for local peers,
//! [`net`] its counterpart over a network module, [`wire`] the encoding of their messages.
//!
//! With the cargo feature `failpoints` (tests only, `nemesis_shm::failpoint`), a side can be made
//! to die mid-transfer with the local rank `<peer>` of the other side:
//! - `rendezvous-send-mid-<peer>`: part of the message is in the receiver's ring;
//! - `rendezvous-help-<peer>`: the receiver reads its part of a split single copy, we are to
//!   write the rest;
//! - `rendezvous-recv-mid-<peer>`: part of the message is copied out of our ring;
//! - `rendezvous-recv-half-<peer>`: our part of a split single copy is read, the sender writes
//!   the rest.
//!
//! Design notes and measurements: `docs/design/large-messages.md`.

#[cfg(not(loom))]
pub mod cma;
pub mod error;
#[cfg(not(loom))]
pub mod net;
#[cfg(not(loom))]
pub mod rendezvous;
pub mod ring;
pub mod wire;

pub use error::{Error, Refusal, Result};
#[cfg(not(loom))]
pub use net::{LmtBackend, NetDone, NetLmt, RecvPlan, RemoteBuf};
/// The rendezvous module's former name.
#[cfg(not(loom))]
pub use rendezvous as transfer;
#[cfg(not(loom))]
pub use rendezvous::{Config, Lmt, Outcome, PeerConfig, Policy, Rings, Stats, Token};
pub use ring::{HeapRing, RingRef};
pub use wire::{Backend, Control, Rts};
