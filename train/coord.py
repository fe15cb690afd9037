"""The coordinate check: how the size of every module's output moves with the width, at init and over
the first updates (microsoft/mup's ``coord_check``, Yang et al. 2022, for this toolkit's γ-init).

For each width the preset is built with every width-like field scaled with ``d_model`` (:func:`width_config`),
trained a few steps on one fixed batch at its peak learning rate, held (no warm-up, as mup's check), and
each named module's output is measured as mup does: the mean |x| of its entries. Per module and step, the
log-log slope of that against the width, one per seed, then their mean and 95 % interval
(:func:`probe.analyses.regime.seed_slope`). A flat line (slope about zero) is a width-stable coordinate;
at step 0 a matrix of fan-in ``d`` drawn with std ``d^-γ`` maps O(1) inputs to entries of size
``d^(1/2 - γ)``, so γ 0.5 is flat there and a larger γ shrinks with width.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Callable, Iterable, Sequence

import numpy as np

from probe.analyses.regime import TOLERANCE, regime_of, seed_slope
from probe.errors import ProbeError, param

from .config import RunConfig

# besides d_model, the fields a width sweep scales with it: the MLP's width, and the width per head
# where it is set (heads stay as many; with d_head 0 it follows d_model // heads by itself)
WIDTH_SCALED = ("d_ff", "d_head")
# the words of the slope's interval, after the regimes of probe regime (probe.analyses.regime.regime_of)
VERDICTS = {"linear": "shrinks", "critical": "flat", "condensed": "grows", "not shown": "not shown"}
LOGITS = "logits"   # the model's own output, recorded beside its submodules'


def width_config(cfg: RunConfig, width: int) -> RunConfig:
    """``cfg`` at d_model ``width``: d_ff (unless ``d_ff_ratio`` sets it) and a fixed ``d_head`` scaled by
    the same factor, rounded; a ``gamma_ref_width`` (a fixed std) is kept."""
    if width < 1:
        raise ProbeError(f"{param('widths', width)}: need widths of 1 or more")
    scale = width / cfg.d_model
    changes = {name: max(1, round(getattr(cfg, name) * scale)) for name in WIDTH_SCALED
               if getattr(cfg, name) and not (name == "d_ff" and cfg.d_ff_ratio)}   # (d_ff_ratio sets d_ff)
    changes["d_model"] = width
    try:
        return cfg.replace(**changes)
    except ProbeError as exc:
        raise ProbeError(f"width {width}: {exc}") from None


def init_std(cfg: RunConfig) -> float:
    """The init std of a matrix whose fan-in is d_model (an embedding, W_Q, W_in) under ``cfg``."""
    if cfg.init_std:
        return cfg.init_std
    return (cfg.gamma_ref_width or cfg.d_model) ** -cfg.gamma


def record(model, forward: Callable[[], object], update: Callable[[object], None], steps: int) -> dict[str, list[float]]:
    """mup's coordinates of ``model``: the mean |x| of each named submodule's output, and of what
    ``forward()`` returns (as ``logits``), at steps 0 .. ``steps`` (step t: after t updates).

    ``forward()`` runs the model on the fixed batch and returns its output; ``update(output)`` takes one
    optimizer step on it. A module called more than once a pass (shared weights) counts all its outputs.
    Returns {name: [mean |x| at step 0, ..., at step ``steps``]} in ``named_modules`` order, the output last.
    """
    import torch

    sums: dict[str, list[float]] = {}

    def hook(name):
        def keep(_module, _inputs, out):
            x = out[0] if isinstance(out, (tuple, list)) else out
            if isinstance(x, torch.Tensor) and x.is_floating_point():
                s = sums.setdefault(name, [0.0, 0])
                s[0] += float(x.detach().float().abs().sum())
                s[1] += x.numel()
        return keep

    handles = [m.register_forward_hook(hook(n)) for n, m in model.named_modules() if n]
    coords: dict[str, list[float]] = {}
    try:
        for step in range(steps + 1):
            sums.clear()
            if step < steps:
                out = forward()
            else:   # the last coordinates need no update after them
                with torch.no_grad():
                    out = forward()
            sums[LOGITS] = [float(out.detach().float().abs().sum()), out.numel()]
            for name, (total, n) in sums.items():
                coords.setdefault(name, []).append(total / n if n else float("nan"))
            if step < steps:
                update(out)
    finally:
        for h in handles:
            h.remove()
    return coords


@dataclass
class CoordCheck:
    """The coordinate check of one configuration over widths and seeds.

    Attributes
    ----------
    config : RunConfig
        The configuration at its preset's width (widths scale it with :func:`width_config`).
    widths : list of int
        The widths (d_model), increasing.
    seeds : list of int
        The seeds: each draws its own initial weights; the batch is the same for all.
    steps : list of int
        0 .. n: step t holds the coordinates after t updates.
    std : dict of int to float
        Per width, the init std of a matrix of fan-in d_model (``init_std``).
    modules : list of str
        The modules measured (``named_modules`` names; ``logits``: the model's output).
    values : numpy.ndarray
        (modules, steps, seeds, widths): the mean |x| of each module's output.
    slopes : dict of str to list of dict
        Per module, per step: ``{"mean", "ci_lo", "ci_hi", "n", "per_seed", "verdict"}``, the slope of
        ln mean|x| against ln width (verdict ``flat``, ``grows``, ``shrinks`` or ``not shown``).
    tolerance : float
        The half-width around zero of a flat slope.
    """

    config: RunConfig
    widths: list[int]
    seeds: list[int]
    steps: list[int]
    std: dict[int, float]
    modules: list[str]
    values: np.ndarray
    slopes: dict[str, list[dict]] = field(default_factory=dict)
    tolerance: float = TOLERANCE

    def rows(self) -> list[list]:
        """One row per module and step: module, step, mean |x| (over seeds) at the smallest and the largest
        width, the slope's mean, its interval and verdict."""
        out = []
        for m, name in enumerate(self.modules):
            for t in self.steps:
                s = self.slopes[name][t]
                v = self.values[m, t]
                out.append([name, t, _mean(v[:, 0]), _mean(v[:, -1]), s["mean"], s["ci_lo"], s["ci_hi"],
                            s["verdict"]])
        return out

    def long_rows(self) -> list[list]:
        """Every number: gamma, module, step, seed, width, mean |x|."""
        return [[self.config.gamma, name, t, seed, w, float(self.values[m, t, k, j])]
                for m, name in enumerate(self.modules) for t in self.steps
                for k, seed in enumerate(self.seeds) for j, w in enumerate(self.widths)]

    def to_dict(self) -> dict:
        return {"gamma": self.config.gamma, "widths": self.widths, "seeds": self.seeds, "steps": self.steps,
                "std": {str(w): s for w, s in self.std.items()}, "tolerance": self.tolerance,
                "modules": {name: {"mean_abs": self.values[m].tolist(), "slopes": self.slopes[name]}
                            for m, name in enumerate(self.modules)}}

    def panels(self) -> list:
        """mup's picture: a log-log panel per step, mean |x| (over seeds) against width, a line per module;
        a model of more modules than a panel's legend holds gets a row of panels per step, its modules in
        turn split between them."""
        from probe.chart.panel import MAX_SERIES, Panel

        parts = -(-len(self.modules) // MAX_SERIES)
        size = -(-len(self.modules) // parts)
        chunks = [list(range(len(self.modules)))[i:i + size] for i in range(0, len(self.modules), size)]
        return [Panel(title=f"step {t}" + (" (init)" if t == 0 else "")
                      + (f", {self.modules[c[0]]} to {self.modules[c[-1]]}" if parts > 1 else ""),
                      xlabel="width (d_model)", ylabel="mean |x|", xscale="log", yscale="log",
                      series={self.modules[m]: (list(self.widths), [_mean(self.values[m, t, :, j])
                                                                     for j in range(len(self.widths))])
                              for m in c})
                for t in self.steps for c in chunks]


def _mean(values) -> float:
    v = np.asarray(values, dtype=np.float64)
    v = v[np.isfinite(v)]
    return float(v.mean()) if v.size else float("nan")


def coord_check(cfg: RunConfig, widths: Sequence[int], *, seeds: Iterable[int] = (0, 1, 2), steps: int = 3,
                tolerance: float = TOLERANCE, progress: Callable[[int, int], None] | None = None) -> CoordCheck:
    """The coordinate check of ``cfg`` at each of ``widths`` (d_model), over ``seeds``, for ``steps`` updates.

    Parameters
    ----------
    cfg : RunConfig
        The configuration (a preset with overrides); its ``seed`` is replaced by each of ``seeds``.
    widths : sequence of int
        Two widths or more.
    seeds : iterable of int, default (0, 1, 2)
        One slope each; the interval is over them.
    steps : int, default 3
        Updates on the fixed batch (the first batch of the first seed's order, for every width and seed).
    tolerance : float, default 0.1
        |slope| within which (the whole interval) a coordinate is flat.
    progress : callable, optional
        Called with (done, total) after each width and seed.

    Returns
    -------
    CoordCheck

    Raises
    ------
    ProbeError
        Fewer than two distinct widths, no seed, steps below 1, or a width the configuration cannot take.

    Examples
    --------
    >>> from probe_train.config import preset
    >>> check = coord_check(preset("tiny", gamma=0.8), [16, 32, 64], seeds=range(2))
    >>> check.slopes["logits"][0]["verdict"]
    """
    from .tasks import make_task
    from .trainer import Trainer

    widths = sorted({int(w) for w in widths})
    seeds = list(dict.fromkeys(int(s) for s in seeds))
    if len(widths) < 2:
        raise ProbeError(f"{param('widths', ','.join(map(str, widths)))}: a slope against the width needs two "
                         "widths or more")
    if not seeds:
        raise ProbeError(f"{param('seeds', 0)}: need one seed or more")
    if steps < 1:
        raise ProbeError(f"{param('steps', steps)}: need one update or more")
    configs = {w: width_config(cfg, w) for w in widths}   # every width checked before anything is built
    task = make_task(cfg)   # one task for every width and seed: its data do not depend on either
    batch = None
    coords: dict[tuple[int, int], dict[str, list[float]]] = {}
    total = len(widths) * len(seeds)
    for k, seed in enumerate(seeds):
        for j, w in enumerate(widths):
            tr = Trainer(configs[w].replace(seed=seed), None, snapshots=False, show_progress=False, task=task)
            tr.model.train()
            if batch is None:   # the first seed's first batch, for every width and seed
                batch = tr.batch(0)
            coords[seed, w] = record(tr.model, lambda: tr.logits(batch),
                                     lambda out: tr.update(tr.loss(batch, out), tr.cfg.lr), steps)
            if progress is not None:
                progress(k * len(widths) + j + 1, total)
    first = coords[seeds[0], widths[0]]
    modules = [n for n in first if n != LOGITS] + [LOGITS]
    values = np.full((len(modules), steps + 1, len(seeds), len(widths)), np.nan)
    for m, name in enumerate(modules):
        for k, seed in enumerate(seeds):
            for j, w in enumerate(widths):
                values[m, :, k, j] = coords[seed, w].get(name, [math.nan] * (steps + 1))
    slopes = {}
    for m, name in enumerate(modules):
        slopes[name] = []
        for t in range(steps + 1):
            s = seed_slope([dict(zip(widths, values[m, t, k])) for k in range(len(seeds))])
            s["verdict"] = VERDICTS[regime_of(s["ci_lo"], s["ci_hi"], tolerance)]
            slopes[name].append(s)
    return CoordCheck(config=cfg, widths=widths, seeds=seeds, steps=list(range(steps + 1)),
                      std={w: init_std(c) for w, c in configs.items()}, modules=modules, values=values,
                      slopes=slopes, tolerance=tolerance)
