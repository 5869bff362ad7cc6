//! Bad records and configurations at their limits: a topic name outside Kafka's rules is a
//! typed `send` error with the record handed back, and never asked for in Metadata; a client id
//! and a header key at their limits go on the wire with lengths that kafka-protocol reads back
//! exactly (nothing wraps), and past them are typed errors.

mod by_hand;

use std::time::Instant;

use by_hand::Scripted;
use bytes::Bytes;
use kafka_protocol::messages::{ApiKey, ProduceRequest};
use kafka_protocol::protocol::Decodable;
use kafka_protocol::records::RecordBatchDecoder;
use producer_core::{
    check_topic_name, Acks, Config, ConfigError, InvalidTopicName, Producer, Record,
    SendErrorReason, MAX_TOPIC_NAME_LEN,
};

fn scripted(config: Config) -> Scripted {
    let t0 = Instant::now();
    Scripted::new(Producer::new(config, t0), t0)
}

fn plain_config() -> producer_core::ConfigBuilder {
    Config::builder([("bootstrap", 9092)]).acks(Acks::Leader)
}

/// Names Kafka refuses (`Topic.validate`), each with the error that says why.
fn refused_names() -> Vec<(String, InvalidTopicName)> {
    vec![
        ("".into(), InvalidTopicName::Empty),
        (".".into(), InvalidTopicName::DotOrDotDot),
        ("..".into(), InvalidTopicName::DotOrDotDot),
        ("t".repeat(250), InvalidTopicName::TooLong(250)),
        ("t".repeat(70_000), InvalidTopicName::TooLong(70_000)),
        ("a b".into(), InvalidTopicName::IllegalCharacter(' ')),
        ("orders/eu".into(), InvalidTopicName::IllegalCharacter('/')),
        ("tøpic".into(), InvalidTopicName::IllegalCharacter('ø')),
        ("nul\0".into(), InvalidTopicName::IllegalCharacter('\0')),
    ]
}

#[test]
fn a_250_character_topic_and_the_topics_dot_and_dot_dot_are_refused_at_send() {
    let mut s = scripted(plain_config().build().unwrap());
    let now = s.now;
    for (i, (name, why)) in refused_names().into_iter().enumerate() {
        let record = Record::new(name.as_str(), &b"value"[..]).with_key(&b"k"[..]);
        let e = s
            .producer
            .send(now, record.clone(), i as u32)
            .expect_err(&format!("{name:?} accepted"));
        assert_eq!(e.reason, SendErrorReason::InvalidTopic(why), "{name:?}");
        assert_eq!(e.record, record, "the record is handed back whole");
        assert_eq!(e.opaque, i as u32);
        // Refused again: a refused name is not remembered as a topic.
        assert!(s.producer.send(now, record, 0).is_err());
    }
    assert_eq!(s.producer.buffered_records(), 0);
    // The longest name allowed, and every allowed character, are taken.
    let longest = "x".repeat(MAX_TOPIC_NAME_LEN);
    let every_character = "azAZ09._-";
    for name in [longest.as_str(), every_character, "..."] {
        assert_eq!(check_topic_name(name), Ok(()));
        s.producer
            .send(now, Record::new(name, &b"v"[..]), 99)
            .unwrap_or_else(|e| panic!("{name:?}: {e}"));
    }
    // Metadata asks for the accepted topics only.
    s.pump();
    s.answer_api_versions();
    let mut asked = s.metadata_topics_asked();
    asked.sort();
    let mut expected = vec![
        longest.clone(),
        every_character.to_string(),
        "...".to_string(),
    ];
    expected.sort();
    assert_eq!(asked, expected);
    assert!(
        SendErrorReason::InvalidTopic(InvalidTopicName::TooLong(250))
            .to_string()
            .contains("at most 249"),
    );
}

/// A client id of 32767 bytes, the most an INT16 length says, goes in every request header
/// and kafka-protocol reads it back whole; one byte more is refused when the configuration is
/// built, so no header ever carries a wrapped length.
#[test]
fn a_client_id_at_its_length_limit_is_read_back_and_past_it_is_a_typed_error() {
    let longest = "c".repeat(Config::MAX_ID_LEN);
    let mut s = scripted(plain_config().client_id(longest.clone()).build().unwrap());
    s.pump();
    let req = s.take(ApiKey::ApiVersions);
    assert_eq!(
        req.header.client_id.as_deref(),
        Some(longest.as_str()),
        "the header's client id"
    );
    let too_long = "c".repeat(Config::MAX_ID_LEN + 1);
    assert_eq!(
        plain_config().client_id(too_long).build().unwrap_err(),
        ConfigError::IdTooLong {
            setting: "client_id",
            len: 32768
        }
    );
}

/// A header key of 64 KiB (past any INT16, within the record's varint) goes out in a Produce
/// request that kafka-protocol decodes, records included, with the key whole; a record whose
/// header key does not fit `max_request_size` is refused at `send` with the typed
/// `RecordTooLarge`, handed back.
#[test]
fn a_long_header_key_is_read_back_whole_and_one_past_the_request_size_is_refused() {
    let mut s = scripted(
        plain_config()
            .linger(std::time::Duration::ZERO)
            .build()
            .unwrap(),
    );
    let now = s.now;
    let key = "h".repeat(64 * 1024 + 1);
    let record = Record::new("orders", &b"value"[..])
        .with_header(key.clone(), Some(Bytes::from_static(b"hv")));
    s.producer.send(now, record, 1).unwrap();
    let too_big = Record::new("orders", &b"value"[..]).with_header("k".repeat(1 << 20), None);
    let e = s.producer.send(now, too_big.clone(), 2).unwrap_err();
    assert!(
        matches!(
            e.reason,
            SendErrorReason::RecordTooLarge { max: 1_048_576, .. }
        ),
        "{:?}",
        e.reason
    );
    assert_eq!(e.record, too_big);
    s.pump();
    s.answer_api_versions();
    s.answer_metadata("leader", 1);
    s.answer_api_versions();
    let produce = s.take(ApiKey::Produce);
    let req = ProduceRequest::decode(
        &mut produce.body.clone(),
        produce.header.request_api_version,
    )
    .expect("kafka-protocol reads the Produce request");
    let mut records = req.topic_data[0].partition_data[0]
        .records
        .clone()
        .expect("a record set");
    let batches = RecordBatchDecoder::decode(&mut records).expect("kafka-protocol reads the batch");
    let record = &batches.records[0];
    let (k, v) = record.headers.iter().next().expect("one header");
    assert_eq!(k.len(), key.len());
    assert_eq!(k.as_str(), key.as_str());
    assert_eq!(v.as_deref(), Some(&b"hv"[..]));
}

/// A transactional id of 32767 bytes in every request that carries it, at every version this
/// crate speaks: kafka-protocol reads it back whole (INT16 and compact lengths alike); one byte
/// more is refused when the configuration is built.
#[test]
fn a_transactional_id_at_its_length_limit_is_read_back_in_every_request() {
    use kafka_protocol::messages as kp;
    use producer_core::protocol::{add_offsets_to_txn, add_partitions_to_txn, end_txn};
    use producer_core::protocol::{find_coordinator, init_producer_id};
    let id = "t".repeat(Config::MAX_ID_LEN);
    fn encoded(encode: impl FnOnce(&mut Vec<u8>)) -> Bytes {
        let mut buf = Vec::new();
        encode(&mut buf);
        Bytes::from(buf)
    }
    for v in 0..=4 {
        let req = init_producer_id::InitProducerIdRequest {
            transactional_id: Some(&id),
            transaction_timeout_ms: 60_000,
            producer_id: -1,
            producer_epoch: -1,
        };
        let kp = kp::InitProducerIdRequest::decode(&mut encoded(|b| req.encode(v, b)), v).unwrap();
        assert_eq!(
            kp.transactional_id.as_deref().map(|s| s.len()),
            Some(id.len()),
            "v{v}"
        );
    }
    for v in 0..=3 {
        let parts: &[i32] = &[0];
        let topics = [("orders", parts)];
        let req = add_partitions_to_txn::AddPartitionsToTxnRequest {
            transactional_id: &id,
            producer_id: 1,
            producer_epoch: 0,
            topics: &topics,
        };
        let kp =
            kp::AddPartitionsToTxnRequest::decode(&mut encoded(|b| req.encode(v, b)), v).unwrap();
        assert_eq!(kp.v3_and_below_transactional_id.len(), id.len(), "v{v}");
    }
    for v in 0..=4 {
        let req = add_offsets_to_txn::AddOffsetsToTxnRequest {
            transactional_id: &id,
            producer_id: 1,
            producer_epoch: 0,
            group_id: &id,
        };
        let kp = kp::AddOffsetsToTxnRequest::decode(&mut encoded(|b| req.encode(v, b)), v).unwrap();
        assert_eq!(
            (kp.transactional_id.len(), kp.group_id.len()),
            (id.len(), id.len()),
            "v{v}"
        );
    }
    for v in 0..=4 {
        let req = end_txn::EndTxnRequest {
            transactional_id: &id,
            producer_id: 1,
            producer_epoch: 0,
            committed: true,
        };
        let kp = kp::EndTxnRequest::decode(&mut encoded(|b| req.encode(v, b)), v).unwrap();
        assert_eq!(kp.transactional_id.len(), id.len(), "v{v}");
    }
    for v in 1..=5 {
        let keys = [id.as_str()];
        let req = find_coordinator::FindCoordinatorRequest {
            key_type: find_coordinator::CoordinatorType::Transaction,
            keys: &keys,
        };
        let kp = kp::FindCoordinatorRequest::decode(&mut encoded(|b| req.encode(v, b)), v).unwrap();
        let len = if v < 4 {
            kp.key.len()
        } else {
            kp.coordinator_keys[0].len()
        };
        assert_eq!(len, id.len(), "v{v}");
    }
    assert_eq!(
        plain_config()
            .acks(Acks::All)
            .transactional_id("t".repeat(Config::MAX_ID_LEN + 1))
            .build()
            .unwrap_err(),
        ConfigError::IdTooLong {
            setting: "transactional_id",
            len: 32768
        }
    );
}
