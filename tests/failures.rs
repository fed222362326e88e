//! Failures and bounds of the Endpoint across real processes under `nemesis-run`: the memory of
//! unexpected messages is bounded and a flooding sender is slowed down rather than buffered
//! without end, while other senders go on.
//!
//! The test binary is itself the rank program (`rank_main`, role in `NEMESIS_TEST_ROLE`).

mod common;

use std::time::{Duration, Instant};

use common::{Rng, job, results, show};
use nemesis::{Endpoint, WORLD};

fn main() {
    common::harness::main(rank_main, tests![unexpected_messages_are_bounded_by_back_pressure]);
}

/// The rank program, by `NEMESIS_TEST_ROLE`.
fn rank_main() {
    match std::env::var("NEMESIS_TEST_ROLE").unwrap_or_default().as_str() {
        "flood" => flood(),
        other => panic!("unknown role {other:?}"),
    }
}

// ---------------------------------------------------------------------------------------------
// Back-pressure on unexpected messages.

/// Bound on unexpected bytes in the flood test.
const FLOOD_MAX: usize = 256 * 1024;
/// Messages rank 1 floods rank 0 with, and their sizes (a fastbox message, one cell, several).
const FLOOD_COUNT: u32 = 60;
const FLOOD_SIZES: [usize; 3] = [64, 5000, 100_000];

fn flood_payload(i: u32) -> Vec<u8> {
    let mut v = vec![0u8; FLOOD_SIZES[i as usize % 3]];
    Rng::new(u64::from(i) + 7).fill(&mut v);
    v
}

fn flood() {
    let mut ep = Endpoint::init().unwrap();
    assert_eq!(ep.config().unexpected_max, FLOOD_MAX);
    match ep.rank() {
        0 => {
            // Another sender's messages get through while rank 1 floods.
            let mut buf = vec![0u8; 1000];
            for i in 0..10 {
                let st = ep.recv(&mut buf, 2, 1000 + i, WORLD).unwrap();
                assert_eq!(buf[..st.len], vec![i as u8; 1000][..]);
            }
            // Let rank 1 flood us while nothing is received from it.
            let mut peak = 0;
            let until = Instant::now() + Duration::from_millis(500);
            while Instant::now() < until {
                ep.progress().unwrap();
                peak = peak.max(ep.unexpected_bytes());
                std::thread::sleep(Duration::from_millis(1));
            }
            let last_arrived = ep.iprobe(1, FLOOD_COUNT as i32 - 1, WORLD).unwrap().is_some();
            println!("RESULT peak {peak} last-arrived {last_arrived}");
            // Everything comes, in order, intact.
            let mut buf = vec![0u8; 100_000];
            for i in 0..FLOOD_COUNT {
                let st = ep.recv(&mut buf, 1, i as i32, WORLD).unwrap();
                assert!(buf[..st.len] == flood_payload(i)[..], "message {i}");
                peak = peak.max(ep.unexpected_bytes());
            }
            println!("RESULT received all, peak {peak}, left {}", ep.unexpected_bytes());
        }
        1 => {
            for i in 0..FLOOD_COUNT {
                ep.send(&flood_payload(i), 0, i as i32, WORLD).unwrap();
            }
            println!("RESULT rank 1 sent all");
        }
        _ => {
            for i in 0..10 {
                ep.send(&[i as u8; 1000], 0, 1000 + i, WORLD).unwrap();
            }
        }
    }
    ep.finalize().unwrap();
}

/// A sender floods a receiver that receives nothing from it for a while: the receiver's copies
/// of unexpected messages stay within `NEMESIS_UNEXPECTED_MAX` (plus the fastbox slots of each
/// local sender), the sender is held back (its last message has not arrived when the receiver
/// starts receiving), another sender's messages get through meanwhile, and every message of the
/// flood is then received whole and in order.
fn unexpected_messages_are_bounded_by_back_pressure() {
    let o = job(3, &[], "flood", &[("NEMESIS_UNEXPECTED_MAX", FLOOD_MAX.to_string())]);
    assert!(o.status.success(), "{}", show(&o));
    let r = results(&o);
    eprintln!("{r:?}");
    let first = r.iter().find(|l| l.starts_with("RESULT peak")).unwrap_or_else(|| panic!("{}", show(&o)));
    let peak: usize = first.split_whitespace().nth(2).unwrap().parse().unwrap();
    // Each local sender may add its fastbox slots once acknowledgements stop.
    let p = nemesis_shm::Params::DEFAULT;
    let slack = 2 * p.fastbox_slots as usize * p.fastbox_slot_size as usize;
    assert!(peak <= FLOOD_MAX + slack, "peak of {peak} unexpected bytes: {}", show(&o));
    assert!(first.ends_with("last-arrived false"), "the flood was not held back: {}", show(&o));
    assert!(r.iter().any(|l| l.starts_with("RESULT received all") && l.ends_with("left 0")), "{}", show(&o));
    assert!(r.iter().any(|l| l == "RESULT rank 1 sent all"), "{}", show(&o));
}
