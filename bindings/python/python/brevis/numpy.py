"""``brevis.numpy``: archives as dicts of numpy arrays, as ``safetensors.numpy``.

``save_file`` and ``save`` compress a dict of arrays in memory (no ``.safetensors`` file
is written): the archive restores exactly the file ``safetensors.numpy.save`` would make
of the dict (tensors laid out by dtype, then name). They take the CLI's options as
keywords (``level``, ``budget``, ``max_depth``, ``max_nodes``, ``jobs``, ``force``, ``verify``,
``prior``, ``uniform``, ``progress``, ``base``); ``save_file`` writes as ``brevis
compress`` does: to a temporary file beside ``filename``, renamed into place when
complete, and an existing ``filename`` is replaced only with ``force=True``
(``OutputExistsError`` otherwise; ``safetensors`` overwrites).

Differences from ``safetensors.numpy``, on purpose: an array that is not C-contiguous
(a transposed or strided view) is refused with ``ValueError``, as ``safetensors.torch``
refuses a non-contiguous tensor (``safetensors.numpy`` 0.8 writes the view's underlying
memory instead, which restores other values); call ``np.ascontiguousarray`` first.
Arrays that share memory are saved, as ``safetensors.numpy`` saves them (an identical
tensor costs the archive a few bytes).
"""

import os as _os
from typing import Any as _Any, Optional as _Optional, Union as _Union

from . import _brevis
from ._dtypes import numpy_code as _numpy_code, serialize as _serialize
from ._safe_open import safe_open

__all__ = ["load", "load_file", "save", "save_file"]

_PathLike = _Union[str, "_os.PathLike[str]"]


def _file_bytes(tensor_dict: dict, metadata: _Optional[dict]) -> bytes:
    """The ``.safetensors`` file of ``tensor_dict``, as ``safetensors.numpy.save``
    lays it out."""
    import numpy as np

    if not isinstance(tensor_dict, dict):
        raise ValueError(f"expected a dict of str to numpy.ndarray, not {type(tensor_dict)}")
    parts = []
    for name, arr in tensor_dict.items():
        if not isinstance(name, str):
            raise TypeError(f"tensor names must be str, not {type(name)} ({name!r})")
        if not isinstance(arr, np.ndarray):
            raise ValueError(f"tensor {name!r}: expected a numpy.ndarray, not {type(arr)}")
        if not arr.flags.c_contiguous:
            raise ValueError(
                f"tensor {name!r} is not C-contiguous (a transposed or strided view): "
                "save np.ascontiguousarray(it) instead"
            )
        code = _numpy_code(arr.dtype)
        if arr.dtype.byteorder == ">":
            arr = arr.astype(arr.dtype.newbyteorder("<"))
        parts.append((name, code, list(arr.shape), arr.tobytes()))
    return _serialize(parts, metadata)


def save(tensor_dict: dict, metadata: _Optional[dict] = None, **options: _Any) -> bytes:
    """The archive (``.brv`` bytes) of ``tensor_dict``, a dict of str to numpy arrays,
    with ``metadata`` (str to str) as the header's ``__metadata__``; ``options`` are
    ``compress_file``'s."""
    return _brevis.compress_bytes(_file_bytes(tensor_dict, metadata), None, **options)


def save_file(tensor_dict: dict, filename: _PathLike, metadata: _Optional[dict] = None,
              **options: _Any) -> dict:
    """Compresses ``tensor_dict`` into the archive ``filename``; returns the report
    ``brevis compress --json`` prints, as a dict."""
    return _brevis.compress_bytes(
        _file_bytes(tensor_dict, metadata), _os.fspath(filename), **options
    )


def load_file(filename: _PathLike) -> dict:
    """Every tensor of the archive ``filename`` as a numpy array, by name (in the order
    of the original file's data, as ``safetensors.numpy.load_file``)."""
    with safe_open(filename, framework="numpy") as f:
        return f.get_tensors()


def load(data: bytes) -> dict:
    """Every tensor of the archive ``data`` (the bytes of a ``.brv`` file)."""
    return safe_open._of(_brevis.Archive.from_bytes(bytes(data)), "numpy").get_tensors()
