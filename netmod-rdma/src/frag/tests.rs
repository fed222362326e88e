use super::*;
use nemesis_shm::cell::flags;

fn key() -> FragKey {
    FragKey::new(&JobSecret::from_hex(&"5a".repeat(32)).unwrap())
}

fn frag(k: &FragKey, src: u32, seq: u32, wraps: u32, data: &[u8]) -> Vec<u8> {
    let h = MsgHeader { src, dst: 0, seq, len: data.len() as u32, ..MsgHeader::default() };
    let mut out = vec![0u8; wire_len(false, data.len())];
    let n = build(k, &h, wraps, None, data, &mut out);
    assert_eq!(n, out.len());
    out
}

#[test]
fn a_mac_binds_the_header_the_room_the_length_the_key_and_the_wraps() {
    let k = key();
    let data = b"payload";
    for fl in
        [0, flags::FT_PIGGYBACK, flags::FT_PIGGYBACK | flags::FT_STAMP, flags::FT_PIGGYBACK | flags::FT_STAMP_SHORT]
    {
        let ft = fl != 0;
        let h = MsgHeader { src: 1, seq: 7, len: data.len() as u32, flags: fl, ..MsgHeader::default() };
        let mut f = vec![0u8; wire_len(ft, data.len())];
        let n = build(&k, &h, 0, ft.then_some(&[9u8; FT_ROOM][..]), data, &mut f);
        f.truncate(n);
        assert!(k.verify(&f, 0));
        assert!(!k.verify(&f, 1), "another wrap of the sequence");
        let other = FragKey::new(&JobSecret::generate().unwrap());
        assert!(!other.verify(&f, 0), "another job's key");
        let head = HEADER_BYTES + ft_room(fl);
        let body = f.len() - TAG_BYTES;
        for i in 0..f.len() {
            let mut g = f.clone();
            g[i] ^= 1;
            // The data is not under the MAC (see the module documentation).
            assert_eq!(k.verify(&g, 0), (head..body).contains(&i), "byte {i} altered");
        }
        let mut longer = f[..body].to_vec();
        longer.push(0);
        longer.extend_from_slice(&f[body..]);
        assert!(!k.verify(&longer, 0), "a longer fragment");
        let shorter = [&f[..body - 1], &f[body..]].concat();
        assert!(!k.verify(&shorter, 0), "a shorter fragment");
    }
    assert!(!k.verify(&[0; TAG_BYTES - 1], 0));
    assert_eq!(format!("{k:?}"), "FragKey(..)");
}

#[test]
fn refusals_name_the_claimed_source_and_change_nothing() {
    let k = key();
    let mut rx = Rx::new(0, 3, k.clone(), 4, 1 << 20);
    assert_eq!(rx.arrived(0, &[0; 40]), Err(Refusal::Short { len: 40 }));
    let mut to_two = frag(&k, 1, 0, 0, b"x");
    to_two[4] = 2;
    assert_eq!(rx.arrived(0, &to_two), Err(Refusal::Misaddressed { src: 1, dst: 2 }));
    assert_eq!(rx.arrived(0, &frag(&k, 3, 0, 0, b"x")), Err(Refusal::Misaddressed { src: 3, dst: 0 }));
    let stranger = FragKey::new(&JobSecret::generate().unwrap());
    assert_eq!(rx.arrived(0, &frag(&stranger, 2, 0, 0, b"x")), Err(Refusal::Forged { src: 2, seq: 0 }));
    assert_eq!(rx.arrived(0, &frag(&k, 2, 0, 1, b"x")), Err(Refusal::Forged { src: 2, seq: 0 }));
    assert_eq!(rx.arrived(0, &frag(&k, 2, 4, 0, b"x")), Err(Refusal::Ahead { src: 2, seq: 4, expected: 0 }));
    assert_eq!(rx.held(), 0);
    assert_eq!(rx.next_seq(2), Some((0, 0)));
    let r = rx.refusals();
    assert_eq!((r.short, r.misaddressed, r.forged, r.ahead, r.total()), (1, 2, 2, 1, 6));
    assert_eq!(r.last, Some(Refusal::Ahead { src: 2, seq: 4, expected: 0 }));
    assert!(Refusal::Forged { src: 2, seq: 9 }.to_string().contains("claiming rank 2"));
}

#[test]
fn duplicates_and_replays_are_refused_and_hold_no_buffer() {
    let k = key();
    let mut rx = Rx::new(0, 2, k.clone(), 8, 1 << 20);
    let (f0, f1, f2) = (frag(&k, 1, 0, 0, b"a"), frag(&k, 1, 1, 0, b"b"), frag(&k, 1, 2, 0, b"c"));
    rx.arrived(10, &f2).unwrap();
    assert_eq!(rx.arrived(11, &f2), Err(Refusal::Duplicate { src: 1, seq: 2 }), "parked already");
    rx.arrived(12, &f0).unwrap();
    assert_eq!(rx.arrived(13, &f0), Err(Refusal::Duplicate { src: 1, seq: 0 }), "taken already");
    rx.arrived(14, &f1).unwrap();
    assert_eq!(rx.held(), 3);
    assert_eq!(rx.next_seq(1), Some((3, 0)));
    let mut free = Vec::new();
    assert!(rx.close(1, &mut free).is_none());
    free.sort();
    assert_eq!(free, [10, 12, 14]);
    assert_eq!(rx.arrived(15, &f0), Err(Refusal::Closed { src: 1 }));
    assert_eq!(rx.refusals().duplicate, 2);
}

#[test]
fn sequence_numbers_wrap_into_the_next_64_bit_number() {
    let k = key();
    let mut rx = Rx::new(0, 2, k.clone(), 8, 1 << 20);
    rx.peers[1].next = u64::from(u32::MAX) - 1;
    rx.arrived(0, &frag(&k, 1, 0, 1, b"after")).unwrap();
    rx.arrived(1, &frag(&k, 1, u32::MAX - 1, 0, b"before")).unwrap();
    assert_eq!(rx.next_seq(1), Some((u32::MAX, 0)));
    rx.arrived(2, &frag(&k, 1, u32::MAX, 0, b"last")).unwrap();
    assert_eq!(rx.next_seq(1), Some((1, 1)));
    // The fragment numbered 0 of the first round, replayed: another wrap, not verified.
    assert_eq!(rx.arrived(3, &frag(&k, 1, 0, 0, b"old")), Err(Refusal::Forged { src: 1, seq: 0 }));
    assert_eq!(rx.held(), 3);
}
