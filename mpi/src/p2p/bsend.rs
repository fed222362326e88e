//! The buffered mode (MPI-3.1 §3.6): `MPI_Buffer_attach`, `MPI_Buffer_detach`, and the space a
//! buffered send takes in the attached buffer until the Endpoint has sent from it.
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
}

/// The attached buffer.
#[derive(Debug)]
struct Attached {
    base: *mut u8,
    size: usize,
    /// Messages in flight from it, by offset.
    held: Vec<Held>,
}

/// The process's buffered-mode state.
#[derive(Debug, Default)]
pub struct Bsend {
    attached: Option<Attached>,
}

impl Bsend {
    /// No buffer attached.
    pub const fn new() -> Bsend {
        Bsend { attached: None }
    }
}

/// The space a message of `len` bytes takes in the buffer.
fn footprint(len: usize) -> usize {
    len.next_multiple_of(8)
}

/// Frees the space of the messages whose sends have completed (their errors are not reported
/// anywhere: MPI gives a buffered send's failures no request to carry them).
fn reclaim(st: &mut State) {
    let State { ep, bsend, .. } = st;
    let (Some(ep), Some(a)) = (ep.as_mut(), bsend.attached.as_mut()) else { return };
    a.held.retain(|h| matches!(ep.test(h.req), Ok(None)));
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
    let State { phase, ep, bsend, .. } = st;
    let Some(ep) = ep.as_mut() else { return Err(not_running(*phase)) };
    let Some(a) = bsend.attached.as_mut() else {
        return Err(no_space(ci, "buffered send without an attached buffer (MPI_Buffer_attach)"));
    };
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
    a.held.insert(at, Held { off, len, req });
    Ok(())
}

/// `MPI_Buffer_attach`.
///
/// # Safety
/// `buffer` is valid for `size` bytes until it is detached (MPI's contract).
pub unsafe fn attach(acc: &mut Access, buffer: *mut c_void, size: c_int) -> Res<()> {
    let st = acc.st();
    if st.ep.is_none() {
        return Err(not_running(st.phase));
    }
    if size < 0 {
        return Err(Fail::new(abi::ERR_COUNT, None, Why::Count(size)));
    }
    if buffer.is_null() && size > 0 {
        return Err(Fail::new(abi::ERR_BUFFER, None, Why::Buffer));
    }
    if st.bsend.attached.is_some() {
        return Err(Fail::new(abi::ERR_BUFFER, None, Why::Arg("a buffer is already attached")));
    }
    st.bsend.attached = Some(Attached { base: buffer.cast(), size: size as usize, held: Vec::new() });
    Ok(())
}

/// `MPI_Buffer_detach`: waits until every buffered message has been sent, then gives the buffer
/// back (`buffer_addr` is the address of a `void *`, as the standard's C binding has it).
///
/// # Safety
/// `buffer_addr` writable as a `void *`, `size` writable.
pub unsafe fn detach(acc: &mut Access, buffer_addr: *mut c_void, size: *mut c_int) -> Res<()> {
    let st = acc.st();
    if st.ep.is_none() {
        return Err(not_running(st.phase));
    }
    if buffer_addr.is_null() || size.is_null() {
        return Err(Fail::new(abi::ERR_ARG, None, Why::Arg("null buffer address or size pointer")));
    }
    if st.bsend.attached.is_none() {
        return Err(Fail::new(abi::ERR_BUFFER, None, Why::Arg("no buffer is attached")));
    }
    loop {
        let next = acc.st().bsend.attached.as_mut().and_then(|a| a.held.pop());
        let Some(h) = next else { break };
        // Its failure (a dead receiver) has nowhere to go; the space is free either way.
        let _ = acc.ep_wait(h.req)?;
    }
    let Some(a) = acc.st().bsend.attached.take() else { return Ok(()) };
    // SAFETY: checked non-null; MPI's contract.
    unsafe {
        *(buffer_addr as *mut *mut c_void) = a.base.cast();
        *size = a.size as c_int;
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
