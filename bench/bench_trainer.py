"""Training throughput at paper 2's configuration, in one run: the toolkit's trainer against a baseline
that does what the authors' public notebook loop does; and the cost of snapshots.

    python bench/bench_trainer.py [--steps 8] [--repeats 2] [--device auto]
    python bench/bench_trainer.py --snapshots [--preset quick] [--steps 3000]   # snapshot overhead

The baseline (written here, after the loop of xuzhiqin1990/understanding_dl,
code/book_jupyter_composition_task): a post-LN decoder (1 head, d_model 400, d_ff 1200,
d_k = d_v = 200, 2 layers, no biases) whose causal mask is built anew in every forward pass, logits
at every position of which the loss reads the last, a DataLoader over a TensorDataset with the
default collate, AdamW, gradient clipping and ``loss.item()`` after every step. The toolkit:
``Trainer`` on the ``composite-paper`` preset (the last block computes attention and MLP for the
last position only, batches indexed from tensors already in memory, the loss read back every
25 steps), fp32 and bf16 autocast. Both use the same torch threads; the variants alternate within
each repeat and the median seconds per step after one warm-up step is shown.

``--snapshots``: the trainer with snapshots on against the same trainer with snapshots off (the
baseline) at the demo's cadence (every 250 steps plus log-spaced early steps).
"""
from __future__ import annotations

import argparse
import math
import statistics
import sys
import tempfile
import time
from pathlib import Path

import torch
import torch.nn as nn
import torch.nn.functional as F

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _util import machine  # noqa: E402

from probe_train import Trainer, preset  # noqa: E402

D, DFF, DK, LAYERS, VOCAB, SEQ, BATCH = 400, 1200, 200, 2, 201, 9, 2048


class _Layer(nn.Module):
    """Post-LN: x = LN(x + MHA(x)); x = LN(x + FFN(x)); one head, no biases."""

    def __init__(self):
        super().__init__()
        self.q, self.k, self.v = (nn.Linear(D, DK, bias=False) for _ in range(3))
        self.o = nn.Linear(DK, D, bias=False)
        self.ln1, self.ln2 = nn.LayerNorm(D), nn.LayerNorm(D)
        self.ff = nn.Sequential(nn.Linear(D, DFF, bias=False), nn.ReLU(), nn.Linear(DFF, D, bias=False))

    def forward(self, x, mask):
        q, k, v = self.q(x), self.k(x), self.v(x)
        scores = (q @ k.transpose(-1, -2)) / math.sqrt(DK)
        attn = scores.masked_fill(mask, -1e9).softmax(-1)
        x = self.ln1(x + self.o(attn @ v))
        return self.ln2(x + self.ff(x))


class _AuthorsStyleModel(nn.Module):
    def __init__(self):
        super().__init__()
        self.emb, self.pos = nn.Embedding(VOCAB, D), nn.Embedding(SEQ, D)
        self.layers = nn.ModuleList(_Layer() for _ in range(LAYERS))
        self.head = nn.Linear(D, VOCAB)

    def forward(self, tokens):
        B, T = tokens.shape
        mask = torch.triu(torch.ones(B, T, T, device=tokens.device), diagonal=1).bool()  # rebuilt every call
        x = self.emb(tokens) + self.pos(torch.arange(T, device=tokens.device))[None]
        for layer in self.layers:
            x = layer(x, mask)
        return self.head(x).view(-1, VOCAB)                                             # every position


def authors_loop(steps: int, device: torch.device) -> list[float]:
    """Seconds of each step of the baseline loop (the first is a warm-up)."""
    g = torch.Generator().manual_seed(0)
    n = BATCH * (steps + 1)
    x = torch.randint(20, 100, (n, SEQ), generator=g)
    y = torch.randint(0, VOCAB, (n, SEQ), generator=g)
    loader = torch.utils.data.DataLoader(torch.utils.data.TensorDataset(x, y), batch_size=BATCH, shuffle=True)
    model = _AuthorsStyleModel().to(device)
    opt = torch.optim.AdamW(model.parameters(), lr=2e-4, weight_decay=0.01)
    crit = nn.CrossEntropyLoss()
    times = []
    t0 = time.perf_counter()
    for xb, yb in loader:           # the DataLoader's fetch and collate count, as in the notebook
        xb, yb = xb.to(device), yb.to(device)
        opt.zero_grad()
        out = model(xb)
        loss = crit(out.view(xb.size(0), SEQ, VOCAB)[:, -1, :], yb[:, -1])
        loss.item()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        t1 = time.perf_counter()
        times.append(t1 - t0)
        t0 = t1
        if len(times) == steps + 1:
            break
    return times


def toolkit(steps: int, device: str, precision: str, snapshots: bool = False) -> float:
    """Seconds per step of the toolkit's trainer (steps after a one-step warm-up run)."""
    cfg = preset("composite-paper", steps=steps, device=device, precision=precision, n_samples=BATCH * 15 * 4,
                 snapshot_every=0, snapshot_log=False, warmup_steps=2, gamma=0.8)
    with tempfile.TemporaryDirectory() as d:
        t = Trainer(cfg, Path(d) / "b.h5", show_progress=False, snapshots=snapshots, overwrite=True)
        t.evaluate = lambda: {}        # the final evaluation is not training
        t0 = time.perf_counter()
        t.run()
        if t.device.type == "cuda":
            torch.cuda.synchronize()
        return (time.perf_counter() - t0) / steps


def snapshot_overhead(a) -> None:
    from probe_train.trainer import snapshot_steps

    cfg = preset(a.preset, steps=a.steps, device=a.device, gamma=0.8)
    with tempfile.TemporaryDirectory() as d:
        out = Path(d) / "bench.h5"
        off, on = [], []
        for _ in range(a.repeats):
            for snaps, ts in ((False, off), (True, on)):
                t = Trainer(cfg, out, show_progress=False, snapshots=snaps, overwrite=True)
                t0 = time.perf_counter()
                t.run()
                ts.append(time.perf_counter() - t0)
        size = out.stat().st_size
    best_off, best_on = min(off), min(on)
    print(f"machine: {machine()}")
    print(f"preset {a.preset}, {cfg.steps} steps, batch {cfg.batch_size}, {len(snapshot_steps(cfg))} snapshots "
          f"({size / 2**20:.1f} MiB file)")
    print(f"snapshots off (baseline): {best_off:.2f} s   on: {best_on:.2f} s   overhead "
          f"{100 * (best_on / best_off - 1):+.1f}%")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--steps", type=int, default=None)
    ap.add_argument("--repeats", type=int, default=2)
    ap.add_argument("--device", default="auto")
    ap.add_argument("--snapshots", action="store_true", help="measure the snapshot overhead instead")
    ap.add_argument("--preset", default="quick")
    a = ap.parse_args()
    if a.snapshots:
        a.steps = a.steps or 3000
        snapshot_overhead(a)
        return
    a.steps = a.steps or 8
    from probe_train.device import pick_device, set_threads

    device = pick_device(a.device)
    set_threads(0, device)
    print(f"machine: {machine()}; device {device}; torch threads {torch.get_num_threads()}")
    print(f"paper-2 configuration: d_model {D}, d_ff {DFF}, d_k {DK}, {LAYERS} layers, batch {BATCH}, "
          f"sequence {SEQ}, vocabulary {VOCAB}")
    toolkit(1, a.device, "fp32")                       # warm-up
    runs = {"authors' loop (baseline)": [], "toolkit fp32": [], "toolkit bf16 autocast": []}
    for _ in range(a.repeats):
        runs["authors' loop (baseline)"].append(statistics.median(authors_loop(a.steps, device)[1:]))
        runs["toolkit fp32"].append(toolkit(a.steps, a.device, "fp32"))
        runs["toolkit bf16 autocast"].append(toolkit(a.steps, a.device, "bf16"))
    base = statistics.median(runs["authors' loop (baseline)"])
    print(f"{'variant':<28} {'s/step':>8} {'samples/s':>10} {'speed-up':>9}")
    for name, ts in runs.items():
        t = statistics.median(ts)
        print(f"{name:<28} {t:>8.3f} {BATCH / t:>10.0f} {base / t:>8.2f}x")


if __name__ == "__main__":
    main()
