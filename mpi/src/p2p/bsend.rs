//! The buffered mode (MPI-4.1 §3.6): `MPI_Buffer_attach`, `MPI_Buffer_detach`, their
//! communicator and session forms (`MPI_Comm_attach_buffer`, `MPI_Session_attach_buffer`...; a
//! buffered send on a communicator takes the communicator's buffer, else that of the session the
//! communicator came from (`MPI_Comm_create_from_group` on a group of the session's), else the
//! process's), `MPI_Buffer_flush`/`iflush`, and the space a buffered send takes
//! in the attached buffer until the Endpoint has sent from it. Attaching `MPI_BUFFER_AUTOMATIC`
//! lets each buffered send take a copy of its own, as big as it needs.
//!
//! `MPI_Bsend` copies (packs) the message into the attached buffer and starts an ordinary send
//! from the copy, so it returns at once whatever the receiver does. A message takes its length rounded up
//! to 8 bytes (the bookkeeping lives outside the user's buffer, well within the
//! `MPI_BSEND_OVERHEAD` of 96 bytes a program reserves per message); space is found first-fit
//! and comes back when the send from it has completed, which each buffered send and the detach
//! check.

use std::ffi::{c_int, c_void};

use crate::abi;
use crate::error::{Fail, Res, Why};
use crate::state::{Access, State, not_running};

/// A message in the attached buffer.
#[derive(Debug)]
struct Held {
    off: usize,
    len: usize,
    req: nemesis::Request,
    /// The message's own copy (`MPI_BUFFER_AUTOMATIC`), kept until it is sent.
    own: Option<Vec<u8>>,
}

/// An attached buffer.
#[derive(Debug)]
struct Attached {
    /// The program's buffer (`MPI_BUFFER_AUTOMATIC`'s value for an automatic one).
    base: *mut u8,
    size: usize,
    /// `MPI_BUFFER_AUTOMATIC`: no space of the program's; each message is copied apart.
    automatic: bool,
    /// Messages in flight from it, by offset.
    held: Vec<Held>,
}

/// Which attached buffer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Which {
    /// The process's (`MPI_Buffer_attach`).
    Process,
    /// A communicator's, by its index.
    Comm(usize),
    /// A session's, by its handle.
    Session(c_int),
}

impl Which {
    /// The communicator index errors name.
    fn comm(self) -> Option<usize> {
        match self {
            Which::Comm(ci) => Some(ci),
            _ => None,
        }
    }
}

/// The process's buffered-mode state.
#[derive(Debug, Default)]
pub struct Bsend {
    attached: Option<Attached>,
    /// Communicators' buffers, by communicator index.
    comms: Vec<(usize, Attached)>,
    /// Sessions' buffers, by session handle.
    sessions: Vec<(c_int, Attached)>,
}

impl Bsend {
    /// No buffer attached.
    pub const fn new() -> Bsend {
        Bsend { attached: None, comms: Vec::new(), sessions: Vec::new() }
    }

    fn get_mut(&mut self, w: Which) -> Option<&mut Attached> {
        match w {
            Which::Process => self.attached.as_mut(),
            Which::Comm(ci) => self.comms.iter_mut().find(|(c, _)| *c == ci).map(|(_, a)| a),
            Which::Session(s) => self.sessions.iter_mut().find(|(h, _)| *h == s).map(|(_, a)| a),
        }
    }

    fn take(&mut self, w: Which) -> Option<Attached> {
        match w {
            Which::Process => self.attached.take(),
            Which::Comm(ci) => {
                let k = self.comms.iter().position(|(c, _)| *c == ci)?;
                Some(self.comms.swap_remove(k).1)
            }
            Which::Session(s) => {
                let k = self.sessions.iter().position(|(h, _)| *h == s)?;
                Some(self.sessions.swap_remove(k).1)
            }
        }
    }

    /// The buffer a buffered send on communicator `ci` (derived from session `session`, if
    /// any) uses: the communicator's, else the session's, else the process's.
    fn for_comm(&mut self, ci: usize, session: Option<c_int>) -> Option<&mut Attached> {
        if let Some(k) = self.comms.iter().position(|(c, _)| *c == ci) {
            return Some(&mut self.comms[k].1);
        }
        if let Some(k) = session.and_then(|s| self.sessions.iter().position(|(h, _)| *h == s)) {
            return Some(&mut self.sessions[k].1);
        }
        self.attached.as_mut()
    }
}

/// A buffer attached at a checkpoint as the MPI state image saves it (`crate::ft::image`):
/// which, its address and size (the program's words: it puts the buffer back there), automatic.
pub type Attachment = (Which, usize, usize, bool);

impl Bsend {
    /// Every attached buffer, the process's first.
    pub fn attachments(&self) -> Vec<Attachment> {
        let per = self.comms.iter().map(|(ci, a)| (Which::Comm(*ci), a));
        let all = self.attached.iter().map(|a| (Which::Process, a)).chain(per);
        all.chain(self.sessions.iter().map(|(s, a)| (Which::Session(*s), a)))
            .map(|(w, a)| (w, a.base as usize, a.size, a.automatic))
            .collect()
    }

    /// True if no buffer is attached.
    pub fn is_empty(&self) -> bool {
        self.attached.is_none() && self.comms.is_empty() && self.sessions.is_empty()
    }

    /// Attaches `v` again, no message held (the restore of a fresh process's state).
    pub fn restore(&mut self, v: Vec<Attachment>) {
        for (w, base, size, automatic) in v {
            let a = Attached { base: base as *mut u8, size, automatic, held: Vec::new() };
            match w {
                Which::Process => self.attached = Some(a),
                Which::Comm(ci) => self.comms.push((ci, a)),
                Which::Session(s) => self.sessions.push((s, a)),
            }
        }
    }
}

/// A buffer a message is still in flight from (its send not complete: a receiver that has not
/// matched it), once the completed ones are reclaimed; `MPIX_Checkpoint` refuses then.
pub(crate) fn in_flight(st: &mut State) -> Option<Which> {
    reclaim(st);
    let b = &st.bsend;
    let per = b.comms.iter().map(|(ci, a)| (Which::Comm(*ci), a));
    let mut all = b.attached.iter().map(|a| (Which::Process, a)).chain(per);
    let found = all.find(|(_, a)| !a.held.is_empty()).map(|(w, _)| w);
    found.or_else(|| b.sessions.iter().find(|(_, a)| !a.held.is_empty()).map(|(s, _)| Which::Session(*s)))
}

/// `MPI_BUFFER_AUTOMATIC`'s address (`mpi.h`).
pub const BUFFER_AUTOMATIC: usize = usize::MAX - 1;

/// `MPI_BUFFER_AUTOMATIC` as an address.
fn automatic(buffer: *mut c_void) -> bool {
    buffer as usize == BUFFER_AUTOMATIC
}

/// The space a message of `len` bytes takes in the buffer.
fn footprint(len: usize) -> usize {
    len.next_multiple_of(8)
}

/// Frees the space of the messages whose sends have completed (their errors are not reported
/// anywhere: MPI gives a buffered send's failures no request to carry them).
pub(crate) fn reclaim(st: &mut State) {
    let State { ep, bsend, .. } = st;
    let Some(ep) = ep.as_mut() else { return };
    let per = bsend.comms.iter_mut().map(|(_, a)| a).chain(bsend.sessions.iter_mut().map(|(_, a)| a));
    for a in bsend.attached.iter_mut().chain(per) {
        a.held.retain(|h| matches!(ep.test(h.req), Ok(None)));
    }
}

/// True if buffer `w` holds no message in flight (or is not attached).
pub(crate) fn flushed(st: &mut State, w: Which) -> bool {
    reclaim(st);
    st.bsend.get_mut(w).is_none_or(|a| a.held.is_empty())
}

#[cold]
fn no_space(ci: usize, why: &'static str) -> Fail {
    Fail::new(abi::ERR_BUFFER, Some(ci), Why::Arg(why))
}

/// `MPI_Bsend`'s work: has `fill` write the message's `len` bytes into space of the attached
/// buffer and starts its send to job rank `to` in context `ctx` (communicator index `ci`, for
/// errors).
pub fn send(
    st: &mut State,
    len: usize,
    fill: impl FnOnce(&mut [u8]),
    to: u32,
    tag: c_int,
    ctx: u32,
    ci: usize,
) -> Res<()> {
    reclaim(st);
    let State { phase, ep, bsend, comms, .. } = st;
    let Some(ep) = ep.as_mut() else { return Err(not_running(*phase)) };
    let session = comms.get(ci).and_then(|c| c.session);
    let Some(a) = bsend.for_comm(ci, session) else {
        return Err(no_space(ci, "buffered send without an attached buffer (MPI_Buffer_attach)"));
    };
    if a.automatic {
        let mut own = vec![0u8; len];
        fill(&mut own);
        // SAFETY: the copy is held (its heap block does not move) until the send completes.
        let req = unsafe { ep.isend_raw(own.as_ptr(), len, to, tag, ctx) }.map_err(|e| Fail::endpoint(ci, e))?;
        a.held.push(Held { off: 0, len: 0, req, own: Some(own) });
        return Ok(());
    }
    let need = footprint(len);
    // First fit between the messages held (sorted by offset), then after the last.
    let mut off = 0;
    let mut at = a.held.len();
    for (k, h) in a.held.iter().enumerate() {
        if h.off - off >= need {
            at = k;
            break;
        }
        off = h.off + footprint(h.len);
    }
    if at == a.held.len() && a.size - off.min(a.size) < need {
        return Err(no_space(ci, "the attached buffer has no room for this buffered send"));
    }
    // SAFETY: `off + need <= size`: inside the attached buffer, which the program gave us until
    // it detaches it (MPI's contract), and not overlapping any held message.
    let dst = unsafe { a.base.add(off) };
    // SAFETY: as above: `len` bytes of the attached buffer that nothing else uses.
    fill(unsafe { crate::p2p::out_bytes(dst.cast(), len) });
    // SAFETY: the copy stays untouched until the send completes: its space is held until then.
    let req = unsafe { ep.isend_raw(dst, len, to, tag, ctx) }.map_err(|e| Fail::endpoint(ci, e))?;
    a.held.insert(at, Held { off, len, req, own: None });
    Ok(())
}

/// `MPI_Buffer_attach` (`comm`: `MPI_Comm_attach_buffer`), `size` an `int` or (`_c`) an
/// `MPI_Count`.
///
/// # Safety
/// `buffer` is valid for `size` bytes until it is detached (MPI's contract), or
/// `MPI_BUFFER_AUTOMATIC`.
pub unsafe fn attach(acc: &mut Access, buffer: *mut c_void, size: impl Into<abi::Count>) -> Res<()> {
    // SAFETY: the caller's contract.
    unsafe { attach_to(acc, Which::Process, buffer, size.into()) }
}

/// `MPI_Comm_attach_buffer`.
///
/// # Safety
/// As for [`attach`].
pub unsafe fn comm_attach(
    acc: &mut Access,
    comm: abi::Comm,
    buffer: *mut c_void,
    size: impl Into<abi::Count>,
) -> Res<()> {
    let ci = crate::p2p::comm_at(&acc.st().comms, comm)?.0;
    // SAFETY: the caller's contract.
    unsafe { attach_to(acc, Which::Comm(ci), buffer, size.into()) }
}

/// `MPI_Session_attach_buffer` (`_c`: `size` an `MPI_Count`).
///
/// # Safety
/// As for [`attach`].
pub unsafe fn session_attach(
    acc: &mut Access,
    session: c_int,
    buffer: *mut c_void,
    size: impl Into<abi::Count>,
) -> Res<()> {
    let w = session_which(acc, session)?;
    // SAFETY: the caller's contract.
    unsafe { attach_to(acc, w, buffer, size.into()) }
}

/// Attaches `buffer` as buffer `w`.
///
/// # Safety
/// As for [`attach`].
unsafe fn attach_to(acc: &mut Access, w: Which, buffer: *mut c_void, size: abi::Count) -> Res<()> {
    let ci = w.comm();
    let st = acc.st();
    if st.ep.is_none() {
        return Err(not_running(st.phase));
    }
    let auto = automatic(buffer);
    if size < 0 && !auto {
        return Err(Fail::new(abi::ERR_COUNT, ci, Why::Arg("negative buffer size")));
    }
    if buffer.is_null() && size > 0 {
        return Err(Fail::new(abi::ERR_BUFFER, ci, Why::Buffer));
    }
    if st.bsend.get_mut(w).is_some() {
        return Err(Fail::new(abi::ERR_BUFFER, ci, Why::Arg("a buffer is already attached")));
    }
    let a = Attached { base: buffer.cast(), size: size.max(0) as usize, automatic: auto, held: Vec::new() };
    match w {
        Which::Process => st.bsend.attached = Some(a),
        Which::Comm(ci) => st.bsend.comms.push((ci, a)),
        Which::Session(s) => st.bsend.sessions.push((s, a)),
    }
    Ok(())
}

/// Waits until buffer `w`'s messages have all been sent (`MPI_Buffer_flush`,
/// `MPI_Comm_flush_buffer`, and before a detach).
pub fn flush(acc: &mut Access, w: Which) -> Res<()> {
    loop {
        let next = acc.st().bsend.get_mut(w).and_then(|a| a.held.pop());
        let Some(h) = next else { return Ok(()) };
        // Its failure (a dead receiver) has nowhere to go; the space is free either way.
        let _ = acc.ep_wait(h.req)?;
        drop(h.own);
    }
}

/// `MPI_Buffer_flush` (`comm` `None`) and `MPI_Comm_flush_buffer`.
pub fn flush_call(acc: &mut Access, comm: Option<abi::Comm>) -> Res<()> {
    let w = which(acc, comm)?;
    flush(acc, w)
}

/// The buffer a call names: the process's, or communicator `comm`'s.
fn which(acc: &mut Access, comm: Option<abi::Comm>) -> Res<Which> {
    let st = acc.st();
    if st.ep.is_none() {
        return Err(not_running(st.phase));
    }
    Ok(match comm {
        None => Which::Process,
        Some(c) => Which::Comm(crate::p2p::comm_at(&st.comms, c)?.0),
    })
}

/// Session `session`'s buffer (the session open).
fn session_which(acc: &mut Access, session: c_int) -> Res<Which> {
    let st = acc.st();
    if st.ep.is_none() {
        return Err(not_running(st.phase));
    }
    crate::session::session(st, session)?;
    Ok(Which::Session(session))
}

/// `MPI_Session_flush_buffer`.
pub fn session_flush(acc: &mut Access, session: c_int) -> Res<()> {
    let w = session_which(acc, session)?;
    flush(acc, w)
}

/// At `MPI_Session_finalize`: waits for the messages in session `session`'s buffer, if one is
/// attached, and forgets the buffer.
pub(crate) fn session_end(acc: &mut Access, session: c_int) -> Res<()> {
    flush(acc, Which::Session(session))?;
    acc.st().bsend.take(Which::Session(session));
    Ok(())
}

/// `MPI_Buffer_iflush` (`comm` `None`) and `MPI_Comm_iflush_buffer`: a request that completes
/// once the buffer's messages have all been sent.
///
/// # Safety
/// `request` writable.
pub unsafe fn iflush(acc: &mut Access, comm: Option<abi::Comm>, request: *mut abi::Request) -> Res<()> {
    let w = which(acc, comm)?;
    // SAFETY: the caller's contract.
    unsafe { iflush_of(acc, w, request) }
}

/// `MPI_Session_iflush_buffer`.
///
/// # Safety
/// `request` writable.
pub unsafe fn session_iflush(acc: &mut Access, session: c_int, request: *mut abi::Request) -> Res<()> {
    let w = session_which(acc, session)?;
    // SAFETY: the caller's contract.
    unsafe { iflush_of(acc, w, request) }
}

/// A request that completes once buffer `w`'s messages have all been sent.
///
/// # Safety
/// `request` writable.
unsafe fn iflush_of(acc: &mut Access, w: Which, request: *mut abi::Request) -> Res<()> {
    if request.is_null() {
        return Err(crate::p2p::null_arg(w.comm(), "null request pointer"));
    }
    let st = acc.st();
    let ci = w.comm().unwrap_or(0);
    let ext = Some(Box::new(crate::request::Ext::Flush(w)));
    let req = crate::request::Req { ext, ..crate::request::Req::new(ci, crate::request::State::Compound, false) };
    let h = st.reqs.insert(req).ok_or_else(|| crate::p2p::start::too_many(ci))?;
    // SAFETY: checked non-null; MPI's contract.
    unsafe { *request = h };
    Ok(())
}

/// A size `MPI_Buffer_detach` writes: an `int` or (`MPI_Buffer_detach_c`) an `MPI_Count`.
pub trait SizeOut: Copy {
    /// The size `n` as this type; `None` if it does not fit.
    fn from_size(n: usize) -> Option<Self>;
}

impl SizeOut for c_int {
    fn from_size(n: usize) -> Option<c_int> {
        c_int::try_from(n).ok()
    }
}

impl SizeOut for abi::Count {
    fn from_size(n: usize) -> Option<abi::Count> {
        abi::Count::try_from(n).ok()
    }
}

/// `MPI_Buffer_detach`: waits until every buffered message has been sent, then gives the buffer
/// back (`buffer_addr` is the address of a `void *`, as the standard's C binding has it).
///
/// # Safety
/// `buffer_addr` writable as a `void *`, `size` writable.
pub unsafe fn detach<T: SizeOut>(acc: &mut Access, buffer_addr: *mut c_void, size: *mut T) -> Res<()> {
    // SAFETY: the caller's contract.
    unsafe { detach_from(acc, Which::Process, buffer_addr, size) }
}

/// `MPI_Comm_detach_buffer`.
///
/// # Safety
/// As for [`detach`].
pub unsafe fn comm_detach<T: SizeOut>(
    acc: &mut Access,
    comm: abi::Comm,
    buffer_addr: *mut c_void,
    size: *mut T,
) -> Res<()> {
    let w = which(acc, Some(comm))?;
    // SAFETY: the caller's contract.
    unsafe { detach_from(acc, w, buffer_addr, size) }
}

/// `MPI_Session_detach_buffer` (`_c`: `size` an `MPI_Count`).
///
/// # Safety
/// As for [`detach`].
pub unsafe fn session_detach<T: SizeOut>(
    acc: &mut Access,
    session: c_int,
    buffer_addr: *mut c_void,
    size: *mut T,
) -> Res<()> {
    let w = session_which(acc, session)?;
    // SAFETY: the caller's contract.
    unsafe { detach_from(acc, w, buffer_addr, size) }
}

/// Detaches buffer `w`.
///
/// # Safety
/// As for [`detach`].
unsafe fn detach_from<T: SizeOut>(acc: &mut Access, w: Which, buffer_addr: *mut c_void, size: *mut T) -> Res<()> {
    let ci = w.comm();
    let st = acc.st();
    if st.ep.is_none() {
        return Err(not_running(st.phase));
    }
    if buffer_addr.is_null() || size.is_null() {
        return Err(Fail::new(abi::ERR_ARG, None, Why::Arg("null buffer address or size pointer")));
    }
    if st.bsend.get_mut(w).is_none() {
        return Err(Fail::new(abi::ERR_BUFFER, ci, Why::Arg("no buffer is attached")));
    }
    flush(acc, w)?;
    let st = acc.st();
    // A size beyond `INT_MAX` (attached by `MPI_Buffer_attach_c`) leaves the buffer attached.
    let n = st.bsend.get_mut(w).and_then(|a| T::from_size(a.size)).ok_or_else(|| {
        Fail::new(abi::ERR_COUNT, ci, Why::Arg("the attached buffer's size exceeds INT_MAX (MPI_Buffer_detach_c)"))
    })?;
    let Some(a) = st.bsend.take(w) else { return Ok(()) };
    // SAFETY: checked non-null; MPI's contract.
    unsafe {
        *(buffer_addr as *mut *mut c_void) = a.base.cast();
        *size = n;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn footprints_stay_within_the_overhead() {
        for len in [0, 1, 7, 8, 9, 1000, 1 << 20] {
            let f = footprint(len);
            assert!(f >= len && f - len <= abi::BSEND_OVERHEAD && f.is_multiple_of(8), "{len}");
        }
    }
}
