//! One connection task: connects, reads into a reusable buffer and forwards the chunks to the
//! producer task, and writes the frames the producer task hands it, whole and in order.

use std::io;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use bytes::{Bytes, BytesMut};
use producer_core::ConnId;
use producer_driver::{WriteQueue, MAX_IOV};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::sync::mpsc;
use tracing::{debug, info, warn};

/// What a connection task tells the producer task.
pub(crate) enum Net {
    Connected(ConnId),
    ConnectFailed(ConnId),
    Data(ConnId, Bytes),
    /// The connection's write backlog fell back under the limit.
    Drained(ConnId),
    Closed(ConnId),
}

/// What a connection task owns.
pub(crate) struct ConnIo {
    pub(crate) conn: ConnId,
    /// Frames to write, in order; closed by the producer task when the core closes the
    /// connection (the task writes what is queued, then closes).
    pub(crate) frames: mpsc::UnboundedReceiver<Bytes>,
    pub(crate) net: mpsc::Sender<Net>,
    /// Bytes handed over and not yet written (shared with the producer task).
    pub(crate) backlog: Arc<AtomicUsize>,
    pub(crate) backlog_limit: usize,
    pub(crate) read_buffer: usize,
}

impl ConnIo {
    /// Connects, then reads and writes until either side ends; reports each step to the
    /// producer task. The attempt has no deadline of its own: the core's `request_timeout`
    /// bounds it, and the producer task aborts this task when the core gives up.
    pub(crate) async fn run(self, host: String, port: u16) {
        let ConnIo {
            conn,
            mut frames,
            net,
            backlog,
            backlog_limit,
            read_buffer,
        } = self;
        let id = conn.as_u64();
        debug!(conn = id, %host, port, "connecting");
        // tokio resolves the host name off the event loop.
        let stream = match TcpStream::connect((host.as_str(), port)).await {
            Ok(s) => s,
            Err(e) => {
                warn!(conn = id, %host, port, error = %e, "connection failed");
                let _ = net.send(Net::ConnectFailed(conn)).await;
                return;
            }
        };
        let _ = stream.set_nodelay(true);
        info!(conn = id, %host, port, "connected");
        if net.send(Net::Connected(conn)).await.is_err() {
            return;
        }
        let (mut rd, mut wr) = stream.into_split();
        let reader = async {
            let mut buf = BytesMut::with_capacity(read_buffer);
            loop {
                // Reclaims the space of chunks the producer task has finished with.
                buf.reserve(read_buffer);
                match rd.read_buf(&mut buf).await {
                    Ok(0) => return None,
                    Ok(_) => {
                        if net
                            .send(Net::Data(conn, buf.split().freeze()))
                            .await
                            .is_err()
                        {
                            return None;
                        }
                    }
                    Err(e) => return Some(e),
                }
            }
        };
        let writer = async {
            let mut pending = WriteQueue::default();
            loop {
                if pending.is_empty() {
                    match frames.recv().await {
                        Some(frame) => pending.push(frame),
                        None => break,
                    }
                }
                // Everything queued goes out in one vectored write (one syscall for many
                // frames when the producer task transmitted several at once).
                while pending.frames() < MAX_IOV {
                    match frames.try_recv() {
                        Ok(frame) => pending.push(frame),
                        Err(_) => break,
                    }
                }
                let mut iov = [io::IoSlice::new(&[]); MAX_IOV];
                let count = pending.fill_slices(&mut iov);
                let n = wr.write_vectored(&iov[..count]).await?;
                if n == 0 {
                    return Err(io::ErrorKind::WriteZero.into());
                }
                pending.advance(n);
                let before = backlog.fetch_sub(n, Ordering::AcqRel);
                if before > backlog_limit && before - n <= backlog_limit {
                    let _ = net.send(Net::Drained(conn)).await;
                }
            }
            Ok::<(), io::Error>(())
        };
        let err = tokio::select! {
            e = reader => e,
            r = writer => match r {
                // The producer task dropped its sender: every queued frame is written; close.
                Ok(()) => {
                    let _ = wr.shutdown().await;
                    debug!(conn = id, "closed after writing every queued frame");
                    return;
                }
                Err(e) => Some(e),
            },
        };
        match err {
            Some(e) => info!(conn = id, %host, port, error = %e, "connection lost"),
            None => info!(conn = id, %host, port, "connection closed by the peer"),
        }
        let _ = net.send(Net::Closed(conn)).await;
    }
}
