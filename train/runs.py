"""Train-or-reuse runs by configuration hash, N at a time (the figures, the demo, sweeps).

A run's file is ``RUNS_DIR/<label>-<hash of its whole configuration>.h5``: a finished file is
reused, an unfinished one (a killed trainer) resumed, a changed configuration gets a new file.
Each run trains in its own ``probe-train`` process, so ``jobs`` runs use ``jobs`` cores (one
torch thread each on a CPU) and a crash in one is reported, not shared.
"""
from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Mapping

from probe.errors import SIGINT, Interrupted, ProbeError
from probe.format import last_step

from .config import preset

Log = Callable[[str], None]


def _stderr(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


def config_hash(config: Mapping) -> str:
    return hashlib.sha256(json.dumps(dict(config), sort_keys=True).encode()).hexdigest()[:10]


def run_finished(path: str | os.PathLike, steps: int) -> bool:
    return last_step(path) == steps


def cuda_available() -> bool:
    try:
        import torch

        return torch.cuda.is_available()
    except ImportError:
        return False


def default_jobs(jobs: int = 0) -> int:
    """``jobs``, or with 0 one per CPU core."""
    return jobs if jobs > 0 else max(1, os.cpu_count() or 1)


def _flag(name: str, value) -> str:
    name = name.replace("_", "-")
    if isinstance(value, bool):
        return f"--{name}" if value else f"--no-{name}"
    return f"--{name}={value}"


@dataclass
class Job:
    """One run to train: its label, file and ``probe-train`` command."""

    label: str
    path: Path
    command: list[str]


def plan(wanted: Mapping[str, tuple[str, dict]], runs_dir: str | os.PathLike, *, threads: int | None = 1,
         retrain: bool = False) -> tuple[dict[str, Path], list[Job]]:
    """(path of every run in ``wanted`` = {label: (preset, overrides)}, the jobs that are missing).

    A finished run is reused (unless ``retrain``), a started one resumed, anything else trained
    from scratch; ``threads`` sets each trainer's torch threads (None: torch's default).
    """
    runs_dir = Path(runs_dir)
    paths, todo = {}, []
    for label, (name, overrides) in wanted.items():
        cfg = preset(name, **overrides)
        path = runs_dir / f"{label}-{config_hash(cfg.to_dict())}.h5"
        paths[label] = path
        done = None if retrain else last_step(path)
        if done == cfg.steps:
            continue
        cmd = [sys.executable, "-m", "train", "--preset", name, *(_flag(k, v) for k, v in overrides.items()),
               "--quiet", "--out", str(path)]
        if threads:
            cmd += ["--threads", str(threads)]
        cmd += ["--overwrite"] if done is None else ["--resume"]
        todo.append(Job(label, path, cmd))
    return paths, todo


def train_jobs(todo: list[Job], jobs: int = 0, log: Log = _stderr) -> None:
    """Run the jobs, ``jobs`` at a time (0: one per core); the first failure stops the others and
    is raised as a ProbeError with the trainer's last error line. Ctrl-C passes one SIGINT to each
    running trainer (they stop at a step boundary, their files resumable) and raises Interrupted."""
    jobs = default_jobs(jobs)
    t0 = time.perf_counter()
    queue = list(todo)
    running: list[tuple[Job, subprocess.Popen, object]] = []
    finished = 0
    log(f"training {len(todo)} run(s), {jobs} at a time, into {todo[0].path.parent if todo else '.'}")
    with SIGINT.caught():
        try:
            finished = _loop(queue, running, jobs, log)
        finally:
            if SIGINT.asked:
                _stop(running)
            for _, proc, _ in running:
                if proc.poll() is None:
                    proc.terminate()
        if SIGINT.asked:
            raise Interrupted(f"Interrupted: {finished} of {len(todo)} run(s) finished; the others stopped at a "
                              "snapshot and resume when the same command runs again")
    log(f"trained {len(todo)} run(s) in {time.perf_counter() - t0:.0f} s")


def _stop(running, wait_s: float = 30.0) -> None:
    """One SIGINT to each trainer, then wait for them to stop at their next step boundary."""
    import signal

    for _, proc, _ in running:
        if proc.poll() is None:
            proc.send_signal(signal.SIGINT)
    deadline = time.time() + wait_s
    for _, proc, _ in running:
        try:
            proc.wait(timeout=max(0.1, deadline - time.time()))
        except subprocess.TimeoutExpired:
            proc.terminate()


def _loop(queue: list[Job], running: list, jobs: int, log: Log) -> int:
    finished = 0
    while (queue or running) and not SIGINT.asked:
        while queue and len(running) < jobs:
            job = queue.pop(0)
            log(f"  $ probe-train {' '.join(job.command[3:])}")
            # stderr to a file, not a pipe: a child writing more than the pipe holds would block; a
            # session of its own: a terminal's Ctrl-C reaches the trainer once, from us
            err = tempfile.TemporaryFile("w+")
            running.append((job, subprocess.Popen(job.command, stdout=subprocess.DEVNULL, stderr=err,
                                                  start_new_session=True), err))
        for item in list(running):
            job, proc, err = item
            if proc.poll() is None:
                continue
            running.remove(item)
            err.seek(0)
            lines = [ln.strip("╭╮╰╯│─ ") for ln in err.read().splitlines()]
            lines = [ln for ln in lines if ln]
            err.close()
            if proc.returncode != 0:
                raise ProbeError(f"training run '{job.label}' failed: {lines[-1] if lines else proc.returncode}")
            finished += 1
        time.sleep(0.2)
    return finished


def ensure(wanted: Mapping[str, tuple[str, dict]], runs_dir: str | os.PathLike, *, jobs: int = 0,
           threads: int | None = 1, retrain: bool = False, log: Log = _stderr) -> dict[str, Path]:
    """Paths of finished runs for ``wanted`` = {label: (preset, overrides)}, training what is missing."""
    runs_dir = Path(runs_dir)
    try:
        runs_dir.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise ProbeError(f"cannot create {runs_dir}: {exc.strerror}") from None
    paths, todo = plan(wanted, runs_dir, threads=threads, retrain=retrain)
    if todo:
        train_jobs(todo, jobs, log)
    return paths
