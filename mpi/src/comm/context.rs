//! Choosing a new communicator's context: one value every member agrees on and that no other
//! communicator of any member uses, also when several threads create communicators at once.
//!
//! Each process keeps a mask of free context pairs ([`Contexts`]). A creation is a collective
//! over the parent communicator: the members allreduce (bitwise AND) their free masks and take the
//! lowest pair offered free everywhere. Several creations may be under way at once in one process (an
//! `MPI_Comm_idup` pending while the program makes other communicators, or threads under
//! `MPI_THREAD_MULTIPLE`), and their members may start them in different orders; so each round of
//! a creation offers one **window** (64 pairs, one mask word) chosen from the creation's key and
//! round number (the same in every member), and a window is reserved by the round that offers it
//! in this process until that round ends. A round that finds its window reserved by another
//! creation offers nothing and says so (a flag word ANDed with the masks). A pair free in every
//! member's offer is free and reserved for this creation everywhere: taken. Otherwise the next
//! round tries another window; a window found full by a round nobody was obstructed in is
//! skipped from then on, and once every window is, the creation fails. No creation waits for
//! another to end, so creations pending in different orders in different members (an idup
//! started before a blocking creation here, after it there) cannot deadlock, and no two
//! communicators of a process get one context. (MPICH's algorithm, `src/mpi/comm/contextid.c`,
//! lends the whole mask to one creation at a time instead.)
//!
//! A creation is named by a [`Key`], the same in every member and different from any other
//! creation a member may have under way at once: the parent's context and, for an
//! `MPI_Comm_idup`, its number among the parent's non-blocking collectives (blocking creations
//! take [`BLOCKING`]: a parent has one at a time). `MPI_Intercomm_merge` agrees among both groups
//! of an intercommunicator (the groups' local reductions joined by their leaders) under the lower
//! of the two groups' local contexts and [`MERGE`].
//!
//! On an intercommunicator each group agrees on its own receive context: a context need only be
//! free in the processes that receive in it (`Comm::send_ctx` is the other group's).

use super::Comm;
use crate::abi;
use crate::coll::{self, Tuning, algo::Reduction};
use crate::datatype::Kind;
use crate::error::{Fail, Res, Why};
use crate::op::OpKind;
use crate::state::Access;

/// Context pairs a process can have in use at once (beyond `MPI_COMM_WORLD`'s and
/// `MPI_COMM_SELF`'s).
pub const PAIRS: usize = 4096;
const WORDS: usize = PAIRS / 64;
/// The first context handed out (0–3 are `MPI_COMM_WORLD`'s and `MPI_COMM_SELF`'s).
const FIRST: u32 = nemesis::WORLD + 4;

/// A creation: its parent's context and its number (lower keys go first).
pub type Key = (u32, u32);
/// The number of a blocking creation.
pub const BLOCKING: u32 = u32::MAX;
/// The number of an `MPI_Intercomm_merge`.
pub const MERGE: u32 = u32::MAX - 1;

/// This process's context pairs: which are free, and the creations under way.
#[derive(Debug)]
pub struct Contexts {
    /// Bit `i` set: pair `FIRST + 2i` (point-to-point) and `+1` (collectives) is free.
    free: [u64; WORDS],
    /// The creations under way in this process.
    waiting: Vec<Creation>,
}

/// A creation under way in this process.
#[derive(Debug, Clone, Copy)]
struct Creation {
    key: Key,
    /// Its rounds so far (the same count in every member).
    round: u32,
    /// Windows found full in some member by an unobstructed round (the same in every member).
    full: u64,
    /// The window its current round offered (reserved in this process until the round ends).
    offered: Option<usize>,
}

impl Creation {
    /// The window of the creation's current round: a hash of the key and round number, moved on
    /// past windows known to be full (`None` once all are).
    fn window(&self) -> Option<usize> {
        if self.full == u64::MAX {
            return None;
        }
        // SplitMix64 of the key and round: the same in every member, spread over the windows.
        let mut z = (u64::from(self.key.0) << 32 | u64::from(self.key.1))
            .wrapping_add(u64::from(self.round).wrapping_mul(0x9E37_79B9_7F4A_7C15));
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^= z >> 31;
        let start = (z % WORDS as u64) as usize;
        (0..WORDS).map(|k| (start + k) % WORDS).find(|&w| self.full & (1 << w) == 0)
    }
}

impl Contexts {
    /// Every pair free.
    pub const fn new() -> Contexts {
        Contexts { free: [u64::MAX; WORDS], waiting: Vec::new() }
    }

    /// Gives pair `ctx` back (a freed communicator's, once nothing can use it).
    pub fn release(&mut self, ctx: u32) {
        if let Some(i) = ctx.checked_sub(FIRST).map(|d| (d / 2) as usize).filter(|&i| i < PAIRS) {
            self.free[i / 64] |= 1 << (i % 64);
        }
    }

    /// This round's contribution of creation `key`: whether its window was free of other
    /// creations' reservations here, and the free pairs of the window (the rest of the mask 0).
    pub fn contribute(&mut self, key: Key) -> (bool, [u64; WORDS]) {
        let k = match self.waiting.iter().position(|c| c.key == key) {
            Some(k) => k,
            None => {
                self.waiting.push(Creation { key, round: 0, full: 0, offered: None });
                self.waiting.len() - 1
            }
        };
        let mut mask = [0; WORDS];
        let Some(w) = self.waiting[k].window() else { return (true, mask) };
        let taken = self.waiting.iter().any(|c| c.key != key && c.offered == Some(w));
        if taken {
            return (false, mask);
        }
        self.waiting[k].offered = Some(w);
        mask[w] = self.free[w];
        (true, mask)
    }

    /// Ends a round of creation `key` with the allreduced flag (every member's window was
    /// unobstructed) and masks `all`: the agreed context, `Err` when no window has a pair free
    /// in every member, or `None` to run another round.
    pub fn settle(&mut self, key: Key, unobstructed: bool, all: &[u64; WORDS]) -> Option<Result<u32, ()>> {
        let k = self.waiting.iter().position(|c| c.key == key)?;
        let c = &mut self.waiting[k];
        c.offered = None;
        if let Some(w) = all.iter().position(|&x| x != 0) {
            self.waiting.swap_remove(k);
            let i = w * 64 + all[w].trailing_zeros() as usize;
            self.free[w] &= !(1 << (i % 64));
            return Some(Ok(FIRST + 2 * i as u32));
        }
        if unobstructed {
            match c.window() {
                Some(w) => c.full |= 1 << w,
                None => {
                    self.waiting.swap_remove(k);
                    return Some(Err(()));
                }
            }
        }
        c.round = c.round.wrapping_add(1);
        None
    }
}

impl Contexts {
    /// The free-pair mask, for a checkpoint (`crate::ft::image`); `None` while a creation is
    /// under way (its reservations are not state a restart can take up).
    pub fn saved(&self) -> Option<&[u64]> {
        self.waiting.is_empty().then_some(&self.free[..])
    }

    /// Puts back a mask [`saved`](Self::saved) (a restart); `false` if it is not one.
    pub fn restore(&mut self, free: &[u64]) -> bool {
        if free.len() != WORDS {
            return false;
        }
        self.free.copy_from_slice(free);
        self.waiting.clear();
        true
    }

    /// Forgets creation `key`, which failed.
    pub fn abandon(&mut self, key: Key) {
        self.waiting.retain(|c| c.key != key);
    }
}

/// A round's contribution as bytes: the ownership flag word, then the mask.
pub fn words_of(own: bool, mask: &[u64; WORDS]) -> Vec<u8> {
    let mut words = [0u64; WORDS + 1];
    words[0] = u64::from(own);
    words[1..].copy_from_slice(mask);
    words.iter().flat_map(|w| w.to_ne_bytes()).collect()
}

/// The allreduced bytes of a round: whether every member contributed its mask, and the mask.
pub fn of_words(bytes: &[u8]) -> (bool, [u64; WORDS]) {
    let word = |k: usize| bytes.get(8 * k..8 * (k + 1)).and_then(|b| b.try_into().ok()).map_or(0, u64::from_ne_bytes);
    (word(0) != 0, std::array::from_fn(|k| word(k + 1)))
}

/// The bytes of a round: one flag word and the mask.
pub const ROUND_BYTES: usize = 8 * (WORDS + 1);

/// The reduction of a round (bitwise AND of 64-bit words).
pub fn round_reduction() -> Reduction {
    Reduction::builtin(OpKind::Band, Kind::U64, 8)
}

/// The failure of a creation that found no context free in every member.
pub fn exhausted(ci: usize) -> Fail {
    Fail::new(
        abi::ERR_OTHER,
        Some(ci),
        Why::Other(format!("no context free in every member ({PAIRS} communicators at most)")),
    )
}

impl Default for Contexts {
    fn default() -> Self {
        Contexts::new()
    }
}

/// Agrees with the members of `parent` (table index `ci`) on a new context.
pub fn agree(acc: &mut Access, ci: usize, parent: &Comm, tu: &Tuning) -> Res<u32> {
    agree_among(acc, ci, parent, tu, coll::tag::COMM)
}

/// As [`agree`] among the members of `over` only, whose collective context is its parent's and
/// whose messages carry `tag` (`MPI_Comm_create_group`: the other members of the parent do not
/// take part, and the tag keeps concurrent creations apart).
pub fn agree_among(acc: &mut Access, ci: usize, parent: &Comm, tu: &Tuning, tag: i32) -> Res<u32> {
    agree_by(acc, ci, (parent.ctx, BLOCKING), |acc, bytes| {
        coll::allreduce_bytes(acc, parent, tu, bytes, round_reduction(), tag)
    })
}

/// The agreement of creation `key`, whose rounds `reduce` allreduces (bitwise AND) among every
/// member of the new communicator.
pub fn agree_by(
    acc: &mut Access,
    ci: usize,
    key: Key,
    mut reduce: impl FnMut(&mut Access, &mut Vec<u8>) -> Res<()>,
) -> Res<u32> {
    let mut spins = 0;
    loop {
        let (own, mask) = acc.st().contexts.contribute(key);
        let mut bytes = words_of(own, &mask);
        if let Err(e) = reduce(acc, &mut bytes) {
            acc.st().contexts.abandon(key);
            return Err(e);
        }
        let (owned, all) = of_words(&bytes);
        match acc.st().contexts.settle(key, owned, &all) {
            Some(Ok(ctx)) => return Ok(ctx),
            Some(Err(())) => return Err(exhausted(ci)),
            // No context offered free by every member (another creation reserved a member's
            // window): move the idups of this process on, then another window.
            None => {
                crate::p2p::complete::advance_colls(acc);
                acc.pause(&mut spins)
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// One round of creation `key` in process `c` alone (every member is `c`).
    fn alone(c: &mut Contexts, key: Key) -> Option<Result<u32, ()>> {
        let (own, m) = c.contribute(key);
        c.settle(key, own, &m)
    }

    #[test]
    fn a_free_pair_is_taken_and_released_pairs_come_back() {
        let mut c = Contexts::new();
        let a = alone(&mut c, (0, BLOCKING)).unwrap().unwrap();
        let b = alone(&mut c, (0, BLOCKING)).unwrap().unwrap();
        assert_ne!(a, b);
        assert!(a >= FIRST && (a - FIRST).is_multiple_of(2));
        c.release(a);
        assert_eq!(alone(&mut c, (0, BLOCKING)), Some(Ok(a)), "a released pair is reused");
    }

    #[test]
    fn a_reserved_window_is_not_offered_twice() {
        let mut c = Contexts::new();
        // An idup's round is in flight (its window reserved); a blocking creation whose window
        // is the same one offers nothing, then tries another window: it never waits.
        let idup = (8, 0);
        let (own, m) = c.contribute(idup);
        assert!(own);
        let w = m.iter().position(|&x| x != 0).unwrap();
        let mut got = None;
        for _ in 0..200 {
            let (own2, m2) = c.contribute((6, BLOCKING));
            if !own2 {
                assert!(m2.iter().all(|&x| x == 0));
            } else {
                assert_eq!(m2[w], 0, "the reserved window is not offered");
            }
            if let Some(r) = c.settle((6, BLOCKING), own2, &m2) {
                got = Some(r.unwrap());
                break;
            }
        }
        let blocking = got.expect("the blocking creation ends while the idup is in flight");
        let idup_ctx = c.settle(idup, true, &m).unwrap().unwrap();
        assert_ne!(blocking, idup_ctx);
    }

    #[test]
    fn every_window_full_fails_and_the_last_pair_is_found() {
        let mut c = Contexts::new();
        c.free = [0; WORDS];
        c.free[WORDS - 1] = 1 << 63;
        let mut rounds = 0;
        let ctx = loop {
            rounds += 1;
            if let Some(r) = alone(&mut c, (0, BLOCKING)) {
                break r.unwrap();
            }
        };
        assert_eq!(ctx, FIRST + 2 * (PAIRS as u32 - 1));
        assert!(rounds <= WORDS, "{rounds} rounds");
        let fails = loop {
            if let Some(r) = alone(&mut c, (0, BLOCKING)) {
                break r;
            }
        };
        assert_eq!(fails, Err(()));
        assert!(c.waiting.is_empty());
    }

    #[test]
    fn members_agree_on_a_pair_free_in_all() {
        let (mut a, mut b) = (Contexts::new(), Contexts::new());
        // `a` has two pairs in use, `b` a third: the agreed pair is free in both.
        let used: Vec<u32> = (0..2).map(|_| alone(&mut a, (0, BLOCKING)).unwrap().unwrap()).collect();
        let third = alone(&mut b, (0, BLOCKING)).unwrap().unwrap();
        let (oa, ma) = a.contribute((0, BLOCKING));
        let (ob, mb) = b.contribute((0, BLOCKING));
        let all: [u64; WORDS] = std::array::from_fn(|k| ma[k] & mb[k]);
        let x = a.settle((0, BLOCKING), oa && ob, &all).unwrap().unwrap();
        assert_eq!(b.settle((0, BLOCKING), oa && ob, &all), Some(Ok(x)));
        assert!(!used.contains(&x) && x != third);
    }
}
