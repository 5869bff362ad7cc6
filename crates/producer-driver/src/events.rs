//! The core's events, logged for operators with `tracing`.

use producer_core::Event;
use tracing::{debug, error, info, warn};

/// Logs one of the producer's events: retries, sequence resets and refused answers at `warn`, a
/// fatal error and a callback's panic at `error`, a close's deadline at `warn`, the producer
/// id, broker connections becoming ready, a flush's deadline and the close at `info`, metadata updates (and events added later) at `debug`. Call it
/// for every `Output::Event`, and for the events a driver makes itself
/// ([`Event::CallbackPanicked`]).
pub fn log_event(event: &Event) {
    match event {
        Event::Retry {
            topic,
            partition,
            error,
        } => warn!(%topic, partition, %error, "retrying batch"),
        Event::SequenceReset {
            topic,
            partition,
            producer_id,
            epoch,
        } => {
            warn!(%topic, partition, producer_id, epoch, "partition bumped its epoch; sequence restarts at 0")
        }
        Event::Fatal(err) => error!(error = %err, "producer failed; every record fails"),
        Event::AllBrokersDown {
            last_error,
            cluster_reached,
        } => warn!(
            error = %last_error,
            cluster_reached,
            "no broker can be reached; retrying with reconnect backoff"
        ),
        Event::BrokerReady { node_id } => info!(node_id, "broker connection ready"),
        Event::CredentialsInPlaintext { node_id, mechanism } => warn!(
            node_id,
            %mechanism,
            "SASL credentials are sent without TLS (security.protocol=SASL_PLAINTEXT): use SASL_SSL"
        ),
        Event::ProducerId { producer_id, epoch } => {
            info!(producer_id, epoch, "producer id assigned")
        }
        Event::MetadataUpdated => debug!("metadata updated"),
        Event::AnswerRefused {
            node_id,
            api,
            topic,
            violation,
        } => warn!(
            node_id,
            ?api,
            topic = topic.as_deref(),
            %violation,
            "broker answer refused"
        ),
        Event::Closed => info!("producer closed"),
        Event::FlushTimedOut { unacknowledged } => {
            info!(unacknowledged, "flush deadline passed; the records go on")
        }
        Event::CloseDeadlineReached { purged, timed_out } => warn!(
            purged,
            timed_out,
            "close deadline passed: records never sent purged, records in flight timed out"
        ),
        Event::CallbackPanicked { callback, message } => {
            error!(%callback, %message, "the application's code panicked; the producer goes on")
        }
        other => debug!(event = ?other, "producer event"),
    }
}
