//! Moving typed data: packing `count` elements of a type from a user buffer into contiguous bytes
//! and unpacking them back, whole or from any offset of the packed stream ([`Cursor`]), and the
//! list of a buffer's contiguous pieces for transports that gather and scatter themselves.
//!
//! The packed form of `count` elements is their data bytes in typemap order, nothing else (no
//! header, no conversion: every rank of a job has the same representation), so `MPI_Pack_size`
//! is `count × size` and a packed message and a typed one are the same bytes on the wire.

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

/// A position in the packed stream of `count` elements of a type: which element, run, block,
/// and how far into the block. Moving data from or to any offset of the stream (fragments
/// arriving one at a time) resumes from it without walking from the start.
#[derive(Clone, Debug)]
pub struct Cursor<'a> {
    t: &'a TypeDesc,
    count: usize,
    /// Packed offset.
    pos: usize,
    elem: usize,
    run: usize,
    block: usize,
    within: usize,
}

impl<'a> Cursor<'a> {
    /// A cursor at packed offset `offset` (at most the stream's length) of `count` elements of
    /// `t`.
    pub fn at(t: &'a TypeDesc, count: usize, offset: usize) -> Cursor<'a> {
        let mut c = Cursor { t, count, pos: 0, elem: 0, run: 0, block: 0, within: 0 };
        c.seek(offset);
        c
    }

    /// Moves to packed offset `offset`: whole elements by division, whole runs by their sizes,
    /// whole blocks by division.
    pub fn seek(&mut self, offset: usize) {
        let size = self.t.size;
        self.pos = offset.min(size * self.count);
        if size == 0 {
            return;
        }
        self.elem = self.pos / size;
        let mut rem = self.pos % size;
        self.run = 0;
        while let Some(r) = self.t.runs.get(self.run)
            && rem >= r.bytes()
        {
            rem -= r.bytes();
            self.run += 1;
        }
        let len = self.t.runs.get(self.run).map_or(1, |r| r.len);
        self.block = rem / len;
        self.within = rem % len;
    }

    /// The packed offset.
    pub fn offset(&self) -> usize {
        self.pos
    }

    /// The next contiguous piece, at most `max` bytes: its offset from the buffer's address and
    /// length; `None` at the end. Advances past it.
    pub fn next_piece(&mut self, max: usize) -> Option<(isize, usize)> {
        if self.elem >= self.count || max == 0 {
            return None;
        }
        let r: &Run = self.t.runs.get(self.run)?;
        let off = self.elem as isize * self.t.extent() + r.off + self.block as isize * r.stride + self.within as isize;
        let n = (r.len - self.within).min(max);
        self.pos += n;
        self.within += n;
        if self.within == r.len {
            self.within = 0;
            self.block += 1;
            if self.block == r.count {
                self.block = 0;
                self.run += 1;
                if self.run == self.t.runs.len() {
                    self.run = 0;
                    self.elem += 1;
                }
            }
        }
        Some((off, n))
    }

    /// Packs the next `dst.len()` bytes of the stream from the buffer at `base` into `dst`
    /// (fewer at the stream's end); returns how many.
    ///
    /// # Safety
    /// As for [`pack`].
    pub unsafe fn pack_into(&mut self, base: *const u8, dst: &mut [u8]) -> usize {
        let mut done = 0;
        while let Some((off, n)) = self.next_piece(dst.len() - done) {
            // SAFETY: the caller's contract; `done + n <= dst.len()`.
            unsafe { copy_block(base.wrapping_offset(off), dst.as_mut_ptr().add(done), n) };
            done += n;
        }
        done
    }

    /// Unpacks `src`, the next bytes of the stream, into the buffer at `base` (ignoring what is
    /// past the stream's end); returns how many bytes were stored.
    ///
    /// # Safety
    /// As for [`unpack`].
    pub unsafe fn unpack_from(&mut self, base: *mut u8, src: &[u8]) -> usize {
        let mut done = 0;
        while let Some((off, n)) = self.next_piece(src.len() - done) {
            // SAFETY: the caller's contract; `done + n <= src.len()`.
            unsafe { copy_block(src.as_ptr().add(done), base.wrapping_offset(off), n) };
            done += n;
        }
        done
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
    use crate::datatype::desc::{self, TypeDesc};

    fn basic(h: abi::Datatype) -> Arc<TypeDesc> {
        Arc::new(TypeDesc::basic(lookup(h).unwrap()))
    }

    /// A type with blocks of several sizes, gaps, a negative displacement and a repeat.
    fn tricky() -> TypeDesc {
        let i = basic(abi::INT);
        let v = Arc::new(desc::vector(3, 2, 3, false, &i).unwrap());
        let d = basic(abi::DOUBLE);
        desc::create_struct(&[1, 2, 1], &[-16, 8, 200], &[d, v, basic(abi::CHAR)]).unwrap()
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
    fn truncated_data_fills_only_the_first_bytes() {
        let i = basic(abi::INT);
        let v = desc::vector(4, 1, 2, false, &i).unwrap();
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
