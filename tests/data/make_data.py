#!/usr/bin/env python3
"""Regenerates the small tensor files that tests load with load(...).

  small.npy           f32[2, 3]  [[0, 0.5, 1], [1.5, 2, -2.5]]
  ids.npy             i64[3]     [3, -1, 7]
  small.safetensors   "fc.weight" f32[2, 2] [[1, -2], [0.25, 4]]
                      "fc.bias"   f16[2]    [0.5, -1]

The values are exact in their types so tests can check them as text. Written with
numpy and the standard library only (the safetensors format is an 8-byte little-endian
header length, a JSON header, then the raw little-endian data); the output is
byte-for-byte reproducible.

usage: python3 tests/data/make_data.py
"""

import json
import os
import struct

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))


def write_safetensors(path, tensors):
    names = {np.dtype("float32"): "F32", np.dtype("float16"): "F16", np.dtype("int64"): "I64"}
    header, blobs, offset = {}, [], 0
    for key in sorted(tensors):
        a = np.ascontiguousarray(tensors[key])
        raw = a.astype(a.dtype.newbyteorder("<")).tobytes()
        header[key] = {"dtype": names[a.dtype], "shape": list(a.shape),
                       "data_offsets": [offset, offset + len(raw)]}
        blobs.append(raw)
        offset += len(raw)
    text = json.dumps(header, separators=(",", ":"), sort_keys=True).encode()
    text += b" " * (-len(text) % 8)  # the data starts 8-byte aligned
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)) + text + b"".join(blobs))


def main():
    np.save(os.path.join(HERE, "small.npy"),
            np.array([[0, 0.5, 1], [1.5, 2, -2.5]], dtype=np.float32))
    np.save(os.path.join(HERE, "ids.npy"), np.array([3, -1, 7], dtype=np.int64))
    write_safetensors(os.path.join(HERE, "small.safetensors"), {
        "fc.weight": np.array([[1, -2], [0.25, 4]], dtype=np.float32),
        "fc.bias": np.array([0.5, -1], dtype=np.float16),
    })


if __name__ == "__main__":
    main()
