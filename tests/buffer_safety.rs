//! Buffer safety (issue 30): no safe call returns while a transfer can still touch the caller's
//! memory, whatever error another peer causes meanwhile, and no peer makes the Endpoint allocate
//! what an RTS claims.
//!
//! Jobs of three ranks: rank 0 is the one under test, rank 1 a well-behaved peer, rank 2 an
//! attacker that forges messages through a port of its own rank on a second mapping of the
//! node's segment ([`forge`]): they leave as any message of its would, with what no Endpoint
//! sends. A buffer that must not be touched after a call returned lives in pages of its own
//! ([`Pages`]): unmapped, or handed out again filled with a pattern, once the call returned.
//!
//! The test binary is itself the rank program: `nemesis-run` starts it with
//! `--nemesis-test-rank` and a role in `NEMESIS_TEST_ROLE` (`tests/common/harness.rs`); a role's process must exit cleanly (a SIGSEGV or a
//! corrupted pattern fails the job).

mod common;

use std::os::fd::{FromRawFd, OwnedFd};
use std::path::{Path, PathBuf};
use std::time::Duration;

use common::{job, results, show};
use nemesis::{ANY_TAG, Endpoint, Error, WORLD};
use nemesis_shm::{MsgHeader, Node, Port, PortConfig, Segment, Sent};

fn main() {
    common::harness::main(
        rank_main,
        tests![
            a_forged_rts_during_a_queued_receive_leaves_its_buffer_alone,
            a_scope_whose_peer_sends_garbage_returns_its_buffers_untouched,
            test_and_wait_any_end_their_requests_before_returning_an_error,
            a_rendezvous_receive_in_flight_is_finished_before_the_call_returns,
            a_rendezvous_send_returns_only_once_its_buffer_is_not_read,
            a_rendezvous_send_not_taken_is_cancelled_before_the_call_returns,
            a_blocking_receive_that_took_a_rendezvous_finishes_it_before_it_returns,
            a_send_waiting_for_cells_goes_on_from_a_copy_after_an_error,
            an_absurd_rts_length_is_refused_never_allocated,
            a_checkpoint_finishes_its_pulls_before_it_fails,
        ],
    );
}

/// The rank program, by `NEMESIS_TEST_ROLE`.
fn rank_main() {
    match std::env::var("NEMESIS_TEST_ROLE").unwrap_or_default().as_str() {
        "posted" => posted(),
        "scope" => scope(),
        "raw" => raw(),
        "rendezvous-recv" => rendezvous_recv(),
        "rendezvous-send" => rendezvous_send(),
        "rendezvous-cancelled" => rendezvous_cancelled(),
        "bypass-rendezvous" => bypass_rendezvous(),
        "pending" => pending(),
        "checkpoint" => checkpoint(),
        "checkpoint-pull" => checkpoint_pull(),
        other => panic!("unknown role {other:?}"),
    }
}

/// The message kind of an RTS (`nemesis::endpoint`'s `KIND_RTS`).
const KIND_RTS: u8 = 3;

const TAG_GO: i32 = 1;
const TAG_A: i32 = 2;
const TAG_B: i32 = 3;
const TAG_MARK: i32 = 4;
const TAG_DONE: i32 = 5;
const TAG_FORGED: i32 = 6;

/// Runs `role` on `n` ranks of one node with `env`, and checks every rank ended cleanly.
fn run(n: u32, role: &str, env: &[(&str, &str)]) {
    let dir = scratch(role);
    let mut env: Vec<(&str, String)> = env.iter().map(|&(k, v)| (k, v.to_owned())).collect();
    env.push(("NEMESIS_TEST_DIR", dir.display().to_string()));
    env.push(("NEMESIS_WAIT", "yield".to_owned()));
    let o = job(n, &[], role, &env);
    let _ = std::fs::remove_dir_all(&dir);
    assert!(o.status.success(), "{role} {env:?}: {}", show(&o));
    assert_eq!(results(&o).len(), n as usize, "{role}: {}", show(&o));
}

fn scratch(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("nemesis-buffer-safety-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

/// A file of the job's scratch directory, for signals between ranks that must not call the
/// Endpoint while they wait.
fn signal(name: &str) -> PathBuf {
    Path::new(&std::env::var("NEMESIS_TEST_DIR").unwrap()).join(name)
}

fn raise(name: &str) {
    std::fs::write(signal(name), b"").unwrap();
}

/// Waits for `name` without calling the Endpoint (nothing of this rank progresses meanwhile).
fn await_signal(name: &str) {
    while !signal(name).exists() {
        std::thread::sleep(Duration::from_millis(1));
    }
}

/// Sends `msgs` (`(kind, tag, payload)`) to `to` as this rank, in order, through a port of our
/// own on a second mapping of the segment. Our Endpoint must send nothing to `to` (before or
/// after), and this is called once: the pair's sequence numbers are this port's.
fn forge(ep: &Endpoint, to: u32, msgs: &[(u8, i32, &[u8])]) {
    let local = |r: u32| ep.local_ranks().iter().position(|&g| g == r).unwrap() as u16;
    // SAFETY: duplicating a descriptor the segment keeps open.
    let fd = unsafe { libc::dup(ep.segment().fd()) };
    assert!(fd >= 0);
    // SAFETY: `fd` is ours, open.
    let seg = Segment::attach_fd(unsafe { OwnedFd::from_raw_fd(fd) }).unwrap();
    let mut port = Port::new(&seg, local(ep.rank()), PortConfig::default()).unwrap();
    port.set_fastboxes(false);
    for &(kind, tag, payload) in msgs {
        let hdr = MsgHeader { src: ep.rank(), dst: to, tag, context: WORLD, kind, ..MsgHeader::default() };
        assert!(matches!(port.send(local(to), &hdr, None, payload).unwrap(), Sent::Done));
    }
    ep.wake(to);
}

/// An RTS that decodes to nothing (an unknown message type).
const GARBAGE: [u8; 5] = [0xFF; 5];

/// A buffer in pages of its own.
struct Pages {
    ptr: *mut u8,
    len: usize,
}

impl Pages {
    fn new(len: usize) -> Pages {
        // SAFETY: a fresh anonymous mapping.
        let p = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
                -1,
                0,
            )
        };
        assert_ne!(p, libc::MAP_FAILED);
        Pages { ptr: p.cast(), len }
    }

    fn bytes(&mut self) -> &mut [u8] {
        // SAFETY: mapped, `len` bytes, borrowed through `self`.
        unsafe { std::slice::from_raw_parts_mut(self.ptr, self.len) }
    }

    /// Unmaps the pages: a later write into them is a SIGSEGV.
    fn unmap(&mut self) {
        // SAFETY: our mapping; nothing borrows it any more (`bytes` borrows `self`).
        assert_eq!(unsafe { libc::munmap(self.ptr.cast(), self.len) }, 0);
    }

    /// Unmaps the pages and maps fresh ones at the same address filled with `byte`, as an
    /// allocator reusing freed memory would; false if the address was taken meanwhile.
    fn reuse(&mut self, byte: u8) -> bool {
        self.unmap();
        // SAFETY: a fresh anonymous mapping, at our old address only if it is free.
        let p = unsafe {
            libc::mmap(
                self.ptr.cast(),
                self.len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_FIXED_NOREPLACE,
                -1,
                0,
            )
        };
        if p != self.ptr.cast() {
            if p != libc::MAP_FAILED {
                // SAFETY: the mapping just made.
                unsafe { libc::munmap(p, self.len) };
            }
            self.ptr = std::ptr::null_mut();
            return false;
        }
        self.bytes().fill(byte);
        true
    }
}

/// The bytes of message `id` of `len` bytes.
fn data(id: u64, len: usize) -> Vec<u8> {
    let mut v = vec![0u8; len];
    common::Rng::new(id ^ (len as u64) << 20).fill(&mut v);
    v
}

fn is_forged_error(e: &Error) -> bool {
    matches!(e, Error::Lmt(nemesis_lmt::Error::Wire { .. }))
}

// ---------------------------------------------------------------------------------------------
// A blocking receive queued behind a posted one (rank 0) meets a forged RTS (rank 2): it fails
// with the forged message's error, and its buffer, unmapped once it returned, is never written:
// the message it waited for (rank 1's, sent afterwards) goes to the next receive.

fn posted() {
    let mut ep = Endpoint::init().unwrap();
    let a = data(1, 40);
    let b = data(2, 60);
    match ep.rank() {
        0 => {
            let mut pages = Pages::new(4096);
            let mut early = [0u8; 40];
            let mut got = [0u8; 64];
            let mut failed = None;
            ep.scope(|s| {
                let ra = s.irecv(&mut early, 1, TAG_A, WORLD).unwrap();
                s.send(&[1], 2, TAG_GO, WORLD).unwrap();
                // Posted behind `ra`: waits for rank 1's message, which comes only after GO.
                failed = Some(s.recv(pages.bytes(), 1, TAG_B, WORLD));
                pages.unmap();
                s.send(&[2], 1, TAG_GO, WORLD).unwrap();
                let st = s.recv(&mut got, 1, TAG_B, WORLD).unwrap();
                assert_eq!(&got[..st.len], &b[..], "message B whole, in the next receive");
                s.wait(ra).unwrap();
            })
            .unwrap();
            assert_eq!(&early[..], &a[..]);
            match failed {
                Some(Err(e)) if is_forged_error(&e) => {}
                other => panic!("the receive met the forged RTS: {other:?}"),
            }
        }
        1 => {
            let mut go = [0u8; 1];
            ep.recv(&mut go, 0, TAG_GO, WORLD).unwrap();
            ep.send(&b, 0, TAG_B, WORLD).unwrap();
            ep.send(&a, 0, TAG_A, WORLD).unwrap();
        }
        _ => {
            let mut go = [0u8; 1];
            ep.recv(&mut go, 0, TAG_GO, WORLD).unwrap();
            forge(&ep, 0, &[(KIND_RTS, TAG_FORGED, &GARBAGE)]);
        }
    }
    println!("RESULT rank {} ok", ep.rank());
    ep.finalize().unwrap();
}

fn a_forged_rts_during_a_queued_receive_leaves_its_buffer_alone() {
    run(3, "posted", &[]);
}

// ---------------------------------------------------------------------------------------------
// A scope's receive left to the scope (rank 0): the scope's wait meets garbage from rank 2; the
// receive's pages are unmapped once the scope returned, then rank 1 sends the message.

fn scope() {
    let mut ep = Endpoint::init().unwrap();
    let b = data(3, 100);
    match ep.rank() {
        0 => {
            let mut pages = Pages::new(4096);
            let buf = pages.bytes();
            ep.send(&[1], 2, TAG_GO, WORLD).unwrap();
            let res = ep.scope(|s| {
                s.irecv(buf, 1, TAG_B, WORLD).unwrap();
            });
            pages.unmap();
            ep.send(&[2], 1, TAG_GO, WORLD).unwrap();
            let mut got = [0u8; 128];
            let st = ep.recv(&mut got, 1, TAG_B, WORLD).unwrap();
            assert_eq!(&got[..st.len], &b[..], "the message whole, in the next receive");
            match res {
                Err(e) if is_forged_error(&e) => {}
                other => panic!("the scope reports the forged message: {other:?}"),
            }
        }
        1 => {
            let mut go = [0u8; 1];
            ep.recv(&mut go, 0, TAG_GO, WORLD).unwrap();
            ep.send(&b, 0, TAG_B, WORLD).unwrap();
        }
        _ => {
            let mut go = [0u8; 1];
            ep.recv(&mut go, 0, TAG_GO, WORLD).unwrap();
            forge(&ep, 0, &[(KIND_RTS, TAG_FORGED, &GARBAGE)]);
        }
    }
    println!("RESULT rank {} ok", ep.rank());
    ep.finalize().unwrap();
}

fn a_scope_whose_peer_sends_garbage_returns_its_buffers_untouched() {
    run(3, "scope", &[]);
}

// ---------------------------------------------------------------------------------------------
// Raw receives (rank 0) whose `test` and `wait_any` meet garbage (rank 2 sends two messages):
// each call returns the error with its requests over (stale handles), their pages free.

fn raw() {
    let mut ep = Endpoint::init().unwrap();
    let a = data(11, 30);
    let b = data(12, 50);
    match ep.rank() {
        0 => {
            let (mut pa, mut pb) = (Pages::new(4096), Pages::new(4096));
            // SAFETY: the pages stay mapped until the requests are over (below).
            let ra = unsafe { ep.irecv_raw(pa.ptr, pa.len, 1, TAG_A, WORLD) }.unwrap();
            // SAFETY: as above.
            let rb = unsafe { ep.irecv_raw(pb.ptr, pb.len, 1, TAG_B, WORLD) }.unwrap();
            ep.send(&[1], 2, TAG_GO, WORLD).unwrap();
            let tested = loop {
                match ep.test(ra) {
                    Ok(None) => std::thread::sleep(Duration::from_millis(1)),
                    other => break other,
                }
            };
            assert!(matches!(&tested, Err(e) if is_forged_error(e)), "test met the garbage: {tested:?}");
            assert!(matches!(ep.test(ra), Err(Error::InvalidRequest)), "the request is over");
            let any = ep.wait_any(&[rb]);
            assert!(matches!(&any, Err(e) if is_forged_error(e)), "wait_any met the garbage: {any:?}");
            assert!(matches!(ep.wait_any(&[rb]), Err(Error::InvalidRequest)), "the request is over");
            pa.unmap();
            pb.unmap();
            ep.send(&[2], 1, TAG_GO, WORLD).unwrap();
            let mut got = [0u8; 64];
            let st = ep.recv(&mut got, 1, TAG_A, WORLD).unwrap();
            assert_eq!(&got[..st.len], &a[..]);
            let st = ep.recv(&mut got, 1, TAG_B, WORLD).unwrap();
            assert_eq!(&got[..st.len], &b[..]);
        }
        1 => {
            let mut go = [0u8; 1];
            ep.recv(&mut go, 0, TAG_GO, WORLD).unwrap();
            ep.send(&a, 0, TAG_A, WORLD).unwrap();
            ep.send(&b, 0, TAG_B, WORLD).unwrap();
        }
        _ => {
            let mut go = [0u8; 1];
            ep.recv(&mut go, 0, TAG_GO, WORLD).unwrap();
            forge(&ep, 0, &[(KIND_RTS, TAG_FORGED, &GARBAGE), (KIND_RTS, TAG_FORGED, &GARBAGE)]);
        }
    }
    println!("RESULT rank {} ok", ep.rank());
    ep.finalize().unwrap();
}

fn test_and_wait_any_end_their_requests_before_returning_an_error() {
    run(3, "raw", &[]);
}

// ---------------------------------------------------------------------------------------------
// A rendezvous receive in flight when the error comes (rank 0, in a scope's wait): rank 1 is held
// (it does not call its Endpoint) until rank 2 has forged, so the transfer cannot have ended
// before: a ring needs rank 1's copies, a split single copy its writes into rank 0's buffer.
// Once the scope returned the pages are handed out again with a pattern, which must survive.

const BIG: usize = 4 << 20;

fn rendezvous_recv() {
    let mut ep = Endpoint::init().unwrap();
    let msg = data(4, BIG);
    match ep.rank() {
        0 => {
            let mut pages = Pages::new(BIG);
            let buf = pages.bytes();
            let mut mark = [0u8; 1];
            let res = ep.scope(|s| {
                s.irecv(buf, 1, TAG_B, WORLD).unwrap();
                // Behind the RTS: once it is in, the receive above took the RTS.
                s.recv(&mut mark, 1, TAG_MARK, WORLD).unwrap();
                s.send(&[1], 2, TAG_GO, WORLD).unwrap();
            });
            let whole = *pages.bytes() == msg[..];
            let reused = pages.reuse(0xA5);
            ep.recv(&mut mark, 1, TAG_DONE, WORLD).unwrap();
            if reused {
                assert!(pages.bytes().iter().all(|&x| x == 0xA5), "a transfer wrote into the pages after the scope");
                pages.unmap();
            }
            match res {
                Err(e) if is_forged_error(&e) => {}
                other => panic!("the scope reports the forged message: {other:?}"),
            }
            assert!(whole, "the transfer under way was finished before the scope returned");
            println!("rank 0: {:?}", ep.lmt_stats());
        }
        1 => {
            // SAFETY: `msg` outlives the request, waited for below.
            let r = unsafe { ep.isend_raw(msg.as_ptr(), msg.len(), 0, TAG_B, WORLD) }.unwrap();
            ep.send(&[1], 0, TAG_MARK, WORLD).unwrap();
            await_signal("forged");
            ep.wait(r).unwrap();
            ep.send(&[2], 0, TAG_DONE, WORLD).unwrap();
        }
        _ => {
            let mut go = [0u8; 1];
            ep.recv(&mut go, 0, TAG_GO, WORLD).unwrap();
            forge(&ep, 0, &[(KIND_RTS, TAG_FORGED, &GARBAGE)]);
            raise("forged");
        }
    }
    println!("RESULT rank {} ok", ep.rank());
    ep.finalize().unwrap();
}

fn a_rendezvous_receive_in_flight_is_finished_before_the_call_returns() {
    // Through rank 0's ring, and by single copy split with the sender (HELP: rank 1 writes the
    // second half into rank 0's buffer), where the kernel allows single copies.
    run(3, "rendezvous-recv", &[("NEMESIS_LMT", "shm")]);
    run(3, "rendezvous-recv", &[("NEMESIS_LMT", "cma")]);
}

// ---------------------------------------------------------------------------------------------
// A rendezvous send (rank 0, blocking) meets garbage before its receiver (rank 1, held) took the
// RTS: once it returned, its buffer is written over; rank 1 must receive the message as sent.

fn rendezvous_send() {
    let mut ep = Endpoint::init().unwrap();
    let msg = data(5, BIG);
    match ep.rank() {
        0 => {
            let mut out = msg.clone();
            ep.send(&[1], 2, TAG_GO, WORLD).unwrap();
            let sent = ep.send(&out, 1, TAG_B, WORLD);
            out.fill(0x5A);
            let mut done = [0u8; 1];
            ep.recv(&mut done, 1, TAG_DONE, WORLD).unwrap();
            match sent {
                Err(e) if is_forged_error(&e) => {}
                other => panic!("the send met the forged RTS: {other:?}"),
            }
        }
        1 => {
            await_signal("forged");
            let mut got = vec![0u8; BIG];
            let st = ep.recv(&mut got, 0, TAG_B, WORLD).unwrap();
            assert_eq!(st.len, BIG);
            assert!(got == msg, "the message as sent, not what its buffer held after the send returned");
            ep.send(&[2], 0, TAG_DONE, WORLD).unwrap();
        }
        _ => {
            let mut go = [0u8; 1];
            ep.recv(&mut go, 0, TAG_GO, WORLD).unwrap();
            // Rank 0 is in its send by now or soon; the message waits in its queue either way.
            forge(&ep, 0, &[(KIND_RTS, TAG_FORGED, &GARBAGE)]);
            raise("forged");
        }
    }
    println!("RESULT rank {} ok", ep.rank());
    ep.finalize().unwrap();
}

fn a_rendezvous_send_returns_only_once_its_buffer_is_not_read() {
    run(3, "rendezvous-send", &[("NEMESIS_LMT", "shm")]);
    run(3, "rendezvous-send", &[("NEMESIS_LMT", "cma")]);
}

// ---------------------------------------------------------------------------------------------
// The same, but rank 1 looks at its messages before it receives: the RTS waits unexpected when
// rank 0's cancellation comes, and is dropped; rank 0's send fails without anything read.

fn rendezvous_cancelled() {
    let mut ep = Endpoint::init().unwrap();
    let msg = data(6, BIG);
    match ep.rank() {
        0 => {
            let mut out = msg.clone();
            ep.send(&[1], 2, TAG_GO, WORLD).unwrap();
            let sent = ep.send(&out, 1, TAG_B, WORLD);
            out.fill(0x5A);
            ep.send(&[2], 1, TAG_DONE, WORLD).unwrap();
            match sent {
                Err(e) if is_forged_error(&e) => {}
                other => panic!("the send met the forged RTS: {other:?}"),
            }
        }
        1 => {
            await_signal("forged");
            // The RTS goes unexpected, then the cancellation drops it; rank 0 says when its send
            // has returned.
            let mut done = [0u8; 1];
            ep.recv(&mut done, 0, TAG_DONE, WORLD).unwrap();
            assert_eq!(ep.iprobe(0, TAG_B, WORLD).unwrap(), None, "the RTS was withdrawn");
        }
        _ => {
            let mut go = [0u8; 1];
            ep.recv(&mut go, 0, TAG_GO, WORLD).unwrap();
            forge(&ep, 0, &[(KIND_RTS, TAG_FORGED, &GARBAGE)]);
            raise("forged");
        }
    }
    println!("RESULT rank {} ok", ep.rank());
    ep.finalize().unwrap();
}

fn a_rendezvous_send_not_taken_is_cancelled_before_the_call_returns() {
    run(3, "rendezvous-cancelled", &[("NEMESIS_LMT", "shm")]);
    run(3, "rendezvous-cancelled", &[("NEMESIS_LMT", "cma")]);
}

// ---------------------------------------------------------------------------------------------
// A blocking receive (rank 0, through the bypass) matched a rendezvous when a corrupt cell comes
// from its own sender (rank 1 sends its RTS, then a cell out of sequence through a port of its
// own, which stays at the head of rank 0's queue: every later poll fails). The transfer through
// rank 0's ring needs no message of rank 1's to end: it is finished before the receive returns,
// and the pages, handed out again once it returned, keep their pattern while rank 0 goes on
// calling its Endpoint.

fn bypass_rendezvous() {
    let mut ep = Endpoint::init().unwrap();
    let msg = data(7, BIG);
    match ep.rank() {
        0 => {
            let mut pages = Pages::new(BIG);
            let res = ep.recv(pages.bytes(), 1, TAG_B, WORLD);
            let whole = *pages.bytes() == msg[..];
            let reused = pages.reuse(0xA5);
            while !signal("sent").exists() {
                let _ = ep.progress();
                std::thread::sleep(Duration::from_millis(1));
            }
            for _ in 0..100 {
                let _ = ep.progress();
            }
            if reused {
                assert!(pages.bytes().iter().all(|&x| x == 0xA5), "a transfer wrote into the pages after the receive");
                pages.unmap();
            }
            match res {
                Err(Error::Shm(nemesis_shm::Error::Corrupt { what: "cell sequence number", .. })) => {}
                other => panic!("the receive met the corrupt cell: {other:?}"),
            }
            assert!(whole, "the transfer under way was finished before the receive returned");
        }
        _ => {
            // Every message in cells, in the order sent: the RTS, then the forged cell.
            ep.set_fastboxes(false);
            // SAFETY: `msg` outlives the request, waited for below.
            let r = unsafe { ep.isend_raw(msg.as_ptr(), msg.len(), 0, TAG_B, WORLD) }.unwrap();
            // Its sequence number is the RTS's again: out of order where it arrives.
            forge(&ep, 0, &[(KIND_RTS, TAG_FORGED, &GARBAGE)]);
            ep.wait(r).unwrap();
            raise("sent");
        }
    }
    println!("RESULT rank {} ok", ep.rank());
    ep.finalize().unwrap();
}

fn a_blocking_receive_that_took_a_rendezvous_finishes_it_before_it_returns() {
    run(2, "bypass-rendezvous", &[("NEMESIS_LMT", "shm")]);
}

// ---------------------------------------------------------------------------------------------
// A blocking send waiting for cells (rank 0: its receiver, rank 1, holds every cell of rank 0's
// without receiving) meets garbage: once it returned, its buffer is written over; rank 1 must
// receive the message as sent.

/// Cells of rank 0 (`NEMESIS_CELLS_PER_RANK`) and messages of three cells each.
const CELLS: usize = 8;
const THREE_CELLS: usize = 40_000;

fn pending() {
    let mut ep = Endpoint::init().unwrap();
    let msgs: Vec<Vec<u8>> = (0..3).map(|k| data(10 + k, THREE_CELLS)).collect();
    match ep.rank() {
        0 => {
            ep.send(&msgs[0], 1, TAG_B, WORLD).unwrap();
            ep.send(&msgs[1], 1, TAG_B, WORLD).unwrap();
            let mut out = msgs[2].clone();
            // Two cells go, the rest waits for cells rank 1 holds until the forged message came.
            let sent = ep.send(&out, 1, TAG_B, WORLD);
            out.fill(0x5A);
            raise("returned");
            let mut done = [0u8; 1];
            ep.recv(&mut done, 1, TAG_DONE, WORLD).unwrap();
            match sent {
                Err(e) if is_forged_error(&e) => {}
                other => panic!("the send met the forged RTS: {other:?}"),
            }
        }
        1 => {
            // Every cell of rank 0's in our queue: its third send waits for cells.
            let me = ep.local_ranks().iter().position(|&g| g == 1).unwrap() as u16;
            while ep.segment().recv_queue(me).count_linked().unwrap() < CELLS {
                std::thread::sleep(Duration::from_millis(1));
            }
            raise("pending");
            await_signal("returned");
            let mut got = vec![0u8; THREE_CELLS];
            for (k, m) in msgs.iter().enumerate() {
                ep.recv(&mut got, 0, TAG_B, WORLD).unwrap();
                assert!(&got == m, "message {k} as sent");
            }
            ep.send(&[2], 0, TAG_DONE, WORLD).unwrap();
        }
        _ => {
            await_signal("pending");
            forge(&ep, 0, &[(KIND_RTS, TAG_FORGED, &GARBAGE)]);
        }
    }
    println!("RESULT rank {} ok", ep.rank());
    ep.finalize().unwrap();
}

fn a_send_waiting_for_cells_goes_on_from_a_copy_after_an_error() {
    let cells = CELLS.to_string();
    run(3, "pending", &[("NEMESIS_CELLS_PER_RANK", &cells)]);
}

// ---------------------------------------------------------------------------------------------
// An RTS whose length is absurd, at checkpoint time (fault tolerance on, each rank its own group):
// rank 1 forges RTSs claiming `u64::MAX` bytes (more than any buffer) and 2^50 bytes (more than
// this node's memory); rank 0 probes for them, then checkpoints. Neither is allocated: the first
// is refused where it arrives, the second where the checkpoint would pull it in, each with a
// typed error, and the rank goes on.

fn checkpoint() {
    let mut ep = Endpoint::init().unwrap();
    match ep.rank() {
        0 => {
            // Until the second RTS shows; the errors of the calls that met one on arrival.
            let mut refused = Vec::new();
            let seen = loop {
                match ep.iprobe(1, ANY_TAG, WORLD) {
                    Ok(Some(st)) => break st,
                    Ok(None) => std::thread::sleep(Duration::from_millis(1)),
                    Err(e) => {
                        assert!(refused.len() < 100, "errors again and again: {refused:?}");
                        refused.push(e)
                    }
                }
            };
            // The first was refused where it arrived (the call that met it failed), the second
            // stored: no receive has taken it.
            match &refused[..] {
                [Error::RtsTooLong { sender: 1, len: u64::MAX, limit }] if *limit == nemesis_lmt::wire::LEN_MAX => {}
                other => panic!("the u64::MAX-byte RTS refused on arrival: {other:?}"),
            }
            assert_eq!(seen.len as u64, 1 << 50);
            match ep.checkpoint(b"state") {
                Err(Error::RtsTooLong { sender: 1, len, .. }) if len == 1 << 50 => {}
                other => panic!("a 2^50-byte message is not pulled into a checkpoint: {other:?}"),
            }
            assert_eq!(ep.refused_rts(), 2);
            // The rank goes on: another peer's message comes.
            let mut b = [0u8; 8];
            ep.recv(&mut b, 2, TAG_DONE, WORLD).unwrap();
        }
        1 => {
            let pid = std::process::id();
            let encode = |id, len| {
                let rts = nemesis_lmt::Rts { id, len, addr: 4096, pid, key: 0, backend: nemesis_lmt::Backend::Ring };
                let mut bytes = [0u8; nemesis_lmt::wire::MAX_ENCODED];
                let n = nemesis_lmt::Control::Rts(rts).encode(&mut bytes);
                bytes[..n].to_vec()
            };
            let (huge, larger_than_memory) = (encode(7, u64::MAX), encode(8, 1 << 50));
            forge(&ep, 0, &[(KIND_RTS, TAG_FORGED, &huge), (KIND_RTS, TAG_FORGED, &larger_than_memory)]);
        }
        _ => {
            ep.send(&[9; 8], 0, TAG_DONE, WORLD).unwrap();
        }
    }
    println!("RESULT rank {} ok", ep.rank());
    ep.finalize().unwrap();
}

fn an_absurd_rts_length_is_refused_never_allocated() {
    run_ft("checkpoint", &[]);
}

/// Runs `role` on three ranks with fault tolerance on (failure-free: no launcher recovery), each
/// rank its own group, with `env`.
fn run_ft(role: &str, env: &[(&str, &str)]) {
    let dir = scratch(role);
    std::fs::write(dir.join("groups"), "0 0\n1 1\n2 2\n").unwrap();
    std::fs::create_dir_all(dir.join("ckpt")).unwrap();
    let mut env: Vec<(&str, String)> = env.iter().map(|&(k, v)| (k, v.to_owned())).collect();
    env.extend([
        ("NEMESIS_FT_GROUPS", dir.join("groups").display().to_string()),
        ("NEMESIS_FT_DIR", dir.join("ckpt").display().to_string()),
        ("NEMESIS_TEST_DIR", dir.display().to_string()),
        ("NEMESIS_WAIT", "yield".to_owned()),
    ]);
    let o = job(3, &[], role, &env);
    let _ = std::fs::remove_dir_all(&dir);
    assert!(o.status.success(), "{role}: {}", show(&o));
    assert_eq!(results(&o).len(), 3, "{role}: {}", show(&o));
}

// ---------------------------------------------------------------------------------------------
// A checkpoint pulls an unexpected rendezvous message (rank 1's, held: it does not call its
// Endpoint) into a buffer of its own when garbage comes from rank 2: the checkpoint fails with
// that error, but only once the pull is over (its buffer is not freed under its transfer), and
// the message is kept whole for the receive that comes next.

fn checkpoint_pull() {
    let mut ep = Endpoint::init().unwrap();
    let msg = data(8, BIG);
    match ep.rank() {
        0 => {
            while ep.iprobe(1, TAG_B, WORLD).unwrap().is_none() {
                std::thread::sleep(Duration::from_millis(1));
            }
            raise("probed");
            match ep.checkpoint(b"state") {
                Err(e) if is_forged_error(&e) => {}
                other => panic!("the checkpoint met the forged RTS: {other:?}"),
            }
            let mut got = vec![0u8; BIG];
            assert_eq!(ep.recv(&mut got, 1, TAG_B, WORLD).unwrap().len, BIG);
            assert!(got == msg, "the message pulled in, whole");
        }
        1 => {
            // SAFETY: `msg` outlives the request, waited for below.
            let r = unsafe { ep.isend_raw(msg.as_ptr(), msg.len(), 0, TAG_B, WORLD) }.unwrap();
            await_signal("forged");
            ep.wait(r).unwrap();
        }
        _ => {
            await_signal("probed");
            forge(&ep, 0, &[(KIND_RTS, TAG_FORGED, &GARBAGE)]);
            raise("forged");
        }
    }
    println!("RESULT rank {} ok", ep.rank());
    ep.finalize().unwrap();
}

fn a_checkpoint_finishes_its_pulls_before_it_fails() {
    run_ft("checkpoint-pull", &[("NEMESIS_LMT", "shm")]);
    run_ft("checkpoint-pull", &[("NEMESIS_LMT", "cma")]);
}
