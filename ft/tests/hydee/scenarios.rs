//! The test scenarios of `shared/reference/hydee.md`, rebuilt from the prose of T:1942–2050 of
//! `guermouche-2011-thesis-send-determinism-hydee.txt`, and one scenario per resolution (\[R\], \[R+\]) that a
//! run can show. Each runs under many interleavings (seeds).

use nemesis_ft::{Control, Endpoint, Horizon, Phase, Rank};

use crate::sim::*;

const SEEDS: u64 = 40;

fn run(program: &Program, cfg: &Config) -> Report {
    match Sim::new(program.clone(), cfg.clone()).and_then(Sim::run) {
        Ok(r) => r,
        Err(e) => panic!("seed {}: {e}", cfg.seed),
    }
}

fn with_seed(cfg: &Config, seed: u64) -> Config {
    Config { seed, ..cfg.clone() }
}

fn index(r: &Report, what: &str, f: impl Fn(&Trace) -> bool) -> usize {
    r.first(f).unwrap_or_else(|| panic!("no trace event: {what}"))
}

fn rollback_at(r: &Report, rank: Rank) -> usize {
    index(r, "rollback", |t| matches!(t, Trace::Rollback { rank: x, .. } if *x == rank))
}

/// First arrival of `id` at `rank` accepted after trace index `after`.
fn arrival_after(r: &Report, rank: Rank, id: MsgId, after: usize) -> usize {
    after
        + r.trace[after..]
            .iter()
            .position(
                |t| matches!(t, Trace::Arrive { rank: x, id: i, verdict: "deliver", .. } if *x == rank && *i == id),
            )
            .unwrap_or_else(|| panic!("{id:?} never reached rank {rank} after {after}"))
}

/// First application send of `id` after index `after`, with its outcome.
fn send_after(r: &Report, id: MsgId, after: usize) -> (usize, &'static str) {
    r.trace[after..]
        .iter()
        .enumerate()
        .find_map(|(i, t)| match t {
            Trace::Send { id: Some(x), outcome, .. } if *x == id => Some((after + i, *outcome)),
            _ => None,
        })
        .unwrap_or_else(|| panic!("{id:?} never sent after {after}"))
}

fn is_orphan_notification_at_coordinator(t: &Trace, phase: Phase) -> bool {
    matches!(t, Trace::Control { to: Endpoint::Coordinator(_), msg: Control::OrphanNotification { phase: p, .. }, .. } if *p == phase)
}

fn coordinator_sends_notify_msg_to(t: &Trace, rank: Rank) -> bool {
    matches!(t, Trace::ControlSent { from: Endpoint::Coordinator(_), to: Endpoint::Process(x), msg: Control::NotifySendMsg { .. } } if *x == rank)
}

fn delivered_notify_msg_to(t: &Trace, rank: Rank) -> bool {
    matches!(t, Trace::Control { to: Endpoint::Process(x), msg: Control::NotifySendMsg { .. }, .. } if *x == rank)
}

// Ranks of the thesis's example (Figs 6.1 and 6.2): p1..p8.
const P1: Rank = 0;
const P2: Rank = 1;
const P3: Rank = 2;
const P4: Rank = 3;
const P5: Rank = 4;
const P6: Rank = 5;
const P7: Rank = 6;
const P8: Rank = 7;
// Its messages.
const M1: MsgId = (P1, 0);
const M2: MsgId = (P2, 0);
const M3: MsgId = (P3, 0);
const M4: MsgId = (P5, 0);
const M6: MsgId = (P8, 0);
const M7: MsgId = (P7, 0);
const M8: MsgId = (P4, 0);

/// G1 = {p1}, G2 = {p2, p3, p4}, G3 = {p5, p6, p7, p8}.
fn thesis_groups() -> Vec<u32> {
    vec![0, 1, 1, 1, 2, 2, 2, 2]
}

/// m1 p1→p2, m2 p2→p3, m3 p3→p5, m4 p5→p6, m5 p6→p7, m6 p8→p7, m7 p7→p4, m8 p4→p3 (T:1942–1945), then, behind
/// gate `extra`, new messages: p1→p8, p5→p6, p6→p7, p7→p8, p8→p5. `m4_gate`/`m6_gate` hold m4 and m6 back.
fn thesis_program(extra: u32, m4_gate: Option<u32>, m6_gate: Option<u32>) -> Program {
    let gate = |g: Option<u32>| g.map(Op::Gate).into_iter().collect::<Vec<_>>();
    let mut p5 = vec![Op::Recv(vec![P3])];
    p5.extend(gate(m4_gate));
    p5.extend([Op::Send(P6), Op::Gate(extra), Op::Send(P6), Op::Recv(vec![P8])]);
    let mut p8 = gate(m6_gate);
    p8.extend([Op::Send(P7), Op::Gate(extra), Op::Send(P5), Op::Recv(vec![P1, P7])]);
    Program {
        scripts: vec![
            vec![Op::Send(P2), Op::Gate(extra), Op::Send(P8)],
            vec![Op::Recv(vec![P1]), Op::Send(P3)],
            vec![Op::Recv(vec![P2]), Op::Send(P5), Op::Recv(vec![P4])],
            vec![Op::Recv(vec![P7]), Op::Send(P3)],
            p5,
            vec![Op::Recv(vec![P5]), Op::Send(P7), Op::Gate(extra), Op::Send(P7), Op::Recv(vec![P5])],
            vec![Op::Recv(vec![P6, P8]), Op::Send(P4), Op::Gate(extra), Op::Send(P8), Op::Recv(vec![P6])],
            p8,
        ],
    }
}

/// hydee.md "HydEE, one group fails" (T:1942–2009).
#[test]
fn one_group_fails() {
    let program = thesis_program(1, None, None);
    let mut cfg = Config::new(thesis_groups());
    // G2 fails once m1..m8 are done; its checkpoint is the initial one ("taken before m1"). The new messages are let
    // go at the same time, so that they race with recovery.
    cfg.schedule = vec![(When::Quiescent, Event::Fail(vec![1])), (When::After(0), Event::OpenGate)];
    let mut held_after_notice = 0;
    for seed in 0..SEEDS {
        let r = run(&program, &with_seed(&cfg, seed));
        let failure = index(&r, "round", |t| matches!(t, Trace::Round { .. }));
        // p5 reports one orphan in phase 2; nobody else expects any.
        let counts: Vec<(Endpoint, Vec<(Phase, u64)>)> = r
            .trace
            .iter()
            .filter_map(|t| match t {
                Trace::ControlSent { from, msg: Control::OrphanCounts { counts, .. }, .. } if !counts.is_empty() => {
                    Some((*from, counts.clone()))
                }
                _ => None,
            })
            .collect();
        assert_eq!(counts, vec![(Endpoint::Process(P5), vec![(2, 1)])]);
        // p1 replays m1, once; p7's m7 is replayed too, once.
        assert_eq!(r.count(|t| matches!(t, Trace::Replay { id, .. } if *id == M1)), 1);
        assert_eq!(r.count(|t| matches!(t, Trace::Replay { id, .. } if *id == M7)), 1);
        // p2 sends m2 again; p3 regenerates m3 and notifies the orphan instead of sending it.
        assert_eq!(send_after(&r, M2, failure).1, "transmit");
        assert_eq!(send_after(&r, M3, failure).1, "log-only");
        assert!(
            r.first(|t| matches!(
                t,
                Trace::ControlSent {
                    from: Endpoint::Process(P3),
                    msg: Control::OrphanNotification { phase: 2, .. },
                    ..
                }
            ))
            .is_some()
        );
        // m7 is replayed only once the orphan of phase 2 is in; p4 then sends m8.
        let orphan_in = index(&r, "orphan notification", |t| is_orphan_notification_at_coordinator(t, 2));
        let m7_replay = index(&r, "m7 replay", |t| matches!(t, Trace::Replay { id, .. } if *id == M7));
        assert!(m7_replay > orphan_in, "seed {seed}: m7 replayed before m3's orphan notification");
        let m8 = send_after(&r, M8, failure);
        assert_eq!(m8.1, "transmit");
        assert!(m8.0 > arrival_after(&r, P4, M7, failure));
        // p3 gets m2 before m8.
        let p3_back = rollback_at(&r, P3);
        assert!(arrival_after(&r, P3, M2, p3_back) < arrival_after(&r, P3, M8, p3_back), "seed {seed}");
        // p5 receives m3 exactly once overall.
        assert_eq!(r.count(|t| matches!(t, Trace::Arrive { rank: P5, id, verdict: "deliver", .. } if *id == M3)), 1);
        // G1 and G3 never roll back.
        assert!(r.stats.rollbacks.keys().all(|k| [P2, P3, P4].contains(k)), "{:?}", r.stats.rollbacks);
        // p5, p6, p7 (phase 3) send nothing new between their failure notice and their NotifySendMsg, which waits
        // for the orphan. (A send before the notice is the failure-free execution going on.)
        for rank in [P5, P6, P7] {
            let released = index(&r, "release", |t| delivered_notify_msg_to(t, rank));
            assert!(released > orphan_in, "seed {seed}: rank {rank} released before the orphan was in");
            let notice = index(
                &r,
                "notice",
                |t| matches!(t, Trace::Control { to: Endpoint::Process(x), msg: Control::FailureNotice { .. }, .. } if *x == rank),
            );
            let first_new = send_after(&r, (rank, 1), failure).0;
            if first_new > notice {
                held_after_notice += 1;
                assert!(
                    first_new > released,
                    "seed {seed}: rank {rank} sent after its failure notice, before its NotifySendMsg"
                );
            }
        }
        // p1 and p8 (phase 1) are never blocked: released without waiting for any orphan. Unless p8 delivered
        // p7's new message (phase 3, same group) before its failure notice: it then reports phase 3, and waits for
        // the orphan as p5..p7 do (seed 10 does that since the restarted sender gets an `OrphanStamps` before its
        // `LastDate`: one more message shifts every later choice).
        for rank in [P1, P8] {
            let reported = r.trace.iter().find_map(|t| match t {
                Trace::ControlSent { from: Endpoint::Process(x), msg: Control::MyPhase { phase, .. }, .. }
                    if *x == rank =>
                {
                    Some(*phase)
                }
                _ => None,
            });
            if reported != Some(1) {
                assert_eq!((rank, reported), (P8, Some(3)), "seed {seed}");
                continue;
            }
            let released = index(&r, "release", |t| coordinator_sends_notify_msg_to(t, rank));
            assert!(released < orphan_in, "seed {seed}: rank {rank} waited for an orphan");
        }
    }
    assert!(held_after_notice > SEEDS as usize, "the interleavings exercise sends held after the notice");
}

/// hydee.md "HydEE, G2 and G3 fail together" (T:2016–2050), with the \[R\] that restarting processes also play the
/// non-restarting role toward the other failed group (the figure deadlocks otherwise).
#[test]
fn two_groups_fail_together() {
    // G3 checkpoints when p5 has received m3 (phase 3) and before m4, m5, m6 exist; G2's checkpoint is the initial
    // one. Then everything runs, and G2 and G3 fail together.
    let program = thesis_program(2, Some(1), Some(1));
    let mut cfg = Config::new(thesis_groups());
    cfg.schedule = vec![
        (When::Quiescent, Event::Checkpoint(2)),
        (When::Quiescent, Event::OpenGate),
        (When::Quiescent, Event::Fail(vec![1, 2])),
        (When::After(0), Event::OpenGate),
    ];
    for seed in 0..SEEDS {
        let r = run(&program, &with_seed(&cfg, seed));
        let failure = index(&r, "round", |t| matches!(t, Trace::Round { .. }));
        assert!(matches!(&r.trace[failure], Trace::Round { groups, .. } if groups == &vec![1, 2]));
        // p5 restarts at phase 3 with m3 in its checkpoint: it tells p3 about the orphan although it restarts.
        assert!(r.first(|t| matches!(t, Trace::ControlSent { from: Endpoint::Process(P5), to: Endpoint::Process(P3), msg: Control::LastDate { orphans, .. } } if orphans == &vec![(1, 2)])).is_some());
        let orphan_in = index(&r, "orphan notification", |t| is_orphan_notification_at_coordinator(t, 2));
        // m6 may be sent at once: p8 restarts at phase 1 and is released without waiting for the orphan.
        assert!(index(&r, "release p8", |t| coordinator_sends_notify_msg_to(t, P8)) < orphan_in);
        // m4 waits for m3's orphan notification.
        assert!(send_after(&r, M4, failure).0 > orphan_in, "seed {seed}: m4 sent before m3's orphan notification");
        // m7 is regenerated, not replayed.
        assert_eq!(r.count(|t| matches!(t, Trace::Replay { id, .. } if *id == M7)), 0);
        assert_eq!(send_after(&r, M7, failure).1, "transmit");
        // m6 is regenerated too.
        assert_eq!(send_after(&r, M6, failure).1, "transmit");
        // m8 is never delivered before m2.
        let p3_back = rollback_at(&r, P3);
        assert!(arrival_after(&r, P3, M2, p3_back) < arrival_after(&r, P3, M8, p3_back), "seed {seed}");
    }
}

/// The program of the acknowledgement scenarios: `sender` sends `receiver` two messages, then (past gate 1) two more.
fn ack_program(sender: Rank, receiver: Rank) -> Program {
    Program {
        scripts: vec![
            vec![Op::Send(receiver), Op::Send(receiver), Op::Gate(1), Op::Send(receiver), Op::Send(receiver)],
            vec![Op::Recv(vec![sender]); 4],
            vec![],
        ],
    }
}

/// hydee.md "Acknowledgement GC": after G3 checkpoints, p3's first inter-group message to p5 yields exactly one Ack;
/// p3 drops its older log entries and keeps the acknowledged one; a following G3 failure still recovers.
#[test]
fn acknowledgement_gc() {
    const SENDER: Rank = 0; // "p3", alone in its group
    const RECEIVER: Rank = 1; // "p5", with rank 2 in the other group
    let program = ack_program(SENDER, RECEIVER);
    let mut cfg = Config::new(vec![0, 1, 1]);
    cfg.schedule = vec![
        (When::Quiescent, Event::Checkpoint(1)),
        (When::Quiescent, Event::OpenGate),
        (When::Quiescent, Event::Fail(vec![1])),
    ];
    // The engine's acknowledgement as it emits it: the endpoint holds it back one generation
    // (`markers_hold_the_acknowledgement_back_one_generation`).
    cfg.markers = false;
    for seed in 0..SEEDS {
        let r = run(&program, &with_seed(&cfg, seed));
        let failure = index(&r, "round", |t| matches!(t, Trace::Round { .. }));
        let acks: Vec<usize> = (0..failure)
            .filter(|&i| {
                matches!(
                    &r.trace[i],
                    Trace::ControlSent { from: Endpoint::Process(RECEIVER), msg: Control::Ack { .. }, .. }
                )
            })
            .collect();
        assert_eq!(acks.len(), 1, "seed {seed}: exactly one Ack");
        assert!(
            matches!(&r.trace[acks[0]], Trace::ControlSent { msg: Control::Ack { date: 3 }, .. }),
            "it acknowledges the third message"
        );
        let discard = r.trace[acks[0]..failure]
            .iter()
            .find_map(|t| match t {
                Trace::Discard { rank: SENDER, remaining, .. } => Some(remaining.clone()),
                _ => None,
            })
            .expect("the sender applies the Ack");
        assert_eq!(
            discard.first(),
            Some(&3),
            "seed {seed}: dates 1 and 2 dropped, the acknowledged one kept: {discard:?}"
        );
        // The failure restores the checkpoint holding messages 1 and 2; 3 and 4 are replayed from the log.
        assert!(r.first(|t| matches!(t, Trace::Replay { id: (SENDER, 2), .. })).is_some());
        assert!(r.first(|t| matches!(t, Trace::Replay { id: (SENDER, 3), .. })).is_some());
        assert!(r.first(|t| matches!(t, Trace::Replay { id: (SENDER, 0) | (SENDER, 1), .. })).is_none());
    }
}

/// The endpoint's held-back generation (`sim/markers.rs`): with the marker protocol, the acknowledgement of
/// `acknowledgement_gc` waits for the group's next durable checkpoint, and the sender drops its entries only then.
#[test]
fn markers_hold_the_acknowledgement_back_one_generation() {
    const SENDER: Rank = 0;
    const RECEIVER: Rank = 1;
    let program = ack_program(SENDER, RECEIVER);
    let mut cfg = Config::new(vec![0, 1, 1]);
    cfg.markers = true;
    cfg.schedule = vec![
        (When::Quiescent, Event::Checkpoint(1)),
        (When::Quiescent, Event::OpenGate),
        (When::Quiescent, Event::Checkpoint(1)),
        (When::Quiescent, Event::Fail(vec![1])),
    ];
    for seed in 0..SEEDS {
        let r = run(&program, &with_seed(&cfg, seed));
        let failure = index(&r, "round", |t| matches!(t, Trace::Round { .. }));
        let is_ack = |t: &Trace| {
            matches!(t, Trace::ControlSent { from: Endpoint::Process(RECEIVER), msg: Control::Ack { .. }, .. })
        };
        let acks: Vec<usize> = (0..failure).filter(|&i| is_ack(&r.trace[i])).collect();
        assert_eq!(acks.len(), 1, "seed {seed}: exactly one Ack");
        assert!(matches!(&r.trace[acks[0]], Trace::ControlSent { msg: Control::Ack { date: 3 }, .. }));
        // Sent once the receiver's second generation is captured and durable for it, not at the third message.
        let captures = r.trace[..acks[0]].iter().filter(|t| matches!(t, Trace::Checkpoint { durable: false, .. }));
        assert!(captures.count() >= 3, "seed {seed}: the Ack went before the second generation");
        let arrival = index(&r, "third message", |t| matches!(t, Trace::Arrive { id: (SENDER, 2), .. }));
        assert!(arrival < acks[0]);
    }
}

/// hydee.md "Orphan counting": two orphans in one phase, from one sender and from two senders; the phase is
/// released only after both notifications (\[R\]: counts, not a set).
#[test]
fn orphan_counting() {
    const A0: Rank = 0;
    const A1: Rank = 1;
    const S: Rank = 2;
    const T: Rank = 3;
    let one_sender = vec![vec![Op::Send(S), Op::Send(S)], vec![], vec![Op::Recv(vec![A0]), Op::Recv(vec![A0])]];
    let two_senders = vec![vec![Op::Send(S)], vec![Op::Send(S)], vec![Op::Recv(vec![A0]), Op::Recv(vec![A1])]];
    for base in [one_sender, two_senders] {
        let mut scripts = base;
        scripts[S as usize].extend([Op::Gate(1), Op::Send(T)]);
        scripts.push(vec![Op::Recv(vec![S])]);
        let program = Program { scripts };
        let mut cfg = Config::new(vec![0, 0, 1, 1]);
        cfg.schedule = vec![(When::Quiescent, Event::Fail(vec![0])), (When::After(0), Event::OpenGate)];
        for seed in 0..SEEDS {
            let r = run(&program, &with_seed(&cfg, seed));
            assert!(r.first(|t| matches!(t, Trace::ControlSent { from: Endpoint::Process(S), msg: Control::OrphanCounts { counts, .. }, .. } if counts == &vec![(1, 2)])).is_some());
            let notifications: Vec<usize> =
                (0..r.trace.len()).filter(|&i| is_orphan_notification_at_coordinator(&r.trace[i], 1)).collect();
            assert_eq!(notifications.len(), 2);
            let released = index(&r, "release of s", |t| coordinator_sends_notify_msg_to(t, S));
            assert!(
                released > notifications[1],
                "seed {seed}: s (phase 2) released before the second orphan of phase 1"
            );
        }
    }
}

/// The notifications a process received, in order.
fn notifications(r: &Report, rank: Rank) -> Vec<(&'static str, Option<Phase>)> {
    r.trace
        .iter()
        .filter_map(|t| match t {
            Trace::Control { to: Endpoint::Process(x), msg, .. } if *x == rank => match msg {
                Control::NotifySendLogged { phase, .. } => Some(("logged", Some(*phase))),
                Control::NotifySendMsg { horizon: Horizon::Unbounded, .. } => Some(("complete", None)),
                _ => None,
            },
            _ => None,
        })
        .collect()
}

/// hydee.md "Distributed recovery": two recovery coordinators with orphans in phase 2; nothing above phase 2 is
/// released until both have reported; the order matches the centralised run.
#[test]
fn distributed_recovery() {
    const Z: Rank = 0;
    const A0: Rank = 1;
    const A1: Rank = 2;
    const S0: Rank = 3;
    const S1: Rank = 4;
    // z's message puts a0 in phase 2; a0 and a1 send orphans of phase 2 to s0 (coordinator 0) and s1
    // (coordinator 1); s0 sends a1 a logged message of phase 3; then s0 and s1 have new messages for each other.
    let program = Program {
        scripts: vec![
            vec![Op::Send(A0)],
            vec![Op::Recv(vec![Z]), Op::Send(S0), Op::Send(A1)],
            vec![Op::Recv(vec![A0]), Op::Send(S1), Op::Recv(vec![S0])],
            vec![Op::Recv(vec![A0]), Op::Send(A1), Op::Gate(1), Op::Send(S1), Op::Recv(vec![S1])],
            vec![Op::Recv(vec![A1]), Op::Gate(1), Op::Send(S0), Op::Recv(vec![S0])],
        ],
    };
    let mut distributed = Config::new(vec![0, 1, 1, 2, 2]);
    distributed.coordinators = vec![0, 0, 1, 0, 1];
    distributed.schedule = vec![(When::Quiescent, Event::Fail(vec![1])), (When::After(0), Event::OpenGate)];
    let centralised = Config { coordinators: vec![0; 5], ..distributed.clone() };
    for seed in 0..SEEDS {
        let r = run(&program, &with_seed(&distributed, seed));
        let mut counted: Vec<(Endpoint, Endpoint)> = r
            .trace
            .iter()
            .filter_map(|t| match t {
                Trace::ControlSent { from, to, msg: Control::OrphanCounts { counts, .. } } if !counts.is_empty() => {
                    Some((*from, *to))
                }
                _ => None,
            })
            .collect();
        counted.sort();
        assert_eq!(
            counted,
            vec![(Endpoint::Process(S0), Endpoint::Coordinator(0)), (Endpoint::Process(S1), Endpoint::Coordinator(1))]
        );
        // Both orphans of phase 2 are in before anything above phase 2 is released, by either coordinator.
        let both_in = (0..r.trace.len())
            .filter(|&i| is_orphan_notification_at_coordinator(&r.trace[i], 2))
            .nth(1)
            .expect("two orphan notifications");
        for (i, t) in r.trace.iter().enumerate() {
            let above_two = match t {
                Trace::ControlSent {
                    from: Endpoint::Coordinator(_),
                    msg: Control::NotifySendLogged { phase, .. },
                    ..
                } => *phase > 2,
                Trace::ControlSent {
                    from: Endpoint::Coordinator(_),
                    msg: Control::NotifySendMsg { horizon, .. },
                    ..
                } => *horizon > Horizon::UpTo(2),
                _ => false,
            };
            assert!(!above_two || i > both_in, "seed {seed}: {t:?} before both orphans of phase 2 were in");
        }
        // Each process hears the same notifications, in the same order, as with one coordinator.
        let c = run(&program, &with_seed(&centralised, seed));
        for rank in 0..5 {
            assert_eq!(notifications(&r, rank), notifications(&c, rank), "seed {seed}, rank {rank}");
        }
        assert_eq!(notifications(&r, S0), vec![("logged", Some(3)), ("complete", None)]);
    }
}

/// \[R\] A restarting process still logs the orphans it regenerates: when the receiver's group later rolls back to
/// before them, they are replayed from that log.
#[test]
fn regenerated_orphans_are_logged_for_a_later_rollback() {
    let program = thesis_program(1, None, None);
    let mut cfg = Config::new(thesis_groups());
    // G2 fails and recovers (p3 regenerates m3 as an orphan); then G3, which never checkpointed, fails.
    cfg.schedule = vec![
        (When::Quiescent, Event::Fail(vec![1])),
        (When::After(0), Event::OpenGate),
        (When::Quiescent, Event::Fail(vec![2])),
    ];
    for seed in 0..SEEDS {
        let r = run(&program, &with_seed(&cfg, seed));
        let first = index(&r, "first round", |t| matches!(t, Trace::Round { round: 1, .. }));
        let second = index(&r, "second round", |t| matches!(t, Trace::Round { round: 2, .. }));
        assert_eq!(send_after(&r, M3, first).1, "log-only");
        assert!(
            r.trace[second..].iter().any(|t| matches!(t, Trace::Replay { rank: P3, id, .. } if *id == M3)),
            "seed {seed}: m3 must come from p3's log"
        );
    }
}

/// \[R+\] Replays are chosen by what the restarting process's checkpoint held from each peer (`Restarted` carries
/// it), not by comparing the peer's log dates with the restarting process's own date (Fig 6.5 line 10 mixes two
/// clocks: here the lost message is dated 1 by its sender and the receiver restarts at date 3).
#[test]
fn replays_follow_the_receivers_checkpoint_not_its_date() {
    const I: Rank = 0;
    const K: Rank = 1;
    let program = Program {
        scripts: vec![
            vec![Op::Recv(vec![K]), Op::Recv(vec![K]), Op::Recv(vec![K]), Op::Gate(1), Op::Send(K)],
            vec![Op::Send(I), Op::Send(I), Op::Send(I), Op::Recv(vec![I])],
        ],
    };
    let mut cfg = Config::new(vec![0, 1]);
    cfg.schedule = vec![
        (When::Quiescent, Event::Checkpoint(1)),
        (When::Quiescent, Event::OpenGate),
        (When::Quiescent, Event::Fail(vec![1])),
    ];
    for seed in 0..SEEDS {
        let r = run(&program, &with_seed(&cfg, seed));
        assert!(
            r.first(|t| matches!(
                t,
                Trace::ControlSent { msg: Control::Restarted { date: 3, last_received: 0, .. }, .. }
            ))
            .is_some()
        );
        assert!(r.first(|t| matches!(t, Trace::Replay { id: (I, 0), .. })).is_some(), "seed {seed}");
    }
}

/// A failure during recovery (of another group, or of the recovering group again) starts a new round that restarts
/// the unfinished round's groups too; the run still completes with every check passing.
#[test]
fn failure_during_recovery() {
    let program = thesis_program(1, None, None);
    for second in [vec![2], vec![1], vec![0]] {
        for delay in 0..25 {
            let mut cfg = Config::new(thesis_groups());
            cfg.seed = delay;
            cfg.schedule = vec![
                (When::Quiescent, Event::Fail(vec![1])),
                (When::After(0), Event::OpenGate),
                (When::After(delay), Event::Fail(second.clone())),
            ];
            let r = run(&program, &cfg);
            let round2 = r.trace.iter().find_map(|t| match t {
                Trace::Round { round: 2, groups } => Some(groups.clone()),
                _ => None,
            });
            let groups = round2.expect("second round");
            assert!(second.iter().all(|g| groups.contains(g)));
            if delay == 0 {
                assert!(groups.contains(&1), "a failure right after the first one restarts G2 again with it");
            }
        }
    }
}

/// The sender log spills to its file under a small memory bound, and recovery reads replays back from it.
#[test]
fn recovery_replays_from_the_spill_file() {
    let program = thesis_program(1, None, None);
    let mut cfg = Config::new(thesis_groups());
    cfg.log_memory = 16;
    cfg.schedule = vec![(When::Quiescent, Event::Fail(vec![1])), (When::After(0), Event::OpenGate)];
    for seed in 0..SEEDS {
        let r = run(&program, &with_seed(&cfg, seed));
        assert!(r.stats.max_spilled > 0);
        assert_eq!(r.count(|t| matches!(t, Trace::Replay { id, .. } if *id == M7)), 1);
    }
}

/// The ring stencil of `examples/ft_stencil.rs` (each iteration: send left, send right, receive from left, receive
/// from right), 8 ranks in 4 groups of 2, every group checkpointing now and then, and failures in sequence, each
/// while the groups restarted before are still re-executing or have just caught up.
fn stencil_program(ranks: u32, iterations: u32) -> Program {
    let mut scripts = vec![Vec::new(); ranks as usize];
    for (r, s) in scripts.iter_mut().enumerate() {
        let r = r as u32;
        let (left, right) = ((r + ranks - 1) % ranks, (r + 1) % ranks);
        for _ in 0..iterations {
            s.push(Op::Send(left));
            s.push(Op::Send(right));
            s.push(Op::Recv(vec![left]));
            s.push(Op::Recv(vec![right]));
        }
    }
    Program { scripts }
}

fn stencil_runs(nonblocking: bool) -> (u64, Option<String>) {
    let program = stencil_program(8, 40);
    let groups = vec![0, 0, 1, 1, 2, 2, 3, 3];
    let mut failed = 0;
    let mut first = None;
    for seed in 0..SEEDS {
        let mut cfg = Config::new(groups.clone());
        cfg.seed = seed;
        cfg.nonblocking_sends = nonblocking;
        let gap = 40 + (seed % 7) * 30;
        let ckpt = seed % 3 == 0;
        let mut schedule = Vec::new();
        for g in [2, 0, 1] {
            if ckpt {
                for h in 0..4 {
                    schedule.push((When::After(5), Event::Checkpoint(h)));
                }
            }
            schedule.push((When::After(gap), Event::Fail(vec![g])));
        }
        cfg.schedule = schedule;
        if let Err(e) = Sim::new(program.clone(), cfg).and_then(Sim::run) {
            failed += 1;
            first.get_or_insert(format!("seed {seed}: {e}"));
        }
    }
    (failed, first)
}

/// Three failures in sequence on the stencil, with blocking sends and with non-blocking ones (a held send lets
/// the rank go on receiving, as `isend_raw` does in the example).
#[test]
fn stencil_sequential_failures() {
    for nonblocking in [false, true] {
        let (failed, first) = stencil_runs(nonblocking);
        assert_eq!(failed, 0, "non-blocking {nonblocking}: {failed} runs failed; first: {}", first.unwrap_or_default());
    }
}
