use super::*;

use std::cell::RefCell;
use std::rc::Rc;

/// What the two sides' backends share: the receive buffer the receiver readied, and the
/// receiver's finished transfers.
#[derive(Default)]
struct Wire {
    recv: Option<(u32, *mut u8, u64)>,
    recv_done: Vec<NetDone>,
}

/// A backend that copies at once (both sides in this process); each side has its own.
struct Loopback {
    wire: Rc<RefCell<Wire>>,
    done: Vec<NetDone>,
    receiver: bool,
    /// Offers reads.
    readable: bool,
    abandoned: Vec<(u32, u32)>,
}

impl LmtBackend for Loopback {
    unsafe fn start_send(&mut self, peer: u32, id: u32, addr: *const u8, bytes: u64) -> Result<()> {
        let mut w = self.wire.borrow_mut();
        let (rid, dst, want) = w.recv.take().expect("receiver ready before CTS");
        assert_eq!((rid, want), (id, bytes));
        // SAFETY: both buffers are live for the test's transfer and hold `bytes` bytes.
        unsafe { std::ptr::copy_nonoverlapping(addr, dst, bytes as usize) };
        let outcome = Outcome::Moved { bytes };
        self.done.push(NetDone { peer, id, send: true, outcome: outcome.clone() });
        w.recv_done.push(NetDone { peer: 0, id, send: false, outcome });
        Ok(())
    }
    unsafe fn start_recv(
        &mut self,
        peer: u32,
        id: u32,
        dst: *mut u8,
        bytes: u64,
        remote: Option<RemoteBuf>,
    ) -> Result<RecvPlan> {
        if let Some(r) = remote {
            // The sender's buffer is at `r.addr` in this process: read it now.
            // SAFETY: the test's buffers are live and hold `bytes` bytes.
            unsafe { std::ptr::copy_nonoverlapping(r.addr as *const u8, dst, bytes as usize) };
            self.done.push(NetDone { peer, id, send: false, outcome: Outcome::Moved { bytes } });
            return Ok(RecvPlan::Read);
        }
        self.wire.borrow_mut().recv = Some((id, dst, bytes));
        Ok(RecvPlan::Stream)
    }
    unsafe fn pre_send(&mut self, _peer: u32, _id: u32, addr: *const u8, _bytes: u64) -> Result<Option<RemoteBuf>> {
        Ok(self.readable.then_some(RemoteBuf { addr: addr as u64, key: 7 }))
    }
    fn abandon_send(&mut self, peer: u32, id: u32) {
        self.abandoned.push((peer, id));
    }
    fn take_lmt_done(&mut self) -> Vec<NetDone> {
        if self.receiver {
            let mut d = std::mem::take(&mut self.wire.borrow_mut().recv_done);
            d.append(&mut self.done);
            d
        } else {
            std::mem::take(&mut self.done)
        }
    }
}

fn backends(readable: bool) -> (Loopback, Loopback) {
    let wire = Rc::new(RefCell::new(Wire::default()));
    let side = |wire, receiver| Loopback { wire, done: Vec::new(), receiver, readable, abandoned: Vec::new() };
    (side(wire.clone(), false), side(wire, true))
}

#[test]
fn rts_cts_and_the_backend_move_the_bytes_the_receiver_takes() {
    let (mut s, mut r) = (NetLmt::new(), NetLmt::new());
    let (mut bs, mut br) = backends(false);
    let msg: Vec<u8> = (0..5000u32).map(|i| i as u8).collect();
    let mut dst = vec![0u8; 3000];
    // SAFETY: both buffers outlive the transfer, driven to the end here.
    let rts = unsafe { s.pre_send(1, 7, msg.as_ptr(), 5000, &mut bs) };
    assert_eq!(rts.backend, Backend::Net);
    // SAFETY: as above.
    unsafe { r.pre_recv(0, 8, &rts, dst.as_mut_ptr(), 3000, &mut br) };
    let out: Vec<_> = r.take_out().collect();
    assert_eq!(out.len(), 1);
    s.handle(1, out[0].1, &mut bs).unwrap();
    s.progress(&mut bs);
    r.progress(&mut br);
    assert_eq!(s.take_done().collect::<Vec<_>>(), [(7, Outcome::Moved { bytes: 3000 })]);
    assert_eq!(r.take_done().collect::<Vec<_>>(), [(8, Outcome::Moved { bytes: 3000 })]);
    assert_eq!(dst, msg[..3000]);
    assert!(!s.busy() && !r.busy());
}

#[test]
fn bad_cts_and_dead_peers_fail_transfers() {
    let mut s = NetLmt::new();
    let (mut b, _) = backends(false);
    let msg = [0u8; 10];
    // SAFETY: `msg` outlives the transfers.
    let rts = unsafe { s.pre_send(1, 1, msg.as_ptr(), 10, &mut b) };
    assert!(s.handle(1, Control::Cts { id: rts.id, ring: 0, epoch: 0, bytes: 11 }, &mut b).is_err());
    assert!(s.handle(1, Control::Cookie { id: 0, offset: 0, ring: 0, epoch: 0, bytes: 1 }, &mut b).is_err());
    // SAFETY: as above.
    let rts = unsafe { s.pre_send(1, 3, msg.as_ptr(), 10, &mut b) };
    assert!(s.handle(1, Control::Done { id: rts.id, bytes: 10 }, &mut b).is_err(), "DONE for a streamed transfer");
    // SAFETY: as above.
    unsafe { s.pre_send(2, 2, msg.as_ptr(), 10, &mut b) };
    s.peer_gone(2);
    let done: Vec<_> = s.take_done().collect();
    assert_eq!(done.len(), 3);
    assert_eq!(done[2], (2, Outcome::Failed(Error::PeerDied)));
}

#[test]
fn a_read_ends_with_done_and_the_sender_releases_its_buffer() {
    let (mut s, mut r) = (NetLmt::new(), NetLmt::new());
    let (mut bs, mut br) = backends(true);
    let msg: Vec<u8> = (0..9000u32).map(|i| (i * 7) as u8).collect();
    let mut dst = vec![0u8; 8000];
    // SAFETY: both buffers outlive the transfer, driven to the end here.
    let rts = unsafe { s.pre_send(1, 5, msg.as_ptr(), 9000, &mut bs) };
    assert_eq!((rts.backend, rts.key), (Backend::NetRead, 7));
    // SAFETY: as above.
    unsafe { r.pre_recv(0, 6, &rts, dst.as_mut_ptr(), 8000, &mut br) };
    assert_eq!(r.take_out().count(), 0, "no CTS: the receiver reads");
    assert!(r.progress(&mut br));
    let out: Vec<_> = r.take_out().collect();
    assert_eq!(out, [(0, Control::Done { id: rts.id, bytes: 8000 })]);
    assert_eq!(r.take_done().collect::<Vec<_>>(), [(6, Outcome::Moved { bytes: 8000 })]);
    s.handle(1, out[0].1, &mut bs).unwrap();
    assert_eq!(s.take_done().collect::<Vec<_>>(), [(5, Outcome::Moved { bytes: 8000 })]);
    assert_eq!(bs.abandoned, [(1, rts.id)], "the registration is released");
    assert!(dst == msg[..8000]);
    assert!(!s.busy() && !r.busy());
    // An RTS that could not be sent releases the buffer too.
    // SAFETY: as above.
    unsafe { s.pre_send(1, 9, msg.as_ptr(), 9000, &mut bs) };
    s.abandon(9, &mut bs);
    assert_eq!(bs.abandoned.len(), 2);
    assert!(!s.busy() && s.take_done().next().is_none());
}
