//! `nemesis-bench instructions`: instructions per operation under callgrind, for the code as it
//! ships (release build, inlined as in real use, on a real mapped segment).
//!
//! Each region runs an operation `iters` (at least 10,000) times between callgrind client
//! requests; an empty loop with the same indexing is measured the same way and subtracted, so
//! the figure is the operation alone. Regions:
//! - `enqueue`: one NEMESIS enqueue of a cell on a queue;
//! - `dequeue`: one dequeue (shadow head, `next` link, and the emptying CAS on the last cell);
//! - `fastbox-send+recv`: an 8-byte message written into a fastbox and read back (peek, copy of
//!   the 8 bytes, release);
//! - `port-fastbox-send+recv`: the same through the port API (`send`, `poll`, `copy_to`,
//!   `release`), as the layer above uses it;
//! - `port-queue-send+recv`: an 8-byte message through a cell (no fastbox) via the port API.

use std::hint::black_box;

use nemesis_shm::{Backing, MsgHeader, Node, Params, Port, PortConfig, Segment, Sent};

use crate::callgrind::{self, region};

/// Region names in print order.
pub const REGIONS: [&str; 5] =
    ["enqueue", "dequeue", "fastbox-send+recv", "port-fastbox-send+recv", "port-queue-send+recv"];

fn segment(iters: usize) -> Segment {
    let p = Params {
        cell_size: 256,
        cells_per_rank: (iters as u32 + 16).next_power_of_two(),
        fastbox_slots: 8,
        fastbox_slot_size: 256,
        fastboxes_per_rank: 1,
        ..Params::DEFAULT
    };
    Segment::create(2, p, Backing::Memfd).expect("segment")
}

/// Runs every region; meant to run under callgrind (outside it the dumps are no-ops).
pub fn worker(iters: usize) {
    let seg = segment(iters);
    seg.watch_pids(false);
    let fq = seg.free_queue(0);
    let cells: Vec<_> = (0..iters).map(|_| fq.dequeue(&seg).expect("free").expect("a free cell")).collect();
    region("baseline", iters, |i| {
        black_box(cells[i]);
    });
    let q = seg.recv_queue(1);
    region("enqueue", iters, |i| {
        q.enqueue(cells[i], 0, 1).expect("enqueue");
    });
    region("dequeue", iters, |_| {
        black_box(q.dequeue(&seg).expect("dequeue"));
    });

    // SAFETY: rank 1 hosts box 0.
    let fb = unsafe { seg.fastbox(1, 0) };
    let (mut snext, mut sacked, mut rnext) = (0u32, 0u32, 0u32);
    let hdr = MsgHeader { tag: 1, len: 8, ..MsgHeader::default() };
    let payload = [7u8; 8];
    let mut out = [0u8; 8];
    region("fastbox-send+recv", iters, |_| {
        assert!(fb.try_send(&mut snext, &mut sacked, &hdr, 0, &payload));
        let m = fb.peek(rnext).expect("peek").expect("a message");
        // SAFETY: `m.payload` points to the published payload of `m.len` (8) bytes.
        unsafe { nemesis_shm::cell::copy_bytes(m.payload, out.as_mut_ptr(), m.len as usize) };
        fb.release(&mut rnext);
        black_box(&out);
    });

    // A fresh segment for the port regions (the box above is in use by hand).
    let seg = segment(64);
    seg.watch_pids(false);
    let cfg = PortConfig { fastbox_after: 1, ..PortConfig::default() };
    let mut a = Port::new(&seg, 0, cfg).expect("port");
    let mut b = Port::new(&seg, 1, cfg).expect("port");
    round_trip(&mut a, &mut b, &hdr, &payload, &mut out); // claims the fastbox
    region("port-fastbox-send+recv", iters, |_| round_trip(&mut a, &mut b, &hdr, &payload, &mut out));
    // A rank has one port at a time.
    drop((a, b));
    let cfg = PortConfig { fastbox_after: u32::MAX, ..PortConfig::default() };
    let mut a = Port::new(&seg, 0, cfg).expect("port");
    let mut b = Port::new(&seg, 1, cfg).expect("port");
    region("port-queue-send+recv", iters, |_| round_trip(&mut a, &mut b, &hdr, &payload, &mut out));
}

/// An 8-byte message from `a` (rank 0) to `b` (rank 1) through the port API.
#[inline(always)]
fn round_trip(a: &mut Port<'_, Segment>, b: &mut Port<'_, Segment>, hdr: &MsgHeader, payload: &[u8], out: &mut [u8]) {
    match a.send(1, hdr, payload).expect("send") {
        Sent::Done => {}
        Sent::Pending(_) => panic!("an 8-byte message never waits here"),
    }
    let inc = b.poll(&[0]).expect("poll").expect("a message");
    inc.copy_to(out);
    b.release(inc).expect("release");
    black_box(&out);
}

/// Runs the worker under callgrind and prints `name count` lines (per operation, loop overhead
/// subtracted).
pub fn run(iters: usize) -> std::io::Result<()> {
    let exe = std::env::current_exe()?;
    let it = iters.to_string();
    let dumps = callgrind::run_under_callgrind(&exe, &["__instructions-worker", "--iters", &it])?;
    let get = |name: &str| dumps.iter().find(|(n, _)| n == name).map(|(_, c)| *c as f64 / iters as f64);
    let base = get("baseline").ok_or_else(|| std::io::Error::other("no baseline dump from callgrind"))?;
    println!("instructions per operation (callgrind, {iters} operations, loop overhead {base:.1} subtracted)");
    for name in REGIONS {
        let v = get(name).ok_or_else(|| std::io::Error::other(format!("no {name} dump from callgrind")))?;
        println!("{name} {:.1}", v - base);
    }
    Ok(())
}
