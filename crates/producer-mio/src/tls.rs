//! The mio side of TLS: a non-blocking rustls client connection driven by its socket's
//! readiness. The handshake advances on every readiness event until it completes or fails;
//! once established, ciphertext is read into rustls and plaintext out of it, and the core's
//! frames go into rustls and its records out to the socket as the socket takes them. The
//! rustls configuration (trust anchors, client certificate, name checks) is built in
//! `producer_driver::tls`.

use std::io::{self, IoSlice, Read};

use mio::net::TcpStream;
use producer_driver::tls::rustls::ClientConnection;
use producer_driver::{WriteQueue, MAX_IOV};

/// Where a handshake stands after [`handshake`].
pub(crate) enum Handshake {
    /// Waiting for the socket: call again on its next readiness event.
    Pending,
    /// Established: the connection carries the core's bytes from now on.
    Done,
    /// Failed, for this reason (rustls' text, or the socket's).
    Failed(String),
}

/// Advances the handshake as far as the socket allows.
pub(crate) fn handshake(tls: &mut ClientConnection, stream: &mut TcpStream) -> Handshake {
    loop {
        match flush(tls, stream) {
            Ok(()) => {}
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Handshake::Pending,
            Err(e) => return Handshake::Failed(format!("during the TLS handshake: {e}")),
        }
        if !tls.is_handshaking() {
            return Handshake::Done;
        }
        match tls.read_tls(stream) {
            Ok(0) => return Handshake::Failed(producer_driver::tls::HANDSHAKE_EOF.into()),
            Ok(_) => {
                if let Err(e) = tls.process_new_packets() {
                    // Tell the broker why (the alert rustls queued), as far as it takes it.
                    let _ = flush(tls, stream);
                    return Handshake::Failed(e.to_string());
                }
            }
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Handshake::Pending,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Handshake::Failed(format!("during the TLS handshake: {e}")),
        }
    }
}

/// What one read of an established TLS connection gave.
pub(crate) enum Received {
    /// Plaintext may be ready: take it with [`plaintext`].
    Records,
    /// The socket has nothing more now.
    WouldBlock,
    /// The broker closed the TCP connection.
    Closed,
    /// A TLS error (a fatal alert from the broker, a bad record).
    Tls(String),
    /// A socket error.
    Io(io::Error),
}

/// Reads what the socket has into rustls and decrypts it.
pub(crate) fn receive(tls: &mut ClientConnection, stream: &mut TcpStream) -> Received {
    loop {
        return match tls.read_tls(stream) {
            Ok(0) => Received::Closed,
            Ok(_) => match tls.process_new_packets() {
                Ok(_) => Received::Records,
                Err(e) => {
                    let _ = flush(tls, stream);
                    Received::Tls(e.to_string())
                }
            },
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => Received::WouldBlock,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => Received::Io(e),
        };
    }
}

/// Decrypted bytes into `buf`: `Ok(Some(n))` with `n > 0`, `Ok(None)` when none are left for
/// now, `Ok(Some(0))` when the broker closed the TLS session (close_notify).
pub(crate) fn plaintext(tls: &mut ClientConnection, buf: &mut [u8]) -> io::Result<Option<usize>> {
    match tls.reader().read(buf) {
        Ok(n) => Ok(Some(n)),
        Err(e) if e.kind() == io::ErrorKind::WouldBlock => Ok(None),
        Err(e) => Err(e),
    }
}

/// Encrypts the queued frames and writes the records until both are done or the socket would
/// block (`WouldBlock`: call again when it is writable). rustls buffers at most its buffer
/// limit of records; frames wait in `out` meanwhile.
pub(crate) fn send(
    tls: &mut ClientConnection,
    stream: &mut TcpStream,
    out: &mut WriteQueue,
) -> io::Result<()> {
    loop {
        flush(tls, stream)?;
        if out.is_empty() {
            return Ok(());
        }
        let mut iov = [IoSlice::new(&[]); MAX_IOV];
        let n = out.fill_slices(&mut iov);
        let taken = io::Write::write_vectored(&mut tls.writer(), &iov[..n])?;
        if taken == 0 {
            // Nothing taken with nothing left to flush: rustls cannot take frames now.
            if !tls.wants_write() {
                return Err(io::ErrorKind::WriteZero.into());
            }
            continue;
        }
        out.advance(taken);
    }
}

/// Writes rustls' pending records to the socket until none are left or it would block.
fn flush(tls: &mut ClientConnection, stream: &mut TcpStream) -> io::Result<()> {
    while tls.wants_write() {
        match tls.write_tls(stream) {
            Ok(0) => return Err(io::ErrorKind::WriteZero.into()),
            Ok(_) => {}
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(())
}
