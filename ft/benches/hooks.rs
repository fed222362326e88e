//! Instructions per message of the failure-free HydEE hooks, counted by callgrind.
//!
//! `cargo bench -p nemesis-ft --bench hooks` runs this binary, which re-runs itself under
//! `valgrind --tool=callgrind --toggle-collect=<measured function>` once per case, reads the instruction total from
//! callgrind's output, subtracts an empty loop of the same length, divides by the number of messages and prints:
//!
//! ```text
//! ft-intra-group <n>                on_send + on_receive + on_deliver, sender and receiver in the same group
//! ft-inter-group <n>                on_send + SenderLog::append of an 8-byte payload + on_receive + on_deliver,
//!                                   different groups, the sender's phase steady (a stream)
//! ft-inter-group-hooks <n>          the same loop without the append: the hooks alone
//! ft-log-copy <n>                   the difference: the "one copy into the log" of 8 bytes
//! ft-inter-group-1k <n>             ft-inter-group with a 1 KiB payload
//! ft-log-copy-1k <n>                its difference with ft-inter-group-hooks: the copy of 1 KiB
//! ft-inter-group-exchange-hooks <n> the hooks of a ping-pong across groups, no log: every delivery raises the
//!                                   phase, so no message extends its RPP run on the fast path
//! ft-inter-group-stamped <n>        ft-inter-group with stamps: the digest of an 8-byte envelope and the payload,
//!                                   on_send_stamped, SenderLog::append_stamped, on_receive_stamped (no digest
//!                                   at the receiver) + on_deliver
//! ft-stamp <n>                      the difference with ft-inter-group: what stamping adds per message
//! ft-digest-1k <n>                  the digest alone of an 8-byte envelope and a 1 KiB payload
//! ```
//!
//! Each case sends its messages after a warm-up with the same payload that grows every buffer to its steady-state
//! capacity and then empties it as a checkpoint and an acknowledgement would, so the measured loop allocates
//! nothing. The payload slice goes through `black_box` once, before the loop: its address and length are opaque
//! to the compiler, as a transport's would be, without a per-message cost that is the bench's own.

use std::hint::black_box;
use std::process::Command;
use std::sync::Arc;

use nemesis_ft::digest::digest;
use nemesis_ft::{
    Action, Endpoint, Error, LogConfig, Outbound, Process, ProcessConfig, Reception, SenderLog, Topology,
};

/// The envelope a transport hashes in front of the payload (tag and context).
const ENVELOPE: [u8; 8] = [7, 0, 0, 0, 1, 0, 0, 0];

const MESSAGES: u64 = 100_000;
/// Payload sizes measured: 8 bytes and 1 KiB.
const SMALL: usize = 8;
const LARGE: usize = 1024;
/// The 1 KiB cases send fewer messages: the warm-up's log holds them all before the acknowledgement.
const LARGE_MESSAGES: u64 = 20_000;
/// Ranks 0 and 1 share group 0, rank 2 is alone in group 1.
const SENDER: u32 = 0;
const SAME_GROUP: u32 = 1;
const OTHER_GROUP: u32 = 2;

struct Setup {
    sender: Process,
    same: Process,
    other: Process,
    log: SenderLog,
}

fn setup(payload: &[u8], n: u64) -> Setup {
    let topo = Arc::new(Topology::new(vec![0, 0, 1]).expect("topology"));
    let p = |r| Process::new(topo.clone(), r, ProcessConfig::default()).expect("process");
    let mut s = Setup {
        sender: p(SENDER),
        same: p(SAME_GROUP),
        other: p(OTHER_GROUP),
        log: SenderLog::new(3, LogConfig { memory_limit: usize::MAX, spill_dir: None, spill_limit: None }),
    };
    // Warm-up: grow the receiver's RPP and the log to capacity, then empty both the way the protocol does.
    warm_up(&mut s, payload, n).expect("warm-up");
    s.sender.checkpoint().expect("checkpoint");
    s.sender.checkpoint_durable(&s.log).expect("durable");
    while let Some(action) = s.sender.poll_action() {
        if let Action::Control { to: Endpoint::Process(OTHER_GROUP), msg } = action {
            s.other.on_control(Endpoint::Process(SENDER), msg, &s.log).expect("control");
        }
    }
    assert!(s.other.received_from(SENDER).is_empty(), "warm-up RPP entries pruned");
    s.log.discard_before(OTHER_GROUP, s.sender.date() + 1);
    assert_eq!(s.log.len(OTHER_GROUP), 0);
    s
}

/// The loops are written as a transport would call the hooks: errors propagate with `?`.
#[inline(always)]
fn intra_loop(sender: &mut Process, receiver: &mut Process, n: u64) -> Result<u64, Error> {
    let mut delivered = 0;
    for _ in 0..n {
        let Outbound::Transmit { piggyback, log: false } = sender.on_send(SAME_GROUP)? else {
            break;
        };
        if let Reception::Deliver(d) = receiver.on_receive(SENDER, piggyback)? {
            receiver.on_deliver(d);
            delivered += 1;
        }
    }
    Ok(delivered)
}

/// With `LOG`, the caller's copy into the sender log; without, the hooks alone.
#[inline(always)]
fn inter_loop<const LOG: bool>(
    sender: &mut Process,
    receiver: &mut Process,
    log: &mut SenderLog,
    payload: &[u8],
    n: u64,
) -> Result<u64, Error> {
    let mut delivered = 0;
    for _ in 0..n {
        let Outbound::Transmit { piggyback, log: true } = sender.on_send(OTHER_GROUP)? else {
            break;
        };
        if LOG {
            log.append(OTHER_GROUP, piggyback, payload)?;
        }
        if let Reception::Deliver(d) = receiver.on_receive(SENDER, piggyback)? {
            receiver.on_deliver(d);
            delivered += 1;
        }
    }
    Ok(delivered)
}

/// The inter-group loop with stamps: the sender hashes envelope and payload, logs the stamp with the entry, the
/// receiver checks the sequence number (not the digest: a transport may skip hashing at the receiver).
#[inline(always)]
fn stamped_loop(
    sender: &mut Process,
    receiver: &mut Process,
    log: &mut SenderLog,
    payload: &[u8],
    n: u64,
) -> Result<u64, Error> {
    let mut delivered = 0;
    for _ in 0..n {
        let (Outbound::Transmit { piggyback, log: true }, stamp) =
            sender.on_send_stamped(OTHER_GROUP, digest(&ENVELOPE, payload))?
        else {
            break;
        };
        log.append_stamped(OTHER_GROUP, piggyback, stamp, &ENVELOPE, payload)?;
        if let Reception::Deliver(d) = receiver.on_receive_stamped(SENDER, piggyback, stamp, None)? {
            receiver.on_deliver(d);
            delivered += 1;
        }
    }
    Ok(delivered)
}

/// One inter-group message, hooks only.
#[inline(always)]
fn exchange_one(sender: &mut Process, receiver: &mut Process, from: u32, to: u32) -> Result<u64, Error> {
    let Outbound::Transmit { piggyback, log: true } = sender.on_send(to)? else {
        return Ok(0);
    };
    if let Reception::Deliver(d) = receiver.on_receive(from, piggyback)? {
        receiver.on_deliver(d);
        return Ok(1);
    }
    Ok(0)
}

/// The measured cases: each a function of its own that callgrind counts (`--toggle-collect`), over the [`Setup`]
/// of one payload, `n` messages; the number delivered.
macro_rules! cases {
    ($($(#[$doc:meta])* $case:literal => fn $measure:ident($s:ident, $payload:ident, $n:ident) $body:block)*) => {
        $(
            $(#[$doc])*
            #[inline(never)]
            fn $measure($s: &mut Setup, $payload: &[u8], $n: u64) -> Result<u64, Error> {
                let _ = (&$s, $payload);
                $body
            }
        )*

        /// The function of a case (its name: what callgrind counts).
        fn measured(case: &str) -> (&'static str, fn(&mut Setup, &[u8], u64) -> Result<u64, Error>) {
            match case {
                $($case => (stringify!($measure), $measure),)*
                other => panic!("unknown case {other}"),
            }
        }
    };
}

cases! {
    /// The empty loop of the same length, subtracted from every other case.
    "baseline" => fn measure_baseline(s, payload, n) {
        let mut count = 0;
        for _ in 0..n {
            black_box(&mut s.sender);
            black_box(&mut s.same);
            count += 1;
        }
        Ok(count)
    }
    "intra" => fn measure_intra(s, payload, n) { intra_loop(&mut s.sender, &mut s.same, n) }
    "inter-logged" => fn measure_inter_logged(s, payload, n) {
        inter_loop::<true>(&mut s.sender, &mut s.other, &mut s.log, payload, n)
    }
    "inter-hooks" => fn measure_inter_hooks(s, payload, n) {
        inter_loop::<false>(&mut s.sender, &mut s.other, &mut s.log, payload, n)
    }
    /// A ping-pong between ranks of two groups, `n` messages in all (each way in turn), hooks only: each delivery
    /// raises the receiver's phase past the sender's, so the phases of a sender's messages rise by two each time.
    "inter-exchange" => fn measure_inter_exchange(s, payload, n) {
        let mut delivered = 0;
        for _ in 0..n / 2 {
            delivered += exchange_one(&mut s.sender, &mut s.other, SENDER, OTHER_GROUP)?;
            delivered += exchange_one(&mut s.other, &mut s.sender, OTHER_GROUP, SENDER)?;
        }
        Ok(delivered)
    }
    "inter-stamped" => fn measure_inter_stamped(s, payload, n) {
        stamped_loop(&mut s.sender, &mut s.other, &mut s.log, payload, n)
    }
    "digest" => fn measure_digest(s, payload, n) {
        let mut acc = 0u64;
        for _ in 0..n {
            acc = acc.wrapping_add(digest(&ENVELOPE, black_box(payload)));
        }
        black_box(acc);
        Ok(n)
    }
}

#[inline(never)]
fn warm_up(s: &mut Setup, payload: &[u8], n: u64) -> Result<(), Error> {
    inter_loop::<true>(&mut s.sender, &mut s.other, &mut s.log, payload, n)?;
    // Stamped too: the receiver's record of stamps grows to its steady capacity.
    stamped_loop(&mut s.sender, &mut s.other, &mut s.log, payload, n)?;
    intra_loop(&mut s.sender, &mut s.same, n)?;
    Ok(())
}

/// Runs one case natively (under callgrind when the parent started us).
fn child(case: &str, len: usize) {
    let buffer = vec![0x5au8; len];
    let n = messages(len);
    // Opaque to the compiler from here on, as a transport's payload would be; no per-message cost.
    let payload: &[u8] = black_box(&buffer[..]);
    let mut s = setup(payload, n);
    let done = measured(case).1(&mut s, payload, n);
    assert_eq!(done.expect("hooks"), n, "every message of case {case} was delivered");
}

/// Messages per case for a payload of `len` bytes.
fn messages(len: usize) -> u64 {
    if len > SMALL { LARGE_MESSAGES } else { MESSAGES }
}

/// Instructions callgrind counted inside `function` while running `case` with a payload of `len` bytes.
fn count(case: &str, function: &str, len: usize) -> Result<u64, String> {
    let exe = std::env::current_exe().map_err(|e| e.to_string())?;
    let out = std::env::temp_dir().join(format!("nemesis-ft-hooks-{}-{case}-{len}.callgrind", std::process::id()));
    let status = Command::new("valgrind")
        .arg("--tool=callgrind")
        .arg(format!("--callgrind-out-file={}", out.display()))
        .arg(format!("--toggle-collect=*{function}*"))
        .arg("--quiet")
        .arg(&exe)
        .args(["--child", case, &len.to_string()])
        .status()
        .map_err(|e| format!("cannot run valgrind: {e}"))?;
    if !status.success() {
        return Err(format!("callgrind run of {case} failed: {status}"));
    }
    let text = std::fs::read_to_string(&out).map_err(|e| e.to_string())?;
    let _ = std::fs::remove_file(&out);
    text.lines()
        .find_map(|l| l.strip_prefix("totals:").or_else(|| l.strip_prefix("summary:")))
        .and_then(|t| t.split_whitespace().next())
        .and_then(|t| t.parse().ok())
        .ok_or_else(|| format!("no instruction total in callgrind output for {case}"))
}

/// The printed lines, in order: a label, the case and payload measured, and what is subtracted from it (the empty
/// loop, or another case: the difference is what the first adds).
type Measured = (&'static str, usize);
const LINES: &[(&str, Measured, Option<Measured>)] = &[
    ("ft-intra-group", ("intra", SMALL), None),
    ("ft-inter-group", ("inter-logged", SMALL), None),
    ("ft-inter-group-hooks", ("inter-hooks", SMALL), None),
    ("ft-log-copy", ("inter-logged", SMALL), Some(("inter-hooks", SMALL))),
    ("ft-inter-group-1k", ("inter-logged", LARGE), None),
    ("ft-log-copy-1k", ("inter-logged", LARGE), Some(("inter-hooks", SMALL))),
    ("ft-inter-group-exchange-hooks", ("inter-exchange", SMALL), None),
    ("ft-inter-group-stamped", ("inter-stamped", SMALL), None),
    ("ft-stamp", ("inter-stamped", SMALL), Some(("inter-logged", SMALL))),
    ("ft-digest-1k", ("digest", LARGE), None),
];

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if let Some(i) = args.iter().position(|a| a == "--child") {
        let len = args.get(i + 2).and_then(|l| l.parse().ok()).unwrap_or(SMALL);
        child(args.get(i + 1).map(String::as_str).unwrap_or(""), len);
        return;
    }
    if Command::new("valgrind").arg("--version").output().is_err() {
        eprintln!("hooks: valgrind not found; install it (Debian: apt-get install valgrind) to count instructions");
        return;
    }
    let run = || -> Result<(), String> {
        let mut counted = std::collections::BTreeMap::new();
        let mut per = |(case, len): (&'static str, usize)| -> Result<f64, String> {
            if let Some(&v) = counted.get(&(case, len)) {
                return Ok(v);
            }
            let v = count(case, measured(case).0, len)? as f64 / messages(len) as f64;
            counted.insert((case, len), v);
            Ok(v)
        };
        // The empty loop's cost per message (the same for every payload size).
        let baseline = per(("baseline", SMALL))?;
        for &(label, case, minus) in LINES {
            let v = per(case)? - minus.map_or(Ok(baseline), &mut per)?;
            println!("{label} {v:.1}");
        }
        Ok(())
    };
    if let Err(e) = run() {
        eprintln!("hooks: {e}");
        std::process::exit(1);
    }
}
