#!/usr/bin/env bash
# Peak resident memory of `brevis compress` / `decompress` (DESIGN §8: bounded by the
# largest tensor and the thread count, not the file size). A benchmark, not a test.
#
#   scripts/memory_bench.sh [FILE.safetensors] [GIB]
#
# 1. FILE (default ../shared/corpus/whisper-tiny-en-f16.safetensors) with --jobs 2:
#    prints peak RSS and the bound 4 x largest tensor + 64 MiB.
# 2. A synthetic checkpoint of GIB (default 4) GiB made of 64 MiB BF16 tensors, written
#    to a temporary folder under ${TMPDIR:-/tmp} and deleted afterwards; compressed with
#    --jobs 2 --budget 1. GIB=0 skips it. Needs about 2.7 x GIB of free disk space.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(dirname "$here")
brevis=${BREVIS:-${CARGO_TARGET_DIR:-$root/target}/release/brevis}
file=${1:-$root/../shared/corpus/whisper-tiny-en-f16.safetensors}
gib=${2:-4}
work=$(mktemp -d "${TMPDIR:-/tmp}/brevis-membench-XXXXXX")
trap 'rm -rf "$work"' EXIT

largest() {
  python3 - "$1" <<'EOF'
import json, struct, sys
with open(sys.argv[1], "rb") as f:
    (n,) = struct.unpack("<Q", f.read(8))
    h = json.loads(f.read(n))
print(max((v["data_offsets"][1] - v["data_offsets"][0]) for k, v in h.items() if k != "__metadata__"))
EOF
}

peak() { # command... -> prints "seconds peak_KiB"
  /usr/bin/time -f "%e %M" -o "$work/time" "$@" >/dev/null
  cat "$work/time"
}

report() { # label file
  local big bound c d
  big=$(largest "$2")
  bound=$(( (4 * big + 64 * 1048576) / 1048576 ))
  c=$(peak "$brevis" compress "$2" -o "$work/x.brv" --jobs 2 -f)
  d=$(peak "$brevis" decompress "$work/x.brv" -o "$work/x.safetensors" --jobs 2 -f)
  cmp -s "$2" "$work/x.safetensors" || { echo "round trip differs" >&2; exit 1; }
  printf '%s: %d MiB, largest tensor %d MiB, bound %d MiB\n' "$1" \
    $(( $(stat -c %s "$2") / 1048576 )) $(( big / 1048576 )) "$bound"
  printf '  compress   --jobs 2: %6.1f s, peak RSS %5d MiB\n' ${c% *} $(( ${c#* } / 1024 ))
  printf '  decompress --jobs 2: %6.1f s, peak RSS %5d MiB\n' ${d% *} $(( ${d#* } / 1024 ))
  rm -f "$work/x.brv" "$work/x.safetensors"
}

report "$(basename "$file")" "$file"
[ "$gib" -gt 0 ] || exit 0
python3 - "$work/synthetic.safetensors" "$gib" <<'EOF'
import json, struct, sys
import numpy as np
path, gib = sys.argv[1], int(sys.argv[2])
tensor_bytes = 64 << 20
count = gib * 1024 // 64
rows = tensor_bytes // 2 // 4096
header = {}
for i in range(count):
    header[f"layers.{i}.weight"] = {"dtype": "BF16", "shape": [rows, 4096],
                                    "data_offsets": [i * tensor_bytes, (i + 1) * tensor_bytes]}
text = json.dumps(header).encode()
text += b" " * (-len(text) % 8)
rng = np.random.default_rng(0)
with open(path, "wb") as f:
    f.write(struct.pack("<Q", len(text)))
    f.write(text)
    for i in range(count):
        x = (rng.standard_normal(tensor_bytes // 2, dtype=np.float32) * 0.02).view(np.uint32)
        f.write((x >> 16).astype("<u2").tobytes())
EOF
report "synthetic ${gib} GiB" "$work/synthetic.safetensors"
