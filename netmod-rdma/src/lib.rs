//! # nemesis-netmod-rdma: the libfabric (OFI) network module
//!
//! Implements [`nemesis_shm::netmod::Netmod`] and [`nemesis_lmt::LmtBackend`] over libfabric, the
//! interface through which HPC networks are reached (InfiniBand through `verbs`, Omni-Path through
//! `psm2`/`opx`, Slingshot through `cxi`, EFA), and its software providers (`tcp;ofi_rxm`,
//! `udp;ofi_rxd`, `shm`, `sockets`), which run the same API on any machine.
//!
//! - **endpoints**: one reliable-datagram endpoint (`FI_EP_RDM`) with tagged messages
//!   (`FI_TAGGED`), its sends to one peer processed in order (`FI_ORDER_SAS`); one completion
//!   queue for both directions, polled with `fi_cq_read` by the progress engine
//!   (`FI_PROGRESS_MANUAL`: the provider moves data when we poll, never behind our back); an
//!   address vector filled from the peers' business cards (`fi_getname`, published through PMI).
//! - **messages**: the libfabric tag says only what a message is (an eager message, or the data
//!   of a large one), never its nemesis source, tag or context: every eager message lands in the
//!   same posted buffers, in the order its sender sent it, and is copied into cells of the
//!   process's receive queue, where the Endpoint matches it with `ANY_SOURCE`/`ANY_TAG` and MPI's
//!   non-overtaking rule like any other arrival. Each eager fragment carries the cell header
//!   (with a per-pair sequence number, so completions that come out of order are put back in
//!   order) and a MAC; small ones go with `fi_tinject`, others from registered send buffers.
//! - **who sent a fragment** ([`frag`]): the receive buffers take messages from anyone who can
//!   reach the endpoint, and libfabric does not say reliably who: with `FI_SOURCE`, libfabric
//!   1.17's `shm` and `udp;ofi_rxd` report a stranger's message as coming from the first address
//!   of the address vector, and `tcp;ofi_rxm` names the peer by the IP of the connection and the
//!   port its connection request claims. So every fragment carries a keyed BLAKE3 MAC (truncated to
//!   128 bits) keyed from the job's secret over its header, piggyback and length and the pair's
//!   64-bit sequence number (not its data: see [`frag`]); one that does not verify, or repeats a
//!   sequence number, or comes further ahead than the receive buffers reach, is dropped and
//!   counted (`OfiStats::refused`, each [`frag::Refusal`] naming the rank the fragment claims): it
//!   moves no peer's sequence, parks no buffer and kills no one. The large messages' data (read,
//!   or streamed into a receive posted for the peer's address) carries no MAC; their RTS and
//!   DONE, eager messages, do.
//! - **large messages** ([`nemesis_lmt::NetLmt`]): where the provider has `FI_RMA`, the sender
//!   registers its buffer and offers it in the RTS; the receiver reads it with `fi_read` (zero
//!   copy, one round trip) and answers DONE. Otherwise (or with `NEMESIS_OFI_RNDV=send`) the
//!   receiver posts tagged receives into its buffer and answers CTS, and the sender sends the data
//!   two-sided. Registrations are cached ([`mrcache`]). The provider's `mr_mode` is honoured
//!   (`FI_MR_LOCAL`, `FI_MR_VIRT_ADDR`, `FI_MR_PROV_KEY`, `FI_MR_ALLOCATED`, `FI_MR_ENDPOINT`);
//!   keys we choose are random (the key is all a read needs: one who reaches the endpoint must
//!   not guess it).
//! - **failures**: a completion error, a send the provider refuses, or an address it cannot
//!   insert make the peer dead, and so does silence: the heartbeats of
//!   [`nemesis_shm::netmod::heartbeat`], as for the TCP netmod. A [`KIND_PEER_GONE`] notice
//!   follows the peer's last arrival in the receive queue; its transfers fail. A finalizing
//!   process says goodbye (the reserved kind on the wire) so its silence is not taken for death.
//!
//! The libfabric code needs the crate's `libfabric` feature (bindings generated against the
//! system's headers, a C shim for libfabric's `static inline` calls; the library itself is opened
//! at run time, so a missing one is an error naming it). Without the feature the crate holds only
//! its configuration and wire helpers.
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
