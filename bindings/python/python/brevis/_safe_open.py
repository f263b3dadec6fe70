"""``safe_open``: an archive read tensor by tensor, as ``safetensors.safe_open``."""

from __future__ import annotations

import json
import operator
import os
from typing import Any, Callable, Optional, Union

from ._brevis import Archive
from ._dtypes import ITEM_BYTES

PathLike = Union[str, "os.PathLike[str]"]

#: The frameworks ``safe_open`` returns tensors for: name -> (module, pip package).
FRAMEWORKS = {"numpy": ("numpy", "numpy"), "np": ("numpy", "numpy"), "pt": ("torch", "torch"),
              "torch": ("torch", "torch")}


def converter(framework: str) -> Callable[[bytearray, str, list[int]], Any]:
    """The function that makes a tensor of ``framework`` from decoded bytes, once the
    framework's package is found importable. Raises ``ValueError`` for a framework Brevis
    does not support and ``ModuleNotFoundError``, naming the package to install, when its
    package is not installed (``safetensors`` raises it only at the first tensor)."""
    if framework not in FRAMEWORKS:
        raise ValueError(f"framework must be 'numpy' ('np') or 'pt' ('torch'), not {framework!r}")
    module, package = FRAMEWORKS[framework]
    try:
        __import__(module)
    except ImportError as e:
        raise ModuleNotFoundError(
            f"framework {framework!r} needs {module}, which is not installed: pip install {package}",
            name=module,
        ) from e
    from ._dtypes import to_numpy, to_torch

    return to_numpy if module == "numpy" else to_torch


class safe_open:
    """An archive opened for reading tensors one at a time, as ``safetensors.safe_open``.

    ``framework`` is ``"numpy"`` (``"np"``) or ``"pt"`` (``"torch"``); its package is
    imported when the archive is opened (``ModuleNotFoundError`` naming what to ``pip
    install`` if it is missing). Opening reads the archive's index only; ``get_tensor``
    decodes that one tensor (checked against its stored checksum) and ``get_slice`` the
    regions of it that an index needs. ``filename`` may be an ``s3://`` URL: the archive
    is then read by ranged reads (the index when opened, one tensor's record per
    ``get_tensor``), the store configured from ``AWS_ENDPOINT_URL``,
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
        convert = converter(framework)
        if device != "cpu":
            raise ValueError(f"device must be 'cpu', not {device!r}")
        self._convert = convert
        self._archive: Optional[Archive] = Archive(
            os.fspath(filename), None if base is None else os.fspath(base)
        )

    @classmethod
    def _of(cls, archive: Archive, framework: str) -> "safe_open":
        self = cls.__new__(cls)
        self._convert = converter(framework)
        self._archive = archive
        return self

    @property
    def bytes_read(self) -> int:
        """Bytes fetched from the store so far (for an ``s3://`` archive)."""
        return self._open().bytes_read

    @property
    def bytes_decoded(self) -> int:
        """Bytes of tensors decoded so far (``get_slice`` counts only the regions it
        decoded)."""
        return self._open().bytes_decoded

    def __enter__(self) -> "safe_open":
        return self

    def __exit__(self, *exc: object) -> None:
        self._archive = None

    def _open(self) -> Archive:
        if self._archive is None:
            raise ValueError("the archive is closed")
        return self._archive

    def keys(self) -> list[str]:
        """The tensor names, sorted (as ``safetensors`` lists them)."""
        return sorted(self._open().keys())

    def offset_keys(self) -> list[str]:
        """The tensor names in the order of their bytes in the original file (by the
        start of their ``data_offsets``; names break ties)."""
        archive = self._open()
        return sorted(archive.keys(), key=lambda n: (archive.offsets(n)[0], n))

    def metadata(self) -> Optional[dict[str, str]]:
        """The ``__metadata__`` of the original file's header, or ``None``."""
        header = json.loads(self._open().header_json())
        return header.get("__metadata__")

    def get_tensor(self, name: str) -> Any:
        """Tensor ``name`` as an array of its dtype and shape, decoded now.

        Raises ``NoSuchTensorError`` (a ``KeyError``) if no tensor has that name,
        ``ChecksumError`` if its decoded bytes differ from the stored checksum."""
        archive = self._open()
        dtype, shape = archive.info(name)
        return self._convert(archive.decode_tensor(name), dtype, shape)

    def get_tensors(self) -> dict[str, Any]:
        """Every tensor, by name, in the order of ``offset_keys``."""
        return {name: self.get_tensor(name) for name in self.offset_keys()}

    def get_slice(self, name: str) -> "TensorSlice":
        """A view of tensor ``name`` to index (``f.get_slice("w")[0:128]``), decoding only
        what the index needs: for a tensor stored as regions (more than 1 Mi words),
        the regions holding the rows of its first axis that the index selects.

        Raises ``NoSuchTensorError`` (a ``KeyError``) if no tensor has that name."""
        archive = self._open()
        dtype, shape = archive.info(name)
        return TensorSlice(archive, name, dtype, list(shape), self._convert)


class TensorSlice:
    """Tensor ``name`` of an archive, not decoded yet: ``get_shape()``, ``get_dtype()``
    and indexing with ``[...]``, as the slice objects of ``safetensors``.

    An index is a tuple of ints (negative ones count from the end), slices with a
    positive step, and at most one ``...``, no longer than the shape; the result is a
    new array (or tensor) of the framework. Refused as ``safetensors`` refuses them:
    an int out of range and more indices than dimensions (``IndexError``), a step below
    1, two ``...``, non-empty lists, arrays and ``None`` (``ValueError``); an empty list
    as the whole index selects no row, as there. Where ``safetensors``
    0.8 fails on a slice that numpy takes (negative bounds, a stop past the end, an
    empty range), Brevis gives numpy's result.
    """

    def __init__(self, archive: Archive, name: str, dtype: str, shape: list[int],
                 convert: Callable[[bytearray, str, list[int]], Any]) -> None:
        self._archive = archive
        self._name = name
        self._dtype = dtype
        self._shape = shape
        self._convert = convert

    def get_shape(self) -> list[int]:
        """The tensor's shape."""
        return list(self._shape)

    def get_dtype(self) -> str:
        """The tensor's safetensors dtype name (``"F32"``, ``"BF16"``, ...)."""
        return self._dtype

    def __repr__(self) -> str:
        return f"TensorSlice({self._name!r}, {self._dtype}, {self._shape})"

    def _index(self, index: Any) -> list[Any]:
        """``index`` as one int or slice (with concrete bounds) per dimension."""
        if isinstance(index, list) and not index:
            # An empty list selects no row, as in numpy (and safetensors).
            index = slice(0, 0)
        items = list(index) if isinstance(index, tuple) else [index]
        # By identity: `in` and `index()` compare with ==, which an array index answers
        # element by element.
        ellipses = [at for at, i in enumerate(items) if i is Ellipsis]
        if len(ellipses) > 1:
            raise ValueError("only one ellipsis (...) is allowed in a slice index")
        ndim = len(self._shape)
        if ellipses:
            at = ellipses[0]
            fill = ndim - (len(items) - 1)
            items[at:at + 1] = [slice(None)] * max(fill, 0)
        if len(items) > ndim:
            raise IndexError(
                f"{len(items)} indices for tensor {self._name!r} of shape {self._shape}: "
                "more slicing indexes than dimensions"
            )
        out: list[Any] = []
        for axis, (item, dim) in enumerate(zip(items, self._shape)):
            if isinstance(item, slice):
                step = 1 if item.step is None else operator.index(item.step)
                if step < 1:
                    raise ValueError(f"slice step must be a positive integer, got {step}")
                start, stop, _ = slice(item.start, item.stop, step).indices(dim)
                out.append(slice(start, max(stop, start), step))
                continue
            try:
                i = operator.index(item)
            except TypeError:
                raise ValueError(
                    f"unsupported index {item!r} at position {axis}: expected an int, a "
                    "slice or ..."
                ) from None
            if not -dim <= i < dim:
                raise IndexError(
                    f"index {i} out of range for dimension {axis} of size {dim} of tensor "
                    f"{self._name!r}"
                )
            out.append(i + dim if i < 0 else i)
        return out + [slice(0, d, 1) for d in self._shape[len(out):]]

    def __getitem__(self, index: Any) -> Any:
        idx = self._index(index)
        shape = self._shape
        if not shape or self._dtype not in ITEM_BYTES:
            # A scalar, or a dtype read as raw bytes: whole.
            data = self._archive.decode_tensor(self._name)
            return _copy(self._convert(data, self._dtype, shape)[tuple(idx)])
        row = ITEM_BYTES[self._dtype]
        for d in shape[1:]:
            row *= d
        first = idx[0]
        if isinstance(first, int):
            lo, hi, local = first, first + 1, 0
        else:
            count = len(range(first.start, first.stop, first.step))
            lo = first.start if count else 0
            hi = first.start + first.step * (count - 1) + 1 if count else 0
            local = slice(0, hi - lo, first.step)
        data, _checked = self._archive.decode_range(self._name, lo * row, hi * row)
        part = self._convert(data, self._dtype, [hi - lo] + list(shape[1:]))
        return _copy(part[tuple([local] + idx[1:])])


def _copy(x: Any) -> Any:
    """``x`` (a numpy array or scalar, or a torch tensor) as a new array or tensor of its
    own memory, a 0-d array for a numpy scalar."""
    if hasattr(x, "clone"):
        return x.clone()
    import numpy as np

    return np.array(x, copy=True)
