//! Message buffers in pieces: a send's bytes gathered from non-contiguous memory and a
//! receive's scattered into it as they are copied, with no packed copy in between (an MPI
//! derived datatype). [`Payload`] is what a send copies from: a byte slice, or [`Pieces`].

use crate::cell::copy_bytes;

/// A buffer made of contiguous pieces of memory, addressed by offsets into its packed stream
/// (the bytes of the pieces in order, `0..len()`).
///
/// Copies arrive in increasing offsets within one message (fragments, ring chunks), so an
/// implementation may keep where the last one ended to resume there without searching.
///
/// # Safety
/// An implementation must touch only the memory of its pieces, and only within the offsets
/// asked (clipped at [`len`](Self::len)); [`visit`](Self::visit) must name exactly the pieces
/// [`gather`](Self::gather) and [`scatter`](Self::scatter) copy, in the same order.
pub unsafe trait Pieces {
    /// Bytes in the packed stream.
    fn len(&self) -> usize;

    /// True if there are no bytes.
    fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Contiguous pieces in the whole buffer (how many iovecs a single copy of it takes).
    fn count(&self) -> usize;

    /// Copies packed bytes `offset..offset + n` (clipped at the end) to `dst`.
    ///
    /// # Safety
    /// `dst` is writable for `n` bytes and overlaps no piece; the pieces are readable.
    unsafe fn gather(&self, offset: usize, dst: *mut u8, n: usize);

    /// Copies `n` bytes from `src` into packed bytes `offset..offset + n` (clipped at the end).
    ///
    /// # Safety
    /// `src` is readable for `n` bytes and overlaps no piece; the pieces are writable and not
    /// otherwise accessed.
    unsafe fn scatter(&self, offset: usize, src: *const u8, n: usize);

    /// Calls `f(address, length)` for the pieces holding packed bytes `offset..offset + n`
    /// (clipped at the end; the first and last may be parts of pieces), in order, until `f`
    /// returns false.
    fn visit(&self, offset: usize, n: usize, f: &mut dyn FnMut(*mut u8, usize) -> bool);
}

/// What a send copies its bytes from.
pub trait Payload {
    /// Bytes to send.
    fn len(&self) -> usize;

    /// True if there are no bytes.
    fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Copies bytes `offset..offset + n` (within [`len`](Self::len)) to `dst`.
    ///
    /// # Safety
    /// `offset + n <= len()`; `dst` is writable for `n` bytes and overlaps the payload nowhere.
    unsafe fn copy_out(&self, offset: usize, dst: *mut u8, n: usize);
}

impl Payload for [u8] {
    #[inline(always)]
    fn len(&self) -> usize {
        <[u8]>::len(self)
    }

    #[inline(always)]
    unsafe fn copy_out(&self, offset: usize, dst: *mut u8, n: usize) {
        // SAFETY: the caller's contract: `offset + n <= len()`, `dst` writable for `n` bytes.
        unsafe { copy_bytes(self.as_ptr().add(offset), dst, n) }
    }
}

impl Payload for dyn Pieces + '_ {
    #[inline]
    fn len(&self) -> usize {
        Pieces::len(self)
    }

    #[inline]
    unsafe fn copy_out(&self, offset: usize, dst: *mut u8, n: usize) {
        // SAFETY: the caller's contract, which is `gather`'s.
        unsafe { self.gather(offset, dst, n) }
    }
}

/// Pieces given as a list of `(address, length)`: tests, and callers whose layout is a short
/// list anyway.
#[derive(Debug)]
pub struct PieceList {
    pieces: Vec<(*mut u8, usize)>,
    /// Packed offset where each piece starts (a binary search finds an offset's piece).
    starts: Vec<usize>,
    len: usize,
}

impl PieceList {
    /// The pieces in order.
    ///
    /// # Safety
    /// Every piece is valid memory for reads (a send) or writes (a receive) of its length for as
    /// long as the list is used, and no two overlap.
    pub unsafe fn new(pieces: Vec<(*mut u8, usize)>) -> PieceList {
        let mut starts = Vec::with_capacity(pieces.len());
        let mut len = 0;
        for &(_, n) in &pieces {
            starts.push(len);
            len += n;
        }
        PieceList { pieces, starts, len }
    }
}

// SAFETY: copies and visits stay within the listed pieces (valid by `new`'s contract) and the
// offsets asked, in list order.
unsafe impl Pieces for PieceList {
    fn len(&self) -> usize {
        self.len
    }

    fn count(&self) -> usize {
        self.pieces.len()
    }

    unsafe fn gather(&self, offset: usize, dst: *mut u8, n: usize) {
        let mut done = 0;
        self.visit(offset, n, &mut |p, k| {
            // SAFETY: `p` is readable for `k` bytes (`new`'s contract); `done + k <= n`.
            unsafe { copy_bytes(p, dst.add(done), k) };
            done += k;
            true
        });
    }

    unsafe fn scatter(&self, offset: usize, src: *const u8, n: usize) {
        let mut done = 0;
        self.visit(offset, n, &mut |p, k| {
            // SAFETY: `p` is writable for `k` bytes (`new`'s contract); `done + k <= n`.
            unsafe { copy_bytes(src.add(done), p, k) };
            done += k;
            true
        });
    }

    fn visit(&self, offset: usize, n: usize, f: &mut dyn FnMut(*mut u8, usize) -> bool) {
        let end = offset.saturating_add(n).min(self.len);
        let mut at = offset;
        let mut i = self.starts.partition_point(|&s| s <= offset).saturating_sub(1);
        while at < end
            && let Some(&(p, len)) = self.pieces.get(i)
        {
            let within = at - self.starts[i];
            let k = (len - within).min(end - at);
            if k > 0 && !f(p.wrapping_add(within), k) {
                return;
            }
            at += k;
            i += 1;
        }
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    #[test]
    fn piece_lists_gather_and_scatter_at_any_offset() {
        let mut mem: Vec<u8> = (0..64).collect();
        let base = mem.as_mut_ptr();
        // SAFETY: three disjoint pieces of `mem`, used while it lives.
        let list = unsafe {
            PieceList::new(vec![(base.wrapping_add(2), 5), (base.wrapping_add(10), 0), (base.wrapping_add(20), 9)])
        };
        assert_eq!((Pieces::len(&list), list.count()), (14, 3));
        let want: Vec<u8> = (2..7).chain(20..29).collect();
        for off in 0..14 {
            for n in 0..=14 - off {
                let mut out = vec![0xffu8; n];
                // SAFETY: `out` holds `n` bytes.
                unsafe { list.gather(off, out.as_mut_ptr(), n) };
                assert_eq!(out, want[off..off + n], "offset {off}, {n} bytes");
            }
        }
        let src = [0xa0u8; 4];
        // SAFETY: `src` holds 4 bytes; the pieces are in `mem`.
        unsafe { list.scatter(3, src.as_ptr(), 4) };
        assert_eq!(&mem[2..7], &[2, 3, 4, 0xa0, 0xa0]);
        assert_eq!(&mem[7..22], &[7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 0xa0, 0xa0]);
        assert_eq!(mem[22], 22);
    }
}
