#!/usr/bin/env python3
"""Writes the seed corpus under corpus/<target>/ from the golden byte arrays of producer-core's
unit tests. Run from fuzz/: `python3 seeds.py`. Seeds are committed; corpora grown by fuzzing
runs are not (run with a scratch dir first: `cargo fuzz run <t> /tmp/corpus-<t> corpus/<t>`).

Response targets: one selector byte (version - first supported version) then the body.
"""
import os
import struct


def write(target, name, data):
    d = os.path.join("corpus", target)
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, "seed-" + name), "wb") as f:
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
