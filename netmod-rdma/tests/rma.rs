//! One-sided operations between two ranks' netmods, over each software provider that has RMA:
//! rank 1 exposes a region, rank 0 writes into it, reads it back, and does atomics on it (where
//! the provider has them), each completed by polling both netmods until rank 0's operations to
//! rank 1 are done; operations outside the region are refused before the provider sees them, and
//! the counters say what carried the bytes.
#![cfg(feature = "libfabric")]

use std::time::{Duration, Instant};

use nemesis_netmod_rdma::rma::{AtomicKind, FiOp, FiType, RmaKey};
use nemesis_netmod_rdma::{OfiConfig, OfiNetmod};
use nemesis_shm::auth::JobSecret;
use nemesis_shm::netmod::Netmod;
use nemesis_shm::{HeapNode, Params, Port, PortConfig};

fn cfg(prov: &str) -> OfiConfig {
    OfiConfig {
        provider: Some(prov.into()),
        domain: (prov != "shm").then(|| "lo".into()),
        heartbeat_addr: Some("127.0.0.1".parse().unwrap()),
        ..OfiConfig::default()
    }
}

fn in_ci() -> bool {
    std::env::var("CI").is_ok_and(|v| v == "true" || v == "1")
}

struct Pair<'n> {
    n: [OfiNetmod<'n>; 2],
    ports: [Port<'n, HeapNode>; 2],
}

impl Pair<'_> {
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
    let mk = |me: u32| match OfiNetmod::new(me, 2, secret.clone(), cfg(prov)) {
        Ok(n) => Some(n),
        Err(e) if !in_ci() => {
            eprintln!("skipped: ofi provider {prov}: {e}");
            None
        }
        Err(e) => panic!("ofi provider {prov}: {e}"),
    };
    let (mut n0, mut n1) = (mk(0)?, mk(1)?);
    let (c0, c1) = (n0.card(), n1.card());
    n0.connect(1, &c1).unwrap();
    n1.connect(0, &c0).unwrap();
    let port = |node: &'n HeapNode| {
        let mut p = Port::new(node, 0, PortConfig::default()).unwrap();
        p.netmod_reserve(32).unwrap();
        p
    };
    Some(Pair { ports: [port(&nodes[0]), port(&nodes[1])], n: [n0, n1] })
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
        let (two, mut old) = (2u64, 0u64);
        // SAFETY: the operands live until the flush.
        unsafe {
            j.n[0].rma_atomic(
                AtomicKind::Fetch,
                FiOp::Sum,
                FiType::U64,
                1,
                &two as *const u64 as *const u8,
                std::ptr::null(),
                &mut old as *mut u64 as *mut u8,
                1,
                &key,
                800,
            )
        }
        .unwrap();
        j.flush();
        assert_eq!((old, region[100]), (40, 42), "fetch and add");
        let (new, cmp, mut was) = (7u64, 42u64, 0u64);
        // SAFETY: as above.
        unsafe {
            j.n[0].rma_atomic(
                AtomicKind::Compare,
                FiOp::Cswap,
                FiType::U64,
                1,
                &new as *const u64 as *const u8,
                &cmp as *const u64 as *const u8,
                &mut was as *mut u64 as *mut u8,
                1,
                &key,
                800,
            )
        }
        .unwrap();
        j.flush();
        assert_eq!((was, region[100]), (42, 7), "compare and swap");
        if j.n[0].rma_atomic_valid(AtomicKind::Update, FiOp::Sum, FiType::U64) {
            let ones = [1u64; 4];
            // SAFETY: as above.
            unsafe {
                j.n[0].rma_atomic(
                    AtomicKind::Update,
                    FiOp::Sum,
                    FiType::U64,
                    1,
                    ones.as_ptr() as *const u8,
                    std::ptr::null(),
                    std::ptr::null_mut(),
                    4,
                    &key,
                    800,
                )
            }
            .unwrap();
            j.flush();
            assert_eq!(&region[100..104], &[8, 1, 1, 1]);
        }
        assert!(j.n[0].stats().rma_atomics >= 2);
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
