"""``brevis.torch``: archives as dicts of torch tensors, as ``safetensors.torch``
(needs torch).

``save_file`` and ``save`` compress a dict of tensors in memory, with the CLI's options as
keywords, as ``brevis.numpy``'s do; ``save_file`` replaces an existing file only with
``force=True``. Refused as ``safetensors.torch`` refuses them: tensors that share memory
(``RuntimeError``), sparse or non-contiguous tensors (``ValueError``).
"""

import os as _os
from typing import Any as _Any, Optional as _Optional, Union as _Union

from . import _brevis
from ._dtypes import serialize as _serialize, torch_code as _torch_code
from ._safe_open import safe_open

__all__ = ["load", "load_file", "save", "save_file"]

_PathLike = _Union[str, "_os.PathLike[str]"]


def _file_bytes(tensors: dict, metadata: _Optional[dict]) -> bytes:
    import torch

    if not isinstance(tensors, dict):
        raise ValueError(f"Expected a dict of [str, torch.Tensor] but received {type(tensors)}")
    sparse = []
    for name, t in tensors.items():
        if not isinstance(t, torch.Tensor):
            raise ValueError(f"Key `{name}` is invalid, expected torch.Tensor but received {type(t)}")
        if t.layout != torch.strided:
            sparse.append(name)
    if sparse:
        raise ValueError(
            f"You are trying to save a sparse tensors: `{sparse}` which this library does not "
            "support. You can make it a dense tensor before saving with `.to_dense()`"
        )
    # Tensors whose bytes overlap in one storage, as safetensors.torch finds them.
    by_storage: dict = {}
    for name, t in tensors.items():
        if t.device.type == "meta" or t.untyped_storage().nbytes() == 0:
            continue
        key = (t.device, t.untyped_storage().data_ptr())
        start = t.data_ptr()
        end = start + t.numel() * t.element_size()
        by_storage.setdefault(key, []).append((start, end, name))
    failing = []
    for areas in by_storage.values():
        areas.sort()
        group, last_end = [areas[0][2]], areas[0][1]
        for start, end, name in areas[1:]:
            if start < last_end:
                group.append(name)
            else:
                if len(group) > 1:
                    failing.append(set(group))
                group = [name]
            last_end = max(last_end, end)
        if len(group) > 1:
            failing.append(set(group))
    if failing:
        raise RuntimeError(
            f"Some tensors share memory, this will lead to duplicate memory on disk and "
            f"potential differences when loading them again: {failing}. Save a copy "
            "(.clone()) of all but one of each, or only the full tensors."
        )
    parts = []
    for name, t in tensors.items():
        if not t.is_contiguous():
            raise ValueError(
                f"You are trying to save a non contiguous tensor: `{name}` which is not "
                "allowed. Call `.contiguous()` on it before saving."
            )
        code = _torch_code(t.dtype)
        flat = t.detach().cpu().reshape(-1)
        data = flat.view(torch.uint8).numpy().tobytes() if flat.numel() else b""
        parts.append((name, code, list(t.shape), data))
    return _serialize(parts, metadata)


def save(tensors: dict, metadata: _Optional[dict] = None, **options: _Any) -> bytes:
    """The archive (``.brv`` bytes) of ``tensors``; ``options`` are ``compress_file``'s."""
    return _brevis.compress_bytes(_file_bytes(tensors, metadata), None, **options)


def save_file(tensors: dict, filename: _PathLike, metadata: _Optional[dict] = None,
              **options: _Any) -> dict:
    """Compresses ``tensors`` into the archive ``filename``; returns the report ``brevis
    compress --json`` prints, as a dict."""
    return _brevis.compress_bytes(_file_bytes(tensors, metadata), _os.fspath(filename), **options)


def load_file(filename: _PathLike, device: str = "cpu") -> dict:
    """Every tensor of the archive ``filename`` as a torch tensor, by name (in the order
    of the original file's data)."""
    with safe_open(filename, framework="pt") as f:
        out = f.get_tensors()
    if device != "cpu":
        out = {k: v.to(device) for k, v in out.items()}
    return out


def load(data: bytes) -> dict:
    """Every tensor of the archive ``data`` (the bytes of a ``.brv`` file)."""
    return safe_open._of(_brevis.Archive.from_bytes(bytes(data)), "pt").get_tensors()
