//! Segment creation on both paths: the named segment's life cycle, and a full `/dev/shm` or a
//! memory limit reported as [`Error::NoSpace`] at creation (never a SIGBUS later).
//!
//! The `/dev/shm` case mounts a 1 MiB tmpfs over `/dev/shm` in a private mount namespace of a
//! child process; it needs the right to do so (root). Without it the test is skipped with a
//! message, unless `CI=true`, where it fails.
#![cfg(not(loom))]

use std::os::unix::process::ExitStatusExt;
use std::process::Command;

use nemesis_shm::{Backing, Error, Node, Params, Segment};

fn in_ci() -> bool {
    std::env::var("CI").is_ok_and(|v| v == "true" || v == "1")
}

/// Runs this test binary's `child` entry point with `role`; returns its exit code and output.
fn run_child(role: &str) -> (i32, String) {
    let out = Command::new(std::env::current_exe().unwrap())
        .args(["--exact", "child", "--nocapture", "--test-threads=1"])
        .env("NEMESIS_SEGMENT_TEST_ROLE", role)
        .output()
        .unwrap();
    let code = out.status.code().unwrap_or_else(|| 128 + out.status.signal().unwrap_or(0));
    (code, String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr))
}

/// Exit codes of the child.
const OK: i32 = 0;
const WRONG: i32 = 1;
const CANNOT: i32 = 3;

#[test]
fn child() {
    let Ok(role) = std::env::var("NEMESIS_SEGMENT_TEST_ROLE") else { return };
    let code = match role.as_str() {
        "full-dev-shm" => full_dev_shm(),
        "memory-limit" => memory_limit(),
        _ => WRONG,
    };
    std::process::exit(code);
}

/// In a private mount namespace, `/dev/shm` becomes a 1 MiB tmpfs; an 8-rank named segment (about
/// 9 MiB) must fail with `NoSpace`, and leave no file behind.
fn full_dev_shm() -> i32 {
    // SAFETY: plain syscalls on this (single-threaded) child process.
    unsafe {
        if libc::unshare(libc::CLONE_NEWNS) != 0 {
            println!("cannot unshare the mount namespace: {}", std::io::Error::last_os_error());
            return CANNOT;
        }
        let none = c"none";
        if libc::mount(
            none.as_ptr(),
            c"/".as_ptr(),
            std::ptr::null(),
            libc::MS_REC | libc::MS_PRIVATE,
            std::ptr::null(),
        ) != 0
        {
            println!("cannot make mounts private: {}", std::io::Error::last_os_error());
            return CANNOT;
        }
        if libc::mount(c"tmpfs".as_ptr(), c"/dev/shm".as_ptr(), c"tmpfs".as_ptr(), 0, c"size=1m".as_ptr().cast()) != 0 {
            println!("cannot mount a tmpfs on /dev/shm: {}", std::io::Error::last_os_error());
            return CANNOT;
        }
    }
    match Segment::create(8, Params::DEFAULT, Backing::Named) {
        Err(Error::NoSpace { bytes, .. }) => {
            let left = std::fs::read_dir("/dev/shm").map(|d| d.count()).unwrap_or(usize::MAX);
            println!("NoSpace for {bytes} bytes; {left} files left in /dev/shm");
            if left == 0 { OK } else { WRONG }
        }
        other => {
            println!("expected NoSpace, got {other:?}");
            WRONG
        }
    }
}

/// A file-size limit stands for a memory limit on the memfd path: the reservation fails at
/// creation with `NoSpace`.
fn memory_limit() -> i32 {
    // SAFETY: plain syscalls on this child process.
    unsafe {
        libc::signal(libc::SIGXFSZ, libc::SIG_IGN);
        let lim = libc::rlimit { rlim_cur: 1 << 20, rlim_max: 1 << 20 };
        if libc::setrlimit(libc::RLIMIT_FSIZE, &lim) != 0 {
            return CANNOT;
        }
    }
    match Segment::create(8, Params::DEFAULT, Backing::Memfd) {
        Err(Error::NoSpace { .. }) => OK,
        other => {
            println!("expected NoSpace, got {other:?}");
            WRONG
        }
    }
}

#[test]
fn full_dev_shm_is_no_space_at_creation() {
    let (code, out) = run_child("full-dev-shm");
    if code == CANNOT && !in_ci() {
        eprintln!("skipped (needs the right to mount a tmpfs in a private namespace): {out}");
        return;
    }
    assert_eq!(code, OK, "{out}");
}

#[test]
fn memory_limit_is_no_space_at_creation() {
    let (code, out) = run_child("memory-limit");
    assert_eq!(code, OK, "{out}");
}

#[test]
fn named_segment_is_unlinked_once_every_rank_attached() {
    let seg = Segment::create(3, Params::DEFAULT, Backing::Named).unwrap();
    let name = seg.name().unwrap().to_owned();
    let path = format!("/dev/shm{name}");
    let mode = std::fs::metadata(&path).map(|m| std::os::unix::fs::PermissionsExt::mode(&m.permissions()));
    assert_eq!(mode.unwrap() & 0o777, 0o600, "created with mode 0600");
    seg.register(0).unwrap();
    let b = Segment::attach_named(&name).unwrap();
    b.register(1).unwrap();
    assert!(std::path::Path::new(&path).exists(), "two of three attached: the name stays");
    let c = Segment::attach_named(&name).unwrap();
    c.register(2).unwrap();
    assert!(!std::path::Path::new(&path).exists(), "the last rank to attach unlinked it");
    assert!(matches!(Segment::attach_named(&name), Err(Error::Io { .. })));
    // The mappings stay valid and shared.
    assert!(!c.is_gone(0));
    seg.mark_gone(0, 0).unwrap();
    assert!(c.is_gone(0));
    // A second registration of a rank is refused.
    assert!(matches!(b.register(1), Err(Error::Corrupt { .. })));
}

#[test]
fn names_are_unpredictable_and_exclusive() {
    let a = Segment::create(1, Params::DEFAULT, Backing::Named).unwrap();
    let b = Segment::create(1, Params::DEFAULT, Backing::Named).unwrap();
    let (na, nb) = (a.name().unwrap(), b.name().unwrap());
    assert_ne!(na, nb);
    assert!(na.len() >= 32, "{na}");
    a.unlink().unwrap();
    b.unlink().unwrap();
}

/// NUMA placement: the memory each rank owns (hosted fastboxes, copy rings, its cells) carries the
/// policy "preferably on node n" set before the segment's memory was reserved, and its pages are
/// on that node. This machine has one node (0), so every placed rank asks for node 0; rank 1 is
/// left to the kernel. Where `mbind` is forbidden (a seccomp profile) the segment is still made
/// and the refusal returned: the test then skips, failing under `CI=true`.
#[test]
fn owned_memory_is_placed_on_the_ranks_nodes() {
    let nodes = [Some(0), None, Some(0)];
    let (seg, refused) = Segment::create_placed(3, Params::DEFAULT, &nodes).unwrap();
    if let Some(e) = refused {
        assert!(!in_ci(), "mbind refused under CI: {e}");
        eprintln!("skipped: mbind is refused here ({e})");
        return;
    }
    assert_eq!(seg.placed_node(0).unwrap(), Some(0));
    assert_eq!(seg.placed_node(1).unwrap(), None);
    assert_eq!(seg.placed_node(2).unwrap(), Some(0));
    assert!(matches!(seg.placed_node(3), Err(Error::BadRank { .. })));
    let layout = *seg.layout();
    for (start, end) in layout.owned_ranges(2) {
        assert!(start < end && end <= layout.total);
        let page = seg.base_ptr().wrapping_add(end as usize - 1) as *const u8;
        // SAFETY: a byte inside the mapped segment; the read maps the (reserved) page here, which
        // move_pages needs to report its node.
        unsafe { std::ptr::read_volatile(page) };
        assert_eq!(nemesis_shm::os::node_of_page(page).unwrap(), 0, "pages were reserved on the node");
    }
    // The placed segment works as any other: every cell is in its owner's free queue.
    seg.register(0).unwrap();
}
