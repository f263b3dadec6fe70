"""Brevis from Python: lossless compression of ``.safetensors`` checkpoints.

The reading API is the ``safetensors`` package's::

    import brevis
    brevis.compress_file("model.safetensors", "model.brv")
    with brevis.safe_open("model.brv", framework="numpy") as f:
        for name in f.keys():
            array = f.get_tensor(name)        # one tensor decoded per call
        rows = f.get_slice(name)[0:128]       # only the regions those rows lie in
    brevis.decompress_file("model.brv", "restored.safetensors")

``brevis.numpy`` and ``brevis.torch`` have ``load_file``, ``load`` (archive bytes),
``save_file`` and ``save`` (a dict of arrays compressed in memory, the CLI's options as
keywords).

``compress_file``, ``decompress_file`` and ``verify_file`` take a file or a checkpoint
folder, the CLI's options, and ``progress``, a callable ``progress(kind, shard, label,
bytes)`` (``kind`` is ``"begin"`` with the bytes to do, ``"item"`` with the bytes of one
region done, or ``"end"``; ``shard`` is the shard's path in a folder, else ``""``). They
return the report ``brevis COMMAND --json`` prints, as a dict, release the GIL while they
work, and install no signal handler. Warnings are ``BrevisWarning``; errors are
``BrevisError`` subclasses, which pickle (``NoSuchTensorError`` is a ``KeyError`` too).

Dtypes numpy has no type for (BF16, FP8) come back as ``ml_dtypes`` types when
``ml_dtypes`` is installed, else as raw unsigned words of the same width (``uint16`` for
BF16, ``uint8`` for FP8) holding the same bits.
"""

from ._brevis import (
    Archive,
    __version__,
    compress_file,
    decompress_file,
    list_file,
    verify_file,
)
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
from ._safe_open import TensorSlice, safe_open

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
    "TensorSlice",
    "__version__",
    "compress_file",
    "decompress_file",
    "list_file",
    "safe_open",
    "verify_file",
]
