//! The IP addresses of this machine's interfaces, for the sockets of netmods (the TCP netmod's
//! listener, every netmod's heartbeats).
//!
//! What holds: a netmod's sockets are bound to one address, the one its card advertises, never a
//! wildcard (`0.0.0.0`, `::`: refused in the variables): the address named (`NEMESIS_TCP_ADDR`)
//! or the interface named (`NEMESIS_TCP_IF`), which `nemesis-run` hands to every rank; 127.0.0.1
//! when `nemesis-run --nodes K` pretends nodes on one host; else [`default_addr`], the first
//! non-loopback IPv4 address of an interface that is up (on a host with several networks, name
//! the job's own).

use std::net::{IpAddr, Ipv4Addr};

/// The addresses of the interfaces that are up: `(name, address, loopback)`.
pub fn interfaces() -> Vec<(String, IpAddr, bool)> {
    let mut out = Vec::new();
    let mut ifap: *mut libc::ifaddrs = std::ptr::null_mut();
    // SAFETY: getifaddrs fills `ifap` with a list we free below.
    if unsafe { libc::getifaddrs(&mut ifap) } != 0 {
        return out;
    }
    let mut p = ifap;
    while !p.is_null() {
        // SAFETY: `p` is a node of the list getifaddrs returned, valid until freeifaddrs.
        let ifa = unsafe { &*p };
        p = ifa.ifa_next;
        let up = ifa.ifa_flags & libc::IFF_UP as u32 != 0;
        if ifa.ifa_addr.is_null() || !up {
            continue;
        }
        // SAFETY: `ifa_name` is a NUL-terminated string owned by the list.
        let name = unsafe { std::ffi::CStr::from_ptr(ifa.ifa_name) }.to_string_lossy().into_owned();
        let lo = ifa.ifa_flags & libc::IFF_LOOPBACK as u32 != 0;
        // SAFETY: `ifa_addr` is non-null and points to a sockaddr of the family it names.
        let family = i32::from(unsafe { (*ifa.ifa_addr).sa_family });
        if family == libc::AF_INET {
            // SAFETY: an AF_INET address is a sockaddr_in.
            let sin = unsafe { &*(ifa.ifa_addr as *const libc::sockaddr_in) };
            out.push((name, IpAddr::V4(Ipv4Addr::from(u32::from_be(sin.sin_addr.s_addr))), lo));
        } else if family == libc::AF_INET6 {
            // SAFETY: an AF_INET6 address is a sockaddr_in6.
            let sin6 = unsafe { &*(ifa.ifa_addr as *const libc::sockaddr_in6) };
            out.push((name, IpAddr::V6(sin6.sin6_addr.s6_addr.into()), lo));
        }
    }
    // SAFETY: the list from getifaddrs, freed once.
    unsafe { libc::freeifaddrs(ifap) };
    out
}

/// The first address of interface `name` (IPv4 first).
pub fn interface_addr(name: &str) -> Option<IpAddr> {
    let all: Vec<_> = interfaces().into_iter().filter(|i| i.0 == name).collect();
    all.iter().find(|i| i.1.is_ipv4()).or(all.first()).map(|i| i.1)
}

/// The default address: the first non-loopback IPv4 address of an interface that is up, else
/// 127.0.0.1.
pub fn default_addr() -> IpAddr {
    interfaces().into_iter().find(|i| !i.2 && i.1.is_ipv4()).map(|i| i.1).unwrap_or(IpAddr::V4(Ipv4Addr::LOCALHOST))
}

/// The address named by variable `addr_var` (an IP address) or else `if_var` (an interface
/// name); `None` if neither is set.
pub fn addr_from_env(addr_var: &str, if_var: &str) -> crate::Result<Option<IpAddr>> {
    let var = |k: &str| std::env::var(k).ok().filter(|v| !v.trim().is_empty());
    let bad = |k: &str, v: &str, want: &str| crate::Error::Net(format!("{k}={v}: expected {want}"));
    if let Some(v) = var(addr_var) {
        let ip: IpAddr = v.trim().parse().map_err(|_| bad(addr_var, &v, "an IP address"))?;
        // A wildcard listens on every network this host has, and a card naming it reaches nobody.
        if ip.is_unspecified() || ip.is_multicast() {
            return Err(bad(addr_var, &v, "the address of one interface of this host (not a wildcard or multicast)"));
        }
        return Ok(Some(ip));
    }
    if let Some(v) = var(if_var) {
        return interface_addr(v.trim()).map(Some).ok_or_else(|| bad(if_var, &v, "an interface with an address"));
    }
    Ok(None)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn loopback_is_found_and_the_default_is_an_address() {
        assert!(!default_addr().is_unspecified());
        assert_eq!(interface_addr("lo"), Some(IpAddr::V4(Ipv4Addr::LOCALHOST)));
        assert_eq!(interface_addr("no-such-interface-here"), None);
    }

    #[test]
    fn wildcards_are_refused_in_the_variables() {
        // Variables no other test sets.
        for (v, ok) in [("0.0.0.0", false), ("::", false), ("224.0.0.1", false), ("127.0.0.1", true), ("x", false)] {
            // SAFETY: this test alone touches this name.
            unsafe { std::env::set_var("NEMESIS_ADDR_TEST_A", v) };
            let r = addr_from_env("NEMESIS_ADDR_TEST_A", "NEMESIS_ADDR_TEST_I");
            assert_eq!(r.is_ok(), ok, "{v}: {r:?}");
            if let Err(e) = r {
                assert!(e.to_string().contains("NEMESIS_ADDR_TEST_A"), "the error names the variable: {e}");
            }
        }
        // SAFETY: as above.
        unsafe { std::env::remove_var("NEMESIS_ADDR_TEST_A") };
    }
}
