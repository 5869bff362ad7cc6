//! Where a [`crate::MioDriver`] puts the delivery reports.

use std::collections::VecDeque;

use producer_core::{Delivery, Event};

/// Where a [`crate::MioDriver`] puts the delivery reports the core produces.
///
/// The default, [`DeliveryQueue`], keeps them for [`crate::MioDriver::poll_delivery`]. A sink
/// of your own (see [`crate::MioDriver::with_sink`]) receives each report the moment the core
/// produces it, inside whichever driver method produced it, without the copy into and out of a
/// queue: for loops that handle reports with a callback anyway.
///
/// A sink's panic does not unwind out of the driver: it is caught around that one call and
/// named by an [`Event::CallbackPanicked`] (from [`crate::MioDriver::poll_event`]); a report
/// whose `deliver` panicked counts as handed over.
pub trait DeliverySink<T> {
    /// Takes one report.
    fn deliver(&mut self, delivery: Delivery<T>);

    /// Reports the sink holds and has not handed on yet. [`crate::MioDriver::send`] answers
    /// `Full` while these plus the records in flight reach `buffer_max_records`, so a sink that
    /// queues must count them here; a sink that hands reports on at once keeps the default 0.
    fn pending(&self) -> usize {
        0
    }

    /// Sees each of the producer's events as it happens, before [`crate::MioDriver::poll_event`]
    /// keeps it: for a sink that hands events on too. Does nothing by default.
    fn event(&mut self, event: &Event) {
        let _ = event;
    }
}

/// The default [`DeliverySink`]: a queue drained with [`crate::MioDriver::poll_delivery`].
#[derive(Debug)]
pub struct DeliveryQueue<T>(VecDeque<Delivery<T>>);

impl<T> Default for DeliveryQueue<T> {
    fn default() -> Self {
        DeliveryQueue(VecDeque::new())
    }
}

impl<T> DeliveryQueue<T> {
    /// The oldest report, taken out.
    pub(crate) fn pop(&mut self) -> Option<Delivery<T>> {
        self.0.pop_front()
    }
}

impl<T> DeliverySink<T> for DeliveryQueue<T> {
    fn deliver(&mut self, delivery: Delivery<T>) {
        self.0.push_back(delivery);
    }

    fn pending(&self) -> usize {
        self.0.len()
    }
}
