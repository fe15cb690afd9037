"""`probe batch` throughput: checkpoints per second with --jobs 1 (baseline) and --jobs 2, same run.

    python bench/bench_batch.py [--n 16] [--d 384] [--layers 6]

Writes n nanoGPT-format checkpoints (GPT-2 shape, random weights) and runs `--probe spectrum`.
"""
from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _util import machine  # noqa: E402

from probe.batch import batch  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=16)
    ap.add_argument("--d", type=int, default=384)
    ap.add_argument("--layers", type=int, default=6)
    args = ap.parse_args()
    d, L = args.d, args.layers
    with tempfile.TemporaryDirectory() as tmp:
        for k in range(args.n):
            g = torch.Generator().manual_seed(k)
            sd = {"transformer.wte.weight": torch.randn(2048, d, generator=g)}
            for i in range(L):
                p = f"transformer.h.{i}."
                sd[p + "attn.c_attn.weight"] = torch.randn(3 * d, d, generator=g)
                sd[p + "attn.c_proj.weight"] = torch.randn(d, d, generator=g)
                sd[p + "mlp.c_fc.weight"] = torch.randn(4 * d, d, generator=g)
                sd[p + "mlp.c_proj.weight"] = torch.randn(d, 4 * d, generator=g)
            torch.save({"model": sd, "model_args": {"n_head": 6}}, Path(tmp) / f"ckpt_{k * 100}.pt")
        times = {}
        tables = {}
        for jobs in (1, 2):
            t0 = time.perf_counter()
            tables[jobs] = batch([tmp], ["spectrum"], {}, jobs=jobs)
            times[jobs] = time.perf_counter() - t0
    print(f"machine: {machine()}")
    print(f"{args.n} checkpoints (GPT-2 shape, d {d}, {L} layers, {4 * L + 1} matrices each), probe spectrum")
    for jobs, t in times.items():
        print(f"--jobs {jobs}: {t:.2f} s, {args.n / t:.2f} checkpoints/s"
              + (" (baseline)" if jobs == 1 else f", x{times[1] / t:.2f} vs --jobs 1"))
    worst = max((abs(a[5] - b[5]) / max(abs(b[5]), 1e-300) for a, b in zip(tables[1], tables[2])
                 if isinstance(a[5], float) and a[5] == a[5]), default=0.0)
    same_keys = [r[:5] for r in tables[1]] == [r[:5] for r in tables[2]]
    print(f"same rows: {same_keys} ({len(tables[1])} rows); largest relative difference of a value {worst:.1e} "
          "(workers run single-threaded BLAS)")


if __name__ == "__main__":
    main()
