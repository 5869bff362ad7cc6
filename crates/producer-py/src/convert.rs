//! Values crossing between Python and the core: a record's payloads taken from Python objects,
//! the metadata of a delivered record and a record handed back, as Python objects; the core's
//! errors as the exceptions of `kafka_sansio.errors` (one Python class per error, built here
//! from the Rust value, so the mapping lives in one place).

use std::collections::HashMap;
use std::sync::Arc;

use bytes::Bytes;
use producer_core::metrics::SeriesValue;
use producer_core::{
    Header, MetricsSnapshot, ProduceError, Record, SendErrorReason, TransactionError,
    TransactionResult,
};
use pyo3::exceptions::PyTypeError;
use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use pyo3::types::{PyByteArray, PyBytes, PyDict, PyList, PyString};

/// The most distinct topic names kept interned ([`TopicNames`]); past it the table starts over.
pub(crate) const MAX_INTERNED_TOPICS: usize = 4096;

/// Topic names as the core's `Arc<str>`, interned so that sending to the same topic again
/// allocates nothing for its name. Capped at [`MAX_INTERNED_TOPICS`] names (cleared when full:
/// a new name then costs one allocation, as without the table).
#[derive(Default)]
pub(crate) struct TopicNames {
    names: HashMap<Box<str>, Arc<str>>,
}

impl TopicNames {
    /// The interned `Arc<str>` of `name`.
    pub(crate) fn get(&mut self, name: &str) -> Arc<str> {
        if let Some(a) = self.names.get(name) {
            return a.clone();
        }
        if self.names.len() >= MAX_INTERNED_TOPICS {
            self.names.clear();
        }
        let a: Arc<str> = Arc::from(name);
        self.names.insert(name.into(), a.clone());
        a
    }
}

/// A key or value from Python: `None`, `bytes`, `bytearray`, `memoryview`-free `str` (UTF-8).
/// Anything else is a `TypeError` naming `what`.
pub(crate) fn payload(obj: Option<&Bound<'_, PyAny>>, what: &str) -> PyResult<Option<Bytes>> {
    let Some(obj) = obj else { return Ok(None) };
    if obj.is_none() {
        return Ok(None);
    }
    if let Ok(b) = obj.cast::<PyBytes>() {
        return Ok(Some(Bytes::copy_from_slice(b.as_bytes())));
    }
    if let Ok(s) = obj.cast::<PyString>() {
        return Ok(Some(Bytes::copy_from_slice(s.to_cow()?.as_bytes())));
    }
    if let Ok(b) = obj.cast::<PyByteArray>() {
        return Ok(Some(Bytes::from(b.to_vec())));
    }
    Err(PyTypeError::new_err(format!(
        "{what} must be bytes, bytearray, str or None, not {}",
        obj.get_type().name()?
    )))
}

/// Headers from Python: `None`, a list (or other iterable) of `(key, value)` pairs, or a dict;
/// each key a `str`, each value as [`payload`].
pub(crate) fn headers(obj: Option<&Bound<'_, PyAny>>) -> PyResult<Vec<Header>> {
    let Some(obj) = obj else {
        return Ok(Vec::new());
    };
    if obj.is_none() {
        return Ok(Vec::new());
    }
    let pairs = match obj.cast::<PyDict>() {
        Ok(d) => d.items().into_any(),
        Err(_) => obj.clone(),
    };
    let mut out = Vec::new();
    for item in pairs.try_iter()? {
        let item = item?;
        let (k, v): (String, Bound<'_, PyAny>) = item
            .extract()
            .map_err(|_| PyTypeError::new_err("each header is a (str, bytes | str | None) pair"))?;
        out.push(Header {
            key: k,
            value: payload(Some(&v), "a header value")?,
        });
    }
    Ok(out)
}

/// The core's record from a send call's arguments (`topic` interned in `topics`).
#[allow(clippy::too_many_arguments)]
pub(crate) fn record(
    topics: &mut TopicNames,
    topic: &Bound<'_, PyString>,
    value: Option<&Bound<'_, PyAny>>,
    key: Option<&Bound<'_, PyAny>>,
    headers: Option<&Bound<'_, PyAny>>,
    partition: Option<i32>,
    timestamp: Option<i64>,
) -> PyResult<Record> {
    Ok(Record {
        topic: topics.get(&topic.to_cow()?),
        partition,
        key: payload(key, "key")?,
        value: payload(value, "value")?,
        headers: self::headers(headers)?,
        timestamp,
    })
}

/// The metrics `snapshot` into `d`: every series under Java's names (`docs/metrics.md`), a
/// labelled one as a dict by its labels (`"topic=t"`, `"broker=1,node_id=1"`), plus
/// `buffered_records`, `buffered_bytes` and `disconnects`.
pub(crate) fn metrics_into(d: &Bound<'_, PyDict>, snapshot: &MetricsSnapshot) -> PyResult<()> {
    let py = d.py();
    for s in snapshot.java_named() {
        let value: Bound<'_, PyAny> = match s.value {
            SeriesValue::Count(n) => n.into_pyobject(py)?.into_any(),
            SeriesValue::Float(x) => x.into_pyobject(py)?.into_any(),
        };
        if s.labels.is_empty() {
            d.set_item(s.name, value)?;
            continue;
        }
        let label = s
            .labels
            .iter()
            .map(|(k, v)| format!("{k}={v}"))
            .collect::<Vec<_>>()
            .join(",");
        let inner = match d.get_item(s.name)? {
            Some(i) => i.cast_into::<PyDict>()?,
            None => {
                let i = PyDict::new(py);
                d.set_item(s.name, &i)?;
                i
            }
        };
        inner.set_item(label, value)?;
    }
    d.set_item("buffered_records", snapshot.buffered_records)?;
    d.set_item("buffered_bytes", snapshot.buffered_bytes)?;
    d.set_item("disconnects", snapshot.counters.disconnects)?;
    Ok(())
}

/// What a delivered record's future resolves to: its topic, partition, offset and timestamp.
#[pyclass(frozen, module = "kafka_sansio._core", name = "RecordMetadata")]
pub struct PyRecordMetadata {
    /// The topic.
    #[pyo3(get)]
    pub(crate) topic: Py<PyString>,
    /// The partition written to.
    #[pyo3(get)]
    pub(crate) partition: i32,
    /// The record's offset in the partition.
    #[pyo3(get)]
    pub(crate) offset: i64,
    /// Its timestamp, milliseconds since the epoch (the broker's with `LogAppendTime`).
    #[pyo3(get)]
    pub(crate) timestamp: i64,
}

#[pymethods]
impl PyRecordMetadata {
    fn __repr__(&self, py: Python<'_>) -> String {
        format!(
            "RecordMetadata(topic={:?}, partition={}, offset={}, timestamp={})",
            self.topic.bind(py).to_string(),
            self.partition,
            self.offset,
            self.timestamp
        )
    }
}

/// The metadata object of a delivered record.
pub(crate) fn metadata_object(
    py: Python<'_>,
    m: &producer_core::RecordMetadata,
) -> PyResult<Py<PyRecordMetadata>> {
    Py::new(
        py,
        PyRecordMetadata {
            topic: PyString::new(py, &m.topic).unbind(),
            partition: m.partition,
            offset: m.offset,
            timestamp: m.timestamp,
        },
    )
}

/// A record handed back by a failure or a refusal, as it was sent.
#[pyclass(frozen, module = "kafka_sansio._core", name = "Record")]
pub struct PyRecord {
    /// The topic.
    #[pyo3(get)]
    topic: String,
    /// The partition asked for, or `None`.
    #[pyo3(get)]
    partition: Option<i32>,
    /// The key, or `None`.
    #[pyo3(get)]
    key: Option<Py<PyBytes>>,
    /// The value, or `None`.
    #[pyo3(get)]
    value: Option<Py<PyBytes>>,
    /// The headers, `(key, value)` pairs in order.
    #[pyo3(get)]
    headers: Py<PyList>,
    /// The timestamp (ms since the epoch), or `None`.
    #[pyo3(get)]
    timestamp: Option<i64>,
}

#[pymethods]
impl PyRecord {
    fn __repr__(&self, py: Python<'_>) -> String {
        format!(
            "Record(topic={:?}, partition={:?}, key={}, value=<{} bytes>, timestamp={:?})",
            self.topic,
            self.partition,
            self.key
                .as_ref()
                .map_or("None".into(), |k| format!("{:?}", k.bind(py).as_bytes())),
            self.value
                .as_ref()
                .map_or(0, |v| v.bind(py).as_bytes().len()),
            self.timestamp
        )
    }
}

/// The core's record as a Python [`PyRecord`].
pub(crate) fn record_object(py: Python<'_>, record: &Record) -> PyResult<Py<PyRecord>> {
    let bytes = |b: &Option<Bytes>| b.as_ref().map(|b| PyBytes::new(py, b).unbind());
    let headers = PyList::empty(py);
    for h in &record.headers {
        headers.append((
            h.key.as_str(),
            h.value.as_ref().map(|v| PyBytes::new(py, v)),
        ))?;
    }
    Py::new(
        py,
        PyRecord {
            topic: record.topic.to_string(),
            partition: record.partition,
            key: bytes(&record.key),
            value: bytes(&record.value),
            headers: headers.unbind(),
            timestamp: record.timestamp,
        },
    )
}

/// The module `kafka_sansio.errors`, imported once.
fn errors_module(py: Python<'_>) -> PyResult<&Bound<'_, PyModule>> {
    static MODULE: PyOnceLock<Py<PyModule>> = PyOnceLock::new();
    MODULE
        .get_or_try_init(py, || {
            Ok::<_, PyErr>(py.import("kafka_sansio.errors")?.unbind())
        })
        .map(|m| m.bind(py))
}

/// An instance of the exception class `class` of `kafka_sansio.errors`, with `message` and the
/// keyword attributes `details`.
fn exception(
    py: Python<'_>,
    class: &str,
    message: String,
    details: &[(&str, Bound<'_, PyAny>)],
) -> PyResult<PyErr> {
    let cls = errors_module(py)?.getattr(class)?;
    let kwargs = PyDict::new(py);
    for (k, v) in details {
        kwargs.set_item(k, v)?;
    }
    let instance = cls.call((message,), Some(&kwargs))?;
    Ok(PyErr::from_value(instance))
}

/// `send`'s refusal as an exception of the `SendError` family, handing `record` back.
pub(crate) fn send_error(
    py: Python<'_>,
    reason: &SendErrorReason,
    record: &Record,
) -> PyResult<PyErr> {
    let class = match reason {
        SendErrorReason::Full => "BufferFull",
        SendErrorReason::RecordTooLarge { .. } => "RecordTooLarge",
        SendErrorReason::Closed => "ProducerClosed",
        SendErrorReason::NoTransaction => "NoTransaction",
        SendErrorReason::Fatal(_) => "ProducerFailed",
        SendErrorReason::InvalidPartition(_) => "InvalidPartition",
        SendErrorReason::InvalidTopic(_) => "InvalidTopic",
        _ => "SendError",
    };
    let rec = record_object(py, record)?.into_bound(py).into_any();
    exception(py, class, reason.to_string(), &[("record", rec)])
}

/// A delivery failure as an exception of the `DeliveryError` family, with `possibly_persisted`
/// and the record handed back.
pub(crate) fn delivery_error(
    py: Python<'_>,
    error: &ProduceError,
    record: &Record,
) -> PyResult<PyErr> {
    let mut details: Vec<(&str, Bound<'_, PyAny>)> = vec![
        (
            "record",
            record_object(py, record)?.into_bound(py).into_any(),
        ),
        (
            "possibly_persisted",
            error
                .possibly_persisted()
                .into_pyobject(py)?
                .to_owned()
                .into_any(),
        ),
    ];
    let code = |c: producer_core::ErrorCode| -> PyResult<[(&str, Bound<'_, PyAny>); 2]> {
        Ok([
            ("code", c.0.into_pyobject(py)?.into_any()),
            (
                "code_name",
                c.name().unwrap_or("UNKNOWN").into_pyobject(py)?.into_any(),
            ),
        ])
    };
    let class = match error {
        ProduceError::Broker { code: c, .. } => {
            details.extend(code(*c)?);
            "BrokerError"
        }
        ProduceError::InvalidRecord { code: c, .. } => {
            details.extend(code(*c)?);
            "InvalidRecordError"
        }
        ProduceError::BatchRejected { code: c, .. } => {
            details.extend(code(*c)?);
            "BatchRejectedError"
        }
        ProduceError::DeliveryTimeout { .. } => "DeliveryTimeoutError",
        ProduceError::UnknownTopic => "UnknownTopicError",
        ProduceError::UnknownPartition { .. } => "UnknownPartitionError",
        ProduceError::Refused(_) => "RecordRefusedError",
        ProduceError::Authentication { .. } => "AuthenticationError",
        ProduceError::Closed => "ProducerClosedError",
        ProduceError::TransactionAborted => "TransactionAbortedError",
        ProduceError::TransactionInDoubt => "TransactionInDoubtError",
        ProduceError::Purged { .. } => "PurgedError",
        ProduceError::CloseTimedOut { .. } => "CloseTimedOutError",
        _ => "DeliveryError",
    };
    exception(py, class, error.to_string(), &details)
}

/// A transactional operation's refusal or failure as an exception of the `TransactionError`
/// family, naming the operation.
pub(crate) fn transaction_error(
    py: Python<'_>,
    operation: &str,
    error: &TransactionError,
) -> PyResult<PyErr> {
    let class = match error {
        TransactionError::Abortable { .. } | TransactionError::TimedOut { .. } => {
            "TransactionAbortableError"
        }
        TransactionError::Fatal { .. } => "TransactionFatalError",
        TransactionError::InvalidState { .. } | TransactionError::NotTransactional => {
            "TransactionStateError"
        }
        TransactionError::InProgress { .. } => "TransactionInProgressError",
        TransactionError::OperationTimedOut { .. } => "TransactionOperationTimedOut",
        _ => "TransactionError",
    };
    let op = operation.into_pyobject(py)?.into_any();
    exception(py, class, error.to_string(), &[("operation", op)])
}

/// The name of a transactional result's operation, as the Python API calls it.
pub(crate) fn operation_name(result: &TransactionResult) -> String {
    result.operation.to_string()
}

/// The `ConfigError` of a setting the core refused.
pub(crate) fn config_error(py: Python<'_>, message: String) -> PyErr {
    match exception(py, "ConfigError", message.clone(), &[]) {
        Ok(e) => e,
        Err(_) => pyo3::exceptions::PyValueError::new_err(message),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_topic_name_is_interned_once_and_the_table_is_capped() {
        let mut names = TopicNames::default();
        let a = names.get("orders");
        let b = names.get("orders");
        assert!(Arc::ptr_eq(&a, &b), "the same name shares one allocation");
        for i in 0..MAX_INTERNED_TOPICS + 10 {
            let n = names.get(&format!("t{i}"));
            assert_eq!(&*n, format!("t{i}"));
            assert!(names.names.len() <= MAX_INTERNED_TOPICS);
        }
        assert_eq!(&*names.get("orders"), "orders");
    }
}
