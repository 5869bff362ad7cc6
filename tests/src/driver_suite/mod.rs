//! The tests every threaded driver must pass, written once as functions of the [`Driver`]
//! (through [`crate::running::Running`]) and run by each driver's crate with
//! [`driver_suite!`](crate::driver_suite!):
//!
//! ```ignore
//! producer_tests::driver_suite!(Driver::MioThreaded =>
//!     panics::a_panicking_delivery_callback_is_contained,
//! );
//! ```
//!
//! or, for every test of the suite, [`every_driver_test!`](crate::every_driver_test!).
//!
//! [`Driver`]: crate::drive::Driver

use std::collections::HashMap;

use producer_core::Record;

use crate::running::{Reported, Running, HANG_GUARD};

pub mod backpressure;
pub mod bounds;
pub mod control;
pub mod interceptors;
pub mod metrics;
pub mod oauth;
pub mod otel;
pub mod panics;
pub mod partitions;
pub mod tls;
pub mod transactions;

/// Waits for the reports of `ids` (each once; a second report for one fails the test).
pub fn reports_of(p: &Running, ids: impl IntoIterator<Item = u64>) -> HashMap<u64, Reported> {
    let mut want: Vec<u64> = ids.into_iter().collect();
    want.sort_unstable();
    let mut got = HashMap::new();
    while got.len() < want.len() {
        let r = p
            .next_report(HANG_GUARD)
            .expect("a report for every record");
        assert!(
            want.binary_search(&r.id).is_ok(),
            "unexpected report {}",
            r.id
        );
        let id = r.id;
        assert!(got.insert(id, r).is_none(), "two reports for record {id}");
    }
    got
}

/// Sends `records` through `p`, record `i` with id `i`, and waits for each one's report.
pub fn send_and_report(p: &Running, records: &[Record]) -> HashMap<u64, Reported> {
    for (id, r) in (0u64..).zip(records) {
        p.send(r.clone(), id).expect("the producer is open");
    }
    reports_of(p, 0..records.len() as u64)
}

/// A failure handed back record `id` as it was `sent`: topic, key, value, headers and
/// partition, and its timestamp: the one it was sent with, or one the driver filled in.
pub fn assert_sent_record_back(back: Option<Record>, sent: &Record, id: u64) {
    let mut back = back.unwrap_or_else(|| panic!("record {id} not handed back"));
    match sent.timestamp {
        Some(_) => assert_eq!(back.timestamp, sent.timestamp, "timestamp of record {id}"),
        None => assert!(
            back.timestamp.is_some(),
            "record {id}: the driver fills in a timestamp"
        ),
    }
    back.timestamp = sent.timestamp;
    assert_eq!(&back, sent, "record {id} handed back");
}

/// Runs the shared driver tests named (`module::test`) against `$driver`, one `#[test]` each
/// (named after the test), under the hang guard.
#[macro_export]
macro_rules! driver_suite {
    ($driver:expr => $($module:ident :: $test:ident),* $(,)?) => {
        $(
            #[test]
            fn $test() {
                $crate::running::with_hang_guard(|| {
                    $crate::driver_suite::$module::$test($driver)
                });
            }
        )*
    };
}

/// Runs every test of the shared suite against `$driver` (see [`driver_suite!`]).
#[macro_export]
macro_rules! every_driver_test {
    ($driver:expr) => {
        $crate::driver_suite!($driver =>
            panics::a_panicking_delivery_callback_is_contained,
            panics::a_panicking_event_callback_is_contained,
            panics::a_panicking_token_provider_is_named_by_an_event,
            panics::a_panic_in_the_loop_fails_every_record,
            panics::a_panic_while_failing_the_records_still_returns_every_call,
            panics::a_panic_in_a_transaction_fails_its_records_honestly,
            bounds::the_command_queue_counts_bytes_against_buffer_memory,
            backpressure::a_wait_for_buffer_memory_in_the_driver_is_counted_and_diagnosed,
            backpressure::a_wait_for_the_queue_delay_limit_in_the_driver_is_counted_and_diagnosed,
            backpressure::a_flood_held_back_in_the_driver_keeps_the_queue_at_the_drain,
            metrics::the_metrics_count_the_run,
            metrics::the_diagnosis_names_each_broker_and_no_fault,
            tls::tls_delivers_and_reads_back,
            tls::mtls_with_client_auth_required_delivers,
            tls::endpoint_identification_off_accepts_a_certificate_for_another_name,
            tls::wrong_ca_fails_every_record_with_the_tls_error,
            tls::hostname_mismatch_fails_every_record_with_the_tls_error,
            tls::expired_certificate_fails_every_record_with_the_tls_error,
            tls::missing_client_certificate_fails_every_record_with_the_tls_error,
            tls::tls_client_to_a_plaintext_listener_fails_every_record_with_the_tls_error,
            tls::plaintext_client_to_a_tls_listener_fails_every_record_promptly,
            tls::unusable_tls_files_are_typed_start_errors,
            oauth::the_providers_token_goes_on_the_wire_and_is_reused_while_valid,
            oauth::a_providers_error_fails_the_records_with_it,
            oauth::without_a_provider_the_records_fail_with_no_token,
            transactions::transactions_exist_only_with_a_transactional_id,
            partitions::a_custom_partitioner_routes_and_partitions_for_tells_the_count,
            control::purge_hands_back_the_unsent_records_and_the_rest_are_delivered,
            control::flush_within_completes_or_tells_what_is_left,
            control::close_within_ends_what_is_held_at_its_deadline,
            control::close_within_holds_its_deadline_while_the_core_is_full,
            interceptors::an_interceptor_stamps_every_record_and_sees_every_report,
            interceptors::a_panicking_on_send_fails_exactly_that_record,
            interceptors::a_panicking_on_acknowledgement_is_named_and_the_report_arrives,
            otel::spans_follow_the_conventions_and_reach_the_consumer,
            otel::the_metrics_are_exported_through_opentelemetry,
        );
    };
}
