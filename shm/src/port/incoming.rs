//! A received fragment ([`Incoming`]): a view of a header and payload where they lie, in a
//! fastbox slot or a cell of the node, until the port that polled it releases it.
//!
//! Invariants: its lengths were validated against its slot or cell when it was polled, so the
//! accessors read without checks; it is neither `Copy` nor `Clone` and [`Port::release`]
//! consumes it, so its slot or cell is released once, by the port that polled it.

use core::marker::PhantomData;
use core::ptr;

use crate::cell::{CellHandle, HEADER_BYTES, MsgHeader, NULL, PiggybackBytes, copy_bytes, flags, ft_read, ft_room};
use crate::fastbox::Published;

#[cfg(doc)]
use super::Port;

/// [`Incoming::src`] of a network arrival: the sender is remote, its global rank is the header's
/// `src`.
pub const REMOTE: u16 = u16::MAX;

/// A received fragment: a whole message from a fastbox, or one cell of a message. It points at the
/// header and payload where they lie (slot or cell), in the node's memory (lifetime `'n`), until it
/// is released.
///
/// Neither `Copy` nor `Clone`: [`Port::release`] consumes it, so a slot or cell is released once,
/// and nothing reads it after the sender may have reused it. It remembers the port that polled
/// it; another port refuses it ([`Error::ForeignFragment`](crate::Error::ForeignFragment)), so it cannot be released on another
/// node's port (whose cells it does not name) or another rank's.
///
/// ```
/// use nemesis_shm::{Error, HeapNode, MsgHeader, Params, Port, PortConfig};
///
/// let (n1, n2) = (HeapNode::new(2, Params::DEFAULT).unwrap(), HeapNode::new(2, Params::DEFAULT).unwrap());
/// let mut a = Port::new(&n1, 0, PortConfig::default()).unwrap();
/// let mut b = Port::new(&n1, 1, PortConfig::default()).unwrap();
/// let mut other = Port::new(&n2, 1, PortConfig::default()).unwrap();
/// let _ = a.send(1, &MsgHeader::default(), None, b"x").unwrap();
/// let inc = b.poll(&[0]).unwrap().unwrap();
/// assert!(matches!(other.release(inc), Err(Error::ForeignFragment)));
/// ```
///
/// Released twice, it does not compile:
///
/// ```compile_fail
/// # use nemesis_shm::{HeapNode, MsgHeader, Params, Port, PortConfig};
/// # let node = HeapNode::new(2, Params::DEFAULT).unwrap();
/// # let mut a = Port::new(&node, 0, PortConfig::default()).unwrap();
/// # let mut b = Port::new(&node, 1, PortConfig::default()).unwrap();
/// # let _ = a.send(1, &MsgHeader::default(), None, b"x").unwrap();
/// let inc = b.poll(&[0]).unwrap().unwrap();
/// b.release(inc).unwrap();
/// b.release(inc).unwrap(); // use of a moved value
/// ```
///
/// Nor does keeping it past its node:
///
/// ```compile_fail
/// # use nemesis_shm::{HeapNode, MsgHeader, Params, Port, PortConfig};
/// let inc = {
///     let node = HeapNode::new(2, Params::DEFAULT).unwrap();
///     let mut a = Port::new(&node, 0, PortConfig::default()).unwrap();
///     let mut b = Port::new(&node, 1, PortConfig::default()).unwrap();
///     let _ = a.send(1, &MsgHeader::default(), None, b"x").unwrap();
///     b.poll(&[0]).unwrap().unwrap()
/// }; // `node` dropped here while borrowed
/// let _ = inc.tag();
/// ```
#[derive(Debug)]
#[must_use = "a fragment holds its slot or cell until released"]
pub struct Incoming<'n> {
    /// The header in the slot or cell. Only fields that need no validation are read through it;
    /// the lengths below were checked when the fragment was polled.
    pub(super) hdr: *const MsgHeader,
    /// This fragment's `frag_len` payload bytes, inside the same slot or cell.
    pub(super) payload: *const u8,
    /// Length of the whole message.
    pub(super) len: u32,
    /// Offset of this fragment's payload in the message.
    pub(super) offset: u32,
    /// Length of this fragment's payload.
    pub(super) frag_len: u32,
    /// The cell holding the fragment, or [`NULL`] for a fastbox slot.
    pub(super) cell: CellHandle,
    /// Local rank of the sender (from the fastbox or the cell's pool, never from the header), or
    /// [`REMOTE`] for a network arrival (whose header's `src` is the sender's global rank).
    pub src: u16,
    /// `offset + frag_len == len`: no fragment of the message follows.
    pub(super) last: bool,
    /// Id of the port that polled it.
    pub(super) port: u64,
    /// The slot or cell lies in the node's memory, borrowed for `'n`.
    pub(super) _node: PhantomData<&'n ()>,
}

// SAFETY: the pointers refer to shared memory that stays ours until `release`; nothing is tied to
// a thread.
unsafe impl Send for Incoming<'_> {}

impl<'n> Incoming<'n> {
    /// The fragment of a whole message published in a fastbox slot.
    #[inline(always)]
    pub(super) fn from_fastbox(src: u16, m: &Published, port: u64) -> Incoming<'n> {
        let (hdr, len, payload) = (m.hdr, m.len, m.payload);
        Incoming { hdr, payload, len, offset: 0, frag_len: len, cell: NULL, src, last: true, port, _node: PhantomData }
    }

    /// A copy of the message header (`len` is the whole message's).
    #[inline(always)]
    pub fn header(&self) -> MsgHeader {
        // SAFETY: `hdr` points to a header in a slot or cell that stays ours until `release`.
        let mut h = unsafe { ptr::read_unaligned(self.hdr) };
        h.len = self.len;
        h
    }

    /// The tag.
    #[inline(always)]
    pub fn tag(&self) -> i32 {
        // SAFETY: as in `header`.
        unsafe { ptr::read_unaligned(ptr::addr_of!((*self.hdr).tag)) }
    }

    /// The context id.
    #[inline(always)]
    pub fn context(&self) -> u32 {
        // SAFETY: as in `header`.
        unsafe { ptr::read_unaligned(ptr::addr_of!((*self.hdr).context)) }
    }

    /// The message kind (defined by the layer above).
    #[inline(always)]
    pub fn kind(&self) -> u8 {
        // SAFETY: as in `header`.
        unsafe { ptr::read_unaligned(ptr::addr_of!((*self.hdr).kind)) }
    }

    /// The kind-specific word of the header.
    #[inline(always)]
    pub fn aux(&self) -> u32 {
        // SAFETY: as in `header`.
        unsafe { ptr::read_unaligned(ptr::addr_of!((*self.hdr).aux)) }
    }

    /// The header's kind (low byte) and flags (high byte) in one word, one load: one comparison
    /// tells a plain message of a kind (no flag) from everything else.
    #[inline(always)]
    pub fn kind_flags(&self) -> u16 {
        // SAFETY: as in `header`; `kind` and `flags` are adjacent bytes of the `repr(C)` header
        // (kind first, checked in `cell.rs`), read as one little-endian word.
        u16::from_le(unsafe { ptr::read_unaligned(ptr::addr_of!((*self.hdr).kind) as *const u16) })
    }

    /// The fault-tolerance piggyback the message carries ([`flags::FT_PIGGYBACK`]), if any. Every
    /// fragment of a message carries the same one.
    #[inline(always)]
    pub fn piggyback(&self) -> Option<PiggybackBytes> {
        // SAFETY: as in `header`.
        let fl = unsafe { ptr::read_unaligned(ptr::addr_of!((*self.hdr).flags)) };
        if fl & flags::FT_PIGGYBACK == 0 {
            return None;
        }
        // SAFETY: a flagged fragment was validated (when polled) to hold the room after its
        // header inside its slot or cell: the payload starts `ft_room(fl)` bytes after it.
        let room = unsafe { core::slice::from_raw_parts((self.hdr as *const u8).add(HEADER_BYTES), ft_room(fl)) };
        Some(ft_read(fl, room))
    }

    /// Length of the whole message.
    #[inline(always)]
    pub fn len(&self) -> usize {
        self.len as usize
    }

    /// True for a zero-byte message.
    #[inline(always)]
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Offset of this fragment's payload in the message.
    #[inline(always)]
    pub fn offset(&self) -> usize {
        self.offset as usize
    }

    /// Length of this fragment's payload.
    #[inline(always)]
    pub fn frag_len(&self) -> usize {
        self.frag_len as usize
    }

    /// True if this is the message's last fragment.
    #[inline(always)]
    pub fn is_last(&self) -> bool {
        self.last
    }

    /// True if the message came through a fastbox.
    #[inline(always)]
    pub fn via_fastbox(&self) -> bool {
        self.cell == NULL
    }

    /// Copies the fragment's payload into `dst[..frag_len]` (or as much as fits).
    #[inline(always)]
    pub fn copy_to(&self, dst: &mut [u8]) -> usize {
        let n = (self.frag_len as usize).min(dst.len());
        // SAFETY: `payload` points to `frag_len` bytes validated against the slot or cell when the
        // fragment was polled; the slot stays ours until `release`.
        unsafe { copy_bytes(self.payload, dst.as_mut_ptr(), n) };
        n
    }

    /// Pointer to the fragment's `frag_len` payload bytes, valid until the fragment is released.
    pub fn payload_ptr(&self) -> *const u8 {
        self.payload
    }
}
