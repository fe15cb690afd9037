"""`probe similarity` over a whole 50257 x 768 vocabulary, summarised block by block.

Peak traced memory (tracemalloc, numpy buffers included) against the 9.4 GiB that the
materialised 50257 x 50257 float32 matrix alone would take (baseline: arithmetic, not run).

    python bench/bench_full_vocab.py [--file PATH]    # the synthetic file of bench_similarity.py
"""
from __future__ import annotations

import argparse
import sys
import tempfile
import time
import tracemalloc
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _util import machine  # noqa: E402

import probe  # noqa: E402
import probe.api  # noqa: E402,F401


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--file")
    args = ap.parse_args()
    tmp = tempfile.TemporaryDirectory()
    path = Path(args.file) if args.file else Path(tmp.name) / "gpt2.h5"
    if not path.exists():
        from bench_similarity import make_file

        make_file(path)
    probe.similarity(path, "0:2")
    V = 50257
    tracemalloc.start()
    t0 = time.perf_counter()
    r = probe.similarity(path, f"0:{V}")[0]
    secs = time.perf_counter() - t0
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    full = V * V * 4
    print(f"machine: {machine()}")
    print(f"similarity over all {V} tokens: {secs:.1f} s, peak {peak / 2**30:.2f} GiB traced "
          f"(a materialised {V} x {V} float32 matrix: {full / 2**30:.1f} GiB; ratio {peak / full:.3f})")
    print(f"mean off-diagonal {r.mean_offdiag:.2e}, {len(r.by_distance)} distances, "
          f"sampled distance_corr {r.distance_corr:.4f}")


if __name__ == "__main__":
    main()
