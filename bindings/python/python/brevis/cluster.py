"""Brevis on a cluster: one task per shard of a checkpoint folder (docs/scale.md).

    python -m brevis.cluster compress   SRC DST --engine ray|dask|local --workers N
    python -m brevis.cluster decompress SRC DST --engine ray|dask|local --workers N
    python -m brevis.cluster verify     SRC     --engine ray|dask|local --workers N

SRC and DST are local folders or ``s3://bucket/prefix`` URLs (the store is configured
from ``AWS_ENDPOINT_URL``, ``AWS_ACCESS_KEY_ID``, ... as the AWS tools are). ``compress``
turns a checkpoint folder (``*.safetensors`` shards, ``model.safetensors.index.json``,
other files) into the folder archive ``brevis compress DIR`` makes: one ``.brv`` per
shard, other files copied, and the manifest ``brevis-folder.json``. ``decompress``
restores the original folder from it; ``verify`` decodes every shard against its
checksums.

The engine-agnostic core is :func:`run_task` (one shard, by index in the plan): Ray and
Dask call it as tasks, a Slurm array or a Kubernetes Indexed Job as
``python -m brevis.cluster task PLAN INDEX`` (docs/scale.md). Tasks are idempotent: a
shard whose output exists and matches the checksum its task recorded is skipped, so a
rerun (or a retried task whose worker died) does only what is left. The manifest is
written create-only once every shard is done: that write is the commit, and a second
commit is refused (``OutputExistsError``).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
import time
from typing import Any, Callable, Optional

from . import _brevis
from ._errors import BrevisError, OutputExistsError

MANIFEST = "brevis-folder.json"
#: Per-shard records of finished tasks, below the output (removed at the commit).
TASKS = ".brevis-tasks"
#: Test hook: a folder; the first task to see it empty records itself there and exits
#: the worker process (``os._exit``), as a crashed worker would.
FAULT_ENV = "BREVIS_CLUSTER_FAULT"


# ---- locations: a local path or an s3:// URL -------------------------------------------


def is_url(loc: str) -> bool:
    return loc.startswith("s3://")


def join(loc: str, rel: str) -> str:
    return loc.rstrip("/") + "/" + rel if is_url(loc) else os.path.join(loc, rel)


def listing(loc: str) -> list[tuple[str, int]]:
    """(relative path, bytes) of every file below ``loc``, in path order."""
    if is_url(loc):
        return _brevis.store_list(loc)
    out = []
    for root, _dirs, files in os.walk(loc):
        for f in files:
            p = os.path.join(root, f)
            out.append((os.path.relpath(p, loc).replace(os.sep, "/"), os.path.getsize(p)))
    return sorted(out)


def size(loc: str) -> Optional[int]:
    if is_url(loc):
        return _brevis.store_size(loc)
    return os.path.getsize(loc) if os.path.isfile(loc) else None


def fetch(loc: str, local: str) -> None:
    """Copies ``loc`` to the local file ``local``."""
    if is_url(loc):
        _brevis.store_download(loc, local)
    else:
        shutil.copyfile(loc, local)


def put(local: str, loc: str) -> None:
    """Copies the local file ``local`` to ``loc`` (replacing it), atomically."""
    if is_url(loc):
        _brevis.store_upload(local, loc)
        return
    os.makedirs(os.path.dirname(loc) or ".", exist_ok=True)
    tmp = f"{loc}.tmp-{os.getpid()}"
    shutil.copyfile(local, tmp)
    os.replace(tmp, loc)


def read(loc: str) -> bytes:
    if is_url(loc):
        return bytes(_brevis.store_read(loc))
    with open(loc, "rb") as f:
        return f.read()


def write(loc: str, data: bytes, create: bool = False) -> None:
    """Writes ``data`` at ``loc``; with ``create``, only if nothing is there
    (``OutputExistsError`` otherwise)."""
    if is_url(loc):
        _brevis.store_write(loc, data, create=create)
        return
    os.makedirs(os.path.dirname(loc) or ".", exist_ok=True)
    tmp = f"{loc}.tmp-{os.getpid()}"
    with open(tmp, "wb") as f:
        f.write(data)
        f.flush()
        os.fsync(f.fileno())
    if not create:
        os.replace(tmp, loc)
        return
    try:
        os.link(tmp, loc)  # fails if loc exists: create-only
    except FileExistsError:
        raise OutputExistsError(f"{loc}: exists (a job is committed once)", "output_exists") from None
    finally:
        os.unlink(tmp)


def remove(loc: str) -> None:
    if is_url(loc):
        _brevis.store_delete(loc)
    elif os.path.isfile(loc):
        os.unlink(loc)


def xxh3_of(path: str) -> str:
    return _brevis.folder_entry(path, "x")["xxh3"]


# ---- the plan and the engine-agnostic core --------------------------------------------


def plan(command: str, src: str, dst: Optional[str]) -> dict[str, Any]:
    """What ``command`` does: one task per shard (``tasks``), files copied by the driver
    (``copies``)."""
    files = listing(src)
    if command == "compress":
        names = [rel for rel, _ in files]
        if MANIFEST in names:
            raise BrevisError(f"{src}: holds {MANIFEST}; it is a compressed folder", "invalid_source")
        shards = [rel for rel in names if rel.endswith(".safetensors")]
        if not shards:
            raise BrevisError(f"{src}: holds no .safetensors file", "invalid_source")
        copies = [rel for rel in names if not rel.endswith(".safetensors")]
    else:
        manifest = json.loads(read(join(src, MANIFEST)))
        if manifest.get("format") != "brevis-folder":
            raise BrevisError(f"{join(src, MANIFEST)}: not a brevis folder manifest", "damaged_archive")
        shards = [f for f in manifest["files"] if f["kind"] == "archive"]
        copies = [f for f in manifest["files"] if f["kind"] != "archive"]
    return {"command": command, "src": src, "dst": dst, "tasks": shards, "copies": copies}


def _fault() -> None:
    hook = os.environ.get(FAULT_ENV)
    if not hook:
        return
    os.makedirs(hook, exist_ok=True)
    try:
        fd = os.open(os.path.join(hook, "killed"), os.O_CREAT | os.O_EXCL | os.O_WRONLY)
    except FileExistsError:
        return
    os.write(fd, str(os.getpid()).encode())
    os.close(fd)
    os._exit(17)


def run_task(the_plan: dict[str, Any], index: int) -> dict[str, Any]:
    """Does task ``index`` of ``the_plan`` (one shard) and returns its result: for
    ``compress``, the shard's manifest entry; for the others, what was done. Idempotent:
    a shard already done (its output matches the checksum its task recorded, or the
    original's for a restored file) is skipped (``"skipped": True``)."""
    command, src, dst = the_plan["command"], the_plan["src"], the_plan["dst"]
    task = the_plan["tasks"][index]
    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="brevis-task-") as tmp:
        if command == "compress":
            rel = task
            arch = rel[: -len(".safetensors")] + ".brv"
            record_loc = join(dst, f"{TASKS}/{arch}.json")
            out_loc = join(dst, arch)
            record = None
            if size(record_loc) is not None:
                record = json.loads(read(record_loc))
                if size(out_loc) == record["archive_bytes"]:
                    local = os.path.join(tmp, "out.brv")
                    fetch(out_loc, local)
                    if xxh3_of(local) == record["archive_xxh3"]:
                        return dict(record, skipped=True, seconds=time.monotonic() - started)
            _fault()
            # The archive stores its source's file name: keep the shard's.
            local_src = os.path.join(tmp, os.path.basename(rel))
            t0 = time.monotonic()
            fetch(join(src, rel), local_src)
            t_in = time.monotonic() - t0
            entry = _brevis.folder_entry(local_src, rel)
            local_out = os.path.join(tmp, "out.brv")
            t0 = time.monotonic()
            report = _brevis.compress_file(local_src, local_out, jobs=1)
            t_work = time.monotonic() - t0
            t0 = time.monotonic()
            put(local_out, out_loc)
            t_out = time.monotonic() - t0
            record = {
                "entry": entry,
                "archive_bytes": os.path.getsize(local_out),
                "archive_xxh3": xxh3_of(local_out),
                "original_bytes": report["original_bytes"],
            }
            write(record_loc, json.dumps(record).encode())
            return dict(record, skipped=False, seconds=time.monotonic() - started,
                        transfer_seconds=t_in + t_out, work_seconds=t_work)
        entry = task
        local_arch = os.path.join(tmp, "in.brv")
        if command == "decompress":
            out_loc = join(dst, entry["path"])
            if size(out_loc) == entry["bytes"]:
                local = os.path.join(tmp, "have")
                fetch(out_loc, local)
                if xxh3_of(local) == entry["xxh3"]:
                    return {"path": entry["path"], "skipped": True, "seconds": time.monotonic() - started}
            _fault()
            t0 = time.monotonic()
            fetch(join(src, entry["archive"]), local_arch)
            t_in = time.monotonic() - t0
            local_out = os.path.join(tmp, "out.safetensors")
            t0 = time.monotonic()
            _brevis.decompress_file(local_arch, local_out, jobs=1)
            t_work = time.monotonic() - t0
            if xxh3_of(local_out) != entry["xxh3"]:
                raise BrevisError(f"{join(src, entry['archive'])}: restores other bytes than its manifest entry", "checksum_mismatch")
            t0 = time.monotonic()
            put(local_out, out_loc)
            t_out = time.monotonic() - t0
            return {"path": entry["path"], "skipped": False, "seconds": time.monotonic() - started,
                    "transfer_seconds": t_in + t_out, "work_seconds": t_work}
        # verify
        _fault()
        fetch(join(src, entry["archive"]), local_arch)
        report = _brevis.verify_file(local_arch, jobs=1)
        return {"path": entry["path"], "ok": bool(report["ok"]), "skipped": False,
                "seconds": time.monotonic() - started}


def commit(the_plan: dict[str, Any], results: list[dict[str, Any]]) -> Optional[str]:
    """After every task: copies the other files and, for ``compress``, writes the
    manifest create-only (the commit; a second one raises ``OutputExistsError``)."""
    command, src, dst = the_plan["command"], the_plan["src"], the_plan["dst"]
    if command == "verify":
        return None
    manifest_loc = join(dst, MANIFEST)
    if command == "compress" and size(manifest_loc) is not None:
        raise OutputExistsError(f"{manifest_loc}: exists (the job was committed already)", "output_exists")
    entries = [r["entry"] for r in results] if command == "compress" else []
    with tempfile.TemporaryDirectory(prefix="brevis-commit-") as tmp:
        for c in the_plan["copies"]:
            rel = c if command == "compress" else c["path"]
            local = os.path.join(tmp, "copy")
            fetch(join(src, rel), local)
            if command == "compress":
                entries.append(_brevis.folder_entry(local, rel))
            elif xxh3_of(local) != c["xxh3"]:
                raise BrevisError(f"{join(src, rel)}: differs from its manifest entry", "checksum_mismatch")
            put(local, join(dst, rel))
    if command != "compress":
        return None
    entries.sort(key=lambda e: e["path"])
    write(manifest_loc, bytes(_brevis.folder_manifest(json.dumps(entries))), create=True)
    for r in results:
        remove(join(dst, f"{TASKS}/{r['entry']['archive']}.json"))
    if not is_url(dst):
        # The records' folders, now empty (deepest first); never anything else.
        for root, _dirs, _files in sorted(os.walk(os.path.join(dst, TASKS)), reverse=True):
            try:
                os.rmdir(root)
            except OSError:
                pass
    return manifest_loc


# ---- engines ---------------------------------------------------------------------------


def _report(done: int, total: int, the_plan: dict[str, Any], index: int, r: dict[str, Any], out=sys.stderr) -> None:
    task = the_plan["tasks"][index]
    name = task if isinstance(task, str) else task["path"]
    what = "skipped (done before)" if r.get("skipped") else f"{r['seconds']:.2f} s"
    if "ok" in r:
        what += ", ok" if r["ok"] else ", DAMAGED"
    print(f"[{done}/{total}] {name}: {what}", file=out, flush=True)


def run_local(the_plan, workers: int, progress: Callable) -> list[dict[str, Any]]:
    import concurrent.futures as cf
    import multiprocessing

    n = len(the_plan["tasks"])
    results: list[Any] = [None] * n
    # Spawned, not forked: a forked child would inherit the store's I/O runtime without
    # its threads.
    ctx = multiprocessing.get_context("spawn")
    with cf.ProcessPoolExecutor(max_workers=workers, mp_context=ctx) as pool:
        futs = {pool.submit(run_task, the_plan, i): i for i in range(n)}
        for done, fut in enumerate(cf.as_completed(futs), 1):
            i = futs[fut]
            results[i] = fut.result()
            progress(done, n, the_plan, i, results[i])
    return results


def run_ray(the_plan, workers: int, progress: Callable, address: Optional[str] = None) -> list[dict[str, Any]]:
    import ray

    started = False
    if not ray.is_initialized():
        kwargs: dict[str, Any] = {"include_dashboard": False, "log_to_driver": False}
        if address:
            kwargs["address"] = address
        else:
            kwargs["num_cpus"] = workers
            kwargs["_node_ip_address"] = os.environ.get("BREVIS_RAY_IP", "127.0.0.1")
            if os.environ.get("BREVIS_RAY_TMPDIR"):
                kwargs["_temp_dir"] = os.environ["BREVIS_RAY_TMPDIR"]
        ray.init(**kwargs)
        started = True
    try:
        # A task whose worker process dies is retried (max_retries); library errors
        # are not (retry_exceptions=False): they would fail again.
        task = ray.remote(num_cpus=1, max_retries=3, retry_exceptions=False)(run_task)
        plan_ref = ray.put(the_plan)
        n = len(the_plan["tasks"])
        refs = {task.remote(plan_ref, i): i for i in range(n)}
        results: list[Any] = [None] * n
        pending = list(refs)
        done = 0
        while pending:
            ready, pending = ray.wait(pending, num_returns=1)
            for ref in ready:
                i = refs[ref]
                results[i] = ray.get(ref)
                done += 1
                progress(done, n, the_plan, i, results[i])
        return results
    finally:
        if started:
            ray.shutdown()


def run_dask(the_plan, workers: int, progress: Callable, address: Optional[str] = None) -> list[dict[str, Any]]:
    from dask.distributed import Client, LocalCluster, as_completed

    cluster = None
    if address:
        client = Client(address)
    else:
        cluster = LocalCluster(n_workers=workers, threads_per_worker=1, processes=True,
                               host="127.0.0.1", dashboard_address=None)
        client = Client(cluster)
    try:
        n = len(the_plan["tasks"])
        # `retries` covers task errors; a dead worker's tasks are rescheduled by the
        # scheduler (distributed.scheduler.allowed-failures).
        futs = [client.submit(run_task, the_plan, i, key=f"brevis-{the_plan['command']}-{i}", pure=False, retries=0)
                for i in range(n)]
        index = {f.key: i for i, f in enumerate(futs)}
        results: list[Any] = [None] * n
        for done, fut in enumerate(as_completed(futs), 1):
            i = index[fut.key]
            results[i] = fut.result()
            progress(done, n, the_plan, i, results[i])
        return results
    finally:
        client.close()
        if cluster is not None:
            cluster.close()


ENGINES = {"ray": run_ray, "dask": run_dask, "local": run_local}

#: The package each engine needs: (module to import, what to pip install).
ENGINE_PACKAGES = {"ray": ("ray", "ray"), "dask": ("dask.distributed", "'dask[distributed]'")}


def require_engine(engine: str) -> None:
    """Raises ``ModuleNotFoundError`` naming the ``pip install`` when ``engine``'s
    package is not installed (checked before any work, rather than a traceback from
    inside the engine)."""
    if engine not in ENGINE_PACKAGES:
        return
    module, package = ENGINE_PACKAGES[engine]
    try:
        __import__(module)
    except ImportError as e:
        raise ModuleNotFoundError(
            f"--engine {engine} needs {module}, which is not installed: pip install {package} "
            "(or run with --engine local: processes on this machine)",
            name=module,
        ) from e


def run(command: str, src: str, dst: Optional[str] = None, *, engine: str = "ray", workers: int = 2,
        address: Optional[str] = None, progress: Optional[Callable] = _report) -> dict[str, Any]:
    """Runs ``command`` over every shard of ``src`` on ``engine``; returns a summary
    (``tasks``: each task's result; ``manifest``: the committed manifest for
    ``compress``; ``ok`` for ``verify``)."""
    if engine not in ENGINES:
        raise ValueError(f"engine must be one of {sorted(ENGINES)}, not {engine!r}")
    if command != "verify" and not dst:
        raise ValueError(f"{command} needs a destination")
    require_engine(engine)
    the_plan = plan(command, src, dst)
    if command == "compress" and size(join(dst, MANIFEST)) is not None:
        raise OutputExistsError(f"{join(dst, MANIFEST)}: exists (the job was committed already)", "output_exists")
    quiet = lambda *a: None  # noqa: E731
    runner = ENGINES[engine]
    kwargs = {} if engine == "local" else {"address": address}
    started = time.monotonic()
    results = runner(the_plan, workers, progress or quiet, **kwargs)
    manifest = commit(the_plan, results)
    summary: dict[str, Any] = {"command": command, "tasks": results, "manifest": manifest,
                               "seconds": time.monotonic() - started}
    if command == "verify":
        summary["ok"] = all(r["ok"] for r in results)
    return summary


def main(argv: Optional[list[str]] = None) -> int:
    p = argparse.ArgumentParser(prog="python -m brevis.cluster", description=__doc__.split("\n\n")[0])
    sub = p.add_subparsers(dest="command", required=True)
    for name in ("compress", "decompress", "verify"):
        s = sub.add_parser(name)
        s.add_argument("src")
        if name != "verify":
            s.add_argument("dst")
        s.add_argument("--engine", choices=sorted(ENGINES), default="ray")
        s.add_argument("--workers", type=int, default=2)
        s.add_argument("--address", help="an existing Ray or Dask cluster to use")
        s.add_argument("--json", action="store_true", help="print the summary as JSON")
    t = sub.add_parser("plan", help="write the plan of a job as JSON (for Slurm / Kubernetes)")
    t.add_argument("job", choices=["compress", "decompress", "verify"])
    t.add_argument("src")
    t.add_argument("dst", nargs="?")
    t = sub.add_parser("task", help="run one task of a plan (Slurm array / Indexed Job)")
    t.add_argument("plan")
    t.add_argument("index", type=int)
    t = sub.add_parser("commit", help="commit a plan whose tasks have all run")
    t.add_argument("plan")
    a = p.parse_args(argv)
    try:
        if a.command == "plan":
            print(json.dumps(plan(a.job, a.src, a.dst)))
            return 0
        if a.command in ("task", "commit"):
            with open(a.plan) as f:
                the_plan = json.load(f)
            if a.command == "task":
                print(json.dumps(run_task(the_plan, a.index)))
            else:
                results = [run_task(the_plan, i) for i in range(len(the_plan["tasks"]))]
                print(commit(the_plan, results) or "")
            return 0
        summary = run(a.command, a.src, getattr(a, "dst", None), engine=a.engine, workers=a.workers,
                      address=a.address)
    except (BrevisError, ModuleNotFoundError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    if a.json:
        print(json.dumps(summary))
    elif a.command == "verify":
        print("ok: every shard matched its checksums" if summary["ok"] else "DAMAGED: see above")
    else:
        print(f"{a.command}: {len(summary['tasks'])} shards in {summary['seconds']:.1f} s"
              + (f"; committed {summary['manifest']}" if summary["manifest"] else ""))
    return 0 if summary.get("ok", True) else 2


if __name__ == "__main__":
    sys.exit(main())
