//! Topic operations (through KafkaCtl's admin client) and the waits that make them visible:
//! an admin call returns when the controller has accepted it; these return when every live
//! broker's Metadata shows its effect, so a producer started next sees it wherever it asks.

use std::collections::BTreeMap;
use std::time::Duration;

use super::{views, KafkaCluster, LaunchError};
use crate::kafka::wire::{unserved_partitions, ClusterView};

/// How long a topic change may take to reach every broker.
const PROPAGATION: Duration = Duration::from_secs(30);

impl KafkaCluster {
    /// Creates `topic` (`partitions`, replication factor `rf`, topic `configs`) and waits
    /// until every live broker reports a leader for each of its partitions and each leader
    /// serves its partitions (answers ListOffsets for them).
    pub fn create_topic(
        &self,
        topic: &str,
        partitions: i32,
        rf: i16,
        configs: &[(&str, &str)],
    ) -> Result<(), LaunchError> {
        self.ctl()
            .create_topic(topic, partitions, rf, configs)
            .map_err(LaunchError::Other)?;
        self.wait_led(&[topic], PROPAGATION)?;
        self.wait_served(topic, PROPAGATION)
    }

    /// Waits until the leader of every partition of `topic` (as Metadata names it) answers
    /// ListOffsets for it without an error.
    pub fn wait_served(&self, topic: &str, timeout: Duration) -> Result<(), LaunchError> {
        let mut last = String::new();
        self.wait_until(
            &format!("the leaders of {topic} to serve it"),
            timeout,
            None,
            || {
                let Ok(leaders) = self.leaders(topic) else {
                    return false;
                };
                let mut by_leader: BTreeMap<i32, Vec<i32>> = BTreeMap::new();
                for (p, l) in leaders {
                    by_leader.entry(l).or_default().push(p);
                }
                by_leader.iter().all(|(&leader, parts)| {
                    if !self.node_ids().contains(&leader) {
                        return false;
                    }
                    let addr = self.internal_addr(leader);
                    match unserved_partitions(addr, topic, parts, Duration::from_secs(2)) {
                        Ok(bad) if bad.is_empty() => true,
                        Ok(bad) => {
                            last = format!("leader {leader} answered {bad:?}");
                            false
                        }
                        Err(e) => {
                            last = e;
                            false
                        }
                    }
                })
            },
        )
        .map_err(|e| match e {
            LaunchError::Timeout { waiting_for, logs } => LaunchError::Timeout {
                waiting_for: format!("{waiting_for}; last: {last}"),
                logs,
            },
            e => e,
        })
    }

    /// Deletes `topic`; returns once the controller no longer lists it and no live broker's
    /// Metadata shows it.
    pub fn delete_topic(&self, topic: &str) -> Result<(), LaunchError> {
        self.ctl().delete_topic(topic).map_err(LaunchError::Other)?;
        self.wait_until(
            &format!("every live broker to forget {topic}"),
            PROPAGATION,
            None,
            || {
                let live = self.live_nodes();
                views(self, &[topic])
                    .iter()
                    .filter(|(n, _)| live.contains(n))
                    .all(|(_, v)| v.topics.get(topic).is_none_or(|(err, _)| *err != 0))
            },
        )
    }

    /// Sets topic configs (an empty value restores the broker default). Takes effect on the
    /// leaders within moments; the admin call returns when the controller has it.
    pub fn alter_topic_config(
        &self,
        topic: &str,
        configs: &[(&str, &str)],
    ) -> Result<(), LaunchError> {
        self.ctl()
            .alter_topic_config(topic, configs)
            .map_err(LaunchError::Other)
    }

    /// Makes `broker` the leader of `topic`/`partition` (reassignment + preferred election),
    /// then waits until every live broker reports it and it serves the partition.
    pub fn move_leader(&self, topic: &str, partition: i32, broker: i32) -> Result<(), LaunchError> {
        self.request_leader_move(topic, partition, broker)?;
        self.wait_leader(topic, partition, broker)
    }

    /// Asks the controller to make `broker` the leader of `topic`/`partition` (reassignment
    /// with `broker` first, then a preferred election) and returns when it has accepted; the
    /// brokers learn of the new leader a moment later ([`wait_leader`](Self::wait_leader)).
    pub fn request_leader_move(
        &self,
        topic: &str,
        partition: i32,
        broker: i32,
    ) -> Result<(), LaunchError> {
        // The admin client's own answer may predate the election's effect: the brokers'
        // Metadata decides.
        self.ctl()
            .move_leader(topic, partition, broker)
            .map(drop)
            .map_err(LaunchError::Other)
    }

    /// Waits until every live broker reports `broker` leading `topic`/`partition`, and it
    /// serves the partition.
    pub fn wait_leader(&self, topic: &str, partition: i32, broker: i32) -> Result<(), LaunchError> {
        self.wait_until(
            &format!("every live broker to report {broker} leading {topic}-{partition}"),
            PROPAGATION,
            None,
            || {
                let live = self.live_nodes();
                let v = views(self, &[topic]);
                live.iter().all(|n| {
                    v.iter().any(|(m, view)| {
                        m == n
                            && view
                                .topics
                                .get(topic)
                                .and_then(|(_, parts)| parts.get(&partition))
                                .is_some_and(|p| p.leader == broker)
                    })
                })
            },
        )?;
        self.wait_served(topic, PROPAGATION)
    }

    /// The first live broker's view of `topics`.
    pub fn view(&self, topics: &[&str]) -> Result<ClusterView, LaunchError> {
        let live = self.live_nodes();
        views(self, topics)
            .into_iter()
            .find(|(n, _)| live.contains(n))
            .map(|(_, v)| v)
            .ok_or_else(|| LaunchError::Other("no live broker answers Metadata".into()))
    }

    /// Partition -> leader of `topic`, as the first live broker reports it.
    pub fn leaders(&self, topic: &str) -> Result<BTreeMap<i32, i32>, LaunchError> {
        let v = self.view(&[topic])?;
        Ok(v.topics
            .get(topic)
            .map(|(_, parts)| parts.iter().map(|(&p, view)| (p, view.leader)).collect())
            .unwrap_or_default())
    }

    /// Waits until every live broker reports a leader (a live broker) for every partition of
    /// `topics`.
    pub fn wait_led(&self, topics: &[&str], timeout: Duration) -> Result<(), LaunchError> {
        self.wait_until(
            &format!("leaders for every partition of {topics:?}"),
            timeout,
            None,
            || self.every_live_node_sees(topics, ClusterView::all_led),
        )
    }

    /// Waits until every live broker reports every replica of `topics` in sync.
    pub fn wait_in_sync(&self, topics: &[&str], timeout: Duration) -> Result<(), LaunchError> {
        self.wait_until(
            &format!("all replicas of {topics:?} in sync"),
            timeout,
            None,
            || self.every_live_node_sees(topics, ClusterView::all_in_sync),
        )
    }

    fn every_live_node_sees(
        &self,
        topics: &[&str],
        check: impl Fn(&ClusterView, &[&str]) -> bool,
    ) -> bool {
        let live = self.live_nodes();
        let v = views(self, topics);
        !live.is_empty()
            && live
                .iter()
                .all(|n| v.iter().any(|(m, view)| m == n && check(view, topics)))
    }
}
