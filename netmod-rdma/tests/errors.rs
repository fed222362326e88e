//! What goes wrong is said clearly: a provider that does not exist, bad or foreign business
//! cards, a peer whose address the provider cannot use (it becomes a dead peer).
#![cfg(feature = "libfabric")]

use nemesis_netmod_rdma::{OfiConfig, OfiNetmod};
use nemesis_shm::auth::JobSecret;
use nemesis_shm::netmod::{KIND_PEER_GONE, Netmod};
use nemesis_shm::{HeapNode, MsgHeader, Params, Port, PortConfig};

fn cfg(prov: &str) -> OfiConfig {
    nemesis_netmod_rdma::testing::config(prov)
}

#[test]
fn an_unknown_provider_is_named_with_libfabrics_reason() {
    let e = OfiNetmod::new(0, 2, JobSecret::generate().unwrap(), cfg("no-such-provider")).unwrap_err().to_string();
    assert!(e.contains("no-such-provider") && e.contains("fi_getinfo") && e.contains("No data available"), "{e}");
}

#[test]
fn bad_cards_are_errors_and_an_unusable_address_is_a_dead_peer() {
    let node = HeapNode::new(1, Params { cells_per_rank: 16, ..Params::DEFAULT }).unwrap();
    let mut port = Port::new(&node, 0, PortConfig::default()).unwrap();
    port.netmod_reserve(8).unwrap();
    let mut a = OfiNetmod::new(0, 3, JobSecret::generate().unwrap(), cfg("tcp;ofi_rxm")).unwrap();
    let b = OfiNetmod::new(1, 3, JobSecret::generate().unwrap(), cfg("shm")).unwrap();
    assert!(a.connect(1, "tcp:127.0.0.1:1:2").is_err(), "not an ofi card");
    let e = a.connect(1, &b.card()).unwrap_err().to_string();
    assert!(e.contains("shm") && e.contains("tcp;ofi_rxm"), "another provider: {e}");
    assert!(a.connect(0, &b.card()).is_err(), "itself is not a peer");
    // A well-formed card whose fabric address the provider refuses: rank 2 is dead at once.
    a.connect(2, "ofi/tcp;ofi_rxm/127.0.0.1/9/00").unwrap();
    assert!(matches!(a.send(2, &MsgHeader::default(), None, b"x"), Err(nemesis_shm::Error::NetPeerDead { rank: 2 })));
    a.poll(&mut port).unwrap();
    let inc = port.poll(&[]).unwrap().expect("the notice");
    assert_eq!((inc.kind(), inc.header().src), (KIND_PEER_GONE, 2));
    port.release(inc).unwrap();
}
