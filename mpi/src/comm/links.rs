//! Each fast communicator's table of links: communicator rank → the Endpoint's [`Link`] to that
//! member (its job rank, local rank and doorbell), so the point-to-point fast paths go from a
//! communicator rank to the peer's fastbox with one load and no route lookup (`p2p::send_fused`).
//!
//! Built when a communicator gets its fast-path entry (`State::refresh_fast`: at `MPI_Init` and
//! whenever a communicator of the first `FAST_COMMS` is made or changed), kept while its rank map
//! stays the same, dropped with the entry.

use nemesis::{Endpoint, Link};

use super::Comm;

/// The tables, by communicator index (below `FAST_COMMS`).
#[derive(Default)]
pub struct Links {
    /// Per index: a link per member, in rank order (boxed: the fast entry points into it).
    tables: Vec<Box<[Link]>>,
}

impl Links {
    pub const fn new() -> Links {
        Links { tables: Vec::new() }
    }

    /// The links of communicator `c` at index `i` (made now unless its table is up to date): a
    /// pointer to `c.size` of them, valid until the next call for `i` or [`clear`](Self::clear).
    pub fn of(&mut self, i: usize, c: &Comm, ep: &Endpoint) -> *const Link {
        if self.tables.len() <= i {
            self.tables.resize_with(i + 1, Box::default);
        }
        let links = &mut self.tables[i];
        if !links.iter().map(Link::rank).eq(c.world.iter().copied()) {
            *links = c.world.iter().map(|&w| ep.link(w)).collect();
        }
        links.as_ptr()
    }

    /// Drops the table of index `i`.
    pub fn clear(&mut self, i: usize) {
        if let Some(t) = self.tables.get_mut(i) {
            *t = Box::default();
        }
    }
}
