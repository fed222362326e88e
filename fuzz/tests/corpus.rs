//! The fuzz targets as ordinary tests: every file of the seed corpus (`fuzz/corpus/<target>/`,
//! which must hold at least the generated seeds: `NEMESIS_FUZZ_WRITE_SEEDS=1` writes missing
//! ones), then `NEMESIS_FUZZ_RUNS` (default 2,000) mutations of them per target, from a fixed
//! seed (`NEMESIS_FUZZ_SEED` to change it): bit flips, byte changes, insertions, deletions,
//! splices and interesting values. A target that panics fails the test with the input's bytes.

use std::path::PathBuf;

fn corpus_dir(target: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("corpus").join(target)
}

/// The files of a target's corpus, and the seeds written where missing if asked.
fn corpus(target: &str) -> Vec<Vec<u8>> {
    let dir = corpus_dir(target);
    let write = std::env::var_os("NEMESIS_FUZZ_WRITE_SEEDS").is_some();
    if write {
        std::fs::create_dir_all(&dir).unwrap();
    }
    let mut files: Vec<Vec<u8>> = std::fs::read_dir(&dir)
        .map(|d| d.map(|e| std::fs::read(e.unwrap().path()).unwrap()).collect())
        .unwrap_or_default();
    for (k, s) in nemesis_fuzz::seeds(target).into_iter().enumerate() {
        if !files.contains(&s) {
            assert!(write, "seed {k} of {target} is not in {} (NEMESIS_FUZZ_WRITE_SEEDS=1 writes it)", dir.display());
            std::fs::write(dir.join(format!("seed-{k}")), &s).unwrap();
            files.push(s);
        }
    }
    files
}

/// xorshift64*.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n.max(1) as u64) as usize
    }
}

/// One to four random edits of `input` (`other`: a second corpus entry for splices).
fn mutate(rng: &mut Rng, input: &[u8], other: &[u8]) -> Vec<u8> {
    const INTERESTING: [u64; 9] = [0, 1, 0x7f, 0x80, 0xff, 0xffff, 0x8000_0000, 0xffff_ffff, u64::MAX];
    let mut v = input.to_vec();
    for _ in 0..=rng.below(4) {
        let at = rng.below(v.len() + 1);
        match rng.below(7) {
            0 if !v.is_empty() => {
                let i = rng.below(v.len());
                v[i] ^= 1 << rng.below(8);
            }
            1 if !v.is_empty() => {
                let i = rng.below(v.len());
                v[i] = rng.next() as u8;
            }
            2 => v.insert(at, rng.next() as u8),
            3 if !v.is_empty() => {
                let n = rng.below(v.len() - at.min(v.len()) + 1).min(16);
                v.drain(at.min(v.len())..(at + n).min(v.len()));
            }
            4 => {
                let from = rng.below(other.len() + 1);
                let n = rng.below(other.len() - from + 1);
                v.splice(at..at, other[from..from + n].iter().copied());
            }
            5 => {
                let val = INTERESTING[rng.below(INTERESTING.len())].to_le_bytes();
                let n = [1, 2, 4, 8][rng.below(4)];
                for (k, b) in val[..n].iter().enumerate() {
                    if at + k < v.len() {
                        v[at + k] = *b;
                    }
                }
            }
            _ => v.truncate(at),
        }
    }
    v
}

fn run(target: &str) {
    let f = nemesis_fuzz::TARGETS.iter().find(|t| t.0 == target).expect("a target").1;
    let entries = corpus(target);
    assert!(!entries.is_empty(), "{target} has no seeds");
    let check = |input: &[u8]| {
        if std::panic::catch_unwind(|| f(input)).is_err() {
            panic!("{target} panicked on {input:?}");
        }
    };
    for e in &entries {
        check(e);
    }
    let runs: usize = std::env::var("NEMESIS_FUZZ_RUNS").ok().and_then(|v| v.parse().ok()).unwrap_or(2000);
    let seed: u64 = std::env::var("NEMESIS_FUZZ_SEED").ok().and_then(|v| v.parse().ok()).unwrap_or(0x6e65_6d65);
    let mut rng = Rng(seed | 1);
    for _ in 0..runs {
        let a = &entries[rng.below(entries.len())];
        let b = &entries[rng.below(entries.len())];
        check(&mutate(&mut rng, a, b));
    }
}

#[test]
fn every_target_has_a_libfuzzer_binary_and_a_corpus() {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    let manifest = std::fs::read_to_string(root.join("libfuzzer/Cargo.toml")).unwrap();
    for (name, _) in nemesis_fuzz::TARGETS {
        assert!(root.join(format!("libfuzzer/fuzz_targets/{name}.rs")).exists(), "{name}");
        assert!(manifest.contains(&format!("name = \"{name}\"")), "{name}");
        assert!(corpus_dir(name).is_dir(), "{name}");
    }
}

#[test]
fn shm_port() {
    run("shm_port");
}

#[test]
fn lmt_control() {
    run("lmt_control");
}

#[test]
fn tcp_frames() {
    run("tcp_frames");
}

#[test]
fn tcp_hello() {
    run("tcp_hello");
}

#[test]
fn ft_control() {
    run("ft_control");
}

#[test]
fn ft_piggyback() {
    run("ft_piggyback");
}

#[test]
fn pmi_server() {
    run("pmi_server");
}

#[test]
fn pmi1_client() {
    run("pmi1_client");
}

#[test]
fn pmi2_client() {
    run("pmi2_client");
}

#[test]
fn pmi_mapping() {
    run("pmi_mapping");
}

// --- ft_checkpoint (issue 30) ---

#[test]
fn ft_checkpoint() {
    run("ft_checkpoint");
}

#[test]
fn tcp_card() {
    run("tcp_card");
}

#[test]
fn beat_open() {
    run("beat_open");
}

#[test]
fn ft_frame() {
    run("ft_frame");
}

#[test]
fn locality() {
    run("locality");
}

#[test]
fn ofi_fragments() {
    run("ofi_fragments");
}

#[test]
fn rma_key() {
    run("rma_key");
}
