//! The targets (see the crate's documentation).

use nemesis_lmt::{Control as LmtControl, HeapRing, Lmt, LmtBackend, NetDone, NetLmt, RingRef, Rings, Rts};
use nemesis_shm::{Backing, MsgHeader, Node, Params, PendingSend, Port, PortConfig, Segment, Sent};

/// Reads the input front to back; past its end, zeros.
struct Input<'a>(&'a [u8]);

impl Input<'_> {
    fn u8(&mut self) -> u8 {
        let (&b, rest) = self.0.split_first().unwrap_or((&0, &[]));
        self.0 = rest;
        b
    }
    fn u32(&mut self) -> u32 {
        u32::from_le_bytes([self.u8(), self.u8(), self.u8(), self.u8()])
    }
    fn take(&mut self, n: usize) -> &[u8] {
        let n = n.min(self.0.len());
        let (a, b) = self.0.split_at(n);
        self.0 = b;
        a
    }
    fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

/// Operations of [`shm_port`] at most per input.
const SHM_OPS: usize = 64;

/// Two ranks of one segment exchange messages while the input overwrites bytes of the segment
/// (anything any process of the node can write): the receiver's header, fragment and recovery
/// logic must answer with messages or [`nemesis_shm::Error`]s, never a panic or an access out of
/// the segment. Each operation is one input byte (and its arguments):
/// `0`/`1` rank 0/1 sends (length, tag), `2`/`3` rank 1/0 polls and releases what arrived,
/// `4` writes bytes at an offset of the segment, `5` rank 0 is marked gone.
pub fn shm_port(data: &[u8]) {
    // Both ports run on this thread: a link still missing when one polls will never come.
    nemesis_shm::queue::set_link_patience(std::time::Duration::from_millis(1));
    let params = Params {
        cell_size: 256,
        cells_per_rank: 8,
        fastbox_slots: 4,
        fastbox_slot_size: 128,
        fastboxes_per_rank: 2,
        ..Params::DEFAULT
    };
    let Ok(seg) = Segment::create(2, params, Backing::Memfd) else { return };
    if seg.register(0).is_err() || seg.register(1).is_err() {
        return;
    }
    let cfg = PortConfig { fastbox_after: 2, scan_every: 2, check_every: 1 };
    let (Ok(a), Ok(b)) = (Port::new(&seg, 0, cfg), Port::new(&seg, 1, cfg)) else { return };
    let mut ports = [a, b];
    let mut pending: [Vec<(PendingSend, Vec<u8>)>; 2] = [Vec::new(), Vec::new()];
    let mut inp = Input(data);
    let payload: Vec<u8> = (0..1024u32).map(|i| (i * 7) as u8).collect();
    for _ in 0..SHM_OPS {
        if inp.is_empty() {
            break;
        }
        match inp.u8() % 6 {
            op @ (0 | 1) => {
                let from = usize::from(op);
                let len = usize::from(inp.u8()) * 3;
                let hdr = MsgHeader { tag: i32::from(inp.u8()), ..MsgHeader::default() };
                if pending[from].is_empty()
                    && let Ok(Sent::Pending(ps)) = ports[from].send(1 - op as u16, &hdr, None, &payload[..len])
                {
                    pending[from].push((ps, payload[..len].to_vec()));
                }
            }
            op @ (2 | 3) => {
                let who = usize::from(op == 3);
                if let Some((mut ps, body)) = pending[who].pop()
                    && matches!(ports[who].resume(&mut ps, &body), Ok(false))
                {
                    pending[who].push((ps, body));
                }
                for _ in 0..16 {
                    match ports[who].poll(&[1 - who as u16]) {
                        Ok(Some(inc)) => {
                            let mut sink = [0u8; 256];
                            inc.copy_to(&mut sink);
                            if ports[who].release(inc).is_err() {
                                break;
                            }
                        }
                        _ => break,
                    }
                }
            }
            4 => {
                let at = inp.u32() as usize % seg.len();
                let n = usize::from(inp.u8() % 16);
                let bytes = inp.take(n);
                let n = bytes.len().min(seg.len() - at);
                // SAFETY: `at + n <= len`: inside the mapping, which lives as long as `seg`. Any
                // process of the node may write these bytes at any time; this thread is the only
                // one here.
                unsafe { std::ptr::copy_nonoverlapping(bytes.as_ptr(), seg.base_ptr().add(at), n) };
            }
            _ => {
                let _ = seg.mark_gone(0, 9);
            }
        }
    }
}

/// A sender's and a receiver's rings on the heap; every rank "registered" `pid`.
struct HeapRings {
    rings: Vec<HeapRing>,
    pid: Option<u32>,
}

impl Rings for HeapRings {
    fn ring(&self, host: u16, index: u16) -> Option<RingRef<'_>> {
        (host < 2 && index < 1).then(|| self.rings[usize::from(host)].get())
    }
    fn rings_per_rank(&self) -> u16 {
        1
    }
    fn pid(&self, rank: u16) -> Option<u32> {
        self.pid.filter(|_| rank < 2)
    }
}

/// A network backend that records and moves nothing.
#[derive(Default)]
struct NoNet(Vec<(u32, u32, u64)>);

impl LmtBackend for NoNet {
    unsafe fn start_send(&mut self, peer: u32, id: u32, _addr: *const u8, bytes: u64) -> nemesis_lmt::Result<()> {
        self.0.push((peer, id, bytes));
        Ok(())
    }
    unsafe fn start_recv(
        &mut self,
        peer: u32,
        id: u32,
        _dst: *mut u8,
        bytes: u64,
        _remote: Option<nemesis_lmt::RemoteBuf>,
    ) -> nemesis_lmt::Result<nemesis_lmt::RecvPlan> {
        self.0.push((peer, id, bytes));
        Ok(nemesis_lmt::RecvPlan::Stream)
    }
    fn take_lmt_done(&mut self) -> Vec<NetDone> {
        Vec::new()
    }
}

/// Rendezvous control messages from a peer: `data` is decoded as a batch (as a KIND_LMT message's
/// payload is) and each message goes to a sender with transfers in flight (waiting for CTS or
/// HELP), to a receiver with transfers in flight (a single copy being read, a ring being
/// drained), and to the network rendezvous. Handling is an error or a step of a transfer, never
/// a panic; progress is bounded; a HELP may name only a process that is not this one (the
/// registered pid of the fuzzed peer is `None` here: the refusal path) so that nothing writes into
/// the fuzzer.
pub fn lmt_control(data: &[u8]) {
    let mut batch = Vec::new();
    let decoded = LmtControl::decode_all(data, |m| batch.push(m));
    for m in &batch {
        let mut b = [0u8; nemesis_lmt::wire::MAX_ENCODED];
        let n = m.encode(&mut b);
        assert_eq!(LmtControl::decode(&b[..n]).ok(), Some(*m), "a decoded message re-encodes to itself");
    }
    if decoded.is_err() && batch.is_empty() {
        return;
    }
    let rings = HeapRings { rings: vec![HeapRing::new(4, 512), HeapRing::new(4, 512)], pid: None };
    let cfg = nemesis_lmt::Config {
        policy: nemesis_lmt::Policy::Cma,
        cma_chunk: 700,
        split_min: 4096,
        ..nemesis_lmt::Config::default()
    };
    let msg: Vec<u8> = (0..20_000u32).map(|i| (i * 31) as u8).collect();
    let (mut s, mut r) = (Lmt::new(0, 1, cfg), Lmt::new(1, 1, cfg));
    s.set_cma(true);
    r.set_cma(true);
    let mut dst = vec![0u8; 20_000];
    let mut dst2 = vec![0u8; 3000];
    let me = std::process::id();
    // SAFETY: `msg`, `dst` and `dst2` outlive both state machines (dropped after them, below).
    unsafe {
        for t in 0..3 {
            s.pre_send(1, t, msg.as_ptr(), 5000 + t * 5000, me);
        }
        // The receiver reads from our own buffer (the peer registered no pid: rings instead).
        let rts =
            Rts { id: 0, len: 20_000, addr: msg.as_ptr() as u64, pid: me, key: 0, backend: nemesis_lmt::Backend::Cma };
        r.pre_recv(0, 10, &rts, dst.as_mut_ptr(), dst.len(), &rings);
        let rts = Rts { id: 1, len: 3000, addr: 0, pid: 0, key: 0, backend: nemesis_lmt::Backend::Ring };
        r.pre_recv(0, 11, &rts, dst2.as_mut_ptr(), dst2.len(), &rings);
    }
    let mut net = NetLmt::new();
    let mut backend = NoNet::default();
    // SAFETY: as above.
    unsafe {
        net.pre_send(1, 20, msg.as_ptr(), 20_000, &mut backend);
        let rts = Rts { id: 0, len: 20_000, addr: 0, pid: 0, key: 0, backend: nemesis_lmt::Backend::Net };
        net.pre_recv(1, 21, &rts, dst.as_mut_ptr(), dst.len(), &mut backend);
    }
    for m in batch {
        let _ = s.handle(1, m, &rings);
        let _ = r.handle(0, m, &rings);
        let _ = net.handle(1, m, &mut backend);
        for _ in 0..4 {
            s.progress(&rings);
            r.progress(&rings);
            net.progress(&mut backend);
        }
        s.take_out().for_each(drop);
        r.take_out().for_each(drop);
    }
    s.peer_gone(1, &rings);
    r.peer_gone(0, &rings);
    net.peer_gone(1);
    drop((s, r, net));
    drop((msg, dst, dst2));
}

/// A TCP connection's byte stream from a peer (see [`nemesis_netmod_tcp::fuzzing::frames`]).
pub fn tcp_frames(data: &[u8]) {
    nemesis_netmod_tcp::fuzzing::frames(data);
}

/// The HELLO of a new TCP connection.
pub fn tcp_hello(data: &[u8]) {
    nemesis_netmod_tcp::fuzzing::hello(data);
}

/// A HydEE control message: an error, or a message that encodes back to the bytes it came from.
pub fn ft_control(data: &[u8]) {
    if let Ok(c) = nemesis_ft::Control::decode(data) {
        let again = c.encode();
        assert_eq!(nemesis_ft::Control::decode(&again).ok(), Some(c));
    }
}

/// A message's piggyback: an error, or one that encodes back to a piggyback that decodes the same.
pub fn ft_piggyback(data: &[u8]) {
    if let Ok(p) = nemesis_ft::Piggyback::decode_slice(data) {
        assert_eq!(nemesis_ft::Piggyback::decode(&p.encode()).ok(), Some(p));
    }
}

/// A PMI server of 4 ranks (`nemesis-run`'s) reading bytes from its ranks: `data` is cut into
/// chunks, each `[rank][length][bytes]`, handed to [`PmiServer::on_bytes`] as they would arrive
/// (PMI-1 lines, PMI-2 framed messages after a PMI-2 `init`); a rank whose connection must close
/// is marked gone. Replies and aborts are actions, never a panic.
///
/// [`PmiServer::on_bytes`]: nemesis::launch::server::PmiServer::on_bytes
pub fn pmi_server(data: &[u8]) {
    use nemesis::launch::server::PmiServer;
    let mut server = PmiServer::new(4, "kvs_fuzz_0");
    server.preput("PMI_process_mapping", "(vector,(0,2,2))");
    let mut inputs: [Vec<u8>; 4] = Default::default();
    let mut out = Vec::new();
    let mut inp = Input(data);
    while !inp.is_empty() {
        let rank = u32::from(inp.u8() % 4);
        let n = usize::from(inp.u8());
        let input = &mut inputs[rank as usize];
        input.extend_from_slice(inp.take(n));
        if !server.on_bytes(rank, input, &mut out) {
            input.clear();
            server.on_gone(rank, &mut out);
        }
        out.clear();
    }
}

/// A connected pair: the client's end as a `File`, and the process manager's end holding
/// `replies`, closed for writing after them.
fn pmi_pair(replies: &[u8]) -> Option<(std::fs::File, std::os::unix::net::UnixStream)> {
    use std::io::Write;
    let (ours, mut theirs) = std::os::unix::net::UnixStream::pair().ok()?;
    theirs.write_all(replies).ok()?;
    theirs.shutdown(std::net::Shutdown::Write).ok()?;
    Some((std::fs::File::from(std::os::fd::OwnedFd::from(ours)), theirs))
}

/// A PMI-1 client reading `data` as everything its process manager answers: start-up, then put,
/// get, barrier and finalize. Each answer is a reply or a typed error (`Error::Pmi`).
pub fn pmi1_client(data: &[u8]) {
    let Some((file, _server)) = pmi_pair(data) else { return };
    if let Ok(mut c) = nemesis::pmi::PmiClient::connect(file, 0, 4) {
        let _ = c.put("nemesis-card-0", "tcp:127.0.0.1:1:2");
        let _ = c.get("nemesis-card-1");
        let _ = c.barrier();
        let _ = c.finalize();
    }
}

/// A PMI-2 client reading `data` as everything its process manager answers (see
/// [`pmi1_client`]).
pub fn pmi2_client(data: &[u8]) {
    let Some((file, _server)) = pmi_pair(data) else { return };
    if let Ok(mut c) = nemesis::pmi::Pmi2Client::connect(file, Some(0), Some("job")) {
        let _ = c.put("nemesis-card-0", "tcp:127.0.0.1:1:2");
        let _ = c.get("nemesis-card-1");
        let _ = c.barrier();
        let _ = c.finalize();
    }
}

/// A `PMI_process_mapping` value, as a process manager hands it to every rank.
pub fn pmi_mapping(data: &[u8]) {
    let Some((&size, text)) = data.split_first() else { return };
    if let Ok(text) = std::str::from_utf8(text)
        && let Some(nodes) = nemesis::pmi::node_of_ranks(text, u32::from(size))
    {
        assert_eq!(nodes.len(), usize::from(size));
    }
}

// --- ft_checkpoint: checkpoint files read back at a restart (issue 30) ---

/// The key the `ft_checkpoint` target and its seeds use: a fixed secret and job id.
pub fn ft_checkpoint_key() -> nemesis::ft::checkpoint::CheckpointKey {
    let secret = nemesis_shm::auth::JobSecret::from_hex(&"6e".repeat(nemesis_shm::auth::SECRET_BYTES))
        .unwrap_or_else(|_| unreachable!("64 hexadecimal digits"));
    nemesis::ft::checkpoint::CheckpointKey::new(&secret, "fuzz-job")
}

/// A checkpoint file as a restarted rank reads it (`nemesis::ft::checkpoint::decode`): `data` as
/// found in the directory (refused unless made with the job's key), then `data` and `data` less
/// a trailer sealed with the key as a writer holding it would, so that the header's lengths and
/// the image's decoder are reached past the MAC. A refusal is a typed [`Refusal`], never a
/// panic; a file that decodes encodes to a file that decodes the same.
///
/// [`Refusal`]: nemesis::ft::checkpoint::Refusal
pub fn ft_checkpoint(data: &[u8]) {
    use nemesis::ft::checkpoint::{TRAILER, decode, encode, seal_body};
    let key = ft_checkpoint_key();
    let again = |c: nemesis::ft::checkpoint::Checkpoint| {
        let bytes = encode(&key, c.rank, c.group, c.generation, c.ranks, &c.app, &c.image);
        let bytes = bytes.unwrap_or_else(|e| panic!("a decoded checkpoint does not encode: {e}"));
        let back = decode(&bytes, &key).unwrap_or_else(|e| panic!("an encoded checkpoint does not decode: {e}"));
        assert_eq!(
            (back.job, back.rank, back.group, back.generation, back.ranks, back.app, back.image),
            (c.job, c.rank, c.group, c.generation, c.ranks, c.app, c.image)
        );
    };
    if let Ok(c) = decode(data, &key) {
        again(c);
    }
    for body in [data, &data[..data.len().saturating_sub(TRAILER)]] {
        if let Some(sealed) = seal_body(&key, body)
            && let Ok(c) = decode(&sealed, &key)
        {
            again(c);
        }
    }
}

// --- tcp_card, beat_open: what the TCP netmod reads from the KVS and from anyone (issue 30) ---

/// A peer's business card as the KVS hands it (see [`nemesis_netmod_tcp::fuzzing::card`]).
pub fn tcp_card(data: &[u8]) {
    nemesis_netmod_tcp::fuzzing::card(data);
}

/// The secret of [`beat_open`]'s job (fixed, so that seeds hold valid heartbeats).
pub fn beat_secret() -> nemesis_shm::auth::JobSecret {
    nemesis_shm::auth::JobSecret::from_hex(&"3c".repeat(32)).expect("a secret")
}

/// A heartbeat datagram from anyone (`nemesis_shm::auth::BeatKey::open`): `None`, or a rank and
/// sequence number whose sealed datagram is exactly the bytes given (nothing else opens).
pub fn beat_open(data: &[u8]) {
    let key = nemesis_shm::auth::BeatKey::new(beat_secret());
    if let Some((rank, seq)) = key.open(data) {
        assert_eq!(&key.seal(rank, seq)[..], data, "only a sealed datagram opens");
    }
}

// --- Issue 30 (second pass): the launcher's fault-tolerance frames and the ranks' localities. ---

/// A frame body of the launcher's fault-tolerance channel
/// ([`nemesis::ft::channel::Frame::decode`]): an error, or a frame whose encoding decodes to the
/// same frame. Then the same bytes as a channel's byte stream (length-prefixed frames, read by
/// [`nemesis::ft::channel::Channel::receive`]): frames or an error, never a panic.
pub fn ft_frame(data: &[u8]) {
    use nemesis::ft::channel::{Channel, FRAME_MAX, Frame};
    use std::io::Write;
    if data.len() > FRAME_MAX {
        return;
    }
    if let Ok(f) = Frame::decode(data) {
        let mut enc = Vec::new();
        f.encode(&mut enc);
        // A text longer than a frame is cut when encoded: only shorter bodies round-trip.
        if data.len() < FRAME_MAX - 16 {
            assert_eq!(Frame::decode(&enc[4..]).ok(), Some(f), "a decoded frame re-encodes to itself");
        }
    }
    let Ok((mut a, b)) = std::os::unix::net::UnixStream::pair() else { return };
    // What the socket holds at once (a few hundred KiB): the rest of a longer input is left out.
    let _ = a.set_nonblocking(true);
    let _ = a.write(data);
    drop(a);
    if let Ok(mut c) = Channel::new(b) {
        for _ in 0..2 {
            if c.receive().is_err() {
                break;
            }
        }
    }
}

/// A rank's locality as `nemesis-run` passes it (`NEMESIS_LOCALITY`, `;`-separated, one
/// `package.numa.l3.l2.core` per local rank; [`nemesis::topology::Locality::decode`]): `None`, or
/// a locality whose encoding decodes the same; the distances between decoded ones never panic.
pub fn locality(data: &[u8]) {
    use nemesis::topology::Locality;
    let Ok(text) = std::str::from_utf8(data) else { return };
    if let Some(l) = Locality::decode(text) {
        assert_eq!(Locality::decode(&l.encode()), Some(l), "a decoded locality re-encodes to itself");
    }
    let all: Vec<Locality> = text.split(';').filter_map(Locality::decode).collect();
    for a in &all {
        for b in &all {
            assert_eq!(a.distance(b), b.distance(a), "distances are symmetric");
        }
    }
}

/// The eager fragments an ofi rank receives (see [`nemesis_netmod_rdma::fuzzing::fragments`]).
pub fn ofi_fragments(data: &[u8]) {
    nemesis_netmod_rdma::fuzzing::fragments(data);
}

/// A peer's RMA registration key as a window's creation exchanges it (`mpi/src/win/ofi.rs`: a
/// flag byte, then [`RmaKey::from_bytes`]'s 24 bytes): `data` whole and `data` less its first
/// byte. A key decodes from exactly 24 bytes and re-encodes to them; [`RmaKey::at`] gives an
/// address only for `off + n` within the key's length, whatever the length, base or offset.
///
/// [`RmaKey::from_bytes`]: nemesis_netmod_rdma::rma::RmaKey::from_bytes
/// [`RmaKey::at`]: nemesis_netmod_rdma::rma::RmaKey::at
pub fn rma_key(data: &[u8]) {
    use nemesis_netmod_rdma::rma::RmaKey;
    for bytes in [data, data.get(1..).unwrap_or_default()] {
        let Some(k) = RmaKey::from_bytes(bytes) else {
            assert_ne!(bytes.len(), RmaKey::BYTES, "24 bytes always decode");
            continue;
        };
        assert_eq!(&k.to_bytes()[..], bytes, "a decoded key re-encodes to its bytes");
        let edges = [0, 1, 8, k.len / 2, k.len.wrapping_sub(1), k.len, k.len.wrapping_add(1), u64::MAX];
        for off in edges {
            for n in edges {
                let inside = off.checked_add(n).is_some_and(|end| end <= k.len);
                assert_eq!(k.at(off, n), inside.then(|| k.base.wrapping_add(off)), "at({off}, {n}) of {k:?}");
            }
        }
    }
}
