#!/usr/bin/env python3
"""Writes the small safetensors inputs the CLI tests use (into the current directory)."""
import json
import struct


def save(path, tensors):
    header, data = {}, b""
    for name, (dtype, shape, fmt, values) in tensors.items():
        raw = struct.pack("<" + fmt * len(values), *values)
        header[name] = {"dtype": dtype, "shape": shape, "data_offsets": [len(data), len(data) + len(raw)]}
        data += raw
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * (-len(text) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)) + text + data)


save("affine_inputs.safetensors", {"x": ("F32", [2, 2], "f", [1, 2, 3, 4])})
save("affine_f64_inputs.safetensors", {"x": ("F64", [2, 2], "d", [1, 2, 3, 4])})
save("affine_bogus_weights.safetensors", {"bogus": ("F32", [2], "f", [0, 0])})
