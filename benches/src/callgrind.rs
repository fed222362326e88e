//! Instruction counts with callgrind (valgrind): there are no hardware counters on the project's
//! machine. A process runs itself under `valgrind --tool=callgrind --collect-atstart=no`, turns
//! collection on around each measured region with a client request, and dumps the region's
//! count; the parent reads the dumps.
//!
//! The client request is valgrind's documented magic sequence for amd64 (valgrind.h,
//! `VALGRIND_DO_CLIENT_REQUEST_EXPR`): four rotations of `rdi` that add up to 128 bits (a no-op on
//! bare metal) then `xchg rbx, rbx`, with `rax` pointing at the request and its arguments and the
//! result in `rdx`. Outside valgrind it costs a handful of instructions and returns the default.

use std::path::{Path, PathBuf};
use std::process::Command;

/// `VG_USERREQ_TOOL_BASE('C','T')`: callgrind's request numbers.
const CALLGRIND_BASE: usize = (b'C' as usize) << 24 | (b'T' as usize) << 16;
const DUMP_STATS_AT: usize = CALLGRIND_BASE + 3;
const TOGGLE_COLLECT: usize = CALLGRIND_BASE + 2;
const ZERO_STATS: usize = CALLGRIND_BASE + 1;

#[cfg(target_arch = "x86_64")]
#[inline(always)]
fn client_request(default: usize, request: usize, arg1: usize) -> usize {
    let args: [usize; 6] = [request, arg1, 0, 0, 0, 0];
    let mut result = default;
    // SAFETY: the sequence leaves every register as it found it except `rdx` (declared) when not
    // under valgrind; under valgrind the request reads `args`, which lives across the asm.
    unsafe {
        core::arch::asm!(
            "rol rdi, 3",
            "rol rdi, 13",
            "rol rdi, 61",
            "rol rdi, 51",
            "xchg rbx, rbx",
            inout("rdx") result,
            in("rax") args.as_ptr(),
            inout("rdi") 0usize => _,
            options(nostack, preserves_flags),
        );
    }
    result
}

#[cfg(not(target_arch = "x86_64"))]
#[inline(always)]
fn client_request(default: usize, _request: usize, _arg1: usize) -> usize {
    default
}

/// Starts or stops collecting costs.
#[inline(always)]
pub fn toggle_collect() {
    client_request(0, TOGGLE_COLLECT, 0);
}

/// Zeroes the costs collected so far.
#[inline(always)]
pub fn zero_stats() {
    client_request(0, ZERO_STATS, 0);
}

/// Dumps the costs collected since the last dump into a new file tagged `name`.
pub fn dump(name: &str) {
    let c = std::ffi::CString::new(name).expect("no NUL in dump names");
    client_request(0, DUMP_STATS_AT, c.as_ptr() as usize);
}

/// Runs `f` `n` times with collection on, then dumps the count as `name`.
#[inline(always)]
pub fn region(name: &str, n: usize, mut f: impl FnMut(usize)) {
    zero_stats();
    toggle_collect();
    for i in 0..n {
        f(std::hint::black_box(i));
    }
    toggle_collect();
    dump(name);
}

/// Runs `exe args` under callgrind with collection off at start, in a fresh directory, and
/// returns the instruction count of every dump by name.
pub fn run_under_callgrind(exe: &Path, args: &[&str]) -> std::io::Result<Vec<(String, u64)>> {
    let dir = tempdir()?;
    let out = dir.join("callgrind.out");
    let status = Command::new("valgrind")
        .args(["--tool=callgrind", "--collect-atstart=no", "--dump-instr=no", "--compress-strings=no"])
        .arg(format!("--callgrind-out-file={}", out.display()))
        .arg(exe)
        .args(args)
        .env("NEMESIS_UNDER_CALLGRIND", "1")
        .stderr(std::process::Stdio::piped())
        .output()
        .map_err(|e| {
            if e.kind() == std::io::ErrorKind::NotFound {
                std::io::Error::new(e.kind(), "valgrind not found: install it (apt-get install valgrind)")
            } else {
                e
            }
        })?;
    if !status.status.success() {
        return Err(std::io::Error::other(format!(
            "valgrind failed ({}): {}",
            status.status,
            String::from_utf8_lossy(&status.stderr)
        )));
    }
    let mut dumps = Vec::new();
    for entry in std::fs::read_dir(&dir)? {
        let path = entry?.path();
        if let Some(d) = parse_dump(&std::fs::read_to_string(&path)?) {
            dumps.push(d);
        }
    }
    let _ = std::fs::remove_dir_all(&dir);
    Ok(dumps)
}

/// `(name, instructions)` of one callgrind dump: the name from its `desc: Trigger: Client
/// Request: NAME` line, the count from `summary:` (or `totals:`).
pub fn parse_dump(text: &str) -> Option<(String, u64)> {
    let mut name = None;
    let mut total = None;
    for line in text.lines() {
        if let Some(rest) = line.strip_prefix("desc: Trigger: Client Request: ") {
            name = Some(rest.trim().to_owned());
        } else if let Some(rest) = line.strip_prefix("summary:").or_else(|| line.strip_prefix("totals:")) {
            total = rest.split_whitespace().next().and_then(|t| t.parse().ok());
        }
    }
    Some((name?, total.unwrap_or(0)))
}

fn tempdir() -> std::io::Result<PathBuf> {
    let dir = std::env::temp_dir().join(format!("nemesis-callgrind-{}-{}", std::process::id(), nanos()));
    std::fs::create_dir_all(&dir)?;
    Ok(dir)
}

fn nanos() -> u128 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_nanos()).unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_a_client_request_dump() {
        let text = "version: 1\ncreator: callgrind-3.19.0\ncmd: x\npart: 3\ndesc: I1 cache:\n\
                    desc: Trigger: Client Request: enqueue\npositions: line\nevents: Ir\n\
                    summary: 150003\nfl= (1)\ntotals: 150003\n";
        assert_eq!(parse_dump(text), Some(("enqueue".to_owned(), 150003)));
        assert_eq!(parse_dump("desc: Trigger: Program termination\nsummary: 5\n"), None);
    }

    #[test]
    fn client_requests_are_harmless_outside_valgrind() {
        toggle_collect();
        toggle_collect();
        zero_stats();
        dump("nothing");
        let mut sum = 0;
        region("loop", 10, |i| sum += i);
        assert_eq!(sum, 45);
    }
}
