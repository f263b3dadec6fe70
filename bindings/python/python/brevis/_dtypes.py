"""How safetensors dtypes map to numpy and torch dtypes."""

from __future__ import annotations

from typing import Any

# Dtypes numpy has a type of its own for (little-endian, as safetensors stores them).
NUMPY = {
    "BOOL": "?",
    "U8": "u1",
    "I8": "i1",
    "U16": "<u2",
    "I16": "<i2",
    "F16": "<f2",
    "U32": "<u4",
    "I32": "<i4",
    "F32": "<f4",
    "U64": "<u8",
    "I64": "<i8",
    "F64": "<f8",
    "C64": "<c8",
}

# Dtypes numpy has no type for: the ml_dtypes type when it is installed, else the raw
# unsigned word of the same width (the bits unchanged).
ML_DTYPES = {
    "BF16": ("bfloat16", "<u2"),
    "F8_E4M3": ("float8_e4m3fn", "u1"),
    "F8_E5M2": ("float8_e5m2", "u1"),
    "F8_E4M3FNUZ": ("float8_e4m3fnuz", "u1"),
    "F8_E5M2FNUZ": ("float8_e5m2fnuz", "u1"),
    "F8_E8M0": ("float8_e8m0fnu", "u1"),
}

TORCH = {
    "BOOL": "bool",
    "U8": "uint8",
    "I8": "int8",
    "U16": "uint16",
    "I16": "int16",
    "F16": "float16",
    "BF16": "bfloat16",
    "U32": "uint32",
    "I32": "int32",
    "F32": "float32",
    "U64": "uint64",
    "I64": "int64",
    "F64": "float64",
    "C64": "complex64",
    "F8_E4M3": "float8_e4m3fn",
    "F8_E5M2": "float8_e5m2",
    "F8_E4M3FNUZ": "float8_e4m3fnuz",
    "F8_E5M2FNUZ": "float8_e5m2fnuz",
    "F8_E8M0": "float8_e8m0fnu",
}


def numpy_dtype(name: str) -> Any:
    """The numpy dtype of safetensors dtype ``name``: numpy's own, the ``ml_dtypes`` type
    for BF16 and FP8 when ml_dtypes is installed, else the unsigned word of the same
    width. Sub-byte dtypes (F4, F6_*) are raw bytes (``uint8``)."""
    import numpy as np

    if name in NUMPY:
        return np.dtype(NUMPY[name])
    if name in ML_DTYPES:
        ml_name, raw = ML_DTYPES[name]
        try:
            import ml_dtypes

            return np.dtype(getattr(ml_dtypes, ml_name))
        except (ImportError, AttributeError):
            return np.dtype(raw)
    return np.dtype("u1")


def to_numpy(data: bytearray, dtype: str, shape: list[int]) -> Any:
    """The array over ``data`` (no copy) of safetensors ``dtype`` and ``shape``; a dtype
    read as raw bytes keeps its bytes as a flat ``uint8`` array."""
    import numpy as np

    dt = numpy_dtype(dtype)
    arr = np.frombuffer(data, dtype=dt)
    if dt.itemsize == 1 and dtype not in NUMPY and dtype not in ML_DTYPES:
        return arr
    return arr.reshape(shape)


def to_torch(data: bytearray, dtype: str, shape: list[int]) -> Any:
    """The torch tensor over ``data`` of safetensors ``dtype`` and ``shape``."""
    import torch

    name = TORCH.get(dtype)
    tdt = getattr(torch, name, None) if name else None
    if tdt is None:
        return torch.frombuffer(data, dtype=torch.uint8) if len(data) else torch.empty(0, dtype=torch.uint8)
    if len(data) == 0:
        return torch.empty(shape, dtype=tdt)
    return torch.frombuffer(data, dtype=tdt).reshape(shape)


# Bytes per element of each safetensors dtype (sub-byte dtypes F4 and F6_* have none:
# they are read as raw bytes).
ITEM_BYTES = {
    "BOOL": 1, "U8": 1, "I8": 1, "F8_E4M3": 1, "F8_E5M2": 1, "F8_E4M3FNUZ": 1,
    "F8_E5M2FNUZ": 1, "F8_E8M0": 1, "U16": 2, "I16": 2, "F16": 2, "BF16": 2, "U32": 4,
    "I32": 4, "F32": 4, "U64": 8, "I64": 8, "F64": 8, "C64": 8,
}

# The order safetensors lays tensors out in when it saves: by dtype, in descending order
# of this list (its `Dtype` enum), then by name.
SAVE_ORDER = [
    "BOOL", "U8", "I8", "F8_E5M2", "F8_E4M3", "F8_E8M0", "F8_E4M3FNUZ", "F8_E5M2FNUZ",
    "I16", "U16", "F16", "BF16", "I32", "U32", "F32", "C64", "F64", "I64", "U64",
]


def numpy_code(dt: Any) -> str:
    """The safetensors dtype of numpy dtype ``dt`` (ml_dtypes' BF16 and FP8 types
    included). Raises ``ValueError`` for a dtype safetensors has no code for."""
    import numpy as np

    dt = np.dtype(dt)
    for code, ch in NUMPY.items():
        if np.dtype(ch).newbyteorder("=") == dt.newbyteorder("="):
            return code
    for code, (ml_name, _raw) in ML_DTYPES.items():
        if dt.name == ml_name:
            return code
    raise ValueError(f"dtype {dt} has no safetensors dtype (supported: {', '.join(SAVE_ORDER)})")


def torch_code(dt: Any) -> str:
    """The safetensors dtype of torch dtype ``dt``."""
    name = str(dt).split(".")[-1]
    for code, t in TORCH.items():
        if t == name:
            return code
    raise ValueError(f"dtype {dt} has no safetensors dtype (supported: {', '.join(SAVE_ORDER)})")


def serialize(parts: list[tuple[str, str, list[int], bytes]], metadata: Any) -> bytes:
    """The ``.safetensors`` file of ``parts`` (name, safetensors dtype, shape, little-endian
    bytes), laid out as the ``safetensors`` package lays out what it saves: by dtype in
    descending ``SAVE_ORDER``, then by name; the JSON header compact, ``__metadata__``
    first, padded with spaces to a multiple of 8 bytes."""
    import json
    import struct

    if metadata is not None:
        if not isinstance(metadata, dict) or not all(
            isinstance(k, str) and isinstance(v, str) for k, v in metadata.items()
        ):
            raise TypeError("metadata must be a dict of str to str")
    rank = {code: i for i, code in enumerate(SAVE_ORDER)}
    ordered = sorted(parts, key=lambda p: (-rank[p[1]], p[0]))
    header: dict[str, Any] = {}
    if metadata is not None:
        header["__metadata__"] = dict(metadata)
    at = 0
    for name, code, shape, data in ordered:
        header[name] = {"dtype": code, "shape": list(shape), "data_offsets": [at, at + len(data)]}
        at += len(data)
    text = json.dumps(header, separators=(",", ":"), ensure_ascii=False).encode()
    text += b" " * (-len(text) % 8)
    return b"".join([struct.pack("<Q", len(text)), text] + [p[3] for p in ordered])
