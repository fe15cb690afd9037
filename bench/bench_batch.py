"""`probe batch` throughput: checkpoints per second with --jobs 1 (baseline) and --jobs 2, same run.

    python bench/bench_batch.py [--n 16] [--d 384] [--layers 6]
    python bench/bench_batch.py --runners [--n 48] [--d 64] [--layers 2] [--repeats 3]

Writes n nanoGPT-format checkpoints (GPT-2 shape, random weights) and runs `--probe spectrum`.
``--runners``: many small tasks through each way to run them in 2 local processes, old and new
alternating, each in a fresh process (worker start-up counts, as in a command): the pool of reused
spawned workers batch had before probe.jobs (a ProcessPoolExecutor), probe.jobs's reused spawned
workers (what batch uses), and probe.jobs's process per task forked from a fork server that imported
the toolkit and torch once (as the trainers are).
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _util import machine  # noqa: E402

from probe.batch import batch  # noqa: E402

RUNNERS = ("executor pool (before)", "jobs, reused workers", "jobs, a process per task")


def checkpoints(folder: str, n: int, d: int, layers: int) -> None:
    for k in range(n):
        g = torch.Generator().manual_seed(k)
        sd = {"transformer.wte.weight": torch.randn(2048, d, generator=g)}
        for i in range(layers):
            p = f"transformer.h.{i}."
            sd[p + "attn.c_attn.weight"] = torch.randn(3 * d, d, generator=g)
            sd[p + "attn.c_proj.weight"] = torch.randn(d, d, generator=g)
            sd[p + "mlp.c_fc.weight"] = torch.randn(4 * d, d, generator=g)
            sd[p + "mlp.c_proj.weight"] = torch.randn(d, 4 * d, generator=g)
        torch.save({"model": sd, "model_args": {"n_head": 2}}, Path(folder) / f"ckpt_{k * 100}.pt")


def _old_init(parent: int) -> None:
    """The pool workers' start before probe.jobs (probe.batch._worker_init)."""
    import signal

    from probe.signals import die_with_parent, ignore_stop_signals

    ignore_stop_signals()
    die_with_parent(parent, signal.SIGKILL)
    torch.set_num_threads(1)


def run_one(runner: str, folder: str, jobs: int) -> float:
    """Seconds to run every task of ``folder`` with ``runner`` (this process: a fresh one)."""
    import multiprocessing as mp
    from contextlib import closing

    from probe import batch as b
    from probe.jobs import run

    tasks = [b.Task(c, "spectrum", (("threads", 1),)) for c in b.discover([folder])]
    os.environ.update({k: "1" for k in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS")})
    t0 = time.perf_counter()
    if runner == RUNNERS[0]:
        from concurrent.futures import ProcessPoolExecutor, as_completed

        with ProcessPoolExecutor(jobs, mp_context=mp.get_context("spawn"), initializer=_old_init,
                                 initargs=(os.getpid(),)) as pool:
            rows = [r for f in as_completed([pool.submit(b.run_task, t) for t in tasks]) for r in f.result()]
    else:
        ctx = None
        if runner == RUNNERS[2]:
            ctx = mp.get_context("forkserver")
            ctx.set_forkserver_preload(["probe.batch", "probe.api", "torch"])
        with closing(run(b._one_thread, tasks, at_once=jobs, context=ctx, reuse=runner == RUNNERS[1])) as ends:
            rows = [r for _, got, exc in ends for r in got]
    seconds = time.perf_counter() - t0
    assert len(rows) >= len(tasks) and not [r for r in rows if r[4] == "error"], rows[:3]
    return seconds


def runners(args) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        checkpoints(tmp, args.n, args.d, args.layers)
        times: dict[str, list[float]] = {r: [] for r in RUNNERS}
        for _ in range(args.repeats):
            for runner in RUNNERS:   # alternating: a drift of the machine's load reaches each alike
                out = subprocess.run([sys.executable, __file__, "--one", runner, tmp, str(args.jobs)], check=True,
                                     capture_output=True, text=True).stdout
                times[runner].append(json.loads(out.strip().splitlines()[-1]))
    print(f"machine: {machine()}")
    print(f"{args.n} checkpoints (d {args.d}, {args.layers} layers), probe spectrum, {args.jobs} processes, "
          f"{args.repeats} rounds; median, each round's times in brackets")
    base = statistics.median(times[RUNNERS[0]])
    for runner, ts in times.items():
        med = statistics.median(ts)
        print(f"{runner}: {med:.2f} s, x{base / med:.2f} vs the executor pool [{', '.join(f'{t:.2f}' for t in ts)}]")


def main() -> None:
    if len(sys.argv) > 1 and sys.argv[1] == "--one":
        print(json.dumps(run_one(sys.argv[2], sys.argv[3], int(sys.argv[4]))))
        return
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=None)
    ap.add_argument("--d", type=int, default=None)
    ap.add_argument("--layers", type=int, default=None)
    ap.add_argument("--runners", action="store_true", help="compare the ways to run tasks in local processes")
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--repeats", type=int, default=3)
    args = ap.parse_args()
    if args.runners:
        args.n, args.d, args.layers = args.n or 48, args.d or 64, args.layers or 2
        runners(args)
        return
    n, d, L = args.n or 16, args.d or 384, args.layers or 6
    with tempfile.TemporaryDirectory() as tmp:
        checkpoints(tmp, n, d, L)
        times = {}
        tables = {}
        for jobs in (1, 2):
            t0 = time.perf_counter()
            tables[jobs] = batch([tmp], ["spectrum"], {}, jobs=jobs)
            times[jobs] = time.perf_counter() - t0
    print(f"machine: {machine()}")
    print(f"{n} checkpoints (GPT-2 shape, d {d}, {L} layers, {4 * L + 1} matrices each), probe spectrum")
    for jobs, t in times.items():
        print(f"--jobs {jobs}: {t:.2f} s, {n / t:.2f} checkpoints/s"
              + (" (baseline)" if jobs == 1 else f", x{times[1] / t:.2f} vs --jobs 1"))
    worst = max((abs(a[5] - b[5]) / max(abs(b[5]), 1e-300) for a, b in zip(tables[1], tables[2])
                 if isinstance(a[5], float) and a[5] == a[5]), default=0.0)
    same_keys = [r[:5] for r in tables[1]] == [r[:5] for r in tables[2]]
    print(f"same rows: {same_keys} ({len(tables[1])} rows); largest relative difference of a value {worst:.1e} "
          "(workers run single-threaded BLAS)")


if __name__ == "__main__":
    main()
