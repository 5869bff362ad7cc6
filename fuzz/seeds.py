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
