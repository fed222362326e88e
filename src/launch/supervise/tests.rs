use super::*;
use crate::launch::server::{LINE_MAX, MESSAGE2_MAX};

/// A rank that writes `left` bytes of `fill` as fast as they are read, never blocking.
struct Flood {
    fill: Vec<u8>,
    left: usize,
    read: usize,
}

impl Read for Flood {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let n = buf.len().min(self.left);
        for (k, b) in buf[..n].iter_mut().enumerate() {
            *b = self.fill[(self.read + k) % self.fill.len()];
        }
        self.left -= n;
        self.read += n;
        Ok(n)
    }
}

#[test]
fn a_rank_writing_without_end_is_read_in_bounded_steps() {
    let mut server = PmiServer::new(2, "kvs");
    let mut out = Vec::new();
    // 64 MiB without a newline: refused after one line's worth, nothing more is read.
    let mut flood = Flood { fill: b"x".to_vec(), left: 64 << 20, read: 0 };
    let mut input = Vec::new();
    let mut most = 0;
    let end = read_bounded(&mut flood, &mut input, usize::MAX, |i| {
        most = most.max(i.len());
        server.on_bytes(0, i, &mut out)
    });
    assert!(matches!(end, ReadEnd::Refused), "{end:?}");
    assert!(flood.read <= LINE_MAX + READ_CHUNK && most <= LINE_MAX + READ_CHUNK, "{} {most}", flood.read);
    assert_eq!(server.refusal(0), Some("a PMI line longer than 4096 bytes"));
    assert_eq!(server.refusal(1), None);
    // Valid requests without end: one turn's reads, each handled as it comes.
    let mut flood = Flood { fill: b"cmd=get_appnum\n".to_vec(), left: 64 << 20, read: 0 };
    let (mut input, mut most) = (Vec::new(), 0);
    out.clear();
    let end = read_bounded(&mut flood, &mut input, READS_PER_TURN, |i| {
        most = most.max(i.len());
        server.on_bytes(1, i, &mut out)
    });
    assert!(matches!(end, ReadEnd::Budget), "{end:?}");
    assert_eq!(flood.read, READS_PER_TURN * READ_CHUNK);
    assert!(most <= READ_CHUNK + 16 && input.len() < 16);
    assert_eq!(out.len(), flood.read / 15, "every request answered");
    // PMI-2: a length field up to the limit, then a body that never ends.
    let mut server = PmiServer::new(1, "kvs");
    let mut input = Vec::new();
    server.on_bytes(0, &mut b"cmd=init pmi_version=2 pmi_subversion=0\n".to_vec(), &mut out);
    let mut framed = format!("{MESSAGE2_MAX:6}").into_bytes();
    framed.resize(64 << 10, b'y');
    let mut flood = Flood { fill: framed, left: 64 << 20, read: 0 };
    let mut most = 0;
    read_bounded(&mut flood, &mut input, usize::MAX, |i| {
        most = most.max(i.len());
        server.on_bytes(0, i, &mut out)
    });
    assert!(most <= 6 + MESSAGE2_MAX + READ_CHUNK, "{most}");
}
