//! C's `long double` on x86-64: the x87 80-bit extended format (64-bit significand with an
//! explicit integer bit, 15-bit exponent, sign), stored in 16 bytes of which the first 10 hold
//! the value. Rust has no such type: sums and products run on the x87 unit itself (inline
//! assembly, exactly what a C compiler emits for `long double` arithmetic), comparisons decode
//! the bits.
//!
//! The 6 padding bytes of a result are left as they were in the accumulator.

use super::OpKind;

/// Bytes of one `long double` in memory (its `sizeof`).
pub const SIZE: usize = 16;

/// An x87 binary operation.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Arith {
    Add,
    Sub,
    Mul,
}

/// `a = a ∘ b` on the 10-byte values at the start of `a` and `b`. (Elsewhere `long double` is
/// another format: `OpKind::applies_to` refuses it, so this is never called.)
#[cfg(not(target_arch = "x86_64"))]
pub fn arith(_: Arith, _: &mut [u8], _: &[u8]) {}

/// `a = a ∘ b` on the 10-byte values at the start of `a` and `b`.
#[cfg(target_arch = "x86_64")]
pub fn arith(f: Arith, a: &mut [u8], b: &[u8]) {
    assert!(a.len() >= 10 && b.len() >= 10, "an x87 value is 10 bytes");
    let (pa, pb) = (a.as_mut_ptr(), b.as_ptr());
    // SAFETY: both pointers address 10 readable bytes (checked above), `pa` 10 writable ones;
    // the x87 stack is empty on entry (every st register is declared clobbered) and empty on
    // exit (two loads, one popping operation, one popping store); no memory besides the two
    // operands is touched and the stack pointer is not.
    unsafe {
        match f {
            Arith::Add => std::arch::asm!(
                "fld tbyte ptr [{a}]",
                "fld tbyte ptr [{b}]",
                "faddp st(1), st",
                "fstp tbyte ptr [{a}]",
                a = in(reg) pa, b = in(reg) pb,
                out("st(0)") _, out("st(1)") _, out("st(2)") _, out("st(3)") _,
                out("st(4)") _, out("st(5)") _, out("st(6)") _, out("st(7)") _,
                options(nostack),
            ),
            // `fsubp st(1), st` computes st(1) - st(0): a - b with `a` loaded first.
            Arith::Sub => std::arch::asm!(
                "fld tbyte ptr [{a}]",
                "fld tbyte ptr [{b}]",
                "fsubp st(1), st",
                "fstp tbyte ptr [{a}]",
                a = in(reg) pa, b = in(reg) pb,
                out("st(0)") _, out("st(1)") _, out("st(2)") _, out("st(3)") _,
                out("st(4)") _, out("st(5)") _, out("st(6)") _, out("st(7)") _,
                options(nostack),
            ),
            Arith::Mul => std::arch::asm!(
                "fld tbyte ptr [{a}]",
                "fld tbyte ptr [{b}]",
                "fmulp st(1), st",
                "fstp tbyte ptr [{a}]",
                a = in(reg) pa, b = in(reg) pb,
                out("st(0)") _, out("st(1)") _, out("st(2)") _, out("st(3)") _,
                out("st(4)") _, out("st(5)") _, out("st(6)") _, out("st(7)") _,
                options(nostack),
            ),
        }
    }
}

/// The value at the start of `b` as a key that orders like the number (`None` for a NaN):
/// sign-magnitude turned into a two's-complement-like order over (exponent, significand).
fn key(b: &[u8]) -> Option<i128> {
    let mut m = [0u8; 8];
    m.copy_from_slice(&b[..8]);
    let significand = u64::from_le_bytes(m);
    let se = u16::from_le_bytes([b[8], b[9]]);
    let exp = se & 0x7fff;
    if exp == 0x7fff && significand << 1 != 0 {
        return None;
    }
    if exp == 0 && significand == 0 {
        return Some(0);
    }
    let mag = (i128::from(exp) << 64) | i128::from(significand);
    Some(if se & 0x8000 != 0 { -mag } else { mag })
}

/// True if `a < b` (false when either is a NaN), on the values at the start of the slices.
pub fn less(a: &[u8], b: &[u8]) -> bool {
    matches!((key(a), key(b)), (Some(x), Some(y)) if x < y)
}

/// Element-wise `acc[i] = acc[i] op src[i]` over `long double`s.
pub fn reduce_real(op: OpKind, acc: &mut [u8], src: &[u8]) {
    for (a, b) in acc.chunks_exact_mut(SIZE).zip(src.chunks_exact(SIZE)) {
        match op {
            OpKind::Sum => arith(Arith::Add, a, b),
            OpKind::Prod => arith(Arith::Mul, a, b),
            // MAX/MIN keep the accumulated value unless the other is strictly greater/less.
            OpKind::Max if less(a, b) => a[..10].copy_from_slice(&b[..10]),
            OpKind::Min if less(b, a) => a[..10].copy_from_slice(&b[..10]),
            _ => {}
        }
    }
}

/// Element-wise `acc[i] = acc[i] op src[i]` over `long double _Complex` (two `long double`s,
/// real part first): SUM part by part, PROD `(ac − bd) + (ad + bc)i`.
pub fn reduce_complex(op: OpKind, acc: &mut [u8], src: &[u8]) {
    for (a, b) in acc.chunks_exact_mut(2 * SIZE).zip(src.chunks_exact(2 * SIZE)) {
        let (ar, ai) = a.split_at_mut(SIZE);
        let (br, bi) = b.split_at(SIZE);
        match op {
            OpKind::Sum => {
                arith(Arith::Add, ar, br);
                arith(Arith::Add, ai, bi);
            }
            OpKind::Prod => {
                let (mut ac, mut bd, mut ad, mut bc) = ([0u8; SIZE], [0u8; SIZE], [0u8; SIZE], [0u8; SIZE]);
                ac.copy_from_slice(ar);
                bd.copy_from_slice(ai);
                ad.copy_from_slice(ar);
                bc.copy_from_slice(ai);
                arith(Arith::Mul, &mut ac, br);
                arith(Arith::Mul, &mut bd, bi);
                arith(Arith::Mul, &mut ad, bi);
                arith(Arith::Mul, &mut bc, br);
                arith(Arith::Sub, &mut ac, &bd);
                arith(Arith::Add, &mut ad, &bc);
                ar[..10].copy_from_slice(&ac[..10]);
                ai[..10].copy_from_slice(&ad[..10]);
            }
            _ => {}
        }
    }
}

#[cfg(all(test, target_arch = "x86_64"))]
mod tests {
    use super::*;

    /// The x87 bytes of a small integer `v` (exact), padded to 16.
    fn ld(v: i64) -> [u8; SIZE] {
        let mut out = [0u8; SIZE];
        if v == 0 {
            return out;
        }
        let m = v.unsigned_abs();
        let shift = m.leading_zeros();
        let significand = m << shift;
        let exp = 16383 + 63 - shift as u16;
        out[..8].copy_from_slice(&significand.to_le_bytes());
        out[8..10].copy_from_slice(&(exp | if v < 0 { 0x8000 } else { 0 }).to_le_bytes());
        out
    }

    #[test]
    fn arithmetic_and_order_on_x87_values() {
        let mut a = ld(6);
        arith(Arith::Add, &mut a, &ld(-9));
        assert_eq!(a, ld(-3));
        arith(Arith::Mul, &mut a, &ld(-7));
        assert_eq!(a, ld(21));
        arith(Arith::Sub, &mut a, &ld(25));
        assert_eq!(a, ld(-4));
        assert!(less(&ld(-5), &ld(-4)) && less(&ld(-1), &ld(0)) && less(&ld(0), &ld(1)) && less(&ld(2), &ld(3)));
        assert!(!less(&ld(3), &ld(3)));
        let mut nan = ld(0);
        nan[..10].copy_from_slice(&[0, 0, 0, 0, 0, 0, 0, 0xc0, 0xff, 0x7f]);
        assert!(!less(&nan, &ld(1)) && !less(&ld(1), &nan));
        let mut v: Vec<u8> = [ld(2), ld(-8)].concat();
        reduce_real(OpKind::Max, &mut v, &[ld(5), ld(-9)].concat());
        assert_eq!(v, [ld(5), ld(-8)].concat());
        // (1 + 2i)(3 − 4i) = 11 + 2i.
        let mut z: Vec<u8> = [ld(1), ld(2)].concat();
        reduce_complex(OpKind::Prod, &mut z, &[ld(3), ld(-4)].concat());
        assert_eq!(z, [ld(11), ld(2)].concat());
        reduce_complex(OpKind::Sum, &mut z, &[ld(-11), ld(1)].concat());
        assert_eq!(z, [ld(0), ld(3)].concat());
    }
}
