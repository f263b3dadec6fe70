"""compress_file / decompress_file / verify_file on files and folders."""

from __future__ import annotations

import pickle
import shutil
import signal
from pathlib import Path

import pytest

import brevis
from conftest import write_safetensors


def test_corpus_file_round_trips_byte_for_byte(corpus_file: Path, tmp_path: Path) -> None:
    archive = tmp_path / "f.brv"
    report = brevis.compress_file(corpus_file, archive)
    assert report["ok"] is True
    assert report["original_bytes"] == corpus_file.stat().st_size
    assert report["archive_bytes"] == archive.stat().st_size
    restored = tmp_path / "restored.safetensors"
    back = brevis.decompress_file(archive, restored)
    assert back["checksums_ok"] is True
    assert restored.read_bytes() == corpus_file.read_bytes()
    checked = brevis.verify_file(archive, against=corpus_file)
    assert checked["ok"] is True
    assert checked["against"]["identical"] is True


def test_default_output_names_follow_the_cli(mixed_file: Path, tmp_path: Path) -> None:
    report = brevis.compress_file(mixed_file, budget=0)
    assert Path(report["output"]) == tmp_path / "mixed.brv"
    original = mixed_file.read_bytes()
    mixed_file.unlink()
    back = brevis.decompress_file(tmp_path / "mixed.brv")
    assert Path(back["output"]) == mixed_file
    assert mixed_file.read_bytes() == original


def test_progress_reports_every_byte_once(mixed_file: Path, tmp_path: Path) -> None:
    events: list[tuple] = []
    brevis.compress_file(
        mixed_file, tmp_path / "m.brv", budget=0, progress=lambda *e: events.append(e)
    )
    assert events[0][0] == "begin"
    assert events[-1] == ("end", "", None, 0)
    size = mixed_file.stat().st_size
    assert events[0][3] == size
    assert sum(e[3] for e in events if e[0] == "item") == size
    labels = [e[2] for e in events if e[0] == "item"]
    assert "bf16" in labels and "i64" in labels


def test_an_exception_in_the_callback_is_raised(mixed_file: Path, tmp_path: Path) -> None:
    def boom(*_: object) -> None:
        raise RuntimeError("stop here")

    with pytest.raises(RuntimeError, match="stop here"):
        brevis.compress_file(mixed_file, tmp_path / "m.brv", budget=0, progress=boom)


def test_errors_are_typed_and_pickle(mixed_file: Path, tmp_path: Path) -> None:
    out = tmp_path / "m.brv"
    brevis.compress_file(mixed_file, out, budget=0)
    with pytest.raises(brevis.OutputExistsError) as info:
        brevis.compress_file(mixed_file, out, budget=0)
    err = info.value
    assert err.kind == "output_exists"
    assert str(err) == f"{out}: already exists (pass force=True to replace it)"
    again = pickle.loads(pickle.dumps(err))
    assert type(again) is brevis.OutputExistsError
    assert (again.message, again.kind) == (err.message, err.kind)
    assert isinstance(again, brevis.BrevisError)
    # force replaces it.
    assert brevis.compress_file(mixed_file, out, budget=0, force=True)["ok"] is True

    not_source = tmp_path / "junk.safetensors"
    not_source.write_bytes(b"\x01\x02")
    with pytest.raises(brevis.SourceError) as info:
        brevis.compress_file(not_source, tmp_path / "junk.brv")
    assert info.value.kind == "invalid_source"
    assert pickle.loads(pickle.dumps(info.value)).kind == "invalid_source"

    with pytest.raises(brevis.BrevisIOError) as info:
        brevis.decompress_file(tmp_path / "missing.brv")
    assert info.value.kind == "io"


def test_a_damaged_tensor_is_a_checksum_error(mixed_file: Path, tmp_path: Path) -> None:
    out = tmp_path / "m.brv"
    brevis.compress_file(mixed_file, out, budget=0)
    report = brevis.verify_file(out)
    assert report["ok"] is True and report["failed"] == 0


def test_invalid_options_are_value_errors(mixed_file: Path, tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="jobs must be 0"):
        brevis.compress_file(mixed_file, tmp_path / "m.brv", jobs=257)
    with pytest.raises(ValueError, match="max_depth must be 1 to 32"):
        brevis.compress_file(mixed_file, tmp_path / "m.brv", max_depth=0)
    with pytest.raises(ValueError, match="prior or uniform"):
        brevis.compress_file(mixed_file, tmp_path / "m.brv", prior="p.json", uniform=True)


def test_no_signal_handler_is_installed(mixed_file: Path, tmp_path: Path) -> None:
    before = {s: signal.getsignal(s) for s in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)}
    brevis.compress_file(mixed_file, tmp_path / "m.brv", budget=0)
    brevis.decompress_file(tmp_path / "m.brv", tmp_path / "r.safetensors")
    after = {s: signal.getsignal(s) for s in before}
    assert after == before


def test_a_checkpoint_folder_round_trips(tmp_path: Path) -> None:
    src = tmp_path / "model"
    src.mkdir()
    write_safetensors(src / "a.safetensors", {"w": ("F32", [2], b"\x00\x00\x80\x3f" * 2)})
    write_safetensors(src / "b.safetensors", {"v": ("I8", [3], b"\x01\x02\x03")})
    (src / "config.json").write_text('{"hidden": 8}\n')
    report = brevis.compress_file(src, tmp_path / "model.brv", budget=0)
    assert len(report["shards"]) == 2
    assert report["copied"] == ["config.json"]
    assert brevis.verify_file(tmp_path / "model.brv", against=src)["ok"] is True
    listed = brevis.list_file(tmp_path / "model.brv")
    assert [f["path"] for f in listed["files"]] == ["a.safetensors", "b.safetensors", "config.json"]
    back = tmp_path / "restored"
    brevis.decompress_file(tmp_path / "model.brv", back)
    for name in ("a.safetensors", "b.safetensors", "config.json"):
        assert (back / name).read_bytes() == (src / name).read_bytes()
    shutil.rmtree(back)


def test_the_fast_level_round_trips(corpus_file: Path, tmp_path: Path) -> None:
    archive = tmp_path / "fast.brv"
    report = brevis.compress_file(corpus_file, archive, level="fast")
    assert report["archive_bytes"] == archive.stat().st_size
    restored = tmp_path / "fast.safetensors"
    brevis.decompress_file(archive, restored)
    assert restored.read_bytes() == corpus_file.read_bytes()
    # Numbers name the levels as the CLI's do; a budget does not go with "fast".
    brevis.compress_file(corpus_file, tmp_path / "one.brv", level="1")
    with pytest.raises(ValueError, match="fast level does not search"):
        brevis.compress_file(corpus_file, tmp_path / "x.brv", level="fast", budget=1)
    with pytest.raises(ValueError, match="level must be"):
        brevis.compress_file(corpus_file, tmp_path / "x.brv", level="turbo")
