//! ApiVersions: the ranges the broker advertises, and the client software check of v3+.

use kafka_protocol::messages::api_versions_response::{
    ApiVersion, FinalizedFeatureKey, SupportedFeatureKey,
};
use kafka_protocol::messages::{ApiKey, ApiVersionsRequest, ApiVersionsResponse};
use kafka_protocol::protocol::StrBytes;

use super::{code, encode_frame};
use crate::cluster::SimCluster;
use crate::{RequestRecord, API_API_VERSIONS};

fn kafka_software_name_ok(s: &str) -> bool {
    // [a-zA-Z0-9](?:[a-zA-Z0-9\-.]*[a-zA-Z0-9])?
    let b = s.as_bytes();
    let (Some(first), Some(last)) = (b.first(), b.last()) else {
        return false;
    };
    first.is_ascii_alphanumeric()
        && last.is_ascii_alphanumeric()
        && b.iter()
            .all(|c| c.is_ascii_alphanumeric() || *c == b'-' || *c == b'.')
}

impl SimCluster {
    pub(super) fn api_version_list(&self, broker_id: i32) -> Vec<ApiVersion> {
        self.brokers
            .get(&broker_id)
            .map(|b| {
                b.api_versions
                    .iter()
                    .map(|(k, min, max)| {
                        let mut v = ApiVersion::default();
                        v.api_key = *k;
                        v.min_version = *min;
                        v.max_version = *max;
                        v
                    })
                    .collect()
            })
            .unwrap_or_default()
    }

    /// The features of a v3+ answer: `transaction.version` supported 0-2 (left out of v3's
    /// list, whose clients reject a minimum of 0: KAFKA-17011) and finalized at
    /// [`SimConfig::transaction_version`](crate::SimConfig::transaction_version) (not listed at
    /// level 0, as Kafka leaves out features finalized at 0), with finalized-features epoch 1.
    fn features(&self, version: i16, resp: &mut ApiVersionsResponse) {
        let name = StrBytes::from_static_str("transaction.version");
        if version >= 4 {
            let mut f = SupportedFeatureKey::default();
            f.name = name.clone();
            f.min_version = 0;
            f.max_version = 2;
            resp.supported_features.push(f);
        }
        resp.finalized_features_epoch = 1;
        let level = self.cfg.transaction_version;
        if level > 0 {
            let mut f = FinalizedFeatureKey::default();
            f.name = name;
            f.max_version_level = level;
            f.min_version_level = level;
            resp.finalized_features.push(f);
        }
    }

    pub(super) fn api_versions(
        &mut self,
        broker_id: i32,
        version: i16,
        correlation_id: i32,
        req: ApiVersionsRequest,
        rec: &mut RequestRecord,
    ) -> Result<Vec<u8>, String> {
        let mut resp = ApiVersionsResponse::default();
        resp.api_keys = self.api_version_list(broker_id);
        if version >= 1 {
            resp.throttle_time_ms = self.take_throttle(broker_id);
        }
        if version >= 3 {
            self.features(version, &mut resp);
        }
        if version >= 3
            && (!kafka_software_name_ok(&req.client_software_name)
                || !kafka_software_name_ok(&req.client_software_version))
        {
            resp.error_code = code::INVALID_REQUEST;
        }
        if let Some(inj) = self.take_injection(API_API_VERSIONS, |_| true) {
            resp.error_code = inj.error_code;
        }
        rec.error_code = resp.error_code;
        encode_frame(ApiKey::ApiVersions, version, correlation_id, &resp)
    }
}
