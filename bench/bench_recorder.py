"""What recording costs a training loop (issue 50, point 6; goal: at most 3 % more wall time).

    python bench/bench_recorder.py [--steps 400] [--every 100] [--rounds 3] [--layers 4] [--d 256]

A plain PyTorch loop trains a GPT-2-shaped model (Hugging Face ``GPT2LMHeadModel``, eager attention,
random tokens, AdamW) for ``steps`` steps, without and with ``probe.Recorder(every=...)`` (a probe batch
of 4 x 32 tokens for the attention maps, two token groups, the loss every step), the two variants
alternating in this one process, ``rounds`` times each, each from the same initial weights and data.
The baseline is the same loop without the recorder; the ratio is with / without (medians). On a busy
shared machine whole runs vary by more than the goal, so the script also times the recorder's own
calls (``rec.step``/``rec.snapshot``) as a share of the recorded loop's wall time. One torch thread: on
this shared 2-core machine two were slower than one.
"""
from __future__ import annotations

import argparse
import copy
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _util import machine  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--steps", type=int, default=400)
    ap.add_argument("--every", type=int, default=100)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--layers", type=int, default=4)
    ap.add_argument("--d", type=int, default=256)
    ap.add_argument("--vocab", type=int, default=8192)
    a = ap.parse_args()

    import torch
    import transformers as T

    import probe

    torch.set_num_threads(1)
    T.logging.set_verbosity_error()
    torch.manual_seed(0)
    cfg = T.GPT2Config(n_layer=a.layers, n_embd=a.d, n_head=max(1, a.d // 64), vocab_size=a.vocab, n_positions=128,
                       attn_implementation="eager")
    start = T.GPT2LMHeadModel(cfg)
    data = torch.randint(0, a.vocab, (a.steps, 8, 64), generator=torch.Generator().manual_seed(0))
    inputs = torch.randint(0, a.vocab, (4, 32), generator=torch.Generator().manual_seed(1))
    size = sum(p.numel() for p in start.parameters())
    print(f"GPT-2-shaped: {a.layers} layers, d={a.d}, vocab {a.vocab} ({size / 1e6:.1f} M parameters); "
          f"{a.steps} steps of 8 x 64 tokens, a snapshot every {a.every}; {machine()}")

    inside: list[float] = []   # seconds spent in the Recorder's own calls, per recorded run

    def train(record: bool, folder: str, k: int) -> float:
        model = copy.deepcopy(start)
        opt = torch.optim.AdamW(model.parameters(), 1e-3)
        rec = probe.Recorder(f"{folder}/run{k}.h5", model, every=a.every, probe_inputs=inputs,
                             groups={"low": list(range(16)), "high": list(range(a.vocab - 16, a.vocab))}) \
            if record else None
        t0 = time.perf_counter()
        spent = 0.0
        try:
            if rec is not None:
                t1 = time.perf_counter()
                rec.snapshot(0)
                spent += time.perf_counter() - t1
            for step in range(1, a.steps + 1):
                loss = model(input_ids=data[step - 1], labels=data[step - 1]).loss
                loss.backward()
                opt.step()
                opt.zero_grad()
                if rec is not None:
                    t1 = time.perf_counter()
                    rec.step(step, loss=loss.item())
                    spent += time.perf_counter() - t1
                else:
                    loss.item()   # the same sync as the recorded loop's
        finally:
            if rec is not None:
                rec.close()
        total = time.perf_counter() - t0
        if record:
            inside.append(spent / total)
        return total

    times: dict[bool, list[float]] = {False: [], True: []}
    with tempfile.TemporaryDirectory() as folder:
        train(False, folder, -1)   # warm-up: allocator, kernels
        for k in range(a.rounds):
            for record in (False, True) if k % 2 == 0 else (True, False):
                times[record].append(train(record, folder, k))
                print(f"  round {k + 1}: {'with' if record else 'without'} the recorder {times[record][-1]:.2f} s",
                      flush=True)
        size = Path(f"{folder}/run0.h5").stat().st_size
    base, rec = statistics.median(times[False]), statistics.median(times[True])
    print(f"without the recorder (baseline): median {base:.2f} s; with: median {rec:.2f} s; "
          f"ratio {rec / base:.3f} ({100 * (rec / base - 1):+.1f} %); file {size / 2**20:.1f} MiB for "
          f"{a.steps // a.every + 1} snapshots")
    print(f"time inside the Recorder's calls (its own cost, robust to the machine's noise): median "
          f"{100 * statistics.median(inside):.2f} % of the recorded loop's wall time")


if __name__ == "__main__":
    main()
