//! The connections the core asked for, by the number Python knows them by.
//!
//! Python names a connection by `ConnId::as_u64` (an `int`); the table turns that back into
//! the core's `ConnId`, and keeps the transport's bound `write` once the connection is up, so
//! that the bytes the core transmits are written from Rust without a Python frame.
//!
//! Cap: one entry per connection the core has open or opening: at most one per broker slot
//! (`producer_core::limits`), plus connections the core gave up and Python has not closed yet
//! (removed at the core's `Disconnect` or at Python's report of the loss, whichever comes
//! first).

use std::collections::HashMap;

use producer_core::ConnId;
use pyo3::prelude::*;

/// One connection of the core's.
struct Entry {
    conn: ConnId,
    /// `transport.write`, once the connection is up.
    write: Option<Py<PyAny>>,
}

/// The core's connections by their Python number.
#[derive(Default)]
pub(crate) struct Connections {
    entries: HashMap<u64, Entry>,
}

impl Connections {
    /// The core asked for `conn` (its `Output::Connect`): its number for Python.
    pub(crate) fn opening(&mut self, conn: ConnId) -> u64 {
        let id = conn.as_u64();
        self.entries.insert(id, Entry { conn, write: None });
        id
    }

    /// The core's `ConnId` of connection `id`, while the core still has it.
    pub(crate) fn get(&self, id: u64) -> Option<ConnId> {
        self.entries.get(&id).map(|e| e.conn)
    }

    /// Connection `id` is up and writes with `write`; its `ConnId`, or `None` if the core gave
    /// it up meanwhile (the caller then closes the transport).
    pub(crate) fn up(&mut self, id: u64, write: Py<PyAny>) -> Option<ConnId> {
        let e = self.entries.get_mut(&id)?;
        e.write = Some(write);
        Some(e.conn)
    }

    /// The `write` of the connection the core names, if it is up.
    pub(crate) fn writer(&self, conn: ConnId) -> Option<&Py<PyAny>> {
        self.entries.get(&conn.as_u64())?.write.as_ref()
    }

    /// Forgets connection `id` (the core closed it, or Python lost it): its `ConnId` if it was
    /// still known.
    pub(crate) fn remove(&mut self, id: u64) -> Option<ConnId> {
        self.entries.remove(&id).map(|e| e.conn)
    }

    /// Forgets every connection (the producer is closed or detached).
    pub(crate) fn clear(&mut self) {
        self.entries.clear();
    }

    /// How many connections are known.
    pub(crate) fn len(&self) -> usize {
        self.entries.len()
    }
}

#[cfg(test)]
mod tests {
    use std::time::Instant;

    use producer_core::{Config, Output, Producer, Record};

    use super::*;

    /// A real `ConnId`: the first connection a producer asks for.
    fn a_conn() -> ConnId {
        let now = Instant::now();
        let mut p = Producer::<()>::new(Config::builder([("b", 9092)]).build().unwrap(), now);
        p.send(now, Record::new("t", "v"), ()).unwrap();
        match p.poll_output() {
            Some(Output::Connect { conn, .. }) => conn,
            other => panic!("expected a Connect, got {other:?}"),
        }
    }

    #[test]
    fn a_connection_is_known_by_its_number_until_removed() {
        let conn = a_conn();
        let mut table = Connections::default();
        let id = table.opening(conn);
        assert_eq!(id, conn.as_u64());
        assert_eq!(table.get(id), Some(conn));
        assert!(table.writer(conn).is_none(), "no writer before it is up");
        assert_eq!(table.len(), 1);
        assert_eq!(table.remove(id), Some(conn));
        assert_eq!(table.remove(id), None, "a second loss report finds nothing");
        assert_eq!(table.get(id), None);
        assert_eq!(table.len(), 0);
    }
}
