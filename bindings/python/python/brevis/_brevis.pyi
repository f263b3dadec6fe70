"""Type stubs of the native module ``brevis._brevis``."""

import os
from typing import Any, Callable, Optional, Union

_Path = Union[str, os.PathLike[str]]
_Progress = Callable[[str, str, Optional[str], int], Any]

__version__: str

class Archive:
    """An opened ``.brv`` archive; tensors are decoded one per call. A name it does not
    hold raises ``NoSuchTensorError`` (a ``KeyError``)."""

    def __init__(self, path: _Path, base: Optional[_Path] = None) -> None:
        """A local archive, or an ``s3://`` URL read by ranged reads."""
    @staticmethod
    def from_bytes(data: bytes, base: Optional[_Path] = None) -> Archive:
        """An archive held in memory (the bytes of a whole ``.brv`` file, copied)."""
    @property
    def bytes_read(self) -> int:
        """Bytes fetched from the store so far (an ``s3://`` archive); else its length."""
    @property
    def bytes_decoded(self) -> int:
        """Bytes of the original decoded so far: a whole tensor (its group) per
        ``decode_tensor``, the regions decoded per ``decode_range``."""
    def keys(self) -> list[str]:
        """The tensor names, in the order of the original file's header."""
    def info(self, name: str) -> tuple[str, list[int]]:
        """The safetensors dtype name and shape of tensor ``name``."""
    def offsets(self, name: str) -> tuple[int, int]:
        """The tensor's ``data_offsets`` in the original file, in bytes."""
    def header_json(self) -> str: ...
    def decode_tensor(self, name: str) -> bytearray:
        """The tensor's original little-endian bytes, checked against its checksum."""
    def decode_range(self, name: str, begin: int, end: int) -> tuple[bytearray, bool]:
        """Bytes ``begin..end`` of the tensor, decoding only the regions they lie in;
        and whether they were checked (the whole tensor decoded against its checksum)."""
    @property
    def original_bytes(self) -> int: ...
    @property
    def archive_bytes(self) -> int: ...
    @property
    def version(self) -> int: ...
    @property
    def path(self) -> str: ...
    def __len__(self) -> int: ...

def compress_file(
    src: _Path,
    dst: Optional[_Path] = None,
    *,
    budget: Optional[int] = None,
    max_depth: Optional[int] = None,
    max_nodes: Optional[int] = None,
    jobs: Optional[int] = None,
    force: bool = False,
    verify: bool = True,
    prior: Optional[_Path] = None,
    uniform: bool = False,
    progress: Optional[_Progress] = None,
    base: Optional[_Path] = None,
) -> dict[str, Any]: ...
def compress_bytes(
    data: bytes,
    dst: Optional[_Path] = None,
    *,
    budget: Optional[int] = None,
    max_depth: Optional[int] = None,
    max_nodes: Optional[int] = None,
    jobs: Optional[int] = None,
    force: bool = False,
    verify: bool = True,
    prior: Optional[_Path] = None,
    uniform: bool = False,
    progress: Optional[_Progress] = None,
    base: Optional[_Path] = None,
) -> Any:
    """The whole ``.safetensors`` file ``data`` compressed as ``brevis compress -`` does:
    into the archive ``dst`` (the report dict returned), or with ``dst`` None into archive
    bytes (returned)."""
def decompress_file(
    src: _Path,
    dst: Optional[_Path] = None,
    *,
    jobs: Optional[int] = None,
    force: bool = False,
    progress: Optional[_Progress] = None,
    base: Optional[_Path] = None,
) -> dict[str, Any]: ...
def verify_file(
    src: _Path,
    against: Optional[_Path] = None,
    *,
    jobs: Optional[int] = None,
    progress: Optional[_Progress] = None,
    base: Optional[_Path] = None,
) -> dict[str, Any]: ...
def list_file(src: _Path) -> dict[str, Any]: ...
def folder_entry(src: _Path, rel: str) -> dict[str, Any]:
    """The ``brevis-folder.json`` entry of the local file ``src`` at path ``rel``."""
def folder_manifest(entries: str) -> bytes:
    """The manifest (as ``brevis compress DIR`` writes it) of the JSON list ``entries``."""
def store_download(url: str, dst: _Path) -> int: ...
def store_upload(src: _Path, url: str) -> int: ...
def store_read(url: str) -> bytes: ...
def store_write(url: str, data: bytes, *, create: bool = False) -> None:
    """With ``create``, only if nothing is there (``OutputExistsError`` otherwise)."""
def store_size(url: str) -> Optional[int]: ...
def store_list(url: str) -> list[tuple[str, int]]: ...
def store_delete(url: str) -> None: ...
