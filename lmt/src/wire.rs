//! The rendezvous messages (RTS, CTS, DONE, COOKIE, HELP, HELPED) and their versioned wire
//! encoding. They travel as payloads of eager messages; decoding bytes from another process is
//! checked, never trusted.
//!
//! Layout (little-endian): `[version u8][type u8][backend u8][pad u8][id u32]` then per type:
//! - RTS: `len u64, addr u64, pid u32, key u64` (the message's length; the sender's buffer and
//!   process, for a single-copy read; for a network read, the buffer's remote address and the key
//!   of its registration);
//! - CTS: `bytes u64, epoch u32, ring u16` (ring of the receiver's pool, and how many bytes it
//!   takes: fewer than `len` when the receive buffer is shorter);
//! - DONE: `bytes u64` (the receiver read that many bytes itself: the sender's buffer is free);
//! - COOKIE: `offset u64, bytes u64, epoch u32, ring u16` (mid-transfer: continue from `offset`
//!   through this ring, e.g. after a single-copy read was refused);
//! - HELP: `offset u64, bytes u64, dst u64, pid u32` (receiver → sender of a single-copy transfer:
//!   write bytes `offset..offset + bytes` of your buffer to `dst` in process `pid`, while the
//!   receiver reads the part before `offset`: both cores copy);
//! - HELPED: `bytes u64` (sender → receiver: that many bytes of the HELP range are written, from
//!   its start; fewer than asked when the sender could not write, and the receiver reads the rest).
//!
//! An RTS longer than [`LEN_MAX`], or a single-copy RTS whose buffer ends past it, does not decode
//! ([`Error::TooLong`], [`Error::Wire`]); a receiver may set a lower limit (`Config::max_len`).
//!
//! Messages other than RTS to one peer may travel several to a payload, back to back
//! ([`Control::decode_all`]); each type's encoding has a fixed length ([`Control::encoded_len`]).

use crate::error::{Error, Result};

/// Version of the encoding below.
pub const VERSION: u8 = 1;

/// Largest encoded message.
pub const MAX_ENCODED: usize = 40;

/// End of the addresses a process may hold, and so the longest message an RTS may announce: a
/// 64-bit Linux gives user space at most 2^56 bytes (x86-64 with 5-level paging, RISC-V Sv57;
/// arm64 and 4-level x86-64 give less), a 32-bit one 2^32. A longer RTS, or a single-copy RTS
/// whose buffer ends past it, does not decode.
pub const LEN_MAX: u64 = if usize::BITS >= 64 { 1 << 56 } else { 1 << 32 };

/// How the data of a transfer moves.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Backend {
    /// Through a ring of the receiver's pool, both sides copying.
    Ring,
    /// A single copy by the receiver, `process_vm_readv` from the sender's buffer.
    Cma,
    /// A network module streams the data (the peer is on another node).
    Net,
    /// A network module moves the data, and the receiver may read it from the sender's registered
    /// buffer (RMA read at the RTS's `addr` with its `key`) rather than have it streamed.
    NetRead,
}

impl Backend {
    fn code(self) -> u8 {
        match self {
            Backend::Ring => 1,
            Backend::Cma => 2,
            Backend::Net => 3,
            Backend::NetRead => 4,
        }
    }

    fn from_code(c: u8) -> Result<Backend> {
        match c {
            1 => Ok(Backend::Ring),
            2 => Ok(Backend::Cma),
            3 => Ok(Backend::Net),
            4 => Ok(Backend::NetRead),
            other => Err(Error::Wire { what: "backend", value: u64::from(other) }),
        }
    }
}

/// Request to send, from the sender.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Rts {
    /// The sender's transfer id.
    pub id: u32,
    /// The message's length.
    pub len: u64,
    /// The sender's buffer, for a single-copy read.
    pub addr: u64,
    /// The sender's process id.
    pub pid: u32,
    /// For [`Backend::NetRead`]: the key of the registration of the sender's buffer.
    pub key: u64,
    /// The backend the sender proposes.
    pub backend: Backend,
}

impl Rts {
    /// Refuses an RTS announcing more than `max` bytes (or [`LEN_MAX`]) with [`Error::TooLong`],
    /// or, for a single copy, a buffer that ends past [`LEN_MAX`] with [`Error::Wire`].
    pub fn check(&self, max: u64) -> Result<()> {
        let max = max.min(LEN_MAX);
        if self.len > max {
            return Err(Error::TooLong { len: self.len, max });
        }
        if self.backend == Backend::Cma && self.addr.checked_add(self.len).is_none_or(|end| end > LEN_MAX) {
            return Err(Error::Wire { what: "RTS buffer address", value: self.addr });
        }
        Ok(())
    }
}

/// A rendezvous message.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Control {
    /// Request to send (sender → receiver).
    Rts(Rts),
    /// Clear to send through a ring (receiver → sender).
    Cts {
        /// The sender's transfer id.
        id: u32,
        /// Ring index in the receiver's pool.
        ring: u16,
        /// The ring's epoch for this transfer.
        epoch: u32,
        /// Bytes the receiver takes.
        bytes: u64,
    },
    /// The receiver read the data itself (receiver → sender).
    Done {
        /// The sender's transfer id.
        id: u32,
        /// Bytes read.
        bytes: u64,
    },
    /// Continue through a ring from an offset (receiver → sender).
    Cookie {
        /// The sender's transfer id.
        id: u32,
        /// Bytes already moved.
        offset: u64,
        /// Ring index in the receiver's pool.
        ring: u16,
        /// The ring's epoch for this transfer.
        epoch: u32,
        /// Bytes the receiver takes in all.
        bytes: u64,
    },
    /// Write part of the message into the receiver's buffer (receiver → sender).
    Help {
        /// The sender's transfer id.
        id: u32,
        /// Where the part starts in the message.
        offset: u64,
        /// The part's length.
        bytes: u64,
        /// Where the part goes in the receiver's process.
        dst: u64,
        /// The receiver's process id.
        pid: u32,
    },
    /// The sender wrote `bytes` of the HELP range, from its start (sender → receiver).
    Helped {
        /// The sender's transfer id.
        id: u32,
        /// Bytes written.
        bytes: u64,
    },
}

const RTS: u8 = 1;
const CTS: u8 = 2;
const DONE: u8 = 3;
const COOKIE: u8 = 4;
const HELP: u8 = 5;
const HELPED: u8 = 6;

impl Control {
    /// The sender's transfer id the message is about.
    pub fn id(&self) -> u32 {
        match *self {
            Control::Rts(r) => r.id,
            Control::Cts { id, .. }
            | Control::Done { id, .. }
            | Control::Cookie { id, .. }
            | Control::Help { id, .. }
            | Control::Helped { id, .. } => id,
        }
    }

    /// Encodes into `out`; returns the length used.
    pub fn encode(&self, out: &mut [u8; MAX_ENCODED]) -> usize {
        out.fill(0);
        out[0] = VERSION;
        let mut put = |at: usize, b: &[u8]| out[at..at + b.len()].copy_from_slice(b);
        match *self {
            Control::Rts(r) => {
                put(1, &[RTS, r.backend.code()]);
                put(4, &r.id.to_le_bytes());
                put(8, &r.len.to_le_bytes());
                put(16, &r.addr.to_le_bytes());
                put(24, &r.pid.to_le_bytes());
                put(28, &r.key.to_le_bytes());
                36
            }
            Control::Cts { id, ring, epoch, bytes } => {
                put(1, &[CTS]);
                put(4, &id.to_le_bytes());
                put(8, &bytes.to_le_bytes());
                put(16, &epoch.to_le_bytes());
                put(20, &ring.to_le_bytes());
                22
            }
            Control::Done { id, bytes } => {
                put(1, &[DONE]);
                put(4, &id.to_le_bytes());
                put(8, &bytes.to_le_bytes());
                16
            }
            Control::Cookie { id, offset, ring, epoch, bytes } => {
                put(1, &[COOKIE]);
                put(4, &id.to_le_bytes());
                put(8, &offset.to_le_bytes());
                put(16, &bytes.to_le_bytes());
                put(24, &epoch.to_le_bytes());
                put(28, &ring.to_le_bytes());
                30
            }
            Control::Help { id, offset, bytes, dst, pid } => {
                put(1, &[HELP]);
                put(4, &id.to_le_bytes());
                put(8, &offset.to_le_bytes());
                put(16, &bytes.to_le_bytes());
                put(24, &dst.to_le_bytes());
                put(32, &pid.to_le_bytes());
                36
            }
            Control::Helped { id, bytes } => {
                put(1, &[HELPED]);
                put(4, &id.to_le_bytes());
                put(8, &bytes.to_le_bytes());
                16
            }
        }
    }

    /// Decodes the messages of a payload holding one or more encoded back to back (a batch of
    /// control messages to one peer), calling `each` on every one in order. An error stops at the
    /// first malformed message (those before it were passed on).
    pub fn decode_all(mut b: &[u8], mut each: impl FnMut(Control)) -> Result<()> {
        loop {
            let msg = Control::decode(b)?;
            each(msg);
            let used = msg.encoded_len();
            if used >= b.len() {
                return Ok(());
            }
            b = &b[used..];
        }
    }

    /// The length of this message's encoding.
    pub fn encoded_len(&self) -> usize {
        match self {
            Control::Rts(_) => 36,
            Control::Cts { .. } => 22,
            Control::Done { .. } | Control::Helped { .. } => 16,
            Control::Cookie { .. } => 30,
            Control::Help { .. } => 36,
        }
    }

    /// Decodes bytes received from a peer.
    pub fn decode(b: &[u8]) -> Result<Control> {
        let need = |n: usize| {
            if b.len() < n { Err(Error::Wire { what: "message length", value: b.len() as u64 }) } else { Ok(()) }
        };
        need(8)?;
        if b[0] != VERSION {
            return Err(Error::Wire { what: "version", value: u64::from(b[0]) });
        }
        let u32_at = |i: usize| u32::from_le_bytes([b[i], b[i + 1], b[i + 2], b[i + 3]]);
        let u64_at = |i: usize| u64::from_le_bytes(b[i..i + 8].try_into().unwrap_or([0; 8]));
        let u16_at = |i: usize| u16::from_le_bytes([b[i], b[i + 1]]);
        let id = u32_at(4);
        match b[1] {
            RTS => {
                need(36)?;
                let rts = Rts {
                    id,
                    len: u64_at(8),
                    addr: u64_at(16),
                    pid: u32_at(24),
                    key: u64_at(28),
                    backend: Backend::from_code(b[2])?,
                };
                rts.check(LEN_MAX)?;
                Ok(Control::Rts(rts))
            }
            CTS => {
                need(22)?;
                Ok(Control::Cts { id, bytes: u64_at(8), epoch: u32_at(16), ring: u16_at(20) })
            }
            DONE => {
                need(16)?;
                Ok(Control::Done { id, bytes: u64_at(8) })
            }
            COOKIE => {
                need(30)?;
                Ok(Control::Cookie { id, offset: u64_at(8), bytes: u64_at(16), epoch: u32_at(24), ring: u16_at(28) })
            }
            HELP => {
                need(36)?;
                Ok(Control::Help { id, offset: u64_at(8), bytes: u64_at(16), dst: u64_at(24), pid: u32_at(32) })
            }
            HELPED => {
                need(16)?;
                Ok(Control::Helped { id, bytes: u64_at(8) })
            }
            other => Err(Error::Wire { what: "message type", value: u64::from(other) }),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_message_round_trips() {
        let msgs = [
            Control::Rts(Rts { id: 7, len: 1 << 33, addr: 0xdead_beef_0000, pid: 4242, key: 0, backend: Backend::Cma }),
            Control::Rts(Rts { id: 0, len: 1, addr: 0, pid: 1, key: 0, backend: Backend::Ring }),
            Control::Rts(Rts { id: 3, len: 9, addr: 64, pid: 0, key: u64::MAX - 5, backend: Backend::NetRead }),
            Control::Cts { id: u32::MAX, ring: 3, epoch: 99, bytes: 12345 },
            Control::Done { id: 5, bytes: 64 << 20 },
            Control::Cookie { id: 9, offset: 4096, ring: 1, epoch: 2, bytes: 1 << 20 },
            Control::Help { id: 11, offset: 1 << 15, bytes: (1 << 15) + 3, dst: 0x7fff_0000_1000, pid: 77 },
            Control::Helped { id: 12, bytes: 4096 },
        ];
        for m in msgs {
            let mut buf = [0u8; MAX_ENCODED];
            let n = m.encode(&mut buf);
            assert_eq!(Control::decode(&buf[..n]).unwrap(), m);
            assert_eq!(m.id(), Control::decode(&buf[..n]).unwrap().id());
        }
    }

    #[test]
    fn batches_decode_in_order_and_stop_at_junk() {
        let msgs = [
            Control::Done { id: 1, bytes: 10 },
            Control::Help { id: 2, offset: 4096, bytes: 5000, dst: 0x1000, pid: 9 },
            Control::Cts { id: 3, ring: 1, epoch: 4, bytes: 77 },
            Control::Helped { id: 4, bytes: 12 },
            Control::Cookie { id: 5, offset: 1, ring: 0, epoch: 1, bytes: 2 },
        ];
        let mut batch = Vec::new();
        for m in msgs {
            let mut buf = [0u8; MAX_ENCODED];
            let n = m.encode(&mut buf);
            assert_eq!(n, m.encoded_len());
            batch.extend_from_slice(&buf[..n]);
        }
        let mut got = Vec::new();
        Control::decode_all(&batch, |m| got.push(m)).unwrap();
        assert_eq!(got, msgs);
        // A truncated last message: the ones before it come out, then the error.
        got.clear();
        assert!(Control::decode_all(&batch[..batch.len() - 3], |m| got.push(m)).is_err());
        assert_eq!(got, msgs[..4]);
        assert!(Control::decode_all(&[], |_| {}).is_err());
    }

    #[test]
    fn bad_bytes_are_typed_errors() {
        let mut buf = [0u8; MAX_ENCODED];
        let n = Control::Done { id: 1, bytes: 2 }.encode(&mut buf);
        assert!(matches!(Control::decode(&buf[..n - 1]), Err(Error::Wire { what: "message length", .. })));
        assert!(matches!(Control::decode(&[]), Err(Error::Wire { .. })));
        let mut bad = buf;
        bad[0] = 9;
        assert!(matches!(Control::decode(&bad[..n]), Err(Error::Wire { what: "version", .. })));
        bad = buf;
        bad[1] = 77;
        assert!(matches!(Control::decode(&bad[..n]), Err(Error::Wire { what: "message type", .. })));
        let n = Control::Rts(Rts { id: 1, len: 2, addr: 3, pid: 4, key: 5, backend: Backend::Ring }).encode(&mut buf);
        buf[2] = 9;
        assert!(matches!(Control::decode(&buf[..n]), Err(Error::Wire { what: "backend", .. })));
        // Arbitrary bytes never panic.
        for seed in 0..2000u32 {
            let junk: Vec<u8> = (0..(seed % 41)).map(|i| (seed.wrapping_mul(2654435761) >> (i % 24)) as u8).collect();
            let _ = Control::decode(&junk);
        }
    }
}
