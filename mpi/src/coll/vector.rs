//! The irregular collectives and the prefix reductions: `MPI_Gatherv`, `MPI_Scatterv`,
//! `MPI_Allgatherv`, `MPI_Alltoallv`, `MPI_Alltoallw`, `MPI_Reduce_scatter`,
//! `MPI_Reduce_scatter_block`, `MPI_Scan` and `MPI_Exscan` (the reductions in `vector/reductions.rs`).
//!
//! **Blocks of any datatype.** Every rank's block is `count` elements of a committed datatype at
//! `buf + displacement × extent` (bytes for `Alltoallw`). A block whose layout is contiguous moves
//! straight from and into the caller's memory; a non-contiguous one is packed before it is sent
//! and received into scratch that is unpacked once the data is in ([`Sink`]). The wire carries
//! packed bytes, so a sender's and a receiver's types need only agree in their type signatures,
//! as MPI requires. A block of no bytes sends no message (both sides know its length).
//!
//! **Algorithms.** Gatherv and Scatterv are flat (the root posts every receive, then waits);
//! Allgatherv is a ring over a packed copy of all blocks; Alltoallv/w exchange directly with
//! rotated partners, as Alltoall does; Reduce_scatter(_block) is an allreduce of the whole vector
//! (the model's algorithms) keeping this rank's part; Scan and Exscan are recursive doubling
//! (log₂ P exchanges), combining lower ranks on the left so non-commutative operations are in
//! rank order.

mod reductions;

pub(super) use self::reductions::{block_counts, reduction_input};
pub use self::reductions::{reduce_any, reduce_local_any, reduce_scatter, scan};

use std::borrow::Cow;
use std::ffi::{c_int, c_void};

use super::algo::Ops;
use super::{begin, in_place_misused, inter, is_in_place, mismatch, on, tag};
use crate::abi::{self, Datatype};
use crate::comm::Comm;
use crate::datatype::{self, Layout, pack};
use crate::error::Res;
use crate::p2p::{in_bytes, null_arg, out_bytes};
use crate::state::Access;

/// The extent of `dt` in bytes (a basic type's is its size): the collectives' one lookup.
pub(super) fn extent_of(acc: &mut Access, dt: Datatype, ci: usize) -> Res<isize> {
    if let Some(size) = datatype::size_of_handle(dt) {
        return Ok(size as isize);
    }
    Ok(datatype::resolve(&acc.st().types, dt, ci)?.extent())
}

/// `count` elements of `dt` at `buf`.
pub(super) fn layout_at(acc: &mut Access, buf: *const u8, count: c_int, dt: Datatype, ci: usize) -> Res<Layout> {
    datatype::layout(&acc.st().types, buf, count, dt, ci)
}

/// `n` ints at `p` (an argument array).
///
/// # Safety
/// MPI's contract: `p` points to `n` readable ints.
unsafe fn ints<'a>(p: *const c_int, n: usize, ci: usize, what: &'static str) -> Res<&'a [c_int]> {
    if p.is_null() {
        return Err(null_arg(Some(ci), what));
    }
    // SAFETY: the caller's contract.
    Ok(unsafe { std::slice::from_raw_parts(p, n) })
}

/// Where the blocks of a buffer argument are: what the regular, v- and w-forms of the
/// collectives (blocking, non-blocking and neighbourhood) take.
#[derive(Clone, Copy)]
pub enum Side {
    /// One block of `count` elements (an allgather's send).
    One(c_int),
    /// A block of `count` elements per peer, one after the other.
    Regular(c_int),
    /// Per peer `counts[k]` elements at `displs[k]` extents.
    V(*const c_int, *const c_int),
    /// Per peer `counts[k]` elements of `types[k]` at `displs[k]` bytes.
    W(*const c_int, Displs, *const Datatype),
}

/// Byte displacements: `int`s (`MPI_Alltoallw`) or `MPI_Aint`s (`MPI_Neighbor_alltoallw`).
#[derive(Clone, Copy)]
pub enum Displs {
    Int(*const c_int),
    Aint(*const abi::Aint),
}

impl Displs {
    fn is_null(self) -> bool {
        match self {
            Displs::Int(p) => p.is_null(),
            Displs::Aint(p) => p.is_null(),
        }
    }

    /// Entry `k`.
    ///
    /// # Safety
    /// The array holds more than `k` entries.
    unsafe fn at(self, k: usize) -> isize {
        // SAFETY: the caller's contract.
        unsafe {
            match self {
                Displs::Int(p) => *p.add(k) as isize,
                Displs::Aint(p) => *p.add(k) as isize,
            }
        }
    }
}

/// The layouts of the `n` blocks of `side` at `base` (one for `Side::One`): the collectives' one
/// builder of block layouts.
///
/// # Safety
/// MPI's contract: the arrays hold `n` entries.
pub(super) unsafe fn layouts(
    acc: &mut Access,
    base: *const u8,
    side: Side,
    dt: Datatype,
    n: usize,
    ci: usize,
) -> Res<Vec<Layout>> {
    let at = |d: isize| base.wrapping_offset(d);
    // SAFETY (for the reads below): MPI's contract: `n` entries in each array, checked non-null.
    let arrays_missing = |ps: &[bool]| n > 0 && ps.iter().any(|&p| p);
    match side {
        Side::One(count) => Ok(vec![layout_at(acc, base, count, dt, ci)?]),
        Side::Regular(count) => {
            let ext = extent_of(acc, dt, ci)?;
            (0..n).map(|k| layout_at(acc, at(k as isize * count as isize * ext), count, dt, ci)).collect()
        }
        Side::V(counts, displs) => {
            if arrays_missing(&[counts.is_null(), displs.is_null()]) {
                return Err(null_arg(Some(ci), "counts or displacements"));
            }
            let ext = extent_of(acc, dt, ci)?;
            (0..n)
                .map(|k| {
                    // SAFETY: see above.
                    let (cnt, d) = unsafe { (*counts.add(k), *displs.add(k)) };
                    layout_at(acc, at(d as isize * ext), cnt, dt, ci)
                })
                .collect()
        }
        Side::W(counts, displs, types) => {
            if arrays_missing(&[counts.is_null(), displs.is_null(), types.is_null()]) {
                return Err(null_arg(Some(ci), "counts, displacements or datatypes"));
            }
            (0..n)
                .map(|k| {
                    // SAFETY: see above.
                    let (cnt, d, t) = unsafe { (*counts.add(k), displs.at(k), *types.add(k)) };
                    layout_at(acc, at(d), cnt, t, ci)
                })
                .collect()
        }
    }
}

/// The bytes of a block to send: the caller's memory when contiguous, else a packed copy.
///
/// # Safety
/// The layout describes readable memory holding the data (MPI's contract).
pub(super) unsafe fn source(l: &Layout) -> Cow<'_, [u8]> {
    match l {
        // SAFETY: the caller's contract.
        Layout::Contig { ptr, len } => Cow::Borrowed(unsafe { in_bytes(ptr.cast_const().cast(), *len) }),
        // SAFETY: the caller's contract.
        Layout::Typed { .. } => Cow::Owned(unsafe { l.packed() }),
    }
}

/// Where a block is received: the caller's memory when contiguous, else scratch that
/// [`finish`](Sink::finish) unpacks.
#[derive(Debug)]
pub(super) struct Sink {
    pub(super) layout: Layout,
    scratch: Vec<u8>,
}

impl Sink {
    pub(super) fn new(layout: Layout) -> Sink {
        let scratch = match &layout {
            Layout::Contig { .. } => Vec::new(),
            Layout::Typed { .. } => vec![0u8; layout.len()],
        };
        Sink { layout, scratch }
    }

    pub(super) fn len(&self) -> usize {
        self.layout.len()
    }

    /// Where the packed bytes go (`len()` of them); stable while `self` lives.
    fn ptr(&mut self) -> *mut u8 {
        match &self.layout {
            Layout::Contig { ptr, .. } => *ptr,
            Layout::Typed { .. } => self.scratch.as_mut_ptr(),
        }
    }

    /// The packed bytes as a slice.
    ///
    /// # Safety
    /// The layout describes writable memory (MPI's contract) that nothing else uses meanwhile.
    pub(super) unsafe fn bytes(&mut self) -> &mut [u8] {
        let len = self.len();
        // SAFETY: `ptr()` is `len` writable bytes: the caller's memory, or our scratch.
        unsafe { out_bytes(self.ptr().cast(), len) }
    }

    /// Puts `data` (packed, `len()` bytes) in place.
    ///
    /// # Safety
    /// As [`bytes`](Sink::bytes).
    pub(super) unsafe fn put(&mut self, data: &[u8], ci: usize) -> Res<()> {
        if data.len() != self.len() {
            return Err(mismatch(ci, self.len(), data.len()));
        }
        // SAFETY: the caller's contract; `data` is another buffer (a packed copy or the sender's
        // block, disjoint from the receive buffer by MPI's contract).
        unsafe { self.bytes() }.copy_from_slice(data);
        // SAFETY: as above.
        unsafe { self.finish() };
        Ok(())
    }

    /// Unpacks the scratch into the caller's memory (nothing for a contiguous block).
    ///
    /// # Safety
    /// The layout describes writable memory (MPI's contract).
    pub(super) unsafe fn finish(&self) {
        if let Layout::Typed { base, count, desc } = &self.layout {
            // SAFETY: the caller's contract; the scratch holds `count × size` packed bytes.
            unsafe { pack::unpack(desc, *base, *count, &self.scratch) };
        }
    }
}

/// Posts the receives of every sink with data (`from[i]` the job rank of sink `i`; `None`: not
/// received) and waits for them all; then unpacks.
///
/// # Safety
/// Every sink's memory stays valid and unused by anything else until this returns.
unsafe fn receive_all(ops: &mut Ops, sinks: &mut [Sink], from: impl Fn(usize) -> Option<u32>) -> Res<()> {
    ops.settled(|ops| {
        let mut pieces = Vec::new();
        for (i, s) in sinks.iter_mut().enumerate() {
            let Some(src) = from(i) else { continue };
            if s.len() == 0 {
                continue;
            }
            let (ptr, len) = (s.ptr(), s.len());
            // SAFETY: the sink's memory outlives this closure (the caller's contract);
            // `settled` waits for every posted piece before returning.
            match unsafe { ops.post(src, ptr, len) } {
                Ok(p) => pieces.extend(p),
                Err(e) => {
                    let _ = ops.wait(&pieces);
                    return Err(e);
                }
            }
        }
        ops.wait(&pieces)
    })?;
    for s in sinks.iter() {
        // SAFETY: the caller's contract; every receive has completed.
        unsafe { s.finish() };
    }
    Ok(())
}

// ---------------------------------------------------------------------------------------------
// Gatherv, Scatterv, Allgatherv.

/// `MPI_Gatherv`.
///
/// # Safety
/// MPI's contract on the buffers and arrays (`sendbuf` may be `MPI_IN_PLACE` at the root).
#[allow(clippy::too_many_arguments)]
pub unsafe fn gatherv(
    acc: &mut Access,
    sendbuf: *const c_void,
    sendcount: c_int,
    sendtype: Datatype,
    recvbuf: *mut c_void,
    recvcounts: *const c_int,
    displs: *const c_int,
    recvtype: Datatype,
    root: c_int,
    comm: abi::Comm,
) -> Res<()> {
    if inter::is_inter(acc, comm) {
        let (c, _, ci, _) = inter::begin(acc, comm)?;
        let n = c.size as usize;
        return match inter::role(root, &c, ci)? {
            inter::Role::Idle => Ok(()),
            inter::Role::Member(to) => {
                if is_in_place(sendbuf) {
                    return Err(in_place_misused(ci));
                }
                let l = layout_at(acc, sendbuf.cast(), sendcount, sendtype, ci)?;
                // SAFETY: MPI's contract: the send buffer holds the block.
                let data = unsafe { source(&l) };
                if data.is_empty() {
                    return Ok(());
                }
                inter::across(acc, &c, tag::GATHERV)?.send(to, &data).map_err(on(ci))
            }
            inter::Role::Root => {
                if is_in_place(recvbuf) {
                    return Err(in_place_misused(ci));
                }
                // SAFETY: MPI's contract: the remote group's size of entries in each array.
                let blocks =
                    unsafe { layouts(acc, recvbuf.cast_const().cast(), Side::V(recvcounts, displs), recvtype, n, ci) }?;
                let mut sinks: Vec<Sink> = blocks.into_iter().map(Sink::new).collect();
                let mut ops = inter::across(acc, &c, tag::GATHERV)?;
                // SAFETY: the caller's receive buffer (MPI's contract) and our scratch.
                unsafe { receive_all(&mut ops, &mut sinks, |i| Some(c.world[i])) }.map_err(on(ci))
            }
        };
    }
    let in_place = is_in_place(sendbuf);
    let (c, ci, _, root) = super::begin_rooted(acc, comm, root, in_place)?;
    let c = &*c;
    let (n, me) = (c.size as usize, c.rank as usize);
    if me != root {
        let l = layout_at(acc, sendbuf.cast(), sendcount, sendtype, ci)?;
        if l.is_empty() {
            return Ok(());
        }
        // SAFETY: MPI's contract: the send buffer holds the block.
        let data = unsafe { source(&l) };
        return Ops::new(acc, c.coll_ctx(), tag::GATHERV)?.send(c.world[root], &data).map_err(on(ci));
    }
    // SAFETY: MPI's contract: `size` entries in each array at the root.
    let blocks = unsafe { layouts(acc, recvbuf.cast_const().cast(), Side::V(recvcounts, displs), recvtype, n, ci) }?;
    let mut sinks: Vec<Sink> = blocks.into_iter().map(Sink::new).collect();
    if !in_place {
        let l = layout_at(acc, sendbuf.cast(), sendcount, sendtype, ci)?;
        // SAFETY: MPI's contract: the send buffer holds the block; the receive buffer is disjoint.
        unsafe { sinks[me].put(&source(&l), ci)? };
    }
    let mut ops = Ops::new(acc, c.coll_ctx(), tag::GATHERV)?;
    // SAFETY: the sinks are the caller's receive buffer (MPI's contract) and our scratch, alive
    // until `receive_all` returns.
    unsafe { receive_all(&mut ops, &mut sinks, |i| (i != me).then(|| c.world[i])) }.map_err(on(ci))
}

/// `MPI_Scatterv`.
///
/// # Safety
/// MPI's contract on the buffers and arrays (`recvbuf` may be `MPI_IN_PLACE` at the root).
#[allow(clippy::too_many_arguments)]
pub unsafe fn scatterv(
    acc: &mut Access,
    sendbuf: *const c_void,
    sendcounts: *const c_int,
    displs: *const c_int,
    sendtype: Datatype,
    recvbuf: *mut c_void,
    recvcount: c_int,
    recvtype: Datatype,
    root: c_int,
    comm: abi::Comm,
) -> Res<()> {
    if inter::is_inter(acc, comm) {
        let (c, _, ci, _) = inter::begin(acc, comm)?;
        let n = c.size as usize;
        return match inter::role(root, &c, ci)? {
            inter::Role::Idle => Ok(()),
            inter::Role::Member(from) => {
                let mut sink = inter::sink(acc, recvbuf, recvcount, recvtype, ci)?;
                let mut ops = inter::across(acc, &c, tag::SCATTERV)?;
                // SAFETY: the receive buffer (MPI's contract) or our scratch.
                unsafe { receive_all(&mut ops, std::slice::from_mut(&mut sink), |_| Some(from)) }.map_err(on(ci))
            }
            inter::Role::Root => {
                if is_in_place(sendbuf) {
                    return Err(in_place_misused(ci));
                }
                // SAFETY: MPI's contract: the remote group's size of entries in each array.
                let blocks = unsafe { layouts(acc, sendbuf.cast(), Side::V(sendcounts, displs), sendtype, n, ci) }?;
                let mut ops = inter::across(acc, &c, tag::SCATTERV)?;
                for (b, &w) in blocks.iter().zip(c.world.iter()) {
                    if !b.is_empty() {
                        // SAFETY: MPI's contract: the send buffer holds every block.
                        ops.send(w, &unsafe { source(b) }).map_err(on(ci))?;
                    }
                }
                Ok(())
            }
        };
    }
    let in_place = is_in_place(recvbuf);
    let (c, ci, _, root) = super::begin_rooted(acc, comm, root, in_place)?;
    let c = &*c;
    let (n, me) = (c.size as usize, c.rank as usize);
    if me != root {
        let mut sink = Sink::new(layout_at(acc, recvbuf.cast_const().cast(), recvcount, recvtype, ci)?);
        let mut ops = Ops::new(acc, c.coll_ctx(), tag::SCATTERV)?;
        // SAFETY: the receive buffer (MPI's contract) or our scratch, alive until this returns.
        return unsafe { receive_all(&mut ops, std::slice::from_mut(&mut sink), |_| Some(c.world[root])) }
            .map_err(on(ci));
    }
    // SAFETY: MPI's contract: `size` entries in each array at the root.
    let blocks = unsafe { layouts(acc, sendbuf.cast(), Side::V(sendcounts, displs), sendtype, n, ci) }?;
    if !in_place {
        let mut sink = Sink::new(layout_at(acc, recvbuf.cast_const().cast(), recvcount, recvtype, ci)?);
        // SAFETY: MPI's contract: the root's block is readable, the receive buffer writable and
        // disjoint from it.
        unsafe { sink.put(&source(&blocks[me]), ci)? };
    }
    let mut ops = Ops::new(acc, c.coll_ctx(), tag::SCATTERV)?;
    for k in 1..n {
        let to = (me + k) % n;
        if !blocks[to].is_empty() {
            // SAFETY: MPI's contract: the send buffer holds every block.
            ops.send(c.world[to], &unsafe { source(&blocks[to]) }).map_err(on(ci))?;
        }
    }
    Ok(())
}

/// `MPI_Allgatherv`: a ring over a packed copy of every block.
///
/// # Safety
/// MPI's contract on the buffers and arrays (`sendbuf` may be `MPI_IN_PLACE`).
#[allow(clippy::too_many_arguments)]
pub unsafe fn allgatherv(
    acc: &mut Access,
    sendbuf: *const c_void,
    sendcount: c_int,
    sendtype: Datatype,
    recvbuf: *mut c_void,
    recvcounts: *const c_int,
    displs: *const c_int,
    recvtype: Datatype,
    comm: abi::Comm,
) -> Res<()> {
    if inter::is_inter(acc, comm) {
        // Every member's block to every remote member, directly.
        let (c, _, ci, _) = inter::begin(acc, comm)?;
        let n = c.size as usize;
        if is_in_place(sendbuf) {
            return Err(in_place_misused(ci));
        }
        // SAFETY: MPI's contract: the remote group's size of entries in each array.
        let recv = unsafe { layouts(acc, recvbuf.cast_const().cast(), Side::V(recvcounts, displs), recvtype, n, ci) }?;
        let l = layout_at(acc, sendbuf.cast(), sendcount, sendtype, ci)?;
        // SAFETY: MPI's contract: the send buffer holds the block.
        let own = unsafe { source(&l) };
        let send = vec![Cow::Borrowed(&*own); n];
        let mut sinks: Vec<Sink> = recv.into_iter().map(Sink::new).collect();
        let mut ops = inter::across(acc, &c, tag::ALLGATHERV)?;
        return alltoall_blocks(&mut ops, &c, &send, &mut sinks, ci).map_err(on(ci));
    }
    let (c, ci, _) = begin(acc, comm)?;
    let c = &*c;
    let (n, me) = (c.size as usize, c.rank as usize);
    // SAFETY: MPI's contract: `size` entries in each array.
    let blocks = unsafe { layouts(acc, recvbuf.cast_const().cast(), Side::V(recvcounts, displs), recvtype, n, ci) }?;
    let mut sinks: Vec<Sink> = blocks.into_iter().map(Sink::new).collect();
    let mut off = vec![0usize; n + 1];
    for i in 0..n {
        off[i + 1] = off[i] + sinks[i].len();
    }
    let mut all = vec![0u8; off[n]];
    let own = if is_in_place(sendbuf) {
        // SAFETY: MPI's contract: this rank's block is in place in the receive buffer.
        unsafe { source(&sinks[me].layout) }.into_owned()
    } else {
        let l = layout_at(acc, sendbuf.cast(), sendcount, sendtype, ci)?;
        // SAFETY: MPI's contract: the send buffer holds the block.
        unsafe { source(&l) }.into_owned()
    };
    if own.len() != sinks[me].len() {
        return Err(mismatch(ci, sinks[me].len(), own.len()));
    }
    all[off[me]..off[me + 1]].copy_from_slice(&own);
    if n > 1 && off[n] > 0 {
        let mut ops = Ops::new(acc, c.coll_ctx(), tag::ALLGATHERV)?;
        let (right, left) = (c.world[(me + 1) % n], c.world[(me + n - 1) % n]);
        for s in 0..n - 1 {
            let give = (me + n - s) % n;
            let take = (me + n - s - 1) % n;
            let (data, buf) = super::algo::split_ranges(&mut all, off[give]..off[give + 1], off[take]..off[take + 1]);
            ops.exchange(right, data, left, buf).map_err(on(ci))?;
        }
    }
    for (i, s) in sinks.iter_mut().enumerate() {
        // SAFETY: MPI's contract: the receive buffer is writable; `all` is ours.
        unsafe { s.put(&all[off[i]..off[i + 1]], ci)? };
    }
    Ok(())
}

// ---------------------------------------------------------------------------------------------
// Alltoallv and Alltoallw.

/// The blocks of one side of an all-to-all: block `i` is what goes to (or comes from) rank `i`.
type Blocks = Vec<Layout>;

/// Direct exchange with rotated partners: every receive posted, then the sends to `me + 1`,
/// `me + 2`…, then the waits; this rank's own block copied. On an intercommunicator the partners
/// are the remote group's members, every one of them (from remote rank `rank mod size` on).
fn alltoall_blocks(ops: &mut Ops, c: &Comm, send: &[Cow<[u8]>], sinks: &mut [Sink], ci: usize) -> Res<()> {
    let n = c.size as usize;
    let (first, me) = if c.local.is_some() {
        (0, c.rank as usize % n.max(1))
    } else {
        let me = c.rank as usize;
        // SAFETY: the sinks are the caller's receive buffer or scratch, alive while this runs;
        // `send` holds the data to send, apart from them (packed copies under MPI_IN_PLACE).
        unsafe { sinks[me].put(&send[me], ci)? };
        (1, me)
    };
    ops.settled(|ops| {
        let mut pieces = Vec::new();
        for k in first..n {
            let from = (me + n - k) % n;
            let s = &mut sinks[from];
            if s.len() > 0 {
                let (ptr, len) = (s.ptr(), s.len());
                // SAFETY: the sink's memory outlives this call; `settled` waits for it.
                pieces.extend(unsafe { ops.post(c.world[from], ptr, len) }?);
            }
        }
        let mut sent = Ok(());
        for k in first..n {
            let to = (me + k) % n;
            if !send[to].is_empty() {
                sent = ops.send(c.world[to], &send[to]);
                if sent.is_err() {
                    break;
                }
            }
        }
        let got = ops.wait(&pieces);
        sent.and(got)
    })?;
    for s in sinks.iter() {
        // SAFETY: every receive completed; the memory is the caller's receive buffer.
        unsafe { s.finish() };
    }
    Ok(())
}

/// Runs an all-to-all of `send` blocks (`None`: MPI_IN_PLACE, the data is in `recv`) into `recv`.
///
/// # Safety
/// MPI's contract: the blocks describe the caller's valid buffers.
unsafe fn alltoall_any(acc: &mut Access, c: &Comm, ci: usize, send: Option<Blocks>, recv: Blocks) -> Res<()> {
    if c.local.is_some() && send.is_none() {
        return Err(in_place_misused(ci));
    }
    let data: Vec<Cow<[u8]>> = match &send {
        // SAFETY: the caller's contract.
        Some(blocks) => blocks.iter().map(|l| unsafe { source(l) }).collect(),
        // In place: the data to send is in the receive buffer, which the exchange overwrites.
        // SAFETY: the caller's contract.
        None => recv.iter().map(|l| Cow::Owned(unsafe { source(l) }.into_owned())).collect(),
    };
    for (i, (d, r)) in data.iter().zip(&recv).enumerate() {
        if send.is_some() && c.local.is_none() && i == c.rank as usize && d.len() != r.len() {
            return Err(mismatch(ci, r.len(), d.len()));
        }
    }
    let mut sinks: Vec<Sink> = recv.into_iter().map(Sink::new).collect();
    let mut ops = Ops::between(acc, c.coll_ctx(), c.coll_send_ctx(), tag::ALLTOALLV)?;
    alltoall_blocks(&mut ops, c, &data, &mut sinks, ci).map_err(on(ci))
}

/// `MPI_Alltoallv`.
///
/// # Safety
/// MPI's contract on the buffers and arrays (`sendbuf` may be `MPI_IN_PLACE`).
#[allow(clippy::too_many_arguments)]
pub unsafe fn alltoallv(
    acc: &mut Access,
    sendbuf: *const c_void,
    sendcounts: *const c_int,
    sdispls: *const c_int,
    sendtype: Datatype,
    recvbuf: *mut c_void,
    recvcounts: *const c_int,
    rdispls: *const c_int,
    recvtype: Datatype,
    comm: abi::Comm,
) -> Res<()> {
    // On an intercommunicator too: the arrays have the remote group's size (`c.size`).
    let (c, ci, _) = super::begin_any(acc, comm)?;
    let c = &*c;
    // SAFETY: MPI's contract on the arrays and buffers.
    unsafe {
        alltoall_sides(
            acc,
            c,
            ci,
            (sendbuf, Side::V(sendcounts, sdispls), sendtype),
            (recvbuf, Side::V(recvcounts, rdispls), recvtype),
        )
    }
}

/// An all-to-all of the blocks `send` describes (`MPI_IN_PLACE`: in the receive buffer) into
/// those `recv` describes, `c.size` of each.
///
/// # Safety
/// MPI's contract on the arrays and buffers.
unsafe fn alltoall_sides(
    acc: &mut Access,
    c: &Comm,
    ci: usize,
    send: (*const c_void, Side, Datatype),
    recv: (*mut c_void, Side, Datatype),
) -> Res<()> {
    let n = c.size as usize;
    // SAFETY: the caller's contract.
    let rblocks = unsafe { layouts(acc, recv.0.cast_const().cast(), recv.1, recv.2, n, ci) }?;
    let sblocks = if is_in_place(send.0) {
        None
    } else {
        // SAFETY: the caller's contract.
        Some(unsafe { layouts(acc, send.0.cast(), send.1, send.2, n, ci) }?)
    };
    // SAFETY: the caller's contract.
    unsafe { alltoall_any(acc, c, ci, sblocks, rblocks) }
}

/// `MPI_Alltoallw`: per-rank datatypes and byte displacements.
///
/// # Safety
/// MPI's contract on the buffers and arrays (`sendbuf` may be `MPI_IN_PLACE`).
#[allow(clippy::too_many_arguments)]
pub unsafe fn alltoallw(
    acc: &mut Access,
    sendbuf: *const c_void,
    sendcounts: *const c_int,
    sdispls: *const c_int,
    sendtypes: *const Datatype,
    recvbuf: *mut c_void,
    recvcounts: *const c_int,
    rdispls: *const c_int,
    recvtypes: *const Datatype,
    comm: abi::Comm,
) -> Res<()> {
    // On an intercommunicator too: the arrays have the remote group's size (`c.size`).
    let (c, ci, _) = super::begin_any(acc, comm)?;
    let c = &*c;
    let sside = Side::W(sendcounts, Displs::Int(sdispls), sendtypes);
    let rside = Side::W(recvcounts, Displs::Int(rdispls), recvtypes);
    // SAFETY: MPI's contract on the arrays and buffers.
    unsafe { alltoall_sides(acc, c, ci, (sendbuf, sside, abi::DATATYPE_NULL), (recvbuf, rside, abi::DATATYPE_NULL)) }
}
