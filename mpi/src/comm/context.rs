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

/// This process's context pairs: which are free, and which creation holds the mask.
#[derive(Debug)]
pub struct Contexts {
    /// Bit `i` set: pair `FIRST + 2i` (point-to-point) and `+1` (collectives) is free.
    free: [u64; WORDS],
    /// Parent contexts of the creations under way in this process.
    waiting: Vec<u32>,
    /// The creation (by parent context) the mask is lent to.
    lent: Option<u32>,
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

    /// This round's contribution of the creation on `parent`: the mask if it may hold it.
    fn contribute(&mut self, parent: u32) -> (bool, [u64; WORDS]) {
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
    fn settle(&mut self, parent: u32, all_owned: bool, all: &[u64; WORDS]) -> Option<Result<u32, ()>> {
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
    let red = Reduction::builtin(OpKind::Band, Kind::U64, 8);
    let mut spins = 0;
    loop {
        let (own, mask) = acc.st().contexts.contribute(parent.ctx);
        let mut words = [0u64; WORDS + 1];
        words[0] = u64::from(own);
        words[1..].copy_from_slice(&mask);
        let mut bytes: Vec<u8> = words.iter().flat_map(|w| w.to_ne_bytes()).collect();
        let r = coll::allreduce_bytes(acc, parent, tu, &mut bytes, red, tag);
        if let Err(e) = r {
            let c = &mut acc.st().contexts;
            c.waiting.retain(|&p| p != parent.ctx);
            if c.lent == Some(parent.ctx) {
                c.lent = None;
            }
            return Err(e);
        }
        let mut all = [0u64; WORDS];
        for (k, w) in all.iter_mut().enumerate() {
            *w = u64::from_ne_bytes(bytes[8 * (k + 1)..8 * (k + 2)].try_into().unwrap_or([0; 8]));
        }
        let owned = bytes[..8] != [0; 8];
        match acc.st().contexts.settle(parent.ctx, owned, &all) {
            Some(Ok(ctx)) => return Ok(ctx),
            Some(Err(())) => {
                return Err(Fail::new(
                    abi::ERR_OTHER,
                    Some(ci),
                    Why::Other(format!("no context free in every member ({PAIRS} communicators at most)")),
                ));
            }
            // Another creation held a member's mask: let it finish, then try again.
            None => acc.pause(&mut spins),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_lowest_free_pair_is_taken_and_released_pairs_come_back() {
        let mut c = Contexts::new();
        let (own, m) = c.contribute(0);
        assert!(own);
        assert_eq!(c.settle(0, true, &m), Some(Ok(FIRST)));
        let (_, m) = c.contribute(0);
        assert_eq!(c.settle(0, true, &m), Some(Ok(FIRST + 2)));
        c.release(FIRST);
        let (_, m) = c.contribute(0);
        assert_eq!(c.settle(0, true, &m), Some(Ok(FIRST)), "a released pair is reused");
    }

    #[test]
    fn the_mask_goes_to_the_lowest_waiting_parent() {
        let mut c = Contexts::new();
        // Parent 8 starts first and holds the mask for its round.
        assert!(c.contribute(8).0);
        // Parent 6 arrives meanwhile: it does not get the mask while 8 holds it.
        assert!(!c.contribute(6).0);
        // 8's round ends without every member's mask (another process lent it elsewhere).
        assert_eq!(c.settle(8, false, &[0; WORDS]), None);
        // Now 6, the lowest waiting, gets it; 8 does not.
        assert!(!c.contribute(8).0);
        let (own, m) = c.contribute(6);
        assert!(own);
        assert_eq!(c.settle(6, true, &m), Some(Ok(FIRST)));
        let (own, m) = c.contribute(8);
        assert!(own, "after 6 is done, 8 holds the mask");
        assert_eq!(c.settle(8, true, &m), Some(Ok(FIRST + 2)));
    }

    #[test]
    fn members_agree_on_a_pair_free_in_all() {
        let (mut a, mut b) = (Contexts::new(), Contexts::new());
        // `a` has its first two pairs in use, `b` its third.
        for _ in 0..2 {
            let (_, m) = a.contribute(0);
            a.settle(0, true, &m);
        }
        b.free[0] &= !(1 << 2);
        let (_, ma) = a.contribute(0);
        let (_, mb) = b.contribute(0);
        let all: [u64; WORDS] = std::array::from_fn(|k| ma[k] & mb[k]);
        assert_eq!(a.settle(0, true, &all), Some(Ok(FIRST + 6)));
        assert_eq!(b.settle(0, true, &all), Some(Ok(FIRST + 6)));
    }
}
