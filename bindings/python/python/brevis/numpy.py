"""``brevis.numpy``: whole archives as dicts of numpy arrays, as ``safetensors.numpy``."""

from __future__ import annotations

import os
from typing import Any, Union

from . import safe_open


def load_file(filename: Union[str, "os.PathLike[str]"]) -> dict[str, Any]:
    """Every tensor of the archive ``filename`` as a numpy array, by name (file order).

    BF16 and FP8 tensors are ``ml_dtypes`` arrays when ml_dtypes is installed, else raw
    unsigned words of the same width."""
    with safe_open(filename, framework="numpy") as f:
        return {name: f.get_tensor(name) for name in f.keys()}
