"""Are small-init runs more alike than large-init runs? Linear CKA between seeds (paper 1 anchor task).

Trains (or reuses, when a file exists and is finished) ``--seeds`` runs of ``--preset`` (default ``quick``)
for each of two γ (default 0.3, large init, and 0.8, small init: std = fan_in^-γ), at most ``--jobs`` at
once, one torch thread each; the data (``--data-seed``, the preset's 0) is the same for all runs, the seed
changes the initialization and the batch order. Then, per γ, computes ``probe.cka(a, b, tokens=...)``
(token-embedding rows of the reasoning anchors) for every pair of seeds at the last step, at the snapshot
nearest ``--early`` of training, and at step 0 (the random-init reference), and reports the mean over
pairs with a 95 % bootstrap interval over seeds (seeds resampled with replacement; the mean over the
pairs of distinct seeds recomputed), and the difference small-init minus large-init (seeds resampled
independently per γ) with its interval and a verdict.

    OMP_NUM_THREADS=1 .venv/bin/python bench/cka_seeds.py /tmp/cka_runs --seeds 6

Writes DIR/g{γ}_s{seed}.h5 (and .log), and DIR/cka_seeds.json with every pair's CKA.
"""
from __future__ import annotations

import os

os.environ.setdefault("OMP_NUM_THREADS", "1")

import argparse
import datetime
import itertools
import json
import platform
import shutil
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent


def cpu_model() -> str:
    try:
        with open("/proc/cpuinfo") as fh:
            for line in fh:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def commit() -> str:
    try:
        out = subprocess.run(["git", "rev-parse", "HEAD"], cwd=ROOT, capture_output=True, text=True, check=True)
        return out.stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown"


def finished(path: Path, gamma: float, seed: int, preset_steps: int) -> bool:
    """True when ``path`` is a readable run of this γ and seed whose last snapshot is the last step."""
    import probe

    if not path.exists():
        return False
    try:
        info = probe.info(str(path))
    except Exception:  # a damaged or half-written file: train it again
        return False
    cfg = info.get("config") or {}
    return (bool(info.get("steps")) and info["steps"][-1] == cfg.get("steps") == preset_steps
            and abs(float(cfg.get("gamma", -1)) - gamma) < 1e-12 and int(cfg.get("seed", -1)) == seed)


def probe_train() -> str:
    here = Path(sys.executable).parent / "probe-train"
    return str(here) if here.exists() else (shutil.which("probe-train") or "probe-train")


def train_all(jobs: list[tuple[float, int, Path]], preset: str, parallel: int) -> None:
    env = dict(os.environ, OMP_NUM_THREADS="1")
    pending, running = list(jobs), {}
    while pending or running:
        while pending and len(running) < parallel:
            gamma, seed, out = pending.pop(0)
            log = open(out.with_suffix(".log"), "w")
            cmd = [probe_train(), "--preset", preset, "--gamma", str(gamma), "--seed", str(seed),
                   "--threads", "1", "--quiet", "--overwrite", "--out", str(out)]
            print(f"  train γ={gamma} seed={seed} -> {out}", flush=True)
            running[subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, env=env)] = (gamma, seed, out, log,
                                                                                           time.perf_counter())
        time.sleep(2)
        for p in [p for p in running if p.poll() is not None]:
            gamma, seed, out, log, t0 = running.pop(p)
            log.close()
            if p.returncode != 0:
                raise SystemExit(f"training γ={gamma} seed={seed} failed (exit {p.returncode}); see "
                                 f"{out.with_suffix('.log')}")
            print(f"  done  γ={gamma} seed={seed} in {time.perf_counter() - t0:.0f} s", flush=True)


def pair_matrix(paths: list[Path], tokens: str, step: int) -> np.ndarray:
    import probe

    n = len(paths)
    m = np.full((n, n), np.nan)
    for i, j in itertools.combinations(range(n), 2):
        m[i, j] = m[j, i] = probe.cka(str(paths[i]), str(paths[j]), tokens=tokens, step=step)[0].cka
    return m


def mean_pairs(m: np.ndarray, idx: np.ndarray) -> float:
    """Mean of m over the position pairs a < b of the (resampled) seeds ``idx`` whose seeds differ."""
    a, b = np.triu_indices(len(idx), 1)
    keep = idx[a] != idx[b]
    return float(m[idx[a][keep], idx[b][keep]].mean()) if keep.any() else float("nan")


def boot(m: np.ndarray, rng: np.random.Generator, n: int) -> np.ndarray:
    """``n`` bootstrap means over seeds (a draw with a single distinct seed has no pair: drawn again)."""
    s, out = len(m), np.empty(n)
    k = 0
    while k < n:
        v = mean_pairs(m, rng.integers(0, s, s))
        if not np.isnan(v):
            out[k] = v
            k += 1
    return out


def ci(x: np.ndarray) -> tuple[float, float]:
    lo, hi = np.percentile(x, [2.5, 97.5])
    return float(lo), float(hi)


def chance(n: int, dim: int, draws: int = 2000, seed: int = 0) -> dict:
    """The CKA of unrelated vectors: two independent Gaussian (n, dim) matrices, ``draws`` times; mean and
    the 2.5–97.5 percentiles. With few tokens in many dimensions linear CKA is high by chance."""
    from probe.analyses.cka import linear_cka

    rng = np.random.default_rng(seed)
    v = np.array([linear_cka(rng.standard_normal((n, dim)), rng.standard_normal((n, dim))).cka for _ in range(draws)])
    return {"mean": float(v.mean()), "ci95": ci(v), "draws": draws, "shape": [n, dim], "rng_seed": seed}


def pair_range(per_gamma: dict) -> dict:
    """Per γ, the lowest and highest CKA over its pairs of seeds."""
    return {g: [min(p["cka"] for p in r["pairs"]), max(p["cka"] for p in r["pairs"])] for g, r in per_gamma.items()}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("dir", nargs="?", default="/tmp/cka_runs", help="runs folder (default /tmp/cka_runs)")
    ap.add_argument("--preset", default="quick")
    ap.add_argument("--gammas", default="0.3,0.8", help="large-init γ, small-init γ (default 0.3,0.8)")
    ap.add_argument("--seeds", type=int, default=6, help="seeds 0..S-1 per γ (default 6)")
    ap.add_argument("--jobs", type=int, default=2, help="trainings at once (default 2)")
    ap.add_argument("--tokens", default="reasoning")
    ap.add_argument("--early", type=float, default=0.1, help="early step: the snapshot nearest this fraction")
    ap.add_argument("--resamples", type=int, default=2000)
    ap.add_argument("--rng", type=int, default=0, help="seed of the bootstrap")
    args = ap.parse_args()

    from probe_train import preset as get_preset

    import probe

    big, small = (float(g) for g in args.gammas.split(","))  # big init = small γ
    gammas, seeds = (big, small), list(range(args.seeds))
    d = Path(args.dir)
    d.mkdir(parents=True, exist_ok=True)
    steps = get_preset(args.preset).steps
    runs = {g: [d / f"g{g}_s{s}.h5" for s in seeds] for g in gammas}

    t0 = time.perf_counter()
    todo = [(g, s, runs[g][k]) for g in gammas for k, s in enumerate(seeds) if not finished(runs[g][k], g, s, steps)]
    print(f"{len(todo)} of {len(gammas) * len(seeds)} runs to train into {d} ({args.jobs} at once)", flush=True)
    if todo:
        train_all(todo, args.preset, args.jobs)
    train_s = time.perf_counter() - t0
    bad = [str(p) for g in gammas for s, p in zip(seeds, runs[g]) if not finished(p, g, s, steps)]
    if bad:
        raise SystemExit(f"not finished: {bad}")

    have = [set(probe.info(str(p))["steps"]) for g in gammas for p in runs[g]]
    common = sorted(set.intersection(*have))
    early = min(common, key=lambda s: (abs(s - args.early * steps), s))
    at = {"step 0 (random init)": 0, f"early (step {early})": early, f"last (step {steps})": steps}

    rng = np.random.default_rng(args.rng)
    results, acc = {}, {g: [probe.info(str(p))["metrics"] for p in runs[g]] for g in gammas}
    for label, step in at.items():
        mats = {g: pair_matrix(runs[g], args.tokens, step) for g in gammas}
        bs = {g: boot(mats[g], rng, args.resamples) for g in gammas}
        means = {g: mean_pairs(mats[g], np.arange(len(seeds))) for g in gammas}
        diff = bs[small] - bs[big]
        lo, hi = ci(diff)
        verdict = ("shown: small-init runs are more alike" if lo > 0 else
                   "shown: small-init runs are less alike" if hi < 0 else "not shown")
        results[label] = {
            "step": step,
            "per_gamma": {str(g): {"mean": means[g], "ci95": ci(bs[g]),
                                   "pairs": [{"seeds": [seeds[i], seeds[j]], "cka": float(mats[g][i, j])}
                                             for i, j in itertools.combinations(range(len(seeds)), 2)]}
                          for g in gammas},
            "diff_small_minus_large": {"mean": means[small] - means[big], "ci95": (lo, hi)},
            "verdict": verdict,
        }
        results[label]["range"] = pair_range(results[label]["per_gamma"])

    print()
    print(f"linear CKA of the '{args.tokens}' token embeddings between seeds, preset {args.preset}, "
          f"{len(seeds)} seeds per γ ({len(seeds) * (len(seeds) - 1) // 2} pairs), "
          f"95 % bootstrap over seeds ({args.resamples} resamples)")
    h = f"{'step':<24} {'γ=' + str(big) + ' (large init)':<26} {'γ=' + str(small) + ' (small init)':<26} " \
        f"{'small − large':<26} verdict"
    print(h)
    print("-" * len(h))
    for label, r in results.items():
        cells = [f"{r['per_gamma'][str(g)]['mean']:.3f} [{r['per_gamma'][str(g)]['ci95'][0]:.3f}, "
                 f"{r['per_gamma'][str(g)]['ci95'][1]:.3f}]" for g in gammas]
        dd = r["diff_small_minus_large"]
        cells.append(f"{dd['mean']:+.3f} [{dd['ci95'][0]:+.3f}, {dd['ci95'][1]:+.3f}]")
        print(f"{label:<24} {cells[0]:<26} {cells[1]:<26} {cells[2]:<26} {r['verdict']}")
    print()
    for g in gammas:
        last = acc[g]
        print(f"γ={g}: acc[rsn_test] at the last step per seed: "
              + " ".join(f"{m['rsn_test']['acc']:.2f}" for m in last)
              + f"; acc[mem]: " + " ".join(f"{m['mem']['acc']:.2f}" for m in last))

    record = {
        "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "machine": {"uname_m": platform.machine(), "cpu": cpu_model(), "cores": os.cpu_count()},
        "commit": commit(),
        "command": " ".join([Path(sys.executable).name, *sys.argv]),
        "preset": args.preset, "steps": steps, "tokens": args.tokens,
        "gammas": {"large_init": big, "small_init": small}, "seeds": seeds,
        "bootstrap": {"resamples": args.resamples, "rng_seed": args.rng, "unit": "seed", "ci": 0.95},
        "train_seconds": round(train_s, 1), "trained": len(todo),
        "runs": {str(g): [str(p) for p in runs[g]] for g in gammas},
        "final_metrics": {str(g): acc[g] for g in gammas},
        "results": results,
        "chance": chance(probe.cka(str(runs[big][0]), str(runs[big][1]), tokens=args.tokens)[0].n,
                         get_preset(args.preset).d_model),
    }
    out = d / "cka_seeds.json"
    out.write_text(json.dumps(record, indent=1))
    print(f"\nwrote {out}")


if __name__ == "__main__":
    main()
