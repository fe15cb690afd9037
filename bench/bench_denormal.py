"""CPU training speed with subnormal floats flushed to zero (as the trainer does) against
torch's default (subnormals kept: the baseline), in the same process, per gamma.

    python bench/bench_denormal.py [--preset composite-quick] [--steps 1500] [--gammas 0.5 0.8 1.0]
                                   [--repeats 2] [--set d_model=128 d_ff=512]

Small initialization (large gamma) pushes gradients and AdamW's second moments below
1.2e-38, where x86 arithmetic falls onto a slow path. The final losses of both variants are
printed too: flushing values that small must not change the run.
"""
from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _util import machine, overrides  # noqa: E402

import torch  # noqa: E402

from probe_train import Trainer, preset  # noqa: E402


def timed(cfg, out, flush: bool) -> tuple[float, float]:
    t = Trainer(cfg, out, show_progress=False, snapshots=False, overwrite=True)  # sets flush on CPU
    torch.set_flush_denormal(flush)
    t0 = time.perf_counter()
    r = t.run()
    seconds = time.perf_counter() - t0
    torch.set_flush_denormal(True)
    return seconds, next(iter(r.metrics.values()))["loss"]   # the first split's final loss


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--preset", default="composite-quick")
    ap.add_argument("--steps", type=int, default=1500)
    ap.add_argument("--gammas", type=float, nargs="+", default=[0.5, 0.8, 1.0])
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--repeats", type=int, default=1, help="timings per variant (best kept)")
    ap.add_argument("--set", nargs="*", default=[], help="extra config overrides key=value")
    args = ap.parse_args()
    extra = overrides(args.preset, args.set)
    print(f"machine: {machine()}")
    print(f"preset {args.preset}, {args.steps} steps, {args.threads} thread(s), cpu, {extra or ''}")
    print(f"{'gamma':>6} {'kept (baseline) s':>18} {'flushed s':>10} {'speed-up':>9} {'final loss kept / flushed':>27}")
    with tempfile.TemporaryDirectory() as d:
        out = Path(d) / "bench.h5"
        for g in args.gammas:
            cfg = preset(args.preset, steps=args.steps, gamma=g, device="cpu", threads=args.threads,
                         snapshot_every=10**9, **extra)
            timed(preset(args.preset, steps=10, gamma=g, device="cpu", threads=args.threads), out, True)  # warm-up
            secs, loss = {False: [], True: []}, {}
            for r in range(args.repeats):   # alternate the order so warm caches favour neither
                for flush in ((False, True) if r % 2 == 0 else (True, False)):
                    sec, loss[flush] = timed(cfg, out, flush)
                    secs[flush].append(sec)
            kept, flushed = min(secs[False]), min(secs[True])
            print(f"{g:>6.2f} {kept:>18.2f} {flushed:>10.2f} {kept / flushed:>8.2f}x "
                  f"{loss[False]:>13.6f} / {loss[True]:.6f}")


if __name__ == "__main__":
    main()
