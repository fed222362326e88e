//! One-sided operations between two ranks' netmods, over each software provider that has RMA:
//! rank 1 exposes a region, rank 0 writes into it, reads it back, and does atomics on it (where
//! the provider has them), each completed by polling both netmods until rank 0's operations to
//! rank 1 are done; operations outside the region are refused before the provider sees them, and
//! the counters say what carried the bytes; a rank updates its own region through the provider
//! (`rma_loopback`, refused by `udp;ofi_rxd`).
#![cfg(feature = "libfabric")]

use std::time::{Duration, Instant};

use nemesis_netmod_rdma::OfiNetmod;
use nemesis_netmod_rdma::rma::{Atomic, AtomicKind, FiOp, FiType, RmaKey};
use nemesis_netmod_rdma::testing::{connected_pair, netmod_port};
use nemesis_shm::auth::JobSecret;
use nemesis_shm::netmod::Netmod;
use nemesis_shm::{HeapNode, Params, Port};

struct Pair<'n> {
    n: [OfiNetmod<'n>; 2],
    ports: [Port<'n, HeapNode>; 2],
}

impl Pair<'_> {
    /// Rank 0's atomic `kind` of `op` on `count` u64 at byte `off` of `key`, completed.
    fn atomic(&mut self, kind: AtomicKind, op: FiOp, src: &[u64], compare: &[u64], result: &mut [u64], key: &RmaKey) {
        let a = Atomic {
            kind,
            op,
            ty: FiType::U64,
            src: src.as_ptr() as *const u8,
            compare: if compare.is_empty() { std::ptr::null() } else { compare.as_ptr() as *const u8 },
            result: if result.is_empty() { std::ptr::null_mut() } else { result.as_mut_ptr() as *mut u8 },
            count: src.len(),
        };
        // SAFETY: the buffers outlive the flush below.
        unsafe { self.n[0].rma_atomic(1, &a, key, 800) }.unwrap();
        self.flush();
    }

    /// Polls both until rank 0's operations to rank 1 completed (60 s at most).
    fn flush(&mut self) {
        let t0 = Instant::now();
        while !self.n[0].rma_flushed(1).unwrap() {
            for (n, p) in self.n.iter_mut().zip(self.ports.iter_mut()) {
                n.poll(p).unwrap();
            }
            assert!(t0.elapsed() < Duration::from_secs(60), "RMA operations never completed");
        }
    }
}

fn pair<'n>(prov: &str, nodes: &'n [HeapNode; 2]) -> Option<Pair<'n>> {
    let secret = JobSecret::generate().unwrap();
    let (n0, n1) = connected_pair(prov, &secret)?;
    Some(Pair { ports: [netmod_port(&nodes[0]), netmod_port(&nodes[1])], n: [n0, n1] })
}

fn run(prov: &str) {
    let p = Params { cells_per_rank: 64, ..Params::DEFAULT };
    let nodes = [HeapNode::new(1, p).unwrap(), HeapNode::new(1, p).unwrap()];
    let Some(mut j) = pair(prov, &nodes) else { return };
    let caps = j.n[0].rma_caps();
    eprintln!("{prov}: {caps:?}");
    if !caps.write {
        assert!(prov != "tcp;ofi_rxm", "tcp;ofi_rxm has RMA writes");
        return;
    }
    // Rank 1's region: 4 KiB of u64 words.
    let mut region = vec![0u64; 512];
    // SAFETY: `region` outlives the netmods' use of it (withdrawn below, before it drops).
    let r = unsafe { j.n[1].rma_expose(region.as_mut_ptr() as *mut u8, 4096) }.unwrap();
    let key = RmaKey::from_bytes(&r.key.to_bytes()).unwrap();
    assert_eq!(key.len, 4096);

    // A write, then a read of what it wrote and of what it did not.
    let src: Vec<u8> = (1..=24).collect();
    // SAFETY: `src` lives until the flush.
    unsafe { j.n[0].rma_write(1, src.as_ptr(), src.len(), &key, 16) }.unwrap();
    assert!(j.n[0].rma_pending(1) >= 1);
    j.flush();
    let bytes = |v: &[u64]| v.iter().flat_map(|w| w.to_le_bytes()).collect::<Vec<u8>>();
    assert_eq!(&bytes(&region)[16..40], &src[..], "the write landed");
    assert_eq!(&bytes(&region)[..16], &[0; 16]);
    let mut back = vec![0u8; 48];
    // SAFETY: `back` lives until the flush.
    unsafe { j.n[0].rma_read(1, back.as_mut_ptr(), 48, &key, 8) }.unwrap();
    j.flush();
    assert_eq!(&back[8..32], &src[..]);
    assert_eq!((&back[..8], &back[32..]), (&[0u8; 8][..], &[0u8; 16][..]));

    // Outside the region: refused, nothing posted.
    for (off, n) in [(4096, 1), (4089, 8), (u64::MAX, 2)] {
        // SAFETY: refused before any use of the buffer.
        let e = unsafe { j.n[0].rma_write(1, src.as_ptr(), n, &key, off) }.unwrap_err();
        assert!(e.to_string().contains("outside the region"), "{e}");
    }
    assert_eq!(j.n[0].rma_pending(1), 0);
    let s = j.n[0].stats();
    assert_eq!((s.rma_put_bytes, s.rma_get_bytes), (24, 48));

    if caps.atomic && j.n[0].rma_atomic_valid(AtomicKind::Fetch, FiOp::Sum, FiType::U64) {
        region[100] = 40;
        let mut old = [0u64];
        j.atomic(AtomicKind::Fetch, FiOp::Sum, &[2], &[], &mut old, &key);
        assert_eq!((old[0], region[100]), (40, 42), "fetch and add");
        j.atomic(AtomicKind::Compare, FiOp::Cswap, &[7], &[42], &mut old, &key);
        assert_eq!((old[0], region[100]), (42, 7), "compare and swap");
        if j.n[0].rma_atomic_valid(AtomicKind::Update, FiOp::Sum, FiType::U64) {
            j.atomic(AtomicKind::Update, FiOp::Sum, &[1; 4], &[], &mut [], &key);
            assert_eq!(&region[100..104], &[8, 1, 1, 1]);
        }
        assert!(j.n[0].stats().rma_atomics >= 2);
        // Loopback: rank 1 updates its own region through the provider (refused by rxd).
        if let Err(e) = j.n[1].rma_loopback() {
            assert!(prov.contains("ofi_rxd"), "{prov}: no loopback: {e}");
            j.n[1].rma_withdraw(r.id);
            return;
        }
        let (src, mut old) = ([5u64], [0u64]);
        let a = Atomic {
            kind: AtomicKind::Fetch,
            op: FiOp::Sum,
            ty: FiType::U64,
            src: src.as_ptr() as *const u8,
            compare: std::ptr::null(),
            result: old.as_mut_ptr() as *mut u8,
            count: 1,
        };
        // SAFETY: the buffers outlive the loop below, which waits for the completion.
        unsafe { j.n[1].rma_atomic(1, &a, &key, 800) }.unwrap();
        let t0 = Instant::now();
        while !j.n[1].rma_flushed(1).unwrap() {
            for (n, p) in j.n.iter_mut().zip(j.ports.iter_mut()) {
                n.poll(p).unwrap();
            }
            assert!(t0.elapsed() < Duration::from_secs(60), "the loopback atomic never completed");
        }
        assert_eq!((old[0], region[100]), (8, 13), "fetch and add to this process's own region");
    } else {
        assert!(prov != "tcp;ofi_rxm", "tcp;ofi_rxm has atomics");
    }
    j.n[1].rma_withdraw(r.id);
}

#[test]
fn write_read_and_atomics_over_tcp_rxm() {
    run("tcp;ofi_rxm");
}

#[test]
fn write_read_and_atomics_over_shm() {
    run("shm");
}

#[test]
fn write_read_and_atomics_over_udp_rxd() {
    run("udp;ofi_rxd");
}
