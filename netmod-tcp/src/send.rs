//! Frames written to a peer: a whole frame at once when nothing is queued for it
//! ([`TcpNetmod::send_frame`]), else queued (copied) behind what is, and the queue written as the
//! socket takes it ([`TcpNetmod::flush`]); a large message's DATA frames are written from the
//! sender's buffer.
//!
//! Invariants:
//! - Per peer, frames go in the order they were sent; a frame is numbered and tagged (on a link
//!   with MACs) when it is the next to go.
//! - Nothing is written on a link that is not up; what is queued waits for it.
//! - A large message's send is reported only once its last frame (and tag) was written.

use std::io::{self, IoSlice};

use nemesis_lmt::{NetDone, Outcome};
use nemesis_shm::Result;

use crate::TcpNetmod;
use crate::frame::TAG;
use crate::peer::{Link, Out, Tag};
use crate::socket::send_nosignal;

/// Where a write of a frame of `total` bytes, `at` of them written, stops: the frame's end, but
/// with the cargo feature `failpoints` and a point armed in this process, a frame of at least 4
/// KiB is written in two halves, with a failpoint between them (`tcp-send-mid-<rank>` for a
/// message, `tcp-data-mid-<rank>` for the data of a large message, naming the receiver): a sender
/// can be made to die with half a frame on the wire, as a crash in the middle of a large write
/// would leave it. Tests only.
#[inline(always)]
fn failpoint_stop(at: usize, total: usize) -> usize {
    #[cfg(feature = "failpoints")]
    if total >= 4096 && at < total / 2 && nemesis_shm::failpoint::armed() {
        return total / 2;
    }
    let _ = at;
    total
}

impl TcpNetmod<'_> {
    /// Writes what is queued for `rank`. True if anything was written.
    pub(crate) fn flush(&mut self, rank: u32) -> bool {
        let mut moved = false;
        loop {
            let p = &mut self.peers[rank as usize];
            if p.link != Link::Up {
                return moved;
            }
            let Some(sock) = p.sock.as_mut() else { return moved };
            let Some(front) = p.out.front_mut() else { return moved };
            let r = match front {
                Out::Bytes { buf, at, tag } => {
                    if !tag.sealed {
                        // At the front of the queue: this frame is the next to go, numbered now.
                        if let Some(k) = &p.tx_key {
                            *tag = Tag { bytes: k.tag(p.tx_seq, &[buf]), len: TAG, sealed: true };
                            p.tx_seq += 1;
                        }
                        tag.sealed = true;
                    }
                    let n = buf.len();
                    let r = if *at < n {
                        send_nosignal(sock, &[IoSlice::new(&buf[*at..]), IoSlice::new(&tag.bytes[..tag.len])])
                    } else {
                        send_nosignal(sock, &[IoSlice::new(&tag.bytes[*at - n..tag.len])])
                    };
                    r.map(|w| {
                        *at += w;
                        *at == n + tag.len
                    })
                }
                Out::Data { head, ptr, len, at, tag, .. } => {
                    let h = head.len();
                    // SAFETY: the sender's buffer holds `len` bytes here until the transfer is
                    // reported (start_send's contract).
                    let data = unsafe { std::slice::from_raw_parts(*ptr, *len) };
                    if !tag.sealed {
                        if let Some(k) = &p.tx_key {
                            *tag = Tag { bytes: k.tag(p.tx_seq, &[head, data]), len: TAG, sealed: true };
                            p.tx_seq += 1;
                        }
                        tag.sealed = true;
                    }
                    let body = h + *len;
                    let stop = failpoint_stop(*at, body);
                    let stop = if stop < body { stop } else { body + tag.len };
                    let t = &tag.bytes[..tag.len];
                    let r = if *at < h {
                        let d = &data[..stop.min(body) - h];
                        let t = if stop > body { t } else { &[][..] };
                        send_nosignal(sock, &[IoSlice::new(&head[*at..]), IoSlice::new(d), IoSlice::new(t)])
                    } else if *at < body {
                        let t = if stop > body { t } else { &[][..] };
                        send_nosignal(sock, &[IoSlice::new(&data[*at - h..stop.min(body) - h]), IoSlice::new(t)])
                    } else {
                        send_nosignal(sock, &[IoSlice::new(&t[*at - body..])])
                    };
                    r.map(|n| {
                        *at += n;
                        if *at == stop && stop < body {
                            nemesis_shm::failpoint!("tcp-data-mid-{}", rank);
                        }
                        *at == body + tag.len
                    })
                }
            };
            match r {
                Ok(true) => {
                    moved = true;
                    if let Some(Out::Data { id, end: Some(total), .. }) = p.out.pop_front() {
                        let outcome = Outcome::Moved { bytes: total };
                        self.done.push(NetDone { peer: rank, id, send: true, outcome });
                    }
                }
                Ok(false) => moved = true,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return moved,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => {
                    self.died(rank, &format!("write: {e}"));
                    return true;
                }
            }
        }
    }

    /// Queues a whole frame (`head` then `body`) for `rank`, or writes it at once if nothing is
    /// queued (with its MAC, on a link with them).
    pub(crate) fn send_frame(&mut self, rank: u32, head: &[u8], body: &[u8]) -> Result<()> {
        let p = &mut self.peers[rank as usize];
        let total = head.len() + body.len();
        let mut written = 0;
        let mut tag = Tag::NONE;
        if p.link == Link::Up
            && p.out.is_empty()
            && let Some(sock) = p.sock.as_mut()
        {
            if let Some(k) = &p.tx_key {
                tag = Tag { bytes: k.tag(p.tx_seq, &[head, body]), len: TAG, sealed: true };
                p.tx_seq += 1;
            }
            tag.sealed = true;
            let stop = failpoint_stop(0, total);
            let body_part = &body[..(stop - head.len()).min(body.len())];
            let t = if stop == total { &tag.bytes[..tag.len] } else { &[][..] };
            match send_nosignal(sock, &[IoSlice::new(head), IoSlice::new(body_part), IoSlice::new(t)]) {
                Ok(n) => written = n,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock || e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(self.died(rank, &format!("write: {e}"))),
            }
            if written == stop && stop < total {
                nemesis_shm::failpoint!("tcp-send-mid-{}", rank);
            }
        }
        if written < total + tag.len {
            // What is left of the frame, then of its tag (whose bytes are kept in `tag`).
            let mut buf = Vec::with_capacity(total);
            let mut skip = written.min(total);
            for b in [head, body] {
                if skip >= b.len() {
                    skip -= b.len();
                    continue;
                }
                buf.extend_from_slice(&b[skip..]);
                skip = 0;
            }
            let mut t = tag;
            if written > total {
                // Part of the tag went: the rest only.
                let w = written - total;
                t.bytes.copy_within(w..t.len, 0);
                t.len -= w;
            }
            self.peers[rank as usize].out.push_back(Out::Bytes { buf, at: 0, tag: t });
        }
        Ok(())
    }
}
