#!/usr/bin/env python3
"""Writes fuzz/corpus-peer/: seeds for fuzz/peer_frames_fuzz.cpp.

An encoder of the peer-transfer wire format written from
src/peer/PROTOCOL.md alone (not from the C++), so the seeds double as a check
that the document is enough to speak the protocol: tests/peer_protocol_test.cpp
decodes every valid seed and refuses every bad-* one.

Each file is one selector byte, then the input: 0 Open, 1 OpenAck,
2 Request, 3 Response (a message payload, no frame header), 4 a stream as a
server reads it (0x0d, frame(Open), 0x03, frame(Request)).

Usage: python3 fuzz/peer_seeds.py   (rewrites fuzz/corpus-peer/)
"""
import hashlib
import os
import shutil
import struct

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "corpus-peer")


def u8(v): return struct.pack("<B", v)
def u16(v): return struct.pack("<H", v)
def u64(v): return struct.pack("<Q", v)


def text(s):
    b = s.encode("utf-8")
    return u16(len(b)) + b


def features(fs):
    return u16(len(fs)) + b"".join(text(f) for f in fs)


def opt(value):
    return u8(0) if value is None else u8(1) + value


def open_msg(feats, name="skippy-stage", major=2, minor=0):
    return u16(1) + text(name) + u16(major) + u16(minor) + features(feats)


def request(rel_path, offset=0, size=None, sha=None, requester=b"\x11" * 32,
            ref="hf://org/tiny-layers@0123456789abcdef0123456789abcdef01234567"):
    return (u16(1) + requester + text("t-1") + text("r-1") + text("s1") + text(ref) +
            hashlib.sha256(b"manifest").digest() + text(rel_path) + u64(offset) +
            opt(None if size is None else u64(size)) + opt(sha))


def accepted(offset, total, sha):
    return u16(1) + u8(1) + u64(offset) + u64(total) + sha


def refused(code):
    return u16(1) + u8(2) + u8(code)


def frame(payload):
    return struct.pack("<I", len(payload)) + payload


def main():
    shutil.rmtree(OUT, ignore_errors=True)
    os.makedirs(OUT)
    digest = hashlib.sha256(b"artifact").digest()
    seeds = {
        "open-artifact-transfer": u8(0) + open_msg(["artifact-transfer"]),
        "open-no-features": u8(0) + open_msg([]),
        "ack-offered": u8(1) + open_msg(["artifact-transfer"]),
        "ack-not-offered": u8(1) + open_msg([]),
        "ack-other-major": u8(1) + open_msg([], major=3),
        "request-layer": u8(2) + request("layers/layer-00004.gguf", 0, 764352, digest),
        "request-resume": u8(2) + request("layers/layer-00004.gguf", 4096, 764352),
        "request-manifest": u8(2) + request("model-package.json"),
        "request-utf8": u8(2) + request("projectors/mmproj-\u00e9t\u00e9.gguf", 7),
        "response-accepted": u8(3) + accepted(0, 764352, digest),
        "response-accepted-resume": u8(3) + accepted(4096, 764352, digest),
        "response-disabled": u8(3) + refused(1),
        "response-unavailable": u8(3) + refused(2),
        "response-invalid-offset": u8(3) + refused(3),
        "response-busy": u8(3) + refused(4),
        "stream-request": u8(4) + b"\x0d" + frame(open_msg(["artifact-transfer"])) + b"\x03" +
                          frame(request("shared/output.gguf", 0, 724352, digest)),
        # Malformed: each must be refused.
        "bad-request-escape": u8(2) + request("../../etc/passwd"),
        "bad-request-offset": u8(2) + request("layers/layer-00001.gguf", 10, 9),
        "bad-request-not-hf": u8(2) + request("layers/layer-00001.gguf", ref="/srv/package"),
        "bad-request-trailing": u8(2) + request("layers/layer-00001.gguf") + b"\x00",
        "bad-response-code": u8(3) + refused(9),
        "bad-open-generation": u8(0) + u16(2) + open_msg([])[2:],
    }
    for name, data in seeds.items():
        with open(os.path.join(OUT, name), "wb") as f:
            f.write(data)
    print(f"wrote {len(seeds)} seeds to {OUT}")


if __name__ == "__main__":
    main()
