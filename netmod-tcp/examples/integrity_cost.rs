//! What per-frame MACs (`NEMESIS_TCP_INTEGRITY=1`) cost: two TCP netmods over loopback, one
//! thread each, ping-pong of 8-byte messages (one-way latency) and 1 MiB large messages through
//! the rendezvous data path (a window of 8 per round trip: bandwidth), with MACs off and on
//! interleaved in every round.
//!
//! `cargo run --release -p nemesis-netmod-tcp --example integrity_cost [rounds]`

use std::sync::mpsc;
use std::time::{Duration, Instant};

use nemesis_lmt::LmtBackend;
use nemesis_netmod_tcp::{TcpConfig, TcpNetmod};
use nemesis_shm::auth::JobSecret;
use nemesis_shm::netmod::Netmod;
use nemesis_shm::{HeapNode, MsgHeader, Params, Port, PortConfig};

const PINGS: usize = 20_000;
const BIG: usize = 1 << 20;
const WINDOW: u32 = 8;
const BW_ROUNDS: u32 = 40;

/// One message from the peer: its tag.
fn recv<'n>(net: &mut TcpNetmod<'n>, port: &mut Port<'n, HeapNode>) -> i32 {
    loop {
        net.poll(port).unwrap();
        if let Some(inc) = port.poll(&[]).unwrap() {
            let t = inc.header().tag;
            port.release(inc).unwrap();
            return t;
        }
    }
}

/// Runs rank `me` of the pair; returns (one-way latency in µs, bandwidth in MB/s) on rank 0.
fn rank(
    me: u32,
    integrity: bool,
    secret: JobSecret,
    tx: mpsc::Sender<String>,
    rx: mpsc::Receiver<String>,
) -> (f64, f64) {
    let node = HeapNode::new(1, Params { cells_per_rank: 64, ..Params::DEFAULT }).unwrap();
    let mut port = Port::new(&node, 0, PortConfig::default()).unwrap();
    port.netmod_reserve(32).unwrap();
    let cfg = TcpConfig { addr: Some("127.0.0.1".parse().unwrap()), integrity, ..TcpConfig::default() };
    let mut net = TcpNetmod::new(me, 2, secret, cfg).unwrap();
    tx.send(net.card()).unwrap();
    let peer = 1 - me;
    net.connect(peer, &rx.recv().unwrap()).unwrap();
    let h = |tag| MsgHeader { tag, ..MsgHeader::default() };
    // Warm-up: the connection.
    if me == 0 {
        net.send(1, &h(0), None, b"hi").unwrap();
        recv(&mut net, &mut port);
    } else {
        recv(&mut net, &mut port);
        net.send(0, &h(0), None, b"hi").unwrap();
    }
    let t0 = Instant::now();
    for i in 0..PINGS as i32 {
        if me == 0 {
            net.send(1, &h(i), None, &[0u8; 8]).unwrap();
            recv(&mut net, &mut port);
        } else {
            recv(&mut net, &mut port);
            net.send(0, &h(i), None, &[0u8; 8]).unwrap();
        }
    }
    let lat = t0.elapsed().as_secs_f64() * 1e6 / (2 * PINGS) as f64;
    let mut buf = vec![1u8; BIG * WINDOW as usize];
    let t0 = Instant::now();
    for r in 0..BW_ROUNDS {
        let ids = r * WINDOW..(r + 1) * WINDOW;
        if me == 1 {
            for (k, id) in ids.clone().enumerate() {
                // SAFETY: `buf` outlives the transfers, each into its own MiB.
                unsafe { net.start_recv(0, id, buf.as_mut_ptr().add(k * BIG), BIG as u64, None).unwrap() };
            }
            net.send(0, &h(1), None, b"ready").unwrap();
        } else {
            recv(&mut net, &mut port);
            for (k, id) in ids.clone().enumerate() {
                // SAFETY: as above.
                unsafe { net.start_send(1, id, buf.as_ptr().add(k * BIG), BIG as u64).unwrap() };
            }
        }
        let mut done = 0;
        while done < WINDOW {
            net.poll(&mut port).unwrap();
            done += net.take_lmt_done().len() as u32;
        }
        if me == 1 {
            net.send(0, &h(2), None, b"got").unwrap();
        } else {
            recv(&mut net, &mut port);
        }
    }
    let bw = f64::from(BW_ROUNDS * WINDOW) * BIG as f64 / t0.elapsed().as_secs_f64() / 1e6;
    net.finalize().unwrap();
    std::thread::sleep(Duration::from_millis(50));
    (lat, bw)
}

fn pair(integrity: bool) -> (f64, f64) {
    let secret = JobSecret::generate().unwrap();
    let (tx0, rx1) = mpsc::channel();
    let (tx1, rx0) = mpsc::channel();
    let s1 = secret.clone();
    let b = std::thread::spawn(move || rank(1, integrity, s1, tx1, rx1));
    let r = rank(0, integrity, secret, tx0, rx0);
    b.join().unwrap();
    r
}

fn spread(v: &[f64]) -> String {
    let mut s = v.to_vec();
    s.sort_by(f64::total_cmp);
    format!("median {:.2} (min {:.2}, max {:.2})", s[s.len() / 2], s[0], s[s.len() - 1])
}

fn main() {
    let rounds: usize = std::env::args().nth(1).and_then(|a| a.parse().ok()).unwrap_or(5);
    let (mut lat, mut bw) = ([Vec::new(), Vec::new()], [Vec::new(), Vec::new()]);
    for r in 0..rounds {
        for on in [false, true] {
            let (l, b) = pair(on);
            println!(
                "round {r} integrity {}: {l:.2} µs one-way (8 B), {b:.0} MB/s (1 MiB)",
                if on { "on " } else { "off" }
            );
            lat[usize::from(on)].push(l);
            bw[usize::from(on)].push(b);
        }
    }
    for on in [false, true] {
        let k = usize::from(on);
        println!(
            "integrity {}: latency {} µs; bandwidth {} MB/s",
            if on { "on " } else { "off" },
            spread(&lat[k]),
            spread(&bw[k])
        );
    }
}
