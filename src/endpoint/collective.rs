//! The collectives' shared areas of the node segment (`nemesis_shm::collarea`), reached through a
//! safe handle: a communicator whose members all share the segment claims an area, each member
//! attaches to it ([`Endpoint::attach_coll_area`]) and runs its small collectives through the
//! area's lanes ([`CollLane`]) instead of point-to-point messages. The protocol (sequence words,
//! banks used in turns, the claim and its stamp) is `collarea`'s; this file holds the segment
//! arithmetic and the lifetimes, so that the C ABI needs neither `unsafe` nor the shm crate.
//!
//! What the handle guarantees:
//! - the mapping the lanes point into lives as long as the handle (it holds the segment);
//! - an area index comes from the pool ([`collarea::AREAS`]) and its stamp is checked on attach;
//!   every member index and length is checked against the lane (typed errors, never a write
//!   outside the member's bank);
//! - a handle releases its claim once ([`CollArea::release`]), and gives no lane afterwards.
//!
//! What it relies on, as every shared structure of the segment does: each member index is used
//! by one process, one collective at a time, with sequence numbers that grow by one per
//! collective of a lane (MPI's rule that members call collectives in the same order, one thread
//! per communicator at a time).

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering::Relaxed};

use nemesis_shm::Segment;
use nemesis_shm::collarea::{self, AreaRef, Lane};

use super::Endpoint;
use crate::error::{Error, Result};

/// A member's attachment to a claimed collective area: its two lanes, kept mapped.
///
/// ```no_run
/// use nemesis::endpoint::CollArea;
///
/// let ep = nemesis::Endpoint::init().unwrap();
/// // One member claims, and tells the others `(index, stamp)` by a message; each attaches.
/// let (index, stamp) = ep.claim_coll_area(ep.size()).expect("an area free");
/// let area = ep.attach_coll_area(u64::from(index), stamp).unwrap();
/// let lane = area.lane(CollArea::lane_of(0)).expect("not released");
/// lane.enter(ep.rank(), 1).unwrap(); // enters the lane's collective 1 (a barrier's half)
/// area.release().unwrap();
/// ep.finalize().unwrap();
/// ```
pub struct CollArea {
    /// The area's claim words. `'static` here and in `lanes` only inside this handle: `segment`
    /// keeps the mapping they point into, and nothing leaves the handle but borrowed from it.
    area: AreaRef<'static>,
    /// Its lanes (0: small banks, 1: large).
    lanes: [CollLane; 2],
    /// The claim's stamp (odd), for the release.
    stamp: u64,
    /// Set by the one [`CollArea::release`]; no lane is handed out after it.
    released: AtomicBool,
    /// The segment holding the area.
    segment: Arc<Segment>,
}

impl std::fmt::Debug for CollArea {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CollArea").field("stamp", &self.stamp).field("segment", &self.segment).finish()
    }
}

/// One lane of a [`CollArea`] (0: small banks, 1: large; [`CollArea::lane_of`]), borrowed from it
/// (neither `Copy` nor `Clone`: it never outlives the handle). Every method checks member indices
/// and lengths against the lane.
pub struct CollLane(Lane<'static>);

/// An error of the caller's `wait`, or one of the shm crate's, carried through `Lane`'s methods.
struct Via<E>(E);

impl<E: From<Error>> From<nemesis_shm::Error> for Via<E> {
    #[inline]
    fn from(e: nemesis_shm::Error) -> Via<E> {
        Via(E::from(Error::from(e)))
    }
}

impl CollArea {
    /// The largest contribution of a member to one collective through an area: larger
    /// collectives use point-to-point messages.
    pub const BANK_BYTES: usize = collarea::BANK_BYTES;

    /// The bank size of the small lane (0).
    pub const SMALL_BANK_BYTES: usize = collarea::LANES[0].bank_bytes;

    /// The lane of a collective whose members contribute `len` bytes each (at most
    /// [`Self::BANK_BYTES`]).
    #[inline]
    pub const fn lane_of(len: usize) -> usize {
        collarea::lane_of(len)
    }

    /// Lane `k` (0 or 1; past 1, lane 1), or `None` once the claim is released.
    #[inline]
    pub fn lane(&self, k: usize) -> Option<&CollLane> {
        // ORDERING: Relaxed: set by this process's own release, after its last collective.
        if self.released.load(Relaxed) {
            return None;
        }
        Some(&self.lanes[k.min(1)])
    }

    /// Releases this member's hold on the claim (once: later calls return `Ok(false)`); true if
    /// it was the last, which frees the area. Every collective of this member on it must be over.
    /// An error means the area's words are corrupt: it then stays taken, lost to the node.
    pub fn release(&self) -> Result<bool> {
        // ORDERING: Relaxed: one thread per communicator; the claim words order the rest.
        if self.released.swap(true, Relaxed) {
            return Ok(false);
        }
        Ok(self.area.release(self.stamp)?)
    }
}

impl CollLane {
    /// Member `me` enters collective `s` with no data of its own.
    #[inline]
    pub fn enter(&self, me: u32, s: u64) -> Result<()> {
        Ok(self.0.enter(me, s)?)
    }

    /// Waits until members `0..n` have all entered collective `s`, through `wait(j, ready)`,
    /// which returns once `ready()` holds or fails (a dead member, say).
    pub fn await_all<E: From<Error>>(
        &self,
        n: u32,
        s: u64,
        wait: &mut impl FnMut(u32, &mut dyn FnMut() -> bool) -> std::result::Result<(), E>,
    ) -> std::result::Result<(), E> {
        self.0.await_all(n, s, &mut |j, r| wait(j, r).map_err(Via)).map_err(|v| v.0)
    }

    /// Member `me` of a team of `n` enters collective `s` with `len` bytes that `fill` writes into
    /// its bank once the bank is free; `floor` is the caller's memory of the lowest collective
    /// every member was seen to have entered (0 at first, kept per team and lane).
    #[allow(clippy::too_many_arguments)]
    pub fn enter_with<E: From<Error>>(
        &self,
        me: u32,
        n: u32,
        s: u64,
        len: usize,
        fill: impl FnOnce(&mut [u8]),
        floor: &mut u64,
        wait: &mut impl FnMut(u32, &mut dyn FnMut() -> bool) -> std::result::Result<(), E>,
    ) -> std::result::Result<(), E> {
        let mut w = |j: u32, r: &mut dyn FnMut() -> bool| wait(j, r).map_err(Via);
        self.0.enter_with(me, n, s, len, fill, floor, &mut w).map_err(|v| v.0)
    }

    /// Waits until member `j` has entered collective `s`, then lets `f` read the first `len`
    /// bytes of its bank for `s`.
    pub fn read<T, E: From<Error>>(
        &self,
        j: u32,
        s: u64,
        len: usize,
        f: impl FnOnce(&[u8]) -> T,
        wait: &mut impl FnMut(u32, &mut dyn FnMut() -> bool) -> std::result::Result<(), E>,
    ) -> std::result::Result<T, E> {
        self.0.read(j, s, len, f, &mut |j, r| wait(j, r).map_err(Via)).map_err(|v| v.0)
    }
}

impl Endpoint {
    /// True if a team of `members` fits the segment's areas (at most its local ranks).
    pub fn coll_area_fits(&self, members: u32) -> bool {
        members <= u32::from(self.inner.segment.layout().ranks)
    }

    /// Claims a free area of the segment for a team of `members` (`1..=` the local ranks):
    /// `(index, stamp)`, which the claimer tells the other members (by a message: its delivery
    /// orders the claim's resets before their first use), or `None` if every area is taken.
    pub fn claim_coll_area(&self, members: u32) -> Option<(u32, u64)> {
        let seg = &self.inner.segment;
        (0..collarea::AREAS).find_map(|i| seg.coll_area(i).and_then(|a| a.claim(members)).map(|st| (i, st)))
    }

    /// Attaches to area `index` claimed with `stamp` (both as the claimer told them): checks the
    /// index is one of the segment's areas and the area bears the stamp.
    pub fn attach_coll_area(&self, index: u64, stamp: u64) -> Result<CollArea> {
        let seg = &self.inner.segment;
        let corrupt = |what, value| Error::from(nemesis_shm::Error::Corrupt { what, value });
        let base = u32::try_from(index).ok().and_then(|i| seg.coll_area_base(i));
        let Some(base) = base else { return Err(corrupt("collective area index", index)) };
        // SAFETY: `coll_area_base` gave the page-aligned start of a whole area inside the
        // mapping, shared only through the area protocol; the handle holds the segment, so the
        // mapping outlives the `'static` views, which never leave the handle but borrowed.
        let area = unsafe { AreaRef::in_segment(base, u32::from(seg.layout().ranks)) };
        if area.stamp() != stamp {
            return Err(corrupt("collective area stamp", area.stamp()));
        }
        let lanes = [CollLane(*area.lane(0)), CollLane(*area.lane(1))];
        Ok(CollArea { area, lanes, stamp, released: AtomicBool::new(false), segment: Arc::clone(seg) })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn area_errors_become_endpoint_errors() {
        let Via(e) = Via::<Error>::from(nemesis_shm::Error::Corrupt { what: "x", value: 1 });
        assert!(matches!(e, Error::Shm(nemesis_shm::Error::Corrupt { what: "x", value: 1 })));
    }

    #[test]
    fn lanes_are_chosen_by_size() {
        assert_eq!(CollArea::lane_of(1), 0);
        assert_eq!(CollArea::lane_of(CollArea::SMALL_BANK_BYTES), 0);
        assert_eq!(CollArea::lane_of(CollArea::SMALL_BANK_BYTES + 1), 1);
        assert_eq!(CollArea::lane_of(CollArea::BANK_BYTES), 1);
    }
}
