#!/usr/bin/env python3
"""Speed of `compress --base` and `decompress --base` against plain, one worker.

For each fine-tune FT of base BASE (make them with `cargo run --release --example
finetunes -- BASE OUT_DIR`), five interleaved rounds of: plain compress, compress
--base, plain decompress, decompress --base (to /dev/null, so the disk does not time
them), then the medians and their ratios (issue 42's bars: compress --base at least 0.5x
plain, decompress with the base at least 0.8x plain) and both archives' sizes.

    scripts/base_speed.py target/release/brevis BASE.safetensors FT.safetensors [FT...]
"""
import os
import statistics
import subprocess
import sys
import tempfile
import time


def timed(args):
    start = time.perf_counter()
    subprocess.run(args, check=True, capture_output=True)
    return time.perf_counter() - start


def main():
    if len(sys.argv) < 4:
        sys.exit(__doc__)
    brevis, base, fts = sys.argv[1], sys.argv[2], sys.argv[3:]
    one = ['--jobs', '1', '--force']
    with tempfile.TemporaryDirectory() as tmp:
        plain, against = os.path.join(tmp, 'p.brv'), os.path.join(tmp, 'b.brv')
        for ft in fts:
            t = {k: [] for k in ('cp', 'cb', 'dp', 'db')}
            for _ in range(5):
                t['cp'].append(timed([brevis, 'compress', ft, '-o', plain, '--no-verify', *one]))
                t['cb'].append(timed([brevis, 'compress', ft, '-o', against, '--no-verify',
                                      '--base', base, *one]))
                t['dp'].append(timed([brevis, 'decompress', plain, '-o', '/dev/null', *one]))
                t['db'].append(timed([brevis, 'decompress', against, '-o', '/dev/null',
                                      '--base', base, *one]))
            m = {k: statistics.median(v) for k, v in t.items()}
            print(f"{os.path.basename(ft)}: compress {m['cp']:.3f} s, --base {m['cb']:.3f} s "
                  f"({m['cp'] / m['cb']:.2f}x); decompress {m['dp']:.3f} s, --base "
                  f"{m['db']:.3f} s ({m['dp'] / m['db']:.2f}x); bytes {os.path.getsize(plain):,} "
                  f"alone, {os.path.getsize(against):,} --base", flush=True)


if __name__ == '__main__':
    main()
