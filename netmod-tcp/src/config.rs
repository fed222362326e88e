//! The settings of the TCP netmod ([`TcpConfig`], with the `NEMESIS_TCP_*` overrides) and the
//! card a process publishes for its peers ([`parse_card`]: `tcp:<ip>:<port>:<heartbeat port>`).
//!
//! Defaults have one place of definition, [`TcpConfig::default`]; the heartbeat period and
//! timeout are the shared ones of `nemesis_shm::netmod::heartbeat`.

use std::net::{IpAddr, SocketAddr};
use std::time::Duration;

use nemesis_shm::netmod::heartbeat::Timing;
use nemesis_shm::{Error, Result};

/// Settings of the TCP netmod.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TcpConfig {
    /// The address to listen on and advertise (`NEMESIS_TCP_ADDR`, or the first address of the
    /// interface named by `NEMESIS_TCP_IF`); by default the first non-loopback IPv4 address of an
    /// interface that is up, else 127.0.0.1.
    pub addr: Option<IpAddr>,
    /// Ports to listen on (`NEMESIS_TCP_PORTS=lo-hi`); by default any the kernel gives.
    pub ports: Option<(u16, u16)>,
    /// Heartbeat period (`NEMESIS_TCP_HEARTBEAT_MS`, default 500).
    pub heartbeat: Duration,
    /// A peer not heard for this long is dead (`NEMESIS_TCP_TIMEOUT_MS`, default 10 periods);
    /// also the longest a connection may take to be set up.
    pub timeout: Duration,
    /// Largest message frame accepted from a peer (eager messages; larger ones go by rendezvous).
    pub max_message: usize,
    /// Per-frame MACs on every link (`NEMESIS_TCP_INTEGRITY=1`; a link has them if either side
    /// asks). Off by default: the MAC (keyed BLAKE3) costs bandwidth and latency (the
    /// `integrity_cost` example measures it; `docs/design/tcp.md`); the handshake authenticates
    /// every link either way.
    pub integrity: bool,
    /// Connections held at most before they prove the job's secret (`NEMESIS_TCP_PENDING_MAX`,
    /// default 64); beyond it a new one evicts the oldest.
    pub pending_max: usize,
}

impl Default for TcpConfig {
    fn default() -> Self {
        TcpConfig {
            addr: None,
            ports: None,
            heartbeat: Timing::default().period,
            timeout: Timing::default().timeout,
            max_message: 16 << 20,
            integrity: false,
            pending_max: 64,
        }
    }
}

impl TcpConfig {
    /// The defaults with the `NEMESIS_TCP_*` overrides.
    pub fn from_env() -> Result<TcpConfig> {
        let addr = nemesis_shm::netmod::addr::addr_from_env("NEMESIS_TCP_ADDR", "NEMESIS_TCP_IF")?;
        let mut c = TcpConfig { addr, ..TcpConfig::default() };
        if let Some(v) = std::env::var("NEMESIS_TCP_PORTS").ok().filter(|v| !v.trim().is_empty()) {
            let bad = || Error::Net(format!("NEMESIS_TCP_PORTS={v}: expected lo-hi, e.g. 40000-40100"));
            let (lo, hi) = v.trim().split_once('-').ok_or_else(bad)?;
            let (lo, hi): (u16, u16) = (lo.parse().map_err(|_| bad())?, hi.parse().map_err(|_| bad())?);
            if lo == 0 || lo > hi {
                return Err(bad());
            }
            c.ports = Some((lo, hi));
        }
        if let Some(v) = std::env::var("NEMESIS_TCP_INTEGRITY").ok().filter(|v| !v.trim().is_empty()) {
            c.integrity = match v.trim() {
                "1" | "on" | "yes" => true,
                "0" | "off" | "no" => false,
                _ => return Err(Error::Net(format!("NEMESIS_TCP_INTEGRITY={v}: expected 1 or 0"))),
            };
        }
        if let Some(v) = std::env::var("NEMESIS_TCP_PENDING_MAX").ok().filter(|v| !v.trim().is_empty()) {
            c.pending_max = v
                .trim()
                .parse()
                .ok()
                .filter(|&n| n > 0)
                .ok_or_else(|| Error::Net(format!("NEMESIS_TCP_PENDING_MAX={v}: expected a positive number")))?;
        }
        let t = Timing::from_env("NEMESIS_TCP_HEARTBEAT_MS", "NEMESIS_TCP_TIMEOUT_MS")?;
        (c.heartbeat, c.timeout) = (t.period, t.timeout);
        Ok(c)
    }

    /// The detection bound: a stopped peer is declared dead within this long of its last
    /// heartbeat (plus the time until the watcher's next progress pass).
    pub fn detection_bound(&self) -> Duration {
        Timing { period: self.heartbeat, timeout: self.timeout }.detection_bound()
    }
}

/// A peer's card: `tcp:<ip>:<port>:<heartbeat port>`.
pub fn parse_card(card: &str) -> Option<(SocketAddr, SocketAddr)> {
    let rest = card.strip_prefix("tcp:")?;
    let mut it = rest.rsplitn(3, ':');
    let udp: u16 = it.next()?.parse().ok()?;
    let port: u16 = it.next()?.parse().ok()?;
    let host = it.next()?;
    // Brackets only around an IPv6 address, and both of them.
    let ip: IpAddr = match host.strip_prefix('[') {
        Some(h) => IpAddr::V6(h.strip_suffix(']')?.parse().ok()?),
        None => host.parse().ok()?,
    };
    Some((SocketAddr::new(ip, port), SocketAddr::new(ip, udp)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cards_parse_and_config_is_checked() {
        let (t, u) = parse_card("tcp:10.1.2.3:4000:4001").unwrap();
        assert_eq!((t.to_string(), u.port()), ("10.1.2.3:4000".into(), 4001));
        let (t, _) = parse_card("tcp:[::1]:5:6").unwrap();
        assert_eq!(t.to_string(), "[::1]:5");
        for bad in [
            "udp:1.2.3.4:1:2",
            "tcp:1.2.3.4:1",
            "tcp:x:1:2",
            "tcp:1.2.3.4:99999:1",
            "tcp:[1.2.3.4]:1:2",
            "tcp:[::1:1:2",
        ] {
            assert!(parse_card(bad).is_none(), "{bad}");
        }
        let c = TcpConfig::default();
        assert_eq!(c.detection_bound(), Duration::from_millis(5500));
    }
}
