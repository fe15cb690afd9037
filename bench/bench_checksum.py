"""What the snapshot checksums cost training (issue 35): the same run trained with the writer's
Fletcher-32 checksums (schema 1.4) and without them (the baseline: the writer as before 1.4, through
``probe.format.writer.CHECKSUMS``), alternating in one process, one torch thread.

    python bench/bench_checksum.py [--preset quick] [--steps 1500] [--pairs 6] [--set k=v ...]

Each pair trains both variants back to back, the order flipping from pair to pair (the machine drifts
by more than the effect). Measured per run: the wall time of ``Trainer.run`` (file creation and the
last snapshot included) and the CPU time this process spent in it (one torch thread, and the writer
runs in this process: on a machine shared with other jobs the CPU time is what the checksums add,
the wall time also what the neighbours took). Printed for each: the median of each variant, their
ratio, and the checksums' share of training time, (with - without) / without, per pair with their
mean and its 95 % t-interval. Then the same for the CPU time spent inside the writer alone
(``Writer.create``, ``append``, ``save_resume``, timed by wrapping them here): its difference, as a
share of the baseline's training CPU time, is the write cost without the noise of the rest of
training. Last, the time validate takes to read every chunk of the file once (``probe.validate``,
median of 5).
"""
from __future__ import annotations

import argparse
import functools
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _util import machine, overrides  # noqa: E402

import probe.format.writer as writer  # noqa: E402
from probe import validate  # noqa: E402
from probe_train import Trainer, preset  # noqa: E402
from probe_train.trainer import snapshot_steps  # noqa: E402


WRITING = [0.0]   # CPU seconds spent inside the writer's methods


def _timed(fn):
    @functools.wraps(fn)
    def timed(*args, **kw):
        c0 = time.process_time()
        try:
            return fn(*args, **kw)
        finally:
            WRITING[0] += time.process_time() - c0
    return timed


writer.Writer.create = classmethod(_timed(writer.Writer.create.__func__))
writer.Writer.append = _timed(writer.Writer.append)
writer.Writer.save_resume = _timed(writer.Writer.save_resume)


def train(cfg, out: Path, checksums: bool) -> tuple[float, float, float]:
    """(wall, CPU, CPU inside the writer) seconds of one training run, with or without checksums."""
    writer.CHECKSUMS = checksums
    try:
        t = Trainer(cfg, out, show_progress=False, overwrite=True)
        WRITING[0] = 0.0
        t0, c0 = time.perf_counter(), time.process_time()
        t.run()
        return time.perf_counter() - t0, time.process_time() - c0, WRITING[0]
    finally:
        writer.CHECKSUMS = True


def summary(what: str, without: list[float], with_: list[float]) -> None:
    from scipy import stats

    base, new = statistics.median(without), statistics.median(with_)
    shares = [100 * (w / wo - 1) for wo, w in zip(without, with_)]
    mean = statistics.fmean(shares)
    half = stats.t.ppf(0.975, len(shares) - 1) * statistics.stdev(shares) / len(shares) ** 0.5
    print(f"{what}: median without (baseline) {base:.2f} s, with {new:.2f} s; ratio {new / base:.4f}; "
          f"checksums' share per pair {', '.join(f'{s:+.2f}' for s in shares)} %; "
          f"mean {mean:+.2f} % [95 % interval {mean - half:+.2f}, {mean + half:+.2f}]")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--preset", default="quick")
    ap.add_argument("--steps", type=int, default=1500)
    ap.add_argument("--pairs", type=int, default=6)
    ap.add_argument("--set", nargs="*", default=[], metavar="K=V", help="config overrides, as probe-train --set")
    a = ap.parse_args()
    cfg = preset(a.preset, steps=a.steps, threads=1, gamma=0.8, **overrides(a.preset, a.set))
    print(f"machine: {machine()}")
    print(f"preset {a.preset}, {cfg.steps} steps, batch {cfg.batch_size}, {len(snapshot_steps(cfg))} snapshots, "
          f"one torch thread; {a.pairs} pairs, the order flipping each pair")
    times: dict[bool, list[tuple[float, float, float]]] = {False: [], True: []}
    with tempfile.TemporaryDirectory() as d:
        outs = {False: Path(d) / "without.h5", True: Path(d) / "with.h5"}
        train(cfg, outs[True], True)   # warm-up: imports, first allocations (not counted)
        for i in range(a.pairs):
            for checksums in ((False, True) if i % 2 == 0 else (True, False)):
                times[checksums].append(train(cfg, outs[checksums], checksums))
            (wo, cwo, xwo), (w, cw, xw) = times[False][-1], times[True][-1]
            print(f"pair {i}: wall without {wo:.2f} s, with {w:.2f} s ({100 * (w / wo - 1):+.2f} %); "
                  f"CPU without {cwo:.2f} s, with {cw:.2f} s ({100 * (cw / cwo - 1):+.2f} %); "
                  f"writer CPU without {xwo:.3f} s, with {xw:.3f} s", flush=True)
        sizes = {k: p.stat().st_size for k, p in outs.items()}
        reads = []
        for _ in range(5):
            t0 = time.perf_counter()
            assert validate(outs[True]) == []
            reads.append(time.perf_counter() - t0)
    for k, what in enumerate(("wall time", "CPU time")):
        summary(what, [t[k] for t in times[False]], [t[k] for t in times[True]])
    from scipy import stats

    cost = [100 * (w[2] - wo[2]) / wo[1] for wo, w in zip(times[False], times[True])]
    mean = statistics.fmean(cost)
    half = stats.t.ppf(0.975, len(cost) - 1) * statistics.stdev(cost) / len(cost) ** 0.5
    print(f"writer CPU: median without (baseline) {statistics.median(t[2] for t in times[False]):.3f} s, with "
          f"{statistics.median(t[2] for t in times[True]):.3f} s; the difference as a share of training CPU time: "
          f"per pair {', '.join(f'{c:+.3f}' for c in cost)} %; mean {mean:+.3f} % "
          f"[95 % interval {mean - half:+.3f}, {mean + half:+.3f}]")
    print(f"file: {sizes[False] / 2**20:.2f} MiB without, {sizes[True] / 2**20:.2f} MiB with "
          f"({sizes[True] - sizes[False]:+d} bytes); validate (every chunk read) {statistics.median(reads):.3f} s")


if __name__ == "__main__":
    main()
