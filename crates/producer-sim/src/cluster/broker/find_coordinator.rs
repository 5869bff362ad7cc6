//! FindCoordinator: which broker coordinates a consumer group (key type 0) or a
//! transactional id (key type 1). One key before v4, a batch of keys from v4 on.

use kafka_protocol::messages::find_coordinator_response::Coordinator;
use kafka_protocol::messages::{FindCoordinatorRequest, FindCoordinatorResponse};
use kafka_protocol::protocol::StrBytes;

use super::code;
use crate::cluster::{CoordinatorKind, SimCluster};
use crate::API_FIND_COORDINATOR;

/// Kafka's messages for the errors FindCoordinator answers with (`Errors.message()`; "NONE"
/// on success, as Kafka sends it).
fn message(code: i16) -> &'static str {
    match code {
        code::NONE => "NONE",
        code::COORDINATOR_NOT_AVAILABLE => "The coordinator is not available.",
        code::INVALID_REQUEST => {
            "This most likely occurs because of a request being malformed by the client library \
             or the message was sent to an incompatible broker. See the broker logs for more \
             details."
        }
        _ => "Injected error.",
    }
}

/// One key's answer: error code, node id, host, port.
struct Located {
    code: i16,
    node: i32,
    host: String,
    port: i32,
}

impl Located {
    fn err(code: i16) -> Self {
        Located {
            code,
            node: -1,
            host: String::new(),
            port: -1,
        }
    }
}

impl SimCluster {
    /// Answers FindCoordinator: per key the leader of its internal partition
    /// ([`SimCluster::coordinator`]); COORDINATOR_NOT_AVAILABLE when that broker is stopped;
    /// INVALID_REQUEST for a key type other than 0 and 1. An injected error answers every key.
    pub(super) fn find_coordinator(
        &mut self,
        broker_id: i32,
        version: i16,
        req: FindCoordinatorRequest,
    ) -> FindCoordinatorResponse {
        let mut resp = FindCoordinatorResponse::default();
        resp.throttle_time_ms = self.take_throttle(broker_id);
        let injected = self.take_injection(API_FIND_COORDINATOR, |_| true);
        let key_type = if version >= 1 { req.key_type } else { 0 };
        let keys: Vec<StrBytes> = if version >= 4 {
            req.coordinator_keys
        } else {
            vec![req.key]
        };
        let answers: Vec<(StrBytes, Located)> = keys
            .into_iter()
            .map(|k| {
                let l = match &injected {
                    Some(inj) => Located::err(inj.error_code),
                    None => self.locate(key_type, k.as_str()),
                };
                (k, l)
            })
            .collect();
        if version >= 4 {
            resp.coordinators = answers
                .into_iter()
                .map(|(key, l)| {
                    let mut c = Coordinator::default();
                    c.key = key;
                    c.node_id = l.node.into();
                    c.host = StrBytes::from_string(l.host);
                    c.port = l.port;
                    c.error_code = l.code;
                    c.error_message = Some(StrBytes::from_static_str(message(l.code)));
                    c
                })
                .collect();
        } else if let Some((_, l)) = answers.into_iter().next() {
            resp.error_code = l.code;
            resp.node_id = l.node.into();
            resp.host = StrBytes::from_string(l.host);
            resp.port = l.port;
            if version >= 1 {
                resp.error_message = Some(StrBytes::from_static_str(message(l.code)));
            }
        }
        resp
    }

    fn locate(&self, key_type: i8, key: &str) -> Located {
        let kind = match key_type {
            0 => CoordinatorKind::Group,
            1 => CoordinatorKind::Transaction,
            _ => return Located::err(code::INVALID_REQUEST),
        };
        let Some(node) = self.coordinator(kind, key) else {
            return Located::err(code::COORDINATOR_NOT_AVAILABLE);
        };
        match self.brokers.get(&node) {
            Some(b) if b.running => Located {
                code: code::NONE,
                node,
                host: b.spec.host.clone(),
                port: i32::from(b.spec.port),
            },
            _ => Located::err(code::COORDINATOR_NOT_AVAILABLE),
        }
    }

    /// Whether `broker_id` coordinates `key`; a transaction request elsewhere is answered
    /// NOT_COORDINATOR.
    pub(super) fn coordinates(&self, broker_id: i32, kind: CoordinatorKind, key: &str) -> bool {
        self.coordinator(kind, key) == Some(broker_id)
    }
}
