"""The exceptions and warning of brevis.

Every error the library raises is a ``BrevisError`` with the message the CLI prints and a
stable ``kind`` (the ``kind`` of ``brevis --json`` failure objects: ``io``,
``invalid_source``, ``damaged_archive``, ``checksum_mismatch``, ``output_exists``, ...).
They are plain Python classes whose arguments are ``(message, kind)``, so they pickle
and cross process boundaries (Ray, Dask, multiprocessing) unchanged.
"""

from __future__ import annotations


class BrevisError(Exception):
    """An error of the Brevis library: ``message`` says what, naming the file; ``kind``
    is its stable kind."""

    def __init__(self, message: str, kind: str = "other") -> None:
        super().__init__(message, kind)
        self.message = message
        self.kind = kind

    def __str__(self) -> str:
        return self.message


class BrevisIOError(BrevisError):
    """A file cannot be read or written (kind ``io``)."""


class SourceError(BrevisError):
    """The input is not a valid ``.safetensors`` file, or is of another kind than the call
    takes (kinds ``invalid_source``, ``wrong_kind``)."""


class ArchiveError(BrevisError):
    """The archive is not one, is damaged or cut short, or a program cannot be decoded."""


class ChecksumError(BrevisError):
    """Decoded bytes differ from the checksum stored when the archive was written, or a
    record of an archive that opened is damaged."""


class OutputExistsError(BrevisError):
    """The output exists and ``force`` was not given, or it is the input."""


class NoSuchTensorError(BrevisError, KeyError):
    """No tensor of that name."""

    def __str__(self) -> str:  # KeyError's own would quote the message
        return self.message


class BrevisWarning(UserWarning):
    """Something unusual that the job went on through (bytes no tensor owns, a stale
    temporary file, a damaged record whose data is intact)."""
