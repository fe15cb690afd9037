"""The probe suite against straightforward numpy (load everything, then compute), in one run.

    python bench/bench_probes.py [--gpt2-file PATH]

A: every probe with --step all over a 100-snapshot run of the quick preset (trained here, ~30 s).
B: probes at the latest step of a GPT-2-sized synthetic snapshot (20 x 50257 x 768, 2.9 GiB).
Columns: wall time, peak traced memory (tracemalloc, numpy buffers included), bytes read (rchar).
"""
from __future__ import annotations

import argparse
import sys
import tempfile
import time
import tracemalloc
from pathlib import Path

import h5py
import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _util import machine, rchar  # noqa: E402

import probe  # noqa: E402
import probe.api  # noqa: E402,F401
from probe.analyses.stats import cosine_matrix  # noqa: E402


def measure(fn):
    tracemalloc.start()
    r0, t0 = rchar(), time.perf_counter()
    fn()
    t = time.perf_counter() - t0
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    return t, peak, rchar() - r0


def report(name, probe_fn, naive_fn, size):
    tp, mp, bp = measure(probe_fn)
    tn, mn, bn = measure(naive_fn) if naive_fn else (float("nan"),) * 3
    ratio = f"{tn / tp:6.1f}x" if naive_fn else "     -"
    print(f"{name:<34} {tp:8.3f} {mp / 2**20:8.1f} {bp / 2**20:9.2f} | {tn:8.3f} {mn / 2**20:8.1f} "
          f"{bn / 2**20:9.2f} | {ratio}")


HEADER = (f"{'probe':<34} {'time s':>8} {'peak MiB':>8} {'read MiB':>9} | {'naive s':>8} {'peak MiB':>8} "
          f"{'read MiB':>9} | naive/probe time")


def naive_load(path, name):
    with h5py.File(path, "r", swmr=True) as f:
        n = f["snapshots/step"].shape[0]
        return f[f"snapshots/weights/{name}"][:n]


def part_a(path: Path) -> None:
    size = path.stat().st_size
    with probe.Run(path) as run:
        reasoning = run.groups["reasoning"]
        n = run.n_snapshots
    print(f"\nA: {n}-snapshot run of the quick preset, {size / 2**20:.1f} MiB")
    print(HEADER)

    from probe.analyses import condense as C, pca as PC, similarity as S

    groups = {"keys": np.arange(21, 41), "memory": np.arange(1, 11), "reasoning": reasoning}
    tokens = np.concatenate(list(groups.values()))
    labels = [g for g, ids in groups.items() for _ in ids]

    def naive_similarity():  # the same math on everything loaded at once
        E = naive_load(path, "token_embedding")
        return [S.cosine_similarity(e[reasoning], reasoning) for e in E]

    def naive_pca():
        E = naive_load(path, "token_embedding")
        return [PC.pca(e[tokens], tokens, labels) for e in E]

    def naive_align():  # full SVDs, the d x d product W_V W_O formed
        V, O, E = (naive_load(path, x) for x in ("layer0/W_V", "layer0/W_O", "token_embedding"))
        out = []
        for v, o, e in zip(V, O, E):
            U, s, _ = np.linalg.svd(v[0])
            ov = np.linalg.svd(v[0] @ o[0], compute_uv=False)
            out.append((s, ov, np.abs(U[:, :3].T @ e.T) / np.linalg.norm(e, axis=1)))
        return out

    def naive_condense():  # SVD of the centred n x d matrix, every weight matrix's SVD
        with h5py.File(path, "r", swmr=True) as f:
            n = f["snapshots/step"].shape[0]
            params = {k: f[f"snapshots/params/{k}"][:n] for k in f["snapshots/params"]
                      if f[f"snapshots/params/{k}"].ndim >= 3 and k.rsplit(".", 1)[-1].startswith("W")}
        E = params["W_E"]
        out = []
        for i in range(n):
            sv = np.linalg.svd(E[i] - E[i].mean(0), compute_uv=False)
            q = params["blocks.0.attn.W_Q"][i]
            C.neuron_groups(np.concatenate([w.T for w in q]))
            out.append((sv ** 2 / (len(E[i]) - 1), {k: np.linalg.svd(w[i], compute_uv=False) for k, w in params.items()}))
        return out

    report("similarity --tokens reasoning", lambda: probe.similarity(path, "reasoning", step="all"),
           naive_similarity, size)
    report("pca", lambda: probe.pca(path, step="all"), naive_pca, size)
    report("align --layer 0", lambda: probe.align(path, step="all"), naive_align, size)
    report("condense (all tokens)", lambda: probe.condense(path, step="all"), naive_condense, size)
    report("theory", lambda: probe.theory(path, step="all"), None, size)
    report("attention", lambda: probe.attention(path, step="all"), None, size)
    report("bias", lambda: probe.bias(path, step="all"), None, size)
    report("ood (rebuilds 100 models)", lambda: probe.ood(path, step="all"), None, size)


def part_b(path: Path) -> None:
    size = path.stat().st_size
    print(f"\nB: GPT-2-sized synthetic snapshot, {size / 2**30:.2f} GiB, latest step")
    print(HEADER)
    ids = np.arange(1000, 1100)

    def latest():
        with h5py.File(path, "r") as f:
            return f["snapshots/params/wte"][-1]

    report("similarity 100 tokens", lambda: probe.similarity(path, "1000:1100"),
           lambda: cosine_matrix(latest()[ids]), size)
    def naive_pca():
        X = latest()[ids]
        return np.linalg.svd(X - X.mean(0))

    def naive_condense():
        X = latest()
        return np.linalg.svd(X - X.mean(0), compute_uv=False)

    report("pca 100 tokens", lambda: probe.pca(path, "1000:1100"), naive_pca, size)
    report("condense, all 50257 tokens", lambda: probe.condense(path, neurons=None), naive_condense, size)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--gpt2-file", help="the synthetic file of bench_similarity.py (made if missing)")
    args = ap.parse_args()
    print(f"machine: {machine()}")
    with tempfile.TemporaryDirectory() as d:
        from probe_train import Trainer, preset

        run = Path(d) / "run100.h5"
        Trainer(preset("quick", gamma=0.8, steps=990, snapshot_every=10, snapshot_log=False), run,
                show_progress=False).run()
        probe.similarity(run, "0:2")  # load lazily imported modules before measuring
        part_a(run)
        gpt2 = Path(args.gpt2_file) if args.gpt2_file else Path(d) / "gpt2.h5"
        if not gpt2.exists():
            from bench_similarity import make_file

            make_file(gpt2)
        part_b(gpt2)


if __name__ == "__main__":
    main()
