//! The tests every threaded driver must pass (`producer_tests::driver_suite`), run against
//! this driver: panics contained, and the command queue's bytes counted against
//! `buffer.memory`.

use producer_tests::drive::Driver;

producer_tests::driver_suite!(Driver::Tokio =>
    panics::a_panicking_delivery_callback_is_contained,
    panics::a_panicking_event_callback_is_contained,
    panics::a_panicking_token_provider_is_named_by_an_event,
    panics::a_panic_in_the_loop_fails_every_record,
    panics::a_panic_while_failing_the_records_still_returns_every_call,
    panics::a_panic_in_a_transaction_fails_its_records_honestly,
    bounds::the_command_queue_counts_bytes_against_buffer_memory,
);
