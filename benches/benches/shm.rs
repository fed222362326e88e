//! Criterion micro-benchmarks of the shared-memory core, single process (for development; the
//! user-facing figures come from the `nemesis-bench` CLI).

use std::hint::black_box;

use criterion::{Criterion, criterion_group, criterion_main};
use nemesis_shm::{Backing, MsgHeader, Node, Params, Port, PortConfig, Segment, Sent};

fn segment() -> Segment {
    let p = Params { cell_size: 256, cells_per_rank: 1024, ..Params::DEFAULT };
    let s = Segment::create(2, p, Backing::Memfd).expect("segment");
    s.watch_pids(false);
    s
}

fn queue(c: &mut Criterion) {
    let seg = segment();
    let cell = seg.free_queue(0).dequeue(&seg).unwrap().unwrap();
    let q = seg.recv_queue(1);
    c.bench_function("enqueue+dequeue", |b| {
        b.iter(|| {
            q.enqueue(black_box(cell), 0, 1).unwrap();
            black_box(q.dequeue(&seg).unwrap());
        })
    });
}

fn fastbox(c: &mut Criterion) {
    let seg = segment();
    // SAFETY: rank 1 hosts fastboxes.
    let fb = unsafe { seg.fastbox(1, 0) };
    let (mut s, mut a, mut r) = (0, 0, 0);
    let hdr = MsgHeader { len: 8, ..MsgHeader::default() };
    let mut out = [0u8; 8];
    c.bench_function("fastbox send+recv 8 B", |b| {
        b.iter(|| {
            assert!(fb.try_send(&mut s, &mut a, &hdr, None, 0, black_box(&[1u8; 8])));
            let m = fb.peek(r).unwrap().unwrap();
            // SAFETY: `m.payload` points to the 8 published payload bytes.
            unsafe { nemesis_shm::cell::copy_bytes(m.payload, out.as_mut_ptr(), m.len as usize) };
            fb.release(&mut r);
            black_box(&out);
        })
    });
}

fn port(c: &mut Criterion) {
    let seg = segment();
    for (name, after) in [("port fastbox send+poll 8 B", 1), ("port queue send+poll 8 B", u32::MAX)] {
        let cfg = PortConfig { fastbox_after: after, ..PortConfig::default() };
        let mut a = Port::new(&seg, 0, cfg).unwrap();
        let mut b = Port::new(&seg, 1, cfg).unwrap();
        let mut out = [0u8; 8];
        c.bench_function(name, |bch| {
            bch.iter(|| {
                assert!(matches!(a.send(1, &MsgHeader::default(), None, black_box(&[1u8; 8])).unwrap(), Sent::Done));
                let inc = b.poll(&[0]).unwrap().unwrap();
                inc.copy_to(&mut out);
                b.release(inc).unwrap();
            })
        });
    }
}

criterion_group!(benches, queue, fastbox, port);
criterion_main!(benches);
