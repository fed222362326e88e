use super::arena::CHUNK;
use super::*;
use proptest::prelude::*;

fn pb(date: Date, phase: Phase) -> Piggyback {
    Piggyback::new(date, phase, None).unwrap()
}

fn payload(date: Date) -> Vec<u8> {
    (0..(date % 37 + 1)).map(|i| (date as u8).wrapping_mul(31).wrapping_add(i as u8)).collect()
}

#[test]
fn ack_drops_strictly_older_entries() {
    let mut log = SenderLog::new(3, LogConfig { memory_limit: 1 << 20, spill_dir: None, spill_limit: None });
    for d in [2, 4, 6, 8] {
        log.append(1, pb(d, 1), &payload(d)).unwrap();
    }
    log.discard_before(1, 6);
    assert_eq!(log.entries(1), vec![(6, 1), (8, 1)]);
    let mut out = Vec::new();
    log.read(1, 6, &mut out).unwrap();
    assert_eq!(out, payload(6));
    assert!(matches!(log.read(1, 4, &mut out), Err(Error::LogEntryMissing { .. })));
    assert_eq!(log.last_logged(1), 8);
    log.discard_before(1, 100);
    assert!(log.is_empty());
    assert_eq!(log.last_logged(1), 8, "the highest date survives garbage collection");
    assert_eq!(log.memory_bytes(), 0);
}

#[test]
fn out_of_order_and_unknown_ranks_are_errors() {
    let mut log = SenderLog::new(2, LogConfig { memory_limit: 1 << 20, spill_dir: None, spill_limit: None });
    log.append(0, pb(5, 1), b"x").unwrap();
    assert!(matches!(log.append(0, pb(5, 1), b"y"), Err(Error::LogOutOfOrder { .. })));
    assert!(matches!(log.append(2, pb(9, 1), b"y"), Err(Error::UnknownRank { .. })));
    assert!(matches!(log.read(7, 1, &mut Vec::new()), Err(Error::UnknownRank { .. })));
}

#[test]
fn spills_beyond_the_bound_and_reads_back() {
    let dir = std::env::temp_dir();
    let mut log = SenderLog::new(4, LogConfig { memory_limit: 200, spill_dir: Some(dir), spill_limit: None });
    for d in 1..=60 {
        log.append((d % 3) as Rank, pb(d, d / 10 + 1), &payload(d)).unwrap();
        assert!(log.memory_bytes() <= 200);
    }
    assert!(log.spilled_bytes() > 0);
    let mut out = Vec::new();
    for d in 1..=60 {
        let got = log.read((d % 3) as Rank, d, &mut out).unwrap();
        assert_eq!(got.phase(), d / 10 + 1);
        assert_eq!(out, payload(d), "date {d}");
    }
    for to in 0..3 {
        log.discard_before(to, 1000);
    }
    assert_eq!(log.spilled_bytes(), 0);
    assert_eq!(log.spill_file_bytes(), 0, "an empty spill is truncated");
}

#[test]
fn snapshot_round_trips_through_serde() {
    let mut log =
        SenderLog::new(3, LogConfig { memory_limit: 50, spill_dir: Some(std::env::temp_dir()), spill_limit: None });
    for d in 1..=20 {
        log.append((d % 2) as Rank, pb(d, 1 + d / 7), &payload(d)).unwrap();
    }
    log.discard_before(0, 9);
    let snap = log.snapshot().unwrap();
    let json = serde_json::to_string(&snap).unwrap();
    let back: LogSnapshot = serde_json::from_str(&json).unwrap();
    let restored =
        SenderLog::restore(3, LogConfig { memory_limit: 1 << 20, spill_dir: None, spill_limit: None }, &back).unwrap();
    for to in 0..3 {
        assert_eq!(restored.entries(to), log.entries(to));
        assert_eq!(restored.last_logged(to), log.last_logged(to));
    }
    let (mut a, mut b) = (Vec::new(), Vec::new());
    for (d, _) in log.entries(1) {
        log.read(1, d, &mut a).unwrap();
        restored.read(1, d, &mut b).unwrap();
        assert_eq!(a, b);
    }
}

/// A fresh directory of this test process.
fn scratch_dir(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("nemesis-ft-log-test-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir(&d).unwrap();
    d
}

/// Events inotify reported for a watch on the spill directory (names created or moved in).
fn created_names(fd: i32) -> Vec<String> {
    let mut buf = [0u8; 4096];
    // SAFETY: reads into `buf`, of the length given, from the inotify descriptor of this test.
    let n = unsafe { libc::read(fd, buf.as_mut_ptr().cast(), buf.len()) };
    let mut names = Vec::new();
    let mut at = 0usize;
    let head = std::mem::size_of::<libc::inotify_event>();
    while n > 0 && at + head <= n as usize {
        let len = u32::from_ne_bytes([buf[at + 12], buf[at + 13], buf[at + 14], buf[at + 15]]) as usize;
        let name = &buf[at + head..(at + head + len).min(n as usize)];
        names.push(String::from_utf8_lossy(name).trim_end_matches('\0').to_owned());
        at += head + len;
    }
    names
}

#[test]
fn the_spill_file_never_has_a_name_and_only_its_owner_may_open_it() {
    use std::os::unix::ffi::OsStrExt;
    use std::os::unix::fs::{MetadataExt, PermissionsExt};
    let dir = scratch_dir("private");
    let path = std::ffi::CString::new(dir.as_os_str().as_bytes()).unwrap();
    // SAFETY: plain system calls on a descriptor this test owns and a valid C string.
    let fd = unsafe { libc::inotify_init1(libc::IN_NONBLOCK | libc::IN_CLOEXEC) };
    assert!(fd >= 0);
    // SAFETY: as above.
    let wd = unsafe { libc::inotify_add_watch(fd, path.as_ptr(), libc::IN_CREATE | libc::IN_MOVED_TO) };
    assert!(wd >= 0);
    let mut log = SenderLog::new(2, LogConfig { memory_limit: 64, spill_dir: Some(dir.clone()), spill_limit: None });
    for d in 1..=40 {
        log.append(1, pb(d, 1), &payload(d)).unwrap();
    }
    assert!(log.spilled_bytes() > 0);
    // No name ever appeared in the directory: nobody could open the file between its creation
    // and its removal.
    let seen = created_names(fd);
    // SAFETY: closes the descriptor this test opened.
    unsafe { libc::close(fd) };
    assert!(seen.is_empty(), "the spill file had a name in {}: {seen:?}", dir.display());
    let meta = log.spill.as_ref().unwrap().file.metadata().unwrap();
    assert_eq!(meta.permissions().mode() & 0o777, 0o600, "mode {:o}", meta.permissions().mode());
    assert_eq!(meta.nlink(), 0);
    assert_eq!(std::fs::read_dir(&dir).unwrap().count(), 0);
    let mut out = Vec::new();
    log.read(1, 1, &mut out).unwrap();
    assert_eq!(out, payload(1));
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn the_named_fallback_is_private_unlinked_and_steps_over_planted_links() {
    use std::os::unix::fs::{MetadataExt, PermissionsExt};
    let dir = scratch_dir("named");
    let victim = dir.join("victim");
    std::fs::write(&victim, b"precious").unwrap();
    // Links at the next names this process would take (only this test takes named files
    // where the file system has O_TMPFILE).
    let next = SPILL_COUNTER.load(Ordering::Relaxed);
    for n in next..next + 4 {
        let name = format!("nemesis-ft-log-{}-{n}.spill", std::process::id());
        std::os::unix::fs::symlink(&victim, dir.join(name)).unwrap();
    }
    let spill = Spill::create_named(&dir).unwrap();
    spill.file.write_all_at(b"spilled", 0).unwrap();
    let meta = spill.file.metadata().unwrap();
    assert_eq!(meta.permissions().mode() & 0o777, 0o600);
    assert_eq!(meta.nlink(), 0, "unlinked at once");
    assert_eq!(std::fs::read(&victim).unwrap(), b"precious", "a planted link was followed");
    // The victim and the four links: nothing else is left.
    assert_eq!(std::fs::read_dir(&dir).unwrap().count(), 5);
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn small_copies_copy_exactly_every_length() {
    let src: Vec<u8> = (1..=200u8).collect();
    for n in (0..=40).chain([63, 64, 65, 127, 200]) {
        let mut arena = vec![0u8; 256];
        copy_payload(&mut arena[5..5 + n], &src[..n]);
        assert_eq!(&arena[5..5 + n], &src[..n], "n = {n}");
        assert!(arena[..5].iter().chain(&arena[5 + n..]).all(|&b| b == 0), "n = {n}: wrote outside");
    }
}

#[test]
fn the_arena_is_reused_after_an_ack_without_growing() {
    let mut log = SenderLog::new(2, LogConfig { memory_limit: usize::MAX, spill_dir: None, spill_limit: None });
    // The first interval grows the tail chunk by doubling; an acknowledgement frees the smaller chunks before it, so
    // the second interval's traffic fits a tail chunk at most twice its size, and the third one's the same.
    let mut tail = Vec::new();
    let mut out = Vec::new();
    for round in 0..3u64 {
        let dates = 1000 * round + 1..=1000 * (round + 1);
        for d in dates.clone() {
            log.append(1, pb(d, round + 1), &payload(d)).unwrap();
        }
        for d in [*dates.start(), 1000 * round + 500, *dates.end()] {
            assert_eq!(log.read(1, d, &mut out).unwrap().phase(), round + 1);
            assert_eq!(out, payload(d));
        }
        log.discard_before(1, dates.end() + 1);
        assert_eq!((log.channels[1].arena.fill, log.channels[1].arena.memory()), (0, 0), "an empty arena rewinds");
        assert_eq!(log.channels[1].arena.chunks(), 1, "only the tail chunk stays");
        tail.push(log.channels[1].arena.bytes.len());
    }
    assert!(tail[1] <= 2 * tail[0] && tail[2] == tail[1], "the same traffic fits the same tail chunk: {tail:?}");
}

/// A log of one destination, without bound or spill file.
fn unbounded() -> SenderLog {
    SenderLog::new(1, LogConfig { memory_limit: usize::MAX, spill_dir: None, spill_limit: None })
}

#[test]
fn payloads_across_chunk_boundaries_read_back_whole() {
    let mut log = unbounded();
    let big = |d: Date, n: usize| (0..n).map(|i| (i as u64 * 31 + d) as u8).collect::<Vec<u8>>();
    // 1000-byte entries behind a 5-byte head: the 4 KiB first chunk ends inside the fifth, the next ones (8, 16 KiB,
    // ...) inside others; a 3 MiB one spans several full-size chunks.
    let mut sizes: Vec<usize> = vec![1000; 40];
    sizes.push(3 * CHUNK);
    sizes.extend([1, 0, 4095, 4096, 4097]);
    for (d, &n) in (1..).zip(&sizes) {
        log.append_parts(0, pb(d, 1), b"head:", &big(d, n)).unwrap();
    }
    assert!(log.channels[0].arena.chunks() > 6, "the stream spans chunks");
    let mut out = Vec::new();
    for (d, &n) in (1..).zip(&sizes) {
        log.read(0, d, &mut out).unwrap();
        assert_eq!(&out[..5], b"head:", "entry {d}");
        assert!(out[5..] == big(d, n)[..], "entry {d} of {n} bytes read back whole");
    }
    // The same through a snapshot and a restore.
    let restored = SenderLog::restore(1, log.config.clone(), &log.snapshot().unwrap()).unwrap();
    assert_eq!(restored.snapshot().unwrap(), log.snapshot().unwrap());
}

#[test]
fn acknowledged_chunks_are_reused_not_allocated_again() {
    let mut log = unbounded();
    let msg = vec![0xa5u8; 4000];
    // Grow past several full-size chunks, then acknowledge everything: the full chunks go to the pool.
    let n = (4 * CHUNK / msg.len()) as u64;
    for d in 1..=n {
        log.append(0, pb(d, 1), &msg).unwrap();
    }
    let held = log.channels[0].arena.chunks();
    log.discard_before(0, n + 1);
    let pooled = log.pool.len();
    assert!(pooled >= 2, "full chunks freed by the acknowledgement are kept: {pooled}");
    assert_eq!(log.channels[0].arena.chunks(), 1, "the tail stays with the channel");
    let addresses: Vec<*const u8> = log.pool.free.iter().map(|c| c.as_ptr()).collect();
    // The same traffic again takes its full-size chunks from the pool: no new ones.
    for d in n + 1..=2 * n {
        log.append(0, pb(d, 1), &msg).unwrap();
    }
    assert!(log.channels[0].arena.chunks() <= held);
    let used: Vec<*const u8> = log.channels[0].arena.full.iter().map(|(_, c)| c.as_ptr()).collect();
    assert!(addresses.iter().all(|a| used.contains(a) || log.channels[0].arena.bytes.as_ptr() == *a), "reused");
    let mut out = Vec::new();
    log.read(0, 2 * n, &mut out).unwrap();
    assert_eq!(out, msg);
}

#[test]
fn a_steady_state_does_not_grow() {
    let mut log = unbounded();
    let msg = vec![7u8; 300];
    let mut date = 0;
    let mut round = |log: &mut SenderLog| {
        // A checkpoint interval's worth of messages (about 3 MiB), then the acknowledgement of them all but the last.
        for _ in 0..10_000 {
            date += 1;
            log.append(0, pb(date, 1), &msg).unwrap();
        }
        log.discard_before(0, date);
        (log.channels[0].arena.chunks() + log.pool.len(), log.channels[0].entries.capacity())
    };
    // Where an interval's 3 MB fall among 1 MiB chunks varies, so the first few take up to four and the tail; from then on
    // the chunks held (the channel's and the pool's) and the index's capacity stay put.
    let held: Vec<(usize, usize)> = (0..25).map(|_| round(&mut log)).collect();
    assert!(held[5..].iter().all(|h| *h == held[5]), "no growth in a steady state: {held:?}");
    assert!(held[5].0 <= 5, "3 MB live at most span four chunks and a tail: {held:?}");
    assert_eq!(log.memory_bytes(), msg.len());
}

#[test]
fn spilling_from_chunks_keeps_every_byte() {
    let dir = scratch_dir("chunks");
    let mut log =
        SenderLog::new(2, LogConfig { memory_limit: 3 * CHUNK, spill_dir: Some(dir.clone()), spill_limit: None });
    let big = |d: Date| vec![d as u8; 100_000 + d as usize];
    for d in 1..=100 {
        log.append(d as Rank % 2, pb(d, 1), &big(d)).unwrap();
    }
    assert!(log.spilled_bytes() > 0 && log.memory_bytes() <= 3 * CHUNK);
    let mut out = Vec::new();
    for d in 1..=100 {
        log.read(d as Rank % 2, d, &mut out).unwrap();
        assert!(out == big(d), "entry {d}");
    }
    log.discard_before(0, 101);
    log.discard_before(1, 101);
    assert_eq!((log.memory_bytes(), log.spilled_bytes()), (0, 0));
    let _ = std::fs::remove_dir_all(dir);
}

#[test]
fn an_exhausted_spill_is_an_error_and_loses_nothing_logged_before() {
    let dir = Some(std::env::temp_dir());
    let mut log = SenderLog::new(2, LogConfig { memory_limit: 100, spill_dir: dir, spill_limit: Some(150) });
    let mut d = 0;
    let err = loop {
        d += 1;
        if let Err(e) = log.append(1, pb(d, 1), &[d as u8; 40]) {
            break e;
        }
        assert!(d < 100, "the bounds were never reached");
    };
    assert!(matches!(err, Error::LogExhausted { memory_limit: 100, spill_limit: 150 }), "{err}");
    assert!(log.spilled_bytes() <= 150);
    let mut out = Vec::new();
    for k in 1..=d {
        log.read(1, k, &mut out).unwrap();
        assert_eq!(out, [k as u8; 40], "entry {k}");
    }
    // An acknowledgement makes room again.
    log.discard_before(1, d + 1);
    log.append(1, pb(d + 1, 1), &[0; 40]).unwrap();
}

#[test]
fn two_part_entries_read_back_whole() {
    let mut log =
        SenderLog::new(1, LogConfig { memory_limit: 64, spill_dir: Some(std::env::temp_dir()), spill_limit: None });
    for d in 1..=20u64 {
        log.append_parts(0, pb(d, 1), &d.to_le_bytes(), &payload(d)).unwrap();
    }
    assert!(log.spilled_bytes() > 0);
    let mut out = Vec::new();
    for d in 1..=20u64 {
        log.read(0, d, &mut out).unwrap();
        assert_eq!(out[..8], d.to_le_bytes());
        assert_eq!(out[8..], payload(d)[..]);
    }
}

#[test]
fn empty_payloads_are_logged() {
    let mut log =
        SenderLog::new(1, LogConfig { memory_limit: 0, spill_dir: Some(std::env::temp_dir()), spill_limit: None });
    log.append(0, pb(1, 1), b"").unwrap();
    log.append(0, pb(2, 1), b"ab").unwrap();
    log.append(0, pb(3, 1), b"").unwrap();
    let mut out = vec![9];
    for (d, want) in [(1, &b""[..]), (2, b"ab"), (3, b"")] {
        log.read(0, d, &mut out).unwrap();
        assert_eq!(out, want);
    }
    assert_eq!(log.memory_bytes(), 0);
}

proptest! {
    /// Payloads of every size, from empty to several arenas' worth, through growth, moves, spills and drops.
    #[test]
    fn arenas_match_a_model(
        ops in proptest::collection::vec((0u32..2, 0u8..4, 0usize..3000), 1..80),
        limit in prop_oneof![Just(usize::MAX), 0usize..20_000],
    ) {
        let mut log = SenderLog::new(2, LogConfig { memory_limit: limit, spill_dir: Some(std::env::temp_dir()), spill_limit: None });
        let mut model: Vec<Vec<(Date, Vec<u8>)>> = vec![Vec::new(); 2];
        let mut date: Date = 0;
        for (to, op, len) in ops {
            if op == 0 {
                let before = date.saturating_sub(len as Date % 5);
                log.discard_before(to, before);
                model[to as usize].retain(|(d, _)| *d >= before);
            } else {
                date += 1;
                let bytes: Vec<u8> = (0..len).map(|i| (i as u8).wrapping_add(date as u8)).collect();
                log.append(to, pb(date, 1), &bytes).unwrap();
                model[to as usize].push((date, bytes));
            }
            prop_assert!(log.memory_bytes() <= limit);
            prop_assert_eq!(log.memory_bytes(), log.channels.iter().map(Channel::memory).sum::<usize>());
        }
        let mut out = Vec::new();
        for to in 0..2u32 {
            for (d, want) in &model[to as usize] {
                log.read(to, *d, &mut out).unwrap();
                prop_assert_eq!(&out, want);
            }
            prop_assert_eq!(log.len(to), model[to as usize].len());
        }
    }

    /// The store agrees with a plain model under random appends, drops and spill bounds.
    #[test]
    fn matches_a_model(ops in proptest::collection::vec((0u32..3, any::<bool>(), 0u64..6), 1..120), limit in 0usize..300) {
        let mut log = SenderLog::new(3, LogConfig { memory_limit: limit, spill_dir: Some(std::env::temp_dir()), spill_limit: None });
        let mut model: Vec<Vec<(Date, Vec<u8>)>> = vec![Vec::new(); 3];
        let mut date = 0;
        for (to, append, back) in ops {
            if append {
                date += 1;
                log.append(to, pb(date, 1), &payload(date)).unwrap();
                model[to as usize].push((date, payload(date)));
            } else {
                let before = date.saturating_sub(back);
                log.discard_before(to, before);
                model[to as usize].retain(|(d, _)| *d >= before);
            }
            prop_assert!(log.memory_bytes() <= limit);
        }
        let mut out = Vec::new();
        for to in 0..3u32 {
            let dates: Vec<Date> = log.entries(to).into_iter().map(|e| e.0).collect();
            let want: Vec<Date> = model[to as usize].iter().map(|e| e.0).collect();
            prop_assert_eq!(dates, want);
            for (d, p) in &model[to as usize] {
                log.read(to, *d, &mut out).unwrap();
                prop_assert_eq!(&out, p);
            }
        }
    }
}
