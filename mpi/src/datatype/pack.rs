//! Moving typed data: packing `count` elements of a type from a user buffer into contiguous bytes
//! and unpacking them back, whole or from any offset of the packed stream ([`Cursor`]), and a
//! typed buffer as [`Pieces`] ([`TypedBuf`]) that the Endpoint gathers sends from and scatters
//! receives into itself, with no packed copy.
//!
//! The packed form of `count` elements is their data bytes in typemap order, nothing else (no
//! header, no conversion: every rank of a job has the same representation), so `MPI_Pack_size`
//! is `count × size` and a packed message and a typed one are the same bytes on the wire.

use std::cell::Cell;
use std::sync::Arc;

use nemesis::Pieces;

use super::desc::{Run, TypeDesc};

/// Copies `len` bytes; the small sizes typed data is made of are single moves.
///
/// # Safety
/// `src` readable and `dst` writable for `len` bytes, not overlapping.
#[inline(always)]
unsafe fn copy_block(src: *const u8, dst: *mut u8, len: usize) {
    // SAFETY: the caller's contract; unaligned reads and writes of `len` bytes.
    unsafe {
        match len {
            4 => dst.cast::<u32>().write_unaligned(src.cast::<u32>().read_unaligned()),
            8 => dst.cast::<u64>().write_unaligned(src.cast::<u64>().read_unaligned()),
            16 => dst.cast::<u128>().write_unaligned(src.cast::<u128>().read_unaligned()),
            _ => std::ptr::copy_nonoverlapping(src, dst, len),
        }
    }
}

/// Calls `f(offset from the buffer's address, length)` for every block of `count` elements of
/// `t`, in typemap order.
pub fn for_each_block(t: &TypeDesc, count: usize, mut f: impl FnMut(isize, usize)) {
    let ext = t.extent();
    if t.is_dense() {
        if t.size > 0 && count > 0 {
            f(t.first_byte(), t.size * count);
        }
        return;
    }
    for k in 0..count {
        let base = k as isize * ext;
        for r in t.runs.iter() {
            let mut off = base + r.off;
            for _ in 0..r.count {
                f(off, r.len);
                off += r.stride;
            }
        }
    }
}

/// Packs `count` elements of `t` at `base` into `out` (of `count × size` bytes).
///
/// # Safety
/// Every block of the `count` elements at `base` is readable; `out` does not overlap them.
pub unsafe fn pack(t: &TypeDesc, base: *const u8, count: usize, out: &mut [u8]) {
    let mut pos = 0;
    let dst = out.as_mut_ptr();
    let cap = out.len();
    for_each_block(t, count, |off, len| {
        let n = len.min(cap - pos);
        // SAFETY: the caller's contract for the source block; `pos + n <= out.len()`.
        unsafe { copy_block(base.wrapping_offset(off), dst.add(pos), n) };
        pos += n;
    });
}

/// Unpacks `data` (the first `data.len()` packed bytes of `count` elements of `t`) into the
/// buffer at `base`: a short `data` (a truncated message) fills the elements' first bytes only.
///
/// # Safety
/// Every block of the `count` elements at `base` is writable; `data` does not overlap them.
pub unsafe fn unpack(t: &TypeDesc, base: *mut u8, count: usize, data: &[u8]) {
    let mut pos = 0;
    let src = data.as_ptr();
    let have = data.len();
    if have == 0 {
        return;
    }
    for_each_block(t, count, |off, len| {
        if pos < have {
            let n = len.min(have - pos);
            // SAFETY: the caller's contract for the destination block; `pos + n <= data.len()`.
            unsafe { copy_block(src.add(pos), base.wrapping_offset(off), n) };
            pos += n;
        }
    });
}

/// Where a [`Cursor`] is: the packed offset, and which element, run, block, and how far into
/// the block that is.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Position {
    /// Packed offset.
    pos: usize,
    elem: usize,
    run: usize,
    block: usize,
    within: usize,
}

/// A position in the packed stream of `count` elements of a type. Moving data from or to any
/// offset of the stream (fragments arriving one at a time) resumes from it without walking from
/// the start.
#[derive(Clone, Debug)]
pub struct Cursor<'a> {
    t: &'a TypeDesc,
    count: usize,
    p: Position,
}

impl<'a> Cursor<'a> {
    /// A cursor at packed offset `offset` (at most the stream's length) of `count` elements of
    /// `t`.
    pub fn at(t: &'a TypeDesc, count: usize, offset: usize) -> Cursor<'a> {
        let mut c = Cursor { t, count, p: Position::default() };
        c.seek(offset);
        c
    }

    /// A cursor at `p`, a [`position`](Self::position) of a cursor on the same stream.
    pub fn resume(t: &'a TypeDesc, count: usize, p: Position) -> Cursor<'a> {
        Cursor { t, count, p }
    }

    /// Where the cursor is.
    pub fn position(&self) -> Position {
        self.p
    }

    /// Moves to packed offset `offset`: whole elements by division, whole runs by their sizes,
    /// whole blocks by division.
    pub fn seek(&mut self, offset: usize) {
        let size = self.t.size;
        let p = &mut self.p;
        p.pos = offset.min(size * self.count);
        if size == 0 {
            return;
        }
        p.elem = p.pos / size;
        let mut rem = p.pos % size;
        p.run = 0;
        while let Some(r) = self.t.runs.get(p.run)
            && rem >= r.bytes()
        {
            rem -= r.bytes();
            p.run += 1;
        }
        let len = self.t.runs.get(p.run).map_or(1, |r| r.len);
        p.block = rem / len;
        p.within = rem % len;
    }

    /// The packed offset.
    pub fn offset(&self) -> usize {
        self.p.pos
    }

    /// The next contiguous piece, at most `max` bytes: its offset from the buffer's address and
    /// length; `None` at the end. Advances past it.
    #[inline]
    pub fn next_piece(&mut self, max: usize) -> Option<(isize, usize)> {
        let p = &mut self.p;
        if p.elem >= self.count || max == 0 {
            return None;
        }
        let r: &Run = self.t.runs.get(p.run)?;
        let off = p.elem as isize * self.t.extent() + r.off + p.block as isize * r.stride + p.within as isize;
        let n = (r.len - p.within).min(max);
        p.pos += n;
        p.within += n;
        if p.within == r.len {
            p.within = 0;
            p.block += 1;
            if p.block == r.count {
                p.block = 0;
                p.run += 1;
                if p.run == self.t.runs.len() {
                    p.run = 0;
                    p.elem += 1;
                }
            }
        }
        Some((off, n))
    }

    /// Calls `f(offset from the buffer's address, length)` for the pieces of the next `max` bytes
    /// of the stream (fewer at its end), advancing past them; returns how many bytes. Whole
    /// blocks of a run go by a tight loop (`f` sees the run's block length, a constant the
    /// compiler can specialise a copy for); a partial block goes by [`next_piece`](Self::next_piece).
    #[inline(always)]
    pub fn walk(&mut self, max: usize, mut f: impl FnMut(isize, usize)) -> usize {
        let mut done = 0;
        let ext = self.t.extent();
        let runs = &*self.t.runs;
        loop {
            let p = &mut self.p;
            if p.within == 0
                && p.elem < self.count
                && let Some(r) = runs.get(p.run)
                && r.len > 0
                && r.len <= max - done
            {
                let fit = ((max - done) / r.len).min(r.count - p.block);
                let mut off = p.elem as isize * ext + r.off + p.block as isize * r.stride;
                for _ in 0..fit {
                    f(off, r.len);
                    off += r.stride;
                }
                let n = fit * r.len;
                done += n;
                p.pos += n;
                p.block += fit;
                if p.block == r.count {
                    p.block = 0;
                    p.run += 1;
                    if p.run == runs.len() {
                        p.run = 0;
                        p.elem += 1;
                    }
                }
                continue;
            }
            match self.next_piece(max - done) {
                Some((off, n)) => {
                    f(off, n);
                    done += n;
                }
                None => return done,
            }
        }
    }

    /// Packs the next `dst.len()` bytes of the stream from the buffer at `base` into `dst`
    /// (fewer at the stream's end); returns how many.
    ///
    /// # Safety
    /// As for [`pack`].
    pub unsafe fn pack_into(&mut self, base: *const u8, dst: &mut [u8]) -> usize {
        let out = dst.as_mut_ptr();
        let mut done = 0;
        self.walk(dst.len(), |off, n| {
            // SAFETY: the caller's contract; `walk` gives at most `dst.len()` bytes in all.
            unsafe { copy_block(base.wrapping_offset(off), out.add(done), n) };
            done += n;
        })
    }

    /// Unpacks `src`, the next bytes of the stream, into the buffer at `base` (ignoring what is
    /// past the stream's end); returns how many bytes were stored.
    ///
    /// # Safety
    /// As for [`unpack`].
    pub unsafe fn unpack_from(&mut self, base: *mut u8, src: &[u8]) -> usize {
        let from = src.as_ptr();
        let mut done = 0;
        self.walk(src.len(), |off, n| {
            // SAFETY: the caller's contract; `walk` gives at most `src.len()` bytes in all.
            unsafe { copy_block(from.add(done), base.wrapping_offset(off), n) };
            done += n;
        })
    }
}

/// `count` elements of a type at `base`, as pieces the Endpoint copies to and from itself. It
/// keeps where the last copy ended: the next one (the next fragment or ring chunk) resumes there
/// without seeking.
#[derive(Debug)]
pub struct TypedBuf {
    base: *mut u8,
    count: usize,
    desc: Arc<TypeDesc>,
    at: Cell<Position>,
}

impl TypedBuf {
    /// `count` elements of `desc` at `base` (their memory is the caller's concern until the
    /// Endpoint is given the buffer: see the safety contracts of its calls).
    pub fn new(base: *mut u8, count: usize, desc: Arc<TypeDesc>) -> TypedBuf {
        TypedBuf { base, count, desc, at: Cell::new(Position::default()) }
    }

    /// A cursor at packed offset `offset`: the saved one if it is there.
    fn cursor(&self, offset: usize) -> Cursor<'_> {
        let p = self.at.get();
        if p.pos == offset {
            Cursor::resume(&self.desc, self.count, p)
        } else {
            Cursor::at(&self.desc, self.count, offset)
        }
    }
}

// SAFETY: every copy and visit goes through a cursor, which walks only the blocks of the `count`
// elements (those of the user's buffer, valid by the contract of the Endpoint call that was
// given it) between the offsets asked, in typemap order; `visit` walks the same blocks.
unsafe impl Pieces for TypedBuf {
    fn len(&self) -> usize {
        self.count * self.desc.size
    }

    fn count(&self) -> usize {
        self.count * self.desc.runs.iter().map(|r| r.count).sum::<usize>()
    }

    unsafe fn gather(&self, offset: usize, dst: *mut u8, n: usize) {
        if n == 0 {
            return;
        }
        let mut c = self.cursor(offset);
        // SAFETY: the caller's contract: `dst` writable for `n` bytes, the blocks readable.
        unsafe { c.pack_into(self.base, std::slice::from_raw_parts_mut(dst, n)) };
        self.at.set(c.position());
    }

    unsafe fn scatter(&self, offset: usize, src: *const u8, n: usize) {
        if n == 0 {
            return;
        }
        let mut c = self.cursor(offset);
        // SAFETY: the caller's contract: `src` readable for `n` bytes, the blocks writable.
        unsafe { c.unpack_from(self.base, std::slice::from_raw_parts(src, n)) };
        self.at.set(c.position());
    }

    fn visit(&self, offset: usize, n: usize, f: &mut dyn FnMut(*mut u8, usize) -> bool) {
        let mut c = self.cursor(offset);
        let mut left = n;
        while let Some((off, k)) = c.next_piece(left) {
            if !f(self.base.wrapping_offset(off), k) {
                return;
            }
            left -= k;
        }
    }
}

/// Basic elements in the first `bytes` packed bytes of elements of `t` (`MPI_Get_elements`):
/// `None` if `bytes` ends inside a basic element.
pub fn elements_in(t: &TypeDesc, bytes: usize) -> Option<u64> {
    if t.size == 0 {
        return (bytes == 0).then_some(0);
    }
    let whole = (bytes / t.size) as u64;
    let mut rem = bytes % t.size;
    let mut n = whole * t.elems;
    for r in t.runs.iter() {
        if rem == 0 {
            break;
        }
        let take = rem.min(r.bytes());
        if take % r.elem != 0 {
            return None;
        }
        n += (take / r.elem) as u64;
        rem -= take;
    }
    Some(n)
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;
    use crate::abi;
    use crate::datatype::builtin::lookup;
    use crate::datatype::desc::TypeDesc;

    fn basic(h: abi::Datatype) -> Arc<TypeDesc> {
        Arc::new(TypeDesc::basic(lookup(h).unwrap()))
    }

    /// A type with blocks of several sizes, gaps, a negative displacement and a repeat.
    fn tricky() -> TypeDesc {
        let i = basic(abi::INT);
        let v = Arc::new(
            crate::datatype::construct::vector(crate::datatype::construct::Form::Int, 3, 2, 3, false, &i).unwrap(),
        );
        let d = basic(abi::DOUBLE);
        crate::datatype::construct::create_struct(
            crate::datatype::construct::Form::Int,
            &[1, 2, 1],
            &[-16, 8, 200],
            &[d, v, basic(abi::CHAR)],
        )
        .unwrap()
    }

    #[test]
    fn pack_then_unpack_restores_every_byte_and_touches_no_other() {
        let t = tricky();
        let count = 3;
        let span = (t.true_ub - t.true_lb) as usize + (count - 1) * t.extent() as usize;
        let src: Vec<u8> = (0..span).map(|i| (i * 7 + 3) as u8).collect();
        // The buffer's address is where displacement 0 is: `-true_lb` into the span.
        let base_off = (-t.true_lb) as usize;
        let mut packed = vec![0u8; t.size * count];
        // SAFETY: every block lies in `src` (offsets from `base_off` within the span).
        unsafe { pack(&t, src.as_ptr().add(base_off), count, &mut packed) };
        let mut dst = vec![0xeeu8; span];
        // SAFETY: as above, in `dst`.
        unsafe { unpack(&t, dst.as_mut_ptr().add(base_off), count, &packed) };
        let mut covered = vec![false; span];
        for_each_block(&t, count, |off, len| {
            for b in 0..len {
                covered[(base_off as isize + off) as usize + b] = true;
            }
        });
        for i in 0..span {
            let want = if covered[i] { src[i] } else { 0xee };
            assert_eq!(dst[i], want, "byte {i}");
        }
        assert_eq!(covered.iter().filter(|&&c| c).count(), t.size * count);
    }

    #[test]
    fn cursors_resume_at_any_offset() {
        let t = tricky();
        let count = 4;
        let span = (t.true_ub - t.true_lb) as usize + (count - 1) * t.extent() as usize;
        let src: Vec<u8> = (0..span).map(|i| (i * 13 + 1) as u8).collect();
        let base_off = (-t.true_lb) as usize;
        let total = t.size * count;
        let mut whole = vec![0u8; total];
        // SAFETY: blocks within `src`.
        unsafe { pack(&t, src.as_ptr().add(base_off), count, &mut whole) };
        // Fragments of every awkward size, each from a fresh cursor at its offset.
        for frag in [1, 3, 7, 8, 13, 64] {
            let mut got = vec![0u8; total];
            let mut dst = vec![0u8; span];
            let mut off = 0;
            while off < total {
                let n = frag.min(total - off);
                let mut c = Cursor::at(&t, count, off);
                // SAFETY: blocks within `src`.
                assert_eq!(unsafe { c.pack_into(src.as_ptr().add(base_off), &mut got[off..off + n]) }, n);
                let mut c = Cursor::at(&t, count, off);
                // SAFETY: blocks within `dst`.
                unsafe { c.unpack_from(dst.as_mut_ptr().add(base_off), &whole[off..off + n]) };
                off += n;
            }
            assert_eq!(got, whole, "packing in fragments of {frag}");
            let mut direct = vec![0u8; span];
            // SAFETY: blocks within `direct`.
            unsafe { unpack(&t, direct.as_mut_ptr().add(base_off), count, &whole) };
            assert_eq!(dst, direct, "unpacking in fragments of {frag}");
        }
    }

    #[test]
    fn typed_buffers_gather_scatter_and_visit_like_pack() {
        let t = Arc::new(tricky());
        let count = 3;
        let span = (t.true_ub - t.true_lb) as usize + (count - 1) * t.extent() as usize;
        let base_off = (-t.true_lb) as usize;
        let total = t.size * count;
        let mut src: Vec<u8> = (0..span).map(|i| (i * 5 + 2) as u8).collect();
        let mut whole = vec![0u8; total];
        // SAFETY: blocks within `src`.
        unsafe { pack(&t, src.as_ptr().add(base_off), count, &mut whole) };
        let tb = TypedBuf::new(src.as_mut_ptr().wrapping_add(base_off), count, t.clone());
        assert_eq!((Pieces::len(&tb), tb.count()), (total, 3 * (1 + 2 * 3 + 1)));
        let mut dst = vec![0xeeu8; span];
        let out = TypedBuf::new(dst.as_mut_ptr().wrapping_add(base_off), count, t.clone());
        // In order (the saved cursor) and out of order (a seek), in fragments of 5.
        let offsets: Vec<usize> = (0..total).step_by(5).chain((0..total).step_by(5).rev()).collect();
        for off in offsets {
            let n = 5.min(total - off);
            let mut got = [0u8; 5];
            // SAFETY: `got` holds 5 bytes; the blocks are within `src` and `dst`.
            unsafe {
                tb.gather(off, got.as_mut_ptr(), n);
                out.scatter(off, whole[off..].as_ptr(), n);
            }
            assert_eq!(got[..n], whole[off..off + n], "offset {off}");
        }
        let mut direct = vec![0xeeu8; span];
        // SAFETY: blocks within `direct`.
        unsafe { unpack(&t, direct.as_mut_ptr().add(base_off), count, &whole) };
        assert_eq!(dst, direct);
        // The pieces a visit names hold the packed bytes in order.
        let mut seen = Vec::new();
        tb.visit(7, total - 9, &mut |p, k| {
            // SAFETY: a piece of `src`.
            seen.extend_from_slice(unsafe { std::slice::from_raw_parts(p, k) });
            true
        });
        assert_eq!(seen, whole[7..total - 2]);
    }

    #[test]
    fn truncated_data_fills_only_the_first_bytes() {
        let i = basic(abi::INT);
        let v = crate::datatype::construct::vector(crate::datatype::construct::Form::Int, 4, 1, 2, false, &i).unwrap();
        let mut dst = [0u8; 28];
        // SAFETY: the vector's blocks are within 28 bytes.
        unsafe { unpack(&v, dst.as_mut_ptr(), 1, &[1, 1, 1, 1, 2, 2]) };
        assert_eq!(&dst[..12], &[1, 1, 1, 1, 0, 0, 0, 0, 2, 2, 0, 0]);
    }

    #[test]
    fn elements_count_whole_basic_elements() {
        let t = tricky();
        // Per element: a double, two vectors of 6 ints, a char.
        assert_eq!(t.elems, 14);
        assert_eq!(elements_in(&t, t.size), Some(14));
        assert_eq!(elements_in(&t, 2 * t.size + 8 + 4), Some(30));
        assert_eq!(elements_in(&t, 8 + 2), None, "inside an int");
        assert_eq!(elements_in(&basic(abi::DOUBLE), 24), Some(3));
    }
}
