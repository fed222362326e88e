use super::*;

#[test]
fn secrets_are_random_and_round_trip_in_hex() {
    let (a, b) = (JobSecret::generate().unwrap(), JobSecret::generate().unwrap());
    assert_ne!(a, b);
    assert_eq!(JobSecret::from_hex(&a.to_hex()).unwrap(), a);
    assert_eq!(format!("{a:?}"), "JobSecret(..)", "Debug does not show the secret");
    for bad in ["", "00", &"g".repeat(64), &"0".repeat(63), &"0".repeat(65), &"é".repeat(32)] {
        assert!(JobSecret::from_hex(bad).is_err(), "{bad:?}");
    }
}

fn transcript() -> Transcript {
    Transcript {
        from: 3,
        from_inc: 0,
        from_flags: 0,
        nc: nonce().unwrap(),
        to: 1,
        to_inc: 2,
        to_flags: FLAG_INTEGRITY,
        na: nonce().unwrap(),
        dialed: "10.0.0.1:4000".into(),
    }
}

#[test]
fn v3_proofs_bind_every_field_of_the_transcript_and_their_step() {
    let s = JobSecret::generate().unwrap();
    let t = transcript();
    let p = t.proof(&s, Step::Connect);
    assert!(t.check(&s, Step::Connect, &p));
    assert!(!t.check(&s, Step::Accept, &p) && !t.check(&s, Step::Reject, &p), "steps differ");
    assert!(!t.check(&JobSecret::generate().unwrap(), Step::Connect, &p), "another secret");
    assert!(!t.check(&s, Step::Connect, &p[..16]), "a proof is whole");
    let changed: [fn(&mut Transcript); 9] = [
        |t| t.from = 2,
        |t| t.from_inc = 1,
        |t| t.from_flags = 1,
        |t| t.nc[0] ^= 1,
        |t| t.to = 0,
        |t| t.to_inc = 1,
        |t| t.to_flags = 0,
        |t| t.na[15] ^= 1,
        |t| t.dialed = "10.0.0.2:4000".into(),
    ];
    for (i, f) in changed.iter().enumerate() {
        let mut o = t.clone();
        f(&mut o);
        assert!(!o.check(&s, Step::Connect, &p), "field {i} is not covered");
        assert_ne!(o.stream_keys(&s).0.tag(0, &[b"x"]), t.stream_keys(&s).0.tag(0, &[b"x"]), "field {i}");
    }
    assert!(t.integrity() && !Transcript { to_flags: 0, ..t.clone() }.integrity());
}

#[test]
fn frame_tags_bind_key_direction_number_and_every_byte() {
    let s = JobSecret::generate().unwrap();
    let (up, down) = transcript().stream_keys(&s);
    let frame = b"a frame of some bytes";
    let tag = up.tag(5, &[&frame[..4], &frame[4..]]);
    let mut m = up.begin(5);
    m.update(frame);
    assert!(m.verify(&tag), "fed in pieces or whole: the same tag");
    assert_ne!(down.tag(5, &[frame]), tag, "the two directions differ");
    assert_ne!(up.tag(6, &[frame]), tag, "the frame number counts");
    for i in 0..frame.len() {
        let mut bad = *frame;
        bad[i] ^= 0x20;
        let mut m = up.begin(5);
        m.update(&bad);
        assert!(!m.verify(&tag), "byte {i} flipped");
    }
    assert!(!up.begin(5).verify(&tag[..8]));
}

#[test]
fn heartbeats_open_only_with_the_secret_and_as_sealed() {
    let s = JobSecret::generate().unwrap();
    let k = BeatKey::new(s.clone());
    let d = k.seal(7, 42);
    assert_eq!(k.open(&d), Some((7, 42)));
    assert_eq!(BeatKey::new(JobSecret::generate().unwrap()).open(&d), None, "another job's");
    for i in 0..BEAT_BYTES {
        let mut bad = d;
        bad[i] ^= 1;
        assert_eq!(k.open(&bad), None, "byte {i} changed");
    }
    assert_eq!(k.open(&d[..BEAT_BYTES - 1]), None);
    assert_eq!(k.open(&[0u8; BEAT_BYTES]), None);
    assert!(first_beat_seq() > 1);
}
