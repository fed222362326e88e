//! The seed corpus: valid inputs of each target, written to `fuzz/corpus/<target>/` (see
//! `tests/corpus.rs`) so that the fuzzers start from the protocol rather than from nothing.

use nemesis_ft::{Control as FtControl, Horizon, Piggyback};
use nemesis_lmt::Control;
use nemesis_netmod_tcp::frame::{self, Kind};
use nemesis_netmod_tcp::fuzzing;
use nemesis_shm::MsgHeader;
use nemesis_shm::auth;
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
        "pmi_server" => pmi_server(),
        "pmi1_client" => pmi1_client(),
        "pmi2_client" => pmi2_client(),
        "pmi_mapping" => pmi_mapping(),
        "ft_checkpoint" => ft_checkpoint(),
        "tcp_card" => tcp_card(),
        "beat_open" => beat_open(),
        "ft_frame" => ft_frame(),
        "locality" => locality(),
        "ofi_fragments" => ofi_fragments(),
        "rma_key" => rma_key(),
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

/// A MSG frame of `payload` bytes from rank 1 to rank 0 with header `flags` (the piggyback room
/// they ask for: long, short stamp, none).
fn msg_frame(tag: i32, payload: &[u8], flags: u8) -> Vec<u8> {
    let room = nemesis_shm::cell::ft_room(flags);
    let h = MsgHeader { src: 1, dst: 0, tag, len: payload.len() as u32, flags, aux: 0x5eed, ..MsgHeader::default() };
    let mut f = frame::prefix(Kind::Msg, HEADER_BYTES + room + payload.len()).to_vec();
    f.extend_from_slice(&frame::header_bytes(&h));
    f.extend(std::iter::repeat_n(7u8, room));
    f.extend_from_slice(payload);
    f
}

/// The piggyback flags of a frame with the long stamp, and with the short one.
const LONG: u8 = flags::FT_PIGGYBACK | flags::FT_STAMP;
const SHORT: u8 = flags::FT_PIGGYBACK | flags::FT_STAMP_SHORT;

fn tcp_frames() -> Vec<Vec<u8>> {
    let big: Vec<u8> = (0..3000u32).map(|i| i as u8).collect();
    let data = |offset: u64, n: usize| {
        let mut f = frame::data_head(0, offset, n).to_vec();
        f.extend(std::iter::repeat_n(9u8, n));
        f
    };
    vec![
        // Up: small and multi-cell messages, with the long and the short piggyback room, then BYE.
        [
            vec![0],
            msg_frame(5, b"hello", 0),
            msg_frame(6, &big, LONG),
            msg_frame(7, b"8 bytes!", SHORT),
            frame::prefix(Kind::Bye, 0).to_vec(),
        ]
        .concat(),
        // Up: two DATA frames of transfer 0, then a message.
        [vec![0], data(0, 1000), data(1000, 500), msg_frame(1, &[], 0)].concat(),
        // Proved, waiting for ACCEPT: ACCEPT, then a message.
        [vec![2], accept(Kind::Accept), msg_frame(2, b"x", 0)].concat(),
        // Proved, waiting: REJECT.
        [vec![2], accept(Kind::Reject)].concat(),
        // HELLO sent: the peer's CHALLENGE (a valid proof), ACCEPT, a message.
        [vec![1], challenge(), accept(Kind::Accept), msg_frame(3, b"y", 0)].concat(),
    ]
}

/// Rank 1's CHALLENGE to rank 0 (the fuzzed netmod): its nonce, incarnation 0, no options.
fn challenge() -> Vec<u8> {
    frame::frame(Kind::Challenge, &frame::challenge(&fuzzing::PEER_NONCE, 0, 0))
}

/// Rank 1's ACCEPT or REJECT of rank 0's connection, with a valid proof.
fn accept(kind: Kind) -> Vec<u8> {
    let step = if kind == Kind::Accept { auth::Step::Accept } else { auth::Step::Reject };
    frame::frame(kind, &fuzzing::ours().proof(&fuzzing::secret(), step))
}

fn tcp_hello() -> Vec<Vec<u8>> {
    (1..4u32)
        .map(|rank| {
            let nc = [rank as u8; auth::NONCE_BYTES];
            let proof = fuzzing::transcript(rank, 0, 0, nc).proof(&fuzzing::secret(), auth::Step::Connect);
            [frame::frame(Kind::Hello, &frame::hello(rank, 4, &nc)), frame::frame(Kind::Proof, &proof)].concat()
        })
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

/// `[rank][length][bytes]` chunks of `pmi_server`.
fn chunks(parts: &[(u8, &str)]) -> Vec<u8> {
    parts.iter().flat_map(|(r, t)| [vec![*r, t.len() as u8], t.as_bytes().to_vec()].concat()).collect()
}

fn pmi_server() -> Vec<Vec<u8>> {
    let v1 = |r: u8| {
        vec![
            (r, "cmd=init pmi_version=1 pmi_subversion=1\n"),
            (r, "cmd=get_maxes\ncmd=get_appnum\ncmd=get_my_kvsname\n"),
            (r, "cmd=put kvsname=kvs_fuzz_0 key=k value=v\n"),
            (r, "cmd=get kvsname=kvs_fuzz_0 key=PMI_process_mapping\n"),
            (r, "cmd=barrier_in\n"),
        ]
    };
    let v2 = |r: u8| {
        vec![
            (r, "cmd=init pmi_version=2 pmi_subversion=0\n"),
            (r, "    26cmd=fullinit;pmirank=1;"),
            (r, "    30cmd=kvs-put;key=k2;value=v2;"),
            (r, "    16cmd=kvs-fence;"),
            (r, "    25cmd=kvs-get;key=k;srcid=-1;"),
            (r, "    13cmd=finalize;"),
        ]
    };
    vec![
        chunks(&v1(0)),
        chunks(&v2(1)),
        chunks(&[v1(0), v2(1), v1(2), v1(3)].concat()),
        chunks(&[(0, "cmd=abort exitcode=3 msg=bye\n")]),
    ]
}

fn pmi1_client() -> Vec<Vec<u8>> {
    vec![
        concat!(
            "cmd=response_to_init pmi_version=1 pmi_subversion=1 rc=0\n",
            "cmd=maxes kvsname_max=256 keylen_max=64 vallen_max=1024 rc=0\n",
            "cmd=appnum appnum=0 rc=0\n",
            "cmd=my_kvsname kvsname=kvs_1_0 rc=0\n",
            "cmd=put_result rc=0\n",
            "cmd=get_result value=tcp:127.0.0.1:3:4 rc=0\n",
            "cmd=barrier_out rc=0\n",
            "cmd=finalize_ack rc=0\n",
        )
        .into(),
    ]
}

fn pmi2_client() -> Vec<Vec<u8>> {
    let frame = |b: &str| format!("{:6}{b}", b.len());
    vec![
        [
            "cmd=response_to_init pmi_version=2 pmi_subversion=0 rc=0\n".to_owned(),
            frame("cmd=fullinit-response;rc=0;rank=0;size=4;appnum=0;spawner-jobid=job;"),
            frame("cmd=job-getid-response;jobid=job;rc=0;"),
            frame("cmd=kvs-put-response;rc=0;"),
            frame("cmd=kvs-get-response;rc=0;found=TRUE;value=tcp:127.0.0.1:3:4;"),
            frame("cmd=kvs-fence-response;rc=0;"),
            frame("cmd=finalize-response;rc=0;"),
        ]
        .concat()
        .into_bytes(),
    ]
}

fn pmi_mapping() -> Vec<Vec<u8>> {
    [(4u8, "(vector,(0,2,2))"), (6, "(vector,(0,2,1),(1,1,2))"), (3, "(vector,(0,1,3))")]
        .iter()
        .map(|(n, m)| [vec![*n], m.as_bytes().to_vec()].concat())
        .collect()
}

// --- ft_checkpoint (issue 30) ---

/// Valid checkpoint files under the target's key: an empty image, and one with a record of
/// receptions, logged messages and unreceived ones.
fn ft_checkpoint() -> Vec<Vec<u8>> {
    use nemesis::ft::checkpoint::{FtImage, SavedMessage, encode};
    use nemesis_ft::{DateRule, LogSnapshot, LoggedMessage, ProcessState, ReceivedFrom};
    let key = crate::targets::ft_checkpoint_key();
    let state = |rank, date| ProcessState {
        rank,
        date,
        phase: 1,
        received: Vec::new(),
        last_checkpoint_date: 0,
        date_rule: DateRule::Sends,
    };
    let empty = FtImage { process: state(0, 0), log: LogSnapshot::default(), unexpected: Vec::new(), mpi: Vec::new() };
    let full = FtImage {
        process: ProcessState {
            received: vec![(2, ReceivedFrom { max_date: 9, ..ReceivedFrom::default() })],
            last_checkpoint_date: 4,
            ..state(1, 12)
        },
        log: LogSnapshot { channels: vec![(3, 11, vec![LoggedMessage { date: 11, phase: 2, payload: vec![7; 24] }])] },
        unexpected: vec![SavedMessage {
            source: 2,
            tag: 5,
            context: 0,
            data: b"halo".to_vec(),
            sync: Some(1),
            delivery: None,
        }],
        mpi: b"mpi state".to_vec(),
    };
    [encode(&key, 0, 0, 1, 2, b"", &empty), encode(&key, 1, 0, 3, 4, b"application state", &full)]
        .into_iter()
        .map(|r| r.unwrap_or_else(|e| panic!("seed: {e}")))
        .collect()
}

fn tcp_card() -> Vec<Vec<u8>> {
    ["tcp:10.1.2.3:4000:4001", "tcp:[::1]:5:6", "tcp:127.0.0.1:65535:1"].iter().map(|c| c.as_bytes().to_vec()).collect()
}

fn beat_open() -> Vec<Vec<u8>> {
    let key = nemesis_shm::auth::BeatKey::new(crate::targets::beat_secret());
    vec![
        key.seal(0, 1).to_vec(),
        key.seal(7, u64::MAX).to_vec(),
        key.seal(u32::MAX, 1_700_000_000_000_000_000).to_vec(),
    ]
}

// --- Issue 30 (second pass): seeds of `ft_frame` and `locality`. ---

/// Every kind of fault-tolerance frame (bodies), and two frames as a channel's byte stream.
fn ft_frame() -> Vec<Vec<u8>> {
    use nemesis::ft::channel::Frame;
    let frames = [
        Frame::Engine { coordinator: 1, msg: FtControl::Ack { date: 5 } },
        Frame::Retire { ranks: vec![1, 3] },
        Frame::Retired { ranks: vec![2] },
        Frame::Replayed { round: 1, messages: 9, bytes: 4096 },
        Frame::Running { generation: 3 },
        Frame::Restored { read_us: 120, written_unix_us: 1_700_000_000_000_000 },
        Frame::Finishing,
        Frame::Finish,
        Frame::Warning { text: "checkpoint file refused".into() },
        Frame::Unrecoverable { text: "no checkpoint".into() },
        Frame::Card { rank: 2, incarnation: 1, card: "tcp:127.0.0.1:4000:4001".into() },
    ];
    let mut out: Vec<Vec<u8>> = frames
        .iter()
        .map(|f| {
            let mut b = Vec::new();
            f.encode(&mut b);
            b[4..].to_vec()
        })
        .collect();
    let mut stream = Vec::new();
    frames[1].encode(&mut stream);
    frames[8].encode(&mut stream);
    out.push(stream);
    out
}

/// Localities as `nemesis-run` gives them: one, and a node's list.
fn locality() -> Vec<Vec<u8>> {
    ["0.0.0.0.0", "1.-.3.4.5", "-.-.-.-.-", "0.0.0.0.0;0.0.0.1.1;0.0.1.2.2;1.1.2.3.3;-.-.-.-.-"]
        .iter()
        .map(|s| s.as_bytes().to_vec())
        .collect()
}

/// Inputs of `ofi_fragments` (operations: see `nemesis_netmod_rdma::fuzzing::fragments`).
fn ofi_fragments() -> Vec<Vec<u8>> {
    use nemesis_netmod_rdma::fuzzing::BUF;
    // Operations: send (rank, len / 4, tag, flags), deliver (rank, index), flip (rank, index,
    // bit), stranger's bytes (n, bytes), a job peer's garbage (rank, ahead, n, bytes), replay
    // (index), drain, receive.
    let send = |p: u8, len4: u8, tag: u8, fl: u8| vec![0, p, len4, tag, fl];
    let deliver = |p: u8, k: u8| vec![1, p, k];
    let (drain, recv) = (vec![6], vec![7]);
    let garbage = |p: u8, ahead: u8| {
        let h = MsgHeader { len: 8, frag: 1, ..MsgHeader::default() };
        [vec![4, p, ahead, 48], h.to_bytes().to_vec(), vec![1; 16]].concat()
    };
    let mut seeds = vec![
        // Both peers, in order: small messages, one of several fragments with a piggyback.
        [send(0, 2, 1, 0), send(1, 0, 2, 0), send(0, 100, 3, 1), deliver(0, 0), deliver(1, 0)]
            .into_iter()
            .chain([deliver(0, 0), deliver(0, 0), deliver(0, 0), drain.clone(), recv.clone()])
            .chain([drain.clone(), recv.clone(), drain.clone(), recv.clone()])
            .collect::<Vec<_>>()
            .concat(),
        // Out of order (parked), then a replay of each, a goodbye, fragments after it.
        [send(0, 100, 4, 0), send(0, 1, 5, 0), deliver(0, 3), deliver(0, 1), deliver(0, 0), deliver(0, 0)]
            .into_iter()
            .chain([vec![5, 0], vec![5, 2], drain.clone(), recv.clone(), send(0, 0, 0, 2), send(0, 1, 6, 0)])
            .chain([deliver(0, 1), deliver(0, 0), drain.clone(), recv.clone()])
            .collect::<Vec<_>>()
            .concat(),
        // A stranger's bytes, a flipped bit, a peer of the job breaking the protocol.
        [vec![3, 60], vec![0xee; 60], send(1, 3, 7, 0), vec![2, 1, 0, 40], deliver(1, 0)]
            .into_iter()
            .chain([send(1, 3, 8, 0), deliver(1, 0), garbage(0, 1), send(0, 2, 9, 0), deliver(0, 0)])
            .chain([drain.clone(), recv.clone(), drain.clone(), recv.clone()])
            .collect::<Vec<_>>()
            .concat(),
    ];
    // More fragments than receive buffers, delivered last first: beyond the window, refused;
    // then fewer cells than fragments.
    let mut many = Vec::new();
    for t in 0..12u8 {
        many.extend(send(0, (BUF / 8) as u8, t, 0));
    }
    for _ in 0..12 {
        many.extend(deliver(0, 255));
    }
    for _ in 0..6 {
        many.extend([drain.clone(), recv.clone()].concat());
    }
    seeds.push(many);
    seeds
}

/// Keys of `rma_key`: bare, and after the window's flag byte (1: the rank can be reached by RMA).
fn rma_key() -> Vec<Vec<u8>> {
    use nemesis_netmod_rdma::rma::RmaKey;
    let keys = [
        RmaKey { base: 0x7f3a_5c00_1000, key: 0x1_0002, len: 1 << 20 },
        RmaKey { base: 0, key: 7, len: 4096 },
        RmaKey { base: 0, key: 0, len: 0 },
        RmaKey { base: u64::MAX - 7, key: u64::MAX, len: u64::MAX },
    ];
    let mut out: Vec<Vec<u8>> = keys.iter().map(|k| k.to_bytes().to_vec()).collect();
    out.extend(keys[..2].iter().map(|k| [&[1u8][..], &k.to_bytes()].concat()));
    out
}
