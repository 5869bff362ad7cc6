//! A broker that speaks just enough Kafka to take an OAUTHBEARER token, for the drivers'
//! token-provider tests (librdkafka's mock has no SASL): it answers ApiVersions (listing
//! SaslHandshake and SaslAuthenticate), accepts OAUTHBEARER in SaslHandshake, records the
//! client's first SaslAuthenticate message (RFC 7628: `n,,\x01auth=Bearer <token>\x01...`)
//! and rejects it with SASL_AUTHENTICATION_FAILED, so the producer fails its records with a
//! typed authentication error. The codec is the independent `kafka-protocol` crate.
//!
//! Proving a token is *accepted* end to end is the Apache Kafka tier's job (the unsecured JWS
//! validator); this one proves the driver's plumbing: the provider is called, and its token is
//! what goes on the wire.

use std::io::{self, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;

use bytes::{Bytes, BytesMut};
use kafka_protocol::messages::api_versions_response::ApiVersion;
use kafka_protocol::messages::{
    ApiKey, ApiVersionsResponse, RequestHeader, ResponseHeader, SaslAuthenticateRequest,
    SaslAuthenticateResponse, SaslHandshakeResponse,
};
use kafka_protocol::protocol::{Decodable, Encodable, StrBytes};

/// The error code the broker rejects every token with (SASL_AUTHENTICATION_FAILED).
pub const REJECTED: i16 = 58;
/// The message it rejects them with.
pub const REJECTION_MESSAGE: &str = "oauth test broker: tokens are recorded, never accepted";

/// A broker on `127.0.0.1` that records the OAUTHBEARER messages it receives. Stops on drop.
pub struct OAuthBroker {
    port: u16,
    messages: Arc<Mutex<Vec<Vec<u8>>>>,
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl OAuthBroker {
    /// Starts it on a port of its own.
    pub fn start() -> io::Result<OAuthBroker> {
        let listener = TcpListener::bind("127.0.0.1:0")?;
        let port = listener.local_addr()?.port();
        let messages = Arc::new(Mutex::new(Vec::new()));
        let stop = Arc::new(AtomicBool::new(false));
        let (m, stopped) = (messages.clone(), stop.clone());
        let thread = std::thread::Builder::new()
            .name("oauth-broker".into())
            .spawn(move || {
                for conn in listener.incoming() {
                    if stopped.load(Ordering::Acquire) {
                        return;
                    }
                    let Ok(conn) = conn else { continue };
                    let m = m.clone();
                    // Each connection ends when the producer closes it.
                    std::thread::spawn(move || {
                        let _ = serve(conn, &m);
                    });
                }
            })?;
        Ok(OAuthBroker {
            port,
            messages,
            stop,
            thread: Some(thread),
        })
    }

    /// The producer's bootstrap.
    pub fn bootstrap(&self) -> Vec<(String, u16)> {
        vec![("127.0.0.1".into(), self.port)]
    }

    /// The client's first SaslAuthenticate messages, in the order they came.
    pub fn messages(&self) -> Vec<Vec<u8>> {
        self.messages.lock().expect("messages").clone()
    }
}

impl Drop for OAuthBroker {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Release);
        // Wakes the accept loop, which sees the flag and ends.
        let _ = TcpStream::connect(("127.0.0.1", self.port));
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

fn read_frame(conn: &mut TcpStream) -> io::Result<Bytes> {
    let mut len = [0u8; 4];
    conn.read_exact(&mut len)?;
    let len = i32::from_be_bytes(len);
    let len = usize::try_from(len).map_err(|_| io::Error::other("negative frame size"))?;
    if len > 1 << 20 {
        return Err(io::Error::other("frame too large"));
    }
    let mut body = vec![0; len];
    conn.read_exact(&mut body)?;
    Ok(Bytes::from(body))
}

fn bad(e: impl std::fmt::Display) -> io::Error {
    io::Error::other(e.to_string())
}

fn serve(mut conn: TcpStream, messages: &Mutex<Vec<Vec<u8>>>) -> io::Result<()> {
    loop {
        let mut frame = read_frame(&mut conn)?;
        let key = i16::from_be_bytes([frame[0], frame[1]]);
        let version = i16::from_be_bytes([frame[2], frame[3]]);
        let api = ApiKey::try_from(key).map_err(|()| bad(format!("api key {key}")))?;
        let header =
            RequestHeader::decode(&mut frame, api.request_header_version(version)).map_err(bad)?;
        let mut body = BytesMut::new();
        match api {
            ApiKey::ApiVersions => {
                let keys = [
                    (ApiKey::Produce, 3, 11),
                    (ApiKey::Metadata, 1, 12),
                    (ApiKey::SaslHandshake, 0, 1),
                    (ApiKey::ApiVersions, 0, 3),
                    (ApiKey::InitProducerId, 0, 4),
                    (ApiKey::SaslAuthenticate, 0, 2),
                ];
                ApiVersionsResponse::default()
                    .with_api_keys(
                        keys.iter()
                            .map(|&(k, min, max)| {
                                ApiVersion::default()
                                    .with_api_key(k as i16)
                                    .with_min_version(min)
                                    .with_max_version(max)
                            })
                            .collect(),
                    )
                    .encode(&mut body, version.min(3))
                    .map_err(bad)?;
            }
            ApiKey::SaslHandshake => SaslHandshakeResponse::default()
                .with_mechanisms(vec![StrBytes::from_static_str("OAUTHBEARER")])
                .encode(&mut body, version)
                .map_err(bad)?,
            ApiKey::SaslAuthenticate => {
                let req = SaslAuthenticateRequest::decode(&mut frame, version).map_err(bad)?;
                messages
                    .lock()
                    .expect("messages")
                    .push(req.auth_bytes.to_vec());
                SaslAuthenticateResponse::default()
                    .with_error_code(REJECTED)
                    .with_error_message(Some(StrBytes::from_static_str(REJECTION_MESSAGE)))
                    .encode(&mut body, version)
                    .map_err(bad)?;
            }
            other => return Err(bad(format!("{other:?} is not served here"))),
        }
        let mut head = BytesMut::new();
        ResponseHeader::default()
            .with_correlation_id(header.correlation_id)
            .encode(&mut head, api.response_header_version(version))
            .map_err(bad)?;
        let len = (head.len() + body.len()) as i32;
        conn.write_all(&len.to_be_bytes())?;
        conn.write_all(&head)?;
        conn.write_all(&body)?;
    }
}
