"""Whether a snapshot costs more the more snapshots came before (issue 58, item 8; goal: the last window
of 500 snapshots at most 1.3x the first).

    OMP_NUM_THREADS=1 python bench/bench_snapshot_growth.py [--snapshots 2000] [--window 500] [--rounds 2]
                                                            [--trainer]

``probe.Recorder(every=1)`` records a tiny GPT-2 (Hugging Face ``GPT2LMHeadModel``: 2 layers, 2 heads,
d = 32, vocab 64, 16 positions; no probe batch, the loss every step) ``snapshots`` times into a new
file, and each window of ``window`` snapshots is timed. Two variants alternate in this one process,
``rounds`` times each, the order flipping from round to round: the writer as it is (no chunk cache)
and as it was before issue 58 (the baseline: HDF5's default chunk cache, 8 MiB a dataset in HDF5 2.0,
through ``probe.format._write.CHUNK_CACHE_BYTES = None``; same file layout, byte for byte the same
size). Printed per run: each window's seconds, the ratio last / first window, and the median time of
one snapshot among the first and the last 100; then each variant's median ratio. A first run of
each kind, not counted, warms the process up (its first window was the slowest of all).

``--trainer`` times the writer under ``probe-train``'s Trainer as well (the tiny preset, one snapshot a
step, ``snapshots`` steps): the CPU seconds inside ``Writer.append`` and ``save_resume`` per window
(training and evaluation are the same in both variants, so only the writer's calls are timed).
"""
from __future__ import annotations

import argparse
import functools
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _util import machine  # noqa: E402

from probe.format import _write  # noqa: E402
from probe.format import writer  # noqa: E402

VARIANTS = {"no chunk cache (now)": 0, "HDF5's chunk cache (baseline)": None}


def recorder_run(model, folder: str, k: int, n: int, window: int) -> tuple[list[float], list[float]]:
    """(seconds of each window, seconds of each snapshot) of ``n`` snapshots through a new Recorder."""
    import probe

    each: list[float] = []
    with probe.Recorder(os.path.join(folder, f"run{k}.h5"), model, every=1, overwrite=True) as rec:
        for step in range(n):
            t0 = time.perf_counter()
            rec.step(step, loss=1.0 / (step + 1))
            each.append(time.perf_counter() - t0)
    return [sum(each[i:i + window]) for i in range(0, n, window)], each


WRITING: list[float] = []   # CPU seconds inside the writer, per snapshot (--trainer)


def _timed(fn):
    @functools.wraps(fn)
    def timed(*args, **kw):
        c0 = time.process_time()
        try:
            return fn(*args, **kw)
        finally:
            if fn.__name__ == "append":
                WRITING.append(0.0)
            if WRITING:
                WRITING[-1] += time.process_time() - c0
    return timed


def trainer_run(folder: str, k: int, n: int, window: int) -> tuple[list[float], list[float]]:
    from probe_train import Trainer, preset

    cfg = preset("tiny", steps=n - 1, snapshot_every=1, snapshot_log=False, threads=1, gamma=0.8)   # (step 0 too)
    WRITING.clear()
    Trainer(cfg, Path(folder) / f"train{k}.h5", show_progress=False, overwrite=True).run()
    each = list(WRITING)
    return [sum(each[i:i + window]) for i in range(0, n, window)], each


def report(name: str, windows: list[float], each: list[float]) -> float:
    ratio = windows[-1] / windows[0]
    first, last = statistics.median(each[:100]) * 1e3, statistics.median(each[-100:]) * 1e3
    print(f"  {name}: windows {', '.join(f'{w:.2f}' for w in windows)} s; last / first {ratio:.2f}; "
          f"a snapshot {first:.1f} ms among the first 100, {last:.1f} ms among the last 100", flush=True)
    return ratio


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--snapshots", type=int, default=2000)
    ap.add_argument("--window", type=int, default=500)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--trainer", action="store_true", help="also time the writer under probe-train's Trainer")
    a = ap.parse_args()

    import torch
    import transformers as T

    torch.set_num_threads(1)
    T.logging.set_verbosity_error()
    torch.manual_seed(0)
    model = T.GPT2LMHeadModel(T.GPT2Config(n_layer=2, n_head=2, n_embd=32, vocab_size=64, n_positions=16))
    print(f"tiny GPT-2 ({sum(p.numel() for p in model.parameters())} parameters), {a.snapshots} snapshots in "
          f"windows of {a.window}, {a.rounds} rounds; OMP_NUM_THREADS={os.environ.get('OMP_NUM_THREADS')}; "
          f"{machine()}", flush=True)
    kinds = [("Recorder", lambda folder, k, n: recorder_run(model, folder, k, n, a.window))]
    if a.trainer:
        writer.Writer.append = _timed(writer.Writer.append)
        writer.Writer.save_resume = _timed(writer.Writer.save_resume)
        kinds.append(("Trainer (the writer's CPU time)",
                      lambda folder, k, n: trainer_run(folder, k, n, a.window)))
    with tempfile.TemporaryDirectory() as folder:
        for kind, run in kinds:
            run(folder, -1, a.window)   # the warm-up, not counted
            print(f"{kind}:")
            ratios: dict[str, list[float]] = {v: [] for v in VARIANTS}
            for k in range(a.rounds):
                order = list(VARIANTS) if k % 2 == 0 else list(VARIANTS)[::-1]
                for v in order:
                    _write.CHUNK_CACHE_BYTES = VARIANTS[v]
                    try:
                        ratios[v].append(report(f"round {k + 1}, {v}", *run(folder, k, a.snapshots)))
                    finally:
                        _write.CHUNK_CACHE_BYTES = 0
            for v, rs in ratios.items():
                print(f"  {v}: median last / first window {statistics.median(rs):.2f} (goal <= 1.3)")


if __name__ == "__main__":
    main()
