"""Brevis from Python: lossless compression of ``.safetensors`` checkpoints.

The API follows the ``safetensors`` package::

    import brevis
    brevis.compress_file("model.safetensors", "model.brv")
    with brevis.safe_open("model.brv", framework="numpy") as f:
        for name in f.keys():
            array = f.get_tensor(name)        # one tensor decoded per call
    brevis.decompress_file("model.brv", "restored.safetensors")

``compress_file``, ``decompress_file`` and ``verify_file`` take a file or a checkpoint
folder, the CLI's options, and ``progress``, a callable ``progress(kind, shard, label,
bytes)`` (``kind`` is ``"begin"`` with the bytes to do, ``"item"`` with the bytes of one
region done, or ``"end"``; ``shard`` is the shard's path in a folder, else ``""``). They
return the report ``brevis COMMAND --json`` prints, as a dict, release the GIL while they
work, and install no signal handler. Warnings are ``BrevisWarning``; errors are
``BrevisError`` subclasses, which pickle.

Dtypes numpy has no type for (BF16, FP8) come back as ``ml_dtypes`` types when
``ml_dtypes`` is installed, else as raw unsigned words of the same width (``uint16`` for
BF16, ``uint8`` for FP8) holding the same bits.
"""

from __future__ import annotations

import json
import os
from typing import Any, Callable, Optional, Union

from . import _brevis
from ._brevis import Archive, compress_file, decompress_file, list_file, verify_file
from ._errors import (
    ArchiveError,
    BrevisError,
    BrevisIOError,
    BrevisWarning,
    ChecksumError,
    NoSuchTensorError,
    OutputExistsError,
    SourceError,
)

__all__ = [
    "Archive",
    "ArchiveError",
    "BrevisError",
    "BrevisIOError",
    "BrevisWarning",
    "ChecksumError",
    "NoSuchTensorError",
    "OutputExistsError",
    "SourceError",
    "compress_file",
    "decompress_file",
    "list_file",
    "safe_open",
    "verify_file",
]

PathLike = Union[str, "os.PathLike[str]"]
Progress = Callable[[str, str, Optional[str], int], Any]


class safe_open:
    """An archive opened for reading tensors one at a time, as ``safetensors.safe_open``.

    ``framework`` is ``"numpy"`` (``"np"``) or ``"pt"`` (``"torch"``, when torch is
    installed). Opening reads the archive's index only; ``get_tensor`` decodes that one
    tensor (checked against its stored checksum). ``filename`` may be an ``s3://`` URL:
    the archive is then read by ranged reads (the index when opened, one tensor's record
    per ``get_tensor``), the store configured from ``AWS_ENDPOINT_URL``,
    ``AWS_ACCESS_KEY_ID``, ``AWS_SECRET_ACCESS_KEY``, ``AWS_REGION``, ``AWS_ALLOW_HTTP``.
    ``base`` is the base checkpoint an archive made with ``compress_file(...,
    base=...)`` was coded against (a ``.safetensors`` file, a checkpoint folder, or an
    archive of it).
    """

    def __init__(
        self,
        filename: PathLike,
        framework: str = "numpy",
        device: str = "cpu",
        *,
        base: Optional[PathLike] = None,
    ) -> None:
        if framework in ("numpy", "np"):
            from ._dtypes import to_numpy as convert
        elif framework in ("pt", "torch"):
            from ._dtypes import to_torch as convert
        else:
            raise ValueError(f"framework must be 'numpy' or 'pt', not {framework!r}")
        if device != "cpu":
            raise ValueError(f"device must be 'cpu', not {device!r}")
        self._convert = convert
        self._archive: Optional[Archive] = Archive(
            os.fspath(filename), None if base is None else os.fspath(base)
        )

    @property
    def bytes_read(self) -> int:
        """Bytes fetched from the store so far (for an ``s3://`` archive)."""
        return self._open().bytes_read

    def __enter__(self) -> "safe_open":
        return self

    def __exit__(self, *exc: object) -> None:
        self._archive = None

    def _open(self) -> Archive:
        if self._archive is None:
            raise ValueError("the archive is closed")
        return self._archive

    def keys(self) -> list[str]:
        """The tensor names, in file order."""
        return self._open().keys()

    def metadata(self) -> Optional[dict[str, str]]:
        """The ``__metadata__`` of the original file's header, or ``None``."""
        header = json.loads(self._open().header_json())
        return header.get("__metadata__")

    def get_tensor(self, name: str) -> Any:
        """Tensor ``name`` as an array of its dtype and shape, decoded now.

        Raises ``KeyError`` if no tensor has that name, ``ChecksumError`` if its decoded
        bytes differ from the stored checksum."""
        archive = self._open()
        dtype, shape = archive.info(name)
        return self._convert(archive.decode_tensor(name), dtype, shape)
