"""Brevis against the ``safetensors`` package on every corpus file: the same calls,
compared exactly (dtype, shape and every byte).

Each corpus file is compressed once per session (``corpus_archives`` in conftest).
``safetensors``' numpy framework has no type for FP8 (it raises), so an FP8 tensor is
compared with its bytes in the original file instead; every other tensor is compared
with what ``safetensors`` returns.
"""

from __future__ import annotations

import json
import struct
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import brevis
import brevis.numpy
from conftest import CORPUS

safetensors = pytest.importorskip("safetensors")
import safetensors.numpy  # noqa: E402

pytest.importorskip("ml_dtypes")  # safetensors reads BF16 as numpy only with it

# safetensors' numpy framework raises on these (no numpy type).
NO_NUMPY_TYPE = {"F8_E4M3", "F8_E5M2"}
# Tensors whose slices are compared per file: all of a small file, a sample of a big one
# (the largest ones, which have regions, and every k-th).
SLICED = 24


def header_and_data(path: Path) -> tuple[dict, bytes]:
    raw = path.read_bytes()
    (n,) = struct.unpack("<Q", raw[:8])
    return json.loads(raw[8 : 8 + n]), raw[8 + n :]


def same(ours: Any, theirs: Any, what: str) -> None:
    """Exactly equal arrays: dtype, shape and bytes (NaN payloads and -0.0 included)."""
    assert isinstance(ours, np.ndarray), f"{what}: {type(ours)}"
    assert ours.dtype == theirs.dtype, f"{what}: dtype {ours.dtype} != {theirs.dtype}"
    assert ours.shape == theirs.shape, f"{what}: shape {ours.shape} != {theirs.shape}"
    assert ours.tobytes() == theirs.tobytes(), f"{what}: bytes differ"


def raw_tensor(header: dict, data: bytes, name: str) -> tuple[str, list[int], bytes]:
    e = header[name]
    begin, end = e["data_offsets"]
    return e["dtype"], e["shape"], data[begin:end]


def index_expressions(shape: list[int]) -> list[Any]:
    """Index expressions that safetensors takes for a tensor of ``shape``: ints (from the
    start and the end), ranges, steps, the last axis, and mixes of them."""
    if not shape:
        return [(), Ellipsis]
    if 0 in shape:
        return []  # safetensors refuses any slice of an empty tensor
    d0 = shape[0]
    exprs: list[Any] = [0, d0 - 1, -1, slice(0, 1), slice(None), Ellipsis,
                        slice(0, d0, 2), slice(d0 // 2, d0), slice(1 % d0, d0, 3)]
    if d0 >= 3:
        exprs += [slice(1, 3), slice(d0 // 3, 2 * d0 // 3 + 1, 5)]
    if len(shape) >= 2:
        last, d1 = shape[-1], shape[1]
        exprs += [
            (Ellipsis, 0),
            (Ellipsis, last - 1),
            (Ellipsis, slice(0, min(2, last))),
            (Ellipsis, slice(None, None, 2)),
            (Ellipsis, slice(last // 2, last)),
            (slice(None), slice(d1 // 2, d1)),
            (0, slice(0, d1, 3)),
            (slice(0, min(4, d0)), -1),
            (d0 - 1, Ellipsis),
        ]
    if len(shape) >= 3:
        exprs += [(0, 0), (slice(None), 0, slice(None)), (slice(0, 1), slice(None), -1)]
    return exprs


def sliced_names(header: dict) -> list[str]:
    names = sorted(k for k in header if k != "__metadata__")
    if len(names) <= SLICED:
        return names
    size = lambda n: header[n]["data_offsets"][1] - header[n]["data_offsets"][0]  # noqa: E731
    largest = sorted(names, key=lambda n: (-size(n), n))[: SLICED // 2]
    step = len(names) // (SLICED // 2)
    return sorted(set(largest) | set(names[::step]))


@pytest.mark.parametrize("src", CORPUS, ids=[p.stem for p in CORPUS])
def test_safe_open_matches_safetensors(src: Path, corpus_archives: dict[str, Path]) -> None:
    header, data = header_and_data(src)
    with safetensors.safe_open(src, framework="np") as theirs, \
            brevis.safe_open(corpus_archives[src.name], framework="np") as ours:
        assert ours.keys() == theirs.keys()
        assert ours.offset_keys() == theirs.offset_keys()
        assert ours.metadata() == theirs.metadata()
        for name in theirs.keys():
            dtype, shape, raw = raw_tensor(header, data, name)
            t = ours.get_tensor(name)
            if dtype in NO_NUMPY_TYPE:
                assert (list(t.shape), t.tobytes()) == (shape, raw), name
                continue
            same(t, theirs.get_tensor(name), name)
        for name in sliced_names(header):
            dtype, shape, _ = raw_tensor(header, data, name)
            s, r = ours.get_slice(name), theirs.get_slice(name)
            assert (s.get_shape(), s.get_dtype()) == (r.get_shape(), r.get_dtype())
            full = ours.get_tensor(name)
            for expr in index_expressions(shape):
                what = f"{name}[{expr!r}]"
                if dtype in NO_NUMPY_TYPE:
                    # Their numpy framework has no FP8 type: the same index on the whole
                    # tensor is the reference.
                    same(s[expr], np.array(full[expr], copy=True), what)
                else:
                    same(s[expr], r[expr], what)


@pytest.mark.parametrize("src", CORPUS, ids=[p.stem for p in CORPUS])
def test_save_file_of_load_file_restores_the_same_tensors(
    src: Path, corpus_archives: dict[str, Path], tmp_path: Path
) -> None:
    tensors = brevis.numpy.load_file(corpus_archives[src.name])
    with brevis.safe_open(corpus_archives[src.name]) as f:
        metadata = f.metadata()
        assert list(tensors) == f.offset_keys()
    out = tmp_path / "saved.brv"
    report = brevis.numpy.save_file(tensors, out, metadata=metadata)
    assert report["ok"] and report["output"] == str(out)
    again = brevis.numpy.load_file(out)
    assert sorted(again) == sorted(tensors)
    for name, t in tensors.items():
        same(again[name], t, name)
    # The archive restores the file safetensors would have written of the same dict (its
    # layout: by dtype, then name), byte for byte in the data and the header's entries
    # (safetensors writes __metadata__'s keys in hash order, so the header text may
    # differ there).
    # safetensors.numpy cannot save FP8 arrays (no numpy type): then the tensors above
    # are the check.
    if any(t.dtype.name.startswith("float8") for t in tensors.values()):
        return
    restored = tmp_path / "saved.safetensors"
    brevis.decompress_file(out, restored)
    expected = safetensors.numpy.save(tensors, metadata=metadata)
    (n,) = struct.unpack("<Q", expected[:8])
    ours_header, ours_data = header_and_data(restored)
    assert ours_header == json.loads(expected[8 : 8 + n])
    assert list(ours_header) == list(json.loads(expected[8 : 8 + n]))
    assert ours_data == expected[8 + n :]
    if metadata is None or len(metadata) <= 1:
        assert restored.read_bytes() == expected


def test_no_such_tensor_is_a_key_error(corpus_archives: dict[str, Path]) -> None:
    path = next(iter(corpus_archives.values()))
    with brevis.safe_open(path, framework="np") as f:
        for call in (f.get_tensor, f.get_slice):
            with pytest.raises(KeyError) as info:
                call("no.such.tensor")
            assert isinstance(info.value, brevis.NoSuchTensorError)
            assert isinstance(info.value, brevis.BrevisError)
            assert info.value.kind == "no_such_tensor"
            assert '"no.such.tensor"' in str(info.value)
    # Archive.decode_tensor too: a BrevisError, and a KeyError for safetensors-style code.
    for call in (brevis.Archive(path).decode_tensor, brevis.Archive(path).info):
        with pytest.raises(KeyError) as info:
            call("no.such.tensor")
        assert isinstance(info.value, brevis.NoSuchTensorError)
        assert isinstance(info.value, brevis.BrevisError)
        assert info.value.kind == "no_such_tensor"


def test_refused_indexes_are_refused_as_safetensors_refuses_them(
    corpus_archives: dict[str, Path],
) -> None:
    path = corpus_archives.get("fracast0-f32.safetensors") or next(iter(corpus_archives.values()))
    with brevis.safe_open(path, framework="np") as f:
        name = next(n for n in f.keys() if len(f.get_slice(n).get_shape()) == 2)
        s = f.get_slice(name)
        rows = s.get_shape()[0]
        for bad, error in [
            (np.array([0, 1]), ValueError),
            ((0, np.array([0, 1])), ValueError),
            (slice(None, None, 0), ValueError),
            (slice(None, None, -1), ValueError),
            ([0, 1], ValueError),
            (None, ValueError),
            ((Ellipsis, Ellipsis), ValueError),
            (rows, IndexError),
            (-rows - 1, IndexError),
            ((0, 0, 0), IndexError),
        ]:
            with pytest.raises(error) as info:
                s[bad]
            if isinstance(bad, np.ndarray) or isinstance(bad, tuple) and any(
                isinstance(b, np.ndarray) for b in bad
            ):
                # Said as an index it does not take, not numpy's "truth value of an
                # array" from comparing it with `...`.
                assert "unsupported index array([0, 1])" in str(info.value), info.value
        # Where safetensors 0.8 fails on a slice numpy takes, numpy's result.
        full = f.get_tensor(name)
        # An empty list selects no row, in numpy and in safetensors.
        for expr in [slice(-2, None), slice(None, -1), slice(1, rows + 10), slice(2, 1), []]:
            same(s[expr], full[expr], f"{name}[{expr!r}]")
