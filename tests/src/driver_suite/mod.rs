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

pub mod bounds;
pub mod metrics;
pub mod panics;
pub mod transactions;

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
            metrics::the_metrics_count_the_run,
            transactions::transactions_exist_only_with_a_transactional_id,
        );
    };
}
