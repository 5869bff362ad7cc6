//! The tests every threaded driver must pass (`producer_tests::driver_suite`), run against
//! this driver: panics contained, the command queue's bytes counted against
//! `buffer.memory`, the metrics snapshot, TLS (delivery, mTLS, every certificate failure, typed
//! start errors), the OAUTHBEARER token provider, the transactional handle, interceptors, and
//! purge, flush_within and close_within.

producer_tests::every_driver_test!(producer_tests::drive::Driver::Tokio);
