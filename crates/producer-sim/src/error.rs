//! The errors of the simulator's setup and fault-injection calls.

/// Errors of the fault-injection and setup methods (misuse by the test, never by the client).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum SimError {
    /// The topic does not exist (returned by methods that take a topic name).
    #[error("unknown topic {0:?}")]
    UnknownTopic(String),
    /// The topic exists but has no such partition.
    #[error("topic {topic:?} has no partition {partition}")]
    UnknownPartition {
        /// Topic name.
        topic: String,
        /// Partition index asked for.
        partition: i32,
    },
    /// No broker has this node id.
    #[error("unknown broker {0}")]
    UnknownBroker(i32),
    /// [`SimCluster::create_topic`](crate::SimCluster::create_topic) was called for an existing topic.
    #[error("topic {0:?} already exists")]
    TopicExists(String),
    /// [`SimCluster::create_topic`](crate::SimCluster::create_topic) was called with a partition count below 1, or the cluster
    /// has no broker.
    #[error("cannot create a topic with {0} partitions on this cluster")]
    InvalidPartitionCount(i32),
    /// [`SimCluster::create_topic_with_config`](crate::SimCluster::create_topic_with_config)
    /// was given a config the simulator does not model, or a value it does not know.
    #[error("topic config {key}={value:?} is not simulated")]
    InvalidTopicConfig {
        /// The config's key.
        key: String,
        /// Its value.
        value: String,
    },
}
