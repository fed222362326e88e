//! `nemesis-ft groups --matrix comm.csv`: one `<rank> <group>` line per rank on standard output and nothing else;
//! diagnostics and errors on standard error with a non-zero exit for bad input.

use std::path::PathBuf;
use std::process::{Command, Output};

fn bin() -> Command {
    Command::new(env!("CARGO_BIN_EXE_nemesis-ft"))
}

/// Writes `content` to a fresh file under the target directory's temp area.
fn file(name: &str, content: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("nemesis-ft-cli-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join(name);
    std::fs::write(&path, content).unwrap();
    path
}

fn groups(path: &PathBuf) -> Output {
    bin().args(["groups", "--matrix"]).arg(path).output().unwrap()
}

fn block_diagonal_csv(blocks: usize, size: usize) -> String {
    let p = blocks * size;
    (0..p)
        .map(|u| {
            (0..p).map(|v| if u != v && u / size == v / size { "1000" } else { "0" }).collect::<Vec<_>>().join(",")
        })
        .map(|row| row + "\n")
        .collect()
}

#[test]
fn prints_one_line_per_rank_and_nothing_else() {
    let path = file("blocks.csv", &block_diagonal_csv(8, 8));
    let out = groups(&path);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let stdout = String::from_utf8(out.stdout).unwrap();
    let lines: Vec<&str> = stdout.lines().collect();
    assert_eq!(lines.len(), 64);
    for (rank, line) in lines.iter().enumerate() {
        assert_eq!(*line, format!("{rank} {}", rank / 8));
    }
    assert!(stdout.ends_with('\n'));
    let stderr = String::from_utf8(out.stderr).unwrap();
    assert!(stderr.contains("8 groups"), "{stderr}");
}

#[test]
fn accepts_spaces_crlf_decimals_and_trailing_blank_lines() {
    let path = file("loose.csv", "0, 10.5\r\n 3 ,0\r\n\n");
    let out = groups(&path);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert_eq!(String::from_utf8(out.stdout).unwrap(), "0 0\n1 1\n");
}

fn assert_rejected(name: &str, content: &str, expect: &str) {
    let path = file(name, content);
    let out = groups(&path);
    assert!(!out.status.success(), "{name} accepted");
    assert!(out.stdout.is_empty(), "{name}: nothing on stdout");
    let stderr = String::from_utf8(out.stderr).unwrap();
    assert!(stderr.contains(expect), "{name}: {stderr}");
}

#[test]
fn bad_input_is_a_clear_error() {
    assert_rejected("ragged.csv", "0,1,2\n1,0\n2,1,0\n", "row 1 has 2 columns, row 0 has 3");
    assert_rejected("word.csv", "0,1\nten,0\n", "row 1 column 0: \"ten\"");
    assert_rejected("negative.csv", "0,-1\n1,0\n", "row 0 column 1");
    assert_rejected("not-square.csv", "0,1,2\n1,0,2\n", "2 rows and 3 columns");
    assert_rejected("empty.csv", "", "empty");
    let missing = std::env::temp_dir().join("nemesis-ft-cli-no-such-file.csv");
    let out = groups(&missing);
    assert!(!out.status.success());
    assert!(String::from_utf8(out.stderr).unwrap().contains("no-such-file"));
}

#[test]
fn usage_errors_fail() {
    assert!(!bin().output().unwrap().status.success());
    assert!(!bin().args(["groups"]).output().unwrap().status.success(), "--matrix is required");
    let path = file("one.csv", "0\n");
    let out = bin().args(["groups", "--alpha", "-1", "--matrix"]).arg(&path).output().unwrap();
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("non-negative"), "{out:?}");
    for bad in [&["groups", "--matrix"][..], &["groups", "--colour", "red"], &["group"], &["groups", "--beta", "x"]] {
        let out = bin().args(bad).output().unwrap();
        assert!(!out.status.success(), "{bad:?} accepted");
        assert!(String::from_utf8_lossy(&out.stderr).starts_with("nemesis-ft: error: "), "{bad:?}: {out:?}");
    }
    let out = bin().args(["groups", "--alpha=0.5", "--bisector=native", "--matrix"]).arg(&path).output().unwrap();
    assert!(out.status.success(), "{out:?}");
    let help = bin().arg("--help").output().unwrap();
    assert!(help.status.success() && String::from_utf8_lossy(&help.stdout).contains("--matrix"), "{help:?}");
}

#[cfg(not(feature = "metis"))]
#[test]
fn metis_bisector_needs_the_feature() {
    let path = file("two.csv", "0,1\n1,0\n");
    let out = bin().args(["groups", "--bisector", "metis", "--matrix"]).arg(&path).output().unwrap();
    assert!(!out.status.success());
    assert!(String::from_utf8(out.stderr).unwrap().contains("metis"));
}

#[cfg(feature = "metis")]
#[test]
fn metis_bisector_agrees_on_blocks() {
    let path = file("blocks-metis.csv", &block_diagonal_csv(4, 4));
    let native = groups(&path);
    let metis = bin().args(["groups", "--bisector", "metis", "--matrix"]).arg(&path).output().unwrap();
    assert!(metis.status.success(), "{}", String::from_utf8_lossy(&metis.stderr));
    assert_eq!(native.stdout, metis.stdout);
}

#[test]
fn the_share_of_messages_logged_from_the_messages_matrix() {
    let bytes = file("blocks-bytes.csv", &block_diagonal_csv(8, 8));
    // One message from every rank to every other: the groups (chosen on bytes: the 8 blocks) keep
    // 8 × 8 × 7 of the 64 × 63 messages inside, so they log 3584 / 4032 = 88.89 % of them.
    let uniform: String =
        (0..64).map(|u| (0..64).map(|v| if u == v { "0" } else { "1" }).collect::<Vec<_>>().join(",") + "\n").collect();
    let messages = file("uniform-messages.csv", &uniform);
    let out = bin().args(["groups", "--matrix"]).arg(&bytes).arg("--messages").arg(&messages).output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let stderr = String::from_utf8(out.stderr).unwrap();
    assert!(stderr.contains("8 groups") && stderr.contains("logged messages 88.89 %"), "{stderr}");
    let small = file("small-messages.csv", "0,1\n1,0\n");
    let out = bin().args(["groups", "--matrix"]).arg(&bytes).arg("--messages").arg(&small).output().unwrap();
    assert!(!out.status.success(), "a messages matrix of another size is refused");
}
