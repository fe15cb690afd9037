"""How long a run takes on this machine: each preset's speed, measured here by a short run of it, scaled
to a configuration; and the processes the runs train in.

``probe figures --dry-run`` and ``--budget`` plan with these numbers. A run's time is modelled as
start-up + steps x step time + snapshots x snapshot time; :func:`measure` times the three in one short
run of the preset (a few steps, a snapshot at the first and the last, one torch thread as figures and
sweeps train), in a process forked from the trainers' fork server (:func:`context`), once per preset
and process; nothing is kept. A configuration that changes the preset's shape (width, depth, batch,
sequence length) scales the step and snapshot times by the ratio of :func:`step_cost`, a count of
multiply-adds. The presets for a GPU (the papers' sizes) are not measured on a CPU: their estimate is
None, never a guess.
"""
from __future__ import annotations

import contextlib
import multiprocessing
import os
import platform
import tempfile
import time
from dataclasses import dataclass
from functools import lru_cache

from probe import environment
from probe.errors import ProbeError
from probe.signals import signals_blocked

from .config import RunConfig, preset, snapshot_steps

MACHINE = f"{os.cpu_count()}-core {platform.machine()} CPU"

# What every trainer imports before its run, imported once by the fork server (:func:`context`);
# torch._dynamo is what torch.optim imports at its first use. Nothing runs a torch operation there:
# no thread pool is forked. A module that is missing (tokenizers: text runs only) is skipped.
PRELOAD = ["probe.cli", "probe_train.cli", "probe_train.trainer", "torch._dynamo", "tokenizers"]

FOR_A_GPU = ("paper1", "composite-paper", "lm-gpt2", "llm-gpu")   # the papers' sizes: minutes a step here
STEPS = 10   # steps of a measurement: the slowest preset measured (llm-mini) takes ~1 s for them


def context():
    """The multiprocessing context the trainers (:mod:`.runs`) and the measurements start in:
    multiprocessing's fork server, which imports PRELOAD once, so that each process forked from it
    starts in a fraction of a second (spawn where there is no fork server).

    The fork server is started here, with the stop signals blocked (they stay blocked in every trainer
    forked from it until its own ``stoppable()`` block) and with ``PYTHONSAFEPATH``: multiprocessing
    starts it with ``python -c``, which puts the working directory first on the import path, and Python
    3.11 does not give it the parent's path (``forkserver.main`` ignores its ``sys_path``), so a user's
    ``probe_train.py`` or ``probe/`` beside the command would be what it preloads."""
    ctx = multiprocessing.get_context("forkserver" if "forkserver" in multiprocessing.get_all_start_methods() else "spawn")
    if ctx.get_start_method() == "forkserver":
        from multiprocessing import forkserver

        ctx.set_forkserver_preload(PRELOAD)
        with environment.safe_path(), signals_blocked():
            forkserver.ensure_running()
    return ctx


@dataclass(frozen=True)
class Speed:
    start_s: float      # trainer set-up: data, model, file creation
    step_s: float       # one optimizer step
    snapshot_s: float   # one snapshot (evaluation of every split, probe batch, weights, resume state)


@lru_cache(maxsize=None)
def measure(name: str, stories: str | None = None) -> Speed | None:
    """Preset ``name``'s speed on this machine (:func:`_measure`, in a process of its own: this one
    imports no torch), with ``stories`` instead of the preset's story text where given (a real text has
    a larger vocabulary than the templates: its steps cost more than the preset's config says); None
    for a preset for a GPU."""
    if name in FOR_A_GPU:
        return None
    ctx = context()
    receive, send = ctx.Pipe(duplex=False)
    proc = ctx.Process(target=_measure, args=(name, send, stories), name=f"measure {name}")
    with signals_blocked():   # a spawned child (no fork server) starts with them blocked, as the trainers
        proc.start()
    send.close()
    try:
        speed = receive.recv()
    except EOFError:
        speed = f"exit {proc.exitcode}"
    finally:
        proc.join()
    if isinstance(speed, str):
        raise ProbeError(f"measuring the speed of preset {name} on this machine failed: {speed}")
    return speed


def _measure(name: str, send, stories: str | None = None) -> None:
    """Send back preset ``name``'s Speed, from a run of STEPS steps with a snapshot at the first and the
    last, timed part by part (into a temporary folder), or the error that stopped it."""
    from .trainer import Trainer

    cfg = preset(name, steps=min(STEPS, preset(name).steps), snapshot_every=0, snapshot_log=False, threads=1,
                 device="cpu", **({"stories": stories} if stories else {}))
    try:
        with tempfile.TemporaryDirectory() as folder:
            t0 = time.perf_counter()
            trainer = Trainer(cfg, os.path.join(folder, "run.h5"), show_progress=False)
            set_up = time.perf_counter() - t0
            t0 = time.perf_counter()
            trainer.run()
            spent = trainer.spent
            steps = time.perf_counter() - t0 - spent["snapshot"] - spent["create"]
        result = Speed(set_up + spent["create"], steps / cfg.steps, spent["snapshot"] / 2)
    except Exception as exc:   # noqa: BLE001 - said by the caller, in one line
        result = f"{type(exc).__name__}: {exc}"
    with contextlib.suppress(BrokenPipeError):   # the caller has ended (a stop signal)
        send.send(result)


def step_cost(cfg: RunConfig) -> float:
    """Multiply-adds of one training step's forward pass (a relative cost: the backward pass is a
    fixed multiple of it). Last-position tasks apply the head to one position, text to every one."""
    batch, T, d = cfg.batch_size, cfg.seq_len, cfg.d_model
    vocab = cfg.vocab_size
    if cfg.model == "emb-mlp":
        return batch * (d * cfg.d_ff + cfg.d_ff * vocab)
    heads = cfg.heads * cfg.head_dim
    kv = cfg.n_kv_heads * cfg.head_dim
    mlp = (3 if cfg.model == "llama" else 2) * d * cfg.d_ff
    per_token = cfg.layers * (d * (2 * heads + 2 * kv) + mlp + T * heads)   # weights + scores and mixing
    head = vocab * d * (T if cfg.task == "lm" else 1)
    return batch * (T * per_token + head)


def estimate(name: str, overrides: dict | None = None) -> float | None:
    """Seconds one run of preset ``name`` with ``overrides`` takes on this machine (:func:`measure`),
    or None for a preset for a GPU."""
    overrides = overrides or {}
    # the story text changes the vocabulary: measured with it (measure(name) alone: the preset's own, cached once)
    speed = measure(name, overrides["stories"]) if "stories" in overrides else measure(name)
    if speed is None:
        return None
    base = preset(name, **({"stories": overrides["stories"]} if "stories" in overrides else {}))
    cfg = preset(name, **overrides)
    ratio = step_cost(cfg) / step_cost(base)
    # a snapshot evaluates eval_size sequences per split: its cost per sequence scales like a step's
    per_snapshot = (step_cost(cfg) / cfg.batch_size * cfg.eval_size) / (step_cost(base) / base.batch_size * base.eval_size)
    return speed.start_s + cfg.steps * speed.step_s * ratio + len(snapshot_steps(cfg)) * speed.snapshot_s * per_snapshot


def makespan(seconds: list[float], slots: int) -> float:
    """Wall time of jobs of these durations on ``slots`` workers, longest first (what the figures'
    trainer queue does)."""
    ends = [0.0] * max(1, slots)
    for s in sorted(seconds, reverse=True):
        i = ends.index(min(ends))
        ends[i] += s
    return max(ends)
