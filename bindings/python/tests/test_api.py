"""The rest of the drop-in: partial decoding of get_slice, saving from memory, the
framework checked at open, the package's namespace, and messages that say what to do."""

from __future__ import annotations

import importlib.metadata
import struct
import sys
from pathlib import Path

import numpy as np
import pytest

import brevis
import brevis.cluster
import brevis.numpy
from conftest import BF16_WORDS, read_safetensors


def test_get_slice_of_rows_decodes_only_their_regions(corpus_archives: dict[str, Path]) -> None:
    path = corpus_archives.get("minilm-l6-v2-bf16.safetensors")
    if path is None:
        pytest.skip("minilm-l6-v2-bf16 not in the corpus")
    name = "embeddings.word_embeddings.weight"  # [30522, 384] BF16: 12 regions
    listing = brevis.list_file(path)
    entry = next(t for t in listing["tensors"] if t["name"] == name)
    assert entry["root_op"] == "concat"
    whole = entry["original_bytes"]
    assert whole == 30522 * 384 * 2
    with brevis.safe_open(path, framework="np") as f:
        s = f.get_slice(name)
        before = f.bytes_decoded
        rows = s[0:128]
        part = f.bytes_decoded - before
        # One region of whole rows (2688 rows of 768 bytes), not the 23 MB tensor.
        assert part == 2688 * 384 * 2 == 2_064_384
        assert part * 10 < whole
        # The last rows: the last region only (30522 - 11 * 2688 = 954 rows).
        before = f.bytes_decoded
        tail = s[-3:]
        assert f.bytes_decoded - before == 954 * 384 * 2
        full = f.get_tensor(name)
        assert f.bytes_decoded - before - 954 * 384 * 2 == whole
        assert rows.tobytes() == full[0:128].tobytes()
        assert tail.tobytes() == full[-3:].tobytes()
        # Rows across a region boundary: both regions.
        before = f.bytes_decoded
        across = s[2680:2700:3]
        assert f.bytes_decoded - before == 2 * 2_064_384
        assert across.tobytes() == full[2680:2700:3].tobytes()


def test_save_and_load_in_memory_round_trip_every_dtype(tmp_path: Path) -> None:
    ml_dtypes = pytest.importorskip("ml_dtypes")
    tensors = {
        "bf16": np.array(BF16_WORDS, dtype="<u2").view(ml_dtypes.bfloat16).reshape(2, 4),
        "fp8": np.frombuffer(bytes([0, 0x80, 0x38, 0x7F]), dtype=ml_dtypes.float8_e4m3fn),
        "i64": np.array([[0, -1], [2**63 - 1, -(2**63)]], dtype=np.int64),
        "big_endian": np.array([1.5, -0.0], dtype=">f4"),
        "mask": np.array([True, False, True]),
        "empty": np.zeros((0, 3), dtype=np.float32),
        "scalar": np.array(7, dtype=np.int16),
        "c64": np.array([1 + 2j], dtype=np.complex64),
    }
    data = brevis.numpy.save(tensors, metadata={"format": "np"}, budget=0)
    assert isinstance(data, bytes)
    back = brevis.numpy.load(data)
    assert sorted(back) == sorted(tensors)
    for name, t in tensors.items():
        want = t.astype(t.dtype.newbyteorder("<")) if t.dtype.byteorder == ">" else t
        assert back[name].dtype == want.dtype, name
        assert back[name].shape == want.shape, name
        assert back[name].tobytes() == want.tobytes(), name
    # The archive restores the file laid out as safetensors lays it out: by dtype
    # (widest first), then name.
    out = tmp_path / "t.brv"
    report = brevis.numpy.save_file(tensors, out, metadata={"format": "np"}, budget=0)
    assert report["ok"] is True and report["output"] == str(out)
    restored = tmp_path / "t.safetensors"
    brevis.decompress_file(out, restored)
    header, _ = read_safetensors(restored)
    assert list(header) == ["__metadata__", "i64", "c64", "big_endian", "empty", "bf16",
                            "scalar", "fp8", "mask"]
    assert brevis.Archive.from_bytes(data).original_bytes == restored.stat().st_size


def test_save_file_writes_as_the_cli_does(tmp_path: Path) -> None:
    out = tmp_path / "w.brv"
    tensors = {"w": np.arange(12, dtype=np.float32).reshape(3, 4)}
    brevis.numpy.save_file(tensors, out)
    before = out.read_bytes()
    # An existing archive is replaced only with force (the CLI's --force), and a failed
    # save leaves it and no temporary behind.
    with pytest.raises(brevis.OutputExistsError) as info:
        brevis.numpy.save_file({"w": np.zeros(2, np.float32)}, out)
    # What to do, as the CLI says --force.
    assert str(info.value) == f"{out}: already exists (pass force=True to replace it)"
    assert info.value.kind == "output_exists"
    assert out.read_bytes() == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["w.brv"]
    brevis.numpy.save_file({"w": np.zeros(2, np.float32)}, out, force=True)
    assert brevis.numpy.load_file(out)["w"].tolist() == [0.0, 0.0]
    with pytest.raises(ValueError, match="jobs must be 0"):
        brevis.numpy.save_file(tensors, tmp_path / "x.brv", jobs=1000)


def test_save_refuses_what_safetensors_refuses(tmp_path: Path) -> None:
    a = np.arange(12, dtype=np.float32).reshape(3, 4)
    with pytest.raises(ValueError, match="not C-contiguous"):
        brevis.numpy.save({"t": a.T})
    with pytest.raises(ValueError, match="not C-contiguous"):
        brevis.numpy.save({"t": a[:, ::2]})
    with pytest.raises(ValueError, match="expected a dict"):
        brevis.numpy.save([a])
    with pytest.raises(ValueError, match="expected a numpy.ndarray"):
        brevis.numpy.save({"t": [1.0, 2.0]})
    with pytest.raises(ValueError, match="no safetensors dtype"):
        brevis.numpy.save({"t": np.array(["x"])})
    with pytest.raises(TypeError, match="metadata"):
        brevis.numpy.save({"t": a}, metadata={"k": 1})
    # Arrays that share memory are saved, as safetensors.numpy saves them.
    back = brevis.numpy.load(brevis.numpy.save({"x": a, "y": a}))
    assert back["x"].tobytes() == back["y"].tobytes() == a.tobytes()


def test_the_framework_is_checked_when_opened(
    mixed_file: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    archive = tmp_path / "m.brv"
    brevis.compress_file(mixed_file, archive, budget=0)
    monkeypatch.setitem(sys.modules, "torch", None)  # import fails
    with pytest.raises(ModuleNotFoundError, match="framework 'pt' needs torch, which is not "
                       "installed: pip install torch"):
        brevis.safe_open(archive, framework="pt")
    with pytest.raises(ValueError, match="framework must be"):
        brevis.safe_open(archive, framework="tf")


def test_version_and_a_clean_namespace() -> None:
    assert brevis.__version__ == importlib.metadata.version("brevis")
    names = set(dir(brevis))
    assert not names & {"os", "json", "Any", "Optional", "Union", "Callable", "annotations",
                        "PathLike", "Progress"}, names
    assert set(brevis.__all__) <= names
    assert issubclass(brevis.NoSuchTensorError, KeyError)
    assert issubclass(brevis.NoSuchTensorError, brevis.BrevisError)


@pytest.mark.parametrize("engine,install", [("ray", "pip install ray"),
                                            ("dask", "pip install 'dask[distributed]'")])
def test_a_missing_engine_names_the_pip_install(
    engine: str, install: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    for module in ("ray", "dask", "dask.distributed"):
        monkeypatch.setitem(sys.modules, module, None)
    code = brevis.cluster.main(["verify", str(tmp_path / "x.brv"), "--engine", engine])
    assert code == 1
    err = capsys.readouterr().err
    assert err.startswith(f"error: --engine {engine} needs ")
    assert install in err and "Traceback" not in err


def test_an_http_endpoint_without_allow_http_says_to_set_it(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AWS_ENDPOINT_URL", "http://127.0.0.1:9")
    monkeypatch.delenv("AWS_ALLOW_HTTP", raising=False)
    monkeypatch.setenv("AWS_REGION", "us-east-1")
    with pytest.raises(brevis.BrevisIOError) as info:
        brevis.safe_open("s3://bkt/model.brv")
    msg = str(info.value)
    assert msg.startswith("s3://bkt/model.brv: cannot open: the endpoint http://127.0.0.1:9")
    assert "export AWS_ALLOW_HTTP=true" in msg


FORK_CHILD = """
import brevis, filecmp, os, sys
src, d = sys.argv[1], sys.argv[2]
for i in range(3):  # the parent's worker pools, kept idle between jobs
    brevis.compress_file(src, f"{d}/a{i}.brv", jobs=1, force=True)
pid = os.fork()
if pid == 0:
    brevis.compress_file(src, f"{d}/child.brv", jobs=1, force=True)
    brevis.decompress_file(f"{d}/child.brv", f"{d}/child.safetensors", jobs=1, force=True)
    os._exit(0 if filecmp.cmp(src, f"{d}/child.safetensors", shallow=False) else 3)
_, status = os.waitpid(pid, 0)
brevis.compress_file(src, f"{d}/after.brv", jobs=1, force=True)
sys.exit(os.waitstatus_to_exitcode(status))
"""


@pytest.mark.skipif(not hasattr(__import__("os"), "fork"), reason="no fork on this platform")
def test_a_forked_child_compresses_and_restores(tmp_path: Path) -> None:
    """The worker pools a process keeps between jobs are not taken by a child forked from
    it (multiprocessing, data loaders), which has none of their threads: the child's jobs
    finish (in a subprocess with a timeout, so a hang fails instead of stalling the suite)
    and restore byte for byte, and the parent's go on."""
    import subprocess

    from conftest import CORPUS

    if not CORPUS:
        pytest.skip("no corpus")
    import os
    import signal

    src = min(CORPUS, key=lambda p: p.stat().st_size)
    p = subprocess.Popen(
        [sys.executable, "-c", FORK_CHILD, str(src), str(tmp_path)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    try:
        _, err = p.communicate(timeout=120)
    except subprocess.TimeoutExpired:
        os.killpg(p.pid, signal.SIGKILL)  # the parent and its forked child
        p.communicate()
        pytest.fail("a job in a forked child (or its parent after it) did not finish")
    assert p.returncode == 0, err
    assert (tmp_path / "after.brv").stat().st_size > 0
