//! The network modules this build knows, behind one type: the TCP netmod always, the libfabric
//! netmod with the `rdma` feature. Chosen by `NEMESIS_NETMOD=tcp|ofi` (and `nemesis-run
//! --netmod`); static dispatch, so a build with one netmod pays for no choice.

use nemesis_lmt::{LmtBackend, NetDone, RecvPlan, RemoteBuf};
use nemesis_netmod_tcp::{TcpConfig, TcpNetmod};
use nemesis_shm::auth::JobSecret;
use nemesis_shm::netmod::{Inbox, Netmod};
use nemesis_shm::{MsgHeader, PiggybackBytes};

use crate::error::{Error, Result};

/// Which netmod carries traffic between nodes (`NEMESIS_NETMOD`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum NetKind {
    /// The TCP netmod (the default).
    #[default]
    Tcp,
    /// The libfabric netmod (`rdma` feature); the provider is `NEMESIS_OFI_PROVIDER`'s.
    Ofi,
}

impl NetKind {
    /// Parses `tcp` or `ofi`.
    pub fn parse(s: &str) -> Result<NetKind> {
        match s.trim() {
            "tcp" => Ok(NetKind::Tcp),
            "ofi" => Ok(NetKind::Ofi),
            other => Err(Error::Config(format!("NEMESIS_NETMOD={other}: expected tcp or ofi"))),
        }
    }

    /// `NEMESIS_NETMOD`, else TCP.
    pub fn from_env() -> Result<NetKind> {
        match std::env::var(crate::contract::ENV_NETMOD) {
            Ok(v) if !v.trim().is_empty() => NetKind::parse(&v),
            _ => Ok(NetKind::Tcp),
        }
    }

    /// The name `parse` accepts.
    pub fn name(self) -> &'static str {
        match self {
            NetKind::Tcp => "tcp",
            NetKind::Ofi => "ofi",
        }
    }
}

/// A running netmod.
// One per process, inside the Endpoint's boxed state: the variants' sizes do not matter, and no
// variant pays an indirection.
#[allow(clippy::large_enum_variant)]
#[derive(Debug)]
pub enum Net<'n> {
    Tcp(TcpNetmod<'n>),
    #[cfg(feature = "rdma")]
    Ofi(nemesis_netmod_rdma::OfiNetmod<'n>),
}

impl<'n> Net<'n> {
    /// Starts the netmod of kind `kind` (its settings from the environment) for rank `me` of a
    /// job of `size` ranks whose secret is `secret`.
    pub fn start(kind: NetKind, me: u32, size: u32, secret: JobSecret) -> Result<Net<'n>> {
        match kind {
            NetKind::Tcp => Ok(Net::Tcp(TcpNetmod::new(me, size, secret, TcpConfig::from_env()?)?)),
            #[cfg(feature = "rdma")]
            NetKind::Ofi => {
                let cfg = nemesis_netmod_rdma::OfiConfig::from_env()?;
                Ok(Net::Ofi(nemesis_netmod_rdma::OfiNetmod::new(me, size, secret, cfg)?))
            }
            #[cfg(not(feature = "rdma"))]
            NetKind::Ofi => Err(Error::Config(
                "NEMESIS_NETMOD=ofi: this build has no libfabric netmod (build nemesis with the `rdma` feature)".into(),
            )),
        }
    }
}

/// Calls `$call` on whichever netmod runs.
macro_rules! each {
    ($self:expr, $n:ident => $call:expr) => {
        match $self {
            Net::Tcp($n) => $call,
            #[cfg(feature = "rdma")]
            Net::Ofi($n) => $call,
        }
    };
}

impl<'n> Netmod<'n> for Net<'n> {
    fn card(&self) -> String {
        each!(self, n => n.card())
    }
    fn connect(&mut self, rank: u32, card: &str) -> nemesis_shm::Result<()> {
        each!(self, n => n.connect(rank, card))
    }
    #[inline]
    fn send(
        &mut self,
        dst: u32,
        hdr: &MsgHeader,
        ft: Option<&PiggybackBytes>,
        payload: &[u8],
    ) -> nemesis_shm::Result<()> {
        each!(self, n => n.send(dst, hdr, ft, payload))
    }
    #[inline]
    fn poll(&mut self, inbox: &mut dyn Inbox<'n>) -> nemesis_shm::Result<bool> {
        each!(self, n => n.poll(inbox))
    }
    fn busy(&self) -> bool {
        each!(self, n => n.busy())
    }
    fn finalize(&mut self) -> nemesis_shm::Result<()> {
        each!(self, n => n.finalize())
    }
    fn set_incarnation(&mut self, incarnation: u32) {
        each!(self, n => n.set_incarnation(incarnation))
    }
    fn retire(&mut self, rank: u32) -> nemesis_shm::Result<()> {
        each!(self, n => n.retire(rank))
    }
    fn restarted(&mut self, rank: u32, incarnation: u32, card: &str) -> nemesis_shm::Result<bool> {
        each!(self, n => n.restarted(rank, incarnation, card))
    }
}

impl LmtBackend for Net<'_> {
    unsafe fn pre_send(
        &mut self,
        peer: u32,
        id: u32,
        addr: *const u8,
        bytes: u64,
    ) -> nemesis_lmt::Result<Option<RemoteBuf>> {
        // SAFETY: the caller's contract, passed on.
        each!(self, n => unsafe { n.pre_send(peer, id, addr, bytes) })
    }
    fn abandon_send(&mut self, peer: u32, id: u32) {
        each!(self, n => n.abandon_send(peer, id))
    }
    unsafe fn start_send(&mut self, peer: u32, id: u32, addr: *const u8, bytes: u64) -> nemesis_lmt::Result<()> {
        // SAFETY: the caller's contract, passed on.
        each!(self, n => unsafe { n.start_send(peer, id, addr, bytes) })
    }
    unsafe fn start_recv(
        &mut self,
        peer: u32,
        id: u32,
        dst: *mut u8,
        bytes: u64,
        remote: Option<RemoteBuf>,
    ) -> nemesis_lmt::Result<RecvPlan> {
        // SAFETY: the caller's contract, passed on.
        each!(self, n => unsafe { n.start_recv(peer, id, dst, bytes, remote) })
    }
    fn take_lmt_done(&mut self) -> Vec<NetDone> {
        each!(self, n => n.take_lmt_done())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kinds_parse() {
        assert_eq!(NetKind::parse("tcp").unwrap(), NetKind::Tcp);
        assert_eq!(NetKind::parse(" ofi ").unwrap(), NetKind::Ofi);
        assert!(matches!(NetKind::parse("verbs"), Err(Error::Config(_))));
        for k in [NetKind::Tcp, NetKind::Ofi] {
            assert_eq!(NetKind::parse(k.name()).unwrap(), k);
        }
    }
}
