//! Choosing a new communicator's context: one value every member agrees on and that no other
//! communicator of any member uses, also when several threads create communicators at once.
//!
//! Each process keeps a mask of free context pairs ([`Contexts`]). A creation is a collective
//! over the parent communicator: the members allreduce (bitwise AND) their free masks and take the
//! lowest pair free everywhere. Under `MPI_THREAD_MULTIPLE` several creations on different parents
//! may run at once in one process, and their members may meet them in different orders; so the
//! mask is lent to one creation at a time, the one with the lowest parent context among those
//! waiting in this process, and a creation that does not hold its mask in a round contributes an
//! empty one. A round succeeds only if every member contributed its mask (a flag word ANDed with
//! the masks); otherwise all retry. The creation with the lowest parent context in the whole job
//! gets the mask in every member and succeeds, then the next: no deadlock, no two communicators
//! with one context (MPICH's algorithm, `src/mpi/comm/contextid.c`, simplified).
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

/// This process's context pairs: which are free, and which creation holds the mask.
#[derive(Debug)]
pub struct Contexts {
    /// Bit `i` set: pair `FIRST + 2i` (point-to-point) and `+1` (collectives) is free.
    free: [u64; WORDS],
    /// The creations under way in this process.
    waiting: Vec<Key>,
    /// The creation the mask is lent to.
    lent: Option<Key>,
}

impl Contexts {
    /// Every pair free.
    pub const fn new() -> Contexts {
        Contexts { free: [u64::MAX; WORDS], waiting: Vec::new(), lent: None }
    }

    /// Gives pair `ctx` back (a freed communicator's, once nothing can use it).
    pub fn release(&mut self, ctx: u32) {
        if let Some(i) = ctx.checked_sub(FIRST).map(|d| (d / 2) as usize).filter(|&i| i < PAIRS) {
            self.free[i / 64] |= 1 << (i % 64);
        }
    }

    /// This round's contribution of creation `parent`: the mask if it may hold it.
    pub fn contribute(&mut self, parent: Key) -> (bool, [u64; WORDS]) {
        if !self.waiting.contains(&parent) {
            self.waiting.push(parent);
        }
        let lowest = self.waiting.iter().copied().min() == Some(parent);
        let own = lowest && self.lent.is_none_or(|p| p == parent);
        if own {
            self.lent = Some(parent);
            (true, self.free)
        } else {
            (false, [0; WORDS])
        }
    }

    /// Ends a round of the creation on `parent` with the allreduced `all`: the agreed context,
    /// or `None` to retry.
    pub fn settle(&mut self, parent: Key, all_owned: bool, all: &[u64; WORDS]) -> Option<Result<u32, ()>> {
        if self.lent == Some(parent) {
            self.lent = None;
        }
        if !all_owned {
            return None;
        }
        self.waiting.retain(|&p| p != parent);
        let Some(w) = all.iter().position(|&x| x != 0) else { return Some(Err(())) };
        let i = w * 64 + all[w].trailing_zeros() as usize;
        self.free[w] &= !(1 << (i % 64));
        Some(Ok(FIRST + 2 * i as u32))
    }
}

impl Contexts {
    /// Forgets creation `parent`, which failed.
    pub fn abandon(&mut self, parent: Key) {
        self.waiting.retain(|&p| p != parent);
        if self.lent == Some(parent) {
            self.lent = None;
        }
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
            // Another creation held a member's mask: let it finish (an `MPI_Comm_idup` of this
            // process among them: its schedule is advanced here), then try again.
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

    #[test]
    fn the_lowest_free_pair_is_taken_and_released_pairs_come_back() {
        let mut c = Contexts::new();
        let (own, m) = c.contribute((0, BLOCKING));
        assert!(own);
        assert_eq!(c.settle((0, BLOCKING), true, &m), Some(Ok(FIRST)));
        let (_, m) = c.contribute((0, BLOCKING));
        assert_eq!(c.settle((0, BLOCKING), true, &m), Some(Ok(FIRST + 2)));
        c.release(FIRST);
        let (_, m) = c.contribute((0, BLOCKING));
        assert_eq!(c.settle((0, BLOCKING), true, &m), Some(Ok(FIRST)), "a released pair is reused");
    }

    #[test]
    fn the_mask_goes_to_the_lowest_waiting_parent() {
        let mut c = Contexts::new();
        // Parent 8 starts first and holds the mask for its round.
        assert!(c.contribute((8, BLOCKING)).0);
        // Parent 6 arrives meanwhile: it does not get the mask while 8 holds it.
        assert!(!c.contribute((6, BLOCKING)).0);
        // 8's round ends without every member's mask (another process lent it elsewhere).
        assert_eq!(c.settle((8, BLOCKING), false, &[0; WORDS]), None);
        // Now 6, the lowest waiting, gets it; 8 does not.
        assert!(!c.contribute((8, BLOCKING)).0);
        let (own, m) = c.contribute((6, BLOCKING));
        assert!(own);
        assert_eq!(c.settle((6, BLOCKING), true, &m), Some(Ok(FIRST)));
        let (own, m) = c.contribute((8, BLOCKING));
        assert!(own, "after 6 is done, 8 holds the mask");
        assert_eq!(c.settle((8, BLOCKING), true, &m), Some(Ok(FIRST + 2)));
    }

    #[test]
    fn members_agree_on_a_pair_free_in_all() {
        let (mut a, mut b) = (Contexts::new(), Contexts::new());
        // `a` has its first two pairs in use, `b` its third.
        for _ in 0..2 {
            let (_, m) = a.contribute((0, BLOCKING));
            a.settle((0, BLOCKING), true, &m);
        }
        b.free[0] &= !(1 << 2);
        let (_, ma) = a.contribute((0, BLOCKING));
        let (_, mb) = b.contribute((0, BLOCKING));
        let all: [u64; WORDS] = std::array::from_fn(|k| ma[k] & mb[k]);
        assert_eq!(a.settle((0, BLOCKING), true, &all), Some(Ok(FIRST + 6)));
        assert_eq!(b.settle((0, BLOCKING), true, &all), Some(Ok(FIRST + 6)));
    }
}
