"""What a report shows: its sources (a snapshot file, a series of checkpoints, a hub model's
revisions) with their steps, configuration and groups; the steps it picks; the CPU budget of a watch."""
from __future__ import annotations

import json
import os
import time
from dataclasses import dataclass, field

import numpy as np

from ..files import open_regular
from ..limits import load_json
from ..errors import ProbeError


@dataclass
class RunSource:
    """One run as the report sees it: a snapshot file or a series of checkpoints, one per step."""

    label: str
    path: str
    kind: str                                   # "snapshot" or "checkpoints"
    steps: list[int] = field(default_factory=list)
    checkpoints: dict[int, str] = field(default_factory=dict)
    config: dict = field(default_factory=dict)
    task: dict = field(default_factory=dict)
    curves: dict = field(default_factory=dict)  # split -> metric -> values (at curve_steps)
    curve_steps: list[int] = field(default_factory=list)
    groups: dict = field(default_factory=dict)  # name -> (ids, texts or None)
    final_step: int | None = None               # the configured last step (snapshot runs)
    identity: str = ""                          # which run the file holds: its creation stamp and the
                                                # configuration a resume keeps (snapshot runs)
    vocab: int | None = None                    # the vocabulary size, where the run or its config says

    @property
    def done(self) -> bool:
        return self.kind == "snapshot" and bool(self.steps) and self.final_step is not None \
            and self.steps[-1] >= self.final_step


@dataclass
class Section:
    """One probe on one run: its results by step, a figure per step, the steps of its table, or why none."""

    results: dict = field(default_factory=dict)   # step -> Result (every step computed)
    figures: dict = field(default_factory=dict)   # step -> the step's chart (inline SVG)
    table_steps: list = field(default_factory=list)   # the steps of the numbers table (a few, log-spaced)
    note: str | None = None
    warnings: list = field(default_factory=list)
    pending: bool = False                          # some steps or figures wait for CPU budget


def _label(path: str) -> str:
    base = os.path.basename(os.path.normpath(path)) if not path.startswith("hf:") else path[3:]
    return base or path


def open_run(spec: str, revisions: str | None = None) -> RunSource:
    """Read what the page needs of one run (cheap: no tensors); a file still being written works."""
    from ..format import Run, is_snapshot_file

    if is_snapshot_file(spec):
        with Run(spec) as run:
            run.check_all()   # every probe reads the run: one error for a malformed file, not one per probe
            steps = [int(s) for s in run.steps]
            metrics = run.metrics()
            strings = run.token_strings()
            groups = {k: (v, _texts(strings, v)) for k, v in run.groups.items()}
            final = run.config.get("steps")    # the file's word: a whole number, or not known
            # a resume keeps the stamp and may change only these fields; --overwrite makes a new run
            kept = {k: v for k, v in run.config.items() if k not in ("steps", "device", "threads")}
            identity = json.dumps([str(run.h5.attrs.get("created", "")), kept], sort_keys=True, default=str)
            return RunSource(_label(spec), spec, "snapshot", steps, {}, dict(run.config), dict(run.task),
                          {s: {m: np.asarray(v) for m, v in ms.items()} for s, ms in metrics.items()}, steps, groups,
                          _whole(final), identity, _whole(run.dims.get("vocab"), least=2))
    return _checkpoint_series(spec, revisions)


def _whole(v, least: int | None = None) -> int | None:
    """``v`` if it is a whole number (at least ``least``), else None: a number a file or config states."""
    return v if isinstance(v, int) and not isinstance(v, bool) and (least is None or v >= least) else None


def _texts(strings: list[str] | None, ids) -> list[str] | None:
    """The text of each token id (None without a vocabulary; '?' for an id it does not have)."""
    if strings is None:
        return None
    return [strings[i] if 0 <= i < len(strings) else "?" for i in (int(i) for i in ids)]


def _checkpoint_series(spec: str, revisions: str | None) -> RunSource:
    from ..batch import discover, left_out
    from ..readers.names import numbered_checkpoints, step_from_name

    # a folder of one training's checkpoints: the steps every probe's --step sees on it, and what it leaves out
    by_step: dict[int, str] = dict(numbered_checkpoints(spec)) if not revisions else {}
    if by_step:
        left_out(spec)
    found = [] if by_step else discover([spec], revisions)
    for i, path in enumerate(found):
        step = step_from_name(path)
        by_step.setdefault(step if step is not None else -(len(found) - i), path)   # unnamed: keep their order
    if not by_step:
        raise ProbeError(f"{spec}: no checkpoints found")
    steps = sorted(by_step)
    src = RunSource(_label(spec), spec, "checkpoints", steps, by_step)
    src.config = _config_of(by_step[steps[-1]])
    src.vocab = _whole(src.config.get("vocab_size"), least=2)
    src.curve_steps, src.curves = _trainer_log(by_step[steps[-1]])
    return src


def _config_of(path: str) -> dict:
    from ..readers.hub import is_hub, local

    folder = local(path) if is_hub(path) else path
    if not os.path.isdir(folder):
        folder = os.path.dirname(folder)
    config = os.path.join(folder, "config.json")
    if not os.path.exists(config):
        return {}
    try:   # (nested too deep: the one-line error of a run the report cannot read)
        with open_regular(config, what="checkpoint config", encoding="utf-8") as fh:
            cfg = load_json(fh, config, "checkpoint config")
        return cfg if isinstance(cfg, dict) else {}
    except (OSError, ValueError):
        return {}


def _trainer_log(path: str) -> tuple[list[int], dict]:
    """Loss curves from an HF Trainer checkpoint's ``trainer_state.json`` (its ``log_history``)."""
    state = os.path.join(path, "trainer_state.json")
    if path.startswith("hf:") or not os.path.isdir(path) or not os.path.exists(state):
        return [], {}
    try:
        with open_regular(state, what="Trainer state file", encoding="utf-8") as fh:
            log = load_json(fh, state, "Trainer state file").get("log_history", [])
    except (OSError, ValueError, AttributeError):
        return [], {}
    if not isinstance(log, list):
        return [], {}
    steps, curves = [], {}

    def number(v, kinds=(int, float)):
        return isinstance(v, kinds) and not isinstance(v, bool)

    for key, split in (("loss", "train"), ("eval_loss", "eval")):   # entries with a number at a whole step
        pts = [(e["step"], e[key]) for e in log if isinstance(e, dict) and number(e.get("step"), int)
               and number(e.get(key))]
        if pts:
            curves[split] = {"loss": np.array([v for _, v in pts], dtype=float)}
            steps = steps or [int(s) for s, _ in pts]
            if len(pts) != len(steps):   # two splits logged at different steps: keep the first only
                curves.pop(split)
    return steps, curves


def pick_steps(steps: list[int], k: int, final: int | None = None) -> list[int]:
    """At most ``k`` steps spread over training like the trainer's snapshots: log-spaced (in
    ``log(1 + step)``), so the early steps where the papers' effects begin are among them, the first
    and the last always. The picks are the snapshots nearest to k points spread up to ``final`` (the
    planned last step), so that while a run grows the earlier picks stay put and a rebuild computes
    only the newest step."""
    if len(steps) <= k:
        return list(steps)
    arr = np.asarray(steps, dtype=float)
    end = max(final or 0, int(arr[-1]))
    u = np.log1p(np.maximum(arr, 0))
    targets = np.linspace(np.log1p(max(arr[0], 0)), np.log1p(end), k)
    picked = {int(arr[np.abs(u - t).argmin()]) for t in targets if t <= u[-1] + 1e-12}
    picked |= {int(arr[0]), int(arr[-1])}
    return sorted(picked)


class Budget:
    """A CPU budget of ``share`` of one core: work may go on while this process's CPU time (imports
    included) stays under ``share`` times the wall time since the budget began."""

    def __init__(self, share: float):
        self.share, self.wall0 = share, time.monotonic()

    def allows(self) -> bool:
        return time.process_time() <= self.share * (time.monotonic() - self.wall0)


PENDING = ("still to compute: while a run trains, the report holds to its share of the CPU "
           "(probe-train --report: 1 % of a core) and fills this in at a later update")
