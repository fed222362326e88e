//! The job's key-value space as `nemesis-run` fills it and the ranks read it: the node's segment
//! handle, node ids, business cards, Hydra's process mapping. Both sides call these functions, so
//! they agree byte for byte.
//!
//! Before any rank starts, the launcher puts [`segment_key`]`(node)` = `fd:<n>` for every node
//! (the node's memfd segment, inherited as descriptor `n`) and `PMI_process_mapping` (as Hydra
//! publishes it, [`process_mapping`]). Each rank puts [`node_key`]`(rank)` and, over several
//! nodes, [`card_key`]`(rank)`.
//!
//! Invariants: every key is at most 64 bytes (the PMI-1 limit), whatever the host name; node ids
//! are PMI-safe tokens ([`sanitize_node_id`] is idempotent).

use super::env::ENV_NODE;
use crate::error::{Error, Result};

/// Prefix of a segment handle naming a descriptor the rank inherited.
pub const HANDLE_FD: &str = "fd:";
/// Prefix of a segment handle naming a POSIX shared-memory object (under other process managers).
pub const HANDLE_SHM: &str = "shm:";

/// Longest node id: a PMI-1 key is at most 64 bytes, and ids travel as values of at most 64 too.
pub const NODE_ID_MAX: usize = 64;

/// The KVS key under which a node's segment handle is published. A hash of the node id, so the
/// key stays within every PMI server's 64-byte key limit whatever the host name (FNV-1a, 64 bits).
pub fn segment_key(node: &str) -> String {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in node.bytes() {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x0100_0000_01b3);
    }
    format!("nemesis-seg-{h:016x}")
}

/// The KVS key under which rank `rank` publishes its node id (put by the bootstrap, not the
/// launcher).
pub fn node_key(rank: u32) -> String {
    format!("nemesis-node-{rank}")
}

/// The KVS key of rank `rank`'s netmod business card (put by the bootstrap; read by the other
/// ranks, and by the launcher, which hands a restarted rank's new card to the others).
pub fn card_key(rank: u32) -> String {
    format!("nemesis-card-{rank}")
}

/// Makes `s` a PMI-safe token: keeps `[A-Za-z0-9._-]`, replaces anything else by `_`, trims
/// surrounding whitespace, keeps at most [`NODE_ID_MAX`] characters. Idempotent.
pub fn sanitize_node_id(s: &str) -> String {
    s.trim()
        .chars()
        .take(NODE_ID_MAX)
        .map(|c| if c.is_ascii_alphanumeric() || "._-".contains(c) { c } else { '_' })
        .collect()
}

/// This machine's node id: [`ENV_NODE`] if set and not blank, else the host name, sanitised.
pub fn local_node_id() -> Result<String> {
    let raw = match std::env::var(ENV_NODE) {
        Ok(v) if !v.trim().is_empty() => v,
        _ => hostname()?,
    };
    let id = sanitize_node_id(&raw);
    if id.is_empty() { Ok("node".to_owned()) } else { Ok(id) }
}

/// The host name (`gethostname`).
pub fn hostname() -> Result<String> {
    let mut buf = [0u8; 256];
    // SAFETY: gethostname writes at most `buf.len()` bytes into `buf`.
    if unsafe { libc::gethostname(buf.as_mut_ptr().cast(), buf.len()) } != 0 {
        return Err(Error::io("gethostname", std::io::Error::last_os_error()));
    }
    let end = buf.iter().position(|&b| b == 0).unwrap_or(buf.len());
    Ok(String::from_utf8_lossy(&buf[..end]).into_owned())
}

/// Hydra's `PMI_process_mapping` for ranks laid out in blocks over nodes of the given sizes
/// (node `i` holds the next `sizes[i]` ranks): runs of equal sizes become one
/// `(first node, nodes, ranks per node)` block, e.g. `(vector,(0,2,3),(2,1,2))` for 3, 3, 2.
pub fn process_mapping(sizes: &[u32]) -> String {
    let mut out = String::from("(vector");
    let mut i = 0;
    while i < sizes.len() {
        let j = i + sizes[i..].iter().take_while(|&&s| s == sizes[i]).count();
        out += &format!(",({i},{},{})", j - i, sizes[i]);
        i = j;
    }
    out + ")"
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn node_ids_are_clean_tokens_and_keys_short() {
        assert_eq!(sanitize_node_id(" my host=1 "), "my_host_1");
        assert_eq!(sanitize_node_id("a.b-c_d"), "a.b-c_d");
        let long = "h".repeat(300);
        assert_eq!(sanitize_node_id(&long).len(), NODE_ID_MAX);
        for s in ["x y", "ok", &long] {
            let once = sanitize_node_id(s);
            assert_eq!(sanitize_node_id(&once), once);
        }
        assert!(segment_key(&long).len() <= 64);
        assert_ne!(segment_key("node1"), segment_key("node2"));
        // FNV-1a of the empty string is the offset basis: the key format is stable.
        assert_eq!(segment_key(""), "nemesis-seg-cbf29ce484222325");
        assert_eq!(node_key(3), "nemesis-node-3");
        assert_eq!(process_mapping(&[4]), "(vector,(0,1,4))");
        assert_eq!(process_mapping(&[3, 3, 2]), "(vector,(0,2,3),(2,1,2))");
        assert_eq!(process_mapping(&[1, 2, 2]), "(vector,(0,1,1),(1,2,2))");
    }
}
