"""`probe similarity` on a GPT-2-sized synthetic snapshot (vocab 50257 x 768, 20 snapshots).

Bytes read (from /proc/self/io rchar) and time, against named baselines in the same run:
  * bare h5py: ``ds[i, 1000:1100]`` on the same dataset (the least any reader can do);
  * naive: load the full embedding at that step, then take the rows (``ds[i][ids]``).

    python bench/bench_similarity.py [--file PATH]
"""
from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _util import machine, rchar  # noqa: E402

import h5py  # noqa: E402

import probe  # noqa: E402
import probe.api  # noqa: E402,F401  (import before measuring: module loading is not a read of the file)
from probe.format import Writer  # noqa: E402

VOCAB, D, SNAPS = 50257, 768, 20


def make_file(path: Path) -> float:
    t0 = time.perf_counter()
    rng = np.random.default_rng(0)
    w = Writer.create(path, config={}, task={"kind": "synthetic", "splits": ["train"]},
                      dims={"vocab": VOCAB, "d_model": D, "seq": 1, "probe": 1, "layers": 0, "heads": 1,
                            "d_head": 1, "d_hidden": D},
                      groups={"sample": list(range(1000, 1100))}, run_arrays={},
                      params={"wte": (VOCAB, D)}, roles={"token_embedding": "wte"},
                      attention_shape=None, resume_tensors={})
    base = rng.standard_normal((VOCAB, D), dtype=np.float32) * 0.02
    for i in range(SNAPS):
        base[:: 97] += 0.001  # change something each step
        w.append(step=i * 1000, epoch=float(i), time=float(i), train_loss=0.0, params={"wte": base},
                 metrics={"train": {"loss": 0.0, "acc": 0.0}})
    w.close()
    return time.perf_counter() - t0


def measure(fn):
    r0, t0 = rchar(), time.perf_counter()
    out = fn()
    return time.perf_counter() - t0, rchar() - r0, out


def drop_caches() -> bool:
    try:
        os.sync()
        with open("/proc/sys/vm/drop_caches", "w") as fh:
            fh.write("3\n")
        return True
    except OSError:
        return False


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--file", help="keep the synthetic file here and reuse it next time")
    args = ap.parse_args()
    tmp = tempfile.TemporaryDirectory()
    path = Path(args.file) if args.file else Path(tmp.name) / "gpt2_sized.h5"
    if not path.exists():
        secs = make_file(path)
        print(f"wrote {path} in {secs:.1f} s", file=sys.stderr)
    size = path.stat().st_size
    ids = np.arange(1000, 1100)
    scattered = np.sort(np.random.default_rng(1).choice(VOCAB, 100, replace=False))
    can_drop = drop_caches()
    print(f"machine: {machine()}")
    print(f"file: {size / 2**30:.2f} GiB, {SNAPS} snapshots of {VOCAB} x {D} float32; cold = "
          + ("page cache dropped before the call" if can_drop else "NOT cold: could not drop the page cache"))
    print(f"{'what':<50} {'cold s':>7} {'warm s':>7} {'MiB read':>9} {'of file':>9}")

    def bare():
        with h5py.File(path, "r") as f:
            return f["snapshots/params/wte"][SNAPS - 1, 1000:1100]

    def naive():
        with h5py.File(path, "r") as f:
            return f["snapshots/params/wte"][SNAPS - 1][ids]

    spec = ",".join(map(str, scattered))
    cases = [
        ("baseline: bare h5py ds[-1, 1000:1100]", bare),
        ("baseline: naive full read ds[-1][ids]", naive),
        ("probe.similarity 1000:1100 (latest)", lambda: probe.similarity(path, "1000:1100")),
        ("probe.similarity 100 scattered ids (latest)", lambda: probe.similarity(path, spec)),
        ("probe.similarity 1000:1100 --step all (20 steps)",
         lambda: probe.similarity(path, "1000:1100", step="all")),
    ]
    probe.similarity(path, "0:2")  # first call loads lazily imported modules; not part of any case
    res = {}
    for name, fn in cases:
        drop_caches()
        t_cold, b_cold, _ = measure(fn)
        t_warm, _, _ = measure(fn)
        res[name] = (t_cold, t_warm, b_cold)
        print(f"{name:<50} {t_cold:>7.3f} {t_warm:>7.3f} {b_cold / 2**20:>9.2f} {b_cold / size:>9.1e}")
    bare_r, naive_r, probe_r = (res[cases[i][0]] for i in range(3))
    print(f"\nprobe similarity (100 contiguous tokens) vs bare h5py read of the same rows: "
          f"cold x{probe_r[0] / bare_r[0]:.2f}, warm x{probe_r[1] / bare_r[1]:.2f} time, "
          f"x{probe_r[2] / bare_r[2]:.2f} bytes")
    print(f"vs naive full read: cold x{probe_r[0] / naive_r[0]:.3f} time, x{probe_r[2] / naive_r[2]:.4f} bytes")


if __name__ == "__main__":
    main()
