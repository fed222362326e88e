//! The communication matrix of a real run: every Endpoint counts the application messages and
//! bytes it sends to each rank (always: the port's per-peer message numbers and byte counter, one
//! addition per send, less the Endpoint's own messages; [`crate::Endpoint::traffic`]); with
//! [`ENV_COMM_MATRIX`] set (`nemesis-run --comm-matrix FILE`), each rank writes its row at
//! `finalize` and rank 0, after the closing barrier, assembles the P × P CSV that
//! `nemesis-ft groups --matrix` reads (row `u`, column `v`: bytes `u` sent to `v`; no header),
//! and beside it `FILE.messages`, the same for message counts (a rendezvous message counts once),
//! which `nemesis-ft groups --messages` reads to report the share of messages a grouping logs
//! (the thesis's Table 6.1 gives both shares).
//!
//! Rows go through files next to the matrix (`FILE.rows/<rank>`), so the matrix needs nothing of
//! the process manager and ranks on several machines need a shared file system only.

use std::path::{Path, PathBuf};

use crate::error::{Error, Result};

/// Application messages and bytes sent to one rank.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Traffic {
    /// Messages (a rendezvous message counts once).
    pub messages: u64,
    /// Payload bytes.
    pub bytes: u64,
}

/// Where the matrix goes (at its former path).
pub use crate::contract::ENV_COMM_MATRIX;

fn rows_dir(file: &Path) -> PathBuf {
    let mut d = file.as_os_str().to_owned();
    d.push(".rows");
    PathBuf::from(d)
}

fn fail(what: &str, path: &Path, e: std::io::Error) -> Error {
    Error::Config(format!("communication matrix: {what} {}: {e}", path.display()))
}

/// Writes `text` to `path` through a temporary file and a rename.
fn write_whole(path: &Path, text: &str) -> Result<()> {
    let mut tmp = path.as_os_str().to_owned();
    tmp.push(".tmp");
    let tmp = PathBuf::from(tmp);
    std::fs::write(&tmp, text).map_err(|e| fail("writing", &tmp, e))?;
    std::fs::rename(&tmp, path).map_err(|e| fail("renaming into place", path, e))
}

/// The matrix of message counts beside the matrix of bytes `file`: `FILE.messages`.
pub fn messages_file(file: &Path) -> PathBuf {
    let mut f = file.as_os_str().to_owned();
    f.push(".messages");
    PathBuf::from(f)
}

/// Writes rank `rank`'s row: a line of bytes sent to each rank, then a line of messages.
pub fn write_row(file: &Path, rank: u32, traffic: &[Traffic]) -> Result<()> {
    let dir = rows_dir(file);
    std::fs::create_dir_all(&dir).map_err(|e| fail("creating", &dir, e))?;
    let bytes: Vec<String> = traffic.iter().map(|t| t.bytes.to_string()).collect();
    let messages: Vec<String> = traffic.iter().map(|t| t.messages.to_string()).collect();
    write_whole(&dir.join(rank.to_string()), &format!("{}\n{}\n", bytes.join(","), messages.join(",")))
}

/// Assembles the rows of ranks `0..size` into `file` (bytes) and [`messages_file`] and removes
/// them. A rank that wrote no row (it died) gets rows of zeros and a warning.
pub fn assemble(file: &Path, size: u32) -> Result<()> {
    let dir = rows_dir(file);
    let (mut bytes, mut messages) = (String::new(), String::new());
    let whole = |l: &str| l.split(',').count() == size as usize;
    for r in 0..size {
        let p = dir.join(r.to_string());
        let text = std::fs::read_to_string(&p);
        let mut lines = text.as_deref().unwrap_or("").lines();
        match (lines.next(), lines.next()) {
            (Some(b), Some(m)) if whole(b) && whole(m) => {
                bytes.push_str(b);
                messages.push_str(m);
            }
            _ => {
                tracing::warn!(rank = r, ok = text.is_ok(), "communication matrix: no row from this rank; zeros");
                let zeros = vec!["0"; size as usize].join(",");
                bytes.push_str(&zeros);
                messages.push_str(&zeros);
            }
        }
        bytes.push('\n');
        messages.push('\n');
    }
    write_whole(file, &bytes)?;
    write_whole(&messages_file(file), &messages)?;
    let _ = std::fs::remove_dir_all(&dir);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rows_make_a_matrix_the_partitioner_reads() {
        let file = std::env::temp_dir().join(format!("nemesis-matrix-test-{}.csv", std::process::id()));
        let t = |b: &[u64]| b.iter().map(|&bytes| Traffic { messages: bytes / 5, bytes }).collect::<Vec<_>>();
        write_row(&file, 0, &t(&[0, 10, 0])).unwrap();
        write_row(&file, 2, &t(&[5, 0, 0])).unwrap();
        assemble(&file, 3).unwrap();
        let text = std::fs::read_to_string(&file).unwrap();
        assert_eq!(text, "0,10,0\n0,0,0\n5,0,0\n");
        let m = nemesis_ft::matrix::CommMatrix::from_csv(&text).unwrap();
        assert_eq!(m.get(0, 1), 10.0);
        assert_eq!(std::fs::read_to_string(messages_file(&file)).unwrap(), "0,2,0\n0,0,0\n1,0,0\n");
        assert!(!rows_dir(&file).exists());
        std::fs::remove_file(&file).unwrap();
        std::fs::remove_file(messages_file(&file)).unwrap();
    }
}
