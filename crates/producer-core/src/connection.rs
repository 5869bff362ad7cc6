//! One broker connection: its handshake state, frame reassembly, negotiated versions and the
//! requests awaiting responses, in correlation order.

use std::collections::VecDeque;
use std::time::Instant;

use crate::batch::BatchRef;
use crate::protocol::api_versions::ApiVersionsResponse;
use crate::protocol::{ApiKey, FrameDecoder};
use crate::sasl::Exchange;
use crate::types::ConnId;

/// Where a connection stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ConnState {
    /// `Connect` was emitted; waiting for `handle_connected`.
    Connecting,
    /// Connected; ApiVersions sent, waiting for its answer.
    Negotiating,
    /// Versions known; SASL authentication under way (SaslHandshake, then SaslAuthenticate
    /// rounds, or waiting for an OAUTHBEARER token).
    Authenticating,
    /// Versions known (and authenticated, with SASL); requests may be sent.
    Ready,
    /// Authenticated, and authenticating again before the session ends (KIP-368): requests
    /// already in flight are answered first; no new request is sent until it completes.
    Reauthenticating,
}

impl ConnState {
    /// The state as [`crate::Producer::metrics`] reports it.
    pub(crate) fn reported(self) -> crate::metrics::ConnectionState {
        use crate::metrics::ConnectionState as S;
        match self {
            ConnState::Connecting => S::Connecting,
            ConnState::Negotiating => S::Negotiating,
            ConnState::Authenticating => S::Authenticating,
            ConnState::Ready => S::Ready,
            ConnState::Reauthenticating => S::Reauthenticating,
        }
    }
}

/// The API versions agreed with one broker.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Versions {
    /// `None` when the broker shares no Produce version with this crate: the connection is
    /// used for metadata only, and the partitions it leads fail their records.
    pub(crate) produce: Option<i16>,
    pub(crate) metadata: i16,
    /// `None` when the broker does not offer InitProducerId.
    pub(crate) init_producer_id: Option<i16>,
    /// SaslHandshake (v1) and SaslAuthenticate, when the broker offers both.
    pub(crate) sasl: Option<SaslVersions>,
    /// The transaction APIs, when the broker offers all of them.
    pub(crate) txn: Option<TxnVersions>,
    /// Whether the broker offers GetTelemetrySubscriptions and PushTelemetry (v0 of each,
    /// the only version): brokers list them only with a telemetry receiver configured.
    pub(crate) telemetry: bool,
}

/// The transaction API versions agreed with one broker, and the cluster's finalized
/// `transaction.version` as it reported it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct TxnVersions {
    pub(crate) find_coordinator: i16,
    pub(crate) add_partitions: i16,
    pub(crate) add_offsets: i16,
    pub(crate) end_txn: i16,
    pub(crate) txn_offset_commit: i16,
    /// The finalized `transaction.version` feature level (0 when not reported): 2 and above
    /// is KIP-890's second part (TV2).
    pub(crate) transaction_version: i16,
}

/// The SASL API versions agreed with one broker.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct SaslVersions {
    pub(crate) handshake: i16,
    pub(crate) authenticate: i16,
}

impl Versions {
    /// Picks the highest common version of each API, or `None` when Metadata has no common
    /// version (the connection is of no use then).
    pub(crate) fn negotiate(resp: &ApiVersionsResponse) -> Option<Versions> {
        Some(Versions {
            produce: resp.negotiate(ApiKey::Produce),
            metadata: resp.negotiate(ApiKey::Metadata)?,
            init_producer_id: resp.negotiate(ApiKey::InitProducerId),
            sasl: resp
                .negotiate(ApiKey::SaslHandshake)
                .zip(resp.negotiate(ApiKey::SaslAuthenticate))
                .map(|(handshake, authenticate)| SaslVersions {
                    handshake,
                    authenticate,
                }),
            txn: (|| {
                Some(TxnVersions {
                    find_coordinator: resp.negotiate(ApiKey::FindCoordinator)?,
                    add_partitions: resp.negotiate(ApiKey::AddPartitionsToTxn)?,
                    add_offsets: resp.negotiate(ApiKey::AddOffsetsToTxn)?,
                    end_txn: resp.negotiate(ApiKey::EndTxn)?,
                    txn_offset_commit: resp.negotiate(ApiKey::TxnOffsetCommit)?,
                    transaction_version: resp.finalized_level("transaction.version").unwrap_or(0),
                })
            })(),
            telemetry: resp.negotiate(ApiKey::GetTelemetrySubscriptions) == Some(0)
                && resp.negotiate(ApiKey::PushTelemetry) == Some(0),
        })
    }
}

/// How many acks=0 correlation ids a connection remembers.
const NO_RESPONSE_MEMORY: usize = 1024;

/// What a request in flight was for.
#[derive(Debug)]
pub(crate) enum RequestKind {
    ApiVersions,
    Metadata,
    InitProducerId,
    SaslHandshake,
    SaslAuthenticate,
    /// A client telemetry request (KIP-714).
    Telemetry(crate::producer::telemetry::in_flight::TelemetryRequest),
    /// A request of the transactional producer (to the transaction or group coordinator).
    Transaction(crate::producer::transaction::in_flight::TxnRequest),
    /// The batches it carries.
    Produce {
        batches: Vec<BatchRef>,
        /// Nothing else was in flight on the connection when it was written: its round trip
        /// has no wait behind other requests in it (the queue-delay limit's base round trip).
        sent_alone: bool,
    },
}

/// A request awaiting its response.
#[derive(Debug)]
pub(crate) struct InFlightRequest {
    pub(crate) correlation_id: i32,
    pub(crate) api: ApiKey,
    pub(crate) version: i16,
    pub(crate) sent_at: Instant,
    pub(crate) kind: RequestKind,
}

/// One connection to a broker.
#[derive(Debug)]
pub(crate) struct Connection {
    pub(crate) id: ConnId,
    pub(crate) state: ConnState,
    pub(crate) decoder: FrameDecoder,
    pub(crate) inflight: VecDeque<InFlightRequest>,
    pub(crate) versions: Option<Versions>,
    /// When `Connect` was emitted (the connection attempt's timeout counts from here).
    pub(crate) opened_at: Instant,
    /// The SASL exchange under way, while `Authenticating` or `Reauthenticating`.
    pub(crate) exchange: Option<Exchange>,
    /// When this connection must authenticate again (85-95% of the session lifetime the broker
    /// gave), if it gave one.
    pub(crate) reauthenticate_at: Option<Instant>,
    /// When the last SaslAuthenticate request was sent: the broker's session starts no earlier,
    /// so the lifetime is counted from here (not from when the answer arrived, which may be
    /// much later).
    pub(crate) auth_sent_at: Option<Instant>,
    /// Correlation ids of recent acks=0 requests, which get no response (the newest
    /// [`NO_RESPONSE_MEMORY`]).
    no_response: VecDeque<i32>,
    next_correlation_id: i32,
    /// When the last answer came on this connection (of any kind).
    last_answer: Option<Instant>,
}

impl Connection {
    pub(crate) fn new(id: ConnId, max_frame: usize, opened_at: Instant) -> Self {
        Connection {
            id,
            state: ConnState::Connecting,
            decoder: FrameDecoder::new(max_frame),
            inflight: VecDeque::new(),
            versions: None,
            opened_at,
            exchange: None,
            reauthenticate_at: None,
            auth_sent_at: None,
            no_response: VecDeque::new(),
            next_correlation_id: 0,
            last_answer: None,
        }
    }

    /// An answer came at `now`; returns when the one before it came on this connection. A
    /// broker reads a connection's next request once it has answered the one before, so a
    /// request written before that answer came started being served then.
    pub(crate) fn answer_came(&mut self, now: Instant) -> Option<Instant> {
        self.last_answer.replace(now)
    }

    /// Records a request written to the connection; returns true when it is the only one in
    /// flight (so its request timeout must be armed).
    pub(crate) fn push_request(&mut self, request: InFlightRequest) -> bool {
        let was_idle = self.inflight.is_empty();
        self.inflight.push_back(request);
        was_idle
    }

    /// When the oldest request in flight was sent, if any: its request timeout counts from
    /// there.
    pub(crate) fn oldest_sent_at(&self) -> Option<Instant> {
        self.inflight.front().map(|r| r.sent_at)
    }

    /// The next correlation id (wrapping, never negative).
    pub(crate) fn take_correlation_id(&mut self) -> i32 {
        let id = self.next_correlation_id;
        self.next_correlation_id = self.next_correlation_id.wrapping_add(1) & i32::MAX;
        id
    }

    /// Remembers an acks=0 request: no response is expected, but one may come anyway.
    pub(crate) fn expect_no_response(&mut self, correlation_id: i32) {
        if self.no_response.len() == NO_RESPONSE_MEMORY {
            self.no_response.pop_front();
        }
        self.no_response.push_back(correlation_id);
    }

    /// Whether `correlation_id` is that of a remembered acks=0 request (forgetting it, and
    /// every older one: answers come in order).
    pub(crate) fn take_unexpected_answer(&mut self, correlation_id: i32) -> bool {
        match self.no_response.iter().position(|&id| id == correlation_id) {
            Some(i) => {
                self.no_response.drain(..=i);
                true
            }
            None => false,
        }
    }

    /// Produce requests awaiting a response on this connection.
    pub(crate) fn produce_in_flight(&self) -> usize {
        self.inflight
            .iter()
            .filter(|r| matches!(r.kind, RequestKind::Produce { .. }))
            .count()
    }
}
