//! A rank of the TCP netmod's tests (`netmod_auth.rs`, `netmod_restart.rs`, which include this
//! file by path): a port on a heap node with cells set aside for the netmod, the netmod, and what
//! arrived through it.

use std::net::SocketAddr;

use nemesis_netmod_tcp::{TcpConfig, TcpNetmod};
use nemesis_shm::auth::JobSecret;
use nemesis_shm::netmod::{KIND_PEER_GONE, Netmod};
use nemesis_shm::{HeapNode, Params, Port, PortConfig};

/// A node of one rank, with room for the netmod's cells.
pub fn node() -> HeapNode {
    HeapNode::new(1, Params { cells_per_rank: 64, ..Params::DEFAULT }).unwrap()
}

/// A rank: its port, its netmod, what arrived (tag of each message) and the deaths announced.
pub struct Rank<'n> {
    pub port: Port<'n, HeapNode>,
    pub net: TcpNetmod<'n>,
    pub tags: Vec<i32>,
    pub gone: Vec<u32>,
}

impl<'n> Rank<'n> {
    /// Rank `me` of a job of `size` whose secret is `secret`.
    pub fn new(node: &'n HeapNode, me: u32, size: u32, secret: &JobSecret, cfg: TcpConfig) -> Rank<'n> {
        let mut port = Port::new(node, 0, PortConfig::default()).unwrap();
        port.netmod_reserve(32).unwrap();
        Rank { port, net: TcpNetmod::new(me, size, secret.clone(), cfg).unwrap(), tags: Vec::new(), gone: Vec::new() }
    }

    /// One netmod poll, then everything in the receive queue.
    pub fn step(&mut self) {
        self.net.poll(&mut self.port).unwrap();
        while let Some(inc) = self.port.poll(&[]).unwrap() {
            let h = inc.header();
            if h.kind == KIND_PEER_GONE {
                self.gone.push(h.src);
            } else if inc.is_last() {
                self.tags.push(h.tag);
            }
            self.port.release(inc).unwrap();
        }
    }
}

/// `tcp:<ip>:<port>:<udp>` → (TCP address, UDP address).
pub fn addrs(card: &str) -> (SocketAddr, SocketAddr) {
    let mut it = card.strip_prefix("tcp:").unwrap().rsplitn(3, ':');
    let udp: u16 = it.next().unwrap().parse().unwrap();
    let port: u16 = it.next().unwrap().parse().unwrap();
    let ip: std::net::IpAddr = it.next().unwrap().parse().unwrap();
    (SocketAddr::new(ip, port), SocketAddr::new(ip, udp))
}
