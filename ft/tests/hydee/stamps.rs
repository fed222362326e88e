//! The stamp hooks driven by hand (`ft/src/process/stamps.rs`): sequence numbers and digests at the receiver,
//! through a checkpoint and a restart, on replays, in the sender log, and against the orphans a restarted sender
//! regenerates.

use nemesis_ft::digest::digest;
use nemesis_ft::{
    Control, Endpoint, Error, Horizon, LogConfig, Outbound, Piggyback, Process, Rank, Reception, SenderLog, Stamp,
};

use crate::setup::{controls, log, process, topo};

/// A stamped send that must be transmitted.
fn send(p: &mut Process, to: Rank, payload: &[u8]) -> (Piggyback, Stamp) {
    match p.on_send_stamped(to, digest(b"env", payload)).unwrap() {
        (Outbound::Transmit { piggyback, .. }, stamp) => (piggyback, stamp),
        other => panic!("expected a transmission, got {other:?}"),
    }
}

fn receive(p: &mut Process, from: Rank, pb: Piggyback, stamp: Stamp, payload: &[u8]) -> Result<Reception, Error> {
    let r = p.on_receive_stamped(from, pb, stamp, Some(digest(b"env", payload)))?;
    if let Reception::Deliver(d) = r {
        p.on_deliver(d);
    }
    Ok(r)
}

fn violation(r: Result<impl std::fmt::Debug, Error>) -> (Rank, Rank, u64, &'static str) {
    match r {
        Err(Error::SendDeterminismViolated { rank, dest, seq, what, .. }) => (rank, dest, seq, what),
        other => panic!("expected a violation, got {other:?}"),
    }
}

#[test]
fn sequence_numbers_count_per_destination_on_every_path() {
    let t = topo(vec![0, 0, 1]);
    let mut a = process(&t, 0);
    let (_, s) = send(&mut a, 2, b"x");
    assert_eq!(s, Stamp { seq: 1, digest: digest(b"env", b"x") });
    assert_eq!(send(&mut a, 1, b"y").1.seq, 1, "a sequence per destination");
    // The unstamped and inline hooks count too: one sequence whatever the path.
    a.on_send(2).unwrap();
    let (_, _, s) = a.send_fast_stamped(2, 7).unwrap();
    assert_eq!((s.seq, s.digest), (3, 7));
    assert_eq!(a.send_fast(2).map(|(pb, log)| (pb.date(), log)), Some((5, true)));
    assert_eq!((a.sent_to(2), a.sent_to(1), a.sent_to(0), a.sent_to(9)), (4, 1, 0, 0));
}

#[test]
fn receivers_check_sequence_and_digest() {
    let t = topo(vec![0, 0, 1]);
    let mut a = process(&t, 0);
    let mut c = process(&t, 2);
    let (pb1, s1) = send(&mut a, 2, b"one");
    assert!(matches!(receive(&mut c, 0, pb1, s1, b"one"), Ok(Reception::Deliver(_))));
    assert_eq!(c.last_seq_from(0), 1);
    // Message 2 with another payload than its digest says: refused.
    let (pb2, s2) = send(&mut a, 2, b"two");
    let mut c2 = process(&t, 2);
    receive(&mut c2, 0, pb1, s1, b"one").unwrap();
    assert_eq!(
        violation(receive(&mut c2, 0, pb2, s2, b"tw0")),
        (0, 2, 2, "arrived with a payload that does not match its digest")
    );
    // Message 3 before message 2: out of sequence.
    let (pb3, s3) = send(&mut a, 2, b"three");
    let mut c3 = process(&t, 2);
    receive(&mut c3, 0, pb1, s1, b"one").unwrap();
    let skipped = Piggyback::new(pb2.date(), pb3.phase(), None).unwrap();
    assert_eq!(violation(receive(&mut c3, 0, skipped, s3, b"three")).2, 3);
    // In order, both go; a duplicate is not checked again (it is dropped).
    receive(&mut c, 0, pb2, s2, b"two").unwrap();
    receive(&mut c, 0, pb3, s3, b"three").unwrap();
    assert_eq!(receive(&mut c, 0, pb2, s2, b"two").unwrap(), Reception::Duplicate);
    // The first message from a sender must be its first.
    let mut c4 = process(&t, 2);
    assert_eq!(violation(receive(&mut c4, 0, pb2, s2, b"two")).2, 2);
    // Same group: nothing recorded, nothing checked.
    let mut b = process(&t, 1);
    let (pb, _) = send(&mut a, 1, b"intra");
    receive(&mut b, 0, pb, Stamp { seq: 9, digest: 0 }, b"intra").unwrap();
    assert_eq!(b.last_seq_from(0), 0);
    // The inline path takes the in-sequence case only, with the same effect.
    let mut fast = process(&t, 2);
    let mut full = process(&t, 2);
    for (pb, s, p) in [(pb1, s1, &b"one"[..]), (pb2, s2, b"two"), (pb3, s3, b"three")] {
        let d = Some(digest(b"env", p));
        assert!(!fast.receive_deliver_fast_stamped(0, pb, Stamp { seq: s.seq + 1, ..s }, d), "out of sequence");
        assert!(!fast.receive_deliver_fast_stamped(0, pb, s, Some(0)), "digest mismatch");
        if !fast.receive_deliver_fast_stamped(0, pb, s, d) {
            receive(&mut fast, 0, pb, s, p).unwrap();
        }
        receive(&mut full, 0, pb, s, p).unwrap();
        assert_eq!(fast.state(), full.state());
    }
}

/// The receiver's stamps and the sender's counts are saved with the checkpoint; after a restart the receiver
/// checks what the survivor's log replays against them.
#[test]
fn stamps_survive_a_checkpoint_and_replays_are_checked() {
    let t = topo(vec![0, 1]);
    let mut a = process(&t, 0);
    let mut la = log(&t);
    let mut b = process(&t, 1);
    let lb = log(&t);
    let mut sent = Vec::new();
    for p in [&b"m1"[..], b"m2", b"m3"] {
        let (pb, s) = send(&mut a, 1, p);
        la.append_stamped(1, pb, s, b"env", p).unwrap();
        sent.push((pb, s, p));
    }
    receive(&mut b, 0, sent[0].0, sent[0].1, sent[0].2).unwrap();
    let state = b.checkpoint().unwrap();
    b.checkpoint_durable(&lb).unwrap();
    let saved = state.received.iter().find(|(j, _)| *j == 0).unwrap().1.clone();
    assert_eq!((saved.last_seq, saved.stamps.clone()), (1, vec![(1, sent[0].1)]));
    let json = serde_json::to_string(&a.state()).unwrap();
    let back: nemesis_ft::ProcessState = serde_json::from_str(&json).unwrap();
    assert_eq!(back.received.iter().find(|(j, _)| *j == 1).unwrap().1.sent, 3, "the sender's count is saved");
    receive(&mut b, 0, sent[1].0, sent[1].1, sent[1].2).unwrap();

    // b fails and restarts from its checkpoint: it has message 1, and waits for a's LastDate.
    let mut b = Process::restart(t.clone(), state.clone(), 1, &[1]).unwrap();
    assert_eq!(b.last_seq_from(0), 1);
    let c = controls(&mut b);
    let restarted = c.iter().find(|(to, _)| *to == Endpoint::Process(0)).unwrap().1.clone();
    a.on_control(Endpoint::Coordinator(0), Control::FailureNotice { round: 1, restarting: vec![1] }, &la).unwrap();
    a.on_control(Endpoint::Process(1), restarted, &la).unwrap();
    let to_b: Vec<Control> =
        controls(&mut a).into_iter().filter(|(to, _)| *to == Endpoint::Process(1)).map(|c| c.1).collect();
    assert!(!to_b.iter().any(|m| matches!(m, Control::OrphanStamps { .. })), "no orphans, no stamps");
    for m in to_b {
        b.on_control(Endpoint::Process(0), m, &lb).unwrap();
    }
    // a replays messages 2 and 3 from its log, with their stamps; a corrupt payload or a gap is refused.
    let mut payload = Vec::new();
    let (pb2, s2) = la.read_stamped(1, sent[1].0.date(), &mut payload).unwrap();
    assert_eq!((s2, &payload[..]), (sent[1].1, &b"envm2"[..]));
    let replay = |pb: Piggyback| Piggyback::new(pb.date(), pb.phase(), Some(1)).unwrap();
    let kept = b.state();
    let corrupt = b.on_receive_stamped(0, replay(pb2), s2, Some(digest(b"envm2?", &[])));
    assert_eq!(violation(corrupt).3, "arrived with a payload that does not match its digest");
    assert_eq!(b.state(), kept, "a refused arrival records nothing");
    let mut b2 = Process::restart(t.clone(), state, 2, &[1]).unwrap();
    let _ = controls(&mut b2);
    b2.on_control(Endpoint::Process(0), Control::LastDate { round: 2, last_date: 0, orphans: vec![] }, &lb).unwrap();
    let (pb3, s3) = la.read_stamped(1, sent[2].0.date(), &mut payload).unwrap();
    assert_eq!(violation(b2.on_receive_stamped(0, replay(pb3), s3, Some(digest(&payload, &[])))).2, 3, "a gap");
    let ok = b2.on_receive_stamped(0, replay(pb2), s2, Some(digest(b"env", b"m2"))).unwrap();
    assert!(matches!(ok, Reception::Deliver(_)));
}

/// The log keeps each entry's stamp; restored from a snapshot, the digests are computed again from the bytes and
/// the entries numbered back from the sender's count.
#[test]
fn the_log_keeps_stamps_and_restores_them() {
    let t = topo(vec![0, 1]);
    let mut a = process(&t, 0);
    let mut l = log(&t);
    let mut stamps = Vec::new();
    for i in 0..4u8 {
        let payload = vec![i; 3 + i as usize];
        let (pb, s) = send(&mut a, 1, &payload);
        l.append_stamped(1, pb, s, b"env", &payload).unwrap();
        stamps.push((pb.date(), s));
    }
    l.discard_before(1, stamps[1].0);
    let snapshot = l.snapshot().unwrap();
    let config = LogConfig { memory_limit: 1 << 20, spill_dir: None, spill_limit: None };
    let back = SenderLog::restore_stamped(2, config.clone(), &snapshot, |to| a.sent_to(to)).unwrap();
    let mut buf = Vec::new();
    for &(date, s) in &stamps[1..] {
        assert_eq!(back.read_stamped(1, date, &mut buf).unwrap().1, s, "date {date}");
    }
    // Unstamped restores and appends give no stamp; a count below the entries is refused.
    let plain = SenderLog::restore(2, config.clone(), &snapshot).unwrap();
    assert_eq!(plain.read_stamped(1, stamps[1].0, &mut buf).unwrap().1, Stamp::NONE);
    assert!(SenderLog::restore_stamped(2, config, &snapshot, |_| 2).is_err());
}

/// A survivor sends the stamps of the orphans just before its `LastDate`; the restarted sender suppresses a
/// regenerated message only if it matches.
#[test]
fn regenerated_orphans_must_match_their_stamps() {
    let t = topo(vec![0, 1]);
    let l = log(&t);
    // Rank 0 sends "one" and "two" to rank 1, which has both when rank 0 fails (restarting from date 0).
    let mut a = process(&t, 0);
    let mut b = process(&t, 1);
    for p in [&b"one"[..], b"two"] {
        let (pb, s) = send(&mut a, 1, p);
        receive(&mut b, 0, pb, s, p).unwrap();
    }
    let start = process(&t, 0).state();
    let mut a2 = Process::restart(t.clone(), start.clone(), 1, &[0]).unwrap();
    let restarted = controls(&mut a2).into_iter().find(|(to, _)| *to == Endpoint::Process(1)).unwrap().1;
    b.on_control(Endpoint::Coordinator(0), Control::FailureNotice { round: 1, restarting: vec![0] }, &l).unwrap();
    b.on_control(Endpoint::Process(0), restarted, &l).unwrap();
    let to_a: Vec<Control> =
        controls(&mut b).into_iter().filter(|(to, _)| *to == Endpoint::Process(0)).map(|c| c.1).collect();
    assert!(matches!(&to_a[0], Control::OrphanStamps { stamps, .. } if stamps.iter().map(|s| s.seq).eq([1, 2])));
    assert!(matches!(&to_a[1], Control::LastDate { orphans, .. } if orphans.len() == 2));
    let released = |stamps_first: bool| {
        let mut p = Process::restart(t.clone(), start.clone(), 1, &[0]).unwrap();
        let _ = controls(&mut p);
        let msgs: Vec<Control> = if stamps_first { to_a.clone() } else { to_a[1..].to_vec() };
        for m in msgs {
            p.on_control(Endpoint::Process(1), m, &l).unwrap();
        }
        p.on_control(Endpoint::Coordinator(0), Control::NotifySendMsg { round: 1, horizon: Horizon::UpTo(1) }, &l)
            .unwrap();
        p
    };
    // The same messages in the same order: suppressed, with their stamps (for the log).
    let mut p = released(true);
    for (seq, m) in [(1, &b"one"[..]), (2, b"two")] {
        let (out, s) = p.on_send_stamped(1, digest(b"env", m)).unwrap();
        assert!(matches!(out, Outbound::LogOnly { .. }), "{out:?}");
        assert_eq!(s.seq, seq);
    }
    // The second message first: its digest is not the orphan's.
    let mut p = released(true);
    let r = p.on_send_stamped(1, digest(b"env", b"two"));
    assert_eq!(
        violation(r),
        (0, 1, 1, "regenerates an orphan whose content differs from what its receiver recorded (digest)")
    );
    // Without the stamps (a receiver that did not stamp), the same send is taken for the orphan.
    let mut p = released(false);
    assert!(matches!(p.on_send_stamped(1, digest(b"env", b"two")).unwrap().0, Outbound::LogOnly { .. }));
    // OrphanStamps is for a restarting process awaiting that LastDate only.
    let mut fresh = process(&t, 0);
    let stray = fresh.on_control(Endpoint::Process(1), to_a[0].clone(), &l);
    assert!(stray.is_ok(), "a process outside recovery ignores a round message of a round it never heard of");
    let mut p = released(true);
    assert!(matches!(p.on_control(Endpoint::Process(1), to_a[0].clone(), &l), Err(Error::UnexpectedMessage { .. })));
}
