//! Metadata: the running brokers, the topics asked for (or all), their leaders and leader
//! epochs, and the injected topic or partition errors.

use kafka_protocol::messages::metadata_response::{
    MetadataResponseBroker, MetadataResponsePartition, MetadataResponseTopic,
};
use kafka_protocol::messages::{MetadataRequest, MetadataResponse, TopicName};
use kafka_protocol::protocol::StrBytes;

use super::code;
use crate::cluster::SimCluster;
use crate::API_METADATA;

impl SimCluster {
    pub(super) fn metadata(
        &mut self,
        broker_id: i32,
        version: i16,
        req: MetadataRequest,
    ) -> MetadataResponse {
        let mut resp = MetadataResponse::default();
        if version >= 3 {
            resp.throttle_time_ms = self.take_throttle(broker_id);
        }
        if version >= 13 {
            if let Some((code, left)) = self.metadata_top_level_error {
                self.metadata_top_level_error = (left > 1).then_some((code, left - 1));
                resp.error_code = code;
                return resp;
            }
        }
        resp.brokers = self
            .brokers
            .values()
            .filter(|b| b.running)
            .map(|b| {
                let mut mb = MetadataResponseBroker::default();
                mb.node_id = b.spec.node_id.into();
                mb.host = StrBytes::from_string(b.spec.host.clone());
                mb.port = i32::from(b.spec.port);
                mb
            })
            .collect();
        if version >= 2 {
            resp.cluster_id = Some(StrBytes::from_string(self.cfg.cluster_id.clone()));
        }
        if version >= 1 {
            let controller = self
                .brokers
                .values()
                .find(|b| b.running)
                .map_or(-1, |b| b.spec.node_id);
            resp.controller_id = controller.into();
        }
        // Which topics: (name, Option<id asked>).
        let wanted: Vec<(Option<String>, Option<uuid::Uuid>)> = match req.topics {
            None => self
                .topics
                .keys()
                .map(|n| (Some(n.clone()), None))
                .collect(),
            Some(ts) if ts.is_empty() && version == 0 => self
                .topics
                .keys()
                .map(|n| (Some(n.clone()), None))
                .collect(),
            Some(ts) => ts
                .into_iter()
                .map(|t| {
                    let name = t.name.map(|n| n.0.to_string());
                    let id = (!t.topic_id.is_nil()).then_some(t.topic_id);
                    (name, id)
                })
                .collect(),
        };
        for (name, id) in wanted {
            let mut mt = MetadataResponseTopic::default();
            let found = match (&name, id) {
                (Some(n), _) => self.topics.get_key_value(n.as_str()),
                (None, Some(id)) => self.topics.iter().find(|(_, t)| t.id == id),
                (None, None) => None,
            };
            let Some((tname, topic)) = found else {
                mt.error_code = if name.is_none() && id.is_some() {
                    code::UNKNOWN_TOPIC_ID
                } else {
                    code::UNKNOWN_TOPIC_OR_PARTITION
                };
                mt.name = name.map(|n| TopicName(StrBytes::from_string(n)));
                if version >= 10 {
                    mt.topic_id = id.unwrap_or_default();
                }
                resp.topics.push(mt);
                continue;
            };
            mt.name = Some(TopicName(StrBytes::from_string(tname.clone())));
            if version >= 10 {
                mt.topic_id = topic.id;
            }
            for (i, p) in topic.partitions.iter().enumerate() {
                let mut mp = MetadataResponsePartition::default();
                mp.partition_index = i as i32;
                mp.leader_id = p.leader.into();
                if version >= 7 {
                    mp.leader_epoch = p.leader_epoch;
                }
                mp.replica_nodes = vec![p.leader.into()];
                mp.isr_nodes = vec![p.leader.into()];
                mt.partitions.push(mp);
            }
            resp.topics.push(mt);
        }
        // Injected errors: topic-level (no partition filter) or partition-level.
        for mt in &mut resp.topics {
            let tname = mt.name.as_ref().map(|n| n.0.to_string());
            if mt.error_code == code::NONE {
                let t = tname.clone();
                if let Some(inj) = self.take_injection(API_METADATA, move |i| {
                    i.partition.is_none() && i.topic.as_ref().is_none_or(|x| Some(x) == t.as_ref())
                }) {
                    mt.error_code = inj.error_code;
                    mt.partitions.clear();
                    continue;
                }
            }
            for mp in &mut mt.partitions {
                let t = tname.clone();
                let p = mp.partition_index;
                if let Some(inj) = self.take_injection(API_METADATA, move |i| {
                    i.partition == Some(p) && i.topic.as_ref().is_none_or(|x| Some(x) == t.as_ref())
                }) {
                    mp.error_code = inj.error_code;
                }
            }
        }
        resp
    }
}
