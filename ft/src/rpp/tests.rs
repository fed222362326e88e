use super::*;
use proptest::prelude::*;

fn pb(date: Date, phase: Phase) -> Piggyback {
    Piggyback::new(date, phase, None).unwrap()
}

/// Arrival as the process makes it: fast paths first, checked path otherwise.
fn arrive(r: &mut Rpp, date: Date, phase: Phase) -> (Reception, bool) {
    match r.try_extend(pb(date, phase)).or_else(|| r.try_extend_rising(pb(date, phase))) {
        Some(d) => (Reception::Deliver(d), true),
        None => (r.accept(pb(date, phase)).unwrap(), false),
    }
}

fn fast() -> Rpp {
    let mut r = Rpp::default();
    r.set_permit(true);
    r
}

#[test]
fn a_stream_in_one_phase_takes_the_fast_path_after_two_messages() {
    let mut r = fast();
    let fast_taken: Vec<bool> = (1..=6).map(|k| arrive(&mut r, 3 * k, 2).1).collect();
    assert_eq!(fast_taken, [false, false, true, true, true, true]);
    assert_eq!(r.entries(), (1..=6).map(|k| (3 * k, 2)).collect::<Vec<_>>());
    assert_eq!(r.closed.len(), 0, "one run");
    assert_eq!(r.max_date(), 18);
}

#[test]
fn the_fast_path_delivers_what_the_checked_path_would() {
    let (mut a, mut b) = (fast(), Rpp::default());
    for d in [2, 4, 6, 8] {
        let (ra, _) = arrive(&mut a, d, 5);
        let rb = b.accept(pb(d, 5)).unwrap();
        assert_eq!(ra, rb);
        assert_eq!(ra, Reception::Deliver(Delivery::new(6, 0)));
    }
    assert_eq!(a.entries(), b.entries());
}

#[test]
fn the_fast_path_refuses_what_needs_checking() {
    let mut r = fast();
    arrive(&mut r, 1, 1);
    arrive(&mut r, 2, 1);
    // A released message (tag) with the expected date and phase: the packed date differs.
    assert!(r.try_extend(Piggyback::new(3, 1, Some(4)).unwrap()).is_none());
    assert!(r.try_extend(pb(3, 2)).is_none(), "another phase");
    assert!(r.try_extend(pb(4, 1)).is_none(), "another step");
    assert!(r.try_extend(pb(2, 1)).is_none(), "a duplicate");
    assert_eq!(r.max_date(), 2, "refusals change nothing");
    r.set_permit(false);
    assert!(r.try_extend(pb(3, 1)).is_none(), "not permitted");
    r.set_permit(true);
    assert!(r.try_extend(pb(3, 1)).is_some());
}

#[test]
fn duplicates_and_overflow_on_the_checked_path() {
    let mut r = fast();
    arrive(&mut r, 5, 1);
    assert_eq!(r.accept(pb(5, 1)).unwrap(), Reception::Duplicate);
    assert_eq!(r.accept(pb(3, 1)).unwrap(), Reception::Duplicate);
    assert!(matches!(r.accept(pb(6, MAX_PHASE)), Err(Error::PhaseOverflow { .. })));
    // A run reaching MAX_PHASE - 1 by steps: its next element would not be encodable, and is refused.
    let mut r = fast();
    arrive(&mut r, 1, MAX_PHASE - 3);
    arrive(&mut r, 2, MAX_PHASE - 2);
    arrive(&mut r, 3, MAX_PHASE - 1);
    assert!(matches!(r.accept(pb(4, MAX_PHASE)), Err(Error::PhaseOverflow { .. })));
    assert_eq!(r.entries(), vec![(1, MAX_PHASE - 3), (2, MAX_PHASE - 2), (3, MAX_PHASE - 1)]);
}

#[test]
fn rising_phases_make_one_run_on_the_second_fast_path() {
    // A ping-pong across groups: the sender's phase rises by two per message.
    let mut r = fast();
    let fast_taken: Vec<bool> = (0..10).map(|k| arrive(&mut r, k + 1, 2 * k + 1).1).collect();
    assert_eq!(fast_taken, [false, false, true, true, true, true, true, true, true, true]);
    assert!(r.try_extend(pb(11, 21)).is_none(), "not the steady path's");
    assert_eq!(r.closed.len(), 0);
    assert_eq!(r.entries(), (0..10).map(|k| (k + 1, 2 * k + 1)).collect::<Vec<_>>());
    // Refusals change nothing; permits apply to both paths.
    assert!(r.try_extend_rising(pb(11, 22)).is_none(), "another phase step");
    assert!(r.try_extend_rising(pb(12, 21)).is_none(), "another date step");
    assert!(r.try_extend_rising(Piggyback::new(11, 21, Some(1)).unwrap()).is_none(), "a tag");
    r.set_permit(false);
    assert!(r.try_extend_rising(pb(11, 21)).is_none(), "not permitted");
    r.set_permit(true);
    assert_eq!(r.try_extend_rising(pb(11, 21)), Some(Delivery::new(22, 0)));
    assert_eq!(r.max_date(), 11);
}

#[test]
fn a_rising_run_stops_before_the_phase_overflows() {
    let mut r = fast();
    for (d, p) in [(1, MAX_PHASE - 7), (2, MAX_PHASE - 5), (3, MAX_PHASE - 3)] {
        arrive(&mut r, d, p);
    }
    // MAX_PHASE - 1 is the last acceptable phase; the one after it is not the fast path's to refuse.
    assert!(arrive(&mut r, 4, MAX_PHASE - 1).1);
    assert_eq!(r.next, NO_FAST);
    assert!(r.try_extend_rising(pb(5, MAX_PHASE)).is_none());
    assert!(matches!(r.accept(pb(5, MAX_PHASE)), Err(Error::PhaseOverflow { .. })));
    assert_eq!(r.max_date(), 4);
}

#[test]
fn irregular_arrivals_cost_at_most_a_run_per_two_messages() {
    let mut r = fast();
    let dates = [1, 2, 4, 7, 11, 16, 22, 29, 37];
    for d in dates {
        arrive(&mut r, d, 1);
    }
    assert!(r.closed.len() < dates.len() / 2 + 1);
    assert_eq!(r.entries(), dates.iter().map(|&d| (d, 1)).collect::<Vec<_>>());
    // A phase that goes down (a peer breaking the rules) starts a run and is recorded as said.
    arrive(&mut r, 40, 3);
    arrive(&mut r, 41, 2);
    assert_eq!(&r.entries()[dates.len()..], &[(40, 3), (41, 2)]);
}

#[test]
fn pruning_inside_a_run_keeps_its_tail_and_the_fast_path() {
    let mut r = fast();
    for d in (2..=20).step_by(2) {
        arrive(&mut r, d, 4);
    }
    r.prune_through(9);
    assert_eq!(r.entries(), (10..=20).step_by(2).map(|d| (d, 4)).collect::<Vec<_>>());
    r.prune_through(10);
    assert_eq!(r.entries()[0], (12, 4));
    assert!(arrive(&mut r, 22, 4).1, "still extended on the fast path");
    assert_eq!(r.max_date(), 22);
}

#[test]
fn pruning_everything_keeps_maxdate_and_records_what_follows_exactly() {
    let mut r = fast();
    for d in (2..=10).step_by(2) {
        arrive(&mut r, d, 1);
    }
    r.prune_through(10);
    assert!(r.entries().is_empty());
    assert_eq!(r.max_date(), 10);
    // The run stays open at its next element: the fast path extends it, and the record holds exactly that.
    assert!(arrive(&mut r, 12, 1).1);
    assert_eq!(r.entries(), vec![(12, 1)]);
    // Pruned past the end (the sender checkpointed after sending elsewhere): what follows is recorded as is.
    r.prune_through(100);
    assert!(r.entries().is_empty());
    assert!(arrive(&mut r, 14, 1).1, "the next element of the run");
    assert_eq!(r.entries(), vec![(14, 1)]);
    arrive(&mut r, 150, 1);
    assert_eq!(r.entries(), vec![(14, 1), (150, 1)]);
    // A one-element run pruned away, then a new message.
    let mut r = fast();
    arrive(&mut r, 3, 2);
    r.prune_through(3);
    assert!(r.entries().is_empty() && !r.is_blank(), "emptied, Maxdate kept");
    arrive(&mut r, 4, 2);
    assert_eq!(r.entries(), vec![(4, 2)]);
}

#[test]
fn pruning_and_lookups_across_closed_runs() {
    let mut r = fast();
    // Runs: 1..=3 phase 1; 10, 20, 30 phase 2; 31..=33 phases 5, 6, 7.
    for (d, p) in [(1, 1), (2, 1), (3, 1), (10, 2), (20, 2), (30, 2), (31, 5), (32, 6), (33, 7)] {
        arrive(&mut r, d, p);
    }
    let mut after = Vec::new();
    r.expand_after(20, &mut after);
    assert_eq!(after, vec![(30, 2), (31, 5), (32, 6), (33, 7)]);
    after.clear();
    r.expand_after(33, &mut after);
    assert!(after.is_empty());
    r.prune_through(15);
    assert_eq!(r.entries(), vec![(20, 2), (30, 2), (31, 5), (32, 6), (33, 7)]);
    r.prune_through(31);
    assert_eq!(r.entries(), vec![(32, 6), (33, 7)]);
}

#[test]
fn an_arrival_undone_last_moves_maxdate_back_exactly() {
    // A steady run: Maxdate goes back by its step, and the run goes on.
    let mut r = fast();
    for d in [3, 6, 9, 12] {
        arrive(&mut r, d, 2);
    }
    assert!(r.unrecord(12));
    assert_eq!((r.max_date(), r.entries()), (9, vec![(3, 2), (6, 2), (9, 2)]));
    assert_eq!(arrive(&mut r, 12, 2), (Reception::Deliver(Delivery::new(3, 0)), true), "the run goes on");
    assert_eq!(r.entries().len(), 4);
    // A one-message run after a closed one: back to the closed run's end.
    let mut r = fast();
    for d in [1, 2, 7] {
        arrive(&mut r, d, 1);
    }
    assert!(r.unrecord(7));
    assert_eq!((r.max_date(), r.entries()), (2, vec![(1, 1), (2, 1)]));
    // Everything before it pruned: back to the pruning bound, which lies between the previous and it.
    let mut r = fast();
    for d in [2, 4, 9] {
        arrive(&mut r, d, 1);
    }
    r.prune_through(5);
    assert!(!r.unrecord(4), "pruned: nothing recorded");
    assert!(r.unrecord(9));
    assert_eq!((r.max_date(), r.entries()), (5, vec![]), "between 4, the previous, and 9");
    assert!(matches!(r.accept(pb(9, 1)).unwrap(), Reception::Deliver(_)));
    assert!(!r.unrecord(8) && !r.unrecord(10), "never recorded");
}

#[test]
fn an_arrival_undone_below_a_later_one_is_a_hole_filled_once() {
    let mut r = fast();
    for d in 1..=6 {
        arrive(&mut r, d, 1);
    }
    assert!(r.unrecord(3));
    assert!(r.unrecord(5));
    assert_eq!(r.max_date(), 6);
    assert_eq!(r.complete_through(), 2);
    assert_eq!((r.last_date_for(2), r.last_date_for(4)), (6, 2));
    assert_eq!(r.entries(), vec![(1, 1), (2, 1), (4, 1), (6, 1)]);
    let saved = r.to_checkpoint();
    assert_eq!(saved.holes, vec![3, 5]);
    let mut back = Rpp::restore(&saved).unwrap();
    for r in [&mut r, &mut back] {
        assert_eq!(r.accept(pb(4, 1)).unwrap(), Reception::Duplicate);
        assert!(matches!(r.accept(pb(5, 1)).unwrap(), Reception::Deliver(_)));
        assert_eq!(r.accept(pb(5, 1)).unwrap(), Reception::Duplicate);
        assert_eq!(r.complete_through(), 2);
        r.prune_through(3);
        assert_eq!(r.complete_through(), 6, "a pruned hole is covered by the sender's checkpoint");
        assert_eq!(r.entries(), vec![(4, 1), (5, 1), (6, 1)]);
        assert!(matches!(r.accept(pb(7, 1)).unwrap(), Reception::Deliver(_)));
    }
    let bad = ReceivedFrom { max_date: 6, runs: vec![], holes: vec![6], pruned: 0, ..Default::default() };
    assert!(Rpp::restore(&bad).is_err(), "a hole at Maxdate");
    let bad = ReceivedFrom { max_date: 6, runs: vec![], holes: vec![2], pruned: 3, ..Default::default() };
    assert!(Rpp::restore(&bad).is_err(), "a hole below the pruning bound");
}

#[test]
fn checkpoints_round_trip_and_are_checked() {
    let mut r = fast();
    for (d, p) in [(1, 1), (2, 1), (5, 2), (9, 3), (10, 3)] {
        arrive(&mut r, d, p);
    }
    let saved = r.to_checkpoint();
    assert_eq!(saved.entries(), r.entries());
    let mut back = Rpp::restore(&saved).unwrap();
    assert_eq!(back.entries(), r.entries());
    assert_eq!(back.max_date(), 10);
    back.set_permit(true);
    assert_eq!(arrive(&mut back, 10, 3).0, Reception::Duplicate);
    arrive(&mut back, 11, 3);
    assert_eq!(back.entries().last(), Some(&(11, 3)));
    let run = |first, last, step, phase, pstep| Run { first, last, step, phase, pstep };
    for bad in [
        vec![run(3, 1, 1, 1, 0)],
        vec![run(1, 4, 2, 1, 0)],
        vec![run(1, 4, 0, 1, 0)],
        vec![run(1, 2, 1, 0, 0)],
        vec![run(1, 3, 1, MAX_PHASE - 2, 1)],
        vec![run(1, 3, 1, 1, u64::MAX)],
        vec![run(1, 3, 1, 1, 0), run(3, 4, 1, 1, 0)],
        vec![run(1, 20, 1, 1, 0)],
    ] {
        let saved = ReceivedFrom { max_date: 10, runs: bad.clone(), ..Default::default() };
        assert!(matches!(Rpp::restore(&saved), Err(Error::InvalidCheckpoint(_))), "{bad:?}");
    }
    assert!(Rpp::restore(&ReceivedFrom { max_date: MAX_DATE + 1, ..Default::default() }).is_err());
}

proptest! {
    /// Arrivals undone (`unrecord`) agree with a list too: the records, `Maxdate` (back to the previous arrival or
    /// the pruning bound), holes accepted once and only them, through prunes and checkpoint round trips.
    #[test]
    fn undone_arrivals_match_a_list(
        ops in proptest::collection::vec((0u8..10, 0usize..8, 1u64..4), 1..150),
        permit in any::<bool>(),
    ) {
        let mut r = Rpp::default();
        r.set_permit(permit);
        let mut model: Vec<(Date, Phase)> = Vec::new();
        let mut holes: Vec<(Date, Phase)> = Vec::new();
        let (mut date, mut last, mut pruned) = (0, 0, 0);
        for (op, k, gap) in ops {
            match op {
                0..=3 => {
                    date += gap;
                    prop_assert!(matches!(arrive(&mut r, date, 1 + date / 8).0, Reception::Deliver(_)));
                    model.push((date, 1 + date / 8));
                    last = date;
                }
                4 | 5 if !model.is_empty() => {
                    let (d, ph) = model.remove(model.len() - 1 - k % model.len());
                    prop_assert!(r.unrecord(d));
                    if d == last {
                        last = model.last().map_or(pruned, |e| e.0).max(pruned);
                        holes.retain(|h| h.0 < last);
                    } else {
                        holes.push((d, ph));
                        holes.sort_unstable();
                    }
                    prop_assert!(!r.unrecord(d), "twice");
                }
                6 if !holes.is_empty() => {
                    let (d, ph) = holes.remove(k % holes.len());
                    prop_assert!(matches!(r.accept(pb(d, ph)).unwrap(), Reception::Deliver(_)));
                    prop_assert_eq!(r.accept(pb(d, ph)).unwrap(), Reception::Duplicate);
                    model.push((d, ph));
                    model.sort_unstable();
                }
                7 => {
                    let through = date.saturating_sub(gap * 3);
                    r.prune_through(through);
                    pruned = pruned.max(through.min(last));
                    model.retain(|e| e.0 > through);
                    holes.retain(|h| h.0 > through);
                }
                8 => {
                    r = Rpp::restore(&r.to_checkpoint()).unwrap();
                    r.set_permit(permit);
                }
                _ => {
                    if let Some(&(d, ph)) = model.get(k % model.len().max(1)) {
                        prop_assert_eq!(r.accept(pb(d, ph)).unwrap(), Reception::Duplicate);
                    }
                }
            }
            prop_assert_eq!(r.entries(), model.clone());
            prop_assert_eq!(r.max_date(), last);
            prop_assert_eq!(r.complete_through(), holes.first().map_or(last, |h| h.0 - 1));
        }
    }

    /// The runs agree with a plain `(date, phase)` list under random arrivals (with and without the fast path),
    /// duplicates, prunes and checkpoint round trips.
    #[test]
    fn matches_a_list(
        ops in proptest::collection::vec((0u8..10, 1u64..5, 0u64..3), 1..200),
        permit in any::<bool>(),
    ) {
        let mut r = Rpp::default();
        r.set_permit(permit);
        let mut model: Vec<(Date, Phase)> = Vec::new();
        let (mut date, mut phase) = (0, 1);
        for (op, gap, rise) in ops {
            match op {
                // Mostly regular arrivals, so that runs grow and the fast path is taken.
                0..=5 => {
                    date += if op < 4 { 2 } else { gap };
                    phase += if op == 5 { rise } else { 0 };
                    prop_assert_eq!(arrive(&mut r, date, phase).0, Reception::Deliver(Delivery::new(phase + 1, 0)));
                    model.push((date, phase));
                }
                6 => {
                    let old = date.saturating_sub(gap);
                    if old > 0 {
                        prop_assert_eq!(arrive(&mut r, old, phase).0, Reception::Duplicate);
                    }
                }
                7 | 8 => {
                    let through = date.saturating_sub(gap * rise) + if op == 8 { gap } else { 0 };
                    r.prune_through(through);
                    model.retain(|e| e.0 > through);
                }
                _ => {
                    r = Rpp::restore(&r.to_checkpoint()).unwrap();
                    r.set_permit(permit);
                }
            }
            prop_assert_eq!(r.entries(), model.clone());
            prop_assert_eq!(r.max_date(), date);
            let after = date.saturating_sub(gap * 3);
            let mut got = Vec::new();
            r.expand_after(after, &mut got);
            let want: Vec<_> = model.iter().copied().filter(|e| e.0 > after).collect();
            prop_assert_eq!(got, want);
        }
    }
}
