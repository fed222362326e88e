//! The tables behind handles: one [`Table`] per kind of object (requests, datatypes, and the
//! kinds still to come: groups, operations, keyvals, info objects, error handlers).
//!
//! A handle is `base + index` (`crate::abi::handle`): a lookup is a subtraction, a bounds check
//! and one load, and a handle of another kind, a freed one or garbage names nothing. Freed slots
//! go on a free list and are reused (allocation-free once warm); the first `permanent` slots hold
//! predefined objects that cannot be freed. A freed handle may come back naming a new object, as
//! in MPICH: MPI makes using a freed handle erroneous, and the tables never let it reach freed
//! memory.

use std::ffi::c_int;

use crate::abi::handle::INDEX_BITS;

/// A table of objects of one kind, addressed by handles `base + index`.
#[derive(Debug)]
pub struct Table<T> {
    base: u32,
    slots: Vec<Slot<T>>,
    /// Head of the free list.
    free: Option<u32>,
    /// Slots `0..permanent` hold predefined objects: never freed.
    permanent: usize,
    /// Live objects.
    live: usize,
}

#[derive(Debug)]
enum Slot<T> {
    Free { next: Option<u32> },
    Used(T),
}

impl<T> Table<T> {
    /// An empty table whose handles are `base + index`.
    pub const fn new(base: u32) -> Table<T> {
        Table { base, slots: Vec::new(), free: None, permanent: 0, live: 0 }
    }

    /// Stores a predefined object (before any other is inserted): it keeps its index for ever.
    pub fn insert_permanent(&mut self, v: T) -> c_int {
        debug_assert_eq!(self.slots.len(), self.permanent, "permanent objects come first");
        let h = self.insert(v).unwrap_or(0);
        self.permanent = self.slots.len();
        h
    }

    /// Stores `v`; its handle, or `None` if the kind's handle space (2^26) is exhausted.
    pub fn insert(&mut self, v: T) -> Option<c_int> {
        let i = match self.free {
            Some(i) => {
                let s = &mut self.slots[i as usize];
                self.free = match *s {
                    Slot::Free { next } => next,
                    Slot::Used(_) => None,
                };
                *s = Slot::Used(v);
                i as usize
            }
            None => {
                if self.slots.len() >= 1 << INDEX_BITS {
                    return None;
                }
                self.slots.push(Slot::Used(v));
                self.slots.len() - 1
            }
        };
        self.live += 1;
        Some(self.handle(i))
    }

    /// The handle of slot `i`.
    #[inline(always)]
    pub fn handle(&self, i: usize) -> c_int {
        (self.base + i as u32) as c_int
    }

    /// The slot index handle `h` would have (maybe out of range or free).
    #[inline(always)]
    pub fn index_of(&self, h: c_int) -> usize {
        (h as u32).wrapping_sub(self.base) as usize
    }

    /// The slot index of handle `h` if it names a live object.
    #[inline]
    pub fn index(&self, h: c_int) -> Option<usize> {
        let i = self.index_of(h);
        self.at(i).map(|_| i)
    }

    /// The object of handle `h`.
    #[inline]
    pub fn get(&self, h: c_int) -> Option<&T> {
        self.at(self.index_of(h))
    }

    /// The object of handle `h`, mutably.
    #[inline]
    pub fn get_mut(&mut self, h: c_int) -> Option<&mut T> {
        let i = self.index_of(h);
        self.at_mut(i)
    }

    /// The object in slot `i`.
    #[inline]
    pub fn at(&self, i: usize) -> Option<&T> {
        match self.slots.get(i) {
            Some(Slot::Used(v)) => Some(v),
            _ => None,
        }
    }

    /// The object in slot `i`, mutably.
    #[inline]
    pub fn at_mut(&mut self, i: usize) -> Option<&mut T> {
        match self.slots.get_mut(i) {
            Some(Slot::Used(v)) => Some(v),
            _ => None,
        }
    }

    /// True if `h` names a predefined object of this table.
    pub fn is_permanent(&self, h: c_int) -> bool {
        self.index_of(h) < self.permanent
    }

    /// Frees slot `i` and returns its object (`None` if free or permanent).
    pub fn remove_at(&mut self, i: usize) -> Option<T> {
        if i < self.permanent {
            return None;
        }
        let s = self.slots.get_mut(i)?;
        if matches!(s, Slot::Free { .. }) {
            return None;
        }
        let old = std::mem::replace(s, Slot::Free { next: self.free });
        self.free = Some(i as u32);
        self.live -= 1;
        match old {
            Slot::Used(v) => Some(v),
            Slot::Free { .. } => None,
        }
    }

    /// Frees the object of handle `h`.
    pub fn remove(&mut self, h: c_int) -> Option<T> {
        self.remove_at(self.index_of(h))
    }

    /// Live objects, predefined ones included.
    pub fn len(&self) -> usize {
        self.live
    }

    /// True if nothing is stored.
    pub fn is_empty(&self) -> bool {
        self.live == 0
    }

    /// Every live object with its handle.
    pub fn iter(&self) -> impl Iterator<Item = (c_int, &T)> {
        self.slots.iter().enumerate().filter_map(|(i, s)| match s {
            Slot::Used(v) => Some((self.handle(i), v)),
            Slot::Free { .. } => None,
        })
    }

    /// The table's shape for a checkpoint (`crate::ft::image`): slots in all, predefined ones,
    /// and the free list from its head.
    pub fn layout(&self) -> (usize, usize, Vec<u32>) {
        let mut free = Vec::new();
        let mut at = self.free;
        while let Some(i) = at {
            free.push(i);
            at = match self.slots.get(i as usize) {
                Some(Slot::Free { next }) => *next,
                _ => None,
            };
        }
        (self.slots.len(), self.permanent, free)
    }

    /// Puts back a table of [`layout`](Self::layout) `(slots, permanent, free)` with objects
    /// `used` at their indices (a restart: every handle names what it named). The table must
    /// hold its predefined objects only, as many as then; slots neither used nor listed free
    /// (objects not restored) are freed after the listed ones. `Err`: why not.
    pub fn restore(
        &mut self,
        (slots, permanent, free): (usize, usize, &[u32]),
        used: Vec<(usize, T)>,
    ) -> Result<(), String> {
        if self.slots.len() != self.permanent || self.permanent != permanent {
            return Err(format!(
                "{} objects exist where the checkpoint's table had {permanent} predefined ones",
                self.live
            ));
        }
        if slots > 1 << INDEX_BITS || slots < permanent {
            return Err(format!("{slots} slots"));
        }
        let mut taken = vec![false; slots];
        for &(i, _) in &used {
            if i < permanent || i >= slots || std::mem::replace(&mut taken[i], true) {
                return Err(format!("object at slot {i} of {slots}"));
            }
        }
        self.slots.resize_with(slots, || Slot::Free { next: None });
        for (i, v) in used {
            self.slots[i] = Slot::Used(v);
            self.live += 1;
        }
        let mut order: Vec<usize> = Vec::with_capacity(slots - permanent);
        for i in free.iter().map(|&i| i as usize) {
            if i >= permanent && i < slots && !std::mem::replace(&mut taken[i], true) {
                order.push(i);
            }
        }
        order.extend((permanent..slots).filter(|&i| !taken[i]));
        self.free = None;
        for &i in order.iter().rev() {
            self.slots[i] = Slot::Free { next: self.free };
            self.free = Some(i as u32);
        }
        Ok(())
    }

    /// Drops every object (at `MPI_Finalize`), predefined ones included.
    pub fn clear(&mut self) {
        self.slots.clear();
        self.free = None;
        self.permanent = 0;
        self.live = 0;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::abi;

    #[test]
    fn slots_are_reused_and_freed_or_foreign_handles_name_nothing() {
        let mut t: Table<&str> = Table::new(abi::REQUEST_DIRECT);
        let p = t.insert_permanent("pair");
        let a = t.insert("a").unwrap();
        let b = t.insert("b").unwrap();
        assert_eq!(p as u32, abi::REQUEST_DIRECT);
        assert_eq!(a as u32, abi::REQUEST_DIRECT + 1);
        assert_eq!((t.get(a), t.get(b), t.len()), (Some(&"a"), Some(&"b"), 3));
        assert_eq!(t.remove(a), Some("a"));
        assert_eq!(t.get(a), None, "freed");
        assert_eq!(t.remove(a), None, "twice");
        assert_eq!(t.remove(p), None, "permanent");
        assert!(t.is_permanent(p) && !t.is_permanent(b));
        for garbage in [0, -1, abi::REQUEST_NULL, abi::COMM_WORLD, b + 1] {
            assert_eq!(t.get(garbage), None, "{garbage:#x}");
        }
        assert_eq!(t.insert("c"), Some(a), "the freed slot is reused");
        assert_eq!(t.iter().map(|(_, v)| *v).collect::<Vec<_>>(), ["pair", "c", "b"]);
        t.clear();
        assert!(t.is_empty());
    }

    #[test]
    fn a_restored_table_has_the_same_handles_and_free_list() {
        let mut t: Table<u32> = Table::new(abi::REQUEST_DIRECT);
        let h: Vec<c_int> = (0..6).map(|v| t.insert(v).unwrap()).collect();
        for &k in &[h[1], h[4], h[2]] {
            t.remove(k);
        }
        let (slots, permanent, free) = t.layout();
        assert_eq!((slots, permanent, free.clone()), (6, 0, vec![2, 4, 1]));
        let used: Vec<(usize, u32)> = t.iter().map(|(k, &v)| (t.index_of(k), v)).collect();
        let mut r: Table<u32> = Table::new(abi::REQUEST_DIRECT);
        r.restore((slots, permanent, &free), used).unwrap();
        for (k, v) in t.iter() {
            assert_eq!(r.get(k), Some(v), "{k:#x}");
        }
        assert_eq!((r.len(), r.layout()), (3, t.layout()));
        assert_eq!(r.get(h[1]), None, "a free slot stays free");
        assert_eq!((r.insert(9), t.insert(9)), (Some(h[2]), Some(h[2])), "the same slot is reused next");
        assert!(r.restore((6, 0, &[]), Vec::new()).is_err(), "only into a fresh table");
        // A slot neither used nor listed free (not restored) is free after the listed ones.
        let mut s: Table<u32> = Table::new(abi::REQUEST_DIRECT);
        s.restore((3, 0, &[2]), vec![(0, 7)]).unwrap();
        assert_eq!(s.layout().2, vec![2, 1]);
    }
}
