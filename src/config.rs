//! Run-time configuration from `NEMESIS_*` variables (every one is listed in the README with its
//! default and the measurement that chose it).

use crate::error::{Error, Result};

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

/// Largest message sent eagerly (fastbox or cells) by default; longer ones go by rendezvous.
pub const DEFAULT_EAGER_MAX: usize = 64 * 1024;

/// Under `NEMESIS_LMT=auto`, messages from this length use a single CMA copy where allowed.
pub const DEFAULT_CMA_MIN: usize = usize::MAX;

/// The Endpoint's configuration.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Config {
    /// `NEMESIS_WAIT`.
    pub wait: WaitMode,
    /// `NEMESIS_EAGER_MAX`: messages up to this length go eagerly; longer ones by rendezvous.
    pub eager_max: usize,
    /// `NEMESIS_LMT`: `auto` (by size), `shm` (always the shared-copy ring) or `cma` (always a
    /// single copy where allowed).
    pub lmt: nemesis_lmt::Policy,
    /// `NEMESIS_CMA_MIN`: under `auto`, the length from which CMA is used.
    pub cma_min: usize,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            wait: WaitMode::default(),
            eager_max: DEFAULT_EAGER_MAX,
            lmt: nemesis_lmt::Policy::Auto,
            cma_min: DEFAULT_CMA_MIN,
        }
    }
}

impl Config {
    /// The defaults with every `NEMESIS_*` override from the environment.
    pub fn from_env() -> Result<Config> {
        let mut c = Config::default();
        if let Ok(v) = std::env::var("NEMESIS_WAIT") {
            c.wait = WaitMode::parse(&v)?;
        }
        if let Ok(v) = std::env::var("NEMESIS_EAGER_MAX") {
            c.eager_max =
                parse_bytes(&v).ok_or_else(|| Error::Config(format!("NEMESIS_EAGER_MAX={v} is not a size")))?;
        }
        if let Ok(v) = std::env::var("NEMESIS_LMT") {
            c.lmt = parse_lmt(&v)?;
        }
        if let Ok(v) = std::env::var("NEMESIS_CMA_MIN") {
            c.cma_min = parse_bytes(&v).ok_or_else(|| Error::Config(format!("NEMESIS_CMA_MIN={v} is not a size")))?;
        }
        Ok(c)
    }
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

/// Parses `4096`, `64k`, `64KiB`, `1m`, `1MiB`.
pub fn parse_bytes(s: &str) -> Option<usize> {
    let t = s.trim().trim_end_matches("iB").trim_end_matches('B');
    let (num, mult) = match t.chars().last()? {
        'k' | 'K' => (&t[..t.len() - 1], 1usize << 10),
        'm' | 'M' => (&t[..t.len() - 1], 1 << 20),
        'g' | 'G' => (&t[..t.len() - 1], 1 << 30),
        _ => (t, 1),
    };
    num.trim().parse::<usize>().ok()?.checked_mul(mult)
}

/// Installs a `tracing` subscriber filtered by `NEMESIS_LOG` (e.g. `NEMESIS_LOG=debug`), once;
/// without the variable only warnings and errors are shown. Does nothing if the application
/// installed its own.
pub fn init_logging() {
    use tracing_subscriber::EnvFilter;
    let filter = EnvFilter::try_from_env("NEMESIS_LOG").unwrap_or_else(|_| EnvFilter::new("warn"));
    let _ = tracing_subscriber::fmt().with_env_filter(filter).with_writer(std::io::stderr).try_init();
}

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
}
