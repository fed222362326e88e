use super::*;

fn spin(_: u32, ready: &mut dyn FnMut() -> bool) -> Result<()> {
    while !ready() {
        std::thread::yield_now();
    }
    Ok(())
}

#[test]
fn claims_are_exclusive_and_the_last_release_frees() {
    let h = HeapArea::new(4, 2, 8);
    let a = h.get();
    assert_eq!(a.claim(5), None, "more members than the area holds");
    let stamp = a.claim(3).expect("free");
    assert!(!stamp.is_multiple_of(2));
    assert_eq!(a.stamp(), stamp);
    assert_eq!(a.claim(2), None, "taken");
    assert!(!a.release(stamp).unwrap());
    assert!(!a.release(stamp).unwrap());
    assert!(a.release(stamp).unwrap(), "the third of three frees it");
    assert!(a.release(stamp).is_err(), "one release too many is corruption, not a wrap");
    let again = a.claim(2).expect("free again");
    assert_ne!(again, stamp, "a new claim has a new stamp");
}

#[test]
fn a_claim_zeroes_every_lane() {
    let h = HeapArea::new(2, 2, 8);
    let a = h.get();
    let s = a.claim(2).unwrap();
    for k in 0..2 {
        a.lane(k).enter(0, 7).unwrap();
        a.lane(k).enter(1, 7).unwrap();
    }
    a.release(s).unwrap();
    a.release(s).unwrap();
    a.claim(2).unwrap();
    for k in 0..2 {
        assert!(!a.lane(k).reached(0, 1) && !a.lane(k).reached(1, 1), "lane {k}");
    }
}

#[test]
fn bounds_are_typed_errors() {
    let h = HeapArea::new(2, 2, 8);
    let l = *h.get().lane(0);
    let mut w = spin;
    assert!(matches!(l.enter(2, 1), Err(Error::BadRank { rank: 2, .. })));
    assert!(matches!(l.enter_with(0, 2, 1, 9, |_| (), &mut 0, &mut w), Err(Error::TooLarge { .. })));
    assert!(matches!(l.read(5, 1, 8, |_| (), &mut w), Err(Error::BadRank { .. })));
    assert!(!l.reached(9, 0));
}

#[test]
fn the_segment_lanes_fit_their_sizes() {
    assert_eq!(lane_of(1), 0);
    assert_eq!(lane_of(LANES[0].bank_bytes), 0);
    assert_eq!(lane_of(LANES[0].bank_bytes + 1), 1);
    assert_eq!(BANK_BYTES, LANES[1].bank_bytes);
    assert_eq!(area_bytes(4), 4096 + 4 * (32 * 256 + 4 * 2048));
}

#[test]
fn a_member_runs_at_most_depth_minus_one_ahead() {
    let h = HeapArea::new(2, 4, 8);
    let a = h.get();
    a.claim(2).unwrap();
    let l = a.lane(0);
    let mut refuse = |_: u32, _: &mut dyn FnMut() -> bool| Err(Error::corrupt("would wait", 0u64));
    for s in 1..=3 {
        l.enter_with(0, 2, s, 1, |b| b[0] = s as u8, &mut 0, &mut refuse).unwrap();
    }
    let mut floor = 0;
    assert!(l.enter_with(0, 2, 4, 1, |_| (), &mut floor, &mut refuse).is_ok(), "bank 0 was never used");
    let early = l.enter_with(0, 2, 5, 1, |_| (), &mut floor, &mut refuse);
    assert!(early.is_err(), "bank 1 is collective 1's: member 1 must enter 2 first");
    l.enter(1, 3).unwrap();
    assert!(l.enter_with(0, 2, 5, 1, |_| (), &mut floor, &mut refuse).is_ok());
    assert_eq!(floor, 3, "member 1 was seen at 3");
    l.enter_with(0, 2, 6, 1, |_| (), &mut floor, &mut refuse).expect("known without reading");
    assert!(!a.lane(1).reached(0, 1), "the other lane is untouched");
}

#[test]
fn three_threads_alternate_banks_and_lanes() {
    let h = std::sync::Arc::new(HeapArea::new(3, 3, 8));
    h.get().claim(3).unwrap();
    let ts: Vec<_> = (0..3u32)
        .map(|me| {
            let h = h.clone();
            std::thread::spawn(move || {
                let a = h.get();
                let mut w = spin;
                let mut seq = [0u64; 2];
                let mut floor = [0u64; 2];
                for t in 1..=300u64 {
                    // An allreduce of one u64 on lane t mod 2: the sum of (member + t).
                    let l = a.lane(t as usize % 2);
                    let s = &mut seq[t as usize % 2];
                    *s += 1;
                    let v = u64::from(me) + t;
                    let fl = &mut floor[t as usize % 2];
                    l.enter_with(me, 3, *s, 8, |b| b.copy_from_slice(&v.to_le_bytes()), fl, &mut w).unwrap();
                    let mut sum = 0;
                    for j in 0..3 {
                        sum += l.read(j, *s, 8, |b| u64::from_le_bytes(b.try_into().unwrap()), &mut w).unwrap();
                    }
                    assert_eq!(sum, 3 + 3 * t);
                }
            })
        })
        .collect();
    for t in ts {
        t.join().unwrap();
    }
}
