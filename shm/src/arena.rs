//! The arena abstraction: turns cell handles into cell memory.
//!
//! The queue algorithm is written once against [`Arena`]. In a process it runs on the mapped
//! segment (`segment.rs`); under loom it runs on [`HeapArena`], because loom atomics cannot live
//! in a mapping (as iceoryx2 does; `shared/reference/anchors.md`).

use crate::cell::{CellHandle, CellLink, NULL};

/// A cell whose handle was checked: its handle, link words and body, computed once.
#[derive(Clone, Copy, Debug)]
pub struct CellRef<'a> {
    handle: CellHandle,
    link: &'a CellLink,
    body: *mut u8,
}

/// Two references are equal if they name the same cell.
impl PartialEq for CellRef<'_> {
    fn eq(&self, other: &Self) -> bool {
        self.handle == other.handle
    }
}
impl Eq for CellRef<'_> {}

impl<'a> CellRef<'a> {
    /// The cell's handle.
    #[inline(always)]
    pub fn handle(&self) -> CellHandle {
        self.handle
    }
    /// The cell's link words.
    #[inline(always)]
    pub fn link(&self) -> &'a CellLink {
        self.link
    }
    /// The cell's header and payload bytes (`Arena::body_size` of them).
    #[inline(always)]
    pub fn body(&self) -> *mut u8 {
        self.body
    }
}

use crate::error::{Error, Result};

/// Cell memory addressed by [`CellHandle`]s `1..=cell_count()`.
///
/// # Safety
/// Implementors guarantee that for every handle `h` in `1..=cell_count()`, `link_unchecked(h)` is a
/// valid `CellLink` and `body(h)` points to `body_size()` writable bytes that do not overlap any
/// other cell's, both living as long as the arena.
pub unsafe trait Arena {
    /// Number of cells; valid handles are `1..=cell_count()`.
    fn cell_count(&self) -> u32;

    /// Bytes available behind a cell's link words (header and payload).
    fn body_size(&self) -> usize;

    /// The link words of cell `h`.
    ///
    /// # Safety
    /// `h` must be in `1..=cell_count()`.
    unsafe fn link_unchecked(&self, h: CellHandle) -> &CellLink;

    /// The header-and-payload bytes of cell `h`.
    ///
    /// # Safety
    /// `h` must be in `1..=cell_count()`.
    unsafe fn body(&self, h: CellHandle) -> *mut u8;

    /// Model-checking hook: the caller is about to write cell `h`'s body (a valid handle). Under
    /// loom the heap arena records the access, so loom reports a write not ordered after every
    /// earlier read of that cell by the protocol's atomics. A no-op otherwise.
    #[inline(always)]
    fn note_write(&self, _h: CellHandle) {}

    /// Model-checking hook: the caller is about to read cell `h`'s body (see `note_write`).
    #[inline(always)]
    fn note_read(&self, _h: CellHandle) {}

    /// Checks that `h` names a cell. Handles read from shared memory go through this before use.
    #[inline(always)]
    fn check(&self, h: CellHandle, what: &'static str) -> Result<()> {
        if h != NULL && h <= self.cell_count() { Ok(()) } else { Err(Error::corrupt(what, h)) }
    }

    /// The link words of cell `h`, bounds-checked.
    #[inline(always)]
    fn link(&self, h: CellHandle, what: &'static str) -> Result<&CellLink> {
        self.check(h, what)?;
        // SAFETY: `h` was just checked to be in `1..=cell_count()`.
        Ok(unsafe { self.link_unchecked(h) })
    }

    /// Cell `h`, bounds-checked.
    #[inline(always)]
    fn cell(&self, h: CellHandle, what: &'static str) -> Result<CellRef<'_>> {
        self.check(h, what)?;
        // SAFETY: `h` was just checked.
        Ok(unsafe { self.cell_unchecked(h) })
    }

    /// Cell `h` without a check.
    ///
    /// # Safety
    /// `h` must be in `1..=cell_count()`.
    #[inline(always)]
    unsafe fn cell_unchecked(&self, h: CellHandle) -> CellRef<'_> {
        // SAFETY: the caller guarantees `h` is valid, so the body pointer is inside the arena and
        // not null (saying so spares the compiler a null test when the reference sits in an
        // `Option`).
        unsafe {
            let body = self.body(h);
            core::hint::assert_unchecked(!body.is_null());
            CellRef { handle: h, link: self.link_unchecked(h), body }
        }
    }
}

/// Cells on the heap, for loom models and unit tests.
pub struct HeapArena {
    links: Box<[CellLink]>,
    /// One `body_size` slice per cell; written through raw pointers by the algorithms.
    bodies: Box<[core::cell::UnsafeCell<u8>]>,
    body_size: usize,
    /// One loom cell per cell body, to let loom check the ordering of body accesses.
    #[cfg(loom)]
    tracks: Box<[loom::cell::UnsafeCell<()>]>,
}

// SAFETY: all shared mutation goes through atomics (links) or through raw pointers whose use the
// algorithms order with those atomics, exactly as with the shared segment.
unsafe impl Sync for HeapArena {}
// SAFETY: as above; nothing is tied to a thread.
unsafe impl Send for HeapArena {}

impl HeapArena {
    /// `cells` cells of `body_size` bytes each.
    pub fn new(cells: u32, body_size: usize) -> Self {
        let links = (0..cells).map(|_| CellLink::new()).collect();
        let bodies = (0..cells as usize * body_size).map(|_| core::cell::UnsafeCell::new(0)).collect();
        HeapArena {
            links,
            bodies,
            body_size,
            #[cfg(loom)]
            tracks: (0..cells).map(|_| loom::cell::UnsafeCell::new(())).collect(),
        }
    }
}

// SAFETY: `links` has `cell_count()` entries and `bodies` holds `cell_count()` disjoint slices of
// `body_size` bytes, all owned by the arena.
unsafe impl Arena for HeapArena {
    fn cell_count(&self) -> u32 {
        self.links.len() as u32
    }

    fn body_size(&self) -> usize {
        self.body_size
    }

    unsafe fn link_unchecked(&self, h: CellHandle) -> &CellLink {
        // SAFETY: the caller guarantees `1 <= h <= cell_count()`.
        unsafe { self.links.get_unchecked(h as usize - 1) }
    }

    unsafe fn body(&self, h: CellHandle) -> *mut u8 {
        // SAFETY: the caller guarantees `1 <= h <= cell_count()`, so the slice is in bounds.
        unsafe { self.bodies.get_unchecked((h as usize - 1) * self.body_size).get() }
    }

    #[cfg(loom)]
    fn note_write(&self, h: CellHandle) {
        self.tracks[h as usize - 1].with_mut(|_| ());
    }

    #[cfg(loom)]
    fn note_read(&self, h: CellHandle) {
        self.tracks[h as usize - 1].with(|_| ());
    }
}
