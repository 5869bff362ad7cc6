"""TLS and SASL/SCRAM against Apache Kafka's own listeners (the secured node, certificates
from the harness's test CA): records produced over each are read back exactly once (through
the node's plaintext listener, by librdkafka). TLS is Python's ``ssl`` (a context built from
``ssl.ca.location``, and a user-supplied ``SSLContext``); SASL is the core's."""

from __future__ import annotations

import ssl

import pytest

from kafka_sansio import AuthenticationError, Producer

from conftest import create_topic, read_back

pytestmark = pytest.mark.secured


async def produce(topic, n, **kwargs):
    async with Producer(**kwargs) as p:
        futures = p.send_batch([(topic, b"%d" % i, b"k%d" % (i % 4)) for i in range(n)])
        await p.flush()
    return [f.result() for f in futures]


def check(secured, topic, metas):
    read = read_back(secured.plain, topic)
    assert sorted(int(r[3]) for r in read) == list(range(len(metas)))
    assert sorted((r[0], r[1]) for r in read) == sorted((m.partition, m.offset) for m in metas)


async def test_tls_with_the_ca_by_kafka_names(secured):
    topic = create_topic(secured.plain, partitions=3)
    metas = await produce(
        topic, 500, bootstrap_servers=secured.ssl,
        config={"security.protocol": "SSL", "ssl.ca.location": secured.ca},
    )
    check(secured, topic, metas)


async def test_tls_with_a_user_ssl_context(secured):
    topic = create_topic(secured.plain, partitions=3)
    ctx = ssl.create_default_context(cafile=secured.ca)
    metas = await produce(topic, 500, bootstrap_servers=secured.ssl, ssl_context=ctx)
    check(secured, topic, metas)


async def test_sasl_scram_over_tls(secured):
    topic = create_topic(secured.plain, partitions=3)
    metas = await produce(
        topic, 500, bootstrap_servers=secured.sasl_ssl,
        security_protocol="SASL_SSL", sasl_mechanism="SCRAM-SHA-512",
        sasl_plain_username=secured.scram_user, sasl_plain_password=secured.scram_password,
        ssl_cafile=secured.ca,
    )
    check(secured, topic, metas)


async def test_sasl_scram_256_over_plaintext(secured):
    topic = create_topic(secured.plain, partitions=3)
    metas = await produce(
        topic, 500, bootstrap_servers=secured.sasl_plaintext,
        security_protocol="SASL_PLAINTEXT", sasl_mechanism="SCRAM-SHA-256",
        sasl_plain_username=secured.scram_user, sasl_plain_password=secured.scram_password,
    )
    check(secured, topic, metas)


async def test_a_wrong_password_fails_each_record_with_authentication_error(secured):
    async with Producer(
        secured.sasl_plaintext, security_protocol="SASL_PLAINTEXT",
        sasl_mechanism="SCRAM-SHA-256", sasl_plain_username=secured.scram_user,
        sasl_plain_password="wrong",
    ) as p:
        with pytest.raises(AuthenticationError) as e:
            await p.send("anything", b"secret")
        assert e.value.record.value == b"secret"


async def test_a_certificate_from_another_ca_fails_with_authentication_error(secured):
    ctx = ssl.create_default_context()  # the platform's roots: the test CA is not among them
    async with Producer(secured.ssl, ssl_context=ctx) as p:
        with pytest.raises(AuthenticationError) as e:
            await p.send("anything", b"v")
        assert "certificate" in str(e.value).lower()
