//! Matched probes (MPI-3.1 §3.8.2): `MPI_Mprobe` and `MPI_Improbe` reserve the message they find
//! (the Endpoint's `Message`: no other receive can take it, which a probe followed by a receive
//! cannot promise between threads), `MPI_Mrecv` and `MPI_Imrecv` receive it.
//!
//! An `MPI_Message` is `MESSAGE_BASE + index` in the state's table of reserved messages (MPICH's
//! "indirect request" kind, so never a request handle); `MPI_MESSAGE_NO_PROC` stands for a probe
//! of `MPI_PROC_NULL`, whose receive completes at once.

use std::ffi::{c_int, c_void};

use super::{comm_at, completion_in, null_arg, put_completion, put_status, source_of};
use crate::abi::{self, Datatype, Status};
use crate::datatype::Layout;
use crate::error::{Fail, Res, Why};
use crate::handle::Table;
use crate::request::{Completion, Req, State as ReqState};
use crate::state::{Access, State, not_running};

/// Base of `MPI_Message` handles: MPICH's indirect request kind.
pub const MESSAGE_BASE: u32 = 0xc000_0000 | abi::handle::REQUEST;

/// A message reserved by a matched probe.
#[derive(Debug)]
pub struct Reserved {
    msg: nemesis::Message,
    /// Index of the communicator it was probed in.
    pub ci: usize,
}

/// The table behind `MPI_Message` handles.
pub type Messages = Table<Reserved>;

/// An empty table.
pub const fn table() -> Messages {
    Table::new(MESSAGE_BASE)
}

/// `MPI_Mprobe` (`flag` null) and `MPI_Improbe`.
///
/// # Safety
/// `flag` null or writable, `message` writable; `status` as for [`put_status`].
pub unsafe fn mprobe(
    acc: &mut Access,
    source: c_int,
    tag: c_int,
    comm: abi::Comm,
    flag: *mut c_int,
    message: *mut abi::Message,
    status: *mut Status,
) -> Res<()> {
    let st = acc.st();
    if st.ep.is_none() {
        return Err(not_running(st.phase));
    }
    let (ci, c) = comm_at(&st.comms, comm)?;
    let blocking = flag.is_null();
    if message.is_null() {
        return Err(null_arg(Some(ci), "null message pointer"));
    }
    if tag < 0 && tag != abi::ANY_TAG {
        return Err(Fail::new(abi::ERR_TAG, Some(ci), Why::Tag(tag)));
    }
    let Some(from) = source_of(c, ci, source)? else {
        // SAFETY: MPI's contract.
        unsafe {
            *message = abi::MESSAGE_NO_PROC;
            if !blocking {
                *flag = 1;
            }
            put_status(status, abi::PROC_NULL, abi::ANY_TAG, 0);
        }
        return Ok(());
    };
    let ctx = c.ctx;
    let found = if blocking && acc.may_block() {
        Some(acc.ep()?.mprobe(from, tag, ctx).map_err(|e| Fail::endpoint(ci, e))?)
    } else {
        let mut spins = 0;
        loop {
            let f = acc.ep()?.improbe(from, tag, ctx).map_err(|e| Fail::endpoint(ci, e))?;
            if f.is_some() || !blocking {
                break f;
            }
            acc.pause(&mut spins);
        }
    };
    let st = acc.st();
    let Some((msg, s)) = found else {
        // SAFETY: not blocking: `flag` is non-null.
        unsafe { *flag = 0 };
        return Ok(());
    };
    let h = st
        .messages
        .insert(Reserved { msg, ci })
        .ok_or_else(|| Fail::new(abi::ERR_INTERN, Some(ci), Why::Arg("too many matched messages")))?;
    let src = st.comms.get(ci).map_or(-1, |c| c.rank_of_world(s.source));
    // SAFETY: MPI's contract.
    unsafe {
        *message = h;
        if !blocking {
            *flag = 1;
        }
        put_status(status, src, s.tag, s.len as i64);
    }
    Ok(())
}

/// `MPI_Mrecv` (`request` null) and `MPI_Imrecv`: receives the reserved message; the handle
/// becomes `MPI_MESSAGE_NULL`.
///
/// # Safety
/// MPI's contract on the buffer; `message` readable and writable; `request` null or writable;
/// `status` as for [`put_completion`].
#[allow(clippy::too_many_arguments)]
pub unsafe fn mrecv(
    acc: &mut Access,
    buf: *mut c_void,
    count: impl Into<abi::Count>,
    dt: Datatype,
    message: *mut abi::Message,
    status: *mut Status,
    request: *mut abi::Request,
) -> Res<()> {
    let st = acc.st();
    if st.ep.is_none() {
        return Err(not_running(st.phase));
    }
    if message.is_null() {
        return Err(null_arg(None, "null message pointer"));
    }
    // SAFETY: checked non-null; MPI's contract.
    let h = unsafe { *message };
    let blocking = request.is_null();
    if h == abi::MESSAGE_NO_PROC {
        // SAFETY: MPI's contract.
        unsafe {
            *message = abi::MESSAGE_NULL;
            if blocking {
                put_status(status, abi::PROC_NULL, abi::ANY_TAG, 0);
            }
        }
        if !blocking {
            let h = st.reqs.insert(Req::new(0, ReqState::Done(Completion::proc_null()), true));
            let h = h.ok_or_else(|| Fail::new(abi::ERR_INTERN, None, Why::Arg("too many active requests")))?;
            // SAFETY: checked non-null.
            unsafe { *request = h };
        }
        return Ok(());
    }
    let Some(Reserved { msg, ci }) = st.messages.remove(h) else {
        return Err(Fail::new(abi::ERR_REQUEST, None, Why::Arg("not a matched message (MPI_Mprobe)")));
    };
    // SAFETY: MPI's contract.
    unsafe { *message = abi::MESSAGE_NULL };
    let data = super::layout_of(&st.types, buf.cast_const().cast(), count.into(), dt, ci)?;
    let ep = acc.ep()?;
    let (r, typed) = match &data {
        // SAFETY: MPI's contract on the user's buffer.
        Layout::Contig { ptr, len } => (unsafe { ep.imrecv_raw(msg, *ptr, *len) }, None),
        Layout::Typed { base, count, desc } => {
            let (typed, p) = super::start::pieces_of(*base, *count, desc);
            // SAFETY: the pieces live until the receive completes (in the request, or here for
            // a blocking receive); their memory is the user's buffer (MPI's contract).
            (unsafe { ep.imrecv_pieces(msg, p) }, Some(typed))
        }
    };
    let r = r.map_err(|e| Fail::endpoint(ci, e))?;
    if !blocking {
        let req = Req { typed, ..Req::new(ci, ReqState::Pending(r), true) };
        let h = acc.st().reqs.insert(req);
        let h = h.ok_or_else(|| Fail::new(abi::ERR_INTERN, Some(ci), Why::Arg("too many active requests")))?;
        // SAFETY: checked non-null.
        unsafe { *request = h };
        return Ok(());
    }
    let res = acc.ep_wait(r)?;
    let st = acc.st();
    let done = completion_in(st, ci, res);
    drop(typed);
    // SAFETY: MPI's contract on `status`.
    unsafe { put_completion(status, &done) };
    if done.code != abi::SUCCESS {
        return Err(Fail { code: done.code, comm: Some(ci), why: done.why.unwrap_or(Why::Arg("receive failed")) });
    }
    Ok(())
}

/// `MPI_Improbe`.
///
/// # Safety
/// As for [`mprobe`], `flag` writable.
pub unsafe fn improbe(
    acc: &mut Access,
    source: c_int,
    tag: c_int,
    comm: abi::Comm,
    flag: *mut c_int,
    message: *mut abi::Message,
    status: *mut Status,
) -> Res<()> {
    if flag.is_null() {
        return Err(null_arg(None, "null flag pointer"));
    }
    // SAFETY: the caller's contract.
    unsafe { mprobe(acc, source, tag, comm, flag, message, status) }
}

/// Drops the reserved messages at `MPI_Finalize` (their data goes with the Endpoint).
pub fn clear(st: &mut State) {
    st.messages.clear();
}
