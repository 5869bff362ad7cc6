//! Integration tests against a real Kafka-protocol broker.
