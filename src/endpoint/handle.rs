//! A request's handle, apart from the request table ([`super::request`]) so that what keeps
//! handles (the fault-tolerance state among them) needs nothing else of the Endpoint.

/// A non-blocking operation's handle. `Copy`: waiting on it consumes the request in the table,
/// after which the handle is stale.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Request {
    /// Slot of the request table.
    pub(super) index: u32,
    /// The slot's generation when the request was made: equal to the slot's while it lives.
    pub(super) generation: u32,
}

impl Request {
    /// A handle that names no request (no slot has its index): stale for every lookup.
    pub(crate) const NONE: Request = Request { index: u32::MAX, generation: 0 };

    /// The request as a transfer token for `nemesis-lmt`.
    pub(crate) fn token(self) -> u64 {
        u64::from(self.index) << 32 | u64::from(self.generation)
    }

    /// The request a token names.
    pub(crate) fn from_token(t: u64) -> Request {
        Request { index: (t >> 32) as u32, generation: t as u32 }
    }
}
