"""Sweeps: a grid of configurations, each point one run (finished runs reused, killed ones resumed),
and the manifest ``sweep.json`` that says what exists. Points that differ only in seed and gamma train
together as seed ensembles (:mod:`.ensemble`), one process per ensemble."""
from __future__ import annotations

import itertools
import json
import math
import os
from dataclasses import fields
from functools import partial
from pathlib import Path
from typing import Mapping

from probe.jobs import TIMEOUT_S
from probe.files import writable_folder, writer_alive
from probe.errors import ProbeError, param
from probe.format import Run, last_step
from probe.format.run import resumable_step
from probe.format.sweep import read_manifest, write_manifest

from .config import RunConfig, preset, shape_key
from .runs import (Job, Log, Progress, cuda_available, default_jobs, log_stderr, make_folder, plan, train_jobs,
                   train_on_dask)


def parse_grid(items: list[str], preset_name: str, option: str = "grid") -> dict[str, list]:
    """``["gamma=0.3,0.5", "seed=0:5", "norm=pre,post"]`` -> {field: [values]}, each value typed like
    the RunConfig field (a range ``A:B`` is half-open, like token ranges); errors name ``--option``."""
    types = {f.name: f.type for f in fields(RunConfig)}
    base = preset(preset_name)
    grid: dict[str, list] = {}
    for item in items:
        key, sep, text = item.partition("=")
        key = key.strip().replace("-", "_")
        if not sep or not text.strip():
            raise ProbeError(f"{param(option, item)}: use field=v1,v2 or field=A:B (e.g. gamma=0.3,0.8 or seed=0:5)")
        if key not in types:
            raise ProbeError(f"{param(option, item)}: no config field '{key}' (see probe-train --help)")
        if key in grid:
            raise ProbeError(f"{param(option, item)}: '{key}' is given twice")
        kind = type(getattr(base, key))
        values: list = []
        for part in (p.strip() for p in text.split(",")):
            if not part:
                raise ProbeError(f"empty item in {param(option, item)}: remove the extra comma")
            if kind is int and ":" in part:
                lo, _, hi = part.partition(":")
                try:
                    values += list(range(int(lo), int(hi)))
                except ValueError:
                    raise ProbeError(f"{param(option, item)}: bad range '{part}'") from None
                continue
            try:
                values.append(_typed(kind, part))
            except ValueError:
                raise ProbeError(f"{param(option, item)}: '{part}' is not a {kind.__name__}") from None
        if not values:
            raise ProbeError(f"{param(option, item)}: selects no values")
        grid[key] = list(dict.fromkeys(values))
    if not grid:
        raise ProbeError(f"a sweep needs at least one {param(option)}")
    return grid


def _typed(kind: type, text: str):
    if kind is bool:
        if text.lower() in ("true", "1", "yes"):
            return True
        if text.lower() in ("false", "0", "no"):
            return False
        raise ValueError(text)
    return kind(text)


def point_label(point: Mapping) -> str:
    return "-".join(f"{k.replace('_', '')}{v}" for k, v in point.items())


def sweep(preset_name: str, grid: Mapping[str, list], out: str | os.PathLike, *, jobs: int = 0,
          scheduler: str | None = None, log: Log = log_stderr, progress: Progress | None = None,
          tensorboard: str | None = None, ensemble: bool | None = None, stop_at: int | None = None,
          scheduler_timeout: float = TIMEOUT_S) -> dict:
    """Train every grid point (finished runs reused, killed ones resumed) into ``out`` and write the
    manifest ``out/sweep.json``; a failed run is recorded there with its error, the others go on.

    ``ensemble``: points that differ only in seed and gamma train as seed ensembles
    (:func:`ensemble_jobs`), each run still its own file; False: one process per run; None: ensembles
    where CUDA is (a Dask cluster's workers taken to be like this machine), one process per run on a
    CPU, where the batched matmuls cost more than one process a run (bench/bench_ensemble.py). ``stop_at``: each
    run trains its schedule up to this step (probe-train --stop-at); the same sweep without it trains
    them on to their steps. ``scheduler_timeout``: seconds to reach ``scheduler``, as many again for its
    answer.

    ``tensorboard``: every run's logged numbers as TensorBoard scalars in ``tensorboard/<run file's stem>``,
    written by each trainer as it goes (``probe-train --tensorboard``); the runs reused from an earlier
    sweep, and what a trainer on another machine could not write, are filled in from their files at
    the end (a folder only grows: nothing is written twice)."""
    out = make_folder(out)
    writable_folder(out, "runs")   # before any training: a read-only folder fails now, in one line
    points = [dict(zip(grid, combo)) for combo in itertools.product(*grid.values())]
    wanted = {point_label(p): (preset_name, p) for p in points}
    for label, (name, p) in wanted.items():   # every configuration is checked before anything trains
        preset(name, **p)
    if tensorboard is not None:
        from probe.format import tensorboard as tb

        tb.require()
        tensorboard = tb.prepare(tensorboard)
    paths, todo = plan(wanted, out, threads=1, extra=["--tensorboard", tensorboard] if tensorboard else [],
                       stop_at=stop_at)
    gpu = cuda_available()
    if (gpu if ensemble is None else ensemble) and not tensorboard:   # an ensemble writes no TensorBoard events
        todo = ensemble_jobs(todo, 0 if scheduler or gpu else default_jobs(jobs))
    failed: dict[str, str] = {}
    try:
        if todo and scheduler:
            failed = train_on_dask(todo, scheduler, log, progress, scheduler_timeout)
        elif todo:
            failed = train_jobs(todo, jobs, log, keep_going=True, progress=progress)
    finally:   # the manifest says what exists, also after Ctrl-C
        def status(label):
            done = last_step(paths[label])
            cfg = preset(wanted[label][0], **wanted[label][1])
            if done == cfg.steps:   # whoever trained it: this sweep, or another one into this folder
                return {"status": "done"}
            # refused because another process took the run first: that one's, not a failure
            if label in failed and not writer_alive(paths[label]):
                return {"status": "failed", "error": failed[label]}
            return {"status": "partial" if done is not None else "missing"}

        write_manifest(out, preset_name, grid, [{"label": label, "point": p, "path": paths[label].name,
                                                 **status(label)} for label, (_, p) in wanted.items()])
    if tensorboard:
        _tensorboard_backfill(tensorboard, [(paths[label], preset(name, **p)) for label, (name, p) in wanted.items()
                                            if label not in failed])
    return read_manifest(out)[1]


def _tensorboard_backfill(folder: str, runs: list[tuple[Path, object]]) -> None:
    """What each run's file holds and ``folder/<stem>`` lacks (a run reused from an earlier sweep, a
    trainer that wrote its events elsewhere): the folder only grows, so a trainer's own points stay."""
    from probe.format import tensorboard as tb

    from .trainer import lr_at

    for path, cfg in runs:   # (run file, its RunConfig)
        if last_step(path) is None:
            continue
        with tb.Events(os.path.join(folder, Path(path).stem)) as events:
            tb.add_run(events, path, partial(lr_at, cfg))


def ensemble_jobs(todo: list[Job], processes: int = 0) -> list[Job]:
    """The jobs, those that differ only in seed and gamma (and start from the same step) grouped into
    seed ensembles, each one job whose process trains its runs as one batched model (``probe-train
    ensemble``). ``processes``: split each group into this many ensembles, one per CPU core (a CPU trains
    K members in one process about as fast as one by one, bench/bench_ensemble.py); 0: one ensemble per
    group (a GPU, or a Dask cluster's workers)."""
    groups: dict[str, list[Job]] = {}
    for job in todo:
        # members start together: from the same resume slot (a writer killed inside a snapshot leaves its
        # newest step without one), or all afresh
        start = _resumable(job.path) if "--resume" in job.args else None
        key = [job.preset, shape_key(preset(job.preset, **job.overrides)), start, job.target]
        groups.setdefault(json.dumps(key, sort_keys=True), []).append(job)
    out = []
    for runs in groups.values():
        size = math.ceil(len(runs) / max(1, min(processes, len(runs)))) if processes else len(runs)
        for i in range(0, len(runs), size):
            chunk = runs[i:i + size]
            out.append(chunk[0] if len(chunk) == 1 else _ensemble(chunk))
    return out


def _resumable(path) -> int | None:
    """The step a resume of ``path`` starts from (None: it starts afresh)."""
    try:
        with Run(path) as run:
            return resumable_step(run)
    except ProbeError:   # unreadable: the trainer says why, in the ensemble's own words
        return None


def _ensemble(runs: list[Job]) -> Job:
    """One job for ``runs``: probe-train ensemble with each member's preset, overrides, file and mode."""
    spec = {"members": [{"preset": r.preset, "overrides": {**r.overrides, "threads": 1}, "out": str(r.path),
                         "resume": "--resume" in r.args} for r in runs],
            "stop_at": runs[0].target}
    return Job(f"ensemble of {len(runs)}", runs[0].path, ["ensemble", json.dumps(spec)], runs[0].preset,
               target=runs[0].target, members=runs)
