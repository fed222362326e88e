//! The registration cache: a memory registration is costly (a system call and page pinning on
//! real hardware), and applications send from the same buffers again and again, so registrations
//! are kept after their transfer and reused for any later one inside them, up to a number of
//! entries; the least recently used unreferenced entry goes first.
//!
//! Sound only where a registration does not outlive a change of the memory behind it: libfabric's
//! software providers (tcp, udp, shm, sockets, and rxm/rxd over them) register virtual addresses
//! and read them at transfer time, so a buffer freed and its address reused is read afresh. On
//! hardware that pins pages, a cached registration of freed memory would name stale pages: there
//! the cache is off by default (libfabric's own cache, with its memory monitor, serves those
//! providers) — see `OfiConfig::mr_cache`.

/// One registration.
#[derive(Debug)]
struct Entry<H> {
    /// Stable id ([`MrCache::acquire`] hands it out).
    id: u64,
    /// Registered range `[start, end)`, whole pages.
    start: usize,
    end: usize,
    /// Registered for remote reads too.
    exposed: bool,
    handle: H,
    key: u64,
    /// Transfers using it: never evicted while above 0.
    refs: u32,
    /// Clock of the last use, for LRU eviction.
    used: u64,
}

/// What a registration gives a transfer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Reg {
    /// To give back with [`MrCache::release`].
    pub id: u64,
    /// Start of the registered range.
    pub start: usize,
    /// The registration's key.
    pub key: u64,
}

/// Registrations by range, `H` being the registration object (deregistered when dropped).
#[derive(Debug)]
pub(crate) struct MrCache<H> {
    entries: Vec<Entry<H>>,
    /// Unreferenced entries kept (0: none, every registration ends with its transfer).
    capacity: usize,
    clock: u64,
    next_id: u64,
    /// Registrations made, and uses served from the cache (statistics).
    pub made: u64,
    pub hits: u64,
}

const PAGE: usize = 4096;

impl<H> MrCache<H> {
    pub(crate) fn new(capacity: usize) -> MrCache<H> {
        MrCache { entries: Vec::new(), capacity, clock: 0, next_id: 1, made: 0, hits: 0 }
    }

    /// A registration covering `len` bytes at `addr` (`exposed`: readable by peers), from the
    /// cache or made by `register(start, len) -> (handle, key)` over the whole pages of the range
    /// (pages holding a byte of the buffer are mapped, so the rounding never names unmapped
    /// memory).
    pub(crate) fn acquire<E>(
        &mut self,
        addr: usize,
        len: usize,
        exposed: bool,
        register: impl FnOnce(usize, usize) -> Result<(H, u64), E>,
    ) -> Result<Reg, E> {
        self.clock += 1;
        let end = addr.saturating_add(len.max(1));
        if let Some(e) = self.entries.iter_mut().find(|e| e.start <= addr && end <= e.end && (e.exposed || !exposed)) {
            e.refs += 1;
            e.used = self.clock;
            self.hits += 1;
            return Ok(Reg { id: e.id, start: e.start, key: e.key });
        }
        let start = addr & !(PAGE - 1);
        let stop = end.div_ceil(PAGE).saturating_mul(PAGE);
        let (handle, key) = register(start, stop - start)?;
        self.made += 1;
        let id = self.next_id;
        self.next_id += 1;
        self.entries.push(Entry { id, start, end: stop, exposed, handle, key, refs: 1, used: self.clock });
        self.trim();
        Ok(Reg { id, start, key })
    }

    /// The registration object of entry `id`.
    pub(crate) fn handle(&self, id: u64) -> Option<&H> {
        self.entries.iter().find(|e| e.id == id).map(|e| &e.handle)
    }

    /// A transfer is done with entry `id`.
    pub(crate) fn release(&mut self, id: u64) {
        if let Some(e) = self.entries.iter_mut().find(|e| e.id == id) {
            e.refs = e.refs.saturating_sub(1);
        }
        self.trim();
    }

    /// Drops unreferenced entries beyond the capacity, least recently used first.
    fn trim(&mut self) {
        loop {
            let idle = self.entries.iter().filter(|e| e.refs == 0).count();
            if idle <= self.capacity {
                return;
            }
            let Some(i) = self
                .entries
                .iter()
                .enumerate()
                .filter(|(_, e)| e.refs == 0)
                .min_by_key(|(_, e)| e.used)
                .map(|(i, _)| i)
            else {
                return;
            };
            self.entries.swap_remove(i);
        }
    }

    /// Entries held (referenced or not).
    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.entries.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ranges_inside_a_registration_reuse_it_and_idle_ones_go_lru_first() {
        let mut c: MrCache<usize> = MrCache::new(2);
        let mut made = Vec::new();
        let mut reg = |c: &mut MrCache<usize>, addr: usize, len: usize, exposed: bool| {
            c.acquire(addr, len, exposed, |s, l| {
                made.push((s, l));
                Ok::<_, ()>((s, 100 + s as u64))
            })
            .unwrap()
        };
        let a = reg(&mut c, 5000, 10_000, true);
        assert_eq!((a.start, a.key), (4096, 4196));
        // Inside the registered pages: a hit, local or exposed.
        let b = reg(&mut c, 4096, 12_288, false);
        assert_eq!(b.id, a.id);
        // Exposed access is not served by a local-only registration.
        let l = reg(&mut c, 100_000, 10, false);
        let e = reg(&mut c, 100_000, 10, true);
        assert_ne!(l.id, e.id);
        assert_eq!(made, [(4096, 12_288), (98_304, 4096), (98_304, 4096)]);
        assert_eq!((c.made, c.hits), (3, 1));
        for r in [a, b, l, e] {
            c.release(r.id);
        }
        // Two idle entries kept: `a` (least recently used) went.
        assert_eq!(c.len(), 2);
        assert!(c.handle(a.id).is_none() && c.handle(l.id).is_some() && c.handle(e.id).is_some());
        // A referenced entry is never evicted.
        let mut z: MrCache<usize> = MrCache::new(0);
        let r = z.acquire(0, 1, false, |s, _| Ok::<_, ()>((s, 1))).unwrap();
        assert_eq!(z.len(), 1);
        z.release(r.id);
        assert_eq!(z.len(), 0, "no capacity: gone with its transfer");
        assert!(z.acquire(0, 1, false, |_, _| Err("refused")).is_err());
        assert_eq!(z.len(), 0);
    }
}
