"""Settings from Python to the core: Kafka's names and string values, from ``config`` and
from aiokafka-style keywords (Python keywords cannot contain dots). The core's property parser
checks every one (``ConfigError``)."""

from __future__ import annotations

from typing import Any, Dict, Iterable, List, Mapping, Optional, Tuple, Union

# aiokafka-style keywords and the Kafka names they stand for (Python keywords cannot contain
# dots). Anything else goes in ``config`` by its Kafka name.
KEYWORDS: Dict[str, str] = {
    "client_id": "client.id",
    "acks": "acks",
    "compression_type": "compression.type",
    "max_batch_size": "batch.size",
    "batch_size": "batch.size",
    "linger_ms": "linger.ms",
    "max_request_size": "max.request.size",
    "metadata_max_age_ms": "metadata.max.age.ms",
    "request_timeout_ms": "request.timeout.ms",
    "retry_backoff_ms": "retry.backoff.ms",
    "delivery_timeout_ms": "delivery.timeout.ms",
    "buffer_memory": "buffer.memory",
    "max_block_ms": "max.block.ms",
    "max_in_flight_requests_per_connection": "max.in.flight.requests.per.connection",
    "enable_idempotence": "enable.idempotence",
    "transactional_id": "transactional.id",
    "transaction_timeout_ms": "transaction.timeout.ms",
    "security_protocol": "security.protocol",
    "sasl_mechanism": "sasl.mechanism",
    "sasl_plain_username": "sasl.username",
    "sasl_plain_password": "sasl.password",
    "ssl_cafile": "ssl.ca.location",
    "ssl_certfile": "ssl.certificate.location",
    "ssl_keyfile": "ssl.key.location",
}


def _setting(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def _servers(bootstrap: Union[str, Iterable[str]]) -> str:
    if isinstance(bootstrap, str):
        return bootstrap
    return ",".join(bootstrap)


def kafka_settings(
    bootstrap_servers: Union[str, Iterable[str]],
    config: Optional[Mapping[str, Any]],
    keywords: Mapping[str, Any],
) -> List[Tuple[str, str]]:
    """``(name, value)`` pairs by Kafka's names: the bootstrap list, then ``config``, then the
    keywords (later ones win). An unknown keyword is a ``TypeError``."""
    settings = [("bootstrap.servers", _servers(bootstrap_servers))]
    for name, value in (config or {}).items():
        settings.append((name, _setting(value)))
    for keyword, value in keywords.items():
        name = KEYWORDS.get(keyword)
        if name is None:
            raise TypeError(
                f"Producer() got an unexpected keyword {keyword!r}; "
                "settings without a keyword go in config={...} by their Kafka name"
            )
        if value is not None:
            settings.append((name, _setting(value)))
    return settings
