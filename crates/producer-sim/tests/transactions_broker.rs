//! The simulated transaction coordinator, driven with raw requests built with producer-core's
//! codecs (the transaction APIs) and kafka-protocol's (Produce with transactional batches):
//! Kafka's state machine, fencing, markers, the last stable offset, read_committed, and
//! transactional offsets.

mod support;

use std::time::Duration;

use bytes::{Bytes, BytesMut};
use kafka_protocol::indexmap::IndexMap;
use kafka_protocol::messages::ApiKey as KpApi;
use kafka_protocol::protocol::StrBytes;
use kafka_protocol::records::{
    Compression, Record, RecordBatchEncoder, RecordEncodeOptions, TimestampType,
};
use producer_core::protocol::add_offsets_to_txn::{
    AddOffsetsToTxnRequest, AddOffsetsToTxnResponse,
};
use producer_core::protocol::add_partitions_to_txn::{
    AddPartitionsToTxnRequest, AddPartitionsToTxnResponse,
};
use producer_core::protocol::api_versions::{ApiVersionsRequest, ApiVersionsResponse};
use producer_core::protocol::end_txn::{EndTxnRequest, EndTxnResponse};
use producer_core::protocol::find_coordinator::{
    CoordinatorType, FindCoordinatorRequest, FindCoordinatorResponse,
};
use producer_core::protocol::init_producer_id::{InitProducerIdRequest, InitProducerIdResponse};
use producer_core::protocol::txn_offset_commit::{
    GroupMember, TxnOffsetCommitPartition, TxnOffsetCommitRequest, TxnOffsetCommitResponse,
};
use producer_core::protocol::{
    encode_request, parse_response_header, ApiKey, DecodeError, Parsed, RequestHeader,
};
use producer_sim::{
    CommittedOffset, ConnId, ControlMarker, CoordinatorKind, SimConfig, TransactionState,
};
use support::client::{produce_request, Client};
use support::ErrorCode;

/// A client of the simulated cluster speaking the transaction APIs with producer-core's codecs.
struct T {
    c: Client,
    corr: i32,
}

/// Three brokers (1 ms latency) at the given `transaction.version`, topics `t` (3 partitions)
/// and `in` (1 partition). With Kafka's hash over 50 internal partitions, `tx-1` is
/// coordinated by broker 3, `tx-2` by broker 1, group `group-a` by broker 3.
fn setup(tv: i16) -> T {
    setup_with(tv, |_| {})
}

fn setup_with(tv: i16, f: impl FnOnce(&mut SimConfig)) -> T {
    let mut cfg = SimConfig::with_brokers(3, 11);
    cfg.latency = (Duration::from_millis(1), Duration::from_millis(1));
    cfg.transaction_version = tv;
    f(&mut cfg);
    let mut c = Client::new(cfg);
    c.sim.create_topic("t", 3).unwrap();
    c.sim.create_topic("in", 1).unwrap();
    T { c, corr: 1000 }
}

/// A transactional batch of `n` records (values `<label>-<i>`).
fn txn_batch(pid: i64, epoch: i16, seq: i32, n: usize, label: &str) -> Bytes {
    let records: Vec<Record> = (0..n)
        .map(|i| Record {
            transactional: true,
            control: false,
            delete_horizon: false,
            partition_leader_epoch: -1,
            producer_id: pid,
            producer_epoch: epoch,
            timestamp_type: TimestampType::Creation,
            offset: i as i64,
            sequence: seq.wrapping_add(i as i32),
            timestamp: 1_700_000_000_000 + i as i64,
            key: Some(Bytes::from(format!("k{i}"))),
            value: Some(Bytes::from(format!("{label}-{i}"))),
            headers: IndexMap::new(),
        })
        .collect();
    let mut buf = BytesMut::new();
    RecordBatchEncoder::encode(
        &mut buf,
        records.iter(),
        &RecordEncodeOptions {
            version: 2,
            compression: Compression::None,
        },
    )
    .unwrap();
    buf.freeze()
}

/// A plain (non-idempotent) batch of `n` records.
fn plain_batch(n: usize) -> Bytes {
    support::client::batch(support::client::B::plain(n))
}

fn values(records: &[producer_sim::LoggedRecord]) -> Vec<String> {
    records
        .iter()
        .map(|r| String::from_utf8_lossy(r.value.as_deref().unwrap_or_default()).into_owned())
        .collect()
}

impl T {
    fn conn(&mut self, node: i32) -> ConnId {
        self.c.connect_to(node)
    }

    /// Sends one request encoded by `body` and parses its answer with `parse`.
    fn call<R>(
        &mut self,
        conn: ConnId,
        api: ApiKey,
        version: i16,
        body: impl FnOnce(&mut Vec<u8>),
        parse: impl FnOnce(i16, &[u8]) -> Result<Parsed<R>, DecodeError>,
    ) -> R {
        self.corr += 1;
        let header = RequestHeader {
            api_key: api,
            api_version: version,
            correlation_id: self.corr,
            client_id: Some("txn-test"),
        };
        let mut buf = Vec::new();
        encode_request(&mut buf, &header, body);
        let now = self.c.now;
        self.c.sim.write(now, conn, &buf);
        let frame = self.c.recv_frame(conn).expect("a response");
        let (corr, rest) = parse_response_header(api, version, &frame).unwrap();
        assert_eq!(corr, self.corr, "correlation id");
        let parsed = parse(version, rest).unwrap();
        assert_eq!(parsed.trailing, 0, "{api:?} v{version}: trailing bytes");
        parsed.body
    }

    fn api_versions(&mut self, conn: ConnId, version: i16) -> ApiVersionsResponse {
        let req = ApiVersionsRequest {
            client_software_name: "txn-test",
            client_software_version: "1.0",
        };
        self.call(
            conn,
            ApiKey::ApiVersions,
            version,
            |b| req.encode(version, b),
            ApiVersionsResponse::parse,
        )
    }

    fn find(
        &mut self,
        conn: ConnId,
        version: i16,
        key_type: CoordinatorType,
        keys: &[&str],
    ) -> FindCoordinatorResponse {
        let req = FindCoordinatorRequest { key_type, keys };
        self.call(
            conn,
            ApiKey::FindCoordinator,
            version,
            |b| req.encode(version, b),
            FindCoordinatorResponse::parse,
        )
    }

    fn init_with(
        &mut self,
        conn: ConnId,
        version: i16,
        txn: &str,
        timeout_ms: i32,
        expected: (i64, i16),
    ) -> InitProducerIdResponse {
        let req = InitProducerIdRequest {
            transactional_id: Some(txn),
            transaction_timeout_ms: timeout_ms,
            producer_id: expected.0,
            producer_epoch: expected.1,
        };
        self.call(
            conn,
            ApiKey::InitProducerId,
            version,
            |b| req.encode(version, b),
            InitProducerIdResponse::parse,
        )
    }

    /// InitProducerId v5, 60 s timeout, which must succeed.
    fn init(&mut self, conn: ConnId, txn: &str) -> (i64, i16) {
        let r = self.init_with(conn, 5, txn, 60_000, (-1, -1));
        assert_eq!(r.error_code, ErrorCode::NONE, "InitProducerId {txn}");
        (r.producer_id, r.producer_epoch)
    }

    fn add(
        &mut self,
        conn: ConnId,
        version: i16,
        txn: &str,
        (pid, epoch): (i64, i16),
        topics: &[(&str, &[i32])],
    ) -> Vec<(String, i32, ErrorCode)> {
        let req = AddPartitionsToTxnRequest {
            transactional_id: txn,
            producer_id: pid,
            producer_epoch: epoch,
            topics,
        };
        let r: AddPartitionsToTxnResponse = self.call(
            conn,
            ApiKey::AddPartitionsToTxn,
            version,
            |b| req.encode(version, b),
            AddPartitionsToTxnResponse::parse,
        );
        r.topics
            .into_iter()
            .flat_map(|t| {
                let name = t.name;
                t.partitions
                    .into_iter()
                    .map(move |(p, e)| (name.clone(), p, e))
            })
            .collect()
    }

    fn add_offsets(
        &mut self,
        conn: ConnId,
        version: i16,
        txn: &str,
        (pid, epoch): (i64, i16),
        group: &str,
    ) -> ErrorCode {
        let req = AddOffsetsToTxnRequest {
            transactional_id: txn,
            producer_id: pid,
            producer_epoch: epoch,
            group_id: group,
        };
        let r: AddOffsetsToTxnResponse = self.call(
            conn,
            ApiKey::AddOffsetsToTxn,
            version,
            |b| req.encode(version, b),
            AddOffsetsToTxnResponse::parse,
        );
        r.error_code
    }

    #[allow(clippy::too_many_arguments)]
    fn offsets(
        &mut self,
        conn: ConnId,
        version: i16,
        txn: &str,
        (pid, epoch): (i64, i16),
        group: &str,
        generation_id: i32,
        offsets: &[(&str, i32, i64)],
    ) -> Vec<(String, i32, ErrorCode)> {
        let owned: Vec<(&str, Vec<TxnOffsetCommitPartition<'_>>)> = offsets
            .iter()
            .map(|(t, p, o)| {
                (
                    *t,
                    vec![TxnOffsetCommitPartition {
                        partition: *p,
                        offset: *o,
                        leader_epoch: 0,
                        metadata: Some("m"),
                    }],
                )
            })
            .collect();
        let topics: Vec<(&str, &[TxnOffsetCommitPartition<'_>])> =
            owned.iter().map(|(t, v)| (*t, v.as_slice())).collect();
        let req = TxnOffsetCommitRequest {
            transactional_id: txn,
            group_id: group,
            producer_id: pid,
            producer_epoch: epoch,
            member: GroupMember {
                generation_id,
                member_id: "",
                group_instance_id: None,
            },
            topics: &topics,
        };
        let r: TxnOffsetCommitResponse = self.call(
            conn,
            ApiKey::TxnOffsetCommit,
            version,
            |b| req.encode(version, b),
            TxnOffsetCommitResponse::parse,
        );
        r.topics
            .into_iter()
            .flat_map(|t| {
                let name = t.name;
                t.partitions
                    .into_iter()
                    .map(move |(p, e)| (name.clone(), p, e))
            })
            .collect()
    }

    fn end(
        &mut self,
        conn: ConnId,
        version: i16,
        txn: &str,
        (pid, epoch): (i64, i16),
        commit: bool,
    ) -> EndTxnResponse {
        let req = EndTxnRequest {
            transactional_id: txn,
            producer_id: pid,
            producer_epoch: epoch,
            committed: commit,
        };
        self.call(
            conn,
            ApiKey::EndTxn,
            version,
            |b| req.encode(version, b),
            EndTxnResponse::parse,
        )
    }

    /// One transactional batch to the leader of `topic`/`partition` (connecting to it);
    /// returns (error code, base offset).
    #[allow(clippy::too_many_arguments)]
    fn produce(
        &mut self,
        version: i16,
        txn: Option<&str>,
        topic: &str,
        partition: i32,
        batch: Bytes,
    ) -> (ErrorCode, i64) {
        let leader = self.c.sim.leader(topic, partition).unwrap().0;
        let conn = self.conn(leader);
        let mut req = produce_request(-1, &[(topic, partition, batch)]);
        req.transactional_id = txn.map(|t| StrBytes::from_string(t.to_string()).into());
        let corr = self.c.send(conn, KpApi::Produce, version, &req);
        let r: kafka_protocol::messages::ProduceResponse =
            self.c.recv(conn, KpApi::Produce, version, corr);
        let p = &r.responses[0].partition_responses[0];
        (ErrorCode(p.error_code), p.base_offset)
    }

    fn state(&self, txn: &str) -> TransactionState {
        self.c.sim.transaction(txn).unwrap().state
    }
}

#[test]
fn api_versions_advertise_the_transaction_apis_and_the_transaction_version_feature() {
    for (tv, expected) in [(2, Some(2)), (1, Some(1)), (0, None)] {
        let mut t = setup(tv);
        let conn = t.conn(1);
        let r = t.api_versions(conn, 4);
        assert_eq!(r.error_code, ErrorCode::NONE);
        assert_eq!(r.version_range(ApiKey::FindCoordinator), Some((0, 6)));
        assert_eq!(r.version_range(ApiKey::AddPartitionsToTxn), Some((0, 5)));
        assert_eq!(r.version_range(ApiKey::AddOffsetsToTxn), Some((0, 4)));
        assert_eq!(r.version_range(ApiKey::EndTxn), Some((0, 5)));
        assert_eq!(r.version_range(ApiKey::TxnOffsetCommit), Some((0, 5)));
        assert_eq!(r.version_range(ApiKey::InitProducerId), Some((0, 5)));
        assert_eq!(
            r.finalized_level("transaction.version"),
            expected,
            "transaction.version {tv}"
        );
        // v3 reports the same finalized level.
        let r3 = t.api_versions(conn, 3);
        assert_eq!(r3.finalized_level("transaction.version"), expected);
        assert!(
            t.c.sim.violations().is_empty(),
            "{:?}",
            t.c.sim.violations()
        );
    }
}

#[test]
fn find_coordinator_hashes_keys_single_and_batched_and_reports_a_stopped_one() {
    let mut t = setup(2);
    assert_eq!(
        t.c.sim.coordinator(CoordinatorKind::Transaction, "tx-1"),
        Some(3)
    );
    assert_eq!(
        t.c.sim.coordinator(CoordinatorKind::Transaction, "tx-2"),
        Some(1)
    );
    assert_eq!(
        t.c.sim.coordinator(CoordinatorKind::Group, "group-a"),
        Some(3)
    );
    assert_eq!(t.c.sim.coordinator(CoordinatorKind::Group, "g"), Some(1));
    let conn = t.conn(2);
    // v0: groups only, one key.
    let r = t.find(conn, 0, CoordinatorType::Group, &["g"]);
    assert_eq!(r.coordinators.len(), 1);
    assert_eq!(r.coordinators[0].error_code, ErrorCode::NONE);
    assert_eq!(r.coordinators[0].node_id, 1);
    assert_eq!(r.coordinators[0].host, "broker-1");
    assert_eq!(r.coordinators[0].port, 9092);
    for v in 1..=3 {
        let r = t.find(conn, v, CoordinatorType::Transaction, &["tx-1"]);
        assert_eq!(r.coordinators[0].error_code, ErrorCode::NONE, "v{v}");
        assert_eq!(r.coordinators[0].node_id, 3, "v{v}");
    }
    for v in 4..=6 {
        let r = t.find(conn, v, CoordinatorType::Transaction, &["tx-1", "tx-2"]);
        let got: Vec<(Option<String>, i32)> = r
            .coordinators
            .iter()
            .map(|c| (c.key.clone(), c.node_id))
            .collect();
        assert_eq!(
            got,
            vec![(Some("tx-1".into()), 3), (Some("tx-2".into()), 1)],
            "v{v}"
        );
    }
    // The coordinator stopped: COORDINATOR_NOT_AVAILABLE for its keys only.
    let now = t.c.now;
    t.c.sim.stop_broker(3, now).unwrap();
    let r = t.find(conn, 4, CoordinatorType::Transaction, &["tx-1", "tx-2"]);
    assert_eq!(
        r.coordinators[0].error_code,
        ErrorCode::COORDINATOR_NOT_AVAILABLE
    );
    assert_eq!(r.coordinators[0].node_id, -1);
    assert_eq!(r.coordinators[1].error_code, ErrorCode::NONE);
    let r = t.find(conn, 3, CoordinatorType::Transaction, &["tx-1"]);
    assert_eq!(
        r.coordinators[0].error_code,
        ErrorCode::COORDINATOR_NOT_AVAILABLE
    );
    // Its partition's leadership moves: the new leader coordinates.
    t.c.sim
        .move_coordinator(CoordinatorKind::Transaction, "tx-1", 2)
        .unwrap();
    let r = t.find(conn, 4, CoordinatorType::Transaction, &["tx-1"]);
    assert_eq!(r.coordinators[0].error_code, ErrorCode::NONE);
    assert_eq!(r.coordinators[0].node_id, 2);
    assert!(
        t.c.sim.violations().is_empty(),
        "{:?}",
        t.c.sim.violations()
    );
}

#[test]
fn transaction_requests_to_another_broker_are_not_coordinator() {
    let mut t = setup(2);
    let wrong = t.conn(1);
    let r = t.init_with(wrong, 5, "tx-1", 60_000, (-1, -1));
    assert_eq!(r.error_code, ErrorCode::NOT_COORDINATOR);
    assert_eq!((r.producer_id, r.producer_epoch), (-1, -1));
    let right = t.conn(3);
    let ids = t.init(right, "tx-1");
    let added = t.add(wrong, 3, "tx-1", ids, &[("t", &[0])]);
    assert_eq!(added, vec![("t".into(), 0, ErrorCode::NOT_COORDINATOR)]);
    assert_eq!(
        t.add_offsets(wrong, 3, "tx-1", ids, "group-a"),
        ErrorCode::NOT_COORDINATOR
    );
    assert_eq!(
        t.end(wrong, 4, "tx-1", ids, true).error_code,
        ErrorCode::NOT_COORDINATOR
    );
    // TxnOffsetCommit goes to the group's coordinator (broker 3), not the transaction's.
    let got = t.offsets(wrong, 3, "tx-1", ids, "group-a", -1, &[("in", 0, 5)]);
    assert_eq!(got, vec![("in".into(), 0, ErrorCode::NOT_COORDINATOR)]);
    assert_eq!(t.state("tx-1"), TransactionState::Empty);
}

#[test]
fn init_producer_id_allocates_bumps_and_checks_the_timeout_and_kip_360() {
    let mut t = setup(2);
    let conn = t.conn(3);
    let (pid, e0) = t.init(conn, "tx-1");
    assert_eq!(e0, 0);
    // The same id again: same producer id, next epoch.
    assert_eq!(t.init(conn, "tx-1"), (pid, 1));
    let max = 15 * 60 * 1000;
    for bad in [max + 1, 0, -5] {
        let r = t.init_with(conn, 5, "tx-1", bad, (-1, -1));
        assert_eq!(
            r.error_code,
            ErrorCode::INVALID_TRANSACTION_TIMEOUT,
            "{bad}"
        );
    }
    assert_eq!(
        t.init_with(conn, 5, "tx-1", max, (-1, -1)).error_code,
        ErrorCode::NONE
    );
    let cur = t.c.sim.transaction("tx-1").unwrap();
    assert_eq!(cur.producer_epoch, 2);
    assert_eq!(cur.timeout, Duration::from_secs(15 * 60));
    assert_eq!(
        t.init_with(conn, 5, "", 60_000, (-1, -1)).error_code,
        ErrorCode::INVALID_REQUEST
    );
    // KIP-360: the current id and epoch bump; a retry of it (the last epoch) gets the same.
    let r = t.init_with(conn, 4, "tx-1", 60_000, (pid, 2));
    assert_eq!(
        (r.error_code, r.producer_id, r.producer_epoch),
        (ErrorCode::NONE, pid, 3)
    );
    let r = t.init_with(conn, 4, "tx-1", 60_000, (pid, 2));
    assert_eq!((r.error_code, r.producer_epoch), (ErrorCode::NONE, 3));
    // A stale epoch, or another producer id: fenced, named per version.
    let r = t.init_with(conn, 4, "tx-1", 60_000, (pid, 0));
    assert_eq!(r.error_code, ErrorCode::PRODUCER_FENCED);
    let r = t.init_with(conn, 3, "tx-1", 60_000, (pid, 0));
    assert_eq!(r.error_code, ErrorCode::INVALID_PRODUCER_EPOCH);
    let r = t.init_with(conn, 5, "tx-1", 60_000, (pid + 77, 0));
    assert_eq!(r.error_code, ErrorCode::PRODUCER_FENCED);
    assert_eq!(t.c.sim.transaction("tx-1").unwrap().producer_epoch, 3);
}

#[test]
fn tv1_commit_makes_the_records_visible_to_read_committed() {
    let mut t = setup(1);
    let co = t.conn(3);
    let ids = t.init(co, "tx-1");
    assert_eq!(
        t.add(co, 3, "tx-1", ids, &[("t", &[0, 1])]),
        vec![
            ("t".into(), 0, ErrorCode::NONE),
            ("t".into(), 1, ErrorCode::NONE)
        ]
    );
    assert_eq!(t.state("tx-1"), TransactionState::Ongoing);
    let (e, base) = t.produce(11, Some("tx-1"), "t", 0, txn_batch(ids.0, ids.1, 0, 3, "a"));
    assert_eq!((e, base), (ErrorCode::NONE, 0));
    // Open: invisible to read_committed, holding the LSO at the transaction's first offset.
    assert!(t.c.sim.read_committed("t", 0).is_empty());
    assert_eq!(t.c.sim.read_uncommitted("t", 0).len(), 3);
    assert_eq!(t.c.sim.last_stable_offset("t", 0), Some(0));
    assert_eq!(t.c.sim.high_watermark("t", 0), Some(3));

    let r = t.end(co, 4, "tx-1", ids, true);
    assert_eq!(r.error_code, ErrorCode::NONE);
    let view = t.c.sim.transaction("tx-1").unwrap();
    assert_eq!(
        (view.producer_id, view.producer_epoch),
        ids,
        "TV1 keeps the epoch"
    );
    assert_eq!(t.state("tx-1"), TransactionState::CompleteCommit);
    assert_eq!(
        values(&t.c.sim.read_committed("t", 0)),
        ["a-0", "a-1", "a-2"]
    );
    assert_eq!(t.c.sim.last_stable_offset("t", 0), Some(4));
    // The marker: one control record after the data, in both added partitions.
    let log = t.c.sim.log("t", 0);
    assert_eq!(log.len(), 4);
    assert_eq!(log[3].control, Some(ControlMarker::Commit));
    assert!(log[3].transactional);
    assert_eq!(log[3].key.as_deref(), Some(&[0u8, 0, 0, 1][..]));
    assert_eq!((log[3].producer_id, log[3].producer_epoch), ids);
    assert_eq!(t.c.sim.log("t", 1).len(), 1);
    assert_eq!(t.c.sim.log("t", 1)[0].control, Some(ControlMarker::Commit));
    assert!(t.c.sim.log("t", 2).is_empty(), "not in the transaction");

    // The next transaction continues the sequence at the same epoch (TV1).
    t.add(co, 3, "tx-1", ids, &[("t", &[0])]);
    let (e, base) = t.produce(11, Some("tx-1"), "t", 0, txn_batch(ids.0, ids.1, 3, 1, "b"));
    assert_eq!((e, base), (ErrorCode::NONE, 4));
    assert_eq!(t.end(co, 4, "tx-1", ids, true).error_code, ErrorCode::NONE);
    assert_eq!(
        values(&t.c.sim.read_committed("t", 0)),
        ["a-0", "a-1", "a-2", "b-0"]
    );
    assert!(
        t.c.sim.violations().is_empty(),
        "{:?}",
        t.c.sim.violations()
    );
}

#[test]
fn aborted_records_are_never_visible_to_read_committed() {
    let mut t = setup(1);
    let co = t.conn(3);
    let ids = t.init(co, "tx-1");
    let (e, _) = t.produce(11, None, "t", 0, plain_batch(2));
    assert_eq!(e, ErrorCode::NONE);
    t.add(co, 3, "tx-1", ids, &[("t", &[0])]);
    let (e, base) = t.produce(11, Some("tx-1"), "t", 0, txn_batch(ids.0, ids.1, 0, 3, "x"));
    assert_eq!((e, base), (ErrorCode::NONE, 2));
    let r = t.end(co, 4, "tx-1", ids, false);
    assert_eq!(r.error_code, ErrorCode::NONE);
    assert_eq!(t.state("tx-1"), TransactionState::CompleteAbort);
    let (e, _) = t.produce(11, None, "t", 0, plain_batch(1));
    assert_eq!(e, ErrorCode::NONE);
    let committed = t.c.sim.read_committed("t", 0);
    assert_eq!(
        committed.iter().map(|r| r.offset).collect::<Vec<_>>(),
        [0, 1, 6],
        "the plain records only"
    );
    assert!(committed.iter().all(|r| !r.transactional));
    let uncommitted = t.c.sim.read_uncommitted("t", 0);
    assert_eq!(
        uncommitted.iter().map(|r| r.offset).collect::<Vec<_>>(),
        [0, 1, 2, 3, 4, 6],
        "everything but the marker"
    );
    assert_eq!(t.c.sim.log("t", 0)[5].control, Some(ControlMarker::Abort));
    assert_eq!(t.c.sim.last_stable_offset("t", 0), Some(7));
}

#[test]
fn an_open_transaction_holds_back_the_last_stable_offset_for_every_record() {
    let mut t = setup(1);
    let co = t.conn(3);
    let ids = t.init(co, "tx-1");
    t.produce(11, None, "t", 0, plain_batch(2));
    t.add(co, 3, "tx-1", ids, &[("t", &[0])]);
    t.produce(
        11,
        Some("tx-1"),
        "t",
        0,
        txn_batch(ids.0, ids.1, 0, 1, "open"),
    );
    t.produce(11, None, "t", 0, plain_batch(2));
    assert_eq!(t.c.sim.last_stable_offset("t", 0), Some(2));
    assert_eq!(t.c.sim.high_watermark("t", 0), Some(5));
    // Plain records after the open transaction wait behind it too.
    assert_eq!(
        t.c.sim
            .read_committed("t", 0)
            .iter()
            .map(|r| r.offset)
            .collect::<Vec<_>>(),
        [0, 1]
    );
    assert_eq!(t.end(co, 4, "tx-1", ids, true).error_code, ErrorCode::NONE);
    assert_eq!(
        t.c.sim
            .read_committed("t", 0)
            .iter()
            .map(|r| r.offset)
            .collect::<Vec<_>>(),
        [0, 1, 2, 3, 4]
    );
    // A plain idempotent batch of a producer with an open transaction in the partition.
    t.add(co, 3, "tx-1", ids, &[("t", &[0])]);
    t.produce(
        11,
        Some("tx-1"),
        "t",
        0,
        txn_batch(ids.0, ids.1, 1, 1, "again"),
    );
    let idem = support::client::batch(support::client::B::idem(ids.0, ids.1, 2, 1));
    let (e, _) = t.produce(11, None, "t", 0, idem);
    assert_eq!(e, ErrorCode::INVALID_TXN_STATE);
}

#[test]
fn tv1_produce_to_a_partition_not_added_fails_and_appends_nothing() {
    let mut t = setup(1);
    let co = t.conn(3);
    let ids = t.init(co, "tx-1");
    t.add(co, 3, "tx-1", ids, &[("t", &[0])]);
    for (v, expected) in [
        (3, ErrorCode::INVALID_TXN_STATE),
        (10, ErrorCode::INVALID_TXN_STATE),
        (11, ErrorCode::TRANSACTION_ABORTABLE),
    ] {
        let (e, _) = t.produce(v, Some("tx-1"), "t", 1, txn_batch(ids.0, ids.1, 0, 1, "no"));
        assert_eq!(e, expected, "Produce v{v}");
    }
    assert!(t.c.sim.log("t", 1).is_empty());
    assert!(
        t.c.sim.violations().is_empty(),
        "{:?}",
        t.c.sim.violations()
    );
    // Without the TransactionalId: Kafka's authorization error for the whole request.
    let (e, _) = t.produce(11, None, "t", 0, txn_batch(ids.0, ids.1, 0, 1, "no"));
    assert_eq!(e, ErrorCode::TRANSACTIONAL_ID_AUTHORIZATION_FAILED);
    // Unknown transactional id / stale epoch at verification.
    let (e, _) = t.produce(
        11,
        Some("tx-9"),
        "t",
        1,
        txn_batch(ids.0, ids.1, 0, 1, "no"),
    );
    assert_eq!(e, ErrorCode::INVALID_PRODUCER_ID_MAPPING);
    let (e, _) = t.produce(
        11,
        Some("tx-1"),
        "t",
        1,
        txn_batch(ids.0, ids.1 + 1, 0, 1, "no"),
    );
    assert_eq!(e, ErrorCode::INVALID_PRODUCER_EPOCH);
    assert!(t.c.sim.log("t", 1).is_empty());
    assert!(
        t.c.sim.violations().is_empty(),
        "{:?}",
        t.c.sim.violations()
    );
    // Produce v12 on a TV1 cluster is served by its version, as Kafka does (the partition is
    // added), and recorded as a client bug: the client must cap Produce at v11 there.
    let (e, _) = t.produce(
        12,
        Some("tx-1"),
        "t",
        1,
        txn_batch(ids.0, ids.1, 0, 1, "v12"),
    );
    assert_eq!(e, ErrorCode::NONE);
    assert_eq!(values(&t.c.sim.read_uncommitted("t", 1)), ["v12-0"]);
    assert!(t.c.sim.violations()[0].contains("transaction-version-2"));
}

#[test]
fn tv2_produce_v12_adds_partitions_and_end_txn_v5_bumps_the_epoch() {
    let mut t = setup(2);
    let co = t.conn(3);
    let (pid, e0) = t.init(co, "tx-1");
    for p in [0, 2] {
        let (e, _) = t.produce(12, Some("tx-1"), "t", p, txn_batch(pid, e0, 0, 2, "one"));
        assert_eq!(e, ErrorCode::NONE, "partition {p}");
    }
    let view = t.c.sim.transaction("tx-1").unwrap();
    assert_eq!(view.state, TransactionState::Ongoing);
    assert_eq!(view.partitions, vec![("t".into(), 0), ("t".into(), 2)]);

    let r = t.end(co, 5, "tx-1", (pid, e0), true);
    assert_eq!(r.error_code, ErrorCode::NONE);
    assert_eq!((r.producer_id, r.producer_epoch), (pid, e0 + 1), "bumped");
    assert_eq!(t.state("tx-1"), TransactionState::CompleteCommit);
    for p in [0, 2] {
        let log = t.c.sim.log("t", p);
        assert_eq!(log.last().unwrap().control, Some(ControlMarker::Commit));
        assert_eq!(log.last().unwrap().producer_epoch, e0 + 1, "marker epoch");
        assert_eq!(values(&t.c.sim.read_committed("t", p)), ["one-0", "one-1"]);
    }
    // A retry of the end (with the epoch before the bump) is answered NONE with the new one.
    let r = t.end(co, 5, "tx-1", (pid, e0), true);
    assert_eq!(
        (r.error_code, r.producer_id, r.producer_epoch),
        (ErrorCode::NONE, pid, e0 + 1)
    );
    assert_eq!(
        t.end(co, 5, "tx-1", (pid, e0), false).error_code,
        ErrorCode::INVALID_TXN_STATE
    );
    // The old epoch is fenced in the partitions; the new one starts at sequence 0.
    let (e, _) = t.produce(12, Some("tx-1"), "t", 0, txn_batch(pid, e0, 2, 1, "zombie"));
    assert_eq!(e, ErrorCode::INVALID_PRODUCER_EPOCH);
    let (e, _) = t.produce(
        12,
        Some("tx-1"),
        "t",
        0,
        txn_batch(pid, e0 + 1, 0, 1, "two"),
    );
    assert_eq!(e, ErrorCode::NONE);
    let r = t.end(co, 5, "tx-1", (pid, e0 + 1), false);
    assert_eq!((r.error_code, r.producer_epoch), (ErrorCode::NONE, e0 + 2));
    assert_eq!(values(&t.c.sim.read_committed("t", 0)), ["one-0", "one-1"]);
    assert!(
        t.c.sim.violations().is_empty(),
        "{:?}",
        t.c.sim.violations()
    );
}

#[test]
fn end_txn_rules_retries_wrong_outcome_and_no_transaction() {
    let mut t = setup(1);
    let co = t.conn(3);
    let ids = t.init(co, "tx-1");
    // Nothing open.
    assert_eq!(
        t.end(co, 4, "tx-1", ids, true).error_code,
        ErrorCode::INVALID_TXN_STATE
    );
    t.add(co, 3, "tx-1", ids, &[("t", &[0])]);
    assert_eq!(t.end(co, 4, "tx-1", ids, true).error_code, ErrorCode::NONE);
    // TV1 retry: the same epoch, the same outcome. (v5 on a TV1 cluster answers the id and
    // epoch, which stay.)
    assert_eq!(t.end(co, 4, "tx-1", ids, true).error_code, ErrorCode::NONE);
    let r = t.end(co, 5, "tx-1", ids, true);
    assert_eq!(
        (r.error_code, r.producer_id, r.producer_epoch),
        (ErrorCode::NONE, ids.0, ids.1)
    );
    assert!(
        t.c.sim.violations()[0].contains("EndTxn v5"),
        "a TV2 version on a TV1 cluster"
    );
    assert_eq!(
        t.end(co, 4, "tx-1", ids, false).error_code,
        ErrorCode::INVALID_TXN_STATE
    );
    let node =
        t.c.sim
            .coordinator(CoordinatorKind::Transaction, "tx-9")
            .unwrap();
    let co9 = t.conn(node);
    assert_eq!(
        t.end(co9, 4, "tx-9", ids, true).error_code,
        ErrorCode::INVALID_PRODUCER_ID_MAPPING,
        "never initialised"
    );
    assert_eq!(
        t.end(co, 4, "tx-1", (ids.0 + 1, ids.1), true).error_code,
        ErrorCode::INVALID_PRODUCER_ID_MAPPING
    );
    assert_eq!(
        t.end(co, 4, "tx-1", (ids.0, ids.1 + 3), true).error_code,
        ErrorCode::PRODUCER_FENCED
    );
    assert_eq!(
        t.end(co, 1, "tx-1", (ids.0, ids.1 + 3), true).error_code,
        ErrorCode::INVALID_PRODUCER_EPOCH
    );
}

#[test]
fn a_new_init_producer_id_fences_the_old_producer_and_aborts_its_transaction() {
    let mut t = setup(1);
    let co = t.conn(3);
    let old = t.init(co, "tx-1");
    t.add(co, 3, "tx-1", old, &[("t", &[0])]);
    t.produce(
        11,
        Some("tx-1"),
        "t",
        0,
        txn_batch(old.0, old.1, 0, 2, "zombie"),
    );
    // The new instance: the open transaction is aborted first, the answer says retry.
    let r = t.init_with(co, 5, "tx-1", 60_000, (-1, -1));
    assert_eq!(r.error_code, ErrorCode::CONCURRENT_TRANSACTIONS);
    assert_eq!(t.state("tx-1"), TransactionState::CompleteAbort);
    let log = t.c.sim.log("t", 0);
    assert_eq!(log.last().unwrap().control, Some(ControlMarker::Abort));
    assert_eq!(
        log.last().unwrap().producer_epoch,
        old.1 + 1,
        "fenced epoch"
    );
    assert!(t.c.sim.read_committed("t", 0).is_empty());
    let new = t.init(co, "tx-1");
    assert_eq!(new, (old.0, old.1 + 2));
    // The old producer can do nothing more.
    assert_eq!(
        t.end(co, 4, "tx-1", old, true).error_code,
        ErrorCode::PRODUCER_FENCED
    );
    assert_eq!(
        t.end(co, 1, "tx-1", old, true).error_code,
        ErrorCode::INVALID_PRODUCER_EPOCH
    );
    assert_eq!(
        t.add(co, 2, "tx-1", old, &[("t", &[1])])[0].2,
        ErrorCode::PRODUCER_FENCED
    );
    assert_eq!(
        t.add(co, 1, "tx-1", old, &[("t", &[1])])[0].2,
        ErrorCode::INVALID_PRODUCER_EPOCH
    );
    assert_eq!(
        t.add_offsets(co, 1, "tx-1", old, "group-a"),
        ErrorCode::INVALID_PRODUCER_EPOCH
    );
    let (e, _) = t.produce(
        11,
        Some("tx-1"),
        "t",
        0,
        txn_batch(old.0, old.1, 2, 1, "zombie"),
    );
    assert_eq!(e, ErrorCode::INVALID_PRODUCER_EPOCH);
    // The new one works, from sequence 0 at its epoch.
    t.add(co, 3, "tx-1", new, &[("t", &[0])]);
    let (e, _) = t.produce(
        11,
        Some("tx-1"),
        "t",
        0,
        txn_batch(new.0, new.1, 0, 1, "new"),
    );
    assert_eq!(e, ErrorCode::NONE);
    assert_eq!(t.end(co, 4, "tx-1", new, true).error_code, ErrorCode::NONE);
    assert_eq!(values(&t.c.sim.read_committed("t", 0)), ["new-0"]);
}

#[test]
fn a_transaction_open_past_its_timeout_is_aborted_and_its_epoch_fenced() {
    for tv in [1, 2] {
        let mut t = setup(tv);
        let co = t.conn(3);
        let r = t.init_with(co, 5, "tx-1", 10_000, (-1, -1));
        let ids = (r.producer_id, r.producer_epoch);
        let version = if tv >= 2 { 12 } else { 11 };
        if tv < 2 {
            t.add(co, 3, "tx-1", ids, &[("t", &[0])]);
        }
        let (e, _) = t.produce(
            version,
            Some("tx-1"),
            "t",
            0,
            txn_batch(ids.0, ids.1, 0, 2, "late"),
        );
        assert_eq!(e, ErrorCode::NONE);
        // Not yet at the deadline.
        let at = t.c.now + Duration::from_secs(9);
        t.c.sim.advance(at);
        assert_eq!(t.state("tx-1"), TransactionState::Ongoing, "TV{tv}");
        let at = t.c.now + Duration::from_secs(11);
        t.c.sim.advance(at);
        t.c.now = at;
        let view = t.c.sim.transaction("tx-1").unwrap();
        assert_eq!(view.state, TransactionState::CompleteAbort, "TV{tv}");
        assert!(view.producer_epoch > ids.1, "TV{tv}: the epoch was bumped");
        assert!(t.c.sim.read_committed("t", 0).is_empty());
        assert_eq!(t.c.sim.log("t", 0)[2].control, Some(ControlMarker::Abort));
        assert_eq!(t.c.sim.last_stable_offset("t", 0), Some(3));
        // The producer's commit is refused (TV1: fenced; TV2: the end of the coordinator's
        // abort, which kept the old epoch as the last one).
        let end_version = if tv >= 2 { 5 } else { 4 };
        let expected = if tv >= 2 {
            ErrorCode::INVALID_TXN_STATE
        } else {
            ErrorCode::PRODUCER_FENCED
        };
        assert_eq!(
            t.end(co, end_version, "tx-1", ids, true).error_code,
            expected,
            "TV{tv}"
        );
        let (e, _) = t.produce(
            version,
            Some("tx-1"),
            "t",
            0,
            txn_batch(ids.0, ids.1, 2, 1, "late"),
        );
        assert_eq!(e, ErrorCode::INVALID_PRODUCER_EPOCH, "TV{tv}");
        if tv < 2 {
            assert_eq!(
                t.end(co, end_version, "tx-1", ids, false).error_code,
                ErrorCode::PRODUCER_FENCED,
                "TV{tv}: even the abort"
            );
        }
        // KIP-360 from the timed-out epoch. TV1: fenced too, Kafka's fence forgets the epoch
        // before it (`lastProducerEpoch = -1`). TV2: Kafka 4.1.1 answers it with the epoch of
        // its abort (observed on Apache Kafka in `tests/tests/kafka_transactions.rs`), and the
        // producer goes on.
        let r = t.init_with(co, 5, "tx-1", 60_000, ids);
        if tv < 2 {
            assert_eq!(r.error_code, ErrorCode::PRODUCER_FENCED, "TV{tv}");
        } else {
            assert_eq!(r.error_code, ErrorCode::NONE, "TV{tv}");
            assert!(r.producer_epoch > ids.1, "TV{tv}: a newer epoch");
        }
        // A new instance (no id and epoch) initialises.
        let r = t.init_with(co, 5, "tx-1", 60_000, (-1, -1));
        assert_eq!(r.error_code, ErrorCode::NONE, "TV{tv}");
        assert!(
            t.c.sim.violations().is_empty(),
            "{:?}",
            t.c.sim.violations()
        );
    }
}

#[test]
fn transactional_offsets_are_committed_only_with_the_commit_marker() {
    let mut t = setup(1);
    let co = t.conn(3); // coordinates both tx-1 and group-a
    let ids = t.init(co, "tx-1");
    // TxnOffsetCommit before AddOffsetsToTxn: the offsets partition is not in the transaction.
    t.add(co, 3, "tx-1", ids, &[("t", &[0])]);
    let got = t.offsets(co, 3, "tx-1", ids, "group-a", -1, &[("in", 0, 5)]);
    assert_eq!(got, vec![("in".into(), 0, ErrorCode::INVALID_TXN_STATE)]);
    let got = t.offsets(co, 4, "tx-1", ids, "group-a", -1, &[("in", 0, 5)]);
    assert_eq!(
        got,
        vec![("in".into(), 0, ErrorCode::TRANSACTION_ABORTABLE)]
    );

    assert_eq!(
        t.add_offsets(co, 3, "tx-1", ids, "group-a"),
        ErrorCode::NONE
    );
    let got = t.offsets(
        co,
        3,
        "tx-1",
        ids,
        "group-a",
        -1,
        &[("in", 0, 5), ("nope", 0, 1)],
    );
    assert_eq!(
        got,
        vec![
            ("in".into(), 0, ErrorCode::NONE),
            ("nope".into(), 0, ErrorCode::UNKNOWN_TOPIC_OR_PARTITION)
        ]
    );
    // Members are not simulated: a generation is an unknown member.
    let got = t.offsets(co, 3, "tx-1", ids, "group-a", 4, &[("in", 0, 6)]);
    assert_eq!(got[0].2, ErrorCode(25), "UNKNOWN_MEMBER_ID");
    assert!(
        t.c.sim.committed_offsets("group-a").is_empty(),
        "staged only"
    );
    assert_eq!(
        t.c.sim.transaction("tx-1").unwrap().pending_offsets.len(),
        1
    );
    assert_eq!(t.end(co, 3, "tx-1", ids, true).error_code, ErrorCode::NONE);
    let committed = t.c.sim.committed_offsets("group-a");
    assert_eq!(
        committed.get(&("in".to_string(), 0)),
        Some(&CommittedOffset {
            offset: 5,
            leader_epoch: 0,
            metadata: Some("m".into())
        })
    );
    // Aborted offsets never count.
    assert_eq!(
        t.add_offsets(co, 3, "tx-1", ids, "group-a"),
        ErrorCode::NONE
    );
    t.offsets(co, 3, "tx-1", ids, "group-a", -1, &[("in", 0, 9)]);
    assert_eq!(t.end(co, 3, "tx-1", ids, false).error_code, ErrorCode::NONE);
    assert_eq!(
        t.c.sim.committed_offsets("group-a")[&("in".to_string(), 0)].offset,
        5
    );
    assert!(
        t.c.sim.violations().is_empty(),
        "{:?}",
        t.c.sim.violations()
    );
}

#[test]
fn tv2_txn_offset_commit_v5_adds_the_offsets_partition_itself() {
    let mut t = setup(2);
    let co = t.conn(3);
    let ids = t.init(co, "tx-1");
    let got = t.offsets(co, 5, "tx-1", ids, "group-a", -1, &[("in", 0, 42)]);
    assert_eq!(got, vec![("in".into(), 0, ErrorCode::NONE)]);
    assert_eq!(t.state("tx-1"), TransactionState::Ongoing);
    let r = t.end(co, 5, "tx-1", ids, true);
    assert_eq!(
        (r.error_code, r.producer_epoch),
        (ErrorCode::NONE, ids.1 + 1)
    );
    assert_eq!(
        t.c.sim.committed_offsets("group-a")[&("in".to_string(), 0)].offset,
        42
    );
    assert!(
        t.c.sim.violations().is_empty(),
        "{:?}",
        t.c.sim.violations()
    );
}

#[test]
fn while_markers_are_written_the_coordinator_answers_concurrent_transactions() {
    let mut t = setup_with(1, |c| {
        c.transaction_marker_delay = Duration::from_millis(500);
    });
    let co = t.conn(3);
    let ids = t.init(co, "tx-1");
    t.add(co, 3, "tx-1", ids, &[("t", &[0])]);
    t.produce(
        11,
        Some("tx-1"),
        "t",
        0,
        txn_batch(ids.0, ids.1, 0, 1, "slow"),
    );
    assert_eq!(t.end(co, 4, "tx-1", ids, true).error_code, ErrorCode::NONE);
    assert_eq!(t.state("tx-1"), TransactionState::PrepareCommit);
    assert!(t.c.sim.read_committed("t", 0).is_empty(), "no marker yet");
    assert_eq!(
        t.end(co, 4, "tx-1", ids, true).error_code,
        ErrorCode::CONCURRENT_TRANSACTIONS
    );
    assert_eq!(
        t.end(co, 4, "tx-1", ids, false).error_code,
        ErrorCode::INVALID_TXN_STATE
    );
    assert_eq!(
        t.add(co, 3, "tx-1", ids, &[("t", &[1])])[0].2,
        ErrorCode::CONCURRENT_TRANSACTIONS
    );
    assert_eq!(
        t.init_with(co, 5, "tx-1", 60_000, (-1, -1)).error_code,
        ErrorCode::CONCURRENT_TRANSACTIONS
    );
    let (e, _) = t.produce(11, Some("tx-1"), "t", 1, txn_batch(ids.0, ids.1, 0, 1, "x"));
    assert_eq!(e, ErrorCode::NOT_ENOUGH_REPLICAS, "verification: retriable");
    // The markers are a scheduled event; once written, the commit is visible.
    let due = t.c.sim.next_event_time().unwrap();
    assert!(due > t.c.now);
    t.c.run_until_time(due);
    assert_eq!(t.state("tx-1"), TransactionState::CompleteCommit);
    assert_eq!(values(&t.c.sim.read_committed("t", 0)), ["slow-0"]);
    assert_eq!(t.c.sim.next_event_time(), None);
}

#[test]
fn malformed_transaction_requests_close_the_connection() {
    let mut t = setup(2);
    let co = t.conn(3);
    // AddPartitionsToTxn v3 (flexible) whose topic array claims 2^31 elements.
    let header = RequestHeader {
        api_key: ApiKey::AddPartitionsToTxn,
        api_version: 3,
        correlation_id: 7,
        client_id: None,
    };
    let mut buf = Vec::new();
    encode_request(&mut buf, &header, |b| {
        b.extend_from_slice(&[5, b't', b'x', b'-', b'1']); // compact string "tx-1"
        b.extend_from_slice(&1000i64.to_be_bytes());
        b.extend_from_slice(&0i16.to_be_bytes());
        b.extend_from_slice(&[0xff, 0xff, 0xff, 0xff, 0x07]); // topics: 2^31 - 1 elements
    });
    let now = t.c.now;
    t.c.sim.write(now, co, &buf);
    assert!(t.c.recv_frame(co).is_none());
    assert!(t.c.closed.contains(&co));
    assert!(
        t.c.sim.violations()[0].contains("malformed AddPartitionsToTxn"),
        "{:?}",
        t.c.sim.violations()
    );
}

#[test]
fn add_partitions_to_txn_unknown_partitions_and_the_v4_batched_verify_path() {
    use kafka_protocol::messages::add_partitions_to_txn_request::{
        AddPartitionsToTxnTopic, AddPartitionsToTxnTransaction,
    };
    use kafka_protocol::messages::{
        AddPartitionsToTxnRequest as KpAdd, AddPartitionsToTxnResponse as KpAddResp, TopicName,
    };
    let mut t = setup(1);
    let co = t.conn(3);
    let ids = t.init(co, "tx-1");
    // One unknown partition: nothing is added, the others are OPERATION_NOT_ATTEMPTED.
    let got = t.add(co, 3, "tx-1", ids, &[("t", &[0, 7]), ("nope", &[0])]);
    assert_eq!(
        got,
        vec![
            ("t".into(), 0, ErrorCode(55)),
            ("t".into(), 7, ErrorCode::UNKNOWN_TOPIC_OR_PARTITION),
            ("nope".into(), 0, ErrorCode::UNKNOWN_TOPIC_OR_PARTITION),
        ]
    );
    assert_eq!(t.state("tx-1"), TransactionState::Empty);
    assert_eq!(
        t.add(co, 3, "tx-1", ids, &[("t", &[0])])[0].2,
        ErrorCode::NONE
    );

    // v4: a batch of transactions, here one verifying t/0 (added) and t/1 (not).
    let topic = |p: Vec<i32>| {
        let mut tp = AddPartitionsToTxnTopic::default();
        tp.name = TopicName(StrBytes::from_static_str("t"));
        tp.partitions = p;
        tp
    };
    let mut txn = AddPartitionsToTxnTransaction::default();
    txn.transactional_id = StrBytes::from_static_str("tx-1").into();
    txn.producer_id = ids.0.into();
    txn.producer_epoch = ids.1;
    txn.verify_only = true;
    txn.topics = vec![topic(vec![0, 1])];
    let mut req = KpAdd::default();
    req.transactions = vec![txn];
    let r: KpAddResp = t.c.roundtrip(co, KpApi::AddPartitionsToTxn, 4, &req);
    assert_eq!(r.error_code, 0);
    let parts: Vec<(i32, i16)> = r.results_by_transaction[0].topic_results[0]
        .results_by_partition
        .iter()
        .map(|p| (p.partition_index, p.partition_error_code))
        .collect();
    assert_eq!(parts, vec![(0, 0), (1, ErrorCode::TRANSACTION_ABORTABLE.0)]);
    assert_eq!(
        t.c.sim.transaction("tx-1").unwrap().partitions,
        vec![("t".into(), 0)],
        "verification adds nothing"
    );
    assert!(
        t.c.sim.violations().is_empty(),
        "{:?}",
        t.c.sim.violations()
    );
}

/// A plain batch of `n` records with values `<label>-<i>`.
fn plain_labeled(n: usize, label: &str) -> Bytes {
    let records: Vec<Record> = (0..n)
        .map(|i| Record {
            transactional: false,
            control: false,
            delete_horizon: false,
            partition_leader_epoch: -1,
            producer_id: -1,
            producer_epoch: -1,
            timestamp_type: TimestampType::Creation,
            offset: i as i64,
            // kafka-protocol keeps records in one batch while `offset - sequence` is constant.
            sequence: (-1i32).wrapping_add(i as i32),
            timestamp: 1_700_000_000_000 + i as i64,
            key: Some(Bytes::from(format!("k{i}"))),
            value: Some(Bytes::from(format!("{label}-{i}"))),
            headers: IndexMap::new(),
        })
        .collect();
    let mut buf = BytesMut::new();
    RecordBatchEncoder::encode(
        &mut buf,
        records.iter(),
        &RecordEncodeOptions {
            version: 2,
            compression: Compression::None,
        },
    )
    .unwrap();
    buf.freeze()
}

/// One step of a random workload against one transactional producer.
#[derive(Debug, Clone)]
enum Op {
    /// A transactional batch of `n` records to partition `p` (opening a transaction).
    Send(i32, usize),
    /// A plain batch from another producer.
    Plain(i32, usize),
    Commit,
    Abort,
    /// A new instance with the same transactional id (InitProducerId), fencing the old.
    Reinit,
    /// Time passes beyond the transaction timeout; the producer then re-initialises.
    Timeout,
}

fn op() -> impl proptest::strategy::Strategy<Value = Op> {
    use proptest::prelude::*;
    prop_oneof![
        4 => (0..3i32, 1..4usize).prop_map(|(p, n)| Op::Send(p, n)),
        2 => (0..3i32, 1..3usize).prop_map(|(p, n)| Op::Plain(p, n)),
        1 => Just(Op::Commit),
        1 => Just(Op::Abort),
        1 => Just(Op::Reinit),
        1 => Just(Op::Timeout),
    ]
}

/// Cases of the property: `PROPTEST_CASES`, else 256.
fn cases() -> u32 {
    std::env::var("PROPTEST_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(256)
}

/// What a partition's records are in the model: plain, or of transaction number `n`.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Origin {
    Plain,
    Txn(usize),
}

proptest::proptest! {
    #![proptest_config(proptest::prelude::ProptestConfig::with_cases(cases()))]

    /// Random transactions, commits, aborts and plain writes, under both transaction
    /// versions: read_committed holds exactly the plain records and those of committed
    /// transactions, in log order, up to the first record of the open transaction; nothing
    /// of an aborted one; read_uncommitted holds everything written; the LSO is the open
    /// transaction's first offset.
    #[test]
    fn read_committed_matches_a_model_of_the_transactions(
        tv2 in proptest::bool::ANY,
        ops in proptest::collection::vec(op(), 1..25),
    ) {
        let mut t = setup(if tv2 { 2 } else { 1 });
        let co = t.conn(3);
        let (mut pid, mut epoch) = t.init(co, "tx-1");
        let mut seq = [0i32; 3];
        let mut added = [false; 3];
        let mut txn_no = 0usize;
        let mut open = false;
        // Per partition: (value, origin) in log order; per transaction: committed?
        let mut model: Vec<Vec<(String, Origin)>> = vec![Vec::new(); 3];
        let mut outcome: Vec<Option<bool>> = vec![None];
        for (i, op) in ops.iter().enumerate() {
            match *op {
                Op::Send(p, n) => {
                    let pu = p as usize;
                    if !tv2 && !added[pu] {
                        let got = t.add(co, 3, "tx-1", (pid, epoch), &[("t", &[p])]);
                        proptest::prop_assert_eq!(got[0].2, ErrorCode::NONE);
                        added[pu] = true;
                    }
                    let label = format!("op{i}");
                    let version = if tv2 { 12 } else { 11 };
                    let batch = txn_batch(pid, epoch, seq[pu], n, &label);
                    let (e, _) = t.produce(version, Some("tx-1"), "t", p, batch);
                    proptest::prop_assert_eq!(e, ErrorCode::NONE);
                    seq[pu] += n as i32;
                    open = true;
                    for j in 0..n {
                        model[pu].push((format!("{label}-{j}"), Origin::Txn(txn_no)));
                    }
                }
                Op::Plain(p, n) => {
                    let label = format!("op{i}");
                    let (e, _) = t.produce(11, None, "t", p, plain_labeled(n, &label));
                    proptest::prop_assert_eq!(e, ErrorCode::NONE);
                    for j in 0..n {
                        model[p as usize].push((format!("{label}-{j}"), Origin::Plain));
                    }
                }
                Op::Commit | Op::Abort => {
                    let commit = matches!(op, Op::Commit);
                    let any_added = if tv2 { open } else { added.iter().any(|a| *a) };
                    if !any_added {
                        continue;
                    }
                    let version = if tv2 { 5 } else { 4 };
                    let r = t.end(co, version, "tx-1", (pid, epoch), commit);
                    proptest::prop_assert_eq!(r.error_code, ErrorCode::NONE);
                    if tv2 {
                        proptest::prop_assert_eq!(r.producer_epoch, epoch + 1);
                        (pid, epoch) = (r.producer_id, r.producer_epoch);
                        seq = [0; 3];
                    }
                    outcome[txn_no] = Some(commit);
                    outcome.push(None);
                    txn_no += 1;
                    added = [false; 3];
                    open = false;
                }
                Op::Reinit | Op::Timeout => {
                    let any_open = if tv2 { open } else { added.iter().any(|a| *a) };
                    if matches!(op, Op::Timeout) {
                        let at = t.c.now + Duration::from_secs(61);
                        t.c.sim.advance(at);
                        t.c.now = at;
                        if any_open {
                            let state = t.state("tx-1");
                            proptest::prop_assert_eq!(state, TransactionState::CompleteAbort);
                        }
                    } else if any_open {
                        let r = t.init_with(co, 5, "tx-1", 60_000, (-1, -1));
                        proptest::prop_assert_eq!(r.error_code, ErrorCode::CONCURRENT_TRANSACTIONS);
                    }
                    let (p2, e2) = t.init(co, "tx-1");
                    proptest::prop_assert!(p2 == pid && e2 > epoch);
                    (pid, epoch) = (p2, e2);
                    if any_open {
                        outcome[txn_no] = Some(false);
                        outcome.push(None);
                        txn_no += 1;
                    }
                    seq = [0; 3];
                    added = [false; 3];
                    open = false;
                }
            }
        }
        for p in 0..3 {
            let entries = &model[p as usize];
            let first_open = entries
                .iter()
                .position(|(_, o)| matches!(o, Origin::Txn(n) if outcome[*n].is_none()));
            let expected: Vec<String> = entries
                .iter()
                .take(first_open.unwrap_or(entries.len()))
                .filter(|(_, o)| match o {
                    Origin::Plain => true,
                    Origin::Txn(n) => outcome[*n] == Some(true),
                })
                .map(|(v, _)| v.clone())
                .collect();
            proptest::prop_assert_eq!(values(&t.c.sim.read_committed("t", p)), expected);
            let all: Vec<String> = entries.iter().map(|(v, _)| v.clone()).collect();
            proptest::prop_assert_eq!(values(&t.c.sim.read_uncommitted("t", p)), all);
            let lso = t.c.sim.last_stable_offset("t", p).unwrap();
            let hw = t.c.sim.high_watermark("t", p).unwrap();
            proptest::prop_assert!(lso <= hw);
            if first_open.is_none() {
                proptest::prop_assert_eq!(lso, hw);
            } else {
                let first_open_offset = t.c.sim.log("t", p)
                    .iter()
                    .find(|r| r.transactional && r.control.is_none() && r.offset >= lso)
                    .map(|r| r.offset);
                proptest::prop_assert_eq!(Some(lso), first_open_offset);
            }
        }
        proptest::prop_assert!(t.c.sim.violations().is_empty(), "{:?}", t.c.sim.violations());
    }
}

#[test]
fn a_stopped_transaction_coordinator_makes_verification_retriable() {
    let mut t = setup(2);
    let co = t.conn(3); // tx-1's coordinator
    let ids = t.init(co, "tx-1");
    let now = t.c.now;
    t.c.sim.stop_broker(3, now).unwrap();
    // t/0 is led by broker 1: its verification cannot reach the coordinator.
    let (e, _) = t.produce(12, Some("tx-1"), "t", 0, txn_batch(ids.0, ids.1, 0, 1, "x"));
    assert_eq!(e, ErrorCode::NOT_ENOUGH_REPLICAS);
    assert!(t.c.sim.log("t", 0).is_empty());
    // Group "g" is coordinated by broker 1; the transaction's coordinator is down.
    let g = t.conn(1);
    let got = t.offsets(g, 5, "tx-1", ids, "g", -1, &[("in", 0, 1)]);
    assert_eq!(got[0].2, ErrorCode::COORDINATOR_NOT_AVAILABLE);
    // Back up: the same batch is added and appended.
    t.c.sim.start_broker(3).unwrap();
    let (e, base) = t.produce(12, Some("tx-1"), "t", 0, txn_batch(ids.0, ids.1, 0, 1, "x"));
    assert_eq!((e, base), (ErrorCode::NONE, 0));
    let got = t.offsets(g, 5, "tx-1", ids, "g", -1, &[("in", 0, 1)]);
    assert_eq!(got[0].2, ErrorCode::NONE);
    assert_eq!(
        t.c.sim.transaction("tx-1").unwrap().partitions,
        vec![("__consumer_offsets".into(), 3), ("t".into(), 0)]
    );
}

#[test]
fn find_coordinator_rejects_an_unknown_key_type_and_injections_answer_every_key() {
    use kafka_protocol::messages::{
        FindCoordinatorRequest as KpFind, FindCoordinatorResponse as KpFindResp,
    };
    let mut t = setup(2);
    let conn = t.conn(1);
    let mut req = KpFind::default();
    req.key_type = 2; // share groups: not simulated
    req.coordinator_keys = vec![StrBytes::from_static_str("s")];
    let r: KpFindResp = t.c.roundtrip(conn, KpApi::FindCoordinator, 6, &req);
    assert_eq!(r.coordinators[0].error_code, ErrorCode::INVALID_REQUEST.0);
    assert_eq!(r.coordinators[0].node_id.0, -1);
    t.c.sim.inject_error(producer_sim::InjectedError {
        api_key: producer_sim::API_FIND_COORDINATOR,
        topic: None,
        partition: None,
        error_code: ErrorCode::COORDINATOR_LOAD_IN_PROGRESS.0,
        count: 1,
        persist: false,
    });
    let r = t.find(conn, 4, CoordinatorType::Transaction, &["tx-1", "tx-2"]);
    assert!(r
        .coordinators
        .iter()
        .all(|c| c.error_code == ErrorCode::COORDINATOR_LOAD_IN_PROGRESS));
    // One response only.
    let r = t.find(conn, 4, CoordinatorType::Transaction, &["tx-1"]);
    assert_eq!(r.coordinators[0].error_code, ErrorCode::NONE);
}

/// At transaction version 2, as Kafka 4.1.1's coordinator decides (read from the bytecode of
/// its `TransactionCoordinator.endTransaction`): after a completed end, the current epoch is
/// valid too, and an abort with it is the abort of a new transaction with no partition: NONE,
/// the epoch bumped, no marker written; so is an abort from Empty. Its retry (the epoch
/// before the bump) is NONE again; a commit there is INVALID_TXN_STATE. (A producer whose
/// Produce requests never added a partition aborts this way and moves to the new epoch.)
#[test]
fn tv2_an_abort_with_no_partition_added_bumps_the_epoch() {
    let mut t = setup(2);
    let co = t.conn(3);
    let (pid, e0) = t.init(co, "tx-1");
    let answer = |r: EndTxnResponse| (r.error_code, r.producer_id, r.producer_epoch);
    // From Empty.
    let r = t.end(co, 5, "tx-1", (pid, e0), false);
    assert_eq!(answer(r), (ErrorCode::NONE, pid, e0 + 1));
    assert_eq!(t.state("tx-1"), TransactionState::CompleteAbort);
    let r = t.end(co, 5, "tx-1", (pid, e0), false);
    assert_eq!(answer(r), (ErrorCode::NONE, pid, e0 + 1), "a retry");
    // After a committed transaction, with the epoch its end answered.
    let e1 = e0 + 1;
    t.add(co, 3, "tx-1", (pid, e1), &[("t", &[0])]);
    let r = t.end(co, 5, "tx-1", (pid, e1), true);
    assert_eq!(answer(r), (ErrorCode::NONE, pid, e1 + 1));
    let e2 = e1 + 1;
    let markers = t.c.sim.log("t", 0).len();
    let r = t.end(co, 5, "tx-1", (pid, e2), false);
    assert_eq!(answer(r), (ErrorCode::NONE, pid, e2 + 1));
    assert_eq!(
        t.c.sim.log("t", 0).len(),
        markers,
        "no partition: no marker"
    );
    assert_eq!(
        t.end(co, 5, "tx-1", (pid, e2 + 1), true).error_code,
        ErrorCode::INVALID_TXN_STATE,
        "a commit of nothing"
    );
    assert_eq!(
        t.end(co, 5, "tx-1", (pid, e2 + 2), false).error_code,
        ErrorCode::PRODUCER_FENCED,
        "an epoch never handed out"
    );
}
