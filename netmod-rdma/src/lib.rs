//! # nemesis-netmod-rdma: the libfabric (OFI) network module
//!
//! Implements [`nemesis_shm::netmod::Netmod`] and [`nemesis_lmt::LmtBackend`] over libfabric, the
//! interface to HPC networks (InfiniBand through `verbs`, Omni-Path through `psm2`/`opx`,
//! Slingshot through `cxi`, EFA) and to its software providers (`tcp;ofi_rxm`, `udp;ofi_rxd`,
//! `shm`, `sockets`), which run the same API on any machine. A netmod as NEMESIS has them: its
//! arrivals go into the process's one receive queue (shared reference `nemesis.md`, "Netmods",
//! L696, L830–887). Why it is built so, and what was measured: `docs/design/ofi.md`.
//!
//! - **endpoints**: one `FI_EP_RDM` endpoint with tagged messages (`FI_TAGGED`), in order to
//!   each peer (`FI_ORDER_SAS`); one completion queue polled by the progress engine
//!   (`FI_PROGRESS_MANUAL`); an address vector filled from the peers' business cards ([`card`]).
//! - **eager messages** ([`frag`]): fragments of the cell header, piggyback room, data and a MAC,
//!   all landing in the same posted buffers ([`tags::MSG`]), then copied into cells of the
//!   receive queue, where the Endpoint matches them like any other arrival.
//! - **large messages** ([`nemesis_lmt::NetLmt`]): an RMA read (`fi_read`) of the sender's
//!   registered buffer where the provider has `FI_RMA`, else (or with `NEMESIS_OFI_RNDV=send`)
//!   data sent two-sided into receives the receiver posts; registrations cached ([`mrcache`]).
//! - **one-sided operations** ([`rma`]): regions exposed to peers, `fi_write`, `fi_read` and
//!   atomics to them where the provider has `FI_RMA`/`FI_ATOMIC`, completions counted per peer
//!   (MPI windows whose targets are on other nodes).
//! - **failures**: a completion error, a refused send or address, or silence (the heartbeats of
//!   [`nemesis_shm::netmod::heartbeat`]) make a peer dead; a finalizing process says goodbye.
//!
//! Invariants:
//! - a libfabric tag says what a message is, never its nemesis source, tag or context;
//! - a fragment is its claimed sender's only if its MAC, keyed from the job's secret, verifies
//!   and its pair's 64-bit sequence number is new and within the receive buffers' reach; any
//!   other is dropped and counted (`OfiStats::refused`, a [`frag::Refusal`]), never a death;
//! - each peer's eager messages reach the receive queue in the order it sent them;
//! - a dead peer's [`KIND_PEER_GONE`] notice follows its last arrival, and its transfers fail;
//! - registration keys we choose are random: the key is all a read needs.
//!
//! The libfabric code needs the crate feature `libfabric` (bindings generated against the
//! system's headers, a C shim for libfabric's `static inline` calls, the library opened at run
//! time); without it the crate holds only its configuration and wire helpers.
//!
//! [`KIND_PEER_GONE`]: nemesis_shm::netmod::KIND_PEER_GONE

#[cfg(feature = "libfabric")]
mod fabric;
pub mod frag;
#[doc(hidden)]
pub mod fuzzing;
// Used by `fabric` (feature `libfabric`); built and unit-tested without it too.
#[cfg_attr(not(feature = "libfabric"), allow(dead_code))]
pub mod mrcache;
#[cfg(feature = "libfabric")]
mod ofi;
pub mod rma;
#[cfg(feature = "libfabric")]
#[doc(hidden)]
pub mod sys;
#[cfg(feature = "libfabric")]
#[doc(hidden)]
pub mod testing;

use std::net::IpAddr;

use nemesis_shm::Error;
use nemesis_shm::netmod::heartbeat::Timing;

#[cfg(feature = "libfabric")]
pub use ofi::{OfiNetmod, OfiStats, RxBuffers};

/// How large messages move.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Rndv {
    /// The receiver reads the sender's registered buffer where the provider has `FI_RMA`; else
    /// as `Send`.
    #[default]
    Read,
    /// The sender sends the data two-sided into the receiver's posted buffer.
    Send,
}

/// Settings of the ofi netmod.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct OfiConfig {
    /// The provider (`NEMESIS_OFI_PROVIDER`, e.g. `tcp;ofi_rxm`, `shm`, `verbs;ofi_rxm`); by
    /// default the first `fi_getinfo` offers with the capabilities needed.
    pub provider: Option<String>,
    /// The domain (`NEMESIS_OFI_DOMAIN`: an interface such as `lo` or `eth0` for IP providers, a
    /// device such as `mlx5_0`); by default the provider's first.
    pub domain: Option<String>,
    /// `NEMESIS_OFI_RNDV=read|send`.
    pub rndv: Rndv,
    /// Idle registrations kept for reuse (`NEMESIS_OFI_MR_CACHE`, 0: none); by default 64 for
    /// software providers and none for hardware ones (see [`mrcache`]).
    pub mr_cache: Option<usize>,
    /// Address of the heartbeat socket (`NEMESIS_OFI_HEARTBEAT_ADDR`, or the first address of the
    /// interface `NEMESIS_OFI_HEARTBEAT_IF`); by default the first non-loopback IPv4 address.
    pub heartbeat_addr: Option<IpAddr>,
    /// Heartbeat period and timeout (`NEMESIS_OFI_HEARTBEAT_MS`, default 500, and
    /// `NEMESIS_OFI_TIMEOUT_MS`, default 10 periods).
    pub timing: Timing,
    /// Largest eager message accepted (larger ones go by rendezvous).
    pub max_message: usize,
}

impl Default for OfiConfig {
    fn default() -> Self {
        OfiConfig {
            provider: None,
            domain: None,
            rndv: Rndv::Read,
            mr_cache: None,
            heartbeat_addr: None,
            timing: Timing::default(),
            max_message: 16 << 20,
        }
    }
}

/// Idle registrations kept by default where the cache is safe.
pub const DEFAULT_MR_CACHE: usize = 64;

impl OfiConfig {
    /// The defaults with the `NEMESIS_OFI_*` overrides.
    pub fn from_env() -> Result<OfiConfig, Error> {
        let var = |k: &str| std::env::var(k).ok().map(|v| v.trim().to_owned()).filter(|v| !v.is_empty());
        let rndv = match var("NEMESIS_OFI_RNDV").as_deref() {
            None | Some("read") => Rndv::Read,
            Some("send") => Rndv::Send,
            Some(v) => return Err(Error::Net(format!("NEMESIS_OFI_RNDV={v}: expected read or send"))),
        };
        let mr_cache = match var("NEMESIS_OFI_MR_CACHE") {
            None => None,
            Some(v) => Some(
                v.parse()
                    .map_err(|_| Error::Net(format!("NEMESIS_OFI_MR_CACHE={v}: expected a number of registrations")))?,
            ),
        };
        Ok(OfiConfig {
            provider: var("NEMESIS_OFI_PROVIDER"),
            domain: var("NEMESIS_OFI_DOMAIN"),
            rndv,
            mr_cache,
            heartbeat_addr: nemesis_shm::netmod::addr::addr_from_env(
                "NEMESIS_OFI_HEARTBEAT_ADDR",
                "NEMESIS_OFI_HEARTBEAT_IF",
            )?,
            timing: Timing::from_env("NEMESIS_OFI_HEARTBEAT_MS", "NEMESIS_OFI_TIMEOUT_MS")?,
            ..OfiConfig::default()
        })
    }

    /// Idle registrations to keep with provider `prov`: the setting, else
    /// [`DEFAULT_MR_CACHE`] for the software providers and 0 for the others.
    pub fn mr_cache_for(&self, prov: &str) -> usize {
        self.mr_cache.unwrap_or_else(|| if is_software(prov) { DEFAULT_MR_CACHE } else { 0 })
    }
}

/// True for libfabric's software providers (a name and the utility layers on top of it), whose
/// registrations pin nothing.
pub fn is_software(prov: &str) -> bool {
    prov.split(';').all(|p| matches!(p, "tcp" | "udp" | "shm" | "sockets" | "net" | "ofi_rxm" | "ofi_rxd"))
}

/// A business card: `ofi/<provider>/<heartbeat ip>/<heartbeat port>/<fabric address, hex>`.
pub fn card(prov: &str, hb: std::net::SocketAddr, name: &[u8]) -> String {
    let hex: String = name.iter().map(|b| format!("{b:02x}")).collect();
    format!("ofi/{prov}/{}/{}/{hex}", hb.ip(), hb.port())
}

/// Decodes a card: `(provider, heartbeat address, fabric address)`.
pub fn parse_card(card: &str) -> Option<(String, std::net::SocketAddr, Vec<u8>)> {
    let mut it = card.strip_prefix("ofi/")?.split('/');
    let prov = it.next()?.to_owned();
    let ip: IpAddr = it.next()?.parse().ok()?;
    let port: u16 = it.next()?.parse().ok()?;
    let hex = it.next()?;
    if it.next().is_some() || hex.is_empty() || hex.len() % 2 != 0 || prov.is_empty() {
        return None;
    }
    let name =
        (0..hex.len()).step_by(2).map(|i| u8::from_str_radix(hex.get(i..i + 2)?, 16).ok()).collect::<Option<_>>()?;
    Some((prov, std::net::SocketAddr::new(ip, port), name))
}

/// The libfabric tags: a class in the top four bits, then for large-message data the sender's
/// rank and the transfer id. The nemesis (source, tag, context) is never in them.
pub mod tags {
    /// An eager message fragment: every one matches the same posted buffers.
    pub const MSG: u64 = 1 << 60;
    /// Data of a large message (two-sided rendezvous).
    pub const DATA: u64 = 2 << 60;
    /// Ranks that fit in a data tag.
    pub const MAX_RANKS: u32 = 1 << 28;

    /// The tag of the data of transfer `id` from rank `src`.
    pub const fn data(src: u32, id: u32) -> u64 {
        DATA | ((src as u64 & (MAX_RANKS as u64 - 1)) << 32) | id as u64
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cards_round_trip_and_junk_is_refused() {
        let hb: std::net::SocketAddr = "10.0.0.7:4000".parse().unwrap();
        let c = card("tcp;ofi_rxm", hb, &[0, 1, 0xab, 0xff]);
        assert_eq!(c, "ofi/tcp;ofi_rxm/10.0.0.7/4000/0001abff");
        assert_eq!(parse_card(&c), Some(("tcp;ofi_rxm".into(), hb, vec![0, 1, 0xab, 0xff])));
        let v6: std::net::SocketAddr = "[::1]:9".parse().unwrap();
        assert_eq!(parse_card(&card("shm", v6, &[7])).unwrap().1, v6);
        for bad in [
            "tcp:1.2.3.4:1:2",
            "ofi/shm/1.2.3.4/1/abc",
            "ofi/shm/x/1/ab",
            "ofi//1.2.3.4/1/ab",
            "ofi/shm/1.2.3.4/1/zz",
            "ofi/shm/1.2.3.4/1/ab/c",
            "ofi/shm/1.2.3.4/1/",
        ] {
            assert!(parse_card(bad).is_none(), "{bad}");
        }
    }

    #[test]
    fn tags_keep_classes_apart_and_software_providers_are_known() {
        assert_ne!(tags::data(0, 0) & (0xf << 60), tags::MSG);
        assert_eq!(tags::data(3, 9), tags::DATA | 3 << 32 | 9);
        assert_ne!(tags::data(1, 2), tags::data(2, 1));
        assert!(is_software("tcp;ofi_rxm") && is_software("shm") && is_software("udp;ofi_rxd"));
        assert!(!is_software("verbs;ofi_rxm") && !is_software("psm2") && !is_software("cxi"));
        let c = OfiConfig::default();
        assert_eq!((c.mr_cache_for("shm"), c.mr_cache_for("verbs;ofi_rxm")), (DEFAULT_MR_CACHE, 0));
        assert_eq!(OfiConfig { mr_cache: Some(3), ..c }.mr_cache_for("efa"), 3);
    }
}
