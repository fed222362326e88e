//! Programs that are *not* send-deterministic, run by the simulator: the [`Stamp`](nemesis_ft::Stamp)s
//! (per-destination sequence numbers and digests) must turn every divergence that touches what a survivor already
//! received into [`SendDeterminismViolated`](nemesis_ft::Error::SendDeterminismViolated), never into a message
//! suppressed in place of another, delivered twice or dropped.
//!
//! Each scenario runs twice: with the stamped hooks, where the engine reports the violation at the first divergent
//! send, and with the unstamped ones (`Config::stamps = false`, the engine as it was: orphans recognised by
//! destination and date), where the engine lets it through and only the simulator's ground truth (which knows
//! every message's identity) sees the damage. The second run is what makes the first meaningful: the divergence
//! is real, and the digest or the sequence number is what catches it.
//!
//! Mutation check (done by hand when this was written): with the digest comparison removed from
//! `Process::regenerated_mismatch` (`ft/src/process/stamps.rs`), `swapped_payloads_to_one_destination` fails —
//! the stamped run then ends as the unstamped one does, with the wrong message suppressed.

use proptest::prelude::*;

use nemesis_ft::{DateRule, Rank};

use crate::properties::{Scenario, cases, scenario};
use crate::sim::*;

const SEEDS: u64 = 24;

fn outcome(program: &Program, cfg: &Config) -> Result<Report, String> {
    Sim::new(program.clone(), cfg.clone()).and_then(Sim::run)
}

/// The errors by which the simulator's ground truth sees the engine suppress a message in place of another or drop
/// one as a duplicate of a message the receiver never had: what must never happen silently.
///
/// Not "delivered twice": a swap of a send made before the restored checkpoint with one made after it makes the
/// application send the same content twice under two sequence numbers, which the simulator (identifying messages
/// by content) counts as a double delivery, and which nothing recorded can tell from two messages. The engine
/// delivers each sequence number once.
fn silent_damage(e: &str) -> bool {
    ["as an orphan but", "as a duplicate but never delivered"].iter().any(|s| e.contains(s))
}

/// Rank 0 (group 0) sends two messages to rank 1 (group 1); rank 1 has the first when group 0 fails, before the
/// second is sent. Re-executed, rank 0 sends them in the other order: the first send, at the orphan's date and
/// sequence number, now carries the second message.
#[test]
fn swapped_payloads_to_one_destination() {
    let program = Program {
        scripts: vec![vec![Op::Send(1), Op::Gate(1), Op::Send(1)], vec![Op::Recv(vec![0]), Op::Recv(vec![0])]],
    };
    let mut cfg = Config::new(vec![0, 1]);
    cfg.schedule = vec![(When::Quiescent, Event::Fail(vec![0])), (When::Quiescent, Event::OpenGate)];
    cfg.diverge = Some(Divergence { rank: 0, a: 0, b: 1 });
    for seed in 0..SEEDS {
        let stamped = Config { seed, ..cfg.clone() };
        let e = outcome(&program, &stamped).expect_err("the divergence must be reported");
        assert!(
            e.contains("send determinism violated: rank 0's message 1 to rank 1 (date 1)") && e.contains("digest"),
            "seed {seed}: {e}"
        );
        // Without stamps the engine suppresses the second message as if it were the first: lost.
        let unstamped = Config { stamps: false, ..stamped };
        let e = outcome(&program, &unstamped).expect_err("the divergence breaks the run");
        assert!(e.contains("suppressed (0, 1) as an orphan but rank 1 does not have it: lost"), "seed {seed}: {e}");
    }
}

/// Rank 0 sends to rank 2 (its own group) then twice to rank 1 (another group), which has both when group 0 fails.
/// Re-executed, rank 0's first send goes to rank 1 instead (with the content of its first message to rank 1): its
/// sequence number is that of an orphan rank 1 recorded at a later date.
#[test]
fn a_send_to_another_destination_first() {
    let program = Program {
        scripts: vec![
            vec![Op::Send(2), Op::Send(1), Op::Send(1)],
            vec![Op::Recv(vec![0]), Op::Recv(vec![0])],
            vec![Op::Recv(vec![0])],
        ],
    };
    let mut cfg = Config::new(vec![0, 1, 0]);
    cfg.schedule = vec![(When::Quiescent, Event::Fail(vec![0]))];
    cfg.diverge = Some(Divergence { rank: 0, a: 0, b: 1 });
    for seed in 0..SEEDS {
        let stamped = Config { seed, ..cfg.clone() };
        let e = outcome(&program, &stamped).expect_err("the divergence must be reported");
        assert!(
            e.contains("send determinism violated: rank 0's message 1 to rank 1 (date 1)")
                && e.contains("recorded at another date"),
            "seed {seed}: {e}"
        );
        // Without stamps the first send goes, and rank 1 drops it as a duplicate (its date is below the last one it
        // received); the run is stopped only by the next send, which skips the date of an orphan.
        let unstamped = Config { stamps: false, ..stamped };
        let r = outcome(&program, &unstamped).expect_err("the divergence breaks the run");
        assert!(
            r.contains("rank 0's message 1 to rank 2 (date 2) comes past the date of an orphan"),
            "seed {seed}: {r}"
        );
    }
}

/// The same program run send-deterministically (no divergence) recovers, stamped or not.
#[test]
fn the_same_programs_recover_when_deterministic() {
    let program = Program {
        scripts: vec![vec![Op::Send(1), Op::Gate(1), Op::Send(1)], vec![Op::Recv(vec![0]), Op::Recv(vec![0])]],
    };
    let mut cfg = Config::new(vec![0, 1]);
    cfg.schedule = vec![(When::Quiescent, Event::Fail(vec![0])), (When::Quiescent, Event::OpenGate)];
    for stamps in [true, false] {
        for seed in 0..SEEDS {
            let r = outcome(&program, &Config { seed, stamps, ..cfg.clone() }).unwrap_or_else(|e| panic!("{e}"));
            assert_eq!(r.stats.orphans, 1);
        }
    }
}

/// A random divergence: once `rank` rolled back, two of its sends to one destination trade places (when it has
/// two; else any two), and its group fails at least once.
fn divergent() -> impl Strategy<Value = (Scenario, Divergence)> {
    (scenario(6, 30, 2), any::<usize>(), any::<usize>(), any::<usize>(), 0u64..200).prop_map(|(mut s, m, a, b, at)| {
        let (rank, dest) = s.messages[m % s.messages.len()];
        let sends: Vec<Rank> = s.messages.iter().filter(|x| x.0 == rank).map(|x| x.1).collect();
        let to_dest: Vec<u64> = (0..sends.len() as u64).filter(|&i| sends[i as usize] == dest).collect();
        let pick = |k: usize| if to_dest.len() >= 2 { to_dest[k % to_dest.len()] } else { (k % sends.len()) as u64 };
        let d = Divergence { rank, a: pick(a), b: pick(b) };
        let group = s.groups[rank as usize];
        if !s.schedule.iter().any(|(_, e)| matches!(e, Event::Fail(g) if g.contains(&group))) {
            let i = s.schedule.partition_point(|(w, _)| matches!(w, When::Step(x) if *x <= at));
            s.schedule.insert(i, (When::Step(at), Event::Fail(vec![group])));
        }
        (s, d)
    })
}

proptest! {
    #![proptest_config(ProptestConfig { cases: cases(64), failure_persistence: None, ..ProptestConfig::default() })]

    /// Whatever the program, the failures and the two sends that trade places, a stamped run never ends with a
    /// message suppressed in place of another, delivered twice or dropped: either the engine reports the
    /// violation, or the divergence touched nothing a survivor had received (and the run ends with other
    /// results than the failure-free one, which the simulator reports, or with none at all).
    #[test]
    fn divergence_is_never_silent_damage_when_stamped((s, d) in divergent()) {
        let mut cfg = s.config(DateRule::Sends);
        cfg.diverge = Some(d);
        if let Err(e) = outcome(&s.program(), &cfg) {
            prop_assert!(!silent_damage(&e), "{e}\n{s:?}\n{d:?}");
        }
    }
}

/// The property above is not vacuous: without stamps, some of the same cases end in silent damage — and each of
/// those, stamped, is reported as a violation.
#[test]
fn without_stamps_some_divergences_do_damage() {
    let cases = crate::properties::fixed_scenarios(divergent(), 400);
    let mut damaged = 0;
    for (s, d) in &cases {
        let mut cfg = s.config(DateRule::Sends);
        cfg.diverge = Some(*d);
        let stamped = outcome(&s.program(), &cfg);
        cfg.stamps = false;
        if outcome(&s.program(), &cfg).is_err_and(|e| silent_damage(&e)) {
            damaged += 1;
            let e = stamped.expect_err("a divergence that does damage unstamped is reported stamped");
            assert!(e.contains("send determinism violated"), "{e}\n{s:?}\n{d:?}");
        }
    }
    assert!(damaged > 0, "no case of {} shows the damage stamps prevent", cases.len());
}
