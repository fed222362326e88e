//! Predefined reduction operations and the element-wise kernels that apply them to byte buffers.
//!
//! Which operation applies to which type follows MPI-4.1 §6.9.2: `MAX`/`MIN` to integers (C,
//! Fortran, `MPI_AINT`/`OFFSET`/`COUNT`) and floating point (`long double` too); `SUM`/`PROD` the
//! same and complex numbers; the logical ones (`LAND`, `LOR`, `LXOR`) to C integers and logicals;
//! the bitwise ones (`BAND`, `BOR`, `BXOR`) to integers and `MPI_BYTE`; `MINLOC`/`MAXLOC` to the
//! pair types. Characters take none (MPICH's extension to `MPI_CHAR` is not followed).
//! `long double` is the x87 format ([`x87`]). Every predefined
//! operation is commutative (and associative up to floating-point rounding), which lets the
//! collectives combine partial results in tree order.
//!
//! Buffers are bytes (user buffers and the collectives' scratch space alike, which need not be
//! aligned for the element type): elements are read and written with native-endian byte
//! conversions, which the compiler turns into plain (unaligned) loads and stores.

use std::ffi::{c_int, c_void};

use crate::abi::{self, Datatype, OP_BUILTIN, Op};
use crate::datatype::{Builtin, Class, Kind};
use crate::handle::Table;

mod local;
mod x87;

pub use local::reduce_local_c;

/// A user's reduction (`MPI_User_function`): `inoutvec[i] = invec[i] ⊕ inoutvec[i]` for `*len`
/// elements of `*datatype`.
pub type UserFn =
    unsafe extern "C" fn(invec: *mut c_void, inoutvec: *mut c_void, len: *mut c_int, datatype: *mut Datatype);

/// A user's reduction function: `MPI_User_function` (`MPI_Op_create`) or
/// `MPI_User_function_c` (`MPI_Op_create_c`, an `MPI_Count` length).
#[derive(Clone, Copy, Debug)]
pub enum UserFunc {
    Int(UserFn),
    Large(crate::abi::UserFnC),
}

impl UserFunc {
    /// Calls the function on `n` elements of `dt` at `inv` and `inout`, through
    /// [`crate::state::outside`] (it may call MPI).
    ///
    /// # Safety
    /// MPI's contract on user functions: both pointers address `n` elements of `dt`; no
    /// reference into the state is live.
    unsafe fn call(self, inv: *mut c_void, inout: *mut c_void, n: usize, dt: Datatype) {
        let mut dt = dt;
        match self {
            UserFunc::Int(f) => {
                // The collectives' counts are `int`s: `n` fits.
                let mut len = n as c_int;
                // SAFETY: the caller's contract; `len` and `dt` are ours.
                unsafe { crate::state::outside(|| f(inv, inout, &mut len, &mut dt)) }
            }
            UserFunc::Large(f) => {
                let mut len = n as crate::abi::Count;
                // SAFETY: as above.
                unsafe { crate::state::outside(|| f(inv, inout, &mut len, &mut dt)) }
            }
        }
    }
}

/// An operation made by `MPI_Op_create` or `MPI_Op_create_c`.
#[derive(Clone, Copy, Debug)]
pub struct UserOp {
    pub f: UserFunc,
    /// Whether the user declared it commutative.
    pub commute: bool,
    /// Holders of the handle ([`hold`]): the entry stays while any is left.
    pub holds: u32,
    /// `MPI_Op_free` was called while it was held: removed at the last [`release`].
    pub freed: bool,
}

/// Keeps user operation `op`'s handle (and its slot) valid until [`release`], whether or not the
/// program frees it meanwhile (MPI-4.1 §6.9.5: pending operations that use a freed operation
/// complete normally). For holders that resolve the handle again later (a persistent
/// collective's recipe at each `MPI_Start`); what resolved it once holds a copy ([`UserCall`]).
pub fn hold(ops: &mut UserOps, op: Op) {
    if let Some(u) = ops.get_mut(op) {
        u.holds += 1;
    }
}

/// `MPI_Op_free`'s removal of user operation `op` from the table: now, or at the last
/// [`release`] if it is held; false if `op` is no (unfreed) user operation.
fn unlist(ops: &mut UserOps, op: Op) -> bool {
    match ops.get_mut(op) {
        None => return false,
        Some(u) if u.freed => return false,
        Some(u) if u.holds > 0 => u.freed = true,
        Some(_) => drop(ops.remove(op)),
    }
    true
}

/// Ends one [`hold`] of `op`: an operation freed meanwhile goes with its last holder.
pub fn release(ops: &mut UserOps, op: Op) {
    if let Some(u) = ops.get_mut(op) {
        u.holds = u.holds.saturating_sub(1);
        if u.freed && u.holds == 0 {
            ops.remove(op);
        }
    }
}

/// A user's operation applied to elements of `dt`.
#[derive(Clone, Copy, Debug)]
pub struct UserCall {
    pub f: UserFunc,
    pub commute: bool,
    pub dt: Datatype,
    /// Bytes per element of `dt`, packed.
    pub elem: usize,
    /// A non-contiguous `dt`'s layout, whose data the collectives hold packed: the user's
    /// function is called on it unpacked into scratch laid out as the type says. The pointer is
    /// an `Arc<TypeDesc>`'s, a counted reference to which is held by whoever holds the reduction
    /// (the collective's frame, or its schedule: `coll::reduction_kept` returns it), so it is
    /// valid whenever `apply` runs — also after the user's function freed `dt` (MPI lets it:
    /// the table's reference goes, the held one stays) — until the reduction is dropped.
    pub layout: Option<*const crate::datatype::TypeDesc>,
}

impl UserCall {
    /// `inout = inv ⊕ inout` (the user's function on the whole elements of `inout`).
    ///
    /// Reentrancy: the user's function may call MPI, so it runs through
    /// [`crate::state::outside`], and the caller holds no reference into the state: `inv` and
    /// `inout` are the program's buffers or scratch owned by the collective's frame or by its
    /// schedule, which `p2p::complete::advance_coll` takes out of the request table while the
    /// function runs. Nothing is looked up again afterwards: `self` is a copy, its layout kept
    /// alive (see `layout`).
    pub fn apply(&self, inv: &[u8], inout: &mut [u8]) {
        let n = inout.len().min(inv.len()) / self.elem.max(1);
        if n == 0 {
            return;
        }
        if let Some(desc) = self.layout {
            // SAFETY: see `layout`: the descriptor outlives every use of this reduction.
            return self.apply_unpacked(unsafe { &*desc }, n, inv, inout);
        }
        // SAFETY: both buffers hold `n` elements of `dt` (the collectives move whole elements);
        // the function reads `invec` and writes `inoutvec` within them (MPI's contract on user
        // functions); no reference into the state is live (above).
        unsafe { self.f.call(inv.as_ptr().cast_mut().cast(), inout.as_mut_ptr().cast(), n, self.dt) };
    }
}

impl UserCall {
    /// [`UserCall::apply`] for a non-contiguous type: both operands unpacked into scratch laid
    /// out as `n` elements of the type (from its true lower bound), the function called on the
    /// scratch, the result packed back into `inout`.
    fn apply_unpacked(&self, desc: &crate::datatype::TypeDesc, n: usize, inv: &[u8], inout: &mut [u8]) {
        let span = desc.true_ub - desc.true_lb;
        let Some(bytes) = (n as isize - 1).checked_mul(desc.extent()).and_then(|b| b.checked_add(span)) else { return };
        let Ok(bytes) = usize::try_from(bytes) else { return };
        let packed = n * desc.size;
        if inv.len() < packed || inout.len() < packed {
            return;
        }
        let (mut a, mut b) = (vec![0u8; bytes], vec![0u8; bytes]);
        // `base + true_lb` is the scratch's first byte: every run of the `n` elements falls in it.
        let (pa, pb) = (a.as_mut_ptr().wrapping_offset(-desc.true_lb), b.as_mut_ptr().wrapping_offset(-desc.true_lb));
        // SAFETY: the scratch spans the `n` elements' runs from the type's true lower bound
        // (`(n - 1) × extent + true extent` bytes); `inv` and `inout` hold `n` packed elements.
        unsafe {
            crate::datatype::pack::unpack(desc, pa, n, &inv[..packed]);
            crate::datatype::pack::unpack(desc, pb, n, &inout[..packed]);
        }
        // SAFETY: the scratch holds `n` elements of `dt` at `pa` and `pb` in the type's layout
        // (MPI's contract on user functions: they touch the elements only); no reference into
        // the state is live (`apply`).
        unsafe { self.f.call(pa.cast(), pb.cast(), n, self.dt) };
        // SAFETY: as above; `inout` has room for the `n` packed elements.
        unsafe { crate::datatype::pack::pack(desc, pb, n, &mut inout[..packed]) };
    }
}

/// The table of user operations: handles `OP_DIRECT + index`.
pub type UserOps = Table<UserOp>;

/// Handles of user operations: MPICH's direct op handles.
pub const OP_DIRECT: u32 = abi::handle::DIRECT | abi::handle::OP;

pub const fn table() -> UserOps {
    Table::new(OP_DIRECT)
}

/// `MPI_Op_create`.
///
/// # Safety
/// `op` null or writable.
pub unsafe fn create(
    acc: &mut crate::state::Access,
    f: Option<UserFn>,
    commute: c_int,
    op: *mut Op,
) -> crate::error::Res<()> {
    // SAFETY: the caller's contract.
    unsafe { create_any(acc, f.map(UserFunc::Int), commute, op) }
}

/// `MPI_Op_create_c`.
///
/// # Safety
/// `op` null or writable.
pub unsafe fn create_c(
    acc: &mut crate::state::Access,
    f: Option<crate::abi::UserFnC>,
    commute: c_int,
    op: *mut Op,
) -> crate::error::Res<()> {
    // SAFETY: the caller's contract.
    unsafe { create_any(acc, f.map(UserFunc::Large), commute, op) }
}

/// [`create`] and [`create_c`].
///
/// # Safety
/// `op` null or writable.
unsafe fn create_any(
    acc: &mut crate::state::Access,
    f: Option<UserFunc>,
    commute: c_int,
    op: *mut Op,
) -> crate::error::Res<()> {
    use crate::error::{Fail, Why};
    let Some(f) = f else { return Err(Fail::new(abi::ERR_ARG, None, Why::Arg("null user function"))) };
    if op.is_null() {
        return Err(Fail::new(abi::ERR_ARG, None, Why::Arg("null output pointer")));
    }
    let h = acc.st().ops.insert(UserOp { f, commute: commute != 0, holds: 0, freed: false });
    let h = h.ok_or_else(|| Fail::new(abi::ERR_INTERN, None, Why::Arg("too many operations")))?;
    // SAFETY: checked non-null; MPI's contract.
    unsafe { *op = h };
    Ok(())
}

/// `MPI_Op_free` (predefined operations cannot be freed); a held operation ([`hold`]) stays
/// until its last holder lets go.
///
/// # Safety
/// `op` null or valid for reads and writes.
pub unsafe fn free(acc: &mut crate::state::Access, op: *mut Op) -> crate::error::Res<()> {
    use crate::error::{Fail, Why};
    if op.is_null() {
        return Err(Fail::new(abi::ERR_ARG, None, Why::Arg("null operation pointer")));
    }
    // SAFETY: checked non-null; MPI's contract.
    let h = unsafe { *op };
    if !unlist(&mut acc.st().ops, h) {
        return Err(Fail::new(abi::ERR_OP, None, Why::Arg("not an operation made by MPI_Op_create")));
    }
    // SAFETY: as above.
    unsafe { *op = abi::OP_NULL };
    Ok(())
}

/// `MPI_Op_commutative` (every predefined operation is).
///
/// # Safety
/// `commute` null or writable.
pub unsafe fn commutative(acc: &mut crate::state::Access, op: Op, commute: *mut c_int) -> crate::error::Res<()> {
    use crate::error::{Fail, Why};
    let v = match acc.st().ops.get(op) {
        Some(u) => u.commute,
        None if OpKind::lookup(op).is_some() || op == abi::MINLOC || op == abi::MAXLOC => true,
        // The one-sided operations: `MPI_REPLACE` keeps the last value and `MPI_NO_OP` the first.
        None if op == abi::REPLACE || op == abi::NO_OP => false,
        None => return Err(Fail::new(abi::ERR_OP, None, Why::Arg("not an operation"))),
    };
    if commute.is_null() {
        return Err(Fail::new(abi::ERR_ARG, None, Why::Arg("null output pointer")));
    }
    // SAFETY: checked non-null; MPI's contract.
    unsafe { *commute = c_int::from(v) };
    Ok(())
}

/// A predefined operation.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum OpKind {
    Max,
    Min,
    Sum,
    Prod,
    Land,
    Band,
    Lor,
    Bor,
    Lxor,
    Bxor,
}

/// The predefined operations in handle order (`MPI_MAX` is `OP_BUILTIN + 1`, MPICH's order);
/// `MPI_MINLOC` and `MPI_MAXLOC` follow ([`Loc`], on pairs), then `MPI_REPLACE` and `MPI_NO_OP`
/// (one-sided only).
pub const OPS: [OpKind; 10] = [
    OpKind::Max,
    OpKind::Min,
    OpKind::Sum,
    OpKind::Prod,
    OpKind::Land,
    OpKind::Band,
    OpKind::Lor,
    OpKind::Bor,
    OpKind::Lxor,
    OpKind::Bxor,
];

impl OpKind {
    /// The operation named by handle `op`.
    pub fn lookup(op: Op) -> Option<OpKind> {
        OPS.get((op as u32).wrapping_sub(OP_BUILTIN + 1) as usize).copied()
    }

    /// The C name, for messages.
    pub fn name(self) -> &'static str {
        match self {
            OpKind::Max => "MPI_MAX",
            OpKind::Min => "MPI_MIN",
            OpKind::Sum => "MPI_SUM",
            OpKind::Prod => "MPI_PROD",
            OpKind::Land => "MPI_LAND",
            OpKind::Band => "MPI_BAND",
            OpKind::Lor => "MPI_LOR",
            OpKind::Bor => "MPI_BOR",
            OpKind::Lxor => "MPI_LXOR",
            OpKind::Bxor => "MPI_BXOR",
        }
    }

    /// True if the standard defines this operation on `t` (MPI-4.1 §6.9.2) and this library has
    /// its kernel (every type but `MPIX_C_FLOAT16`, `MPI_REAL16` and `MPI_COMPLEX32`; `long
    /// double` on x86-64 only).
    pub fn applies_to(self, t: &Builtin) -> bool {
        let class = t.class;
        let defined = match self {
            OpKind::Max | OpKind::Min => {
                matches!(class, Class::CInt | Class::FortranInt | Class::Float | Class::MultiLanguage)
            }
            OpKind::Sum | OpKind::Prod => {
                matches!(class, Class::CInt | Class::FortranInt | Class::Float | Class::Complex | Class::MultiLanguage)
            }
            OpKind::Land | OpKind::Lor | OpKind::Lxor => matches!(class, Class::CInt | Class::Logical),
            OpKind::Band | OpKind::Bor | OpKind::Bxor => {
                matches!(class, Class::CInt | Class::FortranInt | Class::Byte | Class::MultiLanguage)
            }
        };
        let kernel = match t.kind {
            Kind::F16 | Kind::F128 | Kind::C128 | Kind::Pair | Kind::Bound | Kind::Char => false,
            Kind::F80 | Kind::C80 => cfg!(target_arch = "x86_64"),
            _ => true,
        };
        defined && kernel
    }
}

/// Element-wise `acc[i] = acc[i] op src[i]` over the common length of the two buffers (callers
/// pass equal lengths, a multiple of the element size). The pair (op, kind) must satisfy
/// [`OpKind::applies_to`]; other pairs leave `acc` unchanged.
///
/// One loop per (operation, type), monomorphised, so the compiler vectorises it.
pub fn reduce(op: OpKind, kind: Kind, acc: &mut [u8], src: &[u8]) {
    match kind {
        Kind::I8 => int_op::<i8>(op, acc, src),
        Kind::I16 => int_op::<i16>(op, acc, src),
        Kind::I32 => int_op::<i32>(op, acc, src),
        Kind::I64 => int_op::<i64>(op, acc, src),
        Kind::U8 | Kind::Byte => int_op::<u8>(op, acc, src),
        Kind::U16 => int_op::<u16>(op, acc, src),
        Kind::U32 => int_op::<u32>(op, acc, src),
        Kind::U64 => int_op::<u64>(op, acc, src),
        Kind::F32 => float_op::<f32>(op, acc, src),
        Kind::F64 => float_op::<f64>(op, acc, src),
        Kind::F80 => x87::reduce_real(op, acc, src),
        Kind::C32 => complex_op::<f32>(op, acc, src),
        Kind::C64 => complex_op::<f64>(op, acc, src),
        Kind::C80 => x87::reduce_complex(op, acc, src),
        // No kernel (`OpKind::applies_to` refuses them).
        Kind::Char | Kind::F16 | Kind::F128 | Kind::C128 | Kind::Pair | Kind::Bound => {}
    }
}

/// `MPI_MINLOC` and `MPI_MAXLOC`: on pairs `(value, index)`, the least (greatest) value, and
/// among equal values the least index (MPI-3.1 §5.9.4). Commutative and associative.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Loc {
    Min,
    Max,
}

impl Loc {
    /// The operation named by handle `op`, if it is `MPI_MINLOC` or `MPI_MAXLOC`.
    pub fn lookup(op: Op) -> Option<Loc> {
        match op {
            abi::MINLOC => Some(Loc::Min),
            abi::MAXLOC => Some(Loc::Max),
            _ => None,
        }
    }

    /// The (value, index) kinds of the predefined pair type `dt` this library has a kernel for:
    /// the C pairs (`MPI_FLOAT_INT`, `MPI_DOUBLE_INT`, `MPI_LONG_INT`, `MPI_SHORT_INT`,
    /// `MPI_2INT`, `MPI_LONG_DOUBLE_INT` on x86-64; index `int`) and the Fortran ones
    /// (`MPI_2INTEGER`, `MPI_2REAL`, `MPI_2DOUBLE_PRECISION`; index of the value's type).
    pub fn pair_kinds(dt: Datatype) -> Option<(Kind, Kind)> {
        Some(match dt {
            abi::FLOAT_INT => (Kind::F32, Kind::I32),
            abi::DOUBLE_INT => (Kind::F64, Kind::I32),
            abi::LONG_INT => (Kind::I64, Kind::I32),
            abi::SHORT_INT => (Kind::I16, Kind::I32),
            abi::TWO_INT | abi::TWO_INTEGER => (Kind::I32, Kind::I32),
            abi::TWO_REAL => (Kind::F32, Kind::F32),
            abi::TWO_DOUBLE_PRECISION => (Kind::F64, Kind::F64),
            abi::LONG_DOUBLE_INT if cfg!(target_arch = "x86_64") => (Kind::F80, Kind::I32),
            _ => return None,
        })
    }
}

/// Bytes of a packed element of `kind` (the kinds [`Loc::pair_kinds`] returns).
pub fn kind_size(kind: Kind) -> usize {
    match kind {
        Kind::I16 => 2,
        Kind::I32 | Kind::F32 => 4,
        Kind::I64 | Kind::F64 => 8,
        Kind::F80 => x87::SIZE,
        _ => 0,
    }
}

/// `acc[i] = acc[i] loc src[i]` over packed `(value, index)` pairs of the given kinds.
pub fn reduce_loc(loc: Loc, value: Kind, index: Kind, acc: &mut [u8], src: &[u8]) {
    match (value, index) {
        (Kind::F32, Kind::I32) => loc_pairs::<f32, i32>(loc, acc, src),
        (Kind::F64, Kind::I32) => loc_pairs::<f64, i32>(loc, acc, src),
        (Kind::I64, Kind::I32) => loc_pairs::<i64, i32>(loc, acc, src),
        (Kind::I16, Kind::I32) => loc_pairs::<i16, i32>(loc, acc, src),
        (Kind::I32, Kind::I32) => loc_pairs::<i32, i32>(loc, acc, src),
        (Kind::F32, Kind::F32) => loc_pairs::<f32, f32>(loc, acc, src),
        (Kind::F64, Kind::F64) => loc_pairs::<f64, f64>(loc, acc, src),
        (Kind::F80, Kind::I32) => loc_x87(loc, acc, src),
        _ => {}
    }
}

/// [`reduce_loc`] on `(long double, int)` pairs (packed: 16 + 4 bytes).
fn loc_x87(loc: Loc, acc: &mut [u8], src: &[u8]) {
    let v = x87::SIZE;
    for (a, b) in acc.chunks_exact_mut(v + 4).zip(src.chunks_exact(v + 4)) {
        let (ai, bi) = (i32::load(&a[v..]), i32::load(&b[v..]));
        let better = match loc {
            Loc::Min => x87::less(b, a),
            Loc::Max => x87::less(a, b),
        };
        let equal = !x87::less(a, b) && !x87::less(b, a);
        if better || (equal && bi < ai) {
            a.copy_from_slice(b);
        }
    }
}

fn loc_pairs<V: Elem + PartialOrd, I: Elem + PartialOrd>(loc: Loc, acc: &mut [u8], src: &[u8]) {
    let n = V::N + I::N;
    for (a, b) in acc.chunks_exact_mut(n).zip(src.chunks_exact(n)) {
        let (av, ai) = (V::load(&a[..V::N]), I::load(&a[V::N..]));
        let (bv, bi) = (V::load(&b[..V::N]), I::load(&b[V::N..]));
        let better = match loc {
            Loc::Min => bv < av,
            Loc::Max => bv > av,
        };
        if better || (bv == av && bi < ai) {
            a.copy_from_slice(b);
        }
    }
}

/// An element type: its size and its native-endian bytes (read and written unaligned).
trait Elem: Copy {
    const N: usize;
    fn load(b: &[u8]) -> Self;
    fn store(self, b: &mut [u8]);
}

/// Integer arithmetic an operation needs (wrapping, as C's unsigned arithmetic and what every MPI
/// does for signed overflow in practice).
trait Int:
    Elem + Ord + std::ops::BitAnd<Output = Self> + std::ops::BitOr<Output = Self> + std::ops::BitXor<Output = Self>
{
    const ZERO: Self;
    const ONE: Self;
    fn wadd(self, o: Self) -> Self;
    fn wmul(self, o: Self) -> Self;
}

macro_rules! impl_elem {
    ($($t:ty),*) => {$(
        impl Elem for $t {
            const N: usize = size_of::<$t>();
            #[inline(always)]
            fn load(b: &[u8]) -> Self {
                let mut a = [0u8; size_of::<$t>()];
                a.copy_from_slice(b);
                <$t>::from_ne_bytes(a)
            }
            #[inline(always)]
            fn store(self, b: &mut [u8]) {
                b.copy_from_slice(&self.to_ne_bytes());
            }
        }
    )*};
}
impl_elem!(i8, i16, i32, i64, u8, u16, u32, u64, f32, f64);

macro_rules! impl_int {
    ($($t:ty),*) => {$(
        impl Int for $t {
            const ZERO: Self = 0;
            const ONE: Self = 1;
            #[inline(always)]
            fn wadd(self, o: Self) -> Self { self.wrapping_add(o) }
            #[inline(always)]
            fn wmul(self, o: Self) -> Self { self.wrapping_mul(o) }
        }
    )*};
}
impl_int!(i8, i16, i32, i64, u8, u16, u32, u64);

/// `acc[i] = f(acc[i], src[i])` for every element.
#[inline(always)]
fn zip_with<T: Elem>(acc: &mut [u8], src: &[u8], f: impl Fn(T, T) -> T) {
    for (a, b) in acc.chunks_exact_mut(T::N).zip(src.chunks_exact(T::N)) {
        f(T::load(a), T::load(b)).store(a);
    }
}

fn int_op<T: Int>(op: OpKind, acc: &mut [u8], src: &[u8]) {
    let truth = |x: T| x != T::ZERO;
    let of = |b: bool| if b { T::ONE } else { T::ZERO };
    match op {
        OpKind::Max => zip_with(acc, src, |a: T, b: T| a.max(b)),
        OpKind::Min => zip_with(acc, src, |a: T, b: T| a.min(b)),
        OpKind::Sum => zip_with(acc, src, |a: T, b: T| a.wadd(b)),
        OpKind::Prod => zip_with(acc, src, |a: T, b: T| a.wmul(b)),
        OpKind::Band => zip_with(acc, src, |a: T, b: T| a & b),
        OpKind::Bor => zip_with(acc, src, |a: T, b: T| a | b),
        OpKind::Bxor => zip_with(acc, src, |a: T, b: T| a ^ b),
        OpKind::Land => zip_with(acc, src, |a: T, b: T| of(truth(a) && truth(b))),
        OpKind::Lor => zip_with(acc, src, |a: T, b: T| of(truth(a) || truth(b))),
        OpKind::Lxor => zip_with(acc, src, |a: T, b: T| of(truth(a) != truth(b))),
    }
}

fn float_op<T: Elem + PartialOrd + std::ops::Add<Output = T> + std::ops::Mul<Output = T>>(
    op: OpKind,
    acc: &mut [u8],
    src: &[u8],
) {
    // MAX/MIN keep the accumulated value unless the other is strictly greater/less (a NaN on
    // either side leaves whatever comparison says: no MPI defines more).
    match op {
        OpKind::Max => zip_with(acc, src, |a: T, b: T| if b > a { b } else { a }),
        OpKind::Min => zip_with(acc, src, |a: T, b: T| if b < a { b } else { a }),
        OpKind::Sum => zip_with(acc, src, |a: T, b: T| a + b),
        OpKind::Prod => zip_with(acc, src, |a: T, b: T| a * b),
        _ => {}
    }
}

/// Complex numbers of two `T`s (real part first): SUM part by part, PROD
/// `(ac − bd) + (ad + bc)i` (what C compilers and MPICH compute, without the C99 Annex G
/// recovery of infinities).
fn complex_op<T: Elem + std::ops::Add<Output = T> + std::ops::Sub<Output = T> + std::ops::Mul<Output = T>>(
    op: OpKind,
    acc: &mut [u8],
    src: &[u8],
) {
    let n = T::N;
    for (a, b) in acc.chunks_exact_mut(2 * n).zip(src.chunks_exact(2 * n)) {
        let (ar, ai) = (T::load(&a[..n]), T::load(&a[n..]));
        let (br, bi) = (T::load(&b[..n]), T::load(&b[n..]));
        let (r, i) = match op {
            OpKind::Sum => (ar + br, ai + bi),
            OpKind::Prod => (ar * br - ai * bi, ar * bi + ai * br),
            _ => continue,
        };
        r.store(&mut a[..n]);
        i.store(&mut a[n..]);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::abi;

    fn bytes_i32(v: &[i32]) -> Vec<u8> {
        v.iter().flat_map(|x| x.to_ne_bytes()).collect()
    }

    fn i32s(b: &[u8]) -> Vec<i32> {
        b.chunks_exact(4).map(|c| i32::from_ne_bytes(c.try_into().unwrap())).collect()
    }

    #[test]
    fn a_held_operation_stays_until_its_last_release() {
        unsafe extern "C" fn f(_: *mut c_void, _: *mut c_void, _: *mut c_int, _: *mut Datatype) {}
        let mut t = table();
        let u = UserOp { f: UserFunc::Int(f), commute: true, holds: 0, freed: false };
        let h = t.insert(u).unwrap();
        hold(&mut t, h);
        assert!(unlist(&mut t, h));
        assert!(!unlist(&mut t, h), "a second free fails");
        assert!(t.get(h).is_some(), "freed while held: still listed");
        let other = t.insert(u).unwrap();
        assert_ne!(other, h);
        release(&mut t, h);
        assert!(t.get(h).is_none(), "gone with the last holder");
        assert!(unlist(&mut t, other));
        assert!(t.get(other).is_none(), "unheld: removed at once");
    }

    #[test]
    fn integer_operations() {
        let a = [5, -3, 0, 7, i32::MAX];
        let b = [2, 4, 0, -7, 1];
        let run = |op| {
            let mut acc = bytes_i32(&a);
            reduce(op, Kind::I32, &mut acc, &bytes_i32(&b));
            i32s(&acc)
        };
        assert_eq!(run(OpKind::Max), [5, 4, 0, 7, i32::MAX]);
        assert_eq!(run(OpKind::Min), [2, -3, 0, -7, 1]);
        assert_eq!(run(OpKind::Sum), [7, 1, 0, 0, i32::MIN], "wraps");
        assert_eq!(run(OpKind::Prod), [10, -12, 0, -49, i32::MAX]);
        assert_eq!(run(OpKind::Land), [1, 1, 0, 1, 1]);
        assert_eq!(run(OpKind::Lor), [1, 1, 0, 1, 1]);
        assert_eq!(run(OpKind::Lxor), [0, 0, 0, 0, 0]);
        assert_eq!(run(OpKind::Band), [5 & 2, -3 & 4, 0, 7 & -7, i32::MAX & 1]);
        assert_eq!(run(OpKind::Bor), [5 | 2, -3 | 4, 0, 7 | -7, i32::MAX]);
        assert_eq!(run(OpKind::Bxor), [5 ^ 2, -3 ^ 4, 0, 7 ^ -7, i32::MAX ^ 1]);
    }

    #[test]
    fn complex_sums_and_products() {
        let c = |v: &[f32]| -> Vec<u8> { v.iter().flat_map(|x| x.to_ne_bytes()).collect() };
        // (1 + 2i)(3 − 4i) = 11 + 2i; (−1 + 0i)(2 + 1i) = −2 − i.
        let mut acc = c(&[1.0, 2.0, -1.0, 0.0]);
        reduce(OpKind::Prod, Kind::C32, &mut acc, &c(&[3.0, -4.0, 2.0, 1.0]));
        assert_eq!(acc, c(&[11.0, 2.0, -2.0, -1.0]));
        reduce(OpKind::Sum, Kind::C32, &mut acc, &c(&[1.0, 1.0, 2.0, 2.0]));
        assert_eq!(acc, c(&[12.0, 3.0, 0.0, 1.0]));
        let d = |v: &[f64]| -> Vec<u8> { v.iter().flat_map(|x| x.to_ne_bytes()).collect() };
        let mut acc = d(&[0.5, -2.0]);
        reduce(OpKind::Prod, Kind::C64, &mut acc, &d(&[2.0, 2.0]));
        assert_eq!(acc, d(&[5.0, -3.0]));
    }

    #[test]
    fn unsigned_and_float_operations() {
        let mut acc: Vec<u8> = [200u16, 1].iter().flat_map(|x| x.to_ne_bytes()).collect();
        let src: Vec<u8> = [100u16, 3].iter().flat_map(|x| x.to_ne_bytes()).collect();
        reduce(OpKind::Max, Kind::U16, &mut acc, &src);
        assert_eq!(acc, [200u16, 3].iter().flat_map(|x| x.to_ne_bytes()).collect::<Vec<_>>());
        let mut acc: Vec<u8> = [1.5f64, -2.0].iter().flat_map(|x| x.to_ne_bytes()).collect();
        let src: Vec<u8> = [2.25f64, 4.0].iter().flat_map(|x| x.to_ne_bytes()).collect();
        reduce(OpKind::Prod, Kind::F64, &mut acc, &src);
        assert_eq!(acc, [3.375f64, -8.0].iter().flat_map(|x| x.to_ne_bytes()).collect::<Vec<_>>());
        let mut acc = 1.0f32.to_ne_bytes().to_vec();
        reduce(OpKind::Min, Kind::F32, &mut acc, &(-1.0f32).to_ne_bytes());
        assert_eq!(acc, (-1.0f32).to_ne_bytes());
    }

    #[test]
    fn minloc_and_maxloc_keep_the_least_index_among_equals() {
        let pairs = |v: &[(f64, i32)]| -> Vec<u8> {
            v.iter().flat_map(|(x, i)| x.to_ne_bytes().into_iter().chain(i.to_ne_bytes())).collect()
        };
        let a = pairs(&[(1.0, 5), (2.0, 1), (3.0, 9), (-1.0, 2)]);
        let b = pairs(&[(0.5, 7), (2.0, 0), (3.0, 10), (4.0, 1)]);
        let mut min = a.clone();
        reduce_loc(Loc::Min, Kind::F64, Kind::I32, &mut min, &b);
        assert_eq!(min, pairs(&[(0.5, 7), (2.0, 0), (3.0, 9), (-1.0, 2)]));
        let mut max = a.clone();
        reduce_loc(Loc::Max, Kind::F64, Kind::I32, &mut max, &b);
        assert_eq!(max, pairs(&[(1.0, 5), (2.0, 0), (3.0, 9), (4.0, 1)]));
        assert_eq!(Loc::pair_kinds(abi::SHORT_INT), Some((Kind::I16, Kind::I32)));
        assert_eq!(Loc::pair_kinds(abi::LONG_DOUBLE_INT), Some((Kind::F80, Kind::I32)));
        assert_eq!(Loc::pair_kinds(abi::INT), None);
    }

    #[test]
    fn the_standard_decides_which_operation_applies() {
        let t = |h| crate::datatype::lookup(h).unwrap();
        assert!(OpKind::Sum.applies_to(t(abi::DOUBLE)));
        assert!(!OpKind::Band.applies_to(t(abi::FLOAT)));
        assert!(!OpKind::Land.applies_to(t(abi::DOUBLE)));
        assert!(OpKind::Bor.applies_to(t(abi::BYTE)));
        assert!(!OpKind::Sum.applies_to(t(abi::BYTE)));
        assert!(!OpKind::Max.applies_to(t(abi::CHAR)));
        assert!(!OpKind::Max.applies_to(t(abi::WCHAR)));
        assert!(OpKind::Prod.applies_to(t(abi::C_DOUBLE_COMPLEX)));
        assert!(!OpKind::Max.applies_to(t(abi::C_DOUBLE_COMPLEX)));
        assert!(OpKind::Sum.applies_to(t(abi::LONG_DOUBLE)));
        assert!(!OpKind::Sum.applies_to(t(abi::C_FLOAT16)));
        assert!(OpKind::Land.applies_to(t(abi::C_BOOL)));
        assert!(!OpKind::Band.applies_to(t(abi::C_BOOL)));
        assert!(!OpKind::Land.applies_to(t(abi::INTEGER)), "Fortran integers are not logical");
        assert!(!OpKind::Land.applies_to(t(abi::AINT)));
        assert!(OpKind::Sum.applies_to(t(abi::COUNT)));
        assert_eq!(OpKind::lookup(abi::MAX), Some(OpKind::Max));
        assert_eq!(OpKind::lookup(abi::BOR), Some(OpKind::Bor));
        assert_eq!(OpKind::lookup(abi::BXOR), Some(OpKind::Bxor));
        assert_eq!(OpKind::lookup(abi::OP_NULL), None);
        assert_eq!(OpKind::lookup(abi::MINLOC), None);
        assert_eq!(Loc::lookup(abi::MINLOC), Some(Loc::Min));
        assert_eq!(Loc::lookup(abi::MAXLOC), Some(Loc::Max));
        assert_eq!(Loc::lookup(abi::SUM), None);
        assert_eq!(OpKind::lookup(0x5800_0000), None);
    }
}
