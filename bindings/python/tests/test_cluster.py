"""Object storage and the cluster runner, on a real S3-protocol server (moto_server on
127.0.0.1), a local Ray cluster and a local Dask cluster, each with a worker killed
mid-run. Skipped when moto, ray or dask are not installed (`.ci/run` installs them)."""

from __future__ import annotations

import json
import os
import socket
import struct
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

import brevis
from brevis import cluster

from conftest import corpus_dir

CORPUS = "minilm-l6-v2-bf16-layer0.safetensors"


def split_checkpoint(src: Path, out: Path, shards: int = 3) -> Path:
    """A checkpoint folder made from the single file `src`: its tensors cut into
    `shards` shard files, an index and a config."""
    raw = src.read_bytes()
    (n,) = struct.unpack("<Q", raw[:8])
    header = json.loads(raw[8 : 8 + n])
    data = raw[8 + n :]
    meta = header.pop("__metadata__", None)
    names = sorted(header, key=lambda k: header[k]["data_offsets"][0])
    out.mkdir(parents=True)
    weight_map = {}
    per = -(-len(names) // shards)
    for s in range(shards):
        part = names[s * per : (s + 1) * per]
        fname = f"model-{s + 1:05d}-of-{shards:05d}.safetensors"
        h, body = {}, b""
        if meta is not None:
            h["__metadata__"] = meta
        for k in part:
            b, e = header[k]["data_offsets"]
            h[k] = dict(header[k], data_offsets=[len(body), len(body) + e - b])
            body += data[b:e]
            weight_map[k] = fname
        text = json.dumps(h).encode()
        text += b" " * (-len(text) % 8)
        (out / fname).write_bytes(struct.pack("<Q", len(text)) + text + body)
    (out / "model.safetensors.index.json").write_text(
        json.dumps({"metadata": {"total_size": len(data)}, "weight_map": weight_map}, indent=2)
    )
    (out / "config.json").write_text('{"model_type": "bert"}\n')
    return out


@pytest.fixture
def checkpoint(tmp_path) -> Path:
    src = corpus_dir() / CORPUS
    if not src.exists():
        pytest.skip(f"corpus file {src} not present")
    return split_checkpoint(src, tmp_path / "model")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture
def s3(tmp_path, monkeypatch):
    """A moto_server on 127.0.0.1 with bucket `bkt`; the AWS_* variables point at it."""
    server = Path(sys.executable).with_name("moto_server")
    if not server.exists():
        pytest.skip("moto_server not installed (pip install 'moto[server]')")
    port = free_port()
    proc = subprocess.Popen([str(server), "-H", "127.0.0.1", "-p", str(port)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            env=dict(os.environ, HOME=str(tmp_path)))
    url = f"http://127.0.0.1:{port}"
    try:
        for _ in range(200):
            try:
                urllib.request.urlopen(url + "/", timeout=1)
                break
            except OSError:
                time.sleep(0.05)
        req = urllib.request.Request(url + "/bkt", method="PUT")
        urllib.request.urlopen(req, timeout=5)
        for k, v in {
            "AWS_ENDPOINT_URL": url,
            "AWS_ACCESS_KEY_ID": "test",
            "AWS_SECRET_ACCESS_KEY": "test",
            "AWS_REGION": "us-east-1",
            "AWS_ALLOW_HTTP": "true",
        }.items():
            monkeypatch.setenv(k, v)
        yield "s3://bkt"
    finally:
        proc.terminate()
        proc.wait(timeout=10)


def upload_folder(folder: Path, url: str) -> None:
    for p in sorted(folder.rglob("*")):
        if p.is_file():
            cluster.put(str(p), cluster.join(url, p.relative_to(folder).as_posix()))


def download_folder(url: str, dest: Path) -> Path:
    for rel, _ in cluster.listing(url):
        (dest / rel).parent.mkdir(parents=True, exist_ok=True)
        cluster.fetch(cluster.join(url, rel), str(dest / rel))
    return dest


def files_of(folder: Path) -> dict[str, bytes]:
    return {p.relative_to(folder).as_posix(): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


def test_one_tensor_of_a_remote_archive_is_read_by_ranges(s3, tmp_path):
    src = corpus_dir() / CORPUS
    if not src.exists():
        pytest.skip(f"corpus file {src} not present")
    local = tmp_path / "m.brv"
    brevis.compress_file(str(src), str(local), jobs=1)
    url = f"{s3}/one/m.brv"
    cluster.put(str(local), url)
    arch = brevis.Archive(str(local))
    names = arch.keys()
    # A weight matrix of one attention projection (384 x 384 BF16): a tensor of middling size.
    name = next(n for n in names if n.endswith("attention.self.query.weight"))
    expected = bytes(arch.decode_tensor(name))
    remote = brevis.Archive(url)
    assert remote.keys() == names
    assert remote.archive_bytes == local.stat().st_size
    opened = remote.bytes_read
    got = bytes(remote.decode_tensor(name))
    assert got == expected
    total = remote.bytes_read
    print(f"\nranged read of {name!r} ({len(got)} bytes): {opened} bytes to open, {total} in all, "
          f"of an archive of {remote.archive_bytes}")
    assert total < remote.archive_bytes // 4
    # safe_open takes the URL too, with the original's dtype and shape.
    with brevis.safe_open(url) as f:
        assert f.get_tensor(name).tobytes() == expected
    # A missing object is an error naming the URL.
    with pytest.raises(brevis.BrevisIOError, match="s3://bkt/one/nothing.brv"):
        brevis.Archive(f"{s3}/one/nothing.brv")


def restore_and_compare(src_url_or_dir: str, restored: str, original: Path, tmp_path: Path, engine: str, **kw):
    cluster.run("decompress", src_url_or_dir, restored, engine=engine, workers=2, **kw)
    local = download_folder(restored, tmp_path / "restored") if cluster.is_url(restored) else Path(restored)
    assert files_of(local) == files_of(original)


def test_ray_on_s3_with_a_killed_worker_and_a_rerun(s3, checkpoint, tmp_path, tmp_path_factory, monkeypatch):
    pytest.importorskip("ray")
    short = tmp_path_factory.mktemp("r")  # Ray's socket paths must stay short
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.setenv("BREVIS_RAY_TMPDIR", str(short))
    monkeypatch.setenv("RAY_USAGE_STATS_ENABLED", "0")
    monkeypatch.setenv(cluster.FAULT_ENV, str(tmp_path / "fault"))
    upload_folder(checkpoint, f"{s3}/model")
    src, dst = f"{s3}/model", f"{s3}/model.brv"
    # A previous run that finished shard 0 and died before the commit.
    the_plan = cluster.plan("compress", src, dst)
    monkeypatch.delenv(cluster.FAULT_ENV)
    first = cluster.run_task(the_plan, 0)
    assert not first["skipped"]
    monkeypatch.setenv(cluster.FAULT_ENV, str(tmp_path / "fault"))
    summary = cluster.run("compress", src, dst, engine="ray", workers=2)
    # One task's worker died (os._exit) and Ray ran it again; shard 0 was skipped.
    assert (tmp_path / "fault" / "killed").exists()
    assert [t["skipped"] for t in summary["tasks"]] == [True, False, False]
    assert summary["manifest"] == f"{dst}/{cluster.MANIFEST}"
    # The folder archive is the one `brevis compress DIR` makes, byte for byte.
    made = download_folder(dst, tmp_path / "made")
    brevis.compress_file(str(checkpoint), str(tmp_path / "reference.brv"), jobs=1)
    assert files_of(made) == files_of(tmp_path / "reference.brv")
    assert brevis.verify_file(str(made))["ok"]
    # A second commit is refused.
    with pytest.raises(brevis.OutputExistsError):
        cluster.run("compress", src, dst, engine="ray", workers=2)
    (tmp_path / "fault" / "killed").unlink()
    restore_and_compare(dst, f"{s3}/restored", checkpoint, tmp_path, "ray")
    assert (tmp_path / "fault" / "killed").exists()
    v = cluster.run("verify", dst, engine="local", workers=2)
    assert v["ok"]


def test_dask_with_a_killed_worker(checkpoint, tmp_path, monkeypatch):
    pytest.importorskip("dask.distributed")
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.setenv(cluster.FAULT_ENV, str(tmp_path / "fault"))
    dst = str(tmp_path / "model.brv")
    summary = cluster.run("compress", str(checkpoint), dst, engine="dask", workers=2)
    assert (tmp_path / "fault" / "killed").exists()
    assert len(summary["tasks"]) == 3
    brevis.compress_file(str(checkpoint), str(tmp_path / "reference.brv"), jobs=1)
    assert files_of(Path(dst)) == files_of(tmp_path / "reference.brv")
    assert not (Path(dst) / cluster.TASKS).exists()
    assert brevis.verify_file(dst)["ok"]
    with pytest.raises(brevis.OutputExistsError):
        cluster.commit(cluster.plan("compress", str(checkpoint), dst), summary["tasks"])
    (tmp_path / "fault" / "killed").unlink()
    restore_and_compare(dst, str(tmp_path / "restored"), checkpoint, tmp_path, "dask")
    assert (tmp_path / "fault" / "killed").exists()


def test_large_objects_go_up_in_parts_and_come_back_whole(s3, tmp_path):
    # Over the 16 MiB part size: a multipart upload.
    data = os.urandom((16 << 20) + 12345)
    src = tmp_path / "big"
    src.write_bytes(data)
    assert brevis._brevis.store_upload(str(src), f"{s3}/big/object") == len(data)
    assert brevis._brevis.store_size(f"{s3}/big/object") == len(data)
    assert brevis._brevis.store_size(f"{s3}/big/none") is None
    back = tmp_path / "back"
    assert brevis._brevis.store_download(f"{s3}/big/object", str(back)) == len(data)
    assert back.read_bytes() == data
    # Create-only refuses an existing object.
    brevis._brevis.store_write(f"{s3}/big/commit", b"one", create=True)
    with pytest.raises(brevis.OutputExistsError):
        brevis._brevis.store_write(f"{s3}/big/commit", b"two", create=True)
    assert brevis._brevis.store_read(f"{s3}/big/commit") == b"one"
