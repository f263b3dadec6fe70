#!/usr/bin/env python3
"""Compare Brevis with zstd (-3, -19) and ZipNN on the same .safetensors files, in one run.

For every file and tool: reduction (% smaller), compress and decompress throughput
(MB/s = 10^6 original bytes per second, wall clock of the whole command), and peak
resident memory (MiB, from /usr/bin/time -v), then each tool's throughput relative to
Brevis. Every decompressed output is compared byte for byte with the input.

Usage:
    scripts/compare.py [--jobs N[,N...]] [--brevis PATH] [--runs R] [--tools T,...] FILE...

    --jobs N   threads for every tool (default 1); zstd gets -T N, ZipNN threads=N.
               Several (--jobs 1,2) run everything once per count and add, per tool,
               each count's throughput relative to the first count's.
    --runs R   best of R rounds for the timings (default 3); each round runs every tool
               at every job count once, interleaved, so that a machine whose speed drifts
               over minutes (a shared VM) slows them alike. Medians follow the table.
    --tools    only these tools (brevis, zstd-3, zstd-19, zipnn; default all)

ZipNN (pip install zipnn) is run through its Python API in a child process; its time
is measured inside that process, around compress()/decompress() plus file I/O, so
Python start-up and `import torch` are not charged to it (its peak memory includes
them). When `zipnn` cannot be imported, its rows say so and the rest still runs.
Every timed run writes a new output file (the previous run's is deleted first,
untimed), so no tool pays for freeing a file it replaces, and every decompression starts
with its input read once (untimed) into the page cache: Brevis writes its archives with
direct I/O, which leaves none of them cached, while the others' buffered writes do.
"""

import argparse
import os
import shutil
import subprocess
import sys
import statistics
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)

ZIPNN_CHILD = r"""
import sys, time
from zipnn import ZipNN
mode, src, dst, dtype, threads = sys.argv[1:6]
z = ZipNN(input_format="byte", bytearray_dtype=dtype, threads=int(threads))
t = time.perf_counter()
data = open(src, "rb").read()
out = z.compress(data) if mode == "c" else z.decompress(data)
open(dst, "wb").write(out)
print(time.perf_counter() - t)
"""


def timed(cmd, internal=False):
    """Runs cmd under /usr/bin/time -v; returns (seconds, peak RSS in MiB)."""
    t = time.perf_counter()
    p = subprocess.run(["/usr/bin/time", "-v"] + cmd, capture_output=True, text=True)
    secs = time.perf_counter() - t
    if p.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} failed: {p.stderr[-2000:]}")
    rss = 0.0
    for line in p.stderr.splitlines():
        if "Maximum resident set size" in line:
            rss = int(line.split()[-1]) / 1024.0
    if internal:
        secs = float(p.stdout.strip().splitlines()[-1])
    return secs, rss


def warm(path):
    """Reads path once, so that its pages are in the page cache."""
    with open(path, "rb") as f:
        while f.read(1 << 24):
            pass


def remove(path):
    """Deletes path if it exists."""
    try:
        os.remove(path)
    except FileNotFoundError:
        pass


def safetensors_dtype(path):
    """The most common dtype of a .safetensors file, in ZipNN's spelling."""
    import json
    import struct

    with open(path, "rb") as f:
        (n,) = struct.unpack("<Q", f.read(8))
        header = json.loads(f.read(n))
    sizes = {}
    for k, v in header.items():
        if k == "__metadata__":
            continue
        b, e = v["data_offsets"]
        sizes[v["dtype"]] = sizes.get(v["dtype"], 0) + (e - b)
    top = max(sizes, key=sizes.get) if sizes else "BF16"
    return {"BF16": "bfloat16", "F16": "float16", "F32": "float32"}.get(top, "bfloat16")


def have_zipnn():
    p = subprocess.run([sys.executable, "-c", "import zipnn"], capture_output=True)
    return p.returncode == 0


def tools(brevis, jobs, dtype):
    """(name, compress(src, dst), decompress(src, dst), internal timing)."""
    j = str(jobs)
    out = [
        (
            "brevis",
            lambda s, d: [brevis, "compress", s, "-o", d, "--jobs", j, "-f"],
            lambda s, d: [brevis, "decompress", s, "-o", d, "--jobs", j, "-f"],
            False,
        ),
    ]
    for level in (3, 19):
        out.append(
            (
                f"zstd -{level}",
                lambda s, d, lv=level: ["zstd", "-q", "-f", f"-{lv}", f"-T{j}", s, "-o", d],
                lambda s, d: ["zstd", "-q", "-f", "-d", f"-T{j}", s, "-o", d],
                False,
            )
        )
    if have_zipnn():
        out.append(
            (
                "zipnn",
                lambda s, d: [sys.executable, "-c", ZIPNN_CHILD, "c", s, d, dtype, j],
                lambda s, d: [sys.executable, "-c", ZIPNN_CHILD, "d", s, d, dtype, j],
                True,
            )
        )
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("files", nargs="+")
    ap.add_argument("--jobs", default="1")
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--tools", default="brevis,zstd-3,zstd-19,zipnn")
    ap.add_argument(
        "--brevis",
        default=os.path.join(
            os.environ.get("CARGO_TARGET_DIR", os.path.join(ROOT, "target")), "release", "brevis"
        ),
    )
    a = ap.parse_args()
    if not os.path.exists(a.brevis):
        sys.exit(f"error: {a.brevis}: not found (cargo build --release, or pass --brevis)")
    if shutil.which("zstd") is None:
        sys.exit("error: zstd not found (apt-get install -y zstd)")
    if not have_zipnn():
        print("note: zipnn is not importable (pip install zipnn); its rows are skipped")
    job_counts = [int(j) for j in a.jobs.split(",")]
    wanted = set(a.tools.replace("zstd -", "zstd-").split(","))
    print(f"jobs={a.jobs}, best of {a.runs} runs; MB/s = 10^6 original bytes per second")
    hdr = f"{'file':<34} {'tool':<8} {'jobs':>4} {'reduction':>9} {'comp MB/s':>10} {'dec MB/s':>9} {'comp RSS':>9} {'dec RSS':>8} {'comp x':>7} {'dec x':>6}"
    print(hdr)
    print("-" * len(hdr))
    scaling = {}
    medians = []
    for path in a.files:
        size = os.path.getsize(path)
        dtype = safetensors_dtype(path)
        # Every (job count, tool) pair runs once per round, all in the same round, so a
        # machine whose speed drifts over minutes (a shared VM) slows every pair alike,
        # rather than the pairs that happened to run last.
        cells = [
            (jobs, name, comp, dec, internal)
            for jobs in job_counts
            for name, comp, dec, internal in tools(a.brevis, jobs, dtype)
            if name.replace(" ", "") in wanted
        ]
        timings = {(jobs, name): ([], [], [], []) for jobs, name, *_ in cells}
        with tempfile.TemporaryDirectory(prefix="brevis-compare-") as tmp:
            for _ in range(a.runs):
                for k, (jobs, name, comp, dec, internal) in enumerate(cells):
                    ct, cr, dt, dr = timings[(jobs, name)]
                    packed = os.path.join(tmp, f"packed{k}")
                    back = os.path.join(tmp, f"back{k}")
                    # Every run writes a new file: the previous run's output is deleted
                    # first, untimed, so no tool is charged for freeing the file it
                    # would replace (tens of MB of blocks and cached pages).
                    remove(packed)
                    s, r = timed(comp(path, packed), internal)
                    ct.append(s)
                    cr.append(r)
                    remove(back)
                    # Every decompression starts from its input in the page cache, as it
                    # is after a buffered write: Brevis writes archives with direct I/O,
                    # which leaves nothing cached, and would be timed reading the disk.
                    warm(packed)
                    s, r = timed(dec(packed, back), internal)
                    dt.append(s)
                    dr.append(r)
                    with open(path, "rb") as f1, open(back, "rb") as f2:
                        if f1.read() != f2.read():
                            sys.exit(f"error: {name} did not restore {path} byte for byte")
                    remove(back)
            sizes = {
                (jobs, name): os.path.getsize(os.path.join(tmp, f"packed{k}"))
                for k, (jobs, name, *_) in enumerate(cells)
            }
        for jobs in job_counts:
            rows = []
            for cj, name, *_ in cells:
                if cj != jobs:
                    continue
                ct, cr, dt, dr = timings[(jobs, name)]
                red = 100.0 * (1 - sizes[(jobs, name)] / size)
                rows.append((name, red, size / min(ct) / 1e6, size / min(dt) / 1e6, max(cr), max(dr)))
                medians.append(
                    (path, name, jobs, size / statistics.median(ct) / 1e6, size / statistics.median(dt) / 1e6)
                )
            base = rows[0]
            for name, red, cs, ds, cr, dr in rows:
                print(
                    f"{os.path.basename(path)[:34]:<34} {name:<8} {jobs:>4} {red:>8.2f}% {cs:>10.1f} {ds:>9.1f} "
                    f"{cr:>7.0f}Mi {dr:>6.0f}Mi {cs / base[2]:>6.2f}x {ds / base[3]:>5.2f}x"
                )
                scaling.setdefault((path, name), []).append((jobs, cs, ds))
    print("comp x / dec x: the tool's throughput divided by the first tool's on the same file")
    if len(job_counts) > 1:
        print()
        print(f"scaling: throughput with N jobs / throughput with {job_counts[0]}")
        for (path, name), runs in scaling.items():
            j0, c0, d0 = runs[0]
            for j, c, d in runs[1:]:
                print(
                    f"{os.path.basename(path)[:34]:<34} {name:<8} jobs {j} vs {j0}: "
                    f"compress {c / c0:.2f}x, decompress {d / d0:.2f}x"
                )
    print()
    print("medians of the same runs (MB/s): steadier than the best run on a machine whose speed drifts")
    for path, name, jobs, cm, dm in medians:
        print(f"{os.path.basename(path)[:34]:<34} {name:<8} {jobs:>4} compress {cm:>7.1f} decompress {dm:>7.1f}")


if __name__ == "__main__":
    main()
