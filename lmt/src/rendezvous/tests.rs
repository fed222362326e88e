use std::ptr::NonNull;

use nemesis_shm::Pieces;

use super::*;
use crate::cma::{self, Batch, PeerProcess};
use crate::error::Refusal;
use crate::ring::HeapRing;
use crate::wire::Rts;

/// Two ranks' rings on the heap.
struct TwoRanks {
    rings: Vec<HeapRing>,
    per: u16,
    /// What both ranks registered (both are this process).
    pid: Option<u32>,
}

impl Rings for TwoRanks {
    fn ring(&self, host: u16, index: u16) -> Option<RingRef<'_>> {
        if host >= 2 || index >= self.per {
            return None;
        }
        Some(self.rings[usize::from(host * self.per + index)].get())
    }
    fn rings_per_rank(&self) -> u16 {
        self.per
    }
    fn pid(&self, rank: u16) -> Option<u32> {
        self.pid.filter(|_| rank < 2)
    }
}

/// The transfers of rank `me` of a test, whose ranks are all this process.
fn own_lmt(me: u16, rings: u16, cfg: Config) -> Lmt {
    let mut l = Lmt::new(me, rings, cfg);
    // SAFETY: both ranks of every test are this process, and their HELPs name their receive
    // buffers, or are refused, or (`a_sender_that_cannot_write...`) name address 64, below
    // `vm.mmap_min_addr`: never mapped, the kernel faults without writing.
    unsafe { l.allow_own_process() };
    l
}

fn node(per: u16) -> TwoRanks {
    TwoRanks { rings: (0..2 * per).map(|_| HeapRing::new(4, 1000)).collect(), per, pid: Some(std::process::id()) }
}

/// Runs a transfer of `msg` from a sender (rank 0) to a receiver (rank 1) of capacity `cap`,
/// passing the control messages by hand.
fn transfer(msg: &[u8], cap: usize, policy: Policy, per: u16) -> (Outcome, Outcome, Vec<u8>) {
    let cfg = Config { policy, chunks_per_pass: 2, cma_chunk: 700, split_min: u64::MAX, ..Config::default() };
    transfer_with(msg, cap, cfg, per, |m| m)
}

/// As [`transfer`], with `cfg`, and `tamper` applied to every message to the sender.
fn transfer_with(
    msg: &[u8],
    cap: usize,
    cfg: Config,
    per: u16,
    tamper: impl Fn(Control) -> Control,
) -> (Outcome, Outcome, Vec<u8>) {
    transfer_pair(msg, cap, cfg, per, None, tamper)
}

/// As [`transfer_with`], both sides setting `pair` as the thresholds of the other.
fn transfer_pair(
    msg: &[u8],
    cap: usize,
    cfg: Config,
    per: u16,
    pair: Option<PeerConfig>,
    tamper: impl Fn(Control) -> Control,
) -> (Outcome, Outcome, Vec<u8>) {
    let (so, ro, dst, errors) = transfer_errors(msg, cap, cfg, &node(per), pair, tamper);
    assert_eq!(errors, []);
    (so, ro, dst)
}

/// As [`transfer_pair`] on node `n`, with the errors the sender's `handle` returned.
fn transfer_errors(
    msg: &[u8],
    cap: usize,
    cfg: Config,
    n: &TwoRanks,
    pair: Option<PeerConfig>,
    tamper: impl Fn(Control) -> Control,
) -> (Outcome, Outcome, Vec<u8>, Vec<Error>) {
    let per = n.per;
    let (mut s, mut r) = (own_lmt(0, per, cfg), own_lmt(1, per, cfg));
    if let Some(p) = pair {
        s.set_peer(1, p);
        r.set_peer(0, p);
    }
    let mut dst = vec![0u8; cap];
    // SAFETY: `msg` and `dst` outlive the transfer (driven to the end below).
    let rts = unsafe { s.pre_send(1, 10, msg.as_ptr(), msg.len() as u64, std::process::id()) };
    // SAFETY: as above.
    unsafe { r.pre_recv(0, 20, &rts, dst.as_mut_ptr(), cap, n) };
    let (so, ro, errors) = drive(&mut s, &mut r, n, tamper);
    (so, ro, dst, errors)
}

/// Passes the control messages between sender `s` (rank 0) and receiver `r` (rank 1) and
/// drives both until each reported its outcome; the errors the sender's `handle` returned.
fn drive<C: Copier>(
    s: &mut Lmt<C>,
    r: &mut Lmt<C>,
    n: &TwoRanks,
    tamper: impl Fn(Control) -> Control,
) -> (Outcome, Outcome, Vec<Error>) {
    let mut errors = Vec::new();
    let (mut so, mut ro) = (None, None);
    for _ in 0..10_000 {
        for (to, m) in r.take_out().collect::<Vec<_>>() {
            assert_eq!(to, 0);
            if let Err(e) = s.handle(1, tamper(m), n) {
                errors.push(e);
            }
        }
        for (to, m) in s.take_out().collect::<Vec<_>>() {
            assert_eq!(to, 1);
            r.handle(0, m, n).unwrap();
        }
        s.progress(n);
        r.progress(n);
        so = so.or(s.take_done().next().map(|d| d.1));
        ro = ro.or(r.take_done().next().map(|d| d.1));
        if so.is_some() && ro.is_some() && !s.busy() && !r.busy() {
            break;
        }
    }
    (so.expect("sender finished"), ro.expect("receiver finished"), errors)
}

/// Every `stride` bytes of `buf`, `len` of them (`len <= stride`), as pieces.
fn strided(buf: &mut [u8], len: usize, stride: usize) -> NonNull<dyn Pieces> {
    let base = buf.as_mut_ptr();
    let list = (0..buf.len() / stride).map(|k| (base.wrapping_add(k * stride), len)).collect();
    // SAFETY: disjoint ranges of `buf`, which the tests keep alive while the list is used.
    let list: Box<dyn Pieces> = Box::new(unsafe { nemesis_shm::PieceList::new(list) });
    NonNull::from(Box::leak(list))
}

#[test]
fn messages_in_pieces_move_through_rings_and_single_copies() {
    let cfg = |policy| Config {
        policy,
        cma_min: 0,
        cma_max: u64::MAX,
        chunks_per_pass: 2,
        cma_chunk: 700,
        split_min: 1000,
        ..Config::default()
    };
    let can_cma = cma::probe_startup().is_ok();
    // (piece length, stride): short pieces (a ring), long ones (a single copy if allowed).
    for (plen, stride) in [(3usize, 5usize), (300, 301)] {
        let pieces = 40;
        let total = plen * pieces;
        let src_mem: Vec<u8> = (0..stride * pieces).map(|i| (i * 7 + 1) as u8).collect();
        let want: Vec<u8> = (0..total).map(|i| src_mem[i / plen * stride + i % plen]).collect();
        for policy in [Policy::Ring, Policy::Cma] {
            let n = node(2);
            // A sender in pieces, a contiguous receiver.
            let (mut s, mut r) = (own_lmt(0, 2, cfg(policy)), own_lmt(1, 2, cfg(policy)));
            let mut src = src_mem.clone();
            let sp = strided(&mut src, plen, stride);
            let mut dst = vec![0u8; total];
            // SAFETY: `src`, `dst` and the leaked list outlive the transfer.
            let rts = unsafe { s.pre_send_pieces(1, 10, sp, 1) };
            assert_eq!((rts.len, rts.backend), (total as u64, Backend::Ring));
            // SAFETY: as above.
            unsafe { r.pre_recv(0, 20, &rts, dst.as_mut_ptr(), total, &n) };
            let (so, ro, _) = drive(&mut s, &mut r, &n, |m| m);
            assert_eq!((so, ro), (Outcome::Moved { bytes: total as u64 }, Outcome::Moved { bytes: total as u64 }));
            assert_eq!(dst, want, "gathered, {plen}-byte pieces, {policy:?}");
            assert_eq!(r.stats().ring, 1);

            // A contiguous sender, a receiver in pieces (one byte short: truncation).
            let (mut s, mut r) = (own_lmt(0, 2, cfg(policy)), own_lmt(1, 2, cfg(policy)));
            let msg: Vec<u8> = want.iter().map(|b| b ^ 0x5a).chain([9]).collect();
            let mut out = vec![0xeeu8; stride * pieces];
            let rp = strided(&mut out, plen, stride);
            r.set_cma(can_cma);
            // SAFETY: `msg`, `out` and the leaked list outlive the transfer.
            let rts = unsafe { s.pre_send(1, 10, msg.as_ptr(), msg.len() as u64, std::process::id()) };
            // SAFETY: as above.
            unsafe { r.pre_recv_pieces(0, 20, &rts, rp, &n) };
            let (so, ro, _) = drive(&mut s, &mut r, &n, |m| m);
            assert_eq!((so, ro), (Outcome::Moved { bytes: total as u64 }, Outcome::Moved { bytes: total as u64 }));
            for (i, &b) in out.iter().enumerate() {
                let w = if i % stride < plen { msg[i / stride * plen + i % stride] } else { 0xee };
                assert_eq!(b, w, "byte {i}, {plen}-byte pieces, {policy:?}");
            }
            let single = policy == Policy::Cma && can_cma && plen >= CMA_MIN_PIECE as usize;
            assert_eq!((r.stats().cma, r.stats().split), (u64::from(single), 0), "{plen}-byte pieces, {policy:?}");
        }
    }
}

fn data(len: usize) -> Vec<u8> {
    (0..len).map(|i| (i * 31 + 7) as u8).collect()
}

#[test]
fn a_pair_chooses_its_backend_split_and_ring_chunk() {
    let cfg = Config { policy: Policy::Auto, split_min: u64::MAX, ..Config::default() };
    // Rings for this pair up to 5000 bytes, in chunks of 300 of the 1000-byte slots.
    let pair = PeerConfig { cma_min: 5000, cma_max: u64::MAX, split_min: u64::MAX, ring_chunk: 300 };
    let mut lmt = own_lmt(0, 1, cfg);
    lmt.set_cma(true);
    lmt.set_peer(1, pair);
    assert_eq!(lmt.backend_for(1, 4999), Backend::Ring);
    assert_eq!(lmt.backend_for(1, 5000), Backend::Cma);
    assert_eq!(lmt.backend_for(2, 10), Backend::Cma, "other peers keep the node-wide range");
    for len in [1, 299, 300, 301, 4321] {
        let msg = data(len);
        let (so, ro, dst) = transfer_pair(&msg, len, cfg, 1, Some(pair), |m| m);
        assert_eq!((&so, &ro), (&Outcome::Moved { bytes: len as u64 }, &Outcome::Moved { bytes: len as u64 }));
        assert_eq!(dst, msg, "{len}");
    }
    // Chunks of different lengths on the two sides are a protocol error, never a wrong copy.
    let msg = data(2000);
    let n = node(1);
    let (mut s, mut r) = (own_lmt(0, 1, cfg), own_lmt(1, 1, cfg));
    s.set_peer(1, pair);
    let mut dst = vec![0u8; 2000];
    // SAFETY: `msg` and `dst` outlive the transfer, driven below until it fails.
    let rts = unsafe { s.pre_send(1, 1, msg.as_ptr(), 2000, std::process::id()) };
    // SAFETY: as above.
    unsafe { r.pre_recv(0, 2, &rts, dst.as_mut_ptr(), 2000, &n) };
    for (_, m) in r.take_out().collect::<Vec<_>>() {
        s.handle(1, m, &n).unwrap();
    }
    s.progress(&n);
    r.progress(&n);
    assert!(matches!(r.take_done().next(), Some((2, Outcome::Failed(Error::Corrupt { .. })))));
}

#[test]
fn ring_transfers_of_odd_sizes() {
    for len in [1, 999, 1000, 1001, 3999, 4000, 4001, 12_345] {
        let msg = data(len);
        let (so, ro, dst) = transfer(&msg, len, Policy::Ring, 1);
        assert_eq!(so, Outcome::Moved { bytes: len as u64 }, "len {len}");
        assert_eq!(ro, Outcome::Moved { bytes: len as u64 });
        assert!(dst == msg, "len {len}");
    }
}

#[test]
fn truncation_moves_the_buffer_length_on_both_sides() {
    let msg = data(5000);
    let (so, ro, dst) = transfer(&msg, 1234, Policy::Ring, 1);
    assert_eq!((so, ro), (Outcome::Moved { bytes: 1234 }, Outcome::Moved { bytes: 1234 }));
    assert_eq!(dst, msg[..1234]);
    let (so, ro, _) = transfer(&msg, 0, Policy::Ring, 1);
    assert_eq!((so, ro), (Outcome::Moved { bytes: 0 }, Outcome::Moved { bytes: 0 }));
}

#[test]
fn cma_reads_our_own_buffer_or_falls_back_to_a_ring() {
    // Same process on both sides: process_vm_readv on ourselves.
    let msg = data(10_000);
    let (so, ro, dst) = transfer(&msg, msg.len(), Policy::Cma, 1);
    assert_eq!((so, ro), (Outcome::Moved { bytes: 10_000 }, Outcome::Moved { bytes: 10_000 }));
    assert!(dst == msg);
}

fn split(cma_chunk: usize) -> Config {
    Config { policy: Policy::Cma, chunks_per_pass: 2, cma_chunk, split_min: 0, ..Config::default() }
}

#[test]
fn split_single_copies_move_every_byte_once_on_each_side() {
    for (len, cap) in [(8191, 8191), (8192, 8192), (12_289, 12_289), (100_000, 100_000), (100_000, 54_321)] {
        for chunk in [700, 1 << 20] {
            let msg = data(len);
            let (so, ro, dst) = transfer_with(&msg, cap, split(chunk), 1, |m| m);
            let bytes = len.min(cap) as u64;
            assert_eq!((so, ro), (Outcome::Moved { bytes }, Outcome::Moved { bytes }), "len {len} cap {cap}");
            assert!(dst[..] == msg[..cap], "len {len} cap {cap} chunk {chunk}");
        }
    }
}

#[test]
fn a_sender_that_cannot_write_leaves_its_part_to_the_receiver() {
    // The HELP names an unmapped address: the sender's write faults at once, it answers
    // HELPED with 0 bytes, and the receiver reads the second half itself.
    let msg = data(64 * 1024 + 3);
    let bad = |m| match m {
        Control::Help { id, offset, bytes, pid, .. } => Control::Help { id, offset, bytes, dst: 64, pid },
        m => m,
    };
    let (so, ro, dst) = transfer_with(&msg, msg.len(), split(1 << 20), 1, bad);
    let bytes = msg.len() as u64;
    assert_eq!((so, ro), (Outcome::Moved { bytes }, Outcome::Moved { bytes }));
    assert!(dst == msg);
}

#[test]
fn bad_help_messages_fail_the_transfer() {
    let n = node(1);
    let (mut s, mut r) = (own_lmt(0, 1, split(1 << 20)), own_lmt(1, 1, split(1 << 20)));
    let msg = data(100);
    let pid = std::process::id();
    // SAFETY: `msg` outlives the transfers.
    let rts = unsafe { s.pre_send(1, 1, msg.as_ptr(), 100, pid) };
    // A range past the message.
    assert!(s.handle(1, Control::Help { id: rts.id, offset: 50, bytes: 51, dst: 0, pid }, &n).is_err());
    // SAFETY: as above.
    let rts = unsafe { s.pre_send(1, 2, msg.as_ptr(), 100, pid) };
    let wrap = Control::Help { id: rts.id, offset: u64::MAX, bytes: 2, dst: 0, pid };
    assert!(s.handle(1, wrap, &n).is_err());
    assert_eq!(s.take_done().filter(|d| matches!(d.1, Outcome::Failed(_))).count(), 2);
    // The receiver: HELPED for a transfer that asked nothing, or for more than asked.
    let big = data(20_000);
    let mut d1 = vec![0u8; 20_000];
    // SAFETY: `big` and `d1` outlive the transfer.
    let rts = unsafe { s.pre_send(1, 3, big.as_ptr(), 20_000, pid) };
    // SAFETY: as above.
    unsafe { r.pre_recv(0, 30, &rts, d1.as_mut_ptr(), 20_000, &n) };
    let help: Vec<_> = r.take_out().collect();
    assert!(matches!(help[..], [(0, Control::Help { offset: 8192, bytes: 11_808, .. })]), "{help:?}");
    assert!(r.handle(0, Control::Helped { id: rts.id, bytes: 11_809 }, &n).is_err());
    assert!(matches!(r.take_done().next(), Some((30, Outcome::Failed(Error::Corrupt { .. })))));
    // Unknown transfers are ignored.
    assert!(r.handle(0, Control::Helped { id: 999, bytes: 1 }, &n).is_ok());
}

/// Another process of ours (a pid that is not the peer's).
fn other_process() -> std::process::Child {
    std::process::Command::new("sleep").arg("30").spawn().unwrap()
}

#[test]
fn a_forged_rts_is_refused_and_nothing_is_read() {
    let n = node(1);
    let mut other = other_process();
    let msg = data(20_000);
    for (pid, addr, what) in [
        // Another process than the one the sender registered.
        (other.id(), msg.as_ptr() as u64, "RTS pid"),
        // A range that wraps around the address space.
        (std::process::id(), u64::MAX - 100, "RTS address"),
    ] {
        let (mut s, mut r) = (own_lmt(0, 1, split(1 << 20)), own_lmt(1, 1, split(1 << 20)));
        // SAFETY: `msg` outlives the transfer.
        let mut rts = unsafe { s.pre_send(1, 1, msg.as_ptr(), 20_000, std::process::id()) };
        (rts.pid, rts.addr) = (pid, addr);
        let mut d = vec![0u8; 20_000];
        // SAFETY: `d` outlives the transfer.
        unsafe { r.pre_recv(0, 2, &rts, d.as_mut_ptr(), 20_000, &n) };
        assert!(matches!(r.take_done().next(), Some((2, Outcome::Failed(Error::Forged { what: w, .. }))) if w == what));
        for (to, m) in r.take_out().collect::<Vec<_>>() {
            assert_eq!((to, m), (0, Control::Done { id: rts.id, bytes: 0 }), "no HELP: nothing to write either");
            s.handle(1, m, &n).unwrap();
        }
        assert_eq!(s.take_done().next(), Some((1, Outcome::Moved { bytes: 0 })), "the sender is released");
        r.progress(&n);
        assert!(!r.busy() && !s.busy());
        assert!(d.iter().all(|&b| b == 0), "nothing was read");
    }
    let _ = other.kill();
    let _ = other.wait();
    // Transfers after go on (CMA, split), and with a peer whose pid does not name it from
    // here (another pid namespace) through a ring.
    let (so, ro, dst) = transfer_with(&msg, msg.len(), split(1 << 20), 1, |m| m);
    assert_eq!((so, ro), (Outcome::Moved { bytes: 20_000 }, Outcome::Moved { bytes: 20_000 }));
    assert!(dst == msg);
    let unknown = TwoRanks { pid: None, ..node(1) };
    let (so, ro, dst, errors) = transfer_errors(&msg, msg.len(), split(1 << 20), &unknown, None, |m| m);
    assert_eq!((so, ro, errors), (Outcome::Moved { bytes: 20_000 }, Outcome::Moved { bytes: 20_000 }, vec![]));
    assert!(dst == msg);
}

#[test]
fn a_forged_help_is_refused_and_the_receiver_reads_it_all() {
    let mut other = other_process();
    let other_pid = other.id();
    let msg = data(64 * 1024 + 3);
    let bytes = msg.len() as u64;
    for (what, tamper) in [
        (
            "HELP pid",
            Box::new(move |m| match m {
                Control::Help { id, offset, bytes, dst, .. } => {
                    Control::Help { id, offset, bytes, dst, pid: other_pid }
                }
                m => m,
            }) as Box<dyn Fn(Control) -> Control>,
        ),
        (
            "HELP destination",
            Box::new(|m| match m {
                Control::Help { id, offset, bytes, pid, .. } => {
                    Control::Help { id, offset, bytes, dst: u64::MAX - 8, pid }
                }
                m => m,
            }),
        ),
    ] {
        let (so, ro, dst, errors) = transfer_errors(&msg, msg.len(), split(1 << 20), &node(1), None, tamper);
        assert!(matches!(errors[..], [Error::Forged { what: w, .. }] if w == what), "{errors:?}");
        assert_eq!((so, ro), (Outcome::Moved { bytes }, Outcome::Moved { bytes }), "{what}: nothing lost");
        assert!(dst == msg, "{what}");
    }
    let _ = other.kill();
    let _ = other.wait();
}

#[test]
fn a_dead_helper_fails_the_receive() {
    let n = node(1);
    let mut r = own_lmt(1, 1, split(1 << 20));
    let big = data(20_000);
    let mut d = vec![0u8; 20_000];
    let rts =
        Rts { id: 4, len: 20_000, addr: big.as_ptr() as u64, pid: std::process::id(), key: 0, backend: Backend::Cma };
    // SAFETY: `big` and `d` outlive the transfer.
    unsafe { r.pre_recv(0, 40, &rts, d.as_mut_ptr(), 20_000, &n) };
    while r.progress(&n) {}
    assert!(r.take_done().next().is_none(), "our half is read; the sender's is awaited");
    r.peer_gone(0, &n);
    assert_eq!(r.take_done().next(), Some((40, Outcome::Failed(Error::PeerDied))));
    assert!(d[..8192] == big[..8192]);
}

#[test]
fn a_failed_read_ends_only_once_the_sender_stopped_writing() {
    let n = node(1);
    let mut r = own_lmt(1, 1, split(1 << 20));
    let mut d = vec![0u8; 20_000];
    // The sender's buffer address is unmapped: our half faults at once.
    let rts = Rts { id: 5, len: 20_000, addr: 64, pid: std::process::id(), key: 0, backend: Backend::Cma };
    // SAFETY: `d` outlives the transfer.
    unsafe { r.pre_recv(0, 50, &rts, d.as_mut_ptr(), 20_000, &n) };
    for _ in 0..10 {
        r.progress(&n);
    }
    assert!(r.take_done().next().is_none(), "the sender may still be writing its half");
    assert!(r.handle(0, Control::Helped { id: 5, bytes: 11_808 }, &n).is_ok());
    assert!(matches!(r.take_done().next(), Some((50, Outcome::Failed(Error::Cma(_))))));
    assert!(!r.busy());
}

#[test]
fn transfers_wait_for_a_ring_and_peers_death_fails_them() {
    let n = node(1);
    let cfg = Config { policy: Policy::Ring, ..Config::default() };
    let (mut s, mut r) = (own_lmt(0, 1, cfg), own_lmt(1, 1, cfg));
    let a = data(3000);
    let mut d1 = vec![0u8; 3000];
    let mut d2 = vec![0u8; 3000];
    // SAFETY: the buffers outlive the transfers.
    let (r1, r2) = unsafe { (s.pre_send(1, 1, a.as_ptr(), 3000, 1), s.pre_send(1, 2, a.as_ptr(), 3000, 1)) };
    // SAFETY: as above.
    unsafe {
        r.pre_recv(0, 11, &r1, d1.as_mut_ptr(), 3000, &n);
        r.pre_recv(0, 12, &r2, d2.as_mut_ptr(), 3000, &n);
    }
    let out: Vec<_> = r.take_out().collect();
    assert_eq!(out.len(), 1, "one ring: the second transfer waits");
    // The sender dies before moving anything: both receives fail, the ring is free again.
    r.peer_gone(0, &n);
    let done: Vec<_> = r.take_done().collect();
    assert_eq!(done.len(), 2);
    assert!(done.iter().all(|d| d.1 == Outcome::Failed(Error::PeerDied)));
    assert!(!r.busy());
    // The sender's side: its peer (the receiver) dies while it waits for CTS.
    s.peer_gone(1, &n);
    assert_eq!(s.take_done().count(), 2);
}

#[test]
fn bad_control_messages_are_errors_not_panics() {
    let n = node(1);
    let mut s = own_lmt(0, 1, Config::default());
    let msg = data(100);
    // SAFETY: `msg` outlives the transfer.
    let rts = unsafe { s.pre_send(1, 1, msg.as_ptr(), 100, 1) };
    // A CTS naming a ring that does not exist, or a wrong epoch, or too many bytes.
    assert!(s.handle(1, Control::Cts { id: rts.id, ring: 7, epoch: 0, bytes: 100 }, &n).is_err());
    // SAFETY: as above.
    let rts = unsafe { s.pre_send(1, 2, msg.as_ptr(), 100, 1) };
    assert!(s.handle(1, Control::Cts { id: rts.id, ring: 0, epoch: 5, bytes: 100 }, &n).is_err());
    // SAFETY: as above.
    let rts = unsafe { s.pre_send(1, 3, msg.as_ptr(), 100, 1) };
    assert!(s.handle(1, Control::Cts { id: rts.id, ring: 0, epoch: 0, bytes: 101 }, &n).is_err());
    // Unknown transfers are ignored (a late message after a failure).
    assert!(s.handle(1, Control::Done { id: 999, bytes: 1 }, &n).is_ok());
    assert!(s.handle(1, Control::Rts(rts), &n).is_err());
    assert_eq!(s.take_done().filter(|d| matches!(d.1, Outcome::Failed(_))).count(), 3);
}

/// Two ranks whose slots name `pids` (and `starts`), rings on the heap.
struct Slots {
    rings: Vec<HeapRing>,
    pids: [Option<u32>; 2],
    starts: [Option<u64>; 2],
}

impl Rings for Slots {
    fn ring(&self, host: u16, index: u16) -> Option<RingRef<'_>> {
        (host < 2 && index < 1).then(|| self.rings[usize::from(host)].get())
    }
    fn rings_per_rank(&self) -> u16 {
        1
    }
    fn pid(&self, rank: u16) -> Option<u32> {
        self.pids.get(usize::from(rank)).copied().flatten()
    }
    fn start_time(&self, rank: u16) -> Option<u64> {
        self.starts.get(usize::from(rank)).copied().flatten()
    }
}

fn slots(pids: [Option<u32>; 2], starts: [Option<u64>; 2]) -> Slots {
    Slots { rings: vec![HeapRing::new(4, 1000), HeapRing::new(4, 1000)], pids, starts }
}

fn cma_cfg(split_min: u64) -> Config {
    Config { policy: Policy::Cma, split_min, ..Config::default() }
}

/// What [`receive_from`] saw: the receiver, what it sent, its outcome if any, its buffer.
type Received = (Lmt, Vec<(u16, Control)>, Option<Outcome>, Vec<u8>);

/// Receiver rank 1 takes an RTS from rank 0 naming `addr` in rank 0's registered process,
/// and makes a few passes.
fn receive_from(n: &Slots, addr: u64, len: usize) -> Received {
    let mut r = Lmt::new(1, 1, cma_cfg(u64::MAX));
    r.set_cma(true);
    let mut d = vec![0u8; len];
    let pid = n.pid(0).unwrap_or(0);
    let rts = Rts { id: 1, len: len as u64, addr, pid, key: 0, backend: Backend::Cma };
    // SAFETY: `d` outlives the transfer (it is ended by `peer_gone` below or by its outcome).
    unsafe { r.pre_recv(0, 9, &rts, d.as_mut_ptr(), len, n) };
    for _ in 0..4 {
        r.progress(n);
    }
    let out = r.take_out().collect();
    let done = r.take_done().next().map(|d| d.1);
    r.peer_gone(0, n);
    (r, out, done, d)
}

#[test]
fn a_slot_naming_this_process_is_refused_before_any_copy() {
    let me = std::process::id();
    let n = slots([Some(me), Some(me)], [None; 2]);
    let secret = vec![0x5au8; 4096];
    // Reads: an RTS naming our own memory goes through a ring (CTS), nothing is read.
    let (r, out, done, d) = receive_from(&n, secret.as_ptr() as u64, 4096);
    assert!(matches!(out[..], [(0, Control::Cts { .. })]), "{out:?}");
    assert_eq!(done, None, "the transfer waits for the ring");
    assert!(d.iter().all(|&b| b == 0), "nothing of ours was read");
    assert_eq!(r.stats().cma, 0);
    assert_eq!(r.peer_refusal(0), None, "forgotten once the peer is gone");
    let mut r = Lmt::new(1, 1, cma_cfg(u64::MAX));
    assert!(r.copy_pid(0, &n).is_err());
    assert_eq!(r.peer_refusal(0), Some(&Error::PeerProcess { slot: 0, pid: me, why: Refusal::Own }));
    // Writes: a HELP naming our own memory is answered HELPED of nothing, nothing is written.
    let mut s = Lmt::new(0, 1, cma_cfg(0));
    let msg = vec![0xa5u8; 8192];
    let victim = vec![0u8; 4096];
    // SAFETY: `msg` outlives the transfer.
    let rts = unsafe { s.pre_send(1, 1, msg.as_ptr(), 8192, me) };
    let help = Control::Help { id: rts.id, offset: 4096, bytes: 4096, dst: victim.as_ptr() as u64, pid: me };
    let e = s.handle(1, help, &n).unwrap_err();
    assert_eq!(e, Error::PeerProcess { slot: 1, pid: me, why: Refusal::Own });
    assert!(e.to_string().contains("local rank 1's registered pid") && e.to_string().contains("this process"));
    for _ in 0..4 {
        s.progress(&n);
    }
    assert_eq!(s.take_out().collect::<Vec<_>>(), [(1, Control::Helped { id: rts.id, bytes: 0 })]);
    assert!(victim.iter().all(|&b| b == 0), "nothing of ours was written");
    // A thread of ours is not a process.
    let (tx, rx) = std::sync::mpsc::channel();
    let (stop_tx, stop_rx) = std::sync::mpsc::channel::<()>();
    let t = std::thread::spawn(move || {
        // SAFETY: gettid has no preconditions.
        tx.send(unsafe { libc::gettid() } as u32).unwrap();
        let _ = stop_rx.recv();
    });
    let tid = rx.recv().unwrap();
    let refused = PeerProcess::open(0, tid, None).unwrap_err();
    assert!(
        matches!(refused, Error::PeerProcess { slot: 0, pid, why: Refusal::NotProcess | Refusal::SameMemory } if pid == tid),
        "{refused:?}"
    );
    drop(stop_tx);
    t.join().unwrap();
}

#[test]
fn a_dead_reused_or_child_pid_is_refused_before_any_copy() {
    let secret = vec![0x5au8; 4096];
    // A dead process (reaped: its pid names nothing, or someone else later).
    let mut dead = std::process::Command::new("true").spawn().unwrap();
    let dead_pid = dead.id();
    dead.wait().unwrap();
    // A live process whose start time is not the registered one (a reused pid), and the
    // same process registered as it is: a child of ours.
    let mut child = std::process::Command::new("sleep").arg("30").spawn().unwrap();
    let start = nemesis_shm::os::process_start_time(child.id()).unwrap();
    for (pid, registered, why) in [
        (dead_pid, None, Refusal::Dead),
        (child.id(), Some(start + 1), Refusal::Reused),
        (child.id(), Some(start), Refusal::Descendant),
        (0, None, Refusal::Dead),
    ] {
        let n = slots([Some(pid), None], [registered, None]);
        let (r, out, done, d) = receive_from(&n, secret.as_ptr() as u64, 4096);
        assert!(matches!(out[..], [(0, Control::Cts { .. })]), "{why:?}: through a ring: {out:?}");
        assert_eq!((done, r.stats().cma), (None, 0), "{why:?}");
        assert!(d.iter().all(|&b| b == 0), "{why:?}");
        let e = PeerProcess::open(0, pid, registered).unwrap_err();
        assert_eq!(e, Error::PeerProcess { slot: 0, pid, why });
    }
    let _ = child.kill();
    let _ = child.wait();
}

#[test]
fn single_copies_read_another_process_that_passes_the_check() {
    if cma::probe_startup().is_err() {
        return eprintln!("skipped: CMA refused here");
    }
    // A grandchild of ours, orphaned (so not our descendant any more), holds a copy of our
    // memory: the message is at the same address there.
    let msg: Vec<u8> = (0..50_000u32).map(|i| (i * 13 + 1) as u8).collect();
    let mut fds = [0i32; 2];
    // SAFETY: a pipe for the grandchild's pid.
    assert_eq!(unsafe { libc::pipe(fds.as_mut_ptr()) }, 0);
    // SAFETY: fork in a test; the children only fork, write, sleep and exit.
    let child = unsafe { libc::fork() };
    if child == 0 {
        // SAFETY: as above.
        let grandchild = unsafe { libc::fork() };
        if grandchild == 0 {
            std::thread::sleep(std::time::Duration::from_secs(30));
        } else {
            let pid = (grandchild as u32).to_le_bytes();
            // SAFETY: writing 4 bytes to the pipe.
            unsafe { libc::write(fds[1], pid.as_ptr().cast(), 4) };
        }
        // SAFETY: ending a child without unwinding.
        unsafe { libc::_exit(0) };
    }
    let mut pid = [0u8; 4];
    // SAFETY: reading 4 bytes from the pipe; reaping our child.
    unsafe {
        assert_eq!(libc::read(fds[0], pid.as_mut_ptr().cast(), 4), 4);
        libc::waitpid(child, std::ptr::null_mut(), 0);
        libc::close(fds[0]);
        libc::close(fds[1]);
    }
    let pid = u32::from_le_bytes(pid);
    let start = nemesis_shm::os::process_start_time(pid);
    let n = slots([Some(pid), None], [start, None]);
    let mut r = Lmt::new(1, 1, cma_cfg(u64::MAX));
    r.set_cma(true);
    let mut d = vec![0u8; msg.len()];
    let rts = Rts { id: 1, len: msg.len() as u64, addr: msg.as_ptr() as u64, pid, key: 0, backend: Backend::Cma };
    // SAFETY: `d` outlives the transfer, driven to its end here.
    unsafe { r.pre_recv(0, 9, &rts, d.as_mut_ptr(), d.len(), &n) };
    while r.progress(&n) {}
    let done = r.take_done().next();
    assert_eq!(r.peer_refusal(0), None);
    assert_eq!(done, Some((9, Outcome::Moved { bytes: msg.len() as u64 })));
    assert!(d == msg && r.stats().cma == 1);
    // Once it is gone, a read fails (nothing of a later process with its pid is taken).
    // SAFETY: killing the grandchild we started.
    unsafe { libc::kill(pid as i32, libc::SIGKILL) };
    let t = std::time::Instant::now();
    while PeerProcess::open(0, pid, start).is_ok() {
        assert!(t.elapsed().as_secs() < 10, "SIGKILL did not end {pid}");
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
    // SAFETY: as above.
    unsafe { r.pre_recv(0, 10, &Rts { id: 2, ..rts }, d.as_mut_ptr(), d.len(), &n) };
    while r.progress(&n) {}
    assert_eq!(r.take_done().next(), Some((10, Outcome::Failed(Error::PeerDied))));
}

#[test]
fn this_ranks_own_transfers_are_single_copies_and_nothing_else_from_it_is() {
    let me = std::process::id();
    let n = slots([Some(me), Some(me)], [None; 2]);
    let mut l = Lmt::new(0, 1, cma_cfg(0));
    l.set_cma(true);
    let msg: Vec<u8> = (0..70_000u32).map(|i| (i * 3) as u8).collect();
    let mut d = vec![0u8; msg.len()];
    // SAFETY: `msg` and `d` outlive the transfer, driven to its end here.
    let rts = unsafe { l.pre_send(0, 1, msg.as_ptr(), msg.len() as u64, me) };
    // SAFETY: as above.
    unsafe { l.pre_recv(0, 2, &rts, d.as_mut_ptr(), d.len(), &n) };
    while l.progress(&n) {}
    for (_, m) in l.take_out().collect::<Vec<_>>() {
        l.handle(0, m, &n).unwrap();
    }
    let mut done: Vec<_> = l.take_done().collect();
    done.sort_by_key(|d| d.0);
    let moved = Outcome::Moved { bytes: msg.len() as u64 };
    assert_eq!(done, [(1, moved.clone()), (2, moved)]);
    assert!(d == msg);
    assert_eq!((l.stats().cma, l.stats().split), (1, 0), "a single copy, not split with ourselves");
    // An RTS "from ourselves" that is none of our sends, and a HELP from ourselves: forged.
    let secret = vec![0x5au8; 4096];
    let mut d = vec![0u8; 4096];
    let forged = Rts { id: 7, len: 4096, addr: secret.as_ptr() as u64, pid: me, key: 0, backend: Backend::Cma };
    // SAFETY: `d` outlives the transfer, which fails at once.
    unsafe { l.pre_recv(0, 3, &forged, d.as_mut_ptr(), 4096, &n) };
    assert!(matches!(l.take_done().next(), Some((3, Outcome::Failed(Error::Forged { what: "RTS of this rank", .. })))));
    assert!(d.iter().all(|&b| b == 0));
    l.take_out().for_each(drop);
    // SAFETY: `msg` outlives the transfer.
    let rts = unsafe { l.pre_send(0, 4, msg.as_ptr(), msg.len() as u64, me) };
    let help = Control::Help { id: rts.id, offset: 0, bytes: 4096, dst: secret.as_ptr() as u64, pid: me };
    assert!(matches!(l.handle(0, help, &n), Err(Error::Forged { what: "HELP from this rank", .. })));
    l.progress(&n);
    assert!(secret.iter().all(|&b| b == 0x5a), "nothing written");
}

#[test]
fn an_oversize_rts_is_refused_and_nothing_moves() {
    // Decoding: longer than any address space, or a single-copy buffer past its end.
    let enc = |rts: Rts| {
        let mut b = [0u8; crate::wire::MAX_ENCODED];
        let n = Control::Rts(rts).encode(&mut b);
        Control::decode(&b[..n])
    };
    let rts = Rts { id: 1, len: u64::MAX, addr: 0, pid: 1, key: 0, backend: Backend::Ring };
    let max = crate::wire::LEN_MAX;
    assert_eq!(enc(rts), Err(Error::TooLong { len: u64::MAX, max }));
    assert_eq!(enc(Rts { len: max + 1, ..rts }), Err(Error::TooLong { len: max + 1, max }));
    assert!(enc(Rts { len: max, ..rts }).is_ok());
    let far = Rts { len: 4096, addr: max - 100, backend: Backend::Cma, ..rts };
    assert!(matches!(enc(far), Err(Error::Wire { what: "RTS buffer address", .. })));
    // Validation: above the configured maximum; the sender is released, nothing is read.
    let me = std::process::id();
    let n = slots([Some(me), Some(me)], [None; 2]);
    let mut r = own_lmt(1, 1, Config { max_len: 1 << 20, ..cma_cfg(u64::MAX) });
    let msg = vec![7u8; 4096];
    let mut d = vec![0u8; 4096];
    let big = Rts { id: 3, len: (1 << 20) + 1, addr: msg.as_ptr() as u64, pid: me, key: 0, backend: Backend::Cma };
    // SAFETY: `d` outlives the transfer, which fails at once.
    unsafe { r.pre_recv(0, 5, &big, d.as_mut_ptr(), 4096, &n) };
    assert_eq!(r.take_done().next(), Some((5, Outcome::Failed(Error::TooLong { len: (1 << 20) + 1, max: 1 << 20 }))));
    assert_eq!(r.take_out().collect::<Vec<_>>(), [(0, Control::Done { id: 3, bytes: 0 })]);
    assert!(d.iter().all(|&b| b == 0) && !r.busy());
    // The network rendezvous alike: CTS of nothing.
    let mut net = crate::NetLmt::new();
    net.set_max_len(1 << 20);
    struct Refuse;
    impl crate::LmtBackend for Refuse {
        unsafe fn start_send(&mut self, _: u32, _: u32, _: *const u8, _: u64) -> Result<()> {
            unreachable!("nothing is sent")
        }
        unsafe fn start_recv(
            &mut self,
            _: u32,
            _: u32,
            _: *mut u8,
            _: u64,
            _: Option<crate::RemoteBuf>,
        ) -> Result<crate::RecvPlan> {
            unreachable!("nothing is received")
        }
        fn take_lmt_done(&mut self) -> Vec<crate::NetDone> {
            Vec::new()
        }
    }
    let big = Rts { backend: Backend::Net, ..big };
    // SAFETY: `d` outlives the transfer, which fails at once.
    unsafe { net.pre_recv(4, 6, &big, d.as_mut_ptr(), 4096, &mut Refuse) };
    assert_eq!(net.take_done().next(), Some((6, Outcome::Failed(Error::TooLong { len: (1 << 20) + 1, max: 1 << 20 }))));
    assert_eq!(net.take_out().collect::<Vec<_>>(), [(4, Control::Cts { id: 3, ring: 0, epoch: 0, bytes: 0 })]);
}

/// A copier of the test's own, for ranks of this process: copies by `memcpy`, counts its calls,
/// and with `refuse` answers every copy as a kernel forbidding them would (EPERM). Nothing of a
/// transfer driven through it reaches the kernel.
#[derive(Debug)]
struct Scripted {
    pid: u32,
    reads: usize,
    writes: usize,
    refuse: bool,
}

impl Scripted {
    fn new(refuse: bool) -> Scripted {
        Scripted { pid: std::process::id(), reads: 0, writes: 0, refuse }
    }

    /// Copies the bytes `from` describes into those `to` describes, in order.
    ///
    /// # Safety
    /// Both lists describe memory of this process, `to` valid for writes, not overlapping.
    unsafe fn copy(from: &[libc::iovec], to: &[libc::iovec]) -> std::io::Result<usize> {
        let (mut i, mut j, mut a, mut b, mut total) = (0, 0, 0, 0, 0);
        while i < from.len() && j < to.len() {
            let n = (from[i].iov_len - a).min(to[j].iov_len - b);
            // SAFETY: within both iovecs (the caller's contract).
            unsafe {
                std::ptr::copy_nonoverlapping(
                    from[i].iov_base.cast::<u8>().add(a),
                    to[j].iov_base.cast::<u8>().add(b),
                    n,
                )
            };
            (a, b, total) = (a + n, b + n, total + n);
            if a == from[i].iov_len {
                (i, a) = (i + 1, 0);
            }
            if b == to[j].iov_len {
                (j, b) = (j + 1, 0);
            }
        }
        Ok(total)
    }
}

impl Copier for Scripted {
    fn own_pid(&self) -> u32 {
        self.pid
    }
    fn check(&mut self, _: u16, _: u32, _: Option<u64>) -> Result<()> {
        Ok(())
    }
    fn refusal(&self, _: u16) -> Option<&Error> {
        None
    }
    fn forget(&mut self, _: u16) {}
    fn alive(&self, _: u16, _: u32, _: bool) -> bool {
        true
    }
    unsafe fn read(&mut self, _: u32, batch: &Batch) -> std::io::Result<usize> {
        self.reads += 1;
        if self.refuse {
            return Err(std::io::Error::from_raw_os_error(libc::EPERM));
        }
        // SAFETY: both ranks are this process: the remote ranges are the sender's buffer.
        unsafe { Scripted::copy(batch.remote(), batch.local()) }
    }
    unsafe fn write(&mut self, _: u32, batch: &Batch) -> std::io::Result<usize> {
        self.writes += 1;
        if self.refuse {
            return Err(std::io::Error::from_raw_os_error(libc::EPERM));
        }
        // SAFETY: both ranks are this process: the remote ranges are the receiver's buffer (HELP).
        unsafe { Scripted::copy(batch.local(), batch.remote()) }
    }
}

#[test]
fn the_state_machine_copies_only_through_the_copier_it_is_given() {
    let n = node(1);
    for refuse in [false, true] {
        let msg = data(100_000);
        let (mut s, mut r) = (
            Lmt::with_copier(0, 1, split(4096), Scripted::new(refuse)),
            Lmt::with_copier(1, 1, split(4096), Scripted::new(refuse)),
        );
        let mut dst = vec![0u8; msg.len()];
        // SAFETY: `msg` and `dst` outlive the transfer (driven to the end below).
        let rts = unsafe { s.pre_send(1, 10, msg.as_ptr(), msg.len() as u64, std::process::id()) };
        // SAFETY: as above.
        unsafe { r.pre_recv(0, 20, &rts, dst.as_mut_ptr(), dst.len(), &n) };
        let (so, ro, errors) = drive(&mut s, &mut r, &n, |m| m);
        let bytes = msg.len() as u64;
        assert_eq!((so, ro, errors), (Outcome::Moved { bytes }, Outcome::Moved { bytes }, vec![]), "refuse {refuse}");
        assert!(dst == msg, "refuse {refuse}");
        if refuse {
            // The refused copies sent the rest through the rings.
            assert!(r.io.reads >= 1, "reads {}", r.io.reads);
            assert_eq!(r.stats().fallback, 1, "{:?}", r.stats());
        } else {
            // Both cores copied their part of the split, in 4 KiB calls.
            assert!(r.io.reads >= 10 && s.io.writes >= 10, "reads {} writes {}", r.io.reads, s.io.writes);
            assert_eq!((r.stats().cma, r.stats().split), (1, 1), "{:?}", r.stats());
        }
    }
}
