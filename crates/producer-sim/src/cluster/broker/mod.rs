//! Broker-side request handling: reassembled frames are decoded with `kafka-protocol`,
//! checked against what the broker advertises, and handed to one file per API, whose responses
//! are encoded with `kafka-protocol` again.

mod add_offsets_to_txn;
mod add_partitions_to_txn;
mod api_versions;
mod end_txn;
mod find_coordinator;
mod init_producer_id;
mod metadata;
mod produce;
mod sasl;
mod telemetry;
mod txn_offset_commit;

pub(crate) use sasl::{SaslSession, ScramHash};
pub use telemetry::SimTelemetryPush;
pub(crate) use telemetry::TelemetryReceiver;

use std::time::Instant;

use bytes::{Bytes, BytesMut};
use kafka_protocol::messages::{
    AddOffsetsToTxnRequest, AddPartitionsToTxnRequest, ApiKey, ApiVersionsRequest,
    ApiVersionsResponse, EndTxnRequest, FindCoordinatorRequest, GetTelemetrySubscriptionsRequest,
    InitProducerIdRequest, MetadataRequest, ProduceRequest, PushTelemetryRequest, RequestHeader,
    ResponseHeader, SaslAuthenticateRequest, SaslHandshakeRequest, TxnOffsetCommitRequest,
};
use kafka_protocol::protocol::{Decodable, Encodable};

use super::network::ConnId;
use super::{later, SimCluster};
use crate::wire::{self, Shape};
use crate::{
    RequestRecord, API_ADD_OFFSETS_TO_TXN, API_ADD_PARTITIONS_TO_TXN, API_API_VERSIONS,
    API_END_TXN, API_FIND_COORDINATOR, API_GET_TELEMETRY_SUBSCRIPTIONS, API_INIT_PRODUCER_ID,
    API_METADATA, API_PRODUCE, API_PUSH_TELEMETRY, API_SASL_AUTHENTICATE, API_SASL_HANDSHAKE,
    API_TXN_OFFSET_COMMIT, SIM_CAPABILITIES,
};

/// The error codes the brokers answer with (Kafka's numbers, by name).
mod code {
    use producer_core::ErrorCode;

    pub(super) const NONE: i16 = ErrorCode::NONE.0;
    pub(super) const CORRUPT_MESSAGE: i16 = ErrorCode::CORRUPT_MESSAGE.0;
    pub(super) const UNKNOWN_TOPIC_OR_PARTITION: i16 = ErrorCode::UNKNOWN_TOPIC_OR_PARTITION.0;
    pub(super) const NOT_LEADER_OR_FOLLOWER: i16 = ErrorCode::NOT_LEADER_OR_FOLLOWER.0;
    pub(super) const MESSAGE_TOO_LARGE: i16 = ErrorCode::MESSAGE_TOO_LARGE.0;
    pub(super) const RECORD_LIST_TOO_LARGE: i16 = ErrorCode::RECORD_LIST_TOO_LARGE.0;
    pub(super) const INVALID_REQUIRED_ACKS: i16 = ErrorCode::INVALID_REQUIRED_ACKS.0;
    pub(super) const UNSUPPORTED_VERSION: i16 = ErrorCode::UNSUPPORTED_VERSION.0;
    pub(super) const INVALID_REQUEST: i16 = ErrorCode::INVALID_REQUEST.0;
    pub(super) const OUT_OF_ORDER_SEQUENCE_NUMBER: i16 = ErrorCode::OUT_OF_ORDER_SEQUENCE_NUMBER.0;
    pub(super) const INVALID_PRODUCER_EPOCH: i16 = ErrorCode::INVALID_PRODUCER_EPOCH.0;
    pub(super) const INVALID_TXN_STATE: i16 = ErrorCode::INVALID_TXN_STATE.0;
    pub(super) const INVALID_PRODUCER_ID_MAPPING: i16 = ErrorCode::INVALID_PRODUCER_ID_MAPPING.0;
    pub(super) const UNKNOWN_PRODUCER_ID: i16 = ErrorCode::UNKNOWN_PRODUCER_ID.0;
    pub(super) const UNSUPPORTED_COMPRESSION_TYPE: i16 = ErrorCode::UNSUPPORTED_COMPRESSION_TYPE.0;
    pub(super) const INVALID_RECORD: i16 = ErrorCode::INVALID_RECORD.0;
    pub(super) const THROTTLING_QUOTA_EXCEEDED: i16 = ErrorCode::THROTTLING_QUOTA_EXCEEDED.0;
    pub(super) const UNKNOWN_SUBSCRIPTION_ID: i16 = ErrorCode::UNKNOWN_SUBSCRIPTION_ID.0;
    pub(super) const TELEMETRY_TOO_LARGE: i16 = ErrorCode::TELEMETRY_TOO_LARGE.0;
    pub(super) const PRODUCER_FENCED: i16 = ErrorCode::PRODUCER_FENCED.0;
    pub(super) const UNKNOWN_TOPIC_ID: i16 = ErrorCode::UNKNOWN_TOPIC_ID.0;
    pub(super) const UNSUPPORTED_SASL_MECHANISM: i16 = ErrorCode::UNSUPPORTED_SASL_MECHANISM.0;
    pub(super) const ILLEGAL_SASL_STATE: i16 = ErrorCode::ILLEGAL_SASL_STATE.0;
    pub(super) const SASL_AUTHENTICATION_FAILED: i16 = ErrorCode::SASL_AUTHENTICATION_FAILED.0;
    pub(super) const COORDINATOR_NOT_AVAILABLE: i16 = ErrorCode::COORDINATOR_NOT_AVAILABLE.0;
    pub(super) const NOT_COORDINATOR: i16 = ErrorCode::NOT_COORDINATOR.0;
    pub(super) const NOT_ENOUGH_REPLICAS: i16 = ErrorCode::NOT_ENOUGH_REPLICAS.0;
    pub(super) const CONCURRENT_TRANSACTIONS: i16 = ErrorCode::CONCURRENT_TRANSACTIONS.0;
    pub(super) const TRANSACTION_ABORTABLE: i16 = ErrorCode::TRANSACTION_ABORTABLE.0;
    pub(super) const TRANSACTIONAL_ID_AUTHORIZATION_FAILED: i16 =
        ErrorCode::TRANSACTIONAL_ID_AUTHORIZATION_FAILED.0;
    /// UNKNOWN_MEMBER_ID (25).
    pub(super) const UNKNOWN_MEMBER_ID: i16 = 25;
    /// OPERATION_NOT_ATTEMPTED (55).
    pub(super) const OPERATION_NOT_ATTEMPTED: i16 = 55;
}

/// The coordinator's PRODUCER_FENCED as an API version answers it: INVALID_PRODUCER_EPOCH for
/// versions that predate the code (`old`), as Kafka's `KafkaApis` translates it.
pub(super) fn fenced(error: i16, old: bool) -> i16 {
    if old && error == code::PRODUCER_FENCED {
        code::INVALID_PRODUCER_EPOCH
    } else {
        error
    }
}

/// What the broker does after handling a request.
pub(super) enum Reply {
    /// Send this response frame.
    Respond(Vec<u8>),
    /// Send nothing (acks=0 without error).
    Silent,
    /// Send this response frame, then close the connection (a failed authentication).
    RespondAndClose(Vec<u8>),
    /// Close the connection without a response; the reason was recorded as a violation (or is
    /// Kafka's normal behaviour, like acks=0 errors).
    Close,
}

pub(super) fn encode_frame<R: Encodable>(
    api: ApiKey,
    version: i16,
    correlation_id: i32,
    resp: &R,
) -> Result<Vec<u8>, String> {
    let mut buf = BytesMut::new();
    buf.extend_from_slice(&[0, 0, 0, 0]);
    let mut header = ResponseHeader::default();
    header.correlation_id = correlation_id;
    header
        .encode(&mut buf, api.response_header_version(version))
        .map_err(|e| format!("sim bug: cannot encode {api:?} v{version} response header: {e}"))?;
    resp.encode(&mut buf, version)
        .map_err(|e| format!("sim bug: cannot encode {api:?} v{version} response: {e}"))?;
    let size = i32::try_from(buf.len() - 4).map_err(|_| "response too large".to_string())?;
    buf[..4].copy_from_slice(&size.to_be_bytes());
    Ok(buf.to_vec())
}

impl SimCluster {
    /// Handles one complete request frame (without its size prefix) at `at`.
    pub(crate) fn handle_frame(&mut self, id: u64, at: Instant, frame: Bytes) {
        let Some(broker_id) = self.conns.get(&id).and_then(|c| c.broker) else {
            return;
        };
        // The coordinator acts first: markers and timeouts due by now.
        self.txn_tick(at);
        let mut rec = RequestRecord {
            at,
            broker_id,
            conn: ConnId(id),
            api_key: -1,
            api_version: -1,
            correlation_id: -1,
            acks: None,
            produce: Vec::new(),
            error_code: code::NONE,
            responded: false,
            throttle_time_ms: 0,
        };
        let (Some(k), Some(v), Some(c)) = (frame.get(0..2), frame.get(2..4), frame.get(4..8))
        else {
            self.violation(
                Some(broker_id),
                id,
                "request frame shorter than 8 bytes".into(),
            );
            self.request_log.push(rec);
            self.broker_close(id, at);
            return;
        };
        rec.api_key = i16::from_be_bytes([k[0], k[1]]);
        rec.api_version = i16::from_be_bytes([v[0], v[1]]);
        rec.correlation_id = i32::from_be_bytes([c[0], c[1], c[2], c[3]]);

        // Random connection reset, before or after processing.
        let (drop, process_first) = if self.cfg.drop_probability > 0.0 {
            let d = self.rng.next_f64() < self.cfg.drop_probability;
            (d, d && self.rng.next_f64() < 0.5)
        } else {
            (false, false)
        };
        if drop && !process_first {
            self.request_log.push(rec);
            let lat = self.latency();
            self.reset_conn(id, later(at, lat));
            return;
        }

        let reply = match self.dispatch(broker_id, id, &frame, &mut rec) {
            Ok(r) => r,
            Err(msg) => {
                self.violation(
                    Some(broker_id),
                    id,
                    format!(
                        "api {} v{} correlation {}: {msg}; connection closed",
                        rec.api_key, rec.api_version, rec.correlation_id
                    ),
                );
                Reply::Close
            }
        };
        if drop {
            self.request_log.push(rec);
            let lat = self.latency();
            self.reset_conn(id, later(at, lat));
            return;
        }
        // A broker that serves Produce requests in turn answers each once it is served.
        let at = match self.brokers.get_mut(&broker_id) {
            Some(b) if rec.api_key == API_PRODUCE => {
                b.service.as_mut().map_or(at, |s| s.serve(at, frame.len()))
            }
            _ => at,
        };
        match reply {
            Reply::Respond(bytes) => {
                rec.responded = true;
                self.request_log.push(rec);
                self.send_response(id, at, bytes);
            }
            Reply::Silent => self.request_log.push(rec),
            Reply::RespondAndClose(bytes) => {
                rec.responded = true;
                self.request_log.push(rec);
                self.send_response(id, at, bytes);
                self.broker_close(id, at);
            }
            Reply::Close => {
                self.request_log.push(rec);
                self.broker_close(id, at);
            }
        }
    }

    /// Decodes and handles the request; `Err` is a protocol violation that closes the
    /// connection.
    fn dispatch(
        &mut self,
        broker_id: i32,
        conn: u64,
        frame: &Bytes,
        rec: &mut RequestRecord,
    ) -> Result<Reply, String> {
        let (key, version, correlation_id) = (rec.api_key, rec.api_version, rec.correlation_id);
        let api = ApiKey::try_from(key).map_err(|_| format!("unknown api key {key}"))?;
        let advertised = self
            .brokers
            .get(&broker_id)
            .and_then(|b| b.api_versions.iter().find(|(k, _, _)| *k == key).copied());

        // ApiVersions with a version above the broker's max: v0 UNSUPPORTED_VERSION with the list.
        if key == API_API_VERSIONS {
            let max = advertised.map_or(-1, |(_, _, max)| max).min(4);
            if version > max || version < 0 {
                let mut resp = ApiVersionsResponse::default();
                resp.error_code = code::UNSUPPORTED_VERSION;
                resp.api_keys = self.api_version_list(broker_id);
                rec.error_code = code::UNSUPPORTED_VERSION;
                return encode_frame(api, 0, correlation_id, &resp).map(Reply::Respond);
            }
        }
        match advertised {
            Some((_, min, max)) if (min..=max).contains(&version) => {}
            Some((_, min, max)) => {
                return Err(format!(
                    "{api:?} v{version} is outside the broker's advertised range {min}-{max}"
                ))
            }
            None => return Err(format!("{api:?} is not advertised by this broker")),
        }
        let cap = SIM_CAPABILITIES.iter().find(|(k, _, _)| *k == key);
        match cap {
            Some((_, min, max)) if (*min..=*max).contains(&version) => {}
            _ => return Err(format!("the simulator cannot serve {api:?} v{version}")),
        }

        let mut buf = frame.clone();
        let header = RequestHeader::decode(&mut buf, api.request_header_version(version))
            .map_err(|e| format!("malformed request header: {e}"))?;
        let _ = header;
        let body = buf;
        self.sasl_gate(conn, key, rec.at)?;
        match key {
            API_API_VERSIONS => {
                let mut b = body.clone();
                let req = ApiVersionsRequest::decode(&mut b, version)
                    .map_err(|e| format!("malformed ApiVersions request: {e}"))?;
                self.trailing(broker_id, conn, "ApiVersions", b.len());
                self.api_versions(broker_id, version, correlation_id, req, rec)
                    .map(Reply::Respond)
            }
            API_METADATA => {
                wire::precheck_metadata(&body, version)
                    .map_err(|e| format!("malformed Metadata request: {e}"))?;
                let mut b = body.clone();
                let req = MetadataRequest::decode(&mut b, version)
                    .map_err(|e| format!("malformed Metadata request: {e}"))?;
                self.trailing(broker_id, conn, "Metadata", b.len());
                let resp = self.metadata(broker_id, version, req);
                rec.error_code = resp.error_code;
                encode_frame(api, version, correlation_id, &resp).map(Reply::Respond)
            }
            API_INIT_PRODUCER_ID => {
                let mut b = body.clone();
                let req = InitProducerIdRequest::decode(&mut b, version)
                    .map_err(|e| format!("malformed InitProducerId request: {e}"))?;
                self.trailing(broker_id, conn, "InitProducerId", b.len());
                let resp = self.init_producer_id(broker_id, rec.at, version, req);
                rec.error_code = resp.error_code;
                encode_frame(api, version, correlation_id, &resp).map(Reply::Respond)
            }
            API_PRODUCE => {
                wire::precheck_produce(&body, version)
                    .map_err(|e| format!("malformed Produce request: {e}"))?;
                let mut b = body.clone();
                let req = ProduceRequest::decode(&mut b, version)
                    .map_err(|e| format!("malformed Produce request: {e}"))?;
                self.trailing(broker_id, conn, "Produce", b.len());
                let acks = req.acks;
                let (resp, any_error) = self.produce(broker_id, conn, version, req, rec);
                if acks == 0 {
                    // Kafka closes the connection on any partition error with acks=0.
                    return Ok(if any_error {
                        Reply::Close
                    } else {
                        Reply::Silent
                    });
                }
                encode_frame(api, version, correlation_id, &resp).map(Reply::Respond)
            }
            API_FIND_COORDINATOR => {
                let fields = if version >= 4 {
                    vec![Shape::Fixed(1), Shape::Strs]
                } else if version >= 1 {
                    vec![Shape::Str, Shape::Fixed(1)]
                } else {
                    vec![Shape::Str]
                };
                let flexible = version >= 3;
                wire::precheck(&body, &fields, flexible, "FindCoordinator")
                    .map_err(|e| format!("malformed FindCoordinator request: {e}"))?;
                let mut b = body.clone();
                let req = FindCoordinatorRequest::decode(&mut b, version)
                    .map_err(|e| format!("malformed FindCoordinator request: {e}"))?;
                self.trailing(broker_id, conn, "FindCoordinator", b.len());
                let resp = self.find_coordinator(broker_id, version, req);
                rec.error_code = resp.error_code;
                encode_frame(api, version, correlation_id, &resp).map(Reply::Respond)
            }
            API_ADD_PARTITIONS_TO_TXN => {
                let topic = Shape::Array(vec![Shape::Str, Shape::Ints(4)]);
                let fields = if version >= 4 {
                    vec![Shape::Array(vec![
                        Shape::Str,
                        Shape::Fixed(8),
                        Shape::Fixed(2),
                        Shape::Fixed(1),
                        topic,
                    ])]
                } else {
                    vec![Shape::Str, Shape::Fixed(8), Shape::Fixed(2), topic]
                };
                wire::precheck(&body, &fields, version >= 3, "AddPartitionsToTxn")
                    .map_err(|e| format!("malformed AddPartitionsToTxn request: {e}"))?;
                let mut b = body.clone();
                let req = AddPartitionsToTxnRequest::decode(&mut b, version)
                    .map_err(|e| format!("malformed AddPartitionsToTxn request: {e}"))?;
                self.trailing(broker_id, conn, "AddPartitionsToTxn", b.len());
                let resp = self.add_partitions_to_txn(broker_id, rec.at, version, req);
                rec.error_code = resp.error_code;
                encode_frame(api, version, correlation_id, &resp).map(Reply::Respond)
            }
            API_ADD_OFFSETS_TO_TXN => {
                let mut b = body.clone();
                let req = AddOffsetsToTxnRequest::decode(&mut b, version)
                    .map_err(|e| format!("malformed AddOffsetsToTxn request: {e}"))?;
                self.trailing(broker_id, conn, "AddOffsetsToTxn", b.len());
                let resp = self.add_offsets_to_txn(broker_id, rec.at, version, req);
                rec.error_code = resp.error_code;
                encode_frame(api, version, correlation_id, &resp).map(Reply::Respond)
            }
            API_END_TXN => {
                let mut b = body.clone();
                let req = EndTxnRequest::decode(&mut b, version)
                    .map_err(|e| format!("malformed EndTxn request: {e}"))?;
                self.trailing(broker_id, conn, "EndTxn", b.len());
                let resp = self.end_txn(broker_id, conn, rec.at, version, req);
                rec.error_code = resp.error_code;
                encode_frame(api, version, correlation_id, &resp).map(Reply::Respond)
            }
            API_TXN_OFFSET_COMMIT => {
                let mut partition = vec![Shape::Fixed(4), Shape::Fixed(8)];
                if version >= 2 {
                    partition.push(Shape::Fixed(4));
                }
                partition.push(Shape::Str);
                let mut fields = vec![Shape::Str, Shape::Str, Shape::Fixed(8), Shape::Fixed(2)];
                if version >= 3 {
                    fields.extend([Shape::Fixed(4), Shape::Str, Shape::Str]);
                }
                fields.push(Shape::Array(vec![Shape::Str, Shape::Array(partition)]));
                wire::precheck(&body, &fields, version >= 3, "TxnOffsetCommit")
                    .map_err(|e| format!("malformed TxnOffsetCommit request: {e}"))?;
                let mut b = body.clone();
                let req = TxnOffsetCommitRequest::decode(&mut b, version)
                    .map_err(|e| format!("malformed TxnOffsetCommit request: {e}"))?;
                self.trailing(broker_id, conn, "TxnOffsetCommit", b.len());
                let resp = self.txn_offset_commit(broker_id, conn, rec.at, version, req);
                encode_frame(api, version, correlation_id, &resp).map(Reply::Respond)
            }
            API_SASL_HANDSHAKE => {
                let mut b = body.clone();
                let req = SaslHandshakeRequest::decode(&mut b, version)
                    .map_err(|e| format!("malformed SaslHandshake request: {e}"))?;
                self.trailing(broker_id, conn, "SaslHandshake", b.len());
                let resp = self.sasl_handshake(conn, req);
                rec.error_code = resp.error_code;
                encode_frame(api, version, correlation_id, &resp).map(Reply::Respond)
            }
            API_SASL_AUTHENTICATE => {
                let mut b = body.clone();
                let req = SaslAuthenticateRequest::decode(&mut b, version)
                    .map_err(|e| format!("malformed SaslAuthenticate request: {e}"))?;
                self.trailing(broker_id, conn, "SaslAuthenticate", b.len());
                let (resp, outcome) = self.sasl_authenticate(conn, version, req, rec.at);
                rec.error_code = resp.error_code;
                let frame = encode_frame(api, version, correlation_id, &resp)?;
                Ok(match outcome {
                    sasl::SaslOutcome::Continue => Reply::Respond(frame),
                    sasl::SaslOutcome::Fail => Reply::RespondAndClose(frame),
                })
            }
            API_GET_TELEMETRY_SUBSCRIPTIONS => {
                let mut b = body.clone();
                let req = GetTelemetrySubscriptionsRequest::decode(&mut b, version)
                    .map_err(|e| format!("malformed GetTelemetrySubscriptions request: {e}"))?;
                self.trailing(broker_id, conn, "GetTelemetrySubscriptions", b.len());
                let resp = self.get_telemetry_subscriptions(broker_id, rec.at, req);
                rec.error_code = resp.error_code;
                encode_frame(api, version, correlation_id, &resp).map(Reply::Respond)
            }
            API_PUSH_TELEMETRY => {
                let mut b = body.clone();
                let req = PushTelemetryRequest::decode(&mut b, version)
                    .map_err(|e| format!("malformed PushTelemetry request: {e}"))?;
                self.trailing(broker_id, conn, "PushTelemetry", b.len());
                let resp = self.push_telemetry(broker_id, rec.at, req);
                rec.error_code = resp.error_code;
                encode_frame(api, version, correlation_id, &resp).map(Reply::Respond)
            }
            _ => Err(format!("the simulator cannot serve {api:?}")),
        }
    }

    fn trailing(&mut self, broker_id: i32, conn: u64, what: &str, n: usize) {
        if n > 0 {
            self.violation(
                Some(broker_id),
                conn,
                format!("{n} trailing bytes after the {what} request body"),
            );
        }
    }
}
