//! The run loop of the sans-IO producer written out by hand on plain mio: what a driver does,
//! in one screen. Run it with no arguments to produce to an embedded mock cluster, or with
//! `--brokers host:port,...` to produce to a real one.
//!
//! ```text
//! cargo run --release --example custom_event_loop [-- --brokers host:port]
//! ```

use std::collections::HashMap;
use std::io::{self, ErrorKind, Read, Write};
use std::net::ToSocketAddrs;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use mio::net::TcpStream;
use mio::{Events, Interest, Poll, Token};
use producer_core::{Config, ConnId, Output, Producer, Record};

/// One socket and the bytes still to write on it.
struct Socket {
    stream: TcpStream,
    conn: ConnId,
    connecting: bool,
    out: Vec<u8>,
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().collect();
    // With no --brokers, an embedded mock cluster (kept alive until the end of main).
    let mock = match args.iter().position(|a| a == "--brokers") {
        Some(_) => None,
        None => Some(producer_tests::MockKafka::new(3, &[("events", 6)])?),
    };
    let bootstrap = match (&mock, args.iter().position(|a| a == "--brokers")) {
        (Some(m), _) => m.bootstrap(),
        (None, Some(i)) => {
            producer_tests::parse_bootstrap(args.get(i + 1).map_or("", String::as_str))
        }
        (None, None) => unreachable!(),
    };
    let mut producer = Producer::<u64>::new(Config::builder(bootstrap).build()?, Instant::now());
    let total = 10_000u64;
    let now_ms = SystemTime::now().duration_since(UNIX_EPOCH)?.as_millis() as i64;
    for i in 0..total {
        let record = Record::new("events", format!("event {i}"))
            .with_key(format!("user-{}", i % 100))
            .with_timestamp(now_ms);
        producer
            .send(Instant::now(), record, i)
            .map_err(|e| e.reason)?;
    }
    producer.flush(Instant::now());

    let mut poll = Poll::new()?;
    let mut events = Events::with_capacity(256);
    let mut sockets: HashMap<Token, Socket> = HashMap::new();
    let mut tokens: HashMap<ConnId, Token> = HashMap::new();
    let (mut delivered, mut failed) = (0u64, 0u64);
    let mut buf = vec![0u8; 64 * 1024];

    while delivered + failed < total {
        // 1. Do everything the producer asks for.
        while let Some(output) = producer.poll_output() {
            match output {
                Output::Connect { conn, host, port } => {
                    // Resolution blocks here for brevity; a real driver resolves off the loop.
                    let addr = (host.as_str(), port)
                        .to_socket_addrs()
                        .ok()
                        .and_then(|mut a| a.next());
                    match addr.map(TcpStream::connect) {
                        Some(Ok(mut stream)) => {
                            let token = Token(conn.as_u64() as usize);
                            poll.registry().register(
                                &mut stream,
                                token,
                                Interest::READABLE | Interest::WRITABLE,
                            )?;
                            sockets.insert(
                                token,
                                Socket {
                                    stream,
                                    conn,
                                    connecting: true,
                                    out: Vec::new(),
                                },
                            );
                            tokens.insert(conn, token);
                        }
                        Some(Err(e)) => producer.handle_connect_failed(Instant::now(), conn, e),
                        None => {
                            let e = io::Error::new(ErrorKind::NotFound, "no address for the name");
                            producer.handle_connect_failed(Instant::now(), conn, e)
                        }
                    }
                }
                Output::Transmit { conn, bytes } => {
                    if let Some(s) = tokens.get(&conn).and_then(|t| sockets.get_mut(t)) {
                        for piece in bytes.pieces() {
                            s.out.extend_from_slice(piece);
                        }
                    }
                }
                Output::Disconnect { conn } => {
                    if let Some(t) = tokens.remove(&conn) {
                        sockets.remove(&t);
                    }
                }
                Output::Delivery(d) => match d.result {
                    Ok(_) => delivered += 1,
                    Err(f) => {
                        eprintln!("record {} failed: {}", d.opaque, f.error);
                        failed += 1;
                    }
                },
                Output::Event(e) => eprintln!("event: {e:?}"),
                // Only for a transactional producer, which this example is not.
                Output::Transaction(r) => eprintln!("transaction: {r:?}"),
                // Only for SASL OAUTHBEARER, which this example does not configure.
                Output::TokenRequest => {
                    producer.handle_token(Instant::now(), Err("no token provider".into()))
                }
            }
        }
        // Every record has its report: stop before blocking in poll (whose timeout may be the
        // producer's next housekeeping deadline, tens of seconds away).
        if delivered + failed == total {
            break;
        }
        // 2. Write what is pending (a real driver waits for WRITABLE when the socket is full).
        for s in sockets
            .values_mut()
            .filter(|s| !s.connecting && !s.out.is_empty())
        {
            match s.stream.write(&s.out) {
                Ok(n) => drop(s.out.drain(..n)),
                Err(e) if e.kind() == ErrorKind::WouldBlock => {}
                Err(_) => s.out.clear(), // the read side reports the broken connection
            }
        }
        // 3. Sleep until I/O or the producer's deadline.
        let timeout = producer
            .poll_timeout()
            .map(|t| t.saturating_duration_since(Instant::now()));
        poll.poll(&mut events, timeout.or(Some(Duration::from_millis(100))))?;
        let now = Instant::now();
        // 4. Feed what happened back.
        for event in events.iter() {
            let Some(s) = sockets.get_mut(&event.token()) else {
                continue;
            };
            let conn = s.conn;
            if s.connecting && event.is_writable() {
                let failure = match s.stream.take_error()? {
                    Some(e) => Some(e),
                    None => s.stream.peer_addr().err(),
                };
                if let Some(e) = failure {
                    sockets.remove(&event.token());
                    producer.handle_connect_failed(now, conn, e);
                    continue;
                }
                s.connecting = false;
                producer.handle_connected(now, conn);
            }
            let mut closed = None;
            if event.is_readable() {
                loop {
                    match s.stream.read(&mut buf) {
                        Ok(0) => {
                            let e =
                                io::Error::new(ErrorKind::UnexpectedEof, "closed by the broker");
                            break closed = Some(e);
                        }
                        Ok(n) => producer.handle_read(now, conn, &buf[..n]),
                        Err(e) if e.kind() == ErrorKind::WouldBlock => break,
                        Err(e) => break closed = Some(e),
                    }
                }
            }
            if let Some(reason) = closed {
                sockets.remove(&event.token());
                producer.handle_disconnected(now, conn, reason);
            }
        }
        if producer.poll_timeout().is_some_and(|t| t <= now) {
            producer.handle_timeout(now);
        }
    }
    println!("delivered {delivered}, failed {failed}");
    drop(mock);
    Ok(())
}
