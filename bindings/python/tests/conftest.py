"""Shared fixtures: the corpus folder and small hand-made .safetensors files."""

from __future__ import annotations

import json
import os
import struct
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[3]


def corpus_dir() -> Path:
    """The real checkpoints (`../shared/corpus` beside the repository, or
    $BREVIS_CORPUS)."""
    return Path(os.environ.get("BREVIS_CORPUS", REPO.parent / "shared" / "corpus"))


#: The corpus's .safetensors files (empty without a corpus).
CORPUS = sorted(corpus_dir().glob("*.safetensors"))


@pytest.fixture(scope="session")
def corpus_archives(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """Every corpus file compressed once per session (default settings, all cores), by
    the corpus file's name."""
    import brevis

    if not CORPUS:
        pytest.skip(f"no corpus at {corpus_dir()}")
    out = tmp_path_factory.mktemp("corpus-archives")
    made = {}
    for src in CORPUS:
        dst = out / (src.stem + ".brv")
        brevis.compress_file(src, dst, jobs=0)
        made[src.name] = dst
    return made


@pytest.fixture
def corpus_file() -> Path:
    path = corpus_dir() / "fracast0-f32.safetensors"
    if not path.exists():
        pytest.skip(f"corpus file {path} not present")
    return path


def write_safetensors(path: Path, tensors: dict, metadata: dict | None = None) -> None:
    """Writes a .safetensors file: `tensors` maps a name to (dtype, shape, raw bytes),
    laid out in that order."""
    header: dict = {}
    if metadata is not None:
        header["__metadata__"] = metadata
    data = b""
    for name, (dtype, shape, raw) in tensors.items():
        header[name] = {
            "dtype": dtype,
            "shape": list(shape),
            "data_offsets": [len(data), len(data) + len(raw)],
        }
        data += raw
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * (-len(text) % 8)
    path.write_bytes(struct.pack("<Q", len(text)) + text + data)


def read_safetensors(path: Path) -> tuple[dict, bytes]:
    """The header (dict) and data region of a .safetensors file."""
    raw = path.read_bytes()
    (n,) = struct.unpack("<Q", raw[:8])
    return json.loads(raw[8 : 8 + n]), raw[8 + n :]


# Words chosen by hand: signed zeros, a NaN payload, subnormals, the extremes.
BF16_WORDS = [0x0000, 0x8000, 0x3F80, 0xBF80, 0x7FC1, 0x0001, 0x7F7F, 0xFF80]
F8_BYTES = bytes([0x00, 0x80, 0x38, 0x7F, 0xFF, 0x01])
I64_VALUES = [0, -1, 2**63 - 1, -(2**63), 42, 7]


@pytest.fixture
def mixed_file(tmp_path: Path) -> Path:
    path = tmp_path / "mixed.safetensors"
    write_safetensors(
        path,
        {
            "bf16": ("BF16", [2, 4], struct.pack("<8H", *BF16_WORDS)),
            "fp8": ("F8_E4M3", [6], F8_BYTES),
            "i64": ("I64", [3, 2], struct.pack("<6q", *I64_VALUES)),
            "mask": ("BOOL", [3], bytes([1, 0, 1])),
            "empty": ("F32", [0, 3], b""),
            "f32": ("F32", [2], struct.pack("<2f", -0.0, 1.5)),
        },
        metadata={"format": "pt", "note": "hand-made"},
    )
    return path
