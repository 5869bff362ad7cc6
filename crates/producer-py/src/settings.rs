//! The configuration from Python: Kafka's names and string values, through the core's property
//! parser (`producer_core::properties`), so every setting and its checks live in the core.

use producer_core::{Config, TlsConfig};
use pyo3::prelude::*;
use pyo3::types::PyDict;

use crate::convert::config_error;

/// The core's configuration from `bootstrap.servers` and `(name, value)` settings by Kafka's
/// names; a `ConfigError` naming the first setting refused. `caller_tls`: the application
/// hands its own `SSLContext`, which decides what is trusted, so the core's check that TLS has
/// a CA (or the platform roots) is met by the platform roots (the core only validates TLS
/// settings; Python's `ssl` uses the application's context).
pub(crate) fn build(
    py: Python<'_>,
    settings: &[(String, String)],
    caller_tls: bool,
) -> PyResult<Config> {
    let mut b = Config::builder(Vec::<(String, u16)>::new())
        .set("client.id", "kafka-sansio")
        .map_err(|e| config_error(py, e.to_string()))?;
    if caller_tls {
        b = b.tls(TlsConfig::with_platform_roots());
    }
    for (name, value) in settings {
        b = b
            .set(name, value)
            .map_err(|e| config_error(py, format!("{name}={value:?}: {e}")))?;
    }
    b.build().map_err(|e| config_error(py, e.to_string()))
}

/// What the Python side needs to set up TLS: `None` without TLS, else a dict with
/// `ca_location`, `certificate_location`, `key_location` (paths or `None`),
/// `endpoint_identification` and `platform_roots` (bools).
pub(crate) fn tls_settings<'py>(
    py: Python<'py>,
    config: &Config,
) -> PyResult<Option<Bound<'py, PyDict>>> {
    if !config.security_protocol.uses_tls() {
        return Ok(None);
    }
    let t = config.tls.clone().unwrap_or_default();
    let d = PyDict::new(py);
    let path = |p: &Option<std::path::PathBuf>| p.as_ref().map(|p| p.display().to_string());
    d.set_item("ca_location", path(&t.ca_location))?;
    d.set_item("certificate_location", path(&t.certificate_location))?;
    d.set_item("key_location", path(&t.key_location))?;
    d.set_item("endpoint_identification", t.endpoint_identification)?;
    d.set_item("platform_roots", t.platform_roots)?;
    Ok(Some(d))
}
