"""``brevis.torch``: whole archives as dicts of torch tensors (needs torch)."""

from __future__ import annotations

import os
from typing import Any, Union

from . import safe_open


def load_file(filename: Union[str, "os.PathLike[str]"], device: str = "cpu") -> dict[str, Any]:
    """Every tensor of the archive ``filename`` as a torch tensor, by name (file order)."""
    with safe_open(filename, framework="pt") as f:
        out = {name: f.get_tensor(name) for name in f.keys()}
    if device != "cpu":
        out = {k: v.to(device) for k, v in out.items()}
    return out
