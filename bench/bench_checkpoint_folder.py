"""A folder of checkpoints read as one run: `probe similarity DIR --step all` against loading each
checkpoint with `transformers.AutoModel.from_pretrained` and computing the same cosine matrix from its
embedding (issue 50, point 6).

    python bench/bench_checkpoint_folder.py [--n 20] [--vocab 16384] [--d 256] [--layers 4] [--repeats 3]

Writes ``n`` Trainer-style folders (``checkpoint-100/`` ... , ``save_pretrained`` of a GPT-2-shaped
model, random weights) once, then times, old and new alternating, each variant twice:

* in this process, imports done: ``probe.similarity(DIR, tokens="0:8", step="all")`` (the probe opens
  each checkpoint's safetensors header and reads 8 rows of its embedding) against, per checkpoint,
  ``AutoModel.from_pretrained`` (every weight read and a model built) and the 8x8 cosine matrix of the
  same rows;
* as a user runs them, a fresh process each (start-up and imports count): the command
  ``probe similarity DIR --tokens 0:8 --step all`` against a Python script doing the transformers loop.

The checkpoints are in the page cache after the first round (both variants read the same files): the
times are of reading and building, not of the disk. The matrices of both are checked to agree.
"""
from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _util import machine  # noqa: E402

TOKENS = 8
SCRIPT = """
import sys, numpy as np, transformers as t
t.logging.set_verbosity_error()
for p in sys.argv[1:]:
    E = t.AutoModel.from_pretrained(p).get_input_embeddings().weight.detach().numpy()[:{k}]
    V = E / np.linalg.norm(E, axis=1, keepdims=True)
    print((V @ V.T).mean())
""".format(k=TOKENS)


def write_folder(root: Path, n: int, vocab: int, d: int, layers: int) -> list[Path]:
    import torch
    import transformers as t

    t.logging.set_verbosity_error()
    t.logging.disable_progress_bar()
    torch.manual_seed(0)
    model = t.GPT2LMHeadModel(t.GPT2Config(n_layer=layers, n_embd=d, n_head=4, vocab_size=vocab, n_positions=256))
    paths = []
    for k in range(n):
        with torch.no_grad():
            model.transformer.wte.weight[:TOKENS] += 0.01     # the steps differ where the probe reads
        paths.append(root / f"checkpoint-{(k + 1) * 100}")
        model.save_pretrained(paths[-1])
    return paths


def with_transformers(paths: list[Path]) -> list[np.ndarray]:
    import transformers as t

    out = []
    for p in paths:
        E = t.AutoModel.from_pretrained(p).get_input_embeddings().weight.detach().numpy()[:TOKENS]
        V = E / np.linalg.norm(E, axis=1, keepdims=True)
        out.append(V @ V.T)
    return out


def with_probe(folder: Path) -> list[np.ndarray]:
    import probe

    return [r.matrix for r in probe.similarity(str(folder), tokens=f"0:{TOKENS}", step="all")]


def timed(fn, *args) -> tuple[float, object]:
    t0 = time.perf_counter()
    got = fn(*args)
    return time.perf_counter() - t0, got


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=20)
    ap.add_argument("--vocab", type=int, default=16384)
    ap.add_argument("--d", type=int, default=256)
    ap.add_argument("--layers", type=int, default=4)
    ap.add_argument("--repeats", type=int, default=3)
    args = ap.parse_args()
    import transformers  # noqa: F401  (imported before any timing: the in-process variants exclude imports)

    import probe.api  # noqa: F401

    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp) / "out"
        t_write, paths = timed(write_folder, folder, args.n, args.vocab, args.d, args.layers)
        size = sum(f.stat().st_size for p in paths for f in p.iterdir()) / 2**20
        print(f"{machine()}\n{args.n} checkpoints of a GPT-2-shaped model (vocab {args.vocab}, d {args.d}, "
              f"{args.layers} layers): {size / args.n:.1f} MiB each, written in {t_write:.1f} s")
        a, b = with_transformers(paths), with_probe(folder)
        err = max(float(np.abs(x - y).max()) for x, y in zip(a, b))
        print(f"the same cosine matrices: max |difference| {err:.2e} over {args.n} steps")
        assert err < 1e-5
        times: dict[str, list[float]] = {k: [] for k in ("transformers", "probe", "transformers (process)",
                                                          "probe (process)")}
        cli = [str(Path(sys.executable).parent / "probe"), "similarity", str(folder), "--tokens", f"0:{TOKENS}",
               "--step", "all", "--format", "csv"]
        script = [sys.executable, "-c", SCRIPT, *map(str, paths)]
        for r in range(args.repeats):
            order = (("transformers", lambda: with_transformers(paths)), ("probe", lambda: with_probe(folder)))
            for name, fn in order if r % 2 == 0 else order[::-1]:
                times[name].append(timed(fn)[0])
            procs = (("transformers (process)", script), ("probe (process)", cli))
            for name, cmd in procs if r % 2 == 0 else procs[::-1]:
                times[name].append(timed(lambda c: subprocess.run(c, capture_output=True, check=True), cmd)[0])
        for name, ts in times.items():
            print(f"{name:<24} min {min(ts):7.3f} s  median {statistics.median(ts):7.3f} s  "
                  f"({min(ts) / args.n * 1000:.1f} ms a checkpoint)")
        for kind in ("", " (process)"):
            old, new = times["transformers" + kind], times["probe" + kind]
            print(f"ratio{kind or ' (in process)'}: probe {min(old) / min(new):.1f}x faster by min, "
                  f"{statistics.median(old) / statistics.median(new):.1f}x by median")


if __name__ == "__main__":
    main()
