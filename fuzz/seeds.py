#!/usr/bin/env python3
"""Writes the seed corpus under corpus/<target>/ from the golden byte arrays of producer-core's
unit tests. Run from fuzz/: `python3 seeds.py`. Seeds are committed; corpora grown by fuzzing
runs are not (run with a scratch dir first: `cargo fuzz run <t> /tmp/corpus-<t> corpus/<t>`).

Response targets: one selector byte (version - first supported version) then the body.

Also writes the hand-written reproducers of findings under regressions/<target>/ (the ones
found by fuzzing were minimised with `cargo fuzz tmin` and are committed as they came out).
"""
import os
import struct


def write(target, name, data, regression=False):
    """A seed under corpus/<target>/seed-<name>, or with `regression` a hand-written
    reproducer of a finding under regressions/<target>/<name> (its note is in NOTES.md there)."""
    d = os.path.join("regressions" if regression else "corpus", target)
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, name if regression else "seed-" + name), "wb") as f:
        f.write(bytes(data))


def header(correlation_id, flexible=False):
    """A response header (v1 adds an empty tag section)."""
    return list(struct.pack(">i", correlation_id)) + ([0] if flexible else [])


# ---- ApiVersions (versions 0..=3; selector = version) -------------------------------------
AV_V0 = [0, 0, 0, 0, 0, 2, 0, 0, 0, 3, 0, 11, 0, 18, 0, 0, 0, 3]
AV_V1 = [0, 0, 0, 0, 0, 1, 0, 22, 0, 0, 0, 4, 0, 0, 1, 0x2C]
AV_V3 = [
    0, 0, 0x03,
    0, 0, 0, 3, 0, 11, 0,
    0, 3, 0, 1, 0, 12, 1, 7, 1, 0xAA,
    0, 0, 0, 100,
    3,
    0, 8, 2, 2, ord("x"), 0, 1, 0, 2, 0,
    1, 8, 0, 0, 0, 0, 0, 0, 0, 5,
    3, 1, 1,
]
AV_UNSUPPORTED_V0 = [0, 35, 0, 0, 0, 2, 0, 0, 0, 0, 0, 8, 0, 18, 0, 0, 0, 2]
write("api_versions_response", "v0", [0] + AV_V0)
write("api_versions_response", "v1", [1] + AV_V1)
write("api_versions_response", "v2", [2] + AV_V1)
write("api_versions_response", "v3", [3] + AV_V3)
write("api_versions_response", "v3-unsupported-v0-body", [3] + AV_UNSUPPORTED_V0)
write("api_versions_response", "v1-unsupported-v0-body", [1] + AV_UNSUPPORTED_V0)
write("api_versions_response", "v3-unsupported-empty", [3, 0, 35, 0, 0, 0, 0])
# ApiVersions responses always use header v0.
write("api_versions_response", "v3-frame", [3] + header(7) + AV_V3)

# ---- InitProducerId (versions 0..=4; selector = version) ----------------------------------
IPI_V0 = [0, 0, 0, 10, 0, 0, 0, 0, 0, 0, 0, 0, 0x10, 0, 0, 2]
IPI_FENCED = [0, 0, 0, 0, 0, 90] + [0xFF] * 10 + [0]
write("init_producer_id_response", "v0", [0] + IPI_V0)
write("init_producer_id_response", "v1", [1] + IPI_V0)
write("init_producer_id_response", "v2", [2] + IPI_V0 + [0])
write("init_producer_id_response", "v4-unknown-tag", [4] + IPI_V0 + [1, 5, 2, 0xAA, 0xBB])
write("init_producer_id_response", "v4-fenced", [4] + IPI_FENCED)
write("init_producer_id_response", "v4-frame", [4] + header(7, flexible=True) + IPI_V0 + [0])


# ---- GetTelemetrySubscriptions, PushTelemetry (version 0 only; selector = 0) ---------------
GTS_V0 = (
    [0, 0, 0, 5, 0, 0]                      # ThrottleTimeMs 5, ErrorCode 0
    + [0x11] * 8 + [0x22] * 8              # ClientInstanceId
    + [0x7F, 0xFF, 0xFF, 0xFE]              # SubscriptionId
    + [5, 4, 3, 1, 9]                       # AcceptedCompressionTypes [zstd, lz4, gzip, 9]
    + [0, 0, 3, 0xE8, 0, 0x10, 0, 0, 1]     # PushIntervalMs 1000, TelemetryMaxBytes, delta
    + [3, 27] + list(b"org.apache.kafka.producer.") + [4] + list(b"x.y")
    + [0]                                   # no tagged fields
)
GTS_ALL = [0] * 6 + [0xAB] * 16 + [0, 0, 0, 1] + [1] + [0] * 9 + [2, 2, ord("*"), 0]
write("get_telemetry_subscriptions_response", "v0", [0] + GTS_V0)
write("get_telemetry_subscriptions_response", "v0-all", [0] + GTS_ALL)
write("get_telemetry_subscriptions_response", "v0-unknown-tag", [0] + GTS_V0[:-1] + [1, 5, 2, 0xAA, 0xBB])
write("get_telemetry_subscriptions_response", "v0-frame", [0] + header(7, flexible=True) + GTS_V0)
PT_V0 = [0, 0, 1, 0, 0, 117, 0]             # ThrottleTimeMs 256, UNKNOWN_SUBSCRIPTION_ID
write("push_telemetry_response", "v0", [0] + PT_V0)
write("push_telemetry_response", "v0-unknown-tag", [0, 0, 0, 0, 0, 0, 0, 1, 3, 1, 0xAA])
write("push_telemetry_response", "v0-frame", [0] + header(7, flexible=True) + PT_V0)


# ---- frame_decoder: ctl (max-frame selector << 6 | number of chunk sizes), sizes, stream ---
def frames(*bodies):
    out = []
    for b in bodies:
        out += list(struct.pack(">i", len(b))) + list(b)
    return out


STREAM = frames(AV_V0, [], IPI_V0, AV_V3)
write("frame_decoder", "one-chunk", [0x00] + STREAM)
write("frame_decoder", "chunks-1-3-0", [0x03, 1, 3, 0] + STREAM)
write("frame_decoder", "chunks-7", [0x01, 7] + STREAM)
write("frame_decoder", "too-large-max16", [(2 << 6) | 1, 5] + frames(IPI_V0, AV_V3))
write("frame_decoder", "negative", [0x01, 2] + frames([1, 2]) + list(struct.pack(">i", -5)))
write("frame_decoder", "partial-tail", [0x02, 4, 9] + frames(AV_V1) + [0, 0, 0, 50, 1, 2])


# ---- Produce (versions 3..=11; selector = version - 3) -----------------------------------
def i16(v): return list(struct.pack(">h", v))
def i32(v): return list(struct.pack(">i", v))
def i64(v): return list(struct.pack(">q", v))
def s(text): return i16(len(text)) + list(text.encode())
def cs(text): return [len(text) + 1] + list(text.encode())


def produce_v3_v8(version):
    part = i32(0) + i16(0) + i64(5) + i64(-1)
    if version >= 5:
        part += i64(0)
    if version >= 8:
        part += i32(0) + i16(-1)  # no record errors, null message
    return i32(1) + s("t") + i32(1) + part + i32(0)


def produce_flexible(version, hint=False, code=0):
    part = i32(0) + i16(6 if hint else code) + i64(5) + i64(-1) + i64(0) + [1] + [0]
    if hint:
        part += [1, 0, 8] + i32(2) + i32(7)  # CurrentLeader tag
    else:
        part += [0]
    # v13 names the topic by its id (16 bytes), earlier versions by name.
    topic = list(range(1, 17)) if version >= 13 else cs("t")
    body = [2] + topic + [2] + part + [0] + i32(0)
    if hint:
        ep = i32(2) + cs("broker-2") + i32(9092) + [0] + [0]
        body += [1, 0, len(ep) + 1, 2] + ep
    else:
        body += [0]
    return body


for v in range(3, 9):
    write("produce_response", f"v{v}", [v - 3] + produce_v3_v8(v))
write("produce_response", "v9", [6] + produce_flexible(9))
write("produce_response", "v10-hint", [7] + produce_flexible(10, hint=True))
write("produce_response", "v11", [8] + produce_flexible(11))
write("produce_response", "v13-topic-id", [10] + produce_flexible(13))
write("produce_response", "v13-unknown-topic-id", [10] + produce_flexible(13, code=100))

# ---- Metadata (versions 1..=12; selector = version - 1) -----------------------------------
def metadata_v1():
    brokers = i32(1) + i32(1) + s("h") + i32(9092) + i16(-1)
    part = i16(0) + i32(0) + i32(1) + i32(1) + i32(1) + i32(1) + i32(1)
    topics = i32(1) + i16(0) + s("t") + [0] + i32(1) + part
    return brokers + i32(1) + topics


def metadata_v9():
    brokers = [2] + i32(1) + cs("h") + i32(9092) + [0] + [0]
    part = i16(0) + i32(0) + i32(1) + i32(0) + [2] + i32(1) + [2] + i32(1) + [1] + [0]
    topics = [2] + i16(0) + cs("t") + [0] + [2] + part + i32(-2147483648) + [0]
    return i32(0) + brokers + cs("c") + i32(1) + topics + [0]


write("metadata_response", "v1", [0] + metadata_v1())
write("metadata_response", "v9", [8] + metadata_v9())
write("metadata_response", "v9-trailing-byte", [8] + metadata_v9() + [0])

# ---- SaslHandshake (version 1 only; selector = 0) -----------------------------------------
write("sasl_handshake_response", "v1", [0] + i16(0) + i32(2) + s("PLAIN") + s("SCRAM-SHA-512"))
write("sasl_handshake_response", "v1-unsupported", [0] + i16(33) + i32(1) + s("GSSAPI"))

# ---- SaslAuthenticate (versions 0..=2; selector = version) --------------------------------
write("sasl_authenticate_response", "v0-failed", [0] + i16(58) + s("bad") + i32(0))
write("sasl_authenticate_response", "v1", [1] + i16(0) + i16(-1) + i32(3) + list(b"v=x") + i64(3000))
write("sasl_authenticate_response", "v2", [2] + i16(0) + [0] + [4] + list(b"v=x") + i64(3000) + [0])


# ---- hostile_broker: [mode] [tuning] [ops length u16] [ops] [values] -------------------------
# Operations (see fuzz/src/hostile/mod.rs, `Run::op`); values empty = every answer sane.
def SEND(arg, extra=None):
    return [0, arg] + ([] if extra is None else [extra])


def ADV(i):  # 0, 1, 3, 10, 30, 100, 300, 1000, 3000, 10000, 60000, 300000 ms
    return [3, i]


FLUSH = [4, 0]


def CONN(arg):
    return [5, arg]


def PRODUCE(code, hint, left, only=0xFF):
    # code: index into NOT_LEADER(6), FENCED_LEADER_EPOCH(74), NOT_ENOUGH_REPLICAS(19),
    # REQUEST_TIMED_OUT(7), OOO(45), UNKNOWN_PRODUCER_ID(59), INVALID_PRODUCER_EPOCH(47),
    # CLUSTER_AUTHORIZATION_FAILED(31), MESSAGE_TOO_LARGE(10), NETWORK_EXCEPTION(13),
    # UNKNOWN_TOPIC(3), KAFKA_STORAGE_ERROR(56), PRODUCER_FENCED(90), TRANSACTION_ABORTABLE(120),
    # DUPLICATE_SEQUENCE(46), NONE; hint: none, same leader, epoch bump, other leader, unknown.
    return [6, code | (hint << 4), left, only]


def META(kind, k, left):
    # kind 0 topic error, 1 last partition index, 2 leader, 3 first broker's node id.
    return [7, kind | (k << 2), left]


def API(api, code, left):
    return [8, api, code, left]


def TXN(k):  # begin, commit, abort, send offsets, commit
    return [9, k]


def GARBAGE(conn, prefix, body):
    return [10, conn] + list(struct.pack(">I", prefix)) + [len(body)] + list(body)


def POLICY(k):  # clear, silent, refuse connects, drop after request, clear, throttle i32::MAX,
    # throttle 60 s, drop after request
    return [11, k]


def hostile(name, mode, tuning, ops, values=b"", target="hostile_broker", prefix=(), regression=False):
    data = list(prefix) + [mode, tuning] + list(struct.pack(">H", len(ops))) + ops + list(values)
    write(target, name, data, regression)


TRAFFIC = SEND(0x03) + ADV(3) + SEND(0x13) + SEND(0x07) + FLUSH + ADV(5) + SEND(0x23, 2) + ADV(5)
hostile("idempotent", 0x00, 0x00, TRAFFIC)
hostile("plain-acks1", 0x01, 0x00, TRAFFIC)
hostile("acks0", 0x03, 0x00, TRAFFIC)
hostile("transactional", 0x02, 0x00,
        SEND(0x03) + ADV(3) + TXN(1) + ADV(5) + SEND(0x03) + TXN(3) + ADV(3) + TXN(2) + ADV(5)
        + SEND(0x01) + ADV(5))
hostile("transactional-tv2", 0x22, 0x00, SEND(0x03) + ADV(3) + TXN(1) + ADV(5) + SEND(0x07) + ADV(5))
hostile("sasl-plain", 0x08, 0x00, TRAFFIC)
hostile("sasl-oauthbearer", 0x0C, 0x00, TRAFFIC)
hostile("silent-at-close", 0x10, 0x01, TRAFFIC)
hostile("in-flight-1-small-batches", 0xC0, 0x0E, TRAFFIC + SEND(0x83) + SEND(0x83) + ADV(6))
hostile("not-leader-same-leader", 0x00, 0x00,
        SEND(0x03) + ADV(3) + PRODUCE(0, 1, 255) + SEND(0x03) + FLUSH + ADV(5) + ADV(7), regression=True)
hostile("not-leader-epoch-bump", 0x01, 0x00,
        SEND(0x03) + ADV(3) + PRODUCE(0, 2, 255) + SEND(0x03) + FLUSH + ADV(5), regression=True)
hostile("not-leader-same-leader-once", 0x00, 0x00,
        SEND(0x03) + ADV(3) + PRODUCE(0, 1, 1) + SEND(0x03) + FLUSH + ADV(5))
hostile("not-enough-replicas", 0x01, 0x00,
        SEND(0x03) + ADV(3) + PRODUCE(2, 0, 5) + SEND(0x03) + FLUSH + ADV(5) + ADV(7))
hostile("out-of-order-sequence", 0x00, 0x00,
        SEND(0x03) + ADV(3) + PRODUCE(4, 0, 2) + SEND(0x03) + FLUSH + ADV(5) + ADV(7))
hostile("message-too-large", 0x00, 0x00,
        SEND(0x03) + SEND(0x43) + ADV(3) + PRODUCE(8, 0, 1) + SEND(0x03) + FLUSH + ADV(5) + ADV(7))
hostile("not-leader-other-leader", 0x00, 0x00,
        SEND(0x03) + ADV(3) + PRODUCE(0, 3, 3) + SEND(0x03) + FLUSH + ADV(5))
# Partitions 0 and 1 of t0 led by node 1: one Produce request carries both; partition 1 gets
# CLUSTER_AUTHORIZATION_FAILED, partition 0 is answered OK.
MIXED = (SEND(0x01) + ADV(3) + META(2, 6, 255) + ADV(10) + PRODUCE(7, 0, 1, 1)
         + SEND(0x21, 0) + SEND(0x21, 1) + FLUSH + ADV(5))
hostile("mixed-fatal-plain", 0x01, 0x00, MIXED, regression=True)
hostile("mixed-fatal-idempotent", 0x00, 0x00, MIXED, regression=True)
hostile("metadata-index-large", 0x00, 0x00, SEND(0x03) + ADV(3) + META(1, 5, 255) + ADV(10) + SEND(0x33, 200) + ADV(5), regression=True)
hostile("metadata-index-gap", 0x01, 0x00, SEND(0x03) + ADV(3) + META(1, 3, 255) + ADV(10) + SEND(0x23, 3) + ADV(5), regression=True)
hostile("metadata-leader-unknown", 0x00, 0x00, SEND(0x03) + ADV(3) + META(2, 1, 255) + ADV(10) + SEND(0x03) + ADV(7))
hostile("metadata-topic-error", 0x00, 0x00, META(0, 1, 20) + SEND(0x03) + ADV(5) + ADV(7))
hostile("metadata-broker-node", 0x01, 0x00, SEND(0x03) + ADV(3) + META(3, 4, 3) + ADV(10) + SEND(0x03) + ADV(5))
hostile("metadata-negative-node-id", 0x01, 0x00, SEND(0x03) + ADV(3) + META(3, 2, 255) + ADV(10), regression=True)
hostile("metadata-new-node-ids", 0x01, 0x00, SEND(0x03) + ADV(3) + META(3, 6, 255) + ADV(11) + SEND(0x03) + ADV(5),
        regression=True)
hostile("txn-close-silent-nothing-sent", 0x12, 0x00, SEND(0x08) + ADV(9), regression=True)
hostile("metadata-partition-index-10m", 0x00, 0x00, SEND(0x03) + ADV(3) + META(1, 0, 255) + ADV(10), regression=True)
# The brokers replaced once by new node ids.
hostile("metadata-new-node-ids-once", 0x00, 0x00, SEND(0x03) + ADV(3) + META(3, 6, 1) + ADV(10) + SEND(0x03) + ADV(5))
hostile("drop-after-request", 0x00, 0x00, SEND(0x03) + ADV(3) + POLICY(3) + SEND(0x03) + ADV(5) + POLICY(0) + ADV(7))
hostile("throttle-max", 0x01, 0x00, SEND(0x03) + ADV(3) + POLICY(5) + SEND(0x03) + FLUSH + ADV(5) + SEND(0x03)
        + ADV(5) + ADV(9) + ADV(10))
hostile("throttle-minute-transactional", 0x02, 0x00, SEND(0x03) + ADV(3) + POLICY(6) + TXN(1) + ADV(5) + SEND(0x03)
        + TXN(1) + ADV(5) + ADV(9))
hostile("refuse-connects", 0x01, 0x00, POLICY(2) + SEND(0x03) + ADV(7) + POLICY(2) + ADV(7))
hostile("held-and-chunked", 0x00, 0x00,
        SEND(0x03) + CONN(0x20) + CONN(0x11) + SEND(0x03) + ADV(4) + CONN(0x11) + ADV(5))
hostile("garbage", 0x00, 0x00, SEND(0x03) + ADV(3) + GARBAGE(0, 12, b"\0\0\0\1abcdefgh") + ADV(5))
hostile("init-producer-id-fenced", 0x00, 0x00, API(0, 4, 1) + SEND(0x03) + ADV(5) + ADV(7))
hostile("find-coordinator-errors", 0x02, 0x00, API(1, 0, 3) + SEND(0x03) + ADV(5) + TXN(1) + ADV(7))
hostile("end-txn-concurrent", 0x02, 0x00, API(3, 3, 4) + SEND(0x03) + ADV(3) + TXN(1) + ADV(7))
hostile("add-partitions-abortable", 0x02, 0x00, API(2, 9, 1) + SEND(0x03) + ADV(3) + TXN(1) + ADV(5) + TXN(2) + ADV(5))
hostile("sasl-authenticate-failed", 0x08, 0x00, API(6, 8, 2) + SEND(0x03) + ADV(5) + ADV(7))
hostile("hostile-values", 0x00, 0x00, TRAFFIC, bytes([0x00, 0xE3, 0x00, 0x00, 0xEE, 0x10] * 40))
hostile("hostile-values-txn", 0x02, 0x00, SEND(0x03) + ADV(3) + TXN(1) + ADV(5), bytes([0x00] * 60 + [0xE5, 0x07] * 30))

# ---- oauthbearer: [selector] ... (even: the mechanism; odd: a hostile_broker run) ----------
def oauth(name, token, exts=(), server=()):
    data = [0, len(token)] + list(token) + [len(exts)]
    for k, v in exts:
        data += [len(k)] + list(k) + [len(v)] + list(v)
    for m in server:
        data += [len(m)] + list(m)
    write("oauthbearer", name, data)


oauth("accepted", b"eyJhbGciOi.eyJzdWIi.sig", server=[b""])
oauth("extensions", b"tok-1", [(b"logicalCluster", b"lkc-1"), (b"identityPoolId", b"pool 2")], [b""])
oauth("challenge-then-failure", b"tok", server=[b'{"status":"invalid_token"}', b"again"])
oauth("challenge-then-success", b"tok", server=[b'{"status":"invalid_token"}', b""])
hostile("producer-sane", 0x0C, 0x00, TRAFFIC, target="oauthbearer", prefix=[1])
hostile("producer-reauthentication", 0x0C, 0x00, TRAFFIC + ADV(10) + SEND(0x03) + ADV(11),
        target="oauthbearer", prefix=[1])
hostile("producer-token-refused", 0x0D, 0x00, API(6, 8, 1) + TRAFFIC, target="oauthbearer", prefix=[1])


# ---- scram_server_messages: [flags] [user] [password] [salt] [iterations] [nonce] [raw] --------
def scram(name, flags, user=b"user", password=b"pencil", salt=b"salt-bytes", nonce=b"server", raw=b""):
    data = [flags]
    for c in (user, password, salt):
        data += [len(c)] + list(c)
    data += [0] + [len(nonce)] + list(nonce) + list(raw)
    write("scram_server_messages", name, data)


scram("sha256-valid", 0x00)
scram("sha512-valid", 0x01)
scram("escaped-username", 0x80, user=b"a,b=c")
scram("empty-password", 0x01, password=b"")
for k in range(1, 8):
    scram(f"server-first-wrong-{k}", k << 1, raw=b"r=abc,s=c2FsdA==,i=4096")
for k in range(1, 8):
    scram(f"server-final-wrong-{k}", (k << 4) | (k & 1), raw=b"v=rmF9pqV8S7suAoZWja4dJRkFsKQ=")


# ---- record_batch: [flags: codec | mode << 3] ... -------------------------------------------
def zigzag(v):
    return (v << 1) ^ (v >> 63)


def varint(v):
    v = zigzag(v) & ((1 << 64) - 1)
    out = []
    while True:
        b = v & 0x7F
        v >>= 7
        if v:
            out.append(b | 0x80)
        else:
            out.append(b)
            return out


def record(i, key, value, headers=()):
    body = [0] + varint(i) + varint(i)
    body += varint(-1) if key is None else varint(len(key)) + list(key)
    body += varint(-1) if value is None else varint(len(value)) + list(value)
    body += varint(len(headers))
    for k, v in headers:
        body += varint(len(k)) + list(k)
        body += varint(-1) if v is None else varint(len(v)) + list(v)
    return varint(len(body)) + body


RECORDS = (record(0, b"k", b"value-0") + record(1, None, b"value-1", [(b"h", b"x")])
           + record(2, b"k2", None, [(b"n", None)]))


def decode_seed(name, codec, payload, count, expected):
    write("record_batch", name, [codec] + list(struct.pack(">HH", count, expected)) + list(struct.pack(">q", 1700000000000)) + list(payload))


decode_seed("decode-none", 0, RECORDS, 3, len(RECORDS))
decode_seed("decode-none-short", 0, RECORDS[:-3], 3, len(RECORDS) - 3)
decode_seed("decode-none-count-high", 0, RECORDS, 40000, len(RECORDS))
import gzip as _gzip
decode_seed("decode-gzip", 1, _gzip.compress(bytes(RECORDS), mtime=0), 3, len(RECORDS))
decode_seed("decode-gzip-expected-high", 1, _gzip.compress(bytes(RECORDS), mtime=0), 3, 60000)
for codec in range(5):
    # n records, base timestamp, then per record: ts delta, key, value, header count, headers.
    recs = [4, 0, 0]
    recs += [0, 1, ord("k"), 5] + list(b"hello") + [1, 1, ord("h"), 255]
    recs += [3, 255, 0, 0]
    recs += [255, 2, ord("a"), ord("b"), 255, 0]
    recs += [254, 0, 3] + list(b"old") + [2, 0, 0, 1, ord("x"), 1, ord("y")]
    write("record_batch", f"round-trip-{['none', 'gzip', 'snappy', 'lz4', 'zstd'][codec]}", [codec | 8] + recs + [0])
write("record_batch", "round-trip-open", [8, 2, 0, 0, 0, 1, ord("k"), 1, ord("v"), 0, 255, 255, 255, 0, 1])


# ---- config_properties: [mode] ... (even: .properties text; odd: set pairs) ------------------
def props(name, text):
    write("config_properties", name, [0] + list(text.encode()))


props("java-style", "bootstrap.servers=b1:9092,b2:9092\nacks=all\nlinger.ms=5\nbatch.size=16384\n"
      "compression.type=lz4\n# comment\n! also a comment\nclient.id = fuzz\n")
props("librdkafka-style", "metadata.broker.list=localhost:9092\nqueue.buffering.max.ms=10\n"
      "message.timeout.ms=30000\nqueue.buffering.max.kbytes=1024\ncompression.codec=zstd\n")
props("sasl", "bootstrap.servers=b:9092\nsecurity.protocol=SASL_PLAINTEXT\nsasl.mechanism=SCRAM-SHA-256\n"
      "sasl.username=alice\nsasl.password=alice-secret-1\n")
props("jaas", "bootstrap.servers=b:9092\nsecurity.protocol=SASL_PLAINTEXT\nsasl.mechanism=PLAIN\n"
      "sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule required "
      "username=\"bob\" password=\"bob-secret-2\";\n")
props("transactional", "bootstrap.servers=b:9092\ntransactional.id=tx-1\ntransaction.timeout.ms=30000\n"
      "max.in.flight.requests.per.connection=5\n")
props("errors", "bootstrap.servers=b:9092\nlingr.ms=5\nretries=3\nacks=maybe\nnot a setting\n")
props("large-durations", "bootstrap.servers=b:9092\nlinger.ms=18446744073709551615\n")
write("config_properties", "properties-batch-size-huge",
      [0] + list(b"bootstrap.servers=b:9092\nbatch.size=9999999999\n"), regression=True)
props("large-sizes", "bootstrap.servers=b:9092\nbuffer.memory=18446744073709551615\nmax.request.size=4000000\n")
write("config_properties", "properties-secret-whitespace-separator",
      [0] + list(b"bootstrap.servers=b:9092\nsasl.password hunter2hunter2\n"), regression=True)


def settings(name, pairs):
    data = [1]
    for n, v in pairs:
        data += [n, v]
    write("config_properties", name, data)


settings("set-basic", [(0, 19), (6, 0), (7, 2)])
settings("set-edges", [(0, 19), (6, 3), (8, 6), (16, 4), (3, 12)])
settings("set-secrets", [(0, 19), (31, 16), (32, 18), (33, 0), (34, 9)])


def builder(name, pairs):
    data = [2]
    for n, v in pairs:
        data += [n, v]
    write("config_properties", name, data)


builder("builder-defaults", [])
builder("builder-small", [(0, 2), (12, 2), (14, 4), (16, 1)])
builder("builder-transactional", [(11, 4), (5, 4)])
builder("builder-acks0-gzip", [(18, 2), (20, 1)])

# Typed-builder settings that panic or abort today (issue 21 item 7): setter, value index
# (durations: 5 = Duration::MAX; sizes: 5 = usize::MAX, 8 = 1 TiB).
for name, setter, value in [("linger-max", 0, 5), ("batch-size-usize-max", 12, 5),
                            ("retry-backoff-max", 1, 5), ("delivery-timeout-max", 6, 5),
                            ("metadata-max-age-max", 7, 5), ("rebootstrap-trigger-max", 8, 5),
                            ("batch-size-1tib", 12, 8)]:
    write("config_properties", "builder-" + name, [2, setter, value], regression=True)

# oauthbearer through the producer: the first token's kind in the tuning byte's high bits.
hostile("producer-token-refused-by-provider", 0x0C, 0x10, TRAFFIC, target="oauthbearer", prefix=[1])
hostile("producer-token-lifetime-zero", 0x0D, 0x20, TRAFFIC + ADV(8), target="oauthbearer", prefix=[1])
hostile("producer-token-lifetime-1ms", 0x0C, 0x40, TRAFFIC + ADV(8), target="oauthbearer", prefix=[1])
hostile("token-lifetime-max", 0x0C, 0x30, TRAFFIC, target="oauthbearer", prefix=[1], regression=True)
hostile("producer-token-lifetime-u64-max-ms", 0x0C, 0x50, TRAFFIC, target="oauthbearer", prefix=[1])
hostile("producer-token-with-separator", 0x0C, 0x60, TRAFFIC, target="oauthbearer", prefix=[1])
