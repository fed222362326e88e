//! The collective algorithms, over a [`Team`] (a list of job ranks and this process's place in
//! it) and [`Ops`] (the Endpoint in the collectives' context); gather, scatter and allgather in
//! `algo/blocks.rs`.
//!
//! Every transfer is cut into pieces of at most the eager limit, so every piece goes eagerly: an
//! eager send completes once its data is in the node's cells, whatever the receiver does, so no
//! order of sends can deadlock and no piece waits for a rendezvous handshake. (Moving large
//! pieces by rendezvous instead, for the single-copy path, is a possible refinement.) Receives
//! that data will arrive into are posted before the matching sends where the pattern allows, so
//! the data lands in place instead of being copied out of an unexpected message.
//!
//! Combining order: every reduction combines the lower rank's data on the left
//! (`acc = lower ⊕ higher`), so ranks that combine the same two partial results get the same bits
//! (floating-point `MAX` with a NaN is not symmetric), and reductions are in rank order as MPI
//! specifies for non-commutative operations.

mod blocks;
pub use blocks::{
    GATHER_IN_TURN_MAX, allgather_bruck, allgather_ring, gather_binomial, gather_flat, scatter_binomial, scatter_flat,
};

use std::collections::VecDeque;

use nemesis::Request;

use super::model::pow2_floor;
use crate::abi;
use crate::datatype::Kind;
use crate::error::{Fail, Res, Why};
use crate::op::{Loc, OpKind, UserCall, reduce, reduce_loc};
use crate::state::Access;

/// Ranks taking part in one collective step.
#[derive(Clone, Copy, Debug)]
pub struct Team<'a> {
    /// Job ranks of the members, in team order.
    pub ranks: &'a [u32],
    /// This process's index in `ranks`.
    pub me: usize,
}

impl Team<'_> {
    pub fn size(&self) -> usize {
        self.ranks.len()
    }

    /// Job rank of member `i`.
    fn at(&self, i: usize) -> u32 {
        self.ranks[i % self.ranks.len()]
    }

    /// Rank relative to `root`.
    fn rel(&self, root: usize) -> usize {
        (self.me + self.size() - root) % self.size()
    }

    /// Job rank of the member at relative rank `rel` from `root`.
    fn abs(&self, root: usize, rel: usize) -> u32 {
        self.at(root + rel)
    }
}

/// A reduction: the operation and the elements' kind and size.
#[derive(Clone, Copy, Debug)]
pub struct Reduction {
    pub op: OpKind,
    pub kind: Kind,
    pub elem: usize,
    /// A user's operation (`op` and `kind` are then unused).
    pub user: Option<UserCall>,
    /// `MPI_MINLOC`/`MPI_MAXLOC` on packed pairs: `kind` is the value's, this the index's kind
    /// (`op` is then unused).
    pub loc: Option<(Loc, Kind)>,
}

impl Reduction {
    /// A predefined operation on elements of `kind`, `elem` bytes each.
    pub fn builtin(op: OpKind, kind: Kind, elem: usize) -> Reduction {
        Reduction { op, kind, elem, user: None, loc: None }
    }

    /// False for a user's operation declared non-commutative: the ranks' data must then be
    /// combined in rank order over the whole communicator (no per-node levels).
    pub fn commutative(&self) -> bool {
        self.user.is_none_or(|u| u.commute)
    }

    /// `acc = acc ⊕ src`.
    fn right(&self, acc: &mut [u8], src: &[u8]) {
        match self.user {
            Some(u) => {
                let mut tmp = src.to_vec();
                u.apply(acc, &mut tmp);
                acc.copy_from_slice(&tmp);
            }
            None => match self.loc {
                Some((loc, index)) => reduce_loc(loc, self.kind, index, acc, src),
                None => reduce(self.op, self.kind, acc, src),
            },
        }
    }

    /// `acc = src ⊕ acc`, using `src` as scratch (it may end holding the result too).
    fn left(&self, acc: &mut [u8], src: &mut [u8]) {
        match self.user {
            Some(u) => u.apply(src, acc),
            // Commutative: `src ⊕ acc` is `acc ⊕ src`.
            None if self.loc.is_some() => self.right(acc, src),
            None => {
                reduce(self.op, self.kind, src, acc);
                acc.copy_from_slice(src);
            }
        }
    }

    /// `acc = src ⊕ acc` (`MPI_Reduce_local`), `src` used as scratch.
    pub fn combine_lower(&self, acc: &mut [u8], src: &mut [u8]) {
        self.left(acc, src);
    }

    /// `acc = acc ⊕ src` (`src` from a higher rank).
    pub fn combine_higher(&self, acc: &mut [u8], src: &[u8]) {
        self.right(acc, src);
    }

    /// Combines `other`, which came from a lower (`lower`) or higher team rank, into `acc`.
    fn combine(&self, acc: &mut [u8], other: &mut [u8], lower: bool) {
        if lower { self.left(acc, other) } else { self.right(acc, other) }
    }
}

/// The Endpoint in one collective's context and tag, reached through the call's [`Access`] (so
/// that waiting lets other threads in under `MPI_THREAD_MULTIPLE`). Receives posted through it
/// are waited for before it is dropped, whatever happens, so a buffer is never written after its
/// collective returned.
pub struct Ops<'e> {
    acc: &'e mut Access,
    ctx: u32,
    /// The context sends carry (`ctx` but between the groups of an intercommunicator).
    send_ctx: u32,
    tag: i32,
    /// Largest piece (the eager limit).
    chunk: usize,
    /// Receives posted and not yet waited for, in posting order.
    posted: VecDeque<Request>,
}

impl Drop for Ops<'_> {
    fn drop(&mut self) {
        while let Some(r) = self.posted.pop_front() {
            let _ = self.acc.ep_wait(r);
        }
    }
}

/// A posted receive of one piece: its request and length.
#[derive(Clone, Copy, Debug)]
pub struct Piece {
    req: Request,
    len: usize,
}

fn ep_fail(e: nemesis::Error) -> Fail {
    Fail { code: crate::error::code_of(&e), comm: None, why: Why::Endpoint(e) }
}

fn mismatch(expected: usize, got: usize) -> Fail {
    Fail::new(abi::ERR_TRUNCATE, None, Why::Mismatch { expected, got })
}

impl<'e> Ops<'e> {
    /// Collective operations on MPI's running Endpoint.
    pub fn new(acc: &'e mut Access, ctx: u32, tag: i32) -> Res<Ops<'e>> {
        Ops::between(acc, ctx, ctx, tag)
    }

    /// Operations received in context `ctx` and sent in `send_ctx` (between the two groups of an
    /// intercommunicator).
    pub fn between(acc: &'e mut Access, ctx: u32, send_ctx: u32, tag: i32) -> Res<Ops<'e>> {
        let chunk = acc.ep()?.eager_limit().max(1);
        Ok(Ops { acc, ctx, send_ctx, tag, chunk, posted: VecDeque::new() })
    }

    /// The call's access to the state (no receive of these operations may be pending).
    pub fn access(&mut self) -> &mut Access {
        self.acc
    }

    /// The largest piece.
    pub fn chunk(&self) -> usize {
        self.chunk
    }

    /// Piece ranges of `len` bytes (one empty piece for 0).
    fn pieces(&self, len: usize) -> impl Iterator<Item = std::ops::Range<usize>> + use<> {
        let chunk = self.chunk;
        (0..len.div_ceil(chunk).max(1)).map(move |k| k * chunk..((k + 1) * chunk).min(len))
    }

    /// Sends `data` to job rank `to`.
    pub fn send(&mut self, to: u32, data: &[u8]) -> Res<()> {
        for r in self.pieces(data.len()) {
            self.acc.ep_send(&data[r], to, self.tag, self.send_ctx, false)?.map_err(ep_fail)?;
        }
        Ok(())
    }

    /// Receives exactly `buf.len()` bytes from job rank `from`.
    pub fn recv(&mut self, from: u32, buf: &mut [u8]) -> Res<()> {
        for r in self.pieces(buf.len()) {
            let want = r.len();
            let st = self.acc.ep_recv(&mut buf[r], from as i32, self.tag, self.ctx)?.map_err(ep_fail)?;
            if st.len != want {
                return Err(mismatch(want, st.len));
            }
        }
        Ok(())
    }

    /// Posts the receives of `len` bytes at `ptr` from job rank `from`; the pieces are waited for
    /// with [`wait`](Self::wait) (or when `self` drops).
    ///
    /// # Safety
    /// The `len` bytes at `ptr` must stay valid for writes and otherwise untouched until the
    /// pieces are waited for.
    pub unsafe fn post(&mut self, from: u32, ptr: *mut u8, len: usize) -> Res<Vec<Piece>> {
        let mut out = Vec::new();
        for r in self.pieces(len) {
            let n = r.len();
            // SAFETY: within the caller's `len` bytes, which stay valid until waited for; `self`
            // waits for every posted piece before it drops.
            let req = unsafe { self.acc.ep()?.irecv_raw(ptr.add(r.start), n, from as i32, self.tag, self.ctx) }
                .map_err(ep_fail)?;
            self.posted.push_back(req);
            out.push(Piece { req, len: n });
        }
        Ok(out)
    }

    /// Waits for posted pieces, checking their lengths; all are waited for even if one fails.
    pub fn wait(&mut self, pieces: &[Piece]) -> Res<()> {
        let mut res = Ok(());
        for p in pieces {
            if let Some(i) = self.posted.iter().position(|&r| r == p.req) {
                self.posted.remove(i);
            }
            let r = match self.acc.ep_wait(p.req) {
                Ok(Ok(st)) if st.len == p.len => Ok(()),
                Ok(Ok(st)) => Err(mismatch(p.len, st.len)),
                Ok(Err(e)) => Err(ep_fail(e)),
                Err(f) => Err(f),
            };
            if res.is_ok() {
                res = r;
            }
        }
        res
    }

    /// Runs `f`; every receive it posted and left unwaited is waited for when it returns, early
    /// or not, or unwinds. Functions that post into buffers they borrow run in here, so that no
    /// receive outlives its buffer's borrow.
    pub fn settled<T>(&mut self, f: impl FnOnce(&mut Ops<'e>) -> T) -> T {
        struct Guard<'a, 'e> {
            ops: &'a mut Ops<'e>,
            mark: usize,
        }
        impl Drop for Guard<'_, '_> {
            fn drop(&mut self) {
                while self.ops.posted.len() > self.mark {
                    if let Some(r) = self.ops.posted.pop_back() {
                        let _ = self.ops.acc.ep_wait(r);
                    }
                }
            }
        }
        let mark = self.posted.len();
        let g = Guard { ops: self, mark };
        f(&mut *g.ops)
    }

    /// Sends `data` to `to` while receiving `buf.len()` bytes from `from`.
    pub fn exchange(&mut self, to: u32, data: &[u8], from: u32, buf: &mut [u8]) -> Res<()> {
        self.settled(|ops| {
            // SAFETY: `buf` is borrowed for this whole call, and `settled` waits for the pieces
            // before it returns.
            let pieces = unsafe { ops.post(from, buf.as_mut_ptr(), buf.len()) }?;
            let sent = ops.send(to, data);
            let got = ops.wait(&pieces);
            sent.and(got)
        })
    }
}

/// `data` and `buf` from one buffer's disjoint ranges `a` (read) and `b` (written).
pub(super) fn split_ranges(buf: &mut [u8], a: std::ops::Range<usize>, b: std::ops::Range<usize>) -> (&[u8], &mut [u8]) {
    debug_assert!(a.end <= b.start || b.end <= a.start);
    if a.end <= b.start {
        let (lo, hi) = buf.split_at_mut(b.start);
        (&lo[a], &mut hi[..b.end - b.start])
    } else {
        let (lo, hi) = buf.split_at_mut(a.start);
        (&hi[..a.end - a.start], &mut lo[b])
    }
}

// ---------------------------------------------------------------------------------------------
// Broadcast.

/// Flat tree: the root sends to every member in turn.
pub fn bcast_flat(ops: &mut Ops, t: Team, root: usize, buf: &mut [u8]) -> Res<()> {
    if t.me == root {
        for rel in 1..t.size() {
            ops.send(t.abs(root, rel), buf)?;
        }
        Ok(())
    } else {
        ops.recv(t.at(root), buf)
    }
}

/// Binomial tree: relative rank `r` receives from `r − lowbit(r)`, then sends to `r + 2^k` for
/// the powers of two below `lowbit(r)`.
pub fn bcast_binomial(ops: &mut Ops, t: Team, root: usize, buf: &mut [u8]) -> Res<()> {
    let (n, rel) = (t.size(), t.rel(root));
    let mut mask = 1;
    while mask < n {
        if rel & mask != 0 {
            ops.recv(t.abs(root, rel - mask), buf)?;
            break;
        }
        mask <<= 1;
    }
    mask >>= 1;
    while mask > 0 {
        if rel + mask < n {
            ops.send(t.abs(root, rel + mask), buf)?;
        }
        mask >>= 1;
    }
    Ok(())
}

/// Segmented chain (pipeline) in relative rank order: every segment's receive is posted at
/// once; each segment is forwarded as soon as it has arrived.
pub fn bcast_chain(ops: &mut Ops, t: Team, root: usize, buf: &mut [u8], seg: usize) -> Res<()> {
    let (n, rel) = (t.size(), t.rel(root));
    let seg = seg.clamp(1, ops.chunk());
    let next = (rel + 1 < n).then(|| t.abs(root, rel + 1));
    let segs = buf.len().div_ceil(seg).max(1);
    let len = buf.len();
    let range = |k: usize| k * seg..((k + 1) * seg).min(len);
    if rel == 0 {
        if let Some(next) = next {
            for k in 0..segs {
                ops.send(next, &buf[range(k)])?;
            }
        }
        return Ok(());
    }
    let prev = t.abs(root, rel - 1);
    let base = buf.as_mut_ptr();
    ops.settled(|ops| {
        let mut posted = Vec::with_capacity(segs);
        for k in 0..segs {
            let r = range(k);
            // SAFETY: `buf` is borrowed for this whole call and only reached through `base` until
            // every piece is waited for (`settled` waits for them on every path).
            posted.push(unsafe { ops.post(prev, base.add(r.start), r.len()) }?);
        }
        for (k, pieces) in posted.iter().enumerate() {
            ops.wait(pieces)?;
            if let Some(next) = next {
                let r = range(k);
                // SAFETY: segment k has arrived (waited for above) and no receive writes it any
                // more; the pointer derives from `buf`, borrowed for this call.
                let data = unsafe { std::slice::from_raw_parts(base.add(r.start), r.len()) };
                ops.send(next, data)?;
            }
        }
        Ok(())
    })
}

// ---------------------------------------------------------------------------------------------
// Reduce and allreduce. `acc` holds this rank's contribution and ends holding the result (at the
// root, or everywhere for allreduce).

/// Flat: the root combines every other member's contribution in rank order.
pub fn reduce_flat(ops: &mut Ops, t: Team, root: usize, acc: &mut [u8], red: Reduction) -> Res<()> {
    if t.me != root {
        return ops.send(t.at(root), acc);
    }
    let mut tmp = vec![0u8; acc.len()];
    let mut result: Option<Vec<u8>> = None;
    for i in 0..t.size() {
        let part: &[u8] = if i == root {
            acc
        } else {
            ops.recv(t.at(i), &mut tmp)?;
            &tmp
        };
        match result.as_mut() {
            None => result = Some(part.to_vec()),
            Some(r) => red.right(r, part),
        }
    }
    if let Some(r) = result {
        acc.copy_from_slice(&r);
    }
    Ok(())
}

/// Binomial tree on relative ranks: at step `mask`, a rank with that bit set sends its partial
/// result to `rel − mask` and stops; the others combine what `rel + mask` sends.
pub fn reduce_binomial(ops: &mut Ops, t: Team, root: usize, acc: &mut [u8], red: Reduction) -> Res<()> {
    let (n, rel) = (t.size(), t.rel(root));
    let mut tmp = vec![0u8; acc.len()];
    let mut mask = 1;
    while mask < n {
        if rel & mask != 0 {
            return ops.send(t.abs(root, rel - mask), acc);
        }
        if rel + mask < n {
            ops.recv(t.abs(root, rel + mask), &mut tmp)?;
            // In relative-rank order (rank order when the root is 0; every predefined operation
            // is commutative).
            red.right(acc, &tmp);
        }
        mask <<= 1;
    }
    Ok(())
}

/// The shape of the power-of-two algorithms: `p2` ranks take part, the first `2·rem` ranks fold
/// pairwise (even into odd) first.
struct Fold {
    p2: usize,
    rem: usize,
    /// This rank's index among the `p2` (None: it folded its data into its odd neighbour).
    newrank: Option<usize>,
}

impl Fold {
    fn new(n: usize, me: usize) -> Fold {
        let p2 = pow2_floor(n);
        let rem = n - p2;
        let newrank = if me < 2 * rem { (me % 2 == 1).then_some(me / 2) } else { Some(me - rem) };
        Fold { p2, rem, newrank }
    }

    /// Team rank of participant `j`.
    fn real(&self, j: usize) -> usize {
        if j < self.rem { 2 * j + 1 } else { j + self.rem }
    }
}

/// The fold: even ranks below `2·rem` send their data to their odd neighbour, which combines it.
fn fold_in(ops: &mut Ops, t: Team, f: &Fold, acc: &mut [u8], red: Reduction) -> Res<()> {
    if t.me < 2 * f.rem {
        if t.me.is_multiple_of(2) {
            ops.send(t.at(t.me + 1), acc)?;
        } else {
            let mut tmp = vec![0u8; acc.len()];
            ops.recv(t.at(t.me - 1), &mut tmp)?;
            red.left(acc, &mut tmp);
        }
    }
    Ok(())
}

/// The unfold: odd ranks below `2·rem` send the result back to their even neighbour.
fn fold_out(ops: &mut Ops, t: Team, f: &Fold, acc: &mut [u8]) -> Res<()> {
    if t.me < 2 * f.rem {
        if t.me % 2 == 1 {
            ops.send(t.at(t.me - 1), acc)?;
        } else {
            ops.recv(t.at(t.me + 1), acc)?;
        }
    }
    Ok(())
}

/// Recursive doubling: `log2 p'` exchanges of the whole vector, each followed by a reduction;
/// ranks beyond the power of two fold in first and get the result at the end.
pub fn allreduce_recursive_doubling(ops: &mut Ops, t: Team, acc: &mut [u8], red: Reduction) -> Res<()> {
    let f = Fold::new(t.size(), t.me);
    fold_in(ops, t, &f, acc, red)?;
    if let Some(me) = f.newrank {
        let mut tmp = vec![0u8; acc.len()];
        let mut mask = 1;
        while mask < f.p2 {
            let partner = me ^ mask;
            let peer = t.at(f.real(partner));
            ops.exchange(peer, acc, peer, &mut tmp)?;
            red.combine(acc, &mut tmp, partner < me);
            mask <<= 1;
        }
    }
    fold_out(ops, t, &f, acc)
}

/// Element blocks of the Rabenseifner algorithms: `p2` blocks of whole elements, the first
/// `count % p2` one element larger. Returns byte offsets (`p2 + 1` of them).
fn blocks(len: usize, elem: usize, p2: usize) -> Vec<usize> {
    let count = len / elem;
    let (q, r) = (count / p2, count % p2);
    let mut off = Vec::with_capacity(p2 + 1);
    let mut at = 0;
    for i in 0..p2 {
        off.push(at * elem);
        at += q + usize::from(i < r);
    }
    off.push(len);
    off
}

/// Recursive halving: on return participant `me` holds the reduction of block `me` (its window
/// `[me, me+1)`); the exchanges start with the farthest partner and halve the window each time.
fn reduce_scatter_halving(
    ops: &mut Ops,
    t: Team,
    f: &Fold,
    me: usize,
    acc: &mut [u8],
    off: &[usize],
    red: Reduction,
) -> Res<()> {
    let mut tmp = vec![0u8; acc.len()];
    let (mut lo, mut hi) = (0, f.p2);
    let mut d = f.p2 / 2;
    while d > 0 {
        let partner = me ^ d;
        let mid = lo + (hi - lo) / 2;
        // Keep the half that holds my own block; send the other.
        let (keep, give) = if me < partner { ((lo, mid), (mid, hi)) } else { ((mid, hi), (lo, mid)) };
        let peer = t.at(f.real(partner));
        let keep_r = off[keep.0]..off[keep.1];
        let give_r = off[give.0]..off[give.1];
        ops.exchange(peer, &acc[give_r], peer, &mut tmp[keep_r.clone()])?;
        red.combine(&mut acc[keep_r.clone()], &mut tmp[keep_r], partner < me);
        (lo, hi) = keep;
        d /= 2;
    }
    Ok(())
}

/// Rabenseifner's allreduce: reduce-scatter by recursive halving, then allgather by recursive
/// doubling (B:4436–4443).
pub fn allreduce_rabenseifner(ops: &mut Ops, t: Team, acc: &mut [u8], red: Reduction) -> Res<()> {
    let f = Fold::new(t.size(), t.me);
    if acc.len() / red.elem < f.p2 {
        // Fewer elements than participants: the halving has nothing to split.
        return allreduce_recursive_doubling(ops, t, acc, red);
    }
    fold_in(ops, t, &f, acc, red)?;
    if let Some(me) = f.newrank {
        let off = blocks(acc.len(), red.elem, f.p2);
        reduce_scatter_halving(ops, t, &f, me, acc, &off, red)?;
        // Allgather: my window [lo, lo + d) grows by the partner's adjacent window each step.
        let mut d = 1;
        while d < f.p2 {
            let partner = me ^ d;
            let peer = t.at(f.real(partner));
            let lo = me & !(d - 1);
            let plo = partner & !(d - 1);
            let (mine, theirs) = (off[lo]..off[lo + d], off[plo]..off[plo + d]);
            let (data, buf) = split_ranges(acc, mine, theirs);
            ops.exchange(peer, data, peer, buf)?;
            d *= 2;
        }
    }
    fold_out(ops, t, &f, acc)
}

/// Rabenseifner's reduce: reduce-scatter by recursive halving, then a binomial gather of the
/// blocks to participant 0, which hands the result to the root if that is another rank
/// (B:4329–4336).
pub fn reduce_rabenseifner(ops: &mut Ops, t: Team, root: usize, acc: &mut [u8], red: Reduction) -> Res<()> {
    let f = Fold::new(t.size(), t.me);
    if acc.len() / red.elem < f.p2 {
        return reduce_binomial(ops, t, root, acc, red);
    }
    fold_in(ops, t, &f, acc, red)?;
    let holder = f.real(0);
    if let Some(me) = f.newrank {
        let off = blocks(acc.len(), red.elem, f.p2);
        reduce_scatter_halving(ops, t, &f, me, acc, &off, red)?;
        let mut d = 1;
        while d < f.p2 {
            let partner = me ^ d;
            let peer = t.at(f.real(partner));
            let lo = me & !(d - 1);
            if me & d != 0 {
                ops.send(peer, &acc[off[lo]..off[lo + d]])?;
                break;
            }
            let plo = partner & !(d - 1);
            ops.recv(peer, &mut acc[off[plo]..off[plo + d]])?;
            d *= 2;
        }
    }
    if holder != root {
        if t.me == holder {
            ops.send(t.at(root), acc)?;
        } else if t.me == root {
            ops.recv(t.at(holder), acc)?;
        }
    }
    Ok(())
}

// ---------------------------------------------------------------------------------------------
// Alltoall and barrier.

/// Direct exchange with rotated partners (B:6176–6185): every receive posted, then the sends to
/// `me + 1`, `me + 2`… so no member is everyone's first destination.
pub fn alltoall_direct(ops: &mut Ops, t: Team, send: &[u8], recv: &mut [u8], block: usize) -> Res<()> {
    let n = t.size();
    let base = recv.as_mut_ptr();
    ops.settled(|ops| {
        let mut posted = Vec::new();
        for k in 1..n {
            let from = (t.me + n - k) % n;
            // SAFETY: block `from` of `recv`, borrowed for this call; `settled` waits for it on
            // every path. Nothing else touches `recv` meanwhile (`send` is another buffer).
            posted.extend(unsafe { ops.post(t.at(from), base.add(from * block), block) }?);
        }
        let mut sent = Ok(());
        for k in 1..n {
            let to = (t.me + k) % n;
            sent = ops.send(t.at(to), &send[to * block..(to + 1) * block]);
            if sent.is_err() {
                break;
            }
        }
        let got = ops.wait(&posted);
        sent.and(got)
    })?;
    recv[t.me * block..(t.me + 1) * block].copy_from_slice(&send[t.me * block..(t.me + 1) * block]);
    Ok(())
}

/// Dissemination (Bruck): at step `d`, signal `me + d` and wait for `me − d`.
pub fn barrier_dissemination(ops: &mut Ops, t: Team) -> Res<()> {
    let n = t.size();
    let mut d = 1;
    while d < n {
        ops.exchange(t.at(t.me + d), &[], t.at(t.me + n - d), &mut [])?;
        d *= 2;
    }
    Ok(())
}

/// Fan-in to member 0, then fan-out from it.
pub fn barrier_fan(ops: &mut Ops, t: Team) -> Res<()> {
    if t.me == 0 {
        for i in 1..t.size() {
            ops.recv(t.at(i), &mut [])?;
        }
        for i in 1..t.size() {
            ops.send(t.at(i), &[])?;
        }
        Ok(())
    } else {
        ops.send(t.at(0), &[])?;
        ops.recv(t.at(0), &mut [])
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn folds_map_participants_back_to_ranks() {
        // 6 ranks: p' = 4, rem = 2; ranks 0 and 2 fold into 1 and 3.
        let f: Vec<Fold> = (0..6).map(|me| Fold::new(6, me)).collect();
        assert_eq!(f.iter().map(|f| f.newrank).collect::<Vec<_>>(), [None, Some(0), None, Some(1), Some(2), Some(3)]);
        assert_eq!((0..4).map(|j| f[0].real(j)).collect::<Vec<_>>(), [1, 3, 4, 5]);
        let g = Fold::new(8, 5);
        assert_eq!((g.p2, g.rem, g.newrank), (8, 0, Some(5)));
    }

    #[test]
    fn blocks_split_on_element_boundaries() {
        assert_eq!(blocks(10 * 4, 4, 4), vec![0, 12, 24, 32, 40], "10 ints in 4 blocks: 3 3 2 2");
        assert_eq!(blocks(16, 8, 2), vec![0, 8, 16]);
    }

    #[test]
    fn split_ranges_gives_disjoint_views() {
        let mut b: Vec<u8> = (0..10).collect();
        let (a, w) = split_ranges(&mut b, 0..2, 5..8);
        assert_eq!(a, [0, 1]);
        w.fill(9);
        let (a, w) = split_ranges(&mut b, 6..8, 1..3);
        assert_eq!(a, [9, 9]);
        w.fill(7);
        assert_eq!(b, [0, 7, 7, 3, 4, 9, 9, 9, 8, 9]);
    }
}
