"""Trainer throughput with snapshots on vs off, in the same process (baseline: snapshots off).

    python bench/bench_trainer.py [--steps 3000] [--preset quick] [--device auto]

Uses the demo's cadence (the quick preset: every 250 steps plus log-spaced early steps).
"""
from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _util import machine, overrides  # noqa: E402

from train import Trainer, preset  # noqa: E402
from train.trainer import snapshot_steps  # noqa: E402


def timed(cfg, out, snapshots: bool) -> float:
    t = Trainer(cfg, out, progress=False, snapshots=snapshots, overwrite=True)
    t0 = time.perf_counter()
    t.run()
    if t.device.type == "cuda":
        import torch

        torch.cuda.synchronize()
    return time.perf_counter() - t0


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--preset", default="quick")
    ap.add_argument("--steps", type=int, default=3000)
    ap.add_argument("--device", default="auto")
    ap.add_argument("--repeats", type=int, default=1)
    ap.add_argument("--set", nargs="*", default=[], help="extra config overrides key=value")
    args = ap.parse_args()
    extra = overrides(args.preset, args.set)
    cfg = preset(args.preset, steps=args.steps, device=args.device, gamma=0.8, **extra)
    n_snap = len(snapshot_steps(cfg))
    with tempfile.TemporaryDirectory() as d:
        out = Path(d) / "bench.h5"
        timed(preset(args.preset, steps=20, device=args.device), out, False)  # warm-up
        off, on = [], []
        for _ in range(args.repeats):
            off.append(timed(cfg, out, False))
            on.append(timed(cfg, out, True))
        size = out.stat().st_size
    best_off, best_on = min(off), min(on)
    print(f"machine: {machine()}")
    print(f"preset {args.preset}, {cfg.steps} steps, batch {cfg.batch_size}, device {args.device}, "
          f"{n_snap} snapshots ({size / 2**20:.1f} MiB file)")
    print(f"snapshots off (baseline): {best_off:.2f} s  {cfg.steps / best_off:.1f} steps/s")
    print(f"snapshots on:             {best_on:.2f} s  {cfg.steps / best_on:.1f} steps/s")
    print(f"overhead: {100 * (best_on / best_off - 1):+.1f}%  (ratio on/off {best_on / best_off:.3f})")


if __name__ == "__main__":
    main()
