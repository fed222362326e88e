//! The engine and the coordinator driven by hand, one event at a time: a test for each \[R\] resolution of
//! hydee.md that is a local rule, for each \[R+\] of ours, and for the typed errors of out-of-place events.

use std::sync::Arc;

use nemesis_ft::{
    Action, Control, Coordinator, DateRule, Endpoint, Error, Horizon, Outbound, Piggyback, Process, ProcessConfig,
    Rank, Reception, SenderLog, Stamp, Topology,
};

use crate::setup::{actions, controls, log, process, topo};

fn send(p: &mut Process, to: Rank) -> Piggyback {
    match p.on_send(to).unwrap() {
        Outbound::Transmit { piggyback, .. } => piggyback,
        other => panic!("expected a transmission, got {other:?}"),
    }
}

/// Arrival and delivery of one message.
fn receive(p: &mut Process, from: Rank, pb: Piggyback) {
    match p.on_receive(from, pb).unwrap() {
        Reception::Deliver(d) => p.on_deliver(d),
        other => panic!("expected a delivery, got {other:?}"),
    }
}

fn pb(date: u64, phase: u64) -> Piggyback {
    Piggyback::new(date, phase, None).unwrap()
}

/// \[R\] on Fig 6.3 line 10: the sender's group is derived from its rank, not sent. The same piggyback is an
/// inter-group reception from a rank of another group and an intra-group one from a rank of the same group.
#[test]
fn the_senders_group_comes_from_its_rank() {
    let t = topo(vec![0, 0, 1]);
    let mut p = process(&t, 0);
    receive(&mut p, 1, pb(1, 5));
    assert_eq!(p.phase(), 5, "same group: max(phase, 5)");
    assert!(p.received_from(1).is_empty(), "no RPP for the own group");
    receive(&mut p, 2, pb(1, 5));
    assert_eq!(p.phase(), 6, "other group: max(phase, 5 + 1)");
    assert_eq!(p.received_from(2), &[(1, 5)]);
    assert!(matches!(p.on_send(0).unwrap(), Outbound::Transmit { log: false, .. }));
    assert!(matches!(p.on_send(2).unwrap(), Outbound::Transmit { log: true, .. }));
}

/// Phases move on delivery, not on arrival; the piggyback of a send carries the phase then.
#[test]
fn phase_moves_on_delivery() {
    let t = topo(vec![0, 1]);
    let mut p = process(&t, 0);
    let Reception::Deliver(d) = p.on_receive(1, pb(1, 3)).unwrap() else { panic!() };
    assert_eq!(p.phase(), 1, "arrival alone leaves the phase");
    assert_eq!(send(&mut p, 1).phase(), 1);
    p.on_deliver(d);
    assert_eq!(p.phase(), 4);
    assert_eq!(send(&mut p, 1).phase(), 4);
}

/// \[R+\] dates count sends only; Fig 6.3's rule (kept as `DateRule::SendsAndReceptions`) counts every delivery, of
/// either group — the reading hydee.md's \[R\] asks to tell apart from "same-group receptions only".
#[test]
fn date_rules() {
    let t = topo(vec![0, 0, 1]);
    let mut ours = process(&t, 0);
    let mut thesis = Process::new(t.clone(), 0, ProcessConfig { date_rule: DateRule::SendsAndReceptions }).unwrap();
    for p in [&mut ours, &mut thesis] {
        receive(p, 1, pb(1, 1)); // same group
        receive(p, 2, pb(1, 1)); // other group
    }
    assert_eq!(ours.date(), 0);
    assert_eq!(thesis.date(), 2, "both receptions count");
    assert_eq!(send(&mut ours, 1).date(), 1);
    assert_eq!(send(&mut thesis, 1).date(), 3);
}

/// Duplicates are refused on arrival, and overflowing phases are errors, not wraps.
#[test]
fn duplicates_and_overflow() {
    let t = topo(vec![0, 1]);
    let mut p = process(&t, 0);
    receive(&mut p, 1, pb(4, 1));
    assert_eq!(p.on_receive(1, pb(4, 1)).unwrap(), Reception::Duplicate);
    assert_eq!(p.on_receive(1, pb(2, 1)).unwrap(), Reception::Duplicate);
    assert!(matches!(p.on_receive(1, pb(9, nemesis_ft::MAX_PHASE)), Err(Error::PhaseOverflow { .. })));
    assert!(matches!(p.on_receive(7, pb(9, 1)), Err(Error::UnknownRank { rank: 7, .. })));
    assert!(matches!(p.on_send(7), Err(Error::UnknownRank { rank: 7, .. })));
}

/// \[R\] acknowledgements go out only once the checkpoint is durable; \[R+\] a message received between the capture
/// and durability is not in the checkpoint, so the ack names the first one received after the capture.
#[test]
fn acks_wait_for_durability_and_name_the_first_message_after_the_capture() {
    let t = topo(vec![0, 1]);
    let l = log(&t);
    let mut p = process(&t, 0);
    receive(&mut p, 1, pb(1, 1));
    p.checkpoint().unwrap();
    receive(&mut p, 1, pb(2, 1));
    receive(&mut p, 1, pb(3, 1));
    assert!(controls(&mut p).is_empty(), "nothing before durability");
    p.checkpoint_durable(&l).unwrap();
    assert_eq!(controls(&mut p), vec![(Endpoint::Process(1), Control::Ack { date: 2 })]);
    receive(&mut p, 1, pb(4, 1));
    assert!(controls(&mut p).is_empty(), "one ack per checkpoint");
    // Next checkpoint, nothing received in the window: the next reception is acknowledged.
    p.checkpoint().unwrap();
    p.checkpoint_durable(&l).unwrap();
    assert!(controls(&mut p).is_empty());
    receive(&mut p, 1, pb(5, 1));
    assert_eq!(controls(&mut p), vec![(Endpoint::Process(1), Control::Ack { date: 5 })]);
    assert!(matches!(p.checkpoint_durable(&l), Err(Error::NoPendingCheckpoint)));
    p.checkpoint().unwrap();
    assert!(matches!(p.checkpoint(), Err(Error::CheckpointPending)));
    // Abandoned: no ack for it.
    receive(&mut p, 1, pb(6, 1));
    p.checkpoint_abandoned().unwrap();
    receive(&mut p, 1, pb(7, 1));
    assert!(controls(&mut p).is_empty());
}

/// \[R\] (T:2097) `Ack(d)` drops the log entries for its sender dated strictly below `d`.
#[test]
fn ack_drops_strictly_older_entries() {
    let t = topo(vec![0, 1]);
    let mut l = log(&t);
    let mut p = process(&t, 0);
    for _ in 0..3 {
        let piggyback = send(&mut p, 1);
        l.append(1, piggyback, b"m").unwrap();
    }
    p.on_control(Endpoint::Process(1), Control::Ack { date: 2 }, &l).unwrap();
    let a = actions(&mut p);
    assert_eq!(a, vec![Action::DiscardLog { to: 1, before: 2 }]);
    l.discard_before(1, 2);
    assert_eq!(l.entries(1).iter().map(|e| e.0).collect::<Vec<_>>(), vec![2, 3]);
    // Acks come from other groups only.
    let t2 = topo(vec![0, 0]);
    let mut q = process(&t2, 0);
    assert!(matches!(
        q.on_control(Endpoint::Process(1), Control::Ack { date: 1 }, &log(&t2)),
        Err(Error::UnexpectedMessage { .. })
    ));
}

/// \[R\] RPP entries covered by the sender's durable checkpoint are pruned; the sender announces its checkpoint
/// only to the peers it logged messages for since its previous one.
#[test]
fn rpp_pruning() {
    let t = topo(vec![0, 1, 2]);
    let mut l = log(&t);
    let mut sender = process(&t, 0);
    let mut receiver = process(&t, 1);
    for _ in 0..3 {
        let piggyback = send(&mut sender, 1);
        l.append(1, piggyback, b"x").unwrap();
        receive(&mut receiver, 0, piggyback);
    }
    sender.checkpoint().unwrap();
    sender.checkpoint_durable(&l).unwrap();
    let announced = controls(&mut sender);
    assert_eq!(announced, vec![(Endpoint::Process(1), Control::Checkpointed { date: 3 })], "not to rank 2");
    let piggyback = send(&mut sender, 1);
    receive(&mut receiver, 0, piggyback);
    receiver.on_control(Endpoint::Process(0), announced[0].1.clone(), &log(&t)).unwrap();
    assert_eq!(receiver.received_from(0), &[(4, 1)]);
    assert_eq!(receiver.last_received(0), 4);
    // Nothing logged since: no announcement.
    sender.checkpoint().unwrap();
    let l2 = log(&t);
    sender.checkpoint_durable(&l2).unwrap();
    assert!(controls(&mut sender).is_empty());
}

/// The RPP, kept as runs, answers recovery what a plain `(date, phase)` list would: a steady stream (the fast
/// path), a checkpoint of the receiver in between (the acknowledgement takes the checked path, then the fast path
/// resumes), an exchange whose phases rise, pruning inside a run, a checkpoint round trip, and the orphans of a
/// restart whose date falls inside a run, counted per phase.
#[test]
fn rpp_runs_answer_recovery_exactly() {
    // Group 0 = {0} survives; group 1 = {1, 2} fails. Rank 1 sends to 0 every other send (to 2 in between).
    let t = topo(vec![0, 1, 1]);
    let l = log(&t);
    let mut s = process(&t, 0);
    let mut k = process(&t, 1);
    let mut model: Vec<(u64, u64)> = Vec::new();
    let step = |k: &mut Process, s: &mut Process, model: &mut Vec<(u64, u64)>| {
        send(k, 2);
        let piggyback = send(k, 0);
        model.push((piggyback.date(), piggyback.phase()));
        receive(s, 1, piggyback);
    };
    for _ in 0..6 {
        step(&mut k, &mut s, &mut model);
    }
    s.checkpoint().unwrap();
    s.checkpoint_durable(&l).unwrap();
    assert!(controls(&mut s).is_empty());
    for _ in 0..3 {
        step(&mut k, &mut s, &mut model);
    }
    assert_eq!(controls(&mut s), vec![(Endpoint::Process(1), Control::Ack { date: 14 })], "once, for date 14");
    // An exchange: each delivery raises the other's phase, so rank 1's phases rise by two per message.
    for _ in 0..5 {
        let piggyback = send(&mut s, 1);
        receive(&mut k, 0, piggyback);
        step(&mut k, &mut s, &mut model);
    }
    assert_eq!(model.last().map(|e| e.1), Some(11), "phases rose: {model:?}");
    assert_eq!(s.received_from(1), model);
    // Rank 1's group checkpointed at date 15, inside the steady run.
    s.on_control(Endpoint::Process(1), Control::Checkpointed { date: 15 }, &l).unwrap();
    model.retain(|e| e.0 > 15);
    assert_eq!(s.received_from(1), model);
    assert_eq!(s.last_received(1), 28);
    let json = serde_json::to_string(&s.state()).unwrap();
    let back = Process::restart(t.clone(), serde_json::from_str(&json).unwrap(), 1, &[0]).unwrap();
    assert_eq!(back.received_from(1), model);
    // Group 1 restarts from a checkpoint dated 21, inside the rising run.
    s.on_control(Endpoint::Coordinator(0), Control::FailureNotice { round: 1, restarting: vec![1] }, &l).unwrap();
    s.on_control(Endpoint::Process(1), Control::Restarted { round: 1, date: 21, last_received: 0 }, &l).unwrap();
    s.on_control(Endpoint::Process(2), Control::Restarted { round: 1, date: 21, last_received: 0 }, &l).unwrap();
    let orphans: Vec<(u64, u64)> = model.iter().copied().filter(|e| e.0 > 21).collect();
    assert_eq!(orphans.len(), 4);
    let sent = controls(&mut s);
    let last_date = Control::LastDate { round: 1, last_date: 28, orphans: orphans.clone() };
    assert!(sent.contains(&(Endpoint::Process(1), last_date)), "{sent:?}");
    let counts: Vec<(u64, u64)> = orphans.iter().map(|e| (e.1, 1)).collect();
    assert!(sent.contains(&(Endpoint::Coordinator(0), Control::OrphanCounts { round: 1, counts })), "{sent:?}");
}

/// A survivor of a failure of group 1 = {1, 2}: ranks 1 and 2 sent it different things.
fn survivor_with_history() -> (Arc<Topology>, Process, SenderLog) {
    let t = topo(vec![0, 1, 1, 2]);
    let mut l = log(&t);
    let mut s = process(&t, 0);
    receive(&mut s, 1, pb(1, 1));
    receive(&mut s, 1, pb(2, 2));
    receive(&mut s, 2, pb(5, 3));
    for to in [1, 2, 1] {
        let piggyback = send(&mut s, to);
        l.append(to, piggyback, b"p").unwrap();
    }
    (t, s, l)
}

/// \[R\] Fig 6.5 line 9's `rpp[j]` means `rpp[k]`: each restarting member gets the date of the last message
/// received from *it*, with its own orphans; \[R\] the report to the coordinator goes once, after the last
/// `Restarted`, with per-phase counts.
#[test]
fn last_dates_and_one_report() {
    let (_, mut s, l) = survivor_with_history();
    s.on_control(Endpoint::Coordinator(0), Control::FailureNotice { round: 1, restarting: vec![1] }, &l).unwrap();
    assert!(s.in_recovery());
    assert!(matches!(s.on_send(3).unwrap(), Outbound::Hold), "held until released");
    s.on_control(Endpoint::Process(1), Control::Restarted { round: 1, date: 1, last_received: 0 }, &l).unwrap();
    let c1 = controls(&mut s);
    assert_eq!(c1[0], (Endpoint::Process(1), Control::LastDate { round: 1, last_date: 2, orphans: vec![(2, 2)] }));
    assert!(c1.iter().all(|(to, _)| *to == Endpoint::Process(1)), "no report before rank 2's Restarted: {c1:?}");
    s.on_control(Endpoint::Process(2), Control::Restarted { round: 1, date: 0, last_received: 0 }, &l).unwrap();
    let c2 = controls(&mut s);
    assert_eq!(c2[0], (Endpoint::Process(2), Control::LastDate { round: 1, last_date: 5, orphans: vec![(5, 3)] }));
    let to_coordinator: Vec<Control> =
        c2.into_iter().filter(|(to, _)| *to == Endpoint::Coordinator(0)).map(|c| c.1).collect();
    assert_eq!(
        to_coordinator,
        vec![
            Control::LoggedPhases { round: 1, phases: vec![4] },
            Control::OrphanCounts { round: 1, counts: vec![(2, 1), (3, 1)] },
            Control::MyPhase { round: 1, phase: 4 },
        ]
    );
    // A second Restarted from the same rank is a protocol error.
    let again = s.on_control(Endpoint::Process(2), Control::Restarted { round: 1, date: 0, last_received: 0 }, &l);
    assert!(matches!(again, Err(Error::UnexpectedMessage { .. })));
}

/// \[R\] `NotifySendLogged(φ)` replays each logged message of phase at most φ once, even if notified again; the
/// horizon in `NotifySendMsg` releases held sends; the round's end returns to failure-free operation.
#[test]
fn replays_once_then_release() {
    let (_, mut s, l) = survivor_with_history();
    let c = Endpoint::Coordinator(0);
    s.on_control(c, Control::FailureNotice { round: 1, restarting: vec![1] }, &l).unwrap();
    s.on_control(Endpoint::Process(1), Control::Restarted { round: 1, date: 0, last_received: 0 }, &l).unwrap();
    s.on_control(Endpoint::Process(2), Control::Restarted { round: 1, date: 0, last_received: 0 }, &l).unwrap();
    actions(&mut s);
    assert!(matches!(s.on_send(3).unwrap(), Outbound::Hold));
    s.on_control(c, Control::NotifySendLogged { round: 1, phase: 4 }, &l).unwrap();
    s.on_control(c, Control::NotifySendLogged { round: 1, phase: 4 }, &l).unwrap();
    let replays: Vec<(Rank, u64)> = actions(&mut s)
        .into_iter()
        .filter_map(|a| match a {
            Action::Replay { to, piggyback } => {
                assert!(piggyback.released_in(1), "replays are marked as released by the round");
                Some((to, piggyback.date()))
            }
            _ => None,
        })
        .collect();
    assert_eq!(replays, vec![(1, 1), (1, 3), (2, 2)]);
    s.on_control(c, Control::NotifySendMsg { round: 1, horizon: Horizon::UpTo(3) }, &l).unwrap();
    assert!(actions(&mut s).is_empty(), "phase 4 is not admitted by horizon 3");
    s.on_control(c, Control::NotifySendMsg { round: 1, horizon: Horizon::UpTo(4) }, &l).unwrap();
    assert_eq!(actions(&mut s), vec![Action::ResumeSends]);
    let Outbound::Transmit { piggyback, .. } = s.on_send(3).unwrap() else { panic!() };
    assert!(piggyback.released_in(1));
    s.on_control(c, Control::NotifySendMsg { round: 1, horizon: Horizon::Unbounded }, &l).unwrap();
    assert!(!s.in_recovery());
    assert!(!send(&mut s, 3).released_in(1), "failure-free again");
    // Messages of a finished round are ignored.
    s.on_control(c, Control::NotifySendLogged { round: 1, phase: 9 }, &l).unwrap();
    assert!(actions(&mut s).is_empty());
}

/// \[R+\] A delivery not released by the round (sent before its sender heard of the failure) raises the phase a
/// released process must wait for: it holds and announces the new phase.
#[test]
fn unreleased_deliveries_taint() {
    let (_, mut s, l) = survivor_with_history();
    let c = Endpoint::Coordinator(0);
    s.on_control(c, Control::FailureNotice { round: 1, restarting: vec![1] }, &l).unwrap();
    for k in [1, 2] {
        s.on_control(Endpoint::Process(k), Control::Restarted { round: 1, date: 9, last_received: 9 }, &l).unwrap();
    }
    s.on_control(c, Control::NotifySendMsg { round: 1, horizon: Horizon::UpTo(4) }, &l).unwrap();
    actions(&mut s);
    send(&mut s, 3);
    // A message from rank 3 (another group) sent in phase 6 before the failure notice reached it.
    receive(&mut s, 3, pb(1, 6));
    assert!(matches!(s.on_send(3).unwrap(), Outbound::Hold));
    assert_eq!(controls(&mut s), vec![(c, Control::MyPhase { round: 1, phase: 7 })]);
    // The same message released by the round would not have tainted.
    let (_, mut s2, l2) = survivor_with_history();
    s2.on_control(c, Control::FailureNotice { round: 1, restarting: vec![1] }, &l2).unwrap();
    for k in [1, 2] {
        s2.on_control(Endpoint::Process(k), Control::Restarted { round: 1, date: 9, last_received: 9 }, &l2).unwrap();
    }
    s2.on_control(c, Control::NotifySendMsg { round: 1, horizon: Horizon::UpTo(4) }, &l2).unwrap();
    receive(&mut s2, 3, Piggyback::new(1, 6, Some(1)).unwrap());
    assert!(matches!(s2.on_send(3).unwrap(), Outbound::Transmit { .. }));
}

/// A restarting process: \[R+\] drops what a peer sent before its `LastDate` (it is in that peer's log), notifies a
/// regenerated orphan with the phase its receiver recorded (\[R+\]) to the receiver's coordinator (\[R+\]), and reports
/// a send that skips an orphan as a send-determinism violation.
#[test]
fn restarting_process() {
    let t = Arc::new(Topology::with_coordinators(vec![0, 1, 2], vec![0, 0, 1]).unwrap());
    let l = log(&t);
    let state = process(&t, 0).state();
    let mut p = Process::restart(t.clone(), state, 1, &[0]).unwrap();
    let c = controls(&mut p);
    assert!(c.contains(&(Endpoint::Process(1), Control::Restarted { round: 1, date: 0, last_received: 0 })));
    assert!(c.contains(&(Endpoint::Coordinator(0), Control::MyPhase { round: 1, phase: 1 })));
    assert_eq!(p.on_receive(1, pb(3, 1)).unwrap(), Reception::Stale, "before rank 1's LastDate");
    p.on_control(Endpoint::Process(1), Control::LastDate { round: 1, last_date: 0, orphans: vec![] }, &l).unwrap();
    assert!(matches!(p.on_receive(1, pb(3, 1)).unwrap(), Reception::Deliver(_)));
    // Rank 2 had received this process's sends 1 and 2, recorded in phases 1 and 2.
    p.on_control(Endpoint::Process(2), Control::LastDate { round: 1, last_date: 2, orphans: vec![(1, 1), (2, 2)] }, &l)
        .unwrap();
    let report = controls(&mut p);
    assert!(report.contains(&(Endpoint::Coordinator(0), Control::OrphanCounts { round: 1, counts: vec![] })));
    assert!(matches!(p.on_send(2).unwrap(), Outbound::Hold), "not released yet");
    p.on_control(Endpoint::Coordinator(0), Control::NotifySendMsg { round: 1, horizon: Horizon::UpTo(1) }, &l).unwrap();
    assert_eq!(actions(&mut p), vec![Action::ResumeSends]);
    // Its phase is 2 now, but the first orphan was recorded in phase 1: the notification says 1, and goes to
    // rank 2's coordinator.
    assert!(matches!(p.on_send(2).unwrap(), Outbound::LogOnly { .. }));
    assert_eq!(controls(&mut p), vec![(Endpoint::Coordinator(1), Control::OrphanNotification { round: 1, phase: 1 })]);
    // The second send was rank 2's second orphan; sending it elsewhere breaks send-determinism.
    assert!(matches!(p.on_send(1), Err(Error::SendDeterminismViolated { rank: 0, dest: 1, date: 2, .. })));
}

/// A rendezvous whose sender dies before its data moved: the receiver undoes the arrival it recorded
/// (`on_receive_undone`), so that the restarted sender's copy is regenerated and accepted, not dropped as an orphan
/// that nobody delivers. Undone last, the RPP's `Maxdate` goes back; undone below a later arrival (an eager message
/// that overtook the data), it is a hole: the later one stays an orphan, the hole is filled once, and a restart of
/// the receiver itself asks for it again (`Restarted.last_received` below the hole).
#[test]
fn an_undone_rendezvous_arrival_is_regenerated_not_an_orphan() {
    for later in [false, true] {
        // Group 0 = {0} receives and survives; group 1 = {1} sends and restarts from its checkpoint at date 1.
        let t = topo(vec![0, 1]);
        let l = log(&t);
        let (mut s, mut k) = (process(&t, 0), process(&t, 1));
        receive(&mut s, 1, send(&mut k, 0));
        let state = k.checkpoint().unwrap();
        k.checkpoint_durable(&l).unwrap();
        let rts = send(&mut k, 0);
        receive(&mut s, 1, rts);
        let last = if later {
            receive(&mut s, 1, send(&mut k, 0));
            3
        } else {
            1
        };
        // Rank 1 dies before the data of its message 2 moved.
        assert!(s.on_receive_undone(1, 2).unwrap());
        assert!(!s.on_receive_undone(1, 2).unwrap(), "once");
        assert_eq!(s.last_received(1), last);
        let recorded: Vec<u64> = s.received_from(1).iter().map(|e| e.0).collect();
        assert_eq!(recorded, if later { vec![1, 3] } else { vec![1] });
        let image = s.state();
        // Recovery of group 1.
        let c = Endpoint::Coordinator(0);
        s.on_control(c, Control::FailureNotice { round: 1, restarting: vec![1] }, &l).unwrap();
        let mut k = Process::restart(t.clone(), state, 1, &[1]).unwrap();
        let _ = controls(&mut k);
        s.on_control(Endpoint::Process(1), Control::Restarted { round: 1, date: 1, last_received: 0 }, &l).unwrap();
        let orphans = if later { vec![(3, 1)] } else { vec![] };
        let last_date = Control::LastDate { round: 1, last_date: last, orphans: orphans.clone() };
        assert!(controls(&mut s).contains(&(Endpoint::Process(1), last_date.clone())));
        k.on_control(Endpoint::Process(0), last_date, &l).unwrap();
        k.on_control(c, Control::NotifySendMsg { round: 1, horizon: Horizon::UpTo(1) }, &l).unwrap();
        // Message 2 is regenerated and sent (logged: another group), accepted once; message 3 is an orphan.
        let again = match k.on_send(0).unwrap() {
            Outbound::Transmit { piggyback, log: true } => piggyback,
            other => panic!("message 2 must be sent again: {other:?}"),
        };
        assert!(matches!(s.on_receive(1, again).unwrap(), Reception::Deliver(_)));
        assert_eq!(s.on_receive(1, again).unwrap(), Reception::Duplicate);
        if later {
            assert!(matches!(k.on_send(0).unwrap(), Outbound::LogOnly { .. }));
        }
        let recorded: Vec<u64> = s.received_from(1).iter().map(|e| e.0).collect();
        assert_eq!(recorded, (1..=last.max(2)).collect::<Vec<u64>>());
        // The receiver's state captured with the hole: restarted from it, it asks for message 2 again.
        let mut r = Process::restart(t.clone(), image, 2, &[0]).unwrap();
        let restarted = Control::Restarted { round: 2, date: 0, last_received: 1 };
        assert!(controls(&mut r).contains(&(Endpoint::Process(1), restarted)));
    }
}

/// Out-of-place events are typed errors, never panics.
#[test]
fn protocol_errors() {
    let t = topo(vec![0, 1]);
    let l = log(&t);
    let mut p = process(&t, 0);
    // A failure notice naming the process's own group: the driver must restart it.
    let own = p.on_control(Endpoint::Coordinator(0), Control::FailureNotice { round: 1, restarting: vec![0] }, &l);
    assert!(matches!(own, Err(Error::RestartRequired { round: 1 })));
    // Coordinator messages from a process, coordinator-bound messages at a process.
    assert!(p.on_control(Endpoint::Process(1), Control::FailureNotice { round: 1, restarting: vec![1] }, &l).is_err());
    assert!(
        p.on_control(Endpoint::Coordinator(0), Control::FailureNotice { round: 1, restarting: vec![5] }, &l).is_err()
    );
    p.on_control(Endpoint::Coordinator(0), Control::FailureNotice { round: 1, restarting: vec![1] }, &l).unwrap();
    assert!(matches!(p.checkpoint(), Err(Error::CheckpointDuringRecovery { round: 1 })));
    assert!(matches!(
        p.on_control(Endpoint::Process(1), Control::MyPhase { round: 1, phase: 1 }, &l),
        Err(Error::UnexpectedMessage { .. })
    ));
    assert!(matches!(
        p.on_control(Endpoint::Process(1), Control::LastDate { round: 1, last_date: 0, orphans: vec![] }, &l),
        Err(Error::UnexpectedMessage { .. })
    ));
    // Messages of a later round wait for its notice; of an earlier one are ignored.
    p.on_control(Endpoint::Process(1), Control::Restarted { round: 2, date: 0, last_received: 0 }, &l).unwrap();
    assert!(controls(&mut p).is_empty());
    p.on_control(Endpoint::Coordinator(0), Control::FailureNotice { round: 2, restarting: vec![1] }, &l).unwrap();
    assert!(
        controls(&mut p).iter().any(|c| matches!(c.1, Control::LastDate { round: 2, .. })),
        "the stashed Restarted is handled"
    );
    p.on_control(Endpoint::Process(1), Control::Restarted { round: 1, date: 0, last_received: 0 }, &l).unwrap();
    assert!(controls(&mut p).is_empty());
    assert!(matches!(Process::restart(t.clone(), process(&t, 0).state(), 1, &[1]), Err(Error::InvalidTopology(_))));
    assert!(matches!(Process::new(t, 9, ProcessConfig::default()), Err(Error::UnknownRank { .. })));
}

/// The checkpointed state survives serialisation, and a restart from it resumes the same dates and phases.
#[test]
fn state_serialises() {
    let (t, mut s, _) = survivor_with_history();
    let state = s.checkpoint().unwrap();
    let json = serde_json::to_string(&state).unwrap();
    let back: nemesis_ft::ProcessState = serde_json::from_str(&json).unwrap();
    assert_eq!(back, state);
    let p = Process::restart(t, back, 1, &[0]).unwrap();
    assert_eq!((p.date(), p.phase()), (s.date(), s.phase()));
    assert_eq!(p.received_from(1), s.received_from(1));
}

/// Coordinator (Fig 6.6): \[R\] nothing is released before every report is in; \[R\] each phase is released once;
/// releases follow the strict `<` rule; the round ends with everyone told.
#[test]
fn centralised_coordinator() {
    // Group 0 = {0} restarts; 1 and 2 survive.
    let t = topo(vec![0, 1, 2]);
    let mut c = Coordinator::new(t, 0).unwrap();
    c.on_failure(1, &[0]).unwrap();
    let out: Vec<_> = std::iter::from_fn(|| c.poll_outgoing()).collect();
    assert_eq!(out.len(), 2, "failure notices to the two survivors");
    let p = Endpoint::Process;
    let msgs = [
        (p(1), Control::LoggedPhases { round: 1, phases: vec![1, 3] }),
        (p(1), Control::OrphanCounts { round: 1, counts: vec![(2, 2)] }),
        (p(1), Control::MyPhase { round: 1, phase: 3 }),
        (p(0), Control::MyPhase { round: 1, phase: 1 }),
        (p(0), Control::LoggedPhases { round: 1, phases: vec![] }),
        (p(0), Control::OrphanCounts { round: 1, counts: vec![] }),
        (p(2), Control::LoggedPhases { round: 1, phases: vec![2] }),
        (p(2), Control::OrphanCounts { round: 1, counts: vec![] }),
    ];
    for (from, m) in msgs {
        c.on_control(from, m).unwrap();
        assert!(c.poll_outgoing().is_none(), "nothing before every report is in");
    }
    c.on_control(p(2), Control::MyPhase { round: 1, phase: 2 }).unwrap();
    let out: Vec<_> = std::iter::from_fn(|| c.poll_outgoing()).map(|o| (o.to, o.msg)).collect();
    // Orphans pending in phase 2: phases 1 and 2 go (strict <), phase 3 waits.
    assert_eq!(
        out,
        vec![
            (p(1), Control::NotifySendLogged { round: 1, phase: 1 }),
            (p(2), Control::NotifySendLogged { round: 1, phase: 2 }),
            (p(0), Control::NotifySendMsg { round: 1, horizon: Horizon::UpTo(2) }),
            (p(2), Control::NotifySendMsg { round: 1, horizon: Horizon::UpTo(2) }),
        ]
    );
    assert_eq!(c.horizon(), Some(Horizon::UpTo(2)));
    c.on_control(p(0), Control::OrphanNotification { round: 1, phase: 2 }).unwrap();
    assert!(c.poll_outgoing().is_none(), "two orphans of phase 2, one in");
    // A re-registration below the horizon is answered at once.
    c.on_control(p(2), Control::MyPhase { round: 1, phase: 2 }).unwrap();
    assert_eq!(c.poll_outgoing().map(|o| o.msg), Some(Control::NotifySendMsg { round: 1, horizon: Horizon::UpTo(2) }));
    c.on_control(p(0), Control::OrphanNotification { round: 1, phase: 2 }).unwrap();
    let out: Vec<_> = std::iter::from_fn(|| c.poll_outgoing()).map(|o| (o.to, o.msg)).collect();
    assert_eq!(out[0], (p(1), Control::NotifySendLogged { round: 1, phase: 3 }), "phase 1 is not released twice");
    assert_eq!(out.len(), 4, "then everyone hears the round is over: {out:?}");
    assert!(out[1..].iter().all(|(_, m)| *m == Control::NotifySendMsg { round: 1, horizon: Horizon::Unbounded }));
    assert!(c.recovering_groups().is_none());
    // An unexpected orphan, a report from a process another coordinator owns, a non-increasing round.
    c.on_failure(2, &[0]).unwrap();
    assert!(matches!(
        c.on_control(p(0), Control::OrphanNotification { round: 2, phase: 5 }),
        Err(Error::UnexpectedMessage { .. })
    ));
    assert!(matches!(c.on_failure(2, &[0]), Err(Error::UnexpectedMessage { .. })));
    assert!(matches!(c.on_control(p(1), Control::Ack { date: 1 }), Err(Error::UnexpectedMessage { .. })));
}

/// Distributed coordinators (Fig 6.7): \[R\] counts are made once every list is in, whatever the arrival order —
/// an `OrphansReceived` that comes before the lists is kept, not lost nor applied early.
#[test]
fn distributed_coordinators_count_after_all_lists() {
    let t = Arc::new(Topology::with_coordinators(vec![0, 1, 1], vec![0, 0, 1]).unwrap());
    let mut c0 = Coordinator::new(t.clone(), 0).unwrap();
    c0.on_failure(1, &[0]).unwrap();
    std::iter::from_fn(|| c0.poll_outgoing()).count();
    let p = Endpoint::Process;
    // Coordinator 1 got its orphans of phase 2 in already, and says so before its list reaches us.
    c0.on_control(Endpoint::Coordinator(1), Control::OrphansReceived { round: 1, phase: 2 }).unwrap();
    for (from, m) in [
        (p(0), Control::MyPhase { round: 1, phase: 1 }),
        (p(0), Control::LoggedPhases { round: 1, phases: vec![] }),
        (p(0), Control::OrphanCounts { round: 1, counts: vec![] }),
        (p(1), Control::LoggedPhases { round: 1, phases: vec![3] }),
        (p(1), Control::OrphanCounts { round: 1, counts: vec![(2, 1)] }),
        (p(1), Control::MyPhase { round: 1, phase: 3 }),
    ] {
        c0.on_control(from, m).unwrap();
    }
    let out: Vec<_> = std::iter::from_fn(|| c0.poll_outgoing()).map(|o| (o.to, o.msg)).collect();
    assert_eq!(out, vec![(Endpoint::Coordinator(1), Control::OrphanPhases { round: 1, phases: vec![2] })]);
    c0.on_control(Endpoint::Coordinator(1), Control::OrphanPhases { round: 1, phases: vec![2] }).unwrap();
    let out: Vec<_> = std::iter::from_fn(|| c0.poll_outgoing()).map(|o| (o.to, o.msg)).collect();
    // Both coordinators listed phase 2; only coordinator 1 has cleared it: phase 3 still waits.
    assert_eq!(out, vec![(p(0), Control::NotifySendMsg { round: 1, horizon: Horizon::UpTo(2) })]);
    c0.on_control(p(0), Control::OrphanNotification { round: 1, phase: 2 }).unwrap();
    let out: Vec<_> = std::iter::from_fn(|| c0.poll_outgoing()).map(|o| (o.to, o.msg)).collect();
    assert_eq!(out[0], (Endpoint::Coordinator(1), Control::OrphansReceived { round: 1, phase: 2 }));
    assert_eq!(out[1], (p(1), Control::NotifySendLogged { round: 1, phase: 3 }));
    assert!(out[2..].iter().all(|(_, m)| matches!(m, Control::NotifySendMsg { horizon: Horizon::Unbounded, .. })));
}

mod fuzz {
    use super::*;
    use proptest::prelude::*;

    fn endpoint() -> impl Strategy<Value = Endpoint> {
        prop_oneof![(0u32..6).prop_map(Endpoint::Process), (0u32..3).prop_map(Endpoint::Coordinator)]
    }

    fn phases() -> impl Strategy<Value = Vec<u64>> {
        proptest::collection::btree_set(1u64..6, 0..3).prop_map(|s| s.into_iter().collect())
    }

    fn control() -> impl Strategy<Value = Control> {
        let r = 1u64..4;
        prop_oneof![
            (0u64..12).prop_map(|date| Control::Ack { date }),
            (0u64..12).prop_map(|date| Control::Checkpointed { date }),
            (r.clone(), proptest::collection::btree_set(0u32..4, 1..3))
                .prop_map(|(round, g)| { Control::FailureNotice { round, restarting: g.into_iter().collect() } }),
            (r.clone(), 0u64..12, 0u64..12)
                .prop_map(|(round, date, last_received)| { Control::Restarted { round, date, last_received } }),
            (r.clone(), 0u64..12, proptest::collection::btree_map(1u64..12, 1u64..6, 0..3)).prop_map(
                |(round, last, o)| Control::LastDate {
                    round,
                    last_date: last.max(o.keys().last().copied().unwrap_or(0)),
                    orphans: o.into_iter().collect()
                }
            ),
            (r.clone(), proptest::collection::btree_set(1u64..12, 1..3)).prop_map(|(round, seqs)| {
                Control::OrphanStamps {
                    round,
                    stamps: seqs.into_iter().map(|seq| Stamp { seq, digest: seq }).collect(),
                }
            }),
            (r.clone(), 1u64..6).prop_map(|(round, phase)| Control::MyPhase { round, phase }),
            (r.clone(), phases()).prop_map(|(round, phases)| Control::LoggedPhases { round, phases }),
            (r.clone(), proptest::collection::btree_map(1u64..6, 1u64..3, 0..3))
                .prop_map(|(round, c)| Control::OrphanCounts { round, counts: c.into_iter().collect() }),
            (r.clone(), 1u64..6).prop_map(|(round, phase)| Control::OrphanNotification { round, phase }),
            (r.clone(), 1u64..6).prop_map(|(round, phase)| Control::NotifySendLogged { round, phase }),
            (r.clone(), prop_oneof![(1u64..6).prop_map(Horizon::UpTo), Just(Horizon::Unbounded)])
                .prop_map(|(round, horizon)| Control::NotifySendMsg { round, horizon }),
            (r.clone(), phases()).prop_map(|(round, phases)| Control::OrphanPhases { round, phases }),
            (r, 1u64..6).prop_map(|(round, phase)| Control::OrphansReceived { round, phase }),
        ]
    }

    #[derive(Clone, Debug)]
    enum Event {
        Control(Endpoint, Control),
        Send(Rank),
        Receive(Rank, u64, u64, Option<u64>),
        Checkpoint,
        Durable,
    }

    fn event() -> impl Strategy<Value = Event> {
        prop_oneof![
            4 => (endpoint(), control()).prop_map(|(e, c)| Event::Control(e, c)),
            2 => (0u32..6).prop_map(Event::Send),
            2 => (0u32..6, 1u64..12, 1u64..6, proptest::option::of(1u64..4)).prop_map(|(f, d, p, r)| Event::Receive(f, d, p, r)),
            1 => Just(Event::Checkpoint),
            1 => Just(Event::Durable),
        ]
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: crate::properties::cases(256), failure_persistence: None, ..ProptestConfig::default() })]

        /// Whatever peers and callers throw at them, in whatever order, the engine and the coordinator answer with
        /// a result and never panic (ranks 4 and 5, coordinator 2 do not exist).
        #[test]
        fn arbitrary_events_never_panic(events in proptest::collection::vec(event(), 1..60), restarted in any::<bool>()) {
            let t = Arc::new(Topology::with_coordinators(vec![0, 0, 1, 2], vec![0, 1, 0, 1]).unwrap());
            let l = log(&t);
            let mut p = if restarted {
                Process::restart(t.clone(), process(&t, 0).state(), 1, &[0]).unwrap()
            } else {
                process(&t, 0)
            };
            let mut c = Coordinator::new(t.clone(), 0).unwrap();
            for e in events {
                match e {
                    Event::Control(from, msg) => {
                        let _ = p.on_control(from, msg.clone(), &l);
                        if let Control::FailureNotice { round, restarting } = &msg {
                            let _ = c.on_failure(*round, restarting);
                        } else {
                            let _ = c.on_control(from, msg);
                        }
                    }
                    Event::Send(to) => {
                        let _ = p.on_send(to);
                    }
                    Event::Receive(from, date, phase, round) => {
                        if let Ok(Reception::Deliver(d)) = p.on_receive(from, Piggyback::new(date, phase, round).unwrap()) {
                            p.on_deliver(d);
                        }
                    }
                    Event::Checkpoint => {
                        let _ = p.checkpoint();
                    }
                    Event::Durable => {
                        let _ = p.checkpoint_durable(&l);
                    }
                }
                while p.poll_action().is_some() {}
                while c.poll_outgoing().is_some() {}
            }
        }
    }
}

/// The transport's inline hooks ([`Process::send_fast`], [`Process::receive_deliver_fast`]) have the full hooks'
/// effect when they apply and none when they do not: two copies of every process, one driven through the inline
/// hooks first (the full ones when those decline, as the Endpoint does), one through the full hooks alone, agree
/// on every piggyback, state and action over random runs with duplicates, checkpoints (acknowledgements due) and
/// both date rules.
#[test]
fn the_inline_hooks_agree_with_the_full_ones() {
    use std::collections::VecDeque;
    for (seed, rule) in (0..8u64).flat_map(|s| [(s, DateRule::Sends), (s, DateRule::SendsAndReceptions)]) {
        let t = topo(vec![0, 0, 1, 1]);
        let n = t.ranks();
        let config = ProcessConfig { date_rule: rule };
        let new = |r| Process::new(t.clone(), r as Rank, config).unwrap();
        let mut fast: Vec<Process> = (0..n).map(new).collect();
        let mut full: Vec<Process> = (0..n).map(new).collect();
        let log = log(&t);
        // Messages in flight per channel (FIFO), and the last one delivered (replayed as a duplicate).
        let mut wire: Vec<VecDeque<Piggyback>> = vec![VecDeque::new(); n * n];
        let mut last: Vec<Option<Piggyback>> = vec![None; n * n];
        let mut x = seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1;
        let mut next = |m: u64| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x % m
        };
        let (mut inline_sends, mut inline_arrivals) = (0, 0);
        for step in 0..3000 {
            let (i, j) = (next(n as u64) as usize, next(n as u64) as usize);
            let ch = i * n + j;
            match next(10) {
                _ if i == j => {}
                0..=3 => {
                    let want = full[i].on_send(j as Rank).unwrap();
                    let got = match fast[i].send_fast(j as Rank) {
                        Some((piggyback, log)) => {
                            inline_sends += 1;
                            Outbound::Transmit { piggyback, log }
                        }
                        None => fast[i].on_send(j as Rank).unwrap(),
                    };
                    assert_eq!(got, want, "seed {seed} step {step}: send {i} -> {j}");
                    if let Outbound::Transmit { piggyback, .. } = want {
                        wire[ch].push_back(piggyback);
                    }
                }
                4..=8 => {
                    // One arrival in ten: a duplicate of the last message delivered on the channel.
                    let pb = if next(10) == 0 { last[ch] } else { wire[ch].pop_front() };
                    let Some(pb) = pb else { continue };
                    last[ch] = Some(pb);
                    if !fast[j].has_actions() && fast[j].receive_deliver_fast(i as Rank, pb) {
                        inline_arrivals += 1;
                    } else if let Reception::Deliver(d) = fast[j].on_receive(i as Rank, pb).unwrap() {
                        fast[j].on_deliver(d);
                    }
                    if let Reception::Deliver(d) = full[j].on_receive(i as Rank, pb).unwrap() {
                        full[j].on_deliver(d);
                    }
                }
                _ => {
                    for p in [&mut fast[i], &mut full[i]] {
                        p.checkpoint().unwrap();
                        p.checkpoint_durable(&log).unwrap();
                    }
                }
            }
            assert_eq!(fast[i].state(), full[i].state(), "seed {seed} step {step}: rank {i}");
            assert_eq!(fast[j].state(), full[j].state(), "seed {seed} step {step}: rank {j}");
            for r in [i, j] {
                assert_eq!(actions(&mut fast[r]), actions(&mut full[r]), "seed {seed} step {step}: rank {r}");
            }
        }
        // Both ways were taken.
        assert!(inline_sends > 100 && inline_arrivals > 100, "seed {seed}: {inline_sends} {inline_arrivals}");
    }
}
