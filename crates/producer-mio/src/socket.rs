//! One connection of a [`crate::MioDriver`]: where it stands, and what it still has to write.

use std::collections::VecDeque;
use std::fmt;
use std::io;
use std::net::SocketAddr;

use mio::event::Event as MioEvent;
use mio::net::TcpStream;
use mio::Token;
use producer_core::ConnId;
use producer_driver::tls::rustls::ClientConnection;
use producer_driver::WriteQueue;

/// Where one connection stands.
pub(crate) enum SockState {
    /// Waiting for the resolver thread.
    Resolving,
    /// Non-blocking connect in progress to one address; `rest` are tried next if it fails.
    Connecting {
        stream: TcpStream,
        addr: SocketAddr,
        rest: VecDeque<SocketAddr>,
    },
    /// TCP established, TLS handshake in progress (`SSL`, `SASL_SSL`).
    Handshaking {
        stream: TcpStream,
        tls: Box<ClientConnection>,
    },
    /// Established (with TLS when `tls` is set); the core knows it.
    Connected {
        stream: TcpStream,
        tls: Option<Box<ClientConnection>>,
    },
}

/// One connection the core asked for.
pub(crate) struct Sock {
    pub(crate) id: ConnId,
    pub(crate) token: Token,
    pub(crate) host: String,
    pub(crate) port: u16,
    pub(crate) state: SockState,
    /// Frames the core transmitted that the socket has not taken yet.
    pub(crate) out: WriteQueue,
    /// The broker sent data on it (a TLS error before that is a TLS setup failure).
    pub(crate) received: bool,
}

impl Sock {
    /// A connection about to be resolved (or connected, for an IP literal).
    pub(crate) fn new(id: ConnId, token: Token, host: String, port: u16) -> Self {
        Sock {
            id,
            token,
            host,
            port,
            state: SockState::Resolving,
            out: WriteQueue::default(),
            received: false,
        }
    }

    /// The socket, once one exists (connecting or connected).
    pub(crate) fn stream_mut(&mut self) -> Option<&mut TcpStream> {
        match &mut self.state {
            SockState::Connecting { stream, .. }
            | SockState::Handshaking { stream, .. }
            | SockState::Connected { stream, .. } => Some(stream),
            SockState::Resolving => None,
        }
    }
}

/// What a readiness event says about a non-blocking connect in progress.
pub(crate) enum ConnectProgress {
    /// Not finished yet.
    Pending,
    /// The connection is established.
    Established,
    /// This address failed; try the next one.
    Failed(ConnectFailure),
}

/// Why a connect to one address failed.
pub(crate) enum ConnectFailure {
    /// The socket reported an error.
    Error(io::Error),
    /// The peer hung up without an error code.
    HungUp,
}

impl fmt::Display for ConnectFailure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ConnectFailure::Error(e) => e.fmt(f),
            ConnectFailure::HungUp => f.write_str("hang-up"),
        }
    }
}

impl ConnectFailure {
    /// As the I/O error the core is told of.
    pub(crate) fn into_io(self) -> io::Error {
        match self {
            ConnectFailure::Error(e) => e,
            ConnectFailure::HungUp => io::Error::new(
                io::ErrorKind::ConnectionAborted,
                "hang-up before the connection was established",
            ),
        }
    }
}

/// Reads the outcome of a non-blocking connect after a readiness `event` for its socket.
pub(crate) fn connect_progress(stream: &TcpStream, event: &MioEvent) -> ConnectProgress {
    let outcome = match stream.take_error() {
        Ok(Some(e)) | Err(e) => Err(e),
        Ok(None) => match stream.peer_addr() {
            Ok(_) => Ok(true),
            Err(e) if e.kind() == io::ErrorKind::NotConnected => Ok(false),
            Err(e) => Err(e),
        },
    };
    match outcome {
        Ok(true) => ConnectProgress::Established,
        // Not finished yet; a hang-up without an error code still fails it.
        Ok(false) if event.is_error() || (event.is_read_closed() && event.is_write_closed()) => {
            ConnectProgress::Failed(ConnectFailure::HungUp)
        }
        Ok(false) => ConnectProgress::Pending,
        Err(e) => ConnectProgress::Failed(ConnectFailure::Error(e)),
    }
}
