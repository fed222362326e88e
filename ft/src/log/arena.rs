//! The payload store of one destination's log: its byte stream in a queue of chunks, the full ones taken from and
//! given back to a [`Pool`] of pre-faulted chunks that the whole log shares.
//!
//! The log used to keep each destination's bytes in one arena that doubled when full: every doubling zero-filled
//! a fresh buffer, copied the live bytes into it and page-faulted it page by page as appends reached it (43–60 ns
//! per 8-byte append while a log that is never acknowledged grows, against 10 once its memory is reused). Here a
//! stream grows by a chunk at a time and never moves a byte: a destination starts with a small chunk, each next one
//! is twice as large up to [`CHUNK`], and chunks of that size come from the pool, zeroed and faulted in once when
//! created (`MADV_POPULATE_WRITE`: one system call instead of a fault per page) and handed back to it when the
//! garbage collection frees them.
//!
//! Invariants:
//! - The stream's bytes `head..end()` are live. The chunks in `full` are completely written, oldest first, each
//!   with the stream position of its first byte; the tail chunk `bytes` holds `base..base + fill`, after them.
//! - A full chunk is released (to the pool, or freed if it is smaller than [`CHUNK`] or the pool holds
//!   [`POOL_MAX`]) as soon as `head` passes its end; a stream with nothing live writes its tail from 0 again.
//! - The pool never holds more than [`POOL_MAX`] chunks: memory it keeps is bounded whatever the traffic was.

use std::collections::VecDeque;

/// Size of the chunks a stream grows by once past its first few, and of the pool's chunks.
pub(super) const CHUNK: usize = 1 << 20;

/// Size of a destination's first chunk: a log with many destinations holds little for those it rarely sends to.
pub(super) const MIN_CHUNK: usize = 4096;

/// Chunks the pool keeps for reuse (32 MiB): enough for the steady state of a log acknowledged at every checkpoint,
/// bounded so that a burst does not pin its memory for the rest of the run.
pub(super) const POOL_MAX: usize = 32;

/// Free [`CHUNK`]-sized chunks, shared by the destinations of one log.
#[derive(Debug, Default)]
pub(super) struct Pool {
    pub(super) free: Vec<Chunk>,
}

impl Pool {
    /// A chunk of [`CHUNK`] bytes: a reused one if any, else a new one faulted in.
    fn take(&mut self) -> Chunk {
        self.free.pop().unwrap_or_else(|| fresh(CHUNK))
    }

    /// Keeps `chunk` for reuse if it has the pool's size and there is room, else frees it.
    fn give(&mut self, chunk: Chunk) {
        if chunk.len() == CHUNK && self.free.len() < POOL_MAX {
            self.free.push(chunk);
        }
    }

    /// Chunks held for reuse.
    #[cfg(test)]
    pub(super) fn len(&self) -> usize {
        self.free.len()
    }
}

/// A zeroed buffer of `len` bytes; a full-size one (kept in the pool for reuse) has its pages faulted in now
/// rather than at the appends that reach them.
#[cold]
fn fresh(len: usize) -> Chunk {
    let chunk = vec![0u8; len].into_boxed_slice();
    if len == CHUNK {
        prefault(chunk.as_ptr(), len);
    }
    chunk
}

/// Asks the kernel to fault in, writable, the whole pages within `len` bytes from `ptr` (best effort: a kernel
/// without `MADV_POPULATE_WRITE` leaves them to fault on first use, page by page). Measured with
/// `cargo bench -p nemesis-ft --bench log_growth` on a loaded 2-core VM, the difference it makes is within the
/// noise (the kernel's zeroing of the pages, not the faults, is most of a growing log's cost); asking for
/// transparent huge pages as well (2 MiB chunks aligned to their size, `MADV_HUGEPAGE`) cost a third more, and
/// faulting in the index's new capacity whenever it doubles cost a fresh process's 22,000 appends 5–15 %.
fn prefault(ptr: *const u8, len: usize) {
    const PAGE: usize = 4096;
    let start = (ptr as usize).next_multiple_of(PAGE);
    let end = (ptr as usize + len) & !(PAGE - 1);
    if end <= start {
        return;
    }
    // SAFETY: `start..end` lies within an allocation of `len` bytes from `ptr` that the caller owns (whole pages
    // of it: page-aligned, rounded inwards). MADV_POPULATE_WRITE only faults those pages in as a write would,
    // without changing any byte of them, and touches no memory outside the range.
    let _ = unsafe { libc::madvise(start as *mut libc::c_void, end - start, libc::MADV_POPULATE_WRITE) };
}

/// A payload chunk: zeroed once when created, then written over and over.
pub(super) type Chunk = Box<[u8]>;

/// One destination's byte stream.
#[derive(Debug, Default)]
pub(super) struct Arena {
    /// Completely written chunks before the tail, oldest first, with the stream position of their first byte.
    pub(super) full: VecDeque<(u64, Chunk)>,
    /// The tail chunk: `bytes[..fill]` is written, the next byte goes at `fill`.
    pub(super) bytes: Chunk,
    pub(super) fill: usize,
    /// Stream position of `bytes[0]`: the stream ends at `base + fill`.
    pub(super) base: u64,
    /// Stream position of the first live byte.
    pub(super) head: u64,
}

impl Arena {
    /// Stream position just past the last byte written.
    pub(super) fn end(&self) -> u64 {
        self.base + self.fill as u64
    }

    /// Live bytes.
    pub(super) fn memory(&self) -> usize {
        (self.end() - self.head) as usize
    }

    /// Chunks held, the tail included.
    #[cfg(test)]
    pub(super) fn chunks(&self) -> usize {
        self.full.len() + usize::from(!self.bytes.is_empty())
    }

    /// Appends `parts` in order, taking new chunks as the tail fills (the path of an append that does not fit in
    /// the tail).
    #[cold]
    pub(super) fn write_spanning(&mut self, parts: [&[u8]; 2], pool: &mut Pool) {
        for mut part in parts {
            while !part.is_empty() {
                if self.fill == self.bytes.len() {
                    self.next_chunk(pool);
                }
                let n = part.len().min(self.bytes.len() - self.fill);
                let (now, rest) = part.split_at(n);
                self.bytes[self.fill..self.fill + n].copy_from_slice(now);
                self.fill += n;
                part = rest;
            }
        }
    }

    /// Moves the full tail to `full` and starts a new one, twice as large as it up to [`CHUNK`].
    fn next_chunk(&mut self, pool: &mut Pool) {
        let size = (self.bytes.len() * 2).clamp(MIN_CHUNK, CHUNK);
        let chunk = if size == CHUNK { pool.take() } else { fresh(size) };
        let old = std::mem::replace(&mut self.bytes, chunk);
        let start = self.base;
        self.base += self.fill as u64;
        self.fill = 0;
        if !old.is_empty() {
            self.full.push_back((start, old));
        }
    }

    /// The bytes before stream position `to` are dead: full chunks that hold only such bytes go back to `pool`,
    /// and a stream with nothing live rewinds its tail.
    pub(super) fn release(&mut self, to: u64, pool: &mut Pool) {
        self.head = to;
        while let Some((start, c)) = self.full.front()
            && start + c.len() as u64 <= to
        {
            if let Some((_, c)) = self.full.pop_front() {
                pool.give(c);
            }
        }
        if self.head == self.end() {
            self.base = self.head;
            self.fill = 0;
        }
    }

    /// Calls `f` on the slices that hold stream positions `a..b` (live bytes), in order.
    pub(super) fn segments(&self, a: u64, b: u64, mut f: impl FnMut(&[u8])) {
        let tail = std::iter::once((self.base, &self.bytes[..self.fill]));
        for (start, c) in self.full.iter().map(|(s, c)| (*s, &c[..])).chain(tail) {
            let end = start + c.len() as u64;
            if end <= a || c.is_empty() {
                continue;
            }
            if start >= b {
                break;
            }
            let from = (a.max(start) - start) as usize;
            let to = (b.min(end) - start) as usize;
            f(&c[from..to]);
        }
    }
}
