"""The trainer's optimizer, as a user sees it: whole ``probe-train`` runs with ``torch.optim.AdamW`` (the
trainer's: fused on CUDA, torch's own choice elsewhere) against the AdamW re-implementation the trainer
had until this benchmark (``train/optim.py`` of commit e6ef380, read from git: torch's CPU arithmetic
without the import of ``torch._dynamo`` that torch.optim's first step makes), alternating, the order
flipping each repeat. Three user-visible times, each from the command's start to its end:

- ``probe-train --preset tiny``: one fresh process (its start-up is most of it);
- ``probe-train --preset quick --steps 300``: one fresh process, 300 steps (the optimizer's per-step cost);
- ``probe-train sweep --preset tiny --grid seed=0:4 --jobs 2``: the trainer queue, whose fork server
  imports the trainer once (with torch._dynamo for torch.optim; without it for the re-implementation).

Both optimizers give the same parameters bit for bit (the script compares the runs' files).

    python bench/bench_optim.py [--repeats 5]
"""
from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _util import machine  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
OLD = "e6ef380"   # the last commit with train/optim.py

# Imported first in every process of a run (the queue's fork server preloads it): with "mine", the
# trainer's torch.optim.AdamW is the re-implementation; with "torch", nothing changes.
PATCH = '''
import os
if os.environ.get("BENCH_OPTIM") == "mine":
    import importlib.util, torch
    spec = importlib.util.spec_from_file_location("old_optim", {path!r})
    old = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(old)
    torch.optim.AdamW = lambda groups, lr, betas, fused=None: old.AdamW(groups, lr=lr, betas=betas)
'''

# probe-train as its console script runs it, after the patch
RUN = ("import sys, bench_optim_patch; sys.argv = ['probe-train', *sys.argv[1:]]\n"
       "from probe_train._entry import main; main()")
# the sweep: the fork server preloads the patch, and torch._dynamo only for torch.optim
SWEEP = ("import os, sys, bench_optim_patch\n"
         "from probe_train import speeds\n"
         "speeds.PRELOAD[:0] = ['bench_optim_patch']\n"
         "if os.environ['BENCH_OPTIM'] == 'mine': speeds.PRELOAD.remove('torch._dynamo')\n"
         "sys.argv = ['probe-train', *sys.argv[1:]]\n"
         "from probe_train._entry import main; main()")

CASES = {
    "probe-train --preset tiny": (RUN, ["--preset", "tiny", "--threads", "1", "--quiet", "--out", "{d}/r.h5"]),
    "probe-train --preset quick --steps 300": (RUN, ["--preset", "quick", "--steps", "300", "--threads", "1",
                                                     "--quiet", "--out", "{d}/r.h5"]),
    "probe-train sweep (4 tiny runs, 2 jobs)": (SWEEP, ["sweep", "--preset", "tiny", "--grid", "seed=0:4",
                                                        "--jobs", "2", "--out", "{d}/s"]),
}


def once(code: str, args: list[str], which: str, lib: str) -> tuple[float, bytes]:
    """(seconds, the weights of the runs' files) of one command with optimizer ``which``."""
    import os

    from probe.format import Run

    with tempfile.TemporaryDirectory() as d:
        env = {**os.environ, "BENCH_OPTIM": which, "PYTHONPATH": os.pathsep.join([lib, os.environ.get("PYTHONPATH", "")]),
               "OMP_NUM_THREADS": "1"}
        t0 = time.perf_counter()
        subprocess.run([sys.executable, "-c", code, *(a.format(d=d) for a in args)], env=env, check=True,
                       capture_output=True)
        took = time.perf_counter() - t0
        weights = b""
        for f in sorted(Path(d).rglob("*.h5")):
            with Run(f) as run:
                weights += b"".join(run.tensor(name)[:].tobytes() for name in run.tensors())
        return took, weights


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=5)
    a = ap.parse_args()
    print(f"machine: {machine()}")
    with tempfile.TemporaryDirectory() as lib:
        old = Path(lib) / "old_optim.py"
        old.write_text(subprocess.run(["git", "-C", str(ROOT), "show", f"{OLD}:train/optim.py"], check=True,
                                      capture_output=True, text=True).stdout)
        (Path(lib) / "bench_optim_patch.py").write_text(PATCH.format(path=str(old)))
        print(f"{'command (whole wall time)':<42} {'torch.optim s':>13} {'re-impl. s':>10} {'torch/re-impl.':>14}  "
              "(medians; ratio per pair: min-max)")
        for name, (code, args) in CASES.items():
            times: dict[str, list[float]] = {"torch": [], "mine": []}
            weights = set()
            for i in range(a.repeats):
                for which in ("torch", "mine") if i % 2 == 0 else ("mine", "torch"):
                    t, w = once(code, args, which, lib)
                    times[which].append(t)
                    weights.add(w)
            assert len(weights) == 1, f"{name}: the two optimizers trained different weights"
            ratios = [t / m for t, m in zip(times["torch"], times["mine"])]
            base, mine = statistics.median(times["torch"]), statistics.median(times["mine"])
            print(f"{name:<42} {base:>13.2f} {mine:>10.2f} {base / mine:>14.2f}  ({min(ratios):.2f}-{max(ratios):.2f})",
                  flush=True)


if __name__ == "__main__":
    main()
