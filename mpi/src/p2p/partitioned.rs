//! Partitioned point-to-point (MPI-4.1 chapter 4): `MPI_Psend_init`, `MPI_Precv_init`,
//! `MPI_Pready`, `MPI_Pready_range`, `MPI_Pready_list`, `MPI_Parrived`.
//!
//! A partitioned request is persistent (`Req::ext` holds its [`Part`], the state is
//! `Compound` while active): `MPI_Start` activates it, the sender marks partitions ready in any
//! order (from any thread), the receiver sees each of its partitions arrive, and
//! `MPI_Wait`/`MPI_Test` complete the activation.
//!
//! **Protocol.** Each sender partition is one Endpoint message, sent when it is marked ready, in
//! a context of its own: `DATA | id`, `id` numbering this process's partitioned sends (so no two
//! of its operations, on any communicator, share one), tag the partition's index. At the first
//! `MPI_Start` the sender also sends a setup message, `[partitions, bytes per partition, id]`,
//! in the communicator's context with [`SETUP`] set and the user's tag: setups from one sender
//! with one tag match in the order the operations were made, which is MPI's matching rule for
//! partitioned operations. The receiver, once it has the setup, posts one receive per sender
//! partition at the byte offset where it lands; partitions of the two sides need not agree (only
//! the total size must, else `MPI_ERR_TRUNCATE`): a receiver partition has arrived when every
//! sender partition overlapping it has. Non-contiguous data is packed into (unpacked from) a
//! staging copy, a partition at a time.

use std::ffi::{c_int, c_void};

use super::{comm_at, null_arg};
use crate::abi::{self, Count, Datatype};
use crate::datatype::Layout;
use crate::error::{Fail, Res, Why};
use crate::request::{Completion, Ext, Req, State as ReqState};
use crate::state::{Access, State, not_running};

/// Context bit of the setup messages (added to the communicator's point-to-point context).
const SETUP: u32 = 1 << 31;
/// Context bit of the data messages (with the operation's id below it).
const DATA: u32 = 1 << 30;

/// The id of the next partitioned send of this process (1, 2...; below `DATA`).
static NEXT_ID: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(1);

/// What the sender tells the receiver at the first start.
#[derive(Clone, Copy, Debug)]
struct Setup {
    partitions: usize,
    bytes: usize,
    id: u32,
}

/// The state of one partitioned operation.
#[derive(Debug)]
pub struct Part {
    send: bool,
    /// Job rank of the peer (`None`: `MPI_PROC_NULL`).
    peer: Option<i32>,
    /// The peer's communicator rank (the receiver's status).
    rank: c_int,
    tag: c_int,
    /// The communicator's point-to-point context (the send context on the sender).
    ctx: u32,
    /// This side's partitions and bytes per partition.
    partitions: usize,
    bytes: usize,
    /// The user's buffer.
    data: Layout,
    /// Typed data's packed copy (all partitions); empty for contiguous data.
    staging: Vec<u8>,
    /// The sender's setup: known from the start on the sender, from its message on the receiver.
    setup: Option<Setup>,
    /// The setup message's buffer (sent or received into), at a stable address.
    setup_buf: Box<[u64; 3]>,
    /// The setup message in flight.
    setup_req: Option<nemesis::Request>,
    /// The setup message was sent (or its receive posted): at the first start only.
    introduced: bool,
    /// The activation in progress (started and not yet completed).
    active: bool,
    /// Per sender partition in this activation: marked ready (sender) or its receive posted
    /// (receiver).
    started: Vec<bool>,
    /// Per sender partition: its message in flight.
    inflight: Vec<Option<nemesis::Request>>,
    /// Per sender partition: complete in this activation.
    landed: Vec<bool>,
    /// Per receiver partition: arrived (and unpacked) in this activation.
    arrived: Vec<bool>,
    /// The first failure of this activation.
    failed: Option<Fail>,
    /// This activation's completion, until reported (the state stays `Compound` until then, so
    /// that only the general completion path, which keeps the request, takes it).
    pub result: Option<Completion>,
}

impl Part {
    /// The Endpoint operations this activation waits for.
    pub fn pending(&self) -> Vec<nemesis::Request> {
        self.setup_req.iter().copied().chain(self.inflight.iter().flatten().copied()).collect()
    }

    /// Records the result of Endpoint operation `r` (taken by a wait).
    pub fn took(&mut self, r: nemesis::Request, res: nemesis::Result<nemesis::Status>) {
        if self.setup_req == Some(r) {
            self.setup_req = None;
            self.on_setup(res);
            return;
        }
        if let Some(p) = self.inflight.iter().position(|q| *q == Some(r)) {
            self.inflight[p] = None;
            self.on_landed(p, res);
        }
    }

    fn fail(&mut self, f: Fail) {
        self.failed.get_or_insert(f);
    }

    /// The setup message went (sender) or came (receiver).
    fn on_setup(&mut self, res: nemesis::Result<nemesis::Status>) {
        if let Err(e) = res {
            return self.fail(Fail::endpoint(0, e));
        }
        if self.send {
            return;
        }
        let [partitions, bytes, id] = *self.setup_buf;
        let s = Setup { partitions: partitions as usize, bytes: bytes as usize, id: id as u32 };
        let total = self.partitions * self.bytes;
        if s.partitions.checked_mul(s.bytes) != Some(total) {
            return self.fail(Fail::new(
                abi::ERR_TRUNCATE,
                None,
                Why::Arg("the partitioned send's total size differs from the receive's"),
            ));
        }
        self.setup = Some(s);
        self.begin_activation_tables();
    }

    /// Sender partition `p`'s message completed.
    fn on_landed(&mut self, p: usize, res: nemesis::Result<nemesis::Status>) {
        if let Err(e) = res {
            return self.fail(Fail::endpoint(0, e));
        }
        self.landed[p] = true;
        if self.send {
            return;
        }
        let Some(s) = self.setup else { return };
        // The receiver partitions this one overlaps may now be whole.
        let (lo, hi) = (p * s.bytes, (p + 1) * s.bytes);
        if self.bytes == 0 {
            return;
        }
        for q in lo / self.bytes..hi.div_ceil(self.bytes).min(self.partitions) {
            self.check_arrived(q, s);
        }
    }

    /// Marks receiver partition `q` arrived if every sender partition overlapping it landed.
    fn check_arrived(&mut self, q: usize, s: Setup) {
        if self.arrived[q] {
            return;
        }
        let (lo, hi) = (q * self.bytes, (q + 1) * self.bytes);
        let whole = s.bytes == 0 || (lo / s.bytes..hi.div_ceil(s.bytes).min(s.partitions)).all(|p| self.landed[p]);
        if !whole {
            return;
        }
        if let Layout::Typed { base, desc, .. } = &self.data {
            let per = self.bytes / desc.size.max(1);
            let at = base.wrapping_offset((q * per) as isize * desc.extent());
            // SAFETY: MPI's contract on the receive buffer: `partitions × count` elements of the
            // type at `base`; partition `q` is `per` of them from element `q × per`.
            unsafe { crate::datatype::pack::unpack(desc, at, per, &self.staging[lo..hi]) };
        }
        self.arrived[q] = true;
    }

    /// Fresh tables for an activation, sized once the sender's partitions are known.
    fn begin_activation_tables(&mut self) {
        let sp = self.setup.map_or(0, |s| s.partitions);
        self.started = vec![false; sp];
        self.inflight = (0..sp).map(|_| None).collect();
        self.landed = vec![false; sp];
        self.arrived = vec![false; self.partitions];
        if sp == 0 && !self.send {
            self.arrived.fill(true);
        }
    }

    /// The bytes of sender partition `p` in the contiguous data or the staging copy.
    fn span(&self, p: usize) -> (*mut u8, usize) {
        let s = self.setup.expect("the sender's setup is known when its partitions move");
        let base = match &self.data {
            Layout::Contig { ptr, .. } => *ptr,
            Layout::Typed { .. } => self.staging.as_ptr().cast_mut(),
        };
        (base.wrapping_add(p * s.bytes), s.bytes)
    }

    /// True once this activation is complete.
    fn complete(&self) -> bool {
        self.setup_req.is_none()
            && self.inflight.iter().all(Option::is_none)
            && (self.failed.is_some() || (self.setup.is_some() && self.landed.iter().all(|&l| l)))
    }
}

/// An inactive partitioned request as the MPI state image saves it (`crate::ft::image`): what
/// [`init`] resolved and, once started, the sender's setup (known to both sides after the first
/// `MPI_Start`, which alone sends it). Everything else is an activation's and starts afresh.
#[derive(Clone, Debug)]
pub struct Saved {
    pub send: bool,
    pub peer: Option<i32>,
    pub rank: c_int,
    pub tag: c_int,
    pub ctx: u32,
    pub partitions: usize,
    pub bytes: usize,
    pub data: Layout,
    /// The sender's `(partitions, bytes per partition, id)`.
    pub setup: Option<(usize, usize, u32)>,
    pub introduced: bool,
}

impl Part {
    /// What the image saves of this request, `None` while an activation is under way or its
    /// completion is not yet reported.
    pub fn saved(&self) -> Option<Saved> {
        if self.active || self.result.is_some() || self.setup_req.is_some() {
            return None;
        }
        Some(Saved {
            send: self.send,
            peer: self.peer,
            rank: self.rank,
            tag: self.tag,
            ctx: self.ctx,
            partitions: self.partitions,
            bytes: self.bytes,
            data: self.data.clone(),
            setup: self.setup.map(|s| (s.partitions, s.bytes, s.id)),
            introduced: self.introduced,
        })
    }

    /// The inactive request `s` describes (a new one made by `MPI_Psend_init`/`Precv_init`, or
    /// one restored from the MPI state image).
    pub fn restored(s: Saved) -> Part {
        let staging = if matches!(s.data, Layout::Typed { .. }) { vec![0u8; s.data.len()] } else { Vec::new() };
        Part {
            send: s.send,
            peer: s.peer,
            rank: s.rank,
            tag: s.tag,
            ctx: s.ctx,
            partitions: s.partitions,
            bytes: s.bytes,
            data: s.data,
            staging,
            setup: s.setup.map(|(partitions, bytes, id)| Setup { partitions, bytes, id }),
            setup_buf: Box::new([0; 3]),
            setup_req: None,
            introduced: s.introduced,
            active: false,
            started: Vec::new(),
            inflight: Vec::new(),
            landed: Vec::new(),
            arrived: Vec::new(),
            failed: None,
            result: None,
        }
    }
}

/// The id the next partitioned send of this process takes (saved in the MPI state image, so
/// that a restarted process gives no new send the id of a restored one).
pub fn next_id() -> u32 {
    // ORDERING: Relaxed: a counter; only uniqueness matters.
    NEXT_ID.load(std::sync::atomic::Ordering::Relaxed)
}

/// Sets [`next_id`] (restoring the image).
pub fn set_next_id(id: u32) {
    // ORDERING: Relaxed: as in `next_id`.
    NEXT_ID.store(id, std::sync::atomic::Ordering::Relaxed);
}

/// `MPI_Psend_init` (`send`) and `MPI_Precv_init`: an inactive partitioned request for
/// `partitions` partitions of `count` elements of `dt` each.
///
/// # Safety
/// `request` writable; MPI's contract on the buffer for every activation.
#[allow(clippy::too_many_arguments)]
pub unsafe fn init(
    acc: &mut Access,
    send: bool,
    buf: *mut c_void,
    partitions: c_int,
    count: Count,
    dt: Datatype,
    peer: c_int,
    tag: c_int,
    comm: abi::Comm,
    info: abi::Info,
    request: *mut abi::Request,
) -> Res<()> {
    let _ = info;
    if request.is_null() {
        return Err(null_arg(None, "null request pointer"));
    }
    let st = acc.st();
    if st.ep.is_none() {
        return Err(not_running(st.phase));
    }
    let ci = comm_at(&st.comms, comm)?.0;
    if partitions < 0 {
        return Err(Fail::new(abi::ERR_ARG, Some(ci), Why::Arg("negative partition count")));
    }
    if !send && (peer == abi::ANY_SOURCE || tag == abi::ANY_TAG) {
        return Err(Fail::new(abi::ERR_ARG, Some(ci), Why::Arg("a partitioned receive names its source and tag")));
    }
    let total = count.checked_mul(Count::from(partitions));
    let total = total.ok_or_else(|| Fail::new(abi::ERR_COUNT, Some(ci), Why::Arg("partitions × count overflows")))?;
    let t = super::start::target(st, buf, total, dt, peer, tag, comm, send)?;
    let bytes = if partitions == 0 { 0 } else { t.data.len() / partitions as usize };
    let partitions = partitions as usize;
    let setup = send.then(|| {
        // ORDERING: Relaxed: a counter; only uniqueness matters.
        let id = NEXT_ID.fetch_add(1, std::sync::atomic::Ordering::Relaxed) & (DATA - 1);
        (partitions, bytes, id)
    });
    let part = Part::restored(Saved {
        send,
        peer: t.peer,
        rank: peer,
        tag,
        ctx: t.ctx,
        partitions,
        bytes,
        data: t.data,
        setup,
        introduced: false,
    });
    let req = Req { ext: Some(Box::new(Ext::Part(Box::new(part)))), ..Req::new(t.ci, ReqState::Inactive, !send) };
    let h = st.reqs.insert(req).ok_or_else(|| super::start::too_many(t.ci))?;
    // SAFETY: checked non-null; MPI's contract.
    unsafe { *request = h };
    Ok(())
}

/// `MPI_Start` of partitioned request slot `i` (inactive).
pub fn start(st: &mut State, i: usize) -> Res<()> {
    let phase = st.phase;
    let State { ep, reqs, .. } = st;
    let Some(ep) = ep.as_mut() else { return Err(not_running(phase)) };
    let Some(req) = reqs.at_mut(i) else { return Err(Fail::new(abi::ERR_REQUEST, None, Why::Arg("no request"))) };
    let ci = req.comm as usize;
    let Some(Ext::Part(p)) = req.ext.as_deref_mut() else { return Ok(()) };
    p.failed = None;
    p.active = true;
    req.state = ReqState::Compound;
    if p.setup.is_some() {
        p.begin_activation_tables();
    }
    let Some(peer) = p.peer else {
        // `MPI_PROC_NULL`: complete at once.
        p.active = false;
        p.result = Some(Completion::proc_null());
        return Ok(());
    };
    if !p.introduced {
        p.introduced = true;
        let ptr = p.setup_buf.as_mut_ptr().cast::<u8>();
        let r = if let (true, Some(s)) = (p.send, p.setup) {
            *p.setup_buf = [s.partitions as u64, s.bytes as u64, u64::from(s.id)];
            // SAFETY: the setup buffer is boxed in the request, unchanged until the send is done.
            unsafe { ep.isend_raw(ptr, 24, peer as u32, p.tag, p.ctx | SETUP) }
        } else {
            // SAFETY: as above, untouched until the receive is done.
            unsafe { ep.irecv_raw(ptr, 24, peer, p.tag, p.ctx | SETUP) }
        };
        p.setup_req = Some(r.map_err(|e| Fail::endpoint(ci, e))?);
    }
    Ok(())
}

/// Moves partitioned request slot `i` on: the setup's arrival, posting the receiver's receives,
/// the messages' completions. True once the activation is complete (its state then `Done`).
pub fn poll(st: &mut State, i: usize) -> Res<bool> {
    let phase = st.phase;
    let State { ep, reqs, .. } = st;
    let Some(ep) = ep.as_mut() else { return Err(not_running(phase)) };
    let Some(req) = reqs.at_mut(i) else { return Ok(true) };
    let ci = req.comm as usize;
    let Some(Ext::Part(p)) = req.ext.as_deref_mut() else { return Ok(true) };
    if !p.active {
        return Ok(p.result.is_some());
    }
    if let Some(r) = p.setup_req {
        match ep.test(r) {
            Ok(None) => {}
            Ok(Some(s)) => p.took(r, Ok(s)),
            Err(e) => p.took(r, Err(e)),
        }
    }
    // The receiver posts every partition's receive once it knows them.
    if !p.send && p.setup.is_some() && p.failed.is_none() {
        let (s, from) = (p.setup.unwrap_or(Setup { partitions: 0, bytes: 0, id: 0 }), p.peer.unwrap_or(0));
        for k in 0..p.started.len() {
            if p.started[k] {
                continue;
            }
            let (ptr, len) = p.span(k);
            // SAFETY: MPI's contract on the user's buffer (or the staging copy, in the request):
            // `len` writable bytes at partition `k`'s offset, untouched until it completes.
            match unsafe { ep.irecv_raw(ptr, len, from, k as c_int, DATA | s.id) } {
                Ok(r) => p.inflight[k] = Some(r),
                Err(e) => p.fail(Fail::endpoint(ci, e)),
            }
            p.started[k] = true;
        }
    }
    for k in 0..p.inflight.len() {
        if let Some(r) = p.inflight[k] {
            match ep.test(r) {
                Ok(None) => {}
                Ok(Some(s)) => p.took(r, Ok(s)),
                Err(e) => p.took(r, Err(e)),
            }
        }
    }
    if !p.complete() {
        return Ok(false);
    }
    p.active = false;
    let done = match p.failed.take() {
        Some(f) => Completion { code: f.code, why: Some(f.why), ..Completion::empty() },
        None => Completion::ok(p.rank, p.tag, (p.partitions * p.bytes) as i64),
    };
    p.result = Some(done);
    Ok(true)
}

/// The active partitioned request named by `h` (`send`: a sender's), and its slot.
fn active(st: &mut State, h: abi::Request, send: bool) -> Res<(usize, &mut Part)> {
    let bad = |w| Fail::new(abi::ERR_REQUEST, None, Why::Arg(w));
    let i = st.reqs.index(h).ok_or_else(|| Fail::new(abi::ERR_REQUEST, None, Why::Request(h)))?;
    let Some(Req { ext: Some(ext), state, .. }) = st.reqs.at_mut(i) else {
        return Err(bad("not a partitioned request"));
    };
    // Active from `MPI_Start` until its completion is reported (`Done` until then).
    let started = !matches!(state, ReqState::Inactive);
    let Ext::Part(p) = &mut **ext else { return Err(bad("not a partitioned request")) };
    if p.send != send {
        return Err(bad(if send {
            "MPI_Pready on a partitioned receive"
        } else {
            "MPI_Parrived on a partitioned send"
        }));
    }
    if !started {
        return Err(bad("the partitioned request is not active (MPI_Start)"));
    }
    Ok((i, p))
}

/// `MPI_Pready`, `MPI_Pready_range`, `MPI_Pready_list`: marks sender partitions ready, each sent
/// at once.
pub fn pready(acc: &mut Access, h: abi::Request, parts: impl IntoIterator<Item = c_int>) -> Res<()> {
    let st = acc.st();
    let phase = st.phase;
    let (i, _) = active(st, h, true)?;
    let State { ep, reqs, .. } = st;
    let Some(ep) = ep.as_mut() else { return Err(not_running(phase)) };
    let Some(req) = reqs.at_mut(i) else { return Ok(()) };
    let ci = req.comm as usize;
    let Some(Ext::Part(p)) = req.ext.as_deref_mut() else { return Ok(()) };
    for k in parts {
        if k < 0 || k as usize >= p.partitions {
            return Err(Fail::new(abi::ERR_ARG, Some(ci), Why::Arg("partition index out of range")));
        }
        let k = k as usize;
        if p.started.get(k) != Some(&false) {
            return Err(Fail::new(abi::ERR_ARG, Some(ci), Why::Arg("partition already marked ready")));
        }
        p.started[k] = true;
        let (Some(to), Some(s)) = (p.peer, p.setup) else { continue };
        if let Layout::Typed { base, desc, .. } = &p.data {
            let per = p.bytes / desc.size.max(1);
            let at = base.wrapping_offset((k * per) as isize * desc.extent());
            let (lo, hi) = (k * p.bytes, (k + 1) * p.bytes);
            // SAFETY: MPI's contract on the send buffer: partition `k` is `per` elements from
            // element `k × per`.
            unsafe { crate::datatype::pack::pack(desc, at, per, &mut p.staging[lo..hi]) };
        }
        let (ptr, len) = p.span(k);
        // SAFETY: the partition's bytes (the user's, or the staging copy in the request) stay
        // unchanged until the activation completes (MPI's contract).
        match unsafe { ep.isend_raw(ptr, len, to as u32, k as c_int, DATA | s.id) } {
            Ok(r) => p.inflight[k] = Some(r),
            Err(e) => p.fail(Fail::endpoint(ci, e)),
        }
    }
    Ok(())
}

/// `MPI_Pready_range`'s partitions, checked.
pub fn range(lo: c_int, hi: c_int) -> Res<std::ops::RangeInclusive<c_int>> {
    if lo > hi || lo < 0 {
        return Err(Fail::new(abi::ERR_ARG, None, Why::Arg("bad partition range")));
    }
    Ok(lo..=hi)
}

/// `MPI_Pready_list`'s partitions.
///
/// # Safety
/// `list` readable for `n` ints.
pub unsafe fn list<'a>(n: c_int, list: *const c_int) -> Res<&'a [c_int]> {
    if n < 0 || (n > 0 && list.is_null()) {
        return Err(Fail::new(abi::ERR_ARG, None, Why::Arg("bad partition list")));
    }
    if n == 0 {
        return Ok(&[]);
    }
    // SAFETY: the caller's contract.
    Ok(unsafe { std::slice::from_raw_parts(list, n as usize) })
}

/// `MPI_Parrived`: whether receiver partition `partition` has arrived.
///
/// # Safety
/// `flag` writable.
pub unsafe fn parrived(acc: &mut Access, h: abi::Request, partition: c_int, flag: *mut c_int) -> Res<()> {
    if flag.is_null() {
        return Err(null_arg(None, "null flag pointer"));
    }
    let st = acc.st();
    let (i, p) = active(st, h, false)?;
    if partition < 0 || partition as usize >= p.partitions {
        return Err(Fail::new(abi::ERR_ARG, None, Why::Arg("partition index out of range")));
    }
    poll(st, i)?;
    let on = match st.reqs.at(i) {
        Some(Req { ext: Some(e), .. }) => matches!(&**e, Ext::Part(p)
            if p.result.is_some() || p.arrived.get(partition as usize) == Some(&true)),
        _ => false,
    };
    // SAFETY: checked non-null; MPI's contract.
    unsafe { *flag = c_int::from(on) };
    Ok(())
}
