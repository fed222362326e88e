//! Ping-pong and streaming between two ofi netmods driven by one thread: the work of the netmod
//! and the provider per eager message, without two processes competing for the CPUs (steadier
//! than `nemesis-bench` on a loaded machine). `cargo run --release -p nemesis-netmod-rdma
//! --features libfabric --example pingpong -- [PROVIDER, default shm] [REPETITIONS, default 15]`:
//! per size, the one-way time (the fastest and the median repetition) and the streaming rate
//! (64 messages, then an answer; the fastest and the median).
use std::time::Instant;

use nemesis_netmod_rdma::{OfiConfig, OfiNetmod};
use nemesis_shm::auth::JobSecret;
use nemesis_shm::netmod::Netmod;
use nemesis_shm::{HeapNode, MsgHeader, Params, Port, PortConfig};

struct Rank<'n> {
    net: OfiNetmod<'n>,
    port: Port<'n, HeapNode>,
}

impl Rank<'_> {
    /// Polls once; whole messages received.
    fn poll(&mut self) -> usize {
        self.net.poll(&mut self.port).unwrap();
        let mut n = 0;
        while let Some(inc) = self.port.poll(&[]).unwrap() {
            if inc.is_last() {
                n += 1;
            }
            self.port.release(inc).unwrap();
        }
        n
    }
}

fn main() {
    let prov = std::env::args().nth(1).unwrap_or("shm".into());
    let reps: usize = std::env::args().nth(2).and_then(|s| s.parse().ok()).unwrap_or(15);
    let secret = JobSecret::generate().unwrap();
    let cfg = OfiConfig {
        provider: Some(prov.clone()),
        domain: (prov != "shm").then(|| "lo".into()),
        heartbeat_addr: Some("127.0.0.1".parse().unwrap()),
        ..OfiConfig::default()
    };
    let p = Params { cells_per_rank: 128, ..Params::DEFAULT };
    let nodes = [HeapNode::new(1, p).unwrap(), HeapNode::new(1, p).unwrap()];
    let mk = |me: u32, node: &'static HeapNode| {
        let net = OfiNetmod::new(me, 2, secret.clone(), cfg.clone()).unwrap();
        let mut port = Port::new(node, 0, PortConfig::default()).unwrap();
        port.netmod_reserve(96).unwrap();
        Rank { net, port }
    };
    let nodes: &'static [HeapNode; 2] = Box::leak(Box::new(nodes));
    let (mut a, mut b) = (mk(0, &nodes[0]), mk(1, &nodes[1]));
    let (ca, cb) = (a.net.card(), b.net.card());
    a.net.connect(1, &cb).unwrap();
    b.net.connect(0, &ca).unwrap();
    let h = MsgHeader::default();
    println!("{prov}: size  latency us (min / median of {reps} reps)  bandwidth MB/s (max / median)");
    for &size in &[8usize, 64, 512, 4096, 12288] {
        let msg = vec![7u8; size];
        let iters = 2000 / (1 + size / 4096);
        let mut lat = Vec::new();
        let mut bw = Vec::new();
        for rep in 0..reps + 1 {
            let t = Instant::now();
            for _ in 0..iters {
                a.net.send(1, &h, None, &msg).unwrap();
                while b.poll() == 0 {
                    a.poll();
                }
                b.net.send(0, &h, None, &msg).unwrap();
                while a.poll() == 0 {
                    b.poll();
                }
            }
            let one_way = t.elapsed().as_secs_f64() * 1e6 / (2 * iters) as f64;
            // Streaming: 64 messages, then an empty answer.
            let t = Instant::now();
            let rounds = iters / 64 + 1;
            for _ in 0..rounds {
                for _ in 0..64 {
                    a.net.send(1, &h, None, &msg).unwrap();
                }
                let mut got = 0;
                while got < 64 {
                    got += b.poll();
                    a.poll();
                }
                b.net.send(0, &h, None, &[]).unwrap();
                while a.poll() == 0 {
                    b.poll();
                }
            }
            let mbs = (rounds * 64 * size) as f64 / t.elapsed().as_secs_f64() / 1e6;
            if rep > 0 {
                lat.push(one_way);
                bw.push(mbs);
            }
        }
        lat.sort_by(f64::total_cmp);
        bw.sort_by(f64::total_cmp);
        println!(
            "  {size:6}  {:8.2} / {:8.2}   {:8.1} / {:8.1}",
            lat[0],
            lat[lat.len() / 2],
            bw[bw.len() - 1],
            bw[bw.len() / 2]
        );
    }
}
