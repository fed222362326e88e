//! The unexpected list: messages that arrived before their receive, one arrival-ordered queue
//! per source (as Open MPI's ob1 and MPICH's CH4 keep them per peer).
//!
//! A receive naming its source looks at that source's queue only, and takes from its front in
//! the common case, so a receive costs O(1) however many messages other sources have sent ahead
//! (one arrival-ordered `Vec` made a gather's root scan thousands of messages of the ranks that
//! ran ahead and shift the rest down on every take: 4 ranks on 2 CPUs spent 50% of their time
//! in that scan and `memmove`, and 8-byte `MPI_Gather`/`MPI_Reduce` took 12–24 × Open MPI's time).
//! `ANY_SOURCE` takes the earliest arrival among the sources' first matches: ids grow with
//! arrival, so the order is the one a single list had.

use std::collections::VecDeque;
use std::ops::{Index, IndexMut};

use super::matching::{Unexpected, Want};

/// Where a message is: its source's queue and its place in it. Valid until the next removal
/// from that queue.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct Slot {
    source: u32,
    pos: usize,
}

/// Unexpected messages by source, each queue in arrival (id) order.
#[derive(Debug, Default)]
pub(super) struct UnexpectedList {
    /// Per source rank: its messages, ids increasing.
    queues: Vec<VecDeque<(u64, Unexpected)>>,
    /// Sources whose queue is not empty, in no order (what an `ANY_SOURCE` receive looks at).
    busy: Vec<u32>,
    /// Messages in all queues.
    len: usize,
}

impl UnexpectedList {
    /// An empty list for sources `0..size` (others are added when they first send).
    pub(super) fn new(size: u32) -> UnexpectedList {
        UnexpectedList { queues: (0..size).map(|_| VecDeque::new()).collect(), busy: Vec::new(), len: 0 }
    }

    #[inline(always)]
    pub(super) fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// True if no message of `source` waits.
    #[inline(always)]
    pub(super) fn queue_is_empty(&self, source: u32) -> bool {
        self.queues.get(source as usize).is_none_or(VecDeque::is_empty)
    }

    /// Appends message `id` (larger than every id its source's queue holds, as ids are given in
    /// arrival order; an older one is put in its place all the same).
    pub(super) fn push(&mut self, (id, u): (u64, Unexpected)) {
        let s = u.source as usize;
        if s >= self.queues.len() {
            self.queues.resize_with(s + 1, VecDeque::new);
        }
        let q = &mut self.queues[s];
        if q.is_empty() {
            self.busy.push(u.source);
        }
        match q.back() {
            Some(&(last, _)) if last > id => {
                let at = q.partition_point(|&(k, _)| k < id);
                q.insert(at, (id, u));
            }
            _ => q.push_back((id, u)),
        }
        self.len += 1;
    }

    /// Takes the message at `slot` out.
    pub(super) fn remove(&mut self, slot: Slot) -> (u64, Unexpected) {
        let q = &mut self.queues[slot.source as usize];
        let e = if slot.pos == 0 { q.pop_front() } else { q.remove(slot.pos) };
        let Some(e) = e else { unreachable!("a slot names a message in the list") };
        if q.is_empty()
            && let Some(k) = self.busy.iter().position(|&s| s == slot.source)
        {
            self.busy.swap_remove(k);
        }
        self.len -= 1;
        e
    }

    /// The `k`-th message of `source`'s queue.
    pub(super) fn nth_of(&self, source: u32, k: usize) -> Option<Slot> {
        let q = self.queues.get(source as usize)?;
        (k < q.len()).then_some(Slot { source, pos: k })
    }

    /// The first message of `source` satisfying `f`.
    pub(super) fn find_from(&self, source: u32, f: impl Fn(u64, &Unexpected) -> bool) -> Option<Slot> {
        let q = self.queues.get(source as usize)?;
        q.iter().position(|(k, u)| f(*k, u)).map(|pos| Slot { source, pos })
    }

    /// The earliest arrival satisfying `f` (its source's queue has it first).
    pub(super) fn find_any(&self, f: impl Fn(u64, &Unexpected) -> bool) -> Option<Slot> {
        let mut best: Option<(u64, Slot)> = None;
        for &s in &self.busy {
            if let Some(slot) = self.find_from(s, &f) {
                let id = self[slot].0;
                if best.is_none_or(|(b, _)| id < b) {
                    best = Some((id, slot));
                }
            }
        }
        best.map(|(_, s)| s)
    }

    /// The first open message `want` matches (the earliest arrival for `ANY_SOURCE`).
    #[inline]
    pub(super) fn find(&self, want: Want) -> Option<Slot> {
        let f = |_: u64, u: &Unexpected| u.open() && want.matches(u.source, u.tag, u.context);
        if want.source >= 0 { self.find_from(want.source as u32, f) } else { self.find_any(f) }
    }

    /// Message `id`, from `source` if known.
    pub(super) fn find_id(&self, source: Option<u32>, id: u64) -> Option<Slot> {
        match source {
            Some(s) => self.find_from(s, |k, _| k == id),
            None => self.find_any(|k, _| k == id),
        }
    }

    /// Every message, in no particular order.
    pub(super) fn iter(&self) -> impl Iterator<Item = &(u64, Unexpected)> {
        self.busy.iter().flat_map(|&s| self.queues[s as usize].iter())
    }

    /// Every message's slot, in arrival order (valid until a removal).
    pub(super) fn slots(&self) -> Vec<Slot> {
        let mut all: Vec<(u64, Slot)> = self
            .busy
            .iter()
            .flat_map(|&s| {
                self.queues[s as usize].iter().enumerate().map(move |(pos, (k, _))| (*k, Slot { source: s, pos }))
            })
            .collect();
        all.sort_unstable_by_key(|e| e.0);
        all.into_iter().map(|e| e.1).collect()
    }

    /// Takes every message out, in arrival order.
    pub(super) fn take_all(&mut self) -> Vec<(u64, Unexpected)> {
        let mut all: Vec<(u64, Unexpected)> = Vec::with_capacity(self.len);
        for s in std::mem::take(&mut self.busy) {
            all.extend(self.queues[s as usize].drain(..));
        }
        self.len = 0;
        all.sort_unstable_by_key(|e| e.0);
        all
    }
}

impl Index<Slot> for UnexpectedList {
    type Output = (u64, Unexpected);

    fn index(&self, slot: Slot) -> &(u64, Unexpected) {
        &self.queues[slot.source as usize][slot.pos]
    }
}

impl IndexMut<Slot> for UnexpectedList {
    fn index_mut(&mut self, slot: Slot) -> &mut (u64, Unexpected) {
        &mut self.queues[slot.source as usize][slot.pos]
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::endpoint::{ANY_SOURCE, ANY_TAG};

    fn msg(source: u32, tag: i32) -> Unexpected {
        Unexpected::new(source, tag, 7, 0, 0)
    }

    fn want(source: i32, tag: i32) -> Want {
        Want { source, tag, context: 7 }
    }

    #[test]
    fn a_named_source_sees_its_own_queue_in_order() {
        let mut l = UnexpectedList::new(4);
        for (id, (s, t)) in [(1, 10), (2, 10), (1, 11), (3, 10), (1, 10)].into_iter().enumerate() {
            l.push((id as u64, msg(s, t)));
        }
        assert_eq!(l.iter().count(), 5);
        assert!(!l.queue_is_empty(1) && !l.queue_is_empty(3));
        assert!(l.queue_is_empty(0) && l.queue_is_empty(9), "no message of 0, and 9 never sent");
        let s = l.find(want(1, 10)).unwrap();
        assert_eq!(l.remove(s).0, 0);
        let s = l.find(want(1, 10)).unwrap();
        assert_eq!(l.remove(s).0, 4, "tag 11 is skipped, the next tag 10 of source 1 taken");
        assert_eq!(l.find(want(0, ANY_TAG)), None);
        assert_eq!(l.find(want(1, 12)), None);
        assert_eq!(l.iter().count(), 3);
    }

    #[test]
    fn any_source_takes_the_earliest_arrival() {
        let mut l = UnexpectedList::new(2);
        l.push((5, msg(3, 1)));
        l.push((6, msg(1, 2)));
        l.push((7, msg(0, 1)));
        let s = l.find(want(ANY_SOURCE, 1)).unwrap();
        assert_eq!(l[s].0, 5, "source 3 (beyond the initial size) arrived first");
        l.remove(s);
        let s = l.find(want(ANY_SOURCE, ANY_TAG)).unwrap();
        assert_eq!(l.remove(s).0, 6);
        let s = l.find(want(ANY_SOURCE, ANY_TAG)).unwrap();
        assert_eq!(l.remove(s).0, 7);
        assert!(l.is_empty() && l.find(want(ANY_SOURCE, ANY_TAG)).is_none());
    }

    #[test]
    fn claimed_and_reserved_messages_do_not_match() {
        let mut l = UnexpectedList::new(2);
        l.push((0, msg(1, 1)));
        l.push((1, msg(1, 1)));
        let s = l.find(want(1, 1)).unwrap();
        l[s].1.reserved = true;
        assert_eq!(l[l.find(want(1, 1)).unwrap()].0, 1);
        assert_eq!(l.find_id(Some(1), 0), Some(s), "found by id all the same");
        assert_eq!(l.find_id(None, 1).map(|s| l[s].0), Some(1));
    }

    #[test]
    fn order_is_kept_across_sources() {
        let mut l = UnexpectedList::new(3);
        l.push((2, msg(2, 0)));
        l.push((0, msg(1, 0)));
        l.push((3, msg(1, 0)));
        l.push((1, msg(1, 0)));
        let ids: Vec<u64> = l.slots().into_iter().map(|s| l[s].0).collect();
        assert_eq!(ids, [0, 1, 2, 3], "an older id is put in its place");
        assert_eq!(l.iter().count(), 4);
        let all: Vec<u64> = l.take_all().into_iter().map(|e| e.0).collect();
        assert_eq!(all, [0, 1, 2, 3]);
        assert!(l.is_empty() && l.iter().next().is_none());
    }
}
