"""Each preset's training speed on this machine, the way figures and sweeps train: through the trainer
queue of :mod:`probe_train.runs` (forked from its fork server, one torch thread each), two runs at once
on two cores.

    python bench/bench_presets.py [PRESET ...] [--set k=v ...] [--repeats 2]

A run's time is modelled as start-up + steps x step time + snapshots x snapshot time
(:mod:`probe_train.speeds`). Four measurements per preset give the three numbers: D (1 step), A (S
steps) and B (2S steps), each with snapshots at the first and last step only, and C (S steps at the
preset's own snapshot cadence): step = (B - A) / S, snapshot = (C - A) / (snapshots of C - 2),
start-up = D - step - 2 snapshots. Each measurement is a pair of identical runs at once (the second
core busy, as in ``probe figures``), timed from its start in the queue to its end; ``--repeats`` times,
interleaved, median. Prints the table (train/speeds.py measures each preset on the user's machine at its
first use, in one short run), and checks the model on a fifth measurement it was not fitted to: E (3S
steps at the preset's cadence), predicted vs measured.
"""
from __future__ import annotations

import argparse
import re
import statistics
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _util import machine, overrides  # noqa: E402

from probe_train.config import preset, snapshot_steps  # noqa: E402
from probe_train.runs import plan, train_jobs  # noqa: E402

# the presets the figures train at --tiny and --quick (probe.figures.EXPERIMENTS), with the step count
# S of the measurement (about 5-15 s of training each)
DEFAULT = {"tiny": 200, "lm-tiny": 100, "llm-tiny": 100, "quick": 300, "emb-mlp-quick": 1000,
           "composite-mini": 400, "lm-mini": 200, "llm-mini": 100}


def timed_pair(name: str, extra: dict, folder: Path) -> float:
    """Seconds one run takes with a second, identical run beside it (the mean of the two)."""
    wanted = {f"r{i}": (name, {**extra, "seed": i}) for i in range(2)}   # two files, the same work
    _, todo = plan(wanted, folder, threads=1, retrain=True)
    lines: list[str] = []
    failed = train_jobs(todo, 2, lines.append, keep_going=True)
    if failed:
        raise SystemExit(f"{name} {extra}: {failed}")
    took = [float(m.group(1)) for ln in lines if (m := re.match(r"\s+done \S+ in ([\d.]+) s", ln))]
    return sum(took) / len(took)


def measure(name: str, S: int, base: dict, repeats: int, folder: Path) -> dict:
    flat = {"snapshot_every": 0, "snapshot_log": False}
    runs = {"D": {**base, "steps": 1, **flat}, "A": {**base, "steps": S, **flat},
            "B": {**base, "steps": 2 * S, **flat}, "C": {**base, "steps": S}, "E": {**base, "steps": 3 * S}}
    times: dict[str, list[float]] = {k: [] for k in runs}
    for _ in range(repeats):
        for k, extra in runs.items():   # interleaved: a busy spell of the machine touches every one
            times[k].append(timed_pair(name, extra, folder))
    d, a, b, c, e = (statistics.median(times[k]) for k in "DABCE")
    n_c = len(snapshot_steps(preset(name, **runs["C"])))
    n_e = len(snapshot_steps(preset(name, **runs["E"])))
    step = (b - a) / S
    snap = (c - a) / max(1, n_c - 2)
    start = d - step - 2 * snap
    predicted_e = start + 3 * S * step + n_e * snap
    return {"start_s": start, "step_s": step, "snapshot_s": snap, "E": e, "E_model": predicted_e, "S": S}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("presets", nargs="*", help="presets to measure (default: those the figures train)")
    ap.add_argument("--set", nargs="*", default=[], help="overrides k=v for a candidate configuration")
    ap.add_argument("--steps", type=int, default=0, help="S (default: per preset)")
    ap.add_argument("--repeats", type=int, default=2)
    a = ap.parse_args()
    names = a.presets or list(DEFAULT)
    print(f"# {machine()}; two runs at once through the trainer queue, one torch thread each; median of "
          f"{a.repeats}", flush=True)
    print(f"{'preset':<16} {'S':>5} {'start s':>8} {'ms/step':>8} {'s/snapshot':>10}   "
          f"{'E (3S) s':>8} {'model s':>8} {'model/E':>7}")
    with tempfile.TemporaryDirectory() as d:
        for name in names:
            base = overrides(name, a.set) if a.set else {}
            m = measure(name, a.steps or DEFAULT.get(name, 200), base, a.repeats, Path(d))
            print(f"{name:<16} {m['S']:>5} {m['start_s']:>8.2f} {1e3 * m['step_s']:>8.2f} {m['snapshot_s']:>10.3f}   "
                  f"{m['E']:>8.2f} {m['E_model']:>8.2f} {m['E_model'] / m['E']:>7.3f}", flush=True)


if __name__ == "__main__":
    main()
