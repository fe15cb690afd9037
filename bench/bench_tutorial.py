"""docs/tutorials/your-gpt2.md's longer run, timed: 100 `transformers.Trainer` steps of its 64-wide GPT-2
(947 words, windows of 32, batch 16, recorded every 100 steps by the callback) at one torch thread and
at torch's default, idle and with one competing CPU-bound process, variants alternated in one run.

    python bench/bench_tutorial.py [--steps 100] [--repeats 2]

Each variant is a fresh process (torch fixes its thread pool when it loads). The text is random word
ids of the tutorial's vocabulary size: the arithmetic of a step is the same as on the page's text.
Baseline: one thread. The page's advice (set one thread) comes from the ratio this prints.
"""
from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _util import machine  # noqa: E402

CHILD = """
import sys, time, torch, transformers as T
from probe.callbacks import TransformersCallback
steps, threads, folder = int(sys.argv[1]), sys.argv[2], sys.argv[3]
if threads != "default":
    torch.set_num_threads(int(threads))
T.logging.set_verbosity_error()

class Windows(torch.utils.data.Dataset):
    def __init__(self):
        self.x = torch.randint(0, 947, (468, 32), generator=torch.Generator().manual_seed(0))
    def __len__(self):
        return len(self.x)
    def __getitem__(self, i):
        return {"input_ids": self.x[i], "labels": self.x[i]}

torch.manual_seed(0)
model = T.GPT2LMHeadModel(T.GPT2Config(n_layer=2, n_head=2, n_embd=64, vocab_size=947, n_positions=32,
                                       bos_token_id=0, eos_token_id=0, attn_implementation="eager"))
args = T.TrainingArguments(output_dir=folder + "/out", max_steps=steps, logging_steps=100, per_device_train_batch_size=16,
                           learning_rate=1e-3, save_strategy="no", report_to=[], use_cpu=True, disable_tqdm=True)
t0 = time.perf_counter()
T.Trainer(model=model, args=args, train_dataset=Windows(),
          callbacks=[TransformersCallback(folder + "/run.h5", overwrite=True)]).train()
print(time.perf_counter() - t0)
"""


def spinner() -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-c", "while True: pass"])


def timed(steps: int, threads: str, load: int, folder: str) -> float:
    procs = [spinner() for _ in range(load)]
    try:
        out = subprocess.run([sys.executable, "-c", CHILD, str(steps), threads, folder], check=True,
                             capture_output=True, text=True).stdout
        return float(out.strip().splitlines()[-1])
    finally:
        for p in procs:
            p.kill()
            p.wait()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--steps", type=int, default=100)
    ap.add_argument("--repeats", type=int, default=2)
    a = ap.parse_args()
    print(f"machine: {machine()}; {a.steps} Trainer steps per timing, {a.repeats} rounds, variants alternated")
    times: dict[tuple[str, int], list[float]] = {}
    with tempfile.TemporaryDirectory() as tmp:
        for _ in range(a.repeats):
            for load in (0, 1):
                for threads in ("1", "default"):
                    times.setdefault((threads, load), []).append(timed(a.steps, threads, load, tmp))
    print(f"{'load':>4}  {'threads':>7}  {'seconds (each round)':>24}  {'mean':>6}  vs 1 thread")
    for load in (0, 1):
        base = sum(times[("1", load)]) / a.repeats
        for threads in ("1", "default"):
            t = times[(threads, load)]
            mean = sum(t) / len(t)
            print(f"{load:>4}  {threads:>7}  {' '.join(f'{x:6.1f}' for x in t):>24}  {mean:6.1f}  {mean / base:5.2f}x")


if __name__ == "__main__":
    os.environ.pop("OMP_NUM_THREADS", None)   # torch's default is the variant's, not the shell's
    main()
