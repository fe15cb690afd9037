"""Train-or-reuse runs by configuration hash, N at a time (the figures, the demo, sweeps).

A run's file is ``RUNS_DIR/<label>-<hash of its whole configuration>.h5``: a finished file is
reused, an unfinished one (a killed trainer) resumed, a changed configuration gets a new file.
Each run trains in its own ``probe-train`` process, so ``jobs`` runs use ``jobs`` cores (one
torch thread each on a CPU) and a crash in one is reported, not shared.
"""
from __future__ import annotations

import contextlib
import hashlib
import importlib
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Callable, Mapping

from probe import environment
from probe.files import writer_alive
from probe.children import child_env, entry_command, entry_point, start
from probe.errors import Interrupted, ProbeError, terminal
from probe.format import last_step
from probe.jobs import TIMEOUT_S, ClusterLost, stop_wanted
from probe.jobs import run as run_jobs
from probe.signals import stop_asked, stoppable

from .config import RunConfig, preset
from .speeds import context, estimate

Log = Callable[[str], None]


def log_stderr(msg: str) -> None:
    print(terminal(msg), file=sys.stderr, flush=True)   # paths and errors quote file names


def config_hash(config: Mapping) -> str:
    """A short hash of the fields that differ from RunConfig's defaults: a field added later, at its
    default, leaves the hashes (and so the file names) of existing runs alone."""
    defaults = {f.name: f.default for f in fields(RunConfig)}
    kept = {k: v for k, v in dict(config).items() if k not in defaults or defaults[k] != v}
    return hashlib.sha256(json.dumps(kept, sort_keys=True).encode()).hexdigest()[:10]


def make_folder(path: str | os.PathLike) -> Path:
    """``path`` as a folder, created if missing; one line if it cannot be."""
    path = Path(path)
    try:
        path.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise ProbeError(f"cannot create {path}: {exc.strerror}") from None
    return path


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
    """One run to train: its label, file and ``probe-train`` arguments."""

    label: str
    path: Path
    args: list[str]
    preset: str = ""
    overrides: dict | None = None
    done_steps: int = 0      # steps already in the file (a resumed run)
    target: int = 0          # the step the run trains to (its steps, or --stop-at's step)
    members: list["Job"] = field(default_factory=list)   # an ensemble's runs, trained in this job's process
    shared: bool = False     # the folder may be another command's too: a run it trains or finished is left to it

    @property
    def seconds(self) -> float | None:
        """Estimated training time on this machine (:mod:`.speeds` measures the preset at the first
        ask); a resumed run only the steps it lacks. None: a preset for a GPU (the papers' sizes)."""
        full = estimate(self.preset, self.overrides)
        if full is None or not self.done_steps:
            return full
        return full * (1 - self.done_steps / preset(self.preset, **(self.overrides or {})).steps)

    @property
    def command(self) -> list[str]:
        """The whole command: this installation's ``probe-train`` in this interpreter."""
        return [*entry_command("probe-train"), *self.args]


def plan(wanted: Mapping[str, tuple[str, dict]], runs_dir: str | os.PathLike, *, threads: int | None = 1,
         retrain: bool = False, extra: list[str] = (), stop_at: int | None = None) -> tuple[dict[str, Path], list[Job]]:
    """(path of every run in ``wanted`` = {label: (preset, overrides)}, the jobs that are missing).

    A finished run is reused (unless ``retrain``), a started one resumed, anything else trained
    from scratch; ``threads`` sets each trainer's torch threads (None: torch's default); ``extra``:
    more ``probe-train`` arguments for every job (``--tensorboard DIR``); ``stop_at``: each run trains
    its schedule up to this step only (probe-train --stop-at), and one there (or past it) is finished.
    """
    runs_dir = Path(runs_dir)
    paths, todo = {}, []
    for label, (name, overrides) in wanted.items():
        cfg = preset(name, **overrides)
        digest = config_hash(cfg.to_dict())
        path = runs_dir / f"{label}-{digest}.h5"
        if not retrain and not path.exists():
            # the hash names the whole configuration: a finished file with it under another label
            # (a grid given in another order, a figure's run) is the same run
            path = next((p for p in sorted(runs_dir.glob(f"*-{digest}.h5")) if last_step(p) == cfg.steps), path)
        paths[label] = path
        done = None if retrain else last_step(path)
        target = min(stop_at or cfg.steps, cfg.steps)
        if done == cfg.steps or (done is not None and done >= target):
            continue
        cmd = ["--preset", name, *(_flag(k, v) for k, v in overrides.items()),
               "--quiet", "--out", str(path)]
        if target < cfg.steps:
            cmd += ["--stop-at", str(target)]
        if threads:
            cmd += ["--threads", str(threads)]
        cmd += ["--overwrite"] if done is None else ["--resume"]
        cmd += list(extra)
        todo.append(Job(label, path, cmd, name, dict(overrides), done or 0, target, shared=not retrain))
    return paths, todo


Progress = Callable[[int, int, int, int], None]   # (done, running, failed, total)


def train_jobs(todo: list[Job], jobs: int = 0, log: Log = log_stderr, *, keep_going: bool = False,
               progress: Progress | None = None, on_end: Callable[[Job, str | None], None] | None = None
               ) -> dict[str, str]:
    """Run the jobs, ``jobs`` at a time (0: one per core). A failure stops the others and is raised
    as a ProbeError with the trainer's last error line, or with ``keep_going`` is recorded and the
    rest go on; returns {label: error} of the failed runs. A stop signal (Ctrl-C, SIGTERM, SIGHUP)
    passes one SIGTERM to each running trainer (they stop at a step boundary, their files resumable),
    waits for them and raises Interrupted; a trainer whose parent dies unannounced (SIGKILL) gets
    SIGTERM and stops the same way. No trainer outlives this call. ``on_end(job, error)`` is called
    as each job ends: error None when it finished."""
    jobs = default_jobs(jobs)
    t0 = time.perf_counter()
    # one trainer per file: two jobs for one path (the same run asked for twice, its overrides in
    # another order) would have the second refused by the first's lock, or worse, replace its file
    seen: set = set()
    todo = [job for job in todo if not (job.path in seen or seen.add(job.path))]
    state = {"done": 0, "failed": {}, "running": 0}
    total = sum(len(job.members) or 1 for job in todo)
    started: dict[int, tuple] = {}   # id of a running job -> (its stderr file, its start)

    def ended(run: Job, error: str | None) -> None:
        if error is not None:
            message = f"training run '{run.label}' failed: {error}"
            if not keep_going:
                raise ProbeError(message)
            state["failed"][run.label] = error
            log(f"  {message}")
        if on_end is not None:
            on_end(run, error)

    def prepare(job: Job):
        taken = _taken(job)
        if taken == "finished":
            state["done"] += 1
            log(f"  {job.label}: another process has finished it ({state['done']}/{total})")
            ended(job, None)
            return None
        if taken == "busy":
            message = f"training run '{job.label}': another process trains {job.path} now"
            if not keep_going:
                raise ProbeError(f"{message}; wait for it or stop it")
            log(f"  {message}; left to it")
            return None
        log(f"  $ probe-train {' '.join(job.args)}" if not job.members else
            f"  $ probe-train ensemble of {len(job.members)}: {', '.join(m.label for m in job.members)}")
        # its stderr to a file, not a pipe: a child writing more than a pipe holds would block
        err = tempfile.NamedTemporaryFile("w+", prefix="probe-train-", suffix=".err")
        started[id(job)] = err, time.perf_counter()
        state["running"] += 1
        if progress:
            progress(state["done"], state["running"], len(state["failed"]), total)
        return job.args, err.name, {k: v for k, v in os.environ.items() if k != environment.PARENT}

    log(f"training {total} run(s), {jobs} at a time, into {todo[0].path.parent if todo else '.'}")
    try:
        # each trainer forked from multiprocessing's fork server, which imported the trainer once
        # (:func:`.speeds.context`: 2-3 s less per run); stopped by SIGTERM, 60 s to reach a step boundary
        with stoppable(), contextlib.closing(run_jobs(_trainer, todo, at_once=jobs, context=context() if todo else None, grace=STOP_WAIT_S,
                                                      prepare=prepare)) as ends:
            for job, code, exc in ends:
                err, start = started.pop(id(job))
                state["running"] -= 1
                code = getattr(exc, "exitcode", 1) if exc is not None else code
                for run, error in outcomes(job, code, _err_lines(err)):
                    if error is None:
                        state["done"] += 1
                        log(f"  done {run.label} in {time.perf_counter() - start:.1f} s ({state['done']}/{total})")
                    ended(run, error)
                if progress:
                    progress(state["done"], state["running"], len(state["failed"]), total)
            if stop_asked():
                raise _interrupted(state["done"], total)
    finally:
        for err, _ in started.values():   # the stopped ones'
            err.close()
    log(f"trained {state['done']} run(s) in {time.perf_counter() - t0:.0f} s"
        + (f"; {len(state['failed'])} failed" if state["failed"] else ""))
    return state["failed"]


STOP_WAIT_S = 60.0   # how long a stopped trainer has to reach its next step boundary before it is killed


def _interrupted(done: int, total: int) -> Interrupted:
    return Interrupted(f"Interrupted: {done} of {total} run(s) finished; the others stopped at a snapshot and "
                       "resume when the same command runs again")


def _err_lines(err) -> list[str]:
    """The non-empty lines a trainer wrote to its stderr file (the file closed), frames of rich's boxes stripped."""
    err.seek(0)
    lines = [ln.strip("╭╮╰╯│─ ") for ln in err.read().splitlines()]
    err.close()
    return [ln for ln in lines if ln]


def member_failed(path) -> str:
    """The line an ensemble's process writes to stderr for a member that stopped (its reason follows)."""
    return f"failed member {terminal(str(path))}: "


def outcomes(job: Job, code: int, lines: list[str]) -> list[tuple[Job, str | None]]:
    """Each run of a job whose process ended with exit ``code`` and stderr ``lines``: (run, None when it
    reached its target step, else why not). An ensemble's runs each: its file says whether it finished,
    its process which of them failed and why."""
    general = (lines[-1] if lines else "") or f"exit {code}"
    if not job.members:
        return [(job, None if code == 0 else general)]
    out = []
    for run in job.members:
        said = [ln[len(member_failed(run.path)):] for ln in lines if ln.startswith(member_failed(run.path))]
        reached = (last_step(run.path) or 0) >= run.target
        out.append((run, None if reached and not said else (said[0] if said else general)))
    return out


def _trainer(arg: tuple[list[str], str, dict]) -> int:
    """A trainer's process (:func:`probe.jobs.run`: a session of its own, SIGTERM when the queue's process
    ends): ``probe-train ARGS`` in the environment ``env``, stdout to /dev/null, stderr to the file
    ``stderr``; ``arg`` is (ARGS, stderr, env). Returns its exit code."""
    args, stderr, env = arg
    for fd, path in ((1, os.devnull), (2, stderr)):
        target = os.open(path, os.O_WRONLY)
        os.dup2(target, fd)
        os.close(target)
    os.environ.clear()
    os.environ.update(env)
    sys.argv = ["probe-train", *args]
    module, attr = entry_point("probe-train")   # the console script's function, as pyproject.toml names it
    try:
        getattr(importlib.import_module(module), attr)()   # stoppable from its first moment, as from a terminal
    except SystemExit as exc:
        return exc.code if isinstance(exc.code, int) else int(exc.code is not None)
    return 0


def _taken(job: Job) -> str | None:
    """Whether another process has ``job``'s run now (a second sweep into the same folder): ``busy`` (it
    trains it), ``finished`` (since the plan was made: an --overwrite would replace that run) or None."""
    if not job.shared or job.members:
        return None
    if writer_alive(job.path):
        return "busy"
    if job.target and (last_step(job.path) or -1) >= job.target:
        return "finished"
    return None


def ensure(wanted: Mapping[str, tuple[str, dict]], runs_dir: str | os.PathLike, *, jobs: int = 0,
           threads: int | None = 1, retrain: bool = False, log: Log = log_stderr) -> dict[str, Path]:
    """Paths of finished runs for ``wanted``, training the ones that are missing.

    A run's file is ``RUNS_DIR/<label>-<hash of its whole configuration>.h5``: a finished file is reused
    (under any label), an unfinished one (a killed trainer) resumed, a changed configuration gets a new
    file. Each run trains in its own ``probe-train`` process, ``jobs`` at a time; a stop signal (Ctrl-C)
    stops them all at a step boundary, their files resumable by the same call.

    Parameters
    ----------
    wanted : mapping of str to tuple of (str, dict)
        ``{label: (preset, overrides)}``, e.g. ``{"g08": ("quick", {"gamma": 0.8})}``.
    runs_dir : str or os.PathLike
        The folder of the run files (created if missing).
    jobs : int, default 0
        Runs trained at once (0: one per CPU core).
    threads : int or None, default 1
        Torch threads of each trainer (``None``: torch's default).
    retrain : bool, default False
        Train every run again, finished or not.
    log : callable, default: print to stderr
        Called with each progress line.

    Returns
    -------
    dict of str to pathlib.Path
        The file of each label, finished.

    Raises
    ------
    ProbeError
        The folder cannot be created, or a run failed (with the trainer's last error line).
    Interrupted
        A stop signal ended the training (the runs resume when the same call runs again).

    Examples
    --------
    >>> from probe_train.runs import ensure
    >>> paths = ensure({f"g{g}": ("quick", {"gamma": g}) for g in (0.3, 0.8)}, "runs", jobs=2)
    >>> paths["g0.8"]
    """
    runs_dir = make_folder(runs_dir)
    paths, todo = plan(wanted, runs_dir, threads=threads, retrain=retrain)
    if todo:
        train_jobs(todo, jobs, log)
    return paths


def _train_one(command: list[str]) -> tuple[int, list[str]]:
    """A Dask task: train one run (or ensemble) in a subprocess on the worker; (exit code, its last 100
    error lines). When the sweep is stopped (:func:`probe.jobs.stop_wanted`) the trainer gets SIGINT
    and stops at a step boundary; when the worker dies, SIGTERM from the kernel does the same."""
    err = tempfile.TemporaryFile("w+")
    proc = start(command, stdout=subprocess.DEVNULL, stderr=err, env=child_env(signal.SIGTERM))
    try:
        while proc.poll() is None:
            if stop_wanted(0.5):
                proc.send_signal(signal.SIGINT)
                proc.wait()
    finally:
        if proc.poll() is None:   # the task itself was stopped (the worker closing): no trainer left behind
            proc.send_signal(signal.SIGINT)
            try:
                proc.wait(timeout=60)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
    return proc.returncode, _err_lines(err)[-100:]


def train_on_dask(todo: list[Job], scheduler: str, log: Log = log_stderr, progress: Progress | None = None,
                  timeout: float = TIMEOUT_S) -> dict[str, str]:
    """Each job as one task on a Dask distributed cluster (the run files land in the shared folder
    the paths name); returns {label: error} of the failed runs. ``timeout``: seconds to reach the
    scheduler (:func:`probe.jobs.run`)."""
    failed: dict[str, str] = {}
    done = 0
    total = sum(len(job.members) or 1 for job in todo)
    tasks = {"seen": 0, "pending": 0}

    def prepare(job: Job):   # called for every job once the scheduler answered
        if not tasks["seen"]:
            log(f"training {total} run(s) on the Dask cluster at {scheduler}")
        tasks["seen"] += 1
        taken = _taken(job)
        if taken:   # another sweep into this folder has it
            log(f"  {job.label}: another process {'trains' if taken == 'busy' else 'has finished'} it; left to it")
            return None
        tasks["pending"] += 1
        return job.command

    # a stop sets the tasks' event: their trainers stop at a step boundary (120 s, or a second Ctrl-C, end the
    # wait for them), a task still queued returns at once; so the files are resumable
    ends = run_jobs(_train_one, todo, scheduler=scheduler, timeout=timeout, grace=120.0, prepare=prepare)
    with stoppable(), contextlib.closing(ends):
        try:
            for job, result, exc in ends:
                rc, lines = result if exc is None else (-1, [f"{type(exc).__name__}: {exc}"])   # a worker died
                tasks["pending"] -= 1
                for run, error in outcomes(job, rc, lines):
                    if error is None:
                        done += 1
                    else:
                        failed[run.label] = error
                        log(f"  training run '{run.label}' failed: {error}")
                if progress:
                    progress(done, tasks["pending"], len(failed), total)
        except ClusterLost as exc:   # the workers stop their trainers when they lose it too
            raise ProbeError(f"{exc}: {done} of {total} runs done; their files are kept, and the same "
                             "command on a running cluster trains the rest") from None
        if stop_asked():
            raise _interrupted(done, total)
    return failed
