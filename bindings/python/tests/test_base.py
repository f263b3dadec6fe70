"""Archives coded against a base checkpoint (``base=``), from Python."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import brevis
from conftest import read_safetensors, write_safetensors


def _fine_tune(base: Path, out: Path) -> None:
    """`base` with every F32 weight's lowest mantissa bit flipped in its first tensor
    (a small dense change), the rest identical."""
    header, data = read_safetensors(base)
    tensors = {}
    first = True
    for name, info in header.items():
        if name == "__metadata__":
            continue
        b, e = info["data_offsets"]
        raw = data[b:e]
        if first and info["dtype"] == "F32":
            words = np.frombuffer(raw, dtype="<u4") ^ np.uint32(1)
            raw = words.tobytes()
            first = False
        tensors[name] = (info["dtype"], info["shape"], raw)
    write_safetensors(out, tensors)


def test_a_fine_tune_round_trips_with_its_base(corpus_file: Path, tmp_path: Path) -> None:
    ft = tmp_path / "ft.safetensors"
    _fine_tune(corpus_file, ft)
    alone = brevis.compress_file(ft, tmp_path / "alone.brv")
    report = brevis.compress_file(ft, tmp_path / "ft.brv", base=corpus_file)
    assert report["archive_bytes"] < alone["archive_bytes"] // 4
    out = tmp_path / "restored.safetensors"
    brevis.decompress_file(tmp_path / "ft.brv", out, base=corpus_file)
    assert out.read_bytes() == ft.read_bytes()
    assert brevis.verify_file(tmp_path / "ft.brv", base=corpus_file)["ok"] is True
    with brevis.safe_open(tmp_path / "ft.brv", base=corpus_file) as f:
        header, data = read_safetensors(ft)
        for name in f.keys():
            b, e = header[name]["data_offsets"]
            assert f.get_tensor(name).tobytes() == data[b:e]


def test_a_missing_or_wrong_base_is_a_typed_error(corpus_file: Path, tmp_path: Path) -> None:
    ft = tmp_path / "ft.safetensors"
    _fine_tune(corpus_file, ft)
    brevis.compress_file(ft, tmp_path / "ft.brv", base=corpus_file)
    out = tmp_path / "restored.safetensors"
    with pytest.raises(brevis.BrevisError) as info:
        brevis.decompress_file(tmp_path / "ft.brv", out)
    assert info.value.kind == "base_missing"
    assert "--base" in str(info.value)
    with pytest.raises(brevis.BrevisError) as info:
        brevis.decompress_file(tmp_path / "ft.brv", out, base=ft)
    assert info.value.kind == "wrong_base"
    assert not out.exists()
