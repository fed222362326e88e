//! The table behind `MPI_Request` handles: each request's state, the communicator its status
//! speaks of, and what a persistent request starts again.
//!
//! A request is `Pending` while the Endpoint works on it, `Done` when its result is known but not
//! yet handed to the user (an operation on `MPI_PROC_NULL`, a buffered send, a result that
//! `MPI_Testall` took but must not report yet, a cancelled receive), and `Inactive` for a
//! persistent request between its completion and the next `MPI_Start`. A request the user freed
//! (`MPI_Request_free`) while active stays until it completes, then goes without a report.
//!
//! A handle carries its slot's generation, bumped every time the slot is freed, so a stale handle
//! (a request already completed and freed, kept by mistake) is refused with `MPI_ERR_REQUEST`
//! instead of naming the request that reuses its slot. `MPI_Request` is a C `int` whose top six
//! bits give its kind, so the generation has 8 bits; freed slots are reused first in, first out
//! and only once [`REUSE_AFTER`] of them wait, so a stale handle can alias a new request only
//! after its slot went round the generations: at least 256 × 256 requests later.

use std::collections::VecDeque;
use std::ffi::c_int;

use crate::abi;
use crate::datatype::Layout;
use crate::datatype::pack::TypedBuf;
use crate::error::Why;

/// A completed operation as MPI reports it.
#[derive(Debug)]
pub struct Completion {
    /// `MPI_SOURCE` (communicator rank, or `MPI_PROC_NULL`).
    pub source: c_int,
    pub tag: c_int,
    /// Bytes received.
    pub count: i64,
    /// `MPI_SUCCESS` or the error code.
    pub code: c_int,
    /// Why it failed (when `code` is not `MPI_SUCCESS`).
    pub why: Option<Why>,
    /// The operation was cancelled (`MPI_Test_cancelled`).
    pub cancelled: bool,
}

impl Completion {
    /// A successful completion.
    pub fn ok(source: c_int, tag: c_int, count: i64) -> Completion {
        Completion { source, tag, count, code: abi::SUCCESS, why: None, cancelled: false }
    }

    /// The completion of an operation on `MPI_PROC_NULL` (MPI-3.1 §3.11).
    pub fn proc_null() -> Completion {
        Completion::ok(abi::PROC_NULL, abi::ANY_TAG, 0)
    }

    /// The empty status's completion (MPI-3.1 §3.7.3): a null or inactive request.
    pub fn empty() -> Completion {
        Completion::ok(abi::ANY_SOURCE, abi::ANY_TAG, 0)
    }

    /// A cancelled operation: the empty status with the cancelled bit (MPI-3.1 §3.8.4).
    pub fn cancelled() -> Completion {
        Completion { cancelled: true, ..Completion::empty() }
    }

    /// The status this completion fills (with `MPI_ERROR` set).
    pub fn status(&self) -> abi::Status {
        let mut s = abi::Status::new(self.source, self.tag, self.code, self.count);
        s.set_cancelled(self.cancelled);
        s
    }
}

/// Where a request is.
#[derive(Debug)]
pub enum State {
    /// A persistent request not started (or completed and not restarted).
    Inactive,
    /// The Endpoint works on it.
    Pending(nemesis::Request),
    /// Complete; the result waits to be reported.
    Done(Completion),
    /// A non-blocking collective's schedule, advanced when the request is tested or waited for.
    Coll(Box<crate::coll::nbc::Sched>),
    /// A receive not yet given to the Endpoint (`crate::state::State::deferred`).
    Deferred(Deferred),
    /// Made of other operations, or completed by the program: [`Req::ext`] says which and when
    /// it is complete (`crate::p2p::compound`).
    Compound,
}

/// What a request that is not one Endpoint operation holds (`State::Compound` while active).
#[derive(Debug)]
pub enum Ext {
    /// `MPI_Isendrecv`, `MPI_Isendrecv_replace`: a send and a receive.
    Pair(crate::p2p::compound::Pair),
    /// `MPI_Psend_init`, `MPI_Precv_init`: a persistent partitioned transfer.
    Part(Box<crate::p2p::partitioned::Part>),
    /// `MPI_Grequest_start`: completed by the program (`MPI_Grequest_complete`).
    Greq(crate::grequest::Greq),
    /// `MPI_Buffer_iflush`, `MPI_Comm_iflush_buffer`: complete once the buffer is empty.
    Flush(crate::p2p::bsend::Which),
    /// `MPI_Rput`... to a target on another node: complete with the operation
    /// (`crate::win::remote`).
    Rma(crate::win::remote::Pending),
}

/// A deferred receive: what `MPI_Irecv` was asked, kept until `MPI_Waitall` takes the message
/// straight from the fastbox ([`nemesis::Endpoint::try_recv_link`]) or any other call posts it
/// ([`crate::state::State::post_deferred`]).
#[derive(Clone, Copy, Debug)]
pub struct Deferred {
    /// Where the message goes (`len` bytes; any pointer if 0).
    pub buf: *mut u8,
    pub len: usize,
    /// The source: its communicator rank (for the status) and its link (a rank of this node).
    pub source: c_int,
    pub from: nemesis::Link,
    pub tag: c_int,
    /// The communicator's point-to-point context.
    pub ctx: u32,
}

/// The send modes (MPI-3.1 §3.4); ready sends are standard sends (the receive is posted, by the
/// program's contract, so nothing differs).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mode {
    Standard,
    Synchronous,
    Buffered,
    Ready,
}

/// What a persistent request starts each time (`MPI_Send_init`... `MPI_Recv_init`): its
/// arguments, resolved when it was made (so freeing the datatype or the communicator afterwards
/// changes nothing, as MPI wants).
#[derive(Clone, Debug)]
pub struct Persistent {
    /// `Some(mode)` for a send, `None` for a receive.
    pub send: Option<Mode>,
    pub data: Layout,
    /// Job rank to send to, or the Endpoint's source to receive from; `None`: `MPI_PROC_NULL`.
    pub peer: Option<i32>,
    pub tag: c_int,
    /// The communicator's point-to-point context.
    pub ctx: u32,
    /// A persistent collective (`MPI_Bcast_init`...): what `MPI_Start` runs instead (the fields
    /// above unused).
    pub coll: Option<std::rc::Rc<crate::coll::entry::Recipe>>,
}

/// One request.
#[derive(Debug)]
pub struct Req {
    /// Index of the communicator in the table (for the status's ranks and the error handler).
    pub comm: u32,
    pub state: State,
    /// A receive (its cancellation is local; a send's needs the receiver).
    pub recv: bool,
    /// `MPI_Request_free` was called while it was active: it goes, unreported, once complete.
    pub freed: bool,
    /// Set for persistent requests.
    pub persistent: Option<Box<Persistent>>,
    /// Typed (non-contiguous) data, as the pieces the Endpoint copies to and from, while the
    /// operation is in flight.
    pub typed: Option<Box<TypedBuf>>,
    /// A non-blocking send's message, for `MPI_Cancel`.
    pub sent: Option<nemesis::SendId>,
    /// `MPI_Cancel` of a send: the receiver's answer (`Err(Cancelled)` or `Ok`: matched).
    pub cancel: Option<nemesis::Request>,
    /// A non-blocking collective's request (never cancellable).
    pub coll: bool,
    /// The parts of a request that is not one Endpoint operation (`State::Compound`).
    pub ext: Option<Box<Ext>>,
}

impl Req {
    /// True if dropping the request would free nothing: no boxed parts, and a state that owns no
    /// memory (a completion without a reason, which may hold text).
    #[inline(always)]
    fn owns_nothing(&self) -> bool {
        // Every field named: one added must be placed here (the others are plain values).
        let Req { comm: _, state, recv: _, freed: _, persistent, typed, sent: _, cancel: _, coll: _, ext } = self;
        let state = match state {
            State::Inactive | State::Pending(_) | State::Deferred(_) | State::Compound => true,
            State::Done(d) => d.why.is_none(),
            State::Coll(_) => false,
        };
        state && persistent.is_none() && typed.is_none() && ext.is_none()
    }

    /// True for a request that `MPI_Start` restarts and completion leaves inactive.
    pub fn is_persistent(&self) -> bool {
        self.persistent.is_some() || matches!(self.ext.as_deref(), Some(Ext::Part(_)))
    }

    /// A request in `state`.
    pub fn new(comm: usize, state: State, recv: bool) -> Req {
        let (freed, coll) = (false, false);
        Req {
            comm: comm as u32,
            state,
            recv,
            freed,
            persistent: None,
            typed: None,
            sent: None,
            cancel: None,
            coll,
            ext: None,
        }
    }
}

/// Freed slots are reused only once this many wait (until then the table grows): a slot's
/// generations go round at most once every `REUSE_AFTER` frees.
pub const REUSE_AFTER: usize = 256;

const INDEX_MASK: u32 = (1 << abi::REQUEST_INDEX_BITS) - 1;
const GENERATION_MASK: u32 = (1 << abi::REQUEST_GENERATION_BITS) - 1;
const _: () = assert!(abi::REQUEST_INDEX_BITS + abi::REQUEST_GENERATION_BITS <= 26, "the kind bits stay free");

/// The request table: handles `REQUEST_DIRECT | generation << REQUEST_INDEX_BITS | index`.
#[derive(Debug, Default)]
pub struct Requests {
    slots: Vec<Option<Req>>,
    /// Generation of each slot, bumped when it is freed (wraps in `REQUEST_GENERATION_BITS`).
    generations: Vec<u8>,
    /// Free slots, oldest first.
    free: VecDeque<u32>,
}

impl Requests {
    /// An empty table.
    pub const fn new() -> Requests {
        Requests { slots: Vec::new(), generations: Vec::new(), free: VecDeque::new() }
    }

    /// The handle of slot `i` in its current generation.
    fn handle(&self, i: usize) -> c_int {
        let g = u32::from(self.generations[i]) & GENERATION_MASK;
        (abi::REQUEST_DIRECT | g << abi::REQUEST_INDEX_BITS | i as u32) as c_int
    }

    /// Stores `r`; `None` if the handle space is exhausted.
    pub fn insert(&mut self, r: Req) -> Option<c_int> {
        self.insert_slot(r).map(|(_, h)| h)
    }

    /// [`insert`](Self::insert), also returning the slot.
    pub fn insert_slot(&mut self, r: Req) -> Option<(usize, c_int)> {
        let reuse = self.free.len() >= REUSE_AFTER || (self.slots.len() >= abi::REQUEST_MAX && !self.free.is_empty());
        let i = if reuse {
            let i = self.free.pop_front()? as usize;
            let slot = &mut self.slots[i];
            if slot.is_none() {
                // SAFETY: a valid, aligned place (a `&mut`) holding `None`, which owns nothing: no
                // drop is skipped. (Writing in place spares the drop glue of a `Req`.)
                unsafe { std::ptr::write(slot, Some(r)) };
            } else {
                *slot = Some(r);
            }
            i
        } else {
            if self.slots.len() >= abi::REQUEST_MAX {
                return None;
            }
            self.slots.push(Some(r));
            self.generations.push(0);
            self.slots.len() - 1
        };
        Some((i, self.handle(i)))
    }

    /// The slot index of handle `h` if it names a live request of the current generation.
    pub fn index(&self, h: c_int) -> Option<usize> {
        let bits = (h as u32).wrapping_sub(abi::REQUEST_DIRECT);
        if bits >> (abi::REQUEST_INDEX_BITS + abi::REQUEST_GENERATION_BITS) != 0 {
            return None;
        }
        let i = (bits & INDEX_MASK) as usize;
        let live = matches!(self.slots.get(i), Some(Some(_)));
        (live && u32::from(self.generations[i]) & GENERATION_MASK == bits >> abi::REQUEST_INDEX_BITS).then_some(i)
    }

    pub fn get(&self, h: c_int) -> Option<&Req> {
        self.at(self.index(h)?)
    }

    pub fn get_mut(&mut self, h: c_int) -> Option<&mut Req> {
        let i = self.index(h)?;
        self.at_mut(i)
    }

    pub fn at(&self, i: usize) -> Option<&Req> {
        self.slots.get(i)?.as_ref()
    }

    pub fn at_mut(&mut self, i: usize) -> Option<&mut Req> {
        self.slots.get_mut(i)?.as_mut()
    }

    /// Frees slot `i` (its request dropped where it lies, not moved out); its handles go stale.
    /// False if it was free.
    pub fn remove_at(&mut self, i: usize) -> bool {
        let Some(slot) = self.slots.get_mut(i) else { return false };
        match slot {
            None => return false,
            Some(r) if r.owns_nothing() => {
                // SAFETY: a valid, aligned place (a `&mut`) whose request owns no memory (checked
                // just above): overwriting it skips no drop that would free anything. (The common
                // request, a plain send or receive, then costs no drop glue.)
                unsafe { std::ptr::write(slot, None) };
            }
            Some(_) => *slot = None,
        }
        let g = &mut self.generations[i];
        *g = g.wrapping_add(1);
        self.free.push_back(i as u32);
        true
    }

    /// The table's shape, for the MPI state image (`crate::ft::requests`): each slot's
    /// generation (their count is the slots in all) and the free slots, oldest first.
    pub fn shape(&self) -> (Vec<u8>, Vec<u32>) {
        (self.generations.clone(), self.free.iter().copied().collect())
    }

    /// Makes this empty table the one of shape `(generations, free)` ([`shape`](Self::shape))
    /// holding `live` at their slots: every handle they had names them again. A slot neither
    /// free nor in `live` (a request not saved) is freed, its generation bumped, after the
    /// others. `Err`: a shape that does not hold together; nothing changed then.
    pub fn restore(&mut self, generations: Vec<u8>, free: Vec<u32>, live: Vec<(usize, Req)>) -> Result<(), String> {
        let n = generations.len();
        if !self.slots.is_empty() {
            return Err("requests made before the restore".into());
        }
        if n > abi::REQUEST_MAX {
            return Err(format!("a request table of {n} slots"));
        }
        let mut taken = vec![false; n];
        for i in free.iter().map(|&i| i as usize).chain(live.iter().map(|&(i, _)| i)) {
            match taken.get_mut(i) {
                Some(t) if !*t => *t = true,
                _ => return Err(format!("request slot {i} listed twice or outside the table of {n}")),
            }
        }
        let mut slots: Vec<Option<Req>> = (0..n).map(|_| None).collect();
        for (i, r) in live {
            slots[i] = Some(r);
        }
        let (mut generations, mut free) = (generations, VecDeque::from(free));
        for (i, _) in taken.iter().enumerate().filter(|(_, t)| !**t) {
            generations[i] = generations[i].wrapping_add(1);
            free.push_back(i as u32);
        }
        (self.slots, self.generations, self.free) = (slots, generations, free);
        Ok(())
    }

    pub fn iter(&self) -> impl Iterator<Item = (c_int, &Req)> {
        self.slots.iter().enumerate().filter_map(|(i, s)| s.as_ref().map(|r| (self.handle(i), r)))
    }
}

/// An empty request table.
pub const fn table() -> Requests {
    Requests::new()
}

#[cfg(test)]
mod tests {

    #[test]
    fn what_a_request_owns() {
        let plain = |state| Req::new(0, state, true);
        assert!(plain(State::Inactive).owns_nothing());
        assert!(plain(State::Done(Completion::ok(1, 2, 3))).owns_nothing());
        let why = Completion { why: Some(crate::error::Why::Arg("x")), ..Completion::empty() };
        assert!(!plain(State::Done(why)).owns_nothing(), "a reason may hold text");
        let mut t = Requests::new();
        for k in 0..2 * REUSE_AFTER {
            let (i, h) = t.insert_slot(plain(State::Done(Completion::ok(0, k as c_int, 0)))).unwrap();
            assert_eq!(t.index(h), Some(i));
            assert!(t.remove_at(i));
            assert!(!t.remove_at(i), "freed once");
            assert_eq!(t.index(h), None, "stale");
        }
    }

    use super::*;

    /// A restored table gives every saved request its handle back, frees a slot not saved (its
    /// handle stale) and hands out next the handle the saved table would have.
    #[test]
    fn a_restored_table_keeps_its_handles() {
        let mut t = Requests::new();
        let hs: Vec<c_int> = (0..4).map(|_| t.insert(Req::new(0, State::Inactive, false)).unwrap()).collect();
        t.remove_at(t.index(hs[1]).unwrap());
        let h1 = t.insert(Req::new(0, State::Inactive, true)).unwrap();
        assert_ne!(h1, hs[1]);
        let (generations, free) = t.shape();
        let live = vec![
            (t.index(hs[0]).unwrap(), Req::new(0, State::Inactive, true)),
            (t.index(h1).unwrap(), Req::new(2, State::Inactive, false)),
        ];
        let mut u = Requests::new();
        u.restore(generations.clone(), free.clone(), live).unwrap();
        assert_eq!(u.get(hs[0]).map(|r| r.recv), Some(true));
        assert_eq!(u.get(h1).map(|r| r.comm), Some(2));
        for h in [hs[1], hs[2], hs[3]] {
            assert!(u.get(h).is_none(), "{h:#x} not saved");
        }
        let next = || Req::new(0, State::Inactive, false);
        assert_eq!(u.insert(next()), t.insert(next()), "the next handle");
        let twice = vec![(0, Req::new(0, State::Inactive, false)), (0, Req::new(0, State::Inactive, false))];
        assert!(Requests::new().restore(generations.clone(), free.clone(), twice).is_err());
        assert!(u.restore(generations, free, Vec::new()).is_err(), "not empty");
    }

    #[test]
    fn completions_fill_statuses() {
        let s = Completion::ok(3, 4, 1 << 33).status();
        assert_eq!((s.source, s.tag, s.error, s.count(), s.cancelled()), (3, 4, 0, 1 << 33, false));
        let s = Completion::cancelled().status();
        assert!(s.cancelled());
        assert_eq!((s.source, s.tag, s.count()), (abi::ANY_SOURCE, abi::ANY_TAG, 0));
        let s = Completion::proc_null().status();
        assert_eq!((s.source, s.tag), (abi::PROC_NULL, abi::ANY_TAG));
    }

    /// A stale handle never names the request that reuses its slot, for as long as the
    /// generations last.
    #[test]
    fn stale_handles_are_refused_after_their_slot_is_reused() {
        let mut t = Requests::new();
        let stale = t.insert(Req::new(0, State::Inactive, false)).unwrap();
        assert_eq!(stale as u32, abi::REQUEST_DIRECT);
        t.remove_at(t.index(stale).unwrap());
        assert!(t.get(stale).is_none(), "freed");
        // The handle comes back only once its slot went round the 256 generations.
        for n in 0..(REUSE_AFTER << abi::REQUEST_GENERATION_BITS) - 1 {
            let h = t.insert(Req::new(0, State::Inactive, false)).unwrap();
            assert_ne!(h, stale, "request {n} reused the stale handle");
            assert_eq!(t.index(stale), None, "after request {n}");
            t.remove_at(t.index(h).unwrap());
        }
        assert_eq!(t.index(abi::REQUEST_NULL), None);
        assert_eq!(t.index(0), None);
        assert_eq!(t.index(-1), None);
    }
}
