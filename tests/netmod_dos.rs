//! The TCP netmod against strangers who only want to get in the way (no secret, no position on
//! the path): a thousand idle connections to a rank's listener while a job runs, a rank busy
//! computing while idle connections wait, and a flood of datagrams at a rank's heartbeat port.
//! The job finishes, the rank's descriptors stay bounded, idle connections are closed by the
//! listener on its own, and no live peer is declared dead.

use std::io::Read;
use std::net::{SocketAddr, TcpStream, UdpSocket};
use std::os::fd::FromRawFd;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use nemesis_netmod_tcp::TcpConfig;
use nemesis_shm::MsgHeader;
use nemesis_shm::auth::{BeatKey, JobSecret};
use nemesis_shm::netmod::Netmod;

#[path = "common/netrank.rs"]
mod netrank;
use netrank::{Rank, addrs, node};

const BEAT: Duration = Duration::from_millis(50);
const DEAD_AFTER: Duration = Duration::from_millis(1500);

fn cfg() -> TcpConfig {
    TcpConfig { addr: Some("127.0.0.1".parse().unwrap()), heartbeat: BEAT, timeout: DEAD_AFTER, ..TcpConfig::default() }
}

/// One test at a time: each counts the process's descriptors, and floods.
static ONE_AT_A_TIME: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn one_at_a_time() -> std::sync::MutexGuard<'static, ()> {
    ONE_AT_A_TIME.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// Descriptors open in this process.
fn fds() -> usize {
    std::fs::read_dir("/proc/self/fd").unwrap().count()
}

/// Starts `n` non-blocking connects to `to` (a stranger's: nothing is ever written on them).
fn idle_connections(to: SocketAddr, n: usize) -> Vec<TcpStream> {
    (0..n)
        .map(|_| {
            let SocketAddr::V4(v4) = to else { panic!("an IPv4 listener") };
            // SAFETY: a new socket, owned by the stream below.
            let fd = unsafe { libc::socket(libc::AF_INET, libc::SOCK_STREAM | libc::SOCK_NONBLOCK, 0) };
            assert!(fd >= 0, "socket: {}", std::io::Error::last_os_error());
            let sin = libc::sockaddr_in {
                sin_family: libc::AF_INET as libc::sa_family_t,
                sin_port: v4.port().to_be(),
                sin_addr: libc::in_addr { s_addr: u32::from(*v4.ip()).to_be() },
                sin_zero: [0; 8],
            };
            // SAFETY: `sin` is a valid sockaddr_in of the size given; the connect goes on in the
            // background (EINPROGRESS).
            unsafe { libc::connect(fd, (&raw const sin).cast(), size_of::<libc::sockaddr_in>() as libc::socklen_t) };
            // SAFETY: `fd` is ours, closed when the stream drops.
            unsafe { TcpStream::from_raw_fd(fd) }
        })
        .collect()
}

/// True once the other end closed `s` (a read of 0, or a reset).
fn closed(s: &mut TcpStream) -> bool {
    let mut b = [0u8; 64];
    match s.read(&mut b) {
        Ok(0) => true,
        Ok(_) => false,
        Err(e) => e.kind() != std::io::ErrorKind::WouldBlock && e.kind() != std::io::ErrorKind::NotConnected,
    }
}

/// Ping-pongs `rounds` messages between `a` (rank 0) and `b` (rank 1), calling `each` between
/// polls; panics if the job stalls for `limit`.
fn ping_pong(a: &mut Rank<'_>, b: &mut Rank<'_>, rounds: i32, limit: Duration, mut each: impl FnMut()) {
    let t0 = Instant::now();
    for i in 0..rounds {
        a.net.send(1, &MsgHeader { tag: i, ..MsgHeader::default() }, None, b"ping").unwrap();
        while !b.tags.contains(&i) {
            assert!(t0.elapsed() < limit, "the job stalled at ping {i} (deaths: {:?} {:?})", a.gone, b.gone);
            a.step();
            b.step();
            each();
        }
        b.net.send(0, &MsgHeader { tag: i, ..MsgHeader::default() }, None, b"pong").unwrap();
        while !a.tags.contains(&i) {
            assert!(t0.elapsed() < limit, "the job stalled at pong {i} (deaths: {:?} {:?})", a.gone, b.gone);
            a.step();
            b.step();
            each();
        }
    }
}

/// One ping from rank 0 and its pong, polling both until they arrive (or a death).
fn ping_pong_one(a: &mut Rank<'_>, b: &mut Rank<'_>, i: i32) {
    a.net.send(1, &MsgHeader { tag: i, ..MsgHeader::default() }, None, b"ping").unwrap();
    while !b.tags.contains(&i) && a.gone.is_empty() {
        a.step();
        b.step();
    }
    if a.gone.is_empty() {
        b.net.send(0, &MsgHeader { tag: i, ..MsgHeader::default() }, None, b"pong").unwrap();
    }
    while !a.tags.contains(&i) && a.gone.is_empty() {
        a.step();
        b.step();
    }
}

#[test]
fn a_thousand_idle_connections_neither_stop_the_job_nor_pile_up() {
    let _one = one_at_a_time();
    let secret = JobSecret::generate().unwrap();
    let (n0, n1) = (node(), node());
    let mut r0 = Rank::new(&n0, 0, 2, &secret, cfg());
    let mut r1 = Rank::new(&n1, 1, 2, &secret, cfg());
    let (c0, c1) = (r0.net.card(), r1.net.card());
    r0.net.connect(1, &c1).unwrap();
    r1.net.connect(0, &c0).unwrap();
    let (tcp0, _) = addrs(&c0);
    let base = fds();
    // A stranger opens a thousand connections to rank 0 and says nothing on any. Rank 1 then
    // connects to rank 0 (its first pong) through them, and the job runs.
    let idle = idle_connections(tcp0, 1000);
    let theirs = idle.len();
    let mut most = 0;
    ping_pong(&mut r0, &mut r1, 100, Duration::from_secs(60), || most = most.max(fds().saturating_sub(base + theirs)));
    // Rank 0's descriptors for unauthenticated connections are bounded (64 waiting at most; the
    // link to rank 1 and rank 1's own socket besides), whatever the stranger opens.
    assert!(most <= 64 + 8, "rank 0 held {most} descriptors for the stranger's connections");
    assert!(r0.net.held_unauthenticated() <= 64);
    assert!(r0.gone.is_empty() && r1.gone.is_empty(), "deaths: {:?} {:?}", r0.gone, r1.gone);
    drop(idle);
}

#[test]
fn the_listener_closes_idle_connections_while_the_rank_computes() {
    let _one = one_at_a_time();
    let secret = JobSecret::generate().unwrap();
    let n0 = node();
    let r0 = Rank::new(&n0, 0, 2, &secret, cfg());
    let (tcp0, _) = addrs(&r0.net.card());
    let mut idle = idle_connections(tcp0, 100);
    // Rank 0 computes: it does not call the netmod at all. Its listener closes the stranger's
    // connections once they have waited the connection timeout without a word.
    let t0 = Instant::now();
    let mut open: Vec<usize> = (0..idle.len()).collect();
    while !open.is_empty() {
        assert!(
            t0.elapsed() < DEAD_AFTER * 2 + Duration::from_secs(10),
            "{} of {} idle connections still open after {:?} while the rank computed",
            open.len(),
            idle.len(),
            t0.elapsed()
        );
        std::thread::sleep(Duration::from_millis(50));
        open.retain(|&k| !closed(&mut idle[k]));
    }
    drop(r0);
}

#[test]
fn a_datagram_flood_at_the_heartbeat_port_kills_no_live_peer() {
    let _one = one_at_a_time();
    let secret = JobSecret::generate().unwrap();
    let (n0, n1) = (node(), node());
    // Five periods of silence make a death: a flood that drowns four heartbeats in a row would.
    let timeout = Duration::from_millis(500);
    let cfg = TcpConfig { heartbeat: Duration::from_millis(100), timeout, ..cfg() };
    let mut r0 = Rank::new(&n0, 0, 2, &secret, cfg.clone());
    let mut r1 = Rank::new(&n1, 1, 2, &secret, cfg);
    let (c0, c1) = (r0.net.card(), r1.net.card());
    r0.net.connect(1, &c1).unwrap();
    r1.net.connect(0, &c0).unwrap();
    ping_pong(&mut r0, &mut r1, 3, Duration::from_secs(20), || {});
    let (_, udp0) = addrs(&c0);
    // Strangers flood rank 0's heartbeat port while the job runs: junk, and datagrams shaped like
    // heartbeats claiming rank 1 under another job's secret (each one a MAC to check if taken
    // seriously). Enough of them overflow the socket, and the kernel drops real heartbeats too.
    let stop = Arc::new(AtomicBool::new(false));
    let sent = Arc::new(AtomicU64::new(0));
    let flooders: Vec<_> = (0..4)
        .map(|k| {
            let (stop, sent) = (stop.clone(), sent.clone());
            std::thread::spawn(move || {
                let socks: Vec<UdpSocket> = (0..16).map(|_| UdpSocket::bind("127.0.0.1:0").unwrap()).collect();
                let forged = BeatKey::new(JobSecret::generate().unwrap());
                let mut n = 0u64;
                while !stop.load(Ordering::Relaxed) {
                    let s = &socks[(n % 16) as usize];
                    let d = if k % 2 == 0 { forged.seal(1, n).to_vec() } else { vec![0x5a; 32] };
                    let _ = s.send_to(&d, udp0);
                    n += 1;
                }
                sent.fetch_add(n, Ordering::Relaxed);
            })
        })
        .collect();
    // The job runs on meanwhile: a message each way every 100 ms (a fifth of the timeout).
    let t0 = Instant::now();
    let mut i = 100;
    while t0.elapsed() < Duration::from_secs(10) && r0.gone.is_empty() {
        ping_pong_one(&mut r0, &mut r1, i);
        i += 1;
        let pause = Instant::now();
        while pause.elapsed() < Duration::from_millis(100) && r0.gone.is_empty() {
            r0.step();
            r1.step();
            std::thread::sleep(Duration::from_millis(1));
        }
    }
    stop.store(true, Ordering::Relaxed);
    for f in flooders {
        f.join().unwrap();
    }
    assert!(sent.load(Ordering::Relaxed) > 10_000, "the flood was a flood");
    assert!(r0.gone.is_empty(), "rank 1, alive, was declared dead under the flood");
    // And the ranks talk on.
    ping_pong(&mut r0, &mut r1, 3, Duration::from_secs(20), || {});
    assert!(r0.gone.is_empty() && r1.gone.is_empty());
}
