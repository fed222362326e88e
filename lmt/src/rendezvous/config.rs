//! What a rendezvous may choose: the backend policy (`NEMESIS_LMT`), the node-wide thresholds
//! the Endpoint reads from the environment, and each peer's, chosen by its distance.

/// Which backend moves the data (`NEMESIS_LMT`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum Policy {
    /// By size: CMA from [`Config::cma_min`] up to [`Config::cma_max`] bytes when it is allowed,
    /// rings outside.
    #[default]
    Auto,
    /// Always the shared-copy ring.
    Ring,
    /// Always a single CMA copy (falling back to rings where it is forbidden).
    Cma,
}

/// Tunables (the Endpoint reads them from the environment).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Config {
    /// Backend choice.
    pub policy: Policy,
    /// Under [`Policy::Auto`], messages from this length use CMA.
    pub cma_min: u64,
    /// Under [`Policy::Auto`], messages from this length use the rings again.
    pub cma_max: u64,
    /// Ring chunks each side moves per progress pass.
    pub chunks_per_pass: u32,
    /// Bytes a CMA read moves per progress pass.
    pub cma_chunk: usize,
    /// Single-copy transfers from this length are split: the receiver reads the first half while
    /// the sender, asked by HELP, writes the second (`u64::MAX`: never).
    pub split_min: u64,
    /// Longest message an RTS may announce (at most [`crate::wire::LEN_MAX`], which decoding
    /// enforces); longer ones are refused with [`Error::TooLong`](crate::Error::TooLong).
    pub max_len: u64,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            policy: Policy::Auto,
            cma_min: 0,
            cma_max: u64::MAX,
            chunks_per_pass: 8,
            cma_chunk: 1 << 20,
            split_min: 32 << 10,
            max_len: crate::wire::LEN_MAX,
        }
    }
}

/// Thresholds of one peer, chosen by its distance (`nemesis::topology`); both sides of a pair
/// choose the same ones (the distance is symmetric and the table is the job's).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PeerConfig {
    /// See [`Config::cma_min`].
    pub cma_min: u64,
    /// See [`Config::cma_max`].
    pub cma_max: u64,
    /// See [`Config::split_min`].
    pub split_min: u64,
    /// Bytes per ring chunk, at most the ring's slot size (0: the slot size). The sender fills
    /// and the receiver expects chunks of this length.
    pub ring_chunk: u64,
}

impl PeerConfig {
    /// The node-wide values of `cfg`.
    pub fn of(cfg: &Config) -> PeerConfig {
        PeerConfig { cma_min: cfg.cma_min, cma_max: cfg.cma_max, split_min: cfg.split_min, ring_chunk: 0 }
    }

    pub(super) fn chunk(&self, slot: u64) -> u64 {
        if self.ring_chunk == 0 { slot } else { self.ring_chunk.min(slot) }
    }
}

/// The sixteenths of a split single copy the receiver reads itself (the sender writes the rest):
/// halves, except 10 from 64 to 128 KiB, where that measured faster
/// (`docs/design/large-messages.md`).
pub(super) fn receiver_share(bytes: u64) -> u64 {
    if (64 << 10..=128 << 10).contains(&bytes) { 10 } else { 8 }
}

/// Smallest average piece, in bytes, of a receive in pieces that a single copy reads into (one
/// iovec per piece, at most [`IOV_MAX`](crate::cma::IOV_MAX) per call); shorter pieces come
/// through a ring.
pub const CMA_MIN_PIECE: u64 = 256;
