//! # nemesis-fuzz: the fuzz targets
//!
//! One function per decoder of bytes that come from another process; each takes arbitrary bytes
//! and must neither panic, nor hang, nor touch memory it does not own: bad input is a typed error
//! of the decoder. They run two ways:
//! - coverage-guided, by `cargo fuzz` (libFuzzer, `--sanitizer none` on the stable toolchain)
//!   from `fuzz/libfuzzer/`, one binary per target over the seed corpus `fuzz/corpus/<target>/`
//!   (`.ci/run` runs each for a bounded time);
//! - as ordinary tests (`tests/corpus.rs`): every seed, then `NEMESIS_FUZZ_RUNS` (default 2,000)
//!   deterministic mutations of the seeds per target.
//!
//! | target | decoder |
//! |---|---|
//! | `shm_port` | cells, fastboxes and queues of a segment written at random between valid sends, polls and a death (header and fragment logic, recovery) |
//! | `lmt_control` | rendezvous control messages (`nemesis_lmt::Control::decode_all`) handled by a sender's and a receiver's transfers in flight, and by the network rendezvous |
//! | `tcp_frames` | a TCP connection's byte stream (frames, message headers, payload into cells, large-message data) |
//! | `tcp_hello` | the HELLO of a new TCP connection |
//! | `ft_control` | HydEE control messages (`nemesis_ft::Control::decode`); a decoded one re-encodes to bytes that decode the same |
//! | `ft_piggyback` | the 12-byte piggyback of a message |
//! | `pmi_server` | what ranks send `nemesis-run`'s PMI server: PMI-1 lines and PMI-2 messages, several ranks interleaved |
//! | `pmi1_client`, `pmi2_client` | what a process manager answers a PMI-1 / PMI-2 client, from start-up to finalize |
//! | `pmi_mapping` | a `PMI_process_mapping` value |
//! | `ft_checkpoint` | a checkpoint file read back at a restart (`nemesis::ft::checkpoint::decode`), as found and sealed with the job's key |
//! | `tcp_card` | a TCP netmod business card (`tcp:<ip>:<port>:<udp port>`) as the KVS hands it |
//! | `beat_open` | a heartbeat datagram from anyone (`BeatKey::open`): only a sealed one opens |
//! | `ft_frame` | a frame of the launcher's fault-tolerance channel (`nemesis::ft::channel::Frame::decode`), and a channel's byte stream |
//! | `locality` | a rank's locality as `nemesis-run` passes it (`nemesis::topology::Locality::decode`) |
//! | `ofi_fragments` | the eager fragments an ofi rank receives: MAC check, each sender's order (parking, duplicates, replays), cells; strangers' bytes and a job peer's garbage between; no receive buffer lost |
//! | `rma_key` | a peer's RMA registration key (`nemesis_netmod_rdma::rma::RmaKey::from_bytes`), bare and after a window's flag byte; the region bounds it gives |

mod seeds;
mod targets;

pub use seeds::seeds;
pub use targets::*;

/// A fuzz target.
pub type Target = fn(&[u8]);

/// Every target: `(name, function)`.
pub const TARGETS: &[(&str, Target)] = &[
    ("shm_port", shm_port),
    ("lmt_control", lmt_control),
    ("tcp_frames", tcp_frames),
    ("tcp_hello", tcp_hello),
    ("ft_control", ft_control),
    ("ft_piggyback", ft_piggyback),
    ("pmi_server", pmi_server),
    ("pmi1_client", pmi1_client),
    ("pmi2_client", pmi2_client),
    ("pmi_mapping", pmi_mapping),
    ("ft_checkpoint", ft_checkpoint),
    ("tcp_card", tcp_card),
    ("beat_open", beat_open),
    ("ft_frame", ft_frame),
    ("locality", locality),
    ("ofi_fragments", ofi_fragments),
    ("rma_key", rma_key),
];
