"""Start-up cost of the optimizer: ``probe_train.optim.AdamW`` against ``torch.optim.AdamW`` (the baseline),
each in a fresh process (import torch, build a small model, three AdamW steps), alternating; the
parameters after the steps must be equal bit for bit. Every ``probe-train`` process pays this once.

    python bench/bench_optim.py [--repeats 7]
"""
from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _util import machine  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
CODE = """
import hashlib, sys, torch
sys.path.insert(0, {root!r})
from probe_train.optim import AdamW as Mine
torch.manual_seed(0)
m = torch.nn.Sequential(torch.nn.Linear(64, 256), torch.nn.GELU(), torch.nn.Linear(256, 64))
opt = (torch.optim.AdamW if {torch_opt} else Mine)(m.parameters(), lr=1e-3, weight_decay=0.1)
x = torch.randn(128, 64)
for _ in range(3):
    opt.zero_grad(set_to_none=True)
    m(x).square().mean().backward()
    opt.step()
print(hashlib.sha256(b"".join(p.detach().numpy().tobytes() for p in m.parameters())).hexdigest(),
      "torch._dynamo" in sys.modules)
"""


def once(torch_opt: bool) -> tuple[float, str]:
    t0 = time.perf_counter()
    out = subprocess.run([sys.executable, "-c", CODE.format(root=str(ROOT), torch_opt=torch_opt)],
                         capture_output=True, text=True, check=True)
    return time.perf_counter() - t0, out.stdout.strip()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=7)
    args = ap.parse_args()
    print(f"machine: {machine()}")
    times: dict[bool, list[float]] = {True: [], False: []}
    outs = set()
    for i in range(args.repeats):
        for torch_opt in (True, False) if i % 2 == 0 else (False, True):
            t, out = once(torch_opt)
            times[torch_opt].append(t)
            outs.add((torch_opt, out))
    digests = {out.split()[0] for _, out in outs}
    assert len(digests) == 1, f"parameters differ: {outs}"
    dynamo = {torch_opt: out.split()[1] for torch_opt, out in outs}
    base, mine = statistics.median(times[True]), statistics.median(times[False])
    print(f"{'process: import torch, model, 3 AdamW steps':<46} {'median s':>9} {'min s':>7}  torch._dynamo imported")
    print(f"{'torch.optim.AdamW (baseline)':<46} {base:>9.3f} {min(times[True]):>7.3f}  {dynamo[True]}")
    print(f"{'probe_train.optim.AdamW':<46} {mine:>9.3f} {min(times[False]):>7.3f}  {dynamo[False]}")
    print(f"saved per process: {base - mine:.2f} s (median), {base / mine:.2f}x; parameters equal bit for bit")


if __name__ == "__main__":
    main()
