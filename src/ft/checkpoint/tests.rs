use super::*;
use nemesis_ft::{DateRule, LoggedMessage};

fn xxh(data: &[u8]) -> u64 {
    let mut h = Xxh64::new(0);
    h.update(data);
    h.finish()
}

#[test]
fn xxh64_matches_the_reference_and_streams() {
    // Reference values of XXH64 with seed 0.
    assert_eq!(xxh(b""), 0xEF46_DB37_51D8_E999);
    assert_eq!(xxh(b"a"), 0xD24E_C4F1_A98C_6E5B);
    assert_eq!(xxh(b"abc"), 0x44BC_2CF5_AD77_0999);
    assert_eq!(xxh(b"Nobody inspects the spammish repetition"), 0xFBCE_A83C_8A37_8BF1);
    let data: Vec<u8> = (0..1000u32).map(|i| (i * 31 % 251) as u8).collect();
    let whole = xxh(&data);
    for split in [0, 1, 7, 31, 32, 33, 500, 999] {
        let mut h = Xxh64::new(0);
        h.update(&data[..split]);
        h.update(&data[split..]);
        assert_eq!(h.finish(), whole, "split at {split}");
    }
}

fn image() -> FtImage {
    FtImage {
        process: ProcessState {
            rank: 1,
            date: 42,
            phase: 3,
            received: Vec::new(),
            last_checkpoint_date: 7,
            date_rule: DateRule::Sends,
        },
        log: LogSnapshot { channels: vec![(2, 40, vec![LoggedMessage { date: 40, phase: 2, payload: vec![9; 20] }])] },
        unexpected: vec![SavedMessage {
            source: 0,
            tag: 5,
            context: 0,
            data: b"halo".to_vec(),
            sync: Some(3),
            delivery: None,
        }],
        mpi: b"mpi state".to_vec(),
    }
}

/// The key of job `job` under a fixed secret.
fn key(job: &str) -> CheckpointKey {
    CheckpointKey::new(&JobSecret::from_hex(&"5a".repeat(32)).unwrap(), job)
}

fn scratch(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("nemesis-ckpt-test-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

#[test]
fn written_files_read_back_and_damage_is_refused() {
    let dir = scratch("damage");
    let k = key("damage");
    let app: Vec<u8> = (0..5000u32).map(|i| i as u8).collect();
    let (path, size) = write(&dir, &k, 1, 0, 3, 4, &app, &image()).unwrap();
    assert_eq!(std::fs::metadata(&path).unwrap().len(), size);
    let names: Vec<String> =
        std::fs::read_dir(&dir).unwrap().map(|e| e.unwrap().file_name().into_string().unwrap()).collect();
    assert_eq!(names, [file_name(k.job(), 1, 3)], "no temporary file is left");
    let c = load(&path, &k).unwrap();
    assert_eq!((c.job, c.rank, c.group, c.generation, c.ranks), (k.job(), 1, 0, 3, 4));
    assert_eq!(std::fs::read(&path).unwrap(), encode(&k, 1, 0, 3, 4, &app, &image()).unwrap());
    assert_eq!(c.app, app);
    assert_eq!(c.image, image());
    let good = std::fs::read(&path).unwrap();
    // Every single-byte change, a truncation and an extension are refused.
    for at in [0, 9, 20, 50, 64, 2000, good.len() - 30, good.len() - 1] {
        let mut bad = good.clone();
        bad[at] ^= 0x40;
        std::fs::write(&path, &bad).unwrap();
        assert!(matches!(load(&path, &k), Err(Error::CheckpointCorrupt { .. })), "flipped byte {at}");
    }
    for len in [0, 10, HEADER + 8, good.len() - 1] {
        std::fs::write(&path, &good[..len]).unwrap();
        assert!(matches!(load(&path, &k), Err(Error::CheckpointCorrupt { .. })), "torn at {len}");
    }
    let mut long = good.clone();
    long.push(0);
    std::fs::write(&path, &long).unwrap();
    assert!(matches!(load(&path, &k), Err(Error::CheckpointCorrupt { .. })));
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn the_latest_generation_every_member_holds_is_chosen() {
    let dir = scratch("latest");
    let (k, other) = (key("latest"), key("another job"));
    let members = [0, 1, 2];
    let w = |rank, g| write(&dir, &k, rank, 0, g, 3, &[rank as u8, g as u8], &image()).unwrap();
    assert_eq!(latest_durable(&dir, &k, 0, &members).unwrap(), None);
    for r in members {
        w(r, 1);
    }
    // Generation 2 reached ranks 0 and 1 only (a failure in the middle of the checkpoint).
    w(0, 2);
    w(1, 2);
    let c = latest_durable(&dir, &k, 1, &members).unwrap().unwrap();
    assert_eq!((c.generation, c.app.clone()), (1, vec![1, 1]));
    w(2, 2);
    assert_eq!(latest_durable(&dir, &k, 1, &members).unwrap().unwrap().generation, 2);
    // A corrupt member file makes its generation incomplete: the previous one is taken.
    let p = dir.join(file_name(k.job(), 2, 2));
    let mut b = std::fs::read(&p).unwrap();
    b[HEADER] ^= 1;
    std::fs::write(&p, b).unwrap();
    assert_eq!(latest_durable(&dir, &k, 0, &members).unwrap().unwrap().generation, 1);
    // Other jobs' files are not looked at.
    assert_eq!(latest_durable(&dir, &other, 0, &members).unwrap(), None);
    remove_older(&dir, k.job(), 0, 2).unwrap();
    assert_eq!(generations(&dir, k.job(), 0).unwrap(), [2]);
    assert_eq!(generations(&dir, k.job(), 1).unwrap(), [1, 2]);
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn a_damaged_file_makes_the_group_fall_back_and_everything_damaged_is_lost() {
    let dir = scratch("fallback");
    let k = key("fallback");
    let job = k.job();
    let members = [0, 1];
    let w = |rank, g| write(&dir, &k, rank, 0, g, 2, &[rank as u8, g as u8], &image()).unwrap();
    let damage = |rank, g| {
        let p = dir.join(file_name(job, rank, g));
        let mut b = std::fs::read(&p).unwrap();
        let k = b.len() - 1;
        b[k] ^= 0xff;
        std::fs::write(&p, b).unwrap();
    };
    let point = |rank| restart_point(&dir, &k, rank, &members).unwrap();
    // Nothing written, or a first generation some member never wrote: from the start.
    assert_eq!(point(0), Restore { point: RestartPoint::Start, refused: vec![] });
    w(1, 1);
    assert_eq!(point(0).point, RestartPoint::Start);
    w(0, 1);
    for r in members {
        w(r, 2);
    }
    // Rank 1's newest file is damaged: both members take generation 1, rank 1's file is
    // named as refused.
    damage(1, 2);
    for r in members {
        let f = point(r);
        let RestartPoint::Checkpoint(c) = &f.point else { panic!("{f:?}") };
        assert_eq!((c.rank, c.generation, c.app.clone()), (r, 1, vec![r as u8, 1]));
        assert_eq!(f.refused.len(), 1, "{f:?}");
        assert_eq!((f.refused[0].0, f.refused[0].1), (1, 2));
        assert_eq!(f.refused[0].2, dir.join(file_name(job, 1, 2)));
        assert_eq!(f.refused[0].3, Refusal::Checksum, "{f:?}");
    }
    // A file under another rank's name is refused as well.
    std::fs::copy(dir.join(file_name(job, 0, 1)), dir.join(file_name(job, 1, 1))).unwrap();
    let f = point(0);
    assert_eq!(f.point, RestartPoint::Lost);
    assert!(f.refused.iter().any(|r| r.3.to_string().contains("rank 0 generation 1")), "{f:?}");
    w(1, 1);
    // Both generations damaged: no restart point.
    damage(0, 1);
    assert_eq!(point(1).point, RestartPoint::Lost);
    assert_eq!(point(1).refused.len(), 2);
    // The restart keeps the chosen generation only (and no temporary file).
    std::fs::write(dir.join(tmp_name(job, 1, 3)), b"torn").unwrap();
    remove_all_but(&dir, job, 1, Some(1)).unwrap();
    assert_eq!(generations(&dir, job, 1).unwrap(), [1]);
    remove_all_but(&dir, job, 0, None).unwrap();
    assert!(generations(&dir, job, 0).unwrap().is_empty());
    remove_all_but(&dir, job, 1, None).unwrap();
    assert_eq!(std::fs::read_dir(&dir).unwrap().count(), 0);
    std::fs::remove_dir_all(&dir).unwrap();
}
#[test]
fn a_planted_link_or_a_stale_file_at_the_temporary_name_is_never_written_through() {
    use std::os::unix::fs::MetadataExt;
    let dir = scratch("planted");
    let k = key("planted");
    let victim = dir.join("victim");
    std::fs::write(&victim, b"precious").unwrap();
    let tmp = dir.join(tmp_name(k.job(), 1, 3));
    std::os::unix::fs::symlink(&victim, &tmp).unwrap();
    let (path, _) = write(&dir, &k, 1, 0, 3, 4, b"state", &image()).unwrap();
    assert_eq!(std::fs::read(&victim).unwrap(), b"precious", "the planted link was followed");
    assert_eq!(load(&path, &k).unwrap().app, b"state");
    assert_eq!(std::fs::metadata(&path).unwrap().mode() & 0o777, 0o600);
    // A stale temporary file of a crashed attempt, of another mode: replaced, not reused.
    std::fs::write(&tmp, b"torn remains of an earlier attempt").unwrap();
    std::fs::set_permissions(&tmp, std::os::unix::fs::PermissionsExt::from_mode(0o644)).unwrap();
    let (path, _) = write(&dir, &k, 1, 0, 3, 4, b"again", &image()).unwrap();
    assert_eq!(load(&path, &k).unwrap().app, b"again");
    assert_eq!(std::fs::metadata(&path).unwrap().mode() & 0o777, 0o600);
    assert!(!tmp.exists());
    // A link at the file's own name is not read through.
    let linked = dir.join(file_name(k.job(), 2, 3));
    std::os::unix::fs::symlink(&path, &linked).unwrap();
    assert!(matches!(load(&linked, &k), Err(Error::Checkpoint(_))));
    std::fs::remove_dir_all(&dir).unwrap();
}

/// Recomputes the XXH64 of a file's bytes after a change (a forger knows the layout).
fn fix_checksum(b: &mut [u8]) {
    let at = b.len() - 8;
    let mut h = Xxh64::new(0);
    h.update(&b[..at]);
    let sum = h.finish().to_le_bytes();
    b[at..].copy_from_slice(&sum);
}

#[test]
fn a_forged_or_foreign_checkpoint_is_refused() {
    let dir = scratch("forged");
    let k = key("forged");
    let (path, _) = write(&dir, &k, 1, 0, 3, 4, b"honest state", &image()).unwrap();
    let good = std::fs::read(&path).unwrap();
    // The application state changed and the checksum made valid again: the MAC does not verify.
    let mut forged = good.clone();
    forged[HEADER..HEADER + 6].copy_from_slice(b"forged");
    fix_checksum(&mut forged);
    assert_eq!(decode(&forged, &k), Err(Refusal::Mac));
    std::fs::write(&path, &forged).unwrap();
    let e = load(&path, &k).unwrap_err();
    assert!(matches!(e, Error::CheckpointForged(_)), "{e}");
    assert!(e.to_string().contains("MAC mismatch") && e.to_string().contains(&path.display().to_string()), "{e}");
    // Header fields too (the generation raised, so that a restart prefers it).
    let mut newer = good.clone();
    newer[32] += 1;
    fix_checksum(&mut newer);
    assert_eq!(decode(&newer, &k), Err(Refusal::Mac));
    // The whole trailer recomputed with the checksum but another key: another job's secret, or
    // the same secret and another job id.
    let other_secret = CheckpointKey::new(&JobSecret::from_hex(&"a5".repeat(32)).unwrap(), "forged");
    let other_job = key("forged, again");
    for other in [&other_secret, &other_job] {
        let foreign = encode(other, 1, 0, 3, 4, b"honest state", &image()).unwrap();
        assert_eq!(foreign.len(), good.len());
        assert_eq!(decode(&foreign, &k), Err(Refusal::Mac));
        std::fs::write(&path, &foreign).unwrap();
        assert!(matches!(load(&path, &k), Err(Error::CheckpointForged(_))));
    }
    // In a restart: the group falls back to the generation before, and the forgery is named.
    std::fs::write(&path, &good).unwrap();
    for g in [1, 2] {
        write(&dir, &k, 1, 0, g, 4, b"older", &image()).unwrap();
    }
    std::fs::write(dir.join(file_name(k.job(), 1, 2)), &newer).unwrap();
    std::fs::write(&path, &forged).unwrap();
    let f = restart_point(&dir, &k, 1, &[1]).unwrap();
    let RestartPoint::Checkpoint(c) = &f.point else { panic!("{f:?}") };
    assert_eq!(c.generation, 1);
    assert_eq!(
        f.refused.iter().map(|r| (r.1, r.3.clone())).collect::<Vec<_>>(),
        [(3, Refusal::Mac), (2, Refusal::Mac)]
    );
    // An authentic older generation replayed under a newer name.
    std::fs::copy(dir.join(file_name(k.job(), 1, 1)), dir.join(file_name(k.job(), 1, 2))).unwrap();
    let f = restart_point(&dir, &k, 1, &[1]).unwrap();
    assert!(matches!(&f.point, RestartPoint::Checkpoint(c) if c.generation == 1), "{f:?}");
    assert!(
        f.refused.contains(&(
            1,
            2,
            dir.join(file_name(k.job(), 1, 2)),
            Refusal::Misnamed { job: k.job(), rank: 1, generation: 1 }
        )),
        "{f:?}"
    );
    assert!(f.refused[1].3.is_forgery());
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn the_key_is_the_secrets_and_the_jobs_and_is_not_shown() {
    let s = JobSecret::from_hex(&"5a".repeat(32)).unwrap();
    let k = CheckpointKey::new(&s, "job");
    assert_eq!(k.job(), job_key("job"));
    let body = encode(&k, 0, 0, 1, 1, b"x", &image()).unwrap();
    assert!(decode(&body, &CheckpointKey::new(&s, "job")).is_ok(), "the same secret and job: the same key");
    assert!(!format!("{k:?}").contains("5a5a"), "{k:?}");
    // Sealing a file's own body gives the file back.
    assert_eq!(seal_body(&k, &body[..body.len() - TRAILER]).unwrap(), body);
    assert_eq!(seal_body(&k, &body[..HEADER]), None, "lengths that do not add up");
    assert_eq!(seal_body(&k, &body[..10]), None);
}

#[test]
fn a_file_of_the_previous_format_is_refused_naming_it() {
    let k = key("old-format");
    let mut b = encode(&k, 1, 0, 2, 4, b"app", &image()).unwrap();
    assert_eq!(decode(&b, &k).map(|c| c.image.mpi), Ok(b"mpi state".to_vec()), "the MPI section round-trips");
    for old in [2u32, 3] {
        b[8..12].copy_from_slice(&old.to_le_bytes());
        let why = decode(&b, &k).unwrap_err();
        assert_eq!(why, Refusal::Version(old));
        assert!(why.to_string().contains("older nemesis") && why.to_string().contains("stamps"), "{why}");
    }
}
