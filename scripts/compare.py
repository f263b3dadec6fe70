#!/usr/bin/env python3
"""Compare Brevis with zstd (-3, -19) and ZipNN on the same .safetensors files, in one run.

For every file and tool: reduction (% smaller), compress and decompress throughput
(MB/s = 10^6 original bytes per second, wall clock of the whole command), and peak
resident memory (MiB, from /usr/bin/time -v), then each tool's throughput relative to
the first tool of --tools (Brevis by default). Every decompressed output is compared
byte for byte with the input.

Usage:
    scripts/compare.py [--jobs N[,N...]] [--brevis PATH] [--runs R] [--tools T,...] FILE...

    --jobs N   threads for every tool (default 1); zstd gets -T N, ZipNN threads=N.
               Several (--jobs 1,2) run everything once per count and add, per tool,
               each count's throughput relative to the first count's.
    --runs R   best of R rounds for the timings (default 3); each round runs every tool
               at every job count once, interleaved, so that a machine whose speed drifts
               over minutes (a shared VM) slows them alike. The same figures from the
               rounds' medians follow the best-of ones (with 2 rounds a median is their
               mean, with 1 it is the only run).
    --tools    these tools, in this order (brevis, zstd-3, zstd-19, zipnn; default all);
               the first is the one the others are divided by
    --brevis   the brevis binary (default target/release/brevis; only needed when
               brevis is one of the tools)

ZipNN (pip install zipnn) is run through its Python API in a child process; its time
is measured inside that process, around compress()/decompress() plus file I/O, so
Python start-up and `import torch` are not charged to it (its peak memory includes
them). When `zipnn` cannot be imported, a note says so and the other tools still run.
ZipNN is told the file's most common dtype when it is BF16, F16 or F32, and bfloat16
otherwise (a note says so).
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
    """(most common dtype of a .safetensors file in ZipNN's spelling, that dtype as the
    file names it, whether it is one ZipNN takes). Raises ValueError on a file that is
    not .safetensors."""
    import json
    import struct

    try:
        with open(path, "rb") as f:
            (n,) = struct.unpack("<Q", f.read(8))
            if n > 100 << 20:
                raise ValueError(f"header length {n} is implausible")
            header = json.loads(f.read(n))
        sizes = {}
        for k, v in header.items():
            if k == "__metadata__":
                continue
            b, e = v["data_offsets"]
            sizes[v["dtype"]] = sizes.get(v["dtype"], 0) + (e - b)
    except (struct.error, ValueError, KeyError, TypeError, AttributeError) as e:
        raise ValueError(f"not a .safetensors file ({e})") from None
    top = max(sizes, key=sizes.get) if sizes else "BF16"
    known = {"BF16": "bfloat16", "F16": "float16", "F32": "float32"}
    return known.get(top, "bfloat16"), top, top in known


def have_zipnn():
    """Whether `import zipnn` works (in a child, as the timed runs do)."""
    p = subprocess.run([sys.executable, "-c", "import zipnn"], capture_output=True)
    return p.returncode == 0


TOOLS = ["brevis", "zstd-3", "zstd-19", "zipnn"]


def fail(message):
    """Exits with status 2 and a one-line message."""
    print(f"error: {message}", file=sys.stderr)
    sys.exit(2)


def positive_counts(text, what):
    """'1,2' -> [1, 2]: positive integers, duplicates dropped, order kept."""
    out = []
    for part in text.split(","):
        try:
            n = int(part)
        except ValueError:
            fail(f"{what}: {part!r} is not a whole number (e.g. --jobs 1,2)")
        if n < 1:
            fail(f"{what}: {n} is not at least 1")
        if n not in out:
            out.append(n)
    return out


def tools(brevis, jobs, dtype):
    """{name: (compress(src, dst), decompress(src, dst), internal timing)}."""
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
    out.append(
        (
            "zipnn",
            lambda s, d: [sys.executable, "-c", ZIPNN_CHILD, "c", s, d, dtype, j],
            lambda s, d: [sys.executable, "-c", ZIPNN_CHILD, "d", s, d, dtype, j],
            True,
        )
    )
    return {name.replace(" ", ""): (name, c, d, i) for name, c, d, i in out}


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
    if a.runs < 1:
        fail(f"--runs: {a.runs} is not at least 1")
    job_counts = positive_counts(a.jobs, "--jobs")
    wanted = []
    for t in a.tools.split(","):
        t = t.strip().lower().replace(" ", "")
        if t not in TOOLS:
            fail(f"--tools: unknown tool {t!r} (choose from {', '.join(TOOLS)})")
        if t not in wanted:
            wanted.append(t)
    if "zipnn" in wanted and not have_zipnn():
        if wanted == ["zipnn"]:
            fail("zipnn is not importable (pip install zipnn)")
        print("note: zipnn is not importable (pip install zipnn); its rows are left out")
        wanted.remove("zipnn")
    if "brevis" in wanted and not (os.path.isfile(a.brevis) and os.access(a.brevis, os.X_OK)):
        fail(f"{a.brevis}: not an executable file (cargo build --release, or pass --brevis)")
    if any(t.startswith("zstd") for t in wanted) and shutil.which("zstd") is None:
        fail("zstd not found (apt-get install -y zstd)")
    files, seen = [], set()
    for path in a.files:
        if not os.path.isfile(path):
            fail(f"{path}: not found, or not a file")
        try:
            dtype = safetensors_dtype(path)
        except ValueError as e:
            fail(f"{path}: {e}")
        except OSError as e:
            fail(f"{path}: cannot read ({e.strerror})")
        if os.path.realpath(path) in seen:
            continue
        seen.add(os.path.realpath(path))
        files.append((path, dtype))
        if "zipnn" in wanted and not dtype[2]:
            print(f"note: {path}: most bytes are {dtype[1]}; ZipNN is given bfloat16 (it takes BF16, F16, F32)")
    rounds = f"{a.runs} round" + ("s" if a.runs != 1 else "")
    print(f"jobs={','.join(map(str, job_counts))}, best of {rounds}; MB/s = 10^6 original bytes per second")
    width = max(4, min(60, max(len(os.path.basename(p)) for p, _ in files)))
    results = []  # (path, jobs, tool, reduction, best c, best d, median c, median d, rss c, rss d)
    for path, (zipnn_dtype, _, _) in files:
        size = os.path.getsize(path)
        # Every (job count, tool) pair runs once per round, all in the same round, so a
        # machine whose speed drifts over minutes (a shared VM) slows every pair alike,
        # rather than the pairs that happened to run last.
        cells = [
            (jobs,) + tools(a.brevis, jobs, zipnn_dtype)[t] for jobs in job_counts for t in wanted
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
                    try:
                        s, r = timed(comp(path, packed), internal)
                        ct.append(s)
                        cr.append(r)
                        remove(back)
                        # Every decompression starts from its input in the page cache,
                        # as it is after a buffered write: Brevis writes archives with
                        # direct I/O, which leaves nothing cached, and would be timed
                        # reading the disk.
                        warm(packed)
                        s, r = timed(dec(packed, back), internal)
                    except (RuntimeError, OSError) as e:
                        fail(f"{name} on {path}: {e}")
                    dt.append(s)
                    dr.append(r)
                    with open(path, "rb") as f1, open(back, "rb") as f2:
                        if f1.read() != f2.read():
                            fail(f"{name} did not restore {path} byte for byte")
                    remove(back)
            for k, (jobs, name, *_) in enumerate(cells):
                ct, cr, dt, dr = timings[(jobs, name)]
                csize = os.path.getsize(os.path.join(tmp, f"packed{k}"))
                results.append(
                    (
                        path,
                        jobs,
                        name,
                        100.0 * (1 - csize / size),
                        size / min(ct) / 1e6,
                        size / min(dt) / 1e6,
                        size / statistics.median(ct) / 1e6,
                        size / statistics.median(dt) / 1e6,
                        max(cr),
                        max(dr),
                    )
                )
    print_table(results, width, best=True)
    print()
    print(f"medians of the same {rounds} (steadier than the best on a machine whose speed drifts):")
    print_table(results, width, best=False)


def print_table(results, width, best):
    """The table of `results` from the best runs or from the medians, with each tool's
    throughput over the first tool's and, for several job counts, over the first count's."""
    hdr = (
        f"{'file':<{width}} {'tool':<8} {'jobs':>4} {'reduction':>9} {'comp MB/s':>10} {'dec MB/s':>9}"
        + (f" {'comp RSS':>9} {'dec RSS':>8}" if best else "")
        + f" {'comp x':>7} {'dec x':>6}"
    )
    print(hdr)
    print("-" * len(hdr))
    first = {}
    for path, jobs, name, red, bc, bd, mc, md, rc, rd in results:
        c, d = (bc, bd) if best else (mc, md)
        base = first.setdefault((path, jobs), (c, d))
        print(
            f"{os.path.basename(path)[:width]:<{width}} {name:<8} {jobs:>4} {red:>8.2f}% {c:>10.1f} {d:>9.1f}"
            + (f" {rc:>7.0f}Mi {rd:>6.0f}Mi" if best else "")
            + f" {c / base[0]:>6.2f}x {d / base[1]:>5.2f}x"
        )
    print("comp x / dec x: the tool's throughput divided by the first tool's on the same file and jobs")
    scaling = {}
    for path, jobs, name, red, bc, bd, mc, md, rc, rd in results:
        scaling.setdefault((path, name), []).append((jobs, bc, bd) if best else (jobs, mc, md))
    if any(len(v) > 1 for v in scaling.values()):
        j0 = next(iter(scaling.values()))[0][0]
        print(f"scaling: throughput with N jobs / throughput with {j0}")
        for (path, name), runs in scaling.items():
            j0, c0, d0 = runs[0]
            for j, c, d in runs[1:]:
                print(
                    f"{os.path.basename(path)[:width]:<{width}} {name:<8} jobs {j} vs {j0}: "
                    f"compress {c / c0:.2f}x, decompress {d / d0:.2f}x"
                )

if __name__ == "__main__":
    main()
