//! One connection task: connects (and for `SSL`/`SASL_SSL` completes the TLS handshake), reads
//! into a reusable buffer and forwards the chunks to the producer task, and writes the frames
//! the producer task hands it, whole and in order.

use std::io;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use bytes::{Bytes, BytesMut};
use producer_core::{ConnId, WireBytes};
use producer_driver::tls::{self, TlsSetup};
use producer_driver::{ReadSizing, WriteQueue, MAX_IOV};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::sync::mpsc;
use tracing::{debug, info, warn};

/// What a connection task (or the token provider's task) tells the producer task.
pub(crate) enum Net {
    /// The OAUTHBEARER token provider's answer.
    /// (A provider that panicked: the event that names it.)
    Token(Result<crate::token::TokenResult, producer_core::Event>),
    Connected(ConnId),
    /// The connection attempt failed (the OS error of the last address tried).
    ConnectFailed(ConnId, io::Error),
    /// The TLS handshake failed, or the broker's first TLS record was a fatal alert (as a TLS
    /// 1.3 server sends after the handshake when it rejects the client's certificate); the
    /// reason is rustls' text.
    TlsFailed(ConnId, String),
    Data(ConnId, Bytes),
    /// The connection's write backlog fell back under the limit.
    Drained(ConnId),
    /// The established connection was lost: the I/O error, or `UnexpectedEof` when the peer
    /// closed it.
    Closed(ConnId, io::Error),
}

/// What a connection task owns.
pub(crate) struct ConnIo {
    pub(crate) conn: ConnId,
    /// Frames to write, in order; closed by the producer task when the core closes the
    /// connection (the task writes what is queued, then closes).
    pub(crate) frames: mpsc::UnboundedReceiver<WireBytes>,
    pub(crate) net: mpsc::Sender<Net>,
    /// Bytes handed over and not yet written (shared with the producer task).
    pub(crate) backlog: Arc<AtomicUsize>,
    pub(crate) backlog_limit: usize,
    pub(crate) read_buffer: usize,
    /// Wraps the connection in TLS (`SSL`, `SASL_SSL`).
    pub(crate) tls: Option<TlsSetup>,
}

/// How an established connection ended.
enum End {
    /// The producer task closed the frame channel and every queued frame was written.
    Finished,
    /// The peer closed it (`None`) or an I/O error.
    Lost(Option<io::Error>),
    /// A TLS error before the broker sent any data: the TLS setup failed after all.
    Tls(String),
}

/// The rustls error inside an I/O error from a TLS stream, if that is what it is.
fn rustls_error(e: &io::Error) -> Option<&tls::rustls::Error> {
    e.get_ref()?.downcast_ref()
}

impl ConnIo {
    /// Connects, then reads and writes until either side ends; reports each step to the
    /// producer task. The attempt (TLS handshake included) has no deadline of its own: the
    /// core's `request_timeout` bounds it, and the producer task aborts this task when the
    /// core gives up.
    pub(crate) async fn run(mut self, host: String, port: u16) {
        let conn = self.conn;
        let id = conn.as_u64();
        debug!(conn = id, %host, port, "connecting");
        // tokio resolves the host name off the event loop.
        let stream = match TcpStream::connect((host.as_str(), port)).await {
            Ok(s) => s,
            Err(e) => {
                warn!(conn = id, %host, port, error = %e, "connection failed");
                let _ = self.net.send(Net::ConnectFailed(conn, e)).await;
                return;
            }
        };
        let _ = stream.set_nodelay(true);
        let end = match self.tls.take() {
            None => {
                info!(conn = id, %host, port, "connected");
                self.serve(stream).await
            }
            Some(setup) => match tls::server_name(&host) {
                Err(e) => End::Tls(e.to_string()),
                Ok(name) => {
                    let connector = tokio_rustls::TlsConnector::from(setup.client_config().clone());
                    match connector.connect(name, stream).await {
                        Ok(stream) => {
                            info!(conn = id, %host, port, "connected (TLS)");
                            self.serve(stream).await
                        }
                        // tokio-rustls says "tls handshake eof": say it as every driver does.
                        Err(e) if e.kind() == std::io::ErrorKind::UnexpectedEof => {
                            End::Tls(tls::HANDSHAKE_EOF.into())
                        }
                        Err(e) => End::Tls(e.to_string()),
                    }
                }
            },
        };
        let msg = match end {
            End::Finished => {
                debug!(conn = id, "closed after writing every queued frame");
                return;
            }
            End::Lost(Some(e)) => {
                info!(conn = id, %host, port, error = %e, "connection lost");
                Net::Closed(conn, e)
            }
            End::Lost(None) => {
                info!(conn = id, %host, port, "connection closed by the peer");
                let e = io::Error::new(io::ErrorKind::UnexpectedEof, "closed by the broker");
                Net::Closed(conn, e)
            }
            End::Tls(reason) => {
                warn!(conn = id, %host, port, %reason, "TLS handshake failed");
                Net::TlsFailed(conn, reason)
            }
        };
        let _ = self.net.send(msg).await;
    }

    /// Tells the producer task the connection is up, then reads and writes `stream` (plain
    /// TCP or TLS) until either side ends.
    async fn serve<S: AsyncRead + AsyncWrite>(&mut self, stream: S) -> End {
        let ConnIo {
            conn,
            frames,
            net,
            backlog,
            backlog_limit,
            read_buffer,
            ..
        } = self;
        let (conn, backlog_limit, read_buffer) = (*conn, *backlog_limit, *read_buffer);
        if net.send(Net::Connected(conn)).await.is_err() {
            return End::Finished;
        }
        let (mut rd, mut wr) = tokio::io::split(stream);
        let reader = async {
            // The buffer grows with the connection's traffic and shrinks back when it stops.
            let mut sizing = ReadSizing::new(read_buffer);
            let mut buf = BytesMut::new();
            let mut received = false;
            loop {
                let want = sizing.next();
                if buf.capacity() > 2 * want {
                    // Lets a large allocation go (once the producer task has finished with the
                    // chunks read into it) rather than keep it for a small read.
                    buf = BytesMut::new();
                }
                // Reclaims the space of chunks the producer task has finished with.
                buf.reserve(want);
                let offered = buf.capacity();
                let read = if sizing.is_grown() {
                    // A grown buffer goes back to the minimum when nothing comes for a while.
                    match tokio::time::timeout(ReadSizing::IDLE, rd.read_buf(&mut buf)).await {
                        Ok(read) => read,
                        Err(_) => {
                            sizing.idle();
                            continue;
                        }
                    }
                } else {
                    rd.read_buf(&mut buf).await
                };
                match read {
                    Ok(0) => return End::Lost(None),
                    Ok(n) => {
                        sizing.after_read(offered, n);
                        received = true;
                        if net
                            .send(Net::Data(conn, buf.split().freeze()))
                            .await
                            .is_err()
                        {
                            return End::Lost(None);
                        }
                    }
                    Err(e) => {
                        return match rustls_error(&e) {
                            Some(t) if !received => End::Tls(t.to_string()),
                            _ => End::Lost(Some(e)),
                        }
                    }
                }
            }
        };
        let writer = async {
            let mut pending = WriteQueue::default();
            loop {
                if pending.is_empty() {
                    match frames.recv().await {
                        Some(frame) => pending.push_wire(frame),
                        None => break,
                    }
                }
                // Everything queued goes out in one vectored write (one syscall for many
                // frames when the producer task transmitted several at once).
                while pending.frames() < MAX_IOV {
                    match frames.try_recv() {
                        Ok(frame) => pending.push_wire(frame),
                        Err(_) => break,
                    }
                }
                let mut iov = [io::IoSlice::new(&[]); MAX_IOV];
                let count = pending.fill_slices(&mut iov);
                let n = wr.write_vectored(&iov[..count]).await?;
                if n == 0 {
                    return Err(io::ErrorKind::WriteZero.into());
                }
                // A TLS stream buffers what it encrypts: push it to the socket now.
                if pending.queued_bytes() == n && frames.is_empty() {
                    wr.flush().await?;
                }
                pending.advance(n);
                let before = backlog.fetch_sub(n, Ordering::AcqRel);
                if before > backlog_limit && before - n <= backlog_limit {
                    let _ = net.send(Net::Drained(conn)).await;
                }
            }
            Ok::<(), io::Error>(())
        };
        tokio::pin!(reader);
        tokio::select! {
            end = &mut reader => end,
            r = writer => match r {
                // The producer task dropped its sender: every queued frame is written; close.
                Ok(()) => {
                    let _ = wr.shutdown().await;
                    End::Finished
                }
                // A broker that rejects the client during the TLS 1.3 handshake's last flight
                // closes the connection after its alert; the first write may fail on the
                // closed socket before the alert is read. The reader ends at once on it (the
                // socket is closed); it says whether this was TLS.
                Err(e) if matches!(
                    e.kind(),
                    io::ErrorKind::BrokenPipe | io::ErrorKind::ConnectionReset
                ) =>
                {
                    match reader.await {
                        End::Tls(reason) => End::Tls(reason),
                        _ => End::Lost(Some(e)),
                    }
                }
                Err(e) => End::Lost(Some(e)),
            },
        }
    }
}
