//! What the cross-checks against kafka-protocol share.

use kafka_protocol::protocol::StrBytes;

/// A kafka-protocol string.
pub fn sb(s: &str) -> StrBytes {
    StrBytes::from_string(s.to_owned())
}

/// kafka-protocol's `Uuid` (from the `uuid` crate, which is not our dependency, and whose
/// decoder kafka-protocol keeps private) built from raw bytes by decoding a v10 Metadata
/// request topic entry: TopicId, empty compact Name, no tags.
macro_rules! kp_uuid {
    ($b:expr) => {{
        use kafka_protocol::protocol::Decodable;
        let mut raw = $b.to_vec();
        raw.extend_from_slice(&[1, 0]);
        kafka_protocol::messages::metadata_request::MetadataRequestTopic::decode(
            &mut bytes::Bytes::from(raw),
            10,
        )
        .expect("valid topic entry")
        .topic_id
    }};
}
pub(crate) use kp_uuid;
