//! Accumulates (`MPI_Accumulate`, `MPI_Get_accumulate`, `MPI_Fetch_and_op`,
//! `MPI_Compare_and_swap` and their request-based forms) by the provider's atomics
//! (`fi_atomic`, `fi_fetch_atomic`, `fi_compare_atomic`), where a window may use them.
//!
//! **Atomicity rule.** MPI-4.1 §12.7.1 (MPI-3.1 §11.7) makes accumulates to one location with
//! one basic type atomic with one another, whatever their origins. Node-local origins change
//! a target's memory by CPU atomics or under its mutex (`super::super::atomic`), and those are
//! not atomic with the provider's read-modify-write (a NIC's, or a software provider's own
//! load and store). So a window uses the provider's atomics only when every origin that can
//! touch a target's memory goes through the provider too: when every node of the window has
//! exactly one member. Its only node-local origin of a target is then the target itself, whose
//! own accumulates go through the provider as well, to its own key ([`nemesis::Endpoint::rma_loopback`]).
//! MPICH ch4 has `disable_shm_accumulate` for the same reason. The rule holds per basic type:
//! a type goes by the provider only if the provider does every operation MPI allows on it,
//! plain, fetching and (integers) compare-and-swap ([`covered`]); any other type stays on the
//! active messages for every origin, so no location is changed by both kinds of atomics.
//!
//! The decision is collective ([`super::created`]'s allgather: every member's own view and
//! covered types, the AND of all), so all members agree. Info key `nemesis_nic_atomics`:
//! unset = this rule; `false` = never; `true` = this rule as well (a window with several members
//! on a node cannot honour it: `MPI_Win_get_info` then reports `false`, the value in force).
//!
//! Completion as puts and gets ([`super::flush`]): operands packed and results landed in the
//! window's [`super::Ofi`] until the flush of their target; this process's accumulates to
//! itself complete before the call returns (a loopback round trip), since its local
//! synchronisation calls do not flush.

use nemesis::rma::{Atomic, AtomicKind, FiOp, FiType};

use super::super::atomic::How;
use super::super::rma::{Kind as XKind, Transfer};
use crate::abi;
use crate::datatype::{self, Kind as TKind, pack};
use crate::error::Res;
use crate::op::OpKind;
use crate::state::{Access, not_running};

/// The atomic kinds, types and operations (libfabric's orders).
const KINDS: [AtomicKind; 3] = [AtomicKind::Update, AtomicKind::Fetch, AtomicKind::Compare];
const TYPES: usize = 10;
const OPS: usize = 13;

/// The operations MPI allows on integers (with `MPI_REPLACE`) and on floating types.
const INT_OPS: [FiOp; 11] = [
    FiOp::Min,
    FiOp::Max,
    FiOp::Sum,
    FiOp::Prod,
    FiOp::Lor,
    FiOp::Land,
    FiOp::Bor,
    FiOp::Band,
    FiOp::Lxor,
    FiOp::Bxor,
    FiOp::Write,
];
const FLOAT_OPS: [FiOp; 5] = [FiOp::Min, FiOp::Max, FiOp::Sum, FiOp::Prod, FiOp::Write];

/// Every `FiType`, by value.
const ALL_TYPES: [FiType; TYPES] = [
    FiType::I8,
    FiType::U8,
    FiType::I16,
    FiType::U16,
    FiType::I32,
    FiType::U32,
    FiType::I64,
    FiType::U64,
    FiType::F32,
    FiType::F64,
];

/// The provider's most elements per atomic, by kind, type and operation (0: not done).
#[derive(Debug, Clone, Default)]
pub struct Counts(Vec<u32>);

impl Counts {
    /// Asks the provider (`fi_*atomicvalid`) through `ep`.
    pub fn of(ep: &nemesis::Endpoint) -> Counts {
        let mut v = vec![0u32; KINDS.len() * TYPES * OPS];
        for &kind in &KINDS {
            for &ty in &ALL_TYPES {
                for op in ops_for(ty).iter().copied().chain([FiOp::Read, FiOp::Cswap]) {
                    let n = ep.rma_atomic_count(kind, op, ty);
                    v[index(kind, ty, op)] = u32::try_from(n).unwrap_or(u32::MAX);
                }
            }
        }
        Counts(v)
    }

    /// The most elements of `kind` of `op` on `ty` per atomic.
    pub fn get(&self, kind: AtomicKind, ty: FiType, op: FiOp) -> usize {
        self.0.get(index(kind, ty, op)).copied().unwrap_or(0) as usize
    }
}

fn index(kind: AtomicKind, ty: FiType, op: FiOp) -> usize {
    let k = KINDS.iter().position(|&x| x == kind).unwrap_or(0);
    (k * TYPES + ty as usize) * OPS + op as usize
}

fn float(ty: FiType) -> bool {
    matches!(ty, FiType::F32 | FiType::F64)
}

fn ops_for(ty: FiType) -> &'static [FiOp] {
    if float(ty) { &FLOAT_OPS } else { &INT_OPS }
}

/// The types (a bit per `FiType`) on which the provider does every operation MPI allows, plain
/// and fetching, the fetch-only read, and compare-and-swap on integers.
pub fn covered(c: &Counts) -> u16 {
    let mut mask = 0u16;
    for &ty in &ALL_TYPES {
        let ops = ops_for(ty);
        let ok = ops.iter().all(|&op| c.get(AtomicKind::Update, ty, op) > 0 && c.get(AtomicKind::Fetch, ty, op) > 0)
            && c.get(AtomicKind::Fetch, ty, FiOp::Read) > 0
            && (float(ty) || c.get(AtomicKind::Compare, ty, FiOp::Cswap) > 0);
        if ok {
            mask |= 1 << ty as u16;
        }
    }
    mask
}

/// The provider's type of a predefined type's elements, if it has one.
fn fi_type(k: TKind) -> Option<FiType> {
    Some(match k {
        TKind::I8 => FiType::I8,
        TKind::U8 | TKind::Byte => FiType::U8,
        TKind::I16 => FiType::I16,
        TKind::U16 => FiType::U16,
        TKind::I32 => FiType::I32,
        TKind::U32 => FiType::U32,
        TKind::I64 => FiType::I64,
        TKind::U64 => FiType::U64,
        TKind::F32 => FiType::F32,
        TKind::F64 => FiType::F64,
        _ => return None,
    })
}

fn fi_op(o: OpKind) -> FiOp {
    match o {
        OpKind::Max => FiOp::Max,
        OpKind::Min => FiOp::Min,
        OpKind::Sum => FiOp::Sum,
        OpKind::Prod => FiOp::Prod,
        OpKind::Land => FiOp::Land,
        OpKind::Band => FiOp::Band,
        OpKind::Lor => FiOp::Lor,
        OpKind::Bor => FiOp::Bor,
        OpKind::Lxor => FiOp::Lxor,
        OpKind::Bxor => FiOp::Bxor,
    }
}

/// What accumulate `x` (element rule `how`) is for the provider: its call and operation;
/// `Some(None)`: nothing to do (`MPI_Accumulate` with `MPI_NO_OP`); `None`: not for it.
fn call_of(x: &Transfer, how: How) -> Option<Option<(AtomicKind, FiOp)>> {
    let op = match how {
        How::Replace => FiOp::Write,
        How::NoOp => FiOp::Read,
        How::Op(o, _) => fi_op(o),
        How::Cas => FiOp::Cswap,
        How::Loc(..) => return None,
    };
    Some(match x.kind {
        XKind::Acc(_) if how == How::NoOp => None,
        XKind::Acc(_) => Some((AtomicKind::Update, op)),
        XKind::GetAcc(_) => Some((AtomicKind::Fetch, op)),
        XKind::Cas => Some((AtomicKind::Compare, FiOp::Cswap)),
        XKind::Put | XKind::Get => return None,
    })
}

/// Carries out accumulate `x` (checked; rule `how`) by the provider's atomics if window `h`
/// uses them for its type: false if it is not for this path.
pub fn accumulate(acc: &mut Access, h: abi::Win, x: &Transfer, how: How) -> Res<bool> {
    let Some(w) = acc.st().wins.table.get_mut(h) else { return Ok(false) };
    let me = w.rank();
    let tg = w.targets[x.target as usize];
    let Some(r) = w.remote.as_deref_mut() else { return Ok(false) };
    let Some(o) = r.ofi.as_deref_mut() else { return Ok(false) };
    let Some(ty) = x.tside.desc.leaf.and_then(datatype::lookup).and_then(|b| fi_type(b.kind)) else {
        return Ok(false);
    };
    if o.nic & (1 << ty as u16) == 0 {
        return Ok(false);
    }
    let Some(call) = call_of(x, how) else { return Ok(false) };
    let Some(key) = o.keys.get(x.target as usize).copied().flatten() else { return Ok(false) };
    let Some((kind, op)) = call else {
        // MPI_Accumulate with MPI_NO_OP: nothing changes.
        if x.request {
            let id = r.origin.next_id();
            r.origin.finished.push((id, abi::SUCCESS));
            r.origin.request = Some(id);
        }
        return Ok(true);
    };
    issue(acc, h, x, (kind, op, ty), key, tg.job)?;
    if x.target == me {
        // Its own synchronisation calls do not flush this process (node-local path).
        super::flush(acc, h, Some(me))?;
    }
    Ok(true)
}

/// Posts `x`'s atomics, block by block of the target's layout, in pieces of the provider's
/// most elements; keeps their buffers until the target's flush.
fn issue(
    acc: &mut Access,
    h: abi::Win,
    x: &Transfer,
    (kind, op, ty): (AtomicKind, FiOp, FiType),
    key: nemesis::rma::RmaKey,
    job: u32,
) -> Res<()> {
    let st = acc.st();
    let phase = st.phase;
    let crate::state::State { ep, wins, .. } = st;
    let Some(ep) = ep.as_mut() else { return Err(not_running(phase)) };
    let w = wins.table.get_mut(h).ok_or_else(|| super::super::bad_win(h))?;
    let Some(r) = w.remote.as_deref_mut() else { return Ok(()) };
    let Some(o) = r.ofi.as_deref_mut() else { return Ok(()) };
    let size = ty.size();
    let tbytes = x.tside.bytes();
    let mut src = if op == FiOp::Read {
        vec![0u8; tbytes]
    } else if kind == AtomicKind::Compare {
        // SAFETY: MPI's contract: the origin buffer holds one element.
        unsafe { std::slice::from_raw_parts(x.origin.addr.cast_const(), size) }.to_vec()
    } else {
        // SAFETY: MPI's contract: the origin buffer holds the data its layout describes.
        unsafe { super::super::remote::layout(&x.origin).packed() }
    };
    let cmp = if kind == AtomicKind::Compare {
        // SAFETY: MPI's contract: the compare buffer holds one element.
        unsafe { std::slice::from_raw_parts(x.compare, size) }.to_vec()
    } else {
        Vec::new()
    };
    // Plain updates are posted as fetching ones into a scratch buffer: their completion then
    // says they were applied (a reply came back), whatever the provider makes of
    // `FI_DELIVERY_COMPLETE` (tcp;ofi_rxm's loopback completed updates before applying them).
    let fetched = kind != AtomicKind::Update;
    let kind = if fetched { kind } else { AtomicKind::Fetch };
    let mut res = vec![0u8; tbytes];
    let most = o.counts.get(kind, ty, op).max(1);
    let mut at = 0usize;
    let mut result = Ok(());
    let mut posted = 0u64;
    pack::for_each_block(&x.tside.desc, x.tside.count, |off, len| {
        let mut done = 0usize;
        while result.is_ok() && done + size <= len {
            let n = ((len - done) / size).min(most);
            let disp = (x.disp as i64).wrapping_add(off as i64).wrapping_add(done as i64) as u64;
            // SAFETY: `src`, `cmp` and `res` hold the packed data (the blocks' sum of bytes);
            // their heap blocks stay in `o` until the target's flush.
            let a = unsafe {
                Atomic {
                    kind,
                    op,
                    ty,
                    src: src.as_mut_ptr().add(at),
                    compare: if cmp.is_empty() { std::ptr::null() } else { cmp.as_ptr() },
                    result: res.as_mut_ptr().add(at),
                    count: n,
                }
            };
            // SAFETY: as above.
            result = unsafe { ep.rma_atomic(job, &a, &key, disp) };
            posted += 1;
            at += n * size;
            done += n * size;
        }
    });
    // Posted atomics name the buffers: kept even on an error (the flush frees them).
    o.atomics += posted;
    o.held.push((x.target, src));
    if !cmp.is_empty() {
        o.held.push((x.target, cmp));
    }
    match (fetched, x.result.as_ref()) {
        (true, Some(rs)) => o.gets.push((x.target, res, super::super::remote::layout(rs))),
        _ => o.held.push((x.target, res)),
    }
    if !o.dirty.contains(&x.target) {
        o.dirty.push(x.target);
    }
    super::request::record(r, x, !fetched);
    result.map_err(super::endpoint)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_type_is_covered_only_if_every_operation_mpi_allows_is() {
        let mut c = Counts(vec![1; KINDS.len() * TYPES * OPS]);
        assert_eq!(covered(&c), 0x3ff);
        // No compare-and-swap on i32: i32 stays on the active messages; floats need none.
        c.0[index(AtomicKind::Compare, FiType::I32, FiOp::Cswap)] = 0;
        c.0[index(AtomicKind::Compare, FiType::F64, FiOp::Cswap)] = 0;
        assert_eq!(covered(&c), 0x3ff & !(1 << FiType::I32 as u16));
        // No fetching product on f64: f64 out too.
        c.0[index(AtomicKind::Fetch, FiType::F64, FiOp::Prod)] = 0;
        assert_eq!(covered(&c) & (1 << FiType::F64 as u16), 0);
        assert_eq!(covered(&Counts::default()), 0);
        assert_eq!(c.get(AtomicKind::Update, FiType::U8, FiOp::Bxor), 1);
    }

    #[test]
    fn predefined_types_and_operations_map_to_libfabric_ones() {
        assert_eq!(fi_type(TKind::Byte), Some(FiType::U8));
        assert_eq!(fi_type(TKind::I64), Some(FiType::I64));
        assert_eq!(fi_type(TKind::F64), Some(FiType::F64));
        assert_eq!(fi_type(TKind::C64), None);
        assert_eq!(fi_type(TKind::Pair), None);
        assert_eq!(fi_op(OpKind::Bxor), FiOp::Bxor);
        assert_eq!(fi_op(OpKind::Land), FiOp::Land);
        assert_eq!(fi_op(OpKind::Max), FiOp::Max);
    }
}
