//! The driver's sockets: connecting (address after address), reading into the core, writing
//! the core's frames as the socket takes them, and forgetting a connection.

use std::collections::VecDeque;
use std::io::{self, Read, Write};
use std::net::{IpAddr, SocketAddr};
use std::time::Instant;

use mio::event::Event as MioEvent;
use mio::net::TcpStream;
use mio::Interest;
use producer_core::{ConnId, WireBytes};

use super::MioDriver;
use crate::sink::DeliverySink;
use crate::socket::{connect_progress, ConnectProgress, Sock, SockState};
use crate::tls::{self, Handshake, Received};
use producer_driver::ReadSizing;

impl<T, S: DeliverySink<T>> MioDriver<T, S> {
    pub(super) fn start_connection(&mut self, now: Instant, conn: ConnId, host: String, port: u16) {
        let key = conn.as_u64();
        if let Some(old) = self.remove(key) {
            // Cannot happen (ConnIds are unique); never leak a socket if it does.
            tracing::debug!(host = %old.host, conn = key, "replacing connection with the same id");
        }
        let Some(slot) = self.free_tokens.pop_front() else {
            tracing::warn!(%host, port, "no free token in the driver's token range; connection attempt fails");
            let reason = io::Error::other("no free token in the driver's token range");
            self.core.handle_connect_failed(now, conn, reason);
            return;
        };
        let token = self.tokens.connection_token(slot);
        self.by_token[slot] = Some(key);
        tracing::info!(%host, port, conn = key, "connecting");
        let literal = host
            .trim_start_matches('[')
            .trim_end_matches(']')
            .parse::<IpAddr>()
            .ok();
        let sock = Sock::new(conn, token, host, port);
        let (host, port) = (sock.host.clone(), sock.port);
        self.socks.insert(key, sock);
        match literal {
            Some(ip) => {
                self.connect_next(now, key, VecDeque::from([SocketAddr::new(ip, port)]), None)
            }
            None => {
                if let Err(e) = self.resolver.resolve(key, host.clone(), port) {
                    tracing::warn!(%host, port, error = %e, "cannot start name resolution");
                    self.connect_failed(now, key, e);
                }
            }
        }
    }

    /// Starts a non-blocking connect to the first address of `addrs`; the others are tried in
    /// turn if it fails. With none left, the connection fails with the last address's error
    /// (`last`: that of an earlier address whose attempt already failed).
    pub(super) fn connect_next(
        &mut self,
        now: Instant,
        key: u64,
        mut addrs: VecDeque<SocketAddr>,
        mut last: Option<io::Error>,
    ) {
        while let Some(addr) = addrs.pop_front() {
            let Some(s) = self.socks.get_mut(&key) else {
                return;
            };
            let attempt = TcpStream::connect(addr).and_then(|mut stream| {
                self.registry.register(
                    &mut stream,
                    s.token,
                    Interest::READABLE | Interest::WRITABLE,
                )?;
                Ok(stream)
            });
            match attempt {
                Ok(stream) => {
                    s.state = SockState::Connecting {
                        stream,
                        addr,
                        rest: addrs,
                    };
                    return;
                }
                Err(e) => {
                    tracing::warn!(host = %s.host, %addr, error = %e, "connect failed");
                    last = Some(e);
                }
            }
        }
        let reason = last
            .unwrap_or_else(|| io::Error::new(io::ErrorKind::NotFound, "no address to connect to"));
        self.connect_failed(now, key, reason);
    }

    /// Drops a connection that never got established and tells the core why.
    pub(super) fn connect_failed(&mut self, now: Instant, key: u64, reason: io::Error) {
        if let Some(s) = self.remove(key) {
            self.core.handle_connect_failed(now, s.id, reason);
        }
    }

    /// Drops an established connection that failed and tells the core why.
    fn lost(&mut self, now: Instant, key: u64, why: io::Error) {
        if let Some(s) = self.remove(key) {
            tracing::warn!(host = %s.host, port = s.port, conn = key, reason = %why, "connection lost");
            self.core.handle_disconnected(now, s.id, why);
        }
    }

    /// Drops a connection whose TLS setup failed and tells the core (an authentication
    /// failure: the records waiting fail at once).
    fn tls_failed(&mut self, now: Instant, key: u64, reason: String) {
        if let Some(s) = self.remove(key) {
            tracing::warn!(host = %s.host, port = s.port, conn = key, %reason, "TLS handshake failed");
            self.core.handle_tls_failed(now, s.id, reason);
        }
    }

    /// Forgets a connection: deregisters and closes its socket, frees its token.
    pub(super) fn remove(&mut self, key: u64) -> Option<Sock> {
        let mut s = self.socks.remove(&key)?;
        if let Some(stream) = s.stream_mut() {
            let _ = self.registry.deregister(stream);
        }
        if let Some(slot) = self.tokens.connection_slot(s.token) {
            self.by_token[slot] = None;
            self.free_tokens.push_back(slot);
        }
        Some(s)
    }

    pub(super) fn on_socket_event(&mut self, now: Instant, key: u64, event: &MioEvent) {
        let Some(s) = self.socks.get_mut(&key) else {
            return;
        };
        match &mut s.state {
            SockState::Resolving => {}
            SockState::Connecting { stream, addr, rest } => match connect_progress(stream, event) {
                ConnectProgress::Pending => {}
                ConnectProgress::Failed(why) => {
                    tracing::warn!(host = %s.host, %addr, error = %why, "connect failed");
                    let rest = std::mem::take(rest);
                    let _ = self.registry.deregister(stream);
                    s.state = SockState::Resolving;
                    self.connect_next(now, key, rest, Some(why.into_io()));
                }
                ConnectProgress::Established => {
                    let addr = *addr;
                    let SockState::Connecting { stream, .. } =
                        std::mem::replace(&mut s.state, SockState::Resolving)
                    else {
                        return;
                    };
                    if let Err(e) = stream.set_nodelay(true) {
                        tracing::debug!(error = %e, "set_nodelay failed");
                    }
                    tracing::info!(host = %s.host, %addr, conn = key, "connected");
                    let Some(setup) = &self.tls else {
                        s.state = SockState::Connected { stream, tls: None };
                        let id = s.id;
                        // The core answers with ApiVersions; handle_event's drive() writes it
                        // at once (the socket is writable now).
                        self.core.handle_connected(now, id);
                        return;
                    };
                    match setup.connect(&s.host) {
                        Ok(tls) => {
                            s.state = SockState::Handshaking {
                                stream,
                                tls: Box::new(tls),
                            };
                            self.advance_handshake(now, key);
                        }
                        Err(e) => {
                            s.state = SockState::Connected { stream, tls: None };
                            self.tls_failed(now, key, e.to_string());
                        }
                    }
                }
            },
            SockState::Handshaking { .. } => self.advance_handshake(now, key),
            SockState::Connected { tls, .. } => {
                // Reading TLS may leave records for rustls to send (an alert, a key update).
                let tls = tls.is_some();
                if event.is_readable() || event.is_read_closed() || event.is_error() {
                    self.read_in(now, key);
                }
                if tls || event.is_writable() || event.is_write_closed() {
                    self.write_out(now, key);
                }
            }
        }
    }

    /// Moves the TLS handshake on; once done, the core is told the connection is up.
    fn advance_handshake(&mut self, now: Instant, key: u64) {
        let Some(s) = self.socks.get_mut(&key) else {
            return;
        };
        let SockState::Handshaking { stream, tls: conn } = &mut s.state else {
            return;
        };
        match tls::handshake(conn, stream) {
            Handshake::Pending => {}
            Handshake::Failed(reason) => self.tls_failed(now, key, reason),
            Handshake::Done => {
                let SockState::Handshaking { stream, tls } =
                    std::mem::replace(&mut s.state, SockState::Resolving)
                else {
                    return;
                };
                s.state = SockState::Connected {
                    stream,
                    tls: Some(tls),
                };
                tracing::info!(host = %s.host, port = s.port, conn = key, "TLS established");
                let id = s.id;
                self.core.handle_connected(now, id);
            }
        }
    }

    /// Reads until `WouldBlock`, feeding the core.
    fn read_in(&mut self, now: Instant, key: u64) {
        loop {
            let Some(Sock {
                state: SockState::Connected { stream, tls },
                id,
                received,
                ..
            }) = self.socks.get_mut(&key)
            else {
                return;
            };
            let id = *id;
            let Some(tls) = tls else {
                let offered = size_read_buf(&mut self.read_buf, &self.read_sizing);
                match stream.read(&mut self.read_buf) {
                    Ok(0) => return self.lost(now, key, closed_by_broker()),
                    Ok(n) => {
                        self.read_sizing.after_read(offered, n);
                        self.last_read = now;
                        self.core.handle_read(now, id, &self.read_buf[..n]);
                        // Act on the responses at once: new requests go out while reading, and
                        // a connection the core dropped (bad bytes) is closed before reading
                        // more.
                        self.drive(now);
                    }
                    Err(e) if e.kind() == io::ErrorKind::WouldBlock => return,
                    Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                    Err(e) => return self.lost(now, key, e),
                }
                continue;
            };
            match tls::receive(tls, stream) {
                Received::Records => {}
                Received::WouldBlock => return,
                Received::Closed => return self.lost(now, key, closed_by_broker()),
                Received::Io(e) => return self.lost(now, key, e),
                // A TLS 1.3 broker that rejects the client's certificate says so in its first
                // record after the handshake: still a TLS setup failure.
                Received::Tls(reason) if !*received => return self.tls_failed(now, key, reason),
                Received::Tls(reason) => {
                    let why = io::Error::new(io::ErrorKind::InvalidData, reason);
                    return self.lost(now, key, why);
                }
            }
            self.take_plaintext(now, key);
        }
    }

    /// Hands every decrypted byte of `key`'s TLS session to the core.
    fn take_plaintext(&mut self, now: Instant, key: u64) {
        loop {
            let Some(Sock {
                state: SockState::Connected { tls: Some(tls), .. },
                id,
                received,
                ..
            }) = self.socks.get_mut(&key)
            else {
                return;
            };
            let id = *id;
            let offered = size_read_buf(&mut self.read_buf, &self.read_sizing);
            match tls::plaintext(tls, &mut self.read_buf) {
                Ok(None) => return,
                Ok(Some(0)) => {
                    let why = io::Error::new(
                        io::ErrorKind::UnexpectedEof,
                        "TLS session closed by the broker",
                    );
                    return self.lost(now, key, why);
                }
                Ok(Some(n)) => {
                    *received = true;
                    self.read_sizing.after_read(offered, n);
                    self.last_read = now;
                    self.core.handle_read(now, id, &self.read_buf[..n]);
                    self.drive(now);
                }
                Err(e) => return self.lost(now, key, e),
            }
        }
    }

    pub(super) fn transmit(&mut self, now: Instant, conn: ConnId, bytes: WireBytes) {
        let key = conn.as_u64();
        let Some(s) = self.socks.get_mut(&key) else {
            return;
        };
        if bytes.is_empty() {
            return;
        }
        s.out.push_wire(bytes);
        if s.out.queued_bytes() > self.max_queued_bytes {
            // The core bounds what it has in flight, so this means the socket is stuck.
            let why = format!(
                "{} bytes queued for writing, above the limit of {}",
                s.out.queued_bytes(),
                self.max_queued_bytes
            );
            return self.lost(now, key, io::Error::other(why));
        }
        if matches!(s.state, SockState::Connected { .. }) {
            self.write_out(now, key);
        }
    }

    /// Writes queued frames until the queue is empty or the socket would block.
    fn write_out(&mut self, now: Instant, key: u64) {
        let Some(s) = self.socks.get_mut(&key) else {
            return;
        };
        let SockState::Connected { stream, tls } = &mut s.state else {
            return;
        };
        let written = match tls {
            Some(tls) => tls::send(tls, stream, &mut s.out),
            None => s.out.write_with(|iov| stream.write_vectored(iov)),
        };
        match written {
            Ok(()) => {}
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
            Err(e) => self.lost(now, key, e),
        }
    }
}

/// The reason given to the core when the broker closed a connection.
fn closed_by_broker() -> io::Error {
    io::Error::new(io::ErrorKind::UnexpectedEof, "closed by the broker")
}

/// Gives the shared read buffer the size `sizing` wants for the next read (its allocation
/// follows when it shrinks to less than half); that size.
pub(super) fn size_read_buf(buf: &mut Vec<u8>, sizing: &ReadSizing) -> usize {
    let want = sizing.next();
    if buf.len() != want {
        buf.resize(want, 0);
        if buf.capacity() > 2 * want {
            buf.shrink_to_fit();
        }
    }
    want
}
