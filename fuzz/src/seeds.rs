//! The seed corpus: valid inputs of each target, written to `fuzz/corpus/<target>/` (see
//! `tests/corpus.rs`) so that the fuzzers start from the protocol rather than from nothing.

use nemesis_ft::{Control as FtControl, Horizon, Piggyback};
use nemesis_lmt::Control;
use nemesis_netmod_tcp::frame::{self, Kind};
use nemesis_shm::MsgHeader;
use nemesis_shm::cell::{HEADER_BYTES, flags};

/// The seeds of target `name` (none for an unknown name).
pub fn seeds(name: &str) -> Vec<Vec<u8>> {
    match name {
        "shm_port" => shm_port(),
        "lmt_control" => lmt_control(),
        "tcp_frames" => tcp_frames(),
        "tcp_hello" => tcp_hello(),
        "ft_control" => ft_control(),
        "ft_piggyback" => ft_piggyback(),
        _ => Vec::new(),
    }
}

fn shm_port() -> Vec<Vec<u8>> {
    vec![
        // Small messages both ways, received (fastboxes after the second).
        vec![0, 1, 5, 2, 0, 10, 6, 2, 0, 0, 7, 2, 1, 3, 8, 3, 0, 4, 9, 2],
        // A message of several cells, then one whose header is overwritten before the receiver
        // polls, then a death with messages in flight.
        vec![0, 200, 1, 2, 0, 2, 3, 4, 0, 1, 0, 0, 4, 255, 255, 255, 255, 2, 0, 90, 4, 0, 5, 2, 2],
        // Sends beyond the cells: pending, resumed as the receiver drains.
        [0, 255, 1].repeat(6).into_iter().chain([2, 3, 2, 2, 2]).collect(),
    ]
}

fn lmt_control() -> Vec<Vec<u8>> {
    let msgs = [
        Control::Cts { id: 0, ring: 0, epoch: 1, bytes: 5000 },
        Control::Cookie { id: 1, offset: 512, ring: 0, epoch: 1, bytes: 10_000 },
        Control::Done { id: 2, bytes: 15_000 },
        Control::Help { id: 0, offset: 2048, bytes: 2952, dst: 0x7f00_0000_0000, pid: 1 },
        Control::Helped { id: 0, bytes: 8192 },
    ];
    let enc = |m: &Control| {
        let mut b = [0u8; nemesis_lmt::wire::MAX_ENCODED];
        let n = m.encode(&mut b);
        b[..n].to_vec()
    };
    let mut out: Vec<Vec<u8>> = msgs.iter().map(enc).collect();
    out.push(msgs.iter().flat_map(enc).collect());
    out
}

/// A MSG frame of `payload` bytes from rank 1 to rank 0, with the piggyback room if `ft`.
fn msg_frame(tag: i32, payload: &[u8], ft: bool) -> Vec<u8> {
    let room = if ft { nemesis_shm::cell::FT_ROOM } else { 0 };
    let flags = if ft { flags::FT_PIGGYBACK } else { 0 };
    let h = MsgHeader { src: 1, dst: 0, tag, len: payload.len() as u32, flags, ..MsgHeader::default() };
    let mut f = frame::prefix(Kind::Msg, HEADER_BYTES + room + payload.len()).to_vec();
    f.extend_from_slice(&frame::header_bytes(&h));
    f.extend(std::iter::repeat_n(7u8, room));
    f.extend_from_slice(payload);
    f
}

fn tcp_frames() -> Vec<Vec<u8>> {
    let big: Vec<u8> = (0..3000u32).map(|i| i as u8).collect();
    let data = |offset: u64, n: usize| {
        let mut f = frame::data_head(0, offset, n).to_vec();
        f.extend(std::iter::repeat_n(9u8, n));
        f
    };
    vec![
        // Up: small and multi-cell messages, one with the piggyback room, then BYE.
        [vec![0], msg_frame(5, b"hello", false), msg_frame(6, &big, true), frame::prefix(Kind::Bye, 0).to_vec()]
            .concat(),
        // Up: two DATA frames of transfer 0, then a message.
        [vec![0], data(0, 1000), data(1000, 500), msg_frame(1, &[], false)].concat(),
        // Waiting for ACCEPT: ACCEPT, then a message.
        [vec![1], frame::prefix(Kind::Accept, 0).to_vec(), msg_frame(2, b"x", false)].concat(),
        // Waiting: REJECT.
        [vec![1], frame::prefix(Kind::Reject, 0).to_vec()].concat(),
    ]
}

fn tcp_hello() -> Vec<Vec<u8>> {
    (1..4u32)
        .map(|rank| [frame::prefix(Kind::Hello, frame::HELLO).to_vec(), frame::hello(rank, 4, 42).to_vec()].concat())
        .collect()
}

fn ft_control() -> Vec<Vec<u8>> {
    [
        FtControl::Ack { date: 5 },
        FtControl::Checkpointed { date: 9 },
        FtControl::FailureNotice { round: 1, restarting: vec![0, 2] },
        FtControl::Restarted { round: 1, date: 7, last_received: 3 },
        FtControl::LastDate { round: 1, last_date: 10, orphans: vec![(4, 1), (8, 2)] },
        FtControl::MyPhase { round: 2, phase: 3 },
        FtControl::LoggedPhases { round: 2, phases: vec![1, 2, 5] },
        FtControl::OrphanCounts { round: 2, counts: vec![(1, 4), (3, 1)] },
        FtControl::OrphanNotification { round: 2, phase: 3 },
        FtControl::NotifySendLogged { round: 2, phase: 4 },
        FtControl::NotifySendMsg { round: 2, horizon: Horizon::UpTo(6) },
        FtControl::NotifySendMsg { round: 3, horizon: Horizon::Unbounded },
        FtControl::OrphanPhases { round: 3, phases: vec![2] },
        FtControl::OrphansReceived { round: 3, phase: 2 },
    ]
    .iter()
    .map(FtControl::encode)
    .collect()
}

fn ft_piggyback() -> Vec<Vec<u8>> {
    [(1, 1, None), (12345, 7, Some(3)), (nemesis_ft::MAX_DATE, nemesis_ft::MAX_PHASE, Some(1))]
        .into_iter()
        .filter_map(|(d, p, r)| Piggyback::new(d, p, r).ok())
        .map(|p| p.encode().to_vec())
        .collect()
}
