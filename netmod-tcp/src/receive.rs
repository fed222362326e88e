//! Bytes read from a peer's connection and where they go ([`TcpNetmod::pump`], then
//! [`TcpNetmod::parse`]): a message's payload into cells of the process's netmod pool, enqueued
//! on its receive queue (so arrivals are cells already); a large message's DATA into the
//! receiver's buffer, without staging once the buffer of the connection is used up. While our
//! connect is being authenticated, the parser also reads the acceptor's CHALLENGE (and answers
//! PROOF) and its ACCEPT or REJECT.
//!
//! Invariants:
//! - A peer's bytes are never trusted: each frame is checked against what its type and the link's
//!   state allow before anything is read into a cell or a buffer; a violation ends the link
//!   (declares the peer dead), or before ACCEPT only closes the connection.
//! - With no free cell the socket is left alone (flow control); the rest is read at a later pass.
//! - On a link with MACs, a message's last byte is handed over, and a transfer completes, only
//!   once its frame's MAC verified.

use std::io::{self, Read};
use std::time::Instant;

use nemesis_lmt::{NetDone, Outcome};
use nemesis_shm::Result;
use nemesis_shm::auth::{FLAG_INTEGRITY, Step, Transcript};
use nemesis_shm::cell::{HEADER_BYTES, ft_room};
use nemesis_shm::netmod::{Arrival, Inbox, KIND_PEER_GONE};

use crate::TcpNetmod;
use crate::frame::{self, DATA_HEAD, Kind, PREFIX, TAG};
use crate::handshake::UNAUTHENTICATED;
use crate::peer::{Link, Rx};
use crate::socket::send_all;

/// What parsing stopped on.
pub(crate) enum Flow {
    /// It needs more bytes from the socket.
    More,
    /// It cannot go on now (no free cell, or the connection changed).
    Blocked,
}

impl<'n> TcpNetmod<'n> {
    /// Reads from `rank`'s connection and moves what arrived on. True if anything did.
    pub(crate) fn pump(&mut self, rank: u32, inbox: &mut dyn Inbox<'n>) -> Result<bool> {
        let mut moved = false;
        // A read that returned less than it asked for emptied the socket's receive queue (the
        // kernel's `tcp_recvmsg` stops short of the length only when no data is queued): what it
        // brought is used, and the next read waits for the next pass instead of costing a system
        // call that finds nothing (one `EAGAIN` after every arrival, on the path of every small
        // message and its reply; an end of stream is seen at the next pass).
        let mut drained = false;
        loop {
            match self.parse(rank, inbox) {
                Ok(Flow::More) if drained => return Ok(moved),
                Ok(Flow::More) => {}
                Ok(Flow::Blocked) => return Ok(moved),
                // Before ACCEPT nothing is authenticated: whatever it sent, no death for it.
                Err(why)
                    if why.starts_with(UNAUTHENTICATED)
                        || matches!(self.peers[rank as usize].link, Link::Connecting { .. }) =>
                {
                    self.unauthenticated(rank, &why);
                    return Ok(true);
                }
                Err(why) => {
                    self.died(rank, &why);
                    return Ok(true);
                }
            }
            let p = &mut self.peers[rank as usize];
            if p.buf.is_empty() {
                // Not connected yet (or no longer).
                return Ok(moved);
            }
            let Some(sock) = p.sock.as_mut() else { return Ok(moved) };
            // Large-message bytes go straight to the receiver's buffer once the staging buffer is
            // used up.
            let r = match p.rx {
                Rx::Data { k, left } if p.start == p.end && left > 0 => {
                    let d = &p.recvs[k];
                    // SAFETY: `d.dst` holds `d.bytes` bytes (start_recv's contract) and
                    // `got + left <= bytes` (checked when the frame began).
                    let dst = unsafe { std::slice::from_raw_parts_mut(d.dst.add(d.got as usize), left) };
                    match sock.read(dst) {
                        Ok(n) if n > 0 => {
                            if let Some(m) = p.mac.as_mut() {
                                m.update(&dst[..n]);
                            }
                            p.rx_bytes += n as u64;
                            let d = &mut p.recvs[k];
                            d.got += n as u64;
                            p.rx = Rx::Data { k, left: left - n };
                            moved = true;
                            drained = n < left;
                            continue;
                        }
                        other => other,
                    }
                }
                _ => {
                    if p.start > 0 {
                        p.buf.copy_within(p.start..p.end, 0);
                        p.end -= p.start;
                        p.start = 0;
                    }
                    let end = p.end;
                    match sock.read(&mut p.buf[end..]) {
                        Ok(n) if n > 0 => {
                            drained = n < p.buf.len() - end;
                            p.end += n;
                            p.rx_bytes += n as u64;
                            moved = true;
                            continue;
                        }
                        other => other,
                    }
                }
            };
            match r {
                Ok(_) => {
                    // End of stream.
                    let p = &mut self.peers[rank as usize];
                    if p.link == Link::Bye {
                        p.sock = None;
                        self.relist = true;
                    } else {
                        self.died(rank, "connection closed without BYE");
                    }
                    return Ok(true);
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Ok(moved),
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => {
                    self.died(rank, &format!("read: {e}"));
                    return Ok(true);
                }
            }
        }
    }

    /// Uses the bytes buffered from `rank`. `Err` is a protocol violation (the peer is broken).
    pub(crate) fn parse(&mut self, rank: u32, inbox: &mut dyn Inbox<'n>) -> std::result::Result<Flow, String> {
        loop {
            let me = self.me;
            let max = self.cfg.max_message;
            let p = &mut self.peers[rank as usize];
            let avail = p.end - p.start;
            match &mut p.rx {
                Rx::Frame => {
                    if avail < PREFIX {
                        return Ok(Flow::More);
                    }
                    let pre: [u8; PREFIX] = p.buf[p.start..p.start + PREFIX].try_into().map_err(|_| "prefix")?;
                    let parsed = frame::parse_prefix(&pre);
                    if let Link::Connecting { since, hello: true, proved: false } = p.link {
                        // Our connection, not authenticated yet: only the peer's CHALLENGE (its
                        // nonce, incarnation and options), which we answer with our proof first.
                        let Ok((Kind::Challenge, _)) = parsed else {
                            return Err(format!("{UNAUTHENTICATED}{parsed:?} before CHALLENGE"));
                        };
                        if avail < PREFIX + frame::CHALLENGE {
                            return Ok(Flow::More);
                        }
                        let at = p.start + PREFIX;
                        let body: &[u8; frame::CHALLENGE] =
                            p.buf[at..at + frame::CHALLENGE].try_into().map_err(|_| "challenge")?;
                        let (na, inc, flags) = frame::parse_challenge(body);
                        if inc < p.inc {
                            return Err(format!(
                                "{UNAUTHENTICATED}incarnation {inc} answered, {} or later expected",
                                p.inc
                            ));
                        }
                        let Some((dialed, _)) = p.card else { return Err(format!("{UNAUTHENTICATED}no card")) };
                        let t = Transcript {
                            from: me,
                            from_inc: self.incarnation,
                            from_flags: if self.cfg.integrity { FLAG_INTEGRITY } else { 0 },
                            nc: p.nonce,
                            to: rank,
                            to_inc: inc,
                            to_flags: flags,
                            na,
                            dialed: dialed.to_string(),
                        };
                        p.start += PREFIX + frame::CHALLENGE;
                        let ours = t.proof(&self.secret, Step::Connect);
                        p.hs = Some(t);
                        let sent = p.sock.as_ref().map(|s| send_all(s, &frame::frame(Kind::Proof, &ours)));
                        if let Some(Err(e)) = sent {
                            return Err(format!("{UNAUTHENTICATED}PROOF: {e}"));
                        }
                        p.link = Link::Connecting { since, hello: true, proved: true };
                        continue;
                    }
                    let (kind, len) = parsed?;
                    match kind {
                        Kind::Challenge | Kind::Proof => return Err(format!("{kind:?} outside a handshake")),
                        Kind::Accept | Kind::Reject => {
                            let Link::Connecting { proved: true, .. } = p.link else {
                                return Err(format!("{kind:?} outside a connection attempt"));
                            };
                            if avail < PREFIX + frame::PROOF {
                                return Ok(Flow::More);
                            }
                            // The accepting side's proof, over the handshake we proved.
                            let step = if kind == Kind::Accept { Step::Accept } else { Step::Reject };
                            let theirs = &p.buf[p.start + PREFIX..p.start + PREFIX + frame::PROOF];
                            let Some(t) = p.hs.take().filter(|t| t.check(&self.secret, step, theirs)) else {
                                return Err(format!("{UNAUTHENTICATED}{kind:?} without the job's secret"));
                            };
                            p.start += PREFIX + frame::PROOF;
                            if kind == Kind::Accept {
                                if t.integrity() {
                                    let (up, down) = t.stream_keys(&self.secret);
                                    (p.tx_key, p.rx_key) = (Some(up), Some(down));
                                }
                                p.inc = t.to_inc;
                                p.link = Link::Up;
                                self.log_restarted_link(rank);
                            } else {
                                p.link = Link::Waiting { since: Instant::now() };
                                p.sock = None;
                                self.relist = true;
                                return Ok(Flow::Blocked);
                            }
                        }
                        Kind::Bye => {
                            if p.link != Link::Up {
                                return Err("BYE outside a connection".into());
                            }
                            if let Some(k) = &p.rx_key {
                                if avail < PREFIX + TAG {
                                    return Ok(Flow::More);
                                }
                                let mut m = k.begin(p.rx_seq);
                                m.update(&p.buf[p.start..p.start + PREFIX]);
                                if !m.verify(&p.buf[p.start + PREFIX..p.start + PREFIX + TAG]) {
                                    return Err(format!("BYE (frame {}) fails its MAC", p.rx_seq));
                                }
                                p.rx_seq += 1;
                                p.start += TAG;
                            }
                            p.start += PREFIX;
                            p.link = Link::Bye;
                            self.hb.unwatch(rank);
                        }
                        Kind::Hello => return Err("HELLO on an open connection".into()),
                        Kind::Msg => {
                            if p.link != Link::Up {
                                return Err("message before ACCEPT".into());
                            }
                            if avail < PREFIX + HEADER_BYTES {
                                return Ok(Flow::More);
                            }
                            let at = p.start + PREFIX;
                            let hdr = frame::parse_header(&p.buf[at..at + HEADER_BYTES]);
                            let room = ft_room(hdr.flags);
                            if len < HEADER_BYTES + room {
                                return Err(format!("message frame of {len} bytes"));
                            }
                            let payload = len - HEADER_BYTES - room;
                            if hdr.src != rank || hdr.dst != me || hdr.len as usize != payload || payload > max {
                                return Err(format!(
                                    "message header (src {}, dst {}, len {}) in a frame of {payload} payload bytes from rank {rank}",
                                    hdr.src, hdr.dst, hdr.len
                                ));
                            }
                            if hdr.kind == KIND_PEER_GONE {
                                return Err("reserved message kind".into());
                            }
                            if avail < PREFIX + HEADER_BYTES + room {
                                return Ok(Flow::More);
                            }
                            let ft = &p.buf[at + HEADER_BYTES..at + HEADER_BYTES + room];
                            if let Some(k) = &p.rx_key {
                                let mut m = k.begin(p.rx_seq);
                                m.update(&p.buf[p.start..at + HEADER_BYTES + room]);
                                p.mac = Some(m);
                                p.rx_seq += 1;
                            }
                            p.rx = Rx::Msg(Arrival::new(&hdr, ft, inbox));
                            p.start = at + HEADER_BYTES + room;
                        }
                        Kind::Data => {
                            if p.link != Link::Up {
                                return Err("data before ACCEPT".into());
                            }
                            if avail < PREFIX + DATA_HEAD {
                                return Ok(Flow::More);
                            }
                            let at = p.start + PREFIX;
                            let (id, offset) = frame::parse_data_head(&p.buf[at..at + DATA_HEAD]);
                            let n = len - DATA_HEAD;
                            let Some(k) = p.recvs.iter().position(|d| d.id == id) else {
                                return Err(format!("data for transfer {id}, which is not expected"));
                            };
                            let d = &p.recvs[k];
                            if offset != d.got || d.got + n as u64 > d.bytes {
                                return Err(format!(
                                    "data of transfer {id} at {offset} (+{n}), expected {} of {}",
                                    d.got, d.bytes
                                ));
                            }
                            if let Some(key) = &p.rx_key {
                                let mut m = key.begin(p.rx_seq);
                                m.update(&p.buf[p.start..at + DATA_HEAD]);
                                p.mac = Some(m);
                                p.rx_seq += 1;
                            }
                            p.start = at + DATA_HEAD;
                            p.rx = Rx::Data { k, left: n };
                        }
                    }
                }
                Rx::Msg(a) if p.rx_key.is_some() => {
                    // With MACs, the message's last byte (or, empty, the message) is handed over
                    // only once the frame's MAC verified: until then its last cell is held.
                    let left = a.left();
                    if let Some(m) = p.mac.as_mut() {
                        if left > 1 {
                            let n = avail.min(left - 1);
                            if n == 0 {
                                return Ok(Flow::More);
                            }
                            let used = a.feed(&p.buf[p.start..p.start + n], &mut self.spare, inbox)?;
                            m.update(&p.buf[p.start..p.start + used]);
                            p.start += used;
                            if used < n {
                                return Ok(Flow::Blocked);
                            }
                            continue;
                        }
                        if avail < left + TAG {
                            return Ok(Flow::More);
                        }
                        m.update(&p.buf[p.start..p.start + left]);
                        let tag = &p.buf[p.start + left..p.start + left + TAG];
                        if !p.mac.take().is_some_and(|m| m.verify(tag)) {
                            return Err(format!("message frame {} fails its MAC", p.rx_seq - 1));
                        }
                    }
                    // Verified: the rest, then past the tag.
                    let used = a.feed(&p.buf[p.start..p.start + left], &mut self.spare, inbox)?;
                    p.start += used;
                    if !a.is_whole() {
                        return Ok(Flow::Blocked);
                    }
                    p.start += TAG;
                    p.rx = Rx::Frame;
                }
                Rx::Msg(a) => {
                    let used = a.feed(&p.buf[p.start..p.end], &mut self.spare, inbox)?;
                    p.start += used;
                    if a.is_whole() {
                        p.rx = Rx::Frame;
                    } else if used < avail {
                        // No free cell.
                        return Ok(Flow::Blocked);
                    } else {
                        return Ok(Flow::More);
                    }
                }
                Rx::Data { k, left } => {
                    let (k, left) = (*k, *left);
                    if left > 0 {
                        if avail == 0 {
                            return Ok(Flow::More);
                        }
                        let n = left.min(avail);
                        if let Some(m) = p.mac.as_mut() {
                            m.update(&p.buf[p.start..p.start + n]);
                        }
                        let d = &mut p.recvs[k];
                        // SAFETY: `d.dst` holds `d.bytes` bytes and `got + n <= bytes` (checked
                        // when the frame began).
                        unsafe {
                            nemesis_shm::cell::copy_bytes(p.buf.as_ptr().add(p.start), d.dst.add(d.got as usize), n)
                        };
                        d.got += n as u64;
                        p.start += n;
                        p.rx = Rx::Data { k, left: left - n };
                        continue;
                    }
                    if p.rx_key.is_some() {
                        // The frame's MAC before its bytes count.
                        if avail < TAG {
                            return Ok(Flow::More);
                        }
                        let tag = &p.buf[p.start..p.start + TAG];
                        if !p.mac.take().is_some_and(|m| m.verify(tag)) {
                            return Err(format!("data frame {} fails its MAC", p.rx_seq - 1));
                        }
                        p.start += TAG;
                    }
                    p.rx = Rx::Frame;
                    if p.recvs[k].got == p.recvs[k].bytes {
                        let d = p.recvs.swap_remove(k);
                        let outcome = Outcome::Moved { bytes: d.bytes };
                        self.done.push(NetDone { peer: rank, id: d.id, send: false, outcome });
                    }
                }
            }
        }
    }
}
