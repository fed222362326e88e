//! The process-wide state in the MPI state image (`super`), beside the object tables: the
//! program's error classes, codes and strings (`MPI_Add_error_class`...) with
//! `MPI_LASTUSEDCODE`, the attached buffers of buffered sends (the process's, communicators' and
//! sessions'), the sessions (their error handler, thread level and info; which groups came from
//! their process sets), and the hints of communicators (`MPI_Comm_set_info`).
//!
//! **Error codes keep their values.** A class or code is the next number after the last one
//! made (`crate::errh::FIRST_USER_CODE`): the list is saved whole, in order, so the restarted
//! process hands out the same next code as the survivors (MPI wants codes made collectively in
//! the same order to agree).
//!
//! **A buffer is the application's word.** An attached buffer's address and size are saved as
//! they are, like a persistent request's buffer: the application puts its buffer back at that
//! address. No message is in flight from one at a checkpoint (`MPIX_Checkpoint` reclaims the
//! completed ones and refuses while one has not left: `MPI_ERR_PENDING`), so only the attachment
//! is saved.
//!
//! **Hints follow their communicator's slot.** They live in a side table keyed by the
//! communicator's `nbc` counter (`crate::comm::info`), which a restore makes afresh: they are
//! saved by communicator index and set again once the communicators are back.
//!
//! **Invariants.** [`Process::apply`] runs after the groups and communicators are restored and
//! needs only that: it cannot fail.

use std::ffi::c_int;
use std::sync::Arc;

use super::{Saved, get_table, put_table};
use crate::ft::wire::{Bad, Reader, Writer};
use crate::info::InfoObj;
use crate::p2p::bsend::{Attachment, Which};
use crate::session::Session;
use crate::state::State;

fn put_info(w: &mut Writer, info: &InfoObj) {
    w.len(info.len());
    for (k, v) in info {
        w.str(k);
        w.str(v);
    }
}

fn get_info(r: &mut Reader) -> Result<InfoObj, Bad> {
    let n = r.len(16)?;
    (0..n).map(|_| Ok((r.string()?, r.string()?))).collect()
}

/// The process-wide state read back, not yet applied.
pub struct Process {
    codes: crate::errh::UserCodes,
    last_code: c_int,
    buffers: Vec<Attachment>,
    sessions: Saved<Session>,
    /// `(group handle, session)` of the groups made from a session's process set.
    pset_groups: Vec<(c_int, c_int)>,
    /// `(communicator index, hints)`.
    hints: Vec<(usize, InfoObj)>,
}

/// Saves `st`'s process-wide state (module documentation).
pub fn put(w: &mut Writer, st: &State) {
    w.len(st.user_codes.len());
    for (code, class, s) in &st.user_codes {
        w.i32(*code);
        w.i32(*class);
        w.str(s);
    }
    w.i32(st.attr_values[crate::attr::LASTUSEDCODE_INDEX]);
    let buffers = st.bsend.attachments();
    w.len(buffers.len());
    for (which, base, size, automatic) in buffers {
        let (k, v) = match which {
            Which::Process => (0, 0),
            Which::Comm(ci) => (1, ci as i64),
            Which::Session(s) => (2, i64::from(s)),
        };
        w.u8(k);
        w.i64(v);
        w.u64(base as u64);
        w.len(size);
        w.bool(automatic);
    }
    put_table(w, &st.sessions.table, |w, s| {
        w.i32(s.errh);
        w.i32(s.level);
        put_info(w, &s.info);
    });
    let pset: Vec<(c_int, c_int)> = st
        .sessions
        .pset_groups
        .iter()
        .filter_map(|(m, s)| {
            let m = m.upgrade()?;
            st.groups.iter().find(|(_, g)| Arc::ptr_eq(g, &m)).map(|(h, _)| (h, *s))
        })
        .collect();
    w.len(pset.len());
    for (g, s) in pset {
        w.i32(g);
        w.i32(s);
    }
    let hints: Vec<(usize, &InfoObj)> = st
        .comms
        .iter()
        .enumerate()
        .filter(|(_, c)| c.live)
        .filter_map(|(i, c)| Some((i, crate::comm::info::hints_of(st, c)?)))
        .collect();
    w.len(hints.len());
    for (i, h) in hints {
        w.len(i);
        put_info(w, h);
    }
}

/// Reads what [`put`] saved.
pub fn get(r: &mut Reader) -> Result<Process, Bad> {
    let n = r.len(12)?;
    let codes = (0..n).map(|_| Ok((r.i32()?, r.i32()?, r.string()?))).collect::<Result<_, Bad>>()?;
    let last_code = r.i32()?;
    let n = r.len(26)?;
    let buffers = (0..n)
        .map(|_| {
            let which = match (r.u8()?, r.i64()?) {
                (0, _) => Which::Process,
                (1, ci) => Which::Comm(ci as usize),
                (2, s) => Which::Session(s as c_int),
                (k, _) => return Err(format!("attached buffer kind {k}")),
            };
            Ok((which, r.u64()? as usize, r.u64()? as usize, r.bool()?))
        })
        .collect::<Result<_, Bad>>()?;
    let sessions = get_table(r, |r| Ok(Session { errh: r.i32()?, level: r.i32()?, info: get_info(r)? }))?;
    let n = r.len(8)?;
    let pset_groups = (0..n).map(|_| Ok((r.i32()?, r.i32()?))).collect::<Result<_, Bad>>()?;
    let n = r.len(16)?;
    let hints = (0..n).map(|_| Ok((r.u64()? as usize, get_info(r)?))).collect::<Result<_, Bad>>()?;
    Ok(Process { codes, last_code, buffers, sessions, pset_groups, hints })
}

/// True if `st` holds none of the process-wide state [`put`] saves (a fresh process).
pub fn fresh(st: &State) -> bool {
    st.user_codes.is_empty()
        && st.bsend.is_empty()
        && st.sessions.table.is_empty()
        && st.sessions.pset_groups.iter().all(|(m, _)| m.strong_count() == 0)
}

impl Process {
    /// Why this cannot be restored into a state whose communicator slots `live_comm` tells,
    /// if it cannot.
    pub fn check(&self, live_comm: impl Fn(usize) -> bool) -> Result<(), String> {
        let dead = |ci: usize| (!live_comm(ci)).then(|| format!("communicator slot {ci}, not restored"));
        let bad = self.buffers.iter().find_map(|(w, ..)| if let Which::Comm(ci) = w { dead(*ci) } else { None });
        let bad = bad.or_else(|| self.hints.iter().find_map(|(ci, _)| dead(*ci)));
        bad.map_or(Ok(()), |e| Err(format!("an attached buffer or hints of {e}")))
    }

    /// Puts the sessions' table back (before the communicators, which name sessions).
    pub fn apply_sessions(&mut self, st: &mut State) -> Result<(), String> {
        let ((slots, permanent, free), objects) = std::mem::take(&mut self.sessions);
        st.sessions.table.restore((slots, permanent, &free), objects)
    }

    /// Puts the rest back, once the groups and communicators are (module documentation).
    pub fn apply(self, st: &mut State) {
        st.user_codes = self.codes;
        st.attr_values[crate::attr::LASTUSEDCODE_INDEX] = self.last_code;
        st.bsend.restore(self.buffers);
        for (g, s) in self.pset_groups {
            if let Some(m) = st.groups.get(g) {
                let m = Arc::downgrade(m);
                st.sessions.pset_groups.push((m, s));
            }
        }
        for (ci, h) in self.hints {
            let c = Arc::clone(&st.comms[ci]);
            crate::comm::info::set_hints(st, &c, h, true);
        }
    }
}
