//! The origin's side of the remote path: each operation becomes one request message
//! ([`super::wire`]) sent without waiting; those that fetch (`Get`, `Get_accumulate`,
//! `Fetch_and_op`, `Compare_and_swap`) and the synchronisations (`Lock`, `Unlock`, `Flush`) also
//! post the receive of their reply, matched by a small id.
//!
//! **Completion.** An operation is *locally* complete (`MPI_Win_flush_local`) once its origin
//! buffer may be reused and its result buffer holds its result: at once for a `Put` or an
//! `Accumulate` (their data is packed into the request when it is made), once its reply arrived
//! for a fetch. It is complete at the target once applied there. A reply says
//! so for the operations that have one; for the others (`Put`, `Accumulate`) a `Flush` or an
//! `Unlock` says so: the target applies the requests of one origin in arrival order, and
//! messages of one pair on one context arrive in the order sent, so the reply to a `Flush`
//! follows the application of everything sent before it ([`Origin::dirty`] says which targets
//! need one).
//!
//! **Errors** the target finds (a span outside its window, a malformed request) come back in
//! the reply of the operation, or of the next `Flush`/`Unlock` for those without one; the first
//! one is kept ([`Origin::error`]) and reported by the next synchronisation call.

use std::ffi::c_int;

use super::wire::{self, Header, Kind, Span};
use crate::abi;
use crate::datatype::Layout;
use crate::datatype::pack;

/// Where a fetched reply's data goes.
#[derive(Debug)]
pub enum Into {
    /// Nothing (a synchronisation's reply: its status only).
    Nothing,
    /// Unpacked into the program's buffer.
    Buffer(Layout),
}

/// One operation in flight.
#[derive(Debug)]
pub struct Op {
    /// Its id (the reply's, if it has one).
    pub id: u32,
    /// The target (rank in the window).
    pub target: u32,
    /// Its request message while the Endpoint sends it.
    pub send: Option<(nemesis::Request, Vec<u8>)>,
    /// Its reply's receive and buffer, while it has not arrived.
    pub reply: Option<(nemesis::Request, Vec<u8>, Into)>,
    /// A request-based operation (`MPI_Rput`...): its result is kept for `MPI_Wait` once done.
    pub wanted: bool,
    /// The first failure met (an MPI error class), 0 if none.
    pub code: c_int,
}

impl Op {
    /// Locally complete (`MPI_Win_flush_local`): the origin's data was copied into the request
    /// when it was made, so only a fetch waits, for its reply (its data in the result buffer).
    pub fn local_done(&self) -> bool {
        self.reply.is_none()
    }

    /// Complete: the send done and the reply, if any, arrived.
    pub fn done(&self) -> bool {
        self.send.is_none() && self.reply.is_none()
    }
}

/// A `Put` or `Accumulate` held back, not yet sent: MPI completes them only at the next
/// synchronisation, so the last one waits for the window's next request (then goes first, the
/// order kept) or synchronisation, whose flush of its target it carries ([`wire::FLUSH_AFTER`]):
/// a put and its flush are one message and one reply, as a get.
#[derive(Debug)]
pub struct Tail {
    /// Its target (rank in the window) and id.
    pub target: u32,
    pub id: u32,
    /// Its message (the origin's data packed in: the origin buffer is free already).
    pub msg: Vec<u8>,
}

/// The origin's state of one window.
#[derive(Debug, Default)]
pub struct Origin {
    /// The last id given (ids go round `1..=wire::MAX_ID`).
    last_id: u32,
    /// Operations in flight, oldest first.
    pub ops: Vec<Op>,
    /// Results of request-based operations done and not yet taken: (id, code).
    pub finished: Vec<(u32, c_int)>,
    /// Targets (window ranks) sent a `Put` or an accumulate since their last `Flush`/`Unlock`.
    pub dirty: Vec<u32>,
    /// The first error found (an MPI error class), reported by the next synchronisation.
    pub error: c_int,
    /// The id of the request-based operation the current call issued, until the call takes
    /// its request (`super::take_request`).
    pub request: Option<u32>,
    /// The request held back, if any ([`Tail`]).
    pub tail: Option<Tail>,
}

impl Origin {
    /// A fresh id.
    pub fn next_id(&mut self) -> u32 {
        self.last_id = if self.last_id >= wire::MAX_ID { 1 } else { self.last_id + 1 };
        self.last_id
    }

    /// Marks `target` as needing a `Flush` to complete what was sent to it.
    pub fn touch(&mut self, target: u32) {
        if !self.dirty.contains(&target) {
            self.dirty.push(target);
        }
    }

    /// Records failure `code` (the first one stays).
    pub fn fail(&mut self, code: c_int) {
        if self.error == abi::SUCCESS {
            self.error = code;
        }
    }

    /// Takes the error to report, if any.
    pub fn take_error(&mut self) -> c_int {
        std::mem::replace(&mut self.error, abi::SUCCESS)
    }

    /// True if nothing sent to `target` (or to any target: `None`) is in flight, locally
    /// (`local`) or at all.
    pub fn quiet(&self, target: Option<u32>, local: bool) -> bool {
        self.ops
            .iter()
            .filter(|o| target.is_none_or(|t| o.target == t))
            .all(|o| if local { o.local_done() } else { o.done() })
    }

    /// True if op `id` is complete (request-based operations: `local` for `MPI_Rput` and
    /// `MPI_Raccumulate`, whose requests complete locally).
    pub fn is_done(&self, id: u32) -> bool {
        self.finished.iter().any(|&(i, _)| i == id)
    }

    /// Takes the result of request-based op `id`, if complete.
    pub fn take(&mut self, id: u32) -> Option<c_int> {
        let k = self.finished.iter().position(|&(i, _)| i == id)?;
        Some(self.finished.swap_remove(k).1)
    }

    /// Advances every operation in flight with `ep`; the ones done leave (request-based ones
    /// leave their result in [`finished`](Self::finished)). True if any moved.
    pub fn poll(&mut self, ep: &mut nemesis::Endpoint) -> bool {
        let mut moved = false;
        let mut k = 0;
        while k < self.ops.len() {
            let o = &mut self.ops[k];
            if let Some((r, _)) = &o.send
                && let Some(res) = tested(ep, *r)
            {
                o.send = None;
                o.code = res.err().unwrap_or(o.code);
                moved = true;
            }
            if let Some((r, _, _)) = &o.reply
                && let Some(res) = tested(ep, *r)
                && let Some((_, buf, into)) = o.reply.take()
            {
                let code = match res {
                    Ok(len) => finish_reply(&buf[..len.min(buf.len())], into),
                    Err(code) => code,
                };
                if o.code == abi::SUCCESS {
                    o.code = code;
                }
                moved = true;
            }
            // A request-based put or accumulate completes locally; the others once done.
            let o = &self.ops[k];
            if o.wanted && o.reply.is_none() && o.send.is_none() {
                self.finished.push((o.id, o.code));
            }
            if o.done() {
                let o = self.ops.swap_remove(k);
                if o.code != abi::SUCCESS && !o.wanted {
                    self.fail(o.code);
                }
            } else {
                k += 1;
            }
        }
        moved
    }
}

/// The outcome of Endpoint request `r` if it completed: the bytes it moved, or an MPI error
/// class.
fn tested(ep: &mut nemesis::Endpoint, r: nemesis::Request) -> Option<Result<usize, c_int>> {
    match ep.test(r) {
        Ok(None) => None,
        Ok(Some(s)) => Some(Ok(s.len)),
        Err(e) => Some(Err(crate::error::code_of(&e))),
    }
}

/// Applies a reply: its status, and its data into the program's buffer. Returns the status
/// (an MPI error class).
fn finish_reply(msg: &[u8], into: Into) -> c_int {
    let Ok((code, data)) = wire::parse_reply(msg) else { return abi::ERR_INTERN };
    if code != abi::SUCCESS {
        return code;
    }
    match into {
        Into::Nothing => {}
        Into::Buffer(Layout::Contig { ptr, len }) => {
            let n = len.min(data.len());
            // SAFETY: MPI's contract: the result buffer holds `len` writable bytes until the
            // operation completes (now); `data` is our own reply buffer.
            unsafe { std::ptr::copy_nonoverlapping(data.as_ptr(), ptr, n) };
        }
        Into::Buffer(Layout::Typed { base, count, desc }) => {
            // SAFETY: MPI's contract: the result buffer's elements are writable until the
            // operation completes (now).
            unsafe { pack::unpack(&desc, base, count, data) };
        }
    }
    abi::SUCCESS
}

/// A request message for `h` with `spans` and `data`, the reply's id and flags as given.
pub fn message(kind: Kind, flags: u8, dt: i32, op: i32, id: u32, spans: &[Span], data: &[&[u8]]) -> Vec<u8> {
    let len: usize = data.iter().map(|d| d.len()).sum();
    let h = Header { kind, flags, dt, op, id, runs: spans.len() as u32, data: len as u64 };
    wire::request(&h, spans, data)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_go_round_and_errors_keep_the_first() {
        let mut o = Origin { last_id: wire::MAX_ID - 1, ..Origin::default() };
        assert_eq!((o.next_id(), o.next_id(), o.next_id()), (wire::MAX_ID, 1, 2));
        o.fail(abi::ERR_RMA_RANGE);
        o.fail(abi::ERR_TYPE);
        assert_eq!((o.take_error(), o.take_error()), (abi::ERR_RMA_RANGE, abi::SUCCESS));
        o.touch(3);
        o.touch(3);
        assert_eq!(o.dirty, [3]);
    }

    #[test]
    fn a_request_based_result_is_taken_once() {
        let mut o = Origin::default();
        o.ops.push(Op { id: 1, target: 2, send: None, reply: None, wanted: true, code: abi::SUCCESS });
        assert!(o.quiet(Some(2), false) && o.quiet(None, true));
        assert!(!o.is_done(1));
        o.finished.push((1, abi::SUCCESS));
        assert!(o.is_done(1));
        assert_eq!((o.take(1), o.take(1)), (Some(abi::SUCCESS), None));
    }

    #[test]
    fn a_reply_fills_the_result_buffer_or_reports_its_error() {
        let mut out = [0u8; 4];
        let into = Into::Buffer(Layout::Contig { ptr: out.as_mut_ptr(), len: 4 });
        assert_eq!(finish_reply(&wire::reply(abi::SUCCESS, &[1, 2, 3, 4]), into), abi::SUCCESS);
        assert_eq!(out, [1, 2, 3, 4]);
        let into = Into::Buffer(Layout::Contig { ptr: out.as_mut_ptr(), len: 4 });
        assert_eq!(finish_reply(&wire::reply(abi::ERR_RMA_RANGE, &[]), into), abi::ERR_RMA_RANGE);
        assert_eq!(out, [1, 2, 3, 4], "an error writes nothing");
        assert_eq!(finish_reply(&[0; 3], Into::Nothing), abi::ERR_INTERN);
    }
}
