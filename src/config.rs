//! Run-time configuration from `NEMESIS_*` variables (named in [`crate::contract::env`]; every
//! one is listed in `docs/configuration.md` with its default and the measurement that chose it).

use crate::contract::{
    ENV_CMA_MAX, ENV_CMA_MIN, ENV_CMA_SPLIT_MIN, ENV_EAGER_BLOCKING_MAX, ENV_EAGER_MAX, ENV_LMT, ENV_SPIN_POLLS,
    ENV_TOPO_TABLE, ENV_UNEXPECTED_MAX, ENV_WAIT,
};
use crate::error::{Error, Result};
use crate::topology::PairTable;

/// How a rank waits for something to happen (`NEMESIS_WAIT`, `nemesis-run --wait`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum WaitMode {
    /// Spin, never give the core away: lowest latency when every rank has a core.
    Poll,
    /// Spin a little, then yield the core after every empty poll: steady progress when ranks
    /// outnumber cores. The default.
    #[default]
    Yield,
    /// Spin a little, then sleep on the rank's doorbell (a futex in the segment) until a sender
    /// rings it: next to no CPU while idle.
    Block,
}

impl WaitMode {
    /// Parses `poll`, `yield` or `block`.
    pub fn parse(s: &str) -> Result<WaitMode> {
        match s.trim() {
            "poll" => Ok(WaitMode::Poll),
            "yield" => Ok(WaitMode::Yield),
            "block" => Ok(WaitMode::Block),
            other => Err(Error::Config(format!("NEMESIS_WAIT={other}: expected poll, yield or block"))),
        }
    }

    /// The name `parse` accepts.
    pub fn name(self) -> &'static str {
        match self {
            WaitMode::Poll => "poll",
            WaitMode::Yield => "yield",
            WaitMode::Block => "block",
        }
    }
}

/// Largest message sent eagerly (fastbox or cells) by default when the rendezvous can use a
/// single CMA copy; longer ones go by rendezvous. Chosen by measurement (`docs/large-messages.md`): `nemesis-bench bw` streams 12 KiB faster eagerly (12.3 GB/s against 11.6 by CMA)
/// and 16 KiB faster by CMA (13.5 against 12.8).
pub const DEFAULT_EAGER_MAX: usize = 12 * 1024;

/// Largest message a blocking send to a rank of the node sends eagerly by default (never less
/// than the eager limit; within what the cell pool carries): the caller waits anyway, and cells
/// copied in by one core while the other copies them out beat a single copy of a message alone.
/// Ping-pong one-way latency (`nemesis-bench latency`), eager against split single copy: 64 KiB
/// 8.1 µs against 17.6, 1 MiB 80 against 118, 2 MiB 191 against 214, 3 MiB 287 against 250.
/// A stream of non-blocking sends is faster by single copy from 16 KiB ([`DEFAULT_EAGER_MAX`]).
pub const DEFAULT_EAGER_BLOCKING_MAX: usize = 2 << 20;

/// Largest message sent eagerly by default when rendezvous can only use the shared-copy rings
/// (`NEMESIS_LMT=shm`, or CMA refused here): eager streams 128 KiB at 12.9 GB/s, the rings 12.0;
/// from 256 KiB the rings win (13.8 against 13.1).
pub const DEFAULT_EAGER_MAX_RING: usize = 128 * 1024;

/// Under `NEMESIS_LMT=auto`, rendezvous messages from this length use a single CMA copy where
/// allowed (0: every rendezvous message up to [`DEFAULT_CMA_MAX`]).
pub const DEFAULT_CMA_MIN: usize = 0;

/// Under `NEMESIS_LMT=auto`, messages from this length go through the rings again (none by
/// default). Without the split below, two copies pipelined on two cores beat one kernel copy from
/// 2 MiB (12.7 GB/s against 11.2); split single copies beat both at every size from 32 KiB (22.1
/// GB/s at 4 MiB against 12.1 for the rings).
pub const DEFAULT_CMA_MAX: usize = usize::MAX;

/// Single-copy transfers from this length are split between the two processes: the receiver
/// reads the first half while the sender writes the second into the receiver's buffer, so both
/// cores copy. Measured (`nemesis-bench bw`): 32 KiB 19.2 GB/s split against 16.2 whole, 256 KiB
/// 36.4 against 22.3; 16 KiB loses (12.2 against 14.5: two more control messages per transfer).
pub const DEFAULT_SPLIT_MIN: usize = 32 * 1024;

/// Bytes of unexpected messages (arrived before their receive) an Endpoint copies out of the
/// segment by default. Beyond it, a local sender's further unexpected messages stay in its cells
/// until received, so the sender runs out of cells and waits (back-pressure, nothing lost), and
/// fastbox slots are acknowledged no more until the application has received enough. A bound on
/// memory, not a measured optimum: 64 MiB is 64 times the cell pool of a rank.
pub const DEFAULT_UNEXPECTED_MAX: usize = 64 << 20;

/// The Endpoint's configuration.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Config {
    /// `NEMESIS_WAIT`.
    pub wait: WaitMode,
    /// `NEMESIS_EAGER_MAX`: messages up to this length go eagerly; longer ones by rendezvous.
    /// `None`: by what the rendezvous can use here ([`DEFAULT_EAGER_MAX`] with CMA,
    /// [`DEFAULT_EAGER_MAX_RING`] without).
    pub eager_max: Option<usize>,
    /// `NEMESIS_EAGER_BLOCKING_MAX`: blocking sends to a rank of the node up to this length go
    /// eagerly (`None`: [`DEFAULT_EAGER_BLOCKING_MAX`]; never less than the eager limit).
    pub eager_blocking_max: Option<usize>,
    /// `NEMESIS_LMT`: `auto` (by size), `shm` (always the shared-copy ring) or `cma` (always a
    /// single copy where allowed).
    pub lmt: nemesis_lmt::Policy,
    /// `NEMESIS_CMA_MIN`: under `auto`, the length from which CMA is used.
    pub cma_min: usize,
    /// `NEMESIS_CMA_MAX`: under `auto`, the length from which the rings are used again.
    pub cma_max: usize,
    /// `NEMESIS_CMA_SPLIT_MIN`: single-copy transfers from this length are copied by both sides.
    pub split_min: usize,
    /// Thresholds by pair distance (`NEMESIS_TOPO_TABLE` over the measured table): a field set
    /// in a row beats the node-wide value above for pairs at that distance.
    pub pairs: PairTable,
    /// `NEMESIS_UNEXPECTED_MAX`: bytes of unexpected messages copied out of the segment before
    /// back-pressure ([`DEFAULT_UNEXPECTED_MAX`]).
    pub unexpected_max: usize,
    /// `NEMESIS_SPIN_POLLS`: empty polls a `yield` or `block` wait spins before it gives the core
    /// away. `None`: 2,000, or 8 when the node has more ranks than CPUs (a spinning rank then holds the core the rank it
    /// waits for needs).
    pub spin_polls: Option<u32>,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            wait: WaitMode::default(),
            eager_max: None,
            eager_blocking_max: None,
            lmt: nemesis_lmt::Policy::Auto,
            cma_min: DEFAULT_CMA_MIN,
            cma_max: DEFAULT_CMA_MAX,
            split_min: DEFAULT_SPLIT_MIN,
            pairs: crate::topology::distance::MEASURED,
            unexpected_max: DEFAULT_UNEXPECTED_MAX,
            spin_polls: None,
        }
    }
}

impl Config {
    /// The defaults with every `NEMESIS_*` override from the environment.
    pub fn from_env() -> Result<Config> {
        let mut c = Config::default();
        if let Ok(v) = std::env::var(ENV_WAIT) {
            c.wait = WaitMode::parse(&v)?;
        }
        // A node-wide variable the user sets beats the measured rows of the pair table.
        if let Some(n) = size_var(ENV_EAGER_MAX)? {
            c.eager_max = Some(n);
            c.pairs.clear("eager");
        }
        if let Some(n) = size_var(ENV_EAGER_BLOCKING_MAX)? {
            c.eager_blocking_max = Some(n);
            c.pairs.clear("eager_blocking");
        }
        if let Ok(v) = std::env::var(ENV_LMT) {
            c.lmt = parse_lmt(&v)?;
        }
        for (var, field, value) in [
            (ENV_CMA_MIN, "lmt_min", &mut c.cma_min),
            (ENV_CMA_MAX, "lmt_max", &mut c.cma_max),
            (ENV_CMA_SPLIT_MIN, "split", &mut c.split_min),
        ] {
            if let Some(n) = size_var(var)? {
                *value = n;
                c.pairs.clear(field);
            }
        }
        if let Ok(spec) = std::env::var(ENV_TOPO_TABLE) {
            c.pairs.apply(&spec)?;
        }
        c.unexpected_max = size_var(ENV_UNEXPECTED_MAX)?.unwrap_or(c.unexpected_max);
        if let Ok(v) = std::env::var(ENV_SPIN_POLLS) {
            let n =
                v.trim().parse::<u32>().map_err(|_| Error::Config(format!("NEMESIS_SPIN_POLLS={v} is not a count")))?;
            c.spin_polls = Some(n);
        }
        Ok(c)
    }
}

/// The size in environment variable `name`, if set (`64k`, `1MiB`, ...); an error if it is not one.
fn size_var(name: &str) -> Result<Option<usize>> {
    match std::env::var(name) {
        Ok(v) => parse_bytes(&v).map(Some).ok_or_else(|| Error::Config(format!("{name}={v} is not a size"))),
        Err(_) => Ok(None),
    }
}

/// Parses `NEMESIS_SPIN_POLLS`: a count of empty polls.
pub fn parse_spin(v: &str) -> Result<u32> {
    v.trim().parse::<u32>().map_err(|_| Error::Config(format!("NEMESIS_SPIN_POLLS={v} is not a count")))
}

/// Parses `NEMESIS_LMT`: `auto`, `shm` (or `ring`), `cma`.
pub fn parse_lmt(s: &str) -> Result<nemesis_lmt::Policy> {
    match s.trim() {
        "auto" => Ok(nemesis_lmt::Policy::Auto),
        "shm" | "ring" => Ok(nemesis_lmt::Policy::Ring),
        "cma" => Ok(nemesis_lmt::Policy::Cma),
        other => Err(Error::Config(format!("NEMESIS_LMT={other}: expected auto, shm or cma"))),
    }
}

/// Parses `4096`, `64k`, `64KiB`, `1m`, `1MiB` (at its former path).
pub use crate::contract::parse_bytes;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wait_modes_and_sizes_parse() {
        assert_eq!(WaitMode::parse("block").unwrap(), WaitMode::Block);
        assert!(matches!(WaitMode::parse("sleep"), Err(Error::Config(_))));
        for m in [WaitMode::Poll, WaitMode::Yield, WaitMode::Block] {
            assert_eq!(WaitMode::parse(m.name()).unwrap(), m);
        }
        assert_eq!(parse_bytes("64k"), Some(65536));
        assert_eq!(parse_bytes("64KiB"), Some(65536));
        assert_eq!(parse_bytes("2M"), Some(2 << 20));
        assert_eq!(parse_bytes("123"), Some(123));
        assert_eq!(parse_bytes("k"), None);
        assert_eq!(parse_lmt("shm").unwrap(), nemesis_lmt::Policy::Ring);
        assert_eq!(parse_lmt("cma").unwrap(), nemesis_lmt::Policy::Cma);
        assert!(matches!(parse_lmt("knem"), Err(Error::Config(_))));
        assert_eq!(parse_bytes(""), None);
    }

    #[test]
    fn the_spin_is_set_or_follows_the_node() {
        assert_eq!(parse_spin(" 16").unwrap(), 16);
        assert!(matches!(parse_spin("lots"), Err(Error::Config(m)) if m.contains("NEMESIS_SPIN_POLLS=lots")));
        assert!(parse_spin("-1").is_err());
        // SAFETY: sysconf reads a system value.
        let cpus = unsafe { libc::sysconf(libc::_SC_NPROCESSORS_ONLN) } as usize;
        assert_eq!(crate::wait::default_spin(cpus), crate::wait::SPIN_POLLS, "one rank per CPU spins");
        assert_eq!(crate::wait::default_spin(cpus + 1), crate::wait::OVERSUBSCRIBED_SPIN_POLLS);
    }
}
