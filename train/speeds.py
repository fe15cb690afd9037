"""How long a run takes: each preset's measured speed on one machine class, scaled to a configuration.

``probe figures --dry-run`` and ``--budget`` plan with these numbers; ``bench/bench_presets.py``
measures them (one torch thread per run, the way figures and sweeps train) and prints the table
below. A run's time is modelled as start-up + steps x step time + snapshots x snapshot time; a
configuration that changes the preset's shape (width, depth, batch, sequence length) scales the
step and snapshot times by the ratio of :func:`step_cost`, a count of multiply-adds. Presets for a
GPU (the papers' sizes) were never measured here: their estimate is None, never a guess.
"""
from __future__ import annotations

from dataclasses import dataclass

from .config import RunConfig, preset, snapshot_steps

MACHINE = "2-core AMD EPYC with AVX2 at 2.0 GHz, 24 GiB, torch 2.13.0+cpu, one torch thread per run"


@dataclass(frozen=True)
class Speed:
    start_s: float      # process start, imports, data, model, file creation
    step_s: float       # one optimizer step
    snapshot_s: float   # one snapshot (evaluation of every split, probe batch, weights, resume state)


# bench/bench_presets.py --repeats 2 on MACHINE (2026-11-25, idle machine); rerun it after changing a preset.
MEASURED: dict[str, Speed] = {
    "tiny": Speed(0.88, 0.01125, 0.128),
    "lm-tiny": Speed(0.98, 0.01950, 0.150),
    "llm-tiny": Speed(0.88, 0.06000, 0.228),
    "quick": Speed(0.87, 0.04333, 0.267),
    "emb-mlp-quick": Speed(0.61, 0.00535, 0.091),
    "composite-mini": Speed(0.71, 0.02469, 0.333),
    "lm-mini": Speed(2.57, 0.03350, 0.275),
    "llm-mini": Speed(3.08, 0.09625, 0.214),
}


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
    """Seconds one run of preset ``name`` with ``overrides`` takes on MACHINE, or None where the
    preset was not measured."""
    speed = MEASURED.get(name)
    if speed is None:
        return None
    base = preset(name)
    cfg = preset(name, **(overrides or {}))
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
