//! Deaths at precise instructions (`nemesis_shm::failpoint`, cargo feature `failpoints`): a rank
//! stops for good between a queue's tail swap and its link, before its swap, inside a dequeue, in
//! the middle of draining a dead rank's queue, of a multi-cell message, of a rendezvous; the
//! survivors recover (under `nemesis-run --keep-going`). Each test passes only if the death landed
//! where it was meant to: the failpoint records `hit <point> <pid>` before the SIGKILL, and each
//! rank prints its pid first.
//!
//! `cargo test -p nemesis --features failpoints --test failpoints`.

mod common;

use std::time::{Duration, Instant};

use common::{Rng, job, results, show};
use nemesis::{Endpoint, Error, WORLD};
use nemesis_shm::Node;
use nemesis_shm::failpoint::{Action, arm};

fn main() {
    common::harness::main(
        rank_main,
        tests![
            sender_dies_between_swap_and_link,
            sender_dies_before_its_swap,
            receiver_dies_inside_a_dequeue,
            drainer_dies_in_the_middle_of_a_drain,
            sender_dies_in_the_middle_of_a_multi_cell_message,
            rendezvous_loses_a_side_in_the_middle,
        ],
    );
}

/// The rank program, by `NEMESIS_TEST_ROLE`.
fn rank_main() {
    match std::env::var("NEMESIS_TEST_ROLE").unwrap_or_default().as_str() {
        "two-senders" => two_senders(),
        "dead-receiver" => dead_receiver(),
        "partial" => partial(),
        "rendezvous" => rendezvous(),
        other => panic!("unknown role {other:?}"),
    }
}

/// Inits, prints this rank's pid, and arms the failpoints the test gave this rank
/// (`NEMESIS_FP=<rank>:<point>:<nth>,...`).
fn init() -> Endpoint {
    let ep = Endpoint::init().unwrap();
    println!("RESULT pid {} {}", ep.rank(), std::process::id());
    let record = std::path::PathBuf::from(std::env::var("NEMESIS_FP_FILE").unwrap());
    for spec in std::env::var("NEMESIS_FP").unwrap_or_default().split(',').filter(|s| !s.is_empty()) {
        let v: Vec<&str> = spec.split(':').collect();
        if v[0].parse::<u32>().unwrap() == ep.rank() {
            arm(v[1], v[2].parse().unwrap(), Action::Kill, &record);
        }
    }
    ep
}

fn payload(src: u32, i: u32, len: usize) -> Vec<u8> {
    let mut v = vec![0u8; len];
    Rng::new(u64::from(src) << 32 | u64::from(i)).fill(&mut v);
    v
}

/// Cells of this rank back in its free queue.
fn free_cells(ep: &Endpoint) -> usize {
    let l = ep.local_ranks().iter().position(|&r| r == ep.rank()).unwrap() as u16;
    ep.segment().free_queue(l).count_linked().unwrap()
}

/// Longest a rank waits for another's step (a death, a report): only a bound on a failure.
const BOUND: Duration = Duration::from_secs(120);

/// Calls progress until all `want` cells of this rank are home (or [`BOUND`] passes).
fn wait_all_cells_home(ep: &mut Endpoint, want: usize) -> usize {
    let deadline = Instant::now() + BOUND;
    loop {
        let _ = ep.progress();
        let free = free_cells(ep);
        if free == want || Instant::now() > deadline {
            return free;
        }
        std::thread::sleep(Duration::from_millis(2));
    }
}

/// Waits until the record file has a hit of `point` (or [`BOUND`] passes).
fn wait_for_hit(point: &str) -> bool {
    let file = std::env::var("NEMESIS_FP_FILE").unwrap();
    wait_for(|| std::fs::read_to_string(&file).is_ok_and(|s| s.contains(&format!("hit {point} "))))
}

/// Polls `f` (without progress) until it holds (or [`BOUND`] passes).
fn wait_for(f: impl Fn() -> bool) -> bool {
    let deadline = Instant::now() + BOUND;
    while Instant::now() < deadline {
        if f() {
            return true;
        }
        std::thread::sleep(Duration::from_millis(5));
    }
    false
}

/// The file by which a rank reports a step to the others (beside the record file).
fn report_file(what: &str) -> std::path::PathBuf {
    std::path::Path::new(&std::env::var("NEMESIS_FP_FILE").unwrap()).with_file_name(format!("report-{what}"))
}

/// Reports step `what` to the other ranks.
fn report(what: &str) {
    std::fs::write(report_file(what), "").unwrap();
}

const TWO_SENDERS_COUNT: u32 = 200;

/// Messages of rank 1's in rank 0's queue before rank 0 dies (fewer than a pool's cells: the
/// sends complete while rank 0 receives nothing).
const DEAD_RECEIVER_REPORT: u32 = 20;

/// Ranks 1 and 2 send 1000-byte messages (cells, never fastboxes) to rank 0; rank 1 may die in
/// the middle. Rank 0 receives all of rank 2's, then rank 1's until `PeerDied`, checking every
/// byte, and prints how many of rank 1's it got.
fn two_senders() {
    let mut ep = init();
    let me = ep.rank();
    if me == 0 {
        let mut buf = vec![0u8; 1000];
        for i in 0..TWO_SENDERS_COUNT {
            let st = ep.recv(&mut buf, 2, i as i32, WORLD).unwrap();
            assert!(buf[..st.len] == payload(2, i, 1000)[..], "rank 2 #{i}");
        }
        let mut got = 0;
        loop {
            match ep.recv(&mut buf, 1, got as i32, WORLD) {
                Ok(st) => {
                    assert!(buf[..st.len] == payload(1, got, 1000)[..], "rank 1 #{got}");
                    got += 1;
                }
                Err(Error::PeerDied { rank: 1 }) => break,
                Err(e) => panic!("{e}"),
            }
        }
        println!("RESULT rank 0 got {got} from rank 1");
    } else {
        for i in 0..TWO_SENDERS_COUNT {
            ep.send(&payload(me, i, 1000), 0, i as i32, WORLD).unwrap();
        }
    }
    ep.finalize().unwrap();
}

/// Parses the record: `(point, pid)` of every hit.
fn hits(file: &std::path::Path) -> Vec<(String, u32)> {
    std::fs::read_to_string(file)
        .unwrap_or_default()
        .lines()
        .filter_map(|l| {
            let v: Vec<&str> = l.split_whitespace().collect();
            (v.len() == 3 && v[0] == "hit").then(|| (v[1].to_owned(), v[2].parse().unwrap()))
        })
        .collect()
}

/// The pid rank `r` printed.
fn pid_of(o: &std::process::Output, r: u32) -> u32 {
    let want = format!("RESULT pid {r} ");
    results(o).iter().find_map(|l| l.strip_prefix(&want).map(|p| p.parse().unwrap())).expect("the rank's pid")
}

/// Runs `role` on `n` ranks under `--keep-going` with failpoints `fp`; returns the output and the
/// hits recorded.
fn run(n: u32, role: &str, fp: &str, env: &[(&str, String)]) -> (std::process::Output, Vec<(String, u32)>) {
    let dir = std::env::temp_dir().join(format!("nemesis-fp-{}-{role}-{}", std::process::id(), fp.replace(':', "_")));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("record");
    let mut env: Vec<(&str, String)> = env.to_vec();
    env.push(("NEMESIS_FP", fp.to_owned()));
    env.push(("NEMESIS_FP_FILE", file.to_string_lossy().into_owned()));
    let o = job(n, &["--keep-going"], role, &env);
    let h = hits(&file);
    let _ = std::fs::remove_dir_all(&dir);
    (o, h)
}

/// A sender dies between its tail swap and its link, with another sender linking behind it: the
/// receiver links the dead sender's cell itself, so the message it swapped in (its 50th) is
/// delivered, and nothing of the other sender is stuck behind it.
fn sender_dies_between_swap_and_link() {
    let (o, h) = run(3, "two-senders", "1:send-after-swap:50", &[]);
    assert_eq!(h, vec![("send-after-swap".to_owned(), pid_of(&o, 1))], "{}", show(&o));
    assert!(results(&o).contains(&"RESULT rank 0 got 50 from rank 1".to_owned()), "{}", show(&o));
}

/// A sender dies after writing its enqueue records and before its swap: its 50th message is in
/// nobody's queue and is not delivered; the first 49 are.
fn sender_dies_before_its_swap() {
    let (o, h) = run(3, "two-senders", "1:enqueue-before-swap:50", &[]);
    assert_eq!(h, vec![("enqueue-before-swap".to_owned(), pid_of(&o, 1))], "{}", show(&o));
    assert!(results(&o).contains(&"RESULT rank 0 got 49 from rank 1".to_owned()), "{}", show(&o));
}

/// Rank 0 waits until ranks 1 and 2 have put messages in its queue (rank 2 all of its 10, rank 1
/// [`DEAD_RECEIVER_REPORT`] of its stream: they say so), then dies in its first dequeue (at the
/// failpoint the test arms). Rank 1 sends until `PeerDied`; one of them drains rank 0's queue;
/// each gets every cell of its pool back. With a second failpoint, rank 1 dies in the
/// middle of that drain, and rank 2, which waits for that death before it looks at its peers,
/// finishes the drain.
fn dead_receiver() {
    let mut ep = init();
    let me = ep.rank();
    let pool = ep.segment().params().cells_per_rank as usize;
    match me {
        0 => {
            // Not on a clock: a rank slow to start would find its peer already dead.
            let reported = |w: &str| report_file(w).exists();
            assert!(wait_for(|| reported("rank-1-sent") && reported("rank-2-sent")), "ranks 1 and 2 never sent");
            let mut buf = vec![0u8; 1000];
            let _ = ep.recv(&mut buf, 1, 0, WORLD);
            panic!("rank 0 should have died in its first dequeue");
        }
        1 => {
            let mut sent = 0;
            loop {
                match ep.send(&payload(1, sent, 1000), 0, sent as i32, WORLD) {
                    Ok(()) => {
                        sent += 1;
                        if sent == DEAD_RECEIVER_REPORT {
                            report("rank-1-sent");
                        }
                    }
                    Err(Error::PeerDied { rank: 0 }) => break,
                    Err(e) => panic!("{e}"),
                }
            }
            let free = wait_all_cells_home(&mut ep, pool);
            println!("RESULT rank 1 sent {sent}, {free} of {pool} cells home");
        }
        _ => {
            for i in 0..10 {
                ep.send(&payload(2, i, 1000), 0, i as i32, WORLD).unwrap();
            }
            report("rank-2-sent");
            if std::env::var("NEMESIS_FP").unwrap().contains("drain-mid") {
                assert!(wait_for_hit("drain-mid"), "rank 1 never died mid-drain");
            }
            let free = wait_all_cells_home(&mut ep, pool);
            println!("RESULT rank 2 {free} of {pool} cells home");
        }
    }
    let _ = ep.finalize();
}

/// The receiver dies with a cell in its shadow head and `head` not yet cleared (inside `peek`):
/// the drain takes that cell once; both senders get every cell back.
fn receiver_dies_inside_a_dequeue() {
    for point in ["dequeue-mid-peek", "dequeue-before-pop"] {
        let (o, h) = run(3, "dead-receiver", &format!("0:{point}:1"), &[]);
        assert_eq!(h, vec![(point.to_owned(), pid_of(&o, 0))], "{}", show(&o));
        let r = results(&o);
        assert!(
            r.iter().any(|l| l.starts_with("RESULT rank 1 sent") && l.ends_with("64 of 64 cells home")),
            "{}",
            show(&o)
        );
        assert!(r.contains(&"RESULT rank 2 64 of 64 cells home".to_owned()), "{}", show(&o));
    }
}

/// The receiver dies inside a dequeue, the first drainer of its queue dies in the middle of the
/// drain (a cell taken out, not returned): the second survivor finishes the drain and gets all its
/// cells back, including the one in the dead drainer's hands.
fn drainer_dies_in_the_middle_of_a_drain() {
    let (o, h) = run(3, "dead-receiver", "0:dequeue-before-pop:1,1:drain-mid:1", &[]);
    let want = vec![("dequeue-before-pop".to_owned(), pid_of(&o, 0)), ("drain-mid".to_owned(), pid_of(&o, 1))];
    assert_eq!(h, want, "{}", show(&o));
    assert!(results(&o).contains(&"RESULT rank 2 64 of 64 cells home".to_owned()), "{}", show(&o));
}

const PARTIAL_LEN: usize = 100_000;

/// Rank 1 sends a small message, then a 100 KB one in cells (a blocking send goes eagerly), and
/// dies after its third fragment. Rank 0 looks only after the death (a lagging receiver): the
/// small message is delivered, the large one fails with `PeerDied` and is never delivered in
/// part; a message from rank 2 still arrives.
fn partial() {
    let mut ep = init();
    match ep.rank() {
        0 => {
            assert!(wait_for_hit("send-mid-message"), "rank 1 never died");
            let mut buf = vec![0u8; PARTIAL_LEN];
            let st = ep.recv(&mut buf, 1, 0, WORLD).unwrap();
            assert!(buf[..st.len] == payload(1, 0, 1000)[..]);
            buf.fill(0xEE);
            match ep.recv(&mut buf, 1, 1, WORLD) {
                Err(Error::PeerDied { rank: 1 }) => {}
                other => panic!("the partial message: {other:?}"),
            }
            let st = ep.recv(&mut buf, 2, 2, WORLD).unwrap();
            assert!(buf[..st.len] == payload(2, 2, 500)[..]);
            println!("RESULT rank 0 ok");
        }
        1 => {
            ep.send(&payload(1, 0, 1000), 0, 0, WORLD).unwrap();
            ep.send(&payload(1, 1, PARTIAL_LEN), 0, 1, WORLD).unwrap();
            panic!("rank 1 should have died in the middle of its message");
        }
        _ => ep.send(&payload(2, 2, 500), 0, 2, WORLD).unwrap(),
    }
    let _ = ep.finalize();
}

/// A sender dies in the middle of a multi-cell message; the receiver, looking only afterwards,
/// never delivers part of it.
fn sender_dies_in_the_middle_of_a_multi_cell_message() {
    let (o, h) = run(3, "partial", "1:send-mid-message:3", &[]);
    assert_eq!(h, vec![("send-mid-message".to_owned(), pid_of(&o, 1))], "{}", show(&o));
    assert!(results(&o).contains(&"RESULT rank 0 ok".to_owned()), "{}", show(&o));
}

const RDV_LEN: usize = 4 << 20;

/// Rank 1 sends 4 MiB to rank 0 by rendezvous through the shared-copy rings, then rank 2 does.
/// With the failpoint on rank 1 (the sender dies mid-transfer) rank 0's receive fails with
/// `PeerDied` and rank 2's message still arrives whole; on rank 0 (the receiver dies), rank 1's
/// send fails with `PeerDied`.
fn rendezvous() {
    let mut ep = init();
    let me = ep.rank();
    let victim: u32 = std::env::var("NEMESIS_FP").unwrap()[..1].parse().unwrap();
    match me {
        0 => {
            let mut buf = vec![0u8; RDV_LEN];
            match ep.recv(&mut buf, 1, 0, WORLD) {
                Err(Error::PeerDied { rank: 1 }) if victim == 1 => {}
                other => panic!("rank 1's message: {other:?}"),
            }
            let st = ep.recv(&mut buf, 2, 0, WORLD).unwrap();
            assert!(buf[..st.len] == payload(2, 0, RDV_LEN)[..], "rank 2's message");
            println!("RESULT rank 0 ok");
        }
        1 => match ep.send(&payload(1, 0, RDV_LEN), 0, 0, WORLD) {
            Err(Error::PeerDied { rank: 0 }) if victim == 0 => println!("RESULT rank 1 ok"),
            other => panic!("rank 1's send: {other:?}"),
        },
        _ => {
            if victim == 1 {
                assert!(wait_for_hit("rendezvous-mid"));
            }
            match ep.send(&payload(2, 0, RDV_LEN), 0, 0, WORLD) {
                Ok(()) if victim == 1 => {}
                Err(Error::PeerDied { rank: 0 }) if victim == 0 => {}
                other => panic!("rank 2's send: {other:?}"),
            }
            println!("RESULT rank 2 ok");
        }
    }
    let _ = ep.finalize();
}

/// A rendezvous through the copy rings loses its sender, or its receiver, in the middle of the
/// copy: the survivor's request fails with `PeerDied`, and the rings serve the next transfer.
fn rendezvous_loses_a_side_in_the_middle() {
    let env = [
        ("NEMESIS_LMT", "shm".to_owned()),
        ("NEMESIS_EAGER_MAX", "16K".to_owned()),
        ("NEMESIS_EAGER_BLOCKING_MAX", "16K".to_owned()),
    ];
    let (o, h) = run(3, "rendezvous", "1:rendezvous-mid:3", &env);
    assert_eq!(h, vec![("rendezvous-mid".to_owned(), pid_of(&o, 1))], "{}", show(&o));
    let r = results(&o);
    assert!(r.contains(&"RESULT rank 0 ok".to_owned()) && r.contains(&"RESULT rank 2 ok".to_owned()), "{}", show(&o));
    let (o, h) = run(3, "rendezvous", "0:rendezvous-mid:3", &env);
    assert_eq!(h, vec![("rendezvous-mid".to_owned(), pid_of(&o, 0))], "{}", show(&o));
    let r = results(&o);
    assert!(r.contains(&"RESULT rank 1 ok".to_owned()) && r.contains(&"RESULT rank 2 ok".to_owned()), "{}", show(&o));
}
