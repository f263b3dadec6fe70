"""safe_open and load_file: every tensor with its original bytes, dtype and shape."""

from __future__ import annotations

import struct
import sys
from pathlib import Path

import numpy as np
import pytest

import brevis
import brevis.numpy
from brevis._dtypes import numpy_dtype
from conftest import BF16_WORDS, F8_BYTES, I64_VALUES, read_safetensors


def test_every_corpus_tensor_has_its_original_bytes(corpus_file: Path, tmp_path: Path) -> None:
    archive = tmp_path / "f.brv"
    brevis.compress_file(corpus_file, archive)
    header, data = read_safetensors(corpus_file)
    names = [k for k in header if k != "__metadata__"]
    with brevis.safe_open(archive, framework="numpy") as f:
        assert sorted(f.keys()) == sorted(names)
        assert f.metadata() == header.get("__metadata__")
        for name in names:
            entry = header[name]
            begin, end = entry["data_offsets"]
            array = f.get_tensor(name)
            assert list(array.shape) == entry["shape"]
            assert array.dtype == np.dtype("<f4")
            assert array.tobytes() == data[begin:end]


def test_mixed_dtypes_with_ml_dtypes(mixed_file: Path, tmp_path: Path) -> None:
    ml_dtypes = pytest.importorskip("ml_dtypes")
    archive = tmp_path / "m.brv"
    brevis.compress_file(mixed_file, archive, budget=0)
    tensors = brevis.numpy.load_file(archive)
    assert list(tensors) == ["bf16", "fp8", "i64", "mask", "empty", "f32"]
    bf16 = tensors["bf16"]
    assert bf16.dtype == np.dtype(ml_dtypes.bfloat16)
    assert bf16.shape == (2, 4)
    assert list(bf16.view("<u2").ravel()) == BF16_WORDS
    fp8 = tensors["fp8"]
    assert fp8.dtype == np.dtype(ml_dtypes.float8_e4m3fn)
    assert fp8.view("u1").tobytes() == F8_BYTES
    assert tensors["i64"].tolist() == [I64_VALUES[0:2], I64_VALUES[2:4], I64_VALUES[4:6]]
    assert tensors["mask"].tolist() == [True, False, True]
    assert tensors["empty"].shape == (0, 3)
    f32 = tensors["f32"]
    assert f32.tobytes() == struct.pack("<2f", -0.0, 1.5)
    # Writable, and the archive is not touched by writing.
    f32[1] = 2.0
    assert brevis.numpy.load_file(archive)["f32"][1] == 1.5


def test_without_ml_dtypes_bf16_and_fp8_are_raw_words(
    mixed_file: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(sys.modules, "ml_dtypes", None)  # import fails
    assert numpy_dtype("BF16") == np.dtype("<u2")
    assert numpy_dtype("F8_E4M3") == np.dtype("u1")
    archive = tmp_path / "m.brv"
    brevis.compress_file(mixed_file, archive, budget=0)
    with brevis.safe_open(archive, framework="np") as f:
        bf16 = f.get_tensor("bf16")
        assert bf16.dtype == np.dtype("<u2")
        assert bf16.ravel().tolist() == BF16_WORDS
        assert f.get_tensor("fp8").tobytes() == F8_BYTES


def test_metadata_missing_names_and_closed(mixed_file: Path, tmp_path: Path) -> None:
    archive = tmp_path / "m.brv"
    brevis.compress_file(mixed_file, archive, budget=0)
    f = brevis.safe_open(archive)
    with f:
        assert f.metadata() == {"format": "pt", "note": "hand-made"}
        with pytest.raises(KeyError):
            f.get_tensor("nope")
    with pytest.raises(ValueError, match="closed"):
        f.keys()
    with pytest.raises(ValueError, match="framework"):
        brevis.safe_open(archive, framework="jax")


def test_a_source_file_is_refused_with_its_kind(mixed_file: Path) -> None:
    with pytest.raises(brevis.SourceError) as info:
        brevis.safe_open(mixed_file)
    assert info.value.kind == "wrong_kind"


def test_torch_when_installed(mixed_file: Path, tmp_path: Path) -> None:
    torch = pytest.importorskip("torch")
    import brevis.torch

    archive = tmp_path / "m.brv"
    brevis.compress_file(mixed_file, archive, budget=0)
    tensors = brevis.torch.load_file(archive)
    assert tensors["bf16"].dtype == torch.bfloat16
    assert tensors["bf16"].view(torch.int16).flatten().tolist() == [
        w - 0x10000 if w >= 0x8000 else w for w in BF16_WORDS
    ]
    assert tensors["i64"].tolist() == [I64_VALUES[0:2], I64_VALUES[2:4], I64_VALUES[4:6]]
