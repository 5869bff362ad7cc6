//! Interceptors on Apache Kafka itself (a single KRaft node), through both threaded drivers:
//! an interceptor stamps every record in `on_send` with a W3C `traceparent` header (as a
//! tracing integration would) and counts every acknowledgement. Kafka's Java consumer (an
//! independent client) reads every record back with exactly the header stamped for it, each
//! record once; every report was acknowledged once by the interceptor, the successes exactly
//! where the reports say the records landed.

use std::collections::{BTreeSet, HashMap};
use std::sync::{Arc, Mutex};

use producer_core::{Header, Record};
use producer_driver::{Acknowledgement, Interceptor};
use producer_tests::driver_suite::reports_of;
use producer_tests::kafka::suite::producer_config;
use producer_tests::kafka::{shared_cluster, ClusterSpec};
use producer_tests::running::{Options, Running};
use producer_tests::Driver;

const RECORDS: u64 = 2_000;
const PARTITIONS: i32 = 3;
/// The trace every record belongs to (32 hex digits).
const TRACE_ID: &str = "4bf92f3577b34da6a3ce929d0e0e4736";

/// The `traceparent` of record `id`: its own span (16 hex digits) in [`TRACE_ID`], sampled.
fn traceparent(id: u64) -> String {
    format!("00-{TRACE_ID}-{:016x}-01", id + 1)
}

/// Where each acknowledged record landed, and how many failures were acknowledged.
#[derive(Default, Clone)]
struct Acked {
    delivered: Vec<(i32, i64)>,
    failed: usize,
}

/// Stamps each record with the `traceparent` of the id its value names, and notes where each
/// acknowledged record landed (and how many failed).
struct Tracer {
    acked: Arc<Mutex<Acked>>,
}

impl Interceptor for Tracer {
    fn on_send(&mut self, record: &mut Record) {
        let value = record.value.as_deref().unwrap_or_default();
        let id: u64 = std::str::from_utf8(value)
            .ok()
            .and_then(|v| v.strip_prefix("record-"))
            .and_then(|v| v.parse().ok())
            .expect("a record of the test");
        record.headers.retain(|h| h.key != "traceparent");
        record.headers.push(Header::new(
            "traceparent",
            Some(traceparent(id).into_bytes().into()),
        ));
    }

    fn on_acknowledgement(&mut self, ack: Acknowledgement<'_>) {
        let mut acked = self.acked.lock().unwrap();
        match ack {
            Acknowledgement::Delivered(m) => acked.delivered.push((m.partition, m.offset)),
            _ => acked.failed += 1,
        }
    }
}

fn interceptor_headers_read_back(driver: Driver) {
    let Some(mut kafka) = shared_cluster(ClusterSpec::single) else {
        return;
    };
    let topic = kafka.topic("interceptors", PARTITIONS, 1, &[]);
    let acked = Arc::new(Mutex::new(Acked::default()));
    let mut options = Options::new(producer_config(&kafka).build().unwrap());
    options.interceptors = vec![Box::new(Tracer {
        acked: acked.clone(),
    })];
    let p = Running::start(driver, options);
    for id in 0..RECORDS {
        let record = Record::new(topic.as_str(), format!("record-{id}"))
            .with_key(format!("key-{}", id % 17));
        p.send(record, id).expect("open");
    }
    p.flush();
    let reports = reports_of(&p, 0..RECORDS);
    p.close();
    assert!(p.reports().is_empty(), "one report per record");

    let mut landed: Vec<(i32, i64)> = reports
        .iter()
        .map(|(id, r)| {
            let m = r
                .result
                .as_ref()
                .unwrap_or_else(|e| panic!("record {id}: {e:?}"));
            (m.partition, m.offset)
        })
        .collect();
    landed.sort_unstable();
    let Acked {
        mut delivered,
        failed,
    } = acked.lock().unwrap().clone();
    delivered.sort_unstable();
    assert_eq!(failed, 0, "no failure acknowledged");
    assert_eq!(delivered, landed, "every report acknowledged once");

    let read = kafka
        .ctl()
        .java_read_back(&topic, PARTITIONS)
        .expect("the Java consumer reads the topic");
    assert_eq!(read.len(), RECORDS as usize, "every record in the log once");
    let mut ids = BTreeSet::new();
    let at: HashMap<(i32, i64), u64> = reports
        .iter()
        .map(|(id, r)| {
            let m = r.result.as_ref().unwrap();
            ((m.partition, m.offset), *id)
        })
        .collect();
    for c in &read {
        let value = String::from_utf8(c.value.clone().expect("a value")).unwrap();
        let id: u64 = value.strip_prefix("record-").unwrap().parse().unwrap();
        assert!(ids.insert(id), "record {id} read twice");
        assert_eq!(
            at.get(&(c.partition, c.offset)),
            Some(&id),
            "record {id} where its report says"
        );
        assert_eq!(
            c.headers,
            [("traceparent".to_owned(), Some(traceparent(id).into_bytes()))],
            "record {id}: the interceptor's header, read back by Java"
        );
    }
    assert_eq!(ids.len(), RECORDS as usize);
    println!(
        "{driver:?}: {RECORDS} records stamped by the interceptor, acknowledged and read back \
         with their traceparent by Kafka's Java consumer"
    );
}

#[test]
fn interceptor_headers_read_back_tokio() {
    interceptor_headers_read_back(Driver::Tokio);
}

#[test]
fn interceptor_headers_read_back_mio_threaded() {
    interceptor_headers_read_back(Driver::MioThreaded);
}
