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
//! [`Driver`]: crate::drive::Driver

pub mod bounds;
pub mod panics;

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
