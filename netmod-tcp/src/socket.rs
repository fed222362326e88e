//! The socket calls that are not one peer's state: every write of the netmod
//! ([`send_nosignal`], never a SIGPIPE), whole short frames ([`send_all`]), the listening socket
//! ([`bind`]), and the error a failed call becomes ([`io_err`]).

use std::io::{self, IoSlice};
use std::net::{IpAddr, SocketAddr, TcpListener, TcpStream};

use nemesis_shm::Error;

/// Writes `bufs` to `sock` with `sendmsg(MSG_NOSIGNAL)`: a write to a connection the peer reset
/// is an `EPIPE` error, never a SIGPIPE (which kills a C program: only Rust's runtime ignores it;
/// `write_vectored` is a plain `writev`). Every write of this netmod goes through here.
pub fn send_nosignal(sock: &TcpStream, bufs: &[IoSlice<'_>]) -> io::Result<usize> {
    socket2::SockRef::from(sock).send_vectored_with_flags(bufs, libc::MSG_NOSIGNAL)
}

/// [`send_nosignal`] until all of `buf` is written (short frames of the handshake).
pub(crate) fn send_all(sock: &TcpStream, mut buf: &[u8]) -> io::Result<()> {
    while !buf.is_empty() {
        match send_nosignal(sock, &[IoSlice::new(buf)]) {
            Ok(0) => return Err(io::ErrorKind::WriteZero.into()),
            Ok(n) => buf = &buf[n..],
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

/// A listener on `ip`:`port` with room for a burst of connections in the kernel's queue.
pub(crate) fn bind(ip: IpAddr, port: u16) -> io::Result<TcpListener> {
    let addr = SocketAddr::new(ip, port);
    let s = socket2::Socket::new(socket2::Domain::for_address(addr), socket2::Type::STREAM, None)?;
    s.bind(&addr.into())?;
    s.listen(1024)?;
    Ok(s.into())
}

pub(crate) fn io_err(what: &str, e: io::Error) -> Error {
    Error::Net(format!("{what}: {e}"))
}
