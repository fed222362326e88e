use super::*;

/// Two jobs' secrets, made once.
fn secret(job: usize) -> JobSecret {
    static S: std::sync::OnceLock<[JobSecret; 2]> = std::sync::OnceLock::new();
    S.get_or_init(|| [JobSecret::generate().unwrap(), JobSecret::generate().unwrap()])[job % 2].clone()
}

fn me(rank: u32, job: usize) -> Identity {
    Identity::new(rank, secret(job))
}

#[test]
fn heard_peers_stay_fresh_and_a_stopped_one_goes_silent() {
    let ip = "127.0.0.1".parse().unwrap();
    let period = Duration::from_millis(20);
    let a = Heartbeat::start(ip, me(0, 9), period).unwrap();
    let b = Heartbeat::start(ip, me(1, 9), period).unwrap();
    a.watch(1, SocketAddr::new(ip, b.port()));
    b.watch(0, SocketAddr::new(ip, a.port()));
    std::thread::sleep(period * 15);
    assert!(a.silent(period * 10).is_empty(), "b beats");
    drop(b);
    let t0 = Instant::now();
    while a.silent(period * 10).is_empty() {
        assert!(t0.elapsed() < Duration::from_secs(30), "b never went silent");
        std::thread::sleep(period);
    }
    assert_eq!(a.silent(period * 10)[0].0, 1);
    // Another job's heartbeats do not count.
    let c = Heartbeat::start(ip, me(1, 10), period).unwrap();
    c.watch(0, SocketAddr::new(ip, a.port()));
    std::thread::sleep(period * 15);
    assert_eq!(a.silent(period * 10).len(), 1);
}

#[test]
fn datagrams_of_other_jobs_and_junk_do_not_open() {
    let (a, b) = (me(3, 7), me(4, 7));
    assert_eq!(b.open(&a.seal(5)), Some((3, 5)));
    assert_eq!(me(4, 8).open(&a.seal(5)), None);
    assert_eq!(b.open(&a.seal(5)[..15]), None);
    let mut bad = a.seal(5);
    bad[0] ^= 1;
    assert_eq!(b.open(&bad), None);
}

#[test]
fn forged_and_replayed_heartbeats_do_not_keep_a_peer_alive() {
    let ip: std::net::IpAddr = "127.0.0.1".parse().unwrap();
    let period = Duration::from_millis(20);
    let a = Heartbeat::start(ip, me(0, 1), period).unwrap();
    let b = Heartbeat::start(ip, me(1, 1), period).unwrap();
    a.watch(1, SocketAddr::new(ip, b.port()));
    std::thread::sleep(period * 5);
    assert!(a.silent(period * 10).is_empty(), "b beats");
    let b_port = b.port();
    drop(b);
    // From b's own address (its port, free again), then from elsewhere: a datagram of another
    // job claiming rank 1, rank 1's datagrams with an old sequence number (replayed), and a
    // valid one from another address. None counts: a goes on finding b silent.
    let at_b = UdpSocket::bind((ip, b_port)).unwrap();
    let elsewhere = UdpSocket::bind((ip, 0)).unwrap();
    let to_a = SocketAddr::new(ip, a.port());
    let old = me(1, 1).seal(1);
    let t0 = Instant::now();
    while t0.elapsed() < period * 30 {
        let _ = at_b.send_to(&me(1, 2).seal(first_beat_seq() * 2), to_a);
        let _ = at_b.send_to(&old, to_a);
        let _ = elsewhere.send_to(&me(1, 1).seal(first_beat_seq() * 2), to_a);
        std::thread::sleep(period / 4);
    }
    assert_eq!(a.silent(period * 10).first().map(|s| s.0), Some(1), "b is found silent all the same");
    // A datagram sealed with the secret, from b's address, above the last sequence: counts.
    let _ = at_b.send_to(&me(1, 1).seal(first_beat_seq() * 2), to_a);
    std::thread::sleep(period * 3);
    assert!(a.silent(period * 10).is_empty(), "a genuine heartbeat refreshes");
}

#[test]
fn timing_from_the_environment() {
    // Variables no other test sets.
    // SAFETY: this test alone touches these names.
    unsafe {
        std::env::set_var("NEMESIS_HBT_P", "40");
        std::env::remove_var("NEMESIS_HBT_T");
    }
    let t = Timing::from_env("NEMESIS_HBT_P", "NEMESIS_HBT_T").unwrap();
    assert_eq!((t.period, t.timeout), (Duration::from_millis(40), Duration::from_millis(400)));
    assert_eq!(t.detection_bound(), Duration::from_millis(440));
    // SAFETY: as above.
    unsafe { std::env::set_var("NEMESIS_HBT_T", "50") };
    assert!(Timing::from_env("NEMESIS_HBT_P", "NEMESIS_HBT_T").is_err(), "less than two periods");
    // SAFETY: as above.
    unsafe { std::env::set_var("NEMESIS_HBT_P", "x") };
    assert!(Timing::from_env("NEMESIS_HBT_P", "NEMESIS_HBT_T").is_err());
    assert_eq!(Timing::from_env("NEMESIS_HBT_NONE", "NEMESIS_HBT_NONE2").unwrap(), Timing::default());
}
