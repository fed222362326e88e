//! What a rank can make `nemesis-run` hold or print is bounded and safe: a rank that writes its
//! PMI socket without end is cut off with a message while the launcher's memory stays small and
//! the job goes on; an abort message reaches the operator's terminal without its escape
//! sequences. Ranks are `sh -c` snippets speaking PMI-1 by hand over `PMI_FD`.

use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

const LAUNCHER: &str = env!("CARGO_BIN_EXE_nemesis-run");

/// Longest a step may take here (the tests never measure speed).
const BOUND: Duration = Duration::from_secs(60);

/// A scratch directory, removed on drop.
struct TempDir(PathBuf);

impl TempDir {
    fn new(tag: &str) -> TempDir {
        let p = std::env::temp_dir().join(format!("nemesis-limits-{}-{tag}", std::process::id()));
        std::fs::create_dir_all(&p).unwrap();
        TempDir(p)
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// The peak resident memory of process `pid` (`VmHWM`, bytes).
fn peak_rss(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    let kb: u64 = status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap();
    kb * 1024
}

/// Waits for `path` to appear while the launcher `child` runs (it is killed otherwise).
fn wait_for(path: &std::path::Path, child: &mut std::process::Child) {
    let t = Instant::now();
    while !path.exists() {
        if t.elapsed() > BOUND || child.try_wait().unwrap().is_some() {
            use std::io::Read;
            let _ = child.kill();
            let _ = child.wait();
            let mut err = String::new();
            let _ = child.stderr.take().map(|mut e| e.read_to_string(&mut err));
            panic!("{} never appeared; the launcher's stderr:\n{err}", path.display());
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn a_rank_flooding_its_pmi_socket_is_cut_off_and_the_job_goes_on() {
    let dir = TempDir::new("flood");
    // Rank 0 writes 64 MiB without a newline; rank 1 waits for that, then asks the server
    // something. Both wait for the test's go before exiting 0.
    let script = r#"
        if [ "$PMI_RANK" = 0 ]; then
            head -c 67108864 /dev/zero | tr '\0' x >&$PMI_FD
            touch "$NT_DIR/flooded"
        else
            while [ ! -e "$NT_DIR/flooded" ]; do sleep 0.02; done
            printf 'cmd=get_appnum\n' >&$PMI_FD
            read -r reply <&$PMI_FD
            echo "rank 1 got $reply"
        fi
        while [ ! -e "$NT_DIR/go" ]; do sleep 0.02; done
        exit 0
    "#;
    let mut child = Command::new(LAUNCHER)
        .args(["-n", "2", "--", "sh", "-c", script])
        .env("NT_DIR", &dir.0)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    wait_for(&dir.0.join("flooded"), &mut child);
    let peak = peak_rss(child.id());
    std::fs::write(dir.0.join("go"), b"").unwrap();
    let t = Instant::now();
    while child.try_wait().unwrap().is_none() {
        assert!(t.elapsed() < BOUND, "the launcher did not end");
        std::thread::sleep(Duration::from_millis(20));
    }
    let out = child.wait_with_output().unwrap();
    let (stdout, stderr) = (String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    assert_eq!(out.status.code(), Some(0), "stdout:\n{stdout}\nstderr:\n{stderr}");
    assert!(
        stderr.contains("nemesis-run: rank 0 sent a PMI line longer than 4096 bytes: its PMI connection is closed"),
        "{stderr}"
    );
    assert!(stdout.contains("rank 1 got cmd=appnum appnum=0 rc=0"), "the server still serves the others:\n{stdout}");
    // The launcher held a line's worth of the 64 MiB at a time (its own size is a few MiB).
    eprintln!("the launcher's peak resident memory: {} KiB", peak >> 10);
    assert!(peak < 32 << 20, "the launcher's peak resident memory was {} MiB", peak >> 20);
}

#[test]
fn an_abort_message_is_printed_without_its_escape_sequences() {
    // ESC ] (set the window title), BEL, ESC [ 2J (clear the screen), a carriage return.
    let script = r#"printf 'cmd=abort exitcode=3 message=evil\033]0;pwned\007\033[2J\rend\n' >&$PMI_FD; exec sleep 30"#;
    let out = Command::new(LAUNCHER).args(["-n", "1", "--", "sh", "-c", script]).stdin(Stdio::null()).output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(3), "{stderr}");
    assert!(stderr.contains(r"called abort with exit code 3: evil\x1b]0;pwned\x07\x1b[2J\x0dend"), "{stderr}");
    assert!(!out.stderr.iter().any(|&b| b == 0x1b || b == 0x07 || b == b'\r'), "{stderr:?}");
}
