//! The minimum element sizes the response parsers give their arrays are never more than what
//! the smallest element takes on the wire: responses made of many smallest elements (every
//! field at its default, empty strings and arrays), encoded by the independent
//! `kafka-protocol` codec at every version, parse here with every element.
//!
//! A parser refuses an array whose claimed length the bytes left cannot hold at its elements'
//! minimum size; a minimum set one byte too high would refuse these responses, since each puts
//! 64 smallest elements where fewer than 64 bytes follow them.

use bytes::BytesMut;
use kafka_protocol::messages::add_partitions_to_txn_response::{
    AddPartitionsToTxnPartitionResult, AddPartitionsToTxnTopicResult,
};
use kafka_protocol::messages::api_versions_response::{ApiVersion, FinalizedFeatureKey};
use kafka_protocol::messages::find_coordinator_response::Coordinator;
use kafka_protocol::messages::txn_offset_commit_response::{
    TxnOffsetCommitResponsePartition, TxnOffsetCommitResponseTopic,
};
use kafka_protocol::messages::{
    metadata_response, produce_response, AddPartitionsToTxnResponse, ApiVersionsResponse,
    FindCoordinatorResponse, GetTelemetrySubscriptionsResponse, MetadataResponse, ProduceResponse,
    SaslHandshakeResponse, TopicName, TxnOffsetCommitResponse,
};
use kafka_protocol::protocol::{Encodable, StrBytes};
use producer_core::protocol::{self, ApiKey};

/// How many smallest elements each array gets: more than the bytes that follow any of them.
const N: usize = 64;

fn encode<T: Encodable>(value: &T, version: i16) -> Vec<u8> {
    let mut buf = BytesMut::new();
    value
        .encode(&mut buf, version)
        .expect("kafka-protocol encodes");
    buf.to_vec()
}

fn sb(s: &str) -> StrBytes {
    StrBytes::from_string(s.to_owned())
}

fn versions(api: ApiKey) -> std::ops::RangeInclusive<i16> {
    let (lo, hi) = api.supported_versions();
    lo..=hi
}

fn empty_topic_name() -> TopicName {
    TopicName(sb(""))
}

#[test]
fn metadata_brokers_topics_and_partitions_of_the_smallest_size_parse() {
    for v in versions(ApiKey::Metadata) {
        let brokers = MetadataResponse::default().with_brokers(
            vec![metadata_response::MetadataResponseBroker::default(); N],
        );
        let parsed = protocol::metadata::MetadataResponse::parse(v, &encode(&brokers, v))
            .unwrap_or_else(|e| panic!("v{v} brokers: {e}"));
        assert_eq!(parsed.body.brokers.len(), N, "v{v}");

        let topic =
            metadata_response::MetadataResponseTopic::default().with_name(Some(empty_topic_name()));
        let topics = MetadataResponse::default().with_topics(vec![topic.clone(); N]);
        let parsed = protocol::metadata::MetadataResponse::parse(v, &encode(&topics, v))
            .unwrap_or_else(|e| panic!("v{v} topics: {e}"));
        assert_eq!(parsed.body.topics.len(), N, "v{v}");

        let partitions = MetadataResponse::default().with_topics(vec![topic.with_partitions(
            vec![metadata_response::MetadataResponsePartition::default(); N],
        )]);
        let parsed = protocol::metadata::MetadataResponse::parse(v, &encode(&partitions, v))
            .unwrap_or_else(|e| panic!("v{v} partitions: {e}"));
        assert_eq!(parsed.body.topics[0].partitions.len(), N, "v{v}");
    }
}

#[test]
fn produce_topics_partitions_record_errors_and_node_endpoints_of_the_smallest_size_parse() {
    for v in versions(ApiKey::Produce) {
        let topic = produce_response::TopicProduceResponse::default().with_name(empty_topic_name());
        let topics = ProduceResponse::default().with_responses(vec![topic.clone(); N]);
        let parsed = protocol::produce::ProduceResponse::parse(v, &encode(&topics, v))
            .unwrap_or_else(|e| panic!("v{v} topics: {e}"));
        assert_eq!(parsed.body.topics.len(), N, "v{v}");

        let partition = produce_response::PartitionProduceResponse::default();
        let partitions = ProduceResponse::default().with_responses(vec![topic
            .clone()
            .with_partition_responses(vec![partition.clone(); N])]);
        let parsed = protocol::produce::ProduceResponse::parse(v, &encode(&partitions, v))
            .unwrap_or_else(|e| panic!("v{v} partitions: {e}"));
        assert_eq!(parsed.body.topics[0].partitions.len(), N, "v{v}");

        if v >= 8 {
            let errors = ProduceResponse::default().with_responses(vec![topic
                .clone()
                .with_partition_responses(vec![partition.with_record_errors(vec![
                produce_response::BatchIndexAndErrorMessage::default();
                N
            ])])]);
            let parsed = protocol::produce::ProduceResponse::parse(v, &encode(&errors, v))
                .unwrap_or_else(|e| panic!("v{v} record errors: {e}"));
            assert_eq!(
                parsed.body.topics[0].partitions[0].record_errors.len(),
                N,
                "v{v}"
            );
        }
        if v >= 10 {
            let endpoints = ProduceResponse::default()
                .with_node_endpoints(vec![produce_response::NodeEndpoint::default(); N]);
            let parsed = protocol::produce::ProduceResponse::parse(v, &encode(&endpoints, v))
                .unwrap_or_else(|e| panic!("v{v} node endpoints: {e}"));
            assert_eq!(parsed.body.node_endpoints.len(), N, "v{v}");
        }
    }
}

#[test]
fn api_versions_keys_and_finalized_features_of_the_smallest_size_parse() {
    for v in versions(ApiKey::ApiVersions) {
        let keys = ApiVersionsResponse::default().with_api_keys(vec![ApiVersion::default(); N]);
        let parsed = protocol::api_versions::ApiVersionsResponse::parse(v, &encode(&keys, v))
            .unwrap_or_else(|e| panic!("v{v} api keys: {e}"));
        assert_eq!(parsed.body.api_keys.len(), N, "v{v}");
        if v >= 3 {
            let features = ApiVersionsResponse::default()
                .with_finalized_features(vec![FinalizedFeatureKey::default(); N]);
            let parsed =
                protocol::api_versions::ApiVersionsResponse::parse(v, &encode(&features, v))
                    .unwrap_or_else(|e| panic!("v{v} finalized features: {e}"));
            assert_eq!(parsed.body.finalized_features.len(), N, "v{v}");
        }
    }
}

#[test]
fn find_coordinator_coordinators_of_the_smallest_size_parse() {
    for v in versions(ApiKey::FindCoordinator).filter(|&v| v >= 4) {
        let resp =
            FindCoordinatorResponse::default().with_coordinators(vec![Coordinator::default(); N]);
        let parsed =
            protocol::find_coordinator::FindCoordinatorResponse::parse(v, &encode(&resp, v))
                .unwrap_or_else(|e| panic!("v{v}: {e}"));
        assert_eq!(parsed.body.coordinators.len(), N, "v{v}");
    }
}

#[test]
fn sasl_handshake_mechanisms_of_the_smallest_size_parse() {
    for v in versions(ApiKey::SaslHandshake) {
        let resp = SaslHandshakeResponse::default().with_mechanisms(vec![sb(""); N]);
        let parsed = protocol::sasl_handshake::SaslHandshakeResponse::parse(v, &encode(&resp, v))
            .unwrap_or_else(|e| panic!("v{v}: {e}"));
        assert_eq!(parsed.body.mechanisms.len(), N, "v{v}");
    }
}

#[test]
fn transaction_topics_and_partitions_of_the_smallest_size_parse() {
    for v in versions(ApiKey::AddPartitionsToTxn) {
        let topic = AddPartitionsToTxnTopicResult::default().with_name(empty_topic_name());
        let topics = AddPartitionsToTxnResponse::default()
            .with_results_by_topic_v3_and_below(vec![topic.clone(); N]);
        let parsed = protocol::add_partitions_to_txn::AddPartitionsToTxnResponse::parse(
            v,
            &encode(&topics, v),
        )
        .unwrap_or_else(|e| panic!("v{v} topics: {e}"));
        assert_eq!(parsed.body.topics.len(), N, "v{v}");
        let partitions = AddPartitionsToTxnResponse::default()
            .with_results_by_topic_v3_and_below(vec![topic
                .with_results_by_partition(vec![AddPartitionsToTxnPartitionResult::default(); N])]);
        let parsed = protocol::add_partitions_to_txn::AddPartitionsToTxnResponse::parse(
            v,
            &encode(&partitions, v),
        )
        .unwrap_or_else(|e| panic!("v{v} partitions: {e}"));
        assert_eq!(parsed.body.topics[0].partitions.len(), N, "v{v}");
    }
    for v in versions(ApiKey::TxnOffsetCommit) {
        let topic = TxnOffsetCommitResponseTopic::default().with_name(empty_topic_name());
        let topics = TxnOffsetCommitResponse::default().with_topics(vec![topic.clone(); N]);
        let parsed =
            protocol::txn_offset_commit::TxnOffsetCommitResponse::parse(v, &encode(&topics, v))
                .unwrap_or_else(|e| panic!("v{v} topics: {e}"));
        assert_eq!(parsed.body.topics.len(), N, "v{v}");
        let partitions = TxnOffsetCommitResponse::default().with_topics(vec![
            topic.with_partitions(vec![TxnOffsetCommitResponsePartition::default(); N])
        ]);
        let parsed =
            protocol::txn_offset_commit::TxnOffsetCommitResponse::parse(v, &encode(&partitions, v))
                .unwrap_or_else(|e| panic!("v{v} partitions: {e}"));
        assert_eq!(parsed.body.topics[0].partitions.len(), N, "v{v}");
    }
}

#[test]
fn telemetry_compression_types_and_requested_metrics_of_the_smallest_size_parse() {
    for v in versions(ApiKey::GetTelemetrySubscriptions) {
        let types = GetTelemetrySubscriptionsResponse::default()
            .with_accepted_compression_types(vec![0; N]);
        let parsed =
            protocol::get_telemetry_subscriptions::GetTelemetrySubscriptionsResponse::parse(
                v,
                &encode(&types, v),
            )
            .unwrap_or_else(|e| panic!("v{v} compression types: {e}"));
        assert_eq!(parsed.body.accepted_compression_types.len(), N, "v{v}");
        let names =
            GetTelemetrySubscriptionsResponse::default().with_requested_metrics(vec![sb(""); N]);
        let parsed =
            protocol::get_telemetry_subscriptions::GetTelemetrySubscriptionsResponse::parse(
                v,
                &encode(&names, v),
            )
            .unwrap_or_else(|e| panic!("v{v} requested metrics: {e}"));
        assert_eq!(parsed.body.requested_metrics.len(), N, "v{v}");
    }
}
